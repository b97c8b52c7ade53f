/*
 * guards.c -- the cache-hit path of guard sets: reaching each accessor's
 * value from a frame, checking the guards fail-fast in their adaptive order,
 * and the constants those checks compare.  Contract and the invariants of a
 * GuardSet: guards.h; design: ../shared/DESIGN.md section 3.3.  Making sets
 * is guard_build.c, tensor metadata guard_tensor.c, text guard_render.c.
 *
 * guardset_check runs on every cache hit, so the value and check paths do
 * not allocate (but for sets of more than ORDER_ON_STACK guards) and call
 * into Python only where the accessor or check is itself a Python operation
 * (an attribute, HASATTR, a globals mapping that is not a dict, a torch
 * tensor's metadata, GRAD_MODE's torch.is_grad_enabled).  A failure is
 * rendered to text (guard_render.c) only when the caller asks for it.
 * All of it runs under the GIL.
 */
#include "guards_int.h"
#include "../base/pycompat.h"
#include "../base/tensorlib.h"

#include <math.h>
#include <string.h>

#define MAX_CONST_DEPTH 32          /* nesting of EQUALS_MATCH tuples */
#define ORDER_ON_STACK 64           /* guards whose order is copied without malloc */

/* ------------------------------------------------------------------ */
/* Constants compared without calling Python code.                     */

/* A torch.Size: a tuple of ints with no state of its own, compared as
   the tuple of its items (its exact type checked apart). */
static inline bool
is_torch_size(PyObject *o)
{
    return PyTuple_Check(o) && !PyTuple_CheckExact(o) && tensorlib_is_torch_constant(o);
}

/*
 * Whether o is None, or an exact bool, int, float, complex, str or bytes, or
 * an exact tuple (or a torch.Size), set or frozenset of these nested at most
 * MAX_CONST_DEPTH deep.  These are
 * the values EQUALS_MATCH and dict-item accessors accept: their hash and
 * comparison are implemented in C by the interpreter.  Cannot fail.
 */
bool
guard_const_is_simple(PyObject *o, int depth)
{
    PyTypeObject *t = Py_TYPE(o);

    if (o == Py_None || t == &PyBool_Type || t == &PyLong_Type
        || t == &PyFloat_Type || t == &PyComplex_Type
        || t == &PyUnicode_Type || t == &PyBytes_Type)
        return true;
    if ((t == &PySet_Type || t == &PyFrozenSet_Type) && depth < MAX_CONST_DEPTH) {
        /* (iterating a set of these runs no Python code) */
        PyObject *it = PyObject_GetIter(o), *key;
        bool simple = it != NULL;
        while (simple && (key = PyIter_Next(it)) != NULL) {
            simple = guard_const_is_simple(key, depth + 1);
            Py_DECREF(key);
        }
        Py_XDECREF(it);
        PyErr_Clear();
        return simple;
    }
    if ((t != &PyTuple_Type && !is_torch_size(o)) || depth >= MAX_CONST_DEPTH)
        return false;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(o); i++)
        if (!guard_const_is_simple(PyTuple_GET_ITEM(o, i), depth + 1))
            return false;
    return true;
}

bool
guard_key_is_identity(PyObject *o)
{
    PyTypeObject *t = Py_TYPE(o);

    return t->tp_hash == PyBaseObject_Type.tp_hash
           && (PyType_Check(o) || t->tp_richcompare == PyBaseObject_Type.tp_richcompare);
}

/* Floats are the same value when equal with the same sign, or both NaN:
   a capture specialized on 0.0 may differ for -0.0 (1/x, copysign). */
static inline bool
float_same(double a, double b)
{
    if (a == b)
        return signbit(a) == signbit(b);
    return isnan(a) && isnan(b);
}

/*
 * Whether a and b are the same constant: identical, or of the same exact
 * simple type (see guard_const_is_simple) and equal, tuples item by item.
 * Other objects compare by identity only.  Never calls Python code, never
 * leaves an exception set; recursion follows b, so its depth is bounded by
 * b's.
 */
