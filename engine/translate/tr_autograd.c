/*
 * tr_autograd.c -- torch.autograd.Function.apply where autograd records
 * nothing (grad mode off: torch.no_grad(), inference): the Function's
 * forward inlined, as the C apply calls it.  Contract: translate_int.h.
 *
 * Fn.apply(*args) reaches torch.autograd.Function.apply, which (outside
 * functorch transforms) calls the C _FunctionBase.apply -- or, from torch
 * 2.14 on, is that C classmethod itself (Fn.apply a builtin method bound
 * to Fn; its __qualname__ guarded, as a class's own apply would differ).
 * The C apply makes a
 * context, calls Fn.forward(ctx, *args) -- or Fn.forward(*args) then
 * Fn.setup_context(ctx, args, output) when the class defines
 * setup_context -- and, with nothing to record, hands forward's outputs
 * back unchanged except an input returned as it is, which comes back as
 * a view.  Here the context is a torch.autograd.function.FunctionCtx made
 * while tracing (its save_for_backward and the rest are Python that only
 * note what a backward would need; the context is dropped after), and
 * forward and setup_context are inlined like any Python function.
 *
 * Invariants:
 *   - grad mode is off where apply is called (the frame's starting mode is
 *     guarded, GUARD_GRAD_MODE, and tracing follows its changes); with it
 *     on, the call is a break (autograd would record a backward node);
 *   - Fn.forward and Fn.setup_context are guarded by identity (through
 *     the class's accessor), so a class patched later recompiles;
 *   - an output that is an input is a stop (apply would return a view of
 *     it, another object).
 */
#include "translate_int.h"
#include "../base/tensorlib.h"

/* What Fn.apply is, by torch release: torch.autograd.Function.apply's
   Python function (its classmethod's __func__; torch 2.13), or the C
   classmethod of torch._C._FunctionBase (2.14: Fn.apply is then a builtin
   method bound to Fn, its C function this one).  And
   torch.autograd.function.FunctionCtx, and the base classes'
   setup_context.  Strong, held for the process, once
   torch.autograd.function is imported. */
static PyObject *apply_function, *ctx_class, *base_setup_context;
static PyCFunction apply_c;
/* names asked of every such class: interned once, held for the process */
static PyObject *s_apply, *s_setup_context, *s_function_ctx, *s_func, *s_qualname;

static bool load(void)
{
    if (ctx_class != NULL)
        return true;
    if (s_apply == NULL && ((s_apply = PyUnicode_InternFromString("apply")) == NULL
                            || (s_setup_context = PyUnicode_InternFromString("setup_context")) == NULL
                            || (s_function_ctx = PyUnicode_InternFromString("FunctionCtx")) == NULL
                            || (s_func = PyUnicode_InternFromString("__func__")) == NULL
                            || (s_qualname = PyUnicode_InternFromString("__qualname__")) == NULL)) {
        PyErr_Clear();
        Py_CLEAR(s_apply);             /* (asked again next time) */
        return false;
    }
    PyObject *name = PyUnicode_FromString("torch.autograd.function");
    PyObject *mod = name ? PyImport_GetModule(name) : NULL;         /* only if imported */
    Py_XDECREF(name);
    PyObject *fn_cls = mod ? PyObject_GetAttrString(mod, "Function") : NULL;
    PyObject *ctx = mod ? PyObject_GetAttrString(mod, "FunctionCtx") : NULL;
    Py_XDECREF(mod);
    if (fn_cls == NULL || !PyType_Check(fn_cls) || ctx == NULL || !PyType_Check(ctx)) {
        PyErr_Clear();
        Py_XDECREF(fn_cls);
        Py_XDECREF(ctx);
        return false;
    }
    PyObject *descr = _PyType_Lookup((PyTypeObject *)fn_cls, s_apply);       /* borrowed */
    if (descr != NULL && Py_IS_TYPE(descr, &PyClassMethod_Type)) {
        PyObject *func = PyObject_GetAttrString(descr, "__func__");
        if (func != NULL && PyFunction_Check(func))
            apply_function = func;
        else
            Py_XDECREF(func);
    }
    else if (descr != NULL && Py_IS_TYPE(descr, &PyClassMethodDescr_Type)) {
        apply_c = ((PyMethodDescrObject *)descr)->d_method->ml_meth;
    }
    PyObject *setup = _PyType_Lookup((PyTypeObject *)fn_cls, s_setup_context);
    base_setup_context = Py_XNewRef(setup);
    ctx_class = ctx;
    Py_DECREF(fn_cls);
    return true;
}

/* (contract: translate_int.h) */
bool tr_is_autograd_apply(PyObject *fn)
{
    if (fn != NULL && Py_IS_TYPE(fn, &PyClassMethodDescr_Type))   /* torch 2.14: super().apply */
        return load() && apply_c != NULL && ((PyMethodDescrObject *)fn)->d_method->ml_meth == apply_c;
    return fn != NULL && PyFunction_Check(fn) && load() && fn == apply_function;
}

