/*
 * guards.c -- guard sets: the accessors that reach a value from a frame, the
 * checks applied to those values, and their rendering as Python-like text.
 * Design: ../shared/DESIGN.md section 3.3; contract: engine.h ("Accessors").
 *
 * guardset_check runs on every cache hit, so the value and check paths do
 * not allocate (but for sets of more than ORDER_ON_STACK guards) and call
 * into Python only where the accessor or check is itself a Python operation
 * (an attribute, HASATTR, a globals mapping that is not a dict).  Everything
 * that renders text runs on misses and for inspection only, and may call
 * numpy's dtype.__str__.
 *
 * TENSOR_MATCH has two paths.  NumPy arrays are read from their struct
 * (about 15 ns).  torch tensors are read through the Python C API --
 * .dtype, .device, .shape, .stride(), .requires_grad, in that order,
 * stopping at the first part that differs -- since dynscope does not link
 * against libtorch: about 0.3 us per tensor on a hit (docs/vs-dynamo.md),
 * allocating the small objects those getters return.  GRAD_MODE calls
 * torch.is_grad_enabled (a C function).  Which library an example belongs to
 * is tensorlib's answer (NumPy and torch are never imported here).
 *
 * Invariants of a GuardSet (guardset_invariants checks them in debug builds):
 *   - acc[i].base < i: a base is added before the accessors built on it, so
 *     the accessors form a forest and no chain is deeper than
 *     MAX_ACCESSOR_DEPTH (value and render recursion is bounded by it);
 *   - order[0..n) is a permutation of 0..n-1 in which every guard comes after
 *     the guard it requires;
 *   - guards[i].requires is -1 or a structural guard (TYPE, ID, TENSOR,
 *     LIST/TUPLE_LENGTH, DICT_KEYS) on a strict ancestor of guards[i].acc,
 *     the first such guard on the nearest such ancestor;
 *   - every PyObject * in the set is a strong reference; a TENSOR_MATCH keeps
 *     the example's type, dtype and (torch) device, never the example itself.
 * All of it is protected by the GIL.
 */
#include "engine.h"
#include "tensorlib.h"

#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/ndarraytypes.h>     /* struct accessors only: no import_array */

#include <math.h>
#include <string.h>

_Static_assert(sizeof(npy_intp) == sizeof(Py_ssize_t),
               "TensorMeta stores npy_intp shapes as Py_ssize_t");

#define MAX_ACCESSOR_DEPTH 256      /* longest base chain of one accessor */
#define MAX_CONST_DEPTH 32          /* nesting of EQUALS_MATCH tuples */
#define ORDER_ON_STACK 64           /* guards whose order is copied without malloc */
#define DESCRIBE_MAX 80             /* longest rendered constant, in characters */
#define KEYS_SHOWN 8                /* dict keys shown in a failure */

/* ------------------------------------------------------------------ */
/* Constants compared without calling Python code.                     */

/*
 * Whether o is None, or an exact bool, int, float, complex, str or bytes, or
 * an exact tuple of these nested at most MAX_CONST_DEPTH deep.  These are
 * the values EQUALS_MATCH and dict-item accessors accept: their hash and
 * comparison are implemented in C by the interpreter.  Cannot fail.
 */
static bool
is_simple_const(PyObject *o, int depth)
{
    PyTypeObject *t = Py_TYPE(o);

    if (o == Py_None || t == &PyBool_Type || t == &PyLong_Type
        || t == &PyFloat_Type || t == &PyComplex_Type
        || t == &PyUnicode_Type || t == &PyBytes_Type)
        return true;
    if (t != &PyTuple_Type || depth >= MAX_CONST_DEPTH)
        return false;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(o); i++)
        if (!is_simple_const(PyTuple_GET_ITEM(o, i), depth + 1))
            return false;
    return true;
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
 * simple type (see is_simple_const) and equal, tuples item by item.  Other
 * objects compare by identity only.  Never calls Python code, never leaves
 * an exception set; recursion follows b, so its depth is bounded by b's.
 */
static bool
const_equal(PyObject *a, PyObject *b)
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
    if (t == &PyTuple_Type) {
        Py_ssize_t n = PyTuple_GET_SIZE(b);
        if (PyTuple_GET_SIZE(a) != n)
            return false;
        for (Py_ssize_t i = 0; i < n; i++)
            if (!const_equal(PyTuple_GET_ITEM(a, i), PyTuple_GET_ITEM(b, i)))
                return false;
        return true;
    }
    return false;               /* None, bool: identity was the test */
}

/* ------------------------------------------------------------------ */
/* Tensor metadata.                                                    */

/* Most dimensions a torch tensor's view is read into (TensorView.buf). */
#define TORCH_MAX_DIMS 64

/*
 * What a check reads from a tensor.  NumPy: pointers borrowed from the
 * array (its struct is read directly).  torch: read through the Python API
 * (.shape, .stride(), .dtype, .device, .requires_grad) into buf, with
 * strong references released by tensor_view_done.
 */
typedef struct TensorView {
    PyObject *dtype;              /* NumPy: borrowed; torch: strong */
    int ndim;
    const Py_ssize_t *shape;      /* borrowed: ndim items */
    const Py_ssize_t *strides;    /* borrowed: ndim items, bytes (NumPy) or elements (torch) */
    PyObject *device;             /* torch: strong; NumPy: NULL */
    int requires_grad;            /* torch: 0 / 1; NumPy: -1 */
    bool owned;                   /* torch: dtype and device are strong */
    Py_ssize_t buf[2 * TORCH_MAX_DIMS];
} TensorView;

/* The attributes a torch tensor is read through (interned strs, strong,
   made with the first torch TensorMeta and kept for the process). */
static struct TorchAttrs {
    PyObject *dtype, *shape, *stride, *device, *requires_grad;
} torch_attr;

/* Make torch_attr.  0, or -1 with an exception (a partial set is kept and
   completed by the next call). */
static int
torch_attrs_ready(void)
{
    static const char *const names[] = {"dtype", "shape", "stride", "device",
                                        "requires_grad"};
    PyObject **slots[] = {&torch_attr.dtype, &torch_attr.shape, &torch_attr.stride,
                          &torch_attr.device, &torch_attr.requires_grad};

    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (*slots[i] == NULL && (*slots[i] = PyUnicode_InternFromString(names[i])) == NULL)
            return -1;
    return 0;
}

/* Copy a tuple of ints (torch.Size, a stride tuple) into out.  Its length,
   or -1 (no exception) when it is not such a tuple or is too long. */
static int
read_sizes(PyObject *tup, Py_ssize_t *out)
{
    Py_ssize_t n;

    if (tup == NULL || !PyTuple_Check(tup) || (n = PyTuple_GET_SIZE(tup)) > TORCH_MAX_DIMS)
        return -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        out[i] = PyLong_AsSsize_t(PyTuple_GET_ITEM(tup, i));
        if (out[i] == -1 && PyErr_Occurred())
            return -1;
    }
    return (int)n;
}

/* Read a torch tensor's metadata into tv.  0, or -1 (no exception). */
static int
torch_view(PyObject *v, TensorView *tv)
{
    PyObject *shape = PyObject_GetAttr(v, torch_attr.shape);
    PyObject *stride = shape ? PyObject_CallMethodNoArgs(v, torch_attr.stride) : NULL;
    PyObject *rg;
    int n = read_sizes(shape, tv->buf), m = read_sizes(stride, tv->buf + TORCH_MAX_DIMS);

    Py_XDECREF(shape);
    Py_XDECREF(stride);
    if (n < 0 || m != n)
        goto fail;
    tv->ndim = n;
    tv->shape = tv->buf;
    tv->strides = tv->buf + TORCH_MAX_DIMS;
    if ((tv->dtype = PyObject_GetAttr(v, torch_attr.dtype)) == NULL
        || (tv->device = PyObject_GetAttr(v, torch_attr.device)) == NULL
        || (rg = PyObject_GetAttr(v, torch_attr.requires_grad)) == NULL)
        goto fail;
    tv->requires_grad = rg == Py_True;
    Py_DECREF(rg);
    return 0;
fail:
    PyErr_Clear();
    Py_CLEAR(tv->dtype);
    Py_CLEAR(tv->device);
    return -1;
}

