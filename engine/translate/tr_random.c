/*
 * tr_random.c -- random ops inside graphs: which calls draw random
 * numbers, and the generator states that keep tracing them invisible.
 *
 * Tracing runs every op once on example values.  A random op run that way
 * draws from the program's generator, and the graph then draws again when
 * it runs: the program would see other numbers than eager code does.  So
 * before a traced op first draws from a generator, that generator's state
 * is saved (tr_random_note_*), and every saved state is put back when the
 * translation ends, whatever its outcome (tr_random_restore, called by
 * translate.c before any part of the plan runs).  At run time the graph
 * draws from the real generator, in program order, as eager code does;
 * nothing reorders or drops a graph's nodes (an op nothing reads is still a
 * graph output, tr_exit.c), so the draws happen in eager's number and order.
 *
 * Generators saved:
 *   torch   the default CPU generator (torch.default_generator; a torch
 *           without it makes every random op a call break), and every
 *           CUDA device's once CUDA is initialised.  A random op on another
 *           device is a call break, found before it runs: its generator is
 *           not saved here.  generator= arguments stay call breaks
 *           (tensorops.c).
 *   NumPy   a RandomState (np.random's module functions draw from the
 *           global one) through get_state()/set_state(), which keep its
 *           cached Gaussian; a Generator through bit_generator.state.
 *
 * Invariants:
 *   - A generator's state is saved once per translation, before its first
 *     draw; states are restored newest first, so two objects sharing one
 *     bit generator end at the state saved first (the program's).
 *   - Tracer.rng_saved is NULL until something draws: a translation without
 *     random ops costs nothing here.
 */
#include "translate_int.h"
#include "../base/tensorlib.h"

#include <string.h>

/* NumPy's RandomState / Generator methods that draw and return new arrays
   (or numbers): graph ops.  shuffle (in place), bytes (not an array) and
   the state methods are not here. */
static const char *const numpy_draw_names[] = {
    "random", "random_sample", "sample", "ranf", "rand", "randn", "randint", "integers",
    "standard_normal", "normal", "uniform", "exponential", "standard_exponential",
    "poisson", "binomial", "negative_binomial", "beta", "gamma", "standard_gamma",
    "lognormal", "laplace", "logistic", "gumbel", "chisquare", "standard_cauchy",
    "standard_t", "geometric", "rayleigh", "weibull", "pareto", "power", "vonmises",
    "wald", "triangular", "choice", "permutation", "multinomial", "dirichlet", NULL,
};

/* Whether `saved` already holds the state of owner.  */
static bool already_saved(Tracer *t, PyObject *owner)
{
    if (t->rng_saved == NULL)
        return false;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(t->rng_saved); i++)
        if (PyTuple_GET_ITEM(PyList_GET_ITEM(t->rng_saved, i), 0) == owner)
            return true;
    return false;
}

/* Append (owner, restore, args): restore(*args) puts owner back.  Steals
   nothing.  0 / -1. */
static int push_saved(Tracer *t, PyObject *owner, PyObject *restore, PyObject *args)
{
    if (t->rng_saved == NULL && (t->rng_saved = PyList_New(0)) == NULL)
        return -1;
    PyObject *rec = PyTuple_Pack(3, owner, restore, args);
    int rc = rec ? PyList_Append(t->rng_saved, rec) : -1;
    Py_XDECREF(rec);
    return rc;
}

/* Save owner's state: getter() now, setter(state) later.  0 / -1. */
static int save_with(Tracer *t, PyObject *owner, const char *getter, const char *setter)
{
    if (already_saved(t, owner))
        return 0;
    PyObject *state = PyObject_CallMethod(owner, getter, NULL);
    PyObject *restore = state ? PyObject_GetAttrString(owner, setter) : NULL;
    PyObject *args = restore ? PyTuple_Pack(1, state) : NULL;
    int rc = args ? push_saved(t, owner, restore, args) : -1;
    Py_XDECREF(state);
    Py_XDECREF(restore);
    Py_XDECREF(args);
    return rc;
}

int tr_random_note_torch(Tracer *t)
{
    PyObject *gen = tensorlib_loaded_module_attr("torch", "default_generator");   /* borrowed */
    if (gen == NULL)    /* a torch without one: tracing's draw could not be undone */
        return tracer_break(t, STOP_CALL, "a random op draws random numbers on a device whose "
                            "generator this torch does not expose (no torch.default_generator)");
    int rc = save_with(t, gen, "get_state", "set_state");
    if (rc < 0)
        return -1;
    /* CUDA's generators only once CUDA is up: asking for them would start it */
    PyObject *cuda = tensorlib_loaded_module_ref("torch.cuda");
    if (cuda == NULL)
        return PyErr_Occurred() ? -1 : 0;
    PyObject *up = already_saved(t, cuda) ? NULL : PyObject_CallMethod(cuda, "is_initialized", NULL);
    int on = up ? PyObject_IsTrue(up) : 0;
    Py_XDECREF(up);
    if (PyErr_Occurred())
        rc = -1;
    else if (on == 1)
        rc = save_with(t, cuda, "get_rng_state_all", "set_rng_state_all");
    Py_DECREF(cuda);
    return rc;
}

