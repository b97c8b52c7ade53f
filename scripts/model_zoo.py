#!/usr/bin/env python3
"""model_zoo.py -- the model zoo measured: dynscope and TorchDynamo side by side.

    .venv/bin/python scripts/model_zoo.py                 # writes docs/models.md
    .venv-3.12/bin/python scripts/model_zoo.py            # writes docs/models-3.12.md
    .venv/bin/python scripts/model_zoo.py --models gpt2,cnn --out FILE --quick

For each model of tests/models (tiny random-init configs, no weights, no
network), each system runs in a fresh process:
  dynscope: dynscope.explain(forward)(*inputs) for graphs, breaks (grouped
            by reason), ops in graphs and frames run uncaptured; then
            dynscope.optimize("eager")(forward) called repeatedly;
  dynamo:   torch._dynamo.explain(forward)(*inputs), then
            torch.compile(forward, backend="eager") called repeatedly.
Both run under torch.no_grad().  Reported: graphs, breaks, ops, whether
every output tensor equals eager's exactly (first call and a cache hit),
capture time (the first call) and the steady per-call time against eager,
as medians of interleaved calls in one process (the machine is noisy:
ratios, not absolute times, are what compares).

Each CPython version writes its own report (docs/models.md for 3.11,
docs/models-X.Y.md for another, as `make zoo` with PYTHON= does), and
docs/models.md then gets a section with every version's table side by side
("On each Python version"), remade from the reports whenever one of them
is written.
"""
from __future__ import annotations

import argparse
import collections
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


def median_call_ns(fn, reps):
    times = []
    for _ in range(reps):
        t0 = time.perf_counter_ns()
        fn()
        times.append(time.perf_counter_ns() - t0)
    return statistics.median(times)


def worker(name: str, system: str, reps: int) -> dict:
    """Measure one model under one system; a dict for JSON."""
    import warnings
    warnings.simplefilter("ignore")
    import torch
    import models
    torch.set_num_threads(1)     # two cores, shared: threads would spin against each other
    model, args, kwargs = models.build(name)

    def forward(*a):
        return model(*a, **kwargs)

    out = {"model": name, "system": system}
    with torch.no_grad():
        want = forward(*args)
        if system == "dynscope":
            import dynscope
            ex = dynscope.explain(forward)(*args)
            reasons = collections.Counter(str(b.reason).splitlines()[0][:120] for b in ex.break_reasons)
            out.update(graphs=ex.graph_count, breaks=ex.graph_break_count,
                       ops=sum(len(o) for o in ex.ops_per_graph),
                       reasons=reasons.most_common(),
                       skipped=[(s[0], s[2]) for s in ex.skipped])
            dynscope.reset()
            captured = dynscope.optimize("eager")(forward)
        else:
            import torch._dynamo as dynamo
            ex = dynamo.explain(forward)(*args)
            reasons = collections.Counter(str(getattr(b, "reason", b)).splitlines()[0][:120]
                                          for b in ex.break_reasons)
            out.update(graphs=ex.graph_count, breaks=ex.graph_break_count, ops=ex.op_count,
                       reasons=reasons.most_common(), skipped=[])
            dynamo.reset()
            captured = torch.compile(forward, backend="eager")
        t0 = time.perf_counter_ns()
        first = captured(*args)
        out["capture_ms"] = (time.perf_counter_ns() - t0) / 1e6
        second = captured(*args)
        out["equal"] = models.same_output(first, want) and models.same_output(second, want)
        eager_ns, cap_ns = [], []
        for _ in range(5):      # interleaved rounds: noise hits both alike
            eager_ns.append(median_call_ns(lambda: forward(*args), reps))
            cap_ns.append(median_call_ns(lambda: captured(*args), reps))
        out["eager_us"] = statistics.median(eager_ns) / 1e3
        out["captured_us"] = statistics.median(cap_ns) / 1e3
    return out


