/*
 * pycompat.c -- the parts of the CPython-version layer (pycompat.h) that
 * are not inline: the bytecode decoder, lines of code units (cached), the
 * exception table's reading, and CPython helpers libpython does not export,
 * re-implemented once with the source they mirror named.
 *
 * Invariants: the decoder reads co_code (de-specialized) only, and maps
 * every opcode it does not know to OP_UNKNOWN, never guesses; the inline
 * cache sizes come from CPython's own table for the version built against.
 */
#include "pycompat.h"

/* CPython's inline-cache sizes per opcode (_PyOpcode_Caches), from its own
   header: defined here, hidden, since libpython does not export them. */
#if PY_313
#define Py_BUILD_CORE 1
#define NEED_OPCODE_METADATA
#include <internal/pycore_opcode_metadata.h>
#undef NEED_OPCODE_METADATA
#undef Py_BUILD_CORE
#define CACHE_UNITS(op) _PyOpcode_Caches[op]
#elif PY_312
#define Py_BUILD_CORE 1
#define NEED_OPCODE_TABLES
#include <internal/pycore_opcode.h>
#include <internal/pycore_intrinsics.h>
#undef NEED_OPCODE_TABLES
#undef Py_BUILD_CORE
#define CACHE_UNITS(op) _PyOpcode_Caches[op]
#else
/* 3.11's header defines its table only where NEED_OPCODE_TABLES is set,
   which also defines others we do not want: the few that have caches. */
static int cache_units_311(int opcode)
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
#define CACHE_UNITS(op) cache_units_311(op)
#endif

#if !PY_311
#define INTRINSIC_UNARY_POSITIVE_ 5     /* CALL_INTRINSIC_1 operands (pycore_intrinsics.h) */
#define INTRINSIC_LIST_TO_TUPLE_ 6
#endif

/* ---- the decoder ---- */

/* decode_op's second half: imports, calls with unpacking, closures and
   nested functions, generators. */
static void decode_calls_and_scopes(Instr *in)
{
    int oparg = in->oparg;
    switch (in->opcode) {
    case IMPORT_NAME: in->op = OP_IMPORT_NAME; break;
    case IMPORT_FROM: in->op = OP_IMPORT_FROM; break;
    case CALL_FUNCTION_EX: in->op = OP_CALL_FUNCTION_EX; in->flag = (oparg & 1) != 0; break;
    case DICT_MERGE: in->op = OP_DICT_MERGE; break;
    case DICT_UPDATE: in->op = OP_DICT_UPDATE; break;
    case MAKE_CELL: in->op = OP_MAKE_CELL; break;
#if !PY_313
    case LOAD_CLOSURE: in->op = OP_LOAD_CLOSURE; break;   /* 3.13: a LOAD_FAST */
#endif
    case STORE_DEREF: in->op = OP_STORE_DEREF; break;
    case DELETE_DEREF: in->op = OP_DELETE_DEREF; break;
    case MAKE_FUNCTION: in->op = OP_MAKE_FUNCTION; break;
#if PY_313
    case SET_FUNCTION_ATTRIBUTE: in->op = OP_SET_FUNCTION_ATTRIBUTE; break;
#endif
    case MAP_ADD: in->op = OP_MAP_ADD; break;
    case BUILD_SET: in->op = OP_BUILD_SET; break;
    case SET_ADD: in->op = OP_SET_ADD; break;
    case SET_UPDATE: in->op = OP_SET_UPDATE; break;
    case BEFORE_WITH: in->op = OP_BEFORE_WITH; break;
#if !PY_311
    case LOAD_SUPER_ATTR: in->op = OP_LOAD_SUPER_ATTR; in->oparg = oparg >> 2; in->flag = oparg & 1; break;
#endif
    case RETURN_GENERATOR: in->op = OP_RETURN_GENERATOR; break;
    case YIELD_VALUE: in->op = OP_YIELD_VALUE; break;
    case GET_YIELD_FROM_ITER: in->op = OP_GET_YIELD_FROM_ITER; break;
    case SEND: in->op = OP_SEND; in->target = in->next + oparg; in->flag = PY_311; break;
#if !PY_311
    case END_SEND: in->op = OP_END_SEND; break;
#endif
    case RAISE_VARARGS: in->op = OP_RAISE_VARARGS; break;
    case PUSH_EXC_INFO: in->op = OP_PUSH_EXC_INFO; break;
    case CHECK_EXC_MATCH: in->op = OP_CHECK_EXC_MATCH; break;
    case POP_EXCEPT: in->op = OP_POP_EXCEPT; break;
    case RERAISE: in->op = OP_RERAISE; break;
    default: break;
    }
}

