"""The static HTML report of a dynscope database: `python -m dynscope report --html DIR FILE`.

It renders a recording (docs/sql.md) as a small site a person opens from disk
or attaches to an issue (docs/report.md):

- index.html: the runs, the tree of frames (code object -> frames -> compile
  attempts, with a status per frame: ok, break, skipped, error, cache limit),
  the failures and restarts, the graph-break sites with a hint (costliest
  first, from schema v6: dynscope/breakcost.py), the cache entries' hits
  and guard time, and a recompile timeline drawn as inline SVG;
- compile-<compile_row>.html, one per compile attempt: its graphs, the break
  that ended it, its guards with the source line that made each, the
  recompile reason and the nearest older entry's failing guards.

Invariants, held by tests/test_html_report.py in a headless Chromium:

- every page is self-contained: inline CSS and JS, no fonts, scripts, images
  or requests from anywhere, so it opens from disk and offline;
- every link is relative and resolves to a written page, and every #anchor
  to an element of it;
- every text from the database goes through html.escape: a guard such as
  `L['x'] < 3` or a reason with `<code ...>` is shown, never parsed.

The caller opens the database read-only and gives it the views of the
current schema (__main__._cmd_report makes TEMP views on an older file).
The columns and the table that schema v4 added (guards.filename, .lineno,
.user_stack; guard_failures.filename, .lineno; recompile_diffs) are read when
the file has them; an older file renders without them.
"""
from __future__ import annotations

import datetime
import html
import json
import os
import shlex
import sqlite3

from dynscope import _C, breakcost, outfile, places

__all__ = ["write_site", "break_hint"]


def esc(value) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def break_hint(kind: str | None, reason: str | None, filename: str | None = None) -> str:
    """The hint explain prints for a break of this kind and reason at a site
    in filename: the break-type registry's (event/break_types.c), worded for
    installed code as explain words it (explain/summary.c) -- one table."""
    return _C.break_hint(kind, reason or "", filename)


# ---------------------------------------------------------------------------
# Reading the database

def _rows(con, sql, params=()):
    cur = con.execute(sql, params)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r)) for r in cur.fetchall()]


def _columns(con, table) -> set:
    return {r[1] for r in con.execute(f"PRAGMA table_info({table})")}


def _has_table(con, name) -> bool:
    return con.execute("SELECT 1 FROM sqlite_master WHERE name = ?1 UNION ALL"
                       " SELECT 1 FROM sqlite_temp_master WHERE name = ?1", (name,)).fetchone() is not None


def _optional(have: set, *names) -> str:
    """The select list of columns a newer schema added: NULL where absent."""
    return ", ".join(n if n in have else f"NULL AS {n}" for n in names)


def _stack(text) -> list:
    """A user_stack column as a list of [file, line, name, source]; [] when
    NULL or not the JSON the engine writes."""
    try:
        stack = json.loads(text) if text else []
    except ValueError:
        return []
    return [f for f in stack if isinstance(f, list) and len(f) >= 4] if isinstance(stack, list) else []


class _Data:
    """Every row the pages show, read once, grouped by the keys they join on."""

    def __init__(self, con):
        self.version = con.execute("PRAGMA user_version").fetchone()[0]
        self.runs = _rows(con, "SELECT * FROM run_summary ORDER BY run_id")
        self.code = {(r["run_id"], r["code_id"]): r
                     for r in _rows(con, "SELECT * FROM code_summary")}
        from dynscope import places
        for key, name in places.wrapper_names(con)[0].items():    # a decorator's wrapper
            if key in self.code:                                   # by what it wraps
                self.code[key] = dict(self.code[key], qualname=self.code[key]["name"], name=name)
        self.compiles = _rows(con, "SELECT * FROM compiles ORDER BY compile_row")
        self.by_row = {c["compile_row"]: c for c in self.compiles}
        self.frames = _rows(con, "SELECT * FROM frames ORDER BY run_id, code_id, epoch, frame_id")
        self.skips = _rows(con, "SELECT * FROM frame_skips ORDER BY at")
        self.limits = _rows(con, "SELECT * FROM cache_limits ORDER BY at")
        self.resets = _rows(con, "SELECT * FROM resets ORDER BY run_id, epoch")
        self.breaks = _rows(con, "SELECT * FROM graph_breaks ORDER BY break_id")
        self.sites = breakcost.sites(con)      # costliest first (schema v6)
        self.entries = _rows(con, "SELECT * FROM cache_entries")
        self.graphs = _rows(con, "SELECT * FROM graphs ORDER BY graph_id")
        have = _columns(con, "guards")
        self.guard_sources = "filename" in have   # schema v4 records them
        self.guards = _rows(con, "SELECT run_id, code_id, epoch, compile_id, idx, kind, expr, "
                                 + _optional(have, "filename", "lineno", "user_stack")
                                 + " FROM guards ORDER BY run_id, code_id, epoch, compile_id, idx")
        have = _columns(con, "guard_failures")
        self.failure_sources = "filename" in have
        self.failures = _rows(con, "SELECT failure_id, run_id, code_id, epoch, compile_id, compile_row,"
                                   " entry_compile_id, kind, expr, observed, at, "
                                   + _optional(have, "filename", "lineno")
                                   + " FROM guard_failures ORDER BY failure_id")
        self.has_diffs = _has_table(con, "recompile_diffs")
        self.diffs = (_rows(con, "SELECT * FROM recompile_diffs ORDER BY compile_row, idx")
                      if self.has_diffs else [])

        self.entry = {(e["run_id"], e["code_id"], e["epoch"], e["compile_id"]): e for e in self.entries}
        self.entry_guards = _group(self.guards, "run_id", "code_id", "epoch", "compile_id")
        self.row_breaks = _group(self.breaks, "compile_row")
        self.row_graphs = _group(self.graphs, "compile_row")
        self.row_failures = _group(self.failures, "compile_row")
        self.row_diffs = _group(self.diffs, "compile_row")
        self.frame_limits = _group(self.limits, "run_id", "code_id", "epoch", "frame_id")
        self.skip_of = _pair_skips(self.compiles, self.skips)
        self.run = {r["run_id"]: r for r in self.runs}

    def entry_row(self, run_id, code_id, epoch, compile_id):
        """The compile_row that made an entry, or None if it is not recorded."""
        e = self.entry.get((run_id, code_id, epoch, compile_id))
        return e["compile_row"] if e and e["compile_row"] in self.by_row else None

    def own_entry(self, c):
        """The cache entry the compile made (a failed or skipped attempt makes none)."""
        e = self.entry.get((c["run_id"], c["code_id"], c["epoch"], c["compile_id"]))
        return e if e and e["compile_row"] == c["compile_row"] else None

    def name(self, run_id, code_id) -> str:
        co = self.code.get((run_id, code_id))
        return co["name"] if co else f"code {code_id}"


def _group(rows, *keys) -> dict:
    out: dict = {}
    for r in rows:
        out.setdefault(tuple(r[k] for k in keys) if len(keys) > 1 else r[keys[0]], []).append(r)
    return out


