"""`python -m dynscope whatif` (issue 42, dynscope/whatif.py): the
recompiles a dynamic source would have removed, read from the recorded
guard failures; each suggestion is checked by applying it and counting the
compiles again."""
import json
import os
import re
import sqlite3
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "data")


def dynscope_cmd(*args, env=None, cwd=None):
    return subprocess.run([sys.executable, "-m", "dynscope", *args], capture_output=True, text=True,
                          cwd=cwd, env=dict(os.environ, PYTHONPATH=ROOT, **(env or {})))


def record(tmp_path, script, mode=None):
    db = tmp_path / f"{mode or 'run'}.db"
    p = dynscope_cmd("run", "--db", str(db), script, cwd=DATA if not os.path.isabs(script) else None,
                     env={"WHATIF_MODE": mode} if mode else None)
    assert p.returncode == 0, p.stderr
    return db


def compiles(db, name):
    con = sqlite3.connect(db)
    (n,) = con.execute("SELECT count(*) FROM compiles c JOIN code_objects co USING (run_id, code_id)"
                       " WHERE co.name = ? AND c.outcome = 'ok'", (name,)).fetchone()
    return n


def answers(db):
    p = dynscope_cmd("whatif", "--json", str(db))
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


@pytest.mark.parametrize("mode, applied, call", [
    ("static", "dynamic", "optimize(..., dynamic=True)"),
    ("auto", "marked", "dynscope.mark_dynamic(x, 0) before the first call"),
])
def test_a_suggestion_applied_removes_the_compiles_it_said(tmp_path, mode, applied, call):
    db = record(tmp_path, "whatif_shapes.py", mode)
    before = compiles(db, "smooth")
    (frame,) = [f for f in answers(db) if f["function"] == "smooth"]
    assert frame["compiles"] == before and frame["most_failed"][0] == "L['x']"
    (s,) = frame["suggestions"]
    assert s["source"] == "L['x']" and s["can_be_dynamic"] and s["call"] == call
    assert s["removes"] > 0 and s["compiles_after"] == before - s["removes"]
    text = dynscope_cmd("whatif", str(db)).stdout
    assert f"marking L['x'] dynamic ({call}) removes {s['removes']} of {before} compiles of smooth" in text
    # apply it: the compiles fall as predicted
    after = compiles(record(tmp_path, "whatif_shapes.py", applied), "smooth")
    assert after == s["compiles_after"], (before, after, s)


def test_on_the_demo_a_loop_count_cannot_become_dynamic_and_the_cache_limit_is_named(tmp_path):
    db = record(tmp_path, os.path.join(ROOT, "scripts", "demo_workload.py"))
    (smooth,) = [f for f in answers(db) if f["function"] == "smooth"]
    assert smooth["cache_limit"] is not None and smooth["most_failed"][0] == "L['n']"
    # what the recompiles cost: their compile time, and the guard time of the entries they added
    con = sqlite3.connect(db)
    (ns,) = con.execute("SELECT sum(c.duration_ns) FROM compiles c JOIN code_objects co"
                        " USING (run_id, code_id) WHERE co.name = 'smooth' AND c.frame_compile_id > 0"
                        " AND c.outcome = 'ok'").fetchone()
    (guard,) = con.execute("SELECT sum(e.guard_ns) FROM cache_entries e JOIN compiles c"
                           " ON c.compile_row = e.compile_row JOIN code_objects co"
                           " ON co.run_id = e.run_id AND co.code_id = e.code_id"
                           " WHERE co.name = 'smooth' AND c.frame_compile_id > 0").fetchone()
    assert smooth["recompile_ns"] == ns > 0 and smooth["extra_guard_ns"] == guard
    con.close()
    (s,) = [s for s in smooth["suggestions"] if s["source"] == "L['n']"]
    assert not s["can_be_dynamic"] and s["removes"] == 0 and s["call"] is None
    text = dynscope_cmd("whatif", str(db)).stdout
    m = re.search(r"L\['n'\] cannot become dynamic: the code needs its value \(a loop count, a branch\),"
                  r" so each of its (\d+) new values compiled smooth again; to lift its cache-limit"
                  r" hit, bucket L\['n'\] to a few values, or raise dynscope.config.cache_size_limit"
                  r" to (\d+) or more", text)
    assert m, text
    con = sqlite3.connect(db)
    (limit_value,) = con.execute("SELECT reason FROM cache_limits").fetchone()
    # the values it saw: every entry's, and the one that met the limit
    entries = compiles(db, "smooth")
    assert int(m.group(2)) == entries + 1 and "observed" in limit_value
    # the report says the same
    report = dynscope_cmd("report", str(db)).stdout
    assert "What if a source were dynamic (from the recorded guard failures)" in report
    assert "L['n'] cannot become dynamic" in report


def test_bad_input_is_one_line(tmp_path):
    bad = tmp_path / "not.db"
    bad.write_text("hello")
    p = dynscope_cmd("whatif", str(bad))
    assert p.returncode == 2 and p.stderr.startswith("dynscope whatif: ")
    assert len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr


def _helper(x):
    import numpy as np
    print(end="")                      # a break: _helper is a frame of its own
    return np.tanh(x) * 2


def _loop():
    import numpy as np
    return sum(float(_helper(np.ones(n)).sum()) for n in range(3, 9))


def test_explain_says_the_same_and_applying_it_holds(capsys):
    import dynscope
    dynscope.reset()
    eb = dynscope.ExplainBackend("eager")
    dynscope.optimize(eb, dynamic=False)(_loop)()
    text = str(eb.output())
    m = re.search(r"What if a source were dynamic \(from the guards that failed\)\n"
                  r"  _helper \[frame \d+\]: marking L\['x'\] dynamic \(optimize\(\.\.\., dynamic=True\)\)"
                  r" removes (\d+) of (\d+) compiles of _helper", text)
    assert m, text
    removes, total = int(m.group(1)), int(m.group(2))
    assert total == 6 and removes == 5
    before = len([c for c in eb.output().compile_times if c.function.endswith("_helper")])
    dynscope.reset()
    eb = dynscope.ExplainBackend("eager")
    dynscope.optimize(eb, dynamic=True)(_loop)()
    after = [c for c in eb.output().compile_times if c.function.endswith("_helper")]
    assert len(after) == before - removes     # the frame before the break compiled once in both
    dynscope.reset()
