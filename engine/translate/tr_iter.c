/*
 * tr_iter.c -- subscripts, item assignment and iteration while translating
 * (DESIGN.md 3.4; contract: translate_int.h).
 *
 * An iterator is a V_ITER over the items it will yield, from pos: a loop
 * over constants, containers and tensor rows is unrolled (with a bound).
 * Invariants: an iterator remembers what it reads (seq: a list, dict or
 * tensor; srcs: the sources of enumerate()/zip()), so that across a graph
 * break it can be rebuilt to see what an eager step changed (tr_rebuild.c);
 * a list or dict is never changed while a loop the frames hold iterates
 * over it (tracer_check_iterated); only containers this frame made are
 * assigned into.
 */
#include "translate_int.h"

/* base[index]: a node for a tensor, an item or slice of a tuple or list
   (constant index), a dict item (constant key), folded for constants.
   NULL when tracing stops. */
Value *tr_subscript(TFrame *f, Value *base, Value *index)
{
    Tracer *t = f->t;
    if (base->kind == V_TENSOR) {
        if (index->kind == V_DICT || index->kind == V_OBJECT || index->kind == V_ITER)
            return tracer_unsupported(t, false, "indexing an array with this kind of value"), NULL;
        Value *args[2] = {base, index};
        return tensorops_call(t, NODE_CALL_FUNCTION, tensorops_operator("getitem"), "getitem", args, 2, NULL);
    }
    if (base->kind == V_NEWOBJ) {
        Value *args[1] = {index};
        return tr_newobj_protocol(f, base, "__getitem__", args, 1);
    }
    if (base->kind == V_OBJECT && base->src >= 0 && PyDict_CheckExact(base->obj)) {
        /* d[key] of a dict input with keys of several types */
        bool found;
        Value *r = value_keyed_dict_lookup(t, base, index, &found);
        return r == NULL || found ? r
               : (tracer_unsupported(t, false, "a missing key of a dict input"), NULL);
    }
    if (base->kind == V_OBJECT) {
        bool handled;
        Value *mi = value_module_getitem(t, base, index, &handled);
        if (handled)
            return mi;
        if (base->src >= 0 && value_type_lookup_is_generic(Py_TYPE(base->obj))) {
            /* obj[key], obj's class defining __getitem__ in Python: inlined */
            PyObject *name = PyUnicode_FromString("__getitem__");
            PyObject *fn = name ? _PyType_Lookup(Py_TYPE(base->obj), name) : NULL;
            Value *bound = fn && PyFunction_Check(fn) ? tr_generic_attr(f, base, name) : NULL;
            Py_XDECREF(name);
            if (bound != NULL) {
                Value *args[1] = {index};
                return tr_call_or_undo(f, bound, args, 1, NULL);
            }
            if (PyErr_Occurred() || t->reason != NULL)
                return NULL;
        }
        if (tr_is_dict_view_object(base))
            return tr_dict_view_item(f, base, "__getitem__", index);
    }
    if (base->kind == V_TUPLE || base->kind == V_LIST) {
        if (index->kind == V_CONST && PyLong_CheckExact(index->obj)) {
            Py_ssize_t i = PyLong_AsSsize_t(index->obj);
            if (i == -1 && PyErr_Occurred())
                return NULL;
            if (i < 0)
                i += base->n;
            if (i < 0 || i >= base->n)
                return tracer_unsupported(t, false, "index out of range"), NULL;
            return base->items[i];
        }
        if (index->kind == V_SLICE) {
            PyObject *s = value_as_constant(t, index);
            if (s == NULL)
                return NULL;
            Py_ssize_t start, stop, step;
            int r = PySlice_Unpack(s, &start, &stop, &step);
            Py_DECREF(s);
            if (r < 0)
                return NULL;
            Py_ssize_t len = PySlice_AdjustIndices(base->n, &start, &stop, step);
            Value *out = value_new(t, base->kind, NULL);
            if (out == NULL)
                return NULL;
            for (Py_ssize_t k = 0; k < len; k++)   /* (no index past the last: a step of
                                                      sys.maxsize must not overflow) */
                if (value_append(t, out, base->items[start + k * step]) < 0)
                    return NULL;
            return out;
        }
        return tracer_unsupported(t, false, "indexing a sequence with a non-constant"), NULL;
    }
    if (base->kind == V_DICT && index->kind == V_CONST) {
        for (int i = 0; i < base->n; i++) {
            int eq = PyObject_RichCompareBool(PyList_GET_ITEM(base->obj, i), index->obj, Py_EQ);
            if (eq < 0)
                return NULL;
            if (eq && base->items[i]->kind != V_NULL)   /* V_NULL: a deleted attribute */
                return base->items[i];
        }
        /* every key is known (a dict read from a source has its keys
           guarded): a KeyError, which a handler of the traced code may catch */
        Value *exc = tr_make_exception(f, PyExc_KeyError, &index, 1);
        if (exc != NULL)
            tr_raise(f, exc);
        return NULL;
    }
    if (foldable(base) && (foldable(index) || index->kind == V_SLICE)) {
        PyObject *key = value_as_constant(t, index);
        if (key == NULL)
            return NULL;
        Value *r = new_const(t, PyObject_GetItem(base->obj, key));
        Py_DECREF(key);
        return r;
    }
    return tracer_unsupported(t, false, "subscript of this kind of value"), NULL;
}