/*
 * Read the metadata of v into tv (release it with tensor_view_done).
 * Precondition: v's exact type is tm_type, recorded from a numpy.ndarray or
 * a torch tensor, and `is_torch` says which.  The one function that knows a
 * tensor's layout.  Returns 0, or -1 when v cannot be read (no exception
 * set; nothing to release).
 */
static inline int
tensor_view(PyObject *v, bool is_torch, TensorView *tv)
{
    PyArrayObject *a = (PyArrayObject *)v;

    tv->dtype = tv->device = NULL;
    tv->requires_grad = -1;
    tv->owned = is_torch;
    if (is_torch)
        return torch_view(v, tv);
    tv->dtype = (PyObject *)PyArray_DESCR(a);
    tv->ndim = PyArray_NDIM(a);
    tv->shape = (const Py_ssize_t *)PyArray_DIMS(a);
    tv->strides = (const Py_ssize_t *)PyArray_STRIDES(a);
    return 0;
}

/* Release what tensor_view took.  Cannot fail. */
static inline void
tensor_view_done(TensorView *tv)
{
    if (tv->owned) {                /* torch: dtype and device are strong */
        Py_CLEAR(tv->dtype);
        Py_CLEAR(tv->device);
    }
}

/* Is descr NumPy's canonical descr of its scalar type (np.dtype(descr.type)
   is descr)?  Those are made once and never freed.  Asked at compile time
   only; an error answers no. */
static bool
numpy_builtin_descr(PyObject *descr)
{
    PyTypeObject *dtype_type = tensorlib_dtype_type();     /* borrowed */

    if (dtype_type == NULL || !PyObject_TypeCheck(descr, dtype_type))
        return false;
    PyObject *scalar = PyObject_GetAttrString(descr, "type");
    PyObject *canonical = scalar ? PyObject_CallOneArg((PyObject *)dtype_type, scalar) : NULL;
    bool same = canonical == descr;
    Py_XDECREF(canonical);
    Py_XDECREF(scalar);
    PyErr_Clear();
    return same;
}

static void
tensor_meta_free(TensorMeta *tm)
{
    if (tm == NULL)
        return;
    Py_XDECREF(tm->type);
    if (!tm->dtype_borrowed)
        Py_XDECREF(tm->dtype);
    Py_XDECREF(tm->device);
    PyMem_Free(tm->shape);
    PyMem_Free(tm->strides);
    PyMem_Free(tm);
}

/* New metadata read from an example array or torch tensor, or NULL with
   TypeError (neither, or unreadable) or MemoryError. */
static TensorMeta *
tensor_meta_new(PyObject *example)
{
    TensorMeta *tm;
    TensorView tv;
    size_t nbytes;
    TensorLibKind kind = tensorlib_discover_kind(example);
    bool is_torch = kind == TENSORLIB_TORCH;

    if (kind == TENSORLIB_ERROR || (is_torch && torch_attrs_ready() < 0))
        return NULL;
    if (kind == TENSORLIB_NONE) {
        PyErr_Format(PyExc_TypeError,
                     "TENSOR_MATCH needs a numpy.ndarray or torch.Tensor example, not %.100s",
                     Py_TYPE(example)->tp_name);
        return NULL;
    }
    if (tensor_view(example, is_torch, &tv) < 0) {
        PyErr_SetString(PyExc_TypeError, "TENSOR_MATCH: unreadable tensor");
        return NULL;
    }
    tm = PyMem_Calloc(1, sizeof *tm);
    if (tm == NULL)
        goto out_nomem;
    tm->ndim = tv.ndim;
    if (tv.ndim > 0) {
        nbytes = (size_t)tv.ndim * sizeof(Py_ssize_t);
        tm->shape = PyMem_Malloc(nbytes);
        tm->strides = PyMem_Malloc(nbytes);
        if (tm->shape == NULL || tm->strides == NULL)
            goto out_free_meta;
        memcpy(tm->shape, tv.shape, nbytes);
        memcpy(tm->strides, tv.strides, nbytes);
    }
    tm->type = (PyTypeObject *)Py_NewRef(Py_TYPE(example));
    tm->dtype_borrowed = numpy_builtin_descr(tv.dtype);
    tm->dtype = tm->dtype_borrowed ? tv.dtype : Py_NewRef(tv.dtype);
    tm->device = Py_XNewRef(tv.device);
    tm->requires_grad = tv.requires_grad;
    tensor_view_done(&tv);
    return tm;

out_free_meta:
    tensor_meta_free(tm);
out_nomem:
    tensor_view_done(&tv);
    PyErr_NoMemory();
    return NULL;
}

/* Which part of a TENSOR_MATCH a value fails, TM_OK when none. */
typedef enum TensorPart {
    TM_OK, TM_TYPE, TM_DTYPE, TM_DEVICE, TM_SHAPE, TM_STRIDES, TM_REQUIRES_GRAD
} TensorPart;

/* numpy compares descrs in C, torch dtypes are singletons and devices
   compare in C; an error (none is known) counts as unequal. */
static bool
dtype_equal(PyObject *a, PyObject *b)
{
    int r;

    if (a == b)
        return true;
    if (a == NULL || b == NULL)
        return false;
    r = PyObject_RichCompareBool(a, b, Py_EQ);
    if (r < 0) {
        PyErr_Clear();
        return false;
    }
    return r == 1;
}

/* A loop, not memcmp: shapes are a few items and this is the hot path. */
static inline bool
ssize_equal(const Py_ssize_t *a, const Py_ssize_t *b, int n)
{
    for (int i = 0; i < n; i++)
        if (a[i] != b[i])
            return false;
    return true;
}

/* torch_view, part by part, stopping at the first part of tm that v does
   not match (a lookup that fails several entries reads only what it
   compares).  On any result but TM_TYPE tv holds what was read. */
static TensorPart
torch_mismatch(const TensorMeta *tm, PyObject *v, TensorView *tv)
{
    PyObject *shape, *stride, *rg;
    int n, m;

    tv->dtype = tv->device = NULL;
    tv->requires_grad = -1;
    tv->owned = true;
    tv->ndim = 0;
    tv->shape = tv->buf;
    tv->strides = tv->buf + TORCH_MAX_DIMS;
    if ((tv->dtype = PyObject_GetAttr(v, torch_attr.dtype)) == NULL)
        goto fail;
    if (!dtype_equal(tv->dtype, tm->dtype))
        return TM_DTYPE;
    if ((tv->device = PyObject_GetAttr(v, torch_attr.device)) == NULL)
        goto fail;
    if (!dtype_equal(tv->device, tm->device))
        return TM_DEVICE;
    shape = PyObject_GetAttr(v, torch_attr.shape);
    n = read_sizes(shape, tv->buf);
    Py_XDECREF(shape);
    if (n < 0)
        goto fail;
    tv->ndim = n;
    if (n != tm->ndim || !ssize_equal(tv->shape, tm->shape, n))
        return TM_SHAPE;
    stride = PyObject_CallMethodNoArgs(v, torch_attr.stride);
    m = read_sizes(stride, tv->buf + TORCH_MAX_DIMS);
    Py_XDECREF(stride);
    if (m != n)
        goto fail;
    if (!ssize_equal(tv->strides, tm->strides, n))
        return TM_STRIDES;
    if ((rg = PyObject_GetAttr(v, torch_attr.requires_grad)) == NULL)
        goto fail;
    tv->requires_grad = rg == Py_True;
    Py_DECREF(rg);
    return tv->requires_grad != tm->requires_grad ? TM_REQUIRES_GRAD : TM_OK;
fail:
    PyErr_Clear();
    tensor_view_done(tv);
    return TM_TYPE;
}

