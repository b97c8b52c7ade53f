/*
 * store_int.h -- the contract of the store/ folder: the Store object, the
 * copied event, the queue, and the functions the folder's files share.
 * Public API and threading rules: store.h (writing), read.h (reading).
 * Design: DESIGN.md 4.3.
 *
 * Files, one mechanism each:
 *   recorder.c  store_open/close/submit/stats, pause, fork: the lifecycle
 *   queue.c     event copies and the bounded lock-free MPSC queue
 *   writer.c    the writer thread: events -> rows, batching, soft failures
 *   schema.c    schema SQL, PRAGMA user_version, migrations
 *   read.c      the read model: every query of a reader (read.h)
 *   sigterm.c   the SIGTERM handler that lets the writer flush before death
 *   ident.c     who records (host, pid, ranks) and path templates (%h %p %r)
 *   util.c      error messages, clocks
 *
 * Data flow: producer threads --store_submit--> EventQueue --writer thread-->
 * one SQLite connection.  Only the writer thread touches `db` once it runs,
 * and only while holding `gate` (so store_pause() can park it).
 */
#ifndef DYNSCOPE_STORE_INT_H
#define DYNSCOPE_STORE_INT_H

#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sqlite3.h>

#include "store.h"

/* ---- assertions: debug-only, print expression, file and line ---- */

#ifdef NDEBUG
#define STORE_ASSERT(e) ((void)0)
#else
#define STORE_ASSERT(e) ((e) ? (void)0 : store_assert_fail(#e, __FILE__, __LINE__))
#endif
void store_assert_fail(const char *expr, const char *file, int line);

/* ---- defaults (store.h StoreOptions) ---- */

#define STORE_DEFAULT_QUEUE_CAPACITY 16384u
#define STORE_DEFAULT_QUEUE_MAX_BYTES ((size_t)64 << 20)
#define STORE_DEFAULT_FLUSH_MS 500u
#define STORE_DEFAULT_BUSY_MS 2000u
#define STORE_DEFAULT_BATCH_MAX 16384u

/* ---- a copied event (queue.c) ---- */

/*
 * One malloc'd block: the record, whose string fields point into text[].
 * Invariants: every string field of rec is non-NULL and points inside
 * text[0 .. size - sizeof(StoreEvent)), or, when empty, at a static "";
 * `size` is the whole block.
 */
typedef struct StoreEvent {
    EventRecord rec;
    long long epoch;             /* EV_RESETs submitted before this event */
    size_t size;
    char text[];
} StoreEvent;

/* Copy ev and every string it points to.  NULL when out of memory. */
StoreEvent *store_event_copy(const EventRecord *ev);
void store_event_free(StoreEvent *e);

/* ---- the queue (queue.c) ---- */

/*
 * A bounded multi-producer single-consumer queue of StoreEvent pointers
 * (D. Vyukov's bounded queue): producers claim a cell with one CAS on `head`
 * and publish it through the cell's sequence number; the single consumer
 * advances `tail`.  Lock-free for producers; never blocks; full = drop.
 *
 * Invariants:
 *   capacity is a power of two, mask == capacity - 1;
 *   cell i holds an event iff seq == pos + 1 for the position pos mapped to i;
 *   bytes == sum of size of the events in the queue (approximately, while a
 *   push or pop is in flight);
 *   tail is written by the consumer only.
 */
typedef struct QueueCell {
    _Atomic size_t seq;
    StoreEvent *ev;
} QueueCell;

typedef struct EventQueue {
    QueueCell *cells;            /* owned, capacity cells */
    size_t mask;
    size_t max_bytes;
    _Alignas(64) _Atomic size_t head;   /* next position to claim (producers) */
    _Alignas(64) _Atomic size_t tail;   /* next position to consume (writer) */
    _Alignas(64) _Atomic size_t bytes;  /* bytes of queued events */
} EventQueue;

/* 0, or -1 when out of memory (q untouched). */
int store_queue_init(EventQueue *q, size_t capacity, size_t max_bytes);
/* Frees the cells and every event still queued.  Single-threaded only. */
void store_queue_done(EventQueue *q);
/* Any thread.  0 = queued (the queue owns e), -1 = full (caller still owns e).
   *depth receives the depth after the push, approximately. */
int store_queue_push(EventQueue *q, StoreEvent *e, size_t *depth);
/* Consumer only.  The oldest event, or NULL when empty. */
StoreEvent *store_queue_pop(EventQueue *q);
/* Approximate number of queued events; any thread. */
size_t store_queue_depth(EventQueue *q);
size_t store_queue_capacity(const EventQueue *q);

