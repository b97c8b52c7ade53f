/*
 * graph_int.h -- engine/graph/, the graph IR and its executor: what the
 * graph files share among themselves and nobody else uses.  The contract
 * the rooms above see is graph.h; the room may include ../base/ only
 * (docs/architecture.md, "Rooms").  The graph is eight files:
 *
 *   graph.c          the IR: building nodes and graphs, naming, walking and
 *                    rebuilding args (graph_new, graph_call, ...)
 *   graph_types.c    the Python types Node, Graph, GraphModule: slots,
 *                    members, getters, methods, and graph_types_init
 *   graph_program.c  the C interpreter behind GraphModule.forward: a
 *                    finished graph compiled into a flat Program, and
 *                    running it
 *   graph_inplace.c  buffer reuse while running: which NumPy ops may write
 *                    their result into a dying operand or a kept array
 *                    (ufunc out=)
 *   graph_pool.c     the kept arrays: intermediates that died, held for
 *                    the next op that would allocate their like
 *   graph_blocks.c   running a chain of elementwise NumPy ops block by
 *                    block, so intermediates stay in cache
 *   graph_reduce.c   NumPy reductions run as the ufunc reduction they call
 *   graph_render.c   text: Graph.__str__, print_tabular, GraphModule.code
 *
 * Layering (read from nm): graph_pool.c and graph_reduce.c use none of the
 * others (graph_pool.c reads the Program and its Instrs' plans);
 * graph_inplace.c uses graph_pool.c; graph_blocks.c uses graph_inplace.c; graph.c uses only the type objects of graph_types.c
 * (NodeType, GraphType); graph_render.c uses graph.c and the types;
 * graph_program.c uses every other file;
 * graph_types.c ties them together (its types call graph_program.c and
 * graph_render.c), the one circle in the room.
 */
#ifndef DYNSCOPE_GRAPH_INT_H
#define DYNSCOPE_GRAPH_INT_H

#include "../base/base.h"
#include "graph.h"

#define IS_NODE(o) Py_IS_TYPE((o), NodeType)
/* Node i of g (borrowed).  Preconditions: g->nodes != NULL, 0 <= i < len. */
#define GRAPH_NODE(g, i) ((NodeObject *)PyList_GET_ITEM((g)->nodes, (i)))


/* A node's example value, meta["example_value"] (graph.h): borrowed, or
   NULL when none was recorded. */
static inline PyObject *
node_example_value(const NodeObject *node)
{
    return PyDict_Check(node->meta) ? PyDict_GetItemString(node->meta, "example_value") : NULL;
}
/* ------------------------------------------------------------------ */
/* The IR (graph.c).                                                   */

/* Interned "placeholder", "get_attr", ... indexed by NodeOp.  Strong, set by
   graph_ir_init. */
extern PyObject *graph_op_names[NODE_OUTPUT + 1];

/* Set graph_op_names and the builtins namespace node names must not
   shadow.  0, or -1 with an exception. */
int graph_ir_init(void);

/* Called for each node found in an arg; non-zero stops the walk. */
typedef int (*node_visit_fn)(NodeObject *node, void *ctx);

/*
 * Call fn(node, ctx) for every node in `arg` (borrowed), looking inside arg
 * containers, in display order.  Returns the first non-zero result of fn,
 * else 0.  Never calls Python code.
 */
int graph_arg_walk(PyObject *arg, node_visit_fn fn, void *ctx);

/* Maps a node to its replacement; new reference or NULL with an exception. */
typedef PyObject *(*node_map_fn)(NodeObject *node, void *ctx);

/*
 * A copy of `arg` (borrowed) with every node replaced by map(node, ctx): arg
 * containers are rebuilt (lists and dicts are always fresh, even without
 * nodes), other objects are shared.  New reference, or NULL with an
 * exception.
 */
PyObject *graph_arg_map(PyObject *arg, node_map_fn map, void *ctx);

