/*
 * tr_effects.c -- attribute writes on objects the program can see,
 * recorded while translating and replayed after the graph (DESIGN.md 3.4;
 * contract: translate_int.h), as TorchDynamo's side-effect log does.
 *
 * `d[key] = value` on a dict read from a source is recorded the same way,
 * the dict's value updated for the reads that follow; dicts are told apart
 * by identity (a dict two accessors reach is one Value, values.c), and
 * dicts read besides one written are guarded to stay other objects
 * (NOT_SAME_AS).
 *
 * `obj.name = value` (or `del obj.name`) on an object reached by an
 * accessor whose class sets attributes as object.__setattr__ does (into
 * the instance __dict__; no data descriptor of that name) is not done
 * while tracing: it is appended to Tracer.writes, and later reads of that
 * attribute of that object -- by any accessor -- see the value written.
 * The plan performs the writes after the graph ran, in program order,
 * before its exit (the return, the eager step, the branch, the deopt), so
 * the program sees exactly what it would have eagerly.
 *
 * Invariants:
 *   - What a write relied on is guarded: type(obj).__setattr__ is
 *     object.__setattr__ and the class has no attribute of that name, or
 *     the same non-data one (ACC_TYPE then ACC_ATTR).
 *   - Objects are told apart by identity while tracing; a read that found
 *     its object among the written ones guards that the two accessors
 *     reach one object (SAME_AS), and a read of a written name on another
 *     object guards that they stay two (NOT_SAME_AS), so the aliasing the
 *     plan assumed holds on every call it serves.
 *   - A call that stops (it will run eagerly) drops the writes it made
 *     (tr_call_or_undo truncates Tracer.writes).
 *
 * A class with its own __setattr__ (ModelOutput's, nn.Module's) written
 * to: the method is inlined, and what it ends in is recorded -- super()'s
 * object.__setattr__ as a generic write (no data descriptor of that name,
 * guarded), dict's or OrderedDict's __setitem__ on a dict subclass
 * instance as an item write -- each replayed by that builtin store, so the
 * class's Python code runs once, while tracing.  The items of an instance
 * so written are not read again in the frame (tr_note_dictsub_read stops:
 * the storage changes only after the graph).
 */
#include "translate_int.h"

/* Whether obj's class writes attributes generically; sets *why when not. */
static bool sets_generically(PyObject *obj, const char **why)
{
    PyTypeObject *tp = Py_TYPE(obj);
    if (PyType_Check(obj) || PyModule_Check(obj)) {
        *why = PyType_Check(obj) ? "a class" : "a module";
        return false;
    }
    if (tp->tp_setattro != PyObject_GenericSetAttr) {
        *why = "its class has its own __setattr__";
        return false;
    }
    if (_PyObject_GetDictPtr(obj) == NULL) {
        *why = "it has no __dict__";
        return false;
    }
    return true;
}

/* Guard what writing obj.name into its __dict__ relies on: no data
   descriptor of that name on the class.  0 / -1. */
static int guard_no_data_descr(Tracer *t, Value *obj, PyObject *name)
{
    PyTypeObject *tp = Py_TYPE(obj->obj);
    int ta = guardset_accessor(t->gs, ACC_TYPE, obj->src, 0, NULL, NULL);
    if (ta < 0)
        return -1;
    PyObject *descr = _PyType_Lookup(tp, name);
    if (descr == NULL)
        return guardset_add(t->gs, GUARD_CLASS_LACKS, ta, name, 0);
    if (Py_TYPE(descr)->tp_descr_set != NULL)
        return tracer_unsupported(t, false, "setting attribute '%U' of a %s: a %s", name,
                                  tp->tp_name, Py_TYPE(descr)->tp_name);
    int ca = guardset_accessor(t->gs, ACC_ATTR, ta, 0, name, NULL);
    PyObject *now = ca < 0 ? NULL : PyObject_GetAttr((PyObject *)tp, name);
    Value *v = now ? value_from_source(t, ca, now) : NULL;               /* stays what it is */
    Py_XDECREF(now);
    return v ? 0 : -1;
}

