/*
 * pycompat.h -- the one place that knows CPython's private frame layout and
 * bytecode encoding, for each CPython version dynscope runs on (3.11, 3.12,
 * 3.13).  Everything else in engine/ uses the public C API and the
 * accessors below; what cannot be inline (unexported helpers re-implemented,
 * the decoder) is in pycompat.c.
 *
 * Facts this header encodes (see DESIGN.md 3.1, docs/architecture.md
 * "CPython versions"):
 *   - the eval-frame function receives a _PyInterpreterFrame.  On 3.11 the
 *     caller (_PyEval_Vector) clears and pops it after we return; from 3.12
 *     the evaluator does, so a hook that answers a frame without evaluating
 *     it must clear and pop it itself (frame_clear_unevaluated);
 *   - an intercepted frame has not run MAKE_CELL / COPY_FREE_VARS yet: free
 *     variables are read from the function's closure;
 *   - 3.11/3.12 keep prev_instr (the unit before the next instruction),
 *     3.13 instr_ptr (the instruction about to run); 3.13 has no _PyCFrame
 *     (the thread's current frame is ts->current_frame) and holds the code
 *     as f_executable;
 *   - instructions are 2-byte code units followed by inline CACHE units;
 *     jump arguments are relative to the next instruction.  Each version's
 *     opcodes are decoded into the translator's own (Op), so the
 *     translator has one dispatch whatever the version.
 */
#ifndef DYNSCOPE_PYCOMPAT_H
#define DYNSCOPE_PYCOMPAT_H

#include "base.h"

#if PY_VERSION_HEX < 0x030B0000 || PY_VERSION_HEX >= 0x030E0000
#error "dynscope supports CPython 3.11, 3.12 and 3.13 (see README)"
#endif

#define PY_311 (PY_VERSION_HEX < 0x030C0000)
#define PY_312 (PY_VERSION_HEX >= 0x030C0000 && PY_VERSION_HEX < 0x030D0000)
#define PY_313 (PY_VERSION_HEX >= 0x030D0000)

#define Py_BUILD_CORE 1
#include <internal/pycore_frame.h>
#undef Py_BUILD_CORE
#include <opcode.h>
#include <frameobject.h>

typedef _PyInterpreterFrame EvalFrame;

#if PY_313
static inline PyCodeObject *frame_code(EvalFrame *f) { return (PyCodeObject *)f->f_executable; }
#else
static inline PyCodeObject *frame_code(EvalFrame *f) { return f->f_code; }
#endif
#if PY_311
static inline PyFunctionObject *frame_function(EvalFrame *f) { return f->f_func; }
#else
static inline PyFunctionObject *frame_function(EvalFrame *f) { return (PyFunctionObject *)f->f_funcobj; }
#endif
static inline PyObject *frame_func(EvalFrame *f) { return (PyObject *)frame_function(f); }
/* The function a frame object runs (borrowed; may be NULL or not a
   function for a module or class body). */
static inline PyObject *pyframe_func(PyFrameObject *f) { return frame_func(f->f_frame); }
static inline PyObject *frame_globals(EvalFrame *f) { return f->f_globals; }
static inline PyObject *frame_builtins(EvalFrame *f) { return f->f_builtins; }
static inline PyObject **frame_localsplus(EvalFrame *f) { return f->localsplus; }
/* Whether the frame belongs to a generator/coroutine (never captured). */
static inline bool frame_is_generator(EvalFrame *f)
{
    return f->owner != FRAME_OWNED_BY_THREAD;
}

/* Where the frame resumes: code unit `instr` is the next to run. */
static inline void frame_set_next_instr(EvalFrame *f, int instr)
{
#if PY_313
    f->instr_ptr = _PyCode_CODE(frame_code(f)) + instr;
#else
    f->prev_instr = _PyCode_CODE(frame_code(f)) + instr - 1;
#endif
}

