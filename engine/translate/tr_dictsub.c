/*
 * tr_dictsub.c -- instances of dict subclasses the program holds
 * (transformers' ModelOutput, an OrderedDict subclass; collections'
 * OrderedDict, defaultdict and Counter read only): len(), .keys(),
 * .values(), .items(), iteration, `in` and d[key], where the class leaves
 * those to dict's (or OrderedDict's) C code.  Contract: translate_int.h.
 *
 * Such an object stays an opaque V_OBJECT (its attributes and its Python
 * methods are read and inlined as any object's).  Its keys are read once,
 * by the first operation here that needs them, into Value.dict_keys, and
 * guarded then (DICT_KEYS over its own iteration order): a frame that only
 * reads attributes of a ModelOutput is not recompiled when its keys
 * change.  One item (d[key], d.get(key), key in d) is read as super()'s
 * dict methods read it (tr_dict_method_of_subclass: the item's accessor, or
 * its absence), with no keys guard.  Each operation here first checks, and
 * guards, that the
 * class resolves it to the C method of dict or OrderedDict: the class
 * attribute is the same descriptor (ID_MATCH on type(obj).name) and, for a
 * method, no instance attribute hides it (DICT_LACKS on obj.__dict__).
 * d[key] = value (tr_dict_view_store): the class's own __setitem__ in
 * Python is inlined; dict's or OrderedDict's -- the store such a method
 * ends in too, bound by super() -- is recorded and replayed after the graph
 * (tr_effects.c).  The storage changes only then, so this frame reads no
 * item of an instance it wrote (tr_note_dictsub_read stops): the keys read
 * stay true for the whole translated region.
 */
#include "translate_int.h"

/* The class attribute `name` of obj's type, when it is the C code of dict
   or of OrderedDict (whose storage is dict's; another C subclass may keep
   its own): borrowed, or NULL. */
static PyObject *c_dict_descr(PyObject *obj, PyObject *name)
{
    PyObject *d = _PyType_Lookup(Py_TYPE(obj), name);      /* borrowed */
    PyTypeObject *owner = NULL;
    if (d != NULL && (Py_IS_TYPE(d, &PyMethodDescr_Type) || Py_IS_TYPE(d, &PyWrapperDescr_Type)))
        owner = PyDescr_TYPE(d);
    return owner == &PyDict_Type || owner == &PyODict_Type ? d : NULL;
}

/* Whether obj.name (a method, or a slot's dunder when `slot`) is dict's C
   code, guarded to stay so.  1 yes, 0 no (no guard added), -1 stop. */
static int guard_c_dict_method(Tracer *t, Value *obj, const char *cname, bool slot)
{
    PyObject *name = PyUnicode_InternFromString(cname);
    if (name == NULL)
        return -1;
    PyObject *d = c_dict_descr(obj->obj, name);
    int rc = 0;
    if (d != NULL) {
        int ta = guardset_accessor(t->gs, ACC_TYPE, obj->src, 0, NULL, NULL);
        int da = ta < 0 ? -1 : guardset_accessor(t->gs, ACC_ATTR, ta, 0, name, NULL);
        rc = da < 0 || guardset_add(t->gs, GUARD_ID_MATCH, da, d, 0) < 0 ? -1 : 1;
        PyObject **dictptr = slot || rc < 0 ? NULL : _PyObject_GetDictPtr(obj->obj);
        if (dictptr != NULL) {
            /* an instance attribute would hide the method (one set later
               too: guarded even while the instance has no dict yet) */
            if (*dictptr != NULL && PyDict_Contains(*dictptr, name) != 0) {
                rc = PyErr_Occurred() ? -1 : 0;
            }
            else {
                PyObject *dn = PyUnicode_InternFromString("__dict__");
                int ia = dn ? guardset_accessor(t->gs, ACC_OBJATTR, obj->src, 0, dn, NULL) : -1;
                Py_XDECREF(dn);
                if (ia < 0 || guardset_add(t->gs, GUARD_DICT_LACKS, ia, name, 0) < 0)
                    rc = -1;
            }
        }
    }
    Py_DECREF(name);
    return rc;
}

/* (contract: translate_int.h) */
bool tr_is_dict_view_object(Value *v)
{
    /* (an exact dict is an opaque V_OBJECT only for keys of other types:
       value_keyed_dict_lookup's) */
    return v->kind == V_OBJECT && v->src >= 0 && PyDict_Check(v->obj) && !PyDict_CheckExact(v->obj);
}

/* obj's keys in its iteration order (an OrderedDict's own, through its C
   iterator), read at the first need and guarded (DICT_KEYS, length 1: of a
   subclass, after its TYPE_MATCH; a second add is the same guard).  Keys
   other than str / int / bytes, more than 256, or an OrderedDict whose
   storage holds keys its order does not list (written through
   dict.__setitem__) stop tracing.  Borrowed, or NULL. */
