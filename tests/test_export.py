"""python -m dynscope export --chrome-trace (dynscope/export.py): the trace
is valid Trace Event Format, says what the database says (compile spans,
graph breaks, recompiles, cache-limit hits, runs as processes), reads files
of schema v2 and v3 and empty ones, and every bad input or output is one
line on stderr and status 2.

The workload is recorded once, in a subprocess, with static captures
(dynamic=False): each new dtype or shape is a recompile."""
import json
import os
import sqlite3
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

WORKLOAD = textwrap.dedent('''
    import warnings
    import numpy as np
    import dynscope

    warnings.simplefilter("ignore")

    @dynscope.optimize("eager", dynamic=False)
    def scale(x, k):
        return x * k + 1

    @dynscope.optimize("eager", dynamic=False)
    def breaky(x):
        y = x + 1
        print("breaky")
        return y * 2

    @dynscope.optimize("eager", dynamic=False)
    def limited(x):
        return x * 2

    scale(np.ones(3, dtype=np.float32), 2)
    scale(np.ones(3), 2)                     # dtype: a recompile
    scale(np.ones(4), 2)                     # shape: a recompile
    breaky(np.ones(3))                       # a break at the print
    dynscope.config.cache_size_limit = 2
    for n in range(1, 5):
        limited(np.ones(n))                  # the limit at n=3
''')

PHASES = {"X", "i", "M"}   # what the export writes, of the format's phases
# a compile's phases (compiles.*_ns), in the order they add up to its duration
COMPILE_PHASES = ("trace_ns", "guards_ns", "graph_ns", "backend_ns", "plan_ns")


def run(*args, cwd=ROOT):
    env = dict(os.environ, PYTHONPATH=ROOT)
    env.pop("DYNSCOPE_DB", None)
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=300)


def export(db, out):
    return run("-m", "dynscope", "export", "--chrome-trace", str(out), str(db))


def rows(db, sql):
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def copy_db(src, dst):
    """A consistent copy (the backup API reads through the WAL)."""
    s = sqlite3.connect(f"file:{src}?mode=ro", uri=True)
    d = sqlite3.connect(dst)
    s.backup(d)
    s.close()
    d.close()
    return dst


def exported(db, tmp_path, name="out.json"):
    out = tmp_path / name
    p = export(db, out)
    assert p.returncode == 0 and p.stdout == "" and p.stderr == "", p.stderr
    with open(out) as fh:
        trace = json.load(fh)
    check_format(trace)
    return trace


def check_format(trace):
    """The Trace Event Format's JSON object form, as Perfetto and
    chrome://tracing read it."""
    assert isinstance(trace, dict) and isinstance(trace["traceEvents"], list)
    assert trace["displayTimeUnit"] == "ms"
    assert all(isinstance(v, str) for v in trace["otherData"].values())
    for ev in trace["traceEvents"]:
        assert isinstance(ev["name"], str) and ev["ph"] in PHASES, ev
        assert type(ev["pid"]) is int and type(ev["tid"]) is int, ev
        assert isinstance(ev["ts"], (int, float)) and ev["ts"] >= 0, ev
        assert isinstance(ev["args"], dict), ev
        if ev["ph"] == "X":
            assert isinstance(ev["dur"], (int, float)) and ev["dur"] >= 0, ev
        elif ev["ph"] == "i":
            assert ev["s"] in ("g", "p", "t"), ev
        else:
            assert ev["name"] in ("process_name", "thread_name"), ev
            assert isinstance(ev["args"]["name"], str) and ev["args"]["name"], ev
    # Perfetto finds a thread_name's thread by tid alone: one tid, one track
    threads = [(ev["pid"], ev["tid"]) for ev in trace["traceEvents"]
               if ev["name"] == "thread_name"]
    assert len({tid for _, tid in threads}) == len(threads), threads
    assert {(ev["pid"], ev["tid"]) for ev in trace["traceEvents"] if ev["ph"] != "M"} \
        <= set(threads)
    # Perfetto keeps a thread's slices only if they nest or are disjoint
    by_track = {}
    for ev in trace["traceEvents"]:
        if ev["ph"] == "X":
            by_track.setdefault((ev["pid"], ev["tid"]), []).append(ev)
    # (compared in whole nanoseconds, as Perfetto reads the microseconds: a
    # float sum ts + dur may pass the next span's start by one ulp)
    ns = lambda us: round(us * 1000)                                       # noqa: E731
    for spans in by_track.values():
        spans.sort(key=lambda e: (ns(e["ts"]), -ns(e["dur"])))
        stack = []
        for ev in spans:
            while stack and stack[-1] <= ns(ev["ts"]):
                stack.pop()
            end = ns(ev["ts"]) + ns(ev["dur"])
            assert not stack or end <= stack[-1], f"overlap at {ev}"
            stack.append(end)


