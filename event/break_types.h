/*
 * break_types.h -- the registry of break types, at the bottom of the layers
 * (no Python): every reason the engine gives for ending a graph (a graph
 * break) or running a frame without capture (a frame skip) is one type of
 * this table, with an id ("DS0001"), a short name, an explanation, a hint
 * and a class that says who can act on it:
 *
 *   your code     the user can change it (a print, .item(), an import
 *                 inside the function);
 *   library code  the site is in an installed package or the standard
 *                 library: the user cannot edit it (a type of class "your
 *                 code" or "fundamental" becomes this at such a site:
 *                 engine/base/breaks.h break_class_at);
 *   engine limit  dynscope does not model it yet: not the user's fault,
 *                 and counted as the engine's debt;
 *   fundamental   no capture engine can: a branch on data.
 *
 * The engine stamps the id and class on every graph break and frame skip
 * (events, SQL, LTTng, explain); dyntop reads names and hints from here.
 * Invariants (tests/test_breaks_registry.py walks them):
 *   - ids are unique, in order, and never reused for another meaning;
 *   - every reason text the engine's sources can produce (the formats of
 *     tracer_unsupported/tracer_break, the frame-skip reasons) maps to a
 *     type other than the catch-all DS0099;
 *   - docs/breaks.md is generated from this table (python -m dynscope
 *     breaks --markdown) and equals it.
 * Classification reads the reason's text, never the program's objects, and
 * cannot fail.
 */
#ifndef DYNSCOPE_BREAK_TYPES_H
#define DYNSCOPE_BREAK_TYPES_H

#include <stddef.h>

typedef enum BreakClass {
    BREAK_YOUR_CODE,
    BREAK_LIBRARY,
    BREAK_ENGINE_LIMIT,
    BREAK_FUNDAMENTAL,
    BREAK_CLASS__COUNT
} BreakClass;

typedef struct BreakType {
    const char *id;           /* "DS0001" */
    const char *name;         /* short, kebab-case: "print" */
    BreakClass cls;           /* the class at a site in the user's own code */
    const char *explanation;  /* what happened, in a sentence or two */
    const char *hint;         /* what to do about it */
    const char *example;      /* a minimal program that shows it (docs) */
} BreakType;

/* The type of a graph break (kind "call", "data_dependent_branch",
   "data_escape", "unsupported") or frame skip (kind NULL) with this
   reason.  Never NULL: the catch-all when nothing matches.  Cannot fail. */
const BreakType *break_type_of(const char *kind, const char *reason);

/* The type with this id ("DS0001"), or NULL.  Cannot fail. */
const BreakType *break_type_by_id(const char *id);

/* "your code", "library code", "engine limit", "fundamental". */
const char *break_class_name(BreakClass cls);

/* The i-th type of the table (docs, tests), NULL past the end. */
const BreakType *break_type_at(size_t i);

#endif /* DYNSCOPE_BREAK_TYPES_H */
