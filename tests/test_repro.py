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


def record(tmp_path, program):
    """program written to tmp_path/prog.py and run under recording: (prog, db, its stdout)."""
    prog = tmp_path / "prog.py"
    prog.write_text(program)
    db = tmp_path / "run.db"
    p = cmd("-m", "dynscope", "run", "--db", str(db), str(prog))
    assert p.returncode == 0, p.stderr
    return prog, db, p.stdout


@pytest.fixture
def recorded(tmp_path):
    return record(tmp_path, PROGRAM)[:2]


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


BACKEND_PROGRAM = textwrap.dedent('''\
    import numpy as np
    import dynscope

    calls = []


    def picky(gm, example_inputs):
        """Fails on a graph that holds both a sine and a product, and counts its calls."""
        calls.append(len(list(gm.graph.nodes)))
        names = {getattr(n.target, "__name__", "") for n in gm.graph.nodes if n.op == "call_function"}
        if {"sin", "mul"} <= names:
            raise NotImplementedError("picky cannot fuse sin with mul")
        return gm.forward


    def f(x, y):
        a = x + y
        b = np.cos(a) - 1.0
        c = np.sin(b) * y
        d = np.exp(a) / 2.0
        return c + d


    if __name__ == "__main__":
        g = dynscope.optimize(picky)(f)
        for _ in range(3):
            out = g(np.ones((3, 2)), np.full((3, 2), 2.0))
        assert np.allclose(out, f(np.ones((3, 2)), np.full((3, 2), 2.0)))   # eager's answer
        print("backend calls", len(calls))
''')


@pytest.fixture
def backend_failed(tmp_path):
    prog, db, out = record(tmp_path, BACKEND_PROGRAM)
    assert "backend calls 1" in out, out              # the same inputs do not call it again
    return prog, db


def test_a_backend_error_is_a_skip_naming_the_backend_with_the_graph_it_failed_on(backend_failed):
    import sqlite3
    _prog, db = backend_failed
    con = sqlite3.connect(db)
    assert con.execute("SELECT reason, break_type FROM frame_skips").fetchall() == [
        ("backend 'picky' raised NotImplementedError: picky cannot fuse sin with mul", "DS0033")]
    (code, ops, nodes), = con.execute("SELECT g.code, g.ops, g.nodes FROM graphs g JOIN compiles c"
                                      " USING (compile_row) WHERE c.outcome = 'skipped'").fetchall()
    assert ops.split(",") == ["add", "cos", "sub", "sin", "mul", "exp", "truediv", "add_1"] and nodes == 8
    assert "# input l_x_: ndarray float64 (3, 2)" in code and "# input l_y_: ndarray float64 (3, 2)" in code


def test_a_backend_error_happens_again_standalone_and_minified(backend_failed, tmp_path):
    prog, db = backend_failed
    full, small = tmp_path / "full.py", tmp_path / "small.py"
    p = cmd("-m", "dynscope", "repro", str(db), "--compile", "f:0/0", "-o", str(full))
    assert p.returncode == 0 and "8 nodes, as recorded" in p.stdout, p.stdout + p.stderr
    p = cmd("-m", "dynscope", "repro", str(db), "--compile", "f:0/0", "--minify", "-o", str(small))
    assert p.returncode == 0 and "minified from 8 nodes to 2" in p.stdout, p.stdout + p.stderr
    text = small.read_text()
    body = text[text.index("def forward("):text.index("inputs = [")]
    assert "numpy.sin(" in body and "operator.mul(" in body and "numpy.cos(" not in body, body
    for script in (full, small):
        os.rename(prog, tmp_path / "gone.py")            # standalone: the program is not needed ...
        (tmp_path / "gone.py").rename(prog)              # ... but the backend is looked for in it
        r = cmd(str(script), cwd=str(tmp_path))
        assert r.returncode == 0, r.stdout + r.stderr
        assert "repro: backend picky raised NotImplementedError: picky cannot fuse sin with mul again" \
            in r.stdout
    # the check can fail: a backend that compiles the graph is not the recorded error
    (tmp_path / "fixed.py").write_text("def ok(gm, example_inputs):\n    return gm.forward\n")
    r = cmd(str(small), f"{tmp_path / 'fixed.py'}:ok", cwd=str(tmp_path))
    assert r.returncode != 0 and "the recorded error did not happen" in r.stderr, r.stderr


def test_a_backend_the_script_cannot_find_is_said_in_one_line(backend_failed, tmp_path):
    prog, db = backend_failed
    out = tmp_path / "r.py"
    assert cmd("-m", "dynscope", "repro", str(db), "--compile", "f:0/0", "-o", str(out)).returncode == 0
    prog.write_text("# the program no longer defines its backend\n")
    r = cmd(str(out))
    assert r.returncode == 1 and r.stderr.strip().startswith("repro: backend 'picky' is neither"), r.stderr
    p = cmd("-m", "dynscope", "repro", str(db), "--compile", "f:0/0", "--minify")
    assert p.returncode != 0 and "--backend MODULE:NAME" in p.stderr, p.stderr
    p = cmd("-m", "dynscope", "repro", str(db), "--compile", "f:0/0", "--minify",
            "--backend", "operator:add")
    assert p.returncode != 0 and "does not fail on the recorded graph now" in p.stderr, p.stderr