/* The first part of tm that v does not match.  On any result but TM_TYPE
   tv holds v's view: the caller releases it with tensor_view_done.
   Cannot fail. */
static TensorPart
tensor_mismatch(const TensorMeta *tm, PyObject *v, TensorView *tv)
{
    if (Py_TYPE(v) != tm->type)
        return TM_TYPE;
    if (tm->device != NULL)
        return torch_mismatch(tm, v, tv);
    if (tensor_view(v, false, tv) < 0)
        return TM_TYPE;
    if (!dtype_equal(tv->dtype, tm->dtype))
        return TM_DTYPE;
    if (tm->device != NULL && !dtype_equal(tv->device, tm->device))
        return TM_DEVICE;
    if (tv->ndim != tm->ndim || !ssize_equal(tv->shape, tm->shape, tm->ndim))
        return TM_SHAPE;
    if (!ssize_equal(tv->strides, tm->strides, tm->ndim))
        return TM_STRIDES;
    if (tv->requires_grad != tm->requires_grad)
        return TM_REQUIRES_GRAD;
    return TM_OK;
}

/* Whether v passes tm.  Cannot fail. */
static bool
tensor_matches(const TensorMeta *tm, PyObject *v)
{
    TensorView tv;
    TensorPart part = tensor_mismatch(tm, v, &tv);

    if (part != TM_TYPE)
        tensor_view_done(&tv);
    return part == TM_OK;
}

static bool
tensor_meta_equal(const TensorMeta *a, const TensorMeta *b)
{
    return a->type == b->type && a->ndim == b->ndim
        && dtype_equal(a->dtype, b->dtype)
        && (a->device == NULL) == (b->device == NULL)
        && (a->device == NULL || dtype_equal(a->device, b->device))
        && a->requires_grad == b->requires_grad
        && ssize_equal(a->shape, b->shape, a->ndim)
        && ssize_equal(a->strides, b->strides, a->ndim);
}

/* ------------------------------------------------------------------ */
/* Set lifetime.                                                       */

void
guardset_init(GuardSet *gs)
{
    memset(gs, 0, sizeof *gs);
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
        tensor_meta_free(old.guards[i].tensor);
    }
    PyMem_Free(old.acc);
    PyMem_Free(old.guards);
    PyMem_Free(old.order);
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
/* The invariants of the file header.  For ENGINE_ASSERT; quadratic, and
   allocation-free so that it never changes what it checks. */
static bool
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
        || k == ACC_CLOSURE || k == ACC_STACK || k == ACC_GLOBALS;
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

    if ((unsigned)kind > ACC_TYPE) {
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
    if ((kind == ACC_GLOBAL || kind == ACC_BUILTIN || kind == ACC_ATTR)
        && (key == NULL || !PyUnicode_CheckExact(key))) {
        PyErr_SetString(PyExc_TypeError, "accessor key must be a str");
        return -1;
    }
    if (kind == ACC_DICT_ITEM && (key == NULL || !is_simple_const(key, 0))) {
        PyErr_SetString(PyExc_TypeError,
                        "dict item key must be a str, int, float, bool, bytes, "
                        "complex, None or a tuple of these");
        return -1;
    }
    if (name != NULL && name != Py_None && !PyUnicode_Check(name)) {
        PyErr_SetString(PyExc_TypeError, "accessor name must be a str");
        return -1;
    }
    return 0;
}

