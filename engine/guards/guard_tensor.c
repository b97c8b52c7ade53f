/*
 * guard_tensor.c -- TENSOR_MATCH's metadata: capturing a TensorMeta from an
 * example NumPy array or torch tensor, comparing a value against it (the
 * hot path), and rendering it and its mismatches as text.  Contract:
 * guards_int.h ("tensor metadata"); TensorMeta itself: guards.h.
 *
 * Two paths.  NumPy arrays are read from their struct (about 15 ns).  torch
 * tensors, since dynscope does not link against libtorch, are first checked
 * by torch's own C++ tensor check (torch._C._dynamo.guards.TensorGuards, the
 * one TorchDynamo's guards use: exact type, dispatch keys, dtype, device,
 * requires_grad, sizes, strides -- at least what TENSOR_MATCH compares),
 * about 0.13 us per tensor; a tensor it passes matches.  Any other answer
 * (it fails, or this torch has no such check) is decided by reading .dtype,
 * .device, .shape, .stride(), .requires_grad through the Python C API (about
 * 0.36 us), which also says which part differs.
 *
 * Invariants: a TensorMeta keeps the example's type, dtype and (torch)
 * device, never the example; a NumPy builtin descr is held borrowed (see
 * TensorMeta.dtype_borrowed).  Which library an example belongs to is
 * tensorlib's answer (NumPy and torch are never imported here).  GIL.
 */
#include "guards_int.h"
#include "../base/tensorlib.h"

#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/ndarraytypes.h>     /* struct accessors only: no import_array */

#include <string.h>

_Static_assert(sizeof(npy_intp) == sizeof(Py_ssize_t),
               "TensorMeta stores npy_intp shapes as Py_ssize_t");

/* ------------------------------------------------------------------ */
/* Reading a tensor's metadata.                                        */

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

