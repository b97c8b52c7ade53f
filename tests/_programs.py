"""Starting programs from the tests: every program that is not the Python
under test (a browser, tmux, lttng and babeltrace2, dyntop, make, cc, a shell
tool) is started through run() or popen() here, which drop the sanitizer
runtime of `make asan` from the child's environment (issue 46).

`make asan` runs pytest with libasan in LD_PRELOAD and ASAN_OPTIONS /
UBSAN_OPTIONS set (Makefile, ASAN_ENV), so that the ASan build of dynscope/_C
loads.  A child inherits that: Chromium then never answered its DevTools pipe,
and any other program would run under a sanitizer it was not built for.  The
Python under test (sys.executable, with dynscope on its path) must keep it --
without libasan first in the process, the ASan _C does not load -- so tests
start it with subprocess directly.  tests/test_programs.py fails on a test
that starts anything else without this module.
"""
import os
import re
import subprocess
import sys

# The sanitizers' runtime options; each is read only by its runtime.
SANITIZER_OPTIONS = ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS", "TSAN_OPTIONS",
                     "MSAN_OPTIONS", "HWASAN_OPTIONS")

# A sanitizer runtime in LD_PRELOAD: gcc's libasan.so.8, libubsan.so.1, ...,
# clang's libclang_rt.asan-x86_64.so.
_SANITIZER_LIB = re.compile(r"^lib(?:(?:a|ub|l|t|m|hwa)san|clang_rt\.[a-z_]*san[^/]*)\.so")


def is_sanitizer_lib(path):
    """Whether an LD_PRELOAD entry is a sanitizer's runtime library."""
    return bool(_SANITIZER_LIB.match(os.path.basename(path)))


def under_sanitizer(env=None):
    """Whether `env` (default: this process's) preloads a sanitizer runtime."""
    env = os.environ if env is None else env
    return any(is_sanitizer_lib(p) for p in re.split(r"[:\s]+", env.get("LD_PRELOAD", "")) if p)


def program_env(env=None):
    """A copy of `env` (default: os.environ) for a program that is not the
    Python under test: the sanitizer runtimes left out of LD_PRELOAD (its
    other entries kept, in order; the variable dropped when none is left) and
    no *SAN_OPTIONS.  `env` itself is unchanged."""
    env = dict(os.environ if env is None else env)
    for key in SANITIZER_OPTIONS:
        env.pop(key, None)
    kept = [p for p in re.split(r"[:\s]+", env.pop("LD_PRELOAD", "")) if p and not is_sanitizer_lib(p)]
    if kept:
        env["LD_PRELOAD"] = ":".join(kept)
    return env


def is_python_under_test(arg):
    return str(arg) == sys.executable


def _env_for(cmd, env, runs_python):
    if not runs_python:
        return program_env(env)
    # A wrapper (scripts/lttng-capture.sh, env) whose command is the Python
    # under test: it gets the environment as is.  lttng-capture.sh hands
    # LD_PRELOAD on to its command only, never to its own tools.
    if not any(is_python_under_test(a) for a in cmd):
        raise ValueError(f"runs_python=True, but {sys.executable} is not among the arguments: {cmd}")
    return env


def run(cmd, *, env=None, runs_python=False, **kwargs):
    """subprocess.run(cmd, ...) for a program that is not the Python under test:
    its environment is program_env(env).  With runs_python=True, cmd is a
    wrapper that runs the Python under test (sys.executable must be among its
    arguments; ValueError otherwise), and `env` passes unchanged."""
    return subprocess.run(cmd, env=_env_for(cmd, env, runs_python), **kwargs)


def popen(cmd, *, env=None, runs_python=False, **kwargs):
    """subprocess.Popen(cmd, ...) with the environment of run()."""
    return subprocess.Popen(cmd, env=_env_for(cmd, env, runs_python), **kwargs)
