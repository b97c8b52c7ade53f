/*
 * tr_inplace.c -- in-place torch ops inside graphs: x.add_(y), x += y,
 * x.masked_fill_(m, v), x.uniform_() on any torch tensor.
 *
 * The graph does the real in-place op, where the program does it, and
 * later reads of the tensor read that node (so every backend keeps the
 * order).  Tracing must not do it to anything the program holds: on a
 * tensor this graph made (no input, no view, no storage shared with an
 * input) the op runs on the example itself, as eager code would; on any
 * other tensor -- an input, a parameter, a view of one -- it runs on a
 * clone of the example, and the tensor's example keeps its old contents.
 *
 * That is sound because tracing never decides anything from a tensor's
 * contents: a branch on one, .item() and the like are breaks, and ops
 * whose result shape depends on data mark it unknown (dynshape).  Contents
 * are only ever what the examples compute, and the graph recomputes them.
 * What the in-place ops here must keep, then, is everything else a trace
 * relies on: shape, strides, dtype, device, requires_grad -- so ops that
 * change metadata (resize_, t_, squeeze_, requires_grad_, set_, ...) are
 * not among them and stay call breaks.
 *
 * Invariants:
 *   - An in-place op on a leaf tensor that requires grad, with grad mode
 *     on, is a call break: eager code raises there, and the eager step
 *     raises the same error.
 *   - The Value of the receiver stays the one Value of that tensor (so
 *     `x.add_(1) is x` holds); only its node moves to the in-place op.
 */
#include "translate_int.h"
#include "../base/tensorlib.h"

#include <string.h>

/* In-place torch.Tensor methods that change more than the contents. */
static const char *const metadata_changing[] = {
    "resize_", "resize_as_", "set_", "as_strided_", "t_", "transpose_", "swapaxes_",
    "swapdims_", "squeeze_", "unsqueeze_", "detach_", "requires_grad_", "share_memory_",
    "rename_", "refine_names_", "align_to_", "module_load_", "apply_", "map_", "map2_",
    "storage_", "set_data_", "retain_grad_", "record_stream_", "copy_from_", "sparse_resize_",
    "sparse_resize_and_clear_", "coalesce_", "_coalesced_", NULL,
};

bool tr_inplace_method_allowed(const char *name)
{
    size_t n = strlen(name);
    if (n < 2 || name[0] == '_' || name[n - 1] != '_' || name[n - 2] == '_')
        return false;
    for (int i = 0; metadata_changing[i]; i++)
        if (strcmp(name, metadata_changing[i]) == 0)
            return false;
    return true;
}

/* The address of a torch tensor's storage, or 0 (an error cleared). */
static uintptr_t storage_address(PyObject *tensor)
{
    PyObject *st = PyObject_CallMethod(tensor, "untyped_storage", NULL);
    PyObject *ptr = st ? PyObject_CallMethod(st, "data_ptr", NULL) : NULL;
    uintptr_t addr = ptr ? (uintptr_t)PyLong_AsVoidPtr(ptr) : 0;
    Py_XDECREF(ptr);
    Py_XDECREF(st);
    if (PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    return addr;
}

bool tr_tensor_is_own(Tracer *t, Value *a)
{
    if (a->node == NULL || a->node->op == NODE_PLACEHOLDER || !tensor_is_torch(a->obj))
        return false;
    PyObject *isv = PyObject_CallMethod(a->obj, "_is_view", NULL);
    int view = isv ? PyObject_IsTrue(isv) : -1;
    Py_XDECREF(isv);
    if (view != 0) {
        PyErr_Clear();
        return false;
    }
    uintptr_t addr = storage_address(a->obj);
    if (addr == 0)
        return false;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(t->example_inputs); i++) {
        PyObject *in = PyList_GET_ITEM(t->example_inputs, i);
        if (in == a->obj || (tensor_is_torch(in) && storage_address(in) == addr))
            return false;
    }
    return true;
}

/* Whether the op would raise eagerly for writing into a leaf that
   requires grad (grad mode on: tracing runs in the call's mode): 1 / 0,
   -1 with an exception. */
static int leaf_requiring_grad(PyObject *tensor)
{
    PyObject *rg = PyObject_GetAttrString(tensor, "requires_grad");
    PyObject *leaf = rg ? PyObject_GetAttrString(tensor, "is_leaf") : NULL;
    int r = leaf ? PyObject_IsTrue(rg) == 1 && PyObject_IsTrue(leaf) == 1 : -1;
    Py_XDECREF(rg);
    Py_XDECREF(leaf);
    if (r == 1) {
        PyObject *fn = tensorlib_grad_enabled_fn();                   /* borrowed */
        PyObject *on = fn ? PyObject_CallNoArgs(fn) : NULL;
        r = on ? PyObject_IsTrue(on) : -1;
        Py_XDECREF(on);
    }
    return r;
}

int tr_inplace_prepare(Tracer *t, Value *receiver, const char *hint, PyObject *eargs)
{
    if (tr_tensor_is_own(t, receiver))
        return 0;
    if (PyErr_Occurred())
        return -1;
    PyObject *example = PyTuple_GET_ITEM(eargs, 0);                  /* borrowed */
    int leaf = leaf_requiring_grad(example);
    if (leaf < 0)
        return -1;
    if (leaf)
        return tracer_break(t, STOP_CALL, "%s writes into a leaf tensor that requires grad "
                            "(eager code raises)", hint);
    PyObject *copy = PyObject_CallMethod(example, "clone", NULL);
    if (copy == NULL)
        return -1;
    PyTuple_SET_ITEM(eargs, 0, copy);         /* eargs is the tracer's own new tuple */
    Py_DECREF(example);
    return 1;
}