/* Guard what writing obj.name into its __dict__ relies on: the class's
   __setattr__, and no data descriptor of that name.  0 / -1. */
static int guard_plain_write(Tracer *t, Value *obj, PyObject *name)
{
    static PyObject *setattr_name;
    if (setattr_name == NULL && (setattr_name = PyUnicode_InternFromString("__setattr__")) == NULL)
        return -1;
    int ta = guardset_accessor(t->gs, ACC_TYPE, obj->src, 0, NULL, NULL);
    int sa = ta < 0 ? -1 : guardset_accessor(t->gs, ACC_ATTR, ta, 0, setattr_name, NULL);
    PyObject *setter = _PyType_Lookup(Py_TYPE(obj->obj), setattr_name);    /* borrowed */
    if (sa < 0 || setter == NULL || guardset_add(t->gs, GUARD_ID_MATCH, sa, setter, 0) < 0)
        return -1;
    return guard_no_data_descr(t, obj, name);
}

/* Record write w (target, name, value, item) at the end of t->writes.
   0 / -1. */
static int append_write(Tracer *t, Value *target, PyObject *name, Value *value, bool item,
                        bool builtin)
{
    if (t->nwrites == t->writes_cap) {
        int cap = t->writes_cap ? t->writes_cap * 2 : 8;
        AttrWrite *w = PyMem_Realloc(t->writes, sizeof(AttrWrite) * (size_t)cap);
        if (w == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        t->writes = w;
        t->writes_cap = cap;
    }
    AttrWrite *w = &t->writes[t->nwrites++];
    w->target = target;
    w->name = Py_NewRef(name);
    w->value = value;
    w->item = item;
    w->builtin = builtin;
    w->set_member = false;
    return 0;
}

static int guard_apart(Tracer *t, int a, int b);
static int dictsub_apart(Tracer *t, Value *d, bool reading);

/* (contract: translate_int.h) */
int tr_visible_set_attr(TFrame *f, Value *obj, PyObject *name, Value *value)
{
    Tracer *t = f->t;
    const char *why = NULL;
    if ((obj->kind != V_OBJECT && obj->kind != V_CONST) || obj->src < 0)
        return tracer_unsupported(t, false, "%s attribute '%U' of a value no accessor reaches",
                                  value ? "setting" : "deleting", name);
    if (!sets_generically(obj->obj, &why)) {
        /* the class's own __setattr__ in Python, inlined */
        bool handled = false;
        Value *key = value && !PyType_Check(obj->obj) && !PyModule_Check(obj->obj)
                     ? new_const(t, Py_NewRef(name)) : NULL;
        Value *args[2] = {key, value};
        Value *r = key ? tr_call_own_method(f, obj, "__setattr__", args, 2, &handled) : NULL;
        if (handled || PyErr_Occurred())
            return r ? 0 : -1;
        return tracer_unsupported(t, false, "%s attribute '%U' of %s the program can see: %s",
                                  value ? "setting" : "deleting", name, Py_TYPE(obj->obj)->tp_name, why);
    }
    if (value == NULL) {
        bool found;
        Value *cur = tr_written_attr(f, obj, name, &found);
        if (found ? cur == NULL : !PyObject_HasAttr(obj->obj, name))
            return tracer_unsupported(t, false, "deleting attribute '%U' a %s lacks", name,
                                      Py_TYPE(obj->obj)->tp_name);
    }
    if (guard_plain_write(t, obj, name) < 0)
        return -1;
    return append_write(t, obj, name, value, false, false);
}

/* (contract: translate_int.h) */
int tr_visible_generic_set_attr(TFrame *f, Value *obj, PyObject *name, Value *value)
{
    Tracer *t = f->t;
    if ((obj->kind != V_OBJECT && obj->kind != V_CONST) || obj->src < 0 || PyType_Check(obj->obj)
        || PyModule_Check(obj->obj) || _PyObject_GetDictPtr(obj->obj) == NULL)
        return tracer_unsupported(t, false, "object.__setattr__ of a %s", Py_TYPE(obj->obj)->tp_name);
    if (guard_no_data_descr(t, obj, name) < 0)
        return -1;
    return append_write(t, obj, name, value, false, true);
}

/* (contract: translate_int.h) */
int tr_visible_dict_set_item(TFrame *f, Value *d, PyObject *key, Value *value)
{
    Tracer *t = f->t;
    if (d->kind != V_OBJECT || d->src < 0 || !PyDict_Check(d->obj)
        || !(PyUnicode_CheckExact(key) || PyLong_CheckExact(key) || PyBytes_CheckExact(key)))
        return tracer_unsupported(t, false, "item assignment into a %s with such a key",
                                  Py_TYPE(d->obj)->tp_name);
    if (dictsub_apart(t, d, false) < 0)          /* other instances written: apart */
        return -1;
    return append_write(t, d, key, value, true, true);
}

/* The dict subclass instances this frame wrote items of, other than d:
   guarded to stay other objects than d.  When d itself was written, -1
   after stopping if `reading`, else 0 (another write: replayed in order).
   0 / -1. */
static int dictsub_apart(Tracer *t, Value *d, bool reading)
{
    for (int i = 0; i < t->nwrites; i++) {
        AttrWrite *w = &t->writes[i];
        if (!w->item || !w->builtin)
            continue;
        if (w->target->obj == d->obj) {
            if (reading)
                return tracer_unsupported(t, false, "the items of a %s read after this frame "
                                          "wrote one", Py_TYPE(d->obj)->tp_name);
            continue;
        }
        if (d->src >= 0 && w->target->src >= 0 && d->src != w->target->src
            && guard_apart(t, d->src, w->target->src) < 0)
            return -1;
    }
    return 0;
}

/* (contract: translate_int.h) */
Value *tr_builtin_store_call(TFrame *f, PyObject *fn, Value **args, int nargs, PyObject *kwnames,
                             bool *handled)
{
    *handled = false;
    if (!Py_IS_TYPE(fn, &PyWrapperDescr_Type) || nargs != 3
        || (kwnames != NULL && PyTuple_GET_SIZE(kwnames) > 0)
        || (args[0]->kind != V_OBJECT && args[0]->kind != V_CONST) || args[0]->src < 0)
        return NULL;
    PyTypeObject *owner = PyDescr_TYPE(fn);
    const char *slot = ((PyWrapperDescrObject *)fn)->d_base->name;
    int rc;
    if (owner == &PyBaseObject_Type && strcmp(slot, "__setattr__") == 0 && args[1]->kind == V_CONST
        && PyUnicode_CheckExact(args[1]->obj))
        rc = tr_visible_generic_set_attr(f, args[0], args[1]->obj, args[2]);
    else if ((owner == &PyDict_Type || owner == &PyODict_Type) && strcmp(slot, "__setitem__") == 0
             && PyObject_TypeCheck(args[0]->obj, owner) && !PyDict_CheckExact(args[0]->obj)
             && foldable(args[1]))
        rc = tr_visible_dict_set_item(f, args[0], args[1]->obj, args[2]);
    else
        return NULL;
    *handled = true;
    return rc < 0 ? NULL : new_const(f->t, Py_NewRef(Py_None));
}

/* (contract: translate_int.h) */
int tr_note_dictsub_read(Tracer *t, Value *d)
{
    return dictsub_apart(t, d, true);
}

/* Guard that the dicts accessors a and b reach stay two objects. */
static int guard_apart(Tracer *t, int a, int b)
{
    return guardset_add(t->gs, GUARD_NOT_SAME_AS, a > b ? a : b, NULL, a > b ? b : a);
}

/* Every other dict read so far is another object than d, which is about
   to be written: guarded so.  0 / -1. */
static int guard_other_dicts_apart(Tracer *t, Value *d)
{
    for (int a = 0; a < t->by_acc_cap; a++) {
        Value *o = t->by_acc[a];
        if (o == NULL || o == d || o->kind != V_DICT || o->real == NULL)
            continue;
        if (o->real == d->real)
            return tracer_unsupported(t, false, "item assignment into a dict the frame reaches "
                                      "two ways");
        if (guard_apart(t, a, d->src) < 0)
            return -1;
    }
    return 0;
}

/* (contract: translate_int.h) */
int tr_visible_del_item(TFrame *f, Value *d, int i)
{
    Tracer *t = f->t;
    if (guard_other_dicts_apart(t, d) < 0 || tracer_note_snapshot(t, d) < 0)
        return -1;
    PyObject *key = Py_NewRef(PyList_GET_ITEM(d->obj, i));
    if (PySequence_DelItem(d->obj, i) < 0) {
        Py_DECREF(key);
        return -1;
    }
    memmove(d->items + i, d->items + i + 1, sizeof(Value *) * (size_t)(d->n - i - 1));
    d->n--;
    int rc = append_write(t, d, key, NULL, true, false);
    Py_DECREF(key);
    return rc;
}

/* (contract: translate_int.h) */
int tr_visible_set_item(TFrame *f, Value *d, PyObject *key, Value *value)
{
    Tracer *t = f->t;
    if (guard_other_dicts_apart(t, d) < 0)
        return -1;
    int i = -1;
    for (int j = 0; j < d->n && i < 0; j++) {
        int eq = PyObject_RichCompareBool(PyList_GET_ITEM(d->obj, j), key, Py_EQ);
        if (eq < 0)
            return -1;
        if (eq)
            i = j;
    }
    if (tracer_note_mutation(t, d, i) < 0)
        return -1;
    if (i >= 0)
        d->items[i] = value;
    else if (PyList_Append(d->obj, key) < 0 || value_append(t, d, value) < 0)
        return -1;
    return append_write(t, d, key, value, true, false);
}

/* (contract: translate_int.h) */
int tr_note_dict_read(Tracer *t, int acc, PyObject *obj)
{
    for (int i = 0; i < t->nwrites; i++) {
        AttrWrite *w = &t->writes[i];
        if (!w->item || w->builtin || w->set_member)  /* (a dict subclass instance, a set:
                                                          never a plain dict) */
            continue;
        if (w->target->real == obj)
            return tracer_unsupported(t, false, "a dict reached two ways after an item "
                                      "assignment into it");
        if (guard_apart(t, acc, w->target->src) < 0)
            return -1;
    }
    return 0;
}

/* (contract: translate_int.h) */
Value *tr_written_attr(TFrame *f, Value *obj, PyObject *name, bool *found)
{
    Tracer *t = f->t;
    *found = false;
    if ((obj->kind != V_OBJECT && obj->kind != V_CONST) || t->nwrites == 0)
        return NULL;
    Value *hit = NULL;
    int hit_i = -1;
    for (int i = t->nwrites - 1; i >= 0; i--) {
        AttrWrite *w = &t->writes[i];
        if (w->item)
            continue;
        int eq = PyUnicode_Compare(w->name, name);
        if (eq == -1 && PyErr_Occurred())
            return NULL;
        if (eq != 0)
            continue;
        if (w->target->obj == obj->obj) {
            if (hit_i < 0) {
                hit_i = i;
                hit = w->value;
            }
        }
        else if (obj->src >= 0 && w->target->src != obj->src) {
            int later = obj->src > w->target->src ? obj->src : w->target->src;
            int earlier = obj->src > w->target->src ? w->target->src : obj->src;
            if (guardset_add(t->gs, GUARD_NOT_SAME_AS, later, NULL, earlier) < 0)
                return NULL;
        }
    }
    if (hit_i < 0)
        return NULL;
    Value *target = t->writes[hit_i].target;
    if (obj->src >= 0 && target->src != obj->src) {
        int later = obj->src > target->src ? obj->src : target->src;
        int earlier = obj->src > target->src ? target->src : obj->src;
        if (guardset_add(t->gs, GUARD_SAME_AS, later, NULL, earlier) < 0)
            return NULL;
    }
    *found = true;
    return hit;       /* NULL: deleted */
}

/* (contract: translate_int.h) */
Value *tr_instance_dict_after_writes(Tracer *t, Value *obj, Value *d)
{
    if (d->kind != V_DICT)
        return tracer_unsupported(t, false, "__dict__ of an object with writes to replay"), NULL;
    Value *c = value_new(t, V_DICT, NULL);
    if (c == NULL || (c->obj = PyList_New(0)) == NULL)
        return NULL;
    c->stands_for = "__dict__ read after writes to its object";
    for (int i = 0; i < d->n; i++)
        if (tr_dict_set_item(t, c, PyList_GET_ITEM(d->obj, i), d->items[i]) < 0)
            return NULL;
    for (int i = 0; i < t->nwrites; i++) {
        AttrWrite *w = &t->writes[i];
        if (w->item)
            continue;
        if (w->target->obj != obj->obj) {
            if (obj->src >= 0 && w->target->src >= 0 && w->target->src != obj->src
                && guardset_add(t->gs, GUARD_NOT_SAME_AS, obj->src > w->target->src ? obj->src : w->target->src,
                                NULL, obj->src > w->target->src ? w->target->src : obj->src) < 0)
                return NULL;
            continue;
        }
        if (w->value == NULL)
            return tracer_unsupported(t, false, "__dict__ of an object with an attribute deleted "
                                      "while tracing"), NULL;
        if (tr_dict_set_item(t, c, w->name, w->value) < 0)
            return NULL;
    }
    return c;
}

/* (contract: translate_int.h) */
bool tr_dict_has_item_writes(Tracer *t, Value *d)
{
    for (int i = 0; d != NULL && d->kind == V_DICT && d->real != NULL && i < t->nwrites; i++)
        if (t->writes[i].item && t->writes[i].target->real == d->real)
            return true;
    return false;
}

/* (contract: translate_int.h) */
bool tr_has_writes(Tracer *t, PyObject *obj)
{
    for (int i = 0; i < t->nwrites; i++)
        if (!t->writes[i].item && t->writes[i].target->obj == obj)
            return true;
    return false;
}

/* (contract: translate_int.h) */
void tr_writes_truncate(Tracer *t, int mark)
{
    while (t->nwrites > mark) {
        t->nwrites--;
        Py_CLEAR(t->writes[t->nwrites].name);     /* (Py_CLEAR names its argument twice) */
    }
}

/* (contract: translate_int.h) */
void tr_writes_free(Tracer *t)
{
    tr_writes_truncate(t, 0);
    PyMem_Free(t->writes);
    t->writes = NULL;
    t->writes_cap = 0;
}

/* The index of constant key in V_DICT d's keys, -1 when absent, -2 on an
   error. */
static int dict_key_index(Value *d, PyObject *key)
{
    for (int i = 0; i < d->n; i++) {
        int eq = PyObject_RichCompareBool(PyList_GET_ITEM(d->obj, i), key, Py_EQ);
        if (eq != 0)
            return eq < 0 ? -2 : i;
    }
    return -1;
}

/* (contract: translate_int.h) */
Value *tr_visible_dict_method(TFrame *f, Value *d, PyObject *name, Value **args, int nargs,
                              bool *handled)
{
    Tracer *t = f->t;
    bool pop = PyUnicode_CompareWithASCIIString(name, "pop") == 0;
    bool setdefault = PyUnicode_CompareWithASCIIString(name, "setdefault") == 0;
    bool update = PyUnicode_CompareWithASCIIString(name, "update") == 0;
    *handled = ((pop || setdefault) && (nargs == 1 || nargs == 2)) || (update && nargs == 1);
    if (!*handled)
        return NULL;
    if (update) {
        /* d.update(other): other's items set in its order */
        Value *o = args[0];
        if (o->kind != V_DICT || o->stands_for != NULL || o == d)
            return tracer_unsupported(t, false, "dict.update() of a dict the program can see "
                                      "with this argument"), NULL;
        int n = o->n;
        for (int i = 0; i < n; i++)
            if (tr_visible_set_item(f, d, PyList_GET_ITEM(o->obj, i), o->items[i]) < 0)
                return NULL;
        return new_const(t, Py_NewRef(Py_None));
    }
    if (!foldable(args[0]))
        return tracer_unsupported(t, false, "dict.%U() of a key that is not a constant", name), NULL;
    int i = dict_key_index(d, args[0]->obj);
    if (i == -2)
        return NULL;
    if (i >= 0) {
        Value *v = d->items[i];
        if (pop && tr_visible_del_item(f, d, i) < 0)
            return NULL;
        return v;
    }
    if (pop && nargs == 1)
        return tracer_break(t, STOP_CALL, "dict.pop() of a missing key (KeyError)"), NULL;
    Value *dflt = nargs == 2 ? args[1] : new_const(t, Py_NewRef(Py_None));
    if (setdefault && (dflt == NULL || tr_visible_set_item(f, d, args[0]->obj, dflt) < 0))
        return NULL;
    return dflt;
}

/* ---- sets the program holds ---- */

/* Whether v is a set the program holds, reached by an accessor. */
static bool visible_set(Value *v)
{
    return v->kind == V_OBJECT && v->src >= 0 && v->obj != NULL && PySet_CheckExact(v->obj);
}

/* (contract: translate_int.h) */
Value *tr_visible_set_method(TFrame *f, Value *s, PyObject *name, Value **args, int nargs, bool *handled)
{
    Tracer *t = f->t;
    bool add = PyUnicode_CompareWithASCIIString(name, "add") == 0;
    *handled = visible_set(s) && nargs == 1
               && (add || PyUnicode_CompareWithASCIIString(name, "discard") == 0);
    if (!*handled)
        return NULL;
    Value *key = args[0];
    if (!foldable(key) || PyObject_Hash(key->obj) == -1) {
        PyErr_Clear();
        return tracer_unsupported(t, false, "set.%U() of a value that is not a hashable constant",
                                  name), NULL;
    }
    /* every other set read so far is another object (NOT_SAME_AS) */
    for (int a = 0; a < t->by_acc_cap; a++) {
        Value *o = t->by_acc[a];
        if (o == NULL || o == s || !visible_set(o))
            continue;
        if (o->obj == s->obj)
            return tracer_unsupported(t, false, "a write into a set the frame reaches two ways"), NULL;
        if (guard_apart(t, a, s->src) < 0)
            return NULL;
    }
    /* an item write (no attribute of the set), of a member */
    if (append_write(t, s, key->obj, add ? key : NULL, true, false) < 0)
        return NULL;
    t->writes[t->nwrites - 1].set_member = true;
    return new_const(t, Py_NewRef(Py_None));
}

/* (contract: translate_int.h) */
int tr_note_set_read(Tracer *t, Value *s)
{
    for (int i = 0; i < t->nwrites; i++) {
        AttrWrite *w = &t->writes[i];
        if (!w->set_member)
            continue;
        if (w->target->obj == s->obj)
            return tracer_unsupported(t, false, "a set read after a write into it (the write "
                                      "lands after the graph)");
        if (guard_apart(t, s->src, w->target->src) < 0)
            return -1;
    }
    return 0;
}

/* (contract: translate_int.h) */
Value *tr_dict_after_writes(Tracer *t, PyObject *real)
{
    for (int i = t->nwrites - 1; i >= 0; i--) {
        AttrWrite *w = &t->writes[i];
        if (w->item && !w->builtin && w->target->kind == V_DICT && w->target->real == real)
            return w->target;
    }
    return NULL;
}
