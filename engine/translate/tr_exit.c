/*
 * tr_exit.c -- how the root frame's translation ends (DESIGN.md 3.5-3.6,
 * docs/architecture.md "Graph breaks"; contract: translate_int.h): the
 * frame's end where tracing stopped (an eager step and a resume frame, an
 * eager truth test, a deopt exit, or skipping the frame), and finishing the
 * plan: its exit, the break's description, the graph's outputs, the
 * backend.
 *
 * Invariants: an eager step's operands are the stack as it was before the
 * instruction that stopped; a function start that stops on something that
 * is not an operation is skipped (nothing ran yet), a resume frame deopts;
 * every op of the graph runs, even one nothing reads (it may raise, as it
 * would eagerly); under fullgraph=True a break's graph is never compiled.
 */
#include "translate_int.h"

#include <string.h>

/* tr_end_root_frame helpers: the instruction has no eager step (deopt). */
#define NOT_ENDED 2

/* The break kind a stop of kind k is recorded as (explain, events);
   unsupported_as for a construct the translator does not model. */
static const char *stop_kind_name(StopKind k, const char *unsupported_as)
{
    switch (k) {
    case STOP_CALL: return "call";
    case STOP_BRANCH: return "data_dependent_branch";
    case STOP_ESCAPE: return "data_escape";
    default: return unsupported_as;
    }
}

/* The eager step `fn(*operands)` with operands the top n values of the
   stack as it was before the instruction. */
static int end_eager_op(TFrame *f, PyObject *fn, int n, int sp_before, int next,
                        bool push_result)
{
    Tracer *t = f->t;
    FrameEnd *e = &t->end;
    Value *callable = value_new(t, V_CONST, fn);
    e->args = PyMem_Calloc((size_t)n + 1, sizeof(Value *));
    if (callable == NULL || e->args == NULL)
        return FRAME_STOPPED;
    for (int i = 0; i < n; i++)
        e->args[i] = f->stack[sp_before - n + i];
    e->nargs = n;
    e->callable = callable;
    e->kind = END_CALL;
    e->sp = sp_before - n;
    e->push_result = push_result;
    e->resume = next;
    e->kind_name = stop_kind_name(t->stop_kind, "call");
    return FRAME_ENDED;
}

/* The CALL with argc arguments that stopped is the eager step: its
   callable and arguments are on the stack as before it (CALL_KW: with
   the keyword names on top).  FRAME_ENDED, or FRAME_STOPPED on an
   error. */
static int end_call(TFrame *f, const Instr *in, int sp_before)
{
    Tracer *t = f->t;
    FrameEnd *e = &t->end;
    int argc = in->oparg;
    f->sp = sp_before;
    PyObject *kwnames = f->kwnames;
    int below = 0;     /* values above the arguments */
    if (in->op == OP_CALL_KW) {
        Value *names = peek(f, 1);
        if (names->kind != V_CONST || !PyTuple_CheckExact(names->obj))
            return NOT_ENDED;
        kwnames = names->obj;
        below = 1;
    }
    Value *callable, *self;
    call_pair_split(peek(f, below + argc + 2), peek(f, below + argc + 1), &callable, &self);
    int nargs = self != NULL ? argc + 1 : argc;
    e->callable = callable;
    e->args = PyMem_Calloc((size_t)nargs + 1, sizeof(Value *));
    if (e->args == NULL) {
        PyErr_NoMemory();
        return FRAME_STOPPED;
    }
    for (int i = 0; i < nargs; i++)
        e->args[i] = peek(f, below + nargs - i);
    e->nargs = nargs;
    e->kwnames = kwnames;
    f->kwnames = NULL;
    e->kind = END_CALL;
    e->sp = sp_before - (below + argc + 2);
    e->push_result = true;
    e->resume = in->next;
    e->kind_name = stop_kind_name(t->stop_kind, "call");
    return FRAME_ENDED;
}

