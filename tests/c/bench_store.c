/*
 * bench_store.c -- throughput of the SQLite recorder (store/): what
 * store_submit() costs the producer, how many events per second the writer
 * thread commits, and how fast the views answer over a million rows.
 * Not part of `make check-c` (bench_* is skipped); run with
 * `make bench-store` or build/tests/c/bench_store [EVENTS [VIEW_EVENTS [DIR]]]:
 * EVENTS (default 1e6) measure the producer and the writer; then the file
 * grows to VIEW_EVENTS (default 1e7: a million graph breaks and guard
 * failures over 1000 code objects) and the views are timed.
 * Design: DESIGN.md 4.3; numbers land in docs/performance.md.
 */
#define _GNU_SOURCE

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "../../store/store.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t wall = 1700000000000000000ull;

/* Event i of a realistic mix: per code object, compile start/end (with two
   guards), a recompile with its guard failure, a graph break, and counter
   snapshots.  Cycles through 10 kinds of event. */
static EventRecord mix_event(long i, long ncode, char *buf, size_t bufsz)
{
    static const char *const empty = "";
    EventRecord e;
    memset(&e, 0, sizeof e);
    e.qualname = "Model.forward";
    e.filename = "/home/user/project/model.py";
    e.firstlineno = 42;
    e.outcome = e.guards_text = e.reason = e.entry_compile_id = e.guard_kind = empty;
    e.expr = e.observed = e.break_kind = e.break_file = e.user_stack_json = empty;
    e.backend = e.graph_code = e.ops = empty;
    e.wall_ns = e.mono_ns = ++wall;
    long code = ncode > 0 ? (i / 10) % ncode : i / 10;
    long step = i % 10;
    e.code_id = code;
    int fcid = step < 3 ? 0 : 1;
    snprintf(buf, bufsz, "%ld/%d", code, fcid);
    e.compile_id = buf;
    e.frame_id = (int)code;
    e.frame_compile_id = fcid;
    switch (step) {
    case 0: case 3: e.kind = EV_COMPILE_START; break;
    case 1: case 5:
        e.kind = EV_COMPILE_END;
        e.outcome = "ok";
        e.duration_ns = 1500000;
        e.graphs = 1;
        e.nodes = 12;
        e.guards = 2;
        e.guards_text = "L['x'].shape == (8, 16)\nL['x'].dtype == float32";
        break;
    case 2: case 8: case 9:
        e.kind = EV_ENTRY_STATS;
        e.hits = (uint64_t)i;
        e.guard_ns = 40 * (uint64_t)i;
        break;
    case 4:
        e.kind = EV_GUARD_FAIL;
        e.entry_compile_id = "0/0";
        e.guard_kind = "TENSOR_MATCH";
        e.expr = "L['x'].shape == (8, 16)";
        e.observed = "(9, 16)";
        break;
    case 6:
        e.kind = EV_RECOMPILE;
        e.reason = "L['x'].shape == (8, 16) (observed (9, 16))";
        break;
    default:
        e.kind = EV_GRAPH_BREAK;
        e.break_kind = "call";
        e.reason = "call to print";
        e.break_file = "/home/user/project/model.py";
        e.break_line = 50;
        e.break_offset = 88;
        e.user_stack_json = "[[\"/home/user/project/model.py\", 50, \"forward\", \"print(x)\"]]";
        break;
    }
    return e;
}

