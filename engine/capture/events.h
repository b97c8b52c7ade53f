/*
 * events.h -- how the engine reports what it does (DESIGN.md 4.1): one
 * function per event for the call sites, and one interface for the sinks
 * that listen, in the spirit of SQLite's sqlite3_trace_v2(mask, callback,
 * ctx).  The engine never names its sinks: the in-memory log (event_log.c),
 * DYNSCOPE_LOGS lines, the SQLite recorder (record.c), LTTng (event_log.c)
 * and explain (explain/) each register a sink with the kinds they want.
 *
 * An event is built once, into one Event: the plain C record of
 * event/event.h with its cheap fields filled, plus the engine objects it is
 * about.  Its costly parts are made on the first ask and shared by every
 * sink of that event: the text fields of the record (event_record()) and
 * the Python dict the in-memory log and explain keep (event_dict()).
 *
 * Every function here fails soft: it never raises, never leaves an
 * exception set, and never blocks on I/O.  All under the GIL.  Names and
 * fields are documented in docs/events.md.
 */
#ifndef DYNSCOPE_EVENTS_H
#define DYNSCOPE_EVENTS_H

#include "capture.h"
#include "../../event/event.h"

/* ---- the call sites' side ---- */

void events_compile_start(CodeCache *cc, CacheEntry *e);
/* How users read the name of a function a decorator made:
   "decorator(wrapper) \u2192 what it wraps" (functools.wraps' __wrapped__),
   e.g. "can_return_tuple(wrapper) \u2192 LlamaModel.forward".  func borrowed,
   may be NULL.  New str, or NULL (no exception) for any other function. */
PyObject *events_wrapper_name(PyObject *func, PyCodeObject *co);
/* outcome: "ok", "skipped", "error". */
void events_compile_end(CodeCache *cc, CacheEntry *e, const char *outcome);
/* An EV_GRAPH_COMPILED for gm (borrowed; NULL: nothing), the graph e's
   backend raised on (the compile skipped, DS0033): its graph_code ends with its inputs as
   comments (docs/sql.md graphs.code), so a repro can rebuild them. */
void events_failed_graph(CodeCache *cc, CacheEntry *e, PyObject *gm);
/* The program's mark (dynscope.annotate): name, phase ("mark", "begin",
   "end") and fields (a JSON object), UTF-8, borrowed for the call. */
void events_annotate(const char *name, const char *phase, const char *fields);
/* A span of a timed call (cost.c): entry e's graph ("graph") or the time
   outside graphs after its break ("eager"), between two engine_ticks().
   Only to sinks that take EV_RUN_SPAN (the recorder).  Cannot fail. */
void events_run_span(CacheEntry *e, const char *kind, uint64_t start_ticks, uint64_t end_ticks);
/* cf: the frame recompiled (its entries give the dict's "frame_hits");
   reason: "expr (observed v)" of the newest entry (borrowed, may be NULL);
   failures: list of GuardFailureInfo (entry compile id, kind, expr,
   observed, and by name filename, lineno) (borrowed); nearest: the nearest-entry diff, a dict as
   docs/events.md's recompile "nearest" (borrowed, may be NULL). */
void events_recompile(CodeCache *cc, CacheFrame *cf, CacheEntry *e, PyObject *reason,
                      PyObject *failures, PyObject *nearest);
/* Issued once per frame.  Events have no side effects but their sinks':
   the caller counts the limit and warns the user (warn_cache_limit). */
void events_cache_limit(CodeCache *cc, CacheFrame *cf, PyObject *failures);
void events_frame_skip(CodeCache *cc, PyObject *reason);
/* The break that ends entry e's graph (e->plan.brk); the caller counts it. */
void events_graph_break(CodeCache *cc, CacheEntry *e);
void events_reset(void);

/* ---- the sinks' side ---- */

/* One event as the sinks receive it.  Valid for the duration of the emit
   call only; a sink copies (or takes a reference to) what it keeps. */
