/*
 * tr_operators.c -- what operators mean to symbolic values (DESIGN.md 3.4;
 * contract: translate_int.h): binary, unary and comparison operators, truth
 * values of branches, 'is' and 'in', f-string parts.
 *
 * Invariants: an operator on a tensor becomes a graph node (tensorops.c);
 * on constants it is folded only when their operators are builtin C code
 * (foldable), so folding runs no program code; tuples and lists are
 * combined item by item; a branch on a tensor is a graph break, never
 * decided while tracing.
 */
#include "translate_int.h"

#include <string.h>

const char *const tr_binary_op_names[13] = {
    "add", "and_", "floordiv", "lshift", "matmul", "mul", "mod", "or_",
    "pow", "rshift", "sub", "truediv", "xor",
};
const char *const tr_binary_op_hints[13] = {
    "add", "and_", "floordiv", "lshift", "matmul", "mul", "mod", "or_",
    "pow", "rshift", "sub", "truediv", "xor",
};
const char *const tr_compare_op_names[6] = {"lt", "le", "eq", "ne", "gt", "ge"};

/* v as a plain constant (foldable, or a tuple this frame built of
   foldable items): new reference, or NULL (no exception) when it is not
   one. */
static PyObject *plain_constant_of(Value *v)
{
    if (foldable(v))
        return Py_NewRef(v->obj);
    if (v->kind != V_TUPLE)
        return NULL;
    PyObject *tup = PyTuple_New(v->n);
    for (int i = 0; tup != NULL && i < v->n; i++) {
        if (!foldable(v->items[i])) {
            Py_CLEAR(tup);
            break;
        }
        PyTuple_SET_ITEM(tup, i, Py_NewRef(v->items[i]->obj));
    }
    PyErr_Clear();
    return tup;
}

/* Whether v is a member of an enum (its class's metaclass is
   enum.EnumType) that an accessor reaches: a singleton whose value never
   changes. */
static bool is_enum_member(Value *v)
{
    if ((v->kind != V_CONST && v->kind != V_OBJECT) || v->src < 0)
        return false;
    PyObject *name = PyUnicode_FromString("enum");
    PyObject *mod = name ? PyImport_GetModule(name) : NULL;
    Py_XDECREF(name);
    PyObject *meta = mod ? PyObject_GetAttrString(mod, "EnumMeta") : NULL;
    Py_XDECREF(mod);
    PyErr_Clear();
    bool r = meta != NULL && PyType_Check(meta)
             && PyType_IsSubtype(Py_TYPE(Py_TYPE(v->obj)), (PyTypeObject *)meta);
    Py_XDECREF(meta);
    return r;
}

/* Whether comparing a with `==` or `!=` runs C code only: the type's
   __eq__ is a slot wrapper (object's, str's, int's), not Python. */
static bool compares_in_c(PyObject *obj, const char *dunder)
{
    PyObject *name = PyUnicode_FromString(dunder);
    PyObject *m = name ? _PyType_Lookup(Py_TYPE(obj), name) : NULL;   /* borrowed */
    Py_XDECREF(name);
    return m != NULL && Py_IS_TYPE(m, &PyWrapperDescr_Type);
}

/* a == b / a != b of enum members (Action.NONE == Action.NOTIFY): known
   once both are guarded to be those members.  NULL when tracing stops. */
static Value *compare_enum_members(Tracer *t, PyObject *op, const char *opname, Value *a, Value *b)
{
    const char *dunder = strcmp(opname, "eq") == 0 ? "__eq__" : "__ne__";
    if (!compares_in_c(a->obj, dunder) || !compares_in_c(b->obj, dunder))
        return tracer_unsupported(t, false, "comparing enum members with a Python %s", dunder), NULL;
    if (guardset_add(t->gs, GUARD_ID_MATCH, a->src, a->obj, 0) < 0
        || guardset_add(t->gs, GUARD_ID_MATCH, b->src, b->obj, 0) < 0)
        return NULL;
    return new_const(t, PyObject_CallFunctionObjArgs(op, a->obj, b->obj, NULL));
}

