/*
 * tr_partial.c -- functools.partial while translating (DESIGN.md 3.4;
 * contract: translate_int.h): calls of a partial the program holds, and
 * partials made by the traced code (V_PARTIAL).
 *
 * partial(func, *args, **kw)(*more, **more_kw) is
 * func(*args, *more, **{**kw, **more_kw}), which is how both kinds are
 * called: the call is inlined through func.
 *
 * Invariants:
 *   - a held partial (V_OBJECT of the exact type) is read through its
 *     accessor: its func, args and keywords are values of p.func, p.args
 *     and p.keywords, guarded as values.c guards what it reads;
 *   - a V_PARTIAL holds the values it was made of; made of another
 *     V_PARTIAL it is flattened, as partial's constructor flattens a
 *     partial that has no __dict__ (one made while tracing has none), so
 *     p.func, p.args and p.keywords read what CPython's would;
 *   - a V_PARTIAL cannot leave the translation (tr_rebuild.c stops on it,
 *     as on a function made while tracing): nothing made while tracing is
 *     handed to the program before the graph ran;
 *   - only functools.partial itself makes one: a subclass may define
 *     __new__, __call__ or attributes, and is a class like any other.
 */
#include "translate_int.h"

/* functools.partial of the main interpreter, or NULL when functools is
   not imported.  Strong, held for the process. */
static PyTypeObject *partial_type(void)
{
    static PyObject *tp;
    if (tp == NULL) {
        PyObject *name = PyUnicode_FromString("functools");
        PyObject *m = name ? PyImport_GetModule(name) : NULL;
        Py_XDECREF(name);
        PyObject *p = m ? PyObject_GetAttrString(m, "partial") : NULL;
        Py_XDECREF(m);
        if (p != NULL && PyType_Check(p))
            tp = p;
        else
            Py_XDECREF(p);
        PyErr_Clear();
    }
    return (PyTypeObject *)tp;
}

/* (contract: translate_int.h) */
bool tr_is_partial(Value *v)
{
    PyTypeObject *tp = v->kind == V_OBJECT && v->src >= 0 ? partial_type() : NULL;
    return tp != NULL && Py_IS_TYPE(v->obj, tp);
}

/* (contract: translate_int.h) */
bool tr_is_partial_class(PyObject *fn)
{
    PyTypeObject *tp = partial_type();
    return tp != NULL && fn == (PyObject *)tp;
}

/* Whether calling v is known not to raise "not callable": what the
   translator made as a function, or an object whose type (fixed by its
   guards) has tp_call. */
static bool known_callable(Value *v)
{
    switch (v->kind) {
    case V_FUNC: case V_PARTIAL: case V_BOUNDFN: case V_BOUND: case V_METHOD:
        return true;
    case V_CONST: case V_OBJECT:
        return v->obj != NULL && PyCallable_Check(v->obj);
    default:
        return false;
    }
}

/* (contract: translate_int.h) */
Value *tr_make_partial(TFrame *f, Value **args, int nargs, PyObject *kwnames)
{
    Tracer *t = f->t;
    int nkw = kwnames ? (int)PyTuple_GET_SIZE(kwnames) : 0, npos = nargs - nkw;
    if (npos < 1)
        return tracer_unsupported(t, false, "functools.partial() without a function"), NULL;
    Value *func = args[0];
    if (tr_is_partial(func))
        return tracer_unsupported(t, false, "functools.partial of a partial the program holds "
                                  "(whether its constructor flattens it depends on its "
                                  "__dict__)"), NULL;
    if (!known_callable(func))
        return tracer_unsupported(t, false, "functools.partial of a value not known to be "
                                  "callable"), NULL;
    Value *p = value_new(t, V_PARTIAL, (PyObject *)partial_type());
    Value *pargs = p ? value_new(t, V_TUPLE, NULL) : NULL;
    Value *pkw = pargs ? value_new(t, V_DICT, NULL) : NULL;
    if (pkw == NULL || (pkw->obj = PyList_New(0)) == NULL)
        return NULL;
    if (func->kind == V_PARTIAL) {      /* flattened: its func, args and keywords first */
        Value *inner_args = func->items[1], *inner_kw = func->items[2];
        for (int i = 0; i < inner_args->n; i++)
            if (value_append(t, pargs, inner_args->items[i]) < 0)
                return NULL;
        for (int i = 0; i < inner_kw->n; i++)
            if (tr_dict_set_item(t, pkw, PyList_GET_ITEM(inner_kw->obj, i), inner_kw->items[i]) < 0)
                return NULL;
        func = func->items[0];
    }
    for (int i = 1; i < npos; i++)
        if (value_append(t, pargs, args[i]) < 0)
            return NULL;
    for (int i = 0; i < nkw; i++)
        if (tr_dict_set_item(t, pkw, PyTuple_GET_ITEM(kwnames, i), args[npos + i]) < 0)
            return NULL;
    if (value_append(t, p, func) < 0 || value_append(t, p, pargs) < 0 || value_append(t, p, pkw) < 0)
        return NULL;
    return p;
}

