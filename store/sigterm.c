/*
 * sigterm.c -- a recording process killed by SIGTERM keeps what it recorded:
 * a C handler asks the writer thread to flush (store_flush_for_exit), waits
 * a bounded time, then lets the process die of SIGTERM as it would have.
 * Contract: store.h (store_sigterm_*); why it is built this way:
 * docs/recording.md, "What dynscope installs in your process".
 *
 * Invariants:
 *   - the handler runs no Python and takes no lock: it uses atomics and the
 *     async-signal-safe calls write, poll, clock_gettime, sigaction,
 *     pthread_sigmask and raise only.  The thread it interrupts may hold any lock (the GIL, a
 *     program's lock, malloc's); the writer thread, which never needs the
 *     GIL, does the flushing;
 *   - it waits at most `timeout_ms`, then the process dies of SIGTERM (the
 *     exit status a parent sees is the one it would see without dynscope);
 *     whatever the writer did not write by then is lost with the process,
 *     never waited for;
 *   - it is installed only over SIG_DFL: a program's own handler or SIG_IGN
 *     is never replaced, and a handler the program installs later replaces
 *     ours (signal.signal does);
 *   - `watched` is the Store the handler may use, and only in the process
 *     that set it (`watched_pid`: a fork child sees its parent's until its
 *     after-fork hook runs); store_sigterm_watch()
 *     changes it and then waits for handlers still using the old one, so a
 *     Store is never freed under a running handler.
 */
#include "store_int.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static _Atomic(Store *) watched;        /* the Store to flush, or NULL */
static _Atomic pid_t watched_pid;       /* the process whose Store it is */
static _Atomic int notify_fd = -1;      /* written before the flush, or -1 */
static _Atomic int ack_fd = -1;         /* read: the notified party is done */
/* Whether the notified party can answer while this thread sits in the
   handler (the engine: this thread does not hold the GIL); NULL = yes. */
static int (*_Atomic can_answer)(void);
static _Atomic int handlers_running;    /* handlers between reading watched and done */
static _Atomic unsigned flush_timeout_ms = 1000;
static _Atomic int installed;           /* our handler was installed (maybe replaced since) */

/* At most this long for the notified party, whatever the budget. */
#define NOTIFY_MAX_MS 100u

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);   /* async-signal-safe */
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Let the notified party (the engine's snapshot thread: entry counters that
   live outside the queue) queue what it holds: one byte to notify_fd, then
   wait up to `limit` ms for one on ack_fd.  Returns the ms spent. */
static unsigned notify_and_wait(unsigned limit)
{
    int nfd = atomic_load(&notify_fd), afd = atomic_load(&ack_fd);
    int (*answerable)(void) = atomic_load(&can_answer);
    if (nfd < 0 || afd < 0 || (answerable != NULL && !answerable()))
        return 0;
    uint64_t start = now_ms();
    char b = 't';
    if (write(nfd, &b, 1) != 1)
        return 0;
    struct pollfd p = {.fd = afd, .events = POLLIN};
    int r;
    do
        r = poll(&p, 1, (int)limit);
    while (r < 0 && errno == EINTR);
    uint64_t spent = now_ms() - start;
    return spent > limit ? limit : (unsigned)spent;
}

static void on_sigterm(int signo)
{
    int saved_errno = errno;
    atomic_fetch_add(&handlers_running, 1);
    Store *s = atomic_load(&watched);
    /* A fork child that has not reached its after-fork hooks yet (lttng-ust's
       fork wrapper can hold it in fork() for a while) still sees the
       parent's Store: its writer and pipes are the parent's.  The child has
       recorded nothing of its own: it dies at once, as it would have. */
    if (s != NULL && atomic_load(&watched_pid) != getpid())
        s = NULL;
    if (s != NULL) {
        unsigned budget = atomic_load(&flush_timeout_ms);
        /* A snapshot thread that can run answers in a millisecond or two;
           one that cannot (a lock its thread needs is held here) must not
           hold up the death the program's parent waits for. */
        unsigned used = notify_and_wait(budget / 2 < NOTIFY_MAX_MS ? budget / 2 : NOTIFY_MAX_MS);
        (void)store_flush_for_exit(s, budget - used);
    }
    atomic_fetch_sub(&handlers_running, 1);

    /* Die of the signal, as the program would have: default disposition,
       re-raise (pending while this handler blocks it), unblock. */
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(signo, &dfl, NULL);
    raise(signo);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, signo);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    errno = saved_errno;   /* only reached if the signal was blocked elsewhere */
}

int store_sigterm_install(unsigned timeout_ms)
{
    atomic_store(&flush_timeout_ms, timeout_ms);
    struct sigaction cur;
    if (sigaction(SIGTERM, NULL, &cur) != 0)
        return -1;
    if (!(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == on_sigterm)
        return 1;
    if ((cur.sa_flags & SA_SIGINFO) || cur.sa_handler != SIG_DFL)
        return 0;   /* the program's own handler, or SIG_IGN */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigterm;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    if (sigaction(SIGTERM, &sa, NULL) != 0)
        return -1;
    atomic_store(&installed, 1);
    return 1;
}

void store_sigterm_uninstall(void)
{
    if (!atomic_exchange(&installed, 0))
        return;
    struct sigaction cur;
    if (sigaction(SIGTERM, NULL, &cur) != 0)
        return;
    if (!(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == on_sigterm) {
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        sigemptyset(&dfl.sa_mask);
        sigaction(SIGTERM, &dfl, NULL);
    }
}

void store_sigterm_watch(Store *s, int notify, int ack, int (*answerable)(void))
{
    if (s != NULL) {
        atomic_store(&watched_pid, getpid());
        atomic_store(&notify_fd, notify);
        atomic_store(&ack_fd, ack);
        atomic_store(&can_answer, answerable);
    }
    atomic_store(&watched, s);
    /* A handler that read the old Store runs at most its timeout (then the
       process dies): wait for it rather than free what it uses. */
    struct timespec pause = {0, 1000000L};
    while (atomic_load(&handlers_running) > 0)
        nanosleep(&pause, NULL);
}

void store_sigterm_forget_notify(void)
{
    atomic_store(&notify_fd, -1);
    atomic_store(&ack_fd, -1);
}

void store_sigterm_notify(int notify, int ack)
{
    atomic_store(&ack_fd, ack);
    atomic_store(&notify_fd, notify);
}

void store_sigterm_unwatch(Store *s)
{
    Store *expected = s;
    if (atomic_compare_exchange_strong(&watched, &expected, NULL)) {
        struct timespec pause = {0, 1000000L};
        while (atomic_load(&handlers_running) > 0)
            nanosleep(&pause, NULL);
    }
}

void store_sigterm_after_fork_child(void)
{
    atomic_store(&watched, NULL);
    atomic_store(&notify_fd, -1);
    atomic_store(&ack_fd, -1);
    atomic_store(&handlers_running, 0);
}
