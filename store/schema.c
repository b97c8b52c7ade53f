/*
 * schema.c -- the dynscope database layout, its version and its migrations
 * (DESIGN.md 4.3 and 6; every table and column is documented in docs/sql.md).
 *
 * A dynscope file carries PRAGMA application_id = STORE_APPLICATION_ID and
 * PRAGMA user_version = its schema version.  The layout is defined only by
 * migrations: migration v takes version v-1 to v, and migration 1 (from the
 * empty file) is the whole v1 layout.  A new file runs every migration in
 * turn, so a fresh file and a migrated one are the same by construction, and
 * the migration path is exercised by every `store_open` of a new file.
 *
 * The views are the read model's shared queries (docs/sql.md, Views):
 * each is defined once below, created in the file by the migration of the
 * version that added it, and by a reader of an older file as a TEMP view of
 * its own connection (store_schema_temp_views).
 *
 * Invariants: every migration runs inside the caller's IMMEDIATE
 * transaction and is pure SQL text (no bound values, nothing from users);
 * a migration never drops data: tables whose keys change are rebuilt and
 * their rows copied; a released migration's text, and so a view's, never
 * changes; a view reads only tables and columns every readable version
 * (STORE_READ_MIN_VERSION on) has.
 */
#include "store_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- version 1: the first layout ---- */

static const char migration_1[] =
    "CREATE TABLE runs (\n"
    "    run_id      INTEGER PRIMARY KEY,\n"
    "    pid         INTEGER NOT NULL,\n"
    "    argv        TEXT,\n"
    "    python      TEXT,\n"
    "    started_at  INTEGER NOT NULL,\n"
    "    ended_at    INTEGER\n"
    ");\n"
    "CREATE TABLE code_objects (\n"
    "    run_id      INTEGER NOT NULL,\n"
    "    code_id     INTEGER NOT NULL,\n"
    "    filename    TEXT,\n"
    "    name        TEXT,\n"
    "    firstlineno INTEGER,\n"
    "    PRIMARY KEY (run_id, code_id)\n"
    ");\n"
    "CREATE TABLE compiles (\n"
    "    run_id           INTEGER NOT NULL,\n"
    "    code_id          INTEGER NOT NULL,\n"
    "    compile_id       TEXT NOT NULL,\n"
    "    frame_id         INTEGER,\n"
    "    frame_compile_id INTEGER,\n"
    "    resume_offset    INTEGER,\n"
    "    reason           TEXT,\n"
    "    started_at       INTEGER,\n"
    "    duration_ns      INTEGER,\n"
    "    outcome          TEXT,\n"
    "    graphs           INTEGER,\n"
    "    nodes            INTEGER,\n"
    "    guards           INTEGER\n"
    ");\n"
    "CREATE INDEX compiles_by_code ON compiles (run_id, code_id, compile_id);\n"
    "CREATE TABLE guard_failures (\n"
    "    run_id           INTEGER NOT NULL,\n"
    "    code_id          INTEGER NOT NULL,\n"
    "    compile_id       TEXT,\n"
    "    entry_compile_id TEXT,\n"
    "    kind             TEXT,\n"
    "    expr             TEXT,\n"
    "    observed         TEXT,\n"
    "    at               INTEGER\n"
    ");\n"
    "CREATE TABLE graph_breaks (\n"
    "    run_id      INTEGER NOT NULL,\n"
    "    code_id     INTEGER NOT NULL,\n"
    "    compile_id  TEXT,\n"
    "    kind        TEXT,\n"
    "    reason      TEXT,\n"
    "    filename    TEXT,\n"
    "    lineno      INTEGER,\n"
    "    offset      INTEGER,\n"
    "    user_stack  TEXT,\n"
    "    at          INTEGER\n"
    ");\n"
    "CREATE TABLE cache_entries (\n"
    "    run_id        INTEGER NOT NULL,\n"
    "    code_id       INTEGER NOT NULL,\n"
    "    compile_id    TEXT NOT NULL,\n"
    "    resume_offset INTEGER,\n"
    "    hits          INTEGER NOT NULL DEFAULT 0,\n"
    "    guards_text   TEXT,\n"
    "    PRIMARY KEY (run_id, code_id, compile_id)\n"
    ");\n";

/* ---- the views (docs/sql.md, Views): the SELECT of each, defined once ----
 * The migrations create them (CREATE_VIEW), readers of older files make them
 * TEMP views (views[] below); see the invariants at the top. */

#define VIEW_RECOMPILES \
    "SELECT c.run_id, c.epoch, c.code_id, co.name, co.filename, co.firstlineno,\n" \
    "       c.compile_id, c.frame_id, c.frame_compile_id, c.resume_offset,\n" \
    "       c.reason, c.started_at, c.duration_ns, c.outcome, c.compile_row,\n" \
    "       (SELECT count(*) FROM guard_failures AS g\n" \
    "        WHERE g.compile_row = c.compile_row) AS failures\n" \
    "FROM compiles AS c\n" \
    "LEFT JOIN code_objects AS co ON co.run_id = c.run_id AND co.code_id = c.code_id\n" \
    "WHERE c.frame_compile_id > 0"

