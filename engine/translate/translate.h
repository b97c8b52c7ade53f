/*
 * translate.h -- engine/translate/: internals shared by the translator's files
 * (the room's outward contract is translator.h):
 *   translate.c, tr_*.c  the opcode interpreter over symbolic frames (its
 *                own contract: translate_int.h);
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

#include "translator.h"
#include "../base/tensorlib.h"   /* NumPy / torch types; tensor_is_array, tensor_is_torch */

typedef enum VKind {
    V_NULL,      /* the NULL of a call's callable pair, or an unbound local */
    V_CONST,     /* a concrete object the entry is specialized on */
    V_TENSOR,    /* graph node; obj = its example value */
    V_TUPLE,     /* items */
    V_LIST,      /* items; mutable only when src < 0 (made by this frame) */
    V_DICT,      /* items = values, obj = list of keys (constants) */
    V_SLICE,     /* items[0..3) */
    V_ITER,      /* iterator over items from pos */
    V_METHOD,    /* method: items[0] = receiver, obj = method name (str); pos 1:
                    read as an attribute (x.view), so a call's arguments
                    lack the receiver, which is put first */
    V_OBJECT,    /* an opaque object reached by accessor src (TYPE_MATCH-guarded) */
    V_BOUND,     /* getattr(items[0], obj) that is a bound method: fetched again
                    when called (a call break), never guarded by identity */
    V_CELL,      /* a closure cell an inlined frame made (MAKE_CELL): items[0] is
                    its content (n == 0: empty); program_cell for the
                    stand-in of a real function's cell, which is read-only */
    V_GRADMODE,  /* torch.no_grad(), enable_grad(), set_grad_enabled(b) made for
                    a `with` (count: the mode it sets); pos == 1: the
                    __exit__ of one entered, which sets count back */
    V_BOUNDFN,   /* items[0] (a Python function, or object.__getattribute__)
                    bound to items[1]: called with it first (tr_objects.c) */
    V_SUPER,     /* super(items[0], items[1]) (tr_objects.c) */
    V_FUNC,      /* a function made while tracing (MAKE_FUNCTION): obj = its code;
                    items = [defaults (V_TUPLE), kwdefaults (V_DICT), closure
                    (V_TUPLE of V_CELL)], each a V_NULL when absent; it is
                    inlined when called and cannot leave the translation */
    V_PARTIAL,   /* functools.partial(func, *args, **keywords) made while tracing
                    (tr_objects.c): obj = the partial class; items = [func,
                    args (V_TUPLE), keywords (V_DICT of str keys)]; called as
                    func(*args, *more, **{**keywords, **more_kw}); it cannot
                    leave the translation */
    V_VMAP,      /* torch.vmap(func, in_dims, out_dims) made while tracing
                    (tr_vmap.c): items[0] = func; obj = (in_dims, out_dims,
                    randomness), constants; called, func is inlined on batched
                    tensors between functorch's level nodes; it cannot leave
                    the translation */
    V_NEWOBJ,    /* an object of a program class made while tracing: obj = the
                    class; items[0] = its attributes (a V_DICT, a deleted one's
                    item a V_NULL), items[1] = the class's value, items[2] (a
                    class deriving from dict) its mapping (tr_newobj.c) */
    V_STATECM,   /* torch.autocast(...) / inference_mode(...) made for a `with`:
                    obj = its arguments (a tuple), items = [enter, exit] (V_CONST);
                    pos == 1: the __exit__ of one entered, obj = the mode
                    entered while tracing, node = the enter node (tr_calls.c) */
    V_ABSENT,    /* an attribute found missing by a lookup that a getattr(o, n,
                    d) / hasattr(o, n) being traced made through Python code,
                    whose AttributeError would reach it straight: only ever
                    returned to it (tr_objects.c) */
    V_GEN,       /* a generator made while tracing, suspended: gen = its frame
                    (tr_generators.c); it cannot leave the translation */
    V_ZIP,       /* zip() over iterators one of which at least is a generator
                    made while tracing, or map(): items = those iterators
                    (V_ITER, V_GEN or V_ZIP), pulled in order each time an
                    item is taken, as zip and map do (tr_interp.c
                    tr_iter_next; map's function: mapfn); it cannot leave
                    the translation */
    V_EXC,       /* an exception instance made while tracing (obj; made by
                    calling a builtin exception class on constants), only
                    raised and caught by the traced code: it cannot leave
                    the translation */
    V_SET,       /* a set made while tracing ({a, b}, a set comprehension):
                    items = its members, constants, in insertion order; obj =
                    the real set of them, changed as the program changes it
                    (so it iterates in the program's order); rebuilt by adding
                    the members in order unless `merged`.  Objects compared
                    by identity are members too, in items only (`unordered`) */
} VKind;