/* The str attribute `name` of obj: new reference, or NULL when obj has no
   such attribute or it is not a str.  Never leaves an exception set. */
PyObject *graph_str_attr(PyObject *obj, const char *name);

/* ------------------------------------------------------------------ */
/* The interpreter (graph_program.c).                                  */

typedef enum ArgKind {
    ARG_SLOT,      /* the value in slot `slot` */
    ARG_CONST,     /* obj, shared by every call */
    ARG_NESTED,    /* obj with its nodes replaced by their values, rebuilt per call */
} ArgKind;

/* One argument of an Instr or of the output. */
typedef struct Arg {
    ArgKind kind;
    int slot;              /* ARG_SLOT only */
    PyObject *obj;         /* strong: the constant or the template; NULL for ARG_SLOT */
} Arg;

/*
 * A finished graph compiled into a flat program (what forward() runs).
 * Every node but the output has a value slot: slot i holds the value of
 * node i; slots [0, ninputs) are the placeholders.  A zeroed Program is
 * empty and not ready; program_clear returns it to that state.
 */
typedef struct Program {
    bool ready;            /* false before compile and after clear: refuse to run */
    int ninputs;           /* placeholders = slots borrowed from the arguments */
    int nslots;
    int ninstr;
    struct Instr *instr;   /* owned: ninstr */
    int nruns;
    struct BlockRun *runs; /* owned: nruns (graph_blocks.c) */
    int nout;
    struct Arg *out;       /* into args: the outputs tuple's items */
    int nend;
    int *end;              /* into frees: owned slots read by the output */
    struct Arg *args;      /* owned: every Instr's args, then out */
    int *frees;            /* owned: nslots - ninputs slot numbers */
    unsigned char *pool_want;  /* owned or NULL: per slot, how many of its
                                  like a dying value's kept with (see
                                  graph_pool_plan) */
    bool has_scopes;       /* some instruction opens a scope (Instr.undo) */
} Program;

/* Compile finished graph g into p (zeroed).  0, or -1 with an exception
   (p may then be half built: program_clear it). */
int program_compile(Program *p, GraphObject *g);

/* Release everything p holds and zero it.  Cannot fail. */
void program_clear(Program *p);

/* Py_VISIT every object p holds (tp_traverse of its owner). */
int program_traverse(Program *p, visitproc visit, void *arg);

/*
 * Run the program on `inputs` (borrowed, ninputs of them).  Returns the
 * tuple of outputs (new reference) -- or, when only >= 0, output `only`
 * itself (no tuple made) -- or NULL with RuntimeError (cleared program),
 * TypeError (wrong number of inputs) or what a call raised; every
 * intermediate value is released either way, and the scopes a failed run
 * left open are undone, innermost first.
 */
PyObject *program_run(const Program *p, PyObject *const *inputs, Py_ssize_t ninputs,
                      int only);

/* ------------------------------------------------------------------ */
/* Buffer reuse (graph_inplace.c).                                     */

/* Most positional operands of a reusing op (ufuncs have 1 to 3 inputs). */
#define INPLACE_MAX_ARGS 3

/*
 * How one instruction on NumPy operands may run better than its node's
 * call, when inplace_how says so on a run:
 *   - INPLACE_DONOR: write the result into operand `donor`'s buffer, by
 *     `fn(*args, out=args[donor])` (fn a ufunc) or, for an operator whose
 *     left operand is the donor, its in-place form `fn(*args)`
 *     (operator.isub);
 *   - INPLACE_DIRECT: an operator node runs its ufunc directly
 *     (`np.add(a, b)` for `a + b`: what ndarray.__add__ calls, without the
 *     number protocol's dispatch on the way).
 * Set by inplace_plan, released by inplace_clear; zeroed with donor -1 it
 * is empty (planned false).
 */
