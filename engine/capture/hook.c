/*
 * hook.c -- the PEP 523 frame hook and per-thread capture state.
 *
 * The hook is installed only while at least one thread is inside an
 * optimize() region: a custom eval-frame function disables CPython's inlined
 * Python-to-Python calls for the whole process, so code outside capture
 * regions must not pay for it.  For a frame it may capture, the hook looks
 * the code up in its cache (cache.c), runs the plan of the first entry whose
 * guards pass, and otherwise translates the frame into a new entry
 * (translate.c).  Anything the engine cannot do runs the frame in the default
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
#include "events.h"
#include "../base/tensorlib.h"
#include "../../trace/trace.h"

#include <limits.h>
#include <string.h>

/* The engine's process-wide state (capture.h): the capture room owns it;
   the layers above set its config through the capture layer. */
EngineState engine = {
    .config = {.cache_size_limit = 8, .cache_limit_warning = true,
               .skip_tensorless_frames = true},
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
static void mark_skipped(CodeCache *cc, PyObject *reason_steal, bool report)
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
    if (cc != NULL && cc->classified)
        return cc;
    if (cc == NULL && session == NULL)
        cc = cache_for_code(co);
    if (cc == NULL) {
        warn_internal_error("creating the code cache");
        return NULL;
    }
    cc->classified = true;
    const char *why = static_skip_reason(co);
    if (why != NULL)
        mark_skipped(cc, PyUnicode_FromString(why), false);
    else {
        PyObject *prefix = code_skip_prefix(co);   /* borrowed */
        if (prefix != NULL)
            mark_skipped(cc, PyUnicode_FromFormat("file is in config.skip_prefixes (%U)", prefix),
                         false);
    }
    if (PyErr_Occurred())
        warn_internal_error("classifying a code object");
    return cc;
}

/* ---- lookup ---- */

#define SMALL_VALS 32

/* A stopped translation is kept as an entry (eager_reason) only with 1 to
   this many guards: none means the translator could not guard what stopped
   it (or an error), and checking more on every call would cost more than it
   saves.  Other attempts count toward the limit as before. */
#define EAGER_ENTRY_MAX_GUARDS 64

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
        else                        /* the graph runs inside the engine; an eager step is user code */
            plan_run(&e->plan, &e->guards, fv, vals, &tc->in_engine, out);
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
 * -1 on an internal error.
 */
static int run_cached(CacheFrame *cf, const FrameView *fv, ThreadCapture *tc,
                      PlanOutcome *result, int *hit_index, uint64_t *guard_ticks)
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
            if (i < PyList_GET_SIZE(entries) && PyList_GET_ITEM(entries, i) == (PyObject *)e)
                move_to_front(entries, i);
        }
        Py_DECREF(e);
    }
    Py_DECREF(entries);
    return r;
}

/* mark_dynamic for a TENSOR_MATCH that `seen` (the value, borrowed, or
   NULL) failed: the dimensions whose size changed -- same type, dtype and
   rank; sizes from 2 on, as 0 and 1 broadcast apart -- become dynamic for
   slot `slot` (CacheFrame.dyn_dims).  Returns "L['x'].size(0)" (new str)
   when a dimension was newly marked, else NULL. */
static PyObject *mark_dynamic_dims(CacheFrame *cf, CacheEntry *e, const Guard *g, PyObject *seen,
                                   uint64_t bit, Py_ssize_t slot)
{
    const TensorMeta *tm = g->tensor;
    if (seen == NULL || tm == NULL || Py_TYPE(seen) != tm->type || (cf->static_only & bit))
        return NULL;
    PyObject *shape = PyObject_GetAttrString(seen, "shape");
    PyObject *dtype = shape ? PyObject_GetAttrString(seen, "dtype") : NULL;
    int same_dtype = dtype ? PyObject_RichCompareBool(dtype, tm->dtype, Py_EQ) : -1;
    uint32_t dims = 0;
    if (same_dtype == 1 && PyTuple_Check(shape) && PyTuple_GET_SIZE(shape) == tm->ndim) {
        for (int d = 0; d < tm->ndim && d < 32; d++) {
            Py_ssize_t now = PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, d));
            if (now >= 2 && tm->shape[d] >= 2 && now != tm->shape[d])
                dims |= 1u << d;
        }
    }
    Py_XDECREF(shape);
    Py_XDECREF(dtype);
    PyErr_Clear();
    dims &= ~cf->dyn_dims[slot];
    if (dims == 0)
        return NULL;
    cf->dyn_dims[slot] |= dims;
    cf->just_marked = bit;
    PyObject *src = guardset_render_source(&e->guards, g->acc);
    int first = 0;
    while (!(dims & (1u << first)))
        first++;
    PyObject *r = src ? PyUnicode_FromFormat("%U.size(%d)", src, first) : NULL;
    Py_XDECREF(src);
    return r;
}

