/*
 * test_store.c -- unit tests of the SQLite recorder (store/): events in,
 * rows out, and every way recording must fail soft (full queue, locked
 * database, full disk, foreign or newer files) without the producer noticing.
 * Built and run by `make check-c` (and `make check-c-asan`); one standalone
 * program, exit status 0 when every check passed.  Design: DESIGN.md 4.3;
 * schema: docs/sql.md.
 */
#define _GNU_SOURCE

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "../../store/store.h"
#include "../../store/store_int.h"   /* store_schema_migration_sql: the v1 layout */

/* ---- a tiny harness ---- */

static int failures;
static int checks;
static const char *current_test;

#define CHECK(cond) check((cond), #cond, __FILE__, __LINE__)
#define CHECK_EQ(a, b) check_eq((long long)(a), (long long)(b), #a, #b, __FILE__, __LINE__)
#define CHECK_STR(a, b) check_str((a), (b), #a, __FILE__, __LINE__)

static void check(int ok, const char *what, const char *file, int line)
{
    checks++;
    if (!ok) {
        failures++;
        fprintf(stderr, "FAIL %s: %s (%s:%d)\n", current_test, what, file, line);
    }
}

static void check_eq(long long a, long long b, const char *ea, const char *eb,
                     const char *file, int line)
{
    checks++;
    if (a != b) {
        failures++;
        fprintf(stderr, "FAIL %s: %s == %s: %lld != %lld (%s:%d)\n", current_test, ea, eb,
                a, b, file, line);
    }
}

static void check_str(const char *a, const char *b, const char *ea, const char *file, int line)
{
    checks++;
    if (a == NULL || b == NULL || strcmp(a, b) != 0) {
        failures++;
        fprintf(stderr, "FAIL %s: %s: \"%s\" != \"%s\" (%s:%d)\n", current_test, ea,
                a ? a : "(null)", b ? b : "(null)", file, line);
    }
}

static char tmpdir[256];

/* A fresh path in the test directory. */
static const char *db_path(const char *name)
{
    static char buf[8][512];
    static int next;
    char *p = buf[next++ % 8];
    snprintf(p, sizeof buf[0], "%s/%s", tmpdir, name);
    return p;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- log capture ---- */

typedef struct LogCapture {
    pthread_mutex_t mu;
    int n;
    char text[4096];
} LogCapture;

static void capture_log(void *arg, const char *msg)
{
    LogCapture *c = arg;
    pthread_mutex_lock(&c->mu);
    c->n++;
    size_t used = strlen(c->text);
    snprintf(c->text + used, sizeof c->text - used, "%s\n", msg);
    pthread_mutex_unlock(&c->mu);
}

static int log_count(LogCapture *c, const char *needle)
{
    int n = 0;
    pthread_mutex_lock(&c->mu);
    for (const char *p = c->text; (p = strstr(p, needle)) != NULL; p++)
        n++;
    pthread_mutex_unlock(&c->mu);
    return n;
}

static StoreOptions test_options(LogCapture *cap)
{
    static const char *const argv[] = {"prog.py", "--flag", "it's \"quoted\""};
    StoreOptions o = {0};
    o.argv = argv;
    o.argc = 3;
    o.python = "3.11.7 (test)";
    o.flush_interval_ms = 20;
    if (cap != NULL) {
        memset(cap, 0, sizeof *cap);
        pthread_mutex_init(&cap->mu, NULL);
        o.log = capture_log;
        o.log_arg = cap;
    }
    return o;
}

/* ---- events ---- */

static _Atomic uint64_t fake_wall = 1700000000000000000ull;   /* producers share it */

static EventRecord ev_make(EventKind kind, long long code_id, const char *compile_id)
{
    EventRecord e;
    memset(&e, 0, sizeof e);
    e.kind = kind;
    e.wall_ns = atomic_fetch_add(&fake_wall, 1) + 1;
    e.mono_ns = e.wall_ns;
    e.code_id = code_id;
    e.qualname = "f";
    e.filename = "/src/model.py";
    e.firstlineno = 10;
    e.compile_id = compile_id;
    e.outcome = e.guards_text = e.reason = e.entry_compile_id = "";
    e.guard_kind = e.expr = e.observed = e.break_kind = e.break_file = "";
    e.user_stack_json = e.backend = e.graph_code = e.ops = "";
    e.guard_sites_json = e.guard_file = e.nearest_json = e.failures_packed = e.hatches = "";
    if (compile_id[0] != '\0')
        sscanf(compile_id, "%d/%d", &e.frame_id, &e.frame_compile_id);
    return e;
}

/* ---- reading back ---- */

static sqlite3 *ro(const char *path)
{
    sqlite3 *db = NULL;
    char uri[600];
    snprintf(uri, sizeof uri, "file:%s?mode=ro", path);
    if (sqlite3_open_v2(uri, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, NULL) != SQLITE_OK) {
        fprintf(stderr, "cannot open %s: %s\n", path, sqlite3_errmsg(db));
        exit(2);
    }
    return db;
}

/* First column of the first row of sql (printf-formatted) as an integer;
   -1 when there is no row, -2 on error. */
static long long q1(sqlite3 *db, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static long long q1(sqlite3 *db, const char *fmt, ...)
{
    char sql[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sql, sizeof sql, fmt, ap);
    va_end(ap);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
        fprintf(stderr, "  sql error: %s in: %s\n", sqlite3_errmsg(db), sql);
        return -2;
    }
    long long v = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
    sqlite3_finalize(st);
    return v;
}

/* Same, as text ("(null)" for NULL, "(none)" without a row).  Static buffer. */
static const char *qs(sqlite3 *db, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static const char *qs(sqlite3 *db, const char *fmt, ...)
{
    static char out[4][16384];   /* a whole schema layout fits */
    static int next;
    char *o = out[next++ % 4];
    char sql[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sql, sizeof sql, fmt, ap);
    va_end(ap);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
        snprintf(o, sizeof out[0], "(error: %s)", sqlite3_errmsg(db));
        return o;
    }
    if (sqlite3_step(st) == SQLITE_ROW) {
        const unsigned char *t = sqlite3_column_text(st, 0);
        snprintf(o, sizeof out[0], "%s", t ? (const char *)t : "(null)");
    }
    else {
        snprintf(o, sizeof out[0], "(none)");
    }
    sqlite3_finalize(st);
    return o;
}

static void exec_or_die(sqlite3 *db, const char *sql)
{
    char *err = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK) {
        fprintf(stderr, "setup sql failed: %s\n", err);
        exit(2);
    }
}

/* Wait until cond_fn(s) holds, up to ms.  1 if it did. */
static int wait_for(Store *s, int (*cond)(StoreStats *, long long), long long arg, int ms)
{
    double end = now_s() + ms / 1000.0;
    for (;;) {
        StoreStats st = store_stats(s);
        if (cond(&st, arg))
            return 1;
        if (now_s() > end)
            return 0;
        sleep_ms(5);
    }
}

static int dropped_write_at_least(StoreStats *st, long long n) { return (long long)st->dropped_write >= n; }
static int written_at_least(StoreStats *st, long long n) { return (long long)st->written >= n; }

/* ---- tests ---- */

/* One recompile story: code 7 compiles [0/0], then a guard fails, [0/1] is
   compiled with a graph break, both entries report hits. */
static void submit_story(Store *s)
{
    EventRecord e = ev_make(EV_COMPILE_START, 7, "0/0");
    CHECK_EQ(store_submit(s, &e), 0);
    e = ev_make(EV_GRAPH_COMPILED, 7, "0/0");
    e.backend = "eager";
    e.backend_ns = 1234;
    e.nodes = 3;
    e.ops = "add,mul,relu";
    e.graph_code = "def forward(self, x):\n    return x + 1\n";
    CHECK_EQ(store_submit(s, &e), 0);
    e = ev_make(EV_COMPILE_END, 7, "0/0");
    e.outcome = "ok";
    e.duration_ns = 5000;
    e.graphs = 1;
    e.nodes = 3;
    e.guards = 2;
    e.guards_text = "TENSOR_MATCH\tL['x'].shape == (3, 4)\r\n\nG['np'] is <module>\n";
    CHECK_EQ(store_submit(s, &e), 0);

    e = ev_make(EV_COMPILE_START, 7, "0/1");
    CHECK_EQ(store_submit(s, &e), 0);
    e = ev_make(EV_RECOMPILE, 7, "0/1");
    e.reason = "L['x'].shape == (3, 4) (observed (5, 4))";
    e.nearest_json = "{\"entry\": \"0/0\", \"failing\": 1, \"capture_ns\": 6000, \"guards\":"
                     " [{\"idx\": 0, \"kind\": \"TENSOR_MATCH\", \"expr\": \"L['x'].shape == (3, 4)\","
                     " \"observed\": \"(5, 4)\", \"user_stack\": [[\"/src/model.py\", 11, \"f\", \"y = x\"]]}]}";
    CHECK_EQ(store_submit(s, &e), 0);
    e = ev_make(EV_GUARD_FAIL, 7, "0/1");
    e.entry_compile_id = "0/0";
    e.guard_kind = "TENSOR_MATCH";
    e.expr = "L['x'].shape == (3, 4)";
    e.observed = "(5, 4)";
    e.guard_file = "/src/model.py";
    e.guard_line = 11;
    CHECK_EQ(store_submit(s, &e), 0);
    e = ev_make(EV_COMPILE_END, 7, "0/1");
    e.outcome = "ok";
    e.duration_ns = 7000;
    e.graphs = 2;
    e.nodes = 5;
    e.guards = 1;
    e.guards_text = "L['x'].shape == (5, 4)";
    e.hatches = "dynscope.allow_in_graph: g is one graph node\nh traced in place of k";
    e.attempts = 2;
    e.trace_ns = 4000;
    e.guards_ns = 1000;
    e.graph_ns = 500;
    e.backend_ns = 300;
    e.plan_ns = 1200;
    e.events_ns = 80;
    e.guard_sites_json = "{\"sites\": [[[\"/src/model.py\", 11, \"f\", \"y = x\"]]], \"guards\": [0]}";
    CHECK_EQ(store_submit(s, &e), 0);
    e = ev_make(EV_GRAPH_BREAK, 7, "0/1");
    e.break_kind = "call";
    e.reason = "call to print";
    e.break_file = "/src/model.py";
    e.break_line = 12;
    e.break_offset = 40;
    e.user_stack_json = " [ [\"/src/model.py\", 12, \"f\", \"print(x)\"] ] ";
    e.break_type = "DS0001";
    e.break_class = "your code";
    CHECK_EQ(store_submit(s, &e), 0);
    e = ev_make(EV_ENTRY_STATS, 7, "0/0");
    e.hits = 10;
    e.guard_ns = 100;
    CHECK_EQ(store_submit(s, &e), 0);
    e = ev_make(EV_ENTRY_STATS, 7, "0/1");
    e.hits = 3;
    e.guard_ns = 30;
    e.resume_offset = 0;
    CHECK_EQ(store_submit(s, &e), 0);
    e = ev_make(EV_ENTRY_STATS, 7, "0/0");
    e.hits = 25;
    e.guard_ns = 260;
    CHECK_EQ(store_submit(s, &e), 0);
    e = ev_make(EV_FRAME_SKIP, 8, "");
    e.qualname = "g";
    e.reason = "try/except in the frame";
    e.break_type = "DS0014";
    e.break_class = "engine limit";
    CHECK_EQ(store_submit(s, &e), 0);
    e = ev_make(EV_CACHE_LIMIT, 7, "0/1");
    e.reason = "cache_size_limit (8) reached";
    CHECK_EQ(store_submit(s, &e), 0);
}

