/*
 * tr_builtins.c -- calls of builtins while translating (DESIGN.md 3.4;
 * contract: translate_int.h): functions of the builtins module (len,
 * isinstance, min, max, abs, getattr) and builtin types (range, int, float,
 * bool, slice, str, tuple, list, enumerate, zip).
 *
 * Invariants: a builtin runs while tracing only on constants whose
 * operations are builtin C code, or is modelled on symbolic values; any
 * other builtin call is a graph break (it runs eagerly).
 */
#include "translate_int.h"

#include <string.h>

/* Values a builtin call sees as a constant tuple, or NULL (stops). */
static PyObject *const_args(Value **args, int nargs)
{
    PyObject *tup = PyTuple_New(nargs);
    if (tup == NULL)
        return NULL;
    for (int i = 0; i < nargs; i++) {
        if (!foldable(args[i]) && !(args[i]->kind == V_CONST && PyType_Check(args[i]->obj))) {
            Py_DECREF(tup);
            return NULL;
        }
        PyTuple_SET_ITEM(tup, i, Py_NewRef(args[i]->obj));
    }
    return tup;
}

/* len(v) of a container, a tensor (its first axis) or a constant.  NULL
   when tracing stops. */
static Value *builtin_len(TFrame *f, Value *v)
{
    switch (v->kind) {
    case V_TUPLE:
    case V_LIST:
    case V_DICT:
    case V_SET:
        return new_const(f->t, PyLong_FromLong(v->n));
    case V_TENSOR: {
        if (v->dynshape)
            return tensorops_dim(f->t, v, 0);        /* known when the graph runs */
        PyObject *shape = PyObject_GetAttrString(v->obj, "shape");
        if (shape == NULL)
            return NULL;
        Value *r = NULL;
        if (PyTuple_Check(shape) && PyTuple_GET_SIZE(shape) > 0)
            r = new_const(f->t, Py_NewRef(PyTuple_GET_ITEM(shape, 0)));
        else
            tracer_unsupported(f->t, false, "len() of a 0-d array");
        Py_DECREF(shape);
        return r;
    }
    case V_NEWOBJ: {
        Value *r = tr_newobj_protocol(f, v, "__len__", NULL, 0);
        if (r == NULL || (r->kind == V_CONST && PyLong_CheckExact(r->obj)))
            return r;
        return tracer_unsupported(f->t, false, "len() of a new %s: its __len__ gives no int",
                                  ((PyTypeObject *)v->obj)->tp_name), NULL;
    }
    default:
        if (foldable(v))
            return new_const(f->t, PyLong_FromSsize_t(PyObject_Length(v->obj)));
        if (tr_is_dict_view_object(v))
            return tr_dict_view_len(f, v);
        if ((v->kind == V_OBJECT || v->kind == V_CONST) && v->src >= 0 && !PyType_Check(v->obj)
            && value_type_lookup_is_generic(Py_TYPE(v->obj))) {
            /* len(obj), obj's class defining __len__ in Python (an
               nn.ModuleList): inlined, an int known while tracing */
            PyObject *name = PyUnicode_InternFromString("__len__");
            PyObject *fn = name ? _PyType_Lookup(Py_TYPE(v->obj), name) : NULL;  /* borrowed */
            Value *bound = fn && PyFunction_Check(fn) ? tr_generic_attr(f, v, name) : NULL;
            Py_XDECREF(name);
            Value *r = bound ? tr_call_or_undo(f, bound, NULL, 0, NULL) : NULL;
            if (r != NULL && !(r->kind == V_CONST && PyLong_CheckExact(r->obj)))
                return tracer_unsupported(f->t, false, "len() of a %s: its __len__ gives no int "
                                          "known while tracing", Py_TYPE(v->obj)->tp_name), NULL;
            if (r != NULL || PyErr_Occurred() || f->t->reason != NULL)
                return r;
        }
        return tracer_unsupported(f->t, false, "len() of this kind of value"), NULL;
    }
}

/* The exact type a value is known to have, or NULL. Borrowed. */
static PyObject *known_type(Value *v)
{
    switch (v->kind) {
    case V_TENSOR:
    case V_CONST:
    case V_OBJECT:
        return (PyObject *)Py_TYPE(v->obj);
    case V_TUPLE:
        return v->stands_for ? NULL : v->tuple_type ? v->tuple_type : (PyObject *)&PyTuple_Type;
    case V_LIST: return (PyObject *)&PyList_Type;
    case V_DICT: return v->stands_for ? NULL : (PyObject *)&PyDict_Type;
    case V_SET: return (PyObject *)&PySet_Type;
    case V_SLICE: return (PyObject *)&PySlice_Type;
    case V_NEWOBJ: return v->obj;
    case V_PARTIAL: return v->obj;
    case V_ZIP: return v->mapfn ? (PyObject *)&PyMap_Type : (PyObject *)&PyZip_Type;
    default: return NULL;
    }
}

static bool class_is_own_type(PyObject *tp);

/* (contract: translate_int.h) */
Value *tr_type_of(TFrame *f, Value *v)
{
    PyObject *tp = known_type(v);                       /* borrowed */
    if (tp == NULL)
        return tracer_unsupported(f->t, false, "type() of a value whose type is not known"), NULL;
    /* fixed by its guards; reached as type(<source>) when it has one */
    if (v->kind == V_NEWOBJ)
        return v->items[1];      /* the class it was made from */
    if ((v->kind == V_OBJECT || v->kind == V_CONST) && v->src >= 0) {
        int acc = guardset_accessor(f->t->gs, ACC_TYPE, v->src, 0, NULL, NULL);
        return acc < 0 ? NULL : value_from_source(f->t, acc, tp);
    }
    return value_new(f->t, V_CONST, tp);
}

/* (contract: translate_int.h) */
bool tr_class_attr_is_type(Value *v)
{
    PyObject *tp = known_type(v);                       /* borrowed */
    return tp != NULL && class_is_own_type(tp);
}

/* Whether isinstance() against class cls answers by the type alone, for
   good: its metaclass keeps type's __instancecheck__ (type itself,
   torch.Tensor's _TensorMeta), or is abc.ABCMeta, whose answer for a type
   is fixed unless a class is registered later (its caches are its own). */
