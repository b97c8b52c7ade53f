/*
 * tr_calls.c -- calls while translating (DESIGN.md 3.4-3.5; contract:
 * translate_int.h): calls of user functions (arguments bound, the body
 * inlined), of tensor methods and pure tensor functions (graph nodes), of
 * container methods, of nn.Module instances; builtins are tr_builtins.c's.
 *
 * Invariants: an inlined function is guarded by its code (CODE_MATCH) and
 * its defaults are read through the function, so changing either
 * recompiles; inlining is bounded (MAX_INLINE_DEPTH); a call the
 * translator cannot trace is a graph break, and what tracing it did to the
 * frame's containers and graph is undone (tr_call_or_undo), so nothing
 * happens twice when it runs eagerly.
 */
#include "translate_int.h"
#include "../base/tensorlib.h"

#include <string.h>

static Value *call_value(TFrame *f, Value *callable, Value **args, int nargs, PyObject *kwnames);

/* Bind the arguments a call gives (positional, *args, keywords, **kwargs)
   into the callee's locals.  0 / -1. */
static int bind_given(TFrame *callee, Value **args, int nargs, PyObject *kwnames)
{
    Tracer *t = callee->t;
    PyCodeObject *co = callee->code;
    int nkw = kwnames ? (int)PyTuple_GET_SIZE(kwnames) : 0;
    int npos = nargs - nkw;
    int argcount = co->co_argcount;
    int total = argcount + co->co_kwonlyargcount;
    bool has_varargs = co->co_flags & CO_VARARGS;
    bool has_varkw = co->co_flags & CO_VARKEYWORDS;

    if (npos > argcount && !has_varargs)
        return tracer_unsupported(t, false, "too many positional arguments to %U", co->co_qualname);
    for (int i = 0; i < npos && i < argcount; i++)
        callee->locals[i] = args[i];
    if (has_varargs) {
        Value *va = value_new(t, V_TUPLE, NULL);
        if (va == NULL)
            return -1;
        for (int i = argcount; i < npos; i++)
            if (value_append(t, va, args[i]) < 0)
                return -1;
        callee->locals[total] = va;
    }
    Value *varkw = NULL;
    if (has_varkw) {
        varkw = value_new(t, V_DICT, NULL);
        if (varkw == NULL)
            return -1;
        varkw->obj = PyList_New(0);
        if (varkw->obj == NULL)
            return -1;
        callee->locals[total + (has_varargs ? 1 : 0)] = varkw;
    }
    for (int k = 0; k < nkw; k++) {
        PyObject *kname = PyTuple_GET_ITEM(kwnames, k);
        int slot = -1;
        for (int i = co->co_posonlyargcount; i < total; i++) {
            int eq = PyUnicode_Compare(kname, local_name(co, i));
            if (eq == 0) {
                slot = i;
                break;
            }
        }
        if (slot >= 0) {
            if (callee->locals[slot] != NULL)
                return tracer_unsupported(t, false, "multiple values for argument '%U'", kname);
            callee->locals[slot] = args[npos + k];
        }
        else if (varkw != NULL) {
            if (PyList_Append(varkw->obj, kname) < 0 || value_append(t, varkw, args[npos + k]) < 0)
                return -1;
        }
        else {
            return tracer_unsupported(t, false, "unexpected keyword argument '%U'", kname);
        }
    }
    return 0;
}

/* Fill the parameters the call left unbound from the function's defaults,
   reached through the function (func.__defaults__[d],
   func.__kwdefaults__[name]) so that a changed default recompiles.
   0 / -1. */
static int bind_defaults(TFrame *callee)
{
    Tracer *t = callee->t;
    PyCodeObject *co = callee->code;
    PyObject *fn = callee->func;
    int argcount = co->co_argcount;
    int total = argcount + co->co_kwonlyargcount;
    PyObject *defaults = PyFunction_GET_DEFAULTS(fn);
    Py_ssize_t ndef = defaults ? PyTuple_GET_SIZE(defaults) : 0;
    for (int i = 0; i < argcount; i++) {
        if (callee->locals[i] != NULL)
            continue;
        Py_ssize_t d = i - (argcount - ndef);
        if (d < 0)
            return tracer_unsupported(t, false, "missing argument '%U' to %U", local_name(co, i), co->co_qualname);
        PyObject *dn = PyUnicode_FromString("__defaults__");
        int a = dn ? guardset_accessor(t->gs, ACC_ATTR, callee->func_src, 0, dn, NULL) : -1;
        Py_XDECREF(dn);
        int it = a < 0 ? -1 : guardset_accessor(t->gs, ACC_ITEM, a, d, NULL, NULL);
        if (it < 0)
            return -1;
        callee->locals[i] = value_from_source(t, it, PyTuple_GET_ITEM(defaults, d));
        if (callee->locals[i] == NULL)
            return -1;
    }
    PyObject *kwdefaults = PyFunction_GET_KW_DEFAULTS(fn);
    for (int i = argcount; i < total; i++) {
        if (callee->locals[i] != NULL)
            continue;
        PyObject *dv = kwdefaults ? PyDict_GetItemWithError(kwdefaults, local_name(co, i)) : NULL;
        if (dv == NULL)
            return PyErr_Occurred() ? -1 : tracer_unsupported(t, false, "missing keyword argument '%U'", local_name(co, i));
        PyObject *dn = PyUnicode_FromString("__kwdefaults__");
        int a = dn ? guardset_accessor(t->gs, ACC_ATTR, callee->func_src, 0, dn, NULL) : -1;
        Py_XDECREF(dn);
        int it = a < 0 ? -1 : guardset_accessor(t->gs, ACC_DICT_ITEM, a, 0, local_name(co, i), NULL);
        if (it < 0)
            return -1;
        callee->locals[i] = value_from_source(t, it, dv);
        if (callee->locals[i] == NULL)
            return -1;
    }
    return 0;
}

/* Fill the parameters the call left unbound from the defaults a function
   made while tracing was made with (Values already).  0 / -1. */
static int bind_made_defaults(TFrame *callee)
{
    Tracer *t = callee->t;
    PyCodeObject *co = callee->code;
    Value *defaults = callee->made->items[0];
    Value *kwdefaults = callee->made->items[1];
    int argcount = co->co_argcount;
    int total = argcount + co->co_kwonlyargcount;
    int ndef = defaults->kind == V_TUPLE ? defaults->n : 0;
    for (int i = 0; i < argcount; i++) {
        if (callee->locals[i] != NULL)
            continue;
        int d = i - (argcount - ndef);
        if (d < 0)
            return tracer_unsupported(t, false, "missing argument '%U' to %U", local_name(co, i), co->co_qualname);
        callee->locals[i] = defaults->items[d];
    }
    for (int i = argcount; i < total; i++) {
        if (callee->locals[i] != NULL)
            continue;
        int found = -1;
        for (int j = 0; kwdefaults->kind == V_DICT && j < kwdefaults->n && found < 0; j++)
            if (PyUnicode_Compare(PyList_GET_ITEM(kwdefaults->obj, j), local_name(co, i)) == 0)
                found = j;
        if (found < 0)
            return PyErr_Occurred() ? -1 : tracer_unsupported(t, false, "missing keyword argument '%U'", local_name(co, i));
        callee->locals[i] = kwdefaults->items[found];
    }
    return 0;
}

/* Bind arguments of an inlined call into the callee's locals.  0 / -1. */
static int bind_arguments(TFrame *callee, Value **args, int nargs, PyObject *kwnames)
{
    if (bind_given(callee, args, nargs, kwnames) < 0)
        return -1;
    return callee->made ? bind_made_defaults(callee) : bind_defaults(callee);
}

/* A generator function of the program called: a V_GEN whose frame is
   bound to the arguments and not started (tr_generators.c).  NULL when
   tracing stops. */
static Value *make_generator(TFrame *f, PyObject *fn, int fn_src, PyCodeObject *co,
                             Value *made, Value **args, int nargs, PyObject *kwnames)
{
    Tracer *t = f->t;
    TFrame *g = tr_gen_frame_new(t);
    if (g == NULL || tr_frame_setup(g, t, f, fn, fn_src, co) < 0)
        return NULL;
    g->suspends = true;
    g->resume_at = -1;
    g->made = made;
    if (bind_arguments(g, args, nargs, kwnames) < 0)
        return NULL;
    Value *gen = value_new(t, V_GEN, NULL);
    if (gen != NULL)
        gen->gen = g;
    return gen;
}

/* Inline a call of user function fnv -- a V_CONST reached by an
   accessor, whose code is guarded, or a V_FUNC made while tracing, whose
   code is a constant of guarded code -- : bind the arguments, interpret
   its body in a frame of its own (a generator expression's to its end,
   collecting what it yields).  Its return value, or NULL when tracing
   stops (the call then breaks in the root frame). */
