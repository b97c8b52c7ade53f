"""Which files are captured by default: users' code wherever it lives --
installed packages in site-packages included -- but not the standard library,
the tensor libraries' own code, dynscope or frozen modules (issue 14: every
installed package used to be skipped, because a venv's lib/pythonX.Y, which
holds site-packages, was taken for the standard library)."""
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import time

import numpy as np
import pytest

import dynscope
from dynscope import _C

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def installed_package():
    """A package written into this interpreter's site-packages, as pip would
    put it there; removed afterwards."""
    site = sysconfig.get_path("purelib")
    name = f"dynscope_skiprule_pkg_{os.getpid()}"
    pkg = os.path.join(site, name)
    os.makedirs(pkg)
    try:
        with open(os.path.join(pkg, "__init__.py"), "w") as f:
            f.write(textwrap.dedent("""
                import numpy as np

                def normalize(x):
                    return (x - x.mean()) / (np.abs(x).max() + 1.0)
            """))
        yield name
    finally:
        shutil.rmtree(pkg)


def test_a_package_installed_in_site_packages_is_captured(installed_package):
    code = textwrap.dedent(f"""
        import numpy as np, dynscope
        from {installed_package} import normalize
        out = dynscope.explain(normalize)(np.arange(4.0))
        print(out.graph_count, out.graph_break_count)
        print(dynscope._C.code_status(normalize)["skip_reason"])
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=REPO), timeout=120)
    assert r.returncode == 0, r.stderr
    graphs, breaks = map(int, r.stdout.split("\n")[0].split())
    assert graphs == 1 and breaks == 0, r.stdout
    assert r.stdout.split("\n")[1] == "None"


def test_the_standard_library_is_not_captured():
    import statistics
    with dynscope.optimize("eager"):
        assert statistics.fmean([1.0, 2.0, 3.0]) == 2.0
    reason = _C.code_status(statistics.fmean)["skip_reason"]
    assert reason.startswith("file is in config.skip_prefixes (")
    assert os.path.dirname(statistics.__file__) in reason


def test_numpy_inside_site_packages_stays_skipped():
    # numpy's Python code is under a capture prefix (site-packages) and a
    # longer skip prefix (numpy/): skipped
    with dynscope.optimize("eager"):
        np.testing.assert_equal(np.ones(3), np.ones(3))
    reason = _C.code_status(np.testing.assert_equal)["skip_reason"]
    assert reason is not None and "numpy" in reason


def test_the_venv_lib_dir_is_no_skip_prefix():
    venv_lib = os.path.dirname(sysconfig.get_path("purelib")) + os.sep
    assert venv_lib not in dynscope.config.skip_prefixes or \
        sysconfig.get_path("purelib") + os.sep in dynscope.config.capture_prefixes


def test_capture_prefixes_override_and_longest_match(tmp_path, monkeypatch):
    d = tmp_path / "lib"
    (d / "inner").mkdir(parents=True)
    (d / "inner" / "m_inner.py").write_text("def f(x):\n    return x + 1\n")
    (d / "m_outer.py").write_text("def g(x):\n    return x * 2\n")
    monkeypatch.syspath_prepend(str(d))
    monkeypatch.syspath_prepend(str(d / "inner"))
    import m_inner
    import m_outer
    skips, captures = dynscope.config.skip_prefixes, dynscope.config.capture_prefixes
    try:
        dynscope.config.skip_prefixes = skips + (str(d) + os.sep,)
        dynscope.config.capture_prefixes = captures + (str(d / "inner") + os.sep,)
        with dynscope.optimize("eager"):
            assert m_inner.f(np.ones(2))[0] == 2.0
            assert m_outer.g(np.ones(2))[0] == 2.0
        assert _C.code_status(m_inner.f)["skip_reason"] is None
        assert str(d) in _C.code_status(m_outer.g)["skip_reason"]
    finally:
        dynscope.config.skip_prefixes, dynscope.config.capture_prefixes = skips, captures
    with pytest.raises(TypeError, match="capture_prefixes must be strings"):
        dynscope.config.capture_prefixes = (1,)


# ---- frames with no array or tensor in reach (config.skip_tensorless_frames) ----
# As torch.compile: a frame that could only make an empty graph runs without
# capture.  Found by inspect.stack() under capture: the namedtuple
# constructors it calls once per stack frame recompiled for every line
# number and file name until they hit the cache limit.

def _label(n, sep="-"):
    # (the clock: a call the translator cannot fold, so that capturing a
    # caller breaks here and _label's own frames meet the rule)
    return sep.join([str(n)] * 2) if time.perf_counter_ns() else ""


def _double(x):
    return x * 2


class _Holder:
    def __init__(self, a):
        self.a = a


def _via_holder(h):
    return h.a + 1


def _via_global(n):
    return np.full(2, n)              # names np: a tensor library in reach


def _module_name(m):
    return m.__name__                 # a module in a local: nothing to capture


def _compiled_names():
    return {e["name"] for e in _C.events() if e["event"] == "compile_start"}


def test_a_frame_without_arrays_runs_uncaptured_and_explain_counts_it():
    with dynscope.optimize("eager"):
        assert [_label(n) for n in range(12)] == [f"{n}-{n}" for n in range(12)]
        # an object's attributes are not looked into (as torch.compile)
        assert list(_via_holder(_Holder(np.ones(2)))) == [2.0, 2.0]
        # nor is a module passed around (inspect.unwrap over pytest's modules)
        assert _module_name(np) == "numpy"
    assert not {"_label", "_via_holder", "_module_name"} & _compiled_names()
    assert not dynscope.cache_entries(_label)

    def run():
        return [_label(n) for n in range(5)]
    out = dynscope.explain(run)()
    # _label's 5 calls, and the list comprehension's frame where it has one
    # (3.12 inlines it into run: PEP 709)
    inlined = sys.version_info >= (3, 12)
    assert out.skipped_by_rule == [("no array or tensor in reach", 1 if inlined else 2, 5 if inlined else 6)]


def _closure_over(y):
    def inner():
        return y + 1                  # y: a cell holding an array
    return inner


@pytest.mark.parametrize("fn, arg, name", [
    (_double, np.arange(3.0), "_double"),                # an argument
    (_double, [np.ones(2), 1], "_double"),               # inside a list
    (_via_global, 3, "_via_global"),                     # a global it names
    (None, np.ones(2), "_closure_over.<locals>.inner"),  # a closure cell
], ids=["argument", "list", "global", "closure"])
def test_a_frame_with_an_array_in_reach_is_captured(fn, arg, name):
    if fn is None:
        inner = _closure_over(arg)
        with dynscope.optimize("eager"):
            inner()
    else:
        with dynscope.optimize("eager"):
            fn(arg)
    assert name in _compiled_names()


def test_the_wrapped_function_is_compiled_without_arrays_and_the_switch_compiles_all():
    opt = dynscope.optimize("eager")(_label)
    assert [opt(n) for n in range(3)] == ["0-0", "1-1", "2-2"]
    assert "_label" in _compiled_names() and dynscope.cache_entries(_label)
    dynscope.reset()
    _C.clear_events()
    dynscope.config.skip_tensorless_frames = False
    with dynscope.optimize("eager"):
        _label(7)
    assert "_label" in _compiled_names()


def test_inspect_stack_under_capture_warns_nothing():
    import inspect
    import warnings

    def frames(x):
        return len(inspect.stack()) > 3, x + 1
    opt = dynscope.optimize("eager")(frames)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for _ in range(3):
            assert opt(np.ones(2))[0]
    assert [str(w.message) for w in seen] == []
    assert _C.counters()["cache_limits"] == 0