static bool instancecheck_is_by_type(PyObject *cls)
{
    PyTypeObject *meta = Py_TYPE(cls);
    if (meta == &PyType_Type)
        return true;
    PyObject *name = PyUnicode_FromString("__instancecheck__");
    PyObject *own = name ? _PyType_Lookup(meta, name) : NULL;             /* borrowed */
    PyObject *types = name ? _PyType_Lookup(&PyType_Type, name) : NULL;   /* borrowed */
    Py_XDECREF(name);
    if (own != NULL && own == types)
        return true;
    PyObject *abc_name = PyUnicode_FromString("abc");
    PyObject *abc = abc_name ? PyImport_GetModule(abc_name) : NULL;
    Py_XDECREF(abc_name);
    PyObject *abcmeta = abc ? PyObject_GetAttrString(abc, "ABCMeta") : NULL;
    Py_XDECREF(abc);
    PyErr_Clear();
    bool r = abcmeta != NULL && (PyObject *)meta == abcmeta;
    Py_XDECREF(abcmeta);
    return r;
}

/* Whether instances of type tp report tp as their __class__ (object's
   descriptor, not a property of the class: a Mock made with a spec says it
   is of the spec's class, and isinstance() believes it). */
static bool class_is_own_type(PyObject *tp)
{
    static PyObject *class_name;
    if (class_name == NULL && (class_name = PyUnicode_InternFromString("__class__")) == NULL) {
        PyErr_Clear();
        return false;
    }
    return !PyType_Check(tp)
           || _PyType_Lookup((PyTypeObject *)tp, class_name) == _PyType_Lookup(&PyBaseObject_Type, class_name);
}

/* Whether isinstance() against cls runs no program code: cls is a class
   whose instance check goes by type (instancecheck_is_by_type), or a tuple
   of such (nested). */
static bool plain_type_or_tuple(PyObject *cls)
{
    if (PyType_Check(cls))
        return instancecheck_is_by_type(cls);
    if (!PyTuple_CheckExact(cls))
        return false;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(cls); i++)
        if (!plain_type_or_tuple(PyTuple_GET_ITEM(cls, i)))
            return false;
    return true;
}

/* sum(iterable[, start]): start + item, item by item, as sum() adds (on
   tensors too: the graph adds what eager code adds, in its order).  NULL
   when tracing stops. */
static Value *builtin_sum(TFrame *f, Value **args, int nargs)
{
    Value *it = tr_make_iter(f, args[0]);
    Value *acc = nargs == 2 ? args[1] : new_const(f->t, PyLong_FromLong(0));
    if (it == NULL || acc == NULL)
        return NULL;
    if (acc->kind == V_CONST && (PyUnicode_Check(acc->obj) || PyBytes_Check(acc->obj)))
        return tracer_unsupported(f->t, false, "sum() of strings"), NULL;
    for (; it->pos < it->n; it->pos++)
        if ((acc = tr_apply_binary(f, "add", "add", acc, it->items[it->pos], false)) == NULL)
            return NULL;
    return acc;
}

/* any(iterable) / all(iterable): each item's truth in order, stopping
   where the answer is known, as they do.  NULL when tracing stops. */
static Value *builtin_any_all(TFrame *f, Value *iterable, bool is_any)
{
    while (iterable->kind == V_GEN) {
        /* a generator runs only as far as the answer needs */
        Value *y;
        int r = tr_gen_resume(f, iterable, &y);
        int tv = r > 0 ? tr_truth(f, y, is_any ? "any()" : "all()") : r;
        if (tv < 0)
            return NULL;
        if (r == 0 || tv == is_any)
            return new_const(f->t, PyBool_FromLong(r == 0 ? !is_any : is_any));
    }
    Value *it = tr_make_iter(f, iterable);
    if (it == NULL)
        return NULL;
    while (it->pos < it->n) {
        int tv = tr_truth(f, it->items[it->pos++], is_any ? "any()" : "all()");
        if (tv < 0)
            return NULL;
        if (tv == is_any)
            return new_const(f->t, PyBool_FromLong(is_any));
    }
    return new_const(f->t, PyBool_FromLong(!is_any));
}

/* getattr(v, name, dflt) / hasattr(v, name) when v's lookup runs Python
   (a class's own __getattribute__, a property): the lookup traced, an
   AttributeError that reaches the call straight being a V_ABSENT
   (tr_attr_missing).  NULL when tracing stops. */
static Value *getattr_through_python(TFrame *f, Value *v, PyObject *name, Value *dflt)
{
    Tracer *t = f->t;
    static PyObject *getattr_name;
    if (getattr_name == NULL && (getattr_name = PyUnicode_InternFromString("__getattr__")) == NULL)
        return NULL;
    if (_PyType_Lookup(Py_TYPE(v->obj), getattr_name) != NULL)
        return tracer_unsupported(t, false, "%s() of a %s, whose class has __getattr__",
                                  dflt ? "getattr" : "hasattr", Py_TYPE(v->obj)->tp_name), NULL;
    int ta = guardset_accessor(t->gs, ACC_TYPE, v->src, 0, NULL, NULL);
    if (ta < 0 || guardset_add(t->gs, GUARD_CLASS_LACKS, ta, getattr_name, 0) < 0)
        return NULL;
    TFrame *saved = t->absent_frame;
    t->absent_frame = f;
    Value *r = tr_load_attr(f, v, name);
    t->absent_frame = saved;
    if (r == NULL)
        return NULL;
    if (r->kind == V_ABSENT)
        return dflt ? dflt : new_const(t, Py_NewRef(Py_False));
    return dflt ? r : new_const(t, Py_NewRef(Py_True));
}

/* callable(v): known for what the translator made, and for an object
   read through an accessor from its class -- whose __call__ is guarded
   present or absent (a class may gain one).  NULL when tracing stops. */
static Value *builtin_callable(TFrame *f, Value *v)
{
    Tracer *t = f->t;
    static PyObject *call_name;
    if (call_name == NULL && (call_name = PyUnicode_InternFromString("__call__")) == NULL)
        return NULL;
    int yes;
    switch (v->kind) {
    case V_FUNC: case V_BOUNDFN: case V_BOUND: case V_METHOD: case V_PARTIAL: case V_VMAP:
        yes = 1;
        break;
    case V_TUPLE: case V_LIST: case V_DICT: case V_SET: case V_SLICE: case V_ITER: case V_ZIP:
        yes = 0;
        break;
    case V_TENSOR:
        yes = Py_TYPE(v->obj)->tp_call != NULL;
        break;
    case V_NEWOBJ: {
        Value *cls = v->items[1];
        yes = _PyType_Lookup((PyTypeObject *)v->obj, call_name) != NULL;
        /* hasattr(cls, '__call__') is true of every class (type.__call__):
           what callable() reads is the class's own lookup */
        if (cls->src < 0 || (yes ? guardset_add(t->gs, GUARD_ID_MATCH, cls->src, (PyObject *)v->obj, 0)
                             : guardset_add(t->gs, GUARD_CLASS_LACKS, cls->src, call_name, 0)) < 0)
            return cls->src < 0 ? tracer_unsupported(t, false, "callable() of a new object"), NULL : NULL;
        break;
    }
    case V_CONST:
    case V_OBJECT: {
        /* a builtin class's tp_call is fixed, and the value's class is
           guarded (TYPE_MATCH or ID_MATCH); a Python class's __call__ is
           guarded by identity, and one without may gain it unnoticed (its
           lookup on the class would find type.__call__): not answered */
        PyTypeObject *tp = Py_TYPE(v->obj);
        yes = PyCallable_Check(v->obj);
        if (tp->tp_flags & Py_TPFLAGS_HEAPTYPE) {
            PyObject *call = _PyType_Lookup(tp, call_name);             /* borrowed */
            int ta = v->src < 0 || call == NULL ? -1 : guardset_accessor(t->gs, ACC_TYPE, v->src, 0, NULL, NULL);
            int ca = ta < 0 ? -1 : guardset_accessor(t->gs, ACC_ATTR, ta, 0, call_name, NULL);
            if (ca < 0 || guardset_add(t->gs, GUARD_ID_MATCH, ca, call, 0) < 0)
                return PyErr_Occurred() ? NULL
                       : (tracer_unsupported(t, false, "callable() of a %s", tp->tp_name), NULL);
        }
        break;
    }
    default:
        return tracer_unsupported(t, false, "callable() of this kind of value"), NULL;
    }
    return new_const(t, Py_NewRef(yes ? Py_True : Py_False));
}