static void test_events_written_and_read_back_exactly(void)
{
    const char *path = db_path("story.db");
    LogCapture cap;
    StoreOptions o = test_options(&cap);
    char *err = NULL;
    Store *s = store_open(path, &o, &err);
    CHECK(s != NULL);
    if (s == NULL) {
        fprintf(stderr, "  %s\n", err);
        free(err);
        return;
    }
    CHECK(err == NULL);
    submit_story(s);
    long long run_id = store_stats(s).run_id;
    store_close(s);

    sqlite3 *db = ro(path);
    CHECK_EQ(q1(db, "PRAGMA user_version"), STORE_SCHEMA_VERSION);
    CHECK_EQ(q1(db, "PRAGMA application_id"), STORE_APPLICATION_ID);
    CHECK_STR(qs(db, "PRAGMA journal_mode"), "wal");
    CHECK_EQ(q1(db, "SELECT count(*) FROM runs"), 1);
    CHECK_EQ(q1(db, "SELECT run_id FROM runs"), run_id);
    CHECK_EQ(q1(db, "SELECT pid FROM runs"), getpid());
    CHECK_STR(qs(db, "SELECT argv FROM runs"), "[\"prog.py\",\"--flag\",\"it's \\\"quoted\\\"\"]");
    CHECK_EQ(q1(db, "SELECT json_array_length(argv) FROM runs"), 3);
    CHECK_STR(qs(db, "SELECT argv ->> 2 FROM runs"), "it's \"quoted\"");
    CHECK_STR(qs(db, "SELECT python FROM runs"), "3.11.7 (test)");
    CHECK_EQ(q1(db, "SELECT ended_at >= started_at AND started_at > 0 FROM runs"), 1);
    CHECK_EQ(q1(db, "SELECT dropped_events FROM runs"), 0);
    CHECK_EQ(q1(db, "SELECT written_events FROM runs"), 13);

    CHECK_EQ(q1(db, "SELECT count(*) FROM code_objects"), 2);
    CHECK_STR(qs(db, "SELECT name || '@' || filename || ':' || firstlineno FROM code_objects"
                     " WHERE code_id = 7"), "f@/src/model.py:10");
    CHECK_EQ(q1(db, "SELECT count(*) FROM compiles"), 2);
    CHECK_EQ(q1(db, "SELECT count(*) FROM compiles WHERE frame_compile_id > 0"), 1);
    CHECK_STR(qs(db, "SELECT compile_id || ' ' || outcome || ' ' || duration_ns || ' ' ||"
                     " graphs || ' ' || nodes || ' ' || guards FROM compiles"
                     " WHERE compile_id = '0/1'"), "0/1 ok 7000 2 5 1");
    CHECK_STR(qs(db, "SELECT reason FROM compiles WHERE compile_id = '0/1'"),
              "L['x'].shape == (3, 4) (observed (5, 4))");
    CHECK_STR(qs(db, "SELECT reason FROM compiles WHERE compile_id = '0/0'"), "(null)");
    CHECK_STR(qs(db, "SELECT hatches FROM compiles WHERE compile_id = '0/1'"),
              "dynscope.allow_in_graph: g is one graph node\nh traced in place of k");
    CHECK_STR(qs(db, "SELECT hatches FROM compiles WHERE compile_id = '0/0'"), "(null)");
    CHECK_STR(qs(db, "SELECT trace_ns || ' ' || guards_ns || ' ' || graph_ns || ' ' || backend_ns"
                     " || ' ' || plan_ns || ' ' || events_ns || ' ' || attempts FROM compiles"
                     " WHERE compile_id = '0/1'"), "4000 1000 500 300 1200 80 2");
    CHECK_EQ(q1(db, "SELECT count(*) FROM compiles WHERE compile_id = '0/0' AND trace_ns IS NULL"
                    " AND attempts IS NULL"), 1);   /* no attempts: nothing measured */
    CHECK_EQ(q1(db, "SELECT count(*) FROM frames"), 1);

    CHECK_EQ(q1(db, "SELECT count(*) FROM guard_failures"), 1);
    CHECK_STR(qs(db, "SELECT compile_id || '|' || entry_compile_id || '|' || kind || '|' ||"
                     " expr || '|' || observed FROM guard_failures"),
              "0/1|0/0|TENSOR_MATCH|L['x'].shape == (3, 4)|(5, 4)");
    CHECK_EQ(q1(db, "SELECT g.compile_row = c.compile_row FROM guard_failures g, compiles c"
                    " WHERE c.compile_id = '0/1'"), 1);
    CHECK_STR(qs(db, "SELECT filename || ':' || lineno FROM guard_failures"), "/src/model.py:11");
    /* provenance of the entry's guard, and the recompile's nearest entry */
    CHECK_STR(qs(db, "SELECT filename || ':' || lineno || ' ' || json_extract(user_stack, '$[0][3]')"
                     " FROM guards WHERE compile_id = '0/1'"), "/src/model.py:11 y = x");
    CHECK_STR(qs(db, "SELECT d.entry_compile_id || '|' || d.failing || '|' || d.idx || '|' || d.kind"
                     " || '|' || d.observed || '|' || d.filename || ':' || d.lineno || '|' ||"
                     " d.capture_ns || '|' || (d.compile_row = c.compile_row)"
                     " FROM recompile_diffs d, compiles c WHERE c.compile_id = '0/1'"),
              "0/0|1|0|TENSOR_MATCH|(5, 4)|/src/model.py:11|6000|1");

    CHECK_EQ(q1(db, "SELECT count(*) FROM graph_breaks"), 1);
    CHECK_STR(qs(db, "SELECT kind || '|' || reason || '|' || filename || '|' || lineno ||"
                     " '|' || offset FROM graph_breaks"),
              "call|call to print|/src/model.py|12|40");
    CHECK_STR(qs(db, "SELECT user_stack FROM graph_breaks"),
              "[[\"/src/model.py\",12,\"f\",\"print(x)\"]]");

    CHECK_EQ(q1(db, "SELECT count(*) FROM cache_entries"), 2);
    CHECK_EQ(q1(db, "SELECT hits FROM cache_entries WHERE compile_id = '0/0'"), 25);
    CHECK_EQ(q1(db, "SELECT guard_ns FROM cache_entries WHERE compile_id = '0/0'"), 260);
    CHECK_EQ(q1(db, "SELECT hits FROM cache_entries WHERE compile_id = '0/1'"), 3);
    CHECK_STR(qs(db, "SELECT guards_text FROM cache_entries WHERE compile_id = '0/1'"),
              "L['x'].shape == (5, 4)");
    CHECK_EQ(q1(db, "SELECT count(*) FROM guards"), 3);
    CHECK_STR(qs(db, "SELECT group_concat(idx || '=' || expr, ';') FROM (SELECT * FROM guards"
                     " WHERE compile_id = '0/0' ORDER BY idx)"),
              "0=L['x'].shape == (3, 4);1=G['np'] is <module>");
    CHECK_STR(qs(db, "SELECT kind FROM guards WHERE compile_id = '0/0' AND idx = 0"),
              "TENSOR_MATCH");
    CHECK_STR(qs(db, "SELECT kind FROM guards WHERE compile_id = '0/0' AND idx = 1"), "(null)");
    CHECK_EQ(q1(db, "SELECT count(*) FROM entry_stats"), 3);
    CHECK_EQ(q1(db, "SELECT count(*) FROM graphs"), 1);
    CHECK_STR(qs(db, "SELECT backend || '|' || backend_ns || '|' || nodes || '|' || ops"
                     " FROM graphs"), "eager|1234|3|add,mul,relu");
    CHECK_STR(qs(db, "SELECT code FROM graphs"), "def forward(self, x):\n    return x + 1\n");
    CHECK_EQ(q1(db, "SELECT count(*) FROM frame_skips WHERE code_id = 8"), 1);
    CHECK_EQ(q1(db, "SELECT count(*) FROM cache_limits"), 1);

    /* Views. */
    CHECK_EQ(q1(db, "SELECT count(*) FROM recompile_history"), 1);
    CHECK_STR(qs(db, "SELECT compile_id || ' ' || entry_compile_id || ' ' || guard_kind ||"
                     " ' ' || observed FROM recompile_history"), "0/1 0/0 TENSOR_MATCH (5, 4)");
    CHECK_EQ(q1(db, "SELECT failures FROM recompiles"), 1);
    CHECK_STR(qs(db, "SELECT kind || '|' || reason || '|' || count FROM break_reasons"),
              "call|call to print|1");
    CHECK_STR(qs(db, "SELECT compiles || ' ' || recompiles || ' ' || graph_breaks || ' ' ||"
                     " guard_failures || ' ' || cache_entries || ' ' || hits FROM code_summary"
                     " WHERE code_id = 7"), "2 1 1 1 2 28");
    sqlite3_close(db);

    /* The read helpers agree. */
    StoreReader *r = store_reader_open(path, &err);
    CHECK(r != NULL);
    if (r != NULL) {
        StoreSummary sum;
        CHECK_EQ(store_read_summary(r, 0, &sum, &err), 0);
        CHECK_EQ(sum.runs, 1);
        CHECK_EQ(sum.last_run_id, run_id);
        CHECK_EQ(sum.code_objects, 2);
        CHECK_EQ(sum.compiles, 2);
        CHECK_EQ(sum.recompiles, 1);
        CHECK_EQ(sum.guard_failures, 1);
        CHECK_EQ(sum.graph_breaks, 1);
        CHECK_EQ(sum.cache_entries, 2);
        CHECK_EQ(sum.hits, 28);
        CHECK_EQ(sum.dropped_events, 0);
        StoreCodeRow *rows;
        size_t n;
        CHECK_EQ(store_read_code_objects(r, run_id, &rows, &n, &err), 0);
        CHECK_EQ(n, 2);
        if (n == 2) {
            CHECK_EQ(rows[0].code_id, 7);
            CHECK_STR(rows[0].name, "f");
            CHECK_EQ(rows[0].recompiles, 1);
            CHECK_EQ(rows[0].hits, 28);
            CHECK_STR(rows[0].last_failure, "L['x'].shape == (3, 4) (observed (5, 4))");
            CHECK_EQ(rows[1].code_id, 8);
            CHECK_STR(rows[1].last_failure, "");
        }
        store_code_rows_free(rows, n);
        store_reader_close(r);
    }
    CHECK_EQ(cap.n, 0);
}

/* ---- the read model (read.h): each row as one line of text ---- */

static char got[4096];

static void got_reset(void)
{
    got[0] = '\0';
}

static void got_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void got_line(const char *fmt, ...)
{
    size_t used = strlen(got);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(got + used, sizeof got - used, fmt, ap);
    va_end(ap);
    used = strlen(got);
    snprintf(got + used, sizeof got - used, "\n");
}

static void on_run(void *ctx, const StoreRunRow *r)
{
    (void)ctx;
    got_line("run %lld ended %d resets %lld dropped %lld argv %s", r->run_id,
             r->ended_at >= r->started_at && r->started_at > 0, r->resets, r->dropped_events,
             r->argv);
    CHECK(r->hostname[0] != '\0');              /* the recorder's gethostname() */
}

static void on_code(void *ctx, const StoreCodeObjectRow *r)
{
    (void)ctx;
    got_line("code %lld %s %s:%d", r->code_id, r->name, r->filename, r->firstlineno);
}

static void on_compile(void *ctx, const StoreCompileRow *r)
{
    (void)ctx;
    got_line("compile %lld code %lld fc %lld ended %d %lld", r->compile_row, r->code_id,
             r->frame_compile_id, r->ended, r->duration_ns);
}

static void on_text(void *ctx, const StoreTextRow *r)
{
    (void)ctx;
    got_line("code %lld %s", r->code_id, r->text);
}

static void on_count(void *ctx, const StoreCountRow *r)
{
    (void)ctx;
    got_line("code %lld n %lld epoch %lld", r->code_id, r->n, r->max_epoch);
}

static void on_failure(void *ctx, const StoreFailureRow *r)
{
    (void)ctx;
    got_line("failure %lld code %lld %s observed %s", r->failure_id, r->code_id, r->expr,
             r->observed);
}

