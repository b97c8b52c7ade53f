"""What if a source had been dynamic: which recompiles of a recording would
not have happened, read from the recorded guard failures without running
the program (issue 42; `python -m dynscope whatif FILE.db`, the report's
"What if" section).

Each recompile recorded its nearest older entry and every guard of it that
failed (recompile_diffs, schema v4).  When every one of those guards is on
one source -- a tensor's shape, or an int -- and the guard would hold with
that source dynamic, the nearest entry would have served the call: the
recompile goes.  (Another older entry might have served it too; the
nearest one fails fewest guards, so the count is a floor.)  Sizes 0 and 1
stay specialized as the engine keeps them, so a value there still
compiles.  A source some recompile found the code needs as a number ("stays
static": a loop count, a branch) cannot become dynamic: the answer says so,
and what would lift the frame's cache-limit hit instead.
"""
from __future__ import annotations

import json
import os
import re
import sqlite3

_SHAPE = re.compile(r"^(?P<src>.+)\.shape == \((?P<was>[^()]*)\)$")
_VALUE = re.compile(r"^(?P<src>.+) == (?P<was>-?\d+)$")
_STATIC = re.compile(r"(?P<src>\S+?)(?:\.size\(\d+\))? stays static \(")
_NOW_DYNAMIC = re.compile(r"(?P<src>\S+?)(?:\.size\(\d+\))? is now dynamic")


def _sizes(text: str):
    try:
        return tuple(int(p) for p in text.replace(" ", "").strip("()").split(",") if p)
    except ValueError:
        return None


def _source(kind: str, expr: str, observed: str):
    """(source, "size" or "int", expected, observed) of a failing guard a
    dynamic source would relax, else None."""
    m = _SHAPE.match(expr)
    if kind == "TENSOR_MATCH" and m:
        was, now = _sizes(m["was"]), _sizes(observed or "")
        if was is not None and now is not None and len(was) == len(now):
            return m["src"], "size", was, now
        return None
    m = _VALUE.match(expr)
    if kind == "EQUALS_MATCH" and m and re.fullmatch(r"-?\d+", (observed or "").strip()):
        return m["src"], "int", int(m["was"]), int(observed)
    return None


def _canon(kind: str, value):
    """A value as a dynamic source keeps it: sizes 0 and 1 stay, the rest one."""
    if kind == "size":
        return tuple(v if v in (0, 1) else "s" for v in value)
    return value if value in (0, 1) else "n"


def _call(src: str, kind: str, dims, automatic: bool, resumed: bool) -> str:
    """The exact call that makes src dynamic.  automatic: the frame ran with
    automatic dynamic (a recompile made a source dynamic), where marking a
    tensor before its first call is enough; otherwise (dynamic=False) the
    optimize() call itself has to change.  resumed: the frame resumes after
    a graph break, so its locals are the function's intermediates."""
    m = re.fullmatch(r"L\['(\w+)'\]", src)
    if kind == "size" and m and automatic and resumed:
        return (f"dynscope.mark_dynamic on the input {m.group(1)} is made from, before the first"
                f" call: this frame resumes after a graph break")
    if kind == "size" and m and automatic:
        return f"dynscope.mark_dynamic({m.group(1)}, {dims[0] if dims else 0}) before the first call"
    return "optimize(..., dynamic=True)"


