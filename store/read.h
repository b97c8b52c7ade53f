/*
 * read.h -- the read model of a dynscope database (DESIGN.md 4.3, 4.4): the
 * one way C code reads the schema of docs/sql.md.  dyntop (tui/) uses it for
 * every query it makes; the C tests use it too.  Python's readers (`python -m
 * dynscope report`) read the same views of the schema (store/schema.c).
 *
 * A StoreReader is one read-only connection (file:...?mode=ro) to a dynscope
 * file of a schema version it can read: the current one, or an older one
 * whose tables the current views can read (the views that file lacks are
 * created as TEMP views on the reader's own connection; the file is never
 * written).  The queries are prepared once per reader and reused.
 *
 * Conventions of every function below:
 *   - run_id 0 means every run of the file, else that run only;
 *   - rows are handed to a callback one by one; a row and its strings are
 *     borrowed, valid only during the call; strings are never NULL (a NULL
 *     column reads as "");
 *   - 0 on success, -1 on an SQLite error: store_reader_errmsg() says what
 *     failed (rows handed over before the error stay handed over);
 *   - a callback may call other functions of the reader, not the one that
 *     is calling it (each function owns one prepared statement);
 *   - a "since" watermark is a table's rowid (its INTEGER PRIMARY KEY where
 *     it has one): the recorder only appends, so the rows past a watermark
 *     are the rows committed since it was read (store_read_mark).
 * Calls between store_read_begin() and store_read_end() see one snapshot of
 * the file even while a recorder writes (WAL); outside, each call is its
 * own snapshot.  A StoreReader is used by one thread at a time.
 *
 * Plain C: no Python.h, no curses (STYLE.md).
 */
#ifndef DYNSCOPE_STORE_READ_H
#define DYNSCOPE_STORE_READ_H

#include <stdbool.h>
#include <stddef.h>

/* The schema version this build writes; PRAGMA user_version of the file. */
#define STORE_SCHEMA_VERSION 6
/* The oldest version a reader reads (v2's tables are v3's: the views v3
   added become TEMP views of the reader). */
#define STORE_READ_MIN_VERSION 2
/* The first version with guard provenance (guards and guard_failures:
   filename, lineno) and recompile_diffs.  On an older file the reader does
   not query them: the fields below that come from them read as "" and 0,
   and store_read_recompile_diff() hands over no rows. */
#define STORE_PROVENANCE_VERSION 4
/* The first version whose runs say who recorded them (hostname, rank,
   local_rank, world_size).  On an older file they read as unknown. */
#define STORE_WHO_VERSION 4
/* The first version whose graph breaks and frame skips carry the break
   registry's type and class (break_type, break_class; event/break_types.h).
   On an older file they read as "", and store_read_skip_sites() hands over
   no rows. */
#define STORE_BREAK_TYPES_VERSION 4
/* The first version whose compiles say what an escape hatch kept in the
   graph (compiles.hatches).  On an older file it reads as "". */
#define STORE_HATCHES_VERSION 5

/* The SQL that gives a connection to a file of schema `version` the views
   that file lacks, as TEMP views of that connection (the file is not
   written): "" when it has them all.  For readers outside this library
   (`python -m dynscope report`); dyntop's reader runs it itself.  A
   malloc'd string (free() it), or NULL when version is not readable
   (below STORE_READ_MIN_VERSION, above STORE_SCHEMA_VERSION) or out of
   memory. */
char *store_temp_views_sql(int version);

/* PRAGMA application_id of every dynscope database: 'DYNS'. */
#define STORE_APPLICATION_ID 0x44594E53

typedef struct StoreReader StoreReader;

/*
 * Open `path` read-only and check that it is a dynscope database this build
 * can read (STORE_READ_MIN_VERSION up to STORE_SCHEMA_VERSION).  On failure returns NULL
 * and sets *errmsg (malloc'd): a missing file, not SQLite, not dynscope, an
 * older schema (v1: recording to it once migrates it) or a newer one.
 */
