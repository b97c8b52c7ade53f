"""Programs the tests start (tests/_programs.py, issue 46): every program that
is not the Python under test gets an environment without the sanitizer
runtime of `make asan`, and no test starts one any other way."""
import ast
import os
import pathlib
import shutil
import subprocess
import sys
import textwrap

import pytest

import _programs

TESTS = pathlib.Path(__file__).resolve().parent

# Calls that start a program: module -> function names.
STARTERS = {
    "subprocess": {"run", "Popen", "call", "check_call", "check_output", "getoutput",
                   "getstatusoutput"},
    "os": {"system", "popen", "execv", "execve", "execvp", "execvpe", "execl", "execle",
           "execlp", "execlpe", "spawnv", "spawnve", "spawnvp", "spawnvpe", "spawnl",
           "spawnle", "spawnlp", "spawnlpe", "posix_spawn", "posix_spawnp", "forkpty"},
    "pty": {"spawn"},
    "asyncio": {"create_subprocess_exec", "create_subprocess_shell"},
}


def _is_sys_executable(node):
    return (isinstance(node, ast.Attribute) and node.attr == "executable"
            and isinstance(node.value, ast.Name) and node.value.id == "sys")


def unguarded_starts(source, filename="<test>"):
    """The lines of `source` that start a program other than the Python under
    test without tests/_programs.py: a subprocess/os/pty/asyncio call whose
    command is not a list or tuple beginning with sys.executable (or a name
    the module binds to it, as PY = sys.executable).  Returns
    ["file:line: text"]."""
    tree = ast.parse(source, filename)
    lines = source.splitlines()
    python_names = {t.id for n in ast.walk(tree) if isinstance(n, ast.Assign)
                    and _is_sys_executable(n.value) for t in n.targets if isinstance(t, ast.Name)}
    imported = {}      # a starter imported by name: local name -> module
    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom) and n.module in STARTERS:
            for a in n.names:
                if a.name in STARTERS[n.module] or a.name == "*":
                    imported[a.asname or a.name] = n.module

    def starter(func):
        if (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
                and func.attr in STARTERS.get(func.value.id, ())):
            return func.value.id
        if isinstance(func, ast.Name) and func.id in imported:
            return imported[func.id]
        return None

    def is_python(cmd):
        if isinstance(cmd, ast.BinOp) and isinstance(cmd.op, ast.Add):    # [PY] + args
            return is_python(cmd.left)
        if not isinstance(cmd, (ast.List, ast.Tuple)) or not cmd.elts:
            return False
        first = cmd.elts[0]
        return _is_sys_executable(first) or (isinstance(first, ast.Name) and first.id in python_names)

    found = []
    for n in sorted((n for n in ast.walk(tree) if isinstance(n, ast.Call)), key=lambda n: n.lineno):
        module = starter(n.func)
        if module is None:
            continue
        cmd = n.args[0] if n.args else next((k.value for k in n.keywords if k.arg == "args"), None)
        if module == "subprocess" and cmd is not None and is_python(cmd):
            continue
        found.append(f"{filename}:{n.lineno}: {lines[n.lineno - 1].strip()}")
    return found


def test_no_test_starts_another_program_without_the_helper():
    found = []
    for path in sorted(TESTS.rglob("*.py")):
        if path.name == "_programs.py":
            continue
        found += unguarded_starts(path.read_text(), str(path.relative_to(TESTS.parent)))
    assert not found, (
        "these start a program that is not the Python under test with the test run's "
        "environment (under `make asan`: libasan preloaded); start it with tests/_programs.py's "
        "run() or popen():\n" + "\n".join(found))


def test_the_check_finds_other_programs_and_passes_the_python_under_test():
    src = textwrap.dedent("""\
        import os, subprocess, sys
        from subprocess import Popen as P
        PY = sys.executable
        subprocess.run([sys.executable, "-c", "pass"])
        subprocess.run([PY, "-m", "dynscope"], env={})
        subprocess.Popen(args=(sys.executable, "x.py"))
        _programs.run(["tmux", "ls"])
        subprocess.run(["tmux", "ls"])
        subprocess.check_output(cmd)
        P(["chromium"])
        os.system("lttng list")
        subprocess.run([sys.executable.upper()])
        subprocess.run([PY] + ["-c", "pass"])
        """)
    assert [line.split(":")[1] for line in unguarded_starts(src)] == ["8", "9", "10", "11", "12"]


# ---------------------------------------------------------------------------
# The environment a program gets.

ASAN_LIB = "/usr/lib/gcc/x86_64-linux-gnu/12/libasan.so"


def test_program_env_drops_the_sanitizer_runtime_and_keeps_the_rest():
    env = {"LD_PRELOAD": f"{ASAN_LIB}:/opt/liblttng-ust-fork.so /x/libubsan.so.1",
           "ASAN_OPTIONS": "detect_leaks=0", "UBSAN_OPTIONS": "halt_on_error=1",
           "LSAN_OPTIONS": "x=1", "PYTHONMALLOC": "malloc", "PATH": "/bin"}
    before = dict(env)
    assert _programs.program_env(env) == {"LD_PRELOAD": "/opt/liblttng-ust-fork.so",
                                          "PYTHONMALLOC": "malloc", "PATH": "/bin"}
    assert env == before
    assert _programs.program_env({"LD_PRELOAD": ASAN_LIB, "A": "1"}) == {"A": "1"}
    assert _programs.under_sanitizer(env) and not _programs.under_sanitizer(_programs.program_env(env))


@pytest.mark.skipif(shutil.which("sh") is None, reason="no sh")
def test_a_program_started_by_the_helper_sees_no_sanitizer():
    env = dict(os.environ, LD_PRELOAD=f"/nonexistent/libasan.so.8:{ASAN_LIB}",
               ASAN_OPTIONS="abort_on_error=1", UBSAN_OPTIONS="halt_on_error=1", MARK="kept")
    r = _programs.run(["sh", "-c", 'echo "${LD_PRELOAD-unset} ${ASAN_OPTIONS-unset} '
                       '${UBSAN_OPTIONS-unset} $MARK"'], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["unset", "unset", "unset", "kept"]
    p = _programs.popen(["sh", "-c", 'echo "${ASAN_OPTIONS-unset}"'], env=env,
                        stdout=subprocess.PIPE, text=True)
    assert p.communicate()[0].strip() == "unset" and p.returncode == 0


def test_a_wrapper_of_the_python_under_test_passes_the_environment_on():
    env = dict(os.environ, ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "detect_leaks=0"))
    r = _programs.run(["env", sys.executable, "-c", "import os; print(os.environ['ASAN_OPTIONS'])"],
                      env=env, runs_python=True, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == env["ASAN_OPTIONS"]
    with pytest.raises(ValueError, match="not among the arguments"):
        _programs.run(["env", "true"], runs_python=True)


def test_the_helpers_programs_run_without_the_sanitizer_the_python_under_test_keeps():
    # Under `make asan` the test run preloads libasan: the Python under test,
    # started directly, keeps it; a program started by the helper does not.
    r = _programs.run(["sh", "-c", 'echo "${LD_PRELOAD-}"'], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert not _programs.under_sanitizer({"LD_PRELOAD": r.stdout.strip()}), r.stdout
    py = subprocess.run([sys.executable, "-c", "import os; print(os.environ.get('LD_PRELOAD', ''))"],
                        capture_output=True, text=True)
    assert py.returncode == 0, py.stderr
    assert _programs.under_sanitizer({"LD_PRELOAD": py.stdout.strip()}) == _programs.under_sanitizer()
