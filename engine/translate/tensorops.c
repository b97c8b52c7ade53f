/*
 * tensorops.c -- which calls are pure tensor operations, and putting them in
 * the graph (DESIGN.md 3.4).
 *
 * NumPy: an allowlist -- a ufunc (without out=), a NumPy function named
 * below, or an ndarray method named below.
 *
 * PyTorch: a rule, because torch has ~1000 public functions and an allowlist
 * would always lag behind it.  A graph op is any public function of `torch`,
 * `torch.nn.functional`, `torch.linalg`, `torch.fft` or `torch.special` (a
 * builtin or a Python function found in the module's own dict, so that no
 * lazy submodule is imported) and any public torch.Tensor method, except:
 *   - in-place ops (the name ends with '_', e.g. add_, relu_);
 *   - calls passing generator= (tracing saves only the default
 *     generators' states).  Random ops (rand*, normal, bernoulli,
 *     multinomial, poisson, binomial, gumbel_softmax, fractional_max_pool*;
 *     the dropout family and rrelu unless their training/train argument is
 *     a constant False; attention unless its dropout_p is a constant 0) are
 *     graph ops that draw: tracing runs them under saved generator states
 *     (tr_random.c), and so do NumPy's drawing methods of a RandomState or
 *     Generator (np.random.rand, rng.normal);
 *   - global state (manual_seed, seed, get_* / set_* / is_* / are_*, use_*,
 *     compile, vmap, cond, while_loop, typename, sym_*): they read or change
 *     state a graph cannot see, or trace functions of their own;
 *   - I/O and memory aliasing of foreign buffers (save, load, from_file,
 *     from_numpy, frombuffer, from_dlpack);
 *   - Tensor methods with effects (backward, register_hook, retain_grad,
 *     record_stream, pin_memory, ...) or that hand out addresses or data
 *     (data_ptr, storage, item, tolist, numpy, ...);
 *   - calls with out= (they write into a tensor the program can see) or a
 *     true inplace= argument (F.relu(x, inplace=True)).
 * Metadata a TENSOR_MATCH guard fixes (x.size(), x.dim(), x.numel(),
 * x.stride(), x.device, x.requires_grad, torch.is_tensor(x), ...) is folded
 * into a constant instead of becoming a node.  Ops returning a plain tuple
 * or list of tensors (split, chunk, unbind) become one node plus a getitem
 * node per item; ops returning a named tuple (torch.max(x, 0), sort, topk)
 * are call breaks: a rebuilt plain tuple would change the type the program
 * sees.
 *
 * Every op runs once on the example values, so shapes and dtypes of its
 * result are known.  The examples run as eager code would run them -- in
 * the grad mode of the call, never under no_grad -- so the requires_grad of
 * a result is what the graph will produce; grad mode is guarded (GRAD_MODE)
 * in every entry that touches a torch tensor.  Nothing is in-place, so
 * running on the real inputs changes neither them nor their autograd state.
 *
 * NumPy and torch are optional: tensorlib.c finds them in sys.modules (never
 * imports them) and owns their types; this file builds the allowlists above
 * from them, once each library is found.
 */
#include "translate_int.h"   /* TFrame: try blocks of the frames being traced */
#include "../base/tensorlib.h"

#include <numpy/ndarraytypes.h>    /* struct layouts only: no import_array */
#include <numpy/ufuncobject.h>

#include <string.h>

/* NumPy's and torch's modules and types: tensorlib.h.  The allowlists below
   are built from them once each library is found (numpy_ops_loaded,
   torch_ops_loaded), and kept for the process. */
static bool numpy_ops_loaded;         /* NumPy's functions are in pure_functions */
static bool torch_ops_loaded;         /* torch's sets below are made */
static PyObject *pure_functions;      /* strong: set of allowed callables (NumPy and torch) */
static PyObject *pure_methods;        /* strong: set of ndarray method names */
static PyObject *all_methods;         /* strong: set, pure_methods | torch_methods */
static PyObject *node_attributes;     /* strong: set of attribute names */
static PyObject *operator_module;     /* strong */
static PyObject *builtin_getattr;     /* strong: builtins.getattr */

/* torch's rules, once torch is found (all strong, never released). */
static PyObject *torch_functions;     /* set: the torch functions in pure_functions */
static PyObject *torch_methods;       /* set of pure torch.Tensor method names */
static PyObject *torch_fold_methods;  /* set of metadata method names folded to constants */
static PyObject *torch_fold_attrs;    /* set of metadata attribute names folded to constants */
static PyObject *torch_fold_functions;/* set of torch functions folded to constants */
static PyObject *torch_known_results;  /* dict fn -> its result while capturing (below) */
static PyObject *torch_grad_managers;  /* dict cls -> mode it sets (True/False), None:
                                          set_grad_enabled (its argument) */
static PyObject *torch_set_grad_enabled; /* strong: torch._C._set_grad_enabled */
static PyObject *torch_state_managers; /* dict cls -> (enter fn, exit fn, parameter names,
                                          defaults: a tuple, NULL-free, None where
                                          required is marked by required_marker) */
static PyObject *torch_training_rule; /* dict fn -> (arg name, position, default): random
                                         unless that argument is False */
static PyObject *torch_random_functions; /* set: torch functions that always draw */
static PyObject *torch_random_methods; /* set of torch.Tensor method names that draw */
static PyObject *torch_inplace_methods; /* set of in-place torch.Tensor method names
                                          (tr_inplace_method_allowed) */
static PyObject *inplace_operators;   /* strong: set of operator.iadd, ... */

static const char *const numpy_function_names[] = {
    "sum", "mean", "std", "var", "max", "min", "amax", "amin", "prod", "cumsum",
    "cumprod", "argmax", "argmin", "all", "any", "where", "matmul", "dot",
    "vdot", "inner", "outer", "tensordot", "einsum", "reshape", "transpose",
    "swapaxes", "moveaxis", "squeeze", "expand_dims", "concatenate", "stack",
    "vstack", "hstack", "dstack", "column_stack", "clip", "round", "around",
    "zeros", "ones", "full", "zeros_like", "ones_like", "full_like", "arange",
    "linspace", "eye", "identity", "diag", "tril", "triu", "flip", "fliplr",
    "flipud", "roll", "tile", "repeat", "broadcast_to", "ravel", "copy",
    "cross", "trace", "median", "average", "nansum", "nanmean", "nanmax",
    "nanmin", "isclose", "array", "asarray", "atleast_1d", "atleast_2d",
    "diff", "ptp", "sort", "argsort", "take", "count_nonzero", "interp",
    "convolve", "kron", "triu_indices_from", "cov", "corrcoef", NULL,
};

static const char *const linalg_function_names[] = {
    "norm", "inv", "det", "solve", "pinv", "matrix_power", "cholesky", "qr",
    "eigvalsh", "slogdet", NULL,
};

static const char *const ndarray_method_names[] = {
    "sum", "mean", "std", "var", "max", "min", "prod", "cumsum", "cumprod",
    "argmax", "argmin", "all", "any", "reshape", "transpose", "swapaxes",
    "squeeze", "flatten", "ravel", "copy", "astype", "clip", "round", "dot",
    "repeat", "take", "conj", "conjugate", "diagonal", "trace", "ptp",
    "view", "__abs__", "__neg__", NULL,
};

/* Attributes read through tensorops_call(getattr): those computed by a node
   (x.T), and torch metadata folded to constants (torch_fold_attr_names). */
static const char *const node_attribute_names[] = {
    "T", "mT", "H", "mH", "real", "imag", "data",
    "device", "requires_grad", "is_cuda", "is_cpu", "is_meta", "is_sparse",
    "is_quantized", "is_mkldnn", "layout", NULL,
};

/* ---- torch name rules (see the file comment) ---- */

static const char *const torch_fold_attr_names[] = {
    "device", "requires_grad", "is_cuda", "is_cpu", "is_meta", "is_sparse",
    "is_quantized", "is_mkldnn", "layout", NULL,
};

/* Tensor methods whose result TENSOR_MATCH (shape, strides, dtype, device)
   fixes: folded to constants. */