/* A size the graph computes, as a polynomial over the frame's size
   symbols (tr_symsizes.c): c + sum of k * monomial, a monomial (sym) a
   product of 1 to SYM_DEGREE symbols -- a single symbol's is its index.
   Terms are sorted by monomial, none with k == 0. */
#define SYM_TERMS 4
#define SYM_DEGREE 3
typedef struct SymExpr {
    long long c;
    int n;
    struct { int sym; long long k; } t[SYM_TERMS];
} SymExpr;

typedef struct Value {
    VKind kind;
    int src;                 /* accessor index it was read from, or -1 */
    PyObject *obj;           /* strong or NULL: see VKind */
    NodeObject *node;        /* borrowed from the tracer's graph (V_TENSOR) */
    int n, cap;
    struct Value **items;    /* owned array; the Values are the tracer's */
    int pos;                 /* V_ITER: the next item */
    struct Value *seq;       /* V_ITER: the list, dict or tensor whose items
                                these are (item i is seq's item seq_start + i),
                                so a change to it must be seen; else NULL */
    int seq_start;
    struct Value *reversed_of; /* V_ITER made by reversed() of a list: that list
                                (its items, last first, are these; a change to
                                it while the iterator lives stops, and so does
                                carrying it across a break: tr_iter.c) */
    struct Value *srcs;      /* V_ITER made by enumerate() or zip(): a V_TUPLE
                                of one V_ITER per iterable, each at the
                                position of items[0]; else NULL */
    long count;              /* srcs of enumerate(): the count of items[0];
                                -1 for zip() */
    int came_in_slot;        /* V_ITER: 1 + the resume slot it came in as the
                                tuple of its items, or 0 */
    int in_acc;              /* V_ITER that came in a resume slot: the slot's
                                accessor (for SAME_AS guards of other slots) */
    char seq_view;           /* V_ITER over a dict seq: which of its views it
                                walks ('k', 'v', 'i'), or 0 for the keys */
    char view;               /* V_ITER standing for seq.keys() / values() / items()
                                (a dict view): 'k', 'v' or 'i'; else 0 */
    bool escapes;            /* V_ITER: the program gets it (an argument of an
                                eager call, the result): rebuilt as a real
                                iterator, never as the tuple of its items */
    bool from_generator;     /* V_ITER: what a generator expression yields, all
                                of it computed when it was made: it must be
                                consumed there and then (tr_interp.c) */
    bool made_by_iter;       /* V_ITER: iter(x) of a value that is no iterator
                                (a list, a dict view), or reversed() of a
                                tuple, range or str: the program may not get
                                it, whose rebuilt iterator would be of
                                another type than iter(x)'s (tr_rebuild.c) */
    uint32_t dyn_dims;       /* V_TENSOR, an input: the dimensions whose size is
                                dynamic (automatic dynamic: a graph value) */
    bool dynshape;           /* V_TENSOR: its shape depends on data (x[x > 0]),
                                so it is not fixed by the input guards */
    SymExpr *sym;            /* owned or NULL: a size the graph computes (an int
                                V_TENSOR), as an expression of size symbols */
    SymExpr *sdims;          /* owned or NULL: a dynshape V_TENSOR, each dimension's
                                size as an expression (those in sdims_known) */
    uint32_t sdims_known;
    bool program_cell;       /* V_CELL: stands for a cell of a real function */
    bool merged;             /* V_SET: updated from a set or frozenset, whose
                                table a set copies: its layout (and order) is
                                not that of adding its members, so it is not
                                rebuilt */
    bool unordered;          /* V_SET: its order is not known while tracing,
                                so it is not iterated: it holds objects
                                compared by identity (in items only, not in
                                obj: a set of them iterates in the order of
                                their addresses), or an undo took members
                                out of obj */
    const char *stands_for;  /* V_TUPLE / V_DICT standing for an object of
                                another type, named here: a ModuleList slice
                                (values.c), a signature's parameters
                                (mappingproxy, tr_builtins.c); never rebuilt,
                                its type unknown, or NULL */
    PyObject *tuple_type;    /* strong or NULL: a V_TUPLE that is a struct
                                sequence (a named tuple of torch's:
                                torch.return_types.topk ...): its type, what
                                type() says and what it is rebuilt as, its
                                fields read by name (tensorops_call.c) */
    bool attrs_of_newobj;    /* V_DICT: the __dict__ of a V_NEWOBJ, rebuilt
                                only as part of it (never a dict of its own) */
    struct Value *mapfn;     /* V_ZIP made by map(): the function each round's
                                items are passed to; NULL for zip() */
    bool escape_walked;      /* tr_mark_escapes went through it already (it
                                runs once tracing is over: a value shared by
                                many containers is walked once) */
    PyObject *fn_creator;    /* V_FUNC: borrowed, the function whose frame made
                                it (its globals and builtins are the new
                                function's); alive while the translation is */
    int fn_creator_src;      /* V_FUNC: fn_creator's accessor, -1 for the root's */
    struct TFrame *gen;      /* V_GEN: its frame, the tracer's (Tracer.gens) */
    PyObject *dict_keys;     /* strong or NULL: a V_OBJECT that is a dict
                                subclass instance read from a source: its keys
                                in its iteration order, once an operation
                                needed them (tr_dictsub.c, which guards them) */
    PyObject *real;          /* borrowed: a V_DICT read from a source: the dict
                                it stands for (alive while tracing: the inputs
                                hold it), for telling dicts apart (tr_effects.c) */
} Value;

