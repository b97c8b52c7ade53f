/*
 * tr_newobj.c -- objects of the program's classes made while translating
 * (DESIGN.md 3.4; contract: translate_int.h).
 *
 * `C(*args)`, for a class whose instances are plain -- made by
 * object.__new__ through type's own __call__, their storage an instance
 * __dict__, the object slots of __slots__, or both -- is a V_NEWOBJ: its
 * __init__ is inlined with the new value as self, and its attributes are
 * read and written as object.__getattribute__ and object.__setattr__
 * would, in a V_DICT the translator owns (items[0]).  A slot (its member
 * descriptor guarded by identity) is stored there too: the dict stands
 * for the object's storage, so `o.__dict__` of a class with slots is not
 * modelled, and a name that is no slot of an instance without __dict__
 * cannot be written (AttributeError: not modelled).  Nothing is created
 * while tracing: the program gets the object only when it leaves the
 * translation, rebuilt after the graph ran as object.__new__(C) with its
 * storage filled in (tr_rebuild.c: one object however many places hold
 * it).
 *
 * A class deriving from dict or OrderedDict (a dataclass over one, as
 * transformers' ModelOutput) is modelled too: its mapping is a second
 * V_DICT (items[2]), reached by the dict methods found through the class
 * or super() (__setitem__, __getitem__, keys, items, get...) and by
 * subscripts, `in`, len() and iteration when the class leaves those to
 * dict; a Python __setattr__, __getitem__, __setitem__ or __contains__ of
 * the class is inlined, super().__setattr__ stores as object.__setattr__.
 * Rebuilt as dict.__new__(C) with its items set by the builtin's own
 * store (never the class's __setitem__), then its __dict__.
 *
 * Invariants: the class (items[1]) is reached by an accessor and guarded
 * by identity; what each lookup relies on in the class -- __new__,
 * __init__, __setattr__, __getattribute__, a method or plain attribute,
 * the absence of a name -- is guarded through C.<name> (ACC_ATTR on the
 * class's accessor), so a class changed later recompiles.  Writes are
 * recorded for undo (a call that breaks after setting attributes leaves
 * the object as it was).
 */
#include "translate_int.h"

#include <structmember.h>         /* T_OBJECT_EX, READONLY: a slot's member descriptor */

/* Names looked up on every class, interned once. */
static PyObject *s_new, *s_init, *s_setattr, *s_getattribute, *s_getattr, *s_slots,
                *s_dict, *s_weakref, *s_class, *s_bool, *s_len, *s_fget, *s_fset,
                *s_delattr;

static Value *generic_attr(TFrame *f, Value *o, PyObject *name, PyObject *getattr_fn);

