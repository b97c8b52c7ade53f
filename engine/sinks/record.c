/*
 * record.c -- starting, stopping and feeding the SQLite recorder from the
 * engine (contract in record.h; the store itself is store/, plain C).
 *
 * Python sees: _C.record_start(path, argv, python) -> run_id,
 * _C.record_stop() -> stats dict, _C.record_snapshot() (entry counters),
 * _C.record_stats(), _C.record_sigterm_install(ms) / _uninstall() (the
 * C SIGTERM flush, store/sigterm.c), and the fork hooks _C.record_before_fork /
 * _C.record_after_fork_parent / _C.record_after_fork_child.
 *
 * Failing soft: a database that cannot be opened raises at record_start()
 * (the user asked for it and must know); once recording, nothing here ever
 * raises into the program -- the store drops and counts.
 */
#include "sinks.h"
#include "../base/pycompat.h"
#include "../capture/capture.h"
#include "../capture/events.h"
#include "../../store/store.h"

#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static Store *the_store;          /* GIL; NULL when not recording */
static PyObject *store_path;      /* strong: the path as given: a template (%h %p
                                     %r), expanded at each open (a fork child's
                                     %p is its own pid) */
static PyObject *store_file;      /* strong: the file being recorded to */
static PyObject *store_argv;      /* strong: list of str, for a child's runs row */
static PyObject *store_python;    /* strong: str */
static PyObject *store_redacted;  /* strong str or NULL: runs.redacted (DYNSCOPE_REDACT) */
static StoreStats last_stats;     /* of the last store closed */

/* The snapshot thread's pipes, per process (made at the first record_start,
   made anew in a fork child; both ends O_NONBLOCK|O_CLOEXEC, never closed
   while the process records):
     snap_wake: 't' from the SIGTERM handler (queue the counters now, the
                process is about to die), 's' from stop_recording (exit);
     snap_ack:  a byte from the thread once a 't' snapshot is queued. */
static int snap_wake[2] = {-1, -1};
static int snap_ack[2] = {-1, -1};

/* For the SIGTERM handler: whether the snapshot thread could take the GIL
   while the interrupted thread sits in the handler.  PyGILState_Check reads
   an atomic and a thread-local: no lock, no allocation. */
static int gil_not_held_here(void)
{
    return !PyGILState_Check();
}

/* Make the snapshot pipes if not made.  0, or -1 with OSError set. */
static int snapshot_pipes(void)
{
    if (snap_wake[0] >= 0 && snap_ack[0] >= 0)
        return 0;
    store_pipe_close(snap_wake);
    store_pipe_close(snap_ack);
    char *err = NULL;
    if (store_pipe_open(snap_wake, &err) < 0 || store_pipe_open(snap_ack, &err) < 0) {
        PyErr_Format(PyExc_OSError, "dynscope: %s", err ? err : "cannot create a pipe");
        free(err);
        store_pipe_close(snap_wake);
        store_pipe_close(snap_ack);
        return -1;
    }
    return 0;
}

/* Hand an event to the Store (copied; never blocks).  No-op when idle. */
/* GIL: the recording's threads were stopped for a fork and are not
   running again yet (threads_restart, below). */
static bool threads_restart_pending;
static bool snap_was_started;       /* GIL: the snapshot thread ran when fork() began */
static void threads_restart_if_pending(void);

static void record_submit(const EventRecord *ev)
{
    threads_restart_if_pending();
    if (the_store != NULL)
        (void)store_submit(the_store, ev);   /* drops are counted by the store */
}

/* The SQLite sink (events.h): every kind, with every text field, while a
   Store is open.  A private capture (explain) never reaches it.  A miss's
   guard failures come packed in its EV_RECOMPILE or EV_CACHE_LIMIT
   (event.h failures_packed), not as one EV_GUARD_FAIL per older entry: in
   a recompile storm those were most of the events, and most of what
   recording cost the program (docs/performance.md). */
static bool sqlite_wanted(void *ctx, EventKind kind)
{
    (void)ctx;
    (void)kind;
    return the_store != NULL;
}

/* ---- redaction at recording time (DYNSCOPE_REDACT, record(redact=...)) ----
   The text fields that can hold a value a guard saw, or a path: each goes
   through the Python redactor (dynscope/redact.py Redactor.record_fields)
   before the Store copies the event.  An event the redactor fails on is
   dropped, never written as it was (logged once, counted). */