/* Item assignment into a list or dict this frame made; anything else (an
   array, an object the program can see) is an eager step. */
int tr_store_subscript(TFrame *f, Value *container, Value *idx, Value *value)
{
    Tracer *t = f->t;
    if (container->kind == V_NEWOBJ) {
        Value *args[2] = {idx, value};
        return tr_newobj_protocol(f, container, "__setitem__", args, 2) ? 0 : -1;
    }
    if (container->kind == V_LIST && container->src < 0 && idx->kind == V_CONST
        && PyLong_CheckExact(idx->obj)) {
        Py_ssize_t i = PyLong_AsSsize_t(idx->obj);
        if (i < 0)
            i += container->n;
        if (i < 0 || i >= container->n)
            return tracer_break(t, STOP_CALL, "list assignment index out of range");
        if (tracer_note_mutation(t, container, (int)i) < 0)
            return -1;
        container->items[i] = value;
        return 0;
    }
    if (container->kind == V_DICT && container->src < 0 && foldable(idx)) {
        for (int i = 0; i < container->n; i++) {
            int eq = PyObject_RichCompareBool(PyList_GET_ITEM(container->obj, i), idx->obj, Py_EQ);
            if (eq < 0)
                return -1;
            if (eq) {
                if (tracer_note_mutation(t, container, i) < 0)
                    return -1;
                container->items[i] = value;
                return 0;
            }
        }
        if (tracer_note_mutation(t, container, -1) < 0 || PyList_Append(container->obj, idx->obj) < 0)
            return -1;
        return value_append(t, container, value);
    }
    if (container->kind == V_DICT && container->src >= 0 && container->real != NULL && foldable(idx))
        return tr_visible_set_item(f, container, idx->obj, value);
    if (tr_is_dict_view_object(container))
        return tr_dict_view_store(f, container, idx, value);
    if (container->kind == V_TENSOR && tensor_is_torch(container->obj)) {
        /* t[idx] = v: an in-place graph op (tr_inplace.c), on a clone of a
           tensor the program holds while tracing */
        PyObject *setitem = tensorops_operator("setitem");
        Value *args[3] = {container, idx, value};
        return setitem && tensorops_call(t, NODE_CALL_FUNCTION, setitem, "setitem", args, 3, NULL)
               ? 0 : -1;
    }
    return tracer_break(t, STOP_CALL, "item assignment into a %s the program can see",
                        container->kind == V_TENSOR ? "tensor" : "container or object");
}

/* ---- iterators ---- */

/* enumerate() or zip() over sources its[0..n) (from their positions): out
   remembers where each source stands, so that it can be rebuilt as a real
   enumerate or zip (when it escapes, or reads a list, dict or tensor that a
   graph break may change).  0 / -1. */