/* getattr(v, name, dflt) (dflt non-NULL) or hasattr(v, name) of an object
   an accessor reaches: whether it has the attribute is guarded (HASATTR),
   and a present one is read as v.name is.  NULL when tracing stops. */
static Value *builtin_getattr_or_hasattr(TFrame *f, Value *v, PyObject *name, Value *dflt)
{
    Tracer *t = f->t;
    if (v->kind == V_NEWOBJ) {
        bool absent;
        TFrame *saved = t->absent_frame;
        t->absent_frame = f;        /* its AttributeError is caught here, root frame too */
        Value *r = tr_newobj_lookup(f, v, name, &absent);
        t->absent_frame = saved;
        if (r != NULL && r->kind == V_ABSENT)
            absent = true;   /* an AttributeError that returns straight here */
        if (r == NULL && !absent && tr_catch_attribute_error(f))
            absent = true;   /* its class's __getattr__ raised (nn.Module's register_buffer asks) */
        if (!absent)
            return r == NULL || dflt ? r : new_const(t, Py_NewRef(Py_True));
        return dflt ? dflt : new_const(t, Py_NewRef(Py_False));
    }
    if (v->kind == V_BOUND && dflt != NULL && (PyUnicode_CompareWithASCIIString(name, "__func__") == 0
                                               || PyUnicode_CompareWithASCIIString(name, "__self__") == 0)) {
        /* getattr(obj.method, "__func__", None): the class's function, as
           the generic lookup finds it (guarded so); "__self__": obj */
        if (PyUnicode_CompareWithASCIIString(name, "__self__") == 0)
            return v->items[0];
        Value *bf = tr_bound_as_function(f, v);
        return bf == NULL ? NULL : bf->kind == V_BOUNDFN ? bf->items[0]
               : (tracer_unsupported(t, false, "getattr() of a method's __func__ found this way"), NULL);
    }
    if (v->kind == V_CONST && v->src < 0 && value_is_plain_constant(v->obj)) {
        /* getattr(None, "is_compileable", False): a constant's attributes
           are its type's */
        PyObject *got = PyObject_GetAttr(v->obj, name);
        if (got == NULL && !PyErr_ExceptionMatches(PyExc_AttributeError))
            return NULL;
        PyErr_Clear();
        if (dflt == NULL) {                                     /* hasattr */
            bool has = got != NULL;
            Py_XDECREF(got);
            return new_const(t, Py_NewRef(has ? Py_True : Py_False));
        }
        return got ? new_const(t, got) : dflt;
    }
    if ((v->kind != V_CONST && v->kind != V_OBJECT) || v->src < 0)
        return tracer_unsupported(t, false, "%s() of a value no accessor reaches",
                                  dflt ? "getattr" : "hasattr"), NULL;
    bool written;
    Value *w = tr_written_attr(f, v, name, &written);
    if (PyErr_Occurred())
        return NULL;
    if (written && w != NULL)
        return dflt ? w : new_const(t, Py_NewRef(Py_True));
    if (written)
        return dflt ? dflt : new_const(t, Py_NewRef(Py_False));
    bool module;
    int mhas = value_module_has_attr(t, v, name, &module);
    if (module) {
        if (mhas < 0)
            return NULL;
        if (!mhas)
            return dflt ? dflt : new_const(t, Py_NewRef(Py_False));
        return dflt ? tr_load_attr(f, v, name) : new_const(t, Py_NewRef(Py_True));
    }
    if (!tr_attr_read_is_pure(v->obj, name))
        return getattr_through_python(f, v, name, dflt);
    PyObject *got = PyObject_GetAttr(v->obj, name);
    int has = got != NULL;
    Py_XDECREF(got);
    if (!has && !PyErr_ExceptionMatches(PyExc_AttributeError))
        return NULL;
    PyErr_Clear();
    if (guardset_add(t->gs, GUARD_HASATTR, v->src, name, has) < 0)
        return NULL;
    if (!has)
        return dflt ? dflt : new_const(t, Py_NewRef(Py_False));
    if (dflt == NULL)
        return new_const(t, Py_NewRef(Py_True));
    return tr_load_attr(f, v, name);
}

/* sorted(iterable[, reverse=b]) of constants: the real sorted() of them,
   as a new list this frame owns.  NULL when tracing stops. */
static Value *builtin_sorted(TFrame *f, PyObject *fn, Value **args, int nargs, PyObject *kwnames)
{
    Tracer *t = f->t;
    int nkw = kwnames ? (int)PyTuple_GET_SIZE(kwnames) : 0;
    if (nargs - nkw != 1 || nkw > 1
        || (nkw == 1 && (PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, 0), "reverse") != 0
                         || !foldable(args[1]))))
        return tracer_unsupported(t, false, "sorted() with a key or these arguments"), NULL;
    Value *it = tr_make_iter(f, args[0]);
    if (it == NULL)
        return NULL;
    PyObject *items = PyList_New(0);
    for (int i = it->pos; items != NULL && i < it->n; i++) {
        if (!foldable(it->items[i])) {
            Py_DECREF(items);
            return tracer_unsupported(t, false, "sorted() of values that are not constants"), NULL;
        }
        if (PyList_Append(items, it->items[i]->obj) < 0)
            Py_CLEAR(items);
    }
    if (items == NULL)
        return NULL;
    it->pos = it->n;                                    /* consumed */
    PyObject *pos = PyTuple_Pack(1, items);
    PyObject *kw = nkw ? Py_BuildValue("{sO}", "reverse", args[1]->obj) : NULL;
    PyObject *r = pos && (!nkw || kw) ? PyObject_Call(fn, pos, kw) : NULL;
    Py_DECREF(items);
    Py_XDECREF(pos);
    Py_XDECREF(kw);
    if (r == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_Exception))
            return NULL;
        PyErr_Clear();
        return tracer_break(t, STOP_CALL, "sorted() raises on these values"), NULL;
    }
    Value *out = value_new(t, V_LIST, NULL);
    for (Py_ssize_t i = 0; out != NULL && i < PyList_GET_SIZE(r); i++) {
        Value *c = value_new(t, V_CONST, PyList_GET_ITEM(r, i));
        if (c == NULL || value_append(t, out, c) < 0)
            out = NULL;
    }
    Py_DECREF(r);
    return out;
}

