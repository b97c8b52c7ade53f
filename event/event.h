/*
 * event.h -- the event vocabulary, at the bottom of the layers: the kinds
 * of event the engine reports and one event as plain C data (no Python.h).
 * The engine builds each event once and hands it to every sink that asked
 * for its kind (engine/capture/events.h); the SQLite recorder (store/) and the
 * LTTng provider (trace/) read this form, and include this header, not the
 * engine's.  DESIGN.md 4.1; fields, units and names are documented in
 * docs/events.md.
 *
 * Strings are borrowed for the duration of the sink call only (NUL
 * terminated UTF-8, never NULL: "" when absent); a sink copies what it
 * keeps.  Times are nanoseconds.
 */
#ifndef DYNSCOPE_EVENT_H
#define DYNSCOPE_EVENT_H

#include <stdint.h>

typedef enum EventKind {
    EV_COMPILE_START,   /* a translation begins                          */
    EV_COMPILE_END,     /* it ended: outcome, duration, graphs/nodes/guards */
    EV_RECOMPILE,       /* a compile of a frame that already had entries  */
    EV_GUARD_FAIL,      /* one older entry's first failing guard on a miss */
    EV_GRAPH_BREAK,     /* a graph ended at a break                       */
    EV_GRAPH_COMPILED,  /* the backend compiled a graph                   */
    EV_CACHE_LIMIT,     /* a frame reached config.cache_size_limit        */
    EV_FRAME_SKIP,      /* a frame runs without capture                   */
    EV_ENTRY_STATS,     /* a cache entry's counters (periodic snapshot)   */
    EV_RESET,           /* dynscope.reset()                               */
    EV_ANNOTATE,        /* the program's own mark (dynscope.annotate)     */
    EV_FRAME_STATS,     /* a frame at its cache limit: its calls since (periodic) */
    EV_RUN_SPAN,        /* a timed call's graph run or eager step (sampled) */
    EV__COUNT
} EventKind;

typedef struct EventRecord {
    EventKind kind;
    uint64_t wall_ns;          /* CLOCK_REALTIME, for humans and SQL */
    uint64_t mono_ns;          /* CLOCK_MONOTONIC, for durations and order */
    /* the code object (every kind but EV_RESET) */
    long long code_id;         /* process-unique; stable for the code's life */
    const char *qualname;
    const char *filename;
    int firstlineno;
    /* the cache entry concerned: "frame_id/frame_compile_id" */
    const char *compile_id;
    int frame_id;
    int frame_compile_id;
    int resume_offset;         /* bytes; 0 = function start */
    /* EV_COMPILE_START: the call path that reached the frame, from the
       program's entry: [[file, line, name], ...] outermost first, the
       compiled frame last (its first line, or the resume line); at most
       EVENT_CALL_PATH_MAX frames, the outermost dropped first (then the
       first item is ["...", 0, "N frames not shown"]) */
    const char *call_path_json;
    /* EV_COMPILE_END */
    const char *outcome;       /* "ok", "skipped", "error" */
    uint64_t duration_ns;
    int graphs, nodes, guards;
    const char *guards_text;   /* the entry's guards, one expression per line */
    const char *guard_sites_json;  /* where each guard came from:
                                  {"sites": [user stack, ...], "guards":
                                  [site index or -1, ...]}, a user stack as
                                  user_stack_json */
    /* where duration_ns went (disjoint parts; docs/sql.md compiles.*_ns):
       tracing the bytecode, guard building, GraphModule making, the
       backend (backend_ns below), the rest of the plan's making; and
       events_ns, outside duration_ns: the events emitted for the compile
       before compile_end.  attempts: translations made (retries count). */
    uint64_t trace_ns, guards_ns, graph_ns, plan_ns, events_ns;
    int attempts;
    const char *hatches;       /* what an escape hatch kept in the graph
                                  (Plan.hatches: "allow_in_graph: f is one
                                  graph node"), one per line; "" none */
    /* EV_RECOMPILE, EV_FRAME_SKIP, EV_CACHE_LIMIT, EV_GRAPH_BREAK */
    const char *reason;
    /* EV_GUARD_FAIL */
    const char *entry_compile_id;  /* the older entry whose guard failed */
    const char *guard_kind;        /* "TENSOR_MATCH", ... */
    const char *expr;              /* "L['x'].shape == (3, 4)" */
    const char *observed;          /* "(5, 4)" */
    const char *guard_file;        /* the user code that made the guard, "" unknown */
    int guard_line;                /* its line, 0 unknown */
    /* EV_RECOMPILE: the older entry nearest to the new inputs and every
       guard of it that failed: {"entry", "failing", "guards": [{"idx",
       "kind", "expr", "observed", "user_stack"}], "capture_ns"}; "" none */
    const char *nearest_json;
    /* EV_RECOMPILE and EV_CACHE_LIMIT: the miss's failures, one per older
       entry, as its EV_GUARD_FAIL events carry them, for a sink that takes
       them with the event instead (the SQLite recorder: one event, not one
       per entry, as a storm's misses fail every older entry).  Per failure
       six fields, entry_compile_id, guard_kind, expr, observed, guard_file
       and guard_line (decimal), each as "LEN:" and LEN bytes (no NUL);
       "" none.  store/writer.c unpacks it. */
    const char *failures_packed;
    /* EV_GRAPH_BREAK and EV_FRAME_SKIP: the registry's type and class
       (engine/base/breaks.h, docs/breaks.md) */
    const char *break_type;    /* "DS0001" */
    const char *break_class;   /* "your code", "library code", "engine limit", "fundamental" */
    /* EV_GRAPH_BREAK */
    const char *break_kind;    /* "call", "data_dependent_branch", "data_escape", "unsupported" */
    const char *break_file;
    int break_line;
    int break_offset;          /* bytes, in the innermost frame */
    const char *user_stack_json;  /* [[file, line, name, source], ...] outermost first */
    /* EV_GRAPH_COMPILED (backend_ns: EV_COMPILE_END too) */
    const char *backend;
    uint64_t backend_ns;
    const char *graph_code;    /* generated Python of the graph */
    const char *ops;           /* op names, comma separated */
    /* EV_ENTRY_STATS */
    uint64_t hits;
    uint64_t guard_ns;
    /* EV_ENTRY_STATS: what the entry's calls cost, estimated from the
       calls the engine timed (cost_samples of them, 1 in 64 while
       recording; engine/capture/hook.c), scaled to hits; cumulative.
       run_ns: calls that began at this entry, start to end; break_ns: time
       outside graphs after this entry's graph ended at its break (the
       eager step, the resume frame's lookup and rebuilds, or the rest of
       the frame run by the interpreter); break_graphs: graphs launched
       after that break (one per call when the resume runs a graph). */
    uint64_t cost_samples, run_ns, break_ns, break_graphs;
    /* EV_FRAME_STATS (frame_id, resume_offset; cost_samples): a frame at
       its cache limit -- the calls it has run without capture since, and
       their time, estimated from the timed ones (cumulative) */
    uint64_t limit_calls, uncaptured_ns;
    /* EV_RUN_SPAN (compile_id: the entry; wall_ns: the start; duration_ns):
       "graph", the entry's graph running, or "eager", the time outside
       graphs after its break (the eager step and the resume), of a call
       the engine timed (engine/capture/cost.c) */
    const char *span_kind;
    /* EV_ANNOTATE (no code object): a mark the program put in
       (dynscope.annotate, annotate_span) */
    const char *annotation;        /* its name: "step" */
    const char *annotation_phase;  /* "mark", or a span's "begin" and "end" */
    const char *annotation_fields; /* its fields, a JSON object: {"n": 12} */
} EventRecord;