/*
 * Automatic dynamic: when entry e failed on the value of an int or float
 * the frame starts with (EQUALS_MATCH on a local or a resume frame's stack
 * slot), that slot's number becomes a graph input in the frame's next
 * translations (CacheFrame.dynamic); on a tensor's sizes, mark_dynamic_dims
 * -- unless a translation found the slot must stay a constant
 * (static_only).  Returns what was newly marked ("L['n']",
 * "L['x'].size(0)"; new str), else NULL.
 */
static PyObject *mark_dynamic(CodeCache *cc, CacheFrame *cf, CacheEntry *e, int guard,
                              const FrameView *fv)
{
    const Guard *g = &e->guards.guards[guard];
    if (g->acc < 0)
        return NULL;
    const Accessor *a = &e->guards.acc[g->acc];
    if (a->base >= 0 || (a->kind != ACC_LOCAL && a->kind != ACC_STACK))
        return NULL;
    Py_ssize_t slot = a->kind == ACC_LOCAL ? a->index : code_nslots(cc->code) + a->index;
    if (slot < 0 || slot >= LIVE_MAX_SLOTS)
        return NULL;
    uint64_t bit = (uint64_t)1 << slot;
    if (g->kind == GUARD_TENSOR_MATCH) {
        PyObject *seen = a->kind == ACC_LOCAL ? (a->index < fv->nlocals ? fv->locals[a->index] : NULL)
                         : (a->index < fv->nstack ? fv->stack[a->index] : NULL);      /* borrowed */
        return mark_dynamic_dims(cf, e, g, seen, bit, slot);
    }
    if (g->kind != GUARD_EQUALS_MATCH || g->expected == NULL
        || !(PyLong_CheckExact(g->expected) || PyFloat_CheckExact(g->expected)))
        return NULL;
    if ((cf->dynamic & bit) || (cf->static_only & bit))
        return NULL;
    cf->dynamic |= bit;
    cf->just_marked = bit;
    return guardset_render_source(&e->guards, g->acc);
}

/* The number just made dynamic stayed static (the translation needed its
   value): the recompile's reason says so.  Cannot fail. */
static void note_kept_static(CacheFrame *cf)
{
    PyObject *from = PyUnicode_FromString(" is now dynamic (a graph input)");
    PyObject *to = PyUnicode_FromString(" stays static (the code needs its value: a branch, "
                                        "a loop count)");
    PyObject *r = from && to ? PyUnicode_Replace(cf->last_failure, from, to, -1) : NULL;
    Py_XDECREF(from);
    Py_XDECREF(to);
    if (r == NULL)
        PyErr_Clear();
    else
        Py_SETREF(cf->last_failure, r);
}

/*
 * What a miss learns about the frame's older entries, for the recompile
 * report: the first failing guard of each entry, and the entry nearest to
 * the new inputs with every guard of it that fails.  Strong or NULL.
 */
typedef struct MissReport {
    PyObject *failures;  /* list of GuardFailureInfo (guards.h) */
    PyObject *nearest;   /* dict {"entry", "failing", "guards", "capture_ns"}
                            (docs/events.md, recompile) or NULL */
} MissReport;

static void miss_report_clear(MissReport *mr)
{
    Py_CLEAR(mr->failures);
    Py_CLEAR(mr->nearest);
}

