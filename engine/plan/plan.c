/*
 * plan.c -- what a cache entry runs instead of the bytecode (DESIGN.md 3.6):
 * fetch the graph's inputs by accessor, call the compiled graph once, and
 * rebuild the frame's return value from graph outputs, inputs passed
 * through and constants.  Plans render as pseudo-Python in plan_render.c.
 *
 * Invariant: plan_run has no effect of its own besides calling the compiled
 * graph; an exception from the graph propagates unchanged.
 */
#include "plan.h"

#include <stdarg.h>
#include <string.h>

void rebuild_clear(Rebuild *r)
{
    int n = r->kind == RB_LIST_ITER ? r->n + 1 : r->n;   /* its list follows the items */
    for (int i = 0; r->items != NULL && i < n; i++)      /* NULL: their allocation failed */
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
    rebuild_array_clear(p->effects, p->neffects);
    rebuild_clear(&p->result);
    rebuild_array_clear(p->live.locals, p->live.nlocals);
    rebuild_array_clear(p->live.stack, p->live.nstack);
    rebuild_clear(&p->callable);
    rebuild_array_clear(p->args, p->nargs);
    Py_CLEAR(p->kwnames);
    rebuild_clear(&p->cond);
    Py_CLEAR(p->brk.reason);
    Py_CLEAR(p->brk.user_stack);
    Py_CLEAR(p->hatches);
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
    Py_CLEAR(o->iter_lists);
    release_array(o->args, o->nargs);
    release_array(o->locals, o->nlocals);
    release_array(o->stack, o->nstack);
    memset(o, 0, sizeof(*o));
}

void plan_outcome_call_done(PlanOutcome *o)
{
    Py_CLEAR(o->callable);
    Py_CLEAR(o->kwnames);
    release_array(o->args, o->nargs);
    o->args = NULL;
    o->nargs = 0;
}

/* The value of accessor acc, from vals or computed now.  Borrowed or NULL
   with an exception set. */
static PyObject *input_value(const GuardSet *gs, const FrameView *fv, PyObject **vals, int acc)
{
    const Accessor *a = &gs->acc[acc];
    if (a->kind == ACC_LOCAL && vals[acc] == NULL)      /* the common input: a fast local */
        return a->index < fv->nlocals && fv->locals[a->index] != NULL
               ? fv->locals[a->index]
               : (PyErr_SetString(PyExc_RuntimeError, "dynscope: a plan input is unreachable"),
                  NULL);
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
    PyObject **iter_lists;    /* the outcome's iter_lists (made on first use) */
} RebuildEnv;

static int rebuild(const Rebuild *r, const RebuildEnv *env, PyObject **out);

/* iter(seq) advanced past its first `skip` items.  New reference or NULL. */
static PyObject *live_iterator(PyObject *seq, Py_ssize_t skip)
{
    PyObject *it = PyObject_GetIter(seq);
    for (Py_ssize_t i = 0; it != NULL && i < skip; i++) {
        PyObject *item = PyIter_Next(it);
        if (item == NULL) {
            if (PyErr_Occurred())
                Py_CLEAR(it);
            break;
        }
        Py_DECREF(item);
    }
    return it;
}

/* The items of an RB_ITER / RB_LIST_ITER as a tuple, and (RB_LIST_ITER)
   the list they come from.  0 / -1. */
static int rebuild_iter_parts(const Rebuild *r, const RebuildEnv *env, PyObject **tuple,
                              PyObject **list)
{
    *list = NULL;
    if ((*tuple = PyTuple_New(r->n)) == NULL)
        return -1;
    for (int i = 0; i < r->n; i++) {
        PyObject *item;
        if (rebuild(&r->items[i], env, &item) < 0 || item == NULL)
            goto fail;
        PyTuple_SET_ITEM(*tuple, i, item);
    }
    if (r->kind == RB_LIST_ITER && (rebuild(&r->items[r->n], env, list) < 0 || *list == NULL))
        goto fail;
    return 0;
fail:
    if (!PyErr_Occurred())
        PyErr_SetString(PyExc_SystemError, "dynscope: NULL item in a loop iterator");
    Py_CLEAR(*tuple);
    return -1;
}