def _pair_skips(compiles, skips) -> dict:
    """compile_row -> the frame_skips row of that skipped attempt: the first
    unpaired skip of the same frame entry point, in time order."""
    pending = _group(skips, "run_id", "code_id", "epoch", "resume_offset")
    out = {}
    for c in compiles:
        if c["outcome"] == "skipped":
            queue = pending.get((c["run_id"], c["code_id"], c["epoch"], c["resume_offset"]))
            if queue:
                out[c["compile_row"]] = queue.pop(0)
    return out


# ---------------------------------------------------------------------------
# Formatting

def _dur(ns) -> str:
    return "" if ns is None else breakcost.duration(ns, ms_decimals=2)


def _utc(ns) -> str:
    if ns is None:
        return ""
    t = datetime.datetime.fromtimestamp(ns / 1e9, tz=datetime.timezone.utc)
    return t.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"


def _since(ns, start) -> str:
    """A time as milliseconds after the run started."""
    if ns is None or start is None:
        return ""
    return f"+{(ns - start) / 1e6:.1f} ms"


def _argv(text) -> str:
    try:
        args = json.loads(text) if text else []
        return shlex.join(str(a) for a in args) if isinstance(args, list) else str(text)
    except ValueError:
        return str(text)


_STATUS_CLASS = {"ok": "ok", "break": "break", "skipped": "skipped", "error": "error",
                 "cache limit": "limit", "recompile": "recompile", "reset": "reset",
                 "compiling": "skipped", "live": "reset", "ended": "ok", "failed": "error",
                 "held": "ok"}


def _badge(status) -> str:
    return f'<span class="badge b-{_STATUS_CLASS.get(status, "skipped")}">{esc(status)}</span>'


def _cid(compile_id) -> str:
    """A compile id as logs, explain and dyntop write it: [0/1]."""
    return f"[{compile_id}]"


def _compile_link(c, text=None) -> str:
    return f'<a href="compile-{c["compile_row"]}.html">{esc(text or _cid(c["compile_id"]))}</a>'


def _site(filename, lineno) -> str:
    if not filename:
        return ""
    return f"{filename}:{lineno}" if lineno else str(filename)


def _site_span(filename, lineno) -> str:
    """file:line as users read it (an installed file from its package on,
    dynscope/places.py), the full path on hover."""
    full = _site(filename, lineno)
    if not full:
        return '<span class="site"></span>'
    short = _site(places.readable(str(filename)), lineno)
    title = f' title="{esc(full)}"' if short != full else ""
    return f'<span class="site"{title}>{esc(short)}</span>'


def _source_cell(filename, lineno, stack_text, recorded=True) -> str:
    """Where a guard came from: file:line, the user's source line, and the
    whole stack through inlined calls when there is more than one frame.
    With nothing recorded for it, a guard the engine added itself -- unless
    the file predates the columns (recorded=False): then nothing is known."""
    stack = _stack(stack_text)
    if not filename and stack:
        filename, lineno = stack[-1][0], stack[-1][1]
    if not _site(filename, lineno):
        return '<span class="muted">engine</span>' if recorded else ""
    out = _site_span(filename, lineno)
    if stack and stack[-1][3]:
        out += f'<br><code class="src">{esc(str(stack[-1][3]).strip())}</code>'
    if len(stack) > 1:
        out += ('<details class="stack"><summary>stack</summary>'
                + _stack_list(stack) + "</details>")
    return out


def _stack_list(stack) -> str:
    items = "".join(f'<li>{_site_span(f[0], f[1])} in {esc(f[2])}'
                    f'<br><code class="src">{esc(str(f[3] or "").strip())}</code></li>' for f in stack)
    return f'<ol class="stack">{items}</ol>'


def _table(header, rows, row_classes=None) -> str:
    """rows are lists of cells already rendered as HTML; a header starting
    with '#' is a right-aligned number column (the '#' is not shown)."""
    nums = [h.startswith("#") for h in header]
    head = "".join(f'<th{" class=num" if n else ""}>{esc(h.lstrip("#"))}</th>'
                   for h, n in zip(header, nums))
    classes = row_classes or [""] * len(rows)
    body = "".join((f'<tr class="{cls}">' if cls else "<tr>")
                   + "".join(f'<td{" class=num" if n else ""}>{cell}</td>' for cell, n in zip(r, nums))
                   + "</tr>" for r, cls in zip(rows, classes))
    return f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def _none(text) -> str:
    return f'<p class="muted">{esc(text)}</p>'


# ---------------------------------------------------------------------------
# The pages

_CSS = """
:root{--fg:#1d2330;--muted:#5d6678;--bg:#f4f6f9;--card:#fff;--line:#dde2ea;--head:#1f2a44;--accent:#2f5bd3}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;color:var(--fg);background:var(--bg)}
header{background:var(--head);color:#fff;padding:14px 28px 10px}
header h1{margin:0;font-size:20px;font-weight:600}
header .sub{color:#c3cbe0;font-size:13px;margin-top:2px}
header nav{margin-top:8px}
header nav a{color:#dfe6ff;margin-right:16px;font-size:13px;text-decoration:none}
header nav a:hover{text-decoration:underline}
main{max-width:1280px;margin:0 auto;padding:8px 28px 40px}
section{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:12px 18px 14px;margin:16px 0}
h2{font-size:16px;margin:2px 0 10px}
h3{font-size:14px;margin:14px 0 6px}
a{color:var(--accent)}
.muted{color:var(--muted)}
.scroll{overflow-x:auto}
table{border-collapse:collapse;width:100%;font-size:13px}
th,td{text-align:left;padding:5px 9px;border-bottom:1px solid var(--line);vertical-align:top}
th{background:#eef1f6;font-weight:600;vertical-align:bottom}
tbody tr:nth-child(even) td{background:#fafbfd}
tbody tr:hover td{background:#f0f4ff}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
td.num{white-space:nowrap}
code,pre,.site{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,"DejaVu Sans Mono",monospace;font-size:12.5px}
.site{color:#39465e}
code.src{display:inline-block;max-width:100%;background:#f3f5f8;border:1px solid #e6e9ef;border-radius:4px;padding:1px 5px;white-space:pre-wrap;overflow-wrap:anywhere}
pre{background:#f6f8fb;border:1px solid var(--line);padding:10px 12px;border-radius:6px;overflow:auto;margin:6px 0}
.badge{display:inline-block;padding:0 8px;border-radius:10px;font-size:11.5px;font-weight:600;line-height:18px;white-space:nowrap;margin-right:3px}
.b-ok{background:#dff3e5;color:#1b6a33}
.b-break{background:#fff0d2;color:#875600}
.b-limit{background:#fde0de;color:#a3201a}
.b-error{background:#fde0de;color:#a3201a}
.b-skipped{background:#e7e9ee;color:#475064}
.b-recompile{background:#ebe3fb;color:#5a33a6}
.b-reset{background:#dceefa;color:#165e8a}
.count{color:var(--muted);font-size:12.5px;margin-left:6px}
.toolbar{display:flex;gap:8px;align-items:center;margin-bottom:8px}
.toolbar button{font:inherit;font-size:12.5px;padding:2px 10px;border:1px solid var(--line);border-radius:5px;background:#f7f8fb;cursor:pointer}
.toolbar input{font:inherit;font-size:13px;padding:2px 8px;border:1px solid var(--line);border-radius:5px;width:240px}
details.code{border:1px solid var(--line);border-radius:6px;margin:6px 0;background:#fff}
details.code>summary{cursor:pointer;padding:7px 10px;list-style-position:inside}
details.code>summary .fn{font-weight:600}
details.code[open]>summary{border-bottom:1px solid var(--line);background:#f8f9fc}
details.code .frames{padding:4px 12px 10px}
details.frame{margin:8px 0 0 10px}
details.frame>summary{cursor:pointer}
details.frame table{margin:4px 0 0 14px;width:calc(100% - 14px)}
details.frame table{table-layout:fixed}
details.frame th:nth-child(1){width:70px}
details.frame th:nth-child(2){width:200px}
details.frame th:nth-child(n+3):nth-child(-n+9){width:84px}
details.stack summary{cursor:pointer;color:var(--muted);font-size:12px}
ol.stack{margin:4px 0;padding-left:22px}
.kv{display:grid;grid-template-columns:max-content 1fr;gap:3px 18px;font-size:13.5px}
.kv dt{color:var(--muted)}
.kv dd{margin:0}
tr.failed td{background:#fdeceb !important}
.legend{font-size:12.5px;color:var(--muted);margin-top:4px}
.legend svg{vertical-align:middle;margin:0 3px 0 12px}
svg.timeline{width:100%;height:auto;display:block}
ul.trie,ul.trie ul{list-style:none;padding-left:18px;margin:2px 0}
ul.trie .count{display:inline-block;min-width:3em;text-align:right;color:var(--muted)}
svg.timeline text{font-family:system-ui,-apple-system,"Segoe UI",Roboto,Arial,sans-serif;font-size:12px;fill:#39465e}
.pager{float:right;font-size:13px}
.nowrap{white-space:nowrap}
"""

