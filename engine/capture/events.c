/*
 * events.c -- building each event once and handing it to the sinks that
 * asked for its kind (events.h).
 *
 * Invariants: the sink table holds borrowed pointers, in the order added,
 * no NULL before `nsinks`; an Event's lazily made parts (the dict, the text
 * fields) are made at most once and freed when its dispatch ends.  Every
 * function clears any exception it meets: reporting never changes what the
 * program sees.  GIL protected.
 */
#include "events.h"
#include "capture_int.h"
#include "../base/breaks.h"
#include "../base/pycompat.h"

#include <string.h>

static EventSink *sinks[EVENTS_MAX_SINKS];   /* borrowed */
static int nsinks;
static bool dict_guard_exprs;     /* compile_end dicts carry "guard_exprs" */

int events_add_sink(EventSink *sink)
{
    for (int i = 0; i < nsinks; i++)
        if (sinks[i] == sink)
            return 0;
    if (nsinks == EVENTS_MAX_SINKS) {
        PyErr_Format(PyExc_RuntimeError, "the event sink table is full (%s)", sink->name);
        warn_internal_error("adding an event sink");
        return -1;
    }
    sinks[nsinks++] = sink;
    return 0;
}

void events_remove_sink(EventSink *sink)
{
    for (int i = 0; i < nsinks; i++) {
        if (sinks[i] == sink) {
            memmove(&sinks[i], &sinks[i + 1], (size_t)(nsinks - i - 1) * sizeof(sinks[0]));
            nsinks--;
            return;
        }
    }
}

void events_dict_with_guards(bool on)
{
    dict_guard_exprs = on;
}


/* Whether sink s takes an event of `kind` raised in or out of a session. */
static bool sink_takes(EventSink *s, EventKind kind, bool private_capture)
{
    return (s->mask & EV_MASK(kind)) && (!private_capture || s->sees_private)
           && (s->wants == NULL || s->wants(s->ctx, kind));
}

/* Whether anyone would receive an event of `kind` now: lets the costly
   kinds (one guard_fail per failure, graph_compiled) skip being built. */
static bool anyone_takes(EventKind kind)
{
    ThreadCapture *tc = capture_state();
    bool private_capture = tc->session != NULL;
    if (private_capture && tc->session->sink != NULL
        && sink_takes(tc->session->sink, kind, true))
        return true;
    for (int i = 0; i < nsinks; i++)
        if (sink_takes(sinks[i], kind, private_capture))
            return true;
    return false;
}

/* ---- building ---- */

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

