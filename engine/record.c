/*
 * record.c -- starting, stopping and feeding the SQLite recorder from the
 * engine (contract in record.h; the store itself is store/, plain C).
 *
 * Python sees: _C.record_start(path, argv, python) -> run_id,
 * _C.record_stop() -> stats dict, _C.record_snapshot() (entry counters),
 * _C.record_stats(), and the fork hooks _C.record_before_fork /
 * _C.record_after_fork_parent / _C.record_after_fork_child.
 *
 * Failing soft: a database that cannot be opened raises at record_start()
 * (the user asked for it and must know); once recording, nothing here ever
 * raises into the program -- the store drops and counts.
 */
#include "record.h"
#include "../store/store.h"

#include <stdlib.h>
#include <string.h>

static Store *the_store;          /* GIL; NULL when not recording */
static PyObject *store_path;      /* strong: the path being recorded to */
static PyObject *store_argv;      /* strong: list of str, for a child's runs row */
static PyObject *store_python;    /* strong: str */
static StoreStats last_stats;     /* of the last store closed */

bool record_active(void)
{
    return the_store != NULL;
}

void record_submit(const EventRecord *ev)
{
    if (the_store != NULL)
        (void)store_submit(the_store, ev);   /* drops are counted by the store */
}

/* Open a Store on path with argv (list of str) and python (str).  0, or -1
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
    const char *cpath = PyUnicode_AsUTF8(path);
    const char *cpy = PyUnicode_AsUTF8(python);
    if (cpath == NULL || cpy == NULL) {
        PyMem_Free(cargv);
        return -1;
    }
    StoreOptions opts;
    memset(&opts, 0, sizeof(opts));
    opts.argv = cargv;
    opts.argc = (int)n;
    opts.python = cpy;
    char *err = NULL;
    Store *s;
    Py_BEGIN_ALLOW_THREADS
    s = store_open(cpath, &opts, &err);
    Py_END_ALLOW_THREADS
    PyMem_Free(cargv);
    if (s == NULL) {
        PyErr_Format(PyExc_OSError, "dynscope: cannot record to %U: %s", path,
                     err ? err : "unknown error");
        free(err);
        return -1;
    }
    the_store = s;
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
    PyObject *path, *argv, *python;
    if (!PyArg_ParseTuple(args, "UO!U:record_start", &path, &PyList_Type, &argv, &python))
        return NULL;
    if (the_store != NULL) {
        PyErr_Format(PyExc_RuntimeError, "dynscope: already recording to %U", store_path);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(argv); i++) {
        if (!PyUnicode_Check(PyList_GET_ITEM(argv, i))) {
            PyErr_SetString(PyExc_TypeError, "argv must be a list of str");
            return NULL;
        }
    }
    if (open_store(path, argv, python) < 0)
        return NULL;
    Py_XSETREF(store_path, Py_NewRef(path));
    Py_XSETREF(store_argv, PySequence_List(argv));
    Py_XSETREF(store_python, Py_NewRef(python));
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
    the_store = NULL;
    StoreStats st;
    Py_BEGIN_ALLOW_THREADS
    st = store_close(s);          /* the final counters: everything queued written */
    Py_END_ALLOW_THREADS
    last_stats = st;
    return stats_dict(st);
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
    return Py_NewRef(the_store && store_path ? store_path : Py_None);
}

/* ---- entry counters: periodic snapshots ---- */

static void submit_entry_stats(CodeCache *cc, CacheEntry *e)
{
    char cid[32];
    PyOS_snprintf(cid, sizeof(cid), "%d/%d", e->frame_id, e->frame_compile_id);
    EventRecord r;
    memset(&r, 0, sizeof(r));
    r.kind = EV_ENTRY_STATS;
    r.wall_ns = engine_wall_ns();
    r.mono_ns = engine_now_ns();
    r.code_id = cc->code_id;
    r.qualname = PyUnicode_AsUTF8(cc->code->co_qualname);
    r.filename = PyUnicode_AsUTF8(cc->code->co_filename);
    r.firstlineno = cc->code->co_firstlineno;
    r.compile_id = cid;
    r.frame_id = e->frame_id;
    r.frame_compile_id = e->frame_compile_id;
    r.resume_offset = e->resume_offset * 2;
    r.hits = e->hits;
    r.guard_ns = engine_ticks_to_ns(e->guard_ticks);
    if (r.qualname == NULL || r.filename == NULL) {
        PyErr_Clear();
        return;
    }
    record_submit(&r);
}

/* Submit the counters of every entry whose hits changed since the last
   snapshot.  Cannot fail. */
static PyObject *py_record_snapshot(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    if (the_store != NULL)
        cache_for_each_entry(submit_entry_stats, true);
    Py_RETURN_NONE;
}

/* ---- fork ---- */

static PyObject *py_before_fork(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    if (the_store != NULL) {
        Py_BEGIN_ALLOW_THREADS
        store_pause(the_store);
        Py_END_ALLOW_THREADS
    }
    Py_RETURN_NONE;
}

static PyObject *py_after_fork_parent(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    if (the_store != NULL)
        store_resume(the_store);
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
    store_forget_after_fork(the_store);
    the_store = NULL;
    if (open_store(store_path, store_argv, store_python) < 0) {
        PyErr_WriteUnraisable(NULL);
        Py_RETURN_NONE;
    }
    return PyLong_FromLongLong(store_stats(the_store).run_id);
}

static PyMethodDef record_methods[] = {
    {"record_start", py_record_start, METH_VARARGS,
     "record_start(path, argv, python) -> run_id\n--\n\nStart recording events to a dynscope database."},
    {"record_stop", py_record_stop, METH_NOARGS,
     "record_stop() -> stats or None\n--\n\nWrite everything queued and close the database."},
    {"record_stats", py_record_stats, METH_NOARGS, "record_stats() -> dict or None"},
    {"record_path", py_record_path, METH_NOARGS, "record_path() -> str or None"},
    {"record_snapshot", py_record_snapshot, METH_NOARGS,
     "record_snapshot()\n--\n\nQueue the counters of every cache entry that changed."},
    {"record_before_fork", py_before_fork, METH_NOARGS, NULL},
    {"record_after_fork_parent", py_after_fork_parent, METH_NOARGS, NULL},
    {"record_after_fork_child", py_after_fork_child, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

int record_init(PyObject *module)
{
    return PyModule_AddFunctions(module, record_methods);
}
