"""Automatic dynamic for every tensor source (issue 37): a tensor the frame
reads through an attribute, a list or dict item, a closure or a global gets
the rule an argument gets -- when a dimension's size changes between two
translations of a frame (same type, dtype and rank; sizes from 2 on), it
becomes dynamic there, and the recompile's reason names that source.
Parameters and buffers stay static unless
config.force_parameter_static_shapes is False.  A source whose size the
code needs as a constant stays static and says so."""
import numpy as np
import pytest

import dynscope
from dynscope import _C

from conftest import events


def compiles():
    return _C.counters()["compiles"]


def reasons():
    return [e["reason"] for e in events("recompile")]


class Cache:
    """A key/value cache as a decoding loop keeps one: grown by one row a step."""

    def __init__(self, keys):
        self.keys = keys


def attend(cache, q):
    cache.keys = np.concatenate([cache.keys, q[None]])
    scores = cache.keys @ q
    w = np.exp(scores - scores.max())
    return (w / w.sum()) @ cache.keys


def test_a_cache_attribute_growing_each_step_compiles_twice_and_equals_eager():
    opt = dynscope.optimize("eager")(attend)
    rng = np.random.default_rng(0)
    start = rng.standard_normal((3, 8))
    mine, ref = Cache(start.copy()), Cache(start.copy())
    for _ in range(30):
        q = rng.standard_normal(8)
        np.testing.assert_array_equal(opt(mine, q), attend(ref, q))
        np.testing.assert_array_equal(mine.keys, ref.keys)
    assert mine.keys.shape == (33, 8)
    assert compiles() == 2
    (reason,) = reasons()
    assert reason == ("L['cache'].keys.shape == (3, 8) (observed (4, 8)); "
                      "L['cache'].keys.size(0) is now dynamic (a graph input)")
    general = [e for e in dynscope.cache_entries(attend) if e.compile_id == "0/1"][0]
    (tm,) = [g.expr for g in general.guards if g.source == "L['cache'].keys"]
    assert "L['cache'].keys.shape == (?, 8)" in tm


def read_items(state, bufs, q):
    return (state["k"] @ q).sum() + bufs[0].mean(0) * q


def test_list_and_dict_items_become_dynamic_in_one_recompile():
    opt = dynscope.optimize("eager")(read_items)
    state, bufs = {"k": np.ones((2, 4))}, [np.zeros((2, 4))]
    for i in range(12):
        q = np.arange(4.0) + i
        np.testing.assert_array_equal(opt(state, bufs, q), read_items(state, bufs, q))
        state["k"] = np.concatenate([state["k"], q[None]])          # the program grows them
        bufs[0] = np.concatenate([bufs[0], q[None] * 2])
    assert compiles() == 2
    (reason,) = reasons()
    assert "L['state']['k'].size(0) is now dynamic" in reason
    assert "L['bufs'][0].size(0) is now dynamic" in reason


HISTORY = [np.zeros((2, 3))]


def test_a_global_and_a_closure_become_dynamic():
    box = {"rows": np.ones((2, 3))}
    rows = box["rows"]

    def make(rows):
        def f(x):
            return (rows * x).sum(0) + HISTORY[0].sum(0)
        return f

    for n in range(2, 10):
        HISTORY[0] = np.full((n, 3), 0.5)
        f = make(np.ones((n, 3)) * n)
        opt = dynscope.optimize("eager")(f)
        np.testing.assert_array_equal(opt(np.arange(3.0)), f(np.arange(3.0)))
    assert rows.shape == (2, 3)
    # each make() is a new function over the same code: one frame cache
    assert compiles() == 2
    (reason,) = reasons()
    assert "G['HISTORY'][0].size(0) is now dynamic" in reason or \
           "L['rows'].size(0) is now dynamic" in reason


def branches_on_length(cache, q):
    cache.keys = np.concatenate([cache.keys, q[None]])
    if cache.keys.shape[0] > 5:
        return cache.keys.sum(0)
    return cache.keys.mean(0)


