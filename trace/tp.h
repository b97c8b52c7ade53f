/*
 * tp.h -- the LTTng-UST tracepoint provider `dynscope` (DESIGN.md 4.2, 6):
 * one LTTNG_UST_TRACEPOINT_EVENT per event of the vocabulary.  Only
 * trace/tp.c includes it (it both creates the probes and defines the
 * tracepoints); the engine reaches them through trace.h.  Event names,
 * fields, units and log levels are a public contract: docs/events.md.
 *
 * Cold events take the engine's EventRecord and are at log level INFO;
 * frame_eval (hot) takes scalars and is at DEBUG, so
 * `lttng enable-event -u 'dynscope:*' --loglevel=INFO` leaves it out.
 */
#undef LTTNG_UST_TRACEPOINT_PROVIDER
#define LTTNG_UST_TRACEPOINT_PROVIDER dynscope

#undef LTTNG_UST_TRACEPOINT_INCLUDE
#define LTTNG_UST_TRACEPOINT_INCLUDE "./tp.h"

#if !defined(DYNSCOPE_TP_H) || defined(LTTNG_UST_TRACEPOINT_HEADER_MULTI_READ)
#define DYNSCOPE_TP_H

#include <lttng/tracepoint.h>

#include "trace.h"

/* EventRecord strings are never NULL by contract; a NULL still must not
   crash the traced program. */
#ifndef TP_STR
/* An absent string is recorded as "-": lttng-ust 2.13 records an empty
   string field wrongly (the reader shows another field's text). */
#define TP_STR(s) ((s) != NULL && (s)[0] != '\0' ? (s) : "-")
#endif

/* The code object, first fields of every cold event but reset. */
#define TP_CODE_FIELDS(ev)                                           \
    lttng_ust_field_integer(int64_t, code_id, (ev)->code_id)         \
    lttng_ust_field_string(qualname, TP_STR((ev)->qualname))         \
    lttng_ust_field_string(filename, TP_STR((ev)->filename))         \
    lttng_ust_field_integer(int32_t, firstlineno, (ev)->firstlineno)

/* The cache entry: "frame_id/frame_compile_id" and its parts. */
#define TP_COMPILE_FIELDS(ev)                                        \
    lttng_ust_field_string(compile_id, TP_STR((ev)->compile_id))     \
    lttng_ust_field_integer(int32_t, frame_id, (ev)->frame_id)       \
    lttng_ust_field_integer(int32_t, frame_compile_id, (ev)->frame_compile_id)

LTTNG_UST_TRACEPOINT_ENUM(dynscope, frame_result,
    LTTNG_UST_TP_ENUM_VALUES(
        lttng_ust_field_enum_value("hit", TRACE_FRAME_HIT)
        lttng_ust_field_enum_value("miss", TRACE_FRAME_MISS)
        lttng_ust_field_enum_value("skip", TRACE_FRAME_SKIP)
    )
)

/* Hot: every frame the hook sees while capturing. */
LTTNG_UST_TRACEPOINT_EVENT(dynscope, frame_eval,
    LTTNG_UST_TP_ARGS(long long, code_id, int, result, int, entry, uint64_t, guard_ns),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_integer(int64_t, code_id, code_id)
        lttng_ust_field_enum(dynscope, frame_result, int8_t, result, result)
        lttng_ust_field_integer(int32_t, entry, entry)
        lttng_ust_field_integer(uint64_t, guard_ns, guard_ns)
    )
)
LTTNG_UST_TRACEPOINT_LOGLEVEL(dynscope, frame_eval, LTTNG_UST_TRACEPOINT_LOGLEVEL_DEBUG)

LTTNG_UST_TRACEPOINT_EVENT(dynscope, compile_start,
    LTTNG_UST_TP_ARGS(const EventRecord *, ev),
    LTTNG_UST_TP_FIELDS(
        TP_CODE_FIELDS(ev)
        TP_COMPILE_FIELDS(ev)
        lttng_ust_field_integer(int32_t, resume_offset, ev->resume_offset)
    )
)
LTTNG_UST_TRACEPOINT_LOGLEVEL(dynscope, compile_start, LTTNG_UST_TRACEPOINT_LOGLEVEL_INFO)

LTTNG_UST_TRACEPOINT_EVENT(dynscope, compile_end,
    LTTNG_UST_TP_ARGS(const EventRecord *, ev),
    LTTNG_UST_TP_FIELDS(
        TP_CODE_FIELDS(ev)
        TP_COMPILE_FIELDS(ev)
        lttng_ust_field_integer(int32_t, resume_offset, ev->resume_offset)
        lttng_ust_field_string(outcome, TP_STR(ev->outcome))
        lttng_ust_field_integer(uint64_t, duration_ns, ev->duration_ns)
        lttng_ust_field_integer(int32_t, graphs, ev->graphs)
        lttng_ust_field_integer(int32_t, nodes, ev->nodes)
        lttng_ust_field_integer(int32_t, guards, ev->guards)
    )
)
LTTNG_UST_TRACEPOINT_LOGLEVEL(dynscope, compile_end, LTTNG_UST_TRACEPOINT_LOGLEVEL_INFO)

LTTNG_UST_TRACEPOINT_EVENT(dynscope, recompile,
    LTTNG_UST_TP_ARGS(const EventRecord *, ev),
    LTTNG_UST_TP_FIELDS(
        TP_CODE_FIELDS(ev)
        TP_COMPILE_FIELDS(ev)
        lttng_ust_field_integer(int32_t, resume_offset, ev->resume_offset)
        lttng_ust_field_string(reason, TP_STR(ev->reason))
    )
)
LTTNG_UST_TRACEPOINT_LOGLEVEL(dynscope, recompile, LTTNG_UST_TRACEPOINT_LOGLEVEL_INFO)

