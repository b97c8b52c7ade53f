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
    assert r["error"] is None, r["error"]
    s = conformance.summarize(r)
    assert s["tests"] > 20, "the suite ran (almost) no tests"
    assert r["diffs"] == [], "outcomes differ under capture: " + "; ".join(
        f"{t}: plain {p}, captured {c}" for t, p, c in r["diffs"])
    # capture really happened, and was recorded
    assert s["seen"] > 1000 and s["captured"] > s["seen"] // 2
    assert os.path.getsize(os.path.join(tmp_path, suite.replace(" ", "_") + ".db")) > 0