def of(trace, cat):
    return [ev for ev in trace["traceEvents"] if ev.get("cat") == cat]


def names(trace, kind):
    return {(ev["pid"], ev["tid"]): ev["args"]["name"]
            for ev in trace["traceEvents"] if ev["ph"] == "M" and ev["name"] == kind}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    d = tmp_path_factory.mktemp("export")
    (d / "workload.py").write_text(WORKLOAD)
    db = d / "w.db"
    p = run("-m", "dynscope", "run", "--db", str(db), "workload.py", cwd=d)
    assert p.returncode == 0, p.stderr
    counts = rows(db, "SELECT (SELECT count(*) FROM recompiles), (SELECT count(*) FROM"
                      " graph_breaks), (SELECT count(*) FROM cache_limits)")[0]
    assert counts[0] >= 2 and counts[1] >= 1 and counts[2] == 1, counts
    return db


def test_the_trace_says_what_the_database_says(recorded, tmp_path):
    db = recorded
    trace = exported(db, tmp_path)
    evs = trace["traceEvents"]
    origin = min(t for (t,) in rows(db, "SELECT started_at FROM compiles UNION ALL"
                                        " SELECT at FROM graph_breaks UNION ALL"
                                        " SELECT at FROM cache_limits"))
    assert trace["otherData"]["origin_ns"] == str(origin)
    assert trace["otherData"]["schema_version"] == str(rows(db, "PRAGMA user_version")[0][0])
    assert trace["otherData"]["rows_without_time"] == "0"

    def us(ns):
        return (ns - origin) / 1000

    # one process per run, named after it
    ((run_id, pid, argv),) = rows(db, "SELECT run_id, pid, argv FROM runs")
    assert {ev["pid"] for ev in evs} == {pid}
    assert names(trace, "process_name") == {(pid, pid): f"dynscope run {run_id}: "
                                              + " ".join(json.loads(argv))}
    assert "workload.py" in argv

    # one track per code object, named "qualname (file:line)"
    threads = names(trace, "thread_name")
    label = {code_id: f"{name} ({os.path.basename(filename)}:{line})" for code_id, name,
             filename, line in rows(db, "SELECT code_id, name, filename, firstlineno"
                                        " FROM code_objects")}
    RUN = " run time (timed calls)"
    assert sorted(t for t in threads.values() if not t.endswith(RUN)) == sorted(
        label[c] for (c,) in rows(db, "SELECT DISTINCT code_id FROM compiles"))
    # and a track beside it for the timed calls' run spans (schema v6), a
    # slice per run_spans row, on its code object's run track
    runs = of(trace, "run")
    span_rows = rows(db, "SELECT code_id, compile_id, kind, duration_ns FROM run_spans ORDER BY at")
    assert span_rows and len(runs) == len(span_rows)
    assert sorted(t for t in threads.values() if t.endswith(RUN)) == sorted(
        label[c] + RUN for c in {r[0] for r in span_rows})
    for ev in runs:
        assert threads[(pid, ev["tid"])] == label[ev["args"]["code_id"]] + RUN
        assert ev["name"] == ("graph " if ev["args"]["kind"] == "graph"
                              else "eager step and resume after ") + ev["args"]["compile_id"]
        assert ev["dur"] <= ev["args"]["ns"] / 1000 + 1e-9     # clipped at most, never longer
    assert {r[2] for r in span_rows} == {"graph", "eager"}

    # one span per compiles row, in the rows' order, at the rows' times
    compiles = rows(db, """
        SELECT c.compile_row, co.name, c.code_id, c.compile_id, c.frame_id, c.resume_offset,
               c.outcome, c.graphs, c.nodes, c.guards, c.reason, c.started_at, c.duration_ns,
               co.filename || ':' || co.firstlineno
          FROM compiles c JOIN code_objects co USING (run_id, code_id) ORDER BY c.compile_row""")
    spans = of(trace, "compile")
    assert len(spans) == len(compiles) == rows(db, "SELECT count(*) FROM compiles")[0][0]
    phases = {r[0]: dict(zip(COMPILE_PHASES + ("events_ns", "attempts"), r[1:])) for r in rows(
        db, f"SELECT compile_row, {', '.join(COMPILE_PHASES)}, events_ns, attempts FROM compiles")}
    assert all(p["attempts"] >= 1 for p in phases.values())
    assert all(ev["ph"] == "X" for ev in spans)
    assert [ev["args"]["compile_row"] for ev in spans] == [c[0] for c in compiles]
    assert [ev["ts"] for ev in spans] == sorted(ev["ts"] for ev in spans)
    span_of = {}
    for ev, (row, name, code_id, cid, frame_id, offset, outcome, graphs, nodes, guards,
             reason, started, dur, code) in zip(spans, compiles):
        assert ev["name"] == f"{name} {cid}"
        assert ev["ts"] == us(started) and ev["dur"] == dur / 1000
        assert threads[(pid, ev["tid"])] == label[code_id]
        want = {"code": code, "code_id": code_id, "epoch": 0, "compile_row": row,
                "compile_id": cid, "frame_id": frame_id, "resume_offset": offset,
                "outcome": outcome, "graphs": graphs, "nodes": nodes, "guards": guards}
        if reason is not None:
            want["reason"] = reason
        want.update(phases[row])
        assert ev["args"] == want
        span_of[row] = ev
    # each compile's phases (schema v5): nested spans that tile it, in the order
    # they add up, each as long as SQL says
    children = of(trace, "compile_phase")
    assert len(children) == len(COMPILE_PHASES) * len(compiles)
    for row, ev in span_of.items():
        mine = [c for c in children if c["args"]["compile_row"] == row]
        assert [c["name"] for c in mine] == [p[:-3] for p in COMPILE_PHASES]
        assert [c["args"]["ns"] for c in mine] == [phases[row][p] for p in COMPILE_PHASES]
        assert mine[0]["ts"] == ev["ts"] and all(c["tid"] == ev["tid"] for c in mine)
        for a, b in zip(mine, mine[1:]):
            assert a["ts"] + a["dur"] == b["ts"]
        assert abs(mine[-1]["ts"] + mine[-1]["dur"] - (ev["ts"] + ev["dur"])) < 1e-6
    assert min(ev["ts"] for ev in evs if ev["ph"] != "M") == 0

    # recompiles: an instant at the start of each recompile's span, with its reason
    recompiles = rows(db, "SELECT compile_row, reason, failures FROM recompiles"
                          " ORDER BY compile_row")
    got = of(trace, "recompile")
    assert [(ev["args"]["compile_row"], ev["args"]["reason"], ev["args"]["failures"])
            for ev in got] == recompiles
    assert all("(observed " in r[1] for r in recompiles)
    for ev in got:
        span = span_of[ev["args"]["compile_row"]]
        assert ev["ph"] == "i" and ev["s"] == "t"
        assert (ev["tid"], ev["ts"]) == (span["tid"], span["ts"])
        assert ev["name"] == "recompile " + span["name"]
        assert ev["args"]["reason"] == span["args"]["reason"]

    # graph breaks: on their compile's track, never before its span
    breaks = rows(db, "SELECT compile_row, kind, reason, filename || ':' || lineno, at"
                      " FROM graph_breaks ORDER BY break_id")
    got = of(trace, "graph_break")
    assert [(ev["args"]["compile_row"], ev["args"]["kind"], ev["args"]["reason"],
             ev["args"]["site"]) for ev in got] == [b[:4] for b in breaks]
    assert any(b[1] == "call" and "print" in b[2] for b in breaks), breaks
    for ev, (row, kind, reason, site, at) in zip(got, breaks):
        span = span_of[row]
        assert ev["ph"] == "i" and ev["s"] == "t" and ev["tid"] == span["tid"]
        assert ev["name"] == f"graph break: {reason}"
        assert ev["ts"] == max(us(at), span["ts"])

    # the cache-limit hit, on its function's track
    ((code_id, name, frame_id, reason, at),) = rows(db, """
        SELECT cl.code_id, co.name, cl.frame_id, cl.reason, cl.at
          FROM cache_limits cl JOIN code_objects co USING (run_id, code_id)""")
    ((ev,),) = [of(trace, "cache_limit")]
    assert name == "limited" and ev["name"] == "cache limit: limited"
    assert (ev["ph"], ev["s"], ev["ts"]) == ("i", "t", us(at))
    assert threads[(pid, ev["tid"])] == label[code_id]
    assert (ev["args"]["frame_id"], ev["args"]["reason"]) == (frame_id, reason)