/* An in-place op on a list made while tracing (+=, *=): the list itself
   now holds `items`' items, its mutation noted.  The list, or NULL. */
static Value *list_becomes(Tracer *t, Value *list, Value *items)
{
    if (tracer_note_mutation(t, list, -1) < 0)
        return NULL;
    list->n = 0;
    for (int i = 0; i < items->n; i++)
        if (value_append(t, list, items->items[i]) < 0)
            return NULL;
    return list;
}

/* The most items a repeated list or tuple may have while tracing. */
#define REPEAT_MAX_ITEMS 4096

/* seq * n, n * seq (and seq *= n) of a list or tuple and a constant int:
   the items repeated, each the same value as in Python (references, not
   copies).  A list the program can see is never extended in place here.
   NULL when tracing stops. */
static Value *repeat_sequence(Tracer *t, Value *a, Value *b, bool inplace)
{
    bool seq_first = !(b->kind == V_LIST || b->kind == V_TUPLE
                       || (b->kind == V_CONST && PyTuple_CheckExact(b->obj)));
    Value *seq = seq_first ? a : b, *count = seq_first ? b : a;
    if (count->kind != V_CONST || !PyLong_CheckExact(count->obj))
        return tracer_unsupported(t, false, "operator * on a %s and a value not known while tracing",
                                  seq->kind == V_LIST ? "list" : "tuple"), NULL;
    if (inplace && seq_first && seq->kind == V_LIST && seq->src >= 0)
        return tracer_unsupported(t, false, "in-place *= on a list the program can see"), NULL;
    int overflow = 0;
    long n = PyLong_AsLongAndOverflow(count->obj, &overflow);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    Py_ssize_t len = seq->kind == V_CONST ? PyTuple_GET_SIZE(seq->obj) : seq->n;
    if (n < 0)
        n = 0;
    if (overflow > 0 || (len > 0 && n > REPEAT_MAX_ITEMS / len))
        return tracer_unsupported(t, false, "operator * making a sequence of more than %d items",
                                  REPEAT_MAX_ITEMS), NULL;
    if (seq->kind != V_LIST && n == 1)
        return seq;              /* t * 1 is t itself (CPython's tuple_repeat) */
    Value *out = value_new(t, seq->kind == V_LIST ? V_LIST : V_TUPLE, NULL);
    for (long r = 0; out != NULL && r < n; r++) {
        for (Py_ssize_t i = 0; i < len; i++) {
            Value *item = seq->kind == V_CONST ? value_new(t, V_CONST, PyTuple_GET_ITEM(seq->obj, i))
                                               : seq->items[i];
            if (item == NULL || value_append(t, out, item) < 0)
                return NULL;
        }
    }
    if (out == NULL || !(inplace && seq_first && seq->kind == V_LIST))
        return out;
    return list_becomes(t, seq, out);       /* list *= n: the same list object */
}

/* Apply operator.<opname> to a and b: fold constants, add a node for
   tensors, combine tuples/lists.  NULL when tracing stops. */
/* v as a sequence the translator can compare item by item: a V_LIST or
   V_TUPLE (standing for nothing else), or a constant tuple or list, whose
   items become constant Values.  *is_list says which.  NULL when it is
   none of them. */
static Value *as_sequence(Tracer *t, Value *v, bool *is_list)
{
    if ((v->kind == V_LIST || v->kind == V_TUPLE) && v->stands_for == NULL && v->tuple_type == NULL) {
        *is_list = v->kind == V_LIST;
        return v;
    }
    if (v->kind != V_CONST || !(PyTuple_CheckExact(v->obj) || PyList_CheckExact(v->obj)))
        return NULL;
    *is_list = PyList_CheckExact(v->obj);
    Value *out = value_new(t, V_TUPLE, NULL);
    for (Py_ssize_t i = 0; out != NULL && i < PySequence_Fast_GET_SIZE(v->obj); i++) {
        Value *c = value_new(t, V_CONST, PySequence_Fast_GET_ITEM(v->obj, i));
        if (c == NULL || value_append(t, out, c) < 0)
            out = NULL;
    }
    return out;
}