/* Write the decimal digits of v (>= 0) at p; returns the end. */
static char *put_decimal(char *p, int v)
{
    if (v >= 0 && v < 10) {               /* most of a packed failure's lengths */
        *p++ = (char)('0' + v);
        return p;
    }
    if (v >= 10 && v < 100) {
        *p++ = (char)('0' + v / 10);
        *p++ = (char)('0' + v % 10);
        return p;
    }
    char digits[12];
    int n = 0;
    do {
        digits[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v > 0);
    while (n > 0)
        *p++ = digits[--n];
    return p;
}

/* "FRAME/COMPILE" into buf (events.h: 32 bytes, two ints fit).  Every
   event of an entry carries it: a recompile storm's EV_GUARD_FAIL events
   made it with snprintf at ~1,600 instructions each, a fifth of what
   recording added to the storm (docs/performance.md). */
static void format_compile_id(char *buf, int frame_id, int frame_compile_id)
{
    char *p = put_decimal(buf, frame_id < 0 ? 0 : frame_id);
    *p++ = '/';
    p = put_decimal(p, frame_compile_id < 0 ? 0 : frame_compile_id);
    *p = '\0';
}

/* An event of `kind` about code cc (may be NULL) and entry e (may be NULL),
   its cheap record fields filled. */
static void event_start(Event *ev, EventKind kind, CodeCache *cc, CacheEntry *e)
{
    EventRecord *r = &ev->rec;
    memset(ev, 0, sizeof(*ev));
    r->kind = kind;
    r->wall_ns = engine_wall_ns();
    r->mono_ns = engine_now_ns();
    r->qualname = r->filename = r->compile_id = r->outcome = r->guards_text = r->reason = "";
    r->entry_compile_id = r->guard_kind = r->expr = r->observed = r->break_kind = "";
    r->break_file = r->user_stack_json = r->backend = r->graph_code = r->ops = "";
    r->guard_sites_json = r->guard_file = r->nearest_json = r->failures_packed = "";
    r->break_type = r->break_class = r->hatches = r->call_path_json = "";
    r->annotation = r->annotation_phase = r->annotation_fields = r->span_kind = "";
    ev->cc = cc;
    ev->entry = e;
    if (cc != NULL) {
        r->code_id = cc->code_id;
        r->qualname = utf8(cc->code->co_qualname);
        r->filename = utf8(cc->code->co_filename);
        r->firstlineno = cc->code->co_firstlineno;
    }
    if (e != NULL) {
        format_compile_id(ev->compile_id, e->frame_id, e->frame_compile_id);
        r->compile_id = ev->compile_id;
        r->frame_id = e->frame_id;
        r->frame_compile_id = e->frame_compile_id;
        r->resume_offset = e->resume_offset * 2;
    }
}

/* Keep `s` (stolen: a str, or bytes without NUL) alive with the event and
   return its UTF-8 or bytes ("" when s is NULL or on error, error
   cleared). */
static const char *keep_text(Event *ev, PyObject *s)
{
    if (s == NULL) {
        PyErr_Clear();
        return "";
    }
    if (ev->texts == NULL && (ev->texts = PyList_New(0)) == NULL) {
        Py_DECREF(s);
        PyErr_Clear();
        return "";
    }
    int rc = PyList_Append(ev->texts, s);
    Py_DECREF(s);
    if (rc < 0) {
        PyErr_Clear();
        return "";
    }
    return PyBytes_Check(s) ? PyBytes_AS_STRING(s) : utf8(s);   /* the list holds s */
}

/* The UTF-8 of a failure's field up to any NUL (*n bytes): "" for what is
   not a str.  Cannot fail. */
static const char *failure_field(PyObject *o, size_t *n)
{
    Py_ssize_t size = 0;
    const char *c;
    if (o != NULL && PyUnicode_Check(o) && PyUnicode_IS_COMPACT_ASCII(o)) {
        c = (const char *)PyUnicode_DATA(o);       /* its UTF-8, without a call */
        size = PyUnicode_GET_LENGTH(o);
    }
    else {
        c = o && PyUnicode_Check(o) ? PyUnicode_AsUTF8AndSize(o, &size) : NULL;
    }
    if (c == NULL) {
        PyErr_Clear();
        *n = 0;
        return "";
    }
    const char *nul = memchr(c, '\0', (size_t)size);
    *n = nul != NULL ? (size_t)(nul - c) : (size_t)size;
    return c;
}

/* A growing byte buffer (PyMem). */
typedef struct {
    char *p;
    size_t len, cap;
} Packed;

static bool packed_reserve(Packed *b, size_t more)
{
    if (b->len + more <= b->cap)
        return true;
    size_t cap = b->cap ? b->cap : 1024;
    while (cap < b->len + more)
        cap *= 2;
    char *p = PyMem_Realloc(b->p, cap);
    if (p == NULL)
        return false;
    b->p = p;
    b->cap = cap;
    return true;
}

/* Append "LEN:" and the n bytes at f; room reserved. */
static void packed_field(Packed *b, const char *f, size_t n)
{
    b->len = (size_t)(put_decimal(b->p + b->len, (int)n) - b->p);
    b->p[b->len++] = ':';
    memcpy(b->p + b->len, f, n);
    b->len += n;
}

/* failures (a list of GuardFailureInfo) packed as event.h failures_packed
   says: new bytes, or NULL with an exception. */
static PyObject *pack_failures(PyObject *failures)
{
    Packed b = {NULL, 0, 0};
    bool ok = true;
    Py_ssize_t count = PyList_Check(failures) ? PyList_GET_SIZE(failures) : 0;
    for (Py_ssize_t i = 0; ok && i < count; i++) {
        PyObject *item = PyList_GET_ITEM(failures, i), *file, *lineno;
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) < 4
            || !guard_failure_info_site(item, &file, &lineno))
            continue;
        const char *f[6];
        size_t n[6], total = 6 * 12;         /* each field's "LEN:" */
        for (int k = 0; k < 4; k++)
            f[k] = failure_field(PyTuple_GET_ITEM(item, k), &n[k]);
        f[4] = failure_field(file, &n[4]);   /* None: "" */
        long l = PyLong_Check(lineno) ? PyLong_AsLong(lineno) : 0;
        if (l == -1 && PyErr_Occurred())
            PyErr_Clear();
        char line[16];
        f[5] = line;
        n[5] = l > 0 && l <= INT_MAX ? (size_t)(put_decimal(line, (int)l) - line) : 0;
        for (int k = 0; k < 6; k++)
            total += n[k];
        ok = packed_reserve(&b, total);
        for (int k = 0; ok && k < 6; k++)
            packed_field(&b, f[k], n[k]);
    }
    PyObject *bytes = ok ? PyBytes_FromStringAndSize(b.p ? b.p : "", (Py_ssize_t)b.len)
                         : PyErr_NoMemory();
    PyMem_Free(b.p);
    return bytes;
}

/* The rendered guards of e, each "expr" or, with_kind, "KIND\texpr": a new
   list of str, or NULL. */
static PyObject *guard_lines(CacheEntry *e, bool with_kind)
{
    PyObject *lines = PyList_New(0);
    for (int g = 0; lines && g < e->guards.n; g++) {
        PyObject *line = guardset_render_guard(&e->guards, g);
        if (line != NULL && with_kind)
            Py_SETREF(line, PyUnicode_FromFormat("%s\t%U",
                                                 guard_kind_name(e->guards.guards[g].kind), line));
        if (line == NULL || PyList_Append(lines, line) < 0)
            Py_CLEAR(lines);
        Py_XDECREF(line);
    }
    return lines;
}

