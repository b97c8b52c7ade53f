/*
 * guard_build.c -- making guard sets: adding accessors and guards (with the
 * checks of their arguments), keeping `order` and `requires` consistent as
 * guards arrive, and a set's lifetime.  Contract and the invariants it
 * keeps: guards.h (guardset_invariants asserts them after every change in
 * debug builds).  Runs on misses only (the translator, values.c).
 */
#include "guards_int.h"
#include "../base/tensorlib.h"

#include <string.h>

/* ------------------------------------------------------------------ */
/* Set lifetime.                                                       */

void
guardset_init(GuardSet *gs)
{
    memset(gs, 0, sizeof *gs);
    gs->last_root = -1;
    gs->last_unrooted = -1;
}

/*
 * Release everything.  The set is emptied before any reference is dropped,
 * so a finalizer that runs meanwhile sees an empty, valid set.
 */
void
guardset_clear(GuardSet *gs)
{
    GuardSet old = *gs;

    guardset_init(gs);
    for (int i = 0; i < old.nacc; i++) {
        Py_XDECREF(old.acc[i].key);
        Py_XDECREF(old.acc[i].name);
    }
    for (int i = 0; i < old.n; i++) {
        if (old.guards[i].weak != NULL)
            Py_DECREF(old.guards[i].weak);
        else
            Py_XDECREF(old.guards[i].expected);
        guard_tensor_meta_free(old.guards[i].tensor);
    }
    PyMem_Free(old.acc);
    PyMem_Free(old.guards);
    PyMem_Free(old.order);
    PyMem_Free(old.group);
    Py_XDECREF(old.group_check);
    Py_XDECREF(old.sites);
}

/* Room for one more item in an array of *cap items of `size` bytes.
   0, or -1 with MemoryError (the array is unchanged). */
