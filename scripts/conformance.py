"""Conformance: test suites nobody here wrote, run plain and under capture.

    scripts/conformance.sh [--subset] [--suite NAME ...] [--doc FILE] [--keep DIR]

Each suite (CPython's own test modules, NumPy's own test files, installed
third-party packages' own tests by dotted name, `--pyargs`, and the pinned
third-party libraries of scripts/suites.py, whose own tests
scripts/install-deps.sh unpacks under build/suites) runs twice in a fresh
interpreter through scripts/conformance_run.py, a test runner that only
records outcomes: plain, and under exactly the command a user types,
`python -m dynscope run --capture-all --db FILE` (every frame captured with
the eager backend, those with no array or tensor in reach too; dynscope's
own code and the import system excepted).  Each row's command is printed
(--verbose) and written in the report, so any row can be rerun by hand.

A suite fails (exit status 1) when the outcome of any test (pass, fail,
error, skip, xfail, xpass) differs, when the captured run's exit status is
not the plain run's, when it ran no test or compiled no graph, or when the
captured run printed "dynscope: internal error" (a guard that fails on its
own inputs, say: the frame then runs uncaptured, safe but a bug).

Per suite it reports the tests and their outcomes, the tests whose outcome
differs, and from the captured run: frames seen, frames captured (calls in
which a plan ran a graph: not those a kept eager entry, a skip rule or a
graph-less plan answered), graphs compiled, eager entries (translations
that stopped and were kept, so the frame runs uncaptured), cache-limit
hits, graph breaks by kind and frames skipped by reason (from the run's
SQLite file), and the wall time of running the tests plain and captured.

--subset runs the representative subset `make test` runs; the default is
every suite (`make conformance`).  --doc writes the markdown report
(docs/conformance.md for the full run on 3.11, docs/conformance-X.Y.md on
another version).

The CPython test modules are those of the interpreter under test (--python,
default this one): its own stdlib `test` package, e.g.
lib/python3.12/test for 3.12, so each version runs its own tests.  A
suite whose module that version does not have is an error, unless
KNOWN_ABSENT says from which version on it is gone (then it is reported as
absent, and not run).
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKER = os.path.join(ROOT, "scripts", "conformance_run.py")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import suites  # noqa: E402

INTERNAL_ERROR = "dynscope: internal error"


# What the interpreter under test has: asked of it (not of the Python running
# this script), once per interpreter.
INFO_CODE = r"""
import importlib.util, json, os, sys
mods = json.loads(sys.argv[1])
spec = importlib.util.find_spec("test")
info = {"version": list(sys.version_info[:3]), "executable": sys.executable,
        "test_dir": list(spec.submodule_search_locations)[0] if spec else None,
        "missing": [m for m in mods if spec is None or importlib.util.find_spec(m) is None]}
try:
    import numpy
    d = os.path.dirname(numpy.__file__)
    info["numpy"] = numpy.__version__
    info["numpy_tests"] = next((os.path.join(d, s, "tests") for s in ("_core", "core")
                                if os.path.isdir(os.path.join(d, s, "tests"))), None)
except ImportError:
    info["numpy"] = info["numpy_tests"] = None
print(json.dumps(info))
"""
_INFO: dict = {}


def interpreter_info(python: str) -> dict:
    """The interpreter's version, its `test` package's directory, the SUITES
    modules it lacks, and its NumPy's test directory."""
    if python not in _INFO:
        mods = sorted({t for r, t in SUITES.values() if r == "unittest"})
        out = subprocess.run([python, "-c", INFO_CODE, json.dumps(mods)], capture_output=True,
                             text=True, check=True, cwd=ROOT).stdout
        info = json.loads(out)
        info["version"] = tuple(info["version"])
        _INFO[python] = info
    return _INFO[python]


def numpy_tests(name: str, python: str = sys.executable) -> str:
    d = interpreter_info(python)["numpy_tests"]
    if d is None:
        raise RuntimeError(f"{python} has no NumPy test files (is NumPy installed in its venv?)")
    return os.path.join(d, name)


