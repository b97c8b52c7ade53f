/*
 * tr_interp.c -- the translator's interpreter loop over CPython bytecode
 * (DESIGN.md 3.4; contract: translate_int.h): instructions are read through
 * pycompat.h's decoding layer (instr_decode, instr_jump_target), one case
 * per opcode dispatches to a handler that does the stack effect (op_*
 * here; tr_op_* in tr_stackops.c, tr_containers.c, tr_raise.c), and what
 * the operation means to values is in the file of its kind (tr_vars.c,
 * tr_operators.c, tr_iter.c, tr_calls.c ...).
 *
 * Invariants: the dispatch never reads a code unit (another CPython
 * version's layout goes in pycompat.h); every instruction, EXTENDED_ARG
 * prefixes included, is a step of the unrolling bound (MAX_STEPS); a stop
 * in the root frame is made the frame's end at the instruction it happened
 * in (tr_exit.c), except inside a try range, where no end can be: there
 * the translation is redone strictly (translate.c), stopping where the
 * try begins.
 */
#include "translate_int.h"

/* ---- opcode handlers: each returns 0, or -1 when tracing stops ---- */

/* The opcode after `in`, OP_UNKNOWN at the end. */
Op tr_next_op(TFrame *f, const Instr *in)
{
    Instr next;
    if (in->next >= f->bc.nunits)
        return OP_UNKNOWN;
    instr_decode(&f->bc, in->next, &next);
    return next.op;
}

/* Whether `in` is followed by an instruction that tests truth itself. */
bool tr_truth_test_follows(TFrame *f, const Instr *in)
{
    Op op = tr_next_op(f, in);
    return op == OP_POP_JUMP_IF_FALSE || op == OP_POP_JUMP_IF_TRUE || op == OP_UNARY_NOT;
}

/* What a truth test at `in` is for, as break reasons name it: 'not', an
   'and'/'or' (a COPY keeps the value tested), else a branch.  The same
   on every version (3.11 spells 'and'/'or' JUMP_IF_*_OR_POP). */
const char *tr_truth_use(TFrame *f, const Instr *in)
{
    if (in->op == OP_UNARY_NOT || (in->op == OP_TO_BOOL && tr_next_op(f, in) == OP_UNARY_NOT))
        return "'not'";
    if (f->prior_op == OP_COPY && f->prior_oparg == 1)
        return "'and'/'or'";
    return "branch";
}


/* The root frame drops what its local i held at the frame's start (a
   weak reference's referent may die with it: tr_calls.c call_weakref). */
static void note_rebound(TFrame *f, int i)
{
    if (f->parent == NULL && f->t->fv != NULL && i < f->t->fv->nlocals && f->t->fv->locals[i] != NULL)
        f->t->root_rebound = true;
}

/* STORE_FAST i: locals[i] = pop() (a cell variable stops). */
static int op_store_fast(TFrame *f, const Instr *in)
{
    if (in->oparg >= f->nlocals)
        return tracer_unsupported(f->t, true, "stores into a cell");
    note_rebound(f, in->oparg);
    f->locals[in->oparg] = pop(f);
    return 0;
}

/* STORE_FAST_STORE_FAST / STORE_FAST_LOAD_FAST (3.13): two instructions
   in one; checked before either acts, so a stop leaves nothing half done. */
static int op_store_fast_pair(TFrame *f, const Instr *in)
{
    if (in->oparg >= f->nlocals || (in->op == OP_STORE_FAST_STORE_FAST && in->arg2 >= f->nlocals))
        return tracer_unsupported(f->t, true, "stores into a cell");
    note_rebound(f, in->oparg);
    f->locals[in->oparg] = pop(f);
    if (in->op == OP_STORE_FAST_STORE_FAST) {
        note_rebound(f, in->arg2);
        f->locals[in->arg2] = pop(f);
        return 0;
    }
    return push(f, tr_load_local(f, in->arg2));
}

/* DELETE_FAST i: local i is unbound (reading it stops). */
static int op_delete_fast(TFrame *f, const Instr *in)
{
    Value *gone = value_new(f->t, V_NULL, NULL);
    if (gone == NULL)
        return -1;
    note_rebound(f, in->oparg);
    f->locals[in->oparg] = gone;
    return 0;
}

/* LOAD_GLOBAL: the global or builtin, with a NULL (in the version's
   order) when a call follows. */
static int op_load_global(TFrame *f, const Instr *in)
{
    Value *v = tr_load_global(f, PyTuple_GET_ITEM(f->code->co_names, in->oparg));
    if (!in->flag)
        return push(f, v);
    return v == NULL ? -1 : push_call_pair(f, v, NULL);
}

/* LOAD_FAST_AND_CLEAR: push local i (unbound: NULL) and unbind it; an
   inlined comprehension's STORE_FAST puts it back. */
