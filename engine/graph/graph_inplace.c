/*
 * graph_inplace.c -- buffer reuse in a running graph: an elementwise NumPy
 * op whose array operand dies with it writes its result into that operand's
 * buffer (ufunc(..., out=operand)) instead of allocating a new array.
 *
 * Why: eager NumPy already does this for `(a * b) - 2.0` -- when the left
 * operand of an operator is a temporary (refcount 1) of at least 256 KiB,
 * NumPy's "temporary elision" runs the in-place op, after checking through
 * a backtrace that the caller is the bytecode interpreter.  A graph calls
 * the same ops from C, so NumPy never elides there, and a captured chain
 * allocated (and page-faulted) one fresh buffer per op: 1.5-2x slower than
 * eager from ~100k elements.  Here the decision is made once, when the graph
 * is compiled, and checked per run with a few loads; and it covers more
 * than eager does (ufunc calls like np.sqrt(t), either operand, any size
 * from INPLACE_MIN_BYTES).
 *
 * Invariants (what makes the result bit-identical to eager and invisible):
 *   - Only ufuncs whose every result element is a correctly rounded (or
 *     exact) function of the input elements at the same index: arithmetic,
 *     sqrt, rounding, min/max, bitwise and sign ops.  Their loops give the
 *     same bits whatever buffer they write to.  Real dtypes only.
 *   - And transcendental ufuncs (exp, log1p, tanh, arctan2, ...; the list
 *     is probed_ufuncs) for float32 and float64 results, each only once
 *     dynscope/_ufunc_probe.py has found, on this NumPy and CPU, that it
 *     writes the same bits into an input's buffer or a fresh one at several
 *     alignments as into the one it allocates: NumPy picks their SIMD or
 *     scalar loop by overlap, strides and alignment, and those loops can
 *     differ in the last bit.  They are not run block by block (that is
 *     for the exactly rounded ones).
 *   - The donor is an array the graph itself made (never an input), read
 *     last by this instruction, of the result's dtype and shape at capture;
 *     at run time it must be an exact ndarray, owning, aligned and writeable
 *     data, referenced by nobody but its slot (refcount 1: no view, no
 *     buffer export, no other name), with the capture's descr.
 *   - Every other operand has the type (and, for arrays, the descr) it had
 *     at capture, and an array operand broadcasts to the donor's shape: so
 *     the op's result dtype and shape are the donor's, and out= changes
 *     nothing but where the result lives.  Scalars only as graph constants
 *     (a scalar's value can pick the result dtype under NumPy 1's rules).
 *   - Results of rank 0 are never reused: out= would return a 0-d array
 *     where eager returns a NumPy scalar.
 *
 * Constant scalars: NumPy 2 converts a Python scalar operand (`a + 1.0`)
 * on every call, through its weak-scalar promotion, ~300 ns per op.  When
 * every array operand has one descr D that the scalar converts to exactly
 * (a float with float64; an int with int64, or with float64 up to 2**53),
 * the ufunc's loop and result are those of D with the scalar as a 0-d array
 * of D: the graph makes that read-only 0-d array once and passes it on runs
 * whose array operands still have D (checked per run, with the descrs).
 * Not for a power (ndarray.__pow__ looks at the exponent's type).
 */
#include "graph_int.h"
#include "../base/tensorlib.h"

#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/ndarraytypes.h>     /* struct accessors only: no import_array */

#include <string.h>

/* Below this many bytes a fresh small array comes from NumPy's own cache and
   passing out= costs about what it saves (docs/performance.md, "graphs at
   every size"). */
#define INPLACE_MIN_BYTES 4096

/* ufuncs whose results are exactly rounded elementwise (see the header). */
static const char *const exact_ufuncs[] = {
    "add", "subtract", "multiply", "true_divide", "divide", "floor_divide",
    "remainder", "fmod", "negative", "positive", "absolute", "fabs", "sqrt",
    "square", "reciprocal", "floor", "ceil", "trunc", "rint", "sign",
    "minimum", "maximum", "fmin", "fmax", "copysign", "bitwise_and",
    "bitwise_or", "bitwise_xor", "invert", "left_shift", "right_shift",
    NULL,
};

