"""The guards' namespace cache (guards.c seen_in_dict): a global, a builtin or
a module attribute is re-read only when its dict changed (PEP 509 version
tags).  Every change eager code would see must still be seen."""
import builtins
import types

import numpy as np
import pytest

import dynscope

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
    monkeypatch.setattr(np, "sqrt", np.abs)                # numpy itself
    check(dynscope.optimize("eager")(scaled), scaled, a)


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


def test_a_builtin_shadowed_by_a_global_is_seen():
    opt = dynscope.optimize("eager")(uses_builtin)
    a = -np.arange(4.0)
    check(opt, uses_builtin, a)
    g = uses_builtin.__globals__
    g["abs"] = np.negative
    try:
        check(opt, uses_builtin, a)
    finally:
        del g["abs"]
    check(opt, uses_builtin, a)


def test_a_replaced_builtin_is_seen(monkeypatch):
    opt = dynscope.optimize("eager")(uses_builtin)
    a = -np.arange(4.0)
    check(opt, uses_builtin, a)
    monkeypatch.setattr(builtins, "abs", np.negative)
    check(opt, uses_builtin, a)
