"""Buffer reuse in running graphs (engine/graph/graph_inplace.c): an elementwise op
whose array operand dies with it writes into that operand's buffer.  What
must hold: results bit-identical to eager (type, dtype, shape, strides, bytes), no
value the program can see ever written, and fewer buffers than one per op
(measured with tracemalloc, which NumPy reports its data allocations to)."""
import tracemalloc

import numpy as np
import pytest
import hypothesis
from hypothesis import given, note, settings, strategies as st

import dynscope

from conftest import assert_same
from _seeds import SEED, USED, reproducer

# Sizes on both sides of the reuse threshold (4 KiB) and of NumPy's own
# temporary elision (256 KiB).
SIZES = (3, 100, 600, 5_000, 70_000)


def run_both(fn, *args):
    """Captured and eager results bit-identical (conftest.assert_same: type,
    dtype, shape, strides, the bytes -- so the sign of zero and NaN payloads);
    the inputs' bytes untouched."""
    opt = dynscope.optimize("eager")(fn)
    copies = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    for _ in range(3):                       # capture, then hits
        assert_same(opt(*args), fn(*args), bits=True)
    for a, c in zip(args, copies):           # inputs never written
        if isinstance(a, np.ndarray):
            assert a.tobytes() == c.tobytes()
    return opt


def test_the_check_catches_what_array_equal_lets_through():
    """run_both's check fails on what np.array_equal (the check it replaced)
    passes: -0.0 for 0.0, a NaN with another payload, other strides."""
    zero = np.zeros(3)
    minus = zero.copy()
    minus[1] = -0.0
    assert np.array_equal(minus, zero)
    with pytest.raises(AssertionError, match="sign of zero"):
        assert_same(minus, zero, bits=True)
    with pytest.raises(AssertionError):
        assert_same(np.float64(-0.0), np.float64(0.0), bits=True)
    with pytest.raises(AssertionError):
        assert_same(-0.0, 0.0, bits=True)
    nan = np.full(2, np.nan)
    payload = nan.copy()
    payload.view(np.uint64)[0] ^= 1
    assert np.isnan(payload).all() and np.array_equal(payload, nan, equal_nan=True)
    with pytest.raises(AssertionError, match="bits differ"):
        assert_same(payload, nan, bits=True)
    assert_same(payload, nan)               # without bits=True: values only
    square = np.arange(6.0).reshape(2, 3)
    assert np.array_equal(np.asfortranarray(square), square)
    with pytest.raises(AssertionError, match="strides"):
        assert_same(np.asfortranarray(square), square, bits=True)


def chain8(a, b):
    return (a * b - 2.0) / (np.abs(a) + 1.0) + np.sqrt(np.abs(b))


def float_ops(a, b):
    t = (a - b) ** 2 + np.square(a) * 0.5
    u = -(t / (np.abs(b) + 1.0)) // 0.25 % 3.0
    return np.minimum(np.sqrt(t), u ** 0.5) + (1.0 / (t + 2.0)) ** -1


def int_ops(a, b):
    t = (a * b + 3) // 2 - (a % 7)
    u = ((t & 0xFF) | (b ^ 5)) << 1
    return -(u >> 2) + abs(t) + ~a


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_float_chains_bit_identical(n, dtype):
    rng = np.random.default_rng(n)
    a = rng.standard_normal(n).astype(dtype)
    b = rng.standard_normal(n).astype(dtype)
    run_both(chain8, a, b)
    run_both(float_ops, a, b)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8"])
def test_int_chains_bit_identical(n, dtype):
    rng = np.random.default_rng(n)
    a = rng.integers(1, 100, n).astype(dtype)
    b = rng.integers(1, 100, n).astype(dtype)
    run_both(int_ops, a, b)


