"""Many graph breaks at few sites (tests/test_breaks_registry.py's golden
explain report): a loop over steps that each break in the same places --
in installed code (dynscope_corpus_lib, put into site-packages by the
test), in this file, and at an engine limit."""
import numpy as np

import dynscope_corpus_lib as lib


class Config:
    def __getattribute__(self, name):   # attribute lookups run Python: an engine limit
        return object.__getattribute__(self, name)


CFG = Config()
CFG.k = 2.0


def step(x, i):
    y = lib.normalize(x)
    if i % 3 == 0:
        print(end="")                   # your code: a print
    return y * CFG.k + lib.scaled(y, i)


def f(x):
    for i in range(12):
        x = step(x, i)
    return x
