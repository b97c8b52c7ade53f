"""The layout rules of docs/architecture.md hold (scripts/check_layout.py):
layers and the engine's rooms point down, by includes and by the symbols
`nm` finds in the objects; engine/ is rooms only, each with its contract;
the engine never names explain/; engine files and functions stay short.
Each kind of violation is planted in a scratch tree and must be named."""
import importlib.util
import os
import shutil
import subprocess
import sys

import pytest

import _programs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHECK = os.path.join(ROOT, "scripts", "check_layout.py")

spec = importlib.util.spec_from_file_location("check_layout", CHECK)
check_layout = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check_layout)


def run_check(root, *args):
    return subprocess.run([sys.executable, CHECK, *args, root], capture_output=True, text=True)


def write(root, rel, text):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def rooms(root):
    """Every room of the engine with a contract header and nothing else."""
    for room, header in check_layout.ROOMS:
        write(root, f"engine/{room}/{header}", f"/* {room}: a room */\n")


def compile_all(root):
    """cc -c every .c of the scratch tree into root/build/<path>.o."""
    cc = os.environ.get("CC", "cc")
    for dirpath, _, names in os.walk(root):
        for name in names:
            if name.endswith(".c"):
                src = os.path.join(dirpath, name)
                obj = os.path.join(root, "build", os.path.relpath(src, root))[:-2] + ".o"
                os.makedirs(os.path.dirname(obj), exist_ok=True)
                _programs.run([cc, "-c", src, "-o", obj], check=True)


def test_the_tree_keeps_the_layout_rules_objects_included():
    # the objects of this Python's extension (the Makefile's EXT_BUILD)
    # (make asan on a fresh clone builds only the ASan objects, under asan/)
    v = sys.version_info
    objdir = os.path.join(ROOT, "build", *([] if v[:2] == (3, 11) else [f"cp{v[0]}{v[1]}"]))
    if not check_layout.objects(ROOT, objdir):
        objdir = os.path.join(objdir, "asan")
    r = run_check(ROOT, "--objects", objdir)
    assert r.returncode == 0, r.stdout
    # the symbol rule ran: the extension's objects are there (make builds them first)
    assert "symbols not checked" not in r.stderr, r.stderr
    assert check_layout.check(ROOT, objdir)[1] > 40


def test_the_rooms_run_bottom_up_and_only_sinks_reach_the_store():
    assert [r for r, _ in check_layout.ROOMS] == [
        "base", "graph", "guards", "plan", "translate", "cache", "capture", "sinks"]
    below = check_layout.BELOW
    assert below["engine/base"] == {"event"}
    assert "engine/capture" not in below["engine/translate"]
    assert "engine/cache" not in below["engine/translate"]      # the translator takes a request
    assert "engine/capture" not in below["engine/cache"]        # the cache never asks who captures
    assert "engine/sinks" not in below["engine/capture"]
    assert [u for u in below if "store" in below[u] and u.startswith("engine")] == ["engine/sinks"]


def test_the_check_names_an_include_that_points_up(tmp_path):
    rooms(tmp_path)
    write(tmp_path, "engine/capture/hook.c", '#include "../../explain/explain.h"\nint x;\n')
    write(tmp_path, "store/writer.c", '#include "../engine/engine.h"\n')
    r = run_check(str(tmp_path))
    assert r.returncode == 1
    assert ("engine/capture/hook.c:1: engine/capture/ includes explain.h of explain/, "
            "which is not below it") in r.stdout
    assert "store/writer.c:1: store/ includes engine.h of engine/, which is not below it" in r.stdout


def test_the_check_names_an_include_of_a_higher_room_and_of_the_umbrella(tmp_path):
    rooms(tmp_path)
    write(tmp_path, "engine/graph/graph.c", '#include "../capture/capture.h"\n')
    write(tmp_path, "engine/guards/guards.c", '#include "../engine.h"\n#include "../base/base.h"\n')
    write(tmp_path, "engine/capture/cache.c", '#include "../graph/graph.h"\n')   # down: fine
    r = run_check(str(tmp_path))
    assert r.returncode == 1
    assert r.stdout.splitlines() == [
        "engine/graph/graph.c:1: engine/graph/ includes capture.h of engine/capture/, which is not below it",
        "engine/guards/guards.c:1: engine/guards/ includes engine.h of engine/, which is not below it",
    ]