static PyObject *redactor;           /* strong or NULL: callable(kind, {field: str}) -> dict */

static const struct {
    const char *name;
    size_t offset;
} redacted_fields[] = {
#define FIELD(f) {#f, offsetof(EventRecord, f)}
    FIELD(filename),    FIELD(reason),       FIELD(guards_text),  FIELD(guard_sites_json),
    FIELD(call_path_json), FIELD(expr),      FIELD(observed),     FIELD(guard_file),
    FIELD(nearest_json), FIELD(failures_packed), FIELD(break_file), FIELD(user_stack_json),
    FIELD(graph_code),  FIELD(annotation_fields),
#undef FIELD
};
#define NREDACTED (sizeof redacted_fields / sizeof redacted_fields[0])

static const char **redacted_field(EventRecord *r, size_t i)
{
    return (const char **)(void *)((char *)r + redacted_fields[i].offset);
}

/* Redact copy's fields in place; returns the dict whose str values they
   now point into (keep it until the Store has copied the event), or NULL
   with an exception. */
static PyObject *redact_record(EventRecord *copy)
{
    PyObject *fields = PyDict_New();
    for (size_t i = 0; fields != NULL && i < NREDACTED; i++) {
        const char *v = *redacted_field(copy, i);
        if (v == NULL || v[0] == '\0')
            continue;
        PyObject *s = PyUnicode_DecodeUTF8(v, (Py_ssize_t)strlen(v), "surrogateescape");
        if (s == NULL || PyDict_SetItemString(fields, redacted_fields[i].name, s) < 0)
            Py_CLEAR(fields);
        Py_XDECREF(s);
    }
    PyObject *out = fields ? PyObject_CallFunction(redactor, "sO", event_kind_name(copy->kind), fields)
                           : NULL;
    Py_XDECREF(fields);
    if (out != NULL && !PyDict_Check(out)) {
        PyErr_SetString(PyExc_TypeError, "the redactor must return a dict");
        Py_CLEAR(out);
    }
    for (size_t i = 0; out != NULL && i < NREDACTED; i++) {
        PyObject *s = PyDict_GetItemString(out, redacted_fields[i].name);   /* borrowed */
        if (s == NULL)
            continue;
        const char *utf8 = PyUnicode_Check(s) ? PyUnicode_AsUTF8(s) : NULL;
        if (utf8 == NULL) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "the redactor must give str values");
            Py_CLEAR(out);
            break;
        }
        *redacted_field(copy, i) = utf8;
    }
    return out;
}

static void sqlite_emit(void *ctx, Event *ev)
{
    (void)ctx;
    const EventRecord *r = event_record(ev, EVF_ALL);
    if (redactor == NULL) {
        record_submit(r);
        return;
    }
    EventRecord copy = *r;
    PyObject *keep = redact_record(&copy);
    if (keep == NULL) {
        warn_internal_error("redacting an event (it was dropped, not written)");
        return;
    }
    record_submit(&copy);               /* the Store copies the strings */
    Py_DECREF(keep);
}

static PyObject *py_record_redactor(PyObject *self, PyObject *fn)
{
    (void)self;
    if (fn != Py_None && !PyCallable_Check(fn)) {
        PyErr_SetString(PyExc_TypeError, "record_redactor: expected a callable or None");
        return NULL;
    }
    Py_XSETREF(redactor, fn == Py_None ? NULL : Py_NewRef(fn));
    Py_RETURN_NONE;
}

static EventSink sqlite_sink = {
    .name = "the SQLite recorder",
    .mask = EV_MASK_ALL & ~EV_MASK(EV_GUARD_FAIL),
    .wants = sqlite_wanted,
    .emit = sqlite_emit,
};

/* Open a Store on the file path (a template) names for this process, with
   argv (list of str) and python (str); store_file is that file.  0, or -1
   with an exception naming the reason. */
