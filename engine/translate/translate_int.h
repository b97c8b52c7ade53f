/*
 * translate_int.h -- engine/translate/, the translator (bytecode ->
 * guards + plan + graph): its private contract, the symbolic frame (TFrame)
 * and its value stack, and what the translator's files share (design:
 * DESIGN.md 3.4-3.5; map: docs/architecture.md).  The room's outward
 * contract is translator.h (TranslateRequest, translate_frame); it may
 * include ../base/, ../graph/, ../guards/, ../plan/, never the capture
 * room above it.  Its files (26, with translate.h's values.c and
 * tensorops.c):
 *
 *   translate.c     translate_frame(): the Tracer's life, symbolic frames,
 *                   the root frame's inputs (resume slots), the user stack
 *   tr_interp.c     the interpreter loop: instructions (decoded by
 *                   pycompat.h), the opcode dispatch, the op_* handlers of
 *                   variables, calls, jumps, iteration and strings
 *   tr_stackops.c   the handlers of operators, subscripts, slices and
 *                   attribute stores (tr_op_*)
 *   tr_containers.c the handlers that build and unpack containers (tr_op_*)
 *   tr_raise.c      exceptions the traced code raises and catches, and
 *                   their handlers (tr_op_raise, ...)
 *   tr_vars.c       locals, free variables, globals and builtins, attributes
 *                   and methods
 *   tr_operators.c  operators, truth values, 'is' / 'in', f-strings
 *   tr_iter.c       subscripts, item assignment, iterators (over constants,
 *                   containers, tensor rows; enumerate()/zip() sources)
 *   tr_objects.c    attributes as Python reads them: a class's Python
 *                   __getattribute__, properties, super(), bound methods
 *   tr_calls.c      calls: user functions (binding, inlining), tensor and
 *                   container methods, nn.Module calls, undoing a call that
 *                   breaks
 *   tr_builtins.c   calls of builtin functions and of builtin types
 *   tr_sizes.c      sizes known only when the graph runs: shape reads as
 *                   sym_size nodes
 *   tr_symsizes.c   sizes as expressions of the inputs' dynamic sizes:
 *                   arithmetic, comparisons decided or guarded (SIZES_HOLD)
 *   tr_shapes.c     shape rules: an op result's dimensions as expressions
 *   tr_random.c     random ops in graphs: the generator states saved before
 *                   tracing draws, restored when the translation ends
 *   tr_inplace.c    in-place torch ops inside graphs (x.add_(y), x += y)
 *   tr_copy.c       copy.deepcopy(x) and copy.copy(x) while translating
 *   tr_effects.c    attribute and item writes on objects the program sees,
 *                   recorded while translating and replayed after the graph
 *   tr_generators.c generators made while translating, run lazily
 *   tr_newobj.c     objects of the program's classes made while translating
 *   tr_dictsub.c    dict subclass instances the program holds (ModelOutput):
 *                   len, keys/values/items, iteration, `in`, d[key]
 *   values.c        symbolic values, and turning a concrete input reached by
 *                   an accessor into a value plus its guards (translate.h)
 *   tensorops.c     which calls are pure tensor operations: the allowlists
 *                   and torch's rules (translate.h)
 *   tensorops_call.c adding a tensor call to the graph: arguments, torch's
 *                   argument rules, folding metadata, results
 *                   (tensorops_int.h is what the two share)
 *   tensorops_library.c operators of torch.ops as graph ops: functional by
 *                   schema and tags, sizes checked by their meta kernels
 *   tr_rebuild.c    materialization: how values are rebuilt after a graph
 *                   ran (Rebuild trees, memo slots, the live state)
 *   tr_exit.c       the end of the root frame (return, eager step, branch,
 *                   deopt) and finishing the plan (outputs, break, backend)
 *
 * Where growth goes: a new operation is an Op (pycompat.h) that each
 * version's opcodes decode to (pycompat.c), a case in tr_run_frame
 * (tr_interp.c) with an op_* handler next to it that does the stack effect,
 * and what the operation means to Values in the file of its kind; a new
 * call rule goes in tr_calls.c (user code, methods) or tr_builtins.c;
 * another CPython version's spelling of an operation goes in the decoder,
 * never in the dispatch (which names no CPython opcode).
 *
 * Invariants:
 *   - Every Value is the Tracer's (translate.h).  A TFrame lives on the C
 *     stack of whoever interprets it (translate_frame for the root frame,
 *     the inlining call for the others) and holds no references of its own
 *     but its Bytecode.
 *   - Functions returning int give 0, or -1 when tracing stops; functions
 *     returning a pointer give NULL when it stops.  A stop is t->reason set
 *     (no exception) or an exception; the first stop wins (translate.h).
 *   - pop() never clears a slot: when tracing stops in the root frame, the
 *     frame's end reads the instruction's operands from the stack as it was
 *     before the instruction (f->stack[0..sp_before)), after its handler
 *     popped them.
 *   - Tracing has no effect the program can see: only pure tensor ops run,
 *     on example values; attributes are read through the generic path.
 */
#ifndef DYNSCOPE_TRANSLATE_INT_H
#define DYNSCOPE_TRANSLATE_INT_H

#include "../base/pycompat.h"
#include "translate.h"

#define MAX_STEPS 500000       /* instructions interpreted per translation */
#define MAX_INLINE_DEPTH 24
#define MAX_STACK 256

/* A frame being interpreted: the root frame (the intercepted one) or a
   call being inlined. */