bool
guard_const_equal(PyObject *a, PyObject *b)
{
    PyTypeObject *t = Py_TYPE(b);

    if (a == b)
        return true;
    if (Py_TYPE(a) != t)
        return false;
    if (t == &PyFloat_Type)
        return float_same(PyFloat_AS_DOUBLE(a), PyFloat_AS_DOUBLE(b));
    if (t == &PyComplex_Type)
        return float_same(PyComplex_RealAsDouble(a), PyComplex_RealAsDouble(b))
            && float_same(PyComplex_ImagAsDouble(a), PyComplex_ImagAsDouble(b));
    if (t == &PyLong_Type || t == &PyUnicode_Type || t == &PyBytes_Type) {
        int r = PyObject_RichCompareBool(a, b, Py_EQ);
        if (r < 0) {            /* cannot happen for these types */
            PyErr_Clear();
            return false;
        }
        return r == 1;
    }
    if (t == &PyTuple_Type || is_torch_size(b)) {
        Py_ssize_t n = PyTuple_GET_SIZE(b);
        if (PyTuple_GET_SIZE(a) != n)
            return false;
        for (Py_ssize_t i = 0; i < n; i++)
            if (!guard_const_equal(PyTuple_GET_ITEM(a, i), PyTuple_GET_ITEM(b, i)))
                return false;
        return true;
    }
    if (t == &PySet_Type || t == &PyFrozenSet_Type) {
        /* a set of plain constants (tr_contains): the same members */
        if (PySet_GET_SIZE(a) != PySet_GET_SIZE(b))
            return false;
        PyObject *it = PyObject_GetIter(b), *key;
        bool same = it != NULL;
        while (same && (key = PyIter_Next(it)) != NULL) {
            same = PySet_Contains(a, key) == 1;
            Py_DECREF(key);
        }
        Py_XDECREF(it);
        PyErr_Clear();
        return same;
    }
    return false;               /* None, bool: identity was the test */
}

/* ------------------------------------------------------------------ */
/* Accessor values.                                                    */

/*
 * mapping[key] for the globals / builtins of a frame: new reference, or NULL
 * without an exception when absent.  An exact dict is read directly (the
 * fast path); anything else as LOAD_GLOBAL reads it, with PyObject_GetItem.
 */
static PyObject *
namespace_lookup_ref(PyObject *ns, PyObject *key)
{
    PyObject *v;

    if (ns == NULL)
        return NULL;
    if (PyDict_CheckExact(ns)) {
        v = PyDict_GetItemWithError(ns, key);
        if (v != NULL)
            return Py_NewRef(v);
    }
    else {
        v = PyObject_GetItem(ns, key);
        if (v != NULL)
            return v;
    }
    if (PyErr_Occurred())
        PyErr_Clear();
    return NULL;
}

/*
 * d[key] for exact dict d, through accessor a's version cache: when d's
 * version is the one a saw, the value a saw (d unchanged still holds it);
 * else a lookup, remembered.  New reference, or NULL without an exception
 * when absent (an absent key is not remembered).
 */
static PyObject *
seen_in_dict(const Accessor *a, PyObject *d, PyObject *key)
{
    Accessor *cache = (Accessor *)a;       /* its version cache only (guards.h) */
    uint64_t version = dict_version(d);

    if (version != 0 && version == a->seen_version)
        return Py_NewRef(a->seen_value);
    PyObject *v = PyDict_GetItemWithError(d, key);
    if (v == NULL) {
        PyErr_Clear();
        return NULL;
    }
    cache->seen_version = version;
    cache->seen_value = v;
    return Py_NewRef(v);
}

/* base.<a->key> read from base's instance __dict__ when a->attr_type_version
   says that is what getattr reads for base's type (guards.h): new reference,
   or NULL without an exception (not known for this type, or not in the
   dict: the caller asks getattr). */
static PyObject *
attr_from_instance_dict(const Accessor *a, PyObject *base)
{
    unsigned int tag = a->attr_type_version;
    if (tag == 0 || type_version(Py_TYPE(base)) != tag)
        return NULL;
    PyObject *d = instance_dict_made(base);                     /* borrowed */
    PyObject *v = d != NULL && PyDict_CheckExact(d) ? PyDict_GetItemWithError(d, a->key) : NULL;
    if (v == NULL) {
        PyErr_Clear();
        return NULL;
    }
    return Py_NewRef(v);
}

/* After getattr read v as base.<a->key>: remember base's type in
   a->attr_type_version when getattr's answer is its instance dict's for
   every object of that type -- a type defined in Python (or using the
   generic getattr) whose __getattribute__ is object's, no class in whose
   MRO has the name (no descriptor, no class attribute), and v in the
   instance dict.  A type's __getattr__ runs only when that lookup fails,
   so it does not matter.  Never leaves an exception set. */