/* ufuncs that are not exactly rounded (transcendental: their bits depend on
   the loop NumPy picks) but may still reuse a buffer where this NumPy, on
   this CPU, gives the same bits writing into one: dynscope/_ufunc_probe.py
   tries each, once per process, on float32 and float64 (the only result
   dtypes they reuse for). */
static const char *const probed_ufuncs[] = {
    "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos",
    "tan", "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh", "arcsinh",
    "arccosh", "arctanh", "cbrt", "deg2rad", "rad2deg", "arctan2", "hypot",
    "logaddexp", "logaddexp2", "power",
    NULL,
};

/*
 * operator-module functions (the bytecode's operators): the in-place
 * operator eager NumPy's elision runs when the left operand is the dying
 * temporary (ndarray.__isub__ is np.subtract(t, x, out=t)), and the ufunc
 * for out= when another operand dies (ndarray.__rsub__ is np.subtract).
 * NULL: no such form (unary operators have no in-place one; a power's
 * ufunc depends on its exponent, see pow_exponent_exact).
 */
static const struct OperatorForms {
    const char *name, *inplace, *ufunc;
} operator_forms[] = {
    {"add", "iadd", "add"}, {"sub", "isub", "subtract"}, {"mul", "imul", "multiply"},
    {"truediv", "itruediv", "true_divide"}, {"floordiv", "ifloordiv", "floor_divide"},
    {"mod", "imod", "remainder"}, {"pow", "ipow", NULL},
    {"and_", "iand", "bitwise_and"}, {"or_", "ior", "bitwise_or"},
    {"xor", "ixor", "bitwise_xor"}, {"lshift", "ilshift", "left_shift"},
    {"rshift", "irshift", "right_shift"},
    {"neg", NULL, "negative"}, {"pos", NULL, "positive"}, {"abs", NULL, "absolute"},
    {"invert", NULL, "invert"}, {"inv", NULL, "invert"},
    {NULL, NULL, NULL},
};

/* The interned "out", as the one keyword name of a reusing call. */
static PyObject *out_kwnames;      /* strong, kept for the process */

/* See graph_int.h. */
PyObject *
inplace_out_kwnames(void)
{
    if (out_kwnames == NULL)
        out_kwnames = Py_BuildValue("(s)", "out");
    return out_kwnames;
}

/* x ** e on a float array gives exactly rounded results when NumPy runs it
   as square, sqrt or reciprocal (its fast_scalar_power: which exponents and
   types take that path differs between NumPy versions, but these three are
   exact either way, and other exponents run np.power, which is not). */
static bool
pow_exponent_exact(PyObject *e)
{
    if (PyLong_CheckExact(e)) {
        int overflow;
        long v = PyLong_AsLongAndOverflow(e, &overflow);
        return !overflow && (v == 2 || v == -1);
    }
    return PyFloat_CheckExact(e)
           && (PyFloat_AS_DOUBLE(e) == 2.0 || PyFloat_AS_DOUBLE(e) == 0.5
               || PyFloat_AS_DOUBLE(e) == -1.0);
}

/* Attribute `name` of the module named `module`: new reference or NULL
   (never an exception). */
static PyObject *
module_attr(PyObject *module, const char *name)
{
    PyObject *v = module ? PyObject_GetAttrString(module, name) : NULL;
    PyErr_Clear();
    return v;
}

/* NumPy's own exactly rounded ufuncs, looked up once (exact_ufuncs order):
   the object (strong, kept for the process; NULL when NumPy lacks it) and
   its number of inputs (0 unless it has exactly one output). */
static struct KnownUfunc {
    bool looked_up;
    PyObject *obj;
    int nin;
} known_ufuncs[sizeof(exact_ufuncs) / sizeof(exact_ufuncs[0])];

/* NumPy's exactly rounded ufunc `name` if it takes nin inputs, else NULL.
   Borrowed; never leaves an exception set. */