typedef struct TFrame {
    Tracer *t;
    struct TFrame *parent;     /* the caller's frame; NULL for the root frame */
    PyCodeObject *code;        /* borrowed (the function or frame keeps it) */
    PyObject *func;            /* borrowed: the function being interpreted */
    int func_src;              /* accessor of func, -1 for the root frame */
    Bytecode bc;               /* code's co_code, read through pycompat.h */
    int nlocals;               /* code_nslots: the fast locals, then the cell
                                  variables (a frame's state; free variables
                                  are the function's) */
    Value **locals;            /* owned array: every localsplus slot (locals,
                                  then cells, then free variables), NULL =
                                  unbound; a cell slot holds a V_CELL once
                                  MAKE_CELL ran */
    Value *made;               /* the V_FUNC this frame runs, or NULL (a real
                                  function, func) */
    Value *yields;             /* a generator's frame: the V_ITER of what it
                                  yielded so far; else NULL */
    bool suspends;             /* a generator's frame that stops at each yield
                                  (V_GEN, tr_generators.c) */
    int resume_at;             /* suspends: where its next run starts (-1: not
                                  started, -2: it returned) */
    Value *yielded;            /* suspends: what its last yield gave */
    Value *stack[MAX_STACK];
    int sp;
    PyObject *globals;         /* borrowed: func_globals */
    int globals_acc;           /* -1: the root frame's G[...]; else accessor of func.__globals__ */
    PyObject *kwnames;         /* borrowed: pending KW_NAMES, or NULL */
    Op prior_op;               /* the last instruction run before this one, TO_BOOL aside */
    int prior_oparg;
    Value *retval;
    int cur_instr;             /* code unit of the instruction being interpreted */
} TFrame;

/* tr_run_frame results */
#define FRAME_RETURNED 0       /* f->retval set */
#define FRAME_ENDED 1          /* root frame only: t->end describes a break or deopt */
#define FRAME_STOPPED (-1)     /* t->reason set, or an exception */
#define FRAME_YIELDED 2        /* a suspending generator's frame: f->yielded set */

/* ---- the value stack and small helpers ---- */

/* Bit of live slot k in a mask, or 0 past the mask's width. */
static inline uint64_t slot_bit(int k)
{
    return k < LIVE_MAX_SLOTS ? (uint64_t)1 << k : 0;
}

/* Push v.  -1 when v is NULL (tracing already stopped: this lets a handler
   push what a function returned without a test) or the stack is full
   (stops). */
static inline int push(TFrame *f, Value *v)
{
    if (v == NULL)
        return -1;
    if (f->sp >= MAX_STACK)
        return tracer_unsupported(f->t, true, "value stack deeper than %d", MAX_STACK);
    f->stack[f->sp++] = v;
    return 0;
}

/* The top value, popped (its slot keeps it). */
static inline Value *pop(TFrame *f)
{
    ENGINE_ASSERT(f->sp > 0);
    return f->stack[--f->sp];
}

/* The k-th value from the top (1 = the top). */
static inline Value *peek(TFrame *f, int k)
{
    ENGINE_ASSERT(f->sp >= k);
    return f->stack[f->sp - k];
}

/* A V_CONST of obj_steal (consumed); NULL when obj_steal is NULL (its
   exception stops tracing) or on an error. */
static inline Value *new_const(Tracer *t, PyObject *obj_steal)
{
    if (obj_steal == NULL)
        return NULL;
    Value *v = value_new(t, V_CONST, obj_steal);
    Py_DECREF(obj_steal);
    return v;
}

/* Name of localsplus slot i of co (borrowed). */
static inline PyObject *local_name(PyCodeObject *co, int i)
{
    return PyTuple_GET_ITEM(code_localsplusnames(co), i);
}

/* Whether a constant's operators are builtin C code (safe to fold). */
static inline bool foldable(Value *v)
{
    return v->kind == V_CONST && value_is_plain_constant(v->obj);
}

/* Whether conditional jump `in` (POP_JUMP_IF_FALSE / _TRUE) jumps when
   its condition is true. */
static inline bool jumps_if_true(const Instr *in)
{
    return in->op == OP_POP_JUMP_IF_TRUE;
}

/* Push the pair a call takes its callable from: `callable` with `self`
   (a method's object) or with a NULL (self == NULL), in the order of the
   CPython version (CALL_PAIR_NULL_FIRST).  0 / -1. */
static inline int push_call_pair(TFrame *f, Value *callable, Value *self)
{
    if (self != NULL)
        return push(f, callable) < 0 ? -1 : push(f, self);
    Value *null = value_new(f->t, V_NULL, NULL);
    if (null == NULL)
        return -1;
    if (CALL_PAIR_NULL_FIRST)
        return push(f, null) < 0 ? -1 : push(f, callable);
    return push(f, callable) < 0 ? -1 : push(f, null);
}

/* The callable and self (NULL: none) of the pair (lower, upper) below a
   call's arguments: whichever is NULL is absent whatever the version's
   order; else the lower is a method and the upper its object. */
static inline void call_pair_split(Value *lower, Value *upper, Value **callable, Value **self)
{
    if (lower->kind == V_NULL) {
        *callable = upper;
        *self = NULL;
    }
    else if (upper->kind == V_NULL) {
        *callable = lower;
        *self = NULL;
    }
    else {
        *callable = lower;
        *self = upper;
    }
}


/* ---- translate.c ---- */

/* Set up frame f (zeroed first) to interpret `code` -- for an inlined call
   the function's __code__, for the root frame the intercepted frame's own
   code -- as function func (borrowed, reached by accessor func_src, -1 for
   the root), called from parent (NULL for the root).  0 / -1; either way
   tr_frame_teardown() releases it. */
int tr_frame_setup(TFrame *f, Tracer *t, TFrame *parent, PyObject *func, int func_src,
                   PyCodeObject *code);
void tr_frame_teardown(TFrame *f);
/* Why the code object cannot be interpreted at all, or NULL. */
const char *tr_code_unsupported_reason(PyCodeObject *co);
/* The value of live slot k of a resume frame (accessor acc, object obj). */
Value *tr_value_from_resume_slot(TFrame *f, int acc, PyObject *obj, int k);

/* ---- tr_interp.c ---- */

/* Interpret f from code unit `start`: FRAME_RETURNED, FRAME_ENDED (root
   frame only) or FRAME_STOPPED.  Sets t->current to f. */
int tr_run_frame(TFrame *f, int start);
/* d[key] = val in dict value d (made by this frame), key a constant.
   0 / -1. */
int tr_dict_set_item(Tracer *t, Value *d, PyObject *key, Value *val);
/* The same for an item a merge brings (DICT_MERGE / DICT_UPDATE): with
   refuse_twice (a call's **), a key d has already stops, as the call would
   raise.  0 / -1. */