def analyse(con: sqlite3.Connection) -> list:
    """The answers for a recording (schema v4 or newer): one dict per frame
    that recompiled -- run_id, function, where, frame, resume_offset,
    compiles, recompiles, recompile_ns (what its recompiles took),
    extra_guard_ns (the guard time of the entries they added), cache_limit
    (its last failing guard or None) and, from schema v6, limit_calls and
    uncaptured_ns (the calls it then ran without capture, and their time),
    most_failed ([source, count]) and suggestions: {source, kind,
    recompiles_on_it, can_be_dynamic, removes, compiles_after, call,
    values_seen, text}, most removed first."""
    from dynscope import places
    places.install(con)                  # readable_path(), function_name() (a connection of the caller's)
    frames = {}
    for run, code, name, where, frame, offset, n, recompile_ns in con.execute(
            "SELECT c.run_id, c.code_id, function_name(co.run_id, co.code_id, co.name),"
            " readable_path(co.filename) || ':' || co.firstlineno, c.frame_id,"
            " max(c.resume_offset), count(*),"
            " sum(CASE WHEN c.frame_compile_id > 0 THEN coalesce(c.duration_ns, 0) ELSE 0 END)"
            " FROM compiles c JOIN code_objects co"
            " USING (run_id, code_id) WHERE c.outcome = 'ok' GROUP BY c.run_id, c.code_id, c.frame_id"):
        frames[(run, code, frame)] = {"run_id": run, "function": name, "where": where,
                                      "frame": frame, "resume_offset": offset, "compiles": n,
                                      "recompile_ns": recompile_ns or 0, "extra_guard_ns": 0}
    # the guard time of the entries a recompile added: every entry of the frame
    # but its first (each call walks them; the first one it would check anyway)
    for run, code, frame, extra in con.execute(
            "SELECT e.run_id, e.code_id, e.frame_id, sum(coalesce(e.guard_ns, 0))"
            " FROM cache_entries e JOIN compiles c ON c.compile_row = e.compile_row"
            " WHERE c.frame_compile_id > 0 GROUP BY e.run_id, e.code_id, e.frame_id"):
        if (run, code, frame) in frames:
            frames[(run, code, frame)]["extra_guard_ns"] = extra or 0
    reasons = [((run, code, frame), reason) for run, code, frame, reason in con.execute(
        "SELECT run_id, code_id, frame_id, reason FROM compiles"
        " WHERE frame_compile_id > 0 AND outcome = 'ok' ORDER BY compile_row")]
    diffs = {}
    for run, code, row, cid, kind, expr, observed in con.execute(
            "SELECT d.run_id, d.code_id, d.compile_row, d.compile_id, d.kind, d.expr, d.observed"
            " FROM recompile_diffs d WHERE d.idx IS NOT NULL ORDER BY d.compile_row, d.idx"):
        key = (run, code, int(str(cid).split("/")[0]))
        diffs.setdefault((key, row), []).append((kind, expr, observed))
    limits = {(run, code, frame): reason for run, code, frame, reason in con.execute(
        "SELECT run_id, code_id, frame_id, reason FROM cache_limits")}
    if con.execute("PRAGMA user_version").fetchone()[0] >= 6:
        # what the limit cost since: the calls run without capture, timed 1 in 64
        for run, code, frame, calls, ns in con.execute(
                "SELECT run_id, code_id, frame_id, calls, uncaptured_ns FROM cache_limits"):
            if (run, code, frame) in frames and calls:
                frames[(run, code, frame)].update(limit_calls=calls, uncaptured_ns=ns)
    return answer(frames, reasons, [(k, g) for (k, _), g in diffs.items()], limits)


def from_explain(out) -> list:
    """The answers for one dynscope.explain output (its recompiles, entries
    and cache limits): the same dicts, run_id None, where ''."""
    frames, reasons, diffs, limits = {}, [], [], {}
    for e in out.entries:                # e.code: (qualname, filename, firstlineno)
        key = (e.code, int(e.compile_id.split("/")[0]))
        name, filename, line = e.code
        f = frames.setdefault(key, {"run_id": None, "function": name,
                                    "where": f"{os.path.basename(filename)}:{line}",
                                    "frame": key[1], "resume_offset": e.resume_offset,
                                    "compiles": 0})
        f["compiles"] += 1
    by_name = {}
    for key, f in frames.items():
        by_name.setdefault(f["function"], []).append(key)
    for r in out.recompiles:
        keys = [k for k in by_name.get(r.function, []) if k[1] == int(r.compile_id.split("/")[0])]
        if not keys:
            continue
        reasons.append((keys[0], r.reason))
        diffs.append((keys[0], [(g.get("kind"), g.get("expr"), g.get("observed")) for g in r.guards]))
    for name, reason in out.cache_limits:
        for key in by_name.get(name, []):
            limits.setdefault(key, reason)
    return answer(frames, reasons, diffs, limits)


