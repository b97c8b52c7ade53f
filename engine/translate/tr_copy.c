/*
 * tr_copy.c -- copy.deepcopy(x) and copy.copy(x) while translating
 * (contract: translate_int.h).
 *
 * Libraries copy plain data on every call (transformers deep-copies a
 * model's config to read its decoder half when it builds a cache).  The
 * copy module's Python code runs on id(), a memo dict and
 * object.__reduce_ex__, none of which a graph can hold; what it computes
 * for plain data is simple, and is modelled here: immutable atoms are
 * themselves, tuples are themselves unless an item copies to something
 * new, lists and dicts are new containers of copied items, and an object
 * of a plain class (object.__new__, no slots, no copy hooks) is a new
 * object (V_NEWOBJ, no __init__ run) whose __dict__ holds copies of the
 * original's attributes.  One memo per call keeps sharing and cycles as
 * deepcopy keeps them.  Anything else (a tensor, a class with
 * __deepcopy__ or __reduce__ of its own, a registered copier) stops the
 * translation with the reason: the call then runs eagerly.
 *
 * Invariants: an object copied is read through accessors, so what the
 * copy holds is guarded (its __dict__'s keys, each value as any input);
 * what the copy protocol would have consulted is guarded too -- the
 * class's identity, its __reduce_ex__/__reduce__/__getstate__ being
 * object's, the absence of __deepcopy__ (__copy__), __setstate__ and
 * __getnewargs(_ex)__, and the class not being registered in
 * copyreg.dispatch_table or copy's own dispatch tables.
 */
#include "translate_int.h"

#include <string.h>

/* Values copied in one call: a copy made for each original (by pointer:
   one Value per object while tracing). */
#define COPY_MEMO_MAX 1024
#define COPY_DEPTH_MAX 64

typedef struct CopyMemo {
    int n;
    Value *from[COPY_MEMO_MAX];
    Value *to[COPY_MEMO_MAX];
} CopyMemo;

typedef struct CopyCall {
    Tracer *t;
    bool deep;
    CopyMemo memo;
} CopyCall;

static Value *copy_value(CopyCall *c, Value *v, int depth);

/* (contract: translate_int.h) */
bool tr_is_copy_function(PyObject *fn, bool *deep)
{
    if (!PyFunction_Check(fn))
        return false;
    /* the code's name first: a module lookup on every traced call costs */
    PyObject *name = ((PyCodeObject *)PyFunction_GET_CODE(fn))->co_name;
    *deep = PyUnicode_CompareWithASCIIString(name, "deepcopy") == 0;
    if (!*deep && PyUnicode_CompareWithASCIIString(name, "copy") != 0)
        return false;
    return fn == tensorlib_loaded_module_attr("copy", *deep ? "deepcopy" : "copy");
}

static int memo_put(CopyCall *c, Value *from, Value *to)
{
    if (c->memo.n == COPY_MEMO_MAX)
        return tracer_unsupported(c->t, false, "copy of more than %d objects", COPY_MEMO_MAX);
    c->memo.from[c->memo.n] = from;
    c->memo.to[c->memo.n++] = to;
    return 0;
}

static Value *memo_get(CopyCall *c, Value *from)
{
    for (int i = 0; i < c->memo.n; i++)
        if (c->memo.from[i] == from)
            return c->memo.to[i];
    return NULL;
}

/* Whether copying constant obj gives obj itself: the types copy treats
   as atoms (exactly, as its dispatch tables look up type(x)), and tuples
   of them. */
static bool copies_to_itself(PyObject *obj)
{
    PyTypeObject *tp = Py_TYPE(obj);
    if (obj == Py_None || obj == Py_Ellipsis || obj == Py_NotImplemented
        || tp == &PyLong_Type || tp == &PyFloat_Type || tp == &PyBool_Type
        || tp == &PyComplex_Type || tp == &PyBytes_Type || tp == &PyUnicode_Type
        || tp == &PyRange_Type || tp == &PyProperty_Type || tp == &PyCode_Type
        || PyType_Check(obj) || PyFunction_Check(obj) || PyCFunction_Check(obj))
        return true;
    if (tp == &PyTuple_Type) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(obj); i++)
            if (!copies_to_itself(PyTuple_GET_ITEM(obj, i)))
                return false;
        return true;
    }
    return false;
}

/* Guard that module `module`'s dict `table` has no entry for class cls.
   0 / -1 (a stop when it has one). */
