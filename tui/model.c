/*
 * model.c -- dyntop's picture of a dynscope database: the runs, one row of
 * aggregates per code object, and the header totals, kept up to date by
 * polling.  Contract and invariants: tui.h (Model); tables: docs/sql.md.
 *
 * Refreshing is incremental, so a poll costs what changed, not what the file
 * holds (docs/performance.md, "dyntop refresh").  The recorder only appends
 * to code_objects, compiles, graphs, graph_breaks, cache_limits,
 * guard_failures, cache_entries and entry_stats, and rowids grow with each
 * commit (one writer at a time holds the write lock), so each refresh reads
 * the rows past the largest rowid it has seen ("watermark") in one read
 * transaction.  What the recorder updates in place is covered too:
 *   - compiles get duration_ns/ended_at when the compile ends: compiles seen
 *     without ended_at stay on a short list and are re-read until they end;
 *   - cache_entries.hits change with each counter snapshot, and every change
 *     is also appended to entry_stats, which is read past its watermark;
 *   - runs (a handful of rows) are re-read whole.
 * The first load counts graphs, graph_breaks and guard_failures with grouped
 * queries through their per-code indexes instead of reading their rows (the
 * code objects, compiles and cache entries it reads row by row: the model
 * keeps what it needs of them); so does a refresh that finds a very large
 * number of new guard failures.
 */
#include "tui.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* More new guard failures than this are counted with the grouped query. */
#define BULK_FAILURES 20000

enum {
    ST_RUNS,
    ST_CODES_NEW,
    ST_CODES_MAX,
    ST_COMPILES_NEW,
    ST_COMPILES_MAX,
    ST_COMPILE_ONE,
    ST_GRAPHS_ALL,
    ST_GRAPHS_NEW,
    ST_GRAPHS_MAX,
    ST_BREAKS_ALL,
    ST_BREAKS_NEW,
    ST_BREAKS_MAX,
    ST_LIMITS_NEW,
    ST_LIMITS_MAX,
    ST_FAILS_COUNT,
    ST_FAILS_COUNT_ALL,
    ST_FAILS_LAST,
    ST_FAILS_NEW,
    ST_FAILS_MAX,
    ST_ENTRIES_NEW,
    ST_ENTRIES_MAX,
    ST_STATS_NEW,
    ST_STATS_MAX,
    ST__COUNT
};

struct ModelStmts {
    sqlite3_stmt *st[ST__COUNT];
};

/* ?1 = watermark, ?2 = run_id; "%s" is the run condition, "<alias>run_id =
   ?2", or always true when every run is shown.  The statements that read past
   a watermark use the alias "+": the unary plus keeps SQLite from answering
   "run_id = ?" through a per-code index (every row of the run) instead of
   the rowid range (only the new rows). */
