/*
 * hook.c -- the PEP 523 frame hook and per-thread capture state.
 *
 * The hook is installed only while at least one thread is inside an
 * optimize() region: a custom eval-frame function disables CPython's inlined
 * Python-to-Python calls for the whole process, so code outside capture
 * regions must not pay for it.  For a frame it may capture, the hook looks
 * the code up in its cache (../cache/), runs the plan of the first entry
 * whose guards pass, and otherwise hands the frame to the miss path
 * (miss.c), which has the translator make a new entry.  Anything the engine cannot do runs the frame in the default
 * evaluator: capture never changes what the program computes.
 *
 * Invariants:
 *   - hook_state.capturing_threads counts threads with depth > 0 (GIL protected); the
 *     hook is installed exactly when it is > 0.
 *   - in_engine > 0 while the engine runs Python on its own account
 *     (translation, backends, compiled graphs); frames then pass through.
 *   - A frame passed to the default evaluator is untouched; a frame we
 *     answer from a plan is cleared once, by frame_clear_unevaluated() (a
 *     no-op on 3.11, whose caller clears it).
 */
#include "../base/pycompat.h"
#include "capture_int.h"
#include "../base/tensorlib.h"
#include "../../trace/trace.h"

#include <limits.h>
#include <string.h>

/* The engine's process-wide state (capture.h): the capture room owns it;
   the layers above set its config through the capture layer. */
EngineState engine = {
    .config = {.cache_size_limit = 8, .accumulated_cache_size_limit = 256,
               .cache_limit_warning = true,
               .skip_tensorless_frames = true,
               .force_parameter_static_shapes = true,
               .cost_sampling = true},
};

static _Thread_local ThreadCapture thread_capture;

/* The hook's own flags (GIL protected). */
static struct {
    int capturing_threads;        /* threads inside an optimize() region; the
                                     hook is installed exactly when > 0 */
    bool installed;
} hook_state;

/* cache_reset_all's callback: what this room keeps about the entries. */
static void reset_counters_and_sinks(void)
{
    memset(&engine.counters, 0, sizeof(engine.counters));
    events_reset();
}

void capture_reset_all(void)
{
    cache_reset_all(reset_counters_and_sinks);
}
static EvalFrameFunc saved_eval_frame; /* GIL: what was installed before us (a CPython
                                       type, so kept here, not in EngineState) */

static PyObject *eval_frame(PyThreadState *ts, EvalFrame *f, int throwflag);

ThreadCapture *capture_state(void) { return &thread_capture; }
bool hook_installed(void) { return hook_state.installed; }

static void hook_install(void)
{
    PyInterpreterState *interp = PyInterpreterState_Get();
    saved_eval_frame = _PyInterpreterState_GetEvalFrameFunc(interp);
    _PyInterpreterState_SetEvalFrameFunc(interp, eval_frame);
    hook_state.installed = true;
}

static void hook_uninstall(void)
{
    PyInterpreterState *interp = PyInterpreterState_Get();
    if (_PyInterpreterState_GetEvalFrameFunc(interp) == eval_frame)
        _PyInterpreterState_SetEvalFrameFunc(interp, saved_eval_frame);
    hook_state.installed = false;
}

PyObject *capture_root_code(PyObject *fn)
{
    if (PyMethod_Check(fn))
        fn = PyMethod_GET_FUNCTION(fn);
    return PyFunction_Check(fn) ? PyFunction_GET_CODE(fn) : NULL;
}

int capture_enter(const CaptureConfig *cfg)
{
    ThreadCapture *tc = &thread_capture;
    if (tc->depth >= CAPTURE_MAX_DEPTH) {
        PyErr_Format(PyExc_RecursionError,
                     "dynscope: optimize() regions nested deeper than %d", CAPTURE_MAX_DEPTH);
        return -1;
    }
    tc->saved[tc->depth] = tc->config;
    tc->config = *cfg;
    if (tc->depth++ == 0 && hook_state.capturing_threads++ == 0)
        hook_install();
    return 0;
}

void capture_exit(void)
{
    ThreadCapture *tc = &thread_capture;
    ENGINE_ASSERT(tc->depth > 0);
    tc->config = tc->saved[--tc->depth];
    if (tc->depth == 0 && --hook_state.capturing_threads == 0)
        hook_uninstall();
}

/* ---- skip rules ---- */

/* The length of the longest prefix of `tuple` that `filename` starts with,
   or -1 when none does. */
