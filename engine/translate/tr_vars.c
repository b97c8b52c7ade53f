/*
 * tr_vars.c -- reading variables and attributes while translating
 * (DESIGN.md 3.4; contract: translate_int.h): locals, free variables,
 * globals and builtins, attributes and methods.
 *
 * Invariants: a value read from the program's state is reached by an
 * accessor and guarded by values.c (value_from_source), so the entry holds
 * only while what was read is the same; an attribute is read only when the
 * generic lookup finds it with no Python code run (no property, no
 * __getattr__; C getters such as function.__name__ are fine); a name LOAD_GLOBAL finds in the builtins is guarded absent from
 * the globals.
 */
#include "translate_int.h"

/* A cell variable a resume frame gets (slot accessor acc, the cell obj):
   the frame's own cell (a plan made it; no one else holds it), read as a
   V_CELL whose content is read through it.  NULL when tracing stops. */
static Value *resume_cell(TFrame *f, int acc, PyObject *obj)
{
    Tracer *t = f->t;
    if (guardset_add(t->gs, GUARD_TYPE_MATCH, acc, (PyObject *)&PyCell_Type, 0) < 0)
        return NULL;
    Value *cell = value_new(t, V_CELL, NULL);
    if (cell == NULL)
        return NULL;
    PyObject *content = PyCell_GET(obj);     /* borrowed */
    int ca = guardset_accessor(t->gs, ACC_CELL, acc, 0, NULL, NULL);
    if (ca < 0)
        return NULL;
    if (content == NULL) {
        t->stop_unguarded = true;   /* no guard says the cell is empty */
        return tracer_unsupported(t, false, "a cell variable not assigned yet when the frame resumes"), NULL;
    }
    Value *v = value_from_source(t, ca, content);
    if (v == NULL || value_append(t, cell, v) < 0)
        return NULL;
    return cell;
}

/* Local i: an input of the root frame is read (and guarded) on first use,
   so that only what the code uses is guarded.  NULL when tracing stops. */
/* Whether slot i of the root frame is its **kwargs dict as the call made
   it: a new dict no one else holds (CPython makes one per call), so what
   the frame does to it is the frame's own -- until it has run code that
   could hand it out (resume frames). */
static bool is_own_kwargs(TFrame *f, int i)
{
    PyCodeObject *co = f->code;
    if (f->parent != NULL || f->t->rq->resume_offset != 0 || !(co->co_flags & CO_VARKEYWORDS))
        return false;
    int k = co->co_argcount + co->co_kwonlyargcount + ((co->co_flags & CO_VARARGS) ? 1 : 0);
    return i == k && f->locals[i]->kind == V_DICT;
}

/* A dict value (reached by an accessor, its keys guarded) as one this
   translation made: the same items, mutable, rebuilt as a new dict. */
static Value *own_copy(Tracer *t, Value *d)
{
    Value *c = value_new(t, V_DICT, NULL);
    if (c == NULL || (c->obj = PyList_GetSlice(d->obj, 0, PY_SSIZE_T_MAX)) == NULL)
        return NULL;
    for (int j = 0; j < d->n; j++)
        if (value_append(t, c, d->items[j]) < 0)
            return NULL;
    return c;
}

Value *tr_load_local(TFrame *f, int i)
{
    if (f->locals[i] != NULL && f->locals[i]->kind == V_NULL)
        return tracer_unsupported(f->t, false, "reads deleted local '%U'", local_name(f->code, i)), NULL;
    if (f->locals[i] != NULL)
        return f->locals[i];
    if (i >= f->nlocals)    /* 3.13 reads a closure's cell with LOAD_FAST */
        return tr_load_closure(f, i);
    if (f->parent == NULL && i < f->t->fv->nlocals) {
        /* An input of the root frame, read on first use so that only what
           the code uses is guarded. */
        PyObject *obj = f->t->fv->locals[i];
        if (obj == NULL)
            return tracer_unsupported(f->t, false, "reads unbound local '%U'", local_name(f->code, i)), NULL;
        int acc = guardset_accessor(f->t->gs, ACC_LOCAL, -1, i, NULL, local_name(f->code, i));
        if (acc < 0)
            return NULL;
        if (code_slot_is_cell(f->code, i) && PyCell_Check(obj) && f->t->rq->resume_offset != 0)
            f->locals[i] = resume_cell(f, acc, obj);
        else
            f->locals[i] = tr_value_from_resume_slot(f, acc, obj, i);
        if (f->locals[i] != NULL && is_own_kwargs(f, i))
            f->locals[i] = own_copy(f->t, f->locals[i]);
        return f->locals[i];
    }
    return tracer_unsupported(f->t, false, "reads unbound local '%U'", local_name(f->code, i)), NULL;
}

