/*
 * explain_int.h -- what the files of explain/ share (the public contract is
 * explain.h):
 *   explain.c   Explainer, ExplainBackend, ExplainOutput and its report;
 *   summary.c   the report's summary: breaks and skipped frames grouped by
 *               break type (engine/base/breaks.h) and site.
 */
#ifndef DYNSCOPE_EXPLAIN_INT_H
#define DYNSCOPE_EXPLAIN_INT_H

#include "explain.h"

/* Append one formatted line (PyUnicode_FromFormat) to the list out.  0 / -1. */
int explain_line(PyObject *out, const char *fmt, ...);

/* The groups of a summary at most, rendered; the rest is counted. */
#define SUMMARY_MAX_GROUPS 10

/* dynscope.BreakGroup (strong; made by summary_init). */
extern PyTypeObject *BreakGroupType;

/* items: a list of (break type id, class, reason, StackFrame or None) of
   breaks or skipped frames, and for a break two more: the time measured
   outside graphs after it (ns) and its function's time (ns), None when
   not measured.  Returns a new list of BreakGroup, costliest first when
   costs were measured, then most frequent (ties: first seen first), or
   NULL with an exception. */
PyObject *summary_groups(PyObject *items);

/* Append the summary of groups to out: a title line with the counts per
   class ("Graph breaks: 12 breaks at 3 sites: ...") and up to
   SUMMARY_MAX_GROUPS groups.  noun: "break", "frame".  0 / -1. */
int summary_render(PyObject *out, const char *title, const char *noun, PyObject *groups);

/* The hint for a break of this type (id str) and class at a site in file:
   the registry's, or for library code what to do about code one cannot
   edit.  New str or NULL. */
PyObject *summary_hint(PyObject *type_id, PyObject *cls, PyObject *file);

/* Create BreakGroup; add it and _C.break_hint(kind, reason, filename) to
   module.  0 / -1. */
int summary_init(PyObject *module);

#endif /* DYNSCOPE_EXPLAIN_INT_H */