static Py_ssize_t longest_prefix(PyObject *filename, PyObject *tuple)
{
    Py_ssize_t best = -1;
    if (tuple == NULL)
        return best;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(tuple); i++) {
        PyObject *p = PyTuple_GET_ITEM(tuple, i);
        Py_ssize_t r = PyUnicode_Tailmatch(filename, p, 0, PY_SSIZE_T_MAX, -1);
        if (r < 0)
            PyErr_Clear();
        else if (r == 1 && PyUnicode_GET_LENGTH(p) > best)
            best = PyUnicode_GET_LENGTH(p);
    }
    return best;
}

/* The skip prefix `co`'s file falls under (borrowed), or NULL: the longest
   matching entry of config.skip_prefixes, unless a longer entry of
   config.capture_prefixes matches (site-packages inside the standard
   library's directory is users' code; numpy inside site-packages is not). */
static PyObject *code_skip_prefix(PyCodeObject *co)
{
    PyObject *skips = engine.config.skip_prefixes;
    if (skips == NULL || !PyUnicode_Check(co->co_filename))
        return NULL;
    Py_ssize_t skip = longest_prefix(co->co_filename, skips);
    if (skip < 0 || longest_prefix(co->co_filename, engine.config.capture_prefixes) > skip)
        return NULL;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(skips); i++) {
        PyObject *p = PyTuple_GET_ITEM(skips, i);
        if (PyUnicode_GET_LENGTH(p) == skip
            && PyUnicode_Tailmatch(co->co_filename, p, 0, PY_SSIZE_T_MAX, -1) == 1)
            return p;
    }
    PyErr_Clear();
    return NULL;
}

/* Set cc's skip reason (once) and report it.  Cannot fail. */
void hook_mark_skipped(CodeCache *cc, PyObject *reason_steal, bool report)
{
    Py_XSETREF(cc->skip_reason, reason_steal);
    cc->skip_reported = report;
    if (report) {
        capture_counters(capture_state())->skips++;
        events_frame_skip(cc, cc->skip_reason);
    }
}

/* Whether the code can never be captured, independent of its inputs. */
static const char *static_skip_reason(PyCodeObject *co)
{
    if (co->co_flags & (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR))
        return "generator or coroutine";
    if (!(co->co_flags & CO_OPTIMIZED) || !(co->co_flags & CO_NEWLOCALS))
        return "module or class body";
    return NULL;
}

/* The cache of co, set up on first sight.  Borrowed; NULL means "pass
   through" (an internal error was logged and cleared). */
static void detached_capsule_free(PyObject *capsule)
{
    cache_free_detached(PyCapsule_GetPointer(capsule, "dynscope.CodeCache"));
}

/* The session's private cache of co, created if absent.  Borrowed or NULL
   with an exception. */
static CodeCache *session_cache(CaptureSession *s, PyCodeObject *co)
{
    PyObject *cap = PyDict_GetItemWithError(s->caches, (PyObject *)co);
    if (cap != NULL)
        return PyCapsule_GetPointer(cap, "dynscope.CodeCache");
    if (PyErr_Occurred())
        return NULL;
    CodeCache *cc = cache_new_detached(co);
    if (cc == NULL)
        return NULL;
    cap = PyCapsule_New(cc, "dynscope.CodeCache", detached_capsule_free);
    if (cap == NULL) {
        cache_free_detached(cc);
        return NULL;
    }
    int rc = PyDict_SetItem(s->caches, (PyObject *)co, cap);
    Py_DECREF(cap);   /* the dict owns it (and so the cache) */
    return rc < 0 ? NULL : cc;
}

static CodeCache *lookup_code_cache(PyCodeObject *co, ThreadCapture *tc)
{
    CaptureSession *session = tc->session;
    CodeCache *cc = session ? session_cache(session, co) : cache_peek(co);
    if (cc != NULL && cc->classified_at == hatch_generation)
        return cc;
    if (cc == NULL && session == NULL)
        cc = cache_for_code(co);
    if (cc == NULL) {
        warn_internal_error("creating the code cache");
        return NULL;
    }
    cc->classified_at = hatch_generation;
    bool callees;
    PyObject *hatch = hatch_code_rule(co, &callees);      /* borrowed */
    const char *why = static_skip_reason(co);
    if (hatch != NULL) {
        PyObject *reason = PyUnicode_FromFormat("marked %U", hatch);
        /* reported once; a wrapper that runs its callees uncaptured is not
           the user's frame (its calls are breaks that name the mark) */
        if (reason != NULL && (cc->skip_reason == NULL || PyUnicode_Compare(cc->skip_reason, reason) != 0))
            hook_mark_skipped(cc, Py_NewRef(reason), !callees);
        Py_XDECREF(reason);
        cc->skip_callees = callees;
    }
    else if (why != NULL)
        hook_mark_skipped(cc, PyUnicode_FromString(why), false);
    else {
        PyObject *prefix = code_skip_prefix(co);   /* borrowed */
        if (prefix != NULL)
            hook_mark_skipped(cc, PyUnicode_FromFormat("file is in config.skip_prefixes (%U)", prefix),
                         false);
    }
    if (PyErr_Occurred())
        warn_internal_error("classifying a code object");
    return cc;
}