/* cls.name (a staticmethod's function), read through cls's accessor and
   guarded.  NULL when tracing stops. */
static Value *class_function(Tracer *t, Value *cls, const char *cname)
{
    PyObject *name = PyUnicode_InternFromString(cname);
    PyObject *fn = name ? PyObject_GetAttr(cls->obj, name) : NULL;
    int fa = fn ? guardset_accessor(t->gs, ACC_ATTR, cls->src, 0, name, NULL) : -1;
    Py_XDECREF(name);
    if (fn != NULL && !PyFunction_Check(fn)) {
        Py_DECREF(fn);
        return tracer_unsupported(t, false, "autograd.Function %s.%s that is not a Python function",
                                  ((PyTypeObject *)cls->obj)->tp_name, cname), NULL;
    }
    Value *v = fa < 0 ? NULL : value_from_source(t, fa, fn);
    Py_XDECREF(fn);
    return v;
}

/* Whether v is, or a tuple or list value holds, one of args[0..nargs). */
static bool returns_an_input(Value *v, Value **args, int nargs)
{
    for (int i = 0; i < nargs; i++)
        if (v == args[i] && v->kind == V_TENSOR)
            return true;
    if (v->kind == V_TUPLE || v->kind == V_LIST)
        for (int i = 0; i < v->n; i++)
            if (returns_an_input(v->items[i], args, nargs))
                return true;
    return false;
}

static Value *apply_as_one_node(TFrame *f, Value *cls, Value **args, int nargs, const char *name);
static Value *inline_forward(TFrame *f, Value *cls, Value **args, int nargs, const char *name);

/* (contract: translate_int.h) */
Value *tr_autograd_apply(TFrame *f, Value *cls, Value **args, int nargs, PyObject *kwnames)
{
    Tracer *t = f->t;
    const char *name = PyType_Check(cls->obj) ? ((PyTypeObject *)cls->obj)->tp_name : "Function";
    if (!PyType_Check(cls->obj) || cls->src < 0 || nargs + 1 >= MAX_STACK
        || (kwnames != NULL && PyTuple_GET_SIZE(kwnames) > 0))
        return tracer_break(t, STOP_CALL, "%s.apply with keyword arguments or on this class", name), NULL;
    PyObject *enabled_fn = tensorlib_grad_enabled_fn();             /* borrowed */
    PyObject *enabled = enabled_fn ? PyObject_CallNoArgs(enabled_fn) : NULL;
    int on = enabled ? PyObject_IsTrue(enabled) : -1;
    Py_XDECREF(enabled);
    if (on < 0 || tensorops_note_torch(t) < 0)
        return NULL;
    if (on)
        return apply_as_one_node(f, cls, args, nargs, name);
    return inline_forward(f, cls, args, nargs, name);
}

/* Fn.apply(*args) with grad mode on, where autograd records a backward node
   the graph cannot hold: Fn.forward is first traced, to learn that it is
   pure -- tensor ops, a context it saves into, no write the program could
   see, no in-place op on a tensor -- and that it returns new
   tensors; those ops are then dropped and Fn.apply itself is one node of
   the graph, run at run time as eager code runs it (its backward recorded
   by autograd, on the real tensors).  A forward that is not so is the
   call break it was.  NULL when tracing stops. */
/* Whether an undo record since undo_mark is of a container made before
   values_mark (Tracer.all is in the order Values were made): forward
   changed a list, dict or set the translation made before the call (an
   argument), which the node would get changed already and apply would
   change again.  Its context's own storage, made in the call, is not. */
static bool changed_older(Tracer *t, int undo_mark, int values_mark)
{
    for (int i = undo_mark; i < t->nundo; i++) {
        bool made_in_call = false;
        for (int k = values_mark; k < t->nall && !made_in_call; k++)
            made_in_call = t->all[k] == t->undo[i].container;
        if (!made_in_call)
            return true;
    }
    return false;
}

static Value *apply_as_one_node(TFrame *f, Value *cls, Value **args, int nargs, const char *name)
{
    Tracer *t = f->t;
    int ops_mark = graph_op_count(t->graph);
    int writes_mark = t->nwrites, undo_mark = t->nundo, values_mark = t->nall;
    long tensor_writes_mark = t->tensor_writes;
    Py_ssize_t hatches_mark = t->hatches ? PyList_GET_SIZE(t->hatches) : 0;
    Py_ssize_t modes_mark = t->state_modes ? PyList_GET_SIZE(t->state_modes) : 0;
    /* (traced in grad mode on, as it is: apply turns it off for forward,
       but switching it here would guard the frame's grad mode as off) */
    Value *out = inline_forward(f, cls, args, nargs, name);
    if (out == NULL)
        return NULL;
    if (t->nwrites != writes_mark || changed_older(t, undo_mark, values_mark)
        || t->tensor_writes != tensor_writes_mark
        || (t->hatches ? PyList_GET_SIZE(t->hatches) : 0) != hatches_mark
        || (t->state_modes ? PyList_GET_SIZE(t->state_modes) : 0) != modes_mark)
        return tracer_break(t, STOP_CALL, "%s.apply with grad mode on (autograd records its "
                            "backward), and its forward writes what the program can see or into a "
                            "tensor", name), NULL;
    graph_truncate(t->graph, ops_mark);
    PyObject *apply = PyObject_GetAttr(cls->obj, s_apply);      /* cls.apply: guarded by the caller */
    if (apply == NULL)
        return NULL;
    /* apply draws what forward draws, on the examples too: the generators
       are put back when the translation ends */
    Value *r = tr_random_note_torch(t) < 0 ? NULL
               : tensorops_call(t, NODE_CALL_FUNCTION, apply, "apply", args, nargs, NULL);
    Py_DECREF(apply);
    return r;
}

