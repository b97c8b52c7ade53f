/*
 * miss.c -- the miss path of the capture room (DESIGN.md 3.1-3.5): when no
 * entry of a CacheFrame passes its guards, decide whether the frame is worth
 * compiling (stance, cache limit, nothing in reach to capture), learn what
 * changed (the first failing guard of each entry, automatic dynamic marks,
 * the nearest entry for the recompile report), ask the translator for a new
 * entry with a TranslateRequest, keep or skip it, and run it; fullgraph's
 * Unsupported.  hook.c calls miss_handle; contract: capture_int.h.
 */
#include "../base/pycompat.h"
#include "capture_int.h"
#include "../base/tensorlib.h"

#include <limits.h>
#include <string.h>

/* A stopped translation is kept as an entry (eager_reason) only with 1 to
   this many guards: none means the translator could not guard what stopped
   it (or an error).  Hundreds are kept: checking them costs microseconds,
   and the alternative is translating again, which read all of them and
   stopped the same way (milliseconds: a model's forward inlined up to a
   .item() deep inside), on each of the frame's first cache_size_limit
   calls -- XLM's forward ran at 5x eager's time in the sweep's first calls
   with a bound of 64.  Other attempts count toward the limit as before. */
#define EAGER_ENTRY_MAX_GUARDS 4096

static void raise_unsupported(CodeCache *cc, PyObject *reason, PyObject *user_stack);

/* The dimensions where `seen` (borrowed, or NULL), failing TENSOR_MATCH
   tm, has another size -- same type, dtype and rank -- of at least
   min_now.  Cannot fail. */
static uint32_t changed_dims(const TensorMeta *tm, PyObject *seen, Py_ssize_t min_now)
{
    if (seen == NULL || tm == NULL || Py_TYPE(seen) != tm->type)
        return 0;
    PyObject *shape = PyObject_GetAttrString(seen, "shape");
    PyObject *dtype = shape ? PyObject_GetAttrString(seen, "dtype") : NULL;
    int same_dtype = dtype ? PyObject_RichCompareBool(dtype, tm->dtype, Py_EQ) : -1;
    uint32_t dims = 0;
    if (same_dtype == 1 && PyTuple_Check(shape) && PyTuple_GET_SIZE(shape) == tm->ndim) {
        for (int d = 0; d < tm->ndim && d < 32; d++) {
            Py_ssize_t now = PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, d));
            if (now >= min_now && tm->shape[d] >= 0 && now != tm->shape[d])
                dims |= 1u << d;
        }
    }
    Py_XDECREF(shape);
    Py_XDECREF(dtype);
    PyErr_Clear();
    return dims;
}

/* mark_dynamic for a TENSOR_MATCH that `seen` (the value, borrowed, or
   NULL) failed: the dimensions whose size changed to one from 2 on (as 0
   and 1 broadcast apart; a size of 1 before does not keep one from 2 on
   static: a cache's length 1, then 2, then 3) become dynamic for slot
   `slot` (CacheFrame.dyn_dims).  Returns "L['x'].size(0)" (new str) when a
   dimension was newly marked, else NULL. */
static PyObject *mark_dynamic_dims(CacheFrame *cf, CacheEntry *e, const Guard *g, PyObject *seen,
                                   uint64_t bit, Py_ssize_t slot)
{
    if (cf->static_only & bit)
        return NULL;
    uint32_t dims = changed_dims(g->tensor, seen, 2);
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

/* The recompile's reason names the sizes of other sources (attributes,
   items, closures, globals) that this translation made dynamic, and those
   it needed as constants after all: "; L['c'].k.size(2) is now dynamic (a
   graph input)".  now_dynamic, kept_static: borrowed lists of str or NULL.
   Cannot fail (a note it cannot make is left out). */
static void note_sources(CacheFrame *cf, PyObject *now_dynamic, PyObject *kept_static)
{
    if (cf->last_failure == NULL || now_dynamic == NULL)
        return;
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);         /* the translation's error stays its */
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(now_dynamic); i++) {
        PyObject *dim = PyList_GET_ITEM(now_dynamic, i);
        PyObject *marked = PyUnicode_FromFormat("%U is now dynamic", dim);
        Py_ssize_t said = marked ? PyUnicode_Find(cf->last_failure, marked, 0, PY_SSIZE_T_MAX, 1) : -2;
        Py_XDECREF(marked);
        if (said == -2)
            PyErr_Clear();
        if (said >= 0)
            continue;                  /* the slot's own mark said it already */
        bool kept = false;
        for (Py_ssize_t j = 0; kept_static != NULL && j < PyList_GET_SIZE(kept_static); j++) {
            PyObject *src = PyList_GET_ITEM(kept_static, j);
            Py_ssize_t n = PyUnicode_GET_LENGTH(src);
            kept = kept || (PyUnicode_Tailmatch(dim, src, 0, n, -1) == 1
                            && PyUnicode_READ_CHAR(dim, n) == '.');
        }
        PyObject *r = PyUnicode_FromFormat("%U; %U %s", cf->last_failure, dim,
                                           kept ? "stays static (the code needs its value: a "
                                                  "branch, a loop count)"
                                                : "is now dynamic (a graph input)");
        if (r == NULL) {
            PyErr_Clear();
            break;
        }
        Py_SETREF(cf->last_failure, r);
    }
    PyErr_Restore(et, ev, tb);
}