/* ---- lookup ---- */

#define SMALL_VALS 32


/*
 * Check entry e's guards against fv and, when they pass, run its plan.
 * Returns 1 with *out filled (which may be OUTCOME_ERROR: an exception of
 * the program's), 2 when the guards pass on an entry whose translation
 * stopped (eager_reason: the frame runs without capture; *out untouched),
 * 0 when the guards fail, -1 on an internal error (exception set).  Never fills failure details: the miss path asks for
 * them apart.
 */
static int try_entry(CacheEntry *e, const FrameView *fv, ThreadCapture *tc,
                     bool count_hit, PlanOutcome *out, uint64_t *guard_ticks)
{
    PyObject *small[SMALL_VALS];
    PyObject **vals = small;
    int nacc = e->guards.nacc;
    if (nacc > SMALL_VALS) {
        vals = PyMem_Calloc((size_t)nacc, sizeof(PyObject *));
        if (vals == NULL) {
            PyErr_NoMemory();
            return -1;
        }
    }
    else {
        memset(small, 0, sizeof(PyObject *) * (size_t)nacc);
    }
    /* Guards may read attributes of user objects: never capture that. */
    tc->in_engine++;
    uint64_t t0 = engine_ticks();
    int ok = guardset_check(&e->guards, fv, vals, tc->config.backend, NULL);
    uint64_t t1 = engine_ticks();
    tc->in_engine--;
    e->guard_ticks += t1 - t0;
    if (guard_ticks != NULL)
        *guard_ticks += t1 - t0;
    if (ok == 1) {
        e->hits += count_hit;
        if (e->eager_reason != NULL)
            ok = 2;                 /* the frame runs without capture */
        else {                      /* the graph runs inside the engine; an eager step is user code */
            if (profiler_slot != NULL && *profiler_slot == NULL)
                *profiler_slot = profiler_range_begin(e);   /* a torch profiler runs */
            plan_run(&e->plan, &e->guards, fv, vals, &tc->in_engine, out);
        }
    }
    guardset_release_values(&e->guards, vals);
    if (vals != small)
        PyMem_Free(vals);
    return ok;
}

/* Move entry i of `entries` to the front (most recently hit first, as in
   Dynamo).  Cannot fail. */
static void move_to_front(PyObject *entries, Py_ssize_t i)
{
    if (i <= 0 || i >= PyList_GET_SIZE(entries))
        return;
    PyObject **items = ((PyListObject *)entries)->ob_item;
    PyObject *e = items[i];
    memmove(&items[1], &items[0], sizeof(PyObject *) * (size_t)i);
    items[0] = e;
}

/*
 * Find an entry of cf whose guards pass and run it.  Returns 1 with *result
 * filled, 2 for an entry that runs the frame without capture, 0 on a miss,
 * -1 on an internal error.  hit (may be NULL): the entry run, a new
 * reference (for a timed call's costs).
 */
static int run_cached(CacheFrame *cf, const FrameView *fv, ThreadCapture *tc,
                      PlanOutcome *result, int *hit_index, uint64_t *guard_ticks,
                      CacheEntry **hit)
{
    /* A strong reference: reset() in another thread swaps cf->entries
       while a plan below runs Python. */
    PyObject *entries = Py_NewRef(cf->entries);
    int r = 0;
    for (Py_ssize_t i = 0; r == 0 && i < PyList_GET_SIZE(entries); i++) {
        CacheEntry *e = (CacheEntry *)Py_NewRef(PyList_GET_ITEM(entries, i));
        r = try_entry(e, fv, tc, true, result, guard_ticks);
        if (r >= 1) {
            *hit_index = (int)i;
            if (hit != NULL)
                *hit = (CacheEntry *)Py_NewRef(e);
            if (i < PyList_GET_SIZE(entries) && PyList_GET_ITEM(entries, i) == (PyObject *)e)
                move_to_front(entries, i);
        }
        Py_DECREF(e);
    }
    Py_DECREF(entries);
    return r;
}

/* Entry e, new, for the miss path (miss.c): try_entry without counting a
   hit.  Its contract. */
int hook_try_new_entry(CacheEntry *e, const FrameView *fv, ThreadCapture *tc,
                       PlanOutcome *out)
{
    return try_entry(e, fv, tc, false, out, NULL);
}

