/*
 * writer.c -- the writer thread: takes copied events off the queue and
 * turns them into rows (docs/sql.md), in batches of one transaction each,
 * with statements prepared once.  DESIGN.md 4.3; contract in store_int.h.
 *
 * Rhythm: drain the queue, then sleep until the flush interval has passed
 * or a producer (queue half full) or store_close() writes a byte to the wake
 * pipe.  Each batch of at most batch_max events is one IMMEDIATE
 * transaction, ending with an update of the run's counters, so
 * runs.written_events is exact.
 *
 * Failing soft: a failure that ends the transaction (locked past the busy
 * timeout, disk full, I/O error, ...) drops the whole batch and the rest of
 * that drain, to be tried again at the next flush; a failure of one event's
 * statement (anything else) drops that event only.  Every drop is counted;
 * each class of failure is reported once through s->log.
 *
 * Invariants: the thread touches s->db, and calls the log, only while
 * holding s->gate, and a store_pause() before fork() ends it between
 * drains, outside SQLite and stdio; every
 * statement is reset after use (no read transaction lingers, so a
 * store_pause() caller knows the connection is idle); the caches in
 * StoreWriter describe rows that exist in the database or in the open
 * transaction (they are cleared whenever a transaction is rolled back).
 */
#include "store_int.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum {
    ST_BEGIN,
    ST_COMMIT,
    ST_ROLLBACK,
    ST_CODE,
    ST_FRAME,
    ST_COMPILE_INSERT,
    ST_COMPILE_FIND,
    ST_COMPILE_REASON,
    ST_COMPILE_END,
    ST_ENTRY_FROM_COMPILE,
    ST_GUARDS_DELETE,
    ST_GUARD_INSERT,
    ST_GUARD_SITES,
    ST_GUARD_FAIL,
    ST_GUARD_FAILS,
    ST_RECOMPILE_DIFF,
    ST_BREAK,
    ST_GRAPH,
    ST_CACHE_LIMIT,
    ST_FRAME_SKIP,
    ST_FRAME_STATS,
    ST_RUN_SPAN,
    ST_RESET,
    ST_ANNOTATION,
    ST_RUN_RESETS,
    ST_ENTRY_UPSERT,
    ST_ENTRY_STATS,
    ST_RUN_PROGRESS,
    ST_RUN_END,
    ST__COUNT
};

/* A row of ST_GUARD_FAILS: ?1-?6 the event's run, code, epoch, compile id,
   compile row and time; the failure's own six fields at the numbers given. */
#define FAIL_ROW(entry, kind, expr, observed, file, line)                        \
    "(?1, ?2, ?3, ?4, ?5, ?" #entry ", ?" #kind ", ?" #expr ", ?" #observed ", ?6, ?" \
    #file ", ?" #line ")"
#define FAILS_PER_INSERT 8

/* Every statement the writer runs.  ?1 is always runs.run_id where a run
   is concerned; then code_id, epoch. */
