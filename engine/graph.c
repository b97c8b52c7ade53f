/*
 * graph.c -- the graph IR (Node, Graph) and GraphModule, whose forward() is a
 * small C interpreter over a flat program compiled from the graph.
 *
 * The IR is shaped like torch.fx so backends written for fx feel at home:
 * placeholders first, then calls, one output node last; a node's args and
 * kwargs hold earlier nodes or constants.  Design: ../shared/DESIGN.md 3.7 and
 * docs/architecture.md.  The interpreter (struct Program) is on the cache-hit
 * path: it never touches Node objects unless an argument nests nodes inside a
 * container.
 *
 * Invariants:
 *   - graph->nodes[i]->index == i.  node->graph is the graph whose list holds
 *     the node, or NULL once that graph has been cleared (a node may outlive
 *     its graph when Python holds it).
 *   - The node list is owned by its graph alone and is not tracked by the GC:
 *     the graph traverses the nodes itself, so a collection can never empty
 *     the list behind the graph's back and leave node->graph dangling.
 *   - Names are unique in a graph (graph->names), are Python identifiers, and
 *     shadow no keyword or builtin (the torch.fx _Namespace rules).
 *   - args/kwargs reference nodes of the same graph only, either directly or
 *     inside "arg containers": exact tuple, list, dict (values) and slice.
 *     Anything else is an opaque constant.  The graph keeps private copies of
 *     the containers, so callers cannot change a node after the fact.
 *   - A finished graph (output node added) never changes.  A GraphModule is
 *     made from a finished graph only, so its program and graph always agree.
 */
#include "engine.h"

#include <string.h>
#include <structmember.h>

PyTypeObject *NodeType = NULL;         /* strong */
PyTypeObject *GraphType = NULL;        /* strong */
PyTypeObject *GraphModuleType = NULL;  /* strong */

/* Interned strings and the builtins namespace, set by graph_types_init. */
static PyObject *op_names[NODE_OUTPUT + 1];  /* strong: "placeholder", ... */
static PyObject *builtins_dict;              /* strong: builtins.__dict__ */
static PyObject *str_space;                  /* strong: " " */
static PyObject *str_empty;                  /* strong: "" */
static PyObject *str_newline;                /* strong: "\n" */

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

#define IS_NODE(o) Py_IS_TYPE((o), NodeType)

/* Called for each node found in an arg; non-zero stops the walk. */
typedef int (*node_visit_fn)(NodeObject *node, void *ctx);

/*
 * Call fn(node, ctx) for every node in `arg`, looking inside arg containers,
 * in display order.  Returns the first non-zero result of fn, else 0.  Never
 * calls Python code.
 */
static int
arg_walk(PyObject *arg, node_visit_fn fn, void *ctx)
{
    int r = 0;

    if (IS_NODE(arg))
        return fn((NodeObject *)arg, ctx);
    if (PyTuple_CheckExact(arg) || PyList_CheckExact(arg)) {
        for (Py_ssize_t i = 0; r == 0 && i < PySequence_Fast_GET_SIZE(arg); i++)
            r = arg_walk(PySequence_Fast_GET_ITEM(arg, i), fn, ctx);
    }
    else if (PyDict_CheckExact(arg)) {
        Py_ssize_t pos = 0;
        PyObject *key, *value;
        while (r == 0 && PyDict_Next(arg, &pos, &key, &value))
            r = arg_walk(value, fn, ctx);
    }
    else if (PySlice_Check(arg)) {
        PySliceObject *s = (PySliceObject *)arg;
        r = arg_walk(s->start, fn, ctx);
        if (r == 0)
            r = arg_walk(s->stop, fn, ctx);
        if (r == 0)
            r = arg_walk(s->step, fn, ctx);
    }
    return r;
}

/* Maps a node to its replacement; new reference or NULL with an exception. */
typedef PyObject *(*node_map_fn)(NodeObject *node, void *ctx);

/*
 * A copy of `arg` with every node replaced by map(node, ctx): arg containers
 * are rebuilt (lists and dicts are always fresh, even without nodes), other
 * objects are shared.  New reference, or NULL with an exception.
 */
static PyObject *
arg_map(PyObject *arg, node_map_fn map, void *ctx)
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
            item = arg_map(PySequence_Fast_GET_ITEM(arg, i), map, ctx);
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
            item = arg_map(value, map, ctx);
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
        if ((start = arg_map(s->start, map, ctx)) != NULL &&
            (stop = arg_map(s->stop, map, ctx)) != NULL &&
            (step = arg_map(s->step, map, ctx)) != NULL)
            res = PySlice_New(start, stop, step);
        Py_XDECREF(start);
        Py_XDECREF(stop);
        Py_XDECREF(step);
        return res;
    }
    return Py_NewRef(arg);
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
        return arg_walk(arg, visit_any, NULL) != 0;
    return false;
}

/* arg_map callback of graph_call/graph_output: accept nodes of graph `ctx`
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

    cand = has_num ? PyUnicode_FromFormat("%U_%ld", base, num)
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
    Py_DECREF(base);
    return cand;

out_fail:
    Py_XDECREF(cand);
    Py_DECREF(base);
    return NULL;
}

/* ------------------------------------------------------------------ */
/* Rendering: targets and args as fx prints them.                      */

/* A str attribute of obj, or NULL; never leaves an exception set. */
static PyObject *
str_attr(PyObject *obj, const char *name)
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

static bool
is_ufunc(PyObject *obj)
{
    return strcmp(Py_TYPE(obj)->tp_name, "numpy.ufunc") == 0;
}

/*
 * The qualified name of a callable as fx prints targets: "operator.add",
 * "numpy.absolute", "numpy.linalg.norm", "numpy.ndarray.sum", and builtins
 * bare ("len").  New str; NULL without an exception when obj has no
 * __qualname__ / __name__; NULL with an exception on memory errors.
 */
