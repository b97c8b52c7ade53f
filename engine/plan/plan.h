/*
 * plan.h -- engine/plan/, what a cache entry runs instead of the bytecode:
 * plans (plan.c: fetch inputs, call the compiled graph, eager step, rebuild
 * the return value) and backends (backend.c: backend(gm, example_inputs)).
 * DESIGN.md 3.6-3.7.
 * May include: ../base/, ../graph/, ../guards/.  Nothing above.
 */
#ifndef DYNSCOPE_PLAN_H
#define DYNSCOPE_PLAN_H

#include "../base/base.h"
#include "../guards/guards.h"
#include "../graph/graph.h"

/* ------------------------------------------------------------------ */
/* Backends (backend.c).                                               */

/* Resolve a backend argument: a callable is returned as is; a str names a
   registered backend ("eager").  New reference, or NULL with ValueError
   naming the registered backends / TypeError for other types. */
PyObject *backend_resolve(PyObject *backend);
/* Call backend(gm, example_inputs) and check the result is callable.
   New reference or NULL with BackendCompilerFailed naming the backend (its
   Exception as __cause__, or "returned ..., expected a callable"); a
   BaseException (KeyboardInterrupt) passes as it is. */
PyObject *backend_compile(PyObject *backend, PyObject *gm, PyObject *example_inputs);
/* dynscope.BackendCompilerFailed, which backend_compile raises (borrowed;
   made by backend_init). */
PyObject *backend_failed_error(void);
/* The built-in eager backend as a callable object (new reference). */
PyObject *backend_eager_ref(void);
/* Whether `backend` compiles with the built-in eager backend (itself, or
   wrappers such as ExplainBackend around it): it runs dynscope's own
   GraphModule, node by node in order, never through torch.fx. */
bool backend_is_native(PyObject *backend);
/* Backends of `type` wrap another backend, reached by inner() (borrowed
   result, NULL when none; must not raise).  The eager backend wrapped
   still gets dynscope's own GraphModule.  For layers above the engine
   (explain's ExplainBackend).  0, or -1 with RuntimeError when full. */
int backend_register_wrapper(PyTypeObject *type, PyObject *(*inner)(PyObject *backend));
int backend_init(PyObject *module);

/* ------------------------------------------------------------------ */
/* Plans (plan.c).                                                     */

typedef enum RebuildKind {
    RB_CONST,      /* obj                                              */
    RB_OUTPUT,     /* graph output number `index`                       */
    RB_INPUT,      /* the value of accessor `index`                     */
    RB_LOCAL,      /* the frame's local `index` as it came in (may be NULL) */
    RB_NULL,       /* NULL: an unbound local or the NULL slot of a call */
    RB_TUPLE,      /* tuple of items; obj (or NULL): a struct sequence
                      type, called with that tuple (a named tuple)     */
    RB_LIST,       /* new list of items                                 */
    RB_DICT,       /* new dict: keys in obj (tuple), values in items    */
    RB_SLICE,      /* slice(items[0], items[1], items[2])               */
    RB_ITER,       /* a live for-loop iterator: tuple of the remaining
                      items (iter() of it when handed to the interpreter) */
    RB_TYPE_ATTR,  /* getattr(type(items[0]), obj): an unbound method   */
    RB_ATTR,       /* getattr(items[0], obj): a bound method            */
    RB_MEMO,       /* the plan's memo object `index` (one object shared by
                      every slot that holds it: identity is kept)        */
    RB_ROWS,       /* items[0][index:]: the rows a loop over a tensor has
                      still to read -- a view, so in-place updates made by
                      the loop body are seen (iter() of it for the interpreter) */
    RB_LIST_ITER,  /* as RB_ITER over items[0..n), which are list items[n]
                      from `index` on; the plan outcome remembers the list so
                      that an eager step that changes it is seen (below)  */
    RB_LIVE_ITER,  /* iter(items[0]) advanced by `index` items: a real
                      iterator over a list or dict                       */
    RB_ZIP_LISTS,  /* enumerate() (index 0, count obj) or zip() (index 1)
                      over lists or fixed items: as RB_ITER over the items
                      of items[0], noted with its sources items[1..n)
                      (RB_LIST_ITER or RB_ITER) as RB_LIST_ITER is      */
    RB_SLOT_ITER,  /* as RB_ITER, for an iterator that came in resume slot
                      `index` and is now past obj (int) of its items: the
                      slot's note, if it had one, goes on with the tuple   */
    RB_DICT_VIEW,  /* items[0].<obj>(): a dict's keys(), values() or items() */
    RB_DERIVED,    /* enumerate(iter(items[0]), obj) when index is 0, else
                      zip(*map(iter, items)): over a list or a tensor, so
                      a real one                                         */
    RB_CELL,       /* a new cell holding items[0] (n == 0: empty): a cell
                      variable of the frame, carried to its resume frame   */
    RB_NEWOBJ,     /* object.__new__(obj[0]) with __dict__ obj[1:] = items:
                      an object of a program class made while tracing     */
    RB_SETATTR,    /* a plan's effect, not a value: items[0].<obj> = items[1]
                      (n == 1: del items[0].<obj>); index 1: by
                      object.__setattr__ (PyObject_GenericSetAttr), not the
                      class's own __setattr__                              */
    RB_SETITEM,    /* a plan's effect: items[0][obj] = items[1] (n == 1:
                      del items[0][obj]); index 1: by dict's / OrderedDict's
                      own store, not the class's __setitem__               */
    RB_SETMEMBER,  /* a plan's effect: items[0].add(obj) (index 1) or
                      items[0].discard(obj) (index 0), a set the program
                      holds; n == 1                                       */
    RB_SET,        /* new set: items added in order                      */
} RebuildKind;