static const char *const stmt_sql[ST__COUNT] = {
    [ST_BEGIN] = "BEGIN IMMEDIATE",
    [ST_COMMIT] = "COMMIT",
    [ST_ROLLBACK] = "ROLLBACK",
    [ST_CODE] =
        "INSERT OR IGNORE INTO code_objects (run_id, code_id, filename, name, firstlineno)"
        " VALUES (?1, ?2, ?3, ?4, ?5)",
    [ST_FRAME] =
        "INSERT OR IGNORE INTO frames (run_id, code_id, epoch, frame_id, resume_offset,"
        " first_compile_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    [ST_COMPILE_INSERT] =
        "INSERT INTO compiles (run_id, code_id, epoch, compile_id, frame_id,"
        " frame_compile_id, resume_offset, started_at, call_path)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    [ST_COMPILE_FIND] =
        "SELECT compile_row FROM compiles"
        " WHERE run_id = ?1 AND code_id = ?2 AND epoch = ?3 AND compile_id = ?4"
        " ORDER BY compile_row DESC LIMIT 1",
    [ST_COMPILE_REASON] = "UPDATE compiles SET reason = ?2 WHERE compile_row = ?1",
    [ST_COMPILE_END] =
        "UPDATE compiles SET outcome = ?2, duration_ns = ?3, graphs = ?4, nodes = ?5,"
        " guards = ?6, ended_at = ?7, hatches = ?8, trace_ns = ?9, guards_ns = ?10,"
        " graph_ns = ?11, backend_ns = ?12, plan_ns = ?13, events_ns = ?14, attempts = ?15"
        " WHERE compile_row = ?1",
    [ST_ENTRY_FROM_COMPILE] =
        "INSERT INTO cache_entries (run_id, code_id, epoch, compile_id, compile_row,"
        " frame_id, resume_offset, guards_text, created_at)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"
        " ON CONFLICT (run_id, code_id, epoch, compile_id) DO UPDATE SET"
        " compile_row = excluded.compile_row, frame_id = excluded.frame_id,"
        " resume_offset = excluded.resume_offset, guards_text = excluded.guards_text,"
        " created_at = coalesce(created_at, excluded.created_at)",
    [ST_GUARDS_DELETE] =
        "DELETE FROM guards"
        " WHERE run_id = ?1 AND code_id = ?2 AND epoch = ?3 AND compile_id = ?4",
    [ST_GUARD_INSERT] =
        "INSERT INTO guards (run_id, code_id, epoch, compile_id, idx, kind, expr)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    /* ?5: EventRecord.guard_sites_json; a guard's site is the last frame of
       its stack.  The document is parsed twice in all (each json_each once,
       materialized), not three times a guard: SQLite 3.40 keeps no parsed
       JSON between calls, and a compile of 500 guards over 100 sites parsed
       its sites 1,500 times -- most of the writer's time under
       `run --capture-all --db` */
    [ST_GUARD_SITES] =
        "WITH s(site, stack) AS MATERIALIZED (SELECT key, value FROM json_each(?5, '$.sites')),"
        " g(idx, site) AS MATERIALIZED (SELECT key, value FROM json_each(?5, '$.guards')"
        "  WHERE value >= 0)"
        " UPDATE guards SET user_stack = s.stack,"
        " filename = json_extract(s.stack, '$[#-1][0]'),"
        " lineno = json_extract(s.stack, '$[#-1][1]')"
        " FROM g JOIN s ON s.site = g.site"
        " WHERE json_valid(?5) AND guards.run_id = ?1 AND guards.code_id = ?2"
        " AND guards.epoch = ?3 AND guards.compile_id = ?4 AND guards.idx = g.idx",
    [ST_GUARD_FAIL] =
        "INSERT INTO guard_failures (run_id, code_id, epoch, compile_id, compile_row,"
        " entry_compile_id, kind, expr, observed, at, filename, lineno)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
    /* FAILS_PER_INSERT rows of packed failures at once (write_packed_failures):
       one statement's work instead of eight, most of a row's cost */
    [ST_GUARD_FAILS] =
        "INSERT INTO guard_failures (run_id, code_id, epoch, compile_id, compile_row,"
        " entry_compile_id, kind, expr, observed, at, filename, lineno) VALUES "
        FAIL_ROW(7, 8, 9, 10, 11, 12) ", " FAIL_ROW(13, 14, 15, 16, 17, 18) ", "
        FAIL_ROW(19, 20, 21, 22, 23, 24) ", " FAIL_ROW(25, 26, 27, 28, 29, 30) ", "
        FAIL_ROW(31, 32, 33, 34, 35, 36) ", " FAIL_ROW(37, 38, 39, 40, 41, 42) ", "
        FAIL_ROW(43, 44, 45, 46, 47, 48) ", " FAIL_ROW(49, 50, 51, 52, 53, 54),
    /* ?6: EventRecord.nearest_json, one row per failing guard listed */
    [ST_RECOMPILE_DIFF] =
        "INSERT INTO recompile_diffs (run_id, code_id, epoch, compile_id, compile_row,"
        " entry_compile_id, failing, idx, kind, expr, observed, filename, lineno,"
        " user_stack, capture_ns, at)"
        " SELECT ?1, ?2, ?3, ?4, ?5, json_extract(?6, '$.entry'),"
        " json_extract(?6, '$.failing'), json_extract(g.value, '$.idx'),"
        " json_extract(g.value, '$.kind'), json_extract(g.value, '$.expr'),"
        " json_extract(g.value, '$.observed'),"
        " json_extract(g.value, '$.user_stack[#-1][0]'),"
        " json_extract(g.value, '$.user_stack[#-1][1]'),"
        " json_extract(g.value, '$.user_stack'), json_extract(?6, '$.capture_ns'), ?7"
        " FROM json_each(?6, '$.guards') AS g WHERE json_valid(?6)",
    [ST_BREAK] =
        "INSERT INTO graph_breaks (run_id, code_id, epoch, compile_id, compile_row, kind,"
        " reason, filename, lineno, offset, user_stack, at, break_type, break_class)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10,"
        " CASE WHEN json_valid(?11) THEN json(?11) END, ?12, ?13, ?14)",
    [ST_GRAPH] =
        "INSERT INTO graphs (run_id, code_id, epoch, compile_id, compile_row, backend,"
        " backend_ns, nodes, ops, code, at)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
    [ST_CACHE_LIMIT] =
        "INSERT INTO cache_limits (run_id, code_id, epoch, frame_id, resume_offset,"
        " reason, at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    [ST_FRAME_STATS] =
        "UPDATE cache_limits SET calls = ?5, uncaptured_ns = ?6, cost_samples = ?7"
        " WHERE run_id = ?1 AND code_id = ?2 AND epoch = ?3 AND frame_id = ?4",
    [ST_RUN_SPAN] =
        "INSERT INTO run_spans (run_id, code_id, epoch, compile_id, kind, at, duration_ns)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    [ST_FRAME_SKIP] =
        "INSERT INTO frame_skips (run_id, code_id, epoch, resume_offset, reason, at,"
        " break_type, break_class) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    [ST_RESET] = "INSERT OR REPLACE INTO resets (run_id, epoch, at) VALUES (?1, ?2, ?3)",
    [ST_ANNOTATION] =
        "INSERT INTO annotations (run_id, epoch, name, phase, fields, at)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    [ST_RUN_RESETS] = "UPDATE runs SET resets = max(resets, ?2) WHERE run_id = ?1",
    [ST_ENTRY_UPSERT] =
        "INSERT INTO cache_entries (run_id, code_id, epoch, compile_id, frame_id,"
        " resume_offset, hits, guard_ns, stats_at, cost_samples, run_ns, break_ns,"
        " break_graphs)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)"
        " ON CONFLICT (run_id, code_id, epoch, compile_id) DO UPDATE SET"
        " hits = excluded.hits, guard_ns = excluded.guard_ns, stats_at = excluded.stats_at,"
        " cost_samples = excluded.cost_samples, run_ns = excluded.run_ns,"
        " break_ns = excluded.break_ns, break_graphs = excluded.break_graphs",
    [ST_ENTRY_STATS] =
        "INSERT INTO entry_stats (run_id, code_id, epoch, compile_id, at, hits, guard_ns,"
        " cost_samples, run_ns, break_ns, break_graphs)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
    [ST_RUN_PROGRESS] =
        "UPDATE runs SET written_events = written_events + ?2, dropped_events = ?3"
        " WHERE run_id = ?1",
    [ST_RUN_END] =
        "UPDATE runs SET ended_at = ?2, dropped_events = ?3 WHERE run_id = ?1",
};

/* Failure classes, each reported once. */
enum {
    LOG_BUSY = 1 << 0,
    LOG_FULL = 1 << 1,
    LOG_IO = 1 << 2,
    LOG_EVENT = 1 << 3,
    LOG_QUEUE = 1 << 4,
    LOG_END = 1 << 5,
};

#define CODE_CACHE 1024   /* direct-mapped, power of two */

struct StoreWriter {
    sqlite3_stmt *st[ST__COUNT];   /* owned */
    StoreEvent **batch;            /* owned array of batch_max slots */
    /* code_objects rows known to exist: code_id + 1, 0 = empty slot */
    long long code_seen[CODE_CACHE];
    /* the compile attempt the previous event concerned */
    struct {
        bool valid;
        long long code_id, epoch, row;
        char compile_id[32];
    } last_compile;
    long long epoch_known;         /* runs.resets is at least this (-1: unknown) */
    unsigned logged;               /* LOG_* already reported */
    uint64_t queue_drops_seen;
};

/* ---- reporting ---- */