static void on_entry(void *ctx, const StoreEntryRow *r)
{
    (void)ctx;
    got_line("entry code %lld epoch %lld [%s] frame %lld hits %lld", r->code_id, r->epoch,
             r->compile_id, r->frame_id, r->hits);
}

static void on_code_entry(void *ctx, const StoreCodeEntryRow *r)
{
    (void)ctx;
    got_line("[%s] hits %lld guard_ns %lld guards %lld in_frame %lld snap %d", r->compile_id,
             r->hits, r->guard_ns, r->nguards, r->in_frame, r->snapshotted);
}

static void on_guard(void *ctx, const StoreGuardRow *r)
{
    (void)ctx;
    got_line("%s|%s", r->kind, r->expr);
}

static void on_guard_count(void *ctx, const StoreGuardCountRow *r)
{
    (void)ctx;
    got_line("%lld x %s %s last %s", r->n, r->kind, r->expr, r->last_observed);
}

static long long last_break;

static void on_site(void *ctx, const StoreBreakSiteRow *r)
{
    (void)ctx;
    last_break = r->last_break_id;
    got_line("%lld x %s %s %s:%d codes %lld fns %s", r->n, r->kind, r->reason, r->filename,
             r->lineno, r->code_objects, r->functions);
}

/* A site with the break registry's type and class (schema v4). */
static void on_typed_site(void *ctx, const StoreBreakSiteRow *r)
{
    (void)ctx;
    got_line("[%s|%s] %lld x %s|%s %s:%d codes %lld fns %s last %lld code %lld", r->break_type,
             r->break_class, r->n, r->kind, r->reason, r->filename, r->lineno, r->code_objects,
             r->functions, r->last_break_id, r->code_id);
}

/* A site with what its breaks cost (schema v6), "-" when unknown. */
static void on_cost_site(void *ctx, const StoreBreakSiteRow *r)
{
    (void)ctx;
    const StoreBreakCost *c = &r->cost;
    if (!c->known) {
        CHECK(c->ns == 0 && c->function_ns == 0 && c->share == -1 && c->samples == 0);
        got_line("%lld x %s:%d %s cost -", r->n, r->filename, r->lineno, r->functions);
        return;
    }
    got_line("%lld x %s:%d %s cost %lld ns of %lld (%.2f) graphs %lld samples %lld", r->n,
             r->filename, r->lineno, r->functions, c->ns, c->function_ns, c->share,
             c->extra_graphs, c->samples);
}

static void on_typed_skip(void *ctx, const StoreSkipRow *r)
{
    (void)ctx;
    got_line("skip %d: %s [%s|%s]", r->resume_offset, r->reason, r->break_type, r->break_class);
}

static void on_frame(void *ctx, const StoreStackFrame *r)
{
    (void)ctx;
    got_line("%s:%d in %s: %s", r->filename, r->lineno, r->name, r->source);
}

static long long last_compile_row;

static void on_recompile(void *ctx, const StoreRecompileRow *r)
{
    (void)ctx;
    last_compile_row = r->compile_row;
    got_line("[%s] %s %lld ns: %s", r->compile_id, r->outcome, r->duration_ns, r->reason);
}

static void on_compile_failure(void *ctx, const StoreCompileFailureRow *r)
{
    (void)ctx;
    got_line("entry [%s] %s %s observed %s", r->entry_compile_id, r->kind, r->expr, r->observed);
}

static void on_limit(void *ctx, const StoreLimitRow *r)
{
    (void)ctx;
    got_line("limit epoch %lld frame %lld: %s", r->epoch, r->frame_id, r->reason);
}

static void on_skip(void *ctx, const StoreSkipRow *r)
{
    (void)ctx;
    got_line("skip %d: %s", r->resume_offset, r->reason);
}

static void on_log(void *ctx, const StoreRecompileLogRow *r)
{
    (void)ctx;
    got_line("%s [%s] failures %lld first %d %s %s observed %s", r->name, r->compile_id,
             r->failures, r->has_failure, r->kind, r->expr, r->observed);
}

/* Guard provenance and the nearest entry (schema v4): "@ file:line". */
static void on_guard_source(void *ctx, const StoreGuardRow *r)
{
    (void)ctx;
    got_line("%s @ %s:%d", r->expr, r->filename, r->lineno);
}

static void on_guard_count_source(void *ctx, const StoreGuardCountRow *r)
{
    (void)ctx;
    got_line("%lld x %s @ %s:%d", r->n, r->expr, r->filename, r->lineno);
}

static void on_compile_failure_source(void *ctx, const StoreCompileFailureRow *r)
{
    (void)ctx;
    got_line("entry [%s] %s @ %s:%d", r->entry_compile_id, r->expr, r->filename, r->lineno);
}

static void on_diff(void *ctx, const StoreRecompileDiffRow *r)
{
    (void)ctx;
    got_line("nearest [%s] failing %lld capture %lld: %d %s %s observed %s @ %s:%d %s",
             r->entry_compile_id, r->failing, r->capture_ns, r->idx, r->kind, r->expr,
             r->observed, r->filename, r->lineno, r->source);
}

static void on_log_nearest(void *ctx, const StoreRecompileLogRow *r)
{
    (void)ctx;
    got_line("%s [%s] nearest %d [%s] failing %lld @ %s:%d", r->name, r->compile_id,
             r->has_nearest, r->nearest_entry, r->nearest_failing, r->nearest_filename,
             r->nearest_lineno);
}

/* The read model's incremental reads: watermarks, rows past them, counts. */
static void check_incremental_reads(StoreReader *r, long long run_id)
{
    static const long long marks[STORE_TABLE__COUNT] = {2, 2, 1, 1, 1, 1, 2, 3};
    for (int t = 0; t < STORE_TABLE__COUNT; t++) {
        long long mark = -1;
        CHECK_EQ(store_read_mark(r, (StoreTable)t, &mark), 0);
        CHECK_EQ(mark, marks[t]);
    }
    got_reset();
    CHECK_EQ(store_read_runs(r, on_run, NULL), 0);
    CHECK_STR(got, "run 1 ended 1 resets 0 dropped 0 argv "
                   "[\"prog.py\",\"--flag\",\"it's \\\"quoted\\\"\"]\n");
    got_reset();
    CHECK_EQ(store_read_new_code_objects(r, run_id, 1, on_code, NULL), 0);
    CHECK_STR(got, "code 8 g /src/model.py:10\n");
    got_reset();
    CHECK_EQ(store_read_new_compiles(r, 0, 0, on_compile, NULL), 0);
    CHECK_STR(got, "compile 1 code 7 fc 0 ended 1 5000\ncompile 2 code 7 fc 1 ended 1 7000\n");
    bool ended = false;
    long long ns = 0, graphs = -1;
    CHECK_EQ(store_read_compile_end(r, 2, &ended, &ns, &graphs), 0);
    CHECK(ended && ns == 7000 && graphs >= 0);
    CHECK_EQ(store_read_compile_end(r, 99, &ended, &ns, NULL), 0);
    CHECK(!ended && ns == 0);
    got_reset();                                 /* what dynscope/ranks.py compares */
    CHECK_EQ(store_read_new_texts(r, STORE_GRAPH_BREAKS, run_id, 0, on_text, NULL), 0);
    CHECK_EQ(store_read_new_texts(r, STORE_GUARD_FAILURES, 0, 0, on_text, NULL), 0);
    CHECK_EQ(store_read_new_texts(r, STORE_GUARD_FAILURES, run_id, 1, on_text, NULL), 0);
    CHECK_STR(got, "code 7 call: call to print\ncode 7 L['x'].shape == (3, 4)\n");
    CHECK_EQ(store_read_new_texts(r, STORE_COMPILES, 0, 0, on_text, NULL), -1);
    got_reset();                                 /* every row, through the index */
    CHECK_EQ(store_read_counts(r, STORE_GRAPHS, run_id, 0, on_count, NULL), 0);
    CHECK_EQ(store_read_counts(r, STORE_GRAPH_BREAKS, 0, 0, on_count, NULL), 0);
    CHECK_STR(got, "code 7 n 1 epoch 0\ncode 7 n 1 epoch 0\n");
    got_reset();                                 /* nothing past the watermark */
    CHECK_EQ(store_read_counts(r, STORE_GRAPH_BREAKS, run_id, 1, on_count, NULL), 0);
    CHECK_STR(got, "");
    got_reset();
    CHECK_EQ(store_read_counts(r, STORE_CACHE_LIMITS, run_id, 0, on_count, NULL), 0);
    CHECK_EQ(store_read_counts(r, STORE_CACHE_LIMITS, run_id + 1, 0, on_count, NULL), 0);
    CHECK_STR(got, "code 7 n 1 epoch 0\n");
    CHECK_EQ(store_read_counts(r, STORE_COMPILES, 0, 0, on_count, NULL), -1);
    CHECK(strstr(store_reader_errmsg(r), "not counted per code object") != NULL);
    long long n = -1;
    CHECK_EQ(store_read_failure_count(r, 0, &n), 0);
    CHECK_EQ(n, 1);
    CHECK_EQ(store_read_failure_count(r, run_id + 1, &n), 0);
    CHECK_EQ(n, 0);
    got_reset();
    CHECK_EQ(store_read_last_failures(r, run_id, on_failure, NULL), 0);
    CHECK_EQ(store_read_new_failures(r, 0, 0, on_failure, NULL), 0);
    CHECK_EQ(store_read_new_failures(r, 0, 1, on_failure, NULL), 0);
    CHECK_STR(got, "failure 1 code 7 L['x'].shape == (3, 4) observed (5, 4)\n"
                   "failure 1 code 7 L['x'].shape == (3, 4) observed (5, 4)\n");
    got_reset();
    CHECK_EQ(store_read_new_entries(r, run_id, 0, on_entry, NULL), 0);
    CHECK_EQ(store_read_new_entry_stats(r, run_id, 2, on_entry, NULL), 0);
    CHECK_STR(got, "entry code 7 epoch 0 [0/0] frame 0 hits 25\n"
                   "entry code 7 epoch 0 [0/1] frame 0 hits 3\n"
                   "entry code 7 epoch 0 [0/0] frame 0 hits 25\n");
}