/* ---- the Store ---- */

typedef struct StoreWriter StoreWriter;   /* writer.c: statements and caches */

struct Store {
    char *path;                  /* owned, as given */
    /* options, defaults applied */
    unsigned flush_ms;
    unsigned busy_ms;
    unsigned batch_max;
    void (*log)(void *, const char *);
    void *log_arg;

    sqlite3 *db;                 /* writer thread only once started; under gate */
    long long run_id;
    StoreWriter *w;              /* owned; writer thread only once started */

    EventQueue queue;

    pthread_t thread;
    bool thread_started;
    pthread_mutex_t gate;        /* held by the writer while it uses db */
    _Atomic int pause_requested; /* store_pause(): the writer thread ends */
    bool paused;                 /* between store_pause() and store_resume() (no writer) */
    int wake_fd[2];              /* pipe, both ends O_NONBLOCK|O_CLOEXEC */
    _Atomic int wake_pending;    /* a wake byte is in the pipe, or about to be */
    _Atomic int stopping;        /* store_close() began */
    _Atomic int exit_requested;  /* store_flush_for_exit(): write all, end the run */
    int exit_fd[2];              /* pipe: the writer writes a byte once it has */
    _Atomic long long epoch;     /* EV_RESETs submitted so far (stamped on events) */

    /* counters (store.h StoreStats); relaxed atomics */
    _Atomic uint64_t submitted;
    _Atomic uint64_t dropped_queue;
    _Atomic uint64_t written;
    _Atomic uint64_t dropped_write;
    _Atomic uint64_t errors;
};

/* ---- sigterm.c ---- */

/* If `s` is the Store the SIGTERM handler flushes, make it none, and wait
   until no handler uses `s` (a handler waits at most its budget).  For
   store_close(), after the writer has ended the run, before freeing. */
void store_sigterm_unwatch(Store *s);

/* ---- writer.c ---- */

/* Prepare the statements and insert this run's `runs` row (s->run_id set).
   Caller's thread, before store_writer_start.  0, or -1 with *errmsg. */
int store_writer_init(Store *s, const StoreOptions *opts, char **errmsg);
/* Start the thread (all signals blocked in it).  0, or -1 with *errmsg. */
int store_writer_start(Store *s, char **errmsg);
/* Make the writer drain now.  Any thread; never blocks. */
void store_writer_wake(Store *s);
/* Finalize statements and free s->w; the thread is not running.  Does not
   close s->db. */
void store_writer_free(Store *s);
/* Forget s->w in a fork child without finalizing anything. */
void store_writer_abandon(Store *s);

/* ---- schema.c ---- */

/*
 * What the file is: 0 and *version set (0 = an empty database, ready to be
 * created; 1..n = a dynscope schema version, possibly newer than ours), or -1
 * with *errmsg (not an SQLite database, not a dynscope database, unreadable).
 */
int store_schema_identify(sqlite3 *db, const char *path, int *version, char **errmsg);

/*
 * Create or migrate the schema to STORE_SCHEMA_VERSION in one IMMEDIATE
 * transaction; re-identifies the file inside it (another process may have
 * done the work).  0, or -1 with *errmsg and the file unchanged.
 */
int store_schema_upgrade(sqlite3 *db, const char *path, char **errmsg);

/* The SQL that takes version v-1 to version v (v in 1..STORE_SCHEMA_VERSION):
   migration 1 is the whole v1 layout.  For tests; NULL if out of range. */
const char *store_schema_migration_sql(int v);

/*
 * On a reader's connection to a file of schema `version` (at least
 * STORE_READ_MIN_VERSION): create the views of later versions as TEMP views,
 * from the same definitions the migrations use, so that a reader sees every
 * view of STORE_SCHEMA_VERSION.  The file is not written.  0, or -1 with
 * *errmsg.
 */
int store_schema_temp_views(sqlite3 *db, int version, const char *path, char **errmsg);

/* ---- read.c ---- */

/* The reader's read-only connection (borrowed), for tests that check what a
   reader sees with SQL of their own.  Not for dyntop: read.h is the model. */
sqlite3 *store_reader_db(StoreReader *r);

/* ---- util.c ---- */

/* *errmsg = malloc'd printf-formatted message (if errmsg is not NULL). */
void store_set_error(char **errmsg, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
uint64_t store_wall_ns(void);
uint64_t store_mono_ns(void);

#endif /* DYNSCOPE_STORE_INT_H */