static void
note_instance_attr(const Accessor *a, PyObject *base, PyObject *v)
{
    static PyObject *getattribute_name, *object_getattribute;    /* process-wide */
    PyTypeObject *tp = Py_TYPE(base);
    unsigned int tag = type_version(tp);
    Accessor *cache = (Accessor *)a;                /* its caches only (guards.h) */

    if (tag == 0 || tag == a->attr_type_version || tag == a->attr_type_refused)
        return;
    cache->attr_type_refused = tag;                 /* until it qualifies, below */
    if (!(tp->tp_getattro == PyObject_GenericGetAttr || PyType_HasFeature(tp, Py_TPFLAGS_HEAPTYPE)))
        return;
    if (getattribute_name == NULL) {
        getattribute_name = PyUnicode_InternFromString("__getattribute__");
        if (getattribute_name == NULL) {
            PyErr_Clear();
            return;
        }
        object_getattribute = _PyType_Lookup(&PyBaseObject_Type, getattribute_name);  /* borrowed: object's, kept */
    }
    if (object_getattribute == NULL || _PyType_Lookup(tp, getattribute_name) != object_getattribute
        || _PyType_Lookup(tp, a->key) != NULL || type_version(tp) != tag) {
        PyErr_Clear();
        return;
    }
    PyObject *d = instance_dict_made(base);                     /* borrowed */
    if (d != NULL && PyDict_CheckExact(d) && PyDict_GetItemWithError(d, a->key) == v) {
        cache->attr_type_version = tag;
        cache->attr_type_refused = 0;
    }
    PyErr_Clear();
}

/* A __dunder__ name: a module's type may answer it before the module's dict
   (__class__, __dict__), so it is read by getattr. */
static bool
is_dunder(PyObject *name)
{
    Py_ssize_t n = PyUnicode_Check(name) ? PyUnicode_GET_LENGTH(name) : 0;
    return n >= 4 && PyUnicode_READ_CHAR(name, 0) == '_' && PyUnicode_READ_CHAR(name, 1) == '_'
           && PyUnicode_READ_CHAR(name, n - 1) == '_' && PyUnicode_READ_CHAR(name, n - 2) == '_';
}

/* base[index] for an exact list or tuple, negative from the end: borrowed,
   or NULL (no exception) for another type or an index out of range. */
static inline PyObject *
sequence_item(PyObject *base, Py_ssize_t i)
{
    Py_ssize_t n;

    if (PyList_CheckExact(base)) {
        n = PyList_GET_SIZE(base);
        if (i < 0)
            i += n;
        return i >= 0 && i < n ? PyList_GET_ITEM(base, i) : NULL;
    }
    if (PyTuple_CheckExact(base)) {
        n = PyTuple_GET_SIZE(base);
        if (i < 0)
            i += n;
        return i >= 0 && i < n ? PyTuple_GET_ITEM(base, i) : NULL;
    }
    return NULL;
}

static PyObject *value_compute(const GuardSet *gs, int acc,
                               const FrameView *fv, PyObject **vals);

/* vals[acc], computed if needed.  Borrowed or NULL (unreachable, no exception).
   A fast local is borrowed from the frame (or the call's arguments), which
   outlive the check and the plan: not stored, nothing to release. */
static inline PyObject *
value_of(const GuardSet *gs, int acc, const FrameView *fv, PyObject **vals)
{
    PyObject *v = vals[acc];
    const Accessor *a = &gs->acc[acc];

    if (v != NULL)
        return v;
    if (a->kind == ACC_LOCAL)
        return a->index < fv->nlocals ? fv->locals[a->index] : NULL;
    return value_compute(gs, acc, fv, vals);
}

/*
 * Compute accessor i into vals[i] (strong).  Borrowed result, or NULL when
 * unreachable; every exception raised on the way is cleared.
 * Precondition: vals[i] == NULL.
 */