static Value *inline_call(TFrame *f, Value *fnv, Value **args, int nargs, PyObject *kwnames)
{
    Tracer *t = f->t;
    bool made = fnv->kind == V_FUNC;
    PyObject *fn = made ? fnv->fn_creator : fnv->obj;
    int fn_src = made ? fnv->fn_creator_src : fnv->src;
    PyCodeObject *co = made ? (PyCodeObject *)fnv->obj : (PyCodeObject *)PyFunction_GET_CODE(fn);
    const char *why = tr_code_unsupported_reason(co);
    if (why != NULL)
        return tracer_unsupported(t, false, "call to %U: %s", co->co_qualname, why), NULL;
    if (!made) {
        PyObject *rule, *extra;
        HatchKind hatch = tr_hatch_of(fn, &rule, &extra);
        if (hatch != HATCH_NONE)
            return tr_call_marked(f, fnv, hatch, rule, extra, args, nargs, kwnames);
    }
    if (!made && fnv->src < 0)
        return tracer_unsupported(t, false, "call to a function computed while tracing"), NULL;
    if (t->depth >= MAX_INLINE_DEPTH)
        return tracer_unsupported(t, false, "inlining deeper than %d calls (recursion?)", MAX_INLINE_DEPTH), NULL;
    if (!made && guardset_add(t->gs, GUARD_CODE_MATCH, fnv->src, (PyObject *)co, 0) < 0)
        return NULL;
    if (!made && (co->co_flags & CO_GENERATOR))
        return t->eager_generators
               ? (tracer_break(t, STOP_CALL, "call to generator function %U, whose generator the "
                               "program gets", co->co_qualname), NULL)
               : make_generator(f, fn, fn_src, co, NULL, args, nargs, kwnames);
    TFrame callee;
    Value *result = NULL;
    if (tr_frame_setup(&callee, t, f, fn, fn_src, co) < 0)
        goto out;
    if (made) {
        callee.made = fnv;
        if ((co->co_flags & CO_GENERATOR) && (callee.yields = value_new(t, V_ITER, NULL)) == NULL)
            goto out;
        if (callee.yields != NULL)
            callee.yields->from_generator = true;
    }
    if (bind_arguments(&callee, args, nargs, kwnames) < 0)
        goto out;
    t->depth++;
    TFrame *saved = t->current;
    int r = tr_run_frame(&callee, 0);
    t->current = saved;
    t->depth--;
    if (r == FRAME_RETURNED)
        result = callee.retval;
out:
    tr_frame_teardown(&callee);
    return result;
}

static Value *fold_call(TFrame *f, PyObject *fn, Value **args, int nargs, PyObject *kwnames);

/* (contract: translate_int.h) */
Value *tr_call_with_self(TFrame *f, Value *fn, Value *self, Value **args, int nargs, PyObject *kwnames)
{
    Value *full[MAX_STACK];
    if (nargs + 1 >= MAX_STACK)
        return tracer_unsupported(f->t, false, "a call with more than %d arguments", MAX_STACK), NULL;
    full[0] = self;
    if (nargs > 0)
        memcpy(full + 1, args, sizeof(Value *) * (size_t)nargs);
    return tr_call_or_undo(f, fn, full, nargs + 1, kwnames);
}

/* (contract: translate_int.h) */
Value *tr_lazy_generator_expression(TFrame *f, Value *fnv, Value **args, int nargs)
{
    PyCodeObject *co = (PyCodeObject *)fnv->obj;
    const char *why = tr_code_unsupported_reason(co);
    if (why != NULL)
        return tracer_unsupported(f->t, false, "call to %U: %s", co->co_qualname, why), NULL;
    return make_generator(f, fnv->fn_creator, fnv->fn_creator_src, co, fnv, args, nargs, NULL);
}

/* s.discard(x) / s.remove(x) (remove) of a set this translation made, x
   a constant: out of the real set and of the members in order
   (nn.Module.register_buffer discards the name from its
   _non_persistent_buffers_set).  None, or NULL when tracing stops. */
static Value *set_discard(TFrame *f, Value *s, Value *x, bool remove)
{
    Tracer *t = f->t;
    if (!foldable(x))
        return tracer_unsupported(t, false, "set.%s() of a value that is not a constant",
                                  remove ? "remove" : "discard"), NULL;
    if (PyObject_Hash(x->obj) == -1) {
        PyErr_Clear();
        return tracer_break(t, STOP_CALL, "an unhashable set member (TypeError)"), NULL;
    }
    int had = PySet_Contains(s->obj, x->obj);
    if (had < 0)
        return NULL;
    if (!had)
        return remove ? (tracer_unsupported(t, false, "set.remove() of a missing member (KeyError)"), NULL)
                      : new_const(t, Py_NewRef(Py_None));
    if (tracer_note_mutation(t, s, -1) < 0 || PySet_Discard(s->obj, x->obj) < 0)
        return NULL;
    for (int i = 0; i < s->n; i++) {
        int eq = foldable(s->items[i]) ? PyObject_RichCompareBool(s->items[i]->obj, x->obj, Py_EQ) : 0;
        if (eq < 0)
            return NULL;
        if (eq) {
            memmove(&s->items[i], &s->items[i + 1], (size_t)(s->n - i - 1) * sizeof(Value *));
            s->n--;
            break;
        }
    }
    return new_const(t, Py_NewRef(Py_None));
}

/* d.pop(key[, dflt]) of a dict this translation made (its keys known):
   the item removed (undone with the call that breaks), or dflt.  NULL
   when tracing stops (a missing key without a default: KeyError). */
static Value *dict_pop(TFrame *f, Value *d, Value *key, Value *dflt)
{
    Tracer *t = f->t;
    if (!foldable(key))
        return tracer_unsupported(t, false, "dict.pop() of a key that is not a constant"), NULL;
    for (int i = 0; i < d->n; i++) {
        int eq = PyObject_RichCompareBool(PyList_GET_ITEM(d->obj, i), key->obj, Py_EQ);
        if (eq < 0)
            return NULL;
        if (!eq)
            continue;
        Value *v = d->items[i];
        if (tracer_note_snapshot(t, d) < 0 || PySequence_DelItem(d->obj, i) < 0)
            return NULL;
        memmove(d->items + i, d->items + i + 1, sizeof(Value *) * (size_t)(d->n - i - 1));
        d->n--;
        return v;
    }
    return dflt ? dflt : (tracer_unsupported(t, false, "dict.pop() of a missing key (KeyError)"), NULL);
}

