"""torch.autograd.Function.apply where autograd records nothing (grad mode
off: torch.no_grad(), inference) -- transformers' Bloom calls its GeLU
through one: the Function's forward is inlined with a FunctionCtx made
while tracing, as the C apply calls it (engine/translate/tr_autograd.c).
With grad mode on the call is a break, and runs as eagerly."""
import pytest

import dynscope

torch = pytest.importorskip("torch", exc_type=ImportError)


class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, k):
        ctx.save_for_backward(x)
        ctx.k = k
        return x * k

    @staticmethod
    def backward(ctx, g):
        return g * ctx.k, None


class Shift(torch.autograd.Function):
    """The setup_context style: forward without ctx."""

    @staticmethod
    def forward(x, by):
        return x + by

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.by = inputs[1]

    @staticmethod
    def backward(ctx, g):
        return g, None


class Same(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x


def uses(x):
    return Shift.apply(Scale.apply(x, 3.0), 1.0).sum()


def test_apply_under_no_grad_is_its_forward_in_the_graph():
    x = torch.arange(4.0)
    with torch.no_grad():
        e = dynscope.explain(uses)(x)
        assert e.graph_count == 1 and e.graph_break_count == 0
        opt = dynscope.optimize("eager")(uses)
        for _ in range(2):
            assert torch.equal(opt(x), uses(x))
    assert dynscope._C.counters()["graph_breaks"] == 0


def test_apply_with_grad_mode_on_is_a_break_and_its_backward_runs():
    x = torch.arange(4.0, requires_grad=True)
    e = dynscope.explain(uses)(x)
    assert any("apply with grad mode on" in b.reason for b in e.break_reasons)
    got = dynscope.optimize("eager")(uses)(x)
    got.backward()
    assert torch.equal(x.grad, torch.full((4,), 3.0))


def test_a_forward_that_returns_its_input_is_left_to_apply():
    # apply hands back a view of an input returned as it is: another object
    def f(x):
        y = Same.apply(x)
        return y is x, y * 2

    x = torch.ones(3)
    with torch.no_grad():
        want = f(x)
        got = dynscope.optimize("eager")(f)(x)
    assert got[0] is want[0] is False and torch.equal(got[1], want[1])


def test_a_forward_patched_later_compiles_again():
    class Twice(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

    def f(x):
        return Twice.apply(x) + 1

    x = torch.ones(2)
    with torch.no_grad():
        opt = dynscope.optimize("eager")(f)
        assert torch.equal(opt(x), torch.full((2,), 3.0))
        Twice.forward = staticmethod(lambda ctx, x: x * 5)
        assert torch.equal(opt(x), torch.full((2,), 6.0))
    assert dynscope._C.counters()["compiles"] == 2
