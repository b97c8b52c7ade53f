"""Redaction of a recording before it is shared (issue 43, dynscope/redact.py):
a secret a guard saw, planted in a recording, is in none of the outputs of
`report --redact`, `report --html --redact`, `export --redact` and
`merge --redact` -- grepped byte for byte -- while the input keeps it and the
outputs without --redact show it; within one output the same value hashes
alike and other values differently."""
import json
import os
import re
import sqlite3
import subprocess
import sys

import pytest

from dynscope import redact

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SECRET = b"sk-live-SECRET-123"
OTHERS = ("tok-two", "tok-three")


def run(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "dynscope", *args], capture_output=True,
                          env=dict(os.environ, PYTHONPATH=ROOT), cwd=cwd)


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    path = tmp_path_factory.mktemp("secret") / "s.db"
    p = run("run", "--db", str(path), "secret_token.py", SECRET.decode(), *OTHERS,
            cwd=os.path.join(ROOT, "tests", "data"))
    assert p.returncode == 0, p.stderr
    return path


def files_under(path):
    return [os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs]


def test_the_recording_holds_the_secret_as_the_engine_saw_it(db):
    raw = db.read_bytes()
    assert raw.count(SECRET) >= 3
    assert SECRET in run("report", str(db)).stdout


def test_no_redacted_output_holds_the_secret(db, tmp_path):
    before = db.read_bytes()
    outputs = []
    p = run("report", "--redact", str(db))
    assert p.returncode == 0, p.stderr
    outputs.append(("report", p.stdout))
    p = run("report", "--html", str(tmp_path / "site"), "--redact", str(db))
    assert p.returncode == 0, p.stderr
    pages = files_under(tmp_path / "site")
    assert len(pages) >= 4             # index.html and a page per compile
    outputs += [(f, open(f, "rb").read()) for f in pages]
    p = run("export", "--redact", "--chrome-trace", str(tmp_path / "t.json"), str(db))
    assert p.returncode == 0, p.stderr
    outputs.append(("trace", (tmp_path / "t.json").read_bytes()))
    p = run("merge", "--redact", str(tmp_path / "m.db"), str(db))
    assert p.returncode == 0, p.stderr
    outputs += [(f, open(f, "rb").read()) for f in files_under(tmp_path) if "m.db" in f]
    for name, data in outputs:
        assert SECRET not in data and b"SECRET" not in data, name
    assert db.read_bytes() == before, "the input was changed"
    # every page says it is redacted
    for f in pages:
        assert b"redacted: str and bytes values are their type, length and a keyed hash" in \
            open(f, "rb").read(), f
    # the merged file is still a recording the report reads
    assert run("report", str(tmp_path / "m.db")).returncode == 0


def test_a_redacted_value_keeps_its_type_length_and_whether_it_changed(db):
    out = run("report", "--redact", str(db)).stdout.decode()
    con = sqlite3.connect(db)
    (expr,) = con.execute("SELECT expr FROM guards WHERE expr LIKE '%SECRET%' LIMIT 1").fetchone()
    assert expr == "L['token'] == 'sk-live-SECRET-123'"
    tokens = re.findall(r"<str len=(\d+) #([0-9a-f]{8})>", out)
    assert tokens
    by_len = {}
    for n, h in tokens:
        by_len.setdefault(int(n), set()).add(h)
    # sk-live-SECRET-123 (18 chars) hashes to one value wherever it appears;
    # tok-two and tok-three (7 and 9) to others
    assert len(by_len[18]) == 1 and 7 in by_len and 9 in by_len
    assert by_len[18].isdisjoint(by_len[7] | by_len[9])
    assert "L['token']" in out
    # the key is drawn per redaction: two outputs do not share a hash
    again = run("report", "--redact", str(db)).stdout.decode()
    assert set(re.findall(r"#([0-9a-f]{8})>", again)).isdisjoint(h for _, h in tokens)


def test_what_stays_readable():
    r = redact.Redactor()
    assert r.text("G['np'] is <module 'numpy'>") == "G['np'] is <module 'numpy'>"
    assert r.text("L['x'].shape == (3, 4) (observed (5, 4))") == "L['x'].shape == (3, 4) (observed (5, 4))"
    assert r.text("L['n'] == 7") == "L['n'] == 7"
    got = r.text("L['s'] == b'k\\x00y' (observed 'it\\'s')")
    assert re.fullmatch(r"L\['s'\] == <bytes len=3 #\w{8}> \(observed <str len=4 #\w{8}>\)", got), got


def test_annotation_fields_keep_their_keys():
    r = redact.Redactor()
    got = json.loads(r.json_values('{"n": 3, "split": "sk-live-SECRET-123", "dims": ["a", 2]}'))
    assert got["n"] == 3 and got["dims"][1] == 2
    assert re.fullmatch(r"<str len=18 #\w{8}>", got["split"]) and re.fullmatch(r"<str len=1 #\w{8}>",
                                                                                got["dims"][0])


# ---- at recording time: DYNSCOPE_REDACT, record(redact=...) ----

