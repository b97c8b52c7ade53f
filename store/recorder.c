/*
 * recorder.c -- the Store's lifecycle: open (private file, WAL, schema, run
 * row, writer thread), submit (copy into the queue), stats, pause and fork,
 * close.  Public contract: store.h; folder contract: store_int.h; design:
 * DESIGN.md 4.3.
 *
 * Invariants: store_submit() touches only the queue, the counters, the epoch
 * and (rarely) the wake pipe -- never s->db, never a lock; everything SQLite
 * happens in store_open()'s caller before the writer starts, then in the
 * writer thread only.
 */
#include "store_int.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/*
 * Create `path` with mode 0600 if it does not exist.  An existing file is
 * neither opened nor changed here: opening and closing a descriptor on a
 * database another connection of this process holds would drop that
 * connection's POSIX locks.  0, or -1 with *errmsg.
 */
static int create_private(const char *path, char **errmsg)
{
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd >= 0) {
        int rc = fchmod(fd, 0600);   /* exactly 0600, whatever the umask */
        close(fd);
        if (rc != 0) {
            store_set_error(errmsg, "cannot set mode 0600 on %s: %s", path, strerror(errno));
            return -1;
        }
        return 0;
    }
    if (errno != EEXIST) {
        store_set_error(errmsg, "cannot create %s: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (stat(path, &st) != 0) {
        store_set_error(errmsg, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        store_set_error(errmsg, "cannot record to %s: not a regular file", path);
        return -1;
    }
    return 0;
}

static int exec_simple(sqlite3 *db, const char *sql)
{
    return sqlite3_exec(db, sql, NULL, NULL, NULL);
}

/*
 * exec_simple, retried while SQLITE_BUSY for up to busy_ms.  Needed where
 * SQLite answers BUSY without calling the busy handler: switching a file to
 * WAL takes its exclusive lock in one attempt, so two processes opening a
 * new file at once would otherwise see "database is locked".
 */
static int exec_retry_busy(sqlite3 *db, const char *sql, unsigned busy_ms)
{
    uint64_t deadline = store_mono_ns() + (uint64_t)busy_ms * 1000000u;
    struct timespec pause = {0, 2 * 1000000L};
    for (;;) {
        int rc = exec_simple(db, sql);
        if ((rc & 0xff) != SQLITE_BUSY || store_mono_ns() >= deadline)
            return rc;
        nanosleep(&pause, NULL);
    }
}

/* PRAGMA max_page_count from a byte cap.  0, or -1 with *errmsg. */
static int set_size_cap(Store *s, long long max_bytes, char **errmsg)
{
    sqlite3_stmt *st = NULL;
    long long page_size = 4096;
    if (sqlite3_prepare_v2(s->db, "PRAGMA page_size", -1, &st, NULL) == SQLITE_OK
        && sqlite3_step(st) == SQLITE_ROW)
        page_size = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    long long pages = max_bytes / (page_size > 0 ? page_size : 4096);
    char sql[64];   /* a PRAGMA value cannot be bound: format the number */
    snprintf(sql, sizeof sql, "PRAGMA max_page_count = %lld", pages > 1 ? pages : 1);
    if (exec_simple(s->db, sql) != SQLITE_OK) {
        store_set_error(errmsg, "%s: cannot cap the size: %s", s->path, sqlite3_errmsg(s->db));
        return -1;
    }
    return 0;
}

/* Open the connection and bring the file to our schema.  0, or -1. */
static int open_database(Store *s, long long max_bytes, char **errmsg)
{
    int version;
    int rc = sqlite3_open_v2(s->path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX,
                             NULL);
    if (rc != SQLITE_OK) {
        store_set_error(errmsg, "cannot open %s: %s", s->path,
                        s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc));
        return -1;
    }
    sqlite3_extended_result_codes(s->db, 1);
    sqlite3_busy_timeout(s->db, (int)s->busy_ms);
    if (sqlite3_db_readonly(s->db, "main") == 1) {
        store_set_error(errmsg, "cannot record to %s: the file is not writable", s->path);
        return -1;
    }
    /* Identify before changing anything (the journal mode is a change). */
    if (store_schema_identify(s->db, s->path, &version, errmsg) < 0)
        return -1;
    if (version > STORE_SCHEMA_VERSION) {
        store_set_error(errmsg, "%s was written by a newer dynscope (schema v%d; this "
                        "build knows up to v%d); refusing to write to it", s->path,
                        version, STORE_SCHEMA_VERSION);
        return -1;
    }
    /* WAL: readers (dyntop) never block the writer.  If the file system
       cannot do WAL, SQLite keeps its rollback journal and we still work.
       A 16 MiB page cache and a checkpoint every ~40 MiB of WAL keep the
       index pages a long run keeps touching in memory and write each of them
       to the database once per checkpoint, not once per batch: twice the
       sustained rate on a large file (docs/performance.md). */
    if (exec_retry_busy(s->db, "PRAGMA journal_mode = WAL", s->busy_ms) != SQLITE_OK
        || exec_simple(s->db, "PRAGMA synchronous = NORMAL; PRAGMA cache_size = -16384;"
                              " PRAGMA wal_autocheckpoint = 10000;"
                              " PRAGMA journal_size_limit = 67108864") != SQLITE_OK) {
        store_set_error(errmsg, "cannot set up %s: %s", s->path, sqlite3_errmsg(s->db));
        return -1;
    }
    if (store_schema_upgrade(s->db, s->path, errmsg) < 0)
        return -1;
    if (max_bytes > 0 && set_size_cap(s, max_bytes, errmsg) < 0)
        return -1;
    return 0;
}