# Expand/collapse every function of the tree, and filter it by name.
_TREE_JS = """
(function () {
  var codes = document.querySelectorAll('details.code');
  function all(open) { codes.forEach(function (d) { d.open = open; }); }
  document.getElementById('expand-all').addEventListener('click', function () { all(true); });
  document.getElementById('collapse-all').addEventListener('click', function () { all(false); });
  document.getElementById('tree-filter').addEventListener('input', function (ev) {
    var q = ev.target.value.toLowerCase();
    codes.forEach(function (d) {
      d.style.display = d.getAttribute('data-name').toLowerCase().indexOf(q) < 0 ? 'none' : '';
    });
  });
})();
"""


# A click on a column of a table.sortable sorts its rows by it (numbers by a
# cell's data-v, largest first; text A to Z); a second click reverses.
_SORT_JS = """
(function () {
  document.querySelectorAll('table.sortable').forEach(function (table) {
    table.querySelectorAll('th').forEach(function (th, col) {
      th.style.cursor = 'pointer';
      th.addEventListener('click', function () {
        var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
        var num = th.classList.contains('num'), flip = th.getAttribute('data-desc') === '1';
        function key(r) {
          var c = r.cells[col], v = c.querySelector('[data-v]');
          return num ? parseFloat(v ? v.getAttribute('data-v') : c.textContent) || 0 : c.textContent;
        }
        rows.sort(function (a, b) {
          var x = key(a), y = key(b), o = num ? y - x : (x < y ? -1 : x > y ? 1 : 0);
          return flip ? -o : o;
        });
        th.setAttribute('data-desc', flip ? '0' : '1');
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
  });
})();
"""


def _page(title, subtitle, nav, body, script="") -> str:
    links = "".join(f'<a href="{esc(href)}">{esc(text)}</a>' for href, text in nav)
    js = f"<script>{script}</script>" if script else ""
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{esc(title)}</title><style>{_CSS}</style></head><body>"
            f'<header><h1>{esc(title)}</h1><div class="sub">{esc(subtitle)}</div>'
            f"<nav>{links}</nav></header><main>{body}</main>{js}</body></html>\n")


_INDEX_NAV = (("#runs", "Runs"), ("#frames", "Frames"), ("#timeline", "Recompile timeline"),
              ("#failures", "Failures and restarts"), ("#breaks", "Graph breaks"),
              ("#compile-time", "Compile time"), ("#call-paths", "Call paths"),
              ("#entries", "Cache entries"))


def _frame_statuses(d: _Data, frame_key, compiles, skips) -> list:
    statuses = []
    if any(c["outcome"] == "ok" for c in compiles):
        statuses.append("ok")
    if any(d.row_breaks.get(c["compile_row"]) for c in compiles):
        statuses.append("break")
    if skips or any(c["outcome"] == "skipped" for c in compiles):
        statuses.append("skipped")
    if any(c["outcome"] == "error" for c in compiles):
        statuses.append("error")
    if any(c["outcome"] is None for c in compiles):
        statuses.append("compiling")
    if d.frame_limits.get(frame_key):
        statuses.append("cache limit")
    return statuses


def _compile_status(d: _Data, c) -> str:
    badges = _badge(c["outcome"] or "compiling")
    if d.row_breaks.get(c["compile_row"]):
        badges += _badge("break")
    if c["frame_compile_id"]:
        badges += _badge("recompile")
    return badges


def _frame_anchor(run_id, code_id, epoch, frame_id) -> str:
    return f"frame-{run_id}-{code_id}-{epoch}-{frame_id}"


def _runs_section(d: _Data) -> str:
    rows = []
    for r in d.runs:
        # live: no ended_at yet -- still running, or the process died
        status = "live" if r["ended_at"] is None else "ended"
        length = _dur(r["ended_at"] - r["started_at"]) if r["ended_at"] else ""
        dropped = r["dropped_events"]
        day, _, clock = _utc(r["started_at"]).partition(" ")
        rows.append([
            f'<a href="#run-{r["run_id"]}">{r["run_id"]}</a>',
            f'<code>{esc(_argv(r["argv"]))}</code><br><span class="muted">Python '
            f'{esc((r["python"] or "").split(" ")[0])}, pid {esc(r["pid"])}</span>',
            f'{esc(day)}<br><span class="nowrap">{esc(clock)}</span><br>{esc(length)} {_badge(status)}',
            *(esc(r[k]) for k in ("code_objects", "compiles", "recompiles", "graph_breaks",
                                  "guard_failures", "cache_limits", "skips", "resets")),
            esc(f'{r["cache_entries"]} / {r["hits"]}'),
            esc(r["written_events"]) + (f'<br><span class="badge b-error">{esc(dropped)} dropped</span>'
                                        if dropped else ""),
        ])
    table = _table(["#run", "program", "started", "#functions", "#compiles", "#recompiles",
                    "#breaks", "#guard failures", "#cache limits", "#skips", "#resets",
                    "#entries / hits", "#events"], rows) if rows else _none("no runs")
    return f'<section id="runs"><h2>Runs</h2>{table}</section>'