/* isinstance(x, cls) for a class whose metaclass defines __instancecheck__
   in Python (torch.nn.Parameter's _ParameterMeta): that method inlined,
   reached through type(cls) and guarded to stay it, and the truth of what
   it returns.  NULL when tracing stops. */
static Value *instancecheck_inlined(TFrame *f, Value *cls, Value *x)
{
    bool handled;
    Value *r = tr_call_own_method(f, cls, "__instancecheck__", &x, 1, &handled);
    if (!handled)
        return PyErr_Occurred() ? NULL
               : (tracer_unsupported(f->t, false, "isinstance() on these values"), NULL);
    int b = r ? tr_truth(f, r, "isinstance()") : -1;
    return b < 0 ? NULL : new_const(f->t, PyBool_FromLong(b));
}

/* (contract: translate_int.h) */
Value *tr_isinstance_by_type(TFrame *f, Value *x, PyObject *cls)
{
    PyObject *tp = known_type(x);
    if (tp == NULL || !PyType_Check(cls) || !class_is_own_type(tp))
        return tracer_unsupported(f->t, false, "type.__instancecheck__ on these values"), NULL;
    return new_const(f->t, PyBool_FromLong(PyType_IsSubtype((PyTypeObject *)tp, (PyTypeObject *)cls)));
}

/* getattr(x, attr, dflt) / hasattr(x, attr) (dflt NULL) of a tensor:
   a tensor an op made has no attributes of its own, its type answers
   (hasattr(x, "jax"), hasattr(t, "shape"), getattr(t, "_is_param",
   False)); an input's are guarded (HASATTR).  A present one is read as
   t.name (an input's own through an accessor: load_tensor_attr).  NULL
   when tracing stops. */
static Value *tensor_getattr_or_hasattr(TFrame *f, const char *name, Value *x, PyObject *attr, Value *dflt)
{
    Tracer *t = f->t;
    PyObject *found = _PyType_Lookup(Py_TYPE(x->obj), attr);
    int has = found != NULL;
    if (x->node->op == NODE_PLACEHOLDER && !found) {
        if (x->src < 0 || Py_TYPE(x->obj)->tp_getattro != PyObject_GenericGetAttr)
            return tracer_break(t, STOP_CALL, "call to builtin %s on a tensor value", name), NULL;
        PyObject *got = PyObject_GetAttr(x->obj, attr);
        has = got != NULL;
        Py_XDECREF(got);
        if (!has && !PyErr_ExceptionMatches(PyExc_AttributeError))
            return NULL;
        PyErr_Clear();
        if (guardset_add(t->gs, GUARD_HASATTR, x->src, attr, has) < 0)
            return NULL;
    }
    if (dflt != NULL)
        return has ? tr_load_attr(f, x, attr) : dflt;
    return new_const(t, Py_NewRef(has ? Py_True : Py_False));
}

/* Whether v is an iterator itself (what iter() returns as it is, and what
   map() pulls from lazily): a dict view is none. */
static bool is_iterator(Value *v)
{
    return (v->kind == V_ITER && !v->view) || v->kind == V_GEN || v->kind == V_ZIP;
}

/* next(it[, default]) of an iterator made while tracing, iter(x).
   *handled false when the arguments are not of those. */
static Value *builtin_next_or_iter(TFrame *f, const char *name, Value **args, int nargs, bool *handled)
{
    *handled = true;
    if (strcmp(name, "next") == 0 && nargs == 1 && args[0]->kind == V_GEN)
        return tr_gen_next(f, args[0]);
    if (strcmp(name, "next") == 0 && nargs == 2 && args[0]->kind == V_GEN) {
        /* next((x for x in xs if ...), None): the default once it ended */
        Value *v;
        int r = tr_gen_resume(f, args[0], &v);
        return r > 0 ? v : r == 0 ? args[1] : NULL;
    }
    if (strcmp(name, "next") == 0 && (nargs == 1 || nargs == 2) && args[0]->kind == V_ITER) {
        /* as FOR_ITER steps it; exhausted: the default, or StopIteration
           raised by the call run eagerly */
        Value *it = args[0];
        if (it->pos < it->n)
            return it->items[it->pos++];
        return nargs == 2 ? args[1]
               : (tracer_break(f->t, STOP_CALL, "next() of an exhausted iterator (StopIteration)"), NULL);
    }
    if (strcmp(name, "iter") == 0 && nargs == 1) {
        /* iter(x), as GET_ITER takes it: an iterator or generator is
           itself (a dict view is no iterator) */
        Value *x = args[0];
        if (is_iterator(x))
            return x;
        Value *it = tr_make_iter(f, x);
        if (it != NULL && it != x && it->kind == V_ITER)
            it->made_by_iter = true;
        return it;
    }
    *handled = false;
    return NULL;
}

/* Calls of functions of the builtins module: next, iter, len, isinstance,
   min, max, abs, getattr, sorted, sum, any, all are modelled; any other call, or one on a tensor, is a
   break.  NULL when tracing stops. */
