/*
 * events.c -- the in-memory sink of the event vocabulary (events.h).
 *
 * Cold events are appended as dicts to a bounded log that tests, explain
 * and `dynscope.events()` read; past the bound the oldest half is dropped
 * and counted.  Every function clears any exception it meets: recording
 * never changes what the program sees.
 *
 * Invariants: event_log is a list (strong) of dicts with at least "event";
 * dropped counts events discarded because of the bound.  GIL protected.
 */
#include "events.h"
#include "record.h"
#include "../explain/explain.h"
#include "../trace/trace.h"

#include <stdio.h>
#include <string.h>

#define EVENT_LOG_MAX 100000

static PyObject *event_log;        /* strong: list of dicts */
static unsigned long long dropped;
static PyObject *internal_errors;  /* strong: set of `what` strings already reported */
static unsigned long long internal_error_count;
static PyObject *CacheLimitWarning;  /* strong: warning category */

/* Append a new event dict built from `fmt` (Py_BuildValue "{...}" format).
   Steals nothing; clears errors. */
static void log_event(PyObject *ev)
{
    if (ev == NULL) {
        PyErr_Clear();
        return;
    }
    ThreadCapture *tc = capture_state();
    CaptureSession *session = tc->session;
    if (explain_is_backend(tc->config.backend))
        explain_backend_note_event(tc->config.backend, ev);
    if (session != NULL) {
        if (PyList_Append(session->events, ev) < 0)
            PyErr_Clear();
        Py_DECREF(ev);
        return;
    }
    if (engine_config.log_sink != NULL) {
        /* DYNSCOPE_LOGS: a line on stderr as it happens; a failing sink is
           reported once and removed, never raised into the program */
        PyObject *r = PyObject_CallOneArg(engine_config.log_sink, ev);
        if (r == NULL) {
            Py_CLEAR(engine_config.log_sink);
            events_internal_error("writing a DYNSCOPE_LOGS line");
        }
        Py_XDECREF(r);
    }
    if (PyList_GET_SIZE(event_log) >= EVENT_LOG_MAX) {
        Py_ssize_t half = EVENT_LOG_MAX / 2;
        if (PyList_SetSlice(event_log, 0, half, NULL) == 0)
            dropped += (unsigned long long)half;
        else
            PyErr_Clear();
    }
    if (PyList_Append(event_log, ev) < 0)
        PyErr_Clear();
    Py_DECREF(ev);
}

/* ---- external sinks: SQLite (record.c) and LTTng (trace/) ---- */

/* Whether any external sink wants events of this kind now.  A private
   capture (explain) never reaches them. */
static bool sinks_want(EventKind kind)
{
    return capture_state()->session == NULL && (record_active() || trace_enabled(kind));
}

static void sinks_emit(const EventRecord *r)
{
    record_submit(r);
    trace_emit(r);
}

/* UTF-8 of a str (borrowed; "" on error, error cleared). */
static const char *utf8(PyObject *s)
{
    const char *c = s && PyUnicode_Check(s) ? PyUnicode_AsUTF8(s) : NULL;
    if (c == NULL) {
        PyErr_Clear();
        return "";
    }
    return c;
}

/* A record of `kind` for code cc and (when e is not NULL) entry e.
   cid receives "frame/compile". */
static void record_base(EventRecord *r, EventKind kind, CodeCache *cc, CacheEntry *e,
                        char *cid, size_t cidlen)
{
    memset(r, 0, sizeof(*r));
    r->kind = kind;
    r->wall_ns = engine_wall_ns();
    r->mono_ns = engine_now_ns();
    r->qualname = r->filename = r->compile_id = r->outcome = r->guards_text = r->reason = "";
    r->entry_compile_id = r->guard_kind = r->expr = r->observed = r->break_kind = "";
    r->break_file = r->user_stack_json = r->backend = r->graph_code = r->ops = "";
    if (cc != NULL) {
        r->code_id = cc->code_id;
        r->qualname = utf8(cc->code->co_qualname);
        r->filename = utf8(cc->code->co_filename);
        r->firstlineno = cc->code->co_firstlineno;
    }
    if (e != NULL) {
        PyOS_snprintf(cid, cidlen, "%d/%d", e->frame_id, e->frame_compile_id);
        r->compile_id = cid;
        r->frame_id = e->frame_id;
        r->frame_compile_id = e->frame_compile_id;
        r->resume_offset = e->resume_offset * 2;
    }
}