/* Entry e's first failing guard as a GuardFailureInfo.  New or NULL. */
static PyObject *failure_item(CacheEntry *e, const GuardFailure *fail)
{
    PyObject *stack = guardset_site(&e->guards, fail->guard);
    PyObject *last = stack != NULL && PyList_GET_SIZE(stack) > 0
                     ? PyList_GET_ITEM(stack, PyList_GET_SIZE(stack) - 1) : NULL;
    PyObject *id = PyUnicode_FromFormat("%d/%d", e->frame_id, e->frame_compile_id);
    PyObject *item = id ? guard_failure_info_new(id, guard_kind_name(e->guards.guards[fail->guard].kind),
                                                 fail->expr, fail->observed,
                                                 last ? PyTuple_GET_ITEM(last, 0) : NULL,
                                                 last ? PyTuple_GET_ITEM(last, 1) : NULL)
                        : NULL;
    Py_XDECREF(id);
    return item;
}

/* The nearest-entry diff of entry e (the one whose guards fail fewest on
   fv): a new dict, or NULL with an exception. */
static PyObject *nearest_entry(CacheEntry *e, const FrameView *fv, ThreadCapture *tc)
{
    PyObject **vals = PyMem_Calloc((size_t)e->guards.nacc + 1, sizeof(PyObject *));
    if (vals == NULL)
        return PyErr_NoMemory();
    int nfailing = 0;
    PyObject *guards = guardset_diff(&e->guards, fv, vals, tc->config.backend, &nfailing);
    guardset_release_values(&e->guards, vals);
    PyMem_Free(vals);
    if (guards == NULL)
        return NULL;
    return Py_BuildValue("{s:N,s:i,s:N}", "entry",
                         PyUnicode_FromFormat("%d/%d", e->frame_id, e->frame_compile_id),
                         "failing", nfailing, "guards", guards);
}

/*
 * Fill mr for a miss on cf: each entry's first failing guard, and the
 * nearest entry.  0, or -1 with an exception (mr is then cleared).
 * Marks what automatic dynamic learns from the failures (*now_dynamic).
 */
static int collect_failures(CodeCache *cc, CacheFrame *cf, const FrameView *fv,
                            ThreadCapture *tc, MissReport *mr, PyObject **now_dynamic)
{
    if ((mr->failures = PyList_New(0)) == NULL)
        return -1;
    PyObject *entries = Py_NewRef(cf->entries);  /* reset() may swap cf->entries */
    CacheEntry *nearest = NULL;                  /* borrowed from entries */
    int nearest_failing = INT_MAX;
    int rc = 0;
    for (Py_ssize_t i = 0; rc == 0 && i < PyList_GET_SIZE(entries); i++) {
        CacheEntry *e = (CacheEntry *)PyList_GET_ITEM(entries, i);
        PyObject **vals = PyMem_Calloc((size_t)e->guards.nacc + 1, sizeof(PyObject *));
        GuardFailure fail = {-1, NULL, NULL};
        int failed = -1;
        int r = vals ? guardset_check(&e->guards, fv, vals, tc->config.backend, &failed) : -1;
        if (r == 0 && guardset_explain_failure(&e->guards, failed, fv, vals, tc->config.backend,
                                               &fail) < 0)
            r = -1;
        if (r == 0 && fail.guard >= 0 && tc->config.dynamic < 0 && *now_dynamic == NULL)
            *now_dynamic = mark_dynamic(cc, cf, e, fail.guard, fv);
        if (r == 0 && fail.guard >= 0) {
            /* the newest of the entries with the fewest failing guards */
            int n = guardset_failing(&e->guards, fv, vals, tc->config.backend, NULL, 0);
            if (n < nearest_failing) {
                nearest = e;
                nearest_failing = n;
            }
            PyObject *item = failure_item(e, &fail);
            rc = item != NULL && PyList_Append(mr->failures, item) == 0 ? 0 : -1;
            Py_XDECREF(item);
        }
        else if (r < 0) {
            rc = -1;
        }
        if (vals) {
            guardset_release_values(&e->guards, vals);
            PyMem_Free(vals);
        }
        guardfailure_clear(&fail);
    }
    if (rc == 0 && nearest != NULL && (mr->nearest = nearest_entry(nearest, fv, tc)) == NULL)
        rc = -1;
    Py_DECREF(entries);
    if (rc < 0)
        miss_report_clear(mr);
    return rc;
}

