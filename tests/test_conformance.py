"""Conformance (issue 9): test suites nobody here wrote, plain and captured.

The representative subset of scripts/conformance.py (`make conformance` runs
every suite and writes docs/conformance.md): each suite runs in a fresh
interpreter plain and under `python -m dynscope run --capture-all`, and every
test must have the same outcome in both.  The captured run must really have
captured: frames seen and captured, and its SQLite file written.
"""
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts"))
import conformance  # noqa: E402


@pytest.mark.parametrize("suite", conformance.SUBSET)
def test_suite_has_the_same_outcomes_plain_and_captured(suite, tmp_path):
    r = conformance.run_suite(suite, sys.executable, str(tmp_path))
    if r["absent"]:  # not in this version's test package, as KNOWN_ABSENT says
        pytest.skip(r["absent"])
    assert r["error"] is None, r["error"]
    s = conformance.summarize(r)
    assert s["tests"] > 20, "the suite ran (almost) no tests"
    assert r["diffs"] == [], f"{len(r['diffs'])} outcomes differ under capture: " + "; ".join(
        f"{t}: plain {p}, captured {c}" for t, p, c in r["diffs"][:10])
    # capture really happened, and was recorded
    assert s["seen"] > 1000 and s["captured"] > s["seen"] // 2
    assert os.path.getsize(os.path.join(tmp_path, suite.replace(" ", "_") + ".db")) > 0


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

import sqlite3  # noqa: E402
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
        return str(n)         # no array in reach: runs without capture

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
    assert {"scale", "pick"} <= names and "label" not in names
    files = [r[0] for r in con.execute("SELECT DISTINCT filename FROM code_objects")]
    pkg = os.path.dirname(os.path.abspath(dynscope.__file__))
    assert not [f for f in files if f.startswith(pkg) or "importlib" in f or f.startswith("<frozen")]
    assert con.execute("SELECT count(*) FROM cache_limits").fetchone()[0] >= 1


def test_cache_limit_warning_is_a_bool_setting():
    assert dynscope.config.cache_limit_warning is True
    with pytest.raises(TypeError, match="must be a bool"):
        dynscope.config.cache_limit_warning = 1
    assert "cache_limit_warning=True" in repr(dynscope.config)