/* Methods of lists and dicts made by this frame, and keys/values/items. */
static Value *call_container_method(TFrame *f, Value *m, Value **args, int nargs, PyObject *kwnames)
{
    Tracer *t = f->t;
    Value *self = m->items[0];
    PyObject *name = m->obj;
    if (kwnames && PyTuple_GET_SIZE(kwnames) > 0)
        return tracer_unsupported(t, false, "keyword arguments to .%U()", name), NULL;
    /* args[0] is self */
    if (self->kind == V_LIST && self->src < 0) {
        if (PyUnicode_CompareWithASCIIString(name, "append") == 0 && nargs == 2) {
            if (tracer_note_mutation(t, self, -1) < 0 || value_append(t, self, args[1]) < 0)
                return NULL;
            return new_const(t, Py_NewRef(Py_None));
        }
        if (PyUnicode_CompareWithASCIIString(name, "extend") == 0 && nargs == 2) {
            Value *it = tr_make_iter(f, args[1]);
            if (it == NULL || tracer_note_mutation(t, self, -1) < 0)
                return NULL;
            for (int i = it->pos; i < it->n; i++)
                if (value_append(t, self, it->items[i]) < 0)
                    return NULL;
            it->pos = it->n;
            return new_const(t, Py_NewRef(Py_None));
        }
    }
    if (self->kind == V_SET && PyUnicode_CompareWithASCIIString(name, "add") == 0 && nargs == 2) {
        /* memo.add(self) (nn.Module.named_modules): a constant into the
           real set too, an object compared by identity into items only */
        Value *x = args[1];
        int had = foldable(x) || tr_hashed_by_identity(x) ? tr_contains(f, x, self)
                  : tracer_unsupported(t, false, "set.add() of a value that is neither a constant "
                                       "nor an object compared by identity");
        if (had < 0)
            return NULL;
        if (had == 0) {
            if (tracer_note_mutation(t, self, -1) < 0)
                return NULL;
            if (foldable(x) ? tr_set_add(t, self, x) : value_append(t, self, x))
                return NULL;
            self->unordered |= !foldable(x);
        }
        return new_const(t, Py_NewRef(Py_None));
    }
    if (self->kind == V_SET && nargs == 2 && (PyUnicode_CompareWithASCIIString(name, "discard") == 0
                                              || PyUnicode_CompareWithASCIIString(name, "remove") == 0))
        return set_discard(f, self, args[1], PyUnicode_CompareWithASCIIString(name, "remove") == 0);
    if (self->kind == V_DICT && nargs == 1
        && (PyUnicode_CompareWithASCIIString(name, "keys") == 0
            || PyUnicode_CompareWithASCIIString(name, "values") == 0
            || PyUnicode_CompareWithASCIIString(name, "items") == 0)) {
        /* a view: iterated as its items; the program gets the real view */
        Value *out = value_new(t, V_ITER, NULL);
        if (out == NULL)
            return NULL;
        out->seq = self;
        out->view = (char)PyUnicode_READ_CHAR(name, 0);
        for (int i = 0; i < self->n; i++) {
            Value *k = value_new(t, V_CONST, PyList_GET_ITEM(self->obj, i));
            Value *item = k;
            if (k == NULL)
                return NULL;
            if (PyUnicode_CompareWithASCIIString(name, "values") == 0) {
                item = self->items[i];
            }
            else if (PyUnicode_CompareWithASCIIString(name, "items") == 0) {
                item = value_new(t, V_TUPLE, NULL);
                if (item == NULL || value_append(t, item, k) < 0 || value_append(t, item, self->items[i]) < 0)
                    return NULL;
            }
            else if (PyUnicode_CompareWithASCIIString(name, "keys") != 0) {
                return tracer_unsupported(t, false, "dict method .%U()", name), NULL;
            }
            if (value_append(t, out, item) < 0)
                return NULL;
        }
        return out;
    }
    if (self->kind == V_LIST && (PyUnicode_CompareWithASCIIString(name, "index") == 0
                                 || PyUnicode_CompareWithASCIIString(name, "count") == 0) && nargs == 2) {
        /* l.index(x) / l.count(x) over items and x that are constants (an
           input list's items are guarded): computed on them */
        PyObject *items = value_as_constant(t, self);
        PyObject *meth = items && foldable(args[1]) ? PyObject_GetAttr(items, name) : NULL;
        Py_XDECREF(items);
        if (meth == NULL)
            return PyErr_Occurred() ? NULL
                   : (tracer_unsupported(t, false, "list.%U() of values that are not constants", name), NULL);
        Value *r = fold_call(f, meth, args + 1, 1, NULL);
        Py_DECREF(meth);
        return r;
    }
    if (self->kind == V_DICT && self->src < 0 && PyUnicode_CompareWithASCIIString(name, "pop") == 0
        && (nargs == 2 || nargs == 3))
        return dict_pop(f, self, args[1], nargs == 3 ? args[2] : NULL);
    if (self->kind == V_DICT && self->src >= 0 && self->real != NULL && self->stands_for == NULL) {
        bool handled;
        Value *r = tr_visible_dict_method(f, self, name, args + 1, nargs - 1, &handled);
        if (handled)
            return r;
    }
    if (self->kind == V_DICT && self->stands_for == NULL && nargs == 1
        && PyUnicode_CompareWithASCIIString(name, "copy") == 0) {
        /* d.copy(): a new dict of the same items, this frame's own */
        Value *c = value_new(t, V_DICT, NULL);
        if (c == NULL || (c->obj = PyList_New(0)) == NULL)
            return NULL;
        for (int i = 0; i < self->n; i++)
            if (tr_dict_set_item(t, c, PyList_GET_ITEM(self->obj, i), self->items[i]) < 0)
                return NULL;
        return c;
    }
    if (self->kind == V_DICT && PyUnicode_CompareWithASCIIString(name, "get") == 0
        && (nargs == 2 || nargs == 3)) {
        /* d.get(key[, default]): the keys are known (an input dict's are
           guarded), so is the answer */
        if (!foldable(args[1]))
            return tracer_unsupported(t, false, "dict.get() of a key that is not a constant"), NULL;
        for (int i = 0; i < self->n; i++) {
            int eq = PyObject_RichCompareBool(PyList_GET_ITEM(self->obj, i), args[1]->obj, Py_EQ);
            if (eq < 0)
                return NULL;
            if (eq)
                return self->items[i];
        }
        return nargs == 3 ? args[2] : value_new(t, V_CONST, Py_None);
    }
    return tracer_break(t, STOP_CALL, "call to .%U() of a %s%s", name,
                        self->kind == V_LIST ? "list" : self->kind == V_SET ? "set" : "dict",
                        self->src >= 0 ? " the program can see" : ""), NULL;
}

/* Whether V_BOUND b is a Python function of its receiver's class, found
   by the generic lookup, on a receiver read by an accessor. */
static bool bound_is_python_method(Value *b)
{
    Value *recv = b->items[0];
    PyObject *fn = (recv->kind == V_OBJECT || recv->kind == V_CONST) && recv->src >= 0
                   && !PyType_Check(recv->obj) && !PyModule_Check(recv->obj)
                   && value_type_lookup_is_generic(Py_TYPE(recv->obj))
                   ? _PyType_Lookup(Py_TYPE(recv->obj), b->obj) : NULL;   /* borrowed */
    return fn != NULL && PyFunction_Check(fn);
}

/* (contract: translate_int.h) */
Value *tr_bound_as_function(TFrame *f, Value *b)
{
    if (!bound_is_python_method(b))
        return tracer_unsupported(f->t, false, "method .%U() of a %s held as a value", b->obj,
                                  b->items[0]->obj ? Py_TYPE(b->items[0]->obj)->tp_name : "value"), NULL;
    return tr_generic_attr(f, b->items[0], b->obj);
}

/* w() of a weakref.ref the program holds (torch's LSTM keeps its flat
   weights so): what it points to, read through it (ACC_WEAKREF) and
   guarded as any input; a dead one (None) is a stop.  NULL when tracing
   stops. */
static Value *call_weakref(Tracer *t, Value *w)
{
    /* The referent is read when the guards run, at the frame's start; the
       call comes later, and is that object only if nothing the frame ran
       before it dropped a reference that kept it alive: no object changed,
       no variable the frame started with rebound or deleted, and no value
       on a resume frame's incoming stack (popped by now) the referent --
       guarded apart. */
    if (t->nwrites > 0 || t->root_rebound)
        return tracer_unsupported(t, false, "a weak reference called after the frame %s",
                                  t->nwrites > 0 ? "changed an object" : "rebound a variable"), NULL;
    PyObject *obj = weakref_referent_ref(w->obj);
    if (obj == NULL)
        return tracer_unsupported(t, false, "a call of a dead weak reference"), NULL;
    int acc = guardset_accessor(t->gs, ACC_WEAKREF, w->src, 0, NULL, NULL);
    for (int k = 0; acc >= 0 && t->fv != NULL && k < t->fv->nstack; k++) {
        if (t->fv->stack[k] == obj) {
            Py_DECREF(obj);
            return tracer_unsupported(t, false, "a weak reference to a value on the frame's stack"), NULL;
        }
        int sa = guardset_accessor(t->gs, ACC_STACK, -1, k, NULL, NULL);
        if (sa < 0 || guardset_add(t->gs, GUARD_NOT_SAME_AS, sa > acc ? sa : acc, NULL, sa > acc ? acc : sa) < 0)
            acc = -1;
    }
    Value *v = acc < 0 ? NULL : value_from_source(t, acc, obj);
    Py_DECREF(obj);
    return v;
}

/* (contract: translate_int.h) */
Value *tr_split_method_object(Tracer *t, Value *m)
{
    PyObject *fname = PyUnicode_FromString("__func__");
    PyObject *sname = PyUnicode_FromString("__self__");
    int fa = fname ? guardset_accessor(t->gs, ACC_ATTR, m->src, 0, fname, NULL) : -1;
    int sa = sname ? guardset_accessor(t->gs, ACC_ATTR, m->src, 0, sname, NULL) : -1;
    Py_XDECREF(fname);
    Py_XDECREF(sname);
    Value *fn = fa < 0 ? NULL : value_from_source(t, fa, PyMethod_GET_FUNCTION(m->obj));
    Value *self = sa < 0 || fn == NULL ? NULL : value_from_source(t, sa, PyMethod_GET_SELF(m->obj));
    Value *bound = self ? value_new(t, V_BOUNDFN, NULL) : NULL;
    if (bound == NULL || value_append(t, bound, fn) < 0 || value_append(t, bound, self) < 0)
        return NULL;
    return bound;
}

/* A bound method object the program holds (m = obj.method, then m()):
   its function and object read through it (m.__func__, m.__self__) and
   the call inlined.  NULL when tracing stops. */
static Value *call_method_object(TFrame *f, Value *m, Value **args, int nargs, PyObject *kwnames)
{
    Value *bound = tr_split_method_object(f->t, m);
    if (bound != NULL && tr_is_autograd_apply(bound->items[0]->obj))
        return tr_autograd_apply(f, bound->items[1], args, nargs, kwnames);   /* Fn.apply(...) */
    return bound ? tr_call_bound(f, bound, args, nargs, kwnames) : NULL;
}

/* fn(*args) folded while tracing -- fn pure C code (a math function, a
   method of an immutable builtin constant) -- when every argument is a
   constant; else a stop.  An exception fn raises makes the call a break:
   it runs eagerly and raises there, as it would.  NULL when tracing
   stops. */