int
guardset_accessor(GuardSet *gs, AccessorKind kind, int base,
                  Py_ssize_t index, PyObject *key, PyObject *name)
{
    Accessor *a;

    if (accessor_validate(gs, kind, base, index, key, name) < 0)
        return -1;
    if (!acc_uses_index(kind))
        index = 0;
    if (kind != ACC_GLOBAL && kind != ACC_BUILTIN && kind != ACC_ATTR
        && kind != ACC_DICT_ITEM)
        key = NULL;
    if ((kind != ACC_LOCAL && kind != ACC_CLOSURE) || name == Py_None)
        name = NULL;

    for (int i = 0; i < gs->nacc; i++) {
        a = &gs->acc[i];
        if (a->kind != kind || a->base != base || a->index != index)
            continue;
        if (key != NULL ? a->key == NULL || !const_equal(key, a->key) : a->key != NULL)
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
    return gs->nacc++;
}

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

/* vals[acc], computed if needed.  Borrowed or NULL (unreachable, no exception). */
static inline PyObject *
value_of(const GuardSet *gs, int acc, const FrameView *fv, PyObject **vals)
{
    PyObject *v = vals[acc];

    return v != NULL ? v : value_compute(gs, acc, fv, vals);
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
    case ACC_TYPE:
        v = (PyObject *)Py_TYPE(base);
        break;
    case ACC_CELL:
        if (PyCell_Check(base))
            v = PyCell_GET(base);
        break;
    case ACC_ITEM:
        v = sequence_item(base, a->index);
        break;
    case ACC_DICT_ITEM:
        if (PyDict_CheckExact(base)) {
            v = PyDict_GetItemWithError(base, a->key);
            if (v == NULL && PyErr_Occurred())
                PyErr_Clear();
        }
        break;
    case ACC_GLOBAL:
    case ACC_BUILTIN:
        v = namespace_lookup_ref(a->kind == ACC_GLOBAL ? fv->globals : fv->builtins,
                                 a->key);
        return vals[i] = v;                     /* already strong */
    case ACC_ATTR:
        v = PyObject_GetAttr(base, a->key);
        if (v == NULL)
            PyErr_Clear();
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
/* Guards: creation.                                                   */

static const char *const guard_kind_names[GUARD__COUNT] = {
    [GUARD_TYPE_MATCH] = "TYPE_MATCH",
    [GUARD_ID_MATCH] = "ID_MATCH",
    [GUARD_EQUALS_MATCH] = "EQUALS_MATCH",
    [GUARD_TENSOR_MATCH] = "TENSOR_MATCH",
    [GUARD_LIST_LENGTH] = "LIST_LENGTH",
    [GUARD_TUPLE_LENGTH] = "TUPLE_LENGTH",
    [GUARD_DICT_KEYS] = "DICT_KEYS",
    [GUARD_HASATTR] = "HASATTR",
    [GUARD_CODE_MATCH] = "CODE_MATCH",
    [GUARD_NOT_NONE] = "NOT_NONE",
    [GUARD_DICT_LACKS] = "DICT_LACKS",
    [GUARD_DICT_EMPTY] = "DICT_EMPTY",
    [GUARD_GRAD_MODE] = "GRAD_MODE",
    [GUARD_BACKEND_MATCH] = "BACKEND_MATCH",
    [GUARD_SAME_AS] = "SAME_AS",
};

const char *
guard_kind_name(GuardKind kind)
{
    if ((unsigned)kind >= GUARD__COUNT)
        return "UNKNOWN";
    return guard_kind_names[kind];
}

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
    return k == GUARD_BACKEND_MATCH || k == GUARD_GRAD_MODE;
}

/* The first structural guard on the nearest strict ancestor of acc that has
   one, or -1.  Cannot fail. */
static int
nearest_requirement(const GuardSet *gs, int acc)
{
    for (int a = gs->acc[acc].base; a >= 0; a = gs->acc[a].base)
        for (int g = 0; g < gs->n; g++)
            if (gs->guards[g].acc == a && kind_is_structural(gs->guards[g].kind))
                return g;
    return -1;
}

static bool
acc_is_strict_descendant(const GuardSet *gs, int acc, int ancestor)
{
    for (int a = gs->acc[acc].base; a >= 0; a = gs->acc[a].base)
        if (a == ancestor)
            return true;
    return false;
}

static int
order_position(const GuardSet *gs, int g, int n)
{
    for (int p = 0; p < n; p++)
        if (gs->order[p] == g)
            return p;
    return -1;
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
    case GUARD_TENSOR_MATCH:        /* checked by tensor_meta_new */
        if (expected == NULL)
            goto out_type;
        break;
    case GUARD_EQUALS_MATCH:
        if (expected == NULL || !is_simple_const(expected, 0)) {
            PyErr_Format(PyExc_TypeError,
                         "EQUALS_MATCH needs an int, float, bool, str, bytes, "
                         "complex, None or a tuple of these, not %.100s",
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
        break;
    case GUARD_HASATTR:
        if (expected == NULL || !PyUnicode_CheckExact(expected))
            goto out_type;
        g->length = length != 0;
        break;
    case GUARD_CODE_MATCH:
        if (expected == NULL || !PyCode_Check(expected))
            goto out_type;
        break;
    case GUARD_NOT_NONE:
    case GUARD_DICT_EMPTY:
        return 0;
    case GUARD_SAME_AS:
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
    case GUARD_DICT_LACKS:
        if (expected == NULL || !PyUnicode_CheckExact(expected))
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
    case GUARD_DICT_LACKS:
        return const_equal(e->expected, g->expected);
    case GUARD_TENSOR_MATCH:
        return tensor_meta_equal(e->tensor, tm);
    default:
        return e->expected == g->expected;
    }
}

/*
 * A structural guard gi was just added as the first on its accessor: guards
 * on descendant accessors that now find it nearest require it.  Returns the
 * order position gi must take: before the first of them, else at the end.
 */
static int
adopt_dependents(GuardSet *gs, int gi)
{
    int acc = gs->guards[gi].acc, pos = gi, p;

    for (int h = 0; h < gi; h++) {
        Guard *gh = &gs->guards[h];
        if (gh->acc < 0 || !acc_is_strict_descendant(gs, gh->acc, acc))
            continue;
        if (nearest_requirement(gs, gh->acc) != gi)
            continue;
        gh->requires = gi;
        p = order_position(gs, h, gi);
        if (p >= 0 && p < pos)
            pos = p;
    }
    return pos;
}

int
guardset_add(GuardSet *gs, GuardKind kind, int acc, PyObject *expected,
             Py_ssize_t length)
{
    Guard g = {.kind = kind, .acc = acc, .requires = -1};
    TensorMeta *tm = NULL;
    int gi, pos, cap;
    bool first_structural;

    if (guard_validate(gs, &g, expected, length) < 0)
        return -1;
    if (kind == GUARD_TENSOR_MATCH && (tm = tensor_meta_new(expected)) == NULL)
        return -1;
    for (int i = 0; i < gs->n; i++)
        if (guard_same(&gs->guards[i], &g, tm)) {
            tensor_meta_free(tm);
            return i;
        }

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
    for (int i = 0; i < gs->n && first_structural; i++)
        if (gs->guards[i].acc == acc && kind_is_structural(gs->guards[i].kind))
            first_structural = false;

    g.weak = NULL;
    if ((kind == GUARD_TYPE_MATCH || kind == GUARD_ID_MATCH)
        && PyType_SUPPORTS_WEAKREFS(Py_TYPE(g.expected))) {
        if ((g.weak = PyWeakref_NewRef(g.expected, NULL)) == NULL)
            goto out_free_meta;
    }
    else {
        g.expected = Py_XNewRef(g.expected);
    }
    g.tensor = tm;
    g.requires = acc >= 0 ? nearest_requirement(gs, acc) : -1;
    gi = gs->n++;
    gs->guards[gi] = g;

    pos = first_structural && acc >= 0 ? adopt_dependents(gs, gi) : gi;
    memmove(&gs->order[pos + 1], &gs->order[pos], (size_t)(gi - pos) * sizeof(int));
    gs->order[pos] = gi;
    ENGINE_ASSERT(gs->n > 256 || guardset_invariants(gs));   /* quadratic: small sets */
    return gi;

out_free_meta:
    tensor_meta_free(tm);
    return -1;
}

/* ------------------------------------------------------------------ */
/* Guards: checking (the cache-hit path).                              */

/* Whether obj has attribute name: 1 / 0; -1 (cleared) for other errors. */
static int
has_attr(PyObject *obj, PyObject *name)
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
dict_keys_match(PyObject *d, PyObject *keys)
{
    Py_ssize_t pos = 0, i = 0;
    PyObject *k, *v;

    if (!PyDict_CheckExact(d) || PyDict_GET_SIZE(d) != PyTuple_GET_SIZE(keys))
        return false;
    while (PyDict_Next(d, &pos, &k, &v))
        if (!const_equal(k, PyTuple_GET_ITEM(keys, i++)))
            return false;
    return true;
}

/* torch.is_grad_enabled() now: Py_True / Py_False (borrowed), or NULL (no
   exception) when it cannot be read. */
static PyObject *
grad_mode_now(void)
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
    return grad_mode_now() == expected;
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
    if ((v = value_of(gs, g->acc, fv, vals)) == NULL)
        return false;
    switch (g->kind) {
    case GUARD_TYPE_MATCH:
        /* (a live object's type is alive: a dead weak reference means
           another type now sits where the expected one was) */
        return Py_TYPE(v) == (PyTypeObject *)g->expected
               && (g->weak == NULL || PyWeakref_GET_OBJECT(g->weak) == g->expected);
    case GUARD_ID_MATCH:
        return v == g->expected
               && (g->weak == NULL || PyWeakref_GET_OBJECT(g->weak) == g->expected);
    case GUARD_EQUALS_MATCH:
        return Py_TYPE(v) == Py_TYPE(g->expected) && const_equal(v, g->expected);
    case GUARD_TENSOR_MATCH:
        return tensor_matches(g->tensor, v);
    case GUARD_LIST_LENGTH:
        return PyList_CheckExact(v) && PyList_GET_SIZE(v) == g->length;
    case GUARD_TUPLE_LENGTH:
        return PyTuple_CheckExact(v) && PyTuple_GET_SIZE(v) == g->length;
    case GUARD_DICT_KEYS:
        return dict_keys_match(v, g->expected);
    case GUARD_HASATTR:
        return has_attr(v, g->expected) == g->length;
    case GUARD_CODE_MATCH:
        return PyFunction_Check(v) && PyFunction_GET_CODE(v) == g->expected;
    case GUARD_NOT_NONE:
        return v != Py_None;
    case GUARD_SAME_AS:
        return v == value_of(gs, (int)g->length, fv, vals);
    case GUARD_DICT_LACKS:
        return PyDict_Check(v) && PyDict_GetItemWithError(v, g->expected) == NULL
               && !PyErr_Occurred();
    case GUARD_DICT_EMPTY:
        return PyDict_Check(v) && PyDict_GET_SIZE(v) == 0;
    case GUARD_BACKEND_MATCH:
    case GUARD_GRAD_MODE:
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
    int p = order_position(gs, gi, gs->n), prev;

    if (p <= 0)
        return;
    prev = gs->order[p - 1];
    if (gs->guards[gi].fails <= gs->guards[prev].fails
        || requires_chain_contains(gs, gi, prev))
        return;
    gs->order[p - 1] = gi;
    gs->order[p] = prev;
    ENGINE_ASSERT(gs->n > 256 || guardset_invariants(gs));   /* quadratic: small sets */
}

static int failure_render(const GuardSet *gs, int gi, const FrameView *fv,
                          PyObject **vals, PyObject *backend,
                          PyObject **expr, PyObject **observed);

/*
 * Record that guard gi was the first to fail and fill *fail (when not NULL;
 * its previous references are released).  0, or -1 with MemoryError.  A
 * rendering that fails for another reason (a broken __module__, say) is
 * replaced by the guard kind and "<unrenderable>".
 */
static int
guard_failed(GuardSet *gs, int gi, const FrameView *fv, PyObject **vals,
             PyObject *backend, GuardFailure *fail)
{
    PyObject *expr = NULL, *observed = NULL;

    gs->guards[gi].fails++;
    order_promote(gs, gi);
    if (fail == NULL)
        return 0;
    if (failure_render(gs, gi, fv, vals, backend, &expr, &observed) < 0) {
        if (PyErr_ExceptionMatches(PyExc_MemoryError))
            return -1;
        PyErr_Clear();
        expr = PyUnicode_FromString(guard_kind_name(gs->guards[gi].kind));
        observed = PyUnicode_FromString("<unrenderable>");
        if (expr == NULL || observed == NULL) {
            Py_XDECREF(expr);
            Py_XDECREF(observed);
            return -1;
        }
    }
    fail->guard = gi;
    Py_XSETREF(fail->expr, expr);
    Py_XSETREF(fail->observed, observed);
    return 0;
}

/*
 * Contract in engine.h.  In addition:
 *   - *fail, when given, must be initialized ({-1, NULL, NULL} or an earlier
 *     failure): on 0 its references are replaced, on 1 and -1 it is untouched;
 *   - rendering a failure may run Python code (numpy's dtype.__str__, a
 *     type's __module__), so callers keep the frame hook out of the way.
 * Preconditions:
 *   - no exception is set;
 *   - vals has gs->nacc slots.
 *
 * The guards run in a copy of `order`: a check may call Python code (an
 * attribute accessor), which may release the GIL or re-enter this set, and
 * a failure elsewhere reorders it.  Walking the live array could then skip
 * a guard and report a false hit.
 */
int
guardset_check(GuardSet *gs, const FrameView *fv, PyObject **vals,
               PyObject *backend, GuardFailure *fail)
{
    int order_stack[ORDER_ON_STACK], *order = order_stack;
    int n = gs->n, rc = 1;

    ENGINE_ASSERT(!PyErr_Occurred());
    ENGINE_ASSERT(vals != NULL || gs->nacc == 0);
    if (n == 0)
        return 1;
    if (n > ORDER_ON_STACK
        && (order = PyMem_Malloc((size_t)n * sizeof(int))) == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    memcpy(order, gs->order, (size_t)n * sizeof(int));
    for (int i = 0; i < n; i++) {
        int gi = order[i];
        if (!guard_passes(gs, &gs->guards[gi], fv, vals, backend)) {
            rc = guard_failed(gs, gi, fv, vals, backend, fail);
            break;
        }
    }
    if (order != order_stack)
        PyMem_Free(order);
    return rc;
}

void
guardfailure_clear(GuardFailure *fail)
{
    fail->guard = -1;
    Py_CLEAR(fail->expr);
    Py_CLEAR(fail->observed);
}

/* ------------------------------------------------------------------ */
/* Rendering: values.                                                  */

/* "numpy.ndarray", "mod.Outer.Inner"; builtins by bare name.  New str or NULL. */
static PyObject *
type_name_ref(PyTypeObject *t)
{
    PyObject *qual, *mod, *res;

    qual = PyType_GetQualName(t);
    if (qual == NULL)
        return NULL;
    mod = PyObject_GetAttrString((PyObject *)t, "__module__");
    if (mod == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) {
            Py_DECREF(qual);
            return NULL;
        }
        PyErr_Clear();
        return qual;
    }
    if (!PyUnicode_Check(mod) || PyUnicode_CompareWithASCIIString(mod, "builtins") == 0)
        res = Py_NewRef(qual);
    else
        res = PyUnicode_FromFormat("%U.%U", mod, qual);
    Py_DECREF(mod);
    Py_DECREF(qual);
    return res;
}

/* s cut to DESCRIBE_MAX characters ("..." at the end); steals s.  New or NULL. */
static PyObject *
truncate_steal(PyObject *s)
{
    PyObject *head, *res;

    if (s == NULL || PyUnicode_GET_LENGTH(s) <= DESCRIBE_MAX)
        return s;
    head = PyUnicode_Substring(s, 0, DESCRIBE_MAX - 3);
    Py_DECREF(s);
    if (head == NULL)
        return NULL;
    res = PyUnicode_FromFormat("%U...", head);
    Py_DECREF(head);
    return res;
}

/* The str attribute `attr` of o, or NULL without an exception when o has
   none (or it is not a str).  For objects whose attribute is implemented in
   C: functions, builtins, code objects, C types' instances. */
static PyObject *
str_attr_ref(PyObject *o, const char *attr)
{
    PyObject *v = PyObject_GetAttrString(o, attr);

    if (v == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_MemoryError))
            PyErr_Clear();
        return NULL;
    }
    if (!PyUnicode_Check(v))
        Py_CLEAR(v);
    return v;
}