int tr_dict_merge_item(Tracer *t, Value *d, PyObject *key, Value *val, bool refuse_twice);
/* owner.name = value (value NULL: del owner.name), as STORE_ATTR /
   DELETE_ATTR and setattr() / delattr() do (tr_interp.c).  0 / -1. */
int tr_store_attr(TFrame *f, Value *owner, PyObject *name, Value *value);
/* set.update(other) into V_SET s when other is a set constant or a dict
   (which set.update merges as a table: s becomes `merged`): *handled false
   for other iterables (added one by one).  0 / -1. */
int tr_set_merge(TFrame *f, Value *s, Value *other, bool *handled);
/* inspect.signature (tr_builtins.c): whether fn is it; the call on a
   function or bound method reached by an accessor, folded (what it reads
   of the function guarded) into the immutable Signature, a V_CONST; an
   attribute of a Signature or Parameter so made (parameters: a V_DICT
   standing for the mappingproxy).  NULL when tracing stops. */
bool tr_is_inspect_signature(PyObject *fn);
/* A bound method object m read by an accessor (m->src >= 0) as the
   V_BOUNDFN of its function and object, each read through m (__func__,
   __self__) and guarded as any input (tr_calls.c).  NULL when tracing
   stops. */
Value *tr_split_method_object(Tracer *t, Value *m);
/* obj.method held as a value (a V_BOUND) whose method is a Python function
   of obj's class: the V_BOUNDFN of the generic lookup; else a stop
   (tr_calls.c).  NULL when tracing stops. */
Value *tr_bound_as_function(TFrame *f, Value *b);
/* copy.deepcopy(x) / copy.copy(x) (tr_copy.c): whether fn is one of them
   (*deep says which); the call on one value, modelled.  NULL when tracing
   stops. */
bool tr_is_copy_function(PyObject *fn, bool *deep);
Value *tr_copy(TFrame *f, Value *x, bool deep);
bool tr_is_signature_object(PyObject *obj);
Value *tr_inspect_signature(TFrame *f, PyObject *fn, Value *v);
Value *tr_signature_attr(TFrame *f, Value *base, PyObject *name);
/* Whether calling exception class cls runs no Python code: a builtin
   exception class, or a subclass that keeps its __init__ and __new__ and
   has a plain metaclass (tr_interp.c). */
bool tr_exception_class_is_plain(PyObject *cls);
/* cls(*args) for such a class and constant args: a V_EXC.  NULL when
   tracing stops. */
Value *tr_make_exception(TFrame *f, PyObject *cls, Value **args, int nargs);
/* Raise V_EXC exc in frame f as `raise exc` does: the inlined frames unwind
   to a handler (tr_interp.c).  -1 (a stop until a handler catches it). */
int tr_raise(TFrame *f, Value *exc);
/* A new, empty V_SET (its real set made).  NULL on an error. */
Value *tr_new_set(Tracer *t);
/* Add v to V_SET s as set.add does: a hashable constant, once (the real
   set too).  0 / -1 when tracing stops. */
int tr_set_add(Tracer *t, Value *s, Value *v);
/* The items of CALL_FUNCTION_EX's callargs (and kwargs dict, or NULL)
   appended to args[*nargs...], *kwnames the keyword names (a tuple the
   tracer holds) or NULL.  0 / -1. */
int tr_spread_call_args(TFrame *f, Value *callargs, Value *kwargs, Value **args, int *nargs,
                        PyObject **kwnames);

/* ---- tr_vars.c ---- */

/* Local i (a root frame's input is read, and guarded, on first use). */
Value *tr_load_local(TFrame *f, int i);
/* Free variable k (index into the function's closure). */
Value *tr_load_free(TFrame *f, int k);
/* LOAD_DEREF / STORE_DEREF / LOAD_CLOSURE of localsplus slot i (a cell
   or a free variable).  tr_store_deref: 0 / -1; v NULL: DELETE_DEREF. */
Value *tr_load_deref(TFrame *f, int i);
int tr_store_deref(TFrame *f, int i, Value *v);
Value *tr_load_closure(TFrame *f, int i);
/* Global or builtin `name`, as LOAD_GLOBAL finds it. */
Value *tr_load_global(TFrame *f, PyObject *name);
/* Whether reading obj.name runs no Python code (generic lookup; the class
   attribute, if any, is no Python data descriptor). */
bool tr_attr_read_is_pure(PyObject *obj, PyObject *name);
/* base.name. */
Value *tr_load_attr(TFrame *f, Value *base, PyObject *name);
/* type(v): the class v is known to have (by its guards, or by how the
   translation made it), reached as type(<source>) when v has one.  NULL
   when tracing stops (a value whose type is not known). */
Value *tr_type_of(TFrame *f, Value *v);
/* Whether v's type is known and v.__class__ is that type (object's
   descriptor, not a property of the class). */
bool tr_class_attr_is_type(Value *v);
/* LOAD_METHOD (3.11; LOAD_ATTR with its method bit on 3.12+): pushes
   [function, self] when the lookup finds a method descriptor on the type
   (a function, a C method, a slot wrapper) that the instance does not
   shadow, as _PyObject_GetMethod does, else [NULL, attribute]: a class,
   staticmethod, classmethod, property, callable object or instance
   attribute is read as an attribute and called as it is.  0 / -1. */
int tr_load_method(TFrame *f, Value *base, PyObject *name);
/* IMPORT_NAME `name` with constant level and fromlist: the module (or
   top package) from sys.modules, never importing. */
Value *tr_import_name(TFrame *f, PyObject *name, Value *level, Value *fromlist);
/* IMPORT_FROM: module.name, or the submodule module.name already imported. */
Value *tr_import_from(TFrame *f, Value *module, PyObject *name);

/* ---- tr_objects.c ---- */

/* base.name when reading it runs Python the translator inlines: the
   class's own __getattribute__, a property's getter.  *handled false
   (NULL returned) when neither applies. */
Value *tr_object_attr(TFrame *f, Value *base, PyObject *name, bool *handled);
/* object.__getattribute__(obj, name). */
Value *tr_generic_attr(TFrame *f, Value *obj, PyObject *name);
/* Whether an AttributeError raised in the innermost frame now would reach
   the getattr()/hasattr() of t->absent_frame through returns alone: every
   frame between is at a call or attribute read that RETURN_VALUE follows,
   outside any try or with block (tr_objects.c). */