static const char *const torch_fold_method_names[] = {
    "size", "stride", "dim", "ndimension", "numel", "nelement", "element_size",
    "is_contiguous", "is_floating_point", "is_complex", "is_signed", "get_device",
    "is_same_size", NULL,
};
/* Of those, the ones that read the shape (an escape on a data-dependent shape). */
static const char *const torch_shape_method_names[] = {
    "size", "stride", "numel", "nelement", "is_contiguous", "is_same_size", NULL,
};

static const char *const torch_fold_function_names[] = {
    "is_tensor", "is_floating_point", "is_complex", "is_signed", "is_same_size",
    "numel", NULL,
};

/* Public names that are not graph ops, beyond the prefix rules. */
static const char *const torch_denied_function_names[] = {
    /* random inside Python code of torch's own (not one op) */
    "lobpcg", "pca_lowrank", "svd_lowrank",
    /* state, transforms */
    "manual_seed", "seed", "initial_seed", "compile", "vmap", "cond", "while_loop",
    "typename", "classproperty", "compiled_with_cxx11_abi", "thread_safe_generator",
    "prepare_multiprocessing_environment",
    /* I/O and foreign memory */
    "save", "load", "from_file", "from_numpy", "frombuffer", "from_dlpack",
    NULL,
};
static const char *const torch_denied_function_prefixes[] = {
    "set_", "get_", "is_", "are_", "use_", "sym_", "profiler_", NULL,
};

/* Functions and methods that draw random numbers: graph ops, under saved
   generator states (tr_random.c). */
static const char *const torch_random_function_names[] = {
    "normal", "bernoulli", "multinomial", "poisson", "binomial", "gumbel_softmax",
    "fractional_max_pool2d", "fractional_max_pool3d", "fractional_max_pool2d_with_indices",
    "fractional_max_pool3d_with_indices", NULL,
};
static const char *const torch_random_function_prefixes[] = {"rand", NULL};
static const char *const torch_random_method_names[] = {
    "bernoulli", "multinomial", "bernoulli_", "uniform_", "normal_", "random_",
    "exponential_", "geometric_", "cauchy_", "log_normal_", NULL,
};
/* operator's in-place functions (x += y), graph ops on torch tensors. */
static const char *const inplace_operator_names[] = {
    "iadd", "isub", "imul", "itruediv", "ifloordiv", "imod", "ipow", "imatmul", "iand",
    "ior", "ixor", "ilshift", "irshift", "setitem", NULL,
};

/*
 * Functions libraries call to ask whether they are being compiled, and
 * what they get while dynscope captures: what they get under TorchDynamo,
 * so that libraries take their compile-friendly path (docs/architecture.md
 * "What captured code sees").  Each is looked up in a module already
 * imported; a missing one is skipped.
 */
static const struct { const char *module, *name; int result; /* 1 True, 0 False, -1 None */ }
torch_known_calls[] = {
    {"torch.compiler", "is_compiling", 1},
    {"torch.compiler", "is_dynamo_compiling", 1},
    {"torch.compiler", "is_exporting", 0},
    {"torch._dynamo", "is_compiling", 1},
    {"torch._dynamo.external_utils", "is_compiling", 1},
    {"torch._utils", "is_compiling", 1},
    {"torch.jit", "is_scripting", 0},
    {"torch.jit", "is_tracing", 0},
    {"torch._C", "_get_tracing_state", -1},
    {NULL, NULL, 0},
};

/* Random unless their training argument is False: name, argument, position
   in a builtin's signature, default (-1: none); or (DROPOUT_P) unless their
   probability argument is a constant 0 (its default): attention with
   dropout_p draws a mask. */
#define DROPOUT_P (-2)
static const struct { const char *name, *arg; int pos, dflt; } torch_training_fns[] = {
    {"dropout", "train", 2, -1}, {"alpha_dropout", "train", 2, -1},
    {"feature_dropout", "train", 2, -1}, {"feature_alpha_dropout", "train", 2, -1},
    {"native_dropout", "train", 2, -1}, {"rrelu", "training", 3, 0},
    {"dropout1d", "training", 2, 1}, {"dropout2d", "training", 2, 1},
    {"dropout3d", "training", 2, 1},
    {"scaled_dot_product_attention", "dropout_p", 4, DROPOUT_P},
    {"multi_head_attention_forward", "dropout_p", 10, DROPOUT_P},
    {NULL, NULL, 0, 0},
};

static const char *const torch_denied_method_names[] = {
    "backward", "register_hook", "register_post_accumulate_grad_hook", "retain_grad",
    "record_stream", "pin_memory", "is_pinned", "is_shared", "storage", "untyped_storage",
    "storage_offset", "storage_type", "data_ptr", "const_data_ptr", "type", "new",
    "tolist", "item", "numpy", "module_load", "dim_order",
    "resize", "resize_as", "as_subclass", "reinforce", "hash_tensor", "is_set_to",
    "is_inference", "is_conj", "is_neg", "is_coalesced", "is_distributed", "is_nonzero",
    NULL,
};

static bool in_names(const char *s, const char *const *names)
{
    for (int i = 0; names[i]; i++)
        if (strcmp(s, names[i]) == 0)
            return true;
    return false;
}

static bool has_prefix(const char *s, const char *const *prefixes)
{
    for (int i = 0; prefixes[i]; i++)
        if (strncmp(s, prefixes[i], strlen(prefixes[i])) == 0)
            return true;
    return false;
}

static PyObject *name_set(const char *const *names)
{
    PyObject *s = PySet_New(NULL);
    for (int i = 0; s && names[i]; i++) {
        PyObject *n = PyUnicode_FromString(names[i]);
        if (n == NULL || PySet_Add(s, n) < 0) {
            Py_XDECREF(n);
            Py_CLEAR(s);
            break;
        }
        Py_DECREF(n);
    }
    return s;
}

/* Add getattr(mod, name) for each name that exists. */
static int add_functions(PyObject *set, PyObject *mod, const char *const *names)
{
    for (int i = 0; names[i]; i++) {
        PyObject *f = PyObject_GetAttrString(mod, names[i]);
        if (f == NULL) {
            PyErr_Clear();
            continue;
        }
        int r = PySet_Add(set, f);
        Py_DECREF(f);
        if (r < 0)
            return -1;
    }
    return 0;
}

/* Add NumPy's allowed functions (np: the numpy module, borrowed).  0 / -1. */
static int load_numpy(PyObject *np)
{
    if (pure_functions == NULL && (pure_functions = PySet_New(NULL)) == NULL)
        return -1;
    if (add_functions(pure_functions, np, numpy_function_names) < 0)
        return -1;
    PyObject *linalg = PyObject_GetAttrString(np, "linalg");
    if (linalg == NULL)
        PyErr_Clear();
    else if (add_functions(pure_functions, linalg, linalg_function_names) < 0) {
        Py_DECREF(linalg);
        return -1;
    }
    Py_XDECREF(linalg);
    return 0;
}

/* Whether public function `name` of a torch namespace is a graph op by the
   name rules alone. */
static bool torch_name_allowed(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || name[0] == '_' || name[n - 1] == '_')
        return false;
    return !in_names(name, torch_denied_function_names)
        && !has_prefix(name, torch_denied_function_prefixes);
}

/* Add the graph-op functions of torch namespace `mod` to pure_functions and
   note the dropout family in torch_training_rule.  0 / -1. */
static int add_torch_namespace(PyObject *mod)
{
    PyObject *d = PyModule_GetDict(mod);      /* borrowed: no lazy imports */
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(d, &pos, &key, &value)) {
        const char *name = PyUnicode_Check(key) ? PyUnicode_AsUTF8(key) : NULL;
        if (name == NULL) {
            PyErr_Clear();
            continue;
        }
        if (!PyCFunction_Check(value) && !PyFunction_Check(value))
            continue;              /* classes, modules, typing objects */
        for (int i = 0; torch_training_fns[i].name; i++) {
            if (strcmp(name, torch_training_fns[i].name) != 0)
                continue;
            PyObject *rule = Py_BuildValue("(sii)", torch_training_fns[i].arg,
                                           torch_training_fns[i].pos, torch_training_fns[i].dflt);
            int r = rule ? PyDict_SetItem(torch_training_rule, value, rule) : -1;
            Py_XDECREF(rule);
            if (r < 0)
                return -1;
            if (PySet_Add(pure_functions, value) < 0 || PySet_Add(torch_functions, value) < 0)
                return -1;
        }
        if (torch_name_allowed(name) || in_names(name, torch_fold_function_names)) {
            if (PySet_Add(pure_functions, value) < 0 || PySet_Add(torch_functions, value) < 0)
                return -1;
        }
        if ((in_names(name, torch_random_function_names)
             || has_prefix(name, torch_random_function_prefixes)) && torch_name_allowed(name)
            && PySet_Add(torch_random_functions, value) < 0)
            return -1;
    }
    return 0;
}

