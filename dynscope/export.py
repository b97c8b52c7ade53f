"""A dynscope database as a Chrome Trace Event Format file, for Perfetto
(ui.perfetto.dev) and chrome://tracing: `python -m dynscope export
--chrome-trace OUT.json FILE.db`.  What each event is: docs/tracing.md,
"Chrome trace / Perfetto export".

The output is one JSON object {"traceEvents": [...], "displayTimeUnit": "ms",
"otherData": {...}}.  Invariants:
- every event has name, ph (X, i or M), ts, pid, tid and args (an object);
  ts is in µs, >= 0, from otherData.origin_ns, the earliest timed row;
- pid is the run's runs.pid: one process per run (a pid an earlier run of
  the file used is moved up by PID_STRIDE, so two runs never merge);
- one track ("thread") per code object of a run, named by a thread_name
  event; the tracks' tids are 1, 2, ... over the whole file, never reused
  by another run: Perfetto finds a thread_name's thread by tid alone;
- the X events of a track nest or are disjoint (Perfetto drops slices that
  overlap otherwise): a compile that overlaps another of its code object
  (two threads compiled it) goes to an extra track of that code object;
- one X event per compiles row with a time; an instant of a compile is on
  its track and never before its span;
- a code object's run spans (schema v6 run_spans: the graph runs and eager
  steps of calls the engine timed) are on a track of their own beside it;
- otherData values are strings: ns since the epoch do not fit a JS number.
"""
from __future__ import annotations

import datetime
import json
import os
import shlex
import sqlite3
import sys

from dynscope import _C, outfile

# Above Linux's PID_MAX_LIMIT (2**22): a moved pid is no real process's.
PID_STRIDE = 1 << 22


class ExportError(Exception):
    """Input or output the export cannot use; the message is one line."""


def _text_argv(argv: str | None) -> str:
    try:
        return shlex.join(json.loads(argv))
    except (TypeError, ValueError):   # NULL, or not the JSON array of strings it should be
        return argv or "?"


def _iso(ns: int) -> str:
    secs, frac = divmod(ns, 10**9)
    when = datetime.datetime.fromtimestamp(secs, datetime.timezone.utc)
    return f"{when:%Y-%m-%dT%H:%M:%S}.{frac:09d}Z"


def chrome_trace(con: sqlite3.Connection, source: str) -> dict:
    """The trace of the database open (read-only) on `con`.  Raises
    ExportError for a schema this build does not read, sqlite3.Error for a
    file SQLite cannot read."""
    version = con.execute("PRAGMA user_version").fetchone()[0]
    try:   # the engine's version gate, and the views a v2 file lacks (as report)
        con.executescript(_C.store_temp_views_sql(version))
    except ValueError as exc:
        raise ExportError(f"{source}: {exc}") from None

    con.execute("BEGIN")   # one snapshot: a live run goes on writing
    try:
        return _trace(con, source, version)
    finally:
        con.rollback()


# The track of a run's annotations: its code_id in the track key (no code
# object has it).
ANNOTATIONS = -1


# The lane of a code object's run spans: a track beside its compiles' (a
# timed call's spans and a compile are stamped by two clocks, and a slice
# that overlaps another on one track is dropped by Perfetto).
RUN_LANE = -1


def _run_spans(spans, pid_of, code, timed) -> int:
    """The timed calls' graph runs and eager steps (run_spans, schema v6)
    as X slices on each code object's run track (nested or disjoint once
    in µs: _nest_runs); returns how many have no time."""
    untimed = 0
    for run_id, code_id, epoch, compile_id, kind, at, ns in spans:
        if at is None or run_id not in pid_of:
            untimed += 1
            continue
        _, filename, line = code(run_id, code_id)
        what = "graph" if kind == "graph" else "eager step and resume after"
        timed.append({"name": f"{what} {compile_id}", "cat": "run", "ph": "X", "ts": at,
                      "_end": at + (ns or 0), "pid": pid_of[run_id],
                      "tid": (run_id, code_id, RUN_LANE),
                      "args": {"code": f"{filename}:{line}", "code_id": code_id, "epoch": epoch,
                               "compile_id": compile_id, "kind": kind, "ns": ns}})
    return untimed