StoreReader *store_reader_open(const char *path, char **errmsg);
void store_reader_close(StoreReader *r);   /* NULL: no-op */

/* The schema version of the file (PRAGMA user_version when opened). */
int store_reader_version(const StoreReader *r);
/* The message of the last failed call, "" if none.  Borrowed: valid until
   the next call on r. */
const char *store_reader_errmsg(const StoreReader *r);

/* One read transaction around several calls (one snapshot).  0 or -1.
   store_read_end() ends it; a no-op when none is open. */
int store_read_begin(StoreReader *r);
void store_read_end(StoreReader *r);

/* ---- totals (views run_summary and code_summary) ---- */

/* Totals over one run or every run. */
typedef struct StoreSummary {
    long long runs;
    long long last_run_id;     /* 0 if none */
    long long code_objects;
    long long compiles;
    long long recompiles;      /* compiles with frame_compile_id > 0 */
    long long guard_failures;
    long long graph_breaks;
    long long cache_entries;   /* entries alive (in their run's current epoch) */
    long long hits;            /* over those entries */
    long long dropped_events;
} StoreSummary;

/* Fill *out from one snapshot.  0, or -1 with *errmsg set (malloc'd). */
int store_read_summary(StoreReader *r, long long run_id, StoreSummary *out, char **errmsg);

/* One code object with its aggregates (view code_summary). */
typedef struct StoreCodeRow {
    long long run_id;
    long long code_id;
    char *filename;            /* malloc'd, never NULL ("" if unknown) */
    char *name;
    int firstlineno;
    long long compiles;
    long long recompiles;
    long long graph_breaks;
    long long guard_failures;
    long long cache_entries;   /* alive */
    long long hits;            /* over alive entries */
    char *last_failure;        /* "expr (observed v)" of the newest guard failure, or "" */
} StoreCodeRow;

/*
 * The code objects, most compiled first.  On success *rows (free with
 * store_code_rows_free) and *nrows are set; on failure they are NULL/0 and
 * *errmsg is set.
 */
int store_read_code_objects(StoreReader *r, long long run_id, StoreCodeRow **rows,
                            size_t *nrows, char **errmsg);
void store_code_rows_free(StoreCodeRow *rows, size_t nrows);

/* ---- runs ---- */

typedef struct StoreRunRow {
    long long run_id;
    long long pid;
    long long started_at;      /* wall ns */
    long long ended_at;        /* wall ns, 0 while running (or the process died) */
    long long resets;          /* the run's current epoch */
    long long dropped_events;
    const char *argv;          /* the JSON text as recorded */
    const char *hostname;      /* "" when unknown (or before STORE_WHO_VERSION) */
    bool has_rank;             /* RANK was set (torchrun): then rank is it */
    long long rank;
    long long local_rank;      /* -1 when unset */
    long long world_size;      /* -1 when unset */
    const char *last_mark;     /* its newest annotation, "name {fields}"; "" none
                                  (or before STORE_HATCHES_VERSION: v5) */
    long long last_mark_at;    /* its wall ns, 0 none */
} StoreRunRow;

/* Every run of the file, by run_id. */
int store_read_runs(StoreReader *r, void (*fn)(void *ctx, const StoreRunRow *row), void *ctx);

/* ---- incremental reading: rows past a watermark ---- */

/* The tables the recorder only appends to. */
typedef enum StoreTable {
    STORE_CODE_OBJECTS,
    STORE_COMPILES,
    STORE_GRAPHS,
    STORE_GRAPH_BREAKS,
    STORE_CACHE_LIMITS,
    STORE_GUARD_FAILURES,
    STORE_CACHE_ENTRIES,
    STORE_ENTRY_STATS,
    STORE_TABLE__COUNT
} StoreTable;

/* The watermark of `t` now: its largest rowid, 0 when empty. */
int store_read_mark(StoreReader *r, StoreTable t, long long *mark);

