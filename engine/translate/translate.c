/*
 * translate.c -- the translator's entry point (DESIGN.md 3.4; the files of
 * the translator and their contract: translate_int.h).
 *
 * translate_frame() interprets a code object's de-specialized bytecode
 * (co_code, never the live adaptive copy) with symbolic Values on a
 * symbolic stack.  Inputs are read from the concrete frame through
 * accessors, and reading one adds the guards that keep the capture valid
 * (values.c).  Tensor operations become graph nodes (tensorops.c); Python
 * arithmetic on constants is folded; calls to user functions are inlined;
 * branches on constants and loops over known sequences are followed, with
 * a bound on the instructions interpreted.  At RETURN_VALUE the graph is
 * closed and the plan records how to rebuild the return value; at a graph
 * break the plan's exit runs the rest (tr_exit.c).
 *
 * This file: the Tracer's life (one per translation, freed with every
 * Value), setting up symbolic frames, the inputs of a resume frame (its
 * live slots), and where tracing is (the user stack of a stop).
 *
 * Anything the translator does not model stops tracing with a reason; the
 * hook then runs the frame in the default interpreter.  The translator
 * never has effects the program could see: it runs only pure tensor ops,
 * on example values, and reads attributes only where no Python code runs
 * (the generic path; C getters).
 */
#include "translate_int.h"

#include <string.h>

/* ---- where tracing is ---- */

/* Source files' lines, read through linecache.getlines but kept here: a
   file the program's linecache.cache did not hold is taken out of it again
   (programs and tests read that cache).  Strong dict filename -> list, a
   copy of our own, of str only: it and the dict stay off the cyclic GC's
   lists (under `run --capture-all` they held every source line of the
   program, 170,000 strs that each full collection walked). */
static PyObject *source_files;

/* Line `line` of `filename`, stripped; "" when unknown.  New str or NULL. */
static PyObject *source_line(PyObject *filename, int line)
{
    if (source_files == NULL && (source_files = PyDict_New()) == NULL)
        return NULL;
    PyObject *lines = PyDict_GetItemWithError(source_files, filename);   /* borrowed */
    if (lines == NULL && !PyErr_Occurred()) {
        PyObject *linecache = PyImport_ImportModule("linecache");
        PyObject *cache = linecache ? PyObject_GetAttrString(linecache, "cache") : NULL;
        int had = cache != NULL && PyDict_Check(cache) ? PyDict_Contains(cache, filename) : -1;
        PyObject *got = had >= 0 ? PyObject_CallMethod(linecache, "getlines", "O", filename) : NULL;
        if (got != NULL && had == 0 && PyDict_DelItem(cache, filename) < 0)
            PyErr_Clear();   /* it did not make an entry */
        PyObject *copy = got != NULL && PyList_Check(got)
                         ? PyList_GetSlice(got, 0, PyList_GET_SIZE(got)) : NULL;
        if (copy != NULL)
            PyObject_GC_UnTrack(copy);   /* strs: no cycle can pass through it */
        if (copy != NULL && PyDict_SetItem(source_files, filename, copy) == 0)
            lines = copy;    /* source_files holds it now */
        Py_XDECREF(copy);
        Py_XDECREF(got);
        Py_XDECREF(cache);
        Py_XDECREF(linecache);
    }
    PyErr_Clear();
    if (lines == NULL || line < 1 || line > PyList_GET_SIZE(lines))
        return PyUnicode_FromString("");
    return PyObject_CallMethod(PyList_GET_ITEM(lines, line - 1), "strip", NULL);
}

/* (contract: translate.h) */
PyObject *tracer_user_stack(Tracer *t)
{
    PyObject *stack = PyList_New(0);
    if (stack == NULL)
        return NULL;
    for (TFrame *f = t->current; f != NULL; f = f->parent) {
        PyCodeObject *co = f->code;
        int line = code_line_of(co, f->cur_instr);
        PyObject *stripped = source_line(co->co_filename, line);
        if (stripped == NULL) {
            PyErr_Clear();
            stripped = PyUnicode_FromString("");
        }
        PyObject *item = stripped ? Py_BuildValue("(OiON)", co->co_filename, line,
                                                  co->co_qualname, stripped) : NULL;
        if (item == NULL || PyList_Insert(stack, 0, item) < 0) {
            Py_XDECREF(item);
            Py_DECREF(stack);
            return NULL;
        }
        PyObject_GC_UnTrack(item);     /* four atoms: no cycle can pass through it */
        Py_DECREF(item);
    }
    /* Out of the cyclic GC too: it holds only those tuples, and no engine
       code changes it after this (a program that appends to one it got from
       a break's dict and makes a cycle through it leaks that cycle, never
       crashes).  Each guard set keeps one per site and every break one:
       tracked, they were most of the objects each full collection walked
       under `run --capture-all` (90,000 lists on cachetools' suite). */
    PyObject_GC_UnTrack(stack);
    return stack;
}

/* GuardSet.current_site while t translates (ctx is t): the user stack
   being translated now, as an index into gs->sites.  Guards added at the
   same (code, instruction) chain as the last one reuse its index; a new
   chain builds the stack, and reuses the index when the stack reads the
   same (another instruction of the same line).  -1 when unknown; never
   leaves an exception set. */
