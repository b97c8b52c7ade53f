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

#include <stdarg.h>
#include <string.h>

void rebuild_clear(Rebuild *r)
{
    for (int i = 0; i < r->n; i++)
        rebuild_clear(&r->items[i]);
    PyMem_Free(r->items);
    Py_CLEAR(r->obj);
    memset(r, 0, sizeof(*r));
}

static void rebuild_array_clear(Rebuild *items, int n)
{
    for (int i = 0; i < n; i++)
        rebuild_clear(&items[i]);
    PyMem_Free(items);
}

void plan_clear(Plan *p)
{
    Py_CLEAR(p->gm);
    Py_CLEAR(p->compiled);
    PyMem_Free(p->input_acc);
    rebuild_array_clear(p->memo, p->nmemo);
    rebuild_clear(&p->result);
    rebuild_array_clear(p->live.locals, p->live.nlocals);
    rebuild_array_clear(p->live.stack, p->live.nstack);
    rebuild_clear(&p->callable);
    rebuild_array_clear(p->args, p->nargs);
    Py_CLEAR(p->kwnames);
    rebuild_clear(&p->cond);
    Py_CLEAR(p->brk.reason);
    Py_CLEAR(p->brk.user_stack);
    memset(p, 0, sizeof(*p));
}

static void release_array(PyObject **a, int n)
{
    if (a == NULL)
        return;
    for (int i = 0; i < n; i++)
        Py_XDECREF(a[i]);
    PyMem_Free(a);
}