Value *tr_call_builtin(TFrame *f, PyObject *fn, Value **args, int nargs, PyObject *kwnames)
{
    Tracer *t = f->t;
    const char *name = ((PyCFunctionObject *)fn)->m_ml->ml_name;
    bool nokw = kwnames == NULL || PyTuple_GET_SIZE(kwnames) == 0;
    if (nokw && (strcmp(name, "next") == 0 || strcmp(name, "iter") == 0)) {
        bool handled;
        Value *r = builtin_next_or_iter(f, name, args, nargs, &handled);
        if (handled)
            return r;
    }
    if (strcmp(name, "len") == 0 && nargs == 1 && nokw)
        return builtin_len(f, args[0]);
    if (strcmp(name, "isinstance") == 0 && nargs == 2 && nokw) {
        PyObject *tp = known_type(args[0]);
        PyObject *cls = NULL;
        if (args[1]->kind == V_CONST)
            cls = Py_NewRef(args[1]->obj);
        else if (args[1]->kind == V_TUPLE && (cls = value_as_constant(t, args[1])) == NULL)
            return NULL;
        if (tp != NULL && cls != NULL && PyType_Check(cls) && !plain_type_or_tuple(cls)
            && class_is_own_type(tp) && args[1]->kind == V_CONST) {
            Py_DECREF(cls);
            return instancecheck_inlined(f, args[1], args[0]);
        }
        if (tp == NULL || cls == NULL || !plain_type_or_tuple(cls) || !class_is_own_type(tp)) {
            Py_XDECREF(cls);
            return tracer_unsupported(t, false, "isinstance() on these values"), NULL;
        }
        int r = PyObject_IsSubclass(tp, cls);
        Py_DECREF(cls);
        return r < 0 ? NULL : new_const(t, PyBool_FromLong(r));
    }
    if (strcmp(name, "issubclass") == 0 && nargs == 2 && nokw && args[0]->kind == V_CONST
        && PyType_Check(args[0]->obj) && (args[1]->kind == V_CONST || args[1]->kind == V_TUPLE)) {
        /* of classes the guards fix, against classes whose check goes by
           type (their metaclass's, as isinstance() above) */
        PyObject *cls = args[1]->kind == V_CONST ? Py_NewRef(args[1]->obj) : value_as_constant(t, args[1]);
        if (cls == NULL)
            return PyErr_Occurred() ? NULL : (tracer_unsupported(t, false, "issubclass() of these values"), NULL);
        int r = plain_type_or_tuple(cls) ? PyObject_IsSubclass(args[0]->obj, cls) : -2;
        Py_DECREF(cls);
        if (r == -2)
            return tracer_unsupported(t, false, "issubclass() against a class with its own check"), NULL;
        return r < 0 ? NULL : new_const(t, PyBool_FromLong(r));
    }
    if ((strcmp(name, "min") == 0 || strcmp(name, "max") == 0 || strcmp(name, "abs") == 0)
        && nokw && nargs >= 1) {
        if (strcmp(name, "abs") == 0 && nargs == 1 && args[0]->kind == V_TENSOR)
            return tensorops_call(t, NODE_CALL_FUNCTION, fn, "abs", args, 1, NULL);
        Value *single = nargs == 1 && (args[0]->kind == V_TUPLE || args[0]->kind == V_LIST
                                       || args[0]->kind == V_ITER) ? args[0] : NULL;
        if (single != NULL && single->kind == V_ITER) {
            Value *items = value_new(t, V_TUPLE, NULL);
            for (int i = single->pos; items != NULL && i < single->n; i++)
                if (value_append(t, items, single->items[i]) < 0)
                    return NULL;
            if (items == NULL)
                return NULL;
            single->pos = single->n;       /* consumed */
            single = items;
        }
        PyObject *cargs = single ? const_args(single->items, single->n) : const_args(args, nargs);
        if (cargs == NULL && !PyErr_Occurred() && name[0] == 'm' && (single != NULL || nargs >= 2)) {
            /* sizes (an expression each, or int constants): compared as
               min() / max() compare, the relations guarded; the first of
               equal ones wins.  (One argument is an iterable, unless a
               list or tuple made while tracing: not a candidate) */
            Value **items = single ? single->items : args;
            int n = single ? single->n : nargs;
            Value *best = n > 0 ? items[0] : NULL;
            for (int i = 1; best != NULL && i < n; i++) {
                Value *better = NULL;
                int r = tr_sym_operator(t, name[1] == 'a' ? "gt" : "lt", items[i], best, &better, NULL);
                if (r < 0)
                    return NULL;
                if (r != 1 || better == NULL || better->kind != V_CONST) {
                    best = NULL;
                    break;
                }
                if (better->obj == Py_True)
                    best = items[i];
            }
            if (best != NULL)
                return best;
        }
        if (cargs == NULL)
            return PyErr_Occurred() ? NULL : (tracer_unsupported(t, false, "%s() on values that are not constants", name), NULL);
        PyObject *r = single ? PyObject_CallOneArg(fn, cargs) : PyObject_Call(fn, cargs, NULL);
        Py_DECREF(cargs);
        return new_const(t, r);
    }
    if (strcmp(name, "sorted") == 0 && nargs >= 1 && args[0]->kind != V_TENSOR)
        return builtin_sorted(f, fn, args, nargs, kwnames);
    if (strcmp(name, "sum") == 0 && nokw && (nargs == 1 || nargs == 2) && args[0]->kind != V_TENSOR)
        return builtin_sum(f, args, nargs);
    if ((strcmp(name, "any") == 0 || strcmp(name, "all") == 0) && nokw && nargs == 1
        && args[0]->kind != V_TENSOR)
        return builtin_any_all(f, args[0], name[1] == 'n');
    if (((strcmp(name, "hasattr") == 0 && nargs == 2) || (strcmp(name, "getattr") == 0 && nargs == 3))
        && nokw && args[0]->kind == V_TENSOR && args[1]->kind == V_CONST && PyUnicode_CheckExact(args[1]->obj))
        return tensor_getattr_or_hasattr(f, name, args[0], args[1]->obj, nargs == 3 ? args[2] : NULL);
    if (nargs >= 1 && args[0]->kind == V_TENSOR)
        return tracer_break(t, STOP_CALL, "call to builtin %s on a tensor value", name), NULL;
    if (strcmp(name, "callable") == 0 && nokw && nargs == 1)
        return builtin_callable(f, args[0]);
    if (((strcmp(name, "setattr") == 0 && nargs == 3) || (strcmp(name, "delattr") == 0 && nargs == 2))
        && nokw && args[1]->kind == V_CONST && PyUnicode_CheckExact(args[1]->obj))
        return tr_store_attr(f, args[0], args[1]->obj, nargs == 3 ? args[2] : NULL) < 0 ? NULL
               : new_const(t, Py_NewRef(Py_None));
    if (strcmp(name, "getattr") == 0 && nokw && nargs == 2 && args[1]->kind == V_CONST
        && PyUnicode_CheckExact(args[1]->obj))
        return tr_load_attr(f, args[0], args[1]->obj);
    if (((strcmp(name, "getattr") == 0 && nargs == 3) || (strcmp(name, "hasattr") == 0 && nargs == 2))
        && nokw && args[1]->kind == V_CONST && PyUnicode_CheckExact(args[1]->obj))
    {
        Value *r = builtin_getattr_or_hasattr(f, args[0], args[1]->obj, name[0] == 'h' ? NULL : args[2]);
        if (r == NULL)
            t->raised = NULL;   /* getattr(o, n, d) / hasattr catch AttributeError: not modelled */
        return r;
    }
    return tracer_break(t, STOP_CALL, "call to builtin %s", name), NULL;
}

