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

#endif /* DYNSCOPE_PYCOMPAT_H */
