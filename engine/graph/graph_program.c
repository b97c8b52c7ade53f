/*
 * graph_program.c -- the C interpreter behind GraphModule.forward: a
 * finished graph compiled into a flat Program (graph_int.h), and running it.
 * It is on the cache-hit path: running never touches Node objects unless an
 * argument nests nodes inside a container.
 *
 * Invariants:
 *   - A Program is compiled from a finished graph once and never changes
 *     until program_clear; `ready` says whether it may run.
 *   - A run releases every intermediate value it made, on success and on
 *     failure; its inputs are borrowed, never kept.  A value dies right
 *     after its last reader has run.
 *
 * Every node but the output has a value slot: slot i holds the value of node
 * i.  Slots [0, ninputs) are the placeholders and borrow forward()'s
 * arguments; the others hold strong references from their instruction until
 * their last reader has run (frees lists), or until the output is built.
 * Each call node becomes one Instr whose args are slot numbers or constants,
 * so the common case fills a stack array of borrowed pointers and calls
 * PyObject_Vectorcall.  An arg that nests nodes (or a list / dict, which must
 * be fresh on every call) is ARG_NESTED and rebuilt by graph_arg_map per call.
 */
#include "graph_int.h"

#include <string.h>

/* Is fn a function of the operator module (a C function without keywords)?
   Those nodes stand for the bytecode's own operators (x + y is
   operator.add), which the interpreter runs without a C call. */
static bool
is_operator_function(PyObject *fn)
{
    if (!PyCFunction_CheckExact(fn)
        || !(PyCFunction_GET_FLAGS(fn) & (METH_FASTCALL | METH_O))
        || (PyCFunction_GET_FLAGS(fn) & (METH_KEYWORDS | METH_VARARGS)))
        return false;
    PyObject *self = PyCFunction_GET_SELF(fn);   /* the module */
    return self != NULL && PyModule_Check(self)
           && strcmp(PyModule_GetName(self) ? PyModule_GetName(self) : "", "_operator") == 0;
}

/* Call an operator function as the interpreter runs the operator: without
   the recursion check of a C call, so that RecursionError trips where it
   would eagerly (at a frame's entry) and says what it would. */
static PyObject *
call_operator(PyObject *fn, PyObject *const *args, Py_ssize_t nargs)
{
    PyCFunction meth = PyCFunction_GET_FUNCTION(fn);
    PyObject *self = PyCFunction_GET_SELF(fn);
    if (PyCFunction_GET_FLAGS(fn) & METH_O) {
        if (nargs != 1)
            return PyObject_Vectorcall(fn, args, (size_t)nargs, NULL);   /* its own error */
        return meth(self, args[0]);
    }
    return ((_PyCFunctionFast)(void (*)(void))meth)(self, args, nargs);
}


static int
visit_any(NodeObject *node, void *ctx)
{
    (void)node;
    (void)ctx;
    return 1;
}

/* Whether `arg` must be rebuilt on every run: it nests a node, a list or a
   dict (mutable containers are never shared between calls). */
static bool
arg_is_dynamic(PyObject *arg)
{
    if (IS_NODE(arg) || PyList_CheckExact(arg) || PyDict_CheckExact(arg))
        return true;
    if (PyTuple_CheckExact(arg)) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(arg); i++)
            if (arg_is_dynamic(PyTuple_GET_ITEM(arg, i)))
                return true;
        return false;
    }
    if (PySlice_Check(arg))
        return graph_arg_walk(arg, visit_any, NULL) != 0;
    return false;
}

/* Arguments and values small enough for the C stack. */
enum { SMALL_ARGS = 8, SMALL_SLOTS = 32 };
_Static_assert(INPLACE_MAX_ARGS < SMALL_ARGS, "a reusing call adds out= on the stack");

/* ------------------------------------------------------------------ */
/* Compiling.                                                          */

static int
visit_last_use(NodeObject *node, void *ctx)
{
    int *last_use = ((int **)ctx)[0];
    int user = *((int **)ctx)[1];

    last_use[node->index] = user;
    return 0;
}

