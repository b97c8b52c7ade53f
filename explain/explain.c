/*
 * explain.c -- dynscope.explain(fn)(*args) and dynscope.ExplainBackend, and
 * the ExplainOutput report they build (DESIGN.md 4.5; contract in explain.h).
 *
 * Invariants:
 *   - An Explainer call installs its CaptureSession on the calling thread
 *     for exactly the duration of fn's call; the session's caches die with
 *     the call, the report keeps only what it shows (graphs, entries).
 *   - Building a report never runs user code.
 */
#include "explain_int.h"
#include "../engine/base/breaks.h"
#include "../event/places.h"

#include <string.h>
#include <structmember.h>

/* ---- record types ---- */

static PyTypeObject *StackFrameType;
static PyTypeObject *BreakReasonType;
static PyTypeObject *CompileTimeType;
static PyTypeObject *RecompileType;

static PyStructSequence_Field stack_frame_fields[] = {
    {"filename", "file of the frame"},
    {"lineno", "line number"},
    {"name", "function (qualified name)"},
    {"line", "the source line, stripped"},
    {NULL, NULL},
};
static PyStructSequence_Desc stack_frame_desc = {
    "dynscope.StackFrame", "One frame of a graph break's user stack.", stack_frame_fields, 4,
};

static PyStructSequence_Field break_reason_fields[] = {
    {"reason", "why the graph ended, in words"},
    {"kind", "call, data_dependent_branch, data_escape or unsupported"},
    {"user_stack", "list of StackFrame, outermost first (through inlined calls)"},
    {"compile_id", "the entry whose graph the break ended, 'frame/compile'"},
    {"function", "the captured function the break belongs to"},
    {"break_type", "the registry's id of its type, e.g. 'DS0001' (docs/breaks.md)"},
    {"break_class", "'your code', 'library code', 'engine limit' or 'fundamental'"},
    {NULL, NULL},
};
static PyStructSequence_Desc break_reason_desc = {
    "dynscope.BreakReason", "One graph break.", break_reason_fields, 5,
};

static PyStructSequence_Field compile_time_fields[] = {
    {"compile_id", "'frame/compile'"},
    {"function", "qualified name"},
    {"ms", "translation and backend time, milliseconds"},
    {"outcome", "ok, skipped or error"},
    {"trace_ms", "of ms: tracing the bytecode, every attempt"},
    {"guards_ms", "of ms: building the guards"},
    {"graph_ms", "of ms: making the GraphModule"},
    {"backend_ms", "of ms: the backend"},
    {"plan_ms", "of ms: the rest of making the plan"},
    {"events_ms", "outside ms: the events emitted for the compile"},
    {"attempts", "translations made (retries count)"},
    {NULL, NULL},
};
static PyStructSequence_Desc compile_time_desc = {
    "dynscope.CompileTime", "Time spent compiling one entry.", compile_time_fields, 4,
};

static PyStructSequence_Field recompile_fields[] = {
    {"function", "qualified name"},
    {"compile_id", "the new entry, 'frame/compile'"},
    {"reason", "the newest older entry's failing guard, 'expr (observed v)'"},
    {"nearest_entry", "the older entry nearest to the new inputs (fewest failing guards), "
                      "'frame/compile', or None"},
    {"failing", "how many of its guards fail"},
    {"guards", "its failing guards: dicts with idx, kind, expr, observed, user_stack "
               "(where the guard came from)"},
    {"capture_ms", "the miss's cost: translating the new entry, milliseconds"},
    {NULL, NULL},
};
static PyStructSequence_Desc recompile_desc = {
    "dynscope.Recompile", "One recompile, with the nearest-entry diff.", recompile_fields, 7,
};

/* ---- ExplainOutput ---- */

typedef struct {
    PyObject_HEAD
    PyObject *function;        /* strong: str, what was explained */
    PyObject *graphs;          /* strong: list of GraphModule */
    PyObject *break_reasons;   /* strong: list of BreakReason */
    PyObject *ops_per_graph;   /* strong: list of lists of node targets */
    PyObject *out_guards;      /* strong: list of GuardInfo */
    PyObject *compile_times;   /* strong: list of CompileTime */
    PyObject *plans;           /* strong: list of (label, plan text) */
    PyObject *skipped;         /* strong: list of (function, "file:line", reason) */
    PyObject *cache_limits;    /* strong: list of (function, last failing guard) */
    PyObject *entries;         /* strong: list of CacheEntry, compile order */
    PyObject *skipped_by_rule; /* strong: list of (rule, functions, calls), most calls first */
    PyObject *recompiles;      /* strong: list of Recompile, as they happened */
    PyObject *break_summary;   /* strong: list of BreakGroup, most first */
    PyObject *skip_summary;    /* strong: list of BreakGroup of the skipped frames */
} ExplainOutput;

static PyTypeObject *ExplainOutputType;

static int output_traverse(ExplainOutput *o, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(o));
    Py_VISIT(o->function);
    Py_VISIT(o->graphs);
    Py_VISIT(o->break_reasons);
    Py_VISIT(o->ops_per_graph);
    Py_VISIT(o->out_guards);
    Py_VISIT(o->compile_times);
    Py_VISIT(o->plans);
    Py_VISIT(o->skipped);
    Py_VISIT(o->cache_limits);
    Py_VISIT(o->entries);
    Py_VISIT(o->skipped_by_rule);
    Py_VISIT(o->recompiles);
    Py_VISIT(o->break_summary);
    Py_VISIT(o->skip_summary);
    return 0;
}

static int output_clear(ExplainOutput *o)
{
    Py_CLEAR(o->function);
    Py_CLEAR(o->graphs);
    Py_CLEAR(o->break_reasons);
    Py_CLEAR(o->ops_per_graph);
    Py_CLEAR(o->out_guards);
    Py_CLEAR(o->compile_times);
    Py_CLEAR(o->plans);
    Py_CLEAR(o->skipped);
    Py_CLEAR(o->cache_limits);
    Py_CLEAR(o->entries);
    Py_CLEAR(o->skipped_by_rule);
    Py_CLEAR(o->recompiles);
    Py_CLEAR(o->break_summary);
    Py_CLEAR(o->skip_summary);
    return 0;
}

static void output_dealloc(ExplainOutput *o)
{
    PyTypeObject *tp = Py_TYPE(o);
    PyObject_GC_UnTrack(o);
    output_clear(o);
    tp->tp_free((PyObject *)o);
    Py_DECREF(tp);
}

/* dict.get(key) or None, borrowed. */
static PyObject *ev_get(PyObject *ev, const char *key)
{
    PyObject *v = PyDict_GetItemString(ev, key);
    return v ? v : Py_None;
}

/* The function an event names, as users read it: a decorator's wrapper
   by what it wraps ("shown_as", events.h events_wrapper_name), else its
   qualified name.  Borrowed. */
static PyObject *ev_name(PyObject *ev)
{
    PyObject *v = PyDict_GetItemString(ev, "shown_as");
    return v ? v : ev_get(ev, "name");
}

static bool ev_is(PyObject *ev, const char *name)
{
    PyObject *e = PyDict_GetItemString(ev, "event");
    return e && PyUnicode_Check(e) && PyUnicode_CompareWithASCIIString(e, name) == 0;
}

static PyObject *make_stack(PyObject *raw)
{
    PyObject *out = PyList_New(0);
    if (out == NULL || raw == NULL || !PyList_Check(raw))
        return out;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(raw); i++) {
        PyObject *t = PyList_GET_ITEM(raw, i);
        if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) < 4)
            continue;
        PyObject *fr = PyStructSequence_New(StackFrameType);
        if (fr == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        for (int k = 0; k < 4; k++)
            PyStructSequence_SET_ITEM(fr, k, Py_NewRef(PyTuple_GET_ITEM(t, k)));
        int rc = PyList_Append(out, fr);
        Py_DECREF(fr);
        if (rc < 0) {
            Py_DECREF(out);
            return NULL;
        }
    }
    return out;
}

/* CompileTime's phase fields (4 on) from a compile_end's "phases" dict
   (ns; None where the dict lacks one). */
