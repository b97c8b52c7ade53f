"""python -m dynscope COMMAND ...

Commands:
  run [--db FILE] [--capture-all | --capture-tensors] [--backend NAME] (script.py | -m module) [args...]
                         run a program, recording engine events to FILE;
                         --capture-all captures every frame (those with no
                         array in reach too), --capture-tensors only frames
                         with an array or tensor in reach (as torch.compile)
  sql FILE... "SELECT ..."
                         query a dynscope database read-only (--csv, --json);
                         several files are queried merged
  report FILE...         summary: top recompiling functions, nearest-entry
                         diffs, break reasons, cache-limit hits, compile time
                         by phase, call paths (--redact: values hashed); several
                         files (a job's ranks): merged, with a run column and
                         the divergence between runs
  merge OUT.db FILE...   fold several databases into one (docs/sql.md)
  diff A.db B.db         what changed from A to B (--json); exit status 1
                         when B regresses (more recompiles, breaks, graphs)
  repro FILE --compile [FUNCTION:]ID [-o repro.py] [--minify]
                         a standalone script that rebuilds that compile's inputs
                         and checks its recorded outcome happens again; for a
                         backend error, --minify keeps the fewest graph nodes
                         that still make the backend fail
  whatif FILE            the recompiles a dynamic source would have removed,
                         with the call to make, from the recorded guard
                         failures (--json)
  report --html DIR FILE the same recording as a static HTML site in DIR
                         (index.html, one page per compile: docs/report.md)
  explain FILE.py:FUNC   run FUNC (no arguments) from FILE.py under
                         dynscope.explain and print the report
  export --chrome-trace OUT.json FILE
                         the recording as a Chrome trace (Perfetto,
                         chrome://tracing); OUT - is stdout
  breaks [--markdown]    the graph-break and skip types (ids DS0001..., class,
                         hint); --markdown renders docs/breaks.md
  top FILE [options]     dyntop, the live TUI over a dynscope database (runs
                         build/dyntop; its options: top --help, docs/dyntop.md)
"""
from __future__ import annotations

import argparse
import os
import runpy
import sys