typedef struct Inplace {
    bool planned;              /* direct or donor: ask inplace_how */
    PyTypeObject *ndarray;     /* borrowed: numpy.ndarray (tensorlib keeps it
                                  for the process) */
    int donor;                 /* index into the instruction's args, or -1 */
    int ndim;                  /* the donor's rank at capture */
    Py_ssize_t min_elements;   /* smaller donors are not worth it */
    bool by_operator;          /* fn is an in-place operator, not a ufunc */
    bool exact_ufunc;          /* the node calls an exactly rounded ufunc
                                  itself (graph_blocks.c may slice it) */
    PyObject *fn;              /* strong or NULL: what runs into the donor */
    PyObject *direct;          /* strong or NULL: the operator's ufunc */
    PyObject *arg_descr[INPLACE_MAX_ARGS];   /* strong: each array operand's
                                               descr at capture; NULL for a
                                               constant */
    PyObject *const_array[INPLACE_MAX_ARGS]; /* strong or NULL: a constant
                                               Python scalar operand as the
                                               read-only 0-d array of the
                                               dtype NumPy would convert it
                                               to (see graph_inplace.c) */
    bool has_const_array;
    PyObject *pool_fn;         /* strong or NULL: the ufunc that may run into
                                  a kept array (graph_pool.c) */
    PyObject *result_descr;    /* strong with pool_fn: the result's descr at
                                  capture */
    int shape_src;             /* with pool_fn: the array operand whose shape
                                  the result had at capture */
    Py_ssize_t pool_min_elements;  /* smaller results are never kept */
} Inplace;

typedef enum InplaceHow {
    INPLACE_NONE, INPLACE_DIRECT, INPLACE_DONOR,
    INPLACE_POOL,      /* pool_fn(*args, out=a kept array of the result's
                          shape) when one is kept, else pool_fn(*args) */
} InplaceHow;

/*
 * Fill ip for the call node `node` of g, compiled as instruction k with
 * positional args[0..nargs) and no keywords; last_use[s] is the instruction
 * after which slot s dies.  Leaves ip empty when nothing applies.  0, or -1
 * with an exception (memory).
 */
int inplace_plan(Inplace *ip, GraphObject *g, const NodeObject *node, const Arg *args,
                 int nargs, bool op_function, int k, const int *last_use);
void inplace_clear(Inplace *ip, int nargs);
int inplace_traverse(const Inplace *ip, int nargs, visitproc visit, void *arg);

/* How this run's operands argv[0..nargs) (borrowed) may run: every array
   operand must still be an exact ndarray (else INPLACE_NONE); the donor
   must be unshared with the capture's descr, and the result's dtype and
   shape its own.  Reads struct fields only; cannot fail.  Precondition:
   ip->planned. */
InplaceHow inplace_how(const Inplace *ip, PyObject *const *argv, int nargs);

/* ------------------------------------------------------------------ */
/* Kept arrays (graph_pool.c).                                         */

/* A kept array of exactly this descr (by identity), rank and shape, taken
   out of the pool: new reference, or NULL (none kept; never an
   exception). */
PyObject *graph_pool_take(PyObject *descr, int ndim, const Py_ssize_t *dims);

/* Keep obj (a slot's dying value) if the pool takes it (see graph_pool.c)
   and holds fewer than `want` arrays of its descr and shape: true when it
   did, and the reference passed to it; false leaves obj to the caller. */
bool graph_pool_give(PyObject *obj, int want);

/* p->pool_want[s]: how many instructions of p may write into a kept array
   like slot s's value (its descr and shape at capture).  A dying value is
   kept only while fewer of its like are kept than that: a graph keeps what
   its next run takes, never one array more each run (an np.where result,
   which nothing takes, is freed as eager frees it).  Left NULL when no
   instruction takes one.  Called by program_compile once every
   instruction is planned.  0, or -1 with an exception (memory). */
int graph_pool_plan(Program *p, GraphObject *g);