/* "KIND\texpr" per guard of e, one per line (new str or NULL). */
static PyObject *guards_text(CacheEntry *e)
{
    PyObject *lines = guard_lines(e, true);
    PyObject *nl = PyUnicode_FromString("\n");
    PyObject *text = lines && nl ? PyUnicode_Join(nl, lines) : NULL;
    Py_XDECREF(nl);
    Py_XDECREF(lines);
    return text;
}

/* The backend's __name__, else its repr (new str or NULL). */
static PyObject *backend_name(PyObject *backend)
{
    if (backend == NULL)
        return NULL;
    PyObject *name = PyObject_GetAttrString(backend, "__name__");
    if (name == NULL) {
        PyErr_Clear();
        name = PyObject_Repr(backend);
    }
    return name;
}

/* The graph's op nodes' names, comma separated (new str or NULL). */
static PyObject *graph_ops(PyObject *gm)
{
    PyObject *graph = PyObject_GetAttrString(gm, "graph");
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
    Py_XDECREF(graph);
    Py_XDECREF(nodes);
    Py_XDECREF(names);
    Py_XDECREF(comma);
    return ops;
}

/* A graph the backend raised on: its code, then one comment line per
   input, "# input NAME: TYPE DTYPE SHAPE" for an array or tensor ("# input
   l_x_: ndarray float64 (3, 2)"), "# input NAME: TYPE VALUE" for a number:
   what dynscope/repro.py rebuilds a standalone call from.  New str or NULL. */
static PyObject *failed_graph_code(PyObject *gm)
{
    PyObject *code = PyObject_GetAttrString(gm, "code");
    PyObject *graph = code ? PyObject_GetAttrString(gm, "graph") : NULL;
    PyObject *nodes = graph ? PyObject_GetAttrString(graph, "nodes") : NULL;
    Py_ssize_t n = nodes ? PySequence_Length(nodes) : -1;
    PyObject *parts = n >= 0 ? PyList_New(0) : NULL;
    if (parts != NULL && PyList_Append(parts, code) < 0)
        Py_CLEAR(parts);
    for (Py_ssize_t i = 0; parts != NULL && i < n; i++) {
        NodeObject *node = (NodeObject *)PySequence_GetItem(nodes, i);
        PyObject *line = NULL;
        if (node != NULL && node->op == NODE_PLACEHOLDER && PyDict_Check(node->meta)) {
            PyObject *type = PyDict_GetItemString(node->meta, "type");          /* borrowed */
            PyObject *dtype = PyDict_GetItemString(node->meta, "dtype");
            PyObject *shape = PyDict_GetItemString(node->meta, "shape");
            PyObject *value = PyDict_GetItemString(node->meta, "example_value");
            if (type != NULL && dtype != NULL && shape != NULL)
                line = PyUnicode_FromFormat("# input %U: %S %S %S\n", node->name, type, dtype, shape);
            else if (value != NULL)
                line = PyUnicode_FromFormat("# input %U: %s %R\n", node->name,
                                            Py_TYPE(value)->tp_name, value);
            else
                line = PyUnicode_FromFormat("# input %U: ?\n", node->name);
        }
        if (line != NULL && PyList_Append(parts, line) < 0)
            Py_CLEAR(parts);
        Py_XDECREF(line);
        Py_XDECREF(node);
    }
    PyObject *empty = parts ? PyUnicode_FromString("") : NULL;
    PyObject *out = empty ? PyUnicode_Join(empty, parts) : NULL;
    Py_XDECREF(empty);
    Py_XDECREF(parts);
    Py_XDECREF(nodes);
    Py_XDECREF(graph);
    Py_XDECREF(code);
    return out;
}

/* json.dumps(obj) (new str) or NULL: event_json's, else json's.  obj
   NULL (what made it failed): NULL, the error left for keep_text. */
static PyObject *to_json(PyObject *obj)
{
    if (obj == NULL)
        return NULL;
    PyObject *fast = event_json(obj);
    if (fast != NULL)
        return fast;
    PyObject *json = PyImport_ImportModule("json");
    PyObject *s = json ? PyObject_CallMethod(json, "dumps", "O", obj) : NULL;
    Py_XDECREF(json);
    return s;
}

/* JSON of where e's guards came from (event.h guard_sites_json): new str
   or NULL. */
static PyObject *guard_sites_json(CacheEntry *e)
{
    const GuardSet *gs = &e->guards;
    PyObject *idx = PyList_New(gs->n);
    for (int g = 0; idx != NULL && g < gs->n; g++) {
        PyObject *i = PyLong_FromLong(guardset_site(gs, g) ? gs->guards[g].site : -1);
        if (i == NULL)
            Py_CLEAR(idx);
        else
            PyList_SET_ITEM(idx, g, i);
    }
    PyObject *sites = gs->sites ? Py_NewRef(gs->sites) : PyList_New(0);
    PyObject *d = idx && sites ? Py_BuildValue("{s:O,s:O}", "sites", sites, "guards", idx) : NULL;
    PyObject *json = d ? to_json(d) : NULL;
    Py_XDECREF(idx);
    Py_XDECREF(sites);
    Py_XDECREF(d);
    return json;
}

/* The qualified name of what a function wraps (functools.wraps'
   __wrapped__, followed to the innermost, at most 8 deep), or NULL (no
   exception) when it wraps nothing with a name.  Read from the function's
   own dict: no attribute lookup runs program code.  New str. */
