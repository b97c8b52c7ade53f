/*
 * graph_reduce.c -- NumPy's reduction functions run as the ufunc
 * reduction they call: `np.sum(a)`, `np.max(a, axis)`, `a.prod()`,
 * `a.min(axis=1)` on an exact ndarray run `np.add.reduce(a, axis)` (and
 * multiply, maximum, minimum).
 *
 * Why: in NumPy's own source, np.sum(a) is _wrapreduction(a, np.add,
 * 'sum', axis, None, None, keepdims=_NoValue, ...), which builds a dict of
 * the keywords not given and, for an exact ndarray, returns
 * np.add.reduce(a, axis, None, None); ndarray.sum is _methods._sum, which
 * returns np.add.reduce(a, axis, None, None, False, _NoValue, True).  The
 * wrapping costs ~1 us per call (np.sum of 10k float64 is ~3.8 us, the
 * reduce it runs ~2.5 us); eager code pays it, a graph need not.
 *
 * Invariants: only the forms without dtype, out, keepdims, initial or
 * where (the array, and an axis given by position or as `axis=`), whose
 * reduce is the same call with those left at their defaults; only when the
 * array operand is an exact ndarray on this run (a subclass, a list or a
 * torch tensor takes the node's own call: _wrapreduction would call its
 * method).  The function is matched by identity with numpy's own at
 * compile time, the method by name on an exact ndarray at run time.
 */
#include "graph_int.h"
#include "../base/tensorlib.h"

#include <string.h>

/* A METH_FASTCALL | METH_KEYWORDS C function (CPython's
   _PyCFunctionFastWithKeywords, spelled without its underscore from 3.13). */
typedef PyObject *(*FastCallKeywords)(PyObject *, PyObject *const *, Py_ssize_t, PyObject *);

/* The reductions: numpy's function names (and their aliases), the method
   name, the ufunc. */
static const struct ReduceForm {
    const char *function, *alias, *method, *ufunc;
} reduce_forms[] = {
    {"sum", NULL, "sum", "add"},
    {"prod", NULL, "prod", "multiply"},
    {"max", "amax", "max", "maximum"},
    {"min", "amin", "min", "minimum"},
    {NULL, NULL, NULL, NULL},
};

/* numpy.<name>, looked up by the caller's module; new reference or NULL
   (never an exception). */
static PyObject *
numpy_attr(const char *name)
{
    PyObject *np = tensorlib_numpy();                        /* borrowed */
    PyObject *v = np != NULL && name != NULL ? PyObject_GetAttrString(np, name) : NULL;

    PyErr_Clear();
    return v;
}

/* Whether node target fn is numpy's function `name`. */
static bool
is_numpy_function(PyObject *fn, const char *name)
{
    PyObject *f = numpy_attr(name);
    bool same = f != NULL && f == fn;

    Py_XDECREF(f);
    return same;
}

/* Whether the instruction passes nothing but the array and an axis (by
   position, or as the one keyword `axis`). */
static bool
only_axis(const Instr *in)
{
    if (in->nargs + in->nkw > 2 || in->nargs < 1 || in->nested)
        return false;
    if (in->nkw == 0)
        return true;
    PyObject *kw = PyTuple_GET_ITEM(in->kwnames, 0);         /* borrowed */
    return PyUnicode_Check(kw) && PyUnicode_CompareWithASCIIString(kw, "axis") == 0;
}

/* See graph_int.h. */
void
reduce_plan(Instr *in)
{
    const struct ReduceForm *f;

    in->reduce = NULL;
    if (!only_axis(in) || tensorlib_ndarray_type() == NULL)
        return;
    for (f = reduce_forms; f->function != NULL; f++) {
        if (in->op == NODE_CALL_FUNCTION
            && (is_numpy_function(in->target, f->function)
                || (f->alias != NULL && is_numpy_function(in->target, f->alias))))
            break;
        if (in->op == NODE_CALL_METHOD && PyUnicode_Check(in->target)
            && PyUnicode_CompareWithASCIIString(in->target, f->method) == 0)
            break;
    }
    if (f->function == NULL)
        return;
    PyObject *ufunc = numpy_attr(f->ufunc);
    in->reduce = ufunc != NULL ? PyObject_GetAttrString(ufunc, "reduce") : NULL;
    Py_XDECREF(ufunc);
    PyErr_Clear();
}

/* See graph_int.h. */
PyObject *
reduce_run(const Instr *in, PyObject *const *argv, bool *ran)
{
    PyObject *args[3];

    *ran = Py_IS_TYPE(argv[0], tensorlib_ndarray_type());
    if (!*ran)
        return NULL;
    args[1] = argv[0];
    args[2] = in->nargs + in->nkw == 2 ? argv[1] : Py_None;     /* the axis */
    if (PyCFunction_Check(in->reduce)
        && (PyCFunction_GET_FLAGS(in->reduce) & (METH_FASTCALL | METH_KEYWORDS | METH_METHOD))
           == (METH_FASTCALL | METH_KEYWORDS)) {
        /* The C function itself, as the interpreter's specialized CALL runs
           a.sum()'s: a vectorcall of the bound method would count one more
           level toward the recursion limit than eager code does. */
        FastCallKeywords fn = (FastCallKeywords)(void (*)(void))PyCFunction_GET_FUNCTION(in->reduce);
        return fn(PyCFunction_GET_SELF(in->reduce), args + 1, 2, NULL);
    }
    return PyObject_Vectorcall(in->reduce, args + 1, 2 | PY_VECTORCALL_ARGUMENTS_OFFSET,
                               NULL);
}