def test_a_branch_on_a_sources_size_is_a_guarded_relation():
    opt = dynscope.optimize("eager")(branches_on_length)
    mine, ref = Cache(np.ones((2, 3))), Cache(np.ones((2, 3)))
    for i in range(9):
        q = np.full(3, float(i))
        np.testing.assert_array_equal(opt(mine, q), branches_on_length(ref, q))
    # 2 rows; then dynamic, each side of the branch once: s0 + 1 > 5
    assert compiles() == 3
    relations = {e.compile_id: [g.expr for g in e.guards if g.kind == "SIZES_HOLD"]
                 for e in dynscope.cache_entries(branches_on_length)}
    assert relations == {"0/0": [], "0/1": ["L['cache'].keys.size(0) - 4 <= 0"],
                         "0/2": ["L['cache'].keys.size(0) - 4 > 0"]}
    assert reasons()[1].startswith("L['cache'].keys.size(0) - 4 <= 0")


def loops_over_length(cache, q):
    cache.keys = np.concatenate([cache.keys, q[None]])
    total = q * 0
    for i in range(cache.keys.shape[0]):
        total = total + cache.keys[i]
    return total


def test_a_loop_over_a_sources_size_keeps_it_static_and_says_so():
    opt = dynscope.optimize("eager")(loops_over_length)
    mine, ref = Cache(np.ones((2, 3))), Cache(np.ones((2, 3)))
    for i in range(6):
        q = np.full(3, float(i))
        np.testing.assert_array_equal(opt(mine, q), loops_over_length(ref, q))
    assert compiles() == 6                    # one per length: the loop needs it
    first = reasons()[0]
    assert "L['cache'].keys.size(0) stays static (the code needs its value" in first
    assert not any("is now dynamic" in r for r in reasons())


def test_mark_dynamic_on_an_attribute_is_dynamic_from_the_first_compile():
    opt = dynscope.optimize("eager")(attend)
    c = Cache(np.ones((3, 4)))
    dynscope.mark_dynamic(c.keys, 0)
    opt(c, np.ones(4))          # the concatenation makes a new array: marked no more
    entry = dynscope.cache_entries(attend)[0]
    (tm,) = [g.expr for g in entry.guards if g.source == "L['cache'].keys"]
    assert "L['cache'].keys.shape == (?, 4)" in tm


@pytest.mark.parametrize("dynamic,expected", [(False, 5), (True, 1)])
def test_dynamic_false_keeps_sources_static_and_true_makes_them_dynamic_at_once(dynamic, expected):
    opt = dynscope.optimize("eager", dynamic=dynamic)(attend)
    c, ref = Cache(np.ones((2, 4))), Cache(np.ones((2, 4)))
    for i in range(5):
        q = np.full(4, float(i))
        np.testing.assert_array_equal(opt(c, q), attend(ref, q))
    assert compiles() == expected


def test_dynamic_true_keeps_a_source_static_when_the_code_needs_its_size():
    # dynamic=True takes the attribute's sizes as dynamic; the loop needs
    # the length as a constant, so the static translation is kept and the
    # source is noted static for the frame (this segfaulted: dynamic=True
    # frames had no record to note it in)
    opt = dynscope.optimize("eager", dynamic=True)(loops_over_length)
    mine, ref = Cache(np.ones((2, 3))), Cache(np.ones((2, 3)))
    for i in range(5):
        q = np.full(3, float(i))
        np.testing.assert_array_equal(opt(mine, q), loops_over_length(ref, q))
    assert compiles() == 5                    # one per length: the loop needs it
    before = compiles()
    np.testing.assert_array_equal(opt(mine, np.ones(3)), loops_over_length(ref, np.ones(3)))
    assert compiles() == before + 1


def test_dynamic_true_learns_an_int_attribute_that_changes():
    # as automatic dynamic does: seen 7 static, 8 a symbol (it was static
    # under dynamic=True: one compile per value, to the cache limit)
    opt = dynscope.optimize("eager", dynamic=True)(window_read)
    w, x = Window(12), np.ones(2)
    for seen in range(7, 21):
        w.seen = seen
        np.testing.assert_array_equal(opt(w, x), window_read(w, x))
    assert compiles() == 4 and _C.counters()["cache_limits"] == 0


