"""Torch calls whose results or callables are not plain: named tuples
(torch.topk, sort, max(dim) return struct sequences) and operators of
torch.ops (torch.library custom ops, aten's overloads) as graph ops, their
sizes checked by their meta kernels.  Skipped without torch."""
import pytest

from conftest import TORCH_SKIP_REASON, skip_torch_throw_under_asan

torch = pytest.importorskip("torch", reason=TORCH_SKIP_REASON, exc_type=ImportError)

import dynscope  # noqa: E402


def _reasons(out):
    return [b.reason for b in out.break_reasons]


# ---- named tuples ----

def test_named_tuple_results_are_graph_values_read_by_field_and_position():
    def f(x):
        r = torch.topk(x, 2, dim=-1)
        v, i = torch.sort(x, dim=-1, descending=True)
        m = x.max(dim=-1)
        return r.values * 2 + r.indices, v[..., :2] - i[..., :2], m[0] + m.indices
    x = torch.randn(3, 5)
    out = dynscope.explain(f)(x)
    assert (out.graph_count, out.graph_break_count) == (1, 0), _reasons(out)
    g = dynscope.optimize("eager")(f)
    for y in (x, torch.randn(3, 5)):
        for a, b in zip(f(y), g(y)):
            assert torch.equal(a, b)


def test_a_named_tuple_the_program_gets_keeps_its_type():
    def f(x):
        r = torch.min(x, dim=0)
        return r, type(r).__name__, isinstance(r, tuple)
    x = torch.randn(4, 3)
    want = f(x)
    got = dynscope.optimize("eager")(f)(x)
    assert type(got[0]) is torch.return_types.min and got[1:] == want[1:] == ("min", True)
    assert torch.equal(got[0].values, want[0].values) and torch.equal(got[0].indices, want[0].indices)
    out = dynscope.explain(f)(x)
    assert (out.graph_count, out.graph_break_count) == (1, 0), _reasons(out)


def test_an_unknown_field_of_a_named_tuple_stops_with_its_name():
    def f(x):
        r = torch.topk(x, 1)
        return r.n_fields, r.values + 1
    x = torch.randn(4)
    assert f(x)[0] == dynscope.optimize("eager")(f)(x)[0] == 2
    out = dynscope.explain(f)(x)
    assert any("attribute 'n_fields' of a torch.return_types.topk" in r for r in _reasons(out))


# ---- operators of torch.ops ----