/* Public torch.Tensor methods that are graph ops (or folded metadata). */
static int add_torch_methods(void)
{
    PyObject *mro = tensorlib_tensor_type()->tp_mro;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(mro); k++) {
        PyTypeObject *cls = (PyTypeObject *)PyTuple_GET_ITEM(mro, k);
        if (cls == &PyBaseObject_Type)
            continue;
        PyObject *key, *value;
        Py_ssize_t pos = 0;
        while (PyDict_Next(cls->tp_dict, &pos, &key, &value)) {
            const char *name = PyUnicode_Check(key) ? PyUnicode_AsUTF8(key) : NULL;
            if (name == NULL) {
                PyErr_Clear();
                continue;
            }
            size_t n = strlen(name);
            if (tr_inplace_method_allowed(name) && PyCallable_Check(value) && !PyType_Check(value)) {
                if (PySet_Add(torch_inplace_methods, key) < 0 || PySet_Add(all_methods, key) < 0)
                    return -1;
                continue;
            }
            if (n == 0 || name[0] == '_' || name[n - 1] == '_' || PyType_Check(value)
                || !PyCallable_Check(value) || in_names(name, torch_denied_method_names))
                continue;
            if (strncmp(name, "is_", 3) == 0 && !in_names(name, torch_fold_method_names))
                continue;
            if (PySet_Add(torch_methods, key) < 0 || PySet_Add(all_methods, key) < 0)
                return -1;
        }
    }
    return 0;
}

/* torch's context managers that set global state other than grad mode,
   kept in a graph as a pair of nodes, as TorchDynamo keeps them: enter(
   *arguments) returns the entered mode, exit(mode) leaves it.  A
   parameter without a default is required (NULL default). */
static const struct {
    const char *module, *cls, *enter, *exit;
    const char *params[4];
    const char *defaults[4];      /* Python source of the defaults, NULL: required */
} state_manager_specs[] = {
    {"torch.amp.autocast_mode", "autocast", "_enter_autocast", "_exit_autocast",
     {"device_type", "dtype", "enabled", "cache_enabled"}, {NULL, "None", "True", "None"}},
    {"torch.autograd.grad_mode", "inference_mode", "_enter_inference_mode", "_exit_inference_mode",
     {"mode", NULL, NULL, NULL}, {"True", NULL, NULL, NULL}},
    {NULL, NULL, NULL, NULL, {NULL}, {NULL}},
};

/* The constant a default's source names (None, True, False). */
static PyObject *default_constant(const char *src)
{
    return src == NULL ? NULL : strcmp(src, "True") == 0 ? Py_True
           : strcmp(src, "False") == 0 ? Py_False : Py_None;
}

/* torch_state_managers from state_manager_specs, those this torch has.
   0 / -1. */
static int load_state_managers(void)
{
    if ((torch_state_managers = PyDict_New()) == NULL)
        return -1;
    for (int i = 0; state_manager_specs[i].module; i++) {
        PyObject *m = tensorlib_loaded_module_ref(state_manager_specs[i].module);
        PyObject *cls = m ? PyObject_GetAttrString(m, state_manager_specs[i].cls) : NULL;
        PyObject *enter = cls ? PyObject_GetAttrString(m, state_manager_specs[i].enter) : NULL;
        PyObject *exit = enter ? PyObject_GetAttrString(m, state_manager_specs[i].exit) : NULL;
        Py_XDECREF(m);
        if (exit == NULL) {
            PyErr_Clear();          /* not in this torch: left unmodelled */
            Py_XDECREF(cls);
            Py_XDECREF(enter);
            continue;
        }
        int n = 0;
        while (n < 4 && state_manager_specs[i].params[n])
            n++;
        PyObject *names = PyTuple_New(n), *defaults = PyTuple_New(n);
        for (int k = 0; names && defaults && k < n; k++) {
            PyObject *d = default_constant(state_manager_specs[i].defaults[k]);
            PyTuple_SET_ITEM(names, k, PyUnicode_FromString(state_manager_specs[i].params[k]));
            PyTuple_SET_ITEM(defaults, k, Py_NewRef(d ? d : Py_Ellipsis));  /* ...: required */
        }
        PyObject *spec = names && defaults ? PyTuple_Pack(4, enter, exit, names, defaults) : NULL;
        int rc = spec ? PyDict_SetItem(torch_state_managers, cls, spec) : -1;
        Py_XDECREF(spec);
        Py_XDECREF(names);
        Py_XDECREF(defaults);
        Py_DECREF(cls);
        Py_DECREF(enter);
        Py_DECREF(exit);
        if (rc < 0)
            return -1;
    }
    return 0;
}

/* Make torch's rules (torch: the torch module, borrowed; tensorlib has
   loaded its types).  0 / -1. */
static int load_torch(PyObject *torch)
{
    static const char *const namespaces[] = {"torch.nn.functional", "torch.linalg",
                                             "torch.fft", "torch.special", NULL};
    torch_methods = PySet_New(NULL);
    torch_functions = PySet_New(NULL);
    torch_fold_methods = name_set(torch_fold_method_names);
    torch_fold_attrs = name_set(torch_fold_attr_names);
    torch_fold_functions = PySet_New(NULL);
    torch_training_rule = PyDict_New();
    torch_random_functions = PySet_New(NULL);
    torch_random_methods = name_set(torch_random_method_names);
    torch_inplace_methods = PySet_New(NULL);
    torch_known_results = PyDict_New();
    torch_grad_managers = PyDict_New();
    if (!torch_known_results || !torch_grad_managers)
        return -1;
    static const struct { const char *name; PyObject *mode; } grad_managers[] = {
        {"no_grad", Py_False}, {"enable_grad", Py_True}, {"set_grad_enabled", Py_None}, {NULL, NULL},
    };
    for (int i = 0; grad_managers[i].name; i++) {
        PyObject *cls = PyObject_GetAttrString(torch, grad_managers[i].name);
        int rc = cls ? PyDict_SetItem(torch_grad_managers, cls, grad_managers[i].mode) : 0;
        Py_XDECREF(cls);
        PyErr_Clear();
        if (rc < 0)
            return -1;
    }
    if (load_state_managers() < 0)
        return -1;
    PyObject *tc = PyObject_GetAttrString(torch, "_C");
    torch_set_grad_enabled = tc ? PyObject_GetAttrString(tc, "_set_grad_enabled") : NULL;
    Py_XDECREF(tc);
    PyErr_Clear();
    for (int i = 0; torch_known_calls[i].module; i++) {
        PyObject *m = tensorlib_loaded_module_ref(torch_known_calls[i].module);
        PyObject *fn = m ? PyObject_GetAttrString(m, torch_known_calls[i].name) : NULL;
        Py_XDECREF(m);
        if (fn == NULL) {
            PyErr_Clear();    /* not in this torch: nothing to answer */
            continue;
        }
        int r = torch_known_calls[i].result;
        int rc = PyDict_SetItem(torch_known_results, fn, r < 0 ? Py_None : r ? Py_True : Py_False);
        Py_DECREF(fn);
        if (rc < 0)
            return -1;
    }
    if (!torch_methods || !torch_functions || !torch_fold_methods || !torch_fold_attrs
        || !torch_fold_functions || !torch_training_rule || !torch_random_functions
        || !torch_random_methods || !torch_inplace_methods)
        return -1;
    if (pure_functions == NULL && (pure_functions = PySet_New(NULL)) == NULL)
        return -1;
    if (add_torch_namespace(torch) < 0 || add_functions(torch_fold_functions, torch,
                                                        torch_fold_function_names) < 0)
        return -1;
    for (int i = 0; namespaces[i]; i++) {
        PyObject *m = tensorlib_loaded_module_ref(namespaces[i]);
        if (m == NULL && PyErr_Occurred())
            return -1;
        int r = m ? add_torch_namespace(m) : 0;
        Py_XDECREF(m);
        if (r < 0)
            return -1;
    }
    return add_torch_methods();
}