/* Whether the frame is at its first instruction (not resumed). */
static inline bool frame_at_start(EvalFrame *f)
{
#if PY_313
    return f->instr_ptr == _PyCode_CODE(frame_code(f));
#else
    return f->prev_instr < _PyCode_CODE(frame_code(f));
#endif
}

/* The thread's current (innermost) interpreter frame, read and set. */
static inline _PyInterpreterFrame *thread_current_frame(PyThreadState *ts)
{
#if PY_313
    return ts->current_frame;
#else
    return ts->cframe->current_frame;
#endif
}
static inline void thread_set_current_frame(PyThreadState *ts, _PyInterpreterFrame *f)
{
#if PY_313
    ts->current_frame = f;
#else
    ts->cframe->current_frame = f;
#endif
}

/* The code unit the frame runs now -- for a caller, its call -- as
   CPython's _PyInterpreterFrame_LASTI. */
static inline int frame_lasti(EvalFrame *f)
{
#if PY_313
    return (int)(f->instr_ptr - _PyCode_CODE(frame_code(f)));
#else
    return (int)(f->prev_instr - _PyCode_CODE(frame_code(f)));
#endif
}

/* The innermost complete frame at or below f (a frame's prologue not yet
   run, and 3.13's C-stack entry frames, are skipped, as
   PyThreadState_GetFrame and PyFrame_GetBack skip them), or NULL.  Walks
   the interpreter's frames without making frame objects. */
static inline EvalFrame *frame_complete(EvalFrame *f)
{
    while (f != NULL && _PyFrame_IsIncomplete(f))
        f = f->previous;
    return f;
}

/* The line of code unit `instr` of co (PyCode_Addr2Line), from a small
   cache keyed by (code, unit): a compile's call path and a translation's
   user stacks ask for the same callers' lines again and again, and each
   answer otherwise scans the code's line table.  -1 when the unit has no
   line.  Cannot fail (GIL). */
int code_line_of(PyCodeObject *co, int instr);

/* The closure of the frame's function (borrowed), or NULL. */
static inline PyObject *frame_closure(EvalFrame *f)
{
    PyFunctionObject *fn = frame_function(f);
    return fn ? fn->func_closure : NULL;
}

/* The version tag of exact dict d (PEP 509): every change to d gives it a
   new value, unique in the process, so an equal tag means the same dict,
   unchanged.  Deprecated from 3.12 (dict watchers replace it for new code)
   but still kept by every mutation there and in 3.13; 3.14 removes it, and
   this returns 0 ("unknown") then, which turns the caches using it off. */
static inline uint64_t dict_version(PyObject *d)
{
#if PY_VERSION_HEX >= 0x030E0000
    (void)d;
    return 0;
#else
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    return ((PyDictObject *)d)->ma_version_tag;
#pragma GCC diagnostic pop
#endif
}

/* The version tag of type tp while it is valid (the type, and every class
   in its MRO, unchanged since the tag was given; tags are unique), else 0. */
static inline unsigned int type_version(PyTypeObject *tp)
{
    return PyType_HasFeature(tp, Py_TPFLAGS_VALID_VERSION_TAG) ? tp->tp_version_tag : 0;
}

/* obj's instance __dict__ when it has one made (borrowed), else NULL, and
   never one made here: an object that keeps its attributes inline (a
   managed dict nobody asked for) answers NULL, so that reading stays
   invisible to the program -- a made dict takes the object's attribute
   loads off CPython's inline-values fast path for good.  The managed
   dict's slot is the third word before the object on 3.11-3.13
   (pycore_object.h, MANAGED_DICT_OFFSET), on 3.12 holding the inline
   values instead, tagged with its low bit, until a dict is made. */