static void report_once(Store *s, unsigned cls, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void report_once(Store *s, unsigned cls, const char *fmt, ...)
{
    if (s->w->logged & cls)
        return;
    s->w->logged |= cls;
    char msg[1024];
    int n = snprintf(msg, sizeof msg, "dynscope: recording to %s: ", s->path);
    if (n < 0 || (size_t)n >= sizeof msg)
        n = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg + n, sizeof msg - (size_t)n, fmt, ap);
    va_end(ap);
    if (s->log != NULL)
        s->log(s->log_arg, msg);
    else
        fprintf(stderr, "%s\n", msg);
}

/* ---- statements ---- */

static int bind_key(sqlite3_stmt *st, int i, const char *text)
{
    return sqlite3_bind_text(st, i, text, -1, SQLITE_STATIC);
}

/* Optional text: "" is stored as NULL. */
static int bind_opt(sqlite3_stmt *st, int i, const char *text)
{
    if (text[0] == '\0')
        return sqlite3_bind_null(st, i);
    return sqlite3_bind_text(st, i, text, -1, SQLITE_STATIC);
}

static int bind_u64(sqlite3_stmt *st, int i, uint64_t v)
{
    return sqlite3_bind_int64(st, i, v > INT64_MAX ? INT64_MAX : (sqlite3_int64)v);
}

/* Bind ?1 run_id, ?2 code_id, ?3 epoch. */
static void bind_head(Store *s, sqlite3_stmt *st, const StoreEvent *e)
{
    sqlite3_bind_int64(st, 1, s->run_id);
    sqlite3_bind_int64(st, 2, e->rec.code_id);
    sqlite3_bind_int64(st, 3, e->epoch);
}

/* Step a statement that returns no row, then reset it.  SQLite result code
   (SQLITE_OK on success). */
static int run(sqlite3_stmt *st)
{
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return rc == SQLITE_DONE || rc == SQLITE_ROW ? SQLITE_OK : rc;
}

/* ---- events -> rows ---- */

static void forget_caches(StoreWriter *w)
{
    memset(w->code_seen, 0, sizeof w->code_seen);
    w->last_compile.valid = false;
    w->epoch_known = -1;
}

/* runs.resets follows the epochs of the events written, so it stays right
   even when an EV_RESET itself was dropped. */
static int note_epoch(Store *s, const StoreEvent *e)
{
    if (e->epoch <= s->w->epoch_known)
        return SQLITE_OK;
    sqlite3_stmt *st = s->w->st[ST_RUN_RESETS];
    sqlite3_bind_int64(st, 1, s->run_id);
    sqlite3_bind_int64(st, 2, e->epoch);
    int rc = run(st);
    if (rc == SQLITE_OK)
        s->w->epoch_known = e->epoch;
    return rc;
}

static int ensure_code(Store *s, const StoreEvent *e)
{
    StoreWriter *w = s->w;
    long long key = e->rec.code_id + 1;
    long long *slot = &w->code_seen[(unsigned long long)e->rec.code_id & (CODE_CACHE - 1)];
    if (*slot == key)
        return SQLITE_OK;
    sqlite3_stmt *st = w->st[ST_CODE];
    sqlite3_bind_int64(st, 1, s->run_id);
    sqlite3_bind_int64(st, 2, e->rec.code_id);
    bind_opt(st, 3, e->rec.filename);
    bind_opt(st, 4, e->rec.qualname);
    sqlite3_bind_int(st, 5, e->rec.firstlineno);
    int rc = run(st);
    if (rc == SQLITE_OK)
        *slot = key;
    return rc;
}

static void remember_compile(StoreWriter *w, const StoreEvent *e, long long row)
{
    size_t n = strlen(e->rec.compile_id);
    w->last_compile.valid = n < sizeof w->last_compile.compile_id;
    if (!w->last_compile.valid)
        return;
    memcpy(w->last_compile.compile_id, e->rec.compile_id, n + 1);
    w->last_compile.code_id = e->rec.code_id;
    w->last_compile.epoch = e->epoch;
    w->last_compile.row = row;
}

/* Insert the compile attempt e starts (or, with a lost EV_COMPILE_START,
   that e implies).  *row = its compile_row. */
static int insert_compile(Store *s, const StoreEvent *e, long long *row)
{
    const EventRecord *r = &e->rec;
    sqlite3_stmt *st = s->w->st[ST_COMPILE_INSERT];
    uint64_t started = r->wall_ns;
    if (r->kind == EV_COMPILE_END && r->duration_ns <= started)
        started -= r->duration_ns;
    bind_head(s, st, e);
    bind_key(st, 4, r->compile_id);
    sqlite3_bind_int(st, 5, r->frame_id);
    sqlite3_bind_int(st, 6, r->frame_compile_id);
    sqlite3_bind_int(st, 7, r->resume_offset);
    bind_u64(st, 8, started);
    bind_opt(st, 9, r->call_path_json);     /* compile_start's; "" (NULL) for the others */
    int rc = run(st);
    if (rc != SQLITE_OK)
        return rc;
    *row = sqlite3_last_insert_rowid(s->db);
    remember_compile(s->w, e, *row);
    return SQLITE_OK;
}

/*
 * The compile attempt e belongs to: the newest compiles row with e's run,
 * code, epoch and compile_id.  When there is none, creates one if `create`,
 * else *row = 0.  e without a compile_id: *row = 0.
 */
static int find_compile(Store *s, const StoreEvent *e, bool create, long long *row)
{
    StoreWriter *w = s->w;
    const EventRecord *r = &e->rec;
    *row = 0;
    if (r->compile_id[0] == '\0')
        return SQLITE_OK;
    if (w->last_compile.valid && w->last_compile.code_id == r->code_id
        && w->last_compile.epoch == e->epoch
        && strcmp(w->last_compile.compile_id, r->compile_id) == 0) {
        *row = w->last_compile.row;
        return SQLITE_OK;
    }
    sqlite3_stmt *st = w->st[ST_COMPILE_FIND];
    bind_head(s, st, e);
    bind_key(st, 4, r->compile_id);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        *row = sqlite3_column_int64(st, 0);
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return rc;
    if (*row != 0) {
        remember_compile(w, e, *row);
        return SQLITE_OK;
    }
    return create ? insert_compile(s, e, row) : SQLITE_OK;
}

