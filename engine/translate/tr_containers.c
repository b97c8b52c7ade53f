/*
 * tr_containers.c -- the opcodes that build and unpack containers while
 * translating: tuples, lists, slices, dicts, sets, list extend, unpacking,
 * SWAP, map/set adds, BEFORE_WITH and LOAD_SUPER_ATTR's stack effect
 * (DESIGN.md 3.4; contract: translate_int.h; the dispatch that calls these
 * tr_op_* handlers is tr_interp.c's).
 */
#include "translate_int.h"

/* BUILD_TUPLE / BUILD_LIST of the top oparg values. */
int tr_op_build_sequence(TFrame *f, const Instr *in)
{
    Tracer *t = f->t;
    Value *v = value_new(t, in->op == OP_BUILD_TUPLE ? V_TUPLE : V_LIST, NULL);
    if (v == NULL)
        return -1;
    for (int i = in->oparg; i > 0; i--)
        if (value_append(t, v, peek(f, i)) < 0)
            return -1;
    f->sp -= in->oparg;
    return push(f, v);
}

/* BUILD_SLICE of 2 or 3 values (a missing step is None). */
int tr_op_build_slice(TFrame *f, const Instr *in)
{
    Tracer *t = f->t;
    Value *v = value_new(t, V_SLICE, NULL);
    Value *none = value_new(t, V_CONST, Py_None);
    if (v == NULL || none == NULL)
        return -1;
    for (int i = in->oparg; i > 0; i--)
        if (value_append(t, v, peek(f, i)) < 0)
            return -1;
    if (in->oparg == 2 && value_append(t, v, none) < 0)
        return -1;
    f->sp -= in->oparg;
    return push(f, v);
}

/* d[key] = val in dict value d (made by this frame, being built), key a
   constant.  0 / -1. */
int tr_dict_set_item(Tracer *t, Value *d, PyObject *key, Value *val)
{
    if (PyObject_Hash(key) == -1) {
        PyErr_Clear();
        return tracer_break(t, STOP_CALL, "an unhashable dict key (TypeError)");
    }
    for (int j = 0; j < d->n; j++) {
        int eq = PyObject_RichCompareBool(PyList_GET_ITEM(d->obj, j), key, Py_EQ);
        if (eq < 0)
            return -1;
        if (eq) {
            d->items[j] = val;
            return 0;
        }
    }
    if (PyList_Append(d->obj, key) < 0 || value_append(t, d, val) < 0)
        return -1;
    return 0;
}

/* (contract: translate_int.h) */
int tr_dict_merge_item(Tracer *t, Value *d, PyObject *key, Value *val, bool refuse_twice)
{
    if (refuse_twice) {
        int has = PySequence_Contains(d->obj, key);
        if (has != 0)
            return has < 0 ? -1 : tracer_unsupported(t, false, "keyword argument %R given twice", key);
    }
    return tr_dict_set_item(t, d, key, val);
}

/* BUILD_MAP (oparg key, value pairs) / BUILD_CONST_KEY_MAP (oparg values
   under a constant tuple of keys). */
int tr_op_build_map(TFrame *f, const Instr *in)
{
    Tracer *t = f->t;
    int oparg = in->oparg;
    Value *d = value_new(t, V_DICT, NULL);
    if (d == NULL || (d->obj = PyList_New(0)) == NULL)
        return -1;
    PyObject *keys = NULL;
    int base = in->op == OP_BUILD_MAP ? 2 * oparg : oparg + 1;
    if (in->op == OP_BUILD_CONST_KEY_MAP) {
        Value *kv = peek(f, 1);
        if (kv->kind != V_CONST || !PyTuple_CheckExact(kv->obj))
            return tracer_unsupported(t, true, "BUILD_CONST_KEY_MAP without constant keys");
        keys = kv->obj;
    }
    for (int i = 0; i < oparg; i++) {
        PyObject *key;
        Value *val;
        if (keys) {
            key = PyTuple_GET_ITEM(keys, i);
            val = peek(f, base - i);
        }
        else {
            Value *kv = peek(f, base - 2 * i);
            if (!foldable(kv))
                return tracer_unsupported(t, false, "a dict key that is not a constant");
            key = kv->obj;
            val = peek(f, base - 2 * i - 1);
        }
        if (tr_dict_set_item(t, d, key, val) < 0)
            return -1;
    }
    f->sp -= base;
    return push(f, d);
}

/* BEFORE_WITH: [mgr] -> [exit, entered].  Not in the root frame of a
   strict translation: a break inside the block put it there, and the
   frame ends at the with statement. */