static const struct {
    const char *sql;
    const char *alias;
} stmt_sql[ST__COUNT] = {
    [ST_RUNS] = {"SELECT run_id, pid, started_at, coalesce(ended_at, 0), resets,"
                 " dropped_events, argv FROM runs ORDER BY run_id", NULL},
    [ST_CODES_NEW] = {"SELECT rowid, run_id, code_id, filename, name, firstlineno"
                      " FROM code_objects WHERE rowid > ?1 AND %s ORDER BY rowid", "+"},
    [ST_CODES_MAX] = {"SELECT coalesce(max(rowid), 0) FROM code_objects", NULL},
    [ST_COMPILES_NEW] = {"SELECT compile_row, run_id, code_id, frame_compile_id, started_at,"
                         " duration_ns, ended_at FROM compiles"
                         " WHERE compile_row > ?1 AND %s ORDER BY compile_row", "+"},
    [ST_COMPILES_MAX] = {"SELECT coalesce(max(compile_row), 0) FROM compiles", NULL},
    [ST_COMPILE_ONE] = {"SELECT duration_ns, ended_at FROM compiles WHERE compile_row = ?1",
                        NULL},
    [ST_GRAPHS_ALL] = {"SELECT run_id, code_id, count(*) FROM graphs WHERE %s"
                       " GROUP BY run_id, code_id", ""},
    [ST_GRAPHS_NEW] = {"SELECT run_id, code_id, count(*) FROM graphs"
                       " WHERE graph_id > ?1 AND %s GROUP BY run_id, code_id", "+"},
    [ST_GRAPHS_MAX] = {"SELECT coalesce(max(graph_id), 0) FROM graphs", NULL},
    [ST_BREAKS_ALL] = {"SELECT run_id, code_id, count(*) FROM graph_breaks WHERE %s"
                       " GROUP BY run_id, code_id", ""},
    [ST_BREAKS_NEW] = {"SELECT run_id, code_id, count(*) FROM graph_breaks"
                       " WHERE break_id > ?1 AND %s GROUP BY run_id, code_id", "+"},
    [ST_BREAKS_MAX] = {"SELECT coalesce(max(break_id), 0) FROM graph_breaks", NULL},
    [ST_LIMITS_NEW] = {"SELECT run_id, code_id, count(*), max(epoch) FROM cache_limits"
                       " WHERE rowid > ?1 AND %s GROUP BY run_id, code_id", "+"},
    [ST_LIMITS_MAX] = {"SELECT coalesce(max(rowid), 0) FROM cache_limits", NULL},
    [ST_FAILS_COUNT] = {"SELECT count(*) FROM guard_failures WHERE %s", ""},
    /* No WHERE: SQLite counts the smallest b-tree's cells without decoding
       them (several times faster on a million rows). */
    [ST_FAILS_COUNT_ALL] = {"SELECT count(*) FROM guard_failures", NULL},
    [ST_FAILS_LAST] = {"SELECT g.run_id, g.code_id, g.failure_id, g.expr, g.observed"
                       " FROM code_objects AS co JOIN guard_failures AS g"
                       " ON g.failure_id = (SELECT max(x.failure_id) FROM guard_failures AS x"
                       "   WHERE x.run_id = co.run_id AND x.code_id = co.code_id)"
                       " WHERE %s", "co."},
    [ST_FAILS_NEW] = {"SELECT failure_id, run_id, code_id, expr, observed FROM guard_failures"
                      " WHERE failure_id > ?1 AND %s ORDER BY failure_id", "+"},
    [ST_FAILS_MAX] = {"SELECT coalesce(max(failure_id), 0) FROM guard_failures", NULL},
    [ST_ENTRIES_NEW] = {"SELECT rowid, run_id, code_id, epoch, compile_id, frame_id, hits"
                        " FROM cache_entries WHERE rowid > ?1 AND %s ORDER BY rowid", "+"},
    [ST_ENTRIES_MAX] = {"SELECT coalesce(max(rowid), 0) FROM cache_entries", NULL},
    [ST_STATS_NEW] = {"SELECT run_id, code_id, epoch, compile_id, hits FROM entry_stats"
                      " WHERE rowid > ?1 AND %s ORDER BY rowid", "+"},
    [ST_STATS_MAX] = {"SELECT coalesce(max(rowid), 0) FROM entry_stats", NULL},
};

static void set_error(Model *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void set_error(Model *m, const char *fmt, ...)
{
    va_list ap;
    char buf[512];
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    free(m->error);
    m->error = xstrdup(buf);
}

/* ---- statements ---- */

static void stmts_free(Model *m)
{
    if (m->st == NULL)
        return;
    for (int i = 0; i < ST__COUNT; i++)
        sqlite3_finalize(m->st->st[i]);
    free(m->st);
    m->st = NULL;
}

static int stmts_prepare(Model *m, char **errmsg)
{
    sqlite3 *db = store_reader_db(m->reader);
    /* Keep more pages than SQLite's default 2 MB: views and polls reread
       the same index pages. */
    sqlite3_exec(db, "PRAGMA cache_size = -16384", NULL, NULL, NULL);
    m->st = xcalloc(1, sizeof *m->st);
    for (int i = 0; i < ST__COUNT; i++) {
        char sql[1024], cond[64];
        if (stmt_sql[i].alias == NULL)
            snprintf(sql, sizeof sql, "%s", stmt_sql[i].sql);
        else {
            if (m->run_pick == MODEL_RUN_ALL)
                snprintf(cond, sizeof cond, "(?2 IS NULL OR 1)");
            else
                snprintf(cond, sizeof cond, "%srun_id = ?2", stmt_sql[i].alias);
            snprintf(sql, sizeof sql, stmt_sql[i].sql, cond);
        }
        if (sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, &m->st->st[i], NULL)
            != SQLITE_OK) {
            *errmsg = xasprintf("%s: cannot read it as a dynscope database: %s", m->path,
                                sqlite3_errmsg(db));
            stmts_free(m);
            return -1;
        }
    }
    return 0;
}

