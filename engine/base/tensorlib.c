/*
 * tensorlib.c -- discovery of NumPy and torch, and the type caches every
 * other file asks "is this an array or a tensor" through.  Contract and
 * invariants: tensorlib.h (found in sys.modules, never imported; found once,
 * all of a library's fields together, kept for the process).
 */
#include "tensorlib.h"

#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/ndarraytypes.h>     /* struct accessors only: no import_array */

#include <string.h>

/* torch.Size, torch.dtype, torch.device, torch.layout, torch.memory_format:
   the types of the constants a graph may embed. */
enum { TORCH_SIZE, TORCH_DTYPE, TORCH_DEVICE, TORCH_LAYOUT, TORCH_MEMORY_FORMAT,
       TORCH_NCONST };

/* What is known of NumPy. */
typedef struct NumpyLib {
    PyObject *module;         /* strong: numpy */
    PyTypeObject *ndarray;    /* strong: numpy.ndarray */
    PyTypeObject *generic;    /* strong: numpy.generic (scalars) */
    PyTypeObject *dtype;      /* strong: numpy.dtype */
    PyTypeObject *ufunc;      /* strong: numpy.ufunc */
} NumpyLib;

/* What is known of torch. */
typedef struct TorchLib {
    PyObject *module;         /* strong: torch */
    PyTypeObject *tensor;     /* strong: torch.Tensor */
    PyTypeObject *parameter;  /* strong: torch.nn.Parameter */
    PyTypeObject *nn_module;  /* strong: torch.nn.Module */
    PyObject *nn_sequential;  /* strong: torch.nn.Sequential */
    PyObject *nn_module_list; /* strong: torch.nn.ModuleList */
    PyTypeObject *consts[TORCH_NCONST];  /* strong: see TORCH_SIZE ... */
    PyObject *grad_enabled;   /* strong: torch.is_grad_enabled */
} TorchLib;

/*
 * The module's state.  Owned here and written only by numpy_load /
 * torch_load, each of which fills its library's struct completely or not at
 * all (`module` != NULL means loaded).  Never released: a library, once
 * imported, is not unloaded, and the types stay valid.  GIL.
 */
typedef struct TensorLib {
    NumpyLib np;
    TorchLib torch;
} TensorLib;

static TensorLib state;

/* ------------------------------------------------------------------ */
/* Discovery.                                                          */

/* See tensorlib.h. */
PyObject *
tensorlib_loaded_module_attr(const char *module, const char *name)
{
    PyObject *m = tensorlib_loaded_module_ref(module);
    PyObject *a = m ? PyObject_GetAttrString(m, name) : NULL;
    Py_XDECREF(m);
    if (a == NULL) {
        PyErr_Clear();
        return NULL;
    }
    Py_DECREF(a);               /* the module keeps it */
    return a;
}

PyObject *
tensorlib_loaded_module_ref(const char *name)
{
    /* The names asked for, made once: this runs on every look for a library
       not imported yet (torch, in a NumPy program, on each tensorless frame). */
    static struct { const char *name; PyObject *str; } names[8];   /* str: strong */
    PyObject *n = NULL;
    for (size_t i = 0; i < sizeof names / sizeof names[0] && n == NULL; i++) {
        if (names[i].name == NULL) {
            if ((names[i].str = PyUnicode_InternFromString(name)) == NULL)
                return NULL;
            names[i].name = name;
        }
        if (strcmp(names[i].name, name) == 0)
            n = names[i].str;
    }
    if (n == NULL)          /* more names than slots: made for this call */
        n = PyUnicode_FromString(name);
    else
        Py_INCREF(n);
    if (n == NULL)
        return NULL;
    PyObject *m = PyImport_GetModule(n);
    Py_DECREF(n);
    return m;
}

/* getattr(obj, name) that must be a type: new reference, or NULL with an
   exception (TypeError "<what> is not a type"). */
static PyTypeObject *
type_attr_ref(PyObject *obj, const char *name, const char *what)
{
    PyObject *t = PyObject_GetAttrString(obj, name);

    if (t != NULL && !PyType_Check(t)) {
        Py_DECREF(t);
        PyErr_Format(PyExc_TypeError, "%s is not a type", what);
        return NULL;
    }
    return (PyTypeObject *)t;
}

