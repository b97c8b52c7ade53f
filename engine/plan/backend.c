/*
 * backend.c -- the backend registry, the built-in "eager" and "fx"
 * backends, and calling backends.
 *
 * A backend is any callable backend(gm, example_inputs) -> callable, as in
 * TorchDynamo; the callable it returns runs the graph on the cache-hit path.
 * Backends are named in a registry so optimize("eager") works; Python adds
 * its own with register_backend(name, fn).  With torch imported, a name the
 * registry lacks is looked up among torch._dynamo's backends
 * (optimize("aot_eager")).  Design: ../shared/DESIGN.md 3.7.
 *
 * torch.fx: a graph that computes on torch tensors reaches every backend
 * but the built-in eager one as a real torch.fx.GraphModule, converted by
 * dynscope._fx.compile_with (Python: fx is a Python library), so a
 * Dynamo-style my_compiler, fx passes and torch.compile backends work
 * unchanged.  "eager" keeps dynscope's own GraphModule and C interpreter:
 * converting would cost fx's code generation per compile and a Python
 * forward per call.
 *
 * Invariants:
 *   - The registry is a dict str -> callable, created by backend_init and
 *     never freed; "eager" and "fx" are always in it (they may be replaced,
 *     not removed).
 *   - GIL held throughout; backend code may release it, so nothing here keeps
 *     a borrowed reference into the registry across a call into Python.
 *   - torch and dynscope._fx are never imported here unless torch already is.
 */
#include "plan.h"
#include "../base/tensorlib.h"

static PyObject *registry;     /* strong: dict name (str) -> backend callable */
static PyObject *eager_ref;    /* strong: the built-in eager backend function */
static PyObject *fx_ref;       /* strong: the built-in fx backend function */
static PyObject *failed_error; /* strong: dynscope.BackendCompilerFailed */

/* Types of backends that wrap another one (explain's ExplainBackend), with
   how to reach the wrapped backend: registered by the layers above. */
#define MAX_WRAPPER_TYPES 4
static struct {
    PyTypeObject *type;                    /* borrowed: kept by its module */
    PyObject *(*inner)(PyObject *backend); /* borrowed result or NULL */
} wrapper_types[MAX_WRAPPER_TYPES];
static int nwrapper_types;

int backend_register_wrapper(PyTypeObject *type, PyObject *(*inner)(PyObject *backend))
{
    if (nwrapper_types == MAX_WRAPPER_TYPES) {
        PyErr_SetString(PyExc_RuntimeError, "too many backend wrapper types");
        return -1;
    }
    wrapper_types[nwrapper_types].type = type;
    wrapper_types[nwrapper_types].inner = inner;
    nwrapper_types++;
    return 0;
}

/* The backend `backend` wraps (borrowed), or NULL when it wraps none. */
static PyObject *wrapped_backend(PyObject *backend)
{
    for (int i = 0; i < nwrapper_types; i++)
        if (Py_IS_TYPE(backend, wrapper_types[i].type))
            return wrapper_types[i].inner(backend);
    return NULL;
}

/* eager(gm, example_inputs) -> gm.forward: the C interpreter of graph_program.c. */
static PyObject *
backend_eager(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError,
                     "eager() takes 2 arguments (gm, example_inputs), got %zd",
                     nargs);
        return NULL;
    }
    return PyObject_GetAttrString(args[0], "forward");
}

static PyMethodDef eager_def = {
    "eager", (PyCFunction)(void (*)(void))backend_eager, METH_FASTCALL,
    "eager(gm, example_inputs) -> gm.forward\n\n"
    "The built-in backend: runs captured graphs with dynscope's C interpreter.",
};

/* dynscope._fx.<fn>(*args).  New reference or NULL. */
static PyObject *
call_fx(const char *fn, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *mod = PyImport_ImportModule("dynscope._fx"), *f, *res;

    if (mod == NULL)
        return NULL;
    f = PyObject_GetAttrString(mod, fn);
    Py_DECREF(mod);
    if (f == NULL)
        return NULL;
    res = PyObject_Vectorcall(f, args, (size_t)nargs, NULL);
    Py_DECREF(f);
    return res;
}

/* fx(gm, example_inputs) -> the torch.fx GraphModule's forward. */
static PyObject *
backend_fx(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    int r;

    (void)self;
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError,
                     "fx() takes 2 arguments (gm, example_inputs), got %zd", nargs);
        return NULL;
    }
    if ((r = tensorlib_torch_imported()) <= 0) {
        if (r == 0)
            PyErr_SetString(PyExc_RuntimeError,
                            "the fx backend needs torch (import torch first)");
        return NULL;
    }
    return call_fx("fx_backend", args, 2);
}

static PyMethodDef fx_def = {
    "fx", (PyCFunction)(void (*)(void))backend_fx, METH_FASTCALL,
    "fx(gm, example_inputs) -> torch.fx.GraphModule(...).forward\n\n"
    "Runs captured graphs as torch.fx GraphModules (their generated Python forward).",
};