static int op_load_fast_and_clear(TFrame *f, const Instr *in)
{
    int i = in->oparg;
    Value *v = f->locals[i];
    if (v == NULL && f->parent == NULL && i < f->t->fv->nlocals && f->t->fv->locals[i] != NULL
        && (v = tr_load_local(f, i)) == NULL)      /* an input not read yet */
        return -1;
    Value *gone = value_new(f->t, V_NULL, NULL);
    if (gone == NULL || push(f, v ? v : gone) < 0)
        return -1;
    f->locals[i] = gone;
    return 0;
}

/* MAKE_CELL i: slot i holds a new cell with what it held (an argument)
   or empty. */
static int op_make_cell(TFrame *f, const Instr *in)
{
    Value *cell = value_new(f->t, V_CELL, NULL);
    if (cell == NULL)
        return -1;
    Value *held = f->locals[in->oparg];
    const FrameView *fv = f->t->fv;
    if (held == NULL && f->parent == NULL && in->oparg < fv->nlocals && fv->locals[in->oparg] != NULL
        && (held = tr_load_local(f, in->oparg)) == NULL)   /* an argument, read now */
        return -1;
    if (held != NULL && held->kind != V_NULL && value_append(f->t, cell, held) < 0)
        return -1;
    f->locals[in->oparg] = cell;
    return 0;
}

/* Which MAKE_FUNCTION flag is which item of a V_FUNC: defaults,
   kwdefaults, closure (annotations are not kept: the function never
   leaves the translation, and nothing it runs reads them). */
static int function_item_of_flag(int flag)
{
    switch (flag) {
    case 0x01: return 0;
    case 0x02: return 1;
    case 0x08: return 2;
    default: return -1;
    }
}

/* Set V_FUNC fn's item for MAKE_FUNCTION flag `flag` to v.  0 / -1. */
static int set_function_item(TFrame *f, Value *fn, int flag, Value *v)
{
    int k = function_item_of_flag(flag);
    if (k < 0)
        return flag == 0x04 || flag == 0x10 ? 0 : tracer_unsupported(f->t, true, "MAKE_FUNCTION flag %d", flag);
    if (k == 0 && v->kind == V_CONST && PyTuple_CheckExact(v->obj)) {
        /* constant defaults: a tuple of their values */
        Value *tup = value_new(f->t, V_TUPLE, NULL);
        if (tup == NULL)
            return -1;
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(v->obj); i++) {
            Value *item = value_new(f->t, V_CONST, PyTuple_GET_ITEM(v->obj, i));
            if (item == NULL || value_append(f->t, tup, item) < 0)
                return -1;
        }
        v = tup;
    }
    if ((k == 0 && v->kind != V_TUPLE) || (k == 1 && v->kind != V_DICT) || (k == 2 && v->kind != V_TUPLE))
        return tracer_unsupported(f->t, false, "a function's defaults or closure that are not modelled");
    fn->items[k] = v;
    return 0;
}

/* MAKE_FUNCTION: a V_FUNC of the code on top (3.11, 3.12: with the items
   its flags say lie below, closure first; 3.13: none, each set after by
   SET_FUNCTION_ATTRIBUTE). */
static int op_make_function(TFrame *f, const Instr *in)
{
    Tracer *t = f->t;
    Value *code = pop(f);
    if (code->kind != V_CONST || !PyCode_Check(code->obj))
        return tracer_unsupported(t, true, "MAKE_FUNCTION of a computed code object");
    Value *fn = value_new(t, V_FUNC, code->obj);
    Value *none = value_new(t, V_NULL, NULL);
    if (fn == NULL || none == NULL)
        return -1;
    for (int k = 0; k < 3; k++)
        if (value_append(t, fn, none) < 0)
            return -1;
    fn->fn_creator = f->made ? f->made->fn_creator : f->func;
    fn->fn_creator_src = f->made ? f->made->fn_creator_src : f->func_src;
    static const int flags_top_first[] = {0x08, 0x04, 0x02, 0x01};
    for (int j = 0; j < 4; j++)
        if ((in->oparg & flags_top_first[j]) && set_function_item(f, fn, flags_top_first[j], pop(f)) < 0)
            return -1;
    return push(f, fn);
}

/* SET_FUNCTION_ATTRIBUTE flag (3.13): [value, function] -> function. */
static int op_set_function_attribute(TFrame *f, const Instr *in)
{
    Value *fn = pop(f);
    Value *v = pop(f);
    if (fn->kind != V_FUNC)
        return tracer_unsupported(f->t, true, "SET_FUNCTION_ATTRIBUTE on a value that is not a new function");
    if (set_function_item(f, fn, in->oparg, v) < 0)
        return -1;
    return push(f, fn);
}

/* YIELD_VALUE in a generator run to its end: what it yields is collected;
   it is resumed with None, as next() resumes it. */
static int op_yield_value(TFrame *f)
{
    Value *v = pop(f);
    if (f->yields == NULL)
        return tracer_unsupported(f->t, true, "yield outside a generator expression being run");
    if (value_append(f->t, f->yields, v) < 0)
        return -1;
    return push(f, value_new(f->t, V_CONST, Py_None));
}