static void
numpy_clear(NumpyLib *np)
{
    Py_CLEAR(np->module);
    Py_CLEAR(np->ndarray);
    Py_CLEAR(np->generic);
    Py_CLEAR(np->dtype);
    Py_CLEAR(np->ufunc);
}

/* Fill state.np from the module np.  0, or -1 with an exception and
   state.np untouched (still empty). */
static int
numpy_load(PyObject *module)
{
    NumpyLib np = {0};

    np.ndarray = type_attr_ref(module, "ndarray", "numpy.ndarray");
    np.generic = np.ndarray ? type_attr_ref(module, "generic", "numpy.generic") : NULL;
    np.dtype = np.generic ? type_attr_ref(module, "dtype", "numpy.dtype") : NULL;
    np.ufunc = np.dtype ? type_attr_ref(module, "ufunc", "numpy.ufunc") : NULL;
    if (np.ufunc == NULL) {
        numpy_clear(&np);
        return -1;
    }
    np.module = Py_NewRef(module);
    state.np = np;
    return 0;
}

static void
torch_clear(TorchLib *tl)
{
    Py_CLEAR(tl->module);
    Py_CLEAR(tl->tensor);
    Py_CLEAR(tl->parameter);
    Py_CLEAR(tl->nn_module);
    Py_CLEAR(tl->nn_sequential);
    Py_CLEAR(tl->nn_module_list);
    for (int i = 0; i < TORCH_NCONST; i++)
        Py_CLEAR(tl->consts[i]);
    Py_CLEAR(tl->grad_enabled);
}

/* The torch.nn part of tl, read from torch.nn.  0, or -1 with an exception. */
static int
torch_load_nn(PyObject *torch, TorchLib *tl)
{
    PyObject *nn = PyObject_GetAttrString(torch, "nn");

    if (nn == NULL)
        return -1;
    tl->parameter = type_attr_ref(nn, "Parameter", "torch.nn.Parameter");
    tl->nn_module = tl->parameter ? type_attr_ref(nn, "Module", "torch.nn.Module") : NULL;
    tl->nn_sequential = tl->nn_module ? PyObject_GetAttrString(nn, "Sequential") : NULL;
    tl->nn_module_list = tl->nn_sequential ? PyObject_GetAttrString(nn, "ModuleList") : NULL;
    Py_DECREF(nn);
    return tl->nn_module_list != NULL ? 0 : -1;
}

/* Fill state.torch from the module torch.  0, or -1 with an exception and
   state.torch untouched (still empty). */
static int
torch_load(PyObject *torch)
{
    static const char *const const_names[TORCH_NCONST] = {
        [TORCH_SIZE] = "Size", [TORCH_DTYPE] = "dtype", [TORCH_DEVICE] = "device",
        [TORCH_LAYOUT] = "layout", [TORCH_MEMORY_FORMAT] = "memory_format",
    };
    TorchLib tl = {0};

    if ((tl.tensor = type_attr_ref(torch, "Tensor", "torch.Tensor")) == NULL)
        goto out_clear;
    for (int i = 0; i < TORCH_NCONST; i++)
        if ((tl.consts[i] = (PyTypeObject *)PyObject_GetAttrString(torch, const_names[i])) == NULL)
            goto out_clear;
    if (torch_load_nn(torch, &tl) < 0)
        goto out_clear;
    if ((tl.grad_enabled = PyObject_GetAttrString(torch, "is_grad_enabled")) == NULL)
        goto out_clear;
    tl.module = Py_NewRef(torch);
    state.torch = tl;
    return 0;

out_clear:
    torch_clear(&tl);
    return -1;
}

/* Find module `name` in sys.modules and load it with `load` unless
   `loaded`.  1 / 0 / -1 as tensorlib_numpy_ready. */
static int
lib_ready(bool loaded, const char *name, int (*load)(PyObject *))
{
    PyObject *m;
    int r;

    if (loaded)
        return 1;
    if ((m = tensorlib_loaded_module_ref(name)) == NULL)
        return PyErr_Occurred() ? -1 : 0;
    r = load(m);
    Py_DECREF(m);
    return r < 0 ? -1 : 1;
}

int
tensorlib_numpy_ready(void)
{
    return lib_ready(state.np.module != NULL, "numpy", numpy_load);
}

int
tensorlib_torch_ready(void)
{
    return lib_ready(state.torch.module != NULL, "torch", torch_load);
}