/* Why tracing stopped (the kinds of DESIGN.md 3.5). */
typedef enum StopKind {
    STOP_NONE,
    STOP_UNSUPPORTED,   /* a construct the translator does not model */
    STOP_CALL,          /* a call it cannot trace */
    STOP_BRANCH,        /* a branch on a tensor-derived value */
    STOP_ESCAPE,        /* data leaves the graph: .item(), float(t), ... */
} StopKind;

struct TFrame;

/* How the root frame's interpretation ended (becomes the plan's exit). */
typedef enum EndKind { END_NONE, END_RETURN, END_CALL, END_BRANCH, END_DEOPT } EndKind;

typedef struct FrameEnd {
    EndKind kind;
    int sp;                  /* live stack depth (below the eager step's operands) */
    struct Value *retval;    /* END_RETURN */
    struct Value *callable;  /* END_CALL */
    struct Value **args;     /* owned array (END_CALL) */
    int nargs;
    PyObject *kwnames;       /* borrowed from co_consts, or NULL */
    bool push_result;
    struct Value *cond;      /* END_BRANCH */
    int branch_true, branch_false;
    int resume;              /* END_CALL: next instruction; END_DEOPT: where to enter */
    const char *kind_name;   /* of the break: "call", "data_dependent_branch", ... */
    int offset;              /* byte offset of the innermost instruction that broke */
} FrameEnd;

#define TRACER_SITE_DEPTH 16  /* inlining depth whose guard sites are cached */