/* Reset st and bind ?1 = mark and (if it has one) ?2 = the shown run. */
static sqlite3_stmt *stmt(Model *m, int i, long long mark)
{
    sqlite3_stmt *st = m->st->st[i];
    sqlite3_reset(st);
    int n = sqlite3_bind_parameter_count(st);
    if (n >= 1)
        sqlite3_bind_int64(st, 1, mark);
    if (n >= 2)
        sqlite3_bind_int64(st, 2, m->run_id);
    return st;
}

/* The one integer a statement returns.  SQLite result code. */
static int scalar(Model *m, int i, long long *out)
{
    sqlite3_stmt *st = stmt(m, i, 0);
    int rc = sqlite3_step(st);
    *out = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
    rc = (rc == SQLITE_ROW || rc == SQLITE_DONE) ? SQLITE_OK : rc;
    sqlite3_reset(st);
    return rc;
}

static const char *text(sqlite3_stmt *st, int col)
{
    const unsigned char *t = sqlite3_column_text(st, col);
    return t != NULL ? (const char *)t : "";
}

/* ---- rows and entries ---- */

typedef struct CodeKey {
    const Model *m;
    long long run_id, code_id;
} CodeKey;

static bool code_eq(const void *ctx, size_t idx)
{
    const CodeKey *k = ctx;
    const CodeRow *r = &k->m->rows[idx];
    return r->run_id == k->run_id && r->code_id == k->code_id;
}

long model_find(const Model *m, long long run_id, long long code_id)
{
    CodeKey k = {m, run_id, code_id};
    size_t i = indexmap_find(&m->code_map, indexmap_hash2(run_id, code_id), code_eq, &k);
    return i == (size_t)-1 ? -1 : (long)i;
}

/* The row of (run_id, code_id), made (as "?") if the code_objects row has
   not been seen.  Cannot fail. */
static long row_for(Model *m, long long run_id, long long code_id)
{
    long i = model_find(m, run_id, code_id);
    if (i >= 0)
        return i;
    if (m->nrows == m->caprows) {
        m->caprows = m->caprows ? 2 * m->caprows : 256;
        m->rows = xrealloc(m->rows, m->caprows * sizeof *m->rows);
    }
    CodeRow *r = &m->rows[m->nrows];
    memset(r, 0, sizeof *r);
    r->run_id = run_id;
    r->code_id = code_id;
    r->name = xstrdup("?");
    r->filename = xstrdup("?");
    r->where = xstrdup("?");
    r->last_fail = xstrdup("");
    r->limit_epoch = -1;
    r->entry_head = -1;
    indexmap_add(&m->code_map, indexmap_hash2(run_id, code_id), m->nrows);
    return (long)m->nrows++;
}

typedef struct EntryKey {
    const Model *m;
    long row;
    long long epoch;
    const char *cid;
} EntryKey;

static bool entry_eq(const void *ctx, size_t idx)
{
    const EntryKey *k = ctx;
    const EntryRec *e = &k->m->entries[idx];
    return e->row == k->row && e->epoch == k->epoch && strcmp(e->cid, k->cid) == 0;
}

static uint64_t entry_hash(long row, long long epoch, const char *cid)
{
    return indexmap_hash_str(indexmap_hash2(row, epoch), cid);
}

static long entry_find(const Model *m, long row, long long epoch, const char *cid)
{
    char key[sizeof m->entries[0].cid];
    snprintf(key, sizeof key, "%s", cid);
    EntryKey k = {m, row, epoch, key};
    size_t i = indexmap_find(&m->entry_map, entry_hash(row, epoch, key), entry_eq, &k);
    return i == (size_t)-1 ? -1 : (long)i;
}

static void entry_add(Model *m, long row, long long epoch, const char *cid,
                      long long frame_id, long long hits)
{
    long i = entry_find(m, row, epoch, cid);
    if (i >= 0) {
        m->entries[i].hits = hits;
        m->entries[i].frame_id = frame_id;
        return;
    }
    if (m->nentries == m->capentries) {
        m->capentries = m->capentries ? 2 * m->capentries : 256;
        m->entries = xrealloc(m->entries, m->capentries * sizeof *m->entries);
    }
    EntryRec *e = &m->entries[m->nentries];
    e->row = row;
    e->epoch = epoch;
    snprintf(e->cid, sizeof e->cid, "%s", cid);
    e->frame_id = frame_id;
    e->hits = hits;
    e->next = m->rows[row].entry_head;
    m->rows[row].entry_head = (long)m->nentries;
    indexmap_add(&m->entry_map, entry_hash(row, epoch, e->cid), m->nentries);
    m->nentries++;
}

