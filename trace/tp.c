/*
 * tp.c -- creates the probes of the `dynscope` tracepoint provider (tp.h)
 * and defines its tracepoints, and exports the four functions trace.c
 * resolves with dlsym (the ABI in trace.h).  Built alone as
 * build/libdynscope-tp.so, linked with liblttng-ust; the engine never links
 * it, so a machine without LTTng runs the engine with tracing off.
 * Pattern: lttng-ust doc/examples/easy-ust; design: DESIGN.md 4.2.
 */
#define LTTNG_UST_TRACEPOINT_CREATE_PROBES
#define LTTNG_UST_TRACEPOINT_DEFINE
/* Probes and call sites live in this one object: keep their symbols out of
   the process-wide namespace (the .so is loaded RTLD_GLOBAL). */
#define LTTNG_UST_TRACEPOINT_HIDDEN_DEFINITION
#define LTTNG_UST_TRACEPOINT_PROVIDER_HIDDEN_DEFINITION
#include "tp.h"

#define TP_EXPORT __attribute__((visibility("default")))

TP_EXPORT uint32_t dynscope_tp_abi(void);
TP_EXPORT void dynscope_tp_emit(const EventRecord *ev);
TP_EXPORT void dynscope_tp_frame_eval(long long code_id, int result, int entry,
                                      uint64_t guard_ns);
TP_EXPORT const volatile int *dynscope_tp_state(int kind);

/* The exported functions have the types trace.h's ABI names. */
#define TP_SAME_TYPE(fn, type) \
    _Static_assert(__builtin_types_compatible_p(__typeof__(&fn), type), #fn " vs " #type)
TP_SAME_TYPE(dynscope_tp_abi, TraceAbiFn);
TP_SAME_TYPE(dynscope_tp_emit, TraceEmitFn);
TP_SAME_TYPE(dynscope_tp_frame_eval, TraceFrameEvalFn);
TP_SAME_TYPE(dynscope_tp_state, TraceStateFn);

uint32_t dynscope_tp_abi(void)
{
    return TRACE_ABI;
}

void dynscope_tp_frame_eval(long long code_id, int result, int entry, uint64_t guard_ns)
{
    lttng_ust_tracepoint(dynscope, frame_eval, code_id, result, entry, guard_ns);
}

/* Cannot fail; a kind without a tracepoint (EV_ENTRY_STATS) is ignored. */
void dynscope_tp_emit(const EventRecord *ev)
{
    switch (ev->kind) {
    case EV_COMPILE_START:
        lttng_ust_tracepoint(dynscope, compile_start, ev);
        break;
    case EV_COMPILE_END:
        lttng_ust_tracepoint(dynscope, compile_end, ev);
        break;
    case EV_RECOMPILE:
        lttng_ust_tracepoint(dynscope, recompile, ev);
        break;
    case EV_GUARD_FAIL:
        lttng_ust_tracepoint(dynscope, guard_fail, ev);
        break;
    case EV_GRAPH_BREAK:
        lttng_ust_tracepoint(dynscope, graph_break, ev);
        break;
    case EV_GRAPH_COMPILED:
        lttng_ust_tracepoint(dynscope, graph_compiled, ev);
        break;
    case EV_CACHE_LIMIT:
        lttng_ust_tracepoint(dynscope, cache_limit, ev);
        break;
    case EV_FRAME_SKIP:
        lttng_ust_tracepoint(dynscope, frame_skip, ev);
        break;
    case EV_RESET:
        lttng_ust_tracepoint(dynscope, reset, ev);
        break;
    case EV_ANNOTATE:
        lttng_ust_tracepoint(dynscope, annotate, ev);
        break;
    case EV_ENTRY_STATS:   /* SQLite only: frame_eval carries the hits */
    case EV_FRAME_STATS:
    case EV_RUN_SPAN:
    case EV__COUNT:
        break;
    }
}

/* The `state` word lttng_ust_tracepoint_enabled() reads: liblttng-ust sets
   it while a session has the event enabled. */
#define TP_STATE(name) (&lttng_ust_tracepoint_dynscope___##name.state)

const volatile int *dynscope_tp_state(int kind)
{
    if (kind == TRACE_KIND_FRAME_EVAL)
        return TP_STATE(frame_eval);
    switch ((EventKind)kind) {
    case EV_COMPILE_START:  return TP_STATE(compile_start);
    case EV_COMPILE_END:    return TP_STATE(compile_end);
    case EV_RECOMPILE:      return TP_STATE(recompile);
    case EV_GUARD_FAIL:     return TP_STATE(guard_fail);
    case EV_GRAPH_BREAK:    return TP_STATE(graph_break);
    case EV_GRAPH_COMPILED: return TP_STATE(graph_compiled);
    case EV_CACHE_LIMIT:    return TP_STATE(cache_limit);
    case EV_FRAME_SKIP:     return TP_STATE(frame_skip);
    case EV_RESET:          return TP_STATE(reset);
    case EV_ANNOTATE:       return TP_STATE(annotate);
    case EV_ENTRY_STATS:
    case EV_FRAME_STATS:
    case EV_RUN_SPAN:
    case EV__COUNT:
        break;
    }
    return NULL;
}
