"""Readable places (issue 41): a file of an installed package is shown from
its package on -- `fakepkg/model.py:7`, not the absolute path of the venv --
in the report, dyntop and explain; SQL keeps the full path, and the HTML
report shows it on hover (dynscope/places.py, event/places.c)."""
import os
import re
import sqlite3
import subprocess
import sys
import textwrap

import pytest

import _programs

from dynscope import places

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DYNTOP = os.path.join(ROOT, "build", "dyntop")

PACKAGE = textwrap.dedent('''\
    import numpy as np
    import dynscope


    @dynscope.optimize("eager", dynamic=False)
    def step(x):
        y = np.sin(x)
        print(end="")              # a graph break inside an installed package
        return y * 2
''')


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """A package under a site-packages directory, and a recording of a program using it."""
    tmp = tmp_path_factory.mktemp("places")
    site = tmp / "venv" / "lib" / "python3.x" / "site-packages"
    (site / "fakepkg").mkdir(parents=True)
    (site / "fakepkg" / "__init__.py").write_text("")
    (site / "fakepkg" / "model.py").write_text(PACKAGE)
    (tmp / "prog.py").write_text("import numpy as np\nfrom fakepkg import model\n"
                                 "for n in (3, 4):\n    model.step(np.ones(n))\n")
    db = tmp / "run.db"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, str(site)]))
    subprocess.run([sys.executable, "-m", "dynscope", "run", "--db", str(db), "prog.py"], cwd=tmp,
                   check=True, capture_output=True, env=env)
    return site, db, env


def test_the_rule():
    assert places.readable("/x/venv/lib/python3.11/site-packages/transformers/utils/generic.py") == \
        "transformers/utils/generic.py"
    assert places.readable("/usr/lib/python3/dist-packages/numpy/core.py") == "numpy/core.py"
    assert places.readable("/home/me/train.py") == "/home/me/train.py"
    assert places.readable("/x/site-packages/a/_vendor/site-packages/b.py") == "b.py"
    assert places.readable(None) is None


def test_sql_keeps_the_full_path_and_the_report_shows_the_package(installed):
    site, db, env = installed
    (full,) = sqlite3.connect(db).execute("SELECT filename FROM code_objects").fetchone()
    assert full == str(site / "fakepkg" / "model.py")
    out = subprocess.run([sys.executable, "-m", "dynscope", "report", str(db)], check=True,
                         capture_output=True, text=True, env=env).stdout
    assert re.search(r"^step\s+fakepkg/model\.py:5\s+2\s", out, re.M), out   # both frames recompiled
    assert "fakepkg/model.py:8" in out          # the break's site
    assert str(site) not in out


def test_the_html_shows_the_package_and_the_full_path_on_hover(installed, tmp_path):
    site, db, env = installed
    subprocess.run([sys.executable, "-m", "dynscope", "report", "--html", str(tmp_path / "s"), str(db)],
                   check=True, capture_output=True, env=env)
    index = (tmp_path / "s" / "index.html").read_text()
    full = str(site / "fakepkg" / "model.py")
    assert f'<span class="site" title="{full}:5">fakepkg/model.py:5</span>' in index


@pytest.mark.skipif(not os.access(DYNTOP, os.X_OK), reason="build/dyntop is not built (make)")
def test_dyntop_shows_the_package(installed):
    _, db, _ = installed
    out = _programs.run([DYNTOP, "-b", str(db)], check=True, capture_output=True, text=True).stdout
    assert re.search(r"\bstep\s+fakepkg/model\.py:5\b", out), out


def test_explain_shows_the_package(installed):
    site, _, env = installed
    code = ("import numpy as np, dynscope\nfrom fakepkg import model\n"
            "print(dynscope.explain(model.step.__wrapped__ if hasattr(model.step, '__wrapped__')"
            " else model.step)(np.ones(3)))")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True,
                         env=env).stdout
    assert re.search(r"^\s+fakepkg/model\.py:8 in step$", out, re.M), out
    assert str(site) not in out.split("Graph breaks, each")[1].split("\n\n")[0]


DECORATED = textwrap.dedent('''\
    import functools
    import numpy as np
    import dynscope


    def can_return_tuple(func):
        @functools.wraps(func)
        def wrapper(self, x):
            return func(self, x)
        return wrapper


    class Model:
        @can_return_tuple
        def forward(self, x):
            return np.sin(x) * 2


    class Other:
        @can_return_tuple
        def forward(self, x):
            return np.cos(x) + 1


    def run(m, x):
        return m.forward(x)


    if __name__ == "__main__":
        f = dynscope.optimize("eager")(run)
        for m in (Model(), Other()):
            f(m, np.ones(3))
            dynscope.optimize("eager")(m.forward)(np.ones(3))   # the wrapper as a frame of its own
''')


@pytest.fixture(scope="module")
def decorated(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("decorated")
    (tmp / "prog.py").write_text(DECORATED)
    db = tmp / "run.db"
    subprocess.run([sys.executable, "-m", "dynscope", "run", "--db", str(db), "prog.py"], cwd=tmp,
                   check=True, capture_output=True, env=dict(os.environ, PYTHONPATH=ROOT))
    return tmp, db


def test_a_decorators_wrapper_is_named_by_what_it_wraps_in_sql_and_the_report(decorated):
    _, db = decorated
    con = sqlite3.connect(db)
    wrapper = [(name, json_last) for name, json_last in con.execute(
        "SELECT co.name, json_extract(c.call_path, '$[#-1][2]') FROM compiles c"
        " JOIN code_objects co USING (run_id, code_id) WHERE co.name LIKE '%wrapper'"
        " ORDER BY c.compile_row")]
    assert wrapper == [("can_return_tuple.<locals>.wrapper", "can_return_tuple(wrapper) → Model.forward"),
                       ("can_return_tuple.<locals>.wrapper", "can_return_tuple(wrapper) → Other.forward")]
    out = subprocess.run([sys.executable, "-m", "dynscope", "report", str(db)], check=True,
                         capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=ROOT)).stdout
    # per function: every function the code ran as; per compile: the one it ran as
    assert re.search(r"^can_return_tuple\(wrapper\) → Model\.forward, Other\.forward\s+prog\.py:7\s+1\s",
                     out, re.M), out
    assert re.search(r"^can_return_tuple\(wrapper\) → Other\.forward\s+\[\d/1\]", out, re.M), out
    assert "· can_return_tuple(wrapper) → Model.forward (prog.py:7)" in out        # the stack trie
    assert "can_return_tuple.<locals>.wrapper" not in out.split("Recompiles: the nearest")[0]


@pytest.mark.skipif(not os.access(DYNTOP, os.X_OK), reason="build/dyntop is not built (make)")
def test_dyntop_names_a_decorators_wrapper_by_what_it_wraps(decorated):
    _, db = decorated
    out = _programs.run([DYNTOP, "-b", str(db)], check=True, capture_output=True, text=True).stdout
    assert "can_return_tuple(wrapper) → Model.forward +1" in out, out


def test_explain_names_a_decorators_wrapper_by_what_it_wraps(decorated):
    tmp, _ = decorated
    code = ("import numpy as np, dynscope, prog\n"
            "print(dynscope.explain(prog.Model.forward)(prog.Model(), np.ones(3)))")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True,
                         cwd=tmp, env=dict(os.environ, PYTHONPATH=ROOT)).stdout
    assert re.search(r"^  can_return_tuple\(wrapper\) → Model\.forward \[0/0\]\s+\d", out, re.M), out
