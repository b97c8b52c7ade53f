/*
 * tr_vmap.c -- torch.vmap while translating (DESIGN.md 3.4; contract:
 * translate_int.h): `torch.vmap(func, in_dims, out_dims)(*args)` captured
 * in the graph, as functorch runs it.
 *
 * torch.vmap's own Python (torch/_functorch/vmap.py) does, for a call:
 *     level = _vmap_increment_nesting(batch_size, randomness)
 *     batched = [_add_batch_dim(x, in_dim, level) for each batched x]
 *     out = func(*batched, **kwargs)
 *     [_remove_batch_dim(o, level, batch_size, out_dim) for each output o]
 *     _vmap_decrement_nesting()            (in a finally)
 * and that is what the graph gets: those functorch primitives as nodes,
 * func inlined between them, its ops running on batched tensors -- while
 * tracing too, so each op's example is what functorch computes.  The
 * graph runs its nodes in order (the built-in eager backend), so the
 * level is open exactly around func's ops; graph_program.c leaves the
 * levels a failing run left open (Program.vmap_leave).
 *
 * Invariants:
 *   - only the built-in eager backend: a torch.fx backend could drop or
 *     move the level nodes, which fx does not know to have effects;
 *   - while tracing, the level is left whatever happens (the state modes
 *     of tr_calls.c: a stop leaves it), and an exception func raises
 *     inside is a stop, not a modelled raise: the graph must never keep
 *     an open level on a path that goes on;
 *   - in_dims, out_dims and randomness are constants (a tuple the trace
 *     built of constants counts); randomness is "error" (the default:
 *     random ops inside raise, as eager's); chunk_size is None;
 *   - no size symbols in the trace (dynamic sizes): the shape rules
 *     (tr_shapes.c) would read a batched example's logical shape;
 *   - func's outputs are tensors, or a tuple or list of them; anything
 *     vmap would reject stops, and the call runs eagerly to raise it.
 */
#include "translate_int.h"

/* torch.vmap (torch._functorch.apis.vmap), and functorch's primitives.
   Strong, held for the process once torch._functorch is imported. */
static PyObject *vmap_fn, *increment_fn, *decrement_fn, *add_dim_fn, *remove_dim_fn;

static int find_vmap(void)
{
    if (vmap_fn != NULL)
        return 1;
    PyObject *name = PyUnicode_FromString("torch._functorch.apis");
    PyObject *apis = name ? PyImport_GetModule(name) : NULL;
    Py_XDECREF(name);
    name = apis ? PyUnicode_FromString("torch._C._functorch") : NULL;
    PyObject *prims = name ? PyImport_GetModule(name) : NULL;
    Py_XDECREF(name);
    PyObject *fns[5] = {NULL};
    if (apis != NULL && prims != NULL) {
        fns[0] = PyObject_GetAttrString(apis, "vmap");
        fns[1] = fns[0] ? PyObject_GetAttrString(prims, "_vmap_increment_nesting") : NULL;
        fns[2] = fns[1] ? PyObject_GetAttrString(prims, "_vmap_decrement_nesting") : NULL;
        fns[3] = fns[2] ? PyObject_GetAttrString(prims, "_add_batch_dim") : NULL;
        fns[4] = fns[3] ? PyObject_GetAttrString(prims, "_remove_batch_dim") : NULL;
    }
    Py_XDECREF(apis);
    Py_XDECREF(prims);
    PyErr_Clear();
    if (fns[4] == NULL) {
        for (int i = 0; i < 5; i++)
            Py_XDECREF(fns[i]);
        return 0;
    }
    vmap_fn = fns[0];
    increment_fn = fns[1];
    decrement_fn = fns[2];
    add_dim_fn = fns[3];
    remove_dim_fn = fns[4];
    return 1;
}

/* (contract: translate_int.h) */
bool tr_is_vmap(PyObject *fn)
{
    return find_vmap() == 1 && fn == vmap_fn;
}

/* The constant a value stands for: a V_CONST's object, or a tuple or
   list the trace built of constants (pytree.tree_unflatten's in_dims).
   New reference, or NULL (no exception) when it is not one. */