/* Map CPython's opcode (with its full oparg) to in->op and its decoded
   arguments; in->next is set.  Version-specific spellings are here and
   nowhere else. */
static void decode_op(Instr *in)
{
    int oparg = in->oparg;
    in->op = OP_UNKNOWN;
    in->arg2 = 0;
    in->flag = false;
    in->target = -1;
    switch (in->opcode) {
    case NOP: case RESUME: case CACHE:
    case COPY_FREE_VARS:       /* free variables are read from the function */
#if PY_311
    case PRECALL:
#endif
        in->op = OP_NOP; break;
    case LOAD_FAST: in->op = OP_LOAD_FAST; break;
#if !PY_311
    case LOAD_FAST_CHECK: in->op = OP_LOAD_FAST; break;
    case LOAD_FAST_AND_CLEAR: in->op = OP_LOAD_FAST_AND_CLEAR; break;
#endif
#if PY_313
    case LOAD_FAST_LOAD_FAST:
        in->op = OP_LOAD_FAST_LOAD_FAST; in->oparg = oparg >> 4; in->arg2 = oparg & 15; break;
    case STORE_FAST_STORE_FAST:
        in->op = OP_STORE_FAST_STORE_FAST; in->oparg = oparg >> 4; in->arg2 = oparg & 15; break;
    case STORE_FAST_LOAD_FAST:
        in->op = OP_STORE_FAST_LOAD_FAST; in->oparg = oparg >> 4; in->arg2 = oparg & 15; break;
#endif
    case STORE_FAST: in->op = OP_STORE_FAST; break;
    case DELETE_FAST: in->op = OP_DELETE_FAST; break;
    case LOAD_CONST: in->op = OP_LOAD_CONST; break;
    case LOAD_GLOBAL:
        in->op = OP_LOAD_GLOBAL; in->oparg = oparg >> 1; in->flag = oparg & 1; break;
    case LOAD_DEREF: in->op = OP_LOAD_DEREF; break;
#if PY_311
    case LOAD_ATTR: in->op = OP_LOAD_ATTR; break;
    case LOAD_METHOD: in->op = OP_LOAD_METHOD; break;
#else
    case LOAD_ATTR:
        in->op = (oparg & 1) ? OP_LOAD_METHOD : OP_LOAD_ATTR; in->oparg = oparg >> 1; break;
#endif
    case PUSH_NULL: in->op = OP_PUSH_NULL; break;
#if PY_313
    case CALL_KW: in->op = OP_CALL_KW; break;
#else
    case KW_NAMES: in->op = OP_KW_NAMES; break;
#endif
    case CALL: in->op = OP_CALL; break;
    case BINARY_OP: in->op = OP_BINARY_OP; break;
#if !PY_311
    case BINARY_SLICE: in->op = OP_BINARY_SLICE; break;
    case STORE_SLICE: in->op = OP_STORE_SLICE; break;
#endif
    case COMPARE_OP:
        in->op = OP_COMPARE_OP;
#if PY_313
        in->oparg = oparg >> 5; in->flag = (oparg & 16) != 0;
#elif PY_312
        in->oparg = oparg >> 4;
#endif
        break;
    case IS_OP: in->op = OP_IS_OP; break;
    case CONTAINS_OP: in->op = OP_CONTAINS_OP; break;
    case UNARY_NEGATIVE: in->op = OP_UNARY_NEGATIVE; break;
    case UNARY_INVERT: in->op = OP_UNARY_INVERT; break;
    case UNARY_NOT: in->op = OP_UNARY_NOT; break;
#if PY_311
    case UNARY_POSITIVE: in->op = OP_UNARY_POSITIVE; break;
#else
    case CALL_INTRINSIC_1:
        if (oparg == INTRINSIC_UNARY_POSITIVE_)
            in->op = OP_UNARY_POSITIVE;
        else if (oparg == INTRINSIC_LIST_TO_TUPLE_)
            in->op = OP_LIST_TO_TUPLE;
        break;
#endif
#if PY_313
    case TO_BOOL: in->op = OP_TO_BOOL; break;
#endif
    case BINARY_SUBSCR: in->op = OP_BINARY_SUBSCR; break;
    case STORE_SUBSCR: in->op = OP_STORE_SUBSCR; break;
    case STORE_ATTR: in->op = OP_STORE_ATTR; break;
    case DELETE_ATTR: in->op = OP_DELETE_ATTR; break;
    case BUILD_TUPLE: in->op = OP_BUILD_TUPLE; break;
    case BUILD_LIST: in->op = OP_BUILD_LIST; break;
    case BUILD_SLICE: in->op = OP_BUILD_SLICE; break;
    case BUILD_MAP: in->op = OP_BUILD_MAP; break;
    case BUILD_CONST_KEY_MAP: in->op = OP_BUILD_CONST_KEY_MAP; break;
    case LIST_APPEND: in->op = OP_LIST_APPEND; break;
    case LIST_EXTEND: in->op = OP_LIST_EXTEND; break;
#if PY_311
    case LIST_TO_TUPLE: in->op = OP_LIST_TO_TUPLE; break;
#endif
    case UNPACK_SEQUENCE: in->op = OP_UNPACK_SEQUENCE; break;
    case UNPACK_EX: in->op = OP_UNPACK_EX; break;
    case POP_TOP: in->op = OP_POP_TOP; break;
    case COPY: in->op = OP_COPY; break;
    case SWAP: in->op = OP_SWAP; break;
    case GET_ITER: in->op = OP_GET_ITER; break;
    case FOR_ITER:
        /* an exhausted loop pops the iterator and goes on past END_FOR
           (3.12; 3.13: END_FOR and POP_TOP), which never run */
        in->op = OP_FOR_ITER;
        in->target = in->next + oparg + (PY_311 ? 0 : PY_312 ? 1 : 2);
        break;
#if !PY_311
    case END_FOR: in->op = OP_END_FOR; in->oparg = PY_312 ? 2 : 1; break;
    case RETURN_CONST: in->op = OP_RETURN_CONST; break;
#endif
    case JUMP_FORWARD:
        in->op = OP_JUMP; in->target = in->next + oparg; break;
    case JUMP_BACKWARD:
    case JUMP_BACKWARD_NO_INTERRUPT:
        in->op = OP_JUMP; in->target = in->next - oparg; break;
#if PY_311
    case POP_JUMP_FORWARD_IF_FALSE: in->op = OP_POP_JUMP_IF_FALSE; in->target = in->next + oparg; break;
    case POP_JUMP_FORWARD_IF_TRUE: in->op = OP_POP_JUMP_IF_TRUE; in->target = in->next + oparg; break;
    case POP_JUMP_FORWARD_IF_NONE: in->op = OP_POP_JUMP_IF_NONE; in->target = in->next + oparg; break;
    case POP_JUMP_FORWARD_IF_NOT_NONE: in->op = OP_POP_JUMP_IF_NOT_NONE; in->target = in->next + oparg; break;
    case POP_JUMP_BACKWARD_IF_FALSE: in->op = OP_POP_JUMP_IF_FALSE; in->target = in->next - oparg; break;
    case POP_JUMP_BACKWARD_IF_TRUE: in->op = OP_POP_JUMP_IF_TRUE; in->target = in->next - oparg; break;
    case POP_JUMP_BACKWARD_IF_NONE: in->op = OP_POP_JUMP_IF_NONE; in->target = in->next - oparg; break;
    case POP_JUMP_BACKWARD_IF_NOT_NONE: in->op = OP_POP_JUMP_IF_NOT_NONE; in->target = in->next - oparg; break;
    case JUMP_IF_FALSE_OR_POP: in->op = OP_JUMP_IF_FALSE_OR_POP; in->target = in->next + oparg; break;
    case JUMP_IF_TRUE_OR_POP: in->op = OP_JUMP_IF_TRUE_OR_POP; in->target = in->next + oparg; break;
#else
    case POP_JUMP_IF_FALSE: in->op = OP_POP_JUMP_IF_FALSE; in->target = in->next + oparg; break;
    case POP_JUMP_IF_TRUE: in->op = OP_POP_JUMP_IF_TRUE; in->target = in->next + oparg; break;
    case POP_JUMP_IF_NONE: in->op = OP_POP_JUMP_IF_NONE; in->target = in->next + oparg; break;
    case POP_JUMP_IF_NOT_NONE: in->op = OP_POP_JUMP_IF_NOT_NONE; in->target = in->next + oparg; break;
#endif
#if PY_313
    /* FORMAT_VALUE's work in three: the conversion, then format() */
    case CONVERT_VALUE: in->op = OP_FORMAT_VALUE; in->oparg = oparg & 0x03; break;
    case FORMAT_SIMPLE: in->op = OP_FORMAT_VALUE; in->oparg = 0; break;
    case FORMAT_WITH_SPEC: in->op = OP_FORMAT_VALUE; in->oparg = 0x04; break;
#else
    case FORMAT_VALUE: in->op = OP_FORMAT_VALUE; break;
#endif
    case BUILD_STRING: in->op = OP_BUILD_STRING; break;
    case RETURN_VALUE: in->op = OP_RETURN_VALUE; break;
    default:
        decode_calls_and_scopes(in);
        break;
    }
}

