/*
 * events.h -- the engine's event vocabulary (DESIGN.md 4.1), one function
 * per event.  Call sites never know which sinks listen: today the
 * in-memory log that explain, tests and cache inspection read, plus the
 * one-time warnings a user sees; LTTng and SQLite attach here.
 *
 * Every function here fails soft: it never raises, never leaves an
 * exception set, and never blocks on I/O.  Names and fields are documented
 * in docs/events.md.
 */
#ifndef DYNSCOPE_EVENTS_H
#define DYNSCOPE_EVENTS_H

#include "engine.h"

int events_init(PyObject *module);

void events_compile_start(CodeCache *cc, CacheEntry *e);
/* outcome: "ok", "skipped", "error". */
void events_compile_end(CodeCache *cc, CacheEntry *e, const char *outcome);
/* reason: "expr (observed v)" of the newest entry (borrowed, may be NULL);
   failures: list of (entry compile id, kind, expr, observed) (borrowed). */
void events_recompile(CodeCache *cc, CacheEntry *e, PyObject *reason, PyObject *failures);
/* Issued once per frame; also warns the user once (CacheLimitWarning). */
void events_cache_limit(CodeCache *cc, CacheFrame *cf, PyObject *failures);
void events_frame_skip(CodeCache *cc, PyObject *reason);
/* The break that ends entry e's graph (e->plan.brk). */
void events_graph_break(CodeCache *cc, CacheEntry *e);
void events_reset(void);

/* An internal error: report once per `what` to stderr, count it, and clear
   the exception.  Cannot fail. */
void events_internal_error(const char *what);
/* The pending exception as a reason string ("ValueError: msg raised while
   tracing"); clears it.  New str, or NULL if even that failed. */
PyObject *events_exception_reason(void);

#endif /* DYNSCOPE_EVENTS_H */