/* ---- the chain: plans, eager steps, resume frames, deopt ---- */

/* The view of a resume frame's state (arrays owned by `state`). */
static void resume_view(FrameView *fv, PyCodeObject *co, PyObject *func, PlanOutcome *state)
{
    fv->code = co;
    fv->locals = state->locals;
    fv->nlocals = state->nlocals;
    fv->stack = state->stack;
    fv->nstack = state->nstack;
    fv->globals = PyFunction_GET_GLOBALS(func);
    fv->builtins = ((PyFunctionObject *)func)->func_builtins;
    fv->closure = PyFunction_GET_CLOSURE(func);
    fv->iter_lists = state->iter_lists;
}

/* Continue in the default interpreter at `offset` with state's locals and
   stack; for-loop iterators, carried as tuples of their remaining items (or
   over a list, or as the rows of a tensor still to read), become iterators
   again.  New reference or NULL. */
static PyObject *deopt(PyThreadState *ts, EvalFrame *f, PlanOutcome *state, int offset,
                       bool *evaluated)
{
    if (plan_live_iterators(state, true) < 0)
        return NULL;
    if (!frame_can_resume(f, state->nlocals, state->nstack)) {
        PyErr_SetString(PyExc_SystemError, "dynscope: cannot resume this frame in the interpreter");
        return NULL;
    }
    *evaluated = true;
    /* the notes hold the lists and their items: not past this point, or
       they would live as long as the rest of the frame runs */
    Py_CLEAR(state->iter_lists);
    capture_counters(capture_state())->deopts++;
    return frame_eval_in_place(ts, f, state->locals, state->nlocals,
                               state->stack, state->nstack, offset);
}

/* Run the rest of frame f in the interpreter: from its start when no plan
   ran yet, else from cf's resume point with the state carried so far.  New
   reference or NULL. */
static PyObject *run_rest_eagerly(PyThreadState *ts, EvalFrame *f, CacheFrame *cf,
                                  PlanOutcome *state, bool *evaluated)
{
    if (cf->resume_offset == 0 && state->locals == NULL) {
        *evaluated = true;
        return frame_eval_default(ts, f, 0);
    }
    return deopt(ts, f, state, cf->resume_offset, evaluated);
}

/* Make the eager call an outcome left pending, with the captured frame `f`
   shown on the stack; push its result.  0, or -1 with the call's exception. */
static int run_eager_call(EvalFrame *f, PlanOutcome *out)
{
    ShadowFrame shadow;
    shadow_enter(&shadow, f, out->offset, out->locals, out->nlocals);
    Py_ssize_t nkw = out->kwnames ? PyTuple_GET_SIZE(out->kwnames) : 0;
    PyObject *result = PyObject_Vectorcall(out->callable, out->args,
                                           (size_t)(out->nargs - nkw), out->kwnames);
    shadow_exit(&shadow, result == NULL);
    plan_outcome_call_done(out);
    if (result == NULL)
        return -1;
    if (out->push_result)
        out->stack[out->nstack++] = result;
    else
        Py_DECREF(result);
    out->call_pending = false;
    return 0;
}

/* Calls a function at its cache limit runs without capture between two
   looks at what its entries still answer (limit_look). */
#define LIMIT_LOOK_CALLS 64

/* A function's first frame at its cache limit, LIMIT_LOOK_CALLS more calls
   run without capture: when its entries answered fewer than one call in
   five meanwhile, the code runs without capture for good (skipped, an
   event with the reason), so that its calls stop paying for guards that
   fail -- Dynamo's "skip this code from now on" at its recompile limit.
   On `run --capture-all` over cachetools' suite, 2.2 million calls checked
   the guards of frames at their limit, a fifth of the run.  A resume frame
   at its limit is left as it is: its function's first frame still hits.
   Cannot fail. */
static uint64_t entries_hits(CacheFrame *cf)
{
    uint64_t hits = 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(cf->entries); i++)
        hits += ((CacheEntry *)PyList_GET_ITEM(cf->entries, i))->hits;
    return hits;
}

static void limit_look(CodeCache *cc, CacheFrame *cf)
{
    uint64_t hits = entries_hits(cf);
    uint64_t answered = hits - cf->limit_hits_seen;
    cf->limit_hits_seen = hits;
    if (cf->resume_offset != 0 || cc->skip_reason != NULL || answered * 5 >= LIMIT_LOOK_CALLS)
        return;
    PyObject *why = PyUnicode_FromFormat(
        "reached config.cache_size_limit and its entries answered %llu of the next %d "
        "calls: runs without capture from now on (dynscope.reset() captures it again)",
        (unsigned long long)answered, LIMIT_LOOK_CALLS + (int)answered);
    if (why == NULL) {
        PyErr_Clear();
        return;
    }
    hook_mark_skipped(cc, why, true);
}