int tr_op_before_with(TFrame *f, const Instr *in)
{
    if (f->parent == NULL && f->t->strict_try)
        return tracer_unsupported(f->t, false, "a with block with a break inside it");
    Value *exit, *entered;
    if (peek(f, 1)->kind == V_STATECM && tr_next_op(f, in) != OP_POP_TOP)
        return tracer_unsupported(f->t, false, "`with torch.autocast(...) as name` (the mode "
                                  "object is the graph's)");
    if (tr_enter_with(f, pop(f), &exit, &entered) < 0)
        return -1;
    return push(f, exit) < 0 ? -1 : push(f, entered);
}

/* LOAD_SUPER_ATTR (3.12+): [super, cls, self] -> super(cls, self).name,
   or the pair of a method call (flag). */
int tr_op_load_super_attr(TFrame *f, const Instr *in)
{
    Value *self = pop(f);
    Value *cls = pop(f);
    Value *sup = pop(f);
    if (sup->kind != V_CONST || sup->obj != (PyObject *)&PySuper_Type)
        return tracer_unsupported(f->t, false, "super() that is not the builtin super");
    Value *s = tr_make_super(f, cls, self);
    Value *attr = s ? tr_super_attr(f, s, PyTuple_GET_ITEM(f->code->co_names, in->oparg)) : NULL;
    if (attr == NULL)
        return -1;
    return in->flag ? push_call_pair(f, attr, NULL) : push(f, attr);
}

/* MAP_ADD: [..., dict, ..., key, value]: dict[key] = value, the dict
   oparg below the key (one this frame is building), the key a constant. */
int tr_op_map_add(TFrame *f, const Instr *in)
{
    Value *value = pop(f);
    Value *key = pop(f);
    Value *d = peek(f, in->oparg);
    if (d->kind != V_DICT || d->src >= 0)
        return tracer_unsupported(f->t, true, "MAP_ADD into a dict the program can see");
    if (!foldable(key))
        return tracer_unsupported(f->t, false, "a dict key that is not a constant");
    return tr_dict_set_item(f->t, d, key->obj, value);
}

/* (contract: translate_int.h) */
int tr_set_add(Tracer *t, Value *s, Value *v)
{
    if (!foldable(v))
        return tracer_unsupported(t, false, "a set member that is not a constant");
    if (PyObject_Hash(v->obj) == -1) {
        PyErr_Clear();
        return tracer_break(t, STOP_CALL, "an unhashable set member (TypeError)");
    }
    int had = PySet_Contains(s->obj, v->obj);
    if (had != 0)
        return had < 0 ? -1 : 0;
    return PySet_Add(s->obj, v->obj) < 0 ? -1 : value_append(t, s, v);
}

/* (contract: translate_int.h) */
Value *tr_new_set(Tracer *t)
{
    Value *s = value_new(t, V_SET, NULL);
    if (s != NULL && (s->obj = PySet_New(NULL)) == NULL)
        return NULL;
    return s;
}

#define set_add_member tr_set_add

/* (contract: translate_int.h) */
int tr_set_merge(TFrame *f, Value *s, Value *other, bool *handled)
{
    PyObject *real = NULL;                                  /* strong */
    *handled = true;
    if (other->kind == V_CONST && PyAnySet_Check(other->obj))
        real = Py_NewRef(other->obj);
    else if (other->kind == V_DICT) {
        /* a dict's keys, in a dict of the same keys in the same order:
           set.update sizes its table by the dict's length */
        real = PyDict_New();
        for (int i = 0; real != NULL && i < other->n; i++)
            if (PyDict_SetItem(real, PyList_GET_ITEM(other->obj, i), Py_None) < 0)
                Py_CLEAR(real);
        if (real == NULL)
            return -1;
    }
    else {
        *handled = false;
        return 0;
    }
    /* set.update copies a set's table and pre-sizes for a dict: the real
       set is updated the same way, so it has the program's layout */
    PyObject *r = PyObject_CallMethod(s->obj, "update", "O", real);
    PyObject *members = r ? PySequence_List(real) : NULL;
    Py_XDECREF(r);
    Py_DECREF(real);
    s->merged = true;
    int rc = members ? 0 : -1;
    for (Py_ssize_t i = 0; rc == 0 && i < PyList_GET_SIZE(members); i++) {
        PyObject *m = PyList_GET_ITEM(members, i);                 /* borrowed */
        int dup = 0;
        for (int k = 0; k < s->n && dup == 0; k++)
            dup = PyObject_RichCompareBool(s->items[k]->obj, m, Py_EQ);
        if (dup < 0)
            rc = -1;
        else if (dup == 0) {
            Value *c = value_new(f->t, V_CONST, m);
            rc = c == NULL || value_append(f->t, s, c) < 0 ? -1 : 0;
        }
    }
    Py_XDECREF(members);
    return rc;
}