/* Render "expr (observed VALUE)" for the newest entry's failure.  New str or NULL. */
static PyObject *describe_failure(PyObject *failures)
{
    if (PyList_GET_SIZE(failures) == 0)
        return NULL;
    PyObject *t = PyList_GET_ITEM(failures, 0);
    return PyUnicode_FromFormat("%S (observed %S)", PyTuple_GET_ITEM(t, 2),
                                PyTuple_GET_ITEM(t, 3));
}

/* ---- compile ---- */

static void raise_unsupported(CodeCache *cc, PyObject *reason, PyObject *user_stack);

typedef enum { MISS_RAN, MISS_EAGER, MISS_ERROR, MISS_COMPILE } MissOutcome;

#define REACH_DEPTH 2   /* container levels looked into (tensorlib_reaches) */

/* Whether a global the code names (co_names) reaches a tensor: the numpy
   or torch module, an array, a model ... */
static bool names_reach_tensors(PyCodeObject *co, PyObject *globals)
{
    PyObject *names = co->co_names;
    for (Py_ssize_t i = 0; globals != NULL && i < PyTuple_GET_SIZE(names); i++) {
        PyObject *v = PyDict_GetItemWithError(globals, PyTuple_GET_ITEM(names, i));
        if (v != NULL && (tensorlib_is_library_module(v) || tensorlib_reaches(v, REACH_DEPTH)))
            return true;
    }
    PyErr_Clear();
    return false;
}

/*
 * Whether a fresh frame (a function start with no entry yet) is worth a
 * translation: as Dynamo, a frame with no array or tensor in reach -- in its
 * arguments, its closure or the globals it names, or numpy or torch among
 * those globals (a module held in a local does not count) -- runs without capture,
 * for it could only make an empty graph (and, specialised on its values,
 * recompile for each of them: the namedtuple constructors inspect.stack()
 * calls).  The function a region wraps is always compiled, and
 * config.skip_tensorless_frames = False compiles every frame.  Looked at on
 * each call of such a frame (it keeps no entry): it may get a tensor later.
 */
static bool frame_worth_compiling(CodeCache *cc, CacheFrame *cf, const FrameView *fv,
                                  ThreadCapture *tc)
{
    if (!engine.config.skip_tensorless_frames || cf->resume_offset != 0
        || PyList_GET_SIZE(cf->entries) > 0 || cf->failed > 0
        || (PyObject *)cc->code == tc->config.root_code)
        return true;
    for (int i = 0; i < fv->nlocals; i++)
        if (fv->locals[i] != NULL && tensorlib_reaches(fv->locals[i], REACH_DEPTH))
            return true;
    for (Py_ssize_t i = 0; fv->closure != NULL && i < PyTuple_GET_SIZE(fv->closure); i++) {
        PyObject *cell = PyTuple_GET_ITEM(fv->closure, i);
        if (PyCell_Check(cell) && tensorlib_reaches(PyCell_GET(cell), REACH_DEPTH))
            return true;
    }
    return names_reach_tensors(cc->code, fv->globals);
}

/*
 * Before compiling on a miss: note why the older entries failed (into *mr
 * and cf->last_failure) and decide from the stance and the cache limit
 * whether to compile at all.  MISS_COMPILE: go on (the caller clears *mr);
 * MISS_EAGER / MISS_ERROR as handle_miss (*mr is empty).
 */
