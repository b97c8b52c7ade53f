"""The switches torch.compile users reach for: dynscope.set_stance (as
torch.compiler.set_stance) and DYNSCOPE_LOGS (as TORCH_LOGS).

Captures here are static (dynamic=False): these tests count the recompiles
a new shape or value makes; automatic dynamic is tests/test_dynamic.py's.
"""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import dynscope
from dynscope import _C

from conftest import events

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def scale(x, n):
    return x * n + 1


def test_fail_on_recompile_names_the_frame_and_its_failing_guard():
    f = dynscope.optimize("eager", dynamic=False)(scale)
    f(np.ones(3), 1)                                   # first compile: allowed
    with dynscope.set_stance("fail_on_recompile"):
        assert (f(np.ones(3), 1) == 2).all()           # a hit: allowed
        with pytest.raises(dynscope.RecompileError) as info:
            f(np.ones(3), 2)
    msg = str(info.value)
    assert "scale" in msg and "test_stance_logs.py" in msg
    assert "L['n'] == 1 (observed 2)" in msg
    assert _C.get_stance() == "default"                # restored by the with
    assert (f(np.ones(3), 2) == 3).all()               # and recompiles again
    assert len(dynscope.cache_entries(scale)) == 2


def test_fail_on_recompile_ignores_first_compiles_and_skipped_frames():
    def gen_user(x):
        yield sum(v for v in x)                        # a generator's frame: never captured
    f = dynscope.optimize("eager", dynamic=False)(gen_user)
    with dynscope.set_stance("fail_on_recompile"):
        for n in range(3):
            assert next(f([1, 2, n])) == 3 + n
        g = dynscope.optimize("eager", dynamic=False)(scale)
        g(np.ones(2), 4)                               # a first compile


def test_eager_on_recompile_runs_eagerly_and_keeps_the_cache():
    f = dynscope.optimize("eager", dynamic=False)(scale)
    f(np.ones(3), 1)
    compiles = len(events("compile_end"))
    with dynscope.set_stance("eager_on_recompile"):
        for n in range(2, 6):
            assert (f(np.ones(3), n) == n + 1).all()
        assert (f(np.ones(3), 1) == 2).all()           # the cached entry still hits
    assert len(events("compile_end")) == compiles      # nothing compiled
    (entry,) = dynscope.cache_entries(scale)
    assert entry.hits == 1


def test_force_eager_captures_nothing():
    f = dynscope.optimize("eager", dynamic=False)(scale)
    dynscope.set_stance("force_eager")
    try:
        assert (f(np.ones(3), 3) == 4).all()
        assert dynscope.cache_entries(scale) == []
        assert events("compile_start") == []
    finally:
        dynscope.set_stance("default")
    f(np.ones(3), 3)
    assert len(dynscope.cache_entries(scale)) == 1


def test_bad_stance_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown stance 'sometimes'"):
        dynscope.set_stance("sometimes")
    assert _C.get_stance() == "default"


PROGRAM = textwrap.dedent("""
    import numpy as np, dynscope

    @dynscope.optimize("eager", dynamic=False)
    def step(x, n):
        y = x * n
        print("step", n)
        return y + 1

    step(np.ones(3), 1)
    step(np.ones(3), 2)
""")


def run_logged(tmp_path, spec):
    prog = tmp_path / "prog.py"
    prog.write_text(PROGRAM)
    env = dict(os.environ, PYTHONPATH=REPO, DYNSCOPE_LOGS=spec)
    env.pop("DYNSCOPE_DB", None)
    r = subprocess.run([sys.executable, str(prog)], capture_output=True, text=True, env=env,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "step 1\nstep 2\n"              # the program's output is its own
    return r.stderr, str(prog)


def test_logs_print_recompiles_breaks_and_guards_as_they_happen(tmp_path):
    err, prog = run_logged(tmp_path, "recompiles,graph_breaks,guards")
    lines = err.splitlines()
    assert f"dynscope [recompiles] Recompiling step ({prog}:4) [0/1]" in lines
    assert "    entry [0/0] failed L['n'] == 1 (observed 2)  [EQUALS_MATCH]" in lines
    assert f"dynscope [graph_breaks] Graph break in step ({prog}:4) [0/0]: " \
           "call to builtin print  [call]" in lines
    assert '        print("step", n)' in lines              # the user's source line
    assert any(l.startswith(f"dynscope [guards] step ({prog}:4) [0/0]: ") and
               l.endswith(" guards") for l in lines)
    assert "    L['n'] == 1" not in lines                   # guard expressions: +guards only


def test_logs_verbose_and_selection(tmp_path):
    err, _ = run_logged(tmp_path, "+guards")
    assert "    L['n'] == 1" in err.splitlines()
    assert "[recompiles]" not in err and "[graph_breaks]" not in err


def test_logs_bad_name_is_reported_and_the_program_runs(tmp_path):
    err, _ = run_logged(tmp_path, "recompile")
    assert "DYNSCOPE_LOGS='recompile': unknown log 'recompile'" in err


def two_frames(x, n):
    y = x * 2
    print(end="")                      # a break: frame 0 and a resume frame
    return y + n


def test_one_cache_limit_warning_per_function_however_many_frames_reach_it():
    import warnings
    f = dynscope.optimize("eager", dynamic=False)(two_frames)
    dynscope.config.cache_size_limit = 2
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in range(4):             # the resume frame (it reads n) reaches the limit
            assert (f(np.ones(2), n) == 2 + n).all()
        for size in range(3, 6):       # then frame 0 (it reads x's shape)
            assert (f(np.ones(size), 0) == 2).all()
    limits = [w for w in caught if issubclass(w.category, dynscope.CacheLimitWarning)]
    assert len(limits) == 1, [str(w.message) for w in limits]
    assert len(events("cache_limit")) == 2        # both frames reached it, both recorded
