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
 * node per item; so do ops returning a named tuple (torch.max(x, 0), sort,
 * topk: a struct sequence), whose Value keeps its type: fields read by
 * name, rebuilt as that type.  Operators of torch.ops: tensorops_library.c.
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
#include "tensorops_int.h"   /* TensorRules; TFrame: try blocks of the frames being traced */
#include "../base/tensorlib.h"

#include <numpy/ndarraytypes.h>    /* struct layouts only: no import_array */
#include <numpy/ufuncobject.h>

#include <string.h>

/* The allowlists and torch's rules (tensorops_int.h). */
TensorRules tensorops_rules;

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
    "is_quantized", "is_mkldnn", "is_nested", "layout", NULL,
};

/* ---- torch name rules (see the file comment) ---- */

static const char *const torch_fold_attr_names[] = {
    "device", "requires_grad", "is_cuda", "is_cpu", "is_meta", "is_sparse",
    "is_quantized", "is_mkldnn", "is_nested", "layout", NULL,
};

/* Tensor methods whose result TENSOR_MATCH (shape, strides, dtype, device)
   fixes: folded to constants. */
static const char *const torch_fold_method_names[] = {
    "size", "stride", "dim", "ndimension", "numel", "nelement", "element_size",
    "is_contiguous", "is_floating_point", "is_complex", "is_signed", "get_device",
    "is_same_size", NULL,
};

static const char *const torch_fold_function_names[] = {
    "is_tensor", "is_floating_point", "is_complex", "is_signed", "is_same_size",
    "numel", NULL,
};

/* Readers of torch's global state (autocast) whose answer a translation
   folds, guarded (STATE_QUERY): C functions, cheap to call again. */
static const char *const torch_state_query_names[] = {
    "is_autocast_enabled", "get_autocast_dtype", "is_autocast_cache_enabled",
    "is_autocast_cpu_enabled", "get_autocast_cpu_dtype", "get_autocast_gpu_dtype", NULL,
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
 * imported; a missing one is skipped.  -2: torch's once-per-key usage
 * log, called on its constant key while tracing (its effect, once) and
 * None in the graph.
 */
static const struct { const char *module, *name; int result; /* 1 True, 0 False, -1 None, -2 above */ }
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
    {"torch._C", "_log_api_usage_once", -2},
    {NULL, NULL, 0},
};

/* Random unless their training argument is False: name, argument, position
   in a builtin's signature, default (-1: none); or (DROPOUT_P) unless their
   probability argument is a constant 0 (its default): attention with
   dropout_p draws a mask. */
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

bool tensorops_in_names(const char *s, const char *const *names)
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
    if (tensorops_rules.pure_functions == NULL && (tensorops_rules.pure_functions = PySet_New(NULL)) == NULL)
        return -1;
    if (add_functions(tensorops_rules.pure_functions, np, numpy_function_names) < 0)
        return -1;
    PyObject *linalg = PyObject_GetAttrString(np, "linalg");
    if (linalg == NULL)
        PyErr_Clear();
    else if (add_functions(tensorops_rules.pure_functions, linalg, linalg_function_names) < 0) {
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
    return !tensorops_in_names(name, torch_denied_function_names)
        && !has_prefix(name, torch_denied_function_prefixes);
}

/* Add the graph-op functions of torch namespace `mod` to tensorops_rules.pure_functions and
   note the dropout family in tensorops_rules.torch_training_rule.  0 / -1. */
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
            int r = rule ? PyDict_SetItem(tensorops_rules.torch_training_rule, value, rule) : -1;
            Py_XDECREF(rule);
            if (r < 0)
                return -1;
            if (PySet_Add(tensorops_rules.pure_functions, value) < 0 || PySet_Add(tensorops_rules.torch_functions, value) < 0)
                return -1;
        }
        if (torch_name_allowed(name) || tensorops_in_names(name, torch_fold_function_names)) {
            if (PySet_Add(tensorops_rules.pure_functions, value) < 0 || PySet_Add(tensorops_rules.torch_functions, value) < 0)
                return -1;
        }
        if ((tensorops_in_names(name, torch_random_function_names)
             || has_prefix(name, torch_random_function_prefixes)) && torch_name_allowed(name)
            && PySet_Add(tensorops_rules.torch_random_functions, value) < 0)
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
                if (PySet_Add(tensorops_rules.torch_inplace_methods, key) < 0 || PySet_Add(tensorops_rules.all_methods, key) < 0)
                    return -1;
                continue;
            }
            if (n == 0 || name[0] == '_' || name[n - 1] == '_' || PyType_Check(value)
                || !PyCallable_Check(value) || tensorops_in_names(name, torch_denied_method_names))
                continue;
            if (strncmp(name, "is_", 3) == 0 && !tensorops_in_names(name, torch_fold_method_names))
                continue;
            if (PySet_Add(tensorops_rules.torch_methods, key) < 0 || PySet_Add(tensorops_rules.all_methods, key) < 0)
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