void instr_decode(const Bytecode *bc, int at, Instr *in)
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
    if (in->opcode == EXTENDED_ARG) {   /* dangling at the end */
        in->op = OP_NOP;
        in->arg2 = 0;
        in->flag = false;
        in->target = -1;
        in->next = at + 1;
        return;
    }
    in->next = at + 1 + CACHE_UNITS(in->opcode);
    decode_op(in);
}

/* ---- lines of code units ---- */

/* code_line_of's cache: direct-mapped; each slot holds a weak reference to
   its code, so an address is never a freed code's, and a dead code (with
   the cache entries in its co_extra) is not kept alive by it. */
#define LINE_CACHE_SLOTS 1024
static struct { PyObject *weak; int instr, line; } line_cache[LINE_CACHE_SLOTS];

int code_line_of(PyCodeObject *co, int instr)
{
    uintptr_t h = ((uintptr_t)co >> 4) ^ ((uintptr_t)instr * 2654435761u);
    size_t slot = (size_t)(h ^ (h >> 11)) % LINE_CACHE_SLOTS;
    if (line_cache[slot].weak != NULL && line_cache[slot].instr == instr
        && weakref_points_to(line_cache[slot].weak, (PyObject *)co))
        return line_cache[slot].line;
    int line = PyCode_Addr2Line(co, instr * (int)sizeof(_Py_CODEUNIT));
    PyObject *weak = PyWeakref_NewRef((PyObject *)co, NULL);
    if (weak == NULL) {                        /* not cached: still the line */
        PyErr_Clear();
        return line;
    }
    Py_XSETREF(line_cache[slot].weak, weak);
    line_cache[slot].instr = instr;
    line_cache[slot].line = line;
    return line;
}

