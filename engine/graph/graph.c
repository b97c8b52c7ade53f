/*
 * graph.c -- the graph IR: making nodes and graphs (graph_new,
 * graph_placeholder, graph_call, graph_output, graph_truncate), naming nodes
 * the torch.fx way, and walking / rebuilding the args that hold nodes.  The
 * contract is graph.h; the other graph files are listed in graph_int.h.
 *
 * Invariants kept here (graph.h has the whole list):
 *   - graph->nodes[i]->index == i; placeholders first (graph->nplaceholders
 *     of them), one output node last once finished, and nothing is added
 *     to a finished graph.
 *   - Names are unique in a graph (graph->names), are Python identifiers, and
 *     shadow no keyword or builtin.
 *   - A node's args and kwargs are private copies that reference nodes of
 *     the same graph only, never the output node.
 */
#include "graph_int.h"
#include "../base/tensorlib.h"

#include <string.h>

PyObject *graph_op_names[NODE_OUTPUT + 1];  /* strong: "placeholder", ... */
static PyObject *builtins_dict;             /* strong: builtins.__dict__, set
                                               by graph_ir_init */

/* Names a node may not take: keywords, plus what generated code refers to. */
static const char *const reserved_names[] = {
    "False", "None", "True", "and", "as", "assert", "async", "await",
    "break", "class", "continue", "def", "del", "elif", "else", "except",
    "finally", "for", "from", "global", "if", "import", "in", "is",
    "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try",
    "while", "with", "yield",
    "inf", "nan", "NoneType", "self", "numpy", "operator",
    NULL,
};

/* ------------------------------------------------------------------ */
/* Walking and rebuilding args.                                        */

/* See graph_int.h. */
int
graph_arg_walk(PyObject *arg, node_visit_fn fn, void *ctx)
{
    int r = 0;

    if (IS_NODE(arg))
        return fn((NodeObject *)arg, ctx);
    if (PyTuple_CheckExact(arg) || PyList_CheckExact(arg)) {
        for (Py_ssize_t i = 0; r == 0 && i < PySequence_Fast_GET_SIZE(arg); i++)
            r = graph_arg_walk(PySequence_Fast_GET_ITEM(arg, i), fn, ctx);
    }
    else if (PyDict_CheckExact(arg)) {
        Py_ssize_t pos = 0;
        PyObject *key, *value;
        while (r == 0 && PyDict_Next(arg, &pos, &key, &value))
            r = graph_arg_walk(value, fn, ctx);
    }
    else if (PySlice_Check(arg)) {
        PySliceObject *s = (PySliceObject *)arg;
        r = graph_arg_walk(s->start, fn, ctx);
        if (r == 0)
            r = graph_arg_walk(s->stop, fn, ctx);
        if (r == 0)
            r = graph_arg_walk(s->step, fn, ctx);
    }
    return r;
}

/* See graph_int.h. */
PyObject *
graph_arg_map(PyObject *arg, node_map_fn map, void *ctx)
{
    PyObject *res, *item;
    Py_ssize_t i, n;

    if (IS_NODE(arg))
        return map((NodeObject *)arg, ctx);
    if (PyTuple_CheckExact(arg) || PyList_CheckExact(arg)) {
        bool is_tuple = PyTuple_CheckExact(arg);
        n = PySequence_Fast_GET_SIZE(arg);
        res = is_tuple ? PyTuple_New(n) : PyList_New(n);
        if (res == NULL)
            return NULL;
        for (i = 0; i < n; i++) {
            item = graph_arg_map(PySequence_Fast_GET_ITEM(arg, i), map, ctx);
            if (item == NULL) {
                Py_DECREF(res);
                return NULL;
            }
            if (is_tuple)
                PyTuple_SET_ITEM(res, i, item);
            else
                PyList_SET_ITEM(res, i, item);
        }
        return res;
    }
    if (PyDict_CheckExact(arg)) {
        Py_ssize_t pos = 0;
        PyObject *key, *value;
        res = PyDict_New();
        if (res == NULL)
            return NULL;
        while (PyDict_Next(arg, &pos, &key, &value)) {
            item = graph_arg_map(value, map, ctx);
            if (item == NULL || PyDict_SetItem(res, key, item) < 0) {
                Py_XDECREF(item);
                Py_DECREF(res);
                return NULL;
            }
            Py_DECREF(item);
        }
        return res;
    }
    if (PySlice_Check(arg)) {
        PySliceObject *s = (PySliceObject *)arg;
        PyObject *start = NULL, *stop = NULL, *step = NULL;
        res = NULL;
        if ((start = graph_arg_map(s->start, map, ctx)) != NULL &&
            (stop = graph_arg_map(s->stop, map, ctx)) != NULL &&
            (step = graph_arg_map(s->step, map, ctx)) != NULL)
            res = PySlice_New(start, stop, step);
        Py_XDECREF(start);
        Py_XDECREF(stop);
        Py_XDECREF(step);
        return res;
    }
    return Py_NewRef(arg);
}