static int open_store(PyObject *path, PyObject *argv, PyObject *python)
{
    Py_ssize_t n = PyList_GET_SIZE(argv);
    const char **cargv = PyMem_Calloc((size_t)n + 1, sizeof(char *));
    if (cargv == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        cargv[i] = PyUnicode_AsUTF8(PyList_GET_ITEM(argv, i));
        if (cargv[i] == NULL) {
            PyMem_Free(cargv);
            return -1;
        }
    }
    const char *tmpl = PyUnicode_AsUTF8(path);
    const char *cpy = PyUnicode_AsUTF8(python);
    if (tmpl == NULL || cpy == NULL) {
        PyMem_Free(cargv);
        return -1;
    }
    char *err = NULL;
    char *cpath = store_expand_path(tmpl, &err);
    PyObject *file = cpath ? PyUnicode_DecodeFSDefault(cpath) : NULL;
    if (file == NULL) {
        if (cpath == NULL)
            PyErr_Format(PyExc_OSError, "dynscope: cannot record to %U: %s", path,
                         err ? err : "out of memory");
        free(err);
        free(cpath);
        PyMem_Free(cargv);
        return -1;
    }
    if (snapshot_pipes() < 0) {
        free(cpath);
        Py_DECREF(file);
        PyMem_Free(cargv);
        return -1;
    }
    StoreOptions opts;
    memset(&opts, 0, sizeof(opts));
    opts.argv = cargv;
    opts.argc = (int)n;
    opts.python = cpy;
    opts.redacted = store_redacted ? PyUnicode_AsUTF8(store_redacted) : NULL;
    if (store_redacted != NULL && opts.redacted == NULL) {
        free(cpath);
        Py_DECREF(file);
        PyMem_Free(cargv);
        return -1;
    }
    Store *s;
    /* SIGTERM waits (in this thread) from before the runs row exists until
       the handler knows the Store: a SIGTERM in between would leave a run
       that never ends (a pool worker terminated while it still opens its
       Store after the fork).  The wait is bounded by the open's busy
       timeout. */
    sigset_t term, saved;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &term, &saved);
    Py_BEGIN_ALLOW_THREADS
    s = store_open(cpath, &opts, &err);
    Py_END_ALLOW_THREADS
    PyMem_Free(cargv);
    free(cpath);
    if (s == NULL) {
        pthread_sigmask(SIG_SETMASK, &saved, NULL);
        PyErr_Format(PyExc_OSError, "dynscope: cannot record to %U: %s", file,
                     err ? err : "unknown error");
        free(err);
        Py_DECREF(file);
        return -1;
    }
    the_store = s;
    Py_XSETREF(store_file, file);
    store_sigterm_watch(s, snap_wake[1], snap_ack[0], gil_not_held_here);
    pthread_sigmask(SIG_SETMASK, &saved, NULL);    /* a pending SIGTERM lands now */
    return 0;
}

static PyObject *stats_dict(StoreStats st)
{
    return Py_BuildValue("{s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:L}", "submitted", st.submitted,
                         "written", st.written, "dropped", st.dropped, "dropped_queue",
                         st.dropped_queue, "dropped_write", st.dropped_write, "errors",
                         st.errors, "pending", st.pending, "run_id", st.run_id);
}

static PyObject *py_record_start(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *path, *argv, *python, *redacted = Py_None;
    if (!PyArg_ParseTuple(args, "UO!U|O:record_start", &path, &PyList_Type, &argv, &python,
                          &redacted))
        return NULL;
    if (redacted != Py_None && !PyUnicode_Check(redacted)) {
        PyErr_SetString(PyExc_TypeError, "record_start: redacted must be a str or None");
        return NULL;
    }
    if (the_store != NULL) {
        PyErr_Format(PyExc_RuntimeError, "dynscope: already recording to %U", store_file);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(argv); i++) {
        if (!PyUnicode_Check(PyList_GET_ITEM(argv, i))) {
            PyErr_SetString(PyExc_TypeError, "argv must be a list of str");
            return NULL;
        }
    }
    Py_XSETREF(store_redacted, redacted == Py_None ? NULL : Py_NewRef(redacted));
    if (open_store(path, argv, python) < 0)
        return NULL;
    Py_XSETREF(store_path, Py_NewRef(path));
    Py_XSETREF(store_argv, PySequence_List(argv));
    Py_XSETREF(store_python, Py_NewRef(python));
    capture_cost_sampling(true);        /* what calls cost: entry_stats */
    return PyLong_FromLongLong(store_stats(the_store).run_id);
}

/* Close the store: everything queued is written.  The GIL is released while
   the writer finishes (it never needs it), but no event can reach the store
   meanwhile: the pointer is cleared first, under the GIL. */