typedef struct Rebuild {
    RebuildKind kind;
    int index;
    PyObject *obj;            /* strong or NULL */
    int n;
    struct Rebuild *items;    /* owned: n items */
} Rebuild;

/* How a plan ends (DESIGN.md 3.5-3.6). */
typedef enum PlanExit {
    EXIT_RETURN,   /* return `result` */
    EXIT_CALL,     /* eager step: call `callable(*args)` (kwnames for the last
                      ones), push the result unless push_result is false,
                      then continue in the resume frame at resume_offset */
    EXIT_BRANCH,   /* eager step: truth of `cond`; continue at
                      branch_true or branch_false */
    EXIT_DEOPT,    /* continue in the default interpreter at resume_offset */
} PlanExit;

/*
 * The live state of a frame at a plan's exit: every fast local and the
 * value stack below the eager step's operands, as rebuilds.  `unspec`
 * marks slots (locals first, then stack) whose Python numbers the resume
 * frame must not specialize; `iters` marks slots holding a for-loop
 * iterator (rebuilt as the tuple of its remaining items).
 */
typedef struct LiveState {
    int nlocals;
    Rebuild *locals;          /* owned: nlocals */
    int nstack;
    Rebuild *stack;           /* owned: nstack */
    uint64_t unspec;
    uint64_t iters;
} LiveState;

/* Why a frame's graph ended (explain, events, fullgraph). */
typedef struct BreakInfo {
    const char *kind;         /* static: "call", "data_dependent_branch",
                                 "data_escape", "unsupported" */
    PyObject *reason;         /* strong: human reason */
    int offset;               /* bytecode offset (bytes) of the break in its frame */
    PyObject *user_stack;     /* strong: list of (filename, lineno, name, line),
                                 outermost first, through inlined calls */
} BreakInfo;

#define LIVE_MAX_SLOTS 64     /* masks are 64-bit */