def test_dash_writes_the_trace_to_stdout(recorded, tmp_path):
    p = export(recorded, "-")
    assert p.returncode == 0 and p.stderr == "", p.stderr
    assert json.loads(p.stdout) == exported(recorded, tmp_path)


def downgrade(src, dst, version):
    """A copy as schema `version` wrote it: the tables export reads are v2's;
    v3 added views, v4 the table recompile_diffs (and columns export does not
    read), v5 the compile phases."""
    copy_db(src, dst)
    con = sqlite3.connect(dst)
    con.execute("DROP TABLE IF EXISTS recompile_diffs")
    for col in COMPILE_PHASES + ("events_ns", "attempts", "hatches"):
        con.execute(f"ALTER TABLE compiles DROP COLUMN {col}")
    if version < 3:
        for view in ("run_summary", "break_sites", "cache_limit_hits"):
            con.execute(f"DROP VIEW IF EXISTS {view}")
    con.execute(f"PRAGMA user_version = {version}")
    con.commit()
    con.close()
    return dst


@pytest.mark.parametrize("version", [2, 3])
def test_older_schema_versions_give_the_same_trace(recorded, tmp_path, version):
    want = exported(recorded, tmp_path, "new.json")
    old = downgrade(recorded, tmp_path / f"v{version}.db", version)
    with open(old, "rb") as fh:
        before = fh.read()
    got = exported(old, tmp_path, "old.json")
    # the same, but for what v5 added: the compile phases
    for ev in want["traceEvents"]:
        for key in COMPILE_PHASES + ("events_ns", "attempts"):
            ev.get("args", {}).pop(key, None)
    # and what v6 added: the timed calls' run spans, on tracks of their own
    assert got["traceEvents"] == [
        ev for ev in want["traceEvents"] if ev.get("cat") not in ("compile_phase", "run")
        and not ev["args"].get("name", "").endswith(" run time (timed calls)")]
    assert got["otherData"]["schema_version"] == str(version)
    with open(old, "rb") as fh:
        assert fh.read() == before, "the export wrote the file"