/* Torch function modes a translation can have entered at once (tr_fnmode.c). */
#define MAX_FN_MODES 8

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
    int grad_mode_start;     /* torch's grad mode when tracing first changed it
                                (a `with torch.no_grad()`), -1: unchanged */
    int grad_mode_now;       /* the grad mode tracing runs ops in, -1: unchanged */
    bool strict_try;         /* stop at the root frame's first protected
                                instruction (translate.c: the second attempt) */
    bool eager_generators;   /* a generator function called is a break (the
                                retry after a generator the plan could not
                                hand to the program: translate.c) */
    bool answered_compiling; /* torch.compiler.is_compiling() and its kin were
                                answered True, as under TorchDynamo */
    bool compiling_false;    /* ... answer False instead, as eager code gets
                                (translate.c: the retry below) */
    bool predicted_raise;    /* tracing stopped on a call or read the program
                                would raise at (tr_note_predicted_raise) */
    bool gen_not_rebuilt;    /* a generator made while tracing was to leave
                                the translation (tr_rebuild.c) */
    bool stopped_in_try;     /* tracing stopped inside a try range of the root
                                frame, where its end cannot be (translate.c) */
    bool stop_unguarded;     /* tracing stopped on a value no guard covers: the
                                attempt must not be kept as an entry (hook.c) */
    long steps;              /* instructions interpreted (unrolling bound) */
    int depth;               /* inlining depth */
    PyObject *backend;       /* borrowed */
    TranslateRequest *rq;    /* borrowed: the (code, resume offset, masks) translated,
                                the region's choices, and the out fields */
    struct Value *raised;    /* a V_EXC the traced code raised and no handler
                                caught yet: the stop (reason "raises ...")
                                unwinds the inlined frames to the first that
                                catches it (tr_interp.c), or reaches the root
                                frame's call, which runs eagerly */
    StopKind stop_kind;      /* with reason: why tracing stopped */
    PyObject *stop_stack;    /* strong: user stack where it stopped, or NULL */
    struct TFrame *current;  /* the innermost frame being interpreted */
    int stop_offset;         /* byte offset of the instruction that stopped */
    FrameEnd end;            /* how the root frame ended */
    PyObject *used_nodes;    /* strong: set of nodes some node reads */
    uint64_t backend_ns;     /* time spent in the backend */
    uint64_t graph_ns;       /* time spent making the GraphModule */
    PyObject *failed_gm;     /* strong or NULL: the GraphModule the backend
                                raised on (tr_exit.c), for rq->failed_gm */
    struct Undo *undo;       /* owned: mutations of frame-made containers, so a
                                call that breaks after mutating can be undone */
    int nundo, undo_cap;
    PyObject *read_by_id;    /* strong, or NULL: {id(obj): Value capsule} of the
                                dicts and sets read from sources, so one two
                                accessors reach is one Value (values.c) */
    PyObject *hatches;       /* strong list of str or NULL: Plan.hatches, as
                                tr_call_marked notes them (undone with the call) */
    struct Value *fn_modes[MAX_FN_MODES]; /* torch function modes entered while
                                tracing, innermost last (tr_fnmode.c) */
    int nfn_modes;
    PyObject *state_modes;   /* strong list of (exit fn, mode): torch state
                                managers (V_STATECM) entered while tracing
                                and not left yet, innermost last */
    struct AttrWrite *writes; /* owned: attribute writes to replay, in order */
    int nwrites, writes_cap;
    long tensor_writes;      /* ops traced that write into a tensor (in place,
                                t[i] = v): an autograd.Function's forward
                                speculated with none may be one node
                                (tr_autograd.c) */
    bool root_rebound;       /* the root frame stored into or deleted a local
                                bound at its start (tr_interp.c) */
    struct TFrame *absent_frame; /* the frame of the getattr()/hasattr() whose
                                lookup is being traced, or NULL (V_ABSENT) */
    struct TFrame **gens;    /* owned: the frames of generators made while
                                tracing (V_GEN), torn down with the tracer */
    int ngens, gens_cap;
    PyObject *iter_objs;     /* strong: dict id(tuple) -> capsule-free int index into
                                iter_vals: one V_ITER per incoming iterator object */
    uint64_t dyn;            /* slots whose int/float is a graph input in this
                                attempt (automatic dynamic, TranslateRequest.dynamic_slots) */
    bool dyn_floats;         /* every float slot too (dynamic=None; not the
                                TranslateRequest's static_only ones) */
    bool dyn_shapes;         /* tensor sizes as TranslateRequest.dyn_dims says */
    uint64_t dyn_used;       /* out: the slots read so, unspecialized */
    uint64_t dyn_used_exact; /* out: of those, the ints and the tensors with
                                dynamic sizes (what a branch may need exactly) */
    /* Size symbols (tr_symsizes.c): the dynamic dimensions of the inputs,
       each >= 2 (TENSOR_MATCH), with its size in this trace. */
    struct SymVar { int acc; int dim; Py_ssize_t value; } *syms;
    int nsyms, syms_cap;
    PyObject *dyn_sources;   /* strong list or NULL: the sources other than
                                slots read with dynamic sizes (as dyn_used_exact) */
    bool stop_formats;       /* the stop is an f-string formatting a value */
    PyObject *rng_saved;     /* strong list of (generator, restore fn, args), or
                                NULL: the generator states to put back when
                                the translation ends (tr_random.c) */
    /* Guard provenance (GuardSet.current_site): the (code, instruction)
       chain, innermost first, of the last site handed out and its index in
       the set's sites, so the guards one instruction adds share one stack,
       built once.  site_depth -1: none (or a chain too deep to keep). */
    struct { PyCodeObject *code; int instr; } site_key[TRACER_SITE_DEPTH];
    int site_depth;
    int site_index;
} Tracer;

/* An attribute write on an object the program can see, to replay after
   the graph (tr_effects.c). */
typedef struct AttrWrite {
    struct Value *target;    /* V_OBJECT / V_CONST reached by an accessor, or
                                a V_DICT read from a source (item) */
    PyObject *name;          /* strong: the attribute name, or the item's key */
    struct Value *value;     /* NULL: del target.name */
    bool item;               /* target[name] = value */
    bool set_member;         /* target (a set) .add(name), or .discard(name)
                                when value is NULL (item is true: no
                                attribute is written) */
    bool builtin;            /* done by the builtin's own store, not the class's:
                                object.__setattr__, or dict's / OrderedDict's
                                __setitem__ on a dict subclass instance (what
                                the class's own __setattr__ / __setitem__ ends
                                in, traced) */
} AttrWrite;

/* One mutation of a container value, to undo it (values.c). */
typedef struct Undo {
    struct Value *container;
    int old_n;               /* length before */
    int index;               /* item replaced, or -1 */
    struct Value *old_item;
    Py_ssize_t old_keys;     /* V_DICT: key list length before */
    struct Value **saved;    /* owned, or NULL: every item before (old_n), for a
                                mutation that moves items (dict.pop) */
    PyObject *saved_keys;    /* strong, or NULL: V_DICT: the key list before */
    bool node_change;        /* not a container's: a tensor Value an in-place
                                op made read its node (the program's tensor
                                changed), old_node what it read before */
    NodeObject *old_node;    /* borrowed from the graph */
} Undo;

