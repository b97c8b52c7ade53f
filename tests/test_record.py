"""The SQLite record (issue 6, docs/sql.md): the database says what the engine
saw, recording never breaks the program, and the documented recipes run.

Every recorded program here runs in a subprocess (recording is per process and
writes at exit).  The workload dumps the engine's own view at its end --
counters, cache entries per function (compile ids, hits, guards) and the
in-memory event log -- and the tests assert that the rows equal that view.

Captures here are static (dynamic=False): these tests count the recompiles
a new shape or value makes; automatic dynamic is tests/test_dynamic.py's.
"""
import hashlib
import json
import os
import re
import sqlite3
import stat
import subprocess
import sys
import textwrap
import time

import pytest

import _programs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = sys.executable
DYNTOP = os.environ.get("DYNTOP_BIN", os.path.join(ROOT, "build", "dyntop"))
SCHEMA_VERSION = 6      # store/read.h STORE_SCHEMA_VERSION: what a new file gets

# ---------------------------------------------------------------------------
# The workload: known recompiles (dtype, shape, constant), breaks (print,
# branch on a tensor, .item()), guard failures, a cache-limit hit, a skipped
# frame.  argv[1]: where to dump the engine's view.  WL_MODE=record: call
# dynscope.record(WL_DB) itself and dump stop_recording()'s stats too.

WORKLOAD = textwrap.dedent('''
    import json, os, sys, warnings
    import numpy as np
    import dynscope
    from dynscope import _C

    warnings.simplefilter("ignore")
    MODE = os.environ.get("WL_MODE", "")
    if MODE == "record":
        RUN_ID = dynscope.record(os.environ["WL_DB"])

    @dynscope.optimize("eager", dynamic=False)   # each constant specializes
    def scale(x, k):
        return x * k + 1

    @dynscope.optimize("eager", dynamic=False)
    def breaky(x):
        y = x + 1
        print("breaky")
        if (y.sum() > 0):
            y = y * 2
        v = y.sum().item()
        return y - v

    @dynscope.optimize("eager", dynamic=False)
    def limited(x):
        return x * 2

    def leaf(x):
        return x * 3

    @dynscope.optimize("eager", dynamic=False)
    def guarded(x):
        try:
            y = leaf(x)
            print(end="")        # a break inside the try: the frame is skipped
        except KeyError:
            y = None
        return y

    out = []
    for _ in range(3):
        out.append(scale(np.ones(3, dtype=np.float32), 2))   # 0/0, then hits
    out.append(scale(np.ones(3), 2))                         # dtype -> recompile
    out.append(scale(np.ones(4), 2))                         # shape -> recompile
    for _ in range(2):
        out.append(scale(np.ones(4), 3))                     # constant -> recompile
    for _ in range(3):
        out.append(breaky(np.ones(3)))                       # 3 breaks, then hits
    for _ in range(2):
        out.append(guarded(np.ones(2)))                      # frame skip
    dynscope.config.cache_size_limit = 2
    for n in range(1, 6):
        out.append(limited(np.ones(n)))                      # cache limit at n=3
    print("RESULT", [np.asarray(o).round(6).tolist() for o in out])

    def entry(e):
        return {"compile_id": e.compile_id, "hits": e.hits,
                "resume_offset": e.resume_offset,
                "guards": [[g.kind, g.expr] for g in e.guards]}

    dump = {"counters": _C.counters(),
            "events": _C.events(),
            "entries": {fn.__name__: [entry(e) for e in dynscope.cache_entries(fn)]
                        for fn in (scale, breaky, limited, guarded, leaf)}}
    if MODE == "record":
        dump["run_id"] = RUN_ID
        dump["stats"] = dynscope.stop_recording()
    with open(sys.argv[1], "w") as fh:
        json.dump(dump, fh, default=list)
''')

NAMES = ("scale", "breaky", "limited", "guarded", "leaf")


def run(args, env=None, timeout=120):
    e = dict(os.environ)
    e.pop("DYNSCOPE_DB", None)
    e["PYTHONPATH"] = ROOT + os.pathsep + e.get("PYTHONPATH", "")
    if env:
        e.update(env)
    return subprocess.run([PY] + list(args), capture_output=True, text=True, env=e,
                          timeout=timeout, cwd=ROOT)


def connect(db):
    return sqlite3.connect(f"file:{db}?mode=ro", uri=True)


def rows(db, sql, *params):
    con = connect(db)
    try:
        return con.execute(sql, params).fetchall()
    finally:
        con.close()


def digest(path):
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


def dynscope_lines(stderr):
    return [line for line in stderr.splitlines() if "dynscope" in line]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    d = tmp_path_factory.mktemp("record")
    (d / "workload.py").write_text(WORKLOAD)
    return d


@pytest.fixture(scope="module")
def baseline(workdir):
    """The workload without recording: its stdout is the program's result."""
    p = run([str(workdir / "workload.py"), str(workdir / "plain.json")])
    assert p.returncode == 0, p.stderr
    assert "RESULT" in p.stdout
    return p.stdout


def record_workload(workdir, mode, name):
    db = workdir / f"{name}.db"
    out = workdir / f"{name}.json"
    script = str(workdir / "workload.py")
    if mode == "cli":
        p = run(["-m", "dynscope", "run", "--db", str(db), script, str(out)])
    elif mode == "record":
        p = run([script, str(out)], env={"WL_MODE": "record", "WL_DB": str(db)})
    else:
        p = run([script, str(out)], env={"DYNSCOPE_DB": str(db)})
    assert p.returncode == 0, p.stderr
    with open(out) as fh:
        return str(db), json.load(fh), p


@pytest.fixture(scope="module")
def recorded(workdir):
    return record_workload(workdir, "cli", "cli")


# ---------------------------------------------------------------------------
# The rows equal the engine's view.

