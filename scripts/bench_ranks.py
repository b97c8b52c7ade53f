"""A thousand ranks (issue 43): dyntop, merge and the report over N rank files
of one job (scripts/fake_ranks.py), measured in one run, under a file limit
of 1,024 descriptors (the common default: dyntop opens a file only to read
it when there are more than MODEL_OPEN_MAX, tui/tui.h).

    make bench                               # runs every scripts/bench_*.py
    .venv/bin/python scripts/bench_ranks.py [--ranks 1024] [--refreshes 5] [--no-doc]
    .venv/bin/python scripts/bench_ranks.py --quick     # 80 ranks, 2 refreshes

Measured: dyntop's first load (open every file, read every row) and a
refresh when nothing changed (`--bench-refresh`, its main screen), the
divergence view's odd ranks, `python -m dynscope merge` of every file, and
`python -m dynscope report` of the merged file.  Goals: open within 2 s,
refresh within 100 ms, merge within 60 s, report within 10 s.  Written to
docs/performance.md between <!-- bench_ranks:start --> and
<!-- bench_ranks:end -->.
"""
from __future__ import annotations

import argparse
import datetime
import os
import resource
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import fake_ranks  # noqa: E402
import perfdoc  # noqa: E402

DYNTOP = os.path.join(ROOT, "build", "dyntop")
DOC = os.path.join(ROOT, "docs", "performance.md")
START = "<!-- bench_ranks:start -->"
END = "<!-- bench_ranks:end -->"
FD_LIMIT = 1024


def limited():
    """In the child: at most FD_LIMIT open files, as a default shell gives."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(FD_LIMIT, hard), hard))


def timed(cmd, **kw) -> tuple[float, str]:
    t0 = time.perf_counter()
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=600,
                         preexec_fn=limited, **kw).stdout
    return time.perf_counter() - t0, out


def measure(n: int, refreshes: int, tmp: str) -> dict:
    t0 = time.perf_counter()
    paths = fake_ranks.make(n, os.path.join(tmp, "ranks"))
    res = {"ranks": n, "make_s": time.perf_counter() - t0, "odd": sorted(fake_ranks.divergent_ranks(n, 3))}
    _, out = timed([DYNTOP, "--bench-refresh", str(refreshes), *paths])
    main = dict(kv.split("=", 1) for kv in out.splitlines()[0].partition(":")[2].split())
    res["open_ms"], res["refresh_ms"] = float(main["first"]), float(main["mean"])
    _, batch = timed([DYNTOP, "-b", *paths])
    res["batch_lines"] = len(batch.splitlines())
    env = dict(os.environ, PYTHONPATH=ROOT)
    merged = os.path.join(tmp, "all.db")
    res["merge_s"], _ = timed([sys.executable, "-m", "dynscope", "merge", merged, *paths], env=env)
    res["report_s"], report = timed([sys.executable, "-m", "dynscope", "report", merged], env=env)
    odd_lines = [ln for ln in report.split("Divergence between runs")[-1].splitlines() if "rank " in ln]
    res["odd_in_report"] = sorted({int(w.split()[1]) for ln in odd_lines
                                   for w in ln.split("  ") if w.strip().startswith("rank ")
                                   and w.strip().split()[1].isdigit()})
    return res


def section(r: dict, refreshes: int) -> str:
    day = datetime.date.today().isoformat()
    rows = [("dyntop: open and load every file", f"{r['open_ms']:.0f} ms", "2 s"),
            (f"dyntop: a refresh, nothing changed (mean of {refreshes})", f"{r['refresh_ms']:.1f} ms",
             "100 ms"),
            ("merge of every file", f"{r['merge_s']:.1f} s", "60 s"),
            ("report of the merged file", f"{r['report_s']:.1f} s", "10 s")]
    table = "\n".join(f"| {a} | {b} | {c} |" for a, b, c in rows)
    return (f"{START}\n## A thousand ranks (`scripts/bench_ranks.py`)\n\n"
            f"{r['ranks']} rank files of one job (`scripts/fake_ranks.py`: the demo workload, "
            f"ranks {', '.join(map(str, r['odd']))} diverging), every command under a limit of "
            f"{FD_LIMIT} open files.\n\n```\n.venv/bin/python scripts/bench_ranks.py\n```\n\n"
            f"| what | measured | goal |\n|---|---:|---:|\n{table}\n\n"
            f"Measured {day} on {perfdoc.cpu_model()}.  dyntop keeps a file's connection only "
            f"while it reads it when there are more than 64 files (MODEL_OPEN_MAX, tui/tui.h), "
            f"and does not open one whose size and mtime (and its WAL's) did not change: an "
            f"ended job's refresh is 2 stat() calls a file.\n{END}\n")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ranks", type=int, default=1024)
    p.add_argument("--refreshes", type=int, default=5)
    p.add_argument("--no-doc", action="store_true", help="print only; leave docs/ alone")
    args = perfdoc.parse_args(p, argv, {"ranks": 80, "refreshes": 2})
    if not os.access(DYNTOP, os.X_OK):
        print("bench_ranks: build/dyntop is not built (make); skipped")
        return 0
    with tempfile.TemporaryDirectory(prefix="dynscope-bench-ranks.") as tmp:
        r = measure(args.ranks, args.refreshes, tmp)
    text = section(r, args.refreshes)
    print(text)
    print(f"divergent ranks named by the report: {r['odd_in_report']}")
    if not args.no_doc:
        perfdoc.write_section(DOC, START, END, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
