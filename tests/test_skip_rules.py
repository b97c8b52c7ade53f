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