/* A pipe with both ends O_NONBLOCK|O_CLOEXEC.  0, or -1 with *errmsg (fd
   entries left -1 or open; store_free closes them). */
int store_pipe_open(int fd[2], char **errmsg)
{
    if (pipe(fd) != 0) {
        fd[0] = fd[1] = -1;
        store_set_error(errmsg, "cannot create a pipe: %s", strerror(errno));
        return -1;
    }
    for (int i = 0; i < 2; i++) {
        int fl = fcntl(fd[i], F_GETFL);
        if (fl < 0 || fcntl(fd[i], F_SETFL, fl | O_NONBLOCK) != 0
            || fcntl(fd[i], F_SETFD, FD_CLOEXEC) != 0) {
            store_set_error(errmsg, "cannot set up a pipe: %s", strerror(errno));
            return -1;
        }
    }
    return 0;
}

void store_pipe_close(int fd[2])
{
    for (int i = 0; i < 2; i++) {
        if (fd[i] >= 0)
            close(fd[i]);
        fd[i] = -1;
    }
}

/* Free what store_open allocated; the thread is not running. */
static void store_free(Store *s)
{
    store_writer_free(s);
    if (s->db != NULL)
        sqlite3_close(s->db);
    store_pipe_close(s->wake_fd);
    store_pipe_close(s->exit_fd);
    store_queue_done(&s->queue);
    pthread_mutex_destroy(&s->gate);
    free(s->path);
    free(s);
}

int store_prepare(const char *path, char **errmsg)
{
    Store s;
    memset(&s, 0, sizeof s);
    s.path = (char *)path;
    s.busy_ms = 2000;
    if (path == NULL || path[0] == '\0') {
        store_set_error(errmsg, "no database path given");
        return -1;
    }
    int rc = create_private(path, errmsg) < 0 ? -1 : open_database(&s, 0, errmsg);
    sqlite3_close(s.db);
    return rc;
}

Store *store_open(const char *path, const StoreOptions *opts, char **errmsg)
{
    StoreOptions o = {0};
    if (errmsg != NULL)
        *errmsg = NULL;
    if (opts != NULL)
        o = *opts;
    if (path == NULL || path[0] == '\0') {
        store_set_error(errmsg, "no database path given");
        return NULL;
    }
    Store *s = calloc(1, sizeof *s);
    if (s == NULL || (s->path = strdup(path)) == NULL) {
        free(s);
        store_set_error(errmsg, "out of memory");
        return NULL;
    }
    s->wake_fd[0] = s->wake_fd[1] = -1;
    s->exit_fd[0] = s->exit_fd[1] = -1;
    s->flush_ms = o.flush_interval_ms ? o.flush_interval_ms : STORE_DEFAULT_FLUSH_MS;
    s->busy_ms = o.busy_timeout_ms ? o.busy_timeout_ms : STORE_DEFAULT_BUSY_MS;
    s->batch_max = o.batch_max ? o.batch_max : STORE_DEFAULT_BATCH_MAX;
    s->log = o.log;
    s->log_arg = o.log_arg;
    pthread_mutex_init(&s->gate, NULL);
    if (store_queue_init(&s->queue,
                         o.queue_capacity ? o.queue_capacity : STORE_DEFAULT_QUEUE_CAPACITY,
                         o.queue_max_bytes ? o.queue_max_bytes
                                           : STORE_DEFAULT_QUEUE_MAX_BYTES) < 0) {
        store_set_error(errmsg, "out of memory");
        goto out_free;
    }
    if (create_private(path, errmsg) < 0 || open_database(s, o.max_db_bytes, errmsg) < 0
        || store_pipe_open(s->wake_fd, errmsg) < 0 || store_pipe_open(s->exit_fd, errmsg) < 0
        || store_writer_init(s, &o, errmsg) < 0
        || store_writer_start(s, errmsg) < 0)
        goto out_free;
    return s;

out_free:
    if (errmsg != NULL && *errmsg == NULL)
        store_set_error(errmsg, "cannot record to %s", path);
    store_free(s);
    return NULL;
}

/* A compile's end (its start, breaks, guard failures and graphs are queued
   before it), a cache limit, a reset: rare, and the rows users query, so
   the writer is woken for them rather than at its next interval.  A process
   that dies soon after (Pool.terminate()'s SIGTERM at the end of a `with`)
   has them on disk already, even when its exit flush cannot finish (a lock
   the writer needs held by the thread the signal interrupted).  Wakes are
   coalesced (store_writer_wake): a burst of compiles is still a few
   transactions. */