def test_minify_is_refused_for_a_compile_that_is_no_backend_error(recorded):
    _prog, db = recorded
    p = cmd("-m", "dynscope", "repro", str(db), "--compile", "smooth:0/0", "--minify")
    assert p.returncode != 0 and "--minify shrinks a graph a backend failed on" in p.stderr


TORCH_MODEL = textwrap.dedent('''\
    import torch


    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(8, 8)

        def forward(self, x):
            pos = torch.arange(x.shape[1], device=x.device)     # a device constant in the graph
            h = self.proj(x) + pos[:, None]
            return torch.softmax(h, dim=-1).sum(1)
''')

TORCH_PROGRAM = textwrap.dedent('''\
    import torch
    import dynscope
    from model import Net


    def no_softmax(gm, example_inputs):        # defined in the program, not beside Net
        for n in gm.graph.nodes:
            if "softmax" in str(n.target):
                raise NotImplementedError("no lowering for softmax")
        return gm.forward


    if __name__ == "__main__":
        torch.manual_seed(0)
        net = Net()
        x = torch.randn(2, 5, 8)
        assert torch.equal(dynscope.optimize(no_softmax)(net)(x), net(x))
''')


def test_a_torch_backend_error_is_minified_with_parameters_and_device_constants(tmp_path):
    pytest.importorskip("torch")
    (tmp_path / "model.py").write_text(TORCH_MODEL)
    prog, db, _ = record(tmp_path, TORCH_PROGRAM)
    small = tmp_path / "small.py"
    p = cmd("-m", "dynscope", "repro", str(db), "--compile", "Net.forward:0/0", "--minify", "-o", str(small))
    assert p.returncode == 0 and "minified from" in p.stdout and "nodes to 1 " in p.stdout, p.stdout + p.stderr
    text = small.read_text()
    assert "softmax = torch.softmax(" in text and "proj" not in text.split("def forward(")[1], text
    r = cmd(str(small), cwd=str(tmp_path))             # no_softmax is found in the program's script
    assert r.returncode == 0 and "raised NotImplementedError: no lowering for softmax again" in r.stdout, \
        r.stdout + r.stderr
    full = tmp_path / "full.py"
    assert cmd("-m", "dynscope", "repro", str(db), "--compile", "Net.forward:0/0", "-o", str(full)).returncode == 0
    assert "= torch.arange(5, device=device(type='cpu'))" in full.read_text()
    r = cmd(str(full), cwd=str(tmp_path))              # the whole graph: parameters, the device
    assert r.returncode == 0, r.stdout + r.stderr


def test_a_recorded_graph_reads_back_whole_and_in_parts():
    from dynscope.minify import Graph
    g = Graph("def forward(self, l_x_):\n    a = operator.add(l_x_, 1)\n    b = a.sum(0)\n"
              "    c = operator.mul(a, b)\n    return (a, c)\n# input l_x_: ndarray float64 (3, 2)\n")
    assert g.inputs == [("l_x_", "ndarray float64 (3, 2)")] and g.modules() == ["operator"]
    whole, params = g.source()
    assert params == ["l_x_"] and whole.endswith("    return (a, c)\n")   # every output, an intermediate too
    part, params = g.source([1, 2])
    assert params == ["a"]                   # a dropped node's value becomes an input
    assert part == "def forward(a):\n    b = a.sum(0)\n    c = operator.mul(a, b)\n    return (c,)\n"


@pytest.mark.parametrize("desc, want", [
    ("ndarray float64 (3, 2)", "_rng.standard_normal((3, 2)).astype(numpy.float64)"),
    ("ndarray int64 ()", "_rng.integers(0, 8, ()).astype(numpy.int64)"),
    ("Tensor torch.float32 torch.Size([3, 2])", "torch.randn((3, 2), generator=_gen).to(torch.float32)"),
    ("Parameter torch.float32 torch.Size([4])", "torch.randn((4,), generator=_gen).to(torch.float32)"),
    ("Tensor torch.int64 torch.Size([1, 6])", "torch.randint(0, 8, (1, 6), generator=_gen, dtype=torch.int64)"),
    ("int 5", "5"),
])
def test_a_recorded_input_is_rebuilt_from_its_description(desc, want):
    from dynscope.minify import input_expr
    assert input_expr(desc) == want
    with pytest.raises(ValueError, match="no recorded description"):
        input_expr("?")