def _nest_runs(timed, origin) -> None:
    """Set the run slices' µs times, each nested in or after the one before
    it on its track: one call's spans follow each other end to start, and
    two stamped by the engine's two conversions of its clock, or rounded to
    µs, may overlap by a hair, which Perfetto would drop a slice for."""
    open_ends: dict = {}               # track -> ends of the slices still open, innermost last
    for ev in timed:                   # in ts order
        if ev.get("cat") != "run":
            continue
        end = (ev.pop("_end") - origin) / 1000
        ends = open_ends.setdefault(ev["tid"], [])
        while ends and ends[-1] <= ev["ts"]:
            ends.pop()
        if ends and end > ends[-1]:    # past the open one's end: starts after it
            ev["ts"] = ends.pop()
            while ends and ends[-1] <= ev["ts"]:
                ends.pop()
        end = max(end, ev["ts"])
        if ends:
            end = min(end, ends[-1])
        ev["dur"] = end - ev["ts"]
        ends.append(ev["ts"] + ev["dur"])


def _annotations(marks, pid_of, timed) -> int:
    """The program's marks (schema v5's annotations) into timed: a mark an
    instant, a span ("begin" to the next "end" of its name) a slice, on a
    track of the run's own.  Returns the marks without a time (or without
    their run's process)."""
    untimed = 0
    open_spans: dict = {}
    for run_id, name, phase, fields, at in marks:
        if at is None or run_id not in pid_of:
            untimed += 1
            continue
        try:
            args = json.loads(fields) if fields else {}
        except ValueError:
            args = {"fields": fields}
        track = (run_id, ANNOTATIONS, 0)
        if phase == "begin":
            open_spans.setdefault((run_id, name), []).append((at, args))
        elif phase == "end" and open_spans.get((run_id, name)):
            start, first = open_spans[(run_id, name)].pop()
            timed.append({"name": name, "cat": "annotation", "ph": "X", "ts": start,
                          "dur": max(0, at - start) / 1000, "pid": pid_of[run_id], "tid": track,
                          "args": dict(first, **{k: v for k, v in args.items() if k not in first})})
        else:                        # a mark, or an end whose begin was not recorded
            timed.append({"name": name, "cat": "annotation", "ph": "i", "ts": at, "s": "t",
                          "pid": pid_of[run_id], "tid": track, "args": dict(args, phase=phase)})
    for (run_id, name), spans in open_spans.items():   # begun, never ended: instants
        for start, args in spans:
            timed.append({"name": name, "cat": "annotation", "ph": "i", "ts": start, "s": "t",
                          "pid": pid_of[run_id], "tid": (run_id, ANNOTATIONS, 0),
                          "args": dict(args, phase="begin (never ended)")})
    return untimed


# A compile's phases (compiles.*_ns, schema v5), in the order they add up to
# its duration.
PHASES = ("trace_ns", "guards_ns", "graph_ns", "backend_ns", "plan_ns")