static PyObject *wrapped_qualname(PyObject *func)
{
    PyObject *inner = NULL;         /* borrowed */
    for (int depth = 0; depth < 8 && func != NULL && PyFunction_Check(func); depth++) {
        PyObject *dict = ((PyFunctionObject *)func)->func_dict;
        PyObject *w = dict != NULL ? PyDict_GetItemString(dict, "__wrapped__") : NULL;
        if (w == NULL)
            break;
        inner = func = w;
    }
    if (inner != NULL && PyMethod_Check(inner))
        inner = PyMethod_GET_FUNCTION(inner);
    if (inner != NULL && PyFunction_Check(inner))
        return Py_NewRef(((PyFunctionObject *)inner)->func_qualname);
    if (inner != NULL && PyType_Check(inner))
        return PyType_GetQualName((PyTypeObject *)inner);
    return NULL;
}

/* events.h.  The wrapper's code is shared by every function the decorator
   wraps, so its own name (can_return_tuple.<locals>.wrapper) says nothing. */
#define ARROW "\xe2\x86\x92"        /* U+2192, UTF-8: a format string is ASCII */

PyObject *events_wrapper_name(PyObject *func, PyCodeObject *co)
{
    PyObject *wrapped = wrapped_qualname(func);
    if (wrapped == NULL) {
        PyErr_Clear();
        return NULL;
    }
    PyObject *qual = co->co_qualname, *name = NULL;
    Py_ssize_t n = PyUnicode_GET_LENGTH(qual);
    PyObject *locals = PyUnicode_FromString(".<locals>.");
    /* a decorator factory's is deprecate_kwarg.<locals>.wrapper.<locals>.wrapped_func:
       named deprecate_kwarg(wrapped_func), the outermost and the innermost */
    Py_ssize_t first = locals ? PyUnicode_Find(qual, locals, 0, n, 1) : -2;
    Py_ssize_t at = first >= 0 ? PyUnicode_Find(qual, locals, 0, n, -1) : first;
    Py_XDECREF(locals);
    if (at >= 0) {
        PyObject *outer = PyUnicode_Substring(qual, 0, first);
        PyObject *own = PyUnicode_Substring(qual, at + 10, n);
        if (outer != NULL && own != NULL)
            name = PyUnicode_FromFormat("%U(%U) %s %U", outer, own, ARROW, wrapped);
        Py_XDECREF(outer);
        Py_XDECREF(own);
    }
    else if (at == -1)
        name = PyUnicode_FromFormat("%U %s %U", qual, ARROW, wrapped);
    Py_DECREF(wrapped);
    if (name == NULL)
        PyErr_Clear();
    return name;
}

/* How a frame is named on a call path: as events_wrapper_name names a
   decorator's wrapper, else its code's qualified name.  New str. */
static PyObject *frame_name(PyObject *func, PyCodeObject *co)
{
    PyObject *name = events_wrapper_name(func, co);
    return name != NULL ? name : Py_NewRef(co->co_qualname);
}

/* The call path that reached the frame cc is compiling entry e for
   (event.h call_path_json): the thread's Python frames from the outermost
   -- the frame being compiled is not one of them yet: the hook runs before
   it starts -- and the compiled frame last.  New list or NULL. */
static PyObject *call_path(CodeCache *cc, CacheEntry *e)
{
    PyObject *path = PyList_New(0);
    /* the interpreter's frames, borrowed: each is a caller of this code,
       so it outlives the walk.  Asking for frame objects made one for every
       frame of the stack on every compile (and their lines were each a scan
       of a line table: code_line_of caches them) */
    EvalFrame *f = frame_complete(thread_current_frame(PyThreadState_Get()));
    int n = 0, dropped = 0;
    while (path != NULL && f != NULL) {
        if (n < EVENT_CALL_PATH_MAX - 1) {
            PyCodeObject *co = frame_code(f);
            PyObject *name = frame_name(frame_func(f), co);
            PyObject *item = name ? Py_BuildValue("(OiN)", co->co_filename,
                                                  code_line_of(co, frame_lasti(f)), name) : NULL;
            if (item == NULL || PyList_Append(path, item) < 0)
                Py_CLEAR(path);
            Py_XDECREF(item);
            n++;
        }
        else {
            dropped++;
        }
        f = frame_complete(f->previous);
    }
    PyObject *own = path ? Py_NewRef(e->shown_as ? e->shown_as : cc->code->co_qualname) : NULL;
    PyObject *self = own ? Py_BuildValue("(OiN)", cc->code->co_filename,
                                         e->resume_offset ? e->resume_line : cc->code->co_firstlineno,
                                         own) : NULL;
    if (self == NULL || PyList_Reverse(path) < 0 || PyList_Append(path, self) < 0)
        Py_CLEAR(path);
    Py_XDECREF(self);
    if (path != NULL && dropped > 0) {
        PyObject *more = PyUnicode_FromFormat("%d frames not shown", dropped);
        PyObject *item = more ? Py_BuildValue("(siO)", "...", 0, more) : NULL;
        if (item == NULL || PyList_Insert(path, 0, item) < 0)
            Py_CLEAR(path);
        Py_XDECREF(item);
        Py_XDECREF(more);
    }
    return path;
}