static inline PyObject *instance_dict_made(PyObject *obj)
{
    PyTypeObject *tp = Py_TYPE(obj);
#ifdef Py_GIL_DISABLED
    (void)tp;
    return NULL;                            /* another layout: not read here */
#else
    if (tp->tp_flags & Py_TPFLAGS_MANAGED_DICT) {
        PyObject *d = ((PyObject **)obj)[-3];
        return ((uintptr_t)d & 1) ? NULL : d;
    }
    if (tp->tp_dictoffset == 0)
        return NULL;
    PyObject **dp = _PyObject_GetDictPtr(obj);     /* the slot: nothing made */
    if (dp == NULL) {
        PyErr_Clear();
        return NULL;
    }
    return *dp;
#endif
}

/* Whether weak reference `weak` still points to `obj` (no reference
   taken: the guard check's hot path).  PyWeakref_GET_OBJECT is deprecated
   from 3.13 (PyWeakref_GetRef takes a reference) but still exact. */
static inline bool weakref_points_to(PyObject *weak, PyObject *obj)
{
#if PY_313
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#endif
    return PyWeakref_GET_OBJECT(weak) == obj;
#if PY_313
#pragma GCC diagnostic pop
#endif
}

/* What weak reference `weak` points to: a new reference, or NULL (no
   exception) when it is dead.  PyWeakref_GetRef from 3.13. */
static inline PyObject *weakref_referent_ref(PyObject *weak)
{
#if PY_313
    PyObject *obj = NULL;
    if (PyWeakref_GetRef(weak, &obj) < 0)
        PyErr_Clear();
    return obj;
#else
    PyObject *obj = PyWeakref_GetObject(weak);       /* borrowed, Py_None when dead */
    if (obj == NULL)
        PyErr_Clear();
    return obj == NULL || obj == Py_None ? NULL : Py_NewRef(obj);
#endif
}

/* Whether os.fork() counts the process's threads (to warn that it forks
   while multi-threaded) after the parent's after-fork hooks (3.13) rather
   than before them (3.12): a thread those hooks start again is counted. */
#define FORK_COUNTS_THREADS_AFTER_PARENT_HOOKS PY_313

/* Count a Python frame the hook answers without the interpreter toward
   the recursion limit, as the interpreter counts the frames it enters:
   3.11 counts them with C calls (Py_EnterRecursiveCall); from 3.12 Python
   frames have their own budget (py_recursion_remaining), mirrored here
   from CPython 3.12 Include/internal/pycore_ceval.h _Py_EnterRecursivePy
   and Python/ceval.c _Py_CheckRecursiveCallPy (not exported).  0, or -1
   with RecursionError (nothing counted). */
static inline int frame_recursion_enter(PyThreadState *ts)
{
#if PY_311
    (void)ts;
    /* (nonzero, not -1, on failure) the interpreter's own message at a frame's entry */
    return Py_EnterRecursiveCall("") ? -1 : 0;
#else
    if (ts->py_recursion_remaining-- > 0 || (ts->recursion_headroom && ts->py_recursion_remaining > -50))
        return 0;
    ts->py_recursion_remaining++;
    ts->recursion_headroom++;
    PyErr_SetString(PyExc_RecursionError, "maximum recursion depth exceeded");
    ts->recursion_headroom--;
    return -1;
#endif
}

static inline void frame_recursion_leave(PyThreadState *ts)
{
#if PY_311
    (void)ts;
    Py_LeaveRecursiveCall();
#else
    ts->py_recursion_remaining++;
#endif
}

/* Code-object extra slots: renamed PyUnstable_* in 3.12 (the old names
   are deprecated aliases). */
#if PY_311
#define code_extra_index_request _PyEval_RequestCodeExtraIndex
#define code_extra_get _PyCode_GetExtra
#define code_extra_set _PyCode_SetExtra
#else
#define code_extra_index_request PyUnstable_Eval_RequestCodeExtraIndex
#define code_extra_get PyUnstable_Code_GetExtra
#define code_extra_set PyUnstable_Code_SetExtra
#endif

/* The eval-frame function type and the default evaluator (which, from
   3.12, clears and pops the frame when it returns). */
