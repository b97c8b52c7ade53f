/*
 * cache.c -- the per-code-object cache, stored in the code object's co_extra
 * slot (DESIGN.md 3.2), and the CacheEntry type users see through
 * dynscope.cache_entries().
 *
 * A CodeCache holds one CacheFrame per resume offset (0 = function start);
 * a CacheFrame holds its entries in lookup order.  Every live CodeCache is
 * on a doubly linked list so reset() can reach them all.
 *
 * Invariants (GIL protected):
 *   - A CodeCache and its CacheFrames are freed only by CPython when the
 *     code object dies (code_cache_free); until then pointers to them are
 *     stable.
 *   - reset() never mutates an entries list in place: it swaps in a new
 *     one, so a thread iterating the old list (holding a reference) is safe.
 */
#include "cache.h"
#include "../base/pycompat.h"

#include <string.h>


PyTypeObject *CacheEntryType;

/* The cache's registry (GIL protected). */
static struct {
    Py_ssize_t extra_index;       /* co_extra slot of our CodeCache, -1 before init */
    CodeCache *all_caches;        /* head of the list of live caches (each is
                                     owned by its code object's co_extra) */
    long long next_code_id;       /* process-unique code ids */
    int next_frame_id;            /* frame ids, restarted by reset() */
} registry = {.extra_index = -1};

/* ---- CodeCache lifetime ---- */

static void cache_frame_free(CacheFrame *cf)
{
    Py_CLEAR(cf->entries);
    Py_CLEAR(cf->last_failure);
    Py_CLEAR(cf->source_sizes);
    PyMem_Free(cf);
}

static void cache_free_frames(CodeCache *cc)
{
    for (int i = 0; i < cc->nframes; i++)
        cache_frame_free(cc->frames[i]);
    PyMem_Free(cc->frames);
    Py_CLEAR(cc->skip_reason);
    PyMem_Free(cc);
}

/* co_extra free function: the code object is being destroyed. */
static void code_cache_free(void *p)
{
    CodeCache *cc = p;
    if (cc == NULL)
        return;
    if (cc->prev)
        cc->prev->next = cc->next;
    else
        registry.all_caches = cc->next;
    if (cc->next)
        cc->next->prev = cc->prev;
    cache_free_frames(cc);
}