static PyObject *
callable_name(PyObject *obj)
{
    PyObject *qual, *mod, *res;

    qual = str_attr(obj, "__qualname__");
    if (qual == NULL)
        qual = str_attr(obj, "__name__");
    if (qual == NULL)
        return NULL;
    mod = str_attr(obj, "__module__");
    if (mod == NULL) {
        PyObject *cls = PyObject_GetAttrString(obj, "__objclass__");
        if (cls == NULL)
            PyErr_Clear();
        else {
            mod = str_attr(cls, "__module__");
            Py_DECREF(cls);
        }
    }
    if (mod == NULL && is_ufunc(obj))
        mod = PyUnicode_FromString("numpy");
    if (mod == NULL || PyUnicode_CompareWithASCIIString(mod, "builtins") == 0)
        res = Py_NewRef(qual);
    else if (PyUnicode_CompareWithASCIIString(mod, "_operator") == 0)
        res = PyUnicode_FromFormat("operator.%U", qual);
    else
        res = PyUnicode_FromFormat("%U.%U", mod, qual);
    Py_XDECREF(mod);
    Py_DECREF(qual);
    return res;
}

/* How a call_function target is shown; falls back to repr().  New str or
   NULL. */
static PyObject *
render_target(PyObject *target)
{
    PyObject *s = callable_name(target);

    if (s == NULL && !PyErr_Occurred())
        s = PyObject_Repr(target);
    return s;
}

/* s with every run of whitespace folded into one space when s spans several
   lines (array reprs), else s itself.  Steals s; new str or NULL. */
static PyObject *
fold_lines_steal(PyObject *s)
{
    PyObject *parts, *res;

    if (s == NULL || PyUnicode_FindChar(s, '\n', 0, PyUnicode_GET_LENGTH(s), 1) < 0)
        return s;
    parts = PyUnicode_Split(s, NULL, -1);
    Py_DECREF(s);
    if (parts == NULL)
        return NULL;
    res = PyUnicode_Join(str_space, parts);
    Py_DECREF(parts);
    return res;
}

typedef enum RenderStyle {
    RENDER_GRAPH,   /* Graph.__str__: "%name", constants with str(), dict keys bare */
    RENDER_CODE,    /* GraphModule.code: "name", constants with repr() */
} RenderStyle;

/* Append a new str (stolen, may be NULL after a failure) to list `out`. */
static int
append_steal(PyObject *out, PyObject *s)
{
    int r;

    if (s == NULL)
        return -1;
    r = PyList_Append(out, s);
    Py_DECREF(s);
    return r;
}

static int
append_cstr(PyObject *out, const char *s)
{
    return append_steal(out, PyUnicode_FromString(s));
}

/* Text of a constant: callables by name, else str() or repr(), folded. */
static PyObject *
render_const(PyObject *obj, RenderStyle style)
{
    if (PyCallable_Check(obj)) {
        PyObject *name = callable_name(obj);
        if (name != NULL || PyErr_Occurred())
            return name;
    }
    return fold_lines_steal(style == RENDER_GRAPH ? PyObject_Str(obj)
                                                  : PyObject_Repr(obj));
}

static int render_arg(PyObject *out, PyObject *arg, RenderStyle style);

/* Items of a tuple or list separated by ", ", starting at `start`. */
static int
render_items(PyObject *out, PyObject *seq, Py_ssize_t start, RenderStyle style)
{
    for (Py_ssize_t i = start; i < PySequence_Fast_GET_SIZE(seq); i++) {
        if (i > start && append_cstr(out, ", ") < 0)
            return -1;
        if (render_arg(out, PySequence_Fast_GET_ITEM(seq, i), style) < 0)
            return -1;
    }
    return 0;
}

/*
 * Append the text of one arg to the list `out`: nodes by name, arg containers
 * as Python displays, constants via render_const.  0 / -1.
 */
static int
render_arg(PyObject *out, PyObject *arg, RenderStyle style)
{
    if (IS_NODE(arg)) {
        PyObject *name = ((NodeObject *)arg)->name;
        if (style == RENDER_GRAPH)
            return append_steal(out, PyUnicode_FromFormat("%%%U", name));
        return PyList_Append(out, name);
    }
    if (PyTuple_CheckExact(arg)) {
        if (append_cstr(out, "(") < 0 || render_items(out, arg, 0, style) < 0)
            return -1;
        return append_cstr(out, PyTuple_GET_SIZE(arg) == 1 ? ",)" : ")");
    }
    if (PyList_CheckExact(arg)) {
        if (append_cstr(out, "[") < 0 || render_items(out, arg, 0, style) < 0)
            return -1;
        return append_cstr(out, "]");
    }
    if (PyDict_CheckExact(arg)) {
        Py_ssize_t pos = 0;
        PyObject *key, *value;
        bool first = true;
        if (append_cstr(out, "{") < 0)
            return -1;
        while (PyDict_Next(arg, &pos, &key, &value)) {
            if (!first && append_cstr(out, ", ") < 0)
                return -1;
            first = false;
            if (append_steal(out, style == RENDER_GRAPH ? PyObject_Str(key)
                                                        : PyObject_Repr(key)) < 0 ||
                append_cstr(out, ": ") < 0 ||
                render_arg(out, value, style) < 0)
                return -1;
        }
        return append_cstr(out, "}");
    }
    if (PySlice_Check(arg)) {
        PySliceObject *s = (PySliceObject *)arg;
        if (append_cstr(out, "slice(") < 0 ||
            render_arg(out, s->start, style) < 0 || append_cstr(out, ", ") < 0 ||
            render_arg(out, s->stop, style) < 0 || append_cstr(out, ", ") < 0 ||
            render_arg(out, s->step, style) < 0)
            return -1;
        return append_cstr(out, ")");
    }
    return append_steal(out, render_const(arg, style));
}