/* CALL_FUNCTION_EX that stopped is the eager step callable(*args,
   **kwargs), its sequence and dict spread as a CALL's arguments when the
   translator knows their items (NOT_ENDED otherwise: a deopt). */
static int end_call_ex(TFrame *f, const Instr *in, int sp_before)
{
    Tracer *t = f->t;
    FrameEnd *e = &t->end;
    f->sp = sp_before;
    int nops = in->flag ? 2 : 1;
    Value *kwargs = in->flag ? peek(f, 1) : NULL;
    Value *callargs = peek(f, nops);
    if ((callargs->kind != V_TUPLE && callargs->kind != V_LIST)
        || (kwargs != NULL && kwargs->kind != V_DICT))
        return NOT_ENDED;
    Value *callable, *self;
    call_pair_split(peek(f, nops + 2), peek(f, nops + 1), &callable, &self);
    Value *args[MAX_STACK];
    int nargs = 0;
    PyObject *kwnames;
    if (self != NULL)
        args[nargs++] = self;
    /* (the stop's reason is set: a stop here cannot replace it) */
    if (tr_spread_call_args(f, callargs, kwargs, args, &nargs, &kwnames) < 0)
        return PyErr_Occurred() ? FRAME_STOPPED : NOT_ENDED;
    e->args = PyMem_Calloc((size_t)nargs + 1, sizeof(Value *));
    if (e->args == NULL) {
        PyErr_NoMemory();
        return FRAME_STOPPED;
    }
    memcpy(e->args, args, sizeof(Value *) * (size_t)nargs);
    e->callable = callable;
    e->nargs = nargs;
    e->kwnames = kwnames;
    e->kind = END_CALL;
    e->sp = sp_before - (nops + 2);
    e->push_result = true;
    e->resume = in->next;
    e->kind_name = stop_kind_name(t->stop_kind, "call");
    return FRAME_ENDED;
}

/* Where code from unit `at` goes after the unconditional jumps it starts
   with: a resume frame starts there, the same state either way.  (A loop
   test compiled as "exit if false, else jump back" -- 3.12 on -- resumes
   at the loop body, as 3.11's "jump back if true" does.) */
static int past_jumps(TFrame *f, int at)
{
    for (int hops = 0; hops < 8 && at >= 0 && at < f->bc.nunits; hops++) {
        Instr in;
        instr_decode(&f->bc, at, &in);
        if (in.op != OP_JUMP || in.start != at)
            break;
        at = in.target;
    }
    return at;
}

/* A conditional jump on the value below sp_before: an eager truth test. */
static int end_branch(TFrame *f, const Instr *in, int sp_before)
{
    Tracer *t = f->t;
    FrameEnd *e = &t->end;
    int target = past_jumps(f, instr_jump_target(in));
    int next = past_jumps(f, in->next);
    bool jump_if_true = jumps_if_true(in);
    e->kind = END_BRANCH;
    e->cond = f->stack[sp_before - 1];
    e->sp = sp_before - 1;
    e->branch_true = jump_if_true ? target : next;
    e->branch_false = jump_if_true ? next : target;
    e->kind_name = stop_kind_name(t->stop_kind, "unsupported");
    return FRAME_ENDED;
}

/* The operator.<name> an operator instruction runs as an eager step, with
   its number of operands in *n; NULL when it has none. */
static const char *eager_operator_name(const Instr *in, int *n)
{
    static const char *const inplace_names[] = {
        "iadd", "iand", "ifloordiv", "ilshift", "imatmul", "imul", "imod",
        "ior", "ipow", "irshift", "isub", "itruediv", "ixor"};
    *n = 2;
    switch (in->op) {
    case OP_BINARY_OP:
        if (in->oparg >= 0 && in->oparg < 26)
            return in->oparg >= 13 ? inplace_names[in->oparg - 13] : tr_binary_op_names[in->oparg];
        return NULL;
    case OP_COMPARE_OP:
        /* 3.13's compare-then-bool() is two steps: not one eager op */
        return in->oparg >= 0 && in->oparg <= 5 && !in->flag ? tr_compare_op_names[in->oparg] : NULL;
    case OP_BINARY_SUBSCR: return "getitem";
    default: break;
    }
    *n = 1;
    switch (in->op) {
    case OP_UNARY_NEGATIVE: return "neg";
    case OP_UNARY_POSITIVE: return "pos";
    case OP_UNARY_INVERT: return "invert";
    case OP_UNARY_NOT: return "not_";
    case OP_TO_BOOL: return "truth";
    default: return NULL;
    }
}