/* (guards_int.h) */
Py_ssize_t
guard_tensor_size(PyObject *v, int dim)
{
    TensorLibKind kind = tensorlib_input_kind(v);
    TensorView tv;
    Py_ssize_t r = -1;

    if ((kind != TENSORLIB_NUMPY && kind != TENSORLIB_TORCH)
        || (kind == TENSORLIB_TORCH && torch_attrs_ready() < 0)
        || tensor_view(v, kind == TENSORLIB_TORCH, &tv) < 0) {
        PyErr_Clear();
        return -1;
    }
    if (dim >= 0 && dim < tv.ndim)
        r = tv.shape[dim];
    tensor_view_done(&tv);
    return r;
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

/* ------------------------------------------------------------------ */
/* Capture.                                                            */

/* A list of n ints, None for -1 (a dynamic size or stride, as
   TensorGuards takes it).  New reference or NULL. */
static PyObject *
int_list(const Py_ssize_t *a, int n)
{
    PyObject *l = PyList_New(n);
    for (int i = 0; l != NULL && i < n; i++) {
        PyObject *x = a[i] < 0 ? Py_NewRef(Py_None) : PyLong_FromSsize_t(a[i]);
        if (x == NULL)
            Py_CLEAR(l);
        else
            PyList_SET_ITEM(l, i, x);
    }
    return l;
}

/* torch._C._dynamo.guards.TensorGuards (borrowed), or NULL when this torch
   has none.  Looked up once. */
static PyObject *
tensor_guards_type(void)
{
    static PyObject *tensor_guards;     /* strong, kept; Py_None: none in this torch */

    if (tensor_guards == NULL) {
        PyObject *torch = tensorlib_torch();                  /* borrowed */
        PyObject *c = torch ? PyObject_GetAttrString(torch, "_C") : NULL;
        PyObject *d = c ? PyObject_GetAttrString(c, "_dynamo") : NULL;
        PyObject *g = d ? PyObject_GetAttrString(d, "guards") : NULL;
        tensor_guards = g ? PyObject_GetAttrString(g, "TensorGuards") : NULL;
        if (tensor_guards == NULL)
            tensor_guards = Py_NewRef(Py_None);
        Py_XDECREF(g);
        Py_XDECREF(d);
        Py_XDECREF(c);
        PyErr_Clear();
    }
    return tensor_guards == Py_None ? NULL : tensor_guards;
}

/*
 * torch's C++ check of n tensors `values` with these sizes and strides,
 * static in every dimension: TensorGuards(*values,
 * dynamic_dims_sizes=[...], dynamic_dims_strides=[...]).check, kept only
 * if it passes the values it was made from.  New reference, or NULL
 * without an exception when this torch has no TensorGuards or it refuses
 * them (the Python-API path then decides every check).
 */
static PyObject *
torch_check_of(PyObject *const *values, const Py_ssize_t *const *shapes,
               const Py_ssize_t *const *strides, const int *ndims, int n)
{
    PyObject *type = tensor_guards_type();                  /* borrowed */
    PyObject *check = NULL, *tg = NULL, *kw = NULL, *args = NULL;
    PyObject *sizes = type ? PyList_New(n) : NULL, *strd = type ? PyList_New(n) : NULL;

    for (int i = 0; sizes != NULL && strd != NULL && i < n; i++) {
        PyObject *s = int_list(shapes[i], ndims[i]), *t = int_list(strides[i], ndims[i]);
        if (s == NULL || t == NULL) {
            Py_XDECREF(s);
            Py_XDECREF(t);
            goto out;
        }
        PyList_SET_ITEM(sizes, i, s);
        PyList_SET_ITEM(strd, i, t);
    }
    if (sizes == NULL || strd == NULL)
        goto out;
    kw = Py_BuildValue("{sOsO}", "dynamic_dims_sizes", sizes, "dynamic_dims_strides", strd);
    args = kw ? PyTuple_New(n) : NULL;
    for (int i = 0; args != NULL && i < n; i++)
        PyTuple_SET_ITEM(args, i, Py_NewRef(values[i]));
    tg = args ? PyObject_Call(type, args, kw) : NULL;
    check = tg ? PyObject_GetAttrString(tg, "check") : NULL;
    /* the check must pass the values it was made from, or it is not the
       check we think */
    PyObject *self_ok = check ? PyObject_Call(check, args, NULL) : NULL;
    if (self_ok != Py_True)
        Py_CLEAR(check);
    Py_XDECREF(self_ok);
out:
    Py_XDECREF(args);
    Py_XDECREF(tg);
    Py_XDECREF(kw);
    Py_XDECREF(sizes);
    Py_XDECREF(strd);
    PyErr_Clear();
    return check;
}

/* See guards_int.h. */
PyObject *
guard_tensor_group_new(const TensorMeta *const *tms, PyObject *const *values, int n)
{
    const Py_ssize_t **shapes = PyMem_Malloc(2 * (size_t)n * sizeof(Py_ssize_t *));
    int *ndims = PyMem_Malloc((size_t)n * sizeof(int));
    PyObject *check = NULL;

    if (shapes != NULL && ndims != NULL) {
        for (int i = 0; i < n; i++) {
            shapes[i] = tms[i]->shape;
            shapes[n + i] = tms[i]->strides;
            ndims[i] = tms[i]->ndim;
        }
        check = torch_check_of(values, shapes, shapes + n, ndims, n);
    }
    PyMem_Free(shapes);
    PyMem_Free(ndims);
    return check;
}

void
guard_tensor_meta_free(TensorMeta *tm)
{
    if (tm == NULL)
        return;
    Py_XDECREF(tm->type);
    if (!tm->dtype_borrowed)
        Py_XDECREF(tm->dtype);
    Py_XDECREF(tm->device);
    Py_XDECREF(tm->torch_check);
    PyMem_Free(tm->shape);
    PyMem_Free(tm->strides);
    PyMem_Free(tm);
}

/* New metadata read from an example array or torch tensor, or NULL with
   TypeError (neither, or unreadable) or MemoryError. */
TensorMeta *
guard_tensor_meta_new(PyObject *example)
{
    return guard_tensor_meta_new_dynamic(example, 0);
}

/* See guards_int.h. */
TensorMeta *
guard_tensor_meta_new_dynamic(PyObject *example, uint32_t dynamic)
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
        for (int d = 0; dynamic != 0 && d < tv.ndim; d++) {
            if (d < 32 && (dynamic & (1u << d)))
                tm->shape[d] = -1;
            tm->strides[d] = -1;
        }
    }
    tm->type = (PyTypeObject *)Py_NewRef(Py_TYPE(example));
    tm->dtype_borrowed = numpy_builtin_descr(tv.dtype);
    tm->dtype = tm->dtype_borrowed ? tv.dtype : Py_NewRef(tv.dtype);
    tm->device = Py_XNewRef(tv.device);
    tm->requires_grad = tv.requires_grad;
    if (is_torch) {
        const Py_ssize_t *shape = tm->shape, *strides = tm->strides;
        tm->torch_check = torch_check_of(&example, &shape, &strides, &tm->ndim, 1);
    }
    tensor_view_done(&tv);
    return tm;

out_free_meta:
    guard_tensor_meta_free(tm);
out_nomem:
    tensor_view_done(&tv);
    PyErr_NoMemory();
    return NULL;
}

/* ------------------------------------------------------------------ */
/* Compare.                                                            */

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

/* Sizes a against the expected b, where -1 is a dynamic dimension: any
   size from 2 on (0 and 1 stay specialized, as broadcasting treats them
   apart). */
static inline bool
sizes_match(const Py_ssize_t *a, const Py_ssize_t *b, int n)
{
    for (int i = 0; i < n; i++)
        if (a[i] != b[i] && !(b[i] == -1 && a[i] >= 2))
            return false;
    return true;
}