typedef struct StoreCodeObjectRow {
    long long rowid;
    long long run_id, code_id;
    const char *filename, *name;
    int firstlineno;
} StoreCodeObjectRow;

/* code_objects rows past `since`, in rowid order. */
int store_read_new_code_objects(StoreReader *r, long long run_id, long long since,
                                void (*fn)(void *ctx, const StoreCodeObjectRow *row), void *ctx);

typedef struct StoreCompileRow {
    long long compile_row;
    long long run_id, code_id;
    long long frame_compile_id;  /* > 0: a recompile */
    long long started_at;        /* wall ns */
    long long duration_ns;       /* 0 until it ended */
    bool ended;                  /* compile_end arrived (ended_at is set) */
    long long graphs;            /* compiles.graphs: 0 until it ended */
} StoreCompileRow;

/* compiles rows past `since`, in compile_row order. */
int store_read_new_compiles(StoreReader *r, long long run_id, long long since,
                            void (*fn)(void *ctx, const StoreCompileRow *row), void *ctx);
/* Has compile `compile_row` ended, how long did it take and how many
   graphs did it make?  *ended false (and *duration_ns, *graphs 0) while it
   runs or if there is no such row.  graphs may be NULL. */
int store_read_compile_end(StoreReader *r, long long compile_row, bool *ended,
                           long long *duration_ns, long long *graphs);

/* Rows per code object of one table. */
typedef struct StoreCountRow {
    long long run_id, code_id;
    long long n;
    long long max_epoch;         /* STORE_CACHE_LIMITS: the newest epoch; else 0 */
} StoreCountRow;

/*
 * Rows of `t` (STORE_GRAPHS, STORE_GRAPH_BREAKS or STORE_CACHE_LIMITS) past
 * `since`, counted per code object.  since == 0 counts every row through
 * the table's per-code index without reading the rows.
 */
int store_read_counts(StoreReader *r, StoreTable t, long long run_id, long long since,
                      void (*fn)(void *ctx, const StoreCountRow *row), void *ctx);

typedef struct StoreFailureRow {
    long long failure_id;
    long long run_id, code_id;
    const char *expr, *observed;
} StoreFailureRow;

/* The number of guard_failures rows (run_id 0: the whole table, counted
   without decoding its rows). */
int store_read_failure_count(StoreReader *r, long long run_id, long long *n);
/* Each code object's newest guard failure, found through the per-code index. */
int store_read_last_failures(StoreReader *r, long long run_id,
                             void (*fn)(void *ctx, const StoreFailureRow *row), void *ctx);
/* guard_failures rows past `since`, in failure_id order. */
int store_read_new_failures(StoreReader *r, long long run_id, long long since,
                            void (*fn)(void *ctx, const StoreFailureRow *row), void *ctx);

/* One distinct text of a code object: see store_read_new_texts. */
typedef struct StoreTextRow {
    long long run_id, code_id;
    const char *text;
} StoreTextRow;

/*
 * The distinct texts per code object among the rows of `t` past `since`:
 * STORE_GRAPH_BREAKS, its break reasons as "kind: reason"; STORE_GUARD_FAILURES,
 * its failing guards' expressions (rows without one are left out).  What
 * dynscope/ranks.py compares between runs.  since == 0 reads the whole table.
 */
int store_read_new_texts(StoreReader *r, StoreTable t, long long run_id, long long since,
                         void (*fn)(void *ctx, const StoreTextRow *row), void *ctx);

typedef struct StoreEntryRow {
    long long rowid;
    long long run_id, code_id, epoch;
    const char *compile_id;
    long long frame_id;
    long long hits;              /* as of its last counter snapshot */
} StoreEntryRow;

/* cache_entries rows past `since`, in rowid order. */
int store_read_new_entries(StoreReader *r, long long run_id, long long since,
                           void (*fn)(void *ctx, const StoreEntryRow *row), void *ctx);
