"""Calls answered without a frame (hook.c capture_call_direct): an optimize()d
function called with exactly its positional parameters, whose entry returns
from its plan, runs its graph straight from the call's arguments.  Whatever
path a call takes, results, exceptions, hit counts and recompiles must be
what the frame path gives."""
import numpy as np
import pytest

import dynscope
from dynscope import _C

SCALE = 2.0


def hits(fn):
    return sum(e.hits for e in dynscope.cache_entries(fn))


def axb1(a, b):
    return a * b + 1


def uses_global(a):
    return a * SCALE


def branchy(a, b):
    c = a * b
    if c.sum() > 0:               # a break: the plan does not return
        return c + 1
    return c - 1


def with_default(a, b=None):
    return a + 1 if b is None else a + b


def with_kwonly(a, *, k=3.0):
    return a * k


def test_hits_are_counted_once_per_call():
    a, b = np.arange(4.0), np.ones(4)
    opt = dynscope.optimize("eager")(axb1)
    before = _C.counters()
    for _ in range(5):
        np.testing.assert_array_equal(opt(a, b), axb1(a, b))
    after = _C.counters()
    assert hits(axb1) == 4
    assert after["hits"] - before["hits"] == 4
    assert after["frames_seen"] - before["frames_seen"] == 5


@pytest.mark.parametrize("n", [2, 5, 50])
def test_a_cache_hit_makes_no_frame(n):
    """N calls: the first compiles (through a frame), each of the N-1 others
    is a hit answered from the call's arguments, without a frame."""
    a, b = np.arange(4.0), np.ones(4)
    opt = dynscope.optimize("eager")(axb1)
    before = _C.counters()
    for _ in range(n):
        np.testing.assert_array_equal(opt(a, b), axb1(a, b))
    after = _C.counters()
    assert after["direct_hits"] - before["direct_hits"] == n - 1
    assert after["hits"] - before["hits"] == n - 1


def test_a_hit_whose_plan_needs_the_frame_is_no_direct_hit():
    """The counter counts frameless hits only: branchy's entry has an eager
    step (the truth test), so its hits go through the frame."""
    a, b = np.arange(4.0), np.ones(4)
    opt = dynscope.optimize("eager")(branchy)
    before = _C.counters()
    for _ in range(5):
        np.testing.assert_array_equal(opt(a, b), branchy(a, b))
    after = _C.counters()
    assert after["hits"] - before["hits"] >= 4
    assert after["direct_hits"] - before["direct_hits"] == 0


def test_a_plan_that_needs_the_frame_runs_it_and_counts_once():
    a = np.arange(4.0)
    opt = dynscope.optimize("eager")(branchy)
    for b in (np.ones(4), -np.ones(4), np.ones(4), -np.ones(4)):
        np.testing.assert_array_equal(opt(a, b), branchy(a, b))
    entries = dynscope.cache_entries(branchy)
    # the start entry: compiled on the first call, hit on the three others
    start = [e for e in entries if e.resume_offset == 0]
    assert [e.hits for e in start] == [3]


@pytest.mark.parametrize("call", [
    lambda f, a: f(a),                 # default filled
    lambda f, a: f(a, b=a),            # keywords
    lambda f, a: f(*[a]),
])
def test_calls_that_do_not_fill_the_parameters_exactly(call):
    a = np.arange(3.0)
    opt = dynscope.optimize("eager")(with_default)
    before = _C.counters()
    for _ in range(3):
        np.testing.assert_array_equal(call(opt, a), call(with_default, a))
    optk = dynscope.optimize("eager")(with_kwonly)
    for _ in range(3):
        np.testing.assert_array_equal(optk(a), with_kwonly(a))
        np.testing.assert_array_equal(optk(a, k=5.0), with_kwonly(a, k=5.0))
    after = _C.counters()
    assert after["hits"] > before["hits"]                 # hits, each through its frame
    assert after["direct_hits"] == before["direct_hits"]


def test_a_changed_global_fails_the_guard_and_recompiles():
    global SCALE
    a = np.arange(3.0)
    opt = dynscope.optimize("eager")(uses_global)
    try:
        for scale in (2.0, 2.0, 3.0, 3.0):
            SCALE = scale
            np.testing.assert_array_equal(opt(a), a * scale)
    finally:
        SCALE = 2.0
    assert len(dynscope.cache_entries(uses_global)) == 2


def test_a_closure_is_read_through_its_cell():
    def make(k):
        def f(a):
            return a * k
        return f
    f = make(np.float64(4.0))
    opt = dynscope.optimize("eager")(f)
    a = np.arange(3.0)
    for _ in range(3):
        np.testing.assert_array_equal(opt(a), f(a))
    assert hits(f) == 2


def test_an_exception_from_the_graph_is_the_programs():
    def div(a, b):
        return (a * 2.0) / b
    opt = dynscope.optimize("eager")(div)
    a, b = np.ones(3), np.ones(3)
    opt(a, b)
    with np.errstate(divide="raise"):
        with pytest.raises(FloatingPointError) as want:
            div(a, np.zeros(3))
        with pytest.raises(FloatingPointError) as got:
            opt(a, np.zeros(3))
    assert str(got.value) == str(want.value)
    assert hits(div) == 1


def test_recursion_limit_counts_the_call():
    import sys

    def deep(a, n):
        return a + 1.0

    opt = dynscope.optimize("eager")(deep)
    a = np.ones(2)
    opt(a, 0)

    def recurse(n):
        return opt(a, 0) if n == 0 else recurse(n - 1)

    old = sys.getrecursionlimit()
    sys.setrecursionlimit(200)
    try:
        with pytest.raises(RecursionError):
            recurse(1000)
        np.testing.assert_array_equal(recurse(50), a + 1.0)
    finally:
        sys.setrecursionlimit(old)


def test_force_eager_stance_and_explain_take_the_frame_path():
    a, b = np.arange(4.0), np.ones(4)
    opt = dynscope.optimize("eager")(axb1)
    opt(a, b)
    n = hits(axb1)
    with dynscope.set_stance("force_eager"):
        np.testing.assert_array_equal(opt(a, b), axb1(a, b))
    assert hits(axb1) == n                 # force_eager runs without capture
    report = dynscope.explain(axb1)(a, b)
    assert "1 graph" in str(report)


def maybe_breaks(a, loud):
    if loud:
        print(end="")             # a break: this entry's plan needs the frame
    return a * 2


def test_calls_that_need_the_frame_stop_asking_then_look_again():
    """A frameless call whose entry needs the frame checked its guards for
    nothing (the hook checks them again): after a few such calls in a row
    the next ones go straight to the frame, and after a while the frameless
    path looks again -- so an entry that returns from its plan is answered
    without a frame once the calls reach it, and every result is the
    eager one."""
    a = np.arange(3.0)
    opt = dynscope.optimize("eager")(maybe_breaks)
    for _ in range(20):
        np.testing.assert_array_equal(opt(a, True), a * 2)
    before = _C.counters()
    for _ in range(200):
        np.testing.assert_array_equal(opt(a, False), a * 2)
    after = _C.counters()
    direct = after["direct_hits"] - before["direct_hits"]
    assert after["hits"] - before["hits"] == 199          # the first compiled the quiet entry
    assert 199 - 64 <= direct < 199                          # skipped for a while, then frameless