static int guard_not_registered(Tracer *t, PyObject *cls, const char *module, const char *table)
{
    PyObject *m = tensorlib_loaded_module_ref(module);
    PyObject *d = m ? PyObject_GetAttrString(m, table) : NULL;
    Py_XDECREF(m);
    if (d == NULL || !PyDict_CheckExact(d)) {
        Py_XDECREF(d);
        PyErr_Clear();
        return 0;           /* not imported, or not a table: nothing consults it */
    }
    int has = PyDict_Contains(d, cls);
    Py_DECREF(d);
    if (has != 0)
        return has < 0 ? -1 : tracer_unsupported(t, false, "copy of a %s: %s.%s has a copier for it",
                                                 ((PyTypeObject *)cls)->tp_name, module, table);
    PyObject *mname = PyUnicode_FromString(module), *tname = PyUnicode_FromString(table);
    int ma = mname ? guardset_accessor(t->gs, ACC_MODULE, -1, 0, mname, NULL) : -1;
    int ta = ma < 0 || tname == NULL ? -1 : guardset_accessor(t->gs, ACC_ATTR, ma, 0, tname, NULL);
    int rc = ta < 0 ? -1 : guardset_add(t->gs, GUARD_DICT_LACKS, ta, cls, 0);
    Py_XDECREF(mname);
    Py_XDECREF(tname);
    return rc < 0 ? -1 : 0;
}

/* Guard what copying an instance of class value cls (a V_CONST reached by
   an accessor) consults: the hooks it must lack, the methods that must be
   object's, the tables it must be absent from.  0 / -1. */
static int guard_copy_protocol(CopyCall *c, Value *cls)
{
    Tracer *t = c->t;
    PyTypeObject *tp = (PyTypeObject *)cls->obj;
    const char *absent[] = {c->deep ? "__deepcopy__" : "__copy__", "__setstate__",
                            "__getnewargs_ex__", "__getnewargs__"};
    const char *objects[] = {"__reduce_ex__", "__reduce__", "__getstate__"};
    for (size_t i = 0; i < sizeof absent / sizeof absent[0]; i++) {
        PyObject *name = PyUnicode_FromString(absent[i]);
        /* hasattr of the class: its metaclass answers too */
        PyObject *found = name ? _PyType_Lookup(tp, name) : NULL;          /* borrowed */
        if (found == NULL && name != NULL)
            found = _PyType_Lookup(Py_TYPE(tp), name);
        int rc = name == NULL ? -1
                 : found != NULL ? tracer_unsupported(t, false, "copy of a %s, which has %s",
                                                      tp->tp_name, absent[i])
                 : guardset_add(t->gs, GUARD_HASATTR, cls->src, name, 0);
        Py_XDECREF(name);
        if (rc < 0)
            return -1;
    }
    for (size_t i = 0; i < sizeof objects / sizeof objects[0]; i++) {
        PyObject *name = PyUnicode_FromString(objects[i]);
        PyObject *mine = name ? _PyType_Lookup(tp, name) : NULL;           /* borrowed */
        PyObject *base = name ? _PyType_Lookup(&PyBaseObject_Type, name) : NULL;
        int acc = name ? guardset_accessor(t->gs, ACC_ATTR, cls->src, 0, name, NULL) : -1;
        int rc = acc < 0 ? -1
                 : mine != base ? tracer_unsupported(t, false, "copy of a %s, which has its own %s",
                                                     tp->tp_name, objects[i])
                 : guardset_add(t->gs, GUARD_ID_MATCH, acc, base, 0);
        Py_XDECREF(name);
        if (rc < 0)
            return -1;
    }
    if (guard_not_registered(t, cls->obj, "copyreg", "dispatch_table") < 0
        || guard_not_registered(t, cls->obj, "copy", c->deep ? "_deepcopy_dispatch" : "_copy_dispatch") < 0)
        return -1;
    return 0;
}

/* A new object of class value cls whose __dict__ holds the (copied)
   entries of attribute dict d, skipping deleted ones; `from` maps to it
   in the memo before its attributes are copied (a cycle through it finds
   it).  NULL when tracing stops. */
static Value *object_from_attrs(CopyCall *c, Value *from, Value *cls, Value *d, int depth)
{
    if (guard_copy_protocol(c, cls) < 0)
        return NULL;
    for (int i = 0; c->deep && i < d->n; i++) {
        /* deepcopy asks the instance itself for __deepcopy__ (getattr(x,
           ...)): the dict's keys are guarded, or known */
        PyObject *key = PyList_GET_ITEM(d->obj, i);
        if (PyUnicode_Check(key) && PyUnicode_CompareWithASCIIString(key, "__deepcopy__") == 0
            && d->items[i]->kind != V_NULL)
            return tracer_unsupported(c->t, false, "deep copy of an object with its own __deepcopy__ "
                                      "attribute"), NULL;
    }
    Value *o = tr_newobj_blank(c->t, cls);
    if (o == NULL || memo_put(c, from, o) < 0)
        return NULL;
    for (int i = 0; i < d->n; i++) {
        if (d->items[i]->kind == V_NULL)
            continue;                                   /* deleted */
        Value *item = c->deep ? copy_value(c, d->items[i], depth + 1) : d->items[i];
        if (item == NULL || tr_dict_set_item(c->t, o->items[0], PyList_GET_ITEM(d->obj, i), item) < 0)
            return NULL;
    }
    return o;
}

