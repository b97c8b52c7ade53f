/*
 * tr_fnmode.c -- torch function modes entered while translating (DESIGN.md
 * 3.4; contract: translate_int.h): inside `with SomeMode():` (a subclass
 * of torch.overrides.TorchFunctionMode), every torch call is handed to the
 * mode's __torch_function__, inlined, as torch hands it over in eager.
 *
 * TorchFunctionMode.__enter__ and __exit__ are Python: they are inlined as
 * any context manager's, down to torch._C's _push_on_torch_function_stack
 * and _pop_torch_function_stack, which here push and pop the tracer's own
 * stack of modes (Tracer.fn_modes) instead of torch's.  While that stack
 * is not empty, tensorops_call hands each torch call to tr_fnmode_route:
 * it asks dynscope._fnmode_probe what torch would pass the mode -- func,
 * types, args, kwargs -- and inlines top.__torch_function__ with them, the
 * mode popped meanwhile (torch pops it too: calls inside forward to the
 * next mode).  What the mode does is what the graph gets; the mode itself
 * never runs at run time, so the graph needs no node for it.
 *
 * Invariants:
 *   - a mode is entered only inside a function the captured frame calls:
 *     a stop inside undoes that whole call (tr_call_or_undo), which then
 *     runs eagerly with its own `with` -- never a graph or a resume that
 *     would run without the mode.  A call that returns to the captured
 *     frame with a mode still entered stops before it (the frame, or its
 *     rest, runs in the interpreter, the mode entered for real);
 *   - only the calls tensorops_call makes are handed over (torch functions,
 *     tensor methods, operators on tensors, library ops); what the engine
 *     reads of a tensor itself (.shape, .dtype, len()) is not, as Dynamo
 *     does not hand those to a mode either;
 *   - a call torch does not dispatch to a mode stops (the probe ran it).
 */
#include "translate_int.h"
#include "tensorops_int.h"

/* torch._C's push and pop of the torch function mode stack.  Strong, held
   for the process once torch._C is imported. */
static PyObject *push_fn, *pop_fn, *mode_class;

static bool find_stack_functions(void)
{
    if (push_fn != NULL)
        return true;
    PyObject *name = PyUnicode_FromString("torch._C");
    PyObject *c = name ? PyImport_GetModule(name) : NULL;
    Py_XDECREF(name);
    name = c ? PyUnicode_FromString("torch.overrides") : NULL;
    PyObject *ov = name ? PyImport_GetModule(name) : NULL;
    Py_XDECREF(name);
    PyObject *push = c ? PyObject_GetAttrString(c, "_push_on_torch_function_stack") : NULL;
    PyObject *pop = push ? PyObject_GetAttrString(c, "_pop_torch_function_stack") : NULL;
    PyObject *cls = pop && ov ? PyObject_GetAttrString(ov, "TorchFunctionMode") : NULL;
    Py_XDECREF(c);
    Py_XDECREF(ov);
    PyErr_Clear();
    if (cls == NULL || !PyType_Check(cls)) {
        Py_XDECREF(push);
        Py_XDECREF(pop);
        Py_XDECREF(cls);
        return false;
    }
    push_fn = push;
    pop_fn = pop;
    mode_class = cls;
    return true;
}

/* (contract: translate_int.h) */
bool tr_is_fnmode_stack_call(PyObject *fn)
{
    return find_stack_functions() && (fn == push_fn || fn == pop_fn);
}

/* The class of mode value v (made while tracing, or reached by an
   accessor), or NULL when v is no TorchFunctionMode whose
   __torch_function__ is a Python function. */
