/*
 * tr_vars.c -- reading variables and attributes while translating
 * (DESIGN.md 3.4; contract: translate_int.h): locals, free variables,
 * globals and builtins, attributes and methods.
 *
 * Invariants: a value read from the program's state is reached by an
 * accessor and guarded by values.c (value_from_source), so the entry holds
 * only while what was read is the same; an attribute is read only when the
 * generic, descriptor-free lookup finds it (no property, no __getattr__
 * runs); a name LOAD_GLOBAL finds in the builtins is guarded absent from
 * the globals.
 */
#include "translate_int.h"

/* Local i: an input of the root frame is read (and guarded) on first use,
   so that only what the code uses is guarded.  NULL when tracing stops. */
Value *tr_load_local(TFrame *f, int i)
{
    if (f->locals[i] != NULL && f->locals[i]->kind == V_NULL)
        return tracer_unsupported(f->t, false, "reads deleted local '%U'", local_name(f->code, i)), NULL;
    if (f->locals[i] != NULL)
        return f->locals[i];
    if (f->parent == NULL && i < f->t->fv->nlocals) {
        /* An input of the root frame, read on first use so that only what
           the code uses is guarded. */
        PyObject *obj = f->t->fv->locals[i];
        if (obj == NULL)
            return tracer_unsupported(f->t, false, "reads unbound local '%U'", local_name(f->code, i)), NULL;
        int acc = guardset_accessor(f->t->gs, ACC_LOCAL, -1, i, NULL, local_name(f->code, i));
        if (acc < 0)
            return NULL;
        f->locals[i] = tr_value_from_resume_slot(f, acc, obj, i);
        return f->locals[i];
    }
    return tracer_unsupported(f->t, false, "reads unbound local '%U'", local_name(f->code, i)), NULL;
}

/* A free variable: root frames read the function's closure cell; inlined
   frames reach it as func.__closure__[k].cell_contents. */
Value *tr_load_free(TFrame *f, int k)
{
    PyObject *closure = PyFunction_GET_CLOSURE(f->func);
    if (closure == NULL || k >= PyTuple_GET_SIZE(closure))
        return tracer_unsupported(f->t, true, "a free variable without a closure cell"), NULL;
    PyObject *cell = PyTuple_GET_ITEM(closure, k);
    PyObject *obj = PyCell_GET(cell);
    PyObject *name = local_name(f->code, code_first_free(f->code) + k);
    int acc;
    if (f->func_src < 0) {
        acc = guardset_accessor(f->t->gs, ACC_CLOSURE, -1, k, NULL, name);
    }
    else {
        PyObject *attr = PyUnicode_FromString("__closure__");
        int a = attr ? guardset_accessor(f->t->gs, ACC_ATTR, f->func_src, 0, attr, NULL) : -1;
        Py_XDECREF(attr);
        int it = a < 0 ? -1 : guardset_accessor(f->t->gs, ACC_ITEM, a, k, NULL, NULL);
        acc = it < 0 ? -1 : guardset_accessor(f->t->gs, ACC_CELL, it, 0, NULL, NULL);
    }
    if (acc < 0)
        return NULL;
    if (obj == NULL)
    {
        f->t->stop_unguarded = true;     /* no guard says the cell is empty */
        return tracer_unsupported(f->t, false, "reads empty closure cell '%U'", name), NULL;
    }
    return value_from_source(f->t, acc, obj);
}

/* Global `name` as LOAD_GLOBAL finds it: the function's globals (G[...],
   or func.__globals__[...] when inlined), else the builtins, guarded
   absent from the globals.  NULL when tracing stops. */
Value *tr_load_global(TFrame *f, PyObject *name)
{
    Tracer *t = f->t;
    PyObject *obj = PyDict_GetItemWithError(f->globals, name);
    if (obj == NULL && PyErr_Occurred())
        return NULL;
    int acc;
    if (obj != NULL) {
        if (f->globals_acc < 0) {
            acc = guardset_accessor(t->gs, ACC_GLOBAL, -1, 0, name, NULL);
        }
        else {
            acc = guardset_accessor(t->gs, ACC_DICT_ITEM, f->globals_acc, 0, name, NULL);
        }
    }
    else {
        /* A builtin: the same dict for every module but a rare one, and the
           name must stay out of the function's globals (a global defined
           later shadows it, as eagerly). */
        if (((PyFunctionObject *)f->func)->func_builtins != t->fv->builtins)
            return tracer_unsupported(t, true, "a function with its own builtins"), NULL;
        obj = PyDict_GetItemWithError(t->fv->builtins, name);
        if (obj == NULL && PyErr_Occurred())
            return NULL;
        /* 'name' not in G, also when it is nowhere: a stopped translation
           is kept with its guards (hook.c), and defining the global later
           must fail them */
        int ga = f->globals_acc >= 0 ? f->globals_acc
                                     : guardset_accessor(t->gs, ACC_GLOBALS, -1, 0, NULL, NULL);
        if (ga < 0 || guardset_add(t->gs, GUARD_DICT_LACKS, ga, name, 0) < 0)
            return NULL;
        if (obj == NULL)
            return tracer_unsupported(t, false, "name '%U' is not defined", name), NULL;
        acc = guardset_accessor(t->gs, ACC_BUILTIN, -1, 0, name, NULL);
    }
    if (acc < 0)
        return NULL;
    return value_from_source(t, acc, obj);
}

