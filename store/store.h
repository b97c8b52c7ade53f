/*
 * store.h -- the SQLite recorder of dynscope (DESIGN.md 4.3): a plain-C
 * library that turns engine events (event/event.h) into rows of a
 * versioned SQLite schema (docs/sql.md).  Reading the file is read.h's
 * (the read model dyntop and the C tests use), included here.
 *
 * Writing.  store_open() creates or migrates the database and starts one
 * writer thread; store_submit() copies an event into a bounded in-memory
 * queue and returns at once -- it never performs I/O and never waits for the
 * writer.  The writer batches queued events into transactions (WAL mode,
 * prepared statements) every flush interval, earlier when the queue is half
 * full, and on store_close().  Recording fails soft: a full queue, a locked
 * database, a full disk or any other write error drops the events concerned,
 * counts them (StoreStats, runs.dropped_events) and reports each kind of
 * failure once through the log function; the producer never sees it.
 *
 * Threads.  store_submit() may be called from any number of threads at once.
 * store_stats() from any thread.  store_close() once, from any thread, after
 * every producer has stopped calling store_submit() on that Store.
 *
 * fork().  Threads do not survive fork(), and an SQLite connection must not be
 * used on both sides of one.  Register, around fork():
 *     prepare: store_pause(s)                (the writer thread ends, outside SQLite)
 *     parent:  store_resume(s)
 *     child:   store_forget_after_fork(s); s = NULL; then store_open() anew
 * store_forget_after_fork() never touches the parent's writer thread or
 * transaction: see its contract below.
 *
 * Errors.  Functions returning int return 0 on success and -1 on failure.
 * An `errmsg` out-parameter, when not NULL, receives a malloc'd message on
 * failure (free() it) and is set to NULL on success.
 *
 * Python.h stays out of this library (STYLE.md).
 */
#ifndef DYNSCOPE_STORE_H
#define DYNSCOPE_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "../event/event.h"
#include "read.h"       /* the file's versions, and reading it */

typedef struct Store Store;

/* Options of store_open().  A zeroed struct (or NULL) means the defaults. */
typedef struct StoreOptions {
    /* runs.argv: recorded as a JSON array of strings; argv may be NULL. */
    const char *const *argv;
    int argc;
    /* runs.python: the interpreter's version string; NULL stores NULL. */
    const char *python;
    /* runs.redacted: what the recording redacts ("values,paths",
       dynscope/redact.py); NULL stores NULL (nothing). */
    const char *redacted;
    /* Queue bound in events (rounded up to a power of two); default 16384. */
    unsigned queue_capacity;
    /* Queue bound in bytes of copied events; default 64 MiB. */
    size_t queue_max_bytes;
    /* Write what is queued at least this often, in ms; default 500. */
    unsigned flush_interval_ms;
    /* How long a write waits for another connection's lock; default 2000 ms.
       Past it the batch is dropped and counted. */
    unsigned busy_timeout_ms;
    /* Events per transaction at most; default 16384.  Bigger batches write
       fewer pages per event; each one holds the write lock a little longer. */
    unsigned batch_max;
    /* Cap the database size (PRAGMA max_page_count), bytes; 0 = no cap.
       Writes past it fail soft like a full disk. */
    long long max_db_bytes;
    /* Where the one-time failure reports go.  NULL: one line on stderr.
       Called from the writer thread; msg has no trailing newline. */
    void (*log)(void *log_arg, const char *msg);
    void *log_arg;
} StoreOptions;

/* Counters of one Store; consistent with each other once store_close() has
   started (then submitted == written + dropped). */
typedef struct StoreStats {
    uint64_t submitted;      /* store_submit() calls */
    uint64_t written;        /* events committed to the database */
    uint64_t dropped;        /* dropped_queue + dropped_write */
    uint64_t dropped_queue;  /* queue full (events or bytes) or out of memory */
    uint64_t dropped_write;  /* their transaction or statement failed */
    uint64_t errors;         /* failed transactions and statements */
    uint64_t pending;        /* in the queue now (approximate) */
    long long run_id;        /* runs.run_id of this Store */
} StoreStats;

/* Who records (ident.c): the runs row's host, pid and, from torchrun's
   environment, rank, local rank and world size (-1: not set). */
typedef struct StoreIdentity {
    char host[256];
    long long pid;
    int rank, local_rank, world_size;
} StoreIdentity;
/* This process's identity now.  Cannot fail ("?" for an unknown host). */
void store_identity(StoreIdentity *id);

/*
 * A database path template expanded for this process: %h its host name, %p
 * its pid, %r its rank ($RANK; 0 when unset), %% a %.  A malloc'd string,
 * or NULL with *errmsg set (an unknown %x; out of memory).
 */
char *store_expand_path(const char *tmpl, char **errmsg);

/*
 * Open (creating if absent, mode 0600) the database at `path`, bring its
 * schema to STORE_SCHEMA_VERSION, insert this process's `runs` row (pid,
 * host, rank, local rank, world size, opts->argv, opts->python, started_at)
 * and start the writer thread.  `path` is a file name, not a template.
 *
 * Fails, returning NULL and setting *errmsg, when: the file cannot be created
 * or opened read-write; it is not an SQLite database; it is an SQLite database
 * that is not a dynscope one (other application_id, or tables without one);
 * its schema is newer than this build; the schema cannot be created or
 * migrated (e.g. locked past busy_timeout_ms); the thread cannot start.
 * Nothing is printed: the caller reports *errmsg.  Nothing is left running.
 */
Store *store_open(const char *path, const StoreOptions *opts, char **errmsg);

