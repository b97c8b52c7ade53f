"""`python -m dynscope repro` (issue 41, dynscope/repro.py): a standalone
script that rebuilds a recorded compile's inputs and checks its outcome --
the break reasons, the recompile's failing guard -- happens again; it fails
when the outcome changed, and says so when the function is gone."""
import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PROGRAM = textwrap.dedent('''\
    import numpy as np
    import dynscope


    @dynscope.optimize("eager")
    def smooth(x, n):
        for _ in range(n):                 # n is a loop count: each new n recompiles
            x = 0.5 * (x + x.mean())
        if x.sum() > 0:                    # a branch on an array value: a break
            x = x * 2
        return x


    if __name__ == "__main__":
        for n in (1, 2, 3):
            smooth(np.ones((4, 3), dtype=np.float32), n)
''')


def cmd(*args, cwd=None):
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=cwd,
                          env=dict(os.environ, PYTHONPATH=ROOT), timeout=120)


@pytest.fixture
def recorded(tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text(PROGRAM)
    db = tmp_path / "run.db"
    p = cmd("-m", "dynscope", "run", "--db", str(db), str(prog))
    assert p.returncode == 0, p.stderr
    return prog, db


def test_a_break_and_a_recompile_happen_again(recorded, tmp_path):
    prog, db = recorded
    for target in ("smooth:0/0", "smooth:0/2"):      # the first compile, and a recompile
        out = tmp_path / f"repro_{target[-1]}.py"
        p = cmd("-m", "dynscope", "repro", str(db), "--compile", target, "-o", str(out))
        assert p.returncode == 0, p.stderr
        text = out.read_text()
        assert "astype(numpy.float32)" in text and "(4, 3)" in text
        r = cmd(str(out))
        assert r.returncode == 0, r.stdout + r.stderr
        assert f"repro: smooth [{target[-3:]}]: the recorded outcome happened again" in r.stdout
    assert "n=2" in (tmp_path / "repro_2.py").read_text() and "n=3" in (tmp_path / "repro_2.py").read_text()


def test_a_changed_outcome_fails_the_repro(recorded, tmp_path):
    prog, db = recorded
    out = tmp_path / "repro.py"
    assert cmd("-m", "dynscope", "repro", str(db), "--compile", "smooth:0/0", "-o", str(out)).returncode == 0
    prog.write_text(PROGRAM.replace("if x.sum() > 0:", "if False:"))   # the break is gone
    r = cmd(str(out))
    assert r.returncode != 0 and "AssertionError" in r.stderr


def test_a_function_that_is_gone_is_said_in_one_line(recorded, tmp_path):
    prog, db = recorded
    out = tmp_path / "repro.py"
    assert cmd("-m", "dynscope", "repro", str(db), "--compile", "smooth:0/0", "-o", str(out)).returncode == 0
    prog.unlink()
    r = cmd(str(out))
    assert r.returncode == 1 and r.stderr.strip().startswith(f"repro: cannot import smooth from {prog}:")


def test_what_it_cannot_do_is_one_line(recorded):
    _, db = recorded
    p = cmd("-m", "dynscope", "repro", str(db), "--compile", "smooth:1/0")
    assert p.returncode == 2 and "resumes after a graph break" in p.stderr and "Traceback" not in p.stderr
    p = cmd("-m", "dynscope", "repro", str(db), "--compile", "nope:0/0")
    assert p.returncode == 2 and p.stderr.strip() == f"dynscope repro: {db} has no compile nope:0/0"
