"""A library-like package for tests/test_breaks_registry.py: the test
installs it into the venv's site-packages for the duration of the test, so
breaks inside it are breaks in installed code ("library code")."""
import numpy as np


def _log(msg):
    print(end="")                       # a library that logs: a print in installed code


def normalize(x):
    _log("normalize")
    return x / (np.abs(x).max() + 1.0)


def scaled(x, i):
    s = float(x.sum())                  # a value leaves the graph, inside the library
    return x * 0.0 + s * 0.001 * i


class _Settings:
    def __getattribute__(self, name):   # attribute lookups run Python: an engine limit here
        return object.__getattribute__(self, name)


SETTINGS = _Settings()
SETTINGS.k = 3.0


def engine_limited(x):
    return x * SETTINGS.k