static PyObject *
value_compute(const GuardSet *gs, int i, const FrameView *fv, PyObject **vals)
{
    const Accessor *a = &gs->acc[i];
    PyObject *base = NULL, *v = NULL;     /* v: borrowed until stored */

    ENGINE_ASSERT(vals[i] == NULL);
    if (a->base >= 0 && (base = value_of(gs, a->base, fv, vals)) == NULL)
        return NULL;

    switch (a->kind) {
    case ACC_LOCAL:
        if (a->index < fv->nlocals)
            v = fv->locals[a->index];
        break;
    case ACC_STACK:
        if (a->index < fv->nstack)
            v = fv->stack[a->index];
        break;
    case ACC_CLOSURE:
        if (fv->closure != NULL && a->index < PyTuple_GET_SIZE(fv->closure)) {
            PyObject *cell = PyTuple_GET_ITEM(fv->closure, a->index);
            if (PyCell_Check(cell))
                v = PyCell_GET(cell);
        }
        break;
    case ACC_GLOBALS:
        v = fv->globals;
        break;
    case ACC_OBJATTR:
        v = PyObject_GenericGetAttr(base, a->key);
        if (v == NULL)
            PyErr_Clear();
        return vals[i] = v;                      /* already strong */
    case ACC_MODULE:
        v = PyImport_GetModule(a->key);          /* new reference, or NULL */
        if (v == NULL)
            PyErr_Clear();
        return vals[i] = v;                      /* already strong */
    case ACC_TYPE:
        v = (PyObject *)Py_TYPE(base);
        break;
    case ACC_CELL:
        if (PyCell_Check(base))
            v = PyCell_GET(base);
        break;
    case ACC_WEAKREF:
        if (!PyWeakref_CheckRefExact(base))
            return vals[i] = NULL;
        return vals[i] = weakref_referent_ref(base);   /* already strong */
    case ACC_SET_ORDER:
        if (!PySet_CheckExact(base) && !PyFrozenSet_CheckExact(base))
            return vals[i] = NULL;
        v = PySequence_Tuple(base);              /* new reference, or NULL */
        if (v == NULL)
            PyErr_Clear();
        return vals[i] = v;                      /* already strong */
    case ACC_ITEM:
        v = sequence_item(base, a->index);
        break;
    case ACC_DICT_ITEM:         /* (a module's _modules, _parameters, ...) */
        if (PyDict_CheckExact(base) && !a->uncached)
            return vals[i] = seen_in_dict(a, base, a->key);   /* already strong */
        if (PyDict_CheckExact(base)) {
            v = PyDict_GetItemWithError(base, a->key);
            if (v == NULL)
                PyErr_Clear();
            break;
        }
        if (PyDict_Check(base)) {
            /* a dict subclass read as dict.get reads it: its own storage,
               no __getitem__ of the subclass */
            v = PyDict_GetItemWithError(base, a->key);
            if (v == NULL)
                PyErr_Clear();
        }
        break;
    case ACC_GLOBAL:
    case ACC_BUILTIN: {
        PyObject *ns = a->kind == ACC_GLOBAL ? fv->globals : fv->builtins;
        if (ns != NULL && PyDict_CheckExact(ns))
            return vals[i] = seen_in_dict(a, ns, a->key);
        return vals[i] = namespace_lookup_ref(ns, a->key);   /* already strong */
    }
    case ACC_ATTR:
        if (PyModule_CheckExact(base) && !is_dunder(a->key)) {
            PyObject *md = PyModule_GetDict(base);              /* borrowed */
            if (md != NULL && PyDict_CheckExact(md) && (v = seen_in_dict(a, md, a->key)) != NULL)
                return vals[i] = v;
        }
        if ((v = attr_from_instance_dict(a, base)) != NULL)
            return vals[i] = v;                 /* already strong */
        v = PyObject_GetAttr(base, a->key);
        if (v == NULL)
            PyErr_Clear();
        else if (!PyModule_CheckExact(base))
            note_instance_attr(a, base, v);
        return vals[i] = v;                     /* already strong */
    }
    if (v == NULL)
        return NULL;
    vals[i] = Py_NewRef(v);
    return v;
}

PyObject *
guardset_value(const GuardSet *gs, int acc, const FrameView *fv, PyObject **vals)
{
    ENGINE_ASSERT(acc >= 0 && acc < gs->nacc);
    return value_of(gs, acc, fv, vals);
}

void
guardset_release_values(const GuardSet *gs, PyObject **vals)
{
    for (int i = 0; i < gs->nacc; i++)
        Py_CLEAR(vals[i]);
}

/* ------------------------------------------------------------------ */
/* Guards: checking (the cache-hit path).                              */

/* Whether obj has attribute name: 1 / 0; -1 (cleared) for other errors. */
int
guard_has_attr(PyObject *obj, PyObject *name)
{
    PyObject *v = PyObject_GetAttr(obj, name);

    if (v != NULL) {
        Py_DECREF(v);
        return 1;
    }
    if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
        PyErr_Clear();
        return 0;
    }
    PyErr_Clear();
    return -1;
}