/* graph_arg_map callback of graph_call/graph_output: accept nodes of graph `ctx`
   that can be used as values. */
static PyObject *
map_check_graph(NodeObject *node, void *ctx)
{
    if (node->graph != (PyObject *)ctx) {
        PyErr_Format(PyExc_ValueError,
                     "node '%U' belongs to another graph", node->name);
        return NULL;
    }
    if (node->op == NODE_OUTPUT) {
        PyErr_SetString(PyExc_ValueError,
                        "the output node cannot be an argument");
        return NULL;
    }
    return Py_NewRef(node);
}

/* ------------------------------------------------------------------ */
/* Names.                                                              */

/* 1 when `name` is a keyword, a builtin or otherwise reserved, 0 if free to
   use, -1 with an exception. */
static int
name_is_reserved(PyObject *name)
{
    const char *s = PyUnicode_AsUTF8(name);

    if (s == NULL)
        return -1;
    for (int i = 0; reserved_names[i] != NULL; i++)
        if (strcmp(s, reserved_names[i]) == 0)
            return 1;
    return PyDict_Contains(builtins_dict, name);
}

static bool
is_ident_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9') || c == '_';
}

static bool
is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

/*
 * A fresh node name for g from `hint`, as torch.fx makes them: each run of
 * characters that cannot be in an identifier becomes '_', a leading digit gets
 * a '_' prefix, and a trailing "_<n>" is bumped until the name is unused and
 * not reserved ("add", "add_1", ...; "abs" -> "abs_1" since abs is a
 * builtin).  The name is added to g->names.  New str, or NULL with an
 * exception (g->names is then unchanged).
 */
static PyObject *
graph_unique_name(GraphObject *g, const char *hint)
{
    size_t len = strlen(hint), n = 0, digits;
    char *buf;
    PyObject *base = NULL, *cand = NULL;
    long num = 0;
    bool bad_run = false, has_num = false;

    buf = PyMem_Malloc(len + 2);
    if (buf == NULL)
        return PyErr_NoMemory();
    buf[n++] = '_';                    /* kept only before a leading digit */
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)hint[i];
        if (is_ident_char(c)) {
            buf[n++] = (char)c;
            bad_run = false;
        }
        else if (!bad_run) {
            buf[n++] = '_';
            bad_run = true;
        }
    }
    const char *s = (n > 1 && is_digit((unsigned char)buf[1])) ? buf : buf + 1;
    n -= (size_t)(s - buf);
    if (n == 0) {
        s = "_unnamed";
        n = strlen(s);
    }

    /* Split "base_<digits>" like fx's r"(.*)_(\d+)$". */
    digits = 0;
    while (digits < n && is_digit((unsigned char)s[n - 1 - digits]))
        digits++;
    if (digits > 0 && digits <= 9 && digits < n && s[n - 1 - digits] == '_') {
        has_num = true;
        for (size_t i = n - digits; i < n; i++)     /* s is not NUL-terminated */
            num = num * 10 + (s[i] - '0');
        n -= digits + 1;
    }
    base = PyUnicode_FromStringAndSize(s, (Py_ssize_t)n);
    PyMem_Free(buf);
    if (base == NULL)
        return NULL;

    if (!has_num) {
        PyObject *last = PyDict_GetItemWithError(g->name_counts, base);   /* borrowed */
        if (last == NULL && PyErr_Occurred())
            goto out_fail;
        num = last ? PyLong_AsLong(last) : 0;
    }
    cand = has_num || num > 0 ? PyUnicode_FromFormat("%U_%ld", base, num)
                              : Py_NewRef(base);
    for (;;) {
        int used, reserved;
        if (cand == NULL)
            goto out_fail;
        used = PySet_Contains(g->names, cand);
        reserved = used == 0 ? name_is_reserved(cand) : 0;
        if (used < 0 || reserved < 0)
            goto out_fail;
        if (!used && !reserved)
            break;
        Py_DECREF(cand);
        cand = PyUnicode_FromFormat("%U_%ld", base, ++num);
    }
    if (PySet_Add(g->names, cand) < 0)
        goto out_fail;
    if (!has_num) {
        PyObject *n = PyLong_FromLong(num);
        int rc = n ? PyDict_SetItem(g->name_counts, base, n) : -1;
        Py_XDECREF(n);
        if (rc < 0) {
            (void)PySet_Discard(g->names, cand);
            goto out_fail;
        }
    }
    Py_DECREF(base);
    return cand;