static void bind_row(sqlite3_stmt *st, int i, long long row)
{
    if (row != 0)
        sqlite3_bind_int64(st, i, row);
    else
        sqlite3_bind_null(st, i);
}

static int write_compile_start(Store *s, const StoreEvent *e)
{
    const EventRecord *r = &e->rec;
    sqlite3_stmt *st = s->w->st[ST_FRAME];
    bind_head(s, st, e);
    sqlite3_bind_int(st, 4, r->frame_id);
    sqlite3_bind_int(st, 5, r->resume_offset);
    bind_u64(st, 6, r->wall_ns);
    int rc = run(st);
    long long row;
    return rc != SQLITE_OK ? rc : insert_compile(s, e, &row);
}

/* One field of failures_packed (event.h): "LEN:" and LEN bytes at *p,
   before end.  false when malformed. */
static bool unpack_field(const char **p, const char *end, const char **f, size_t *n)
{
    size_t len = 0;
    const char *q = *p;
    while (q < end && *q >= '0' && *q <= '9' && len < ((size_t)1 << 40))
        len = len * 10 + (size_t)(*q++ - '0');
    if (q == *p || q >= end || *q != ':' || len > (size_t)(end - q - 1))
        return false;
    *f = q + 1;
    *n = len;
    *p = q + 1 + len;
    return true;
}

static void bind_opt_n(sqlite3_stmt *st, int i, const char *text, size_t n)
{
    if (n == 0)
        sqlite3_bind_null(st, i);
    else
        sqlite3_bind_text(st, i, text, (int)n, SQLITE_STATIC);
}

/* A packed failure's line field (decimal digits) as an int; 0 unknown. */
static int packed_line(const char *f, size_t n)
{
    long line = 0;
    for (size_t i = 0; i < n && i < 10; i++)
        line = line * 10 + (f[i] - '0');
    return line > 0 && line <= INT_MAX ? (int)line : 0;
}

/* Bind a failure's six fields (f, n) to st: entry, kind, expr and observed
   at parameters first .. first + 3, file and line at file, file + 1. */
static void bind_failure(sqlite3_stmt *st, int first, int file, const char *const f[6],
                         const size_t n[6])
{
    for (int i = 0; i < 4; i++)
        bind_opt_n(st, first + i, f[i], n[i]);
    bind_opt_n(st, file, f[4], n[4]);
    int line = packed_line(f[5], n[5]);
    if (line > 0)
        sqlite3_bind_int(st, file + 1, line);
    else
        sqlite3_bind_null(st, file + 1);
}

/* The guard_failures rows packed in e (a recompile's or a cache limit's
   failures_packed), compile_row `row` (0: none), as write_guard_fail
   writes one EV_GUARD_FAIL: FAILS_PER_INSERT at a time, the rest alone. */
static int write_packed_failures(Store *s, const StoreEvent *e, long long row)
{
    const char *p = e->rec.failures_packed;
    const char *end = p + strlen(p);
    const char *f[FAILS_PER_INSERT][6];
    size_t n[FAILS_PER_INSERT][6];
    bool malformed = false;
    while (p < end && !malformed) {
        int k = 0;
        for (; k < FAILS_PER_INSERT && p < end && !malformed; k++)
            for (int i = 0; i < 6 && !malformed; i++)
                malformed = !unpack_field(&p, end, &f[k][i], &n[k][i]);
        if (malformed) {
            report_once(s, LOG_EVENT, "a %s event's guard failures are malformed; "
                        "the rest of them are dropped", event_kind_name(e->rec.kind));
            k--;                                /* the failure cut short */
        }
        int rc = SQLITE_OK;
        if (k == FAILS_PER_INSERT) {
            sqlite3_stmt *st = s->w->st[ST_GUARD_FAILS];
            bind_head(s, st, e);
            bind_opt(st, 4, e->rec.compile_id);
            bind_row(st, 5, row);
            bind_u64(st, 6, e->rec.wall_ns);
            for (int j = 0; j < k; j++)
                bind_failure(st, 7 + 6 * j, 11 + 6 * j, f[j], n[j]);
            rc = run(st);
        }
        else {
            for (int j = 0; j < k && rc == SQLITE_OK; j++) {
                sqlite3_stmt *st = s->w->st[ST_GUARD_FAIL];
                bind_head(s, st, e);
                bind_opt(st, 4, e->rec.compile_id);
                bind_row(st, 5, row);
                bind_u64(st, 10, e->rec.wall_ns);
                bind_failure(st, 6, 11, f[j], n[j]);   /* ?10: at */
                rc = run(st);
            }
        }
        if (rc != SQLITE_OK)
            return rc;
    }
    return SQLITE_OK;
}

static int write_recompile(Store *s, const StoreEvent *e)
{
    long long row;
    int rc = find_compile(s, e, true, &row);
    if (rc != SQLITE_OK || row == 0)
        return rc;
    sqlite3_stmt *st = s->w->st[ST_COMPILE_REASON];
    sqlite3_bind_int64(st, 1, row);
    bind_opt(st, 2, e->rec.reason);
    rc = run(st);
    if (rc == SQLITE_OK && e->rec.nearest_json[0] != '\0') {
        st = s->w->st[ST_RECOMPILE_DIFF];
        bind_head(s, st, e);
        bind_key(st, 4, e->rec.compile_id);
        bind_row(st, 5, row);
        sqlite3_bind_text(st, 6, e->rec.nearest_json, -1, SQLITE_STATIC);
        bind_u64(st, 7, e->rec.wall_ns);
        rc = run(st);
    }
    return rc == SQLITE_OK ? write_packed_failures(s, e, row) : rc;
}

/* One guards row from a line of guards_text: "KIND<tab>expr" or "expr". */
static int write_guard_line(Store *s, const StoreEvent *e, int idx, const char *p, size_t n)
{
    sqlite3_stmt *st = s->w->st[ST_GUARD_INSERT];
    const char *tab = memchr(p, '\t', n);
    bind_head(s, st, e);
    bind_key(st, 4, e->rec.compile_id);
    sqlite3_bind_int(st, 5, idx);
    if (tab != NULL) {
        sqlite3_bind_text(st, 6, p, (int)(tab - p), SQLITE_STATIC);
        n -= (size_t)(tab + 1 - p);
        p = tab + 1;
    }
    sqlite3_bind_text(st, 7, p, (int)n, SQLITE_STATIC);
    return run(st);
}