static PyObject *
numpy_ufunc(const char *name, int nin)
{
    PyTypeObject *ufunc_type = tensorlib_ufunc_type();      /* borrowed */
    int i = 0;

    while (exact_ufuncs[i] != NULL && strcmp(exact_ufuncs[i], name) != 0)
        i++;
    if (exact_ufuncs[i] == NULL || ufunc_type == NULL)
        return NULL;
    struct KnownUfunc *k = &known_ufuncs[i];
    if (!k->looked_up) {
        PyObject *u = module_attr(tensorlib_numpy(), name);
        if (u != NULL && Py_IS_TYPE(u, ufunc_type)) {
            PyObject *a = module_attr(u, "nin"), *b = module_attr(u, "nout");
            if (a && b && PyLong_Check(a) && PyLong_Check(b) && PyLong_AsLong(b) == 1)
                k->nin = (int)PyLong_AsLong(a);
            Py_XDECREF(a);
            Py_XDECREF(b);
            k->obj = Py_NewRef(u);
        }
        Py_XDECREF(u);
        PyErr_Clear();
        k->looked_up = tensorlib_numpy() != NULL;
    }
    return k->obj != NULL && k->nin == nin ? k->obj : NULL;
}

/* probed_ufuncs, each looked up once (the object, strong, kept for the
   process, NULL when NumPy lacks it; its number of inputs) and probed when
   a graph first calls it. */
static struct ProbedUfunc {
    bool looked_up, probed, exact;
    PyObject *obj;
    int nin;
} probed[sizeof(probed_ufuncs) / sizeof(probed_ufuncs[0])];

/* Whether dynscope._ufunc_probe finds that ufunc u gives the same bits
   writing into a buffer it is given.  Never leaves an exception set (a
   probe that fails says no). */
static bool
probe_says_exact(PyObject *u)
{
    PyObject *mod = PyImport_ImportModule("dynscope._ufunc_probe");
    PyObject *r = mod ? PyObject_CallMethod(mod, "reuses_buffer_exactly", "O", u) : NULL;
    bool yes = r == Py_True;
    Py_XDECREF(r);
    Py_XDECREF(mod);
    PyErr_Clear();
    return yes;
}

/* Whether fn is one of probed_ufuncs, called with nargs inputs, that
   passed its probe. */
static bool
is_probed_exact_ufunc(PyObject *fn, int nargs)
{
    PyTypeObject *ufunc_type = tensorlib_ufunc_type();      /* borrowed */

    if (ufunc_type == NULL || !Py_IS_TYPE(fn, ufunc_type) || tensorlib_numpy() == NULL)
        return false;
    for (int i = 0; probed_ufuncs[i] != NULL; i++) {
        struct ProbedUfunc *k = &probed[i];
        if (!k->looked_up) {
            PyObject *u = module_attr(tensorlib_numpy(), probed_ufuncs[i]);
            PyObject *nin = u ? module_attr(u, "nin") : NULL;
            k->looked_up = true;
            if (u != NULL && Py_IS_TYPE(u, ufunc_type) && nin && PyLong_Check(nin)) {
                k->obj = Py_NewRef(u);
                k->nin = (int)PyLong_AsLong(nin);
            }
            Py_XDECREF(nin);
            Py_XDECREF(u);
            PyErr_Clear();
        }
        if (k->obj != fn)
            continue;
        if (!k->probed) {
            k->probed = true;
            k->exact = probe_says_exact(fn);
        }
        return k->exact && k->nin == nargs;
    }
    return false;
}


/* Whether the result of `node` has dtype float32 or float64. */
static bool
result_is_float32_or_64(const NodeObject *node)
{
    PyObject *ex = node_example_value(node);                      /* borrowed */
    PyTypeObject *ndarray = tensorlib_ndarray_type();       /* borrowed */
    if (ex == NULL || ndarray == NULL || !Py_IS_TYPE(ex, ndarray))
        return false;
    int t = PyArray_DESCR((PyArrayObject *)ex)->type_num;
    return t == NPY_FLOAT || t == NPY_DOUBLE;
}

/* Whether fn is one of NumPy's exactly rounded ufuncs, called with nargs
   inputs. */
static bool
is_exact_ufunc(PyObject *fn, int nargs)
{
    PyTypeObject *ufunc_type = tensorlib_ufunc_type();      /* borrowed */

    if (ufunc_type == NULL || !Py_IS_TYPE(fn, ufunc_type))
        return false;
    for (int i = 0; exact_ufuncs[i] != NULL; i++)
        if (numpy_ufunc(exact_ufuncs[i], nargs) == fn)
            return true;
    return false;
}

/* The operator module's function `name` (borrowed, looked up once per
   name and kept), or NULL. */