out_fail:
    Py_XDECREF(cand);
    Py_DECREF(base);
    return NULL;
}

/* See graph_int.h. */
PyObject *
graph_str_attr(PyObject *obj, const char *name)
{
    PyObject *v = PyObject_GetAttrString(obj, name);

    if (v == NULL) {
        PyErr_Clear();
        return NULL;
    }
    if (!PyUnicode_Check(v))
        Py_CLEAR(v);
    return v;
}

/* See graph.h. */
void
graph_drop_examples(GraphObject *g)
{
    for (Py_ssize_t i = 0; g->nodes != NULL && i < PyList_GET_SIZE(g->nodes); i++) {
        PyObject *meta = GRAPH_NODE(g, i)->meta;            /* borrowed */
        PyObject *ex = PyDict_Check(meta) ? PyDict_GetItemString(meta, "example_value") : NULL;
        if (ex != NULL && tensorlib_is_tensor(ex) && PyDict_DelItemString(meta, "example_value") < 0)
            PyErr_Clear();
    }
}

/* ------------------------------------------------------------------ */
/* Nodes.                                                              */

/*
 * meta for a node traced with `example` (borrowed, may be NULL):
 * example_value, type name, and shape / dtype when the value has them.
 * Attribute errors are ignored.  New dict or NULL.
 */
static PyObject *
node_meta_new(PyObject *example)
{
    PyObject *meta = PyDict_New(), *v;

    if (meta == NULL || example == NULL)
        return meta;
    if (PyDict_SetItemString(meta, "example_value", example) < 0)
        goto out_fail;
    v = PyType_GetName(Py_TYPE(example));
    if (v == NULL || PyDict_SetItemString(meta, "type", v) < 0)
        goto out_fail_v;
    Py_DECREF(v);

    v = PyObject_GetAttrString(example, "shape");
    if (v != NULL && !PyTuple_Check(v))
        Py_SETREF(v, PySequence_Tuple(v));
    if (v == NULL)
        PyErr_Clear();
    else if (PyDict_SetItemString(meta, "shape", v) < 0)
        goto out_fail_v;
    Py_XDECREF(v);

    v = PyObject_GetAttrString(example, "dtype");
    if (v != NULL)
        Py_SETREF(v, tensorlib_dtype_str(v));
    if (v == NULL)
        PyErr_Clear();
    else if (PyDict_SetItemString(meta, "dtype", v) < 0)
        goto out_fail_v;
    Py_XDECREF(v);
    return meta;

out_fail_v:
    Py_XDECREF(v);
out_fail:
    Py_DECREF(meta);
    return NULL;
}

/*
 * Make a node and put it at position `pos` of g's list (renumbering the nodes
 * after it).  target NULL means "the node's own name".  args and kwargs are
 * stolen, even on failure.  Borrowed node, or NULL with an exception; g is
 * then unchanged, except that after a memory error the name may stay taken.
 */