static void open_compile_add(Model *m, long long compile_row, long row)
{
    if (m->nopen == m->capopen) {
        m->capopen = m->capopen ? 2 * m->capopen : 16;
        m->open_compiles = xrealloc(m->open_compiles, m->capopen * sizeof *m->open_compiles);
        m->open_rows = xrealloc(m->open_rows, m->capopen * sizeof *m->open_rows);
    }
    m->open_compiles[m->nopen] = compile_row;
    m->open_rows[m->nopen] = row;
    m->nopen++;
}

static void free_rows(Model *m)
{
    for (size_t i = 0; i < m->nrows; i++) {
        free(m->rows[i].name);
        free(m->rows[i].filename);
        free(m->rows[i].where);
        free(m->rows[i].last_fail);
    }
    m->nrows = 0;
    m->nentries = 0;
    m->nopen = 0;
    indexmap_clear(&m->code_map);
    indexmap_clear(&m->entry_map);
    memset(&m->mark, 0, sizeof m->mark);
    m->failures = 0;
    m->loaded = false;
    m->nsamples = 0;
    m->rates.valid = false;
    m->generation++;
}

static void free_runs(Model *m)
{
    for (size_t i = 0; i < m->nruns; i++)
        free(m->runs[i].argv);
    free(m->runs);
    m->runs = NULL;
    m->nruns = 0;
}

/* ---- the steps of a refresh; each returns an SQLite result code ---- */

static int read_runs(Model *m)
{
    sqlite3_stmt *st = stmt(m, ST_RUNS, 0);
    int rc;
    free_runs(m);
    size_t cap = 0;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (m->nruns == cap) {
            cap = cap ? 2 * cap : 4;
            m->runs = xrealloc(m->runs, cap * sizeof *m->runs);
        }
        RunInfo *r = &m->runs[m->nruns++];
        r->run_id = sqlite3_column_int64(st, 0);
        r->pid = sqlite3_column_int64(st, 1);
        r->started_at = sqlite3_column_int64(st, 2);
        r->ended_at = sqlite3_column_int64(st, 3);
        r->resets = sqlite3_column_int64(st, 4);
        r->dropped = sqlite3_column_int64(st, 5);
        r->argv = fmt_sanitize(text(st, 6));
        r->pid_gone = r->ended_at == 0 && r->pid > 0
                      && kill((pid_t)r->pid, 0) != 0 && errno == ESRCH;
    }
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

static int read_codes(Model *m, bool *changed)
{
    sqlite3_stmt *st = stmt(m, ST_CODES_NEW, m->mark.code);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        long i = row_for(m, sqlite3_column_int64(st, 1), sqlite3_column_int64(st, 2));
        CodeRow *r = &m->rows[i];
        free(r->filename);
        free(r->name);
        free(r->where);
        r->filename = fmt_sanitize(text(st, 3));
        r->name = fmt_sanitize(text(st, 4));
        r->firstlineno = sqlite3_column_int(st, 5);
        r->where = xasprintf("%s:%d", r->filename, r->firstlineno);
        *changed = true;
    }
    sqlite3_reset(st);
    if (rc != SQLITE_DONE)
        return rc;
    return scalar(m, ST_CODES_MAX, &m->mark.code);
}

static void compile_ended(CodeRow *r, long long duration_ns)
{
    r->capture_ns += duration_ns;
}