def _tree_section(d: _Data) -> str:
    # everything per code object first: one pass over each table
    frames = _group(d.frames, "run_id", "code_id")
    compiles = _group(d.compiles, "run_id", "code_id")
    skips = _group(d.skips, "run_id", "code_id")
    limits = _group(d.limits, "run_id", "code_id")
    out = []
    for run in d.runs:
        run_id = run["run_id"]
        codes = sorted((k for k in d.code if k[0] == run_id), key=lambda k: k[1])
        out.append(f'<h3 id="run-{run_id}">Run {run_id} <span class="count">'
                   f'{esc(_argv(run["argv"]))}</span></h3>')
        if not codes:
            out.append(_none("no code objects"))
        for key in codes:
            out.append(_code_node(d, key, frames.get(key, []), compiles.get(key, []),
                                  skips.get(key, []), limits.get(key, [])))
    toolbar = ('<div class="toolbar"><button type="button" id="expand-all">expand all</button>'
               '<button type="button" id="collapse-all">collapse all</button>'
               '<input id="tree-filter" type="search" placeholder="filter functions by name"'
               ' aria-label="filter functions by name"></div>')
    return (f'<section id="frames"><h2>Frames</h2><p class="muted">Per function, its frames (the '
            f'function start and each resume point after a graph break) and their compile '
            f'attempts. Open a compile for its graph, guards and recompile reason.</p>'
            f'{toolbar}{"".join(out)}</section>')


def _code_node(d: _Data, key, frame_rows, compiles, skips, limits) -> str:
    run_id, code_id = key
    co = d.code[key]
    # a frame is a frames row, or one a compile or a cache limit names whose
    # frames row was not recorded
    frame_keys = {(f["epoch"], f["frame_id"]): f["resume_offset"] for f in frame_rows}
    for r in compiles + limits:
        frame_keys.setdefault((r["epoch"], r["frame_id"]), r["resume_offset"])
    by_frame = _group(compiles, "epoch", "frame_id")
    by_offset = _group(skips, "epoch", "resume_offset")
    items, statuses = [], []
    for (epoch, frame_id), offset in sorted(frame_keys.items(), key=_null_first):
        fc = by_frame.get((epoch, frame_id), [])
        fs = by_offset.pop((epoch, offset), [])
        st = _frame_statuses(d, (run_id, code_id, epoch, frame_id), fc, fs)
        statuses += [s for s in st if s not in statuses]
        items.append(_frame_node(d, key, epoch, frame_id, offset, fc, fs, st))
    for (epoch, offset), fs in sorted(by_offset.items(), key=_null_first):   # skips of no recorded frame
        if "skipped" not in statuses:
            statuses.append("skipped")
        reasons = "; ".join(sorted({s["reason"] or "" for s in fs}))
        items.append(f'<div class="frame-skip">{_badge("skipped")} entry point '
                     f'{_offset_text(offset)}{_epoch_text(epoch)}: {esc(reasons)}</div>')
    counts = (f'<span class="count">{co["compiles"]} compile{"s" if co["compiles"] != 1 else ""}, '
              f'{co["recompiles"]} recompile{"s" if co["recompiles"] != 1 else ""}, '
              f'{co["graph_breaks"]} break{"s" if co["graph_breaks"] != 1 else ""}, '
              f'{co["hits"]} hits</span>')
    order = ("ok", "break", "skipped", "error", "compiling", "cache limit")
    badges = "".join(_badge(s) for s in order if s in statuses)
    return (f'<details class="code" id="code-{run_id}-{code_id}" data-name="{esc(co["name"])}">'
            f'<summary><span class="fn">{esc(co["name"])}</span> '
            f'{_site_span(co["filename"], co["firstlineno"])} '
            f'{badges}{counts}</summary><div class="frames">{"".join(items)}</div></details>')


def _null_first(item):
    """A sort key for ((epoch, id), value) items whose id may be NULL (a row
    made from a later event when the first one was lost)."""
    (epoch, key), _ = item
    return epoch, key is not None, key or 0


def _offset_text(offset) -> str:
    if offset is None:
        return "entry point not recorded"
    return "function start" if offset == 0 else f"resume at offset {offset}"


def _epoch_text(epoch) -> str:
    return f" (after reset {epoch})" if epoch else ""


def _frame_node(d: _Data, key, epoch, frame_id, offset, fc, fs, statuses) -> str:
    run_id, code_id = key
    start = d.run[run_id]["started_at"]
    rows = []
    for c in fc:
        e = d.own_entry(c)
        rows.append([_compile_link(c), _compile_status(d, c), esc(_since(c["started_at"], start)),
                     esc(_dur(c["duration_ns"])), esc(c["graphs"]), esc(c["nodes"]), esc(c["guards"]),
                     esc(e["hits"] if e else ""), esc(_dur(e["guard_ns"]) if e else ""),
                     esc(c["reason"])])
    table = _table(["compile", "status", "#started", "#took", "#graphs", "#nodes", "#guards",
                    "#hits", "#guard time", "recompile reason"], rows) if rows else ""
    notes = "".join(f'<div>{_badge("skipped")} {esc(s["reason"])}</div>' for s in fs)
    notes += "".join(f'<div>{_badge("cache limit")} at {esc(_since(l["at"], start))}: '
                     f'last failing guard <code>{esc(l["reason"])}</code></div>'
                     for l in d.frame_limits.get((run_id, code_id, epoch, frame_id), []))
    return (f'<details class="frame" open id="{_frame_anchor(run_id, code_id, epoch, frame_id)}">'
            f'<summary>frame {esc(frame_id)} <span class="muted">{_offset_text(offset)}'
            f'{_epoch_text(epoch)}</span> {"".join(_badge(s) for s in statuses)}</summary>'
            f'{notes}{table}</details>')


