/*
 * read.c -- the read model of a dynscope database: every query a C reader
 * (dyntop, the C tests) makes, behind typed functions (contract: read.h;
 * tables and views: docs/sql.md).  The SQL of the shared aggregates is in
 * the schema's views (schema.c); what is here is the reader's own access
 * paths: rows past a watermark, one code object through the per-code
 * indexes, the lists dyntop shows.
 *
 * Invariants: the connection is opened read-only and never writes the file
 * (only its TEMP schema, for the views an older file lacks); each query is
 * prepared once, on first use, in the variant its run filter needs, and is
 * reset before it is handed out and after its rows are read, so no
 * statement holds the read snapshot between calls.  A query that reads
 * columns or tables a later schema version added has a variant for older
 * files, picked by the file's version (for_version): the reader never names
 * what the file lacks.  A view a later version added is read on every file:
 * an older one has it as the reader's TEMP view (break_costs, with its
 * costs NULL).
 */
#include "store_int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The queries.  A query with `one` has a "%s" in its SQL, or two: the run
   condition, `one` for one run (bound as the parameter it names) or `every`
   for every run, the same in both places.  The conditions that read past a
   watermark write the column as "+run_id": the unary plus keeps SQLite from
   answering "run_id = ?" through a per-code index (every row of the run)
   instead of the rowid range (only the new rows). */
enum {
    Q_RUNS,
    Q_RUNS_V4,
    Q_RUNS_V3,
    Q_MARK,                      /* + StoreTable: one per table */
    Q_CODES_NEW = Q_MARK + STORE_TABLE__COUNT,
    Q_COMPILES_NEW,
    Q_COMPILE_END,
    Q_GRAPHS_ALL,
    Q_GRAPHS_NEW,
    Q_BREAKS_ALL,
    Q_BREAKS_NEW,
    Q_LIMITS_NEW,
    Q_FAILS_COUNT,
    Q_FAILS_LAST,
    Q_FAILS_NEW,
    Q_BREAK_TEXTS_NEW,
    Q_FAIL_TEXTS_NEW,
    Q_ENTRIES_NEW,
    Q_STATS_NEW,
    Q_CODE_ENTRIES,
    Q_CODE_ENTRIES_V4,
    Q_ENTRY_GUARDS,
    Q_ENTRY_GUARDS_V3,           /* _V3: the same before STORE_PROVENANCE_VERSION */
    Q_TOP_FAILING,
    Q_TOP_FAILING_V3,
    Q_CODE_BREAKS,
    Q_CODE_BREAKS_V3,
    Q_BREAK_STACK,
    Q_CALL_PATHS,
    Q_CODE_RECOMPILES,
    Q_COMPILE_FAILURES,
    Q_COMPILE_FAILURES_V3,
    Q_RECOMPILE_DIFF,
    Q_CODE_LIMITS,
    Q_CODE_SKIPS,
    Q_CODE_SKIPS_V3,
    Q_BREAK_SITES,
    Q_BREAK_SITES_V3,
    Q_SKIP_SITES,                /* v4 on: no variant (older files have no types) */
    Q_RECOMPILE_LOG,
    Q_RECOMPILE_LOG_V3,
    Q_SUMMARY,
    Q_CODE_SUMMARY,
    Q_CODE_SUMMARY_V4,           /* _V4: before compiles.call_path (STORE_HATCHES_VERSION) */
    Q_CODES_NEW_V4,
    Q__COUNT
};

#define NEW_ROWS "+run_id = ?2", "(?2 IS NULL OR 1)"

/* A code object's name as users read it (v5): for a decorator's wrapper,
   what it wraps, from the last frame of its compiles' call paths
   ("can_return_tuple(wrapper) \u2192 LlamaModel.forward", the engine's
   naming: engine/capture/events.c events_wrapper_name), the first one and "+N" for
   the N others; else its qualified name.  `t` names the row's table, whose
   run_id, code_id and name it reads.  dynscope/places.py names them so in
   the report. */
#define WRAPPED_LAST "json_extract(w.call_path, '$[#-1][2]')"
#define WRAPPED_ROWS(t) \
    " FROM compiles AS w WHERE w.run_id = " t ".run_id AND w.code_id = " t ".code_id" \
    " AND instr(w.call_path, '\\u2192') > 0"
#define DISPLAY_NAME(t) \
    "coalesce((SELECT " WRAPPED_LAST WRAPPED_ROWS(t) " ORDER BY w.compile_row LIMIT 1)" \
    " || (SELECT CASE WHEN count(DISTINCT " WRAPPED_LAST ") > 1" \
    "     THEN ' +' || (count(DISTINCT " WRAPPED_LAST ") - 1) ELSE '' END" WRAPPED_ROWS(t) ")," \
    " " t ".name)"
#define CODES_NEW(name) \
    "SELECT rowid, run_id, code_id, filename, " name ", firstlineno" \
    " FROM code_objects AS co WHERE rowid > ?1 AND %s ORDER BY rowid"
#define CODE_SUMMARY(name) \
    "SELECT run_id, code_id, filename, " name ", firstlineno, compiles, recompiles," \
    " graph_breaks, guard_failures, cache_entries, hits, last_failure" \
    " FROM code_summary AS cs%s ORDER BY compiles DESC, hits DESC, run_id, code_id"

/* What the breaks at each site s cost, from the view break_costs (schema
   v6; a TEMP view with NULL costs over an older file) summed over the rows
   `where` picks (the name b for the view): c.ns, c.function_ns,
   c.extra_graphs and c.samples, all NULL when none of its calls was timed
   (no samples).  Its rows carry the registry's type and class on a v6
   file only (NULL, read as '', before), so on a v4 or v5 file no site
   finds its costs: they are unknown there anyway. */
#define SITE_COSTS(where) \
    " LEFT JOIN (SELECT kind, reason, filename, lineno," \
    "   coalesce(break_type, '') AS break_type, coalesce(break_class, '') AS break_class," \
    "   sum(samples) AS samples," \
    "   CASE WHEN sum(samples) > 0 THEN sum(cost_ns) END AS ns," \
    "   CASE WHEN sum(samples) > 0 THEN sum(function_ns) END AS function_ns," \
    "   CASE WHEN sum(samples) > 0 THEN sum(extra_graphs) END AS extra_graphs" \
    "   FROM break_costs AS b WHERE " where \
    "   GROUP BY kind, reason, filename, lineno, 5, 6) AS c" \
    " ON c.kind IS s.kind AND c.reason IS s.reason AND c.filename IS s.filename" \
    " AND c.lineno IS s.lineno AND c.break_type = s.break_type AND c.break_class = s.break_class"
#define SITE_COST_COLS "c.ns, c.function_ns, c.extra_graphs, c.samples"
/* Costliest first: a site without costs as 0, so a file without them keeps
   the order by count. */
#define BY_COST "coalesce(c.ns, 0) DESC"

