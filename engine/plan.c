/*
 * plan.c -- what a cache entry runs instead of the bytecode (DESIGN.md 3.6):
 * fetch the graph's inputs by accessor, call the compiled graph once, and
 * rebuild the frame's return value from graph outputs, inputs passed
 * through and constants.  Plans also render as pseudo-Python for explain
 * and dyntop.
 *
 * Invariant: plan_run has no effect of its own besides calling the compiled
 * graph; an exception from the graph propagates unchanged.
 */
#include "engine.h"

#include <string.h>

void rebuild_clear(Rebuild *r)
{
    for (int i = 0; i < r->n; i++)
        rebuild_clear(&r->items[i]);
    PyMem_Free(r->items);
    Py_CLEAR(r->obj);
    memset(r, 0, sizeof(*r));
}

void plan_clear(Plan *p)
{
    Py_CLEAR(p->gm);
    Py_CLEAR(p->compiled);
    PyMem_Free(p->input_acc);
    rebuild_clear(&p->result);
    memset(p, 0, sizeof(*p));
}

/* The value of accessor acc, from vals or computed now.  Borrowed or NULL
   with an exception set. */
static PyObject *input_value(const GuardSet *gs, const FrameView *fv, PyObject **vals, int acc)
{
    PyObject *v = vals[acc] ? vals[acc] : guardset_value(gs, acc, fv, vals);
    if (v == NULL && !PyErr_Occurred())
        PyErr_SetString(PyExc_RuntimeError, "dynscope: a plan input is unreachable");
    return v;
}

static PyObject *rebuild(const Rebuild *r, PyObject *outs, const GuardSet *gs,
                         const FrameView *fv, PyObject **vals)
{
    switch (r->kind) {
    case RB_CONST:
        return Py_NewRef(r->obj);
    case RB_OUTPUT:
        return Py_NewRef(PySequence_Fast_GET_ITEM(outs, r->index));
    case RB_INPUT:
        return Py_XNewRef(input_value(gs, fv, vals, r->index));
    case RB_TUPLE:
    case RB_LIST: {
        PyObject *c = r->kind == RB_TUPLE ? PyTuple_New(r->n) : PyList_New(r->n);
        if (c == NULL)
            return NULL;
        for (int i = 0; i < r->n; i++) {
            PyObject *item = rebuild(&r->items[i], outs, gs, fv, vals);
            if (item == NULL) {
                Py_DECREF(c);
                return NULL;
            }
            if (r->kind == RB_TUPLE)
                PyTuple_SET_ITEM(c, i, item);
            else
                PyList_SET_ITEM(c, i, item);
        }
        return c;
    }
    case RB_DICT: {
        PyObject *d = PyDict_New();
        for (int i = 0; d && i < r->n; i++) {
            PyObject *item = rebuild(&r->items[i], outs, gs, fv, vals);
            if (item == NULL || PyDict_SetItem(d, PyTuple_GET_ITEM(r->obj, i), item) < 0) {
                Py_XDECREF(item);
                Py_CLEAR(d);
                break;
            }
            Py_DECREF(item);
        }
        return d;
    }
    case RB_SLICE: {
        PyObject *p[3] = {NULL, NULL, NULL};
        PyObject *s = NULL;
        for (int i = 0; i < 3; i++)
            if ((p[i] = rebuild(&r->items[i], outs, gs, fv, vals)) == NULL)
                goto out_slice;
        s = PySlice_New(p[0], p[1], p[2]);
    out_slice:
        for (int i = 0; i < 3; i++)
            Py_XDECREF(p[i]);
        return s;
    }
    }
    PyErr_SetString(PyExc_SystemError, "dynscope: bad rebuild kind");
    return NULL;
}

#define SMALL_ARGS 16

