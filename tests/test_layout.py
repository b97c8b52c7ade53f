"""The layout rules of docs/architecture.md hold (scripts/check_layout.py):
layers point down, the engine never names explain/, engine files and
functions stay short."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHECK = os.path.join(ROOT, "scripts", "check_layout.py")


def run_check(root):
    return subprocess.run([sys.executable, CHECK, root], capture_output=True, text=True)


def test_the_tree_keeps_the_layout_rules():
    r = run_check(ROOT)
    assert r.returncode == 0, r.stdout


def write(root, rel, text):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def test_the_check_names_an_include_that_points_up(tmp_path):
    write(tmp_path, "engine/capture/hook.c", '#include "../explain/explain.h"\nint x;\n')
    write(tmp_path, "store/writer.c", '#include "../engine/engine.h"\n')
    r = run_check(str(tmp_path))
    assert r.returncode == 1
    assert "engine/capture/hook.c:1: engine/ includes ../explain/explain.h" in r.stdout
    assert "store/writer.c:1: store/ includes ../engine/engine.h" in r.stdout


def test_the_check_names_an_engine_call_into_explain(tmp_path):
    write(tmp_path, "engine/capture/events.c", "void f(void)\n{\n    explain_backend_note_event(b, e);\n}\n")
    r = run_check(str(tmp_path))
    assert r.returncode == 1
    assert "engine/capture/events.c:3: the engine calls explain/" in r.stdout


def test_the_check_names_long_files_and_functions_but_not_a_marked_dispatch(tmp_path):
    body = "    x++;\n" * 160
    write(tmp_path, "engine/long.c",
          "static void long_one(void)\n{\n" + body + "}\n\n"
          "/* layout: dispatch switch */\nstatic int run(int op)\n{\n" + body + "}\n"
          + "/* filler */\n" * 1200)
    r = run_check(str(tmp_path))
    assert r.returncode == 1
    assert "engine/long.c:1: long_one() is 162 lines" in r.stdout
    assert "run()" not in r.stdout
    assert "engine/long.c: 1528 lines (engine files stay under 1500)" in r.stdout
