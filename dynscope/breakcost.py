"""What each graph-break site cost the program, for the text and the HTML
report (docs/report.md): the `break_costs` view (docs/sql.md, schema v6)
summed per site over every run, costliest first.

A site is (kind, reason, file, line), as `break_sites` groups it. Its cost
is the time the program spent outside graphs because of the break -- the
eager step and the resume -- that the engine timed on 1 call in 64 and
scaled to all calls; its share is of the time of the function(s) it breaks.
A file older than v6 (TEMP `break_costs` with NULL costs), or one where no
call through a break was timed, has no costs: the sites come most frequent
first, as before v6, and `not_measured` says why.
"""
from __future__ import annotations

import sqlite3
from typing import NamedTuple

from dynscope import places

__all__ = ["Sites", "sites", "duration", "share"]


class Sites(NamedTuple):
    """The sites, and whether they carry costs."""
    rows: list                  # dicts: kind, reason, filename, lineno, breaks, calls,
                                # cost_ns, extra_graphs, samples (0: its cost is unknown),
                                # function_ns (the outermost frame's it breaks, summed
                                # over runs), share_of (that frame's names), functions
                                # (every frame it breaks, those first)
    not_measured: str | None    # None when some site was timed, else why none was


def sites(con: sqlite3.Connection) -> Sites:
    """Every break site of the database open on con, costliest first (then
    most breaks first); most breaks first when no site was timed.  con has
    the views of the current schema (TEMP ones on an older file).  Raises
    sqlite3.Error for a database it cannot read."""
    places.install(con)                          # function_name(): a wrapper by what it wraps
    version = con.execute("PRAGMA user_version").fetchone()[0]
    by_site: dict = {}
    timed_functions: dict = {}                   # site -> {(run, epoch, code): function_ns}
    for r in con.execute(
            "SELECT run_id, epoch, code_id, function_name(run_id, code_id, function),"
            " kind, reason, filename, lineno, breaks, calls, cost_ns, extra_graphs, samples,"
            " function_ns FROM break_costs ORDER BY run_id, epoch, code_id"):
        run_id, epoch, code_id, function, *key = r[:8]
        breaks, calls, cost_ns, extra, samples, function_ns = r[8:]
        site = by_site.setdefault(tuple(key), {
            "kind": key[0], "reason": key[1], "filename": key[2], "lineno": key[3],
            "breaks": 0, "calls": 0, "cost_ns": 0, "extra_graphs": 0, "samples": 0,
            "function_ns": 0, "functions": {}})
        site["breaks"] += breaks or 0
        site["calls"] += calls or 0
        site["cost_ns"] += cost_ns or 0
        site["extra_graphs"] += extra or 0
        site["samples"] += samples or 0
        site["functions"][function or f"code {code_id}"] = None
        # one function's time, however many of its rows (break types) the site has
        timed_functions.setdefault(tuple(key), {})[(run_id, epoch, code_id)] = (
            function_ns or 0, function or f"code {code_id}")
    rows = []
    for key, site in by_site.items():
        # a site inside a callee breaks each captured frame on the way to it
        # (each frame's cost is its own span: they add up), but the frames'
        # times nest: the share is of the outermost's, per run
        outermost: dict = {}
        for (run_id, epoch, _code), (ns, name) in timed_functions[key].items():
            if ns >= outermost.get((run_id, epoch), (-1, ""))[0]:
                outermost[(run_id, epoch)] = (ns, name)
        site["function_ns"] = sum(ns for ns, _ in outermost.values())
        names = list(dict.fromkeys(name for _, name in outermost.values()))
        site["functions"] = names + [f for f in site["functions"] if f not in names]
        site["share_of"] = names
        rows.append(site)
    measured = any(s["samples"] for s in rows)
    rows.sort(key=lambda s: (measured and not s["samples"], -s["cost_ns"] if measured else 0,
                             -s["breaks"], s["kind"] or "", s["reason"] or "",
                             s["filename"] or "", s["lineno"] or 0))
    why = None
    if not measured:
        why = ("the file predates schema v6" if version < 6
               else "no call through a break was timed")
    return Sites(rows, why)


def duration(ns, ms_decimals: int = 1) -> str:
    """ns as people read a time: 850 ns, 12.3 µs, 12.3 ms, 1.23 s (the
    HTML report gives ms two decimals)."""
    if ns < 1_000:
        return f"{ns} ns"
    if ns < 1_000_000:
        return f"{ns / 1e3:.1f} µs"
    if ns < 1_000_000_000:
        return f"{ns / 1e6:.{ms_decimals}f} ms"
    return f"{ns / 1e9:.2f} s"


def share(site: dict) -> str:
    """The site's cost as a share of the time of the outermost frame it
    breaks, "41% of smooth";
    "" when the functions' time is unknown or the site was not timed."""
    if not site["samples"] or not site["function_ns"]:
        return ""
    pct = 100 * site["cost_ns"] / site["function_ns"]
    text = "<1%" if 0 < pct < 1 else f"{pct:.0f}%"
    return f"{text} of {', '.join(site['share_of'])}"