/* guards: one row per non-empty line of guards_text (trailing \r dropped). */
static int write_guards(Store *s, const StoreEvent *e)
{
    StoreWriter *w = s->w;
    sqlite3_stmt *st = w->st[ST_GUARDS_DELETE];
    bind_head(s, st, e);
    bind_key(st, 4, e->rec.compile_id);
    int rc = run(st);
    int idx = 0;
    for (const char *p = e->rec.guards_text; rc == SQLITE_OK && *p != '\0';) {
        const char *end = strchr(p, '\n');
        size_t len = end != NULL ? (size_t)(end - p) : strlen(p);
        size_t n = len;
        if (n > 0 && p[n - 1] == '\r')
            n--;
        if (n > 0)
            rc = write_guard_line(s, e, idx++, p, n);
        p += len + (end != NULL);
    }
    if (rc != SQLITE_OK || e->rec.guard_sites_json[0] == '\0')
        return rc;
    st = w->st[ST_GUARD_SITES];
    bind_head(s, st, e);
    bind_key(st, 4, e->rec.compile_id);
    sqlite3_bind_text(st, 5, e->rec.guard_sites_json, -1, SQLITE_STATIC);
    return run(st);
}

static int write_compile_end(Store *s, const StoreEvent *e)
{
    const EventRecord *r = &e->rec;
    long long row;
    int rc = find_compile(s, e, true, &row);
    if (rc != SQLITE_OK)
        return rc;
    sqlite3_stmt *st = s->w->st[ST_COMPILE_END];
    sqlite3_bind_int64(st, 1, row);
    bind_opt(st, 2, r->outcome);
    bind_u64(st, 3, r->duration_ns);
    sqlite3_bind_int(st, 4, r->graphs);
    sqlite3_bind_int(st, 5, r->nodes);
    sqlite3_bind_int(st, 6, r->guards);
    bind_u64(st, 7, r->wall_ns);
    bind_opt(st, 8, r->hatches);
    if (r->attempts > 0) {          /* else no translation ran: the phases stay NULL */
        bind_u64(st, 9, r->trace_ns);
        bind_u64(st, 10, r->guards_ns);
        bind_u64(st, 11, r->graph_ns);
        bind_u64(st, 12, r->backend_ns);
        bind_u64(st, 13, r->plan_ns);
        bind_u64(st, 14, r->events_ns);
        sqlite3_bind_int(st, 15, r->attempts);
    }
    rc = run(st);
    if (rc != SQLITE_OK || strcmp(r->outcome, "ok") != 0)
        return rc;
    /* A successful compile is a cache entry. */
    st = s->w->st[ST_ENTRY_FROM_COMPILE];
    bind_head(s, st, e);
    bind_key(st, 4, r->compile_id);
    bind_row(st, 5, row);
    sqlite3_bind_int(st, 6, r->frame_id);
    sqlite3_bind_int(st, 7, r->resume_offset);
    bind_opt(st, 8, r->guards_text);
    bind_u64(st, 9, r->wall_ns);
    rc = run(st);
    return rc != SQLITE_OK ? rc : write_guards(s, e);
}

static int write_guard_fail(Store *s, const StoreEvent *e)
{
    const EventRecord *r = &e->rec;
    long long row;
    int rc = find_compile(s, e, false, &row);
    if (rc != SQLITE_OK)
        return rc;
    sqlite3_stmt *st = s->w->st[ST_GUARD_FAIL];
    bind_head(s, st, e);
    bind_opt(st, 4, r->compile_id);
    bind_row(st, 5, row);
    bind_opt(st, 6, r->entry_compile_id);
    bind_opt(st, 7, r->guard_kind);
    bind_opt(st, 8, r->expr);
    bind_opt(st, 9, r->observed);
    bind_u64(st, 10, r->wall_ns);
    bind_opt(st, 11, r->guard_file);
    if (r->guard_line > 0)
        sqlite3_bind_int(st, 12, r->guard_line);
    else
        sqlite3_bind_null(st, 12);
    return run(st);
}

static int write_graph_break(Store *s, const StoreEvent *e)
{
    const EventRecord *r = &e->rec;
    long long row;
    int rc = find_compile(s, e, true, &row);
    if (rc != SQLITE_OK)
        return rc;
    sqlite3_stmt *st = s->w->st[ST_BREAK];
    bind_head(s, st, e);
    bind_opt(st, 4, r->compile_id);
    bind_row(st, 5, row);
    bind_opt(st, 6, r->break_kind);
    bind_opt(st, 7, r->reason);
    bind_opt(st, 8, r->break_file);
    sqlite3_bind_int(st, 9, r->break_line);
    sqlite3_bind_int(st, 10, r->break_offset);
    bind_key(st, 11, r->user_stack_json);
    bind_u64(st, 12, r->wall_ns);
    bind_opt(st, 13, r->break_type);
    bind_opt(st, 14, r->break_class);
    return run(st);
}

static int write_graph_compiled(Store *s, const StoreEvent *e)
{
    const EventRecord *r = &e->rec;
    long long row;
    int rc = find_compile(s, e, true, &row);
    if (rc != SQLITE_OK)
        return rc;
    sqlite3_stmt *st = s->w->st[ST_GRAPH];
    bind_head(s, st, e);
    bind_opt(st, 4, r->compile_id);
    bind_row(st, 5, row);
    bind_opt(st, 6, r->backend);
    bind_u64(st, 7, r->backend_ns);
    sqlite3_bind_int(st, 8, r->nodes);
    bind_opt(st, 9, r->ops);
    bind_opt(st, 10, r->graph_code);
    bind_u64(st, 11, r->wall_ns);
    return run(st);
}

static int write_cache_limit(Store *s, const StoreEvent *e)
{
    const EventRecord *r = &e->rec;
    sqlite3_stmt *st = s->w->st[ST_CACHE_LIMIT];
    bind_head(s, st, e);
    sqlite3_bind_int(st, 4, r->frame_id);
    sqlite3_bind_int(st, 5, r->resume_offset);
    bind_opt(st, 6, r->reason);
    bind_u64(st, 7, r->wall_ns);
    int rc = run(st);
    return rc == SQLITE_OK ? write_packed_failures(s, e, 0) : rc;
}

