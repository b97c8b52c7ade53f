"""Dict subclass instances the program holds (transformers' ModelOutput, an
OrderedDict subclass; collections' OrderedDict, defaultdict, Counter):
len(), keys/values/items, iteration, `in`, d.get and d[key] are captured
where the class leaves them to dict's C code, guarded on the keys in the
object's own order -- and every other case runs as the program would."""
import collections

import numpy as np
import pytest

import dynscope


class Output(collections.OrderedDict):
    """ModelOutput's shape: __getitem__ in Python, the rest dict's."""
    def __getitem__(self, k):
        if isinstance(k, str):
            return dict(self.items())[k]
        return self.to_tuple()[k]

    def to_tuple(self):
        return tuple(self[k] for k in self.keys())


def uses_all(o, x):
    y = x * len(o)
    for k in o:
        y = y + o[k]
    if "b" in o:
        y = y + o[1]
    return y + sum(v.sum() for v in o.values()) + o.get("a") * 2 + len(list(o.items()))


def counters():
    return dynscope._C.counters()


def check(fn, *args):
    want = fn(*args)
    got = dynscope.optimize("eager")(fn)(*args)
    if isinstance(want, np.ndarray):
        np.testing.assert_array_equal(got, want)
    else:
        assert type(got) is type(want) and got == want
    return got


def test_a_model_output_is_one_graph_and_follows_its_keys():
    x = np.ones(3)
    o = Output(a=np.ones(3), b=np.arange(3.0))
    cf = dynscope.optimize("eager")(uses_all)
    np.testing.assert_array_equal(cf(o, x), uses_all(o, x))
    assert counters()["graph_breaks"] == 0 and counters()["compiles"] == 1
    o.move_to_end("a")                       # the order is the OrderedDict's own
    np.testing.assert_array_equal(cf(o, x), uses_all(o, x))
    o["c"] = np.full(3, 5.0)                 # a new key
    np.testing.assert_array_equal(cf(o, x), uses_all(o, x))
    assert counters()["compiles"] == 3 and counters()["graph_breaks"] == 0
    e = dynscope.explain(uses_all)(o, x)
    assert e.graph_break_count == 0
    assert "list(L['o'].keys()) == ['b', 'a', 'c']" in str(e)


def test_a_new_key_order_recompiles_rather_than_reusing():
    def first_key(d, x):
        for k in d:
            return x * (1 if k == "a" else 2)
    d = collections.OrderedDict(a=1, b=2)
    cf = dynscope.optimize("eager")(first_key)
    x = np.ones(2)
    np.testing.assert_array_equal(cf(d, x), x)
    d.move_to_end("a")
    np.testing.assert_array_equal(cf(d, x), 2 * x)


def test_defaultdict_missing_key_and_counter_run_as_the_program_would():
    x = np.ones(2)
    dd = collections.defaultdict(int, a=1)
    check(lambda d, x: x * len(d) + d["a"], dd, x)
    check(lambda d, x: x + d["zz"], dd, x)              # __missing__ adds the key
    assert "zz" in dd
    c = collections.Counter("abca")
    check(lambda c, x: x * c["a"] + c["q"] + len(c), c, x)


class OwnLen(dict):
    def __len__(self):
        return 42

    def keys(self):
        return ["only"]

    def __iter__(self):
        return iter(["it"])

    def __contains__(self, k):
        return k == "magic"


def test_a_class_that_defines_the_operations_in_python_is_obeyed():
    d = OwnLen(a=1, b=2)
    assert check(lambda d: len(d), d) == 42
    assert check(lambda d: list(d.keys()), d) == ["only"]
    assert check(lambda d: [k for k in d], d) == ["it"]
    assert check(lambda d: ("magic" in d, "a" in d), d) == (True, False)