/* Record the state of `container` before a mutation (item `index`, or -1
   for a length change); a dict standing for another object (a
   mappingproxy, a __dict__ read after writes: Value.stands_for) stops
   tracing.  0 / -1. */
int tracer_note_mutation(Tracer *t, Value *container, int index);
/* Stop tracing (unsupported, -1) when a loop still running iterates over
   `container`, which is about to change, and would see the change (item
   `index` replaced, the size kept; -1: any other change); else 0.
   (tr_iter.c) */
int tracer_check_iterated(Tracer *t, Value *container, int index);
/* Record that tensor Value v is about to read another node (an in-place op
   on the program's tensor), so that a call undone (tr_call_or_undo, whose
   ops leave the graph) puts back the node it read.  0 / -1. */
int tracer_note_node_change(Tracer *t, Value *v);
/* As tracer_note_mutation, for a mutation that may remove or reorder items:
   the whole contents are saved.  0 / -1. */
int tracer_note_snapshot(Tracer *t, Value *container);
/* Undo every mutation recorded since mark (an nundo value). */
void tracer_undo_to(Tracer *t, int mark);
/* Free what undo records own (at the tracer's end).  Cannot fail. */
void tracer_undo_free(Tracer *t);

/* Stop tracing because of a construct the translator does not model: set
   tracer->reason from a printf-style format (%U, %S, %s, %d as in
   PyUnicode_FromFormat) and record where.  The first stop wins.  Returns -1. */
int tracer_unsupported(Tracer *t, bool permanent, const char *fmt, ...);
/* Stop tracing at a graph break of `kind` (STOP_CALL/BRANCH/ESCAPE). */
int tracer_break(Tracer *t, StopKind kind, const char *fmt, ...);
/* The user stack of the frames being interpreted, outermost first: list of
   (filename, lineno, name, source line).  Defined in translate.c. */
PyObject *tracer_user_stack(Tracer *t);
/* Byte offset of the instruction being interpreted in the innermost frame. */
int tracer_offset(Tracer *t);

/* A dict `obj` is being read from accessor acc: stop if items were written
   to it through another accessor; guard it apart from the dicts written.
   0 / -1.  (tr_effects.c) */
int tr_note_dict_read(Tracer *t, int acc, PyObject *obj);
/* The V_DICT of dict `real` (read from a source) when the frame wrote
   items into it -- its items are then what the program will see, the
   real dict's are not yet -- else NULL. */
Value *tr_dict_after_writes(Tracer *t, PyObject *real);

/* values.c */
Value *value_new(Tracer *t, VKind kind, PyObject *obj);   /* obj borrowed */
int value_append(Tracer *t, Value *container, Value *item);
/* The value of accessor `acc` (whose concrete object is `obj`, borrowed),
   with the guards that specialize the entry on it.  Same Value for the same
   accessor.  NULL when tracing stops. */
Value *value_from_source(Tracer *t, int acc, PyObject *obj);
/* A tensor input whose dimensions `dims` have a dynamic size
   (TENSOR_MATCH any size from 2 on there, strides not compared): its
   shape reads are graph values (tensorops_dim).  NULL when tracing stops. */
Value *value_dynamic_tensor(Tracer *t, int acc, PyObject *obj, uint32_t dims);
/* Automatic dynamic for tensor obj read through accessor acc, a source
   other than the frame's own slots: the dimensions that this attempt takes
   as dynamic (TranslateRequest.source_sizes); under dynamic=True all of
   them, unless a translation needed the source's sizes as constants.  Cannot fail: what it
   cannot decide stays static (0). */
uint32_t tr_source_dynamic_dims(Tracer *t, int acc, PyObject *obj);
/* Automatic dynamic for an int obj (2 or more, not a bool) read through
   accessor acc, an attribute or a dict item (not the frame's own slots, not
   a sequence's items), by the same
   frame state: whether this attempt takes it as a graph input with a
   symbol (tr_sym_int_input) -- its value changed since the frame's last
   translation, or it is first read with a size this miss saw change (a
   cache's cumulative length).  The same under dynamic=True (ints are
   not dynamic there from their first sight).  Cannot fail: undecided is
   static. */
bool tr_source_dynamic_int(Tracer *t, int acc, PyObject *obj);
/* An input the entry must not specialize on its value (a number produced
   by an eager step, a NumPy scalar): TYPE_MATCH only, and a graph input.
   NULL when tracing stops. */
Value *value_unspecialized(Tracer *t, int acc, PyObject *obj);
/* key in d, d a dict input read as an opaque V_OBJECT (it has keys of
   types no guard holds): the value of d[key] (*found), guarded through
   that one key, or (absent, DICT_LACKS guarded) a V_CONST None.  The key
   is a str/int/bytes constant, or a class or typing form (held by an
   ID_MATCH guard).  NULL when tracing stops. */
