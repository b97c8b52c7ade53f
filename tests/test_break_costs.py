"""What a graph break costs (issue 42, engine/capture/cost.c): the time a
call spends outside graphs after each break -- the eager step and the
resume -- measured on every call of explain's and on 1 call in 64 while
recording, in SQL (break_costs), explain's summary and the entries.

The eager steps here sleep, so that a cost has a floor a loaded machine
cannot undercut: each assertion is a bound the sleep sets (and a ceiling
far above it), never a time the machine must meet."""
import io
import os
import sqlite3
import subprocess
import sys
import textwrap
import time

import numpy as np

import dynscope

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SINK = io.StringIO()
NAP = 0.004           # the costly break's eager step, seconds


def two_breaks(x):
    y = np.sin(x) * 2
    for i in range(3):
        print(i, file=SINK)             # three cheap breaks at one site
    z = np.cos(y) + 1
    time.sleep(NAP)                     # one costly break
    return z * 3


def test_explain_ranks_breaks_by_their_cost_not_their_count():
    out = dynscope.explain(two_breaks)(np.ones(100))
    groups = out.break_summary
    assert [g.count for g in groups][:2] == [1, 3], groups
    costly, cheap = groups[0], groups[1]
    assert "sleep" in costly.reason and "print" in cheap.reason
    assert NAP * 1e9 <= costly.cost_ns < 50 * NAP * 1e9, costly
    assert 0 < cheap.cost_ns < costly.cost_ns
    # each break is the captured frame's time once at most, and the frame's
    # time holds them all (compiles left out of both)
    assert costly.function_ns >= costly.cost_ns + cheap.cost_ns
    text = str(out)
    summary = text[text.index("Graph breaks:"):text.index("Graph breaks, each")]
    assert summary.index("sleep") < summary.index("print"), summary
    assert "outside graphs" in summary and "% of the captured frame's time" in summary


def test_nothing_is_timed_without_recording_or_explain():
    f = dynscope.optimize("eager")(lambda x: two_breaks(x))
    for _ in range(130):
        f(np.ones(10))
    entries = [e for fn in (f, two_breaks) for e in dynscope.cache_entries(fn)]
    assert entries and all(e.sampled_costs["samples"] == 0 for e in entries)


PROGRAM = """
import io, time, numpy as np, dynscope
SINK = io.StringIO()
NAP = {nap}

def inner(y):
    y = y + 1
    time.sleep(NAP)                     # the costly break, in a callee
    return y * 2

@dynscope.optimize("eager")
def step(x):
    y = np.tanh(x)
    print("step", file=SINK)            # a cheap break
    y = y * 2                           # (the resume's graph)
    return inner(y) - 1

for _ in range({calls}):
    step(np.ones(64))
"""


def run_recorded(tmp_path, source):
    """`python -m dynscope run --db` of a program: the database path."""
    prog = tmp_path / "prog.py"
    prog.write_text(source)
    db = tmp_path / "run.db"
    p = subprocess.run([sys.executable, "-m", "dynscope", "run", "--db", str(db), str(prog)],
                       capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=ROOT),
                       timeout=300)
    assert p.returncode == 0, p.stderr
    return db


def record(tmp_path, calls, nap=NAP):
    con = sqlite3.connect(run_recorded(tmp_path, PROGRAM.format(nap=nap, calls=calls)))
    con.row_factory = sqlite3.Row
    return con


def test_recorded_costs_rank_the_costly_break_first_and_count_it_once(tmp_path):
    calls = 400
    con = record(tmp_path, calls)
    rows = con.execute("SELECT * FROM break_costs WHERE calls > 0 ORDER BY cost_ns DESC").fetchall()
    assert rows and "sleep" in rows[0]["reason"], [dict(r) for r in rows]
    # the sleep breaks `inner` and, around the call of it, `step`: each
    # frame's span leaves out its callee's, so the site costs one sleep a call
    sleep_ns = sum(r["cost_ns"] for r in rows if "sleep" in r["reason"])
    print_ns = sum(r["cost_ns"] for r in rows if "print" in r["reason"])
    assert 0.8 * NAP * 1e9 <= sleep_ns / calls < 3 * NAP * 1e9, [dict(r) for r in rows]
    assert print_ns < sleep_ns / 5
    assert all(r["samples"] > 0 for r in rows)
    # a graph runs after the print (the resume's), one per call
    (printed,) = [r for r in rows if "print" in r["reason"]]
    assert printed["extra_graphs"] == printed["calls"] >= calls - 2
    # the function's time holds its breaks' (both estimated from the samples)
    assert printed["function_ns"] >= 0.8 * sleep_ns
    # the time series carries the same columns
    (n,) = con.execute("SELECT count(*) FROM entry_stats WHERE cost_samples > 0").fetchone()
    assert n > 0


def test_a_v5_file_reads_break_costs_with_costs_unknown(tmp_path):
    """A reader of a file from before v6 gets break_costs as a TEMP view
    (store/schema.c VIEW_BREAK_COSTS_OLDER): the sites, costs NULL."""
    con = record(tmp_path, 3, nap=0)
    assert con.execute("PRAGMA user_version").fetchone()[0] == 6
    con.execute("DROP VIEW break_costs")
    for table in ("cache_entries", "entry_stats"):
        for column in ("cost_samples", "run_ns", "break_ns", "break_graphs"):
            con.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
    con.execute("PRAGMA user_version = 5")
    con.commit()
    from dynscope import _C
    con.executescript(_C.store_temp_views_sql(5))
    rows = con.execute("SELECT reason, breaks, cost_ns, function_ns FROM break_costs").fetchall()
    assert {"print" in r["reason"] for r in rows} == {True, False}, [tuple(r) for r in rows]
    assert all(r["cost_ns"] is None and r["function_ns"] is None for r in rows)


LIMITED = """
import time, warnings, numpy as np, dynscope
warnings.simplefilter("ignore")

@dynscope.optimize("eager", dynamic=False)
def f(x, n):
    y = x * n                           # a constant n: one entry per value
    time.sleep({nap})
    return y + n

for i in range(40):
    f(np.ones(3), i)                    # 8 compiles, then 32 calls at the limit
"""


def test_a_frame_at_its_cache_limit_records_the_calls_it_ran_uncaptured(tmp_path):
    db = run_recorded(tmp_path, LIMITED.format(nap=NAP))
    con = sqlite3.connect(db)
    rows = con.execute("SELECT frame_id, calls, uncaptured_ns, cost_samples FROM cache_limits "
                       "WHERE resume_offset = 0").fetchall()
    assert len(rows) == 1, rows
    _, calls, ns, samples = rows[0]
    assert calls == 40 - 8 and samples > 0
    assert 0.8 * NAP * 1e9 * calls <= ns < 20 * NAP * 1e9 * calls, rows
    w = subprocess.run([sys.executable, "-m", "dynscope", "whatif", str(db)], capture_output=True,
                       text=True, env=dict(os.environ, PYTHONPATH=ROOT))
    assert w.returncode == 0, w.stderr
    assert f"since then {calls} calls ran without capture, " in w.stdout, w.stdout