typedef _PyFrameEvalFunction EvalFrameFunc;
static inline PyObject *frame_eval_default(PyThreadState *ts, EvalFrame *f, int throwflag)
{
    return _PyEval_EvalFrameDefault(ts, f, throwflag);
}

/* A frame the hook answered without the evaluator: on 3.12 and later the
   hook clears and pops it, as the evaluator would have (pycompat.c); on
   3.11 its caller does, and this does nothing. */
void frame_clear_unevaluated(PyThreadState *ts, EvalFrame *f);

/* A type's own __dict__ (new reference, or NULL): 3.12 keeps static
   builtin types' dicts (object's) in the interpreter, not tp_dict. */
static inline PyObject *type_dict_ref(PyTypeObject *tp)
{
#if PY_311
    return Py_XNewRef(tp->tp_dict);
#else
    return PyType_GetDict(tp);
#endif
}

/* Whether instances of heap type tp have a __dict__ (3.12 may keep it
   managed by the VM: no tp_dictoffset of its own). */
static inline bool type_has_instance_dict(PyTypeObject *tp)
{
#if PY_311
    return tp->tp_dictoffset != 0;
#else
    return tp->tp_dictoffset != 0 || (tp->tp_flags & Py_TPFLAGS_MANAGED_DICT);
#endif
}

/* The frame's own slots: its fast locals, then its cell variables (what a
   frame's state is made of; its free variables are its function's). */
static inline int code_nslots(PyCodeObject *co) { return co->co_nlocalsplus - co->co_nfreevars; }
/* Whether localsplus slot i is a cell variable (CO_FAST_CELL, the same
   bit on 3.11-3.13): an argument captured by an inner function, or a
   variable only inner functions and the code's LOAD_DEREFs use. */
static inline bool code_slot_is_cell(PyCodeObject *co, int i)
{
    return (PyBytes_AS_STRING(co->co_localspluskinds)[i] & 0x40) != 0;
}
/* Fill a FrameView for the start of frame f. */
static inline void frame_view_init(FrameView *fv, EvalFrame *f)
{
    PyCodeObject *co = frame_code(f);
    fv->code = co;
    fv->locals = f->localsplus;
    fv->nlocals = code_nslots(co);    /* the cells are empty: no MAKE_CELL ran */
    fv->stack = NULL;
    fv->nstack = 0;
    fv->globals = f->f_globals;
    fv->builtins = f->f_builtins;
    fv->closure = frame_closure(f);
    fv->iter_lists = NULL;
}

/* ---- decoding instructions ----
 *
 * The translator's dispatch reads Instrs, never a code unit.  Each CPython
 * version's opcodes are decoded into one vocabulary, Op: one per operation
 * the translator models, whatever the version calls it (LOAD_METHOD on
 * 3.11 is LOAD_ATTR with its method bit on 3.12; FORMAT_VALUE's work is
 * FORMAT_SIMPLE, FORMAT_WITH_SPEC and CONVERT_VALUE on 3.13; CALL_INTRINSIC_1
 * 5 is unary +).  Superinstructions (3.13 LOAD_FAST_LOAD_FAST ...) keep
 * their two arguments.  Jump targets are decoded to absolute code units,
 * so the translator never knows which jumps are relative or backwards.
 * Positions are code-unit indexes (byte offset = 2 * unit).
 */