def assert_db_equals_engine_view(db, dump):
    evs = dump["events"]
    counters = dump["counters"]

    def of(kind):
        return [e for e in evs if e["event"] == kind]

    # runs: one, ended, nothing dropped
    runs = rows(db, "SELECT run_id, ended_at, dropped_events, written_events FROM runs")
    assert len(runs) == 1
    run_id, ended_at, dropped, written = runs[0]
    assert ended_at is not None and dropped == 0 and written > 0

    # compiles: the compile_start events, in order, with their outcomes
    db_compiles = rows(db, """
        SELECT co.name, c.compile_id, c.resume_offset, c.outcome, c.frame_compile_id > 0
          FROM compiles c JOIN code_objects co USING (run_id, code_id)
         ORDER BY c.compile_row""")
    ends = {(e["name"], e["compile_id"]): e["outcome"] for e in of("compile_end")}
    want = [(e["name"], e["compile_id"], e["resume_offset"],
             ends[(e["name"], e["compile_id"])], int(e["compile_id"].split("/")[1]) > 0)
            for e in of("compile_start")]
    assert db_compiles == want
    # counters["compiles"] counts successful compiles; a skipped attempt is a row too
    assert sum(r[3] == "ok" for r in db_compiles) == counters["compiles"]
    assert [r[:2] for r in db_compiles if r[3] == "skipped"] == [("guarded", r[1]) for r in db_compiles
                                                                  if r[0] == "guarded"]
    assert sum(r[4] for r in db_compiles) == counters["recompiles"] == len(of("recompile"))
    assert rows(db, "SELECT count(*) FROM compiles WHERE frame_compile_id > 0")[0][0] == 4
    # recompile reasons
    assert rows(db, """SELECT co.name, c.compile_id, c.reason FROM compiles c
                       JOIN code_objects co USING (run_id, code_id)
                       WHERE c.frame_compile_id > 0 ORDER BY compile_row""") == \
        [(e["name"], e["compile_id"], e["reason"]) for e in of("recompile")]

    # guard failures: the recompile events' failures, then the cache limit's
    db_fail = rows(db, """
        SELECT co.name, gf.compile_id, gf.entry_compile_id, gf.kind, gf.expr, gf.observed
          FROM guard_failures gf JOIN code_objects co USING (run_id, code_id)
         ORDER BY gf.failure_id""")
    want_fail = []
    for e in evs:
        if e["event"] in ("recompile", "cache_limit"):
            cid = e["compile_id"] if e["event"] == "recompile" else None
            want_fail += [(e["name"], cid, *map(str, f)) for f in e["failures"]]
    assert db_fail == want_fail
    kinds = {r[3] for r in db_fail}
    assert {"TENSOR_MATCH", "EQUALS_MATCH"} <= kinds
    observed = {r[5] for r in db_fail}
    assert {"float64", "(4,)", "3"} <= observed   # dtype, shape, constant

    # cache limit
    assert rows(db, """SELECT co.name, cl.reason FROM cache_limits cl
                       JOIN code_objects co USING (run_id, code_id)""") == \
        [(e["name"], e["last_failure"]) for e in of("cache_limit")]
    assert counters["cache_limits"] == 1

    # graph breaks, user_stack parsed as JSON
    db_breaks = [(n, cid, k, r, ln, off, json.loads(us)) for n, cid, k, r, ln, off, us in rows(db, """
        SELECT co.name, gb.compile_id, gb.kind, gb.reason, gb.lineno, gb.offset, gb.user_stack
          FROM graph_breaks gb JOIN code_objects co USING (run_id, code_id)
         ORDER BY gb.break_id""")]
    want_breaks = [(e["name"], e["compile_id"], e["kind"], e["reason"], e["lineno"], e["offset"],
                    [list(f) for f in e["user_stack"]]) for e in of("graph_break")]
    assert db_breaks == want_breaks
    assert [b[2] for b in db_breaks] == ["call", "data_dependent_branch", "data_escape"]
    assert len(db_breaks) == counters["graph_breaks"]
    # each with its registry type and class (docs/breaks.md)
    assert rows(db, "SELECT break_type, break_class FROM graph_breaks ORDER BY break_id") == \
        [(e["break_type"], e["break_class"]) for e in of("graph_break")] == \
        [("DS0001", "your code"), ("DS0003", "fundamental"), ("DS0004", "your code")]

    # frame skips, typed the same way
    assert rows(db, """SELECT co.name, fs.reason, fs.break_type, fs.break_class FROM frame_skips fs
                       JOIN code_objects co USING (run_id, code_id)""") == \
        [(e["name"], e["reason"], e["break_type"], e["break_class"]) for e in of("frame_skip")]

    # cache entries: ids, hits (final snapshot), guards
    for name in NAMES:
        engine = sorted((e["compile_id"], e["hits"], e["resume_offset"],
                         "\n".join(f"{k}\t{x}" for k, x in e["guards"]))
                        for e in dump["entries"][name])
        db_entries = sorted(rows(db, """
            SELECT ce.compile_id, ce.hits, ce.resume_offset, ce.guards_text
              FROM cache_entries ce JOIN code_objects co USING (run_id, code_id)
             WHERE co.name = ?""", name))
        assert db_entries == engine, name
        for e in dump["entries"][name]:
            assert rows(db, """SELECT g.kind, g.expr FROM guards g
                               JOIN code_objects co USING (run_id, code_id)
                               WHERE co.name = ? AND g.compile_id = ? ORDER BY idx""",
                        name, e["compile_id"]) == [tuple(g) for g in e["guards"]]
    assert rows(db, "SELECT hits FROM cache_entries JOIN code_objects USING (run_id, code_id)"
                    " WHERE name = 'scale' AND compile_id = '0/0'") == [(2,)]
    return run_id


@pytest.mark.parametrize("mode", ["cli", "record", "env"])
def test_rows_equal_the_engine_view(workdir, baseline, recorded, mode):
    db, dump, p = recorded if mode == "cli" else record_workload(workdir, mode, mode)
    assert p.stdout.splitlines()[-1] == baseline.splitlines()[-1]
    # the CLI's one summary line at exit; nothing else of dynscope's
    want = [f"dynscope run: {dump['counters']['cache_limits']} function(s) reached "
            f"cache_size_limit (2) and ran on without capture (table cache_limits of {db})"] \
        if mode == "cli" else []
    assert dump["counters"]["cache_limits"] > 0
    assert dynscope_lines(p.stderr) == want
    run_id = assert_db_equals_engine_view(db, dump)
    if mode == "record":
        st = dump["stats"]
        assert dump["run_id"] == run_id == st["run_id"]
        assert st["submitted"] == rows(db, "SELECT written_events FROM runs")[0][0]
    if mode == "cli":
        argv = json.loads(rows(db, "SELECT argv FROM runs")[0][0])
        assert argv[-1].endswith("cli.json")


