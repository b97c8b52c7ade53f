/*
 * pycompat.h -- the one place that knows CPython's private frame layout and
 * bytecode encoding.  Everything else in engine/ uses the public C API and
 * the accessors below.
 *
 * Target: CPython 3.11.  Facts this header encodes (see DESIGN.md 3.1):
 *   - the eval-frame function receives a _PyInterpreterFrame; on 3.11 the
 *     caller (_PyEval_Vector) clears and pops it after we return, so a hook
 *     that does not evaluate the frame must leave it untouched;
 *   - an intercepted frame has not run MAKE_CELL / COPY_FREE_VARS yet: free
 *     variables are read from the function's closure;
 *   - instructions are 2-byte code units followed by inline CACHE units,
 *     and every jump argument is relative.
 */
#ifndef DYNSCOPE_PYCOMPAT_H
#define DYNSCOPE_PYCOMPAT_H

#include "engine.h"

#if PY_VERSION_HEX < 0x030B0000 || PY_VERSION_HEX >= 0x030C0000
#error "dynscope supports CPython 3.11 only for now (see README)"
#endif

#define Py_BUILD_CORE 1
#include <internal/pycore_frame.h>
#undef Py_BUILD_CORE
#include <opcode.h>
#include <frameobject.h>

typedef _PyInterpreterFrame EvalFrame;

static inline PyCodeObject *frame_code(EvalFrame *f) { return f->f_code; }
static inline PyObject *frame_func(EvalFrame *f) { return (PyObject *)f->f_func; }
static inline PyObject *frame_globals(EvalFrame *f) { return f->f_globals; }
static inline PyObject *frame_builtins(EvalFrame *f) { return f->f_builtins; }
static inline PyObject **frame_localsplus(EvalFrame *f) { return f->localsplus; }
/* Whether the frame belongs to a generator/coroutine (never captured). */
static inline bool frame_is_generator(EvalFrame *f)
{
    return f->owner != FRAME_OWNED_BY_THREAD;
}
/* Whether the frame is at its first instruction (not resumed). */
static inline bool frame_at_start(EvalFrame *f)
{
    return f->prev_instr < _PyCode_CODE(f->f_code);
}

/* The eval-frame function type and the default evaluator. */
typedef _PyFrameEvalFunction EvalFrameFunc;
static inline PyObject *frame_eval_default(PyThreadState *ts, EvalFrame *f, int throwflag)
{
    return _PyEval_EvalFrameDefault(ts, f, throwflag);
}

/* Fill a FrameView for the start of frame f. */
static inline void frame_view_init(FrameView *fv, EvalFrame *f)
{
    PyCodeObject *co = f->f_code;
    fv->code = co;
    fv->locals = f->localsplus;
    fv->nlocals = co->co_nlocals;
    fv->stack = NULL;
    fv->nstack = 0;
    fv->globals = f->f_globals;
    fv->builtins = f->f_builtins;
    fv->closure = f->f_func ? f->f_func->func_closure : NULL;
    fv->iter_lists = NULL;
}

/* ---- bytecode ---- */

/* Number of inline CACHE code units after `opcode` (3.11's _PyOpcode_Caches,
   which libpython does not export). */
static inline int opcode_cache_units(int opcode)
{
    switch (opcode) {
    case BINARY_SUBSCR: return 4;
    case STORE_SUBSCR: return 1;
    case UNPACK_SEQUENCE: return 1;
    case STORE_ATTR: return 4;
    case LOAD_ATTR: return 4;
    case COMPARE_OP: return 2;
    case LOAD_GLOBAL: return 5;
    case BINARY_OP: return 1;
    case LOAD_METHOD: return 10;
    case PRECALL: return 1;
    case CALL: return 4;
    default: return 0;
    }
}

