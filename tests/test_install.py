"""`pip install` gives a working dynscope in a fresh venv: the wheel carries
the engine extension, the `dyntop` command and the LTTng provider, all built
from build.conf's lists (the Makefile reads the same file).  The wheel used to
import with `undefined symbol: store_close` (setup.py left store/ out)."""
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

import _programs

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PROGRAM = textwrap.dedent("""
    import sys
    import numpy as np
    import dynscope

    @dynscope.optimize("eager", dynamic=False)
    def f(a, k):
        return a * k + 1

    dynscope.record(sys.argv[1])
    for k in range(3):
        f(np.ones(3), k)
    print("graphs", dynscope.explain(lambda x: x * 2 + 1)(np.ones(2)).graph_count)
    print("written", dynscope.stop_recording()["written"] > 0)
    print("package", dynscope.__file__.startswith(sys.prefix))
    print("provider", dynscope._trace_status)
""")


def copy_sources(dst):
    """The repository's sources, without builds, venvs or databases.  Every
    version's venv stays out (.venv-3.12, .venv-3.13 with torch: ~15 GB a copy
    once they existed, which filled the disk)."""
    shutil.copytree(REPO, dst, ignore=shutil.ignore_patterns(
        ".git", ".venv*", "build", "*.so", "*.db*", "__pycache__", ".pytest_cache",
        ".hypothesis", "*.egg-info", "dist", "dyntop"))


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    src = tmp_path_factory.mktemp("src") / "dynscope"
    copy_sources(src)
    out = tmp_path_factory.mktemp("wheel")
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation",
                        "--no-deps", "-q", "-w", str(out), str(src)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    (whl,) = out.glob("dynscope-*.whl")
    return whl


def test_wheel_carries_the_extension_dyntop_and_the_provider(wheel):
    import zipfile
    names = zipfile.ZipFile(wheel).namelist()
    assert any(n.startswith("dynscope/_C.") and n.endswith(".so") for n in names), names
    assert "dynscope/dyntop" in names
    if shutil.which("pkg-config") and _programs.run(
            ["pkg-config", "--exists", "lttng-ust"]).returncode == 0:
        assert "dynscope/libdynscope-tp.so" in names


def test_wheel_in_a_fresh_venv_captures_records_and_runs_dyntop(wheel, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    py, bindir = venv / "bin" / "python", venv / "bin"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DYNSCOPE_DB")}
    # The venv's python runs the wheel's extension, a plain build: no sanitizer (_programs)
    r = _programs.run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                       str(wheel)], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    prog = tmp_path / "prog.py"
    prog.write_text(PROGRAM)
    db = tmp_path / "run.db"
    r = _programs.run([str(py), str(prog), str(db)], capture_output=True, text=True,
                      env=env, cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[:3] == ["graphs 1", "written True", "package True"], r.stdout
    r = _programs.run([str(bindir / "dyntop"), "-b", "-n", "1", str(db)], capture_output=True,
                      text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "Compiles 3" in r.stdout and "Recompiles 2" in r.stdout, r.stdout
    assert f"{prog}:" in r.stdout