def test_stop_recording_returns_the_final_counters(workdir):
    db, dump, _ = record_workload(workdir, "record", "final_stats")
    st = dump["stats"]
    assert st["pending"] == 0 and st["dropped"] == 0
    assert st["submitted"] == st["written"] == rows(db, "SELECT written_events FROM runs")[0][0]


def test_file_mode_is_0600(recorded):
    db = recorded[0]
    assert stat.S_IMODE(os.stat(db).st_mode) == 0o600


def test_sql_command_is_read_only(recorded):
    db = recorded[0]
    before = digest(db)
    n = rows(db, "SELECT count(*) FROM runs")
    p = run(["-m", "dynscope", "sql", db, "INSERT INTO runs (pid) VALUES (1)"])
    assert p.returncode != 0
    assert "readonly" in p.stderr.replace("-", "").lower() or "read-only" in p.stderr.lower()
    p = run(["-m", "dynscope", "sql", db, "DELETE FROM compiles"])
    assert p.returncode != 0
    assert digest(db) == before and rows(db, "SELECT count(*) FROM runs") == n
    p = run(["-m", "dynscope", "sql", "--json", db, "SELECT count(*) AS n FROM compiles"])
    assert p.returncode == 0
    assert json.loads(p.stdout) == [{"n": rows(db, "SELECT count(*) FROM compiles")[0][0]}]


# ---------------------------------------------------------------------------
# python -m dynscope report: the schema's views, printed.

def report_sections(text):
    """{title: [row cells]} of a report: sections are separated by blank
    lines, cells by two or more spaces; "(none)" is no rows."""
    sections = {}
    for block in text.strip().split("\n\n")[1:]:
        title, *lines = block.splitlines()
        body = lines[2:] if len(lines) >= 2 and set(lines[1]) <= {"-", " "} else []
        sections[title] = [tuple(re.split(r"\s{2,}", line.strip())) for line in body]
    return sections


PHASES = ("trace_ns", "guards_ns", "graph_ns", "backend_ns", "plan_ns")
TRIE = "Call paths that compiled (stack trie; compiles under each frame)"
SITES = "Top graph-break sites"       # then by cost, or why not (the costs are chance)
WHATIF = "What if a source were dynamic (from the recorded guard failures)"


def whatif_rows(db):
    """The report's what-if rows: dynscope/whatif.py's answers (tests/test_whatif.py
    checks them by applying each)."""
    from dynscope import whatif
    con = connect(db)
    try:
        return [(f["function"], str(f["frame"]), str(f["compiles"]), s["text"])
                for f in whatif.analyse(con) for s in f["suggestions"]][:10]
    finally:
        con.close()


def call_path_rows(db):
    """The stack trie's rows, from compiles.call_path: each frame once per
    distinct path start, with the compiles under it, most first."""
    paths = []
    for text, cid in rows(db, "SELECT call_path, compile_id FROM compiles ORDER BY compile_row"):
        path = [tuple(f) for f in json.loads(text)]
        own = max([i + 1 for i, f in enumerate(path[:-1])
                   if f[0].startswith("<frozen runpy") or f[0].endswith("/dynscope/__main__.py")],
                  default=0)
        paths.append((path[own:], f"[{cid}]"))
    assert paths and all(p[-1][2] for p, _ in paths)       # each ends at the compiled frame
    out = []

    def walk(prefix):
        under = {}
        for p, _ in paths:
            if len(p) > len(prefix) and tuple(p[:len(prefix)]) == prefix:
                under[p[len(prefix)]] = under.get(p[len(prefix)], 0) + 1
        for frame, n in sorted(under.items(), key=lambda kv: (-kv[1], kv[0])):
            here = prefix + (frame,)
            ids = [cid for p, cid in paths if tuple(p) == here]
            text = "· " * len(prefix) + f"{frame[2]} ({os.path.basename(frame[0])}:{frame[1]})"
            if ids:
                text += " -> compiled " + " ".join(ids[:6]) + (f" and {len(ids) - 6} more"
                                                              if len(ids) > 6 else "")
            out.append((str(n), text))
            walk(here)
    walk(())
    return out


def ms(ns):
    return f"{ns / 1e6:.2f}"


