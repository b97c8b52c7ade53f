"""A function captured on its own that recompiles three times in one call:
the third call's inputs are nearest to the first entry, not the newest
(tests/test_explain.py's golden report, test_record's nearest-entry rows)."""
import numpy as np


def normalize(x, mode):
    print(end="")                      # a break: normalize is a frame of its own
    if mode == "mean":
        return x - x.mean()
    return x / x.max()


def f(x):
    a = normalize(x, "mean")                        # entry 0/0
    b = normalize(x.astype(np.float32), "mean")     # dtype differs: 0/1
    c = normalize(x, "max")                         # only mode differs from 0/0
    return a, b, c