int tensorops_init(void)
{
    if (operator_module == NULL) {
        operator_module = PyImport_ImportModule("operator");
        pure_methods = name_set(ndarray_method_names);
        all_methods = name_set(ndarray_method_names);
        node_attributes = name_set(node_attribute_names);
        builtin_getattr = PyDict_GetItemString(PyEval_GetBuiltins(), "getattr");
        Py_XINCREF(builtin_getattr);
        inplace_operators = PySet_New(NULL);
        if (inplace_operators == NULL || add_functions(inplace_operators, operator_module
                                                       ? operator_module : Py_None,
                                                       inplace_operator_names) < 0)
            return -1;
        if (!operator_module || !pure_methods || !all_methods || !node_attributes
            || !builtin_getattr)
            return -1;
    }
    /* NumPy not imported: no arrays to capture (and likewise torch) */
    if (!numpy_ops_loaded) {
        int r = tensorlib_numpy_ready();
        if (r < 0 || (r == 1 && load_numpy(tensorlib_numpy()) < 0))
            return -1;
        numpy_ops_loaded = r == 1;
    }
    if (!torch_ops_loaded) {
        int r = tensorlib_torch_ready();
        if (r < 0 || (r == 1 && load_torch(tensorlib_torch()) < 0))
            return -1;
        torch_ops_loaded = r == 1;
    }
    return 0;
}

/* A torch.Tensor of any subclass (results of ops, receivers of methods). */
static bool is_torch_like(PyObject *obj)
{
    return tensorlib_kind(obj) == TENSORLIB_TORCH;
}

/* torch.is_grad_enabled(): 0 / 1, or -1 with an exception (or no torch). */
static int current_grad_mode(void)
{
    PyObject *grad_enabled = tensorlib_grad_enabled_fn();   /* borrowed */
    if (grad_enabled == NULL)
        return -1;
    PyObject *mode = PyObject_CallNoArgs(grad_enabled);
    int r = mode ? PyObject_IsTrue(mode) : -1;
    Py_XDECREF(mode);
    return r;
}

int tensorops_note_torch(Tracer *t)
{
    PyObject *grad_enabled = tensorlib_grad_enabled_fn();   /* borrowed */
    if (grad_enabled == NULL)
        return 0;
    /* the mode the frame was entered in, also inside a `with no_grad()` */
    PyObject *mode = t->grad_mode_start >= 0 ? Py_NewRef(t->grad_mode_start ? Py_True : Py_False)
                                             : PyObject_CallNoArgs(grad_enabled);
    if (mode == NULL)
        return -1;
    int r = guardset_add(t->gs, GUARD_GRAD_MODE, -1, mode, 0);
    Py_DECREF(mode);
    return r < 0 ? -1 : 0;
}

/* warnings.filters swapped for one that ignores everything, or restored.
   The interpreter's C warnings code reads the module attribute on each
   warning; "ignore" returns before a warning registry is written, and
   _filters_mutated() is not called, so nothing of the program's warning
   state changes.  (A thread that warns while fn releases the GIL is
   silenced too: a narrow window, only while compiling.)  Returns the
   filters to restore (new reference), or NULL when not swapped. */
static PyObject *swap_warning_filters(PyObject *restore)
{
    static PyObject *name;   /* "warnings", interned once */
    if (name == NULL && (name = PyUnicode_InternFromString("warnings")) == NULL) {
        PyErr_Clear();
        return NULL;
    }
    PyObject *warnings = PyImport_GetModule(name);
    PyObject *saved = NULL;
    if (warnings != NULL && restore != NULL) {
        if (PyObject_SetAttrString(warnings, "filters", restore) < 0)
            PyErr_Clear();
    }
    else if (warnings != NULL) {
        saved = PyObject_GetAttrString(warnings, "filters");
        PyObject *quiet = saved ? Py_BuildValue("[(sOOOi)]", "ignore", Py_None, PyExc_Warning,
                                                Py_None, 0) : NULL;
        if (quiet == NULL || PyObject_SetAttrString(warnings, "filters", quiet) < 0)
            Py_CLEAR(saved);
        Py_XDECREF(quiet);
    }
    PyErr_Clear();
    Py_XDECREF(warnings);
    return saved;
}

/* Run fn(args, kwargs) with warnings off -- NumPy's floating-point ones and
   those its Python code issues: the op runs again when the graph runs, and
   warns then, once, as eagerly. */
static PyObject *call_quietly(PyObject *fn, PyObject *args, PyObject *kwargs)
{
    PyObject *cm = NULL;
    PyObject *filters = swap_warning_filters(NULL);
    PyObject *numpy = tensorlib_numpy();     /* borrowed */
    if (numpy != NULL) {
        PyObject *errstate = PyObject_GetAttrString(numpy, "errstate");
        PyObject *kw = errstate ? Py_BuildValue("{s:s}", "all", "ignore") : NULL;
        PyObject *noargs = kw ? PyTuple_New(0) : NULL;
        cm = noargs ? PyObject_Call(errstate, noargs, kw) : NULL;
        Py_XDECREF(errstate);
        Py_XDECREF(kw);
        Py_XDECREF(noargs);
        PyObject *entered = cm ? PyObject_CallMethod(cm, "__enter__", NULL) : NULL;
        if (entered == NULL) {
            Py_CLEAR(cm);
            PyErr_Clear();
        }
        Py_XDECREF(entered);
    }
    PyObject *result = PyObject_Call(fn, args, kwargs);
    if (cm != NULL) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyObject *r = PyObject_CallMethod(cm, "__exit__", "OOO", Py_None, Py_None, Py_None);
        if (r == NULL)
            PyErr_Clear();
        Py_XDECREF(r);
        PyErr_Restore(type, value, tb);
        Py_DECREF(cm);
    }
    if (filters != NULL) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        swap_warning_filters(filters);
        PyErr_Restore(type, value, tb);
        Py_DECREF(filters);
    }
    return result;
}

/* A ufunc made with operand flags that let it write into an input (NumPy's
   own _operand_flag_tests.inplace_add; any ufunc built with
   PyUFunc_FromFuncAndDataAndSignature and op_flags) is not pure. */
static bool ufunc_writes_inputs(PyObject *fn)
{
    const PyUFuncObject *u = (const PyUFuncObject *)fn;
    if (u->op_flags == NULL)
        return false;
    for (int i = 0; i < u->nin; i++)
        if (u->op_flags[i] & (NPY_ITER_READWRITE | NPY_ITER_WRITEONLY))
            return true;
    return false;
}

/* The op on the example values: target(*eargs, **ekw), or for a method
   eargs[0].target(*eargs[1:], **ekw); quietly (above).  New or NULL. */
static PyObject *call_on_examples(NodeOp op, PyObject *target, PyObject *eargs, PyObject *ekw)
{
    if (op != NODE_CALL_METHOD)
        return call_quietly(target, eargs, ekw);
    PyObject *meth = PyObject_GetAttr(PyTuple_GET_ITEM(eargs, 0), target);
    PyObject *rest = meth ? PyTuple_GetSlice(eargs, 1, PyTuple_GET_SIZE(eargs)) : NULL;
    PyObject *r = rest ? call_quietly(meth, rest, ekw) : NULL;
    Py_XDECREF(meth);
    Py_XDECREF(rest);
    return r;
}