/* a == b / a != b of two lists or two tuples, as Python compares them:
   the lengths, then item by item (the same object is equal), each item's
   answer known while tracing (sizes: decided and guarded).  *handled false
   (NULL) when a or b is no such sequence.  NULL when tracing stops. */
static Value *compare_sequences(TFrame *f, const char *opname, Value *a, Value *b, bool *handled)
{
    Tracer *t = f->t;
    bool la, lb;
    Value *sa = as_sequence(t, a, &la), *sb = sa ? as_sequence(t, b, &lb) : NULL;
    *handled = sa != NULL && sb != NULL;
    if (!*handled)
        return PyErr_Occurred() ? (*handled = true, NULL) : NULL;
    bool ne = opname[0] == 'n';
    bool equal = la == lb && sa->n == sb->n;
    for (int i = 0; equal && i < sa->n; i++) {
        if (sa->items[i] == sb->items[i])
            continue;
        Value *r = tr_apply_binary(f, "eq", "==", sa->items[i], sb->items[i], false);
        if (r == NULL)
            return NULL;
        if (r->kind != V_CONST)
            return tracer_unsupported(t, false, "%s of sequences whose items are known only when "
                                      "the graph runs", ne ? "!=" : "=="), NULL;
        int tv = PyObject_IsTrue(r->obj);
        if (tv < 0)
            return NULL;
        equal = tv;
    }
    return new_const(t, PyBool_FromLong(equal != ne));
}