/* ", "-joined sorted registry names.  New str or NULL. */
static PyObject *
registered_names(void)
{
    PyObject *names = PyDict_Keys(registry), *sep, *res = NULL;

    if (names == NULL)
        return NULL;
    sep = PyUnicode_FromString(", ");
    if (sep != NULL && PyList_Sort(names) == 0)
        res = PyUnicode_Join(sep, names);
    Py_XDECREF(sep);
    Py_DECREF(names);
    return res;
}

/* A torch._dynamo backend named `name` when torch is imported: new
   reference; Py_None (new reference) when there is none; NULL on error. */
static PyObject *
torch_backend_ref(PyObject *name)
{
    int r = tensorlib_torch_imported();

    if (r <= 0)
        return r < 0 ? NULL : Py_NewRef(Py_None);
    return call_fx("lookup_torch_backend", &name, 1);
}

/*
 * What optimize(backend=...) accepts: a callable as is, or a registered name.
 * New reference, or NULL with ValueError "unknown backend 'x'; registered:
 * eager, ..." or TypeError for anything else.
 */
PyObject *
backend_resolve(PyObject *backend)
{
    PyObject *fn, *names;

    ENGINE_ASSERT(registry != NULL);
    if (PyUnicode_Check(backend)) {
        fn = PyDict_GetItemWithError(registry, backend);    /* borrowed */
        if (fn != NULL)
            return Py_NewRef(fn);
        if (PyErr_Occurred())
            return NULL;
        fn = torch_backend_ref(backend);
        if (fn != Py_None)
            return fn;              /* a torch._dynamo backend, or NULL */
        Py_DECREF(fn);
        names = registered_names();
        if (names == NULL)
            return NULL;
        PyErr_Format(PyExc_ValueError, "unknown backend %R; registered: %U%s",
                     backend, names, tensorlib_torch_imported() == 1
                     ? " (and torch._dynamo.list_backends())" : "");
        Py_DECREF(names);
        return NULL;
    }
    if (PyCallable_Check(backend))
        return Py_NewRef(backend);
    PyErr_Format(PyExc_TypeError,
                 "backend must be a callable or the name of a registered "
                 "backend, not %.100s", Py_TYPE(backend)->tp_name);
    return NULL;
}

/* How error messages name a backend: its registry name, else its
   __qualname__ / __name__, else its repr.  New str or NULL. */
static PyObject *
backend_display_name(PyObject *backend)
{
    Py_ssize_t pos = 0;
    PyObject *key, *value, *name;

    while (PyDict_Next(registry, &pos, &key, &value))
        if (value == backend)
            return Py_NewRef(key);
    name = PyObject_GetAttrString(backend, "__qualname__");
    if (name == NULL) {
        PyErr_Clear();
        name = PyObject_GetAttrString(backend, "__name__");
    }
    if (name != NULL && PyUnicode_Check(name))
        return name;
    Py_XDECREF(name);
    PyErr_Clear();
    return PyObject_Repr(backend);
}

/* The backend that does the work: wrappers (ExplainBackend) unwrapped
   (borrowed). */
static PyObject *innermost_backend(PyObject *backend)
{
    for (int depth = 0; depth < 16; depth++) {
        PyObject *inner = wrapped_backend(backend);
        if (inner == NULL)
            break;
        backend = inner;
    }
    return backend;
}

/* Replace the backend's exception (an Exception, not a KeyboardInterrupt)
   with BackendCompilerFailed "backend 'name' raised Type: message", its
   __cause__ the original: the frame's skip reason then names the backend,
   not the translation, and a repro can find it (dynscope/repro.py). */
static void raise_failed(PyObject *backend)
{
    if (!PyErr_ExceptionMatches(PyExc_Exception) || PyErr_ExceptionMatches(failed_error))
        return;                        /* a backend around a backend already said it */
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (tb != NULL && value != NULL)
        PyException_SetTraceback(value, tb);
    PyObject *name = backend_display_name(innermost_backend(backend));
    if (name != NULL && value != NULL) {
        PyErr_Format(failed_error, "backend '%U' raised %s: %S", name,
                     ((PyTypeObject *)type)->tp_name, value);
        PyObject *t2, *v2, *tb2;
        PyErr_Fetch(&t2, &v2, &tb2);
        PyErr_NormalizeException(&t2, &v2, &tb2);
        if (v2 != NULL)
            PyException_SetCause(v2, Py_NewRef(value));      /* steals the new reference */
        PyErr_Restore(t2, v2, tb2);
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
    }
    else if (name == NULL)
        Py_XDECREF(type), Py_XDECREF(value), Py_XDECREF(tb);   /* name's error stands */
    else
        PyErr_Restore(type, value, tb);
    Py_XDECREF(name);
}

/*
 * compiled = backend(gm, example_inputs) (example_inputs: a list).  New
 * reference to compiled, or NULL with BackendCompilerFailed "backend 'name'
 * raised ...: ..." (the backend's Exception as its __cause__) or "backend
 * 'name' returned ..., expected a callable"; a BaseException (a
 * KeyboardInterrupt) as it is.
 */