static PyObject *py_record_stop(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    Store *s = the_store;
    if (s == NULL)
        Py_RETURN_NONE;
    if (threads_restart_pending) {      /* after a fork: the writer, to close */
        threads_restart_pending = false;
        snap_was_started = false;
        store_resume(s);
    }
    the_store = NULL;
    capture_cost_sampling(false);
    StoreStats st;
    Py_BEGIN_ALLOW_THREADS
    st = store_close(s);          /* a SIGTERM meanwhile still flushes s, then dies */
    Py_END_ALLOW_THREADS
    last_stats = st;
    return stats_dict(st);
}

/* store_temp_views_sql(version) -> str: what a read-only reader of a file
   of that schema version runs to see every view of this build; ValueError
   for a version no reader reads. */
static PyObject *py_store_temp_views_sql(PyObject *self, PyObject *arg)
{
    (void)self;
    long v = PyLong_AsLong(arg);
    if (v == -1 && PyErr_Occurred())
        return NULL;
    char *sql = v >= INT_MIN && v <= INT_MAX ? store_temp_views_sql((int)v) : NULL;
    if (sql == NULL)
        return PyErr_Format(PyExc_ValueError, "schema v%ld is not readable (this build reads "
                            "v%d to v%d)", v, STORE_READ_MIN_VERSION, STORE_SCHEMA_VERSION);
    PyObject *r = PyUnicode_FromString(sql);
    free(sql);
    return r;
}

/* store_prepare(path): create path (0600) or open it, and bring it to this
   build's schema, with no run (dynscope merge fills it).  OSError naming the
   reason. */