Value *tr_apply_binary(TFrame *f, const char *opname, const char *hint,
                       Value *a, Value *b, bool inplace)
{
    Tracer *t = f->t;
    PyObject *op = tensorops_operator(opname);
    if (op == NULL)
        return NULL;
    if (a->kind == V_TENSOR || b->kind == V_TENSOR) {
        Value *other = a->kind == V_TENSOR ? b : a, *num = a->kind == V_TENSOR ? a : b;
        bool seq = other->kind == V_LIST || other->kind == V_TUPLE
                   || (other->kind == V_CONST && (PyTuple_Check(other->obj) || PyList_Check(other->obj)
                                                  || PyUnicode_Check(other->obj) || PyBytes_Check(other->obj)));
        if (seq && !tensorlib_is_tensor(num->obj))
            /* (a, ) * n with n a graph number: a sequence whose length only
               the graph would know -- the number must be a constant here */
            return tracer_unsupported(t, false, "operator %s on a sequence and a number known only "
                                      "when the graph runs", hint), NULL;
        if (inplace && a->kind == V_TENSOR && tensorlib_is_tensor(a->obj)) {
            /* (a number that is a graph input is immutable: n += 1 is n + 1) */
            if (!tensor_is_torch(a->obj))
                return tracer_break(t, STOP_CALL, "in-place operator %s= on an array", hint), NULL;
            /* the graph does the in-place op (tr_inplace.c: tracing does it
               on the example, or on a clone of one the program holds) */
            char iname[24];
            snprintf(iname, sizeof(iname), "i%.*s", (int)strcspn(opname, "_"), opname);
            op = tensorops_operator(iname);
            if (op == NULL)
                return NULL;
        }
        /* sizes: decided, or computed with their expression */
        SymExpr e;
        Value *decided = NULL;
        int k = inplace && a->kind == V_TENSOR && tensorlib_is_tensor(a->obj) ? 0
                : tr_sym_operator(t, opname, a, b, &decided, &e);
        if (k < 0 || k == 1)
            return decided;
        Value *args[2] = {a, b};
        Value *r = tensorops_call(t, NODE_CALL_FUNCTION, op, hint, args, 2, NULL);
        if (k == 2 && r != NULL && tr_sym_attach(r, &e) < 0)
            return NULL;
        return r;
    }
    if (foldable(a) && foldable(b))
        return new_const(t, PyObject_CallFunctionObjArgs(op, a->obj, b->obj, NULL));
    bool a_tuple = a->kind == V_TUPLE || (a->kind == V_CONST && PyTuple_CheckExact(a->obj));
    bool b_tuple = b->kind == V_TUPLE || (b->kind == V_CONST && PyTuple_CheckExact(b->obj));
    if (strcmp(opname, "add") == 0
        && ((a_tuple && b_tuple) || (a->kind == V_LIST && b->kind == V_LIST)
            || (inplace && a->kind == V_LIST && (b_tuple || b->kind == V_LIST)))) {
        if (inplace && a->kind == V_LIST && a->src >= 0)
            return tracer_unsupported(t, false, "in-place += on a list the program can see"), NULL;
        if (a_tuple && b_tuple) {
            /* t + () is t, () + t is t (CPython's tuple_concat) */
            Py_ssize_t na = a->kind == V_CONST ? PyTuple_GET_SIZE(a->obj) : a->n;
            Py_ssize_t nb = b->kind == V_CONST ? PyTuple_GET_SIZE(b->obj) : b->n;
            if (nb == 0)
                return a;
            if (na == 0)
                return b;
        }
        Value *out = value_new(t, a->kind == V_LIST ? V_LIST : V_TUPLE, NULL);
        if (out == NULL)
            return NULL;
        Value *parts[2] = {a, b};
        for (int p = 0; p < 2; p++) {
            Value *s = parts[p];
            if (s->kind == V_CONST) {
                for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(s->obj); i++) {
                    Value *c = value_new(t, V_CONST, PyTuple_GET_ITEM(s->obj, i));
                    if (c == NULL || value_append(t, out, c) < 0)
                        return NULL;
                }
            }
            else {
                for (int i = 0; i < s->n; i++)
                    if (value_append(t, out, s->items[i]) < 0)
                        return NULL;
            }
        }
        if (inplace && a->kind == V_LIST)
            return list_becomes(t, a, out);     /* list += : the same list object, extended */
        return out;
    }
    if (strcmp(opname, "or_") == 0 && a->kind == V_DICT && b->kind == V_DICT
        && a->stands_for == NULL && b->stands_for == NULL && !(inplace && a->src >= 0)) {
        /* a | b of dicts: a's items, then b's over them; a |= b: into a */
        Value *out = a;
        if (!inplace) {
            out = value_new(t, V_DICT, NULL);
            if (out == NULL || (out->obj = PyList_New(0)) == NULL)
                return NULL;
        }
        else if (tracer_note_snapshot(t, a) < 0 || tracer_check_iterated(t, a, -1) < 0) {
            return NULL;
        }
        for (int p = inplace ? 1 : 0; p < 2; p++) {
            Value *d = p ? b : a;
            int n = d->n;
            for (int i = 0; i < n; i++)
                if (tr_dict_set_item(t, out, PyList_GET_ITEM(d->obj, i), d->items[i]) < 0)
                    return NULL;
        }
        return out;
    }
    if (strcmp(opname, "mul") == 0 && (a->kind == V_LIST || a_tuple || b->kind == V_LIST || b_tuple)
        && !a->stands_for && !b->stands_for)   /* (torch.Size, a dict view: their own rules) */
        return repeat_sequence(t, a, b, inplace);
    if ((strcmp(opname, "eq") == 0 || strcmp(opname, "ne") == 0) && is_enum_member(a) && is_enum_member(b))
        return compare_enum_members(t, op, opname, a, b);
    if (strcmp(opname, "eq") == 0 || strcmp(opname, "ne") == 0) {
        bool handled;
        Value *r = compare_sequences(f, opname, a, b, &handled);
        if (handled)
            return r;
    }
    /* torch.Size + (n,), (n,) * 2 ...: plain constants (C operators) */
    PyObject *ca = plain_constant_of(a), *cb = ca ? plain_constant_of(b) : NULL;
    if (ca != NULL && cb != NULL) {
        PyObject *r = PyObject_CallFunctionObjArgs(op, ca, cb, NULL);
        Py_DECREF(ca);
        Py_DECREF(cb);
        return new_const(t, r);
    }
    Py_XDECREF(ca);
    return tracer_unsupported(t, false, "operator %s on %s and %s", hint,
                              a->kind == V_CONST || a->kind == V_OBJECT ? Py_TYPE(a->obj)->tp_name : "a container",
                              b->kind == V_CONST || b->kind == V_OBJECT ? Py_TYPE(b->obj)->tp_name : "a container"), NULL;
}