def _failures_section(d: _Data) -> str:
    events = []   # (run_id, at, order, cells)
    for c in d.compiles:
        name = esc(d.name(c["run_id"], c["code_id"]))
        if c["outcome"] != "ok":
            skip = d.skip_of.get(c["compile_row"])
            detail = skip["reason"] if skip else ("still compiling, or the process died"
                                                  if c["outcome"] is None else c["outcome"])
            events.append((c["run_id"], c["started_at"], c["compile_row"],
                           [_badge(c["outcome"] or "compiling"), name, _compile_link(c), esc(detail)]))
        if c["frame_compile_id"]:
            n = len(d.row_failures.get(c["compile_row"], []))
            detail = esc(c["reason"] or "")
            if n:
                detail += f' <span class="count">({n} older entr{"ies" if n != 1 else "y"} failed)</span>'
            events.append((c["run_id"], c["started_at"], c["compile_row"],
                           [_badge("recompile"), name, _compile_link(c), detail]))
    paired = {id(s) for s in d.skip_of.values()}
    for s in d.skips:
        if id(s) not in paired:
            events.append((s["run_id"], s["at"], 0, [_badge("skipped"), esc(d.name(s["run_id"], s["code_id"])),
                                                     esc(_offset_text(s["resume_offset"])), esc(s["reason"])]))
    for l in d.limits:
        anchor = _frame_anchor(l["run_id"], l["code_id"], l["epoch"], l["frame_id"])
        events.append((l["run_id"], l["at"], 0,
                       [_badge("cache limit"), esc(d.name(l["run_id"], l["code_id"])),
                        f'<a href="#{anchor}">frame {esc(l["frame_id"])}</a>',
                        f'last failing guard <code>{esc(l["reason"])}</code>']))
    for r in d.resets:
        events.append((r["run_id"], r["at"], 0, [_badge("reset"), "", "",
                                                 esc(f'dynscope.reset(): epoch {r["epoch"]} begins; '
                                                     f'older entries are gone')]))
    events.sort(key=lambda e: (e[0], e[1] or 0, e[2]))
    rows = [[esc(run_id), esc(_since(at, d.run[run_id]["started_at"]) if run_id in d.run else "")] + cells
            for run_id, at, _, cells in events]
    table = (_table(["#run", "#at", "what", "function", "compile / frame", "detail"], rows)
             if rows else _none("no failures, recompiles, cache limits or resets"))
    return (f'<section id="failures"><h2>Failures and restarts</h2><p class="muted">Compile attempts '
            f'that did not end ok, recompiles with the guard that failed, frames that reached the '
            f'cache limit, and resets, in time order.</p>{table}</section>')


def _breaks_section(d: _Data) -> str:
    """The break sites, costliest first (dynscope/breakcost.py): what each
    cost outside graphs, its share of its function's time, the calls through
    it and the graphs it added; most frequent first, said once, without costs."""
    by_site = _group(d.breaks, "kind", "reason", "filename", "lineno")
    timed = not d.sites.not_measured
    rows = []
    for s in d.sites.rows:
        breaks = by_site.get((s["kind"], s["reason"], s["filename"], s["lineno"]), [])
        stack = next((_stack(b["user_stack"]) for b in breaks if _stack(b["user_stack"])), [])
        source = f'<code class="src">{esc(str(stack[-1][3]).strip())}</code>' if stack else ""
        seen, links = set(), []
        for b in breaks:
            if b["compile_row"] in d.by_row and b["compile_row"] not in seen:
                seen.add(b["compile_row"])
                c = d.by_row[b["compile_row"]]
                links.append(_compile_link(c, f'{d.name(c["run_id"], c["code_id"])} {_cid(c["compile_id"])}'))
        costs = []
        if timed:
            costs = ([esc(breakcost.duration(s["cost_ns"])), esc(breakcost.share(s)),
                      esc(s["calls"]), esc(s["extra_graphs"])] if s["samples"] else
                     ['<span class="muted">not timed</span>', "", esc(s["calls"]), ""])
        rows.append([esc(s["breaks"]), *costs, f'<span class="badge b-break">{esc(s["kind"])}</span>',
                     esc(s["reason"]), f'{_site_span(s["filename"], s["lineno"])}',
                     source, esc(break_hint(s["kind"], s["reason"], s["filename"])), ", ".join(links)])
    costs = ["#cost", "share", "#calls", "#extra graphs"] if timed else []
    table = (_table(["#breaks", *costs, "kind", "reason", "site", "source", "hint", "compiles"], rows)
             if rows else _none("no graph breaks"))
    if not rows:
        note = "Where graphs ended and why, over every run, with the usual fix."
    elif timed:
        note = ("Where graphs ended and why, over every run, costliest first: the time the program "
                "spent outside graphs because of each break (the eager step and the resume, timed "
                "on 1 call in 64 and scaled to all calls), its share of its function's time, the "
                "calls through it and the graph launches it added; with the usual fix.")
    else:
        note = (f"Where graphs ended and why, most frequent first, over every run, with the usual "
                f"fix. Costs were not measured: {d.sites.not_measured}.")
    return (f'<section id="breaks"><h2>Graph breaks by site</h2><p class="muted">{esc(note)}</p>'
            f'{table}</section>')


