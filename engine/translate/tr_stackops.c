/*
 * tr_stackops.c -- the stack effects of operators, subscripts, slices and
 * attribute stores while translating: BINARY_OP, COMPARE_OP, TO_BOOL,
 * IS_OP, CONTAINS_OP, the unary ops, BINARY_SUBSCR / BINARY_SLICE /
 * STORE_SLICE / STORE_SUBSCR, STORE_ATTR (DESIGN.md 3.4; contract:
 * translate_int.h).  What an operation means to values is in
 * tr_operators.c and tr_iter.c; the dispatch that calls these tr_op_*
 * handlers is tr_interp.c's.
 */
#include "translate_int.h"

/* BINARY_OP k: a op b, in place for k >= 13 (a op= b). */
int tr_op_binary_op(TFrame *f, const Instr *in)
{
    Value *b = pop(f);
    Value *a = pop(f);
    bool inplace = in->oparg >= 13;
    int k = inplace ? in->oparg - 13 : in->oparg;
    if (k < 0 || k > 12)
        return tracer_unsupported(f->t, true, "BINARY_OP %d", in->oparg);
    return push(f, tr_apply_binary(f, tr_binary_op_names[k], tr_binary_op_hints[k], a, b, inplace));
}

/* COMPARE_OP: a < b, a <= b, a == b ... (3.13: then bool() when the
   flag is set, as a branch on it follows). */
int tr_op_compare_op(TFrame *f, const Instr *in)
{
    Value *b = pop(f);
    Value *a = pop(f);
    int k = in->oparg;
    if (k < 0 || k > 5)
        return tracer_unsupported(f->t, true, "COMPARE_OP %d", in->oparg);
    Value *r = tr_apply_binary(f, tr_compare_op_names[k], tr_compare_op_names[k], a, b, false);
    if (r == NULL || !in->flag || (r->kind == V_TENSOR && tr_truth_test_follows(f, in)))
        return push(f, r);
    int tv = tr_truth(f, r, "branch");
    if (tv < 0)
        return -1;
    return push(f, new_const(f->t, PyBool_FromLong(tv)));
}

/* TO_BOOL (3.13): bool(a).  A tensor's truth is left to the branch or
   'not' that follows, which test it as on 3.11 (an eager truth test);
   a value the interpreter may see gets the exact bool it expects. */
int tr_op_to_bool(TFrame *f, const Instr *in)
{
    if (peek(f, 1)->kind == V_TENSOR && tr_truth_test_follows(f, in))
        return 0;
    int tv = tr_truth(f, peek(f, 1), tr_truth_use(f, in));
    if (tv < 0)
        return -1;
    (void)pop(f);
    return push(f, new_const(f->t, PyBool_FromLong(tv)));
}

/* IS_OP: a is b, a is not b (oparg 1). */
int tr_op_is_op(TFrame *f, const Instr *in)
{
    Value *b = pop(f);
    Value *a = pop(f);
    int same = tr_is_same(f, a, b);
    if (same < 0)
        return -1;
    return push(f, new_const(f->t, PyBool_FromLong(same ^ (in->oparg & 1))));
}

/* CONTAINS_OP: a in b, a not in b (oparg 1). */
int tr_op_contains_op(TFrame *f, const Instr *in)
{
    Value *b = pop(f);
    Value *a = pop(f);
    int r = tr_contains(f, a, b);
    if (r < 0)
        return -1;
    return push(f, new_const(f->t, PyBool_FromLong(r ^ (in->oparg & 1))));
}

/* UNARY_NEGATIVE / UNARY_POSITIVE / UNARY_INVERT. */
int tr_op_unary(TFrame *f, const Instr *in)
{
    const char *name = in->op == OP_UNARY_NEGATIVE ? "neg"
                       : in->op == OP_UNARY_POSITIVE ? "pos" : "invert";
    return push(f, tr_apply_unary(f, name, pop(f)));
}

/* UNARY_NOT: not a, of a value whose truth is known. */
int tr_op_unary_not(TFrame *f)
{
    int tv = tr_truth(f, pop(f), "'not'");   /* after a TO_BOOL too */
    if (tv < 0)
        return -1;
    return push(f, new_const(f->t, PyBool_FromLong(!tv)));
}

/* BINARY_SUBSCR: base[idx]. */
int tr_op_binary_subscr(TFrame *f)
{
    Value *idx = pop(f);
    Value *base = pop(f);
    return push(f, tr_subscript(f, base, idx));
}

/* Pop the two values on top, start and stop, as slice(start, stop).
   NULL on an error. */
static Value *pop_slice(TFrame *f)
{
    Tracer *t = f->t;
    Value *sl = value_new(t, V_SLICE, NULL);
    Value *none = value_new(t, V_CONST, Py_None);
    if (sl == NULL || none == NULL || value_append(t, sl, peek(f, 2)) < 0
        || value_append(t, sl, peek(f, 1)) < 0 || value_append(t, sl, none) < 0)
        return NULL;
    f->sp -= 2;
    return sl;
}

/* BINARY_SLICE (3.12): container[start:stop]. */
int tr_op_binary_slice(TFrame *f)
{
    Value *sl = pop_slice(f);
    if (sl == NULL)
        return -1;
    Value *base = pop(f);
    return push(f, tr_subscript(f, base, sl));
}

/* STORE_SLICE (3.12): container[start:stop] = value. */
int tr_op_store_slice(TFrame *f)
{
    Value *sl = pop_slice(f);
    if (sl == NULL)
        return -1;
    Value *container = pop(f);
    Value *value = pop(f);
    return tr_store_subscript(f, container, sl, value);
}

/* STORE_SUBSCR: container[idx] = value. */
int tr_op_store_subscr(TFrame *f)
{
    Value *idx = pop(f);
    Value *container = pop(f);
    Value *value = pop(f);
    return tr_store_subscript(f, container, idx, value);
}

/* STORE_ATTR: [value, owner] -> owner.name = value; DELETE_ATTR: [owner].
   Into an object made while tracing, or recorded for the plan to replay
   on an object the program can see (tr_effects.c). */
int tr_op_store_attr(TFrame *f, const Instr *in)
{
    Value *owner = pop(f);
    Value *value = in->op == OP_STORE_ATTR ? pop(f) : NULL;
    return tr_store_attr(f, owner, PyTuple_GET_ITEM(f->code->co_names, in->oparg), value);
}

/* (contract: translate_int.h) */
int tr_store_attr(TFrame *f, Value *owner, PyObject *name, Value *value)
{
    if (owner->kind == V_NEWOBJ)
        return value ? tr_newobj_set_attr(f, owner, name, value) : tr_newobj_del_attr(f, owner, name);
    if (owner->kind == V_OBJECT || owner->kind == V_CONST)
        return tr_visible_set_attr(f, owner, name, value);
    return tracer_unsupported(f->t, false, "%s attribute '%U' of %s the program can see",
                              value ? "setting" : "deleting", name,
                              owner->kind == V_TENSOR ? "a tensor" : "a value");
}