/* Graph breaks by site s, with the registry's type and class (v4) as the
   parameters: '' before.  A site's type follows from its reason and its
   class from its file, so grouping by them splits no site.  Then their
   costs (SITE_COSTS). */
#define CODE_BREAKS(types, group) \
    "SELECT s.kind, s.reason, s.filename, s.lineno, s.n, s.last_id, s.break_type," \
    " s.break_class, " SITE_COST_COLS \
    " FROM (SELECT kind, reason, filename, lineno, count(*) AS n, max(break_id) AS last_id," \
    "   min(break_id) AS first_id, " types \
    "   FROM graph_breaks WHERE run_id = ?1 AND code_id = ?2" \
    "   GROUP BY kind, reason, filename, lineno" group ") AS s" \
    SITE_COSTS("b.run_id = ?1 AND b.code_id = ?2") \
    " ORDER BY " BY_COST ", s.n DESC, s.first_id"
/* Bare columns next to max(): SQLite takes them from the newest break.
   The function names are listed once each, comma-separated. */
#define BREAK_SITES(types, group) \
    "SELECT s.kind, s.reason, s.filename, s.lineno, s.n, s.codes, s.last_id, s.run_id," \
    " s.code_id, s.functions, s.break_type, s.break_class, " SITE_COST_COLS \
    " FROM (SELECT b.kind AS kind, b.reason AS reason, b.filename AS filename," \
    "   b.lineno AS lineno, count(*) AS n, count(DISTINCT b.run_id || '/' || b.code_id) AS codes," \
    "   max(b.break_id) AS last_id, b.run_id AS run_id, b.code_id AS code_id," \
    "   group_concat(DISTINCT co.name) AS functions, " types \
    "   FROM graph_breaks AS b" \
    "   LEFT JOIN code_objects AS co ON co.run_id = b.run_id AND co.code_id = b.code_id" \
    "   WHERE %s" \
    "   GROUP BY b.kind, b.reason, b.filename, b.lineno" group ") AS s" \
    SITE_COSTS("%s") \
    " ORDER BY " BY_COST ", s.n DESC, s.filename, s.lineno LIMIT ?2"

/* A code object's frame skips, with the registry's type and class (v4) as
   the parameter: '' before. */
#define CODE_SKIPS(types) \
    "SELECT at, resume_offset, reason, " types " FROM frame_skips" \
    " WHERE run_id = ?1 AND code_id = ?2 ORDER BY rowid DESC LIMIT ?3"

/* The runs, with who recorded them (v4) and their last mark (v5:
   annotations) as the parameter: NULLs before. */
#define RUNS(who) \
    "SELECT run_id, pid, started_at, coalesce(ended_at, 0), resets, dropped_events, argv, " \
    who " FROM runs ORDER BY run_id"
#define LAST_MARK \
    "(SELECT a.name || CASE WHEN a.phase = 'mark' THEN '' ELSE ' (' || a.phase || ')' END" \
    "        || ' ' || coalesce(a.fields, '') FROM annotations AS a" \
    " WHERE a.run_id = runs.run_id ORDER BY a.annotation_id DESC LIMIT 1)," \
    " (SELECT a.at FROM annotations AS a WHERE a.run_id = runs.run_id" \
    " ORDER BY a.annotation_id DESC LIMIT 1)"

/* A code object's cache entries; from column 10, what its compile recorded
   in v5 (compiles.hatches and the phases), NULL for an older file
   (Q_CODE_ENTRIES_V4). */
#define CODE_ENTRIES(compile_cols, join)                                             \
    "SELECT e.compile_id, e.frame_id, e.resume_offset, e.hits, e.guard_ns, e.guards_text," \
    " (SELECT count(*) FROM guards AS g WHERE g.run_id = e.run_id AND g.code_id = e.code_id" \
    "    AND g.epoch = e.epoch AND g.compile_id = e.compile_id),"                     \
    " (SELECT count(*) FROM cache_entries AS f WHERE f.run_id = e.run_id"            \
    "    AND f.code_id = e.code_id AND f.epoch = e.epoch AND f.frame_id IS e.frame_id),"  \
    " coalesce(e.stats_at, e.created_at, 0), e.stats_at IS NOT NULL, " compile_cols   \
    " FROM cache_entries AS e " join                                                  \
    " WHERE e.run_id = ?1 AND e.code_id = ?2 AND e.epoch = ?3"                       \
    " ORDER BY e.resume_offset, e.frame_id, coalesce(e.stats_at, e.created_at, 0) DESC"

/* The queries that read guard provenance or recompile_diffs (schema v4),
   each with the columns (and join) v4 added as a parameter: the _V3 variant
   reads NULL there, so a file before v4 is never asked for what it lacks. */
#define ENTRY_GUARDS(source) \
    "SELECT kind, expr, " source " FROM guards WHERE run_id = ?1 AND code_id = ?2" \
    " AND epoch = ?3 AND compile_id = ?4 ORDER BY idx"
#define TOP_FAILING(source) \
    "SELECT t.kind, t.expr, t.n, g.observed, " source \
    " FROM (SELECT kind, expr, count(*) AS n, max(failure_id) AS last_id FROM guard_failures" \
    "       WHERE run_id = ?1 AND code_id = ?2 GROUP BY kind, expr) AS t" \
    " JOIN guard_failures AS g ON g.failure_id = t.last_id" \
    " ORDER BY t.n DESC, t.last_id DESC LIMIT ?3"
#define COMPILE_FAILURES(source) \
    "SELECT entry_compile_id, kind, expr, observed, " source " FROM guard_failures" \
    " WHERE compile_row = ?1 ORDER BY failure_id LIMIT ?2"
/* The nearest entry: the row of its first failing guard (lowest idx). */
#define RECOMPILE_LOG(nearest, nearest_join) \
    "SELECT c.run_id, c.code_id, coalesce(co.name, '?'), c.compile_id, c.started_at," \
    " r.started_at," \
    " (SELECT count(*) FROM guard_failures AS g WHERE g.compile_row = c.compile_row)," \
    " f.kind IS NOT NULL AND f.expr IS NOT NULL, f.kind, f.expr, coalesce(f.observed, '?'), " \
    nearest \
    " FROM compiles AS c" \
    " LEFT JOIN code_objects AS co ON co.run_id = c.run_id AND co.code_id = c.code_id" \
    " LEFT JOIN runs AS r ON r.run_id = c.run_id" \
    " LEFT JOIN guard_failures AS f ON f.failure_id =" \
    "   (SELECT min(g.failure_id) FROM guard_failures AS g WHERE g.compile_row = c.compile_row)" \
    nearest_join \
    " WHERE c.frame_compile_id > 0 AND %s" \
    " ORDER BY c.compile_row DESC LIMIT ?2"