/* entry_stats rows (counter snapshots) past `since`, in rowid order; only
   run_id, code_id, epoch, compile_id and hits are set. */
int store_read_new_entry_stats(StoreReader *r, long long run_id, long long since,
                               void (*fn)(void *ctx, const StoreEntryRow *row), void *ctx);

/* ---- one code object (dyntop's detail view) ---- */

typedef struct StoreCodeEntryRow {
    const char *compile_id;
    long long frame_id;
    int resume_offset;
    long long hits, guard_ns;
    const char *guards_text;     /* the entry's guards, one per line */
    long long nguards;           /* its `guards` rows */
    long long in_frame;          /* entries of its frame in the epoch */
    long long t;                 /* stats_at, else created_at, else 0 (wall ns) */
    bool snapshotted;            /* t is a counter snapshot's time */
    const char *hatches;         /* what an escape hatch kept in its graph, one
                                    per line ("" none, or a file before v5) */
    /* Its compile's time, ns: total (duration_ns), then the phases trace,
       guards, graph, backend, plan (they add up to the total) and events
       (outside it); attempts: translations made.  0 for a file before v5
       or a compile that recorded none (attempts 0). */
    long long compile_ns[7];
    int attempts;
} StoreCodeEntryRow;

/* The cache entries of (run_id, code_id) in `epoch`, by resume offset,
   frame, then newest first (t descending). */
int store_read_code_entries(StoreReader *r, long long run_id, long long code_id,
                            long long epoch,
                            void (*fn)(void *ctx, const StoreCodeEntryRow *row), void *ctx);

typedef struct StoreGuardRow {
    const char *kind;            /* "" when the guard had none */
    const char *expr;
    const char *filename;        /* the user source whose access made the guard, */
    int lineno;                  /* "" and 0 for a guard the engine adds itself
                                    (BACKEND_MATCH) or a file before v4 */
} StoreGuardRow;

/* The guards of one entry, in order (idx). */
int store_read_entry_guards(StoreReader *r, long long run_id, long long code_id,
                            long long epoch, const char *compile_id,
                            void (*fn)(void *ctx, const StoreGuardRow *row), void *ctx);

typedef struct StoreGuardCountRow {
    const char *kind, *expr;
    long long n;                 /* failures of this guard */
    const char *last_observed;   /* the value seen by the newest one */
    const char *filename;        /* the source of the guard the newest one failed, */
    int lineno;                  /* "" and 0 when unknown (or before v4) */
} StoreGuardCountRow;

/* The `limit` guards of (run_id, code_id) that failed most, most first
   (ties: the most recently failed first). */
int store_read_top_failing_guards(StoreReader *r, long long run_id, long long code_id,
                                  int limit,
                                  void (*fn)(void *ctx, const StoreGuardCountRow *row),
                                  void *ctx);

/* What the graph breaks at a site cost the program (view break_costs,
   schema v6): the recorder times one call in so many
   (engine/capture/cost.c) and scales what it measured to every call.
   Unknown (known false, the numbers 0, share -1) when no call that broke
   there was timed: a file before v6 (its break_costs is the reader's TEMP
   view, with NULL costs), a site of a short run, a frame skip. */
typedef struct StoreBreakCost {
    bool known;                  /* some call that broke there was timed */
    long long ns;                /* estimated time the program spent outside
                                    graphs because of the breaks: the eager
                                    steps and the resumes after them */
    long long function_ns;       /* estimated time of the functions the breaks
                                    are in (all of their calls), 0 unknown */
    double share;                /* ns / function_ns, -1 when function_ns is 0 */
    long long extra_graphs;      /* graph launches the breaks added */
    long long samples;           /* the timed calls the estimate comes from */
} StoreBreakCost;

/* A group of graph breaks at one site (or of frame skips in one function:
   store_read_skip_sites). */
