/*
 * tensorops_library.c -- operators of torch.ops (torch.library: aten's and
 * the ones a package registers, `torch.ops.transformers.grouped_mm_fallback`)
 * as graph ops.
 *
 * A call of an OpOverloadPacket or OpOverload is a graph op when each of its
 * overloads (but the out= variants, which only out= reaches, itself a call
 * break) is functional by its schema and tags: nothing it takes is
 * written (`Tensor(a!)`), no random draw (nondeterministic_seeded), no
 * in-place or out= variant, and no result that is data itself
 * (data_dependent_output).  The graph calls the op itself, so what it
 * computes is the op's own code, as eager runs it.
 *
 * What the graph takes from tracing is the result's sizes.  An op's code
 * may loop over a tensor's values, so every call's sizes are checked
 * against the op's meta kernel -- what torch.compile relies on
 * too, the "fake" implementation a package registers: run on meta copies
 * of the same inputs, it must give the sizes and dtypes the real run gave.
 * A meta kernel missing, or one that needs data (get_ctx().new_dynamic_size()),
 * is a call break that says so.  Verdicts per op are kept for the process.
 *
 * torch's private builtins (torch._weight_norm) are not among the public
 * functions tensorops.c allows; one is a graph op when it is aten's op of
 * that name (torch.ops.aten._weight_norm) and that op is, by the rule above.
 */
#include "tensorops_int.h"
#include "../base/tensorlib.h"

#include <string.h>

/* op -> True / False: functional by schema and tags (strong, for the
   process: ops live as long as the library that registered them). */
static PyObject *verdicts;

static const char *const refused_tags[] = {
    /* (not dynamic_output_shape: aten.index is tagged so for its boolean
       masks; each call's meta check below tells, as its meta kernel raises
       for a mask and gives the sizes for integer indices) */
    "nondeterministic_seeded", "data_dependent_output", "inplace",
    "inplace_view", "out", "maybe_aliasing_or_mutating", NULL,
};

/* Whether obj's type is torch._ops.<name>. */
static bool is_torch_ops_type(PyObject *obj, const char *name)
{
    PyTypeObject *tp = Py_TYPE(obj);
    if (strcmp(tp->tp_name, name) != 0)
        return false;
    PyObject *mod = PyObject_GetAttrString((PyObject *)tp, "__module__");
    bool r = mod != NULL && PyUnicode_Check(mod) && PyUnicode_CompareWithASCIIString(mod, "torch._ops") == 0;
    Py_XDECREF(mod);
    PyErr_Clear();
    return r;
}

/* Whether OpOverload ov is an out= variant (tagged `out`): a packet's
   call reaches it only with out=, which is a call break of its own
   (tensorops_call). */
static bool is_out_variant(PyObject *ov)
{
    PyObject *tags = PyObject_GetAttrString(ov, "tags");
    PyObject *seq = tags ? PySequence_Fast(tags, "tags") : NULL;
    bool out = false;
    for (Py_ssize_t i = 0; seq != NULL && !out && i < PySequence_Fast_GET_SIZE(seq); i++) {
        PyObject *name = PyObject_GetAttrString(PySequence_Fast_GET_ITEM(seq, i), "name");
        out = name && PyUnicode_Check(name) && PyUnicode_CompareWithASCIIString(name, "out") == 0;
        Py_XDECREF(name);
    }
    Py_XDECREF(seq);
    Py_XDECREF(tags);
    PyErr_Clear();
    return out;
}

/* One OpOverload: 1 functional, 0 not, -1 error. */
static int overload_is_functional(PyObject *ov)
{
    PyObject *schema = PyObject_GetAttrString(ov, "_schema");
    PyObject *mutable = schema ? PyObject_GetAttrString(schema, "is_mutable") : NULL;
    int ok = mutable ? !PyObject_IsTrue(mutable) : -1;
    Py_XDECREF(mutable);
    Py_XDECREF(schema);
    PyObject *tags = ok == 1 ? PyObject_GetAttrString(ov, "tags") : NULL;
    PyObject *seq = tags ? PySequence_Fast(tags, "tags") : NULL;
    if (ok == 1 && seq == NULL)
        ok = -1;
    for (Py_ssize_t i = 0; ok == 1 && i < PySequence_Fast_GET_SIZE(seq); i++) {
        PyObject *name = PyObject_GetAttrString(PySequence_Fast_GET_ITEM(seq, i), "name");
        const char *s = name && PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : NULL;
        if (s == NULL)
            ok = -1;
        else if (tensorops_in_names(s, refused_tags))
            ok = 0;
        Py_XDECREF(name);
    }
    Py_XDECREF(seq);
    Py_XDECREF(tags);
    return ok;
}