static MissOutcome miss_decide(CodeCache *cc, CacheFrame *cf, const FrameView *fv,
                               ThreadCapture *tc, MissReport *mr)
{
    Py_ssize_t nentries = PyList_GET_SIZE(cf->entries);
    Py_ssize_t attempts = nentries + cf->failed;   /* toward the limit */
    *mr = (MissReport){NULL, NULL};
    if (cf->limit_warned && attempts >= engine.config.cache_size_limit)
        return MISS_EAGER;   /* reported once already: no more failure reports */
    if (nentries > 0) {
        PyObject *now_dynamic = NULL;
        tc->in_engine++;
        int rc = collect_failures(cc, cf, fv, tc, mr, &now_dynamic);
        tc->in_engine--;
        if (rc < 0) {
            warn_internal_error("collecting guard failures");
            if ((mr->failures = PyList_New(0)) == NULL) {
                PyErr_Clear();
                return MISS_EAGER;
            }
        }
        PyObject *desc = describe_failure(mr->failures);
        if (desc == NULL)
            PyErr_Clear();
        if (desc != NULL && now_dynamic != NULL) {
            /* what the recompile report and the SQL history show */
            Py_SETREF(desc, PyUnicode_FromFormat("%U; %U is now dynamic (a graph input)",
                                                 desc, now_dynamic));
            if (desc == NULL)
                PyErr_Clear();
        }
        Py_XDECREF(now_dynamic);
        Py_XSETREF(cf->last_failure, desc);
    }
    MissOutcome out = MISS_COMPILE;
    if (nentries > 0 && engine.config.stance == STANCE_EAGER_ON_RECOMPILE) {
        out = MISS_EAGER;
    }
    else if (nentries > 0 && engine.config.stance == STANCE_FAIL_ON_RECOMPILE) {
        PyErr_Format(engine.recompile_error,
                     "dynscope: %U (%U:%d) would be recompiled (frame %d, set_stance("
                     "'fail_on_recompile')): %S",
                     cc->code->co_qualname, cc->code->co_filename, cc->code->co_firstlineno,
                     cf->frame_id, cf->last_failure ? cf->last_failure : Py_None);
        out = MISS_ERROR;
    }
    else if (attempts >= engine.config.cache_size_limit) {
        if (!cf->limit_warned) {
            cf->limit_warned = true;
            capture_counters(tc)->cache_limits++;
            events_cache_limit(cc, cf, mr->failures);
            warn_cache_limit(cc, cf);      /* the user's one warning: not the event's doing */
        }
        out = MISS_EAGER;
    }
    if (out != MISS_COMPILE)
        miss_report_clear(mr);
    return out;
}

/* A new, empty entry of frame cf, its compile id taken now: translation
   runs Python, and another thread may compile the same frame meanwhile.
   New reference, or NULL (reported as an internal error). */
static CacheEntry *miss_new_entry(CodeCache *cc, CacheFrame *cf, ThreadCapture *tc)
{
    CacheEntry *e = cache_entry_new();
    if (e == NULL) {
        warn_internal_error("allocating a cache entry");
        return NULL;
    }
    cache_frame_assign_id(cf, tc->session ? &tc->session->next_frame_id : NULL);
    e->frame_id = cf->frame_id;
    e->frame_compile_id = cf->ncompiles++;
    e->resume_offset = cf->resume_offset;
    e->backend = Py_NewRef(tc->config.backend);
    e->code_id = cc->code_id;
    e->code_name = Py_NewRef(cc->code->co_qualname);
    e->code_file = Py_NewRef(cc->code->co_filename);
    e->code_line = cc->code->co_firstlineno;
    e->resume_line = cf->resume_offset ? PyCode_Addr2Line(cc->code, cf->resume_offset * 2) : 0;
    return e;
}

/*
 * The translation of e could not capture the frame (reason: stolen, may be
 * NULL).  Skip the code for good, or keep the attempt as an entry guarded
 * by what it read: the same inputs run without capture from now on instead
 * of translating (and failing) again on every call; it counts toward the
 * limit.  first: the frame had no entry when the miss began.  Steals e.
 * MISS_EAGER, or MISS_ERROR under fullgraph.
 */
static MissOutcome miss_unsupported(CodeCache *cc, CacheFrame *cf, ThreadCapture *tc,
                                    CacheEntry *e, PyObject *reason, bool permanent,
                                    bool first)
{
    events_compile_end(cc, e, "skipped");
    if (reason == NULL)
        reason = PyUnicode_FromString("unsupported");
    PyErr_Clear();
    if (tc->config.fullgraph && reason != NULL) {
        raise_unsupported(cc, reason, e->plan.brk.user_stack);
        Py_DECREF(reason);
        Py_DECREF(e);
        return MISS_ERROR;
    }
    if (permanent && cf->resume_offset == 0 && first) {
        Py_DECREF(e);
        mark_skipped(cc, reason, true);
        return MISS_EAGER;
    }
    capture_counters(tc)->skips++;
    events_frame_skip(cc, reason);
    e->eager_reason = reason;       /* steals */
    if (reason == NULL || e->guards.n == 0 || e->guards.n > EAGER_ENTRY_MAX_GUARDS
        || PyList_GET_SIZE(cf->entries) >= engine.config.cache_size_limit
        || PyList_Insert(cf->entries, 0, (PyObject *)e) < 0) {
        PyErr_Clear();
        cf->failed++;
    }
    Py_DECREF(e);
    return MISS_EAGER;
}