#define VIEW_RECOMPILE_HISTORY \
    "SELECT c.run_id, c.epoch, c.code_id, co.name, co.filename, co.firstlineno,\n" \
    "       c.compile_id, c.frame_id, c.frame_compile_id, c.resume_offset,\n" \
    "       c.reason, c.started_at, c.outcome,\n" \
    "       g.entry_compile_id, g.kind AS guard_kind, g.expr AS guard_expr,\n" \
    "       g.observed, g.at AS failed_at, c.compile_row, g.failure_id\n" \
    "FROM compiles AS c\n" \
    "LEFT JOIN code_objects AS co ON co.run_id = c.run_id AND co.code_id = c.code_id\n" \
    "LEFT JOIN guard_failures AS g ON g.compile_row = c.compile_row\n" \
    "WHERE c.frame_compile_id > 0\n" \
    "ORDER BY c.compile_row, g.failure_id"

#define VIEW_BREAK_REASONS \
    "SELECT run_id, kind, reason, filename, lineno,\n" \
    "       count(*) AS count, count(DISTINCT code_id) AS code_objects,\n" \
    "       min(at) AS first_at, max(at) AS last_at\n" \
    "FROM graph_breaks\n" \
    "GROUP BY run_id, kind, reason, filename, lineno"

#define VIEW_CODE_SUMMARY \
    "SELECT co.run_id, co.code_id, co.filename, co.name, co.firstlineno,\n" \
    "  (SELECT count(*) FROM compiles AS c\n" \
    "   WHERE c.run_id = co.run_id AND c.code_id = co.code_id) AS compiles,\n" \
    "  (SELECT count(*) FROM compiles AS c\n" \
    "   WHERE c.run_id = co.run_id AND c.code_id = co.code_id\n" \
    "     AND c.frame_compile_id > 0) AS recompiles,\n" \
    "  (SELECT count(*) FROM graph_breaks AS b\n" \
    "   WHERE b.run_id = co.run_id AND b.code_id = co.code_id) AS graph_breaks,\n" \
    "  (SELECT count(*) FROM guard_failures AS g\n" \
    "   WHERE g.run_id = co.run_id AND g.code_id = co.code_id) AS guard_failures,\n" \
    "  (SELECT count(*) FROM frame_skips AS s\n" \
    "   WHERE s.run_id = co.run_id AND s.code_id = co.code_id) AS skips,\n" \
    "  (SELECT count(*) FROM cache_entries AS e\n" \
    "   WHERE e.run_id = co.run_id AND e.code_id = co.code_id\n" \
    "     AND e.epoch = r.resets) AS cache_entries,\n" \
    "  (SELECT coalesce(sum(e.hits), 0) FROM cache_entries AS e\n" \
    "   WHERE e.run_id = co.run_id AND e.code_id = co.code_id\n" \
    "     AND e.epoch = r.resets) AS hits,\n" \
    "  (SELECT g.expr || ' (observed ' || coalesce(g.observed, '?') || ')'\n" \
    "   FROM guard_failures AS g\n" \
    "   WHERE g.run_id = co.run_id AND g.code_id = co.code_id\n" \
    "   ORDER BY g.failure_id DESC LIMIT 1) AS last_failure\n" \
    "FROM code_objects AS co JOIN runs AS r ON r.run_id = co.run_id"

/* Added in version 3: the aggregates `python -m dynscope report` prints. */

#define VIEW_RUN_SUMMARY \
    "SELECT r.run_id, r.pid, r.argv, r.python, r.started_at, r.ended_at, r.resets,\n" \
    "       r.dropped_events, r.written_events,\n" \
    "  (SELECT count(*) FROM code_objects AS co\n" \
    "   WHERE co.run_id = r.run_id) AS code_objects,\n" \
    "  (SELECT count(*) FROM compiles AS c WHERE c.run_id = r.run_id) AS compiles,\n" \
    "  (SELECT count(*) FROM compiles AS c\n" \
    "   WHERE c.run_id = r.run_id AND c.frame_compile_id > 0) AS recompiles,\n" \
    "  (SELECT count(*) FROM graphs AS gr WHERE gr.run_id = r.run_id) AS graphs,\n" \
    "  (SELECT count(*) FROM graph_breaks AS b WHERE b.run_id = r.run_id) AS graph_breaks,\n" \
    "  (SELECT count(*) FROM guard_failures AS g\n" \
    "   WHERE g.run_id = r.run_id) AS guard_failures,\n" \
    "  (SELECT count(*) FROM cache_limits AS l WHERE l.run_id = r.run_id) AS cache_limits,\n" \
    "  (SELECT count(*) FROM frame_skips AS s WHERE s.run_id = r.run_id) AS skips,\n" \
    "  (SELECT count(*) FROM cache_entries AS e\n" \
    "   WHERE e.run_id = r.run_id AND e.epoch = r.resets) AS cache_entries,\n" \
    "  (SELECT coalesce(sum(e.hits), 0) FROM cache_entries AS e\n" \
    "   WHERE e.run_id = r.run_id AND e.epoch = r.resets) AS hits\n" \
    "FROM runs AS r"

#define VIEW_BREAK_SITES \
    "SELECT kind, reason, filename, lineno,\n" \
    "       count(*) AS count, count(DISTINCT run_id || '/' || code_id) AS code_objects,\n" \
    "       count(DISTINCT run_id) AS runs, min(at) AS first_at, max(at) AS last_at\n" \
    "FROM graph_breaks\n" \
    "GROUP BY kind, reason, filename, lineno"