/* An OpOverloadPacket: every overload but its out= variants; an
   OpOverload: itself. */
static int op_is_functional(PyObject *fn)
{
    if (is_torch_ops_type(fn, "OpOverload"))
        return overload_is_functional(fn);
    PyObject *names = PyObject_CallMethod(fn, "overloads", NULL);
    PyObject *seq = names ? PySequence_Fast(names, "overloads") : NULL;
    Py_XDECREF(names);
    if (seq == NULL)
        return -1;
    int ok = PySequence_Fast_GET_SIZE(seq) > 0;
    for (Py_ssize_t i = 0; ok == 1 && i < PySequence_Fast_GET_SIZE(seq); i++) {
        PyObject *ov = PyObject_GetAttr(fn, PySequence_Fast_GET_ITEM(seq, i));
        ok = ov == NULL ? -1 : is_out_variant(ov) ? 1 : overload_is_functional(ov);
        Py_XDECREF(ov);
    }
    Py_DECREF(seq);
    return ok;
}

/* (contract: translate.h) */
bool tensorops_is_library_op_type(PyObject *fn)
{
    return is_torch_ops_type(fn, "OpOverloadPacket") || is_torch_ops_type(fn, "OpOverload");
}

/* (contract: translate.h) */
bool tensorops_is_library_op(PyObject *fn)
{
    if (!tensorops_is_library_op_type(fn))
        return false;
    if (verdicts == NULL && (verdicts = PyDict_New()) == NULL) {
        PyErr_Clear();
        return false;
    }
    PyObject *known = PyDict_GetItemWithError(verdicts, fn);        /* borrowed */
    if (known != NULL)
        return known == Py_True;
    PyErr_Clear();
    int ok = op_is_functional(fn);
    PyErr_Clear();                                 /* an op we cannot read is not ours */
    if (PyDict_SetItem(verdicts, fn, ok == 1 ? Py_True : Py_False) < 0)
        PyErr_Clear();
    return ok == 1;
}

/* fn -> its aten packet, or None: private torch builtins (below). */
static PyObject *private_ops;

/* (contract: translate.h) */
PyObject *tensorops_private_torch_op(PyObject *fn)
{
    if (!PyCFunction_Check(fn) || PyCFunction_GET_SELF(fn) != NULL)
        return NULL;
    const char *name = ((PyCFunctionObject *)fn)->m_ml->ml_name;
    if (name[0] != '_' || name[1] == '_')
        return NULL;
    if (private_ops == NULL && (private_ops = PyDict_New()) == NULL) {
        PyErr_Clear();
        return NULL;
    }
    PyObject *known = PyDict_GetItemWithError(private_ops, fn);          /* borrowed */
    if (known != NULL)
        return known == Py_None ? NULL : known;
    PyErr_Clear();
    /* torch.<name> is fn itself, and torch.ops.aten.<name> a functional op */
    PyObject *mod = PyObject_GetAttrString(fn, "__module__");
    PyObject *torch = mod && PyUnicode_Check(mod) && PyUnicode_CompareWithASCIIString(mod, "torch") == 0
                      ? PyImport_GetModule(mod) : NULL;
    PyObject *same = torch ? PyObject_GetAttrString(torch, name) : NULL;
    PyObject *ops = same == fn ? PyObject_GetAttrString(torch, "ops") : NULL;
    PyObject *aten = ops ? PyObject_GetAttrString(ops, "aten") : NULL;
    PyObject *packet = aten ? PyObject_GetAttrString(aten, name) : NULL;
    Py_XDECREF(mod);
    Py_XDECREF(torch);
    Py_XDECREF(same);
    Py_XDECREF(ops);
    Py_XDECREF(aten);
    PyErr_Clear();
    if (packet != NULL && !tensorops_is_library_op(packet))
        Py_CLEAR(packet);
    if (PyDict_SetItem(private_ops, fn, packet ? packet : Py_None) < 0)
        PyErr_Clear();
    Py_XDECREF(packet);                                 /* the dict keeps it */
    known = PyDict_GetItemWithError(private_ops, fn);
    PyErr_Clear();
    return known == Py_None ? NULL : known;
}