/* "".join(list), stealing the list.  New str or NULL. */
static PyObject *
join_steal(PyObject *list)
{
    PyObject *res;

    if (list == NULL)
        return NULL;
    res = PyUnicode_Join(str_empty, list);
    Py_DECREF(list);
    return res;
}

/* A str of n copies of the ASCII character c.  New str or NULL. */
static PyObject *
repeat_char(char c, Py_ssize_t n)
{
    PyObject *s = PyUnicode_New(n, 127);

    if (s != NULL)
        memset(PyUnicode_1BYTE_DATA(s), c, (size_t)n);
    return s;
}

/* Write a str to sys.stdout (so pytest's capture sees it).  0 / -1. */
static int
write_stdout(PyObject *text)
{
    PyObject *out = PySys_GetObject("stdout");   /* borrowed */
    PyObject *r;

    if (out == NULL || out == Py_None)
        return 0;
    r = PyObject_CallMethod(out, "write", "O", text);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    return 0;
}

/* ------------------------------------------------------------------ */
/* Node.                                                               */

static int
node_traverse(NodeObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->name);
    Py_VISIT(self->target);
    Py_VISIT(self->args);
    Py_VISIT(self->kwargs);
    Py_VISIT(self->meta);
    return 0;
}

static int
node_clear(NodeObject *self)
{
    Py_CLEAR(self->name);
    Py_CLEAR(self->target);
    Py_CLEAR(self->args);
    Py_CLEAR(self->kwargs);
    Py_CLEAR(self->meta);
    self->graph = NULL;
    return 0;
}

static void
node_dealloc(NodeObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);

    PyObject_GC_UnTrack(self);
    node_clear(self);
    tp->tp_free((PyObject *)self);
    Py_DECREF(tp);
}

static PyObject *
node_repr(NodeObject *self)
{
    if (self->name == NULL)
        return PyUnicode_FromString("<cleared node>");
    return Py_NewRef(self->name);
}

static PyObject *
node_get_op(NodeObject *self, void *closure)
{
    (void)closure;
    return Py_NewRef(op_names[self->op]);
}

static PyObject *
node_get_graph(NodeObject *self, void *closure)
{
    (void)closure;
    return Py_NewRef(self->graph != NULL ? self->graph : Py_None);
}

static int
visit_is(NodeObject *node, void *ctx)
{
    return node == (NodeObject *)ctx;
}

/* Node.users: the later nodes whose args or kwargs mention this one, each
   once, in graph order. */
static PyObject *
node_get_users(NodeObject *self, void *closure)
{
    GraphObject *g = (GraphObject *)self->graph;
    PyObject *users = PyList_New(0);

    (void)closure;
    if (users == NULL || g == NULL)
        return users;
    for (Py_ssize_t i = self->index + 1; i < PyList_GET_SIZE(g->nodes); i++) {
        NodeObject *u = (NodeObject *)PyList_GET_ITEM(g->nodes, i);
        if ((arg_walk(u->args, visit_is, self) || arg_walk(u->kwargs, visit_is, self)) &&
            PyList_Append(users, (PyObject *)u) < 0) {
            Py_DECREF(users);
            return NULL;
        }
    }
    return users;
}

static PyMemberDef node_members[] = {
    {"name", T_OBJECT, offsetof(NodeObject, name), READONLY,
     "Unique name of the node in its graph."},
    {"target", T_OBJECT, offsetof(NodeObject, target), READONLY,
     "Callable (call_function) or name (other ops)."},
    {"args", T_OBJECT, offsetof(NodeObject, args), READONLY,
     "Positional arguments: nodes and constants (tuple)."},
    {"kwargs", T_OBJECT, offsetof(NodeObject, kwargs), READONLY,
     "Keyword arguments (dict)."},
    {"meta", T_OBJECT, offsetof(NodeObject, meta), READONLY,
     "Metadata: example_value, type, shape, dtype when known (dict)."},
    {"index", T_INT, offsetof(NodeObject, index), READONLY,
     "Position of the node in its graph."},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef node_getset[] = {
    {"op", (getter)node_get_op, NULL,
     "One of placeholder, get_attr, call_function, call_method, call_module, output.",
     NULL},
    {"graph", (getter)node_get_graph, NULL, "The owning graph, or None.", NULL},
    {"users", (getter)node_get_users, NULL,
     "Nodes that use this node (list, computed on demand).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot node_slots[] = {
    {Py_tp_doc, "A node of a dynscope graph, shaped like torch.fx.Node."},
    {Py_tp_dealloc, node_dealloc},
    {Py_tp_traverse, node_traverse},
    {Py_tp_clear, node_clear},
    {Py_tp_repr, node_repr},
    {Py_tp_members, node_members},
    {Py_tp_getset, node_getset},
    {0, NULL},
};

static PyType_Spec node_spec = {
    .name = "dynscope._C.Node",
    .basicsize = sizeof(NodeObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC |
             Py_TPFLAGS_DISALLOW_INSTANTIATION | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = node_slots,
};

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
        Py_SETREF(v, PyObject_Str(v));
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
    if (g->nodes == NULL || g->names == NULL) {
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
    /* An exact dict copy so arg_map rebuilds it. */
    PyObject *plain = PyDict_Copy(kwargs);
    if (plain == NULL)
        return NULL;
    PyObject *res = arg_map(plain, map_check_graph, g);
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
                         op_names[op], Py_TYPE(target)->tp_name);
            return -1;
        }
        return 0;
    default:
        if ((unsigned)op > NODE_OUTPUT)
            PyErr_Format(PyExc_ValueError, "bad node op %d", (int)op);
        else
            PyErr_Format(PyExc_ValueError,
                         "graph_call cannot add a %U node", op_names[op]);
        return -1;
    }
}