static PyObject *constant_of(Value *v, int depth)
{
    if (v->kind == V_CONST)
        return value_is_plain_constant(v->obj) ? Py_NewRef(v->obj) : NULL;
    if ((v->kind != V_TUPLE && v->kind != V_LIST) || v->tuple_type != NULL
        || v->stands_for != NULL || depth > 8)
        return NULL;
    PyObject *c = v->kind == V_TUPLE ? PyTuple_New(v->n) : PyList_New(v->n);
    for (int i = 0; c != NULL && i < v->n; i++) {
        PyObject *item = constant_of(v->items[i], depth + 1);
        if (item == NULL)
            Py_CLEAR(c);
        else if (v->kind == V_TUPLE)
            PyTuple_SET_ITEM(c, i, item);
        else
            PyList_SET_ITEM(c, i, item);
    }
    PyErr_Clear();
    return c;
}

/* The argument named `name` (or positional `pos`) of a call, or NULL. */
static Value *arg_of(Value **args, int nargs, PyObject *kwnames, const char *name, int pos)
{
    int nkw = kwnames ? (int)PyTuple_GET_SIZE(kwnames) : 0, npos = nargs - nkw;
    if (pos < npos)
        return args[pos];
    for (int i = 0; i < nkw; i++)
        if (PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, i), name) == 0)
            return args[npos + i];
    return NULL;
}

/* (contract: translate_int.h) */
Value *tr_make_vmap(TFrame *f, Value **args, int nargs, PyObject *kwnames)
{
    Tracer *t = f->t;
    static const char *const known[] = {"func", "in_dims", "out_dims", "randomness", "chunk_size"};
    int nkw = kwnames ? (int)PyTuple_GET_SIZE(kwnames) : 0, npos = nargs - nkw;
    for (int i = 0; i < nkw; i++) {
        bool ok = false;
        for (int k = 0; k < 5; k++)
            ok |= PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, i), known[k]) == 0;
        if (!ok)
            return tracer_unsupported(t, false, "torch.vmap() with keyword %R",
                                      PyTuple_GET_ITEM(kwnames, i)), NULL;
    }
    Value *func = arg_of(args, nargs, kwnames, "func", 0);
    Value *in_v = arg_of(args, nargs, kwnames, "in_dims", 1);
    Value *out_v = arg_of(args, nargs, kwnames, "out_dims", 2);
    Value *rand_v = arg_of(args, nargs, kwnames, "randomness", 3);
    Value *chunk_v = arg_of(args, nargs, kwnames, "chunk_size", 99);
    if (func == NULL || npos > 4)
        return tracer_unsupported(t, false, "torch.vmap() with these arguments"), NULL;
    PyObject *in_dims = in_v ? constant_of(in_v, 0) : PyLong_FromLong(0);
    PyObject *out_dims = out_v ? constant_of(out_v, 0) : PyLong_FromLong(0);
    PyObject *randomness = rand_v ? constant_of(rand_v, 0) : PyUnicode_FromString("error");
    PyObject *spec = in_dims && out_dims && randomness ? PyTuple_Pack(3, in_dims, out_dims, randomness)
                                                       : NULL;
    bool plain_random = randomness && PyUnicode_Check(randomness)
                        && PyUnicode_CompareWithASCIIString(randomness, "error") == 0;
    Py_XDECREF(in_dims);
    Py_XDECREF(out_dims);
    Py_XDECREF(randomness);
    if (PyErr_Occurred()) {
        Py_XDECREF(spec);
        return NULL;
    }
    if (spec == NULL || !plain_random
        || (chunk_v != NULL && !(chunk_v->kind == V_CONST && chunk_v->obj == Py_None))) {
        Py_XDECREF(spec);
        return tracer_unsupported(t, false, "torch.vmap() whose in_dims, out_dims or randomness "
                                  "are not constants, randomness other than 'error', or a "
                                  "chunk_size"), NULL;
    }
    Value *vm = value_new(t, V_VMAP, spec);
    Py_DECREF(spec);
    if (vm == NULL || value_append(t, vm, func) < 0)
        return NULL;
    return vm;
}

/* ---- a call ---- */

/* One open level while tracing: left by tr_leave_state_modes (tr_calls.c)
   as leave(level). */
static PyObject *leave_level(PyObject *self, PyObject *level)
{
    (void)self;
    (void)level;
    return PyObject_CallNoArgs(decrement_fn);
}
static PyMethodDef leave_level_def = {"vmap_leave_level", leave_level, METH_O, NULL};