def _entries_section(d: _Data) -> str:
    rows = []
    entries = sorted(d.entries, key=lambda e: (e["run_id"], -(e["hits"] or 0), e["code_id"],
                                               e["epoch"], e["compile_row"] or 0))
    for e in entries:
        run = d.run.get(e["run_id"])
        alive = run is not None and e["epoch"] == run["resets"]
        c = d.by_row.get(e["compile_row"])
        per_hit = _dur(e["guard_ns"] // e["hits"]) if e["hits"] else ""
        rows.append([esc(e["run_id"]), esc(d.name(e["run_id"], e["code_id"])),
                     _compile_link(c) if c else esc(_cid(e["compile_id"])),
                     esc(_offset_text(e["resume_offset"])),
                     _badge("ok") if alive else '<span class="muted">gone (reset)</span>',
                     esc(e["hits"]), esc(_dur(e["guard_ns"])), esc(per_hit),
                     esc(len(d.entry_guards.get((e["run_id"], e["code_id"], e["epoch"], e["compile_id"]), [])))])
    table = (_table(["#run", "function", "entry", "frame", "state", "#hits", "#guard time",
                     "#guard time per hit", "#guards"], rows) if rows else _none("no cache entries"))
    return (f'<section id="entries"><h2>Cache entries</h2><p class="muted">Each entry\'s calls '
            f'(hits) and the time spent checking its guards, as of the last snapshot; most hit '
            f'first.</p>{table}</section>')


# ---- the recompile timeline (inline SVG)

_LANE, _TOP, _AXIS, _LABEL, _RIGHT, _WIDTH = 26, 26, 34, 200, 120, 1200


def _timeline_section(d: _Data) -> str:
    charts = []
    compiles = _group(d.compiles, "run_id")
    for run in d.runs:
        svg = _timeline(d, run, compiles.get(run["run_id"], []))
        if svg:
            charts.append(f'<h3>Run {run["run_id"]} <span class="count">{esc(_argv(run["argv"]))}'
                          f'</span></h3>{svg}')
    legend = ('<div class="legend">'
              '<svg width="12" height="12"><circle cx="6" cy="6" r="4.5" fill="#fff" stroke="#2f5bd3" stroke-width="2"/></svg>first compile'
              '<svg width="12" height="12"><circle cx="6" cy="6" r="5" fill="#7b4fd6"/></svg>recompile'
              '<svg width="12" height="12"><circle cx="6" cy="6" r="5" fill="#98a1b3"/></svg>skipped or failed'
              '<svg width="12" height="12"><path d="M2 2L10 10M10 2L2 10" stroke="#c62828" stroke-width="2.5"/></svg>cache limit'
              '<svg width="14" height="12"><path d="M7 0V12" stroke="#1d7fbf" stroke-dasharray="3 2" stroke-width="1.5"/></svg>reset'
              "</div>")
    body = "".join(charts) + legend if charts else _none("no compiles")
    return (f'<section id="timeline"><h2>Recompile timeline</h2><p class="muted">Every compile '
            f'attempt per function over time (milliseconds since the run started); a mark links '
            f'to its compile. A row of purple marks is a function that keeps recompiling.</p>'
            f'{body}</section>')


def _timeline(d: _Data, run, compiles) -> str:
    run_id, start = run["run_id"], run["started_at"]
    # a row whose time was lost has no place on the axis
    compiles = [c for c in compiles if c["started_at"] is not None]
    if not compiles:
        return ""
    by_code = _group(compiles, "code_id")   # in order of their first compile
    lanes = {code_id: i for i, code_id in enumerate(by_code)}
    limits = [l for l in d.limits if l["run_id"] == run_id and l["at"] is not None
              and l["code_id"] in lanes]
    resets = [r for r in d.resets if r["run_id"] == run_id and r["at"] is not None]
    times = [c["started_at"] for c in compiles] + [l["at"] for l in limits] + [r["at"] for r in resets]
    t0, t1 = min(times), max(times)
    span = max(t1 - t0, 1)
    x0, x1 = _LABEL + 10, _WIDTH - _RIGHT - 10
    height = _TOP + _LANE * len(lanes) + _AXIS

    def x(t):
        return x0 + (x1 - x0) * (t - t0) / span

    def y(code_id):
        return _TOP + _LANE * lanes[code_id] + _LANE / 2

    parts = [f'<svg class="timeline" viewBox="0 0 {_WIDTH} {height}" width="{_WIDTH}" height="{height}"'
             f' role="img" aria-label="recompile timeline of run {run_id}">']
    for code_id, i in lanes.items():
        top = _TOP + _LANE * i
        if i % 2 == 0:
            parts.append(f'<rect x="0" y="{top}" width="{_WIDTH}" height="{_LANE}" fill="#f6f8fb"/>')
        name = d.name(run_id, code_id)
        short = name if len(name) <= 26 else name[:25] + "…"
        parts.append(f'<text x="{_LABEL - 6}" y="{top + _LANE / 2 + 4}" text-anchor="end">'
                     f'<title>{esc(name)}</title>{esc(short)}</text>')
        mine = by_code[code_id]
        n = sum(1 for c in mine if c["frame_compile_id"])
        parts.append(f'<line x1="{x(mine[0]["started_at"]):.1f}" x2="{x(mine[-1]["started_at"]):.1f}" '
                     f'y1="{y(code_id)}" y2="{y(code_id)}" stroke="#c9d1e0" stroke-width="1.5"/>')
        parts.append(f'<text x="{_WIDTH - _RIGHT + 6}" y="{top + _LANE / 2 + 4}">'
                     f'{n} recompile{"s" if n != 1 else ""}</text>')
    for r in resets:
        parts.append(f'<line x1="{x(r["at"]):.1f}" x2="{x(r["at"]):.1f}" y1="{_TOP - 8}" '
                     f'y2="{height - _AXIS}" stroke="#1d7fbf" stroke-dasharray="4 3" stroke-width="1.5">'
                     f'<title>reset: epoch {esc(r["epoch"])} at {esc(_since(r["at"], start))}</title></line>'
                     f'<text x="{x(r["at"]) + 4:.1f}" y="{_TOP - 10}" fill="#1d7fbf">reset</text>')
    for c in compiles:
        cx, cy = x(c["started_at"]), y(c["code_id"])
        if c["outcome"] not in ("ok", None):
            shape = f'<circle cx="{cx:.1f}" cy="{cy}" r="5" fill="#98a1b3"'
        elif c["frame_compile_id"]:
            shape = f'<circle cx="{cx:.1f}" cy="{cy}" r="5" fill="#7b4fd6"'
        else:
            shape = f'<circle cx="{cx:.1f}" cy="{cy}" r="4.5" fill="#fff" stroke="#2f5bd3" stroke-width="2"'
        tip = (f'{d.name(run_id, c["code_id"])} {_cid(c["compile_id"])} ({c["outcome"] or "compiling"}) at '
               f'{_since(c["started_at"], start)}' + (f': {c["reason"]}' if c["reason"] else ""))
        parts.append(f'<a href="compile-{c["compile_row"]}.html">{shape}><title>{esc(tip)}</title>'
                     f'</circle></a>')
    for l in limits:
        cx, cy = x(l["at"]), y(l["code_id"])
        parts.append(f'<path d="M{cx - 5:.1f} {cy - 5}L{cx + 5:.1f} {cy + 5}M{cx + 5:.1f} {cy - 5}'
                     f'L{cx - 5:.1f} {cy + 5}" stroke="#c62828" stroke-width="2.5">'
                     f'<title>cache limit at {esc(_since(l["at"], start))}: {esc(l["reason"])}</title></path>')
    axis_y = height - _AXIS + 6
    parts.append(f'<line x1="{x0}" x2="{x1}" y1="{axis_y}" y2="{axis_y}" stroke="#8b95a8"/>')
    for i in range(6):
        t = t0 + span * i / 5
        parts.append(f'<line x1="{x(t):.1f}" x2="{x(t):.1f}" y1="{axis_y}" y2="{axis_y + 5}" stroke="#8b95a8"/>'
                     f'<text x="{x(t):.1f}" y="{axis_y + 18}" text-anchor="middle">'
                     f'{esc(_since(int(t), start))}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _index(d: _Data, db_label: str) -> str:
    body = (_runs_section(d) + _tree_section(d) + _timeline_section(d) + _failures_section(d)
            + _breaks_section(d) + _compile_time_section(d) + _call_paths_section(d)
            + _entries_section(d))
    return _page("dynscope report", f"{db_label} · schema v{d.version}", _INDEX_NAV, body,
                 _TREE_JS + _SORT_JS)


def _call_paths_section(d: _Data) -> str:
    """The stack trie (dynscope/stacktrie.py): every compile's call path from
    the program's entry, merged; each compile id links to its page."""
    from dynscope import stacktrie
    paths = [(c["call_path"], c["compile_row"]) for c in d.compiles
             if "call_path" in c.keys() and c["call_path"] is not None]
    head = '<section id="call-paths"><h2>Call paths that compiled</h2>'
    if not paths:
        why = ("this recording has no call paths (schema v5 added them)" if d.version < 5
               else "no compile was recorded")
        return f"{head}{_none(why)}</section>"
    root = stacktrie.build(paths)

    def link(row):
        c = d.by_row[row]
        return _compile_link(c, f'{d.name(c["run_id"], c["code_id"])} {_cid(c["compile_id"])}')
    return (f'{head}<p class="muted">The call paths from the program\'s entry to every compiled '
            f'frame, merged (a stack trie, as tlparse draws one): the number before a frame is '
            f'the compiles under it.</p>{stacktrie.html(root, esc, link)}</section>')


_PHASES = (("trace", "trace_ns"), ("guards", "guards_ns"), ("graph", "graph_ns"),
           ("backend", "backend_ns"), ("plan", "plan_ns"))


def _compile_time_section(d: _Data) -> str:
    """Every compile's time by phase (compiles.*_ns, schema v5): a table
    sorted by total, that a click on a column sorts again."""
    timed = [c for c in d.compiles if "attempts" in c.keys() and c["attempts"] is not None]
    if not timed:
        why = ("this recording has no compile phases (schema v5 added them)" if d.version < 5
               else "no compile was recorded")
        return f'<section id="compile-time"><h2>Where compile time goes</h2>{_none(why)}</section>'
    rows = []
    for c in sorted(timed, key=lambda c: -(c["duration_ns"] or 0)):
        cells = [esc(c["run_id"]), esc(d.name(c["run_id"], c["code_id"])), _compile_link(c),
                 esc(c["outcome"] or "")]
        for ns in [c["duration_ns"]] + [c[col] for _, col in _PHASES] + [c["events_ns"]]:
            cells.append(f'<span data-v="{ns or 0}">{esc(_dur(ns))}</span>')
        cells.append(esc(c["attempts"]))
        rows.append(cells)
    total = sum(c["duration_ns"] or 0 for c in timed)
    shares = ", ".join(f"{name} {100 * sum(c[col] or 0 for c in timed) / total:.0f}%"
                       for name, col in _PHASES) if total else ""
    table = _table(["#run", "function", "compile", "outcome", "#total"] + [f"#{n}" for n, _ in _PHASES]
                   + ["#events", "#attempts"], rows).replace("<table>", '<table class="sortable">', 1)
    return (f'<section id="compile-time"><h2>Where compile time goes</h2><p class="muted">'
            f'{len(timed)} compiles, {esc(_dur(total))} in all: {esc(shares)}. The phases add up '
            f'to each total (trace: following the bytecode, every attempt; guards: building them; '
            f'graph: making the GraphModule; plan: the rest of the plan\'s making); events, outside '
            f'it, are the events emitted for the compile. Click a column to sort.</p>{table}</section>')


# ---- one page per compile attempt

def _compile_page(d: _Data, c, neighbours, db_label: str) -> str:
    run_id, code_id, epoch = c["run_id"], c["code_id"], c["epoch"]
    co = d.code.get((run_id, code_id), {})
    start = d.run[run_id]["started_at"] if run_id in d.run else None
    name = d.name(run_id, code_id)
    frame = _frame_anchor(run_id, code_id, epoch, c["frame_id"])
    prev, nxt = neighbours
    pager = " · ".join(p for p in (
        _compile_link(prev, f"← {_cid(prev['compile_id'])}") if prev else "",
        _compile_link(nxt, f"{_cid(nxt['compile_id'])} →") if nxt else "") if p)
    facts = [
        ("function", f'<a href="index.html#code-{run_id}-{code_id}">{esc(name)}</a> '
                     f'{_site_span(co.get("filename"), co.get("firstlineno"))}'),
        ("frame", f'<a href="index.html#{frame}">frame {esc(c["frame_id"])}</a> '
                  f'<span class="muted">{_offset_text(c["resume_offset"])}{_epoch_text(epoch)}</span>'),
        ("status", _compile_status(d, c)),
        ("run", f'<a href="index.html#run-{run_id}">run {esc(run_id)}</a>'),
        ("started", esc(f'{_utc(c["started_at"])} ({_since(c["started_at"], start)})'
                        if c["started_at"] is not None else "not recorded")),
        ("took", esc(_dur(c["duration_ns"]))),
        ("produced", esc(f'{c["graphs"] or 0} graph(s), {c["nodes"] or 0} node(s), '
                         f'{c["guards"] or 0} guard(s)')),
    ]
    if "hatches" in c.keys() and c["hatches"]:      # schema v5: what an escape hatch kept in
        facts.append(("kept in by", "<br>".join(esc(h) for h in c["hatches"].splitlines())))
    e = d.own_entry(c)
    if e:
        facts.append(("entry", esc(f'{e["hits"]} hits, {_dur(e["guard_ns"])} checking guards')))
    kv = "".join(f"<dt>{esc(k)}</dt><dd>{v}</dd>" for k, v in facts)
    body = (f'<section><span class="pager">{pager}</span><h2>{esc(name)} {esc(_cid(c["compile_id"]))}</h2>'
            f'<dl class="kv">{kv}</dl></section>')
    if c["frame_compile_id"]:
        body += _recompile_section(d, c)
    body += _ended_section(d, c, start)
    body += _graphs_section(d, c)
    body += _guards_section(d, c)
    title = f"{name} {_cid(c['compile_id'])}"
    nav = (("index.html", "← Report"), (f"index.html#{frame}", "Frame"),
           ("index.html#failures", "Failures and restarts"), ("index.html#breaks", "Graph breaks"))
    return _page(title, f"compile attempt {c['compile_row']} · {db_label}", nav, body)


def _recompile_section(d: _Data, c) -> str:
    run_id, code_id, epoch = c["run_id"], c["code_id"], c["epoch"]
    out = [f'<section id="recompile"><h2>Why it recompiled</h2>'
           f'<p>{esc(c["reason"] or "no reason recorded")}</p>']
    failures = d.row_failures.get(c["compile_row"], [])
    if failures:
        rows = [[_entry_link(d, run_id, code_id, epoch, f["entry_compile_id"]),
                 esc(f["kind"]), f'<code>{esc(f["expr"])}</code>', f'<code>{esc(f["observed"])}</code>',
                 _source_cell(f["filename"], f["lineno"], None, d.failure_sources)] for f in failures]
        out.append("<h3>Each older entry's first failing guard</h3>"
                   + _table(["older entry", "kind", "guard", "observed", "source"], rows))
    out.append('<div id="nearest"><h3>Nearest entry</h3>')
    if not d.has_diffs:
        out.append(_none(f"This recording (schema v{d.version}) has no recompile_diffs table: "
                         f"record with a dynscope whose schema is v4 or newer to see the nearest "
                         f"older entry and every guard of it that failed."))
    else:
        diffs = d.row_diffs.get(c["compile_row"], [])
        out.append(_nearest(d, c, diffs) if diffs else _none("no nearest entry was recorded for this recompile"))
    out.append("</div></section>")
    return "".join(out)


def _entry_link(d: _Data, run_id, code_id, epoch, compile_id) -> str:
    row = d.entry_row(run_id, code_id, epoch, compile_id)
    return _compile_link(d.by_row[row], _cid(compile_id)) if row is not None else esc(_cid(compile_id))


def _nearest(d: _Data, c, diffs) -> str:
    """The older entry nearest to the new inputs, its guards with the failing
    ones marked: what would have had to hold for the call to hit."""
    first = diffs[0]
    entry = first["entry_compile_id"]
    failed = {r["idx"]: r for r in diffs if r["idx"] is not None}
    head = (f'<p>Entry {_entry_link(d, c["run_id"], c["code_id"], c["epoch"], entry)} was the nearest '
            f'to the new inputs: {esc(first["failing"])} of its guards failed. The cost of the miss: '
            f'this compile took {esc(_dur(c["duration_ns"]) or "(not finished)")}.</p>')
    guards = d.entry_guards.get((c["run_id"], c["code_id"], c["epoch"], entry), [])
    rows, shown = [], set()
    for g in guards:
        f = failed.get(g["idx"])
        shown.add(g["idx"])
        guard = f'<code>{esc(g["expr"])}</code>'
        if f and f["expr"] != g["expr"]:   # a compound guard: the part that failed
            guard += f'<br>failed: <code>{esc(f["expr"])}</code>'
        rows.append((bool(f), [esc(g["idx"]), _badge("failed" if f else "held"), esc(g["kind"]), guard,
                               f'<code>{esc(f["observed"])}</code>' if f else "",
                               _source_cell(*_where(f or g), d.guard_sources)]))
    for idx, f in sorted(failed.items()):   # guards of an entry whose own rows were not kept
        if idx not in shown:
            rows.append((True, [esc(idx), _badge("failed"), esc(f["kind"]), f'<code>{esc(f["expr"])}</code>',
                                f'<code>{esc(f["observed"])}</code>', _source_cell(*_where(f))]))
    table = _table(["#idx", "result", "kind", "guard", "observed", "source"], [r for _, r in rows],
                   row_classes=["failed" if failing else "" for failing, _ in rows])
    return head + table


def _where(row):
    return row["filename"], row["lineno"], row.get("user_stack")


def _ended_section(d: _Data, c, start) -> str:
    out = ['<section id="ended"><h2>How the attempt ended</h2>']
    breaks = d.row_breaks.get(c["compile_row"], [])
    for b in breaks:
        stack = _stack(b["user_stack"])
        out.append(f'<p>{_badge("break")} <b>{esc(b["kind"])}</b>: {esc(b["reason"])} at '
                   f'{_site_span(b["filename"], b["lineno"])} '
                   f'<span class="muted">(bytecode offset {esc(b["offset"])})</span></p>')
        if stack:
            out.append(_stack_list(stack))
        out.append(f'<p class="muted">hint: {esc(break_hint(b["kind"], b["reason"], b["filename"]))}</p>')
    skip = d.skip_of.get(c["compile_row"])
    if skip:
        out.append(f'<p>{_badge("skipped")} the frame runs without capture: {esc(skip["reason"])}</p>')
    elif c["outcome"] == "skipped":
        out.append(f'<p>{_badge("skipped")} the frame runs without capture</p>')
    elif c["outcome"] == "error":
        out.append(f'<p>{_badge("error")} the translation failed; the frame ran in the interpreter</p>')
    elif c["outcome"] is None:
        out.append(f'<p>{_badge("compiling")} no compile_end was recorded: still compiling, or the '
                   f'process died</p>')
    elif not breaks:
        out.append(f'<p>{_badge("ok")} no graph break: the frame was captured to its end</p>')
    for l in d.frame_limits.get((c["run_id"], c["code_id"], c["epoch"], c["frame_id"]), []):
        out.append(f'<p>{_badge("cache limit")} the frame reached the cache limit at '
                   f'{esc(_since(l["at"], start))}; last failing guard <code>{esc(l["reason"])}</code></p>')
    out.append("</section>")
    return "".join(out)


def _graph_ops(g) -> list:
    """(op, how it is computed) per node, the right-hand side taken from the
    graph's code where a line assigns that node."""
    rhs = {}
    for line in (g["code"] or "").splitlines():
        target, sep, expr = line.strip().partition(" = ")
        if sep and target.isidentifier():
            rhs.setdefault(target, expr)
    return [(op, rhs.get(op, "")) for op in (g["ops"] or "").split(",") if op]


def _graphs_section(d: _Data, c) -> str:
    graphs = d.row_graphs.get(c["compile_row"], [])
    out = ['<section id="graphs"><h2>Graphs</h2>']
    if not graphs:
        out.append(_none("this attempt compiled no graph"))
    for i, g in enumerate(graphs, start=1):
        out.append(f'<h3>Graph {i} <span class="count">backend {esc(g["backend"])}, '
                   f'{esc(g["nodes"])} nodes, {esc(_dur(g["backend_ns"]))} in the backend</span></h3>')
        ops = [[esc(n), f"<code>{esc(op)}</code>", f"<code>{esc(expr)}</code>"]
               for n, (op, expr) in enumerate(_graph_ops(g), start=1)]
        if ops:
            out.append(_table(["#", "op", "computed as"], ops))
        if g["code"]:
            out.append(f'<pre class="graph-code">{esc(g["code"])}</pre>')
    out.append("</section>")
    return "".join(out)


def _guards_section(d: _Data, c) -> str:
    e = d.own_entry(c)
    out = ['<section id="guards"><h2>Guards</h2>']
    if not e:
        out.append(_none("this attempt made no cache entry, so it has no guards"))
    else:
        guards = d.entry_guards.get((c["run_id"], c["code_id"], c["epoch"], c["compile_id"]), [])
        rows = [[esc(g["idx"]), esc(g["kind"]), f'<code>{esc(g["expr"])}</code>',
                 _source_cell(*_where(g), d.guard_sources)] for g in guards]
        why = ('The source is the user code whose access made the guard; "engine" marks guards '
               'the engine adds itself.' if d.guard_sources else
               f'This recording (schema v{d.version}) does not say where guards came from (v4 does).')
        out.append(f'<p class="muted">A call runs this entry when every guard holds. {esc(why)}</p>'
                   + _table(["#idx", "kind", "guard", "source"], rows)
                   if rows else _none("the entry has no guards"))
    out.append("</section>")
    return "".join(out)


# ---------------------------------------------------------------------------

def redaction_note(con: sqlite3.Connection, redacted: bool) -> str:
    """Whether the values shown are redacted: by this report (--redact), or
    while recording (runs.redacted, schema v5), or not at all."""
    if redacted:
        return "redacted: str and bytes values are their type, length and a keyed hash"
    cols = {r[1] for r in con.execute("PRAGMA table_info(runs)")}
    words = ([w for (w,) in con.execute("SELECT redacted FROM runs")] if "redacted" in cols else [])
    if words and all(words):
        return f"redacted while recording ({', '.join(sorted(set(words)))})"
    if any(words):
        return "partly redacted: some runs were recorded with DYNSCOPE_REDACT, some not"
    return "not redacted: guarded values are shown as recorded"


def write_site(con: sqlite3.Connection, out_dir: str, db_label: str, redacted: bool = False) -> list:
    """Write index.html and one page per compile attempt into out_dir (made
    if missing); return the paths written.  Raises sqlite3.Error for a
    database it cannot read, OSError for a directory it cannot write."""
    d = _Data(con)
    db_label += " · " + redaction_note(con, redacted)   # on every page (dynscope/redact.py)
    pages = {"index.html": _index(d, db_label)}
    per_code = _group(d.compiles, "run_id", "code_id")
    for rows in per_code.values():
        for i, c in enumerate(rows):
            neighbours = (rows[i - 1] if i else None, rows[i + 1] if i + 1 < len(rows) else None)
            pages[f"compile-{c['compile_row']}.html"] = _compile_page(d, c, neighbours, db_label)
    os.makedirs(out_dir, exist_ok=True)
    written = []
    for name, text in pages.items():
        path = os.path.join(out_dir, name)
        outfile.write_text(path, text)      # no group/world write, never through a symlink
        written.append(path)
    return written
