"""A file's path as users read it (issue 41, "readable places"): a file of
an installed package is named from its package on
(`transformers/utils/generic.py`, not the venv's absolute path), any other
file as it is.  The same rule as event/places.c (dyntop, explain); the
report's text uses it, the HTML report shows it with the full path on
hover, and SQL keeps the full path.

A function a decorator made is named by what it wraps
(`can_return_tuple(wrapper) → LlamaModel.forward`): the wrapper's code is
one code object for every function the decorator wraps, so its own
qualified name (`can_return_tuple.<locals>.wrapper`) says nothing.  The
engine names it so on each compile's call path (compiles.call_path, from
functools.wraps' `__wrapped__`); function_name() gathers a code object's
names from there.
"""
from __future__ import annotations

import json
import re
import sqlite3

_ROOTS = re.compile(r".*/(?:site|dist)-packages/(?=.)")


def readable(path):
    """path without the installation its package lies in (None stays None)."""
    if not isinstance(path, str):
        return path
    m = _ROOTS.match(path)
    return path[m.end():] if m else path


ARROW = "\u2192"
_MORE = 3         # wrapped functions named in one name; then "+N"


def wrapper_names(con: sqlite3.Connection) -> tuple[dict, dict]:
    """({(run_id, code_id): "decorator(wrapper) → A, B"}, {compile_row:
    "decorator(wrapper) → A"}) for the code objects whose compiles ran as a
    decorator's wrapper; empty for files before compiles.call_path (v5)."""
    try:
        rows = con.execute("SELECT run_id, code_id, compile_row, call_path FROM compiles"
                           " WHERE instr(call_path, ?) > 0 ORDER BY compile_row",
                           (json.dumps(ARROW)[1:-1],)).fetchall()
    except sqlite3.OperationalError:
        return {}, {}
    seen: dict = {}
    by_compile = {}
    for run, code, row, path in rows:
        try:
            last = json.loads(path)[-1][2]
        except (ValueError, TypeError, IndexError, KeyError):
            continue
        head, arrow, wrapped = last.partition(f" {ARROW} ")
        if arrow:
            seen.setdefault((run, code), (head, {}))[1][wrapped] = None
            by_compile[row] = last
    by_code = {}
    for key, (head, wrapped) in seen.items():
        names = list(wrapped)
        by_code[key] = f"{head} {ARROW} " + ", ".join(names[:_MORE]) + \
            (f" +{len(names) - _MORE}" if len(names) > _MORE else "")
    return by_code, by_compile


def install(con: sqlite3.Connection) -> None:
    """Give con the SQL functions readable_path(path) and
    function_name(run_id, code_id, name [, compile_row]): a code object's
    name as users read it (of one compile, given its row).  Once per
    connection: the report, its advice and its what-if each ask, and the
    names cost a pass over every compile's call path."""
    try:
        con.execute("SELECT function_name(0, 0, NULL)")
        return                                          # given already
    except sqlite3.OperationalError:
        pass
    con.create_function("readable_path", 1, readable, deterministic=True)
    by_code, by_compile = wrapper_names(con)

    def function_name(run_id, code_id, name, compile_row=None):
        if compile_row is not None and compile_row in by_compile:
            return by_compile[compile_row]
        return by_code.get((run_id, code_id), name)
    con.create_function("function_name", 3, function_name, deterministic=True)
    con.create_function("function_name", 4, function_name, deterministic=True)