/* fx-style default name hint: the function's __name__, or the method /
   attribute name.  *keep gets the str owning the returned chars (or NULL);
   release it once the hint is used.  Cannot fail. */
static const char *
default_hint(NodeOp op, PyObject *target, PyObject **keep)
{
    *keep = op == NODE_CALL_FUNCTION ? str_attr(target, "__name__")
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
    args_copy = arg_map(args, map_check_graph, g);
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
void
graph_truncate(GraphObject *g, int keep_calls)
{
    Py_ssize_t first = g->nplaceholders + keep_calls;
    while (PyList_GET_SIZE(g->nodes) > first) {
        Py_ssize_t last = PyList_GET_SIZE(g->nodes) - 1;
        NodeObject *node = (NodeObject *)PyList_GET_ITEM(g->nodes, last);
        if (PySet_Discard(g->names, node->name) < 0)
            PyErr_Clear();
        node->graph = NULL;
        if (PyList_SetSlice(g->nodes, last, last + 1, NULL) < 0) {
            PyErr_Clear();
            break;
        }
    }
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
    copy = arg_map(outputs, map_check_graph, g);
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
/* Graph: Python type.                                                 */

#define GRAPH_NODE(g, i) ((NodeObject *)PyList_GET_ITEM((g)->nodes, (i)))

static int
graph_traverse(GraphObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    /* The untracked list's references are visited here, in its place. */
    if (self->nodes != NULL)
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(self->nodes); i++)
            Py_VISIT(PyList_GET_ITEM(self->nodes, i));
    Py_VISIT(self->names);
    return 0;
}

static int
graph_clear(GraphObject *self)
{
    if (self->nodes != NULL)
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(self->nodes); i++)
            GRAPH_NODE(self, i)->graph = NULL;
    Py_CLEAR(self->nodes);
    Py_CLEAR(self->names);
    return 0;
}

static void
graph_dealloc(GraphObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);

    PyObject_GC_UnTrack(self);
    graph_clear(self);
    tp->tp_free((PyObject *)self);
    Py_DECREF(tp);
}

static PyObject *
graph_get_nodes(GraphObject *self, void *closure)
{
    (void)closure;
    if (self->nodes == NULL)
        return PyTuple_New(0);
    return PyList_AsTuple(self->nodes);
}

/* fx's num_users for every node at once: counts[i] = distinct users of node i. */
struct user_count {
    int *counts;
    int *last_user;    /* last node counted as a user of node i, dedup */
    int user;
};

static int
visit_count(NodeObject *node, void *ctx)
{
    struct user_count *uc = ctx;

    if (uc->last_user[node->index] != uc->user) {
        uc->last_user[node->index] = uc->user;
        uc->counts[node->index]++;
    }
    return 0;
}

/* counts of users per node: PyMem array of len(nodes) ints, or NULL. */
static int *
graph_user_counts(GraphObject *g)
{
    Py_ssize_t n = PyList_GET_SIZE(g->nodes);
    struct user_count uc;

    uc.counts = PyMem_Calloc((size_t)n + 1, sizeof(int));
    uc.last_user = PyMem_Malloc(((size_t)n + 1) * sizeof(int));
    if (uc.counts == NULL || uc.last_user == NULL) {
        PyMem_Free(uc.counts);
        PyMem_Free(uc.last_user);
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        uc.last_user[i] = -1;
    for (uc.user = 0; uc.user < n; uc.user++) {
        NodeObject *u = GRAPH_NODE(g, uc.user);
        arg_walk(u->args, visit_count, &uc);
        arg_walk(u->kwargs, visit_count, &uc);
    }
    PyMem_Free(uc.last_user);
    return uc.counts;
}

/* One line of Graph.__str__ (without indentation) appended to out. */
static int
graph_format_node(PyObject *out, NodeObject *node, int nusers)
{
    if (node->op == NODE_OUTPUT) {
        if (append_cstr(out, "return ") < 0)
            return -1;
        return render_arg(out, PyTuple_GET_ITEM(node->args, 0), RENDER_CODE);
    }
    if (append_steal(out, PyUnicode_FromFormat("%%%U : [num_users=%d] = %U[target=",
                                               node->name, nusers,
                                               op_names[node->op])) < 0)
        return -1;
    if (append_steal(out, node->op == NODE_CALL_FUNCTION
                              ? render_target(node->target)
                              : PyObject_Str(node->target)) < 0)
        return -1;
    if (node->op == NODE_PLACEHOLDER || node->op == NODE_GET_ATTR)
        return append_cstr(out, "]");
    if (append_cstr(out, "](args = ") < 0 ||
        render_arg(out, node->args, RENDER_GRAPH) < 0 ||
        append_cstr(out, ", kwargs = ") < 0 ||
        render_arg(out, node->kwargs, RENDER_GRAPH) < 0)
        return -1;
    return append_cstr(out, ")");
}

/* Graph.__str__, like torch.fx:
       graph():
           %l_a_ : [num_users=1] = placeholder[target=l_a_]
           %abs_1 : [num_users=1] = call_function[target=numpy.absolute](args = (%l_a_,), kwargs = {})
           return (abs_1,) */
static PyObject *
graph_str(GraphObject *self)
{
    PyObject *out = NULL;
    int *counts;

    if (self->nodes == NULL)
        return PyUnicode_FromString("graph():");
    counts = graph_user_counts(self);
    if (counts == NULL)
        return NULL;
    out = PyList_New(0);
    if (out == NULL || append_cstr(out, "graph():") < 0)
        goto out_fail;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(self->nodes); i++) {
        if (append_cstr(out, "\n    ") < 0 ||
            graph_format_node(out, GRAPH_NODE(self, i), counts[i]) < 0)
            goto out_fail;
    }
    PyMem_Free(counts);
    return join_steal(out);

out_fail:
    PyMem_Free(counts);
    Py_XDECREF(out);
    return NULL;
}