static void set_phases(PyObject *ct, PyObject *phases)
{
    static const char *const keys[] = {"trace_ns", "guards_ns", "graph_ns", "backend_ns",
                                       "plan_ns", "events_ns"};
    for (int i = 0; i < 6; i++) {
        PyObject *v = PyDict_Check(phases) ? PyDict_GetItemString(phases, keys[i]) : NULL;
        double ns = v ? PyFloat_AsDouble(v) : -1.0;
        PyStructSequence_SET_ITEM(ct, 4 + i, ns >= 0 ? PyFloat_FromDouble(ns / 1e6) : Py_NewRef(Py_None));
    }
    PyObject *n = PyDict_Check(phases) ? PyDict_GetItemString(phases, "attempts") : NULL;
    PyStructSequence_SET_ITEM(ct, 10, Py_NewRef(n ? n : Py_None));
    PyErr_Clear();
}

static int append_steal(PyObject *list, PyObject *item)
{
    if (item == NULL)
        return -1;
    int rc = PyList_Append(list, item);
    Py_DECREF(item);
    return rc;
}

/* The targets of a graph's call nodes, in order.  New list or NULL. */
static PyObject *graph_ops(PyObject *gm)
{
    PyObject *graph = PyObject_GetAttrString(gm, "graph");
    PyObject *nodes = graph ? PyObject_GetAttrString(graph, "nodes") : NULL;
    Py_XDECREF(graph);
    PyObject *ops = nodes ? PyList_New(0) : NULL;
    Py_ssize_t n = nodes ? PySequence_Length(nodes) : 0;
    for (Py_ssize_t i = 0; ops && i < n; i++) {
        NodeObject *node = (NodeObject *)PySequence_GetItem(nodes, i);
        if (node == NULL) {
            Py_CLEAR(ops);
            break;
        }
        if (node->op == NODE_CALL_FUNCTION || node->op == NODE_CALL_METHOD
            || node->op == NODE_CALL_MODULE) {
            if (PyList_Append(ops, node->target) < 0)
                Py_CLEAR(ops);
        }
        Py_DECREF(node);
    }
    Py_XDECREF(nodes);
    return ops;
}

static PyObject *entry_label(CacheEntry *e)
{
    PyObject *name = e->shown_as ? e->shown_as : e->code_name ? e->code_name : Py_None;
    if (e->resume_offset == 0)
        return PyUnicode_FromFormat("%S [%d/%d]", name, e->frame_id, e->frame_compile_id);
    return PyUnicode_FromFormat("%S [%d/%d], resuming at line %d", name, e->frame_id,
                                e->frame_compile_id, e->resume_line);
}

/* A Recompile from a recompile event dict.  New reference or NULL. */
static PyObject *make_recompile(PyObject *ev)
{
    PyObject *r = PyStructSequence_New(RecompileType);
    if (r == NULL)
        return NULL;
    PyObject *nearest = ev_get(ev, "nearest");
    bool has = PyDict_Check(nearest);
    PyObject *guards = has ? PyDict_GetItemString(nearest, "guards") : NULL;
    PyObject *failing = has ? PyDict_GetItemString(nearest, "failing") : NULL;
    PyObject *ns = has ? PyDict_GetItemString(nearest, "capture_ns") : NULL;
    double ms = ns ? PyFloat_AsDouble(ns) / 1e6 : 0.0;
    if (ms < 0)
        ms = 0.0;
    PyErr_Clear();
    PyStructSequence_SET_ITEM(r, 0, Py_NewRef(ev_name(ev)));
    PyStructSequence_SET_ITEM(r, 1, Py_NewRef(ev_get(ev, "compile_id")));
    PyStructSequence_SET_ITEM(r, 2, Py_NewRef(ev_get(ev, "reason")));
    PyStructSequence_SET_ITEM(r, 3, Py_NewRef(has ? ev_get(nearest, "entry") : Py_None));
    PyStructSequence_SET_ITEM(r, 4, failing ? Py_NewRef(failing) : PyLong_FromLong(0));
    PyStructSequence_SET_ITEM(r, 5, guards && PyList_Check(guards) ? PySequence_List(guards)
                                                                   : PyList_New(0));
    PyStructSequence_SET_ITEM(r, 6, PyFloat_FromDouble(ms));
    for (int k = 4; k < 7; k++)
        if (PyStructSequence_GET_ITEM(r, k) == NULL) {
            Py_DECREF(r);
            return NULL;
        }
    return r;
}

/* What the break that ended entry `compile_id`'s graph cost, measured
   (engine/capture/cost.c: every call in explain's, 1 in 64 while
   recording, scaled): *cost the time outside graphs after it, *fn_time
   the time of calls of its code (ns; compiles aside); None each when not
   measured.  New references; 0, or -1 with an exception. */
static int break_cost(PyObject *entries, PyObject *compile_id, PyObject **cost, PyObject **fn_time)
{
    CacheEntry *hit = NULL;
    for (Py_ssize_t i = 0; hit == NULL && compile_id != NULL && i < PyList_GET_SIZE(entries); i++) {
        CacheEntry *e = (CacheEntry *)PyList_GET_ITEM(entries, i);
        char cid[32];
        PyOS_snprintf(cid, sizeof cid, "%d/%d", e->frame_id, e->frame_compile_id);
        if (PyUnicode_Check(compile_id) && PyUnicode_CompareWithASCIIString(compile_id, cid) == 0)
            hit = e;
    }
    CacheEntryCosts c;
    if (hit != NULL)
        cache_entry_costs(hit, &c);
    if (hit == NULL || c.samples == 0) {
        *cost = Py_NewRef(Py_None);
        *fn_time = Py_NewRef(Py_None);
        return 0;
    }
    uint64_t fn_ns = 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(entries); i++) {
        CacheEntry *e = (CacheEntry *)PyList_GET_ITEM(entries, i);
        CacheEntryCosts ec;
        if (e->code_id == hit->code_id) {
            cache_entry_costs(e, &ec);
            fn_ns += ec.run_ns;
        }
    }
    *cost = PyLong_FromUnsignedLongLong(c.break_ns);
    *fn_time = fn_ns > 0 ? PyLong_FromUnsignedLongLong(fn_ns) : Py_NewRef(Py_None);
    if (*cost == NULL || *fn_time == NULL) {
        Py_CLEAR(*cost);
        Py_CLEAR(*fn_time);
        return -1;
    }
    return 0;
}

