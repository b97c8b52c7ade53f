"""The guards' namespace cache (guards.c seen_in_dict): a global, a builtin or
a module attribute is re-read only when its dict changed (PEP 509 version
tags).  Every change eager code would see must still be seen."""
import builtins
import types

import numpy as np
import pytest

import dynscope

from conftest import assert_same, events

SCALE = 2.0
mod = types.ModuleType("guard_cache_mod")
mod.op = np.sqrt


def scaled(a):
    return np.sqrt(a) * SCALE


def through_module(a):
    return mod.op(a) + 1.0


def uses_builtin(a):
    return abs(a) + 1.0


def check(opt, fn, *args):
    np.testing.assert_array_equal(opt(*args), fn(*args))


def recompiled_because(name):
    """The reason of the one recompile recorded since the last call (and
    forget it): a change the cache would miss makes none."""
    recs = events("recompile")
    dynscope._C.clear_events()
    assert len(recs) == 1, recs
    assert recs[0]["name"] == name
    return recs[0]["reason"]


def test_a_rebound_global_is_seen():
    global SCALE
    opt = dynscope.optimize("eager")(scaled)
    a = np.arange(4.0)
    try:
        for s in (2.0, 2.0, 5.0, 5.0, 2.0):
            SCALE = s
            check(opt, scaled, a)
    finally:
        SCALE = 2.0
    assert len(dynscope.cache_entries(scaled)) == 2


def test_a_replaced_module_attribute_is_seen(monkeypatch):
    opt = dynscope.optimize("eager")(through_module)
    a = np.arange(4.0)
    check(opt, through_module, a)
    check(opt, through_module, a)
    monkeypatch.setattr(mod, "op", np.square)              # setattr on the module
    check(opt, through_module, a)
    mod.__dict__["op"] = np.negative                       # its dict, directly
    check(opt, through_module, a)
    # numpy itself: scaled is compiled first, with the real np.sqrt
    opt = dynscope.optimize("eager")(scaled)
    b = np.arange(4.0) ** 2                                # sqrt and abs differ on it
    assert_same(opt(b), np.arange(4.0) * SCALE)
    dynscope._C.clear_events()
    monkeypatch.setattr(np, "sqrt", np.abs)
    assert_same(opt(b), b * SCALE)                         # abs, not the sqrt compiled
    assert "sqrt" in recompiled_because("scaled")


def test_a_deleted_module_attribute_falls_back_to_module_getattr():
    m = types.ModuleType("lazy_mod")
    m.__getattr__ = lambda name: np.cbrt if name == "op" else None
    m.op = np.sqrt

    def f(a):
        return m.op(a)
    opt = dynscope.optimize("eager")(f)
    a = np.arange(4.0)
    check(opt, f, a)
    del m.op                                               # now from __getattr__
    check(opt, f, a)
    check(opt, f, a)


# abs and its replacement np.negative give different answers on it
MIXED = np.array([-1.0, 2.0, -3.0, 4.0])


def test_a_builtin_shadowed_by_a_global_is_seen():
    opt = dynscope.optimize("eager")(uses_builtin)
    assert_same(opt(MIXED), np.array([2.0, 3.0, 4.0, 5.0]))          # compiled with abs
    dynscope._C.clear_events()
    g = uses_builtin.__globals__
    g["abs"] = np.negative
    try:
        assert_same(opt(MIXED), np.array([2.0, -1.0, 4.0, -3.0]))    # the global
        assert "abs" in recompiled_because("uses_builtin")
    finally:
        del g["abs"]
    assert_same(opt(MIXED), np.array([2.0, 3.0, 4.0, 5.0]))          # the builtin again
    assert len(dynscope.cache_entries(uses_builtin)) == 2


def test_a_replaced_builtin_is_seen(monkeypatch):
    opt = dynscope.optimize("eager")(uses_builtin)
    assert_same(opt(MIXED), np.array([2.0, 3.0, 4.0, 5.0]))          # compiled with abs
    dynscope._C.clear_events()
    monkeypatch.setattr(builtins, "abs", np.negative)
    assert_same(opt(MIXED), np.array([2.0, -1.0, 4.0, -3.0]))
    assert "abs" in recompiled_because("uses_builtin")