bool tr_missing_reaches_getattr(Tracer *t);
/* obj.name found missing, where `generic` says how: by object.__getattribute__
   (the instance dict and the type lack it) or by obj's own lookup, which
   runs no Python (hasattr(obj, name) is false).  A V_ABSENT when a getattr()
   or hasattr() being traced made the lookup and the AttributeError would
   reach it through returns only (t->absent_frame); else tracing stops. */
Value *tr_attr_missing(TFrame *f, Value *obj, PyObject *name, bool generic);
/* super(cls, obj); cls NULL: the zero-argument form in frame f. */
Value *tr_make_super(TFrame *f, Value *cls, Value *obj);
/* super(...).name. */
Value *tr_super_attr(TFrame *f, Value *sup, PyObject *name);
/* A V_BOUNDFN called: its function with its object first. */
Value *tr_call_bound(TFrame *f, Value *bound, Value **args, int nargs, PyObject *kwnames);

/* ---- tr_newobj.c ---- */

/* cls(*args) (cls a class value), when cls makes plain objects: a new
   V_NEWOBJ, its __init__ inlined.  *handled false (NULL) for a class this
   does not model; else the object, or NULL when tracing stops. */
Value *tr_new_object(TFrame *f, Value *cls, Value **args, int nargs, PyObject *kwnames, bool *handled);
/* o.name, o.name = value, del o.name for a V_NEWOBJ o.  NULL / -1 when
   tracing stops. */
Value *tr_newobj_attr(TFrame *f, Value *o, PyObject *name);
int tr_newobj_set_attr(TFrame *f, Value *o, PyObject *name, Value *value);
int tr_newobj_del_attr(TFrame *f, Value *o, PyObject *name);
/* o.name of V_NEWOBJ o when it has it; NULL with *absent true when it
   has not (the class's lack guarded: getattr's default, hasattr False).
   NULL when tracing stops. */
Value *tr_newobj_lookup(TFrame *f, Value *o, PyObject *name, bool *absent);
/* bool(o) of a V_NEWOBJ: 1 or 0, or -1 when tracing stops. */
int tr_newobj_truth(TFrame *f, Value *o);
/* A new object of class cls (a V_CONST reached by an accessor) as
   cls.__new__(cls) makes it, without __init__, its __dict__ empty (the
   caller fills items[0]): copy's reconstruction.  The class must be plain
   (not deriving from dict); its __new__ is guarded.  NULL when tracing
   stops. */
Value *tr_newobj_blank(Tracer *t, Value *cls);
/* descr, builtin code (object's or dict's methods, Function.apply), bound
   to o: a V_BOUNDFN that tr_call_bound models (tr_newobj_call_builtin for
   a new object).  NULL on an error. */
Value *tr_bound_builtin(Tracer *t, PyObject *descr, Value *o);
/* object.__setattr__(o, name, value) (what super().__setattr__ reaches):
   the class's own __setattr__ not consulted.  0 / -1. */
int tr_newobj_object_setattr(TFrame *f, Value *o, PyObject *name, Value *value);
/* descr (a method or slot wrapper of object, dict or OrderedDict) called
   on V_NEWOBJ o with args (no self): object's __setattr__ and
   __getattribute__, the dict methods on o's mapping.  NULL when tracing
   stops. */
Value *tr_newobj_call_builtin(TFrame *f, Value *o, PyObject *descr, Value **args, int nargs,
                              PyObject *kwnames);
/* The protocol method `dunder` (__getitem__, __setitem__, __contains__,
   __len__, __iter__) of V_NEWOBJ o called with args (no self): the
   class's own in Python inlined, or dict's on o's mapping.  NULL when
   tracing stops. */
Value *tr_newobj_protocol(TFrame *f, Value *o, const char *dunder, Value **args, int nargs);
/* o(*args) for o a V_NEWOBJ: an nn.Module made while tracing calls its
   forward (no hooks: its own hook dicts empty, nn.Module's global ones
   guarded empty; no instance forward), any other class its __call__
   (tr_newobj_protocol).  NULL when tracing stops. */
Value *tr_newobj_call(TFrame *f, Value *o, Value **args, int nargs, PyObject *kwnames);

/* DICT_MERGE / DICT_UPDATE of V_NEWOBJ o, a mapping made while tracing (a
   ModelOutput), into `into` (refuse_twice: a call's **): its keys in
   order, each with o[key] as dict's merge reads it.  0 / -1. */
int tr_newobj_merge(TFrame *f, Value *into, Value *o, bool refuse_twice);

/* ---- tr_generators.c ---- */

/* A zeroed frame for a generator, the tracer's (freed by
   tr_gen_frames_free with the tracer).  NULL on an error. */
TFrame *tr_gen_frame_new(Tracer *t);
void tr_gen_frames_free(Tracer *t);
/* Run generator gen from where it stopped, called from frame f: 1 with
   *yielded its next value, 0 when it returned (ended), -1 when tracing
   stops. */
int tr_gen_resume(TFrame *f, Value *gen, Value **yielded);
/* next(gen).  NULL when tracing stops (an ended generator included). */
Value *tr_gen_next(TFrame *f, Value *gen);
/* fn(*args) for fn contextlib._GeneratorContextManager.__enter__ or
   __exit__ (a block that raised nothing).  *handled false (NULL) for any
   other fn; else the result, or NULL when tracing stops. */
Value *tr_contextlib_call(TFrame *f, PyObject *fn, Value **args, int nargs, PyObject *kwnames,
                          bool *handled);

/* type.__instancecheck__(cls, x), bound by super() in a metaclass's own
   __instancecheck__: by x's type (tr_builtins.c).  NULL when tracing stops. */
Value *tr_isinstance_by_type(TFrame *f, Value *x, PyObject *cls);

/* tr_random.c: b(...) for V_BOUND b a drawing method of a NumPy Generator
   or RandomState reached by an accessor (a global, an attribute; not an
   argument): a random graph op whose target is the bound method, the
   receiver guarded to be that object.  NULL with nothing set when b is
   something else. */
