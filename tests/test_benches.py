"""Every benchmark (scripts/bench_*.py) but the two that start an LTTng
session (tests/test_benches_lttng.py) in its --quick mode (issue 39,
"Benches that cannot rot"): it finishes within TIMEOUT_S, exits 0, prints
its tables with every case in them, and leaves docs/performance.md byte for
byte as it was.  The checks are on the shape of the output and on counts,
never on a time: the machine is shared.  `make bench` runs the same scripts
in full.

    .venv/bin/python -m pytest -q tests/test_benches.py
"""
import glob
import importlib.util
import os
import re
import subprocess
import sys

import pytest

import _programs
from conftest import TORCH_SKIP_REASON, skip_dynamo_under_asan

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(ROOT, "docs", "performance.md")
DYNTOP = os.path.join(ROOT, "build", "dyntop")
TIMEOUT_S = 120
BENCHES = sorted(os.path.basename(p)[:-3] for p in glob.glob(os.path.join(ROOT, "scripts",
                                                                          "bench_*.py")))

# make, lttng, the C loop and dyntop are not the Python under test: under
# make asan they would inherit its sanitizer runtime (tests/_programs.py).
starts_programs = pytest.mark.skipif(
    _programs.under_sanitizer(), reason="the benchmark starts make, lttng or dyntop, which "
    "would run under make asan's sanitizer runtime (tests/_programs.py, issue 46)")


def run_quick(name):
    """`python scripts/NAME.py --quick`: (stdout, stderr), after checking it
    exited 0 and did not touch docs/performance.md.  A benchmark that says
    it skipped (a tool missing here) skips the test with its words."""
    with open(DOC, "rb") as fh:
        before = fh.read()
    r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", name + ".py"), "--quick"],
                       cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT_S)
    with open(DOC, "rb") as fh:
        assert fh.read() == before, f"{name} --quick rewrote docs/performance.md"
    assert r.returncode == 0, f"{name} --quick exited {r.returncode}:\n{r.stdout}\n{r.stderr}"
    last = r.stdout.strip().splitlines()[-1:] or [""]
    if last[0].endswith("; skipped"):
        pytest.skip(last[0])
    return r.stdout, r.stderr


def table(out, header):
    """The rows (lists of cells) of the markdown table whose header line
    starts with `header`."""
    lines = out.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith(header)]
    assert len(starts) == 1, f"one table headed {header!r} expected:\n{out}"
    rows = []
    for line in lines[starts[0] + 2:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip("|").split("|")])
    return rows


def numbers(cells):
    """The cells' leading numbers (+, -, commas allowed); a cell without
    one fails."""
    got = []
    for c in cells:
        m = re.match(r"\*{0,2}([+-]?[\d,]+(?:\.\d+)?)", c)
        assert m, f"no number in cell {c!r}"
        got.append(float(m.group(1).replace(",", "")))
    return got


def check_break_cost(out, err):
    rows = table(out, "| case | break (costliest first) |")
    cases = {r[0] for r in rows}
    assert "`numpy`" in cases, rows
    assert {r[1] for r in rows if r[0] == "`numpy`"} == {"print", "log_stats"}, rows
    for r in rows:
        assert numbers([r[2]])[0] > 0 and int(r[6]) >= 0, r       # measured, timed calls
    assert re.search(r"- `numpy`: ranked first: \w+; largest saving: \w+; measured / saved", out)


def check_capture(out, err):
    rows = table(out, "| case | first call, µs |")
    assert [r[0] for r in rows] == ["add2 (1 op)", "chain of 8", "mlp step (9 ops, 2 outputs)"]
    assert all(x > 0 for r in rows for x in numbers(r[1:]))


def check_dyntop(out, err):
    assert re.search(r"\b200 code_objects\b.*\b5000 guard_failures\b", out), out
    screens = [line.split()[0] for line in out.splitlines() if "refresh mean" in line]
    assert screens == ["main", "main-reload", "detail", "breaks", "recompiles"], out