typedef struct StoreBreakSiteRow {
    const char *kind, *reason;
    const char *filename;
    int lineno;
    long long n;                 /* breaks at the site */
    long long code_objects;      /* distinct code objects that broke there */
    long long last_break_id;     /* the newest break */
    long long run_id, code_id;   /* the newest break's code object */
    const char *functions;       /* their names, comma separated */
    const char *break_type;      /* the registry's id ("DS0001", event/break_types.h) */
    const char *break_class;     /* "your code", ... ; both "" before schema v4 */
    StoreBreakCost cost;         /* over the same breaks (run(s), code objects) */
} StoreBreakSiteRow;

/* The graph breaks of (run_id, code_id) by site (kind, reason, file, line),
   costliest first (cost.ns, an unknown cost as 0), then most frequent
   first, then first seen first: on a file without costs, most frequent
   first.  code_objects and functions are not set (0, ""). */
int store_read_code_break_sites(StoreReader *r, long long run_id, long long code_id,
                                void (*fn)(void *ctx, const StoreBreakSiteRow *row),
                                void *ctx);

typedef struct StoreStackFrame {
    const char *filename;
    int lineno;
    const char *name;
    const char *source;          /* the line as recorded */
} StoreStackFrame;

/* The user stack of graph break `break_id`, outermost first (nothing when it
   has none, or its JSON is not valid). */
int store_read_break_stack(StoreReader *r, long long break_id,
                           void (*fn)(void *ctx, const StoreStackFrame *row), void *ctx);

/* One frame of a call path that compiled a code object (compiles.call_path,
   v5): the rows of one path are consecutive, outermost frame first, and
   the paths come in their text's order, so paths with a common start are
   neighbours. */
typedef struct StoreCallPathFrame {
    const char *call_path;       /* the whole path (JSON): the same for its frames */
    long long compiles;          /* compiles of the code object with this path */
    const char *compile_ids;     /* theirs, "[0/0] [0/1]" */
    int index;                   /* 0 = the outermost frame */
    const char *filename;
    int lineno;
    const char *name;
} StoreCallPathFrame;

/* The call paths of (run_id, code_id)'s compiles, frame by frame; nothing
   for a file before v5. */
int store_read_call_paths(StoreReader *r, long long run_id, long long code_id,
                          void (*fn)(void *ctx, const StoreCallPathFrame *row), void *ctx);

typedef struct StoreRecompileRow {
    long long compile_row;
    const char *compile_id;
    long long started_at;        /* wall ns */
    long long duration_ns;
    const char *outcome;         /* "running" until it ended */
    const char *reason;
    int resume_offset;
} StoreRecompileRow;

/* The `limit` newest recompiles of (run_id, code_id), newest first. */
int store_read_code_recompiles(StoreReader *r, long long run_id, long long code_id,
                               int limit,
                               void (*fn)(void *ctx, const StoreRecompileRow *row), void *ctx);

typedef struct StoreCompileFailureRow {
    const char *entry_compile_id;
    const char *kind, *expr, *observed;
    const char *filename;        /* the failed guard's source, "" and 0 when */
    int lineno;                  /* unknown (or before v4) */
} StoreCompileFailureRow;

/* The first `limit` guard failures recorded for compile `compile_row`. */
int store_read_compile_failures(StoreReader *r, long long compile_row, int limit,
                                void (*fn)(void *ctx, const StoreCompileFailureRow *row),
                                void *ctx);

/* One failing guard of the entry nearest to a recompile's inputs (table
   recompile_diffs).  entry_compile_id, failing and capture_ns are the same
   on every row of one recompile. */
typedef struct StoreRecompileDiffRow {
    const char *entry_compile_id; /* the older entry of the frame nearest to the
                                     new inputs: the fewest failing guards */
    long long failing;           /* how many of its guards failed (the file
                                    lists at most 32 of them) */
    long long capture_ns;        /* the cost of the miss: the new compile's
                                    translation time */
    int idx;                     /* the guard's place in the entry (guards.idx) */
    const char *kind, *expr;
    const char *observed;        /* the value the new inputs had */
    const char *filename;        /* the guard's source, "" and 0 when unknown */
    int lineno;
    const char *source;          /* that line as recorded (the innermost frame
                                    of its user stack), "" if none */
} StoreRecompileDiffRow;

