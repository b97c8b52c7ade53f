/*
 * cache.h -- engine/cache/, the per-code-object cache (DESIGN.md 3.2):
 * CodeCache in the code object's co_extra, a CacheFrame per (resume
 * offset, masks), CacheEntry (guards + plan + counters) and the Python
 * type users see through dynscope.cache_entries().  The room owns its
 * registry (co_extra index, the list of live caches, code and frame ids);
 * it never reads the thread's capture state nor emits events: the capture
 * room above passes what it needs (a session's frame-id counter, a
 * callback for reset).
 * Invariants (GIL protected): a CodeCache and its CacheFrames are freed
 * only with their code object; reset swaps entry lists, never mutates one
 * in place.
 * May include: ../base/, ../graph/, ../guards/, ../plan/.  Nothing above.
 */
#ifndef DYNSCOPE_CACHE_H
#define DYNSCOPE_CACHE_H

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
    PyObject *shown_as;       /* strong or NULL: for a decorator's wrapper, how users
                                 read its name, "can_return_tuple(wrapper) \u2192
                                 LlamaModel.forward" (../capture/events.c) */
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
    /* Where compile_ns went (docs/sql.md compiles.*_ns), disjoint parts of
       it: the backend, GraphModule making, the rest of the plan's making,
       guard building, and the rest -- tracing the bytecode, over every
       attempt (attempts: retries count).  events_ns is outside compile_ns:
       the events emitted for the compile before compile_end. */
    uint64_t backend_ns, graph_ns, plan_ns, guards_ns, trace_ns, events_ns;
    int attempts;
    /* What its calls cost, from the calls the hook timed (../capture/cost.c):
       cost_samples timed passes through this entry; over those, the whole
       calls that began here (run), the time outside graphs after its break
       (break) and the graphs launched after that break.  engine_ticks. */
    uint64_t cost_samples, cost_run_ticks, cost_break_ticks, cost_break_graphs;
    PyObject *eager_reason;   /* strong or NULL.  Set: translation stopped for
                                 inputs that pass `guards` (the guards read
                                 before it stopped), for this reason; a hit
                                 runs the frame without capture instead of
                                 translating it again on every call */
} CacheEntry;

extern PyTypeObject *CacheEntryType;

/* An entry's costs over all its hits, scaled from the timed passes. */
typedef struct CacheEntryCosts {
    uint64_t samples, run_ns, break_ns, break_graphs;
} CacheEntryCosts;
/* Fill *out (zeros when nothing was timed).  Cannot fail. */
void cache_entry_costs(const CacheEntry *e, CacheEntryCosts *out);

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
    /* The frameless call (../capture/hook.c capture_call_direct) of a frame
       whose entries need the frame (an eager step): calls in a row whose
       guards passed on such an entry, and calls left to the frame without
       checking them (the hook checks them again anyway).  GIL. */
    unsigned direct_framed, direct_skips;
    int failed;               /* translations that failed for this frame's values
                                 (not for good): they count toward
                                 cache_size_limit as entries do, so that a frame
                                 is not translated again on every call */
    bool limit_warned;
    /* At its limit: calls run without capture since, and (cost sampling,
       ../capture/cost.c) the timed ones and their ticks; limit_snap: calls
       at the last recorded snapshot.  GIL. */
    uint64_t limit_calls, limit_samples, limit_ticks, limit_snap;
    /* At its limit: its entries' hits counted at the last look
       (../capture/hook.c limit_look), which skips the code for good when
       they answered too few of the calls since. */
    uint64_t limit_hits_seen;
    bool ran_eager_first;     /* set_stance("eager_then_compile") ran its first call */
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
    /* Tensors reached any other way (attributes, items, closures,
       globals): strong dict or NULL, TranslateRequest.source_sizes. */
    PyObject *source_sizes;
} CacheFrame;

typedef struct CodeCache {
    PyCodeObject *code;       /* borrowed: the cache lives in this code's co_extra */
    long long code_id;        /* process-unique, stable for the code's lifetime */
    uint32_t classified_at;   /* hatch_generation when the static skip rules were
                                 applied; 0: not yet (again after reset) */
    int nframes;
    CacheFrame **frames;      /* owned: array of owned frames */
    PyObject *skip_reason;    /* strong: str when the code runs eagerly for good, else NULL */
    bool skip_reported;       /* the skip was an event (not a path or static rule) */
    bool skip_callees;        /* an escape hatch's: what its frames call runs
                                 without capture too (dynscope.disable) */
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
   restart at 0.  on_reset (may be NULL) runs once the caches are empty,
   before the old entries are released: the layer above resets what it
   keeps about them (counters, sinks) there, without this room naming it.
   Safe while other threads are inside plans. */
void cache_reset_all(void (*on_reset)(void));
/* Give cf its frame id if it has none yet: from *next_id (a private
   capture's counter, advanced) or, when next_id is NULL, from the
   process's.  Cannot fail. */
void cache_frame_assign_id(CacheFrame *cf, int *next_id);
/* A cache not attached to its code object (a CaptureSession's): freed by
   cache_free_detached, never reached by reset().  NULL with exception. */
CodeCache *cache_new_detached(PyCodeObject *code);
void cache_free_detached(CodeCache *cc);
/* Call fn on every entry of every (global) code cache; with only_changed,
   only on entries whose hits moved since the last such walk (which then
   records their hits as seen).  fn must not run Python.  Cannot fail. */
void cache_for_each_entry(void (*fn)(CodeCache *, CacheEntry *), bool only_changed);
/* Call fn on every frame of every (global) code cache whose limit_calls
   moved since the last such walk (which records them as seen).  fn must
   not run Python.  Cannot fail. */
void cache_for_each_limited_frame(void (*fn)(CodeCache *, CacheFrame *));
/* All entries of a code object, frame by frame in lookup order (new list). */
PyObject *cache_entries_list(CodeCache *cc);
/* Create the CacheEntry type and add it to `module`.  0 / -1. */
int cache_types_init(PyObject *module);
/* New CacheEntry (empty guards and plan), or NULL. */
CacheEntry *cache_entry_new(void);

#endif /* DYNSCOPE_CACHE_H */