Value *tr_random_numpy_draw_call(TFrame *f, Value *b, Value **args, int nargs, PyObject *kwnames);

/* tr_objects.c: type(obj).name(obj, *args) when the class (a metaclass,
   for a class obj) has that method in Python -- __setattr__, __setitem__,
   __getitem__, __instancecheck__: inlined, reached through type(obj) and
   guarded to stay it (*handled true); else *handled false (NULL, no stop). */
Value *tr_call_own_method(TFrame *f, Value *obj, const char *cname, Value **args, int nargs,
                          bool *handled);

/* ---- tr_autograd.c ---- */

/* Whether fn is torch.autograd.Function.apply's function (Fn.apply), or
   (torch 2.14) the C classmethod descriptor it is. */
bool tr_is_autograd_apply(PyObject *fn);
/* Fn.apply(*args) for cls a torch.autograd.Function subclass read from a
   source, grad mode off: Fn.forward inlined with a FunctionCtx made while
   tracing (setup_context too when the class defines it); with grad mode
   on, a break.  NULL when tracing stops. */
Value *tr_autograd_apply(TFrame *f, Value *cls, Value **args, int nargs, PyObject *kwnames);
/* cls.apply(*args) called as LOAD_METHOD leaves it (cls a class read from
   a source): tr_autograd_apply when cls.apply is Function.apply bound to
   cls (guarded), else *handled false (NULL, no stop). */
Value *tr_autograd_apply_of_class(TFrame *f, Value *cls, Value **args, int nargs, PyObject *kwnames,
                                  bool *handled);

/* ---- tr_effects.c ---- */

/* obj.name = value (value NULL: del obj.name) for obj an object the
   program sees: recorded, replayed by the plan after the graph; a class
   with its own __setattr__ in Python has it inlined.  0 / -1 (a class
   that sets attributes otherwise stops tracing). */
int tr_visible_set_attr(TFrame *f, Value *obj, PyObject *name, Value *value);
/* What the writes recorded so far make obj.name: *found true with the
   value written (NULL: deleted), else *found false (NULL; NULL with an
   exception on an error).  Guards the aliasing it relied on. */
Value *tr_written_attr(TFrame *f, Value *obj, PyObject *name, bool *found);
/* d[key] = value for d a dict read from a source (V_DICT, src >= 0), key
   a constant: recorded and replayed as tr_visible_set_attr's writes.  0 / -1. */
int tr_visible_set_item(TFrame *f, Value *d, PyObject *key, Value *value);
/* del d[key] of such a dict, key its i-th: recorded (replayed as del) and
   taken out of d.  0 / -1. */
int tr_visible_del_item(TFrame *f, Value *d, int i);
/* d.pop(key[, dflt]), d.setdefault(key[, dflt]), d.update(other) of such
   a dict (key a constant; other a dict): the writes recorded as above.
   *handled false for another method or arity (NULL, no stop). */
Value *tr_visible_dict_method(TFrame *f, Value *d, PyObject *name, Value **args, int nargs,
                              bool *handled);
/* s.add(key) / s.discard(key) of a set the program holds (an accessor
   reaches it; key a hashable constant): recorded, replayed after the graph
   (RB_SETMEMBER); the frame does not read that set again
   (tr_note_set_read), and the sets read besides are guarded to be other
   objects.  *handled false for another method or value (NULL, no stop). */
Value *tr_visible_set_method(TFrame *f, Value *s, PyObject *name, Value **args, int nargs,
                             bool *handled);
/* A read of the contents of set s the program holds: a stop when the
   frame wrote into it, else guarded apart from the sets it wrote.  0 / -1. */
int tr_note_set_read(Tracer *t, Value *s);
/* object.__setattr__(obj, name, value), bound by super() inside a class's
   own __setattr__: recorded as obj.name = value done generically (no
   data descriptor of that name, guarded).  0 / -1. */
int tr_visible_generic_set_attr(TFrame *f, Value *obj, PyObject *name, Value *value);
/* dict's or OrderedDict's __setitem__(d, key, value) on d, a dict subclass
   instance read from a source, key a constant: recorded, replayed by that
   store (PyDict_SetItem / PyODict_SetItem).  0 / -1. */
int tr_visible_dict_set_item(TFrame *f, Value *d, PyObject *key, Value *value);
/* fn(*args) for fn object.__setattr__ (o, name, v) or dict's / OrderedDict's
   __setitem__ (d, key, v), called as a function on an object the program
   holds: those writes; *handled false (NULL, no stop) for any other call. */
Value *tr_builtin_store_call(TFrame *f, PyObject *fn, Value **args, int nargs, PyObject *kwnames,
                             bool *handled);
/* d's items (a dict subclass instance) are about to be read: stop when
   this frame wrote one of them (the plan writes after the graph: the read
   would see the old storage), and guard the other instances written to
   stay other objects.  0 / -1. */
int tr_note_dictsub_read(Tracer *t, Value *d);
/* obj.__dict__ read after this frame wrote attributes of obj: a copy of d
   (the dict as the frame found it) with those writes applied, standing
   for it (read only: a change stops tracing, as does handing it to the
   program); the other objects written guarded to stay others.  NULL when
   tracing stops. */
Value *tr_instance_dict_after_writes(Tracer *t, Value *obj, Value *d);
/* Whether a write to concrete object obj is recorded. */
bool tr_has_writes(Tracer *t, PyObject *obj);
/* Whether item writes (or deletes) into d, a dict the program can see,
   are recorded: replayed after the graph, they are not in the real dict
   yet.  An iterator over it rebuilt for the program would walk the old
   items (tr_rebuild.c refuses it). */
bool tr_dict_has_item_writes(Tracer *t, Value *d);
/* Drop the writes recorded after the first `mark`; free them all. */
void tr_writes_truncate(Tracer *t, int mark);
void tr_writes_free(Tracer *t);

/* ---- tr_operators.c ---- */

/* operator.<name> of BINARY_OP's oparg 0..12 (the in-place ones, 13..25,
   are these with inplace set), and of COMPARE_OP's Py_LT..Py_GE. */
