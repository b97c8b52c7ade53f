"""The report's advice for sources that keep a frame recompiling
(dynscope/advice.py): what automatic dynamic could not settle, and what the
user can do about it -- read from a real recording's recompile reasons."""
import os
import subprocess
import sys

from dynscope import advice

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PROGRAM = '''
import numpy as np, dynscope

@dynscope.optimize("eager")
def loops(x):                       # x.shape[0] is a loop count
    t = x[0] * 0
    for i in range(x.shape[0]):
        t = t + x[i]
    return t

@dynscope.optimize("eager")
def counts(x, n):                   # so is n
    for _ in range(n):
        x = x + 1
    return x

@dynscope.optimize("eager")
def rows(x):                        # automatic dynamic settles this one
    return x.sum(0) * 2

for b in range(3, 9):
    loops(np.ones((b, 2)))
    counts(np.ones(2), b)
    rows(np.ones((b, 2)))
'''


def record(tmp_path):
    script, db = tmp_path / "prog.py", tmp_path / "run.db"
    script.write_text(PROGRAM)
    subprocess.run([sys.executable, "-m", "dynscope", "run", "--db", str(db), str(script)],
                   cwd=ROOT, check=True, capture_output=True, timeout=300)
    return db


def test_the_report_names_each_source_that_keeps_recompiling_and_what_to_do(tmp_path):
    db = record(tmp_path)
    out = subprocess.run([sys.executable, "-m", "dynscope", "report", str(db)], cwd=ROOT,
                         check=True, capture_output=True, text=True, timeout=120).stdout
    section = out.split("Sources that keep recompiling", 1)[1].split("\n\n", 1)[0]
    lines = [ln for ln in section.splitlines() if ln.startswith(("loops", "counts", "rows"))]
    assert len(lines) == 2, section              # rows: dynamic after one recompile
    (loop_line,) = [ln for ln in lines if ln.startswith("loops")]
    assert "L['x']" in loop_line and " 5 " in loop_line
    assert "needs L['x'].size(0) as a number" in loop_line and "mark_dynamic cannot help" in loop_line
    (count_line,) = [ln for ln in lines if ln.startswith("counts")]
    assert "needs L['n'] as a number" in count_line


def test_each_kind_of_failing_guard_gets_its_own_advice():
    assert advice._parse("L['x'].shape == (4, 3) (observed (4, 5))") == ("L['x']", "size", [1])
    assert advice._parse("L['w'].seen == 7 (observed 8)") == ("L['w'].seen", "int", [])
    assert advice._parse("len(L['xs']) == 2 (observed 3)") == ("len(L['xs'])", "length", [])
    assert advice._parse("type(L['x']) is int (observed float)") is None
    tip = advice._advice("L['self']._parameters['w']", "size", [0], kept=False)
    assert "mark_dynamic(<L['self']._parameters['w']>, 0)" in tip
    assert "force_parameter_static_shapes = False" in tip
    assert "each length compiles once" in advice._advice("len(L['xs'])", "length", [], kept=False)