/* An object of a program class read through an accessor, copied. */
static Value *copy_object(CopyCall *c, Value *v, int depth)
{
    Tracer *t = c->t;
    PyTypeObject *tp = Py_TYPE(v->obj);
    if (!(tp->tp_flags & Py_TPFLAGS_HEAPTYPE))
        return tracer_unsupported(t, false, "copy of a %s", tp->tp_name), NULL;
    int ta = guardset_accessor(t->gs, ACC_TYPE, v->src, 0, NULL, NULL);
    Value *cls = ta < 0 ? NULL : value_from_source(t, ta, (PyObject *)tp);
    if (cls == NULL)
        return NULL;
    PyObject *name = PyUnicode_FromString("__dict__");
    /* the instance dict as object.__getstate__ takes it: never through the
       class's own __getattribute__ */
    PyObject *dict = name ? PyObject_GenericGetAttr(v->obj, name) : NULL;
    int da = dict ? guardset_accessor(t->gs, ACC_OBJATTR, v->src, 0, name, NULL) : -1;
    Py_XDECREF(name);
    if (dict == NULL || !PyDict_CheckExact(dict)) {
        Py_XDECREF(dict);
        if (PyErr_Occurred() && !PyErr_ExceptionMatches(PyExc_AttributeError))
            return NULL;
        PyErr_Clear();
        return tracer_unsupported(t, false, "copy of a %s without a plain __dict__", tp->tp_name), NULL;
    }
    Value *d = da < 0 ? NULL : value_from_source(t, da, dict);
    Py_DECREF(dict);
    if (d == NULL)
        return NULL;
    if (d->kind != V_DICT)
        return tracer_unsupported(t, false, "copy of a %s: its __dict__ is not read as a dict",
                                  tp->tp_name), NULL;
    return object_from_attrs(c, v, cls, d, depth);
}

/* A new list, or dict, of v's (copied) items. */
static Value *copy_container(CopyCall *c, Value *v, int depth)
{
    Tracer *t = c->t;
    Value *out = value_new(t, v->kind, NULL);
    if (out == NULL || (v->kind == V_DICT && (out->obj = PyList_New(0)) == NULL)
        || memo_put(c, v, out) < 0)
        return NULL;
    for (int i = 0; i < v->n; i++) {
        if (v->items[i]->kind == V_NULL)
            continue;                                   /* a deleted attribute */
        Value *item = c->deep ? copy_value(c, v->items[i], depth + 1) : v->items[i];
        if (item == NULL)
            return NULL;
        if (v->kind == V_DICT && c->deep && !copies_to_itself(PyList_GET_ITEM(v->obj, i)))
            return tracer_unsupported(t, false, "deep copy of a dict with a key of type %s",
                                      Py_TYPE(PyList_GET_ITEM(v->obj, i))->tp_name), NULL;
        int rc = v->kind == V_DICT ? tr_dict_set_item(t, out, PyList_GET_ITEM(v->obj, i), item)
                                   : value_append(t, out, item);
        if (rc < 0)
            return NULL;
    }
    return out;
}

/* A tuple: itself when every item copies to itself, else a new one. */
static Value *copy_tuple(CopyCall *c, Value *v, int depth)
{
    Value *items[64];
    bool same = true;
    if (!c->deep)
        return v;
    if (v->n > (int)(sizeof items / sizeof items[0]))
        return tracer_unsupported(c->t, false, "deep copy of a tuple of %d items", v->n), NULL;
    for (int i = 0; i < v->n; i++) {
        if ((items[i] = copy_value(c, v->items[i], depth + 1)) == NULL)
            return NULL;
        same = same && items[i] == v->items[i];
    }
    if (same)
        return v;
    Value *out = value_new(c->t, V_TUPLE, NULL);
    for (int i = 0; out != NULL && i < v->n; i++)
        if (value_append(c->t, out, items[i]) < 0)
            return NULL;
    return out;
}

/* A program's set of constants (a V_CONST, or a V_OBJECT an accessor
   reaches: its members and their order guarded, as iterating it would): a
   new set this frame owns, made as the copy makes it (its table copied,
   so `merged`).  A deep copy needs members that copy to themselves. */
