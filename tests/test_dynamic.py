"""Automatic dynamic for numbers (issue 20): optimize(dynamic=None) compiles
an entry specialized on the ints it reads, and when a recompile is caused
by an int argument's value changing, the frame's next entries take that
argument as a graph input and serve every value; floats are graph inputs
from the start.  A number the code needs as a constant (a branch on it,
range(n)) stays specialized.  dynamic=True: every number a graph input from
the start; dynamic=False: always specialized (today's behaviour before)."""
import numpy as np
import pytest

import dynscope
from dynscope import _C

from conftest import events


def scale(x, n):
    return x * n + 1


def step_size(x, lr):
    return x - lr * x


def branches_on(x, n):
    if n > 3:
        return x + n
    return x - n


def loops_over(x, n):
    for _ in range(n):
        x = x * 2
    return x


def compiles():
    return _C.counters()["compiles"]


def run_all(fn, values, dynamic=None):
    opt = dynscope.optimize("eager", dynamic=dynamic)(fn)
    for v in values:
        got, want = opt(np.arange(3.0), v), fn(np.arange(3.0), v)
        np.testing.assert_array_equal(got, want)
        assert type(got) is type(want)
    return compiles()


def test_an_int_argument_taking_20_values_compiles_twice():
    assert run_all(scale, range(20)) == 2
    (rec,) = events("recompile")
    assert "L['n'] == 0 (observed 1)" in rec["reason"]
    assert "L['n'] is now dynamic" in rec["reason"]
    (entry,) = [e for e in dynscope.cache_entries(scale) if e.compile_id == "0/1"]
    kinds = {g.source: g.kind for g in entry.guards}
    assert kinds["L['n']"] == "TYPE_MATCH"                 # no value guard: any int
    assert len(entry.graph.graph.nodes) >= 3               # n is a placeholder


def test_a_float_argument_compiles_once():
    assert run_all(step_size, [0.1 * i for i in range(20)]) == 1
    assert events("recompile") == []


def test_dynamic_true_compiles_once_and_false_recompiles_each_value():
    assert run_all(scale, range(6), dynamic=True) == 1
    dynscope.reset()
    with pytest.warns(dynscope.CacheLimitWarning):
        assert run_all(scale, range(12), dynamic=False) == 8     # config.cache_size_limit


def test_a_branch_on_the_number_keeps_it_specialized_and_correct():
    run_all(branches_on, range(6))
    entries = dynscope.cache_entries(branches_on)
    assert len(entries) == 6
    for e in entries:                                    # each its own value
        assert any(g.kind == "EQUALS_MATCH" and g.source == "L['n']" for g in e.guards)


def test_range_of_the_number_stays_a_static_loop():
    assert run_all(loops_over, [2, 3, 2, 3, 4]) == 3
    assert all(len(e.graph.graph.nodes) > 2 for e in dynscope.cache_entries(loops_over))
    first, second = events("recompile")
    assert "L['n'] stays static (the code needs its value" in first["reason"]
    assert "dynamic" not in second["reason"]                 # not marked again


def log_line(step, value):
    print(f"step {step:3d}  loss {value:.4f}")
    return value * 2


def test_numbers_only_printed_stay_dynamic_no_recompile_per_value(capsys):
    opt = dynscope.optimize("eager")(log_line)
    got = [opt(s, 1.5 + s) for s in range(0, 40, 10)]
    assert got == [log_line(s, 1.5 + s) for s in range(0, 40, 10)]
    out = capsys.readouterr().out.splitlines()
    assert out[:4] == out[4:] and out[1] == "step  10  loss 11.5000"
    (rec,) = events("recompile")                             # step: once, value: never
    assert "L['step'] is now dynamic" in rec["reason"]


def test_optimize_rejects_a_bad_dynamic_value():
    with pytest.raises(TypeError, match="dynamic must be None, True or False"):
        dynscope.optimize("eager", dynamic="yes")
    assert dynscope.optimize("eager", dynamic=True).dynamic is True
    assert dynscope.optimize("eager").dynamic is None


def test_numbers_of_a_torch_program_are_graph_inputs_too():
    torch = pytest.importorskip("torch", exc_type=ImportError)

    def attenuate(x, k, p):
        return x * k + p

    opt = dynscope.optimize("eager")(attenuate)
    x = torch.arange(4.0)
    for k in range(10):
        assert torch.equal(opt(x, k, k / 3), attenuate(x, k, k / 3))
    assert compiles() == 2