/* BUILD_SET: a set of the oparg values on the stack. */
int tr_op_build_set(TFrame *f, const Instr *in)
{
    Value *s = tr_new_set(f->t);
    if (s == NULL)
        return -1;
    for (int i = in->oparg; i >= 1; i--)              /* the first pushed first */
        if (set_add_member(f->t, s, peek(f, i)) < 0)
            return -1;
    f->sp -= in->oparg;
    return push(f, s);
}

/* SET_ADD / SET_UPDATE into the set oparg below the top. */
int tr_op_set_add(TFrame *f, const Instr *in)
{
    Value *item = pop(f);
    Value *s = peek(f, in->oparg);
    if (s->kind != V_SET)
        return tracer_unsupported(f->t, true, "adding to a set the program can see");
    if (in->op == OP_SET_ADD)
        return set_add_member(f->t, s, item);
    bool handled;
    int rc = tr_set_merge(f, s, item, &handled);
    if (handled || rc < 0)
        return rc;
    Value *it = tr_make_iter(f, item);
    if (it == NULL)
        return -1;
    for (int i = it->pos; i < it->n; i++)
        if (set_add_member(f->t, s, it->items[i]) < 0)
            return -1;
    return 0;
}

/* LIST_APPEND / LIST_EXTEND into the list oparg below the top. */
int tr_op_list_extend(TFrame *f, const Instr *in)
{
    Tracer *t = f->t;
    Value *item = pop(f);
    Value *list = peek(f, in->oparg);
    if (list->kind != V_LIST || list->src >= 0)
        return tracer_unsupported(t, true, "extending a list the program can see");
    if (in->op == OP_LIST_APPEND)
        return value_append(t, list, item);
    Value *it = tr_make_iter(f, item);
    if (it == NULL)
        return -1;
    for (int i = it->pos; i < it->n; i++)
        if (value_append(t, list, it->items[i]) < 0)
            return -1;
    return 0;
}

/* LIST_TO_TUPLE: tuple(list). */
int tr_op_list_to_tuple(TFrame *f)
{
    Tracer *t = f->t;
    Value *l = pop(f);
    Value *tup = value_new(t, V_TUPLE, NULL);
    if (tup == NULL)
        return -1;
    for (int i = 0; i < l->n; i++)
        if (value_append(t, tup, l->items[i]) < 0)
            return -1;
    return push(f, tup);
}

/* UNPACK_SEQUENCE n: push the n items of the top value, last first.
   UNPACK_EX (a, *b, c = v): the items after the star last first, a new
   list of those the star takes, then the ones before it. */
int tr_op_unpack_sequence(TFrame *f, const Instr *in)
{
    Value *it = tr_make_iter(f, pop(f));
    if (it == NULL)
        return -1;
    int left = it->n - it->pos;
    bool star = in->op == OP_UNPACK_EX;
    int before = star ? in->oparg & 0xFF : in->oparg, after = star ? in->oparg >> 8 : 0;
    if (star ? left < before + after : left != before)
        return tracer_unsupported(f->t, false, "unpacking %d values into %d names%s",
                                  left, before + after, star ? " and a starred one" : "");
    for (int i = it->n - 1; i >= it->n - after; i--)
        if (push(f, it->items[i]) < 0)
            return -1;
    if (star) {
        Value *rest = value_new(f->t, V_LIST, NULL);
        for (int i = it->pos + before; rest != NULL && i < it->n - after; i++)
            if (value_append(f->t, rest, it->items[i]) < 0)
                return -1;
        if (rest == NULL || push(f, rest) < 0)
            return -1;
    }
    for (int i = it->pos + before - 1; i >= it->pos; i--)
        if (push(f, it->items[i]) < 0)
            return -1;
    it->pos = it->n;                                  /* consumed */
    return 0;
}

/* SWAP k: exchange the top value and the k-th. */
int tr_op_swap(TFrame *f, const Instr *in)
{
    Value *top = f->stack[f->sp - 1];
    f->stack[f->sp - 1] = f->stack[f->sp - in->oparg];
    f->stack[f->sp - in->oparg] = top;
    return 0;
}