/* The report's data from an event log and the entries made. */
static PyObject *output_build(PyObject *function, PyObject *events, PyObject *entries)
{
    ExplainOutput *o = PyObject_GC_New(ExplainOutput, ExplainOutputType);
    if (o == NULL)
        return NULL;
    o->function = Py_NewRef(function);
    o->graphs = PyList_New(0);
    o->break_reasons = PyList_New(0);
    o->ops_per_graph = PyList_New(0);
    o->out_guards = PyList_New(0);
    o->compile_times = PyList_New(0);
    o->plans = PyList_New(0);
    o->skipped = PyList_New(0);
    o->cache_limits = PyList_New(0);
    o->entries = PySequence_List(entries);
    o->skipped_by_rule = PyList_New(0);
    o->recompiles = PyList_New(0);
    o->break_summary = o->skip_summary = NULL;
    PyObject *break_items = PyList_New(0), *skip_items = PyList_New(0);
    PyObject_GC_Track(o);
    if (!break_items || !skip_items)
        goto fail;
    if (!o->graphs || !o->break_reasons || !o->ops_per_graph || !o->out_guards
        || !o->compile_times || !o->plans || !o->skipped || !o->cache_limits || !o->entries
        || !o->skipped_by_rule || !o->recompiles)
        goto fail;

    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(o->entries); i++) {
        CacheEntry *e = (CacheEntry *)PyList_GET_ITEM(o->entries, i);
        if (e->plan.gm != NULL) {
            if (PyList_Append(o->graphs, e->plan.gm) < 0
                || append_steal(o->ops_per_graph, graph_ops(e->plan.gm)) < 0)
                goto fail;
        }
        PyObject *infos = guardset_info_list(&e->guards);
        if (infos == NULL)
            goto fail;
        for (Py_ssize_t k = 0; k < PyList_GET_SIZE(infos); k++) {
            PyObject *g = PyList_GET_ITEM(infos, k);
            PyObject *kind = PyObject_GetAttrString(g, "kind");
            bool internal = kind && PyUnicode_Check(kind)
                            && PyUnicode_CompareWithASCIIString(kind, "BACKEND_MATCH") == 0;
            Py_XDECREF(kind);
            if (!internal && PyList_Append(o->out_guards, g) < 0) {
                Py_DECREF(infos);
                goto fail;
            }
        }
        Py_DECREF(infos);
        PyObject *label = entry_label(e);
        PyObject *text = label ? cache_entry_plan_text(e) : NULL;
        PyObject *pair = text ? PyTuple_Pack(2, label, text) : NULL;
        Py_XDECREF(label);
        Py_XDECREF(text);
        if (append_steal(o->plans, pair) < 0)
            goto fail;
    }

    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(events); i++) {
        PyObject *ev = PyList_GET_ITEM(events, i);
        if (!PyDict_Check(ev))
            continue;
        if (ev_is(ev, "graph_break")) {
            PyObject *br = PyStructSequence_New(BreakReasonType);
            PyObject *stack = br ? make_stack(ev_get(ev, "user_stack")) : NULL;
            if (stack == NULL) {
                Py_XDECREF(br);
                goto fail;
            }
            PyStructSequence_SET_ITEM(br, 0, Py_NewRef(ev_get(ev, "reason")));
            PyStructSequence_SET_ITEM(br, 1, Py_NewRef(ev_get(ev, "kind")));
            PyStructSequence_SET_ITEM(br, 2, stack);
            PyStructSequence_SET_ITEM(br, 3, Py_NewRef(ev_get(ev, "compile_id")));
            PyStructSequence_SET_ITEM(br, 4, Py_NewRef(ev_name(ev)));
            PyStructSequence_SET_ITEM(br, 5, Py_NewRef(ev_get(ev, "break_type")));
            PyStructSequence_SET_ITEM(br, 6, Py_NewRef(ev_get(ev, "break_class")));
            Py_ssize_t depth = PyList_GET_SIZE(stack);
            PyObject *cost = NULL, *fn_time = NULL;
            if (break_cost(o->entries, ev_get(ev, "compile_id"), &cost, &fn_time) < 0)
                goto fail;
            PyObject *item = PyTuple_Pack(6, ev_get(ev, "break_type"), ev_get(ev, "break_class"),
                                          ev_get(ev, "reason"),
                                          depth > 0 ? PyList_GET_ITEM(stack, depth - 1) : Py_None,
                                          cost, fn_time);
            Py_DECREF(cost);
            Py_DECREF(fn_time);
            if (append_steal(o->break_reasons, br) < 0 || append_steal(break_items, item) < 0)
                goto fail;
        }
        else if (ev_is(ev, "compile_end")) {
            PyObject *ct = PyStructSequence_New(CompileTimeType);
            if (ct == NULL)
                goto fail;
            double ns = PyFloat_AsDouble(ev_get(ev, "duration_ns"));
            if (ns == -1.0 && PyErr_Occurred()) {
                PyErr_Clear();
                ns = 0;
            }
            PyStructSequence_SET_ITEM(ct, 0, Py_NewRef(ev_get(ev, "compile_id")));
            PyStructSequence_SET_ITEM(ct, 1, Py_NewRef(ev_name(ev)));
            PyStructSequence_SET_ITEM(ct, 2, PyFloat_FromDouble(ns / 1e6));
            PyStructSequence_SET_ITEM(ct, 3, Py_NewRef(ev_get(ev, "outcome")));
            set_phases(ct, ev_get(ev, "phases"));
            if (append_steal(o->compile_times, ct) < 0)
                goto fail;
        }
        else if (ev_is(ev, "frame_skip")) {
            PyObject *where = PyUnicode_FromFormat("%S:%S", ev_get(ev, "filename"),
                                                   ev_get(ev, "firstlineno"));
            PyObject *t = where ? PyTuple_Pack(3, ev_name(ev), where, ev_get(ev, "reason")) : NULL;
            Py_XDECREF(where);
            PyObject *frame = PyStructSequence_New(StackFrameType);   /* the frame's first line */
            if (frame != NULL) {
                PyStructSequence_SET_ITEM(frame, 0, Py_NewRef(ev_get(ev, "filename")));
                PyStructSequence_SET_ITEM(frame, 1, Py_NewRef(ev_get(ev, "firstlineno")));
                PyStructSequence_SET_ITEM(frame, 2, Py_NewRef(ev_name(ev)));
                PyStructSequence_SET_ITEM(frame, 3, PyUnicode_FromString(""));
            }
            PyObject *item = frame ? PyTuple_Pack(4, ev_get(ev, "break_type"),
                                                  ev_get(ev, "break_class"), ev_get(ev, "reason"),
                                                  frame) : NULL;
            Py_XDECREF(frame);
            if (append_steal(o->skipped, t) < 0 || append_steal(skip_items, item) < 0)
                goto fail;
        }
        else if (ev_is(ev, "recompile")) {
            if (append_steal(o->recompiles, make_recompile(ev)) < 0)
                goto fail;
        }
        else if (ev_is(ev, "cache_limit")) {
            PyObject *t = PyTuple_Pack(2, ev_name(ev), ev_get(ev, "last_failure"));
            if (append_steal(o->cache_limits, t) < 0)
                goto fail;
        }
    }
    if ((o->break_summary = summary_groups(break_items)) == NULL
        || (o->skip_summary = summary_groups(skip_items)) == NULL)
        goto fail;
    Py_DECREF(break_items);
    Py_DECREF(skip_items);
    return (PyObject *)o;
fail:
    Py_XDECREF(break_items);
    Py_XDECREF(skip_items);
    Py_DECREF(o);
    return NULL;
}

/* ---- the report ---- */

/* The site key of a break: its reason and innermost frame. */
static PyObject *site_key(PyObject *br)
{
    PyObject *stack = PyStructSequence_GET_ITEM(br, 2);
    Py_ssize_t n = PyList_GET_SIZE(stack);
    PyObject *fr = n > 0 ? PyList_GET_ITEM(stack, n - 1) : NULL;
    return PyUnicode_FromFormat("%S\x1f%S\x1f%S", PyStructSequence_GET_ITEM(br, 0),
                                fr ? PyStructSequence_GET_ITEM(fr, 0) : Py_None,
                                fr ? PyStructSequence_GET_ITEM(fr, 1) : Py_None);
}

/* The graph breaks one by one, folded: breaks with the same reason at the
   same site are one item, "xN" when there are several, in the order of
   their first occurrence. */
