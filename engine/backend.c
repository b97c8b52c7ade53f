/*
 * backend.c -- the backend registry and the built-in "eager" backend.
 *
 * A backend is any callable backend(gm, example_inputs) -> callable, as in
 * TorchDynamo; the callable it returns runs the graph on the cache-hit path.
 * Backends are named in a registry so optimize("eager") works; Python adds
 * its own with register_backend(name, fn).  Design: ../shared/DESIGN.md 3.7.
 *
 * Invariants:
 *   - The registry is a dict str -> callable, created by backend_init and
 *     never freed; "eager" is always in it (it may be replaced, not removed).
 *   - GIL held throughout; backend code may release it, so nothing here keeps
 *     a borrowed reference into the registry across a call into Python.
 */
#include "engine.h"

static PyObject *registry;     /* strong: dict name (str) -> backend callable */
static PyObject *eager_ref;    /* strong: the built-in eager backend function */

/* eager(gm, example_inputs) -> gm.forward: the C interpreter of graph.c. */
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
        names = registered_names();
        if (names == NULL)
            return NULL;
        PyErr_Format(PyExc_ValueError, "unknown backend %R; registered: %U",
                     backend, names);
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

/*
 * compiled = backend(gm, example_inputs) (example_inputs: a list).  New
 * reference to compiled, or NULL with the backend's own exception, or
 * TypeError "backend 'name' returned ..., expected a callable".
 */
PyObject *
backend_compile(PyObject *backend, PyObject *gm, PyObject *example_inputs)
{
    PyObject *args[2] = {gm, example_inputs};
    PyObject *compiled, *name;

    compiled = PyObject_Vectorcall(backend, args, 2, NULL);
    if (compiled == NULL || PyCallable_Check(compiled))
        return compiled;
    name = backend_display_name(backend);
    if (name != NULL) {
        if (compiled == Py_None)
            PyErr_Format(PyExc_TypeError,
                         "backend '%U' returned None, expected a callable", name);
        else
            PyErr_Format(PyExc_TypeError,
                         "backend '%U' returned an object of type '%.100s', "
                         "expected a callable", name, Py_TYPE(compiled)->tp_name);
        Py_DECREF(name);
    }
    Py_DECREF(compiled);
    return NULL;
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
 * Create the registry (once) with "eager" in it and add register_backend and
 * list_backends to `module`.  0, or -1 with an exception.
 */
int
backend_init(PyObject *module)
{
    PyObject *modname = PyModule_GetNameObject(module);

    if (modname == NULL)
        return -1;
    Py_XSETREF(eager_ref, PyCFunction_NewEx(&eager_def, NULL, modname));
    Py_DECREF(modname);
    if (eager_ref == NULL)
        return -1;
    if (registry == NULL) {
        registry = PyDict_New();
        if (registry == NULL)
            return -1;
    }
    if (PyDict_SetItemString(registry, "eager", eager_ref) < 0)
        return -1;
    return PyModule_AddFunctions(module, backend_functions);
}
