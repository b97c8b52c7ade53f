"""Dumps you can read, import and step through (issue 41, dynscope/dump.py):
each compile as DIR/<function>_<frame>_<compile>.py with forward() (the
graph), check(L, G) (the guards) and the plan; the dumped check agrees with
the engine, the dumped forward gives the graph's outputs, and pdb stops on
a line of a dump."""
import importlib.util
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import dynscope

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load(path):
    spec = importlib.util.spec_from_file_location(os.path.basename(path)[:-3], path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def scaled(x, n):
    y = np.sin(x) * n + np.exp(-x).sum()
    return y[1:] - x[:-1]


@pytest.fixture
def dumped(tmp_path):
    dynscope.reset()
    dynscope.dump(tmp_path)
    try:
        g = dynscope.optimize("eager", dynamic=False)(scaled)
        calls = [(np.arange(3.0), 2), (np.arange(4.0), 2), (np.arange(3.0), 5)]
        for x, n in calls:
            g(x, n)
    finally:
        dynscope.dump(None)
    yield tmp_path, calls
    dynscope.reset()


def test_each_compile_is_a_file_with_forward_check_and_plan(dumped):
    d, calls = dumped
    names = sorted(os.listdir(d))
    assert names == ["scaled_0_0.py", "scaled_0_1.py", "scaled_0_2.py"]
    text = (d / "scaled_0_0.py").read_text()
    assert "def forward(l_x_):" in text and "def check(L, G, S=()):" in text and "PLAN = " in text
    # each guard a line, with the source that made it
    assert re.search(r"return False  # TENSOR_MATCH: type\(L\['x'\]\) is numpy.ndarray .*"
                     r"\(test_dump.py:\d+\)", text), text


def test_the_dumped_check_agrees_with_the_engine_on_every_recorded_input(dumped):
    d, calls = dumped
    entries = {e.compile_id: e for e in dynscope.cache_entries(scaled)}
    assert sorted(entries) == ["0/0", "0/1", "0/2"]
    for cid in entries:
        m = load(str(d / f"scaled_{cid.replace('/', '_')}.py"))
        got = [m.check({"x": x, "n": n}, scaled.__globals__) for x, n in calls]
        # the entry compiled for call i passes call i's inputs only
        assert got == [i == int(cid.split("/")[1]) for i in range(len(calls))], (cid, got)


def test_the_dumped_forward_gives_the_graphs_outputs(dumped):
    d, calls = dumped
    for e in dynscope.cache_entries(scaled):
        m = load(str(d / f"scaled_{e.compile_id.replace('/', '_')}.py"))
        x, n = calls[int(e.compile_id.split("/")[1])]
        want = e.graph.forward(x)
        got = m.forward(x)
        assert len(got) == len(want) and all(np.array_equal(a, b) for a, b in zip(got, want))
        # run() calls forward on the plan's graph inputs; the program's result follows from it
        assert np.array_equal(m.run({"x": x, "n": n}, scaled.__globals__)[0], want[0])


def test_pdb_stops_on_a_line_of_a_dump(dumped, tmp_path):
    d, calls = dumped
    path = str(d / "scaled_0_0.py")
    line = next(i for i, ln in enumerate(open(path), 1) if ln.strip().startswith("sin = "))
    script = tmp_path / "step.py"
    script.write_text("import importlib.util, numpy as np\n"
                      f"spec = importlib.util.spec_from_file_location('dumped', {path!r})\n"
                      "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
                      "print('result', m.forward(np.arange(3.0))[0])\n")
    p = subprocess.run([sys.executable, "-m", "pdb", str(script)], input=(
        f"b {path}:{line + 1}\nc\np sin\nc\n"), capture_output=True, text=True, timeout=60,
        env=dict(os.environ, PYTHONPATH=ROOT))
    assert f"{path}({line + 1})forward()" in p.stdout, p.stdout
    assert "array([0.        , 0.84147098, 0.90929743])" in p.stdout, p.stdout   # sin of the input
    assert "result" in p.stdout


def test_dynscope_dump_from_the_environment(tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text("import numpy as np, dynscope\n"
                    "f = dynscope.optimize('eager')(lambda x: np.cos(x) + 1)\nf(np.ones(2))\n")
    out = tmp_path / "dumps"
    subprocess.run([sys.executable, str(prog)], check=True, capture_output=True,
                   env=dict(os.environ, PYTHONPATH=ROOT, DYNSCOPE_DUMP=str(out)))
    (name,) = os.listdir(out)
    assert name == "lambda_0_0.py" and "numpy.cos" in (out / name).read_text()


def test_debug_graphs_runs_the_programs_graph_from_its_file_and_pdb_stops_in_it(tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text("import numpy as np, dynscope\n"
                    "@dynscope.optimize('eager')\n"
                    "def f(x):\n"
                    "    y = np.sin(x) * 2\n"
                    "    return y + 1\n"
                    "print('first', f(np.arange(3.0)))\n"
                    "print('second', f(np.arange(3.0)))\n")
    dumps = tmp_path / "dumps"
    graph = dumps / "graph_0.py"
    # stop before the second call (the first compiled: the graph's file exists), then in
    # the graph's file on the line after sin: the program's own call stops there
    commands = f"b {prog}:7\nc\nb {graph}:16\nc\np sin\nc\n"
    p = subprocess.run([sys.executable, "-m", "pdb", str(prog)], input=commands, capture_output=True,
                       text=True, timeout=60,
                       env=dict(os.environ, PYTHONPATH=ROOT, DYNSCOPE_DUMP=str(dumps),
                                DYNSCOPE_DEBUG_GRAPHS="1"))
    assert f"{graph}(16)forward()" in p.stdout, p.stdout
    assert "array([0.        , 0.84147098, 0.90929743])" in p.stdout, p.stdout
    assert "second [1.         2.68294197 2.81859485]" in p.stdout
    assert graph.read_text().splitlines()[15].strip() == "mul = operator.mul(sin, 2)"


def test_a_failing_dump_stops_itself_and_leaves_the_logs_running(tmp_path, monkeypatch, capfd):
    dump_module = sys.modules["dynscope.dump"]     # (dynscope.dump is the function)
    monkeypatch.setattr(dump_module, "render", lambda *a: (_ for _ in ()).throw(ValueError("boom")))
    log = tmp_path / "log.txt"
    dynscope.reset()
    dynscope.set_logs("recompiles", file=str(log))
    dynscope.dump(tmp_path / "d")
    try:
        g = dynscope.optimize("eager", dynamic=False)(scaled)
        for n in (2, 3):
            g(np.arange(3.0), n)                    # a compile, then a recompile
    finally:
        dynscope.dump(None)
        dynscope.set_logs("")
        dynscope.reset()
    assert "the dump listener failed (ValueError: boom); it stops" in capfd.readouterr().err
    assert "dynscope [recompiles]" in log.read_text()     # the logs went on


def test_debug_graphs_run_a_torch_graph_from_its_file(tmp_path):
    """A torch graph's code names its ops as torch spells them (torch.relu, not
    the private class torch's functions live on), so its file runs as written."""
    pytest.importorskip("torch")
    prog = tmp_path / "prog.py"
    prog.write_text("import torch, dynscope\n"
                    "def f(x):\n"
                    "    return torch.relu(x).sin().sum(0) * 2\n"
                    "x = torch.arange(6.0).reshape(3, 2) - 2\n"
                    "got = dynscope.optimize('eager')(f)(x)\n"
                    "assert torch.equal(got, f(x)), (got, f(x))\n"
                    "print('ok', got.tolist())\n")
    dumps = tmp_path / "dumps"
    p = subprocess.run([sys.executable, str(prog)], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PYTHONPATH=ROOT, DYNSCOPE_DUMP=str(dumps),
                                DYNSCOPE_DEBUG_GRAPHS="1"))
    assert p.returncode == 0 and p.stdout.startswith("ok"), p.stdout + p.stderr
    text = (dumps / "graph_0.py").read_text()
    assert "relu = torch.relu(l_x_)" in text and "_VariableFunctionsClass" not in text, text
