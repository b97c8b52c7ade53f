/*
 * plan_render.c -- plans as readable pseudo-Python, for explain, dyntop and
 * cache_entries() (DESIGN.md 3.6; contract: plan.h).  Runs on inspection
 * only, never on a cache hit.
 */
#include "plan.h"

#include <stdarg.h>
#include <string.h>

static int append_str(PyObject *parts, const char *text)
{
    PyObject *s = PyUnicode_FromString(text);
    int rc = s ? PyList_Append(parts, s) : -1;
    Py_XDECREF(s);
    return rc;
}

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
    case RB_DICT_VIEW:
        if (render_rebuild(parts, &r->items[0], gs) < 0)
            return -1;
        s = PyUnicode_FromFormat(r->kind == RB_DICT_VIEW ? ".%U()" : ".%U", r->obj);
        break;
    case RB_ROWS:
    case RB_LIVE_ITER:
        if (append_str(parts, "iter(") < 0 || render_rebuild(parts, &r->items[0], gs) < 0)
            return -1;
        s = r->kind == RB_ROWS ? PyUnicode_FromFormat("[%d:])", r->index)
                               : PyUnicode_FromFormat(") after %d items", r->index);
        break;
    case RB_SETATTR:
    case RB_SETITEM:
    case RB_SETMEMBER:
        s = PyUnicode_FromString("<effect>");
        break;
    case RB_NEWOBJ:
        if (append_str(parts, "new ") < 0)
            return -1;
        s = PyUnicode_FromFormat("%s(", ((PyTypeObject *)PyTuple_GET_ITEM(r->obj, 0))->tp_name);
        if (s == NULL || PyList_Append(parts, s) < 0)
            goto fail;
        Py_CLEAR(s);
        for (int i = 0; i < r->n; i++) {
            bool key = i >= r->n - r->index;            /* an item of a dict subclass */
            s = key ? PyUnicode_FromFormat(i ? ", [%R]=" : "[%R]=", PyTuple_GET_ITEM(r->obj, i + 1))
                    : PyUnicode_FromFormat(i ? ", %U=" : "%U=", PyTuple_GET_ITEM(r->obj, i + 1));
            if (s == NULL || PyList_Append(parts, s) < 0)
                goto fail;
            Py_CLEAR(s);
            if (render_rebuild(parts, &r->items[i], gs) < 0)
                return -1;
        }
        s = PyUnicode_FromString(")");
        break;
    case RB_CELL:
        if (append_str(parts, "cell(") < 0 || (r->n > 0 && render_rebuild(parts, &r->items[0], gs) < 0))
            return -1;
        s = PyUnicode_FromString(")");
        break;
    case RB_DERIVED:
        if (append_str(parts, r->index == 0 ? "enumerate(" : "zip(") < 0)
            return -1;
        for (int i = 0; i < r->n; i++)
            if ((i > 0 && append_str(parts, ", ") < 0) || render_rebuild(parts, &r->items[i], gs) < 0)
                return -1;
        s = r->index == 0 ? PyUnicode_FromFormat(", %R)", r->obj) : PyUnicode_FromString(")");
        break;
    case RB_ZIP_LISTS:
        return render_rebuild(parts, &r->items[0], gs);
    case RB_SLOT_ITER:
    case RB_LIST_ITER:
    case RB_ITER:
    case RB_TUPLE:
    case RB_LIST:
    case RB_DICT:
    case RB_SET:
    case RB_SLICE: {
        bool iter = r->kind == RB_ITER || r->kind == RB_LIST_ITER || r->kind == RB_SLOT_ITER;
        const char *open = iter ? "iter((" : r->kind == RB_TUPLE ? "(" : r->kind == RB_LIST ? "[" : r->kind == RB_DICT ? "{" : r->kind == RB_SET ? "set([" : "slice(";
        const char *close = iter ? "))" : r->kind == RB_TUPLE ? (r->n == 1 ? ",)" : ")") : r->kind == RB_LIST ? "]" : r->kind == RB_DICT ? "}" : r->kind == RB_SET ? "])" : ")";
        bool named = r->kind == RB_TUPLE && r->obj != NULL;     /* a struct sequence */
        s = named ? PyUnicode_FromFormat("%s((", ((PyTypeObject *)r->obj)->tp_name)
                  : PyUnicode_FromString(open);
        if (s == NULL || PyList_Append(parts, s) < 0)
            goto fail;
        Py_CLEAR(s);
        if (named)
            close = r->n == 1 ? ",))" : "))";
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
    for (Py_ssize_t i = 0; p->hatches != NULL && i < PyList_GET_SIZE(p->hatches); i++)
        if (append_fmt(parts, "# %U\n", PyList_GET_ITEM(p->hatches, i)) < 0)
            goto fail;
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
    for (int i = 0; i < p->neffects; i++) {
        const Rebuild *r = &p->effects[i];
        if (r->index == 1) {
            /* the builtin's store: object.__setattr__(o, 'name', v) */
            if (append_fmt(parts, "%s(", r->kind == RB_SETITEM ? "dict.__setitem__"
                                         : "object.__setattr__") < 0
                || render_rebuild(parts, &r->items[0], gs) < 0
                || append_fmt(parts, ", %R, ", r->obj) < 0
                || render_rebuild(parts, &r->items[1], gs) < 0
                || append_fmt(parts, ")    # a write the program sees, by the builtin's own store\n") < 0)
                goto fail;
            continue;
        }
        if (r->kind == RB_SETMEMBER) {
            if (render_rebuild(parts, &r->items[0], gs) < 0
                || append_fmt(parts, ".%s(%R)    # a write the program sees\n",
                              r->index == 1 ? "add" : "discard", r->obj) < 0)
                goto fail;
            continue;
        }
        if (append_fmt(parts, "%s", r->n < 2 ? "del " : "") < 0 || render_rebuild(parts, &r->items[0], gs) < 0
            || (r->kind == RB_SETITEM ? append_fmt(parts, "[%R]%s", r->obj, r->n < 2 ? "" : " = ")
                : append_fmt(parts, ".%U%s", r->obj, r->n < 2 ? "" : " = ")) < 0
            || (r->n >= 2 && render_rebuild(parts, &r->items[1], gs) < 0)
            || append_fmt(parts, "    # a write the program sees\n") < 0)
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