static int write_frame_stats(Store *s, const StoreEvent *e)
{
    const EventRecord *r = &e->rec;
    sqlite3_stmt *st = s->w->st[ST_FRAME_STATS];
    bind_head(s, st, e);
    sqlite3_bind_int(st, 4, r->frame_id);
    bind_u64(st, 5, r->limit_calls);
    bind_u64(st, 6, r->uncaptured_ns);
    bind_u64(st, 7, r->cost_samples);
    return run(st);
}

static int write_run_span(Store *s, const StoreEvent *e)
{
    const EventRecord *r = &e->rec;
    sqlite3_stmt *st = s->w->st[ST_RUN_SPAN];
    bind_head(s, st, e);
    bind_key(st, 4, r->compile_id);
    bind_opt(st, 5, r->span_kind);
    bind_u64(st, 6, r->wall_ns);
    bind_u64(st, 7, r->duration_ns);
    return run(st);
}

static int write_frame_skip(Store *s, const StoreEvent *e)
{
    const EventRecord *r = &e->rec;
    sqlite3_stmt *st = s->w->st[ST_FRAME_SKIP];
    bind_head(s, st, e);
    sqlite3_bind_int(st, 4, r->resume_offset);
    bind_opt(st, 5, r->reason);
    bind_u64(st, 6, r->wall_ns);
    bind_opt(st, 7, r->break_type);
    bind_opt(st, 8, r->break_class);
    return run(st);
}

static int write_entry_stats(Store *s, const StoreEvent *e)
{
    const EventRecord *r = &e->rec;
    sqlite3_stmt *st = s->w->st[ST_ENTRY_UPSERT];
    bind_head(s, st, e);
    bind_key(st, 4, r->compile_id);
    sqlite3_bind_int(st, 5, r->frame_id);
    sqlite3_bind_int(st, 6, r->resume_offset);
    bind_u64(st, 7, r->hits);
    bind_u64(st, 8, r->guard_ns);
    bind_u64(st, 9, r->wall_ns);
    bind_u64(st, 10, r->cost_samples);
    bind_u64(st, 11, r->run_ns);
    bind_u64(st, 12, r->break_ns);
    bind_u64(st, 13, r->break_graphs);
    int rc = run(st);
    if (rc != SQLITE_OK)
        return rc;
    st = s->w->st[ST_ENTRY_STATS];
    bind_head(s, st, e);
    bind_key(st, 4, r->compile_id);
    bind_u64(st, 5, r->wall_ns);
    bind_u64(st, 6, r->hits);
    bind_u64(st, 7, r->guard_ns);
    bind_u64(st, 8, r->cost_samples);
    bind_u64(st, 9, r->run_ns);
    bind_u64(st, 10, r->break_ns);
    bind_u64(st, 11, r->break_graphs);
    return run(st);
}

static int write_reset(Store *s, const StoreEvent *e)
{
    sqlite3_stmt *st = s->w->st[ST_RESET];
    sqlite3_bind_int64(st, 1, s->run_id);
    sqlite3_bind_int64(st, 2, e->epoch);
    bind_u64(st, 3, e->rec.wall_ns);
    return run(st);
}

static int write_annotation(Store *s, const StoreEvent *e)
{
    sqlite3_stmt *st = s->w->st[ST_ANNOTATION];
    sqlite3_bind_int64(st, 1, s->run_id);
    sqlite3_bind_int64(st, 2, e->epoch);
    bind_opt(st, 3, e->rec.annotation);
    bind_opt(st, 4, e->rec.annotation_phase);
    bind_opt(st, 5, e->rec.annotation_fields);
    bind_u64(st, 6, e->rec.wall_ns);
    return run(st);
}

/* The rows of one event.  SQLite result code; SQLITE_MISUSE for a kind this
   build does not know. */
static int write_event(Store *s, const StoreEvent *e)
{
    if ((unsigned)e->rec.kind >= (unsigned)EV__COUNT)
        return SQLITE_MISUSE;
    int rc = note_epoch(s, e);
    if (rc != SQLITE_OK)
        return rc;
    if (e->rec.kind == EV_RESET)
        return write_reset(s, e);
    if (e->rec.kind == EV_ANNOTATE)
        return write_annotation(s, e);
    rc = ensure_code(s, e);
    if (rc != SQLITE_OK)
        return rc;
    switch (e->rec.kind) {
    case EV_COMPILE_START:  return write_compile_start(s, e);
    case EV_COMPILE_END:    return write_compile_end(s, e);
    case EV_RECOMPILE:      return write_recompile(s, e);
    case EV_GUARD_FAIL:     return write_guard_fail(s, e);
    case EV_GRAPH_BREAK:    return write_graph_break(s, e);
    case EV_GRAPH_COMPILED: return write_graph_compiled(s, e);
    case EV_CACHE_LIMIT:    return write_cache_limit(s, e);
    case EV_FRAME_SKIP:     return write_frame_skip(s, e);
    case EV_ENTRY_STATS:    return write_entry_stats(s, e);
    case EV_FRAME_STATS:    return write_frame_stats(s, e);
    case EV_RUN_SPAN:       return write_run_span(s, e);
    case EV_RESET:
    case EV_ANNOTATE:
    case EV__COUNT:         break;
    }
    return SQLITE_MISUSE;
}

/* ---- batches ---- */

/* Does rc end the transaction (or mean it may have been rolled back)? */
static bool ends_transaction(Store *s, int rc)
{
    switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_FULL:
    case SQLITE_IOERR:
    case SQLITE_NOMEM:
    case SQLITE_READONLY:
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
    case SQLITE_CANTOPEN:
    case SQLITE_PROTOCOL:
        return true;
    default:
        return sqlite3_get_autocommit(s->db) != 0;
    }
}

static uint64_t dropped_total(Store *s)
{
    return atomic_load_explicit(&s->dropped_queue, memory_order_relaxed)
           + atomic_load_explicit(&s->dropped_write, memory_order_relaxed);
}