static int tracer_current_site(GuardSet *gs, void *ctx)
{
    Tracer *t = ctx;
    if (t->current == NULL)
        return -1;
    int depth = 0;
    bool same = t->site_depth >= 0;
    for (TFrame *f = t->current; f != NULL && same; f = f->parent, depth++)
        same = depth < t->site_depth && t->site_key[depth].code == f->code
               && t->site_key[depth].instr == f->cur_instr;
    if (same && depth == t->site_depth)
        return t->site_index;
    PyObject *stack = tracer_user_stack(t);
    if (stack == NULL || (gs->sites == NULL && (gs->sites = PyList_New(0)) == NULL)) {
        Py_XDECREF(stack);
        PyErr_Clear();
        return -1;
    }
    PyObject_GC_UnTrack(gs->sites);    /* only untracked stacks: as they are */
    Py_ssize_t n = PyList_GET_SIZE(gs->sites);
    int index = t->site_index;
    if (index < 0 || index >= n
        || PyObject_RichCompareBool(PyList_GET_ITEM(gs->sites, index), stack, Py_EQ) != 1) {
        index = PyList_Append(gs->sites, stack) == 0 ? (int)n : -1;
    }
    Py_DECREF(stack);
    PyErr_Clear();
    depth = 0;
    for (TFrame *f = t->current; f != NULL; f = f->parent, depth++)
        if (depth < TRACER_SITE_DEPTH) {
            t->site_key[depth].code = f->code;
            t->site_key[depth].instr = f->cur_instr;
        }
    t->site_depth = index >= 0 && depth <= TRACER_SITE_DEPTH ? depth : -1;
    t->site_index = index;
    return index;
}

/* (contract: translate.h) */
int tracer_offset(Tracer *t)
{
    return t->current ? t->current->cur_instr * 2 : 0;
}

/* ---- symbolic frames ---- */

/* Does the code name getrefcount?  The engine holds the objects it passes
   between graphs and eager steps in its own arrays, and guards hold types:
   counts it reads would differ from the interpreter's. */
static bool reads_refcounts(PyCodeObject *co)
{
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(co->co_names); i++) {
        PyObject *name = PyTuple_GET_ITEM(co->co_names, i);
        if (PyUnicode_Check(name) && PyUnicode_CompareWithASCIIString(name, "getrefcount") == 0)
            return true;
    }
    return false;
}

/* A reason the code object cannot be interpreted at all, or NULL.  Code
   with exception handling is interpreted along the path that raises
   nothing: an inlined call whose traced code raises stops there (its call
   runs eagerly, and its handlers run for real); a frame of its own stops
   at its protected instructions (a plan cannot enter a handler).  A
   generator function called is a generator run lazily (tr_generators.c),
   or, made while tracing (a generator expression), run to its end when
   called, what it yields collected. */
const char *tr_code_unsupported_reason(PyCodeObject *co)
{
    if (co->co_flags & (CO_COROUTINE | CO_ASYNC_GENERATOR))
        return "coroutine or async generator";
    if (reads_refcounts(co))
        return "reads reference counts (sys.getrefcount), which capture would change";
    return NULL;
}

/* `code` is what the frame runs: for an inlined call the function's
   __code__, for the root frame the intercepted frame's own code, which the
   function may no longer hold (code that assigns func.__code__ while the
   function runs: its frame goes on with the code it started with). */
int tr_frame_setup(TFrame *f, Tracer *t, TFrame *parent, PyObject *func, int func_src,
                   PyCodeObject *code)
{
    memset(f, 0, sizeof(*f));
    f->t = t;
    f->parent = parent;
    f->func = func;
    f->func_src = func_src;
    f->code = code;
    if (bytecode_open(&f->bc, f->code) < 0)
        return -1;
    f->nlocals = code_nslots(f->code);
    f->locals = PyMem_Calloc((size_t)code_nlocalsplus(f->code) + 1, sizeof(Value *));
    if (f->locals == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    f->globals = PyFunction_GET_GLOBALS(func);
    f->globals_acc = -1;
    if (parent != NULL && f->globals != t->fv->globals) {
        PyObject *gn = PyUnicode_FromString("__globals__");
        f->globals_acc = gn ? guardset_accessor(t->gs, ACC_ATTR, func_src, 0, gn, NULL) : -1;
        Py_XDECREF(gn);
        if (f->globals_acc < 0)
            return -1;
    }
    return 0;
}

/* Release what tr_frame_setup() took; f's Values stay the tracer's.
   Cannot fail. */
void tr_frame_teardown(TFrame *f)
{
    bytecode_close(&f->bc);
    PyMem_Free(f->locals);
    f->locals = NULL;
}

/* ---- the inputs of a resume frame ---- */

/* A (nested) list of Python numbers, as .tolist() returns. */
static bool is_list_of_numbers(PyObject *obj)
{
    if (!PyList_CheckExact(obj) || PyList_GET_SIZE(obj) == 0)
        return false;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(obj); i++) {
        PyObject *x = PyList_GET_ITEM(obj, i);
        if (!(PyFloat_CheckExact(x) || PyLong_CheckExact(x) || PyComplex_CheckExact(x)
              || is_list_of_numbers(x)))
            return false;
    }
    return true;
}

/* A for-loop iterator that came into resume slot k (accessor acc, object
   obj) as the tuple of its remaining items, or over a tensor as the rows
   left: one V_ITER for one object, however many slots hold it.  NULL when
   tracing stops. */