#define VIEW_CACHE_LIMIT_HITS \
    "SELECT l.run_id, l.epoch, l.code_id, co.name, co.filename, co.firstlineno,\n" \
    "       l.frame_id, l.resume_offset, l.reason, l.at\n" \
    "FROM cache_limits AS l\n" \
    "LEFT JOIN code_objects AS co ON co.run_id = l.run_id AND co.code_id = l.code_id"

/* Added in version 6: what each break site costs (engine/capture/hook.c
   samples it), with the time of the function it breaks. */

#define BREAK_COSTS_SITE \
    "SELECT b.run_id, b.epoch, b.code_id, co.name AS function,\n" \
    "       b.break_type, b.break_class, b.kind, b.reason, b.filename, b.lineno,\n" \
    "       count(*) AS breaks,\n"

#define BREAK_COSTS_FROM \
    "FROM graph_breaks AS b\n" \
    "LEFT JOIN code_objects AS co ON co.run_id = b.run_id AND co.code_id = b.code_id\n"

#define BREAK_COSTS_GROUP \
    "GROUP BY b.run_id, b.epoch, b.code_id, b.break_type, b.reason, b.filename, b.lineno"

#define VIEW_BREAK_COSTS \
    BREAK_COSTS_SITE \
    "       coalesce(sum(e.hits), 0) AS calls,\n" \
    "       coalesce(sum(e.break_ns), 0) AS cost_ns,\n" \
    "       coalesce(sum(e.break_graphs), 0) AS extra_graphs,\n" \
    "       coalesce(sum(e.cost_samples), 0) AS samples,\n" \
    "       (SELECT sum(f.run_ns) FROM cache_entries AS f\n" \
    "        WHERE f.run_id = b.run_id AND f.code_id = b.code_id\n" \
    "          AND f.epoch = b.epoch) AS function_ns\n" \
    BREAK_COSTS_FROM \
    "LEFT JOIN cache_entries AS e ON e.run_id = b.run_id AND e.code_id = b.code_id\n" \
    "     AND e.epoch = b.epoch AND e.compile_id = b.compile_id\n" \
    BREAK_COSTS_GROUP

/* The same columns over a file older than v6, which has no costs (nor,
   before v4, break types: read as NULL here). */
#define VIEW_BREAK_COSTS_OLDER \
    "SELECT b.run_id, b.epoch, b.code_id, co.name AS function,\n" \
    "       NULL AS break_type, NULL AS break_class, b.kind, b.reason, b.filename,\n" \
    "       b.lineno, count(*) AS breaks,\n" \
    "       NULL AS calls, NULL AS cost_ns, NULL AS extra_graphs, NULL AS samples,\n" \
    "       NULL AS function_ns\n" \
    BREAK_COSTS_FROM \
    "GROUP BY b.run_id, b.epoch, b.code_id, b.reason, b.filename, b.lineno"

#define CREATE_VIEW(name, select) "CREATE VIEW " name " AS\n" select ";\n"

/* ---- version 2 ----
 * Adds: reset epochs (ids restart after dynscope.reset()), a surrogate key
 * per compile attempt (compile_row) that failures, breaks and graphs point
 * to, run counters, per-guard rows, graphs, entry counter snapshots, frames,
 * skips, cache-limit hits, resets, the views, and the indexes the views need. */