static Value *fold_call(TFrame *f, PyObject *fn, Value **args, int nargs, PyObject *kwnames)
{
    Tracer *t = f->t;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    PyObject *vals[MAX_STACK];      /* strong: the arguments as constants */
    int have = 0;
    for (; have < nargs; have++) {
        Value *a = args[have];
        bool seq = (a->kind == V_TUPLE || a->kind == V_LIST) && a->src < 0;
        for (int i = 0; seq && i < a->n; i++)
            seq = foldable(a->items[i]);
        if (!foldable(a) && !seq)
            break;
        vals[have] = foldable(a) ? Py_NewRef(a->obj) : value_as_constant(t, a);  /* a list stays one */
        if (vals[have] == NULL)
            break;
    }
    if (have < nargs) {
        for (int i = 0; i < have; i++)
            Py_DECREF(vals[i]);
        return PyErr_Occurred() ? NULL
               : (tracer_unsupported(t, false, "%S of arguments that are not constants", fn), NULL);
    }
    PyObject *pos = PyTuple_New(nargs - nkw);
    PyObject *kw = nkw ? PyDict_New() : NULL;
    int rc = pos == NULL || (nkw && kw == NULL) ? -1 : 0;
    for (int i = 0; i < nargs; i++) {
        if (rc == 0 && i < nargs - nkw)
            PyTuple_SET_ITEM(pos, i, Py_NewRef(vals[i]));
        else if (rc == 0)
            rc = PyDict_SetItem(kw, PyTuple_GET_ITEM(kwnames, i - (nargs - nkw)), vals[i]);
        Py_DECREF(vals[i]);
    }
    PyObject *r = rc == 0 ? PyObject_Call(fn, pos, kw) : NULL;
    Py_XDECREF(pos);
    Py_XDECREF(kw);
    if (r == NULL && PyErr_ExceptionMatches(PyExc_Exception)) {
        PyErr_Clear();
        t->predicted_raise = true;
        return tracer_break(t, STOP_CALL, "call to %S raises on these arguments", fn), NULL;
    }
    if (r == NULL || value_is_plain_constant(r) || tensorops_is_dtype_info_object(r))
        return new_const(t, r);
    if (PyList_CheckExact(r)) {
        /* "a.b".split("."): a new list each call, the frame's own -- never
           one constant object a plan would hand out (and the program change) */
        Value *l = value_new(t, V_LIST, NULL);
        for (Py_ssize_t i = 0; l != NULL && i < PyList_GET_SIZE(r); i++) {
            PyObject *item = PyList_GET_ITEM(r, i);
            Value *c = value_is_plain_constant(item) ? value_new(t, V_CONST, item) : NULL;
            if (c == NULL || value_append(t, l, c) < 0)
                l = NULL;
        }
        Py_DECREF(r);
        return l != NULL || PyErr_Occurred() ? l
               : (tracer_unsupported(t, false, "%S returned a list of values that are not constants", fn), NULL);
    }
    PyObject *tn = PyType_GetName(Py_TYPE(r));
    Py_DECREF(r);
    Value *stop = (tracer_unsupported(t, false, "%S returned a %S (only immutable constants are folded)",
                                      fn, tn ? tn : Py_None), NULL);
    Py_XDECREF(tn);
    return stop;
}

/* The __exit__ of a grad-mode `with` (gm: its V_GRADMODE exit): called
   with (None, None, None) at the block's normal end, it puts the mode back
   (a graph node and tracing).  None, or NULL when tracing stops. */
static Value *grad_mode_exit(TFrame *f, Value *gm, Value **args, int nargs)
{
    for (int i = 0; i < nargs; i++)
        if (args[i]->kind != V_CONST || args[i]->obj != Py_None)
            return tracer_unsupported(f->t, false, "leaving a grad-mode with block by an exception"), NULL;
    if (tensorops_set_grad_mode(f->t, (int)gm->count, true) < 0)
        return NULL;
    return value_new(f->t, V_CONST, Py_None);
}

/* (contract: translate_int.h) */
void tr_leave_state_modes(Tracer *t, Py_ssize_t mark)
{
    if (t->state_modes == NULL)
        return;
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    for (Py_ssize_t i = PyList_GET_SIZE(t->state_modes) - 1; i >= mark; i--) {
        PyObject *pair = PyList_GET_ITEM(t->state_modes, i);
        PyObject *r = PyObject_CallOneArg(PyTuple_GET_ITEM(pair, 0), PyTuple_GET_ITEM(pair, 1));
        if (r == NULL)
            PyErr_Clear();
        Py_XDECREF(r);
    }
    if (PyList_SetSlice(t->state_modes, mark, PyList_GET_SIZE(t->state_modes), NULL) < 0)
        PyErr_Clear();
    PyErr_Restore(type, value, tb);
}

/* Entering a torch state manager (mgr, a V_STATECM): a node enter(*args)
   whose value is the mode, entered now too (the ops that follow are
   traced in it, and tr_leave_state_modes leaves it if tracing stops).
   *exit: the V_STATECM that leaves it.  0 / -1. */
static int enter_state_manager(TFrame *f, Value *mgr, Value **exit, Value **entered)
{
    Tracer *t = f->t;
    PyObject *enter_fn = mgr->items[0]->obj, *exit_fn = mgr->items[1]->obj;
    if (t->state_modes == NULL && (t->state_modes = PyList_New(0)) == NULL)
        return -1;
    if (tensorops_note_torch(t) < 0)
        return -1;
    if (t->grad_mode_start < 0) {
        /* inference_mode turns grad mode off: what the frame was entered
           in is what its GRAD_MODE guard checks, and what tracing ends in */
        PyObject *fn = tensorlib_grad_enabled_fn();
        PyObject *m = fn ? PyObject_CallNoArgs(fn) : NULL;
        int now = m ? PyObject_IsTrue(m) : -1;
        Py_XDECREF(m);
        if (now < 0)
            return PyErr_Occurred() ? -1 : tracer_unsupported(t, false, "grad mode without torch");
        t->grad_mode_start = now;
    }
    PyObject *mode = PyObject_Call(enter_fn, mgr->obj, NULL);
    if (mode == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_Exception))
            return -1;
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        tracer_unsupported(t, false, "%S%R raised %S", enter_fn, mgr->obj, value ? value : Py_None);
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
        return -1;
    }
    PyObject *pair = PyTuple_Pack(2, exit_fn, mode);
    int rc = pair ? PyList_Append(t->state_modes, pair) : -1;
    Py_XDECREF(pair);
    if (rc < 0) {
        PyObject *r = PyObject_CallOneArg(exit_fn, mode);
        Py_XDECREF(r);
        Py_DECREF(mode);
        return -1;
    }
    NodeObject *n = graph_call(t->graph, NODE_CALL_FUNCTION, enter_fn, mgr->obj, NULL,
                               PyUnicode_AsUTF8(((PyFunctionObject *)enter_fn)->func_name), mode);
    Value *ex = n ? value_new(t, V_STATECM, mode) : NULL;
    Py_DECREF(mode);
    if (ex == NULL || value_append(t, ex, mgr->items[0]) < 0 || value_append(t, ex, mgr->items[1]) < 0)
        return -1;
    ex->pos = 1;
    ex->node = n;
    *exit = ex;
    *entered = value_new(t, V_CONST, Py_None);     /* `as` is refused (tr_interp.c) */
    return *entered ? 0 : -1;
}

/* The __exit__ of an entered torch state manager (sm, its V_STATECM exit):
   at the block's normal end, a node exit(mode) and the mode left now.
   None, or NULL when tracing stops. */
static Value *state_manager_exit(TFrame *f, Value *sm, Value **args, int nargs)
{
    Tracer *t = f->t;
    for (int i = 0; i < nargs; i++)
        if (args[i]->kind != V_CONST || args[i]->obj != Py_None)
            return tracer_unsupported(t, false, "leaving a torch.autocast/inference_mode block by "
                                      "an exception"), NULL;
    Py_ssize_t top = t->state_modes ? PyList_GET_SIZE(t->state_modes) - 1 : -1;
    PyObject *mode = sm->obj;                                          /* borrowed */
    if (top < 0 || PyTuple_GET_ITEM(PyList_GET_ITEM(t->state_modes, top), 1) != mode)
        return tracer_unsupported(t, false, "torch state managers left in another order than "
                                  "entered"), NULL;
    PyObject *exit_fn = sm->items[1]->obj;
    PyObject *gargs = PyTuple_Pack(1, (PyObject *)sm->node);
    NodeObject *n = gargs ? graph_call(t->graph, NODE_CALL_FUNCTION, exit_fn, gargs, NULL,
                                       PyUnicode_AsUTF8(((PyFunctionObject *)exit_fn)->func_name),
                                       Py_None) : NULL;
    Py_XDECREF(gargs);
    if (n == NULL)
        return NULL;
    tr_leave_state_modes(t, top);
    return value_new(t, V_CONST, Py_None);
}

/* with mgr: for a context manager whose class defines __enter__ and
   __exit__ in Python (mgr reached by an accessor, or made while
   tracing): __enter__ inlined now,
   __exit__ bound for the block's end.  1 when done, 0 when mgr is not
   such a manager, -1 when tracing stops. */