static int read_compiles(Model *m, bool *changed)
{
    int rc = SQLITE_OK;
    /* The compiles that had not ended: have they now? */
    for (size_t i = 0; i < m->nopen && rc == SQLITE_OK;) {
        sqlite3_stmt *st = stmt(m, ST_COMPILE_ONE, m->open_compiles[i]);
        rc = sqlite3_step(st);
        bool ended = rc == SQLITE_ROW && sqlite3_column_type(st, 1) != SQLITE_NULL;
        if (ended) {
            compile_ended(&m->rows[m->open_rows[i]], sqlite3_column_int64(st, 0));
            m->open_compiles[i] = m->open_compiles[m->nopen - 1];
            m->open_rows[i] = m->open_rows[m->nopen - 1];
            m->nopen--;
            *changed = true;
        }
        else
            i++;
        rc = (rc == SQLITE_ROW || rc == SQLITE_DONE) ? SQLITE_OK : rc;
        sqlite3_reset(st);
    }
    if (rc != SQLITE_OK)
        return rc;
    sqlite3_stmt *st = stmt(m, ST_COMPILES_NEW, m->mark.compile);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        long i = row_for(m, sqlite3_column_int64(st, 1), sqlite3_column_int64(st, 2));
        CodeRow *r = &m->rows[i];
        r->compiles++;
        if (sqlite3_column_int64(st, 3) > 0) {
            r->recompiles++;
            long long at = sqlite3_column_int64(st, 4);
            if (at > r->last_recompile_at)
                r->last_recompile_at = at;
        }
        if (sqlite3_column_type(st, 6) != SQLITE_NULL)
            compile_ended(r, sqlite3_column_int64(st, 5));
        else
            open_compile_add(m, sqlite3_column_int64(st, 0), i);
        *changed = true;
    }
    sqlite3_reset(st);
    if (rc != SQLITE_DONE)
        return rc;
    return scalar(m, ST_COMPILES_MAX, &m->mark.compile);
}

/* Add grouped counts (run_id, code_id, n[, max epoch]) to one CodeRow field. */
static int read_counts(Model *m, int which, long long mark, size_t field, bool *changed)
{
    sqlite3_stmt *st = stmt(m, which, mark);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        long i = row_for(m, sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1));
        CodeRow *r = &m->rows[i];
        *(long long *)((char *)r + field) += sqlite3_column_int64(st, 2);
        if (which == ST_LIMITS_NEW) {
            long long epoch = sqlite3_column_int64(st, 3);
            if (epoch > r->limit_epoch)
                r->limit_epoch = epoch;
        }
        *changed = true;
    }
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

static int read_graphs_breaks_limits(Model *m, bool *changed)
{
    bool first = !m->loaded;
    int rc = read_counts(m, first ? ST_GRAPHS_ALL : ST_GRAPHS_NEW, m->mark.graph,
                         offsetof(CodeRow, graphs), changed);
    if (rc == SQLITE_OK)
        rc = scalar(m, ST_GRAPHS_MAX, &m->mark.graph);
    if (rc == SQLITE_OK)
        rc = read_counts(m, first ? ST_BREAKS_ALL : ST_BREAKS_NEW, m->mark.brk,
                         offsetof(CodeRow, breaks), changed);
    if (rc == SQLITE_OK)
        rc = scalar(m, ST_BREAKS_MAX, &m->mark.brk);
    if (rc == SQLITE_OK)
        rc = read_counts(m, ST_LIMITS_NEW, m->mark.limit, offsetof(CodeRow, limit_events),
                         changed);
    if (rc == SQLITE_OK)
        rc = scalar(m, ST_LIMITS_MAX, &m->mark.limit);
    return rc;
}

static void set_last_fail(CodeRow *r, long long id, const char *expr, const char *observed)
{
    if (id <= r->last_fail_id)
        return;
    r->last_fail_id = id;
    free(r->last_fail);
    char *s = xasprintf("%s (observed %s)", expr, *observed ? observed : "?");
    r->last_fail = fmt_sanitize(s);
    free(s);
}

static int read_failures(Model *m, bool *changed)
{
    long long max;
    int rc = scalar(m, ST_FAILS_MAX, &max);
    if (rc != SQLITE_OK || max == m->mark.failure)
        return rc;
    *changed = true;
    if (!m->loaded || max - m->mark.failure > BULK_FAILURES) {
        /* Count and find each code's newest failure through the indexes. */
        bool every_run = m->run_id == 0 || (m->nruns == 1 && m->runs[0].run_id == m->run_id);
        rc = scalar(m, every_run ? ST_FAILS_COUNT_ALL : ST_FAILS_COUNT, &m->failures);
        if (rc != SQLITE_OK)
            return rc;
        sqlite3_stmt *st = stmt(m, ST_FAILS_LAST, 0);
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
            long i = row_for(m, sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1));
            set_last_fail(&m->rows[i], sqlite3_column_int64(st, 2), text(st, 3), text(st, 4));
        }
        sqlite3_reset(st);
        rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
    }
    else {
        sqlite3_stmt *st = stmt(m, ST_FAILS_NEW, m->mark.failure);
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
            long i = row_for(m, sqlite3_column_int64(st, 1), sqlite3_column_int64(st, 2));
            set_last_fail(&m->rows[i], sqlite3_column_int64(st, 0), text(st, 3), text(st, 4));
            m->failures++;
        }
        sqlite3_reset(st);
        rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
    }
    if (rc == SQLITE_OK)
        m->mark.failure = max;
    return rc;
}