def peak_bytes(fn, *args):
    """Peak bytes NumPy allocates in one run of fn (after one to warm up),
    with no arrays kept between runs (engine/graph/graph_pool.c): what the
    run's own buffer reuse needs."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DYNSCOPE_POOL_BYTES", "0")
        dynscope.reset()                    # drops the arrays kept so far
        fn(*args)
        tracemalloc.start()
        try:
            tracemalloc.reset_peak()
            fn(*args)
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()


def test_chain_allocates_two_buffers_not_one_per_op():
    n = 100_000
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(n), rng.standard_normal(n)
    opt = run_both(chain8, a, b)
    nbytes = a.nbytes
    captured, eager = peak_bytes(opt, a, b), peak_bytes(chain8, a, b)
    # 8 ops, 3 fresh results (a*b, abs(a), abs(b)); at most two alive at once.
    assert captured < 2 * nbytes + 64 * 1024, (captured, nbytes)
    assert captured <= eager


def test_ufunc_calls_reuse_too():
    # Eager NumPy elides only operators; np.sqrt(np.abs(x)) makes two arrays.
    def f(a):
        return np.sqrt(np.abs(np.negative(a)))
    a = np.random.default_rng(1).standard_normal(100_000)
    opt = run_both(f, a)
    assert peak_bytes(opt, a) < 1.5 * a.nbytes < peak_bytes(f, a)


def test_small_arrays_are_not_reused():
    # Below 4 KiB a fresh array costs less than passing out=: one buffer per
    # result, as eager.
    a = np.ones(64)
    opt = run_both(lambda a: ((a + 1.0) * 2.0 - 3.0) / 4.0, a)
    assert peak_bytes(opt, a) >= 2 * a.nbytes


def test_a_view_keeps_its_base_from_being_reused():
    def f(a):
        t = a * 2.0
        v = t[1:]            # v sees t's buffer: t must not be written
        u = t + 1.0          # t's last use
        return u, v
    a = np.arange(10_000, dtype=np.float64)
    run_both(f, a)


def test_outputs_and_inputs_are_never_donors():
    def f(a, b):
        t = a + b
        return t, t * 2.0, a - 1.0
    a, b = np.ones(10_000), np.full(10_000, 2.0)
    run_both(f, a, b)


def test_same_operand_twice():
    def f(a):
        t = a + 1.0
        return t * t - t
    run_both(f, np.linspace(0, 1, 10_000))


def test_result_of_another_dtype_or_shape_is_fresh():
    def to_float(a):
        t = a * 3
        return t / 2.0                   # int64 -> float64: not into t
    def broadcast(a, m):
        t = a * 2.0
        return t + m                     # (n,) + (k, n) -> (k, n): not into t
    def weak_scalar(a):
        return (a * 2.0) + 1.5           # float32 stays float32 (NEP 50)
    run_both(to_float, np.arange(10_000))
    run_both(broadcast, np.ones(2_000), np.ones((3, 2_000)))
    run_both(weak_scalar, np.ones(10_000, dtype=np.float32))


def test_rank0_results_stay_scalars():
    def f(a):
        s = a.sum() * 2.0                # a NumPy scalar, as eager
        return s + 1.0
    opt = run_both(f, np.ones(10_000))
    assert type(opt(np.ones(10_000))) is np.float64


def test_transcendental_ufuncs_reuse_a_buffer_where_the_probe_finds_the_same_bits():
    # exp, log1p, tanh and arctan2 are not exactly rounded: NumPy's loops
    # (SIMD or scalar) may differ in the last bit, and which one runs can
    # depend on the output buffer.  dynscope/_ufunc_probe.py asks this NumPy
    # on this CPU; where it says the bits stay, a dying operand is reused.
    from dynscope._ufunc_probe import reuses_buffer_exactly
    def f(a):
        return np.tanh(np.log1p(np.exp(np.abs(a) * 0.5)))
    def g(a, b):
        return np.arctan2(a * 0.5, b)
    a = np.random.default_rng(2).standard_normal(100_000)
    b = np.random.default_rng(3).standard_normal(100_000)
    opt = run_both(f, a)
    run_both(g, a, b)
    names = ("exp", "log1p", "tanh")
    if all(reuses_buffer_exactly(getattr(np, n)) for n in names):
        assert peak_bytes(opt, a) < 1.5 * a.nbytes < peak_bytes(f, a)
    else:
        assert peak_bytes(opt, a) >= 2 * a.nbytes


def test_the_probe_refuses_a_ufunc_whose_bits_change_with_its_output_buffer():
    from dynscope._ufunc_probe import reuses_buffer_exactly
    def last_bit_off_in_place(u, *args, out=None):
        r = u(*args, out=out) if out is not None else u(*args)
        if out is not None and any(out is x for x in args):
            r.view(np.uint64 if r.dtype == np.float64 else np.uint32)[-1] ^= 1
        return r
    assert reuses_buffer_exactly(np.exp, call=lambda u, *a, **k: u(*a, **k))
    assert not reuses_buffer_exactly(np.exp, call=last_bit_off_in_place)
    assert not reuses_buffer_exactly(np.float_power)     # float32 in, float64 out
    assert not reuses_buffer_exactly(np.divmod)          # two outputs


def test_a_ufunc_the_probe_refuses_gets_a_fresh_buffer(tmp_path):
    """In a process where the probe says no to everything, np.exp on a dying
    temporary allocates, as eager does."""
    import subprocess
    import sys
    import textwrap
    script = tmp_path / "refused.py"
    script.write_text(textwrap.dedent('''
        import os
        os.environ["DYNSCOPE_POOL_BYTES"] = "0"      # no arrays kept between runs
        import tracemalloc
        import numpy as np
        import dynscope, dynscope._ufunc_probe as probe
        probe.reuses_buffer_exactly = lambda u, call=None: False
        def f(a):
            return np.exp(np.abs(a) * 0.5)
        a = np.random.default_rng(2).standard_normal(100_000)
        opt = dynscope.optimize("eager")(f)
        opt(a)
        tracemalloc.start()
        r = opt(a)
        peak = tracemalloc.get_traced_memory()[1]
        assert r.tobytes() == f(a).tobytes()
        print(peak / a.nbytes)
    '''))
    p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    assert float(p.stdout.split()[-1]) >= 2.0


OPS = [
    ("add", lambda x, y: x + y), ("sub", lambda x, y: x - y),
    ("rsub", lambda x, y: 1.5 - x), ("mul", lambda x, y: x * y),
    ("div", lambda x, y: x / (np.abs(y) + 1.0)), ("neg", lambda x, y: -x),
    ("abs", lambda x, y: abs(x)), ("sq", lambda x, y: x ** 2),
    ("sqrt", lambda x, y: np.sqrt(np.abs(x))), ("min", lambda x, y: np.minimum(x, y)),
    ("floor", lambda x, y: np.floor(x)), ("mod", lambda x, y: x % 1.75),
    ("exp", lambda x, y: np.exp(np.minimum(x, 3.0))), ("log1p", lambda x, y: np.log1p(np.abs(x))),
    ("tanh", lambda x, y: np.tanh(x)), ("atan2", lambda x, y: np.arctan2(x, y)),
]


# Drawn from the day's seed (tests/_seeds.py): other chains each day, the
# same ones in every run of a day, and the command to rerun them on failure.
@hypothesis.seed(SEED)
@settings(max_examples=40, deadline=None, derandomize=False, database=None)
@given(ops=st.lists(st.sampled_from(range(len(OPS))), min_size=1, max_size=6),
       n=st.sampled_from([7, 700, 9_000, 20_000]),   # 20k: arrays kept between runs
       dtype=st.sampled_from(["float64", "float32"]),
       seed=st.integers(0, 2**16))
def test_generated_chains(ops, n, dtype, seed):
    note(f"seed {SEED}; to run these examples again: "
         f"{reproducer('tests/test_graph_inplace.py::test_generated_chains')}")
    if "test_generated_chains" not in USED:
        USED.append("test_generated_chains")
    dynscope.reset()                 # one code object, many programs
    chosen = [OPS[i][1] for i in ops]

    def f(x, y):
        for op in chosen:
            x = op(x, y)
        return x
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n).astype(dtype)
    y = rng.standard_normal(n).astype(dtype)
    with np.errstate(all="ignore"):
        run_both(f, x, y)


# ---------------------------------------------------------------------------
# Blocked runs (engine/graph/graph_blocks.c): chains on arrays of 512Ki elements
# and more, whose arrays do not fit in the last-level cache, run block by
# block.  The cache is said to be 1 MiB here, so that arrays of a few MB are
# blocked on any machine.

BIG = 600_000


@pytest.fixture(autouse=True)
def small_cache(monkeypatch, request):
    if "blocked" in request.node.name:
        monkeypatch.setenv("DYNSCOPE_CACHE_BYTES", str(1 << 20))


def chain4(a, b):
    return ((a + b) * 0.5 - a) * b


@pytest.mark.parametrize("dtype", ["float64", "float32", "int64"])
def test_blocked_chain_bit_identical(dtype):
    rng = np.random.default_rng(7)
    a = (rng.standard_normal(BIG) * 100).astype(dtype)
    b = (rng.standard_normal(BIG) * 100).astype(dtype)
    opt = run_both(chain4, a, b)
    run_both(chain8, a.astype("float64"), b.astype("float64"))
    got = opt(a, b)                       # a fresh, owning, C-contiguous array
    assert got.flags.owndata and got.flags.c_contiguous and got.base is None


def test_blocked_chain_2d_and_intermediate_outputs():
    def f(a, b):
        t = a * b
        u = t + 1.0                       # read after the run: made whole
        return u * 2.0 - a, u
    rng = np.random.default_rng(8)
    a, b = rng.standard_normal((600, 1000)), rng.standard_normal((600, 1000))
    run_both(f, a, b)


def test_blocked_chain_allocates_only_what_outlives_it():
    rng = np.random.default_rng(9)
    a, b = rng.standard_normal(1_000_000), rng.standard_normal(1_000_000)
    opt = run_both(chain8, a, b)
    # The result, plus one 512 KiB scratch buffer (the intermediates share
    # it and the result's own array); op by op, even reusing buffers, two
    # whole arrays are alive at once, and eager needs three.
    assert peak_bytes(opt, a, b) < a.nbytes + 600 * 1024
    assert peak_bytes(chain8, a, b) >= 3 * a.nbytes
    # A chain of operators: eager elides every temporary into one array; the
    # blocked run keeps its intermediates in that array too.
    opt4 = run_both(chain4, a, b)
    assert peak_bytes(opt4, a, b) < peak_bytes(chain4, a, b) + 16 * 1024


def test_blocked_chain_on_strided_input_is_not_blocked():
    rng = np.random.default_rng(10)
    a, b = rng.standard_normal(2 * BIG), rng.standard_normal(2 * BIG)
    run_both(chain4, a[::2], b[::2])


def warnings_of(fn, *args):
    import warnings
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = fn(*args)
    return out, [(x.category, str(x.message)) for x in w]


def test_blocked_chain_warns_once_per_op_as_eager():
    def f(a, b):
        return (a / b) * 2.0 + np.sqrt(a - 3.0)
    a = np.ones(BIG)
    b = np.ones(BIG)
    b[BIG // 2] = 0.0                      # divide by zero in one block
    a[-1] = -5.0                           # invalid (sqrt of a negative) in the last
    opt = dynscope.optimize("eager")(f)
    opt(a, b)
    want, want_w = warnings_of(f, a, b)
    got, got_w = warnings_of(opt, a, b)
    assert_same(got, want, bits=True)
    assert got_w == want_w and len(want_w) == 2


def test_blocked_chain_raises_as_eager_under_errstate_raise():
    def f(a, b):
        return (a * 2.0) / b - 1.0
    a, b = np.ones(BIG), np.ones(BIG)
    b[123_456] = 0.0
    opt = dynscope.optimize("eager")(f)
    opt(np.ones(BIG), np.ones(BIG))        # compile without the error
    with np.errstate(divide="raise"):
        with pytest.raises(FloatingPointError) as want:
            f(a, b)
        with pytest.raises(FloatingPointError) as got:
            opt(a, b)
    assert str(got.value) == str(want.value)
    assert np.geterr()["divide"] == "warn"   # the caller's settings are back


def test_a_chain_that_fits_in_cache_runs_op_by_op(monkeypatch):
    # Blocks only pay when the arrays do not fit in the last-level cache;
    # below that the ops run whole, reusing buffers (two arrays alive).
    monkeypatch.setenv("DYNSCOPE_CACHE_BYTES", str(1 << 30))
    rng = np.random.default_rng(11)
    a, b = rng.standard_normal(1_000_000), rng.standard_normal(1_000_000)
    opt = run_both(chain8, a, b)
    assert 2 * a.nbytes <= peak_bytes(opt, a, b) < 3 * a.nbytes


# ---- constant scalars passed as 0-d arrays --------------------------------
# `a + 1.0`: NumPy 2 converts the Python scalar on every call; the graph
# passes it as a read-only 0-d array of the array's dtype where that
# conversion is exact (float64; int64; ints up to 2**53 with float64).

def scalar_consts(a):
    return ((a + 1.0) * -0.0 - 2, a / 3.0 + 7, np.maximum(a, 0.5) - (2 ** 53 + 1),
            a * float("nan"), np.minimum(a, float("inf")), a - 2 ** 62)


def int_consts(a):
    return a + 3, (a * 2 ** 62) // 5, a - 1.5, a ^ 0xFF, np.maximum(a, -(2 ** 63))


@pytest.mark.parametrize("n", (0, 1, 7, 5_000))
@pytest.mark.parametrize("dtype", ["float64", "float32", "float16"])
def test_float_scalar_constants_bit_identical(n, dtype):
    a = np.random.default_rng(n).standard_normal(n).astype(dtype)
    with np.errstate(all="ignore"):
        run_both(scalar_consts, a)


def small_int_consts(a):
    return a + 3, a * 2 // 5, a - 1.5, a ^ 0x7F, np.maximum(a, 9)


@pytest.mark.parametrize("n", (1, 7, 5_000))
@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8"])
def test_int_scalar_constants_bit_identical(n, dtype):
    a = np.random.default_rng(n).integers(0, 100, n).astype(dtype)
    with np.errstate(all="ignore"):
        run_both(small_int_consts, a)
        if dtype == "int64":
            run_both(int_consts, a)
        else:                       # a constant out of the dtype's range
            with pytest.raises(OverflowError):
                int_consts(a)
            with pytest.raises(OverflowError):
                dynscope.optimize("eager")(int_consts)(a)


def test_scalar_constants_on_rank0_and_scalars_stay_scalars():
    for x in (np.array(2.5), np.float64(2.5), np.array(3), np.int64(3)):
        run_both(lambda a: a * 2.0 + 1, x)


def test_a_constant_array_never_reaches_the_program():
    def f(a):
        return a + 1.0, np.add(a, 2.0)
    opt = run_both(f, np.ones(4))
    for _ in range(2):
        x, y = opt(np.ones(4))
        x += 10.0                       # writable, the program's own
        y += 10.0
        assert x.flags.writeable and x.shape == (4,)
    assert np.array_equal(opt(np.ones(4))[0], np.full(4, 2.0))


# ---- arrays kept between runs (engine/graph/graph_pool.c) -----------------
# An intermediate that dies is kept (up to DYNSCOPE_POOL_BYTES, 32 MiB by
# default) for the next op that would allocate its like, in this run or a
# later one: a run in the steady state allocates nothing big, so the pages
# are not faulted in again on every call.

def kept_chain(a, b):
    t = a * 2.0          # a is an input, never a donor: allocates, or a kept array
    u = t + b            # t is read again below: the same
    return (u * t).sum()


def minor_faults():
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def test_a_graph_in_its_steady_state_faults_no_pages():
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal(1_000_000), rng.standard_normal(1_000_000)
    opt = run_both(kept_chain, a, b)
    assert dynscope._C.kept_array_bytes() == 2 * a.nbytes       # t and u
    before = minor_faults()
    for _ in range(20):
        opt(a, b)
    # One fresh 8 MB array is 1,953 pages; the runs fault (nearly) none.
    assert (minor_faults() - before) / 20 < 5
    dynscope.reset()
    assert dynscope._C.kept_array_bytes() == 0


def test_the_budget_bounds_what_is_kept(monkeypatch):
    rng = np.random.default_rng(6)
    a, b = rng.standard_normal(1_000_000), rng.standard_normal(1_000_000)
    monkeypatch.setenv("DYNSCOPE_POOL_BYTES", str(a.nbytes + 1000))
    run_both(kept_chain, a, b)
    assert dynscope._C.kept_array_bytes() == a.nbytes
    monkeypatch.setenv("DYNSCOPE_POOL_BYTES", "0")
    dynscope.reset()
    run_both(kept_chain, a, b)
    assert dynscope._C.kept_array_bytes() == 0


def test_small_arrays_are_not_kept():
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal(5_000), rng.standard_normal(5_000)       # 40 KB
    run_both(kept_chain, a, b)
    assert dynscope._C.kept_array_bytes() == 0


def returns_its_intermediates(a):
    t = a * 2.0
    u = t + 1.0
    return u, t * u, np.exp(u)


@pytest.mark.parametrize("dtype", ["float64", "float32", "int64"])
def test_an_array_the_program_holds_is_never_written_by_a_later_run(dtype):
    rng = np.random.default_rng(8)
    a1 = (rng.standard_normal(200_000) * 10).astype(dtype)
    a2 = (rng.standard_normal(200_000) * 10).astype(dtype)
    with np.errstate(all="ignore"):
        opt = run_both(returns_its_intermediates, a1)
        held = opt(a1)
        saved = [r.copy() for r in held]
        for _ in range(3):
            assert_same(opt(a2), returns_its_intermediates(a2), bits=True)
    for r, c in zip(held, saved):
        assert r.tobytes() == c.tobytes()


def test_two_threads_running_one_graph_never_share_a_kept_array():
    # ufuncs release the GIL inside their loops: each thread must have its
    # own buffers for the whole run.
    import threading
    rng = np.random.default_rng(9)
    inputs = [(rng.standard_normal(300_000), rng.standard_normal(300_000)) for _ in range(2)]
    def f(a, b):
        t = np.exp(a * 0.5)
        u = t + b
        return np.maximum(u * t, b) - t
    want = [f(a, b) for a, b in inputs]
    opt = dynscope.optimize("eager")(f)
    opt(*inputs[0])
    bad = []
    def worker(i):
        for _ in range(30):
            if opt(*inputs[i]).tobytes() != want[i].tobytes():
                bad.append(i)
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert bad == []
    assert dynscope._C.kept_array_bytes() > 0