const EventRecord *event_record(Event *ev, unsigned fields)
{
    unsigned todo = fields & ~ev->filled;
    EventRecord *r = &ev->rec;
    CacheEntry *e = ev->entry;
    ev->filled |= todo;
    if ((todo & EVF_GUARDS_TEXT) && r->kind == EV_COMPILE_END && e != NULL)
        r->guards_text = keep_text(ev, guards_text(e));
    if ((todo & EVF_GRAPH_CODE) && r->kind == EV_GRAPH_COMPILED && ev->gm)
        r->graph_code = keep_text(ev, ev->failed_graph ? failed_graph_code(ev->gm)
                                                       : PyObject_GetAttrString(ev->gm, "code"));
    if ((todo & EVF_OPS) && r->kind == EV_GRAPH_COMPILED && e && ev->gm) {
        r->backend = keep_text(ev, backend_name(e->backend));
        r->ops = keep_text(ev, graph_ops(ev->gm));
    }
    if ((todo & EVF_GUARD_SITES) && r->kind == EV_COMPILE_END && e != NULL)
        r->guard_sites_json = keep_text(ev, guard_sites_json(e));
    if ((todo & EVF_NEAREST) && r->kind == EV_RECOMPILE && ev->nearest != NULL)
        r->nearest_json = keep_text(ev, to_json(ev->nearest));
    if ((todo & EVF_FAILURES) && (r->kind == EV_RECOMPILE || r->kind == EV_CACHE_LIMIT)
        && ev->failures != NULL)
        r->failures_packed = keep_text(ev, pack_failures(ev->failures));
    if ((todo & EVF_CALL_PATH) && r->kind == EV_COMPILE_START && ev->cc != NULL && e != NULL) {
        PyObject *path = call_path(ev->cc, e);
        r->call_path_json = keep_text(ev, to_json(path));
        Py_XDECREF(path);
    }
    if ((todo & EVF_USER_STACK) && r->kind == EV_GRAPH_BREAK && e && e->plan.brk.user_stack) {
        const char *json = keep_text(ev, to_json(e->plan.brk.user_stack));
        r->user_stack_json = *json ? json : "[]";
    }
    PyErr_Clear();
    return r;
}

/* ---- the dict form (the in-memory log, DYNSCOPE_LOGS, explain) ---- */

static void set_item(PyObject *d, const char *key, PyObject *value_steal)
{
    if (d == NULL || value_steal == NULL || PyDict_SetItemString(d, key, value_steal) < 0)
        PyErr_Clear();
    Py_XDECREF(value_steal);
}

static PyObject *compile_id_str(CacheEntry *e)
{
    return PyUnicode_FromFormat("%d/%d", e->frame_id, e->frame_compile_id);
}

/* A graph_break's "kind", "reason", "offset", "user_stack" and the
   innermost frame's "filename" and "lineno". */
static void dict_break_items(PyObject *d, const BreakInfo *b)
{
    set_item(d, "kind", PyUnicode_FromString(b->kind ? b->kind : "unknown"));
    set_item(d, "reason", Py_NewRef(b->reason ? b->reason : Py_None));
    set_item(d, "offset", PyLong_FromLong(b->offset));
    set_item(d, "user_stack", b->user_stack ? PySequence_List(b->user_stack) : PyList_New(0));
    if (b->user_stack && PyList_Check(b->user_stack) && PyList_GET_SIZE(b->user_stack) > 0) {
        PyObject *last = PyList_GET_ITEM(b->user_stack, PyList_GET_SIZE(b->user_stack) - 1);
        if (PyTuple_Check(last) && PyTuple_GET_SIZE(last) >= 2) {
            set_item(d, "filename", Py_NewRef(PyTuple_GET_ITEM(last, 0)));
            set_item(d, "lineno", Py_NewRef(PyTuple_GET_ITEM(last, 1)));
        }
    }
}

/* The hits of a frame's entries so far (a recompile's "frame_hits": the
   perf_hints log tells a frame that misses on every call by it). */
static uint64_t frame_hits(CacheFrame *cf)
{
    uint64_t n = 0;
    for (Py_ssize_t i = 0; cf != NULL && i < PyList_GET_SIZE(cf->entries); i++)
        n += ((CacheEntry *)PyList_GET_ITEM(cf->entries, i))->hits;
    return n;
}

