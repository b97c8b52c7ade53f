"""A function guarded on a string argument, called with the tokens given on
the command line, the first one twice (tests/test_redact.py plants a secret
there and greps every output for it)."""
import sys

import numpy as np
import dynscope


@dynscope.optimize("eager", dynamic=False)
def scale(x, token):
    if token.startswith("sk-live"):
        return x * 2
    return x * 3


for t in sys.argv[1:] + sys.argv[1:2]:
    scale(np.ones(3), t)