/* See plan.h. */
bool
backend_is_native(PyObject *backend)
{
    for (int depth = 0; backend != NULL && depth < 16; depth++) {
        if (backend == eager_ref)
            return true;
        backend = wrapped_backend(backend);   /* the wrapper keeps it alive */
    }
    return false;
}

PyObject *
backend_compile(PyObject *backend, PyObject *gm, PyObject *example_inputs)
{
    PyObject *args[3] = {backend, gm, example_inputs};
    PyObject *compiled, *name;
    int torch;

    if (backend_is_native(backend) || (torch = tensorlib_torch_imported()) == 0)
        compiled = PyObject_Vectorcall(backend, args + 1, 2, NULL);
    else if (torch < 0)
        return NULL;
    else    /* torch graphs reach the backend as torch.fx GraphModules */
        compiled = call_fx("compile_with", args, 3);
    if (compiled == NULL)
        raise_failed(backend);
    if (compiled == NULL || PyCallable_Check(compiled))
        return compiled;
    name = backend_display_name(innermost_backend(backend));
    if (name != NULL) {
        if (compiled == Py_None)
            PyErr_Format(failed_error,
                         "backend '%U' returned None, expected a callable", name);
        else
            PyErr_Format(failed_error,
                         "backend '%U' returned an object of type '%.100s', "
                         "expected a callable", name, Py_TYPE(compiled)->tp_name);
        Py_DECREF(name);
    }
    Py_DECREF(compiled);
    return NULL;
}

PyObject *
backend_failed_error(void)
{
    return failed_error;
}

/* The "eager" builtin function object (new reference).  Cannot fail after
   backend_init. */
PyObject *
backend_eager_ref(void)
{
    ENGINE_ASSERT(eager_ref != NULL);
    return Py_NewRef(eager_ref);
}

/* register_backend(name, fn) -> fn: add or replace a named backend. */
static PyObject *
py_register_backend(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError,
                     "register_backend() takes 2 arguments (name, fn), got %zd",
                     nargs);
        return NULL;
    }
    if (!PyUnicode_Check(args[0])) {
        PyErr_Format(PyExc_TypeError, "backend name must be a str, not %.100s",
                     Py_TYPE(args[0])->tp_name);
        return NULL;
    }
    if (!PyCallable_Check(args[1])) {
        PyErr_Format(PyExc_TypeError, "backend must be callable, not %.100s",
                     Py_TYPE(args[1])->tp_name);
        return NULL;
    }
    if (PyDict_SetItem(registry, args[0], args[1]) < 0)
        return NULL;
    return Py_NewRef(args[1]);
}

/* list_backends() -> sorted list of registered names. */
static PyObject *
py_list_backends(PyObject *module, PyObject *unused)
{
    PyObject *names = PyDict_Keys(registry);

    (void)module;
    (void)unused;
    if (names != NULL && PyList_Sort(names) < 0)
        Py_CLEAR(names);
    return names;
}

static PyMethodDef backend_functions[] = {
    {"register_backend", (PyCFunction)(void (*)(void))py_register_backend,
     METH_FASTCALL,
     "register_backend(name, fn) -> fn\n\n"
     "Register fn(gm, example_inputs) -> callable under name, for optimize(name)."},
    {"list_backends", py_list_backends, METH_NOARGS,
     "list_backends() -> sorted list of registered backend names."},
    {NULL, NULL, 0, NULL},
};

/*
 * Create the registry (once) with "eager" and "fx" in it and add
 * register_backend and list_backends to `module`.  0, or -1 with an
 * exception.
 */
int
backend_init(PyObject *module)
{
    PyObject *modname = PyModule_GetNameObject(module);

    if (modname == NULL)
        return -1;
    Py_XSETREF(eager_ref, PyCFunction_NewEx(&eager_def, NULL, modname));
    Py_XSETREF(fx_ref, PyCFunction_NewEx(&fx_def, NULL, modname));
    Py_DECREF(modname);
    if (eager_ref == NULL || fx_ref == NULL)
        return -1;
    if (registry == NULL) {
        registry = PyDict_New();
        if (registry == NULL)
            return -1;
    }
    if (failed_error == NULL) {
        failed_error = PyErr_NewExceptionWithDoc(
            "dynscope.BackendCompilerFailed",
            "A backend raised while compiling a captured graph, or returned no "
            "callable.  The frame then runs without capture; this is its skip "
            "reason (type DS0033), with the backend's own exception as __cause__.",
            PyExc_RuntimeError, NULL);
        if (failed_error == NULL)
            return -1;
    }
    if (PyModule_AddObjectRef(module, "BackendCompilerFailed", failed_error) < 0)
        return -1;
    if (PyDict_SetItemString(registry, "eager", eager_ref) < 0
        || PyDict_SetItemString(registry, "fx", fx_ref) < 0)
        return -1;
    return PyModule_AddFunctions(module, backend_functions);
}