/* The kind-specific items of the dict. */
static void dict_items(Event *ev, PyObject *d)
{
    CacheEntry *e = ev->entry;
    if (e != NULL)
        set_item(d, "compile_id", compile_id_str(e));
    switch (ev->rec.kind) {
    case EV_COMPILE_START:
        set_item(d, "resume_offset", PyLong_FromLong(e->resume_offset * 2));   /* bytes */
        break;
    case EV_COMPILE_END:
        set_item(d, "outcome", PyUnicode_FromString(ev->rec.outcome));
        set_item(d, "duration_ns", PyLong_FromUnsignedLongLong(e->compile_ns));
        set_item(d, "graphs", PyLong_FromLong(e->plan.gm ? 1 : 0));
        set_item(d, "nodes", PyLong_FromLong(e->plan.nops));
        set_item(d, "guards", PyLong_FromLong(e->guards.n));
        if (dict_guard_exprs && !ev->private_capture)
            set_item(d, "guard_exprs", guard_lines(e, false));
        set_item(d, "hatches", e->plan.hatches ? PySequence_List(e->plan.hatches) : PyList_New(0));
        set_item(d, "phases", Py_BuildValue("{s:K,s:K,s:K,s:K,s:K,s:K,s:i}",
                                            "trace_ns", (unsigned long long)e->trace_ns,
                                            "guards_ns", (unsigned long long)e->guards_ns,
                                            "graph_ns", (unsigned long long)e->graph_ns,
                                            "backend_ns", (unsigned long long)e->backend_ns,
                                            "plan_ns", (unsigned long long)e->plan_ns,
                                            "events_ns", (unsigned long long)e->events_ns,
                                            "attempts", e->attempts));
        break;
    case EV_RECOMPILE:
        set_item(d, "reason", Py_NewRef(ev->reason ? ev->reason : Py_None));
        set_item(d, "failures", ev->failures ? PySequence_List(ev->failures) : PyList_New(0));
        set_item(d, "nearest", Py_NewRef(ev->nearest ? ev->nearest : Py_None));
        set_item(d, "frame_hits", PyLong_FromUnsignedLongLong(frame_hits(ev->frame)));
        break;
    case EV_CACHE_LIMIT:
        set_item(d, "limit", PyLong_FromLong(engine.config.cache_size_limit));
        set_item(d, "frame_id", PyLong_FromLong(ev->frame ? ev->frame->frame_id : -1));
        set_item(d, "last_failure", Py_NewRef(ev->reason ? ev->reason : Py_None));
        set_item(d, "failures", ev->failures ? PySequence_List(ev->failures) : PyList_New(0));
        break;
    case EV_FRAME_SKIP:
        set_item(d, "reason", Py_NewRef(ev->reason ? ev->reason : Py_None));
        set_item(d, "break_type", PyUnicode_FromString(ev->rec.break_type));
        set_item(d, "break_class", PyUnicode_FromString(ev->rec.break_class));
        break;
    case EV_GRAPH_BREAK:
        dict_break_items(d, &e->plan.brk);
        set_item(d, "break_type", PyUnicode_FromString(ev->rec.break_type));
        set_item(d, "break_class", PyUnicode_FromString(ev->rec.break_class));
        break;
    default:
        break;
    }
}

PyObject *event_dict(Event *ev)
{
    if (ev->dict != NULL || !(EV_MASK(ev->rec.kind) & EV_MASK_DICT))
        return ev->dict;
    PyObject *d;
    if (ev->cc == NULL) {
        d = Py_BuildValue("{s:s,s:K}", "event", event_kind_name(ev->rec.kind), "at_ns",
                          (unsigned long long)ev->rec.mono_ns);
    }
    else {
        PyCodeObject *co = ev->cc->code;
        d = Py_BuildValue("{s:s,s:L,s:O,s:O,s:i,s:K}", "event", event_kind_name(ev->rec.kind),
                          "code_id", ev->cc->code_id, "name", co->co_qualname,
                          "filename", co->co_filename, "firstlineno", co->co_firstlineno,
                          "at_ns", (unsigned long long)ev->rec.mono_ns);
        if (d != NULL && ev->entry != NULL && ev->entry->shown_as != NULL
            && PyDict_SetItemString(d, "shown_as", ev->entry->shown_as) < 0)
            Py_CLEAR(d);
        if (d != NULL)
            dict_items(ev, d);
    }
    if (d == NULL)
        PyErr_Clear();
    ev->dict = d;
    return d;
}

/* ---- dispatch ---- */

static void deliver(EventSink *s, Event *ev)
{
    s->emit(s->ctx, ev);
    if (PyErr_Occurred())
        warn_internal_error(s->name);
}

/* Hand ev to the session's sink and to every sink of the process that
   takes it, then free what was made for it.  Runs inside the engine, so
   the Python that sinks and the dict use (json, rendering) is never
   captured.  The table is copied first: a sink may add or remove sinks. */
static void dispatch(Event *ev)
{
    ThreadCapture *tc = capture_state();
    EventKind kind = ev->rec.kind;
    EventSink *now[EVENTS_MAX_SINKS];
    int n = nsinks;
    memcpy(now, sinks, (size_t)n * sizeof(now[0]));
    ev->private_capture = tc->session != NULL;
    ev->backend = tc->config.backend;
    tc->in_engine++;
    if (tc->session != NULL && tc->session->sink != NULL
        && sink_takes(tc->session->sink, kind, true))
        deliver(tc->session->sink, ev);
    for (int i = 0; i < n; i++)
        if (sink_takes(now[i], kind, ev->private_capture))
            deliver(now[i], ev);
    tc->in_engine--;
    Py_CLEAR(ev->dict);
    Py_CLEAR(ev->texts);
    PyErr_Clear();
}

/* ---- the call sites' side ----
   Each sets aside a pending exception (one the program will see, such as
   Unsupported under fullgraph) while the event is built and delivered. */

typedef struct { PyObject *type, *value, *tb; } PendingError;

