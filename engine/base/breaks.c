/*
 * breaks.c -- the engine's side of the break-type registry (contract:
 * breaks.h; the table: event/break_types.c): which sites are installed code
 * (sysconfig's purelib, platlib, stdlib, platstdlib, read once), and the
 * table for Python (_C.break_types(), _C.break_type_of()).
 */
#include "breaks.h"

#include <string.h>

/* ---- installed code: sysconfig's purelib, platlib, stdlib, platstdlib ---- */

static PyObject *library_dirs;   /* strong: tuple of str ending in '/', once */

static PyObject *read_library_dirs(void)
{
    PyObject *sysconfig = PyImport_ImportModule("sysconfig");
    PyObject *paths = sysconfig ? PyObject_CallMethod(sysconfig, "get_paths", NULL) : NULL;
    PyObject *out = PyList_New(0);
    static const char *const keys[] = {"purelib", "platlib", "stdlib", "platstdlib"};
    for (size_t i = 0; out != NULL && paths != NULL && i < sizeof keys / sizeof keys[0]; i++) {
        PyObject *p = PyDict_Check(paths) ? PyDict_GetItemString(paths, keys[i]) : NULL;
        PyObject *dir = p && PyUnicode_Check(p) ? PyUnicode_FromFormat("%U/", p) : NULL;
        if (dir != NULL && PyList_Append(out, dir) < 0)
            Py_CLEAR(out);
        Py_XDECREF(dir);
    }
    Py_XDECREF(paths);
    Py_XDECREF(sysconfig);
    PyObject *t = out ? PyList_AsTuple(out) : NULL;
    Py_XDECREF(out);
    PyErr_Clear();
    return t ? t : PyTuple_New(0);
}

bool break_site_is_installed(PyObject *filename)
{
    if (filename == NULL || !PyUnicode_Check(filename))
        return false;
    if (library_dirs == NULL && (library_dirs = read_library_dirs()) == NULL) {
        PyErr_Clear();
        return false;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(library_dirs); i++) {
        int r = PyUnicode_Tailmatch(filename, PyTuple_GET_ITEM(library_dirs, i), 0,
                                    PY_SSIZE_T_MAX, -1);
        if (r == 1)
            return true;
        if (r < 0)
            PyErr_Clear();
    }
    return false;
}

BreakClass break_class_at(const BreakType *bt, PyObject *filename)
{
    if (bt->cls != BREAK_YOUR_CODE && bt->cls != BREAK_FUNDAMENTAL)
        return bt->cls;
    return break_site_is_installed(filename) ? BREAK_LIBRARY : bt->cls;
}

/* ---- Python ---- */

static PyObject *py_break_types(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    PyObject *list = PyList_New(0);
    const BreakType *t;
    for (size_t i = 0; list != NULL && (t = break_type_at(i)) != NULL; i++) {
        PyObject *d = Py_BuildValue("{s:s,s:s,s:s,s:s,s:s,s:s}", "id", t->id, "name", t->name,
                                    "class", break_class_name(t->cls), "explanation",
                                    t->explanation, "hint", t->hint, "example", t->example);
        if (d == NULL || PyList_Append(list, d) < 0)
            Py_CLEAR(list);
        Py_XDECREF(d);
    }
    return list;
}

/* break_type_of(kind, reason, filename=None) -> (id, name, class, hint) */
static PyObject *py_break_type_of(PyObject *self, PyObject *args)
{
    (void)self;
    const char *kind, *reason;
    PyObject *filename = Py_None;
    if (!PyArg_ParseTuple(args, "zs|O:break_type_of", &kind, &reason, &filename))
        return NULL;
    const BreakType *t = break_type_of(kind, reason);
    return Py_BuildValue("(ssss)", t->id, t->name, break_class_name(break_class_at(t, filename)),
                         t->hint);
}

static PyMethodDef methods[] = {
    {"break_types", py_break_types, METH_NOARGS, "The break-type registry (engine/breaks.c)."},
    {"break_type_of", py_break_type_of, METH_VARARGS,
     "break_type_of(kind, reason, filename=None) -> (id, name, class, hint)"},
    {NULL, NULL, 0, NULL},
};

int breaks_init(PyObject *module)
{
    return PyModule_AddFunctions(module, methods);
}
