/*
 * capture_int.h -- what the capture room's files share and nobody else
 * uses: hook.c (the hook, regions, lookup, the chain runner), miss.c
 * (the miss path) and event_json.c (JSON for events.c).  The room's
 * contract is capture.h.
 */
#ifndef DYNSCOPE_CAPTURE_INT_H
#define DYNSCOPE_CAPTURE_INT_H

#include "events.h"

typedef enum { MISS_RAN, MISS_EAGER, MISS_ERROR, MISS_COMPILE } MissOutcome;

/*
 * Handle a miss on cf (miss.c): translate a new entry and run it, or decide
 * the frame runs eagerly.  MISS_RAN sets *result; MISS_EAGER means
 * "evaluate the original frame"; MISS_ERROR propagates an exception the
 * program must see (KeyboardInterrupt and the like).
 */
MissOutcome miss_handle(CodeCache *cc, CacheFrame *cf, const FrameView *fv,
                        PyObject *func, ThreadCapture *tc, PlanOutcome *result);

/* Mark code cc as run eagerly for good (hook.c), for reason (stolen); with
   report, a frame_skip event.  Cannot fail. */
void hook_mark_skipped(CodeCache *cc, PyObject *reason_steal, bool report);

/* Check a new entry's guards and run its plan, without counting a hit
   (hook.c's try_entry): 1 with *out filled, 2 when the guards pass on an
   entry kept without capture, 0 when they fail, -1 on an internal error. */
int hook_try_new_entry(CacheEntry *e, const FrameView *fv, ThreadCapture *tc,
                       PlanOutcome *out);

/* The JSON json.dumps(tree) writes, for a tree of dict (str keys), list,
   tuple, str, int, float, bool and None (event_json.c): a new str, or NULL
   (no exception) for anything else, which the caller gives to json.dumps. */
PyObject *event_json(PyObject *tree);

#endif /* DYNSCOPE_CAPTURE_INT_H */
