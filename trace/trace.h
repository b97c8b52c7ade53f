/*
 * trace.h -- the engine's side of LTTng tracing (DESIGN.md 4.2), plain C:
 * no LTTng header is needed to build or run the engine.  trace_init()
 * dlopen()s the tracepoint provider (build/libdynscope-tp.so, trace/tp.c);
 * until it succeeds, and wherever LTTng is absent, every call here is a
 * no-op.  Events and fields: docs/events.md.
 *
 * Cost when no session listens: trace_frame_eval() and trace_enabled() are
 * one load through a pointer and one predicted branch -- the pointer goes
 * to the tracepoint's own `state` word inside liblttng-ust once the
 * provider is loaded, and to a constant 0 before.
 *
 * This header is also the ABI between the two halves: tp.c includes it,
 * implements the TRACE_SYM_* functions and reports TRACE_ABI in
 * dynscope_tp_abi(); trace_init() refuses a provider built from another
 * version of this header or of event/event.h.
 *
 * Threads: trace_init() once, before other threads call in (the engine
 * calls it at import, under the GIL).  Everything else is thread-safe:
 * the provider only reads the record, and LTTng's buffers are per CPU.
 */
#ifndef DYNSCOPE_TRACE_H
#define DYNSCOPE_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "../event/event.h"

/* frame_eval's `result` (an enum in the trace: "hit", "miss", "skip"). */
typedef enum TraceFrameResult {
    TRACE_FRAME_HIT = 0,    /* an entry's guards passed; its plan ran      */
    TRACE_FRAME_MISS = 1,   /* no entry passed: compile (or cache_limit)   */
    TRACE_FRAME_SKIP = 2,   /* the frame runs without capture (skip mark)  */
} TraceFrameResult;

/* The environment variable naming the provider .so; it overrides the path
   given to trace_init().  Empty or "0": tracing off. */
#define TRACE_PROVIDER_ENV "DYNSCOPE_TRACE_PROVIDER"

/* ---- ABI between trace.c and the provider (trace/tp.c) ----------------- */

/* Bump when a TRACE_SYM_* signature or TraceFrameResult changes. */
#define TRACE_ABI_VERSION 2u   /* 2: EV_ANNOTATE */
/* What dynscope_tp_abi() returns: the version and sizeof(EventRecord). */
#define TRACE_ABI ((TRACE_ABI_VERSION << 16) | (uint32_t)sizeof(EventRecord))
/* The pseudo-kind of frame_eval in dynscope_tp_state(). */
#define TRACE_KIND_FRAME_EVAL ((int)EV__COUNT)

#define TRACE_SYM_ABI "dynscope_tp_abi"
#define TRACE_SYM_EMIT "dynscope_tp_emit"
#define TRACE_SYM_FRAME_EVAL "dynscope_tp_frame_eval"
#define TRACE_SYM_STATE "dynscope_tp_state"

typedef uint32_t (*TraceAbiFn)(void);
/* Record ev as the tracepoint of ev->kind, if that tracepoint is enabled.
   ev and its strings are only read, during the call. */
typedef void (*TraceEmitFn)(const EventRecord *ev);
typedef void (*TraceFrameEvalFn)(long long code_id, int result, int entry,
                                 uint64_t guard_ns);
/* The tracepoint's enabled word for an EventKind or TRACE_KIND_FRAME_EVAL,
   or NULL when that kind has no tracepoint (EV_ENTRY_STATS). */
typedef const volatile int *(*TraceStateFn)(int kind);

/* ---- Engine API --------------------------------------------------------- */

/* Load the provider: $DYNSCOPE_TRACE_PROVIDER if set, else provider_path
   (NULL: tracing stays off).  Returns 0 when the provider is loaded (now or
   by an earlier call), -1 when tracing stays off: no path, the .so or
   liblttng-ust missing, or a provider of another ABI -- trace_error() says
   which.  Never prints, never aborts; on failure nothing changes.  The
   provider stays loaded for the life of the process. */
int trace_init(const char *provider_path);

/* 1 when a provider is loaded (whether or not a session listens). */
int trace_loaded(void);

/* Why the last trace_init() left tracing off ("" if it did not).
   Static storage, valid until the next trace_init(). */
const char *trace_error(void);

/* Internal to the inline functions below (trace.c): never NULL; a constant
   0 and no-op functions until a provider loads. */
extern const volatile int *trace_frame_eval_on;
extern TraceFrameEvalFn trace_frame_eval_fn;
extern TraceEmitFn trace_emit_fn;
/* Per EventKind: the tracepoint's enabled word, NULL when off or absent. */
extern const volatile int *trace_kind_on[EV__COUNT];

/* Nonzero when some session records frame_eval.  Lets the hot path skip
   timing the guards when nobody listens. */
static inline int trace_frame_eval_enabled(void)
{
    return __builtin_expect(*trace_frame_eval_on != 0, 0);
}

/* The hot-path event: one frame evaluated.  entry: index of the entry that
   hit in its frame's list, -1 on a miss or skip.  guard_ns: time spent in
   guards for this call (0 if not measured).  Cannot fail. */
static inline void trace_frame_eval(long long code_id, TraceFrameResult result,
                                    int entry, uint64_t guard_ns)
{
    if (trace_frame_eval_enabled())
        trace_frame_eval_fn(code_id, (int)result, entry, guard_ns);
}

/* Nonzero when some session records events of this kind: build the
   EventRecord only then (unless another sink wants it).  Cannot fail. */
static inline int trace_enabled(EventKind kind)
{
    const volatile int *on = (unsigned)kind < (unsigned)EV__COUNT ? trace_kind_on[kind] : NULL;
    return on != NULL && __builtin_expect(*on != 0, 0);
}

/* Nonzero when some session records any cold event (every kind but
   frame_eval).  A loop over the kinds: for cold paths. */
int trace_active(void);

/* Send a cold event to LTTng if its tracepoint is enabled.  ev is only
   read, during the call.  Cannot fail. */
static inline void trace_emit(const EventRecord *ev)
{
    if (trace_enabled(ev->kind))
        trace_emit_fn(ev);
}

#endif /* DYNSCOPE_TRACE_H */