static NodeObject *
graph_insert_node(GraphObject *g, Py_ssize_t pos, NodeOp op, const char *name_hint,
                  PyObject *target, PyObject *args, PyObject *kwargs,
                  PyObject *example)
{
    NodeObject *node = (NodeObject *)NodeType->tp_alloc(NodeType, 0);

    if (node == NULL)
        goto out_fail;
    node->op = op;
    node->args = args;
    node->kwargs = kwargs;
    args = kwargs = NULL;
    node->meta = node_meta_new(example);   /* may run Python: before naming */
    if (node->meta == NULL)
        goto out_fail;
    node->name = graph_unique_name(g, name_hint);
    if (node->name == NULL)
        goto out_fail;
    node->target = Py_NewRef(target != NULL ? target : node->name);
    if (PyList_Insert(g->nodes, pos, (PyObject *)node) < 0)
        goto out_fail;
    node->graph = (PyObject *)g;
    Py_DECREF(node);      /* the list holds it now */
    for (Py_ssize_t i = pos; i < PyList_GET_SIZE(g->nodes); i++)
        ((NodeObject *)PyList_GET_ITEM(g->nodes, i))->index = (int)i;
    return node;

out_fail:
    Py_XDECREF(node);
    Py_XDECREF(args);
    Py_XDECREF(kwargs);
    return NULL;
}

/* ------------------------------------------------------------------ */
/* Graph: C API.                                                       */

static int
graph_check_open(GraphObject *g)
{
    if (g->finished) {
        PyErr_SetString(PyExc_RuntimeError,
                        "graph is finished (it has an output node)");
        return -1;
    }
    return 0;
}

/* New empty, open graph, or NULL with an exception. */
GraphObject *
graph_new(void)
{
    GraphObject *g = (GraphObject *)GraphType->tp_alloc(GraphType, 0);

    if (g == NULL)
        return NULL;
    g->nodes = PyList_New(0);
    g->names = PySet_New(NULL);
    g->name_counts = PyDict_New();
    if (g->nodes == NULL || g->names == NULL || g->name_counts == NULL) {
        Py_DECREF(g);
        return NULL;
    }
    PyObject_GC_UnTrack(g->nodes);     /* see the invariants at the top */
    g->nplaceholders = 0;
    g->finished = false;
    return g;
}

/*
 * Add an input.  The placeholder goes after the existing placeholders (not
 * at the end), so an input discovered late still precedes every call.
 * Borrowed node, or NULL with RuntimeError (finished graph) or a memory
 * error; g is then unchanged (see graph_insert_node).
 */
NodeObject *
graph_placeholder(GraphObject *g, const char *name_hint, PyObject *example)
{
    NodeObject *node;
    PyObject *args, *kwargs;

    ENGINE_ASSERT(g != NULL && Py_IS_TYPE(g, GraphType));
    if (graph_check_open(g) < 0)
        return NULL;
    args = PyTuple_New(0);
    kwargs = PyDict_New();
    if (args == NULL || kwargs == NULL) {
        Py_XDECREF(args);
        Py_XDECREF(kwargs);
        return NULL;
    }
    /* Late inputs go after the other placeholders, keeping them first. */
    node = graph_insert_node(g, g->nplaceholders, NODE_PLACEHOLDER,
                             name_hint != NULL ? name_hint : "input",
                             NULL, args, kwargs, example);
    if (node != NULL)
        g->nplaceholders++;
    return node;
}

/* The checked copy of kwargs: a dict with str keys.  New dict or NULL. */
static PyObject *
graph_copy_kwargs(GraphObject *g, PyObject *kwargs)
{
    Py_ssize_t pos = 0;
    PyObject *key, *value;

    if (kwargs == NULL)
        return PyDict_New();
    if (!PyDict_Check(kwargs)) {
        PyErr_Format(PyExc_TypeError, "kwargs must be a dict, not %.100s",
                     Py_TYPE(kwargs)->tp_name);
        return NULL;
    }
    while (PyDict_Next(kwargs, &pos, &key, &value)) {
        if (!PyUnicode_CheckExact(key)) {     /* vectorcall kwnames are exact str */
            PyErr_SetString(PyExc_TypeError, "kwargs keys must be str");
            return NULL;
        }
    }
    /* An exact dict copy so graph_arg_map rebuilds it. */
    PyObject *plain = PyDict_Copy(kwargs);
    if (plain == NULL)
        return NULL;
    PyObject *res = graph_arg_map(plain, map_check_graph, g);
    Py_DECREF(plain);
    return res;
}