static int enter_user_manager(TFrame *f, Value *mgr, Value **exit, Value **entered)
{
    bool made = mgr->kind == V_NEWOBJ;      /* an object made while tracing: its class */
    if (!made && ((mgr->kind != V_OBJECT && mgr->kind != V_CONST) || mgr->src < 0
                  || !value_type_lookup_is_generic(Py_TYPE(mgr->obj))))
        return 0;
    PyTypeObject *tp = made ? (PyTypeObject *)mgr->obj : Py_TYPE(mgr->obj);
    PyObject *enter_name = PyUnicode_FromString("__enter__");
    PyObject *exit_name = PyUnicode_FromString("__exit__");
    PyObject *en = enter_name ? _PyType_Lookup(tp, enter_name) : NULL;
    PyObject *ex = exit_name ? _PyType_Lookup(tp, exit_name) : NULL;
    int rc = 0;
    if (en != NULL && ex != NULL && PyFunction_Check(en) && PyFunction_Check(ex)) {
        Value *enter = tr_generic_attr(f, mgr, enter_name);
        Value *bound_exit = enter ? tr_generic_attr(f, mgr, exit_name) : NULL;
        *entered = bound_exit ? tr_call_or_undo(f, enter, NULL, 0, NULL) : NULL;
        *exit = bound_exit;
        rc = *entered ? 1 : -1;
    }
    Py_XDECREF(enter_name);
    Py_XDECREF(exit_name);
    return rc;
}

/* BEFORE_WITH of mgr: *exit (what the block's end calls) and *entered
   (what `as` binds).  Modelled: torch's grad-mode managers, as graph
   state; context managers whose __enter__/__exit__ are Python, inlined.
   0 / -1. */
int tr_enter_with(TFrame *f, Value *mgr, Value **exit, Value **entered)
{
    Tracer *t = f->t;
    if (mgr->kind == V_STATECM && mgr->pos == 0)
        return enter_state_manager(f, mgr, exit, entered);
    int user = enter_user_manager(f, mgr, exit, entered);
    if (user != 0)
        return user > 0 ? 0 : -1;
    if (mgr->kind != V_GRADMODE || mgr->pos != 0)
        return tracer_unsupported(t, false, "a with block of a %s (torch's grad-mode managers and "
                                  "Python context managers are modelled)",
                                  mgr->obj ? Py_TYPE(mgr->obj)->tp_name : "value");
    int prev = t->grad_mode_now >= 0 ? t->grad_mode_now : -1;
    if (prev < 0) {
        PyObject *fn = tensorlib_grad_enabled_fn();
        PyObject *m = fn ? PyObject_CallNoArgs(fn) : NULL;
        prev = m ? PyObject_IsTrue(m) : -1;
        Py_XDECREF(m);
        if (prev < 0)
            return PyErr_Occurred() ? -1 : tracer_unsupported(t, false, "grad mode without torch");
    }
    if (tensorops_set_grad_mode(t, (int)mgr->count, true) < 0)
        return -1;
    Value *ex = value_new(t, V_GRADMODE, NULL);
    if (ex == NULL)
        return -1;
    ex->count = prev;
    ex->pos = 1;
    *exit = ex;
    *entered = value_new(t, V_CONST, Py_None);    /* no_grad().__enter__() is None */
    return *entered ? 0 : -1;
}

/* fn(*args) for fn one of torch's context managers the translator keeps
   as graph state: grad mode (V_GRADMODE), autocast and inference_mode
   (V_STATECM), made for the `with` that follows.  *handled false (NULL)
   for any other fn. */
static Value *torch_manager(TFrame *f, PyObject *fn, Value **args, int nargs, PyObject *kwnames,
                            bool *handled)
{
    Tracer *t = f->t;
    *handled = true;
    int grad = tensorops_grad_manager_mode(fn, args, nargs, kwnames);
    if (grad == -2)
        return tracer_unsupported(t, false, "set_grad_enabled() of a mode that is not a constant"), NULL;
    if (grad >= 0) {
        Value *gm = value_new(t, V_GRADMODE, NULL);
        if (gm != NULL)
            gm->count = grad;
        return gm;
    }
    PyObject *enter_fn, *exit_fn, *vals;
    int sm = tensorops_state_manager(fn, args, nargs, kwnames, &enter_fn, &exit_fn, &vals);
    if (sm == -1)
        return NULL;
    if (sm == -2)
        return tracer_unsupported(t, false, "%s() with arguments that are not constants",
                                  ((PyTypeObject *)fn)->tp_name), NULL;
    if (sm == 0) {
        *handled = false;
        return NULL;
    }
    Value *cm = value_new(t, V_STATECM, vals);
    Py_DECREF(vals);
    Value *en = cm ? value_new(t, V_CONST, enter_fn) : NULL;
    Value *ex = en ? value_new(t, V_CONST, exit_fn) : NULL;
    if (ex == NULL || value_append(t, cm, en) < 0 || value_append(t, cm, ex) < 0)
        return NULL;
    return cm;
}

/* callable(*args) (kwnames, borrowed, naming the last args): a tensor or
   container method, an nn.Module, a user function (inlined), a pure tensor
   function (a node), a builtin or builtin type; anything else is a break.
   NULL when tracing stops. */
/* Whether V_BOUND b, called with these arguments, is d.get(key[, default])
   of a dict input read as an opaque object (value_keyed_dict_lookup). */
static bool is_keyed_dict_get(Value *b, int nargs, PyObject *kwnames)
{
    Value *d = b->items[0];
    return d->kind == V_OBJECT && d->src >= 0 && PyDict_CheckExact(d->obj) && PyUnicode_Check(b->obj)
           && PyUnicode_CompareWithASCIIString(b->obj, "get") == 0 && (nargs == 1 || nargs == 2)
           && (kwnames == NULL || PyTuple_GET_SIZE(kwnames) == 0);
}


/* dict.fromkeys(keys[, value]): a new dict of constant keys, each holding
   value (one object: None by default).  NULL when tracing stops. */
static Value *dict_fromkeys(TFrame *f, Value *keys, Value *value)
{
    Tracer *t = f->t;
    Value *it = tr_make_iter(f, keys);
    Value *d = it ? value_new(t, V_DICT, NULL) : NULL;
    if (d == NULL || (d->obj = PyList_New(0)) == NULL)
        return NULL;
    if (value == NULL && (value = new_const(t, Py_NewRef(Py_None))) == NULL)
        return NULL;
    for (int i = it->pos; i < it->n; i++) {
        if (!foldable(it->items[i]))
            return tracer_unsupported(t, false, "dict.fromkeys() of keys that are not constants"), NULL;
        if (tr_dict_set_item(t, d, it->items[i]->obj, value) < 0)
            return NULL;
    }
    it->pos = it->n;                                    /* consumed */
    return d;
}

/* obj.name(...) of an object the program holds, name a C method: a numpy
   generator's draw (rng.normal), a dict subclass's view or get (d.keys(),
   d.items(), d.get(k)); any other is a break.  NULL when tracing stops. */
static Value *call_bound_c_method(TFrame *f, Value *callable, Value **args, int nargs,
                                  PyObject *kwnames)
{
    Tracer *t = f->t;
    Value *self = callable->items[0];
    if (self->src >= 0 && self->obj) {
        Value *r = tr_random_numpy_draw_call(f, callable, args, nargs, kwnames);     /* rng.normal(...) */
        if (r != NULL || PyErr_Occurred() || t->reason != NULL)
            return r;
    }
    if (tr_is_dict_view_object(self)) {
        bool handled;
        Value *r = tr_dict_view_method(f, self, callable->obj, args, nargs, kwnames, &handled);
        if (handled || PyErr_Occurred() || t->reason != NULL)
            return r;
    }
    if ((kwnames == NULL || PyTuple_GET_SIZE(kwnames) == 0) && PyUnicode_Check(callable->obj)) {
        bool handled;
        Value *r = tr_visible_set_method(f, self, callable->obj, args, nargs, &handled);
        if (handled)
            return r;                        /* s.add(k), s.discard(k) of a set it holds */
    }
    if (self->src >= 0 && self->obj && PyType_Check(self->obj) && PyUnicode_Check(callable->obj)
        && PyUnicode_CompareWithASCIIString(callable->obj, "apply") == 0) {
        bool handled;
        Value *r = tr_autograd_apply_of_class(f, self, args, nargs, kwnames, &handled);
        if (handled)
            return r;                        /* Fn.apply(...): a torch.autograd.Function */
    }
    bool is_class = self->obj && PyType_Check(self->obj) && Py_TYPE(self->obj) == &PyType_Type;
    PyTypeObject *cls = is_class ? (PyTypeObject *)self->obj
                        : self->obj && value_type_lookup_is_generic(Py_TYPE(self->obj)) ? Py_TYPE(self->obj) : NULL;
    if (self->src >= 0 && cls != NULL && PyUnicode_Check(callable->obj)) {
        /* C.cm(...) or obj.cm(...) of a classmethod (a plain metaclass, a
           generic lookup): the method bound to C, read as C.cm -- its
           __func__ and __self__ read through it, guarded; obj's own
           __dict__ guarded not to shadow it */
        PyObject *descr = _PyType_Lookup(cls, callable->obj);             /* borrowed */
        PyObject **dictptr = is_class ? NULL : _PyObject_GetDictPtr(self->obj);
        bool shadowed = dictptr != NULL && *dictptr != NULL
                        && PyDict_GetItemWithError(*dictptr, callable->obj) != NULL;
        if (PyErr_Occurred())
            return NULL;
        if (descr != NULL && Py_IS_TYPE(descr, &PyClassMethod_Type) && !shadowed) {
            int base = is_class ? self->src : guardset_accessor(t->gs, ACC_TYPE, self->src, 0, NULL, NULL);
            int acc = base < 0 ? -1 : guardset_accessor(t->gs, ACC_ATTR, base, 0, callable->obj, NULL);
            if (acc >= 0 && dictptr != NULL && *dictptr != NULL) {
                PyObject *dn = PyUnicode_FromString("__dict__");
                int da = dn ? guardset_accessor(t->gs, ACC_OBJATTR, self->src, 0, dn, NULL) : -1;
                Py_XDECREF(dn);
                if (da < 0 || guardset_add(t->gs, GUARD_DICT_LACKS, da, callable->obj, 0) < 0)
                    acc = -1;
            }
            PyObject *m = acc < 0 ? NULL : PyObject_GetAttr((PyObject *)cls, callable->obj);
            Value *mv = m ? value_from_source(t, acc, m) : NULL;
            Py_XDECREF(m);
            if (mv == NULL)
                return NULL;
            if (mv->kind == V_OBJECT && PyMethod_Check(mv->obj) && PyFunction_Check(PyMethod_GET_FUNCTION(mv->obj)))
                return call_method_object(f, mv, args, nargs, kwnames);
        }
    }
    if (self->obj == (PyObject *)&PyDict_Type && PyUnicode_Check(callable->obj)
        && PyUnicode_CompareWithASCIIString(callable->obj, "fromkeys") == 0
        && (nargs == 1 || nargs == 2) && (kwnames == NULL || PyTuple_GET_SIZE(kwnames) == 0))
        return dict_fromkeys(f, args[0], nargs == 2 ? args[1] : NULL);
    return tracer_break(t, STOP_CALL, "call to method .%U() of a %s", callable->obj,
                        self->obj ? Py_TYPE(self->obj)->tp_name : "value"), NULL;
}