/* Note in the outcome that the loop iterator carried as `tuple` reads
   lists: note is (how, count, ((list or None, start, items), ...)) -- how
   -1 for a plain iterator, 0 enumerate(), 1 zip().  Steals note. */
static int note_iterator(const RebuildEnv *env, PyObject *tuple, PyObject *note)
{
    if (note == NULL)
        return -1;
    PyObject *key = PyLong_FromVoidPtr(tuple);
    if (key == NULL || (*env->iter_lists == NULL && (*env->iter_lists = PyDict_New()) == NULL)
        || PyDict_SetItem(*env->iter_lists, key, note) < 0) {
        Py_XDECREF(key);
        Py_DECREF(note);
        return -1;
    }
    Py_DECREF(key);
    Py_DECREF(note);
    return 0;
}

/* RB_LIST_ITER: the tuple of the remaining items, noted (see above). */
static int rebuild_list_iter(const Rebuild *r, const RebuildEnv *env, PyObject **out)
{
    PyObject *tuple, *list;
    if (rebuild_iter_parts(r, env, &tuple, &list) < 0)
        return -1;
    int rc = note_iterator(env, tuple, Py_BuildValue("(iO((OiO)))", -1, Py_None, list, r->index, tuple));
    Py_DECREF(list);
    if (rc < 0) {
        Py_DECREF(tuple);
        return -1;
    }
    *out = tuple;
    return 0;
}

/* RB_SLOT_ITER: the tuple of the remaining items; when the iterator came
   in with a note, the same note moved on past the items taken since. */
static int rebuild_slot_iter(const Rebuild *r, const RebuildEnv *env, PyObject **out)
{
    PyObject *tuple, *dummy;
    if (rebuild_iter_parts(r, env, &tuple, &dummy) < 0)
        return -1;
    const FrameView *fv = env->fv;
    PyObject *incoming = r->index < fv->nlocals ? fv->locals[r->index]
                         : r->index - fv->nlocals < fv->nstack ? fv->stack[r->index - fv->nlocals] : NULL;
    PyObject *note = NULL;
    if (fv->iter_lists != NULL && incoming != NULL) {
        PyObject *key = PyLong_FromVoidPtr(incoming);
        note = key ? PyDict_GetItemWithError(fv->iter_lists, key) : NULL;
        Py_XDECREF(key);
        if (note == NULL && PyErr_Occurred()) {
            Py_DECREF(tuple);
            return -1;
        }
    }
    if (note != NULL) {
        Py_ssize_t taken = PyLong_AsSsize_t(r->obj);
        PyObject *count = PyTuple_GET_ITEM(note, 1), *sources = PyTuple_GET_ITEM(note, 2);
        PyObject *moved = PyTuple_New(PyTuple_GET_SIZE(sources));
        for (Py_ssize_t k = 0; moved != NULL && k < PyTuple_GET_SIZE(sources); k++) {
            PyObject *src = PyTuple_GET_ITEM(sources, k), *items = PyTuple_GET_ITEM(src, 2);
            PyObject *rest = PyTuple_GetSlice(items, taken, PY_SSIZE_T_MAX);
            PyObject *m = rest ? Py_BuildValue("(OnN)", PyTuple_GET_ITEM(src, 0),
                                              PyLong_AsSsize_t(PyTuple_GET_ITEM(src, 1)) + taken, rest) : NULL;
            if (m == NULL)
                Py_CLEAR(moved);
            else
                PyTuple_SET_ITEM(moved, k, m);
        }
        PyObject *c = moved == NULL ? NULL : count == Py_None ? Py_NewRef(Py_None)
                      : PyLong_FromSsize_t(PyLong_AsSsize_t(count) + taken);
        if (c == NULL || note_iterator(env, tuple, Py_BuildValue("(ONN)", PyTuple_GET_ITEM(note, 0), c, moved)) < 0) {
            if (c == NULL)
                Py_XDECREF(moved);
            Py_DECREF(tuple);
            return -1;
        }
    }
    *out = tuple;
    return 0;
}

/* RB_ZIP_LISTS: enumerate() or zip() over lists (and fixed items) -- the
   tuple of its remaining items items[0], noted with each source
   items[1..n) (RB_LIST_ITER or RB_ITER). */