static const char migration_2[] =
    "ALTER TABLE runs ADD COLUMN dropped_events INTEGER NOT NULL DEFAULT 0;\n"
    "ALTER TABLE runs ADD COLUMN written_events INTEGER NOT NULL DEFAULT 0;\n"
    "ALTER TABLE runs ADD COLUMN resets INTEGER NOT NULL DEFAULT 0;\n"

    /* compiles: one row per compile attempt, keyed by compile_row. */
    "ALTER TABLE compiles RENAME TO compiles_v1;\n"
    "CREATE TABLE compiles (\n"
    "    compile_row      INTEGER PRIMARY KEY,\n"
    "    run_id           INTEGER NOT NULL,\n"
    "    code_id          INTEGER NOT NULL,\n"
    "    epoch            INTEGER NOT NULL DEFAULT 0,\n"
    "    compile_id       TEXT NOT NULL,\n"
    "    frame_id         INTEGER,\n"
    "    frame_compile_id INTEGER,\n"
    "    resume_offset    INTEGER,\n"
    "    reason           TEXT,\n"
    "    started_at       INTEGER,\n"
    "    duration_ns      INTEGER,\n"
    "    outcome          TEXT,\n"
    "    graphs           INTEGER,\n"
    "    nodes            INTEGER,\n"
    "    guards           INTEGER,\n"
    "    ended_at         INTEGER\n"
    ");\n"
    "INSERT INTO compiles (compile_row, run_id, code_id, compile_id, frame_id,\n"
    "        frame_compile_id, resume_offset, reason, started_at, duration_ns,\n"
    "        outcome, graphs, nodes, guards)\n"
    "    SELECT rowid, run_id, code_id, compile_id, frame_id, frame_compile_id,\n"
    "        resume_offset, reason, started_at, duration_ns, outcome, graphs,\n"
    "        nodes, guards\n"
    "    FROM compiles_v1 ORDER BY rowid;\n"
    "DROP TABLE compiles_v1;\n"
    "CREATE INDEX compiles_by_code ON compiles (run_id, code_id, epoch, compile_id);\n"
    "CREATE INDEX compiles_recompiles ON compiles (run_id, code_id, frame_compile_id)\n"
    "    WHERE frame_compile_id > 0;\n"

    /* guard_failures: ordered ids and the compile attempt they caused. */
    "ALTER TABLE guard_failures RENAME TO guard_failures_v1;\n"
    "CREATE TABLE guard_failures (\n"
    "    failure_id       INTEGER PRIMARY KEY,\n"
    "    run_id           INTEGER NOT NULL,\n"
    "    code_id          INTEGER NOT NULL,\n"
    "    epoch            INTEGER NOT NULL DEFAULT 0,\n"
    "    compile_id       TEXT,\n"
    "    compile_row      INTEGER,\n"
    "    entry_compile_id TEXT,\n"
    "    kind             TEXT,\n"
    "    expr             TEXT,\n"
    "    observed         TEXT,\n"
    "    at               INTEGER\n"
    ");\n"
    "INSERT INTO guard_failures (failure_id, run_id, code_id, compile_id,\n"
    "        compile_row, entry_compile_id, kind, expr, observed, at)\n"
    "    SELECT g.rowid, g.run_id, g.code_id, g.compile_id,\n"
    "        (SELECT max(c.compile_row) FROM compiles AS c\n"
    "         WHERE c.run_id = g.run_id AND c.code_id = g.code_id\n"
    "           AND c.compile_id = g.compile_id),\n"
    "        g.entry_compile_id, g.kind, g.expr, g.observed, g.at\n"
    "    FROM guard_failures_v1 AS g ORDER BY g.rowid;\n"
    "DROP TABLE guard_failures_v1;\n"
    "CREATE INDEX guard_failures_by_compile ON guard_failures (compile_row);\n"
    "CREATE INDEX guard_failures_by_code ON guard_failures (run_id, code_id);\n"

    /* graph_breaks: same treatment. */
    "ALTER TABLE graph_breaks RENAME TO graph_breaks_v1;\n"
    "CREATE TABLE graph_breaks (\n"
    "    break_id    INTEGER PRIMARY KEY,\n"
    "    run_id      INTEGER NOT NULL,\n"
    "    code_id     INTEGER NOT NULL,\n"
    "    epoch       INTEGER NOT NULL DEFAULT 0,\n"
    "    compile_id  TEXT,\n"
    "    compile_row INTEGER,\n"
    "    kind        TEXT,\n"
    "    reason      TEXT,\n"
    "    filename    TEXT,\n"
    "    lineno      INTEGER,\n"
    "    offset      INTEGER,\n"
    "    user_stack  TEXT,\n"
    "    at          INTEGER\n"
    ");\n"
    "INSERT INTO graph_breaks (break_id, run_id, code_id, compile_id, compile_row,\n"
    "        kind, reason, filename, lineno, offset, user_stack, at)\n"
    "    SELECT b.rowid, b.run_id, b.code_id, b.compile_id,\n"
    "        (SELECT max(c.compile_row) FROM compiles AS c\n"
    "         WHERE c.run_id = b.run_id AND c.code_id = b.code_id\n"
    "           AND c.compile_id = b.compile_id),\n"
    "        b.kind, b.reason, b.filename, b.lineno, b.offset,\n"
    "        CASE WHEN json_valid(b.user_stack) THEN json(b.user_stack) END, b.at\n"
    "    FROM graph_breaks_v1 AS b ORDER BY b.rowid;\n"
    "DROP TABLE graph_breaks_v1;\n"
    "CREATE INDEX graph_breaks_by_code ON graph_breaks (run_id, code_id);\n"
    "CREATE INDEX graph_breaks_by_compile ON graph_breaks (compile_row);\n"
    "CREATE INDEX graph_breaks_by_site ON graph_breaks\n"
    "    (run_id, kind, reason, filename, lineno, code_id, at);\n"

    /* cache_entries: keyed by epoch too, with the entry's counters. */
    "ALTER TABLE cache_entries RENAME TO cache_entries_v1;\n"
    "CREATE TABLE cache_entries (\n"
    "    run_id        INTEGER NOT NULL,\n"
    "    code_id       INTEGER NOT NULL,\n"
    "    epoch         INTEGER NOT NULL DEFAULT 0,\n"
    "    compile_id    TEXT NOT NULL,\n"
    "    compile_row   INTEGER,\n"
    "    frame_id      INTEGER,\n"
    "    resume_offset INTEGER,\n"
    "    hits          INTEGER NOT NULL DEFAULT 0,\n"
    "    guard_ns      INTEGER NOT NULL DEFAULT 0,\n"
    "    guards_text   TEXT,\n"
    "    created_at    INTEGER,\n"
    "    stats_at      INTEGER,\n"
    "    PRIMARY KEY (run_id, code_id, epoch, compile_id)\n"
    ");\n"
    "INSERT INTO cache_entries (run_id, code_id, compile_id, compile_row,\n"
    "        resume_offset, hits, guards_text)\n"
    "    SELECT e.run_id, e.code_id, e.compile_id,\n"
    "        (SELECT max(c.compile_row) FROM compiles AS c\n"
    "         WHERE c.run_id = e.run_id AND c.code_id = e.code_id\n"
    "           AND c.compile_id = e.compile_id),\n"
    "        e.resume_offset, coalesce(e.hits, 0), e.guards_text\n"
    "    FROM cache_entries_v1 AS e;\n"
    "DROP TABLE cache_entries_v1;\n"
    "UPDATE cache_entries SET\n"
    "    frame_id = (SELECT c.frame_id FROM compiles AS c\n"
    "                WHERE c.compile_row = cache_entries.compile_row),\n"
    "    created_at = (SELECT c.started_at FROM compiles AS c\n"
    "                  WHERE c.compile_row = cache_entries.compile_row);\n"

    /* guards: one row per line of an entry's guards_text, "KIND<tab>expr"
       or just "expr". */
    "CREATE TABLE guards (\n"
    "    run_id     INTEGER NOT NULL,\n"
    "    code_id    INTEGER NOT NULL,\n"
    "    epoch      INTEGER NOT NULL DEFAULT 0,\n"
    "    compile_id TEXT NOT NULL,\n"
    "    idx        INTEGER NOT NULL,\n"
    "    kind       TEXT,\n"
    "    expr       TEXT NOT NULL,\n"
    "    PRIMARY KEY (run_id, code_id, epoch, compile_id, idx)\n"
    ");\n"
    "WITH RECURSIVE split (run_id, code_id, epoch, compile_id, n, line, rest) AS (\n"
    "    SELECT run_id, code_id, epoch, compile_id, -1, NULL, guards_text || char(10)\n"
    "    FROM cache_entries WHERE guards_text IS NOT NULL\n"
    "  UNION ALL\n"
    "    SELECT run_id, code_id, epoch, compile_id, n + 1,\n"
    "        rtrim(substr(rest, 1, instr(rest, char(10)) - 1), char(13)),\n"
    "        substr(rest, instr(rest, char(10)) + 1)\n"
    "    FROM split WHERE rest <> ''\n"
    ")\n"
    "INSERT INTO guards (run_id, code_id, epoch, compile_id, idx, kind, expr)\n"
    "    SELECT run_id, code_id, epoch, compile_id,\n"
    "        row_number() OVER (PARTITION BY run_id, code_id, epoch, compile_id\n"
    "                           ORDER BY n) - 1,\n"
    "        CASE WHEN instr(line, char(9)) > 0\n"
    "             THEN substr(line, 1, instr(line, char(9)) - 1) END,\n"
    "        substr(line, instr(line, char(9)) + 1)\n"
    "    FROM split WHERE line IS NOT NULL AND line <> '';\n"

    "CREATE TABLE graphs (\n"
    "    graph_id    INTEGER PRIMARY KEY,\n"
    "    run_id      INTEGER NOT NULL,\n"
    "    code_id     INTEGER NOT NULL,\n"
    "    epoch       INTEGER NOT NULL DEFAULT 0,\n"
    "    compile_id  TEXT,\n"
    "    compile_row INTEGER,\n"
    "    backend     TEXT,\n"
    "    backend_ns  INTEGER,\n"
    "    nodes       INTEGER,\n"
    "    ops         TEXT,\n"
    "    code        TEXT,\n"
    "    at          INTEGER\n"
    ");\n"
    "CREATE INDEX graphs_by_code ON graphs (run_id, code_id);\n"
    "CREATE INDEX graphs_by_compile ON graphs (compile_row);\n"

    "CREATE TABLE entry_stats (\n"
    "    run_id     INTEGER NOT NULL,\n"
    "    code_id    INTEGER NOT NULL,\n"
    "    epoch      INTEGER NOT NULL DEFAULT 0,\n"
    "    compile_id TEXT NOT NULL,\n"
    "    at         INTEGER NOT NULL,\n"
    "    hits       INTEGER NOT NULL,\n"
    "    guard_ns   INTEGER NOT NULL\n"
    ");\n"
    "CREATE INDEX entry_stats_by_entry ON entry_stats\n"
    "    (run_id, code_id, epoch, compile_id, at);\n"

    "CREATE TABLE frames (\n"
    "    run_id           INTEGER NOT NULL,\n"
    "    code_id          INTEGER NOT NULL,\n"
    "    epoch            INTEGER NOT NULL DEFAULT 0,\n"
    "    frame_id         INTEGER NOT NULL,\n"
    "    resume_offset    INTEGER,\n"
    "    first_compile_at INTEGER,\n"
    "    PRIMARY KEY (run_id, code_id, epoch, frame_id)\n"
    ");\n"
    "INSERT OR IGNORE INTO frames (run_id, code_id, epoch, frame_id,\n"
    "        resume_offset, first_compile_at)\n"
    "    SELECT run_id, code_id, epoch, frame_id, resume_offset, min(started_at)\n"
    "    FROM compiles WHERE frame_id IS NOT NULL\n"
    "    GROUP BY run_id, code_id, epoch, frame_id;\n"

    "CREATE TABLE frame_skips (\n"
    "    run_id        INTEGER NOT NULL,\n"
    "    code_id       INTEGER NOT NULL,\n"
    "    epoch         INTEGER NOT NULL DEFAULT 0,\n"
    "    resume_offset INTEGER,\n"
    "    reason        TEXT,\n"
    "    at            INTEGER\n"
    ");\n"
    "CREATE INDEX frame_skips_by_code ON frame_skips (run_id, code_id);\n"

    "CREATE TABLE cache_limits (\n"
    "    run_id        INTEGER NOT NULL,\n"
    "    code_id       INTEGER NOT NULL,\n"
    "    epoch         INTEGER NOT NULL DEFAULT 0,\n"
    "    frame_id      INTEGER,\n"
    "    resume_offset INTEGER,\n"
    "    reason        TEXT,\n"
    "    at            INTEGER\n"
    ");\n"
    "CREATE INDEX cache_limits_by_code ON cache_limits (run_id, code_id);\n"

    "CREATE TABLE resets (\n"
    "    run_id INTEGER NOT NULL,\n"
    "    epoch  INTEGER NOT NULL,\n"
    "    at     INTEGER,\n"
    "    PRIMARY KEY (run_id, epoch)\n"
    ");\n"

    /* Views. */
    CREATE_VIEW("recompiles", VIEW_RECOMPILES)
    CREATE_VIEW("recompile_history", VIEW_RECOMPILE_HISTORY)
    CREATE_VIEW("break_reasons", VIEW_BREAK_REASONS)
    CREATE_VIEW("code_summary", VIEW_CODE_SUMMARY);

