"""Break cost, measured against its removal (issue 42): is the cost dynscope
records for a graph break what the program would save without it?

For each case, one function in three variants, each captured with
optimize("eager"): with both of its breaks, and with each break removed.
  * measured: the recording of the first variant (sampled, 1 call in 64),
    `break_costs.cost_ns / calls` per site;
  * saved: per-call time with both breaks less the time without that one,
    medians of interleaved rounds, recording off.
The break with the largest measured cost must be the one whose removal
saves most, and its measured cost within 20% of that saving.

    make bench                                   # runs every scripts/bench_*.py
    .venv/bin/python scripts/bench_break_cost.py [--rounds 15] [--calls 2000] [--no-doc]
    .venv/bin/python scripts/bench_break_cost.py --quick   # every case, small

Cases: `numpy` (a print and a call to a dynscope.disable'd logger between
elementwise chains), and `gpt2` (the zoo's tiny GPT-2, tests/models, with a
print forced into each block's forward; skipped without torch and
transformers).  Results go to stdout and to docs/performance.md, replacing
the section between <!-- bench_break_cost:start --> and
<!-- bench_break_cost:end -->.
"""
from __future__ import annotations

import argparse
import datetime
import io
import os
import platform
import sqlite3
import statistics
import sys
import tempfile
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests"))

import numpy as np  # noqa: E402

import dynscope  # noqa: E402

sys.path.insert(0, HERE)
import perfdoc  # noqa: E402

DOC = os.path.join(ROOT, "docs", "performance.md")
START = "<!-- bench_break_cost:start -->"
END = "<!-- bench_break_cost:end -->"
SINK = io.StringIO()


@dynscope.disable
def log_stats(y):
    """An eager helper a step calls: what a training loop logs."""
    SINK.write("min %.4f max %.4f mean %.4f\n" % (float(y.min()), float(y.max()), float(y.mean())))


NUMPY_STEP = '''
def step(x):
    y = np.tanh(x) * 0.5 + 0.25
    print("step", file=SINK)                                  # BREAK print
    z = np.exp(-y) + y * y
    log_stats(z)                                              # BREAK log_stats
    return np.sqrt(z) - 0.5
'''


def numpy_variants():
    """({variant: (prepare, fn)}, args): the variant with every break
    ("both") and one without each break, by the break's name."""
    variants = {}
    for drop in (None, "print", "log_stats"):
        src = "\n".join(line for line in NUMPY_STEP.splitlines()
                        if drop is None or not line.endswith("# BREAK " + drop))
        ns = {"np": np, "SINK": SINK, "log_stats": log_stats}
        exec(compile(src, "<bench_break_cost numpy>", "exec"), ns)
        variants[drop or "both"] = (lambda: None, dynscope.optimize("eager")(ns["step"]))
    return variants, (np.linspace(-1, 1, 20_000),)


def gpt2_variants():
    """The zoo's GPT-2 with a print at the start of every block's forward
    (GPT2Block.forward replaced by a wrapper that prints, then calls it),
    and without (the class's own forward back)."""
    import torch
    from models import gpt2
    torch.manual_seed(0)
    model, args, _ = gpt2()
    model.eval()
    block_type = type(model.transformer.h[0])
    original = block_type.forward

    def printing(self, *a, **k):
        print("block", file=SINK)
        return original(self, *a, **k)

    def call(ids):
        with torch.no_grad():
            return model(ids).logits
    captured = dynscope.optimize("eager")(call)

    def variant(forward):
        def prepare():
            block_type.forward = forward
        return prepare, captured
    return {"both": variant(printing), "print": variant(original)}, args


def per_call_ns(variant, args, calls):
    prepare, fn = variant
    prepare()
    t0 = time.perf_counter_ns()
    for _ in range(calls):
        fn(*args)
    return (time.perf_counter_ns() - t0) / calls


def recorded_costs(variants, args, calls, tmp, case):
    """Compile every variant under recording (the compiles make the
    graph_breaks rows), run the one with every break `calls` times, and
    return break_costs' rows of it, the costliest first."""
    db = os.path.join(tmp, case + ".db")
    dynscope.record(db)
    try:
        for name in variants:
            per_call_ns(variants[name], args, 3)
        per_call_ns(variants["both"], args, calls)
    finally:
        dynscope.stop_recording()
    con = sqlite3.connect(db)
    rows = con.execute("SELECT reason, filename, lineno, calls, cost_ns, samples, function_ns "
                       "FROM break_costs WHERE calls > 0 ORDER BY cost_ns DESC").fetchall()
    con.close()
    return rows


def site_name(reason):
    return "log_stats" if "log_stats" in reason else "print" if "print" in reason else reason