enum { TAB_COLS = 5 };

/* The five cells of a node's print_tabular row.  New tuple or NULL. */
static PyObject *
graph_tabular_row(NodeObject *node)
{
    PyObject *target = node->op == NODE_CALL_FUNCTION
                           ? render_target(node->target)
                           : PyObject_Str(node->target);
    PyObject *args = fold_lines_steal(PyObject_Str(node->args));
    PyObject *kwargs = fold_lines_steal(PyObject_Str(node->kwargs));
    PyObject *row = NULL;

    if (target != NULL && args != NULL && kwargs != NULL)
        row = PyTuple_Pack(TAB_COLS, op_names[node->op], node->name, target,
                           args, kwargs);
    Py_XDECREF(target);
    Py_XDECREF(args);
    Py_XDECREF(kwargs);
    return row;
}

/* Append `cell` padded with spaces to `width` characters. */
static int
append_padded(PyObject *out, PyObject *cell, Py_ssize_t width)
{
    Py_ssize_t pad = width - PyUnicode_GET_LENGTH(cell);

    if (PyList_Append(out, cell) < 0)
        return -1;
    if (pad <= 0)
        return 0;
    return append_steal(out, repeat_char(' ', pad));
}

/* The print_tabular text: aligned columns, a header row and a dash rule, like
   tabulate's "simple" format that fx uses.  New str or NULL. */
PyObject *
graph_tabular(GraphObject *self)
{
    static const char *const headers[TAB_COLS] = {
        "opcode", "name", "target", "args", "kwargs"};
    Py_ssize_t n = self->nodes ? PyList_GET_SIZE(self->nodes) : 0;
    Py_ssize_t width[TAB_COLS];
    PyObject *rows = PyList_New(n + 2), *out = NULL, *row;

    if (rows == NULL)
        return NULL;
    row = PyTuple_New(TAB_COLS);
    if (row == NULL)
        goto out_fail;
    PyList_SET_ITEM(rows, 0, row);
    for (int c = 0; c < TAB_COLS; c++) {
        PyObject *h = PyUnicode_FromString(headers[c]);
        if (h == NULL)
            goto out_fail;
        PyTuple_SET_ITEM(row, c, h);
        width[c] = PyUnicode_GET_LENGTH(h);
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        row = graph_tabular_row(GRAPH_NODE(self, i));
        if (row == NULL)
            goto out_fail;
        PyList_SET_ITEM(rows, i + 2, row);
        for (int c = 0; c < TAB_COLS; c++)
            if (PyUnicode_GET_LENGTH(PyTuple_GET_ITEM(row, c)) > width[c])
                width[c] = PyUnicode_GET_LENGTH(PyTuple_GET_ITEM(row, c));
    }
    row = PyTuple_New(TAB_COLS);        /* the rule under the header */
    if (row == NULL)
        goto out_fail;
    PyList_SET_ITEM(rows, 1, row);
    for (int c = 0; c < TAB_COLS; c++) {
        PyObject *rule = repeat_char('-', width[c]);
        if (rule == NULL)
            goto out_fail;
        PyTuple_SET_ITEM(row, c, rule);
    }

    out = PyList_New(0);
    if (out == NULL)
        goto out_fail;
    for (Py_ssize_t i = 0; i < n + 2; i++) {
        row = PyList_GET_ITEM(rows, i);
        for (int c = 0; c < TAB_COLS; c++) {
            PyObject *cell = PyTuple_GET_ITEM(row, c);
            int r = c + 1 < TAB_COLS ? append_padded(out, cell, width[c] + 2)
                                     : PyList_Append(out, cell);
            if (r < 0)
                goto out_fail;
        }
        if (PyList_Append(out, str_newline) < 0)
            goto out_fail;
    }
    Py_DECREF(rows);
    return join_steal(out);

out_fail:
    Py_XDECREF(out);
    Py_DECREF(rows);
    return NULL;
}