static Value *resume_slot_iter(TFrame *f, int acc, PyObject *obj, int k)
{
    Tracer *t = f->t;
    PyObject *key = PyLong_FromVoidPtr(obj);
    if (key == NULL)
        return NULL;
    if (t->iter_objs == NULL && (t->iter_objs = PyDict_New()) == NULL) {
        Py_DECREF(key);
        return NULL;
    }
    PyObject *seen = PyDict_GetItemWithError(t->iter_objs, key);
    if (seen != NULL) {
        Py_DECREF(key);
        Value *same = PyLong_AsVoidPtr(seen);
        /* on later calls too, this slot holds the other slot's object
           (a relative guard: the object itself is the run's, not ours
           to keep) */
        int other = same->in_acc;
        if (guardset_add(t->gs, GUARD_SAME_AS, acc, NULL, other) < 0)
            return NULL;
        return same;
    }
    Value *items = PyErr_Occurred() ? NULL : value_from_source(t, acc, obj);
    Value *it;
    if (items != NULL && items->kind == V_TENSOR) {
        it = tr_make_iter(f, items);   /* the rows of a tensor still to read (RB_ROWS) */
    }
    else {
        it = items ? value_new(t, V_ITER, NULL) : NULL;
        for (int i = 0; it && i < items->n; i++)
            if (value_append(t, it, items->items[i]) < 0)
                it = NULL;
        if (it != NULL)
            it->came_in_slot = k + 1;
    }
    if (it != NULL)
        it->in_acc = acc;
    PyObject *ptr = it ? PyLong_FromVoidPtr(it) : NULL;
    if (ptr == NULL || PyDict_SetItem(t->iter_objs, key, ptr) < 0)
        it = NULL;
    Py_XDECREF(ptr);
    Py_DECREF(key);
    return it;
}

/* Of `want`, the dimensions of tensor obj to take as dynamic: with
   dynscope.mark_dynamic / mark_static (and torch._dynamo's, on tensors)
   applied, those of size 2 or more. */
static uint32_t marked_dims(PyObject *obj, uint32_t want)
{
    PyObject *marked = tensorlib_loaded_module_attr("dynscope", "_marked_dims");   /* borrowed */
    PyObject *masks = marked ? PyObject_CallOneArg(marked, obj) : NULL;
    unsigned long dyn_mark = 0, static_mark = 0;
    if (masks == NULL || !PyArg_ParseTuple(masks, "kk", &dyn_mark, &static_mark))
        PyErr_Clear();
    Py_XDECREF(masks);
    want = (want | (uint32_t)dyn_mark) & ~(uint32_t)static_mark;
    if (want == 0)
        return 0;
    PyObject *shape = PyObject_GetAttrString(obj, "shape");
    uint32_t dims = 0;
    for (Py_ssize_t d = 0; shape && PyTuple_Check(shape) && d < PyTuple_GET_SIZE(shape) && d < 32; d++)
        if ((want & (1u << d)) && PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, d)) >= 2)
            dims |= 1u << d;
    Py_XDECREF(shape);
    PyErr_Clear();
    return dims;
}

/* The dimensions of tensor obj in slot k whose size this attempt takes as
   dynamic: TranslateRequest.dyn_dims (every one under dynamic=True).  0 for
   anything else. */
static uint32_t dynamic_dims(Tracer *t, int k, PyObject *obj)
{
    if (!t->dyn_shapes || (!tensor_is_array(obj) && !tensor_is_torch(obj)))
        return 0;
    return marked_dims(obj, t->rq->dynamic > 0 ? ~(uint32_t)0 : t->rq->dyn_dims[k]);
}

/* A parameter or a buffer of a module: a torch.nn.Parameter, or a value
   of a module's _parameters or _buffers (as Dynamo's
   force_parameter_static_shapes). */
static bool is_module_state(Tracer *t, int acc, PyObject *obj)
{
    PyTypeObject *param = tensorlib_parameter_type();
    if (param != NULL && PyObject_TypeCheck(obj, param))
        return true;
    const Accessor *a = &t->gs->acc[acc];
    if (a->base < 0 || a->kind != ACC_DICT_ITEM)
        return false;
    PyObject *key = t->gs->acc[a->base].key;
    return key != NULL && PyUnicode_Check(key)
           && (PyUnicode_CompareWithASCIIString(key, "_parameters") == 0
               || PyUnicode_CompareWithASCIIString(key, "_buffers") == 0);
}

/* Note "src.size(d)" for each dimension of dims in rq->now_dynamic.
   0 / -1. */
static int note_now_dynamic(TranslateRequest *rq, PyObject *src, uint32_t dims)
{
    if (rq->now_dynamic == NULL && (rq->now_dynamic = PyList_New(0)) == NULL)
        return -1;
    for (int d = 0; d < 32; d++) {
        if (!(dims & (1u << d)))
            continue;
        PyObject *s = PyUnicode_FromFormat("%U.size(%d)", src, d);
        int rc = s ? PyList_Append(rq->now_dynamic, s) : -1;
        Py_XDECREF(s);
        if (rc < 0)
            return -1;
    }
    return 0;
}

/* Automatic dynamic on one source, as Dynamo's frame state: compare obj's
   shape with the one this source had at the frame's last translations; a
   dimension whose size changed (same rank; to a size from 2 on, as 0 and 1
   broadcast apart) becomes dynamic for the frame's next translations, this
   one too.  A size of 0 or 1 does not replace the size from 2 on recorded
   before it: a prompt of 7 tokens, then decoding steps of 1, then a prompt
   of 11 makes the prompt's length dynamic.  A source not seen before takes
   as dynamic its dimensions of a size this miss saw change
   (rq->changed_sizes): the first decoding step, which the prompt's length
   7 -> 1 missed, reads a KV cache of length 7 that grows from then on.
   0 / -1. */
