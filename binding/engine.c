/*
 * engine.c -- the engine's part of the dynscope._C module (binding/, on top
 * of every room of engine/): optimize()
 * regions (as a decorator and as a context manager), configuration,
 * reset(), cache_entries(), counters, and the initialisation of every
 * engine file (binding/module.c creates the module).
 *
 * Invariants: an OptimizeContext is immutable after creation (backend and
 * flags), so one context may be entered by several threads at once; the
 * per-thread stack of regions lives in hook.c.
 */
#include "../engine/engine.h"
#include "binding.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <structmember.h>
#include <string.h>

static const char *const stance_names[] = {
    [STANCE_DEFAULT] = "default",
    [STANCE_FAIL_ON_RECOMPILE] = "fail_on_recompile",
    [STANCE_EAGER_ON_RECOMPILE] = "eager_on_recompile",
    [STANCE_FORCE_EAGER] = "force_eager",
    [STANCE_EAGER_THEN_COMPILE] = "eager_then_compile",
};

/* ---- OptimizeContext ---- */

typedef struct {
    PyObject_HEAD
    PyObject *backend;        /* strong: resolved backend callable */
    bool fullgraph;
    int dynamic;              /* CaptureConfig.dynamic */
} OptimizeContext;

/* The wrapper optimize(...)(fn) returns: calls fn inside a capture region. */
typedef struct {
    PyObject_HEAD
    PyObject *fn;             /* strong: the wrapped callable */
    OptimizeContext *ctx;     /* strong */
    PyObject *dict;           /* strong: __dict__ (functools.wraps writes here) */
    vectorcallfunc vectorcall;
} OptimizedFunction;

static PyTypeObject *OptimizeContextType;
static PyObject *optimized_vectorcall(PyObject *self, PyObject *const *args,
                                      size_t nargsf, PyObject *kwnames);
static PyTypeObject *OptimizedFunctionType;

/* Enter ctx's region; fn (or NULL) is the function it wraps. */
static int region_enter(OptimizeContext *ctx, PyObject *fn)
{
    CaptureConfig cfg = {ctx->backend, ctx->fullgraph, ctx->dynamic,
                         fn ? capture_root_code(fn) : NULL};
    return capture_enter(&cfg);
}

static PyObject *ctx_new(PyTypeObject *tp, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"backend", "fullgraph", "dynamic", NULL};
    PyObject *backend = NULL, *dynamic = Py_None;
    int fullgraph = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|$pO:OptimizeContext", kwlist,
                                     &backend, &fullgraph, &dynamic))
        return NULL;
    if (dynamic != Py_None && !PyBool_Check(dynamic)) {
        PyErr_Format(PyExc_TypeError, "dynamic must be None, True or False, not %.100s",
                     Py_TYPE(dynamic)->tp_name);
        return NULL;
    }
    PyObject *resolved = backend_resolve(backend);
    if (resolved == NULL)
        return NULL;
    OptimizeContext *ctx = (OptimizeContext *)tp->tp_alloc(tp, 0);
    if (ctx == NULL) {
        Py_DECREF(resolved);
        return NULL;
    }
    ctx->backend = resolved;
    ctx->fullgraph = fullgraph != 0;
    ctx->dynamic = dynamic == Py_None ? -1 : dynamic == Py_True;
    return (PyObject *)ctx;
}

static int ctx_traverse(OptimizeContext *ctx, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(ctx));
    Py_VISIT(ctx->backend);
    return 0;
}

static int ctx_clear(OptimizeContext *ctx)
{
    Py_CLEAR(ctx->backend);
    return 0;
}

static void ctx_dealloc(OptimizeContext *ctx)
{
    PyTypeObject *tp = Py_TYPE(ctx);
    PyObject_GC_UnTrack(ctx);
    ctx_clear(ctx);
    tp->tp_free((PyObject *)ctx);
    Py_DECREF(tp);
}

static PyObject *ctx_enter(OptimizeContext *ctx, PyObject *unused)
{
    (void)unused;
    if (region_enter(ctx, NULL) < 0)
        return NULL;
    return Py_NewRef(ctx);
}