/* ---- decoding instructions ----
 *
 * How an instruction is read from co_code: the translator's dispatch reads
 * Instrs and never a code unit, so another CPython version adds its layout
 * here.  3.11's layout: 2-byte code units (opcode, 8-bit oparg); each
 * EXTENDED_ARG prefix gives the next unit's oparg 8 higher bits; inline
 * CACHE units follow the opcode (opcode_cache_units); every jump argument
 * is relative to the next instruction, backwards for the *_BACKWARD*
 * opcodes.  Positions are code-unit indexes (byte offset = 2 * unit).
 */

/* A code object's de-specialized bytecode (co_code, never the live
   adaptive copy the interpreter rewrites). */
typedef struct Bytecode {
    PyObject *bytes;               /* strong: co_code */
    const _Py_CODEUNIT *units;     /* borrowed from bytes */
    int nunits;
} Bytecode;

/* One decoded instruction. */
typedef struct Instr {
    int opcode;     /* EXTENDED_ARG only for a prefix dangling at the end */
    int oparg;      /* with the EXTENDED_ARG prefixes' high bits */
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
   fail; a prefix that ends co_code decodes as an EXTENDED_ARG instruction
   whose next is bc->nunits. */
static inline void instr_decode(const Bytecode *bc, int at, Instr *in)
{
    int oparg = 0;
    in->start = at;
    for (;;) {
        _Py_CODEUNIT word = bc->units[at];
        in->opcode = _Py_OPCODE(word);
        oparg = (oparg << 8) | _Py_OPARG(word);
        in->offset = at;
        if (in->opcode != EXTENDED_ARG || at + 1 >= bc->nunits)
            break;
        at++;
    }
    in->oparg = oparg;
    in->next = at + 1 + opcode_cache_units(in->opcode);
}

/* The code unit jump instruction `in` goes to (when it jumps). */
static inline int instr_jump_target(const Instr *in)
{
    switch (in->opcode) {
    case JUMP_BACKWARD:
    case JUMP_BACKWARD_NO_INTERRUPT:
    case POP_JUMP_BACKWARD_IF_FALSE:
    case POP_JUMP_BACKWARD_IF_TRUE:
    case POP_JUMP_BACKWARD_IF_NONE:
    case POP_JUMP_BACKWARD_IF_NOT_NONE:
        return in->next - in->oparg;
    default:
        return in->next + in->oparg;
    }
}

/* LOAD_GLOBAL: index of the name in co_names; whether a NULL is pushed
   before the value (the 3.11 calling convention). */
static inline int instr_global_name(const Instr *in) { return in->oparg >> 1; }
static inline bool instr_global_pushes_null(const Instr *in) { return (in->oparg & 1) != 0; }

/* COMPARE_OP: the comparison, Py_LT .. Py_GE (0..5) when valid. */
static inline int instr_compare_op(const Instr *in) { return in->oparg; }

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

/* One varint of 3.11's exception table (6-bit groups, bit 6 = more). */
static inline const unsigned char *exctable_varint(const unsigned char *p, int *out)
{
    int v = *p & 63;
    while (*p & 64) {
        p++;
        v = (v << 6) | (*p & 63);
    }
    *out = v;
    return p + 1;
}

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
    _Py_CODEUNIT *saved_prev_instr;
} ShadowFrame;

static inline void shadow_enter(ShadowFrame *s, EvalFrame *f, int next_instr,
                                PyObject *const *locals, int nlocals)
{
    s->frame = f;
    if (f == NULL)
        return;
    PyThreadState *ts = PyThreadState_Get();
    PyCodeObject *co = f->f_code;
    /* The fast locals become the values the plan carries now, so that code
       the eager step runs (locals(), sys._getframe().f_locals, a debugger)
       sees them as it would eagerly; an entry value a local no longer
       holds is let go, as the interpreter let it go when it was rebound. */
    for (int i = 0; i < nlocals && i < co->co_nlocals; i++)
        if (f->localsplus[i] != locals[i])
            Py_XSETREF(f->localsplus[i], Py_XNewRef(locals[i]));
    int first_free = co->co_nlocalsplus - co->co_nfreevars;
    PyObject *closure = f->f_func ? f->f_func->func_closure : NULL;
    for (int k = 0; closure && k < co->co_nfreevars; k++)
        if (f->localsplus[first_free + k] == NULL)
            f->localsplus[first_free + k] = Py_NewRef(PyTuple_GET_ITEM(closure, k));
    s->saved = ts->cframe->current_frame;
    s->saved_prev_instr = f->prev_instr;
    f->previous = s->saved;
    f->prev_instr = _PyCode_CODE(co) + next_instr - 1;
    ts->cframe->current_frame = f;
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
        for (int i = 0; i < s->frame->f_code->co_nlocals; i++)
            Py_CLEAR(s->frame->localsplus[i]);
    }
    ts->cframe->current_frame = s->saved;
    /* previous stays the caller's frame, which outlives f (the caller
       clears f when the hook returns): a frame object of f that outlives
       it is linked to its caller's (f_back) as the interpreter links it. */
    s->frame->previous = s->saved;
}