static PyObject *
operator_function(const struct OperatorForms *f)
{
    static PyObject *cache[sizeof(operator_forms) / sizeof(operator_forms[0])];
    size_t i = (size_t)(f - operator_forms);

    if (cache[i] == NULL && f->inplace != NULL) {
        PyObject *operator = PyImport_ImportModule("operator");
        cache[i] = module_attr(operator, f->inplace);
        Py_XDECREF(operator);
        PyErr_Clear();
    }
    return cache[i];
}

/* The operator-module function fn's entry of operator_forms, or NULL.  fn
   is an operator function (is_operator_function): a C function whose name
   is read from its method table. */
static const struct OperatorForms *
operator_forms_of(PyObject *fn)
{
    const char *name = PyCFunction_Check(fn) ? ((PyCFunctionObject *)fn)->m_ml->ml_name : NULL;
    const struct OperatorForms *f = operator_forms;

    while (name != NULL && f->name != NULL && strcmp(f->name, name) != 0)
        f++;
    return name != NULL && f->name != NULL ? f : NULL;
}

/*
 * What runs instead of call node `node` (nargs positional args, the donor
 * at index donor): sets ip->fn (new reference) and ip->by_operator, or
 * leaves ip->fn NULL when the op has no exact reusing form.  Never leaves
 * an exception set.
 */
static void
choose_function(Inplace *ip, const NodeObject *node, const Arg *args, int nargs,
                int donor, bool op_function)
{
    ip->fn = NULL;
    if (!op_function) {
        if (is_exact_ufunc(node->target, nargs)
            || (result_is_float32_or_64(node) && is_probed_exact_ufunc(node->target, nargs)))
            ip->fn = Py_NewRef(node->target);
        return;
    }
    const struct OperatorForms *f = operator_forms_of(node->target);
    if (f == NULL)
        return;
    if (strcmp(f->name, "pow") == 0
        && (donor != 0 || nargs != 2 || args[1].kind != ARG_CONST
            || !pow_exponent_exact(args[1].obj)))
        return;
    if (donor == 0 && f->inplace != NULL) {
        ip->fn = Py_XNewRef(operator_function(f));
        ip->by_operator = true;
    }
    else if (f->ufunc != NULL)
        ip->fn = Py_XNewRef(numpy_ufunc(f->ufunc, nargs));
}


/* The number of elements below which a result of `example`'s dtype is not
   worth reusing (INPLACE_MIN_BYTES), or -1 when its dtype is not a real one
   (bool, integer, floating).  Read through Python once, at compile time
   (the descr struct's item size moved in NumPy 2).  Never leaves an
   exception set. */
static Py_ssize_t
real_dtype_min_elements(PyObject *example)
{
    PyObject *dtype = PyObject_GetAttrString(example, "dtype");
    PyObject *kind = dtype ? PyObject_GetAttrString(dtype, "kind") : NULL;
    PyObject *size = dtype ? PyObject_GetAttrString(dtype, "itemsize") : NULL;
    const char *k = kind && PyUnicode_Check(kind) ? PyUnicode_AsUTF8(kind) : NULL;
    Py_ssize_t itemsize = size && PyLong_Check(size) ? PyLong_AsSsize_t(size) : -1;
    Py_ssize_t n = -1;

    if (k != NULL && k[0] != '\0' && k[1] == '\0' && strchr("biuf", k[0]) && itemsize > 0)
        n = (INPLACE_MIN_BYTES + itemsize - 1) / itemsize;
    Py_XDECREF(size);
    Py_XDECREF(kind);
    Py_XDECREF(dtype);
    PyErr_Clear();
    return n;
}

/* The ufunc an operator runs on NumPy operands (nargs inputs, one output),
   or NULL (no such form, as a power: ndarray.__pow__ picks its ufunc by the
   exponent).  New reference; never leaves an exception set. */
static PyObject *
operator_ufunc_ref(const NodeObject *node, int nargs)
{
    const struct OperatorForms *f = operator_forms_of(node->target);

    if (f == NULL || f->ufunc == NULL)
        return NULL;
    return Py_XNewRef(numpy_ufunc(f->ufunc, nargs));
}