static const struct {
    const char *sql;
    const char *one, *every;
} queries[Q__COUNT] = {
    [Q_RUNS] = {RUNS("hostname, rank, local_rank, world_size, " LAST_MARK)},
    [Q_RUNS_V4] = {RUNS("hostname, rank, local_rank, world_size, NULL, NULL")},
    [Q_RUNS_V3] = {RUNS("NULL, NULL, NULL, NULL, NULL, NULL")},
    [Q_MARK + STORE_CODE_OBJECTS] = {"SELECT coalesce(max(rowid), 0) FROM code_objects"},
    [Q_MARK + STORE_COMPILES] = {"SELECT coalesce(max(compile_row), 0) FROM compiles"},
    [Q_MARK + STORE_GRAPHS] = {"SELECT coalesce(max(graph_id), 0) FROM graphs"},
    [Q_MARK + STORE_GRAPH_BREAKS] = {"SELECT coalesce(max(break_id), 0) FROM graph_breaks"},
    [Q_MARK + STORE_CACHE_LIMITS] = {"SELECT coalesce(max(rowid), 0) FROM cache_limits"},
    [Q_MARK + STORE_GUARD_FAILURES] = {"SELECT coalesce(max(failure_id), 0) FROM guard_failures"},
    [Q_MARK + STORE_CACHE_ENTRIES] = {"SELECT coalesce(max(rowid), 0) FROM cache_entries"},
    [Q_MARK + STORE_ENTRY_STATS] = {"SELECT coalesce(max(rowid), 0) FROM entry_stats"},
    [Q_CODES_NEW] = {CODES_NEW(DISPLAY_NAME("co")), NEW_ROWS},
    [Q_CODES_NEW_V4] = {CODES_NEW("name"), NEW_ROWS},
    [Q_COMPILES_NEW] = {"SELECT compile_row, run_id, code_id, frame_compile_id, started_at,"
                        " duration_ns, ended_at, graphs FROM compiles"
                        " WHERE compile_row > ?1 AND %s ORDER BY compile_row", NEW_ROWS},
    [Q_COMPILE_END] = {"SELECT duration_ns, ended_at, graphs FROM compiles"
                       " WHERE compile_row = ?1"},
    [Q_GRAPHS_ALL] = {"SELECT run_id, code_id, count(*), 0 FROM graphs WHERE %s"
                      " GROUP BY run_id, code_id", "run_id = ?2", "(?2 IS NULL OR 1)"},
    [Q_GRAPHS_NEW] = {"SELECT run_id, code_id, count(*), 0 FROM graphs"
                      " WHERE graph_id > ?1 AND %s GROUP BY run_id, code_id", NEW_ROWS},
    [Q_BREAKS_ALL] = {"SELECT run_id, code_id, count(*), 0 FROM graph_breaks WHERE %s"
                      " GROUP BY run_id, code_id", "run_id = ?2", "(?2 IS NULL OR 1)"},
    [Q_BREAKS_NEW] = {"SELECT run_id, code_id, count(*), 0 FROM graph_breaks"
                      " WHERE break_id > ?1 AND %s GROUP BY run_id, code_id", NEW_ROWS},
    [Q_LIMITS_NEW] = {"SELECT run_id, code_id, count(*), max(epoch) FROM cache_limits"
                      " WHERE rowid > ?1 AND %s GROUP BY run_id, code_id", NEW_ROWS},
    /* Every run: no WHERE, so SQLite counts the smallest b-tree's cells
       without decoding them (several times faster on a million rows). */
    [Q_FAILS_COUNT] = {"SELECT count(*) FROM guard_failures%s", " WHERE run_id = ?2", ""},
    [Q_FAILS_LAST] = {"SELECT g.failure_id, g.run_id, g.code_id, g.expr, g.observed"
                      " FROM code_objects AS co JOIN guard_failures AS g"
                      " ON g.failure_id = (SELECT max(x.failure_id) FROM guard_failures AS x"
                      "   WHERE x.run_id = co.run_id AND x.code_id = co.code_id)"
                      " WHERE %s", "co.run_id = ?2", "(?2 IS NULL OR 1)"},
    [Q_FAILS_NEW] = {"SELECT failure_id, run_id, code_id, expr, observed FROM guard_failures"
                     " WHERE failure_id > ?1 AND %s ORDER BY failure_id", NEW_ROWS},
    /* As dynscope/ranks.py reads them: a NULL kind or reason (expr) makes
       no text. */
    [Q_BREAK_TEXTS_NEW] = {"SELECT DISTINCT run_id, code_id, kind || ': ' || reason"
                           " FROM graph_breaks WHERE break_id > ?1 AND %s"
                           " AND kind IS NOT NULL AND reason IS NOT NULL", NEW_ROWS},
    [Q_FAIL_TEXTS_NEW] = {"SELECT DISTINCT run_id, code_id, expr FROM guard_failures"
                          " WHERE failure_id > ?1 AND %s AND expr IS NOT NULL", NEW_ROWS},
    [Q_ENTRIES_NEW] = {"SELECT rowid, run_id, code_id, epoch, compile_id, frame_id, hits"
                       " FROM cache_entries WHERE rowid > ?1 AND %s ORDER BY rowid", NEW_ROWS},
    [Q_STATS_NEW] = {"SELECT rowid, run_id, code_id, epoch, compile_id, 0, hits FROM entry_stats"
                     " WHERE rowid > ?1 AND %s ORDER BY rowid", NEW_ROWS},
    [Q_CODE_ENTRIES] = {CODE_ENTRIES("c.hatches, c.duration_ns, c.trace_ns, c.guards_ns, c.graph_ns,"
                                     " c.backend_ns, c.plan_ns, c.events_ns, c.attempts",
                                     "LEFT JOIN compiles AS c ON c.compile_row = e.compile_row")},
    [Q_CODE_ENTRIES_V4] = {CODE_ENTRIES("NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL", "")},
    [Q_ENTRY_GUARDS] = {ENTRY_GUARDS("filename, lineno")},
    [Q_ENTRY_GUARDS_V3] = {ENTRY_GUARDS("NULL, NULL")},
    [Q_TOP_FAILING] = {TOP_FAILING("g.filename, g.lineno")},
    [Q_TOP_FAILING_V3] = {TOP_FAILING("NULL, NULL")},
    [Q_CODE_BREAKS] = {CODE_BREAKS("coalesce(break_type, '') AS break_type,"
                                   " coalesce(break_class, '') AS break_class",
                                   ", break_type, break_class")},
    [Q_CODE_BREAKS_V3] = {CODE_BREAKS("'' AS break_type, '' AS break_class", "")},
    [Q_BREAK_STACK] = {
        "SELECT json_extract(j.value, '$[0]'), json_extract(j.value, '$[1]'),"
        " json_extract(j.value, '$[2]'), json_extract(j.value, '$[3]')"
        " FROM graph_breaks AS b, json_each(b.user_stack) AS j"
        " WHERE b.break_id = ?1 AND json_valid(b.user_stack) ORDER BY j.key"},
    /* ?3 unused (of_code binds it); a path's frames are consecutive, the
       paths in text order (so paths with a common start are neighbours) */
    [Q_CALL_PATHS] = {
        "SELECT p.call_path, p.n, p.ids, j.key, json_extract(j.value, '$[0]'),"
        " json_extract(j.value, '$[1]'), json_extract(j.value, '$[2]')"
        " FROM (SELECT call_path, count(*) AS n,"
        "       group_concat('[' || compile_id || ']', ' ') AS ids FROM compiles"
        "       WHERE run_id = ?1 AND code_id = ?2 AND ?3 = ?3 AND json_valid(call_path)"
        "       GROUP BY call_path) AS p, json_each(p.call_path) AS j"
        " ORDER BY p.call_path, j.key"},
    [Q_CODE_RECOMPILES] = {
        "SELECT compile_row, compile_id, started_at, duration_ns, coalesce(outcome, 'running'),"
        " reason, resume_offset FROM recompiles WHERE run_id = ?1 AND code_id = ?2"
        " ORDER BY compile_row DESC LIMIT ?3"},
    [Q_COMPILE_FAILURES] = {COMPILE_FAILURES("filename, lineno")},
    [Q_COMPILE_FAILURES_V3] = {COMPILE_FAILURES("NULL, NULL")},
    /* A user stack that is not valid JSON reads as no source line (json_extract
       would fail the query). */
    [Q_RECOMPILE_DIFF] = {
        "SELECT entry_compile_id, failing, capture_ns, idx, kind, expr, observed, filename,"
        " lineno, CASE WHEN json_valid(user_stack) THEN json_extract(user_stack, '$[#-1][3]') END"
        " FROM recompile_diffs WHERE compile_row = ?1 ORDER BY idx LIMIT ?2"},
    [Q_CODE_LIMITS] = {
        "SELECT at, epoch, frame_id, resume_offset, reason FROM cache_limits"
        " WHERE run_id = ?1 AND code_id = ?2 ORDER BY rowid DESC LIMIT ?3"},
    [Q_CODE_SKIPS] = {CODE_SKIPS("coalesce(break_type, ''), coalesce(break_class, '')")},
    [Q_CODE_SKIPS_V3] = {CODE_SKIPS("'', ''")},
    [Q_BREAK_SITES] = {BREAK_SITES("coalesce(b.break_type, '') AS break_type,"
                                   " coalesce(b.break_class, '') AS break_class",
                                   ", b.break_type, b.break_class"),
                       "b.run_id = ?1", "(?1 IS NOT NULL)"},
    [Q_BREAK_SITES_V3] = {BREAK_SITES("'' AS break_type, '' AS break_class", ""),
                          "b.run_id = ?1", "(?1 IS NOT NULL)"},
    /* Frame skips grouped as break sites are, the function (its file and
       first line) as the site; the bare run_id, code_id are the newest
       skip's (max(rowid)). */
    [Q_SKIP_SITES] = {
        "SELECT s.reason, coalesce(co.filename, ''), coalesce(co.firstlineno, 0), count(*) AS n,"
        " count(DISTINCT s.run_id || '/' || s.code_id), max(s.rowid), s.run_id, s.code_id,"
        " group_concat(DISTINCT co.name), coalesce(s.break_type, ''),"
        " coalesce(s.break_class, '')"
        " FROM frame_skips AS s"
        " LEFT JOIN code_objects AS co ON co.run_id = s.run_id AND co.code_id = s.code_id"
        " WHERE %s"
        " GROUP BY s.break_type, s.break_class, s.reason, co.filename, co.firstlineno"
        " ORDER BY n DESC, co.filename, co.firstlineno LIMIT ?2",
        "s.run_id = ?1", "(?1 IS NOT NULL)"},
    [Q_RECOMPILE_LOG] = {
        RECOMPILE_LOG("d.entry_compile_id IS NOT NULL, d.entry_compile_id, d.failing,"
                      " d.filename, d.lineno",
                      " LEFT JOIN recompile_diffs AS d ON d.rowid ="
                      "   (SELECT x.rowid FROM recompile_diffs AS x"
                      "    WHERE x.compile_row = c.compile_row ORDER BY x.idx LIMIT 1)"),
        "+c.run_id = ?1", "(?1 IS NOT NULL)"},
    [Q_RECOMPILE_LOG_V3] = {RECOMPILE_LOG("0, NULL, NULL, NULL, NULL", ""),
                            "+c.run_id = ?1", "(?1 IS NOT NULL)"},
    [Q_SUMMARY] = {
        "SELECT count(*), coalesce(max(run_id), 0), total(dropped_events), total(code_objects),"
        " total(compiles), total(recompiles), total(guard_failures), total(graph_breaks),"
        " total(cache_entries), total(hits) FROM run_summary%s", " WHERE run_id = ?1", ""},
    [Q_CODE_SUMMARY] = {CODE_SUMMARY(DISPLAY_NAME("cs")), " WHERE run_id = ?1", ""},
    [Q_CODE_SUMMARY_V4] = {CODE_SUMMARY("name"), " WHERE run_id = ?1", ""},
};