@pytest.fixture
def torch():
    return pytest.importorskip("torch", exc_type=ImportError)


def test_torch_kv_cache_of_a_module_grows_without_recompiles(torch):
    torch.manual_seed(0)

    class Layer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.q = torch.nn.Linear(8, 8)
            self.register_buffer("scale", torch.full((8,), 0.5))

        def forward(self, x, cache):
            k = self.q(x) * self.scale
            cache.keys = torch.cat([cache.keys, k], dim=0)
            att = (k @ cache.keys.T).softmax(-1)
            return att @ cache.keys

    m = Layer().eval()
    opt = dynscope.optimize("eager")(m)
    mine, ref = Cache(torch.zeros(2, 8)), Cache(torch.zeros(2, 8))
    with torch.no_grad():
        for i in range(20):
            x = torch.randn(1, 8)
            assert torch.equal(opt(x, mine), m(x, ref))
    assert torch.equal(mine.keys, ref.keys)
    assert compiles() == 2
    (reason,) = reasons()
    assert "L['cache'].keys.size(0) is now dynamic" in reason
    # the cache's length is dynamic; the buffer and the parameters stay static
    (general,) = [e for e in dynscope.cache_entries(m.forward) if e.compile_id == "0/1"]
    shapes = {g.source: g.expr.split(".shape == ")[1].split(" and")[0]
              for g in general.guards if ".shape == " in g.expr}
    assert shapes == {"L['x']": "(1, 8)", "L['cache'].keys": "(?, 8)",
                      "L['self']._modules['q']._parameters['weight']": "(8, 8)",
                      "L['self']._modules['q']._parameters['bias']": "(8,)",
                      "L['self']._buffers['scale']": "(8,)"}


def test_parameters_stay_static_unless_the_switch_says_otherwise(torch):
    lin = torch.nn.Linear(4, 2)

    def f(x):
        return lin(x)

    def run():
        opt = dynscope.optimize("eager")(f)
        with torch.no_grad():
            for n in (2, 3, 5, 7):
                lin.weight = torch.nn.Parameter(torch.ones(n, 4))
                lin.bias = torch.nn.Parameter(torch.zeros(n))
                x = torch.ones(1, 4)
                assert torch.equal(opt(x), f(x))
        return compiles()

    assert dynscope.config.force_parameter_static_shapes is True
    assert run() == 4
    assert not any("is now dynamic" in r for r in reasons())
    dynscope.reset()
    dynscope.config.force_parameter_static_shapes = False
    try:
        assert run() == 2
        assert any("_parameters['weight'].size(0) is now dynamic" in r for r in reasons())
    finally:
        dynscope.config.force_parameter_static_shapes = True


def test_the_switch_takes_only_a_bool():
    with pytest.raises(TypeError, match="force_parameter_static_shapes must be a bool"):
        dynscope.config.force_parameter_static_shapes = 1
    assert "force_parameter_static_shapes=True" in repr(dynscope.config)


# ---- sizes as expressions, relations between sizes (tr_symsizes.c) ----

