"""Cache hits leak nothing: 100k hits leave the reference counts of every
input (arrays, a Python int, a list of arrays, a config object and its
attributes) unchanged and the process's RSS flat; results are fresh objects
exactly where eager makes fresh objects, and the very input object where
eager returns an input."""
import functools
import gc
import os
import sys
import weakref

import numpy as np
import pytest

import dynscope
from dynscope import _C

WARMUP = 10_000
HITS = 100_000
RSS_SLACK = 2 * 1024 * 1024   # bytes


def rss_bytes():
    """Resident set size of this process, from /proc/self/statm."""
    with open("/proc/self/statm") as fh:
        resident_pages = int(fh.read().split()[1])
    return resident_pages * os.sysconf("SC_PAGE_SIZE")


class Config:
    def __init__(self, scale, shift):
        self.scale = scale
        self.shift = shift


def step(x, n, xs, cfg):
    return x * cfg.scale + n + xs[0] - xs[1] * cfg.shift


def make_inputs():
    # Objects made at run time, none of them cached or immortal in CPython
    # (no small ints, no interned constants), so their counts mean something.
    x = np.linspace(-1.0, 1.0, 6)
    n = int("1000007")
    xs = [np.arange(6.0), np.full(6, 0.5)]
    cfg = Config(float("1.25"), int("1000003"))
    return x, n, xs, cfg


UNDER_SANITIZER = "asan" in os.environ.get("LD_PRELOAD", "") or "ASAN_OPTIONS" in os.environ


def warm(f, args):
    """One compiling call, then WARMUP hits."""
    f(*args)
    for _ in range(WARMUP):
        f(*args)


def test_100k_hits_keep_refcounts_of_every_input():
    f = dynscope.optimize("eager")(step)
    x, n, xs, cfg = make_inputs()
    want = step(x, n, xs, cfg)
    watched = {"x": x, "n": n, "xs": xs, "xs[0]": xs[0], "xs[1]": xs[1], "cfg": cfg,
               "cfg.scale": cfg.scale, "cfg.shift": cfg.shift, "Config": Config,
               "f": f, "step": step}
    warm(f, (x, n, xs, cfg))
    gc.collect()
    before = {k: sys.getrefcount(v) for k, v in watched.items()}

    for _ in range(HITS):
        f(x, n, xs, cfg)
    gc.collect()

    assert {k: sys.getrefcount(v) for k, v in watched.items()} == before
    (entry,) = dynscope.cache_entries(step)
    assert entry.hits == WARMUP + HITS        # all of them were hits
    np.testing.assert_array_equal(f(x, n, xs, cfg), want)


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc/self/statm")
@pytest.mark.skipif(UNDER_SANITIZER, reason="ASan's quarantine holds freed memory: RSS grows")
def test_100k_hits_keep_rss_flat():
    f = dynscope.optimize("eager")(step)
    args = make_inputs()
    warm(f, args)
    gc.collect()
    rss_before = rss_bytes()

    for _ in range(HITS):
        f(*args)
    gc.collect()

    growth = rss_bytes() - rss_before
    assert growth < RSS_SLACK, f"RSS grew by {growth / 1024:.0f} KiB over {HITS} hits"
    (entry,) = dynscope.cache_entries(step)
    assert entry.hits == WARMUP + HITS


def test_hit_results_are_not_kept_by_the_engine():
    f = dynscope.optimize("eager")(step)
    x, n, xs, cfg = make_inputs()
    f(x, n, xs, cfg)
    r = f(x, n, xs, cfg)                      # a hit
    assert dynscope.cache_entries(step)[0].hits == 1
    assert sys.getrefcount(r) == 2            # r and getrefcount's argument
    ref = weakref.ref(r)
    del r
    assert ref() is None


# ---------------------------------------------------------------------------
# Identity: each function below is run eagerly twice and captured twice (after
# the compiling call, so both are hits); for the result, and for each item of
# a tuple/list/dict result, "is it the same object as in the other call" and
# "is it one of the inputs" must agree with eager.

def ret_x(x, xs, cfg):
    return x


def ret_list_arg(x, xs, cfg):
    return xs


def ret_config(x, xs, cfg):
    return cfg


def ret_list_item(x, xs, cfg):
    return xs[0]


def ret_fresh_array(x, xs, cfg):
    return x / (np.abs(x) + 1) * xs[0]


def ret_tuple_input_and_fresh(x, xs, cfg):
    return (x, x + 1)


def ret_list_fresh_and_input(x, xs, cfg):
    return [x * cfg.scale, xs[1]]


def ret_dict(x, xs, cfg):
    return {"a": x, "b": x - 1}


def ret_const_tuple(x, xs, cfg):
    return (1, 2)


def ret_none(x, xs, cfg):
    return None


IDENTITY_CASES = [ret_x, ret_list_arg, ret_config, ret_list_item, ret_fresh_array,
                  ret_tuple_input_and_fresh, ret_list_fresh_and_input, ret_dict,
                  ret_const_tuple, ret_none]


def identity_pattern(r1, r2, inputs):
    def is_input(v):
        return any(v is i for i in inputs)
    pattern = {"same_object": r1 is r2, "is_input": is_input(r1)}
    if isinstance(r1, dict):
        r1, r2 = list(r1.values()), list(r2.values())
    if isinstance(r1, (tuple, list)):
        pattern["items_same_object"] = [a is b for a, b in zip(r1, r2)]
        pattern["items_are_inputs"] = [is_input(v) for v in r1]
    return pattern