int tr_derive_iter(Tracer *t, Value *out, Value **its, int n, long count)
{
    Value *srcs = value_new(t, V_TUPLE, NULL);
    if (srcs == NULL)
        return -1;
    for (int k = 0; k < n; k++) {
        /* a copy of the source from where out's first item comes */
        Value *src = its[k], *cur = value_new(t, V_ITER, NULL);
        if (cur == NULL || value_append(t, srcs, cur) < 0)
            return -1;
        for (int i = src->pos; i < src->n; i++)
            if (value_append(t, cur, src->items[i]) < 0)
                return -1;
        cur->seq = src->seq;
        cur->seq_view = src->seq_view;
        cur->seq_start = src->seq_start + src->pos;
        cur->srcs = src->srcs;   /* a derived source: refused at a break (make_rebuild_iter) */
        cur->count = src->count;
    }
    out->srcs = srcs;
    out->count = count;
    return 0;
}

/* Whether iterator v reads container (its seq, or one of its sources'). */
static bool iter_reads(Value *v, Value *container)
{
    if (v == NULL || v->kind != V_ITER)
        return false;
    /* one that came into a resume frame may read any list that was there
       before this translation began (which, only the run knows: see
       RB_SLOT_ITER) -- not one made while tracing (no source) */
    if (v->seq == container || v->reversed_of == container
        || (v->came_in_slot && container->kind == V_LIST && container->src >= 0))
        return true;
    for (int k = 0; v->srcs && k < v->srcs->n; k++)
        if (iter_reads(v->srcs->items[k], container))
            return true;
    return false;
}

/* Whether iterator v reads container -- one made while tracing -- but
   never sees its item `index` replaced (no change of size): over a dict's
   keys, which stay; or past
   that item already, when v holds every item of container in order (a
   loop that writes back the entry it was given: `for k, v in d.items():
   d[k] = f(v)`). */
static bool replacement_unseen(Value *v, Value *container, int index)
{
    /* a container the program can see changes when the plan replays the
       write, after the graph: the value replaced is dropped then, not
       where the loop is (a __del__ that empties the dict would run late) */
    if (index < 0 || v == NULL || v->kind != V_ITER || v->seq != container || v->came_in_slot
        || container->src >= 0)
        return false;
    char view = v->view ? v->view : v->seq_view;
    if (container->kind == V_DICT && (view == 0 || view == 'k'))
        return true;
    return v->n == container->n && v->pos > index;
}

/* Whether value v, held by a frame, is an iterator that would see the
   change of container (item `index` replaced, or -1: any change). */
static bool sees_change(Value *v, Value *container, int index)
{
    return iter_reads(v, container) && !replacement_unseen(v, container, index);
}

/* A list or dict is about to change: refuse when an iterator the frames
   still hold reads it (a loop not yet finished would have to see the
   change -- even one past its last item, as a list iterator is). */
static bool frame_sees_change(TFrame *f, Value *container, int index)
{
    for (int i = 0; i < f->sp; i++)
        if (sees_change(f->stack[i], container, index))
            return true;
    for (int i = 0; i < f->nlocals; i++)
        if (sees_change(f->locals[i], container, index))
            return true;
    return false;
}

int tracer_check_iterated(Tracer *t, Value *container, int index)
{
    bool reads = false;
    for (TFrame *f = t->current; f != NULL && !reads; f = f->parent)
        reads = frame_sees_change(f, container, index);
    /* a suspended generator's frame too: (q for q in lst) holds iter(lst) */
    for (int g = 0; g < t->ngens && !reads; g++)
        reads = frame_sees_change(t->gens[g], container, index);
    if (reads)
        return tracer_unsupported(t, false, "a %s changed while a loop iterates over it",
                                  container->kind == V_DICT ? "dict" : "list");
    return 0;
}

/* it (a new V_ITER) over the items of constant obj: a range, tuple, str or
   torch.Size, at most 10000 of them.  Returns it, or NULL when tracing
   stops. */