/* tensorops_rules.torch_state_managers from state_manager_specs, those this torch has.
   0 / -1. */
static int load_state_managers(void)
{
    if ((tensorops_rules.torch_state_managers = PyDict_New()) == NULL)
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
        int rc = spec ? PyDict_SetItem(tensorops_rules.torch_state_managers, cls, spec) : -1;
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
    tensorops_rules.torch_methods = PySet_New(NULL);
    tensorops_rules.torch_functions = PySet_New(NULL);
    tensorops_rules.torch_fold_methods = name_set(torch_fold_method_names);
    tensorops_rules.torch_fold_attrs = name_set(torch_fold_attr_names);
    tensorops_rules.torch_fold_functions = PySet_New(NULL);
    tensorops_rules.torch_training_rule = PyDict_New();
    tensorops_rules.torch_random_functions = PySet_New(NULL);
    tensorops_rules.torch_state_queries = PySet_New(NULL);
    tensorops_rules.torch_random_methods = name_set(torch_random_method_names);
    tensorops_rules.torch_inplace_methods = PySet_New(NULL);
    tensorops_rules.torch_known_results = PyDict_New();
    tensorops_rules.torch_grad_managers = PyDict_New();
    if (!tensorops_rules.torch_known_results || !tensorops_rules.torch_grad_managers)
        return -1;
    static const struct { const char *name; PyObject *mode; } grad_managers[] = {
        {"no_grad", Py_False}, {"enable_grad", Py_True}, {"set_grad_enabled", Py_None}, {NULL, NULL},
    };
    for (int i = 0; grad_managers[i].name; i++) {
        PyObject *cls = PyObject_GetAttrString(torch, grad_managers[i].name);
        int rc = cls ? PyDict_SetItem(tensorops_rules.torch_grad_managers, cls, grad_managers[i].mode) : 0;
        Py_XDECREF(cls);
        PyErr_Clear();
        if (rc < 0)
            return -1;
    }
    if (load_state_managers() < 0)
        return -1;
    PyObject *tc = PyObject_GetAttrString(torch, "_C");
    tensorops_rules.torch_set_grad_enabled = tc ? PyObject_GetAttrString(tc, "_set_grad_enabled") : NULL;
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
        int rc = PyDict_SetItem(tensorops_rules.torch_known_results, fn,
                                r == -2 ? Py_Ellipsis : r < 0 ? Py_None : r ? Py_True : Py_False);
        Py_DECREF(fn);
        if (rc < 0)
            return -1;
    }
    if (!tensorops_rules.torch_methods || !tensorops_rules.torch_functions || !tensorops_rules.torch_fold_methods || !tensorops_rules.torch_fold_attrs
        || !tensorops_rules.torch_fold_functions || !tensorops_rules.torch_training_rule || !tensorops_rules.torch_random_functions
        || !tensorops_rules.torch_random_methods || !tensorops_rules.torch_inplace_methods)
        return -1;
    if (tensorops_rules.pure_functions == NULL && (tensorops_rules.pure_functions = PySet_New(NULL)) == NULL)
        return -1;
    if (add_torch_namespace(torch) < 0 || add_functions(tensorops_rules.torch_fold_functions, torch,
                                                        torch_fold_function_names) < 0
        || tensorops_rules.torch_state_queries == NULL
        || add_functions(tensorops_rules.torch_state_queries, torch, torch_state_query_names) < 0)
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
    if (tensorops_rules.operator_module == NULL) {
        tensorops_rules.operator_module = PyImport_ImportModule("operator");
        tensorops_rules.pure_methods = name_set(ndarray_method_names);
        tensorops_rules.all_methods = name_set(ndarray_method_names);
        tensorops_rules.node_attributes = name_set(node_attribute_names);
        tensorops_rules.builtin_getattr = PyDict_GetItemString(PyEval_GetBuiltins(), "getattr");
        Py_XINCREF(tensorops_rules.builtin_getattr);
        tensorops_rules.inplace_operators = PySet_New(NULL);
        if (tensorops_rules.inplace_operators == NULL || add_functions(tensorops_rules.inplace_operators, tensorops_rules.operator_module
                                                       ? tensorops_rules.operator_module : Py_None,
                                                       inplace_operator_names) < 0)
            return -1;
        if (!tensorops_rules.operator_module || !tensorops_rules.pure_methods || !tensorops_rules.all_methods || !tensorops_rules.node_attributes
            || !tensorops_rules.builtin_getattr)
            return -1;
    }
    /* NumPy not imported: no arrays to capture (and likewise torch) */
    if (!tensorops_rules.numpy_ops_loaded) {
        int r = tensorlib_numpy_ready();
        if (r < 0 || (r == 1 && load_numpy(tensorlib_numpy()) < 0))
            return -1;
        tensorops_rules.numpy_ops_loaded = r == 1;
    }
    if (!tensorops_rules.torch_ops_loaded) {
        int r = tensorlib_torch_ready();
        if (r < 0 || (r == 1 && load_torch(tensorlib_torch()) < 0))
            return -1;
        tensorops_rules.torch_ops_loaded = r == 1;
    }
    return 0;
}

