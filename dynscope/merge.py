"""Several recordings as one: `python -m dynscope merge OUT.db FILE...`, and
the merged database that `report`, `sql` and `diff` read when given more
than one file (docs/sql.md, "Several files").

A job of many processes records one file per process, rank or host
(`DYNSCOPE_DB=run-%h-r%r.db`, docs/recording.md).  Merging copies every
row of each file into one database of this build's schema, made by the
recorder's own migrations (_C.store_prepare), so every table, view and
index is the recorder's.  Invariants:
- the files are opened read-only and never written;
- each file's runs get new run_ids after those already in OUT (their rows
  keep host, pid and rank, so `rank` and `hostname` tell the files apart),
  and compile_row moves up by the same rule, so every reference between
  rows (compile_row, run_id) still points at the same row;
- surrogate ids (failure_id, break_id, graph_id, annotation_id, span_id) are
  given anew in the files' order, so ordering by them keeps each file's
  event order;
- a column an older file lacks is NULL (a v2/v3 file has no provenance).
"""
from __future__ import annotations

import os
import sqlite3
import tempfile

from dynscope import _C

APPLICATION_ID = 0x44594E53          # PRAGMA application_id of a dynscope file
RENUMBERED = ("failure_id", "break_id", "graph_id", "annotation_id", "span_id")


class MergeError(Exception):
    """A file the merge cannot use; the message is one line."""


def open_source(path: str) -> sqlite3.Connection:
    """A read-only connection to the dynscope database at path; MergeError
    for a missing, foreign, damaged or unreadable one."""
    if not os.path.exists(path):
        raise MergeError(f"no such database: {path}")
    if os.path.isdir(path):
        raise MergeError(f"{path} is a directory")
    try:
        con = sqlite3.connect(f"file:{os.path.abspath(path)}?mode=ro", uri=True)
        app_id = con.execute("PRAGMA application_id").fetchone()[0]
        version = con.execute("PRAGMA user_version").fetchone()[0]
    except sqlite3.Error as exc:
        raise MergeError(f"{path} is not a readable SQLite database ({exc})") from None
    if app_id != APPLICATION_ID:
        con.close()
        raise MergeError(f"{path} is not a dynscope database")
    try:
        _C.store_temp_views_sql(version)   # the engine's gate: versions it reads
    except ValueError as exc:
        con.close()
        raise MergeError(f"{path}: {exc}") from None
    return con


def _columns(con: sqlite3.Connection, schema: str, table: str) -> list[str]:
    return [r[1] for r in con.execute(f'PRAGMA "{schema}".table_info("{table}")')]


def _max(con: sqlite3.Connection, sql: str) -> int:
    return con.execute(sql).fetchone()[0] or 0


def fold(out: sqlite3.Connection, path: str) -> int:
    """Copy every row of the file at path into the database open on `out`
    (this build's schema); returns how many runs it had.  One transaction."""
    src = open_source(path)          # validates; the copy goes through ATTACH
    src.close()
    out.execute("ATTACH DATABASE ? AS src", (f"file:{os.path.abspath(path)}?mode=ro",))
    try:
        with out:
            run_off = _max(out, "SELECT max(run_id) FROM main.runs")
            row_off = _max(out, "SELECT max(compile_row) FROM main.compiles")
            tables = [r[0] for r in out.execute(
                "SELECT name FROM main.sqlite_master WHERE type = 'table'"
                " AND name NOT LIKE 'sqlite_%' ORDER BY rootpage")]
            for table in tables:
                have = set(_columns(out, "src", table))
                if not have:
                    continue             # a table newer than the file
                cols = [c for c in _columns(out, "main", table)
                        if c in have and c not in RENUMBERED]
                exprs = [f'"{c}" + {run_off}' if c == "run_id"
                         else f'"{c}" + {row_off}' if c == "compile_row"
                         else f'"{c}"' for c in cols]
                out.execute(f'INSERT INTO main."{table}" ({", ".join(cols)})'
                            f' SELECT {", ".join(exprs)} FROM src."{table}" ORDER BY rowid')
            return _max(out, f"SELECT count(*) FROM main.runs WHERE run_id > {run_off}")
    except sqlite3.Error as exc:
        raise MergeError(f"{path}: {exc}") from None
    finally:
        out.execute("DETACH DATABASE src")


def merge(out_path: str, paths: list[str]) -> int:
    """Fold the files into out_path (created 0600, or an existing dynscope
    database of this build's schema, appended to).  Returns the runs
    copied.  MergeError / OSError with the reason; every file is checked
    before OUT is touched."""
    for p in paths:
        open_source(p).close()
        if os.path.exists(out_path) and os.path.samefile(p, out_path):
            raise MergeError(f"{p} is the output file")
    _C.store_prepare(out_path)       # OSError: cannot create, not ours, newer
    out = sqlite3.connect(out_path)
    try:
        return sum(fold(out, p) for p in paths)
    finally:
        out.close()


class Merged:
    """The files merged into a temporary database, for a read-only tool (report,
    sql, diff) given several files: `with Merged(paths) as path: ...`.  One
    file needs no merge: its own path is used."""

    def __init__(self, paths: list[str]):
        self.paths = paths
        self._dir = None

    def __enter__(self) -> str:
        if len(self.paths) == 1:
            open_source(self.paths[0]).close()
            return self.paths[0]
        self._dir = tempfile.TemporaryDirectory(prefix="dynscope-merged.")
        path = os.path.join(self._dir.name, "merged.db")
        merge(path, self.paths)
        return path

    def __exit__(self, *exc) -> None:
        if self._dir is not None:
            self._dir.cleanup()
