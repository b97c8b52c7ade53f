/*
 * tensorops.c -- which calls are pure tensor operations, and putting them in
 * the graph (DESIGN.md 3.4).
 *
 * The policy is an allowlist: a NumPy ufunc (without out=), a NumPy function
 * named below, or an ndarray method named below.  Anything else is not a
 * graph op; in-place updates, RNG and I/O are absent on purpose, so tracing
 * never has effects the program could see.  Every op runs once on the
 * example values, so shapes and dtypes of its result are known.
 *
 * NumPy is optional: it is looked up in sys.modules, never imported here.
 */
#include "translate.h"

#include <string.h>

static PyObject *numpy_module;        /* strong once found */
static PyTypeObject *ndarray_type;    /* strong */
static PyTypeObject *generic_type;    /* strong: numpy.generic (scalars) */
static PyTypeObject *dtype_type;      /* strong: numpy.dtype */
static PyTypeObject *ufunc_type;      /* strong: numpy.ufunc */
static PyObject *pure_functions;      /* strong: set of allowed callables */
static PyObject *pure_methods;        /* strong: frozenset of method names */
static PyObject *node_attributes;     /* strong: frozenset of attribute names */
static PyObject *operator_module;     /* strong */

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

static const char *const node_attribute_names[] = {"T", "mT", "real", "imag", NULL};

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

static int load_numpy(PyObject *np)
{
    ndarray_type = (PyTypeObject *)PyObject_GetAttrString(np, "ndarray");
    generic_type = (PyTypeObject *)PyObject_GetAttrString(np, "generic");
    dtype_type = (PyTypeObject *)PyObject_GetAttrString(np, "dtype");
    ufunc_type = (PyTypeObject *)PyObject_GetAttrString(np, "ufunc");
    if (!ndarray_type || !generic_type || !dtype_type || !ufunc_type)
        return -1;
    pure_functions = PySet_New(NULL);
    if (pure_functions == NULL || add_functions(pure_functions, np, numpy_function_names) < 0)
        return -1;
    PyObject *linalg = PyObject_GetAttrString(np, "linalg");
    if (linalg == NULL)
        PyErr_Clear();
    else if (add_functions(pure_functions, linalg, linalg_function_names) < 0) {
        Py_DECREF(linalg);
        return -1;
    }
    Py_XDECREF(linalg);
    numpy_module = Py_NewRef(np);
    return 0;
}

int tensorops_init(void)
{
    if (operator_module == NULL) {
        operator_module = PyImport_ImportModule("operator");
        pure_methods = name_set(ndarray_method_names);
        node_attributes = name_set(node_attribute_names);
        if (!operator_module || !pure_methods || !node_attributes)
            return -1;
    }
    if (numpy_module == NULL) {
        PyObject *name = PyUnicode_FromString("numpy");
        if (name == NULL)
            return -1;
        PyObject *np = PyImport_GetModule(name);
        Py_DECREF(name);
        if (np == NULL) {
            if (PyErr_Occurred())
                return -1;
            return 0;   /* NumPy not imported: no tensors to capture */
        }
        int r = load_numpy(np);
        Py_DECREF(np);
        return r;
    }
    return 0;
}

PyTypeObject *tensor_array_type(void) { return ndarray_type; }
PyTypeObject *tensor_scalar_type(void) { return generic_type; }
PyTypeObject *tensor_dtype_type(void) { return dtype_type; }

bool tensor_is_array(PyObject *obj)
{
    return ndarray_type != NULL && Py_TYPE(obj) == ndarray_type;
}

bool tensor_has_object_dtype(PyObject *obj)
{
    PyObject *dt = PyObject_GetAttrString(obj, "dtype");
    PyObject *kind = dt ? PyObject_GetAttrString(dt, "kind") : NULL;
    bool is_obj = kind && PyUnicode_Check(kind) && PyUnicode_CompareWithASCIIString(kind, "O") == 0;
    Py_XDECREF(dt);
    Py_XDECREF(kind);
    PyErr_Clear();
    return is_obj;
}

/* Run fn(args, kwargs) with NumPy's floating-point warnings off: the op
   runs again when the graph runs, and warns then, once, as eagerly. */