/* ---- builtin types ---- */

/* int(), float(), bool(), range(), slice(), str() of constants.  NULL when
   tracing stops. */
static Value *call_scalar_type(TFrame *f, PyObject *tp, Value **args, int nargs)
{
    Tracer *t = f->t;
    PyObject *cargs = const_args(args, nargs);
    if (cargs == NULL) {
        if (PyErr_Occurred())
            return NULL;
        if (nargs == 1 && args[0]->kind == V_TENSOR)
            return tracer_break(t, STOP_ESCAPE, "data escape: %s() of a tensor value",
                                ((PyTypeObject *)tp)->tp_name), NULL;
        if (nargs == 1 && tp == (PyObject *)&PyBool_Type) {
            /* bool(container or object made while tracing): its truth */
            int truth = tr_truth(f, args[0], "bool()");
            return truth < 0 ? NULL : value_new(t, V_CONST, truth ? Py_True : Py_False);
        }
        return tracer_unsupported(t, false, "%s() of a value that is not a constant",
                                  ((PyTypeObject *)tp)->tp_name), NULL;
    }
    PyObject *r = PyObject_Call(tp, cargs, NULL);
    Py_DECREF(cargs);
    return new_const(t, r);
}

/* tuple() / list() of nothing or of what an iterable yields (consumed).
   NULL when tracing stops. */
static Value *call_sequence_type(TFrame *f, PyObject *tp, Value **args, int nargs)
{
    Tracer *t = f->t;
    Value *out = value_new(t, tp == (PyObject *)&PyTuple_Type ? V_TUPLE : V_LIST, NULL);
    if (out == NULL)
        return NULL;
    if (nargs == 1) {
        Value *it = tr_make_iter(f, args[0]);
        if (it == NULL)
            return NULL;
        for (int i = it->pos; i < it->n; i++)
            if (value_append(t, out, it->items[i]) < 0)
                return NULL;
        it->pos = it->n;
    }
    return out;
}

/* enumerate(iterable[, start]): a V_ITER of (index, item) pairs that
   remembers its source (derive_iter).  NULL when tracing stops. */
static Value *call_enumerate(TFrame *f, Value **args, int nargs)
{
    Tracer *t = f->t;
    long start = 0;
    if (nargs == 2) {
        if (!foldable(args[1]) || !PyLong_CheckExact(args[1]->obj))
            return tracer_unsupported(t, false, "enumerate() with a non-constant start"), NULL;
        start = PyLong_AsLong(args[1]->obj);
    }
    Value *src = tr_make_iter(f, args[0]);
    Value *out = src ? value_new(t, V_ITER, NULL) : NULL;
    if (out == NULL || tr_derive_iter(t, out, &src, 1, start) < 0)
        return NULL;
    int first = src->pos;
    src->pos = src->n;   /* consumed */
    for (int i = first; i < src->n; i++) {
        Value *pair = value_new(t, V_TUPLE, NULL);
        Value *idx = new_const(t, PyLong_FromLong(start + i - first));
        if (pair == NULL || idx == NULL || value_append(t, pair, idx) < 0
            || value_append(t, pair, src->items[i]) < 0 || value_append(t, out, pair) < 0)
            return NULL;
    }
    return out;
}

/* zip(*iterables), at most 8: a V_ITER of tuples that remembers its
   sources (derive_iter).  NULL when tracing stops. */
static Value *call_zip(TFrame *f, Value **args, int nargs)
{
    Tracer *t = f->t;
    Value *its[8];
    bool lazy = false;
    if (nargs > 8)
        return tracer_unsupported(t, false, "zip() of more than 8 iterables"), NULL;
    for (int k = 0; k < nargs; k++) {
        Value *a = args[k];
        if (a->kind == V_NEWOBJ) {
            /* its __iter__: a generator stays one (pulled lazily) */
            Value *r = tr_newobj_protocol(f, a, "__iter__", NULL, 0);
            if (r == NULL)
                return NULL;
            a = r;
        }
        its[k] = a->kind == V_GEN ? a : tr_make_iter(f, a);
        if (its[k] == NULL)
            return NULL;
        lazy |= its[k]->kind == V_GEN;
    }
    if (lazy) {
        /* a generator runs when the loop asks for the next tuple, as zip
           pulls it: V_ZIP (tr_interp.c FOR_ITER) */
        Value *z = value_new(t, V_ZIP, NULL);
        for (int k = 0; z != NULL && k < nargs; k++)
            if (value_append(t, z, its[k]) < 0)
                return NULL;
        return z;
    }
    Value *out = value_new(t, V_ITER, NULL);
    if (out == NULL || tr_derive_iter(t, out, its, nargs, -1) < 0)
        return NULL;
    for (;;) {
        Value *tup = value_new(t, V_TUPLE, NULL);
        if (tup == NULL)
            return NULL;
        bool done = false;
        for (int k = 0; k < nargs && !done; k++) {
            if (its[k]->pos >= its[k]->n)
                done = true;   /* as zip: items already taken this round are lost */
            else if (value_append(t, tup, its[k]->items[its[k]->pos++]) < 0)
                return NULL;
        }
        if (done)
            break;
        if (value_append(t, out, tup) < 0)
            return NULL;
    }
    return out;
}

/* dict(), dict(mapping or iterable of pairs, **kw) and set(), set(iterable):
   a new dict or set this frame owns, of what the arguments hold (keys and
   members constants).  NULL when tracing stops. */
