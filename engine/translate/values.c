/*
 * values.c -- symbolic values of the translator, and the "variable
 * builder": turning a concrete object reached by an accessor into a Value
 * plus the guards under which the capture stays valid (DESIGN.md 3.3-3.4).
 *
 * Guard policy, by the object's type:
 *   int float bool str bytes complex None   EQUALS_MATCH (specialized constant)
 *   numpy.ndarray, torch.Tensor,
 *   torch.nn.Parameter (exact types)        TENSOR_MATCH, becomes a placeholder
 *                                           (torch also: GRAD_MODE)
 *   tuple / list                            TUPLE_LENGTH / LIST_LENGTH, items recursively
 *   dict (str/int keys)                     DICT_KEYS, values recursively
 *   dict subclass instance                  TYPE_MATCH, opaque V_OBJECT (its keys
 *                                           read and guarded where an operation
 *                                           needs them: tr_dictsub.c)
 *   modules, functions, classes, builtins,
 *   ufuncs, dtypes, torch dtype / device /
 *   layout / memory_format                  ID_MATCH
 *   anything else                           TYPE_MATCH, opaque V_OBJECT
 *
 * torch.nn.Module instances are V_OBJECTs whose attributes, calls and
 * iteration the translator asks about here (value_module_*): attributes
 * resolve as nn.Module.__getattr__ would, through accessors into
 * _parameters / _buffers / _modules, so parameters are placeholders guarded
 * by TENSOR_MATCH; a call inlines forward when nothing else would run
 * (no hooks, guarded).
 */
#include "translate.h"
#include "../base/tensorlib.h"

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

/* A new undo record, its fields to be set.  NULL with MemoryError. */
static Undo *undo_push(Tracer *t)
{
    if (t->nundo == t->undo_cap) {
        int cap = t->undo_cap ? t->undo_cap * 2 : 16;
        Undo *u = PyMem_Realloc(t->undo, sizeof(Undo) * (size_t)cap);
        if (u == NULL) {
            PyErr_NoMemory();
            return NULL;
        }
        t->undo = u;
        t->undo_cap = cap;
    }
    return &t->undo[t->nundo++];
}

int tracer_note_mutation(Tracer *t, Value *c, int index)
{
    if (c->kind == V_DICT && c->stands_for != NULL)
        return tracer_unsupported(t, false, "changing a %s", c->stands_for);
    if (tracer_check_iterated(t, c, index) < 0)
        return -1;
    Undo *u = undo_push(t);
    if (u == NULL)
        return -1;
    u->node_change = false;
    u->old_node = NULL;
    u->container = c;
    u->old_n = c->n;
    u->index = index;
    u->old_item = index >= 0 ? c->items[index] : NULL;
    u->old_keys = c->kind == V_DICT && c->obj ? PyList_GET_SIZE(c->obj) : 0;
    u->saved = NULL;
    u->saved_keys = NULL;
    return 0;
}

int tracer_note_node_change(Tracer *t, Value *v)
{
    Undo *u = undo_push(t);
    if (u == NULL)
        return -1;
    *u = (Undo){.container = v, .old_n = v->n, .index = -1, .node_change = true,
                .old_node = v->node};
    return 0;
}