typedef enum Op {
    OP_UNKNOWN,               /* not modelled: tracing stops */
    OP_NOP,                   /* RESUME, NOP, PRECALL, COPY_FREE_VARS ... */
    OP_LOAD_FAST,             /* LOAD_FAST, LOAD_FAST_CHECK */
    OP_LOAD_FAST_AND_CLEAR,   /* 3.12: an inlined comprehension saves its variable */
    OP_LOAD_FAST_LOAD_FAST,   /* 3.13: locals oparg, then arg2 */
    OP_STORE_FAST,
    OP_STORE_FAST_STORE_FAST, /* 3.13: oparg = pop(), then arg2 = pop() */
    OP_STORE_FAST_LOAD_FAST,  /* 3.13: oparg = pop(), then push arg2 */
    OP_DELETE_FAST,
    OP_LOAD_CONST,
    OP_LOAD_GLOBAL,           /* oparg: name index; flag: a NULL goes with it */
    OP_LOAD_DEREF,
    OP_LOAD_ATTR,             /* oparg: name index */
    OP_LOAD_METHOD,           /* oparg: name index; pushes a callable pair */
    OP_PUSH_NULL,
    OP_KW_NAMES,              /* 3.11, 3.12: the next CALL's keyword names */
    OP_CALL,                  /* oparg: argc */
    OP_CALL_KW,               /* 3.13: argc, keyword names on top */
    OP_BINARY_OP,             /* oparg: NB_* */
    OP_BINARY_SLICE,          /* 3.12: container[start:stop] */
    OP_STORE_SLICE,           /* 3.12: container[start:stop] = value */
    OP_COMPARE_OP,            /* oparg: Py_LT .. Py_GE; flag (3.13): then bool() */
    OP_IS_OP,
    OP_CONTAINS_OP,
    OP_UNARY_NEGATIVE,
    OP_UNARY_POSITIVE,
    OP_UNARY_INVERT,
    OP_UNARY_NOT,
    OP_TO_BOOL,               /* 3.13 */
    OP_BINARY_SUBSCR,
    OP_STORE_SUBSCR,
    OP_STORE_ATTR,            /* oparg: name index */
    OP_DELETE_ATTR,           /* oparg: name index */
    OP_BUILD_TUPLE,
    OP_BUILD_LIST,
    OP_BUILD_SLICE,
    OP_BUILD_MAP,
    OP_BUILD_CONST_KEY_MAP,
    OP_LIST_APPEND,
    OP_LIST_EXTEND,
    OP_LIST_TO_TUPLE,
    OP_UNPACK_SEQUENCE,
    OP_UNPACK_EX,             /* a, *b, c = v: oparg low byte the names before the
                                 star, high byte those after */
    OP_POP_TOP,
    OP_COPY,
    OP_SWAP,
    OP_GET_ITER,
    OP_FOR_ITER,              /* target: where an exhausted loop goes on */
    OP_END_FOR,               /* oparg: the values it pops */
    OP_JUMP,
    OP_POP_JUMP_IF_FALSE,
    OP_POP_JUMP_IF_TRUE,
    OP_POP_JUMP_IF_NONE,
    OP_POP_JUMP_IF_NOT_NONE,
    OP_JUMP_IF_FALSE_OR_POP,  /* 3.11 */
    OP_JUMP_IF_TRUE_OR_POP,   /* 3.11 */
    OP_FORMAT_VALUE,          /* oparg: conversion | 0x04 when a spec is on top */
    OP_BUILD_STRING,
    OP_RETURN_VALUE,
    OP_RETURN_CONST,          /* 3.12, 3.13 */
    OP_IMPORT_NAME,           /* oparg: name index; pops level, fromlist */
    OP_IMPORT_FROM,           /* oparg: name index; the module stays */
    OP_CALL_FUNCTION_EX,      /* flag: a kwargs dict on top of the args */
    OP_DICT_MERGE,            /* f(**a, **b): oparg = depth of the dict */
    OP_DICT_UPDATE,           /* {**a}: oparg = depth of the dict */
    OP_MAKE_CELL,             /* oparg: localsplus slot */
    OP_LOAD_CLOSURE,          /* 3.11, 3.12: push the cell of slot oparg */
    OP_STORE_DEREF,           /* oparg: localsplus slot of a cell or free var */
    OP_DELETE_DEREF,          /* oparg: localsplus slot of a cell or free var */
    OP_MAKE_FUNCTION,         /* oparg: what lies below the code (3.11, 3.12 flags;
                                 3.13: 0, set by OP_SET_FUNCTION_ATTRIBUTE) */
    OP_SET_FUNCTION_ATTRIBUTE,/* 3.13: oparg one MAKE_FUNCTION flag */
    OP_MAP_ADD,               /* {k: v for ...}: oparg = depth of the dict */
    OP_BUILD_SET,
    OP_SET_ADD,               /* {x for ...}: oparg = depth of the set */
    OP_SET_UPDATE,
    OP_BEFORE_WITH,           /* with mgr: pushes mgr.__exit__, mgr.__enter__() */
    OP_LOAD_SUPER_ATTR,       /* 3.12+: [super, cls, self] -> super(cls, self).name;
                                 oparg: name index; flag: a method (a call pair) */
    OP_RETURN_GENERATOR,      /* a generator's start: resumed with None */
    OP_YIELD_VALUE,           /* yield the top value, resumed with None */
    OP_GET_YIELD_FROM_ITER,   /* yield from v: iter(v), a generator kept as is */
    OP_SEND,                  /* yield from's step: [receiver, sent] -> [receiver,
                                 item]; target: where an ended receiver goes, its
                                 return value on top; flag: the receiver is then
                                 popped (3.11; 3.12+: by END_SEND) */
    OP_END_SEND,              /* 3.12+: [receiver, value] -> [value] */
    OP_RAISE_VARARGS,         /* oparg: 0 (bare raise), 1, 2 (raise ... from) */
    OP_PUSH_EXC_INFO,         /* an except handler's start */
    OP_CHECK_EXC_MATCH,       /* `except E`: is the exception an E? */
    OP_POP_EXCEPT,            /* leaving a handler */
    OP_RERAISE,               /* a handler that did not match, or finally */
} Op;