def report_expectations(dump):
    """What the report must say, from the engine's own event log."""
    evs = dump["events"]
    where = {e["name"]: f"{e['filename']}:{e['firstlineno']}" for e in evs if "firstlineno" in e}
    recompiles, last = {}, {}
    for e in evs:
        if e["event"] == "recompile":
            recompiles[e["name"]] = recompiles.get(e["name"], 0) + 1
        if e["event"] in ("recompile", "cache_limit"):   # in the order they were recorded
            for _entry, _kind, expr, observed in e["failures"]:
                last[e["name"]] = f"{expr} (observed {observed})"
    sites = {}
    for e in evs:
        if e["event"] == "graph_break":
            site = (e["kind"], e["reason"], f"{e['user_stack'][-1][0]}:{e['lineno']}")
            sites[site] = sites.get(site, 0) + 1
    nearest = []     # newest recompile first, its failing guards in order
    for e in reversed([e for e in evs if e["event"] == "recompile" and e["nearest"]]):
        n = e["nearest"]
        for g in n["guards"]:
            made = f"{g['user_stack'][-1][0]}:{g['user_stack'][-1][1]}" if g["user_stack"] else "engine"
            nearest.append((e["name"], e["compile_id"], n["entry"], str(n["failing"]),
                            f"{g['expr']} (observed {g['observed']})", made,
                            f"{n['capture_ns'] / 1e6:.1f}"))
    by_type = {}     # (type, class, what) -> [count, sites, reasons]
    for e in evs:
        if e["event"] in ("graph_break", "frame_skip"):
            what = "break" if e["event"] == "graph_break" else "skip"
            site = (f"{e['filename']}:{e['lineno']}" if what == "break"
                    else f"{e['filename']}:{e['firstlineno']}")
            t = by_type.setdefault((e["break_type"], e["break_class"], what), [0, set(), set()])
            t[0] += 1
            t[1].add(site)
            t[2].add(e["reason"])
    types = sorted(((*k, str(v[0]), str(len(v[1])), min(v[2])) for k, v in by_type.items()),
                   key=lambda r: (-int(r[3]), r[0]))
    ends = [e for e in evs if e["event"] == "compile_end"]
    kept_out = {}    # (name, site, reason) -> count, for breaks and skips of DS0032
    for e in evs:
        if e["event"] in ("graph_break", "frame_skip") and e["break_type"] == "DS0032":
            line = e["lineno"] if e["event"] == "graph_break" else e["firstlineno"]
            key = (e["name"], f"{e['filename']}:{line}", e["reason"])
            kept_out[key] = kept_out.get(key, 0) + 1
    return {
        "Graph breaks and skipped frames by type (docs/breaks.md)": types[:10],
        "Top recompiling functions (last failing guard)":
            [(n, where[n], str(k), last[n]) for n, k in sorted(recompiles.items(), key=lambda kv: -kv[1])],
        "Recompiles: the nearest older entry and the guards of it that failed": nearest[:10],
        SITES:
            [(*site, str(n)) for site, n in sorted(sites.items(), key=lambda kv: (-kv[1], kv[0]))],
        "Automatic dynamic (a recompile on a number's value or a size)":
            [(e["name"], where[e["name"]], e["compile_id"], e["reason"]) for e in evs
             if e["event"] == "recompile" and e["reason"]
             and ("is now dynamic" in e["reason"] or "stays static (the code needs" in e["reason"])],
        "Cache-limit hits":
            [(e["name"], where[e["name"]], e["last_failure"]) for e in evs if e["event"] == "cache_limit"],
        # compile time by phase, slowest first, then every compile's summed
        "Where compile time goes (ms; the phases add up to the total, events are outside it)":
            [(e["name"], f"[{e['compile_id']}]", ms(e["duration_ns"]),
              *(ms(e["phases"][p]) for p in PHASES), ms(e["phases"]["events_ns"]),
              str(e["phases"]["attempts"]))
             for e in sorted(ends, key=lambda e: -e["duration_ns"])][:10]     # --limit's default
            + [(f"(all {len(ends)} compiles)", ms(sum(e["duration_ns"] for e in ends)),   # no compile id
                *(ms(sum(e["phases"][p] for e in ends)) for p in PHASES),
                ms(sum(e["phases"]["events_ns"] for e in ends)),
                str(sum(e["phases"]["attempts"] for e in ends)))],
        # what an escape hatch kept in (compile_end's "hatches") or out (DS0032)
        "Escape hatches: what a mark kept in a graph or out of capture":
            [(e["name"], where[e["name"]], f"[{e['compile_id']}]", "in", h) for e in evs
             if e["event"] == "compile_end" for h in e["hatches"]]
            + [(k[0], k[1], "", "out", f"{k[2]} ({n}x)")
               for k, n in sorted(kept_out.items(), key=lambda kv: -kv[1])],
        # scale recompiles 3 times on 3 different guards (dtype, shape, a
        # constant), limited once: no source 3 times (tests/test_report_advice.py
        # has a recording with some)
        "Sources that keep recompiling (3 recompiles or more on one), and what to do": [],
    }


def sites_apart(sections):
    """(the other sections, the break-site rows cut to kind, reason, site and
    breaks, whether they came costliest first).  The engine times 1 call in
    64, so whether this workload's breaks have costs is chance; their order
    and numbers are tests/test_break_costs_report.py's."""
    (title,) = [t for t in sections if t.startswith(SITES)]
    rows = [r[:4] for r in sections.pop(title)]
    return sections, rows, "costs not measured" not in title


def test_report_sections_equal_the_engine_view(recorded):
    db, dump, _ = recorded
    p = run(["-m", "dynscope", "report", db])
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[:2] == [f"dynscope report: {db}", "  1 run(s), 0 events dropped"]
    want = report_expectations(dump)
    want[TRIE] = call_path_rows(db)
    want[WHATIF] = whatif_rows(db)
    want_sites = want.pop(SITES)
    got, sites, by_cost = sites_apart(report_sections(p.stdout))
    assert got == want
    assert (sorted(sites, key=lambda r: (-int(r[3]), r)) if by_cost else sites) == want_sites
    assert [r[0] for r in want["Top recompiling functions (last failing guard)"]] == ["scale", "limited"]
    assert len(want_sites) == 3 and len(want["Cache-limit hits"]) == 1
    p = run(["-m", "dynscope", "report", "--limit", "1", db])
    assert p.returncode == 0, p.stderr
    got, sites, by_cost = sites_apart(report_sections(p.stdout))
    assert got == {
        title: rows if title == "Cache-limit hits"
        else rows[:1] + rows[-1:] if title.startswith("Where compile time goes")   # + the sum row
        else rows if title == TRIE                                                  # a tree: whole
        else rows[:1] for title, rows in want.items()}
    assert len(sites) == 1 and (sites[0] in want_sites if by_cost else sites == want_sites[:1])
    assert len(want["Recompiles: the nearest older entry and the guards of it that failed"]) >= 3
    assert {r[0] for r in want["Graph breaks and skipped frames by type (docs/breaks.md)"]} >= {
        "DS0001", "DS0003", "DS0004", "DS0014"}