/*
 * What a miss learns about the frame's older entries, for the recompile
 * report: the first failing guard of each entry, and the entry nearest to
 * the new inputs with every guard of it that fails.  Strong or NULL.
 */
#define MISS_CHANGED_SIZES 8

typedef struct MissReport {
    PyObject *failures;  /* list of GuardFailureInfo (guards.h) */
    PyObject *nearest;   /* dict {"entry", "failing", "guards", "capture_ns"}
                            (docs/events.md, recompile) or NULL */
    /* TranslateRequest.changed_sizes: the first distinct ones */
    Py_ssize_t changed_sizes[MISS_CHANGED_SIZES];
    int nchanged_sizes;
} MissReport;

/* The sizes from 2 on that g, a failing TENSOR_MATCH of an entry, expected
   where `seen` (borrowed or NULL) now has another (a prompt's 7 where a
   decoding step has 1): into mr->changed_sizes.
   Cannot fail. */
static void note_changed_sizes(MissReport *mr, const Guard *g, PyObject *seen)
{
    uint32_t dims = changed_dims(g->tensor, seen, 0);
    for (int d = 0; dims != 0 && d < 32; d++) {
        if (!(dims & (1u << d)) || g->tensor->shape[d] < 2)
            continue;
        bool known = false;
        for (int i = 0; i < mr->nchanged_sizes; i++)
            known = known || mr->changed_sizes[i] == g->tensor->shape[d];
        if (!known && mr->nchanged_sizes < MISS_CHANGED_SIZES)
            mr->changed_sizes[mr->nchanged_sizes++] = g->tensor->shape[d];
    }
}

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
            int failing[GUARD_DIFF_MAX];
            int n = guardset_failing(&e->guards, fv, vals, tc->config.backend, failing,
                                     GUARD_DIFF_MAX);
            for (int j = 0; j < n && j < GUARD_DIFF_MAX && tc->config.dynamic < 0; j++) {
                const Guard *g = &e->guards.guards[failing[j]];
                if (g->kind == GUARD_TENSOR_MATCH)
                    note_changed_sizes(mr, g, guardset_value(&e->guards, g->acc, fv, vals));
            }
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

/* Entries and failed translations over all of cc's frames, resume frames
   included (config.accumulated_cache_size_limit).  Cannot fail. */
static Py_ssize_t accumulated_attempts(CodeCache *cc)
{
    Py_ssize_t n = 0;
    for (int i = 0; i < cc->nframes; i++)
        n += PyList_GET_SIZE(cc->frames[i]->entries) + cc->frames[i]->failed;
    return n;
}

/* The cache-limit event's reason says which limit: the frame's own, or
   this one.  Cannot fail (the reason stays as it was). */
static void note_accumulated_limit(CacheFrame *cf)
{
    PyObject *r = PyUnicode_FromFormat("config.accumulated_cache_size_limit (%d) reached over "
                                       "all of the function's frames; last failing guard: %S",
                                       engine.config.accumulated_cache_size_limit,
                                       cf->last_failure ? cf->last_failure : Py_None);
    if (r == NULL)
        PyErr_Clear();
    else
        Py_XSETREF(cf->last_failure, r);
}

/* CacheLimitError (config.fail_on_cache_limit): the frame, the limit, its
   last failing guard and where the translation made that guard (the
   newest entry's failure, GuardFailureInfo).  Always returns with the
   exception set. */