extern const char *const tr_binary_op_names[13];
extern const char *const tr_binary_op_hints[13];
extern const char *const tr_compare_op_names[6];
/* operator.<opname>(a, b) (hint: the node's name); inplace for `a op= b`. */
Value *tr_apply_binary(TFrame *f, const char *opname, const char *hint,
                       Value *a, Value *b, bool inplace);
/* operator.<opname>(a). */
Value *tr_apply_unary(TFrame *f, const char *opname, Value *a);
/* Truth value known while tracing (`what` names the test): 1, 0 or -1. */
int tr_truth(TFrame *f, Value *v, const char *what);
/* `a is b`, `a in b`: 1, 0 or -1. */
int tr_is_same(TFrame *f, Value *a, Value *b);
int tr_contains(TFrame *f, Value *a, Value *b);
/* Whether v is == only to itself, and hashed by identity: an object read
   through an accessor (its type guarded) or made while tracing, of a
   class that keeps object's __eq__ and __hash__ (an nn.Module). */
bool tr_equal_only_to_itself(Value *v);
/* Whether a set finds v by identity alone: tr_equal_only_to_itself, or
   an input tensor, whose hash is its id (tensorops_hash_is_identity). */
bool tr_hashed_by_identity(Value *v);
/* An f-string part: format(conv(v), spec), conv_kind FORMAT_VALUE's
   oparg & 3. */
Value *tr_format_value(TFrame *f, Value *v, Value *spec, int conv_kind);
/* Constant strings parts[0..n) as a new tuple (BUILD_STRING). */
PyObject *tr_string_parts(TFrame *f, Value **parts, int n);

/* ---- tr_iter.c ---- */

/* base[index]. */
Value *tr_subscript(TFrame *f, Value *base, Value *index);
/* container[idx] = value: into a list or dict this frame made; anything
   else is a break (an eager step).  0 / -1. */
int tr_store_subscript(TFrame *f, Value *container, Value *idx, Value *value);
/* Items v iterates over, as a V_ITER (an iterator is its own). */
Value *tr_make_iter(TFrame *f, Value *v);
/* fn(self, *args): a method's function called with its receiver first
   (tr_call_or_undo).  NULL when tracing stops. */
Value *tr_call_with_self(TFrame *f, Value *fn, Value *self, Value **args, int nargs, PyObject *kwnames);
/* A generator expression made while tracing (fnv, a V_FUNC of generator
   code) called on args: a V_GEN run lazily, as the program would run it
   (tr_calls.c).  NULL when tracing stops. */
Value *tr_lazy_generator_expression(TFrame *f, Value *fnv, Value **args, int nargs);
/* reversed(v) of a tuple, a list or a constant range, tuple or str: a
   V_ITER over its items, last first (of a list, reading it: a change to
   the list while the iterator lives stops).  NULL when tracing stops. */
Value *tr_reversed(TFrame *f, Value *v);

/* tr_dictsub.c: a dict subclass instance read from a source (Value.dict_keys
   set by values.c), for the operations its class leaves to dict's C code,
   each guarded to stay so; a class that defines one in Python is inlined
   before these are asked.  NULL / -1 when tracing stops. */
bool tr_is_dict_view_object(Value *v);
Value *tr_dict_view_len(TFrame *f, Value *obj);
/* d.keys() / .values() / .items() (a tuple standing for the view) and
   d.get(k[, default]); *handled false (NULL, no stop) for other methods. */
Value *tr_dict_view_method(TFrame *f, Value *obj, PyObject *name, Value **args, int nargs,
                           PyObject *kwnames, bool *handled);
/* iter(d) over its keys, once __iter__ is dict's C code, guarded. */
Value *tr_dict_view_iter(TFrame *f, Value *obj);
/* d[key] (dunder "__getitem__") or key in d ("__contains__", a constant
   bool), once the class leaves it to dict: tr_dict_method_of_subclass. */
Value *tr_dict_view_item(TFrame *f, Value *obj, const char *dunder, Value *key);
/* DICT_MERGE / DICT_UPDATE of a dict subclass instance obj into `into` (a
   dict this frame builds; refuse_twice: a call's **, which refuses a key
   given twice): its keys, in its order, each with obj[key] as dict's merge
   reads it.  0 / -1. */
int tr_dict_view_merge(TFrame *f, Value *into, Value *obj, bool refuse_twice);
/* d[key] = value: the class's own __setitem__ in Python inlined, or dict's
   (OrderedDict's) recorded (tr_visible_dict_set_item).  0 / -1. */
int tr_dict_view_store(TFrame *f, Value *obj, Value *key, Value *value);
/* out, an enumerate() (count >= 0) or zip() (count -1) over iterators
   its[0..n), remembers where each stands.  0 / -1. */
int tr_derive_iter(Tracer *t, Value *out, Value **its, int n, long count);

/* ---- tr_calls.c ---- */

/* BEFORE_WITH of mgr: *exit, what the block's end calls, and *entered,
   what `as` binds.  0 / -1. */
int tr_enter_with(TFrame *f, Value *mgr, Value **exit, Value **entered);
/* Leave the torch state modes entered while tracing past the first
   `mark` (innermost first), as tracing found them.  Cannot fail. */
void tr_leave_state_modes(Tracer *t, Py_ssize_t mark);
/* The call of a CALL instruction; a call that stops is undone. */
Value *tr_call_or_undo(TFrame *f, Value *callable, Value **args, int nargs, PyObject *kwnames);

/* tr_partial.c: functools.partial.  tr_is_partial: a partial the program
   holds (its exact type, reached by an accessor).  tr_call_partial: p(*args,
   **kw) for such a partial or a V_PARTIAL, called as func(*p.args, *args,
   **{**p.keywords, **kw}) -- a held one's func, args and keywords read
   through their accessors and guarded.  tr_is_partial_class: fn is
   functools.partial itself.  tr_make_partial: functools.partial(func,
   *args, **kw) made while tracing, a V_PARTIAL (one made of a V_PARTIAL
   flattened, as partial's constructor flattens one without a __dict__).
   tr_partial_attr: p.func, p.args, p.keywords of a V_PARTIAL.  NULL when
   tracing stops. */
