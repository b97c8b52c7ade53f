/*
 * tensorops_call.c -- putting a pure tensor operation into the graph
 * (DESIGN.md 3.4; contract: translate.h, shared with tensorops.c through
 * tensorops_int.h): Values to graph arguments and example values, torch's
 * argument rules (training flags, random draws, in-place ops), metadata
 * folded into constants, running the op once on the examples, and the
 * Value of its result (tensorops_call).
 */
#include "tensorops_int.h"
#include "../base/tensorlib.h"

#include <numpy/ndarraytypes.h>    /* struct layouts only: no import_array */
#include <numpy/ufuncobject.h>

#include <structmember.h>         /* T_OBJECT: a struct sequence's fields */
#include <string.h>

/* Of torch's metadata methods folded to constants (tensorops.c), the ones
   that read the shape (an escape on a data-dependent shape). */
static const char *const torch_shape_method_names[] = {
    "size", "stride", "numel", "nelement", "is_contiguous", "is_same_size", NULL,
};

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
   random numbers, -1 (a call break) when it is not.  *writes_input: the
   call has inplace=True (F.relu(x, inplace=True)): it writes into its
   first argument, a tensor, as an in-place method writes its receiver. */
static int torch_call_rules(Tracer *t, NodeOp op, PyObject *target, const char *hint,
                            Value **args, int nargs, PyObject *kwnames, bool *writes_input)
{
    int dflt;
    int pos = function_param(target, "inplace", &dflt);
    Value *v = call_arg(args, nargs, kwnames, "inplace", pos);
    *writes_input = v != NULL && !value_is_false(v);
    if (*writes_input && (v->kind != V_CONST || v->obj != Py_True || nargs == 0 || args[0]->kind != V_TENSOR))
        return tracer_break(t, STOP_CALL, "%s with inplace=%s (writes into a value the "
                            "program can see)", hint, v->kind == V_CONST ? "True" : "a value known "
                            "only when the graph runs");
    PyObject *always = op == NODE_CALL_METHOD ? tensorops_rules.torch_random_methods : tensorops_rules.torch_random_functions;
    int r = PySet_Contains(always, target);
    if (r != 0)
        return r;
    PyObject *rule = op == NODE_CALL_METHOD ? NULL : PyDict_GetItemWithError(tensorops_rules.torch_training_rule, target);
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
            if (tensorops_is_torch_like(a))
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

/* Whether a value (a tuple, list or slice of them too, as np.zeros((n, 4))
   and x[:n] take) is known only when the graph runs in a way a result's
   shape may follow:
   a tensor whose shape is, a number that is a graph input or computed from
   one. */
static bool any_dynshape(Value **args, int nargs)
{
    for (int i = 0; i < nargs; i++) {
        Value *a = args[i];
        if (a->kind == V_TENSOR && a->dynshape)
            return true;
        if ((a->kind == V_TUPLE || a->kind == V_LIST || a->kind == V_SLICE) && a->n > 0
            && any_dynshape(a->items, a->n))
            return true;                  /* x[:n] with n known when the graph runs */
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
        if (!tensorops_is_torch_like(PyTuple_GET_ITEM(eargs, 0)) || !name_in_set(tensorops_rules.torch_fold_methods, target))
            return not_metadata;
        shape_read = tensorops_in_names(hint, torch_shape_method_names);
    }
    else if (target == tensorops_rules.builtin_getattr && nargs == 2 && args[1]->kind == V_CONST) {
        if (!tensorops_is_torch_like(PyTuple_GET_ITEM(eargs, 0)) || !name_in_set(tensorops_rules.torch_fold_attrs, args[1]->obj))
            return not_metadata;
        shape_read = false;
    }
    else if (tensorops_rules.torch_fold_functions != NULL && PySet_Contains(tensorops_rules.torch_fold_functions, target) == 1) {
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
        if (op == NODE_CALL_METHOD && strcmp(hint, "size") == 0 && nargs == 2
            && args[1]->kind == V_CONST && PyLong_CheckExact(args[1]->obj)) {
            /* x.size(d): a constant when the shape rules fix it (else a
               graph value, which tr_sym_result gives its expression) */
            long d = PyLong_AsLong(args[1]->obj);
            PyObject *shape = PyObject_GetAttrString(args[0]->obj, "shape");
            Py_ssize_t n = shape && PyTuple_Check(shape) ? PyTuple_GET_SIZE(shape) : 0;
            Py_XDECREF(shape);
            PyErr_Clear();
            Value *fixed = tr_sym_static_dim(t, args[0], (int)(d < 0 ? d + (long)n : d));
            if (fixed != NULL || PyErr_Occurred())
                return fixed;
        }
        if (op == NODE_CALL_METHOD && (strcmp(hint, "size") == 0 || strcmp(hint, "numel") == 0
                                       || strcmp(hint, "nelement") == 0))
            return not_metadata;
        return tracer_break(t, STOP_ESCAPE, "data escape: %s of a tensor whose shape depends "
                            "on its values", hint), NULL;
    }
    PyObject *r = tensorops_call_on_examples(op, target, eargs, ekw);
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
/* (contract: translate.h) */
bool tensorops_is_plain_structseq(PyTypeObject *tp)
{
    if (tp->tp_base != &PyTuple_Type || tp->tp_members == NULL)
        return false;
    long n[3];
    const char *const names[3] = {"n_fields", "n_sequence_fields", "n_unnamed_fields"};
    for (int i = 0; i < 3; i++) {
        PyObject *c = PyObject_GetAttrString((PyObject *)tp, names[i]);
        n[i] = c != NULL && PyLong_CheckExact(c) ? PyLong_AsLong(c) : -1;
        Py_XDECREF(c);
    }
    PyErr_Clear();
    return n[0] > 0 && n[0] == n[1] && n[2] == 0;
}

/* (contract: translate.h)  A struct sequence's fields are members of its
   type reading the tuple's item slots. */
int tensorops_structseq_field(PyTypeObject *tp, PyObject *name)
{
    const char *want = PyUnicode_AsUTF8(name);
    if (want == NULL) {
        PyErr_Clear();
        return -1;
    }
    for (PyMemberDef *m = tp->tp_members; m->name != NULL; m++)
        if (strcmp(m->name, want) == 0 && m->type == T_OBJECT
            && m->offset >= (Py_ssize_t)offsetof(PyTupleObject, ob_item))
            return (int)((m->offset - (Py_ssize_t)offsetof(PyTupleObject, ob_item)) / (Py_ssize_t)sizeof(PyObject *));
    return -1;
}

/* A tuple or list of tensors (or a struct sequence of them, its type
   kept by the Value: tensorops_is_plain_structseq). */
static bool is_tensor_sequence(PyObject *r)
{
    if (!PyTuple_CheckExact(r) && !PyList_CheckExact(r)
        && !(PyTuple_Check(r) && tensorops_is_plain_structseq(Py_TYPE(r))))
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
    Value *out = value_new(t, PyTuple_Check(result) ? V_TUPLE : V_LIST, NULL);
    PyObject *getitem = tensorops_operator("getitem");
    if (out == NULL || getitem == NULL || PySet_Add(t->used_nodes, (PyObject *)node) < 0)
        return NULL;
    if (!PyTuple_CheckExact(result) && !PyList_CheckExact(result))
        out->tuple_type = Py_NewRef(Py_TYPE(result));   /* a named tuple: its items read by position */
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
   methods for tensors (and requires_grad_, which tr_calls.c sends here for
   a tensor the graph made only).  0, or -1 (a call break). */
static int check_method(Tracer *t, PyObject *self, PyObject *name)
{
    PyObject *set = tensorops_is_torch_like(self) ? tensorops_rules.torch_methods : tensorops_rules.pure_methods;
    if (set != NULL && PySet_Contains(set, name) == 1)
        return 0;
    if (tensorops_is_torch_like(self) && PyUnicode_CompareWithASCIIString(name, "requires_grad_") == 0)
        return 0;
    if (tensorops_is_torch_like(self) && tensorops_rules.torch_inplace_methods && PySet_Contains(tensorops_rules.torch_inplace_methods, name) == 1)
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
    if (!PyCFunction_Check(target) || PyTuple_GET_SIZE(eargs) != 2 || !tensorops_in_names(hint, raising))
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
        return PySet_Contains(tensorops_rules.torch_inplace_methods, target) == 1;
    return op == NODE_CALL_FUNCTION && PySet_Contains(tensorops_rules.inplace_operators, target) == 1;
}

/* Whether the call is a torch function or a method of a torch tensor. */
static bool is_torch_call(NodeOp op, PyObject *target, PyObject *eargs)
{
    if (op == NODE_CALL_METHOD)
        return tensorops_is_torch_like(PyTuple_GET_ITEM(eargs, 0));
    return (tensorops_rules.torch_functions != NULL && PySet_Contains(tensorops_rules.torch_functions, target) == 1)
           || tensorops_is_library_op(target) || tensorops_private_torch_op(target) != NULL;
}

/* Whether tr_fnmode_route hands the call to a torch function mode: a torch
   call, or an operator on a torch tensor (a NumPy call never).  A tensor's
   attribute (x.device, x.T) is not handed over, as x.shape is not
   (tr_fnmode.c). */
static bool hands_to_modes(NodeOp op, PyObject *target, PyObject *eargs)
{
    if (target == tensorops_rules.builtin_getattr)
        return false;
    if (is_torch_call(op, target, eargs))
        return true;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(eargs); i++)
        if (tensorops_is_torch_like(PyTuple_GET_ITEM(eargs, i)))
            return true;
    return false;
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
    if (t->nfn_modes > 0 && hands_to_modes(op, target, eargs)) {
        v = tr_fnmode_route(t, op, target, name_hint, args, nargs, kwnames, eargs, ekw);
        goto out;
    }
    v = fold_metadata(t, op, target, name_hint, args, nargs, eargs, ekw, &not_metadata);
    if (v != &not_metadata)
        goto out;
    v = NULL;
    torch_call = is_torch_call(op, target, eargs);
    writes = false;
    random = torch_call ? torch_call_rules(t, op, target, name_hint, args, nargs, kwnames, &writes) : 0;
    if (random < 0 || (random && note_random(t, name_hint, eargs, ekw) < 0))
        goto out;
    if (numbers_may_raise_in_try(t, target, name_hint, eargs))
        goto out;
    writes = nargs > 0 && args[0]->kind == V_TENSOR && tensorops_is_torch_like(args[0]->obj)
             && (writes || is_inplace_op(op, target));
    inplace = writes ? tr_inplace_prepare(t, args[0], name_hint, eargs) : 0;
    t->tensor_writes += writes;
    if (inplace < 0)
        goto out;
    if (!torch_call && (rng = tr_random_numpy_owner(target)) != NULL) {
        random = 1;
        if (tr_random_note_numpy(t, rng) < 0)
            goto out;
    }

    /* Run the op once on the example values. */
    result = tensorops_call_on_examples(op, target, eargs, ekw);
    if (result == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_Exception))
            goto out;   /* KeyboardInterrupt and the like propagate */
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyErr_NormalizeException(&type, &value, &tb);
        t->predicted_raise = true;
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
    if ((torch_call || tensorops_is_torch_like(result)) && tensorops_note_torch(t) < 0)
        goto out;
    PyObject *library_op = op != NODE_CALL_FUNCTION ? NULL : tensorops_is_library_op(target) ? target
                           : tensorops_private_torch_op(target);      /* borrowed */
    if (library_op != NULL && tensorops_library_op_sizes(t, library_op, name_hint, eargs, ekw, result) < 0)
        goto out;
    if (!dynshape)
        dynshape = shape_depends_on_data(op, target, args, nargs);
    NodeObject *node = graph_call(t->graph, op, target, gargs, gkw, name_hint, result);
    if (node == NULL || mark_used(t, args, nargs) < 0)
        goto out;
    if (sequence) {
        v = sequence_result(t, node, result, dynshape);
        if (v != NULL && dynshape && tr_sym_sequence(t, name_hint, args, nargs, kwnames, v) < 0)
            v = NULL;
        goto out;
    }
    if (inplace == 1) {
        /* the program's tensor, changed by this node from here on: its one
           Value reads the node (its example keeps the old contents) -- and
           reads the one before again if the call this is in is undone */
        if (tracer_note_node_change(t, args[0]) < 0)
            goto out;
        v = args[0];
        v->node = node;
        goto out;
    }
    v = value_new(t, V_TENSOR, result);
    if (v) {
        v->node = node;
        v->dynshape = dynshape;
        if (tr_sym_result(t, name_hint, args, nargs, kwnames, v) < 0)
            v = NULL;
    }
out:
    Py_XDECREF(gargs);
    Py_XDECREF(gkw);
    Py_XDECREF(eargs);
    Py_XDECREF(ekw);
    Py_XDECREF(result);
    return v;
}

/* (contract: translate.h) */
Value *tensorops_state_query(Tracer *t, PyObject *fn, Value **args, int nargs, PyObject *kwnames,
                             bool *handled)
{
    *handled = tensorops_rules.torch_state_queries != NULL
               && PyCFunction_Check(fn) && PySet_Contains(tensorops_rules.torch_state_queries, fn) == 1;
    if (!*handled)
        return NULL;
    if (t->state_modes != NULL && PyList_GET_SIZE(t->state_modes) > 0)
        /* the guard reads the state where the frame starts, not inside a
           manager the traced code entered */
        return tracer_break(t, STOP_CALL, "%s() inside a torch state manager entered while tracing",
                            ((PyCFunctionObject *)fn)->m_ml->ml_name), NULL;
    if (kwnames != NULL && PyTuple_GET_SIZE(kwnames) > 0)
        return tracer_unsupported(t, false, "keyword arguments to %s()",
                                  ((PyCFunctionObject *)fn)->m_ml->ml_name), NULL;
    PyObject *cargs = PyTuple_New(nargs), *r = NULL, *expected = NULL;
    for (int i = 0; cargs != NULL && i < nargs; i++) {
        if (!foldable(args[i])) {
            Py_DECREF(cargs);
            return tracer_unsupported(t, false, "%s() of values that are not constants",
                                      ((PyCFunctionObject *)fn)->m_ml->ml_name), NULL;
        }
        PyTuple_SET_ITEM(cargs, i, Py_NewRef(args[i]->obj));
    }
    r = cargs ? PyObject_Call(fn, cargs, NULL) : NULL;
    if (r == NULL && cargs != NULL && PyErr_ExceptionMatches(PyExc_Exception)) {
        PyErr_Clear();
        Py_DECREF(cargs);
        return tracer_break(t, STOP_CALL, "%s() raises on these arguments",
                            ((PyCFunctionObject *)fn)->m_ml->ml_name), NULL;
    }
    expected = r ? PyTuple_Pack(3, fn, cargs, r) : NULL;
    Py_XDECREF(cargs);
    if (expected == NULL || guardset_add(t->gs, GUARD_STATE_QUERY, -1, expected, 0) < 0) {
        Py_XDECREF(expected);
        Py_XDECREF(r);
        return NULL;
    }
    Py_DECREF(expected);
    return new_const(t, r);            /* takes r */
}