static int breaks_section(ExplainOutput *o, PyObject *out)
{
    Py_ssize_t nbreaks = PyList_GET_SIZE(o->break_reasons);
    if (nbreaks > 0 && explain_line(out, "\nGraph breaks, each (folded by site)") < 0)
        return -1;
    PyObject *counts = PyDict_New();      /* site key -> count */
    PyObject *order = PyList_New(0);      /* (key, first break) in first-seen order */
    int rc = counts && order ? 0 : -1;
    for (Py_ssize_t i = 0; rc == 0 && i < nbreaks; i++) {
        PyObject *br = PyList_GET_ITEM(o->break_reasons, i);
        PyObject *key = site_key(br);
        PyObject *n = key ? PyDict_GetItemWithError(counts, key) : NULL;
        PyObject *next = key && !PyErr_Occurred() ? PyLong_FromLong(n ? PyLong_AsLong(n) + 1 : 1) : NULL;
        PyObject *pair = next && n == NULL ? PyTuple_Pack(2, key, br) : NULL;
        if (next == NULL || PyDict_SetItem(counts, key, next) < 0
            || (n == NULL && (pair == NULL || PyList_Append(order, pair) < 0)))
            rc = -1;
        Py_XDECREF(pair);
        Py_XDECREF(next);
        Py_XDECREF(key);
    }
    for (Py_ssize_t i = 0; rc == 0 && i < PyList_GET_SIZE(order); i++) {
        PyObject *key = PyTuple_GET_ITEM(PyList_GET_ITEM(order, i), 0);
        PyObject *br = PyTuple_GET_ITEM(PyList_GET_ITEM(order, i), 1);
        long n = PyLong_AsLong(PyDict_GetItem(counts, key));
        PyObject *stack = PyStructSequence_GET_ITEM(br, 2);
        Py_ssize_t depth = PyList_GET_SIZE(stack);
        char times[32] = "";
        if (n > 1)
            PyOS_snprintf(times, sizeof times, "  x%ld", n);
        rc = explain_line(out, "  %zd. %S  [%S, %S %S]%s", i + 1, PyStructSequence_GET_ITEM(br, 0),
                          PyStructSequence_GET_ITEM(br, 1), PyStructSequence_GET_ITEM(br, 5),
                          PyStructSequence_GET_ITEM(br, 6), times);
        for (Py_ssize_t k = 0; rc == 0 && k < depth; k++) {
            PyObject *fr = PyList_GET_ITEM(stack, k);
            PyObject *file = PyStructSequence_GET_ITEM(fr, 0);
            const char *path = PyUnicode_Check(file) ? PyUnicode_AsUTF8(file) : NULL;
            if (path == NULL)
                PyErr_Clear();
            rc = path ? explain_line(out, "       %s:%S in %S", place_readable(path),   /* installed: from its package on */
                                     PyStructSequence_GET_ITEM(fr, 1), PyStructSequence_GET_ITEM(fr, 2))
                      : explain_line(out, "       %S:%S in %S", file, PyStructSequence_GET_ITEM(fr, 1),
                                     PyStructSequence_GET_ITEM(fr, 2));
            if (rc == 0)
                rc = explain_line(out, "           %S", PyStructSequence_GET_ITEM(fr, 3));
        }
        PyObject *hint = rc == 0 ? summary_hint(PyStructSequence_GET_ITEM(br, 5),
                                                PyStructSequence_GET_ITEM(br, 6),
                                                depth > 0 ? PyStructSequence_GET_ITEM(
                                                    PyList_GET_ITEM(stack, depth - 1), 0)
                                                          : Py_None) : NULL;
        rc = hint ? explain_line(out, "       hint: %U", hint) : -1;
        Py_XDECREF(hint);
    }
    Py_XDECREF(counts);
    Py_XDECREF(order);
    return rc;
}

/* Append a formatted line. */
int explain_line(PyObject *out, const char *fmt, ...)
{
    va_list va;
    va_start(va, fmt);
    PyObject *s = PyUnicode_FromFormatV(fmt, va);
    va_end(va);
    int rc = append_steal(out, s);
    return rc;
}

/* "file.py:12 in f" per frame of a user stack (a list of (filename,
   lineno, qualname, source) tuples, outermost first), joined by " > ";
   file names without their directory.  New str, "" for none; NULL on
   error. */
static PyObject *site_text(PyObject *stack)
{
    PyObject *parts = PyList_New(0);
    for (Py_ssize_t i = 0; parts && stack && PyList_Check(stack) && i < PyList_GET_SIZE(stack); i++) {
        PyObject *t = PyList_GET_ITEM(stack, i);
        if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) < 3 || !PyUnicode_Check(PyTuple_GET_ITEM(t, 0)))
            continue;
        PyObject *file = PyTuple_GET_ITEM(t, 0);
        Py_ssize_t slash = PyUnicode_FindChar(file, '/', 0, PyUnicode_GET_LENGTH(file), -1);
        PyObject *base = slash >= 0 ? PyUnicode_Substring(file, slash + 1, PyUnicode_GET_LENGTH(file))
                                    : Py_NewRef(file);
        PyObject *part = base ? PyUnicode_FromFormat("%U:%S in %S", base, PyTuple_GET_ITEM(t, 1),
                                                     PyTuple_GET_ITEM(t, 2)) : NULL;
        Py_XDECREF(base);
        if (append_steal(parts, part) < 0)
            Py_CLEAR(parts);
    }
    PyObject *sep = parts ? PyUnicode_FromString(" > ") : NULL;
    PyObject *text = sep ? PyUnicode_Join(sep, parts) : NULL;
    Py_XDECREF(sep);
    Py_XDECREF(parts);
    return text;
}

/* "    # file.py:12 in f" for a guard made at `stack`, "" when unknown.  New
   str or NULL. */
static PyObject *site_suffix(PyObject *stack)
{
    PyObject *text = site_text(stack);
    if (text == NULL || PyUnicode_GET_LENGTH(text) == 0)
        return text;
    Py_SETREF(text, PyUnicode_FromFormat("    # %U", text));
    return text;
}

/* What a dynamic source would have removed (dynscope/whatif.py, which the
   report and `dynscope whatif` use too): its lines, none when no recompile
   is one source's.  A failure there costs the section, never the report
   (logged once, counted). */
static int whatif_section(ExplainOutput *o, PyObject *out)
{
    if (PyList_GET_SIZE(o->recompiles) == 0)
        return 0;
    PyObject *mod = PyImport_ImportModule("dynscope.whatif");
    PyObject *lines = mod ? PyObject_CallMethod(mod, "explain_lines", "O", (PyObject *)o) : NULL;
    Py_XDECREF(mod);
    if (lines == NULL || !PyList_Check(lines)) {
        Py_XDECREF(lines);
        warn_internal_error("explain's what-if section");
        return 0;
    }
    int rc = 0;
    for (Py_ssize_t i = 0; rc == 0 && i < PyList_GET_SIZE(lines); i++)
        rc = explain_line(out, "%S", PyList_GET_ITEM(lines, i));
    Py_DECREF(lines);
    return rc;
}

/* A compile's label in the compile-time section, "name [id]" (new str or
   NULL). */
static PyObject *compile_label(PyObject *ct)
{
    PyObject *name = PyStructSequence_GET_ITEM(ct, 1), *cid = PyStructSequence_GET_ITEM(ct, 0);
    return PyUnicode_FromFormat("%S [%S]", PyUnicode_Check(name) ? name : Py_None,
                                PyUnicode_Check(cid) ? cid : Py_None);
}

/* The compile-time section: each compile's time by phase, in ms.  The
   first column is as wide as its longest label, in characters (a
   decorator's wrapper is named "decorator(wrapper) \u2192 what it wraps"). */
static int compile_times_section(ExplainOutput *o, PyObject *out)
{
    Py_ssize_t n = PyList_GET_SIZE(o->compile_times);
    Py_ssize_t width = 28;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *label = compile_label(PyList_GET_ITEM(o->compile_times, i));
        if (label == NULL)
            return -1;
        if (PyUnicode_GET_LENGTH(label) > width)
            width = PyUnicode_GET_LENGTH(label) < 120 ? PyUnicode_GET_LENGTH(label) : 120;
        Py_DECREF(label);
    }
    char line[512];
    PyOS_snprintf(line, sizeof line, "  %-*s %8s %8s %8s %8s %8s %8s %8s %8s", (int)width, "compile",
                  "total", "trace", "guards", "graph", "backend", "plan", "events", "attempts");
    if (n > 0 && (explain_line(out, "\nCompile time by phase (ms; events are outside the total)") < 0
                  || explain_line(out, "%s", line) < 0))
        return -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *ct = PyList_GET_ITEM(o->compile_times, i);
        char cells[7][16];
        for (int k = 0; k < 7; k++) {
            PyObject *v = PyStructSequence_GET_ITEM(ct, k == 0 ? 2 : 3 + k);
            if (v == Py_None)
                PyOS_snprintf(cells[k], sizeof cells[k], "-");
            else
                PyOS_snprintf(cells[k], sizeof cells[k], "%.2f", PyFloat_AsDouble(v));
        }
        PyObject *attempts = PyStructSequence_GET_ITEM(ct, 10);
        long nattempts = PyLong_Check(attempts) ? PyLong_AsLong(attempts) : -1;
        PyObject *label = compile_label(ct);
        Py_ssize_t pad = label ? width - PyUnicode_GET_LENGTH(label) : 0;
        const char *text = label ? PyUnicode_AsUTF8(label) : NULL;
        if (text == NULL) {
            Py_XDECREF(label);
            return -1;
        }
        PyOS_snprintf(line, sizeof line, "  %s%*s %8s %8s %8s %8s %8s %8s %8s %8ld", text,
                      (int)(pad > 0 ? pad : 0), "", cells[0], cells[1], cells[2], cells[3],
                      cells[4], cells[5], cells[6], nattempts);
        Py_DECREF(label);
        if (explain_line(out, "%s", line) < 0)
            return -1;
    }
    PyErr_Clear();
    return 0;
}