def _trace(con: sqlite3.Connection, source: str, version: int) -> dict:
    runs = con.execute(
        "SELECT i.run_id, r.pid, r.argv, r.started_at"
        " FROM (SELECT run_id FROM runs UNION SELECT run_id FROM compiles"
        "       UNION SELECT run_id FROM graph_breaks UNION SELECT run_id FROM cache_limits) AS i"
        " LEFT JOIN runs AS r USING (run_id) ORDER BY i.run_id").fetchall()
    codes = {(r[0], r[1]): r[2:] for r in con.execute(
        "SELECT run_id, code_id, name, filename, firstlineno FROM code_objects")}
    # A start lost with its compile_start event is recovered from the end.
    phases = (", " + ", ".join(PHASES + ("events_ns", "attempts")) if version >= 5   # schema v5's
              else ", NULL" * (len(PHASES) + 2))
    compiles = con.execute(
        "SELECT compile_row, run_id, code_id, epoch, compile_id, frame_id, resume_offset,"
        "       reason, coalesce(started_at, ended_at - coalesce(duration_ns, 0)) AS start,"
        f"       duration_ns, outcome, graphs, nodes, guards{phases}"
        " FROM compiles ORDER BY start, compile_row").fetchall()
    recompiles = {r[0]: r[1:] for r in con.execute(
        "SELECT compile_row, reason, failures FROM recompiles")}
    breaks = con.execute(
        "SELECT run_id, code_id, epoch, compile_id, compile_row, kind, reason, filename,"
        "       lineno, offset, user_stack, at FROM graph_breaks ORDER BY break_id").fetchall()
    limits = con.execute(
        "SELECT run_id, code_id, epoch, frame_id, resume_offset, reason, at"
        " FROM cache_limits ORDER BY at").fetchall()
    marks = con.execute(               # schema v5: the program's own (dynscope.annotate)
        "SELECT run_id, name, phase, fields, at FROM annotations ORDER BY annotation_id"
    ).fetchall() if version >= 5 else []
    spans = con.execute(               # schema v6: timed calls' graph runs and eager steps
        "SELECT run_id, code_id, epoch, compile_id, kind, at, duration_ns FROM run_spans"
        " ORDER BY run_id, code_id, at, duration_ns DESC").fetchall() if version >= 6 else []

    pid_of: dict[int, int] = {}
    meta = []
    for run_id, pid, argv, _ in runs:
        real = pid if pid is not None else 0
        moved = real
        while moved in pid_of.values():
            moved += PID_STRIDE
        pid_of[run_id] = moved
        name = f"dynscope run {run_id}: {_text_argv(argv)}" if pid is not None \
            else f"dynscope run {run_id} (no runs row)"
        if moved != real:
            name += f" (pid {real})"
        # tid = pid: the main thread Perfetto makes anyway, not one more track
        meta.append({"name": "process_name", "ph": "M", "ts": 0, "pid": moved, "tid": moved,
                     "args": {"name": name}})

    def code(run_id, code_id):
        return codes.get((run_id, code_id), (f"code {code_id}", "?", 0))

    def where(run_id, code_id):
        _, filename, line = code(run_id, code_id)
        return f"{filename}:{line}"

    timed = []        # until the end: ts in ns since the epoch, tid the track's key
    untimed = 0
    lane_ends: dict[tuple[int, int], list[int]] = {}
    span_of = {}      # compile_row -> (track, start ns)
    for (row, run_id, code_id, epoch, compile_id, frame_id, resume_offset, reason, start,
         duration, outcome, graphs, nodes, guards, *times) in compiles:
        if start is None:
            untimed += 1
            continue
        end = start + (duration or 0)
        ends = lane_ends.setdefault((run_id, code_id), [])
        lane = next((i for i, e in enumerate(ends) if e <= start), len(ends))
        if lane == len(ends):
            ends.append(end)
        else:
            ends[lane] = end
        t = (run_id, code_id, lane)
        span_of[row] = (t, start)
        name = code(run_id, code_id)[0]
        args = {"code": where(run_id, code_id), "code_id": code_id, "epoch": epoch,
                "compile_row": row, "compile_id": compile_id, "frame_id": frame_id,
                "resume_offset": resume_offset, "outcome": outcome, "graphs": graphs,
                "nodes": nodes, "guards": guards}
        if reason is not None:
            args["reason"] = reason
        # duration_ns is NULL until compile_end: a 0-length span, outcome null
        if times[-1] is not None:
            args.update(zip(PHASES + ("events_ns", "attempts"), times))
        span = {"name": f"{name} {compile_id}", "cat": "compile", "ph": "X", "ts": start,
                "dur": (duration or 0) / 1000, "pid": pid_of[run_id], "tid": t, "args": args}
        timed.append(span)
        # its phases, nested: end to end in this order (the engine interleaves
        # tracing and guard building; the spans give each one's share); each
        # "dur" is set once times are in µs, so that they tile the span
        at = start
        for phase, ns in zip(PHASES, times) if times[-1] is not None else ():
            timed.append({"name": phase[:-3], "cat": "compile_phase", "ph": "X", "ts": at,
                          "_end": at + (ns or 0), "_span": span, "pid": pid_of[run_id], "tid": t,
                          "args": {"compile_row": row, "compile_id": compile_id, "ns": ns}})
            at += ns or 0
        if row in recompiles:
            # at the span's start: the row keeps no time of the recompile event
            why, failures = recompiles[row]
            timed.append({"name": f"recompile {name} {compile_id}", "cat": "recompile",
                          "ph": "i", "ts": start, "s": "t", "pid": pid_of[run_id], "tid": t,
                          "args": {"code": where(run_id, code_id), "epoch": epoch,
                                   "compile_row": row, "compile_id": compile_id,
                                   "reason": why, "failures": failures}})

    for (run_id, code_id, epoch, compile_id, row, kind, reason, filename, lineno, offset,
         stack, at) in breaks:
        t, start = span_of.get(row, ((run_id, code_id, 0), None))
        # recorded when the compile ends; never shown before the span it ends
        ns = max((x for x in (at, start) if x is not None), default=None)
        if ns is None:
            untimed += 1
            continue
        try:
            stack = json.loads(stack) if stack is not None else None
        except ValueError:
            pass   # the recorder stores NULL for non-JSON; an edited file's text stays text
        timed.append({"name": f"graph break: {reason or kind}", "cat": "graph_break",
                      "ph": "i", "ts": ns, "s": "t", "pid": pid_of[run_id], "tid": t,
                      "args": {"kind": kind, "reason": reason,
                               "site": f"{filename}:{lineno}", "offset": offset,
                               "code": where(run_id, code_id), "epoch": epoch,
                               "compile_id": compile_id, "compile_row": row,
                               "user_stack": stack}})

    for run_id, code_id, epoch, frame_id, resume_offset, reason, at in limits:
        if at is None:
            untimed += 1
            continue
        timed.append({"name": f"cache limit: {code(run_id, code_id)[0]}",
                      "cat": "cache_limit", "ph": "i", "ts": at, "s": "t", "pid": pid_of[run_id],
                      "tid": (run_id, code_id, 0),
                      "args": {"code": where(run_id, code_id), "epoch": epoch,
                               "frame_id": frame_id, "resume_offset": resume_offset,
                               "reason": reason}})

    untimed += _annotations(marks, pid_of, timed)
    untimed += _run_spans(spans, pid_of, code, timed)

    # the run tracks last: the others keep the tids a file without them gives
    tid_of = {track: n for n, track in enumerate(
        sorted({ev["tid"] for ev in timed}, key=lambda k: (k[2] == RUN_LANE, k)), 1)}
    for (run_id, code_id, lane), t in tid_of.items():
        if code_id == ANNOTATIONS:
            label = "the program's marks (dynscope.annotate)"
        else:
            name, filename, line = code(run_id, code_id)
            label = f"{name} ({os.path.basename(filename)}:{line})"
        if lane == RUN_LANE:
            label += " run time (timed calls)"
        elif lane:
            label += f" [overlapping compiles {lane}]"
        meta.append({"name": "thread_name", "ph": "M", "ts": 0, "pid": pid_of[run_id],
                     "tid": t, "args": {"name": label}})

    starts = [ev["ts"] for ev in timed] or [r[3] for r in runs if r[3] is not None]
    other = {"source": os.path.abspath(source), "schema_version": str(version),
             "generator": "python -m dynscope export --chrome-trace",
             "clock": "CLOCK_REALTIME (docs/sql.md, Conventions); ts = (t - origin_ns) / 1000",
             "rows_without_time": str(untimed)}
    origin = min(starts, default=0)
    if starts:   # else the file has no time at all, and no timed event
        other["origin_ns"] = str(origin)
        other["origin_utc"] = _iso(origin)
    # stable: a span stays before the instants at its start, so they nest in it
    timed.sort(key=lambda ev: ev["ts"])
    for ev in timed:
        ev["ts"] = (ev["ts"] - origin) / 1000
        ev["tid"] = tid_of[ev["tid"]]
    _nest_runs(timed, origin)
    for ev in timed:   # a phase ends where the next begins, never past its compile's span
        if "_end" in ev:
            span = ev.pop("_span")
            end = min((ev.pop("_end") - origin) / 1000, span["ts"] + span["dur"])
            ev["dur"] = max(0.0, end - ev["ts"])
    events = meta + timed
    return {"traceEvents": events, "displayTimeUnit": "ms", "otherData": other}


