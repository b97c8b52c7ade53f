/*
 * graph.h -- the contract of the graph IR: Node, Graph and GraphModule,
 * shaped like torch.fx so backends written for fx feel at home, and visible
 * to Python as dynscope._C.Node / Graph / GraphModule.  Included by engine.h;
 * the files behind it and their private helpers are described in graph_int.h.
 * Design: ../shared/DESIGN.md 3.7 and docs/architecture.md.
 *
 * Invariants (all under the GIL):
 *   - A graph's nodes are ordered: every placeholder first, then get_attr /
 *     call_* nodes, and one output node last once the graph is finished.
 *     graph->nodes[i]->index == i.
 *   - A finished graph (output node added) never changes.  A GraphModule is
 *     made from a finished graph only, so what it runs and its graph agree.
 *   - Names are unique in a graph, are Python identifiers, and shadow no
 *     keyword or builtin (the torch.fx _Namespace rules: "add", "add_1", ...;
 *     "abs" -> "abs_1").
 *   - args/kwargs reference nodes of the same graph only, never the output
 *     node, either directly or inside "arg containers": exact tuple, list,
 *     dict (values) and slice.  Anything else is an opaque constant.  The
 *     graph keeps private copies of the containers, so callers cannot change
 *     a node after the fact.
 *   - A node may outlive its graph when Python holds it; node->graph is then
 *     NULL.
 */
#ifndef DYNSCOPE_GRAPH_H
#define DYNSCOPE_GRAPH_H

#ifndef PY_SSIZE_T_CLEAN
#define PY_SSIZE_T_CLEAN
#endif
#include <Python.h>
#include <stdbool.h>

typedef enum NodeOp {
    NODE_PLACEHOLDER,
    NODE_GET_ATTR,
    NODE_CALL_FUNCTION,
    NODE_CALL_METHOD,
    NODE_CALL_MODULE,
    NODE_OUTPUT,
} NodeOp;

/*
 * A node.  Python sees .op (str), .name, .target, .args, .kwargs, .meta
 * (dict: "type", "shape", "dtype" when known; "example_value" too, for
 * arrays and tensors only until the backend has compiled the graph), .index,
 * .graph and .users.  Every field is set when the node is made and never
 * changes afterwards, except `index` (renumbered when a placeholder is
 * inserted before it), `graph` (cleared with its graph) and the array
 * example values of `meta` (graph_drop_examples).
 */
typedef struct NodeObject {
    PyObject_HEAD
    NodeOp op;
    int index;             /* position in its graph's node list */
    PyObject *name;        /* strong: unique str within the graph */
    PyObject *target;      /* strong: callable (call_function); str (call_method,
                              get_attr, call_module); the node's name
                              (placeholder); "output" (output) */
    PyObject *args;        /* strong: exact tuple (private copy); an output
                              node's is (outputs,) */
    PyObject *kwargs;      /* strong: exact dict with exact str keys (private
                              copy), possibly empty */
    PyObject *meta;        /* strong: dict */
    PyObject *graph;       /* borrowed: the GraphObject whose list holds this
                              node, or NULL once that graph dropped or cleared
                              it (the graph keeps its nodes alive, not the
                              other way round) */
} NodeObject;

/*
 * A graph: ordered nodes, placeholders first, one output last.  The node
 * list is owned by its graph alone and is not tracked by the GC: the graph
 * traverses the nodes itself, so a collection can never empty the list
 * behind the graph's back and leave node->graph dangling.
 */
typedef struct GraphObject {
    PyObject_HEAD
    PyObject *nodes;       /* strong: list of NodeObject (GC-untracked);
                              NULL only once the graph is cleared */
    PyObject *names;       /* strong: set of the node names in use */
    PyObject *name_counts; /* strong: dict base -> the number graph_unique_name
                              gave it last (a start, so naming stays linear:
                              every number below it is in use) */
    int nplaceholders;     /* nodes[0, nplaceholders) are the placeholders */
    bool finished;         /* output node added; no more nodes */
} GraphObject;

/* The heap types of the _C module.  Strong, set by graph_types_init and
   never changed afterwards. */
extern PyTypeObject *NodeType;
extern PyTypeObject *GraphType;
extern PyTypeObject *GraphModuleType;

/* Create the Node / Graph / GraphModule types and add them to `module`.  Must
   run before any other graph_* function.  0, or -1 with an exception. */
int graph_types_init(PyObject *module);

/* A new, empty, open graph.  New reference, or NULL with an exception. */
GraphObject *graph_new(void);

/*
 * Add an input named after name_hint (made unique; NULL means "input").  The
 * placeholder goes after the existing placeholders (not at the end), so an
 * input discovered late still precedes every call.  example is the value it
 * was traced with (borrowed, may be NULL; fills node.meta).
 * Borrowed node (g holds it), or NULL with RuntimeError (finished graph) or a
 * memory error; g is then unchanged, except that after a memory error the
 * name may stay taken.
 */