int tensorops_grad_manager_mode(PyObject *fn, Value **args, int nargs, PyObject *kwnames)
{
    if (torch_grad_managers == NULL || !PyType_Check(fn))
        return -1;
    PyObject *mode = PyDict_GetItemWithError(torch_grad_managers, fn);   /* borrowed */
    if (mode == NULL) {
        PyErr_Clear();
        return -1;
    }
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    if (mode != Py_None)
        return nargs == 0 ? mode == Py_True : -2;
    if (nargs != 1 || nkw > 1 || args[0]->kind != V_CONST || !PyBool_Check(args[0]->obj))
        return -2;
    return args[0]->obj == Py_True;
}

int tensorops_state_manager(PyObject *fn, Value **args, int nargs, PyObject *kwnames,
                            PyObject **enter, PyObject **exit, PyObject **vals)
{
    *vals = NULL;
    if (torch_state_managers == NULL || !PyType_Check(fn))
        return 0;
    PyObject *spec = PyDict_GetItemWithError(torch_state_managers, fn);   /* borrowed */
    if (spec == NULL)
        return PyErr_Occurred() ? -1 : 0;
    *enter = PyTuple_GET_ITEM(spec, 0);
    *exit = PyTuple_GET_ITEM(spec, 1);
    PyObject *names = PyTuple_GET_ITEM(spec, 2), *defaults = PyTuple_GET_ITEM(spec, 3);
    Py_ssize_t n = PyTuple_GET_SIZE(names);
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0, npos = nargs - nkw;
    if (npos > n)
        return -2;
    PyObject *out = PyTuple_New(n);
    if (out == NULL)
        return -1;
    for (Py_ssize_t k = 0; k < n; k++) {
        Value *v = k < npos ? args[k] : NULL;
        for (Py_ssize_t j = 0; j < nkw && v == NULL; j++)
            if (PyUnicode_Compare(PyTuple_GET_ITEM(kwnames, j), PyTuple_GET_ITEM(names, k)) == 0)
                v = args[npos + j];
        PyObject *c = v ? (v->kind == V_CONST ? v->obj : NULL) : PyTuple_GET_ITEM(defaults, k);
        if (c == NULL || c == Py_Ellipsis) {
            Py_DECREF(out);
            return -2;              /* not a constant, or a required one missing */
        }
        PyTuple_SET_ITEM(out, k, Py_NewRef(c));
    }
    for (Py_ssize_t j = 0; j < nkw; j++) {
        int known = 0;
        for (Py_ssize_t k = 0; k < n && !known; k++)
            known = PyUnicode_Compare(PyTuple_GET_ITEM(kwnames, j), PyTuple_GET_ITEM(names, k)) == 0;
        if (!known) {
            Py_DECREF(out);
            return -2;
        }
    }
    *vals = out;
    return 1;
}

int tensorops_set_grad_mode(Tracer *t, int mode, bool add_node)
{
    if (torch_set_grad_enabled == NULL)
        return tracer_unsupported(t, false, "grad mode without torch._C._set_grad_enabled");
    int now = current_grad_mode();
    if (now < 0)
        return PyErr_Occurred() ? -1 : tracer_unsupported(t, false, "grad mode without torch");
    if (t->grad_mode_start < 0) {
        if (tensorops_note_torch(t) < 0)     /* guards the mode the frame starts in */
            return -1;
        t->grad_mode_start = now;
    }
    if (add_node) {
        PyObject *gargs = Py_BuildValue("(O)", mode ? Py_True : Py_False);
        NodeObject *n = gargs ? graph_call(t->graph, NODE_CALL_FUNCTION, torch_set_grad_enabled,
                                           gargs, NULL, "set_grad_enabled", Py_None) : NULL;
        Py_XDECREF(gargs);
        if (n == NULL)
            return -1;
    }
    PyObject *r = PyObject_CallOneArg(torch_set_grad_enabled, mode ? Py_True : Py_False);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    t->grad_mode_now = mode;
    return 0;
}

void tensorops_restore_grad_mode(Tracer *t, int mode)
{
    if (mode < 0 || torch_set_grad_enabled == NULL || mode == t->grad_mode_now)
        return;
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyObject *r = PyObject_CallOneArg(torch_set_grad_enabled, mode ? Py_True : Py_False);
    if (r == NULL)
        PyErr_Clear();
    Py_XDECREF(r);
    PyErr_Restore(type, value, tb);
    t->grad_mode_now = mode;
}

PyObject *tensorops_known_result(PyObject *fn)
{
    if (torch_known_results == NULL)
        return NULL;
    PyObject *r = PyDict_GetItemWithError(torch_known_results, fn);
    if (r == NULL)
        PyErr_Clear();    /* an unhashable callable is not one of them */
    return r;
}

bool tensorops_is_math_function(PyObject *fn)
{
    if (!PyCFunction_Check(fn) || PyCFunction_GET_SELF(fn) == NULL || !PyModule_Check(PyCFunction_GET_SELF(fn)))
        return false;
    const char *mod = PyModule_GetName(PyCFunction_GET_SELF(fn));
    if (mod == NULL) {
        PyErr_Clear();
        return false;
    }
    return strcmp(mod, "math") == 0;
}

bool tensorops_is_dtype_info(PyObject *fn)
{
    PyObject *torch = tensorlib_torch();           /* borrowed, or NULL */
    if (torch == NULL || !PyType_Check(fn))
        return false;
    PyObject *fi = PyObject_GetAttrString(torch, "finfo");
    PyObject *ii = PyObject_GetAttrString(torch, "iinfo");
    bool r = (fi != NULL && fn == fi) || (ii != NULL && fn == ii);
    Py_XDECREF(fi);
    Py_XDECREF(ii);
    PyErr_Clear();
    return r;
}

bool tensorops_is_dtype_info_object(PyObject *obj)
{
    return tensorops_is_dtype_info((PyObject *)Py_TYPE(obj));
}

bool tensorops_is_method_of(PyObject *self, PyObject *name)
{
    PyObject *set = is_torch_like(self) ? torch_methods : pure_methods;
    return set != NULL && PySet_Contains(set, name) == 1;
}

bool tensorops_is_pure_function(PyObject *fn)
{
    if (pure_functions == NULL)
        return false;
    PyTypeObject *ufunc_type = tensorlib_ufunc_type();     /* borrowed */
    if (ufunc_type != NULL && Py_TYPE(fn) == ufunc_type)
        return !ufunc_writes_inputs(fn);
    int r = PySet_Contains(pure_functions, fn);
    if (r < 0) {
        PyErr_Clear();   /* unhashable: not ours */
        return false;
    }
    return r == 1;
}

/* Pure for some tensor type; tensorops_call checks it against the receiver. */
bool tensorops_is_pure_method(PyObject *name)
{
    return PySet_Contains(all_methods, name) == 1;
}

bool tensorops_is_escape_method(PyObject *name)
{
    static const char *const escapes[] = {"item", "tolist", "tobytes", "numpy", "__array__",
                                          "__float__", "__int__", "__bool__", "__index__",
                                          "__complex__", NULL};
    for (int i = 0; escapes[i]; i++)
        if (PyUnicode_CompareWithASCIIString(name, escapes[i]) == 0)
            return true;
    return false;
}

bool tensorops_is_node_attribute(PyObject *name)
{
    return PySet_Contains(node_attributes, name) == 1;
}

PyObject *tensorops_operator(const char *name)
{
    PyObject *f = PyObject_GetAttrString(operator_module, name);
    Py_XDECREF(f);   /* the module keeps it alive: borrowed */
    return f;
}

/* ---- converting Values to graph arguments and example values ---- */

/* The graph argument for v (want_example 0: Node or constant) or its example
   value (want_example 1).  New reference, or NULL when tracing stops. */