/* Whether what a generator expression yields -- made by the CALL `in`,
   whose callable pair is `depth` values below the top -- is consumed by
   the very next instruction: a
   call of one argument, it, to tuple(), list(), sum(), any(), all(),
   min(), max() or sorted(), which take every item at once and run nothing
   in between, or an UNPACK_SEQUENCE: it is run to its end at once.  Any
   other generator expression -- kept, looped over, given to next() or
   passed on -- yields lazily, a V_GEN (tr_lazy_generator_expression). */
static bool generator_consumed_at_once(TFrame *f, const Instr *in, int depth)
{
    Instr next = *in;
    do {
        if (next.next >= f->bc.nunits)
            return false;
        instr_decode(&f->bc, next.next, &next);
    } while (next.op == OP_NOP);
    if (next.op == OP_UNPACK_SEQUENCE || next.op == OP_UNPACK_EX)
        return true;                       /* a, b = (... for ...): every item, at once */
    if (next.op != OP_CALL || next.oparg != 1 || f->kwnames != NULL || f->sp < depth + 2)
        return false;
    Value *callable, *self;
    call_pair_split(peek(f, depth + 2), peek(f, depth + 1), &callable, &self);
    if (self != NULL || callable->kind != V_CONST)
        return false;
    PyObject *fn = callable->obj;
    if (fn == (PyObject *)&PyTuple_Type || fn == (PyObject *)&PyList_Type)
        return true;
    if (!PyCFunction_Check(fn) || PyCFunction_GET_SELF(fn) == NULL || !PyModule_Check(PyCFunction_GET_SELF(fn)))
        return false;
    PyObject *builtins = PyEval_GetBuiltins();                  /* borrowed */

    static const char *const consumers[] = {"sum", "any", "all", "min", "max", "sorted", NULL};
    for (int i = 0; consumers[i]; i++)
        if (builtins && PyDict_GetItemString(builtins, consumers[i]) == fn)
            return true;
    return false;
}

/* CALL argc: a callable pair (call_pair_split), then the arguments.
   CALL_KW (3.13) has the keyword names on top. */
static int op_call(TFrame *f, const Instr *in)
{
    int argc = in->oparg;
    if (in->op == OP_CALL_KW) {
        Value *names = pop(f);
        if (names->kind != V_CONST || !PyTuple_CheckExact(names->obj))
            return tracer_unsupported(f->t, true, "CALL_KW without constant names");
        f->kwnames = names->obj;
    }
    Value *callable, *self;
    Value *args[MAX_STACK];
    call_pair_split(peek(f, argc + 2), peek(f, argc + 1), &callable, &self);
    int nargs = 0;
    if (self != NULL)
        args[nargs++] = self;
    for (int i = 0; i < argc; i++)
        args[nargs++] = peek(f, argc - i);
    bool genexpr = callable->kind == V_FUNC && (((PyCodeObject *)callable->obj)->co_flags & CO_GENERATOR);
    Value *r;
    if (genexpr && !f->t->eager_generators && !generator_consumed_at_once(f, in, argc + 2))
        r = tr_lazy_generator_expression(f, callable, args, nargs);
    else
        r = tr_call_or_undo(f, callable, args, nargs, f->kwnames);
    if (r == NULL)
        return -1;
    if (r->kind == V_ITER && r->from_generator && !generator_consumed_at_once(f, in, argc + 2))
        return tracer_unsupported(f->t, false, "a generator expression not passed straight to "
                                  "tuple(), list(), sum(), any(), all(), min(), max(), sorted() "
                                  "or unpacking, whose generator the program gets");
    /* a manager returned by an inlined call (@torch.no_grad()'s clone():
       `return self.__class__()`) reaches the caller's with -- unless making
       it acts (torch.set_grad_enabled(b) sets the mode there) */
    bool returned = f->parent != NULL && tr_next_op(f, in) == OP_RETURN_VALUE
                    && (r->kind == V_STATECM
                        || (callable->kind == V_CONST && tensorops_grad_manager_mode(callable->obj, NULL, 0, NULL) >= 0));
    if ((r->kind == V_GRADMODE || r->kind == V_STATECM) && tr_next_op(f, in) != OP_BEFORE_WITH && !returned)
        return tracer_unsupported(f->t, false, "a grad-mode manager used other than by a with "
                                  "statement (torch.set_grad_enabled(b) alone sets the mode)");
    f->kwnames = NULL;
    f->sp -= argc + 2;
    return push(f, r);
}

/* GET_ITER of an object made while tracing: its __iter__ (a Python
   generator function gives a V_GEN, run lazily by FOR_ITER).  NULL when
   tracing stops. */
static Value *iter_of_new_object(TFrame *f, Value *o)
{
    Value *r = tr_newobj_protocol(f, o, "__iter__", NULL, 0);
    if (r == NULL || r->kind == V_ITER || r->kind == V_GEN)
        return r;
    return tracer_unsupported(f->t, false, "iter() of a new %s: its __iter__ gives no iterator",
                              ((PyTypeObject *)o->obj)->tp_name), NULL;
}