def run_one(name: str, system: str, reps: int) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", name, system, "--reps", str(reps)]
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=1200)
    if p.returncode != 0:
        return {"model": name, "system": system, "error": (p.stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(p.stdout.strip().splitlines()[-1])


def versions() -> str:
    import torch
    try:
        import transformers
        tv = transformers.__version__
    except ImportError:
        tv = "not installed"
    return (f"CPython {platform.python_version()}, torch {torch.__version__}, transformers {tv}, "
            f"{platform.machine()}, {os.cpu_count()} cores")


def write_doc(results: list, path: str, command: str) -> None:
    by = {(r["model"], r["system"]): r for r in results}
    names = list(dict.fromkeys(r["model"] for r in results))
    lines = [
        "# The model zoo: dynscope and TorchDynamo side by side",
        "",
        f"Made by `{command}` on {datetime.date.today().isoformat()} ({versions()}).",
        "Each model is tests/models' tiny random-init build (2 layers, width 64, batch 2,",
        "sequence 16; no weights, no network); each system runs in a fresh process under",
        "`torch.no_grad()`. dynscope: `dynscope.explain` then `dynscope.optimize(\"eager\")`;",
        "Dynamo: `torch._dynamo.explain` then `torch.compile(backend=\"eager\")`. *equal*: every",
        "output tensor equals eager's exactly, on the first call and on a cache hit. Times:",
        "capture is the first call; per call, the median of interleaved rounds, as a ratio",
        "to eager in the same process (noisy machine: compare ratios), torch on one thread.",
        "",
        "| model | system | graphs | breaks | ops in graphs | equal | capture ms | eager µs | captured µs | ratio |",
        "|---|---|---:|---:|---:|---|---:|---:|---:|---:|",
    ]
    for n in names:
        for system in ("dynscope", "dynamo"):
            r = by.get((n, system))
            if r is None:
                continue
            if "error" in r:
                lines.append(f"| {n} | {system} | error: {r['error'][:80]} | | | | | | | |")
                continue
            brk = r['breaks'] if r['breaks'] >= 0 else "n/a (frame not captured)"
            lines.append(f"| {n} | {system} | {r['graphs']} | {brk} | {r['ops']} | "
                         f"{'yes' if r['equal'] else '**no**'} | {r['capture_ms']:.0f} | "
                         f"{r['eager_us']:.0f} | {r['captured_us']:.0f} | "
                         f"{r['captured_us'] / r['eager_us']:.2f} |")
    lines += ["", "## dynscope's breaks by reason", "",
              "What still breaks each model's graph under dynscope, most frequent first",
              "(the first line of each reason; `python -m dynscope` explain shows the user lines).", ""]
    for n in names:
        r = by.get((n, "dynscope"))
        if r is None or "error" in r:
            continue
        lines.append(f"### {n}: {r['breaks']} breaks, {r['graphs']} graphs")
        lines.append("")
        for reason, count in r["reasons"]:
            lines.append(f"- {count} × {reason}")
        if not r["reasons"]:
            lines.append("- (none)")
        if r["skipped"]:
            lines.append("")
            lines.append("Frames run without capture:")
            for fn, why in collections.Counter(map(tuple, r["skipped"])).most_common():
                lines.append(f"- {fn}: {why}")
        lines.append("")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


DOCS = os.path.join(ROOT, "docs")
MAIN_DOC = os.path.join(DOCS, "models.md")
SIDE_HEADING = "## On each Python version"


def default_out() -> str:
    """docs/models.md on 3.11, docs/models-X.Y.md on another version."""
    v = "%d.%d" % sys.version_info[:2]
    return MAIN_DOC if v == "3.11" else os.path.join(DOCS, f"models-{v}.md")


def read_report(path: str):
    """(versions, rows) of a report write_doc made: versions is the text in
    the parentheses of its "Made by" line, rows maps (model, system) to the
    cells of its table (graphs, breaks, ops, equal, ..., ratio)."""
    versions, rows = "", {}
    with open(path) as f:
        for line in f:
            if line.startswith("Made by ") and "(" in line:
                versions = line[line.rindex("(") + 1:].rstrip().rstrip(".").rstrip(")")
            elif line.startswith("| ") and not line.startswith(("| model ", "|---")):
                cells = [c.strip() for c in line.strip().strip("|").split("|")]
                if len(cells) == 10:
                    rows[(cells[0], cells[1])] = cells[2:]
            elif line.startswith("## "):
                if rows:
                    break
    return versions, rows


def side_by_side() -> list:
    """The lines of docs/models.md's section that puts every version's
    report side by side: per model and system, graphs/breaks, equal and
    the per-call ratio of each version."""
    reports = [("3.11", MAIN_DOC)] + sorted(
        (f[len("models-"):-len(".md")], os.path.join(DOCS, f)) for f in os.listdir(DOCS)
        if f.startswith("models-3.") and f.endswith(".md"))
    read = [(v, *read_report(p)) for v, p in reports if os.path.exists(p)]
    read = [(v, vs, rows) for v, vs, rows in read if rows]
    if len(read) < 2:
        return []
    lines = [SIDE_HEADING, "",
             "Each version's own report (" + ", ".join(
                 f"[{v}]({os.path.basename(p)})" for v, p in reports
                 if any(r[0] == v for r in read)) + ") side by side: graphs / breaks, whether",
             "every output equals eager's, and the per-call time as a ratio to eager. The",
             "torch releases differ (CI covers both); each report says when and how it was made.",
             "One run per version on a shared 2-core machine: a ratio can move by a few tenths",
             "from run to run (eager's own time moves), so read differences under ~0.2 as noise.",
             ""]
    for v, vs, _ in read:
        lines.append(f"- {v}: {vs}")
    lines += ["", "| model | system | " + " | ".join(
        f"{v} graphs / breaks | {v} equal | {v} ratio" for v, _, _ in read) + " |",
        "|---|---|" + "---:|---|---:|" * len(read)]
    keys = list(dict.fromkeys(k for _, _, rows in read for k in rows))
    for model, system in keys:
        cells = []
        for _, _, rows in read:
            c = rows.get((model, system))
            if c is None:
                cells += ["-", "-", "-"]
            elif len(c) < 8 or c[0].startswith("error"):
                cells += [(c[0] if c else "-")[:40], "", ""]
            else:
                cells += [f"{c[0]} / {c[1]}", c[3], c[7]]
        lines.append(f"| {model} | {system} | " + " | ".join(cells) + " |")
    return lines + [""]


def update_side_by_side() -> None:
    """Remake docs/models.md's side-by-side section (or add it at the end,
    or drop it when fewer than two reports exist)."""
    if not os.path.exists(MAIN_DOC):
        return
    with open(MAIN_DOC) as f:
        text = f.read()
    start = text.find("\n" + SIDE_HEADING + "\n")
    if start >= 0:
        nxt = text.find("\n## ", start + 1)
        text = text[:start + 1] + (text[nxt + 1:] if nxt >= 0 else "")
    section = side_by_side()
    if section:
        text = text.rstrip("\n") + "\n\n" + "\n".join(section)
    with open(MAIN_DOC, "w") as f:
        f.write(text.rstrip("\n") + "\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="", help="comma-separated names (default: all)")
    ap.add_argument("--systems", default="dynscope,dynamo")
    ap.add_argument("--out", default=default_out(),
                    help="the report (default: docs/models.md on 3.11, docs/models-X.Y.md else)")
    ap.add_argument("--quick", action="store_true", help="fewer timing repetitions")
    ap.add_argument("--reps", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--worker", nargs=2, metavar=("MODEL", "SYSTEM"), help=argparse.SUPPRESS)
    ap.add_argument("--json", action="store_true", help="print the results as JSON too")
    a = ap.parse_args()
    reps = a.reps or (5 if a.quick else 20)
    if a.worker:
        print(json.dumps(worker(a.worker[0], a.worker[1], reps)))
        return 0
    import models
    names = [n for n in a.models.split(",") if n] or list(models.BUILDERS)
    unknown = [n for n in names if n not in models.BUILDERS]
    if unknown:
        ap.error(f"unknown model(s) {', '.join(unknown)}; the zoo has {', '.join(models.BUILDERS)}")
    results = []
    for n in names:
        for system in a.systems.split(","):
            r = run_one(n, system, reps)
            results.append(r)
            print(f"{n:6} {system:8} " + (f"error: {r['error']}" if "error" in r else
                  f"graphs {r['graphs']:3} breaks {r['breaks']:4} equal {r['equal']} "
                  f"capture {r['capture_ms']:.0f} ms ratio {r['captured_us'] / r['eager_us']:.2f}"),
                  flush=True)
    command = "python scripts/model_zoo.py" + (" " + " ".join(sys.argv[1:]) if sys.argv[1:] else "")
    write_doc(results, a.out, command)
    if os.path.dirname(os.path.abspath(a.out)) == DOCS:
        update_side_by_side()
    if a.json:
        print(json.dumps(results))
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