@pytest.mark.parametrize("fn", IDENTITY_CASES, ids=lambda fn: fn.__name__)
def test_hit_results_have_eagers_identity(fn):
    x, _, xs, cfg = make_inputs()
    inputs = [x, xs, cfg, xs[0], xs[1]]
    f = dynscope.optimize("eager")(fn)
    f(x, xs, cfg)                              # compiles
    c1, c2 = f(x, xs, cfg), f(x, xs, cfg)      # hits
    e1, e2 = fn(x, xs, cfg), fn(x, xs, cfg)
    (entry,) = dynscope.cache_entries(fn)
    assert entry.hits == 2
    assert identity_pattern(c1, c2, inputs) == identity_pattern(e1, e2, inputs)


def test_identity_function_returns_its_argument_on_hits():
    def ident(x):
        return x

    f = dynscope.optimize("eager")(ident)
    x = np.arange(3.0)
    for _ in range(1000):
        assert f(x) is x
    assert dynscope.cache_entries(ident)[0].hits == 999


def test_fresh_results_do_not_alias_inputs_or_each_other():
    f = dynscope.optimize("eager")(ret_fresh_array)
    x, _, xs, cfg = make_inputs()
    want = ret_fresh_array(x, xs, cfg)
    f(x, xs, cfg)
    r1 = f(x, xs, cfg)
    assert not any(np.shares_memory(r1, i) for i in (x, xs[0], xs[1]))
    r1[...] = 123.0                            # scribbling on a result ...
    r2 = f(x, xs, cfg)
    assert r2 is not r1 and not np.shares_memory(r1, r2)
    np.testing.assert_array_equal(r2, want)    # ... does not reach the next
    np.testing.assert_array_equal(x, make_inputs()[0])


# ---------------------------------------------------------------------------
# Frames that call sys.getrefcount are not captured (README, "Limits";
# translate.c reads_refcounts): they run in the interpreter and read the
# counts an uncaptured call reads.

read_refcount = sys.getrefcount        # the same function under a name the rule misses


def counts(x):
    y = x * 2                          # made in the frame: one reference, plus the argument
    z = y + 1
    return sys.getrefcount(x), sys.getrefcount(y), z


def counts_aliased(x):
    y = x * 2
    z = y + 1
    return read_refcount(x), read_refcount(y), z


@pytest.mark.parametrize("how", ["decorator", "context manager"])
def test_a_frame_that_calls_sys_getrefcount_runs_uncaptured_with_eager_counts(how, counting_backend):
    x = np.linspace(0.0, 1.0, 5)
    # eagerly, from C (as an optimize()d function and, with the frame hook
    # installed, any call is made): the argument has one more reference than
    # in a call CPython inlines
    want = functools.partial(counts)(x)
    assert want[1] == 2
    if how == "decorator":
        opt = dynscope.optimize(counting_backend)(counts)
        got = [opt(x) for _ in range(3)]
    else:
        with dynscope.optimize(counting_backend):
            got = [counts(x) for _ in range(3)]
    for g in got:
        assert g[:2] == want[:2]
        np.testing.assert_array_equal(g[2], want[2])
    assert counting_backend.graphs == []                 # no graph: the bytecode ran
    assert dynscope.cache_entries(counts) == []
    status = _C.code_status(counts)
    assert status["skip_reason"] == ("reads reference counts (sys.getrefcount), which "
                                     "capture would change")
    assert _C.break_type_of(None, status["skip_reason"])[0] == "DS0030"


def test_captured_the_same_frame_would_read_other_counts(counting_backend):
    """Why the rule, and proof that the comparison above would catch a
    captured frame: called under another name, getrefcount escapes the rule,
    the frame is captured (graphs, eager steps), and the counts it reads
    differ from an uncaptured call's."""
    x = np.linspace(0.0, 1.0, 5)
    want = functools.partial(counts_aliased)(x)
    opt = dynscope.optimize(counting_backend)(counts_aliased)
    got = [opt(x) for _ in range(3)]
    assert counting_backend.graphs and dynscope.cache_entries(counts_aliased)
    assert _C.code_status(counts_aliased)["skip_reason"] is None
    assert all(g[:2] != want[:2] for g in got), (got, want)


# ---- cache entries and the cyclic GC ---------------------------------------
# Entries are held by their code object (co_extra), which the collector
# cannot see, so it could never collect one; they are kept off its lists
# (engine/cache/cache.c), and freed by their counts when the code dies.

def test_cache_entries_are_not_walked_by_the_collector():
    f = dynscope.optimize("eager")(lambda x: x * 2 + 1)
    f(np.ones(3))
    entries = dynscope.cache_entries(f)
    assert entries and not any(gc.is_tracked(e) for e in entries)


def test_entries_of_a_dead_function_are_freed_with_what_they_hold():
    class Sentinel:
        pass
    freed = []
    for i in range(20):
        sentinel = Sentinel()
        weakref.finalize(sentinel, freed.append, i)

        def backend(gm, example_inputs, _held=sentinel):   # the entry holds it
            return gm.forward
        ns = {}
        exec(compile(f"def fn(x):\n    return x * {i} + 1\n", f"<made {i}>", "exec"), ns)
        f = dynscope.optimize(backend)(ns["fn"])
        assert f(np.ones(2))[0] == i + 1
        del sentinel, backend, f, ns
    _C.clear_events()               # the in-memory event log holds each code
    gc.collect()                    # fn and its globals dict are a cycle
    assert sorted(freed) == list(range(20))
