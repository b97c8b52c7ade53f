/*
 * values.c -- symbolic values of the translator, and the "variable
 * builder": turning a concrete object reached by an accessor into a Value
 * plus the guards under which the capture stays valid (DESIGN.md 3.3-3.4).
 *
 * Guard policy, by the object's type:
 *   int float bool str bytes complex None   EQUALS_MATCH (specialized constant)
 *   numpy.ndarray (exact)                   TENSOR_MATCH, becomes a placeholder
 *   tuple / list                            TUPLE_LENGTH / LIST_LENGTH, items recursively
 *   dict (str/int keys)                     DICT_KEYS, values recursively
 *   modules, functions, classes, builtins,
 *   ufuncs, dtypes                          ID_MATCH
 *   anything else                           TYPE_MATCH, opaque V_OBJECT
 */
#include "translate.h"

#include <stdarg.h>

static int tracer_stop(Tracer *t, StopKind kind, bool permanent, const char *fmt, va_list va)
{
    if (t->reason != NULL)
        return -1;    /* the first (innermost) stop wins */
    PyObject *r = PyUnicode_FromFormatV(fmt, va);
    if (r == NULL)
        return -1;   /* the exception stops tracing instead */
    t->reason = r;
    t->permanent = permanent;
    t->stop_kind = kind;
    t->stop_offset = tracer_offset(t);
    Py_CLEAR(t->stop_stack);
    t->stop_stack = tracer_user_stack(t);
    if (t->stop_stack == NULL)
        PyErr_Clear();   /* the stack is a courtesy; the reason is what matters */
    return -1;
}

int tracer_unsupported(Tracer *t, bool permanent, const char *fmt, ...)
{
    va_list va;
    va_start(va, fmt);
    int r = tracer_stop(t, STOP_UNSUPPORTED, permanent, fmt, va);
    va_end(va);
    return r;
}

int tracer_break(Tracer *t, StopKind kind, const char *fmt, ...)
{
    va_list va;
    va_start(va, fmt);
    int r = tracer_stop(t, kind, false, fmt, va);
    va_end(va);
    return r;
}