struct StoreReader {
    sqlite3 *db;                      /* owned, read-only */
    char *path;                       /* owned */
    int version;                      /* the file's schema version */
    sqlite3_stmt *st[Q__COUNT][2];    /* owned, prepared on first use: [one run, every run] */
    char err[512];                    /* the last error, "" if none */
};

/* ---- opening ---- */

/* "file:" + path percent-encoded + "?mode=ro".  malloc'd, NULL on OOM. */
static char *readonly_uri(const char *path)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = strlen(path);
    char *uri = malloc(5 + 3 * n + 9);
    if (uri == NULL)
        return NULL;
    char *p = uri;
    memcpy(p, "file:", 5);
    p += 5;
    for (const unsigned char *c = (const unsigned char *)path; *c; c++) {
        bool plain = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z')
                     || (*c >= '0' && *c <= '9') || strchr("/-._~", *c) != NULL;
        if (plain) {
            *p++ = (char)*c;
        }
        else {
            *p++ = '%';
            *p++ = hex[*c >> 4];
            *p++ = hex[*c & 15];
        }
    }
    memcpy(p, "?mode=ro", 9);
    return uri;
}

/* Is `version` one this build reads?  0, or -1 with *errmsg. */
static int check_version(const char *path, int version, char **errmsg)
{
    if (version == 0) {
        store_set_error(errmsg, "%s is an empty database, not a dynscope one", path);
        return -1;
    }
    if (version > STORE_SCHEMA_VERSION) {
        store_set_error(errmsg, "%s was written by a newer dynscope (schema v%d; this "
                        "build reads v%d)", path, version, STORE_SCHEMA_VERSION);
        return -1;
    }
    if (version < STORE_READ_MIN_VERSION) {
        store_set_error(errmsg, "%s has the older schema v%d (this build reads v%d to v%d); "
                        "recording to it once migrates it", path, version,
                        STORE_READ_MIN_VERSION, STORE_SCHEMA_VERSION);
        return -1;
    }
    return 0;
}

