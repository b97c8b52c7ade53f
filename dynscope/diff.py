"""What changed between two recordings: `python -m dynscope diff A.db B.db`
(docs/sql.md, "Comparing two runs").  For CI gates: the exit status is 1
when B regresses against A.

A function is the same in both when its qualified name, file and first line
are (code ids are per process).  Per function: compiles, recompiles, graph
breaks and their reasons, graphs, ops in them, capture time, cache-limit
hits.  Invariants:
- both files are opened read-only (several runs in one file add up);
- B regresses when some function has more recompiles, more graph breaks,
  more graphs or more cache-limit hits in B than in A, or a break reason
  (kind, reason, site) appears in B that A has not; every regression is
  named in the output;
- capture time and op counts are reported, never judged (times are noisy,
  and more ops in one graph is often the aim).
"""
from __future__ import annotations

import json
import os


from dynscope.merge import open_source

# Per function, over every run of a file.  Ops: the nodes of its graphs.
FUNCTIONS = """
SELECT co.name, co.filename, co.firstlineno,
  count(DISTINCT c.compile_row) AS compiles,
  count(DISTINCT CASE WHEN c.frame_compile_id > 0 THEN c.compile_row END) AS recompiles,
  coalesce(sum(c.graphs), 0) AS graphs,
  coalesce(sum(c.nodes), 0) AS ops,
  coalesce(sum(c.duration_ns), 0) AS capture_ns
FROM code_objects co
LEFT JOIN compiles c ON c.run_id = co.run_id AND c.code_id = co.code_id
GROUP BY co.name, co.filename, co.firstlineno
"""
BREAKS = """
SELECT co.name, co.filename, co.firstlineno, b.kind, b.reason,
       b.filename || ':' || b.lineno AS site, count(*)
FROM graph_breaks b JOIN code_objects co ON co.run_id = b.run_id AND co.code_id = b.code_id
GROUP BY co.name, co.filename, co.firstlineno, b.kind, b.reason, site
"""
LIMITS = """
SELECT co.name, co.filename, co.firstlineno, count(*)
FROM cache_limits l JOIN code_objects co ON co.run_id = l.run_id AND co.code_id = l.code_id
GROUP BY co.name, co.filename, co.firstlineno
"""
JUDGED = ("recompiles", "graph_breaks", "graphs", "cache_limits")
SHOWN = ("compiles",) + JUDGED + ("ops", "capture_ms")


def profile(path: str) -> dict:
    """{(name, file, line): {counter: n, "breaks": {(kind, reason, site): n}}}
    of the file at path (merge.MergeError for a file it cannot read)."""
    con = open_source(path)
    try:
        fns = {}
        for name, fname, line, compiles, recompiles, graphs, ops, ns in con.execute(FUNCTIONS):
            fns[(name, fname, line)] = {
                "compiles": compiles, "recompiles": recompiles, "graphs": graphs, "ops": ops,
                "capture_ms": round(ns / 1e6, 3), "graph_breaks": 0, "cache_limits": 0,
                "breaks": {}}
        for name, fname, line, kind, reason, site, n in con.execute(BREAKS):
            f = fns[(name, fname, line)]
            f["breaks"][(kind, reason, site)] = n
            f["graph_breaks"] += n
        for name, fname, line, n in con.execute(LIMITS):
            fns[(name, fname, line)]["cache_limits"] = n
        return fns
    finally:
        con.close()


EMPTY = {k: 0 for k in SHOWN} | {"breaks": {}}


def compare(a_path: str, b_path: str) -> dict:
    """The difference of B against A, as the JSON `--json` prints."""
    a, b = profile(a_path), profile(b_path)
    functions, new_breaks, gone_breaks, regressions = [], [], [], []
    totals = {k: {"a": 0, "b": 0} for k in SHOWN}
    for key in sorted(set(a) | set(b), key=lambda k: (k[1], k[2], k[0])):
        fa, fb = a.get(key, EMPTY), b.get(key, EMPTY)
        name, fname, line = key
        where = f"{os.path.basename(fname)}:{line}"
        for k in SHOWN:
            totals[k]["a"] += fa[k]
            totals[k]["b"] += fb[k]
        if any(fa[k] != fb[k] for k in SHOWN if k != "capture_ms") or fa["breaks"] != fb["breaks"]:
            functions.append({"function": name, "filename": fname, "firstlineno": line,
                              "in_a": key in a, "in_b": key in b,
                              **{k: {"a": fa[k], "b": fb[k]} for k in SHOWN}})
        for k in JUDGED:
            if fb[k] > fa[k]:
                regressions.append(f"{name} ({where}): {k.replace('_', ' ')} {fa[k]} -> {fb[k]}")
        for brk in sorted(set(fb["breaks"]) - set(fa["breaks"])):
            new_breaks.append({"function": name, "kind": brk[0], "reason": brk[1],
                               "site": brk[2], "count": fb["breaks"][brk]})
            regressions.append(f"{name} ({where}): new break {brk[0]}: {brk[1]} at "
                               f"{os.path.basename(brk[2] or '?')}")
        for brk in sorted(set(fa["breaks"]) - set(fb["breaks"])):
            gone_breaks.append({"function": name, "kind": brk[0], "reason": brk[1],
                                "site": brk[2], "count": fa["breaks"][brk]})
    totals["capture_ms"] = {s: round(v, 3) for s, v in totals["capture_ms"].items()}
    return {"a": a_path, "b": b_path, "totals": totals, "functions": functions,
            "new_breaks": new_breaks, "gone_breaks": gone_breaks,
            "regressed": bool(regressions), "regressions": regressions}


def _change(pair: dict) -> str:
    a, b = pair["a"], pair["b"]
    if a == b:
        return str(a)
    d = b - a
    d = round(d, 1) if isinstance(d, float) else d
    return f"{a} -> {b} ({'+' if d > 0 else ''}{d})"


def render(d: dict) -> str:
    lines = [f"dynscope diff: {d['a']} -> {d['b']}", "  " + ", ".join(
        f"{k.replace('_', ' ')} {_change(v)}" for k, v in d["totals"].items())]
    lines.append("")
    lines.append("Functions that changed")
    if not d["functions"]:
        lines.append("  (none)")
    for f in d["functions"]:
        only = "" if f["in_a"] and f["in_b"] else (" (only in B)" if f["in_b"] else " (only in A)")
        lines.append(f"  {f['function']} ({os.path.basename(f['filename'])}:{f['firstlineno']}){only}")
        lines.append("    " + ", ".join(f"{k.replace('_', ' ')} {_change(f[k])}"
                                          for k in SHOWN if f[k]["a"] != f[k]["b"]))
    for title, key in (("New break reasons (in B, not in A)", "new_breaks"),
                       ("Gone break reasons (in A, not in B)", "gone_breaks")):
        lines.append("")
        lines.append(title)
        if not d[key]:
            lines.append("  (none)")
        for b in d[key]:
            lines.append(f"  {b['function']}: [{b['kind']}] {b['reason']} at {b['site']} x{b['count']}")
    lines.append("")
    if d["regressed"]:
        lines.append("B regresses against A:")
        lines += [f"  {r}" for r in d["regressions"]]
    else:
        lines.append("B does not regress against A (no more recompiles, breaks, graphs or"
                     " cache-limit hits; no new break reason)")
    return "\n".join(lines)


def main(a_path: str, b_path: str, as_json: bool) -> int:
    d = compare(a_path, b_path)
    print(json.dumps(d, indent=2) if as_json else render(d))
    return 1 if d["regressed"] else 0