static PyTypeObject *mode_type(Value *v)
{
    PyTypeObject *tp = v->kind == V_NEWOBJ ? (PyTypeObject *)v->obj
                       : (v->kind == V_OBJECT || v->kind == V_CONST) && v->src >= 0 ? Py_TYPE(v->obj)
                       : NULL;
    if (tp == NULL || !PyType_Check(tp) || !PyType_IsSubtype(tp, (PyTypeObject *)mode_class))
        return NULL;
    PyObject *name = PyUnicode_FromString("__torch_function__");
    PyObject *tf = name ? _PyType_Lookup(tp, name) : NULL;
    Py_XDECREF(name);
    return tf != NULL && PyFunction_Check(tf) ? tp : NULL;
}

/* (contract: translate_int.h) */
Value *tr_fnmode_stack_call(TFrame *f, PyObject *fn, Value **args, int nargs, PyObject *kwnames)
{
    Tracer *t = f->t;
    if (kwnames != NULL && PyTuple_GET_SIZE(kwnames) > 0)
        return tracer_unsupported(t, false, "the torch function mode stack called with keywords"), NULL;
    if (fn == pop_fn) {
        if (nargs != 0 || t->nfn_modes == 0)
            return tracer_unsupported(t, false, "popping a torch function mode entered before "
                                      "tracing"), NULL;
        return t->fn_modes[--t->nfn_modes];
    }
    if (nargs != 1 || mode_type(args[0]) == NULL)
        return tracer_unsupported(t, false, "pushing a torch function mode that is not a "
                                  "TorchFunctionMode with __torch_function__ in Python"), NULL;
    if (f->parent == NULL)
        return tracer_unsupported(t, false, "a torch function mode pushed in the captured function "
                                  "itself (modes are traced inside the functions it calls)"), NULL;
    if (t->nfn_modes >= MAX_FN_MODES)
        return tracer_unsupported(t, false, "more than %d torch function modes entered",
                                  MAX_FN_MODES), NULL;
    t->fn_modes[t->nfn_modes++] = args[0];
    return value_new(t, V_CONST, Py_None);
}

/* The value the probe's object o stands for: one of the call's own
   arguments (by identity with their examples), or a plain constant.  NULL
   (no exception) when neither. */
static Value *value_of_probed(Tracer *t, PyObject *o, Value **args, int nargs, PyObject *kwnames,
                              PyObject *eargs, PyObject *ekw)
{
    int nkw = kwnames ? (int)PyTuple_GET_SIZE(kwnames) : 0, npos = nargs - nkw;
    for (int i = 0; i < npos && i < PyTuple_GET_SIZE(eargs); i++)
        if (PyTuple_GET_ITEM(eargs, i) == o)
            return args[i];
    for (int i = 0; ekw != NULL && i < nkw; i++)
        if (PyDict_GetItem(ekw, PyTuple_GET_ITEM(kwnames, i)) == o)
            return args[npos + i];
    return value_is_plain_constant(o) ? value_new(t, V_CONST, o) : NULL;
}

/* The tuple and dict values of the probed args and kwargs; -1 (stopped, or
   an exception) when one of them stands for nothing the call was given. */
static int probed_arguments(Tracer *t, PyObject *sargs, PyObject *skw, Value **args, int nargs,
                            PyObject *kwnames, PyObject *eargs, PyObject *ekw,
                            Value **targs, Value **tkw)
{
    *targs = value_new(t, V_TUPLE, NULL);
    if (*targs == NULL)
        return -1;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(sargs); i++) {
        Value *a = value_of_probed(t, PyTuple_GET_ITEM(sargs, i), args, nargs, kwnames, eargs, ekw);
        if (a == NULL || value_append(t, *targs, a) < 0)
            return PyErr_Occurred() ? -1 : tracer_unsupported(t, false, "an argument torch hands a "
                                                              "torch function mode that the call was "
                                                              "not given");
    }
    if (skw == Py_None || skw == NULL) {
        *tkw = value_new(t, V_CONST, Py_None);
        return *tkw ? 0 : -1;
    }
    if (!PyDict_Check(skw))
        return tracer_unsupported(t, false, "torch function mode kwargs that are not a dict");
    *tkw = value_new(t, V_DICT, NULL);
    if (*tkw == NULL || ((*tkw)->obj = PyList_New(0)) == NULL)
        return -1;
    PyObject *k, *o;
    Py_ssize_t pos = 0;
    while (PyDict_Next(skw, &pos, &k, &o)) {
        Value *a = value_of_probed(t, o, args, nargs, kwnames, eargs, ekw);
        if (a == NULL)
            return PyErr_Occurred() ? -1 : tracer_unsupported(t, false, "a keyword argument torch "
                                                              "hands a torch function mode that the "
                                                              "call was not given");
        if (tr_dict_set_item(t, *tkw, k, a) < 0)
            return -1;
    }
    return 0;
}