StoreReader *store_reader_open(const char *path, char **errmsg)
{
    struct stat st;
    if (errmsg != NULL)
        *errmsg = NULL;
    if (stat(path, &st) != 0) {
        store_set_error(errmsg, "cannot open %s: %s", path, strerror(errno));
        return NULL;
    }
    StoreReader *r = calloc(1, sizeof *r);
    char *uri = readonly_uri(path);
    if (r == NULL || uri == NULL || (r->path = strdup(path)) == NULL) {
        store_set_error(errmsg, "out of memory");
        goto out_free;
    }
    int rc = sqlite3_open_v2(uri, &r->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, NULL);
    if (rc != SQLITE_OK) {
        store_set_error(errmsg, "cannot open %s read-only: %s", path,
                        r->db ? sqlite3_errmsg(r->db) : sqlite3_errstr(rc));
        goto out_free;
    }
    sqlite3_busy_timeout(r->db, 1000);
    /* Keep more pages than SQLite's default 2 MB: polls and views reread the
       same index pages. */
    sqlite3_exec(r->db, "PRAGMA cache_size = -16384", NULL, NULL, NULL);
    if (store_schema_identify(r->db, path, &r->version, errmsg) < 0
        || check_version(path, r->version, errmsg) < 0
        || store_schema_temp_views(r->db, r->version, path, errmsg) < 0)
        goto out_free;
    free(uri);
    return r;

out_free:
    free(uri);
    store_reader_close(r);
    return NULL;
}

void store_reader_close(StoreReader *r)
{
    if (r == NULL)
        return;
    for (int q = 0; q < Q__COUNT; q++) {
        sqlite3_finalize(r->st[q][0]);
        sqlite3_finalize(r->st[q][1]);
    }
    sqlite3_close(r->db);
    free(r->path);
    free(r);
}

sqlite3 *store_reader_db(StoreReader *r)
{
    return r->db;
}

int store_reader_version(const StoreReader *r)
{
    return r->version;
}

const char *store_reader_errmsg(const StoreReader *r)
{
    return r->err;
}

static void set_error(StoreReader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void set_error(StoreReader *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err, sizeof r->err, fmt, ap);
    va_end(ap);
}

int store_read_begin(StoreReader *r)
{
    if (sqlite3_exec(r->db, "BEGIN", NULL, NULL, NULL) == SQLITE_OK)
        return 0;
    set_error(r, "reading %s failed: %s", r->path, sqlite3_errmsg(r->db));
    return -1;
}

void store_read_end(StoreReader *r)
{
    if (!sqlite3_get_autocommit(r->db))
        sqlite3_exec(r->db, "COMMIT", NULL, NULL, NULL);
}

/* ---- running queries ---- */

/* Query q for run_id (0: every run), prepared on first use and reset, its
   bindings cleared.  NULL (error set) if it cannot be prepared. */
static sqlite3_stmt *query(StoreReader *r, int q, long long run_id)
{
    bool every = queries[q].one != NULL && run_id == 0;
    sqlite3_stmt **slot = &r->st[q][every];
    if (*slot == NULL) {
        char *text = NULL;
        const char *cond = every ? queries[q].every : queries[q].one;
        if (queries[q].one != NULL
            && (text = sqlite3_mprintf(queries[q].sql, cond, cond)) == NULL) {
            set_error(r, "%s: out of memory", r->path);
            return NULL;
        }
        int rc = sqlite3_prepare_v3(r->db, text ? text : queries[q].sql, -1,
                                    SQLITE_PREPARE_PERSISTENT, slot, NULL);
        sqlite3_free(text);
        if (rc != SQLITE_OK) {
            set_error(r, "%s: cannot read it as a dynscope database: %s", r->path,
                      sqlite3_errmsg(r->db));
            sqlite3_finalize(*slot);
            *slot = NULL;
            return NULL;
        }
    }
    sqlite3_reset(*slot);
    sqlite3_clear_bindings(*slot);
    return *slot;
}

/* q, or its variant q_v3 on a file older than STORE_PROVENANCE_VERSION
   (STORE_WHO_VERSION and STORE_BREAK_TYPES_VERSION are the same version). */
static int for_version(const StoreReader *r, int q, int q_v3)
{
    return r->version >= STORE_PROVENANCE_VERSION ? q : q_v3;
}

/* Bind ?i = v if the statement has a parameter i (the every-run variant of
   a query may have fewer). */
static void bind(sqlite3_stmt *st, int i, long long v)
{
    if (i <= sqlite3_bind_parameter_count(st))
        sqlite3_bind_int64(st, i, v);
}

/* After the last sqlite3_step(): reset st; 0 if rc says the rows ended,
   else -1 with the error set. */
static int finish(StoreReader *r, sqlite3_stmt *st, int rc)
{
    if (rc != SQLITE_DONE && rc != SQLITE_ROW)
        set_error(r, "reading %s failed: %s", r->path, sqlite3_errmsg(r->db));
    sqlite3_reset(st);
    return rc == SQLITE_DONE || rc == SQLITE_ROW ? 0 : -1;
}

/* Column text, "" for NULL. */
static const char *text(sqlite3_stmt *st, int col)
{
    const unsigned char *t = sqlite3_column_text(st, col);
    return t != NULL ? (const char *)t : "";
}

#define I64(col) sqlite3_column_int64(st, (col))
#define INT(col) sqlite3_column_int(st, (col))

/* A break site's cost when none was measured. */
static const StoreBreakCost no_cost = {false, 0, 0, -1, 0, 0};

/* The one integer row of a query whose parameters are bound. */
static int scalar(StoreReader *r, sqlite3_stmt *st, long long *out)
{
    int rc = sqlite3_step(st);
    *out = rc == SQLITE_ROW ? I64(0) : 0;
    return finish(r, st, rc);
}

/* ---- totals ---- */

int store_read_summary(StoreReader *r, long long run_id, StoreSummary *out, char **errmsg)
{
    if (errmsg != NULL)
        *errmsg = NULL;
    memset(out, 0, sizeof *out);
    sqlite3_stmt *st = query(r, Q_SUMMARY, run_id);
    if (st == NULL)
        goto out_error;
    bind(st, 1, run_id);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        out->runs = I64(0);
        out->last_run_id = I64(1);
        out->dropped_events = I64(2);
        out->code_objects = I64(3);
        out->compiles = I64(4);
        out->recompiles = I64(5);
        out->guard_failures = I64(6);
        out->graph_breaks = I64(7);
        out->cache_entries = I64(8);
        out->hits = I64(9);
    }
    if (finish(r, st, rc) == 0)
        return 0;

out_error:
    store_set_error(errmsg, "%s: reading the summary failed: %s", r->path, r->err);
    return -1;
}

void store_code_rows_free(StoreCodeRow *rows, size_t nrows)
{
    if (rows == NULL)
        return;
    for (size_t i = 0; i < nrows; i++) {
        free(rows[i].filename);
        free(rows[i].name);
        free(rows[i].last_failure);
    }
    free(rows);
}