/* "<ufunc 'add'>" for an object of a C (static) type that has a str
   __name__; NULL without an exception for any other object.  New or NULL. */
static PyObject *
c_named_ref(PyObject *o)
{
    PyObject *name, *tn, *res;

    if (PyType_HasFeature(Py_TYPE(o), Py_TPFLAGS_HEAPTYPE))
        return NULL;
    if ((name = str_attr_ref(o, "__name__")) == NULL)
        return NULL;
    tn = PyType_GetQualName(Py_TYPE(o));
    res = tn ? PyUnicode_FromFormat("<%U %R>", tn, name) : NULL;
    Py_XDECREF(tn);
    Py_DECREF(name);
    return res;
}

/* Objects ID_MATCH renders as "X is <name>": they have a readable name. */
static bool
has_readable_name(PyObject *o)
{
    return o == Py_None || o == Py_Ellipsis || o == Py_NotImplemented
        || PyBool_Check(o) || PyModule_Check(o) || PyType_Check(o)
        || PyFunction_Check(o) || PyCFunction_Check(o) || PyCode_Check(o);
}

/*
 * A short human rendering of o that never runs user code: constants by
 * (truncated) repr, modules as "<module 'numpy'>", classes by qualified
 * name, functions by qualname, code as "<code f>", objects of C types with
 * a __name__ as "<ufunc 'add'>", anything else "<mod.T object at 0x...>".
 * New str or NULL.
 */
static PyObject *
describe_ref(PyObject *o)
{
    PyObject *s, *tn, *res;

    if (is_simple_const(o, 0) || o == Py_Ellipsis || o == Py_NotImplemented) {
        s = PyObject_Repr(o);
        if (s == NULL && !PyErr_ExceptionMatches(PyExc_MemoryError)) {
            PyErr_Clear();      /* an int too long to print */
            return PyUnicode_FromFormat("<%s too large to print>",
                                        Py_TYPE(o)->tp_name);
        }
        return truncate_steal(s);
    }
    if (PyModule_Check(o)) {
        s = PyModule_GetNameObject(o);
        if (s == NULL) {
            PyErr_Clear();
            return PyUnicode_FromString("<module>");
        }
        res = PyUnicode_FromFormat("<module %R>", s);
        Py_DECREF(s);
        return res;
    }
    if (PyType_Check(o))
        return type_name_ref((PyTypeObject *)o);
    if (PyFunction_Check(o) || PyCFunction_Check(o)) {
        if ((s = str_attr_ref(o, "__qualname__")) != NULL)
            return s;
    }
    else if (PyCode_Check(o)) {
        if ((s = str_attr_ref(o, "co_qualname")) != NULL) {
            res = PyUnicode_FromFormat("<code %U>", s);
            Py_DECREF(s);
            return res;
        }
    }
    else if ((res = c_named_ref(o)) != NULL || PyErr_Occurred()) {
        return res;
    }
    if (PyErr_Occurred())
        return NULL;
    tn = type_name_ref(Py_TYPE(o));
    if (tn == NULL)
        return NULL;
    res = PyUnicode_FromFormat("<%U object at %p>", tn, o);
    Py_DECREF(tn);
    return res;
}

