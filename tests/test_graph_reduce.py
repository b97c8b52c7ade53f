"""NumPy reductions in running graphs (engine/graph/graph_reduce.c): np.sum /
prod / max / min (amax, amin) and the ndarray methods of those names, given
the array and at most an axis, run as the ufunc's reduce they call.  What
must hold: the same value, type, dtype and shape as eager, the same
exceptions, and anything that is not an exact ndarray taking the call
eager would make."""
import numpy as np
import pytest

import dynscope

from conftest import assert_same


def run_both(fn, *args):
    """Captured and eager results bit-identical (conftest.assert_same: type,
    dtype, shape, strides, the bytes -- so the sign of zero and NaN payloads)."""
    opt = dynscope.optimize("eager")(fn)
    for _ in range(3):
        assert_same(opt(*args), fn(*args), bits=True)
    return opt


def functions(a):
    return (np.sum(a), np.prod(a), np.max(a), np.min(a), np.amax(a), np.amin(a),
            np.sum(a, 0), np.max(a, axis=0), np.sum(a * 2, axis=-1))


def methods(a):
    return a.sum(), a.prod(), a.max(), a.min(), a.sum(0), a.max(axis=-1), (a + 1).min(0)


@pytest.mark.parametrize("dtype", ["float64", "float32", "int64", "int32", "uint8", "bool"])
@pytest.mark.parametrize("shape", [(7,), (3, 5), (2, 3, 4)])
def test_reductions_equal_eager(dtype, shape):
    a = (np.random.default_rng(len(shape)).standard_normal(shape) * 5).astype(dtype)
    with np.errstate(all="ignore"):
        run_both(functions, a)
        run_both(methods, a)


def test_rank0_gives_scalars():
    run_both(lambda a: (np.sum(a), a.max(), np.prod(a)), np.array(2.5))


def test_nan_and_the_kept_arguments():
    a = np.array([1.0, np.nan, 3.0])
    run_both(lambda a: (np.max(a), a.min(), np.sum(a, keepdims=True), a.sum(dtype=np.float32),
                        np.max(a, initial=9.0), a.sum(where=a > 1)), a)


def test_an_empty_max_raises_as_eager():
    f = dynscope.optimize("eager")(lambda a: np.max(a + 1))
    with pytest.raises(ValueError) as want:
        np.max(np.zeros(0) + 1)
    for _ in range(2):
        with pytest.raises(ValueError) as got:
            f(np.zeros(0))
        assert str(got.value) == str(want.value)


class Sub(np.ndarray):
    """A subclass: np.sum calls its own sum method, as eager does."""
    calls = 0

    def sum(self, *args, **kwargs):
        Sub.calls += 1
        return np.asarray(self).sum(*args, **kwargs) + 100


def test_a_subclass_takes_the_call_eager_makes():
    def f(a):
        return np.sum(a)
    base = np.arange(6.0)
    f_opt = dynscope.optimize("eager")(f)
    assert f_opt(base) == 15.0                 # captured with an exact ndarray
    sub = base.view(Sub)
    Sub.calls = 0
    assert f_opt(sub) == f(sub) == 115.0
    assert Sub.calls == 2