/* operator.<opname>(a): a node for a tensor, folded for a constant.  NULL
   when tracing stops. */
Value *tr_apply_unary(TFrame *f, const char *opname, Value *a)
{
    Tracer *t = f->t;
    PyObject *op = tensorops_operator(opname);
    if (op == NULL)
        return NULL;
    if (a->kind == V_TENSOR) {
        SymExpr e;
        Value *decided = NULL;
        int k = tr_sym_operator(t, opname, a, NULL, &decided, &e);
        if (k < 0 || k == 1)
            return decided;
        Value *args[1] = {a};
        Value *r = tensorops_call(t, NODE_CALL_FUNCTION, op, opname, args, 1, NULL);
        if (k == 2 && r != NULL && tr_sym_attach(r, &e) < 0)
            return NULL;
        return r;
    }
    if (foldable(a))
        return new_const(t, PyObject_CallOneArg(op, a->obj));
    return tracer_unsupported(t, false, "unary %s on this value", opname), NULL;
}

/* Whether object v (read by an accessor) is true as object is: its class
   has neither __bool__ nor __len__ -- guarded absent on type(v).  False
   (maybe with an exception) otherwise. */
static bool truth_is_by_default(Tracer *t, Value *v)
{
    static const char *const hooks[] = {"__bool__", "__len__"};
    PyTypeObject *tp = Py_TYPE(v->obj);
    if (tp->tp_as_number && tp->tp_as_number->nb_bool)
        return false;
    if ((tp->tp_as_mapping && tp->tp_as_mapping->mp_length)
        || (tp->tp_as_sequence && tp->tp_as_sequence->sq_length))
        return false;
    int ta = guardset_accessor(t->gs, ACC_TYPE, v->src, 0, NULL, NULL);
    for (size_t i = 0; ta >= 0 && i < sizeof hooks / sizeof hooks[0]; i++) {
        PyObject *name = PyUnicode_FromString(hooks[i]);
        /* (hasattr of the class looks in its metaclass too) */
        bool absent = name != NULL && _PyType_Lookup(tp, name) == NULL
                      && _PyType_Lookup(Py_TYPE(tp), name) == NULL
                      && guardset_add(t->gs, GUARD_HASATTR, ta, name, 0) >= 0;
        Py_XDECREF(name);
        if (!absent)
            return false;
    }
    return ta >= 0;
}

/* Truth value of a value known at trace time: 1, 0, or -1 (stops). */
int tr_truth(TFrame *f, Value *v, const char *what)
{
    switch (v->kind) {
    case V_CONST:
        if (foldable(v) || PyModule_Check(v->obj) || PyFunction_Check(v->obj) || PyType_Check(v->obj))
            return PyObject_IsTrue(v->obj);
        break;
    case V_TUPLE:
    case V_LIST:
    case V_DICT:
    case V_SET:
        return v->n > 0;
    case V_TENSOR:
        return tracer_break(f->t, STOP_BRANCH, "%s on a tensor value", what);
    case V_NEWOBJ:
        return tr_newobj_truth(f, v);
    case V_GEN:
    case V_FUNC:
    case V_PARTIAL:
    case V_VMAP:
    case V_ZIP:
        return 1;
    case V_OBJECT:
        if (v->src >= 0 && truth_is_by_default(f->t, v))
            return 1;     /* no __bool__, no __len__ (guarded absent): true */
        if (PyErr_Occurred())
            return -1;
        break;
    default:
        break;
    }
    return tracer_unsupported(f->t, false, "%s on a value whose truth is not known while tracing", what);
}