# name -> (runner, target); the CPython modules come from the interpreter's
# own `test` package, the NumPy files from the installed NumPy.
SUITES = {
    "test_math": ("unittest", "test.test_math"),
    "test_list": ("unittest", "test.test_list"),
    "test_functools": ("unittest", "test.test_functools"),
    "test_itertools": ("unittest", "test.test_itertools"),
    "test_operator": ("unittest", "test.test_operator"),
    "test_statistics": ("unittest", "test.test_statistics"),
    "test_fractions": ("unittest", "test.test_fractions"),
    "test_heapq": ("unittest", "test.test_heapq"),
    "test_bisect": ("unittest", "test.test_bisect"),
    "test_enum": ("unittest", "test.test_enum"),
    "test_dict": ("unittest", "test.test_dict"),
    "test_set": ("unittest", "test.test_set"),
    "test_tuple": ("unittest", "test.test_tuple"),
    "test_collections": ("unittest", "test.test_collections"),
    "test_copy": ("unittest", "test.test_copy"),
    "test_sort": ("unittest", "test.test_sort"),
    "test_string": ("unittest", "test.test_string"),
    "test_json": ("unittest", "test.test_json"),
    "test_random": ("unittest", "test.test_random"),
    "test_textwrap": ("unittest", "test.test_textwrap"),
    "test_difflib": ("unittest", "test.test_difflib"),
    "test_pprint": ("unittest", "test.test_pprint"),
    "test_scope": ("unittest", "test.test_scope"),
    "test_exceptions": ("unittest", "test.test_exceptions"),
    "test_traceback": ("unittest", "test.test_traceback"),
    "test_class": ("unittest", "test.test_class"),
    "test_contextlib": ("unittest", "test.test_contextlib"),
    "test_dataclasses": ("unittest", "test.test_dataclasses"),
    "test_types": ("unittest", "test.test_types"),
    "test_float": ("unittest", "test.test_float"),
    "test_int": ("unittest", "test.test_int"),
    "test_complex": ("unittest", "test.test_complex"),
    "test_with": ("unittest", "test.test_with"),
    "test_unpack": ("unittest", "test.test_unpack"),
    "test_augassign": ("unittest", "test.test_augassign"),
    "test_bool": ("unittest", "test.test_bool"),
    "test_grammar": ("unittest", "test.test_grammar"),
    "test_raise": ("unittest", "test.test_raise"),
    "test_dictviews": ("unittest", "test.test_dictviews"),
    "test_deque": ("unittest", "test.test_deque"),
    "test_array": ("unittest", "test.test_array"),
    "test_struct": ("unittest", "test.test_struct"),
    "test_inspect": ("unittest", "test.test_inspect"),
    "test_sys": ("unittest", "test.test_sys"),
    "test_weakref": ("unittest", "test.test_weakref"),
    "test_fstring": ("unittest", "test.test_fstring"),
    "test_bytes": ("unittest", "test.test_bytes"),
    "test_userdict": ("unittest", "test.test_userdict"),
    "test_userlist": ("unittest", "test.test_userlist"),
    "test_ordered_dict": ("unittest", "test.test_ordered_dict"),
    "test_calendar": ("unittest", "test.test_calendar"),
    "test_abc": ("unittest", "test.test_abc"),
    "test_shlex": ("unittest", "test.test_shlex"),
    "test_csv": ("unittest", "test.test_csv"),
    "test_base64": ("unittest", "test.test_base64"),
    "test_range": ("unittest", "test.test_range"),
    "test_slice": ("unittest", "test.test_slice"),
    "test_enumerate": ("unittest", "test.test_enumerate"),
    "test_iter": ("unittest", "test.test_iter"),
    "test_property": ("unittest", "test.test_property"),
    "test_super": ("unittest", "test.test_super"),
    "test_builtin": ("unittest", "test.test_builtin"),
    "test_listcomps": ("unittest", "test.test_listcomps"),
    "test_keywordonlyarg": ("unittest", "test.test_keywordonlyarg"),
    "numpy ufunc": ("pytest", "test_ufunc.py"),
    "numpy numeric": ("pytest", "test_numeric.py"),
    "numpy shape_base": ("pytest", "test_shape_base.py"),
    "numpy indexing": ("pytest", "test_indexing.py"),
    # Third-party packages' own tests, found as `pytest --pyargs` finds them
    # (networkx ships its tests in the wheel; scripts/install-deps.sh installs it).
    "networkx simple_paths": ("pyargs", "networkx.algorithms.tests.test_simple_paths"),
    "networkx graph": ("pyargs", "networkx.classes.tests.test_graph"),
    "networkx cycles": ("pyargs", "networkx.algorithms.tests.test_cycles"),
    # NumPy's generators drawn from by captured code (tr_random.c).
    "numpy random": ("pyargs", "numpy.random.tests.test_random"),
    "numpy generator": ("pyargs", "numpy.random.tests.test_generator_mt19937"),
    # Libraries written the way people write Python, each pinned, their own
    # tests from their sdists (scripts/suites.py).
    **{name: ("suite", name) for name in suites.THIRD_PARTY},
}
# What `make test` runs (tests/test_conformance.py): about two minutes of CI,
# stdlib and NumPy both; the rest (test_statistics, test_math, ...) in
# `make conformance`.
SUBSET = ["test_bisect", "test_operator", "test_fractions", "test_heapq", "test_list",
          "test_functools", "test_dict", "test_set", "test_copy", "test_inspect", "test_traceback",
          "test_weakref", "test_enum",
          "numpy indexing", "numpy ufunc", "numpy numeric",
          "networkx simple_paths", "networkx graph", "networkx cycles",
          "boltons", "cachetools", "toolz"]