/* ---- version 3 ----
 * Adds the views run_summary, break_sites and cache_limit_hits.  The tables
 * are those of version 2, so a reader reads a v2 file with TEMP views. */

static const char migration_3[] =
    CREATE_VIEW("run_summary", VIEW_RUN_SUMMARY)
    CREATE_VIEW("break_sites", VIEW_BREAK_SITES)
    CREATE_VIEW("cache_limit_hits", VIEW_CACHE_LIMIT_HITS);

/* ---- version 4 ----
 * Adds who recorded a run (runs: hostname, rank, local_rank, world_size,
 * from torchrun's environment; NULL when unset), the break registry's type
 * and class of each graph break and frame skip (engine/base/breaks.h), guard provenance -- the user source whose access made the
 * translator add a guard (guards, guard_failures: filename, lineno; guards:
 * the stack through inlined calls) -- and recompile_diffs: on each
 * recompile, the older entry nearest to the new inputs and every guard of
 * it that failed.  Older rows keep NULL there. */

static const char migration_4[] =
    "ALTER TABLE runs ADD COLUMN hostname TEXT;\n"
    "ALTER TABLE runs ADD COLUMN rank INTEGER;\n"
    "ALTER TABLE runs ADD COLUMN local_rank INTEGER;\n"
    "ALTER TABLE runs ADD COLUMN world_size INTEGER;\n"
    "ALTER TABLE graph_breaks ADD COLUMN break_type TEXT;\n"
    "ALTER TABLE graph_breaks ADD COLUMN break_class TEXT;\n"
    "ALTER TABLE frame_skips ADD COLUMN break_type TEXT;\n"
    "ALTER TABLE frame_skips ADD COLUMN break_class TEXT;\n"
    "ALTER TABLE guards ADD COLUMN filename TEXT;\n"
    "ALTER TABLE guards ADD COLUMN lineno INTEGER;\n"
    "ALTER TABLE guards ADD COLUMN user_stack TEXT;\n"
    "ALTER TABLE guard_failures ADD COLUMN filename TEXT;\n"
    "ALTER TABLE guard_failures ADD COLUMN lineno INTEGER;\n"
    "CREATE TABLE recompile_diffs (\n"
    "    run_id           INTEGER NOT NULL,\n"
    "    code_id          INTEGER NOT NULL,\n"
    "    epoch            INTEGER NOT NULL DEFAULT 0,\n"
    "    compile_id       TEXT,\n"
    "    compile_row      INTEGER,\n"
    "    entry_compile_id TEXT,\n"
    "    failing          INTEGER,\n"
    "    idx              INTEGER,\n"
    "    kind             TEXT,\n"
    "    expr             TEXT,\n"
    "    observed         TEXT,\n"
    "    filename         TEXT,\n"
    "    lineno           INTEGER,\n"
    "    user_stack       TEXT,\n"
    "    capture_ns       INTEGER,\n"
    "    at               INTEGER\n"
    ");\n"
    "CREATE INDEX recompile_diffs_by_compile ON recompile_diffs (compile_row);\n"
    "CREATE INDEX recompile_diffs_by_code ON recompile_diffs (run_id, code_id);\n";