LTTNG_UST_TRACEPOINT_EVENT(dynscope, guard_fail,
    LTTNG_UST_TP_ARGS(const EventRecord *, ev),
    LTTNG_UST_TP_FIELDS(
        TP_CODE_FIELDS(ev)
        lttng_ust_field_string(compile_id, TP_STR(ev->compile_id))
        lttng_ust_field_string(entry_compile_id, TP_STR(ev->entry_compile_id))
        lttng_ust_field_string(guard_kind, TP_STR(ev->guard_kind))
        lttng_ust_field_string(expr, TP_STR(ev->expr))
        lttng_ust_field_string(observed, TP_STR(ev->observed))
        lttng_ust_field_string(guard_file, TP_STR(ev->guard_file))
        lttng_ust_field_integer(int32_t, guard_line, ev->guard_line)
    )
)
LTTNG_UST_TRACEPOINT_LOGLEVEL(dynscope, guard_fail, LTTNG_UST_TRACEPOINT_LOGLEVEL_INFO)

LTTNG_UST_TRACEPOINT_EVENT(dynscope, graph_break,
    LTTNG_UST_TP_ARGS(const EventRecord *, ev),
    LTTNG_UST_TP_FIELDS(
        TP_CODE_FIELDS(ev)
        lttng_ust_field_string(compile_id, TP_STR(ev->compile_id))
        lttng_ust_field_string(break_kind, TP_STR(ev->break_kind))
        lttng_ust_field_string(reason, TP_STR(ev->reason))
        lttng_ust_field_string(break_file, TP_STR(ev->break_file))
        lttng_ust_field_integer(int32_t, break_line, ev->break_line)
        lttng_ust_field_integer(int32_t, break_offset, ev->break_offset)
        lttng_ust_field_string(user_stack_json, TP_STR(ev->user_stack_json))
        lttng_ust_field_string(break_type, TP_STR(ev->break_type))
        lttng_ust_field_string(break_class, TP_STR(ev->break_class))
    )
)
LTTNG_UST_TRACEPOINT_LOGLEVEL(dynscope, graph_break, LTTNG_UST_TRACEPOINT_LOGLEVEL_INFO)

LTTNG_UST_TRACEPOINT_EVENT(dynscope, graph_compiled,
    LTTNG_UST_TP_ARGS(const EventRecord *, ev),
    LTTNG_UST_TP_FIELDS(
        TP_CODE_FIELDS(ev)
        lttng_ust_field_string(compile_id, TP_STR(ev->compile_id))
        lttng_ust_field_integer(int32_t, nodes, ev->nodes)
        lttng_ust_field_string(backend, TP_STR(ev->backend))
        lttng_ust_field_integer(uint64_t, backend_ns, ev->backend_ns)
        lttng_ust_field_string(ops, TP_STR(ev->ops))
    )
)
LTTNG_UST_TRACEPOINT_LOGLEVEL(dynscope, graph_compiled, LTTNG_UST_TRACEPOINT_LOGLEVEL_INFO)

LTTNG_UST_TRACEPOINT_EVENT(dynscope, cache_limit,
    LTTNG_UST_TP_ARGS(const EventRecord *, ev),
    LTTNG_UST_TP_FIELDS(
        TP_CODE_FIELDS(ev)
        lttng_ust_field_integer(int32_t, frame_id, ev->frame_id)
        lttng_ust_field_integer(int32_t, resume_offset, ev->resume_offset)
        lttng_ust_field_string(reason, TP_STR(ev->reason))
    )
)
LTTNG_UST_TRACEPOINT_LOGLEVEL(dynscope, cache_limit, LTTNG_UST_TRACEPOINT_LOGLEVEL_INFO)

LTTNG_UST_TRACEPOINT_EVENT(dynscope, frame_skip,
    LTTNG_UST_TP_ARGS(const EventRecord *, ev),
    LTTNG_UST_TP_FIELDS(
        TP_CODE_FIELDS(ev)
        lttng_ust_field_integer(int32_t, resume_offset, ev->resume_offset)
        lttng_ust_field_string(reason, TP_STR(ev->reason))
        lttng_ust_field_string(break_type, TP_STR(ev->break_type))
        lttng_ust_field_string(break_class, TP_STR(ev->break_class))
    )
)
LTTNG_UST_TRACEPOINT_LOGLEVEL(dynscope, frame_skip, LTTNG_UST_TRACEPOINT_LOGLEVEL_INFO)

/* dynscope.reset(): every cache dropped.  No code object. */
LTTNG_UST_TRACEPOINT_EVENT(dynscope, reset,
    LTTNG_UST_TP_ARGS(const EventRecord *, ev),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_integer(uint64_t, wall_ns, ev->wall_ns)
    )
)
LTTNG_UST_TRACEPOINT_LOGLEVEL(dynscope, reset, LTTNG_UST_TRACEPOINT_LOGLEVEL_INFO)

/* dynscope.annotate(): the program's own mark, or a span's begin and end.
   No code object. */
LTTNG_UST_TRACEPOINT_EVENT(dynscope, annotate,
    LTTNG_UST_TP_ARGS(const EventRecord *, ev),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_integer(uint64_t, wall_ns, ev->wall_ns)
        lttng_ust_field_string(name, TP_STR(ev->annotation))
        lttng_ust_field_string(phase, TP_STR(ev->annotation_phase))
        lttng_ust_field_string(fields, TP_STR(ev->annotation_fields))
    )
)
LTTNG_UST_TRACEPOINT_LOGLEVEL(dynscope, annotate, LTTNG_UST_TRACEPOINT_LOGLEVEL_INFO)

#endif /* DYNSCOPE_TP_H */

#include <lttng/tracepoint-event.h>