def dumps(trace: dict) -> str:
    """The trace as JSON text, one event per line (greppable, diffable)."""
    events = ",\n".join(json.dumps(ev) for ev in trace["traceEvents"])
    return ('{"traceEvents": [\n' + events + "\n],\n"
            f'"displayTimeUnit": {json.dumps(trace["displayTimeUnit"])},\n'
            f'"otherData": {json.dumps(trace["otherData"])}}}\n')


def write_chrome_trace(con: sqlite3.Connection, source: str, out: str) -> dict:
    """Export the database on `con` to the file `out` (`-`: stdout); returns
    the trace.  Raises ExportError with a one-line message on bad input or
    output."""
    if out != "-" and os.path.exists(out) and os.path.samefile(out, source):
        raise ExportError(f"{out} is the database itself")
    try:
        trace = chrome_trace(con, source)
    except sqlite3.Error as exc:
        raise ExportError(f"{source}: {exc}") from None
    text = dumps(trace)   # all of it before OUT is touched: a bad file leaves OUT alone
    try:
        if out == "-":
            sys.stdout.write(text)
            sys.stdout.flush()
        else:
            outfile.write_text(out, text)   # no group/world write, never through a symlink
    except OSError as exc:
        raise ExportError(f"cannot write {out}: {exc.strerror or exc}") from None
    return trace
