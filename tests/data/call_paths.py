"""One function reached by two call paths, compiled 3 times through one and
once through the other (tests/test_call_paths.py and tests/test_dyntop.py
read its stack trie)."""
import numpy as np
import dynscope


@dynscope.optimize("eager", dynamic=False)
def leaf(x):
    return np.sin(x) + 1


def middle(x, k):
    return leaf(x * k)


def step(n):
    for k in range(n):
        middle(np.ones(3 + k), k)              # a new shape each time: 3 compiles


def main():
    step(3)
    middle(np.ones(2), 1)                      # a fourth shape, from another line


main()