static PyObject *keys_of(Tracer *t, Value *obj)
{
    if (tr_note_dictsub_read(t, obj) < 0)
        return NULL;
    if (obj->dict_keys == NULL) {
        PyObject *o = obj->obj;
        PyObject *it = PyObject_TypeCheck(o, &PyODict_Type) ? PyODict_Type.tp_iter(o)
                                                            : PyDict_Type.tp_iter(o);
        PyObject *keys = it ? PySequence_Tuple(it) : NULL;
        Py_XDECREF(it);
        if (keys == NULL)
            return NULL;
        Py_ssize_t n = PyTuple_GET_SIZE(keys);
        bool plain = n <= 256 && n == PyDict_GET_SIZE(o);
        for (Py_ssize_t i = 0; plain && i < n; i++) {
            PyObject *k = PyTuple_GET_ITEM(keys, i);
            plain = PyUnicode_CheckExact(k) || PyLong_CheckExact(k) || PyBytes_CheckExact(k);
        }
        if (!plain) {
            Py_DECREF(keys);
            return tracer_unsupported(t, false, "the keys of a %s: more than 256, or not all "
                                      "str, int or bytes", Py_TYPE(o)->tp_name), NULL;
        }
        obj->dict_keys = keys;
    }
    return guardset_add(t->gs, GUARD_DICT_KEYS, obj->src, obj->dict_keys, 1) < 0 ? NULL
           : obj->dict_keys;
}

/* The value of obj[key] for one of its keys, read through its accessor. */
static Value *item_of(Tracer *t, Value *obj, PyObject *key)
{
    if (tr_note_dictsub_read(t, obj) < 0)
        return NULL;
    PyObject *item = PyDict_GetItemWithError(obj->obj, key);   /* borrowed */
    if (item == NULL)
        return PyErr_Occurred() ? NULL
               : (tracer_unsupported(t, false, "a dict changed while tracing (a %s)",
                                     Py_TYPE(obj->obj)->tp_name), NULL);
    int ia = guardset_accessor(t->gs, ACC_DICT_ITEM, obj->src, 0, key, NULL);
    return ia < 0 ? NULL : value_from_source(t, ia, item);
}

/* A tuple value standing for what the program would get (a dict view):
   iterated, measured and indexed here, never handed to the program. */
static Value *view_tuple(Tracer *t, const char *stands_for)
{
    Value *v = value_new(t, V_TUPLE, NULL);
    if (v != NULL)
        v->stands_for = stands_for;
    return v;
}

/* (contract: translate_int.h) */
Value *tr_dict_view_len(TFrame *f, Value *obj)
{
    int ok = guard_c_dict_method(f->t, obj, "__len__", true);
    if (ok <= 0)
        return ok < 0 ? NULL : (tracer_unsupported(f->t, false, "len() of a %s: its class defines __len__",
                                                   Py_TYPE(obj->obj)->tp_name), NULL);
    PyObject *keys = keys_of(f->t, obj);
    return keys ? new_const(f->t, PyLong_FromSsize_t(PyTuple_GET_SIZE(keys))) : NULL;
}

/* (contract: translate_int.h) */
Value *tr_dict_view_method(TFrame *f, Value *obj, PyObject *name, Value **args, int nargs,
                           PyObject *kwnames, bool *handled)
{
    Tracer *t = f->t;
    *handled = false;
    const char *n = PyUnicode_AsUTF8(name);
    if (n == NULL)
        return NULL;
    bool keys = strcmp(n, "keys") == 0, values = strcmp(n, "values") == 0,
         items = strcmp(n, "items") == 0, get = strcmp(n, "get") == 0;
    if ((kwnames != NULL && PyTuple_GET_SIZE(kwnames) > 0)
        || !((keys || values || items) ? nargs == 0 : get && (nargs == 1 || nargs == 2)))
        return NULL;
    int ok = guard_c_dict_method(t, obj, n, false);
    if (ok <= 0)
        return NULL;                    /* -1: stopped (reason or exception) */
    *handled = true;
    if (get)                            /* one item, present or absent: no keys guard */
        return tr_dict_method_of_subclass(f, c_dict_descr(obj->obj, name), obj, args, nargs, NULL);
    PyObject *keys_now = keys_of(t, obj);
    if (keys_now == NULL)
        return NULL;
    Value *out = view_tuple(t, keys ? "dict_keys" : values ? "dict_values" : "dict_items");
    for (Py_ssize_t i = 0; out != NULL && i < PyTuple_GET_SIZE(keys_now); i++) {
        PyObject *k = PyTuple_GET_ITEM(keys_now, i);
        Value *kv = keys || items ? new_const(t, Py_NewRef(k)) : NULL;
        Value *vv = values || items ? item_of(t, obj, k) : NULL;
        if ((keys || items) && kv == NULL)
            return NULL;
        if ((values || items) && vv == NULL)
            return NULL;
        Value *e = kv;
        if (items) {
            e = value_new(t, V_TUPLE, NULL);
            if (e == NULL || value_append(t, e, kv) < 0 || value_append(t, e, vv) < 0)
                return NULL;
        }
        else if (values)
            e = vv;
        if (value_append(t, out, e) < 0)
            return NULL;
    }
    return out;
}