def test_a_recording_without_compiles_is_its_process_alone(tmp_path):
    db = tmp_path / "empty.db"
    p = run("-c", f"import dynscope; dynscope.record({str(db)!r}); dynscope.stop_recording()")
    assert p.returncode == 0, p.stderr
    trace = exported(db, tmp_path)
    ((pid, started),) = rows(db, "SELECT pid, started_at FROM runs")
    assert [(ev["name"], ev["pid"]) for ev in trace["traceEvents"]] == [("process_name", pid)]
    assert trace["otherData"]["origin_ns"] == str(started)


def test_overlapping_compiles_and_reused_pids_stay_apart(recorded, tmp_path):
    """Two threads compiling one function overlap: the later compile gets a
    track of its own.  A second run with the first one's pid (a container
    started twice) stays a process of its own."""
    db = copy_db(recorded, tmp_path / "edited.db")
    con = sqlite3.connect(db)
    first, second = con.execute(
        "SELECT compile_row FROM compiles WHERE code_id = (SELECT code_id FROM code_objects"
        " WHERE name = 'scale') ORDER BY compile_row LIMIT 2").fetchall()
    con.execute("UPDATE compiles SET started_at = (SELECT started_at + 1 FROM compiles"
                " WHERE compile_row = ?) WHERE compile_row = ?", (first[0], second[0]))
    con.execute("INSERT INTO runs (run_id, pid, argv, python, started_at)"
                " SELECT 2, pid, '[\"again.py\"]', python, started_at FROM runs WHERE run_id = 1")
    con.execute("INSERT INTO code_objects SELECT 2, code_id, filename, name, firstlineno"
                " FROM code_objects WHERE run_id = 1")
    con.execute("INSERT INTO compiles (run_id, code_id, epoch, compile_id, frame_id,"
                " frame_compile_id, resume_offset, started_at, duration_ns, outcome)"
                " SELECT 2, code_id, epoch, compile_id, frame_id, frame_compile_id,"
                " resume_offset, started_at, duration_ns, outcome FROM compiles")
    con.commit()
    (pid,), = con.execute("SELECT pid FROM runs WHERE run_id = 1")
    n_compiles = con.execute("SELECT count(*) FROM compiles").fetchone()[0]
    con.close()

    trace = exported(db, tmp_path)   # check_format: no overlap on any track
    assert len(of(trace, "compile")) == n_compiles
    moved = pid + (1 << 22)
    procs = names(trace, "process_name")
    assert procs == {(pid, pid): procs[(pid, pid)],
                     (moved, moved): f"dynscope run 2: again.py (pid {pid})"}
    threads = names(trace, "thread_name")
    spans = {ev["args"]["compile_row"]: ev for ev in of(trace, "compile") if ev["pid"] == pid}
    track = threads[(pid, spans[first[0]]["tid"])]
    assert track.startswith("scale (")
    lane = spans[second[0]]["tid"]
    assert threads[(pid, lane)] == track + " [overlapping compiles 1]"
    # run 2 has the same code objects: tracks of its own, named alike
    assert sorted(n for (p, _), n in threads.items() if p == moved) == \
        sorted(n for (p, _), n in threads.items() if p == pid and not n.endswith(" (timed calls)"))
    # the recompile's instant follows its span onto the extra track
    assert [ev["tid"] for ev in of(trace, "recompile")
            if ev["args"]["compile_row"] == second[0]] == [lane]