static void time_query(sqlite3 *db, const char *label, const char *sql)
{
    sqlite3_stmt *st;
    double t0 = now_s();
    long rows = 0;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
        printf("| %s | error: %s |\n", label, sqlite3_errmsg(db));
        return;
    }
    while (sqlite3_step(st) == SQLITE_ROW)
        rows++;
    sqlite3_finalize(st);
    printf("| %s | %.1f | %ld |\n", label, (now_s() - t0) * 1000, rows);
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1000000;
    long nview = argc > 2 ? atol(argv[2]) : 10000000;
    const char *dir = argc > 3 ? argv[3] : "/tmp";
    char path[512];
    snprintf(path, sizeof path, "%s/bench_store.%d.db", dir, (int)getpid());
    char buf[64];

    /* 1. Producer cost: submit into a queue the writer keeps draining. */
    StoreOptions o = {0};
    o.queue_capacity = (unsigned)n + 1;
    o.queue_max_bytes = (size_t)n * 1024;   /* room for every event: measure, not drop */
    Store *s = store_open(path, &o, NULL);
    if (s == NULL)
        return 1;
    long warm = n / 10;
    double t0 = now_s();
    for (long i = 0; i < warm; i++) {
        EventRecord e = mix_event(i, 0, buf, sizeof buf);
        store_submit(s, &e);
    }
    double submit_ns = (now_s() - t0) * 1e9 / (double)warm;

    /* 2. Writer throughput: fill the queue while the writer is parked, then
       time the drain alone. */
    while (store_stats(s).written + store_stats(s).dropped < (uint64_t)warm)
        usleep(1000);
    store_pause(s);
    t0 = now_s();
    for (long i = warm; i < n; i++) {
        EventRecord e = mix_event(i, 0, buf, sizeof buf);
        store_submit(s, &e);
    }
    double submit_paused_ns = (now_s() - t0) * 1e9 / (double)(n - warm);
    t0 = now_s();
    store_resume(s);
    while (store_stats(s).written + store_stats(s).dropped < (uint64_t)n)
        usleep(200);
    double drain_s = now_s() - t0;
    StoreStats st = store_stats(s);

    /* 3. Grow the file for the views: a long run of recompile storms over
       1000 code objects, the producer throttled to what the writer takes. */
    t0 = now_s();
    for (long i = n; i < nview; i++) {
        EventRecord e = mix_event(i, 1000, buf, sizeof buf);
        while (store_stats(s).pending > (uint64_t)n / 2)
            usleep(1000);
        store_submit(s, &e);
    }
    StoreStats final = store_close(s);
    double grow_s = now_s() - t0;

    printf("events: %ld (a mix of 10 kinds)\n", n);
    printf("dropped: %llu, errors: %llu (after the view phase: %llu dropped, %llu written)\n",
           (unsigned long long)st.dropped, (unsigned long long)st.errors,
           (unsigned long long)final.dropped, (unsigned long long)final.written);
    printf("producer: store_submit %.0f ns/event while the writer runs, %.0f ns/event "
           "while it is parked (copy + enqueue)\n", submit_ns, submit_paused_ns);
    printf("writer: %.0f events/s (%ld events committed in %.2f s)\n",
           (double)(n - warm) / drain_s, n - warm, drain_s);

    if (nview > n)
        printf("grow: %ld more events in %.1f s (%.0f events/s sustained, writer running)\n",
               nview - n, grow_s, (double)(nview - n) / grow_s);

    /* 4. The views over what was written. */
    sqlite3 *db;
    sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL);
    sqlite3_stmt *q;
    sqlite3_prepare_v2(db, "SELECT (SELECT count(*) FROM compiles), (SELECT count(*) FROM"
                       " guard_failures), (SELECT count(*) FROM graph_breaks), (SELECT"
                       " count(*) FROM entry_stats), (SELECT count(*) FROM code_objects)",
                       -1, &q, NULL);
    if (sqlite3_step(q) == SQLITE_ROW)
        printf("rows: compiles %lld, guard_failures %lld, graph_breaks %lld, entry_stats "
               "%lld, code_objects %lld\n", sqlite3_column_int64(q, 0),
               sqlite3_column_int64(q, 1), sqlite3_column_int64(q, 2),
               sqlite3_column_int64(q, 3), sqlite3_column_int64(q, 4));
    sqlite3_finalize(q);
    printf("\n| query | ms | rows |\n|---|---:|---:|\n");
    time_query(db, "recompile_history, all", "SELECT * FROM recompile_history");
    time_query(db, "recompile_history, one code object",
               "SELECT * FROM recompile_history WHERE run_id = 1 AND code_id = 777");
    time_query(db, "recompiles, newest 20", "SELECT * FROM recompiles ORDER BY compile_row DESC LIMIT 20");
    time_query(db, "break_reasons, top 10",
               "SELECT * FROM break_reasons ORDER BY count DESC LIMIT 10");
    time_query(db, "code_summary, top 20 by hits",
               "SELECT * FROM code_summary ORDER BY hits DESC LIMIT 20");
    time_query(db, "code_summary, one code object",
               "SELECT * FROM code_summary WHERE run_id = 1 AND code_id = 777");
    sqlite3_close(db);
    static const char *const suffixes[] = {"", "-wal", "-shm"};
    for (int i = 0; i < 3; i++) {
        char file[600];
        snprintf(file, sizeof file, "%.512s%s", path, suffixes[i]);
        unlink(file);
    }
    return 0;
}
