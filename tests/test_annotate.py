"""The program's own marks (issue 42, dynscope/annotate.py): annotate() and
annotate_span() reach SQL (the annotations table), the Chrome-trace export
and dyntop's header; LTTng's dynscope:annotate is in tests/test_trace_provider.py
(its fields) and below when a session can run."""
import json
import os
import sqlite3
import subprocess
import sys

import pytest

import _programs

import dynscope

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "data")
DYNTOP = os.path.join(ROOT, "build", "dyntop")


def run(*args):
    p = subprocess.run([sys.executable, "-m", "dynscope", *args], capture_output=True, text=True,
                       cwd=DATA, env=dict(os.environ, PYTHONPATH=ROOT))
    assert p.returncode == 0, p.stderr
    return p.stdout


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    path = tmp_path_factory.mktemp("marks") / "a.db"
    run("run", "--db", str(path), "annotated.py")
    return path


def rows(db, sql):
    con = sqlite3.connect(db)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def test_marks_and_spans_are_rows_in_order(db):
    got = [(n, p, json.loads(f)) for n, p, f in
           rows(db, "SELECT name, phase, fields FROM annotations ORDER BY annotation_id")]
    want = []
    for epoch in range(2):
        want.append(("epoch", "begin", {"n": epoch}))
        want += [("step", "mark", {"n": s, "lr": 0.1, "shape": [3 + s]}) for s in range(3)]
        want.append(("epoch", "end", {"n": epoch}))
    want += [("eval", "begin", {}), ("eval", "end", {"error": "KeyError"})]
    assert got == want
    ats = [a for (a,) in rows(db, "SELECT at FROM annotations ORDER BY annotation_id")]
    assert ats == sorted(ats)
    # the compiles fall in the steps of the first epoch, one in each
    per_step = rows(db, """
        SELECT a.annotation_id, count(c.compile_row) FROM annotations a
          LEFT JOIN compiles c ON c.started_at >= a.at AND c.started_at < (
              SELECT min(b.at) FROM annotations b WHERE b.annotation_id > a.annotation_id)
         WHERE a.name = 'step' GROUP BY a.annotation_id ORDER BY a.annotation_id""")
    assert [n for _, n in per_step] == [1, 1, 1, 0, 0, 0]


def test_the_export_draws_marks_and_spans_on_a_track_of_their_own(db, tmp_path):
    out = tmp_path / "t.json"
    run("export", "--chrome-trace", str(out), str(db))
    events = json.loads(out.read_text())["traceEvents"]
    marks = [e for e in events if e.get("cat") == "annotation"]
    assert [(e["name"], e["ph"]) for e in marks] == (
        [("epoch", "X")] + [("step", "i")] * 3 + [("epoch", "X")] + [("step", "i")] * 3
        + [("eval", "X")])
    (track,) = {e["tid"] for e in marks}
    names = {e["tid"]: e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert names[track] == "the program's marks (dynscope.annotate)"
    steps = [e for e in marks if e["name"] == "step"]
    epochs = [e for e in marks if e["name"] == "epoch"]
    for s in steps:     # each step inside its epoch's slice
        assert any(e["ts"] <= s["ts"] <= e["ts"] + e["dur"] for e in epochs)
    assert marks[-1]["args"] == {"error": "KeyError"}


@pytest.mark.skipif(not os.access(DYNTOP, os.X_OK), reason="build/dyntop is not built (make)")
def test_dyntop_shows_the_newest_mark(db):
    p = _programs.run([DYNTOP, "-b", str(db)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert 'mark eval (end) {"error": "KeyError"}' in p.stdout.splitlines()[0]


def test_bad_names_and_fields_are_refused_and_nothing_is_emitted():
    for bad in ("", None, 3):
        with pytest.raises(TypeError, match="the name must be a non-empty str"):
            dynscope.annotate(bad)
    with pytest.raises(TypeError, match="fields must be JSON-able"):
        dynscope.annotate("step", **{"x": {(1, 2): 3}})
    dynscope.annotate("step", obj=object())      # repr: still a mark
    with dynscope.annotate_span("quiet"):         # nothing recording: a no-op
        pass