int tracer_note_mutation(Tracer *t, Value *c, int index)
{
    if (t->nundo == t->undo_cap) {
        int cap = t->undo_cap ? t->undo_cap * 2 : 16;
        Undo *u = PyMem_Realloc(t->undo, sizeof(Undo) * (size_t)cap);
        if (u == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        t->undo = u;
        t->undo_cap = cap;
    }
    Undo *u = &t->undo[t->nundo++];
    u->container = c;
    u->old_n = c->n;
    u->index = index;
    u->old_item = index >= 0 ? c->items[index] : NULL;
    u->old_keys = c->kind == V_DICT && c->obj ? PyList_GET_SIZE(c->obj) : 0;
    return 0;
}

void tracer_undo_to(Tracer *t, int mark)
{
    while (t->nundo > mark) {
        Undo *u = &t->undo[--t->nundo];
        Value *c = u->container;
        if (u->index >= 0)
            c->items[u->index] = u->old_item;
        c->n = u->old_n;
        if (c->kind == V_DICT && c->obj && PyList_GET_SIZE(c->obj) > u->old_keys)
            PyList_SetSlice(c->obj, u->old_keys, PyList_GET_SIZE(c->obj), NULL);
    }
}

Value *value_new(Tracer *t, VKind kind, PyObject *obj)
{
    if (t->nall == t->all_cap) {
        int cap = t->all_cap ? t->all_cap * 2 : 64;
        Value **all = PyMem_Realloc(t->all, sizeof(Value *) * (size_t)cap);
        if (all == NULL) {
            PyErr_NoMemory();
            return NULL;
        }
        t->all = all;
        t->all_cap = cap;
    }
    Value *v = PyMem_Calloc(1, sizeof(Value));
    if (v == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    v->kind = kind;
    v->src = -1;
    v->obj = Py_XNewRef(obj);
    t->all[t->nall++] = v;
    return v;
}

int value_append(Tracer *t, Value *c, Value *item)
{
    (void)t;
    if (c->n == c->cap) {
        int cap = c->cap ? c->cap * 2 : 4;
        Value **items = PyMem_Realloc(c->items, sizeof(Value *) * (size_t)cap);
        if (items == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        c->items = items;
        c->cap = cap;
    }
    c->items[c->n++] = item;
    return 0;
}

static bool is_equals_type(PyObject *obj)
{
    return obj == Py_None || PyLong_CheckExact(obj) || PyFloat_CheckExact(obj)
        || PyBool_Check(obj) || PyUnicode_CheckExact(obj)
        || PyBytes_CheckExact(obj) || PyComplex_CheckExact(obj);
}

bool value_is_plain_constant(PyObject *obj)
{
    if (is_equals_type(obj) || obj == Py_Ellipsis)
        return true;
    if (PySlice_Check(obj)) {
        PySliceObject *s = (PySliceObject *)obj;
        return value_is_plain_constant(s->start) && value_is_plain_constant(s->stop)
            && value_is_plain_constant(s->step);
    }
    if (PyTuple_CheckExact(obj)) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(obj); i++)
            if (!value_is_plain_constant(PyTuple_GET_ITEM(obj, i)))
                return false;
        return true;
    }
    if (PyType_Check(obj))
        return true;            /* e.g. numpy.float32 passed as dtype= */
    PyTypeObject *generic = tensor_scalar_type();
    if (generic && PyObject_TypeCheck(obj, generic))
        return true;            /* numpy scalar constants */
    PyTypeObject *dtype = tensor_dtype_type();
    return dtype != NULL && PyObject_TypeCheck(obj, dtype);
}

/* Whether obj is identity-guarded: modules, functions, classes, builtins,
   ufuncs and the like -- objects a program reaches, not data it passes. */
static bool is_identity_object(PyObject *obj)
{
    if (PyModule_Check(obj) || PyFunction_Check(obj) || PyType_Check(obj)
        || PyCFunction_Check(obj))
        return true;
    /* Callables implemented in C that are not instances of user classes:
       numpy ufuncs, array-function dispatchers, method descriptors. */
    PyTypeObject *tp = Py_TYPE(obj);
    if (!(tp->tp_flags & Py_TPFLAGS_HEAPTYPE) && PyCallable_Check(obj))
        return true;
    PyTypeObject *dtype = tensor_dtype_type();
    if (dtype && PyObject_TypeCheck(obj, dtype))
        return true;
    return false;
}

static int guard(Tracer *t, GuardKind kind, int acc, PyObject *expected, Py_ssize_t length)
{
    return guardset_add(t->gs, kind, acc, expected, length) < 0 ? -1 : 0;
}

static Value *remember(Tracer *t, int acc, Value *v)
{
    if (v == NULL)
        return NULL;
    if (acc >= t->by_acc_cap) {
        int cap = acc + 32;
        Value **m = PyMem_Realloc(t->by_acc, sizeof(Value *) * (size_t)cap);
        if (m == NULL) {
            PyErr_NoMemory();
            return NULL;
        }
        for (int i = t->by_acc_cap; i < cap; i++)
            m[i] = NULL;
        t->by_acc = m;
        t->by_acc_cap = cap;
    }
    t->by_acc[acc] = v;
    v->src = acc;
    return v;
}

/* A placeholder for an input array.  Named after its source: L['a'] -> l_a_. */
static Value *make_input_tensor(Tracer *t, int acc, PyObject *obj)
{
    PyObject *src = guardset_render_source(t->gs, acc);
    if (src == NULL)
        return NULL;
    char hint[64];
    size_t k = 0;
    const char *s = PyUnicode_AsUTF8(src);
    if (s == NULL) {
        Py_DECREF(src);
        return NULL;
    }
    /* L['a'].w[0] -> l_a_w_0_ : lower-cased, non-identifier chars collapsed. */
    bool last_us = false;
    for (; *s && k < sizeof(hint) - 2; s++) {
        char c = *s;
        if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_') {
            hint[k++] = c;
            last_us = c == '_';
        }
        else if (c >= 'A' && c <= 'Z') {
            hint[k++] = (char)(c - 'A' + 'a');
            last_us = false;
        }
        else if (!last_us && k > 0) {
            hint[k++] = '_';
            last_us = true;
        }
    }
    if (k == 0 || !last_us)
        hint[k++] = '_';
    hint[k] = '\0';
    Py_DECREF(src);

    NodeObject *node = graph_placeholder(t->graph, hint, obj);
    if (node == NULL)
        return NULL;
    if (t->ninputs == t->input_cap) {
        int cap = t->input_cap ? t->input_cap * 2 : 8;
        int *ia = PyMem_Realloc(t->input_acc, sizeof(int) * (size_t)cap);
        if (ia == NULL) {
            PyErr_NoMemory();
            return NULL;
        }
        t->input_acc = ia;
        t->input_cap = cap;
    }
    if (PyList_Append(t->example_inputs, obj) < 0)
        return NULL;
    t->input_acc[t->ninputs++] = acc;
    Value *v = value_new(t, V_TENSOR, obj);
    if (v)
        v->node = node;
    return v;
}

static Value *sequence_from_source(Tracer *t, int acc, PyObject *obj, VKind kind)
{
    if (guard(t, kind == V_TUPLE ? GUARD_TUPLE_LENGTH : GUARD_LIST_LENGTH, acc, NULL,
              PySequence_Fast_GET_SIZE(obj)) < 0)
        return NULL;
    Value *v = remember(t, acc, value_new(t, kind, NULL));
    if (v == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(obj);
    if (n > 256)
        return tracer_unsupported(t, false, "a %s of %zd items as input", kind == V_TUPLE ? "tuple" : "list", n), NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(obj, i);
        int ia = guardset_accessor(t->gs, ACC_ITEM, acc, i, NULL, NULL);
        if (ia < 0)
            return NULL;
        Value *iv = value_from_source(t, ia, item);
        if (iv == NULL || value_append(t, v, iv) < 0)
            return NULL;
    }
    return v;
}