/* Fill `a` for `obj`, an arg read by instruction `user` (ninstr for the
   output): mark the slots it reads in last_use.  Cannot fail. */
static void
arg_compile(Arg *a, PyObject *obj, int user, int *last_use)
{
    if (IS_NODE(obj)) {
        a->kind = ARG_SLOT;
        a->slot = ((NodeObject *)obj)->index;
        a->obj = NULL;
        last_use[a->slot] = user;
        return;
    }
    a->kind = arg_is_dynamic(obj) ? ARG_NESTED : ARG_CONST;
    a->obj = Py_NewRef(obj);
    if (a->kind == ARG_NESTED) {
        int *ctx[2] = {last_use, &user};
        graph_arg_walk(obj, visit_last_use, ctx);
    }
}

/* See graph_int.h. */
void
program_clear(Program *p)
{
    Py_ssize_t nargs_total = 0;

    for (int i = 0; i < p->ninstr && p->instr != NULL; i++) {
        inplace_clear(&p->instr[i].inplace, p->instr[i].nargs);
        Py_CLEAR(p->instr[i].target);
        Py_CLEAR(p->instr[i].reduce);
        Py_CLEAR(p->instr[i].undo);
        Py_CLEAR(p->instr[i].kwnames);
        Py_CLEAR(p->instr[i].name);
        nargs_total += p->instr[i].nargs + p->instr[i].nkw;
    }
    nargs_total += p->nout;
    for (Py_ssize_t i = 0; i < nargs_total && p->args != NULL; i++)
        Py_CLEAR(p->args[i].obj);
    blocks_clear(p);
    PyMem_Free(p->instr);
    PyMem_Free(p->args);
    PyMem_Free(p->frees);
    PyMem_Free(p->pool_want);
    memset(p, 0, sizeof(*p));
}

/* See graph_int.h. */
int
program_traverse(Program *p, visitproc visit, void *arg)
{
    Py_ssize_t nargs_total = p->nout;

    for (int i = 0; i < p->ninstr && p->instr != NULL; i++) {
        int r = inplace_traverse(&p->instr[i].inplace, p->instr[i].nargs, visit, arg);
        if (r != 0)
            return r;
        Py_VISIT(p->instr[i].target);
        Py_VISIT(p->instr[i].reduce);
        Py_VISIT(p->instr[i].undo);
        Py_VISIT(p->instr[i].kwnames);
        Py_VISIT(p->instr[i].name);
        nargs_total += p->instr[i].nargs + p->instr[i].nkw;
    }
    for (Py_ssize_t i = 0; i < nargs_total && p->args != NULL; i++)
        Py_VISIT(p->args[i].obj);
    return blocks_traverse(p, visit, arg);
}

/* Fill instruction k from call node `node`.  0 / -1. */
static int
instr_compile(Instr *in, NodeObject *node, Arg *args, int k, int *last_use)
{
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    int j;

    in->inplace.donor = -1;
    in->block_run = -1;
    in->op = node->op;
    in->dest = node->index;
    in->nargs = (int)PyTuple_GET_SIZE(node->args);
    in->nkw = (int)PyDict_GET_SIZE(node->kwargs);
    in->target = Py_NewRef(node->target);
    in->op_function = in->op == NODE_CALL_FUNCTION && is_operator_function(in->target);
    in->name = Py_NewRef(node->name);
    in->args = args;
    for (j = 0; j < in->nargs; j++)
        arg_compile(&args[j], PyTuple_GET_ITEM(node->args, j), k, last_use);
    if (in->nkw > 0) {
        in->kwnames = PyTuple_New(in->nkw);
        if (in->kwnames == NULL)
            return -1;
        while (PyDict_Next(node->kwargs, &pos, &key, &value)) {
            PyTuple_SET_ITEM(in->kwnames, j - in->nargs, Py_NewRef(key));
            arg_compile(&args[j++], value, k, last_use);
        }
    }
    for (j = 0; j < in->nargs + in->nkw; j++)
        in->nested |= args[j].kind == ARG_NESTED;
    reduce_plan(in);
    PyObject *undo = PyDict_GetItemString(node->meta, GRAPH_META_UNDO);       /* borrowed */
    PyObject *closes = PyDict_GetItemString(node->meta, GRAPH_META_CLOSES);   /* borrowed */
    in->undo = undo != NULL && PyCallable_Check(undo) ? Py_NewRef(undo) : NULL;
    in->closes = closes == Py_True;
    return 0;
}

