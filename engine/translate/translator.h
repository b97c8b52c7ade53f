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

typedef enum TranslateStatus {
    TRANSLATE_OK = 0,          /* guards and plan filled in */
    TRANSLATE_UNSUPPORTED = 1, /* *reason set; run the frame eagerly */
    TRANSLATE_ERROR = -1,      /* exception set */
} TranslateStatus;

/*
 * What the capture layer asks the translator for: the frame, its key in
 * the cache, and the region's choices -- so that the translator never
 * names the cache's structs nor reads the thread's capture state.  The
 * capture layer fills it from its CacheFrame and CaptureConfig, and applies
 * the out fields after.
 */
typedef struct TranslateRequest {
    const FrameView *fv;      /* borrowed: the frame's inputs */
    PyObject *func;           /* borrowed: the frame's function */
    PyObject *backend;        /* borrowed: called once if a graph results */
    bool fullgraph;           /* optimize(fullgraph=): a break raises Unsupported */
    int dynamic;              /* optimize(dynamic=): -1 None (automatic), 0, 1 */
    int resume_offset;        /* code-unit index; 0 = function start */
    uint64_t unspec, iters;   /* a resume frame's slot masks (LiveState) */
    uint64_t dynamic_slots;   /* automatic dynamic: slots whose numbers are graph inputs */
    uint64_t static_only;     /* slots that stay specialized */
    const uint32_t *dyn_dims; /* borrowed: LIVE_MAX_SLOTS masks of dynamic tensor dims */
    /* Automatic dynamic for tensors reached any other way (attributes,
       items, closures, globals: tr_source_dynamic_dims): dict, source str ->
       [shape at the last translation (tuple), dynamic dims (int mask),
       kept static (bool)], which each translation reads and updates.
       Borrowed; NULL: only the slots are automatic. */
    PyObject *source_sizes;
    /* Sizes (from 2 on) that tensor dimensions had in the entries this miss
       failed, where the inputs now have another size: a tensor source that
       source_sizes has not seen yet takes a dimension of one of these sizes
       as dynamic (a KV cache first read when the prompt's length changed
       carries that length).  Borrowed; nchanged_sizes may be 0. */
    const Py_ssize_t *changed_sizes;
    int nchanged_sizes;
    bool static_module_state; /* parameters and buffers keep static sizes
                                 (config.force_parameter_static_shapes) */
    /* out */
    PyObject *now_dynamic;    /* new list or NULL: "src.size(d)" of each source
                                 dimension this translation made dynamic */
    PyObject *kept_static;    /* new list or NULL: of those, the ones it needed
                                 as constants after all (the static translation
                                 was kept; source_sizes marks them static) */
    uint64_t made_static;     /* slots this translation needed as constants: the
                                 caller moves them from dynamic_slots to static_only */
    /* Where the compile's time went (out; docs/sql.md compiles.*_ns): the
       kept attempt's backend, GraphModule making and the rest of its
       finish (the plan), guard building over every attempt, and how many
       attempts there were (retries: try blocks, generators, probes). */
    uint64_t backend_ns;
    uint64_t graph_ns, plan_ns, guard_ticks;
    int attempts;
    PyObject *failed_gm;      /* new reference or NULL: the graph the backend
                                 raised on (BackendCompilerFailed), for the
                                 recording; the caller releases it */
} TranslateRequest;

/*
 * Translate rq's frame (function start when rq->resume_offset == 0, else
 * a resume frame whose locals and stack are in rq->fv, keyed by rq's masks)
 * into guards `gs` and plan `plan`.  rq->backend is called once if a graph
 * results.  On TRANSLATE_UNSUPPORTED (function starts only: a resume frame
 * always gets a plan, if need be one that deopts at once), *reason is a new
 * str and *permanent says whether no input could ever succeed.
 */
TranslateStatus translate_frame(TranslateRequest *rq, GuardSet *gs, Plan *plan,
                                PyObject **reason, bool *permanent);

/*
 * Escape hatches (tr_hatches.c): code objects a user's mark keeps out of
 * capture.  hatch_code_rule gives the rule (borrowed str, e.g.
 * "dynscope.disable") that keeps co's frames out, with *recursive when
 * everything those frames call runs without capture too; NULL when none.
 * hatch_generation grows with each new code mark: a code classified at an
 * older generation is classified again.  hatch_init adds _C.hatch_mark and
 * _C.hatch_marks.  GIL.
 */
extern uint32_t hatch_generation;
PyObject *hatch_code_rule(PyCodeObject *co, bool *recursive);
int hatch_init(PyObject *module);

#endif /* DYNSCOPE_TRANSLATOR_H */