static Value *iter_constant(Tracer *t, Value *it, PyObject *obj)
{
    Py_ssize_t n = PyObject_Length(obj);
    if (n < 0)
        return NULL;
    if (n > 10000)
        return tracer_unsupported(t, false, "a loop of %zd iterations (unrolling bound 10000)", n), NULL;
    PyObject *seq = PySequence_Tuple(obj);
    if (seq == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        Value *c = value_new(t, V_CONST, PyTuple_GET_ITEM(seq, i));
        if (c == NULL || value_append(t, it, c) < 0) {
            Py_DECREF(seq);
            return NULL;
        }
    }
    Py_DECREF(seq);
    return it;
}

/* it (a new V_ITER) over set v the program holds, of plain constants
   (`for t in self.unique_layer_types`): its members in its iteration order,
   guarded by that order (tuple(s), ACC_SET_ORDER: two equal sets may
   iterate apart, after other insertions).  A set the frame wrote into is
   not read (tr_note_set_read).  Returns it, or NULL when tracing stops. */
static Value *iter_held_set(TFrame *f, Value *it, Value *v)
{
    Tracer *t = f->t;
    if (PySet_GET_SIZE(v->obj) > 256)
        return tracer_unsupported(t, false, "a set of %zd members as input", PySet_GET_SIZE(v->obj)), NULL;
    if (tr_note_set_read(t, v) < 0)
        return NULL;
    PyObject *order = PySequence_Tuple(v->obj);
    if (order == NULL)
        return NULL;
    if (!value_is_plain_constant(order)) {
        Py_DECREF(order);
        return tracer_unsupported(t, false, "iterating a set of members that are not constants"), NULL;
    }
    int a = guardset_accessor(t->gs, ACC_SET_ORDER, v->src, 0, NULL, NULL);
    Value *r = a >= 0 && guardset_add(t->gs, GUARD_EQUALS_MATCH, a, order, 0) >= 0
               ? iter_constant(t, it, order) : NULL;
    Py_DECREF(order);
    return r;
}

/* it (a new V_ITER) over the rows of tensor v (its first axis, known from
   its shape; at most 1000).  Returns it, or NULL when tracing stops. */
static Value *iter_rows(TFrame *f, Value *it, Value *v)
{
    Tracer *t = f->t;
    if (v->dynshape)
        return tracer_break(t, STOP_ESCAPE, "data escape: iterating a tensor whose shape "
                            "depends on its values"), NULL;
    PyObject *shape = PyObject_GetAttrString(v->obj, "shape");
    if (shape == NULL)
        return NULL;
    Py_ssize_t n = PyTuple_Check(shape) && PyTuple_GET_SIZE(shape) > 0
                       ? PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, 0)) : -1;
    Py_DECREF(shape);
    if (n < 0) {
        PyErr_Clear();
        return tracer_unsupported(t, false, "iterating a 0-d array"), NULL;
    }
    if (n > 1000)
        return tracer_unsupported(t, false, "a loop over %zd array rows (unrolling bound 1000)", n), NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        Value *idx = new_const(t, PyLong_FromSsize_t(i));
        Value *row = idx ? tr_subscript(f, v, idx) : NULL;
        if (row == NULL || value_append(t, it, row) < 0)
            return NULL;
    }
    /* The rows are read here, in the graph; only an eager step can
       write into the tensor (every in-place op is one), and across it
       the loop goes on over a view of the rows left (RB_ROWS). */
    it->seq = v;
    return it;
}

/* Items a value iterates over, as a new V_ITER (an iterator is its own).
   NULL when tracing stops. */