NodeObject *graph_placeholder(GraphObject *g, const char *name_hint, PyObject *example);

/*
 * Scopes of state a run opens and closes (functorch's vmap levels): the
 * node that opens one has meta[GRAPH_META_UNDO] = a callable, called with
 * None to undo it when a run fails before the node that closes it, whose
 * meta[GRAPH_META_CLOSES] is True.  Scopes nest; the built-in eager
 * backend honours them (graph_program.c).
 */
#define GRAPH_META_UNDO "dynscope_undo_on_error"
#define GRAPH_META_CLOSES "dynscope_closes_scope"

/*
 * Append a get_attr / call_* node.  args (tuple) and kwargs (dict or NULL)
 * are borrowed and copied.  name_hint like "add", "sum", "abs" (fx style:
 * "add", "add_1", ...); NULL names the node after its target.  example as
 * for graph_placeholder.
 * Borrowed node, or NULL, leaving g unchanged, with RuntimeError when g is
 * finished, ValueError for another graph's node, the output node, a bad op,
 * or a call_method without args[0], and TypeError for a bad target, args or
 * kwargs (keys must be exact str).
 */
NodeObject *graph_call(GraphObject *g, NodeOp op, PyObject *target,
                       PyObject *args, PyObject *kwargs,
                       const char *name_hint, PyObject *example);

/*
 * Finish g with an output node whose args are (outputs,), as in fx.
 * outputs (borrowed): an exact tuple of this graph's nodes and/or constants,
 * possibly nested in arg containers.  0, or -1 with RuntimeError / TypeError
 * / ValueError / a memory error, g unchanged.
 */
int graph_output(GraphObject *g, PyObject *outputs);

/*
 * Drop every call node past the first keep_calls (placeholders stay): the
 * translator undoes the ops of an inlined call that broke.  Nodes left must
 * not read dropped ones (they were all added before them).  Dropped nodes
 * get node->graph = NULL.  Cannot fail.
 */
void graph_truncate(GraphObject *g, int keep_calls);

/* Drop call node `node`, which no other node reads (the caller knows: a
   size read whose value the translation decided), keeping the others in
   order.  It gets node->graph = NULL.  Cannot fail (a node not in g is left
   alone). */
void graph_drop_unread(GraphObject *g, NodeObject *node);

/* Number of call_function / call_method / call_module nodes.  Cannot fail. */
int graph_op_count(GraphObject *g);

/*
 * Drop the arrays and tensors among g's nodes' meta["example_value"] (the
 * values they had while tracing), keeping "type", "shape" and "dtype".
 * Called once the backend has compiled the graph and the program has been
 * planned: a cache entry must not keep a copy of every intermediate of the
 * traced call alive (a 10M-element chain would keep hundreds of MB).
 * Cannot fail.
 */
void graph_drop_examples(GraphObject *g);

/* The print_tabular text of g: aligned columns opcode, name, target, args,
   kwargs under a header and a dash rule.  New str, or NULL with an
   exception. */
PyObject *graph_tabular(GraphObject *g);

/*
 * A GraphModule over finished graph g (borrowed; the module keeps a strong
 * reference), with g compiled for forward().  Python sees .graph, .code
 * (generated Python source of forward), .forward(*inputs) -> tuple of
 * outputs (the C interpreter), __call__ (the same), print_readable(),
 * __repr__.  New reference, or NULL with ValueError (g not finished) or a
 * memory error.
 */
PyObject *graph_module_new(GraphObject *g);

/* Release every array running graphs keep for reuse (graph_pool.c);
   dynscope.reset() calls it.  Cannot fail. */
void graph_pool_clear(void);

/* The bytes of the arrays kept for reuse now. */
Py_ssize_t graph_pool_bytes(void);

/* Is fn a GraphModule's bound forward (what the eager backend returns)?
   Cannot fail. */
bool graph_is_forward(PyObject *fn);

/* Run such a forward (graph_is_forward(fn) must hold) without the recursion
   check of a C call: a captured frame counts once toward the limit, as the
   interpreter counts it.  args are borrowed.  New tuple of outputs, or NULL
   with an exception. */
PyObject *graph_forward_unchecked(PyObject *fn, PyObject *const *args, Py_ssize_t nargs);

/* As graph_forward_unchecked, returning output k itself instead of the
   tuple (a plan that returns one output needs no tuple).  New reference, or
   NULL with an exception (IndexError for a k out of range). */
PyObject *graph_forward_one(PyObject *fn, PyObject *const *args, Py_ssize_t nargs, int k);

#endif /* DYNSCOPE_GRAPH_H */