/* Check that `target` fits `op`.  0 / -1 with TypeError / ValueError. */
static int
check_call_target(NodeOp op, PyObject *target, PyObject *args)
{
    switch (op) {
    case NODE_CALL_FUNCTION:
        if (!PyCallable_Check(target)) {
            PyErr_Format(PyExc_TypeError,
                         "call_function target must be callable, not %.100s",
                         Py_TYPE(target)->tp_name);
            return -1;
        }
        return 0;
    case NODE_CALL_METHOD:
        if (PyTuple_GET_SIZE(args) < 1) {
            PyErr_SetString(PyExc_ValueError,
                            "call_method needs the object as args[0]");
            return -1;
        }
        /* fallthrough */
    case NODE_GET_ATTR:
    case NODE_CALL_MODULE:
        if (!PyUnicode_Check(target)) {
            PyErr_Format(PyExc_TypeError, "%U target must be a str, not %.100s",
                         graph_op_names[op], Py_TYPE(target)->tp_name);
            return -1;
        }
        return 0;
    default:
        if ((unsigned)op > NODE_OUTPUT)
            PyErr_Format(PyExc_ValueError, "bad node op %d", (int)op);
        else
            PyErr_Format(PyExc_ValueError,
                         "graph_call cannot add a %U node", graph_op_names[op]);
        return -1;
    }
}

/* fx-style default name hint: the function's __name__, or the method /
   attribute name.  *keep gets the str owning the returned chars (or NULL);
   release it once the hint is used.  Cannot fail. */
static const char *
default_hint(NodeOp op, PyObject *target, PyObject **keep)
{
    *keep = op == NODE_CALL_FUNCTION ? graph_str_attr(target, "__name__")
                                     : Py_NewRef(target);
    if (*keep != NULL) {
        const char *s = PyUnicode_AsUTF8(*keep);
        if (s != NULL)
            return s;
        PyErr_Clear();
    }
    return op == NODE_CALL_FUNCTION ? "call" : "node";
}

/*
 * Append a get_attr / call_* node.  args and kwargs are copied (see the
 * invariants at the top); name_hint NULL names the node after its target.
 * Fails, leaving g unchanged, with RuntimeError when g is finished,
 * ValueError for another graph's node, the output node, a bad op, or a
 * call_method without args[0], and TypeError for a bad target, args or
 * kwargs (keys must be exact str).  Borrowed node or NULL.
 */
NodeObject *
graph_call(GraphObject *g, NodeOp op, PyObject *target, PyObject *args,
           PyObject *kwargs, const char *name_hint, PyObject *example)
{
    PyObject *args_copy, *kwargs_copy, *keep = NULL;
    NodeObject *node;

    ENGINE_ASSERT(g != NULL && Py_IS_TYPE(g, GraphType));
    if (graph_check_open(g) < 0)
        return NULL;
    if (!PyTuple_Check(args)) {
        PyErr_Format(PyExc_TypeError, "args must be a tuple, not %.100s",
                     Py_TYPE(args)->tp_name);
        return NULL;
    }
    if (check_call_target(op, target, args) < 0)
        return NULL;
    if (!PyTuple_CheckExact(args))
        args = PySequence_Tuple(args);
    else
        Py_INCREF(args);
    if (args == NULL)
        return NULL;
    args_copy = graph_arg_map(args, map_check_graph, g);
    Py_DECREF(args);
    if (args_copy == NULL)
        return NULL;
    kwargs_copy = graph_copy_kwargs(g, kwargs);
    if (kwargs_copy == NULL) {
        Py_DECREF(args_copy);
        return NULL;
    }
    if (name_hint == NULL)
        name_hint = default_hint(op, target, &keep);
    node = graph_insert_node(g, PyList_GET_SIZE(g->nodes), op, name_hint, target,
                             args_copy, kwargs_copy, example);
    Py_XDECREF(keep);
    return node;
}

/*
 * Drop every call node past the first `keep_calls` (placeholders stay):
 * the translator undoes the ops of an inlined call that broke.  Nodes left
 * must not read dropped ones (they were all added before them).  Cannot fail.
 */