/* Whether a thread other than this one exists: it may have run while
   the translator called Python code (the GIL switches), and changed what
   the frame reads (threading's _active as its threads end). */
static bool other_threads_exist(void)
{
    PyThreadState *me = PyThreadState_Get();
    for (PyThreadState *t = PyInterpreterState_ThreadHead(me->interp); t != NULL; t = PyThreadState_Next(t))
        if (t != me)
            return true;
    return false;
}

/* A new entry that fails its own guards on the inputs it was made from:
   report which guard, once per guard text (what to mend).  With other
   threads alive, the inputs may have changed under the translation: the
   entry is as safe either way (it does not match, the frame runs
   uncaptured), and that is no translator bug to report.  Cannot fail. */
static void report_self_mismatch(CodeCache *cc, CacheEntry *e, const FrameView *fv,
                                 ThreadCapture *tc)
{
    if (other_threads_exist())
        return;
    PyObject **vals = PyMem_Calloc((size_t)e->guards.nacc + 1, sizeof(PyObject *));
    GuardFailure fail = {-1, NULL, NULL};
    int failed = -1;
    if (vals != NULL && guardset_check(&e->guards, fv, vals, tc->config.backend, &failed) == 0
        && guardset_explain_failure(&e->guards, failed, fv, vals, tc->config.backend, &fail) == 0
        && fail.expr != NULL) {
        char what[400];
        snprintf(what, sizeof(what), "a new entry's guards do not match its own inputs "
                 "(%s in %s, observed %s)", PyUnicode_AsUTF8(fail.expr),
                 PyUnicode_AsUTF8(cc->code->co_qualname),
                 fail.observed ? PyUnicode_AsUTF8(fail.observed) : "?");
        PyErr_Clear();
        warn_internal_error(what);
    }
    else {
        PyErr_Clear();
        warn_internal_error("a new entry's guards do not match its own inputs");
    }
    if (vals != NULL) {
        guardset_release_values(&e->guards, vals);
        PyMem_Free(vals);
    }
    guardfailure_clear(&fail);
}

/*
 * e was translated: report it, keep it in cf (unless another thread filled
 * the frame meanwhile: then it runs this once) and run it.  Steals e.
 */
static MissOutcome miss_compiled(CodeCache *cc, CacheFrame *cf, const FrameView *fv,
                                 ThreadCapture *tc, CacheEntry *e, MissReport *mr,
                                 PlanOutcome *result)
{
    if (tc->config.fullgraph && e->plan.exit != EXIT_RETURN) {
        raise_unsupported(cc, e->plan.brk.reason, e->plan.brk.user_stack);
        events_compile_end(cc, e, "error");
        Py_DECREF(e);
        return MISS_ERROR;
    }
    capture_counters(tc)->compiles++;
    if (e->frame_compile_id > 0) {
        capture_counters(tc)->recompiles++;
        if (mr->nearest != NULL) {     /* the miss's cost, known now */
            PyObject *ns = PyLong_FromUnsignedLongLong(e->compile_ns);
            if (ns == NULL || PyDict_SetItemString(mr->nearest, "capture_ns", ns) < 0)
                PyErr_Clear();
            Py_XDECREF(ns);
        }
        events_recompile(cc, e, cf->last_failure, mr->failures, mr->nearest);
    }
    events_compile_end(cc, e, "ok");
    if (e->plan.exit != EXIT_RETURN) {
        capture_counters(capture_state())->graph_breaks++;
        events_graph_break(cc, e);
    }
    if (PyList_GET_SIZE(cf->entries) < engine.config.cache_size_limit
        && PyList_Insert(cf->entries, 0, (PyObject *)e) < 0) {
        Py_DECREF(e);
        warn_internal_error("inserting a cache entry");
        return MISS_EAGER;
    }
    int r = try_entry(e, fv, tc, false, result, NULL);
    if (r < 0)
        warn_internal_error("running a new entry");
    else if (r == 0)
        report_self_mismatch(cc, e, fv, tc);
    Py_DECREF(e);
    return r == 1 ? MISS_RAN : MISS_EAGER;
}