static Value *dict_from_source(Tracer *t, int acc, PyObject *obj)
{
    PyObject *keys = PyDict_Keys(obj);
    if (keys == NULL)
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(keys);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *k = PyList_GET_ITEM(keys, i);
        if (!PyUnicode_CheckExact(k) && !PyLong_CheckExact(k)) {
            Py_DECREF(keys);
            return tracer_unsupported(t, false, "a dict input with a key of type %s",
                                      Py_TYPE(k)->tp_name), NULL;
        }
    }
    PyObject *kt = PyList_AsTuple(keys);
    int g = kt ? guard(t, GUARD_DICT_KEYS, acc, kt, 0) : -1;
    Py_XDECREF(kt);
    Value *v = g < 0 ? NULL : remember(t, acc, value_new(t, V_DICT, keys));
    Py_DECREF(keys);
    if (v == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *k = PyList_GET_ITEM(v->obj, i);
        PyObject *item = PyDict_GetItemWithError(obj, k);
        if (item == NULL)
            return PyErr_Occurred() ? NULL : (tracer_unsupported(t, false, "a dict changed while tracing"), NULL);
        int ia = guardset_accessor(t->gs, ACC_DICT_ITEM, acc, 0, k, NULL);
        if (ia < 0)
            return NULL;
        Value *iv = value_from_source(t, ia, item);
        if (iv == NULL || value_append(t, v, iv) < 0)
            return NULL;
    }
    return v;
}

Value *value_from_source(Tracer *t, int acc, PyObject *obj)
{
    if (acc < t->by_acc_cap && t->by_acc[acc] != NULL)
        return t->by_acc[acc];
    if (obj == NULL)
        return tracer_unsupported(t, false, "an unbound variable"), NULL;

    if (is_equals_type(obj)) {
        if (guard(t, GUARD_EQUALS_MATCH, acc, obj, 0) < 0)
            return NULL;
        return remember(t, acc, value_new(t, V_CONST, obj));
    }
    if (tensor_is_array(obj) && !tensor_has_object_dtype(obj)) {
        if (guard(t, GUARD_TENSOR_MATCH, acc, obj, 0) < 0)
            return NULL;
        return remember(t, acc, make_input_tensor(t, acc, obj));
    }
    if (PyTuple_CheckExact(obj))
        return sequence_from_source(t, acc, obj, V_TUPLE);
    if (PyList_CheckExact(obj))
        return sequence_from_source(t, acc, obj, V_LIST);
    if (PyDict_CheckExact(obj))
        return dict_from_source(t, acc, obj);
    PyTypeObject *generic = tensor_scalar_type();
    if (generic && PyObject_TypeCheck(obj, generic))
        return value_unspecialized(t, acc, obj);
    if (is_identity_object(obj)) {
        if (guard(t, GUARD_ID_MATCH, acc, obj, 0) < 0)
            return NULL;
        return remember(t, acc, value_new(t, V_CONST, obj));
    }
    if (PyErr_Occurred())
        return NULL;
    if (guard(t, GUARD_TYPE_MATCH, acc, (PyObject *)Py_TYPE(obj), 0) < 0)
        return NULL;
    return remember(t, acc, value_new(t, V_OBJECT, obj));
}

Value *value_unspecialized(Tracer *t, int acc, PyObject *obj)
{
    if (acc < t->by_acc_cap && t->by_acc[acc] != NULL)
        return t->by_acc[acc];
    if (guard(t, GUARD_TYPE_MATCH, acc, (PyObject *)Py_TYPE(obj), 0) < 0)
        return NULL;
    return remember(t, acc, make_input_tensor(t, acc, obj));
}

PyObject *value_as_constant(Tracer *t, Value *v)
{
    switch (v->kind) {
    case V_CONST:
        return Py_NewRef(v->obj);
    case V_TUPLE:
    case V_LIST: {
        PyObject *out = PyTuple_New(v->n);
        if (out == NULL)
            return NULL;
        for (int i = 0; i < v->n; i++) {
            PyObject *c = value_as_constant(t, v->items[i]);
            if (c == NULL) {
                Py_DECREF(out);
                return NULL;
            }
            PyTuple_SET_ITEM(out, i, c);
        }
        if (v->kind == V_TUPLE)
            return out;
        PyObject *l = PySequence_List(out);
        Py_DECREF(out);
        return l;
    }
    case V_SLICE: {
        PyObject *p[3];
        for (int i = 0; i < 3; i++) {
            p[i] = value_as_constant(t, v->items[i]);
            if (p[i] == NULL) {
                for (int j = 0; j < i; j++)
                    Py_DECREF(p[j]);
                return NULL;
            }
        }
        PyObject *s = PySlice_New(p[0], p[1], p[2]);
        for (int j = 0; j < 3; j++)
            Py_DECREF(p[j]);
        return s;
    }
    default:
        tracer_unsupported(t, false, "a value that is not a constant is used where a constant is needed");
        return NULL;
    }
}
