/*
 * cost.c -- what a call costs, sampled (issue "which break costs the most"):
 * while recording, the chain runner (hook.c) times 1 call in
 * COST_SAMPLE_PERIOD, and every call a timed call makes; inside explain's
 * call, every call.  For a timed call it notes each link's graph start and
 * end (plan_graph_times, set by plan_run) and charges:
 *   - to the entry a call began at, the whole call (cost_run_ticks);
 *   - to an entry whose plan ended at a break, the time from its graph's
 *     end to the next graph's start, or to the call's end: the eager step,
 *     the resume frame's lookup, guards and rebuilds, or the rest of the
 *     frame run by the interpreter (cost_break_ticks), and whether a graph
 *     ran after it (cost_break_graphs);
 *   - to the entry a call began at, if its plan ends at a break, the
 *     making of the frame the call needed for it: from the frameless
 *     path's hand-off to the chain runner (cost_frame_made; a function
 *     without the break is answered without a frame, capture_call_direct);
 *   - to a frame at its cache limit, the rest of the call it then runs
 *     without capture (CacheFrame.limit_ticks, callees included).
 * A break's span is exclusive: what it spent compiling (miss_ticks: every
 * miss's compile, up to the new entry's graph), in graphs (a callee's
 * captured frames run theirs inside the eager step) and in the spans
 * already charged to a callee's breaks is taken out, and so is the
 * timing's own work (cost_link's bookkeeping, the spans it emits: about
 * 70 ns a link, a fifth of the demo's break).  So a print in a function
 * three frames deep costs once in all, not once per frame.
 * While recording, a call during which anything was translated is
 * dropped: its eager steps did first-time work (imports, caches) that,
 * scaled by hits, would swamp the steady state; so charges wait in the
 * sample until the call ends.  The counters live on the entries
 * (../cache/cache.h); the recorder scales them by hits (record.c).  The
 * graph runs and eager steps of timed calls also go to the timeline as
 * spans (events_run_span; a few hundred a second at most).  Not sampling,
 * the hit path pays one load and a branch (cost_sample_due).
 */
#include "capture_int.h"

#include <string.h>

int cost_users;
static int recordings;            /* GIL: recordings that want costs */
unsigned cost_countdown = 1;
uint64_t miss_ticks;
int cost_timing;
uint64_t cost_translations;
static uint64_t charged_ticks;    /* GIL: ticks charged to breaks, ever */
static uint64_t own_ticks;        /* GIL: ticks spent emitting spans, ever: not the program's */

/* cost_users: what the hot path reads, one load: the recordings that want
   costs, or 0 while config.cost_sampling is off. */
static void cost_users_update(void)
{
    cost_users = engine.config.cost_sampling ? recordings : 0;
}

void capture_cost_sampling(bool on)
{
    recordings += on ? 1 : -1;
    if (recordings < 0)
        recordings = 0;
    cost_users_update();
}

void capture_set_cost_sampling(bool allowed)
{
    engine.config.cost_sampling = allowed;
    cost_users_update();
}

unsigned cost_next_period(void)
{
    static uint32_t state = 2463534242u;          /* xorshift32: fast, and enough here */
    static uint32_t drawn;                        /* timed calls so far, up to the ramp's end */
    uint32_t period = 1 + drawn / 8;
    if (period >= COST_SAMPLE_PERIOD)
        period = COST_SAMPLE_PERIOD;
    else
        drawn++;
    state ^= state << 13;
    state ^= state >> 17;
    state ^= state << 5;
    return 1 + state % (2 * period - 1);
}

CostTotals cost_totals(void)
{
    return (CostTotals){miss_ticks, plan_graph_times.total, charged_ticks + own_ticks};
}

void cost_sample_start(CostSample *cs, bool keep_compiling)
{
    memset(cs, 0, sizeof(*cs));
    cs->start = engine_ticks();
    cs->at_start = cost_totals();
    cs->translations = cost_translations;
    cs->keep_compiling = keep_compiling;
    cs->graph_times_were_on = plan_graph_times.on;
    cost_timing++;
    plan_graph_times.on = true;
    plan_graph_times.start = plan_graph_times.end = 0;
}

/* The charge of e in this sample, added if new; NULL when out of memory
   (the measure is then lost, nothing else).  Borrowed. */
static CostCharge *charge_of(CostSample *cs, CacheEntry *e)
{
    for (int i = cs->n - 1; i >= 0; i--)
        if (cs->charges[i].entry == e)
            return &cs->charges[i];
    if (cs->n == cs->cap) {
        int cap = cs->cap ? 2 * cs->cap : 8;
        CostCharge *more = PyMem_Realloc(cs->charges, sizeof(CostCharge) * (size_t)cap);
        if (more == NULL)
            return NULL;
        cs->charges = more;
        cs->cap = cap;
    }
    CostCharge *c = &cs->charges[cs->n++];
    memset(c, 0, sizeof(*c));
    c->entry = (CacheEntry *)Py_NewRef(e);
    return c;
}

/* Whether a timed span may go to the timeline (events_run_span: the
   recording's run_spans, the Chrome-trace export): at most SPANS_PER_SECOND,
   so that a program of many small calls does not fill the queue with them;
   the costs above take every timed call. */