typedef struct Batch {
    Tracer *t;
    PyObject *level;          /* the level while tracing (an int) */
    NodeObject *level_node;   /* the node that opens it */
    Py_ssize_t size;          /* the batch size; -1 until a batched tensor is seen */
} Batch;

/* A node fn(*gargs) reading tensor x (eargs: the same with examples, which
   fn runs on now for the node's example): its value.  Steals neither
   tuple; NULL when tracing stops. */
static Value *functorch_node(Batch *b, PyObject *fn, const char *hint, Value *x,
                             PyObject *eargs, PyObject *gargs)
{
    Tracer *t = b->t;
    PyObject *ex = eargs && gargs ? PyObject_Call(fn, eargs, NULL) : NULL;
    NodeObject *n = ex ? graph_call(t->graph, NODE_CALL_FUNCTION, fn, gargs, NULL, hint, ex) : NULL;
    Value *v = n ? value_new(t, V_TENSOR, ex) : NULL;
    Py_XDECREF(ex);
    if (v == NULL)
        return NULL;
    v->node = n;
    return PySet_Add(t->used_nodes, (PyObject *)x->node) == 0 ? v : NULL;
}

/* x (a V_TENSOR) batched along dim: a node _add_batch_dim(x, dim, level). */
static Value *add_batch_dim(Batch *b, Value *x, long dim)
{
    Tracer *t = b->t;
    if (x->node == NULL || x->dynshape || !tensor_is_torch(x->obj))
        return tracer_unsupported(t, false, "torch.vmap of a value that is not a torch tensor "
                                  "the graph computes"), NULL;
    PyObject *shape = PyObject_GetAttrString(x->obj, "shape");
    Py_ssize_t ndim = shape && PyTuple_Check(shape) ? PyTuple_GET_SIZE(shape) : -1;
    long d = dim < 0 ? dim + (long)ndim : dim;
    Py_ssize_t size = ndim > 0 && d >= 0 && d < ndim ? PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, d)) : -1;
    Py_XDECREF(shape);
    if (PyErr_Occurred())
        return NULL;
    if (size < 0 || (b->size >= 0 && size != b->size))
        return tracer_unsupported(t, false, "torch.vmap of inputs whose batch dimensions are "
                                  "out of range or of different sizes (vmap raises)"), NULL;
    b->size = size;
    PyObject *pd = PyLong_FromLong(d);
    PyObject *eargs = pd ? PyTuple_Pack(3, x->obj, pd, b->level) : NULL;
    PyObject *gargs = pd ? PyTuple_Pack(3, (PyObject *)x->node, pd, (PyObject *)b->level_node) : NULL;
    Value *v = functorch_node(b, add_dim_fn, "add_batch_dim", x, eargs, gargs);
    Py_XDECREF(pd);
    Py_XDECREF(eargs);
    Py_XDECREF(gargs);
    return v;
}

/* arg as func gets it under in_dims spec: a new value with its batched
   tensors in place (arg itself when nothing in it is batched). */
static Value *batched_arg(Batch *b, Value *arg, PyObject *spec, int depth)
{
    Tracer *t = b->t;
    if (spec == Py_None)
        return arg;
    bool container = (arg->kind == V_TUPLE || arg->kind == V_LIST) && arg->tuple_type == NULL
                     && arg->stands_for == NULL;
    if (PyLong_CheckExact(spec) && arg->kind == V_TENSOR)
        return add_batch_dim(b, arg, PyLong_AsLong(spec));
    bool spec_seq = PyTuple_CheckExact(spec) || PyList_CheckExact(spec);
    if (depth > 8 || !container || (spec_seq && (PySequence_Fast_GET_SIZE(spec) != arg->n
                                                 || PyTuple_CheckExact(spec) != (arg->kind == V_TUPLE)))
        || (!spec_seq && !PyLong_CheckExact(spec)))
        return tracer_unsupported(t, false, "torch.vmap with in_dims that do not match its "
                                  "arguments (vmap raises)"), NULL;
    Value *c = value_new(t, arg->kind, NULL);
    for (int i = 0; c != NULL && i < arg->n; i++) {
        Value *item = batched_arg(b, arg->items[i], spec_seq ? PySequence_Fast_GET_ITEM(spec, i) : spec,
                                  depth + 1);
        if (item == NULL || value_append(t, c, item) < 0)
            c = NULL;
    }
    return c;
}