/* The read model's reads of one code object and of the whole run. */
static void check_code_and_list_reads(StoreReader *r, long long run_id)
{
    got_reset();
    CHECK_EQ(store_read_code_entries(r, run_id, 7, 0, on_code_entry, NULL), 0);
    CHECK_STR(got, "[0/0] hits 25 guard_ns 260 guards 2 in_frame 2 snap 1\n"
                   "[0/1] hits 3 guard_ns 30 guards 1 in_frame 2 snap 1\n");
    got_reset();
    CHECK_EQ(store_read_entry_guards(r, run_id, 7, 0, "0/0", on_guard, NULL), 0);
    CHECK_STR(got, "TENSOR_MATCH|L['x'].shape == (3, 4)\n|G['np'] is <module>\n");
    got_reset();
    CHECK_EQ(store_read_top_failing_guards(r, run_id, 7, 5, on_guard_count, NULL), 0);
    CHECK_STR(got, "1 x TENSOR_MATCH L['x'].shape == (3, 4) last (5, 4)\n");
    got_reset();
    CHECK_EQ(store_read_code_break_sites(r, run_id, 7, on_site, NULL), 0);
    CHECK_EQ(store_read_break_stack(r, last_break, on_frame, NULL), 0);
    CHECK_STR(got, "1 x call call to print /src/model.py:12 codes 0 fns \n"
                   "/src/model.py:12 in f: print(x)\n");
    got_reset();
    CHECK_EQ(store_read_code_recompiles(r, run_id, 7, 10, on_recompile, NULL), 0);
    CHECK_EQ(store_read_compile_failures(r, last_compile_row, 10, on_compile_failure, NULL), 0);
    CHECK_STR(got, "[0/1] ok 7000 ns: L['x'].shape == (3, 4) (observed (5, 4))\n"
                   "entry [0/0] TENSOR_MATCH L['x'].shape == (3, 4) observed (5, 4)\n");
    got_reset();
    CHECK_EQ(store_read_code_cache_limits(r, run_id, 7, 10, on_limit, NULL), 0);
    CHECK_EQ(store_read_code_skips(r, run_id, 8, 10, on_skip, NULL), 0);
    CHECK_STR(got, "limit epoch 0 frame 0: cache_size_limit (8) reached\n"
                   "skip 0: try/except in the frame\n");
    for (long long run = 0; run <= run_id + 1; run += run_id) {   /* every run, ours, none */
        got_reset();
        CHECK_EQ(store_read_break_sites(r, run, 100, on_site, NULL), 0);
        CHECK_EQ(store_read_recompile_log(r, run, 100, on_log, NULL), 0);
        CHECK_STR(got, run > run_id ? "" :
                  "1 x call call to print /src/model.py:12 codes 1 fns f\n"
                  "f [0/1] failures 1 first 1 TENSOR_MATCH L['x'].shape == (3, 4) observed (5, 4)\n");
    }
    got_reset();                                 /* the break registry's types (v4) */
    CHECK_EQ(store_read_break_sites(r, run_id, 100, on_typed_site, NULL), 0);
    CHECK_EQ(store_read_code_break_sites(r, run_id, 7, on_typed_site, NULL), 0);
    CHECK_EQ(store_read_skip_sites(r, 0, 100, on_typed_site, NULL), 0);
    CHECK_EQ(store_read_skip_sites(r, run_id, 100, on_typed_site, NULL), 0);
    CHECK_EQ(store_read_skip_sites(r, run_id + 1, 100, on_typed_site, NULL), 0);
    CHECK_EQ(store_read_code_skips(r, run_id, 8, 10, on_typed_skip, NULL), 0);
    CHECK_STR(got, "[DS0001|your code] 1 x call|call to print /src/model.py:12 codes 1 fns f"
                   " last 1 code 7\n"
                   "[DS0001|your code] 1 x call|call to print /src/model.py:12 codes 0 fns "
                   " last 1 code 7\n"
                   "[DS0014|engine limit] 1 x |try/except in the frame /src/model.py:10 codes 1"
                   " fns g last 0 code 8\n"
                   "[DS0014|engine limit] 1 x |try/except in the frame /src/model.py:10 codes 1"
                   " fns g last 0 code 8\n"
                   "skip 0: try/except in the frame [DS0014|engine limit]\n");
    got_reset();                                 /* what schema v4 added */
    CHECK_EQ(store_read_entry_guards(r, run_id, 7, 0, "0/1", on_guard_source, NULL), 0);
    CHECK_EQ(store_read_entry_guards(r, run_id, 7, 0, "0/0", on_guard_source, NULL), 0);
    CHECK_EQ(store_read_top_failing_guards(r, run_id, 7, 5, on_guard_count_source, NULL), 0);
    CHECK_EQ(store_read_compile_failures(r, last_compile_row, 10, on_compile_failure_source,
                                         NULL), 0);
    CHECK_EQ(store_read_recompile_diff(r, last_compile_row, 10, on_diff, NULL), 0);
    CHECK_EQ(store_read_recompile_diff(r, last_compile_row - 1, 10, on_diff, NULL), 0);
    CHECK_EQ(store_read_recompile_log(r, run_id, 100, on_log_nearest, NULL), 0);
    CHECK_STR(got, "L['x'].shape == (5, 4) @ /src/model.py:11\n"
                   "L['x'].shape == (3, 4) @ :0\n"
                   "G['np'] is <module> @ :0\n"
                   "1 x L['x'].shape == (3, 4) @ /src/model.py:11\n"
                   "entry [0/0] L['x'].shape == (3, 4) @ /src/model.py:11\n"
                   "nearest [0/0] failing 1 capture 6000: 0 TENSOR_MATCH L['x'].shape == (3, 4)"
                   " observed (5, 4) @ /src/model.py:11 y = x\n"
                   "f [0/1] nearest 1 [0/0] failing 1 @ /src/model.py:11\n");
}

static void test_read_model_reads_what_was_written(void)
{
    const char *path = db_path("read-model.db");
    StoreOptions o = test_options(NULL);
    Store *s = store_open(path, &o, NULL);
    CHECK(s != NULL);
    if (s == NULL)
        return;
    submit_story(s);
    long long run_id = store_stats(s).run_id;
    store_close(s);
    char *err = NULL;
    StoreReader *r = store_reader_open(path, &err);
    CHECK(r != NULL);
    if (r == NULL) {
        fprintf(stderr, "  %s\n", err);
        free(err);
        return;
    }
    CHECK_EQ(store_reader_version(r), STORE_SCHEMA_VERSION);
    CHECK_STR(store_reader_errmsg(r), "");
    CHECK_EQ(store_read_begin(r), 0);          /* one snapshot around many reads */
    check_incremental_reads(r, run_id);
    check_code_and_list_reads(r, run_id);
    store_read_end(r);
    store_reader_close(r);
}

/* A file of schema v2 (the tables of v3, without its views): a reader reads
   it as it is, the views of v3 made TEMP views of its connection, and the
   file stays v2, byte for byte. */
static void test_reader_reads_a_v2_file_without_writing_it(void)
{
    const char *path = db_path("v2.db");
    sqlite3 *db;
    CHECK_EQ(sqlite3_open(path, &db), SQLITE_OK);
    exec_or_die(db, "BEGIN");
    exec_or_die(db, store_schema_migration_sql(1));
    exec_or_die(db, store_schema_migration_sql(2));
    char sql[128];
    snprintf(sql, sizeof sql, "PRAGMA application_id = %d; PRAGMA user_version = 2",
             STORE_APPLICATION_ID);
    exec_or_die(db, sql);
    exec_or_die(db,
        "INSERT INTO runs (run_id, pid, started_at, dropped_events) VALUES (1, 42, 100, 3);"
        "INSERT INTO code_objects VALUES (1, 5, '/v2.py', 'v2_fn', 3);"
        "INSERT INTO compiles (run_id, code_id, compile_id, frame_id, frame_compile_id)"
        "  VALUES (1, 5, '0/0', 0, 0), (1, 5, '0/1', 0, 1);"
        "INSERT INTO graph_breaks (run_id, code_id, kind, reason, filename, lineno, at)"
        "  VALUES (1, 5, 'call', 'print', '/v2.py', 4, 7), (1, 5, 'call', 'print', '/v2.py', 4, 9);"
        "INSERT INTO cache_limits (run_id, code_id, frame_id, reason, at)"
        "  VALUES (1, 5, 0, 'L[''n''] == 1 (observed 2)', 8);"
        "INSERT INTO frame_skips (run_id, code_id, resume_offset, reason, at)"
        "  VALUES (1, 5, 0, 'code inside a try/with block', 10);"
        "COMMIT");
    sqlite3_close(db);
    struct stat before, after;
    CHECK_EQ(stat(path, &before), 0);

    char *err = NULL;
    StoreReader *r = store_reader_open(path, &err);
    CHECK(r != NULL);
    if (r == NULL) {
        fprintf(stderr, "  %s\n", err);
        free(err);
        return;
    }
    CHECK_EQ(store_reader_version(r), 2);
    StoreSummary sum;
    CHECK_EQ(store_read_summary(r, 0, &sum, NULL), 0);     /* view run_summary (v3) */
    CHECK_EQ(sum.runs, 1);
    CHECK_EQ(sum.compiles, 2);
    CHECK_EQ(sum.recompiles, 1);
    CHECK_EQ(sum.graph_breaks, 2);
    CHECK_EQ(sum.dropped_events, 3);
    sqlite3 *rdb = store_reader_db(r);
    CHECK_STR(qs(rdb, "SELECT kind || ' ' || count || ' ' || runs FROM break_sites"), "call 2 1");
    CHECK_STR(qs(rdb, "SELECT name || ': ' || reason FROM cache_limit_hits"),
              "v2_fn: L['n'] == 1 (observed 2)");
    CHECK_EQ(q1(rdb, "SELECT count(*) FROM temp.sqlite_schema WHERE type = 'view'"), 4);
    /* v6's break_costs over a v2 file: the sites, without costs */
    CHECK_STR(qs(rdb, "SELECT kind || ' ' || breaks || ' ' || coalesce(cost_ns, 'none')"
                      " FROM break_costs ORDER BY breaks DESC LIMIT 1"), "call 2 none");
    /* what v4 added (guard provenance, recompile_diffs) reads as unknown:
       the reader does not name it */
    got_reset();
    CHECK_EQ(store_read_entry_guards(r, 1, 5, 0, "0/0", on_guard_source, NULL), 0);
    CHECK_EQ(store_read_top_failing_guards(r, 1, 5, 5, on_guard_count_source, NULL), 0);
    CHECK_EQ(store_read_compile_failures(r, 2, 10, on_compile_failure_source, NULL), 0);
    CHECK_EQ(store_read_recompile_diff(r, 2, 10, on_diff, NULL), 0);
    CHECK_EQ(store_read_recompile_log(r, 0, 100, on_log_nearest, NULL), 0);
    CHECK_STR(got, "v2_fn [0/1] nearest 0 [] failing 0 @ :0\n");
    got_reset();                                 /* no costs (v6): unknown */
    CHECK_EQ(store_read_break_sites(r, 0, 100, on_cost_site, NULL), 0);
    CHECK_EQ(store_read_code_break_sites(r, 1, 5, on_cost_site, NULL), 0);
    CHECK_STR(got, "2 x /v2.py:4 v2_fn cost -\n2 x /v2.py:4  cost -\n");
    got_reset();                                 /* no break types: '', and no skip sites */
    CHECK_EQ(store_read_break_sites(r, 0, 100, on_typed_site, NULL), 0);
    CHECK_EQ(store_read_code_break_sites(r, 1, 5, on_typed_site, NULL), 0);
    CHECK_EQ(store_read_skip_sites(r, 0, 100, on_typed_site, NULL), 0);
    CHECK_EQ(store_read_code_skips(r, 1, 5, 10, on_typed_skip, NULL), 0);
    CHECK_STR(got, "[|] 2 x call|print /v2.py:4 codes 1 fns v2_fn last 2 code 5\n"
                   "[|] 2 x call|print /v2.py:4 codes 0 fns  last 2 code 5\n"
                   "skip 0: code inside a try/with block [|]\n");
    CHECK_STR(store_reader_errmsg(r), "");
    store_reader_close(r);

    CHECK_EQ(stat(path, &after), 0);
    CHECK_EQ(after.st_size, before.st_size);
    CHECK_EQ(after.st_mtime, before.st_mtime);
    db = ro(path);
    CHECK_EQ(q1(db, "PRAGMA user_version"), 2);
    CHECK_EQ(q1(db, "SELECT count(*) FROM sqlite_schema WHERE name IN"
                    " ('run_summary', 'break_sites', 'cache_limit_hits')"), 0);
    sqlite3_close(db);
}

/* A v6 file whose break sites have costs (cache_entries' cost_samples,
   run_ns, break_ns, break_graphs, summed by the view break_costs): the
   sites come costliest first, a site with fewer breaks before one with
   more, and the sites whose calls were never timed last, most frequent
   first, their cost unknown. */