/* The eager step instruction `in` becomes, if it has one: FRAME_ENDED,
   FRAME_STOPPED (an error), or NOT_ENDED. */
static int end_at_instr(TFrame *f, const Instr *in, int sp_before)
{
    Tracer *t = f->t;
    int n;
    const char *opname = eager_operator_name(in, &n);
    if (opname != NULL)
        return end_eager_op(f, tensorops_operator(opname), n, sp_before, in->next, true);
    switch (in->op) {
    case OP_CALL:
    case OP_CALL_KW:
        return end_call(f, in, sp_before);
    case OP_CALL_FUNCTION_EX:
        return end_call_ex(f, in, sp_before);
    case OP_POP_JUMP_IF_FALSE:
    case OP_POP_JUMP_IF_TRUE:
        return end_branch(f, in, sp_before);
    case OP_LOAD_ATTR: {
        /* getattr(base, name) eagerly; the name goes on the stack copy */
        Value *name = value_new(t, V_CONST, PyTuple_GET_ITEM(f->code->co_names, in->oparg));
        if (name == NULL || sp_before >= MAX_STACK)
            return NOT_ENDED;
        f->stack[sp_before] = name;
        if (end_eager_op(f, PyDict_GetItemString(PyEval_GetBuiltins(), "getattr"),
                         2, sp_before + 1, in->next, true) != FRAME_ENDED)
            return FRAME_STOPPED;
        t->end.sp = sp_before - 1;
        return FRAME_ENDED;
    }
    case OP_FORMAT_VALUE:
        /* format(v[, spec]) eagerly: no conversion (that is PyObject_Format) */
        if ((in->oparg & 0x03) != 0)
            return NOT_ENDED;
        return end_eager_op(f, PyDict_GetItemString(PyEval_GetBuiltins(), "format"),
                            (in->oparg & 0x04) ? 2 : 1, sp_before, in->next, true);
    case OP_STORE_SUBSCR: {
        /* stack: value, container, index -> setitem(container, index, value) */
        Value *value = f->stack[sp_before - 3];
        f->stack[sp_before - 3] = f->stack[sp_before - 2];
        f->stack[sp_before - 2] = f->stack[sp_before - 1];
        f->stack[sp_before - 1] = value;
        return end_eager_op(f, tensorops_operator("setitem"), 3, sp_before, in->next, false);
    }
    default:
        return NOT_ENDED;
    }
}

/*
 * Tracing of the root frame stopped at instruction `in` (t->reason set;
 * sp_before is the stack depth before it).  Make it the frame's end:
 * operations become eager steps with a resume frame after them, a branch
 * becomes an eager truth test, and anything else in a resume frame hands
 * the rest of the frame to the interpreter.  A function start that cannot
 * go on is not ended: FRAME_STOPPED (skip).
 */
int tr_end_root_frame(TFrame *f, const Instr *in, int sp_before)
{
    Tracer *t = f->t;
    FrameEnd *e = &t->end;
    e->offset = t->stop_offset;
    if (!code_instr_protected(f->code, in->offset)) {
        int r = end_at_instr(f, in, sp_before);
        if (r != NOT_ENDED)
            return r;
    }
    if (t->rq->resume_offset == 0)
        return FRAME_STOPPED;    /* nothing ran yet: the frame is skipped */
    f->sp = sp_before;
    e->kind = END_DEOPT;
    e->sp = sp_before;
    e->resume = in->start;
    e->kind_name = "unsupported";
    return FRAME_ENDED;
}

