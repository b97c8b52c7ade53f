/*
 * capture_int.h -- what the capture room's files share and nobody else
 * uses: hook.c (the hook, regions, lookup, the chain runner), miss.c
 * (the miss path), cost.c (what calls cost, sampled), profiler_ranges.c
 * (captured calls as torch.profiler ranges) and event_json.c (JSON for
 * events.c).  The room's
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

/* ---- what calls cost, sampled (cost.c) ---- */

#define COST_SAMPLE_PERIOD 64     /* 1 call timed in this many while recording */
extern int cost_users;            /* GIL: recordings that want costs, 0 while
                                     config.cost_sampling is off (cost.c) */
extern unsigned cost_countdown;   /* GIL: calls until the next timed one */
extern uint64_t miss_ticks;       /* GIL: engine_ticks spent compiling in misses, ever */
extern int cost_timing;           /* GIL: timed calls under way (a callee of one is timed too) */
extern uint64_t cost_translations; /* GIL: translations begun, ever (miss.c) */

/* What a span of a timed call must not count as its own: the time spent
   compiling, in graphs (nested calls' too), already charged to a nested
   call's break, or emitting spans -- running totals, read at the span's
   two ends. */
typedef struct CostTotals {
    uint64_t misses, graphs, charged;
} CostTotals;

/* What a timed call found for one entry, added to it when the call ends. */
typedef struct CostCharge {
    CacheEntry *entry;            /* strong */
    uint64_t run_ticks, break_ticks, break_graphs, samples;
} CostCharge;

/* A timed call's state in the chain runner. */
typedef struct CostSample {
    uint64_t start;               /* the call's start */
    CostTotals at_start;
    uint64_t translations;        /* cost_translations then */
    bool keep_compiling;          /* explain's call: keep it even when it compiled */
    CacheEntry *first;            /* strong or NULL: the entry the call began at */
    CacheEntry *pend;             /* strong or NULL: the entry whose break the
                                     time since `mark` goes to */
    uint64_t mark;
    CostTotals at_mark;
    bool graph_times_were_on;     /* an enclosing timed call's, restored at the end */
    CostCharge *charges;          /* owned (PyMem): n of cap */
    int n, cap;
    CacheFrame *limited;          /* borrowed (lives with its code) or NULL: the
                                     frame whose uncaptured rest ends the call */
    uint64_t limited_start;
    uint64_t frame_ticks;         /* making the call's frame, when the frameless
                                     path left it to the frame (cost_frame_made) */
} CostSample;

/* The totals now. */
CostTotals cost_totals(void);

/* What the chain runner saw of one link besides the plan's graph times. */
typedef struct CostLinkTimes {
    uint64_t start;               /* when the link began (lookup, or the miss) */
    CostTotals before;            /* the totals then */
    bool missed;                  /* the link was a miss (compiled, then ran) */
} CostLinkTimes;

/* The calls until the next timed one: drawn from [1, 2P) so that a program
   whose calls come in a fixed pattern (a model's frames, one after the
   other, every step) has each of them timed, not the same one every time.
   P grows from 1 to COST_SAMPLE_PERIOD, by one every 8 timed calls: a
   short program (a demo of 40 steps) is timed too, a long one at 1 in 64
   after its first 16,000 calls or so. */
unsigned cost_next_period(void);

/* Whether to time this call: every call inside explain's session, else 1
   in COST_SAMPLE_PERIOD while a recording wants costs, and every call a
   timed call makes (so that its breaks' spans can leave out what the
   callees' own breaks cost).  The hit path's only cost when not sampling. */
static inline bool cost_sample_due(const ThreadCapture *tc)
{
    if (tc->session != NULL || cost_timing > 0)
        return true;
    if (cost_users == 0 || --cost_countdown != 0)
        return false;
    cost_countdown = cost_next_period();
    return true;
}
/* Whether the next call will be timed (without counting it down): the
   frameless path leaves such a call to the chain runner. */
static inline bool cost_sample_next(void)
{
    return cost_users != 0 && cost_countdown == 1;
}
/* Start timing a call (graph times on); keep_compiling: keep what it
   measures even if it compiles (explain's call), else a call during which
   anything was translated (its first-time work is not what a break costs)
   is dropped. */
void cost_sample_start(CostSample *cs, bool keep_compiling);
/* The timed call's frame was made for it at `at` by the frameless path's
   hand-off: the call starts then, and that time goes to the first entry's
   break if it ends at one (else the call would not have needed the frame). */
void cost_frame_made(CostSample *cs, uint64_t at);
/* Whether this call is timed, its sample started if so (explain's call
   keeps what it compiled; framed_at: when the frameless path left the call
   to the frame, or 0, see cost_frame_made). */
static inline bool cost_sample_begin(CostSample *cs, const ThreadCapture *tc, uint64_t framed_at)
{
    if (!cost_sample_due(tc))
        return false;
    cost_sample_start(cs, tc->session != NULL);
    if (framed_at != 0)
        cost_frame_made(cs, framed_at);
    return true;
}
/* A link of a timed call ran entry e (borrowed; NULL when not known), whose
   plan ended at a break when at_break.  Cannot fail. */
void cost_link(CostSample *cs, CacheEntry *e, const CostLinkTimes *t, bool at_break);
/* The rest of the timed call runs without capture because cf is at its
   cache limit: at the call's end its time goes to cf (limit_ticks). */
void cost_limited_frame(CostSample *cs, CacheFrame *cf);
/* The call ended: charge what is pending, add the charges to the entries
   (unless dropped) and release the sample.  Cannot fail. */
void cost_sample_end(CostSample *cs);

/* ---- captured calls as torch.profiler ranges (profiler_ranges.c) ---- */

extern PyObject *profiler_enter_fn;   /* GIL; non-NULL while a torch profiler runs */
extern PyObject **profiler_slot;      /* GIL: where try_entry puts the range of the
                                         entry it runs, or NULL (hook.c) */
/* The range "dynscope [3/1] f" of entry e, begun: a new reference to pass to
   profiler_range_end, or NULL (not profiling, or the call failed: reported
   once, no exception). */
PyObject *profiler_range_begin(CacheEntry *e);
/* End it (steals handle; NULL: nothing), the program's exception kept. */
void profiler_range_end(PyObject *handle);

/* The JSON json.dumps(tree) writes, for a tree of dict (str keys), list,
   tuple, str, int, float, bool and None (event_json.c): a new str, or NULL
   (no exception) for anything else, which the caller gives to json.dumps. */
PyObject *event_json(PyObject *tree);

#endif /* DYNSCOPE_CAPTURE_INT_H */