/* Whether v is the object an accessor reads, itself: an object, a
   constant, or an input tensor (a placeholder). */
static bool read_as_itself(Value *v)
{
    return (v->kind == V_OBJECT || v->kind == V_CONST
            || (v->kind == V_TENSOR && v->node != NULL && v->node->op == NODE_PLACEHOLDER))
           && v->src >= 0 && v->obj != NULL;
}

/* `a is b` for values whose identity is known while tracing: 1, 0, or -1
   (tracing stops). */
int tr_is_same(TFrame *f, Value *a, Value *b)
{
    if (a->kind == V_ABSENT || b->kind == V_ABSENT)
        return tracer_unsupported(f->t, false, "'is' of a missing attribute");
    if (a->kind == V_CONST && b->kind == V_CONST)
        return a->obj == b->obj;
    if ((a->kind == V_CONST && a->obj == Py_None && b->kind != V_CONST && b->kind != V_OBJECT)
        || (b->kind == V_CONST && b->obj == Py_None && a->kind != V_CONST && a->kind != V_OBJECT))
        return 0;
    if (a == b)
        return 1;
    if ((a->kind == V_CONST && a->obj == Py_None && b->kind == V_OBJECT && b->src >= 0)
        || (b->kind == V_CONST && b->obj == Py_None && a->kind == V_OBJECT && a->src >= 0))
        return 0;     /* a V_OBJECT's type is guarded, and it is not NoneType */
    if ((a->kind == V_NEWOBJ || a->kind == V_GEN) != (b->kind == V_NEWOBJ || b->kind == V_GEN)
        && (a->kind == V_CONST || a->kind == V_OBJECT || b->kind == V_CONST || b->kind == V_OBJECT))
        return 0;     /* an object made while tracing is no object that existed before */
    if ((a->kind == V_NEWOBJ || a->kind == V_GEN) && (b->kind == V_NEWOBJ || b->kind == V_GEN))
        return 0;     /* two Values made apart are two objects */
    if (read_as_itself(a) && read_as_itself(b)) {
        /* two objects read through accessors (f._field_type is _FIELD,
           ref() is weight): their identity now, guarded as a relation of
           the two accessors */
        int later = a->src > b->src ? a->src : b->src, earlier = a->src > b->src ? b->src : a->src;
        bool same = a->obj == b->obj;
        if (later != earlier
            && guardset_add(f->t->gs, same ? GUARD_SAME_AS : GUARD_NOT_SAME_AS, later, NULL, earlier) < 0)
            return -1;
        return same;
    }
    if (a->kind == V_TENSOR && b->kind == V_TENSOR && a->node != NULL && b->node != NULL
        && (a->node->op != NODE_PLACEHOLDER || b->node->op != NODE_PLACEHOLDER))
        /* `query is not key` with a tensor the graph made: a new object,
           or -- an op that gives its input back (x.to() of its own dtype,
           an in-place op) -- the very object its input is, as the
           examples are (the guards fix dtype, device, strides) */
        return a->obj == b->obj;
    return tracer_unsupported(f->t, false, "'is' between these values");
}

/* (contract: translate_int.h) */
bool tr_equal_only_to_itself(Value *v)
{
    PyTypeObject *tp;
    if (v->kind == V_GEN)
        return true;
    if (v->kind == V_NEWOBJ)
        tp = (PyTypeObject *)v->obj;
    else if ((v->kind == V_OBJECT || v->kind == V_CONST) && read_as_itself(v))
        tp = Py_TYPE(v->obj);
    else
        return false;
    return tp->tp_richcompare == PyBaseObject_Type.tp_richcompare
           && tp->tp_hash == PyBaseObject_Type.tp_hash;
}