static int source_changed_dims(Tracer *t, PyObject *src, PyObject *obj, uint32_t *want)
{
    TranslateRequest *rq = t->rq;
    PyObject *shape = PyObject_GetAttrString(obj, "shape");
    if (shape == NULL || !PyTuple_Check(shape)) {
        Py_XDECREF(shape);
        return shape == NULL ? -1 : 0;
    }
    PyObject *rec = PyDict_GetItemWithError(rq->source_sizes, src);     /* borrowed */
    uint32_t mask = 0, changed = 0, keep = 0;
    PyObject *before = NULL;                                             /* borrowed */
    if (rec != NULL && PyList_Check(rec) && PyList_GET_SIZE(rec) == 3) {
        if (PyObject_IsTrue(PyList_GET_ITEM(rec, 2)) == 1) {        /* kept static */
            Py_DECREF(shape);
            return 0;
        }
        before = PyList_GET_ITEM(rec, 0);
        mask = (uint32_t)PyLong_AsUnsignedLongMask(PyList_GET_ITEM(rec, 1));
        Py_ssize_t n = PyTuple_GET_SIZE(shape);
        if (PyTuple_Check(before) && PyTuple_GET_SIZE(before) == n) {
            for (Py_ssize_t d = 0; d < n && d < 32; d++) {
                Py_ssize_t was = PyLong_AsSsize_t(PyTuple_GET_ITEM(before, d));
                Py_ssize_t now = PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, d));
                if (now >= 2 && was != now)    /* from 1 too: a cache of length 1, then 2 */
                    changed |= 1u << d;
                if (was >= 2 && now < 2)           /* keep the last size from 2 on */
                    keep |= 1u << d;
            }
        }
        if (PyErr_Occurred()) {
            Py_DECREF(shape);
            return -1;
        }
    }
    else if (rec == NULL && PyErr_Occurred()) {
        Py_DECREF(shape);
        return -1;
    }
    else if (rec == NULL) {
        /* first seen, in a miss on changed sizes: a dimension of one of
           those sizes most likely carries it (the cache a prompt filled) */
        for (Py_ssize_t d = 0; d < PyTuple_GET_SIZE(shape) && d < 32; d++) {
            Py_ssize_t now = PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, d));
            for (int i = 0; now >= 2 && i < rq->nchanged_sizes; i++)
                if (rq->changed_sizes[i] == now)
                    changed |= 1u << d;
        }
        if (PyErr_Occurred()) {
            Py_DECREF(shape);
            return -1;
        }
    }
    uint32_t fresh = changed & ~mask;
    mask |= changed;
    if (keep != 0) {
        /* the recorded shape: this one, but the sizes from 2 on kept */
        PyObject *merged = PyTuple_New(PyTuple_GET_SIZE(shape));
        for (Py_ssize_t d = 0; merged != NULL && d < PyTuple_GET_SIZE(shape); d++)
            PyTuple_SET_ITEM(merged, d, Py_NewRef(PyTuple_GET_ITEM(d < 32 && (keep & (1u << d))
                                                                   ? before : shape, d)));
        Py_SETREF(shape, merged);
        if (shape == NULL)
            return -1;
    }
    PyObject *m = PyLong_FromUnsignedLong(mask);
    PyObject *now = m ? PyList_New(3) : NULL;
    if (now != NULL) {
        PyList_SET_ITEM(now, 0, shape);
        PyList_SET_ITEM(now, 1, m);
        PyList_SET_ITEM(now, 2, Py_NewRef(Py_False));
        shape = m = NULL;
    }
    Py_XDECREF(shape);
    Py_XDECREF(m);
    int rc = now ? PyDict_SetItem(rq->source_sizes, src, now) : -1;
    Py_XDECREF(now);
    if (rc < 0 || (fresh != 0 && note_now_dynamic(rq, src, fresh) < 0))
        return -1;
    *want = mask;
    return 0;
}

/* Whether source_sizes marks src static: a translation read it with
   dynamic sizes, then needed them as constants (keep_sources_static). */
static bool source_kept_static(TranslateRequest *rq, PyObject *src)
{
    PyObject *rec = rq->source_sizes ? PyDict_GetItemWithError(rq->source_sizes, src) : NULL;
    return rec != NULL && PyList_Check(rec) && PyList_GET_SIZE(rec) == 3
           && PyObject_IsTrue(PyList_GET_ITEM(rec, 2)) == 1;
}

/* (contract: translate.h) */
uint32_t tr_source_dynamic_dims(Tracer *t, int acc, PyObject *obj)
{
    TranslateRequest *rq = t->rq;
    /* (an array or tensor only: obj.shape of any other object could run
       its Python code) */
    if (!t->dyn_shapes || (!tensor_is_array(obj) && !tensor_is_torch(obj))
        || (rq->source_sizes == NULL && rq->dynamic <= 0)
        || (rq->static_module_state && is_module_state(t, acc, obj)))
        return 0;
    PyObject *src = guardset_render_source(t->gs, acc);
    uint32_t want = rq->dynamic > 0 ? ~(uint32_t)0 : 0;
    if (src != NULL && rq->dynamic > 0 && source_kept_static(rq, src))
        want = 0;                 /* dynamic=True, but a translation needed it constant */
    if (src == NULL || PyErr_Occurred()
        || (rq->dynamic < 0 && rq->source_sizes != NULL
            && source_changed_dims(t, src, obj, &want) < 0)) {
        PyErr_Clear();            /* undecided: static */
        Py_XDECREF(src);
        return 0;
    }
    uint32_t dims = marked_dims(obj, want);
    if (dims != 0 && t->dyn_sources == NULL)
        t->dyn_sources = PyList_New(0);
    if (dims != 0 && (t->dyn_sources == NULL || PyList_Append(t->dyn_sources, src) < 0)) {
        PyErr_Clear();            /* unrecorded, it could not be made static: static now */
        dims = 0;
    }
    Py_DECREF(src);
    return dims;
}