static int
grow(void **items, int *cap, int used, size_t size)
{
    int ncap;
    void *p;

    if (used < *cap)
        return 0;
    if (*cap > INT_MAX / 2 - 8) {
        PyErr_NoMemory();
        return -1;
    }
    ncap = *cap ? *cap * 2 : 8;
    p = PyMem_Realloc(*items, (size_t)ncap * size);
    if (p == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    *items = p;
    *cap = ncap;
    return 0;
}

#ifndef NDEBUG
/* The invariants of guards.h.  For ENGINE_ASSERT; quadratic, and
   allocation-free so that it never changes what it checks. */
bool
guardset_invariants(const GuardSet *gs)
{
    for (int i = 0; i < gs->nacc; i++)
        if (gs->acc[i].base >= i)
            return false;
    for (int p = 0; p < gs->n; p++) {
        int g = gs->order[p], r, q;
        if (g < 0 || g >= gs->n)
            return false;
        for (q = 0; q < p; q++)
            if (gs->order[q] == g)
                return false;       /* not a permutation */
        if ((r = gs->guards[g].requires) < 0)
            continue;
        for (q = 0; q < p && gs->order[q] != r; q++)
            ;
        if (q == p)
            return false;           /* requirement not before it */
    }
    return true;
}
#endif

/* ------------------------------------------------------------------ */
/* Accessors.                                                          */

static inline bool
acc_is_root(AccessorKind k)
{
    return k == ACC_LOCAL || k == ACC_GLOBAL || k == ACC_BUILTIN
        || k == ACC_CLOSURE || k == ACC_STACK || k == ACC_GLOBALS || k == ACC_MODULE;
}

static inline bool
acc_uses_index(AccessorKind k)
{
    return k == ACC_LOCAL || k == ACC_CLOSURE || k == ACC_STACK || k == ACC_ITEM;
}

/* Check the arguments of guardset_accessor.  0, or -1 with an exception. */
static int
accessor_validate(const GuardSet *gs, AccessorKind kind, int base,
                  Py_ssize_t index, PyObject *key, PyObject *name)
{
    int depth = 0;

    if ((unsigned)kind > ACC_SET_ORDER) {
        PyErr_Format(PyExc_ValueError, "bad accessor kind %d", (int)kind);
        return -1;
    }
    if (acc_is_root(kind) ? base != -1 : (base < 0 || base >= gs->nacc)) {
        PyErr_Format(PyExc_ValueError, "bad base %d for accessor kind %d",
                     base, (int)kind);
        return -1;
    }
    for (int b = base; b >= 0; b = gs->acc[b].base)
        if (++depth >= MAX_ACCESSOR_DEPTH) {
            PyErr_SetString(PyExc_ValueError, "accessor chain too deep");
            return -1;
        }
    if (kind != ACC_ITEM && acc_uses_index(kind) && index < 0) {
        PyErr_Format(PyExc_ValueError, "negative slot %zd", index);
        return -1;
    }
    if ((kind == ACC_GLOBAL || kind == ACC_BUILTIN || kind == ACC_ATTR || kind == ACC_MODULE
         || kind == ACC_OBJATTR)
        && (key == NULL || !PyUnicode_CheckExact(key))) {
        PyErr_SetString(PyExc_TypeError, "accessor key must be a str");
        return -1;
    }
    if (kind == ACC_DICT_ITEM && (key == NULL || !(guard_const_is_simple(key, 0)
                                                   || guard_key_is_identity(key)))) {
        PyErr_SetString(PyExc_TypeError,
                        "dict item key must be a str, int, float, bool, bytes, "
                        "complex, None, a tuple of these, or an object compared by identity");
        return -1;
    }
    if (name != NULL && name != Py_None && !PyUnicode_Check(name)) {
        PyErr_SetString(PyExc_TypeError, "accessor name must be a str");
        return -1;
    }
    return 0;
}

static int accessor_made(GuardSet *gs, AccessorKind kind, int base, Py_ssize_t index,
                         PyObject *key, PyObject *name);

/* The two builders, timed: a compile's guard phase (GuardSet.build_ticks). */
int
guardset_accessor(GuardSet *gs, AccessorKind kind, int base,
                  Py_ssize_t index, PyObject *key, PyObject *name)
{
    uint64_t t0 = engine_phase_ticks();
    int r = accessor_made(gs, kind, base, index, key, name);
    gs->build_ticks += engine_phase_ticks() - t0;
    return r;
}

static int guard_made(GuardSet *gs, GuardKind kind, int acc, PyObject *expected,
                      Py_ssize_t length);

int
guardset_add(GuardSet *gs, GuardKind kind, int acc, PyObject *expected,
             Py_ssize_t length)
{
    uint64_t t0 = engine_phase_ticks();
    int r = guard_made(gs, kind, acc, expected, length);
    gs->build_ticks += engine_phase_ticks() - t0;
    return r;
}

static int
accessor_made(GuardSet *gs, AccessorKind kind, int base,
              Py_ssize_t index, PyObject *key, PyObject *name)
{
    Accessor *a;

    if (accessor_validate(gs, kind, base, index, key, name) < 0)
        return -1;
    if (!acc_uses_index(kind))
        index = 0;
    if (kind != ACC_GLOBAL && kind != ACC_BUILTIN && kind != ACC_ATTR
        && kind != ACC_DICT_ITEM && kind != ACC_MODULE && kind != ACC_OBJATTR)
        key = NULL;
    if ((kind != ACC_LOCAL && kind != ACC_CLOSURE) || name == Py_None)
        name = NULL;

    for (int i = base < 0 ? gs->last_root : gs->acc[base].last_child; i >= 0;
         i = gs->acc[i].prev_sibling) {
        a = &gs->acc[i];
        if (a->kind != kind || a->base != base || a->index != index)
            continue;
        if (key != NULL ? a->key == NULL || !guard_const_equal(key, a->key) : a->key != NULL)
            continue;
        if (a->name == NULL && name != NULL)
            a->name = Py_NewRef(name);
        return i;
    }

    if (grow((void **)&gs->acc, &gs->acc_cap, gs->nacc, sizeof(Accessor)) < 0)
        return -1;
    a = &gs->acc[gs->nacc];
    a->kind = kind;
    a->base = base;
    a->index = index;
    a->key = Py_XNewRef(key);
    a->name = Py_XNewRef(name);
    a->seen_version = 0;
    a->seen_value = NULL;
    a->attr_type_version = a->attr_type_refused = 0;
    a->last_child = -1;
    a->last_guard = -1;
    a->uncached = kind == ACC_DICT_ITEM
                  && (gs->acc[base].kind == ACC_ATTR || gs->acc[base].kind == ACC_OBJATTR)
                  && PyUnicode_CompareWithASCIIString(gs->acc[base].key, "__dict__") == 0;
    if (base < 0) {
        a->prev_sibling = gs->last_root;
        gs->last_root = gs->nacc;
    }
    else {
        a->prev_sibling = gs->acc[base].last_child;
        gs->acc[base].last_child = gs->nacc;
    }
    return gs->nacc++;
}

/* ------------------------------------------------------------------ */
/* Guards.                                                             */

/* Guards that pin down what an accessor's value is, so that accessors built
   on it (attributes, items) only run on a value of the expected kind. */
static inline bool
kind_is_structural(GuardKind k)
{
    return k == GUARD_TYPE_MATCH || k == GUARD_ID_MATCH || k == GUARD_TENSOR_MATCH
        || k == GUARD_LIST_LENGTH || k == GUARD_TUPLE_LENGTH || k == GUARD_DICT_KEYS;
}

/* Guards on global state rather than on a value: no accessor (-1). */
static inline bool
kind_is_global(GuardKind k)
{
    return k == GUARD_BACKEND_MATCH || k == GUARD_GRAD_MODE || k == GUARD_STATE_QUERY;
}

/* The first structural guard on the nearest strict ancestor of acc that has
   one, or -1.  Cannot fail. */
static int
nearest_requirement(const GuardSet *gs, int acc)
{
    for (int a = gs->acc[acc].base; a >= 0; a = gs->acc[a].base) {
        int first = -1;          /* the oldest structural guard on a */
        for (int g = gs->acc[a].last_guard; g >= 0; g = gs->guards[g].prev_on_acc)
            if (kind_is_structural(gs->guards[g].kind))
                first = g;
        if (first >= 0)
            return first;
    }
    return -1;
}

/* GUARD_SIZES_HOLD's expected (guards.h): an exact tuple of exact ints,
   (c, op, then (acc, dim, k) triples naming accessors of the set, dim -1
   for an int's value), at least one triple, the last with k != 0.  Cannot
   fail. */
static bool
sizes_relation_is_valid(const GuardSet *gs, PyObject *e)
{
    if (!PyTuple_CheckExact(e) || PyTuple_GET_SIZE(e) < 5 || (PyTuple_GET_SIZE(e) - 2) % 3 != 0)
        return false;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(e); i++)
        if (!PyLong_CheckExact(PyTuple_GET_ITEM(e, i)))
            return false;
    long op = PyLong_AsLong(PyTuple_GET_ITEM(e, 1));
    bool ok = op >= 0 && op <= 5;
    for (Py_ssize_t i = 2; ok && i < PyTuple_GET_SIZE(e); i += 3) {
        long acc = PyLong_AsLong(PyTuple_GET_ITEM(e, i));
        long dim = PyLong_AsLong(PyTuple_GET_ITEM(e, i + 1));
        ok = acc >= 0 && acc < gs->nacc && dim >= -1 && dim < 64;
    }
    ok = ok && PyLong_AsLongLong(PyTuple_GET_ITEM(e, PyTuple_GET_SIZE(e) - 1)) != 0;
    PyErr_Clear();
    return ok;
}