/* (contract: translate_int.h) */
bool tr_hashed_by_identity(Value *v)
{
    return tr_equal_only_to_itself(v)
           || (v->kind == V_TENSOR && read_as_itself(v) && tensorops_hash_is_identity(Py_TYPE(v->obj)));
}

/* `a in b` for a constant a and a constant or container b: 1, 0, or -1
   (tracing stops, or an exception). */
int tr_contains(TFrame *f, Value *a, Value *b)
{
    if (foldable(a) && foldable(b))
        return PySequence_Contains(b->obj, a->obj);
    if (is_enum_member(a) && (b->kind == V_TUPLE || b->kind == V_LIST)) {
        /* member in (Action.A, Action.B): == of guarded members */
        int r = 0;
        for (int i = 0; i < b->n && r == 0; i++) {
            Value *item = b->items[i];
            if (!is_enum_member(item) && !foldable(item))
                return tracer_unsupported(f->t, false, "'in' over values that are not constants");
            if (!compares_in_c(a->obj, "__eq__"))
                return tracer_unsupported(f->t, false, "comparing enum members with a Python __eq__");
            if (guardset_add(f->t->gs, GUARD_ID_MATCH, a->src, a->obj, 0) < 0
                || (item->src >= 0 && guardset_add(f->t->gs, GUARD_ID_MATCH, item->src, item->obj, 0) < 0))
                return -1;
            r = PyObject_RichCompareBool(a->obj, item->obj, Py_EQ);
        }
        return r;
    }
    if (foldable(a) && b->kind == V_OBJECT && b->src >= 0 && PyAnySet_CheckExact(b->obj)
        && PySet_GET_SIZE(b->obj) <= 256) {
        if (tr_note_set_read(f->t, b) < 0)
            return -1;
        /* key in s, a set the program holds of plain constants: its members
           guarded (EQUALS_MATCH against a copy) */
        PyObject *it = PyObject_GetIter(b->obj), *key;
        bool plain = it != NULL;
        while (plain && (key = PyIter_Next(it)) != NULL) {
            plain = value_is_plain_constant(key);
            Py_DECREF(key);
        }
        Py_XDECREF(it);
        if (PyErr_Occurred())
            return -1;
        PyObject *copy = plain ? (PySet_CheckExact(b->obj) ? PySet_New(b->obj) : PyFrozenSet_New(b->obj)) : NULL;
        if (copy != NULL) {
            int rc = guardset_add(f->t->gs, GUARD_EQUALS_MATCH, b->src, copy, 0);
            Py_DECREF(copy);
            return rc < 0 ? -1 : PySet_Contains(b->obj, a->obj);
        }
        if (PyErr_Occurred())
            return -1;
    }
    if (b->kind == V_OBJECT && b->src >= 0 && PyDict_CheckExact(b->obj)) {
        /* key in d, a dict input with keys of several types */
        bool found;
        return value_keyed_dict_lookup(f->t, b, a, &found) ? found : -1;
    }
    if ((b->kind == V_OBJECT || b->kind == V_CONST) && b->src >= 0 && !PyType_Check(b->obj)
        && !PyModule_Check(b->obj) && value_type_lookup_is_generic(Py_TYPE(b->obj))) {
        /* a in obj, obj's class defining __contains__ in Python: inlined */
        PyObject *name = PyUnicode_FromString("__contains__");
        PyObject *fn = name ? _PyType_Lookup(Py_TYPE(b->obj), name) : NULL;
        Value *bound = fn && PyFunction_Check(fn) ? tr_generic_attr(f, b, name) : NULL;
        Py_XDECREF(name);
        if (bound != NULL) {
            Value *args[1] = {a};
            Value *r = tr_call_or_undo(f, bound, args, 1, NULL);
            return r ? tr_truth(f, r, "'in'") : -1;
        }
        if (PyErr_Occurred() || f->t->reason != NULL)
            return -1;
    }
    if (tr_is_dict_view_object(b)) {
        /* key in d, d a dict subclass leaving `in` to dict's C code */
        Value *r = tr_dict_view_item(f, b, "__contains__", a);
        return r ? tr_truth(f, r, "'in'") : -1;
    }
    if (b->kind == V_NEWOBJ) {
        Value *args[1] = {a};
        Value *r = tr_newobj_protocol(f, b, "__contains__", args, 1);
        return r ? tr_truth(f, r, "'in'") : -1;
    }
    if (!foldable(a) && (b->kind == V_SET ? tr_hashed_by_identity(a)
                         : tr_equal_only_to_itself(a) && (b->kind == V_TUPLE || b->kind == V_LIST))) {
        /* self in memo (nn.Module.named_modules), p in memo (a parameter,
           _named_members): in a container when one of its items is it --
           == is identity, or (a set) the hash is the id, and a set
           compares hashes first */
        int r = 0;
        for (int i = 0; i < b->n && r == 0; i++)
            r = tr_is_same(f, a, b->items[i]);
        return r;
    }
    if (b->kind == V_ITER && b->view == 'k' && b->seq != NULL && b->seq->kind == V_DICT)
        b = b->seq;                   /* key in d.keys(): a live view of d's keys */
    if (!foldable(a) || !(b->kind == V_DICT || b->kind == V_TUPLE || b->kind == V_LIST
                          || b->kind == V_SET))
        return tracer_unsupported(f->t, false, "'in' on these values");
    int r = 0;
    for (int i = 0; i < b->n && r == 0; i++) {
        if (b->kind == V_DICT)
            r = PyObject_RichCompareBool(PyList_GET_ITEM(b->obj, i), a->obj, Py_EQ);
        else if (foldable(b->items[i]))
            r = PyObject_RichCompareBool(b->items[i]->obj, a->obj, Py_EQ);
        else
            return tracer_unsupported(f->t, false, "'in' over values that are not constants");
    }
    return r;
}