SUITE_TIMEOUT = 3600

# CPython test modules of SUITES that a version no longer has, by module:
# (the first CPython version without it, why).  On that version and later
# the suite is reported as absent and not run; a module missing anywhere
# else (3.11 included) is an error.  None today: 3.11, 3.12 and 3.13 have
# every module of SUITES.
KNOWN_ABSENT: dict[str, tuple[tuple[int, int], str]] = {}

# Outcomes that differ under capture for a reason outside the engine, by
# test id: (the first CPython version it applies to, plain outcome, captured
# outcome, why).  Reported beside the suite, not counted as a difference;
# any other outcome of the same test still is one.
KNOWN_DIFFERENCES = {
    "test.test_functools.TestLRUPy.test_lru_recursion": (
        (3, 13), "pass", "error",
        "recursion 2 * 2857 Python frames deep, sized by the test to the C recursion limit: "
        "with a PEP 523 frame hook installed (any capture engine's, TorchDynamo's too), "
        "CPython 3.12+ stops inlining Python-to-Python calls, so each call enters the "
        "evaluator anew and counts toward Py_C_RECURSION_LIMIT"),
    "test.test_sys.SysModuleTest.test_getallocatedblocks": (
        (3, 11), "pass", "fail",
        "asserts that no interpreter memory block stays allocated across calls it makes; under "
        "capture their first calls (assertIs, assertGreater) compile cache entries, Python "
        "objects that stay, as any JIT's would (3.11 used to free as many blocks meanwhile; "
        "it no longer does in the run of 2026-11-27, with more kept per entry)"),
    **{f"test.test_int.{cls}.test_denial_of_service_prevented_int_to_str": (
        (3, 11), "skip", "pass",
        "the test times a slow conversion and skips itself when it took less than twice the "
        "timer's resolution: captured, it takes long enough to be measured and runs (and passes)")
       for cls in ("IntStrDigitLimitsTests", "IntSubclassStrDigitLimitsTests")},
}


def known_difference(tid: str, plain: str, captured: str,
                     version: tuple = tuple(sys.version_info[:3])) -> str | None:
    """The reason a difference is expected on CPython `version`, or None."""
    k = KNOWN_DIFFERENCES.get(tid)
    if k is None or tuple(version[:2]) < k[0] or (plain, captured) != k[1:3]:
        return None
    return k[3]