/* x.type() of a torch tensor (args[0] is x): "torch.FloatTensor", a
   constant its dtype and device fix; x.type(dtype) is x.to(dtype) -- x
   itself when it has that dtype, else a converted copy.  *handled false
   (NULL) for any other call: .type("torch.DoubleTensor") stays a break. */
static Value *tensor_type_call(Tracer *t, Value *self, PyObject *name, Value **args, int nargs,
                               PyObject *kwnames, bool *handled)
{
    *handled = PyUnicode_CompareWithASCIIString(name, "type") == 0 && tensor_is_torch(self->obj)
               && (kwnames == NULL || PyTuple_GET_SIZE(kwnames) == 0)
               && (nargs == 1 || (nargs == 2 && args[1]->kind == V_CONST
                                  && tensorlib_is_torch_dtype(args[1]->obj)));
    if (!*handled)
        return NULL;
    if (nargs == 1)
        return new_const(t, PyObject_CallMethod(self->obj, "type", NULL));
    PyObject *to = PyUnicode_InternFromString("to");
    Value *r = to ? tensorops_call(t, NODE_CALL_METHOD, to, "to", args, nargs, NULL) : NULL;
    Py_XDECREF(to);
    return r;
}

/* x.name(*args) of a tensor value (args[0] is x): a graph op for a pure
   method, else a break.  NULL when tracing stops. */
static Value *call_tensor_method(Tracer *t, Value *self, PyObject *name, Value **args, int nargs,
                                 PyObject *kwnames)
{
    bool handled;
    Value *typed = tensor_type_call(t, self, name, args, nargs, kwnames, &handled);
    if (handled)
        return typed;
    if (PyUnicode_CompareWithASCIIString(name, "requires_grad_") == 0 && tr_tensor_is_own(t, self)
        && (nargs == 1 || (nargs == 2 && args[1]->kind == V_CONST && PyBool_Check(args[1]->obj)))
        && (kwnames == NULL || PyTuple_GET_SIZE(kwnames) == 0))
        /* torch.zeros_like(q).requires_grad_() (MRA): a flag of a tensor
           this graph made, set on its example as the graph sets it */
        return tensorops_call(t, NODE_CALL_METHOD, name, "requires_grad_", args, nargs, NULL);
    if (!tensorops_is_pure_method(name)) {
        if (tensorops_is_escape_method(name))
            return tracer_break(t, STOP_ESCAPE, "data escape: .%U() on a tensor value", name), NULL;
        return tracer_break(t, STOP_CALL, "call to .%U(), not a pure tensor method", name), NULL;
    }
    const char *hint = PyUnicode_AsUTF8(name);
    if (hint == NULL)
        return NULL;
    return tensorops_call(t, NODE_CALL_METHOD, name, hint, args, nargs, kwnames);
}

/* Tensor.<name>(x, *args): a method of torch's tensor type called through
   the class, as a torch function mode's __torch_function__ calls the func
   it is handed -- x.<name>(*args) when x's class resolves name to that
   very method; x[i] for the slot wrapper __getitem__; the operator for a
   binary dunder of two tensors of one class or a tensor and a constant.
   *handled false (NULL) for anything else. */
static Value *call_tensor_descriptor(TFrame *f, PyObject *fn, Value **args, int nargs,
                                     PyObject *kwnames, bool *handled)
{
    static const char *const dunders[][2] = {
        {"__add__", "add"}, {"__sub__", "sub"}, {"__mul__", "mul"}, {"__truediv__", "truediv"},
        {"__floordiv__", "floordiv"}, {"__mod__", "mod"}, {"__pow__", "pow"},
        {"__matmul__", "matmul"}, {"__and__", "and_"}, {"__or__", "or_"}, {"__xor__", "xor"},
        {"__lt__", "lt"}, {"__le__", "le"}, {"__gt__", "gt"}, {"__ge__", "ge"}, {"__eq__", "eq"},
        {"__ne__", "ne"}, {NULL, NULL}};
    *handled = false;
    if (!(Py_IS_TYPE(fn, &PyMethodDescr_Type) || Py_IS_TYPE(fn, &PyWrapperDescr_Type)) || nargs < 1
        || args[0]->kind != V_TENSOR || !tensor_is_torch(args[0]->obj)
        || !PyType_IsSubtype(Py_TYPE(args[0]->obj), PyDescr_TYPE(fn))
        || _PyType_Lookup(Py_TYPE(args[0]->obj), PyDescr_NAME(fn)) != fn)
        return NULL;
    PyObject *name = PyDescr_NAME(fn);
    bool plain = nargs == 2 && (kwnames == NULL || PyTuple_GET_SIZE(kwnames) == 0)
                 && (args[1]->kind != V_TENSOR || Py_TYPE(args[1]->obj) == Py_TYPE(args[0]->obj));
    if (PyUnicode_CompareWithASCIIString(name, "__getitem__") == 0) {
        *handled = plain;
        return plain ? tr_subscript(f, args[0], args[1]) : NULL;
    }
    for (int i = 0; dunders[i][0] != NULL; i++)
        if (PyUnicode_CompareWithASCIIString(name, dunders[i][0]) == 0) {
            PyObject *op = plain ? tensorops_operator(dunders[i][1]) : NULL;   /* borrowed */
            *handled = op != NULL;
            return op ? tensorops_call(f->t, NODE_CALL_FUNCTION, op, dunders[i][1], args, 2, NULL) : NULL;
        }
    if (PyUnicode_READ_CHAR(name, 0) == '_')
        return NULL;
    *handled = true;
    return call_tensor_method(f->t, args[0], name, args, nargs, kwnames);
}

/* numpy.errstate(all="raise"), new, or NULL (an error cleared). */
static PyObject *numpy_errstate_raise(void)
{
    PyObject *name = PyUnicode_FromString("numpy");
    PyObject *np = name ? PyImport_GetModule(name) : NULL;
    Py_XDECREF(name);
    PyObject *cls = np ? PyObject_GetAttrString(np, "errstate") : NULL;
    Py_XDECREF(np);
    PyObject *kw = cls ? Py_BuildValue("{s:s}", "all", "raise") : NULL;
    PyObject *empty = kw ? PyTuple_New(0) : NULL;
    PyObject *st = empty ? PyObject_Call(cls, empty, kw) : NULL;
    Py_XDECREF(cls);
    Py_XDECREF(kw);
    Py_XDECREF(empty);
    if (st == NULL)
        PyErr_Clear();
    return st;
}

/* A NumPy ufunc of Python numbers (`np.log(float(self.max_scale))` in a
   positional encoding): computed now, a numpy scalar constant, as math's
   functions are -- under np.errstate(all="raise"), so a result that would
   warn (log(0), an overflow) is not folded but left to the graph, which
   warns when it runs as eager code does.  NULL (no error) when not folded. */