/* out as vmap returns it: each tensor a node _remove_batch_dim(o, level,
   size, out_dim). */
static Value *unbatched_out(Batch *b, Value *out, PyObject *spec, int depth)
{
    Tracer *t = b->t;
    if (out->kind == V_TENSOR && PyLong_CheckExact(spec)) {
        if (out->node == NULL || out->dynshape || !tensor_is_torch(out->obj))
            return tracer_unsupported(t, false, "torch.vmap of a function returning what is not "
                                      "a torch tensor the graph computes"), NULL;
        PyObject *size = PyLong_FromSsize_t(b->size);
        PyObject *eargs = size ? PyTuple_Pack(4, out->obj, b->level, size, spec) : NULL;
        PyObject *gargs = size ? PyTuple_Pack(4, (PyObject *)out->node, (PyObject *)b->level_node,
                                             size, spec) : NULL;
        Value *v = functorch_node(b, remove_dim_fn, "remove_batch_dim", out, eargs, gargs);
        Py_XDECREF(size);
        Py_XDECREF(eargs);
        Py_XDECREF(gargs);
        return v;
    }
    bool spec_seq = PyTuple_CheckExact(spec) || PyList_CheckExact(spec);
    if (depth > 0 || (out->kind != V_TUPLE && out->kind != V_LIST) || out->tuple_type != NULL
        || out->stands_for != NULL || (spec_seq && PySequence_Fast_GET_SIZE(spec) != out->n)
        || (!spec_seq && !PyLong_CheckExact(spec)))
        return tracer_unsupported(t, false, "torch.vmap of a function whose outputs are not "
                                  "tensors, or a tuple or list of them, as out_dims says"), NULL;
    Value *c = value_new(t, out->kind, NULL);
    for (int i = 0; c != NULL && i < out->n; i++) {
        Value *item = unbatched_out(b, out->items[i], spec_seq ? PySequence_Fast_GET_ITEM(spec, i) : spec,
                                    depth + 1);
        if (item == NULL || value_append(t, c, item) < 0)
            c = NULL;
    }
    return c;
}

/* Open a level of batch size `size`: while tracing (noted in the state
   modes, so that a stop leaves it) and as a node.  0 / -1. */
static PyObject *leave;               /* strong, for the process: leave_level */

static int open_level(Batch *b, Py_ssize_t size)
{
    Tracer *t = b->t;
    if (leave == NULL && (leave = PyCFunction_New(&leave_level_def, NULL)) == NULL)
        return -1;
    if (t->state_modes == NULL && (t->state_modes = PyList_New(0)) == NULL)
        return -1;
    PyObject *gargs = Py_BuildValue("(ns)", size, "error");
    b->level = gargs ? PyObject_Call(increment_fn, gargs, NULL) : NULL;
    PyObject *pair = b->level ? PyTuple_Pack(2, leave, b->level) : NULL;
    if (pair == NULL || PyList_Append(t->state_modes, pair) < 0) {
        if (b->level != NULL) {
            PyObject *r = PyObject_CallNoArgs(decrement_fn);
            Py_XDECREF(r);
        }
        Py_XDECREF(pair);
        Py_XDECREF(gargs);
        return -1;
    }
    Py_DECREF(pair);
    b->level_node = graph_call(t->graph, NODE_CALL_FUNCTION, increment_fn, gargs, NULL,
                               "vmap_increment_nesting", b->level);
    Py_DECREF(gargs);
    return b->level_node && PySet_Add(t->used_nodes, (PyObject *)b->level_node) == 0
           && PyDict_SetItemString(b->level_node->meta, GRAPH_META_UNDO, leave) == 0 ? 0 : -1;
}

/* The batch size: that of the first tensor in_dims batches (read before
   the level opens: every leaf is checked again as it is batched). */