static Value *call_dict_or_set(TFrame *f, PyObject *tp, Value **args, int nargs, PyObject *kwnames)
{
    Tracer *t = f->t;
    bool is_dict = tp == (PyObject *)&PyDict_Type;
    int nkw = kwnames ? (int)PyTuple_GET_SIZE(kwnames) : 0, npos = nargs - nkw;
    Value *out = is_dict ? value_new(t, V_DICT, NULL) : tr_new_set(t);
    if (out == NULL || (is_dict && (out->obj = PyList_New(0)) == NULL))
        return NULL;
    if (npos > 1 || (!is_dict && nkw > 0))
        return tracer_unsupported(t, false, "%s() with these arguments", ((PyTypeObject *)tp)->tp_name), NULL;
    if (npos == 1 && is_dict && args[0]->kind == V_DICT) {
        for (int i = 0; i < args[0]->n; i++)
            if (tr_dict_set_item(t, out, PyList_GET_ITEM(args[0]->obj, i), args[0]->items[i]) < 0)
                return NULL;
    }
    else if (npos == 1 && !is_dict) {
        bool handled;
        if (tr_set_merge(f, out, args[0], &handled) < 0)
            return NULL;
        if (!handled) {
            Value *it = tr_make_iter(f, args[0]);
            if (it == NULL)
                return NULL;
            for (int i = it->pos; i < it->n; i++)
                if (tr_set_add(t, out, it->items[i]) < 0)
                    return NULL;
            it->pos = it->n;
        }
    }
    else if (npos == 1) {
        Value *it = tr_make_iter(f, args[0]);
        if (it == NULL)
            return NULL;
        for (int i = it->pos; i < it->n; i++) {
            Value *item = it->items[i];
            if (item->kind == V_CONST && PyTuple_CheckExact(item->obj) && PyTuple_GET_SIZE(item->obj) == 2) {
                Value *v = value_new(t, V_CONST, PyTuple_GET_ITEM(item->obj, 1));
                if (v == NULL || tr_dict_set_item(t, out, PyTuple_GET_ITEM(item->obj, 0), v) < 0)
                    return NULL;
                continue;
            }
            if (item->kind != V_TUPLE || item->n != 2 || !foldable(item->items[0]))
                return tracer_unsupported(t, false, "dict() of items that are not (constant key, "
                                          "value) pairs"), NULL;
            if (tr_dict_set_item(t, out, item->items[0]->obj, item->items[1]) < 0)
                return NULL;
        }
        it->pos = it->n;
    }
    for (int k = 0; k < nkw; k++)
        if (tr_dict_set_item(t, out, PyTuple_GET_ITEM(kwnames, k), args[npos + k]) < 0)
            return NULL;
    return out;
}

/* (contract: translate_int.h) */
Value *tr_make_exception(TFrame *f, PyObject *cls, Value **args, int nargs)
{
    PyObject *cargs = const_args(args, nargs);
    if (cargs == NULL)
        return PyErr_Occurred() ? NULL
               : (tracer_unsupported(f->t, false, "an exception made of values that are not constants"), NULL);
    Value *e = new_const(f->t, PyObject_Call(cls, cargs, NULL));
    Py_DECREF(cargs);
    if (e != NULL)
        e->kind = V_EXC;
    return e;
}

/* ---- inspect.signature ---- */

/* (contract: translate_int.h) */
bool tr_is_inspect_signature(PyObject *fn)
{
    /* the code's name first: a module lookup on every traced call costs */
    return PyFunction_Check(fn)
           && PyUnicode_CompareWithASCIIString(((PyCodeObject *)PyFunction_GET_CODE(fn))->co_name,
                                               "signature") == 0
           && fn == tensorlib_loaded_module_attr("inspect", "signature");
}

/* (contract: translate_int.h) */
bool tr_is_signature_object(PyObject *obj)
{
    /* the type's name first: this is asked of every constant's attribute */
    const char *tn = Py_TYPE(obj)->tp_name;
    if (strcmp(tn, "Signature") != 0 && strcmp(tn, "Parameter") != 0)
        return false;
    PyObject *s = tensorlib_loaded_module_attr("inspect", "Signature");
    PyObject *p = tensorlib_loaded_module_attr("inspect", "Parameter");
    return (s != NULL && Py_IS_TYPE(obj, (PyTypeObject *)s))
           || (p != NULL && Py_IS_TYPE(obj, (PyTypeObject *)p));
}

/* Guard what inspect.signature reads of function fnv (reached by an
   accessor): its identity, code, defaults and annotations, and that it has
   no __wrapped__ or __signature__.  0 / -1. */
static int guard_signature_inputs(Tracer *t, Value *fnv)
{
    static const char *const by_identity[] = {"__defaults__", "__kwdefaults__", "__annotations__"};
    if (guardset_add(t->gs, GUARD_ID_MATCH, fnv->src, fnv->obj, 0) < 0
        || guardset_add(t->gs, GUARD_CODE_MATCH, fnv->src, PyFunction_GET_CODE(fnv->obj), 0) < 0)
        return -1;
    for (size_t i = 0; i < sizeof by_identity / sizeof by_identity[0]; i++) {
        PyObject *name = PyUnicode_FromString(by_identity[i]);
        PyObject *v = name ? PyObject_GetAttr(fnv->obj, name) : NULL;
        int acc = v ? guardset_accessor(t->gs, ACC_ATTR, fnv->src, 0, name, NULL) : -1;
        int rc = acc < 0 ? -1 : guardset_add(t->gs, GUARD_ID_MATCH, acc, v, 0);
        Py_XDECREF(v);
        Py_XDECREF(name);
        if (rc < 0)
            return -1;
    }
    static const char *const absent[] = {"__wrapped__", "__signature__"};
    for (size_t i = 0; i < sizeof absent / sizeof absent[0]; i++) {
        PyObject *name = PyUnicode_FromString(absent[i]);
        int has = name ? PyObject_HasAttr(fnv->obj, name) : -1;
        int rc = has != 0 ? -1 : guardset_add(t->gs, GUARD_HASATTR, fnv->src, name, 0);
        Py_XDECREF(name);
        if (has > 0)
            return tracer_unsupported(t, false, "inspect.signature() of a function with %s", absent[i]);
        if (rc < 0)
            return -1;
    }
    return 0;
}

/* (contract: translate_int.h) */
Value *tr_inspect_signature(TFrame *f, PyObject *fn, Value *v)
{
    Tracer *t = f->t;
    if ((v->kind == V_OBJECT || v->kind == V_CONST) && v->src >= 0 && PyMethod_Check(v->obj)
        && (v = tr_split_method_object(t, v)) == NULL)
        return NULL;
    if (v->kind == V_BOUND && (v = tr_bound_as_function(f, v)) == NULL)
        return NULL;
    bool bound = v->kind == V_BOUNDFN;
    Value *fnv = bound ? v->items[0] : v;
    if (fnv->kind != V_CONST || fnv->src < 0 || !PyFunction_Check(fnv->obj))
        return tracer_unsupported(t, false, "inspect.signature() of this kind of value"), NULL;
    if (guard_signature_inputs(t, fnv) < 0)
        return NULL;
    /* a bound method's signature does not depend on what it is bound to */
    PyObject *callable = bound ? PyMethod_New(fnv->obj, Py_None) : Py_NewRef(fnv->obj);
    PyObject *sig = callable ? PyObject_CallOneArg(fn, callable) : NULL;
    Py_XDECREF(callable);
    if (sig == NULL && PyErr_ExceptionMatches(PyExc_Exception)) {
        PyErr_Clear();
        return tracer_break(t, STOP_CALL, "inspect.signature() raises on this function"), NULL;
    }
    return new_const(t, sig);      /* immutable: read by tr_signature_attr */
}