static Value *fold_ufunc_of_numbers(TFrame *f, PyObject *fn, Value **args, int nargs, PyObject *kwnames)
{
    PyTypeObject *ufunc = tensorlib_ufunc_type();
    if (ufunc == NULL || Py_TYPE(fn) != ufunc || nargs < 1 || nargs > 3
        || (kwnames != NULL && PyTuple_GET_SIZE(kwnames) > 0))
        return NULL;
    PyObject *cargs = PyTuple_New(nargs);
    for (int i = 0; cargs != NULL && i < nargs; i++) {
        PyObject *o = args[i]->obj;
        if (args[i]->kind != V_CONST || !(PyFloat_CheckExact(o) || PyLong_CheckExact(o))) {
            Py_DECREF(cargs);
            return NULL;
        }
        PyTuple_SET_ITEM(cargs, i, Py_NewRef(o));
    }
    if (cargs == NULL)
        return NULL;
    PyObject *state = numpy_errstate_raise();
    PyObject *entered = state ? PyObject_CallMethod(state, "__enter__", NULL) : NULL;
    PyObject *r = entered ? PyObject_Call(fn, cargs, NULL) : NULL;
    PyErr_Clear();              /* FloatingPointError and the like: not folded */
    PyObject *left = entered ? PyObject_CallMethod(state, "__exit__", "OOO", Py_None, Py_None, Py_None) : NULL;
    PyErr_Clear();
    Py_XDECREF(left);
    Py_XDECREF(entered);
    Py_XDECREF(state);
    Py_DECREF(cargs);
    if (r == NULL || !value_is_plain_constant(r)) {
        Py_XDECREF(r);
        return NULL;
    }
    return new_const(f->t, r);
}

/* A call of a function tensorops models (a NumPy or torch function, an
   operator of torch.ops, a draw): a graph op, or a constant when it is a
   ufunc of numbers.  NULL when tracing stops. */
static Value *call_tensor_function(TFrame *f, PyObject *fn, Value **args, int nargs, PyObject *kwnames)
{
    Value *folded = fold_ufunc_of_numbers(f, fn, args, nargs, kwnames);
    if (folded != NULL || PyErr_Occurred())
        return folded;
    PyObject *name = PyObject_GetAttrString(fn, "__name__");
    if (name == NULL) {
        PyErr_Clear();
        name = PyUnicode_FromString("call");
    }
    const char *hint = name ? PyUnicode_AsUTF8(name) : NULL;
    Value *r = hint ? tensorops_call(f->t, NODE_CALL_FUNCTION, fn, hint, args, nargs, kwnames) : NULL;
    Py_XDECREF(name);
    return r;
}

/* After module m's forward returned `out`, its forward hooks (a V_TUPLE),
   as nn.Module.__call__ runs them: hook(m, args, out), where args is the
   tuple of the call's positional arguments; a result that is not None
   replaces out.  The final out, or NULL when tracing stops. */
static Value *run_forward_hooks(TFrame *f, Value *m, Value *hooks, Value **args, int nargs,
                                PyObject *kwnames, Value *out)
{
    Tracer *t = f->t;
    int npos = nargs - (kwnames ? (int)PyTuple_GET_SIZE(kwnames) : 0);
    Value *pos = value_new(t, V_TUPLE, NULL);
    for (int i = 0; pos != NULL && i < npos; i++)
        if (value_append(t, pos, args[i]) < 0)
            pos = NULL;
    for (int i = 0; pos != NULL && out != NULL && i < hooks->n; i++) {
        Value *hargs[3] = {m, pos, out};
        Value *r = call_value(f, hooks->items[i], hargs, 3, NULL);
        if (r == NULL)
            return NULL;
        if (!(r->kind == V_CONST && r->obj == Py_None))
            out = r;
    }
    return pos != NULL ? out : NULL;
}

/* operator.add(a, b), operator.lt(a, b), operator.getitem(a, i), operator.neg(a) ...: what the
   operator means, as a + b does (a graph's own code calls them so, and so
   does functools.reduce(operator.mul, ...)).  *handled false for any other
   function. */
static Value *operator_function_call(TFrame *f, PyObject *fn, Value **args, int nargs,
                                     PyObject *kwnames, bool *handled)
{
    *handled = false;
    if (!PyCFunction_Check(fn) || (kwnames != NULL && PyTuple_GET_SIZE(kwnames) > 0))
        return NULL;
    const char *name = ((PyCFunctionObject *)fn)->m_ml->ml_name;
    PyObject *same = tensorops_operator(name);            /* borrowed */
    if (same != fn) {
        PyErr_Clear();
        return NULL;
    }
    bool known = false;
    if (nargs == 2) {
        for (size_t i = 0; i < sizeof tr_binary_op_names / sizeof *tr_binary_op_names && !known; i++)
            known = strcmp(name, tr_binary_op_names[i]) == 0;
        for (size_t i = 0; i < sizeof tr_compare_op_names / sizeof *tr_compare_op_names && !known; i++)
            known = strcmp(name, tr_compare_op_names[i]) == 0;
        if (known) {
            *handled = true;
            return tr_apply_binary(f, name, name, args[0], args[1], false);
        }
    }
    if (nargs == 2 && strcmp(name, "getitem") == 0) {
        *handled = true;
        return tr_subscript(f, args[0], args[1]);
    }
    if (nargs == 1 && (strcmp(name, "neg") == 0 || strcmp(name, "pos") == 0
                       || strcmp(name, "invert") == 0)) {
        *handled = true;
        return tr_apply_unary(f, name, args[0]);
    }
    return NULL;
}

/* What a function of tensorops_known_result (torch.compiler.is_compiling,
   torch.jit.is_scripting, ...) answers, as a constant.  is_compiling():
   True as under TorchDynamo (libraries take their compile-friendly path),
   unless that path raised (translate.c: the retry answering False). */
static Value *known_result(Tracer *t, PyObject *known)
{
    if (known == Py_True) {
        t->answered_compiling = true;
        known = t->compiling_false ? Py_False : Py_True;
    }
    return value_new(t, V_CONST, known);
}

/* A V_METHOD whose receiver goes first (pos 1: a dict method of a new
   object's mapping): the same method called with the receiver prepended. */
static Value *call_receiver_first(TFrame *f, Value *callable, Value **args, int nargs,
                                  PyObject *kwnames)
{
    Tracer *t = f->t;
    if (nargs + 1 >= MAX_STACK)
        return tracer_unsupported(t, false, "a call with more than %d arguments", MAX_STACK), NULL;
    Value *full[MAX_STACK];
    full[0] = callable->items[0];
    if (nargs > 0)
        memcpy(full + 1, args, sizeof(Value *) * (size_t)nargs);
    Value *plain = value_new(t, V_METHOD, callable->obj);
    if (plain == NULL || value_append(t, plain, callable->items[0]) < 0)
        return NULL;
    return call_value(f, plain, full, nargs + 1, kwnames);
}

/* Whether bound method b is one of an immutable builtin constant -- a
   str, bytes, tuple, int or float, or a torch.Size -- whose methods are
   all C and pure. */
static bool method_of_immutable_constant(Value *b)
{
    PyObject *o = b->items[0]->obj;
    return foldable(b->items[0])
           && (PyUnicode_CheckExact(o) || PyBytes_CheckExact(o) || PyTuple_CheckExact(o)
               || PyLong_CheckExact(o) || PyFloat_CheckExact(o)
               || (PyTuple_Check(o) && tensorlib_is_torch_constant(o)));
}