static PendingError pending_take(void)
{
    PendingError p;
    PyErr_Fetch(&p.type, &p.value, &p.tb);
    return p;
}

static void pending_restore(PendingError p)
{
    PyErr_Clear();
    PyErr_Restore(p.type, p.value, p.tb);
}

static void emit_compile_start(CodeCache *cc, CacheEntry *e)
{
    Event ev;
    event_start(&ev, EV_COMPILE_START, cc, e);
    dispatch(&ev);
}

void events_compile_start(CodeCache *cc, CacheEntry *e)
{
    PendingError p = pending_take();
    emit_compile_start(cc, e);
    pending_restore(p);
}

/* Plan.hatches as one text, a hatch per line (event.h hatches): new str or
   NULL with an exception. */
static PyObject *hatch_lines(PyObject *hatches)
{
    PyObject *nl = PyUnicode_FromString("\n");
    PyObject *text = nl ? PyUnicode_Join(nl, hatches) : NULL;
    Py_XDECREF(nl);
    return text;
}

static void emit_compile_end(CodeCache *cc, CacheEntry *e, const char *outcome)
{
    Event ev;
    event_start(&ev, EV_COMPILE_END, cc, e);
    ev.rec.outcome = outcome;
    ev.rec.duration_ns = e->compile_ns;
    ev.rec.graphs = e->plan.gm ? 1 : 0;
    ev.rec.nodes = e->plan.nops;
    ev.rec.guards = e->guards.n;
    ev.rec.trace_ns = e->trace_ns;
    ev.rec.guards_ns = e->guards_ns;
    ev.rec.graph_ns = e->graph_ns;
    ev.rec.backend_ns = e->backend_ns;
    ev.rec.plan_ns = e->plan_ns;
    ev.rec.events_ns = e->events_ns;
    ev.rec.attempts = e->attempts;
    if (e->plan.hatches != NULL && PyList_GET_SIZE(e->plan.hatches) > 0)   /* rare: kept cheap */
        ev.rec.hatches = keep_text(&ev, hatch_lines(e->plan.hatches));
    dispatch(&ev);
    if (e->plan.gm == NULL || !anyone_takes(EV_GRAPH_COMPILED))
        return;
    event_start(&ev, EV_GRAPH_COMPILED, cc, e);
    ev.gm = e->plan.gm;
    ev.rec.nodes = e->plan.nops;
    ev.rec.backend_ns = e->backend_ns;
    dispatch(&ev);
}

void events_failed_graph(CodeCache *cc, CacheEntry *e, PyObject *gm)
{
    if (gm == NULL || !anyone_takes(EV_GRAPH_COMPILED))       /* NULL: none failed */
        return;
    PendingError p = pending_take();
    Event ev;
    event_start(&ev, EV_GRAPH_COMPILED, cc, e);
    ev.gm = gm;
    ev.failed_graph = true;
    PyObject *graph = PyObject_GetAttrString(gm, "graph");
    if (graph != NULL && Py_IS_TYPE(graph, GraphType))
        ev.rec.nodes = graph_op_count((GraphObject *)graph);      /* as plan.nops counts */
    Py_XDECREF(graph);
    PyErr_Clear();
    ev.rec.backend_ns = e->backend_ns;
    dispatch(&ev);
    pending_restore(p);
}

void events_compile_end(CodeCache *cc, CacheEntry *e, const char *outcome)
{
    PendingError p = pending_take();
    emit_compile_end(cc, e, outcome);
    pending_restore(p);
}

/* One EV_GUARD_FAIL per older entry's first failing guard; failures is a
   list of GuardFailureInfo (entry compile id, kind, expr, observed). */
static void guard_failures(CodeCache *cc, CacheEntry *e, PyObject *failures)
{
    if (failures == NULL || !anyone_takes(EV_GUARD_FAIL))
        return;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(failures); i++) {
        PyObject *t = PyList_GET_ITEM(failures, i);
        if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) < 4)
            continue;
        Event ev;
        event_start(&ev, EV_GUARD_FAIL, cc, e);
        ev.rec.entry_compile_id = utf8(PyTuple_GET_ITEM(t, 0));
        ev.rec.guard_kind = utf8(PyTuple_GET_ITEM(t, 1));
        ev.rec.expr = utf8(PyTuple_GET_ITEM(t, 2));
        ev.rec.observed = utf8(PyTuple_GET_ITEM(t, 3));
        PyObject *file, *line;
        if (guard_failure_info_site(t, &file, &line) && file != Py_None && PyLong_Check(line)) {
            ev.rec.guard_file = utf8(file);
            ev.rec.guard_line = PyLong_AsLong(line);
            if (ev.rec.guard_line == -1)
                PyErr_Clear();
        }
        dispatch(&ev);
    }
}

static void emit_recompile(CodeCache *cc, CacheFrame *cf, CacheEntry *e, PyObject *reason,
                           PyObject *failures, PyObject *nearest)
{
    Event ev;
    event_start(&ev, EV_RECOMPILE, cc, e);
    ev.frame = cf;
    ev.reason = reason;
    ev.failures = failures;
    ev.nearest = nearest;
    ev.rec.reason = utf8(reason);
    dispatch(&ev);
    guard_failures(cc, e, failures);
}