typedef struct Event {
    EventRecord rec;          /* cheap fields filled; see event_record() */
    unsigned filled;          /* EVF_* text fields already in rec */
    CodeCache *cc;            /* borrowed; NULL for EV_RESET */
    CacheEntry *entry;        /* borrowed or NULL: the entry concerned */
    CacheFrame *frame;        /* borrowed or NULL (EV_CACHE_LIMIT, EV_RECOMPILE) */
    PyObject *reason;         /* borrowed or NULL (recompile, skip, limit) */
    PyObject *failures;       /* borrowed list or NULL (recompile, limit) */
    PyObject *nearest;        /* borrowed dict or NULL (recompile) */
    PyObject *backend;        /* borrowed: the backend of the capture region */
    PyObject *gm;             /* borrowed or NULL: EV_GRAPH_COMPILED's graph */
    bool failed_graph;        /* gm is one the backend raised on */
    bool private_capture;     /* raised inside a CaptureSession (explain) */
    PyObject *dict;           /* strong or NULL: made by event_dict() */
    PyObject *texts;          /* strong or NULL: list keeping rec's text alive */
    char compile_id[32];      /* rec.compile_id's storage */
} Event;

/* The record with the text fields in `fields` (EVF_*) filled in as well.
   A field that cannot be made is "" (the error is cleared).  Borrowed:
   lives as long as the event. */
const EventRecord *event_record(Event *ev, unsigned fields);

/* The event as the dict the in-memory log keeps ({"event": name, ...},
   docs/events.md), or NULL for kinds the log does not keep (guard_fail,
   graph_compiled, entry_stats) and when it cannot be made (error cleared).
   Borrowed: lives as long as the event. */
PyObject *event_dict(Event *ev);

/* Whether compile_end dicts outside sessions carry "guard_exprs" (the
   rendered guards; DYNSCOPE_LOGS=+guards).  Cannot fail. */
void events_dict_with_guards(bool on);


/* Kinds the in-memory log, DYNSCOPE_LOGS and explain see as dicts. */
#define EV_MASK_DICT (EV_MASK(EV_COMPILE_START) | EV_MASK(EV_COMPILE_END)      \
                      | EV_MASK(EV_RECOMPILE) | EV_MASK(EV_CACHE_LIMIT)        \
                      | EV_MASK(EV_FRAME_SKIP) | EV_MASK(EV_GRAPH_BREAK)       \
                      | EV_MASK(EV_RESET))

typedef struct EventSink {
    const char *name;         /* for error reports: "sqlite", "lttng", ... */
    unsigned mask;            /* EV_MASK() of the kinds it wants */
    bool sees_private;        /* also the events of a CaptureSession (explain
                                 sessions keep theirs to themselves otherwise) */
    /* Optional: whether it wants `kind` now (a sink that is off most of the
       time: no store open, no LTTng session).  Cheap, cannot fail. */
    bool (*wants)(void *ctx, EventKind kind);
    /* Receive one event.  Must not raise (clear what it meets). */
    void (*emit)(void *ctx, Event *ev);
    void *ctx;
} EventSink;

/* Add a sink of the process (borrowed: it must stay valid until removed).
   Sinks are called in the order they were added.  0, or -1 when the table
   is full (EVENTS_MAX_SINKS; a programming error, reported once). */
#define EVENTS_MAX_SINKS 8
int events_add_sink(EventSink *sink);
/* Remove it; a sink not added is ignored.  Cannot fail. */
void events_remove_sink(EventSink *sink);

/* _C._event_json, the recorder's JSON writer for tests (event_json.c). */
int event_json_init(PyObject *module);

/* ---- one-time warnings and internal errors (warn.c) ---- */

int warn_init(PyObject *module);
/* An internal error: report once per `what` to stderr, count it, and clear
   the exception.  Cannot fail. */
void warn_internal_error(const char *what);
/* How many internal errors were met (reported or not). */
unsigned long long warn_internal_error_count(void);
/* The pending exception as a reason string ("ValueError: msg raised while
   tracing"); clears it.  New str, or NULL if even that failed. */
PyObject *warn_exception_reason(void);
/* The user's one CacheLimitWarning for code cc, unless warned already or
   turned off (config); a filter that makes it an error is reported and
   cleared.  Cannot fail. */
void warn_cache_limit(CodeCache *cc, CacheFrame *cf);

#endif /* DYNSCOPE_EVENTS_H */