/* (contract: translate.h) */
bool tr_source_dynamic_int(Tracer *t, int acc, PyObject *obj)
{
    TranslateRequest *rq = t->rq;
    if (!t->dyn_shapes || rq->dynamic == 0 || rq->source_sizes == NULL || !PyLong_CheckExact(obj))
        return false;
    const Accessor *a = &t->gs->acc[acc];
    if (a->base < 0 || (a->kind != ACC_ATTR && a->kind != ACC_OBJATTR && a->kind != ACC_DICT_ITEM))
        return false;      /* an object's state, a dict's item: not the frame's own slots
                              (their own rule) or the items of a sequence (a loop's
                              remaining range in a resume frame) */
    int overflow = 0;
    long long now = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (overflow != 0 || now < 2) {          /* 0 and 1 stay specialized, as sizes do */
        PyErr_Clear();
        return false;
    }
    PyObject *src = guardset_render_source(t->gs, acc);
    PyObject *rec = src ? PyDict_GetItemWithError(rq->source_sizes, src) : NULL;   /* borrowed */
    /* dynamic=True learns ints as automatic dynamic does (from their first
       change): from their first sight, an nn.Module's own counts
       (num_heads, layer_idx) would become symbols too */
    bool dynamic = false, fresh = false;
    if (rec != NULL && PyList_Check(rec) && PyList_GET_SIZE(rec) == 3) {
        if (PyObject_IsTrue(PyList_GET_ITEM(rec, 2)) == 1) {    /* kept static */
            Py_DECREF(src);
            return false;
        }
        PyObject *was = PyList_GET_ITEM(rec, 0);
        dynamic = dynamic || PyObject_IsTrue(PyList_GET_ITEM(rec, 1)) == 1;
        if (!dynamic && PyLong_CheckExact(was)) {
            int eq = PyObject_RichCompareBool(was, obj, Py_EQ);
            fresh = dynamic = eq == 0;
        }
    }
    else if (rec == NULL && src != NULL && !PyErr_Occurred()) {
        /* first read in a miss on changed sizes: one of those sizes */
        for (int i = 0; !dynamic && i < rq->nchanged_sizes; i++)
            fresh = dynamic = rq->changed_sizes[i] == now;
    }
    PyObject *flag = src ? PyLong_FromLong(dynamic) : NULL;
    PyObject *now_rec = flag ? PyList_New(3) : NULL;
    if (now_rec != NULL) {
        PyList_SET_ITEM(now_rec, 0, Py_NewRef(obj));
        PyList_SET_ITEM(now_rec, 1, flag);
        PyList_SET_ITEM(now_rec, 2, Py_NewRef(Py_False));
        flag = NULL;
    }
    Py_XDECREF(flag);
    bool ok = now_rec != NULL && PyDict_SetItem(rq->source_sizes, src, now_rec) == 0;
    Py_XDECREF(now_rec);
    if (ok && fresh) {
        if (rq->now_dynamic == NULL)
            rq->now_dynamic = PyList_New(0);
        ok = rq->now_dynamic != NULL && PyList_Append(rq->now_dynamic, src) == 0;
    }
    if (ok && dynamic) {
        if (t->dyn_sources == NULL)
            t->dyn_sources = PyList_New(0);
        ok = t->dyn_sources != NULL && PyList_Append(t->dyn_sources, src) == 0;
    }
    Py_XDECREF(src);
    if (!ok) {
        PyErr_Clear();                       /* undecided: static */
        return false;
    }
    return dynamic;
}

/* The value of live slot k (locals first, then stack) of a resume frame:
   numbers an eager step produced stay unspecialized, and a for-loop
   iterator arrives as the tuple of its remaining items. */
Value *tr_value_from_resume_slot(TFrame *f, int acc, PyObject *obj, int k)
{
    Tracer *t = f->t;
    uint64_t bit = slot_bit(k);
    if ((t->rq->unspec & bit) && (PyFloat_CheckExact(obj) || PyLong_CheckExact(obj)
                                  || PyComplex_CheckExact(obj)))
        return value_unspecialized(t, acc, obj);
    if (k < LIVE_MAX_SLOTS && !(t->rq->static_only & bit)
        && (((t->dyn & bit) && (PyFloat_CheckExact(obj) || PyLong_CheckExact(obj)))
            || (t->dyn_floats && PyFloat_CheckExact(obj)))) {
        /* automatic dynamic: a graph input, TYPE_MATCH only */
        t->dyn_used |= bit;
        if (PyLong_CheckExact(obj))
            t->dyn_used_exact |= bit;
        return value_unspecialized(t, acc, obj);
    }
    if ((t->rq->unspec & bit) && (is_list_of_numbers(obj) || PyUnicode_CheckExact(obj))) {
        /* data that escaped (.tolist(), an f-string of a number): its values
           must not be guarded */
        if (guardset_add(t->gs, GUARD_TYPE_MATCH, acc, (PyObject *)Py_TYPE(obj), 0) < 0)
            return NULL;
        Value *v = value_new(t, V_OBJECT, obj);
        if (v)
            v->src = acc;
        return v;
    }
    if ((t->rq->iters & bit) && (PyTuple_CheckExact(obj) || tensor_is_array(obj) || tensor_is_torch(obj)))
        return resume_slot_iter(f, acc, obj, k);
    /* the slot's own marks (the failing guard's), and the frame state's
       rule every source follows (all sizes that changed, at once) */
    uint32_t dims = k < LIVE_MAX_SLOTS && !(t->rq->static_only & bit)
                    ? dynamic_dims(t, k, obj) | tr_source_dynamic_dims(t, acc, obj) : 0;
    if (dims != 0) {
        /* automatic dynamic: these sizes are graph values */
        t->dyn_used |= bit;
        t->dyn_used_exact |= bit;          /* a branch on a size: the static translation */
        return value_dynamic_tensor(t, acc, obj, dims);
    }
    return value_from_source(t, acc, obj);
}