/*
 * Create `path` (mode 0600) or open it, and bring it to this build's schema,
 * as store_open does, without a run: a file that tools (`dynscope merge`)
 * then fill with SQL of their own.  0, or -1 with *errmsg for the reasons
 * store_open gives.
 */
int store_prepare(const char *path, char **errmsg);

/*
 * Copy `ev` (every string included) into the queue.  Never blocks on the
 * writer and performs no I/O (at most one write(2) of one byte to a pipe, to
 * wake the writer early when the queue passes half full).  Returns 0 if
 * queued, -1 if dropped (queue full, out of memory, store closing); every
 * drop is counted.  NULL strings in `ev` are taken as "".
 */
int store_submit(Store *s, const EventRecord *ev);

/*
 * Write everything queued, set runs.ended_at and runs.dropped_events, stop
 * the writer thread, close the database and free `s`.  Blocks until done
 * (at most about two busy timeouts when the database stays locked).  Returns
 * the final counters (submitted == written + dropped); s == NULL: no-op,
 * zeroed counters.  Precondition: no store_submit() on `s` runs or follows.
 */
StoreStats store_close(Store *s);

/*
 * For a process about to die (a fatal signal's handler): ask the writer to
 * write everything queued and record the end of the run (runs.ended_at,
 * runs.dropped_events), and wait for it at most `timeout_ms`.  Returns 0 once
 * written, -1 on timeout or when the Store has no writer.  `s` stays open
 * and usable (the writer keeps writing what comes later, and a
 * store_close() still ends the run).  Async-signal-safe: it uses only
 * atomics, write(2), poll(2); it takes no lock and allocates nothing -- the
 * writer thread does the work, so a handler that interrupted a thread
 * holding any lock cannot deadlock on it for longer than the timeout.
 */
int store_flush_for_exit(Store *s, unsigned timeout_ms);

/*
 * SIGTERM: a process that records and would die of SIGTERM (its disposition
 * is SIG_DFL) first lets the writer flush, for at most timeout_ms, then dies
 * of SIGTERM as it would have (sigterm.c).  The handler runs no Python, takes
 * no lock, and only calls async-signal-safe functions.
 *
 * store_sigterm_install(): install the handler if SIGTERM's disposition is
 *   SIG_DFL (a program's own handler, or SIG_IGN, is left alone).  Returns 1
 *   if installed (or already), 0 if the program has its own, -1 on error.
 * store_sigterm_uninstall(): put SIG_DFL back if our handler is still the
 *   one installed (a handler the program set since is left alone).
 * store_sigterm_watch(s, notify_fd, ack_fd, can_answer): the Store the
 *   handler flushes (NULL: none).  Before flushing, if can_answer is NULL or
 *   returns nonzero in the handler (it must be async-signal-safe), the
 *   handler writes one byte to notify_fd and waits up to half its time for
 *   a byte on ack_fd (-1, -1: no one to notify): the engine's snapshot
 *   thread queues its counters then, if the interrupted thread does not hold
 *   the GIL it needs.  Waits until no handler uses the previous Store.
 *   store_close() of the watched Store unwatches it itself, once the run's
 *   end is written (a SIGTERM during the close waits for that, not longer).
 * store_sigterm_after_fork_child(): forget the parent's Store and any
 *   handler that was running in a thread that does not exist here.
 */
int store_sigterm_install(unsigned timeout_ms);
void store_sigterm_uninstall(void);
void store_sigterm_watch(Store *s, int notify_fd, int ack_fd, int (*can_answer)(void));
void store_sigterm_after_fork_child(void);
/* No one to notify from now on (the snapshot thread is about to stop); the
   watched Store is still flushed. */
void store_sigterm_forget_notify(void);
/* A snapshot thread is back (after store_sigterm_forget_notify()): the
   handler asks it again through these pipe ends, as store_sigterm_watch()
   set them.  Cannot fail. */
void store_sigterm_notify(int notify, int ack);

/* A pipe with both ends O_NONBLOCK|O_CLOEXEC (the writer's wake-ups, and the
   engine's snapshot thread).  0, or -1 with *errmsg and fd[] = -1 or open
   (store_pipe_close them).  store_pipe_close: closes the open ends, sets
   them to -1. */
int store_pipe_open(int fd[2], char **errmsg);
void store_pipe_close(int fd[2]);

/* A snapshot of the counters.  Cannot fail; any thread. */
StoreStats store_stats(Store *s);

/*
 * End the writer thread outside SQLite until store_resume() starts a new one:
 * returns once the transaction in progress (if any) has ended and the thread
 * is joined.  A process that forks then has no thread of the store's (from
 * CPython 3.12 os.fork() warns when a process has more than one), and the
 * child inherits an idle connection.  Producers are unaffected (the queue
 * fills, then drops); store_flush_for_exit() answers -1 at once meanwhile.
 * For the prepare handler of a fork, and for tests.  Repeated calls are one;
 * pair with store_resume() or, in a fork child, store_forget_after_fork().
 * Returns the number of threads it ended (0 or 1): a joined thread is still
 * counted by the kernel for a moment (see record.c's before-fork hook).
 */
int store_pause(Store *s);
void store_resume(Store *s);

/*
 * In a fork child: release the parent's Store without touching the parent's
 * writer thread (it does not exist here) or its pending transaction.  Events
 * still queued belong to the parent, which writes them.  If the parent called
 * store_pause() before fork(), the inherited connection is idle and is
 * closed, so that a new Store on the same file in the child uses fresh SQLite
 * lock state (SQLite tracks POSIX locks per process and inode; an inherited
 * connection would make the child share the parent's view of them);
 * otherwise the connection is leaked as is, never used.  s == NULL: no-op.
 */
void store_forget_after_fork(Store *s);

#endif /* DYNSCOPE_STORE_H */
