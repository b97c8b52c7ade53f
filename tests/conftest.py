"""Shared fixtures: every test starts from an empty engine; shared checks."""
import gc
import os
import sys
import math
import struct
import warnings

import numpy as np
import pytest

import dynscope
from dynscope import _C

from _seeds import pytest_terminal_summary  # noqa: F401  (the random tests' seed, at the end)
# under CI=true, a skip for a tool CI installs fails
from _ci_skips import pytest_make_collect_report, pytest_runtest_makereport  # noqa: F401


@pytest.fixture(autouse=True)
def fresh_engine():
    """Reset caches, counters and the event log; restore config afterwards."""
    limit = dynscope.config.cache_size_limit
    tensorless = dynscope.config.skip_tensorless_frames
    dynscope.reset()
    _C.clear_events()
    yield
    assert _C.capture_depth() == 0, "a test left a capture region open"
    assert not _C.hook_installed(), "the frame hook stayed installed outside capture"
    dynscope.config.cache_size_limit = limit
    dynscope.config.skip_tensorless_frames = tensorless
    dynscope.config.accumulated_cache_size_limit = 256
    dynscope.config.fail_on_cache_limit = False
    dynscope.set_stance("default")
    dynscope.reset()
    gc.collect()


def events(kind=None):
    """The in-memory event log, optionally only events named `kind`."""
    evs = _C.events()
    return [e for e in evs if kind is None or e["event"] == kind]


# Why torch's tests skip when it is absent: it is optional, and
# DYNSCOPE_WITH_TORCH=1 installs it on every version (3.11: torch==2.13.0,
# a CPU wheel on disk; 3.12/3.13: torch==2.14.1, PyPI's CUDA build).
TORCH_SKIP_REASON = (
    "PyTorch is optional: install it with DYNSCOPE_WITH_TORCH=1 scripts/install-deps.sh"
    + ("" if sys.version_info[:2] == (3, 11) else
       f" (PYTHON=python{sys.version_info[0]}.{sys.version_info[1]}: torch==2.14.1, ~5.7 GB)"))

# Under make asan, importing torch._dynamo (which transformers' masking code
# does) imports triton where it is installed -- torch's CUDA build, 3.12 and
# 3.13 here -- and triton's import throws a C++ exception: with ASan's
# runtime preloaded, __cxa_throw has no interceptor target and the process
# aborts.  So the test process keeps triton out (torch then runs as on a
# machine without it: these tests run on the CPU and never use it), and a
# test that starts another Python that imports torch._dynamo skips there.
def _asan_with_triton():
    import importlib.util
    return "libasan" in os.environ.get("LD_PRELOAD", "") and \
        importlib.util.find_spec("triton") is not None


_TRITON_UNDER_ASAN = _asan_with_triton()        # (asked before triton is kept out)
if _TRITON_UNDER_ASAN:
    sys.modules.setdefault("triton", None)       # `import triton` raises ImportError

def _asan_with_torch_cuda_build():
    """Under make asan with torch's CUDA build (3.12 and 3.13 here): any C++
    exception torch throws, even one it catches, aborts the process."""
    import importlib.util
    spec = importlib.util.find_spec("torch") if "libasan" in os.environ.get("LD_PRELOAD", "") \
        else None
    return spec is not None and spec.origin is not None and os.path.exists(
        os.path.join(os.path.dirname(spec.origin), "lib", "libtorch_cuda.so"))


skip_transformers_under_asan = pytest.mark.skipif(
    _asan_with_torch_cuda_build(), reason="transformers asks torch.cuda whether a stream is "
    "capturing (is_tracing), and torch's CUDA build answers on a machine without a GPU by "
    "throwing and catching a C++ exception; under make asan's preloaded ASan runtime "
    "__cxa_throw has no interceptor target and the process aborts")

skip_torch_throw_under_asan = pytest.mark.skipif(
    "libasan" in os.environ.get("LD_PRELOAD", ""), reason="the test makes torch's dispatcher "
    "throw a C++ exception (a custom op's kernel raising, a meta kernel missing); under make "
    "asan's preloaded ASan runtime __cxa_throw has no interceptor target and the process aborts")

skip_dynamo_under_asan = pytest.mark.skipif(
    _TRITON_UNDER_ASAN, reason="the Python it starts imports torch._dynamo, which imports "
    "triton, whose import throws a C++ exception; under make asan's preloaded ASan runtime "
    "__cxa_throw has no interceptor target and the process aborts")


class CountingBackend:
    """A backend that records every graph it is given and runs it eagerly."""

    def __init__(self):
        self.graphs = []
        self.example_inputs = []

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        self.example_inputs.append(list(example_inputs))
        return gm.forward


@pytest.fixture
def counting_backend():
    return CountingBackend()


@pytest.fixture
def no_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield


def is_test_object(obj):
    """An instance of a class a test module defines (Config, Layer ...)."""
    return (type(obj).__module__.startswith("test_") and hasattr(obj, "__dict__")
            and not callable(obj))


def assert_same(got, want, path="result", *, bits=False):
    """got (captured) equals want (eager) exactly, recursively: types, dtypes,
    shapes, strides, values, the sign of zeros, NaNs, RNG states, and the
    attributes of the tests' own objects.  bits=True: bit-identical, i.e.
    also the bytes of every float (a NaN's sign and payload too)."""
    assert type(got) is type(want), f"{path}: type {type(got).__name__} != {type(want).__name__}"
    if isinstance(want, (np.ndarray, np.generic)):
        assert got.dtype == want.dtype, f"{path}: dtype {got.dtype} != {want.dtype}"
        assert np.shape(got) == np.shape(want), f"{path}: shape {np.shape(got)} != {np.shape(want)}"
        if isinstance(want, np.ndarray):
            assert got.strides == want.strides, f"{path}: strides {got.strides} != {want.strides}"
        np.testing.assert_array_equal(got, want, err_msg=path, strict=True)
        if want.dtype.kind in "fc":
            np.testing.assert_array_equal(np.signbit(np.real(got)), np.signbit(np.real(want)),
                                          err_msg=f"{path}: sign of zero")
        if bits:   # tobytes(): the elements in logical order, whatever the strides
            assert np.asarray(got).tobytes() == np.asarray(want).tobytes(), (
                f"{path}: bits differ (a NaN's payload or sign)")
    elif isinstance(want, float):
        assert (got == want and math.copysign(1, got) == math.copysign(1, want)) or (
            math.isnan(got) and math.isnan(want)), f"{path}: {got!r} != {want!r}"
        if bits:
            assert struct.pack("<d", got) == struct.pack("<d", want), f"{path}: bits differ"
    elif isinstance(want, (tuple, list)):
        assert len(got) == len(want), f"{path}: length {len(got)} != {len(want)}"
        for i, (g, w) in enumerate(zip(got, want)):
            assert_same(g, w, f"{path}[{i}]", bits=bits)
    elif isinstance(want, dict):
        assert list(got) == list(want), f"{path}: keys {list(got)} != {list(want)}"
        for k in want:
            assert_same(got[k], want[k], f"{path}[{k!r}]", bits=bits)
    elif isinstance(want, np.random.Generator):
        assert got.bit_generator.state == want.bit_generator.state, f"{path}: RNG state differs"
    elif is_test_object(want):
        assert_same(vars(got), vars(want), f"{path}.__dict__", bits=bits)
    else:
        assert got == want, f"{path}: {got!r} != {want!r}"