/* The next item of an iterator made while tracing -- a generator (run to
   its next yield), a zip, an iterator of known items -- as FOR_ITER and
   SEND take it: 1 with *item set, 0 when it has ended (*item: what a
   generator returned, NULL for None), -1 when tracing stops. */
int tr_iter_next(TFrame *f, Value *it, Value **item)
{
    *item = NULL;
    if (it->kind == V_GEN) {
        int r = tr_gen_resume(f, it, item);
        if (r == 0)
            *item = it->gen->retval;
        return r;
    }
    if (it->kind == V_ZIP) {
        /* zip: the next item of each iterator in order; the first that
           has none ends it (items taken this round are lost) */
        Value *tup = value_new(f->t, V_TUPLE, NULL);
        if (tup == NULL)
            return -1;
        for (int k = 0; k < it->n; k++) {
            Value *src = it->items[k], *v = NULL;
            int r = 1;
            if (src->kind == V_GEN || src->kind == V_ZIP)
                r = tr_iter_next(f, src, &v);
            else if (src->pos < src->n)
                v = src->items[src->pos++];
            else
                r = 0;
            if (r <= 0)
                return r;
            if (value_append(f->t, tup, v) < 0)
                return -1;
        }
        if (it->mapfn == NULL) {
            *item = tup;
            return 1;
        }
        if (tup->n >= MAX_STACK)
            return tracer_unsupported(f->t, false, "map() of more than %d iterables", MAX_STACK);
        *item = tr_call_or_undo(f, it->mapfn, tup->items, tup->n, NULL);
        return *item ? 1 : -1;
    }
    if (it->kind != V_ITER)
        return tracer_unsupported(f->t, false, "next item of an iterator the translator does not model");
    if (it->pos < it->n) {
        *item = it->items[it->pos++];
        return 1;
    }
    return 0;
}

/* FOR_ITER: push the next item, or pop the iterator and jump (*ip). */
static int op_for_iter(TFrame *f, const Instr *in, int *ip)
{
    Value *v;
    int r = tr_iter_next(f, peek(f, 1), &v);
    if (r != 0)
        return r > 0 ? push(f, v) : -1;
    (void)pop(f);
    *ip = instr_jump_target(in);
    return 0;
}

/* SEND, yield from's step: [receiver, sent] -> [receiver, its next item],
   which the YIELD_VALUE after passes up.  A receiver that has ended jumps
   (*ip) with what it returned on top (the receiver popped on 3.11, by
   END_SEND after).  Only next() is modelled, which sends None. */
static int op_send(TFrame *f, const Instr *in, int *ip)
{
    Value *sent = pop(f);
    if (sent->kind != V_CONST || sent->obj != Py_None)
        return tracer_unsupported(f->t, false, "send() of a value to a generator that delegates (yield from)");
    Value *v;
    int r = tr_iter_next(f, peek(f, 1), &v);
    if (r != 0)
        return r > 0 ? push(f, v) : -1;
    if (in->flag)
        (void)pop(f);
    *ip = instr_jump_target(in);
    return push(f, v ? v : value_new(f->t, V_CONST, Py_None));
}

/* POP_JUMP_*_IF_FALSE / _IF_TRUE on a value whose truth is known. */
static int op_pop_jump_if(TFrame *f, const Instr *in, int *ip)
{
    int tv = tr_truth(f, pop(f), tr_truth_use(f, in));
    if (tv < 0)
        return -1;
    if (tv == jumps_if_true(in))
        *ip = instr_jump_target(in);
    return 0;
}

/* POP_JUMP_*_IF_NONE / _IF_NOT_NONE: values other than constants are
   known not to be None. */
static int op_pop_jump_if_none(TFrame *f, const Instr *in, int *ip)
{
    Value *v = pop(f);
    int is_none;
    if (v->kind == V_CONST)
        is_none = v->obj == Py_None;
    else if (v->kind != V_NULL && v->kind != V_ITER)
        is_none = 0;   /* tensors, containers, objects are never None */
    else
        return tracer_unsupported(f->t, true, "None test on an internal value");
    if (is_none == (in->op == OP_POP_JUMP_IF_NONE))
        *ip = instr_jump_target(in);
    return 0;
}

/* JUMP_IF_FALSE_OR_POP / JUMP_IF_TRUE_OR_POP ('and' / 'or'). */
static int op_jump_if_or_pop(TFrame *f, const Instr *in, int *ip)
{
    int tv = tr_truth(f, peek(f, 1), "'and'/'or'");
    if (tv < 0)
        return -1;
    if (tv == (in->op == OP_JUMP_IF_TRUE_OR_POP))
        *ip = instr_jump_target(in);
    else
        (void)pop(f);
    return 0;
}

/* FORMAT_VALUE: flags 0x03 the conversion, 0x04 a format spec on top. */
static int op_format_value(TFrame *f, const Instr *in)
{
    bool has_spec = (in->oparg & 0x04) != 0;
    Value *spec = has_spec ? pop(f) : NULL;
    Value *v = pop(f);
    return push(f, tr_format_value(f, v, spec, in->oparg & 0x03));
}