/* Whether code unit `instr` lies in a try/with/finally range: an exception
   raised there goes to a handler, which a plan cannot emulate. */
static inline bool code_instr_protected(PyCodeObject *co, int instr)
{
    PyObject *table = co->co_exceptiontable;
    const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(table);
    const unsigned char *end = p + PyBytes_GET_SIZE(table);
    while (p < end) {
        int start, size, target, depth;
        p = exctable_varint(p, &start);
        p = exctable_varint(p, &size);
        p = exctable_varint(p, &target);
        p = exctable_varint(p, &depth);
        (void)target;
        (void)depth;
        if (instr >= start && instr < start + size)
            return true;
    }
    return false;
}

/* ---- deopt exit ---- */

/*
 * Continue frame f -- the very frame the hook intercepted, which no
 * instruction of has run -- in the default interpreter at code unit
 * `instr`, with fast locals `locals` (nlocals items, NULL = unbound) and
 * value stack `stack` (nstack items; NULL allowed where the calling
 * convention has one).  Both are moved into the frame: their slots become
 * NULL.  Returns the frame's result (new reference) or NULL with its
 * exception.
 *
 * Running in f itself keeps what the program can see of it: a frame object
 * an eager step made (inspect.currentframe()) is the one that goes on, and
 * it ends as any frame does (its caller clears it; a frame object that
 * outlives it takes its locals over).  Preconditions: no cell variables;
 * instr is an instruction boundary the interpreter can enter (not after
 * EXTENDED_ARG, not between KW_NAMES and CALL).  The prologue
 * (COPY_FREE_VARS) is skipped, so the free variables are set here as it
 * would set them.
 */
static inline PyObject *frame_eval_in_place(PyThreadState *ts, EvalFrame *f, PyObject **locals,
                                            int nlocals, PyObject **stack, int nstack,
                                            int instr)
{
    PyCodeObject *co = f->f_code;
    if (co->co_ncellvars != 0 || nstack > co->co_stacksize || nlocals > co->co_nlocals) {
        PyErr_SetString(PyExc_SystemError, "dynscope: cannot resume this frame in the interpreter");
        return NULL;
    }
    for (int i = 0; i < nlocals; i++) {
        Py_XSETREF(f->localsplus[i], locals[i]);
        locals[i] = NULL;
    }
    int first_free = co->co_nlocalsplus - co->co_nfreevars;
    PyObject *closure = f->f_func ? f->f_func->func_closure : NULL;
    for (int k = 0; closure && k < co->co_nfreevars; k++)
        if (f->localsplus[first_free + k] == NULL)
            f->localsplus[first_free + k] = Py_NewRef(PyTuple_GET_ITEM(closure, k));
    for (int j = 0; j < nstack; j++) {
        f->localsplus[co->co_nlocalsplus + j] = stack[j];
        stack[j] = NULL;
    }
    f->stacktop = co->co_nlocalsplus + nstack;
    f->prev_instr = _PyCode_CODE(co) + instr - 1;
    return _PyEval_EvalFrameDefault(ts, f, 0);
}

#endif /* DYNSCOPE_PYCOMPAT_H */