def pieces(x):
    parts = np.split(x, x.shape[0] // 2) if x.ndim == 1 else np.array_split(x, 2)
    return sum(p.sum() for p in parts) + len(parts)


def test_a_split_whose_count_follows_a_dynamic_size_is_not_fixed(torch):
    # the number of pieces of x.split(2) follows len(x): a translation must
    # not fix it (this gave a wrong sum once the size was dynamic)
    def f(x):
        parts = x.split(2)
        return sum(p.sum() for p in parts) + len(parts)

    opt = dynscope.optimize("eager")(f)
    for n in (4, 6, 8, 10, 3):
        x = torch.arange(float(n * 2)).reshape(n, 2)
        assert torch.equal(torch.as_tensor(opt(x)), torch.as_tensor(f(x)))


def grown_and_masked(cache, mask, q):
    # a decoding step: the cache grows by one; the mask, a separate input,
    # is one longer than the cache was (s0 + 1 == s1), which the code checks
    cache.keys = np.concatenate([cache.keys, q[None]])
    pad = cache.keys.shape[0] - mask.shape[0]
    if pad > 0:
        mask = np.concatenate([mask, np.ones(pad)])
    if cache.keys.size == 0:
        return q
    return (cache.keys * mask[:, None]).sum(0)


def test_sizes_of_two_sources_relate_under_a_guard():
    opt = dynscope.optimize("eager")(grown_and_masked)
    mine, ref = Cache(np.ones((2, 3))), Cache(np.ones((2, 3)))
    for i in range(12):
        mask = np.ones(mine.keys.shape[0] + 1)
        q = np.full(3, float(i))
        np.testing.assert_array_equal(opt(mine, mask, q), grown_and_masked(ref, mask.copy(), q))
    assert compiles() == 2
    (general,) = [e for e in dynscope.cache_entries(grown_and_masked) if e.compile_id == "0/1"]
    relations = [g.expr for g in general.guards if g.kind == "SIZES_HOLD"]
    # pad = s0 + 1 - s1 > 0 is False; the product's rows relate (s0 + 1 ==
    # s1, the broadcast); keys.size == 0 needs no guard: s0 >= 2
    assert relations == ["L['cache'].keys.size(0) - L['mask'].size(0) + 1 <= 0",
                         "L['cache'].keys.size(0) - L['mask'].size(0) + 1 == 0"]
    # a mask that no longer relates so fails the guard and compiles again, right
    mask = np.ones(mine.keys.shape[0] - 1)
    q = np.ones(3)
    np.testing.assert_array_equal(opt(mine, mask, q), grown_and_masked(ref, mask.copy(), q))
    assert compiles() == 3


def rows_from(x, k):
    head = x[:k.shape[0]]              # a slice whose bound is another size
    tail = x[-2:]
    return head.sum(0) + tail.sum(0) * head.shape[0]


def test_slices_with_size_bounds_follow_both_sizes():
    opt = dynscope.optimize("eager")(rows_from)
    for n, m in ((6, 3), (8, 4), (9, 5), (10, 12), (7, 2)):
        x, k = np.arange(n * 2.0).reshape(n, 2), np.ones(m)
        np.testing.assert_array_equal(opt(x, k), rows_from(x, k))
    assert compiles() <= 4


# ---- generated programs over dynamic sizes (the day's seed, tests/_seeds.py) ----

import hypothesis                                          # noqa: E402
from hypothesis import note, settings, given               # noqa: E402
from hypothesis import strategies as st                    # noqa: E402
from _seeds import SEED, USED, reproducer                  # noqa: E402

# Pieces of code that read sizes: slices with constant and size bounds,
# branches and arithmetic on sizes, broadcasting, concatenation.  Each turns
# (x, k) into a new x; k is an array whose length is another dynamic size.
SIZE_OPS = [
    lambda x, k: x[2:], lambda x, k: x[:3], lambda x, k: x[-2:], lambda x, k: x[:-1],
    lambda x, k: x[1:-1], lambda x, k: x[:len(k)], lambda x, k: x[len(k) - 1:],
    lambda x, k: x[: x.shape[0] // 2] if x.shape[0] > 3 else x * 2,
    lambda x, k: np.concatenate([x, k]),
    lambda x, k: x + k[: x.shape[0]] if x.shape[0] <= k.shape[0] else x - 1,
    lambda x, k: x * (x.shape[0] - len(k)),
    lambda x, k: x[None, :].sum(0) if x.size != 0 else x,
    lambda x, k: x.reshape(-1, 1)[:, 0] if x.shape[0] >= 2 else x,
    lambda x, k: x[::-1] if len(x) == len(k) else x[1:] + 0.5,
]


@hypothesis.seed(SEED)
@settings(max_examples=60, deadline=None, derandomize=False, database=None)
@given(ops=st.lists(st.integers(0, len(SIZE_OPS) - 1), min_size=1, max_size=5),
       sizes=st.lists(st.tuples(st.integers(0, 12), st.integers(0, 12)), min_size=4, max_size=8))
def test_generated_programs_over_dynamic_sizes_match_eager(ops, sizes):
    note(f"seed {SEED}; to run these examples again: "
         f"{reproducer('tests/test_dynamic_sources.py::test_generated_programs_over_dynamic_sizes_match_eager')}")
    if "test_generated_programs_over_dynamic_sizes_match_eager" not in USED:
        USED.append("test_generated_programs_over_dynamic_sizes_match_eager")
    dynscope.reset()
    chosen = [SIZE_OPS[i] for i in ops]

    def f(x, k):
        for op in chosen:
            x = op(x, k)
        return x, x.shape

    opt = dynscope.optimize("eager")(f)
    for n, m in sizes:
        x, k = np.arange(float(n)), np.arange(float(m)) / 3
        try:
            want = f(x, k)
        except Exception as e:                      # the program raises: so must capture
            with pytest.raises(type(e)):
                opt(x, k)
            continue
        got = opt(x, k)
        assert got[1] == want[1], (n, m)
        np.testing.assert_array_equal(got[0], want[0])


def sliced_by(x, n):
    y = x[:n]
    return y.shape, y.sum()


def test_a_slice_by_a_dynamic_int_has_the_size_the_int_gives():
    # n a graph input (automatic dynamic): y's shape follows it (it was the
    # first traced value's until the slice's bounds counted as dynamic)
    opt = dynscope.optimize("eager")(sliced_by)
    for n in (3, 4, 5, 2, 6):
        x = np.arange(10.0)
        assert opt(x, n) == sliced_by(x, n)
    assert compiles() == 2


# ---- a source first read in a miss on changed sizes (issue 37) ----

class Past:
    """What a decoding loop hands its step: nothing on the prompt, then the
    cache the prompt filled, one row longer each step."""

    def __init__(self):
        self.k = None


def decode_step(ids, past):
    h = ids * 2.0
    if past.k is None:
        return h.sum(1)
    return h.sum(1) + past.k.sum(1)


def test_a_cache_first_read_when_the_prompts_length_changed_is_dynamic_at_once():
    # the prompt (1, 7), then steps (1, 1) with a cache of 7, 8, 9, ...
    # columns: the step's miss saw ids' 7 become 1, so the cache it reads
    # for the first time takes its 7 as dynamic -- one compile for every
    # step, not one for the first step and one for the rest
    opt = dynscope.optimize("eager")(decode_step)
    past, ref = Past(), Past()
    prompt = np.arange(7.0)[None]
    np.testing.assert_array_equal(opt(prompt, past), decode_step(prompt, ref))
    past.k, ref.k = prompt.copy(), prompt.copy()
    for i in range(6):
        ids = np.full((1, 1), float(i))
        np.testing.assert_array_equal(opt(ids, past), decode_step(ids, ref))
        past.k = ref.k = np.concatenate([ref.k, ids], axis=1)
    assert compiles() == 2
    (reason,) = reasons()
    assert reason.startswith("L['ids'].shape == (1, 7) (observed (1, 1))")
    assert "L['past'].k.size(1) is now dynamic (a graph input)" in reason
    assert "L['past'].k.size(0)" not in reason           # its 1 is no size that changed


def test_a_source_first_read_with_a_size_no_miss_saw_change_stays_static():
    # the same step, but the cache arrives with 5 columns, a size the
    # miss did not see change: static, then dynamic once it grows
    opt = dynscope.optimize("eager")(decode_step)
    past = Past()
    opt(np.ones((1, 7)), past)
    for n in (5, 6, 7, 8):
        past.k = np.ones((1, n))
        np.testing.assert_array_equal(opt(np.ones((1, 1)), past), decode_step(np.ones((1, 1)), past))
    assert compiles() == 3
    assert "L['past'].k.size(1) is now dynamic" not in reasons()[0]
    assert "L['past'].k.size(1) is now dynamic" in reasons()[1]


# ---- products of sizes ----

def flat_rows(x):
    if x.size == 0:                       # s0 * s1 >= 4: decided, no guard
        return x.sum(0)
    rows = x.reshape(-1, x.shape[1])      # -1: s0 * s1 / s1 = s0
    if rows.shape[0] > 3:
        return rows.sum(0)
    return rows.mean(0)


def test_an_element_count_of_two_dynamic_sizes_is_an_expression():
    opt = dynscope.optimize("eager")(flat_rows)
    for shape in ((4, 5), (6, 7), (8, 3), (5, 9), (2, 6), (3, 3)):
        x = np.arange(float(np.prod(shape))).reshape(shape)
        np.testing.assert_array_equal(opt(x), flat_rows(x))
    assert _C.counters()["graph_breaks"] == 0
    # (4, 5) static; (6, 7) both dynamic, rows > 3 guarded; (2, 6) the other side
    assert compiles() == 3
    assert not any("stays static" in r for r in reasons())
    general = [e for e in dynscope.cache_entries(flat_rows) if e.compile_id == "0/1"][0]
    assert [g.expr for g in general.guards if g.kind == "SIZES_HOLD"] == ["L['x'].size(0) - 3 > 0"]


def big_or_small(x):
    if x.size > 40:
        return x.sum()
    return x.max()


def test_a_branch_on_a_product_of_sizes_is_guarded_as_that_product():
    opt = dynscope.optimize("eager")(big_or_small)
    for shape in ((4, 5), (6, 7), (5, 9), (3, 5), (2, 9), (7, 7)):
        x = np.arange(float(np.prod(shape))).reshape(shape)
        assert opt(x) == big_or_small(x)
    assert compiles() == 3               # static (4, 5); size > 40; size <= 40
    general = [e for e in dynscope.cache_entries(big_or_small) if e.compile_id == "0/1"][0]
    assert [g.expr for g in general.guards if g.kind == "SIZES_HOLD"] == [
        "L['x'].size(0) * L['x'].size(1) - 40 > 0"]
    assert reasons()[1].startswith("L['x'].size(0) * L['x'].size(1) - 40 > 0")


def rows_of_mask(ids, mask):
    m = mask.reshape(ids.shape[0], -1)
    if m.shape[1] > 4:
        return m.sum(1) + ids.sum(1)
    return ids.sum(1)


def test_a_view_whose_minus_one_does_not_divide_as_written_relates_the_sizes_under_a_guard():
    # ids and mask both go from batch 1 to 2: the mask (s2, s3) viewed as
    # (s0, -1) is (s0, s3) where s0 == s2, guarded.  (It was a graph value:
    # the branch on it stopped the dynamic translation, and both inputs
    # stayed static for good.)
    opt = dynscope.optimize("eager")(rows_of_mask)
    opt(np.ones((1, 7)), np.ones((1, 7)))
    for n in (9, 5, 11):
        ids, mask = np.ones((2, n)), np.arange(2.0 * n).reshape(2, n)
        np.testing.assert_array_equal(opt(ids, mask), rows_of_mask(ids, mask))
    assert compiles() == 2
    assert not any("stays static" in r for r in reasons())
    general = [e for e in dynscope.cache_entries(rows_of_mask) if e.compile_id == "0/1"][0]
    assert [g.expr for g in general.guards if g.kind == "SIZES_HOLD"] == [
        "L['mask'].size(0) - L['ids'].size(0) == 0", "L['mask'].size(1) - 4 > 0"]
    ids, mask = np.ones((3, 4)), np.ones((2, 6))     # batches apart: the guard fails
    np.testing.assert_array_equal(opt(ids, mask), rows_of_mask(ids, mask))
    assert compiles() == 3


def test_a_view_of_a_static_input_by_a_dynamic_size_fixes_that_size_under_a_guard():
    # the mask keeps its shape (2, 9) while ids' batch and length go
    # dynamic: 18 elements viewed as (s0, -1) are (s0, 9) for s0 == 2
    opt = dynscope.optimize("eager")(rows_of_mask)
    mask = np.arange(18.0).reshape(2, 9)
    opt(np.ones((1, 7)), mask)
    for n in (9, 5, 11):
        ids = np.ones((2, n))
        np.testing.assert_array_equal(opt(ids, mask), rows_of_mask(ids, mask))
    assert compiles() == 2
    general = [e for e in dynscope.cache_entries(rows_of_mask) if e.compile_id == "0/1"][0]
    assert [g.expr for g in general.guards if g.kind == "SIZES_HOLD"] == ["L['ids'].size(0) - 2 == 0"]
    ids = np.ones((3, 4))                            # 18 rows of 6: the guard fails
    np.testing.assert_array_equal(opt(ids, mask), rows_of_mask(ids, mask))
    assert compiles() == 3


# ---- ints read through attributes ----

class Window:
    """A sliding-window cache's bookkeeping: its size, and how much it saw."""

    def __init__(self, size):
        self.size = size
        self.seen = 0


def window_read(w, x):
    full = w.seen >= w.size
    offset = max(w.seen - w.size + 1, 0)
    n = w.size - 1 + x.shape[0] if full else w.seen + x.shape[0]
    return x * n + offset


def test_an_int_attribute_that_changes_is_a_symbol_with_guarded_relations():
    # seen 7 static; 8 makes it dynamic: `full` and max() decided under
    # guards on it (seen - 12 < 0, 11 - seen > 0), which 9 and 10 pass;
    # 11 (max() picks the other side) and 12 (full) once each, which 13
    # to 20 pass -- 4 compiles for 14 values (it was one per value, to the
    # cache limit)
    opt = dynscope.optimize("eager")(window_read)
    w, x = Window(12), np.ones(2)
    for seen in range(7, 21):
        w.seen = seen
        np.testing.assert_array_equal(opt(w, x), window_read(w, x))
    assert compiles() == 4
    assert reasons()[0] == ("L['w'].seen == 7 (observed 8); "
                            "L['w'].seen is now dynamic (a graph input)")
    general = [e for e in dynscope.cache_entries(window_read) if e.compile_id == "0/1"][0]
    assert [g.expr for g in general.guards if g.kind == "SIZES_HOLD"] == [
        "L['w'].seen - 2 >= 0",                             # a symbol's range, as a size's
        "L['w'].seen - 12 < 0", "-L['w'].seen + 11 > 0"]
    w.seen = 1                                              # 0 and 1 stay specialized
    np.testing.assert_array_equal(opt(w, x), window_read(w, x))
    assert compiles() == 5


def grow(w, x):
    w.seen += x.shape[0]                  # the symbol plus a size, written back
    return x[:2] * w.seen


def test_an_int_attribute_written_from_its_symbol_lands_as_an_int():
    opt = dynscope.optimize("eager")(grow)
    mine, ref = Window(4), Window(4)
    mine.seen = ref.seen = 5
    for n in (3, 4, 2, 5, 3):
        x = np.arange(float(n))
        np.testing.assert_array_equal(opt(mine, x), grow(ref, x))
        assert type(mine.seen) is int and mine.seen == ref.seen
    assert compiles() <= 3


def picks(w, names, x):
    return max(names), min(w.seen - 3, 9), max([w.seen]), x * 2


def test_min_and_max_of_one_iterable_are_not_taken_for_sizes():
    # max(a_set) iterates the set (functools.total_ordering's max(roots));
    # only sizes given as arguments, or in a list or tuple, are compared
    opt = dynscope.optimize("eager")(picks)
    w, x = Window(4), np.ones(2)
    for seen in (5, 6, 7, 20):
        w.seen = seen
        got, want = opt(w, {"__lt__", "__gt__", "__le__"}, x), picks(w, {"__lt__", "__gt__", "__le__"}, x)
        assert got[:3] == want[:3]
        np.testing.assert_array_equal(got[3], want[3])


class Grid:
    def __init__(self, rows, cols):
        self.rows, self.cols = rows, cols


def tiled(a, g):
    n = g.rows * g.cols                          # a product of two symbols
    repeats = -(-n // a.size)                    # not an expression: a graph number
    return np.concatenate((a,) * repeats)[:n].reshape(g.rows, g.cols)


def test_int_attributes_whose_product_counts_a_repetition_stay_right():
    opt = dynscope.optimize("eager")(tiled)
    a = np.arange(4.0)
    for r, c in ((2, 4), (4, 2), (4, 3), (3, 5), (6, 7)):
        np.testing.assert_array_equal(opt(a, Grid(r, c)), tiled(a, Grid(r, c)))