/* A code object's de-specialized bytecode (co_code, never the live
   adaptive copy the interpreter rewrites). */
typedef struct Bytecode {
    PyObject *bytes;               /* strong: co_code */
    const _Py_CODEUNIT *units;     /* borrowed from bytes */
    int nunits;
} Bytecode;

/* One decoded instruction. */
typedef struct Instr {
    Op op;          /* the operation (OP_NOP for a prefix dangling at the end) */
    int opcode;     /* CPython's opcode, for messages; EXTENDED_ARG for a prefix */
    int oparg;      /* with the EXTENDED_ARG prefixes' high bits, decoded per Op */
    int arg2;       /* a superinstruction's second argument */
    bool flag;      /* per Op: LOAD_GLOBAL's NULL, COMPARE_OP's bool() */
    int target;     /* a jump's absolute target (code unit), else -1 */
    int start;      /* code unit of its first EXTENDED_ARG prefix, else = offset */
    int offset;     /* code unit of the opcode */
    int next;       /* code unit of the next instruction (past the inline caches) */
} Instr;

/* Read co's bytecode into bc.  0, or -1 with an exception (bc->bytes
   NULL).  bytecode_close() releases it (and accepts a failed open). */
static inline int bytecode_open(Bytecode *bc, PyCodeObject *co)
{
    bc->bytes = PyCode_GetCode(co);
    if (bc->bytes == NULL) {
        bc->units = NULL;
        bc->nunits = 0;
        return -1;
    }
    bc->units = (const _Py_CODEUNIT *)PyBytes_AS_STRING(bc->bytes);
    bc->nunits = (int)(PyBytes_GET_SIZE(bc->bytes) / sizeof(_Py_CODEUNIT));
    return 0;
}

static inline void bytecode_close(Bytecode *bc)
{
    Py_CLEAR(bc->bytes);
    bc->units = NULL;
    bc->nunits = 0;
}

/* Decode the instruction that starts at code unit `at` (0 <= at <
   bc->nunits), its EXTENDED_ARG prefixes folded into its oparg.  Cannot
   fail; a prefix that ends co_code decodes as OP_NOP (opcode
   EXTENDED_ARG) whose next is bc->nunits.  pycompat.c. */
