/*
 * graph_render.c -- the graph as text, the way torch.fx prints it:
 * Graph.__str__, print_tabular's table, and GraphModule.code (the Python
 * source of forward).  Contract: graph.h and graph_int.h.
 *
 * Rendering only reads the graph; it calls str() / repr() of constants and
 * targets, so it may run Python code and release the GIL, but it never
 * changes a node.  Multi-line reprs (arrays) are folded onto one line.
 */
#include "graph_int.h"
#include "../base/tensorlib.h"

#include <string.h>

/* Set by graph_render_init. */
static PyObject *str_space;                  /* strong: " " */
static PyObject *str_empty;                  /* strong: "" */
static PyObject *str_newline;                /* strong: "\n" */

/* ------------------------------------------------------------------ */
/* Rendering: targets and args as fx prints them.                      */

static bool
is_ufunc(PyObject *obj)
{
    PyTypeObject *ufunc = tensorlib_ufunc_type();   /* NULL until NumPy is found */
    return ufunc != NULL && Py_IS_TYPE(obj, ufunc);
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

    /* a class's own method bound to it (Square.apply of an
       autograd.Function, whose function's __qualname__ is Function.apply):
       named through the class, so the code calls the same method */
    PyObject *cls = PyMethod_Check(obj) ? PyMethod_GET_SELF(obj)
                    : PyCFunction_Check(obj) ? PyCFunction_GET_SELF(obj) : NULL;     /* borrowed */
    if (cls != NULL && PyType_Check(cls) && (((PyTypeObject *)cls)->tp_flags & Py_TPFLAGS_HEAPTYPE)) {
        PyObject *owner = callable_name(cls);
        PyObject *name = owner ? graph_str_attr(obj, "__name__") : NULL;
        res = name ? PyUnicode_FromFormat("%U.%U", owner, name) : NULL;
        Py_XDECREF(owner);
        Py_XDECREF(name);
        if (res != NULL || PyErr_Occurred())
            return res;
    }
    qual = graph_str_attr(obj, "__qualname__");
    if (qual == NULL)
        qual = graph_str_attr(obj, "__name__");
    if (qual == NULL)
        return NULL;
    mod = graph_str_attr(obj, "__module__");
    if (mod == NULL) {
        PyObject *cls = PyObject_GetAttrString(obj, "__objclass__");
        if (cls == NULL)
            PyErr_Clear();
        else {
            mod = graph_str_attr(cls, "__module__");
            Py_DECREF(cls);
        }
    }
    if (mod == NULL && is_ufunc(obj))
        mod = PyUnicode_FromString("numpy");
    if (mod != NULL && PyUnicode_FindChar(qual, '.', 0, PyUnicode_GET_LENGTH(qual), 1) >= 0) {
        /* a method of a private class the module re-exports as a function
           (torch._C._VariableFunctionsClass.relu is torch.relu): its name in
           the module, so the code runs as written (dumps, repros) */
        PyObject *name = graph_str_attr(obj, "__name__");
        PyObject *module = name ? PyImport_GetModule(mod) : NULL;
        PyObject *there = module ? PyObject_GetAttr(module, name) : NULL;
        if (there == obj)
            Py_SETREF(qual, Py_NewRef(name));
        if (there == NULL || module == NULL)
            PyErr_Clear();
        Py_XDECREF(there);
        Py_XDECREF(module);
        Py_XDECREF(name);
        if (PyErr_Occurred())
            PyErr_Clear();
    }
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

/* See graph_int.h. */
int
graph_write_stdout(PyObject *text)
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
/* Graph.__str__.                                                      */

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
        graph_arg_walk(u->args, visit_count, &uc);
        graph_arg_walk(u->kwargs, visit_count, &uc);
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
                                               graph_op_names[node->op])) < 0)
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
PyObject *
graph_render_str(GraphObject *self)
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

/* ------------------------------------------------------------------ */
/* print_tabular.                                                      */

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
        row = PyTuple_Pack(TAB_COLS, graph_op_names[node->op], node->name, target,
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

/* ------------------------------------------------------------------ */
/* GraphModule.code.                                                   */

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
PyObject *
graph_render_code(GraphObject *g)
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

/* ------------------------------------------------------------------ */
/* Initialization.                                                     */

int
graph_render_init(void)
{
    Py_XSETREF(str_space, PyUnicode_FromString(" "));
    Py_XSETREF(str_empty, PyUnicode_FromString(""));
    Py_XSETREF(str_newline, PyUnicode_FromString("\n"));
    if (str_space == NULL || str_empty == NULL || str_newline == NULL)
        return -1;
    return 0;
}