static PyObject *convert(Tracer *t, Value *v, int want_example)
{
    switch (v->kind) {
    case V_TENSOR:
        return Py_NewRef(want_example ? v->obj : (PyObject *)v->node);
    case V_CONST:
        if (value_is_plain_constant(v->obj))
            return Py_NewRef(v->obj);
        tracer_unsupported(t, false, "passing a %s to a tensor operation", Py_TYPE(v->obj)->tp_name);
        return NULL;
    case V_TUPLE:
    case V_LIST: {
        PyObject *tup = PyTuple_New(v->n);
        if (tup == NULL)
            return NULL;
        for (int i = 0; i < v->n; i++) {
            PyObject *c = convert(t, v->items[i], want_example);
            if (c == NULL) {
                Py_DECREF(tup);
                return NULL;
            }
            PyTuple_SET_ITEM(tup, i, c);
        }
        if (v->kind == V_TUPLE)
            return tup;
        PyObject *l = PySequence_List(tup);
        Py_DECREF(tup);
        return l;
    }
    case V_SLICE: {
        PyObject *p[3] = {NULL, NULL, NULL};
        for (int i = 0; i < 3; i++) {
            p[i] = convert(t, v->items[i], want_example);
            if (p[i] == NULL)
                goto out_slice;
        }
        PyObject *s = PySlice_New(p[0], p[1], p[2]);
        for (int i = 0; i < 3; i++)
            Py_DECREF(p[i]);
        return s;
    out_slice:
        for (int i = 0; i < 3; i++)
            Py_XDECREF(p[i]);
        return NULL;
    }
    default:
        tracer_unsupported(t, false, "passing this kind of value to a tensor operation");
        return NULL;
    }
}

/* Build (args tuple, kwargs dict) for graph or example from values. */
static int convert_call(Tracer *t, Value **args, int nargs, PyObject *kwnames,
                        int want_example, PyObject **out_args, PyObject **out_kwargs)
{
    int nkw = kwnames ? (int)PyTuple_GET_SIZE(kwnames) : 0;
    int npos = nargs - nkw;
    PyObject *a = PyTuple_New(npos);
    PyObject *kw = PyDict_New();
    if (a == NULL || kw == NULL)
        goto fail;
    for (int i = 0; i < npos; i++) {
        PyObject *c = convert(t, args[i], want_example);
        if (c == NULL)
            goto fail;
        PyTuple_SET_ITEM(a, i, c);
    }
    for (int i = 0; i < nkw; i++) {
        PyObject *c = convert(t, args[npos + i], want_example);
        if (c == NULL || PyDict_SetItem(kw, PyTuple_GET_ITEM(kwnames, i), c) < 0) {
            Py_XDECREF(c);
            goto fail;
        }
        Py_DECREF(c);
    }
    *out_args = a;
    *out_kwargs = kw;
    return 0;
fail:
    Py_XDECREF(a);
    Py_XDECREF(kw);
    return -1;
}

/* Whether a tensor holds booleans (a mask). */
static bool is_bool_tensor(PyObject *obj)
{
    PyObject *dt = PyObject_GetAttrString(obj, "dtype");
    bool is_bool = false;
    if (dt != NULL && tensorlib_is_torch_dtype(dt)) {
        PyObject *b = PyObject_GetAttrString(tensorlib_torch(), "bool");
        is_bool = b == dt;
        Py_XDECREF(b);
    }
    else if (dt != NULL) {
        PyObject *kind = PyObject_GetAttrString(dt, "kind");
        is_bool = kind && PyUnicode_Check(kind) && PyUnicode_CompareWithASCIIString(kind, "b") == 0;
        Py_XDECREF(kind);
    }
    Py_XDECREF(dt);
    PyErr_Clear();
    return is_bool;
}

/* Functions and methods whose result's shape depends on the values of
   their inputs. */
static bool shape_depends_on_data(NodeOp op, PyObject *target, Value **args, int nargs)
{
    static const char *const names[] = {"nonzero", "unique", "argwhere", "flatnonzero",
                                        "compress", "extract", "trim_zeros", "masked_select",
                                        "unique_consecutive", NULL};
    if (op == NODE_CALL_FUNCTION && target == tensorops_operator("getitem") && nargs == 2) {
        /* x[mask]: a boolean index (alone or in a tuple) selects by value */
        Value *idx = args[1];
        Value *one[1] = {idx};
        Value **parts = idx->kind == V_TUPLE ? idx->items : one;
        int n = idx->kind == V_TUPLE ? idx->n : 1;
        for (int i = 0; i < n; i++)
            if (parts[i]->kind == V_TENSOR && is_bool_tensor(parts[i]->obj))
                return true;
        return false;
    }
    PyObject *name = op == NODE_CALL_METHOD ? Py_NewRef(target)
                                            : PyObject_GetAttrString(target, "__name__");
    bool hit = false;
    if (name && PyUnicode_Check(name)) {
        for (int i = 0; names[i] && !hit; i++)
            hit = PyUnicode_CompareWithASCIIString(name, names[i]) == 0;
        /* where(cond) with one argument is nonzero() */
        hit |= PyUnicode_CompareWithASCIIString(name, "where") == 0 && nargs == 1;
    }
    Py_XDECREF(name);
    PyErr_Clear();
    return hit;
}

/* Remember that the nodes among args are read by another node. */
static int mark_used(Tracer *t, Value **args, int nargs)
{
    for (int i = 0; i < nargs; i++) {
        Value *v = args[i];
        if (v->kind == V_TENSOR) {
            if (PySet_Add(t->used_nodes, (PyObject *)v->node) < 0)
                return -1;
        }
        else if (v->kind == V_TUPLE || v->kind == V_LIST || v->kind == V_SLICE) {
            if (mark_used(t, v->items, v->n) < 0)
                return -1;
        }
    }
    return 0;
}

/* ---- torch argument rules ---- */

/* Whether argument v is the constant False (or 0). */
static bool value_is_false(Value *v)
{
    return v->kind == V_CONST && (v->obj == Py_False
                                  || (PyLong_CheckExact(v->obj) && PyLong_AsLong(v->obj) == 0));
}

/* The value of parameter `name` at `pos` in a call (positional or keyword),
   or NULL when the call does not pass it. */
static Value *call_arg(Value **args, int nargs, PyObject *kwnames, const char *name, int pos)
{
    int nkw = kwnames ? (int)PyTuple_GET_SIZE(kwnames) : 0;
    int npos = nargs - nkw;
    for (int i = 0; i < nkw; i++)
        if (PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, i), name) == 0)
            return args[npos + i];
    return pos >= 0 && pos < npos ? args[pos] : NULL;
}

/* Position of positional parameter `name` of a Python function, and its
   default (1 true, 0 false, -1 none or not a constant bool); -1 when absent. */
static int function_param(PyObject *fn, const char *name, int *dflt)
{
    *dflt = -1;
    if (!PyFunction_Check(fn))
        return -1;
    PyCodeObject *co = (PyCodeObject *)PyFunction_GET_CODE(fn);
    PyObject *names = PyCode_GetVarnames(co);
    if (names == NULL) {
        PyErr_Clear();
        return -1;
    }
    int pos = -1;
    for (int i = 0; i < co->co_argcount && i < PyTuple_GET_SIZE(names); i++)
        if (PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(names, i), name) == 0)
            pos = i;
    Py_DECREF(names);
    PyObject *defaults = PyFunction_GET_DEFAULTS(fn);
    if (pos >= 0 && defaults != NULL) {
        Py_ssize_t d = pos - (co->co_argcount - PyTuple_GET_SIZE(defaults));
        if (d >= 0) {
            PyObject *dv = PyTuple_GET_ITEM(defaults, d);
            *dflt = dv == Py_True ? 1 : dv == Py_False ? 0 : -1;
        }
    }
    return pos;
}

/* The rules of the file comment for a call of torch function (or method
   name) `target`: 0 when it is a graph op, 1 when it is one that draws
   random numbers, -1 (a call break) when it is not. */