/* (contract: translate_int.h) */
Value *tr_signature_attr(TFrame *f, Value *base, PyObject *name)
{
    Tracer *t = f->t;
    PyObject *r = PyObject_GetAttr(base->obj, name);
    if (r == NULL)
        return NULL;
    if (Py_IS_TYPE(r, &PyDictProxy_Type)) {
        /* Signature.parameters: a read-only mapping of names to Parameters */
        PyObject *items = PyMapping_Items(r);
        Py_DECREF(r);
        Value *d = items ? value_new(t, V_DICT, NULL) : NULL;
        if (d == NULL || (d->obj = PyList_New(0)) == NULL) {
            Py_XDECREF(items);
            return NULL;
        }
        d->stands_for = "mappingproxy";
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(items); i++) {
            PyObject *kv = PyList_GET_ITEM(items, i);
            Value *pv = value_new(t, V_CONST, PyTuple_GET_ITEM(kv, 1));
            if (pv == NULL || tr_dict_set_item(t, d, PyTuple_GET_ITEM(kv, 0), pv) < 0) {
                Py_DECREF(items);
                return NULL;
            }
        }
        Py_DECREF(items);
        return d;
    }
    if (value_is_plain_constant(r) || tr_is_signature_object(r) || Py_IsNone(r))
        return new_const(t, r);
    PyObject *tn = PyType_GetName(Py_TYPE(r));
    Py_DECREF(r);
    tracer_unsupported(t, false, "attribute '%U' of a signature: a %S", name, tn ? tn : Py_None);
    Py_XDECREF(tn);
    return NULL;
}

/* map(func, *iterables): lazy, as map is -- a V_ZIP of the iterables'
   iterators with func (mapfn): each item taken (FOR_ITER, or all at once by
   list(), tuple(), ...) pulls one item from each iterator in order, the
   first that has none ending it, and calls func on them then (tr_interp.c
   tr_iter_next), so the calls and pulls happen when eager's would.  NULL
   when tracing stops. */
static Value *call_map(TFrame *f, Value **args, int nargs)
{
    Tracer *t = f->t;
    Value *z = value_new(t, V_ZIP, NULL);
    if (z == NULL)
        return NULL;
    for (int k = 1; k < nargs; k++) {
        Value *a = args[k];
        Value *it = is_iterator(a) ? a : tr_make_iter(f, a);
        if (it == NULL || value_append(t, z, it) < 0)
            return NULL;
    }
    z->mapfn = args[0];
    return z;
}

/* Calls of builtin types: range, int, float, bool, slice, str, tuple,
   list, dict, set, enumerate, zip, map; any other is a break.  NULL when
   tracing stops. */
Value *tr_call_type(TFrame *f, PyObject *tp, Value **args, int nargs, PyObject *kwnames)
{
    Tracer *t = f->t;
    bool nokw = kwnames == NULL || PyTuple_GET_SIZE(kwnames) == 0;
    if (tp == (PyObject *)&PyZip_Type && !nokw && PyTuple_GET_SIZE(kwnames) == 1
        && PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, 0), "strict") == 0
        && foldable(args[nargs - 1]) && nargs >= 2) {
        /* zip(..., strict=b): the lengths are known, so is whether it raises */
        int strict = PyObject_IsTrue(args[nargs - 1]->obj);
        if (strict < 0)
            return NULL;
        for (int k = 0; strict && k < nargs - 1; k++) {
            Value *it = tr_make_iter(f, args[k]);
            Value *first = k ? tr_make_iter(f, args[0]) : it;
            if (it == NULL || first == NULL)
                return NULL;
            if (it->n - it->pos != first->n - first->pos)
                return tracer_unsupported(t, false, "zip(strict=True) of iterables of different lengths"), NULL;
        }
        return call_zip(f, args, nargs - 1);
    }
    if (tp == (PyObject *)&PyDict_Type || tp == (PyObject *)&PySet_Type)
        return call_dict_or_set(f, tp, args, nargs, kwnames);
    if (tp == (PyObject *)&PyODict_Type && nargs == 0) {
        /* OrderedDict(): read as the dict it is (the hook tables of an
           nn.Module made while tracing); never handed to the program */
        Value *d = value_new(t, V_DICT, NULL);
        if (d == NULL || (d->obj = PyList_New(0)) == NULL)
            return NULL;
        d->stands_for = "collections.OrderedDict";
        return d;
    }
    if (tr_exception_class_is_plain(tp) && nokw)
        return tr_make_exception(f, tp, args, nargs);
    if (tp == (PyObject *)&PyEnum_Type && nargs == 2 && !nokw && PyTuple_GET_SIZE(kwnames) == 1
        && PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, 0), "start") == 0)
        return call_enumerate(f, args, nargs);          /* enumerate(xs, start=k) */
    if (!nokw)
        return tracer_unsupported(t, false, "keyword arguments to %s()", ((PyTypeObject *)tp)->tp_name), NULL;
    if (tp == (PyObject *)&PyRange_Type || tp == (PyObject *)&PyLong_Type
        || tp == (PyObject *)&PyFloat_Type || tp == (PyObject *)&PyBool_Type
        || tp == (PyObject *)&PySlice_Type || tp == (PyObject *)&PyUnicode_Type)
        return call_scalar_type(f, tp, args, nargs);
    if (tp == (PyObject *)&PyTuple_Type && nargs == 1
        && ((args[0]->kind == V_TUPLE && args[0]->stands_for == NULL)
            || (args[0]->kind == V_CONST && PyTuple_CheckExact(args[0]->obj))))
        return args[0];   /* tuple(t) is t itself, as eagerly */
    if ((tp == (PyObject *)&PyTuple_Type || tp == (PyObject *)&PyList_Type) && nargs <= 1)
        return call_sequence_type(f, tp, args, nargs);
    if (tp == (PyObject *)&PySuper_Type && (nargs == 0 || nargs == 2))
        return tr_make_super(f, nargs ? args[0] : NULL, nargs ? args[1] : NULL);
    if (tp == (PyObject *)&PyType_Type && nargs == 1 && known_type(args[0]) != NULL)
        return tr_type_of(f, args[0]);
    if (tp == (PyObject *)&PyEnum_Type && (nargs == 1 || nargs == 2))
        return call_enumerate(f, args, nargs);
    if (tp == (PyObject *)&PyZip_Type && nargs >= 1)
        return call_zip(f, args, nargs);
    if (tp == (PyObject *)&PyReversed_Type && nargs == 1)
        return tr_reversed(f, args[0]);
    if (tp == (PyObject *)&PyMap_Type && nargs >= 2)
        return call_map(f, args, nargs);
    return tracer_break(t, STOP_CALL, "call to %s()", ((PyTypeObject *)tp)->tp_name), NULL;
}