static Value *copy_set(CopyCall *c, Value *v)
{
    Tracer *t = c->t;
    Value *held = v;                           /* the memo's key */
    if (v->kind == V_OBJECT) {
        if (PySet_GET_SIZE(v->obj) > 256)
            return tracer_unsupported(t, false, "copy of a set of %zd members",
                                      PySet_GET_SIZE(v->obj)), NULL;
        if (tr_note_set_read(t, v) < 0)
            return NULL;
        PyObject *order = PySequence_Tuple(v->obj);
        if (order == NULL)
            return NULL;
        int a = value_is_plain_constant(order)
                ? guardset_accessor(t->gs, ACC_SET_ORDER, v->src, 0, NULL, NULL) : -2;
        int rc = a >= 0 ? guardset_add(t->gs, GUARD_EQUALS_MATCH, a, order, 0) : a;
        Py_DECREF(order);
        if (rc == -2)
            return tracer_unsupported(t, false, "copy of a set of members that are not constants"), NULL;
        if (rc < 0)
            return NULL;
        v = value_new(t, V_CONST, v->obj);     /* its contents, now guarded */
        if (v == NULL)
            return NULL;
    }
    PyObject *it = c->deep ? PyObject_GetIter(v->obj) : NULL, *m;
    if (c->deep && it == NULL)
        return NULL;
    while (it != NULL && (m = PyIter_Next(it)) != NULL) {
        bool plain = copies_to_itself(m);
        PyTypeObject *tp = Py_TYPE(m);
        Py_DECREF(m);
        if (!plain) {
            Py_DECREF(it);
            return tracer_unsupported(t, false, "deep copy of a set with a member of type %s",
                                      tp->tp_name), NULL;
        }
    }
    Py_XDECREF(it);
    if (PyErr_Occurred())
        return NULL;
    Value *out = tr_new_set(t);
    bool handled;
    if (out == NULL || memo_put(c, held, out) < 0 || tr_set_merge(t->current, out, v, &handled) < 0)
        return NULL;
    return out;
}

/* A set made while tracing (its members constants, in items): a new one
   whose table is copied from it, as set.copy() makes it (`merged`). */
static Value *copy_traced_set(CopyCall *c, Value *v)
{
    Tracer *t = c->t;
    for (int i = 0; c->deep && i < v->n; i++)
        if (!copies_to_itself(v->items[i]->obj))
            return tracer_unsupported(t, false, "deep copy of a set with a member of type %s",
                                      Py_TYPE(v->items[i]->obj)->tp_name), NULL;
    Value *out = tr_new_set(t);
    if (out == NULL || memo_put(c, v, out) < 0)
        return NULL;
    PyObject *r = PyObject_CallMethod(out->obj, "update", "O", v->obj);
    if (r == NULL)
        return NULL;
    Py_DECREF(r);
    out->merged = true;
    for (int i = 0; i < v->n; i++)
        if (value_append(t, out, v->items[i]) < 0)
            return NULL;
    return out;
}

static Value *copy_value(CopyCall *c, Value *v, int depth)
{
    Tracer *t = c->t;
    if (depth > COPY_DEPTH_MAX)
        return tracer_unsupported(t, false, "copy nested deeper than %d", COPY_DEPTH_MAX), NULL;
    Value *seen = memo_get(c, v);
    if (seen != NULL)
        return seen;
    switch (v->kind) {
    case V_CONST:
        if (copies_to_itself(v->obj))
            return v;
        if (PySet_CheckExact(v->obj))
            return copy_set(c, v);
        if (v->src >= 0 && Py_TYPE(v->obj)->tp_flags & Py_TPFLAGS_HEAPTYPE)
            return copy_object(c, v, depth);
        break;
    case V_TUPLE:
        if (v->stands_for == NULL)
            return copy_tuple(c, v, depth);
        break;
    case V_LIST:
        return copy_container(c, v, depth);
    case V_DICT:
        if (v->stands_for == NULL)
            return copy_container(c, v, depth);
        break;
    case V_OBJECT:
        if (v->src >= 0 && PySet_CheckExact(v->obj))
            return copy_set(c, v);
        if (v->src >= 0)
            return copy_object(c, v, depth);
        break;
    case V_NEWOBJ:
        if (v->n == 2 && v->items[1]->kind == V_CONST && v->items[1]->src >= 0)
            return object_from_attrs(c, v, v->items[1], v->items[0], depth);
        break;
    case V_SET:
        if (!v->unordered)
            return copy_traced_set(c, v);
        break;
    case V_TENSOR:
        return tracer_unsupported(t, false, "copy of a tensor"), NULL;
    default:
        break;
    }
    return tracer_unsupported(t, false, "copy of a %s",
                              v->obj && v->kind != V_DICT ? Py_TYPE(v->obj)->tp_name : "value of this kind"), NULL;
}

/* (contract: translate_int.h) */
Value *tr_copy(TFrame *f, Value *x, bool deep)
{
    CopyCall *c = PyMem_Malloc(sizeof *c);       /* the memo is large for the C stack */
    if (c == NULL)
        return PyErr_NoMemory(), NULL;
    c->t = f->t;
    c->deep = deep;
    c->memo.n = 0;
    Value *r = copy_value(c, x, 0);
    PyMem_Free(c);
    return r;
}