static int read_entries(Model *m, bool *changed)
{
    sqlite3_stmt *st = stmt(m, ST_ENTRIES_NEW, m->mark.entry);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        long i = row_for(m, sqlite3_column_int64(st, 1), sqlite3_column_int64(st, 2));
        entry_add(m, i, sqlite3_column_int64(st, 3), text(st, 4), sqlite3_column_int64(st, 5),
                  sqlite3_column_int64(st, 6));
        *changed = true;
    }
    sqlite3_reset(st);
    if (rc != SQLITE_DONE)
        return rc;
    if (!m->loaded) {
        /* The entries just read carry their newest counters. */
        rc = scalar(m, ST_ENTRIES_MAX, &m->mark.entry);
        return rc == SQLITE_OK ? scalar(m, ST_STATS_MAX, &m->mark.stats) : rc;
    }
    rc = scalar(m, ST_ENTRIES_MAX, &m->mark.entry);
    if (rc != SQLITE_OK)
        return rc;
    st = stmt(m, ST_STATS_NEW, m->mark.stats);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        long row = model_find(m, sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1));
        long e = row < 0 ? -1 : entry_find(m, row, sqlite3_column_int64(st, 2), text(st, 3));
        if (e >= 0) {
            m->entries[e].hits = sqlite3_column_int64(st, 4);
            *changed = true;
        }
    }
    sqlite3_reset(st);
    if (rc != SQLITE_DONE)
        return rc;
    return scalar(m, ST_STATS_MAX, &m->mark.stats);
}

/* ---- aggregates ---- */

long long model_epoch(const Model *m, long long run_id)
{
    const RunInfo *r = model_run(m, run_id);
    return r ? r->resets : 0;
}

/* Entries, fullest frame and hits of one row, over its current epoch. */
static void row_entries(Model *m, CodeRow *r, long long epoch)
{
    long long frames[64], counts[64];
    int nframes = 0;
    r->entries = r->fullest = r->hits = 0;
    for (long e = r->entry_head; e >= 0; e = m->entries[e].next) {
        const EntryRec *en = &m->entries[e];
        if (en->epoch != epoch)
            continue;
        r->entries++;
        r->hits += en->hits;
        int f = 0;
        while (f < nframes && frames[f] != en->frame_id)
            f++;
        if (f == nframes && nframes < 64) {
            frames[nframes] = en->frame_id;
            counts[nframes++] = 0;
        }
        if (f < nframes && ++counts[f] > r->fullest)
            r->fullest = counts[f];
    }
}

/* Each run's cache limit: the option, else the default unless a frame of
   the run holds more entries (then the run used a larger one: unknown). */
static void run_limits(Model *m)
{
    for (size_t i = 0; i < m->nruns; i++)
        m->runs[i].cache_limit = m->cache_limit_opt > 0 ? m->cache_limit_opt
                                                        : TUI_DEFAULT_CACHE_LIMIT;
    if (m->cache_limit_opt > 0)
        return;
    for (size_t i = 0; i < m->nrows; i++) {
        RunInfo *run = (RunInfo *)model_run(m, m->rows[i].run_id);
        if (run != NULL && m->rows[i].fullest > TUI_DEFAULT_CACHE_LIMIT)
            run->cache_limit = 0;
    }
}

int model_cache_limit(const Model *m, long long run_id)
{
    const RunInfo *r = model_run(m, run_id);
    return r ? r->cache_limit : (m->cache_limit_opt > 0 ? m->cache_limit_opt
                                                        : TUI_DEFAULT_CACHE_LIMIT);
}