bool tr_is_partial(Value *v);
bool tr_is_partial_class(PyObject *fn);
Value *tr_call_partial(TFrame *f, Value *p, Value **args, int nargs, PyObject *kwnames);
Value *tr_make_partial(TFrame *f, Value **args, int nargs, PyObject *kwnames);
Value *tr_partial_attr(TFrame *f, Value *p, PyObject *name);
/* tr_interp.c: the next item of an iterator made while tracing -- a
   generator (run to its next yield), a zip or map (pulling from each of
   its iterators, a map calling its function), an iterator of known items
   -- as FOR_ITER takes it: 1 with *item, 0 when it has ended (*item: what
   a generator returned, NULL for None), -1 when tracing stops. */
int tr_iter_next(TFrame *f, Value *it, Value **item);
/* tr_fnmode.c: torch function modes (`with SomeTorchFunctionMode():`).
   tr_is_fnmode_stack_call: fn is torch._C's push or pop of the mode stack.
   tr_fnmode_stack_call: that call, on the tracer's own stack of modes.
   tr_fnmode_route: a torch call tensorops_call is about to trace while a
   mode is entered, handed to the innermost mode's __torch_function__
   (inlined) as torch would hand it.  NULL when tracing stops. */
bool tr_is_fnmode_stack_call(PyObject *fn);
Value *tr_fnmode_stack_call(TFrame *f, PyObject *fn, Value **args, int nargs, PyObject *kwnames);
Value *tr_fnmode_route(Tracer *t, NodeOp op, PyObject *target, const char *name_hint, Value **args,
                       int nargs, PyObject *kwnames, PyObject *eargs, PyObject *ekw);
/* tr_vmap.c: torch.vmap.  tr_is_vmap: fn is torch.vmap (torch.func.vmap).
   tr_make_vmap: torch.vmap(func, in_dims, out_dims, randomness) made while
   tracing, a V_VMAP.  tr_call_vmap: vm(*args, **kw), func inlined on
   batched tensors between functorch's level nodes.  NULL when tracing
   stops. */
bool tr_is_vmap(PyObject *fn);
Value *tr_make_vmap(TFrame *f, Value **args, int nargs, PyObject *kwnames);
Value *tr_call_vmap(TFrame *f, Value *vm, Value **args, int nargs, PyObject *kwnames);
/* o.<name> of an object reached by an accessor, read now and made a value
   of the accessor o.<name> (guarded as values.c guards what it reads).
   NULL with an exception. */
Value *tr_attr_through_accessor(Tracer *t, Value *o, const char *name);
/* dict.get / __getitem__ / __contains__ (meth, a method descriptor of
   dict) of self, a dict subclass reached by an accessor (as super() or the
   class itself leaves them to dict): the item read as self[key] from its
   storage (ACC_DICT_ITEM), its absence guarded (DICT_LACKS).  NULL when
   tracing stops. */
Value *tr_dict_method_of_subclass(TFrame *f, PyObject *meth, Value *self, Value **args,
                                  int nargs, PyObject *kwnames);
/* tr_objects.c: a functools.lru_cache wrapper the program holds, called:
   when its __wrapped__ is marked constant (below), the wrapper itself,
   once, while tracing (its cache answers as in eager), its result a
   constant of the graph; any other is a call break (the program may read
   the cache's statistics, cache_info()). */
bool tr_is_lru_wrapper(Value *v);
/* callable(*args) for the objects above -- an object made while tracing
   (tr_newobj_call), a partial, an lru_cache wrapper -- and a torch.ops
   operator the program holds that is no graph op (a break saying why).
   *handled false (NULL) for any other callable. */
Value *tr_call_held_object(TFrame *f, Value *callable, Value **args, int nargs, PyObject *kwnames,
                           bool *handled);
Value *tr_call_lru_wrapper(TFrame *f, Value *w, Value **args, int nargs, PyObject *kwnames);
/* Whether fn is a Python function marked `_dynamo_marked_constant` (by
   torch._dynamo.assume_constant_result): called once while tracing, on
   constant arguments, its result (a constant) folded into the graph. */
bool tr_is_marked_constant(PyObject *fn);
Value *tr_call_marked_constant(TFrame *f, PyObject *fn, Value **args, int nargs, PyObject *kwnames);

/* ---- tr_hatches.c: the escape hatches (dynscope/hatches.py) ---- */

typedef enum HatchKind {
    HATCH_NONE,
    HATCH_DISABLE,           /* a break: it runs without capture */
    HATCH_ALLOW_IN_GRAPH,    /* one opaque graph node */
    HATCH_SUBSTITUTE,        /* the replacement is traced instead */
} HatchKind;
/* The mark on callable fn (torch's disable marks learnt on first sight),
   with *rule (borrowed str: the decorator, as a break names it) and
   *extra (borrowed: a substitute's key, else None).  Cannot fail. */
HatchKind tr_hatch_of(PyObject *fn, PyObject **rule, PyObject **extra);
/* The call of a marked callable (a Value whose obj is the callable):
   a break, a node, or the replacement traced.  NULL when tracing stops. */
Value *tr_call_marked(TFrame *f, Value *callable, HatchKind kind, PyObject *rule, PyObject *extra,
                      Value **args, int nargs, PyObject *kwnames);

/* ---- tr_builtins.c ---- */

/* fn(*args) for fn a function of the builtins module. */
Value *tr_call_builtin(TFrame *f, PyObject *fn, Value **args, int nargs, PyObject *kwnames);
/* tp(*args) for tp a static (builtin) type. */
Value *tr_call_type(TFrame *f, PyObject *tp, Value **args, int nargs, PyObject *kwnames);

/* ---- tr_rebuild.c ---- */

/* What a plan rebuilds values from, gathered while its rebuilds are made. */
typedef struct Outputs {
    PyObject *nodes;          /* strong: graph output nodes, in order */
    Value **memo_vals;        /* owned: Values given a memo slot, by slot */
    Rebuild *memo;            /* owned: how to build each memo slot */
    int nmemo, memo_cap;
    int depth;                /* nesting of the rebuild being made */
} Outputs;