void instr_decode(const Bytecode *bc, int at, Instr *in);

/* The code unit jump instruction `in` goes to (when it jumps). */
static inline int instr_jump_target(const Instr *in) { return in->target; }

/* Whether a pair (callable, self-or-NULL) is pushed NULL first, as 3.11
   and 3.12 do ([NULL, callable] / [method, self]); 3.13 pushes
   [callable, NULL] / [method, self]. */
#define CALL_PAIR_NULL_FIRST (!PY_313)

/* Code-object layout facts the translator needs. */
static inline int code_ncells(PyCodeObject *co) { return co->co_ncellvars; }
static inline int code_nfree(PyCodeObject *co) { return co->co_nfreevars; }
static inline int code_nlocalsplus(PyCodeObject *co) { return co->co_nlocalsplus; }
static inline PyObject *code_localsplusnames(PyCodeObject *co) { return co->co_localsplusnames; }
static inline PyObject *code_exceptiontable(PyCodeObject *co) { return co->co_exceptiontable; }
/* Index of the first free variable in localsplus. */
static inline int code_first_free(PyCodeObject *co)
{
    return co->co_nlocalsplus - co->co_nfreevars;
}

/* ---- exception table ---- */

/* Whether code unit `instr` lies in a try/with/finally range: an exception
   raised there goes to a handler, which a plan cannot emulate.  A range
   whose handler only puts locals back and re-raises (3.12's inlined
   comprehensions) does not count: the exception leaves the frame as it
   would without it.  pycompat.c. */
bool code_instr_protected(PyCodeObject *co, int instr);
/* The handler of the exception table entry covering code unit instr, as
   the interpreter unwinds to it: the code unit it starts at, the stack
   depth it expects, and whether it wants the raising instruction's offset
   pushed (lasti).  false when no entry covers instr. */
bool code_handler_at(PyCodeObject *co, int instr, int *target, int *depth, bool *lasti);

/* ---- the captured frame on the stack during an eager step ---- */

/*
 * Code an eager step calls must see the captured function on the stack
 * (sys._getframe, tracebacks), as it would eagerly.  The intercepted frame
 * is linked in as the thread's current frame for the call, positioned at
 * the call's instruction; its free variables are filled as COPY_FREE_VARS
 * would (the frame's owner clears them), since the prologue never ran.
 */
typedef struct ShadowFrame {
    _PyInterpreterFrame *frame;   /* borrowed: the intercepted frame, or NULL */
    _PyInterpreterFrame *saved;   /* the current frame before */
} ShadowFrame;

/* Set the frame's free variables from its function's closure, as
   COPY_FREE_VARS would (an intercepted frame has not run it). */
static inline void frame_fill_free_vars(EvalFrame *f)
{
    PyCodeObject *co = frame_code(f);
    int first_free = co->co_nlocalsplus - co->co_nfreevars;
    PyObject *closure = frame_closure(f);
    for (int k = 0; closure && k < co->co_nfreevars; k++)
        if (f->localsplus[first_free + k] == NULL)
            f->localsplus[first_free + k] = Py_NewRef(PyTuple_GET_ITEM(closure, k));
}

static inline void shadow_enter(ShadowFrame *s, EvalFrame *f, int next_instr,
                                PyObject *const *locals, int nlocals)
{
    s->frame = f;
    if (f == NULL)
        return;
    PyThreadState *ts = PyThreadState_Get();
    PyCodeObject *co = frame_code(f);
    /* The fast locals become the values the plan carries now, so that code
       the eager step runs (locals(), sys._getframe().f_locals, a debugger)
       sees them as it would eagerly; an entry value a local no longer
       holds is let go, as the interpreter let it go when it was rebound. */
    for (int i = 0; i < nlocals && i < code_nslots(co); i++)
        if (f->localsplus[i] != locals[i])
            Py_XSETREF(f->localsplus[i], Py_XNewRef(locals[i]));
    frame_fill_free_vars(f);
    s->saved = thread_current_frame(ts);
    f->previous = s->saved;
    /* positioned on the call: the unit before the next instruction */
    frame_set_next_instr(f, next_instr);
#if PY_313
    f->instr_ptr--;
#endif
    thread_set_current_frame(ts, f);
}