static void test_break_sites_come_costliest_first(void)
{
    const char *path = db_path("costs.db");
    sqlite3 *db;
    CHECK_EQ(sqlite3_open(path, &db), SQLITE_OK);
    exec_or_die(db, "BEGIN");
    for (int v = 1; v <= 6; v++)
        exec_or_die(db, store_schema_migration_sql(v));
    char sql[128];
    snprintf(sql, sizeof sql, "PRAGMA application_id = %d; PRAGMA user_version = 6",
             STORE_APPLICATION_ID);
    exec_or_die(db, sql);
    /* run 1: often breaks 3 times at line 3 (a compile each), 0.5 ms each
       of 5 ms calls, and once at line 5 (its resume frame), 2 ms; rare
       once, 12.3 ms of 30 ms; quiet twice at line 20 and once at 22, never
       timed.  run 2: often once more at line 3, 0.9 ms of 1 ms. */
    exec_or_die(db,
        "INSERT INTO runs (run_id, pid, started_at) VALUES (1, 42, 100), (2, 43, 200);"
        "INSERT INTO code_objects VALUES (1, 1, '/c.py', 'often', 1), (1, 2, '/c.py', 'rare', 10),"
        "  (1, 3, '/c.py', 'quiet', 18), (2, 1, '/c.py', 'often', 1);"
        "INSERT INTO graph_breaks (run_id, code_id, compile_id, kind, reason, filename, lineno,"
        "  break_type, break_class, at) VALUES"
        "  (1, 1, '0/0', 'call', 'print', '/c.py', 3, 'DS0001', 'your code', 1),"
        "  (1, 1, '0/1', 'call', 'print', '/c.py', 3, 'DS0001', 'your code', 2),"
        "  (1, 1, '0/2', 'call', 'print', '/c.py', 3, 'DS0001', 'your code', 3),"
        "  (1, 1, '1/0', 'call', 'print', '/c.py', 5, 'DS0001', 'your code', 3),"
        "  (1, 2, '2/0', 'call', 'print', '/c.py', 12, 'DS0001', 'your code', 4),"
        "  (1, 3, '3/0', 'call', 'print', '/c.py', 20, 'DS0001', 'your code', 5),"
        "  (1, 3, '3/1', 'call', 'print', '/c.py', 20, 'DS0001', 'your code', 6),"
        "  (1, 3, '4/0', 'call', 'print', '/c.py', 22, 'DS0001', 'your code', 7),"
        "  (2, 1, '0/0', 'call', 'print', '/c.py', 3, 'DS0001', 'your code', 8);"
        "INSERT INTO cache_entries (run_id, code_id, compile_id, frame_id, hits, cost_samples,"
        "  run_ns, break_ns, break_graphs) VALUES"
        "  (1, 1, '0/0', 0, 10, 2, 5000000, 500000, 1), (1, 1, '0/1', 0, 10, 2, 5000000, 500000, 1),"
        "  (1, 1, '0/2', 0, 10, 2, 5000000, 500000, 1), (1, 1, '1/0', 1, 30, 6, 0, 2000000, 1),"
        "  (1, 2, '2/0', 2, 4, 4, 30000000, 12300000, 4), (1, 3, '3/0', 3, 9, 0, 0, 0, 0),"
        "  (1, 3, '3/1', 3, 9, NULL, NULL, NULL, NULL), (1, 3, '4/0', 4, 9, 0, 0, 0, 0),"
        "  (2, 1, '0/0', 0, 5, 1, 1000000, 900000, 1);"
        "COMMIT");
    sqlite3_close(db);

    char *err = NULL;
    StoreReader *r = store_reader_open(path, &err);
    CHECK(r != NULL);
    if (r == NULL) {
        fprintf(stderr, "  %s\n", err);
        free(err);
        return;
    }
    got_reset();
    CHECK_EQ(store_read_break_sites(r, 1, 100, on_cost_site, NULL), 0);
    CHECK_STR(got, "1 x /c.py:12 rare cost 12300000 ns of 30000000 (0.41) graphs 4 samples 4\n"
                   "1 x /c.py:5 often cost 2000000 ns of 15000000 (0.13) graphs 1 samples 6\n"
                   "3 x /c.py:3 often cost 1500000 ns of 15000000 (0.10) graphs 3 samples 6\n"
                   "2 x /c.py:20 quiet cost -\n"
                   "1 x /c.py:22 quiet cost -\n");
    got_reset();                                 /* every run: summed over both */
    CHECK_EQ(store_read_break_sites(r, 0, 100, on_cost_site, NULL), 0);
    CHECK_STR(got, "1 x /c.py:12 rare cost 12300000 ns of 30000000 (0.41) graphs 4 samples 4\n"
                   "4 x /c.py:3 often cost 2400000 ns of 16000000 (0.15) graphs 4 samples 7\n"
                   "1 x /c.py:5 often cost 2000000 ns of 15000000 (0.13) graphs 1 samples 6\n"
                   "2 x /c.py:20 quiet cost -\n"
                   "1 x /c.py:22 quiet cost -\n");
    got_reset();                                 /* the limit keeps the costliest */
    CHECK_EQ(store_read_break_sites(r, 1, 1, on_cost_site, NULL), 0);
    CHECK_EQ(store_read_break_sites(r, 2, 100, on_cost_site, NULL), 0);
    CHECK_STR(got, "1 x /c.py:12 rare cost 12300000 ns of 30000000 (0.41) graphs 4 samples 4\n"
                   "1 x /c.py:3 often cost 900000 ns of 1000000 (0.90) graphs 1 samples 1\n");
    got_reset();                                 /* one code object */
    CHECK_EQ(store_read_code_break_sites(r, 1, 1, on_cost_site, NULL), 0);
    CHECK_EQ(store_read_code_break_sites(r, 1, 3, on_cost_site, NULL), 0);
    CHECK_STR(got, "1 x /c.py:5  cost 2000000 ns of 15000000 (0.13) graphs 1 samples 6\n"
                   "3 x /c.py:3  cost 1500000 ns of 15000000 (0.10) graphs 3 samples 6\n"
                   "2 x /c.py:20  cost -\n"
                   "1 x /c.py:22  cost -\n");
    CHECK_STR(store_reader_errmsg(r), "");
    store_reader_close(r);

    /* the functions' time unknown (no run_ns): the cost, its share unknown */
    CHECK_EQ(sqlite3_open(path, &db), SQLITE_OK);
    exec_or_die(db, "UPDATE cache_entries SET run_ns = NULL WHERE code_id = 2");
    sqlite3_close(db);
    r = store_reader_open(path, NULL);
    CHECK(r != NULL);
    if (r == NULL)
        return;
    got_reset();
    CHECK_EQ(store_read_code_break_sites(r, 1, 2, on_cost_site, NULL), 0);
    CHECK_STR(got, "1 x /c.py:12  cost 12300000 ns of 0 (-1.00) graphs 4 samples 4\n");
    store_reader_close(r);
}

static void test_file_is_created_private_0600(void)
{
    const char *path = db_path("private.db");
    char wal[600];
    snprintf(wal, sizeof wal, "%s-wal", path);
    mode_t old = umask(022);
    Store *s = store_open(path, NULL, NULL);
    umask(old);
    CHECK(s != NULL);
    EventRecord e = ev_make(EV_FRAME_SKIP, 1, "");
    store_submit(s, &e);
    struct stat st;
    CHECK_EQ(stat(path, &st), 0);
    CHECK_EQ(st.st_mode & 0777, 0600);
    CHECK_EQ(stat(wal, &st), 0);   /* WAL open while the store is */
    CHECK_EQ(st.st_mode & 0777, 0600);
    store_close(s);
    CHECK_EQ(stat(path, &st), 0);
    CHECK_EQ(st.st_mode & 0777, 0600);
}

static void test_queue_overflow_drops_and_counts(void)
{
    const char *path = db_path("overflow.db");
    LogCapture cap;
    StoreOptions o = test_options(&cap);
    o.queue_capacity = 64;
    Store *s = store_open(path, &o, NULL);
    CHECK(s != NULL);
    store_pause(s);   /* the writer takes nothing until resumed */
    int accepted = 0, dropped = 0;
    for (int i = 0; i < 200; i++) {
        EventRecord e = ev_make(EV_FRAME_SKIP, i, "");
        if (store_submit(s, &e) == 0)
            accepted++;
        else
            dropped++;
    }
    CHECK_EQ(accepted, 64);
    CHECK_EQ(dropped, 136);
    StoreStats st = store_stats(s);
    CHECK_EQ(st.submitted, 200);
    CHECK_EQ(st.dropped_queue, 136);
    CHECK_EQ(st.pending, 64);
    store_resume(s);
    long long run_id = st.run_id;
    st = store_close(s);
    CHECK_EQ(st.submitted, 200);
    CHECK_EQ(st.written, 64);
    CHECK_EQ(st.dropped, 136);
    CHECK_EQ(st.pending, 0);
    CHECK_EQ(log_count(&cap, "event queue is full"), 1);
    CHECK_EQ(cap.n, 1);

    sqlite3 *db = ro(path);
    CHECK_EQ(q1(db, "SELECT dropped_events FROM runs WHERE run_id = %lld", run_id), 136);
    CHECK_EQ(q1(db, "SELECT written_events FROM runs WHERE run_id = %lld", run_id), 64);
    CHECK_EQ(q1(db, "SELECT count(*) FROM frame_skips"), 64);
    CHECK_EQ(q1(db, "SELECT max(code_id) FROM frame_skips"), 63);   /* the first 64 kept */
    sqlite3_close(db);
}

static void test_queue_byte_bound_drops_and_counts(void)
{
    const char *path = db_path("bytes.db");
    LogCapture cap;
    StoreOptions o = test_options(&cap);
    o.queue_max_bytes = 64 * 1024;
    Store *s = store_open(path, &o, NULL);
    CHECK(s != NULL);
    static char big[20000];
    memset(big, 'x', sizeof big - 1);
    store_pause(s);
    int accepted = 0;
    for (int i = 0; i < 10; i++) {
        EventRecord e = ev_make(EV_GRAPH_COMPILED, 1, "0/0");
        e.graph_code = big;
        accepted += store_submit(s, &e) == 0;
    }
    CHECK_EQ(accepted, 3);   /* 3 x ~20 KB fit in 64 KB, the 4th does not */
    CHECK_EQ(store_stats(s).dropped_queue, 7);
    store_resume(s);
    store_close(s);
    CHECK_EQ(log_count(&cap, "event queue is full"), 1);
}

/* A locked database: every batch waits its busy timeout, then is dropped
   and counted; one message.  (That the producer never waits meanwhile:
   test_producer_never_waits_for_a_writer_blocked_on_a_lock.) */
static void test_locked_database_drops_and_counts(void)
{
    const char *path = db_path("locked.db");
    LogCapture cap;
    StoreOptions o = test_options(&cap);
    o.busy_timeout_ms = 100;
    Store *s = store_open(path, &o, NULL);
    CHECK(s != NULL);
    sqlite3 *other;
    CHECK_EQ(sqlite3_open(path, &other), SQLITE_OK);
    exec_or_die(other, "BEGIN EXCLUSIVE");

    for (int wave = 0; wave < 2; wave++) {
        for (int i = 0; i < 500; i++) {
            EventRecord e = ev_make(EV_GUARD_FAIL, i, "");
            e.expr = "L['x'] == 1";
            CHECK_EQ(store_submit(s, &e), 0);
        }
        CHECK(wait_for(s, dropped_write_at_least, 500 * (wave + 1), 30000));
    }
    StoreStats st = store_stats(s);
    CHECK_EQ(st.dropped_write, 1000);
    CHECK_EQ(st.written, 0);
    CHECK(st.errors >= 2);
    CHECK_EQ(log_count(&cap, "locked by another connection"), 1);
    CHECK_EQ(cap.n, 1);

    exec_or_die(other, "COMMIT");
    for (int i = 0; i < 50; i++) {
        EventRecord e = ev_make(EV_GUARD_FAIL, i, "");
        CHECK_EQ(store_submit(s, &e), 0);
    }
    long long run_id = st.run_id;
    st = store_close(s);
    sqlite3_close(other);
    CHECK_EQ(cap.n, 1);
    CHECK_EQ(st.submitted, 1050);
    CHECK_EQ(st.written, 50);
    CHECK_EQ(st.dropped, 1000);

    sqlite3 *db = ro(path);
    CHECK_EQ(q1(db, "SELECT count(*) FROM guard_failures"), 50);
    CHECK_EQ(q1(db, "SELECT dropped_events FROM runs WHERE run_id = %lld", run_id), 1000);
    CHECK_EQ(q1(db, "SELECT written_events FROM runs WHERE run_id = %lld", run_id), 50);
    CHECK_EQ(q1(db, "SELECT ended_at IS NOT NULL FROM runs WHERE run_id = %lld", run_id), 1);
    sqlite3_close(db);
}