static bool
dict_keys_match(PyObject *d, PyObject *keys, bool subclass)
{
    Py_ssize_t pos = 0, i = 0;
    PyObject *k, *v;

    if (!(subclass ? PyDict_Check(d) : PyDict_CheckExact(d))
        || PyDict_GET_SIZE(d) != PyTuple_GET_SIZE(keys))
        return false;
    if (!PyObject_TypeCheck(d, &PyODict_Type)) {
        while (PyDict_Next(d, &pos, &k, &v))
            if (!guard_const_equal(k, PyTuple_GET_ITEM(keys, i++)))
                return false;
        return true;
    }
    /* an OrderedDict's order is its own (move_to_end): its C iterator,
       never the subclass's __iter__ (no Python code in a guard) */
    PyObject *it = PyODict_Type.tp_iter(d);
    bool same = it != NULL;
    while (same && (k = PyIter_Next(it)) != NULL) {
        same = i < PyTuple_GET_SIZE(keys) && guard_const_equal(k, PyTuple_GET_ITEM(keys, i++));
        Py_DECREF(k);
    }
    Py_XDECREF(it);
    if (PyErr_Occurred()) {
        PyErr_Clear();           /* changed while iterated: not the same */
        return false;
    }
    return same && i == PyTuple_GET_SIZE(keys);
}

/* torch.is_grad_enabled() now: Py_True / Py_False (borrowed), or NULL (no
   exception) when it cannot be read. */
PyObject *
guard_grad_mode_now(void)
{
    PyObject *fn = tensorlib_grad_enabled_fn(), *r;     /* fn: borrowed */

    if (fn == NULL)
        return NULL;
    r = PyObject_CallNoArgs(fn);
    if (r == NULL) {
        PyErr_Clear();
        return NULL;
    }
    Py_DECREF(r);                   /* a bool singleton: stays alive */
    return r == Py_True || r == Py_False ? r : NULL;
}

static bool
grad_mode_matches(PyObject *expected)
{
    return guard_grad_mode_now() == expected;
}

/* GUARD_STATE_QUERY: fn(*args) gives result again.  Cannot fail. */
static bool
state_query_holds(PyObject *expected)
{
    PyObject *now = PyObject_Call(PyTuple_GET_ITEM(expected, 0), PyTuple_GET_ITEM(expected, 1), NULL);
    PyObject *want = PyTuple_GET_ITEM(expected, 2);
    bool same = now != NULL && (now == want || (Py_TYPE(now) == Py_TYPE(want)
                                                && guard_const_is_simple(want, 0)
                                                && guard_const_equal(now, want)));
    Py_XDECREF(now);
    PyErr_Clear();
    return same;
}

/* GUARD_SIZES_HOLD: whether the relation of sizes in expected holds
   (guards.h).  Cannot fail: a value that is no tensor fails it. */
static bool
sizes_hold(const GuardSet *gs, PyObject *expected, const FrameView *fv, PyObject **vals)
{
    Py_ssize_t n = PyTuple_GET_SIZE(expected);
    long long sum = PyLong_AsLongLong(PyTuple_GET_ITEM(expected, 0));
    long op = PyLong_AsLong(PyTuple_GET_ITEM(expected, 1));

    long long product = 1;               /* of a term's factors so far */
    for (Py_ssize_t i = 2; i + 2 < n; i += 3) {
        PyObject *v = value_of(gs, (int)PyLong_AsLong(PyTuple_GET_ITEM(expected, i)), fv, vals);
        int dim = (int)PyLong_AsLong(PyTuple_GET_ITEM(expected, i + 1));
        long long size;
        if (dim < 0) {                   /* an int's own value */
            int overflow = 0;
            size = v != NULL && PyLong_CheckExact(v) ? PyLong_AsLongLongAndOverflow(v, &overflow) : -1;
            if (v == NULL || !PyLong_CheckExact(v) || overflow != 0 || (size == -1 && PyErr_Occurred())) {
                PyErr_Clear();
                return false;
            }
        }
        else if (v == NULL || (size = guard_tensor_size(v, dim)) < 0) {
            return false;
        }
        if (__builtin_mul_overflow(product, size, &product))
            return false;
        long long k = PyLong_AsLongLong(PyTuple_GET_ITEM(expected, i + 2));
        if (k == 0)
            continue;                    /* a factor: the term goes on */
        sum += k * product;
        product = 1;
    }
    return guard_relation_holds((int)op, sum);
}

/* (contract: guards.h) */
bool
guard_relation_holds(int op, long long v)
{
    switch (op) {
    case 0: return v < 0;
    case 1: return v <= 0;
    case 2: return v == 0;
    case 3: return v != 0;
    case 4: return v > 0;
    default: return v >= 0;
    }
}