/* A run failed at instruction `failed`: undo the scopes the instructions
   before it opened and did not close, innermost first (what a `finally`
   around each would do).  The run's error stays; an undo's own is
   dropped. */
static void
leave_open_scopes(const Program *p, int failed)
{
    PyObject *open[64];
    int nopen = 0;
    for (int k = 0; k < failed && k < p->ninstr; k++) {
        const Instr *in = &p->instr[k];
        if (in->closes && nopen > 0)
            nopen--;
        if (in->undo != NULL && nopen < 64)
            open[nopen++] = in->undo;
    }
    if (nopen == 0)
        return;
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    while (nopen > 0) {
        PyObject *r = PyObject_CallOneArg(open[--nopen], Py_None);
        if (r == NULL)
            PyErr_Clear();
        Py_XDECREF(r);
    }
    PyErr_Restore(type, value, tb);
}

/* Bucket the owned slots by the instruction after which they die (counting
   sort on last_use).  0 / -1. */
static int
program_plan_frees(Program *p, const int *last_use)
{
    int nowned = p->nslots - p->ninputs, *fill;

    p->frees = PyMem_Calloc((size_t)nowned + 1, sizeof(int));
    fill = PyMem_Calloc((size_t)p->ninstr + 1, sizeof(int));
    if (p->frees == NULL || fill == NULL) {
        PyMem_Free(fill);
        PyErr_NoMemory();
        return -1;
    }
    for (int s = p->ninputs; s < p->nslots; s++) {
        if (last_use[s] < p->ninstr)
            p->instr[last_use[s]].nfree++;
        else
            p->nend++;
    }
    int off = 0;
    for (int k = 0; k < p->ninstr; k++) {
        p->instr[k].free = p->frees + off;
        off += p->instr[k].nfree;
    }
    p->end = p->frees + off;
    for (int s = p->ninputs; s < p->nslots; s++) {
        int k = last_use[s];
        if (k < p->ninstr)
            p->instr[k].free[fill[k]++] = s;
        else
            p->end[fill[p->ninstr]++] = s;
    }
    PyMem_Free(fill);
    return 0;
}

/* Compile finished graph g into p (zeroed).  0, or -1 with an exception
   (p may then be half built: program_clear it). */
