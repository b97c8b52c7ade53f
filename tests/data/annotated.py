"""A loop that marks its epochs and steps (tests/test_annotate.py): two
epochs as spans, three steps each as marks, a compile in every step of the
first epoch (a new length), and a span left by an exception."""
import numpy as np
import dynscope


@dynscope.optimize("eager", dynamic=False)
def f(x):
    return np.sin(x) * 2


for epoch in range(2):
    with dynscope.annotate_span("epoch", n=epoch):
        for step in range(3):
            dynscope.annotate("step", n=step, lr=0.1, shape=(3 + step,))
            f(np.ones(3 + step))
try:
    with dynscope.annotate_span("eval"):
        raise KeyError("no such split")
except KeyError:
    pass