static int rebuild_zip_lists(const Rebuild *r, const RebuildEnv *env, PyObject **out)
{
    PyObject *tuple, *sources = PyTuple_New(r->n - 1);
    if (sources == NULL)
        return -1;
    for (int k = 1; k < r->n; k++) {
        PyObject *items, *list;
        if (rebuild_iter_parts(&r->items[k], env, &items, &list) < 0) {
            Py_DECREF(sources);
            return -1;
        }
        PyObject *src = Py_BuildValue("(OiO)", list ? list : Py_None, r->items[k].index, items);
        Py_XDECREF(list);
        Py_DECREF(items);
        if (src == NULL) {
            Py_DECREF(sources);
            return -1;
        }
        PyTuple_SET_ITEM(sources, k - 1, src);
    }
    PyObject *dummy;
    if (rebuild_iter_parts(&r->items[0], env, &tuple, &dummy) < 0) {
        Py_DECREF(sources);
        return -1;
    }
    if (note_iterator(env, tuple, Py_BuildValue("(iON)", r->index, r->obj ? r->obj : Py_None, sources)) < 0) {
        Py_DECREF(tuple);
        return -1;
    }
    *out = tuple;
    return 0;
}

/* RB_ROWS, RB_LIVE_ITER, RB_DICT_VIEW: one value from items[0]. */
static int rebuild_from_one(const Rebuild *r, const RebuildEnv *env, PyObject **out)
{
    PyObject *base, *from, *rows;
    if (rebuild(&r->items[0], env, &base) < 0)
        return -1;
    switch (r->kind) {
    case RB_ROWS:           /* base[index:] */
        from = PyLong_FromLong(r->index);
        rows = from ? PySlice_New(from, NULL, NULL) : NULL;
        *out = rows ? PyObject_GetItem(base, rows) : NULL;
        Py_XDECREF(rows);
        Py_XDECREF(from);
        break;
    case RB_LIVE_ITER:
        *out = live_iterator(base, r->index);
        break;
    default:                /* RB_DICT_VIEW */
        *out = PyObject_CallMethodNoArgs(base, r->obj);
        break;
    }
    Py_DECREF(base);
    return *out ? 0 : -1;
}

/* RB_DERIVED: a real enumerate or zip object over real iterators. */
static int rebuild_derived(const Rebuild *r, const RebuildEnv *env, PyObject **out)
{
    PyObject *its = PyTuple_New(r->n);
    if (its == NULL)
        return -1;
    for (int i = 0; i < r->n; i++) {
        PyObject *src, *it = NULL;
        if (rebuild(&r->items[i], env, &src) < 0 || src == NULL
            || (it = PyObject_GetIter(src)) == NULL) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_SystemError, "dynscope: NULL source of a loop iterator");
            Py_XDECREF(src);
            Py_DECREF(its);
            return -1;
        }
        Py_DECREF(src);
        PyTuple_SET_ITEM(its, i, it);
    }
    if (r->index == 0)
        *out = PyObject_CallFunctionObjArgs((PyObject *)&PyEnum_Type, PyTuple_GET_ITEM(its, 0), r->obj, NULL);
    else
        *out = PyObject_CallObject((PyObject *)&PyZip_Type, its);
    Py_DECREF(its);
    return *out ? 0 : -1;
}

/* Build the value r describes into *out (new reference; NULL is a valid
   value for RB_NULL and unbound RB_LOCAL).  0 / -1 with an exception. */
/* RB_NEWOBJ: object.__new__(cls) -- dict.__new__(cls) for a dict
   subclass, its r->index items then stored by the builtin's own store
   (PyDict_SetItem, PyODict_SetItem: never the class's __setitem__) --
   then its attributes set in the order the traced code set them (the
   class has no data descriptor of those names: guarded when the entry was
   made).  0 / -1. */