/* The miss of one link of the chain (miss.c's miss_handle), its compile's
   time counted in miss_ticks (cost.c leaves it out of what calls cost): up
   to the new entry's graph when it ran one, which timed calls note.  hit
   (may be NULL): the entry that ran, a new reference.  A frame at its
   cache limit counts the call it runs without capture. */
static MissOutcome run_miss(CodeCache *cc, CacheFrame *cf, const FrameView *fv, PyObject *func,
                            ThreadCapture *tc, PlanOutcome *out, CostLinkTimes *link,
                            CacheEntry **hit)
{
    link->missed = true;
    uint64_t miss_start = engine_ticks();
    plan_graph_times.start = 0;
    MissOutcome m = miss_handle(cc, cf, fv, func, tc, out);
    uint64_t compiled = plan_graph_times.start != 0 ? plan_graph_times.start : engine_ticks();
    miss_ticks += compiled - miss_start;
    if (hit != NULL && m == MISS_RAN && PyList_GET_SIZE(cf->entries) > 0)
        *hit = (CacheEntry *)Py_NewRef(PyList_GET_ITEM(cf->entries, 0));
    if (m == MISS_EAGER && cf->limit_warned) {
        if (cf->limit_calls == 0)
            cf->limit_hits_seen = entries_hits(cf);   /* the first window starts at the limit */
        if (++cf->limit_calls % LIMIT_LOOK_CALLS == 0)
            limit_look(cc, cf);
    }
    return m;
}

/* How many chain links run between two releases of the GIL. */
#define CHAIN_GIL_PERIOD 64

/*
 * Run a captured frame to its end: the entry whose guards pass (or a new
 * one), its graph, its exit -- and on through resume frames until a plan
 * returns, raises, or hands the rest of the frame to the interpreter.
 * `f` is the intercepted frame (run by the default evaluator when its
 * start cannot be captured).
 */