def test_each_miss_records_every_older_entrys_failure_with_where_its_guard_was_made(tmp_path):
    """A miss's failures travel packed in its recompile (or cache-limit)
    event, one row each in guard_failures: which entry, the guard, what was
    observed, and the line of user code that made the guard (f's call of g,
    whose branch reads k); a cache limit's rows have no compile.
    A guard whose text holds the packing's own separator (':') and digits
    comes back whole."""
    db = tmp_path / "fail.db"
    script = tmp_path / "fail_prog.py"
    script.write_text(textwrap.dedent('''
        import numpy as np, dynscope, warnings
        warnings.simplefilter("ignore")
        dynscope.config.cache_size_limit = 3
        def g(x, k):
            if k > "12:3":
                return x * 2
            return x + 1
        @dynscope.optimize("eager", dynamic=False)
        def f(x, k):
            return g(x, k) * 2
        for k in ("0:a", "1:bb", "12:4", "12:5", "9"):
            f(np.ones(2), k)
    '''))
    p = run(["-m", "dynscope", "run", "--db", str(db), str(script)])
    assert p.returncode == 0, p.stderr
    got = rows(db, """SELECT compile_id, compile_row IS NULL, entry_compile_id, kind, expr,
                             observed, filename, lineno
                        FROM guard_failures ORDER BY failure_id""")
    s = str(script)
    assert got == [            # f's guards: made at its call of g (line 11)
        ("0/1", 0, "0/0", "EQUALS_MATCH", "L['k'] == '0:a'", "'1:bb'", s, 11),
        ("0/2", 0, "0/1", "EQUALS_MATCH", "L['k'] == '1:bb'", "'12:4'", s, 11),
        ("0/2", 0, "0/0", "EQUALS_MATCH", "L['k'] == '0:a'", "'12:4'", s, 11),
        (None, 1, "0/2", "EQUALS_MATCH", "L['k'] == '12:4'", "'12:5'", s, 11),
        (None, 1, "0/1", "EQUALS_MATCH", "L['k'] == '1:bb'", "'12:5'", s, 11),
        (None, 1, "0/0", "EQUALS_MATCH", "L['k'] == '0:a'", "'12:5'", s, 11),
        # f past its limit runs uncaptured; g, now a frame of its own, guards
        # k at its branch (line 6)
        ("1/1", 0, "1/0", "EQUALS_MATCH", "L['k'] == '12:5'", "'9'", s, 6),
    ], got
    assert rows(db, "SELECT count(*) FROM cache_limits") == [(1,)]


def test_the_recorders_json_is_json_dumps_byte_for_byte():
    """The nearest-entry diff and the guard sites are written by the engine's
    own JSON writer (engine/capture/event_json.c): for every tree of the types
    it takes, the text json.dumps writes; anything else it leaves (None) to
    json.dumps."""
    import json
    from hypothesis import given, settings, strategies as st
    from dynscope._C import _event_json
    text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)
    leaves = (st.none() | st.booleans() | st.integers(-2**63, 2**63 - 1)
              | st.floats(allow_nan=True, allow_infinity=True) | text)
    trees = st.recursive(leaves, lambda kids: st.lists(kids, max_size=4)
                         | st.lists(kids, max_size=3).map(tuple)
                         | st.dictionaries(text, kids, max_size=4), max_leaves=20)

    @settings(max_examples=300, deadline=None, database=None)
    @given(trees)
    def same(tree):
        assert _event_json(tree) == json.dumps(tree)
    same()
    for other in ({1: 2}, [2**64], {"s": {1}}, [b"x"], [1] * 0 + [object()]):
        assert _event_json(other) is None
    deep = []
    for _ in range(40):
        deep = [deep]
    assert _event_json(deep) is None           # deeper than it writes: json.dumps's


def downgrade_to_v2(src, dst):
    """A copy of a recorded file as schema v2 wrote it: v3 added only views,
    v4 the guard-provenance columns and recompile_diffs, v5 compiles.hatches,
    the compile phases and call_path, v6 the entries' costs and break_costs."""
    with open(src, "rb") as fh, open(dst, "wb") as out:
        out.write(fh.read())
    con = sqlite3.connect(dst)
    for view in ("run_summary", "break_sites", "cache_limit_hits", "break_costs"):
        con.execute(f"DROP VIEW {view}")
    con.execute("DROP TABLE recompile_diffs")
    for table, column in (("guards", "filename"), ("guards", "lineno"), ("guards", "user_stack"),
                          ("guard_failures", "filename"), ("guard_failures", "lineno"),
                          *(("compiles", c) for c in ("hatches", "trace_ns", "guards_ns", "graph_ns",
                                                      "backend_ns", "plan_ns", "events_ns",
                                                      "attempts", "call_path")),
                          *((t, c) for t in ("cache_entries", "entry_stats")
                            for c in ("cost_samples", "run_ns", "break_ns", "break_graphs"))):
        con.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
    con.execute("PRAGMA user_version = 2")
    con.commit()
    con.close()


def test_a_v2_file_is_read_by_the_report_and_dyntop_as_the_v3_file_untouched(recorded, tmp_path):
    db = recorded[0]
    old = str(tmp_path / "v2.db")
    downgrade_to_v2(db, old)
    before = digest(old)
    new = run(["-m", "dynscope", "report", db])
    p = run(["-m", "dynscope", "report", old])   # the views it lacks: TEMP views
    assert p.returncode == 0, p.stderr
    newer, newer_sites, by_cost = sites_apart(report_sections(new.stdout))
    del newer["Recompiles: the nearest older entry and the guards of it that failed"]   # v4's
    del newer["Graph breaks and skipped frames by type (docs/breaks.md)"]
    del newer["Escape hatches: what a mark kept in a graph or out of capture"]   # v5's
    del newer["Where compile time goes (ms; the phases add up to the total, events are outside it)"]
    del newer[TRIE]
    del newer[WHATIF]
    got, sites, old_by_cost = sites_apart(report_sections(p.stdout))
    assert got == newer
    # v6's costs: none in a v2 file, so its sites come most frequent first
    assert not old_by_cost and sites == (sorted(newer_sites, key=lambda r: (-int(r[3]), r))
                                         if by_cost else newer_sites)
    assert len(report_sections(p.stdout)["Cache-limit hits"]) == 1
    p = run(["-m", "dynscope", "sql", old, "SELECT count(*) AS n FROM code_summary"])
    assert p.returncode == 0, p.stderr
    if os.access(DYNTOP, os.X_OK):   # dyntop reads it through TEMP views of its own
        v2 = _programs.run([DYNTOP, "-b", old], capture_output=True, text=True)
        v3 = _programs.run([DYNTOP, "-b", db], capture_output=True, text=True)
        assert v2.returncode == 0, v2.stderr

        def table(out):   # the rows, without the flags column ("recent" is a clock's)
            return [line.split(None, 1)[1] for line in out.split("\n\n", 1)[1].splitlines()]
        assert table(v2.stdout) == table(v3.stdout) and len(table(v3.stdout)) == 6
    assert digest(old) == before