/* The nearest entry of recompile `compile_row`: its first `limit` failing
   guards, by idx.  No rows when the recompile has none recorded (no older
   entry, or every guard of it was the engine's) or the file is older than
   STORE_PROVENANCE_VERSION. */
int store_read_recompile_diff(StoreReader *r, long long compile_row, int limit,
                              void (*fn)(void *ctx, const StoreRecompileDiffRow *row),
                              void *ctx);

typedef struct StoreLimitRow {
    long long at;                /* wall ns */
    long long epoch;
    long long frame_id;
    int resume_offset;
    const char *reason;          /* the last failing guard and the value seen */
} StoreLimitRow;

/* The `limit` newest cache-limit hits of (run_id, code_id), newest first. */
int store_read_code_cache_limits(StoreReader *r, long long run_id, long long code_id,
                                 int limit,
                                 void (*fn)(void *ctx, const StoreLimitRow *row), void *ctx);

typedef struct StoreSkipRow {
    long long at;                /* wall ns */
    int resume_offset;
    const char *reason;
    const char *break_type;      /* the registry's id ("DS0014"), and */
    const char *break_class;     /* its class; both "" before schema v4 */
} StoreSkipRow;

/* The `limit` newest frame skips of (run_id, code_id), newest first. */
int store_read_code_skips(StoreReader *r, long long run_id, long long code_id, int limit,
                          void (*fn)(void *ctx, const StoreSkipRow *row), void *ctx);

/* ---- whole-run lists (dyntop's views) ---- */

/* Graph breaks grouped by site over the run(s), every field set:
   costliest first (cost.ns, an unknown cost as 0), then most frequent
   first, then by file and line (on a file without costs: most frequent
   first); at most `limit` sites, the first in that order. */
int store_read_break_sites(StoreReader *r, long long run_id, int limit,
                           void (*fn)(void *ctx, const StoreBreakSiteRow *row), void *ctx);

/* The frames run without capture (frame_skips) over the run(s), grouped as
   break sites are: by type, class, reason and function, the function's
   file and first line as the site (filename, lineno).  kind is "" and
   last_break_id 0 (a skip has no stack); n counts skips; the cost is
   unknown.  Most first, then by file and line; at most `limit`.  No rows before
   STORE_BREAK_TYPES_VERSION. */
int store_read_skip_sites(StoreReader *r, long long run_id, int limit,
                          void (*fn)(void *ctx, const StoreBreakSiteRow *row), void *ctx);

typedef struct StoreRecompileLogRow {
    long long run_id, code_id;
    const char *name;            /* "?" if the code object is unknown */
    const char *compile_id;
    long long started_at;        /* wall ns */
    long long run_started_at;    /* its run's start, wall ns (0 if unknown) */
    long long failures;          /* guard failures recorded for it */
    bool has_failure;            /* the first of them, when there is one: */
    const char *kind, *expr, *observed;   /* observed "?" when not recorded */
    bool has_nearest;            /* its nearest entry (recompile_diffs), when recorded: */
    const char *nearest_entry;   /* its compile id */
    long long nearest_failing;   /* how many of its guards failed */
    const char *nearest_filename;  /* the source of its first failing guard (by */
    int nearest_lineno;            /* idx), "" and 0 when unknown */
} StoreRecompileLogRow;

/* The `limit` newest recompiles of the run(s), newest first. */
int store_read_recompile_log(StoreReader *r, long long run_id, int limit,
                             void (*fn)(void *ctx, const StoreRecompileLogRow *row),
                             void *ctx);

#endif /* DYNSCOPE_STORE_READ_H */