/* ---- entry point ---- */

/* Free everything the tracer owns: every Value made, its arrays and
   references.  Cannot fail. */
static void tracer_free(Tracer *t)
{
    for (int i = 0; i < t->nall; i++) {
        Py_XDECREF(t->all[i]->obj);
        Py_XDECREF(t->all[i]->dict_keys);
        Py_XDECREF(t->all[i]->tuple_type);
        PyMem_Free(t->all[i]->items);
        PyMem_Free(t->all[i]->sym);
        PyMem_Free(t->all[i]->sdims);
        PyMem_Free(t->all[i]);
    }
    PyMem_Free(t->all);
    PyMem_Free(t->syms);
    PyMem_Free(t->by_acc);
    PyMem_Free(t->input_acc);
    PyMem_Free(t->end.args);
    tracer_undo_free(t);
    PyMem_Free(t->undo);
    tr_gen_frames_free(t);
    tr_writes_free(t);
    Py_CLEAR(t->state_modes);
    Py_CLEAR(t->hatches);
    Py_CLEAR(t->failed_gm);
    Py_CLEAR(t->read_by_id);
    Py_CLEAR(t->iter_objs);
    Py_CLEAR(t->graph);
    Py_CLEAR(t->example_inputs);
    Py_CLEAR(t->used_nodes);
    Py_CLEAR(t->reason);
    Py_CLEAR(t->stop_stack);
    Py_CLEAR(t->dyn_sources);
}

/* Push a resume frame's incoming value stack onto the root frame, and read
   the locals that hold loop iterators.  0 / -1 (tracing stops). */
static int push_resume_stack(TFrame *f, const FrameView *fv)
{
    Tracer *t = f->t;
    for (int j = 0; j < fv->nstack; j++) {
        PyObject *obj = fv->stack[j];
        Value *v;
        if (obj == NULL) {
            v = value_new(t, V_NULL, NULL);
        }
        else {
            int acc = guardset_accessor(t->gs, ACC_STACK, -1, j, NULL, NULL);
            v = acc < 0 ? NULL : tr_value_from_resume_slot(f, acc, obj, f->nlocals + j);
        }
        if (v == NULL || push(f, v) < 0)
            return -1;
    }
    /* A local holding a loop's iterator is read now, so that it stays the
       stack slot's iterator (one object) as the loop advances. */
    for (int i = 0; i < f->nlocals && i < LIVE_MAX_SLOTS; i++)
        if ((t->rq->iters & slot_bit(i)) && i < fv->nlocals && fv->locals[i] != NULL
            && tr_load_local(f, i) == NULL)
            return -1;
    return 0;
}

/* How an attempt runs, and why the caller should try again. */
typedef struct Attempt {
    bool strict_try;          /* stop at the root frame's first protected
                                 instruction */
    bool eager_generators;    /* generator function calls are breaks */
    bool compiling_false;     /* is_compiling() answered False (Tracer's) */
    bool compile_path_raised; /* out: tracing stopped where the program would
                                 raise, after is_compiling() was answered True */
    bool stopped_in_try;      /* out: tracing stopped inside a try range of
                                 the root frame, where a plan cannot end */
    bool gen_not_rebuilt;     /* out: the plan would hand the program a
                                 generator the translator ran */
    bool all_static;          /* no number a graph input (TranslateRequest.dynamic_slots off) */
    bool probe;               /* stop before the backend when, with dynamic ints
                                 or sizes, tracing stops anywhere but at an
                                 f-string (stop_kind/offset say where): the
                                 static translation may do better */
    const char *stop_kind;    /* out, probe: the break's kind (static str) */
    int stop_offset;          /* out, probe: the break's offset */
    uint64_t dyn_used;        /* out: slots read as dynamic numbers */
    uint64_t dyn_used_exact;  /* out: of those, ints and tensor sizes (what a
                                 branch or a loop count may need exactly) */
    PyObject *dyn_sources;    /* out, strong list or NULL: other sources read
                                 with dynamic sizes (Tracer.dyn_sources) */
} Attempt;

/* One translation of the frame (translate_frame's contract), as `a` says;
   its out fields say when the caller should translate again. */