static int writer_took_all(StoreStats *st, long long n)
{
    return st->pending == 0 && (long long)st->submitted >= n;
}

/*
 * The producer never waits for the writer.  The writer is made to sit in a
 * transaction that cannot end before the test lets it: it took the first
 * event from the queue (nothing pending, nothing written or dropped) and
 * waits for a lock another connection holds, with a busy timeout far past
 * anything the test does.  1000 submits then all return, and the writer is
 * still in that transaction afterwards (still nothing written or dropped):
 * had any submit waited for the writer, it could only have returned once the
 * busy timeout ended the transaction by dropping its batch.  No clock
 * decides the outcome; BUSY_MS is how long a broken build hangs before it
 * fails, and wait_for's limit how long a writer that never starts does.
 */
static void test_producer_never_waits_for_a_writer_blocked_on_a_lock(void)
{
    enum { BUSY_MS = 30000, SUBMITS = 1000 };
    const char *path = db_path("blocked.db");
    LogCapture cap;
    StoreOptions o = test_options(&cap);
    o.busy_timeout_ms = BUSY_MS;
    Store *s = store_open(path, &o, NULL);
    CHECK(s != NULL);
    sqlite3 *other;
    CHECK_EQ(sqlite3_open(path, &other), SQLITE_OK);
    exec_or_die(other, "BEGIN EXCLUSIVE");

    EventRecord first = ev_make(EV_GUARD_FAIL, 0, "");
    CHECK_EQ(store_submit(s, &first), 0);
    CHECK(wait_for(s, writer_took_all, 1, 30000));   /* the writer is in write_batch */
    StoreStats st = store_stats(s);
    CHECK_EQ(st.written, 0);
    CHECK_EQ(st.dropped, 0);
    for (int i = 1; i <= SUBMITS; i++) {
        EventRecord e = ev_make(EV_GUARD_FAIL, i, "");
        e.expr = "L['x'] == 1";
        CHECK_EQ(store_submit(s, &e), 0);
    }
    st = store_stats(s);
    CHECK_EQ(st.submitted, SUBMITS + 1);
    CHECK_EQ(st.written, 0);      /* the writer's first transaction is still open: */
    CHECK_EQ(st.dropped, 0);      /* neither committed nor given up */

    exec_or_die(other, "COMMIT");
    sqlite3_close(other);
    st = store_close(s);
    CHECK_EQ(st.written, SUBMITS + 1);
    CHECK_EQ(st.dropped, 0);
    CHECK_EQ(cap.n, 0);
}

static void test_disk_full_is_logged_once_counted_and_soft(void)
{
    const char *path = db_path("full.db");
    LogCapture cap;
    StoreOptions o = test_options(&cap);
    o.max_db_bytes = 1;   /* PRAGMA max_page_count: no growth past today's size */
    Store *s = store_open(path, &o, NULL);
    CHECK(s != NULL);
    static char big[16000];
    memset(big, 'y', sizeof big - 1);
    int submitted = 0;
    for (int wave = 0; wave < 3; wave++) {
        for (int i = 0; i < 20; i++) {
            EventRecord e = ev_make(EV_GRAPH_COMPILED, 1, "0/0");
            e.graph_code = big;
            CHECK_EQ(store_submit(s, &e), 0);   /* a copy into the queue: never the */
            submitted++;                        /* writer's (failing) transaction */
        }
        CHECK(wait_for(s, dropped_write_at_least, 20 * (wave + 1), 30000));
    }
    StoreStats st = store_stats(s);
    CHECK(st.errors >= 3);
    CHECK_EQ(st.dropped_write, submitted);
    long long run_id = st.run_id;
    st = store_close(s);
    CHECK_EQ(st.submitted, st.written + st.dropped);
    CHECK_EQ(st.written, 0);
    CHECK_EQ(log_count(&cap, "size limit"), 1);
    CHECK_EQ(cap.n, 1);
    CHECK(strstr(cap.text, "database or disk is full") != NULL);

    sqlite3 *db = ro(path);
    CHECK_EQ(q1(db, "SELECT count(*) FROM graphs"), 0);
    CHECK_EQ(q1(db, "SELECT dropped_events FROM runs WHERE run_id = %lld", run_id), 60);
    CHECK_EQ(q1(db, "PRAGMA integrity_check = 1") == -2, 0);
    CHECK_STR(qs(db, "PRAGMA integrity_check"), "ok");
    sqlite3_close(db);
}

static void test_foreign_sqlite_file_is_refused_untouched(void)
{
    const char *path = db_path("foreign.db");
    sqlite3 *db;
    CHECK_EQ(sqlite3_open(path, &db), SQLITE_OK);
    exec_or_die(db, "CREATE TABLE people(name TEXT); INSERT INTO people VALUES('ada')");
    sqlite3_close(db);
    char *err = NULL;
    Store *s = store_open(path, NULL, &err);
    CHECK(s == NULL);
    CHECK(err != NULL && strstr(err, "not a dynscope one") != NULL);
    CHECK(err != NULL && strstr(err, path) != NULL);
    free(err);
    db = ro(path);
    CHECK_STR(qs(db, "PRAGMA journal_mode"), "delete");   /* not switched to WAL */
    CHECK_EQ(q1(db, "SELECT count(*) FROM sqlite_schema"), 1);
    sqlite3_close(db);

    err = NULL;
    CHECK(store_reader_open(path, &err) == NULL);
    CHECK(err != NULL && strstr(err, "not a dynscope one") != NULL);
    free(err);
}

static void test_garbage_file_is_refused(void)
{
    const char *path = db_path("garbage.db");
    FILE *f = fopen(path, "w");
    for (int i = 0; i < 200; i++)
        fputs("this is not a database at all\n", f);
    fclose(f);
    char *err = NULL;
    CHECK(store_open(path, NULL, &err) == NULL);
    CHECK(err != NULL && strstr(err, "not an SQLite database") != NULL);
    free(err);
}

static void test_newer_schema_is_refused(void)
{
    const char *path = db_path("newer.db");
    sqlite3 *db;
    CHECK_EQ(sqlite3_open(path, &db), SQLITE_OK);
    char sql[200];
    snprintf(sql, sizeof sql, "CREATE TABLE runs(x); PRAGMA application_id = %d;"
             " PRAGMA user_version = %d", STORE_APPLICATION_ID, STORE_SCHEMA_VERSION + 1);
    exec_or_die(db, sql);
    sqlite3_close(db);
    char *err = NULL;
    CHECK(store_open(path, NULL, &err) == NULL);
    CHECK(err != NULL && strstr(err, "newer dynscope") != NULL);
    snprintf(sql, sizeof sql, "schema v%d", STORE_SCHEMA_VERSION + 1);
    CHECK(err != NULL && strstr(err, sql) != NULL);
    free(err);
    err = NULL;
    CHECK(store_reader_open(path, &err) == NULL);
    CHECK(err != NULL && strstr(err, "newer dynscope") != NULL);
    free(err);
}

static void test_unwritable_paths_fail_with_a_message(void)
{
    char *err = NULL;
    CHECK(store_open("/nonexistent-dir-dynscope/x.db", NULL, &err) == NULL);
    CHECK(err != NULL && strstr(err, "cannot create") != NULL
          && strstr(err, "No such file or directory") != NULL);
    free(err);
    err = NULL;
    CHECK(store_open(tmpdir, NULL, &err) == NULL);
    CHECK(err != NULL && strstr(err, "not a regular file") != NULL);
    free(err);
    err = NULL;
    CHECK(store_open("", NULL, &err) == NULL);
    CHECK(err != NULL);
    free(err);
    CHECK_EQ(store_close(NULL).submitted, 0);   /* no-op */
    StoreStats st = store_stats(NULL);
    CHECK_EQ(st.submitted, 0);
}

static void test_migration_from_v1_keeps_data(void)
{
    const char *path = db_path("v1.db");
    sqlite3 *db;
    CHECK_EQ(sqlite3_open(path, &db), SQLITE_OK);
    exec_or_die(db, store_schema_migration_sql(1));
    char sql[128];
    snprintf(sql, sizeof sql, "PRAGMA application_id = %d; PRAGMA user_version = 1",
             STORE_APPLICATION_ID);
    exec_or_die(db, sql);
    exec_or_die(db,
        "INSERT INTO runs VALUES (1, 4242, '[\"old.py\"]', '3.11.0', 100, 200);"
        "INSERT INTO code_objects VALUES (1, 5, '/old.py', 'old_fn', 3);"
        "INSERT INTO compiles VALUES (1, 5, '0/0', 0, 0, 0, NULL, 110, 9, 'ok', 1, 2, 2);"
        "INSERT INTO compiles VALUES (1, 5, '0/1', 0, 1, 0, 'L[''n''] == 1 (observed 2)',"
        "  120, 9, 'ok', 1, 2, 1);"
        "INSERT INTO guard_failures VALUES (1, 5, '0/1', '0/0', 'EQUALS_MATCH',"
        "  'L[''n''] == 1', '2', 119);"
        "INSERT INTO graph_breaks VALUES (1, 5, '0/1', 'call', 'print', '/old.py', 4, 8,"
        "  '[[\"/old.py\", 4, \"old_fn\", \"print(n)\"]]', 121);"
        "INSERT INTO cache_entries VALUES (1, 5, '0/0', 0, 17,"
        "  'L[''n''] == 1' || char(10) || 'TYPE_MATCH' || char(9) || 'type(L[''n'']) is int');"
        "INSERT INTO cache_entries VALUES (1, 5, '0/1', 0, 4, 'L[''n''] == 2');");
    sqlite3_close(db);

    char *err = NULL;
    Store *s = store_open(path, NULL, &err);
    CHECK(s != NULL);
    if (s == NULL) {
        fprintf(stderr, "  %s\n", err);
        free(err);
        return;
    }
    CHECK_EQ(store_stats(s).run_id, 2);
    EventRecord e = ev_make(EV_COMPILE_START, 5, "0/0");
    store_submit(s, &e);
    store_close(s);

    db = ro(path);
    CHECK_EQ(q1(db, "PRAGMA user_version"), STORE_SCHEMA_VERSION);
    CHECK_EQ(q1(db, "SELECT count(*) FROM runs"), 2);
    CHECK_EQ(q1(db, "SELECT pid FROM runs WHERE run_id = 1"), 4242);
    CHECK_EQ(q1(db, "SELECT dropped_events FROM runs WHERE run_id = 1"), 0);
    CHECK_STR(qs(db, "SELECT name FROM code_objects WHERE run_id = 1"), "old_fn");
    CHECK_EQ(q1(db, "SELECT count(*) FROM compiles WHERE run_id = 1"), 2);
    CHECK_EQ(q1(db, "SELECT count(*) FROM compiles WHERE run_id = 2"), 1);
    CHECK_EQ(q1(db, "SELECT count(*) FROM recompile_history WHERE run_id = 1"), 1);
    CHECK_STR(qs(db, "SELECT guard_expr || ' / ' || observed || ' / ' || reason"
                     " FROM recompile_history WHERE run_id = 1"),
              "L['n'] == 1 / 2 / L['n'] == 1 (observed 2)");
    CHECK_STR(qs(db, "SELECT user_stack FROM graph_breaks"),
              "[[\"/old.py\",4,\"old_fn\",\"print(n)\"]]");
    CHECK_EQ(q1(db, "SELECT b.compile_row = c.compile_row FROM graph_breaks b, compiles c"
                    " WHERE c.run_id = 1 AND c.compile_id = '0/1'"), 1);
    CHECK_EQ(q1(db, "SELECT hits FROM cache_entries WHERE compile_id = '0/0'"), 17);
    CHECK_EQ(q1(db, "SELECT count(*) FROM cache_entries WHERE frame_id = 0"), 2);
    CHECK_EQ(q1(db, "SELECT count(*) FROM guards"), 3);
    CHECK_STR(qs(db, "SELECT kind || ': ' || expr FROM guards"
                     " WHERE compile_id = '0/0' AND idx = 1"), "TYPE_MATCH: type(L['n']) is int");
    CHECK_STR(qs(db, "SELECT coalesce(kind, '-') || ': ' || expr FROM guards"
                     " WHERE compile_id = '0/0' AND idx = 0"), "-: L['n'] == 1");
    CHECK_EQ(q1(db, "SELECT count(*) FROM frames WHERE run_id = 1"), 1);
    CHECK_EQ(q1(db, "SELECT count(*) FROM sqlite_schema WHERE name LIKE '%%_v1'"), 0);
    CHECK_STR(qs(db, "PRAGMA integrity_check"), "ok");
    CHECK_EQ(q1(db, "SELECT count(*) FROM pragma_foreign_key_check"), 0);

    /* Same layout as a file created fresh. */
    const char *fresh = db_path("fresh.db");
    Store *f = store_open(fresh, NULL, NULL);
    store_close(f);
    char attach[700];
    snprintf(attach, sizeof attach, "ATTACH 'file:%s?mode=ro' AS fresh", fresh);
    sqlite3_close(db);
    CHECK_EQ(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, NULL),
             SQLITE_OK);
    exec_or_die(db, attach);
    const char *layout =
        "SELECT group_concat(x, ';') FROM (SELECT s.type || ' ' || s.name || '(' ||"
        " (SELECT group_concat(name || ':' || type || ':' || pk, ',') FROM pragma_table_info(s.name, '%s'))"
        " || ')' AS x FROM %s.sqlite_schema AS s ORDER BY s.type, s.name)";
    static char a[16384], b[16384];   /* the whole layout: it grows with each version */
    snprintf(a, sizeof a, "%s", qs(db, layout, "main", "main"));
    snprintf(b, sizeof b, "%s", qs(db, layout, "fresh", "fresh"));
    CHECK_STR(a, b);
    CHECK(strstr(a, "view recompile_history") != NULL);
    CHECK(strstr(a, "view run_summary") != NULL);
    sqlite3_close(db);

    /* A reader refuses the v1 layout with a clear message. */
    const char *old = db_path("v1-only.db");
    CHECK_EQ(sqlite3_open(old, &db), SQLITE_OK);
    exec_or_die(db, store_schema_migration_sql(1));
    exec_or_die(db, sql);
    sqlite3_close(db);
    err = NULL;
    CHECK(store_reader_open(old, &err) == NULL);
    CHECK(err != NULL && strstr(err, "older schema v1") != NULL);
    free(err);
}