static int rebuild_new_object(const Rebuild *r, const RebuildEnv *env, PyObject **out)
{
    PyTypeObject *cls = (PyTypeObject *)PyTuple_GET_ITEM(r->obj, 0);
    bool mapping = PyType_IsSubtype(cls, &PyDict_Type);
    bool ordered = PyType_IsSubtype(cls, &PyODict_Type);
    int nattrs = r->n - r->index;
    PyObject *empty = PyTuple_New(0);
    PyObject *o = empty == NULL ? NULL
                  : mapping ? PyDict_Type.tp_new(cls, empty, NULL)
                  : PyBaseObject_Type.tp_new(cls, empty, NULL);
    Py_XDECREF(empty);
    for (int i = nattrs; o != NULL && i < r->n; i++) {
        PyObject *v = NULL, *key = PyTuple_GET_ITEM(r->obj, i + 1);
        if (rebuild(&r->items[i], env, &v) < 0 || v == NULL
            || (ordered ? PyODict_SetItem(o, key, v) : PyDict_SetItem(o, key, v)) < 0)
            Py_CLEAR(o);
        Py_XDECREF(v);
    }
    for (int i = 0; o != NULL && i < nattrs; i++) {
        PyObject *v = NULL;
        if (rebuild(&r->items[i], env, &v) < 0 || v == NULL
            || PyObject_GenericSetAttr(o, PyTuple_GET_ITEM(r->obj, i + 1), v) < 0)
            Py_CLEAR(o);
        Py_XDECREF(v);
    }
    *out = o;
    return o ? 0 : -1;
}

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
        if (r->kind == RB_TUPLE && r->obj != NULL) {
            /* a named tuple (a struct sequence): its type made from the items */
            *out = PyObject_CallOneArg(r->obj, c);
            Py_DECREF(c);
            return *out ? 0 : -1;
        }
        *out = c;
        return 0;
    }
    case RB_SET: {
        PyObject *c = PySet_New(NULL);
        for (int i = 0; c != NULL && i < r->n; i++) {
            PyObject *item = NULL;
            if (rebuild(&r->items[i], env, &item) < 0 || item == NULL || PySet_Add(c, item) < 0)
                Py_CLEAR(c);
            Py_XDECREF(item);
        }
        *out = c;
        return c ? 0 : -1;
    }
    case RB_ROWS:
    case RB_LIVE_ITER:
    case RB_DICT_VIEW:
        return rebuild_from_one(r, env, out);
    case RB_LIST_ITER:
        return rebuild_list_iter(r, env, out);
    case RB_ZIP_LISTS:
        return rebuild_zip_lists(r, env, out);
    case RB_SLOT_ITER:
        return rebuild_slot_iter(r, env, out);
    case RB_DERIVED:
        return rebuild_derived(r, env, out);
    case RB_CELL: {
        PyObject *content = NULL;
        if (r->n > 0 && rebuild(&r->items[0], env, &content) < 0)
            return -1;
        *out = PyCell_New(content);
        Py_XDECREF(content);
        return *out ? 0 : -1;
    }
    case RB_NEWOBJ:
        return rebuild_new_object(r, env, out);
    case RB_SETATTR:
    case RB_SETITEM:
    case RB_SETMEMBER:
        PyErr_SetString(PyExc_SystemError, "dynscope: a plan's effect used as a value");
        return -1;
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
    if (plan_graph_times.on)
        plan_graph_times.start = engine_ticks();
    outs = graph_is_forward(p->compiled) ? graph_forward_unchecked(p->compiled, args, p->ninputs)
                                         : PyObject_Vectorcall(p->compiled, args, (size_t)p->ninputs, NULL);
    if (plan_graph_times.on) {
        plan_graph_times.end = engine_ticks();
        plan_graph_times.total += plan_graph_times.end - plan_graph_times.start;
    }
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

/* Whether p returns one output of an eager-backend graph and nothing else:
   then the graph hands that output over directly, without a tuple of
   outputs or a rebuild (the common hit, kept short). */
static bool returns_one_output(const Plan *p)
{
    return p->exit == EXIT_RETURN && p->nmemo == 0 && p->neffects == 0 && p->result.kind == RB_OUTPUT
           && p->compiled != NULL && graph_is_forward(p->compiled);
}

