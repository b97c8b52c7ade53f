"""A program with an escape hatch of each direction: allow_in_graph keeps a
call that breaks in the graph, disable keeps one out (tests/test_hatches.py
reads the recording with SQL and the report, tests/test_dyntop.py with
dyntop)."""
import numpy as np
import dynscope


def scale(a, b):
    print("scale")                    # traced, a break
    return a * 2 + b


def noisy(x):
    print("noisy")                    # traced, a break
    return x


dynscope.allow_in_graph(scale)
quiet = dynscope.disable(noisy)


@dynscope.optimize("eager")
def kept_in(x, y):
    return np.sin(scale(np.cos(x), y))


@dynscope.optimize("eager")
def kept_out(x):
    return quiet(np.sin(x)) + 1


for k in range(3):
    kept_in(np.arange(4.0) + k, np.ones(4))
    kept_out(np.arange(4.0) + k)