Value *value_keyed_dict_lookup(Tracer *t, Value *d, Value *key, bool *found);
/* Whether obj is a constant the graph may embed (numbers, str, bytes, None,
   Ellipsis, slices and tuples of these, numpy dtypes and scalar types). */
bool value_is_plain_constant(PyObject *obj);
/*
 * torch.nn.Module instances (values.c), for the translator's hooks.  Each
 * sets *handled to false (and returns NULL) when `v` is not an nn.Module
 * instance it models -- the translator then goes on as for any object --
 * else to true and returns the result, or NULL when tracing stops.
 *   value_module_attr     v.name, resolved as nn.Module does: the instance
 *                         __dict__, class attributes, then _parameters,
 *                         _buffers, _modules (each through its accessor,
 *                         with DICT_LACKS guards for the dicts that win);
 *   value_module_forward  calling v: the function type(v).forward (inline it
 *                         with v as self), provided the call is the plain
 *                         forward call -- no hooks (instance or global,
 *                         guarded empty) but v's own forward hooks, no
 *                         compiled or instance forward; *hooks: NULL, or a
 *                         V_TUPLE of v's forward hooks, which the caller runs
 *                         after forward as nn.Module.__call__ does;
 *   value_module_iter     iter(v) of an nn.Sequential / nn.ModuleList: a
 *                         V_ITER over v._modules.values();
 *   value_module_getitem  v[i] of one of them.
 */
Value *value_module_attr(Tracer *t, Value *v, PyObject *name, bool *handled);
/* hasattr(v, name) of an nn.Module (*handled as above): 1 / 0, its absence
   guarded in every place nn.Module looks; -1 when tracing stops. */
int value_module_has_attr(Tracer *t, Value *v, PyObject *name, bool *handled);
Value *value_module_forward(Tracer *t, Value *v, bool *handled, Value **hooks);
/* Whether class tp's __call__ (*call, borrowed) is nn.Module.__call__ and
   nn.Module's global hook dicts are empty now. */
bool value_module_call_is_plain(PyTypeObject *tp, PyObject **call);
/* Guard what value_module_call_is_plain relied on, for the class read by
   accessor cls.  0 / -1. */
int value_guard_module_call(Tracer *t, int cls, PyObject *call);
Value *value_module_iter(Tracer *t, Value *v, bool *handled);
/* v[index] of an nn.Sequential / nn.ModuleList, index a constant int: the
   module, through v._modules (its keys guarded). */
Value *value_module_getitem(Tracer *t, Value *v, Value *index, bool *handled);
/* Whether descr, a data descriptor found on a type, reads with C code only:
   a getset (function.__name__, code.co_varnames, object.__class__) or a
   member (a __slots__ slot) descriptor -- no property, no Python. */
bool value_descr_is_c_getter(PyObject *descr);
/* Whether a method found on type(obj) is what obj.name returns when obj's
   __dict__ lacks it: the type's lookup is generic, or it only adds
   __getattr__ (run after the generic lookup fails), as nn.Module does. */
bool value_type_lookup_is_generic(PyTypeObject *tp);
/* The concrete value of a (non-tensor) Value built only from constants,
   e.g. for constant folding.  New reference, or NULL with t->reason set
   (no exception) when v holds tensors or opaque objects. */
PyObject *value_as_constant(Tracer *t, Value *v);

/* tr_random.c: random ops inside graphs (see the file comment). */
/* A torch random op is about to run on the examples: save the default
   generators' states (once per translation).  0 / -1. */
int tr_random_note_torch(Tracer *t);
/* Whether a torch random op on `example` (a tensor) draws from a generator
   tr_random_note_torch saves: 1 / 0, -1 with an exception. */
int tr_random_torch_device_ok(PyObject *example);
/* The RandomState or Generator that builtin method fn draws from, when fn
   is one of their drawing methods (rng.normal, np.random.rand); else NULL.
   Borrowed. */
PyObject *tr_random_numpy_owner(PyObject *fn);
/* A NumPy draw from rng is about to run on the examples: save rng's state
   (once per translation).  0 / -1. */
int tr_random_note_numpy(Tracer *t, PyObject *rng);
/* Put every saved generator state back, newest first (at the translation's
   end; an exception pending is kept).  Cannot fail: a state that cannot be
   restored is reported as unraisable. */
void tr_random_restore(Tracer *t);

/* tr_inplace.c: in-place torch ops inside graphs (see the file comment). */
/* Whether torch.Tensor method `name` is an in-place op that changes only
   the contents (add_, masked_fill_; not resize_, t_, requires_grad_). */