/* json.dumps(obj) (new str) or NULL with the error cleared. */
static PyObject *to_json(PyObject *obj)
{
    PyObject *json = PyImport_ImportModule("json");
    PyObject *s = json ? PyObject_CallMethod(json, "dumps", "O", obj) : NULL;
    Py_XDECREF(json);
    if (s == NULL)
        PyErr_Clear();
    return s;
}

static PyObject *compile_id_str(CacheEntry *e)
{
    return PyUnicode_FromFormat("%d/%d", e->frame_id, e->frame_compile_id);
}

/* {"event": name, "code_id": .., "name": qualname, "filename": .., "firstlineno": ..} */
static PyObject *event_base(const char *name, CodeCache *cc)
{
    PyCodeObject *co = cc->code;
    return Py_BuildValue("{s:s,s:L,s:O,s:O,s:i,s:K}", "event", name,
                         "code_id", cc->code_id, "name", co->co_qualname,
                         "filename", co->co_filename, "firstlineno",
                         co->co_firstlineno, "at_ns",
                         (unsigned long long)engine_now_ns());
}

static void set_item(PyObject *ev, const char *key, PyObject *value_steal)
{
    if (ev == NULL || value_steal == NULL || PyDict_SetItemString(ev, key, value_steal) < 0)
        PyErr_Clear();
    Py_XDECREF(value_steal);
}

/* One EV_GUARD_FAIL per older entry's first failing guard; failures is a
   list of (entry compile id, kind, expr, observed). */
static void emit_guard_failures(CodeCache *cc, CacheEntry *e, PyObject *failures)
{
    if (failures == NULL || !sinks_want(EV_GUARD_FAIL))
        return;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(failures); i++) {
        PyObject *t = PyList_GET_ITEM(failures, i);
        if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) < 4)
            continue;
        EventRecord r;
        char cid[32];
        record_base(&r, EV_GUARD_FAIL, cc, e, cid, sizeof(cid));
        r.entry_compile_id = utf8(PyTuple_GET_ITEM(t, 0));
        r.guard_kind = utf8(PyTuple_GET_ITEM(t, 1));
        r.expr = utf8(PyTuple_GET_ITEM(t, 2));
        r.observed = utf8(PyTuple_GET_ITEM(t, 3));
        sinks_emit(&r);
    }
}

static void events_compile_start_impl(CodeCache *cc, CacheEntry *e)
{
    PyObject *ev = event_base("compile_start", cc);
    set_item(ev, "compile_id", compile_id_str(e));
    set_item(ev, "resume_offset", PyLong_FromLong(e->resume_offset * 2));   /* bytes */
    log_event(ev);
    if (sinks_want(EV_COMPILE_START)) {
        EventRecord r;
        char cid[32];
        record_base(&r, EV_COMPILE_START, cc, e, cid, sizeof(cid));
        sinks_emit(&r);
    }
}

