/*
 * capture.h -- engine/capture/, the room that decides, per frame, what
 * runs: the PEP 523 hook and the capture regions (hook.c), the per-code
 * cache (cache.c), the miss path that calls the translator, the event
 * interface every sink registers with (events.h) and the user's warnings
 * (warn.c).  It owns the engine's process-wide state (EngineState).
 * DESIGN.md 3.1-3.2, 4.1.
 * May include: every room below (base, graph, guards, plan, translate),
 * ../../event/, ../../trace/.  Nothing above (sinks, binding).
 */
#ifndef DYNSCOPE_CAPTURE_H
#define DYNSCOPE_CAPTURE_H

#include "../base/base.h"
#include "../plan/plan.h"

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

/* dynscope.set_stance(): what the engine does on a frame (binding/engine.c). */
typedef enum Stance {
    STANCE_DEFAULT = 0,          /* compile, recompile up to cache_size_limit */
    STANCE_FAIL_ON_RECOMPILE,    /* a recompile raises RecompileError */
    STANCE_EAGER_ON_RECOMPILE,   /* a recompile runs the frame eagerly instead */
    STANCE_FORCE_EAGER,          /* nothing is captured; caches are kept */
} Stance;

/* Global configuration (binding/engine.c). */
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
    EngineConfig config;          /* dynscope.config, set_stance() (binding/engine.c) */
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
    /* exceptions the program sees (binding/engine.c), strong */
    PyObject *unsupported_error;  /* dynscope.Unsupported, under fullgraph=True */
    PyObject *recompile_error;    /* dynscope.RecompileError, set_stance("fail_on_recompile") */
} EngineState;
extern EngineState engine;

/* The counters this thread's events count into. */
static inline EngineCounters *capture_counters(ThreadCapture *tc)
{
    return tc->session ? &tc->session->counters : &engine.counters;
}

#include "../translate/translator.h"

#endif /* DYNSCOPE_CAPTURE_H */
