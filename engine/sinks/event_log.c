/*
 * event_log.c -- the built-in sinks of the process (events.h): the
 * in-memory log that tests, cache inspection and `_C.events()` read, the
 * DYNSCOPE_LOGS callable (dynscope/logs.py) and LTTng (trace/).
 *
 * Invariants: event_log is a list (strong, off the cyclic GC's lists, as
 * its items are) of event dicts, never longer
 * than EVENT_LOG_MAX (past it the oldest half is dropped and counted in
 * `dropped`); log_callable is strong or NULL.  GIL protected.  None of the
 * sinks raises: a failing DYNSCOPE_LOGS callable is reported once and
 * removed.
 */
#include "sinks.h"
#include "../../trace/trace.h"

#define EVENT_LOG_MAX 100000

static PyObject *event_log;          /* strong: list of dicts */
static unsigned long long dropped;
static PyObject *log_callable;       /* strong or NULL: DYNSCOPE_LOGS */
static bool log_detail;              /* compile_end dicts to it carry what was made */

/* ---- the in-memory log ---- */

/* Take o -- an event dict, or a list, tuple or dict inside one -- out of
   the cyclic GC's lists, with what it holds.  An event is data made for it
   alone (str, int, float, None, and exact lists, tuples and dicts of them),
   so no cycle can pass through it; kept tracked, the log's 100,000 events
   and their lists were most of what every full collection walked under
   `run --capture-all` (a third of the tracked objects; the collector was
   18% of the run).  A program that stores a tracked object into an event
   it got from _C.events() tracks that dict again (CPython does, on insert);
   a list or tuple stays untracked: a cycle made through one is never
   collected, a leak and never a crash.  Cannot fail. */
static void untrack_data(PyObject *o, int depth)
{
    if (depth > 8)
        return;                    /* deeper than any event: left as it is */
    if (PyDict_CheckExact(o)) {
        Py_ssize_t pos = 0;
        PyObject *k, *v;
        while (PyDict_Next(o, &pos, &k, &v))
            untrack_data(v, depth + 1);
    }
    else if (PyList_CheckExact(o)) {
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(o); i++)
            untrack_data(PyList_GET_ITEM(o, i), depth + 1);
    }
    else if (PyTuple_CheckExact(o)) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(o); i++)
            untrack_data(PyTuple_GET_ITEM(o, i), depth + 1);
    }
    else {
        return;                    /* an atom, or an object of its own kind: kept */
    }
    if (PyObject_GC_IsTracked(o))
        PyObject_GC_UnTrack(o);
}

static void log_emit(void *ctx, Event *ev)
{
    (void)ctx;
    PyObject *d = event_dict(ev);
    if (d == NULL)
        return;
    untrack_data(d, 0);
    if (PyList_GET_SIZE(event_log) >= EVENT_LOG_MAX) {
        Py_ssize_t half = EVENT_LOG_MAX / 2;
        if (PyList_SetSlice(event_log, 0, half, NULL) == 0)
            dropped += (unsigned long long)half;
        else
            PyErr_Clear();
    }
    if (PyList_Append(event_log, d) < 0)
        PyErr_Clear();
}

static EventSink log_sink = {
    .name = "the in-memory event log",
    .mask = EV_MASK_DICT,
    .emit = log_emit,
};

/* ---- DYNSCOPE_LOGS: each event dict to a Python callable that writes a
   line on stderr as it happens ---- */

static bool lines_wanted(void *ctx, EventKind kind)
{
    (void)ctx;
    (void)kind;
    return log_callable != NULL;
}

/* What the DYNSCOPE_LOGS callable gets: the event's dict; with log_detail,
   a compile_end's copy with "graph_module" (the entry's GraphModule or
   None), "plan" (its plan as text), "code" (the code object) and "entry"
   (the CacheEntry: its guards, for dynscope.dump) added --
   a copy, so that the in-memory log keeps none of them alive
   (DYNSCOPE_LOGS=graph, graph_code, bytecode).  New reference, or NULL
   with an exception. */
static PyObject *lines_dict(Event *ev, PyObject *d)
{
    CacheEntry *e = ev->entry;
    if (!log_detail || ev->rec.kind != EV_COMPILE_END || ev->cc == NULL || e == NULL
        || ev->private_capture)
        return Py_NewRef(d);
    PyObject *copy = PyDict_Copy(d);
    PyObject *plan = copy ? cache_entry_plan_text(e) : NULL;
    if (plan == NULL
        || PyDict_SetItemString(copy, "graph_module", e->plan.gm ? e->plan.gm : Py_None) < 0
        || PyDict_SetItemString(copy, "plan", plan) < 0
        || PyDict_SetItemString(copy, "code", (PyObject *)ev->cc->code) < 0
        || PyDict_SetItemString(copy, "entry", (PyObject *)e) < 0)
        Py_CLEAR(copy);
    Py_XDECREF(plan);
    return copy;
}