/* A transaction-ending failure: roll back, count n dropped, report once. */
static void batch_failed(Store *s, size_t n, int rc, const char *doing)
{
    char why[256];
    snprintf(why, sizeof why, "%s", sqlite3_errmsg(s->db));   /* before ROLLBACK */
    if (!sqlite3_get_autocommit(s->db))
        run(s->w->st[ST_ROLLBACK]);
    forget_caches(s->w);
    atomic_fetch_add_explicit(&s->dropped_write, n, memory_order_relaxed);
    atomic_fetch_add_explicit(&s->errors, 1, memory_order_relaxed);
    switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        report_once(s, LOG_BUSY, "the database is locked by another connection "
                    "(waited %u ms while %s); events are dropped while it stays "
                    "locked and counted in runs.dropped_events (reported once)",
                    s->busy_ms, doing);
        break;
    case SQLITE_FULL:
        report_once(s, LOG_FULL, "the disk is full or the database reached its "
                    "size limit (%s, while %s); events are dropped and counted in "
                    "runs.dropped_events (reported once)", sqlite3_errstr(rc), doing);
        break;
    default:
        report_once(s, LOG_IO, "cannot write (%s, while %s); events are dropped "
                    "and counted in runs.dropped_events (reported once)", why, doing);
        break;
    }
}

/*
 * Write n events in one transaction.  Returns 0, or -1 when the transaction
 * failed (every event of it then counted as dropped).  Frees nothing.
 */
static int write_batch(Store *s, StoreEvent **ev, size_t n)
{
    StoreWriter *w = s->w;
    int rc = run(w->st[ST_BEGIN]);
    if (rc != SQLITE_OK) {
        batch_failed(s, n, rc, "starting a transaction");
        return -1;
    }
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        rc = write_event(s, ev[i]);
        if (rc == SQLITE_OK)
            continue;
        if (ends_transaction(s, rc)) {
            batch_failed(s, n, rc, "writing events");
            return -1;
        }
        bad++;
        atomic_fetch_add_explicit(&s->errors, 1, memory_order_relaxed);
        report_once(s, LOG_EVENT, "an event (kind %d) could not be written (%s); "
                    "such events are dropped and counted in runs.dropped_events "
                    "(reported once)", (int)ev[i]->rec.kind,
                    rc == SQLITE_MISUSE ? "unknown kind" : sqlite3_errmsg(s->db));
        forget_caches(w);   /* the failed statement may have been the one cached */
    }
    sqlite3_stmt *st = w->st[ST_RUN_PROGRESS];
    sqlite3_bind_int64(st, 1, s->run_id);
    sqlite3_bind_int64(st, 2, (sqlite3_int64)(n - bad));
    bind_u64(st, 3, dropped_total(s) + bad);
    rc = run(st);
    if (rc == SQLITE_OK)
        rc = run(w->st[ST_COMMIT]);
    if (rc != SQLITE_OK) {
        batch_failed(s, n, rc, "committing");
        return -1;
    }
    atomic_fetch_add_explicit(&s->written, n - bad, memory_order_relaxed);
    atomic_fetch_add_explicit(&s->dropped_write, bad, memory_order_relaxed);
    return 0;
}

/*
 * Write everything queued, one transaction per batch, taking the gate per
 * batch.  After a failed transaction the rest of this drain is dropped
 * without trying (at most one busy timeout per drain).  Returns early when
 * store_pause() asks for the gate.
 */
static void drain(Store *s)
{
    StoreWriter *w = s->w;
    bool failed = false;
    for (;;) {
        pthread_mutex_lock(&s->gate);
        size_t n = 0;
        while (n < s->batch_max && (w->batch[n] = store_queue_pop(&s->queue)) != NULL)
            n++;
        if (n > 0) {
            if (failed)
                atomic_fetch_add_explicit(&s->dropped_write, n, memory_order_relaxed);
            else
                failed = write_batch(s, w->batch, n) < 0;
            /* During an exit flush the process is about to die: the events
               are left to it.  free() of memory another thread allocated can
               wait on that thread's allocator lock (glibc's arena, ASan's
               size class), and the thread the signal interrupted may hold it. */
            if (!atomic_load(&s->exit_requested))
                for (size_t i = 0; i < n; i++)
                    store_event_free(w->batch[i]);
        }
        pthread_mutex_unlock(&s->gate);
        if (n < s->batch_max || atomic_load(&s->pause_requested))
            return;
    }
}

static void note_queue_drops(Store *s)
{
    uint64_t d = atomic_load_explicit(&s->dropped_queue, memory_order_relaxed);
    if (d > s->w->queue_drops_seen) {
        s->w->queue_drops_seen = d;
        report_once(s, LOG_QUEUE, "the event queue is full (%zu events or %zu bytes); "
                    "events are dropped and counted in runs.dropped_events "
                    "(reported once)", store_queue_capacity(&s->queue),
                    s->queue.max_bytes);
    }
}

/* Sleep until `deadline` (monotonic ns) or a wake byte. */
static void wait_for_work(Store *s, uint64_t deadline)
{
    uint64_t now = store_mono_ns();
    int timeout = now >= deadline ? 0 : (int)((deadline - now + 999999) / 1000000);
    struct pollfd p = {.fd = s->wake_fd[0], .events = POLLIN};
    if (poll(&p, 1, timeout) > 0 && (p.revents & POLLIN)) {
        char buf[64];
        while (read(s->wake_fd[0], buf, sizeof buf) > 0)
            ;
        atomic_store(&s->wake_pending, 0);
    }
}

/* runs.ended_at and the drop count so far.  Under the gate. */
static void write_run_end(Store *s)
{
    sqlite3_stmt *st = s->w->st[ST_RUN_END];
    sqlite3_bind_int64(st, 1, s->run_id);
    bind_u64(st, 2, store_wall_ns());
    bind_u64(st, 3, dropped_total(s));
    int rc = run(st);
    if (rc != SQLITE_OK) {
        atomic_fetch_add_explicit(&s->errors, 1, memory_order_relaxed);
        report_once(s, LOG_END, "cannot record the end of the run (%s); "
                    "runs.ended_at stays NULL", sqlite3_errmsg(s->db));
    }
}

/* store_flush_for_exit() asked: everything queued is written (drain ran
   just before); end the run and tell the waiting handler.  Once. */
static void end_run_for_exit(Store *s)
{
    pthread_mutex_lock(&s->gate);
    write_run_end(s);
    pthread_mutex_unlock(&s->gate);
    char b = 1;
    ssize_t r = write(s->exit_fd[1], &b, 1);
    (void)r;
}