/*
 * Handle a miss on cf: translate a new entry and run it, or decide the frame
 * runs eagerly.  MISS_RAN sets *result; MISS_EAGER means "evaluate the
 * original frame"; MISS_ERROR propagates an exception the program must see
 * (KeyboardInterrupt and the like).
 */
static MissOutcome handle_miss(CodeCache *cc, CacheFrame *cf, const FrameView *fv,
                               PyObject *func, ThreadCapture *tc, PlanOutcome *result)
{
    if (!frame_worth_compiling(cc, cf, fv, tc)) {
        cc->tensorless_calls++;
        return MISS_EAGER;
    }
    cf->misses++;
    capture_counters(tc)->misses++;
    bool first = PyList_GET_SIZE(cf->entries) == 0;
    MissReport mr;
    MissOutcome out = miss_decide(cc, cf, fv, tc, &mr);
    if (out != MISS_COMPILE)
        return out;
    CacheEntry *e = miss_new_entry(cc, cf, tc);
    if (e == NULL) {
        miss_report_clear(&mr);
        return MISS_EAGER;
    }
    events_compile_start(cc, e);
    PyObject *reason = NULL;
    bool permanent = false;
    uint64_t t0 = engine_now_ns();
    tc->in_engine++;
    TranslateRequest rq = {
        .fv = fv, .func = func, .backend = tc->config.backend,
        .fullgraph = tc->config.fullgraph, .dynamic = tc->config.dynamic,
        .resume_offset = cf->resume_offset, .unspec = cf->unspec, .iters = cf->iters,
        .dynamic_slots = cf->dynamic, .static_only = cf->static_only, .dyn_dims = cf->dyn_dims,
    };
    TranslateStatus st = translate_frame(&rq, &e->guards, &e->plan, &reason, &permanent);
    e->backend_ns = rq.backend_ns;
    cf->static_only |= rq.made_static;
    cf->dynamic &= ~rq.made_static;
    tc->in_engine--;
    e->compile_ns = engine_now_ns() - t0;
    if ((cf->just_marked & cf->static_only) && cf->last_failure != NULL)
        note_kept_static(cf);
    cf->just_marked = 0;

    if (st == TRANSLATE_ERROR && !PyErr_ExceptionMatches(PyExc_Exception)) {
        /* Exceptions that are not ours to swallow reach the program. */
        events_compile_end(cc, e, "error");
        Py_DECREF(e);
        miss_report_clear(&mr);
        return MISS_ERROR;
    }
    if (st == TRANSLATE_ERROR) {
        reason = warn_exception_reason();   /* clears the exception */
        st = TRANSLATE_UNSUPPORTED;
        permanent = false;
    }
    if (st == TRANSLATE_UNSUPPORTED)
        out = miss_unsupported(cc, cf, tc, e, reason, permanent, first);
    else
        out = miss_compiled(cc, cf, fv, tc, e, &mr, result);
    miss_report_clear(&mr);
    return out;
}

/* ---- fullgraph ---- */

/* Raise dynscope.Unsupported naming the reason and the user's file:line
   (the innermost frame of user_stack, else the code's first line). */