/* ---- version 5 ----
 * Adds to compiles what an escape hatch kept in the graph (hatches:
 * Plan.hatches, one per line, "allow_in_graph: f is one graph node";
 * dynscope/hatches.py; NULL when none kept anything) and where the compile's
 * time went (trace_ns, guards_ns, graph_ns, backend_ns, plan_ns: disjoint
 * parts of duration_ns; events_ns outside it; attempts), and the call path
 * from the program's entry to the compiled frame (call_path, JSON: the
 * stack trie's).  Older rows keep NULL there.  And the table annotations:
 * the program's own marks and spans (dynscope.annotate); runs.redacted:
 * what a recording kept out of the file (DYNSCOPE_REDACT). */

static const char migration_5[] =
    "ALTER TABLE compiles ADD COLUMN hatches TEXT;\n"
    "ALTER TABLE compiles ADD COLUMN trace_ns INTEGER;\n"
    "ALTER TABLE compiles ADD COLUMN guards_ns INTEGER;\n"
    "ALTER TABLE compiles ADD COLUMN graph_ns INTEGER;\n"
    "ALTER TABLE compiles ADD COLUMN backend_ns INTEGER;\n"
    "ALTER TABLE compiles ADD COLUMN plan_ns INTEGER;\n"
    "ALTER TABLE compiles ADD COLUMN events_ns INTEGER;\n"
    "ALTER TABLE compiles ADD COLUMN attempts INTEGER;\n"
    "ALTER TABLE compiles ADD COLUMN call_path TEXT;\n"
    "CREATE TABLE annotations (\n"
    "    annotation_id INTEGER PRIMARY KEY,\n"
    "    run_id        INTEGER NOT NULL,\n"
    "    epoch         INTEGER NOT NULL DEFAULT 0,\n"
    "    name          TEXT,\n"
    "    phase         TEXT,\n"
    "    fields        TEXT,\n"
    "    at            INTEGER\n"
    ");\n"
    "CREATE INDEX annotations_by_run ON annotations (run_id, at);\n"
    "ALTER TABLE runs ADD COLUMN redacted TEXT;\n";

