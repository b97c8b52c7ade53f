"""A small NumPy "model" loop with what makes capture engines recompile and
break: a data-dependent branch, a print, a batch size and numbers that
change (automatic dynamic makes them graph inputs after one recompile),
and a function whose argument sets a loop count, which recompiles every
step until it hits its cache limit.

Run it under dynscope:   python -m dynscope run --db dynscope.db scripts/demo_workload.py
or import and call main(): scripts/demo.py does.  As one rank of a job
(scripts/demo_ranks.py, `make demo-ranks`), the rank named by
$DYNSCOPE_DEMO_DIVERGE feeds float64 once: forward recompiles there only.
"""
import os

import numpy as np

import dynscope

rng = np.random.default_rng(0)
W1 = rng.standard_normal((16, 32)).astype(np.float32)
W2 = rng.standard_normal((32, 4)).astype(np.float32)


def relu(x):
    return np.maximum(x, 0)


@dynscope.optimize("eager")
def forward(x):
    h = relu(x @ W1)
    y = h @ W2
    if y.sum() < 0:            # a branch on a tensor value: a graph break
        y = -y
    return y


@dynscope.optimize("eager")
def loss(y, target):
    d = y - target
    return (d * d).mean()


@dynscope.optimize("eager")
def log_step(step, value):
    print(f"step {step:3d}  loss {value:.4f}")   # print: a graph break
    return value


@dynscope.optimize("eager")
def scale(x, factor):
    return x * factor          # factor changes each call: one recompile, then a graph input


@dynscope.optimize("eager")
def smooth(x, n):
    for _ in range(n):         # n sets the loop count: each new n recompiles, until the limit
        x = 0.5 * (x + x.mean())
    return x.sum()


def main(steps=40, verbose=True):
    total = 0.0
    diverge = os.environ.get("RANK") is not None and os.environ.get("RANK") == os.environ.get(
        "DYNSCOPE_DEMO_DIVERGE")
    for step in range(steps):
        batch = 8 if step < steps // 2 else 12          # a size change: one recompile, then dynamic
        x = rng.standard_normal((batch, 16)).astype(np.float32)
        if diverge and step == steps - 5:
            x = x.astype(np.float64)                    # one rank's dtype differs: it recompiles
        t = rng.standard_normal((batch, 4)).astype(np.float32)
        y = forward(x)
        value = float(loss(y, t))
        if verbose and step % 10 == 0:
            log_step(step, value)
        total += float(scale(np.array([value]), step % 12).sum())
        total += float(smooth(x, 1 + step % 12))
    return total


if __name__ == "__main__":
    main()