typedef struct Producer {
    Store *s;
    int thread;
    int n;
    int failed;
} Producer;

static void *produce(void *arg)
{
    Producer *p = arg;
    char expr[64];
    for (int i = 0; i < p->n; i++) {
        EventRecord e = ev_make(EV_GUARD_FAIL, 1000 + p->thread, "");
        snprintf(expr, sizeof expr, "t%d e%d", p->thread, i);
        e.expr = expr;
        e.guard_kind = "ID_MATCH";
        if (store_submit(p->s, &e) != 0)
            p->failed++;
    }
    return NULL;
}

static void test_four_producer_threads_exact_counts(void)
{
    enum { THREADS = 4, N = 25000 };
    const char *path = db_path("threads.db");
    StoreOptions o = test_options(NULL);
    o.queue_capacity = THREADS * N;   /* room for all: no drops allowed here */
    Store *s = store_open(path, &o, NULL);
    CHECK(s != NULL);
    pthread_t t[THREADS];
    Producer p[THREADS];
    for (int i = 0; i < THREADS; i++) {
        p[i] = (Producer){s, i, N, 0};
        pthread_create(&t[i], NULL, produce, &p[i]);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        CHECK_EQ(p[i].failed, 0);
    }
    store_close(s);
    sqlite3 *db = ro(path);
    CHECK_EQ(q1(db, "SELECT count(*) FROM guard_failures"), THREADS * N);
    for (int i = 0; i < THREADS; i++) {
        CHECK_EQ(q1(db, "SELECT count(*) FROM guard_failures WHERE code_id = %d", 1000 + i), N);
        CHECK_EQ(q1(db, "SELECT count(DISTINCT expr) FROM guard_failures WHERE code_id = %d",
                    1000 + i), N);
    }
    /* Per producer, submission order is kept. */
    CHECK_EQ(q1(db, "SELECT count(*) FROM (SELECT failure_id, code_id,"
                    " CAST(substr(expr, instr(expr, 'e') + 1) AS INTEGER) AS i,"
                    " lag(CAST(substr(expr, instr(expr, 'e') + 1) AS INTEGER))"
                    "   OVER (PARTITION BY code_id ORDER BY failure_id) AS prev"
                    " FROM guard_failures) WHERE prev IS NOT NULL AND i != prev + 1"), 0);
    CHECK_EQ(q1(db, "SELECT written_events FROM runs"), THREADS * N);
    CHECK_EQ(q1(db, "SELECT dropped_events FROM runs"), 0);
    CHECK_EQ(q1(db, "SELECT count(*) FROM code_objects"), THREADS);
    sqlite3_close(db);
}

/* Child: open a Store on path, write n guard failures, close; exit status 0
   if all went in. */
static int child_writes(const char *path, int n, int wait_fd)
{
    if (wait_fd >= 0) {
        char c;
        if (read(wait_fd, &c, 1) != 1)
            return 3;
    }
    char *err = NULL;
    Store *s = store_open(path, NULL, &err);
    if (s == NULL) {
        fprintf(stderr, "child: %s\n", err);
        return 1;
    }
    for (int i = 0; i < n; i++) {
        EventRecord e = ev_make(EV_GUARD_FAIL, 77, "");
        e.expr = "child";
        if (store_submit(s, &e) != 0)
            return 2;
        if (i % 100 == 0)
            sleep_ms(1);
    }
    StoreStats st = store_close(s);
    return st.written == (uint64_t)n ? 0 : 4;
}

/* Four processes open one new file at the same moment (racing to create its
   schema and switch it to WAL) and write at once: every run and every row. */