def check_ranks(out, err):
    rows = table(out, "| what | measured | goal |")
    assert [r[0] for r in rows] == ["dyntop: open and load every file",
                                    "dyntop: a refresh, nothing changed (mean of 2)",
                                    "merge of every file", "report of the merged file"], out
    numbers([r[1] for r in rows])
    assert "80 rank files" in out
    odd = re.search(r"ranks ([\d, ]+) diverging", out).group(1)
    assert f"divergent ranks named by the report: [{odd}]" in out, out


def check_hit(out, err):
    lines = out.splitlines()
    sep = next(i for i, line in enumerate(lines) if line.startswith("-----"))
    rows = lines[sep + 1:lines.index("", sep)]
    assert len(rows) == 17, out                 # every case of build_cases
    assert sum(1 for r in rows if re.search(r"\d\.\d\dx", r)) == 9, out   # captured vs eager
    derived = [line for line in lines if re.match(r"  .*: -?\d+ ns$", line)]
    assert len(derived) == 12, out


def check_record(out, err):
    rows = table(out, "| measure | recording off |")
    assert len(rows) == 4, out
    assert rows[0][0].startswith("recompile-heavy workload (20 compiles of one frame"), rows
    queued = int(re.search(r"\(([\d,]+) events queued while the writer was parked",
                           out).group(1).replace(",", ""))
    assert queued >= 2000
    assert re.search(r"Events dropped .*: 0 \(max over rounds", out), out


def check_sizes(out, err):
    rows = table(out, "| case | ops |")
    assert [r[0] for r in rows][-1].startswith("eager µs"), rows
    spec = importlib.util.spec_from_file_location(
        "bench_sizes", os.path.join(ROOT, "scripts", "bench_sizes.py"))
    bench_sizes = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench_sizes)
    assert [r[0] for r in rows[:-1]] == [f"`{name}`" for name, _, _ in bench_sizes.CASES], rows
    assert all(len(numbers(r[1:])) == 4 for r in rows), rows  # ops, 3 sizes
    rss = table(out, "| case | n | eager | captured |")
    assert [(r[0], r[1]) for r in rss] == [("`chain of 8 (the issue's)`", "100k"),
                                           ("`chain of 4`", "100k")]


def check_torch_hit(out, err):
    rows = table(out, "| case | eager | dynscope | Dynamo |")
    assert len(rows) == 2 and all(len(numbers(r[1:6])) == 5 for r in rows), rows


CHECKS = {
    "bench_break_cost": check_break_cost,
    "bench_capture": check_capture,
    "bench_dyntop": check_dyntop,
    "bench_hit": check_hit,
    "bench_ranks": check_ranks,
    "bench_record": check_record,
    "bench_sizes": check_sizes,
    "bench_torch_hit": check_torch_hit,
}

MARKS = {
    "bench_dyntop": [starts_programs, pytest.mark.skipif(
        not os.access(DYNTOP, os.X_OK), reason="build/dyntop is not built (make)")],
    "bench_ranks": [starts_programs, pytest.mark.skipif(
        not os.access(DYNTOP, os.X_OK), reason="build/dyntop is not built (make)")],
    "bench_torch_hit": [skip_dynamo_under_asan, pytest.mark.skipif(
        importlib.util.find_spec("torch") is None, reason=TORCH_SKIP_REASON)],
}


def test_every_benchmark_has_a_quick_check():
    import test_benches_lttng
    assert not set(CHECKS) & set(test_benches_lttng.CHECKS)
    assert sorted({**CHECKS, **test_benches_lttng.CHECKS}) == BENCHES


@pytest.mark.parametrize("name", [pytest.param(n, marks=MARKS.get(n, ())) for n in sorted(CHECKS)])
def test_the_quick_run_prints_every_case_and_leaves_the_doc_alone(name):
    if name not in CHECKS:
        pytest.fail(f"scripts/{name}.py has no check in tests/test_benches.py")
    CHECKS[name](*run_quick(name))