typedef struct Plan {
    PyObject *gm;             /* strong: GraphModule, NULL when the graph has no ops */
    PyObject *compiled;       /* strong: what the backend returned, NULL with gm */
    int ninputs;
    int *input_acc;           /* owned: accessor index of each placeholder, in order */
    int noutputs;
    int nops;                 /* call nodes in the graph */
    PlanExit exit;
    int nmemo;
    Rebuild *memo;            /* owned: objects built once per run, in order,
                                 before anything that refers to them (RB_MEMO) */
    int neffects;
    Rebuild *effects;         /* owned: RB_SETATTR writes to objects the program
                                 sees, made after the graph ran, in order,
                                 before the exit (tr_effects.c) */
    Rebuild result;           /* EXIT_RETURN: the frame's return value */
    LiveState live;           /* other exits */
    Rebuild callable;         /* EXIT_CALL */
    int nargs;
    Rebuild *args;            /* owned: EXIT_CALL arguments */
    PyObject *kwnames;        /* strong or NULL: EXIT_CALL */
    bool push_result;         /* EXIT_CALL */
    Rebuild cond;             /* EXIT_BRANCH */
    int resume_offset;        /* EXIT_CALL / EXIT_DEOPT: code-unit index */
    int branch_true, branch_false;  /* EXIT_BRANCH: code-unit indexes */
    int resume_line, true_line, false_line;  /* source lines of those offsets */
    BreakInfo brk;            /* why the graph ended (exits other than RETURN) */
    PyObject *hatches;        /* strong list of str or NULL: the escape hatches
                                 the translation honoured, what each kept in
                                 ("dynscope.allow_in_graph: f is one graph node") */
} Plan;

void plan_clear(Plan *p);
void rebuild_clear(Rebuild *r);

/*
 * What running a plan produced.  For OUTCOME_CONTINUE the frame goes on at
 * `offset` (a code-unit index) with `locals` / `stack` (owned arrays of
 * strong references or NULL) -- in a resume frame, or, when `deopt`, in
 * the default interpreter.
 */
typedef struct PlanOutcome {
    enum { OUTCOME_RETURN, OUTCOME_CONTINUE, OUTCOME_ERROR } kind;
    PyObject *value;          /* RETURN: new reference */
    /* CONTINUE after an eager call the caller makes (it knows the frame to
       show on the stack): callable(*args), kwnames for the last ones; its
       result is pushed onto `stack` when push_result. */
    bool call_pending;
    PyObject *callable;       /* strong */
    PyObject **args;          /* owned array of strong references */
    int nargs;
    PyObject *kwnames;        /* strong or NULL */
    bool push_result;
    bool deopt;
    int offset;
    int nlocals;
    PyObject **locals;
    int nstack;
    PyObject **stack;
    uint64_t unspec, iters;
    bool ran_graph;           /* the plan called its compiled graph */
    PyObject *iter_lists;     /* strong dict or NULL: id(tuple) -> note, for each
                                 loop iterator carried as the tuple of its
                                 remaining items that reads a list
                                 (RB_LIST_ITER, RB_ZIP_LISTS; plan.c) */
} PlanOutcome;

void plan_outcome_clear(PlanOutcome *o);
/* The eager call was made: drop its callable and arguments, as the
   interpreter pops them (nothing may keep them alive past the call). */
void plan_outcome_call_done(PlanOutcome *o);
/* Loop iterators carried as tuples of a list's remaining items become real
   iterators over that list: those whose list an eager step changed (so that
   the loop sees the change, as it would eagerly), or with every_one (before
   the interpreter takes the frame) all of them -- and every other iterator
   slot that is not an iterator (the items left, the rows of a tensor)
   becomes iter() of it.  0 / -1 with an exception. */
int plan_live_iterators(PlanOutcome *o, bool every_one);

/* Run the plan: inputs from vals (filled by guardset_check; missing ones are
   computed), the graph, then the exit.  The graph runs inside `in_engine`
   (a counter this function raises around it); an eager call is left to the
   caller (out->call_pending), a truth test runs here.  Fills *out;
   OUTCOME_ERROR leaves an exception set. */
void plan_run(const Plan *p, const GuardSet *gs, const FrameView *fv,
              PyObject **vals, int *in_engine, PlanOutcome *out);
/* Graph times for cost sampling (engine/capture/cost.c): while `on`, a plan
   that calls its graph notes engine_ticks() just before and after the call
   (the reader zeroes them) and adds the difference to `total`.  GIL. */
typedef struct PlanGraphTimes {
    bool on;
    uint64_t start, end;
    uint64_t total;           /* ticks in graphs while on, ever */
} PlanGraphTimes;
extern PlanGraphTimes plan_graph_times;

/* Readable pseudo-Python of the plan.  New str or NULL. */
PyObject *plan_render(const Plan *p, const GuardSet *gs);


#endif /* DYNSCOPE_PLAN_H */
