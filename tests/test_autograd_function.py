"""torch.autograd.Function.apply where autograd records nothing (grad mode
off: torch.no_grad(), inference) -- transformers' Bloom calls its GeLU
through one: the Function's forward is inlined with a FunctionCtx made
while tracing, as the C apply calls it (engine/translate/tr_autograd.c).
With grad mode on, forward is traced first to learn it is pure, and
Function.apply itself is then one node of the graph: autograd records its
backward when the graph runs.  A forward that writes what the program
sees stays a call break."""
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


def test_apply_with_grad_mode_on_is_one_node_and_autograd_records_its_backward():
    # forward traced first (pure: tensor ops and its context), then dropped:
    # Scale.apply and Shift.apply are each one node, run at run time as
    # eager code runs them, so autograd records their backward
    x = torch.arange(4.0, requires_grad=True)
    e = dynscope.explain(uses)(x)
    assert (e.graph_count, e.graph_break_count) == (1, 0), e
    code = e.graphs[0].code
    assert "Scale.apply(" in code and "Shift.apply(" in code, code
    assert "mul" not in code                  # forward's own ops are not in the graph
    opt = dynscope.optimize("eager")(uses)
    for _ in range(2):
        x.grad = None
        got = opt(x)
        assert torch.equal(got, uses(x.detach()))
        got.backward()
        assert torch.equal(x.grad, torch.full((4,), 3.0))


SEEN = []


class Noted(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        SEEN.append(1)                        # a write the program sees
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2


class IntoInput(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, buf):
        buf.add_(1)                           # into a tensor the program holds
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2, None


def test_a_forward_with_effects_the_program_sees_stays_a_break_under_grad_mode():
    x = torch.ones(3, requires_grad=True)
    SEEN.clear()
    e = dynscope.explain(lambda v: Noted.apply(v).sum())(x)
    assert "call to .append() of a list the program can see" in str(e.break_reasons[0].reason), e
    assert SEEN == [1]                        # the eager call's, once
    e = dynscope.explain(lambda v, b: IntoInput.apply(v, b).sum())(x, torch.zeros(3))
    assert any("IntoInput.apply with grad mode on (autograd records its backward), and its forward "
               "writes what the program can see" in str(b.reason) for b in e.break_reasons), e
    buf = torch.zeros(3)
    opt = dynscope.optimize("eager")(lambda v, b: IntoInput.apply(v, b).sum())
    for n in (1, 2):
        x.grad = None
        opt(x, buf).backward()
        assert torch.equal(buf, torch.full((3,), float(n))) and torch.equal(x.grad, torch.full((3,), 2.0))


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


class Counted(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, log):
        log.append(1)                         # a list the caller made while tracing
        return x * len(log)

    @staticmethod
    def backward(ctx, g):
        return g, None


def counts(x):
    log = []
    return Counted.apply(x, log).sum(), log


def test_a_forward_that_changes_an_argument_the_translation_made_stays_a_break():
    # one apply node would get the list with forward's append already done
    # and append again at run time: 6 for eager's 3 (found in review)
    x = torch.ones(3, requires_grad=True)
    e = dynscope.explain(counts)(x)
    assert any("Counted.apply with grad mode on" in str(b.reason) for b in e.break_reasons), e
    opt = dynscope.optimize("eager")(counts)
    for _ in range(2):
        got, log = opt(x)
        assert torch.equal(got, torch.tensor(3.0)) and log == [1]