static PyObject *run_chain(PyThreadState *ts, EvalFrame *f, CodeCache *cc,
                           PyObject *func, ThreadCapture *tc, uint64_t framed_at)
{
    CacheFrame *cf = cache_frame(cc, 0, 0, 0);
    if (cf == NULL) {
        warn_internal_error("creating a cache frame");
        return frame_eval_default(ts, f, 0);
    }
    FrameView fv;
    frame_view_init(&fv, f);
    PlanOutcome state = {0};      /* the current resume frame's inputs (owned) */
    bool have_state = false;      /* state holds something to clear (a resume frame) */
    PyObject *result = NULL;
    bool evaluated = false;       /* the evaluator ran f (and from 3.12 cleared it) */
    unsigned links = 0;           /* resume frames entered so far */
    /* A frame answered by plans is a Python call the interpreter never
       enters: count it toward the recursion limit as it would (the eager
       paths below count themselves, so the count is dropped before them). */
    if (frame_recursion_enter(ts) < 0) {
        frame_clear_unevaluated(ts, f);
        return NULL;
    }
    bool counted = true;
    bool ran_graph = false;       /* a plan of this call ran a graph */
    CostSample cost;              /* a timed call's (cost.c) */
    bool timed = cost_sample_begin(&cost, tc, framed_at);
    PyObject *range = NULL;       /* strong: the torch.profiler range of the call */
#define UNCOUNT() do { if (counted) { frame_recursion_leave(ts); counted = false; } } while (0)
    for (;;) {
        PlanOutcome out = {0};
        int hit_index = -1;
        uint64_t guard_ticks = 0;   /* this call's guard time, all entries tried */
        CacheEntry *hit = NULL;     /* strong: the entry run, when timed */
        CostLinkTimes link = {0};
        if (timed) {
            plan_graph_times.on = true;     /* (a callee's timed call may have ended) */
            plan_graph_times.start = plan_graph_times.end = 0;
            link.start = engine_ticks();
            link.before = cost_totals();
        }
        if (profiler_enter_fn != NULL && range == NULL)
            profiler_slot = &range;         /* (until the link's plan ran) */
        int r = run_cached(cf, &fv, tc, &out, &hit_index, &guard_ticks, timed ? &hit : NULL);
        if (r != 0)
            profiler_slot = NULL;
        if (r == 2) {
            /* translation stopped for these inputs before: run the rest of
               the frame without capture, as on the miss that found it */
            capture_counters(tc)->hits++;
            capture_counters(tc)->eager_hits++;
            Py_XDECREF(hit);
            UNCOUNT();
            result = run_rest_eagerly(ts, f, cf, &state, &evaluated);
            break;
        }
        if (r == 1) {
            capture_counters(tc)->hits++;
            if (trace_frame_eval_enabled())
                trace_frame_eval(cc->code_id, TRACE_FRAME_HIT, hit_index,
                                 engine_ticks_to_ns_fast(guard_ticks));
        }
        else {
            MissOutcome m = MISS_EAGER;
            trace_frame_eval(cc->code_id, TRACE_FRAME_MISS, -1, 0);
            if (r < 0)
                warn_internal_error("checking guards");
            else
                m = run_miss(cc, cf, &fv, func, tc, &out, &link, timed ? &hit : NULL);
            profiler_slot = NULL;
            if (m == MISS_ERROR) {
                result = NULL;
                break;
            }
            if (m == MISS_EAGER) {
                UNCOUNT();
                if (timed && cf->limit_warned)
                    cost_limited_frame(&cost, cf);      /* its uncaptured time (cost.c) */
                result = run_rest_eagerly(ts, f, cf, &state, &evaluated);
                break;
            }
        }
        ran_graph = ran_graph || out.ran_graph;
        if (timed) {
            cost_link(&cost, hit, &link, out.kind == OUTCOME_CONTINUE);
            Py_XDECREF(hit);
        }
        /* The incoming values the plan needs are in `out` now: drop them
           here, so that the eager call sees each object held once, as in
           the interpreter (programs and tests read refcounts). */
        if (have_state) {
            plan_outcome_clear(&state);
            have_state = false;
        }
        if (out.kind == OUTCOME_ERROR) {
            result = NULL;
            break;
        }
        if (out.kind == OUTCOME_RETURN) {
            result = out.value;
            out.value = NULL;
            break;
        }
        if (out.call_pending && (run_eager_call(f, &out) < 0 || plan_live_iterators(&out, false) < 0)) {
            plan_outcome_clear(&out);
            result = NULL;
            break;
        }
        if (out.deopt) {
            UNCOUNT();
            result = deopt(ts, f, &out, out.offset, &evaluated);
            plan_outcome_clear(&out);
            break;
        }
        /* A loop whose every step a plan answers never reaches the
           interpreter's eval breaker, which a backward jump would: check
           signals on each link (Ctrl-C stops it), and every
           CHAIN_GIL_PERIOD links let other threads have the GIL (a
           thread waiting for it has asked for a switch). */
        if (++links % CHAIN_GIL_PERIOD == 0) {
            Py_BEGIN_ALLOW_THREADS
            Py_END_ALLOW_THREADS
        }
        if (PyErr_CheckSignals() < 0) {
            plan_outcome_clear(&out);
            result = NULL;
            break;
        }
        CacheFrame *next = cache_frame(cc, out.offset, out.unspec, out.iters);
        if (next == NULL) {
            UNCOUNT();
            result = deopt(ts, f, &out, out.offset, &evaluated);
            plan_outcome_clear(&out);
            break;
        }
        state = out;
        have_state = true;
        cf = next;
        resume_view(&fv, cc->code, func, &state);
    }
    if (have_state)
        plan_outcome_clear(&state);
    if (timed)
        cost_sample_end(&cost);
    profiler_range_end(range);
    if (ran_graph)
        capture_counters(tc)->graph_frames++;
    UNCOUNT();
#undef UNCOUNT
    if (!evaluated)
        frame_clear_unevaluated(ts, f);
    return result;
}

/* ---- calls answered without a frame ---- */

/* Most fast locals a frameless call copies onto the C stack. */
#define DIRECT_MAX_LOCALS 32

/* The resume frame at offset 0 of cc (the frame's start), or NULL when it
   has not been made yet.  Never allocates. */
static CacheFrame *start_frame(CodeCache *cc)
{
    for (int i = 0; i < cc->nframes; i++) {
        CacheFrame *cf = cc->frames[i];
        if (cf->resume_offset == 0 && cf->unspec == 0 && cf->iters == 0)
            return cf;
    }
    return NULL;
}

/*
 * Whether code co, called with nargs positional arguments and no keywords,
 * starts with exactly those arguments as its first fast locals and nothing
 * else to set up: no defaults to fill, no *args / **kwargs, not a
 * generator or coroutine (those return before running).
 */