/* ---- attributes ---- */

/* Whether reading `name` from obj runs no Python code: generic getattr, and
   the class attribute (if any) is not a data descriptor. */
static bool attribute_read_is_pure(PyObject *obj, PyObject *name)
{
    PyTypeObject *tp = Py_TYPE(obj);
    if (tp->tp_getattro != PyObject_GenericGetAttr)
        return PyModule_Check(obj) || PyType_Check(obj);
    PyObject *cls_attr = _PyType_Lookup(tp, name);   /* borrowed */
    if (cls_attr != NULL) {
        descrsetfunc set = Py_TYPE(cls_attr)->tp_descr_set;
        if (set != NULL)
            return false;   /* property, slot or other data descriptor */
    }
    return true;
}

/* .name of a tensor value: shape, ndim, dtype, size, itemsize, nbytes as
   constants, the attributes graph nodes compute ("T").  NULL when tracing
   stops. */
static Value *load_tensor_attr(TFrame *f, Value *base, PyObject *name)
{
    Tracer *t = f->t;
    PyObject *ex = base->obj;
    if (PyUnicode_CompareWithASCIIString(name, "shape") == 0
        || PyUnicode_CompareWithASCIIString(name, "ndim") == 0
        || PyUnicode_CompareWithASCIIString(name, "dtype") == 0
        || PyUnicode_CompareWithASCIIString(name, "size") == 0
        || PyUnicode_CompareWithASCIIString(name, "itemsize") == 0
        || PyUnicode_CompareWithASCIIString(name, "nbytes") == 0) {
        if (base->dynshape && PyUnicode_CompareWithASCIIString(name, "dtype") != 0
            && PyUnicode_CompareWithASCIIString(name, "ndim") != 0
            && PyUnicode_CompareWithASCIIString(name, "itemsize") != 0)
            return tracer_break(t, STOP_ESCAPE, "data escape: .%U of a tensor whose shape "
                                "depends on its values", name), NULL;
        /* Fixed by TENSOR_MATCH (type, dtype, shape) for arrays, and by
           the graph for intermediate values. */
        return new_const(t, PyObject_GetAttr(ex, name));
    }
    if (tensorops_is_node_attribute(name)) {
        Value *args[2];
        args[0] = base;
        args[1] = value_new(t, V_CONST, name);
        if (args[1] == NULL)
            return NULL;
        return tensorops_call(t, NODE_CALL_FUNCTION, PyEval_GetBuiltins() ?
                              PyDict_GetItemString(PyEval_GetBuiltins(), "getattr") : NULL,
                              "getattr", args, 2, NULL);
    }
    return tracer_unsupported(t, false, "array attribute '%U'", name), NULL;
}

/* .name of a constant (a module or a class) or of an object an accessor
   reaches, read through the generic, descriptor-free path; a bound method
   becomes a V_BOUND fetched again when called.  NULL when tracing stops. */