/* plan_run for returns_one_output(p). */
static void run_returning_output(const Plan *p, const GuardSet *gs, const FrameView *fv,
                                 PyObject **vals, int *in_engine, PlanOutcome *out)
{
    PyObject *small[SMALL_ARGS];
    PyObject **args = p->ninputs <= SMALL_ARGS ? small
                    : PyMem_Malloc(sizeof(PyObject *) * (size_t)p->ninputs);
    if (args == NULL) {
        PyErr_NoMemory();
        return;
    }
    int i = 0;
    while (i < p->ninputs && (args[i] = input_value(gs, fv, vals, p->input_acc[i])) != NULL)
        i++;
    if (i == p->ninputs) {
        (*in_engine)++;
        if (plan_graph_times.on)
            plan_graph_times.start = engine_ticks();
        out->value = graph_forward_one(p->compiled, args, p->ninputs, p->result.index);
        if (plan_graph_times.on) {
            plan_graph_times.end = engine_ticks();
            plan_graph_times.total += plan_graph_times.end - plan_graph_times.start;
        }
        (*in_engine)--;
        if (out->value != NULL)
            out->kind = OUTCOME_RETURN;
    }
    if (args != small)
        PyMem_Free(args);
}

/* s.add(obj) / s.discard(obj) of RB_SETMEMBER r on target s.  0 / -1. */
static int set_member_effect(PyObject *target, const Rebuild *r)
{
    if (!PySet_Check(target)) {
        PyErr_SetString(PyExc_TypeError, "dynscope: a set's member written into a non-set");
        return -1;
    }
    if (r->index == 1)
        return PySet_Add(target, r->obj);
    return PySet_Discard(target, r->obj) < 0 ? -1 : 0;
}

/* The plan's effects: each attribute or item write (or del: no value),
   in order, through the class or by the builtin's own store (RB_SETATTR),
   and each set member added or discarded (RB_SETMEMBER).  0 / -1. */
static int run_effects(const Plan *p, const RebuildEnv *env)
{
    for (int i = 0; i < p->neffects; i++) {
        const Rebuild *r = &p->effects[i];
        PyObject *target = NULL, *value = NULL;
        int rc = -1;
        if (rebuild(&r->items[0], env, &target) == 0 && target != NULL
            && (r->n < 2 || (rebuild(&r->items[1], env, &value) == 0 && value != NULL)))
            rc = r->kind == RB_SETMEMBER ? set_member_effect(target, r)
                 : r->kind == RB_SETITEM && value == NULL
                 ? (r->index == 0 ? PyObject_DelItem(target, r->obj)
                    : PyODict_Check(target) ? PyODict_DelItem(target, r->obj)
                    : PyDict_DelItem(target, r->obj))
                 : r->kind == RB_SETITEM
                 ? (r->index == 0 ? PyObject_SetItem(target, r->obj, value)
                    : PyODict_Check(target) ? PyODict_SetItem(target, r->obj, value)
                    : PyDict_SetItem(target, r->obj, value))
                 : r->index == 0 ? PyObject_SetAttr(target, r->obj, value)
                 : PyObject_GenericSetAttr(target, r->obj, value);
        Py_XDECREF(target);
        Py_XDECREF(value);
        if (rc < 0)
            return -1;
    }
    return 0;
}

PlanGraphTimes plan_graph_times;