/* The Recompiles section: each recompile, why, and the nearest older entry
   with every guard of it that failed (what to change for a hit). */
static int recompiles_section(ExplainOutput *o, PyObject *out)
{
    Py_ssize_t n = PyList_GET_SIZE(o->recompiles);
    if (n > 0 && explain_line(out, "\nRecompiles (the older entry nearest to the new inputs, and its failing guards)") < 0)
        return -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *r = PyList_GET_ITEM(o->recompiles, i);
        PyObject *nearest = PyStructSequence_GET_ITEM(r, 3);
        PyObject *guards = PyStructSequence_GET_ITEM(r, 5);
        char ms[32];
        PyOS_snprintf(ms, sizeof ms, "%.1f", PyFloat_AsDouble(PyStructSequence_GET_ITEM(r, 6)));
        if (explain_line(out, "  %zd. %S [%S]: capture took %s ms", i + 1, PyStructSequence_GET_ITEM(r, 0),
                 PyStructSequence_GET_ITEM(r, 1), ms) < 0
            || explain_line(out, "       newest entry failed: %S", PyStructSequence_GET_ITEM(r, 2)) < 0)
            return -1;
        if (nearest == Py_None)
            continue;
        long failing = PyLong_AsLong(PyStructSequence_GET_ITEM(r, 4));
        if (explain_line(out, "       nearest entry [%S]: %ld guard%s fail%s", nearest, failing,
                 failing == 1 ? "" : "s", failing == 1 ? "s" : "") < 0)
            return -1;
        for (Py_ssize_t k = 0; k < PyList_GET_SIZE(guards); k++) {
            PyObject *g = PyList_GET_ITEM(guards, k);
            if (!PyDict_Check(g))
                continue;
            PyObject *where = site_suffix(ev_get(g, "user_stack"));
            char kind[24];
            PyOS_snprintf(kind, sizeof kind, "%-14s", PyUnicode_Check(ev_get(g, "kind"))
                          ? PyUnicode_AsUTF8(ev_get(g, "kind")) : "?");
            int rc = where ? explain_line(out, "         %s %S  (observed %S)%U", kind, ev_get(g, "expr"),
                                  ev_get(g, "observed"), where) : -1;
            Py_XDECREF(where);
            if (rc < 0)
                return -1;
        }
        if (failing > PyList_GET_SIZE(guards)
            && explain_line(out, "         (%ld more not shown)", failing - (long)PyList_GET_SIZE(guards)) < 0)
            return -1;
    }
    PyErr_Clear();
    return 0;
}

/* Append each line of `text` indented by `indent` spaces. */
static int indented(PyObject *out, PyObject *text, int indent)
{
    PyObject *lines = PyUnicode_Splitlines(text, 0);
    if (lines == NULL)
        return -1;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(lines); i++) {
        char pad[32];
        int n = indent < (int)sizeof(pad) - 1 ? indent : (int)sizeof(pad) - 1;
        memset(pad, ' ', (size_t)n);
        pad[n] = '\0';
        if (explain_line(out, "%s%U", pad, PyList_GET_ITEM(lines, i)) < 0) {
            Py_DECREF(lines);
            return -1;
        }
    }
    Py_DECREF(lines);
    return 0;
}

static PyObject *output_str(ExplainOutput *o)
{
    PyObject *out = PyList_New(0);
    if (out == NULL)
        return NULL;
    Py_ssize_t ngraphs = PyList_GET_SIZE(o->graphs);
    Py_ssize_t nbreaks = PyList_GET_SIZE(o->break_reasons);
    long nops = 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(o->ops_per_graph); i++)
        nops += (long)PyList_GET_SIZE(PyList_GET_ITEM(o->ops_per_graph, i));
    double ms = 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(o->compile_times); i++) {
        double v = PyFloat_AsDouble(PyStructSequence_GET_ITEM(PyList_GET_ITEM(o->compile_times, i), 2));
        ms += v > 0 ? v : 0;
    }
    PyErr_Clear();
    char msbuf[32];
    PyOS_snprintf(msbuf, sizeof(msbuf), "%.1f", ms);

    if (explain_line(out, "dynscope.explain: %U", o->function) < 0
        || explain_line(out, "  %zd graph%s, %zd graph break%s, %ld op%s in graphs", ngraphs,
                ngraphs == 1 ? "" : "s", nbreaks, nbreaks == 1 ? "" : "s", nops,
                nops == 1 ? "" : "s") < 0
        || explain_line(out, "  %zd compile%s (%s ms), %zd frame%s skipped, %zd cache limit%s hit",
                PyList_GET_SIZE(o->compile_times), PyList_GET_SIZE(o->compile_times) == 1 ? "" : "s",
                msbuf, PyList_GET_SIZE(o->skipped), PyList_GET_SIZE(o->skipped) == 1 ? "" : "s",
                PyList_GET_SIZE(o->cache_limits), PyList_GET_SIZE(o->cache_limits) == 1 ? "" : "s") < 0)
        goto fail;

    if (summary_render(out, "Graph breaks", "break", o->break_summary) < 0
        || summary_render(out, "Frames run without capture", "frame", o->skip_summary) < 0
        || breaks_section(o, out) < 0)
        goto fail;

    if (PyList_GET_SIZE(o->skipped) > 0 && explain_line(out, "\nFrames run without capture, each") < 0)
        goto fail;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(o->skipped); i++) {
        PyObject *t = PyList_GET_ITEM(o->skipped, i);
        if (explain_line(out, "  %S (%S): %S", PyTuple_GET_ITEM(t, 0), PyTuple_GET_ITEM(t, 1),
                 PyTuple_GET_ITEM(t, 2)) < 0)
            goto fail;
    }
    Py_ssize_t nrules = o->skipped_by_rule ? PyList_GET_SIZE(o->skipped_by_rule) : 0;
    if (nrules > 0 && explain_line(out, "\nFrames not captured by rule (config.skip_prefixes, ...)") < 0)
        goto fail;
    for (Py_ssize_t i = 0; i < nrules; i++) {
        PyObject *t = PyList_GET_ITEM(o->skipped_by_rule, i);
        if (explain_line(out, "  %S call%s of %S function%s: %S", PyTuple_GET_ITEM(t, 2),
                 PyLong_AsLong(PyTuple_GET_ITEM(t, 2)) == 1 ? "" : "s", PyTuple_GET_ITEM(t, 1),
                 PyLong_AsLong(PyTuple_GET_ITEM(t, 1)) == 1 ? "" : "s",
                 PyTuple_GET_ITEM(t, 0)) < 0)
            goto fail;
    }
    if (PyList_GET_SIZE(o->cache_limits) > 0 && explain_line(out, "\nCache limits hit") < 0)
        goto fail;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(o->cache_limits); i++) {
        PyObject *t = PyList_GET_ITEM(o->cache_limits, i);
        if (explain_line(out, "  %S: last failing guard %S", PyTuple_GET_ITEM(t, 0), PyTuple_GET_ITEM(t, 1)) < 0)
            goto fail;
    }

    if (recompiles_section(o, out) < 0 || whatif_section(o, out) < 0
        || compile_times_section(o, out) < 0)
        goto fail;

    Py_ssize_t gi = 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(o->entries); i++) {
        CacheEntry *e = (CacheEntry *)PyList_GET_ITEM(o->entries, i);
        if (e->plan.gm == NULL)
            continue;
        if (gi == 0 && explain_line(out, "\nGraphs") < 0)
            goto fail;
        PyObject *label = entry_label(e);
        PyObject *graph = label ? PyObject_GetAttrString(e->plan.gm, "graph") : NULL;
        PyObject *table = graph ? graph_tabular((GraphObject *)graph) : NULL;
        Py_XDECREF(graph);
        int rc = table ? explain_line(out, "  Graph %zd of %zd: %U, %d op%s", ++gi, ngraphs, label,
                              e->plan.nops, e->plan.nops == 1 ? "" : "s") : -1;
        if (rc == 0)
            rc = indented(out, table, 4);
        Py_XDECREF(label);
        Py_XDECREF(table);
        if (rc < 0)
            goto fail;
    }

    if (PyList_GET_SIZE(o->plans) > 0 && explain_line(out, "\nPlans (what runs instead of the bytecode)") < 0)
        goto fail;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(o->plans); i++) {
        PyObject *t = PyList_GET_ITEM(o->plans, i);
        if (explain_line(out, "  %U", PyTuple_GET_ITEM(t, 0)) < 0 || indented(out, PyTuple_GET_ITEM(t, 1), 4) < 0)
            goto fail;
    }

    if (PyList_GET_SIZE(o->entries) > 0 && explain_line(out, "\nGuards") < 0)
        goto fail;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(o->entries); i++) {
        CacheEntry *e = (CacheEntry *)PyList_GET_ITEM(o->entries, i);
        PyObject *label = entry_label(e);
        if (label == NULL || explain_line(out, "  %U", label) < 0) {
            Py_XDECREF(label);
            goto fail;
        }
        Py_DECREF(label);
        for (int g = 0; g < e->guards.n; g++) {
            if (e->guards.guards[g].kind == GUARD_BACKEND_MATCH)
                continue;
            PyObject *expr = guardset_render_guard(&e->guards, g);
            PyObject *where = expr ? site_suffix(guardset_site(&e->guards, g)) : NULL;
            char kind[24];
            PyOS_snprintf(kind, sizeof(kind), "%-14s", guard_kind_name(e->guards.guards[g].kind));
            int rc = where ? explain_line(out, "    %s %U%U", kind, expr, where) : -1;
            Py_XDECREF(expr);
            Py_XDECREF(where);
            if (rc < 0)
                goto fail;
        }
    }
    PyObject *nl = PyUnicode_FromString("\n");
    PyObject *text = nl ? PyUnicode_Join(nl, out) : NULL;
    Py_XDECREF(nl);
    Py_DECREF(out);
    return text;