/* Strides a against the expected b (-1: not compared). */
static inline bool
strides_match(const Py_ssize_t *a, const Py_ssize_t *b, int n)
{
    for (int i = 0; i < n; i++)
        if (a[i] != b[i] && b[i] != -1)
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
    if (n != tm->ndim || !sizes_match(tv->shape, tm->shape, n))
        return TM_SHAPE;
    stride = PyObject_CallMethodNoArgs(v, torch_attr.stride);
    m = read_sizes(stride, tv->buf + TORCH_MAX_DIMS);
    Py_XDECREF(stride);
    if (m != n)
        goto fail;
    if (!strides_match(tv->strides, tm->strides, n))
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
   Cannot fail.  Inline: the hit path (guard_tensor_matches) makes one call
   per NumPy array, not two. */
static inline TensorPart
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
    if (tv->ndim != tm->ndim || !sizes_match(tv->shape, tm->shape, tm->ndim))
        return TM_SHAPE;
    if (!strides_match(tv->strides, tm->strides, tm->ndim))
        return TM_STRIDES;
    if (tv->requires_grad != tm->requires_grad)
        return TM_REQUIRES_GRAD;
    return TM_OK;
}

/* Whether v passes tm.  Cannot fail. */
bool
guard_tensor_matches(const TensorMeta *tm, PyObject *v)
{
    TensorView tv;

    if (tm->device == NULL && Py_TYPE(v) == tm->type) {     /* NumPy, the short way */
        PyArrayObject *a = (PyArrayObject *)v;
        if ((PyObject *)PyArray_DESCR(a) == tm->dtype && PyArray_NDIM(a) == tm->ndim)
            return sizes_match((const Py_ssize_t *)PyArray_DIMS(a), tm->shape, tm->ndim)
                   && strides_match((const Py_ssize_t *)PyArray_STRIDES(a), tm->strides, tm->ndim);
        /* another descr object may still be an equal dtype: the full way */
    }
    if (tm->torch_check != NULL) {
        PyObject *ok = PyObject_Vectorcall(tm->torch_check, &v, 1, NULL);
        if (ok == Py_True) {
            Py_DECREF(ok);
            return true;
        }
        Py_XDECREF(ok);
        PyErr_Clear();            /* not passed: the full comparison decides */
    }
    TensorPart part = tensor_mismatch(tm, v, &tv);

    if (part != TM_TYPE)
        tensor_view_done(&tv);
    return part == TM_OK;
}

bool
guard_tensor_meta_equal(const TensorMeta *a, const TensorMeta *b)
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
/* Text.                                                               */

/* "(3, 4)", "(3,)", "()" for n sizes.  New str or NULL. */
static PyObject *
sizes_repr(const Py_ssize_t *a, int n)
{
    PyObject *t = PyTuple_New(n), *res;

    if (t == NULL)
        return NULL;
    for (int i = 0; i < n; i++) {
        PyObject *x = a[i] < 0 ? PyUnicode_FromString("?") : PyLong_FromSsize_t(a[i]);
        if (x == NULL) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, i, x);
    }
    res = PyObject_Repr(t);
    if (res != NULL) {          /* ('?', 16) -> (?, 16): a dynamic size */
        PyObject *from = PyUnicode_FromString("'?'"), *to = PyUnicode_FromString("?");
        PyObject *r2 = from && to ? PyUnicode_Replace(res, from, to, -1) : NULL;
        Py_XDECREF(from);
        Py_XDECREF(to);
        Py_SETREF(res, r2);
    }
    Py_DECREF(t);
    return res;
}

/* "type(L['x']) is numpy.ndarray and L['x'].dtype == float32 and
   L['x'].shape == (3, 4) and L['x'].strides == (16, 4)"; for torch
   "type(L['x']) is torch.Tensor and L['x'].dtype == torch.float32 and
   L['x'].device == 'cpu' and L['x'].shape == (3, 4) and
   L['x'].stride() == (4, 1) and L['x'].requires_grad == False".
   New str or NULL. */
PyObject *
guard_tensor_render(const TensorMeta *tm, PyObject *src)
{
    PyObject *tn, *dt = NULL, *shape = NULL, *strides = NULL, *dev = NULL, *res = NULL;

    if ((tn = guard_type_name_ref(tm->type)) == NULL)
        return NULL;
    if ((dt = tensorlib_dtype_str(tm->dtype)) == NULL)
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

/* The part of a TENSOR_MATCH that v fails: expr and observed (new strs).
   0, or -1 with an exception. */
int
guard_tensor_failure(const TensorMeta *tm, PyObject *src, PyObject *v,
                     PyObject **expr, PyObject **observed)
{
    TensorView tv;
    PyObject *want = NULL;
    TensorPart part = tensor_mismatch(tm, v, &tv);
    bool torch = tm->device != NULL;

    switch (part) {
    case TM_TYPE:
        return guard_type_failure(src, tm->type, v, expr, observed);
    case TM_DTYPE:
        if ((want = tensorlib_dtype_str(tm->dtype)) == NULL)
            break;
        *expr = PyUnicode_FromFormat("%U.dtype == %U", src, want);
        *observed = tensorlib_dtype_str(tv.dtype);
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
        *expr = guard_tensor_render(tm, src);
        *observed = PyUnicode_FromString("<matches now>");
        break;
    }
    tensor_view_done(&tv);
    Py_XDECREF(want);
    return *expr && *observed ? 0 : -1;
}
