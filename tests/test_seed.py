"""The seed example of the field, on NumPy: toy_example without its branch
under optimize(my_compiler), as TorchDynamo's README shows it."""
import pytest
import numpy as np

import dynscope
from dynscope import _C


def toy_example(a, b):
    x = a / (np.abs(a) + 1)
    return x * b


def test_seed_backend_called_once_and_100_calls_match_eager(capsys):
    compiled = []

    def my_compiler(gm, example_inputs):
        print("my_compiler() called with FX graph:")
        gm.graph.print_tabular()
        compiled.append((gm, example_inputs))
        return gm.forward

    opt = dynscope.optimize(my_compiler)(toy_example)
    rng = np.random.default_rng(0)
    for _ in range(100):
        a = rng.standard_normal(10).astype(np.float32)
        b = rng.standard_normal(10).astype(np.float32)
        got = opt(a, b)
        want = toy_example(a, b)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)

    assert len(compiled) == 1
    gm, example_inputs = compiled[0]
    assert len(example_inputs) == 2
    out = capsys.readouterr().out
    assert "my_compiler() called with FX graph:" in out
    # the table lists the graph's ops in order
    for needle in ("placeholder", "call_function", "output", "abs", "add", "truediv", "mul"):
        assert needle in out, needle
    ops = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert len(ops) == 4
    assert [n.op for n in gm.graph.nodes].count("placeholder") == 2

    (entry,) = dynscope.cache_entries(toy_example)
    assert entry.compile_id == "0/0"
    assert entry.hits == 99
    assert entry.resume_offset == 0
    kinds = sorted(g.kind for g in entry.guards)
    assert kinds.count("TENSOR_MATCH") == 2


def test_context_manager_captures_calls_inside(counting_backend):
    a = np.arange(6, dtype=np.float64).reshape(2, 3)
    b = np.ones((2, 3))
    with dynscope.optimize(counting_backend):
        r1 = toy_example(a, b)
        r2 = toy_example(a, b)
    np.testing.assert_array_equal(r1, toy_example(a, b))
    np.testing.assert_array_equal(r2, r1)
    assert len(counting_backend.graphs) == 1
    (entry,) = dynscope.cache_entries(toy_example)
    assert entry.hits == 1


def test_hook_installed_only_inside_capture():
    assert not _C.hook_installed()
    with dynscope.optimize("eager"):
        assert _C.hook_installed()
        with dynscope.optimize("eager"):
            assert _C.capture_depth() == 2
        assert _C.hook_installed()
    assert not _C.hook_installed()


def test_graph_module_code_and_forward():
    seen = []

    def backend(gm, example_inputs):
        seen.append(gm)
        return gm.forward

    a = np.linspace(-1, 1, 5)
    b = np.full(5, 2.0)
    dynscope.optimize(backend)(toy_example)(a, b)
    (gm,) = seen
    assert "def forward(" in gm.code
    out = gm.forward(a, b)
    assert isinstance(out, tuple) and len(out) == 1
    np.testing.assert_array_equal(out[0], toy_example(a, b))


@dynscope.optimize("eager")
def _doubled(a):
    return a * 2


class _Scaler:
    @dynscope.optimize("eager")
    def scale(self, a):
        return a * 3


def test_an_optimized_function_pickles_by_reference_as_a_function():
    """multiprocessing sends a function by name: Pool.map(decorated, ...)
    and copy.copy must treat the wrapper as they treat the function."""
    import copy
    import pickle
    for fn in (_doubled, _Scaler.scale):
        for proto in range(pickle.HIGHEST_PROTOCOL + 1):
            assert pickle.loads(pickle.dumps(fn, proto)) is fn
        assert copy.copy(fn) is fn and copy.deepcopy(fn) is fn
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(_doubled))(np.ones(2)), [2.0, 2.0])

    def local(a):
        return a
    # a local function cannot be pickled; its wrapper fails the same way
    errors = []
    for fn in (local, dynscope.optimize("eager")(local)):
        with pytest.raises(Exception) as info:
            pickle.dumps(fn)
        errors.append((type(info.value), str(info.value).split(" object")[0]))
    assert errors[0][0] is errors[1][0]
    assert "local" in errors[1][1]