/*
 * Check the arguments of guardset_add and normalize them into *g (kind,
 * acc, borrowed expected, length).  0, or -1 with TypeError / ValueError.
 */
static int
guard_validate(const GuardSet *gs, Guard *g, PyObject *expected, Py_ssize_t length)
{
    const char *name = guard_kind_name(g->kind);

    if ((unsigned)g->kind >= GUARD__COUNT) {
        PyErr_Format(PyExc_ValueError, "bad guard kind %d", (int)g->kind);
        return -1;
    }
    if (kind_is_global(g->kind) ? g->acc != -1 : (g->acc < 0 || g->acc >= gs->nacc)) {
        PyErr_Format(PyExc_ValueError, "%s: bad accessor %d", name, g->acc);
        return -1;
    }
    g->expected = NULL;
    g->length = 0;
    switch (g->kind) {
    case GUARD_TYPE_MATCH:
        if (expected == NULL || !PyType_Check(expected))
            goto out_type;
        break;
    case GUARD_ID_MATCH:
    case GUARD_BACKEND_MATCH:
    case GUARD_TENSOR_MATCH:        /* checked by guard_tensor_meta_new */
        if (expected == NULL)
            goto out_type;
        break;
    case GUARD_EQUALS_MATCH:
        if (expected == NULL || !guard_const_is_simple(expected, 0)) {
            PyErr_Format(PyExc_TypeError,
                         "EQUALS_MATCH needs an int, float, bool, str, bytes, "
                         "complex, None or a tuple or set of these, not %.100s",
                         expected ? Py_TYPE(expected)->tp_name : "NULL");
            return -1;
        }
        break;
    case GUARD_LIST_LENGTH:
    case GUARD_TUPLE_LENGTH:
        if (length < 0) {
            PyErr_Format(PyExc_ValueError, "%s: negative length", name);
            return -1;
        }
        g->length = length;
        return 0;
    case GUARD_DICT_KEYS:
        if (expected == NULL || !PyTuple_CheckExact(expected))
            goto out_type;
        g->length = length != 0;         /* 1: of a dict subclass instance */
        break;
    case GUARD_HASATTR:
        if (expected == NULL || !PyUnicode_CheckExact(expected))
            goto out_type;
        g->length = length != 0;
        break;
    case GUARD_CLASS_LACKS:
        if (expected == NULL || !PyUnicode_CheckExact(expected))
            goto out_type;
        g->length = 0;
        break;
    case GUARD_CODE_MATCH:
        if (expected == NULL || !PyCode_Check(expected))
            goto out_type;
        break;
    case GUARD_NOT_NONE:
    case GUARD_DICT_EMPTY:
        return 0;
    case GUARD_SAME_AS:
    case GUARD_NOT_SAME_AS:
        if (expected != NULL || length < 0 || length >= g->acc) {
            PyErr_Format(PyExc_ValueError, "SAME_AS: bad other accessor %zd", length);
            return -1;
        }
        g->length = length;
        return 0;
    case GUARD_GRAD_MODE:
        if (expected != Py_True && expected != Py_False)
            goto out_type;
        if (tensorlib_torch_ready() <= 0) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "GRAD_MODE: torch is not imported");
            return -1;
        }
        break;
    case GUARD_STATE_QUERY:
        if (expected == NULL || !PyTuple_CheckExact(expected) || PyTuple_GET_SIZE(expected) != 3
            || !PyCFunction_Check(PyTuple_GET_ITEM(expected, 0))
            || !PyTuple_CheckExact(PyTuple_GET_ITEM(expected, 1)))
            goto out_type;
        break;
    case GUARD_DICT_LACKS:
        /* a simple constant (a name), or a key hashed and compared by
           identity, in C (held weakly when it can be): copyreg's
           dispatch_table's classes, typing forms */
        if (expected == NULL || !(guard_const_is_simple(expected, 0) || guard_key_is_identity(expected)))
            goto out_type;
        break;
    case GUARD_SIZES_HOLD:
        if (expected == NULL || !sizes_relation_is_valid(gs, expected))
            goto out_type;
        break;
    case GUARD__COUNT:
        break;
    }
    g->expected = g->kind == GUARD_TENSOR_MATCH ? NULL : expected;
    return 0;