static void events_compile_end_impl(CodeCache *cc, CacheEntry *e, const char *outcome)
{
    PyObject *ev = event_base("compile_end", cc);
    set_item(ev, "compile_id", compile_id_str(e));
    set_item(ev, "outcome", PyUnicode_FromString(outcome));
    set_item(ev, "duration_ns", PyLong_FromUnsignedLongLong(e->compile_ns));
    set_item(ev, "graphs", PyLong_FromLong(e->plan.gm ? 1 : 0));
    set_item(ev, "nodes", PyLong_FromLong(e->plan.nops));
    set_item(ev, "guards", PyLong_FromLong(e->guards.n));
    if (engine_config.log_guards && capture_state()->session == NULL) {
        PyObject *exprs = PyList_New(0);
        for (int g = 0; exprs && g < e->guards.n; g++) {
            PyObject *expr = guardset_render_guard(&e->guards, g);
            if (expr == NULL || PyList_Append(exprs, expr) < 0)
                Py_CLEAR(exprs);
            Py_XDECREF(expr);
        }
        set_item(ev, "guard_exprs", exprs);
    }
    log_event(ev);
    if (sinks_want(EV_COMPILE_END)) {
        EventRecord r;
        char cid[32];
        record_base(&r, EV_COMPILE_END, cc, e, cid, sizeof(cid));
        r.outcome = outcome;
        r.duration_ns = e->compile_ns;
        r.graphs = e->plan.gm ? 1 : 0;
        r.nodes = e->plan.nops;
        r.guards = e->guards.n;
        PyObject *lines = record_active() ? PyList_New(0) : NULL;
        for (int g = 0; lines && g < e->guards.n; g++) {
            PyObject *expr = guardset_render_guard(&e->guards, g);
            PyObject *line = expr ? PyUnicode_FromFormat("%s\t%U", guard_kind_name(e->guards.guards[g].kind), expr) : NULL;
            Py_XDECREF(expr);
            if (line == NULL || PyList_Append(lines, line) < 0)
                Py_CLEAR(lines);
            Py_XDECREF(line);
        }
        PyObject *nl = PyUnicode_FromString("\n");
        PyObject *text = lines && nl ? PyUnicode_Join(nl, lines) : NULL;
        Py_XDECREF(nl);
        Py_XDECREF(lines);
        PyErr_Clear();
        r.guards_text = utf8(text);
        sinks_emit(&r);
        Py_XDECREF(text);
    }
    if (e->plan.gm != NULL && sinks_want(EV_GRAPH_COMPILED)) {
        EventRecord r;
        char cid[32];
        record_base(&r, EV_GRAPH_COMPILED, cc, e, cid, sizeof(cid));
        r.nodes = e->plan.nops;
        r.backend_ns = e->backend_ns;
        PyObject *bname = e->backend ? PyObject_GetAttrString(e->backend, "__name__") : NULL;
        if (bname == NULL) {
            PyErr_Clear();
            bname = e->backend ? PyObject_Repr(e->backend) : NULL;
        }
        PyObject *code = record_active() ? PyObject_GetAttrString(e->plan.gm, "code") : NULL;
        PyObject *graph = PyObject_GetAttrString(e->plan.gm, "graph");
        PyObject *nodes = graph ? PyObject_GetAttrString(graph, "nodes") : NULL;
        PyObject *names = PyList_New(0);
        Py_ssize_t n = nodes ? PySequence_Length(nodes) : 0;
        for (Py_ssize_t i = 0; names && i < n; i++) {
            NodeObject *node = (NodeObject *)PySequence_GetItem(nodes, i);
            if (node && node->op != NODE_PLACEHOLDER && node->op != NODE_OUTPUT
                && PyList_Append(names, node->name) < 0)
                Py_CLEAR(names);
            Py_XDECREF(node);
        }
        PyObject *comma = PyUnicode_FromString(",");
        PyObject *ops = names && comma ? PyUnicode_Join(comma, names) : NULL;
        PyErr_Clear();
        r.backend = utf8(bname);
        r.graph_code = utf8(code);
        r.ops = utf8(ops);
        sinks_emit(&r);
        Py_XDECREF(bname);
        Py_XDECREF(code);
        Py_XDECREF(graph);
        Py_XDECREF(nodes);
        Py_XDECREF(names);
        Py_XDECREF(comma);
        Py_XDECREF(ops);
    }
}

static void events_recompile_impl(CodeCache *cc, CacheEntry *e, PyObject *reason, PyObject *failures)
{
    PyObject *ev = event_base("recompile", cc);
    set_item(ev, "compile_id", compile_id_str(e));
    set_item(ev, "reason", Py_NewRef(reason ? reason : Py_None));
    set_item(ev, "failures", failures ? PySequence_List(failures) : PyList_New(0));
    log_event(ev);
    if (sinks_want(EV_RECOMPILE)) {
        EventRecord r;
        char cid[32];
        record_base(&r, EV_RECOMPILE, cc, e, cid, sizeof(cid));
        r.reason = utf8(reason);
        sinks_emit(&r);
    }
    emit_guard_failures(cc, e, failures);
}