def test_report_refuses_a_v1_file_untouched(recorded, tmp_path):
    old = str(tmp_path / "v1.db")
    downgrade_to_v2(recorded[0], old)
    con = sqlite3.connect(old)
    con.execute("PRAGMA user_version = 1")
    con.commit()
    con.close()
    before = digest(old)
    p = run(["-m", "dynscope", "report", old])
    assert p.returncode == 2 and p.stdout == ""
    assert "schema v1 is not readable" in p.stderr, p.stderr
    assert digest(old) == before


def test_report_refuses_a_file_that_is_not_dynscope(tmp_path):
    path = tmp_path / "other.db"
    make_foreign_db(path)
    p = run(["-m", "dynscope", "report", str(path)])
    assert p.returncode == 2 and "not a dynscope database" in p.stderr, p.stderr


# ---------------------------------------------------------------------------
# Faults: the program's results unchanged, exit 0, one message on stderr.

def make_text_file(path):
    path.write_text("not a database\n" * 10)


def make_foreign_db(path):
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
    con.execute("INSERT INTO notes (body) VALUES ('mine')")
    con.commit()
    con.close()


def make_newer_db(path):
    p = run(["-c", f"import dynscope; dynscope.record({str(path)!r}); dynscope.stop_recording()"])
    assert p.returncode == 0, p.stderr
    con = sqlite3.connect(path)
    con.execute("PRAGMA user_version = 99")
    con.commit()
    con.close()


BAD_FILES = {
    "text": (make_text_file, "not"),
    "foreign": (make_foreign_db, "not a dynscope"),
    "newer": (make_newer_db, "99"),
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_unusable_file_is_refused_and_left_untouched(workdir, baseline, tmp_path, case):
    make, needle = BAD_FILES[case]
    db = tmp_path / "bad.db"
    make(db)
    before = digest(db)
    # record(): OSError naming the file and the reason
    p = run(["-c", textwrap.dedent(f"""
        import dynscope
        try:
            dynscope.record({str(db)!r})
        except OSError as exc:
            print("OSError:", exc)
        else:
            print("recorded")
        """)])
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("OSError:") and str(db) in p.stdout, p.stdout
    assert needle in p.stdout, p.stdout
    if case == "newer":
        assert "v99" in p.stdout and f"v{SCHEMA_VERSION}" in p.stdout   # both versions named
    # DYNSCOPE_DB: the program runs anyway, one line on stderr
    p = run([str(workdir / "workload.py"), str(tmp_path / "o.json")], env={"DYNSCOPE_DB": str(db)})
    assert p.returncode == 0, p.stderr
    assert p.stdout == baseline
    assert len(dynscope_lines(p.stderr)) == 1, p.stderr
    assert digest(db) == before


def test_unwritable_path(workdir, baseline, tmp_path):
    db = tmp_path / "no" / "such" / "dir" / "x.db"
    p = run(["-c", f"import dynscope\ntry:\n dynscope.record({str(db)!r})\n"
                   f"except OSError as e:\n print('OSError:', e)"])
    assert p.returncode == 0 and p.stdout.startswith("OSError:") and str(db) in p.stdout, p
    p = run([str(workdir / "workload.py"), str(tmp_path / "o.json")], env={"DYNSCOPE_DB": str(db)})
    assert p.returncode == 0 and p.stdout == baseline
    assert len(dynscope_lines(p.stderr)) == 1 and "DYNSCOPE_DB" in p.stderr, p.stderr
    assert not db.exists()


LOCK_HOLDER = textwrap.dedent('''
    import sqlite3, sys
    con = sqlite3.connect(sys.argv[1], isolation_level=None)
    con.execute("BEGIN EXCLUSIVE")
    print("locked", flush=True)
    sys.stdin.readline()
    con.execute("ROLLBACK")
''')


def test_locked_database_drops_and_counts(workdir, tmp_path):
    """Another process holds BEGIN EXCLUSIVE while the program runs: its
    events are dropped and counted, the program is fine, one message."""
    db = tmp_path / "locked.db"
    script = tmp_path / "locked_prog.py"
    script.write_text(textwrap.dedent(f'''
        import json, subprocess, sys, time
        import numpy as np
        import dynscope
        dynscope.config.cache_size_limit = 100
        run_id = dynscope.record({str(db)!r})
        holder = subprocess.Popen([sys.executable, "-c", {LOCK_HOLDER!r}, {str(db)!r}],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert holder.stdout.readline().strip() == "locked"
        @dynscope.optimize("eager", dynamic=False)
        def f(x, k):
            return x * k
        total = sum(float(f(np.ones(3), k).sum()) for k in range(20))
        # the writer tries, waits its 2 s busy timeout, drops: wait for the
        # drop itself (the limit is only for a writer that never gives up)
        deadline = time.monotonic() + 60
        while dynscope._C.record_stats()["dropped_write"] == 0:
            assert time.monotonic() < deadline, "the writer never dropped its batch"
            time.sleep(0.02)
        holder.stdin.write("\\n"); holder.stdin.flush(); holder.wait()
        st = dynscope.stop_recording()
        print(json.dumps({{"total": total, "stats": st, "run_id": run_id}}))
    '''))
    p = run([str(script)], timeout=120)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout.splitlines()[-1])
    assert out["total"] == sum(3.0 * k for k in range(20))
    st = out["stats"]   # taken before the final write (see the xfail above): submitted only
    (dropped, written, ended), = rows(db, "SELECT dropped_events, written_events, ended_at IS NOT NULL FROM runs")
    assert dropped > 0 and ended == 1
    assert written + dropped == st["submitted"]
    msgs = dynscope_lines(p.stderr)
    assert len(msgs) == 1 and "locked" in msgs[0], p.stderr