/* (contract: translate_int.h) */
Value *tr_partial_attr(TFrame *f, Value *p, PyObject *name)
{
    static const char *const members[] = {"func", "args", "keywords"};
    for (int i = 0; i < 3; i++)
        if (PyUnicode_CompareWithASCIIString(name, members[i]) == 0)
            return p->items[i];
    return tracer_unsupported(f->t, false, "attribute '%U' of a functools.partial made while "
                              "tracing", name), NULL;
}

/* (contract: translate_int.h) */
Value *tr_call_partial(TFrame *f, Value *p, Value **args, int nargs, PyObject *kwnames)
{
    Tracer *t = f->t;
    bool made = p->kind == V_PARTIAL;
    Value *fn = made ? p->items[0] : tr_attr_through_accessor(t, p, "func");
    Value *pargs = made ? p->items[1] : fn ? tr_attr_through_accessor(t, p, "args") : NULL;
    Value *pkw = made ? p->items[2] : pargs ? tr_attr_through_accessor(t, p, "keywords") : NULL;
    if (pkw == NULL)
        return NULL;
    if (pargs->kind != V_TUPLE || pkw->kind != V_DICT)
        return tracer_unsupported(t, false, "a functools.partial whose arguments are not a "
                                  "tuple and a dict of str keys"), NULL;
    int nkw = kwnames ? (int)PyTuple_GET_SIZE(kwnames) : 0, npos = nargs - nkw;
    if (pargs->n + pkw->n + nargs >= MAX_STACK)
        return tracer_unsupported(t, false, "a call with more than %d arguments", MAX_STACK), NULL;
    /* partial(func, *pargs, **pkw)(*args, **kw) is func(*pargs, *args, **{**pkw, **kw}) */
    Value *all[MAX_STACK];
    int n = 0;
    for (int i = 0; i < pargs->n; i++)
        all[n++] = pargs->items[i];
    for (int i = 0; i < npos; i++)
        all[n++] = args[i];
    PyObject *names = PyList_New(0);
    for (int i = 0; names != NULL && i < pkw->n; i++) {
        PyObject *k = PyList_GET_ITEM(pkw->obj, i);
        int overridden = kwnames ? PySequence_Contains(kwnames, k) : 0;
        if (overridden < 0 || (!overridden && PyList_Append(names, k) < 0))
            Py_CLEAR(names);
        else if (!overridden)
            all[n++] = pkw->items[i];
    }
    for (int i = 0; names != NULL && i < nkw; i++) {
        if (PyList_Append(names, PyTuple_GET_ITEM(kwnames, i)) < 0)
            Py_CLEAR(names);
        else
            all[n++] = args[npos + i];
    }
    PyObject *tup = names ? PyList_AsTuple(names) : NULL;
    Py_XDECREF(names);
    /* the names live as long as the tracer: a Value holds them */
    Value *held = tup ? new_const(t, tup) : NULL;
    if (held == NULL)
        return NULL;
    return tr_call_or_undo(f, fn, all, n, PyTuple_GET_SIZE(tup) ? tup : NULL);
}