static void raise_cache_limit(CodeCache *cc, CacheFrame *cf, PyObject *failures, bool over_all)
{
    PyObject *last = failures != NULL && PyList_GET_SIZE(failures) > 0
                     ? PyList_GET_ITEM(failures, 0) : NULL;       /* borrowed */
    PyObject *file = last ? PyTuple_GET_ITEM(last, 4) : Py_None;
    PyObject *line = last ? PyTuple_GET_ITEM(last, 5) : Py_None;
    PyObject *made = file != Py_None ? PyUnicode_FromFormat("; the guard was made at %S:%S", file, line)
                                     : PyUnicode_FromString("");
    if (made == NULL)
        return;
    PyErr_Format(engine.cache_limit_error,
                 "dynscope: %U (%U:%d) hit %s (%d) at frame %d (config.fail_on_cache_limit); "
                 "last failing guard: %S%U",
                 cc->code->co_qualname, cc->code->co_filename, cc->code->co_firstlineno,
                 over_all ? "config.accumulated_cache_size_limit" : "config.cache_size_limit",
                 over_all ? engine.config.accumulated_cache_size_limit : engine.config.cache_size_limit,
                 cf->frame_id, cf->last_failure ? cf->last_failure : Py_None, made);
    Py_DECREF(made);
}

/*
 * Before compiling on a miss: note why the older entries failed (into *mr
 * and cf->last_failure) and decide from the stance and the cache limit
 * whether to compile at all.  MISS_COMPILE: go on (the caller clears *mr);
 * MISS_EAGER / MISS_ERROR as miss_handle (*mr is empty).
 */