out_type:
    PyErr_Format(PyExc_TypeError, "%s: bad expected value (%.100s)", name,
                 expected ? Py_TYPE(expected)->tp_name : "NULL");
    return -1;
}

/* Whether existing guard e is the guard g (with metadata tm) would be. */
static bool
guard_same(const Guard *e, const Guard *g, const TensorMeta *tm)
{
    if (e->kind != g->kind || e->acc != g->acc || e->length != g->length)
        return false;
    switch (g->kind) {
    case GUARD_EQUALS_MATCH:
    case GUARD_DICT_KEYS:
    case GUARD_HASATTR:
    case GUARD_CLASS_LACKS:
    case GUARD_DICT_LACKS:
    case GUARD_SIZES_HOLD:
        return guard_const_equal(e->expected, g->expected);
    case GUARD_STATE_QUERY:
        return PyObject_RichCompareBool(e->expected, g->expected, Py_EQ) == 1 || (PyErr_Clear(), false);
    case GUARD_TENSOR_MATCH:
        return guard_tensor_meta_equal(e->tensor, tm);
    default:
        return e->expected == g->expected;
    }
}

/*
 * A structural guard gi was just added as the first on its accessor: guards
 * on descendant accessors that now find it nearest require it.  Returns the
 * order position gi must take: before the first of them, else at the end.
 */
static void
adopt_in_subtree(GuardSet *gs, int gi, int acc, int *pos)
{
    for (int c = gs->acc[acc].last_child; c >= 0; c = gs->acc[c].prev_sibling) {
        bool adopts = gs->acc[c].last_guard >= 0 && nearest_requirement(gs, c) == gi;
        for (int h = gs->acc[c].last_guard; adopts && h >= 0; h = gs->guards[h].prev_on_acc) {
            if (h >= gi)
                continue;
            gs->guards[h].requires = gi;
            int p = guard_order_position(gs, h, gi);
            if (p >= 0 && p < *pos)
                *pos = p;
        }
        adopt_in_subtree(gs, gi, c, pos);
    }
}

