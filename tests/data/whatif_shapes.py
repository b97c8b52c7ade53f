"""A function called with a new length each time (tests/test_whatif.py):
WHATIF_MODE=static compiles it with dynamic=False, auto with the default
(automatic dynamic), dynamic with dynamic=True, marked marks the first
input's dimension 0 dynamic before the first call."""
import os

import numpy as np
import dynscope

MODE = os.environ.get("WHATIF_MODE", "static")


def smooth(x):
    return np.tanh(x) * 2 + x.mean()


opt = dynscope.optimize("eager", dynamic={"static": False, "dynamic": True}.get(MODE))(smooth)
for n in range(3, 11):
    x = np.linspace(0.0, 1.0, n)
    if MODE == "marked" and n == 3:
        dynscope.mark_dynamic(x, 0)
    opt(x)