/* "(3, 4)", "(3,)", "()" for n sizes.  New str or NULL. */
static PyObject *
sizes_repr(const Py_ssize_t *a, int n)
{
    PyObject *t = PyTuple_New(n), *res;

    if (t == NULL)
        return NULL;
    for (int i = 0; i < n; i++) {
        PyObject *x = PyLong_FromSsize_t(a[i]);
        if (x == NULL) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, i, x);
    }
    res = PyObject_Repr(t);
    Py_DECREF(t);
    return res;
}

/* "['a', 'b']" for the items of a list or tuple, at most `max` of them then
   ", ...] (N keys)".  Items rendered by describe_ref.  New str or NULL. */
static PyObject *
keys_repr(PyObject *seq, Py_ssize_t max)
{
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq), shown = n < max ? n : max;
    PyObject **items = PySequence_Fast_ITEMS(seq);
    PyObject *parts, *sep = NULL, *body = NULL, *res = NULL;

    parts = PyList_New(shown);
    if (parts == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < shown; i++) {
        PyObject *d = describe_ref(items[i]);
        if (d == NULL)
            goto out_free_parts;
        PyList_SET_ITEM(parts, i, d);
    }
    if ((sep = PyUnicode_FromString(", ")) == NULL)
        goto out_free_parts;
    if ((body = PyUnicode_Join(sep, parts)) == NULL)
        goto out_free_sep;
    if (shown < n)
        res = PyUnicode_FromFormat("[%U, ...] (%zd keys)", body, n);
    else
        res = PyUnicode_FromFormat("[%U]", body);
    Py_DECREF(body);
out_free_sep:
    Py_DECREF(sep);
out_free_parts:
    Py_DECREF(parts);
    return res;
}

/* ------------------------------------------------------------------ */
/* Rendering: sources and guards.                                      */

PyObject *
guardset_render_source(const GuardSet *gs, int acc)
{
    const Accessor *a;
    PyObject *base = NULL, *res = NULL;

    if (acc < 0 || acc >= gs->nacc) {
        PyErr_Format(PyExc_IndexError, "no accessor %d", acc);
        return NULL;
    }
    a = &gs->acc[acc];
    if (a->base >= 0 && (base = guardset_render_source(gs, a->base)) == NULL)
        return NULL;
    switch (a->kind) {
    case ACC_LOCAL:
    case ACC_CLOSURE:
        if (a->name != NULL)
            res = PyUnicode_FromFormat("L[%R]", a->name);
        else
            res = PyUnicode_FromFormat(a->kind == ACC_LOCAL ? "L[<local %zd>]"
                                                            : "L[<free %zd>]",
                                       a->index);
        break;
    case ACC_GLOBAL:
        res = PyUnicode_FromFormat("G[%R]", a->key);
        break;
    case ACC_GLOBALS:
        res = PyUnicode_FromString("G");
        break;
    case ACC_TYPE:
        res = PyUnicode_FromFormat("type(%U)", base);
        break;
    case ACC_BUILTIN:
        res = PyUnicode_FromFormat("G['__builtins__'][%R]", a->key);
        break;
    case ACC_STACK:
        res = PyUnicode_FromFormat("S[%zd]", a->index);
        break;
    case ACC_ATTR:
        res = PyUnicode_FromFormat("%U.%U", base, a->key);
        break;
    case ACC_ITEM:
        res = PyUnicode_FromFormat("%U[%zd]", base, a->index);
        break;
    case ACC_DICT_ITEM:
        res = PyUnicode_FromFormat("%U[%R]", base, a->key);
        break;
    case ACC_CELL:
        res = PyUnicode_FromFormat("%U.cell_contents", base);
        break;
    }
    Py_XDECREF(base);
    return res;
}

/* "type(L['x']) is numpy.ndarray and L['x'].dtype == float32 and
   L['x'].shape == (3, 4) and L['x'].strides == (16, 4)"; for torch
   "type(L['x']) is torch.Tensor and L['x'].dtype == torch.float32 and
   L['x'].device == 'cpu' and L['x'].shape == (3, 4) and
   L['x'].stride() == (4, 1) and L['x'].requires_grad == False".
   New str or NULL. */
static PyObject *
render_tensor(const TensorMeta *tm, PyObject *src)
{
    PyObject *tn, *dt = NULL, *shape = NULL, *strides = NULL, *dev = NULL, *res = NULL;

    if ((tn = type_name_ref(tm->type)) == NULL)
        return NULL;
    if ((dt = PyObject_Str(tm->dtype)) == NULL)
        goto out;
    if ((shape = sizes_repr(tm->shape, tm->ndim)) == NULL)
        goto out;
    if ((strides = sizes_repr(tm->strides, tm->ndim)) == NULL)
        goto out;
    if (tm->device == NULL) {
        res = PyUnicode_FromFormat("type(%U) is %U and %U.dtype == %U and "
                                   "%U.shape == %U and %U.strides == %U",
                                   src, tn, src, dt, src, shape, src, strides);
        goto out;
    }
    if ((dev = PyObject_Str(tm->device)) == NULL)
        goto out;
    res = PyUnicode_FromFormat("type(%U) is %U and %U.dtype == %U and %U.device == %R and "
                               "%U.shape == %U and %U.stride() == %U and "
                               "%U.requires_grad == %s",
                               src, tn, src, dt, src, dev, src, shape, src, strides,
                               src, tm->requires_grad ? "True" : "False");
out:
    Py_XDECREF(dev);
    Py_XDECREF(strides);
    Py_XDECREF(shape);
    Py_XDECREF(dt);
    Py_DECREF(tn);
    return res;
}

/* "G['np'] is <module 'numpy'>", "G['helper'] is helper", else
   "id(L['o']) == 0x...".  New str or NULL. */
static PyObject *
render_identity(PyObject *src, PyObject *expected)
{
    PyObject *d, *res;

    if (has_readable_name(expected))
        d = describe_ref(expected);
    else if ((d = c_named_ref(expected)) == NULL && !PyErr_Occurred())
        return PyUnicode_FromFormat("id(%U) == %p", src, expected);
    if (d == NULL)
        return NULL;
    res = PyUnicode_FromFormat("%U is %U", src, d);
    Py_DECREF(d);
    return res;
}

static PyObject *render_guard_text(const GuardSet *gs, const Guard *g, PyObject *src);

/* The guard text for guard g whose source renders as src.  New str or NULL.
   g->expected may be held only through a weak reference (TYPE and ID
   guards): rendering runs Python (a metaclass __getattr__, a __repr__),
   which may run the cyclic GC and free an object kept alive by a garbage
   cycle only, so a live expected object is held for the duration. */
static PyObject *
render_guard_with(const GuardSet *gs, const Guard *g, PyObject *src)
{
    bool alive = g->weak == NULL || PyWeakref_GET_OBJECT(g->weak) == g->expected;
    PyObject *hold = alive ? Py_XNewRef(g->expected) : NULL;
    PyObject *res = render_guard_text(gs, g, src);
    Py_XDECREF(hold);
    return res;
}

