"""Whether a NumPy ufunc writes the same bits into a buffer it is given
(``out=``) as into one it allocates: engine/graph/graph_inplace.c asks, once
per ufunc and process, before a graph reuses a dying operand's buffer for a
ufunc whose results are not exactly rounded (exp, log, tanh, ...).

An exactly rounded op has one right answer per element, whatever loop runs
it.  A transcendental one has as many as there are implementations, and
NumPy picks among its loops (SIMD or scalar) by what the operands and the
output look like: memory overlap, strides, alignment.  So this is asked of
the NumPy and the CPU at hand, not assumed: float32 and float64 values
spread over each function's domain and past it (zeros, subnormals,
infinities, NaNs), at lengths that end mid-vector, written into one of the
inputs (what reuse does) and into fresh buffers at several alignments, must
give the bits of the call that allocates.  A ufunc that differs anywhere is
never given a buffer.
"""
import numpy as np

_LENGTHS = (1, 3, 8, 13, 64, 257, 4099)
_OFFSETS = (0, 1, 3, 8)            # elements into a bigger buffer: alignments
_DTYPES = (np.float64, np.float32)


def _values(dtype, n, rng):
    scale = rng.choice(np.array([1e-3, 0.5, 1.0, 3.0, 30.0, 700.0]), n)
    v = (rng.standard_normal(n) * scale).astype(dtype)
    special = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan,
                        np.finfo(dtype).tiny / 4, np.finfo(dtype).max], dtype)
    v[: min(n, special.size)] = special[: min(n, special.size)]
    return v


def _placed(v, offset):
    """A copy of v starting `offset` elements into a bigger buffer."""
    buf = np.empty(v.size + offset, v.dtype)[offset:]
    buf[...] = v
    return buf


def reuses_buffer_exactly(ufunc, call=None) -> bool:
    """True when every probe of `ufunc` (nout 1) gives the same bits with
    out= (an input's own buffer, or a fresh one at any of the offsets) as
    without.  `call(ufunc, *args, **kwargs)` runs it (tests pass their
    own)."""
    call = call or (lambda u, *a, **k: u(*a, **k))
    if not isinstance(ufunc, np.ufunc) or ufunc.nout != 1 or ufunc.nin not in (1, 2):
        return False
    rng = np.random.default_rng(20261128)
    with np.errstate(all="ignore"):
        for dtype in _DTYPES:
            for n in _LENGTHS:
                ins = [_values(dtype, n, rng) for _ in range(ufunc.nin)]
                want = call(ufunc, *ins)
                if want.dtype != dtype:
                    return False
                want = want.view(np.uint8)
                for offset in _OFFSETS:
                    for i in range(ufunc.nin):           # into an input, as reuse does
                        args = list(ins)
                        args[i] = _placed(ins[i], offset)
                        got = call(ufunc, *args, out=args[i])
                        if not np.array_equal(got.view(np.uint8), want):
                            return False
                    out = np.empty(n + offset, dtype)[offset:]
                    if not np.array_equal(call(ufunc, *ins, out=out).view(np.uint8), want):
                        return False
    return True