static void events_cache_limit_impl(CodeCache *cc, CacheFrame *cf, PyObject *failures)
{
    PyObject *ev = event_base("cache_limit", cc);
    set_item(ev, "limit", PyLong_FromLong(engine_config.cache_size_limit));
    set_item(ev, "last_failure", Py_NewRef(cf->last_failure ? cf->last_failure : Py_None));
    set_item(ev, "failures", failures ? PySequence_List(failures) : PyList_New(0));
    log_event(ev);
    if (sinks_want(EV_CACHE_LIMIT)) {
        EventRecord r;
        char cid[32];
        record_base(&r, EV_CACHE_LIMIT, cc, NULL, cid, sizeof(cid));
        r.reason = utf8(cf->last_failure);
        r.resume_offset = cf->resume_offset * 2;
        r.frame_id = cf->frame_id;
        sinks_emit(&r);
    }
    emit_guard_failures(cc, NULL, failures);

    /* The user's one warning per function (its resume points reach the
       limit on their own); a warnings filter that turns it into an error
       must not break the program, so the error is reported and cleared. */
    if (!engine_config.cache_limit_warning || cc->limit_warned)
        return;
    cc->limit_warned = true;
    PyObject *exc_type, *exc_value, *exc_tb;
    PyErr_Fetch(&exc_type, &exc_value, &exc_tb);
    if (PyErr_WarnFormat(CacheLimitWarning, 1,
                         "dynscope: %U (%U:%d) hit config.cache_size_limit (%d); "
                         "it now runs without capture. Last failing guard: %S",
                         cc->code->co_qualname, cc->code->co_filename,
                         cc->code->co_firstlineno, engine_config.cache_size_limit,
                         cf->last_failure ? cf->last_failure : Py_None) < 0)
        PyErr_WriteUnraisable(NULL);
    PyErr_Restore(exc_type, exc_value, exc_tb);
}

static void events_frame_skip_impl(CodeCache *cc, PyObject *reason)
{
    PyObject *ev = event_base("frame_skip", cc);
    set_item(ev, "reason", Py_NewRef(reason ? reason : Py_None));
    log_event(ev);
    if (sinks_want(EV_FRAME_SKIP)) {
        EventRecord r;
        char cid[32];
        record_base(&r, EV_FRAME_SKIP, cc, NULL, cid, sizeof(cid));
        r.reason = utf8(reason);
        sinks_emit(&r);
    }
}

static void events_graph_break_impl(CodeCache *cc, CacheEntry *e)
{
    const BreakInfo *b = &e->plan.brk;
    capture_counters(capture_state())->graph_breaks++;
    PyObject *ev = event_base("graph_break", cc);
    set_item(ev, "compile_id", compile_id_str(e));
    set_item(ev, "kind", PyUnicode_FromString(b->kind ? b->kind : "unknown"));
    set_item(ev, "reason", Py_NewRef(b->reason ? b->reason : Py_None));
    set_item(ev, "offset", PyLong_FromLong(b->offset));
    set_item(ev, "user_stack", b->user_stack ? PySequence_List(b->user_stack) : PyList_New(0));
    if (b->user_stack && PyList_Check(b->user_stack) && PyList_GET_SIZE(b->user_stack) > 0) {
        PyObject *last = PyList_GET_ITEM(b->user_stack, PyList_GET_SIZE(b->user_stack) - 1);
        if (PyTuple_Check(last) && PyTuple_GET_SIZE(last) >= 2) {
            set_item(ev, "filename", Py_NewRef(PyTuple_GET_ITEM(last, 0)));
            set_item(ev, "lineno", Py_NewRef(PyTuple_GET_ITEM(last, 1)));
        }
    }
    log_event(ev);
    if (sinks_want(EV_GRAPH_BREAK)) {
        EventRecord r;
        char cid[32];
        record_base(&r, EV_GRAPH_BREAK, cc, e, cid, sizeof(cid));
        r.break_kind = b->kind ? b->kind : "";
        r.reason = utf8(b->reason);
        r.break_offset = b->offset;
        PyObject *json = b->user_stack ? to_json(b->user_stack) : NULL;
        r.user_stack_json = json ? utf8(json) : "[]";
        if (b->user_stack && PyList_Check(b->user_stack) && PyList_GET_SIZE(b->user_stack) > 0) {
            PyObject *last = PyList_GET_ITEM(b->user_stack, PyList_GET_SIZE(b->user_stack) - 1);
            if (PyTuple_Check(last) && PyTuple_GET_SIZE(last) >= 2) {
                r.break_file = utf8(PyTuple_GET_ITEM(last, 0));
                r.break_line = (int)PyLong_AsLong(PyTuple_GET_ITEM(last, 1));
                PyErr_Clear();
            }
        }
        sinks_emit(&r);
        Py_XDECREF(json);
    }
}

static void events_reset_impl(void)
{
    if (sinks_want(EV_RESET)) {
        EventRecord r;
        char cid[32];
        record_base(&r, EV_RESET, NULL, NULL, cid, sizeof(cid));
        sinks_emit(&r);
    }
    log_event(Py_BuildValue("{s:s,s:K}", "event", "reset", "at_ns",
                            (unsigned long long)engine_now_ns()));
}