/* Rates over the last MODEL_RATE_WINDOW_S seconds of refreshes. */
static void rates(Model *m, const Totals *t)
{
    double now = tui_mono_s();
    if (m->nsamples == MODEL_SAMPLES) {
        memmove(m->samples, m->samples + 1, (MODEL_SAMPLES - 1) * sizeof m->samples[0]);
        m->nsamples--;
    }
    m->samples[m->nsamples].t = now;
    m->samples[m->nsamples].totals = *t;
    m->nsamples++;
    int old = 0;
    while (old < m->nsamples - 2 && now - m->samples[old].t > MODEL_RATE_WINDOW_S)
        old++;
    double dt = now - m->samples[old].t;
    m->rates.valid = m->nsamples > 1 && dt > 1e-3;
    if (!m->rates.valid)
        return;
    const Totals *o = &m->samples[old].totals;
    m->rates.compiles = (double)(t->compiles - o->compiles) / dt;
    m->rates.recompiles = (double)(t->recompiles - o->recompiles) / dt;
    m->rates.breaks = (double)(t->breaks - o->breaks) / dt;
    m->rates.guard_failures = (double)(t->guard_failures - o->guard_failures) / dt;
    m->rates.hits = (double)(t->hits - o->hits) / dt;
}

static void aggregate(Model *m)
{
    Totals t;
    memset(&t, 0, sizeof t);
    long long now = tui_wall_ns();
    for (size_t i = 0; i < m->nrows; i++)
        row_entries(m, &m->rows[i], model_epoch(m, m->rows[i].run_id));
    run_limits(m);
    for (size_t i = 0; i < m->nrows; i++) {
        CodeRow *r = &m->rows[i];
        long long epoch = model_epoch(m, r->run_id);
        int limit = model_cache_limit(m, r->run_id);
        r->misses = r->compiles + r->limit_events;
        r->at_limit = (limit > 0 && r->fullest >= limit)
                      || (r->limit_epoch >= 0 && r->limit_epoch == epoch);
        r->recent = r->last_recompile_at > 0 && now - r->last_recompile_at < TUI_RECENT_NS;
        t.code_objects++;
        t.compiles += r->compiles;
        t.recompiles += r->recompiles;
        t.graphs += r->graphs;
        t.breaks += r->breaks;
        t.hits += r->hits;
        t.misses += r->misses;
        t.capture_ns += r->capture_ns;
        t.entries += r->entries;
        t.at_limit += r->at_limit;
        t.limit_events += r->limit_events;
    }
    t.guard_failures = m->failures;
    for (size_t i = 0; i < m->nruns; i++)
        if (m->run_id == 0 || m->runs[i].run_id == m->run_id)
            t.dropped += m->runs[i].dropped;
    rates(m, &t);
    m->totals = t;
}

/* ---- open, refresh, close ---- */

static int reader_open(Model *m, char **errmsg)
{
    struct stat st;
    m->reader = store_reader_open(m->path, errmsg);
    if (m->reader == NULL)
        return -1;
    if (stat(m->path, &st) == 0) {
        m->dev = st.st_dev;
        m->ino = st.st_ino;
    }
    if (stmts_prepare(m, errmsg) < 0) {
        store_reader_close(m->reader);
        m->reader = NULL;
        return -1;
    }
    return 0;
}

static void reader_close(Model *m)
{
    stmts_free(m);
    store_reader_close(m->reader);
    m->reader = NULL;
}

int model_begin(Model *m)
{
    if (m->reader == NULL)
        return -1;
    return sqlite3_exec(store_reader_db(m->reader), "BEGIN", NULL, NULL, NULL) == SQLITE_OK
           ? 0 : -1;
}

void model_end(Model *m)
{
    sqlite3 *db = m->reader ? store_reader_db(m->reader) : NULL;
    if (db != NULL && !sqlite3_get_autocommit(db))
        sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
}

/* Which run to show; a change of the newest run (when following it) drops
   the rows. */
static void pick_run(Model *m)
{
    long long want = m->run_pick;
    if (want == MODEL_RUN_NEWEST)
        want = m->nruns ? m->runs[m->nruns - 1].run_id : 0;
    if (want != m->run_id) {
        free_rows(m);
        m->run_id = want;
    }
}

/* The file we read: still there?  Replaced by another one (reopen)? */
static void check_file(Model *m)
{
    struct stat st;
    if (stat(m->path, &st) != 0) {
        m->gone = true;
        return;
    }
    m->gone = false;
    if (st.st_dev == m->dev && st.st_ino == m->ino && m->reader != NULL)
        return;
    char *err = NULL;
    reader_close(m);
    free_rows(m);
    if (reader_open(m, &err) < 0) {
        set_error(m, "%s", err ? err : "cannot reopen the database");
        free(err);
    }
}