@torch.library.custom_op("dynscope_test::scaled_rows", mutates_args=())
def scaled_rows(x: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    # opaque: loops over the values of a tensor, as a grouped kernel does
    out = torch.zeros_like(x)
    start = 0
    for i, end in enumerate(counts.tolist()):
        out[start:end] = x[start:end] * (i + 1)
        start = end
    return out


@scaled_rows.register_fake
def _(x, counts):
    return torch.empty_like(x)


@torch.library.custom_op("dynscope_test::positives", mutates_args=())
def positives(x: torch.Tensor) -> torch.Tensor:
    return x[x > 0].clone()


@positives.register_fake
def _(x):
    n = torch.library.get_ctx().new_dynamic_size()
    return x.new_empty(n)


@torch.library.custom_op("dynscope_test::no_fake", mutates_args=())
def no_fake(x: torch.Tensor) -> torch.Tensor:
    return x * 3


@torch.library.custom_op("dynscope_test::bump", mutates_args=("x",))
def bump(x: torch.Tensor) -> None:
    x.add_(1)


def test_a_custom_op_with_a_meta_kernel_is_one_node_of_the_graph():
    def f(x, counts):
        y = torch.ops.dynscope_test.scaled_rows(x.sin(), counts)
        return y.view(2, -1).sum(0) + 1
    x, counts = torch.randn(6, 4), torch.tensor([2, 5, 6])
    out = dynscope.explain(f)(x, counts)
    assert (out.graph_count, out.graph_break_count) == (1, 0), _reasons(out)
    names = [str(op) for ops in out.ops_per_graph for op in ops]
    assert any("scaled_rows" in n for n in names), names
    g = dynscope.optimize("eager")(f)
    for c in (counts, torch.tensor([1, 1, 6]), torch.tensor([0, 3, 6])):
        assert torch.equal(g(x, c), f(x, c))   # the op's own loop runs each call


def test_an_overload_of_aten_is_a_graph_op():
    def f(x):
        return torch.ops.aten.mul.Tensor(x, 2) + torch.ops.aten.relu(x)
    x = torch.randn(5)
    out = dynscope.explain(f)(x)
    assert (out.graph_count, out.graph_break_count) == (1, 0), _reasons(out)
    assert torch.equal(dynscope.optimize("eager")(f)(x), f(x))


@skip_torch_throw_under_asan
def test_a_custom_op_whose_sizes_need_data_or_that_has_no_meta_kernel_breaks():
    def f(x):
        return torch.ops.dynscope_test.positives(x).sum() + 1

    def h(x):
        return torch.ops.dynscope_test.no_fake(x) + 1
    x = torch.randn(50)
    for fn, why in ((f, "positives: its meta kernel"), (h, "no_fake: its meta kernel")):
        out = dynscope.explain(fn)(x)
        assert any(why in r and "missing or needs the data" in r for r in _reasons(out)), _reasons(out)
        g = dynscope.optimize("eager")(fn)
        for y in (x, torch.randn(50)):
            assert torch.equal(g(y), fn(y))


def test_a_custom_op_that_writes_its_input_is_not_a_graph_op():
    def f(x):
        torch.ops.dynscope_test.bump(x)
        return x * 2
    x = torch.zeros(3)
    out = dynscope.explain(f)(x.clone())
    assert any(r.startswith("call of torch.ops dynscope_test.bump, which writes an input")
               for r in _reasons(out)), _reasons(out)
    g = dynscope.optimize("eager")(f)
    y = torch.zeros(3)
    assert torch.equal(g(y), torch.full((3,), 2.0)) and torch.equal(y, torch.ones(3))
    assert torch.equal(g(y), torch.full((3,), 4.0)) and torch.equal(y, torch.full((3,), 2.0))


def test_a_private_torch_builtin_that_is_a_functional_aten_op_is_a_graph_op():
    # torch._weight_norm (nn.utils.parametrizations.weight_norm's forward) is
    # aten::_weight_norm; torch._standard_gamma draws (nondeterministic_seeded)
    def f(v, g):
        return torch._weight_norm(v, g, 0) + 1

    def draws(x):
        return torch._standard_gamma(x) + 1
    v, g = torch.randn(4, 3), torch.randn(4, 1)
    out = dynscope.explain(f)(v, g)
    assert (out.graph_count, out.graph_break_count) == (1, 0), _reasons(out)
    assert torch.equal(dynscope.optimize("eager")(f)(v, g), f(v, g))
    out = dynscope.explain(draws)(torch.ones(3))
    assert any("_standard_gamma" in r for r in _reasons(out)), _reasons(out)


class _Decorated(torch.nn.Module):
    @torch.no_grad()
    def helper(self, x):
        return x * 2

    def forward(self, x):
        return self.helper(x) + x


def test_a_method_decorated_by_no_grad_is_captured_with_its_grad_mode():
    # the decorator's `with self.clone():` gets its manager from an inlined
    # `return self.__class__()`
    m, x = _Decorated(), torch.ones(3, requires_grad=True)
    out = dynscope.explain(m)(x)
    assert (out.graph_count, out.graph_break_count, out.skipped) == (1, 0, []), _reasons(out)
    got, want = dynscope.optimize("eager")(m)(x), m(x)
    assert torch.equal(got, want) and got.requires_grad and want.requires_grad
    got.sum().backward()
    assert torch.equal(x.grad, torch.ones(3))          # the no_grad part adds nothing


def test_modules_made_in_the_function_are_called_in_the_graph():
    # transformers' ACT2FN[...] and code like canine's make a module per call
    def f(x):
        pooled = torch.nn.MaxPool1d(kernel_size=2, stride=2)(x.unsqueeze(0))
        return torch.nn.Softmax(dim=-1)(x) + pooled.sum()
    x = torch.randn(3, 4)
    out = dynscope.explain(f)(x)
    assert (out.graph_count, out.graph_break_count, out.skipped) == (1, 0, []), _reasons(out)
    names = [getattr(op, "__name__", str(op)) for ops in out.ops_per_graph for op in ops]
    assert "softmax" in names and "max_pool1d" in names, names
    g = dynscope.optimize("eager")(f)
    for y in (x, torch.randn(3, 4)):
        assert torch.equal(g(y), f(y))


def test_a_module_made_in_the_function_that_the_program_keeps_is_built_for_real():
    class Holder:
        pass
    h = Holder()

    def f(x):
        h.act = torch.nn.ReLU()
        return h.act(x) + 1
    x = torch.randn(4)
    got = dynscope.optimize("eager")(f)(x)
    assert torch.equal(got, torch.relu(x) + 1) and isinstance(h.act, torch.nn.ReLU)
    assert torch.equal(h.act(-x), torch.relu(-x))


class _Registered(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("pe", torch.ones(3))

    def forward(self, x):
        # torch's own Module.__setattr__ asks so, before it registers a buffer
        same = getattr(self.register_buffer, "__func__", None) is torch.nn.Module.register_buffer
        return (x + self.pe if same else x), getattr(self.forward, "__self__", None) is self


def test_a_bound_methods_function_and_receiver_are_read_in_the_graph():
    m, x = _Registered(), torch.ones(3)
    out = dynscope.explain(m)(x)
    assert (out.graph_count, out.graph_break_count, out.skipped) == (1, 0, []), _reasons(out)
    got = dynscope.optimize("eager")(m)(x)
    assert torch.equal(got[0], torch.full((3,), 2.0)) and got[1] is True


class _WithClassmethod(torch.nn.Module):
    scale = 2.0

    @classmethod
    def merge(cls, x):
        return x * cls.scale

    def forward(self, x):
        return self.merge(x) + 1


def test_a_classmethod_read_through_a_module_is_called_in_the_graph():
    # gpt_neox_japanese's self._merge_heads, pegasus_x's self.pad_local_tokens
    m, x = _WithClassmethod(), torch.ones(3)
    out = dynscope.explain(m)(x)
    assert (out.graph_count, out.graph_break_count, out.skipped) == (1, 0, []), _reasons(out)
    opt = dynscope.optimize("eager")(m)
    assert torch.equal(opt(x), torch.full((3,), 3.0))
    try:
        _WithClassmethod.scale = 5.0                 # the class it binds is read again
        assert torch.equal(opt(x), torch.full((3,), 6.0))
    finally:
        _WithClassmethod.scale = 2.0


def _autocast_branch(x):
    if torch.is_autocast_enabled("cpu"):
        return x * 2
    return x + torch.ones(1, dtype=torch.get_autocast_dtype("cpu")).float()


def test_a_read_of_autocast_state_is_folded_under_a_guard_on_it():
    x = torch.ones(3)
    out = dynscope.explain(_autocast_branch)(x)
    assert (out.graph_count, out.graph_break_count) == (1, 0), _reasons(out)
    exprs = [g.expr for g in out.out_guards if g.kind == "STATE_QUERY"]
    assert "torch.is_autocast_enabled('cpu') == False" in exprs, exprs
    opt = dynscope.optimize("eager")(_autocast_branch)
    assert torch.equal(opt(x), _autocast_branch(x))
    with torch.autocast("cpu"):                      # the guard fails: the other branch
        assert torch.equal(opt(x), torch.full((3,), 2.0))
    assert torch.equal(opt(x), torch.full((3,), 2.0))  # bfloat16's 1 + 1, back outside


def test_a_read_of_autocast_state_inside_autocast_entered_by_the_code_runs_eagerly():
    def f(x):
        with torch.autocast("cpu"):
            return x * 2 if torch.is_autocast_enabled("cpu") else x
    x = torch.ones(3)
    assert torch.equal(dynscope.optimize("eager")(f)(x), f(x))


# ---- a module's own walks: modules(), parameters(), len() ----

class _Walked(torch.nn.Module):
    """Module.modules() and parameters() run `yield from`, a set of the
    modules seen (`self not in memo`, `memo.add(self)`) and of the
    parameters seen; one layer is shared, so the walk must skip it once."""
    def __init__(self):
        super().__init__()
        shared = torch.nn.Linear(3, 3)
        self.layers = torch.nn.ModuleList([shared, torch.nn.Linear(3, 3), shared])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        n_params = sum(p.numel() for p in self.parameters())
        first = next(self.parameters())
        return x * len(self.layers) + n_params, first.dtype, len(list(self.modules())), n_params


def test_a_modules_own_walks_are_one_graph_with_shared_layers_counted_once():
    m = _Walked()
    x = torch.randn(2, 3)
    want = m(x)
    assert want[2:] == (4, 24)  # the model, its ModuleList, two Linears: the shared one once
    got = dynscope.optimize("eager")(m)(x)
    assert torch.equal(got[0], want[0]) and got[1:] == want[1:]
    out = dynscope.explain(m)(x)
    assert (out.graph_count, out.graph_break_count) == (1, 0), _reasons(out)
    # another model of the same class, whose layers are not shared: other
    # counts, a recompile, never the first model's answer
    m2 = _Walked()
    m2.layers[2] = torch.nn.Linear(3, 3)
    want2 = m2(x)
    assert want2[2:] == (5, 36)
    got2 = dynscope.optimize("eager")(m2)(x)
    assert torch.equal(got2[0], want2[0]) and got2[1:] == want2[1:]


def test_a_model_of_a_thousand_modules_is_one_graph():
    # ~12 guards a module call (type, hooks, instance dict, forward): past
    # the flat 8192, within the 16 more each graph node allows
    def block():
        return torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Tanh())
    m = torch.nn.Sequential(*[torch.nn.Sequential(*[block() for _ in range(12)]) for _ in range(30)])

    def run(x):
        return m(x)
    x = torch.randn(3, 2)
    out = dynscope.explain(run)(x)
    assert (out.graph_count, out.graph_break_count) == (1, 0), _reasons(out)
    assert out.skipped == []
    assert len(out.out_guards) > 8192
    assert torch.equal(dynscope.optimize("eager")(run)(x), m(x))


def test_an_input_tensors_own_attributes_are_read_and_guarded():
    # torch.nn.Buffer sets _is_buffer and persistent on the tensor; its
    # instance check reads getattr(x, "_is_buffer", False)
    def f(x, y):
        return x * 2 if isinstance(x, torch.nn.Buffer) and x.persistent else y, \
            getattr(y, "_is_buffer", False), hasattr(x * 1, "_is_buffer")
    buf, plain = torch.nn.Buffer(torch.ones(3)), torch.zeros(3)
    out = dynscope.explain(f)(buf, plain)
    assert (out.graph_count, out.graph_break_count) == (1, 0), _reasons(out)
    g = dynscope.optimize("eager")(f)
    for x, y in ((buf, plain), (torch.nn.Buffer(torch.ones(3), persistent=False), plain),
                 (plain, buf), (buf, plain)):
        got, want = g(x, y), f(x, y)
        assert torch.equal(got[0], want[0]) and got[1:] == want[1:]


def test_is_between_tensors_the_graph_made_follows_their_objects():
    # nn.MultiheadAttention's `query is not key or key is not value`
    def f(x, cache=None):
        q = x * 2
        k, v = q, x + 1
        same = (q is k, k is not v, q is x, q.to(torch.float32) is q, q.to(torch.float64) is q)
        return torch.where(q > 0, k, v), same, getattr(cache, "is_compileable", False), q.is_nested
    x = torch.randn(4)
    out = dynscope.explain(f)(x)
    assert (out.graph_count, out.graph_break_count) == (1, 0), _reasons(out)
    got, want = dynscope.optimize("eager")(f)(x), f(x)
    assert torch.equal(got[0], want[0]) and got[1:] == want[1:]
    assert want[1] == (True, True, False, True, False)


class _Positions(torch.nn.Module):
    """wav2vec2-conformer's positional table: a non-persistent buffer that
    forward assigns again (nn.Module.__setattr__ -> register_buffer, which
    writes self._buffers and the set of non-persistent names)."""
    def __init__(self):
        super().__init__()
        self.register_buffer("pe", torch.zeros(4), persistent=False)
        self.scale = torch.nn.Identity()

    def forward(self, x):
        self.pe = self.pe * 0 + x
        return self.scale(self.pe) + 1        # a submodule read after the write into _buffers


def test_assigning_a_buffer_in_forward_is_one_graph_and_keeps_it_a_buffer():
    m, ref = _Positions(), _Positions()
    x = torch.randn(4)
    out = dynscope.explain(_Positions().forward)(x)
    assert (out.graph_count, out.graph_break_count) == (1, 0), _reasons(out)
    g = dynscope.optimize("eager")(m.forward)
    for _ in range(2):
        assert torch.equal(g(x), ref(x))
    assert torch.equal(m.pe, ref.pe) and "pe" in m._buffers and "pe" not in m.__dict__
    assert m._non_persistent_buffers_set == ref._non_persistent_buffers_set == {"pe"}
    assert list(m.state_dict()) == list(ref.state_dict()) == []


def test_a_numpy_ufunc_of_python_numbers_is_a_constant_and_one_that_warns_is_not():
    # PEGASUS-X's positional table: -(np.log(float(max_scale)) / (half - 1)),
    # inside a caller's try block; np.log(0.0) warns, so it stays the graph's
    import warnings

    import numpy as np

    def table(x, half):
        scale = -(np.log(float(10000)) / (half - 1))
        return torch.exp(torch.arange(half).float() * scale) + x, np.sqrt(2.0)

    def caller(x, half):
        try:
            return table(x, half)
        except ZeroDivisionError:
            return None

    x = torch.zeros(4)
    out = dynscope.explain(caller)(x, 4)
    assert (out.graph_count, out.graph_break_count) == (1, 0), _reasons(out)
    g = dynscope.optimize("eager")(caller)
    for half in (4, 5, 4):
        got, want = g(torch.zeros(half), half), caller(torch.zeros(half), half)
        assert torch.equal(got[0], want[0]) and got[1] == want[1]

    def log_zero(a):
        return a + np.log(0.0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        h = dynscope.optimize("eager")(log_zero)
        assert np.array_equal(h(np.ones(2)), log_zero(np.ones(2)))
        assert np.array_equal(h(np.ones(2)), log_zero(np.ones(2)))
    assert sum(issubclass(w.category, RuntimeWarning) for w in caught) == 4   # each call warns, as eager