/* The deepest call path a compile_start carries (call_path_json). */
#define EVENT_CALL_PATH_MAX 64

/* Sets of kinds, as a sink asks for them (engine/capture/events.h). */
#define EV_MASK(kind) (1u << (unsigned)(kind))
#define EV_MASK_ALL ((1u << (unsigned)EV__COUNT) - 1u)

/* The costly text fields of a record: the engine fills them only when a
   sink that received the event asks (engine/capture/events.h event_record()). */
enum {
    EVF_GUARDS_TEXT = 1u << 0,   /* guards_text (EV_COMPILE_END)          */
    EVF_GRAPH_CODE = 1u << 1,    /* graph_code (EV_GRAPH_COMPILED)        */
    EVF_OPS = 1u << 2,           /* ops, backend (EV_GRAPH_COMPILED)      */
    EVF_USER_STACK = 1u << 3,    /* user_stack_json (EV_GRAPH_BREAK)      */
    EVF_GUARD_SITES = 1u << 4,   /* guard_sites_json (EV_COMPILE_END)     */
    EVF_NEAREST = 1u << 5,       /* nearest_json (EV_RECOMPILE)           */
    EVF_FAILURES = 1u << 6,      /* failures_packed (EV_RECOMPILE, EV_CACHE_LIMIT) */
    EVF_CALL_PATH = 1u << 7,     /* call_path_json (EV_COMPILE_START)     */
    EVF_ALL = 0xffu,
};

/* The name of a kind as in docs/events.md ("compile_start", ...); "?" for
   a value out of range.  Cannot fail. */
static inline const char *event_kind_name(EventKind kind)
{
    static const char *const names[EV__COUNT] = {
        [EV_COMPILE_START] = "compile_start",   [EV_COMPILE_END] = "compile_end",
        [EV_RECOMPILE] = "recompile",           [EV_GUARD_FAIL] = "guard_fail",
        [EV_GRAPH_BREAK] = "graph_break",       [EV_GRAPH_COMPILED] = "graph_compiled",
        [EV_CACHE_LIMIT] = "cache_limit",       [EV_FRAME_SKIP] = "frame_skip",
        [EV_ENTRY_STATS] = "entry_stats",       [EV_RESET] = "reset",
        [EV_ANNOTATE] = "annotate",             [EV_FRAME_STATS] = "frame_stats",
        [EV_RUN_SPAN] = "run_span",
    };
    return (unsigned)kind < (unsigned)EV__COUNT ? names[kind] : "?";
}

#endif /* DYNSCOPE_EVENT_H */