static int refresh_steps(Model *m, bool *changed)
{
    int rc = read_runs(m);
    if (rc != SQLITE_OK)
        return rc;
    long long before = m->run_id;
    pick_run(m);
    if (m->run_id != before)
        *changed = true;
    if (rc == SQLITE_OK)
        rc = read_codes(m, changed);
    if (rc == SQLITE_OK)
        rc = read_compiles(m, changed);
    if (rc == SQLITE_OK)
        rc = read_graphs_breaks_limits(m, changed);
    if (rc == SQLITE_OK)
        rc = read_failures(m, changed);
    if (rc == SQLITE_OK)
        rc = read_entries(m, changed);
    return rc;
}

int model_refresh(Model *m)
{
    double t0 = tui_mono_s();
    check_file(m);
    if (m->reader == NULL)
        return -1;
    bool changed = false;
    sqlite3 *db = store_reader_db(m->reader);
    int rc = sqlite3_exec(db, "BEGIN", NULL, NULL, NULL);
    if (rc == SQLITE_OK)
        rc = refresh_steps(m, &changed);
    if (rc != SQLITE_OK)
        set_error(m, "reading %s failed: %s", m->path, sqlite3_errmsg(db));
    model_end(m);
    if (rc != SQLITE_OK) {
        if (!m->loaded)
            free_rows(m);    /* a half-done first load would count twice */
        return -1;
    }
    m->loaded = true;
    free(m->error);
    m->error = NULL;
    aggregate(m);
    if (changed)
        m->generation++;
    m->refreshes++;
    m->last_query_ms = (tui_mono_s() - t0) * 1e3;
    return 0;
}

int model_open(Model *m, const char *path, long long run_pick, int cache_limit, char **errmsg)
{
    memset(m, 0, sizeof *m);
    *errmsg = NULL;
    m->path = xstrdup(path);
    m->run_pick = run_pick;
    m->run_id = -1;          /* nothing picked yet */
    m->cache_limit_opt = cache_limit > 0 ? cache_limit : 0;
    if (reader_open(m, errmsg) < 0)
        goto out_close;
    if (model_refresh(m) < 0) {
        *errmsg = xstrdup(m->error ? m->error : "cannot read the database");
        goto out_close;
    }
    if (run_pick > 0 && model_run(m, run_pick) == NULL) {
        *errmsg = xasprintf("%s has no run %lld (it has %zu run%s)", path, run_pick,
                            m->nruns, m->nruns == 1 ? "" : "s");
        goto out_close;
    }
    return 0;

out_close:
    model_close(m);
    return -1;
}

void model_close(Model *m)
{
    reader_close(m);
    free_rows(m);
    free(m->rows);
    free(m->entries);
    free(m->open_compiles);
    free(m->open_rows);
    indexmap_done(&m->code_map);
    indexmap_done(&m->entry_map);
    free_runs(m);
    free(m->path);
    free(m->error);
    memset(m, 0, sizeof *m);
}

void model_forget(Model *m)
{
    free_rows(m);
}

const RunInfo *model_run(const Model *m, long long run_id)
{
    for (size_t i = 0; i < m->nruns; i++)
        if (m->runs[i].run_id == run_id)
            return &m->runs[i];
    return NULL;
}

bool model_live(const Model *m)
{
    for (size_t i = 0; i < m->nruns; i++) {
        const RunInfo *r = &m->runs[i];
        if ((m->run_id == 0 || r->run_id == m->run_id) && r->ended_at == 0 && !r->pid_gone)
            return true;
    }
    return false;
}

sqlite3_stmt *model_prepare(Model *m, const char *sql)
{
    sqlite3_stmt *st = NULL;
    if (m->reader == NULL)
        return NULL;
    if (sqlite3_prepare_v2(store_reader_db(m->reader), sql, -1, &st, NULL) != SQLITE_OK) {
        sqlite3_finalize(st);
        return NULL;
    }
    return st;
}

const char *model_text(sqlite3_stmt *st, int col)
{
    return text(st, col);
}

sqlite3 *model_db(const Model *m)
{
    return m->reader ? store_reader_db(m->reader) : NULL;
}
