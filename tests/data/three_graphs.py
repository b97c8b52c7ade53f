"""A reproducer with three graphs and two breaks (used by test_explain)."""
import numpy as np


def f(x):
    a = np.maximum(x, 0)
    print(a.shape)
    b = a * 2
    if a.sum() > 0:
        return b + 1
    return b - 1


def repro():
    return f(np.arange(-2.0, 3.0))
