/*
 * tr_generators.c -- generators made while translating, run lazily
 * (DESIGN.md 3.4; contract: translate_int.h).
 *
 * Calling a generator function of the program makes a V_GEN: a symbolic
 * frame of its own, bound to the arguments and not started, which each
 * next() -- the builtin, a for loop, a context manager's __enter__ and
 * __exit__ -- runs from where it stopped to its next yield, as CPython
 * runs the real one: code after a yield runs when the program asks for
 * the next value, not before.  A generator that returns ends (the next
 * next() would raise StopIteration, which the translator does not model:
 * tracing stops there).
 *
 * contextlib.contextmanager: `with cm(...)` builds a
 * _GeneratorContextManager (an object of a program class, tr_newobj.c)
 * whose __init__ makes the generator; its __enter__ and __exit__ are
 * modelled here, as contextlib defines them for a block that raises
 * nothing: enter runs the generator to its yield, exit runs it to its
 * end and returns False.
 *
 * Invariants: a generator's frame belongs to the tracer (Tracer.gens),
 * freed with it; its parent is the frame that last resumed it.  A V_GEN
 * cannot leave the translation (tr_rebuild.c refuses it), so the program
 * never sees a generator the translator ran.
 */
#include "translate_int.h"

/* (contract: translate_int.h) */
TFrame *tr_gen_frame_new(Tracer *t)
{
    if (t->ngens == t->gens_cap) {
        int cap = t->gens_cap ? t->gens_cap * 2 : 4;
        TFrame **g = PyMem_Realloc(t->gens, sizeof(TFrame *) * (size_t)cap);
        if (g == NULL) {
            PyErr_NoMemory();
            return NULL;
        }
        t->gens = g;
        t->gens_cap = cap;
    }
    TFrame *f = PyMem_Calloc(1, sizeof(TFrame));
    if (f == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    t->gens[t->ngens++] = f;
    return f;
}

/* (contract: translate_int.h) */
void tr_gen_frames_free(Tracer *t)
{
    for (int i = 0; i < t->ngens; i++) {
        tr_frame_teardown(t->gens[i]);
        PyMem_Free(t->gens[i]);
    }
    PyMem_Free(t->gens);
    t->gens = NULL;
    t->ngens = t->gens_cap = 0;
}

/* (contract: translate_int.h) */
int tr_gen_resume(TFrame *f, Value *gen, Value **yielded)
{
    Tracer *t = f->t;
    TFrame *g = gen->gen;
    *yielded = NULL;
    if (g->resume_at == -2)
        return 0;
    if (g->parent != NULL && g->t->current == g)
        return tracer_unsupported(t, true, "a generator resumed while it runs");
    if (t->depth >= MAX_INLINE_DEPTH)
        return tracer_unsupported(t, false, "inlining deeper than %d calls (recursion?)", MAX_INLINE_DEPTH);
    int start = g->resume_at;
    if (start >= 0) {
        Value *sent = value_new(t, V_CONST, Py_None);    /* next() sends None */
        if (push(g, sent) < 0)
            return -1;
    }
    g->parent = f;
    t->depth++;
    TFrame *saved = t->current;
    int r = tr_run_frame(g, start >= 0 ? start : 0);
    t->current = saved;
    t->depth--;
    if (r == FRAME_YIELDED) {
        *yielded = g->yielded;
        return 1;
    }
    if (r == FRAME_RETURNED) {
        g->resume_at = -2;
        return 0;
    }
    t->raised = NULL;   /* an exception leaving a generator: a plain stop (the
                           generator would be finished, its Value is not) */
    return -1;
}

/* next(gen): what it yields next.  NULL when tracing stops (the
   generator ended: eagerly, StopIteration). */
Value *tr_gen_next(TFrame *f, Value *gen)
{
    Value *v;
    int r = tr_gen_resume(f, gen, &v);
    if (r == 0)
        return tracer_unsupported(f->t, false, "next() of a generator that has ended (StopIteration)"), NULL;
    return r > 0 ? v : NULL;
}

/* ---- contextlib.contextmanager ---- */

/* Whether fn is contextlib._GeneratorContextManager's `name` (__enter__
   or __exit__): the function contextlib's class holds now. */
static bool is_contextlib_method(PyObject *fn, const char *name)
{
    if (!PyFunction_Check(fn))
        return false;
    static PyObject *modname;
    if (modname == NULL && (modname = PyUnicode_InternFromString("contextlib")) == NULL) {
        PyErr_Clear();
        return false;
    }
    PyObject *mod = PyImport_GetModule(modname);
    PyObject *cls = mod ? PyObject_GetAttrString(mod, "_GeneratorContextManager") : NULL;
    PyObject *key = cls && PyType_Check(cls) ? PyUnicode_InternFromString(name) : NULL;
    PyObject *meth = key ? _PyType_Lookup((PyTypeObject *)cls, key) : NULL;    /* borrowed */
    bool is = meth != NULL && meth == fn;
    Py_XDECREF(key);
    Py_XDECREF(cls);
    Py_XDECREF(mod);
    PyErr_Clear();
    return is;
}

/* self.gen of a _GeneratorContextManager made while tracing: its V_GEN,
   or NULL when tracing stops. */
static Value *manager_generator(TFrame *f, Value *self)
{
    if (self->kind != V_NEWOBJ)
        return tracer_unsupported(f->t, false, "a contextmanager made before the translated call"), NULL;
    PyObject *name = PyUnicode_InternFromString("gen");
    Value *gen = name ? tr_newobj_attr(f, self, name) : NULL;
    Py_XDECREF(name);
    if (gen != NULL && gen->kind != V_GEN)
        return tracer_unsupported(f->t, false, "a contextmanager whose generator is not one it made"), NULL;
    return gen;
}

/* (contract: translate_int.h) */
Value *tr_contextlib_call(TFrame *f, PyObject *fn, Value **args, int nargs, PyObject *kwnames,
                          bool *handled)
{
    Tracer *t = f->t;
    bool enter = is_contextlib_method(fn, "__enter__");
    *handled = enter || is_contextlib_method(fn, "__exit__");
    if (!*handled)
        return NULL;
    if ((kwnames && PyTuple_GET_SIZE(kwnames) > 0) || nargs != (enter ? 1 : 4))
        return tracer_unsupported(t, false, "a contextmanager's %s called with other arguments",
                                  enter ? "__enter__" : "__exit__"), NULL;
    Value *gen = manager_generator(f, args[0]);
    if (gen == NULL)
        return NULL;
    Value *v;
    if (enter) {
        /* del self.args, self.kwds, self.func; return next(self.gen) */
        static const char *const gone[] = {"args", "kwds", "func"};
        for (int i = 0; i < 3; i++) {
            PyObject *name = PyUnicode_InternFromString(gone[i]);
            int rc = name ? tr_newobj_del_attr(f, args[0], name) : -1;
            Py_XDECREF(name);
            if (rc < 0)
                return NULL;
        }
        int r = tr_gen_resume(f, gen, &v);
        if (r == 0)
            return tracer_unsupported(t, false, "a contextmanager's generator did not yield "
                                      "(RuntimeError)"), NULL;
        return r > 0 ? v : NULL;
    }
    if (args[1]->kind != V_CONST || args[1]->obj != Py_None)
        return tracer_unsupported(t, false, "a contextmanager's __exit__ with an exception"), NULL;
    int r = tr_gen_resume(f, gen, &v);
    if (r > 0)
        return tracer_unsupported(t, false, "a contextmanager's generator did not stop "
                                  "(RuntimeError)"), NULL;
    return r == 0 ? value_new(t, V_CONST, Py_False) : NULL;
}
