/*
 * explain.h -- the contract of explain/: dynscope.explain(fn)(*args) and
 * dynscope.ExplainBackend (DESIGN.md 4.5).
 *
 * explain runs fn once inside a CaptureSession (engine.h): private code
 * caches, counters and event log, so nothing global is read or changed.
 * ExplainBackend wraps a backend and accumulates the same report over a long
 * run from the events and entries the engine hands it.  Both build an
 * ExplainOutput from (events, entries): graphs, breaks with user stacks,
 * ops per graph, guards, compile times, plans, skipped frames, cache limits.
 */
#ifndef DYNSCOPE_EXPLAIN_H
#define DYNSCOPE_EXPLAIN_H

#include "../engine/engine.h"

/* Create Explainer, ExplainOutput, ExplainBackend and the BreakReason /
   StackFrame / CompileTime record types; add them to `module`.  0 / -1. */
int explain_types_init(PyObject *module);

/* Whether `backend` is an ExplainBackend (borrowed check, cannot fail). */
bool explain_is_backend(PyObject *backend);
/* Hand an ExplainBackend an event dict (borrowed) / a new entry of code cc.
   Fail soft: errors are cleared. */
void explain_backend_note_event(PyObject *backend, PyObject *event);
void explain_backend_note_entry(PyObject *backend, CacheEntry *entry);

#endif /* DYNSCOPE_EXPLAIN_H */