/* Take the call node at position i out of g (its name freed, its graph
   gone).  false when the list could not be changed (cleared).  The nodes
   after it keep their old index: the caller renumbers them if any. */
static bool
remove_node_at(GraphObject *g, Py_ssize_t i)
{
    NodeObject *node = (NodeObject *)PyList_GET_ITEM(g->nodes, i);
    if (PySet_Discard(g->names, node->name) < 0)
        PyErr_Clear();
    PyDict_Clear(g->name_counts);   /* a freed number may be below a count */
    node->graph = NULL;
    if (PyList_SetSlice(g->nodes, i, i + 1, NULL) < 0) {
        PyErr_Clear();
        return false;
    }
    return true;
}

void
graph_truncate(GraphObject *g, int keep_calls)
{
    Py_ssize_t first = g->nplaceholders + keep_calls;
    while (PyList_GET_SIZE(g->nodes) > first && remove_node_at(g, PyList_GET_SIZE(g->nodes) - 1))
        ;
}

void
graph_drop_unread(GraphObject *g, NodeObject *node)
{
    Py_ssize_t i = node->index, n = PyList_GET_SIZE(g->nodes);
    if (node->graph != (PyObject *)g || i < g->nplaceholders || i >= n
        || PyList_GET_ITEM(g->nodes, i) != (PyObject *)node || !remove_node_at(g, i))
        return;
    for (Py_ssize_t k = i; k < n - 1; k++)
        ((NodeObject *)PyList_GET_ITEM(g->nodes, k))->index = (int)k;
}

/*
 * Finish g with an output node whose args are (outputs,), as in fx.
 * outputs: a tuple of this graph's nodes and/or constants, possibly nested.
 * 0, or -1 with RuntimeError / TypeError / ValueError, g unchanged.
 */
int
graph_output(GraphObject *g, PyObject *outputs)
{
    PyObject *copy, *args, *kwargs, *target;
    NodeObject *node;

    ENGINE_ASSERT(g != NULL && Py_IS_TYPE(g, GraphType));
    if (graph_check_open(g) < 0)
        return -1;
    if (!PyTuple_CheckExact(outputs)) {
        PyErr_Format(PyExc_TypeError, "outputs must be a tuple, not %.100s",
                     Py_TYPE(outputs)->tp_name);
        return -1;
    }
    copy = graph_arg_map(outputs, map_check_graph, g);
    if (copy == NULL)
        return -1;
    args = PyTuple_Pack(1, copy);
    Py_DECREF(copy);
    kwargs = PyDict_New();
    target = PyUnicode_InternFromString("output");
    if (args == NULL || kwargs == NULL || target == NULL) {
        Py_XDECREF(args);
        Py_XDECREF(kwargs);
        Py_XDECREF(target);
        return -1;
    }
    node = graph_insert_node(g, PyList_GET_SIZE(g->nodes), NODE_OUTPUT, "output",
                             target, args, kwargs, NULL);
    Py_DECREF(target);
    if (node == NULL)
        return -1;
    g->finished = true;
    return 0;
}

/* Number of call_function / call_method / call_module nodes.  Cannot fail. */
int
graph_op_count(GraphObject *g)
{
    int count = 0;

    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(g->nodes); i++) {
        NodeOp op = ((NodeObject *)PyList_GET_ITEM(g->nodes, i))->op;
        if (op == NODE_CALL_FUNCTION || op == NODE_CALL_METHOD ||
            op == NODE_CALL_MODULE)
            count++;
    }
    return count;
}

/* ------------------------------------------------------------------ */
/* Initialization.                                                     */

int
graph_ir_init(void)
{
    static const char *const ops[NODE_OUTPUT + 1] = {
        "placeholder", "get_attr", "call_function",
        "call_method", "call_module", "output"};
    PyObject *builtins;

    for (int i = 0; i <= NODE_OUTPUT; i++) {
        Py_XSETREF(graph_op_names[i], PyUnicode_InternFromString(ops[i]));
        if (graph_op_names[i] == NULL)
            return -1;
    }
    builtins = PyImport_ImportModule("builtins");
    if (builtins == NULL)
        return -1;
    Py_XSETREF(builtins_dict, Py_NewRef(PyModule_GetDict(builtins)));
    Py_DECREF(builtins);
    return 0;
}