static PyObject *
graph_print_tabular(GraphObject *self, PyObject *unused)
{
    PyObject *text = graph_tabular(self);
    int r;

    (void)unused;
    if (text == NULL)
        return NULL;
    r = write_stdout(text);
    Py_DECREF(text);
    if (r < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *
graph_get_finished(GraphObject *self, void *closure)
{
    (void)closure;
    return PyBool_FromLong(self->finished);
}

static PyMethodDef graph_methods[] = {
    {"print_tabular", (PyCFunction)graph_print_tabular, METH_NOARGS,
     "Print the nodes as a table (opcode, name, target, args, kwargs)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef graph_getset[] = {
    {"nodes", (getter)graph_get_nodes, NULL, "The nodes, in order (tuple).", NULL},
    {"finished", (getter)graph_get_finished, NULL,
     "Whether the output node was added.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot graph_slots[] = {
    {Py_tp_doc, "A captured graph, shaped like torch.fx.Graph."},
    {Py_tp_dealloc, graph_dealloc},
    {Py_tp_traverse, graph_traverse},
    {Py_tp_clear, graph_clear},
    {Py_tp_str, graph_str},
    {Py_tp_methods, graph_methods},
    {Py_tp_getset, graph_getset},
    {0, NULL},
};

static PyType_Spec graph_spec = {
    .name = "dynscope._C.Graph",
    .basicsize = sizeof(GraphObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC |
             Py_TPFLAGS_DISALLOW_INSTANTIATION | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = graph_slots,
};

/* ------------------------------------------------------------------ */
/* The interpreter: a finished graph compiled into a flat program.     */
/*
 * Every node but the output has a value slot: slot i holds the value of node
 * i.  Slots [0, ninputs) are the placeholders and borrow forward()'s
 * arguments; the others hold strong references from their instruction until
 * their last reader has run (frees lists), or until the output is built.
 * Each call node becomes one Instr whose args are slot numbers or constants,
 * so the common case fills a stack array of borrowed pointers and calls
 * PyObject_Vectorcall.  An arg that nests nodes (or a list / dict, which must
 * be fresh on every call) is ARG_NESTED and rebuilt by arg_map per call.
 */

typedef enum ArgKind {
    ARG_SLOT,      /* the value in slot `slot` */
    ARG_CONST,     /* obj, shared by every call */
    ARG_NESTED,    /* obj with its nodes replaced by their values, rebuilt per call */
} ArgKind;

typedef struct Arg {
    ArgKind kind;
    int slot;              /* ARG_SLOT only */
    PyObject *obj;         /* strong: the constant or the template; NULL for ARG_SLOT */
} Arg;

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

typedef struct Instr {
    NodeOp op;             /* CALL_FUNCTION / CALL_METHOD run; GET_ATTR / CALL_MODULE raise */
    int dest;              /* slot of the result */
    int nargs;             /* positional args; call_method counts self (args[0]) */
    int nkw;               /* keyword args, named by kwnames */
    bool nested;           /* some arg is ARG_NESTED: the slow path */
    bool op_function;      /* target is an operator-module function (see
                              is_operator_function): called directly */
    PyObject *target;      /* strong: callable, or method / attribute name */
    PyObject *kwnames;     /* strong: tuple of str, NULL when nkw == 0 */
    PyObject *name;        /* strong: the node's name, for error messages */
    Arg *args;             /* into Program.args: nargs + nkw items */
    int nfree;
    int *free;             /* into Program.frees: owned slots dead after this instr */
} Instr;

typedef struct Program {
    bool ready;            /* false before compile and after clear: refuse to run */
    int ninputs;           /* placeholders = slots borrowed from the arguments */
    int nslots;
    int ninstr;
    Instr *instr;          /* owned: ninstr */
    int nout;
    Arg *out;              /* into args: the outputs tuple's items */
    int nend;
    int *end;              /* into frees: owned slots read by the output */
    Arg *args;             /* owned: every Instr's args, then out */
    int *frees;            /* owned: nslots - ninputs slot numbers */
} Program;

/* Arguments and values small enough for the C stack. */
enum { SMALL_ARGS = 8, SMALL_SLOTS = 32 };

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
        arg_walk(obj, visit_last_use, ctx);
    }
}

static void
program_clear(Program *p)
{
    Py_ssize_t nargs_total = 0;

    for (int i = 0; i < p->ninstr && p->instr != NULL; i++) {
        Py_CLEAR(p->instr[i].target);
        Py_CLEAR(p->instr[i].kwnames);
        Py_CLEAR(p->instr[i].name);
        nargs_total += p->instr[i].nargs + p->instr[i].nkw;
    }
    nargs_total += p->nout;
    for (Py_ssize_t i = 0; i < nargs_total && p->args != NULL; i++)
        Py_CLEAR(p->args[i].obj);
    PyMem_Free(p->instr);
    PyMem_Free(p->args);
    PyMem_Free(p->frees);
    memset(p, 0, sizeof(*p));
}

static int
program_traverse(Program *p, visitproc visit, void *arg)
{
    Py_ssize_t nargs_total = p->nout;

    for (int i = 0; i < p->ninstr && p->instr != NULL; i++) {
        Py_VISIT(p->instr[i].target);
        Py_VISIT(p->instr[i].kwnames);
        Py_VISIT(p->instr[i].name);
        nargs_total += p->instr[i].nargs + p->instr[i].nkw;
    }
    for (Py_ssize_t i = 0; i < nargs_total && p->args != NULL; i++)
        Py_VISIT(p->args[i].obj);
    return 0;
}

/* Fill instruction k from call node `node`.  0 / -1. */
static int
instr_compile(Instr *in, NodeObject *node, Arg *args, int k, int *last_use)
{
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    int j;

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
    return 0;
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
static int
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
    }
    p->out = p->args + pos;
    for (int j = 0; j < p->nout; j++)
        arg_compile(&p->out[j], PyTuple_GET_ITEM(outs, j), p->ninstr, last_use);
    if (program_plan_frees(p, last_use) < 0)
        goto out_fail;
    PyMem_Free(last_use);
    p->ready = true;
    return 0;

out_fail:
    PyMem_Free(last_use);
    return -1;
}

/* arg_map callback of the slow path: a node's current value. */
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
        return arg_map(a->obj, map_value, v);
    }
}