static MissOutcome miss_decide(CodeCache *cc, CacheFrame *cf, const FrameView *fv,
                               ThreadCapture *tc, MissReport *mr)
{
    Py_ssize_t nentries = PyList_GET_SIZE(cf->entries);
    Py_ssize_t attempts = nentries + cf->failed;   /* toward the limit */
    bool over_all = accumulated_attempts(cc) >= engine.config.accumulated_cache_size_limit;
    bool at_limit = attempts >= engine.config.cache_size_limit || over_all;
    *mr = (MissReport){.failures = NULL};
    if (engine.config.stance == STANCE_EAGER_THEN_COMPILE && attempts == 0
        && cf->resume_offset == 0 && !cf->ran_eager_first) {
        cf->ran_eager_first = true;       /* compile from the second call */
        return MISS_EAGER;
    }
    if (cf->limit_warned && at_limit && !engine.config.fail_on_cache_limit)
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
    else if (at_limit && engine.config.fail_on_cache_limit) {
        raise_cache_limit(cc, cf, mr->failures, over_all);
        out = MISS_ERROR;
    }
    else if (at_limit) {
        if (over_all && !cf->limit_warned)
            note_accumulated_limit(cf);
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
 * limit.  first: the frame had no entry when the miss began.  failed_gm
 * (borrowed, or NULL): the graph the backend raised on, recorded after the
 * compile's end.  Steals e.  MISS_EAGER, or MISS_ERROR under fullgraph.
 */
static MissOutcome miss_unsupported(CodeCache *cc, CacheFrame *cf, ThreadCapture *tc,
                                    CacheEntry *e, PyObject *reason, bool permanent,
                                    bool first, PyObject *failed_gm)
{
    events_compile_end(cc, e, "skipped");
    events_failed_graph(cc, e, failed_gm);      /* the graph the backend raised on, if any */
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
        hook_mark_skipped(cc, reason, true);
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

/* Whether another thread existed when the latest translation began or
   ended (it may have run, and ended, in between).  GIL protected: a
   translation starts no other (in_engine). */
static bool translated_beside_threads;

/* A new entry that fails its own guards on the inputs it was made from:
   report which guard, once per guard text (what to mend).  With other
   threads alive during the translation, the inputs may have changed under
   it: the entry is as safe either way (it does not match, the frame runs
   uncaptured), and that is no translator bug to report.  Cannot fail. */
static void report_self_mismatch(CodeCache *cc, CacheEntry *e, const FrameView *fv,
                                 ThreadCapture *tc)
{
    if (translated_beside_threads || other_threads_exist())
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
        uint64_t ev0 = engine_phase_ns();
        events_recompile(cc, cf, e, cf->last_failure, mr->failures, mr->nearest);
        e->events_ns += engine_phase_ns() - ev0;
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
    int r = hook_try_new_entry(e, fv, tc, result);
    if (r < 0)
        warn_internal_error("running a new entry");
    else if (r == 0)
        report_self_mismatch(cc, e, fv, tc);
    Py_DECREF(e);
    return r == 1 ? MISS_RAN : MISS_EAGER;
}

/* e's compile time by phase, from what the translation measured (the
   parts CacheEntry.compile_ns splits into; the trace is what is left). */
static void compile_phases(CacheEntry *e, const TranslateRequest *rq)
{
    e->backend_ns = rq->backend_ns;
    e->graph_ns = rq->graph_ns;
    e->plan_ns = rq->plan_ns;
    e->guards_ns = engine_ticks_to_ns(rq->guard_ticks);
    e->attempts = rq->attempts;
    uint64_t parts = e->backend_ns + e->graph_ns + e->plan_ns + e->guards_ns;
    e->trace_ns = e->compile_ns > parts ? e->compile_ns - parts : 0;
}

/* (contract: capture_int.h) */
MissOutcome miss_handle(CodeCache *cc, CacheFrame *cf, const FrameView *fv,
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
    cost_translations++;               /* a timed call that translates is dropped (cost.c) */
    uint64_t ev0 = engine_phase_ns();
    e->shown_as = events_wrapper_name(func, cc->code);     /* NULL: not a wrapper */
    events_compile_start(cc, e);
    e->events_ns = engine_phase_ns() - ev0;
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
    /* automatic dynamic learns sizes in it; dynamic=True notes there what
       had to stay static (and int attributes) */
    if (cf->source_sizes == NULL && tc->config.dynamic != 0
        && (cf->source_sizes = PyDict_New()) == NULL)
        PyErr_Clear();                 /* the other sources stay static */
    /* strong for the translation: the program's code it runs may let
       another thread reset the cache, which drops the frame's dict */
    PyObject *source_sizes = Py_XNewRef(cf->source_sizes);
    rq.source_sizes = source_sizes;
    rq.changed_sizes = mr.changed_sizes;
    rq.nchanged_sizes = mr.nchanged_sizes;
    rq.static_module_state = engine.config.force_parameter_static_shapes;
    translated_beside_threads = other_threads_exist();
    TranslateStatus st = translate_frame(&rq, &e->guards, &e->plan, &reason, &permanent);
    translated_beside_threads = translated_beside_threads || other_threads_exist();
    cf->static_only |= rq.made_static;
    cf->dynamic &= ~rq.made_static;
    tc->in_engine--;
    e->compile_ns = engine_now_ns() - t0;
    compile_phases(e, &rq);
    if ((cf->just_marked & cf->static_only) && cf->last_failure != NULL)
        note_kept_static(cf);
    cf->just_marked = 0;
    note_sources(cf, rq.now_dynamic, rq.kept_static);
    Py_XDECREF(rq.now_dynamic);
    Py_XDECREF(rq.kept_static);
    Py_XDECREF(source_sizes);

    if (st == TRANSLATE_ERROR && !PyErr_Occurred()) {
        /* a translator path that failed without an exception is the
           engine's bug, never the program's error (returning NULL would
           be a SystemError in its code): logged once, counted, and the
           frame runs without capture */
        warn_internal_error("a translation failed without an exception");
        Py_XSETREF(reason, PyUnicode_FromString("internal error: a translation failed without "
                                                "an exception"));
        if (reason == NULL)
            PyErr_Clear();
        st = TRANSLATE_UNSUPPORTED;
        permanent = false;
    }
    if (st == TRANSLATE_ERROR && !PyErr_ExceptionMatches(PyExc_Exception)) {
        /* Exceptions that are not ours to swallow reach the program. */
        events_compile_end(cc, e, "error");
        Py_DECREF(e);
        Py_XDECREF(rq.failed_gm);
        miss_report_clear(&mr);
        return MISS_ERROR;
    }
    if (st == TRANSLATE_ERROR) {
        reason = warn_exception_reason();   /* clears the exception */
        st = TRANSLATE_UNSUPPORTED;
        permanent = false;
    }
    if (st == TRANSLATE_UNSUPPORTED)
        out = miss_unsupported(cc, cf, tc, e, reason, permanent, first, rq.failed_gm);
    else
        out = miss_compiled(cc, cf, fv, tc, e, &mr, result);
    Py_XDECREF(rq.failed_gm);
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