def test_an_instance_attribute_named_like_a_method_wins():
    class D(dict):
        pass
    d = D(a=1)
    d.keys = lambda: ["shadow"]
    assert check(lambda d: list(d.keys()), d) == ["shadow"]
    d2 = D(a=1)
    cf = dynscope.optimize("eager")(lambda d: list(d.keys()))
    assert cf(d2) == ["a"]
    d2.keys = lambda: ["later"]              # added after the compile
    assert cf(d2) == ["later"]


def test_views_leave_the_frame_as_the_program_would_have_them():
    o = Output(a=1, b=2)
    for fn in (lambda d: d.keys(), lambda d: d.values(), lambda d: d.items()):
        got = dynscope.optimize("eager")(fn)(o)
        want = fn(o)
        assert type(got) is type(want) and list(got) == list(want)


def test_writes_in_the_frame_are_the_programs():
    def write(d, x):
        d["new"] = x * 2
        return len(d), d["new"]
    d = Output(a=1)
    n, v = dynscope.optimize("eager")(write)(d, np.ones(2))
    assert n == 2 and list(d.keys()) == ["a", "new"]
    np.testing.assert_array_equal(v, np.full(2, 2.0))


def test_keys_of_other_types_stay_opaque_and_right():
    class D(dict):
        pass
    d = D({(1, 2): 3, "a": 4})
    assert check(lambda d: (len(d), d[(1, 2)]), d) == (2, 3)


def test_an_ordered_dict_written_through_dict_setitem_stays_opaque(capfd):
    # dict.__setitem__ skips OrderedDict's own order: len() counts the key,
    # iteration does not list it.  Python's answer, and no guard that could
    # never hold (the frame would run uncaptured, with a warning)
    def f(o, x):
        return len(o), list(o), x + 1
    o = collections.OrderedDict(a=1, b=2)
    dict.__setitem__(o, "w", 1)
    got = dynscope.optimize("eager")(f)(o, np.ones(2))
    assert got[:2] == (3, ["a", "b"])
    assert "internal error" not in capfd.readouterr().err


def test_an_item_read_guards_that_item_not_every_key():
    class D(dict):
        pass
    d = D(a=np.ones(2))
    cf = dynscope.optimize("eager")(lambda d, x: x + d["a"])
    np.testing.assert_array_equal(cf(d, np.ones(2)), np.full(2, 2.0))
    d["b"] = 1                               # a key the frame never reads
    np.testing.assert_array_equal(cf(d, np.ones(2)), np.full(2, 2.0))
    assert counters()["compiles"] == 1
    del d["a"]
    d["a"] = np.zeros(2)                     # the item read: guarded
    np.testing.assert_array_equal(cf(d, np.ones(2)), np.ones(2))


# ---- ** of a dict subclass instance (a call's keyword arguments) ----

def takes(a=None, b=None, c=None):
    return (a if a is not None else 0) * 2 + (b if b is not None else 0)


def spread_held(o):
    return takes(**o)


def spread_made(x):
    o = Output()                        # made while tracing
    o["a"] = x + 1
    o["b"] = x * 3
    return takes(**o)


class Plain(dict):
    def __getitem__(self, k):          # dict's merge never calls it: storage is read
        return 0


def spread_plain(d, x):
    return dict(x=x, **d)


def test_spreading_a_dict_subclass_reads_it_as_dicts_merge_does():
    x = np.arange(3.0)
    held = Output(a=np.ones(3), b=np.arange(3.0))
    np.testing.assert_array_equal(check(spread_held, held), takes(**held))
    np.testing.assert_array_equal(check(spread_made, x), spread_made(x))
    got = dynscope.optimize("eager")(spread_plain)(Plain(a=5), x)
    assert got["a"] == 5 and list(got) == ["x", "a"]          # the storage, not __getitem__
    for fn, args in ((spread_held, (held,)), (spread_made, (x,)), (spread_plain, (Plain(a=5), x))):
        assert dynscope.explain(fn)(*args).graph_break_count == 0
    with pytest.raises(TypeError):                             # a key given twice, as eagerly
        dynscope.optimize("eager")(lambda o: takes(a=1, **o))(held)