static PyObject *ctx_exit(OptimizeContext *ctx, PyObject *const *args, Py_ssize_t nargs)
{
    (void)ctx;
    (void)args;
    (void)nargs;
    if (capture_state()->depth > 0)
        capture_exit();
    Py_RETURN_FALSE;
}

static PyObject *ctx_call(OptimizeContext *ctx, PyObject *args, PyObject *kwds)
{
    PyObject *fn;
    if (kwds != NULL && PyDict_GET_SIZE(kwds) > 0) {
        PyErr_SetString(PyExc_TypeError, "optimize(...)(fn) takes no keyword arguments");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "O:optimize(...)", &fn))
        return NULL;
    if (!PyCallable_Check(fn)) {
        PyErr_Format(PyExc_TypeError, "optimize(...) expects a callable, got %.100s",
                     Py_TYPE(fn)->tp_name);
        return NULL;
    }
    OptimizedFunction *of = PyObject_GC_New(OptimizedFunction, OptimizedFunctionType);
    if (of == NULL)
        return NULL;
    of->fn = Py_NewRef(fn);
    of->ctx = (OptimizeContext *)Py_NewRef(ctx);
    of->dict = NULL;
    of->vectorcall = optimized_vectorcall;
    PyObject_GC_Track(of);
    /* Look like the function: __name__, __doc__, __wrapped__ ... */
    PyObject *functools = PyImport_ImportModule("functools");
    PyObject *r = functools ? PyObject_CallMethod(functools, "update_wrapper", "OO", of, fn) : NULL;
    Py_XDECREF(functools);
    if (r == NULL) {
        Py_DECREF(of);
        return NULL;
    }
    Py_DECREF(r);
    return (PyObject *)of;
}

static PyObject *ctx_get_backend(OptimizeContext *ctx, void *c)
{
    (void)c;
    return Py_NewRef(ctx->backend);
}

static PyObject *ctx_get_fullgraph(OptimizeContext *ctx, void *c)
{
    (void)c;
    return PyBool_FromLong(ctx->fullgraph);
}

static PyObject *ctx_get_dynamic(OptimizeContext *ctx, void *c)
{
    (void)c;
    return Py_NewRef(ctx->dynamic < 0 ? Py_None : ctx->dynamic ? Py_True : Py_False);
}