bool tr_inplace_method_allowed(const char *name);
/* Whether an in-place op may run on tensor value a's example itself: a
   torch tensor an op of this graph made -- no input, no view, no storage
   shared with an input.  False with an exception only on a real error. */
bool tr_tensor_is_own(Tracer *t, Value *a);
/* An in-place op on `receiver` (its example eargs[0], eargs a new tuple
   of the caller's) is about to run on the examples: 0 when it may run on
   the example itself, 1 when eargs[0] was replaced by a clone (the
   receiver is the program's), -1 when tracing stops. */
int tr_inplace_prepare(Tracer *t, Value *receiver, const char *hint, PyObject *eargs);

/* tr_sizes.c */
/* x.shape[d] of tensor value x: a constant when fixed (an input's static
   dimension, or a tensor of static shape), else a graph value (a sym_size
   node).  NULL when tracing stops. */
Value *tensorops_dim(Tracer *t, Value *x, int d);
/* x.shape of tensor value x: a V_TUPLE of tensorops_dim (standing for a
   torch.Size for a torch tensor).  NULL when tracing stops. */
Value *tensorops_shape(Tracer *t, Value *x);

/* tensorops.c */
/* Find NumPy and torch if they are imported (tensorlib) and build the
   allowlists of their ops, once each.  0 / -1 with an exception. */
int tensorops_init(void);
/* The entry touches torch tensors: guard the grad mode they were traced in
   (GRAD_MODE).  Idempotent.  0 / -1 with an exception. */
int tensorops_note_torch(Tracer *t);
/* What calling `fn` gives while dynscope captures, when fn is one of the
   functions libraries ask "am I being compiled?" (torch.compiler.
   is_compiling() is True, torch.jit.is_scripting() False ...): borrowed,
   or NULL for any other fn.  Ellipsis: torch._C._log_api_usage_once, a
   call folded on its constant argument (tr_calls.c). */
PyObject *tensorops_known_result(PyObject *fn);
/* The grad mode the context manager fn(*args) sets -- torch.no_grad() 0,
   enable_grad() 1, set_grad_enabled(mode) mode: 0 / 1; -1 when fn is
   none of them; -2 when set_grad_enabled's mode is not a constant. */
int tensorops_grad_manager_mode(PyObject *fn, Value **args, int nargs, PyObject *kwnames);
/* When fn is one of torch's context managers kept in a graph as a pair
   of nodes (torch.autocast, torch.inference_mode): 1, with *vals its
   arguments bound in order (a new tuple of constants) and *enter / *exit
   (borrowed) what the nodes call: enter(*vals) -> mode, exit(mode).
   0: fn is none of them; -2: an argument is not a constant, or missing;
   -1: an error. */
int tensorops_state_manager(PyObject *fn, Value **args, int nargs, PyObject *kwnames,
                            PyObject **enter, PyObject **exit, PyObject **vals);
/* Set torch's grad mode for the graph (a node torch._C._set_grad_enabled
   (mode)) and for tracing (the ops that follow run in it).  0 / -1. */
int tensorops_set_grad_mode(Tracer *t, int mode, bool add_node);
/* Put torch's grad mode back to `mode` (tracing only; no node).  Cannot
   fail (an error is cleared). */
void tensorops_restore_grad_mode(Tracer *t, int mode);
/* Whether fn is a function of the math module (pure C on numbers). */
bool tensorops_is_math_function(PyObject *fn);
/* Whether fn is torch.finfo or torch.iinfo (or obj, with instance, an
   object of one of them: immutable, its attributes constants). */
bool tensorops_is_dtype_info(PyObject *fn);
bool tensorops_is_dtype_info_object(PyObject *obj);
/* Whether objects of tp (a torch tensor type) hash by their id:
   tp keeps torch.Tensor's __hash__. */
bool tensorops_hash_is_identity(PyTypeObject *tp);
/* Whether `fn` is a pure tensor function the graph may call. */
bool tensorops_is_pure_function(PyObject *fn);
/* Whether `name` is a pure ndarray method. */
bool tensorops_is_pure_method(PyObject *name);
/* Whether `name` is a pure method of tensor `self` (an array's or a
   torch tensor's). */
bool tensorops_is_method_of(PyObject *self, PyObject *name);
/* Whether calling method `name` moves data out of the graph (.item(), ...). */
bool tensorops_is_escape_method(PyObject *name);
/* Whether `name` is an ndarray attribute computed by a graph node ("T"). */
bool tensorops_is_node_attribute(PyObject *name);
/* Add a node calling `target` (call_function) or method `target` (call_method,
   target a str) on `args` (n Values) and kwargs (kwnames tuple, borrowed,
   naming the last values of args).  The op runs once on the example values.
   Returns a V_TENSOR value, or NULL when tracing stops. */