/* (contract: translate_int.h) */
Value *tr_dict_view_iter(TFrame *f, Value *obj)
{
    int ok = guard_c_dict_method(f->t, obj, "__iter__", true);
    if (ok < 0)
        return NULL;
    if (ok == 0)
        return tracer_unsupported(f->t, false, "iterating a %s: its class defines __iter__",
                                  Py_TYPE(obj->obj)->tp_name), NULL;
    PyObject *keys = keys_of(f->t, obj);
    Value *out = keys ? view_tuple(f->t, "dict_keyiterator") : NULL;
    for (Py_ssize_t i = 0; out != NULL && i < PyTuple_GET_SIZE(keys); i++) {
        Value *kv = new_const(f->t, Py_NewRef(PyTuple_GET_ITEM(keys, i)));
        if (kv == NULL || value_append(f->t, out, kv) < 0)
            return NULL;
    }
    return out ? tr_make_iter(f, out) : NULL;
}

/* (contract: translate_int.h) */
Value *tr_dict_view_item(TFrame *f, Value *obj, const char *dunder, Value *key)
{
    int ok = guard_c_dict_method(f->t, obj, dunder, true);
    if (ok < 0)
        return NULL;
    if (ok == 0 && strcmp(dunder, "__getitem__") == 0)
        return tracer_unsupported(f->t, false, "subscript of a %s: its class defines __getitem__",
                                  Py_TYPE(obj->obj)->tp_name), NULL;
    if (ok == 0)
        return tracer_unsupported(f->t, false, "'in' on a %s: its class defines __contains__",
                                  Py_TYPE(obj->obj)->tp_name), NULL;
    PyObject *name = PyUnicode_InternFromString(dunder);
    PyObject *meth = name ? c_dict_descr(obj->obj, name) : NULL;
    Py_XDECREF(name);
    return meth ? tr_dict_method_of_subclass(f, meth, obj, &key, 1, NULL) : NULL;
}

/* (contract: translate_int.h) */
int tr_dict_view_store(TFrame *f, Value *obj, Value *key, Value *value)
{
    Tracer *t = f->t;
    bool handled;
    Value *args[2] = {key, value};
    Value *r = tr_call_own_method(f, obj, "__setitem__", args, 2, &handled);   /* the class's own */
    if (handled || PyErr_Occurred())
        return r ? 0 : -1;
    int ok = guard_c_dict_method(t, obj, "__setitem__", true);
    if (ok <= 0)
        return ok < 0 ? -1 : tracer_unsupported(t, false, "item assignment into a %s: its class "
                                                "defines __setitem__ in C", Py_TYPE(obj->obj)->tp_name);
    if (!foldable(key))
        return tracer_unsupported(t, false, "item assignment into a %s with a key that is not "
                                  "a constant", Py_TYPE(obj->obj)->tp_name);
    return tr_visible_dict_set_item(f, obj, key->obj, value);
}

/* d[key] as PyObject_GetItem does it: the class's own __getitem__ in
   Python inlined (guarded to stay it), or dict's.  NULL when tracing
   stops. */
static Value *get_item(TFrame *f, Value *obj, PyObject *key)
{
    Value *k = new_const(f->t, Py_NewRef(key));
    if (k == NULL)
        return NULL;
    bool handled;
    Value *r = tr_call_own_method(f, obj, "__getitem__", &k, 1, &handled);   /* the class's own */
    return handled || PyErr_Occurred() ? r : tr_dict_view_item(f, obj, "__getitem__", k);
}

/* (contract: translate_int.h) */
int tr_dict_view_merge(TFrame *f, Value *into, Value *obj, bool refuse_twice)
{
    Tracer *t = f->t;
    /* dict's merge reads a dict subclass's storage directly when its
       class keeps dict's iteration, else calls keys() and __getitem__
       (an OrderedDict's: ModelOutput's): both read here only where the
       class leaves keys() to dict's or OrderedDict's C code (the same
       keys, in the order both ways give) */
    bool direct = Py_TYPE(obj->obj)->tp_iter == PyDict_Type.tp_iter;
    int ok = guard_c_dict_method(t, obj, "keys", false);
    if (ok <= 0)
        return ok < 0 ? -1 : tracer_unsupported(t, false, "** of a %s whose class defines keys()",
                                                Py_TYPE(obj->obj)->tp_name);
    if (direct && (ok = guard_c_dict_method(t, obj, "__getitem__", true)) <= 0)
        return ok < 0 ? -1 : tracer_unsupported(t, false, "** of a %s whose class defines "
                                                "__getitem__ but keeps dict's iteration",
                                                Py_TYPE(obj->obj)->tp_name);
    PyObject *keys = keys_of(t, obj);
    if (keys == NULL)
        return -1;
    Py_INCREF(keys);                    /* (get_item runs code that could drop obj's cache) */
    int rc = 0;
    for (Py_ssize_t i = 0; rc == 0 && i < PyTuple_GET_SIZE(keys); i++) {
        PyObject *key = PyTuple_GET_ITEM(keys, i);
        Value *v = direct ? item_of(t, obj, key) : get_item(f, obj, key);
        rc = v == NULL ? -1 : tr_dict_merge_item(t, into, key, v, refuse_twice);
    }
    Py_DECREF(keys);
    return rc;
}