def measure_case(case, variants, args, rounds, calls, tmp):
    rows = recorded_costs(variants, args, calls, tmp, case)
    times = {name: [] for name in [*variants, "recorded"]}
    db = os.path.join(tmp, case + "-rounds.db")
    for r in range(rounds):
        order = list(variants) if r % 2 == 0 else list(reversed(variants))
        for name in order:
            times[name].append(per_call_ns(variants[name], args, calls))
        # the variant with every break again, recording (so timing 1 call in 64)
        dynscope.record(db)
        try:
            times["recorded"].append(per_call_ns(variants["both"], args, calls))
        finally:
            dynscope.stop_recording()
    med = {name: statistics.median(t) for name, t in times.items()}
    # a site's cost per call of the function: summed over the frames it
    # breaks (a print three frames deep breaks each; each frame's span is
    # its own, callees' left out), over the calls the recording made
    sites = {}
    for reason, _file, _line, _ncalls, cost, samples, fn_ns in rows:
        s = sites.setdefault(site_name(reason), {"cost": 0.0, "samples": 0, "fn": 0})
        s["cost"] += cost / (calls + 3)
        s["samples"] += samples
        s["fn"] = max(s["fn"], (fn_ns or 0) / (calls + 3))    # the outermost frame's
    out = []
    for name, s in sorted(sites.items(), key=lambda kv: -kv[1]["cost"]):
        saved = med["both"] - med[name] if name in med else None
        out.append((name, s["cost"], saved, s["samples"], s["cost"] / s["fn"] if s["fn"] else None))
    return out, med


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--calls", type=int, default=2000, help="calls per timed loop")
    ap.add_argument("--no-doc", action="store_true")
    args = perfdoc.parse_args(ap, argv, quick={"rounds": 2, "calls": 128})
    warnings.simplefilter("ignore")
    t_start = time.monotonic()
    cases = [("numpy", numpy_variants, args.calls)]
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
        cases.append(("gpt2", gpt2_variants, max(64, args.calls // 10)))
    except ImportError:
        pass
    lines = [START, "## Break cost against its removal (`scripts/bench_break_cost.py`)", "",
             f"{datetime.date.today().isoformat()}, {perfdoc.cpu_model()}, Python "
             f"{platform.python_version()}, engine {perfdoc.engine_revision(ROOT)}; "
             f"{args.rounds} interleaved rounds per variant, medians.  *measured*: "
             "`break_costs.cost_ns / calls` of a recording of the variant with every break "
             "(1 call in 64 timed); *saved*: per-call time with every break less the time "
             "with that break removed, recording off.", "",
             "| case | break (costliest first) | measured per call | saved by removing it "
             "| measured / saved | share of the function | timed calls |",
             "|---|---|---|---|---|---|---|"]
    verdicts = []
    with tempfile.TemporaryDirectory() as tmp:
        for case, build, calls in cases:
            variants, fargs = build()
            rows, med = measure_case(case, variants, fargs, args.rounds, calls, tmp)
            if not rows:
                raise SystemExit(f"bench_break_cost: {case}: the recording has no break costs")
            for i, (name, cost, saved, samples, share) in enumerate(rows):
                ratio = cost / saved if saved and saved > 0 else None
                lines.append(
                    f"| `{case}` | {name} | {cost / 1000:.2f} us | "
                    + (f"{saved / 1000:.2f} us" if saved is not None else "-") + " | "
                    + (f"{ratio:.2f}" if ratio is not None else "-") + " | "
                    + (f"{share:.0%}" if share is not None else "-") + f" | {samples} |")
            first = rows[0]
            removable = [(n, s) for n, _c, s, _x, _y in rows if s is not None]
            best_saved = max(removable, key=lambda ns: ns[1])[0] if removable else None
            ratio = first[1] / first[2] if first[2] else float("nan")
            overhead = med.pop("recorded") / med["both"]
            verdicts.append(f"- `{case}`: ranked first: {first[0]}; largest saving: "
                            f"{best_saved}; measured / saved {ratio:.2f} (goal 0.8-1.2: "
                            f"{'met' if first[0] == best_saved and 0.8 <= ratio <= 1.2 else 'NOT met'})."
                            f"  Per call: {', '.join(f'{k} {v / 1000:.1f} us' for k, v in med.items())}"
                            f" (names: the break removed); recording on (costs sampled) / off: "
                            f"{overhead:.3f}.")
    lines += ["", *verdicts, "", f"Run time: {time.monotonic() - t_start:.1f} s.", END]
    text = "\n".join(lines)
    print(text)
    if not args.no_doc:
        perfdoc.write_section(DOC, START, END, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