void events_recompile(CodeCache *cc, CacheFrame *cf, CacheEntry *e, PyObject *reason,
                      PyObject *failures, PyObject *nearest)
{
    PendingError p = pending_take();
    emit_recompile(cc, cf, e, reason, failures, nearest);
    pending_restore(p);
}

static void emit_cache_limit(CodeCache *cc, CacheFrame *cf, PyObject *failures)
{
    Event ev;
    event_start(&ev, EV_CACHE_LIMIT, cc, NULL);
    ev.frame = cf;
    ev.reason = cf->last_failure;
    ev.failures = failures;
    ev.rec.reason = utf8(cf->last_failure);
    ev.rec.resume_offset = cf->resume_offset * 2;
    ev.rec.frame_id = cf->frame_id;
    dispatch(&ev);
    guard_failures(cc, NULL, failures);
}

void events_cache_limit(CodeCache *cc, CacheFrame *cf, PyObject *failures)
{
    PendingError p = pending_take();
    emit_cache_limit(cc, cf, failures);
    pending_restore(p);
}

/* The registry's type and class of a break or skip with this kind (NULL
   for a skip) and reason, at a site in `file` (borrowed, may be NULL). */
static void classify(Event *ev, const char *kind, PyObject *file)
{
    const BreakType *bt = break_type_of(kind, ev->rec.reason);
    ev->rec.break_type = bt->id;
    ev->rec.break_class = break_class_name(break_class_at(bt, file));
}

static void emit_frame_skip(CodeCache *cc, PyObject *reason)
{
    Event ev;
    event_start(&ev, EV_FRAME_SKIP, cc, NULL);
    ev.reason = reason;
    ev.rec.reason = utf8(reason);
    classify(&ev, NULL, cc->code->co_filename);
    dispatch(&ev);
}

void events_frame_skip(CodeCache *cc, PyObject *reason)
{
    PendingError p = pending_take();
    emit_frame_skip(cc, reason);
    pending_restore(p);
}

static void emit_graph_break(CodeCache *cc, CacheEntry *e)
{
    const BreakInfo *b = &e->plan.brk;
    Event ev;
    event_start(&ev, EV_GRAPH_BREAK, cc, e);
    ev.reason = b->reason;
    ev.rec.break_kind = b->kind ? b->kind : "";
    ev.rec.reason = utf8(b->reason);
    ev.rec.break_offset = b->offset;
    ev.rec.user_stack_json = "[]";
    PyObject *file = cc->code->co_filename;    /* the break's site: its innermost frame */
    if (b->user_stack && PyList_Check(b->user_stack) && PyList_GET_SIZE(b->user_stack) > 0) {
        PyObject *last = PyList_GET_ITEM(b->user_stack, PyList_GET_SIZE(b->user_stack) - 1);
        if (PyTuple_Check(last) && PyTuple_GET_SIZE(last) >= 2) {
            file = PyTuple_GET_ITEM(last, 0);
            ev.rec.break_file = utf8(file);
            ev.rec.break_line = (int)PyLong_AsLong(PyTuple_GET_ITEM(last, 1));
            PyErr_Clear();
        }
    }
    classify(&ev, b->kind, file);
    dispatch(&ev);
}

void events_graph_break(CodeCache *cc, CacheEntry *e)
{
    PendingError p = pending_take();
    emit_graph_break(cc, e);
    pending_restore(p);
}

static void emit_reset(void)
{
    Event ev;
    event_start(&ev, EV_RESET, NULL, NULL);
    dispatch(&ev);
}

void events_reset(void)
{
    PendingError p = pending_take();
    emit_reset();
    pending_restore(p);
}

void events_run_span(CacheEntry *e, const char *kind, uint64_t start_ticks, uint64_t end_ticks)
{
    if (!anyone_takes(EV_RUN_SPAN))
        return;
    PendingError p = pending_take();
    Event ev;
    event_start(&ev, EV_RUN_SPAN, NULL, e);
    EventRecord *r = &ev.rec;
    uint64_t now = engine_ticks();
    uint64_t ago = engine_ticks_to_ns(now > start_ticks ? now - start_ticks : 0);
    r->wall_ns = r->wall_ns > ago ? r->wall_ns - ago : 0;          /* the span's start */
    r->mono_ns = r->mono_ns > ago ? r->mono_ns - ago : 0;
    r->duration_ns = engine_ticks_to_ns(end_ticks > start_ticks ? end_ticks - start_ticks : 0);
    r->code_id = e->code_id;
    r->qualname = utf8(e->code_name);
    r->filename = utf8(e->code_file);
    r->firstlineno = e->code_line;
    r->span_kind = kind;
    dispatch(&ev);
    pending_restore(p);
}

void events_annotate(const char *name, const char *phase, const char *fields)
{
    if (!anyone_takes(EV_ANNOTATE))
        return;
    PendingError p = pending_take();
    Event ev;
    event_start(&ev, EV_ANNOTATE, NULL, NULL);
    ev.rec.annotation = name;
    ev.rec.annotation_phase = phase;
    ev.rec.annotation_fields = fields;
    dispatch(&ev);
    pending_restore(p);
}
