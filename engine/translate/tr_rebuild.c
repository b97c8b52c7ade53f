/*
 * tr_rebuild.c -- materialization (DESIGN.md 3.5-3.6, docs/architecture.md
 * "Graph breaks"; contract: translate_int.h): how each value the plan
 * needs after its graph ran is rebuilt -- a graph output, an input, a
 * constant, or a container, iterator or bound method of these -- and the
 * live state a resume frame or a deopt gets.
 *
 * Invariants: a list, dict, tuple or iterator this frame made is one object
 * however many slots hold it (one memo slot, built once per run); an
 * iterator is rebuilt so that what an eager step does to what it reads is
 * seen as it would be eagerly (RB_ROWS, RB_LIST_ITER, RB_LIVE_ITER, ...);
 * a value the program gets is rebuilt as the real object (escapes).
 */
#include "translate_int.h"

#include <string.h>

static int make_rebuild_iter(Tracer *t, Outputs *o, Value *it, int from, bool live, Rebuild *rb);

/* Index of node among o's graph outputs, appended if new.  -1 on error. */
int tr_output_index(Outputs *o, NodeObject *node)
{
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(o->nodes); i++)
        if (PyList_GET_ITEM(o->nodes, i) == (PyObject *)node)
            return (int)i;
    if (PyList_Append(o->nodes, (PyObject *)node) < 0)
        return -1;
    return (int)PyList_GET_SIZE(o->nodes) - 1;
}

/* Free what o owns (nodes, memo slots); o is zeroed.  Cannot fail. */
void tr_outputs_clear(Outputs *o)
{
    Py_CLEAR(o->nodes);
    for (int i = 0; i < o->nmemo; i++)
        rebuild_clear(&o->memo[i]);
    PyMem_Free(o->memo);
    PyMem_Free(o->memo_vals);
    memset(o, 0, sizeof(*o));
}

/* Rebuild of a container's items into rb (kind already set).  0 / -1. */
static int make_rebuild_items(Tracer *t, Outputs *o, Value *v, int from, Rebuild *rb)
{
    rb->n = v->n - from;
    rb->items = PyMem_Calloc((size_t)rb->n + 1, sizeof(Rebuild));
    if (rb->items == NULL) {
        rb->n = 0;
        PyErr_NoMemory();
        return -1;
    }
    for (int i = from; i < v->n; i++)
        if (tr_make_rebuild(t, o, v->items[i], &rb->items[i - from]) < 0)
            return -1;
    return 0;
}

/* Start rebuild rb of `kind` with n items (and a spare one) to fill.
   0 / -1 (MemoryError). */