Value *tr_make_iter(TFrame *f, Value *v)
{
    Tracer *t = f->t;
    Value *it = value_new(t, V_ITER, NULL);
    if (it == NULL)
        return NULL;
    switch (v->kind) {
    case V_GEN:
    case V_ZIP:
        /* what takes every item at once (tuple(), list(), *args): the
           generator, zip or map run to its end now */
        for (;;) {
            Value *y;
            int r = tr_iter_next(f, v, &y);
            if (r < 0)
                return NULL;
            if (r == 0)
                return it;
            if (it->n >= 10000)
                return tracer_unsupported(t, false, "a generator of more than 10000 items"), NULL;
            if (value_append(t, it, y) < 0)
                return NULL;
        }
    case V_ITER:
        if (v->view) {
            /* iter(d.keys()): a new iterator over the view's items */
            for (int i = v->pos; i < v->n; i++)
                if (value_append(t, it, v->items[i]) < 0)
                    return NULL;
            it->seq = v->seq;   /* it reads the dict's items */
            it->seq_view = v->view;
            return it;
        }
        return v;
    case V_TUPLE:
    case V_LIST:
        for (int i = 0; i < v->n; i++)
            if (value_append(t, it, v->items[i]) < 0)
                return NULL;
        if (v->kind == V_LIST)
            it->seq = v;        /* a change to the list must be seen */
        return it;
    case V_DICT:
        for (int i = 0; i < v->n; i++) {
            Value *k = value_new(t, V_CONST, PyList_GET_ITEM(v->obj, i));
            if (k == NULL || value_append(t, it, k) < 0)
                return NULL;
        }
        it->seq = v;
        return it;
    case V_CONST:
        if (PyRange_Check(v->obj) || PyTuple_CheckExact(v->obj) || PyUnicode_CheckExact(v->obj)
            || PyFrozenSet_CheckExact(v->obj)   /* `for x in {"a", "b"}`: a constant's order */
            || (PyTuple_Check(v->obj) && value_is_plain_constant(v->obj)))   /* torch.Size */
            return iter_constant(t, it, v->obj);
        break;
    case V_TENSOR:
        return iter_rows(f, it, v);
    case V_SET:
        if (v->unordered)
            return tracer_unsupported(t, false, "iterating a set of objects compared by identity "
                                      "(it iterates in the order of their addresses)"), NULL;
        return iter_constant(t, it, v->obj);    /* the real set's order */
    case V_NEWOBJ: {
        Value *r = tr_newobj_protocol(f, v, "__iter__", NULL, 0);
        if (r == NULL || r->kind == V_ITER)
            return r;
        return tracer_unsupported(t, false, "iterating a new %s here: its __iter__ gives a %s",
                                  ((PyTypeObject *)v->obj)->tp_name,
                                  r->kind == V_GEN ? "generator" : "value that is no iterator"), NULL;
    }
    case V_OBJECT: {
        bool handled;
        Value *mi = value_module_iter(t, v, &handled);
        if (handled)
            return mi;
        if (tr_is_dict_view_object(v))
            return tr_dict_view_iter(f, v);     /* iter(d): over its keys as guarded */
        if (v->src >= 0 && (PySet_CheckExact(v->obj) || PyFrozenSet_CheckExact(v->obj)))
            return iter_held_set(f, it, v);
        break;
    }
    default:
        break;
    }
    return tracer_unsupported(t, false, "iterating over this kind of value"), NULL;
}

/* (contract: translate_int.h) */
Value *tr_reversed(TFrame *f, Value *v)
{
    Tracer *t = f->t;
    bool fixed = (v->kind == V_TUPLE && v->stands_for == NULL)
                 || (v->kind == V_CONST && (PyTuple_CheckExact(v->obj) || PyRange_Check(v->obj)
                                            || PyUnicode_CheckExact(v->obj)));
    if (!fixed && v->kind != V_LIST)
        return tracer_break(t, STOP_CALL, "call to reversed() of this kind of value"), NULL;
    Value *it = tr_make_iter(f, v);
    Value *out = it ? value_new(t, V_ITER, NULL) : NULL;
    if (out == NULL)
        return NULL;
    for (int i = it->n - 1; i >= it->pos; i--)
        if (value_append(t, out, it->items[i]) < 0)
            return NULL;
    if (v->kind == V_LIST)
        out->reversed_of = v;
    else
        out->made_by_iter = true;   /* a range_iterator or a reversed: a rebuilt
                                       tuple_iterator would not be */
    return out;
}
