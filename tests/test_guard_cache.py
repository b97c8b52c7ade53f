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


# ---- attributes read from the instance dict (guards.c attr_from_instance_dict)
# Once getattr has answered from an object's instance __dict__ for a type whose
# __getattribute__ is object's and whose MRO lacks the name, a check reads the
# dict while the type's version tag is the same.  Any change to the class or
# its bases, or to the object's class, must still be seen.

class Holder:
    def __init__(self):
        self.__dict__.update()             # a dict made, as nn.Module's (an object
                                           # keeping its attributes inline is read
                                           # by getattr: no dict made for it)

    def __getattr__(self, name):           # as nn.Module: only when the dict lacks it
        if name == "late":
            return 7.0
        raise AttributeError(name)


def reads_scale(a, h):
    return a * h.scale


def test_a_property_added_to_the_class_shadows_the_instance_dict():
    a = np.ones(3)
    h = Holder()
    h.scale = 2.0
    opt = dynscope.optimize("eager")(reads_scale)
    for _ in range(3):
        check(opt, reads_scale, a, h)
    Holder.scale = property(lambda self: 5.0)      # a data descriptor wins now
    try:
        assert opt(a, h)[0] == reads_scale(a, h)[0] == 5.0
    finally:
        del Holder.scale
    assert opt(a, h)[0] == 2.0


def test_a_base_class_change_and_a_new_class_are_seen():
    class Base:
        pass

    class Child(Base):
        def __init__(self):
            vars(self)                      # a dict made

    class Overrides(Child):
        def __getattribute__(self, name):
            return 11.0 if name == "scale" else object.__getattribute__(self, name)
    a = np.ones(3)
    h = Child()
    h.scale = 3.0
    opt = dynscope.optimize("eager")(reads_scale)
    for _ in range(3):
        check(opt, reads_scale, a, h)
    Base.scale = property(lambda self: 4.0)        # on a base: Child's tag changes
    assert opt(a, h)[0] == 4.0
    del Base.scale
    assert opt(a, h)[0] == 3.0
    h.__class__ = Overrides
    assert opt(a, h)[0] == reads_scale(a, h)[0] == 11.0


def test_an_attribute_gone_from_the_dict_reaches_getattr():
    a = np.ones(3)
    h = Holder()
    h.late = 2.0

    def reads_late(a, h):
        return a * h.late
    opt = dynscope.optimize("eager")(reads_late)
    for _ in range(3):
        assert opt(a, h)[0] == 2.0
    del h.late
    assert opt(a, h)[0] == reads_late(a, h)[0] == 7.0
    h.late = 3.0
    assert opt(a, h)[0] == 3.0