static PyObject *
render_guard_text(const GuardSet *gs, const Guard *g, PyObject *src)
{
    PyObject *d, *res;

    if (g->kind == GUARD_SAME_AS) {
        PyObject *other = guardset_render_source(gs, (int)g->length);
        res = other ? PyUnicode_FromFormat("%U is %U", src, other) : NULL;
        Py_XDECREF(other);
        return res;
    }

    if (g->weak != NULL && PyWeakref_GET_OBJECT(g->weak) != g->expected)
        return g->kind == GUARD_TYPE_MATCH
               ? PyUnicode_FromFormat("type(%U) is <a class since freed>", src)
               : PyUnicode_FromFormat("%U is <an object since freed>", src);
    switch (g->kind) {
    case GUARD_TYPE_MATCH:
        if ((d = type_name_ref((PyTypeObject *)g->expected)) == NULL)
            return NULL;
        res = PyUnicode_FromFormat("type(%U) is %U", src, d);
        break;
    case GUARD_ID_MATCH:
        return render_identity(src, g->expected);
    case GUARD_EQUALS_MATCH:
        if ((d = describe_ref(g->expected)) == NULL)
            return NULL;
        res = PyUnicode_FromFormat("%U == %U", src, d);
        break;
    case GUARD_TENSOR_MATCH:
        return render_tensor(g->tensor, src);
    case GUARD_LIST_LENGTH:
    case GUARD_TUPLE_LENGTH:
        return PyUnicode_FromFormat("len(%U) == %zd", src, g->length);
    case GUARD_DICT_KEYS:
        if ((d = keys_repr(g->expected, PY_SSIZE_T_MAX)) == NULL)
            return NULL;
        res = PyUnicode_FromFormat("list(%U.keys()) == %U", src, d);
        break;
    case GUARD_HASATTR:
        return PyUnicode_FromFormat(g->length ? "hasattr(%U, %R)" : "not hasattr(%U, %R)",
                                    src, g->expected);
    case GUARD_CODE_MATCH:
        if ((d = describe_ref(g->expected)) == NULL)
            return NULL;
        res = PyUnicode_FromFormat("%U.__code__ is %U", src, d);
        break;
    case GUARD_NOT_NONE:
        return PyUnicode_FromFormat("%U is not None", src);
    case GUARD_DICT_LACKS:
        return PyUnicode_FromFormat("%R not in %U", g->expected, src);
    case GUARD_DICT_EMPTY:
        return PyUnicode_FromFormat("len(%U) == 0", src);
    case GUARD_GRAD_MODE:
        return PyUnicode_FromFormat("%U == %s", src, g->expected == Py_True ? "True" : "False");
    case GUARD_BACKEND_MATCH:
        if ((d = describe_ref(g->expected)) == NULL)
            return NULL;
        res = PyUnicode_FromFormat("backend is %U", d);
        break;
    default:
        PyErr_SetString(PyExc_SystemError, "bad guard kind");
        return NULL;
    }
    Py_DECREF(d);
    return res;
}

/* The source of guard g: its accessor rendered, "backend" for
   BACKEND_MATCH, "torch.is_grad_enabled()" for GRAD_MODE.  New str or NULL. */
static PyObject *
guard_source_ref(const GuardSet *gs, const Guard *g)
{
    if (g->kind == GUARD_GRAD_MODE)
        return PyUnicode_FromString("torch.is_grad_enabled()");
    if (g->acc < 0)
        return PyUnicode_FromString("backend");
    return guardset_render_source(gs, g->acc);
}

PyObject *
guardset_render_guard(const GuardSet *gs, int guard)
{
    PyObject *src, *res;

    if (guard < 0 || guard >= gs->n) {
        PyErr_Format(PyExc_IndexError, "no guard %d", guard);
        return NULL;
    }
    if ((src = guard_source_ref(gs, &gs->guards[guard])) == NULL)
        return NULL;
    res = render_guard_with(gs, &gs->guards[guard], src);
    Py_DECREF(src);
    return res;
}

/* ------------------------------------------------------------------ */
/* Rendering: failures.                                                */

/*
 * Why accessor acc has no value: "<missing>" for a frame slot or name,
 * "<no attribute 'y'>", "<no item [2]>", "<no key 'k'>", "<empty cell>",
 * "<not a dict: list>", ... for the first link of its chain that breaks.
 * New str or NULL.
 */
static PyObject *
unreachable_reason(const GuardSet *gs, int acc, const FrameView *fv, PyObject **vals)
{
    const Accessor *a = &gs->acc[acc];
    PyObject *base = NULL;

    if (a->base >= 0 && (base = value_of(gs, a->base, fv, vals)) == NULL)
        return unreachable_reason(gs, a->base, fv, vals);
    switch (a->kind) {
    case ACC_ATTR:
        return PyUnicode_FromFormat("<no attribute %R>", a->key);
    case ACC_ITEM:
        if (!PyList_CheckExact(base) && !PyTuple_CheckExact(base))
            return PyUnicode_FromFormat("<not a list or tuple: %s>",
                                        Py_TYPE(base)->tp_name);
        return PyUnicode_FromFormat("<no item [%zd]: length %zd>", a->index,
                                    Py_SIZE(base));
    case ACC_DICT_ITEM:
        if (!PyDict_CheckExact(base))
            return PyUnicode_FromFormat("<not a dict: %s>", Py_TYPE(base)->tp_name);
        return PyUnicode_FromFormat("<no key %R>", a->key);
    case ACC_CELL:
        if (!PyCell_Check(base))
            return PyUnicode_FromFormat("<not a cell: %s>", Py_TYPE(base)->tp_name);
        return PyUnicode_FromString("<empty cell>");
    default:
        return PyUnicode_FromString("<missing>");
    }
}

/* For a guard that first checks the exact type: "type(src) is list"
   and the type seen.  0 / -1. */
static int
type_failure(PyObject *src, PyTypeObject *want, PyObject *v,
             PyObject **expr, PyObject **observed)
{
    PyObject *tn = type_name_ref(want);

    if (tn == NULL)
        return -1;
    *expr = PyUnicode_FromFormat("type(%U) is %U", src, tn);
    Py_DECREF(tn);
    *observed = type_name_ref(Py_TYPE(v));
    return *expr && *observed ? 0 : -1;
}

/* The part of a TENSOR_MATCH that v fails.  0 / -1. */
static int
tensor_failure(const TensorMeta *tm, PyObject *src, PyObject *v,
               PyObject **expr, PyObject **observed)
{
    TensorView tv;
    PyObject *want = NULL;
    TensorPart part = tensor_mismatch(tm, v, &tv);
    bool torch = tm->device != NULL;

    switch (part) {
    case TM_TYPE:
        return type_failure(src, tm->type, v, expr, observed);
    case TM_DTYPE:
        if ((want = PyObject_Str(tm->dtype)) == NULL)
            break;
        *expr = PyUnicode_FromFormat("%U.dtype == %U", src, want);
        *observed = PyObject_Str(tv.dtype);
        break;
    case TM_DEVICE:
        if ((want = PyObject_Str(tm->device)) == NULL)
            break;
        *expr = PyUnicode_FromFormat("%U.device == %R", src, want);
        *observed = PyObject_Str(tv.device);
        break;
    case TM_SHAPE:
        if ((want = sizes_repr(tm->shape, tm->ndim)) == NULL)
            break;
        *expr = PyUnicode_FromFormat("%U.shape == %U", src, want);
        *observed = sizes_repr(tv.shape, tv.ndim);
        break;
    case TM_STRIDES:
        if ((want = sizes_repr(tm->strides, tm->ndim)) == NULL)
            break;
        *expr = PyUnicode_FromFormat(torch ? "%U.stride() == %U" : "%U.strides == %U", src, want);
        *observed = sizes_repr(tv.strides, tv.ndim);
        break;
    case TM_REQUIRES_GRAD:
        want = Py_NewRef(tm->requires_grad ? Py_True : Py_False);
        *expr = PyUnicode_FromFormat("%U.requires_grad == %R", src, want);
        *observed = PyUnicode_FromString(tv.requires_grad ? "True" : "False");
        break;
    case TM_OK:
    default:        /* passes now: it failed while another thread ran */
        *expr = render_tensor(tm, src);
        *observed = PyUnicode_FromString("<matches now>");
        break;
    }
    tensor_view_done(&tv);
    Py_XDECREF(want);
    return *expr && *observed ? 0 : -1;
}