fail:
    Py_DECREF(out);
    return NULL;
}

static PyObject *output_repr(ExplainOutput *o)
{
    return PyUnicode_FromFormat("<ExplainOutput %U: %zd graphs, %zd graph breaks>", o->function,
                                PyList_GET_SIZE(o->graphs), PyList_GET_SIZE(o->break_reasons));
}

static PyObject *output_get_graph_count(ExplainOutput *o, void *c)
{
    (void)c;
    return PyLong_FromSsize_t(PyList_GET_SIZE(o->graphs));
}

static PyObject *output_get_break_count(ExplainOutput *o, void *c)
{
    (void)c;
    return PyLong_FromSsize_t(PyList_GET_SIZE(o->break_reasons));
}

static PyMemberDef output_members[] = {
    {"function", T_OBJECT, offsetof(ExplainOutput, function), READONLY, "what was explained"},
    {"graphs", T_OBJECT, offsetof(ExplainOutput, graphs), READONLY, "the captured GraphModules, in compile order"},
    {"break_reasons", T_OBJECT, offsetof(ExplainOutput, break_reasons), READONLY, "list of BreakReason, as they happened"},
    {"ops_per_graph", T_OBJECT, offsetof(ExplainOutput, ops_per_graph), READONLY, "targets of each graph's call nodes"},
    {"out_guards", T_OBJECT, offsetof(ExplainOutput, out_guards), READONLY, "every guard of every entry (kind, expr, source)"},
    {"compile_times", T_OBJECT, offsetof(ExplainOutput, compile_times), READONLY, "list of CompileTime"},
    {"plans", T_OBJECT, offsetof(ExplainOutput, plans), READONLY, "list of (entry label, plan as pseudo-Python)"},
    {"skipped", T_OBJECT, offsetof(ExplainOutput, skipped), READONLY, "frames that ran without capture: (function, file:line, reason)"},
    {"cache_limits", T_OBJECT, offsetof(ExplainOutput, cache_limits), READONLY, "frames that hit the cache limit: (function, last failing guard)"},
    {"skipped_by_rule", T_OBJECT, offsetof(ExplainOutput, skipped_by_rule), READONLY,
     "frames not captured because of a rule (config.skip_prefixes, generators ...): "
     "(rule, functions, calls), most calls first"},
    {"entries", T_OBJECT, offsetof(ExplainOutput, entries), READONLY, "the cache entries made, in compile order"},
    {"break_summary", T_OBJECT, offsetof(ExplainOutput, break_summary), READONLY,
     "the graph breaks grouped by break type and site (list of BreakGroup), most first: "
     "the summary at the top of the report"},
    {"skip_summary", T_OBJECT, offsetof(ExplainOutput, skip_summary), READONLY,
     "the frames run without capture, grouped the same way"},
    {"recompiles", T_OBJECT, offsetof(ExplainOutput, recompiles), READONLY,
     "list of Recompile: each recompile with its reason, the nearest older entry "
     "and every guard of it that failed"},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef output_getset[] = {
    {"graph_count", (getter)output_get_graph_count, NULL, "number of graphs", NULL},
    {"graph_break_count", (getter)output_get_break_count, NULL, "number of graph breaks, as they happened", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot output_slots[] = {
    {Py_tp_dealloc, output_dealloc},
    {Py_tp_traverse, output_traverse},
    {Py_tp_clear, output_clear},
    {Py_tp_str, output_str},
    {Py_tp_repr, output_repr},
    {Py_tp_members, output_members},
    {Py_tp_getset, output_getset},
    {Py_tp_doc, "What one explained call (or an ExplainBackend's run) captured.  str() is the report."},
    {0, NULL},
};

static PyType_Spec output_spec = {
    .name = "dynscope.ExplainOutput",
    .basicsize = sizeof(ExplainOutput),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = output_slots,
};

/* ---- the entries a session made, in compile order ---- */

/* The session's sink: its events as dicts, appended to ctx (a list). */
static void session_sink_emit(void *ctx, Event *ev)
{
    PyObject *d = event_dict(ev);
    if (d != NULL && PyList_Append((PyObject *)ctx, d) < 0)
        PyErr_Clear();
}

/* Entries of every private cache, ordered like the compile_end events
   (events: the session's list of event dicts). */
static PyObject *session_entries(CaptureSession *s, PyObject *events)
{
    PyObject *all = PyList_New(0);
    PyObject *cap, *key;
    Py_ssize_t pos = 0;
    if (all == NULL)
        return NULL;
    while (PyDict_Next(s->caches, &pos, &key, &cap)) {
        CodeCache *cc = PyCapsule_GetPointer(cap, "dynscope.CodeCache");
        PyObject *entries = cc ? cache_entries_list(cc) : NULL;
        if (entries == NULL) {
            Py_DECREF(all);
            return NULL;
        }
        int rc = PyList_SetSlice(all, PyList_GET_SIZE(all), PyList_GET_SIZE(all), entries);
        Py_DECREF(entries);
        if (rc < 0) {
            Py_DECREF(all);
            return NULL;
        }
    }
    /* order: position of the entry's compile_end event */
    PyObject *ordered = PyList_New(0);
    for (Py_ssize_t i = 0; ordered && i < PyList_GET_SIZE(events); i++) {
        PyObject *ev = PyList_GET_ITEM(events, i);
        if (!ev_is(ev, "compile_end"))
            continue;
        PyObject *cid = ev_get(ev, "compile_id");
        long long code_id = PyLong_AsLongLong(ev_get(ev, "code_id"));
        PyErr_Clear();
        for (Py_ssize_t k = 0; k < PyList_GET_SIZE(all); k++) {
            CacheEntry *e = (CacheEntry *)PyList_GET_ITEM(all, k);
            PyObject *ecid = PyUnicode_FromFormat("%d/%d", e->frame_id, e->frame_compile_id);
            int same = ecid && e->code_id == code_id && PyUnicode_Compare(ecid, cid) == 0;
            Py_XDECREF(ecid);
            if (same && PyList_Append(ordered, (PyObject *)e) < 0)
                Py_CLEAR(ordered);
        }
    }
    Py_DECREF(all);
    return ordered;
}

/*
 * The frames a session passed through because of a rule (a skip prefix, a
 * generator ...), never reported as events: [(rule, functions, calls)],
 * most calls first.  New reference or NULL.
 */
/* by[rule] = [functions + 1, calls + n].  0 / -1. */
static int count_rule(PyObject *by, PyObject *rule, uint64_t n)
{
    PyObject *counts = PyDict_GetItemWithError(by, rule);   /* borrowed */
    long long fns = 1, calls = (long long)n;
    if (counts != NULL) {
        fns += PyLong_AsLongLong(PyList_GET_ITEM(counts, 0));
        calls += PyLong_AsLongLong(PyList_GET_ITEM(counts, 1));
    }
    PyObject *fresh = PyErr_Occurred() ? NULL : Py_BuildValue("[LL]", fns, calls);
    int rc = fresh == NULL ? -1 : PyDict_SetItem(by, rule, fresh);
    Py_XDECREF(fresh);
    return rc;
}

static PyObject *session_skips_by_rule(CaptureSession *s)
{
    PyObject *by = PyDict_New();    /* rule -> [functions, calls] */
    PyObject *cap, *key;
    Py_ssize_t pos = 0;
    if (by == NULL)
        return NULL;
    PyObject *tensorless = PyUnicode_FromString("no array or tensor in reach");
    if (tensorless == NULL) {
        Py_DECREF(by);
        return NULL;
    }
    while (PyDict_Next(s->caches, &pos, &key, &cap)) {
        CodeCache *cc = PyCapsule_GetPointer(cap, "dynscope.CodeCache");
        if (cc == NULL)
            continue;
        if ((cc->skip_reason != NULL && !cc->skip_reported && cc->skip_calls > 0
             && count_rule(by, cc->skip_reason, cc->skip_calls) < 0)
            || (cc->tensorless_calls > 0 && count_rule(by, tensorless, cc->tensorless_calls) < 0)) {
            Py_DECREF(tensorless);
            Py_DECREF(by);
            return NULL;
        }
    }
    Py_DECREF(tensorless);
    PyObject *out = PyList_New(0);
    pos = 0;
    PyObject *counts;
    while (out != NULL && PyDict_Next(by, &pos, &key, &counts)) {
        PyObject *t = Py_BuildValue("(OOO)", key, PyList_GET_ITEM(counts, 0),
                                    PyList_GET_ITEM(counts, 1));
        if (t == NULL || PyList_Append(out, t) < 0)
            Py_CLEAR(out);
        Py_XDECREF(t);
    }
    Py_DECREF(by);
    if (out == NULL)
        return NULL;
    /* most calls first: sort by -calls through a key list */
    Py_ssize_t n = PyList_GET_SIZE(out);
    for (Py_ssize_t i = 1; i < n; i++) {          /* insertion sort: a handful of rules */
        PyObject *t = PyList_GET_ITEM(out, i);
        long long c = PyLong_AsLongLong(PyTuple_GET_ITEM(t, 2));
        Py_ssize_t j = i;
        while (j > 0 && PyLong_AsLongLong(PyTuple_GET_ITEM(PyList_GET_ITEM(out, j - 1), 2)) < c) {
            PyList_SET_ITEM(out, j, PyList_GET_ITEM(out, j - 1));
            j--;
        }
        PyList_SET_ITEM(out, j, t);
    }
    return out;
}

/* ---- Explainer: explain(fn) ---- */

typedef struct {
    PyObject_HEAD
    PyObject *fn;             /* strong: the callable to explain */
    PyObject *backend;        /* strong: resolved backend */
} Explainer;

static PyTypeObject *ExplainerType;

static PyObject *explainer_new(PyTypeObject *tp, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"fn", "backend", NULL};
    PyObject *fn, *backend = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|$O:explain", kwlist, &fn, &backend))
        return NULL;
    if (!PyCallable_Check(fn)) {
        PyErr_Format(PyExc_TypeError, "explain() expects a callable, got %.100s",
                     Py_TYPE(fn)->tp_name);
        return NULL;
    }
    PyObject *resolved = backend ? backend_resolve(backend) : backend_eager_ref();
    if (resolved == NULL)
        return NULL;
    Explainer *x = (Explainer *)tp->tp_alloc(tp, 0);
    if (x == NULL) {
        Py_DECREF(resolved);
        return NULL;
    }
    /* An optimized function is explained as the function it wraps: its own
       backend is not called. */
    PyObject *orig = PyObject_GetAttrString(fn, "_dynscope_orig");
    if (orig == NULL)
        PyErr_Clear();
    x->fn = orig ? orig : Py_NewRef(fn);
    x->backend = resolved;
    return (PyObject *)x;
}

static PyObject *function_label(PyObject *fn)
{
    PyObject *name = PyObject_GetAttrString(fn, "__qualname__");
    if (name == NULL || !PyUnicode_Check(name)) {
        /* a callable object (an nn.Module): its class, not its repr, which
           for a model is the whole module tree */
        PyErr_Clear();
        Py_XSETREF(name, PyUnicode_FromFormat("%s object", Py_TYPE(fn)->tp_name));
    }
    PyObject *code = PyObject_GetAttrString(fn, "__code__");
    if (code == NULL || !PyCode_Check(code)) {
        PyErr_Clear();
        Py_XDECREF(code);
        return name;
    }
    PyObject *file = PyObject_GetAttrString(code, "co_filename");
    PyObject *base = NULL;
    if (file) {
        PyObject *os_path = PyImport_ImportModule("os.path");
        base = os_path ? PyObject_CallMethod(os_path, "basename", "O", file) : NULL;
        Py_XDECREF(os_path);
    }
    PyObject *label = base && name ? PyUnicode_FromFormat("%U (%U:%d)", name, base,
                                                          ((PyCodeObject *)code)->co_firstlineno) : NULL;
    if (label == NULL)
        PyErr_Clear();
    Py_XDECREF(file);
    Py_XDECREF(base);
    Py_DECREF(code);
    if (label == NULL)
        return name;
    Py_XDECREF(name);
    return label;
}

static PyObject *explainer_call(Explainer *x, PyObject *args, PyObject *kwds)
{
    CaptureSession session;
    EventSink sink = {.name = "explain", .mask = EV_MASK_DICT, .sees_private = true,
                      .emit = session_sink_emit};
    PyObject *events = PyList_New(0);    /* strong: the session's event dicts */
    memset(&session, 0, sizeof(session));
    session.caches = PyDict_New();
    session.sink = &sink;
    sink.ctx = events;
    PyObject *label = function_label(x->fn);
    if (session.caches == NULL || events == NULL || label == NULL) {
        Py_XDECREF(session.caches);
        Py_XDECREF(events);
        Py_XDECREF(label);
        return NULL;
    }
    ThreadCapture *tc = capture_state();
    CaptureSession *saved = tc->session;
    CaptureConfig cfg = {x->backend, false, -1, capture_root_code(x->fn)};
    PyObject *result = NULL;
    tc->session = &session;
    if (capture_enter(&cfg) == 0) {
        result = PyObject_Call(x->fn, args, kwds);
        capture_exit();
    }
    tc->session = saved;

    PyObject *type = NULL, *value = NULL, *tb = NULL;
    if (result == NULL) {
        PyErr_Fetch(&type, &value, &tb);
        PyErr_NormalizeException(&type, &value, &tb);
    }
    PyObject *entries = session_entries(&session, events);
    PyObject *out = entries ? output_build(label, events, entries) : NULL;
    Py_XDECREF(entries);
    PyObject *rules = out ? session_skips_by_rule(&session) : NULL;
    if (rules != NULL)
        Py_SETREF(((ExplainOutput *)out)->skipped_by_rule, rules);
    else
        Py_CLEAR(out);
    Py_DECREF(label);
    Py_DECREF(session.caches);    /* frees the private caches (entries live on in out) */
    Py_DECREF(events);
    Py_XDECREF(result);           /* what fn returned: explain returns the report */
    if (type != NULL) {
        /* fn's exception wins; the report stays reachable from it */
        if (out != NULL && value != NULL && PyObject_SetAttrString(value, "explain_output", out) < 0)
            PyErr_Clear();
        Py_XDECREF(out);
        if (PyErr_Occurred())
            PyErr_Clear();
        PyErr_Restore(type, value, tb);
        return NULL;
    }
    return out;
}

static int explainer_traverse(Explainer *x, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(x));
    Py_VISIT(x->fn);
    Py_VISIT(x->backend);
    return 0;
}

static int explainer_clear(Explainer *x)
{
    Py_CLEAR(x->fn);
    Py_CLEAR(x->backend);
    return 0;
}

static void explainer_dealloc(Explainer *x)
{
    PyTypeObject *tp = Py_TYPE(x);
    PyObject_GC_UnTrack(x);
    explainer_clear(x);
    tp->tp_free((PyObject *)x);
    Py_DECREF(tp);
}

static PyType_Slot explainer_slots[] = {
    {Py_tp_new, explainer_new},
    {Py_tp_call, explainer_call},
    {Py_tp_dealloc, explainer_dealloc},
    {Py_tp_traverse, explainer_traverse},
    {Py_tp_clear, explainer_clear},
    {Py_tp_doc, "explain(fn, *, backend='eager')(*args, **kwargs) -> ExplainOutput\n\n"
                "Run fn once under a private capture (global caches and counters are\n"
                "neither read nor changed) and report what was captured."},
    {0, NULL},
};

static PyType_Spec explainer_spec = {
    .name = "dynscope.Explainer",
    .basicsize = sizeof(Explainer),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .slots = explainer_slots,
};

/* ---- ExplainBackend ---- */

typedef struct {
    PyObject_HEAD
    PyObject *inner;          /* strong: the backend doing the compiling */
    PyObject *events;         /* strong: list of event dicts seen */
    PyObject *entries;        /* strong: list of CacheEntry made */
} ExplainBackend;

static PyTypeObject *ExplainBackendType;

/* The backend ExplainBackend wraps (for backend.c).  Borrowed. */
static PyObject *eb_inner(PyObject *backend)
{
    return ((ExplainBackend *)backend)->inner;
}

/* The sink every ExplainBackend listens through (events.h): an event of a
   capture region whose backend is an ExplainBackend is kept by it as a
   dict, and a compiled entry with it.  Sessions' events too: an
   ExplainBackend used under explain() sees what it compiles. */
static void eb_sink_emit(void *ctx, Event *ev)
{
    (void)ctx;
    if (ev->backend == NULL || !Py_IS_TYPE(ev->backend, ExplainBackendType))
        return;
    ExplainBackend *b = (ExplainBackend *)ev->backend;
    PyObject *d = event_dict(ev);
    if (d != NULL && PyList_Append(b->events, d) < 0)
        PyErr_Clear();
    if (ev->rec.kind == EV_COMPILE_END && ev->entry != NULL
        && strcmp(ev->rec.outcome, "ok") == 0
        && PyList_Append(b->entries, (PyObject *)ev->entry) < 0)
        PyErr_Clear();
}

static EventSink eb_sink = {
    .name = "ExplainBackend",
    .mask = EV_MASK_DICT,
    .sees_private = true,
    .emit = eb_sink_emit,
};

static PyObject *eb_new(PyTypeObject *tp, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"inner", NULL};
    PyObject *inner = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|O:ExplainBackend", kwlist, &inner))
        return NULL;
    PyObject *resolved = inner ? backend_resolve(inner) : backend_eager_ref();
    if (resolved == NULL)
        return NULL;
    ExplainBackend *b = (ExplainBackend *)tp->tp_alloc(tp, 0);
    if (b == NULL) {
        Py_DECREF(resolved);
        return NULL;
    }
    b->inner = resolved;
    b->events = PyList_New(0);
    b->entries = PyList_New(0);
    if (b->events == NULL || b->entries == NULL) {
        Py_DECREF(b);
        return NULL;
    }
    return (PyObject *)b;
}

