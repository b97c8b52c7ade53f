/*
 * explain.h -- the contract of explain/: dynscope.explain(fn)(*args) and
 * dynscope.ExplainBackend (DESIGN.md 4.5).
 *
 * explain runs fn once inside a CaptureSession (engine.h): private code
 * caches, counters and event log, so nothing global is read or changed.
 * ExplainBackend wraps a backend and accumulates the same report over a long
 * run from the events and entries it receives as an event sink.  explain/
 * depends on the engine; the engine never names explain.  Both build an
 * ExplainOutput from (events, entries): graphs, breaks with user stacks,
 * ops per graph, guards, compile times, plans, skipped frames, cache limits.
 */
#ifndef DYNSCOPE_EXPLAIN_H
#define DYNSCOPE_EXPLAIN_H

#include "../engine/engine.h"
#include "../engine/capture/events.h"

/* Create Explainer, ExplainOutput, ExplainBackend and the BreakReason /
   StackFrame / CompileTime record types and add them to `module`; register
   ExplainBackend with the engine as a backend wrapper and as an event sink
   (engine/capture/events.h).  0 / -1. */
int explain_init(PyObject *module);

#endif /* DYNSCOPE_EXPLAIN_H */