static PyObject *py_store_prepare(PyObject *self, PyObject *arg)
{
    (void)self;
    PyObject *bytes;
    if (!PyUnicode_FSConverter(arg, &bytes))
        return NULL;
    char *err = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = store_prepare(PyBytes_AS_STRING(bytes), &err);
    Py_END_ALLOW_THREADS
    Py_DECREF(bytes);
    if (rc < 0) {
        PyErr_Format(PyExc_OSError, "%s", err ? err : "cannot prepare the database");
        free(err);
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *py_record_stats(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    if (the_store == NULL)
        Py_RETURN_NONE;
    return stats_dict(store_stats(the_store));
}

static PyObject *py_record_path(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return Py_NewRef(the_store && store_file ? store_file : Py_None);
}

/* ---- entry counters: periodic snapshots ---- */

/* A snapshot record of `kind` about code cc, its time and code fields
   filled.  false (error cleared) when cc's names cannot be read. */
static bool snapshot_record(EventRecord *r, EventKind kind, CodeCache *cc)
{
    memset(r, 0, sizeof(*r));
    r->kind = kind;
    r->wall_ns = engine_wall_ns();
    r->mono_ns = engine_now_ns();
    r->code_id = cc->code_id;
    r->qualname = PyUnicode_AsUTF8(cc->code->co_qualname);
    r->filename = PyUnicode_AsUTF8(cc->code->co_filename);
    r->firstlineno = cc->code->co_firstlineno;
    if (r->qualname == NULL || r->filename == NULL) {
        PyErr_Clear();
        return false;
    }
    return true;
}

static void submit_entry_stats(CodeCache *cc, CacheEntry *e)
{
    char cid[32];
    PyOS_snprintf(cid, sizeof(cid), "%d/%d", e->frame_id, e->frame_compile_id);
    EventRecord r;
    if (!snapshot_record(&r, EV_ENTRY_STATS, cc))
        return;
    r.compile_id = cid;
    r.frame_id = e->frame_id;
    r.frame_compile_id = e->frame_compile_id;
    r.resume_offset = e->resume_offset * 2;
    r.hits = e->hits;
    r.guard_ns = engine_ticks_to_ns(e->guard_ticks);
    CacheEntryCosts costs;
    cache_entry_costs(e, &costs);
    r.cost_samples = costs.samples;
    r.run_ns = costs.run_ns;
    r.break_ns = costs.break_ns;
    r.break_graphs = costs.break_graphs;
    record_submit(&r);
}

/* A frame at its cache limit: the calls it ran without capture since, and
   their time scaled from the timed ones (engine/capture/cost.c). */
static void submit_frame_stats(CodeCache *cc, CacheFrame *cf)
{
    EventRecord r;
    if (!snapshot_record(&r, EV_FRAME_STATS, cc))
        return;
    r.frame_id = cf->frame_id;
    r.resume_offset = cf->resume_offset * 2;
    r.limit_calls = cf->limit_calls;
    r.cost_samples = cf->limit_samples;
    if (cf->limit_samples > 0)
        r.uncaptured_ns = (uint64_t)((double)engine_ticks_to_ns(cf->limit_ticks)
                                     * ((double)cf->limit_calls / (double)cf->limit_samples));
    record_submit(&r);
}

/* Submit the counters of every entry whose hits changed since the last
   snapshot, and of every frame at its cache limit that ran since.  GIL
   held; no-op when not recording.  Cannot fail. */
static void submit_snapshot(void)
{
    if (the_store == NULL)
        return;
    cache_for_each_entry(submit_entry_stats, true);
    cache_for_each_limited_frame(submit_frame_stats);
}

/* _C.record_snapshot(): submit_snapshot() now. */
static PyObject *py_record_snapshot(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    submit_snapshot();
    Py_RETURN_NONE;
}

/* ---- the snapshot thread ----
 *
 * It queues the entry counters every snap_interval_ms, and at once when the
 * SIGTERM handler asks ('t' on snap_wake; it answers on snap_ack).  A plain
 * pthread, not a threading.Thread: it is joined before fork() and started
 * again after, so a process that forks has no thread of the recording's,
 * neither in /proc (CPython 3.12 counts OS threads when it warns at
 * os.fork()) nor in threading's registry (3.13 counts those).  Every signal
 * is blocked in it, so a process-directed SIGTERM lands in a thread of the
 * program, never in the thread its handler waits for.  It holds the GIL
 * only while it queues counters.
 */
static pthread_t snap_thread;
static bool snap_started;           /* GIL: the thread runs (this process's) */
static unsigned snap_interval_ms = 500;

/* Sleep up to ms with the GIL not held: 0 when the time is up, 1 when the
   SIGTERM handler asks for the counters now, 2 when asked to exit. */
static int snapshot_wait(unsigned ms)
{
    int fd = snap_wake[0];
    if (fd < 0)
        return 2;
    int why = 0;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int r = poll(&p, 1, (int)ms);
    if (r > 0) {
        char buf[16];
        ssize_t n;
        while ((n = read(fd, buf, sizeof buf)) > 0)
            for (ssize_t i = 0; i < n; i++)
                why = buf[i] == 's' ? 2 : (why == 2 ? 2 : 1);
    }
    else if (r < 0 && errno != EINTR) {
        why = 2;
    }
    return why;
}

static void *snapshot_main(void *arg)
{
    (void)arg;
    for (;;) {
        int why = snapshot_wait(snap_interval_ms);
        if (why == 2)
            return NULL;
        PyGILState_STATE g = PyGILState_Ensure();
        submit_snapshot();
        PyGILState_Release(g);
        char b = 'a';
        if (why == 1 && snap_ack[1] >= 0 && write(snap_ack[1], &b, 1) < 0) {
            /* the pipe is full of unread acks: the handler has what it needs */
        }
    }
}

/* Start the thread if not running (GIL held): bytes an earlier thread left
   unread are dropped ('s' would end this one at once), and the SIGTERM
   handler asks this one.  0, or -1 with OSError set. */
static int snapshot_start(void)
{
    if (snap_started || the_store == NULL)
        return 0;
    char buf[64];
    while (snap_wake[0] >= 0 && read(snap_wake[0], buf, sizeof buf) > 0)
        ;
    while (snap_ack[0] >= 0 && read(snap_ack[0], buf, sizeof buf) > 0)
        ;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);     /* inherited by the thread */
    int err = pthread_create(&snap_thread, NULL, snapshot_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (err != 0) {
        errno = err;
        PyErr_SetFromErrno(PyExc_OSError);
        return -1;
    }
    snap_started = true;
    store_sigterm_notify(snap_wake[1], snap_ack[0]);
    return 0;
}

/* Tell the thread to exit and wait for its end, the GIL released meanwhile
   (it may be waiting for it); from now on a SIGTERM handler does not ask
   it.  Cannot fail. */
static void snapshot_stop(void)
{
    store_sigterm_forget_notify();
    if (!snap_started)
        return;
    char b = 's';
    if (snap_wake[1] >= 0 && write(snap_wake[1], &b, 1) < 0) {
        /* full: the thread has bytes to read and will look at them */
    }
    Py_BEGIN_ALLOW_THREADS
    pthread_join(snap_thread, NULL);
    Py_END_ALLOW_THREADS
    snap_started = false;
}

static PyObject *py_snapshot_start(PyObject *self, PyObject *arg)
{
    (void)self;
    double interval = PyFloat_AsDouble(arg);
    if (interval == -1.0 && PyErr_Occurred())
        return NULL;
    if (!(interval > 0)) {
        PyErr_SetString(PyExc_ValueError, "the snapshot interval must be > 0");
        return NULL;
    }
    snap_interval_ms = interval > 3600 ? 3600000u : (unsigned)(interval * 1000 + 0.5);
    if (snap_interval_ms == 0)
        snap_interval_ms = 1;
    if (snapshot_start() < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *py_snapshot_stop(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    if (threads_restart_pending)
        snap_was_started = false;       /* stopped for a fork: it stays stopped */
    snapshot_stop();
    Py_RETURN_NONE;
}

/* ---- os._exit ---- */

/*
 * os._exit skips atexit and every other cleanup, and it is how a fork child
 * ends (os.fork without exec; multiprocessing's children, after their
 * finalizers).  While recording, os._exit is this builtin of the same name:
 * it queues the entry counters, lets the writer flush for at most the
 * SIGTERM budget -- the GIL stays held, so no thread can close the store
 * meanwhile, and the writer never needs it -- then calls the real one.
 */
static PyObject *real_os_exit;     /* strong: posix._exit while wrapped, else NULL */
static unsigned exit_flush_ms = 1000;

static PyObject *os_exit_flushing(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (real_os_exit == NULL) {
        PyErr_SetString(PyExc_SystemError, "dynscope: os._exit wrapper without os._exit");
        return NULL;
    }
    threads_restart_if_pending();       /* the writer flushes what is queued */
    if (the_store != NULL) {
        submit_snapshot();
        (void)store_flush_for_exit(the_store, exit_flush_ms);
    }
    return PyObject_Vectorcall(real_os_exit, args, (size_t)nargs, NULL);
}

static PyMethodDef os_exit_def = {
    "_exit", (PyCFunction)(void (*)(void))os_exit_flushing, METH_FASTCALL,
    "_exit($module, status, /)\n--\n\n"
    "Exit to the system with specified status, without normal exit processing.",
};

/* record_wrap_os_exit(flush_ms) -> bool: os._exit becomes the flushing
   builtin if it is still the interpreter's own.  record_unwrap_os_exit():
   puts the original back if ours is still there. */
static PyObject *py_wrap_os_exit(PyObject *self, PyObject *arg)
{
    (void)self;
    unsigned long ms = PyLong_AsUnsignedLong(arg);
    if (ms == (unsigned long)-1 && PyErr_Occurred())
        return NULL;
    exit_flush_ms = ms > 60000 ? 60000 : (unsigned)ms;
    if (real_os_exit != NULL)
        Py_RETURN_TRUE;
    PyObject *os = PyImport_ImportModule("os");
    PyObject *posix = os ? PyImport_ImportModule("posix") : NULL;
    PyObject *cur = os ? PyObject_GetAttrString(os, "_exit") : NULL;
    PyObject *orig = posix ? PyObject_GetAttrString(posix, "_exit") : NULL;
    PyObject *wrapper = NULL, *res = NULL;
    if (cur == NULL || orig == NULL)
        goto out;
    if (cur != orig) {           /* the program (or a tool) has its own: leave it */
        res = Py_NewRef(Py_False);
        goto out;
    }
    PyObject *modname = PyUnicode_FromString("posix");
    wrapper = modname ? PyCFunction_NewEx(&os_exit_def, NULL, modname) : NULL;
    Py_XDECREF(modname);
    if (wrapper == NULL || PyObject_SetAttrString(os, "_exit", wrapper) < 0)
        goto out;
    real_os_exit = Py_NewRef(orig);
    res = Py_NewRef(Py_True);
out:
    Py_XDECREF(wrapper);
    Py_XDECREF(orig);
    Py_XDECREF(cur);
    Py_XDECREF(posix);
    Py_XDECREF(os);
    return res;
}

static PyObject *py_unwrap_os_exit(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    if (real_os_exit == NULL)
        Py_RETURN_NONE;
    PyObject *os = PyImport_ImportModule("os");
    PyObject *cur = os ? PyObject_GetAttrString(os, "_exit") : NULL;
    int rc = 0;
    if (cur != NULL && PyCFunction_Check(cur)
        && ((PyCFunctionObject *)cur)->m_ml == &os_exit_def)
        rc = PyObject_SetAttrString(os, "_exit", real_os_exit);
    Py_XDECREF(cur);
    Py_XDECREF(os);
    if (cur == NULL || rc < 0)
        return NULL;
    Py_CLEAR(real_os_exit);
    Py_RETURN_NONE;
}

/* ---- fork ---- */

/* The threads of this process as the kernel counts them: the 20th field of
   /proc/self/stat, which CPython reads to warn at os.fork().  -1 when it
   cannot be read (not Linux). */
static long process_thread_count(void)
{
    char buf[1024];
    int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    char *p = strrchr(buf, ')');        /* after the command name, which may hold spaces */
    for (int field = 2; p != NULL && field < 20; field++)
        p = strchr(p + 1, ' ');
    if (p == NULL)
        return -1;
    char *end;
    long count = strtol(p + 1, &end, 10);
    return end == p + 1 ? -1 : count;
}

/* pthread_join returns once the thread's id is cleared, which the kernel
   does before it stops counting the thread; a fork() in between would be
   warned about as multi-threaded.  Wait (up to 200 ms, GIL not held) until
   `ended` fewer threads than `before` are counted. */
static void wait_threads_reaped(long before, int ended)
{
    if (before < 0 || ended == 0)
        return;
    struct timespec pause = {0, 50 * 1000};
    for (int i = 0; i < 4000; i++) {
        long now = process_thread_count();
        if (now < 0 || now <= before - ended)
            return;
        nanosleep(&pause, NULL);
    }
}

static PyObject *py_before_fork(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    if (!threads_restart_pending)       /* (else stopped since the last fork) */
        snap_was_started = snap_started;
    long before = process_thread_count();
    int ended = snap_started;
    snapshot_stop();
    Py_BEGIN_ALLOW_THREADS
    if (the_store != NULL)
        ended += store_pause(the_store);
    wait_threads_reaped(before, ended);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

/* The recording's threads are started again after a fork once os.fork()
   has returned: CPython 3.13 counts the process's threads after the
   parent's after-fork hooks (3.12 before them), so on 3.13 the restart is
   a pending call (the main thread runs it at its next check), or the next
   event recorded, whichever comes first.  GIL held. */
static void threads_restart(void)
{
    threads_restart_pending = false;
    if (the_store != NULL)
        store_resume(the_store);
    if (snap_was_started && snapshot_start() < 0)
        PyErr_WriteUnraisable(NULL);     /* counters then only at stop */
    snap_was_started = false;
}

static void threads_restart_if_pending(void)
{
    if (threads_restart_pending)
        threads_restart();
}

#if FORK_COUNTS_THREADS_AFTER_PARENT_HOOKS
static int threads_restart_call(void *unused)
{
    (void)unused;
    threads_restart_if_pending();
    return 0;
}
#endif

static PyObject *py_after_fork_parent(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
#if FORK_COUNTS_THREADS_AFTER_PARENT_HOOKS
    threads_restart_pending = true;
    if (Py_AddPendingCall(threads_restart_call, NULL) < 0)
        threads_restart();      /* the queue is full: now, and 3.13 warns */
#else
    threads_restart();
#endif
    Py_RETURN_NONE;
}

/* In the child: drop the parent's Store and open one of our own (a runs row
   of this process).  Returns the new run_id, or None if not recording.  A
   failure to reopen is reported once and recording stops in this child. */
static PyObject *py_after_fork_child(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    if (the_store == NULL)
        Py_RETURN_NONE;
    store_sigterm_after_fork_child();
    store_forget_after_fork(the_store);
    the_store = NULL;
    store_pipe_close(snap_wake);        /* the parent's: a byte here would wake its thread */
    store_pipe_close(snap_ack);
    snap_started = false;               /* threads do not survive fork() */
    bool snap = snap_was_started;
    snap_was_started = false;
    threads_restart_pending = false;
    if (open_store(store_path, store_argv, store_python) < 0) {
        PyErr_WriteUnraisable(NULL);
        capture_cost_sampling(false);
        Py_RETURN_NONE;
    }
    if (snap && snapshot_start() < 0)
        PyErr_WriteUnraisable(NULL);
    return PyLong_FromLongLong(store_stats(the_store).run_id);
}

/* ---- SIGTERM ---- */

static PyObject *py_sigterm_install(PyObject *self, PyObject *arg)
{
    (void)self;
    unsigned long ms = PyLong_AsUnsignedLong(arg);
    if (ms == (unsigned long)-1 && PyErr_Occurred())
        return NULL;
    if (ms > 60000) {
        PyErr_SetString(PyExc_ValueError, "the SIGTERM flush timeout is at most 60000 ms");
        return NULL;
    }
    int r = store_sigterm_install((unsigned)ms);
    if (r < 0)
        return PyErr_SetFromErrno(PyExc_OSError);
    return PyBool_FromLong(r);
}

static PyObject *py_sigterm_uninstall(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    store_sigterm_uninstall();
    Py_RETURN_NONE;
}

static PyMethodDef record_methods[] = {
    {"store_temp_views_sql", py_store_temp_views_sql, METH_O,
     "store_temp_views_sql(version)\n--\n\nSQL giving a read-only connection to a file of that "
     "schema version the views it lacks, as TEMP views."},
    {"record_start", py_record_start, METH_VARARGS,
     "record_start(path, argv, python, redacted=None) -> run_id\n--\n\nStart recording events to a "
     "dynscope database (redacted: runs.redacted, what it keeps out)."},
    {"record_redactor", py_record_redactor, METH_O,
     "record_redactor(callable or None)\n--\n\nRedact each recorded event's text fields with "
     "callable(kind, {field: str}) -> {field: str} (dynscope/redact.py)."},
    {"record_stop", py_record_stop, METH_NOARGS,
     "record_stop() -> stats or None\n--\n\nWrite everything queued and close the database."},
    {"record_stats", py_record_stats, METH_NOARGS, "record_stats() -> dict or None"},
    {"record_path", py_record_path, METH_NOARGS, "record_path() -> str or None"},
    {"record_snapshot", py_record_snapshot, METH_NOARGS,
     "record_snapshot()\n--\n\nQueue the counters of every cache entry that changed."},
    {"record_sigterm_install", py_sigterm_install, METH_O,
     "record_sigterm_install(timeout_ms) -> bool\n--\n\n"
     "If SIGTERM would kill the process (SIG_DFL), install a C handler that lets\n"
     "the writer flush for at most timeout_ms, then dies of SIGTERM.  False when\n"
     "the program has its own disposition (left alone)."},
    {"record_sigterm_uninstall", py_sigterm_uninstall, METH_NOARGS,
     "record_sigterm_uninstall()\n--\n\nPut SIG_DFL back if our handler is still installed."},
    {"record_snapshot_start", py_snapshot_start, METH_O,
     "record_snapshot_start(interval)\n--\n\nStart the snapshot thread (a C thread): the entry "
     "counters every interval seconds, and at once on SIGTERM."},
    {"record_snapshot_stop", py_snapshot_stop, METH_NOARGS,
     "record_snapshot_stop()\n--\n\nStop the snapshot thread and wait for its end."},
    {"record_wrap_os_exit", py_wrap_os_exit, METH_O,
     "record_wrap_os_exit(flush_ms) -> bool\n--\n\n"
     "os._exit flushes the recording (at most flush_ms) before exiting."},
    {"record_unwrap_os_exit", py_unwrap_os_exit, METH_NOARGS,
     "record_unwrap_os_exit()\n--\n\nPut the interpreter's os._exit back."},
    {"record_before_fork", py_before_fork, METH_NOARGS, NULL},
    {"record_after_fork_parent", py_after_fork_parent, METH_NOARGS, NULL},
    {"store_prepare", py_store_prepare, METH_O, NULL},
    {"record_after_fork_child", py_after_fork_child, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

int record_init(PyObject *module)
{
    if (events_add_sink(&sqlite_sink) < 0)
        return -1;
    return PyModule_AddFunctions(module, record_methods);
}