def _cmd_explain(args: argparse.Namespace) -> int:
    import dynscope

    target = args.target
    path, sep, func_name = target.rpartition(":")
    if not sep or not path or not func_name:
        print(f"dynscope explain: expected FILE.py:FUNC, got {target!r}", file=sys.stderr)
        return 2
    if not os.path.isfile(path):
        print(f"dynscope explain: no such file: {path}", file=sys.stderr)
        return 2
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    namespace = runpy.run_path(path, run_name="__dynscope_explain__")
    fn = namespace.get(func_name)
    if fn is None:
        print(f"dynscope explain: {path} defines no {func_name!r}", file=sys.stderr)
        return 2
    if not callable(fn):
        print(f"dynscope explain: {func_name!r} in {path} is not callable", file=sys.stderr)
        return 2
    try:
        out = dynscope.explain(fn)()
    except Exception as exc:  # the reproducer itself failed: show both
        report = getattr(exc, "explain_output", None)
        if report is not None:
            print(report)
        print(f"dynscope explain: {func_name}() raised {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(out)
    return 0


def _capture_all_prefixes() -> tuple:
    """--capture-all: every frame but dynscope's own and the import system."""
    import importlib
    import dynscope
    return (os.path.dirname(os.path.abspath(dynscope.__file__)) + os.sep,
            os.path.dirname(os.path.abspath(importlib.__file__)) + os.sep,
            "<frozen ")


def _cmd_run(args: argparse.Namespace) -> int:
    import dynscope

    if args.db:
        try:
            dynscope.record(args.db)
        except OSError as exc:
            print(f"dynscope run: {exc}", file=sys.stderr)
            return 2
        except ValueError as exc:      # DYNSCOPE_REDACT: never record what was to be hidden
            print(f"dynscope run: DYNSCOPE_REDACT: {exc}; not run", file=sys.stderr)
            return 2
    program = args.program
    if args.module:
        sys.argv = [args.module] + program
    else:
        if not program:
            print("dynscope run: give a script (or -m module) to run", file=sys.stderr)
            return 2
        if not os.path.isfile(program[0]):
            print(f"dynscope run: no such file: {program[0]}", file=sys.stderr)
            return 2
        sys.argv = list(program)
        sys.path.insert(0, os.path.dirname(os.path.abspath(program[0])))
    region = None
    if args.capture_all or args.capture_tensors:
        dynscope.config.skip_prefixes = _capture_all_prefixes()
        # --capture-all is every frame; --capture-tensors leaves a frame with
        # no array or tensor in reach to the interpreter (it could only make
        # an empty graph)
        dynscope.config.skip_tensorless_frames = bool(args.capture_tensors)
        # the program's warnings stay its own: limits are counted, reported at exit
        dynscope.config.cache_limit_warning = False
        region = dynscope.optimize(args.backend)
        region.__enter__()
    try:
        if args.module:
            runpy.run_module(args.module, run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(program[0], run_name="__main__")
        return 0
    except SystemExit as exc:
        code = exc.code
        if code is None:
            return 0
        if isinstance(code, int):
            return code
        print(code, file=sys.stderr)
        return 1
    finally:
        if region is not None:
            region.__exit__(None, None, None)
        # one summary line for the whole run (the functions' own warnings,
        # at most one each, were issued as they happened unless --capture-all)
        limits = dynscope._C.counters()["cache_limits"]
        if limits:
            where = f" (table cache_limits of {args.db})" if args.db else ""
            print(f"dynscope run: {limits} function(s) reached cache_size_limit "
                  f"({dynscope.config.cache_size_limit}) and ran on without capture{where}",
                  file=sys.stderr)
        stats = dynscope.stop_recording()
        if stats and stats.get("dropped"):
            print(f"dynscope run: {stats['dropped']} events dropped (see runs.dropped_events)",
                  file=sys.stderr)


def _open_ro(path: str):
    import sqlite3
    if not os.path.exists(path):
        raise FileNotFoundError(f"no such database: {path}")
    con = sqlite3.connect(f"file:{os.path.abspath(path)}?mode=ro", uri=True)
    try:
        app_id = con.execute("PRAGMA application_id").fetchone()[0]
    except sqlite3.DatabaseError as exc:
        con.close()
        raise ValueError(f"{path} is not an SQLite database ({exc})") from None
    if app_id != 0x44594E53:
        con.close()
        raise ValueError(f"{path} is not a dynscope database")
    from dynscope import places
    places.install(con)          # readable_path(): an installed file from its package on
    return con


def _open_or_say(cmd: str, path: str):
    """_open_ro for a command: None after one line on stderr saying why."""
    import sqlite3
    if os.path.isdir(path):   # SQLite would say "disk I/O error"
        print(f"dynscope {cmd}: {path} is a directory", file=sys.stderr)
        return None
    try:
        return _open_ro(path)
    except (FileNotFoundError, ValueError) as exc:
        print(f"dynscope {cmd}: {exc}", file=sys.stderr)
    except sqlite3.Error as exc:   # raised by connect: no permission, an unreadable file
        print(f"dynscope {cmd}: cannot open {path}: {exc}", file=sys.stderr)
    return None


def _format_table(header, rows) -> str:
    cells = [[("NULL" if v is None else str(v)) for v in row] for row in rows]
    widths = [len(h) for h in header]
    for row in cells:
        for i, v in enumerate(row):
            widths[i] = max(widths[i], len(v))
    line = "  ".join(h.ljust(w) for h, w in zip(header, widths))
    rule = "  ".join("-" * w for w in widths)
    body = ["  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip() for row in cells]
    return "\n".join([line.rstrip(), rule] + body)


def _cmd_sql(args: argparse.Namespace) -> int:
    import csv
    import json
    import sqlite3

    if len(args.db) > 1:      # a job's files: the query runs on them merged
        with _merged("sql", args.db) as path:
            if path is None:
                return 2
            return _cmd_sql(argparse.Namespace(**{**vars(args), "db": [path]}))
    try:
        con = _open_ro(args.db[0])
    except (FileNotFoundError, ValueError) as exc:
        print(f"dynscope sql: {exc}", file=sys.stderr)
        return 2
    try:
        cur = con.execute(args.query)
        header = [d[0] for d in cur.description] if cur.description else []
        rows = cur.fetchall()
    except sqlite3.Error as exc:
        print(f"dynscope sql: {exc}", file=sys.stderr)
        return 1
    finally:
        con.close()
    if args.json:
        print(json.dumps([dict(zip(header, r)) for r in rows], indent=1))
    elif args.csv:
        w = csv.writer(sys.stdout)
        w.writerow(header)
        w.writerows(rows)
    elif header:
        print(_format_table(header, rows))
        print(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")
    return 0


# The schema version whose views (store/schema.c) the report reads.
_REPORT_SCHEMA = 6


def _merged(cmd: str, paths: list[str]):
    """Several files as one merged database (dynscope/merge.py), or the one
    file; a context manager giving its path, or None after reporting why
    (one line; the caller exits 2)."""
    from dynscope import merge

    class Ctx:
        def __enter__(self):
            self.m = merge.Merged(paths)
            try:
                return self.m.__enter__()
            except (merge.MergeError, OSError) as exc:
                print(f"dynscope {cmd}: {exc}", file=sys.stderr)
                return None

        def __exit__(self, *exc):
            self.m.__exit__(*exc)
    return Ctx()


_REDACT_HELP = ("read the recording through a redacted copy: each str or bytes value a guard "
                "expected or saw becomes its type, length and a keyed hash (docs/report.md)")


def _cmd_breaks(args: argparse.Namespace) -> int:
    from dynscope import breaks
    print(breaks.markdown() if args.markdown else breaks.listing(), end="" if args.markdown else "\n")
    return 0


def _cmd_merge(args: argparse.Namespace) -> int:
    """Fold several files into OUT (dynscope/merge.py)."""
    import sqlite3
    from dynscope import merge, redact
    try:
        n = merge.merge(args.out, args.db)
        if args.redact:               # the output only: the inputs stay as they are
            redact.redact_file(args.out)
    except (merge.MergeError, OSError, sqlite3.Error) as exc:
        print(f"dynscope merge: {exc}", file=sys.stderr)
        return 2
    print(f"dynscope merge: {n} run(s) from {len(args.db)} file(s) into {args.out}"
          + (", redacted" if args.redact else ""))
    return 0


def _cmd_repro(args: argparse.Namespace) -> int:
    """A repro script for one compile (dynscope/repro.py)."""
    import sqlite3
    from dynscope import merge, repro
    try:
        return repro.main(args.db, args.compile, args.output, minify=args.minify,
                          backend=args.backend)
    except (merge.MergeError, repro.ReproError, sqlite3.Error, OSError) as exc:
        print(f"dynscope repro: {exc}", file=sys.stderr)
        return 2


def _cmd_whatif(args: argparse.Namespace) -> int:
    """What a dynamic source would have removed (dynscope/whatif.py)."""
    import sqlite3
    from dynscope import merge, whatif
    try:
        return whatif.main(args.db, args.json)
    except (merge.MergeError, sqlite3.Error) as exc:
        print(f"dynscope whatif: {exc}", file=sys.stderr)
        return 2


def _cmd_diff(args: argparse.Namespace) -> int:
    """What changed from A to B; status 1 when B regresses (dynscope/diff.py)."""
    import sqlite3
    from dynscope import diff, merge
    try:
        return diff.main(args.a, args.b, args.json)
    except (merge.MergeError, sqlite3.Error) as exc:
        print(f"dynscope diff: {exc}", file=sys.stderr)
        return 2


def _cmd_report(args: argparse.Namespace) -> int:
    """Print the summary of one file, or of several (a job's ranks or
    hosts) merged, with a run column and the divergence between runs;
    --redact: of a redacted copy (dynscope/redact.py)."""
    paths = args.db
    if len(paths) == 1:
        return _report_redacted(args, paths[0], paths[0])
    with _merged("report", paths) as path:
        if path is None:
            return 2
        return _report_redacted(args, path, " ".join(paths))


def _report_redacted(args: argparse.Namespace, db: str, title: str) -> int:
    """_report_file, through a redacted copy when --redact asks."""
    if not args.redact:
        return _report_file(args, db, title)
    import sqlite3
    from dynscope import redact
    if _open_or_say("report", db) is None:       # a bad file: the same one line as without
        return 2
    copy = redact.redacted_copy(db)
    try:
        path = copy.__enter__()
    except (sqlite3.Error, OSError) as exc:
        print(f"dynscope report: {title}: cannot redact: {exc}", file=sys.stderr)
        return 2
    try:                            # what the report meets is its own to say
        return _report_file(args, path, title)
    finally:
        copy.__exit__(None, None, None)


def _report_file(args: argparse.Namespace, db: str, title: str) -> int:
    """The summary of the database at db.  Every section is one of the
    schema's views (docs/sql.md, Views; defined once, in store/schema.c),
    so the report says what dyntop and `dynscope sql` users see."""
    import sqlite3

    con = _open_or_say("report", db)
    if con is None:
        return 2
    try:
        version = con.execute("PRAGMA user_version").fetchone()[0]
        if version < _REPORT_SCHEMA:
            # The views an older file lacks become TEMP views of this
            # read-only connection (the file is not written), from the same
            # definitions the migrations use, as dyntop does.
            from dynscope import _C
            try:
                con.executescript(_C.store_temp_views_sql(version))
            except (ValueError, sqlite3.Error) as exc:
                print(f"dynscope report: {db}: {exc}", file=sys.stderr)
                return 2
        if args.html is not None:
            return _report_html(con, args, title)
        runs = con.execute("SELECT count(*), coalesce(sum(dropped_events), 0)"
                           " FROM run_summary").fetchone()
        print(f"dynscope report: {title}")
        print(f"  {runs[0]} run(s), {runs[1]} events dropped")
        # several runs (a job's ranks): each row says whose it is
        from dynscope import ranks
        labels = ranks.run_labels(con) if runs[0] > 1 else {}

        def table(header, rows):
            if labels:
                header = ["run"] + header
                rows = [(labels.get(r[0], r[0]),) + tuple(r[1:]) for r in rows]
            else:
                rows = [tuple(r[1:]) for r in rows]
            return _format_table(header, rows) if rows else "  (none)"
        print()
        print("Top recompiling functions (last failing guard)")
        rows = con.execute("SELECT run_id, function_name(run_id, code_id, name), readable_path(filename) || ':' || firstlineno, recompiles,"
                           " last_failure FROM code_summary WHERE recompiles > 0"
                           " ORDER BY recompiles DESC, run_id, code_id LIMIT ?",
                           (args.limit,)).fetchall()
        print(table(["function", "where", "recompiles", "last failing guard"], rows))
        if version >= 4:
            print()
            print("Recompiles: the nearest older entry and the guards of it that failed")
            rows = con.execute(
                "SELECT d.run_id, function_name(co.run_id, co.code_id, co.name, d.compile_row), d.compile_id, d.entry_compile_id, d.failing,"
                " d.expr || ' (observed ' || coalesce(d.observed, '?') || ')',"
                " coalesce(readable_path(d.filename) || ':' || d.lineno, 'engine'),"
                " printf('%.1f', d.capture_ns / 1e6)"
                " FROM recompile_diffs d JOIN code_objects co USING (run_id, code_id)"
                " ORDER BY d.compile_row DESC, d.idx LIMIT ?", (args.limit,)).fetchall()
            print(table(["function", "compile", "nearest", "failing", "failing guard",
                         "guard made at", "capture ms"], rows))
        print()
        print("Automatic dynamic (a recompile on a number's value or a size)")
        rows = con.execute("SELECT run_id, function_name(run_id, code_id, name, compile_row),"
                           " readable_path(filename) || ':' || firstlineno, compile_id, reason FROM recompiles WHERE reason LIKE '%is now dynamic%'"
                           " OR reason LIKE '%stays static (the code needs%'"
                           " ORDER BY started_at LIMIT ?", (args.limit,)).fetchall()
        print(table(["function", "where", "compile", "recompile reason"], rows))
        print()
        print("Sources that keep recompiling (3 recompiles or more on one), and what to do")
        from dynscope import advice
        print(table(["function", "where", "source", "recompiles", "what to do"],
                    advice.recompile_advice(con)))
        print()
        if version >= 4:
            _report_whatif(con, table, args.limit)
        _report_break_costs(con, args.limit)
        if version >= 4:
            print("Graph breaks and skipped frames by type (docs/breaks.md)")
            rows = con.execute(
                "SELECT NULL, break_type, break_class, what, count(*),"
                " count(DISTINCT coalesce(site, '')), min(reason) FROM ("
                "  SELECT break_type, break_class, 'break' AS what, reason,"
                "         readable_path(filename) || ':' || lineno AS site FROM graph_breaks"
                "  UNION ALL"
                "  SELECT s.break_type, s.break_class, 'skip', s.reason,"
                "         readable_path(co.filename) || ':' || co.firstlineno FROM frame_skips s"
                "  JOIN code_objects co USING (run_id, code_id))"
                " WHERE break_type IS NOT NULL"
                " GROUP BY break_type, break_class, what ORDER BY count(*) DESC, break_type"
                " LIMIT ?", (args.limit,)).fetchall()
            print(_format_table(["type", "class", "what", "count", "sites", "a reason"],
                                [r[1:] for r in rows]) if rows else "  (none)")
            print()
        if version >= 5:
            _report_compile_time(con, table, args.limit)
            _report_call_paths(con)
            _report_hatches(con, table, args.limit)
        print("Cache-limit hits")
        rows = con.execute("SELECT run_id, function_name(run_id, code_id, name), readable_path(filename) || ':' || firstlineno, reason"
                           " FROM cache_limit_hits ORDER BY at").fetchall()
        print(table(["function", "where", "last failing guard"], rows))
        if labels:
            _report_divergence(con)
    except sqlite3.Error as exc:
        print(f"dynscope report: {exc}", file=sys.stderr)
        return 1
    finally:
        con.close()
    return 0


def _report_break_costs(con, limit: int) -> None:
    """The graph-break sites, costliest first: the time outside graphs each
    cost, its share of its function's time, the calls through it and the
    graphs it added (dynscope/breakcost.py); most frequent first, said once,
    when the file has no costs."""
    from dynscope import breakcost
    found = breakcost.sites(con)
    top = found.rows[:limit]
    if not top:
        print("Top graph-break sites")
        print("  (none)")
    elif found.not_measured:
        print(f"Top graph-break sites, most frequent first (costs not measured: {found.not_measured})")
        rows = [(s["kind"], s["reason"], _site_text(s), s["breaks"]) for s in top]
        print(_format_table(["kind", "reason", "site", "breaks"], rows))
    else:
        print("Top graph-break sites by cost (time outside graphs because of each break,"
              " estimated from sampled calls)")
        rows = [(s["kind"], s["reason"], _site_text(s), s["breaks"],
                 breakcost.duration(s["cost_ns"]) if s["samples"] else "not timed",
                 breakcost.share(s) or "-", s["calls"], s["extra_graphs"] if s["samples"] else "-")
                for s in top]
        print(_format_table(["kind", "reason", "site", "breaks", "cost", "share", "calls",
                             "extra graphs"], rows))
    print()


def _site_text(site: dict) -> str | None:
    """file:line of a break site as users read it (dynscope/places.py);
    None (NULL) when either is unknown."""
    from dynscope import places
    if site["filename"] is None or site["lineno"] is None:
        return None
    return f"{places.readable(site['filename'])}:{site['lineno']}"


COMPILE_PHASES = ("trace_ns", "guards_ns", "graph_ns", "backend_ns", "plan_ns")


def _report_compile_time(con, table, limit: int) -> None:
    """Where compile time goes: the slowest compiles with their phases
    (compiles.*_ns, schema v5), then every compile's summed."""
    print("Where compile time goes (ms; the phases add up to the total, events are outside it)")
    # ns from SQL, ms formatted here: SQLite's printf rounds some halves
    # otherwise than Python does (and than explain, which reads the engine)
    cols = ", ".join(f"c.{p}" for p in COMPILE_PHASES)
    rows = con.execute(
        f"SELECT c.run_id, function_name(co.run_id, co.code_id, co.name, c.compile_row),"
        f" '[' || c.compile_id || ']', c.duration_ns, {cols}, c.events_ns, c.attempts"
        " FROM compiles c JOIN code_objects co USING (run_id, code_id)"
        " WHERE c.attempts IS NOT NULL ORDER BY c.duration_ns DESC LIMIT ?", (limit,)).fetchall()
    sums = ", ".join(f"sum({p})" for p in COMPILE_PHASES)
    total = con.execute(
        f"SELECT NULL, '(all ' || count(*) || ' compiles)', '', sum(duration_ns),"
        f" {sums}, sum(events_ns), sum(attempts)"
        " FROM compiles WHERE attempts IS NOT NULL HAVING count(*) > 0").fetchall()

    def ms(ns):
        return "" if ns is None else f"{ns / 1e6:.2f}"
    rows = [(*r[:3], *(ms(v) for v in r[3:-1]), r[-1]) for r in rows + total]
    print(table(["function", "compile", "total", "trace", "guards", "graph", "backend", "plan",
                 "events", "attempts"], rows))
    print()


def _report_whatif(con, table, limit: int) -> None:
    """What a dynamic source would have removed (dynscope/whatif.py)."""
    from dynscope import whatif
    print("What if a source were dynamic (from the recorded guard failures)")
    rows = [(f["run_id"], f["function"], f["frame"], f["compiles"], s["text"])
            for f in whatif.analyse(con) for s in f["suggestions"]][:limit]
    print(table(["function", "frame", "compiles", "what if"], rows))
    print()


def _report_call_paths(con) -> None:
    """The stack trie: every compile's call path from the program's entry,
    merged (dynscope/stacktrie.py)."""
    from dynscope import stacktrie
    print("Call paths that compiled (stack trie; compiles under each frame)")
    rows = stacktrie.lines(stacktrie.from_db(con))
    print(_format_table(["compiles", "call path"], rows) if rows else "  (none)")
    print()


def _report_hatches(con, table, limit: int) -> None:
    """What the program's escape hatches (dynscope.disable, allow_in_graph,
    substitute_in_graph; torch's marks) kept in a graph, and the calls and
    frames they kept out (break type DS0032)."""
    print("Escape hatches: what a mark kept in a graph or out of capture")
    kept_in = []
    for run_id, name, where, cid, hatches in con.execute(
            "SELECT c.run_id, function_name(co.run_id, co.code_id, co.name, c.compile_row),"
            " readable_path(co.filename) || ':' || co.firstlineno, c.compile_id,"
            " c.hatches FROM compiles c JOIN code_objects co USING (run_id, code_id)"
            " WHERE c.hatches IS NOT NULL ORDER BY c.compile_row LIMIT ?", (limit,)):
        kept_in += [(run_id, name, where, f"[{cid}]", "in", h) for h in hatches.splitlines()]
    kept_out = con.execute(
        "SELECT run_id, name, site, '', 'out', reason || ' (' || count(*) || 'x)' FROM ("
        "  SELECT b.run_id, function_name(co.run_id, co.code_id, co.name) AS name, readable_path(b.filename) || ':' || b.lineno AS site, b.reason"
        "  FROM graph_breaks b JOIN code_objects co USING (run_id, code_id)"
        "  WHERE b.break_type = 'DS0032'"
        "  UNION ALL"
        "  SELECT s.run_id, function_name(co.run_id, co.code_id, co.name), readable_path(co.filename) || ':' || co.firstlineno, s.reason"
        "  FROM frame_skips s JOIN code_objects co USING (run_id, code_id)"
        "  WHERE s.break_type = 'DS0032')"
        " GROUP BY run_id, name, site, reason ORDER BY count(*) DESC LIMIT ?", (limit,)).fetchall()
    print(table(["function", "where", "compile", "kept", "by"], kept_in + kept_out))
    print()


def _report_divergence(con) -> None:
    """The functions whose compiles, graphs, breaks or failing guards differ
    between runs (dynscope/ranks.py), the odd runs named."""
    from dynscope import ranks
    print()
    print("Divergence between runs (a rank that compiles or breaks differently)")
    rows = []
    for d in ranks.divergence(con):
        where = f"{os.path.basename(d['filename'])}:{d['firstlineno']}"
        norm = next(lbl for lbl in d["runs"] if lbl not in d["odd"])
        for lbl in d["odd"]:
            odd, usual = d["runs"][lbl], d["runs"][norm]
            what = "; ".join(
                f"{k} {odd[k]} vs {usual[k]}" if k in ("compiles", "graphs")
                else f"{k}: +{len(set(odd[k]) - set(usual[k]))} -{len(set(usual[k]) - set(odd[k]))}"
                for k in d["differs"])
            rows.append((d["function"], where, lbl, what))
    print(_format_table(["function", "where", "odd run", f"differs from the others"], rows)
          if rows else "  (none: every run compiled and broke alike)")


def _report_html(con, args: argparse.Namespace, title: str) -> int:
    """report --html DIR: the site is dynscope/html_report.py's; a database
    it cannot read or a DIR it cannot write is one line and exit 2."""
    import sqlite3
    from dynscope import html_report
    try:
        pages = html_report.write_site(con, args.html, title, redacted=args.redact)
    except sqlite3.Error as exc:
        print(f"dynscope report: {title}: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"dynscope report: cannot write {args.html}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    print(f"dynscope report: {len(pages)} pages in {os.path.join(args.html, 'index.html')}")
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    """The logic is dynscope/export.py's; every bad input or output is one
    line on stderr and status 2."""
    from dynscope import export

    con = _open_or_say("export", args.db)
    if con is None:
        return 2
    con.close()
    if not args.redact:
        return _export(args, args.db)
    import sqlite3
    from dynscope import redact
    copy = redact.redacted_copy(args.db)
    try:
        path = copy.__enter__()
    except (sqlite3.Error, OSError) as exc:
        print(f"dynscope export: {args.db}: cannot redact: {exc}", file=sys.stderr)
        return 2
    try:
        return _export(args, path)
    finally:
        copy.__exit__(None, None, None)


def _export(args: argparse.Namespace, db: str) -> int:
    """The trace of the database at db (args.db, or its redacted copy)."""
    from dynscope import export
    con = _open_or_say("export", db)
    if con is None:
        return 2
    try:   # the source named (and never overwritten) is the user's file, a copy or not
        export.write_chrome_trace(con, args.db, args.chrome_trace)
    except export.ExportError as exc:
        print(f"dynscope export: {exc}", file=sys.stderr)
        return 2
    finally:
        con.close()
    return 0


def _dyntop_path() -> str:
    """The dyntop binary: in the package when installed (pip install ., a
    wheel), else build/dyntop of this checkout (made by `make`)."""
    pkg = os.path.dirname(os.path.abspath(__file__))
    installed = os.path.join(pkg, "dyntop")
    if os.access(installed, os.X_OK):
        return installed
    return os.path.join(os.path.dirname(pkg), "build", "dyntop")


def dyntop_main() -> int:
    """The `dyntop` command of an installed dynscope: every argument to dyntop."""
    return _cmd_top(sys.argv[1:])


def _cmd_top(argv: list[str]) -> int:
    """Replace this process with dyntop; every argument goes to it."""
    exe = _dyntop_path()
    if not os.access(exe, os.X_OK):
        print(f"dynscope top: {exe} is not built; run `make` (or `make dyntop`) in "
              f"{os.path.dirname(os.path.dirname(exe))}", file=sys.stderr)
        return 2
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(exe, [exe] + list(argv))
    return 127  # not reached


# `run`'s own options that take a value (_split_run_argv).
_RUN_VALUED = {"--db", "--backend"}


def _split_run_argv(argv: list[str]) -> tuple[list[str], str | None, list[str]]:
    """Split `run`'s arguments: (dynscope's options, the -m module or None,
    the program's argv).  dynscope's options end at `-m MODULE`, at the
    script (the first word that is not one of them) or at `--` (dropped);
    everything after belongs to the program, unchanged."""
    own: list[str] = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            return own, None, argv[i + 1:]
        if a == "-m" or (a.startswith("-m") and len(a) > 2):
            if a == "-m":
                if i + 1 >= len(argv):
                    return own + ["-m"], None, []     # argparse says what is missing
                return own, argv[i + 1], argv[i + 2:]
            return own, a[2:], argv[i + 1:]
        name = a.split("=", 1)[0]
        if name in _RUN_VALUED:
            own.append(a)
            if "=" not in a and i + 1 < len(argv):
                own.append(argv[i + 1])
                i += 1
        elif a.startswith("-") and a != "-":
            own.append(a)          # ours (--capture-all, -h ...), or argparse reports it
        else:
            return own, None, argv[i:]
        i += 1
    return own, None, []


def main(argv: list[str] | None = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    if argv and argv[0] == "top":
        # dyntop parses its own options (argparse would take -b, -n, -d ...).
        return _cmd_top(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m dynscope",
                                     description="dynscope: a capture engine for CPython, built to be watched.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    p = sub.add_parser("run", help="run a program, recording engine events to a database")
    p.add_argument("--db", metavar="FILE", help="record to this dynscope database")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--capture-all", action="store_true",
                      help="capture every frame from program start, those with no array or tensor "
                           "in reach too (not dynscope's own nor the import system)")
    mode.add_argument("--capture-tensors", action="store_true",
                      help="capture, from program start, every frame with an array or tensor in "
                           "reach; the others run plain (config.skip_tensorless_frames)")
    p.add_argument("--backend", default="eager",
                   help="backend for --capture-all / --capture-tensors (default: eager)")
    p.add_argument("-m", dest="module", metavar="MODULE",
                   help="run a module, as python -m; every argument after it is the module's")
    p.add_argument("program", nargs="*", metavar="script.py [args...]",
                   help="the script and its arguments, passed on unchanged (an optional "
                        "-- may stand before the script)")
    p.set_defaults(func=_cmd_run)
    p = sub.add_parser("sql", help="query a dynscope database read-only (several: merged)")
    p.add_argument("db", metavar="FILE", nargs="+")
    p.add_argument("query", metavar='"SELECT ..."')
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--csv", action="store_true", help="print CSV")
    fmt.add_argument("--json", action="store_true", help="print a JSON array of objects")
    p.set_defaults(func=_cmd_sql)
    p = sub.add_parser("report", help="summary of a dynscope database (several: merged, with"
                                      " the divergence between their runs)")
    p.add_argument("db", metavar="FILE", nargs="+")
    p.add_argument("--limit", type=int, default=10, help="rows per section (default 10)")
    p.add_argument("--html", metavar="DIR",
                   help="write a static HTML report (index.html, a page per compile) into DIR")
    p.add_argument("--redact", action="store_true", help=_REDACT_HELP)
    p.set_defaults(func=_cmd_report)
    p = sub.add_parser("breaks", help="list the graph-break and skip types (docs/breaks.md)")
    p.add_argument("--markdown", action="store_true", help="print docs/breaks.md")
    p.set_defaults(func=_cmd_breaks)
    p = sub.add_parser("merge", help="fold several dynscope databases (a job's ranks) into one")
    p.add_argument("out", metavar="OUT.db")
    p.add_argument("db", metavar="FILE", nargs="+")
    p.add_argument("--redact", action="store_true", help="redact OUT as report --redact reads"
                   " a file (the inputs are not changed)")
    p.set_defaults(func=_cmd_merge)
    p = sub.add_parser("diff", help="what changed between two recordings; exit 1 when B regresses")
    p.add_argument("a", metavar="A.db")
    p.add_argument("b", metavar="B.db")
    p.add_argument("--json", action="store_true", help="print the difference as JSON")
    p.set_defaults(func=_cmd_diff)
    p = sub.add_parser("repro", help="a standalone script that rebuilds one compile's inputs"
                                     " and checks its recorded outcome happens again")
    p.add_argument("db", metavar="FILE")
    p.add_argument("--compile", required=True, metavar="[FUNCTION:]ID",
                   help="the compile, as 'smooth:6/1' (or '6/1' when one function has that id)")
    p.add_argument("-o", "--output", metavar="repro.py", help="write the script there (default stdout)")
    p.add_argument("--minify", action="store_true",
                   help="for a compile the backend failed on: run the backend now and keep the"
                        " fewest graph nodes on which it still raises the same exception type")
    p.add_argument("--backend", metavar="MODULE:NAME",
                   help="where the backend is, when it is neither registered nor defined in the"
                        " compiled function's file (MODULE:NAME or FILE.py:NAME)")
    p.set_defaults(func=_cmd_repro)
    p = sub.add_parser("whatif", help="the recompiles a dynamic source would have removed,"
                                      " from the recorded guard failures")
    p.add_argument("db", metavar="FILE")
    p.add_argument("--json", action="store_true", help="print the answers as JSON")
    p.set_defaults(func=_cmd_whatif)
    p = sub.add_parser("explain", help="explain one call of a function that takes no arguments")
    p.add_argument("target", metavar="FILE.py:FUNC")
    p.set_defaults(func=_cmd_explain)
    p = sub.add_parser("export", help="write a dynscope database as a Chrome trace"
                                      " (Perfetto, chrome://tracing)")
    p.add_argument("--chrome-trace", metavar="OUT.json", required=True,
                   help="the Trace Event Format JSON file to write (- for stdout)")
    p.add_argument("db", metavar="FILE")
    p.add_argument("--redact", action="store_true", help=_REDACT_HELP)
    p.set_defaults(func=_cmd_export)
    sub.add_parser("top", add_help=False,
                   help="dyntop: the live TUI over a dynscope database (top FILE [options];"
                        " top --help lists them)")
    program = None
    if argv and argv[0] == "run":
        # What follows the module or the script is the program's, unchanged
        # (as python -m cProfile and coverage run take it): argparse would
        # read the program's own options (-q, --flag) as ours.
        own, module, program = _split_run_argv(argv[1:])
        argv = ["run"] + own + (["-m", module] if module is not None else [])
    args = parser.parse_args(argv)
    if program is not None:
        args.program = program
    if args.command is None:
        parser.print_help()
        return 2
    return args.func(args)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:
        # `report ... | head`: the reader left.  Our own output only: a program
        # under `run` meets its own BrokenPipeError inside main(), unchanged.
        if sys.argv[1:2] == ["run"]:
            raise
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())   # no error at exit flush
        sys.exit(141)
