/*
 * tr_sizes.c -- sizes known only when the graph runs (issue 20): shape
 * reads of a tensor value whose shape is `dynshape` -- an input with
 * dynamic dimensions (automatic dynamic, mark_dynamic), anything computed
 * from one or from a number that is a graph input, a result whose size
 * depends on the data (x[x > 0]) -- become graph values: sym_size(x, d)
 * nodes, as TorchDynamo's aten.sym_size, that the graph computes on each
 * run.  Arithmetic on them stays in the graph (they are graph values like
 * any number that is a graph input); a Python use that needs their value
 * (a branch, range(), iteration) stops tracing there, as for any value.
 *
 * Invariants:
 *   - A size is a constant only when something fixes it: a static
 *     dimension of an input (its TENSOR_MATCH), or any dimension of a
 *     tensor whose shape is not dynshape (the graph made it from fixed
 *     shapes).  Everything else is read when the graph runs.
 *   - x.shape of a torch tensor is a tuple of those values for the code,
 *     and a torch.Size the graph reads should the program get it (a plain
 *     tuple would change its type).
 */
#include "translate_int.h"
#include "../base/tensorlib.h"

#include <string.h>

/* sym_size(x, d): x.shape[d], a graph op (as TorchDynamo's aten.sym_size)
   that reads a dynamic size when the graph runs. */
static PyObject *sym_size(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "sym_size(x, dim)");
        return NULL;
    }
    PyObject *shape = PyObject_GetAttrString(args[0], "shape");
    PyObject *r = shape ? PyObject_GetItem(shape, args[1]) : NULL;
    Py_XDECREF(shape);
    return r;
}

static PyMethodDef sym_size_def = {"sym_size", (PyCFunction)(void (*)(void))sym_size,
                                   METH_FASTCALL, "sym_size(x, dim): x.shape[dim]"};

/* (contract: translate.h) */
bool tr_sizes_is_read(NodeObject *n)
{
    return n->op == NODE_CALL_FUNCTION && PyCFunction_Check(n->target)
           && ((PyCFunctionObject *)n->target)->m_ml == &sym_size_def;
}

Value *tensorops_dim(Tracer *t, Value *x, int d)
{
    static PyObject *fn;                         /* strong, kept */
    PyObject *shape = PyObject_GetAttrString(x->obj, "shape");
    Py_ssize_t n = shape && PyTuple_Check(shape) ? PyTuple_GET_SIZE(shape) : -1;
    if (n < 0 || d < 0 || d >= n) {
        Py_XDECREF(shape);
        return PyErr_Occurred() ? NULL : (tracer_unsupported(t, false, "dimension %d of a tensor "
                                                             "value", d), NULL);
    }
    bool input = x->node != NULL && x->node->op == NODE_PLACEHOLDER;
    Value *fixed = tr_sym_static_dim(t, x, d);   /* a constant by the shape rules */
    if (fixed != NULL || PyErr_Occurred()) {
        Py_DECREF(shape);
        return fixed;
    }
    if (!x->dynshape || (input && (d >= 32 || !(x->dyn_dims & (1u << d))))) {
        Value *c = value_new(t, V_CONST, PyTuple_GET_ITEM(shape, d));   /* fixed by TENSOR_MATCH */
        Py_DECREF(shape);
        return c;
    }
    Py_DECREF(shape);
    if (fn == NULL && (fn = PyCFunction_New(&sym_size_def, NULL)) == NULL)
        return NULL;
    PyObject *dim = PyLong_FromLong(d);
    Value *args[2] = {x, dim ? value_new(t, V_CONST, dim) : NULL};
    Py_XDECREF(dim);
    Value *size = args[1] ? tensorops_call(t, NODE_CALL_FUNCTION, fn, "sym_size", args, 2, NULL) : NULL;
    tr_sym_size_read(t, x, d, size);             /* its expression, when it has one */
    return size;
}

Value *tensorops_shape(Tracer *t, Value *x)
{
    PyObject *shape = PyObject_GetAttrString(x->obj, "shape");
    Py_ssize_t n = shape && PyTuple_Check(shape) ? PyTuple_GET_SIZE(shape) : -1;
    Py_XDECREF(shape);
    if (n < 0)
        return NULL;
    Value *tup = value_new(t, V_TUPLE, NULL);
    for (Py_ssize_t d = 0; tup != NULL && d < n; d++) {
        Value *s = tensorops_dim(t, x, (int)d);
        if (s == NULL || value_append(t, tup, s) < 0)
            return NULL;
    }
    if (tup != NULL && tensorlib_kind(x->obj) == TENSORLIB_TORCH && x->dynshape) {
        /* a torch.Size, should the program get it: x.shape read by the graph */
        tup->stands_for = "torch.Size";
        PyObject *size = PyObject_GetAttrString(x->obj, "shape");
        PyObject *gargs = size ? Py_BuildValue("(Os)", (PyObject *)x->node, "shape") : NULL;
        PyObject *getattr_fn = PyDict_GetItemString(PyEval_GetBuiltins(), "getattr"); /* borrowed */
        tup->node = gargs && getattr_fn ? graph_call(t->graph, NODE_CALL_FUNCTION, getattr_fn, gargs,
                                                     NULL, "size", size) : NULL;
        Py_XDECREF(gargs);
        Py_XDECREF(size);
        if (tup->node == NULL || PySet_Add(t->used_nodes, (PyObject *)tup->node) < 0)
            return NULL;
    }
    return tup;
}