/* The fewest elements of an array of dtype descr the pool keeps, or -1 when
   it keeps none of that dtype.  Never fails. */
Py_ssize_t graph_pool_min_elements(PyObject *descr);

/* The tuple ("out",), made on first use and kept: borrowed, or NULL with
   an exception. */
PyObject *inplace_out_kwnames(void);

/* Run the op as `how` (not INPLACE_NONE) says.  argv must have room for
   nargs + 1 items and a writable argv[-1] (PY_VECTORCALL_ARGUMENTS_OFFSET);
   its items are borrowed, and a constant may be replaced by its 0-d array.
   New reference (for a donor: the donor) or NULL with an exception. */
PyObject *inplace_run(const Inplace *ip, InplaceHow how, PyObject **argv, int nargs);

/* One call node, compiled (graph_program.c; graph_blocks.c reads it). */
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
    Inplace inplace;       /* may write into a dying operand (graph_inplace.c) */
    int block_run;         /* index into Program.runs of the blocked run that
                              starts here (graph_blocks.c), or -1 */
    PyObject *reduce;      /* strong or NULL: the ufunc's reduce a NumPy
                              reduction runs (graph_reduce.c) */
    PyObject *undo;        /* strong or NULL: this node opens a scope of state
                              (graph.h GRAPH_META_UNDO), undone by undo(None)
                              when a run fails before the node that closes it */
    bool closes;           /* this node closes the innermost open scope */
} Instr;

/* ------------------------------------------------------------------ */
/* NumPy reductions run as their ufunc's reduce (graph_reduce.c).      */

/* Set in->reduce (compiled, otherwise complete) when the instruction is
   np.sum / prod / max / min (or amax, amin) or the ndarray method of that
   name, given the array and at most an axis.  Never fails: left NULL. */
void reduce_plan(Instr *in);

/* Run in->reduce (not NULL) on this run's operands argv (borrowed) when
   argv[0] is an exact ndarray (*ran true): new reference, or NULL with an
   exception.  *ran false: the instruction runs as its node says. */
PyObject *reduce_run(const Instr *in, PyObject *const *argv, bool *ran);

/* ------------------------------------------------------------------ */
/* Blocked runs (graph_blocks.c).                                      */

/*
 * A run of consecutive elementwise instructions on NumPy arrays of one
 * shape, executed block by block (a slice of every operand at a time) so
 * that the run's intermediates stay in cache: see graph_blocks.c.
 */
typedef struct BlockRun BlockRun;

/* Find p's blocked runs (after inplace planning; last_use as there): sets
   p->runs, p->nruns and each run's first Instr.block_run.  0, or -1 with
   an exception (memory). */
int blocks_plan(Program *p, GraphObject *g, const int *last_use);
void blocks_clear(Program *p);
int blocks_traverse(Program *p, visitproc visit, void *arg);

/* Run blocked run `r` of p over the slots v: the number of instructions
   it ran (the results that outlive the run are in their slots), 0 when this run's operands do
   not allow it or it is not worth it (nothing changed: run the
   instructions one by one), -1 with an exception. */
int blocks_run(const Program *p, int r, PyObject **v);

/* ------------------------------------------------------------------ */
/* Text (graph_render.c).                                              */

/* Make the strings rendering joins with.  0, or -1 with an exception. */
int graph_render_init(void);

/* Graph.__str__, like torch.fx ("graph():" then one line per node).  New
   str, or NULL with an exception. */
PyObject *graph_render_str(GraphObject *g);

/* GraphModule.code: the Python source of forward for finished graph g.
   New str, or NULL with an exception. */
PyObject *graph_render_code(GraphObject *g);

/* Write a str to sys.stdout (so pytest's capture sees it); nothing when
   there is no sys.stdout.  0, or -1 with an exception. */
int graph_write_stdout(PyObject *text);

#endif /* DYNSCOPE_GRAPH_INT_H */