int
program_compile(Program *p, GraphObject *g)
{
    Py_ssize_t n = PyList_GET_SIZE(g->nodes), nargs_total, pos;
    NodeObject *outnode = GRAPH_NODE(g, n - 1);
    PyObject *outs = PyTuple_GET_ITEM(outnode->args, 0);
    int *last_use = NULL;

    ENGINE_ASSERT(g->finished && outnode->op == NODE_OUTPUT);
    if (n > INT_MAX / 2) {
        PyErr_SetString(PyExc_OverflowError, "graph too large");
        return -1;
    }
    p->ninputs = g->nplaceholders;
    p->nslots = (int)n - 1;
    p->ninstr = p->nslots - p->ninputs;
    p->nout = (int)PyTuple_GET_SIZE(outs);
    nargs_total = p->nout;
    for (int s = p->ninputs; s < p->nslots; s++)
        nargs_total += PyTuple_GET_SIZE(GRAPH_NODE(g, s)->args) +
                       PyDict_GET_SIZE(GRAPH_NODE(g, s)->kwargs);

    p->instr = PyMem_Calloc((size_t)p->ninstr + 1, sizeof(Instr));
    p->args = PyMem_Calloc((size_t)nargs_total + 1, sizeof(Arg));
    last_use = PyMem_Malloc(((size_t)p->nslots + 1) * sizeof(int));
    if (p->instr == NULL || p->args == NULL || last_use == NULL) {
        PyErr_NoMemory();
        goto out_fail;
    }
    /* An unread result dies right after its own instruction. */
    for (int s = 0; s < p->nslots; s++)
        last_use[s] = s - p->ninputs;

    pos = 0;
    for (int k = 0; k < p->ninstr; k++) {
        NodeObject *node = GRAPH_NODE(g, p->ninputs + k);
        if (instr_compile(&p->instr[k], node, p->args + pos, k, last_use) < 0)
            goto out_fail;
        pos += p->instr[k].nargs + p->instr[k].nkw;
        p->has_scopes |= p->instr[k].undo != NULL;
    }
    p->out = p->args + pos;
    for (int j = 0; j < p->nout; j++)
        arg_compile(&p->out[j], PyTuple_GET_ITEM(outs, j), p->ninstr, last_use);
    /* Now that every last use is known: which results may reuse a buffer. */
    for (int k = 0; k < p->ninstr; k++) {
        Instr *in = &p->instr[k];
        if (in->op == NODE_CALL_FUNCTION && in->nkw == 0 && !in->nested
            && inplace_plan(&in->inplace, g, GRAPH_NODE(g, p->ninputs + k), in->args,
                            in->nargs, in->op_function, k, last_use) < 0)
            goto out_fail;
    }
    if (blocks_plan(p, g, last_use) < 0 || program_plan_frees(p, last_use) < 0
        || graph_pool_plan(p, g) < 0)
        goto out_fail;
    PyMem_Free(last_use);
    p->ready = true;
    return 0;

out_fail:
    PyMem_Free(last_use);
    return -1;
}

/* ------------------------------------------------------------------ */
/* Running.                                                            */

/* graph_arg_map callback of the slow path: a node's current value. */
static PyObject *
map_value(NodeObject *node, void *ctx)
{
    PyObject *v = ((PyObject **)ctx)[node->index];

    ENGINE_ASSERT(v != NULL);
    return Py_NewRef(v);
}

/* The value of an arg for this run.  New reference or NULL. */
static PyObject *
arg_value_ref(const Arg *a, PyObject **v)
{
    switch (a->kind) {
    case ARG_SLOT:
        return Py_NewRef(v[a->slot]);
    case ARG_CONST:
        return Py_NewRef(a->obj);
    default:
        return graph_arg_map(a->obj, map_value, v);
    }
}

static PyObject *
instr_unsupported(const Instr *in)
{
    PyErr_Format(PyExc_NotImplementedError,
                 "the eager interpreter does not run %U nodes (node '%U')",
                 graph_op_names[in->op], in->name);
    return NULL;
}

/* Release slot s (may be empty) of v: its value goes to the kept arrays
   when the pool takes it (graph_pool.c; want: p->pool_want[s]), else its
   reference is dropped. */
static inline void
slot_release(const Program *p, PyObject **v, int s)
{
    PyObject *o = v[s];

    v[s] = NULL;
    if (o != NULL
        && (p->pool_want == NULL || p->pool_want[s] == 0 || Py_REFCNT(o) != 1
            || !graph_pool_give(o, p->pool_want[s])))
        Py_DECREF(o);
}