def test_queue_overflow_drops_and_counts(tmp_path):
    """Tens of thousands of events at once (40,000 marks, then 9,000 compiles
    of 300 functions, each compile 4 events) while the writer waits on a
    lock: the queue (16384 events) overflows; drops are counted, the program
    is fine.  The marks come first because they fill the queue within the
    writer's 2 s busy timeout on any build: under ASan the compiles alone
    are too slow to, and a writer that has timed out drops what it takes."""
    db = tmp_path / "overflow.db"
    script = tmp_path / "overflow_prog.py"
    script.write_text(textwrap.dedent(f'''
        import json, subprocess, sys, time, warnings
        import numpy as np
        import dynscope
        warnings.simplefilter("ignore")
        dynscope.config.cache_size_limit = 100000
        dynscope.record({str(db)!r})
        holder = subprocess.Popen([sys.executable, "-c", {LOCK_HOLDER!r}, {str(db)!r}],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert holder.stdout.readline().strip() == "locked"
        for i in range(40000):
            dynscope.annotate("tick", i=i)
        fs = []
        for i in range(300):                         # a code object each
            ns = {{}}
            exec(f"def f{{i}}(x, k):\\n    return x * k", ns)
            fs.append(dynscope.optimize("eager", dynamic=False)(ns[f"f{{i}}"]))  # each k specializes
        x = np.ones(2)
        total = sum(float(f(x, k)[0]) for k in range(30) for f in fs)
        holder.stdin.write("\\n"); holder.stdin.flush(); holder.wait()
        st = dynscope.stop_recording()
        print(json.dumps({{"total": total, "stats": st}}))
    '''))
    p = run([str(script)], timeout=60)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout.splitlines()[-1])
    assert out["total"] == float(300 * sum(range(30)))
    st = out["stats"]
    assert st["submitted"] > 16384 * 2
    assert st["dropped_queue"] > 0
    (dropped, written), = rows(db, "SELECT dropped_events, written_events FROM runs")
    assert dropped >= st["dropped_queue"] and written + dropped == st["submitted"]
    msgs = dynscope_lines(p.stderr)
    assert sum("queue is full" in m for m in msgs) == 1, p.stderr


# ---------------------------------------------------------------------------
# Several processes and threads.

def test_pool_of_four_forked_workers_each_get_a_run(tmp_path):
    db = tmp_path / "pool.db"
    script = tmp_path / "pool_prog.py"
    script.write_text(textwrap.dedent(f'''
        import json, multiprocessing as mp
        import numpy as np
        import dynscope
        from dynscope import _C

        @dynscope.optimize("eager", dynamic=False)
        def f(x):
            return x * 2 + 1

        def task(n):
            before = _C.counters()["compiles"]
            r = float(f(np.ones(n)).sum())
            return (_C.record_stats()["run_id"], _C.counters()["compiles"] - before, r)

        if __name__ == "__main__":
            dynscope.config.cache_size_limit = 1000
            parent = dynscope.record({str(db)!r})
            f(np.ones(1))
            ctx = mp.get_context("fork")
            with ctx.Pool(4) as pool:
                res = pool.map(task, range(2, 42), chunksize=1)
                pool.close(); pool.join()
            dynscope.stop_recording()
            print(json.dumps({{"parent": parent, "res": res}}))
    '''))
    p = run([str(script)], timeout=120)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout.splitlines()[-1])
    assert [r[2] for r in out["res"]] == [3.0 * n for n in range(2, 42)]
    per_run = {}
    for run_id, compiles, _ in out["res"]:
        per_run[run_id] = per_run.get(run_id, 0) + compiles
    assert out["parent"] not in per_run and 1 <= len(per_run) <= 4
    db_runs = dict(rows(db, "SELECT run_id, count(*) FROM compiles GROUP BY run_id"))
    assert db_runs == {out["parent"]: 1, **per_run}
    assert sum(per_run.values()) == 40
    assert rows(db, "SELECT count(*) FROM runs WHERE ended_at IS NULL OR dropped_events != 0") == [(0,)]
    # one run per process: the parent and its 4 workers (a worker that got no
    # task has a runs row and no compiles)
    all_runs = rows(db, "SELECT run_id, pid FROM runs")
    assert len(all_runs) == 5 and len({pid for _, pid in all_runs}) == 5
    assert set(per_run) <= {run_id for run_id, _ in all_runs}


def test_threads_record_into_one_file(tmp_path):
    db = tmp_path / "threads.db"
    script = tmp_path / "threads_prog.py"
    script.write_text(textwrap.dedent(f'''
        import json, threading
        import numpy as np
        import dynscope
        dynscope.config.cache_size_limit = 1000
        run_id = dynscope.record({str(db)!r})

        def make(i):
            def fn(x):
                return x + i
            fn.__code__ = fn.__code__.replace(co_name=f"fn{{i}}", co_qualname=f"fn{{i}}")
            return dynscope.optimize("eager", dynamic=False)(fn)

        fns = [make(i) for i in range(4)]
        def body(i):
            for n in range(1, 26):
                for _ in range(3):
                    fns[i](np.ones(n))
        ts = [threading.Thread(target=body, args=(i,)) for i in range(4)]
        for t in ts: t.start()
        for t in ts: t.join()
        st = dynscope.stop_recording()
        print(json.dumps(st))
    '''))
    p = run([str(script)], timeout=120)
    assert p.returncode == 0, p.stderr
    st = json.loads(p.stdout.splitlines()[-1])
    assert rows(db, "SELECT dropped_events, written_events FROM runs") == [(0, st["submitted"])]
    got = rows(db, """SELECT name, count(*), sum(frame_compile_id > 0) FROM compiles
                      JOIN code_objects USING (run_id, code_id) GROUP BY name ORDER BY name""")
    assert got == [(f"fn{i}", 25, 24) for i in range(4)]
    # each recompile k reports the k older entries' failing guards
    assert rows(db, "SELECT count(*) FROM guard_failures") == [(4 * sum(range(25)),)]
    assert rows(db, "SELECT name, sum(hits) FROM cache_entries JOIN code_objects"
                    " USING (run_id, code_id) GROUP BY name ORDER BY name") == \
        [(f"fn{i}", 50) for i in range(4)]


# ---------------------------------------------------------------------------
# docs/sql.md recipes: parsed out of the doc, each run on the recorded
# workload and its result asserted.

def recipes():
    with open(os.path.join(ROOT, "docs", "sql.md")) as fh:
        text = fh.read()
    m = re.search(r"<!-- recipes:start -->(.*)<!-- recipes:end -->", text, re.S)
    assert m, "docs/sql.md has no recipes section"
    return dict(re.findall(r"^#### (.+?)\n.*?```sql\n(.*?)```", m.group(1), re.S | re.M))


