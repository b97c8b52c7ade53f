"""torch cache hits: what a hit adds over eager for dynscope and for
TorchDynamo (torch.compile, backend="eager"), side by side in one process
with interleaved rounds.

    make bench                          # runs every scripts/bench_*.py (skips without torch)
    .venv/bin/python scripts/bench_torch_hit.py [--rounds 9] [--calls 20000] [--no-doc]
    .venv/bin/python scripts/bench_torch_hit.py --quick  # 200 calls, 1 round: ~5 s (compiles)

Cases: a 3-tensor function (x * y + z on 4x8 float32) and a small nn.Module
(Linear-ReLU-Linear, its 4 parameters guarded).  The table shows the median
ns per call and each system's overhead over eager; the target for the
3-tensor function is dynscope's overhead at most 1/20 of Dynamo's.  Written
to docs/performance.md between <!-- bench_torch_hit:start --> and
<!-- bench_torch_hit:end -->.
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

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)

import perfdoc  # noqa: E402

DOC = os.path.join(ROOT, "docs", "performance.md")
START = "<!-- bench_torch_hit:start -->"
END = "<!-- bench_torch_hit:end -->"


def mul_add(x, y, z):
    return x * y + z


def loop(fn, args, n):
    t0 = time.perf_counter_ns()
    for _ in range(n):
        fn(*args)
    return (time.perf_counter_ns() - t0) / n


def measure(rounds, calls):
    import torch
    import torch.nn as nn

    import dynscope
    from dynscope import _C

    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    cases = [("x * y + z, three 4x8 float32 tensors", mul_add,
              tuple(torch.randn(4, 8) for _ in range(3))),
             ("nn.Sequential(Linear, ReLU, Linear), 4x8 input", mlp, (torch.randn(4, 8),))]
    rows = []
    for name, fn, args in cases:
        ds = dynscope.optimize("eager")(fn)
        dy = torch.compile(fn, backend="eager", dynamic=False)
        for f in (fn, ds, dy, ds, dy):
            f(*args)                                   # compile, then warm
        samples = {"eager": [], "dynscope": [], "dynamo": []}
        misses = _C.counters()["misses"]
        gc.disable()
        try:
            for _ in range(rounds):
                for key, f in (("eager", fn), ("dynscope", ds), ("dynamo", dy)):
                    samples[key].append(loop(f, args, calls))
        finally:
            gc.enable()
        # every timed dynscope call must have been a hit, else the row is not one
        misses = _C.counters()["misses"] - misses
        if misses:
            raise SystemExit(f"bench_torch_hit: {name}: {misses} cache misses in the timed "
                             "loops, expected only hits")
        med = {k: statistics.median(v) for k, v in samples.items()}
        rows.append((name, med))
        torch._dynamo.reset()
    return rows


def render(rows, rounds, calls):
    import torch
    lines = [START, "## torch cache hits next to Dynamo (`scripts/bench_torch_hit.py`)", "",
             f"Median ns per call over {rounds} interleaved rounds of {calls} calls; "
             "Dynamo is `torch.compile(fn, backend=\"eager\", dynamic=False)`.  Target: "
             "dynscope's overhead on the 3-tensor function at most 1/20 of Dynamo's.", "",
             "```", ".venv/bin/python scripts/bench_torch_hit.py", "```", "",
             "| case | eager | dynscope | Dynamo | dynscope over eager | Dynamo over eager | ratio of overheads |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for name, m in rows:
        ds, dy = m["dynscope"] - m["eager"], m["dynamo"] - m["eager"]
        ratio = f"{ds / dy:.3f} (1/{dy / ds:.0f})" if ds and dy else "n/a"   # (a noisy zero)
        lines.append(f"| {name} | {m['eager']:.0f} | {m['dynscope']:.0f} | {m['dynamo']:.0f} | "
                     f"{ds:+.0f} | {dy:+.0f} | {ratio} |")
    lines += ["", "A torch TENSOR_MATCH that passes is decided by torch's own C++ tensor "
              "check (`torch._C._dynamo.guards.TensorGuards`): the tensors a guard set reads "
              "from fast locals in one call, others one call each; only a check that fails "
              "reads the metadata through the Python API, to decide and to say which part "
              "differs.  A module's parameters are reached through its dicts, read again only "
              "when a dict's version changed.",
              "", f"Measured {datetime.date.today()} on {perfdoc.cpu_model()}, CPython "
              f"{platform.python_version()}, torch {torch.__version__}.", END, ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--no-doc", action="store_true")
    args = perfdoc.parse_args(ap, argv, quick={"rounds": 1, "calls": 200})
    try:
        import torch  # noqa: F401
    except ImportError:
        print("bench_torch_hit: torch is not installed here; skipped")
        return 0
    rows = measure(args.rounds, args.calls)
    text = render(rows, args.rounds, args.calls)
    print(text)
    if not args.no_doc:
        perfdoc.write_section(DOC, START, END, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