/* What torch would hand the innermost mode for this call: a new reference
   to (func, types, args, kwargs), Py_None when it dispatches to no mode,
   NULL with an exception. */
static PyObject *probe_dispatch(NodeOp op, PyObject *target, PyObject *eargs, PyObject *ekw)
{
    PyObject *mod = PyImport_ImportModule("dynscope._fnmode_probe");
    PyObject *kw = ekw ? Py_NewRef(ekw) : PyDict_New();
    PyObject *r = mod && kw ? PyObject_CallMethod(mod, "first_dispatch", "OOOO",
                                                  op == NODE_CALL_METHOD ? Py_True : Py_False,
                                                  target, eargs, kw) : NULL;
    Py_XDECREF(kw);
    Py_XDECREF(mod);
    if (r != NULL && r != Py_None && (!PyTuple_Check(r) || PyTuple_GET_SIZE(r) != 4)) {
        Py_DECREF(r);
        PyErr_SetString(PyExc_SystemError, "dynscope._fnmode_probe: not (func, types, args, kwargs)");
        return NULL;
    }
    return r;
}

/* (contract: translate_int.h) */
Value *tr_fnmode_route(Tracer *t, NodeOp op, PyObject *target, const char *name_hint, Value **args,
                       int nargs, PyObject *kwnames, PyObject *eargs, PyObject *ekw)
{
    TFrame *f = t->current;
    PyObject *seen = probe_dispatch(op, target, eargs, ekw);
    if (seen == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_Exception))
            return NULL;
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        tracer_unsupported(t, false, "%s under a torch function mode: asking what the mode is "
                           "handed raised %S", name_hint, value ? value : Py_None);
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
        return NULL;
    }
    if (seen == Py_None || f == NULL) {
        Py_DECREF(seen);
        return tracer_unsupported(t, false, "%s under a torch function mode, a call torch does "
                                  "not hand to the mode", name_hint), NULL;
    }
    Value *call[4];
    call[0] = value_new(t, V_CONST, PyTuple_GET_ITEM(seen, 0));
    call[1] = call[0] ? value_new(t, V_CONST, PyTuple_GET_ITEM(seen, 1)) : NULL;
    int rc = call[1] ? probed_arguments(t, PyTuple_GET_ITEM(seen, 2), PyTuple_GET_ITEM(seen, 3),
                                        args, nargs, kwnames, eargs, ekw, &call[2], &call[3]) : -1;
    Py_DECREF(seen);
    if (rc < 0)
        return NULL;
    /* top.__torch_function__(func, types, args, kwargs), top popped meanwhile */
    int depth = t->nfn_modes;
    Value *top = t->fn_modes[depth - 1];
    PyObject *name = PyUnicode_FromString("__torch_function__");
    Value *handler = name ? tr_generic_attr(f, top, name) : NULL;
    Py_XDECREF(name);
    if (handler == NULL)
        return NULL;
    t->nfn_modes = depth - 1;
    Value *r = tr_call_or_undo(f, handler, call, 4, NULL);
    bool balanced = t->nfn_modes == depth - 1;
    t->nfn_modes = depth;
    t->fn_modes[depth - 1] = top;
    if (r != NULL && !balanced)
        return tracer_unsupported(t, false, "a torch function mode's __torch_function__ that "
                                  "leaves a mode entered or left"), NULL;
    return r;
}