static PyMethodDef ctx_methods[] = {
    {"__enter__", (PyCFunction)ctx_enter, METH_NOARGS, "Start capturing on this thread."},
    {"__exit__", (PyCFunction)(void (*)(void))ctx_exit, METH_FASTCALL, "Stop capturing on this thread."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef ctx_getset[] = {
    {"backend", (getter)ctx_get_backend, NULL, "the backend graphs are compiled with", NULL},
    {"fullgraph", (getter)ctx_get_fullgraph, NULL, "whether a graph break raises", NULL},
    {"dynamic", (getter)ctx_get_dynamic, NULL,
     "None: automatic dynamic (numbers become graph inputs after a recompile on "
     "their value); True: from the start; False: always static", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot ctx_slots[] = {
    {Py_tp_new, ctx_new},
    {Py_tp_dealloc, ctx_dealloc},
    {Py_tp_traverse, ctx_traverse},
    {Py_tp_clear, ctx_clear},
    {Py_tp_call, ctx_call},
    {Py_tp_methods, ctx_methods},
    {Py_tp_getset, ctx_getset},
    {Py_tp_doc, "OptimizeContext(backend, *, fullgraph=False, dynamic=None)\n--\n\n"
                "A capture region: use as a decorator or a context manager."},
    {0, NULL},
};

static PyType_Spec ctx_spec = {
    .name = "dynscope._C.OptimizeContext",
    .basicsize = sizeof(OptimizeContext),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .slots = ctx_slots,
};

/* ---- OptimizedFunction ---- */

static PyObject *optimized_vectorcall(PyObject *self, PyObject *const *args,
                                      size_t nargsf, PyObject *kwnames)
{
    OptimizedFunction *of = (OptimizedFunction *)self;
    OptimizeContext *ctx = (OptimizeContext *)Py_NewRef(of->ctx);
    PyObject *fn = Py_NewRef(of->fn);
    bool done;
    PyObject *result = capture_call_direct(fn, args, nargsf, kwnames, ctx->backend, &done);
    if (done) {                 /* a hit that needed no frame */
        Py_DECREF(fn);
        Py_DECREF(ctx);
        return result;
    }
    if (region_enter(ctx, fn) == 0) {
        result = PyObject_Vectorcall(fn, args, nargsf, kwnames);
        capture_exit();
    }
    Py_DECREF(fn);
    Py_DECREF(ctx);
    return result;
}

static int of_traverse(OptimizedFunction *of, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(of));
    Py_VISIT(of->fn);
    Py_VISIT(of->ctx);
    Py_VISIT(of->dict);
    return 0;
}

static int of_clear(OptimizedFunction *of)
{
    Py_CLEAR(of->fn);
    Py_CLEAR(of->ctx);
    Py_CLEAR(of->dict);
    return 0;
}

static void of_dealloc(OptimizedFunction *of)
{
    PyTypeObject *tp = Py_TYPE(of);
    PyObject_GC_UnTrack(of);
    of_clear(of);
    tp->tp_free((PyObject *)of);
    Py_DECREF(tp);
}

/* Decorated methods bind like functions. */
static PyObject *of_descr_get(PyObject *self, PyObject *obj, PyObject *type)
{
    (void)type;
    if (obj == NULL || obj == Py_None)
        return Py_NewRef(self);
    return PyMethod_New(self, obj);
}

static PyObject *of_repr(OptimizedFunction *of)
{
    return PyUnicode_FromFormat("<dynscope optimized %R>", of->fn);
}

static PyObject *of_get_context(OptimizedFunction *of, void *c)
{
    (void)c;
    return Py_NewRef(of->ctx);
}

static PyObject *of_get_orig(OptimizedFunction *of, void *c)
{
    (void)c;
    return Py_NewRef(of->fn);
}

/* Pickled by reference, as a function is: the module attribute named by
   __module__ and __qualname__ (set by functools.update_wrapper), which for a
   decorated function is this wrapper.  Pool.map(f, ...) sends f this way. */
static PyObject *of_reduce(PyObject *self, PyObject *unused)
{
    (void)unused;
    return PyObject_GetAttrString(self, "__qualname__");
}

static PyMethodDef of_methods[] = {
    {"__reduce__", of_reduce, METH_NOARGS, "Pickle by module and qualified name, as a function."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef of_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {"_dynscope_context", (getter)of_get_context, NULL, "the OptimizeContext", NULL},
    {"_dynscope_orig", (getter)of_get_orig, NULL, "the wrapped callable", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef of_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(OptimizedFunction, vectorcall), READONLY, NULL},
    {"__dictoffset__", T_PYSSIZET, offsetof(OptimizedFunction, dict), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot of_slots[] = {
    {Py_tp_dealloc, of_dealloc},
    {Py_tp_traverse, of_traverse},
    {Py_tp_clear, of_clear},
    {Py_tp_call, PyVectorcall_Call},
    {Py_tp_descr_get, of_descr_get},
    {Py_tp_repr, of_repr},
    {Py_tp_getset, of_getset},
    {Py_tp_methods, of_methods},
    {Py_tp_members, of_members},
    {Py_tp_doc, "A function wrapped by dynscope.optimize(); calls capture."},
    {0, NULL},
};

static PyType_Spec of_spec = {
    .name = "dynscope._C.OptimizedFunction",
    .basicsize = sizeof(OptimizedFunction),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL
             | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = of_slots,
};

/* ---- module functions ---- */

/* The code object behind fn: a function, a bound method, an optimized
   wrapper, or a code object.  Borrowed, or NULL with TypeError. */
static PyCodeObject *code_of(PyObject *obj)
{
    for (int depth = 0; depth < 8; depth++) {
        if (PyCode_Check(obj))
            return (PyCodeObject *)obj;
        if (PyFunction_Check(obj))
            return (PyCodeObject *)PyFunction_GET_CODE(obj);
        if (PyMethod_Check(obj)) {
            obj = PyMethod_GET_FUNCTION(obj);
            continue;
        }
        if (Py_IS_TYPE(obj, OptimizedFunctionType)) {
            obj = ((OptimizedFunction *)obj)->fn;
            continue;
        }
        break;
    }
    PyErr_Format(PyExc_TypeError, "expected a function or code object, got %.100s",
                 Py_TYPE(obj)->tp_name);
    return NULL;
}

static PyObject *py_cache_entries(PyObject *self, PyObject *fn)
{
    (void)self;
    PyCodeObject *co = code_of(fn);
    if (co == NULL)
        return NULL;
    return cache_entries_list(cache_peek(co));
}

static PyObject *py_code_status(PyObject *self, PyObject *fn)
{
    (void)self;
    PyCodeObject *co = code_of(fn);
    if (co == NULL)
        return NULL;
    CodeCache *cc = cache_peek(co);
    if (cc == NULL)
        return Py_BuildValue("{s:O,s:O,s:i,s:O}", "code_id", Py_None, "skip_reason", Py_None,
                             "misses", 0, "last_failure", Py_None);
    unsigned long long misses = 0;
    PyObject *last = Py_None;
    for (int i = 0; i < cc->nframes; i++) {
        misses += cc->frames[i]->misses;
        if (cc->frames[i]->last_failure)
            last = cc->frames[i]->last_failure;
    }
    return Py_BuildValue("{s:L,s:O,s:K,s:O}", "code_id", cc->code_id, "skip_reason",
                         cc->skip_reason ? cc->skip_reason : Py_None, "misses", misses,
                         "last_failure", last);
}

static PyObject *py_reset(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    capture_reset_all();
    graph_pool_clear();
    Py_RETURN_NONE;
}

/* kept_array_bytes(): the bytes of the arrays running graphs keep for
   reuse (engine/graph/graph_pool.c). */
static PyObject *py_kept_array_bytes(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return PyLong_FromSsize_t(graph_pool_bytes());
}

/* annotate(name, phase, fields_json): dynscope.annotate's event (the
   arguments checked in dynscope/annotate.py). */
static PyObject *py_annotate(PyObject *self, PyObject *args)
{
    (void)self;
    const char *name, *phase, *fields;
    if (!PyArg_ParseTuple(args, "sss:annotate", &name, &phase, &fields))
        return NULL;
    events_annotate(name, phase, fields);
    Py_RETURN_NONE;
}

static PyObject *py_counters(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    EngineCounters *c = &engine.counters;
    return Py_BuildValue("{s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K}", "frames_seen",
                         c->frames_seen, "hits", c->hits, "direct_hits", c->direct_hits,
                         "graph_frames", c->graph_frames, "eager_hits", c->eager_hits,
                         "misses", c->misses, "compiles", c->compiles,
                         "recompiles", c->recompiles, "skips", c->skips,
                         "cache_limits", c->cache_limits, "graph_breaks", c->graph_breaks,
                         "deopts", c->deopts);
}

static PyObject *py_hook_installed(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return PyBool_FromLong(hook_installed());
}

static PyObject *py_get_cache_size_limit(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return PyLong_FromLong(engine.config.cache_size_limit);
}

static PyObject *py_set_cache_size_limit(PyObject *self, PyObject *arg)
{
    (void)self;
    long v = PyLong_AsLong(arg);
    if (v == -1 && PyErr_Occurred())
        return NULL;
    if (v < 0 || v > 1000000) {
        PyErr_Format(PyExc_ValueError, "cache_size_limit must be between 0 and 1000000, got %ld", v);
        return NULL;
    }
    engine.config.cache_size_limit = (int)v;
    Py_RETURN_NONE;
}

static PyObject *py_get_accumulated_cache_size_limit(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return PyLong_FromLong(engine.config.accumulated_cache_size_limit);
}

static PyObject *py_set_accumulated_cache_size_limit(PyObject *self, PyObject *arg)
{
    (void)self;
    long v = PyLong_AsLong(arg);
    if (v == -1 && PyErr_Occurred())
        return NULL;
    if (v < 0 || v > 1000000)
        return PyErr_Format(PyExc_ValueError,
                            "accumulated_cache_size_limit must be between 0 and 1000000, got %ld", v);
    engine.config.accumulated_cache_size_limit = (int)v;
    Py_RETURN_NONE;
}

static PyObject *py_get_fail_on_cache_limit(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return PyBool_FromLong(engine.config.fail_on_cache_limit);
}

static PyObject *py_get_cache_limit_warning(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return PyBool_FromLong(engine.config.cache_limit_warning);
}

/* *flag = arg, a bool; else TypeError naming the setting `what`. */
static PyObject *set_bool_setting(PyObject *arg, const char *what, bool *flag)
{
    if (!PyBool_Check(arg)) {
        PyErr_Format(PyExc_TypeError, "%s must be a bool, got %.100s", what,
                     Py_TYPE(arg)->tp_name);
        return NULL;
    }
    *flag = arg == Py_True;
    Py_RETURN_NONE;
}

static PyObject *py_set_cache_limit_warning(PyObject *self, PyObject *arg)
{
    (void)self;
    return set_bool_setting(arg, "cache_limit_warning", &engine.config.cache_limit_warning);
}

static PyObject *py_set_fail_on_cache_limit(PyObject *self, PyObject *arg)
{
    (void)self;
    return set_bool_setting(arg, "fail_on_cache_limit", &engine.config.fail_on_cache_limit);
}

static PyObject *py_get_skip_tensorless_frames(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return PyBool_FromLong(engine.config.skip_tensorless_frames);
}

static PyObject *py_set_skip_tensorless_frames(PyObject *self, PyObject *arg)
{
    (void)self;
    return set_bool_setting(arg, "skip_tensorless_frames", &engine.config.skip_tensorless_frames);
}

static PyObject *py_get_cost_sampling(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return PyBool_FromLong(engine.config.cost_sampling);
}

static PyObject *py_set_cost_sampling(PyObject *self, PyObject *arg)
{
    (void)self;
    if (!PyBool_Check(arg)) {
        PyErr_Format(PyExc_TypeError, "cost_sampling must be a bool, got %s", Py_TYPE(arg)->tp_name);
        return NULL;
    }
    capture_set_cost_sampling(arg == Py_True);
    Py_RETURN_NONE;
}

/* _C.set_profiler_ranges(enter, exit): dynscope/profiler.py, when a torch
   profiler starts (torch's record_function ops) and stops (None, None). */
static PyObject *py_set_profiler_ranges(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *enter, *exit;
    if (!PyArg_ParseTuple(args, "OO:set_profiler_ranges", &enter, &exit))
        return NULL;
    if ((enter != Py_None && !PyCallable_Check(enter)) || (exit != Py_None && !PyCallable_Check(exit))) {
        PyErr_SetString(PyExc_TypeError, "set_profiler_ranges: callables or None");
        return NULL;
    }
    capture_set_profiler_ranges(enter, exit);
    Py_RETURN_NONE;
}

/* _C.profiler_ranges_on() -> bool: whether captured calls are ranges now. */
static PyObject *py_profiler_ranges_on(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return PyBool_FromLong(capture_profiler_ranges_on());
}

static PyObject *py_get_force_parameter_static_shapes(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return PyBool_FromLong(engine.config.force_parameter_static_shapes);
}

static PyObject *py_set_force_parameter_static_shapes(PyObject *self, PyObject *arg)
{
    (void)self;
    return set_bool_setting(arg, "force_parameter_static_shapes",
                            &engine.config.force_parameter_static_shapes);
}

/* A tuple of str from any sequence of str, or NULL with TypeError naming
   `what`. */
static PyObject *prefix_tuple(PyObject *arg, const char *what)
{
    PyObject *t = PySequence_Tuple(arg);
    if (t == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(t); i++) {
        if (!PyUnicode_Check(PyTuple_GET_ITEM(t, i))) {
            Py_DECREF(t);
            PyErr_Format(PyExc_TypeError, "%s must be strings", what);
            return NULL;
        }
    }
    return t;
}

static PyObject *py_set_skip_prefixes(PyObject *self, PyObject *arg)
{
    (void)self;
    PyObject *t = prefix_tuple(arg, "skip_prefixes");
    if (t == NULL)
        return NULL;
    Py_XSETREF(engine.config.skip_prefixes, t);
    Py_RETURN_NONE;
}

static PyObject *py_get_skip_prefixes(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return Py_NewRef(engine.config.skip_prefixes ? engine.config.skip_prefixes : Py_None);
}

static PyObject *py_set_capture_prefixes(PyObject *self, PyObject *arg)
{
    (void)self;
    PyObject *t = prefix_tuple(arg, "capture_prefixes");
    if (t == NULL)
        return NULL;
    Py_XSETREF(engine.config.capture_prefixes, t);
    Py_RETURN_NONE;
}

static PyObject *py_get_capture_prefixes(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return Py_NewRef(engine.config.capture_prefixes ? engine.config.capture_prefixes : Py_None);
}

static PyObject *py_set_stance(PyObject *self, PyObject *arg)
{
    (void)self;
    const char *name = PyUnicode_Check(arg) ? PyUnicode_AsUTF8(arg) : NULL;
    if (name == NULL && PyErr_Occurred())
        return NULL;
    for (size_t i = 0; name && i < sizeof(stance_names) / sizeof(stance_names[0]); i++) {
        if (strcmp(name, stance_names[i]) == 0) {
            engine.config.stance = (Stance)i;
            Py_RETURN_NONE;
        }
    }
    PyErr_Format(PyExc_ValueError, "dynscope: unknown stance %R; one of 'default', "
                 "'fail_on_recompile', 'eager_on_recompile', 'force_eager', "
                 "'eager_then_compile'", arg);
    return NULL;
}

static PyObject *py_get_stance(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return PyUnicode_FromString(stance_names[engine.config.stance]);
}

static PyObject *py_capture_depth(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return PyLong_FromLong(capture_state()->depth);
}

static PyMethodDef module_methods[] = {
    {"cache_entries", py_cache_entries, METH_O,
     "cache_entries(fn_or_code)\n--\n\nThe cache entries of a function, frame by frame in lookup order."},
    {"code_status", py_code_status, METH_O,
     "code_status(fn_or_code)\n--\n\nSkip reason, misses and last failing guard of a code object."},
    {"reset", py_reset, METH_NOARGS,
     "reset()\n--\n\nDrop every cache entry and skip mark, and the arrays kept for reuse."},
    {"kept_array_bytes", py_kept_array_bytes, METH_NOARGS,
     "kept_array_bytes()\n--\n\nBytes of the dead intermediate arrays graphs keep for reuse."},
    {"annotate", py_annotate, METH_VARARGS,
     "annotate(name, phase, fields_json)\n--\n\nEmit the program's mark (dynscope.annotate)."},
    {"counters", py_counters, METH_NOARGS, "counters()\n--\n\nThe engine's global counters."},
    {"hook_installed", py_hook_installed, METH_NOARGS,
     "hook_installed()\n--\n\nWhether the PEP 523 hook is installed right now."},
    {"capture_depth", py_capture_depth, METH_NOARGS,
     "capture_depth()\n--\n\nNesting depth of optimize() regions on this thread."},
    {"get_cache_size_limit", py_get_cache_size_limit, METH_NOARGS, NULL},
    {"set_cache_size_limit", py_set_cache_size_limit, METH_O, NULL},
    {"get_cache_limit_warning", py_get_cache_limit_warning, METH_NOARGS, NULL},
    {"get_accumulated_cache_size_limit", py_get_accumulated_cache_size_limit, METH_NOARGS, NULL},
    {"set_accumulated_cache_size_limit", py_set_accumulated_cache_size_limit, METH_O, NULL},
    {"get_fail_on_cache_limit", py_get_fail_on_cache_limit, METH_NOARGS, NULL},
    {"set_fail_on_cache_limit", py_set_fail_on_cache_limit, METH_O, NULL},
    {"get_skip_tensorless_frames", py_get_skip_tensorless_frames, METH_NOARGS, NULL},
    {"get_cost_sampling", py_get_cost_sampling, METH_NOARGS, NULL},
    {"set_cost_sampling", py_set_cost_sampling, METH_O, NULL},
    {"set_profiler_ranges", py_set_profiler_ranges, METH_VARARGS, NULL},
    {"profiler_ranges_on", py_profiler_ranges_on, METH_NOARGS, NULL},
    {"set_skip_tensorless_frames", py_set_skip_tensorless_frames, METH_O, NULL},
    {"get_force_parameter_static_shapes", py_get_force_parameter_static_shapes, METH_NOARGS, NULL},
    {"set_force_parameter_static_shapes", py_set_force_parameter_static_shapes, METH_O, NULL},
    {"set_cache_limit_warning", py_set_cache_limit_warning, METH_O, NULL},
    {"get_skip_prefixes", py_get_skip_prefixes, METH_NOARGS, NULL},
    {"set_skip_prefixes", py_set_skip_prefixes, METH_O, NULL},
    {"get_capture_prefixes", py_get_capture_prefixes, METH_NOARGS, NULL},
    {"set_stance", py_set_stance, METH_O, NULL},
    {"get_stance", py_get_stance, METH_NOARGS, NULL},
    {"set_capture_prefixes", py_set_capture_prefixes, METH_O, NULL},
    {NULL, NULL, 0, NULL},
};

int engine_module_init(PyObject *m)
{
    if (PyModule_AddFunctions(m, module_methods) < 0)
        return -1;
    engine_clock_init();
    engine.config.skip_prefixes = PyTuple_New(0);
    engine.config.capture_prefixes = PyTuple_New(0);
    if (engine.config.skip_prefixes == NULL || engine.config.capture_prefixes == NULL)
        return -1;
    OptimizeContextType = (PyTypeObject *)PyType_FromModuleAndSpec(m, &ctx_spec, NULL);
    OptimizedFunctionType = (PyTypeObject *)PyType_FromModuleAndSpec(m, &of_spec, NULL);
    if (OptimizeContextType == NULL || OptimizedFunctionType == NULL)
        return -1;
    if (PyModule_AddObjectRef(m, "OptimizeContext", (PyObject *)OptimizeContextType) < 0
        || PyModule_AddObjectRef(m, "OptimizedFunction", (PyObject *)OptimizedFunctionType) < 0)
        return -1;
    engine.unsupported_error = PyErr_NewExceptionWithDoc(
        "dynscope.Unsupported",
        "Raised under optimize(fullgraph=True) when a frame cannot be captured "
        "as one graph; the message names the reason and the user's file:line.",
        PyExc_RuntimeError, NULL);
    if (engine.unsupported_error == NULL || PyModule_AddObjectRef(m, "Unsupported", engine.unsupported_error) < 0)
        return -1;
    engine.recompile_error = PyErr_NewExceptionWithDoc(
        "dynscope.RecompileError",
        "Raised under set_stance('fail_on_recompile') when a captured frame would "
        "be compiled again; the message names the frame and its failing guard.",
        PyExc_RuntimeError, NULL);
    if (engine.recompile_error == NULL || PyModule_AddObjectRef(m, "RecompileError", engine.recompile_error) < 0)
        return -1;
    engine.cache_limit_error = PyErr_NewExceptionWithDoc(
        "dynscope.CacheLimitError",
        "Raised under config.fail_on_cache_limit when a frame reaches a cache limit; "
        "the message names the frame, the limit, its last failing guard and where "
        "that guard was made.",
        PyExc_RuntimeError, NULL);
    if (engine.cache_limit_error == NULL
        || PyModule_AddObjectRef(m, "CacheLimitError", engine.cache_limit_error) < 0)
        return -1;
    if (warn_init(m) < 0 || event_json_init(m) < 0 || event_log_init(m) < 0 || cache_init() < 0
        || cache_types_init(m) < 0 || graph_types_init(m) < 0 || backend_init(m) < 0
        || guards_types_init(m) < 0 || record_init(m) < 0 || breaks_init(m) < 0
        || hatch_init(m) < 0)
        return -1;
    return 0;
}