static int rebuild_start(Rebuild *rb, RebuildKind kind, int index, int n)
{
    rb->kind = kind;
    rb->index = index;
    rb->n = n;
    rb->items = PyMem_Calloc((size_t)n + 1, sizeof(Rebuild));
    if (rb->items == NULL) {
        rb->n = 0;
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

/* rb = seq.<name>() of dict Value seq: one of its views.  0 / -1. */
static int rebuild_dict_view(Tracer *t, Outputs *o, Value *seq, char view, Rebuild *rb)
{
    if (rebuild_start(rb, RB_DICT_VIEW, 0, 1) < 0)
        return -1;
    rb->obj = PyUnicode_FromString(view == 'k' ? "keys" : view == 'v' ? "values" : "items");
    if (rb->obj == NULL)
        return -1;
    return tr_make_rebuild(t, o, seq, &rb->items[0]);
}

/* Does iterator `it` read a list, dict or tensor (itself or its sources)? */
static bool reads_seq(const Value *it)
{
    if (it->seq != NULL)
        return true;
    for (int k = 0; it->srcs && k < it->srcs->n; k++)
        if (reads_seq(it->srcs->items[k]))
            return true;
    return false;
}

/* Rebuild of loop iterator `it` from its item `from` on:
     - over fixed items: the tuple of the items left (RB_ITER), which the
       resume frame iterates as it translates;
     - over a tensor: a view of the rows left (RB_ROWS), so that what an
       eager step writes into the tensor is seen;
     - over a list: the tuple of the items left, with the list noted so that
       an eager step that changes it turns the tuple into a real iterator
       over the list (RB_LIST_ITER); `live` asks for that iterator at once
       (RB_LIVE_ITER), as a source of a real enumerate() or zip() needs;
     - over a dict: a real iterator over it (RB_LIVE_ITER), which raises as
       eagerly if an eager step changes the dict's size;
     - enumerate() or zip() over any of those: a real one (RB_DERIVED).
   0 / -1. */
/* Whether iterator it reads a dict the program can see whose recorded
   item writes the real dict does not have yet (see below). */
static bool iter_reads_written_dict(Tracer *t, Value *it)
{
    if (it->seq != NULL && tr_dict_has_item_writes(t, it->seq))
        return true;
    for (int k = 0; it->srcs != NULL && k < it->srcs->n; k++)
        if (iter_reads_written_dict(t, it->srcs->items[k]))
            return true;
    return false;
}

static int make_rebuild_iter(Tracer *t, Outputs *o, Value *it, int from, bool live, Rebuild *rb)
{
    /* the plan makes live iterators before it replays the writes (their
       values may be objects it builds): one over a dict written while
       tracing would walk the items it had before */
    if (iter_reads_written_dict(t, it))
        return tracer_unsupported(t, false, "a loop over a dict the program can see, after "
                                  "writes into it, held across a break");
    if (it->reversed_of != NULL)      /* an eager step could change the list it reads */
        return tracer_unsupported(t, false, "a reversed() iterator over a list, held across a break");
    int left = it->n - from;
    bool lists_only = it->srcs != NULL;   /* every source plain, over a list or fixed items */
    bool any_seq = false;
    for (int k = 0; it->srcs && k < it->srcs->n; k++) {
        Value *src = it->srcs->items[k];
        lists_only &= src->srcs == NULL && (src->seq == NULL || src->seq->kind == V_LIST);
        any_seq |= reads_seq(src);
    }
    if (it->srcs != NULL && !any_seq && !live) {
        rb->kind = RB_ITER;   /* over fixed items: the tuple of what is left */
        return make_rebuild_items(t, o, it, from, rb);
    }
    if (lists_only && !live) {
        if (rebuild_start(rb, RB_ZIP_LISTS, it->count < 0 ? 1 : 0, 1 + it->srcs->n) < 0
            || (it->count >= 0 && (rb->obj = PyLong_FromLong(it->count + from)) == NULL))
            return -1;
        rb->items[0].kind = RB_ITER;
        if (make_rebuild_items(t, o, it, from, &rb->items[0]) < 0)
            return -1;
        for (int k = 0; k < it->srcs->n; k++)
            if (make_rebuild_iter(t, o, it->srcs->items[k], from, false, &rb->items[1 + k]) < 0)
                return -1;
        return 0;
    }
    if (it->srcs != NULL && (left > 0 || live)) {
        if (rebuild_start(rb, RB_DERIVED, it->count < 0 ? 1 : 0, it->srcs->n) < 0
            || (it->count >= 0 && (rb->obj = PyLong_FromLong(it->count + from)) == NULL))
            return -1;
        for (int k = 0; k < rb->n; k++) {
            Value *src = it->srcs->items[k];
            if (src->srcs != NULL)
                return tracer_unsupported(t, false, "a graph break inside a loop over enumerate() "
                                          "or zip() of enumerate() or zip()");
            if (make_rebuild_iter(t, o, src, from, true, &rb->items[k]) < 0)
                return -1;
        }
        return 0;
    }
    if (it->seq != NULL && it->seq->kind == V_TENSOR) {
        if (rebuild_start(rb, RB_ROWS, it->seq_start + from, 1) < 0)
            return -1;
        return tr_make_rebuild(t, o, it->seq, &rb->items[0]);
    }
    if (it->seq != NULL && (live || it->seq->kind == V_DICT)) {
        if (rebuild_start(rb, RB_LIVE_ITER, it->seq_start + from, 1) < 0)
            return -1;
        if (it->seq_view == 0 || it->seq_view == 'k')
            return tr_make_rebuild(t, o, it->seq, &rb->items[0]);
        /* over d.values() or d.items(): iter() of that view */
        return rebuild_dict_view(t, o, it->seq, it->seq_view, &rb->items[0]);
    }
    rb->kind = RB_ITER;
    if (make_rebuild_items(t, o, it, from, rb) < 0)
        return -1;
    if (it->came_in_slot) {
        /* it may read a list (the incoming slot's note says): pass that on */
        rb->kind = RB_SLOT_ITER;
        rb->index = it->came_in_slot - 1;
        if ((rb->obj = PyLong_FromLong(from)) == NULL)
            return -1;
    }
    else if (it->seq != NULL) {
        /* the list goes in the spare slot after the items (rb->n stays) */
        rb->kind = RB_LIST_ITER;
        rb->index = it->seq_start + from;
        if (tr_make_rebuild(t, o, it->seq, &rb->items[rb->n]) < 0)
            return -1;
    }
    return 0;
}

/* A list, dict, tuple or iterator this frame made is one object however many slots hold it:
   built once per run into a memo slot (after the memo slots it contains). */
/* rb = an object of class v->obj made while tracing (V_NEWOBJ):
   RB_NEWOBJ, obj (class, name..., key...) of its live attributes and
   (a dict subclass) its mapping's keys, items their values in that
   order, index the number of keys.  0 / -1. */
static int rebuild_new_object(Tracer *t, Outputs *o, Value *v, Rebuild *rb)
{
    Value *attrs = v->items[0], *mapping = v->n > 2 ? v->items[2] : NULL;
    int live = 0, nkeys = mapping ? mapping->n : 0;
    for (int i = 0; i < attrs->n; i++)
        live += attrs->items[i]->kind != V_NULL;
    if (rebuild_start(rb, RB_NEWOBJ, nkeys, live + nkeys) < 0
        || (rb->obj = PyTuple_New(live + nkeys + 1)) == NULL)
        return -1;
    PyTuple_SET_ITEM(rb->obj, 0, Py_NewRef(v->obj));
    int k = 0;
    for (int i = 0; i < attrs->n; i++) {
        if (attrs->items[i]->kind == V_NULL)
            continue;               /* deleted */
        PyTuple_SET_ITEM(rb->obj, k + 1, Py_NewRef(PyList_GET_ITEM(attrs->obj, i)));
        if (tr_make_rebuild(t, o, attrs->items[i], &rb->items[k++]) < 0)
            return -1;
    }
    for (int i = 0; i < nkeys; i++) {
        PyTuple_SET_ITEM(rb->obj, k + 1, Py_NewRef(PyList_GET_ITEM(mapping->obj, i)));
        if (tr_make_rebuild(t, o, mapping->items[i], &rb->items[k++]) < 0)
            return -1;
    }
    return 0;
}

static int make_rebuild_memo(Tracer *t, Outputs *o, Value *v, Rebuild *rb)
{
    for (int i = 0; i < o->nmemo; i++) {
        if (o->memo_vals[i] == v) {
            rb->kind = RB_MEMO;
            rb->index = i;
            return 0;
        }
    }
    Rebuild built;
    memset(&built, 0, sizeof(built));
    if (v->kind == V_ITER && v->view) {
        /* d.keys() / values() / items() of the dict, rebuilt */
        if (rebuild_dict_view(t, o, v->seq, v->view, &built) < 0) {
            rebuild_clear(&built);
            return -1;
        }
    }
    else if (v->kind == V_ITER && v->made_by_iter) {
        /* iter(d.items()) is a dict_itemiterator: a rebuilt one would not be */
        return tracer_unsupported(t, false, "an iterator iter() made that the program gets");
    }
    else if (v->kind == V_ITER && v->reversed_of != NULL) {
        /* an eager step, or the program, could change the list it reads */
        return tracer_unsupported(t, false, "a reversed() iterator over a list, held across a break");
    }
    else if (v->kind == V_ITER && iter_reads_written_dict(t, v)) {
        return tracer_unsupported(t, false, "a loop over a dict the program can see, after "
                                  "writes into it, held across a break");
    }
    else if (v->kind == V_ITER && v->escapes) {
        /* iter() of a real iterator (or of the rows / items left) */
        if (rebuild_start(&built, RB_LIVE_ITER, 0, 1) < 0)
            return -1;
        if (v->seq == NULL && v->srcs == NULL) {
            built.items[0].kind = RB_TUPLE;
            if (make_rebuild_items(t, o, v, v->pos, &built.items[0]) < 0) {
                rebuild_clear(&built);
                return -1;
            }
        }
        else if (make_rebuild_iter(t, o, v, v->pos, true, &built.items[0]) < 0) {
            rebuild_clear(&built);
            return -1;
        }
    }
    else if (v->kind == V_NEWOBJ) {
        if (rebuild_new_object(t, o, v, &built) < 0) {
            rebuild_clear(&built);
            return -1;
        }
    }
    else if (v->kind == V_ITER) {
        if (make_rebuild_iter(t, o, v, v->pos, false, &built) < 0) {
            rebuild_clear(&built);
            return -1;
        }
    }
    else if (v->kind == V_DICT && v->attrs_of_newobj) {
        return tracer_unsupported(t, false, "the __dict__ of an object made while tracing, which "
                                  "the program would get apart from the object");
    }
    else {
        built.kind = v->kind == V_LIST ? RB_LIST : v->kind == V_TUPLE ? RB_TUPLE
                     : v->kind == V_CELL ? RB_CELL : v->kind == V_SET ? RB_SET : RB_DICT;
        if (v->kind == V_DICT && (built.obj = PyList_AsTuple(v->obj)) == NULL)
            return -1;
        if (v->kind == V_TUPLE)
            built.obj = Py_XNewRef(v->tuple_type);     /* a named tuple's type, or NULL */
        if (make_rebuild_items(t, o, v, 0, &built) < 0) {
            rebuild_clear(&built);
            return -1;
        }
    }
    if (o->nmemo == o->memo_cap) {
        int cap = o->memo_cap ? o->memo_cap * 2 : 4;
        Rebuild *m = PyMem_Realloc(o->memo, sizeof(Rebuild) * (size_t)cap);
        Value **mv = m ? PyMem_Realloc(o->memo_vals, sizeof(Value *) * (size_t)cap) : NULL;
        if (m)
            o->memo = m;
        if (mv == NULL) {
            rebuild_clear(&built);
            PyErr_NoMemory();
            return -1;
        }
        o->memo_vals = mv;
        o->memo_cap = cap;
    }
    o->memo[o->nmemo] = built;
    o->memo_vals[o->nmemo] = v;
    rb->kind = RB_MEMO;
    rb->index = o->nmemo++;
    return 0;
}

/* How to rebuild v after the graph ran.  0 / -1 (t->reason set when v
   cannot be rebuilt). */
int tr_make_rebuild(Tracer *t, Outputs *o, Value *v, Rebuild *rb)
{
    memset(rb, 0, sizeof(*rb));
    if (++o->depth > 64) {
        o->depth--;
        return tracer_unsupported(t, false, "a value nested more than 64 levels deep (or containing itself)");
    }
    int rc = 0;
    switch (v->kind) {
    case V_TENSOR:
        if (v->node->op == NODE_PLACEHOLDER) {
            rb->kind = RB_INPUT;
            rb->index = v->src;
        }
        else {
            rb->kind = RB_OUTPUT;
            rb->index = tr_output_index(o, v->node);
            rc = rb->index < 0 ? -1 : 0;
        }
        break;
    case V_CONST:
    case V_OBJECT:
        if (v->src >= 0) {
            rb->kind = RB_INPUT;
            rb->index = v->src;
        }
        else {
            rb->kind = RB_CONST;
            rb->obj = Py_NewRef(v->obj);
        }
        break;
    case V_NULL:
        rb->kind = RB_NULL;
        break;
    case V_LIST:
    case V_DICT:
        if (v->stands_for != NULL) {
            rc = tracer_unsupported(t, false, "a %s the program would get", v->stands_for);
            break;
        }
        if (v->src >= 0) {
            rb->kind = RB_INPUT;   /* the caller's own object, unchanged */
            rb->index = v->src;
        }
        else {
            rc = make_rebuild_memo(t, o, v, rb);
        }
        break;
    case V_TUPLE:
        if (v->stands_for != NULL && v->node != NULL) {
            rb->kind = RB_OUTPUT;     /* a torch.Size of dynamic sizes: the graph reads it */
            rb->index = tr_output_index(o, v->node);
            rc = rb->index < 0 ? -1 : 0;
            break;
        }
        if (v->stands_for != NULL) {
            rc = tracer_unsupported(t, false, "a %s the program would get", v->stands_for);
            break;
        }
        if (v->src >= 0) {
            rb->kind = RB_INPUT;
            rb->index = v->src;
            break;
        }
        /* one object wherever it goes (`copy.copy(t) is t`) */
        rc = make_rebuild_memo(t, o, v, rb);
        break;
    case V_SLICE:
        rb->kind = RB_SLICE;
        rc = make_rebuild_items(t, o, v, 0, rb);
        break;
    case V_ITER:
        rc = make_rebuild_memo(t, o, v, rb);
        break;
    case V_BOUND:
        rb->kind = RB_ATTR;
        rb->obj = Py_NewRef(v->obj);
        rc = make_rebuild_items(t, o, v, 0, rb);
        break;
    case V_METHOD:
        /* read as an attribute (x.view): the bound method; else the
           class's function, called with the receiver first */
        rb->kind = v->pos == 1 ? RB_ATTR : RB_TYPE_ATTR;
        rb->obj = Py_NewRef(v->obj);
        rc = make_rebuild_items(t, o, v, 0, rb);
        rb->n = 1;   /* only the receiver */
        break;
    case V_FUNC:
        rc = tracer_unsupported(t, false, "a function made while tracing (def, lambda) "
                                "that the program gets");
        break;
    case V_PARTIAL:
        rc = tracer_unsupported(t, false, "a functools.partial made while tracing that the "
                                "program gets");
        break;
    case V_VMAP:
        rc = tracer_unsupported(t, false, "a torch.vmap function made while tracing that the "
                                "program gets");
        break;
    case V_NEWOBJ:
        /* one object wherever it goes */
        rc = make_rebuild_memo(t, o, v, rb);
        break;
    case V_SET:
        rc = v->merged ? tracer_unsupported(t, false, "a set made while tracing from another set "
                                            "(whose order a rebuilt set may not keep)")
                       : make_rebuild_memo(t, o, v, rb);
        break;
    case V_GEN:
        t->gen_not_rebuilt = true;
        rc = tracer_unsupported(t, false, "a generator made while tracing, which the program "
                                "would get (a generator leaves the translation only run)");
        break;
    case V_CELL:
        if (v->program_cell) {
            rc = tracer_unsupported(t, false, "a closure cell of an enclosing function");
            break;
        }
        /* one cell wherever it goes */
        rc = make_rebuild_memo(t, o, v, rb);
        break;
    default:
        rc = tracer_unsupported(t, false, "a value that cannot be rebuilt");
    }
    o->depth--;
    return rc;
}

/* ---- the live state ---- */

/* Live slot k holds a Python number computed from tensors (or other data
   an eager step made), or a loop iterator: the masks of the resume
   frame's key. */
static void note_slot(Value *v, int k, uint64_t *unspec, uint64_t *iters, bool *too_many)
{
    bool is_iter = v != NULL && v->kind == V_ITER && !v->view;
    bool is_num = v != NULL && v->kind == V_TENSOR
                  && (PyFloat_CheckExact(v->obj) || PyLong_CheckExact(v->obj)
                      || PyComplex_CheckExact(v->obj));
    /* data an eager step made, passed on unguarded (tr_value_from_resume_slot:
       a str or a list read as an opaque object) */
    is_num |= v != NULL && v->kind == V_OBJECT && v->obj != NULL
              && (PyUnicode_CheckExact(v->obj) || PyList_CheckExact(v->obj));
    if (k >= LIVE_MAX_SLOTS) {
        if (is_iter)
            *too_many = true;
        return;
    }
    if (is_iter)
        *iters |= slot_bit(k);
    if (is_num)
        *unspec |= slot_bit(k);
}

/* The frame's live state at its end: every local and stack[0..sp). */
int tr_make_live(Tracer *t, TFrame *f, Outputs *o, int sp, LiveState *live)
{
    live->nlocals = f->nlocals;
    live->nstack = sp;
    live->locals = PyMem_Calloc((size_t)f->nlocals + 1, sizeof(Rebuild));
    live->stack = PyMem_Calloc((size_t)sp + 1, sizeof(Rebuild));
    if (live->locals == NULL || live->stack == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    bool too_many = false;
    for (int i = 0; i < f->nlocals; i++) {
        Value *v = f->locals[i];
        if (v == NULL) {
            /* never touched here: passed on as it came in */
            live->locals[i].kind = RB_LOCAL;
            live->locals[i].index = i;
            if (t->rq->unspec & slot_bit(i))
                live->unspec |= slot_bit(i);
            continue;
        }
        note_slot(v, i, &live->unspec, &live->iters, &too_many);
        if (tr_make_rebuild(t, o, v, &live->locals[i]) < 0)
            return -1;
    }
    for (int j = 0; j < sp; j++) {
        note_slot(f->stack[j], f->nlocals + j, &live->unspec, &live->iters, &too_many);
        if (tr_make_rebuild(t, o, f->stack[j], &live->stack[j]) < 0)
            return -1;
    }
    if (too_many)
        return tracer_unsupported(t, false, "a loop iterator beyond %d live slots", LIVE_MAX_SLOTS);
    return 0;
}

/* Mark the iterators v holds (v itself, or in its containers) as ones the
   program gets. */
void tr_mark_escapes(Value *v, int depth)
{
    if (v == NULL || depth > 64 || v->escape_walked)
        return;
    v->escape_walked = true;
    if (v->kind == V_ITER) {
        v->escapes = true;
        return;
    }
    if (v->kind == V_NEWOBJ) {
        tr_mark_escapes(v->items[0], depth + 1);
        if (v->n > 2)
            tr_mark_escapes(v->items[2], depth + 1);     /* its mapping */
        return;
    }
    if (v->kind == V_TUPLE || v->kind == V_LIST || v->kind == V_DICT || v->kind == V_SLICE
        || v->kind == V_BOUND || v->kind == V_METHOD)
        for (int i = 0; i < v->n; i++)
            tr_mark_escapes(v->items[i], depth + 1);
}
