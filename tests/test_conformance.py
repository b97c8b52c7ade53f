"""Conformance (issue 9): test suites nobody here wrote, plain and captured.

The representative subset of scripts/conformance.py (`make conformance` runs
every suite and writes docs/conformance.md): each suite runs in a fresh
interpreter plain and under `python -m dynscope run --capture-all`, and every
test must have the same outcome in both, and the two runs the same exit
status, with no internal error.  The captured run must really have
captured: calls that ran a graph (not frames a kept eager entry answered),
graphs in its SQLite file.
"""
import os
import sys

import sqlite3

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts"))
import conformance  # noqa: E402


@pytest.mark.parametrize("suite", conformance.SUBSET)
def test_suite_has_the_same_outcomes_plain_and_captured(suite, tmp_path):
    r = conformance.run_suite(suite, sys.executable, str(tmp_path))
    if r["absent"]:  # not in this version's test package, as KNOWN_ABSENT says
        pytest.skip(r["absent"])
    assert r["error"] is None, r["error"]
    assert r["problems"] == [], r["problems"]
    s = conformance.summarize(r)
    assert s["tests"] > 20, "the suite ran (almost) no tests"
    assert r["diffs"] == [], f"{len(r['diffs'])} outcomes differ under capture: " + "; ".join(
        f"{t}: plain {p}, captured {c}" for t, p, c in r["diffs"][:10])
    assert r["captured_rc"] == r["plain_rc"]
    # capture really happened, and was recorded: most frames translated into
    # plans, some of them running graphs, graphs in the file
    c = r["captured"]["counters"]
    assert s["seen"] > 1000 and s["planned"] > s["seen"] // 2, c
    assert 0 < s["captured"] <= s["seen"] - c["skips"] - c["eager_hits"], c
    assert s["graphs"] > 0
    assert os.path.getsize(os.path.join(tmp_path, suite.replace(" ", "_") + ".db")) > 0


def fake_run(tmp_path, monkeypatch, fault=None):
    """run_suite over a made-up pair of runs (the checker checked): a clean
    one, or one with `fault` planted."""
    counters = {"frames_seen": 10, "skips": 0, "eager_hits": 0, "graph_frames": 5}
    plain = {"outcomes": {"t::a": "pass"}, "wall": 1.0, "counters": None}
    cap = {"outcomes": {"t::a": "pass"}, "wall": 1.0, "counters": counters}
    rcs = {"plain": 0, "captured": 0}
    log = "ok\n"
    if fault == "exit status":
        rcs["captured"] = 1
    elif fault == "internal error":
        log = "dynscope: internal error while checking guards; the frame runs without capture\n"
    elif fault == "no test":
        plain["outcomes"], cap["outcomes"] = {}, {}
    elif fault == "no graph run":
        counters["graph_frames"] = 0
    elif fault == "kept eager entries only":   # answered by eager entries: hits, not captures
        counters.update(graph_frames=0, eager_hits=10)

    def fake_worker(python, runner, target, out, db, logpath):
        with open(logpath, "w") as f:
            f.write(log if db else "")
        if db:
            con = sqlite3.connect(db)
            con.executescript("CREATE TABLE graphs(x); CREATE TABLE compiles(outcome);"
                              "CREATE TABLE cache_limits(x); CREATE TABLE runs(dropped_events);"
                              "CREATE TABLE graph_breaks(kind); CREATE TABLE frame_skips(reason);"
                              "INSERT INTO graphs VALUES (1); INSERT INTO runs VALUES (0);")
            con.commit()
            con.close()
        return (cap if db else plain), rcs["captured" if db else "plain"], 0.1

    monkeypatch.setattr(conformance, "run_worker", fake_worker)
    monkeypatch.setitem(conformance.SUITES, "fake", ("pyargs", "fake.tests"))
    return conformance.run_suite("fake", sys.executable, str(tmp_path))


@pytest.mark.parametrize("fault", ["exit status", "internal error", "no test", "no graph run",
                                   "kept eager entries only"])
def test_a_planted_fault_fails_the_suite(fault, tmp_path, monkeypatch):
    """Each failure run_suite must report, planted in a fake run."""
    r = fake_run(tmp_path, monkeypatch, fault)
    assert r["problems"], f"{fault}: not reported"
    if fault == "kept eager entries only":
        s = conformance.summarize(r)
        assert s["captured"] == 0 and s["planned"] == 0


def test_a_clean_fake_run_passes(tmp_path, monkeypatch):
    """The same fake with no fault planted: no problem (so the faults above
    are what fails it)."""
    r = fake_run(tmp_path, monkeypatch)
    assert r["error"] is None and r["problems"] == [] and r["diffs"] == []
    assert conformance.summarize(r)["captured"] == 5