def recipe_expectations(db, dump):
    evs = dump["events"]
    rec = [e for e in evs if e["event"] == "recompile"]
    return {
        "Functions that recompiled more than N times, and the guard that failed most":
            [("scale", 3, "L['x'].dtype == float32", 3)],
        "Graph-break reasons by file":
            [(os.path.basename(evs[0]["filename"]), "call", "call to builtin print", 1),
             (os.path.basename(evs[0]["filename"]), "data_dependent_branch",
              "branch on a tensor value `if (y.sum() > 0):`", 1),
             (os.path.basename(evs[0]["filename"]), "data_escape",
              "data escape: .item() on a tensor value", 1)],
        "Guard failures whose observed value was a shape":
            [("limited", "L['x'].shape == (1,)", "(2,)"), ("limited", "L['x'].shape == (1,)", "(3,)"),
             ("limited", "L['x'].shape == (2,)", "(3,)"), ("scale", "L['x'].shape == (3,)", "(4,)"),
             ("scale", "L['x'].shape == (3,)", "(4,)")],
        "Recompiles per minute over a run": None,   # checked below
        "Cache entries never hit":
            [("limited", "7/0"), ("limited", "7/1"), ("scale", "0/1"), ("scale", "0/2")],
        "Hottest code objects":
            [("breaky", 8), ("scale", 3), ("leaf", 1), ("limited", 0)],
        "Skipped frames and why": [("guarded", "code inside a try/with block", 1)],
        "Cache-limit hits with the last failing guard":
            [("limited", 2, "L['x'].shape == (2,) (observed (3,))", "L['x'].shape == (2,)", "(3,)")],
        "Slowest compiles": None,
        # the engine's own nearest-entry diffs, row for row
        "Why each recompile missed: the nearest entry's failing guards":
            [(e["name"], e["compile_id"], e["nearest"]["entry"], e["nearest"]["failing"],
              g["expr"], g["observed"],
              f"{os.path.basename(g['user_stack'][-1][0])}:{g['user_stack'][-1][1]}",
              e["nearest"]["capture_ns"])
             for e in rec for g in e["nearest"]["guards"]],
    }, len(rec)


def test_recipes_run_on_the_recorded_workload(recorded):
    db, dump, _ = recorded
    found = recipes()
    want, nrec = recipe_expectations(db, dump)
    assert len(found) >= 8
    assert len(want["Why each recompile missed: the nearest entry's failing guards"]) >= 3
    assert set(found) == set(want), sorted(found)
    con = connect(db)
    try:
        for name, sql in found.items():
            got = con.execute(sql).fetchall()
            if name == "Recompiles per minute over a run":
                assert sum(r[2] for r in got) == nrec and all(r[0] == 1 for r in got), got
            elif name == "Slowest compiles":
                assert len(got) == 5 and [r[3] for r in got] == sorted((r[3] for r in got), reverse=True)
                assert got[0][3] == con.execute("SELECT max(duration_ns) FROM compiles").fetchone()[0]
            else:
                got = [tuple(os.path.basename(v) if isinstance(v, str) and v.startswith("/") else v
                             for v in r) for r in got]
                assert got == want[name], (name, got)
    finally:
        con.close()


def test_recipes_run_through_the_sql_command(recorded):
    db = recorded[0]
    for name, sql in recipes().items():
        p = run(["-m", "dynscope", "sql", "--csv", db, sql])
        assert p.returncode == 0, (name, p.stderr)


# ---------------------------------------------------------------------------
# Path templates: a file per process, rank or host (docs/recording.md).

RANK_PROGRAM = """
import os, sys
import numpy as np
import dynscope

@dynscope.optimize("eager", dynamic=False)
def step(x):
    return x * 2 + 1

for n in range(2, 4 + int(os.environ["RANK"] == "2")):   # rank 2 runs one shape more
    step(np.ones(n))
print(dynscope.recording_path())
if os.fork() == 0:                                        # a child: its own %p
    step(np.ones(9))
    print(dynscope.recording_path())
    dynscope.stop_recording()
    os._exit(0)
os.wait()
"""


def test_a_path_template_gives_each_rank_and_process_its_own_file(tmp_path):
    import socket
    host = socket.gethostname()
    env = {"DYNSCOPE_DB": str(tmp_path / "run-%h-r%r-%p.db"), "WORLD_SIZE": "4"}
    procs = [subprocess.Popen([PY, "-c", RANK_PROGRAM], stdout=subprocess.PIPE, text=True, cwd=ROOT,
                              env={**os.environ, **env, "PYTHONPATH": ROOT,
                                   "RANK": str(r), "LOCAL_RANK": str(r % 2)})
             for r in range(4)]
    outs = [p.communicate(timeout=120)[0].split() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    files = sorted(os.listdir(tmp_path))
    assert len(files) == 8 and sorted(os.path.basename(f) for o in outs for f in o) == files
    for r, (parent, child) in enumerate(outs):
        for path, compiles in ((parent, 3 if r == 2 else 2), (child, 1)):
            assert os.path.basename(path).startswith(f"run-{host}-r{r}-")
            pid = int(path.rsplit("-", 1)[1].split(".")[0])
            assert rows(path, "SELECT pid, hostname, rank, local_rank, world_size FROM runs") == [
                (pid, host, r, r % 2, 4)]
            assert rows(path, "SELECT count(*) FROM compiles")[0][0] == compiles


def test_an_unknown_template_escape_is_refused(tmp_path):
    p = run(["-c", f"import dynscope; dynscope.record({str(tmp_path / 'x%q.db')!r})"])
    assert p.returncode == 1 and "unknown %q in the path" in p.stderr, p.stderr
    assert os.listdir(tmp_path) == []
    # without torchrun's variables the rank is 0 and the columns NULL
    p = run(["-c", f"import dynscope; dynscope.record({str(tmp_path / 'r%r.db')!r})"],
            env={"RANK": "", "LOCAL_RANK": "", "WORLD_SIZE": ""})
    assert p.returncode == 0, p.stderr
    assert rows(str(tmp_path / "r0.db"), "SELECT rank, local_rank, world_size FROM runs") == [
        (None, None, None)]