void events_internal_error(const char *what)
{
    internal_error_count++;
    PyObject *key = PyUnicode_FromString(what);
    int seen = key ? PySet_Contains(internal_errors, key) : -1;
    if (seen == 0) {
        if (PySet_Add(internal_errors, key) < 0)
            PyErr_Clear();
        if (PyErr_Occurred()) {
            /* to the process's stderr, not through sys: PyErr_Print would
               set sys.last_value and call sys.excepthook, which the program
               can see */
            PyObject *type, *value, *tb;
            PyErr_Fetch(&type, &value, &tb);
            PyObject *text = value ? PyObject_Repr(value) : NULL;
            const char *s = text ? PyUnicode_AsUTF8(text) : NULL;
            PyErr_Clear();
            fprintf(stderr, "dynscope: internal error while %s; the frame runs "
                            "without capture (reported once): %s: %s\n", what,
                    type ? ((PyTypeObject *)type)->tp_name : "?", s ? s : "?");
            Py_XDECREF(text);
            Py_XDECREF(type);
            Py_XDECREF(value);
            Py_XDECREF(tb);
        }
        else {
            fprintf(stderr, "dynscope: internal error while %s; the frame runs "
                            "without capture (reported once)\n", what);
        }
    }
    Py_XDECREF(key);
    PyErr_Clear();
}

PyObject *events_exception_reason(void)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    PyObject *r = PyUnicode_FromFormat("%s raised while tracing: %S",
                                       type ? ((PyTypeObject *)type)->tp_name : "?",
                                       value ? value : Py_None);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    if (r == NULL)
        PyErr_Clear();
    return r;
}


/* ---- the public event functions: each runs inside the engine, so the
   Python they use (json, warnings, rendering) is never captured ---- */

void events_compile_start(CodeCache *cc, CacheEntry *e)
{
    ThreadCapture *tc = capture_state();
    tc->in_engine++;
    events_compile_start_impl(cc, e);
    tc->in_engine--;
}

void events_compile_end(CodeCache *cc, CacheEntry *e, const char *outcome)
{
    ThreadCapture *tc = capture_state();
    tc->in_engine++;
    events_compile_end_impl(cc, e, outcome);
    tc->in_engine--;
}

void events_recompile(CodeCache *cc, CacheEntry *e, PyObject *reason, PyObject *failures)
{
    ThreadCapture *tc = capture_state();
    tc->in_engine++;
    events_recompile_impl(cc, e, reason, failures);
    tc->in_engine--;
}

void events_cache_limit(CodeCache *cc, CacheFrame *cf, PyObject *failures)
{
    ThreadCapture *tc = capture_state();
    tc->in_engine++;
    events_cache_limit_impl(cc, cf, failures);
    tc->in_engine--;
}

void events_frame_skip(CodeCache *cc, PyObject *reason)
{
    ThreadCapture *tc = capture_state();
    tc->in_engine++;
    events_frame_skip_impl(cc, reason);
    tc->in_engine--;
}

void events_graph_break(CodeCache *cc, CacheEntry *e)
{
    ThreadCapture *tc = capture_state();
    tc->in_engine++;
    events_graph_break_impl(cc, e);
    tc->in_engine--;
}

void events_reset(void)
{
    ThreadCapture *tc = capture_state();
    tc->in_engine++;
    events_reset_impl();
    tc->in_engine--;
}

/* ---- Python surface: _C.events(), _C.clear_events(), _C.event_stats() ---- */

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
                         internal_error_count);
}

static PyObject *py_trace_init(PyObject *self, PyObject *arg)
{
    (void)self;
    const char *path = arg == Py_None ? NULL : PyUnicode_AsUTF8(arg);
    if (path == NULL && arg != Py_None)
        return NULL;
    if (trace_init(path) == 0)
        Py_RETURN_TRUE;
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
    {NULL, NULL, 0, NULL},
};

int events_init(PyObject *module)
{
    event_log = PyList_New(0);
    internal_errors = PySet_New(NULL);
    if (event_log == NULL || internal_errors == NULL)
        return -1;
    CacheLimitWarning = PyErr_NewExceptionWithDoc(
        "dynscope._C.CacheLimitWarning",
        "A function reached config.cache_size_limit and now runs without capture.",
        PyExc_UserWarning, NULL);
    if (CacheLimitWarning == NULL
        || PyModule_AddObjectRef(module, "CacheLimitWarning", CacheLimitWarning) < 0)
        return -1;
    return PyModule_AddFunctions(module, event_methods);
}