/* ---- exception table ---- */

/* One varint of the exception table (6-bit groups, bit 6 = more; the
   same on 3.11-3.13). */
static const unsigned char *exctable_varint(const unsigned char *p, int *out)
{
    int v = *p & 63;
    while (*p & 64) {
        p++;
        v = (v << 6) | (*p & 63);
    }
    *out = v;
    return p + 1;
}

/* Whether the handler at code unit `at` only restores locals and
   re-raises: SWAP, POP_TOP, STORE_FAST ... then RERAISE, as 3.12's inlined
   comprehensions clean up.  Such a handler changes nothing a plan's caller
   can see: the exception leaves the frame either way. */
static bool handler_only_reraises(PyCodeObject *co, int at)
{
    Bytecode bc;
    if (bytecode_open(&bc, co) < 0) {
        PyErr_Clear();
        return false;
    }
    bool reraises = false;
    for (int n = 0; at < bc.nunits && n < 16; n++) {
        Instr in;
        instr_decode(&bc, at, &in);
        if (in.opcode == RERAISE) {
            reraises = true;
            break;
        }
        if (in.op != OP_SWAP && in.op != OP_POP_TOP && in.op != OP_STORE_FAST && in.op != OP_NOP)
            break;
        at = in.next;
    }
    bytecode_close(&bc);
    return reraises;
}

