"""Torch function modes entered while tracing (translate/tr_fnmode.c):
inside `with SomeMode():` in a function the captured frame calls, each
torch call is handed to the mode's __torch_function__, inlined, with what
torch hands it in eager (func, types, args, kwargs); the graph gets what
the mode does.  A mode entered in the captured frame itself, or a stop
inside one, leaves that code to run for real, mode and all.  Skipped
without torch."""
import gc

import pytest

from conftest import TORCH_SKIP_REASON, skip_torch_throw_under_asan

torch = pytest.importorskip("torch", reason=TORCH_SKIP_REASON, exc_type=ImportError)

# what a mode is handed is asked of torch by a probe that stops the call's
# dispatch with an exception, which torch's C++ carries as one of its own
pytestmark = skip_torch_throw_under_asan

gc.collect()
gc.freeze()

import dynscope  # noqa: E402
from dynscope import _C  # noqa: E402
from torch.overrides import TorchFunctionMode  # noqa: E402


class Doubling(TorchFunctionMode):
    """Doubles what Tensor.add (x + y) gives: a mode that changes values."""
    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        return out * 2 if func is torch.Tensor.add else out


class Handed(TorchFunctionMode):
    """Adds to each result how many keyword arguments and types torch
    handed over: F.relu hands {'inplace': False} and (Tensor,), a C method
    None and ()."""
    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        return out + 10 * len(kwargs or {}) + 100 * len(types)


def in_mode(mode_class, body):
    def helper(*args):
        with mode_class():
            return body(*args)
    return helper


X, Y = torch.randn(4, 3), torch.randn(4, 3)


def check_one_graph(fn, *args):
    want = fn(*args)
    opt = dynscope.optimize("eager")(fn)
    for _ in range(2):
        got = opt(*args)
        assert torch.equal(got, want)
    c = _C.counters()
    assert (c["compiles"], c["graph_breaks"], c["skips"]) == (1, 0, 0)
    assert torch._C._len_torch_function_stack() == 0
    return want


def test_a_mode_that_changes_values_is_traced_through_its_torch_function():
    helper = in_mode(Doubling, lambda x, y: (x + y) * 3)

    def f(x, y):
        return helper(x, y) - 1
    got = check_one_graph(f, X, Y)
    assert torch.equal(got, (X + Y) * 2 * 3 - 1)      # the mode's doubling is in the graph
    ex = dynscope.explain(f)(X, Y)
    assert (ex.graph_count, ex.graph_break_count) == (1, 0)


def test_the_mode_is_handed_what_torch_hands_it():
    helper = in_mode(Handed, lambda x: torch.nn.functional.relu(x).sum(0) + x.mean())
    got = check_one_graph(lambda x: helper(x), X)
    # relu: kwargs {'inplace': False}, types (Tensor,) -> +110; sum and mean
    # (C methods) and + (Tensor.add, C) hand None and () -> +0
    assert torch.equal(got, (torch.relu(X) + 110).sum(0) + X.mean())


def test_transform_getitem_to_index_under_vmap_is_one_graph():
    trace_wrapped = pytest.importorskip("torch._dynamo._trace_wrapped_higher_order_op")

    def mask(pm):
        def inner(b, kv):
            return pm[b, kv] & (kv <= b)
        return inner

    def build(pm):
        b, kv = torch.arange(pm.shape[0]), torch.arange(pm.shape[1])
        with trace_wrapped.TransformGetItemToIndex():
            return torch.vmap(torch.vmap(mask(pm), in_dims=(None, 0)), in_dims=(0, None))(b, kv)

    pm = torch.rand(3, 5) > 0.3
    with torch.no_grad():      # (with grad on, the mode's ModIndex.apply is a break)
        got = check_one_graph(lambda p: build(p) | False, pm)
    assert torch.equal(got, pm & (torch.arange(5)[None, :] <= torch.arange(3)[:, None]))


def test_a_mode_entered_in_the_captured_frame_itself_runs_for_real():
    def f(x, y):
        with Doubling():
            z = x + y
        return z - 1
    ex = dynscope.explain(f)(X, Y)
    (skip,) = [s for s in ex.skipped if s[0].endswith(".f")]
    assert "torch function mode entered in the captured function itself" in skip[2]
    opt = dynscope.optimize("eager")(f)
    for _ in range(2):
        assert torch.equal(opt(X, Y), (X + Y) * 2 - 1)
    assert torch._C._len_torch_function_stack() == 0


def test_a_stop_inside_a_mode_runs_the_whole_call_eagerly_with_its_mode():
    def body(x, y):
        z = x + y
        print(end="")                          # a break: the helper call runs eagerly
        return z + x
    helper = in_mode(Doubling, body)

    def f(x, y):
        return helper(x * 1, y) * 5
    want = ((X + Y) * 2 + X) * 2 * 5
    opt = dynscope.optimize("eager")(f)
    for _ in range(2):
        assert torch.equal(opt(X, Y), want)
        assert torch._C._len_torch_function_stack() == 0
    assert _C.counters()["graph_breaks"] >= 1


def test_a_mode_the_program_can_see_keeps_its_state_right():
    class Counting(TorchFunctionMode):
        def __init__(self):
            super().__init__()
            self.calls = 0

        def __torch_function__(self, func, types, args=(), kwargs=None):
            self.calls += 1
            return func(*args, **(kwargs or {}))

    mode = Counting()

    def helper(x):
        with mode:
            return x.sin() + x.cos()

    def f(x):
        return helper(x) * 2
    opt = dynscope.optimize("eager")(f)
    for i in range(1, 3):
        assert torch.equal(opt(X), (X.sin() + X.cos()) * 2)
        assert mode.calls == 3 * i                      # sin, cos, add: each counted


def test_aten_index_is_a_graph_op_for_integer_indices_and_a_break_for_a_mask():
    """aten.index is tagged dynamic_output_shape for its boolean masks: each
    call's meta kernel tells (tensorops_library.c)."""
    def by_ints(x, i):
        return torch.ops.aten.index(x, [i]) * 2

    i = torch.tensor([2, 0, 3])
    got = check_one_graph(by_ints, X, i)
    assert torch.equal(got, X[i] * 2)
    dynscope.reset()
    mask = torch.tensor([True, False, True, True])
    opt = dynscope.optimize("eager")(by_ints)
    assert torch.equal(opt(X, mask), X[mask] * 2)
    ex = dynscope.explain(by_ints)(X, mask)
    assert ex.graph_break_count == 1
    assert "meta kernel" in str(ex.break_reasons[0].reason)