/* Index of node among o's outputs, added if new.  -1 on error. */
int tr_output_index(Outputs *o, NodeObject *node);
/* Free what o owns; o is zeroed. */
void tr_outputs_clear(Outputs *o);
/* How to rebuild v after the graph ran, into rb.  0 / -1 (t->reason set
   when v cannot be rebuilt). */
int tr_make_rebuild(Tracer *t, Outputs *o, Value *v, Rebuild *rb);
/* Frame f's live state at its end: every local and stack[0..sp).  0 / -1. */
int tr_make_live(Tracer *t, TFrame *f, Outputs *o, int sp, LiveState *live);
/* Mark the iterators v holds as ones the program gets.  Cannot fail. */
void tr_mark_escapes(Value *v, int depth);

/* ---- tr_exit.c ---- */

/* Make the root frame's end at instruction `in`, where tracing stopped:
   FRAME_ENDED, or FRAME_STOPPED (skip the frame). */
int tr_end_root_frame(TFrame *f, const Instr *in, int sp_before);
/* Build the entry's plan from t->end, close and compile the graph.
   0 / -1. */
int tr_finish(Tracer *t, TFrame *root, Plan *p);


/* ---- opcode handlers the dispatch (tr_interp.c) calls from other files:
   each returns 0, or -1 when tracing stops ---- */

/* The opcode after `in`, OP_UNKNOWN at the end (tr_interp.c). */
Op tr_next_op(TFrame *f, const Instr *in);
/* Whether `in` is followed by an instruction that tests truth itself. */
bool tr_truth_test_follows(TFrame *f, const Instr *in);
/* What a truth test at `in` is for, as break reasons name it: 'not', an
   'and'/'or', else a branch. */
const char *tr_truth_use(TFrame *f, const Instr *in);
/* tr_raise.c */
int tr_op_raise(TFrame *f, const Instr *in);
int tr_op_push_exc_info(TFrame *f);
int tr_op_check_exc_match(TFrame *f);
int tr_op_reraise(TFrame *f);
bool tr_catch_raised(TFrame *f, int offset, int *ip);
/* The stop is an AttributeError the traced code raised, out of a lookup
   that frame f's getattr(o, n, d) or hasattr(o, n) made (a class's
   __getattr__, as nn.Module's, raising for a name it lacks): caught there
   as those builtins catch it -- the stop cleared, f current again.
   Whether it was. */
bool tr_catch_attribute_error(TFrame *f);
/* tr_stackops.c */
int tr_op_binary_op(TFrame *f, const Instr *in);
int tr_op_compare_op(TFrame *f, const Instr *in);
int tr_op_to_bool(TFrame *f, const Instr *in);
int tr_op_is_op(TFrame *f, const Instr *in);
int tr_op_contains_op(TFrame *f, const Instr *in);
int tr_op_unary(TFrame *f, const Instr *in);
int tr_op_unary_not(TFrame *f);
int tr_op_binary_subscr(TFrame *f);
int tr_op_binary_slice(TFrame *f);
int tr_op_store_slice(TFrame *f);
int tr_op_store_subscr(TFrame *f);
int tr_op_store_attr(TFrame *f, const Instr *in);
/* tr_containers.c */
int tr_op_build_sequence(TFrame *f, const Instr *in);
int tr_op_build_slice(TFrame *f, const Instr *in);
int tr_op_build_map(TFrame *f, const Instr *in);
int tr_op_before_with(TFrame *f, const Instr *in);
int tr_op_load_super_attr(TFrame *f, const Instr *in);
int tr_op_map_add(TFrame *f, const Instr *in);
int tr_op_build_set(TFrame *f, const Instr *in);
int tr_op_set_add(TFrame *f, const Instr *in);
int tr_op_list_extend(TFrame *f, const Instr *in);
int tr_op_list_to_tuple(TFrame *f);
int tr_op_unpack_sequence(TFrame *f, const Instr *in);
int tr_op_swap(TFrame *f, const Instr *in);

/* the most dimensions the size layer follows per tensor (tr_symsizes.c, tr_shapes.c) */
#define SYM_MAX_DIMS 32
/* tr_symsizes.c: expressions (c + sum of k * monomial), for tr_shapes.c */
void sym_expr_const(SymExpr *e, long long c);
/* *e += k * b; false when it needs more than SYM_TERMS terms or overflows */
bool sym_expr_add(SymExpr *e, const SymExpr *b, long long k);
/* *e /= d when exact: d a constant, or one term dividing each of e's, or
   e a constant multiple of d */
bool sym_expr_div_exact(SymExpr *e, const SymExpr *d);
/* *e = a * b; false when a monomial would exceed SYM_DEGREE symbols, a
   result SYM_TERMS terms, or a number overflow */
bool sym_expr_mul(SymExpr *e, const SymExpr *a, const SymExpr *b);
bool sym_expr_equal(const SymExpr *a, const SymExpr *b);
/* The size a view's -1 takes: *q = total / rest, exact for every input the
   entry's guards pass -- where it divides as written, else under guarded
   relations.  1, 0 (no expression: the size stays unknown), -1 (stops). */
int sym_view_quotient(Tracer *t, const SymExpr *total, const SymExpr *rest, SymExpr *q);
long long sym_expr_value(Tracer *t, const SymExpr *e);    /* in this trace */
/* Whether `e OP 0` holds (op 0-5: < <= == != > >=): by the symbols' range,
   else on the example and guarded (GUARD_SIZES_HOLD).  1 / 0 / -1 (stops). */
int sym_relation_holds(Tracer *t, const SymExpr *e, int op);
/* A size value's expression: an int constant, or a value with one. */
bool sym_size_expr_of(Value *v, SymExpr *e);
/* Tensor value x's rank (*n, from its example) and its dimensions'
   expressions, known ones in *known; false when x has no shape. */
bool sym_dims_of(Value *x, SymExpr *dims, int *n, uint32_t *known);
int sym_example_shape(PyObject *obj, Py_ssize_t *sizes);  /* rank, or -1 */
int sym_set_dims(Value *v, const SymExpr *dims, int n, uint32_t known);   /* 0 / -1 */
int sym_set_sym(Value *v, const SymExpr *e);                              /* 0 / -1 */

#endif /* DYNSCOPE_TRANSLATE_INT_H */