static PyObject *
instr_unsupported(const Instr *in)
{
    PyErr_Format(PyExc_NotImplementedError,
                 "the eager interpreter does not run %U nodes (node '%U')",
                 op_names[in->op], in->name);
    return NULL;
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
    if (in->op_function && in->kwnames == NULL)
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

/*
 * Run the program on `inputs` (borrowed, ninputs of them).  Returns the tuple
 * of outputs, or NULL with an exception; every intermediate value is released
 * either way.
 */
static PyObject *
program_run(const Program *p, PyObject *const *inputs, Py_ssize_t ninputs)
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
    if (p->ninputs > 0)
        memcpy(v, inputs, (size_t)p->ninputs * sizeof(PyObject *));
    memset(v + p->ninputs, 0, (size_t)(p->nslots - p->ninputs) * sizeof(PyObject *));

    for (k = 0; k < p->ninstr; k++) {
        const Instr *in = &p->instr[k];
        PyObject *r = instr_run(in, v);
        if (r == NULL)
            goto out_release_all;
        v[in->dest] = r;
        for (int j = 0; j < in->nfree; j++)
            Py_CLEAR(v[in->free[j]]);
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
        Py_CLEAR(v[p->end[j]]);
    goto out_free;

out_release_all:
    for (int s = p->ninputs; s < p->nslots; s++)
        Py_CLEAR(v[s]);
out_free:
    if (v != small)
        PyMem_Free(v);
    return result;
}

/* ------------------------------------------------------------------ */
/* GraphModule.                                                        */

typedef struct GraphModuleObject {
    PyObject_HEAD
    vectorcallfunc vectorcall;   /* gm_vectorcall: gm(*inputs) */
    PyObject *graph;             /* strong: the finished GraphObject */
    PyObject *code;              /* strong: generated source, made on first use; or NULL */
    Program prog;                /* what forward() runs */
} GraphModuleObject;

static int
gm_traverse(GraphModuleObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->graph);
    Py_VISIT(self->code);
    return program_traverse(&self->prog, visit, arg);
}

static int
gm_clear(GraphModuleObject *self)
{
    program_clear(&self->prog);
    Py_CLEAR(self->graph);
    Py_CLEAR(self->code);
    return 0;
}

static void
gm_dealloc(GraphModuleObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);

    PyObject_GC_UnTrack(self);
    gm_clear(self);
    tp->tp_free((PyObject *)self);
    Py_DECREF(tp);
}

static PyObject *
gm_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf,
              PyObject *kwnames)
{
    if (kwnames != NULL && PyTuple_GET_SIZE(kwnames) > 0) {
        PyErr_SetString(PyExc_TypeError, "forward() takes no keyword arguments");
        return NULL;
    }
    return program_run(&((GraphModuleObject *)self)->prog, args,
                       PyVectorcall_NARGS(nargsf));
}

static PyObject *
gm_forward(GraphModuleObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    return program_run(&self->prog, args, nargs);
}

bool
graph_is_forward(PyObject *fn)
{
    return PyCFunction_Check(fn)
           && PyCFunction_GET_FUNCTION(fn) == (PyCFunction)(void (*)(void))gm_forward;
}

PyObject *
graph_forward_unchecked(PyObject *fn, PyObject *const *args, Py_ssize_t nargs)
{
    return gm_forward((GraphModuleObject *)PyCFunction_GET_SELF(fn), args, nargs);
}

/* "name(a, b, k=v)" style call arguments, args[start:] then kwargs. */
static int
render_call_args(PyObject *out, NodeObject *node, Py_ssize_t start)
{
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    bool first = PyTuple_GET_SIZE(node->args) <= start;

    if (append_cstr(out, "(") < 0 || render_items(out, node->args, start, RENDER_CODE) < 0)
        return -1;
    while (PyDict_Next(node->kwargs, &pos, &key, &value)) {
        if ((!first && append_cstr(out, ", ") < 0) ||
            append_steal(out, PyUnicode_FromFormat("%U=", key)) < 0 ||
            render_arg(out, value, RENDER_CODE) < 0)
            return -1;
        first = false;
    }
    return append_cstr(out, ")");
}

/* One "    name = ..." line of forward's source. */
static int
code_node_line(PyObject *out, NodeObject *node)
{
    PyObject *self_arg;

    if (append_steal(out, PyUnicode_FromFormat("    %U = ", node->name)) < 0)
        return -1;
    switch (node->op) {
    case NODE_CALL_FUNCTION:
        if (append_steal(out, render_target(node->target)) < 0 ||
            render_call_args(out, node, 0) < 0)
            return -1;
        break;
    case NODE_CALL_METHOD:
        self_arg = PyTuple_GET_ITEM(node->args, 0);
        if ((!IS_NODE(self_arg) && append_cstr(out, "(") < 0) ||
            render_arg(out, self_arg, RENDER_CODE) < 0 ||
            (!IS_NODE(self_arg) && append_cstr(out, ")") < 0) ||
            append_steal(out, PyUnicode_FromFormat(".%U", node->target)) < 0 ||
            render_call_args(out, node, 1) < 0)
            return -1;
        break;
    case NODE_GET_ATTR:
        if (append_steal(out, PyUnicode_FromFormat("self.%U", node->target)) < 0)
            return -1;
        break;
    default:    /* NODE_CALL_MODULE */
        if (append_steal(out, PyUnicode_FromFormat("self.%U", node->target)) < 0 ||
            render_call_args(out, node, 0) < 0)
            return -1;
        break;
    }
    return append_cstr(out, "\n");
}

/* GraphModule.code: the Python source of forward.  New str or NULL. */
static PyObject *
gm_build_code(GraphObject *g)
{
    PyObject *out = PyList_New(0);
    Py_ssize_t n = PyList_GET_SIZE(g->nodes);

    if (out == NULL || append_cstr(out, "def forward(self") < 0)
        goto out_fail;
    for (Py_ssize_t i = 0; i < g->nplaceholders; i++)
        if (append_steal(out, PyUnicode_FromFormat(", %U", GRAPH_NODE(g, i)->name)) < 0)
            goto out_fail;
    if (append_cstr(out, "):\n") < 0)
        goto out_fail;
    for (Py_ssize_t i = g->nplaceholders; i < n - 1; i++)
        if (code_node_line(out, GRAPH_NODE(g, i)) < 0)
            goto out_fail;
    if (append_cstr(out, "    return ") < 0 ||
        render_arg(out, PyTuple_GET_ITEM(GRAPH_NODE(g, n - 1)->args, 0), RENDER_CODE) < 0 ||
        append_cstr(out, "\n") < 0)
        goto out_fail;
    return join_steal(out);

out_fail:
    Py_XDECREF(out);
    return NULL;
}