/* ---- finishing the plan ---- */

/* The plan's exit, from t->end: its kind and the rebuilds of what it uses
   (the return value; the live state, and the eager call or the branch's
   condition).  0 / -1 (t->reason set when a value cannot be rebuilt). */
static int plan_exit(Tracer *t, TFrame *root, Outputs *o, Plan *p)
{
    FrameEnd *e = &t->end;
    switch (e->kind) {
    case END_RETURN:
        p->exit = EXIT_RETURN;
        return tr_make_rebuild(t, o, e->retval, &p->result);
    case END_CALL:
        p->exit = EXIT_CALL;
        if (tr_make_live(t, root, o, e->sp, &p->live) < 0
            || tr_make_rebuild(t, o, e->callable, &p->callable) < 0)
            return -1;
        p->args = PyMem_Calloc((size_t)e->nargs + 1, sizeof(Rebuild));
        if (p->args == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        p->nargs = e->nargs;
        for (int i = 0; i < e->nargs; i++)
            if (tr_make_rebuild(t, o, e->args[i], &p->args[i]) < 0)
                return -1;
        p->kwnames = Py_XNewRef(e->kwnames);
        p->push_result = e->push_result;
        p->resume_offset = e->resume;
        p->resume_line = PyCode_Addr2Line(root->code, e->resume * 2);
        if (e->push_result)
            p->live.unspec |= slot_bit(root->nlocals + e->sp);  /* numbers it returns */
        return 0;
    case END_BRANCH:
        p->exit = EXIT_BRANCH;
        if (tr_make_live(t, root, o, e->sp, &p->live) < 0
            || tr_make_rebuild(t, o, e->cond, &p->cond) < 0)
            return -1;
        p->branch_true = e->branch_true;
        p->branch_false = e->branch_false;
        p->true_line = PyCode_Addr2Line(root->code, e->branch_true * 2);
        p->false_line = PyCode_Addr2Line(root->code, e->branch_false * 2);
        return 0;
    case END_DEOPT:
        p->exit = EXIT_DEOPT;
        if (tr_make_live(t, root, o, e->sp, &p->live) < 0)
            return -1;
        p->resume_offset = e->resume;
        p->resume_line = PyCode_Addr2Line(root->code, e->resume * 2);
        return 0;
    default:
        PyErr_SetString(PyExc_SystemError, "dynscope: frame ended without an end");
        return -1;
    }
}

/* "<reason> `<condition>`": a branch's reason with its condition as
   written (the last line of the user stack, without a trailing comment).
   New str, or NULL with an exception. */
static PyObject *branch_reason(PyObject *reason, PyObject *stack)
{
    PyObject *last = PyList_GET_ITEM(stack, PyList_GET_SIZE(stack) - 1);
    PyObject *text = PyTuple_GET_ITEM(last, 3);
    PyObject *cut = PyUnicode_FromString("  #");
    Py_ssize_t at = cut ? PyUnicode_Find(text, cut, 0, PY_SSIZE_T_MAX, 1) : -2;
    Py_XDECREF(cut);
    PyObject *cond = at >= 0 ? PyUnicode_Substring(text, 0, at) : Py_NewRef(text);
    PyObject *stripped = cond ? PyObject_CallMethod(cond, "strip", NULL) : NULL;
    Py_XDECREF(cond);
    PyObject *r = stripped ? PyUnicode_FromFormat("%U `%U`", reason, stripped) : NULL;
    Py_XDECREF(stripped);
    return r;
}

/* The break that ended the root frame, in the plan: kind, reason, user
   stack, offset.  0 / -1. */
static int plan_break(Tracer *t, Plan *p)
{
    FrameEnd *e = &t->end;
    p->brk.kind = e->kind_name;
    p->brk.reason = Py_XNewRef(t->reason);
    /* "branch on a tensor value" names the condition as written */
    if (e->kind == END_BRANCH && t->reason && t->stop_stack && PyList_GET_SIZE(t->stop_stack) > 0) {
        PyObject *r = branch_reason(t->reason, t->stop_stack);
        if (r == NULL)
            return -1;
        Py_SETREF(p->brk.reason, r);
    }
    p->brk.user_stack = Py_XNewRef(t->stop_stack);
    p->brk.offset = e->offset;
    return 0;
}

/* Ops nothing reads still run: they may raise, as they would eagerly.
   Make every such node an output -- but a size read that nothing reads,
   whose value the translation decided (tr_symsizes.c), which cannot raise:
   it is dropped.  0 / -1. */
static int output_unread_nodes(Tracer *t, Outputs *o)
{
    PyObject *nodes = PyObject_GetAttrString((PyObject *)t->graph, "nodes");
    if (nodes == NULL)
        return -1;
    PyObject *list = PySequence_List(nodes);       /* the graph's, as it is now */
    Py_DECREF(nodes);
    if (list == NULL)
        return -1;
    int rc = 0;
    for (Py_ssize_t i = 0; rc == 0 && i < PyList_GET_SIZE(list); i++) {
        NodeObject *n = (NodeObject *)PyList_GET_ITEM(list, i);
        if (n->op == NODE_PLACEHOLDER || PySet_Contains(t->used_nodes, (PyObject *)n) != 0)
            continue;
        int out = PySequence_Contains(o->nodes, (PyObject *)n);   /* returned already */
        if (out < 0)
            rc = -1;
        else if (out == 0 && tr_sizes_is_read(n))
            graph_drop_unread(t->graph, n);
        else if (out == 0 && tr_output_index(o, n) < 0)
            rc = -1;
    }
    Py_DECREF(list);
    return rc;
}

/* The backend raised BackendCompilerFailed: the frame stops with its
   message as the reason, with the guards the translation made and the
   backend's own guard, so the same inputs run without capture and do not
   call the backend again (a new shape or backend tries it again).  The
   graph it failed on stays in t->failed_gm for the recording (the repro's
   standalone script, dynscope/repro.py).  -1 (a stop, or another error). */
static int backend_failed(Tracer *t, Plan *p)
{
    if (!PyErr_ExceptionMatches(backend_failed_error()))
        return -1;
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyObject *msg = value ? PyObject_Str(value) : NULL;
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    if (msg == NULL || guardset_add(t->gs, GUARD_BACKEND_MATCH, -1, t->backend, 0) < 0) {
        Py_XDECREF(msg);
        return -1;
    }
    Py_XSETREF(t->failed_gm, Py_NewRef(p->gm));
    /* msg is "backend 'name' raised ...": the format's literal part is
       what the break registry's rule matches */
    PyObject *tail = PyUnicode_Substring(msg, 9, PY_SSIZE_T_MAX);
    Py_DECREF(msg);
    if (tail == NULL)
        return -1;
    Py_CLEAR(t->reason);       /* a frame that ended at a break: the backend is why it runs eagerly */
    tracer_unsupported(t, false, "backend '%U", tail);
    Py_DECREF(tail);
    return -1;
}

/* Close the graph over o's output nodes, make its GraphModule (p->gm) and
   compile it with the backend (p->compiled) -- except under
   fullgraph=True at a break, which raises: its graph never runs.
   0 / -1. */
static int compile_graph(Tracer *t, Outputs *o, Plan *p)
{
    p->ninputs = t->ninputs;
    p->input_acc = PyMem_Calloc((size_t)t->ninputs + 1, sizeof(int));
    if (p->input_acc == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    if (t->ninputs > 0)
        memcpy(p->input_acc, t->input_acc, sizeof(int) * (size_t)t->ninputs);
    PyObject *outs = PyList_AsTuple(o->nodes);
    if (outs == NULL || graph_output(t->graph, outs) < 0) {
        Py_XDECREF(outs);
        return -1;
    }
    Py_DECREF(outs);
    uint64_t g0 = engine_phase_ns();
    p->gm = graph_module_new(t->graph);
    t->graph_ns = engine_phase_ns() - g0;
    if (p->gm == NULL)
        return -1;
    if (!(t->end.kind != END_RETURN && t->rq->fullgraph)) {
        uint64_t b0 = engine_now_ns();
        p->compiled = backend_compile(t->backend, p->gm, t->example_inputs);
        t->backend_ns = engine_now_ns() - b0;
        if (p->compiled == NULL)
            return backend_failed(t, p);
    }
    graph_drop_examples(t->graph);
    return 0;
}

/* The plan's effects from t->writes: RB_SETATTR / RB_SETITEM /
   RB_SETMEMBER each, in order (index 1: by the builtin's own store).  0 / -1
   (t->reason set when a value cannot be rebuilt). */
static int plan_effects(Tracer *t, Outputs *o, Plan *p)
{
    if (t->nwrites == 0)
        return 0;
    p->effects = PyMem_Calloc((size_t)t->nwrites, sizeof(Rebuild));
    if (p->effects == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (int i = 0; i < t->nwrites; i++) {
        AttrWrite *w = &t->writes[i];
        Rebuild *r = &p->effects[p->neffects++];
        r->kind = w->set_member ? RB_SETMEMBER : w->item ? RB_SETITEM : RB_SETATTR;
        r->index = w->set_member ? w->value != NULL : w->builtin;     /* add / builtin store */
        r->obj = Py_NewRef(w->name);
        r->n = w->value && !w->set_member ? 2 : 1;
        r->items = PyMem_Calloc(3, sizeof(Rebuild));
        if (r->items == NULL) {
            r->n = 0;
            PyErr_NoMemory();
            return -1;
        }
        if (tr_make_rebuild(t, o, w->target, &r->items[0]) < 0
            || (r->n == 2 && tr_make_rebuild(t, o, w->value, &r->items[1]) < 0))
            return -1;
    }
    return 0;
}

/* Close the graph over everything the plan needs, build the plan's exit,
   call the backend; the result goes into p.  0 / -1. */
int tr_finish(Tracer *t, TFrame *root, Plan *p)
{
    FrameEnd *e = &t->end;
    /* before any rebuild: an iterator a slot and the program share is one
       real iterator */
    tr_mark_escapes(e->kind == END_RETURN ? e->retval : NULL, 0);
    for (int i = 0; i < t->nwrites; i++)
        tr_mark_escapes(t->writes[i].value, 0);
    if (e->kind == END_CALL) {
        tr_mark_escapes(e->callable, 0);
        for (int i = 0; i < e->nargs; i++)
            tr_mark_escapes(e->args[i], 0);
    }
    Outputs o;
    memset(&o, 0, sizeof(o));
    o.nodes = PyList_New(0);
    if (o.nodes == NULL)
        return -1;
    int rc = -1;
    if (plan_exit(t, root, &o, p) < 0 || plan_effects(t, &o, p) < 0)
        goto out;
    if (e->kind != END_RETURN && plan_break(t, p) < 0)
        goto out;
    if (output_unread_nodes(t, &o) < 0)
        goto out;
    p->nmemo = o.nmemo;
    p->memo = o.memo;
    o.memo = NULL;
    o.nmemo = 0;
    p->nops = graph_op_count(t->graph);
    p->noutputs = (int)PyList_GET_SIZE(o.nodes);
    if (p->noutputs > 0) {
        if (compile_graph(t, &o, p) < 0)
            goto out;
    }
    else {
        p->nops = 0;   /* nothing computed reaches the frame: no graph runs */
    }
    if (guardset_add(t->gs, GUARD_BACKEND_MATCH, -1, t->backend, 0) < 0)
        goto out;
    rc = 0;
out:
    tr_outputs_clear(&o);
    return rc;
}