/* x with every tensor in it (at the top, or in a list or tuple) copied to
   the meta device.  New reference or NULL. */
static PyObject *to_meta(PyObject *x)
{
    if (tensorlib_input_kind(x) == TENSORLIB_TORCH)
        return PyObject_CallMethod(x, "to", "s", "meta");
    if (PyList_CheckExact(x) || PyTuple_CheckExact(x)) {
        Py_ssize_t n = PySequence_Fast_GET_SIZE(x);
        PyObject *out = PyList_New(n);
        for (Py_ssize_t i = 0; out != NULL && i < n; i++) {
            PyObject *m = to_meta(PySequence_Fast_GET_ITEM(x, i));
            if (m == NULL)
                Py_CLEAR(out);
            else
                PyList_SET_ITEM(out, i, m);
        }
        if (out != NULL && PyTuple_CheckExact(x))
            Py_SETREF(out, PyList_AsTuple(out));
        return out;
    }
    return Py_NewRef(x);
}

/* Whether meta result m has real result r's sizes and dtypes (tensors, or
   tuples and lists of them, alike). */
static bool same_metadata(PyObject *r, PyObject *m)
{
    if (tensorlib_input_kind(r) == TENSORLIB_TORCH) {
        if (tensorlib_input_kind(m) != TENSORLIB_TORCH)
            return false;
        PyObject *a = PyObject_GetAttrString(r, "shape"), *b = PyObject_GetAttrString(m, "shape");
        PyObject *da = PyObject_GetAttrString(r, "dtype"), *db = PyObject_GetAttrString(m, "dtype");
        bool same = a && b && da && db && PyObject_RichCompareBool(a, b, Py_EQ) == 1 && da == db;
        Py_XDECREF(a);
        Py_XDECREF(b);
        Py_XDECREF(da);
        Py_XDECREF(db);
        PyErr_Clear();
        return same;
    }
    if (PyTuple_Check(r) || PyList_Check(r)) {
        if (!(PyTuple_Check(m) || PyList_Check(m)) || PySequence_Size(m) != PySequence_Size(r))
            return false;
        for (Py_ssize_t i = 0; i < PySequence_Size(r); i++) {
            PyObject *ri = PySequence_GetItem(r, i), *mi = PySequence_GetItem(m, i);
            bool same = ri && mi && same_metadata(ri, mi);
            Py_XDECREF(ri);
            Py_XDECREF(mi);
            if (!same) {
                PyErr_Clear();
                return false;
            }
        }
        return true;
    }
    return PyObject_RichCompareBool(r, m, Py_EQ) == 1 || (PyErr_Clear(), false);
}

/* (contract: translate.h) */
int tensorops_library_op_sizes(Tracer *t, PyObject *op, const char *hint, PyObject *eargs,
                               PyObject *ekw, PyObject *result)
{
    PyObject *margs = to_meta(eargs), *mkw = NULL, *mres = NULL;
    if (margs != NULL && ekw != NULL) {
        mkw = PyDict_New();
        PyObject *k, *v;
        Py_ssize_t pos = 0;
        while (mkw != NULL && PyDict_Next(ekw, &pos, &k, &v)) {
            PyObject *m = to_meta(v);
            if (m == NULL || PyDict_SetItem(mkw, k, m) < 0)
                Py_CLEAR(mkw);
            Py_XDECREF(m);
        }
    }
    if (margs != NULL && (ekw == NULL || mkw != NULL))
        mres = PyObject_Call(op, margs, mkw);
    Py_XDECREF(margs);
    Py_XDECREF(mkw);
    if (mres == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_Exception))
            return -1;
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyErr_NormalizeException(&type, &value, &tb);
        tracer_break(t, STOP_CALL, "call of torch.ops %s: its meta kernel, which would say the "
                     "sizes of its result, is missing or needs the data (%s: %S)", hint,
                     ((PyTypeObject *)type)->tp_name, value ? value : Py_None);
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
        return -1;
    }
    bool same = same_metadata(result, mres);
    Py_DECREF(mres);
    if (!same)
        return tracer_break(t, STOP_CALL, "call of torch.ops %s: its meta kernel gives other "
                            "sizes than the op (they depend on the data)", hint);
    return 0;
}
