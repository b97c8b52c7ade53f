"""The stack trie (issue 41): each compile records the call path from the
program's entry to its frame (compiles.call_path), and the report (text and
HTML) merges them into one tree with the compiles under each frame
(dynscope/stacktrie.py; dyntop's detail view: tests/test_dyntop.py).
"""
import json
import os
import re
import sqlite3
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "data")
PROGRAM = os.path.join(DATA, "call_paths.py")


def line_of(text):
    """The line number of the program's line that contains text."""
    with open(PROGRAM) as fh:
        return next(i for i, line in enumerate(fh, 1) if text in line)


def entry_line():
    """The module-level call of main()."""
    with open(PROGRAM) as fh:
        return next(i for i, line in enumerate(fh, 1) if line == "main()\n")


def run(*args, **kw):
    p = subprocess.run([sys.executable, "-m", "dynscope", *args], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=ROOT), **kw)
    assert p.returncode == 0, p.stderr
    return p.stdout


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    path = tmp_path_factory.mktemp("paths") / "p.db"
    run("run", "--db", str(path), "call_paths.py", cwd=DATA)
    return path


def test_each_compile_records_its_call_path_from_the_entry(db):
    con = sqlite3.connect(db)
    paths = [(cid, json.loads(p)) for cid, p in
             con.execute("SELECT compile_id, call_path FROM compiles ORDER BY compile_row")]
    assert [cid for cid, _ in paths] == ["0/0", "0/1", "0/2", "0/3"]
    mine = [[(os.path.basename(f), line, name) for f, line, name in p
             if f.endswith("call_paths.py")] for _, p in paths]
    entry = ("call_paths.py", entry_line(), "<module>")
    step = [entry, ("call_paths.py", line_of("step(3)"), "main"),
            ("call_paths.py", line_of("middle(np.ones(3 + k), k)"), "step"),
            ("call_paths.py", line_of("return leaf(x * k)"), "middle"),
            ("call_paths.py", line_of("@dynscope.optimize"), "leaf")]
    other = [entry, ("call_paths.py", line_of("middle(np.ones(2), 1)"), "main"),
             ("call_paths.py", line_of("return leaf(x * k)"), "middle"),
             ("call_paths.py", line_of("@dynscope.optimize"), "leaf")]
    assert mine == [step, step, step, other]
    # the launcher (runpy, python -m dynscope run) is in SQL, before the program
    assert any(f.endswith("dynscope/__main__.py") for f, _, _ in paths[0][1])


def test_the_report_merges_them_into_a_tree(db):
    out = run("report", str(db))
    section = out.split("Call paths that compiled (stack trie; compiles under each frame)\n")[1]
    body = section.split("\n\n")[0].splitlines()[2:]
    got = [tuple(re.split(r"\s{2,}", ln.strip(), maxsplit=1)) for ln in body]
    entry = entry_line()
    assert got == [
        ("4", f"<module> (call_paths.py:{entry})"),
        ("3", f"· main (call_paths.py:{line_of('step(3)')})"),
        ("3", f"· · step (call_paths.py:{line_of('middle(np.ones(3 + k), k)')})"),
        ("3", f"· · · middle (call_paths.py:{line_of('return leaf(x * k)')})"),
        ("3", f"· · · · leaf (call_paths.py:{line_of('@dynscope.optimize')}) -> compiled [0/0] [0/1] [0/2]"),
        ("1", f"· main (call_paths.py:{line_of('middle(np.ones(2), 1)')})"),
        ("1", f"· · middle (call_paths.py:{line_of('return leaf(x * k)')})"),
        ("1", f"· · · leaf (call_paths.py:{line_of('@dynscope.optimize')}) -> compiled [0/3]"),
    ]


def test_the_html_report_nests_them_and_links_each_compile(db, tmp_path):
    run("report", "--html", str(tmp_path / "site"), str(db))
    index = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    section = re.search(r'<section id="call-paths">(.*?)</section>', index, re.S).group(1)
    # four levels under <module> through step, each a nested list; the leaf links its compiles
    counts = re.findall(r'<span class="count">(\d+)</span> <span class="site" title="[^"]*">([^<]*)</span>',
                        section)
    assert [(n, name.split(" (")[0]) for n, name in counts] == [
        ("4", "&lt;module&gt;"), ("3", "main"), ("3", "step"), ("3", "middle"), ("3", "leaf"),
        ("1", "main"), ("1", "middle"), ("1", "leaf")]
    con = sqlite3.connect(db)
    rows = [r for (r,) in con.execute("SELECT compile_row FROM compiles ORDER BY compile_row")]
    links = re.findall(r'<a href="compile-(\d+)\.html">leaf \[(\S+)\]</a>', section)
    assert [int(r) for r, _ in links] == rows
    # the recorded path, as SQL has it, is on hover
    (path,) = con.execute("SELECT call_path FROM compiles LIMIT 1").fetchone()
    leaf_file, leaf_line, _ = json.loads(path)[-1]
    assert f'title="{leaf_file}:{leaf_line}"' in section


def test_a_file_before_v5_says_it_has_no_call_paths(db, tmp_path):
    old = tmp_path / "v4.db"
    old.write_bytes(db.read_bytes())
    con = sqlite3.connect(old)
    for col in ("call_path", "hatches", "trace_ns", "guards_ns", "graph_ns", "backend_ns", "plan_ns",
                "events_ns", "attempts"):
        con.execute(f"ALTER TABLE compiles DROP COLUMN {col}")
    con.execute("PRAGMA user_version = 4")
    con.commit()
    con.close()
    assert "Call paths that compiled" not in run("report", str(old))
    run("report", "--html", str(tmp_path / "site"), str(old))
    index = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    assert "this recording has no call paths (schema v5 added them)" in index