/* Unlink the frame; when the call failed, add it to the traceback as the
   interpreter would have. */
static inline void shadow_exit(ShadowFrame *s, bool failed)
{
    if (s->frame == NULL)
        return;
    PyThreadState *ts = PyThreadState_Get();
    if (failed) {
        PyFrameObject *fo = PyEval_GetFrame();   /* borrowed: s->frame's object */
        if (fo != NULL)
            PyTraceBack_Here(fo);
    }
    else if (s->frame->frame_obj == NULL) {
        /* The plan's outcome holds the locals from here on: the frame must
           not keep an object alive past the point the program drops it (a
           __del__ runs when it would).  A failed call keeps them, for the
           traceback, as the interpreter's frame would; so does a frame the
           program holds an object of (inspect.currentframe()), whose
           f_locals it may read later. */
        for (int i = 0; i < code_nslots(frame_code(s->frame)); i++)
            Py_CLEAR(s->frame->localsplus[i]);
    }
    thread_set_current_frame(ts, s->saved);
    /* previous stays the caller's frame, which outlives f (the caller
       clears f when the hook returns): a frame object of f that outlives
       it is linked to its caller's (f_back) as the interpreter links it. */
    s->frame->previous = s->saved;
}

/* ---- deopt exit ---- */

/*
 * Continue frame f -- the very frame the hook intercepted, which no
 * instruction of has run -- in the default interpreter at code unit
 * `instr`, with fast locals `locals` (nlocals items, NULL = unbound) and
 * value stack `stack` (nstack items; NULL allowed where the calling
 * convention has one).  Both are moved into the frame: their slots become
 * NULL.  Returns the frame's result (new reference) or NULL with its
 * exception; the evaluator has run the frame either way (and, from 3.12,
 * cleared it).
 *
 * Running in f itself keeps what the program can see of it: a frame object
 * an eager step made (inspect.currentframe()) is the one that goes on, and
 * it ends as any frame does (its caller clears it; a frame object that
 * outlives it takes its locals over).  `locals` are the frame's slots
 * (code_nslots: its cells too, as cell objects: MAKE_CELL already ran).
 * Preconditions (frame_can_resume):
 * instr is an instruction boundary the interpreter can enter (not after
 * EXTENDED_ARG, not between KW_NAMES and CALL).  The prologue
 * (COPY_FREE_VARS) is skipped, so the free variables are set here as it
 * would set them.
 */
/* Whether frame f can be resumed with nlocals locals and nstack stack
   values (the preconditions of frame_eval_in_place). */
static inline bool frame_can_resume(EvalFrame *f, int nlocals, int nstack)
{
    PyCodeObject *co = frame_code(f);
    return nstack <= co->co_stacksize && nlocals <= code_nslots(co);
}

static inline PyObject *frame_eval_in_place(PyThreadState *ts, EvalFrame *f, PyObject **locals,
                                            int nlocals, PyObject **stack, int nstack,
                                            int instr)
{
    PyCodeObject *co = frame_code(f);
    for (int i = 0; i < nlocals; i++) {
        Py_XSETREF(f->localsplus[i], locals[i]);
        locals[i] = NULL;
    }
    frame_fill_free_vars(f);
    for (int j = 0; j < nstack; j++) {
        f->localsplus[co->co_nlocalsplus + j] = stack[j];
        stack[j] = NULL;
    }
    f->stacktop = co->co_nlocalsplus + nstack;
    frame_set_next_instr(f, instr);
    return _PyEval_EvalFrameDefault(ts, f, 0);
}

#endif /* DYNSCOPE_PYCOMPAT_H */