/* BUILD_STRING n: the n constant strings on top, joined. */
static int op_build_string(TFrame *f, const Instr *in)
{
    PyObject *parts = tr_string_parts(f, &f->stack[f->sp - in->oparg], in->oparg);
    if (parts == NULL)
        return -1;
    PyObject *empty = PyUnicode_FromString("");
    PyObject *s = empty ? PyUnicode_Join(empty, parts) : NULL;
    Py_XDECREF(empty);
    Py_DECREF(parts);
    f->sp -= in->oparg;
    return push(f, new_const(f->t, s));
}

/* RETURN_VALUE / RETURN_CONST: f->retval; the root frame's end is the
   return.  0 / -1. */
static int op_return(TFrame *f, const Instr *in)
{
    Tracer *t = f->t;
    if (in->op == OP_RETURN_CONST) {
        f->retval = value_new(t, V_CONST, PyTuple_GET_ITEM(f->code->co_consts, in->oparg));
        if (f->retval == NULL)
            return -1;
    }
    else
        f->retval = pop(f);
    if (f->yields != NULL)
        f->retval = f->yields;     /* a generator run to its end: what it yielded */
    if (f->parent == NULL) {
        t->end.kind = END_RETURN;
        t->end.retval = f->retval;
    }
    return 0;
}

/* IMPORT_NAME: `import a.b` / `from a.b import c`, of a module already
   imported (tr_import_name). */
static int op_import_name(TFrame *f, const Instr *in)
{
    Value *fromlist = pop(f);
    Value *level = pop(f);
    return push(f, tr_import_name(f, PyTuple_GET_ITEM(f->code->co_names, in->oparg), level, fromlist));
}

/* IMPORT_FROM: push module.name, the module staying below it. */
static int op_import_from(TFrame *f, const Instr *in)
{
    return push(f, tr_import_from(f, peek(f, 1), PyTuple_GET_ITEM(f->code->co_names, in->oparg)));
}

/* DICT_MERGE / DICT_UPDATE oparg: the dict oparg below the top (one this
   frame is building) takes the items of the dict on top; DICT_MERGE (a
   call's **kwargs) refuses a key given twice, as the call would. */
static int op_dict_merge(TFrame *f, const Instr *in)
{
    Tracer *t = f->t;
    Value *update = pop(f);
    Value *d = peek(f, in->oparg);
    if (d->kind != V_DICT || d->src >= 0)
        return tracer_unsupported(t, true, "merging into a dict the program can see");
    if (update->kind != V_DICT && tr_is_dict_view_object(update))
        return tr_dict_view_merge(f, d, update, in->op == OP_DICT_MERGE);
    if (update->kind == V_NEWOBJ)
        return tr_newobj_merge(f, d, update, in->op == OP_DICT_MERGE);
    if (update->kind != V_DICT)
        return tracer_unsupported(t, false, "** of a %s (only dicts are modelled)",
                                  update->obj ? Py_TYPE(update->obj)->tp_name : "container");
    for (int i = 0; i < update->n; i++)
        if (tr_dict_merge_item(t, d, PyList_GET_ITEM(update->obj, i), update->items[i],
                               in->op == OP_DICT_MERGE) < 0)
            return -1;
    return 0;
}

/* The positional items and keyword names of CALL_FUNCTION_EX's operands
   (callargs: any sequence the translator iterates; kwargs: a dict with
   str keys, or NULL) into args[*nargs...] and *kwnames (a tuple the
   tracer keeps, or NULL).  0 / -1. */
int tr_spread_call_args(TFrame *f, Value *callargs, Value *kwargs, Value **args, int *nargs,
                        PyObject **kwnames)
{
    Tracer *t = f->t;
    Value *it = tr_make_iter(f, callargs);
    if (it == NULL)
        return -1;
    int n = *nargs;
    int nkw = kwargs ? kwargs->n : 0;
    if (n + (it->n - it->pos) + nkw >= MAX_STACK)
        return tracer_unsupported(t, false, "a call with more than %d arguments", MAX_STACK);
    for (int i = it->pos; i < it->n; i++)
        args[n++] = it->items[i];
    *kwnames = NULL;
    if (kwargs != NULL && nkw > 0) {
        if (kwargs->kind != V_DICT)
            return tracer_unsupported(t, false, "** of a value that is not a dict");
        PyObject *names = PyList_AsTuple(kwargs->obj);
        Value *keep = new_const(t, names);          /* the tracer holds the tuple */
        if (keep == NULL)
            return -1;
        for (int i = 0; i < nkw; i++) {
            if (!PyUnicode_Check(PyTuple_GET_ITEM(names, i)))
                return tracer_unsupported(t, false, "keywords must be strings");
            args[n++] = kwargs->items[i];
        }
        *kwnames = names;
    }
    *nargs = n;
    return 0;
}