int
tensorlib_refresh(void)
{
    if (tensorlib_numpy_ready() < 0 || tensorlib_torch_ready() < 0)
        return -1;
    return 0;
}

int
tensorlib_torch_imported(void)
{
    PyObject *m = tensorlib_loaded_module_ref("torch");

    if (m == NULL)
        return PyErr_Occurred() ? -1 : 0;
    Py_DECREF(m);
    return 1;
}

/* ------------------------------------------------------------------ */
/* What is loaded.                                                     */

PyObject *tensorlib_numpy(void) { return state.np.module; }
PyTypeObject *tensorlib_ndarray_type(void) { return state.np.ndarray; }
PyTypeObject *tensorlib_dtype_type(void) { return state.np.dtype; }
PyTypeObject *tensorlib_ufunc_type(void) { return state.np.ufunc; }
PyObject *tensorlib_torch(void) { return state.torch.module; }
PyTypeObject *tensorlib_tensor_type(void) { return state.torch.tensor; }
PyTypeObject *tensorlib_nn_module_type(void) { return state.torch.nn_module; }
PyTypeObject *tensorlib_parameter_type(void) { return state.torch.parameter; }
PyObject *tensorlib_nn_sequential(void) { return state.torch.nn_sequential; }
PyObject *tensorlib_nn_module_list(void) { return state.torch.nn_module_list; }
PyObject *tensorlib_grad_enabled_fn(void) { return state.torch.grad_enabled; }

/* ------------------------------------------------------------------ */
/* Questions about an object.                                          */

TensorLibKind
tensorlib_kind(PyObject *obj)
{
    if (state.np.ndarray != NULL && PyObject_TypeCheck(obj, state.np.ndarray))
        return TENSORLIB_NUMPY;
    if (state.torch.tensor != NULL && PyObject_TypeCheck(obj, state.torch.tensor))
        return TENSORLIB_TORCH;
    return TENSORLIB_NONE;
}

TensorLibKind
tensorlib_discover_kind(PyObject *obj)
{
    int r = tensorlib_numpy_ready();

    if (r < 0)
        return TENSORLIB_ERROR;
    if (r == 1 && PyObject_TypeCheck(obj, state.np.ndarray))
        return TENSORLIB_NUMPY;
    if ((r = tensorlib_torch_ready()) < 0)
        return TENSORLIB_ERROR;
    if (r == 1 && PyObject_TypeCheck(obj, state.torch.tensor))
        return TENSORLIB_TORCH;
    return TENSORLIB_NONE;
}

bool
tensorlib_is_tensor(PyObject *obj)
{
    return tensorlib_kind(obj) != TENSORLIB_NONE;
}

TensorLibKind
tensorlib_input_kind(PyObject *obj)
{
    PyTypeObject *tp = Py_TYPE(obj);

    if (state.np.ndarray != NULL && tp == state.np.ndarray)
        return TENSORLIB_NUMPY;
    if (state.torch.tensor != NULL
        && (tp == state.torch.tensor || tp == state.torch.parameter))
        return TENSORLIB_TORCH;
    return TENSORLIB_NONE;
}

bool
tensorlib_is_library_module(PyObject *mod)
{
    static const char *const roots[] = {"numpy", "torch"};
    if (!PyModule_Check(mod))
        return false;
    const char *name = PyModule_GetName(mod);
    if (name == NULL) {
        PyErr_Clear();
        return false;
    }
    for (size_t i = 0; i < sizeof roots / sizeof roots[0]; i++) {
        size_t n = strlen(roots[i]);
        if (strncmp(name, roots[i], n) == 0 && (name[n] == '\0' || name[n] == '.'))
            return true;
    }
    return false;
}

#define REACH_ITEMS 64   /* items of a container looked at */

/* Whether any of the n items reaches a tensor. */
static bool
items_reach(PyObject *const *items, Py_ssize_t n, int depth)
{
    for (Py_ssize_t i = 0; i < n && i < REACH_ITEMS; i++)
        if (tensorlib_reaches(items[i], depth))
            return true;
    return false;
}

/* Whether the values of dict d reach a tensor. */
static bool
dict_values_reach(PyObject *d, int depth)
{
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    for (int seen = 0; seen < REACH_ITEMS && PyDict_Next(d, &pos, &key, &value); seen++)
        if (tensorlib_reaches(value, depth))
            return true;
    return false;
}