static TranslateStatus translate_attempt(TranslateRequest *rq, GuardSet *gs, Plan *plan,
                                         PyObject **reason, bool *permanent, Attempt *a)
{
    const FrameView *fv = rq->fv;
    Tracer t;
    memset(&t, 0, sizeof(t));
    t.gs = gs;
    t.site_depth = t.site_index = -1;
    gs->current_site = tracer_current_site;
    gs->site_ctx = &t;
    t.fv = fv;
    t.rq = rq;
    t.backend = rq->backend;
    t.strict_try = a->strict_try;
    t.eager_generators = a->eager_generators;
    t.compiling_false = a->compiling_false;
    int dynamic = rq->dynamic;
    if (!a->all_static && dynamic != 0) {
        t.dyn = dynamic > 0 ? ~(uint64_t)0 : rq->dynamic_slots;
        t.dyn_floats = true;
        t.dyn_shapes = true;
    }
    t.grad_mode_start = t.grad_mode_now = -1;
    t.graph = graph_new();
    t.example_inputs = PyList_New(0);
    t.used_nodes = PySet_New(NULL);
    TranslateStatus st = TRANSLATE_ERROR;
    TFrame root;
    memset(&root, 0, sizeof(root));
    uint64_t guard_ticks0 = gs->build_ticks;
    rq->attempts++;
    if (t.graph == NULL || t.example_inputs == NULL || t.used_nodes == NULL)
        goto out;
    if (tr_frame_setup(&root, &t, NULL, rq->func, -1, fv->code) < 0)
        goto out;
    t.current = &root;
    root.cur_instr = rq->resume_offset;   /* the stack's guards: made where it resumes */
    if (rq->resume_offset != 0 && push_resume_stack(&root, fv) < 0)
        goto stopped;
    int r = tr_run_frame(&root, rq->resume_offset);
    if (r == FRAME_STOPPED)
        goto stopped;
    if (a->probe && (t.dyn_used_exact != 0 || t.dyn_sources != NULL) && t.end.kind != END_RETURN
        && !t.stop_formats) {
        a->stop_kind = t.end.kind_name != NULL ? t.end.kind_name : "stop";
        a->stop_offset = t.end.offset;
        st = TRANSLATE_UNSUPPORTED;
        *reason = PyUnicode_FromString("a dynamic int or size met a stop (probe)");
        if (*reason == NULL)
            st = TRANSLATE_ERROR;
        goto out;
    }
    /* The reason (if any) now belongs to the break; a new stop in tr_finish()
       is a reason of its own. */
    uint64_t f0 = engine_phase_ns(), finish_guard_ticks0 = gs->build_ticks;
    if (tr_finish(&t, &root, plan) < 0)
        goto stopped;
    plan->hatches = t.hatches;      /* (stolen) */
    t.hatches = NULL;
    rq->backend_ns = t.backend_ns;
    rq->graph_ns = t.graph_ns;
    uint64_t finish_ns = engine_phase_ns() - f0,
             finish_guards = engine_ticks_to_ns(gs->build_ticks - finish_guard_ticks0),
             parts = t.backend_ns + t.graph_ns + finish_guards;
    rq->plan_ns = finish_ns > parts ? finish_ns - parts : 0;
    st = TRANSLATE_OK;
    goto out;
stopped:
    if (t.failed_gm != NULL) {         /* the backend raised: the last attempt's graph */
        Py_XSETREF(rq->failed_gm, Py_NewRef(t.failed_gm));
        rq->backend_ns = t.backend_ns;  /* its time is the backend's, not the trace's */
        rq->graph_ns = t.graph_ns;
    }
    a->stopped_in_try = t.stopped_in_try;
    a->gen_not_rebuilt = t.gen_not_rebuilt;
    if (t.reason != NULL && !PyErr_Occurred()) {
        *reason = Py_NewRef(t.reason);
        *permanent = t.permanent;
        st = TRANSLATE_UNSUPPORTED;
    }
out:
    rq->guard_ticks += gs->build_ticks - guard_ticks0;
    gs->current_site = NULL;      /* the set outlives t */
    gs->site_ctx = NULL;
    a->dyn_used = t.dyn_used;
    a->dyn_used_exact = t.dyn_used_exact;
    a->compile_path_raised = t.answered_compiling && t.predicted_raise && t.reason != NULL;
    Py_XSETREF(a->dyn_sources, Py_XNewRef(t.dyn_sources));
    tr_frame_teardown(&root);
    tr_leave_state_modes(&t, 0);
    tensorops_restore_grad_mode(&t, t.grad_mode_start);   /* as the frame found it */
    tr_random_restore(&t);          /* the examples' draws, before the plan's */
    if (st != TRANSLATE_OK) {
        /* Leave the plan empty so its destructor has nothing half-built,
           but keep where tracing stopped (fullgraph messages).  When
           tracing stopped on what it read, the guards of those reads stay:
           the same inputs would stop it the same way (hook.c keeps such an
           entry, run without capture).  An error, or a stop on a value no
           guard covers, leaves no guards (and hook.c keeps no entry). */
        PyObject *where = Py_XNewRef(t.stop_stack);
        plan_clear(plan);
        if (st == TRANSLATE_ERROR || t.stop_unguarded || a->stopped_in_try || a->gen_not_rebuilt) {
            guardset_clear(gs);
            guardset_init(gs);
        }
        plan->brk.user_stack = where;
    }
    tracer_free(&t);
    return st;
}

/* translate_attempt, again as its out fields ask: calling generator
   functions eagerly, then ending the frame where a try begins.  `a` sets
   how (all_static, probe) and gets the outcome's out fields. */
static TranslateStatus translate_retrying(TranslateRequest *rq, GuardSet *gs, Plan *plan,
                                          PyObject **reason, bool *permanent, Attempt *a)
{
    /* First through try blocks as through any code (most raise nothing
       and break nowhere); when tracing stops inside one, again from the
       start, ending the frame where the try begins. */
    Attempt how = *a;
    TranslateStatus st = translate_attempt(rq, gs, plan, reason, permanent, a);
    if (a->gen_not_rebuilt) {
        /* A generator run while tracing would reach the program (held at
           the frame's end): again, calling generator functions eagerly. */
        PyErr_Clear();
        Py_CLEAR(*reason);
        *permanent = false;
        Py_CLEAR(a->dyn_sources);
        *a = how;
        a->eager_generators = true;
        st = translate_attempt(rq, gs, plan, reason, permanent, a);
    }
    if (a->stopped_in_try) {
        PyErr_Clear();             /* what stopped it is the retry's to meet again */
        Py_CLEAR(*reason);
        *permanent = false;
        a->strict_try = true;
        a->stopped_in_try = false;
        st = translate_attempt(rq, gs, plan, reason, permanent, a);
    }
    if (a->compile_path_raised && !a->compiling_false && st != TRANSLATE_ERROR) {
        /* The path a library takes for a compiler (is_compiling() True)
           raised where tracing stopped: an eager step or the interpreter
           would meet that raise with the state that path made -- a
           `mask = None` only a compiler was to fill, say -- which eager
           code never has.  Again, answering False, as the program gets. */
        PyErr_Clear();
        Py_CLEAR(*reason);
        *permanent = false;
        plan_clear(plan);
        guardset_clear(gs);
        guardset_init(gs);
        Py_CLEAR(a->dyn_sources);
        bool strict = a->strict_try, eager_gens = a->eager_generators;
        *a = how;
        a->strict_try = strict;
        a->eager_generators = eager_gens;
        a->compiling_false = true;
        st = translate_attempt(rq, gs, plan, reason, permanent, a);
    }
    return st;
}