/* A free variable: root frames read the function's closure cell; inlined
   frames reach it as func.__closure__[k].cell_contents; a function made
   while tracing has the cells it was made with. */
Value *tr_load_free(TFrame *f, int k)
{
    if (f->made != NULL) {
        Value *cells = f->made->items[2];
        if (cells->kind != V_TUPLE || k >= cells->n || cells->items[k]->kind != V_CELL)
            return tracer_unsupported(f->t, true, "a free variable without a closure cell"), NULL;
        Value *cell = cells->items[k];
        if (cell->n == 0)
            return tracer_unsupported(f->t, false, "reads free variable '%U' before it is assigned",
                                      local_name(f->code, code_first_free(f->code) + k)), NULL;
        return cell->items[0];
    }
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

/* The V_CELL in cell slot i (a resume frame's own cell is read on first
   use), or NULL when the slot has no cell yet. */
static Value *cell_in_slot(TFrame *f, int i)
{
    Value *c = f->locals[i];
    if (c == NULL && f->parent == NULL && i < f->t->fv->nlocals && f->t->fv->locals[i] != NULL
        && code_slot_is_cell(f->code, i))
        c = tr_load_local(f, i);
    return c != NULL && c->kind == V_CELL ? c : NULL;
}

Value *tr_load_deref(TFrame *f, int i)
{
    int first_free = code_first_free(f->code);
    Value *cell = cell_in_slot(f, i);
    if (cell == NULL && i >= first_free)
        return tr_load_free(f, i - first_free);
    if (cell == NULL)
        return tracer_unsupported(f->t, true, "reads a cell that MAKE_CELL did not make"), NULL;
    if (cell->n == 0)
        return tracer_unsupported(f->t, false, "reads variable '%U' before it is assigned",
                                  local_name(f->code, i)), NULL;
    return cell->items[0];
}

int tr_store_deref(TFrame *f, int i, Value *v)
{
    Tracer *t = f->t;
    bool delete = v == NULL;
    Value *cell = cell_in_slot(f, i);
    if (cell == NULL && i >= code_first_free(f->code) && f->made != NULL) {
        Value *cells = f->made->items[2];
        int k = i - code_first_free(f->code);
        if (cells->kind == V_TUPLE && k < cells->n && cells->items[k]->kind == V_CELL)
            cell = cells->items[k];
    }
    if (cell == NULL || cell->program_cell)
        return tracer_unsupported(t, false, "assigns variable '%U' of an enclosing function "
                                  "the program can see (nonlocal)", local_name(f->code, i));
    /* noted, so that a call that breaks puts the old content back */
    if (tracer_note_mutation(t, cell, cell->n > 0 && !delete ? 0 : -1) < 0)
        return -1;
    if (delete) {
        if (cell->n == 0)
            return tracer_unsupported(t, false, "deletes variable '%U', which is not assigned",
                                      local_name(f->code, i));
        cell->n = 0;
        return 0;
    }
    if (cell->n > 0) {
        cell->items[0] = v;
        return 0;
    }
    return value_append(t, cell, v);
}

/* LOAD_CLOSURE (3.11, 3.12; 3.13 reads the slot with LOAD_FAST): the
   cell in slot i, for a function made next.  A free variable of a real
   function gets a read-only stand-in holding its value. */
Value *tr_load_closure(TFrame *f, int i)
{
    Value *cell = cell_in_slot(f, i);
    if (cell != NULL)
        return cell;
    int first_free = code_first_free(f->code);
    if (i < first_free)
        return tracer_unsupported(f->t, true, "LOAD_CLOSURE of a slot without a cell"), NULL;
    if (f->made != NULL) {
        Value *cells = f->made->items[2];
        int k = i - first_free;
        if (cells->kind != V_TUPLE || k >= cells->n || cells->items[k]->kind != V_CELL)
            return tracer_unsupported(f->t, true, "a free variable without a closure cell"), NULL;
        return cells->items[k];
    }
    Value *content = tr_load_free(f, i - first_free);
    Value *standin = content ? value_new(f->t, V_CELL, NULL) : NULL;
    if (standin == NULL || value_append(f->t, standin, content) < 0)
        return NULL;
    standin->program_cell = true;
    f->locals[i] = standin;
    return standin;
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
   the class attribute (if any) is not a data descriptor other than a C
   getter (function.__name__, code.co_varnames: value_descr_is_c_getter). */
/* types.UnionType (`int | None`), whose C getattro forwards a few names
   to its class and reads the rest generically; not exported by CPython,
   so taken from an instance once.  Borrowed (a static type), or NULL. */
static PyTypeObject *union_type(void)
{
    static PyTypeObject *tp;
    if (tp == NULL) {
        PyObject *u = PyNumber_Or((PyObject *)&PyLong_Type, Py_None);
        if (u == NULL)
            PyErr_Clear();
        else
            tp = Py_TYPE(u);          /* static: outlives the instance */
        Py_XDECREF(u);
    }
    return tp;
}

/* Whether binding class attribute d (calling its __get__, as a lookup
   does) runs no Python code: d has no __get__, or its type's __get__ is
   C -- a function (a bound method), staticmethod, a C method, slot
   wrapper, member or getset descriptor, and a classmethod of one of
   these (3.11 and 3.12 call the wrapped object's own __get__).  A
   descriptor class written in Python (its __get__ a function:
   functools.cached_property, a lazy attribute) runs its code, and may
   change the object. */
static bool descr_get_is_c(PyObject *d, int depth)
{
    PyTypeObject *dt = Py_TYPE(d);
    if (dt->tp_descr_get == NULL || PyFunction_Check(d) || value_descr_is_c_getter(d)
        || Py_IS_TYPE(d, &PyStaticMethod_Type) || Py_IS_TYPE(d, &PyMethodDescr_Type)
        || Py_IS_TYPE(d, &PyClassMethodDescr_Type) || Py_IS_TYPE(d, &PyWrapperDescr_Type))
        return true;
    if (PyObject_TypeCheck(d, &PyClassMethod_Type)) {
        PyObject *fn = depth < 4 ? PyObject_GetAttrString(d, "__func__") : NULL;
        bool ok = fn != NULL && Py_IS_TYPE(d, &PyClassMethod_Type) && descr_get_is_c(fn, depth + 1);
        Py_XDECREF(fn);
        PyErr_Clear();
        return ok;
    }
    if (!(dt->tp_flags & Py_TPFLAGS_HEAPTYPE))
        return true;                  /* a C descriptor type (lru_cache's wrapper) */
    static PyObject *get_name;
    if (get_name == NULL && (get_name = PyUnicode_InternFromString("__get__")) == NULL) {
        PyErr_Clear();
        return false;
    }
    PyObject *get = _PyType_Lookup(dt, get_name);                /* borrowed */
    return get != NULL && Py_IS_TYPE(get, &PyWrapperDescr_Type);  /* inherited from a C type */
}

/* Whether class tp, a Python subclass of `base`, keeps base's
   __getattribute__ (adding at most a Python __getattr__, which runs for
   a name the lookup does not find): a module class (torch._VF's) over
   ModuleType, a metaclass (3.11's EnumType) over type. */
static bool keeps_lookup_of(PyTypeObject *tp, PyTypeObject *base)
{
    static PyObject *ga_name;
    if (ga_name == NULL && (ga_name = PyUnicode_InternFromString("__getattribute__")) == NULL) {
        PyErr_Clear();
        return false;
    }
    return (tp->tp_flags & Py_TPFLAGS_HEAPTYPE) && _PyType_Lookup(tp, ga_name) == _PyType_Lookup(base, ga_name);
}

/* Whether reading `name` from obj runs no Python code (and so cannot
   change anything):
   - an instance with the generic lookup: the class attribute, if any, is
     no data descriptor but a C getter (function.__name__, a slot), and
     binding it runs no Python (descr_get_is_c: not a descriptor class
     written in Python, which runs even when the instance dict holds the
     name, once the dict has lost it);
   - a class (type's own lookup): the metaclass's attribute and the
     class's are bound by C code;
   - a module (the module type's own lookup): the name is in its dict, or
     the module has no __getattr__ (PEP 562) to run for a missing one. */
bool tr_attr_read_is_pure(PyObject *obj, PyObject *name)
{
    PyTypeObject *tp = Py_TYPE(obj);
    static PyObject *getattr_name;
    if (getattr_name == NULL && (getattr_name = PyUnicode_InternFromString("__getattr__")) == NULL) {
        PyErr_Clear();
        return false;
    }
    if (PyModule_Check(obj) && (tp->tp_getattro == PyModule_Type.tp_getattro
                                || keeps_lookup_of(tp, &PyModule_Type))) {
        PyObject *md = PyModule_GetDict(obj);                       /* borrowed */
        if (md == NULL)
            return false;
        int has = PyDict_Contains(md, name);
        int hook = has == 0 ? PyDict_Contains(md, getattr_name) : 0;
        if (has < 0 || hook < 0) {
            PyErr_Clear();
            return false;
        }
        if (has)
            return true;
        PyObject *cls_attr = _PyType_Lookup(tp, name);              /* borrowed */
        if (cls_attr != NULL)
            return descr_get_is_c(cls_attr, 0) && (Py_TYPE(cls_attr)->tp_descr_set == NULL
                                                   || value_descr_is_c_getter(cls_attr));
        /* missing: the module's __getattr__ (PEP 562) or its class's runs */
        return !hook && tp->tp_getattro == PyModule_Type.tp_getattro;
    }
    if (PyType_Check(obj) && (tp->tp_getattro == PyType_Type.tp_getattro || keeps_lookup_of(tp, &PyType_Type))) {
        PyObject *meta_attr = _PyType_Lookup(tp, name);              /* borrowed */
        PyObject *own = _PyType_Lookup((PyTypeObject *)obj, name);   /* borrowed */
        if (own == NULL && meta_attr == NULL)
            return tp->tp_getattro == PyType_Type.tp_getattro;      /* else __getattr__ runs */
        if (meta_attr != NULL && Py_TYPE(meta_attr)->tp_descr_set != NULL)
            return value_descr_is_c_getter(meta_attr);   /* not a property of the metaclass */
        if (own != NULL)
            return descr_get_is_c(own, 0);
        return meta_attr == NULL || descr_get_is_c(meta_attr, 0);
    }
    if (tp->tp_getattro != PyObject_GenericGetAttr)
        return tp == union_type() && tp != NULL;
    PyObject *cls_attr = _PyType_Lookup(tp, name);   /* borrowed */
    if (cls_attr != NULL) {
        descrsetfunc set = Py_TYPE(cls_attr)->tp_descr_set;
        if (set != NULL && !value_descr_is_c_getter(cls_attr))
            return false;   /* property or other data descriptor */
        if (!descr_get_is_c(cls_attr, 0))
            return false;   /* a descriptor class written in Python */
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
        if (base->dynshape && PyUnicode_CompareWithASCIIString(name, "shape") == 0)
            return tensorops_shape(t, base);          /* sizes known when the graph runs */
        if (base->dynshape && (PyUnicode_CompareWithASCIIString(name, "size") == 0
                               || PyUnicode_CompareWithASCIIString(name, "nbytes") == 0)) {
            Value *args[2] = {base, value_new(t, V_CONST, name)};
            return args[1] ? tensorops_call(t, NODE_CALL_FUNCTION,
                                            PyDict_GetItemString(PyEval_GetBuiltins(), "getattr"),
                                            "getattr", args, 2, NULL) : NULL;
        }
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
    if (tensorops_is_method_of(ex, name)) {
        /* x.view as a value (x.view(*shape) on 3.11 is LOAD_ATTR then
           CALL_FUNCTION_EX): the method, called as one */
        Value *m = value_new(t, V_METHOD, name);
        if (m == NULL || value_append(t, m, base) < 0)
            return NULL;
        m->pos = 1;          /* bound: a call gives its receiver first */
        return m;
    }
    if (base->node != NULL && base->node->op == NODE_PLACEHOLDER && base->src >= 0 && tensor_is_torch(ex)
        && Py_TYPE(ex)->tp_getattro == PyObject_GenericGetAttr && _PyType_Lookup(Py_TYPE(ex), name) == NULL) {
        /* an input's own attribute (a torch.nn.Buffer's persistent):
           read through an accessor, guarded as any value */
        PyObject *d = PyObject_GenericGetDict(ex, NULL);
        PyObject *own = d ? PyDict_GetItemWithError(d, name) : NULL;    /* borrowed from d */
        int a = own ? guardset_accessor(t->gs, ACC_ATTR, base->src, 0, name, NULL) : -1;
        Value *r = a >= 0 ? value_from_source(t, a, own) : NULL;
        Py_XDECREF(d);
        if (r != NULL || PyErr_Occurred() || a >= 0)
            return r;
    }
    return tracer_unsupported(t, false, "array attribute '%U'", name), NULL;
}

/* .name of a constant or an object an accessor reaches (a module, a class,
   a function, a code object ...), read through the generic path when it
   runs no Python code (tr_attr_read_is_pure); a bound method
   becomes a V_BOUND fetched again when called.  NULL when tracing stops. */
static Value *load_object_attr(TFrame *f, Value *base, PyObject *name)
{
    Tracer *t = f->t;
    PyObject *obj = base->obj;
    bool handled;
    Value *mv = value_module_attr(t, base, name, &handled);
    if (handled)
        return mv;
    mv = tr_object_attr(f, base, name, &handled);
    if (handled || PyErr_Occurred())
        return mv;
    if (base->src < 0 && PyType_Check(obj) && !(((PyTypeObject *)obj)->tp_flags & Py_TPFLAGS_HEAPTYPE)
        && tr_attr_read_is_pure(obj, name)) {
        /* type(x).__name__ of a builtin type: its attributes never change */
        PyObject *attr = PyObject_GetAttr(obj, name);
        if (attr == NULL)
            return NULL;
        if (value_is_plain_constant(attr))
            return new_const(t, attr);
        Py_DECREF(attr);
    }
    if (base->src < 0 && foldable(base) && tr_attr_read_is_pure(obj, name)) {
        /* "-".join, (1, 2).index, x.real of a constant: immutable builtins */
        PyObject *attr = PyObject_GetAttr(obj, name);
        if (attr == NULL)
            return NULL;
        if (PyCFunction_Check(attr) && PyCFunction_GET_SELF(attr) == obj) {
            Py_DECREF(attr);
            Value *bm = value_new(t, V_BOUND, name);
            if (bm == NULL || value_append(t, bm, base) < 0)
                return NULL;
            return bm;
        }
        if (value_is_plain_constant(attr))
            return new_const(t, attr);
        Py_DECREF(attr);
    }
    if (base->src < 0 && tensorops_is_dtype_info_object(obj)) {
        /* torch.finfo(dtype).min: immutable */
        PyObject *attr = PyObject_GetAttr(obj, name);
        if (attr == NULL)
            return NULL;
        if (value_is_plain_constant(attr))
            return new_const(t, attr);
        Py_DECREF(attr);
    }
    if (base->src < 0)
        return tracer_unsupported(t, false, "attribute '%U' of a computed %s", name,
                                  Py_TYPE(obj)->tp_name), NULL;

    if (!tr_attr_read_is_pure(obj, name))
        return tracer_unsupported(t, false, "attribute '%U' of %s runs Python code (property or custom __getattr__)",
                                  name, Py_TYPE(obj)->tp_name), NULL;
    PyObject *attr = PyObject_GetAttr(obj, name);
    if (attr == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError))
            return NULL;
        PyErr_Clear();
        return tr_attr_missing(f, base, name, false);
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

static Value *load_attr(TFrame *f, Value *base, PyObject *name);

/* base.name.  NULL when tracing stops.  An AttributeError the traced code
   raises in a lookup is a plain stop: a class's __getattr__ would take it
   over, which the unwinding does not model. */
Value *tr_load_attr(TFrame *f, Value *base, PyObject *name)
{
    Value *r = load_attr(f, base, name);
    if (r == NULL && f->t->raised != NULL
        && PyErr_GivenExceptionMatches(f->t->raised->obj, PyExc_AttributeError))
        f->t->raised = NULL;
    return r;
}

static Value *load_attr(TFrame *f, Value *base, PyObject *name)
{
    if (base->kind != V_OBJECT && base->kind != V_CONST && base->kind != V_NEWOBJ
        && base->kind != V_SUPER && PyUnicode_CompareWithASCIIString(name, "__class__") == 0
        && tr_class_attr_is_type(base))
        return tr_type_of(f, base);     /* [1].__class__, x.__class__: type(v) */
    switch (base->kind) {
    case V_TENSOR:
        return load_tensor_attr(f, base, name);
    case V_CONST:
        if (base->src < 0 && tr_is_signature_object(base->obj))
            return tr_signature_attr(f, base, name);
        /* fall through */
    case V_OBJECT: {
        bool written;
        Value *w = tr_written_attr(f, base, name, &written);
        if (written || PyErr_Occurred())
            return w || PyErr_Occurred() ? w
                   : (tracer_unsupported(f->t, false, "attribute '%U' deleted while tracing", name), NULL);
        if (PyUnicode_CompareWithASCIIString(name, "__dict__") == 0 && tr_has_writes(f->t, base->obj)) {
            Value *d = load_object_attr(f, base, name);
            return d ? tr_instance_dict_after_writes(f->t, base, d) : NULL;
        }
        return load_object_attr(f, base, name);
    }
    case V_SUPER:
        return tr_super_attr(f, base, name);
    case V_NEWOBJ:
        return tr_newobj_attr(f, base, name);
    case V_PARTIAL:
        return tr_partial_attr(f, base, name);
    case V_TUPLE:
        if (base->tuple_type != NULL) {
            /* r.values of torch.topk's result: an item of the tuple */
            int i = tensorops_structseq_field((PyTypeObject *)base->tuple_type, name);
            if (i >= 0 && i < base->n)
                return base->items[i];
            return tracer_unsupported(f->t, false, "attribute '%U' of a %s", name,
                                      ((PyTypeObject *)base->tuple_type)->tp_name), NULL;
        }
        /* fall through */
    default:
        return tracer_unsupported(f->t, false, "attribute '%U' of a container", name), NULL;
    }
}

/* Whether obj.name, looked up as LOAD_METHOD does, is a method descriptor
   of type tp (a Python function, a C method, a slot wrapper) that obj's
   own __dict__ does not shadow: what the call gets obj as its first
   argument for.  A class, staticmethod, classmethod, property or other
   attribute found on the type binds otherwise; a name not found on it is
   no method. */
static bool is_method_of_type(PyTypeObject *tp, PyObject *obj, PyObject *name)
{
    PyObject *descr = _PyType_Lookup(tp, name);                 /* borrowed */
    if (descr == NULL || !PyType_HasFeature(Py_TYPE(descr), Py_TPFLAGS_METHOD_DESCRIPTOR))
        return false;
    PyObject **dictptr = obj ? _PyObject_GetDictPtr(obj) : NULL;
    if (dictptr == NULL || *dictptr == NULL)
        return true;
    PyObject *own = PyDict_GetItemWithError(*dictptr, name);     /* borrowed */
    PyErr_Clear();
    return own == NULL;
}

/* (contract: translate_int.h) */
int tr_load_method(TFrame *f, Value *base, PyObject *name)
{
    Tracer *t = f->t;
    if (base->kind == V_TENSOR && is_method_of_type(Py_TYPE(base->obj), base->obj, name)) {
        Value *m = value_new(t, V_METHOD, name);
        if (m == NULL || value_append(t, m, base) < 0)
            return -1;
        return push(f, m) < 0 ? -1 : push(f, base);
    }
    bool written = false;
    if (base->kind == V_OBJECT && base->src >= 0 && tr_written_attr(f, base, name, &written) == NULL
        && PyErr_Occurred())
        return -1;
    if (base->kind == V_OBJECT && base->src >= 0 && !written) {
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
    if ((base->kind == V_LIST && is_method_of_type(&PyList_Type, NULL, name))
        || (base->kind == V_DICT && is_method_of_type(&PyDict_Type, NULL, name))
        || (base->kind == V_SET && is_method_of_type(&PySet_Type, NULL, name))) {
        /* list.append, dict.get ...: the method, called with the list
           (the exact type: its guards say so; a dict standing for another
           mapping reads alike, and stops at a change) */
        Value *m = value_new(t, V_METHOD, name);
        if (m == NULL || value_append(t, m, base) < 0)
            return -1;
        return push(f, m) < 0 ? -1 : push(f, base);
    }
    Value *attr = tr_load_attr(f, base, name);
    if (attr == NULL)
        return -1;
    return push_call_pair(f, attr, NULL);
}

/* ---- imports ---- */

/* The absolute name `import` resolves (name, level) to in frame f's
   module: level 0 is name itself; level k > 0 is name under the
   package of the function's globals, k - 1 levels up.  New str, or NULL
   when tracing stops. */
static PyObject *import_absolute_name(TFrame *f, PyObject *name, long level)
{
    if (level == 0)
        return Py_NewRef(name);
    PyObject *package = PyDict_GetItemString(f->globals, "__package__");   /* borrowed */
    if (package == NULL || !PyUnicode_Check(package) || PyUnicode_GET_LENGTH(package) == 0)
        return tracer_unsupported(f->t, false, "relative import outside a package"), NULL;
    PyObject *base = Py_NewRef(package);
    for (long k = 1; k < level && base != NULL; k++) {
        Py_ssize_t dot = PyUnicode_FindChar(base, '.', 0, PyUnicode_GET_LENGTH(base), -1);
        PyObject *up = dot >= 0 ? PyUnicode_Substring(base, 0, dot) : NULL;
        Py_DECREF(base);
        if (dot < 0)
            return tracer_unsupported(f->t, false, "relative import beyond the top package"), NULL;
        base = up;
    }
    if (base == NULL || PyUnicode_GET_LENGTH(name) == 0)
        return base;
    PyObject *full = PyUnicode_FromFormat("%U.%U", base, name);
    Py_DECREF(base);
    return full;
}

/* sys.modules[modname] as a value (the accessor guards that the same
   module is there), or NULL when tracing stops: a module not imported yet
   would run its code, which tracing never does. */
static Value *imported_module(TFrame *f, PyObject *modname)
{
    PyObject *mod = PyImport_GetModule(modname);    /* new reference or NULL */
    if (mod == NULL)
        return PyErr_Occurred() ? NULL
               : (tracer_unsupported(f->t, false, "import of %U, a module not imported yet", modname), NULL);
    int acc = guardset_accessor(f->t->gs, ACC_MODULE, -1, 0, modname, NULL);
    Value *v = acc < 0 ? NULL : value_from_source(f->t, acc, mod);
    Py_DECREF(mod);
    return v;
}

Value *tr_import_name(TFrame *f, PyObject *name, Value *level, Value *fromlist)
{
    if (level->kind != V_CONST || !PyLong_CheckExact(level->obj) || fromlist->kind != V_CONST)
        return tracer_unsupported(f->t, true, "import with a computed level or fromlist"), NULL;
    long lv = PyLong_AsLong(level->obj);
    if (lv < 0)
        return PyErr_Occurred() ? NULL : (tracer_unsupported(f->t, true, "import with level %ld", lv), NULL);
    PyObject *full = import_absolute_name(f, name, lv);
    if (full == NULL)
        return NULL;
    Value *mod = imported_module(f, full);
    bool wants_top = fromlist->obj == Py_None
                     || (PyTuple_Check(fromlist->obj) && PyTuple_GET_SIZE(fromlist->obj) == 0);
    if (mod != NULL && wants_top && lv == 0) {
        /* `import a.b` binds a: the top package, once a.b is there */
        Py_ssize_t dot = PyUnicode_FindChar(full, '.', 0, PyUnicode_GET_LENGTH(full), 1);
        if (dot >= 0) {
            PyObject *top = PyUnicode_Substring(full, 0, dot);
            mod = top ? imported_module(f, top) : NULL;
            Py_XDECREF(top);
        }
    }
    Py_DECREF(full);
    return mod;
}

Value *tr_import_from(TFrame *f, Value *module, PyObject *name)
{
    if (module->kind != V_CONST || !PyModule_Check(module->obj))
        return tracer_unsupported(f->t, false, "from-import of a %s",
                                  module->obj ? Py_TYPE(module->obj)->tp_name : "value"), NULL;
    PyObject *md = PyModule_GetDict(module->obj);             /* borrowed */
    PyObject *found = md ? PyDict_GetItemWithError(md, name) : NULL;
    if (found != NULL)
        return tr_load_attr(f, module, name);
    if (PyErr_Occurred())
        return NULL;
    /* not in the module's namespace: a submodule imported already, or
       what the module's __getattr__ makes (Python code: not run) */
    PyObject *modname = PyModule_GetNameObject(module->obj);
    PyObject *sub = modname ? PyUnicode_FromFormat("%U.%U", modname, name) : NULL;
    Py_XDECREF(modname);
    if (sub == NULL)
        return NULL;
    PyObject *there = PyImport_GetModule(sub);
    Value *v;
    if (there != NULL) {
        Py_DECREF(there);
        v = imported_module(f, sub);
    }
    else {
        v = PyErr_Occurred() ? NULL
            : (tracer_unsupported(f->t, false, "from %U import %U: not in the module's namespace", sub, name), NULL);
    }
    Py_DECREF(sub);
    return v;
}