static void raise_unsupported(CodeCache *cc, PyObject *reason, PyObject *user_stack)
{
    PyObject *file = cc->code->co_filename;
    long line = cc->code->co_firstlineno;
    if (user_stack != NULL && PyList_Check(user_stack) && PyList_GET_SIZE(user_stack) > 0) {
        PyObject *last = PyList_GET_ITEM(user_stack, PyList_GET_SIZE(user_stack) - 1);
        if (PyTuple_Check(last) && PyTuple_GET_SIZE(last) >= 2) {
            file = PyTuple_GET_ITEM(last, 0);
            line = PyLong_AsLong(PyTuple_GET_ITEM(last, 1));
            if (line == -1 && PyErr_Occurred()) {
                PyErr_Clear();
                line = 0;
            }
        }
    }
    PyErr_Format(engine.unsupported_error, "fullgraph=True: graph break in %U: %S at %U:%ld",
                 cc->code->co_qualname, reason ? reason : Py_None, file, line);
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
                           PyObject *func, ThreadCapture *tc)
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
#define UNCOUNT() do { if (counted) { frame_recursion_leave(ts); counted = false; } } while (0)
    for (;;) {
        PlanOutcome out = {0};
        int hit_index = -1;
        uint64_t guard_ticks = 0;   /* this call's guard time, all entries tried */
        int r = run_cached(cf, &fv, tc, &out, &hit_index, &guard_ticks);
        if (r == 2) {
            /* translation stopped for these inputs before: run the rest of
               the frame without capture, as on the miss that found it */
            capture_counters(tc)->hits++;
            capture_counters(tc)->eager_hits++;
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
                m = handle_miss(cc, cf, &fv, func, tc, &out);
            if (m == MISS_ERROR) {
                result = NULL;
                break;
            }
            if (m == MISS_EAGER) {
                UNCOUNT();
                result = run_rest_eagerly(ts, f, cf, &state, &evaluated);
                break;
            }
        }
        ran_graph = ran_graph || out.ran_graph;
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
 * the frame; 0 when no entry passes or the one that passes needs the frame
 * (an eager step, a resume, a stopped translation) -- nothing was run or
 * counted, the caller makes the frame; -1 on an internal error.
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
    return r == 2 ? 0 : r;
}

/* See engine.h. */
PyObject *capture_call_direct(PyObject *func, PyObject *const *args, size_t nargsf,
                              PyObject *kwnames, PyObject *backend, bool *done)
{
    ThreadCapture *tc = &thread_capture;
    *done = false;
    if (kwnames != NULL || !PyFunction_Check(func) || tc->session != NULL || tc->in_engine
        || engine.config.stance == STANCE_FORCE_EAGER)
        return NULL;
    PyFunctionObject *fn = (PyFunctionObject *)func;
    PyCodeObject *co = (PyCodeObject *)fn->func_code;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (!call_fills_locals(co, nargs))
        return NULL;
    CodeCache *cc = cache_peek(co);
    CacheFrame *cf = cc != NULL && cc->classified && cc->skip_reason == NULL
                     ? start_frame(cc) : NULL;
    if (cf == NULL)
        return NULL;

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
    if (r == 0)
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

static PyObject *capture_frame(PyThreadState *ts, EvalFrame *f, ThreadCapture *tc)
{
    if (engine.config.stance == STANCE_FORCE_EAGER)
        return frame_eval_default(ts, f, 0);
    PyCodeObject *co = frame_code(f);
    CodeCache *cc = lookup_code_cache(co, tc);
    if (cc == NULL || cc->skip_reason != NULL || frame_func(f) == NULL) {
        if (cc != NULL && cc->skip_reason != NULL)
            cc->skip_calls++;                  /* explain reports them by rule */
        if (cc != NULL && cc->skip_reported)   /* not the library code skipped by path */
            trace_frame_eval(cc->code_id, TRACE_FRAME_SKIP, -1, 0);
        return frame_eval_default(ts, f, 0);
    }
    capture_counters(tc)->frames_seen++;
    return run_chain(ts, f, cc, frame_func(f), tc);
}

static PyObject *eval_frame(PyThreadState *ts, EvalFrame *f, int throwflag)
{
    ThreadCapture *tc = &thread_capture;
    /* One thread-local lookup per frame: hide the address from constant
       propagation, which would otherwise redo the lookup (a call into the
       dynamic linker) in each helper tc is passed to. */
    __asm__("" : "+r"(tc));
    if (tc->depth == 0 || tc->in_engine || throwflag || frame_is_generator(f)
        || !frame_at_start(f))
        return frame_eval_default(ts, f, throwflag);
    return capture_frame(ts, f, tc);
}
