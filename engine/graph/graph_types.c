/*
 * graph_types.c -- the Python side of the graph: the heap types Node, Graph
 * and GraphModule (dynscope._C), their slots, members, getters and methods,
 * and graph_types_init.  Contract: graph.h; the IR they wrap is graph.c, the
 * interpreter behind GraphModule.forward graph_program.c, their text
 * graph_render.c.
 *
 * Invariants:
 *   - No type can be instantiated from Python: nodes and graphs come from
 *     graph.c, modules from graph_module_new, and none of them can be
 *     changed through these types (every member is read-only).
 *   - A graph visits its nodes itself (its list is untracked, graph.h) and
 *     clearing it sets node->graph = NULL on every node it held.
 *   - A GraphModule holds its finished graph and the Program compiled from
 *     it; a cleared module refuses to run and to render.
 */
#include "graph_int.h"

#include <structmember.h>

PyTypeObject *NodeType = NULL;         /* strong */
PyTypeObject *GraphType = NULL;        /* strong */
PyTypeObject *GraphModuleType = NULL;  /* strong */

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
    return Py_NewRef(graph_op_names[self->op]);
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
        if ((graph_arg_walk(u->args, visit_is, self) || graph_arg_walk(u->kwargs, visit_is, self)) &&
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
     "Metadata: type, shape, dtype when known, and example_value (arrays and tensors only until the backend has compiled the graph) (dict)."},
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

/* ------------------------------------------------------------------ */
/* Graph.                                                              */

static int
graph_traverse(GraphObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    /* The untracked list's references are visited here, in its place. */
    if (self->nodes != NULL)
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(self->nodes); i++)
            Py_VISIT(PyList_GET_ITEM(self->nodes, i));
    Py_VISIT(self->names);
    Py_VISIT(self->name_counts);
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
    Py_CLEAR(self->name_counts);
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

static PyObject *
graph_str(GraphObject *self)
{
    return graph_render_str(self);
}

static PyObject *
graph_print_tabular(GraphObject *self, PyObject *unused)
{
    PyObject *text = graph_tabular(self);
    int r;

    (void)unused;
    if (text == NULL)
        return NULL;
    r = graph_write_stdout(text);
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
                       PyVectorcall_NARGS(nargsf), -1);
}

static PyObject *
gm_forward(GraphModuleObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    return program_run(&self->prog, args, nargs, -1);
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

PyObject *
graph_forward_one(PyObject *fn, PyObject *const *args, Py_ssize_t nargs, int k)
{
    GraphModuleObject *gm = (GraphModuleObject *)PyCFunction_GET_SELF(fn);
    if (gm->prog.ready && (k < 0 || k >= gm->prog.nout)) {
        PyErr_Format(PyExc_IndexError, "dynscope: graph output %d out of range", k);
        return NULL;
    }
    return program_run(&gm->prog, args, nargs, k);
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
    code = graph_render_code((GraphObject *)self->graph);
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
    r = graph_write_stdout(code);
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
 * in NodeType / GraphType / GraphModuleType and as module attributes, after
 * the IR's and rendering's interned strings.  Must run before any other
 * graph_* function.  0, or -1 with an exception.
 */
int
graph_types_init(PyObject *module)
{
    if (graph_ir_init() < 0 || graph_render_init() < 0)
        return -1;
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