/* ---- version 6 ----
 * Adds what calls cost, sampled by the engine (docs/sql.md cache_entries):
 * cost_samples, run_ns, break_ns and break_graphs on cache_entries and
 * entry_stats, what a frame at its cache limit then ran without capture
 * (cache_limits: calls, uncaptured_ns, cost_samples; older rows keep NULL),
 * the table run_spans (timed calls' graph runs and eager steps, for the
 * timeline) and the view break_costs. */

static const char migration_6[] =
    "ALTER TABLE cache_entries ADD COLUMN cost_samples INTEGER;\n"
    "ALTER TABLE cache_entries ADD COLUMN run_ns INTEGER;\n"
    "ALTER TABLE cache_entries ADD COLUMN break_ns INTEGER;\n"
    "ALTER TABLE cache_entries ADD COLUMN break_graphs INTEGER;\n"
    "ALTER TABLE entry_stats ADD COLUMN cost_samples INTEGER;\n"
    "ALTER TABLE entry_stats ADD COLUMN run_ns INTEGER;\n"
    "ALTER TABLE entry_stats ADD COLUMN break_ns INTEGER;\n"
    "ALTER TABLE entry_stats ADD COLUMN break_graphs INTEGER;\n"
    "ALTER TABLE cache_limits ADD COLUMN calls INTEGER;\n"
    "ALTER TABLE cache_limits ADD COLUMN uncaptured_ns INTEGER;\n"
    "ALTER TABLE cache_limits ADD COLUMN cost_samples INTEGER;\n"
    "CREATE TABLE run_spans (\n"
    "    span_id     INTEGER PRIMARY KEY,\n"
    "    run_id      INTEGER NOT NULL,\n"
    "    code_id     INTEGER NOT NULL,\n"
    "    epoch       INTEGER NOT NULL DEFAULT 0,\n"
    "    compile_id  TEXT,\n"
    "    kind        TEXT,\n"
    "    at          INTEGER,\n"
    "    duration_ns INTEGER\n"
    ");\n"
    "CREATE INDEX run_spans_by_run ON run_spans (run_id, at);\n"
    CREATE_VIEW("break_costs", VIEW_BREAK_COSTS);

/* Every view, with the version whose migration creates it, and (older:
   NULL when the same text reads older files) its text over a file older
   than that. */
static const struct {
    const char *name;
    int since;
    const char *select;
    const char *older;
} views[] = {
    {"recompiles", 2, VIEW_RECOMPILES, NULL},
    {"recompile_history", 2, VIEW_RECOMPILE_HISTORY, NULL},
    {"break_reasons", 2, VIEW_BREAK_REASONS, NULL},
    {"code_summary", 2, VIEW_CODE_SUMMARY, NULL},
    {"run_summary", 3, VIEW_RUN_SUMMARY, NULL},
    {"break_sites", 3, VIEW_BREAK_SITES, NULL},
    {"cache_limit_hits", 3, VIEW_CACHE_LIMIT_HITS, NULL},
    {"break_costs", 6, VIEW_BREAK_COSTS, VIEW_BREAK_COSTS_OLDER},
};

static const char *const migrations[STORE_SCHEMA_VERSION + 1] = {
    NULL,
    migration_1,
    migration_2,
    migration_3,
    migration_4,
    migration_5,
    migration_6,
};

const char *store_schema_migration_sql(int v)
{
    if (v < 1 || v > STORE_SCHEMA_VERSION)
        return NULL;
    return migrations[v];
}

char *store_temp_views_sql(int version)
{
    if (version < STORE_READ_MIN_VERSION || version > STORE_SCHEMA_VERSION)
        return NULL;
    char *script = sqlite3_mprintf("%s", "");
    for (size_t i = 0; script != NULL && i < sizeof views / sizeof views[0]; i++) {
        if (views[i].since <= version)
            continue;
        char *more = sqlite3_mprintf("%sCREATE TEMP VIEW %s AS\n%s;\n", script,
                                     views[i].name,
                                     views[i].older ? views[i].older : views[i].select);
        sqlite3_free(script);
        script = more;
    }
    if (script == NULL)
        return NULL;
    char *out = strdup(script);
    sqlite3_free(script);
    return out;
}