def test_a_break_stamped_before_its_compile_is_shown_at_its_start(recorded, tmp_path):
    """started_at and at are CLOCK_REALTIME, which can step back (NTP)."""
    db = copy_db(recorded, tmp_path / "stepped.db")
    con = sqlite3.connect(db)
    ((row, started),) = con.execute("SELECT c.compile_row, c.started_at FROM graph_breaks b"
                                    " JOIN compiles c USING (compile_row)")
    con.execute("UPDATE graph_breaks SET at = ? WHERE compile_row = ?", (started - 5000, row))
    con.commit()
    con.close()
    trace = exported(db, tmp_path)
    (span,) = [ev for ev in of(trace, "compile") if ev["args"]["compile_row"] == row]
    (brk,) = of(trace, "graph_break")
    assert (brk["tid"], brk["ts"]) == (span["tid"], span["ts"])
    evs = trace["traceEvents"]
    assert evs.index(span) < evs.index(brk)   # same ts: the span first, so the instant nests


def make_corrupt(src, dst):
    """A dynscope file whose header is intact and whose pages are not."""
    copy_db(src, dst)
    with open(dst, "r+b") as fh:
        fh.seek(4096)
        size = os.path.getsize(dst) - 4096
        fh.write(b"\xa5" * size)
    return dst