void plan_outcome_clear(PlanOutcome *o)
{
    Py_CLEAR(o->value);
    Py_CLEAR(o->callable);
    Py_CLEAR(o->kwnames);
    release_array(o->args, o->nargs);
    release_array(o->locals, o->nlocals);
    release_array(o->stack, o->nstack);
    memset(o, 0, sizeof(*o));
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

typedef struct RebuildEnv {
    PyObject *outs;           /* borrowed: graph outputs (tuple or list) or NULL */
    PyObject **memo;          /* strong items: the plan's memo objects, or NULL */
    const GuardSet *gs;
    const FrameView *fv;
    PyObject **vals;
} RebuildEnv;

/* Build the value r describes into *out (new reference; NULL is a valid
   value for RB_NULL and unbound RB_LOCAL).  0 / -1 with an exception. */
static int rebuild(const Rebuild *r, const RebuildEnv *env, PyObject **out)
{
    *out = NULL;
    switch (r->kind) {
    case RB_CONST:
        *out = Py_NewRef(r->obj);
        return 0;
    case RB_OUTPUT:
        *out = Py_NewRef(PySequence_Fast_GET_ITEM(env->outs, r->index));
        return 0;
    case RB_INPUT:
        *out = Py_XNewRef(input_value(env->gs, env->fv, env->vals, r->index));
        return *out ? 0 : -1;
    case RB_LOCAL:
        *out = r->index < env->fv->nlocals ? Py_XNewRef(env->fv->locals[r->index]) : NULL;
        return 0;
    case RB_NULL:
        return 0;
    case RB_MEMO:
        *out = Py_XNewRef(env->memo[r->index]);
        return 0;
    case RB_TUPLE:
    case RB_ITER:
    case RB_LIST: {
        PyObject *c = r->kind == RB_LIST ? PyList_New(r->n) : PyTuple_New(r->n);
        if (c == NULL)
            return -1;
        for (int i = 0; i < r->n; i++) {
            PyObject *item;
            if (rebuild(&r->items[i], env, &item) < 0 || item == NULL) {
                if (!PyErr_Occurred())
                    PyErr_SetString(PyExc_SystemError, "dynscope: NULL item in a rebuilt container");
                Py_DECREF(c);
                return -1;
            }
            if (r->kind == RB_LIST)
                PyList_SET_ITEM(c, i, item);
            else
                PyTuple_SET_ITEM(c, i, item);
        }
        *out = c;
        return 0;
    }
    case RB_DICT: {
        PyObject *d = PyDict_New();
        for (int i = 0; d && i < r->n; i++) {
            PyObject *item;
            if (rebuild(&r->items[i], env, &item) < 0 || item == NULL
                || PyDict_SetItem(d, PyTuple_GET_ITEM(r->obj, i), item) < 0) {
                Py_XDECREF(item);
                Py_CLEAR(d);
                break;
            }
            Py_DECREF(item);
        }
        *out = d;
        return d ? 0 : -1;
    }
    case RB_SLICE: {
        PyObject *p[3] = {NULL, NULL, NULL};
        int rc = -1;
        for (int i = 0; i < 3; i++)
            if (rebuild(&r->items[i], env, &p[i]) < 0)
                goto out_slice;
        *out = PySlice_New(p[0], p[1], p[2]);
        rc = *out ? 0 : -1;
    out_slice:
        for (int i = 0; i < 3; i++)
            Py_XDECREF(p[i]);
        return rc;
    }
    case RB_TYPE_ATTR:
    case RB_ATTR: {
        PyObject *base;
        if (rebuild(&r->items[0], env, &base) < 0)
            return -1;
        if (base == NULL) {
            PyErr_SetString(PyExc_SystemError, "dynscope: method of NULL");
            return -1;
        }
        *out = PyObject_GetAttr(r->kind == RB_ATTR ? base : (PyObject *)Py_TYPE(base), r->obj);
        Py_DECREF(base);
        return *out ? 0 : -1;
    }
    }
    PyErr_SetString(PyExc_SystemError, "dynscope: bad rebuild kind");
    return -1;
}

/* Rebuild n values into a new array (owned, strong refs).  0 / -1. */
static int rebuild_array(const Rebuild *rs, int n, const RebuildEnv *env, int extra,
                         PyObject ***out)
{
    PyObject **a = PyMem_Calloc((size_t)(n + extra) + 1, sizeof(PyObject *));
    if (a == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (int i = 0; i < n; i++) {
        if (rebuild(&rs[i], env, &a[i]) < 0) {
            release_array(a, i);
            return -1;
        }
    }
    *out = a;
    return 0;
}

#define SMALL_ARGS 16

/* Call the compiled graph on its inputs.  New reference (a tuple or list of
   noutputs values) or NULL. */
static PyObject *run_graph(const Plan *p, const GuardSet *gs, const FrameView *fv,
                           PyObject **vals)
{
    PyObject *small[SMALL_ARGS] = {NULL};
    PyObject **args = p->ninputs <= SMALL_ARGS ? small
                    : PyMem_Malloc(sizeof(PyObject *) * (size_t)p->ninputs);
    if (args == NULL)
        return PyErr_NoMemory();
    PyObject *outs = NULL;
    for (int i = 0; i < p->ninputs; i++) {
        args[i] = input_value(gs, fv, vals, p->input_acc[i]);
        if (args[i] == NULL)
            goto out;
    }
    outs = PyObject_Vectorcall(p->compiled, args, (size_t)p->ninputs, NULL);
    if (outs != NULL && (!(PyTuple_Check(outs) || PyList_Check(outs))
                         || PySequence_Fast_GET_SIZE(outs) != p->noutputs)) {
        PyErr_Format(PyExc_TypeError,
                     "dynscope: the compiled graph returned %.100s, expected a "
                     "tuple of %d outputs", Py_TYPE(outs)->tp_name, p->noutputs);
        Py_CLEAR(outs);
    }
out:
    if (args != small)
        PyMem_Free(args);
    return outs;
}

/* The live state into out->locals / out->stack, with room for one more
   stack item.  0 / -1. */
static int rebuild_live(const LiveState *live, const RebuildEnv *env, PlanOutcome *out)
{
    if (rebuild_array(live->locals, live->nlocals, env, 0, &out->locals) < 0)
        return -1;
    out->nlocals = live->nlocals;
    if (rebuild_array(live->stack, live->nstack, env, 1, &out->stack) < 0)
        return -1;
    out->nstack = live->nstack;
    out->unspec = live->unspec;
    out->iters = live->iters;
    return 0;
}

/* The eager call of EXIT_CALL, built for the caller to make.  0 / -1. */
static int build_eager_call(const Plan *p, const RebuildEnv *env, PlanOutcome *out)
{
    if (rebuild(&p->callable, env, &out->callable) < 0)
        return -1;
    if (rebuild_array(p->args, p->nargs, env, 0, &out->args) < 0)
        return -1;
    out->nargs = p->nargs;
    out->kwnames = Py_XNewRef(p->kwnames);
    out->push_result = p->push_result;
    out->call_pending = true;
    return 0;
}

void plan_run(const Plan *p, const GuardSet *gs, const FrameView *fv,
              PyObject **vals, int *in_engine, PlanOutcome *out)
{
    memset(out, 0, sizeof(*out));
    out->kind = OUTCOME_ERROR;
    PyObject *outs = NULL;
    if (p->compiled != NULL) {
        (*in_engine)++;
        outs = run_graph(p, gs, fv, vals);
        (*in_engine)--;
        if (outs == NULL)
            return;
    }
    RebuildEnv env = {outs, NULL, gs, fv, vals};
    if (p->nmemo > 0) {
        env.memo = PyMem_Calloc((size_t)p->nmemo, sizeof(PyObject *));
        if (env.memo == NULL) {
            PyErr_NoMemory();
            Py_XDECREF(outs);
            return;
        }
        for (int i = 0; i < p->nmemo; i++) {
            if (rebuild(&p->memo[i], &env, &env.memo[i]) < 0) {
                release_array(env.memo, i);
                Py_XDECREF(outs);
                return;
            }
        }
    }
    switch (p->exit) {
    case EXIT_RETURN:
        if (rebuild(&p->result, &env, &out->value) == 0 && out->value != NULL)
            out->kind = OUTCOME_RETURN;
        break;
    case EXIT_CALL:
        if (rebuild_live(&p->live, &env, out) == 0 && build_eager_call(p, &env, out) == 0) {
            out->kind = OUTCOME_CONTINUE;
            out->offset = p->resume_offset;
        }
        break;
    case EXIT_BRANCH: {
        PyObject *cond = NULL;
        if (rebuild_live(&p->live, &env, out) < 0 || rebuild(&p->cond, &env, &cond) < 0)
            break;
        int truth = cond ? PyObject_IsTrue(cond) : -1;   /* user-visible, as eager */
        Py_XDECREF(cond);
        if (truth < 0)
            break;
        out->kind = OUTCOME_CONTINUE;
        out->offset = truth ? p->branch_true : p->branch_false;
        break;
    }
    case EXIT_DEOPT:
        if (rebuild_live(&p->live, &env, out) == 0) {
            out->kind = OUTCOME_CONTINUE;
            out->deopt = true;
            out->offset = p->resume_offset;
        }
        break;
    }
    Py_XDECREF(outs);
    release_array(env.memo, p->nmemo);
    if (out->kind == OUTCOME_ERROR) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        plan_outcome_clear(out);
        out->kind = OUTCOME_ERROR;
        PyErr_Restore(type, value, tb);
    }
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
    case RB_LOCAL:
        s = PyUnicode_FromFormat("<local %d>", r->index);
        break;
    case RB_MEMO:
        s = PyUnicode_FromFormat("<object %d>", r->index);
        break;
    case RB_NULL:
        s = PyUnicode_FromString("NULL");
        break;
    case RB_TYPE_ATTR:
    case RB_ATTR:
        if (render_rebuild(parts, &r->items[0], gs) < 0)
            return -1;
        s = PyUnicode_FromFormat(".%U", r->obj);
        break;
    case RB_ITER:
    case RB_TUPLE:
    case RB_LIST:
    case RB_DICT:
    case RB_SLICE: {
        const char *open = r->kind == RB_ITER ? "iter((" : r->kind == RB_TUPLE ? "(" : r->kind == RB_LIST ? "[" : r->kind == RB_DICT ? "{" : "slice(";
        const char *close = r->kind == RB_ITER ? "))" : r->kind == RB_TUPLE ? (r->n == 1 ? ",)" : ")") : r->kind == RB_LIST ? "]" : r->kind == RB_DICT ? "}" : ")";
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

/* Append a formatted str to parts.  0 / -1. */
static int append_fmt(PyObject *parts, const char *fmt, ...)
{
    va_list va;
    va_start(va, fmt);
    PyObject *s = PyUnicode_FromFormatV(fmt, va);
    va_end(va);
    int rc = s != NULL && PyList_Append(parts, s) == 0 ? 0 : -1;
    Py_XDECREF(s);
    return rc;
}

static int render_exit(PyObject *parts, const Plan *p, const GuardSet *gs)
{
    switch (p->exit) {
    case EXIT_RETURN:
        return append_fmt(parts, "return ") < 0 ? -1 : render_rebuild(parts, &p->result, gs);
    case EXIT_CALL: {
        if (append_fmt(parts, "%s", p->push_result ? "result = " : "") < 0
            || render_rebuild(parts, &p->callable, gs) < 0 || append_fmt(parts, "(") < 0)
            return -1;
        Py_ssize_t nkw = p->kwnames ? PyTuple_GET_SIZE(p->kwnames) : 0;
        for (int i = 0; i < p->nargs; i++) {
            if (i > 0 && append_fmt(parts, ", ") < 0)
                return -1;
            if (i >= p->nargs - nkw
                && append_fmt(parts, "%U=", PyTuple_GET_ITEM(p->kwnames, i - (p->nargs - nkw))) < 0)
                return -1;
            if (render_rebuild(parts, &p->args[i], gs) < 0)
                return -1;
        }
        return append_fmt(parts, ")    # eager: %S\nresume at offset %d (line %d)",
                          p->brk.reason ? p->brk.reason : Py_None, p->resume_offset * 2,
                          p->resume_line);
    }
    case EXIT_BRANCH:
        if (append_fmt(parts, "if ") < 0 || render_rebuild(parts, &p->cond, gs) < 0)
            return -1;
        return append_fmt(parts, ":    # eager truth test\n    resume at offset %d (line %d)\n"
                                 "else:\n    resume at offset %d (line %d)",
                          p->branch_true * 2, p->true_line, p->branch_false * 2, p->false_line);
    case EXIT_DEOPT:
        return append_fmt(parts, "continue in the interpreter at offset %d (line %d)    # %S",
                          p->resume_offset * 2, p->resume_line,
                          p->brk.reason ? p->brk.reason : Py_None);
    }
    return -1;
}

PyObject *plan_render(const Plan *p, const GuardSet *gs)
{
    PyObject *parts = PyList_New(0);
    if (parts == NULL)
        return NULL;
    if (p->compiled != NULL) {
        if (append_fmt(parts, "graph_out = graph(") < 0)
            goto fail;
        for (int i = 0; i < p->ninputs; i++) {
            PyObject *src = guardset_render_source(gs, p->input_acc[i]);
            int rc = src ? append_fmt(parts, "%s%U", i ? ", " : "", src) : -1;
            Py_XDECREF(src);
            if (rc < 0)
                goto fail;
        }
        if (append_fmt(parts, ")    # %d op%s\n", p->nops, p->nops == 1 ? "" : "s") < 0)
            goto fail;
    }
    if (render_exit(parts, p, gs) < 0)
        goto fail;
    PyObject *empty = PyUnicode_FromString("");
    PyObject *out = empty ? PyUnicode_Join(empty, parts) : NULL;
    Py_XDECREF(empty);
    Py_DECREF(parts);
    return out;
fail:
    Py_DECREF(parts);
    return NULL;
}