/* Append the current code_summary row to *v.  0, or -1 out of memory. */
static int code_row_add(sqlite3_stmt *st, StoreCodeRow **v, size_t *n, size_t *cap)
{
    if (*n == *cap) {
        size_t ncap = *cap ? 2 * *cap : 16;
        StoreCodeRow *nv = realloc(*v, ncap * sizeof *nv);
        if (nv == NULL)
            return -1;
        *v = nv;
        *cap = ncap;
    }
    StoreCodeRow *row = &(*v)[(*n)++];
    row->run_id = I64(0);
    row->code_id = I64(1);
    row->filename = strdup(text(st, 2));
    row->name = strdup(text(st, 3));
    row->firstlineno = INT(4);
    row->compiles = I64(5);
    row->recompiles = I64(6);
    row->graph_breaks = I64(7);
    row->guard_failures = I64(8);
    row->cache_entries = I64(9);
    row->hits = I64(10);
    row->last_failure = strdup(text(st, 11));
    return row->filename && row->name && row->last_failure ? 0 : -1;
}

int store_read_code_objects(StoreReader *r, long long run_id, StoreCodeRow **rows,
                            size_t *nrows, char **errmsg)
{
    StoreCodeRow *v = NULL;
    size_t n = 0, cap = 0;
    int rc = SQLITE_OK;
    if (errmsg != NULL)
        *errmsg = NULL;
    *rows = NULL;
    *nrows = 0;
    sqlite3_stmt *st = query(r, r->version >= STORE_HATCHES_VERSION ? Q_CODE_SUMMARY
                                                                     : Q_CODE_SUMMARY_V4, run_id);
    if (st == NULL)
        goto out_error;
    bind(st, 1, run_id);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (code_row_add(st, &v, &n, &cap) < 0) {
            sqlite3_reset(st);
            set_error(r, "out of memory");
            goto out_error;
        }
    }
    if (finish(r, st, rc) < 0)
        goto out_error;
    *rows = v;
    *nrows = n;
    return 0;

out_error:
    store_set_error(errmsg, "%s: listing code objects failed: %s", r->path, r->err);
    store_code_rows_free(v, n);
    return -1;
}

/* ---- runs, watermarks, rows past them ---- */

int store_read_runs(StoreReader *r, void (*fn)(void *ctx, const StoreRunRow *row), void *ctx)
{
    int q = r->version >= STORE_HATCHES_VERSION ? Q_RUNS : for_version(r, Q_RUNS_V4, Q_RUNS_V3);
    sqlite3_stmt *st = query(r, q, 0);
    int rc;
    if (st == NULL)
        return -1;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        bool has_rank = sqlite3_column_type(st, 8) != SQLITE_NULL;
        StoreRunRow row = {
            I64(0), I64(1), I64(2), I64(3), I64(4), I64(5), text(st, 6), text(st, 7),
            has_rank, has_rank ? I64(8) : -1,
            sqlite3_column_type(st, 9) != SQLITE_NULL ? I64(9) : -1,
            sqlite3_column_type(st, 10) != SQLITE_NULL ? I64(10) : -1,
            text(st, 11), I64(12),
        };
        fn(ctx, &row);
    }
    return finish(r, st, rc);
}

int store_read_mark(StoreReader *r, StoreTable t, long long *mark)
{
    STORE_ASSERT((unsigned)t < STORE_TABLE__COUNT);
    sqlite3_stmt *st = query(r, Q_MARK + (int)t, 0);
    if (st == NULL) {
        *mark = 0;
        return -1;
    }
    return scalar(r, st, mark);
}

/* Query q (rows past ?1 = since, of ?2 = run_id), ready to step. */
static sqlite3_stmt *new_rows(StoreReader *r, int q, long long run_id, long long since)
{
    sqlite3_stmt *st = query(r, q, run_id);
    if (st != NULL) {
        bind(st, 1, since);
        bind(st, 2, run_id);
    }
    return st;
}

int store_read_new_code_objects(StoreReader *r, long long run_id, long long since,
                                void (*fn)(void *ctx, const StoreCodeObjectRow *row), void *ctx)
{
    sqlite3_stmt *st = new_rows(r, r->version >= STORE_HATCHES_VERSION ? Q_CODES_NEW : Q_CODES_NEW_V4,
                                run_id, since);
    int rc;
    if (st == NULL)
        return -1;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        StoreCodeObjectRow row = {I64(0), I64(1), I64(2), text(st, 3), text(st, 4), INT(5)};
        fn(ctx, &row);
    }
    return finish(r, st, rc);
}

int store_read_new_compiles(StoreReader *r, long long run_id, long long since,
                            void (*fn)(void *ctx, const StoreCompileRow *row), void *ctx)
{
    sqlite3_stmt *st = new_rows(r, Q_COMPILES_NEW, run_id, since);
    int rc;
    if (st == NULL)
        return -1;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        bool ended = sqlite3_column_type(st, 6) != SQLITE_NULL;
        StoreCompileRow row = {I64(0), I64(1), I64(2), I64(3), I64(4), ended ? I64(5) : 0,
                               ended, ended ? I64(7) : 0};
        fn(ctx, &row);
    }
    return finish(r, st, rc);
}

int store_read_compile_end(StoreReader *r, long long compile_row, bool *ended,
                           long long *duration_ns, long long *graphs)
{
    sqlite3_stmt *st = query(r, Q_COMPILE_END, 0);
    *ended = false;
    *duration_ns = 0;
    if (graphs != NULL)
        *graphs = 0;
    if (st == NULL)
        return -1;
    bind(st, 1, compile_row);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW && sqlite3_column_type(st, 1) != SQLITE_NULL) {
        *ended = true;
        *duration_ns = I64(0);
        if (graphs != NULL)
            *graphs = I64(2);
    }
    return finish(r, st, rc);
}

int store_read_new_texts(StoreReader *r, StoreTable t, long long run_id, long long since,
                         void (*fn)(void *ctx, const StoreTextRow *row), void *ctx)
{
    int q;
    switch (t) {
    case STORE_GRAPH_BREAKS: q = Q_BREAK_TEXTS_NEW; break;
    case STORE_GUARD_FAILURES: q = Q_FAIL_TEXTS_NEW; break;
    default:
        set_error(r, "store_read_new_texts: table %d has no texts per code object", (int)t);
        return -1;
    }
    sqlite3_stmt *st = new_rows(r, q, run_id, since);
    int rc;
    if (st == NULL)
        return -1;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        StoreTextRow row = {I64(0), I64(1), text(st, 2)};
        fn(ctx, &row);
    }
    return finish(r, st, rc);
}