def absent_reason(target: str, python: str) -> tuple[str | None, str | None]:
    """(why the module is expected to be absent, error) for a unittest target
    that `python` does not have; (None, None) when it has it."""
    info = interpreter_info(python)
    if target not in info["missing"]:
        return None, None
    ver = ".".join(map(str, info["version"][:2]))
    where = info["test_dir"] or "(no test package)"
    k = KNOWN_ABSENT.get(target)
    if k is not None and info["version"][:2] >= k[0]:
        return f"{target} is not in CPython {ver}'s test package ({where}): {k[1]}", None
    return None, (f"{target} is not in CPython {ver}'s test package ({where}); if that is "
                  "expected, say so in scripts/conformance.py KNOWN_ABSENT")


def worker_command(python: str, runner: str, target: str, out: str, db: str | None) -> list:
    """The command of one run: the worker, plain or under the public CLI."""
    cmd = [python]
    if db is not None:
        cmd += ["-m", "dynscope", "run", "--capture-all", "--db", db]
    return cmd + [WORKER, runner, target, out]


def user_command(runner: str, target: str) -> str:
    """What a user types to run the suite captured (from the repository
    root, in the venv), for the report."""
    run = "python -m dynscope run --capture-all --db run.db"
    rel = os.path.relpath(target, ROOT) if os.path.isabs(target) else target
    if runner == "unittest":
        return f"{run} -m unittest {target}"
    if runner == "pyargs":
        return f"{run} -m pytest -p no:cacheprovider --pyargs {target}"
    return f"{run} -m pytest -p no:cacheprovider {rel}"


def run_worker(python: str, runner: str, target: str, out: str, db: str | None, log: str):
    cmd = worker_command(python, runner, target, out, db)
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    start = time.perf_counter()
    with open(log, "w") as f:
        try:
            # in the run's own directory: suites write files where they run
            # (pyparsing's diagrams), which must not land in the repository
            rc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env,
                                cwd=os.path.dirname(os.path.abspath(out)),
                                timeout=SUITE_TIMEOUT).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
    elapsed = time.perf_counter() - start
    if not os.path.exists(out):
        return None, rc, elapsed
    with open(out) as f:
        return json.load(f), rc, elapsed


