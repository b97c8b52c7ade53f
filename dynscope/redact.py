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
    "runs": {"hostname", "redacted"},
    "annotations": {"name", "phase"},
}

# A str or bytes literal as repr() writes one.
_LITERAL = re.compile(r"""(?<![\w'"])(?P<prefix>[bB]?)(?P<q>['"])(?P<body>(?:\\.|(?!(?P=q)).)*)(?P=q)""")
# Reprs whose quoted part names code, not data: <module 'numpy'>, <ufunc 'sin'>.
_CODE_REPR = re.compile(r"<(?:module|ufunc|class|function|built-in function|built-in method|"
                        r"method|enum) $")


# What DYNSCOPE_REDACT (and record(redact=...)) takes: values (str and bytes
# values, the default of redact=True), all (numbers and shapes too), paths
# (the home directory becomes ~ in file paths).
WORDS = ("values", "all", "paths")

# A number in a guard's text, as a value (not an index: L['xs'][2], .size(1)).
_NUMBER = re.compile(r"(?<![\w.\[(])-?\d+(?:\.\d+)?(?:e[-+]?\d+)?(?![\w.\]])|(?<=\()-?\d+(?=[,)])"
                     r"|(?<=, )-?\d+(?=[,)])")


def parse_words(spec) -> set:
    """{"values", "all", "paths"} from "values,paths", True ("values") or
    False/None/"" (nothing); ValueError naming a word not in WORDS."""
    if spec is True:
        return {"values"}
    if not spec:
        return set()
    words = {w.strip() for w in str(spec).split(",") if w.strip()}
    bad = sorted(words - set(WORDS))
    if bad:
        raise ValueError(f"unknown redaction {', '.join(bad)}: the words are {', '.join(WORDS)}")
    if "all" in words:
        words.add("values")
    return words


# An observed value that is no one's secret: a number, a shape, a dtype or a
# name, a constant.
_PLAIN_VALUE = re.compile(r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?|\((?:-?\d+|\?)?(?:, ?(?:-?\d+|\?))*,?\)"
                          r"|[A-Za-z_][\w.]*|")
# "(observed VALUE)" where a reason or a failure names what a guard saw; VALUE
# may hold parentheses (a shape), up to the end or a "; " note.
_OBSERVED = re.compile(r"\(observed (?P<v>.*?)\)(?=;|$)", re.M)
# What an EQUALS_MATCH expects: "SRC == VALUE", up to " and ", the observed
# value, a note or the end.
_EXPECTED = re.compile(r" == (?P<v>.+?)(?= and | \(observed |; |$)", re.M)   # per line: guards_text
# A repr that names code, not data: <module 'numpy'>, <built-in function print>.
_NAMES_CODE = re.compile(r"<(?:module|ufunc|class|function|built-in function|built-in method|"
                         r"method|enum|code object)\b")
# An object's repr in angle brackets: <Token object at 0x7f...>.
_OBJECT_REPR = re.compile(r"<(?!str len=|bytes len=|repr len=|num len=)[A-Za-z_][^<>]*>")


class Redactor:
    """One redaction: its key, what it redacts (WORDS), and the rewriting."""

    def __init__(self, words=("values",)):
        self.key = os.urandom(16)
        self.words = set(words)
        self.home = os.path.expanduser("~").rstrip("/")

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

    def value(self, v):
        """An observed value (guard_failures.observed, ...): a number, a shape,
        a dtype or a constant stays; a str or bytes literal, or any other
        object's repr (what a custom __repr__ may print), becomes a token."""
        if not isinstance(v, str) or "values" not in self.words or _PLAIN_VALUE.fullmatch(v.strip()):
            return self.text(v) if "all" in self.words and isinstance(v, str) else v
        m = _LITERAL.fullmatch(v.strip())
        if m:
            return self.literal(m, v.strip())
        return self.token("repr", v.encode("utf-8", "surrogatepass"), len(v))

    def text(self, text):
        """text with each str or bytes value replaced -- quoted literals, an
        object's <...> repr, what a guard observed -- (numbers too with "all";
        the home directory with "paths"); None as it is."""
        if not isinstance(text, str):
            return text
        if "values" in self.words:
            text = _EXPECTED.sub(lambda m: f" == {self.value(m.group('v'))}", text)
            text = _OBSERVED.sub(lambda m: f"(observed {self.value(m.group('v'))})", text)
            text = _LITERAL.sub(lambda m: self.literal(m, text), text)
            text = _OBJECT_REPR.sub(lambda m: m.group(0) if _NAMES_CODE.match(m.group(0))
                                    else self.token("repr", m.group(0).encode("utf-8", "surrogatepass"),
                                                    len(m.group(0))), text)
        if "all" in self.words:
            text = _NUMBER.sub(lambda m: self.token("num", m.group(0).encode(), len(m.group(0))), text)
        return self.path(text)

    def path(self, text):
        """text with the home directory as ~ ("paths"), else as it is."""
        if "paths" not in self.words or not isinstance(text, str) or len(self.home) < 2:
            return text
        return re.sub(re.escape(self.home) + r"(?=/|\b)", "~", text)

    def packed(self, text: str) -> str:
        """failures_packed (event.h): six "LEN:bytes" fields per failure; the
        expression and the observed value redacted, the guard's file a path."""
        data, out, i = text.encode("utf-8", "surrogateescape"), [], 0
        fields = []
        while i < len(data):
            colon = data.index(b":", i)
            n = int(data[i:colon])
            fields.append(data[colon + 1:colon + 1 + n].decode("utf-8", "surrogateescape"))
            i = colon + 1 + n
        for k, f in enumerate(fields):
            f = (self.text(f) if k % 6 == 2 else self.value(f) if k % 6 == 3
                 else self.path(f) if k % 6 == 4 else f)
            b = f.encode("utf-8", "surrogateescape")
            out.append(b"%d:%s" % (len(b), b))
        return b"".join(out).decode("utf-8", "surrogateescape")

    def nearest(self, text: str) -> str:
        """nearest_json: each guard's expr and observed redacted, stacks' paths."""
        d = json.loads(text)
        for g in d.get("guards", []):
            g["expr"], g["observed"] = self.text(g.get("expr")), self.value(g.get("observed"))
            g["user_stack"] = self.stack(g.get("user_stack"))
        return json.dumps(d)

    def stack(self, frames):
        """A user stack ([[file, line, name, source], ...]) with its paths as "paths" says."""
        if not isinstance(frames, list):
            return frames
        return [[self.path(f[0])] + list(f[1:]) if isinstance(f, list) and f else f for f in frames]

    def record_fields(self, kind: str, fields: dict) -> dict:
        """An event's text fields, redacted (engine/sinks/record.c calls it
        for each event it records while recording redacts)."""
        out = {}
        for name, v in fields.items():
            if name in ("filename", "guard_file", "break_file"):
                out[name] = self.path(v)
            elif name in ("guard_sites_json", "call_path_json", "user_stack_json"):
                out[name] = self.path(v)        # paths only: source lines stay
            elif name == "observed":
                out[name] = self.value(v)
            elif name == "failures_packed":
                out[name] = self.packed(v)
            elif name == "nearest_json":
                out[name] = self.nearest(v)
            elif name == "annotation_fields":
                out[name] = self.json_values(v) if "values" in self.words else v
            else:
                out[name] = self.text(v)
        return out


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