static bool call_fills_locals(PyCodeObject *co, Py_ssize_t nargs)
{
    return nargs == co->co_argcount && co->co_kwonlyargcount == 0
           && co->co_nlocals <= DIRECT_MAX_LOCALS && co->co_ncellvars == 0
           && !(co->co_flags & (CO_VARARGS | CO_VARKEYWORDS | CO_GENERATOR | CO_COROUTINE
                                | CO_ASYNC_GENERATOR | CO_ITERABLE_COROUTINE));
}

/*
 * The entries of cf for a frameless call: find the first entry whose guards
 * pass.  Returns 1 and runs its plan into *out when that plan returns from
 * the frame; 0 when no entry passes, 2 when the one that passes needs the
 * frame (an eager step, a resume, a stopped translation) -- nothing was run
 * or counted, the caller makes the frame; -1 on an internal error.
 */
static int direct_entries(CacheFrame *cf, const FrameView *fv, ThreadCapture *tc,
                          PyObject *backend, PlanOutcome *out, int *hit_index,
                          uint64_t *guard_ticks)
{
    PyObject *entries = Py_NewRef(cf->entries);
    int r = 0;
    for (Py_ssize_t i = 0; r == 0 && i < PyList_GET_SIZE(entries); i++) {
        CacheEntry *e = (CacheEntry *)Py_NewRef(PyList_GET_ITEM(entries, i));
        PyObject *small[SMALL_VALS];
        PyObject **vals = small;
        int nacc = e->guards.nacc;
        if (nacc > SMALL_VALS)
            vals = PyMem_Calloc((size_t)nacc, sizeof(PyObject *));
        else
            for (int k = 0; k < nacc; k++)
                small[k] = NULL;
        if (vals == NULL) {
            Py_DECREF(e);
            PyErr_NoMemory();
            r = -1;
            break;
        }
        tc->in_engine++;
        uint64_t t0 = engine_ticks();
        int ok = guardset_check(&e->guards, fv, vals, backend, NULL);
        uint64_t t1 = engine_ticks();
        tc->in_engine--;
        e->guard_ticks += t1 - t0;
        *guard_ticks += t1 - t0;
        if (ok < 0)
            r = -1;
        else if (ok == 1 && (e->eager_reason != NULL || e->plan.exit != EXIT_RETURN))
            r = 2;                               /* it needs the frame */
        else if (ok == 1) {
            e->hits++;
            *hit_index = (int)i;
            plan_run(&e->plan, &e->guards, fv, vals, &tc->in_engine, out);
            r = 1;
            if (PyList_GET_ITEM(entries, i) == (PyObject *)e)
                move_to_front(entries, i);
        }
        guardset_release_values(&e->guards, vals);
        if (vals != small)
            PyMem_Free(vals);
        Py_DECREF(e);
    }
    Py_DECREF(entries);
    return r;
}

/* After this many calls in a row whose guards passed on an entry that needs
   the frame, a frameless call leaves the next DIRECT_SKIP calls to the frame
   at once: their guards would be checked twice (here, then by the hook),
   the dearest part of a call that breaks.  Then it looks again. */
#define DIRECT_FRAMED_ROW 4
#define DIRECT_SKIP 63

/* A call to time that the frameless path left to the frame (the code and
   when): the hook's next frame, if of that code, is that call, and what
   making its frame and entering the hook took is the first break's when
   the entry it runs ends at one -- without that break the call would have
   been answered without a frame (cost.c, cost_frame_made). */
static _Thread_local struct { PyCodeObject *code; uint64_t at; } framed_note;  /* code: borrowed,
                                                                       compared only */