/* Fn.forward (and Fn.setup_context) inlined with a context made while
   tracing, as the C apply calls them.  NULL when tracing stops. */
static Value *inline_forward(TFrame *f, Value *cls, Value **args, int nargs, const char *name)
{
    Tracer *t = f->t;
    PyObject *setup = _PyType_Lookup((PyTypeObject *)cls->obj, s_setup_context);
    bool own_setup = setup != NULL && setup != base_setup_context;
    Value *forward = class_function(t, cls, "forward");
    Value *setup_fn = forward && own_setup ? class_function(t, cls, "setup_context") : NULL;
    if (forward == NULL || (own_setup && setup_fn == NULL))
        return NULL;
    /* the context: torch.autograd.function.FunctionCtx(), made while tracing
       (the class reached through its module, guarded) */
    PyObject *modname = PyUnicode_FromString("torch.autograd.function");
    int ma = modname ? guardset_accessor(t->gs, ACC_MODULE, -1, 0, modname, NULL) : -1;
    int ca = ma < 0 ? -1 : guardset_accessor(t->gs, ACC_ATTR, ma, 0, s_function_ctx, NULL);
    Py_XDECREF(modname);
    Value *ctx_type = ca < 0 ? NULL : value_from_source(t, ca, ctx_class);
    Value *ctx = ctx_type ? tr_call_or_undo(f, ctx_type, NULL, 0, NULL) : NULL;
    if (ctx == NULL)
        return NULL;
    Value *full[MAX_STACK];
    int first = own_setup ? 0 : 1;
    full[0] = ctx;
    for (int i = 0; i < nargs; i++)
        full[first + i] = args[i];
    Value *out = tr_call_or_undo(f, forward, full, nargs + first, NULL);
    if (out == NULL)
        return NULL;
    if (returns_an_input(out, args, nargs))
        return tracer_unsupported(t, false, "%s.forward returns an input as it is (apply hands "
                                  "back a view of it)", name), NULL;
    if (own_setup) {
        Value *inputs = value_new(t, V_TUPLE, NULL);
        for (int i = 0; inputs != NULL && i < nargs; i++)
            if (value_append(t, inputs, args[i]) < 0)
                inputs = NULL;
        Value *sargs[3] = {ctx, inputs, out};
        if (inputs == NULL || tr_call_or_undo(f, setup_fn, sargs, 3, NULL) == NULL)
            return NULL;
    }
    return out;
}

/* (contract: translate_int.h) */
Value *tr_autograd_apply_of_class(TFrame *f, Value *cls, Value **args, int nargs, PyObject *kwnames,
                                  bool *handled)
{
    Tracer *t = f->t;
    *handled = false;
    if (!load())
        return NULL;
    PyObject *bound = PyObject_GetAttr(cls->obj, s_apply);
    bool python = bound != NULL && PyMethod_Check(bound)
                  && tr_is_autograd_apply(PyMethod_GET_FUNCTION(bound))
                  && PyMethod_GET_SELF(bound) == cls->obj;
    bool c = !python && bound != NULL && apply_c != NULL && PyCFunction_Check(bound)
             && PyCFunction_GET_SELF(bound) == cls->obj
             && ((PyCFunctionObject *)bound)->m_ml->ml_meth == apply_c;
    /* what cls.apply is, guarded: Function.apply's function (its __func__),
       or the C classmethod (its __qualname__: a class that defines its own
       apply has another) */
    PyObject *qualname = c ? PyObject_GetAttr(bound, s_qualname) : NULL;
    Py_XDECREF(bound);
    PyErr_Clear();
    if (!python && !c)
        return NULL;
    *handled = true;
    int aa = guardset_accessor(t->gs, ACC_ATTR, cls->src, 0, s_apply, NULL);
    int fa = aa < 0 ? -1 : guardset_accessor(t->gs, ACC_ATTR, aa, 0, python ? s_func : s_qualname, NULL);
    int rc = fa < 0 ? -1 : python ? guardset_add(t->gs, GUARD_ID_MATCH, fa, apply_function, 0)
             : qualname != NULL ? guardset_add(t->gs, GUARD_EQUALS_MATCH, fa, qualname, 0) : -1;
    Py_XDECREF(qualname);
    if (rc < 0)
        return NULL;
    return tr_autograd_apply(f, cls, args, nargs, kwnames);
}
