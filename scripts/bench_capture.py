"""Capture cost: the time of a first call (translation, guards, the backend,
running the graph once) and the memory one cache entry keeps, for NumPy
functions of a few sizes of graph.

    make bench                          # runs every scripts/bench_*.py
    .venv/bin/python scripts/bench_capture.py [--copies 200] [--no-doc]
    .venv/bin/python scripts/bench_capture.py --quick     # every case, 5 copies: < 1 s
    PYTHONPATH=OTHER_TREE .venv/bin/python scripts/bench_capture.py --no-doc   # compare a build

Each case is compiled --copies times, each copy its own code object (the
function's code with another name), so every first call really compiles.
Time: the median first call.  Memory: what tracemalloc sees allocated and
still held after all copies compiled, divided by the copies (Python objects
and PyMem allocations; NumPy's data buffers of example values too).
Written to docs/performance.md between <!-- bench_capture:start --> and
<!-- bench_capture:end -->.
"""
from __future__ import annotations

import argparse
import datetime
import gc
import os
import platform
import statistics
import sys
import time
import tracemalloc
import types

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
if "PYTHONPATH" not in os.environ:
    sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402

import dynscope  # noqa: E402
import perfdoc  # noqa: E402
from dynscope import _C  # noqa: E402

DOC = os.path.join(ROOT, "docs", "performance.md")
START = "<!-- bench_capture:start -->"
END = "<!-- bench_capture:end -->"


def add2(a, b):
    return a + b


def chain8(a, b):
    return (a * b - 2.0) / (np.abs(a) + 1.0) + np.sqrt(np.abs(b))


def mlp_step(x, w1, w2):
    h = np.maximum(x @ w1, 0.0)
    y = h @ w2
    e = y - 1.0
    return (e * e).mean(), h.sum(axis=0)


CASES = [
    ("add2 (1 op)", add2, lambda: (np.ones(16), np.ones(16))),
    ("chain of 8", chain8, lambda: (np.ones(1000), np.ones(1000))),
    ("mlp step (9 ops, 2 outputs)", mlp_step,
     lambda: (np.ones((8, 16)), np.ones((16, 32)), np.ones((32, 4)))),
]


def copies_of(fn, n):
    """n functions with fn's body, each with its own code object."""
    return [types.FunctionType(fn.__code__.replace(co_name=f"{fn.__name__}_{i}"),
                               fn.__globals__, f"{fn.__name__}_{i}") for i in range(n)]


def measure(copies: int):
    rows = []
    dynscope.reset()
    for name, fn, make_args in CASES:
        args = make_args()
        plain = copies_of(fn, copies)
        fns = [dynscope.optimize("eager")(f) for f in plain]
        times = []
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        for f in fns:
            t0 = time.perf_counter_ns()
            f(*args)
            times.append(time.perf_counter_ns() - t0)
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        # Each first call must have compiled one entry, else the times are not
        # first calls (a copy sharing a cache, a call that ran eagerly).
        compiles = _C.counters()["compiles"]
        entries = sum(len(dynscope.cache_entries(f)) for f in plain)
        if compiles != copies or entries != copies:
            raise SystemExit(f"bench_capture: {name}: {copies} first calls made {compiles} "
                             f"compiles and {entries} cache entries, expected {copies} of each")
        rows.append((name, statistics.median(times) / 1e3, (after - before) / entries / 1024))
        dynscope.reset()
    return rows


def render(rows, copies):
    lines = [START, "## Capture cost (`scripts/bench_capture.py`)", "",
             f"First call of a new function (median of {copies} copies, each its own "
             "code object) and the memory one cache entry keeps (tracemalloc, after "
             "all copies compiled).", "",
             "```", ".venv/bin/python scripts/bench_capture.py", "```", "",
             "| case | first call, µs | KiB per entry |", "|---|---:|---:|"]
    lines += [f"| {n} | {t:.0f} | {m:.1f} |" for n, t, m in rows]
    lines += ["", f"Measured {datetime.date.today()} on {perfdoc.cpu_model()}, "
              f"CPython {platform.python_version()}, NumPy {np.__version__}.", END, ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--copies", type=int, default=200)
    ap.add_argument("--no-doc", action="store_true")
    args = perfdoc.parse_args(ap, argv, quick={"copies": 5})
    rows = measure(args.copies)
    text = render(rows, args.copies)
    print(text)
    if not args.no_doc:
        perfdoc.write_section(DOC, START, END, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