/* See engine.h. */
PyObject *capture_call_direct(PyObject *func, PyObject *const *args, size_t nargsf,
                              PyObject *kwnames, PyObject *backend, bool *done)
{
    ThreadCapture *tc = &thread_capture;
    *done = false;
    if (kwnames != NULL || !PyFunction_Check(func) || tc->session != NULL || tc->in_engine
        || engine.config.stance == STANCE_FORCE_EAGER || profiler_enter_fn != NULL)
        return NULL;        /* (a profiler's range: the chain runner's) */
    PyFunctionObject *fn = (PyFunctionObject *)func;
    PyCodeObject *co = (PyCodeObject *)fn->func_code;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (!call_fills_locals(co, nargs))
        return NULL;
    CodeCache *cc = cache_peek(co);
    CacheFrame *cf = cc != NULL && cc->classified_at == hatch_generation && cc->skip_reason == NULL
                     ? start_frame(cc) : NULL;
    if (cf == NULL)
        return NULL;
    if (cost_sample_next()) {
        /* a call to time: the chain runner's, which charges the frame made
           for it to the break that needs it (see framed_note) */
        framed_note.code = co;
        framed_note.at = engine_ticks();
        return NULL;
    }
    if (cf->direct_skips > 0) {
        cf->direct_skips--;
        return NULL;                             /* its entries need the frame */
    }

    PyObject *locals[DIRECT_MAX_LOCALS];            /* borrowed: the call's arguments */
    for (int i = 0; i < co->co_nlocals; i++)
        locals[i] = i < nargs ? args[i] : NULL;
    FrameView fv = {co, locals, co->co_nlocals, NULL, 0, fn->func_globals,
                    fn->func_builtins, fn->func_closure, NULL};
    PlanOutcome out = {0};
    int hit_index = -1;
    uint64_t guard_ticks = 0;
    PyThreadState *ts = PyThreadState_Get();
    /* the call counts toward the recursion limit, as its frame would */
    if (frame_recursion_enter(ts) < 0) {
        *done = true;
        return NULL;
    }
    int r = direct_entries(cf, &fv, tc, backend, &out, &hit_index, &guard_ticks);
    frame_recursion_leave(ts);
    if (r == 2 && ++cf->direct_framed >= DIRECT_FRAMED_ROW) {
        cf->direct_framed = 0;
        cf->direct_skips = DIRECT_SKIP;
    }
    if (r == 1)
        cf->direct_framed = 0;
    if (r == 0 || r == 2)
        return NULL;                             /* the frame is made and hooked */
    *done = true;
    if (r < 0) {
        warn_internal_error("checking guards");
        PyErr_Clear();
        *done = false;
        return NULL;
    }
    capture_counters(tc)->frames_seen++;
    capture_counters(tc)->hits++;
    capture_counters(tc)->direct_hits++;
    if (out.ran_graph)
        capture_counters(tc)->graph_frames++;
    if (trace_frame_eval_enabled())
        trace_frame_eval(cc->code_id, TRACE_FRAME_HIT, hit_index,
                         engine_ticks_to_ns_fast(guard_ticks));
    PyObject *result = out.kind == OUTCOME_RETURN ? out.value : NULL;
    out.value = NULL;
    if (out.iter_lists != NULL || out.callable != NULL || out.args != NULL
        || out.locals != NULL || out.stack != NULL || out.kwnames != NULL)
        plan_outcome_clear(&out);         /* (a returning plan leaves at most iter_lists) */
    return result;
}

/* ---- the hook ---- */

/* A frame of dynscope.disable's (or torch.compiler.disable's) wrapper: it
   and everything it calls run without capture, until an optimize() region
   entered below it (tc->off_at, the hook's test). */
static PyObject *eval_uncaptured(PyThreadState *ts, EvalFrame *f, ThreadCapture *tc)
{
    int saved = tc->off_at;
    tc->off_at = tc->depth;
    PyObject *r = frame_eval_default(ts, f, 0);
    tc->off_at = saved;
    return r;
}

static PyObject *capture_frame(PyThreadState *ts, EvalFrame *f, ThreadCapture *tc)
{
    if (engine.config.stance == STANCE_FORCE_EAGER)
        return frame_eval_default(ts, f, 0);
    PyCodeObject *co = frame_code(f);
    uint64_t framed_at = 0;           /* this frame was made for a call to time */
    if (framed_note.code != NULL) {
        framed_at = framed_note.code == co ? framed_note.at : 0;
        framed_note.code = NULL;
    }
    CodeCache *cc = lookup_code_cache(co, tc);
    if (cc == NULL || cc->skip_reason != NULL || frame_func(f) == NULL) {
        if (cc != NULL && cc->skip_reason != NULL)
            cc->skip_calls++;                  /* explain reports them by rule */
        if (cc != NULL && cc->skip_reported)   /* not the library code skipped by path */
            trace_frame_eval(cc->code_id, TRACE_FRAME_SKIP, -1, 0);
        if (cc != NULL && cc->skip_callees)
            return eval_uncaptured(ts, f, tc);
        return frame_eval_default(ts, f, 0);
    }
    capture_counters(tc)->frames_seen++;
    return run_chain(ts, f, cc, frame_func(f), tc, framed_at);
}

static PyObject *eval_frame(PyThreadState *ts, EvalFrame *f, int throwflag)
{
    ThreadCapture *tc = &thread_capture;
    /* One thread-local lookup per frame: hide the address from constant
       propagation, which would otherwise redo the lookup (a call into the
       dynamic linker) in each helper tc is passed to. */
    __asm__("" : "+r"(tc));
    if (tc->depth == tc->off_at || tc->in_engine || throwflag || frame_is_generator(f)
        || !frame_at_start(f))
        return frame_eval_default(ts, f, throwflag);
    return capture_frame(ts, f, tc);
}
