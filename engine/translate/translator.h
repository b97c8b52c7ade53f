/*
 * translator.h -- engine/translate/, the translator's contract: bytecode
 * -> guards + plan + graph, by interpreting a code object symbolically over
 * the frame's concrete inputs (DESIGN.md 3.4-3.5).  Its internals:
 * translate.h (values, the tracer) and translate_int.h (the opcode
 * interpreter).
 * May include: ../base/, ../graph/, ../guards/, ../plan/.  Nothing above.
 */
#ifndef DYNSCOPE_TRANSLATOR_H
#define DYNSCOPE_TRANSLATOR_H

#include "../base/base.h"
#include "../plan/plan.h"

struct CacheFrame;
struct CacheEntry;

/* ------------------------------------------------------------------ */
/* Translator (translate.c).                                           */

typedef enum TranslateStatus {
    TRANSLATE_OK = 0,          /* entry filled in */
    TRANSLATE_UNSUPPORTED = 1, /* *reason set; run the frame eagerly */
    TRANSLATE_ERROR = -1,      /* exception set */
} TranslateStatus;

/*
 * Translate the frame `fv` (function start when cf->resume_offset == 0, else
 * a resume frame whose locals and stack are in fv, keyed by cf's masks)
 * into `entry`'s guards and plan.  `backend` is called once if a graph
 * results.  On TRANSLATE_UNSUPPORTED (function starts only: a resume frame
 * always gets a plan, if need be one that deopts at once), *reason is a new
 * str and *permanent says whether no input could ever succeed.
 */
TranslateStatus translate_frame(const FrameView *fv, PyObject *func,
                                struct CacheFrame *cf, PyObject *backend,
                                struct CacheEntry *entry, PyObject **reason,
                                bool *permanent);

/* A plan that deopts at once at cf's resume offset: what a resume frame
   runs when it cannot be translated or is at its cache limit.  0 / -1. */
int translate_deopt_plan(const FrameView *fv, const struct CacheFrame *cf, struct CacheEntry *entry);


#endif /* DYNSCOPE_TRANSLATOR_H */
