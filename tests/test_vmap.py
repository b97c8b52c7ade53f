"""torch.vmap captured (translate/tr_vmap.c): the vmapped function inlined
between functorch's level nodes (_vmap_increment_nesting, _add_batch_dim,
_remove_batch_dim, _vmap_decrement_nesting), as torch.vmap's own Python
runs it, so results are eager's bit for bit; a level is never left open,
while tracing or when a run fails (graph_program.c scopes).  And what
torch's associative_scan reaches through it: functools.partial made while
tracing, lazy map(), torch.Size.numel().  Skipped without torch."""
import gc
import functools

import pytest

from conftest import TORCH_SKIP_REASON, CountingBackend, skip_torch_throw_under_asan

torch = pytest.importorskip("torch", reason=TORCH_SKIP_REASON, exc_type=ImportError)

gc.collect()
gc.freeze()

import dynscope  # noqa: E402
from dynscope import _C  # noqa: E402
from torch._C._functorch import maybe_current_level  # noqa: E402


def captured(fn, backend="eager"):
    return dynscope.optimize(backend)(fn)


def same(a, b):
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return torch.equal(a, b) and a.dtype == b.dtype and a.stride() == b.stride()


def one_graph_equal_to_eager(fn, *args):
    want = fn(*args)
    opt = captured(fn)
    for _ in range(2):
        assert same(opt(*args), want)
    c = _C.counters()
    assert c["graph_breaks"] == 0 and c["skips"] == 0 and c["compiles"] == 1
    assert maybe_current_level() is None
    (entry,) = dynscope.cache_entries(fn)
    return entry


X, Y, W = torch.randn(4, 3), torch.randn(4, 3), torch.randn(3)


def test_a_vmap_call_is_one_graph_between_functorchs_level_nodes():
    def f(x, y):
        return torch.vmap(lambda a, b: a * b + W)(x, y) + 2    # W: a global, not batched
    one_graph_equal_to_eager(f, X, Y)
    r = dynscope.explain(f)(X, Y)
    (graph,) = r.graphs
    names = [getattr(n.target, "__name__", "") for n in graph.graph.nodes if n.op == "call_function"]
    assert [n for n in names if "_vmap_" in n or "_batch_dim" in n] == [
        "_vmap_increment_nesting", "_add_batch_dim", "_add_batch_dim",
        "_remove_batch_dim", "_vmap_decrement_nesting"]


def test_in_dims_out_dims_nesting_and_pytrees_are_vmaps():
    def dims(x, y):
        g = torch.vmap(lambda a, b: (a.sum(), a @ b), in_dims=(0, None), out_dims=(0, 1))
        return g(x, y.T)

    def nested(x, y):
        inner = torch.vmap(lambda a, b: a * b)
        return torch.vmap(inner)(x.reshape(2, 2, 3), y.reshape(2, 2, 3))

    def pytree(x, y):
        def comb(left, right):
            (a1, b1), (a2, b2) = left, right
            return a1 * a2, a2 * b1 + b2
        return torch.vmap(comb, in_dims=((0, 0), (0, 0)))((x, y), (y, x))

    def negative_dim(x, y):
        return torch.func.vmap(lambda a: a.softmax(0), in_dims=-1)(x)
    for fn in (dims, nested, pytree, negative_dim):
        dynscope.reset()
        one_graph_equal_to_eager(fn, X, Y)


@skip_torch_throw_under_asan
def test_what_vmap_refuses_raises_as_eager_and_leaves_no_level_open():
    def sizes_differ(x, y):
        return torch.vmap(lambda a, b: a + b)(x, y[:3])

    def item_inside(x, y):
        return torch.vmap(lambda a: a.sum().item())(x)

    def caught(x, y):
        try:
            return torch.vmap(lambda a: a.sum().item())(x)
        except RuntimeError:
            return x + 1
    for fn in (sizes_differ, item_inside):
        dynscope.reset()
        with pytest.raises(Exception) as eager:
            fn(X, Y)
        with pytest.raises(type(eager.value), match=str(eager.value)[:30]):
            captured(fn)(X, Y)
        assert maybe_current_level() is None
    assert same(captured(caught)(X, Y), X + 1)
    assert maybe_current_level() is None


@skip_torch_throw_under_asan
def test_a_run_that_fails_inside_the_level_closes_it():
    # gather's indices are data: the trace's are in range, the next call's
    # are not; the op raises inside the level, whose node opened it
    def f(x, idx):
        return torch.vmap(lambda a, i: torch.gather(a, 0, i) * 2)(x, idx) + 1
    good, bad = torch.zeros(4, 2, dtype=torch.long), torch.full((4, 2), 9)
    one_graph_equal_to_eager(f, X, good)
    opt = captured(f)
    with pytest.raises(RuntimeError, match="out of bounds"):
        opt(X, bad)
    assert maybe_current_level() is None
    assert same(opt(X, good), f(X, good))
    assert same(X * 2, X + X)                       # plain ops are not batched


def test_a_torch_fx_backend_gets_no_vmap_and_the_call_runs_eagerly():
    # (the lambda, called by vmap on batched tensors, is a frame of its own)
    backend = CountingBackend()

    def f(x, y):
        return torch.vmap(lambda a, b: a * b)(x, y) + 1
    opt = captured(f, backend)
    assert same(opt(X, Y), f(X, Y))
    assert _C.counters()["skips"] == 1          # f runs uncaptured
    for gm in backend.graphs:
        assert "batch_dim" not in gm.code and "vmap" not in gm.code
    assert maybe_current_level() is None


def test_associative_scan_is_one_graph_equal_to_eager():
    from torch._higher_order_ops.associative_scan import associative_scan
    a, b = torch.rand(1, 4, 8, 3), torch.rand(1, 4, 8, 3)

    def comb(left, right):
        a_l, b_l = left
        a_r, b_r = right
        return a_l * a_r, a_r * b_l + b_r

    def f(a, b):
        return associative_scan(comb, (a, b), dim=2, combine_mode="generic")
    one_graph_equal_to_eager(f, a, b)


def test_a_size_method_is_folded():
    def f(x):
        return x * x.shape.numel() + x.shape.count(3) + x.shape.index(3)
    one_graph_equal_to_eager(f, X)


def test_a_partial_of_a_torch_function_made_while_tracing():
    def f(x):
        act = functools.partial(torch.nn.functional.gelu, approximate="tanh")
        return act(x) + functools.partial(torch.add, alpha=2)(x, x)
    one_graph_equal_to_eager(f, X)