/* runs.ended_at and the final drop count; then release the connection. */
static void finish_run(Store *s)
{
    pthread_mutex_lock(&s->gate);
    write_run_end(s);
    char b = 1;                   /* a SIGTERM handler waiting on the close: done */
    ssize_t r = write(s->exit_fd[1], &b, 1);
    (void)r;
    store_writer_free(s);
    sqlite3_close(s->db);
    s->db = NULL;
    pthread_mutex_unlock(&s->gate);
}

static void *writer_main(void *arg)
{
    Store *s = arg;
    bool exit_done = false;
    for (;;) {
        int stop = atomic_load(&s->stopping);
        int exiting = !exit_done && atomic_load(&s->exit_requested);
        uint64_t deadline = store_mono_ns() + (uint64_t)s->flush_ms * 1000000u;
        drain(s);
        if (atomic_load(&s->pause_requested))
            return NULL;          /* store_pause(): ended outside SQLite, restarted later */
        if (exiting) {
            end_run_for_exit(s);
            exit_done = true;
        }
        pthread_mutex_lock(&s->gate);   /* the log may write to stdio: not across fork */
        note_queue_drops(s);
        pthread_mutex_unlock(&s->gate);
        if (stop)
            break;
        wait_for_work(s, deadline);
    }
    finish_run(s);
    return NULL;
}

/* ---- setup ---- */

/* runs.argv as a JSON array built by SQLite's json_insert (never by hand).
   *out malloc'd, NULL when argv is NULL.  SQLite result code. */
static int argv_json(sqlite3 *db, const StoreOptions *o, char **out)
{
    *out = NULL;
    if (o == NULL || o->argv == NULL)
        return SQLITE_OK;
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db, "SELECT json_insert(?1, '$[#]', ?2)", -1, &st, NULL);
    char *json = strdup("[]");
    if (json == NULL)
        rc = SQLITE_NOMEM;
    for (int i = 0; rc == SQLITE_OK && i < o->argc; i++) {
        bind_key(st, 1, json);
        bind_key(st, 2, o->argv[i] != NULL ? o->argv[i] : "");
        rc = sqlite3_step(st);
        char *next = rc == SQLITE_ROW ? strdup((const char *)sqlite3_column_text(st, 0)) : NULL;
        sqlite3_reset(st);
        if (rc == SQLITE_ROW)
            rc = next != NULL ? SQLITE_OK : SQLITE_NOMEM;
        free(json);
        json = next;
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_OK) {
        free(json);
        return rc;
    }
    *out = json;
    return SQLITE_OK;
}

static int insert_run(Store *s, const StoreOptions *o, char **errmsg)
{
    char *argv = NULL;
    sqlite3_stmt *st = NULL;
    int rc = argv_json(s->db, o, &argv);
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(s->db, "INSERT INTO runs (pid, argv, python, started_at,"
                                " hostname, rank, local_rank, world_size, redacted)"
                                " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)", -1, &st, NULL);
    if (rc == SQLITE_OK) {
        StoreIdentity id;
        store_identity(&id);
        sqlite3_bind_int64(st, 1, (sqlite3_int64)id.pid);
        sqlite3_bind_text(st, 5, id.host, -1, SQLITE_TRANSIENT);
        int ranks[3] = {id.rank, id.local_rank, id.world_size};
        for (int i = 0; i < 3; i++)
            if (ranks[i] >= 0)
                sqlite3_bind_int(st, 6 + i, ranks[i]);
        if (argv != NULL)
            bind_key(st, 2, argv);
        if (o != NULL && o->python != NULL)
            bind_key(st, 3, o->python);
        if (o != NULL && o->redacted != NULL)
            bind_key(st, 9, o->redacted);
        bind_u64(st, 4, store_wall_ns());
        rc = run(st);
    }
    sqlite3_finalize(st);
    free(argv);
    if (rc != SQLITE_OK) {
        store_set_error(errmsg, "%s: cannot insert the run: %s", s->path,
                        sqlite3_errmsg(s->db));
        return -1;
    }
    s->run_id = sqlite3_last_insert_rowid(s->db);
    return 0;
}

int store_writer_init(Store *s, const StoreOptions *opts, char **errmsg)
{
    StoreWriter *w = calloc(1, sizeof *w);
    if (w == NULL || (w->batch = calloc(s->batch_max, sizeof(StoreEvent *))) == NULL) {
        free(w);
        store_set_error(errmsg, "%s: out of memory", s->path);
        return -1;
    }
    s->w = w;
    for (int i = 0; i < ST__COUNT; i++) {
        int rc = sqlite3_prepare_v3(s->db, stmt_sql[i], -1, SQLITE_PREPARE_PERSISTENT,
                                    &w->st[i], NULL);
        if (rc != SQLITE_OK) {
            store_set_error(errmsg, "%s: preparing a statement failed: %s", s->path,
                            sqlite3_errmsg(s->db));
            goto out_free;
        }
    }
    if (insert_run(s, opts, errmsg) < 0)
        goto out_free;
    return 0;

out_free:
    store_writer_free(s);
    return -1;
}

int store_writer_start(Store *s, char **errmsg)
{
    sigset_t all, old;
    sigfillset(&all);
    /* The thread inherits a mask with every signal blocked: signals stay
       with the program's own threads (Python's handlers run there). */
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int err = pthread_create(&s->thread, NULL, writer_main, s);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (err != 0) {
        store_set_error(errmsg, "%s: cannot start the writer thread: %s", s->path,
                        strerror(err));
        return -1;
    }
    s->thread_started = true;
    return 0;
}

void store_writer_wake(Store *s)
{
    if (atomic_exchange(&s->wake_pending, 1) == 0) {
        char b = 1;
        ssize_t r = write(s->wake_fd[1], &b, 1);   /* O_NONBLOCK: never waits */
        (void)r;
    }
}

void store_writer_free(Store *s)
{
    StoreWriter *w = s->w;
    if (w == NULL)
        return;
    for (int i = 0; i < ST__COUNT; i++)
        sqlite3_finalize(w->st[i]);
    free(w->batch);
    free(w);
    s->w = NULL;
}

void store_writer_abandon(Store *s)
{
    StoreWriter *w = s->w;
    if (w == NULL)
        return;
    /* Statements belong to a connection we may not touch: leak them. */
    free(w->batch);
    free(w);
    s->w = NULL;
}