int store_read_counts(StoreReader *r, StoreTable t, long long run_id, long long since,
                      void (*fn)(void *ctx, const StoreCountRow *row), void *ctx)
{
    int q;
    switch (t) {
    case STORE_GRAPHS: q = since > 0 ? Q_GRAPHS_NEW : Q_GRAPHS_ALL; break;
    case STORE_GRAPH_BREAKS: q = since > 0 ? Q_BREAKS_NEW : Q_BREAKS_ALL; break;
    case STORE_CACHE_LIMITS: q = Q_LIMITS_NEW; break;   /* a few rows: no index pass */
    default:
        set_error(r, "store_read_counts: table %d is not counted per code object", (int)t);
        return -1;
    }
    sqlite3_stmt *st = new_rows(r, q, run_id, since);
    int rc;
    if (st == NULL)
        return -1;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        StoreCountRow row = {I64(0), I64(1), I64(2), I64(3)};
        fn(ctx, &row);
    }
    return finish(r, st, rc);
}

int store_read_failure_count(StoreReader *r, long long run_id, long long *n)
{
    sqlite3_stmt *st = query(r, Q_FAILS_COUNT, run_id);
    if (st == NULL) {
        *n = 0;
        return -1;
    }
    bind(st, 2, run_id);
    return scalar(r, st, n);
}

/* Hand the StoreFailureRows of a bound query to fn. */
static int failure_rows(StoreReader *r, sqlite3_stmt *st,
                        void (*fn)(void *ctx, const StoreFailureRow *row), void *ctx)
{
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        StoreFailureRow row = {I64(0), I64(1), I64(2), text(st, 3), text(st, 4)};
        fn(ctx, &row);
    }
    return finish(r, st, rc);
}

int store_read_last_failures(StoreReader *r, long long run_id,
                             void (*fn)(void *ctx, const StoreFailureRow *row), void *ctx)
{
    sqlite3_stmt *st = new_rows(r, Q_FAILS_LAST, run_id, 0);
    return st == NULL ? -1 : failure_rows(r, st, fn, ctx);
}

int store_read_new_failures(StoreReader *r, long long run_id, long long since,
                            void (*fn)(void *ctx, const StoreFailureRow *row), void *ctx)
{
    sqlite3_stmt *st = new_rows(r, Q_FAILS_NEW, run_id, since);
    return st == NULL ? -1 : failure_rows(r, st, fn, ctx);
}

/* Hand the StoreEntryRows of a bound query to fn. */
static int entry_rows(StoreReader *r, sqlite3_stmt *st,
                      void (*fn)(void *ctx, const StoreEntryRow *row), void *ctx)
{
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        StoreEntryRow row = {I64(0), I64(1), I64(2), I64(3), text(st, 4), I64(5), I64(6)};
        fn(ctx, &row);
    }
    return finish(r, st, rc);
}

int store_read_new_entries(StoreReader *r, long long run_id, long long since,
                           void (*fn)(void *ctx, const StoreEntryRow *row), void *ctx)
{
    sqlite3_stmt *st = new_rows(r, Q_ENTRIES_NEW, run_id, since);
    return st == NULL ? -1 : entry_rows(r, st, fn, ctx);
}

int store_read_new_entry_stats(StoreReader *r, long long run_id, long long since,
                               void (*fn)(void *ctx, const StoreEntryRow *row), void *ctx)
{
    sqlite3_stmt *st = new_rows(r, Q_STATS_NEW, run_id, since);
    return st == NULL ? -1 : entry_rows(r, st, fn, ctx);
}

/* ---- one code object ---- */

/* Query q with ?1 = run_id, ?2 = code_id, ?3 = third (epoch or a limit). */
static sqlite3_stmt *of_code(StoreReader *r, int q, long long run_id, long long code_id,
                             long long third)
{
    sqlite3_stmt *st = query(r, q, 0);
    if (st != NULL) {
        bind(st, 1, run_id);
        bind(st, 2, code_id);
        bind(st, 3, third);
    }
    return st;
}

int store_read_code_entries(StoreReader *r, long long run_id, long long code_id,
                            long long epoch,
                            void (*fn)(void *ctx, const StoreCodeEntryRow *row), void *ctx)
{
    int q = r->version >= STORE_HATCHES_VERSION ? Q_CODE_ENTRIES : Q_CODE_ENTRIES_V4;
    sqlite3_stmt *st = of_code(r, q, run_id, code_id, epoch);
    int rc;
    if (st == NULL)
        return -1;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        StoreCodeEntryRow row = {text(st, 0), I64(1), INT(2), I64(3), I64(4), text(st, 5),
                                 I64(6), I64(7), I64(8), INT(9) != 0, text(st, 10),
                                 {I64(11), I64(12), I64(13), I64(14), I64(15), I64(16), I64(17)},
                                 INT(18)};
        fn(ctx, &row);
    }
    return finish(r, st, rc);
}

int store_read_entry_guards(StoreReader *r, long long run_id, long long code_id,
                            long long epoch, const char *compile_id,
                            void (*fn)(void *ctx, const StoreGuardRow *row), void *ctx)
{
    sqlite3_stmt *st = of_code(r, for_version(r, Q_ENTRY_GUARDS, Q_ENTRY_GUARDS_V3), run_id,
                               code_id, epoch);
    int rc;
    if (st == NULL)
        return -1;
    sqlite3_bind_text(st, 4, compile_id, -1, SQLITE_TRANSIENT);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        StoreGuardRow row = {text(st, 0), text(st, 1), text(st, 2), INT(3)};
        fn(ctx, &row);
    }
    return finish(r, st, rc);
}

int store_read_top_failing_guards(StoreReader *r, long long run_id, long long code_id,
                                  int limit,
                                  void (*fn)(void *ctx, const StoreGuardCountRow *row),
                                  void *ctx)
{
    sqlite3_stmt *st = of_code(r, for_version(r, Q_TOP_FAILING, Q_TOP_FAILING_V3), run_id,
                               code_id, limit);
    int rc;
    if (st == NULL)
        return -1;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        StoreGuardCountRow row = {text(st, 0), text(st, 1), I64(2), text(st, 3), text(st, 4),
                                  INT(5)};
        fn(ctx, &row);
    }
    return finish(r, st, rc);
}

/* A site's cost from its columns col.. (SITE_COST_COLS): unknown when
   they are NULL (no call that broke there was timed). */
static StoreBreakCost site_cost(sqlite3_stmt *st, int col)
{
    if (sqlite3_column_type(st, col) == SQLITE_NULL)
        return no_cost;
    StoreBreakCost c = {true, I64(col), I64(col + 1), -1, I64(col + 2), I64(col + 3)};
    if (c.function_ns > 0)
        c.share = (double)c.ns / (double)c.function_ns;
    return c;
}

int store_read_code_break_sites(StoreReader *r, long long run_id, long long code_id,
                                void (*fn)(void *ctx, const StoreBreakSiteRow *row),
                                void *ctx)
{
    sqlite3_stmt *st = of_code(r, for_version(r, Q_CODE_BREAKS, Q_CODE_BREAKS_V3), run_id,
                               code_id, 0);
    int rc;
    if (st == NULL)
        return -1;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        StoreBreakSiteRow row = {text(st, 0), text(st, 1), text(st, 2), INT(3), I64(4), 0,
                                 I64(5), run_id, code_id, "", text(st, 6), text(st, 7),
                                 site_cost(st, 8)};
        fn(ctx, &row);
    }
    return finish(r, st, rc);
}