/* Forget a translation that made no plan, to make another. */
static void discard_translation(PyObject **reason, bool *permanent)
{
    PyErr_Clear();
    Py_CLEAR(*reason);
    *permanent = false;
}

/* The sources a translation read with dynamic sizes and then needed as
   constants stay static for the frame (TranslateRequest.kept_static).
   Cannot fail: what it cannot note is forgotten. */
static void keep_sources_static(TranslateRequest *rq, PyObject *sources)
{
    if (rq->source_sizes == NULL)
        return;                       /* none kept: each translation learns it again */
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);       /* the translation's own error stays its */
    for (Py_ssize_t i = 0; sources != NULL && i < PyList_GET_SIZE(sources); i++) {
        PyObject *src = PyList_GET_ITEM(sources, i);
        PyObject *rec = PyList_New(3);
        if (rec == NULL)
            break;
        PyList_SET_ITEM(rec, 0, Py_NewRef(Py_None));
        PyList_SET_ITEM(rec, 1, PyLong_FromLong(0));
        PyList_SET_ITEM(rec, 2, Py_NewRef(Py_True));
        if (PyList_GET_ITEM(rec, 1) == NULL || PyDict_SetItem(rq->source_sizes, src, rec) < 0
            || (rq->kept_static == NULL && (rq->kept_static = PyList_New(0)) == NULL)
            || PyList_Append(rq->kept_static, src) < 0) {
            Py_DECREF(rec);
            break;
        }
        Py_DECREF(rec);
    }
    PyErr_Clear();
    PyErr_Restore(et, ev, tb);
}

/* (contract: translator.h) */
TranslateStatus translate_frame(TranslateRequest *rq, GuardSet *gs, Plan *plan,
                                PyObject **reason, bool *permanent)
{
    const FrameView *fv = rq->fv;
    PyObject *func = rq->func;
    rq->made_static = 0;
    rq->backend_ns = rq->graph_ns = rq->plan_ns = rq->guard_ticks = 0;
    rq->attempts = 0;
    rq->now_dynamic = rq->kept_static = NULL;
    *reason = NULL;
    *permanent = false;
    if (!PyFunction_Check(func)) {
        *reason = PyUnicode_FromString("frame without a function object");
        *permanent = true;
        return *reason ? TRANSLATE_UNSUPPORTED : TRANSLATE_ERROR;
    }
    const char *why = fv->code->co_flags & CO_GENERATOR ? "generator function"
                      : tr_code_unsupported_reason(fv->code);
    if (why != NULL) {
        *reason = PyUnicode_FromString(why);
        *permanent = true;
        return *reason ? TRANSLATE_UNSUPPORTED : TRANSLATE_ERROR;
    }
    if (tensorops_init() < 0)
        return TRANSLATE_ERROR;
    /* Automatic dynamic: when numbers taken as graph inputs stop tracing,
       or with ints or sizes so taken the frame ends at a break (on one of
       them, maybe: a loop counter, range(n), min(x.shape)), the probe stops
       before the backend, and the static translation is made instead --
       kept unless it stops just where the probe did (then the ints were
       not the cause: the dynamic one again); the slots so stay static for
       this frame. */
    Attempt a = {.probe = true};
    TranslateStatus st = translate_retrying(rq, gs, plan, reason, permanent, &a);
    bool unsupported = st == TRANSLATE_UNSUPPORTED && a.stop_kind == NULL
                       && (a.dyn_used != 0 || a.dyn_sources != NULL);
    if ((a.stop_kind == NULL && !unsupported) || st == TRANSLATE_ERROR) {
        Py_CLEAR(a.dyn_sources);
        return st;
    }
    const char *dyn_kind = a.stop_kind;
    int dyn_offset = a.stop_offset;
    uint64_t used = unsupported ? a.dyn_used : a.dyn_used_exact;
    PyObject *used_sources = a.dyn_sources;      /* strong */
    discard_translation(reason, permanent);
    a = (Attempt){.all_static = true};
    st = translate_retrying(rq, gs, plan, reason, permanent, &a);
    Py_CLEAR(a.dyn_sources);                     /* none: all static */
    bool same_stop = dyn_kind != NULL && st == TRANSLATE_OK && plan->exit != EXIT_RETURN
                     && plan->brk.kind != NULL && strcmp(plan->brk.kind, dyn_kind) == 0
                     && plan->brk.offset == dyn_offset;
    if (!same_stop) {
        rq->made_static = used;      /* the caller: static_only |= used, dynamic &= ~used */
        keep_sources_static(rq, used_sources);
        Py_XDECREF(used_sources);
        return st;
    }
    Py_XDECREF(used_sources);
    plan_clear(plan);
    guardset_clear(gs);
    guardset_init(gs);
    a = (Attempt){0};
    st = translate_retrying(rq, gs, plan, reason, permanent, &a);
    Py_CLEAR(a.dyn_sources);
    return st;
}
