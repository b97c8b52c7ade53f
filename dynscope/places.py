"""A file's path as users read it (issue 41, "readable places"): a file of
an installed package is named from its package on
(`transformers/utils/generic.py`, not the venv's absolute path), any other
file as it is.  The same rule as event/places.c (dyntop, explain); the
report's text uses it, the HTML report shows it with the full path on
hover, and SQL keeps the full path.
"""
from __future__ import annotations

import re
import sqlite3

_ROOTS = re.compile(r".*/(?:site|dist)-packages/(?=.)")


def readable(path):
    """path without the installation its package lies in (None stays None)."""
    if not isinstance(path, str):
        return path
    m = _ROOTS.match(path)
    return path[m.end():] if m else path


def install(con: sqlite3.Connection) -> None:
    """Give con the SQL function readable_path(path) (the report's queries)."""
    con.create_function("readable_path", 1, readable, deterministic=True)