/* (the descendants walked through the accessors built on acc, so that the
   cost is the subtree's, not the set's) */
static int
adopt_dependents(GuardSet *gs, int gi)
{
    int pos = gi;

    adopt_in_subtree(gs, gi, gs->guards[gi].acc, &pos);
    return pos;
}

/* Store guard *gp (validated, not a duplicate) with its tensor metadata
   tm (taken); expected_owned: gp->expected is a reference of ours to hand
   over (else one is taken, or a weak one).  Its index, or -1. */
static int
add_guard(GuardSet *gs, Guard *gp, TensorMeta *tm, bool expected_owned)
{
    Guard g = *gp;
    GuardKind kind = g.kind;
    int acc = g.acc, gi, pos, cap;
    bool first_structural;

    cap = gs->cap;
    if (grow((void **)&gs->guards, &cap, gs->n, sizeof(Guard)) < 0)
        goto out_free_meta;
    if (cap != gs->cap) {
        int *order = PyMem_Realloc(gs->order, (size_t)cap * sizeof(int));
        if (order == NULL) {
            PyErr_NoMemory();
            goto out_free_meta;     /* guards grew, cap did not: harmless */
        }
        gs->order = order;
        gs->cap = cap;
    }

    first_structural = kind_is_structural(kind);
    for (int i = acc >= 0 ? gs->acc[acc].last_guard : -1; i >= 0 && first_structural;
         i = gs->guards[i].prev_on_acc)
        if (kind_is_structural(gs->guards[i].kind))
            first_structural = false;

    g.weak = NULL;
    if ((kind == GUARD_TYPE_MATCH || kind == GUARD_ID_MATCH
         || (kind == GUARD_DICT_LACKS && !PyUnicode_CheckExact(g.expected)))
        && PyType_SUPPORTS_WEAKREFS(Py_TYPE(g.expected))) {
        if ((g.weak = PyWeakref_NewRef(g.expected, NULL)) == NULL)
            goto out_free_meta;
    }
    else if (!expected_owned) {
        g.expected = Py_XNewRef(g.expected);
    }
    expected_owned = false;      /* g holds it now */
    g.tensor = tm;
    g.requires = acc >= 0 ? nearest_requirement(gs, acc) : -1;
    g.site = gs->current_site != NULL && kind != GUARD_BACKEND_MATCH   /* the engine's own */
             ? gs->current_site(gs, gs->site_ctx) : -1;
    gi = gs->n++;
    if (acc >= 0) {
        g.prev_on_acc = gs->acc[acc].last_guard;
        gs->acc[acc].last_guard = gi;
    }
    else {
        g.prev_on_acc = gs->last_unrooted;
        gs->last_unrooted = gi;
    }
    gs->guards[gi] = g;

    pos = first_structural && acc >= 0 ? adopt_dependents(gs, gi) : gi;
    memmove(&gs->order[pos + 1], &gs->order[pos], (size_t)(gi - pos) * sizeof(int));
    gs->order[pos] = gi;
    gs->simple = SIMPLE_UNKNOWN;          /* decided again at the next check */
    /* quadratic: checked at sizes 1, 2, 4 .. 256 (a broken order stays
       broken, so the next check finds it), which keeps building a set of n
       guards O(n^2) in all, not O(n^3): it was 5% of --capture-all's time */
    ENGINE_ASSERT((gs->n & (gs->n - 1)) != 0 || gs->n > 256 || guardset_invariants(gs));
    return gi;

out_free_meta:
    guard_tensor_meta_free(tm);
    if (expected_owned)
        Py_DECREF(g.expected);
    return -1;
}

static int
guard_made(GuardSet *gs, GuardKind kind, int acc, PyObject *expected,
           Py_ssize_t length)
{
    Guard g = {.kind = kind, .acc = acc, .requires = -1};
    TensorMeta *tm = NULL;

    if (guard_validate(gs, &g, expected, length) < 0)
        return -1;
    if (kind == GUARD_TENSOR_MATCH
        && (tm = guard_tensor_meta_new_dynamic(expected, (uint32_t)length)) == NULL)
        return -1;
    for (int i = acc >= 0 ? gs->acc[acc].last_guard : gs->last_unrooted; i >= 0;
         i = gs->guards[i].prev_on_acc)
        if (guard_same(&gs->guards[i], &g, tm)) {
            guard_tensor_meta_free(tm);
            return i;
        }

    return add_guard(gs, &g, tm, false);
}