static void test_processes_share_one_file(void)
{
    enum { PROCS = 4, N = 3000 };
    const char *path = db_path("procs.db");
    int go[2];
    pid_t pids[PROCS];
    CHECK_EQ(pipe(go), 0);
    for (int i = 0; i < PROCS; i++) {
        pids[i] = fork();
        if (pids[i] == 0) {
            close(go[1]);
            _exit(child_writes(path, N, go[0]));
        }
    }
    close(go[0]);
    CHECK_EQ(write(go[1], "gggg", PROCS), PROCS);   /* all start together */
    close(go[1]);
    for (int i = 0; i < PROCS; i++) {
        int status = -1;
        waitpid(pids[i], &status, 0);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    sqlite3 *db = ro(path);
    CHECK_EQ(q1(db, "SELECT count(*) FROM runs"), PROCS);
    CHECK_EQ(q1(db, "SELECT count(DISTINCT pid) FROM runs"), PROCS);
    for (int i = 0; i < PROCS; i++)
        CHECK_EQ(q1(db, "SELECT count(*) FROM guard_failures g JOIN runs r USING (run_id)"
                        " WHERE r.pid = %d AND g.expr = 'child'", (int)pids[i]), N);
    CHECK_EQ(q1(db, "SELECT count(*) FROM guard_failures"), PROCS * N);
    CHECK_EQ(q1(db, "SELECT count(*) FROM runs WHERE ended_at IS NULL"), 0);
    CHECK_EQ(q1(db, "SELECT sum(written_events) FROM runs"), PROCS * N);
    CHECK_STR(qs(db, "PRAGMA integrity_check"), "ok");
    sqlite3_close(db);
}

/* The engine's fork recipe: pause before fork; the parent resumes, the child
   forgets and opens its own Store on the same file.  The parent closes its
   Store first; then the child and an unrelated process write at once.  Every
   row must land: the child's new connection must not share the inherited
   connection's in-process lock state (SQLite keeps it per inode), or it would
   keep using the parent's deleted WAL index next to the other process's. */
static void test_fork_child_forgets_and_records_on_its_own(void)
{
    const char *path = db_path("fork.db");
    Store *s = store_open(path, NULL, NULL);
    CHECK(s != NULL);
    for (int i = 0; i < 100; i++) {
        EventRecord e = ev_make(EV_GUARD_FAIL, 1, "");
        e.expr = "before fork";
        store_submit(s, &e);
    }
    int go[2];
    CHECK_EQ(pipe(go), 0);
    /* The writer thread well into its loop: under ASan (GCC 12) a thread still
       starting may hold the sanitizer's allocator lock, which a fork child
       would inherit locked.  glibc's own malloc is fork-safe. */
    CHECK(wait_for(s, written_at_least, 100, 5000));
    store_pause(s);
    pid_t child = fork();
    if (child == 0) {
        close(go[1]);
        store_forget_after_fork(s);
        _exit(child_writes(path, 3000, go[0]));
    }
    store_resume(s);
    for (int i = 0; i < 100; i++) {
        EventRecord e = ev_make(EV_GUARD_FAIL, 1, "");
        e.expr = "after fork";
        store_submit(s, &e);
    }
    store_close(s);   /* the parent finishes first (checkpoints, deletes the WAL) */
    pid_t other = fork();
    if (other == 0) {
        close(go[1]);
        _exit(child_writes(path, 3000, go[0]));
    }
    close(go[0]);
    CHECK_EQ(write(go[1], "gg", 2), 2);   /* then both write at once */
    close(go[1]);
    int status = -1;
    waitpid(child, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    waitpid(other, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);

    sqlite3 *db = ro(path);
    CHECK_STR(qs(db, "PRAGMA integrity_check"), "ok");
    CHECK_EQ(q1(db, "SELECT count(*) FROM runs"), 3);
    CHECK_EQ(q1(db, "SELECT count(*) FROM guard_failures WHERE expr = 'before fork'"), 100);
    CHECK_EQ(q1(db, "SELECT count(*) FROM guard_failures WHERE expr = 'after fork'"), 100);
    CHECK_EQ(q1(db, "SELECT count(*) FROM guard_failures g JOIN runs r USING (run_id)"
                    " WHERE r.pid = %d AND g.expr = 'child'", (int)child), 3000);
    CHECK_EQ(q1(db, "SELECT count(*) FROM guard_failures g JOIN runs r USING (run_id)"
                    " WHERE r.pid = %d AND g.expr = 'child'", (int)other), 3000);
    sqlite3_close(db);
}

static void test_reset_starts_a_new_epoch_of_entries(void)
{
    const char *path = db_path("reset.db");
    Store *s = store_open(path, NULL, NULL);
    for (int round = 0; round < 2; round++) {
        EventRecord e = ev_make(EV_COMPILE_START, 3, "0/0");
        store_submit(s, &e);
        e = ev_make(EV_COMPILE_END, 3, "0/0");
        e.outcome = "ok";
        e.guards_text = round == 0 ? "A\nB" : "C";
        store_submit(s, &e);
        e = ev_make(EV_ENTRY_STATS, 3, "0/0");
        e.hits = round == 0 ? 100 : 5;
        store_submit(s, &e);
        if (round == 0) {
            e = ev_make(EV_RESET, 0, "");
            store_submit(s, &e);
        }
    }
    store_close(s);
    sqlite3 *db = ro(path);
    CHECK_EQ(q1(db, "SELECT resets FROM runs"), 1);
    CHECK_EQ(q1(db, "SELECT count(*) FROM resets"), 1);
    CHECK_EQ(q1(db, "SELECT count(*) FROM compiles"), 2);
    CHECK_EQ(q1(db, "SELECT count(*) FROM cache_entries"), 2);
    CHECK_EQ(q1(db, "SELECT hits FROM cache_entries WHERE epoch = 0"), 100);
    CHECK_EQ(q1(db, "SELECT hits FROM cache_entries WHERE epoch = 1"), 5);
    CHECK_EQ(q1(db, "SELECT count(*) FROM guards WHERE epoch = 0"), 2);
    CHECK_EQ(q1(db, "SELECT count(*) FROM guards WHERE epoch = 1"), 1);
    CHECK_STR(qs(db, "SELECT cache_entries || ' ' || hits || ' ' || compiles FROM code_summary"),
              "1 5 2");
    sqlite3_close(db);
}

/* A reset the queue had to drop still moves later events to a new epoch, and
   runs.resets follows them. */
static void test_dropped_reset_still_starts_an_epoch(void)
{
    const char *path = db_path("reset-dropped.db");
    LogCapture cap;
    StoreOptions o = test_options(&cap);
    o.queue_capacity = 2;
    Store *s = store_open(path, &o, NULL);
    store_pause(s);
    EventRecord e = ev_make(EV_FRAME_SKIP, 1, "");
    CHECK_EQ(store_submit(s, &e), 0);
    CHECK_EQ(store_submit(s, &e), 0);
    e = ev_make(EV_RESET, 0, "");
    CHECK_EQ(store_submit(s, &e), -1);   /* full: dropped */
    store_resume(s);
    CHECK(wait_for(s, written_at_least, 2, 2000));
    e = ev_make(EV_COMPILE_END, 1, "0/0");
    e.outcome = "ok";
    CHECK_EQ(store_submit(s, &e), 0);
    store_close(s);
    sqlite3 *db = ro(path);
    CHECK_EQ(q1(db, "SELECT epoch FROM cache_entries"), 1);
    CHECK_EQ(q1(db, "SELECT resets FROM runs"), 1);
    CHECK_EQ(q1(db, "SELECT count(*) FROM resets"), 0);
    CHECK_EQ(q1(db, "SELECT cache_entries FROM code_summary"), 1);
    CHECK_EQ(q1(db, "SELECT dropped_events FROM runs"), 1);
    sqlite3_close(db);
}

static void test_strings_are_bound_never_pasted(void)
{
    const char *path = db_path("quotes.db");
    Store *s = store_open(path, NULL, NULL);
    EventRecord e = ev_make(EV_FRAME_SKIP, 9, "");
    e.qualname = "x'); DROP TABLE runs; --";
    e.reason = "it's \"fine\" \xe2\x9c\x93 ; DELETE FROM code_objects";
    store_submit(s, &e);
    e = ev_make(EV_GRAPH_BREAK, 9, "0/0");
    e.user_stack_json = "[not json";
    e.break_kind = "call";
    store_submit(s, &e);
    store_close(s);
    sqlite3 *db = ro(path);
    CHECK_EQ(q1(db, "SELECT count(*) FROM runs"), 1);
    CHECK_STR(qs(db, "SELECT name FROM code_objects"), "x'); DROP TABLE runs; --");
    CHECK_STR(qs(db, "SELECT reason FROM frame_skips"),
              "it's \"fine\" \xe2\x9c\x93 ; DELETE FROM code_objects");
    CHECK_STR(qs(db, "SELECT user_stack FROM graph_breaks"), "(null)");   /* invalid JSON */
    CHECK_EQ(q1(db, "SELECT count(*) FROM compiles"), 1);   /* implied by the break */
    sqlite3_close(db);
}

/* A recompile's failures packed in one event (event.h failures_packed):
   one guard_failures row each, with the recompile's compile row; a field
   holding the separator and digits comes back whole; a malformed tail is
   logged once and dropped, the rows before it kept. */
static void test_packed_failures_are_one_row_each(void)
{
    const char *path = db_path("packed.db");
    LogCapture cap;
    StoreOptions o = test_options(&cap);
    Store *s = store_open(path, &o, NULL);
    EventRecord e = ev_make(EV_COMPILE_START, 3, "0/2");
    store_submit(s, &e);
    e = ev_make(EV_RECOMPILE, 3, "0/2");
    e.reason = "L['k'] == '1:2' (observed '3')";
    e.failures_packed = "3:0/112:EQUALS_MATCH13:L['k'] == 1:23:'3'9:/src/a.py2:12"
                        "3:0/012:EQUALS_MATCH11:L['k'] == 02:-10:0:"
                        "3:0/9";                         /* cut short */
    store_submit(s, &e);
    e = ev_make(EV_CACHE_LIMIT, 3, "");
    e.failures_packed = "3:0/212:TENSOR_MATCH5:x.dim3:(4)0:3:140";
    store_submit(s, &e);
    /* 19 failures: two statements of eight rows, then three alone */
    static char many[4096];
    char *m = many;
    for (int i = 0; i < 19; i++) {
        char expr[32], line[8];
        int ne = snprintf(expr, sizeof expr, "L['k'] == %d", i);
        int nl = snprintf(line, sizeof line, "%d", 100 + i);
        m += sprintf(m, "%d:1/%d12:EQUALS_MATCH%d:%s1:%d9:/src/b.py%d:%s", i < 10 ? 3 : 4, i,
                     ne, expr, i % 10, nl, line);
    }
    e = ev_make(EV_COMPILE_START, 4, "1/19");
    store_submit(s, &e);
    e = ev_make(EV_RECOMPILE, 4, "1/19");
    e.failures_packed = many;
    store_submit(s, &e);
    store_close(s);
    sqlite3 *db = ro(path);
    CHECK_EQ(q1(db, "SELECT count(*) FROM guard_failures WHERE code_id = 3"), 3);
    CHECK_EQ(q1(db, "SELECT count(*) FROM guard_failures WHERE code_id = 4"), 19);
    for (int i = 0; i < 19; i++)
        CHECK_EQ(q1(db, "SELECT count(*) FROM (SELECT *, row_number() OVER (ORDER BY failure_id)"
                        " - 1 AS n FROM guard_failures WHERE code_id = 4) WHERE n = %d"
                        " AND entry_compile_id = '1/%d' AND expr = 'L[''k''] == %d'"
                        " AND observed = '%d' AND filename = '/src/b.py' AND lineno = %d"
                        " AND compile_id = '1/19' AND compile_row IS NOT NULL",
                     i, i, i, i % 10, 100 + i), 1);
    CHECK_STR(qs(db, "SELECT group_concat(entry_compile_id || '|' || kind || '|' || expr || '|'"
                     " || observed || '|' || coalesce(filename, '-') || '|'"
                     " || coalesce(lineno, '-') || '|' || coalesce(compile_id, '-'), ';')"
                     " FROM (SELECT * FROM guard_failures WHERE code_id = 3 ORDER BY failure_id)"),
              "0/1|EQUALS_MATCH|L['k'] == 1:2|'3'|/src/a.py|12|0/2;"
              "0/0|EQUALS_MATCH|L['k'] == 0|-1|-|-|0/2;"
              "0/2|TENSOR_MATCH|x.dim|(4)|-|140|-");
    CHECK_EQ(q1(db, "SELECT count(*) FROM guard_failures g JOIN compiles c"
                    " ON c.compile_row = g.compile_row WHERE c.compile_id = '0/2'"), 2);
    sqlite3_close(db);
    CHECK_EQ(log_count(&cap, "malformed"), 1);
}

static void test_periodic_flush_makes_rows_visible_to_live_readers(void)
{
    const char *path = db_path("live.db");
    StoreOptions o = test_options(NULL);
    o.flush_interval_ms = 50;
    Store *s = store_open(path, &o, NULL);
    EventRecord e = ev_make(EV_FRAME_SKIP, 1, "");
    store_submit(s, &e);
    CHECK(wait_for(s, written_at_least, 1, 2000));
    StoreReader *r = store_reader_open(path, NULL);
    CHECK(r != NULL);
    if (r != NULL) {
        StoreSummary sum;
        CHECK_EQ(store_read_summary(r, store_stats(s).run_id, &sum, NULL), 0);
        CHECK_EQ(sum.code_objects, 1);
        CHECK_EQ(q1(store_reader_db(r), "SELECT count(*) FROM frame_skips"), 1);
        CHECK(q1(store_reader_db(r), "SELECT ended_at IS NULL FROM runs") == 1);
        store_reader_close(r);
    }
    store_close(s);
}

static void test_default_log_goes_to_stderr_once(void)
{
    const char *path = db_path("stderr.db");
    const char *logpath = db_path("stderr.txt");
    fflush(stderr);
    int saved = dup(2);
    int fd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(fd, 2);
    close(fd);
    StoreOptions o = {0};
    o.queue_capacity = 2;
    Store *s = store_open(path, &o, NULL);
    store_pause(s);
    for (int i = 0; i < 10; i++) {
        EventRecord e = ev_make(EV_FRAME_SKIP, 1, "");
        store_submit(s, &e);
    }
    store_resume(s);
    store_close(s);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    char buf[2048] = {0};
    FILE *f = fopen(logpath, "r");
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    CHECK(strstr(buf, "dynscope: recording to ") != NULL);
    CHECK(strstr(buf, "event queue is full") != NULL);
    int lines = 0;
    for (char *p = buf; *p; p++)
        lines += *p == '\n';
    CHECK_EQ(lines, 1);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(tmpdir, sizeof tmpdir, "%s/test_store.XXXXXX", base);
    if (mkdtemp(tmpdir) == NULL) {
        perror("mkdtemp");
        return 2;
    }
    static const struct {
        const char *name;
        void (*fn)(void);
    } tests[] = {
#define T(fn) {#fn, fn}
        T(test_events_written_and_read_back_exactly),
        T(test_read_model_reads_what_was_written),
        T(test_reader_reads_a_v2_file_without_writing_it),
        T(test_break_sites_come_costliest_first),
        T(test_file_is_created_private_0600),
        T(test_queue_overflow_drops_and_counts),
        T(test_queue_byte_bound_drops_and_counts),
        T(test_locked_database_drops_and_counts),
        T(test_producer_never_waits_for_a_writer_blocked_on_a_lock),
        T(test_disk_full_is_logged_once_counted_and_soft),
        T(test_foreign_sqlite_file_is_refused_untouched),
        T(test_garbage_file_is_refused),
        T(test_newer_schema_is_refused),
        T(test_unwritable_paths_fail_with_a_message),
        T(test_migration_from_v1_keeps_data),
        T(test_four_producer_threads_exact_counts),
        T(test_processes_share_one_file),
        T(test_fork_child_forgets_and_records_on_its_own),
        T(test_reset_starts_a_new_epoch_of_entries),
        T(test_dropped_reset_still_starts_an_epoch),
        T(test_strings_are_bound_never_pasted),
        T(test_packed_failures_are_one_row_each),
        T(test_periodic_flush_makes_rows_visible_to_live_readers),
        T(test_default_log_goes_to_stderr_once),
#undef T
    };
    size_t ntests = sizeof tests / sizeof tests[0];
    for (size_t i = 0; i < ntests; i++) {
        int before = failures;
        double t0 = now_s();
        current_test = tests[i].name;
        tests[i].fn();
        printf("%s %s (%.0f ms)\n", failures == before ? "ok  " : "FAIL", tests[i].name,
               (now_s() - t0) * 1000);
        fflush(stdout);
    }
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (failures == 0 && system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmpdir);
    printf("test_store: %zu tests, %d checks, %d failed%s%s\n", ntests, checks, failures,
           failures ? "; files kept in " : "", failures ? tmpdir : "");
    return failures == 0 ? 0 : 1;
}