/* CALL_FUNCTION_EX: callable(*callargs, **kwargs) -- a callable pair (the
   self slot is always NULL), the positional sequence, and the kwargs dict
   when the flag is set; called as a CALL with the items spread. */
static int op_call_function_ex(TFrame *f, const Instr *in)
{
    int nops = in->flag ? 2 : 1;
    Value *kwargs = in->flag ? peek(f, 1) : NULL;
    Value *callargs = peek(f, nops);
    Value *callable, *self;
    call_pair_split(peek(f, nops + 2), peek(f, nops + 1), &callable, &self);
    Value *args[MAX_STACK];
    int nargs = 0;
    PyObject *kwnames;
    if (self != NULL)
        args[nargs++] = self;
    if (tr_spread_call_args(f, callargs, kwargs, args, &nargs, &kwnames) < 0)
        return -1;
    Value *r = tr_call_or_undo(f, callable, args, nargs, kwnames);
    if (r == NULL)
        return -1;
    f->sp -= nops + 2;
    return push(f, r);
}

/* A Python exception raised by what an inlined frame traced (a lookup
   that fails, an op that raises on the example values) ends tracing there
   as a stop: the call runs eagerly and raises, or is caught, for real.
   Exceptions that are not Exceptions propagate. */
static void exception_to_stop(TFrame *f)
{
    if (f->t->reason != NULL || !PyErr_ExceptionMatches(PyExc_Exception))
        return;
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    PyObject *msg = value ? PyObject_Str(value) : NULL;
    if (msg == NULL)
        PyErr_Clear();
    tracer_unsupported(f->t, false, "raises %s: %U", ((PyTypeObject *)type)->tp_name,
                       msg ? msg : Py_None);
    Py_XDECREF(msg);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
}

/* An opcode the translator does not model.  Returns -1. */
static int op_unsupported(TFrame *f, const Instr *in)
{
    const char *name = NULL;
    PyObject *dis = PyImport_ImportModule("dis");
    PyObject *opname = dis ? PyObject_GetAttrString(dis, "opname") : NULL;
    PyObject *item = opname ? PySequence_GetItem(opname, in->opcode) : NULL;
    name = item ? PyUnicode_AsUTF8(item) : NULL;
    if (name == NULL)
        PyErr_Clear();
    tracer_unsupported(f->t, true, "unsupported bytecode %s at offset %d",
                       name ? name : "?", in->offset * 2);
    Py_XDECREF(item);
    Py_XDECREF(opname);
    Py_XDECREF(dis);
    return -1;
}

/* ---- the interpreter loop ---- */

/* One step of the unrolling bound.  0 / -1 (tracing stops). */
static int count_step(Tracer *t)
{
    if (++t->steps > MAX_STEPS)
        return tracer_unsupported(t, false, "more than %d instructions (unbounded unrolling?)", MAX_STEPS);
    return 0;
}

/*
 * Enter instruction *in, its first code unit counted: the units of its
 * EXTENDED_ARG prefixes up to the opcode are steps too (3.11 dispatches
 * them one by one), and in the root frame of a strict translation a unit
 * inside a try range stops tracing.  A stop at a prefix leaves *in as the prefix unit dispatched
 * last (EXTENDED_ARG at in->offset), which the frame's end turns into a
 * deopt at in->start.  0 / -1 (tracing stops).
 */
static int enter_instr(TFrame *f, Instr *in)
{
    Tracer *t = f->t;
    for (int u = in->start; u <= in->offset; u++) {
        f->cur_instr = u;
        if (count_step(t) < 0) {
            if (u > in->start) {
                in->opcode = EXTENDED_ARG;
                in->op = OP_NOP;
                in->offset = u - 1;
            }
            return -1;
        }
        if (f->parent == NULL && t->strict_try && code_instr_protected(f->code, u)) {
            if (u < in->offset) {
                in->opcode = EXTENDED_ARG;
                in->op = OP_NOP;
                in->offset = u;
            }
            return tracer_unsupported(t, true, "code inside a try/with block");
        }
    }
    return 0;
}

/*
 * Interpret frame f from code unit `start` until it returns
 * (FRAME_RETURNED, f->retval set), the root frame ends at a break or a
 * deopt (FRAME_ENDED, t->end set), or tracing stops (FRAME_STOPPED).
 *
 * The dispatch: one case per opcode, each calling a handler (op_* above,
 * which pops the operands, calls what the operation means to values --
 * tr_load_*, tr_apply_*, tr_call_*, tr_make_iter, tr_subscript ... -- and
 * pushes the result).  A stop in the root frame is made the frame's end at
 * the instruction it happened in (tr_end_root_frame).
 */