/* f-string part: format(conv(v), spec) of constants, conv 0 (none), 1
   (str), 2 (repr) or 3 (ascii).  NULL when tracing stops. */
Value *tr_format_value(TFrame *f, Value *v, Value *spec, int conv_kind)
{
    if (v->kind == V_TENSOR && (spec == NULL || foldable(spec)) && conv_kind == 0 && !f->t->reason) {
        f->t->stop_formats = true;      /* a value shown, not one the code's shape needs */
        return tracer_break(f->t, STOP_ESCAPE, "data escape: f-string of a %s value",
                            tensorlib_is_tensor(v->obj) ? "tensor" : "dynamic number"), NULL;
    }
    if (!foldable(v) || (spec && !foldable(spec)))
        return tracer_unsupported(f->t, false, "f-string of a value that is not a constant"), NULL;
    PyObject *conv = NULL;
    switch (conv_kind) {
    case 1: conv = PyObject_Str(v->obj); break;
    case 2: conv = PyObject_Repr(v->obj); break;
    case 3: conv = PyObject_ASCII(v->obj); break;
    default: conv = Py_NewRef(v->obj); break;
    }
    PyObject *s = conv ? PyObject_Format(conv, spec ? spec->obj : NULL) : NULL;
    Py_XDECREF(conv);
    return new_const(f->t, s);
}

/* The n constant strings parts[0..n) as a new tuple, or NULL when tracing
   stops (a part is not a constant str) or on an error. */
PyObject *tr_string_parts(TFrame *f, Value **parts, int n)
{
    PyObject *tup = PyTuple_New(n);
    if (tup == NULL)
        return NULL;
    for (int i = 0; i < n; i++) {
        Value *p = parts[i];
        if (p->kind != V_CONST || !PyUnicode_CheckExact(p->obj)) {
            Py_DECREF(tup);
            return tracer_unsupported(f->t, true, "BUILD_STRING of a non-string"), NULL;
        }
        PyTuple_SET_ITEM(tup, i, Py_NewRef(p->obj));
    }
    return tup;
}