static int torch_call_rules(Tracer *t, NodeOp op, PyObject *target, const char *hint,
                            Value **args, int nargs, PyObject *kwnames)
{
    int dflt;
    int pos = function_param(target, "inplace", &dflt);
    Value *v = call_arg(args, nargs, kwnames, "inplace", pos);
    if (v != NULL && !value_is_false(v))
        return tracer_break(t, STOP_CALL, "%s with inplace=True (writes into a tensor the "
                            "program can see)", hint);
    PyObject *always = op == NODE_CALL_METHOD ? torch_random_methods : torch_random_functions;
    int r = PySet_Contains(always, target);
    if (r != 0)
        return r;
    PyObject *rule = op == NODE_CALL_METHOD ? NULL : PyDict_GetItemWithError(torch_training_rule, target);
    if (rule == NULL)
        return PyErr_Occurred() ? -1 : 0;
    const char *arg = PyUnicode_AsUTF8(PyTuple_GET_ITEM(rule, 0));
    if (arg == NULL)
        return -1;
    pos = (int)PyLong_AsLong(PyTuple_GET_ITEM(rule, 1));
    dflt = (int)PyLong_AsLong(PyTuple_GET_ITEM(rule, 2));
    if (dflt == DROPOUT_P) {
        int ignored;
        if (PyFunction_Check(target))
            pos = function_param(target, arg, &ignored);
        v = call_arg(args, nargs, kwnames, arg, pos);
        bool zero = v == NULL || (v->kind == V_CONST && (PyFloat_CheckExact(v->obj) || PyLong_CheckExact(v->obj))
                                  && PyObject_IsTrue(v->obj) == 0);
        return zero ? 0 : 1;
    }
    if (PyFunction_Check(target)) {
        arg = "training";
        pos = function_param(target, arg, &dflt);
    }
    v = call_arg(args, nargs, kwnames, arg, pos);
    return (v != NULL ? !value_is_false(v) : dflt != 0) ? 1 : 0;
}

/* A random op is about to run on the examples (eargs, ekw): 0 when every
   tensor it is given is on a device whose generator tr_random.c saves, and
   that generator's state is saved; -1 (a call break) when not. */
static int note_random(Tracer *t, const char *hint, PyObject *eargs, PyObject *ekw)
{
    PyObject *items[2] = {eargs, ekw ? PyDict_Values(ekw) : NULL};
    if (ekw != NULL && items[1] == NULL)
        return -1;
    int ok = 1;
    for (int k = 0; k < 2 && ok == 1; k++)
        for (Py_ssize_t i = 0; items[k] && ok == 1 && i < PySequence_Fast_GET_SIZE(items[k]); i++) {
            PyObject *a = PySequence_Fast_GET_ITEM(items[k], i);
            if (is_torch_like(a))
                ok = tr_random_torch_device_ok(a);
        }
    Py_XDECREF(items[1]);
    if (ok < 0)
        return -1;
    if (ok == 0)
        return tracer_break(t, STOP_CALL, "%s draws random numbers on a device other than "
                            "the CPU or CUDA", hint);
    return tr_random_note_torch(t);
}

/* ---- folding metadata into constants ---- */

static bool name_in_set(PyObject *set, PyObject *name)
{
    return set != NULL && PyUnicode_Check(name) && PySet_Contains(set, name) == 1;
}

/* Whether a value (a tuple or list of them too, as np.zeros((n, 4)) takes)
   is known only when the graph runs in a way a result's shape may follow:
   a tensor whose shape is, a number that is a graph input or computed from
   one. */
static bool any_dynshape(Value **args, int nargs)
{
    for (int i = 0; i < nargs; i++) {
        Value *a = args[i];
        if (a->kind == V_TENSOR && a->dynshape)
            return true;
        if ((a->kind == V_TUPLE || a->kind == V_LIST) && a->n > 0 && any_dynshape(a->items, a->n))
            return true;
    }
    return false;
}

/*
 * Metadata of torch tensors that the guards fix -- x.size(), x.dim(),
 * x.device, torch.is_tensor(x), ... -- as a V_CONST computed on the
 * examples.  Returns the value, NULL when tracing stops, or `not_metadata`
 * when the call is not such a read.
 */
static Value *fold_metadata(Tracer *t, NodeOp op, PyObject *target, const char *hint,
                            Value **args, int nargs, PyObject *eargs, PyObject *ekw,
                            Value *not_metadata)
{
    bool shape_read;
    if (op == NODE_CALL_METHOD) {
        if (!is_torch_like(PyTuple_GET_ITEM(eargs, 0)) || !name_in_set(torch_fold_methods, target))
            return not_metadata;
        shape_read = in_names(hint, torch_shape_method_names);
    }
    else if (target == builtin_getattr && nargs == 2 && args[1]->kind == V_CONST) {
        if (!is_torch_like(PyTuple_GET_ITEM(eargs, 0)) || !name_in_set(torch_fold_attrs, args[1]->obj))
            return not_metadata;
        shape_read = false;
    }
    else if (torch_fold_functions != NULL && PySet_Contains(torch_fold_functions, target) == 1) {
        shape_read = strcmp(hint, "numel") == 0 || strcmp(hint, "is_same_size") == 0;
    }
    else {
        return not_metadata;
    }
    if (shape_read && any_dynshape(args, nargs)) {
        /* sizes known when the graph runs: size(d), numel() are graph ops,
           size() their tuple; strides and contiguity escape */
        if (op == NODE_CALL_METHOD && strcmp(hint, "size") == 0 && nargs == 1)
            return tensorops_shape(t, args[0]);
        if (op == NODE_CALL_METHOD && (strcmp(hint, "size") == 0 || strcmp(hint, "numel") == 0
                                       || strcmp(hint, "nelement") == 0))
            return not_metadata;
        return tracer_break(t, STOP_ESCAPE, "data escape: %s of a tensor whose shape depends "
                            "on its values", hint), NULL;
    }
    PyObject *r = call_on_examples(op, target, eargs, ekw);
    if (r == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_Exception))
            return NULL;
        PyErr_Clear();
        return tracer_unsupported(t, false, "%s raised while tracing", hint), NULL;
    }
    if (tensorops_note_torch(t) < 0) {
        Py_DECREF(r);
        return NULL;
    }
    Value *v = value_new(t, V_CONST, r);
    Py_DECREF(r);
    return v;
}

/* ---- results ---- */

/* Whether result is something a V_TENSOR may hold: an array, a torch tensor,
   a NumPy scalar or a Python number. */
static bool is_tensor_result(PyObject *r)
{
    return tensorlib_is_tensor(r)
        || tensorlib_is_numpy_scalar(r)
        || PyFloat_CheckExact(r) || PyLong_CheckExact(r)
        || PyBool_Check(r) || PyComplex_CheckExact(r);
}

/* Whether r is an exact tuple or list whose items are arrays or tensors. */
static bool is_tensor_sequence(PyObject *r)
{
    if (!PyTuple_CheckExact(r) && !PyList_CheckExact(r))
        return false;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(r);
    if (n == 0 || n > 1024)
        return false;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *x = PySequence_Fast_GET_ITEM(r, i);
        if (!tensorlib_is_tensor(x))
            return false;
    }
    return true;
}

/* The V_TUPLE / V_LIST of a node returning a sequence of tensors: one
   getitem node per item.  The items are marked used, so an item nothing
   reads is dead code, not a graph output.  NULL when tracing stops. */
static Value *sequence_result(Tracer *t, NodeObject *node, PyObject *result, bool dynshape)
{
    Value *out = value_new(t, PyTuple_CheckExact(result) ? V_TUPLE : V_LIST, NULL);
    PyObject *getitem = tensorops_operator("getitem");
    if (out == NULL || getitem == NULL || PySet_Add(t->used_nodes, (PyObject *)node) < 0)
        return NULL;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(result); i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(result, i);
        PyObject *gargs = Py_BuildValue("(On)", (PyObject *)node, i);
        NodeObject *in = gargs ? graph_call(t->graph, NODE_CALL_FUNCTION, getitem, gargs, NULL,
                                            "getitem", item) : NULL;
        Py_XDECREF(gargs);
        if (in == NULL || PySet_Add(t->used_nodes, (PyObject *)in) < 0)
            return NULL;
        Value *iv = value_new(t, V_TENSOR, item);
        if (iv == NULL || value_append(t, out, iv) < 0)
            return NULL;
        iv->node = in;
        iv->dynshape = dynshape;
    }
    return out;
}

/* The method check against the receiver: ndarray methods for arrays, torch
   methods for tensors.  0, or -1 (a call break). */