def test_cpython_suites_are_this_interpreters_own():
    """The CPython test modules run are those of the Python under test (its
    stdlib's `test` package: 3.12's for 3.12), every one of them there."""
    import sysconfig
    info = conformance.interpreter_info(sys.executable)
    assert info["version"] == tuple(sys.version_info[:3])
    assert os.path.realpath(info["test_dir"]) == \
        os.path.realpath(os.path.join(sysconfig.get_paths()["stdlib"], "test"))
    expected = {m for m, (first, _) in conformance.KNOWN_ABSENT.items() if sys.version_info[:2] >= first}
    assert set(info["missing"]) == expected, "SUITES names modules this version does not have"


# ---------------------------------------------------------------------------
# python -m dynscope run --capture-all itself.

import subprocess  # noqa: E402
import textwrap  # noqa: E402

import dynscope  # noqa: E402

PROGRAM = textwrap.dedent("""
    import sys, warnings
    import numpy as np

    def scale(x, k):
        return x * k + 1

    def pick(n, xs):
        return sum(range(n)) + 1   # range(n) needs n: a new entry per value

    def label(n):
        return str(n)         # no array in reach: --capture-all captures it too

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        total = sum(float(scale(np.ones(3), k).sum()) for k in range(5))
        picked = [pick(n, np.ones(1)) for n in range(30)]
        labels = [label(n) for n in range(30)]
    print("total", total, "picked", sum(picked), "warnings", len(seen))
    sys.exit(3)
""")


def test_capture_all_captures_the_program_and_leaves_its_behaviour(tmp_path):
    script = tmp_path / "prog.py"
    script.write_text(PROGRAM)
    db = tmp_path / "run.db"
    plain = subprocess.run([sys.executable, str(script)], capture_output=True, text=True)
    cap = subprocess.run([sys.executable, "-m", "dynscope", "run", "--capture-all", "--db", str(db),
                          str(script)], capture_output=True, text=True)
    assert plain.returncode == cap.returncode == 3
    assert plain.stdout == cap.stdout == "total 45.0 picked 4090 warnings 0\n"
    # the cache limit is reported by the CLI at exit, not warned inside the program
    assert "reached cache_size_limit (8)" in cap.stderr and "CacheLimitWarning" not in cap.stderr
    con = sqlite3.connect(db)
    names = {r[0] for r in con.execute("SELECT name FROM code_objects WHERE code_id IN "
                                       "(SELECT code_id FROM compiles)")}
    assert {"scale", "pick", "label"} <= names
    # every frame: the one with no array in reach compiled, into a plan
    assert con.execute("SELECT count(*) FROM compiles JOIN code_objects USING (code_id) "
                       "WHERE name = 'label' AND outcome = 'ok'").fetchone()[0] >= 1
    files = [r[0] for r in con.execute("SELECT DISTINCT filename FROM code_objects")]
    pkg = os.path.dirname(os.path.abspath(dynscope.__file__))
    assert not [f for f in files if f.startswith(pkg) or "importlib" in f or f.startswith("<frozen")]
    assert con.execute("SELECT count(*) FROM cache_limits").fetchone()[0] >= 1


def test_capture_tensors_leaves_frames_with_no_array_to_the_interpreter(tmp_path):
    """--capture-tensors: what torch.compile captures, frames with an array
    or tensor in reach; label(n) runs plainly, uncompiled."""
    script = tmp_path / "prog.py"
    script.write_text(PROGRAM)
    db = tmp_path / "run.db"
    cap = subprocess.run([sys.executable, "-m", "dynscope", "run", "--capture-tensors", "--db", str(db),
                          str(script)], capture_output=True, text=True)
    assert cap.returncode == 3 and cap.stdout == "total 45.0 picked 4090 warnings 0\n", cap.stderr
    con = sqlite3.connect(db)
    compiled = {r[0] for r in con.execute("SELECT name FROM code_objects WHERE code_id IN "
                                          "(SELECT code_id FROM compiles)")}
    assert {"scale", "pick"} <= compiled and "label" not in compiled


def test_capture_modes_are_exclusive_and_documented_in_help():
    both = subprocess.run([sys.executable, "-m", "dynscope", "run", "--capture-all", "--capture-tensors",
                           "x.py"], capture_output=True, text=True)
    assert both.returncode == 2 and "not allowed with" in both.stderr
    help_text = subprocess.run([sys.executable, "-m", "dynscope", "run", "--help"],
                               capture_output=True, text=True).stdout
    help_text = " ".join(help_text.split())
    assert "no array or tensor in reach too" in help_text and "--capture-tensors" in help_text


def test_cache_limit_warning_is_a_bool_setting():
    assert dynscope.config.cache_limit_warning is True
    with pytest.raises(TypeError, match="must be a bool"):
        dynscope.config.cache_limit_warning = 1
    assert "cache_limit_warning=True" in repr(dynscope.config)