bool code_handler_at(PyCodeObject *co, int instr, int *target, int *depth, bool *lasti)
{
    PyObject *table = co->co_exceptiontable;
    const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(table);
    const unsigned char *end = p + PyBytes_GET_SIZE(table);
    while (p < end) {
        int start, size, to, dl;
        p = exctable_varint(p, &start);
        p = exctable_varint(p, &size);
        p = exctable_varint(p, &to);
        p = exctable_varint(p, &dl);
        if (instr >= start && instr < start + size) {
            *target = to;
            *depth = dl >> 1;
            *lasti = dl & 1;
            return true;
        }
    }
    return false;
}

bool code_instr_protected(PyCodeObject *co, int instr)
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
        (void)depth;
        if (instr >= start && instr < start + size && !handler_only_reraises(co, target))
            return true;
    }
    return false;
}

/* ---- clearing a frame the evaluator did not run (3.12, 3.13) ---- */

#if PY_313

#define Py_BUILD_CORE 1
#include <internal/pycore_ceval.h>
#undef Py_BUILD_CORE

void frame_clear_unevaluated(PyThreadState *ts, EvalFrame *f)
{
    _PyEval_FrameClearAndPop(ts, f);     /* exported from 3.13 */
}

#elif PY_312

/* CPython 3.12 Python/frame.c take_ownership(): a frame object that
   outlives its frame takes a copy of it, linked to its caller's frame
   object.  The caller's is found through the public PyEval_GetFrame(): the
   thread's current frame is the caller's when the hook returns. */
static void take_ownership(PyFrameObject *fo, _PyInterpreterFrame *frame)
{
    Py_ssize_t size = ((char *)&frame->localsplus[frame->stacktop]) - (char *)frame;
    Py_INCREF(frame->f_code);
    memcpy((_PyInterpreterFrame *)fo->_f_frame_data, frame, (size_t)size);
    frame = (_PyInterpreterFrame *)fo->_f_frame_data;
    fo->f_frame = frame;
    frame->owner = FRAME_OWNED_BY_FRAME_OBJECT;
    if (_PyFrame_IsIncomplete(frame))
        frame->prev_instr = _PyCode_CODE(frame->f_code) + frame->f_code->_co_firsttraceable;
    frame->previous = NULL;
    PyFrameObject *back = PyEval_GetFrame();    /* borrowed */
    if (back != NULL && fo->f_back == NULL)
        fo->f_back = (PyFrameObject *)Py_NewRef(back);
    if (!PyObject_GC_IsTracked((PyObject *)fo))
        PyObject_GC_Track(fo);
}

/* CPython 3.12 Python/pystate.c _PyThreadState_PopFrame(); the chunk is
   freed with the public arena allocator, as _PyObject_VirtualFree does. */
static void pop_frame(PyThreadState *ts, _PyInterpreterFrame *frame)
{
    PyObject **base = (PyObject **)frame;
    if (base == &ts->datastack_chunk->data[0]) {
        _PyStackChunk *chunk = ts->datastack_chunk;
        _PyStackChunk *previous = chunk->previous;
        ts->datastack_top = &previous->data[previous->top];
        ts->datastack_chunk = previous;
        PyObjectArenaAllocator alloc;
        PyObject_GetArenaAllocator(&alloc);
        alloc.free(alloc.ctx, chunk, chunk->size);
        ts->datastack_limit = (PyObject **)(((char *)previous) + previous->size);
    }
    else {
        ts->datastack_top = base;
    }
}

/* CPython 3.12 Python/ceval.c clear_thread_frame() with
   Python/frame.c _PyFrame_ClearExceptCode(). */
void frame_clear_unevaluated(PyThreadState *ts, EvalFrame *frame)
{
    ts->c_recursion_remaining--;
    if (frame->frame_obj) {
        PyFrameObject *fo = frame->frame_obj;
        frame->frame_obj = NULL;
        if (Py_REFCNT(fo) > 1) {
            take_ownership(fo, frame);
            Py_DECREF(fo);
            goto done;
        }
        Py_DECREF(fo);
    }
    for (int i = 0; i < frame->stacktop; i++)
        Py_XDECREF(frame->localsplus[i]);
    Py_XDECREF(frame->f_locals);
    Py_DECREF(frame->f_funcobj);
done:
    Py_DECREF(frame->f_code);
    ts->c_recursion_remaining++;
    pop_frame(ts, frame);
}

#else

void frame_clear_unevaluated(PyThreadState *ts, EvalFrame *f)
{
    (void)ts;
    (void)f;     /* 3.11: _PyEval_Vector clears it when the hook returns */
}

#endif