/* numpy.dtype(name): new reference or NULL (never an exception). */
static PyObject *
numpy_dtype(const char *name)
{
    PyObject *dtype_type = (PyObject *)tensorlib_dtype_type();    /* borrowed */
    PyObject *d = dtype_type ? PyObject_CallFunction(dtype_type, "s", name) : NULL;

    PyErr_Clear();
    return d;
}

/* Whether descr is the native dtype `name`. */
static bool
descr_is(PyObject *descr, const char *name)
{
    PyObject *want = numpy_dtype(name);
    int r = want ? PyObject_RichCompareBool(descr, want, Py_EQ) : 0;

    Py_XDECREF(want);
    if (r < 0)
        PyErr_Clear();
    return r == 1;
}

/* Whether NumPy converts the Python scalar c to descr exactly, so that c
   as a 0-d array of descr runs the same loop on the same values. */
static bool
scalar_converts_exactly(PyObject *c, PyObject *descr)
{
    if (PyFloat_CheckExact(c))
        return descr_is(descr, "float64");
    if (!PyLong_CheckExact(c))
        return false;               /* bools and other types: left alone */
    int overflow;
    long long v = PyLong_AsLongLongAndOverflow(c, &overflow);
    if (overflow || (v == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return false;
    }
    if (descr_is(descr, "int64"))
        return true;
    return descr_is(descr, "float64") && v >= -(1LL << 53) && v <= (1LL << 53);
}

/*
 * The constant operands of a planned op as read-only 0-d arrays of the
 * array operands' one descr (see the header), where that is exact; sets
 * ip->const_array[j] and ip->has_const_array.  Never leaves an exception
 * set (a failure leaves the constant as it is).
 */
static void
plan_const_arrays(Inplace *ip, const NodeObject *node, const Arg *args, int nargs,
                  PyObject *const *descrs)
{
    PyObject *descr = NULL;                                  /* borrowed */
    const struct OperatorForms *f = operator_forms_of(node->target);

    if (f != NULL && strcmp(f->name, "pow") == 0)
        return;
    for (int j = 0; j < nargs; j++) {
        if (descrs[j] == NULL)
            continue;
        if (descr != NULL && descrs[j] != descr)
            return;
        descr = descrs[j];
    }
    for (int j = 0; descr != NULL && j < nargs; j++) {
        if (descrs[j] != NULL || !scalar_converts_exactly(args[j].obj, descr))
            continue;
        PyObject *a = PyObject_CallMethod(tensorlib_numpy(), "array", "OO", args[j].obj, descr);
        PyObject *r = a ? PyObject_CallMethod(a, "setflags", "(O)", Py_False) : NULL;
        if (r == NULL) {
            Py_XDECREF(a);
            PyErr_Clear();
            continue;
        }
        Py_DECREF(r);
        ip->const_array[j] = a;
        ip->has_const_array = true;
    }
}

/* The operand a result may be written into: the first array operand made by
   the graph (not an input) that dies at instruction k and had the result's
   descr and shape at capture; -1 when none.  Also sets ip->min_elements and
   ip->ndim. */
static int
find_donor(Inplace *ip, GraphObject *g, const NodeObject *node, const Arg *args,
           int nargs, int k, const int *last_use)
{
    PyTypeObject *ndarray = tensorlib_ndarray_type();        /* borrowed */
    PyObject *result = node_example_value(node);                   /* borrowed */

    if (result == NULL || !Py_IS_TYPE(result, ndarray))
        return -1;
    PyArrayObject *res = (PyArrayObject *)result;
    ip->min_elements = real_dtype_min_elements(result);
    ip->ndim = PyArray_NDIM(res);
    if (ip->ndim < 1 || ip->min_elements < 0)
        return -1;
    Py_ssize_t size = 1;
    for (int i = 0; i < ip->ndim; i++)
        size *= PyArray_DIMS(res)[i];
    if (size < ip->min_elements)         /* shapes are guarded: never worth it */
        return -1;
    for (int j = 0; j < nargs; j++) {
        if (args[j].kind != ARG_SLOT || args[j].slot < g->nplaceholders
            || last_use[args[j].slot] != k)
            continue;
        PyArrayObject *e = (PyArrayObject *)node_example_value(GRAPH_NODE(g, args[j].slot));
        if (PyArray_DESCR(e) == PyArray_DESCR(res) && PyArray_NDIM(e) == ip->ndim
            && memcmp(PyArray_DIMS(e), PyArray_DIMS(res),
                      (size_t)ip->ndim * sizeof(npy_intp)) == 0)
            return j;
    }
    return -1;
}

/* Whether the op may write into a kept array (graph_pool.c) when no
   operand dies with it: an exactly rounded ufunc, or a probed one with a
   float32 or float64 result, whose result had the shape of one of its
   array operands at capture.  Sets ip->pool_fn, result_descr, shape_src
   and pool_min_elements, or leaves pool_fn NULL.  Never fails. */
static void
plan_pool(Inplace *ip, GraphObject *g, const NodeObject *node, const Arg *args,
          int nargs, bool op_function)
{
    PyTypeObject *ndarray = tensorlib_ndarray_type();        /* borrowed */
    PyObject *result = node_example_value(node);                   /* borrowed */
    PyObject *fn = NULL;                                     /* borrowed */

    if (result == NULL || !Py_IS_TYPE(result, ndarray))
        return;
    if (op_function)
        fn = ip->direct;
    else if (is_exact_ufunc(node->target, nargs)
             || (result_is_float32_or_64(node) && is_probed_exact_ufunc(node->target, nargs)))
        fn = node->target;
    PyArrayObject *res = (PyArrayObject *)result;
    Py_ssize_t min_elements = graph_pool_min_elements((PyObject *)PyArray_DESCR(res));
    Py_ssize_t size = 1;
    for (int i = 0; i < PyArray_NDIM(res); i++)
        size *= PyArray_DIMS(res)[i];
    if (fn == NULL || PyArray_NDIM(res) < 1 || min_elements < 0
        || size < min_elements)          /* shapes are guarded: never kept */
        return;
    for (int j = 0; j < nargs; j++) {
        if (args[j].kind != ARG_SLOT)
            continue;
        PyObject *e = node_example_value(GRAPH_NODE(g, args[j].slot));
        if (e != NULL && Py_IS_TYPE(e, ndarray)
            && PyArray_NDIM((PyArrayObject *)e) == PyArray_NDIM(res)
            && memcmp(PyArray_DIMS((PyArrayObject *)e), PyArray_DIMS(res),
                      (size_t)PyArray_NDIM(res) * sizeof(npy_intp)) == 0) {
            ip->pool_fn = Py_NewRef(fn);
            ip->result_descr = Py_NewRef((PyObject *)PyArray_DESCR(res));
            ip->shape_src = j;
            ip->pool_min_elements = min_elements;
            return;
        }
    }
}

/* See graph_int.h. */
int
inplace_plan(Inplace *ip, GraphObject *g, const NodeObject *node, const Arg *args,
             int nargs, bool op_function, int k, const int *last_use)
{
    PyTypeObject *ndarray = tensorlib_ndarray_type();        /* borrowed */
    PyObject *descrs[INPLACE_MAX_ARGS];                      /* borrowed */
    bool any_array = false;

    memset(ip, 0, sizeof(*ip));
    ip->donor = -1;
    if (ndarray == NULL || nargs < 1 || nargs > INPLACE_MAX_ARGS)
        return 0;
    /* The operands: NumPy arrays the graph computes, or constant Python
       scalars.  What each must be again at run time is kept. */
    for (int j = 0; j < nargs; j++) {
        PyObject *ex = args[j].kind == ARG_SLOT ? node_example_value(GRAPH_NODE(g, args[j].slot))
                       : args[j].kind == ARG_CONST ? args[j].obj : NULL;
        if (ex == NULL)
            return 0;
        if (args[j].kind == ARG_SLOT && Py_IS_TYPE(ex, ndarray)) {
            descrs[j] = (PyObject *)PyArray_DESCR((PyArrayObject *)ex);
            any_array = true;
            continue;
        }
        if (args[j].kind != ARG_CONST
            || !(PyFloat_CheckExact(ex) || PyLong_CheckExact(ex) || PyBool_Check(ex)))
            return 0;
        descrs[j] = NULL;              /* a constant: always the same */
    }
    if (!any_array)
        return 0;
    if (op_function)
        ip->direct = operator_ufunc_ref(node, nargs);
    int donor = find_donor(ip, g, node, args, nargs, k, last_use);
    if (donor >= 0) {
        choose_function(ip, node, args, nargs, donor, op_function);
        if (ip->fn != NULL)
            ip->donor = donor;
    }
    if (!op_function)
        ip->exact_ufunc = is_exact_ufunc(node->target, nargs);
    plan_pool(ip, g, node, args, nargs, op_function);
    if (((ip->fn != NULL && !ip->by_operator) || ip->pool_fn != NULL)
        && inplace_out_kwnames() == NULL) {
        inplace_clear(ip, 0);
        return -1;
    }
    ip->planned = ip->direct != NULL || ip->donor >= 0 || ip->exact_ufunc
                  || ip->pool_fn != NULL;
    ip->ndarray = ndarray;
    for (int j = 0; ip->planned && j < nargs; j++)
        ip->arg_descr[j] = Py_XNewRef(descrs[j]);
    if (ip->planned)
        plan_const_arrays(ip, node, args, nargs, descrs);
    if (ip->has_const_array && ip->direct == NULL && ip->exact_ufunc)
        ip->direct = Py_NewRef(node->target);     /* the ufunc, run directly */
    return 0;
}

/* See graph_int.h. */
void
inplace_clear(Inplace *ip, int nargs)
{
    Py_CLEAR(ip->fn);
    Py_CLEAR(ip->direct);
    Py_CLEAR(ip->pool_fn);
    Py_CLEAR(ip->result_descr);
    for (int j = 0; j < nargs && j < INPLACE_MAX_ARGS; j++) {
        Py_CLEAR(ip->arg_descr[j]);
        Py_CLEAR(ip->const_array[j]);
    }
    ip->has_const_array = false;
    ip->donor = -1;
    ip->planned = false;
    ip->exact_ufunc = false;
}

/* See graph_int.h. */
int
inplace_traverse(const Inplace *ip, int nargs, visitproc visit, void *arg)
{
    Py_VISIT(ip->fn);
    Py_VISIT(ip->direct);
    Py_VISIT(ip->pool_fn);
    Py_VISIT(ip->result_descr);
    for (int j = 0; j < nargs && j < INPLACE_MAX_ARGS; j++) {
        Py_VISIT(ip->arg_descr[j]);
        Py_VISIT(ip->const_array[j]);
    }
    return 0;
}

/* Does array operand a (of the donor's rank or less) broadcast to the
   donor's shape without growing it? */
static bool
broadcasts_into(PyArrayObject *a, const npy_intp *dims, int ndim)
{
    int an = PyArray_NDIM(a);
    const npy_intp *ad = PyArray_DIMS(a);

    if (an > ndim)
        return false;
    for (int i = 1; i <= an; i++)
        if (ad[an - i] != dims[ndim - i] && ad[an - i] != 1)
            return false;
    return true;
}

/* Whether the donor may take the result on this run (see the header); the
   array operands are known to be exact ndarrays. */
static bool
donor_ready(const Inplace *ip, PyObject *const *argv, int nargs)
{
    PyArrayObject *d = (PyArrayObject *)argv[ip->donor];
    const int need = NPY_ARRAY_OWNDATA | NPY_ARRAY_ALIGNED | NPY_ARRAY_WRITEABLE;
    Py_ssize_t size = 1;

    if (Py_REFCNT(d) != 1 || (PyArray_FLAGS(d) & need) != need
        || PyArray_NDIM(d) != ip->ndim)
        return false;
    for (int i = 0; i < ip->ndim; i++)
        size *= PyArray_DIMS(d)[i];
    if (size < ip->min_elements)
        return false;
    for (int j = 0; j < nargs; j++) {
        if (ip->arg_descr[j] == NULL)
            continue;                                        /* a constant */
        PyArrayObject *a = (PyArrayObject *)argv[j];
        if ((PyObject *)PyArray_DESCR(a) != ip->arg_descr[j]
            || (j != ip->donor && !broadcasts_into(a, PyArray_DIMS(d), ip->ndim)))
            return false;
    }
    return true;
}

/* Whether the op may write into a kept array on this run: every array
   operand has its descr at capture, rank 1 or more (under NumPy 1 a 0-d
   operand's value may pick the result dtype) and C-contiguous data (so
   the result eager allocates is C-contiguous too, as the kept array is),
   and broadcasts into the shape of operand shape_src, which is big enough
   to be kept.  The result's dtype is then the capture's, and its shape
   shape_src's.  The array operands are known to be exact ndarrays. */
static bool
pool_ready(const Inplace *ip, PyObject *const *argv, int nargs)
{
    PyArrayObject *src = (PyArrayObject *)argv[ip->shape_src];
    Py_ssize_t size = 1;

    for (int i = 0; i < PyArray_NDIM(src); i++)
        size *= PyArray_DIMS(src)[i];
    if (size < ip->pool_min_elements)
        return false;
    for (int j = 0; j < nargs; j++) {
        if (ip->arg_descr[j] == NULL)
            continue;                                        /* a constant */
        PyArrayObject *a = (PyArrayObject *)argv[j];
        if ((PyObject *)PyArray_DESCR(a) != ip->arg_descr[j] || PyArray_NDIM(a) < 1
            || !(PyArray_FLAGS(a) & NPY_ARRAY_C_CONTIGUOUS)
            || !broadcasts_into(a, PyArray_DIMS(src), PyArray_NDIM(src)))
            return false;
    }
    return true;
}

/* See graph_int.h. */
InplaceHow
inplace_how(const Inplace *ip, PyObject *const *argv, int nargs)
{
    for (int j = 0; j < nargs; j++)
        if (ip->arg_descr[j] != NULL && !Py_IS_TYPE(argv[j], ip->ndarray))
            return INPLACE_NONE;
    if (ip->donor >= 0 && donor_ready(ip, argv, nargs))
        return INPLACE_DONOR;
    if (ip->pool_fn != NULL && pool_ready(ip, argv, nargs))
        return INPLACE_POOL;
    return ip->direct != NULL ? INPLACE_DIRECT : INPLACE_NONE;
}

/* Whether every array operand has its descr at capture (a donor run has
   checked this already). */
static bool
descrs_unchanged(const Inplace *ip, PyObject *const *argv, int nargs)
{
    for (int j = 0; j < nargs; j++)
        if (ip->arg_descr[j] != NULL
            && (PyObject *)PyArray_DESCR((PyArrayObject *)argv[j]) != ip->arg_descr[j])
            return false;
    return true;
}

/* INPLACE_POOL: pool_fn(*argv, out=a kept array), or pool_fn(*argv) when
   none is kept (it allocates, as eager does).  Out of line: the common
   runs of inplace_run stay short. */
__attribute__((noinline)) static PyObject *
run_into_kept(const Inplace *ip, PyObject **argv, int nargs)
{
    size_t nargsf = (size_t)nargs | PY_VECTORCALL_ARGUMENTS_OFFSET;
    PyArrayObject *src = (PyArrayObject *)argv[ip->shape_src];
    PyObject *kept = graph_pool_take(ip->result_descr, PyArray_NDIM(src), PyArray_DIMS(src));

    if (kept == NULL)
        return PyObject_Vectorcall(ip->pool_fn, argv, nargsf, NULL);
    argv[nargs] = kept;                                      /* out= */
    PyObject *r = PyObject_Vectorcall(ip->pool_fn, argv, nargsf, out_kwnames);
    Py_DECREF(kept);
    return r;
}

/* See graph_int.h. */
PyObject *
inplace_run(const Inplace *ip, InplaceHow how, PyObject **argv, int nargs)
{
    size_t nargsf = (size_t)nargs | PY_VECTORCALL_ARGUMENTS_OFFSET;

    if (ip->has_const_array
        && (how == INPLACE_DONOR || how == INPLACE_POOL || descrs_unchanged(ip, argv, nargs)))
        for (int j = 0; j < nargs; j++)
            if (ip->const_array[j] != NULL)
                argv[j] = ip->const_array[j];               /* borrowed */

    if (how == INPLACE_DIRECT)                       /* np.add(a, b) for a + b */
        return PyObject_Vectorcall(ip->direct, argv, nargsf, NULL);
    if (how == INPLACE_POOL)
        return run_into_kept(ip, argv, nargs);
    if (ip->by_operator)                             /* operator.isub(t, x) */
        return PyObject_Vectorcall(ip->fn, argv, nargsf, NULL);
    argv[nargs] = argv[ip->donor];                   /* out= */
    return PyObject_Vectorcall(ip->fn, argv, nargsf, out_kwnames);
}