static bool writes_promptly(EventKind kind)
{
    return kind == EV_COMPILE_END || kind == EV_CACHE_LIMIT || kind == EV_RESET;
}

int store_submit(Store *s, const EventRecord *ev)
{
    atomic_fetch_add_explicit(&s->submitted, 1, memory_order_relaxed);
    if (atomic_load_explicit(&s->stopping, memory_order_relaxed))
        goto out_drop;
    long long epoch = ev->kind == EV_RESET
                          ? atomic_fetch_add(&s->epoch, 1) + 1
                          : atomic_load_explicit(&s->epoch, memory_order_relaxed);
    StoreEvent *e = store_event_copy(ev);
    if (e == NULL)
        goto out_drop;
    e->epoch = epoch;
    size_t depth;
    if (store_queue_push(&s->queue, e, &depth) < 0) {
        store_event_free(e);
        goto out_drop;
    }
    if (depth >= store_queue_capacity(&s->queue) / 2
        || atomic_load_explicit(&s->queue.bytes, memory_order_relaxed) >= s->queue.max_bytes / 2
        || writes_promptly(ev->kind))
        store_writer_wake(s);
    return 0;

out_drop:
    atomic_fetch_add_explicit(&s->dropped_queue, 1, memory_order_relaxed);
    return -1;
}

StoreStats store_close(Store *s)
{
    StoreStats final = {0};
    if (s == NULL)
        return final;
    STORE_ASSERT(!s->paused);
    atomic_store(&s->stopping, 1);
    if (s->thread_started) {
        store_writer_wake(s);
        pthread_join(s->thread, NULL);   /* drains, writes the run's end, closes db */
        s->thread_started = false;
    }
    /* A SIGTERM during the close flushes this very Store (the writer's last
       act wakes the handler); no handler may use it once it is freed. */
    store_sigterm_unwatch(s);
    final = store_stats(s);
    store_free(s);
    return final;
}

int store_flush_for_exit(Store *s, unsigned timeout_ms)
{
    /* Only atomics, write(2), poll(2) and read(2): async-signal-safe. */
    if (s == NULL || !s->thread_started)
        return -1;
    atomic_store(&s->exit_requested, 1);
    store_writer_wake(s);
    struct pollfd p = {.fd = s->exit_fd[0], .events = POLLIN};
    int r;
    do
        r = poll(&p, 1, (int)timeout_ms);   /* a signal may cut it short: a bound, not a deadline */
    while (r < 0 && errno == EINTR);
    return r > 0 && (p.revents & POLLIN) ? 0 : -1;
}

StoreStats store_stats(Store *s)
{
    StoreStats st = {0};
    if (s == NULL)
        return st;
    st.submitted = atomic_load_explicit(&s->submitted, memory_order_relaxed);
    st.written = atomic_load_explicit(&s->written, memory_order_relaxed);
    st.dropped_queue = atomic_load_explicit(&s->dropped_queue, memory_order_relaxed);
    st.dropped_write = atomic_load_explicit(&s->dropped_write, memory_order_relaxed);
    st.dropped = st.dropped_queue + st.dropped_write;
    st.errors = atomic_load_explicit(&s->errors, memory_order_relaxed);
    st.pending = store_queue_depth(&s->queue);
    st.run_id = s->run_id;
    return st;
}

int store_pause(Store *s)
{
    if (s == NULL || s->paused)
        return 0;
    s->paused = true;
    if (!s->thread_started)
        return 0;
    atomic_store(&s->pause_requested, 1);
    store_writer_wake(s);
    pthread_join(s->thread, NULL);     /* it leaves between transactions */
    s->thread_started = false;
    return 1;
}

void store_resume(Store *s)
{
    if (s == NULL || !s->paused)
        return;
    s->paused = false;
    atomic_store(&s->pause_requested, 0);
    char *err = NULL;
    if (store_writer_start(s, &err) < 0) {
        /* events queue up, then are dropped and counted */
        atomic_fetch_add_explicit(&s->errors, 1, memory_order_relaxed);
        if (s->log != NULL)
            s->log(s->log_arg, err ? err : "cannot restart the writer thread");
        free(err);
    }
}

void store_forget_after_fork(Store *s)
{
    if (s == NULL)
        return;
    if (s->paused && s->db != NULL) {
        /* The writer had ended before fork(): no statement is active and no
           transaction is open, so closing is a local act -- it releases this
           process's view of the file's locks and touches nothing on disk
           that the parent relies on (a checkpoint needs an exclusive lock,
           which the parent's open connection denies). */
        store_writer_free(s);
        sqlite3_close(s->db);
    }
    else {
        store_writer_abandon(s);   /* the connection may be mid-transaction: leak it */
    }
    s->db = NULL;
    store_pipe_close(s->wake_fd);
    store_pipe_close(s->exit_fd);
    store_queue_done(&s->queue);   /* the parent writes these; here they are copies */
    /* gate: possibly locked, and by a thread that may not exist here; its
       memory goes with s, the mutex is not destroyed. */
    free(s->path);
    free(s);
}
