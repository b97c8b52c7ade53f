/*
 * capture.h -- engine/capture/, the room that decides, per frame, what
 * runs: the PEP 523 hook and the capture regions (hook.c), the lookup in
 * the per-code cache (../cache/), the miss path that calls the translator
 * with a TranslateRequest, the event
 * interface every sink registers with (events.h) and the user's warnings
 * (warn.c).  It owns the engine's process-wide state (EngineState).
 * DESIGN.md 3.1-3.2, 4.1.
 * May include: every room below (base, graph, guards, plan, translate, cache),
 * ../../event/, ../../trace/.  Nothing above (sinks, binding).
 */
#ifndef DYNSCOPE_CAPTURE_H
#define DYNSCOPE_CAPTURE_H

#include "../base/base.h"
#include "../plan/plan.h"
#include "../cache/cache.h"

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
    int off_at;               /* the depth at which a disable()d frame turned
                                 capture off (0: none; the hook captures while
                                 depth != off_at, so a region entered below
                                 it captures again) */
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
/* A recording wants what calls cost (on) or no longer does (off): while
   any does and config.cost_sampling is set, the chain runner times 1 call
   in 64 (cost.c).  GIL. */
void capture_cost_sampling(bool on);
/* config.cost_sampling = allowed.  GIL. */
void capture_set_cost_sampling(bool allowed);
/* A torch profiler started: each captured call becomes a range, begun with
   enter(name, None) and ended with exit(handle) (torch.ops.profiler's
   record_function ops; borrowed, kept); NULL or None: it stopped.  GIL
   (profiler_ranges.c). */
void capture_set_profiler_ranges(PyObject *enter, PyObject *exit);
/* Whether captured calls are ranges now.  GIL. */
bool capture_profiler_ranges_on(void);
/* Whether the hook is installed now (for tests). */
bool hook_installed(void);

/* dynscope.set_stance(): what the engine does on a frame (binding/engine.c). */
typedef enum Stance {
    STANCE_DEFAULT = 0,          /* compile, recompile up to cache_size_limit */
    STANCE_FAIL_ON_RECOMPILE,    /* a recompile raises RecompileError */
    STANCE_EAGER_ON_RECOMPILE,   /* a recompile runs the frame eagerly instead */
    STANCE_FORCE_EAGER,          /* nothing is captured; caches are kept */
    STANCE_EAGER_THEN_COMPILE,   /* a frame's first call runs eagerly, then compile */
} Stance;

/* Global configuration (binding/engine.c). */
typedef struct EngineConfig {
    Stance stance;            /* GIL; read per frame */
    int cache_size_limit;     /* entries per (code, resume offset); default 8 */
    int accumulated_cache_size_limit; /* entries over all of a code's frames,
                                         resume frames included; default 256 */
    bool fail_on_cache_limit; /* a limit raises CacheLimitError instead of
                                 running the frame without capture */
    PyObject *skip_prefixes;  /* strong: tuple of path prefixes never captured */
    PyObject *capture_prefixes; /* strong: tuple of path prefixes captured even
                                   inside a skip prefix (site-packages inside the
                                   stdlib's directory); the longest match wins */
    bool skip_tensorless_frames; /* a fresh frame with no array or tensor in reach
                                    runs without capture (default; hook.c) */
    bool cache_limit_warning; /* issue CacheLimitWarning (default); off, the limit
                                 is only counted and recorded, so that the
                                 program's warnings stay its own (--capture-all) */
    bool force_parameter_static_shapes; /* automatic dynamic leaves parameters
                                           and buffers static (default) */
    bool cost_sampling;       /* a recording times 1 call in 64 for what breaks
                                 cost (default; cost.c); set through
                                 capture_set_cost_sampling */
} EngineConfig;

/*
 * The capture room's process-wide state: the config and the counters (set
 * and read by the layers above through this header) and the exceptions the
 * program sees (GIL protected).  Split by owner: what is per thread lives in
 * ThreadCapture; what a private capture (explain) keeps apart, in
 * CaptureSession; the hook's flags in hook.c; the cache's registry in
 * ../cache/cache.c; the clock's calibration in ../base/base.c; each tensor
 * library's types and modules, in tensorlib; a file's interned strings
 * stay in the file.
 */
typedef struct EngineState {
    EngineConfig config;          /* dynscope.config, set_stance() (binding/engine.c) */
    EngineCounters counters;      /* _C.counters(); sessions count apart */
    /* exceptions the program sees (binding/engine.c), strong */
    PyObject *unsupported_error;  /* dynscope.Unsupported, under fullgraph=True */
    PyObject *recompile_error;    /* dynscope.RecompileError, set_stance("fail_on_recompile") */
    PyObject *cache_limit_error;  /* dynscope.CacheLimitError, config.fail_on_cache_limit */
} EngineState;
extern EngineState engine;

/* reset(): drop every cache entry and skip mark (cache_reset_all), zero
   the process's counters and tell the sinks (events_reset).  Safe while
   other threads are inside plans.  Cannot fail. */
void capture_reset_all(void);

/* The counters this thread's events count into. */
static inline EngineCounters *capture_counters(ThreadCapture *tc)
{
    return tc->session ? &tc->session->counters : &engine.counters;
}

#include "../translate/translator.h"

#endif /* DYNSCOPE_CAPTURE_H */
