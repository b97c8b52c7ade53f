/*
 * tr_raise.c -- exceptions the traced code raises and catches, and the
 * opcodes that handle them (RAISE_VARARGS, PUSH_EXC_INFO, CHECK_EXC_MATCH,
 * RERAISE) (DESIGN.md 3.4; contract: translate_int.h; the dispatch that
 * calls these tr_op_* handlers is tr_interp.c's).
 */
#include "translate_int.h"

/* ---- exceptions the traced code raises and catches ----
 *
 * `raise E(...)` of a builtin exception made on constants is a stop whose
 * reason says so, with Tracer.raised set: the inlined frames unwind (each
 * frame's stop path looks up its exception table at the instruction that
 * stopped) to the first handler, which runs as any code -- PUSH_EXC_INFO,
 * CHECK_EXC_MATCH against the class, POP_EXCEPT, RERAISE when it does not
 * match.  What the frames between did stays done, as eagerly.  The root
 * frame never catches: an exception that reaches it is a plain stop, and
 * its call runs eagerly (tr_call_or_undo undoes what tracing it did). */

/* Raise V_EXC exc.  Returns -1 (a stop, see above; contract:
   translate_int.h). */
int tr_raise(TFrame *f, Value *exc)
{
    Tracer *t = f->t;
    if (t->reason != NULL)
        return -1;
    PyObject *msg = PyObject_Str(exc->obj);
    if (msg == NULL)
        return -1;
    tracer_unsupported(t, false, "raises %s: %U", Py_TYPE(exc->obj)->tp_name, msg);
    Py_DECREF(msg);
    if (t->reason != NULL)
        t->raised = exc;
    return -1;
}

/* (contract: translate_int.h) */
bool tr_exception_class_is_plain(PyObject *cls)
{
    if (!PyExceptionClass_Check(cls))
        return false;
    PyTypeObject *tp = (PyTypeObject *)cls, *solid = tp;
    while (solid != NULL && (solid->tp_flags & Py_TPFLAGS_HEAPTYPE))
        solid = solid->tp_base;
    return solid != NULL && tp->tp_init == solid->tp_init && tp->tp_new == solid->tp_new
           && Py_TYPE(tp)->tp_call == PyType_Type.tp_call;
}

/* RAISE_VARARGS 1 (2: with `from`): raise an exception made while tracing, or a plain
   exception class (instantiated with no arguments, as raise does). */
int tr_op_raise(TFrame *f, const Instr *in)
{
    Tracer *t = f->t;
    if (in->oparg == 0)
        return tracer_unsupported(t, true, "a bare raise");
    Value *cause = in->oparg == 2 ? pop(f) : NULL;
    Value *v = pop(f);
    if (v->kind == V_CONST && tr_exception_class_is_plain(v->obj)) {
        v = new_const(t, PyObject_CallNoArgs(v->obj));
        if (v == NULL)
            return -1;
        v->kind = V_EXC;
    }
    if (v->kind != V_EXC)
        return tracer_unsupported(t, false, "raising a value the translator did not make");
    if (cause != NULL) {
        /* raise E from None / from another exception made while tracing */
        if (!(cause->kind == V_EXC || (cause->kind == V_CONST && cause->obj == Py_None)))
            return tracer_unsupported(t, false, "raise ... from a value the translator did not make");
        PyException_SetCause(v->obj, Py_IsNone(cause->obj) ? NULL : Py_NewRef(cause->obj));
        ((PyBaseExceptionObject *)v->obj)->suppress_context = 1;
    }
    return tr_raise(f, v);
}


/* PUSH_EXC_INFO: [exc] -> [previous exception info, exc]. */
int tr_op_push_exc_info(TFrame *f)
{
    Value *exc = pop(f);
    return push(f, value_new(f->t, V_CONST, Py_None)) < 0 ? -1 : push(f, exc);
}

/* CHECK_EXC_MATCH: [exc, cls] -> [exc, isinstance(exc, cls)]. */
int tr_op_check_exc_match(TFrame *f)
{
    Tracer *t = f->t;
    Value *cls = pop(f), *exc = peek(f, 1);
    PyObject *c = cls->kind == V_CONST ? Py_NewRef(cls->obj)
                  : cls->kind == V_TUPLE ? value_as_constant(t, cls) : NULL;
    if (c == NULL || exc->kind != V_EXC) {
        Py_XDECREF(c);
        return PyErr_Occurred() ? -1 : tracer_unsupported(t, false, "an except clause on these values");
    }
    int match = PyErr_GivenExceptionMatches(exc->obj, c);
    Py_DECREF(c);
    return push(f, value_new(t, V_CONST, match ? Py_True : Py_False));
}

/* RERAISE: raise the exception on top again. */
int tr_op_reraise(TFrame *f)
{
    Value *exc = pop(f);
    if (exc->kind != V_EXC)
        return tracer_unsupported(f->t, false, "re-raising an exception the program raised");
    return tr_raise(f, exc);
}

/* The raised exception, caught in frame f: the stop it was is cleared and
   f is the frame being interpreted again. */
static void caught(TFrame *f)
{
    Tracer *t = f->t;
    t->raised = NULL;
    Py_CLEAR(t->reason);
    Py_CLEAR(t->stop_stack);
    t->permanent = false;
    t->stop_kind = STOP_NONE;
    t->current = f;
}

/* The raised exception (Tracer.raised) stopped inlined frame f at code
   unit `offset`: when a handler of f covers it, the stack is cut to the
   handler's depth, the exception pushed (after the offset, if the handler
   wants it), the stop cleared, and *ip set to the handler.  Whether it
   was caught. */
bool tr_catch_raised(TFrame *f, int offset, int *ip)
{
    Tracer *t = f->t;
    int target, depth;
    bool lasti;
    if (f->parent == NULL || t->raised == NULL || PyErr_Occurred()
        || !code_handler_at(f->code, offset, &target, &depth, &lasti) || depth > f->sp)
        return false;
    Value *exc = t->raised;
    f->sp = depth;
    if ((lasti && push(f, new_const(t, PyLong_FromLong(offset))) < 0) || push(f, exc) < 0)
        return false;
    caught(f);
    *ip = target;
    return true;
}

/* (contract: translate_int.h) */
bool tr_catch_attribute_error(TFrame *f)
{
    Tracer *t = f->t;
    if (t->raised == NULL || t->raised->kind != V_EXC || PyErr_Occurred()
        || !PyErr_GivenExceptionMatches(t->raised->obj, PyExc_AttributeError))
        return false;
    caught(f);
    return true;
}