static PyObject *
gm_get_code(GraphModuleObject *self, void *closure)
{
    PyObject *code;

    (void)closure;
    if (self->code != NULL)
        return Py_NewRef(self->code);
    if (self->graph == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "GraphModule was cleared");
        return NULL;
    }
    /* Rendering calls repr() and may release the GIL: another thread can
       fill self->code meanwhile; the first one stored wins. */
    code = gm_build_code((GraphObject *)self->graph);
    if (code == NULL)
        return NULL;
    if (self->code == NULL)
        self->code = Py_NewRef(code);
    Py_DECREF(code);
    return Py_NewRef(self->code);
}

static PyObject *
gm_print_readable(GraphModuleObject *self, PyObject *unused)
{
    PyObject *code = gm_get_code(self, NULL);
    int r;

    (void)unused;
    if (code == NULL)
        return NULL;
    r = write_stdout(code);
    Py_DECREF(code);
    if (r < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *
gm_repr(GraphModuleObject *self)
{
    const Program *p = &self->prog;

    return PyUnicode_FromFormat("<GraphModule inputs=%d ops=%d outputs=%d>",
                                p->ninputs, p->ninstr, p->nout);
}

static PyMemberDef gm_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(GraphModuleObject, vectorcall),
     READONLY, NULL},
    {"graph", T_OBJECT, offsetof(GraphModuleObject, graph), READONLY,
     "The graph this module runs."},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef gm_getset[] = {
    {"code", (getter)gm_get_code, NULL, "Python source of forward (str).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef gm_methods[] = {
    {"forward", (PyCFunction)(void (*)(void))gm_forward, METH_FASTCALL,
     "forward(*inputs) -> tuple of outputs; runs the graph eagerly."},
    {"print_readable", (PyCFunction)gm_print_readable, METH_NOARGS,
     "Print the generated source of forward."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot gm_slots[] = {
    {Py_tp_doc, "A runnable graph, shaped like torch.fx.GraphModule."},
    {Py_tp_dealloc, gm_dealloc},
    {Py_tp_traverse, gm_traverse},
    {Py_tp_clear, gm_clear},
    {Py_tp_call, PyVectorcall_Call},
    {Py_tp_repr, gm_repr},
    {Py_tp_members, gm_members},
    {Py_tp_getset, gm_getset},
    {Py_tp_methods, gm_methods},
    {0, NULL},
};

static PyType_Spec gm_spec = {
    .name = "dynscope._C.GraphModule",
    .basicsize = sizeof(GraphModuleObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL |
             Py_TPFLAGS_DISALLOW_INSTANTIATION | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = gm_slots,
};

/*
 * A GraphModule over finished graph g, with g compiled for forward().  New
 * reference, or NULL with ValueError (g not finished) or a memory error.
 */
PyObject *
graph_module_new(GraphObject *g)
{
    GraphModuleObject *gm;

    ENGINE_ASSERT(g != NULL && Py_IS_TYPE(g, GraphType));
    if (!g->finished) {
        PyErr_SetString(PyExc_ValueError,
                        "GraphModule needs a finished graph (no output node)");
        return NULL;
    }
    gm = (GraphModuleObject *)GraphModuleType->tp_alloc(GraphModuleType, 0);
    if (gm == NULL)
        return NULL;
    gm->vectorcall = gm_vectorcall;
    gm->graph = Py_NewRef(g);
    if (program_compile(&gm->prog, g) < 0) {
        Py_DECREF(gm);
        return NULL;
    }
    return (PyObject *)gm;
}

/* ------------------------------------------------------------------ */
/* Initialization.                                                     */

static PyTypeObject *
make_type(PyObject *module, PyType_Spec *spec)
{
    PyObject *tp = PyType_FromModuleAndSpec(module, spec, NULL);

    if (tp == NULL)
        return NULL;
    if (PyModule_AddType(module, (PyTypeObject *)tp) < 0) {
        Py_DECREF(tp);
        return NULL;
    }
    return (PyTypeObject *)tp;
}

/*
 * Create Node, Graph and GraphModule (heap types of `module`), publish them
 * in NodeType / GraphType / GraphModuleType and as module attributes.  Must
 * run before any other function of this file.  0, or -1 with an exception.
 */
int
graph_types_init(PyObject *module)
{
    static const char *const ops[NODE_OUTPUT + 1] = {
        "placeholder", "get_attr", "call_function",
        "call_method", "call_module", "output"};
    PyObject *builtins;

    for (int i = 0; i <= NODE_OUTPUT; i++) {
        Py_XSETREF(op_names[i], PyUnicode_InternFromString(ops[i]));
        if (op_names[i] == NULL)
            return -1;
    }
    Py_XSETREF(str_space, PyUnicode_FromString(" "));
    Py_XSETREF(str_empty, PyUnicode_FromString(""));
    Py_XSETREF(str_newline, PyUnicode_FromString("\n"));
    if (str_space == NULL || str_empty == NULL || str_newline == NULL)
        return -1;
    builtins = PyImport_ImportModule("builtins");
    if (builtins == NULL)
        return -1;
    Py_XSETREF(builtins_dict, Py_NewRef(PyModule_GetDict(builtins)));
    Py_DECREF(builtins);

    Py_XSETREF(NodeType, make_type(module, &node_spec));
    if (NodeType == NULL)
        return -1;
    Py_XSETREF(GraphType, make_type(module, &graph_spec));
    if (GraphType == NULL)
        return -1;
    Py_XSETREF(GraphModuleType, make_type(module, &gm_spec));
    if (GraphModuleType == NULL)
        return -1;
    return 0;
}