/* What the value v of a failed guard g is, as the guard sees it.  New str
   or NULL. */
static PyObject *
observed_ref(const Guard *g, PyObject *v)
{
    PyObject *d, *tn, *res;
    int r;

    switch (g->kind) {
    case GUARD_TYPE_MATCH:
        return type_name_ref(Py_TYPE(v));
    case GUARD_EQUALS_MATCH:
        if ((d = describe_ref(v)) == NULL || Py_TYPE(v) == Py_TYPE(g->expected)
            || !is_simple_const(v, 0))
            return d;
        if ((tn = type_name_ref(Py_TYPE(v))) == NULL) {
            Py_DECREF(d);
            return NULL;
        }
        res = PyUnicode_FromFormat("%U (type %U)", d, tn);
        Py_DECREF(tn);
        Py_DECREF(d);
        return res;
    case GUARD_LIST_LENGTH:
    case GUARD_TUPLE_LENGTH:
        return PyUnicode_FromFormat("%zd", Py_SIZE(v));
    case GUARD_DICT_KEYS:
        if ((d = PyDict_Keys(v)) == NULL)
            return NULL;
        res = keys_repr(d, KEYS_SHOWN);
        Py_DECREF(d);
        return res;
    case GUARD_HASATTR:
        r = has_attr(v, g->expected);
        return PyUnicode_FromString(r < 0 ? "<error>" : r ? "True" : "False");
    case GUARD_CODE_MATCH:
        return describe_ref(PyFunction_GET_CODE(v));
    case GUARD_NOT_NONE:
        return PyUnicode_FromString("None");
    case GUARD_SAME_AS:
        return PyUnicode_FromString("another object");
    case GUARD_DICT_LACKS:
        return PyUnicode_FromFormat("%R present", g->expected);
    case GUARD_DICT_EMPTY:
        if (!PyDict_Check(v))
            return type_name_ref(Py_TYPE(v));
        return PyUnicode_FromFormat("%zd", PyDict_GET_SIZE(v));
    default:
        return describe_ref(v);
    }
}

/* expr and observed (new strs) for guard gi, which just failed.  0, or -1
   with an exception (both left NULL). */
static int
failure_render(const GuardSet *gs, int gi, const FrameView *fv, PyObject **vals,
               PyObject *backend, PyObject **expr, PyObject **observed)
{
    const Guard *g = &gs->guards[gi];
    PyObject *src, *v = NULL;
    PyTypeObject *want = NULL;
    int rc = 0;

    *expr = *observed = NULL;
    if ((src = guard_source_ref(gs, g)) == NULL)
        return -1;
    if (g->kind == GUARD_BACKEND_MATCH) {
        *expr = render_guard_with(gs, g, src);
        *observed = backend ? describe_ref(backend) : PyUnicode_FromString("<none>");
        goto out;
    }
    if (g->kind == GUARD_GRAD_MODE) {
        PyObject *now = grad_mode_now();
        *expr = render_guard_with(gs, g, src);
        *observed = PyUnicode_FromString(now == Py_True ? "True" : now == Py_False ? "False"
                                                                                 : "<unreadable>");
        goto out;
    }
    if ((v = value_of(gs, g->acc, fv, vals)) == NULL) {
        *expr = render_guard_with(gs, g, src);
        *observed = unreachable_reason(gs, g->acc, fv, vals);
        goto out;
    }
    switch (g->kind) {
    case GUARD_TENSOR_MATCH:
        rc = tensor_failure(g->tensor, src, v, expr, observed);
        goto out;
    case GUARD_LIST_LENGTH:
        want = &PyList_Type;
        break;
    case GUARD_TUPLE_LENGTH:
        want = &PyTuple_Type;
        break;
    case GUARD_DICT_KEYS:
        want = &PyDict_Type;
        break;
    case GUARD_CODE_MATCH:
        want = &PyFunction_Type;
        break;
    default:
        break;
    }
    if (want != NULL && Py_TYPE(v) != want) {
        rc = type_failure(src, want, v, expr, observed);
        goto out;
    }
    *expr = render_guard_with(gs, g, src);
    *observed = observed_ref(g, v);
out:
    Py_DECREF(src);
    if (rc < 0 || *expr == NULL || *observed == NULL) {
        Py_CLEAR(*expr);
        Py_CLEAR(*observed);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* GuardInfo.                                                          */

static PyStructSequence_Field guard_info_fields[] = {
    {"kind", "guard kind, e.g. 'TENSOR_MATCH'"},
    {"expr", "the guard as a Python-like expression"},
    {"source", "the value it checks, e.g. \"L['x']\" ('backend' for BACKEND_MATCH)"},
    {NULL, NULL},
};

static PyStructSequence_Desc guard_info_desc = {
    "dynscope._C.GuardInfo",
    "One guard of a cache entry: its kind, expression and source.",
    guard_info_fields,
    3,
};

/* Strong; created on first use and kept for the life of the process. */
static PyTypeObject *guard_info_type;

/* A GuardInfo for guard g.  New reference or NULL. */
static PyObject *
guard_info_new(const GuardSet *gs, int g)
{
    PyObject *info, *item;

    info = PyStructSequence_New(guard_info_type);
    if (info == NULL)
        return NULL;
    if ((item = PyUnicode_FromString(guard_kind_name(gs->guards[g].kind))) == NULL)
        goto out_free_info;
    PyStructSequence_SET_ITEM(info, 0, item);
    if ((item = guardset_render_guard(gs, g)) == NULL)
        goto out_free_info;
    PyStructSequence_SET_ITEM(info, 1, item);
    if ((item = guard_source_ref(gs, &gs->guards[g])) == NULL)
        goto out_free_info;
    PyStructSequence_SET_ITEM(info, 2, item);
    return info;

out_free_info:
    Py_DECREF(info);            /* unset fields are NULL: structseq allows it */
    return NULL;
}

/* Create the GuardInfo type unless it exists.  0, or -1 with an exception. */
static int
guard_info_type_ready(void)
{
    if (guard_info_type != NULL)
        return 0;
    guard_info_type = PyStructSequence_NewType(&guard_info_desc);
    if (guard_info_type == NULL) {
        if (!PyErr_Occurred())      /* 3.11 loses the MemoryError of some paths */
            PyErr_NoMemory();
        return -1;
    }
    return 0;
}

int
guards_types_init(PyObject *module)
{
    if (guard_info_type_ready() < 0)
        return -1;
    return PyModule_AddObjectRef(module, "GuardInfo", (PyObject *)guard_info_type);
}

PyObject *
guardset_info_list(const GuardSet *gs)
{
    PyObject *list;

    if (guard_info_type_ready() < 0)
        return NULL;
    if ((list = PyList_New(gs->n)) == NULL)
        return NULL;
    for (int g = 0; g < gs->n; g++) {
        PyObject *info = guard_info_new(gs, g);
        if (info == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, g, info);
    }
    return list;
}