CodeCache *cache_new_detached(PyCodeObject *code)
{
    CodeCache *cc = PyMem_Calloc(1, sizeof(CodeCache));
    if (cc == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    cc->code = code;
    cc->code_id = registry.next_code_id++;
    return cc;
}

void cache_free_detached(CodeCache *cc)
{
    if (cc != NULL)
        cache_free_frames(cc);
}

int cache_init(void)
{
    registry.extra_index = code_extra_index_request(code_cache_free);
    if (registry.extra_index < 0) {
        PyErr_SetString(PyExc_RuntimeError, "dynscope: no free co_extra slot");
        return -1;
    }
    return 0;
}

CodeCache *cache_peek(PyCodeObject *code)
{
    void *p = NULL;
    if (code_extra_get((PyObject *)code, registry.extra_index, &p) < 0) {
        PyErr_Clear();
        return NULL;
    }
    return p;
}

CodeCache *cache_for_code(PyCodeObject *code)
{
    CodeCache *cc = cache_peek(code);
    if (cc != NULL)
        return cc;
    cc = PyMem_Calloc(1, sizeof(CodeCache));
    if (cc == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    cc->code = code;
    cc->code_id = registry.next_code_id++;
    if (code_extra_set((PyObject *)code, registry.extra_index, cc) < 0) {
        PyMem_Free(cc);
        return NULL;
    }
    cc->next = registry.all_caches;
    if (registry.all_caches)
        registry.all_caches->prev = cc;
    registry.all_caches = cc;
    return cc;
}

CacheFrame *cache_frame(CodeCache *cc, int resume_offset, uint64_t unspec, uint64_t iters)
{
    for (int i = 0; i < cc->nframes; i++) {
        CacheFrame *cf = cc->frames[i];
        if (cf->resume_offset == resume_offset && cf->unspec == unspec && cf->iters == iters)
            return cf;
    }
    CacheFrame *cf = PyMem_Calloc(1, sizeof(CacheFrame));
    CacheFrame **frames = PyMem_Realloc(cc->frames, sizeof(CacheFrame *) * (size_t)(cc->nframes + 1));
    if (cf == NULL || frames == NULL) {
        PyMem_Free(cf);
        if (frames)
            cc->frames = frames;
        PyErr_NoMemory();
        return NULL;
    }
    cc->frames = frames;
    cf->resume_offset = resume_offset;
    cf->unspec = unspec;
    cf->iters = iters;
    cf->frame_id = -1;
    cf->entries = PyList_New(0);
    if (cf->entries == NULL) {
        PyMem_Free(cf);
        return NULL;
    }
    PyObject_GC_UnTrack(cf->entries);
    cc->frames[cc->nframes++] = cf;
    return cf;
}

void cache_frame_assign_id(CacheFrame *cf, int *next_id)
{
    if (cf->frame_id >= 0)
        return;
    cf->frame_id = next_id ? (*next_id)++ : registry.next_frame_id++;
}

void cache_reset_all(void (*on_reset)(void))
{
    /* Old entry lists are collected first and released at the end: releasing
       an entry can free objects whose finalizers run Python, and that must
       not happen while we walk the list of caches. */
    /* No cyclic GC during the walk: an allocation below could collect dead
       code objects, and their co_extra free function would unlink and free
       the caches being walked. */
    int gc_was_enabled = PyGC_Disable();
    PyObject *graveyard = PyList_New(0);
    for (CodeCache *cc = registry.all_caches; cc != NULL; cc = cc->next) {
        for (int i = 0; i < cc->nframes; i++) {
            CacheFrame *cf = cc->frames[i];
            PyObject *fresh = PyList_New(0);
            if (fresh == NULL) {
                PyErr_Clear();
                continue;
            }
            PyObject_GC_UnTrack(fresh);
            PyObject *old = cf->entries;
            cf->entries = fresh;
            if (graveyard == NULL || PyList_Append(graveyard, old) < 0)
                PyErr_Clear();
            Py_DECREF(old);   /* graveyard holds it, unless appending failed */
            cf->frame_id = -1;
            cf->ncompiles = 0;
            cf->misses = 0;
            cf->direct_framed = cf->direct_skips = 0;
            cf->limit_warned = false;
            cf->limit_calls = cf->limit_samples = cf->limit_ticks = cf->limit_snap = 0;
            cf->ran_eager_first = false;
            cf->failed = 0;
            cf->dynamic = cf->static_only = cf->just_marked = 0;   /* learnt again */
            memset(cf->dyn_dims, 0, sizeof(cf->dyn_dims));
            if (cf->last_failure) {
                if (graveyard == NULL || PyList_Append(graveyard, cf->last_failure) < 0)
                    PyErr_Clear();
                Py_CLEAR(cf->last_failure);
            }
            if (cf->source_sizes) {
                if (graveyard == NULL || PyList_Append(graveyard, cf->source_sizes) < 0)
                    PyErr_Clear();
                Py_CLEAR(cf->source_sizes);
            }
        }
        if (cc->skip_reason) {
            if (graveyard == NULL || PyList_Append(graveyard, cc->skip_reason) < 0)
                PyErr_Clear();
            Py_CLEAR(cc->skip_reason);
        }
        cc->classified_at = 0;
        cc->skip_callees = false;
    }
    registry.next_frame_id = 0;
    if (gc_was_enabled)
        PyGC_Enable();
    if (on_reset != NULL)
        on_reset();
    Py_XDECREF(graveyard);
}

void cache_for_each_entry(void (*fn)(CodeCache *, CacheEntry *), bool only_changed)
{
    for (CodeCache *cc = registry.all_caches; cc != NULL; cc = cc->next) {
        for (int i = 0; i < cc->nframes; i++) {
            PyObject *entries = cc->frames[i]->entries;
            for (Py_ssize_t j = 0; j < PyList_GET_SIZE(entries); j++) {
                CacheEntry *e = (CacheEntry *)PyList_GET_ITEM(entries, j);
                if (only_changed && e->hits == e->snap_hits)
                    continue;
                e->snap_hits = e->hits;
                fn(cc, e);
            }
        }
    }
}

void cache_for_each_limited_frame(void (*fn)(CodeCache *, CacheFrame *))
{
    for (CodeCache *cc = registry.all_caches; cc != NULL; cc = cc->next) {
        for (int i = 0; i < cc->nframes; i++) {
            CacheFrame *cf = cc->frames[i];
            if (cf->limit_calls == cf->limit_snap)
                continue;
            cf->limit_snap = cf->limit_calls;
            fn(cc, cf);
        }
    }
}

PyObject *cache_entries_list(CodeCache *cc)
{
    PyObject *out = PyList_New(0);
    if (out == NULL)
        return NULL;
    for (int i = 0; cc != NULL && i < cc->nframes; i++) {
        PyObject *entries = cc->frames[i]->entries;
        for (Py_ssize_t j = 0; j < PyList_GET_SIZE(entries); j++) {
            if (PyList_Append(out, PyList_GET_ITEM(entries, j)) < 0) {
                Py_DECREF(out);
                return NULL;
            }
        }
    }
    return out;
}

/* ---- CacheEntry ---- */

CacheEntry *cache_entry_new(void)
{
    CacheEntry *e = PyObject_GC_New(CacheEntry, CacheEntryType);
    if (e == NULL)
        return NULL;
    guardset_init(&e->guards);
    memset(&e->plan, 0, sizeof(e->plan));
    e->code_id = -1;
    e->code_name = NULL;
    e->code_file = NULL;
    e->shown_as = NULL;
    e->code_line = 0;
    e->resume_line = 0;
    e->backend = NULL;
    e->frame_id = -1;
    e->frame_compile_id = 0;
    e->resume_offset = 0;
    e->hits = 0;
    e->snap_hits = 0;
    e->guard_ticks = 0;
    e->compile_ns = 0;
    e->backend_ns = 0;
    e->cost_samples = e->cost_run_ticks = e->cost_break_ticks = e->cost_break_graphs = 0;
    e->eager_reason = NULL;
    /* Left off the cyclic GC's lists (as its frame's entries list): an entry
       is held by its code object's co_extra, which the collector cannot
       see, so it is always reachable to it and never collectable; walking
       thousands of them in every full collection cost a program captured
       whole a fifth of its overhead (docs/conformance.md).  Freed by its
       reference count when the code dies. */
    return e;
}

static int entry_traverse(CacheEntry *e, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(e));
    Py_VISIT(e->backend);
    Py_VISIT(e->eager_reason);
    Py_VISIT(e->plan.gm);
    Py_VISIT(e->plan.compiled);
    return 0;
}

static int entry_clear(CacheEntry *e)
{
    Py_CLEAR(e->backend);
    Py_CLEAR(e->eager_reason);
    Py_CLEAR(e->code_name);
    Py_CLEAR(e->code_file);
    Py_CLEAR(e->shown_as);
    plan_clear(&e->plan);
    guardset_clear(&e->guards);
    return 0;
}

static void entry_dealloc(CacheEntry *e)
{
    PyTypeObject *tp = Py_TYPE(e);
    PyObject_GC_UnTrack(e);
    entry_clear(e);
    tp->tp_free((PyObject *)e);
    Py_DECREF(tp);
}

static PyObject *entry_get_compile_id(CacheEntry *e, void *c)
{
    (void)c;
    return PyUnicode_FromFormat("%d/%d", e->frame_id, e->frame_compile_id);
}

static PyObject *entry_get_guards(CacheEntry *e, void *c)
{
    (void)c;
    return guardset_info_list(&e->guards);
}

static PyObject *entry_get_hits(CacheEntry *e, void *c)
{
    (void)c;
    return PyLong_FromUnsignedLongLong(e->hits);
}

static PyObject *entry_get_guard_ns(CacheEntry *e, void *c)
{
    (void)c;
    return PyLong_FromUnsignedLongLong(engine_ticks_to_ns(e->guard_ticks));
}

/* The calls the hook timed, as a dict: {"samples", "run_ns", "break_ns",
   "break_graphs"}, sums over the timed calls (../capture/cost.c). */
static PyObject *entry_get_sampled_costs(CacheEntry *e, void *c)
{
    (void)c;
    return Py_BuildValue("{s:K,s:K,s:K,s:K}", "samples", (unsigned long long)e->cost_samples,
                         "run_ns", (unsigned long long)engine_ticks_to_ns(e->cost_run_ticks),
                         "break_ns", (unsigned long long)engine_ticks_to_ns(e->cost_break_ticks),
                         "break_graphs", (unsigned long long)e->cost_break_graphs);
}

void cache_entry_costs(const CacheEntry *e, CacheEntryCosts *out)
{
    memset(out, 0, sizeof(*out));
    out->samples = e->cost_samples;
    if (e->cost_samples == 0)
        return;
    /* each timed pass stands for hits / samples passes (at least itself) */
    double scale = e->hits > e->cost_samples ? (double)e->hits / (double)e->cost_samples : 1.0;
    out->run_ns = (uint64_t)((double)engine_ticks_to_ns(e->cost_run_ticks) * scale);
    out->break_ns = (uint64_t)((double)engine_ticks_to_ns(e->cost_break_ticks) * scale);
    out->break_graphs = (uint64_t)((double)e->cost_break_graphs * scale + 0.5);
}

static PyObject *entry_get_compile_ns(CacheEntry *e, void *c)
{
    (void)c;
    return PyLong_FromUnsignedLongLong(e->compile_ns);
}

static PyObject *entry_get_resume_offset(CacheEntry *e, void *c)
{
    (void)c;
    return PyLong_FromLong(e->resume_offset * 2);   /* bytes, as dis shows offsets */
}

static PyObject *entry_get_break(CacheEntry *e, void *c)
{
    (void)c;
    const BreakInfo *b = &e->plan.brk;
    if (b->kind == NULL)
        Py_RETURN_NONE;
    return Py_BuildValue("{s:s,s:O,s:i,s:O}", "kind", b->kind, "reason",
                         b->reason ? b->reason : Py_None, "offset", b->offset,
                         "user_stack", b->user_stack ? b->user_stack : Py_None);
}

static PyObject *entry_get_graph(CacheEntry *e, void *c)
{
    (void)c;
    return Py_NewRef(e->plan.gm ? e->plan.gm : Py_None);
}

PyObject *cache_entry_plan_text(CacheEntry *e)
{
    if (e->eager_reason != NULL)
        return PyUnicode_FromFormat("run without capture (translation stopped for these "
                                    "inputs: %S)", e->eager_reason);
    return plan_render(&e->plan, &e->guards);
}

static PyObject *entry_get_plan(CacheEntry *e, void *c)
{
    (void)c;
    return cache_entry_plan_text(e);
}

static PyObject *entry_get_eager_reason(CacheEntry *e, void *c)
{
    (void)c;
    return Py_NewRef(e->eager_reason ? e->eager_reason : Py_None);
}

static PyObject *entry_get_backend(CacheEntry *e, void *c)
{
    (void)c;
    return Py_NewRef(e->backend ? e->backend : Py_None);
}

static PyObject *entry_get_code(CacheEntry *e, void *c)
{
    (void)c;
    return Py_BuildValue("(OOi)", e->code_name ? e->code_name : Py_None,
                         e->code_file ? e->code_file : Py_None, e->code_line);
}

static PyObject *entry_repr(CacheEntry *e)
{
    return PyUnicode_FromFormat("<CacheEntry [%d/%d] resume_offset=%d hits=%llu guards=%d>",
                                e->frame_id, e->frame_compile_id, e->resume_offset * 2,
                                (unsigned long long)e->hits, e->guards.n);
}

static PyGetSetDef entry_getset[] = {
    {"compile_id", (getter)entry_get_compile_id, NULL, "'frame/compile', e.g. '0/1'", NULL},
    {"guards", (getter)entry_get_guards, NULL, "list of GuardInfo (kind, expr, source)", NULL},
    {"hits", (getter)entry_get_hits, NULL, "cache hits", NULL},
    {"guard_ns", (getter)entry_get_guard_ns, NULL, "total ns spent checking this entry's guards", NULL},
    {"compile_ns", (getter)entry_get_compile_ns, NULL, "ns spent translating and compiling", NULL},
    {"sampled_costs", (getter)entry_get_sampled_costs, NULL, "the calls the engine timed through this entry (while recording 1 in 64, in explain's call every one): dict of samples, run_ns (calls that began here), break_ns (time outside graphs after its break), break_graphs (graphs run after the break)", NULL},
    {"resume_offset", (getter)entry_get_resume_offset, NULL, "bytecode offset (bytes) the entry starts at (0 = function start)", NULL},
    {"graph_break", (getter)entry_get_break, NULL, "why the entry's graph ended (dict with kind, reason, offset, user_stack), or None", NULL},
    {"graph", (getter)entry_get_graph, NULL, "the GraphModule, or None when the frame has no tensor ops", NULL},
    {"plan", (getter)entry_get_plan, NULL, "what runs instead of the bytecode, as pseudo-Python", NULL},
    {"eager_reason", (getter)entry_get_eager_reason, NULL,
     "None, or why translation stopped for inputs that pass this entry's guards "
     "(such inputs run the frame without capture, not translated again)", NULL},
    {"backend", (getter)entry_get_backend, NULL, "the backend the graph was compiled with", NULL},
    {"code", (getter)entry_get_code, NULL, "(qualname, filename, firstlineno) of the entry's code", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot entry_slots[] = {
    {Py_tp_dealloc, entry_dealloc},
    {Py_tp_traverse, entry_traverse},
    {Py_tp_clear, entry_clear},
    {Py_tp_repr, entry_repr},
    {Py_tp_getset, entry_getset},
    {Py_tp_doc, "One cache entry: guards, a plan, counters.  Read-only."},
    {0, NULL},
};

static PyType_Spec entry_spec = {
    .name = "dynscope._C.CacheEntry",
    .basicsize = sizeof(CacheEntry),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = entry_slots,
};

int cache_types_init(PyObject *module)
{
    CacheEntryType = (PyTypeObject *)PyType_FromModuleAndSpec(module, &entry_spec, NULL);
    if (CacheEntryType == NULL)
        return -1;
    return PyModule_AddObjectRef(module, "CacheEntry", (PyObject *)CacheEntryType);
}