/* Whether guard g passes.  Cannot fail: an unreachable value fails it. */
static bool
guard_passes(const GuardSet *gs, const Guard *g, const FrameView *fv,
             PyObject **vals, PyObject *backend)
{
    PyObject *v;

    if (g->kind == GUARD_BACKEND_MATCH)
        return backend == g->expected;
    if (g->kind == GUARD_GRAD_MODE)
        return grad_mode_matches(g->expected);
    if (g->kind == GUARD_STATE_QUERY)
        return state_query_holds(g->expected);
    if (g->kind == GUARD_SIZES_HOLD)
        return sizes_hold(gs, g->expected, fv, vals);
    if ((v = value_of(gs, g->acc, fv, vals)) == NULL)
        return false;
    switch (g->kind) {
    case GUARD_TYPE_MATCH:
        /* (a live object's type is alive: a dead weak reference means
           another type now sits where the expected one was) */
        return Py_TYPE(v) == (PyTypeObject *)g->expected
               && (g->weak == NULL || weakref_points_to(g->weak, g->expected));
    case GUARD_ID_MATCH:
        return v == g->expected
               && (g->weak == NULL || weakref_points_to(g->weak, g->expected));
    case GUARD_EQUALS_MATCH:
        return Py_TYPE(v) == Py_TYPE(g->expected) && guard_const_equal(v, g->expected);
    case GUARD_TENSOR_MATCH:
        return guard_tensor_matches(g->tensor, v);
    case GUARD_LIST_LENGTH:
        return PyList_CheckExact(v) && PyList_GET_SIZE(v) == g->length;
    case GUARD_TUPLE_LENGTH:
        return PyTuple_CheckExact(v) && PyTuple_GET_SIZE(v) == g->length;
    case GUARD_DICT_KEYS:
        return dict_keys_match(v, g->expected, g->length != 0);
    case GUARD_HASATTR:
        return guard_has_attr(v, g->expected) == g->length;
    case GUARD_CODE_MATCH:
        return PyFunction_Check(v) && PyFunction_GET_CODE(v) == g->expected;
    case GUARD_NOT_NONE:
        return v != Py_None;
    case GUARD_SAME_AS:
        return v == value_of(gs, (int)g->length, fv, vals);
    case GUARD_NOT_SAME_AS:
        return v != value_of(gs, (int)g->length, fv, vals);
    case GUARD_DICT_LACKS:
        if (g->weak != NULL && !weakref_points_to(g->weak, g->expected))
            return PyDict_Check(v);       /* a class gone is in no dict */
        return PyDict_Check(v) && PyDict_GetItemWithError(v, g->expected) == NULL
               && !PyErr_Occurred();
    case GUARD_DICT_EMPTY:
        return PyDict_Check(v) && PyDict_GET_SIZE(v) == 0;
    case GUARD_CLASS_LACKS:
        return PyType_Check(v) && _PyType_Lookup((PyTypeObject *)v, g->expected) == NULL;
    case GUARD_BACKEND_MATCH:
    case GUARD_GRAD_MODE:
    case GUARD_STATE_QUERY:
    case GUARD_SIZES_HOLD:
    case GUARD__COUNT:
        break;
    }
    return false;
}

/* Whether guard `other` is one that g requires, directly or through its
   requirement's requirements. */
static bool
requires_chain_contains(const GuardSet *gs, int g, int other)
{
    for (int r = gs->guards[g].requires; r >= 0; r = gs->guards[r].requires)
        if (r == other)
            return true;
    return false;
}

/* Guard gi just failed (its count already bumped): move it one place toward
   the front when it now fails more than its predecessor, unless that
   predecessor is one it requires.  Cannot fail. */
static void
order_promote(GuardSet *gs, int gi)
{
    int p = guard_order_position(gs, gi, gs->n), prev;

    if (p <= 0)
        return;
    prev = gs->order[p - 1];
    if (gs->guards[gi].fails <= gs->guards[prev].fails
        || requires_chain_contains(gs, gi, prev))
        return;
    gs->order[p - 1] = gi;
    gs->order[p] = prev;
    /* a swap of neighbours keeps the permutation, and gi does not require
       prev (checked above): the invariants hold without the quadratic
       check, which on a frame whose entries keep failing (a cache limit
       under --capture-all) took 3% of the run */
    ENGINE_ASSERT(gs->guards[gi].requires != prev);
}

/* Record that guard gi was the first to fail: its counter, the order,
   and *failed (when not NULL).  Renders nothing: that is the miss path's
   (guardset_explain_failure).  Cannot fail. */
static void
guard_failed(GuardSet *gs, int gi, int *failed)
{
    gs->guards[gi].fails++;
    order_promote(gs, gi);
    if (failed != NULL)
        *failed = gi;
}

