/*
 * tensorlib.h -- NumPy and torch as the engine sees them: whether each is
 * loaded, its module, the types the engine asks about, and "is this object
 * a NumPy array or a torch tensor".  Implemented in tensorlib.c, the one
 * place that discovers either library.
 *
 * Invariants:
 *   - NumPy and torch are looked up in sys.modules, never imported: a program
 *     that does not import them never pays for them, and has no arrays or
 *     tensors to capture.
 *   - A library is found at most once: all its fields are set together, by
 *     the first *_ready (or tensorlib_refresh) that sees it in sys.modules,
 *     and are then kept for the life of the process (dynscope.reset() does
 *     not drop them).  Until then every question answers "no" (NONE, NULL,
 *     false) -- the getters never look anything up.
 *   - Every PyObject * returned is borrowed from that state.
 * Everything here runs under the GIL.
 */
#ifndef DYNSCOPE_TENSORLIB_H
#define DYNSCOPE_TENSORLIB_H

#ifndef PY_SSIZE_T_CLEAN
#define PY_SSIZE_T_CLEAN
#endif
#include <Python.h>
#include <stdbool.h>

/* Which library's tensor an object is. */
typedef enum TensorLibKind {
    TENSORLIB_ERROR = -1,   /* tensorlib_discover_kind only: exception set */
    TENSORLIB_NONE = 0,     /* neither (or its library is not loaded) */
    TENSORLIB_NUMPY,        /* a numpy.ndarray */
    TENSORLIB_TORCH,        /* a torch.Tensor */
} TensorLibKind;

/* ---- discovery ---- */

/* Find NumPy (resp. torch) in sys.modules unless found already, and load
   its types.  1 when it is loaded, 0 when it is not imported, -1 with an
   exception when it is but its types cannot be read (nothing is kept then:
   the next call tries again). */
int tensorlib_numpy_ready(void);
int tensorlib_torch_ready(void);
/* Both of the above, NumPy first.  0, or -1 with an exception. */
int tensorlib_refresh(void);
/* Whether torch is in sys.modules right now -- asked each time, not the
   cache (a backend follows the program's imports as they happen).  1 / 0,
   or -1 with an exception. */
int tensorlib_torch_imported(void);
/* sys.modules[name] (e.g. "torch.linalg"): new reference, or NULL -- without
   an exception when it is not imported.  Never imports. */
PyObject *tensorlib_loaded_module_ref(const char *name);
/* sys.modules[module].name: borrowed (the module holds it), or NULL
   without an exception when the module is not imported or lacks it.  For
   functions and classes a module defines once (copy.deepcopy,
   inspect.Signature), compared by identity. */
PyObject *tensorlib_loaded_module_attr(const char *module, const char *name);

/* ---- what is loaded (borrowed, NULL until found) ---- */

PyObject *tensorlib_numpy(void);               /* the numpy module */
PyTypeObject *tensorlib_ndarray_type(void);    /* numpy.ndarray */
PyTypeObject *tensorlib_dtype_type(void);      /* numpy.dtype */
PyTypeObject *tensorlib_ufunc_type(void);      /* numpy.ufunc */
PyObject *tensorlib_torch(void);               /* the torch module */
PyTypeObject *tensorlib_tensor_type(void);     /* torch.Tensor */
PyTypeObject *tensorlib_nn_module_type(void);  /* torch.nn.Module */
/* torch.nn.Sequential and torch.nn.ModuleList as torch.nn names them (not
   checked to be types). */
PyObject *tensorlib_nn_sequential(void);
PyObject *tensorlib_nn_module_list(void);
PyTypeObject *tensorlib_parameter_type(void);   /* torch.nn.Parameter */
PyObject *tensorlib_grad_enabled_fn(void);     /* torch.is_grad_enabled */

/* ---- questions about an object (cannot fail; "no" until loaded) ---- */

/* NUMPY for a numpy.ndarray, TORCH for a torch.Tensor, subclasses included;
   else NONE. */
TensorLibKind tensorlib_kind(PyObject *obj);
/* tensorlib_kind, finding NumPy first and, for an object that is no array,
   torch in sys.modules as needed (tensorlib_*_ready).  TENSORLIB_ERROR with
   an exception when a library's types cannot be read. */
TensorLibKind tensorlib_discover_kind(PyObject *obj);
/* Whether obj is a NumPy array or a torch tensor (tensorlib_kind != NONE). */
bool tensorlib_is_tensor(PyObject *obj);
/* The kind of obj when it is an input the translator makes a placeholder of:
   exactly a numpy.ndarray, or exactly a torch.Tensor or torch.nn.Parameter;
   else NONE. */
TensorLibKind tensorlib_input_kind(PyObject *obj);
/* Whether obj is or holds what the engine captures: an array or tensor, a
   NumPy scalar, a torch.nn.Module (or its class); or, up to `depth` levels
   down, a list, tuple (namedtuples too) or dict holding one (64 items per
   container at most).  Other objects' attributes are not looked into, and
   a module is not counted (see tensorlib_is_library_module).  Finds NumPy
   and torch in sys.modules as needed.  Cannot fail (errors are cleared,
   "no"). */
bool tensorlib_reaches(PyObject *obj, int depth);
/* Whether obj is the numpy or torch module or one of their submodules: a
   global a function names to call into a tensor library.  Cannot fail. */
bool tensorlib_is_library_module(PyObject *obj);
/* A NumPy scalar (numpy.generic or a subclass). */
bool tensorlib_is_numpy_scalar(PyObject *obj);
/* A NumPy dtype (numpy.dtype or a subclass). */
bool tensorlib_is_numpy_dtype(PyObject *obj);
/* str(dtype) for a NumPy or torch dtype (any object: str()).  NumPy's
   dtype.__str__ runs Python (~29,000 instructions); the text of a builtin
   numeric type in a byte order is made once and kept.  New str or NULL with
   an exception. */
PyObject *tensorlib_dtype_str(PyObject *dtype);
/* Whether an object with a .dtype holds Python objects (dtype.kind == 'O':
   its ops run Python code).  Clears any error. */
bool tensorlib_has_object_dtype(PyObject *obj);
/* Exactly a torch.dtype. */
bool tensorlib_is_torch_dtype(PyObject *obj);
/* Whether obj is a torch constant a graph may embed: a torch.Size of ints,
   a torch.dtype, torch.device, torch.layout or torch.memory_format. */
bool tensorlib_is_torch_constant(PyObject *obj);

/* The translator's names for tensorlib_input_kind (translate.c). */
static inline bool
tensor_is_array(PyObject *obj)
{
    return tensorlib_input_kind(obj) == TENSORLIB_NUMPY;
}

static inline bool
tensor_is_torch(PyObject *obj)
{
    return tensorlib_input_kind(obj) == TENSORLIB_TORCH;
}

#endif /* DYNSCOPE_TENSORLIB_H */