def bad_inputs(recorded, tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("not a database\n" * 10)
    foreign = tmp_path / "foreign.db"
    con = sqlite3.connect(foreign)
    con.execute("CREATE TABLE notes (body TEXT)")
    con.commit()
    con.close()
    v1 = downgrade(recorded, tmp_path / "v1.db", 1)
    newer = copy_db(recorded, tmp_path / "v99.db")
    con = sqlite3.connect(newer)
    con.execute("PRAGMA user_version = 99")
    con.commit()
    con.close()
    return {"missing": (tmp_path / "nope.db", "no such database"),
            "text": (text, "not an SQLite database"),
            "foreign": (foreign, "not a dynscope database"),
            "directory": (tmp_path, "is a directory"),
            "corrupt": (make_corrupt(recorded, tmp_path / "corrupt.db"), "malformed"),
            "v1": (v1, "schema v1 is not readable"),
            "v99": (newer, "schema v99 is not readable")}


def assert_one_line_error(p, needle):
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert p.stdout == "" and "Traceback" not in p.stderr, p.stderr
    assert p.stderr.startswith("dynscope export: ") and p.stderr.count("\n") == 1, p.stderr
    assert needle in p.stderr, p.stderr


def test_bad_input_is_one_line_and_status_2(recorded, tmp_path):
    out = tmp_path / "out" / "never.json"
    out.parent.mkdir()
    for case, (db, needle) in bad_inputs(recorded, tmp_path).items():
        p = export(db, out)
        assert_one_line_error(p, needle)
        assert not out.exists(), case


def test_unwritable_output_is_one_line_and_status_2(recorded, tmp_path):
    p = export(recorded, tmp_path / "no" / "such" / "dir.json")
    assert_one_line_error(p, "cannot write")
    p = export(recorded, tmp_path)
    assert_one_line_error(p, "Is a directory")
    copy = copy_db(recorded, tmp_path / "copy.db")
    with open(copy, "rb") as fh:
        before = fh.read()
    p = export(copy, copy)
    assert_one_line_error(p, "is the database itself")
    with open(copy, "rb") as fh:
        assert fh.read() == before
    p = run("-m", "dynscope", "export", str(recorded))
    assert p.returncode == 2 and "--chrome-trace" in p.stderr and "Traceback" not in p.stderr


def test_the_demo_exports_to_a_valid_trace_with_its_recompiles_and_breaks(tmp_path):
    # the demo's own recording (make demo): every compile a span, every
    # recompile reason and break reason the database has is in the trace
    db = tmp_path / "demo.db"
    p = run("-m", "dynscope", "run", "--db", str(db), os.path.join(ROOT, "scripts", "demo_workload.py"),
            cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    trace = exported(db, tmp_path)
    assert len(of(trace, "compile")) == rows(db, "SELECT count(*) FROM compiles")[0][0] > 20
    reasons = {ev["args"]["reason"] for ev in of(trace, "recompile")}
    assert reasons == {r for (r,) in rows(db, "SELECT reason FROM recompiles")}
    assert any("is now dynamic" in r for r in reasons)
    assert len(of(trace, "graph_break")) == rows(db, "SELECT count(*) FROM graph_breaks")[0][0] > 0
    [limit] = of(trace, "cache_limit")
    assert limit["name"].startswith("smooth") or "smooth" in json.dumps(limit)
    tracks = set(names(trace, "thread_name").values())
    assert {t.split(" ")[0] for t in tracks} >= {"forward", "loss", "smooth", "scale", "log_step"}


def test_the_trace_file_has_no_shared_write_and_no_symlink_is_followed(recorded, tmp_path):
    out = tmp_path / "trace.json"
    old_umask = os.umask(0)
    try:
        p = export(recorded, out)
        assert p.returncode == 0, p.stderr
        assert out.stat().st_mode & 0o777 == 0o644
    finally:
        os.umask(old_umask)
    target = tmp_path / "precious.txt"
    target.write_text("keep me")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    p = export(recorded, link)
    assert p.returncode == 2 and "link.json is a symbolic link, which is not followed" in p.stderr
    assert target.read_text() == "keep me"