static Py_ssize_t first_batch_size(Value *arg, PyObject *spec, int depth)
{
    if (spec == Py_None || depth > 8)
        return -1;
    if (arg->kind == V_TENSOR && PyLong_CheckExact(spec) && tensor_is_torch(arg->obj)) {
        PyObject *shape = PyObject_GetAttrString(arg->obj, "shape");
        Py_ssize_t ndim = shape && PyTuple_Check(shape) ? PyTuple_GET_SIZE(shape) : 0;
        long d = PyLong_AsLong(spec);
        d = d < 0 ? d + (long)ndim : d;
        Py_ssize_t size = d >= 0 && d < ndim ? PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, d)) : -1;
        Py_XDECREF(shape);
        PyErr_Clear();
        return size;
    }
    if (arg->kind != V_TUPLE && arg->kind != V_LIST)
        return -1;
    bool spec_seq = PyTuple_CheckExact(spec) || PyList_CheckExact(spec);
    for (int i = 0; i < arg->n; i++) {
        if (spec_seq && i >= PySequence_Fast_GET_SIZE(spec))
            return -1;
        Py_ssize_t s = first_batch_size(arg->items[i], spec_seq ? PySequence_Fast_GET_ITEM(spec, i)
                                                                : spec, depth + 1);
        if (s >= 0)
            return s;
    }
    return -1;
}

/* (contract: translate_int.h) */
Value *tr_call_vmap(TFrame *f, Value *vm, Value **args, int nargs, PyObject *kwnames)
{
    Tracer *t = f->t;
    if (!backend_is_native(t->backend))
        return tracer_unsupported(t, false, "torch.vmap is captured for the built-in eager "
                                  "backend only (a torch.fx backend may drop or move "
                                  "functorch's level nodes)"), NULL;
    if (t->nsyms != 0)
        return tracer_unsupported(t, false, "torch.vmap in a trace with dynamic sizes"), NULL;
    PyObject *in_dims = PyTuple_GET_ITEM(vm->obj, 0), *out_dims = PyTuple_GET_ITEM(vm->obj, 1);
    int nkw = kwnames ? (int)PyTuple_GET_SIZE(kwnames) : 0, npos = nargs - nkw;
    bool per_arg = PyTuple_CheckExact(in_dims);
    if ((per_arg && PyTuple_GET_SIZE(in_dims) != npos) || (!per_arg && !PyLong_CheckExact(in_dims))
        || nargs >= MAX_STACK)
        return tracer_unsupported(t, false, "torch.vmap with in_dims that do not match its "
                                  "arguments (vmap raises)"), NULL;
    Py_ssize_t size = -1;
    for (int i = 0; size < 0 && i < npos; i++)
        size = first_batch_size(args[i], per_arg ? PyTuple_GET_ITEM(in_dims, i) : in_dims, 0);
    if (size < 0)
        return tracer_unsupported(t, false, "torch.vmap with no tensor to batch (vmap raises)"), NULL;
    if (tensorops_note_torch(t) < 0)
        return NULL;
    Py_ssize_t modes_mark = t->state_modes ? PyList_GET_SIZE(t->state_modes) : 0;
    Batch b = {t, NULL, NULL, -1};
    Value *batched[MAX_STACK];
    Value *r = NULL;
    if (open_level(&b, size) < 0)
        goto out;
    for (int i = 0; i < nargs; i++) {
        batched[i] = i >= npos ? args[i]
                     : batched_arg(&b, args[i], per_arg ? PyTuple_GET_ITEM(in_dims, i) : in_dims, 0);
        if (batched[i] == NULL)
            goto out;
    }
    Value *out = tr_call_or_undo(f, vm->items[0], batched, nargs, kwnames);
    if (out == NULL) {
        if (t->raised != NULL) {
            t->raised = NULL;          /* a raise inside: a stop, the level must not stay open */
            tracer_unsupported(t, false, "an exception raised inside a function under torch.vmap");
        }
        goto out;
    }
    if (t->nsyms != 0) {
        tracer_unsupported(t, false, "torch.vmap in a trace with dynamic sizes");
        goto out;
    }
    r = unbatched_out(&b, out, out_dims, 0);
    if (r != NULL) {
        PyObject *none = PyTuple_New(0);
        NodeObject *n = none ? graph_call(t->graph, NODE_CALL_FUNCTION, decrement_fn, none, NULL,
                                          "vmap_decrement_nesting", Py_None) : NULL;
        Py_XDECREF(none);
        if (n == NULL || PyDict_SetItemString(n->meta, GRAPH_META_CLOSES, Py_True) < 0)
            r = NULL;
    }
out:
    if (b.level != NULL)
        tr_leave_state_modes(t, modes_mark);     /* the level, while tracing */
    Py_XDECREF(b.level);
    return r;
}