static PyObject *call_quietly(PyObject *fn, PyObject *args, PyObject *kwargs)
{
    PyObject *cm = NULL;
    if (numpy_module != NULL) {
        PyObject *errstate = PyObject_GetAttrString(numpy_module, "errstate");
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
    return result;
}

bool tensorops_is_pure_function(PyObject *fn)
{
    if (numpy_module == NULL)
        return false;
    if (Py_TYPE(fn) == ufunc_type)
        return true;
    int r = PySet_Contains(pure_functions, fn);
    if (r < 0) {
        PyErr_Clear();   /* unhashable: not ours */
        return false;
    }
    return r == 1;
}

bool tensorops_is_pure_method(PyObject *name)
{
    int r = PySet_Contains(pure_methods, name);
    return r == 1;
}

bool tensorops_is_escape_method(PyObject *name)
{
    static const char *const escapes[] = {"item", "tolist", "tobytes", "__float__",
                                          "__int__", "__bool__", "__index__", NULL};
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

/* Functions whose result's shape depends on the values of their inputs. */
static bool shape_depends_on_data(PyObject *target, Value **args, int nargs)
{
    static const char *const names[] = {"nonzero", "unique", "argwhere", "flatnonzero",
                                        "compress", "extract", "trim_zeros", NULL};
    if (target == tensorops_operator("getitem") && nargs == 2) {
        /* x[mask]: a boolean index (alone or in a tuple) selects by value */
        Value *idx = args[1];
        Value *one[1] = {idx};
        Value **parts = idx->kind == V_TUPLE ? idx->items : one;
        int n = idx->kind == V_TUPLE ? idx->n : 1;
        for (int i = 0; i < n; i++) {
            if (parts[i]->kind != V_TENSOR)
                continue;
            PyObject *dt = PyObject_GetAttrString(parts[i]->obj, "dtype");
            PyObject *kind = dt ? PyObject_GetAttrString(dt, "kind") : NULL;
            bool is_bool = kind && PyUnicode_Check(kind) && PyUnicode_CompareWithASCIIString(kind, "b") == 0;
            Py_XDECREF(dt);
            Py_XDECREF(kind);
            PyErr_Clear();
            if (is_bool)
                return true;
        }
        return false;
    }
    PyObject *name = PyObject_GetAttrString(target, "__name__");
    bool hit = false;
    if (name && PyUnicode_Check(name))
        for (int i = 0; names[i] && !hit; i++)
            hit = PyUnicode_CompareWithASCIIString(name, names[i]) == 0;
    Py_XDECREF(name);
    PyErr_Clear();
    if (hit)
        return true;
    /* np.where(cond) with one argument is nonzero() */
    name = PyObject_GetAttrString(target, "__name__");
    hit = name && PyUnicode_Check(name) && PyUnicode_CompareWithASCIIString(name, "where") == 0 && nargs == 1;
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

Value *tensorops_call(Tracer *t, NodeOp op, PyObject *target, const char *name_hint,
                      Value **args, int nargs, PyObject *kwnames)
{
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
    bool dynshape = false;
    for (int i = 0; i < nargs; i++)
        dynshape |= args[i]->kind == V_TENSOR && args[i]->dynshape;
    if (kwnames) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(kwnames); i++) {
            if (PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, i), "out") == 0)
                return tracer_break(t, STOP_CALL, "%s with out= (writes into an array the program can see)", name_hint), NULL;
        }
    }
    PyObject *gargs = NULL, *gkw = NULL, *eargs = NULL, *ekw = NULL, *result = NULL;
    Value *v = NULL;
    if (convert_call(t, args, nargs, kwnames, 0, &gargs, &gkw) < 0
        || convert_call(t, args, nargs, kwnames, 1, &eargs, &ekw) < 0)
        goto out;

    /* Run the op once on the example values. */
    if (op == NODE_CALL_METHOD) {
        PyObject *self = PyTuple_GET_ITEM(eargs, 0);
        PyObject *meth = PyObject_GetAttr(self, target);
        PyObject *rest = meth ? PyTuple_GetSlice(eargs, 1, PyTuple_GET_SIZE(eargs)) : NULL;
        result = rest ? call_quietly(meth, rest, ekw) : NULL;
        Py_XDECREF(meth);
        Py_XDECREF(rest);
    }
    else {
        result = call_quietly(target, eargs, ekw);
    }
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
    if (!(ndarray_type && PyObject_TypeCheck(result, ndarray_type))
        && !(generic_type && PyObject_TypeCheck(result, generic_type))
        && !PyFloat_CheckExact(result) && !PyLong_CheckExact(result)
        && !PyBool_Check(result) && !PyComplex_CheckExact(result)) {
        tracer_unsupported(t, false, "%s returned a %s, not an array", name_hint,
                           Py_TYPE(result)->tp_name);
        goto out;
    }
    if (!dynshape && op == NODE_CALL_FUNCTION)
        dynshape = shape_depends_on_data(target, args, nargs);
    NodeObject *node = graph_call(t->graph, op, target, gargs, gkw, name_hint, result);
    if (node == NULL || mark_used(t, args, nargs) < 0)
        goto out;
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