int tracer_note_snapshot(Tracer *t, Value *c)
{
    if (tracer_note_mutation(t, c, -1) < 0)
        return -1;
    Undo *u = &t->undo[t->nundo - 1];
    u->saved = PyMem_Malloc(sizeof(Value *) * ((size_t)c->n + 1));
    if (u->saved == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    if (c->n > 0)
        memcpy(u->saved, c->items, sizeof(Value *) * (size_t)c->n);
    if (c->kind == V_DICT && c->obj && (u->saved_keys = PyList_GetSlice(c->obj, 0, PY_SSIZE_T_MAX)) == NULL)
        return -1;
    return 0;
}

/* Free what undo record u owns. */
static void undo_release(Undo *u)
{
    PyMem_Free(u->saved);
    u->saved = NULL;
    Py_CLEAR(u->saved_keys);
}

void tracer_undo_free(Tracer *t)
{
    for (int i = 0; i < t->nundo; i++)
        undo_release(&t->undo[i]);
}

void tracer_undo_to(Tracer *t, int mark)
{
    while (t->nundo > mark) {
        Undo *u = &t->undo[--t->nundo];
        Value *c = u->container;
        if (u->node_change) {
            c->node = u->old_node;
            continue;
        }
        if (u->saved != NULL) {
            /* the items array never shrinks: old_n items fit */
            if (u->old_n > 0)
                memcpy(c->items, u->saved, sizeof(Value *) * (size_t)u->old_n);
            if (u->saved_keys != NULL
                && PyList_SetSlice(c->obj, 0, PyList_GET_SIZE(c->obj), u->saved_keys) < 0)
                PyErr_Clear();
        }
        if (u->index >= 0)
            c->items[u->index] = u->old_item;
        if (c->kind == V_SET && c->n > u->old_n) {
            /* s.add(x) taken back: out of the real set too, whose order
               may not be what it was (a resize) */
            for (int i = u->old_n; i < c->n; i++)
                if (c->items[i]->kind == V_CONST && PySet_Discard(c->obj, c->items[i]->obj) < 0)
                    PyErr_Clear();
            c->unordered = true;
        }
        c->n = u->old_n;
        if (c->kind == V_DICT && c->obj && PyList_GET_SIZE(c->obj) > u->old_keys)
            PyList_SetSlice(c->obj, u->old_keys, PyList_GET_SIZE(c->obj), NULL);
        undo_release(u);
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
    if (tensorlib_is_torch_constant(obj))
        return true;            /* torch.float32, torch.device('cpu'), x.shape */
    if (tensorlib_is_numpy_scalar(obj))
        return true;            /* numpy scalar constants */
    return tensorlib_is_numpy_dtype(obj);
}

/* Whether obj is identity-guarded: modules, functions, classes, builtins,
   ufuncs and the like -- objects a program reaches, not data it passes. */
static bool is_identity_object(PyObject *obj)
{
    if (PyModule_Check(obj) || PyFunction_Check(obj) || PyType_Check(obj)
        || PyCFunction_Check(obj))
        return true;
    /* Callables implemented in C that are not instances of user classes:
       numpy ufuncs, array-function dispatchers, method descriptors -- but
       not data that happens to be callable: a weak reference or a
       method-wrapper (bound to an instance) is the program's to drop, and
       an ID guard, unable to hold either weakly, would keep it alive. */
    PyTypeObject *tp = Py_TYPE(obj);
    if (!(tp->tp_flags & Py_TPFLAGS_HEAPTYPE) && PyCallable_Check(obj))
        return !PyWeakref_Check(obj) && strcmp(tp->tp_name, "method-wrapper") != 0;
    if (tensorlib_is_numpy_dtype(obj) || tensorops_is_library_op(obj))
        return true;             /* torch.ops.ns.op: registered for the process */
    return tensorlib_is_torch_constant(obj) && !PyTuple_Check(obj);
}

/* Past this many guards an entry would cost more to check than to run the
   frame (inputs such as a dict of thousands of items): the frame is not
   specialized on them.  A graph's nodes raise the bound, GUARDS_PER_NODE
   more each: a model of a thousand modules needs about ten guards each
   (type, hooks, instance dict, forward).  Measured on transformers' tiny
   CvT: 9,008 guards for 1,049 nodes, 2.0 ms of checks per hit in a ~30 ms
   call; EfficientNet: 22,755 guards for 1,908 nodes, 5.5 ms in ~65 ms
   (~230 ns a guard: CacheEntry.guard_ns / hits after 12 calls). */
#define MAX_GUARDS 8192
#define GUARDS_PER_NODE 16

static int guard(Tracer *t, GuardKind kind, int acc, PyObject *expected, Py_ssize_t length)
{
    Py_ssize_t nodes = t->graph && t->graph->nodes ? PyList_GET_SIZE(t->graph->nodes) : 0;
    if (t->gs->n >= MAX_GUARDS + GUARDS_PER_NODE * nodes)
        return tracer_unsupported(t, false, "inputs that need more than %d guards (and %d per "
                                  "graph node)", MAX_GUARDS, GUARDS_PER_NODE);
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
    /* L['a'].w[0] -> l_a_w_0_, L['self']._modules['fc'] -> l_self_modules_fc_
       (as TorchDynamo names them): lower-cased, runs of non-identifier
       characters and underscores collapsed into one underscore. */
    bool last_us = false;
    for (; *s && k < sizeof(hint) - 2; s++) {
        char c = *s;
        if (c == '_' && last_us)
            continue;
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

static Value *dict_from_source_first(Tracer *t, int acc, PyObject *obj);
static Value *set_from_source_first(Tracer *t, int acc, PyObject *obj);

/* A dict or set read from a source: a V_DICT of its keys (guarded) and
   items, a set a V_OBJECT.  One another accessor reached already is that
   Value, the two accessors guarded to reach one object (SAME_AS): what
   the frame writes through one, it reads through the other
   (nn.Module.__setattr__ reads self.__dict__["_buffers"], register_buffer
   writes self._buffers).  Tracer.read_by_id maps the objects to their
   Values. */
static Value *container_from_source(Tracer *t, int acc, PyObject *obj)
{
    PyObject *id = PyLong_FromVoidPtr(obj);
    PyObject *cap = id && t->read_by_id ? PyDict_GetItemWithError(t->read_by_id, id) : NULL;  /* borrowed */
    Value *seen = cap ? PyCapsule_GetPointer(cap, NULL) : NULL;
    if (seen != NULL || id == NULL || PyErr_Occurred()) {
        Py_XDECREF(id);
        if (seen == NULL || guard(t, GUARD_SAME_AS, acc > seen->src ? acc : seen->src, NULL,
                                  acc > seen->src ? seen->src : acc) < 0)
            return NULL;
        return remember(t, acc, seen);
    }
    Value *v = PyDict_CheckExact(obj) ? dict_from_source_first(t, acc, obj) : set_from_source_first(t, acc, obj);
    if (v != NULL && v->src == acc && ((v->kind == V_DICT && v->real == obj) || v->kind == V_OBJECT)) {
        cap = PyCapsule_New(v, NULL, NULL);
        if (cap == NULL || (t->read_by_id == NULL && (t->read_by_id = PyDict_New()) == NULL)
            || PyDict_SetItem(t->read_by_id, id, cap) < 0)
            v = NULL;
        Py_XDECREF(cap);
    }
    Py_DECREF(id);
    return v;
}

/* A set the program holds: an object, by its type (its members guarded
   where they are read, tr_contains). */
static Value *set_from_source_first(Tracer *t, int acc, PyObject *obj)
{
    if (guard(t, GUARD_TYPE_MATCH, acc, (PyObject *)Py_TYPE(obj), 0) < 0)
        return NULL;
    return remember(t, acc, value_new(t, V_OBJECT, obj));
}

static Value *dict_from_source_first(Tracer *t, int acc, PyObject *obj)
{
    PyObject *keys = PyDict_Keys(obj);
    if (keys == NULL)
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(keys);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *k = PyList_GET_ITEM(keys, i);
        if (!PyUnicode_CheckExact(k) && !PyLong_CheckExact(k) && !PyBytes_CheckExact(k)) {
            Py_DECREF(keys);
            /* No guard may hold all the program's key objects (one could
               keep an object alive that the program expects gone): an
               opaque dict, read key by key (value_keyed_dict_lookup). */
            if (guard(t, GUARD_TYPE_MATCH, acc, (PyObject *)Py_TYPE(obj), 0) < 0)
                return NULL;
            return remember(t, acc, value_new(t, V_OBJECT, obj));
        }
    }
    /* The keys are guarded before the size check: a translation it stops
       is kept with its guards (hook.c), and other dicts must fail them. */
    PyObject *kt = PyList_AsTuple(keys);
    int g = kt ? guard(t, GUARD_DICT_KEYS, acc, kt, 0) : -1;
    Py_XDECREF(kt);
    if (g < 0) {
        Py_DECREF(keys);
        return NULL;
    }
    if (n > 256) {
        Py_DECREF(keys);
        return tracer_unsupported(t, false, "a dict of %zd items as input", n), NULL;
    }
    if (tr_note_dict_read(t, acc, obj) < 0) {
        Py_DECREF(keys);
        return NULL;
    }
    Value *v = remember(t, acc, value_new(t, V_DICT, keys));
    Py_DECREF(keys);
    if (v != NULL)
        v->real = obj;
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

/* Whether obj may be a key the guards hold: a class, or an object of
   typing's own classes (Union, Optional, Literal: module-level singletons),
   hashed and compared by identity in C. */
static bool is_held_key(PyObject *obj)
{
    if (!guard_key_is_identity(obj))
        return false;
    if (PyType_Check(obj))
        return true;
    PyTypeObject *tp = Py_TYPE(obj);
    PyObject *mod = (tp->tp_flags & Py_TPFLAGS_HEAPTYPE) && tp->tp_dict
                    ? PyDict_GetItemString(tp->tp_dict, "__module__") : NULL;  /* borrowed */
    return mod != NULL && PyUnicode_Check(mod) && PyUnicode_CompareWithASCIIString(mod, "typing") == 0;
}

Value *value_keyed_dict_lookup(Tracer *t, Value *d, Value *key, bool *found)
{
    *found = false;
    bool plain = key->kind == V_CONST && (PyUnicode_CheckExact(key->obj) || PyLong_CheckExact(key->obj)
                                          || PyBytes_CheckExact(key->obj) || key->obj == Py_None
                                          || PyBool_Check(key->obj) || PyFloat_CheckExact(key->obj));
    /* A class read from the program is guarded by identity; a constant one
       (type(x) of a guarded x, a literal's) is what the entry's guards
       already fix. */
    bool held = ((key->kind == V_CONST || key->kind == V_OBJECT) && key->src >= 0)
                || key->kind == V_CONST;
    if (!plain && !(held && is_held_key(key->obj)))
        return tracer_unsupported(t, false, "a lookup in a dict input with keys of several "
                                  "types, by a %s", key->obj ? Py_TYPE(key->obj)->tp_name
                                  : "computed value"), NULL;
    if (!plain && key->src >= 0 && guard(t, GUARD_ID_MATCH, key->src, key->obj, 0) < 0)
        return NULL;
    PyObject *item = PyDict_GetItemWithError(d->obj, key->obj);          /* borrowed */
    if (item == NULL) {
        if (PyErr_Occurred() || guard(t, GUARD_DICT_LACKS, d->src, key->obj, 0) < 0)
            return NULL;
        return value_new(t, V_CONST, Py_None);      /* absent: the caller's default */
    }
    *found = true;
    int ia = guardset_accessor(t->gs, ACC_DICT_ITEM, d->src, 0, key->obj, NULL);
    return ia < 0 ? NULL : value_from_source(t, ia, item);
}

static Value *bound_builtin_from_source(Tracer *t, int acc, PyObject *m);

Value *value_from_source(Tracer *t, int acc, PyObject *obj)
{
    if (acc < t->by_acc_cap && t->by_acc[acc] != NULL)
        return t->by_acc[acc];
    if (obj == NULL)
        return tracer_unsupported(t, false, "an unbound variable"), NULL;

    if (PyLong_CheckExact(obj) && tr_source_dynamic_int(t, acc, obj)) {
        /* automatic dynamic: a graph input with a symbol */
        Value *v = value_unspecialized(t, acc, obj);
        return v == NULL || tr_sym_int_input(t, v, acc) < 0 ? NULL : v;
    }
    if (is_equals_type(obj)) {
        if (guard(t, GUARD_EQUALS_MATCH, acc, obj, 0) < 0)
            return NULL;
        return remember(t, acc, value_new(t, V_CONST, obj));
    }
    TensorLibKind input = tensorlib_input_kind(obj);
    if ((input == TENSORLIB_NUMPY && !tensorlib_has_object_dtype(obj)) || input == TENSORLIB_TORCH) {
        /* the frame's own slots: tr_value_from_resume_slot decided */
        const Accessor *a = &t->gs->acc[acc];
        bool slot = a->base < 0 && (a->kind == ACC_LOCAL || a->kind == ACC_STACK);
        uint32_t dims = slot ? 0 : tr_source_dynamic_dims(t, acc, obj);
        if (dims != 0)
            return value_dynamic_tensor(t, acc, obj, dims);
    }
    if (input == TENSORLIB_NUMPY && !tensorlib_has_object_dtype(obj)) {
        if (guard(t, GUARD_TENSOR_MATCH, acc, obj, 0) < 0)
            return NULL;
        return remember(t, acc, make_input_tensor(t, acc, obj));
    }
    if (input == TENSORLIB_TORCH) {
        if (guard(t, GUARD_TENSOR_MATCH, acc, obj, 0) < 0 || tensorops_note_torch(t) < 0)
            return NULL;
        return remember(t, acc, make_input_tensor(t, acc, obj));
    }
    if (PyTuple_Check(obj) && !PyTuple_CheckExact(obj) && tensorlib_is_torch_constant(obj)) {
        /* a torch.Size (of ints): a constant, by its value */
        if (guard(t, GUARD_EQUALS_MATCH, acc, obj, 0) < 0)
            return NULL;
        return remember(t, acc, value_new(t, V_CONST, obj));
    }
    if (PyTuple_CheckExact(obj))
        return sequence_from_source(t, acc, obj, V_TUPLE);
    if (PyList_CheckExact(obj))
        return sequence_from_source(t, acc, obj, V_LIST);
    if (PyDict_CheckExact(obj) || PySet_CheckExact(obj))
        return container_from_source(t, acc, obj);
    if (tensorlib_is_numpy_scalar(obj))
        return value_unspecialized(t, acc, obj);
    if (PyMethod_Check(obj)) {
        /* obj.method makes a new bound method at each read: guarded by
           type, what it binds read through it when it is called */
        if (guard(t, GUARD_TYPE_MATCH, acc, (PyObject *)Py_TYPE(obj), 0) < 0)
            return NULL;
        return remember(t, acc, value_new(t, V_OBJECT, obj));
    }
    if (PyCFunction_Check(obj) && PyCFunction_GET_SELF(obj) != NULL
        && !PyModule_Check(PyCFunction_GET_SELF(obj)))
        return bound_builtin_from_source(t, acc, obj);
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

/* A method of a builtin type bound to an object (sink.write, out.append,
   rng.random): reading it makes a new method object each time, so a
   frame that receives one (a resume frame's stack, after its plan read it
   again; an argument) would never see the same object twice.  Guarded by
   what makes it the same call instead: its type, the object it is bound
   to (m.__self__, by identity) and the method's name (m.__name__); kept
   as the constant it is, as an identity-guarded one would be.  NULL with
   an exception. */
static Value *bound_builtin_from_source(Tracer *t, int acc, PyObject *m)
{
    PyObject *self = PyCFunction_GET_SELF(m);                    /* borrowed */
    PyObject *sname = PyUnicode_FromString("__self__");
    PyObject *nname = PyUnicode_FromString("__name__");
    PyObject *name = PyObject_GetAttrString(m, "__name__");
    int sa = sname ? guardset_accessor(t->gs, ACC_ATTR, acc, 0, sname, NULL) : -1;
    int na = nname && sa >= 0 ? guardset_accessor(t->gs, ACC_ATTR, acc, 0, nname, NULL) : -1;
    int rc = na < 0 || name == NULL
             || guard(t, GUARD_TYPE_MATCH, acc, (PyObject *)Py_TYPE(m), 0) < 0
             || guard(t, GUARD_ID_MATCH, sa, self, 0) < 0
             || guard(t, GUARD_EQUALS_MATCH, na, name, 0) < 0 ? -1 : 0;
    Py_XDECREF(sname);
    Py_XDECREF(nname);
    Py_XDECREF(name);
    if (rc < 0)
        return NULL;
    return remember(t, acc, value_new(t, V_CONST, m));
}

Value *value_dynamic_tensor(Tracer *t, int acc, PyObject *obj, uint32_t dims)
{
    if (acc < t->by_acc_cap && t->by_acc[acc] != NULL)
        return t->by_acc[acc];
    if (guard(t, GUARD_TENSOR_MATCH, acc, obj, (Py_ssize_t)dims) < 0
        || (tensor_is_torch(obj) && tensorops_note_torch(t) < 0))
        return NULL;
    Value *v = remember(t, acc, make_input_tensor(t, acc, obj));
    if (v == NULL)
        return NULL;
    v->dyn_dims = dims;
    v->dynshape = true;           /* what it computes has sizes known only at run time */
    if (tr_sym_input(t, v, acc, dims) < 0)
        return NULL;
    /* for backends: the placeholder's dynamic dimensions (node.meta) */
    PyObject *list = PyList_New(0);
    for (int d = 0; list != NULL && d < 32; d++) {
        PyObject *n = (dims & (1u << d)) ? PyLong_FromLong(d) : NULL;
        if (n != NULL && PyList_Append(list, n) < 0)
            Py_CLEAR(list);
        Py_XDECREF(n);
    }
    PyObject *tup = list ? PyList_AsTuple(list) : NULL;
    Py_XDECREF(list);
    int rc = tup && PyDict_Check(v->node->meta) ? PyDict_SetItemString(v->node->meta, "dynamic_dims", tup) : -1;
    Py_XDECREF(tup);
    return rc < 0 ? NULL : v;
}

Value *value_unspecialized(Tracer *t, int acc, PyObject *obj)
{
    if (acc < t->by_acc_cap && t->by_acc[acc] != NULL)
        return t->by_acc[acc];
    if (guard(t, GUARD_TYPE_MATCH, acc, (PyObject *)Py_TYPE(obj), 0) < 0)
        return NULL;
    Value *v = remember(t, acc, make_input_tensor(t, acc, obj));
    if (v != NULL)
        v->dynshape = true;   /* np.zeros(n): a shape that follows it is known at run time only */
    return v;
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
        if (v->kind == V_TUPLE && v->tuple_type != NULL) {
            PyObject *nt = PyObject_CallOneArg(v->tuple_type, out);
            Py_DECREF(out);
            return nt;
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

/* ---- torch.nn.Module instances ---- */

/* obj's instance __dict__ (borrowed), or NULL (no exception) when it has none. */
static PyObject *instance_dict(PyObject *obj)
{
    PyObject **dp = _PyObject_GetDictPtr(obj);
    return dp != NULL && *dp != NULL && PyDict_Check(*dp) ? *dp : NULL;
}

/* type(obj).name from the MRO (borrowed), or NULL (no exception). */
static PyObject *type_lookup(PyTypeObject *tp, const char *name)
{
    PyObject *n = PyUnicode_InternFromString(name);
    if (n == NULL) {
        PyErr_Clear();
        return NULL;
    }
    PyObject *r = _PyType_Lookup(tp, n);
    Py_DECREF(n);
    return r;
}

bool value_type_lookup_is_generic(PyTypeObject *tp)
{
    if (tp->tp_getattro == PyObject_GenericGetAttr)
        return true;
    /* A Python class that only adds __getattr__: its __getattribute__ is
       object's, and __getattr__ runs only when that lookup fails. */
    return (tp->tp_flags & Py_TPFLAGS_HEAPTYPE)
        && type_lookup(tp, "__getattribute__") == type_lookup(&PyBaseObject_Type, "__getattribute__");
}

/* Whether obj is an nn.Module whose attribute reads this file models: its
   lookup is object's plus nn.Module's own __getattr__. */
static bool is_plain_module(PyObject *obj)
{
    PyTypeObject *mod = tensorlib_nn_module_type();     /* borrowed */
    if (mod == NULL || !PyObject_TypeCheck(obj, mod))
        return false;
    PyTypeObject *tp = Py_TYPE(obj);
    return value_type_lookup_is_generic(tp)
        && type_lookup(tp, "__getattr__") == type_lookup(mod, "__getattr__")
        && instance_dict(obj) != NULL;
}

/* accessor base.name (name a C string).  Index or -1 with an exception. */
static int attr_accessor(Tracer *t, int base, const char *name)
{
    PyObject *n = PyUnicode_FromString(name);
    if (n == NULL)
        return -1;
    int a = guardset_accessor(t->gs, ACC_ATTR, base, 0, n, NULL);
    Py_DECREF(n);
    return a;
}

/* Guard that the instance __dict__ of the object at accessor `src` lacks
   `name` (a later instance attribute would win over what we read).  0 / -1. */
static int guard_dict_lacks(Tracer *t, int src, PyObject *name)
{
    int da = attr_accessor(t, src, "__dict__");
    return da < 0 ? -1 : guard(t, GUARD_DICT_LACKS, da, name, 0);
}

/* A bound method value of a module: fetched again when called. */
static Value *bound_method(Tracer *t, Value *base, PyObject *name)
{
    Value *bm = value_new(t, V_BOUND, name);
    if (bm == NULL || value_append(t, bm, base) < 0)
        return NULL;
    return bm;
}

int value_module_has_attr(Tracer *t, Value *m, PyObject *name, bool *handled)
{
    *handled = false;
    if (m->kind != V_OBJECT || m->src < 0 || !is_plain_module(m->obj))
        return 0;
    *handled = true;
    PyObject *d = instance_dict(m->obj);
    if (_PyType_Lookup(Py_TYPE(m->obj), name) != NULL)
        return 1;            /* read as a class attribute (value_module_attr) */
    int has = PyDict_Contains(d, name);
    static const char *const dicts[] = {"_parameters", "_buffers", "_modules"};
    for (int k = 0; has == 0 && k < 3; k++) {
        PyObject *sub = PyDict_GetItemString(d, dicts[k]);    /* borrowed */
        Value *written = sub ? tr_dict_after_writes(t, sub) : NULL;
        if (written != NULL)
            return tracer_unsupported(t, false, "hasattr() of a module whose %s the frame wrote",
                                      dicts[k]);
        if (sub != NULL && PyDict_CheckExact(sub))
            has = PyDict_Contains(sub, name);
    }
    if (has != 0)
        return has;          /* 1: value_module_attr reads (and guards) it */
    /* absent everywhere nn.Module looks: each place guarded to stay so */
    if (guard_dict_lacks(t, m->src, name) < 0)
        return -1;
    for (int k = 0; k < 3; k++) {
        PyObject *sub = PyDict_GetItemString(d, dicts[k]);
        if (sub == NULL || !PyDict_CheckExact(sub))
            continue;
        int da = attr_accessor(t, m->src, dicts[k]);
        if (da < 0 || guard(t, GUARD_DICT_LACKS, da, name, 0) < 0)
            return -1;
    }
    int ta = guardset_accessor(t->gs, ACC_TYPE, m->src, 0, NULL, NULL);
    return ta < 0 || guard(t, GUARD_CLASS_LACKS, ta, name, 0) < 0 ? -1 : 0;
}

/* collections._tuplegetter, the C type of a named tuple's fields (a static
   type on 3.11, a heap type of _collections' on 3.12 and later), once
   collections is imported; NULL before, or where it is Python's fallback.
   Borrowed: the strong reference is kept for the process. */
static PyTypeObject *tuplegetter_type(void)
{
    static PyObject *tp;
    if (tp == NULL) {
        PyObject *name = PyUnicode_FromString("collections");
        PyObject *mod = name ? PyImport_GetModule(name) : NULL;
        PyObject *t = mod ? PyObject_GetAttrString(mod, "_tuplegetter") : NULL;
        if (t != NULL && PyType_Check(t))
            tp = Py_NewRef(t);
        Py_XDECREF(t);
        Py_XDECREF(mod);
        Py_XDECREF(name);
        PyErr_Clear();
    }
    return (PyTypeObject *)tp;
}

bool value_descr_is_c_getter(PyObject *descr)
{
    if (Py_IS_TYPE(descr, &PyGetSetDescr_Type) || Py_IS_TYPE(descr, &PyMemberDescr_Type))
        return true;
    /* a named tuple's field: C code reading an item */
    PyTypeObject *tg = tuplegetter_type();
    return tg != NULL && Py_IS_TYPE(descr, tg);
}

Value *value_module_attr(Tracer *t, Value *base, PyObject *name, bool *handled)
{
    *handled = false;
    if (base->kind != V_OBJECT || base->src < 0 || !is_plain_module(base->obj))
        return NULL;
    *handled = true;
    PyObject *obj = base->obj;
    PyTypeObject *tp = Py_TYPE(obj);
    PyObject *cls_attr = _PyType_Lookup(tp, name);      /* borrowed */
    if (cls_attr != NULL && Py_IS_TYPE(cls_attr, &PyProperty_Type)) {
        *handled = false;     /* a property: its getter inlined (tr_objects.c) */
        return NULL;
    }
    if (cls_attr != NULL && Py_TYPE(cls_attr)->tp_descr_set != NULL) {
        if (!value_descr_is_c_getter(cls_attr))
            return tracer_unsupported(t, false, "attribute '%U' of %s is a property or other "
                                      "data descriptor (runs Python code)", name, tp->tp_name), NULL;
        /* m.__class__, a slot: C code reads it, the accessor reads it again */
        PyObject *got = PyObject_GetAttr(obj, name);
        if (got == NULL)
            return NULL;
        int acc = guardset_accessor(t->gs, ACC_ATTR, base->src, 0, name, NULL);
        Value *v = acc < 0 ? NULL : value_from_source(t, acc, got);
        Py_DECREF(got);
        return v;
    }
    PyObject *d = instance_dict(obj);
    PyObject *item = PyDict_GetItemWithError(d, name);
    if (item == NULL && PyErr_Occurred())
        return NULL;
    if (item != NULL) {
        /* an instance attribute (self.training, self.inplace, a plain
           tensor attribute): read as getattr reads it */
        int acc = guardset_accessor(t->gs, ACC_ATTR, base->src, 0, name, NULL);
        return acc < 0 ? NULL : value_from_source(t, acc, item);
    }
    if (cls_attr != NULL) {
        if (guard_dict_lacks(t, base->src, name) < 0)
            return NULL;
        if (PyFunction_Check(cls_attr))
            return bound_method(t, base, name);
        if (Py_IS_TYPE(cls_attr, &PyStaticMethod_Type) || Py_IS_TYPE(cls_attr, &PyClassMethod_Type)) {
            /* self.helper of a staticmethod: the plain function, as
               type(self).helper reads it; of a classmethod: the method bound
               to the class, as it reads that (its __func__ and __self__ read
               through it when it is called) */
            int ca = guardset_accessor(t->gs, ACC_TYPE, base->src, 0, NULL, NULL);
            int fa = ca < 0 ? -1 : guardset_accessor(t->gs, ACC_ATTR, ca, 0, name, NULL);
            PyObject *fn = PyObject_GetAttr((PyObject *)tp, name);
            Value *v = fn && fa >= 0 ? value_from_source(t, fa, fn) : NULL;
            Py_XDECREF(fn);
            return v;
        }
        if (!value_is_plain_constant(cls_attr) || PyType_Check(cls_attr))
            return tracer_unsupported(t, false, "class attribute '%U' of %s (a %s)", name,
                                      tp->tp_name, Py_TYPE(cls_attr)->tp_name), NULL;
        int acc = guardset_accessor(t->gs, ACC_ATTR, base->src, 0, name, NULL);
        return acc < 0 ? NULL : value_from_source(t, acc, cls_attr);
    }
    /* nn.Module.__getattr__: _parameters, then _buffers, then _modules */
    static const char *const dicts[] = {"_parameters", "_buffers", "_modules"};
    int earlier[3] = {-1, -1, -1};
    for (int k = 0; k < 3; k++) {
        PyObject *sub = PyDict_GetItemString(d, dicts[k]);    /* borrowed */
        if (sub == NULL || !PyDict_CheckExact(sub))
            continue;
        int da = earlier[k] = attr_accessor(t, base->src, dicts[k]);
        if (da < 0)
            return NULL;
        Value *written = tr_dict_after_writes(t, sub);
        if (written != NULL) {
            /* self._buffers[name] = x earlier in the frame (register_buffer):
               the dict as the frame left it */
            for (int i = 0; i < written->n; i++) {
                int eq = PyObject_RichCompareBool(PyList_GET_ITEM(written->obj, i), name, Py_EQ);
                if (eq != 0)
                    return eq < 0 ? NULL : written->items[i];
            }
            int had = PyDict_Contains(sub, name);
            if (had != 0)       /* deleted by the frame: the guards below read the start */
                return had < 0 ? NULL : (tracer_unsupported(t, false, "attribute '%U' of a module "
                                         "whose %s the frame wrote", name, dicts[k]), NULL);
            continue;           /* in neither: nn.Module looks on */
        }
        item = PyDict_GetItemWithError(sub, name);
        if (item == NULL) {
            if (PyErr_Occurred())
                return NULL;
            continue;
        }
        if (guard_dict_lacks(t, base->src, name) < 0)
            return NULL;
        for (int j = 0; j < k; j++)
            if (earlier[j] >= 0 && guard(t, GUARD_DICT_LACKS, earlier[j], name, 0) < 0)
                return NULL;
        int acc = guardset_accessor(t->gs, ACC_DICT_ITEM, da, 0, name, NULL);
        return acc < 0 ? NULL : value_from_source(t, acc, item);
    }
    return tracer_unsupported(t, false, "'%s' object has no attribute '%U'", tp->tp_name, name), NULL;
}

/* Hook dicts whose entries make nn.Module.__call__ do more than forward(). */
static const char *const instance_hook_dicts[] = {
    "_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks", NULL,
};
/* The hook dicts a module with forward hooks (run by the caller,
   tr_calls.c) keeps empty: hooks that run before forward, on the backward,
   with the call's kwargs, or even when forward raises. */
static const char *const other_hook_dicts[] = {
    "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks", "_forward_hooks_with_kwargs",
    "_forward_hooks_always_called", NULL,
};
static const char *const global_hook_dicts[] = {
    "_global_forward_hooks", "_global_forward_pre_hooks", "_global_backward_hooks",
    "_global_backward_pre_hooks", NULL,
};

/* Whether the dict(s) named in `names` of namespace `ns` (a dict) are all
   empty dicts.  1 / 0 / -1. */
static int hook_dicts_empty(PyObject *ns, const char *const *names)
{
    for (int i = 0; names[i]; i++) {
        PyObject *h = PyDict_GetItemString(ns, names[i]);
        if (h == NULL || !PyDict_Check(h) || PyDict_GET_SIZE(h) != 0)
            return 0;
    }
    return 1;
}

/* Whether the frame wrote items into one of the dicts named in `names`
   of namespace `ns` (hooks registered inside the traced code): the real
   dicts then say nothing of what the program will have. */
static bool hook_dicts_written(Tracer *t, PyObject *ns, const char *const *names)
{
    for (int i = 0; names[i]; i++) {
        PyObject *h = PyDict_GetItemString(ns, names[i]);
        if (h != NULL && tr_dict_after_writes(t, h) != NULL)
            return true;
    }
    return false;
}

/* Guard every dict in `names` under accessor `base` (attributes, or dict
   items when `items`) empty.  0 / -1. */
static int guard_hooks_empty(Tracer *t, int base, const char *const *names, bool items)
{
    for (int i = 0; names[i]; i++) {
        int a;
        if (items) {
            PyObject *k = PyUnicode_FromString(names[i]);
            a = k ? guardset_accessor(t->gs, ACC_DICT_ITEM, base, 0, k, NULL) : -1;
            Py_XDECREF(k);
        }
        else {
            a = attr_accessor(t, base, names[i]);
        }
        if (a < 0 || guard(t, GUARD_DICT_EMPTY, a, NULL, 0) < 0)
            return -1;
    }
    return 0;
}

/* Whether the entry already guards nn.Module's global hook dicts. */
static bool global_hooks_guarded(Tracer *t)
{
    for (int g = 0; g < t->gs->n; g++) {
        const Guard *gd = &t->gs->guards[g];
        const Accessor *a = gd->acc >= 0 ? &t->gs->acc[gd->acc] : NULL;
        if (gd->kind == GUARD_DICT_EMPTY && a != NULL && a->kind == ACC_DICT_ITEM
            && PyUnicode_Check(a->key)
            && PyUnicode_CompareWithASCIIString(a->key, global_hook_dicts[0]) == 0)
            return true;
    }
    return false;
}

/* (contract: translate.h) */
int value_guard_module_call(Tracer *t, int cls, PyObject *call)
{
    int ca = attr_accessor(t, cls, "__call__");
    Value *callv = ca < 0 ? NULL : value_from_source(t, ca, call);
    if (callv == NULL)
        return -1;
    if (!global_hooks_guarded(t)) {
        /* once per entry: every module whose __call__ is this very function
           (ID_MATCH above) reads the same globals */
        int ga = attr_accessor(t, ca, "__globals__");
        if (ga < 0 || guard_hooks_empty(t, ga, global_hook_dicts, true) < 0)
            return -1;
    }
    return 0;
}

/* (contract: translate.h) */
bool value_module_call_is_plain(PyTypeObject *tp, PyObject **call)
{
    PyTypeObject *mod = tensorlib_nn_module_type();     /* borrowed */
    PyObject *module_call = mod ? type_lookup(mod, "__call__") : NULL;
    *call = type_lookup(tp, "__call__");
    return module_call != NULL && *call == module_call && PyFunction_Check(*call)
           && hook_dicts_empty(PyFunction_GET_GLOBALS(*call), global_hook_dicts);
}

/* m's forward hooks (m._forward_hooks, an OrderedDict of int ids to
   functions, nonempty; the other hook dicts empty -- other_hook_dicts),
   their keys guarded in order, each read through its accessor: a V_TUPLE,
   or NULL when tracing stops. */
static Value *module_forward_hooks(Tracer *t, Value *m, PyObject *hooks)
{
    int ha = attr_accessor(t, m->src, "_forward_hooks");
    PyObject *it = ha < 0 ? NULL : PyObject_GetIter(hooks);
    PyObject *keys = it ? PySequence_Tuple(it) : NULL;    /* OrderedDict's own order */
    Py_XDECREF(it);
    Value *out = keys ? value_new(t, V_TUPLE, NULL) : NULL;
    bool ok = out != NULL && guard_hooks_empty(t, m->src, other_hook_dicts, false) == 0
              && guard(t, GUARD_TYPE_MATCH, ha, (PyObject *)Py_TYPE(hooks), 0) >= 0
              && guardset_add(t->gs, GUARD_DICT_KEYS, ha, keys, 1) >= 0;
    for (Py_ssize_t i = 0; ok && i < PyTuple_GET_SIZE(keys); i++) {
        PyObject *k = PyTuple_GET_ITEM(keys, i);
        PyObject *fn = PyLong_CheckExact(k) ? PyDict_GetItemWithError(hooks, k) : NULL;   /* borrowed */
        int ka = fn ? guardset_accessor(t->gs, ACC_DICT_ITEM, ha, 0, k, NULL) : -1;
        Value *hv = ka < 0 ? NULL : value_from_source(t, ka, fn);
        ok = hv != NULL && value_append(t, out, hv) == 0;
        if (fn == NULL && !PyErr_Occurred())
            tracer_unsupported(t, false, "a forward hook registered under a key that is not an int");
    }
    Py_XDECREF(keys);
    return ok ? out : NULL;
}

Value *value_module_forward(Tracer *t, Value *m, bool *handled, Value **hooks)
{
    *handled = false;
    *hooks = NULL;
    if (m->kind != V_OBJECT || m->src < 0 || !is_plain_module(m->obj))
        return NULL;
    *handled = true;
    PyObject *obj = m->obj;
    PyTypeObject *tp = Py_TYPE(obj);
    PyObject *call = type_lookup(tp, "__call__");
    PyObject *module_call = type_lookup(tensorlib_nn_module_type(), "__call__");
    PyObject *fwd = type_lookup(tp, "forward");
    PyObject *d = instance_dict(obj);
    if (call == NULL || call != module_call || !PyFunction_Check(call))
        return tracer_break(t, STOP_CALL, "call to a %s, whose class defines __call__", tp->tp_name), NULL;
    if (fwd == NULL || !PyFunction_Check(fwd))
        return tracer_break(t, STOP_CALL, "call to a %s, whose forward is not a Python function",
                            tp->tp_name), NULL;
    PyObject *cci = PyDict_GetItemString(d, "_compiled_call_impl");
    if (PyDict_GetItemString(d, "forward") != NULL || (cci != NULL && cci != Py_None))
        return tracer_break(t, STOP_CALL, "call to a %s with an instance forward or a compiled "
                            "call", tp->tp_name), NULL;
    if (hook_dicts_written(t, d, instance_hook_dicts)
        || hook_dicts_written(t, PyFunction_GET_GLOBALS(call), global_hook_dicts))
        return tracer_break(t, STOP_CALL, "call to a %s whose hooks the traced code changed",
                            tp->tp_name), NULL;
    PyObject *fwd_hooks = PyDict_GetItemString(d, "_forward_hooks");           /* borrowed */
    bool forward_hooks_only = fwd_hooks != NULL && PyDict_Check(fwd_hooks)
                              && PyDict_GET_SIZE(fwd_hooks) > 0 && hook_dicts_empty(d, other_hook_dicts);
    if ((!forward_hooks_only && !hook_dicts_empty(d, instance_hook_dicts))
        || !hook_dicts_empty(PyFunction_GET_GLOBALS(call), global_hook_dicts))
        return tracer_break(t, STOP_CALL, "call to a %s with hooks (nn.Module.__call__ runs them)",
                            tp->tp_name), NULL;
    /* guards: type(m).__call__ is nn.Module.__call__, whose module's global
       hook dicts are empty; m's own hook dicts are empty; m.__dict__ has no
       forward or _compiled_call_impl; type(m).forward is this function */
    int cls = guardset_accessor(t->gs, ACC_TYPE, m->src, 0, NULL, NULL);
    if (cls < 0 || value_guard_module_call(t, cls, call) < 0)
        return NULL;
    if (forward_hooks_only ? (*hooks = module_forward_hooks(t, m, fwd_hooks)) == NULL
                           : guard_hooks_empty(t, m->src, instance_hook_dicts, false) < 0)
        return NULL;
    PyObject *names[2] = {PyUnicode_FromString("forward"), PyUnicode_FromString("_compiled_call_impl")};
    int rc = names[0] && names[1] ? 0 : -1;
    for (int i = 0; i < 2 && rc == 0; i++)
        rc = guard_dict_lacks(t, m->src, names[i]);
    Py_XDECREF(names[0]);
    Py_XDECREF(names[1]);
    int fa = rc < 0 ? -1 : attr_accessor(t, cls, "forward");
    return fa < 0 ? NULL : value_from_source(t, fa, fwd);
}

Value *value_module_iter(Tracer *t, Value *m, bool *handled)
{
    *handled = false;
    if (m->kind != V_OBJECT || m->src < 0 || !is_plain_module(m->obj) || tensorlib_nn_module_type() == NULL)
        return NULL;
    /* nn.Sequential and nn.ModuleList iterate their _modules' values */
    PyObject *seq = tensorlib_nn_sequential();      /* borrowed */
    PyObject *lst = tensorlib_nn_module_list();     /* borrowed */
    PyObject *it = type_lookup(Py_TYPE(m->obj), "__iter__");
    bool ok = it != NULL && seq && lst && PyType_Check(seq) && PyType_Check(lst)
              && (it == type_lookup((PyTypeObject *)seq, "__iter__")
                  || it == type_lookup((PyTypeObject *)lst, "__iter__"));
    if (PyErr_Occurred())
        return NULL;
    if (!ok)
        return NULL;
    *handled = true;
    PyObject *mods = PyDict_GetItemString(instance_dict(m->obj), "_modules");
    if (mods == NULL || !PyDict_CheckExact(mods))
        return tracer_unsupported(t, false, "iterating a %s without _modules", Py_TYPE(m->obj)->tp_name), NULL;
    int ma = attr_accessor(t, m->src, "_modules");
    Value *dv = ma < 0 ? NULL : value_from_source(t, ma, mods);
    Value *iter = dv ? value_new(t, V_ITER, NULL) : NULL;
    for (int i = 0; iter && i < dv->n; i++)
        if (value_append(t, iter, dv->items[i]) < 0)
            return NULL;
    return iter;
}

/* ModuleList m[slice] (dv: its _modules): the modules of those positions
   as a tuple standing for the new ModuleList eager makes -- iterated,
   indexed and measured as it is, never handed to the program (tr_rebuild.c
   refuses it) nor asked its type.  NULL when tracing stops. */
static Value *module_list_slice(Tracer *t, Value *m, Value *dv, Value *index)
{
    PyObject *s = value_as_constant(t, index);
    if (s == NULL)
        return PyErr_Occurred() ? NULL
               : (tracer_unsupported(t, false, "slicing a %s with values that are not constants",
                                     Py_TYPE(m->obj)->tp_name), NULL);
    Py_ssize_t start, stop, step;
    int r = PySlice_Unpack(s, &start, &stop, &step);
    Py_DECREF(s);
    if (r < 0)
        return NULL;
    Py_ssize_t len = PySlice_AdjustIndices(dv->n, &start, &stop, step);
    Value *out = value_new(t, V_TUPLE, NULL);
    if (out == NULL)
        return NULL;
    out->stands_for = "slice of a ModuleList";
    for (Py_ssize_t k = 0; k < len; k++)
        if (value_append(t, out, dv->items[start + k * step]) < 0)
            return NULL;
    return out;
}

Value *value_module_getitem(Tracer *t, Value *m, Value *index, bool *handled)
{
    *handled = false;
    if (m->kind != V_OBJECT || m->src < 0 || !is_plain_module(m->obj) || tensorlib_nn_module_type() == NULL)
        return NULL;
    PyObject *seq = tensorlib_nn_sequential();      /* borrowed */
    PyObject *lst = tensorlib_nn_module_list();     /* borrowed */
    PyObject *gi = type_lookup(Py_TYPE(m->obj), "__getitem__");
    bool is_seq = gi != NULL && seq && PyType_Check(seq) && gi == type_lookup((PyTypeObject *)seq, "__getitem__");
    bool is_lst = gi != NULL && lst && PyType_Check(lst) && gi == type_lookup((PyTypeObject *)lst, "__getitem__");
    if (PyErr_Occurred() || (!is_seq && !is_lst))
        return NULL;
    *handled = true;
    bool slice = index->kind == V_SLICE && is_lst;
    if ((index->kind != V_CONST || !PyLong_CheckExact(index->obj)) && !slice)
        return tracer_unsupported(t, false, "indexing a %s with this kind of value", Py_TYPE(m->obj)->tp_name), NULL;
    PyObject *mods = PyDict_GetItemString(instance_dict(m->obj), "_modules");
    if (mods == NULL || !PyDict_CheckExact(mods))
        return tracer_unsupported(t, false, "indexing a %s without _modules", Py_TYPE(m->obj)->tp_name), NULL;
    int ma = attr_accessor(t, m->src, "_modules");
    Value *dv = ma < 0 ? NULL : value_from_source(t, ma, mods);    /* its keys are guarded */
    if (dv == NULL)
        return NULL;
    if (slice)
        return module_list_slice(t, m, dv, index);
    Py_ssize_t i = PyLong_AsSsize_t(index->obj);
    if (i == -1 && PyErr_Occurred())
        return NULL;
    if (i < 0)
        i += dv->n;
    if (i < 0 || i >= dv->n)
        return tracer_unsupported(t, false, "index %zd out of range of a %s", i, Py_TYPE(m->obj)->tp_name), NULL;
    if (is_seq)
        return dv->items[i];          /* Sequential: by position among its modules */
    /* ModuleList: the module under the key str(i) */
    PyObject *key = PyUnicode_FromFormat("%zd", i);
    for (int k = 0; key && k < dv->n; k++)
        if (PyUnicode_Compare(PyList_GET_ITEM(dv->obj, k), key) == 0) {
            Py_DECREF(key);
            return dv->items[k];
        }
    Py_XDECREF(key);
    return PyErr_Occurred() ? NULL : (tracer_unsupported(t, false, "a ModuleList without module %zd", i), NULL);
}
