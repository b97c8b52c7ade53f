/*
 * translate.h -- internals shared by the translator's files:
 *   translate.c  the opcode interpreter over symbolic frames;
 *   values.c     symbolic values, and turning a concrete input reached by
 *                an accessor into a value plus the guards that make it valid;
 *   tensorops.c  which calls and methods are pure tensor operations, and
 *                adding them to the graph.
 *
 * Memory: every Value is owned by its Tracer (freed with it); Value fields
 * holding PyObject * are strong.  A Value is never freed while the tracer
 * lives, so Values may be shared freely between stack slots and locals.
 *
 * Failure: functions returning int give 0 on success and -1 when tracing
 * stops.  Tracing stops either because the code does something the
 * translator does not model (tracer->reason is set, no exception) or on a
 * Python error (exception set, tracer->reason NULL).
 */
#ifndef DYNSCOPE_TRANSLATE_H
#define DYNSCOPE_TRANSLATE_H

#include "engine.h"

typedef enum VKind {
    V_NULL,      /* the NULL slot of the 3.11 calling convention */
    V_CONST,     /* a concrete object the entry is specialized on */
    V_TENSOR,    /* graph node; obj = its example value */
    V_TUPLE,     /* items */
    V_LIST,      /* items; mutable only when src < 0 (made by this frame) */
    V_DICT,      /* items = values, obj = list of keys (constants) */
    V_SLICE,     /* items[0..3) */
    V_ITER,      /* iterator over items from pos */
    V_METHOD,    /* bound method: items[0] = receiver, obj = method name (str) */
    V_OBJECT,    /* an opaque object reached by accessor src (TYPE_MATCH-guarded) */
} VKind;

typedef struct Value {
    VKind kind;
    int src;                 /* accessor index it was read from, or -1 */
    PyObject *obj;           /* strong or NULL: see VKind */
    NodeObject *node;        /* borrowed from the tracer's graph (V_TENSOR) */
    int n, cap;
    struct Value **items;    /* owned array; the Values are the tracer's */
    int pos;                 /* V_ITER */
} Value;

typedef struct Tracer {
    GuardSet *gs;            /* borrowed: the entry's guard set */
    const FrameView *fv;     /* borrowed: the concrete frame */
    GraphObject *graph;      /* strong */
    PyObject *example_inputs;/* strong: list, parallel to input_acc */
    int *input_acc;          /* owned */
    int ninputs, input_cap;
    Value **all;             /* owned: every Value made, for freeing */
    int nall, all_cap;
    Value **by_acc;          /* owned: accessor index -> Value read from it */
    int by_acc_cap;
    PyObject *reason;        /* strong: why tracing stopped, or NULL */
    bool permanent;          /* the reason is a construct, not a value */
    long steps;              /* instructions interpreted (unrolling bound) */
    int depth;               /* inlining depth */
    PyObject *backend;       /* borrowed */
} Tracer;

/* Stop tracing: set tracer->reason from a printf-style format (%U, %S, %s,
   %d as in PyUnicode_FromFormat).  Returns -1 (NULL for the _v variant). */
int tracer_unsupported(Tracer *t, bool permanent, const char *fmt, ...);

/* values.c */
Value *value_new(Tracer *t, VKind kind, PyObject *obj);   /* obj borrowed */
int value_append(Tracer *t, Value *container, Value *item);
/* The value of accessor `acc` (whose concrete object is `obj`, borrowed),
   with the guards that specialize the entry on it.  Same Value for the same
   accessor.  NULL when tracing stops. */
Value *value_from_source(Tracer *t, int acc, PyObject *obj);
/* Whether obj is a constant the graph may embed (numbers, str, bytes, None,
   Ellipsis, slices and tuples of these, numpy dtypes and scalar types). */
bool value_is_plain_constant(PyObject *obj);
/* The concrete value of a (non-tensor) Value built only from constants,
   e.g. for constant folding.  New reference, or NULL with t->reason set
   (no exception) when v holds tensors or opaque objects. */
PyObject *value_as_constant(Tracer *t, Value *v);

/* tensorops.c */
int tensorops_init(void);
/* numpy.ndarray / numpy.generic when NumPy is imported, else NULL (borrowed). */
PyTypeObject *tensor_array_type(void);
PyTypeObject *tensor_scalar_type(void);
PyTypeObject *tensor_dtype_type(void);
bool tensor_is_array(PyObject *obj);
/* Whether `fn` is a pure tensor function the graph may call. */
bool tensorops_is_pure_function(PyObject *fn);
/* Whether `name` is a pure ndarray method. */
bool tensorops_is_pure_method(PyObject *name);
/* Whether `name` is an ndarray attribute computed by a graph node ("T"). */
bool tensorops_is_node_attribute(PyObject *name);
/* Add a node calling `target` (call_function) or method `target` (call_method,
   target a str) on `args` (n Values) and kwargs (kwnames tuple, borrowed,
   naming the last values of args).  The op runs once on the example values.
   Returns a V_TENSOR value, or NULL when tracing stops. */
Value *tensorops_call(Tracer *t, NodeOp op, PyObject *target, const char *name_hint,
                      Value **args, int nargs, PyObject *kwnames);
/* operator.<name> (borrowed), e.g. "add", "getitem", "neg". */
PyObject *tensorops_operator(const char *name);

#endif /* DYNSCOPE_TRANSLATE_H */