Value *tensorops_call(Tracer *t, NodeOp op, PyObject *target, const char *name_hint,
                      Value **args, int nargs, PyObject *kwnames);
/* Whether fn is an operator of torch.ops (an OpOverloadPacket or
   OpOverload) that is functional by its schema and tags: a graph op
   (tensorops_library.c). */
bool tensorops_is_library_op(PyObject *fn);
/* For fn a private builtin of torch (torch._weight_norm) that is aten's
   functional op of that name: that op (an OpOverloadPacket, borrowed, kept
   for the process), whose meta kernel checks fn's sizes; else NULL. */
PyObject *tensorops_private_torch_op(PyObject *fn);
/* Whether fn is an operator of torch.ops at all (functional or not). */
bool tensorops_is_library_op_type(PyObject *fn);
/* After such an op ran on the examples (eargs, ekw) giving result: 0 when
   its meta kernel, on meta copies of them, gives result's sizes and
   dtypes; -1 when not (a call break saying why) or on an error. */
int tensorops_library_op_sizes(Tracer *t, PyObject *op, const char *hint, PyObject *eargs,
                               PyObject *ekw, PyObject *result);
/* fn(*args) for fn one of torch's readers of global state (autocast's
   is_autocast_enabled, get_autocast_dtype ...): called now, on constants,
   its answer a constant guarded to stay (STATE_QUERY); a call break inside
   a state manager the traced code entered.  *handled false (NULL) for any
   other fn. */
Value *tensorops_state_query(Tracer *t, PyObject *fn, Value **args, int nargs, PyObject *kwnames,
                             bool *handled);
/* Whether tp is a struct sequence every field of which is named and in
   the sequence (torch.return_types.topk, sort, max ...): tp(tuple) makes
   one back from its items.  Its field `name`'s index, or -1 (no error). */
bool tensorops_is_plain_structseq(PyTypeObject *tp);
int tensorops_structseq_field(PyTypeObject *tp, PyObject *name);
/* operator.<name> (borrowed), e.g. "add", "getitem", "neg". */
PyObject *tensorops_operator(const char *name);

/* Whether graph node n reads a size and nothing else (a sym_size node):
   it cannot raise, so nothing needs it to run when nothing reads it. */
bool tr_sizes_is_read(NodeObject *n);

/* ---- sizes as expressions (tr_symsizes.c) ---- */

/* Input tensor v, read by accessor acc with dynamic dimensions `dims`:
   a symbol per dynamic dimension, the others constants.  0 / -1. */
int tr_sym_input(Tracer *t, Value *v, int acc, uint32_t dims);
/* Input int v (a graph input, its value 2 or more), read by accessor acc:
   a symbol for its value, guarded to stay from 2 on as a dynamic size is.
   0 / -1. */
int tr_sym_int_input(Tracer *t, Value *v, int acc);
/* Dimension d of tensor x when its expression is a constant: a V_CONST;
   else NULL, no exception (the caller reads it in the graph, and
   tr_sym_size_read gives that value its expression). */
Value *tr_sym_static_dim(Tracer *t, Value *x, int d);
void tr_sym_size_read(Tracer *t, Value *x, int d, Value *size);
/* operator `opname` (add, sub, mul, floordiv, neg and the comparisons)
   on sizes a and b (b NULL for a unary one): 1 with *out a constant when
   the expressions decide it (a comparison the sizes' ranges settle, or one
   whose outcome is guarded: GUARD_SIZES_HOLD), 2 with *e the result's
   expression (the caller makes the graph's node and attaches it), 0 when
   these are not sizes with expressions, -1 when tracing stops. */
int tr_sym_operator(Tracer *t, const char *opname, Value *a, Value *b, Value **out, SymExpr *e);
/* Give size value v (a V_TENSOR the graph computes) expression e.  0 / -1. */
int tr_sym_attach(Value *v, const SymExpr *e);
/* After a graph op made v from args (tensorops_call's arguments): the
   expressions of v's dimensions, by the op's shape rule, checked against
   v's example; a result whose every size is a constant is no longer
   dynshape.  0 / -1. */
int tr_sym_result(Tracer *t, const char *hint, Value **args, int nargs, PyObject *kwnames,
                  Value *v);
/* After a graph op made the tuple or list seq of tensors from args
   (split, chunk, unbind, ...): stops tracing (-1, reason set) when the
   number of pieces follows a dynamic size -- the translation would fix it --
   and gives each piece its dimensions' expressions.  0 / -1. */
int tr_sym_sequence(Tracer *t, const char *hint, Value **args, int nargs, PyObject *kwnames,
                    Value *seq);

#endif /* DYNSCOPE_TRANSLATE_H */