static void lines_emit(void *ctx, Event *ev)
{
    (void)ctx;
    PyObject *d = event_dict(ev);
    if (d == NULL || log_callable == NULL)
        return;
    PyObject *arg = lines_dict(ev, d);
    PyObject *r = arg ? PyObject_CallOneArg(log_callable, arg) : NULL;
    Py_XDECREF(arg);
    if (r == NULL) {
        Py_CLEAR(log_callable);
        events_dict_with_guards(false);
        log_detail = false;
        warn_internal_error("writing a DYNSCOPE_LOGS line");
    }
    Py_XDECREF(r);
}

static EventSink lines_sink = {
    .name = "DYNSCOPE_LOGS",
    .mask = EV_MASK_DICT,
    .wants = lines_wanted,
    .emit = lines_emit,
};

/* ---- LTTng: the record, with the text fields its tracepoints carry ---- */

static bool lttng_wanted(void *ctx, EventKind kind)
{
    (void)ctx;
    return trace_enabled(kind);
}

static void lttng_emit(void *ctx, Event *ev)
{
    (void)ctx;
    trace_emit(event_record(ev, EVF_OPS | EVF_USER_STACK));
}

static EventSink lttng_sink = {
    .name = "LTTng",
    .mask = EV_MASK_ALL,
    .wants = lttng_wanted,
    .emit = lttng_emit,
};

/* ---- Python surface ---- */

static PyObject *py_events(PyObject *self, PyObject *args)
{
    (void)self;
    (void)args;
    return PyList_GetSlice(event_log, 0, PyList_GET_SIZE(event_log));
}

static PyObject *py_clear_events(PyObject *self, PyObject *args)
{
    (void)self;
    (void)args;
    if (PyList_SetSlice(event_log, 0, PyList_GET_SIZE(event_log), NULL) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *py_event_stats(PyObject *self, PyObject *args)
{
    (void)self;
    (void)args;
    return Py_BuildValue("{s:K,s:K}", "dropped", dropped, "internal_errors",
                         warn_internal_error_count());
}

/* set_log_sink(callable or None, with_guards=False, with_detail=False):
   every event of the process's log is passed to callable as it happens
   (DYNSCOPE_LOGS); compile_end dicts carry the guards' text, and the
   graph, plan and code object, as asked. */
static PyObject *py_set_log_sink(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *fn;
    int with_guards = 0, with_detail = 0;
    if (!PyArg_ParseTuple(args, "O|pp:set_log_sink", &fn, &with_guards, &with_detail))
        return NULL;
    if (fn != Py_None && !PyCallable_Check(fn)) {
        PyErr_SetString(PyExc_TypeError, "set_log_sink: expected a callable or None");
        return NULL;
    }
    Py_XSETREF(log_callable, fn == Py_None ? NULL : Py_NewRef(fn));
    events_dict_with_guards(fn != Py_None && with_guards);
    log_detail = fn != Py_None && with_detail;
    Py_RETURN_NONE;
}

static PyObject *py_trace_init(PyObject *self, PyObject *arg)
{
    (void)self;
    const char *path = arg == Py_None ? NULL : PyUnicode_AsUTF8(arg);
    if (path == NULL && arg != Py_None)
        return NULL;
    if (trace_init(path) == 0) {
        if (events_add_sink(&lttng_sink) < 0)
            return NULL;
        Py_RETURN_TRUE;
    }
    return Py_BuildValue("s", trace_error());
}

static PyObject *py_trace_loaded(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return PyBool_FromLong(trace_loaded());
}

static PyMethodDef event_methods[] = {
    {"trace_init", py_trace_init, METH_O,
     "trace_init(provider_path or None) -> True or the reason tracing stays off\n--\n\n"
     "Load the LTTng tracepoint provider ($DYNSCOPE_TRACE_PROVIDER wins)."},
    {"trace_loaded", py_trace_loaded, METH_NOARGS, "trace_loaded() -> bool"},
    {"events", py_events, METH_NOARGS, "events()\n--\n\nA copy of the in-memory event log (list of dicts)."},
    {"clear_events", py_clear_events, METH_NOARGS, "clear_events()\n--\n\nEmpty the in-memory event log."},
    {"event_stats", py_event_stats, METH_NOARGS, "event_stats()\n--\n\nCounts of dropped events and internal errors."},
    {"set_log_sink", py_set_log_sink, METH_VARARGS,
     "set_log_sink(callable or None, with_guards=False, with_detail=False)\n--\n\n"
     "Pass every event dict of the process's log to callable as it happens."},
    {NULL, NULL, 0, NULL},
};

int event_log_init(PyObject *module)
{
    event_log = PyList_New(0);
    if (event_log == NULL)
        return -1;
    /* Its items are untracked data (untrack_data), it is held here alone:
       tracked, each full collection walked its 100,000 items, 40 ms of a
       collection under `run --capture-all` (docs/conformance.md). */
    PyObject_GC_UnTrack(event_log);
    if (events_add_sink(&lines_sink) < 0 || events_add_sink(&log_sink) < 0)
        return -1;
    return PyModule_AddFunctions(module, event_methods);
}
