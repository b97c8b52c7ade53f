/*
 * engine.h -- the contract of the capture engine (engine/).
 *
 * The engine is a PEP 523 frame hook (hook.c) in front of a per-code-object
 * cache (cache.c).  A cache entry pairs a guard set (guards.h) with a plan
 * (plan.c); a plan runs a captured graph (graph.c) through a backend
 * (backend.c) and rebuilds the frame's return value.  The translator
 * (translate.c) makes entries by interpreting a code object's bytecode
 * symbolically over the frame's concrete inputs.  Design: docs/architecture.md
 * and ../shared/DESIGN.md section 3.
 *
 * Invariants every file keeps:
 *   - Everything here runs with the GIL held.  Any call into Python may
 *     release it, so a cache entry that is in use is kept alive by a strong
 *     reference, never by a borrowed pointer into a list another thread can
 *     change.
 *   - Every PyObject * field says whether it is strong or borrowed.
 *   - Plain-C functions return 0 / -1 (or a documented status); functions that
 *     return PyObject * return NULL with an exception set on error.
 *   - Only pycompat.h touches CPython internals (frames, opcodes).
 */
#ifndef DYNSCOPE_ENGINE_H
#define DYNSCOPE_ENGINE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdbool.h>
#include <stdint.h>

/* ------------------------------------------------------------------ */
/* Assertions: always on in debug builds, compiled out with NDEBUG.    */