static PyObject *eb_call(ExplainBackend *b, PyObject *args, PyObject *kwds)
{
    return PyObject_Call(b->inner, args, kwds);
}

static PyObject *eb_output(ExplainBackend *b, PyObject *unused)
{
    (void)unused;
    PyObject *label = PyUnicode_FromFormat("ExplainBackend(%R)", b->inner);
    if (label == NULL)
        return NULL;
    PyObject *out = output_build(label, b->events, b->entries);
    Py_DECREF(label);
    return out;
}

static int eb_traverse(ExplainBackend *b, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(b));
    Py_VISIT(b->inner);
    Py_VISIT(b->events);
    Py_VISIT(b->entries);
    return 0;
}

static int eb_clear(ExplainBackend *b)
{
    Py_CLEAR(b->inner);
    Py_CLEAR(b->events);
    Py_CLEAR(b->entries);
    return 0;
}

static void eb_dealloc(ExplainBackend *b)
{
    PyTypeObject *tp = Py_TYPE(b);
    PyObject_GC_UnTrack(b);
    eb_clear(b);
    tp->tp_free((PyObject *)b);
    Py_DECREF(tp);
}

static PyMethodDef eb_methods[] = {
    {"output", (PyCFunction)eb_output, METH_NOARGS,
     "output()\n--\n\nThe ExplainOutput of everything compiled through this backend so far."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef eb_members[] = {
    {"inner", T_OBJECT, offsetof(ExplainBackend, inner), READONLY, "the wrapped backend"},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot eb_slots[] = {
    {Py_tp_new, eb_new},
    {Py_tp_call, eb_call},
    {Py_tp_dealloc, eb_dealloc},
    {Py_tp_traverse, eb_traverse},
    {Py_tp_clear, eb_clear},
    {Py_tp_methods, eb_methods},
    {Py_tp_members, eb_members},
    {Py_tp_doc, "ExplainBackend(inner='eager')\n\nA backend that compiles with `inner` and "
                "accumulates an explain report\n(graphs, breaks, guards) over a whole run; "
                "see .output()."},
    {0, NULL},
};

static PyType_Spec eb_spec = {
    .name = "dynscope.ExplainBackend",
    .basicsize = sizeof(ExplainBackend),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .slots = eb_slots,
};

/* ---- init ---- */

int explain_init(PyObject *module)
{
    StackFrameType = PyStructSequence_NewType(&stack_frame_desc);
    BreakReasonType = PyStructSequence_NewType(&break_reason_desc);
    CompileTimeType = PyStructSequence_NewType(&compile_time_desc);
    RecompileType = PyStructSequence_NewType(&recompile_desc);
    if (summary_init(module) < 0)
        return -1;
    if (!StackFrameType || !BreakReasonType || !CompileTimeType || !RecompileType) {
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        return -1;
    }
    ExplainOutputType = (PyTypeObject *)PyType_FromModuleAndSpec(module, &output_spec, NULL);
    ExplainerType = (PyTypeObject *)PyType_FromModuleAndSpec(module, &explainer_spec, NULL);
    ExplainBackendType = (PyTypeObject *)PyType_FromModuleAndSpec(module, &eb_spec, NULL);
    if (!ExplainOutputType || !ExplainerType || !ExplainBackendType)
        return -1;
    if (PyModule_AddObjectRef(module, "StackFrame", (PyObject *)StackFrameType) < 0
        || PyModule_AddObjectRef(module, "BreakReason", (PyObject *)BreakReasonType) < 0
        || PyModule_AddObjectRef(module, "CompileTime", (PyObject *)CompileTimeType) < 0
        || PyModule_AddObjectRef(module, "Recompile", (PyObject *)RecompileType) < 0
        || PyModule_AddObjectRef(module, "ExplainOutput", (PyObject *)ExplainOutputType) < 0
        || PyModule_AddObjectRef(module, "Explainer", (PyObject *)ExplainerType) < 0
        || PyModule_AddObjectRef(module, "ExplainBackend", (PyObject *)ExplainBackendType) < 0)
        return -1;
    if (backend_register_wrapper(ExplainBackendType, eb_inner) < 0
        || events_add_sink(&eb_sink) < 0)
        return -1;
    return 0;
}
