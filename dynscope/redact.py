"""Redacting a recording before it is shared (issue 43): `report --redact`,
`report --html DIR --redact`, `export --redact` and `merge --redact` read
the recording through a redacted copy; the input file is never changed.

What changes: every str or bytes value a guard expected or observed, in any
text the recording keeps -- guard expressions, observed values, recompile
reasons, cache-limit reasons, an entry's guards, the graphs' code, break
and skip reasons, the nearest-entry diffs, the program's arguments, the
str values of its annotations' fields -- is
written as its type, length and a keyed hash: 'sk-live-1' becomes
<str len=9 #3f2a9c1e>.  The key is drawn per redaction and never stored, so
within one output two failures still show whether the value changed, and
two outputs cannot be joined on a value.  Numbers and shapes stay: they are
what a user needs, and rarely secret.  Source lines, names, file paths and
the keys of a source (L['token'] stays L['token']) stay too, and so does the
name in a module's, a function's or a class's repr (<module 'numpy'>).
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import sqlite3
import tempfile

# Text columns that hold structure, not values: never rewritten.
KEEP = {
    "code_objects": {"filename", "name"},
    "compiles": {"compile_id", "outcome", "call_path", "hatches"},
    "graph_breaks": {"compile_id", "kind", "filename", "user_stack", "break_type", "break_class"},
    "frame_skips": {"break_type", "break_class"},
    "guards": {"compile_id", "kind", "filename", "user_stack"},
    "guard_failures": {"compile_id", "entry_compile_id", "kind", "filename"},
    "recompile_diffs": {"compile_id", "entry_compile_id", "kind", "filename", "user_stack"},
    "cache_entries": {"compile_id"},
    "entry_stats": {"compile_id"},
    "graphs": {"compile_id", "backend", "ops"},
    "runs": {"hostname"},
    "annotations": {"name", "phase"},
}

# A str or bytes literal as repr() writes one.
_LITERAL = re.compile(r"""(?<![\w'"])(?P<prefix>[bB]?)(?P<q>['"])(?P<body>(?:\\.|(?!(?P=q)).)*)(?P=q)""")
# Reprs whose quoted part names code, not data: <module 'numpy'>, <ufunc 'sin'>.
_CODE_REPR = re.compile(r"<(?:module|ufunc|class|function|built-in function|built-in method|"
                        r"method|enum) $")


class Redactor:
    """One redaction: its key, and the text rewriting."""

    def __init__(self):
        self.key = os.urandom(16)

    def token(self, kind: str, value: bytes, length: int) -> str:
        digest = hashlib.blake2b(value, key=self.key, digest_size=4).hexdigest()
        return f"<{kind} len={length} #{digest}>"

    def literal(self, m: re.Match, text: str) -> str:
        start, end = m.span()
        if text[max(0, start - 1):start] == "[" and text[end:end + 1] == "]":
            return m.group(0)           # a source's key: L['token']
        if _CODE_REPR.search(text[max(0, start - 24):start]):
            return m.group(0)           # <module 'numpy'>
        body = m.group("body")
        kind = "bytes" if m.group("prefix") else "str"
        try:                            # the value's own length, escapes undone
            value = body.encode("latin-1", "backslashreplace").decode("unicode_escape")
        except UnicodeDecodeError:
            value = body
        return self.token(kind, value.encode("utf-8", "surrogatepass"), len(value))

    def text(self, text):
        """text with each str or bytes value replaced (None and numbers as they are)."""
        if not isinstance(text, str):
            return text
        return _LITERAL.sub(lambda m: self.literal(m, text), text)

    def argv(self, text):
        """runs.argv (JSON): the program kept, each argument after it a token."""
        try:
            args = json.loads(text)
        except (TypeError, ValueError):
            return self.text(text)
        if not isinstance(args, list):
            return self.text(text)
        return json.dumps(args[:1] + [self.token("str", str(a).encode(), len(str(a))) for a in args[1:]])

    def json_values(self, text):
        """A JSON object's str values as tokens, its keys kept (annotations.fields)."""
        def walk(v):
            if isinstance(v, str):
                return self.token("str", v.encode("utf-8", "surrogatepass"), len(v))
            if isinstance(v, list):
                return [walk(x) for x in v]
            if isinstance(v, dict):
                return {k: walk(x) for k, x in v.items()}
            return v
        try:
            return json.dumps(walk(json.loads(text)), sort_keys=True)
        except (TypeError, ValueError):
            return self.text(text)

    def database(self, con: sqlite3.Connection) -> int:
        """Rewrite every value-bearing text column of the database open on
        con; returns the cells changed.  One transaction; the caller
        VACUUMs a file it keeps, so no old page holds a value."""
        changed = 0
        tables = [r[0] for r in con.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")]
        with con:
            for table in tables:
                cols = [r[1] for r in con.execute(f'PRAGMA table_info("{table}")')
                        if r[2].upper() == "TEXT" and r[1] not in KEEP.get(table, set())]
                for col in cols:
                    fix = {("runs", "argv"): self.argv,
                           ("annotations", "fields"): self.json_values}.get((table, col), self.text)
                    rows = con.execute(f'SELECT rowid, "{col}" FROM "{table}"'
                                       f' WHERE "{col}" IS NOT NULL').fetchall()
                    for rowid, value in rows:
                        new = fix(value)
                        if new != value:
                            con.execute(f'UPDATE "{table}" SET "{col}" = ? WHERE rowid = ?',
                                        (new, rowid))
                            changed += 1
        return changed


def redact_file(path: str) -> int:
    """Redact the database at path in place (a file this process made: a
    merge's output, a copy), then VACUUM it so no freed page keeps a value."""
    con = sqlite3.connect(path)
    try:
        n = Redactor().database(con)
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        con.execute("VACUUM")
        return n
    finally:
        con.close()


@contextlib.contextmanager
def redacted_copy(path: str):
    """A redacted copy of the database at path, in a private temporary
    directory removed afterwards: `with redacted_copy(db) as copy: ...`.
    The input is read through SQLite's backup API, read-only."""
    tmp = tempfile.mkdtemp(prefix="dynscope-redacted.")
    try:
        copy = os.path.join(tmp, "redacted.db")
        src = sqlite3.connect(f"file:{os.path.abspath(path)}?mode=ro", uri=True)
        dst = sqlite3.connect(copy)
        try:
            src.backup(dst)
        finally:
            src.close()
            dst.close()
        redact_file(copy)
        yield copy
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
