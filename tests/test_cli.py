"""python -m dynscope run as people type it: every argument after the module
or the script is the program's, unchanged (as python -m cProfile and
coverage run pass them)."""
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = dict(os.environ, PYTHONPATH=REPO)
ENV.pop("DYNSCOPE_DB", None)


def run(*args, cwd=None):
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=ENV,
                          cwd=cwd, timeout=300)


def test_module_options_after_dash_m_are_the_modules():
    plain = run("-m", "unittest", "-q", "test.test_textwrap")
    captured = run("-m", "dynscope", "run", "--capture-all", "-m", "unittest", "-q",
                   "test.test_textwrap")
    assert plain.returncode == captured.returncode == 0, captured.stderr
    summary = [l for l in plain.stderr.splitlines() if l.startswith(("Ran ", "OK", "FAILED"))]
    got = [l for l in captured.stderr.splitlines() if l.startswith(("Ran ", "OK", "FAILED"))]
    assert [l.split(" in ")[0] for l in got] == [l.split(" in ")[0] for l in summary]
    assert summary and summary[-1] == "OK"


def test_script_arguments_are_passed_unchanged(tmp_path):
    script = tmp_path / "prog.py"
    script.write_text("import sys; print(sys.argv[1:])\n")
    for extra in (["--flag", "x", "-q"], ["--", "y"], ["--db", "z", "-m", "w"]):
        r = run("-m", "dynscope", "run", str(script), *extra)
        assert r.returncode == 0, r.stderr
        assert r.stdout == f"{extra}\n"
    # a leading -- separates dynscope's options from the script, and is dropped
    r = run("-m", "dynscope", "run", "--db", str(tmp_path / "r.db"), "--", str(script), "-q")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "['-q']\n"
    assert (tmp_path / "r.db").exists()


def test_bad_run_options_are_dynscopes_errors(tmp_path):
    r = run("-m", "dynscope", "run", "--no-such-option", "x.py")
    assert r.returncode == 2 and "unrecognized arguments: --no-such-option" in r.stderr
    r = run("-m", "dynscope", "run", "-m")
    assert r.returncode == 2 and "-m: expected one argument" in r.stderr
    r = run("-m", "dynscope", "run")
    assert r.returncode == 2 and "give a script" in r.stderr