/* Run one instruction over the values v.  New reference or NULL. */
static PyObject *
instr_run(const Instr *in, PyObject **v)
{
    PyObject *stackbuf[SMALL_ARGS + 1], **buf = stackbuf, **argv, *res = NULL;
    int n = in->nargs + in->nkw, filled = 0;
    size_t nargsf;

    if (in->op != NODE_CALL_FUNCTION && in->op != NODE_CALL_METHOD)
        return instr_unsupported(in);
    if (n > SMALL_ARGS) {
        buf = PyMem_Malloc(((size_t)n + 1) * sizeof(PyObject *));
        if (buf == NULL)
            return PyErr_NoMemory();
    }
    argv = buf + 1;        /* buf[0] is free for PY_VECTORCALL_ARGUMENTS_OFFSET */
    if (!in->nested) {
        for (int j = 0; j < n; j++) {
            const Arg *a = &in->args[j];
            argv[j] = a->kind == ARG_SLOT ? v[a->slot] : a->obj;   /* borrowed */
        }
    }
    else {
        for (; filled < n; filled++) {
            argv[filled] = arg_value_ref(&in->args[filled], v);
            if (argv[filled] == NULL)
                goto out;
        }
    }
    nargsf = (size_t)in->nargs | PY_VECTORCALL_ARGUMENTS_OFFSET;
    bool reduced = false;
    if (in->reduce != NULL && (res = reduce_run(in, argv, &reduced), reduced))
        goto out;
    InplaceHow how = in->inplace.planned ? inplace_how(&in->inplace, argv, in->nargs)
                                         : INPLACE_NONE;
    if (how != INPLACE_NONE)
        res = inplace_run(&in->inplace, how, argv, in->nargs);
    else if (in->op_function && in->kwnames == NULL)
        res = call_operator(in->target, argv, in->nargs);
    else if (in->op == NODE_CALL_FUNCTION)
        res = PyObject_Vectorcall(in->target, argv, nargsf, in->kwnames);
    else
        res = PyObject_VectorcallMethod(in->target, argv, nargsf, in->kwnames);
out:
    for (int j = 0; j < filled; j++)
        Py_DECREF(argv[j]);
    if (buf != stackbuf)
        PyMem_Free(buf);
    return res;
}

/* See graph_int.h. */
PyObject *
program_run(const Program *p, PyObject *const *inputs, Py_ssize_t ninputs, int only)
{
    PyObject *small[SMALL_SLOTS], **v = small, *result = NULL;
    int k = 0;

    if (!p->ready) {
        PyErr_SetString(PyExc_RuntimeError, "GraphModule was cleared");
        return NULL;
    }
    if (ninputs != p->ninputs) {
        PyErr_Format(PyExc_TypeError, "forward() expected %d inputs, got %zd",
                     p->ninputs, ninputs);
        return NULL;
    }
    if (p->nslots > SMALL_SLOTS) {
        v = PyMem_Malloc((size_t)p->nslots * sizeof(PyObject *));
        if (v == NULL)
            return PyErr_NoMemory();
    }
    for (int s = 0; s < p->ninputs; s++)       /* a few slots: no memcpy call */
        v[s] = inputs[s];
    for (int s = p->ninputs; s < p->nslots; s++)
        v[s] = NULL;

    for (k = 0; k < p->ninstr; k++) {
        const Instr *in = &p->instr[k];
        if (in->block_run >= 0) {
            int ran = blocks_run(p, in->block_run, v);
            if (ran < 0)
                goto out_release_all;
            if (ran > 0) {              /* the run's `ran` instructions are done */
                int last = k + ran - 1;
                for (; k <= last; k++)
                    for (int j = 0; j < p->instr[k].nfree; j++)
                        slot_release(p, v, p->instr[k].free[j]);
                k--;
                continue;
            }
        }
        PyObject *r = instr_run(in, v);
        if (r == NULL)
            goto out_release_all;
        v[in->dest] = r;
        for (int j = 0; j < in->nfree; j++)
            slot_release(p, v, in->free[j]);
    }

    if (only >= 0) {
        ENGINE_ASSERT(only < p->nout);
        result = arg_value_ref(&p->out[only], v);
        if (result == NULL)
            goto out_release_all;
        for (int j = 0; j < p->nend; j++)
            slot_release(p, v, p->end[j]);
        goto out_free;
    }
    result = PyTuple_New(p->nout);
    if (result == NULL)
        goto out_release_all;
    for (int j = 0; j < p->nout; j++) {
        PyObject *item = arg_value_ref(&p->out[j], v);
        if (item == NULL) {
            Py_CLEAR(result);
            goto out_release_all;
        }
        PyTuple_SET_ITEM(result, j, item);
    }
    for (int j = 0; j < p->nend; j++)
        slot_release(p, v, p->end[j]);
    goto out_free;

out_release_all:
    if (p->has_scopes)
        leave_open_scopes(p, k);
    for (int s = p->ninputs; s < p->nslots; s++)
        Py_CLEAR(v[s]);
out_free:
    if (v != small)
        PyMem_Free(v);
    return result;
}