static Value *load_object_attr(TFrame *f, Value *base, PyObject *name)
{
    Tracer *t = f->t;
    PyObject *obj = base->obj;
    bool handled;
    Value *mv = value_module_attr(t, base, name, &handled);
    if (handled)
        return mv;
    if (base->src < 0)
        return tracer_unsupported(t, false, "attribute '%U' of a computed %s", name,
                                  Py_TYPE(obj)->tp_name), NULL;
    if (base->kind == V_CONST && !PyModule_Check(obj) && !PyType_Check(obj))
        return tracer_unsupported(t, false, "attribute '%U' of a %s", name,
                                  Py_TYPE(obj)->tp_name), NULL;
    if (!attribute_read_is_pure(obj, name))
        return tracer_unsupported(t, false, "attribute '%U' of %s runs Python code (property or custom __getattr__)",
                                  name, Py_TYPE(obj)->tp_name), NULL;
    PyObject *attr = PyObject_GetAttr(obj, name);
    if (attr == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError))
            return NULL;
        PyErr_Clear();
        return tracer_unsupported(t, false, "%s has no attribute '%U'", Py_TYPE(obj)->tp_name, name), NULL;
    }
    if (PyMethod_Check(attr) || (PyCFunction_Check(attr) && PyCFunction_GET_SELF(attr) != NULL
                                 && !PyModule_Check(PyCFunction_GET_SELF(attr)))) {
        /* a bound method (np.random.rand, rng.normal): a fresh object each
           time, so it is looked up again when called */
        Py_DECREF(attr);
        Value *bm = value_new(t, V_BOUND, name);
        if (bm == NULL || value_append(t, bm, base) < 0)
            return NULL;
        return bm;
    }
    int acc = guardset_accessor(t->gs, ACC_ATTR, base->src, 0, name, NULL);
    Value *v = acc < 0 ? NULL : value_from_source(t, acc, attr);
    Py_DECREF(attr);
    return v;
}

/* base.name.  NULL when tracing stops. */
Value *tr_load_attr(TFrame *f, Value *base, PyObject *name)
{
    switch (base->kind) {
    case V_TENSOR:
        return load_tensor_attr(f, base, name);
    case V_CONST:
    case V_OBJECT:
        return load_object_attr(f, base, name);
    default:
        return tracer_unsupported(f->t, false, "attribute '%U' of a container", name), NULL;
    }
}

/* LOAD_METHOD: pushes [method, self] or [NULL, attribute]. */
int tr_load_method(TFrame *f, Value *base, PyObject *name)
{
    Tracer *t = f->t;
    if (base->kind == V_TENSOR) {
        Value *m = value_new(t, V_METHOD, name);
        if (m == NULL || value_append(t, m, base) < 0)
            return -1;
        return push(f, m) < 0 ? -1 : push(f, base);
    }
    if (base->kind == V_OBJECT && base->src >= 0) {
        /* A method of a user class: the plain function from the class,
           reached as type(obj).name (ID_MATCH), called with self. */
        PyObject *cls_attr = _PyType_Lookup(Py_TYPE(base->obj), name);
        PyObject **dictptr = _PyObject_GetDictPtr(base->obj);
        bool shadowed = dictptr && *dictptr && PyDict_GetItemWithError(*dictptr, name);
        if (PyErr_Occurred())
            return -1;
        if (cls_attr != NULL && PyFunction_Check(cls_attr) && !shadowed
            && value_type_lookup_is_generic(Py_TYPE(base->obj))) {
            int ca = guardset_accessor(t->gs, ACC_TYPE, base->src, 0, NULL, NULL);
            int ma = ca < 0 ? -1 : guardset_accessor(t->gs, ACC_ATTR, ca, 0, name, NULL);
            Value *fn = ma < 0 ? NULL : value_from_source(t, ma, cls_attr);
            if (fn == NULL)
                return -1;
            if (dictptr != NULL) {
                /* an instance attribute of that name set later must win */
                PyObject *dname = PyUnicode_FromString("__dict__");
                int da = dname ? guardset_accessor(t->gs, ACC_ATTR, base->src, 0, dname, NULL) : -1;
                Py_XDECREF(dname);
                if (da < 0 || guardset_add(t->gs, GUARD_DICT_LACKS, da, name, 0) < 0)
                    return -1;
            }
            return push(f, fn) < 0 ? -1 : push(f, base);
        }
    }
    if (base->kind == V_LIST || base->kind == V_DICT) {
        Value *m = value_new(t, V_METHOD, name);
        if (m == NULL || value_append(t, m, base) < 0)
            return -1;
        return push(f, m) < 0 ? -1 : push(f, base);
    }
    if (base->kind == V_DICT) {
        /* keys()/values()/items() of an input dict do not mutate it. */
        if (PyUnicode_CompareWithASCIIString(name, "keys") == 0
            || PyUnicode_CompareWithASCIIString(name, "values") == 0
            || PyUnicode_CompareWithASCIIString(name, "items") == 0) {
            Value *m = value_new(t, V_METHOD, name);
            if (m == NULL || value_append(t, m, base) < 0)
                return -1;
            return push(f, m) < 0 ? -1 : push(f, base);
        }
    }
    Value *attr = tr_load_attr(f, base, name);
    if (attr == NULL)
        return -1;
    return push_call_pair(f, attr, NULL);
}