/* Whether guard g is one of the short walk's (guards.h, `simple`). */
static bool
guard_is_simple(const GuardSet *gs, const Guard *g)
{
    if (g->kind == GUARD_BACKEND_MATCH)
        return true;
    if (g->acc < 0 || gs->acc[g->acc].kind != ACC_LOCAL)
        return false;
    return g->kind == GUARD_TYPE_MATCH || g->kind == GUARD_ID_MATCH
           || (g->kind == GUARD_TENSOR_MATCH && g->tensor->device == NULL);
}

/* guard_passes for a simple guard, reading the frame's fast local itself.
   No Python runs, nothing is stored in vals. */
static inline bool
simple_passes(const GuardSet *gs, const Guard *g, const FrameView *fv, PyObject *backend)
{
    if (g->kind == GUARD_BACKEND_MATCH)
        return backend == g->expected;
    Py_ssize_t i = gs->acc[g->acc].index;
    PyObject *v = i < fv->nlocals ? fv->locals[i] : NULL;
    if (v == NULL)
        return false;
    switch (g->kind) {
    case GUARD_TYPE_MATCH:
        return Py_TYPE(v) == (PyTypeObject *)g->expected
               && (g->weak == NULL || weakref_points_to(g->weak, g->expected));
    case GUARD_ID_MATCH:
        return v == g->expected
               && (g->weak == NULL || weakref_points_to(g->weak, g->expected));
    default:
        return guard_tensor_matches(g->tensor, v);
    }
}

/* The short walk: 1 when every guard of a simple set passes, 0 when one
   does not (the full walk then finds it and keeps its books). */
static int
simple_check(GuardSet *gs, const FrameView *fv, PyObject *backend)
{
    if (gs->simple == SIMPLE_UNKNOWN) {
        gs->simple = SIMPLE_YES;
        for (int i = 0; i < gs->n && gs->simple == SIMPLE_YES; i++)
            if (!guard_is_simple(gs, &gs->guards[i]))
                gs->simple = SIMPLE_NO;
    }
    if (gs->simple != SIMPLE_YES)
        return 0;
    for (int i = 0; i < gs->n; i++)          /* no Python runs: `order` stays put */
        if (!simple_passes(gs, &gs->guards[gs->order[i]], fv, backend))
            return 0;
    return 1;
}

/*
 * Contract and preconditions in guards.h.
 *
 * The guards run in a copy of `order`: a check may call Python code (an
 * attribute accessor), which may release the GIL or re-enter this set, and
 * a failure elsewhere reorders it.  Walking the live array could then skip
 * a guard and report a false hit.
 */
/* The value of a group member's fast local (borrowed), or NULL. */
static inline PyObject *
group_value(const GuardSet *gs, int gi, const FrameView *fv)
{
    const Accessor *a = &gs->acc[gs->guards[gi].acc];
    return a->index < fv->nlocals ? fv->locals[a->index] : NULL;
}

/* Make the set's tensor group (guards.h) once a check passed: its torch
   TENSOR_MATCH guards on fast locals, two or more, and torch's check over
   their current values (which have just matched).  Never fails: without a
   group every guard keeps its own check. */
static void
group_make(GuardSet *gs, const FrameView *fv)
{
    int n = 0;
    const TensorMeta **tms = NULL;
    PyObject **values = NULL;

    gs->group_state = GROUP_NONE;
    for (int i = 0; i < gs->n; i++) {
        const Guard *g = &gs->guards[i];
        n += g->kind == GUARD_TENSOR_MATCH && g->tensor->torch_check != NULL
             && gs->acc[g->acc].kind == ACC_LOCAL;
    }
    if (n < 2 || (gs->group = PyMem_Malloc((size_t)n * sizeof(int))) == NULL
        || (tms = PyMem_Malloc((size_t)n * sizeof(*tms))) == NULL
        || (values = PyMem_Malloc((size_t)n * sizeof(*values))) == NULL)
        goto out;
    gs->ngroup = 0;
    for (int i = 0; i < gs->n; i++) {
        const Guard *g = &gs->guards[i];
        if (g->kind == GUARD_TENSOR_MATCH && g->tensor->torch_check != NULL
            && gs->acc[g->acc].kind == ACC_LOCAL) {
            if ((values[gs->ngroup] = group_value(gs, i, fv)) == NULL)
                goto out;
            tms[gs->ngroup] = g->tensor;
            gs->group[gs->ngroup++] = i;
        }
    }
    gs->group_check = guard_tensor_group_new(tms, values, n);
    if (gs->group_check != NULL) {
        for (int k = 0; k < gs->ngroup; k++)
            gs->guards[gs->group[k]].in_group = true;
        gs->group_state = GROUP_READY;
    }
out:
    if (gs->group_state != GROUP_READY) {
        PyMem_Free(gs->group);
        gs->group = NULL;
        gs->ngroup = 0;
    }
    PyMem_Free(tms);
    PyMem_Free(values);
}

