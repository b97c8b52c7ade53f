"""A function's parts changed at run time: __code__, __defaults__,
__kwdefaults__, __globals__ contents and __closure__ cells, changed between
calls (guards must catch it) or while a captured frame of that function is
live (the frame goes on with the code it started with, and sees the values
as they are after the change).  Each case runs eagerly and captured, and the
results must be the same.

The first case is networkx's `argmap` pattern: the running function assigns
its own __code__ (issue 13; networkx's own tests run in the conformance
subset)."""
import numpy as np
import pytest

import dynscope
from dynscope import _C

from conftest import assert_same, events


@pytest.fixture(autouse=True)
def capture_every_frame():
    """Most cases hold no array (networkx's argmap does not): compile them
    anyway, as the conformance runs do, to exercise the translator."""
    dynscope.config.skip_tensorless_frames = False


def captured(fn, *args, **kwargs):
    with dynscope.optimize("eager"):
        return fn(*args, **kwargs)


# ---- __code__ replaced while the function runs ----

def _new_body(a, b, *, w=None, **kwargs):
    return ("new", a, b)


def _swap(fn):
    fn.__code__ = _new_body.__code__          # the running function's code is replaced
    return lambda *a, **k: ("called", a, k)


def _make_swapping():
    def f(*args, w=None, **kwargs):
        return _swap(w)(*args, **kwargs)
    f.__kwdefaults__["w"] = f
    return f


def test_code_replaced_by_the_running_function():
    f = _make_swapping()
    want = [f(1, 2), f(1, 2)]
    assert want == [("called", (1, 2), {}), ("new", 1, 2)]
    g = _make_swapping()
    code = g.__code__
    got = [captured(g, 1, 2), captured(g, 1, 2)]
    assert got == want
    # the frame was captured and went on after the eager call that swapped
    # its code: a graph break in the original code, not a skipped frame
    # (the call of what _swap returned, f(*args, **kwargs), is inlined in
    # the resume frame)
    # (the swap itself, fn.__code__ = ..., is the break)
    breaks = [e for e in events("graph_break") if e["name"] == "_make_swapping.<locals>.f"]
    assert len(breaks) == 1 and "setting attribute '__code__' of a function" in breaks[0]["reason"], breaks
    resumes = [e for e in dynscope.cache_entries(code) if e.resume_offset > 0]
    assert resumes, "no resume entry: the frame did not go on after the swap"


def _scaled(x):
    y = x * 2.0
    np.negative(y, out=y)            # in place on a temporary: an eager step
    _SWAPS.append(_scaled.__code__)
    _scaled.__code__ = _scaled_v2.__code__
    return y + 1.0


def _scaled_v2(x):
    return x * 10.0


_SWAPS = []


def test_code_replaced_mid_frame_with_arrays_then_new_code_runs():
    x = np.arange(4.0)
    original = _scaled.__code__
    try:
        want = [_scaled(x), _scaled(x)]
        _scaled.__code__ = original
        got = [captured(_scaled, x), captured(_scaled, x)]
    finally:
        _scaled.__code__ = original
    assert_same(got, want)


# ---- __code__ replaced between calls: the cache is keyed by code objects ----

def _body_a(x):
    return x + 1.0


def _body_b(x):
    return x * 3.0


def test_code_replaced_between_calls():
    def f(x):
        return x + 1.0
    x = np.ones(3)
    f.__code__ = _body_a.__code__
    first = captured(f, x)
    f.__code__ = _body_b.__code__
    second = captured(f, x)
    f.__code__ = _body_a.__code__
    third = captured(f, x)
    assert_same([first, second, third], [x + 1.0, x * 3.0, x + 1.0])
    assert dynscope.cache_entries(_body_a.__code__)[0].hits == 1
    assert len(dynscope.cache_entries(_body_b.__code__)) == 1


# ---- defaults and keyword defaults of an inlined function ----

def _callee(x, k=2.0, *, shift=0.0):
    return x * k + shift


def _caller(x):
    return _callee(x) - 1.0


def test_defaults_changed_between_calls_recompile():
    x = np.arange(3.0)
    saved = (_callee.__defaults__, dict(_callee.__kwdefaults__))
    try:
        got = [captured(_caller, x)]
        _callee.__defaults__ = (5.0,)
        got.append(captured(_caller, x))
        _callee.__kwdefaults__["shift"] = 100.0
        got.append(captured(_caller, x))
    finally:
        _callee.__defaults__, _callee.__kwdefaults__ = saved[0], saved[1]
    assert_same(got, [x * 2.0 - 1.0, x * 5.0 - 1.0, x * 5.0 + 100.0 - 1.0])
    kinds = [g.expr for e in dynscope.cache_entries(_caller) for g in e.guards]
    assert any("__defaults__" in k for k in kinds), kinds
    assert any("__kwdefaults__" in k for k in kinds), kinds


def _set_defaults(k):
    _callee.__defaults__ = (k,)
    np.zeros(2).fill(1.0)            # keep the call opaque to the translator
    return k


def _caller_changes_defaults(x):
    a = _callee(x)
    _set_defaults(7.0)              # an eager step changes the callee's defaults
    return a + _callee(x)


def test_defaults_changed_while_the_frame_runs():
    x = np.arange(3.0)
    saved = _callee.__defaults__
    try:
        want = _caller_changes_defaults(x)
        _callee.__defaults__ = saved
        got = captured(_caller_changes_defaults, x)
    finally:
        _callee.__defaults__ = saved
    assert_same(got, want)
    assert_same(want, x * 2.0 + x * 7.0)


# ---- globals ----

SCALE = 2.0


def _reads_global(x):
    return x * SCALE


def _sets_global(v):
    global SCALE
    SCALE = v


def _reads_global_around_a_change(x):
    a = x * SCALE
    _sets_global(4.0)
    return a + x * SCALE


def test_global_changed_between_calls_and_mid_frame():
    global SCALE
    x = np.arange(3.0)
    try:
        SCALE = 2.0
        got = [captured(_reads_global, x)]
        SCALE = 3.0
        got.append(captured(_reads_global, x))
        SCALE = 2.0
        got.append(captured(_reads_global_around_a_change, x))
    finally:
        SCALE = 2.0
    assert_same(got, [x * 2.0, x * 3.0, x * 2.0 + x * 4.0])


# ---- closure cells ----

def _make_closure(k):
    def inner(x):
        return x * k

    def outer(x):
        return inner(x) + k

    def set_k(v):
        nonlocal k
        k = v

    def outer_changes_k(x):
        a = inner(x)
        set_k(k + 10.0)
        return a + inner(x)
    return inner, outer, set_k, outer_changes_k


def test_closure_cell_changed_between_calls():
    x = np.arange(3.0)
    inner, outer, set_k, _ = _make_closure(2.0)
    got = [captured(inner, x), captured(outer, x)]
    set_k(5.0)
    got += [captured(inner, x), captured(outer, x)]
    assert_same(got, [x * 2.0, x * 2.0 + 2.0, x * 5.0, x * 5.0 + 5.0])


def test_closure_cell_changed_while_the_frame_runs():
    x = np.arange(3.0)
    *_, eager = _make_closure(2.0)
    *_, capt = _make_closure(2.0)
    want = [eager(x), eager(x)]
    got = [captured(capt, x), captured(capt, x)]
    assert_same(got, want)
    assert_same(want, [x * 2.0 + x * 12.0, x * 12.0 + x * 22.0])
    # set_k's cell write is an eager step: the frame goes on after it
    assert any(e["name"].endswith("outer_changes_k") for e in events("graph_break"))