PyObject *plan_run(const Plan *p, const GuardSet *gs, const FrameView *fv, PyObject **vals)
{
    PyObject *outs = NULL;
    if (p->compiled != NULL) {
        PyObject *small[SMALL_ARGS] = {NULL};
        PyObject **args = p->ninputs <= SMALL_ARGS ? small
                        : PyMem_Malloc(sizeof(PyObject *) * (size_t)p->ninputs);
        if (args == NULL)
            return PyErr_NoMemory();
        for (int i = 0; i < p->ninputs; i++) {
            args[i] = input_value(gs, fv, vals, p->input_acc[i]);
            if (args[i] == NULL) {
                if (args != small)
                    PyMem_Free(args);
                return NULL;
            }
        }
        outs = PyObject_Vectorcall(p->compiled, args, (size_t)p->ninputs, NULL);
        if (args != small)
            PyMem_Free(args);
        if (outs == NULL)
            return NULL;
        if (!(PyTuple_Check(outs) || PyList_Check(outs))
            || PySequence_Fast_GET_SIZE(outs) != p->noutputs) {
            PyErr_Format(PyExc_TypeError,
                         "dynscope: the compiled graph returned %.100s, expected a "
                         "tuple of %d outputs", Py_TYPE(outs)->tp_name, p->noutputs);
            Py_DECREF(outs);
            return NULL;
        }
    }
    PyObject *result = rebuild(&p->result, outs, gs, fv, vals);
    Py_XDECREF(outs);
    return result;
}

/* ---- rendering ---- */

static int render_rebuild(PyObject *parts, const Rebuild *r, const GuardSet *gs)
{
    PyObject *s = NULL;
    switch (r->kind) {
    case RB_CONST:
        s = PyObject_Repr(r->obj);
        break;
    case RB_OUTPUT:
        s = PyUnicode_FromFormat("graph_out[%d]", r->index);
        break;
    case RB_INPUT:
        s = guardset_render_source(gs, r->index);
        break;
    case RB_TUPLE:
    case RB_LIST:
    case RB_DICT:
    case RB_SLICE: {
        const char *open = r->kind == RB_TUPLE ? "(" : r->kind == RB_LIST ? "[" : r->kind == RB_DICT ? "{" : "slice(";
        const char *close = r->kind == RB_TUPLE ? (r->n == 1 ? ",)" : ")") : r->kind == RB_LIST ? "]" : r->kind == RB_DICT ? "}" : ")";
        s = PyUnicode_FromString(open);
        if (s == NULL || PyList_Append(parts, s) < 0)
            goto fail;
        Py_CLEAR(s);
        for (int i = 0; i < r->n; i++) {
            if (i > 0) {
                s = PyUnicode_FromString(", ");
                if (s == NULL || PyList_Append(parts, s) < 0)
                    goto fail;
                Py_CLEAR(s);
            }
            if (r->kind == RB_DICT) {
                s = PyUnicode_FromFormat("%R: ", PyTuple_GET_ITEM(r->obj, i));
                if (s == NULL || PyList_Append(parts, s) < 0)
                    goto fail;
                Py_CLEAR(s);
            }
            if (render_rebuild(parts, &r->items[i], gs) < 0)
                return -1;
        }
        s = PyUnicode_FromString(close);
        break;
    }
    }
    if (s == NULL || PyList_Append(parts, s) < 0)
        goto fail;
    Py_DECREF(s);
    return 0;
fail:
    Py_XDECREF(s);
    return -1;
}

PyObject *plan_render(const Plan *p, const GuardSet *gs)
{
    PyObject *parts = PyList_New(0);
    PyObject *s = NULL;
    if (parts == NULL)
        return NULL;
    if (p->compiled != NULL) {
        s = PyUnicode_FromString("graph_out = graph(");
        if (s == NULL || PyList_Append(parts, s) < 0)
            goto fail;
        Py_CLEAR(s);
        for (int i = 0; i < p->ninputs; i++) {
            PyObject *src = guardset_render_source(gs, p->input_acc[i]);
            s = src ? PyUnicode_FromFormat("%s%U", i ? ", " : "", src) : NULL;
            Py_XDECREF(src);
            if (s == NULL || PyList_Append(parts, s) < 0)
                goto fail;
            Py_CLEAR(s);
        }
        s = PyUnicode_FromFormat(")    # %d ops\n", p->nops);
        if (s == NULL || PyList_Append(parts, s) < 0)
            goto fail;
        Py_CLEAR(s);
    }
    s = PyUnicode_FromString("return ");
    if (s == NULL || PyList_Append(parts, s) < 0)
        goto fail;
    Py_CLEAR(s);
    if (render_rebuild(parts, &p->result, gs) < 0)
        goto fail;
    PyObject *empty = PyUnicode_FromString("");
    PyObject *out = empty ? PyUnicode_Join(empty, parts) : NULL;
    Py_XDECREF(empty);
    Py_DECREF(parts);
    return out;
fail:
    Py_XDECREF(s);
    Py_DECREF(parts);
    return NULL;
}