/* Whether the tensor group passes (one call for all its tensors).  false
   also when a value is missing or the call fails: the members then run
   their own checks. */
static bool
group_passes(const GuardSet *gs, const FrameView *fv)
{
    PyObject *small[8], **args = gs->ngroup <= 8 ? small
                                 : PyMem_Malloc((size_t)gs->ngroup * sizeof(PyObject *));
    bool ok = false;

    if (args == NULL) {
        PyErr_Clear();
        return false;
    }
    int k = 0;
    while (k < gs->ngroup && (args[k] = group_value(gs, gs->group[k], fv)) != NULL)
        k++;
    if (k == gs->ngroup) {
        PyObject *r = PyObject_Vectorcall(gs->group_check, args, (size_t)k, NULL);
        ok = r == Py_True;
        Py_XDECREF(r);
        PyErr_Clear();
    }
    if (args != small)
        PyMem_Free(args);
    return ok;
}

/*
 * Contract and preconditions in guards.h.
 *
 * The guards run in a copy of `order`: a check may call Python code (an
 * attribute accessor), which may release the GIL or re-enter this set, and
 * a failure elsewhere reorders it.  Walking the live array could then skip
 * a guard and report a false hit.
 */
int
guardset_check(GuardSet *gs, const FrameView *fv, PyObject **vals,
               PyObject *backend, int *failed)
{
    int order_stack[ORDER_ON_STACK], *order = order_stack;
    int n = gs->n, rc = 1;

    ENGINE_ASSERT(!PyErr_Occurred());
    ENGINE_ASSERT(vals != NULL || gs->nacc == 0);
    if (n == 0 || (failed == NULL && simple_check(gs, fv, backend) == 1))
        return 1;
    if (n > ORDER_ON_STACK
        && (order = PyMem_Malloc((size_t)n * sizeof(int))) == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    memcpy(order, gs->order, (size_t)n * sizeof(int));
    bool group_passed = gs->group_state == GROUP_READY && group_passes(gs, fv);
    for (int i = 0; i < n; i++) {
        int gi = order[i];
        if (group_passed && gs->guards[gi].in_group)
            continue;
        if (!guard_passes(gs, &gs->guards[gi], fv, vals, backend)) {
            guard_failed(gs, gi, failed);
            rc = 0;
            break;
        }
    }
    if (order != order_stack)
        PyMem_Free(order);
    if (rc == 1 && gs->group_state == GROUP_UNKNOWN)
        group_make(gs, fv);
    return rc;
}

/* (contract: guards.h)  Walks `order`, so a guard's requirement is seen
   before it; `skipped` marks the guards not evaluated. */
int
guardset_failing(const GuardSet *gs, const FrameView *fv, PyObject **vals,
                 PyObject *backend, int *out, int max)
{
    bool skipped_stack[ORDER_ON_STACK], *skipped = skipped_stack;
    int nfail = 0, k = 0;

    if (gs->n > ORDER_ON_STACK && (skipped = PyMem_Calloc((size_t)gs->n, sizeof(bool))) == NULL) {
        PyErr_Clear();
        return 0;
    }
    if (skipped == skipped_stack)
        memset(skipped, 0, sizeof skipped_stack);
    for (int i = 0; i < gs->n; i++) {
        int gi = gs->order[i];
        const Guard *g = &gs->guards[gi];
        if (g->requires >= 0 && skipped[g->requires]) {
            skipped[gi] = true;
            continue;
        }
        if (!guard_passes(gs, g, fv, vals, backend)) {
            PyErr_Clear();
            skipped[gi] = true;
            nfail++;
        }
    }
    /* out in index order: the order the translator added them */
    for (int gi = 0; gi < gs->n && k < max; gi++)
        if (skipped[gi] && (gs->guards[gi].requires < 0 || !skipped[gs->guards[gi].requires]))
            out[k++] = gi;
    if (skipped != skipped_stack)
        PyMem_Free(skipped);
    return nfail;
}

void
guardfailure_clear(GuardFailure *fail)
{
    fail->guard = -1;
    Py_CLEAR(fail->expr);
    Py_CLEAR(fail->observed);
}