def db_stats(db: str) -> dict:
    """Graphs, eager entries, cache-limit hits, breaks by kind and skips by
    reason, from the captured run's file."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        graphs = con.execute("SELECT count(*) FROM graphs").fetchone()[0]
        eager = con.execute("SELECT count(*) FROM compiles WHERE outcome != 'ok'").fetchone()[0]
        limits = con.execute("SELECT count(*) FROM cache_limits").fetchone()[0]
        dropped = con.execute("SELECT coalesce(sum(dropped_events), 0) FROM runs").fetchone()[0]
        breaks = dict(con.execute("SELECT kind, count(*) FROM graph_breaks GROUP BY kind "
                                  "ORDER BY count(*) DESC, kind"))
        skips = con.execute("SELECT reason, count(*) FROM frame_skips GROUP BY reason "
                            "ORDER BY count(*) DESC, reason").fetchall()
    finally:
        con.close()
    return {"graphs": graphs, "eager": eager, "cache_limits": limits, "dropped": dropped,
            "breaks": breaks, "skips": skips}


def run_suite(name: str, python: str, work: str, keep_db: bool = True) -> dict:
    """One suite, plain and captured, in `work`.  keep_db=False removes the
    captured run's SQLite file once its numbers are read (a whole run's
    files would be tens of GB)."""
    runner, target = SUITES[name]
    work = os.path.abspath(work)
    base = {"name": name, "target": target, "plain_rc": None, "captured_rc": None, "plain": None,
            "captured": None, "diffs": [], "known": [], "error": None, "absent": None,
            "problems": [], "command": None}
    if runner == "unittest":
        base["absent"], base["error"] = absent_reason(target, python)
        if base["absent"] or base["error"]:
            return base
    if runner == "pytest":
        target = numpy_tests(target, python)
    if runner == "suite":
        runner, target = "pytest", suites.tests_dir(target)
        if not os.path.isdir(target):
            base["error"] = (f"{target} is missing: scripts/install-deps.sh unpacks it "
                             "(python scripts/suites.py install)")
            return base
    version = interpreter_info(python)["version"]
    slug = name.replace(" ", "_")
    plain, plain_rc, _ = run_worker(python, runner, target, os.path.join(work, slug + ".plain.json"),
                                    None, os.path.join(work, slug + ".plain.log"))
    db = os.path.join(work, slug + ".db")
    cap, cap_rc, _ = run_worker(python, runner, target, os.path.join(work, slug + ".captured.json"),
                                db, os.path.join(work, slug + ".captured.log"))
    r = dict(base, target=target, plain_rc=plain_rc, captured_rc=cap_rc, plain=plain, captured=cap,
             command=user_command(runner, target))
    cap_log = os.path.join(work, slug + ".captured.log")
    if plain is None or cap is None:
        which = "plain" if plain is None else "captured"
        r["error"] = f"the {which} run wrote no results (exit {plain_rc if plain is None else cap_rc}; " \
                     f"see {os.path.join(work, slug + '.' + which + '.log')})"
        return r
    problems = []
    if cap_rc != plain_rc:
        problems.append(f"the captured run exited {cap_rc}, the plain run {plain_rc}")
    with open(cap_log, errors="replace") as f:
        internal = sorted({line.strip() for line in f if INTERNAL_ERROR in line})
    if internal:
        problems.append(f"{len(internal)} internal error(s) under capture: " + "; ".join(internal[:3]))
    if not plain["outcomes"]:
        problems.append("the suite ran no test")
    po, co = plain["outcomes"], cap["outcomes"]
    r["known"] = []
    for tid in sorted(set(po) | set(co)):
        if po.get(tid) != co.get(tid):
            d = (tid, po.get(tid, "missing"), co.get(tid, "missing"))
            why = known_difference(*d, version=version)
            if why is None:
                r["diffs"].append(d)
            else:
                r["known"].append(d + (why,))
    r["stats"] = db_stats(db) if os.path.exists(db) else \
        {"graphs": 0, "eager": 0, "cache_limits": 0, "dropped": 0, "breaks": {}, "skips": []}
    if not keep_db:
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(db + suffix):
                os.remove(db + suffix)
    if r["stats"]["graphs"] == 0 or not (cap["counters"] or {}).get("graph_frames"):
        problems.append("nothing was captured: no graph compiled, or no call ran one")
    r["problems"] = [f"{p} (see {cap_log})" for p in problems]
    return r


def summarize(r: dict) -> dict:
    counts = collections.Counter(r["plain"]["outcomes"].values())
    c = r["captured"]["counters"] or {}
    seen = c.get("frames_seen", 0)
    return {
        "tests": sum(counts.values()),
        "outcomes": ", ".join(f"{counts[k]} {k}" for k in ("pass", "fail", "error", "skip", "xfail", "xpass")
                              if counts[k]),
        "differ": len(r["diffs"]),
        "seen": seen,
        # calls in which a plan ran a graph; a kept eager entry (eager_hits),
        # a skip rule or a graph-less plan is not a capture
        "captured": c.get("graph_frames", 0),
        "planned": seen - c.get("skips", 0) - c.get("eager_hits", 0),
        "graphs": r["stats"]["graphs"],
        "eager": r["stats"]["eager"],
        "cache_limits": r["stats"]["cache_limits"],
        "breaks": ", ".join(f"{k} {v}" for k, v in r["stats"]["breaks"].items()) or "none",
        "ratio": r["captured"]["wall"] / max(r["plain"]["wall"], 1e-9),
        "plain_wall": r["plain"]["wall"],
        "captured_wall": r["captured"]["wall"],
    }


def describe(python: str, paths: bool = True) -> str:
    """Which interpreter, test package and NumPy a run used (for the doc,
    without this machine's paths)."""
    info = interpreter_info(python)
    ver = ".".join(map(str, info["version"]))
    if not paths:
        return (f"Python {ver}, its own CPython test modules "
                f"(lib/python{ver.rsplit('.', 1)[0]}/test), NumPy {info['numpy']}")
    return f"Python {ver} ({info['executable']}), CPython test modules from {info['test_dir']}, NumPy {info['numpy']}"


def write_doc(path: str, results: list, command: str, python: str = sys.executable) -> None:
    import platform
    lines = [
        "# Conformance: capture never changes what a program does",
        "",
        "Written by `scripts/conformance.sh` (do not edit by hand). Command:",
        "",
        f"    {command}",
        "",
        f"{describe(python, paths=False)}, {platform.machine()}, "
        f"{os.cpu_count()} CPUs. Each suite ran twice in a fresh interpreter: plain, and under "
        "`python -m dynscope run --capture-all --db FILE`, exactly as a user types it (every "
        "frame captured with the eager backend, those with no array or tensor in reach too; "
        "dynscope's own code and the import system are never captured). The outcome of "
        "every test must be the same in both runs, and so must the exit status; a suite that "
        "ran no test, compiled no graph or printed an internal error fails. The runner "
        "(`scripts/conformance_run.py`) only records outcomes, and for a suite that uses "
        "Hypothesis loads in both runs one profile with deadlines off, examples derandomized "
        "and at most 20 a test (timing is not behaviour, and both runs must try the same "
        "inputs).",
        "",
        "Columns: *differ* counts tests whose outcome changed under capture (must be 0); "
        "*seen* is frames the engine's hook saw; *captured* is calls in which a plan ran a "
        "graph (not a frame a kept eager entry, a skip rule or a graph-less plan answered); "
        "*graphs* is graphs compiled; *eager* is translations that stopped and were kept "
        "(those inputs then run uncaptured); *limits* is functions that reached "
        "cache_size_limit; *breaks* is graph breaks by kind; *plain* and *captured s* are the "
        "wall time of running the tests (captured includes every compile: each suite runs "
        "most of its code once, so this is the cold-start cost, not the hit cost).",
        "",
        "| suite | tests | outcomes (plain) | differ | seen | captured | graphs | eager | limits "
        "| breaks | plain s | captured s | ratio |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|",
    ]
    for r in results:
        if r["error"] or r["absent"]:
            lines.append(f"| {r['name']} | | {r['error'] or 'absent: ' + r['absent']} "
                         "| | | | | | | | | | |")
            continue
        s = summarize(r)
        flag = " **FAILS**" if r["problems"] else ""
        lines.append(f"| {r['name']}{flag} | {s['tests']} | {s['outcomes']} | {s['differ']} | {s['seen']} | "
                     f"{s['captured']} | {s['graphs']} | {s['eager']} | {s['cache_limits']} | "
                     f"{s['breaks']} | {s['plain_wall']:.1f} | {s['captured_wall']:.1f} | "
                     f"{s['ratio']:.1f}x |")
    lines += ["", "## Reproducing a row", "",
              "From the repository root, in the venv (`. .venv/bin/activate`), the captured run of "
              "each suite is:", ""]
    lines += [f"- {r['name']}: `{r['command']}`" for r in results if r.get("command")]
    failing = [(r["name"], p) for r in results for p in r["problems"]]
    if failing:
        lines += ["", "## Failures", ""] + [f"- {n}: {p.split(' (see ')[0]}" for n, p in failing]
    known = [(r["name"],) + k for r in results for k in r["known"]]
    if known:
        lines += ["", "## Known differences", "",
                  "Outcomes that differ for a reason outside the engine (scripts/conformance.py "
                  "KNOWN_DIFFERENCES); not counted above.", "",
                  "| suite | test | plain | captured | why |", "|---|---|---|---|---|"]
        lines += [f"| {n} | {tid} | {p} | {c} | {why} |" for n, tid, p, c, why in known]
    lines += ["", "## Frames skipped, by reason", "",
              "A frame is skipped (runs in the interpreter, uncaptured) when the translator "
              "refuses a construct before anything ran; the most frequent reasons per suite:", ""]
    for r in results:
        if r["error"] or r["absent"]:
            continue
        lines.append(f"### {r['name']}")
        lines.append("")
        skips = r["stats"]["skips"]
        if not skips:
            lines.append("none")
        else:
            lines.append("| frames | reason |")
            lines.append("|---:|---|")
            for reason, n in skips[:12]:
                lines.append(f"| {n} | {str(reason).replace('|', '/')} |")
            rest = sum(n for _, n in skips[12:])
            if rest:
                lines.append(f"| {rest} | ({len(skips) - 12} other reasons) |")
        lines.append("")
    diffs = [(r["name"], d) for r in results for d in r["diffs"]]
    lines += ["## Differences", ""]
    if not diffs:
        lines.append("None: every test had the same outcome plain and captured.")
    else:
        lines += ["| suite | test | plain | captured |", "|---|---|---|---|"]
        lines += [f"| {n} | `{t}` | {p} | {c} |" for n, (t, p, c) in diffs]
    lines.append("")
    with open(path, "w") as f:
        f.write("\n".join(lines))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog=__doc__.split("\n\n", 2)[2],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--subset", action="store_true", help="the representative subset (make test)")
    ap.add_argument("--suite", action="append", choices=list(SUITES), metavar="NAME",
                    help=f"run this suite (repeatable); one of: {', '.join(SUITES)}")
    ap.add_argument("--module", action="append", default=[], metavar="TEST_MODULE",
                    help="also run this module of CPython's test package (e.g. test_dict)")
    ap.add_argument("--pyargs", action="append", default=[], metavar="DOTTED.TEST_MODULE",
                    help="also run this installed package's test module, as `pytest --pyargs` "
                         "finds it (e.g. networkx.algorithms.tests.test_dag)")
    ap.add_argument("--doc", help="write the markdown report here")
    ap.add_argument("--keep", help="keep the logs, results and SQLite files in this directory")
    ap.add_argument("--python", default=sys.executable, help="interpreter (default: this one)")
    ap.add_argument("--verbose", action="store_true", help="print each suite's captured command")
    args = ap.parse_args(argv)
    if os.sep in args.python:
        # workers run in the run's own directory: a relative path would not
        # be found there (abspath, not realpath: a venv's python is a link)
        args.python = os.path.abspath(args.python)
    for m in args.module:
        SUITES[m] = ("unittest", m if m.startswith("test.") else "test." + m)
    for m in args.pyargs:
        SUITES[m] = ("pyargs", m)
    extra = args.module + args.pyargs
    names = (args.suite or [] if extra else args.suite) or \
        ([] if extra else SUBSET if args.subset else list(SUITES))
    names = names + [m for m in extra if m not in names]
    work = os.path.abspath(args.keep or tempfile.mkdtemp(prefix="dynscope-conformance-"))
    os.makedirs(work, exist_ok=True)
    results, bad = [], 0
    print(f"conformance: {describe(args.python)}", flush=True)
    try:
        for name in names:
            r = run_suite(name, args.python, work, keep_db=bool(args.keep))
            results.append(r)
            if r["error"]:
                bad += 1
                print(f"{name:18} ERROR {r['error']}", flush=True)
                continue
            if r["absent"]:
                print(f"{name:18} ABSENT {r['absent']}", flush=True)
                continue
            s = summarize(r)
            bad += s["differ"] > 0 or bool(r["problems"])
            print(f"{name:18} {s['tests']:5} tests  differ {s['differ']:3}  seen {s['seen']:7}  "
                  f"captured {s['captured']:7}  graphs {s['graphs']:5}  eager {s['eager']:5}  "
                  f"limits {s['cache_limits']:4}  "
                  f"ratio {s['ratio']:5.1f}x ({s['plain_wall']:.2f}s -> {s['captured_wall']:.2f}s)",
                  flush=True)
            if args.verbose:
                print(f"    {r['command']}", flush=True)
            for p in r["problems"]:
                print(f"    FAILS   {p}", flush=True)
            for tid, p, c in r["diffs"]:
                print(f"    DIFFERS {tid}: plain {p}, captured {c}", flush=True)
            for tid, p, c, why in r["known"]:
                print(f"    known   {tid}: plain {p}, captured {c} ({why})", flush=True)
        if args.doc:
            command = "scripts/conformance.sh" + (" --subset" if args.subset else "") + \
                      "".join(f" --suite '{n}'" for n in (args.suite or [])) + f" --doc {args.doc}"
            write_doc(args.doc, results, command, args.python)
            print(f"wrote {args.doc}")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    if bad:
        print(f"conformance: {bad} suite(s) with differences or errors"
              + (f" (logs in {work})" if args.keep else " (rerun with --keep DIR for the logs)"),
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