/* layout: dispatch switch */
int tr_run_frame(TFrame *f, int start)
{
    Tracer *t = f->t;
    Instr in = {.op = OP_NOP, .opcode = NOP, .oparg = 0, .target = -1,
                .start = start, .offset = start, .next = start};
    int ip = start;
    int sp_before = 0;    /* stack depth before the instruction `in` */
    t->current = f;
resume:
    while (ip < f->bc.nunits) {
        instr_decode(&f->bc, ip, &in);
        sp_before = f->sp;
        if (enter_instr(f, &in) < 0)
            goto fail;
        ip = in.next;
        int rc = 0;
        switch (in.op) {
        case OP_NOP:
            break;
        case OP_LOAD_FAST:
            rc = push(f, tr_load_local(f, in.oparg));
            break;
        case OP_LOAD_FAST_LOAD_FAST:
            rc = push(f, tr_load_local(f, in.oparg));
            if (rc == 0)
                rc = push(f, tr_load_local(f, in.arg2));
            break;
        case OP_LOAD_FAST_AND_CLEAR:
            rc = op_load_fast_and_clear(f, &in);
            break;
        case OP_STORE_FAST:
            rc = op_store_fast(f, &in);
            break;
        case OP_STORE_FAST_STORE_FAST:
        case OP_STORE_FAST_LOAD_FAST:
            rc = op_store_fast_pair(f, &in);
            break;
        case OP_DELETE_FAST:
            rc = op_delete_fast(f, &in);
            break;
        case OP_LOAD_CONST:
            rc = push(f, value_new(t, V_CONST, PyTuple_GET_ITEM(f->code->co_consts, in.oparg)));
            break;
        case OP_LOAD_GLOBAL:
            rc = op_load_global(f, &in);
            break;
        case OP_LOAD_DEREF:
            rc = push(f, tr_load_deref(f, in.oparg));
            break;
        case OP_STORE_DEREF:
            rc = tr_store_deref(f, in.oparg, pop(f));
            break;
        case OP_DELETE_DEREF:
            rc = tr_store_deref(f, in.oparg, NULL);
            break;
        case OP_LOAD_CLOSURE:
            rc = push(f, tr_load_closure(f, in.oparg));
            break;
        case OP_MAKE_CELL:
            rc = op_make_cell(f, &in);
            break;
        case OP_MAKE_FUNCTION:
            rc = op_make_function(f, &in);
            break;
        case OP_SET_FUNCTION_ATTRIBUTE:
            rc = op_set_function_attribute(f, &in);
            break;
        case OP_RETURN_GENERATOR:
            /* the generator's start: resumed with None by the first next() */
            rc = f->yields || f->suspends ? push(f, value_new(t, V_CONST, Py_None))
                           : tracer_unsupported(t, true, "a generator's start outside one being run");
            break;
        case OP_YIELD_VALUE:
            if (f->suspends) {
                /* a suspended generator: next() resumes it here, the value
                   it sends pushed */
                f->yielded = pop(f);
                f->resume_at = ip;
                return FRAME_YIELDED;
            }
            rc = op_yield_value(f);
            break;
        case OP_LOAD_ATTR:
            rc = push(f, tr_load_attr(f, pop(f), PyTuple_GET_ITEM(f->code->co_names, in.oparg)));
            break;
        case OP_LOAD_METHOD:
            rc = tr_load_method(f, pop(f), PyTuple_GET_ITEM(f->code->co_names, in.oparg));
            break;
        case OP_PUSH_NULL:
            rc = push(f, value_new(t, V_NULL, NULL));
            break;
        case OP_KW_NAMES:
            f->kwnames = PyTuple_GET_ITEM(f->code->co_consts, in.oparg);
            break;
        case OP_CALL:
        case OP_CALL_KW:
            rc = op_call(f, &in);
            break;
        case OP_BINARY_OP:
            rc = tr_op_binary_op(f, &in);
            break;
        case OP_COMPARE_OP:
            rc = tr_op_compare_op(f, &in);
            break;
        case OP_IS_OP:
            rc = tr_op_is_op(f, &in);
            break;
        case OP_CONTAINS_OP:
            rc = tr_op_contains_op(f, &in);
            break;
        case OP_UNARY_NEGATIVE:
        case OP_UNARY_POSITIVE:
        case OP_UNARY_INVERT:
            rc = tr_op_unary(f, &in);
            break;
        case OP_UNARY_NOT:
            rc = tr_op_unary_not(f);
            break;
        case OP_TO_BOOL:
            rc = tr_op_to_bool(f, &in);
            break;
        case OP_BINARY_SUBSCR:
            rc = tr_op_binary_subscr(f);
            break;
        case OP_STORE_SUBSCR:
            rc = tr_op_store_subscr(f);
            break;
        case OP_BINARY_SLICE:
            rc = tr_op_binary_slice(f);
            break;
        case OP_STORE_SLICE:
            rc = tr_op_store_slice(f);
            break;
        case OP_STORE_ATTR:
        case OP_DELETE_ATTR:
            rc = tr_op_store_attr(f, &in);
            break;
        case OP_BUILD_TUPLE:
        case OP_BUILD_LIST:
            rc = tr_op_build_sequence(f, &in);
            break;
        case OP_BUILD_SLICE:
            rc = tr_op_build_slice(f, &in);
            break;
        case OP_BUILD_MAP:
        case OP_BUILD_CONST_KEY_MAP:
            rc = tr_op_build_map(f, &in);
            break;
        case OP_LIST_EXTEND:
        case OP_LIST_APPEND:
            rc = tr_op_list_extend(f, &in);
            break;
        case OP_MAP_ADD:
            rc = tr_op_map_add(f, &in);
            break;
        case OP_RAISE_VARARGS:
            rc = tr_op_raise(f, &in);
            break;
        case OP_PUSH_EXC_INFO:
            rc = tr_op_push_exc_info(f);
            break;
        case OP_CHECK_EXC_MATCH:
            rc = tr_op_check_exc_match(f);
            break;
        case OP_POP_EXCEPT:
            pop(f);
            break;
        case OP_RERAISE:
            rc = tr_op_reraise(f);
            break;
        case OP_BUILD_SET:
            rc = tr_op_build_set(f, &in);
            break;
        case OP_SET_ADD:
        case OP_SET_UPDATE:
            rc = tr_op_set_add(f, &in);
            break;
        case OP_BEFORE_WITH:
            rc = tr_op_before_with(f, &in);
            break;
        case OP_LOAD_SUPER_ATTR:
            rc = tr_op_load_super_attr(f, &in);
            break;
        case OP_LIST_TO_TUPLE:
            rc = tr_op_list_to_tuple(f);
            break;
        case OP_UNPACK_SEQUENCE:
        case OP_UNPACK_EX:
            rc = tr_op_unpack_sequence(f, &in);
            break;
        case OP_POP_TOP:
            (void)pop(f);
            break;
        case OP_END_FOR:
            f->sp -= in.oparg;
            break;
        case OP_COPY:
            rc = push(f, peek(f, in.oparg));
            break;
        case OP_SWAP:
            rc = tr_op_swap(f, &in);
            break;
        case OP_GET_ITER:
        case OP_GET_YIELD_FROM_ITER:
            /* iter(gen) is gen: a generator stays lazy in a for loop */
            rc = peek(f, 1)->kind == V_GEN || peek(f, 1)->kind == V_ZIP ? 0
                 : peek(f, 1)->kind == V_NEWOBJ ? push(f, iter_of_new_object(f, pop(f)))
                 : push(f, tr_make_iter(f, pop(f)));
            break;
        case OP_FOR_ITER:
            rc = op_for_iter(f, &in, &ip);
            break;
        case OP_SEND:
            rc = op_send(f, &in, &ip);
            break;
        case OP_END_SEND: {
            Value *v = pop(f);
            (void)pop(f);
            rc = push(f, v);
            break;
        }
        case OP_JUMP:
            ip = instr_jump_target(&in);
            break;
        case OP_POP_JUMP_IF_FALSE:
        case OP_POP_JUMP_IF_TRUE:
            rc = op_pop_jump_if(f, &in, &ip);
            break;
        case OP_POP_JUMP_IF_NONE:
        case OP_POP_JUMP_IF_NOT_NONE:
            rc = op_pop_jump_if_none(f, &in, &ip);
            break;
        case OP_JUMP_IF_FALSE_OR_POP:
        case OP_JUMP_IF_TRUE_OR_POP:
            rc = op_jump_if_or_pop(f, &in, &ip);
            break;
        case OP_FORMAT_VALUE:
            rc = op_format_value(f, &in);
            break;
        case OP_BUILD_STRING:
            rc = op_build_string(f, &in);
            break;
        case OP_RETURN_VALUE:
        case OP_RETURN_CONST:
            if (op_return(f, &in) < 0)
                goto fail;
            return FRAME_RETURNED;
        case OP_IMPORT_NAME:
            rc = op_import_name(f, &in);
            break;
        case OP_IMPORT_FROM:
            rc = op_import_from(f, &in);
            break;
        case OP_DICT_MERGE:
        case OP_DICT_UPDATE:
            rc = op_dict_merge(f, &in);
            break;
        case OP_CALL_FUNCTION_EX:
            rc = op_call_function_ex(f, &in);
            break;
        case OP_UNKNOWN:
            rc = op_unsupported(f, &in);
            break;
        }
        if (rc < 0)
            goto fail;
        if (in.op != OP_TO_BOOL) {
            f->prior_op = in.op;
            f->prior_oparg = in.oparg;
        }
    }
    tracer_unsupported(t, true, "ran past the end of the bytecode");
fail:
    if (tr_catch_raised(f, in.offset, &ip))
        goto resume;            /* a handler of this frame runs next */
    if (f->parent == NULL)
        t->raised = NULL;       /* the root frame does not catch: a plain stop */
    if (f->parent != NULL && PyErr_Occurred())
        exception_to_stop(f);
    if (f->parent == NULL && !t->strict_try && code_instr_protected(f->code, f->cur_instr)) {
        t->stopped_in_try = true;      /* no end here: translate_frame tries again */
        return FRAME_STOPPED;
    }
    if (f->parent != NULL || t->reason == NULL || PyErr_Occurred())
        return FRAME_STOPPED;
    return tr_end_root_frame(f, &in, sp_before);
}