#define SPANS_PER_SECOND 400
static bool span_allowed(void)
{
    static uint64_t window;               /* GIL: the current second */
    static unsigned spans;
    uint64_t second = engine_now_ns() / 1000000000u;
    if (second != window) {
        window = second;
        spans = 0;
    }
    return spans++ < SPANS_PER_SECOND;
}

/* events_run_span, its own time left out of every span that holds it. */
static void emit_span(CacheEntry *e, const char *kind, uint64_t start, uint64_t end)
{
    uint64_t t0 = engine_ticks();
    if (span_allowed())
        events_run_span(e, kind, start, end);
    own_ticks += engine_ticks() - t0;
}

/* The span from the pending break's mark to `until`, less what the totals
   say it spent elsewhere, goes to that break.  Cannot fail. */
static void charge_break(CostSample *cs, uint64_t until, CostTotals at)
{
    if (cs->pend == NULL)
        return;
    if (until > cs->mark)
        emit_span(cs->pend, "eager", cs->mark, until);
    uint64_t spent = until - cs->mark;
    uint64_t elsewhere = (at.misses - cs->at_mark.misses) + (at.graphs - cs->at_mark.graphs)
                         + (at.charged - cs->at_mark.charged);
    uint64_t own = spent > elsewhere ? spent - elsewhere : 0;
    CostCharge *c = charge_of(cs, cs->pend);
    if (c != NULL)
        c->break_ticks += own;
    charged_ticks += own;
    Py_CLEAR(cs->pend);
}

void cost_frame_made(CostSample *cs, uint64_t at)
{
    if (at < cs->start) {
        cs->frame_ticks = cs->start - at;
        cs->start = at;
    }
}

void cost_link(CostSample *cs, CacheEntry *e, const CostLinkTimes *t, bool at_break)
{
    /* from here to the end, the timing's own work (this bookkeeping and
       the spans it emits): no span it falls in is charged for it */
    uint64_t entered = engine_ticks();
    uint64_t own_before = own_ticks;
    uint64_t graph_start = plan_graph_times.start, graph_end = plan_graph_times.end;
    plan_graph_times.start = plan_graph_times.end = 0;
    if (cs->pend != NULL && graph_start != 0) {
        CostCharge *c = charge_of(cs, cs->pend);
        if (c != NULL)
            c->break_graphs++;
    }
    /* the link's lookup, inputs and (with no graph) rebuilds are the
       pending break's too: up to its graph's start, or on a miss up to the
       compile's start.  Nothing in between runs a graph, compiles or
       charges, so the totals are those at the link's start. */
    uint64_t until = t->missed ? t->start : graph_start != 0 ? graph_start : entered;
    charge_break(cs, until, t->before);
    if (e != NULL) {
        if (graph_start != 0 && graph_end > graph_start)
            emit_span(e, "graph", graph_start, graph_end);
        CostCharge *c = charge_of(cs, e);
        if (c != NULL)
            c->samples++;
        if (cs->first == NULL) {
            cs->first = (CacheEntry *)Py_NewRef(e);
            if (at_break && c != NULL) {
                c->break_ticks += cs->frame_ticks;   /* the frame was made for this break */
                charged_ticks += cs->frame_ticks;
            }
        }
        if (at_break) {
            cs->pend = (CacheEntry *)Py_NewRef(e);
            cs->mark = graph_end != 0 ? graph_end : entered;
        }
    }
    uint64_t here = engine_ticks() - entered;
    own_ticks = own_before + here;        /* (the spans emitted are inside it) */
    if (e != NULL && at_break) {
        cs->at_mark = cost_totals();
        cs->at_mark.charged -= here;      /* as at `entered`: the next span leaves it out */
    }
}

void cost_limited_frame(CostSample *cs, CacheFrame *cf)
{
    cs->limited = cf;
    cs->limited_start = engine_ticks();
}

void cost_sample_end(CostSample *cs)
{
    uint64_t now = engine_ticks();
    CostTotals at = cost_totals();
    charge_break(cs, now, at);
    if (cs->first != NULL) {
        uint64_t spent = now - cs->start, compiling = at.misses - cs->at_start.misses;
        CostCharge *c = charge_of(cs, cs->first);
        if (c != NULL)
            c->run_ticks += spent > compiling ? spent - compiling : 0;
        Py_CLEAR(cs->first);
    }
    bool keep = cs->keep_compiling || cost_translations == cs->translations;
    if (cs->limited != NULL && keep) {
        /* the rest of the frame, callees included: what its limit costs */
        cs->limited->limit_samples++;
        cs->limited->limit_ticks += now - cs->limited_start;
    }
    for (int i = 0; i < cs->n; i++) {
        CostCharge *c = &cs->charges[i];
        if (keep) {
            c->entry->cost_samples += c->samples;
            c->entry->cost_run_ticks += c->run_ticks;
            c->entry->cost_break_ticks += c->break_ticks;
            c->entry->cost_break_graphs += c->break_graphs;
        }
        Py_DECREF(c->entry);
    }
    PyMem_Free(cs->charges);
    cs->charges = NULL;
    cs->n = cs->cap = 0;
    plan_graph_times.on = cs->graph_times_were_on;
    cost_timing--;
}