#ifdef NDEBUG
#define ENGINE_ASSERT(x) ((void)0)
#else
#define ENGINE_ASSERT(x) \
    ((x) ? (void)0 : engine_assert_fail(#x, __FILE__, __LINE__))
#endif
void engine_assert_fail(const char *expr, const char *file, int line);

/* Monotonic nanoseconds (CLOCK_MONOTONIC). Cannot fail. */
uint64_t engine_now_ns(void);
/* Wall-clock nanoseconds since the epoch (CLOCK_REALTIME). Cannot fail. */
uint64_t engine_wall_ns(void);

/* A cheap monotonic tick counter for the hot path (the TSC on x86-64, else
   nanoseconds); engine_ticks_to_ns converts a tick count (calibrated
   against CLOCK_MONOTONIC since the module loaded).  Cannot fail. */
#if defined(__x86_64__)
#include <x86intrin.h>
static inline uint64_t engine_ticks(void) { return __rdtsc(); }
#else
static inline uint64_t engine_ticks(void) { return engine_now_ns(); }
#endif
uint64_t engine_ticks_to_ns(uint64_t ticks);
/* The same with the ratio measured once (after its first computation):
   no clock read, for the hot path. */
uint64_t engine_ticks_to_ns_fast(uint64_t ticks);

/* ------------------------------------------------------------------ */
/* Frame views (guards.c, plan.c).                                     */

/*
 * What guards and plans read: the inputs of a frame at its start (or at a
 * resume point).  All pointers are borrowed for the duration of one lookup.
 */
typedef struct FrameView {
    PyCodeObject *code;          /* borrowed */
    PyObject *const *locals;     /* borrowed: the frame's slots (code_nslots: fast locals, then
                                    cell variables as cells); an item is NULL when unbound */
    int nlocals;
    PyObject *const *stack;      /* borrowed: value stack of a resume frame, or NULL */
    int nstack;
    PyObject *globals;           /* borrowed: the frame's globals dict */
    PyObject *builtins;          /* borrowed: the frame's builtins dict */
    PyObject *closure;           /* borrowed: tuple of cells of the frame's function, or NULL */
    PyObject *iter_lists;        /* borrowed: a resume frame's incoming loop iterators
                                    that read lists (PlanOutcome.iter_lists), or NULL */
} FrameView;

/* ------------------------------------------------------------------ */
/* Accessors, guards and guard sets (guards.h).                       */

#include "guards.h"

/* ------------------------------------------------------------------ */
/* Graph IR (graph.h) -- torch.fx shaped, visible to Python.            */

#include "graph.h"

/* ------------------------------------------------------------------ */
/* Backends (backend.c).                                               */

/* Resolve a backend argument: a callable is returned as is; a str names a
   registered backend ("eager").  New reference, or NULL with ValueError
   naming the registered backends / TypeError for other types. */
PyObject *backend_resolve(PyObject *backend);
/* Call backend(gm, example_inputs) and check the result is callable.
   New reference or NULL (the backend's exception, or TypeError). */
PyObject *backend_compile(PyObject *backend, PyObject *gm, PyObject *example_inputs);
/* The built-in eager backend as a callable object (new reference). */
PyObject *backend_eager_ref(void);
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
    RB_TUPLE,      /* tuple of items                                    */
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
                      (n == 1: del items[0].<obj>)                         */
    RB_SETITEM,    /* a plan's effect: items[0][obj] = items[1]            */
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
/* Readable pseudo-Python of the plan.  New str or NULL. */
PyObject *plan_render(const Plan *p, const GuardSet *gs);

/* ------------------------------------------------------------------ */
/* Cache (cache.c).                                                    */

typedef struct CacheEntry {
    PyObject_HEAD
    GuardSet guards;
    Plan plan;
    long long code_id;        /* of its code object (not held: co_extra owns us) */
    PyObject *code_name;      /* strong: the code's co_qualname */
    PyObject *code_file;      /* strong: the code's co_filename */
    int code_line;            /* the code's co_firstlineno */
    int resume_line;          /* source line of resume_offset (0 at function start) */
    PyObject *backend;        /* strong: the backend this entry was compiled with */
    int frame_id;             /* [frame_id/frame_compile_id] */
    int frame_compile_id;
    int resume_offset;        /* 0 = function start */
    uint64_t hits;
    uint64_t snap_hits;       /* hits at the last recorded snapshot */
    uint64_t guard_ticks;     /* total time spent evaluating this entry's guards
                                 (engine_ticks units; guard_ns converts) */
    uint64_t compile_ns;
    uint64_t backend_ns;      /* of compile_ns, the time in the backend */
    PyObject *eager_reason;   /* strong or NULL.  Set: translation stopped for
                                 inputs that pass `guards` (the guards read
                                 before it stopped), for this reason; a hit
                                 runs the frame without capture instead of
                                 translating it again on every call */
} CacheEntry;

extern PyTypeObject *CacheEntryType;

/* What the entry runs, as text (its plan, or that it runs without capture).
   New reference or NULL. */
PyObject *cache_entry_plan_text(CacheEntry *e);

/*
 * The cache of one (code object, resume offset).  Allocated once and freed
 * only with its code object, so a pointer to it stays valid while a frame
 * of that code runs, even across reset() and calls into Python.
 */
typedef struct CacheFrame {
    int resume_offset;        /* code-unit index; 0 = function start */
    uint64_t unspec, iters;   /* with resume_offset, the key (see LiveState) */
    int frame_id;             /* -1 until its first compile (after reset too) */
    int ncompiles;            /* next frame_compile_id */
    PyObject *entries;        /* strong: list of CacheEntry, lookup order; replaced
                                 (never mutated in place) by reset */
    uint64_t misses;
    int failed;               /* translations that failed for this frame's values
                                 (not for good): they count toward
                                 cache_size_limit as entries do, so that a frame
                                 is not translated again on every call */
    bool limit_warned;
    PyObject *last_failure;   /* strong: str "expr (observed ...)" or NULL */
    /* Automatic dynamic (not part of the key): slots whose int or float a
       recompile found changed -- the next translations take it as a graph
       input (unspecialized) -- and slots a translation with them so needed
       as constants (a branch on one): those stay specialized. */
    uint64_t dynamic, static_only;   /* static_only: numbers and tensor sizes both */
    uint64_t just_marked;     /* the slot this miss made dynamic, until it compiled */
    /* Tensor sizes: per slot, the dimensions whose size a recompile found
       changed (a bit per dimension). */
    uint32_t dyn_dims[LIVE_MAX_SLOTS];
} CacheFrame;

typedef struct CodeCache {
    PyCodeObject *code;       /* borrowed: the cache lives in this code's co_extra */
    long long code_id;        /* process-unique, stable for the code's lifetime */
    bool classified;          /* static skip rules applied (redone after reset) */
    int nframes;
    CacheFrame **frames;      /* owned: array of owned frames */
    PyObject *skip_reason;    /* strong: str when the code runs eagerly for good, else NULL */
    bool skip_reported;       /* the skip was an event (not a path or static rule) */
    bool limit_warned;        /* the one CacheLimitWarning of this function was issued */
    uint64_t skip_calls;      /* calls passed through because of skip_reason (GIL) */
    uint64_t tensorless_calls;  /* calls run without capture: nothing in reach
                                   to capture (config.skip_tensorless_frames; GIL) */
    struct CodeCache *prev, *next;  /* every live CodeCache, for reset() */
} CodeCache;

int cache_init(void);
/* The cache of `code`, created if absent.  Borrowed, or NULL with exception. */
CodeCache *cache_for_code(PyCodeObject *code);
/* The cache of `code` if it has one (borrowed), else NULL.  Cannot fail. */
CodeCache *cache_peek(PyCodeObject *code);
/* The frame for (resume offset, masks), created if absent.  Borrowed or NULL. */
CacheFrame *cache_frame(CodeCache *cc, int resume_offset, uint64_t unspec, uint64_t iters);
/* Drop every entry of every code object and every skip mark; frame ids
   restart at 0.  Safe while other threads are inside plans. */
void cache_reset_all(void);
/* Give cf its frame id if it has none yet.  Cannot fail. */
void cache_frame_assign_id(CacheFrame *cf);
/* A cache not attached to its code object (a CaptureSession's): freed by
   cache_free_detached, never reached by reset().  NULL with exception. */
CodeCache *cache_new_detached(PyCodeObject *code);
void cache_free_detached(CodeCache *cc);
/* Call fn on every entry of every (global) code cache; with only_changed,
   only on entries whose hits moved since the last such walk (which then
   records their hits as seen).  fn must not run Python.  Cannot fail. */
void cache_for_each_entry(void (*fn)(CodeCache *, CacheEntry *), bool only_changed);
/* All entries of a code object, frame by frame in lookup order (new list). */
PyObject *cache_entries_list(CodeCache *cc);
/* Create the CacheEntry type and add it to `module`.  0 / -1. */
int cache_types_init(PyObject *module);
/* New CacheEntry (empty guards and plan), or NULL. */
CacheEntry *cache_entry_new(void);

/* ------------------------------------------------------------------ */
/* Translator (translate.c).                                           */

typedef enum TranslateStatus {
    TRANSLATE_OK = 0,          /* entry filled in */
    TRANSLATE_UNSUPPORTED = 1, /* *reason set; run the frame eagerly */
    TRANSLATE_ERROR = -1,      /* exception set */
} TranslateStatus;

/*
 * Translate the frame `fv` (function start when cf->resume_offset == 0, else
 * a resume frame whose locals and stack are in fv, keyed by cf's masks)
 * into `entry`'s guards and plan.  `backend` is called once if a graph
 * results.  On TRANSLATE_UNSUPPORTED (function starts only: a resume frame
 * always gets a plan, if need be one that deopts at once), *reason is a new
 * str and *permanent says whether no input could ever succeed.
 */
TranslateStatus translate_frame(const FrameView *fv, PyObject *func,
                                CacheFrame *cf, PyObject *backend,
                                CacheEntry *entry, PyObject **reason,
                                bool *permanent);

/* A plan that deopts at once at cf's resume offset: what a resume frame
   runs when it cannot be translated or is at its cache limit.  0 / -1. */
int translate_deopt_plan(const FrameView *fv, const CacheFrame *cf, CacheEntry *entry);

/* ------------------------------------------------------------------ */
/* Hook and capture state (hook.c).                                    */

typedef struct CaptureConfig {
    PyObject *backend;        /* borrowed from the active OptimizeContext */
    bool fullgraph;
    int dynamic;              /* optimize(dynamic=): -1 None (automatic: static
                                 first, numbers made graph inputs after a
                                 recompile on their value; floats from the
                                 start), 0 False (always static), 1 True
                                 (every number a graph input from the start) */
    PyObject *root_code;      /* borrowed or NULL: the code of the function the
                                 region wraps (optimize(fn), explain(fn)), which
                                 is captured even with no tensor in reach; NULL
                                 for a `with optimize():` block */
} CaptureConfig;

/* The code object a region around `fn` captures unconditionally: fn's own
   for a Python function or a bound method of one, else NULL.  Borrowed (fn
   keeps it).  Cannot fail. */
PyObject *capture_root_code(PyObject *fn);

/* Counters the engine keeps (read by tests and explain). */
typedef struct EngineCounters {
    uint64_t frames_seen, hits, misses, compiles, recompiles, skips, cache_limits;
    uint64_t direct_hits;     /* hits answered without a frame (of `hits`) */
    uint64_t graph_frames;    /* calls in which a plan ran a graph: frames
                                 captured, not those a kept eager entry or a
                                 graph-less plan answered */
    uint64_t eager_hits;      /* hits on a kept eager entry (of `hits`): the
                                 frame ran without capture, as translation
                                 stopped for those inputs before */
    uint64_t graph_breaks;    /* breaks met while translating */
    uint64_t deopts;          /* frames handed to the interpreter mid-way */
} EngineCounters;

#define CAPTURE_MAX_DEPTH 64

/*
 * A private capture (explain): its own code caches, counters and event
 * sink, so that nothing global is read or changed while it is active on a
 * thread.
 */
struct EventSink;
typedef struct CaptureSession {
    PyObject *caches;         /* strong: dict code object -> capsule of a detached CodeCache */
    struct EventSink *sink;   /* borrowed or NULL: receives the session's events,
                                 which no sink of the process sees (events.h) */
    EngineCounters counters;
    int next_frame_id;        /* compile ids of a session start at [0/0] */
} CaptureSession;

/* Thread state: is this thread capturing, and is it inside the engine. */
typedef struct ThreadCapture {
    int depth;                /* nested optimize() regions */
    int in_engine;            /* >0 while the engine itself runs Python */
    CaptureConfig config;     /* of the innermost region */
    CaptureConfig saved[CAPTURE_MAX_DEPTH];  /* configs of the enclosing regions */
    CaptureSession *session;  /* borrowed: the private capture in force, or NULL */
} ThreadCapture;


ThreadCapture *capture_state(void);
/* Enter a capture region on this thread; the first region of the process
   installs the hook.  Returns 0, or -1 with RecursionError when regions nest
   deeper than CAPTURE_MAX_DEPTH. */
int capture_enter(const CaptureConfig *cfg);
/* Leave the innermost region; the last one of the process removes the hook. */
void capture_exit(void);

/*
 * A call of an optimize()d function answered from its cache without making
 * a frame or entering a region (hook.c): when func is a plain function
 * called with exactly its positional parameters, and the first entry of its
 * start whose guards pass (backend: the region's backend, for
 * BACKEND_MATCH) returns from its plan, that plan's result -- new
 * reference, or NULL with the program's exception -- with *done set.
 * Everything else (a miss, an eager step or resume, a session, a stance,
 * a skip rule) leaves *done false, no exception and nothing run or
 * counted: the caller calls func inside its region, as always.
 */
PyObject *capture_call_direct(PyObject *func, PyObject *const *args, size_t nargsf,
                              PyObject *kwnames, PyObject *backend, bool *done);
/* Whether the hook is installed now (for tests). */
bool hook_installed(void);

/* dynscope.set_stance(): what the engine does on a frame (module.c). */
typedef enum Stance {
    STANCE_DEFAULT = 0,          /* compile, recompile up to cache_size_limit */
    STANCE_FAIL_ON_RECOMPILE,    /* a recompile raises RecompileError */
    STANCE_EAGER_ON_RECOMPILE,   /* a recompile runs the frame eagerly instead */
    STANCE_FORCE_EAGER,          /* nothing is captured; caches are kept */
} Stance;

/* Global configuration (module.c). */
typedef struct EngineConfig {
    Stance stance;            /* GIL; read per frame */
    int cache_size_limit;     /* entries per (code, resume offset); default 8 */
    PyObject *skip_prefixes;  /* strong: tuple of path prefixes never captured */
    PyObject *capture_prefixes; /* strong: tuple of path prefixes captured even
                                   inside a skip prefix (site-packages inside the
                                   stdlib's directory); the longest match wins */
    bool skip_tensorless_frames; /* a fresh frame with no array or tensor in reach
                                    runs without capture (default; hook.c) */
    bool cache_limit_warning; /* issue CacheLimitWarning (default); off, the limit
                                 is only counted and recorded, so that the
                                 program's warnings stay its own (--capture-all) */
} EngineConfig;

/*
 * The engine's process-wide state, gathered in one place (GIL protected).
 * What is per thread lives in ThreadCapture; what a private capture
 * (explain) keeps apart, in CaptureSession; each tensor library's types
 * and modules, in tensorlib; a file's interned strings stay in the file.
 */
typedef struct EngineState {
    EngineConfig config;          /* dynscope.config, set_stance() (module.c) */
    EngineCounters counters;      /* _C.counters(); sessions count apart */
    /* the frame hook (hook.c) */
    int capturing_threads;        /* threads inside an optimize() region; the
                                     hook is installed exactly when > 0 */
    bool hook_installed;
    /* the code caches (cache.c) */
    Py_ssize_t extra_index;       /* co_extra slot of our CodeCache, -1 before init */
    CodeCache *all_caches;        /* head of the list of live caches (each is
                                     owned by its code object's co_extra) */
    long long next_code_id;       /* process-unique code ids */
    int next_frame_id;            /* frame ids, restarted by reset() */
    /* the clock (module.c): engine_ticks() to ns */
    uint64_t base_ticks, base_ns; /* taken at module init */
    double ns_per_tick;           /* 0 until first measured */
    /* exceptions the program sees (module.c), strong */
    PyObject *unsupported_error;  /* dynscope.Unsupported, under fullgraph=True */
    PyObject *recompile_error;    /* dynscope.RecompileError, set_stance("fail_on_recompile") */
} EngineState;
extern EngineState engine;

/* The counters this thread's events count into. */
static inline EngineCounters *capture_counters(ThreadCapture *tc)
{
    return tc->session ? &tc->session->counters : &engine.counters;
}




/* Add the engine's functions, types and exceptions to the dynscope._C
   module (module.c; binding/module.c creates the module), register the
   engine's own event sinks and the SQLite recorder.  0 / -1. */
int engine_module_init(PyObject *module);


#endif /* DYNSCOPE_ENGINE_H */