bool
tensorlib_reaches(PyObject *obj, int depth)
{
    if (obj == NULL || depth < 0)
        return false;
    PyTypeObject *tp = Py_TYPE(obj);
    if (tensorlib_discover_kind(obj) > TENSORLIB_NONE || tensorlib_is_numpy_scalar(obj))
        return true;
    PyErr_Clear();
    if (state.torch.nn_module != NULL
        && (PyObject_TypeCheck(obj, state.torch.nn_module)
            || (PyType_Check(obj) && PyType_IsSubtype((PyTypeObject *)obj, state.torch.nn_module))))
        return true;
    if (PyModule_CheckExact(obj))
        return false;       /* a module counts only as a global the code names */
    if (tp == &PyList_Type || tp == &PyTuple_Type)
        return items_reach(PySequence_Fast_ITEMS(obj), PySequence_Fast_GET_SIZE(obj), depth - 1);
    if (tp == &PyDict_Type)
        return dict_values_reach(obj, depth - 1);
    if (PyTuple_Check(obj))     /* a namedtuple */
        return items_reach(PySequence_Fast_ITEMS(obj), PyTuple_GET_SIZE(obj), depth - 1);
    /* Not into other objects, as torch.compile: reading an instance's
       __dict__ would make CPython materialise it (a change the program
       could measure), and a method that uses arrays names numpy or gets
       one. */
    return false;
}

bool
tensorlib_is_numpy_scalar(PyObject *obj)
{
    return state.np.generic != NULL && PyObject_TypeCheck(obj, state.np.generic);
}

bool
tensorlib_is_numpy_dtype(PyObject *obj)
{
    return state.np.dtype != NULL && PyObject_TypeCheck(obj, state.np.dtype);
}

/* Texts of NumPy's numeric dtypes (type numbers up to NPY_CLONGDOUBLE, and
   NPY_HALF), by type number and byte order: str() of such a descr depends
   on those two alone (not on its metadata; fields and subarrays are
   NPY_VOID's).  Strong references, made on first use. */
static PyObject *dtype_texts[NPY_HALF + 1][4];

static int byteorder_slot(char b)
{
    return b == '<' ? 0 : b == '>' ? 1 : b == '=' ? 2 : b == '|' ? 3 : -1;
}

PyObject *
tensorlib_dtype_str(PyObject *dtype)
{
    if (state.np.dtype == NULL || !PyObject_TypeCheck(dtype, state.np.dtype)
        || Py_TYPE(dtype)->tp_str != state.np.dtype->tp_str)
        return PyObject_Str(dtype);
    const PyArray_Descr *d = (const PyArray_Descr *)dtype;
    int slot = byteorder_slot(d->byteorder);
    if (slot < 0 || !(d->type_num <= NPY_CLONGDOUBLE || d->type_num == NPY_HALF))
        return PyObject_Str(dtype);
    PyObject **text = &dtype_texts[d->type_num][slot];
    if (*text == NULL)
        *text = PyObject_Str(dtype);
    return Py_XNewRef(*text);
}

bool
tensorlib_has_object_dtype(PyObject *obj)
{
    PyObject *dt = PyObject_GetAttrString(obj, "dtype");
    PyObject *kind = dt ? PyObject_GetAttrString(dt, "kind") : NULL;
    bool is_obj = kind && PyUnicode_Check(kind)
                  && PyUnicode_CompareWithASCIIString(kind, "O") == 0;

    Py_XDECREF(dt);
    Py_XDECREF(kind);
    PyErr_Clear();
    return is_obj;
}

bool
tensorlib_is_torch_dtype(PyObject *obj)
{
    return state.torch.consts[TORCH_DTYPE] != NULL
        && Py_TYPE(obj) == state.torch.consts[TORCH_DTYPE];
}

bool
tensorlib_is_torch_constant(PyObject *obj)
{
    PyTypeObject *tp = Py_TYPE(obj);

    if (state.torch.tensor == NULL)
        return false;
    if (tp == state.torch.consts[TORCH_SIZE]) {     /* a tuple of ints */
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(obj); i++)
            if (!PyLong_CheckExact(PyTuple_GET_ITEM(obj, i)))
                return false;
        return true;
    }
    for (int i = TORCH_DTYPE; i < TORCH_NCONST; i++)
        if (tp == state.torch.consts[i])
            return true;
    return false;
}