int tr_random_torch_device_ok(PyObject *example)
{
    PyObject *dev = PyObject_GetAttrString(example, "device");
    PyObject *type = dev ? PyObject_GetAttrString(dev, "type") : NULL;
    Py_XDECREF(dev);
    if (type == NULL)
        return -1;
    int ok = PyUnicode_CompareWithASCIIString(type, "cpu") == 0
             || PyUnicode_CompareWithASCIIString(type, "cuda") == 0
             || PyUnicode_CompareWithASCIIString(type, "meta") == 0;
    Py_DECREF(type);
    return ok;
}

/* The class name of obj's type, if it is numpy.random's `name`. */
static bool is_numpy_random_class(PyObject *obj, const char *name)
{
    PyTypeObject *tp = Py_TYPE(obj);
    const char *dot = strrchr(tp->tp_name, '.');
    if (strcmp(dot ? dot + 1 : tp->tp_name, name) != 0)
        return false;
    PyObject *cls = tensorlib_loaded_module_attr("numpy.random", name);          /* borrowed */
    return cls != NULL && PyType_Check(cls) && PyObject_TypeCheck(obj, (PyTypeObject *)cls);
}

PyObject *tr_random_numpy_owner(PyObject *fn)
{
    PyObject *self, *func;                               /* borrowed */
    if (PyMethod_Check(fn)) {            /* Cython's methods: a method of a cyfunction */
        self = PyMethod_GET_SELF(fn);
        func = PyMethod_GET_FUNCTION(fn);
    }
    else if (PyCFunction_Check(fn) && PyCFunction_GET_SELF(fn) != NULL) {
        self = PyCFunction_GET_SELF(fn);
        func = fn;
    }
    else
        return NULL;
    if (!is_numpy_random_class(self, "RandomState") && !is_numpy_random_class(self, "Generator"))
        return NULL;
    PyObject *name = PyObject_GetAttrString(func, "__name__");
    bool draws = false;
    for (int i = 0; name && PyUnicode_Check(name) && numpy_draw_names[i] && !draws; i++)
        draws = PyUnicode_CompareWithASCIIString(name, numpy_draw_names[i]) == 0;
    Py_XDECREF(name);
    PyErr_Clear();
    return draws ? self : NULL;
}

int tr_random_note_numpy(Tracer *t, PyObject *rng)
{
    if (already_saved(t, rng))
        return 0;
    if (is_numpy_random_class(rng, "RandomState"))
        return save_with(t, rng, "get_state", "set_state");
    /* a Generator: the state is its bit generator's, a property */
    PyObject *bits = PyObject_GetAttrString(rng, "bit_generator");
    PyObject *state = bits ? PyObject_GetAttrString(bits, "state") : NULL;
    PyObject *restore = state ? PyObject_GetAttrString(bits, "__setattr__") : NULL;
    PyObject *args = restore ? Py_BuildValue("(sO)", "state", state) : NULL;
    int rc = args ? push_saved(t, rng, restore, args) : -1;
    Py_XDECREF(bits);
    Py_XDECREF(state);
    Py_XDECREF(restore);
    Py_XDECREF(args);
    return rc;
}

void tr_random_restore(Tracer *t)
{
    if (t->rng_saved == NULL)
        return;
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);                   /* the translation's own, kept */
    for (Py_ssize_t i = PyList_GET_SIZE(t->rng_saved) - 1; i >= 0; i--) {
        PyObject *rec = PyList_GET_ITEM(t->rng_saved, i);
        PyObject *restore = PyTuple_GET_ITEM(rec, 1);
        PyObject *r = PyObject_Call(restore, PyTuple_GET_ITEM(rec, 2), NULL);
        if (r == NULL)
            PyErr_WriteUnraisable(restore);   /* the program's generator could not be put back */
        Py_XDECREF(r);
    }
    Py_CLEAR(t->rng_saved);
    PyErr_Restore(type, value, tb);
}

/* (contract: translate_int.h) */
Value *tr_random_numpy_draw_call(TFrame *f, Value *b, Value **args, int nargs, PyObject *kwnames)
{
    Tracer *t = f->t;
    Value *self = b->items[0];
    if (!PyUnicode_Check(b->obj) || tensorlib_kind(self->obj) != TENSORLIB_NONE)
        return NULL;
    PyObject *meth = PyObject_GetAttr(self->obj, b->obj);
    if (meth == NULL) {
        PyErr_Clear();
        return NULL;
    }
    /* the receiver itself (rng.normal), or a module holding a drawing
       method (np.random.rand: the global RandomState's) */
    PyObject *owner = tr_random_numpy_owner(meth);
    int acc = self->src;
    AccessorKind root = t->gs->acc[acc].kind;
    if (owner == self->obj && (root == ACC_LOCAL || root == ACC_STACK)) {
        /* a generator passed in: its identity guarded would recompile for
           each new one (the draw stays an eager step) */
        owner = NULL;
    }
    if (owner != NULL && owner != self->obj && PyModule_Check(self->obj))
        acc = guardset_accessor(t->gs, ACC_ATTR, self->src, 0, b->obj, NULL);
    else if (owner != self->obj)
        owner = NULL;
    Value *r = NULL;
    if (owner != NULL && acc >= 0
        && guardset_add(t->gs, GUARD_ID_MATCH, acc, acc == self->src ? self->obj : meth, 0) >= 0) {
        const char *hint = PyUnicode_AsUTF8(b->obj);
        r = hint ? tensorops_call(t, NODE_CALL_FUNCTION, meth, hint, args, nargs, kwnames) : NULL;
    }
    Py_DECREF(meth);
    return r;
}