/* A torch.Tensor of any subclass (results of ops, receivers of methods). */
bool tensorops_is_torch_like(PyObject *obj)
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
PyObject *tensorops_call_on_examples(NodeOp op, PyObject *target, PyObject *eargs, PyObject *ekw)
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
    if (tensorops_rules.torch_grad_managers == NULL || !PyType_Check(fn))
        return -1;
    PyObject *mode = PyDict_GetItemWithError(tensorops_rules.torch_grad_managers, fn);   /* borrowed */
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
    if (tensorops_rules.torch_state_managers == NULL || !PyType_Check(fn))
        return 0;
    PyObject *spec = PyDict_GetItemWithError(tensorops_rules.torch_state_managers, fn);   /* borrowed */
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
    if (tensorops_rules.torch_set_grad_enabled == NULL)
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
        NodeObject *n = gargs ? graph_call(t->graph, NODE_CALL_FUNCTION, tensorops_rules.torch_set_grad_enabled,
                                           gargs, NULL, "set_grad_enabled", Py_None) : NULL;
        Py_XDECREF(gargs);
        if (n == NULL)
            return -1;
    }
    PyObject *r = PyObject_CallOneArg(tensorops_rules.torch_set_grad_enabled, mode ? Py_True : Py_False);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    t->grad_mode_now = mode;
    return 0;
}

void tensorops_restore_grad_mode(Tracer *t, int mode)
{
    if (mode < 0 || tensorops_rules.torch_set_grad_enabled == NULL || mode == t->grad_mode_now)
        return;
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyObject *r = PyObject_CallOneArg(tensorops_rules.torch_set_grad_enabled, mode ? Py_True : Py_False);
    if (r == NULL)
        PyErr_Clear();
    Py_XDECREF(r);
    PyErr_Restore(type, value, tb);
    t->grad_mode_now = mode;
}

PyObject *tensorops_known_result(PyObject *fn)
{
    if (tensorops_rules.torch_known_results == NULL)
        return NULL;
    PyObject *r = PyDict_GetItemWithError(tensorops_rules.torch_known_results, fn);
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

bool tensorops_hash_is_identity(PyTypeObject *tp)
{
    /* torch.Tensor.__hash__ is `return id(self)`, never dispatched to
       __torch_function__ (torch/_tensor.py); a subclass may override it */
    PyTypeObject *tensor = tensorlib_tensor_type();
    if (tensor == NULL || !PyType_IsSubtype(tp, tensor))
        return false;
    PyObject *name = PyUnicode_InternFromString("__hash__");
    PyObject *mine = name ? _PyType_Lookup(tp, name) : NULL;                /* borrowed */
    PyObject *torchs = name ? _PyType_Lookup(tensor, name) : NULL;          /* borrowed */
    Py_XDECREF(name);
    PyErr_Clear();
    return mine != NULL && mine == torchs;
}

bool tensorops_is_dtype_info_object(PyObject *obj)
{
    return tensorops_is_dtype_info((PyObject *)Py_TYPE(obj));
}

bool tensorops_is_method_of(PyObject *self, PyObject *name)
{
    PyObject *set = tensorops_is_torch_like(self) ? tensorops_rules.torch_methods : tensorops_rules.pure_methods;
    return set != NULL && PySet_Contains(set, name) == 1;
}

bool tensorops_is_pure_function(PyObject *fn)
{
    if (tensorops_rules.pure_functions == NULL)
        return false;
    PyTypeObject *ufunc_type = tensorlib_ufunc_type();     /* borrowed */
    if (ufunc_type != NULL && Py_TYPE(fn) == ufunc_type)
        return !ufunc_writes_inputs(fn);
    int r = PySet_Contains(tensorops_rules.pure_functions, fn);
    if (r < 0) {
        PyErr_Clear();   /* unhashable: not ours */
        return false;
    }
    return r == 1;
}

/* Pure for some tensor type; tensorops_call checks it against the receiver. */
bool tensorops_is_pure_method(PyObject *name)
{
    return PySet_Contains(tensorops_rules.all_methods, name) == 1;
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
    return PySet_Contains(tensorops_rules.node_attributes, name) == 1;
}

PyObject *tensorops_operator(const char *name)
{
    PyObject *f = PyObject_GetAttrString(tensorops_rules.operator_module, name);
    Py_XDECREF(f);   /* the module keeps it alive: borrowed */
    return f;
}