static int check_method(Tracer *t, PyObject *self, PyObject *name)
{
    PyObject *set = is_torch_like(self) ? torch_methods : pure_methods;
    if (set != NULL && PySet_Contains(set, name) == 1)
        return 0;
    if (is_torch_like(self) && torch_inplace_methods && PySet_Contains(torch_inplace_methods, name) == 1)
        return 0;
    return tracer_break(t, STOP_CALL, "call to .%U() of a %s, not a pure tensor method",
                        name, Py_TYPE(self)->tp_name);
}

/* Python numbers raise where arrays warn: 1 / 0.0, 2 ** 5000.0, 1 << -1.
   When such an op on numbers that are graph inputs (or computed from
   them) is inside a try block of a frame being traced, the graph would
   raise outside it: tracing stops (the op runs eagerly, in the block).
   Returns true when it stopped. */
static bool numbers_may_raise_in_try(Tracer *t, PyObject *target, const char *hint, PyObject *eargs)
{
    static const char *const raising[] = {
        "truediv", "floordiv", "mod", "pow", "lshift", "rshift", "itruediv", "ifloordiv",
        "imod", "ipow", "ilshift", "irshift", NULL,
    };
    if (!PyCFunction_Check(target) || PyTuple_GET_SIZE(eargs) != 2 || !in_names(hint, raising))
        return false;
    for (Py_ssize_t i = 0; i < 2; i++) {
        PyObject *a = PyTuple_GET_ITEM(eargs, i);
        if (!PyLong_Check(a) && !PyFloat_Check(a) && !PyComplex_Check(a))
            return false;
    }
    for (TFrame *f = t->current; f != NULL; f = f->parent)
        if (code_instr_protected(f->code, f->cur_instr)) {
            tracer_unsupported(t, false, "%s of numbers known only when the graph runs, inside "
                               "a try block (it may raise there)", hint);
            return true;
        }
    return false;
}

/* Whether the call writes into its first argument: an in-place method or
   operator (x.add_(y), x += y). */
static bool is_inplace_op(NodeOp op, PyObject *target)
{
    if (op == NODE_CALL_METHOD)
        return PySet_Contains(torch_inplace_methods, target) == 1;
    return op == NODE_CALL_FUNCTION && PySet_Contains(inplace_operators, target) == 1;
}

/* Whether the call is a torch function or a method of a torch tensor. */
static bool is_torch_call(NodeOp op, PyObject *target, PyObject *eargs)
{
    if (op == NODE_CALL_METHOD)
        return is_torch_like(PyTuple_GET_ITEM(eargs, 0));
    return torch_functions != NULL && PySet_Contains(torch_functions, target) == 1;
}

Value *tensorops_call(Tracer *t, NodeOp op, PyObject *target, const char *name_hint,
                      Value **args, int nargs, PyObject *kwnames)
{
    PyTypeObject *ufunc_type = tensorlib_ufunc_type();     /* borrowed */
    if (ufunc_type != NULL && Py_TYPE(target) == ufunc_type) {
        /* a ufunc's positional arguments past nin are outputs */
        PyObject *nin = PyObject_GetAttrString(target, "nin");
        long n = nin ? PyLong_AsLong(nin) : -1;
        Py_XDECREF(nin);
        if (n < 0) {
            PyErr_Clear();
        }
        else if (nargs - (kwnames ? PyTuple_GET_SIZE(kwnames) : 0) > n) {
            return tracer_break(t, STOP_CALL, "%s with a positional out argument (writes into an "
                                "array the program can see)", name_hint), NULL;
        }
    }
    bool dynshape = any_dynshape(args, nargs);
    if (kwnames) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(kwnames); i++) {
            if (PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, i), "out") == 0)
                return tracer_break(t, STOP_CALL, "%s with out= (writes into an array the program can see)", name_hint), NULL;
            Value *g = args[nargs - PyTuple_GET_SIZE(kwnames) + i];
            if (PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, i), "generator") == 0
                && !(g->kind == V_CONST && g->obj == Py_None))
                return tracer_break(t, STOP_CALL, "%s with generator= (a generator whose state "
                                    "tracing does not save)", name_hint), NULL;
        }
    }
    PyObject *gargs = NULL, *gkw = NULL, *eargs = NULL, *ekw = NULL, *result = NULL;
    Value *v = NULL, not_metadata;
    bool torch_call;
    int random, inplace;
    bool writes;
    PyObject *rng;                  /* borrowed: the NumPy generator drawn from */
    if (convert_call(t, args, nargs, kwnames, 0, &gargs, &gkw) < 0
        || convert_call(t, args, nargs, kwnames, 1, &eargs, &ekw) < 0)
        goto out;
    if (op == NODE_CALL_METHOD && check_method(t, PyTuple_GET_ITEM(eargs, 0), target) < 0)
        goto out;
    v = fold_metadata(t, op, target, name_hint, args, nargs, eargs, ekw, &not_metadata);
    if (v != &not_metadata)
        goto out;
    v = NULL;
    torch_call = is_torch_call(op, target, eargs);
    random = torch_call ? torch_call_rules(t, op, target, name_hint, args, nargs, kwnames) : 0;
    if (random < 0 || (random && note_random(t, name_hint, eargs, ekw) < 0))
        goto out;
    if (numbers_may_raise_in_try(t, target, name_hint, eargs))
        goto out;
    writes = nargs > 0 && args[0]->kind == V_TENSOR && is_torch_like(args[0]->obj)
             && is_inplace_op(op, target);
    inplace = writes ? tr_inplace_prepare(t, args[0], name_hint, eargs) : 0;
    if (inplace < 0)
        goto out;
    if (!torch_call && (rng = tr_random_numpy_owner(target)) != NULL) {
        random = 1;
        if (tr_random_note_numpy(t, rng) < 0)
            goto out;
    }

    /* Run the op once on the example values. */
    result = call_on_examples(op, target, eargs, ekw);
    if (result == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_Exception))
            goto out;   /* KeyboardInterrupt and the like propagate */
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyErr_NormalizeException(&type, &value, &tb);
        tracer_unsupported(t, false, "%s raised %s: %S while tracing", name_hint,
                           ((PyTypeObject *)type)->tp_name, value ? value : Py_None);
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
        goto out;
    }
    if (writes && result == Py_None) {
        /* t[idx] = v: a node of its own that nothing reads (a graph output,
           so it runs); later reads of t keep reading t's node, after it */
        NodeObject *node = graph_call(t->graph, op, target, gargs, gkw, name_hint, result);
        if (node != NULL && mark_used(t, args, nargs) == 0)
            v = args[0];
        goto out;
    }
    bool sequence = !is_tensor_result(result) && is_tensor_sequence(result);
    if (!is_tensor_result(result) && !sequence) {
        if (random)   /* a number drawn: the draw runs eagerly (the state is put back) */
            tracer_break(t, STOP_CALL, "%s returns a %s, not an array", name_hint,
                         Py_TYPE(result)->tp_name);
        else if (PyTuple_Check(result) && !PyTuple_CheckExact(result))
            tracer_break(t, STOP_CALL, "%s returns a %s (a named tuple), which graphs do not "
                         "model", name_hint, Py_TYPE(result)->tp_name);
        else
            tracer_unsupported(t, false, "%s returned a %s, not an array", name_hint,
                               Py_TYPE(result)->tp_name);
        goto out;
    }
    if ((torch_call || is_torch_like(result)) && tensorops_note_torch(t) < 0)
        goto out;
    if (!dynshape)
        dynshape = shape_depends_on_data(op, target, args, nargs);
    NodeObject *node = graph_call(t->graph, op, target, gargs, gkw, name_hint, result);
    if (node == NULL || mark_used(t, args, nargs) < 0)
        goto out;
    if (sequence) {
        v = sequence_result(t, node, result, dynshape);
        goto out;
    }
    if (inplace == 1) {
        /* the program's tensor, changed by this node from here on: its one
           Value reads the node (its example keeps the old contents) */
        v = args[0];
        v->node = node;
        goto out;
    }
    v = value_new(t, V_TENSOR, result);
    if (v) {
        v->node = node;
        v->dynshape = dynshape;
    }
out:
    Py_XDECREF(gargs);
    Py_XDECREF(gkw);
    Py_XDECREF(eargs);
    Py_XDECREF(ekw);
    Py_XDECREF(result);
    return v;
}