int store_read_break_stack(StoreReader *r, long long break_id,
                           void (*fn)(void *ctx, const StoreStackFrame *row), void *ctx)
{
    sqlite3_stmt *st = query(r, Q_BREAK_STACK, 0);
    int rc;
    if (st == NULL)
        return -1;
    bind(st, 1, break_id);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        StoreStackFrame row = {text(st, 0), INT(1), text(st, 2), text(st, 3)};
        fn(ctx, &row);
    }
    return finish(r, st, rc);
}

int store_read_call_paths(StoreReader *r, long long run_id, long long code_id,
                          void (*fn)(void *ctx, const StoreCallPathFrame *row), void *ctx)
{
    if (r->version < STORE_HATCHES_VERSION)
        return 0;                /* no call_path column: no paths */
    sqlite3_stmt *st = of_code(r, Q_CALL_PATHS, run_id, code_id, 0);
    int rc;
    if (st == NULL)
        return -1;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        StoreCallPathFrame row = {text(st, 0), I64(1), text(st, 2), INT(3), text(st, 4), INT(5),
                                  text(st, 6)};
        fn(ctx, &row);
    }
    return finish(r, st, rc);
}

int store_read_code_recompiles(StoreReader *r, long long run_id, long long code_id,
                               int limit,
                               void (*fn)(void *ctx, const StoreRecompileRow *row), void *ctx)
{
    sqlite3_stmt *st = of_code(r, Q_CODE_RECOMPILES, run_id, code_id, limit);
    int rc;
    if (st == NULL)
        return -1;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        StoreRecompileRow row = {I64(0), text(st, 1), I64(2), I64(3), text(st, 4),
                                 text(st, 5), INT(6)};
        fn(ctx, &row);
    }
    return finish(r, st, rc);
}

int store_read_compile_failures(StoreReader *r, long long compile_row, int limit,
                                void (*fn)(void *ctx, const StoreCompileFailureRow *row),
                                void *ctx)
{
    sqlite3_stmt *st = query(r, for_version(r, Q_COMPILE_FAILURES, Q_COMPILE_FAILURES_V3), 0);
    int rc;
    if (st == NULL)
        return -1;
    bind(st, 1, compile_row);
    bind(st, 2, limit);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        StoreCompileFailureRow row = {text(st, 0), text(st, 1), text(st, 2), text(st, 3),
                                      text(st, 4), INT(5)};
        fn(ctx, &row);
    }
    return finish(r, st, rc);
}

int store_read_recompile_diff(StoreReader *r, long long compile_row, int limit,
                              void (*fn)(void *ctx, const StoreRecompileDiffRow *row),
                              void *ctx)
{
    if (r->version < STORE_PROVENANCE_VERSION)
        return 0;                /* no recompile_diffs table: nothing recorded */
    sqlite3_stmt *st = query(r, Q_RECOMPILE_DIFF, 0);
    int rc;
    if (st == NULL)
        return -1;
    bind(st, 1, compile_row);
    bind(st, 2, limit);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        StoreRecompileDiffRow row = {text(st, 0), I64(1), I64(2), INT(3), text(st, 4),
                                     text(st, 5), text(st, 6), text(st, 7), INT(8),
                                     text(st, 9)};
        fn(ctx, &row);
    }
    return finish(r, st, rc);
}

int store_read_code_cache_limits(StoreReader *r, long long run_id, long long code_id,
                                 int limit,
                                 void (*fn)(void *ctx, const StoreLimitRow *row), void *ctx)
{
    sqlite3_stmt *st = of_code(r, Q_CODE_LIMITS, run_id, code_id, limit);
    int rc;
    if (st == NULL)
        return -1;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        StoreLimitRow row = {I64(0), I64(1), I64(2), INT(3), text(st, 4)};
        fn(ctx, &row);
    }
    return finish(r, st, rc);
}

int store_read_code_skips(StoreReader *r, long long run_id, long long code_id, int limit,
                          void (*fn)(void *ctx, const StoreSkipRow *row), void *ctx)
{
    sqlite3_stmt *st = of_code(r, for_version(r, Q_CODE_SKIPS, Q_CODE_SKIPS_V3), run_id,
                               code_id, limit);
    int rc;
    if (st == NULL)
        return -1;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        StoreSkipRow row = {I64(0), INT(1), text(st, 2), text(st, 3), text(st, 4)};
        fn(ctx, &row);
    }
    return finish(r, st, rc);
}

/* ---- whole-run lists ---- */

int store_read_break_sites(StoreReader *r, long long run_id, int limit,
                           void (*fn)(void *ctx, const StoreBreakSiteRow *row), void *ctx)
{
    sqlite3_stmt *st = query(r, for_version(r, Q_BREAK_SITES, Q_BREAK_SITES_V3), run_id);
    int rc;
    if (st == NULL)
        return -1;
    bind(st, 1, run_id);
    bind(st, 2, limit);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        StoreBreakSiteRow row = {text(st, 0), text(st, 1), text(st, 2), INT(3), I64(4),
                                 I64(5), I64(6), I64(7), I64(8), text(st, 9), text(st, 10),
                                 text(st, 11), site_cost(st, 12)};
        fn(ctx, &row);
    }
    return finish(r, st, rc);
}

int store_read_skip_sites(StoreReader *r, long long run_id, int limit,
                          void (*fn)(void *ctx, const StoreBreakSiteRow *row), void *ctx)
{
    if (r->version < STORE_BREAK_TYPES_VERSION)
        return 0;                /* no types to group by: nothing to show */
    sqlite3_stmt *st = query(r, Q_SKIP_SITES, run_id);
    int rc;
    if (st == NULL)
        return -1;
    bind(st, 1, run_id);
    bind(st, 2, limit);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        StoreBreakSiteRow row = {"", text(st, 0), text(st, 1), INT(2), I64(3), I64(4), 0,
                                 I64(6), I64(7), text(st, 8), text(st, 9), text(st, 10),
                                 no_cost};
        fn(ctx, &row);
    }
    return finish(r, st, rc);
}

int store_read_recompile_log(StoreReader *r, long long run_id, int limit,
                             void (*fn)(void *ctx, const StoreRecompileLogRow *row),
                             void *ctx)
{
    sqlite3_stmt *st = query(r, for_version(r, Q_RECOMPILE_LOG, Q_RECOMPILE_LOG_V3), run_id);
    int rc;
    if (st == NULL)
        return -1;
    bind(st, 1, run_id);
    bind(st, 2, limit);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        StoreRecompileLogRow row = {I64(0), I64(1), text(st, 2), text(st, 3), I64(4),
                                    I64(5), I64(6), INT(7) != 0, text(st, 8), text(st, 9),
                                    text(st, 10), INT(11) != 0, text(st, 12), I64(13),
                                    text(st, 14), INT(15)};
        fn(ctx, &row);
    }
    return finish(r, st, rc);
}