def test_the_check_names_a_symbol_used_upward_that_no_include_shows(tmp_path):
    if shutil.which(os.environ.get("CC", "cc")) is None or shutil.which("nm") is None:
        pytest.skip("needs a C compiler and nm")
    rooms(tmp_path)
    # the graph declares by hand what the capture room defines: no include to see
    write(tmp_path, "engine/graph/graph.c",
          "int capture_depth_now(void);\nint graph_size(void) { return capture_depth_now(); }\n")
    write(tmp_path, "engine/capture/hook.c",
          "int graph_size(void);\nint capture_depth_now(void) { return 1; }\n"
          "int hook_calls(void) { return graph_size(); }\n")            # down: fine
    compile_all(tmp_path)
    r = run_check(str(tmp_path))
    assert r.returncode == 1
    assert r.stdout.splitlines() == [
        "engine/graph/graph.c (engine/capture/hook.c): engine/graph/ uses capture_depth_now "
        "of engine/capture/, which is not below it"]
    # without objects the symbol rule cannot run, and says so
    shutil.rmtree(tmp_path / "build")
    r = run_check(str(tmp_path))
    assert r.returncode == 0 and "symbols not checked" in r.stderr


def test_known_debt_is_not_reported_and_debt_paid_must_leave_the_list(tmp_path, monkeypatch):
    rooms(tmp_path)
    write(tmp_path, "engine/graph/graph.c", '#include "../capture/capture.h"\n')
    write(tmp_path, "engine/base/base.c", "int base_x;\n")
    debt = ("engine/graph/graph.c", "capture.h")
    paid = ("engine/base/base.c", "capture_state")
    gone = ("engine/base/gone.c", "capture_state")      # its file is not in this tree
    monkeypatch.setattr(check_layout, "KNOWN_DEBT", {debt: "a hole", paid: "cut already", gone: "?"})
    out, nobjs = check_layout.check(str(tmp_path))
    assert out == []             # no objects: debt of symbols is not judged
    if shutil.which(os.environ.get("CC", "cc")) is None or shutil.which("nm") is None:
        return
    compile_all(tmp_path)
    out, nobjs = check_layout.check(str(tmp_path))
    assert nobjs == 2
    assert out == ["check_layout.py: KNOWN_DEBT ('engine/base/base.c', 'capture_state') "
                   "no longer happens: delete the entry"]


def test_the_check_names_a_folder_that_is_no_room_a_loose_file_and_a_missing_contract(tmp_path):
    rooms(tmp_path)
    os.remove(tmp_path / "engine" / "plan" / "plan.h")
    write(tmp_path, "engine/guards/guards.h", "#ifndef GUARDS_H\n")
    write(tmp_path, "engine/misc/util.c", "int x;\n")
    write(tmp_path, "engine/loose.c", "int y;\n")
    write(tmp_path, "engine/engine.h", "/* the umbrella */\n")     # allowed
    r = run_check(str(tmp_path))
    assert r.returncode == 1
    assert sorted(r.stdout.splitlines()) == sorted([
        "engine/guards/guards.h: the contract does not open with a comment saying what the room does",
        "engine/loose.c: a file outside the rooms (engine/<room>/)",
        "engine/misc/: a folder that is no room of check_layout.py's ROOMS",
        "engine/plan/: no contract header plan.h",
    ])


def test_the_check_names_an_engine_call_into_explain(tmp_path):
    rooms(tmp_path)
    write(tmp_path, "engine/capture/events.c", "void f(void)\n{\n    explain_backend_note_event(b, e);\n}\n")
    r = run_check(str(tmp_path))
    assert r.returncode == 1
    assert "engine/capture/events.c:3: the engine calls explain/" in r.stdout


def test_the_check_names_long_files_and_functions_but_not_a_marked_dispatch(tmp_path):
    rooms(tmp_path)
    body = "    x++;\n" * 160
    write(tmp_path, "engine/translate/long.c",
          "static void long_one(void)\n{\n" + body + "}\n\n"
          "/* layout: dispatch switch */\nstatic int run(int op)\n{\n" + body + "}\n"
          + "/* filler */\n" * 1200)
    r = run_check(str(tmp_path))
    assert r.returncode == 1
    assert "engine/translate/long.c:1: long_one() is 162 lines" in r.stdout
    assert "run()" not in r.stdout
    assert "engine/translate/long.c: 1528 lines (engine files stay under 1500)" in r.stdout