def answer(frames: dict, reasons: list, diffs: list, limits: dict) -> list:
    """The answers (analyse's dicts) from: frames {key: {run_id, function,
    where, frame, resume_offset, compiles}}, the recompiles' reasons [(key,
    reason)], each recompile's nearest-entry failing guards [(key, [(kind,
    expr, observed), ...])] and the frames' cache-limit reasons {key:
    reason}."""
    state = {key: {"recompiles": 0, "fail": {}, "static": set(), "by_src": {}, "automatic": False}
             for key in frames}
    for key, reason in reasons:
        st = state.get(key)
        if st is None:
            continue
        st["recompiles"] += 1
        for part in (reason or "").split("; ")[1:]:
            m = _STATIC.match(part)
            if m:
                st["static"].add(m["src"])
            if _NOW_DYNAMIC.match(part):
                st["automatic"] = True
    for key, guards in diffs:
        st = state.get(key)
        if st is None:
            continue
        parsed = [_source(k, e, o) for k, e, o in guards]
        for (k, e, o), p in zip(guards, parsed):
            src = p[0] if p else str(e).split(" ")[0]
            st["fail"][src] = st["fail"].get(src, 0) + 1
        srcs = {p[0] for p in parsed if p is not None}
        if not parsed or None in parsed or len(srcs) != 1:
            continue                 # other guards failed too: this source alone would not do
        src, kind = parsed[0][0], parsed[0][1]
        info = st["by_src"].setdefault(src, {"kind": kind, "recompiles": 0, "values": set(),
                                             "dims": set()})
        info["recompiles"] += 1
        for _, _, was, now in parsed:
            info["values"] |= {was, now}
            if kind == "size":
                info["dims"] |= {d for d, (a, b) in enumerate(zip(was, now)) if a != b}
    out = []
    for key, f in frames.items():
        st = state[key]
        f = dict(f, recompiles=st["recompiles"], cache_limit=limits.get(key))
        if f["recompiles"] == 0 and f["cache_limit"] is None:
            continue
        sugg = []
        for src, info in st["by_src"].items():
            dims = sorted(info["dims"])
            static = src in st["static"]
            kept = len({_canon(info["kind"], v) for v in info["values"]})
            removes = 0 if static else max(0, info["recompiles"] + 1 - kept)
            if not static and removes == 0:
                continue             # sizes 0 and 1 stay specialized: nothing to win
            s = {"source": src, "kind": info["kind"], "recompiles_on_it": info["recompiles"],
                 "can_be_dynamic": not static, "removes": removes,
                 "compiles_after": f["compiles"] - removes,
                 "call": None if static else _call(src, info["kind"], dims, st["automatic"],
                                                   (f["resume_offset"] or 0) > 0),
                 "values_seen": len(info["values"])}
            s["text"] = _text(f, s)
            sugg.append(s)
        sugg.sort(key=lambda s: (-s["removes"], -s["recompiles_on_it"], s["source"]))
        most = max(st["fail"].items(), key=lambda kv: (kv[1], kv[0]), default=None)
        out.append(f | {"most_failed": list(most) if most else None, "suggestions": sugg})
    out.sort(key=lambda f: (-f["recompiles"], f["run_id"] or 0, f["function"], f["frame"]))
    return out


def _text(f: dict, s: dict) -> str:
    fn = f["function"]
    if not s["can_be_dynamic"]:
        limit = ""
        if f["cache_limit"] is not None:
            limit = (f"; to lift its cache-limit hit, bucket {s['source']} to a few values, or"
                     f" raise dynscope.config.cache_size_limit to {s['values_seen'] + 1} or more"
                     f" (the values it saw)")
        return (f"{s['source']} cannot become dynamic: the code needs its value (a loop count,"
                f" a branch), so each of its {s['recompiles_on_it']} new values compiled {fn}"
                f" again{limit}")
    return (f"marking {s['source']} dynamic ({s['call']}) removes {s['removes']} of"
            f" {f['compiles']} compiles of {fn}")


def explain_lines(out) -> list:
    """explain's "What if a source were dynamic" lines for its output (none
    when no recompile is explained by one source)."""
    answers = [f for f in from_explain(out) if f["suggestions"]]
    if not answers:
        return []
    return ["", "What if a source were dynamic (from the guards that failed)"] + [
        f"  {f['function']} [frame {f['frame']}]: {s['text']}" for f in answers for s in f["suggestions"]]


def render(frames: list) -> str:
    """The analysis as text, a block per frame."""
    if not frames:
        return "no frame recompiled: nothing to remove"
    lines = []
    for f in frames:
        head = (f"{f['function']} ({f['where']}) frame {f['frame']}: {f['compiles']} compiles,"
                f" {f['recompiles']} recompiles")
        if f.get("recompile_ns") or f.get("extra_guard_ns"):
            head += (f" (they cost {f['recompile_ns'] / 1e6:.2f} ms compiling and"
                     f" {f['extra_guard_ns'] / 1e6:.3f} ms checking the extra entries' guards)")
        if f["cache_limit"]:
            head += f", reached the cache limit ({f['cache_limit']})"
            if f.get("limit_calls"):
                spent = (f", {f['uncaptured_ns'] / 1e6:.2f} ms" if f.get("uncaptured_ns")
                         else "")
                head += f"; since then {f['limit_calls']} calls ran without capture{spent}"
        lines.append(head)
        if f["most_failed"]:
            n = f["most_failed"][1]
            lines.append(f"  the guard that failed most is on {f['most_failed'][0]}"
                         f" ({'once' if n == 1 else f'{n} times'})")
        for s in f["suggestions"]:
            lines.append(f"  {s['text']}")
        if not f["suggestions"]:
            lines.append("  no dynamic source would remove a compile here (several guards failed,"
                         " or the values were 0 and 1, which stay specialized)")
    return "\n".join(lines)


def main(path: str, as_json: bool) -> int:
    from dynscope import merge
    con = merge.open_source(path)       # MergeError for what is not a readable recording
    try:
        if con.execute("PRAGMA user_version").fetchone()[0] < 4:
            raise merge.MergeError(f"{path}: schema before v4 records no nearest entries: "
                                   f"nothing to answer from")
        frames = analyse(con)
    finally:
        con.close()
    print(json.dumps(frames, indent=2, default=list) if as_json else render(frames))
    return 0