static int intern_names(void)
{
    if (s_delattr != NULL)
        return 0;
    struct { PyObject **slot; const char *text; } names[] = {
        {&s_new, "__new__"}, {&s_init, "__init__"}, {&s_setattr, "__setattr__"},
        {&s_getattribute, "__getattribute__"}, {&s_getattr, "__getattr__"},
        {&s_slots, "__slots__"}, {&s_dict, "__dict__"}, {&s_weakref, "__weakref__"},
        {&s_class, "__class__"}, {&s_bool, "__bool__"}, {&s_len, "__len__"},
        {&s_fget, "fget"}, {&s_fset, "fset"}, {&s_delattr, "__delattr__"},
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (*names[i].slot == NULL && (*names[i].slot = PyUnicode_InternFromString(names[i].text)) == NULL)
            return -1;
    return 0;
}

/* What __slots__ of a class (borrowed, or NULL) declares: 0 no slot of
   its own (absent, empty, or only __dict__ / __weakref__), 1 object slots
   named by strings, -1 something else (a mapping's values are docs; an
   iterator is spent: read as the class was made, not modelled). */
static int slots_kind(PyObject *slots)
{
    if (slots == NULL)
        return 0;
    if (PyUnicode_Check(slots))
        return PyUnicode_Compare(slots, s_dict) == 0 || PyUnicode_Compare(slots, s_weakref) == 0 ? 0 : 1;
    if (!PyTuple_Check(slots) && !PyList_Check(slots))
        return -1;
    PyObject *items = PySequence_Fast(slots, "__slots__");
    if (items == NULL) {
        PyErr_Clear();
        return -1;
    }
    int kind = 0;
    for (Py_ssize_t i = 0; kind >= 0 && i < PySequence_Fast_GET_SIZE(items); i++) {
        PyObject *s = PySequence_Fast_GET_ITEM(items, i);
        if (!PyUnicode_Check(s))
            kind = -1;
        else if (PyUnicode_Compare(s, s_dict) != 0 && PyUnicode_Compare(s, s_weakref) != 0)
            kind = 1;
    }
    Py_DECREF(items);
    return kind;
}

/* Whether descr (borrowed, from the lookup of `name` on tp) is an object
   slot that __slots__ of one of tp's classes made: read and written as
   the object's own storage.  Not when the metaclass has that name too
   (a slot named __name__: C.__name__ is then the class's name, and the
   guard on C.name could not see the descriptor). */
static bool is_object_slot(PyTypeObject *tp, PyObject *name, PyObject *descr)
{
    if (descr == NULL || !Py_IS_TYPE(descr, &PyMemberDescr_Type)
        || _PyType_Lookup(Py_TYPE(tp), name) != NULL)
        return false;
    PyMemberDescrObject *m = (PyMemberDescrObject *)descr;
    PyTypeObject *owner = m->d_common.d_type;
    return m->d_member->type == T_OBJECT_EX && !(m->d_member->flags & READONLY)
           && owner != NULL && (owner->tp_flags & Py_TPFLAGS_HEAPTYPE) && PyType_IsSubtype(tp, owner);
}

/* slots_kind over the classes of tp's MRO written in Python: -1 if one
   declares something else than names, else 1 if one declares object
   slots, else 0. */
static int mro_slots_kind(PyTypeObject *tp)
{
    PyObject *mro = tp->tp_mro;                                 /* borrowed */
    int kind = 0;
    for (Py_ssize_t i = 0; kind >= 0 && mro && i < PyTuple_GET_SIZE(mro); i++) {
        PyTypeObject *base = (PyTypeObject *)PyTuple_GET_ITEM(mro, i);
        if (!(base->tp_flags & Py_TPFLAGS_HEAPTYPE))
            continue;
        PyObject *dict = type_dict_ref(base);
        PyObject *slots = dict ? PyDict_GetItemWithError(dict, s_slots) : NULL;
        int k = PyErr_Occurred() ? -1 : slots_kind(slots);
        PyErr_Clear();
        Py_XDECREF(dict);
        kind = k < 0 ? -1 : k > kind ? k : kind;
    }
    return kind;
}

/* The builtin mapping class whose instances tp's are (OrderedDict or
   dict: the first builtin class of its MRO), or NULL: none, or another
   builtin. */
static PyTypeObject *mapping_base(PyTypeObject *tp)
{
    PyObject *mro = tp->tp_mro;                                 /* borrowed */
    for (Py_ssize_t i = 0; mro && i < PyTuple_GET_SIZE(mro); i++) {
        PyTypeObject *base = (PyTypeObject *)PyTuple_GET_ITEM(mro, i);
        if (!(base->tp_flags & Py_TPFLAGS_HEAPTYPE))
            return base == &PyODict_Type || base == &PyDict_Type ? base : NULL;
    }
    return NULL;
}

/* Whether builtin class base may be in the MRO of a class whose mapping
   base is mb (NULL: a plain class): object, and mb's own bases. */
static bool builtin_base_allowed(PyTypeObject *base, PyTypeObject *mb)
{
    return base == &PyBaseObject_Type
           || (mb != NULL && (base == mb || base == &PyDict_Type));
}

/* NULL when calling class tp makes a plain object (see the file's
   comment), else why not. */
static const char *class_not_plain(PyTypeObject *tp)
{
    PyTypeObject *mb = mapping_base(tp);
    if (!(tp->tp_flags & Py_TPFLAGS_HEAPTYPE))
        return "a builtin class";
    if (Py_TYPE(tp)->tp_call != PyType_Type.tp_call)
        return "its metaclass has its own __call__";
    if (tp->tp_new != (mb ? PyDict_Type.tp_new : PyBaseObject_Type.tp_new))
        return "its __new__ is not object.__new__ (or dict.__new__)";
    if (tp->tp_flags & Py_TPFLAGS_IS_ABSTRACT)
        return "it is abstract";
    if (tp->tp_itemsize != 0)
        return "its instances are variable-sized";
    PyObject *mro = tp->tp_mro;                                 /* borrowed */
    for (Py_ssize_t i = 0; mro && i < PyTuple_GET_SIZE(mro); i++) {
        PyTypeObject *base = (PyTypeObject *)PyTuple_GET_ITEM(mro, i);
        if (!(base->tp_flags & Py_TPFLAGS_HEAPTYPE) && !builtin_base_allowed(base, mb))
            return "it derives from a builtin class";
    }
    if (mro_slots_kind(tp) < 0)
        return "its __slots__ is not a tuple or list of names";
    return NULL;
}

/* The accessor of C.name, C being the class value of a new object. */
static int class_attr_acc(Tracer *t, Value *cls, PyObject *name)
{
    return guardset_accessor(t->gs, ACC_ATTR, cls->src, 0, name, NULL);
}

/* Guard that C.name is `expected` (borrowed, the object C.name gives now).
   0 / -1. */
static int guard_class_attr_is(Tracer *t, Value *cls, PyObject *name, PyObject *expected)
{
    int acc = class_attr_acc(t, cls, name);
    return acc < 0 ? -1 : guardset_add(t->gs, GUARD_ID_MATCH, acc, expected, 0);
}

/* Guard that C's __mro__ has no attribute `name` (what an instance's
   lookup reads; the metaclass's attributes are not the instance's).
   0 / -1. */
static int guard_class_lacks(Tracer *t, Value *cls, PyObject *name)
{
    return guardset_add(t->gs, GUARD_CLASS_LACKS, cls->src, name, 0);
}

/* The value of C.name (what the class itself gives: a function, a
   property object, a constant), guarded as its accessor's values are. */
static Value *class_attr_value(Tracer *t, Value *cls, PyObject *name)
{
    int acc = class_attr_acc(t, cls, name);
    if (acc < 0)
        return NULL;
    PyObject *got = PyObject_GetAttr(cls->obj, name);
    if (got == NULL)
        return NULL;
    Value *v = value_from_source(t, acc, got);
    Py_DECREF(got);
    return v;
}

/* The attribute dict of new object o: items[0]. */
static inline Value *attrs_of(Value *o)
{
    return o->items[0];
}

/* The mapping of new object o whose class derives from dict: items[2];
   NULL for a plain object. */
static inline Value *mapping_of(Value *o)
{
    return o->n > 2 ? o->items[2] : NULL;
}

/* A new, empty V_DICT the translator owns.  NULL on an error. */
static Value *empty_dict(Tracer *t)
{
    Value *d = value_new(t, V_DICT, NULL);
    if (d != NULL && (d->obj = PyList_New(0)) == NULL)
        return NULL;
    return d;
}

/* Index of the last entry of key name in the attribute dict d, or -1 (-2
   on an error).  A deleted attribute keeps its entry, its item a V_NULL
   (so that undo can put it back where it was); set again, it gets a new
   entry at the end, as a dict would. */
static int dict_index(Value *d, PyObject *name)
{
    for (int i = d->n - 1; i >= 0; i--) {
        int eq = PyObject_RichCompareBool(PyList_GET_ITEM(d->obj, i), name, Py_EQ);
        if (eq < 0)
            return -2;
        if (eq)
            return i;
    }
    return -1;
}

/* Whether descr (borrowed, found on o's class) is a method of the
   builtin mapping class of o (dict's, or OrderedDict's). */
static bool is_mapping_method(Value *o, PyObject *descr)
{
    if (mapping_of(o) == NULL
        || !(Py_IS_TYPE(descr, &PyMethodDescr_Type) || Py_IS_TYPE(descr, &PyWrapperDescr_Type)))
        return false;
    PyTypeObject *owner = PyDescr_TYPE(descr);
    return owner == &PyDict_Type || owner == mapping_base((PyTypeObject *)o->obj);
}

/* (contract: translate_int.h) */
Value *tr_bound_builtin(Tracer *t, PyObject *descr, Value *o)
{
    Value *g = value_new(t, V_BOUNDFN, NULL);
    Value *marker = g ? value_new(t, V_CONST, descr) : NULL;
    if (marker == NULL || value_append(t, g, marker) < 0 || value_append(t, g, o) < 0)
        return NULL;
    return g;
}

/* The dict method `name` of o's mapping called with args[0..nargs) (no
   self): as the same call on a dict this frame made.  NULL when tracing
   stops. */
static Value *mapping_call(TFrame *f, Value *o, PyObject *name, Value **args, int nargs)
{
    Tracer *t = f->t;
    Value *m = mapping_of(o);
    const char *n = PyUnicode_AsUTF8(name);
    if (n == NULL)
        return NULL;
    if (strcmp(n, "__getitem__") == 0 && nargs == 1)
        return tr_subscript(f, m, args[0]);
    if (strcmp(n, "__setitem__") == 0 && nargs == 2)
        return tr_store_subscript(f, m, args[0], args[1]) < 0 ? NULL
               : value_new(t, V_CONST, Py_None);
    if (strcmp(n, "__contains__") == 0 && nargs == 1) {
        int r = tr_contains(f, args[0], m);
        return r < 0 ? NULL : value_new(t, V_CONST, r ? Py_True : Py_False);
    }
    if (strcmp(n, "__len__") == 0 && nargs == 0)
        return new_const(t, PyLong_FromLong(m->n));
    if (strcmp(n, "__iter__") == 0 && nargs == 0)
        return tr_make_iter(f, m);
    bool del = strcmp(n, "__delitem__") == 0 && nargs == 1;    /* del d[k]: d.pop(k), None */
    if (strcmp(n, "keys") == 0 || strcmp(n, "values") == 0 || strcmp(n, "items") == 0
        || strcmp(n, "get") == 0 || strcmp(n, "pop") == 0 || del) {
        PyObject *mname = del ? PyUnicode_InternFromString("pop") : Py_NewRef(name);
        Value *meth = mname ? value_new(t, V_METHOD, mname) : NULL;
        Py_XDECREF(mname);
        if (meth == NULL || value_append(t, meth, m) < 0)
            return NULL;
        meth->pos = 1;          /* the receiver is put first by the call */
        Value *r = tr_call_or_undo(f, meth, args, nargs, NULL);
        return r && del ? value_new(t, V_CONST, Py_None) : r;
    }
    return tracer_unsupported(t, false, "dict method .%s() of a new %s", n,
                              ((PyTypeObject *)o->obj)->tp_name), NULL;
}

/* (contract: translate_int.h) */
Value *tr_newobj_call_builtin(TFrame *f, Value *o, PyObject *descr, Value **args, int nargs,
                              PyObject *kwnames)
{
    Tracer *t = f->t;
    PyObject *name = PyDescr_NAME(descr);
    if (intern_names() < 0)
        return NULL;
    if (kwnames != NULL && PyTuple_GET_SIZE(kwnames) > 0)
        return tracer_unsupported(t, false, "keyword arguments to %U() of a new %s", name,
                                  ((PyTypeObject *)o->obj)->tp_name), NULL;
    if (PyDescr_TYPE(descr) == &PyBaseObject_Type) {
        bool named = nargs >= 1 && args[0]->kind == V_CONST && PyUnicode_CheckExact(args[0]->obj);
        if (named && nargs == 2 && PyUnicode_Compare(name, s_setattr) == 0)
            return tr_newobj_object_setattr(f, o, args[0]->obj, args[1]) < 0 ? NULL
                   : value_new(t, V_CONST, Py_None);
        if (named && nargs == 1 && PyUnicode_Compare(name, s_getattribute) == 0)
            return generic_attr(f, o, args[0]->obj, NULL);   /* never __getattr__ */
        return tracer_unsupported(t, false, "object.%U() of a new %s with these arguments", name,
                                  ((PyTypeObject *)o->obj)->tp_name), NULL;
    }
    if (!is_mapping_method(o, descr))
        return tracer_unsupported(t, false, "%U() of a new %s", name,
                                  ((PyTypeObject *)o->obj)->tp_name), NULL;
    return mapping_call(f, o, name, args, nargs);
}

/* (contract: translate_int.h) */
Value *tr_newobj_protocol(TFrame *f, Value *o, const char *dunder, Value **args, int nargs)
{
    Tracer *t = f->t;
    Value *cls = o->items[1];
    PyObject *name = PyUnicode_InternFromString(dunder);
    if (name == NULL)
        return NULL;
    PyObject *descr = _PyType_Lookup((PyTypeObject *)o->obj, name);     /* borrowed */
    Value *r = NULL;
    if (descr != NULL && PyFunction_Check(descr) && nargs + 1 < MAX_STACK) {
        /* the class's own, in Python: inlined */
        Value *fn = class_attr_value(t, cls, name), *full[MAX_STACK];
        full[0] = o;
        if (nargs > 0)
            memcpy(full + 1, args, sizeof(Value *) * (size_t)nargs);
        r = fn ? tr_call_or_undo(f, fn, full, nargs + 1, NULL) : NULL;
    }
    else if (descr != NULL && is_mapping_method(o, descr)) {
        r = guard_class_attr_is(t, cls, name, descr) < 0 ? NULL : mapping_call(f, o, name, args, nargs);
    }
    else {
        tracer_unsupported(t, false, "%s of a new %s", dunder, ((PyTypeObject *)o->obj)->tp_name);
    }
    Py_DECREF(name);
    return r;
}

/* (contract: translate_int.h) */
Value *tr_new_object(TFrame *f, Value *cls, Value **args, int nargs, PyObject *kwnames, bool *handled)
{
    Tracer *t = f->t;
    *handled = false;
    if (cls->kind != V_CONST || cls->src < 0 || !PyType_Check(cls->obj) || intern_names() < 0)
        return NULL;
    PyTypeObject *tp = (PyTypeObject *)cls->obj;
    const char *why = class_not_plain(tp);
    if (why != NULL)
        return NULL;
    *handled = true;
    PyObject *new_fn = PyObject_GetAttr(cls->obj, s_new);
    int rc = new_fn ? guard_class_attr_is(t, cls, s_new, new_fn) : -1;
    Py_XDECREF(new_fn);
    if (rc < 0)
        return NULL;
    PyTypeObject *mb = mapping_base(tp);
    Value *o = value_new(t, V_NEWOBJ, cls->obj);
    Value *attrs = o ? empty_dict(t) : NULL;
    if (attrs == NULL || value_append(t, o, attrs) < 0 || value_append(t, o, cls) < 0)
        return NULL;
    attrs->attrs_of_newobj = true;
    Value *mapping = mb ? empty_dict(t) : NULL;
    if (mb != NULL && (mapping == NULL || value_append(t, o, mapping) < 0))
        return NULL;
    PyObject *init = _PyType_Lookup(tp, s_init);                 /* borrowed */
    if (init != NULL && PyFunction_Check(init)) {
        Value *initv = class_attr_value(t, cls, s_init);
        if (initv == NULL || nargs + 1 >= MAX_STACK)
            return initv ? tracer_unsupported(t, false, "a call with more than %d arguments", MAX_STACK), NULL : NULL;
        Value *full[MAX_STACK];
        full[0] = o;
        if (nargs > 0)
            memcpy(full + 1, args, sizeof(Value *) * (size_t)nargs);
        Value *r = tr_call_or_undo(f, initv, full, nargs + 1, kwnames);
        if (r == NULL)
            return NULL;
        if (r->kind != V_CONST || r->obj != Py_None)
            return tracer_unsupported(t, false, "%s.__init__ returned a value that is not None",
                                      tp->tp_name), NULL;
        return o;
    }
    if (init != _PyType_Lookup(mb ? mb : &PyBaseObject_Type, s_init))
        return tracer_unsupported(t, false, "%s() with an __init__ that is not Python", tp->tp_name), NULL;
    if (nargs > 0)
        return tracer_unsupported(t, false, "%s() takes no arguments", tp->tp_name), NULL;
    if (guard_class_attr_is(t, cls, s_init, init) < 0)
        return NULL;
    return o;
}

/* (contract: translate_int.h) */
Value *tr_newobj_blank(Tracer *t, Value *cls)
{
    if (intern_names() < 0)
        return NULL;
    if (cls->kind != V_CONST || cls->src < 0 || !PyType_Check(cls->obj))
        return tracer_unsupported(t, false, "a new object of a class no accessor reaches"), NULL;
    PyTypeObject *tp = (PyTypeObject *)cls->obj;
    const char *why = class_not_plain(tp);
    if (why == NULL && mapping_base(tp) != NULL)
        why = "it derives from dict";
    if (why != NULL)
        return tracer_unsupported(t, false, "a new %s made without __init__: %s", tp->tp_name, why), NULL;
    PyObject *new_fn = PyObject_GetAttr(cls->obj, s_new);
    int rc = new_fn ? guard_class_attr_is(t, cls, s_new, new_fn) : -1;
    Py_XDECREF(new_fn);
    Value *o = rc < 0 ? NULL : value_new(t, V_NEWOBJ, cls->obj);
    Value *attrs = o ? empty_dict(t) : NULL;
    if (attrs == NULL || value_append(t, o, attrs) < 0 || value_append(t, o, cls) < 0)
        return NULL;
    attrs->attrs_of_newobj = true;
    return o;
}

/* A property of the class (data descriptor descr) read or written on o
   through its Python fget / fset (which: s_fget or s_fset), inlined.
   NULL when tracing stops. */
static Value *property_call(TFrame *f, Value *o, PyObject *name, PyObject *which, Value *value)
{
    Tracer *t = f->t;
    Value *prop = class_attr_value(t, o->items[1], name);
    if (prop == NULL)
        return NULL;
    int pa = prop->src;
    PyObject *accessor_fn = PyObject_GetAttr(prop->obj, which);
    if (accessor_fn == NULL)
        return NULL;
    Value *r = NULL;
    if (!PyFunction_Check(accessor_fn)) {
        tracer_unsupported(t, false, "property '%U' of %s whose %U is not Python", name,
                           ((PyTypeObject *)o->obj)->tp_name, which);
    }
    else {
        int fa = pa < 0 ? -1 : guardset_accessor(t->gs, ACC_ATTR, pa, 0, which, NULL);
        Value *fv = fa < 0 ? NULL : value_from_source(t, fa, accessor_fn);
        Value *args[2] = {o, value};
        r = fv ? tr_call_or_undo(f, fv, args, value ? 2 : 1, NULL) : NULL;
    }
    Py_DECREF(accessor_fn);
    return r;
}

/* The class's generic lookups are object's: no Python __getattribute__
   (guarded by identity), and either no __getattr__ (guarded absent) or
   one that is Python (returned, borrowed, for names found nowhere else).
   0 / -1. */
static int guard_generic_reads(Tracer *t, Value *o, PyObject **getattr_fn)
{
    PyTypeObject *tp = (PyTypeObject *)o->obj;
    Value *cls = o->items[1];
    PyObject *ga = _PyType_Lookup(tp, s_getattribute);                  /* borrowed */
    bool dicts = ga != NULL && is_mapping_method(o, ga) && tp->tp_getattro == PyObject_GenericGetAttr;
    if (ga != _PyType_Lookup(&PyBaseObject_Type, s_getattribute) && !dicts)
        return tracer_unsupported(t, false, "%s has its own __getattribute__", tp->tp_name);
    if (guard_class_attr_is(t, cls, s_getattribute, ga) < 0)
        return -1;
    *getattr_fn = _PyType_Lookup(tp, s_getattr);
    if (*getattr_fn == NULL)
        return guard_class_lacks(t, cls, s_getattr);
    if (!PyFunction_Check(*getattr_fn))
        return tracer_unsupported(t, false, "%s.__getattr__ is not Python", tp->tp_name);
    return class_attr_value(t, cls, s_getattr) ? 0 : -1;
}

/* o.name as object.__getattribute__ finds it, then (getattr_fn, the
   class's Python __getattr__, or NULL) as __getattr__ does for a name
   found nowhere.  NULL when tracing stops. */
static Value *generic_attr(TFrame *f, Value *o, PyObject *name, PyObject *getattr_fn)
{
    Tracer *t = f->t;
    PyTypeObject *tp = (PyTypeObject *)o->obj;
    Value *cls = o->items[1];
    PyObject *descr = _PyType_Lookup(tp, name);                         /* borrowed */
    if (descr != NULL && is_mapping_method(o, descr)) {
        /* o.keys, o.get, ...: dict's own, bound to o's mapping */
        if (guard_class_attr_is(t, cls, name, descr) < 0)
            return NULL;
        return tr_bound_builtin(t, descr, o);
    }
    if (is_object_slot(tp, name, descr)) {
        /* a slot: the object's storage, as the instance dict is */
        if (guard_class_attr_is(t, cls, name, descr) < 0)
            return NULL;
        int i = dict_index(attrs_of(o), name);
        if (i == -2)
            return NULL;
        if (i < 0 || attrs_of(o)->items[i]->kind == V_NULL)
            return tracer_unsupported(t, false, "slot '%U' of a new %s, not set (AttributeError)",
                                      name, tp->tp_name), NULL;
        return attrs_of(o)->items[i];
    }
    if (descr != NULL && Py_TYPE(descr)->tp_descr_set != NULL) {
        if (PyUnicode_Compare(name, s_class) == 0)
            return cls;
        if (PyUnicode_Compare(name, s_dict) == 0 && Py_IS_TYPE(descr, &PyGetSetDescr_Type)) {
            if (mro_slots_kind(tp) > 0)     /* the translator's dict holds the slots too */
                return tracer_unsupported(t, false, "the __dict__ of a new %s, which has __slots__",
                                          tp->tp_name), NULL;
            return attrs_of(o);     /* its __dict__: the translator's dict */
        }
        if (Py_IS_TYPE(descr, &PyProperty_Type))
            return property_call(f, o, name, s_fget, NULL);
        return tracer_unsupported(t, false, "attribute '%U' of a new %s is a %s", name, tp->tp_name,
                                  Py_TYPE(descr)->tp_name), NULL;
    }
    int i = dict_index(attrs_of(o), name);
    if (i == -2)
        return NULL;
    if (i >= 0 && attrs_of(o)->items[i]->kind == V_NULL)
        i = -1;
    if (descr == NULL && guard_class_lacks(t, cls, name) < 0)
        return NULL;
    if (i >= 0 && attrs_of(o)->items[i]->kind != V_NULL)
        return attrs_of(o)->items[i];
    if (descr == NULL) {
        if (getattr_fn == NULL && tr_missing_reaches_getattr(t))
            return value_new(t, V_ABSENT, NULL);    /* getattr(o, n, d) / hasattr(o, n) */
        if (getattr_fn == NULL)
            return tracer_unsupported(t, false, "a new %s has no attribute '%U'", tp->tp_name, name), NULL;
        Value *fn = class_attr_value(t, cls, s_getattr);
        Value *key = value_new(t, V_CONST, name);
        Value *args[2] = {o, key};
        return fn && key ? tr_call_or_undo(f, fn, args, 2, NULL) : NULL;
    }
    Value *cv = class_attr_value(t, cls, name);
    if (cv == NULL)
        return NULL;
    if (PyFunction_Check(descr)) {
        Value *bound = value_new(t, V_BOUNDFN, NULL);
        if (bound == NULL || value_append(t, bound, cv) < 0 || value_append(t, bound, o) < 0)
            return NULL;
        return bound;
    }
    if (Py_TYPE(descr)->tp_descr_get != NULL && !Py_IS_TYPE(descr, &PyStaticMethod_Type)
        && !Py_IS_TYPE(descr, &PyClassMethod_Type))
        return tracer_unsupported(t, false, "class attribute '%U' of %s (a %s)", name, tp->tp_name,
                                  Py_TYPE(descr)->tp_name), NULL;
    return cv;      /* a constant, a staticmethod's function, a classmethod bound to C */
}

/* (contract: translate_int.h) */
Value *tr_newobj_attr(TFrame *f, Value *o, PyObject *name)
{
    Tracer *t = f->t;
    PyTypeObject *tp = (PyTypeObject *)o->obj;
    Value *cls = o->items[1];
    PyObject *getattr_fn = NULL;
    if (intern_names() < 0)
        return NULL;
    PyObject *ga = _PyType_Lookup(tp, s_getattribute);                  /* borrowed */
    if (ga != NULL && PyFunction_Check(ga)) {
        /* the class's own __getattribute__, in Python (a config mapping
           old names to new): inlined, its object.__getattribute__ calls
           the generic lookup; a __getattr__ beside it is not modelled */
        if (_PyType_Lookup(tp, s_getattr) != NULL)
            return tracer_unsupported(t, false, "%s has both __getattribute__ and __getattr__",
                                      tp->tp_name), NULL;
        Value *fn = guard_class_lacks(t, cls, s_getattr) < 0 ? NULL
                    : class_attr_value(t, cls, s_getattribute);
        Value *key = fn ? value_new(t, V_CONST, name) : NULL;
        Value *args[2] = {o, key};
        return key ? tr_call_or_undo(f, fn, args, 2, NULL) : NULL;
    }
    if (guard_generic_reads(t, o, &getattr_fn) < 0)
        return NULL;
    return generic_attr(f, o, name, getattr_fn);
}

/* (contract: translate_int.h) */
Value *tr_newobj_lookup(TFrame *f, Value *o, PyObject *name, bool *absent)
{
    Tracer *t = f->t;
    PyObject *getattr_fn = NULL;
    *absent = false;
    if (intern_names() < 0)
        return NULL;
    PyObject *ga = _PyType_Lookup((PyTypeObject *)o->obj, s_getattribute);   /* borrowed */
    if (ga != NULL && PyFunction_Check(ga)) {
        /* the class's Python __getattribute__, traced: an AttributeError
           of its generic lookup that returns straight to here is absence */
        TFrame *saved = t->absent_frame;
        t->absent_frame = f;
        Value *r = tr_newobj_attr(f, o, name);
        t->absent_frame = saved;
        *absent = r != NULL && r->kind == V_ABSENT;
        return *absent ? NULL : r;
    }
    if (guard_generic_reads(t, o, &getattr_fn) < 0)
        return NULL;
    int i = dict_index(attrs_of(o), name);
    if (i == -2)
        return NULL;
    bool set = i >= 0 && attrs_of(o)->items[i]->kind != V_NULL;
    PyObject *descr = _PyType_Lookup((PyTypeObject *)o->obj, name);       /* borrowed */
    if (!set && getattr_fn == NULL && is_object_slot((PyTypeObject *)o->obj, name, descr)) {
        /* a slot not set: AttributeError */
        if (guard_class_attr_is(t, o->items[1], name, descr) < 0)
            return NULL;
        *absent = true;
        return NULL;
    }
    if (set || descr != NULL || getattr_fn != NULL)
        return tr_newobj_attr(f, o, name);
    /* in neither its __dict__ nor its class (guarded): AttributeError */
    if (guard_class_lacks(t, o->items[1], name) < 0)
        return NULL;
    *absent = true;
    return NULL;
}

/* The class lets o.name be written into (or deleted from) o's __dict__:
   object.__setattr__ (__delattr__) when hook names one to check (guarded),
   and no data descriptor of that name (or absent: guarded).
   1: into the dict; 0: a property's Python setter handles it (*prop);
   -1 when tracing stops. */
static int plain_store(TFrame *f, Value *o, PyObject *name, bool *prop, PyObject *hook)
{
    Tracer *t = f->t;
    PyTypeObject *tp = (PyTypeObject *)o->obj;
    Value *cls = o->items[1];
    *prop = false;
    if (intern_names() < 0)
        return -1;
    PyObject *sa = hook ? _PyType_Lookup(tp, hook) : NULL;               /* borrowed */
    if (hook && sa != _PyType_Lookup(&PyBaseObject_Type, hook))
        return tracer_unsupported(t, false, "%s attribute '%U' of a %s, which has its own %U",
                                  hook == s_setattr ? "setting" : "deleting", name, tp->tp_name, hook);
    if (hook && guard_class_attr_is(t, cls, hook, sa) < 0)
        return -1;
    PyObject *descr = _PyType_Lookup(tp, name);
    if (is_object_slot(tp, name, descr))
        return guard_class_attr_is(t, cls, name, descr) < 0 ? -1 : 1;   /* the object's storage */
    if (!type_has_instance_dict(tp))
        return tracer_unsupported(t, false, "%s attribute '%U' of a new %s, which has neither "
                                  "that slot nor a __dict__", hook == s_delattr ? "deleting" : "setting",
                                  name, tp->tp_name);
    if (descr == NULL)
        return guard_class_lacks(t, cls, name) < 0 ? -1 : 1;
    if (Py_TYPE(descr)->tp_descr_set == NULL)
        return class_attr_value(t, cls, name) ? 1 : -1;   /* stays a non-data attribute */
    if (Py_IS_TYPE(descr, &PyProperty_Type)) {
        *prop = true;
        return 0;
    }
    return tracer_unsupported(t, false, "setting attribute '%U' of a %s: a %s", name, tp->tp_name,
                              Py_TYPE(descr)->tp_name);
}

/* o.name = value as object.__setattr__ does it (check_setattr: only when
   the class's __setattr__ is object's, guarded).  0 / -1. */
static int object_store(TFrame *f, Value *o, PyObject *name, Value *value, bool check_setattr)
{
    Tracer *t = f->t;
    bool prop;
    int r = plain_store(f, o, name, &prop, check_setattr ? s_setattr : NULL);
    if (r < 0)
        return -1;
    if (prop) {
        Value *res = property_call(f, o, name, s_fset, value);
        return res ? 0 : -1;
    }
    Value *attrs = attrs_of(o);
    int i = dict_index(attrs, name);
    if (i >= 0 && attrs->items[i]->kind == V_NULL)
        i = -1;                          /* deleted: a new entry */
    if (i == -2 || tracer_note_mutation(t, attrs, i) < 0)
        return -1;
    if (i >= 0) {
        attrs->items[i] = value;
        return 0;
    }
    return PyList_Append(attrs->obj, name) < 0 ? -1 : value_append(t, attrs, value);
}

/* (contract: translate_int.h) */
int tr_newobj_object_setattr(TFrame *f, Value *o, PyObject *name, Value *value)
{
    return object_store(f, o, name, value, false);
}

/* (contract: translate_int.h) */
int tr_newobj_set_attr(TFrame *f, Value *o, PyObject *name, Value *value)
{
    Tracer *t = f->t;
    if (intern_names() < 0)
        return -1;
    PyObject *sa = _PyType_Lookup((PyTypeObject *)o->obj, s_setattr);   /* borrowed */
    if (sa == NULL || !PyFunction_Check(sa))
        return object_store(f, o, name, value, true);
    /* the class's __setattr__, in Python: inlined */
    Value *fn = class_attr_value(t, o->items[1], s_setattr);
    Value *key = fn ? value_new(t, V_CONST, name) : NULL;
    Value *args[3] = {o, key, value};
    return key && tr_call_or_undo(f, fn, args, 3, NULL) ? 0 : -1;
}

/* (contract: translate_int.h) */
int tr_newobj_del_attr(TFrame *f, Value *o, PyObject *name)
{
    Tracer *t = f->t;
    bool prop;
    if (intern_names() < 0)
        return -1;
    PyObject *da = _PyType_Lookup((PyTypeObject *)o->obj, s_delattr);   /* borrowed */
    if (da != NULL && PyFunction_Check(da)) {
        /* the class's __delattr__, in Python: inlined */
        Value *fn = class_attr_value(t, o->items[1], s_delattr);
        Value *key = fn ? value_new(t, V_CONST, name) : NULL;
        Value *args[2] = {o, key};
        return key && tr_call_or_undo(f, fn, args, 2, NULL) ? 0 : -1;
    }
    int r = plain_store(f, o, name, &prop, s_delattr);
    if (r < 0)
        return -1;
    if (prop)
        return tracer_unsupported(t, false, "deleting property '%U'", name);
    Value *attrs = attrs_of(o);
    int i = dict_index(attrs, name);
    if (i == -2)
        return -1;
    if (i < 0 || attrs->items[i]->kind == V_NULL)
        return tracer_unsupported(t, false, "deleting attribute '%U' a new %s lacks", name,
                                  ((PyTypeObject *)o->obj)->tp_name);
    Value *gone = value_new(t, V_NULL, NULL);
    if (gone == NULL || tracer_check_iterated(t, attrs, -1) < 0     /* a deletion, not a replacement */
        || tracer_note_mutation(t, attrs, i) < 0)
        return -1;
    attrs->items[i] = gone;
    return 0;
}

/* The truth of new object o by its class's Python __bool__ or __len__
   (name), inlined: 0 / 1, or -1 when tracing stops (the method's result
   is not a constant bool or int, as Python's truth test needs). */
static int call_truth_method(TFrame *f, Value *o, PyObject *name)
{
    Tracer *t = f->t;
    Value *fn = class_attr_value(t, o->items[1], name);
    Value *r = fn ? tr_call_with_self(f, fn, o, NULL, 0, NULL) : NULL;
    if (r == NULL)
        return -1;
    Py_ssize_t n = r->kind == V_CONST && name == s_len && PyLong_CheckExact(r->obj)
                   ? PyLong_AsSsize_t(r->obj) : -1;
    PyErr_Clear();                   /* (a length past Py_ssize_t: refused below) */
    if (r->kind == V_CONST && (name == s_bool ? PyBool_Check(r->obj) : n >= 0))
        return PyObject_IsTrue(r->obj);
    return tracer_unsupported(t, false, "truth of a new %s whose %U returns a value that is not "
                              "a constant %s", ((PyTypeObject *)o->obj)->tp_name, name,
                              name == s_bool ? "bool" : "int from 0"), -1;
}

/* (contract: translate_int.h) */
int tr_newobj_truth(TFrame *f, Value *o)
{
    Tracer *t = f->t;
    PyTypeObject *tp = (PyTypeObject *)o->obj;
    if (intern_names() < 0)
        return -1;
    PyObject *len = _PyType_Lookup(tp, s_len);                         /* borrowed */
    if (_PyType_Lookup(tp, s_bool) == NULL && len != NULL && is_mapping_method(o, len)) {
        /* a dict's truth: whether it has items */
        if (guard_class_lacks(t, o->items[1], s_bool) < 0
            || guard_class_attr_is(t, o->items[1], s_len, len) < 0)
            return -1;
        return mapping_of(o)->n > 0;
    }
    PyObject *truth_name = _PyType_Lookup(tp, s_bool) != NULL ? s_bool : len != NULL ? s_len : NULL;
    PyObject *truth_fn = truth_name ? _PyType_Lookup(tp, truth_name) : NULL;      /* borrowed */
    if (truth_fn != NULL && PyFunction_Check(truth_fn))
        return call_truth_method(f, o, truth_name);
    if (truth_fn != NULL)
        return tracer_unsupported(t, false, "truth of a new %s, which defines __bool__ or __len__",
                                  tp->tp_name);
    if (guard_class_lacks(t, o->items[1], s_bool) < 0 || guard_class_lacks(t, o->items[1], s_len) < 0)
        return -1;
    return 1;
}

/* (contract: translate_int.h) */
int tr_newobj_merge(TFrame *f, Value *into, Value *o, bool refuse_twice)
{
    Tracer *t = f->t;
    PyTypeObject *tp = (PyTypeObject *)o->obj;
    if (o->n < 3 || o->items[2]->kind != V_DICT)
        return tracer_unsupported(t, false, "** of a new %s, which is no mapping", tp->tp_name);
    Value *mapping = o->items[2];
    /* as dict's merge: the storage itself where the class keeps dict's
       iteration, else keys() -- dict's or OrderedDict's here, guarded --
       and __getitem__ per key (ModelOutput's, inlined) */
    bool direct = tp->tp_iter == PyDict_Type.tp_iter;
    PyObject *keys_name = PyUnicode_InternFromString("keys");
    PyObject *keys_descr = keys_name ? _PyType_Lookup(tp, keys_name) : NULL;      /* borrowed */
    if (!direct && (keys_descr == NULL || !is_mapping_method(o, keys_descr))) {
        Py_XDECREF(keys_name);
        return tracer_unsupported(t, false, "** of a new %s whose class defines keys()", tp->tp_name);
    }
    int guarded = direct ? 0 : guard_class_attr_is(t, o->items[1], keys_name, keys_descr);
    Py_XDECREF(keys_name);
    if (guarded < 0)
        return -1;
    PyObject *keys = PySequence_List(mapping->obj);       /* __getitem__ may change the mapping */
    if (keys == NULL)
        return -1;
    int rc = 0;
    for (Py_ssize_t i = 0; rc == 0 && i < PyList_GET_SIZE(keys); i++) {
        PyObject *key = PyList_GET_ITEM(keys, i);
        Value *v = NULL;
        if (direct) {
            /* (the storage, as it was: nothing traced runs in between) */
            v = mapping->items[i];
        }
        else {
            Value *k = new_const(t, Py_NewRef(key));
            v = k ? tr_newobj_protocol(f, o, "__getitem__", &k, 1) : NULL;
        }
        rc = v == NULL ? -1 : tr_dict_merge_item(t, into, key, v, refuse_twice);
    }
    Py_DECREF(keys);
    return rc;
}

/* Whether the hook dict `name` in attrs (a new module's __dict__) is an
   empty dict, or absent. */
static bool attr_dict_empty(Value *attrs, const char *name)
{
    for (int i = 0; i < attrs->n; i++)
        if (PyUnicode_CompareWithASCIIString(PyList_GET_ITEM(attrs->obj, i), name) == 0)
            return attrs->items[i]->kind == V_DICT && attrs->items[i]->n == 0;
    return true;
}

/* (contract: translate_int.h) */
Value *tr_newobj_call(TFrame *f, Value *o, Value **args, int nargs, PyObject *kwnames)
{
    Tracer *t = f->t;
    PyTypeObject *tp = (PyTypeObject *)o->obj, *mod = tensorlib_nn_module_type();
    Value *cls = o->items[1];
    PyObject *call;
    if (mod == NULL || !PyType_IsSubtype(tp, mod) || cls->src < 0) {
        if (kwnames != NULL && PyTuple_GET_SIZE(kwnames) > 0)
            return tracer_unsupported(t, false, "a call of a new %s with keyword arguments",
                                      tp->tp_name), NULL;
        return tr_newobj_protocol(f, o, "__call__", args, nargs);
    }
    /* an nn.Module made while tracing (nn.Softmax(dim=-1)(x)): its forward
       inlined, as value_module_forward does for a module the program holds --
       its own hook dicts are the empty ones its __init__ made */
    static const char *const own[] = {"_forward_hooks", "_forward_pre_hooks", "_backward_hooks",
                                      "_backward_pre_hooks", NULL};
    Value *attrs = attrs_of(o);
    bool plain = value_module_call_is_plain(tp, &call);
    for (int i = 0; plain && own[i]; i++)
        plain = attr_dict_empty(attrs, own[i]);
    for (int i = 0; plain && i < attrs->n; i++) {
        PyObject *k = PyList_GET_ITEM(attrs->obj, i);
        plain = PyUnicode_CompareWithASCIIString(k, "forward") != 0
                && (PyUnicode_CompareWithASCIIString(k, "_compiled_call_impl") != 0
                    || (attrs->items[i]->kind == V_CONST && attrs->items[i]->obj == Py_None));
    }
    PyObject *fwd_name = PyUnicode_InternFromString("forward");
    PyObject *fwd = fwd_name ? _PyType_Lookup(tp, fwd_name) : NULL;        /* borrowed */
    if (!plain || fwd == NULL || !PyFunction_Check(fwd) || nargs + 1 >= MAX_STACK) {
        Py_XDECREF(fwd_name);
        return tracer_break(t, STOP_CALL, "call to a new %s with hooks, an instance forward "
                            "or a forward not in Python", tp->tp_name), NULL;
    }
    Value *fn = value_guard_module_call(t, cls->src, call) < 0 ? NULL
                : class_attr_value(t, cls, fwd_name);
    Py_DECREF(fwd_name);
    return fn ? tr_call_with_self(f, fn, o, args, nargs, kwnames) : NULL;
}