int store_schema_temp_views(sqlite3 *db, int version, const char *path, char **errmsg)
{
    STORE_ASSERT(version >= STORE_READ_MIN_VERSION);
    char *sql = store_temp_views_sql(version);
    char *msg = NULL;
    int rc = sql ? sqlite3_exec(db, sql, NULL, NULL, &msg) : SQLITE_NOMEM;
    free(sql);
    if (rc != SQLITE_OK) {
        store_set_error(errmsg, "%s: creating the views of schema v%d failed: %s", path,
                        STORE_SCHEMA_VERSION, msg ? msg : sqlite3_errstr(rc));
        sqlite3_free(msg);
        return -1;
    }
    return 0;
}

/* One integer from a static query.  SQLite result code. */
static int query_int(sqlite3 *db, const char *sql, long long *out)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
    if (rc != SQLITE_OK)
        return rc;
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        *out = sqlite3_column_int64(st, 0);
        rc = SQLITE_OK;
    }
    else if (rc == SQLITE_DONE) {
        *out = 0;
        rc = SQLITE_OK;
    }
    sqlite3_finalize(st);
    return rc;
}

int store_schema_identify(sqlite3 *db, const char *path, int *version, char **errmsg)
{
    long long app_id = 0, user_version = 0, nobjects = 0;
    /* One read transaction: another process may be creating the schema. */
    bool own_txn = sqlite3_get_autocommit(db) != 0;
    int rc = own_txn ? sqlite3_exec(db, "BEGIN", NULL, NULL, NULL) : SQLITE_OK;
    if (rc == SQLITE_OK)
        rc = query_int(db, "PRAGMA application_id", &app_id);
    if (rc == SQLITE_OK)
        rc = query_int(db, "PRAGMA user_version", &user_version);
    if (rc == SQLITE_OK)
        rc = query_int(db, "SELECT count(*) FROM sqlite_schema", &nobjects);
    if (rc != SQLITE_OK) {
        if ((rc & 0xff) == SQLITE_NOTADB)
            store_set_error(errmsg, "%s is not an SQLite database (%s)", path,
                            sqlite3_errmsg(db));
        else
            store_set_error(errmsg, "cannot read %s: %s", path, sqlite3_errmsg(db));
    }
    if (own_txn && !sqlite3_get_autocommit(db))
        sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        return -1;
    if (app_id == STORE_APPLICATION_ID) {
        if (user_version < 1) {
            store_set_error(errmsg, "%s is a dynscope database without a schema "
                            "version (PRAGMA user_version = %lld); damaged?",
                            path, user_version);
            return -1;
        }
        *version = (int)(user_version > 1000000 ? 1000000 : user_version);
        return 0;
    }
    if (app_id == 0 && user_version == 0 && nobjects == 0) {
        *version = 0;
        return 0;
    }
    store_set_error(errmsg, "%s is an SQLite database but not a dynscope one "
                    "(application_id 0x%08llx, user_version %lld, %lld schema "
                    "objects); refusing to use it", path,
                    (unsigned long long)app_id & 0xffffffffu, user_version, nobjects);
    return -1;
}

static int exec_or_error(sqlite3 *db, const char *sql, const char *path,
                         const char *what, char **errmsg)
{
    char *msg = NULL;
    int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
    if (rc != SQLITE_OK) {
        store_set_error(errmsg, "%s: %s: %s", path, what, msg ? msg : sqlite3_errstr(rc));
        sqlite3_free(msg);
        return -1;
    }
    return 0;
}

int store_schema_upgrade(sqlite3 *db, const char *path, char **errmsg)
{
    int version;
    char what[96];
    if (exec_or_error(db, "BEGIN IMMEDIATE", path,
                      "cannot lock the database to check its schema", errmsg) < 0)
        return -1;
    if (store_schema_identify(db, path, &version, errmsg) < 0)
        goto out_rollback;
    if (version > STORE_SCHEMA_VERSION) {
        store_set_error(errmsg, "%s was written by a newer dynscope (schema v%d; "
                        "this build knows up to v%d); refusing to write to it",
                        path, version, STORE_SCHEMA_VERSION);
        goto out_rollback;
    }
    for (int v = version + 1; v <= STORE_SCHEMA_VERSION; v++) {
        snprintf(what, sizeof what, "%s schema v%d failed",
                 v == 1 ? "creating" : "migrating to", v);
        if (exec_or_error(db, migrations[v], path, what, errmsg) < 0)
            goto out_rollback;
    }
    if (version < STORE_SCHEMA_VERSION) {
        /* PRAGMA values cannot be bound; these are our own constants. */
        char sql[96];
        snprintf(sql, sizeof sql, "PRAGMA application_id = %d; PRAGMA user_version = %d",
                 STORE_APPLICATION_ID, STORE_SCHEMA_VERSION);
        if (exec_or_error(db, sql, path, "setting the schema version failed", errmsg) < 0)
            goto out_rollback;
    }
    if (exec_or_error(db, "COMMIT", path, "committing the schema failed", errmsg) < 0)
        goto out_rollback;
    return 0;

out_rollback:
    if (!sqlite3_get_autocommit(db))
        sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    return -1;
}