void plan_run(const Plan *p, const GuardSet *gs, const FrameView *fv,
              PyObject **vals, int *in_engine, PlanOutcome *out)
{
    memset(out, 0, sizeof(*out));
    out->kind = OUTCOME_ERROR;
    out->ran_graph = p->compiled != NULL;
    if (returns_one_output(p)) {
        run_returning_output(p, gs, fv, vals, in_engine, out);
        return;
    }
    PyObject *outs = NULL;
    if (p->compiled != NULL) {
        (*in_engine)++;
        outs = run_graph(p, gs, fv, vals);
        (*in_engine)--;
        if (outs == NULL)
            return;
    }
    RebuildEnv env = {outs, NULL, gs, fv, vals, &out->iter_lists};
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
    if (run_effects(p, &env) < 0) {
        release_array(env.memo, p->nmemo);
        Py_XDECREF(outs);
        return;
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

/* Is list[start:] still exactly the items of `tuple` (the same objects)? */
static bool list_unchanged(PyObject *list, Py_ssize_t start, PyObject *tuple)
{
    Py_ssize_t n = PyTuple_GET_SIZE(tuple);
    if (!PyList_Check(list) || PyList_GET_SIZE(list) != start + n)
        return false;
    for (Py_ssize_t i = 0; i < n; i++)
        if (PyList_GET_ITEM(list, start + i) != PyTuple_GET_ITEM(tuple, i))
            return false;
    return true;
}

/* The real iterator a note (see note_iterator) describes.  New or NULL. */
static PyObject *noted_iterator(PyObject *note)
{
    int how = (int)PyLong_AsLong(PyTuple_GET_ITEM(note, 0));
    PyObject *count = PyTuple_GET_ITEM(note, 1), *sources = PyTuple_GET_ITEM(note, 2);
    PyObject *its = PyTuple_New(PyTuple_GET_SIZE(sources));
    for (Py_ssize_t k = 0; its != NULL && k < PyTuple_GET_SIZE(sources); k++) {
        PyObject *src = PyTuple_GET_ITEM(sources, k), *list = PyTuple_GET_ITEM(src, 0);
        PyObject *it = list != Py_None
                       ? live_iterator(list, PyLong_AsSsize_t(PyTuple_GET_ITEM(src, 1)))
                       : PyObject_GetIter(PyTuple_GET_ITEM(src, 2));
        if (it == NULL)
            Py_CLEAR(its);
        else
            PyTuple_SET_ITEM(its, k, it);
    }
    if (its == NULL)
        return NULL;
    PyObject *r = how < 0 ? Py_NewRef(PyTuple_GET_ITEM(its, 0))
                  : how == 0 ? PyObject_CallFunctionObjArgs((PyObject *)&PyEnum_Type, PyTuple_GET_ITEM(its, 0), count, NULL)
                  : PyObject_CallObject((PyObject *)&PyZip_Type, its);
    Py_DECREF(its);
    return r;
}

/* Has an eager step changed a list the noted iterator reads? */
static bool noted_lists_changed(PyObject *note)
{
    PyObject *sources = PyTuple_GET_ITEM(note, 2);
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(sources); k++) {
        PyObject *src = PyTuple_GET_ITEM(sources, k), *list = PyTuple_GET_ITEM(src, 0);
        if (list != Py_None && !list_unchanged(list, PyLong_AsSsize_t(PyTuple_GET_ITEM(src, 1)),
                                               PyTuple_GET_ITEM(src, 2)))
            return true;
    }
    return false;
}

int plan_live_iterators(PlanOutcome *o, bool every_one)
{
    if (o->iter_lists == NULL && !every_one)
        return 0;
    int nslots = o->nlocals + o->nstack;
    PyObject *made = PyDict_New();   /* id(value) -> its live iterator: shared slots stay shared */
    if (made == NULL)
        return -1;
    for (int i = 0; i < nslots && i < LIVE_MAX_SLOTS; i++) {
        if (!(o->iters & ((uint64_t)1 << i)))
            continue;
        PyObject **slot = i < o->nlocals ? &o->locals[i] : &o->stack[i - o->nlocals];
        if (*slot == NULL || PyIter_Check(*slot)
            || (!every_one && !PyTuple_CheckExact(*slot)))
            continue;
        PyObject *key = PyLong_FromVoidPtr(*slot);
        PyObject *note = key && o->iter_lists ? PyDict_GetItemWithError(o->iter_lists, key) : NULL;
        if (key == NULL || PyErr_Occurred()) {
            Py_XDECREF(key);
            goto fail;
        }
        if (!every_one && (note == NULL || !noted_lists_changed(note))) {
            Py_DECREF(key);
            continue;
        }
        /* a noted tuple: an iterator over its list; any other (the items
           left, the rows of a tensor): iter() of it */
        PyObject *it = PyDict_GetItemWithError(made, key);
        if (it != NULL)
            Py_INCREF(it);
        else if (PyErr_Occurred()
                 || (it = note ? noted_iterator(note) : PyObject_GetIter(*slot)) == NULL
                 || PyDict_SetItem(made, key, it) < 0) {
            Py_XDECREF(it);
            Py_DECREF(key);
            goto fail;
        }
        Py_DECREF(key);
        Py_SETREF(*slot, it);
    }
    Py_DECREF(made);
    return 0;
fail:
    Py_DECREF(made);
    return -1;
}