def record_redacted(tmp_path, words, name="r.db", home=None):
    db = tmp_path / name
    env = dict(os.environ, PYTHONPATH=ROOT, DYNSCOPE_REDACT=words)
    if home is not None:
        env["HOME"] = str(home)
    script = os.path.join(ROOT, "tests", "data", "secret_token.py")
    p = subprocess.run([sys.executable, "-m", "dynscope", "run", "--db", str(db), script,
                        SECRET.decode(), *OTHERS], capture_output=True, env=env,
                       cwd=os.path.join(ROOT, "tests", "data"))
    assert p.returncode == 0, p.stderr
    return db


def test_a_redacting_recording_never_writes_the_value(tmp_path):
    db = record_redacted(tmp_path, "values")
    data = b"".join(open(f, "rb").read() for f in files_under(tmp_path))
    assert SECRET not in data and b"SECRET" not in data
    con = sqlite3.connect(db)
    exprs = [e for (e,) in con.execute("SELECT expr FROM guards WHERE kind = 'EQUALS_MATCH'"
                                       " ORDER BY compile_id")]
    assert len(exprs) == 3 and all(re.fullmatch(r"L\['token'\] == <str len=\d+ #\w{8}>", e) for e in exprs)
    # a failure's observed value is the token of the value the next entry expects
    fails = con.execute("SELECT expr, observed FROM guard_failures ORDER BY failure_id").fetchall()
    assert fails and fails[0][1] == exprs[1].split(" == ")[1]
    # the report of it needs no --redact, and shows the tokens
    out = run("report", str(db)).stdout
    assert b"<str len=18 #" in out and SECRET not in out
    # another recording: another key
    other = record_redacted(tmp_path, "values", name="r2.db")
    first = set(re.findall(rb"#([0-9a-f]{8})>", run("report", str(db)).stdout))
    second = set(re.findall(rb"#([0-9a-f]{8})>", run("report", str(other)).stdout))
    assert first and second and first.isdisjoint(second)


def test_all_hides_numbers_and_paths_shortens_the_home(tmp_path):
    home = os.path.join(ROOT, "tests")              # the program's file lies under this "home"
    db = record_redacted(tmp_path, "all,paths", home=home)
    con = sqlite3.connect(db)
    (filename,) = con.execute("SELECT filename FROM code_objects").fetchone()
    assert filename == "~/data/secret_token.py"
    shapes = [e for (e,) in con.execute("SELECT expr FROM guards WHERE kind = 'TENSOR_MATCH'")]
    assert shapes and all("(3,)" not in e and "<num len=1 #" in e for e in shapes), shapes


def test_an_unknown_word_is_refused_and_nothing_is_recorded(tmp_path):
    db = tmp_path / "bad.db"
    p = subprocess.run([sys.executable, "-m", "dynscope", "run", "--db", str(db), "secret_token.py", "x"],
                       capture_output=True, text=True, cwd=os.path.join(ROOT, "tests", "data"),
                       env=dict(os.environ, PYTHONPATH=ROOT, DYNSCOPE_REDACT="values,bogus"))
    assert p.returncode == 2 and not db.exists()
    assert "unknown redaction bogus: the words are values, all, paths" in p.stderr
    with pytest.raises(ValueError, match="unknown redaction nope"):
        import dynscope
        dynscope.record(str(tmp_path / "b.db"), redact="nope")
    assert not (tmp_path / "b.db").exists()


def test_the_run_says_what_it_redacted_and_the_html_says_so_on_every_page(tmp_path):
    db = record_redacted(tmp_path, "paths,values")
    assert sqlite3.connect(db).execute("SELECT redacted FROM runs").fetchall() == [("paths,values",)]
    site = tmp_path / "site"
    assert run("report", "--html", str(site), str(db)).returncode == 0
    pages = files_under(site)
    assert pages and all(b"redacted while recording (paths,values)" in open(f, "rb").read()
                         for f in pages)


def test_an_objects_repr_is_a_value_too():
    r = redact.Redactor()
    got = r.text("L['cfg'] == Secret(sk-live-1) (observed Secret(sk-live-2))")
    assert re.fullmatch(r"L\[.cfg.\] == <repr len=17 #\w{8}> \(observed <repr len=17 #\w{8}>\)", got), got
    assert "sk-live" not in r.text("L['c'] is <Config sk-live-9 at 0x7f00>")
    # the same value hashes alike whether it was expected or observed
    a = r.text("L['t'] == 'tok' (observed 'x')").split(" == ")[1].split(" (")[0]
    b = r.text("L['t'] == 'y' (observed 'tok')").split("(observed ")[1].rstrip(")")
    assert a == b
    # code stays readable
    for kept in ("G['np'] is <module 'numpy'>", "G['f'] is <function f at 0x7f00>",
                 "L['x'].shape == (?, 16) (observed (3, 16))", "L['x'].dtype == float32 (observed float64)"):
        assert r.text(kept) == kept


def test_every_line_of_an_entrys_guards_is_redacted():
    r = redact.Redactor()
    text = "EQUALS_MATCH\tL['s'] == Secret(one)\nEQUALS_MATCH\tL['t'] == Secret(two)\nEQUALS_MATCH\tL['n'] == 3"
    got = r.text(text).splitlines()
    assert len(got) == 3 and "Secret" not in r.text(text) and got[2] == "EQUALS_MATCH\tL['n'] == 3"