static Value *call_value(TFrame *f, Value *callable, Value **args, int nargs, PyObject *kwnames)
{
    Tracer *t = f->t;
    if (callable->kind == V_METHOD && callable->pos == 1)
        return call_receiver_first(f, callable, args, nargs, kwnames);
    if (callable->kind == V_METHOD) {
        Value *self = callable->items[0];
        if (self->kind == V_TENSOR)
            return call_tensor_method(t, self, callable->obj, args, nargs, kwnames);
        return call_container_method(f, callable, args, nargs, kwnames);
    }
    if (callable->kind == V_FUNC)
        return inline_call(f, callable, args, nargs, kwnames);
    if (callable->kind == V_VMAP)
        return tr_call_vmap(f, callable, args, nargs, kwnames);
    if (callable->kind == V_BOUNDFN)
        return tr_call_bound(f, callable, args, nargs, kwnames);
    if (callable->kind == V_GRADMODE && callable->pos == 1)
        return grad_mode_exit(f, callable, args, nargs);
    if (callable->kind == V_STATECM && callable->pos == 1)
        return state_manager_exit(f, callable, args, nargs);
    if (callable->kind == V_BOUND && method_of_immutable_constant(callable)) {
        /* "a,b".split(","), name.startswith("x"), shape.numel(): C and pure,
           folded on constant arguments */
        PyObject *meth = PyObject_GetAttr(callable->items[0]->obj, callable->obj);
        Value *r = meth ? fold_call(f, meth, args, nargs, kwnames) : NULL;
        Py_XDECREF(meth);
        return r;
    }
    if (callable->kind == V_BOUND && bound_is_python_method(callable)) {
        /* obj.method held as a value: a Python function of obj's class is
           bound and inlined as any method call */
        Value *bound = tr_generic_attr(f, callable->items[0], callable->obj);
        return bound ? call_value(f, bound, args, nargs, kwnames) : NULL;
    }
    if (callable->kind == V_BOUND && is_keyed_dict_get(callable, nargs, kwnames)) {
        /* d.get(key[, default]) of a dict input with keys of several types */
        bool found;
        Value *r = value_keyed_dict_lookup(t, callable->items[0], args[0], &found);
        return r == NULL || found || nargs == 1 ? r : args[1];
    }
    if (callable->kind == V_BOUND)
        return call_bound_c_method(f, callable, args, nargs, kwnames);
    if (callable->kind == V_OBJECT && callable->src >= 0 && PyWeakref_CheckRefExact(callable->obj)
        && nargs == 0 && (kwnames == NULL || PyTuple_GET_SIZE(kwnames) == 0))
        return call_weakref(t, callable);
    if ((callable->kind == V_OBJECT || callable->kind == V_CONST) && callable->src >= 0
        && PyMethod_Check(callable->obj) && PyFunction_Check(PyMethod_GET_FUNCTION(callable->obj)))
        return call_method_object(f, callable, args, nargs, kwnames);
    if (callable->kind == V_OBJECT && nargs < MAX_STACK) {
        /* an nn.Module: inline type(m).forward(m, *args) */
        bool handled;
        Value *hooks;
        Value *fwd = value_module_forward(t, callable, &handled, &hooks);
        if (handled) {
            Value *full[MAX_STACK + 1];
            full[0] = callable;
            if (nargs > 0)
                memcpy(full + 1, args, sizeof(Value *) * (size_t)nargs);
            Value *out = fwd ? inline_call(f, fwd, full, nargs + 1, kwnames) : NULL;
            return out != NULL && hooks != NULL
                   ? run_forward_hooks(f, callable, hooks, args, nargs, kwnames, out) : out;
        }
    }
    bool held;
    Value *got = tr_call_held_object(f, callable, args, nargs, kwnames, &held);
    if (held)
        return got;
    if (callable->kind != V_CONST)
        return tracer_break(t, STOP_CALL, "call of a %s",
                                  callable->obj ? Py_TYPE(callable->obj)->tp_name : "value that is not a function"), NULL;
    PyObject *fn = callable->obj;
    PyObject *rule, *extra;
    HatchKind hatch = tr_hatch_of(fn, &rule, &extra);    /* (methods: inline_call's) */
    if (hatch != HATCH_NONE)
        return tr_call_marked(f, callable, hatch, rule, extra, args, nargs, kwnames);
    if (tr_is_partial_class(fn) || tr_is_vmap(fn) || tr_is_fnmode_stack_call(fn))
        return tr_is_vmap(fn) ? tr_make_vmap(f, args, nargs, kwnames)
               : tr_is_partial_class(fn) ? tr_make_partial(f, args, nargs, kwnames)
               : tr_fnmode_stack_call(f, fn, args, nargs, kwnames);
    PyObject *known = tensorops_known_result(fn);
    if (known == Py_Ellipsis)
        return fold_call(f, fn, args, nargs, kwnames);   /* a log call: once, while tracing */
    bool query;
    Value *answer = tensorops_state_query(t, fn, args, nargs, kwnames, &query);
    if (!query)             /* operator.add(a, b): the operator */
        answer = operator_function_call(f, fn, args, nargs, kwnames, &query);
    if (query)
        return answer;
    if (known != NULL && nargs == 0)
        return known_result(t, known);
    if (tr_is_inspect_signature(fn) && nargs == 1 && (kwnames == NULL || PyTuple_GET_SIZE(kwnames) == 0))
        return tr_inspect_signature(f, fn, args[0]);
    bool deep;
    if (tr_is_copy_function(fn, &deep) && nargs == 1 && (kwnames == NULL || PyTuple_GET_SIZE(kwnames) == 0))
        return tr_copy(f, args[0], deep);
    if (tr_is_marked_constant(fn))
        return tr_call_marked_constant(f, fn, args, nargs, kwnames);
    if ((Py_IS_TYPE(fn, &PyWrapperDescr_Type) || Py_IS_TYPE(fn, &PyMethodDescr_Type)) && nargs >= 1
        && args[0]->kind == V_NEWOBJ && PyType_IsSubtype((PyTypeObject *)args[0]->obj, PyDescr_TYPE(fn)))
        /* object.__setattr__(self, name, v) of an object made while tracing
           (a frozen dataclass's __init__): as the bound form */
        return tr_newobj_call_builtin(f, args[0], fn, args + 1, nargs - 1, kwnames);
    if (PyFunction_Check(fn) && !tensorops_is_pure_function(fn)) {
        bool handled;
        Value *r = tr_contextlib_call(f, fn, args, nargs, kwnames, &handled);
        return handled ? r : inline_call(f, callable, args, nargs, kwnames);
    }
    if (tensorops_is_pure_function(fn) || tr_random_numpy_owner(fn) != NULL
        || tensorops_is_library_op(fn) || tensorops_private_torch_op(fn) != NULL)
        return call_tensor_function(f, fn, args, nargs, kwnames);
    if (PyCFunction_Check(fn) && PyCFunction_GET_SELF(fn) != NULL && PyModule_Check(PyCFunction_GET_SELF(fn))) {
        PyObject *modname = PyModule_GetNameObject(PyCFunction_GET_SELF(fn));
        int is_builtins = modname && PyUnicode_CompareWithASCIIString(modname, "builtins") == 0;
        Py_XDECREF(modname);
        PyErr_Clear();
        if (is_builtins)
            return tr_call_builtin(f, fn, args, nargs, kwnames);
        if (tensorops_is_math_function(fn))
            return fold_call(f, fn, args, nargs, kwnames);   /* math.sqrt(d): pure C */
    }
    if (tensorops_is_dtype_info(fn) && nargs == 1 && foldable(args[0])
        && (kwnames == NULL || PyTuple_GET_SIZE(kwnames) == 0)) {
        /* torch.finfo(torch.float32): an immutable description of a dtype */
        return fold_call(f, fn, args, nargs, kwnames);
    }
    if (PyType_Check(fn) && !(((PyTypeObject *)fn)->tp_flags & Py_TPFLAGS_HEAPTYPE))
        return tr_call_type(f, fn, args, nargs, kwnames);
    if (tr_exception_class_is_plain(fn) && (kwnames == NULL || PyTuple_GET_SIZE(kwnames) == 0))
        return tr_make_exception(f, fn, args, nargs);     /* class MyError(ValueError): pass */
    bool handled;
    Value *mgr = torch_manager(f, fn, args, nargs, kwnames, &handled);
    if (handled)
        return mgr;
    if (PyType_Check(fn)) {
        Value *o = tr_new_object(f, callable, args, nargs, kwnames, &handled);
        if (handled || o != NULL || PyErr_Occurred())
            return o;
    }
    Value *stored = tr_builtin_store_call(f, fn, args, nargs, kwnames, &handled);
    if (!handled)      /* Tensor.add(x, y): what a torch function mode calls */
        stored = call_tensor_descriptor(f, fn, args, nargs, kwnames, &handled);
    if (handled)
        return stored;
    PyObject *r = PyObject_Repr(fn);
    if (r == NULL)
        return NULL;
    Value *stop = (tracer_break(t, STOP_CALL, "call to %U", r), NULL);
    Py_DECREF(r);
    return stop;
}

/* The call of a CALL instruction.  When it stops (it will run eagerly),
   what tracing it did to this frame's containers is undone, and in the
   root frame its ops are dropped from the graph, so that nothing happens
   twice.  NULL when tracing stops. */
Value *tr_call_or_undo(TFrame *f, Value *callable, Value **args, int nargs, PyObject *kwnames)
{
    Tracer *t = f->t;
    int undo_mark = t->nundo;
    int ops_mark = graph_op_count(t->graph);
    int grad_mode = t->grad_mode_now;
    Py_ssize_t modes_mark = t->state_modes ? PyList_GET_SIZE(t->state_modes) : 0;
    int writes_mark = t->nwrites;
    Py_ssize_t hatches_mark = t->hatches ? PyList_GET_SIZE(t->hatches) : 0;
    int fn_modes_mark = t->nfn_modes;
    Value *fn_modes[MAX_FN_MODES];
    memcpy(fn_modes, t->fn_modes, sizeof(fn_modes));
    Value *r = call_value(f, callable, args, nargs, kwnames);
    if (r != NULL && f->parent == NULL && t->nfn_modes > fn_modes_mark)
        r = (tracer_unsupported(t, false, "a torch function mode entered in the captured function "
                                "itself (modes are traced inside the functions it calls)"), NULL);
    if (r == NULL && t->raised != NULL && (f->parent != NULL || t->absent_frame == f)
        && !PyErr_Occurred())
        return NULL;     /* an exception unwinding: a frame that catches it keeps what ran
                            (the root frame too, in a lookup its getattr(o, n, d) or
                            hasattr(o, n) makes: tr_catch_attribute_error) */
    if (r == NULL) {
        t->raised = NULL;    /* at the root frame's call: a plain stop, the call runs eagerly */
        tracer_undo_to(t, undo_mark);
        tr_writes_truncate(t, writes_mark);
        tr_leave_state_modes(t, modes_mark);
        t->nfn_modes = fn_modes_mark;
        memcpy(t->fn_modes, fn_modes, sizeof(fn_modes));
        if (t->hatches != NULL && PyList_SetSlice(t->hatches, hatches_mark, PY_SSIZE_T_MAX, NULL) < 0)
            PyErr_Clear();
        tensorops_restore_grad_mode(t, grad_mode >= 0 ? grad_mode : t->grad_mode_start);
        if (f->parent == NULL && !PyErr_Occurred())
            graph_truncate(t->graph, ops_mark);
    }
    return r;
}
