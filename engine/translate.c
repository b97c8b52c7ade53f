/*
 * translate.c -- the symbolic interpreter over CPython 3.11 bytecode
 * (DESIGN.md 3.4).
 *
 * translate_frame() interprets a code object's de-specialized bytecode
 * (co_code, never the live adaptive copy) with symbolic Values on a
 * symbolic stack.  Inputs are read from the concrete frame through
 * accessors, and reading one adds the guards that keep the capture valid
 * (values.c).  Tensor operations become graph nodes (tensorops.c); Python
 * arithmetic on constants is folded; calls to user functions are inlined;
 * branches on constants and loops over known sequences are followed, with
 * a bound on the instructions interpreted.  At RETURN_VALUE the graph is
 * closed and the plan records how to rebuild the return value.
 *
 * Anything it does not model stops tracing with a reason; the hook then
 * runs the frame in the default interpreter.  The translator never has
 * effects the program could see: it runs only pure tensor ops, on example
 * values, and reads attributes only through the generic, descriptor-free
 * path.
 */
#include "pycompat.h"
#include "translate.h"

#include <string.h>

#define MAX_STEPS 50000        /* instructions interpreted per translation */
#define MAX_INLINE_DEPTH 12
#define MAX_STACK 256

typedef struct TFrame {
    Tracer *t;
    struct TFrame *parent;
    PyCodeObject *code;        /* borrowed (the function or frame keeps it) */
    PyObject *func;            /* borrowed: the function being interpreted */
    int func_src;              /* accessor of func, -1 for the root frame */
    Bytecode bc;               /* code's co_code, read through pycompat.h */
    int nlocals;
    Value **locals;            /* owned array: co_nlocals slots, NULL = unbound */
    Value *stack[MAX_STACK];
    int sp;
    PyObject *globals;         /* borrowed: func_globals */
    int globals_acc;           /* -1: the root frame's G[...]; else accessor of func.__globals__ */
    PyObject *kwnames;         /* borrowed: pending KW_NAMES, or NULL */
    Value *retval;
    int cur_instr;             /* code unit of the instruction being interpreted */
} TFrame;

/* run_frame results */
#define FRAME_RETURNED 0       /* f->retval set */
#define FRAME_ENDED 1          /* root frame only: t->end describes a break or deopt */
#define FRAME_STOPPED (-1)     /* t->reason set, or an exception */

static int run_frame(TFrame *f, int start);

/* ---- where tracing is ---- */

/* Source files' lines, read through linecache.getlines but kept here: a
   file the program's linecache.cache did not hold is taken out of it again
   (programs and tests read that cache).  Strong dict filename -> list. */
static PyObject *source_files;

/* Line `line` of `filename`, stripped; "" when unknown.  New str or NULL. */
static PyObject *source_line(PyObject *filename, int line)
{
    if (source_files == NULL && (source_files = PyDict_New()) == NULL)
        return NULL;
    PyObject *lines = PyDict_GetItemWithError(source_files, filename);   /* borrowed */
    if (lines == NULL && !PyErr_Occurred()) {
        PyObject *linecache = PyImport_ImportModule("linecache");
        PyObject *cache = linecache ? PyObject_GetAttrString(linecache, "cache") : NULL;
        int had = cache != NULL && PyDict_Check(cache) ? PyDict_Contains(cache, filename) : -1;
        PyObject *got = had >= 0 ? PyObject_CallMethod(linecache, "getlines", "O", filename) : NULL;
        if (got != NULL && had == 0 && PyDict_DelItem(cache, filename) < 0)
            PyErr_Clear();   /* it did not make an entry */
        if (got != NULL && PyList_Check(got) && PyDict_SetItem(source_files, filename, got) == 0)
            lines = got;     /* source_files holds it now */
        Py_XDECREF(got);
        Py_XDECREF(cache);
        Py_XDECREF(linecache);
    }
    PyErr_Clear();
    if (lines == NULL || line < 1 || line > PyList_GET_SIZE(lines))
        return PyUnicode_FromString("");
    return PyObject_CallMethod(PyList_GET_ITEM(lines, line - 1), "strip", NULL);
}

PyObject *tracer_user_stack(Tracer *t)
{
    PyObject *stack = PyList_New(0);
    if (stack == NULL)
        return NULL;
    for (TFrame *f = t->current; f != NULL; f = f->parent) {
        PyCodeObject *co = f->code;
        int line = PyCode_Addr2Line(co, f->cur_instr * 2);
        PyObject *stripped = source_line(co->co_filename, line);
        if (stripped == NULL) {
            PyErr_Clear();
            stripped = PyUnicode_FromString("");
        }
        PyObject *item = stripped ? Py_BuildValue("(OiON)", co->co_filename, line,
                                                  co->co_qualname, stripped) : NULL;
        if (item == NULL || PyList_Insert(stack, 0, item) < 0) {
            Py_XDECREF(item);
            Py_DECREF(stack);
            return NULL;
        }
        Py_DECREF(item);
    }
    return stack;
}

int tracer_offset(Tracer *t)
{
    return t->current ? t->current->cur_instr * 2 : 0;
}

/* Bit of live slot k in a mask, or 0 past the mask's width. */
static uint64_t slot_bit(int k)
{
    return k < LIVE_MAX_SLOTS ? (uint64_t)1 << k : 0;
}

/* ---- small helpers ---- */

static int push(TFrame *f, Value *v)
{
    if (v == NULL)
        return -1;
    if (f->sp >= MAX_STACK)
        return tracer_unsupported(f->t, true, "value stack deeper than %d", MAX_STACK);
    f->stack[f->sp++] = v;
    return 0;
}

static Value *pop(TFrame *f)
{
    ENGINE_ASSERT(f->sp > 0);
    return f->stack[--f->sp];
}

static Value *peek(TFrame *f, int k)
{
    ENGINE_ASSERT(f->sp >= k);
    return f->stack[f->sp - k];
}

static Value *new_const(Tracer *t, PyObject *obj_steal)
{
    if (obj_steal == NULL)
        return NULL;
    Value *v = value_new(t, V_CONST, obj_steal);
    Py_DECREF(obj_steal);
    return v;
}

static PyObject *local_name(PyCodeObject *co, int i)
{
    return PyTuple_GET_ITEM(code_localsplusnames(co), i);
}

/* ---- reading variables ---- */

static Value *value_from_resume_slot(TFrame *f, int acc, PyObject *obj, int k);
static Value *make_iter(TFrame *f, Value *v);

static Value *load_local(TFrame *f, int i)
{
    if (f->locals[i] != NULL && f->locals[i]->kind == V_NULL)
        return tracer_unsupported(f->t, false, "reads deleted local '%U'", local_name(f->code, i)), NULL;
    if (f->locals[i] != NULL)
        return f->locals[i];
    if (f->parent == NULL && i < f->t->fv->nlocals) {
        /* An input of the root frame, read on first use so that only what
           the code uses is guarded. */
        PyObject *obj = f->t->fv->locals[i];
        if (obj == NULL)
            return tracer_unsupported(f->t, false, "reads unbound local '%U'", local_name(f->code, i)), NULL;
        int acc = guardset_accessor(f->t->gs, ACC_LOCAL, -1, i, NULL, local_name(f->code, i));
        if (acc < 0)
            return NULL;
        f->locals[i] = value_from_resume_slot(f, acc, obj, i);
        return f->locals[i];
    }
    return tracer_unsupported(f->t, false, "reads unbound local '%U'", local_name(f->code, i)), NULL;
}

/* A (nested) list of Python numbers, as .tolist() returns. */
static bool is_list_of_numbers(PyObject *obj)
{
    if (!PyList_CheckExact(obj) || PyList_GET_SIZE(obj) == 0)
        return false;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(obj); i++) {
        PyObject *x = PyList_GET_ITEM(obj, i);
        if (!(PyFloat_CheckExact(x) || PyLong_CheckExact(x) || PyComplex_CheckExact(x)
              || is_list_of_numbers(x)))
            return false;
    }
    return true;
}

/* A for-loop iterator that came into resume slot k (accessor acc, object
   obj) as the tuple of its remaining items, or over a tensor as the rows
   left: one V_ITER for one object, however many slots hold it.  NULL when
   tracing stops. */
static Value *resume_slot_iter(TFrame *f, int acc, PyObject *obj, int k)
{
    Tracer *t = f->t;
    PyObject *key = PyLong_FromVoidPtr(obj);
    if (key == NULL)
        return NULL;
    if (t->iter_objs == NULL && (t->iter_objs = PyDict_New()) == NULL) {
        Py_DECREF(key);
        return NULL;
    }
    PyObject *seen = PyDict_GetItemWithError(t->iter_objs, key);
    if (seen != NULL) {
        Py_DECREF(key);
        Value *same = PyLong_AsVoidPtr(seen);
        /* on later calls too, this slot holds the other slot's object
           (a relative guard: the object itself is the run's, not ours
           to keep) */
        int other = same->in_acc;
        if (guardset_add(t->gs, GUARD_SAME_AS, acc, NULL, other) < 0)
            return NULL;
        return same;
    }
    Value *items = PyErr_Occurred() ? NULL : value_from_source(t, acc, obj);
    Value *it;
    if (items != NULL && items->kind == V_TENSOR) {
        it = make_iter(f, items);   /* the rows of a tensor still to read (RB_ROWS) */
    }
    else {
        it = items ? value_new(t, V_ITER, NULL) : NULL;
        for (int i = 0; it && i < items->n; i++)
            if (value_append(t, it, items->items[i]) < 0)
                it = NULL;
        if (it != NULL)
            it->came_in_slot = k + 1;
    }
    if (it != NULL)
        it->in_acc = acc;
    PyObject *ptr = it ? PyLong_FromVoidPtr(it) : NULL;
    if (ptr == NULL || PyDict_SetItem(t->iter_objs, key, ptr) < 0)
        it = NULL;
    Py_XDECREF(ptr);
    Py_DECREF(key);
    return it;
}

/* The value of live slot k (locals first, then stack) of a resume frame:
   numbers an eager step produced stay unspecialized, and a for-loop
   iterator arrives as the tuple of its remaining items. */
static Value *value_from_resume_slot(TFrame *f, int acc, PyObject *obj, int k)
{
    Tracer *t = f->t;
    uint64_t bit = slot_bit(k);
    if ((t->cf->unspec & bit) && (PyFloat_CheckExact(obj) || PyLong_CheckExact(obj)
                                  || PyComplex_CheckExact(obj)))
        return value_unspecialized(t, acc, obj);
    if ((t->cf->unspec & bit) && is_list_of_numbers(obj)) {
        /* data that escaped (.tolist()): its values must not be guarded */
        if (guardset_add(t->gs, GUARD_TYPE_MATCH, acc, (PyObject *)Py_TYPE(obj), 0) < 0)
            return NULL;
        Value *v = value_new(t, V_OBJECT, obj);
        if (v)
            v->src = acc;
        return v;
    }
    if ((t->cf->iters & bit) && (PyTuple_CheckExact(obj) || tensor_is_array(obj) || tensor_is_torch(obj)))
        return resume_slot_iter(f, acc, obj, k);
    return value_from_source(t, acc, obj);
}

/* A free variable: root frames read the function's closure cell; inlined
   frames reach it as func.__closure__[k].cell_contents. */
static Value *load_free(TFrame *f, int k)
{
    PyObject *closure = PyFunction_GET_CLOSURE(f->func);
    if (closure == NULL || k >= PyTuple_GET_SIZE(closure))
        return tracer_unsupported(f->t, true, "a free variable without a closure cell"), NULL;
    PyObject *cell = PyTuple_GET_ITEM(closure, k);
    PyObject *obj = PyCell_GET(cell);
    PyObject *name = local_name(f->code, code_first_free(f->code) + k);
    int acc;
    if (f->func_src < 0) {
        acc = guardset_accessor(f->t->gs, ACC_CLOSURE, -1, k, NULL, name);
    }
    else {
        PyObject *attr = PyUnicode_FromString("__closure__");
        int a = attr ? guardset_accessor(f->t->gs, ACC_ATTR, f->func_src, 0, attr, NULL) : -1;
        Py_XDECREF(attr);
        int it = a < 0 ? -1 : guardset_accessor(f->t->gs, ACC_ITEM, a, k, NULL, NULL);
        acc = it < 0 ? -1 : guardset_accessor(f->t->gs, ACC_CELL, it, 0, NULL, NULL);
    }
    if (acc < 0)
        return NULL;
    if (obj == NULL)
    {
        f->t->stop_unguarded = true;     /* no guard says the cell is empty */
        return tracer_unsupported(f->t, false, "reads empty closure cell '%U'", name), NULL;
    }
    return value_from_source(f->t, acc, obj);
}

static Value *load_global(TFrame *f, PyObject *name)
{
    Tracer *t = f->t;
    PyObject *obj = PyDict_GetItemWithError(f->globals, name);
    if (obj == NULL && PyErr_Occurred())
        return NULL;
    int acc;
    if (obj != NULL) {
        if (f->globals_acc < 0) {
            acc = guardset_accessor(t->gs, ACC_GLOBAL, -1, 0, name, NULL);
        }
        else {
            acc = guardset_accessor(t->gs, ACC_DICT_ITEM, f->globals_acc, 0, name, NULL);
        }
    }
    else {
        /* A builtin: the same dict for every module but a rare one, and the
           name must stay out of the function's globals (a global defined
           later shadows it, as eagerly). */
        if (((PyFunctionObject *)f->func)->func_builtins != t->fv->builtins)
            return tracer_unsupported(t, true, "a function with its own builtins"), NULL;
        obj = PyDict_GetItemWithError(t->fv->builtins, name);
        if (obj == NULL && PyErr_Occurred())
            return NULL;
        /* 'name' not in G, also when it is nowhere: a stopped translation
           is kept with its guards (hook.c), and defining the global later
           must fail them */
        int ga = f->globals_acc >= 0 ? f->globals_acc
                                     : guardset_accessor(t->gs, ACC_GLOBALS, -1, 0, NULL, NULL);
        if (ga < 0 || guardset_add(t->gs, GUARD_DICT_LACKS, ga, name, 0) < 0)
            return NULL;
        if (obj == NULL)
            return tracer_unsupported(t, false, "name '%U' is not defined", name), NULL;
        acc = guardset_accessor(t->gs, ACC_BUILTIN, -1, 0, name, NULL);
    }
    if (acc < 0)
        return NULL;
    return value_from_source(t, acc, obj);
}

/* ---- attributes ---- */

/* Whether reading `name` from obj runs no Python code: generic getattr, and
   the class attribute (if any) is not a data descriptor. */
static bool attribute_read_is_pure(PyObject *obj, PyObject *name)
{
    PyTypeObject *tp = Py_TYPE(obj);
    if (tp->tp_getattro != PyObject_GenericGetAttr)
        return PyModule_Check(obj) || PyType_Check(obj);
    PyObject *cls_attr = _PyType_Lookup(tp, name);   /* borrowed */
    if (cls_attr != NULL) {
        descrsetfunc set = Py_TYPE(cls_attr)->tp_descr_set;
        if (set != NULL)
            return false;   /* property, slot or other data descriptor */
    }
    return true;
}

/* .name of a tensor value: shape, ndim, dtype, size, itemsize, nbytes as
   constants, the attributes graph nodes compute ("T").  NULL when tracing
   stops. */
static Value *load_tensor_attr(TFrame *f, Value *base, PyObject *name)
{
    Tracer *t = f->t;
    PyObject *ex = base->obj;
    if (PyUnicode_CompareWithASCIIString(name, "shape") == 0
        || PyUnicode_CompareWithASCIIString(name, "ndim") == 0
        || PyUnicode_CompareWithASCIIString(name, "dtype") == 0
        || PyUnicode_CompareWithASCIIString(name, "size") == 0
        || PyUnicode_CompareWithASCIIString(name, "itemsize") == 0
        || PyUnicode_CompareWithASCIIString(name, "nbytes") == 0) {
        if (base->dynshape && PyUnicode_CompareWithASCIIString(name, "dtype") != 0
            && PyUnicode_CompareWithASCIIString(name, "ndim") != 0
            && PyUnicode_CompareWithASCIIString(name, "itemsize") != 0)
            return tracer_break(t, STOP_ESCAPE, "data escape: .%U of a tensor whose shape "
                                "depends on its values", name), NULL;
        /* Fixed by TENSOR_MATCH (type, dtype, shape) for arrays, and by
           the graph for intermediate values. */
        return new_const(t, PyObject_GetAttr(ex, name));
    }
    if (tensorops_is_node_attribute(name)) {
        Value *args[2];
        args[0] = base;
        args[1] = value_new(t, V_CONST, name);
        if (args[1] == NULL)
            return NULL;
        return tensorops_call(t, NODE_CALL_FUNCTION, PyEval_GetBuiltins() ?
                              PyDict_GetItemString(PyEval_GetBuiltins(), "getattr") : NULL,
                              "getattr", args, 2, NULL);
    }
    return tracer_unsupported(t, false, "array attribute '%U'", name), NULL;
}

/* .name of a constant (a module or a class) or of an object an accessor
   reaches, read through the generic, descriptor-free path; a bound method
   becomes a V_BOUND fetched again when called.  NULL when tracing stops. */
static Value *load_object_attr(TFrame *f, Value *base, PyObject *name)
{
    Tracer *t = f->t;
    PyObject *obj = base->obj;
    bool handled;
    Value *mv = value_module_attr(t, base, name, &handled);
    if (handled)
        return mv;
    if (base->src < 0)
        return tracer_unsupported(t, false, "attribute '%U' of a computed %s", name,
                                  Py_TYPE(obj)->tp_name), NULL;
    if (base->kind == V_CONST && !PyModule_Check(obj) && !PyType_Check(obj))
        return tracer_unsupported(t, false, "attribute '%U' of a %s", name,
                                  Py_TYPE(obj)->tp_name), NULL;
    if (!attribute_read_is_pure(obj, name))
        return tracer_unsupported(t, false, "attribute '%U' of %s runs Python code (property or custom __getattr__)",
                                  name, Py_TYPE(obj)->tp_name), NULL;
    PyObject *attr = PyObject_GetAttr(obj, name);
    if (attr == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError))
            return NULL;
        PyErr_Clear();
        return tracer_unsupported(t, false, "%s has no attribute '%U'", Py_TYPE(obj)->tp_name, name), NULL;
    }
    if (PyMethod_Check(attr) || (PyCFunction_Check(attr) && PyCFunction_GET_SELF(attr) != NULL
                                 && !PyModule_Check(PyCFunction_GET_SELF(attr)))) {
        /* a bound method (np.random.rand, rng.normal): a fresh object each
           time, so it is looked up again when called */
        Py_DECREF(attr);
        Value *bm = value_new(t, V_BOUND, name);
        if (bm == NULL || value_append(t, bm, base) < 0)
            return NULL;
        return bm;
    }
    int acc = guardset_accessor(t->gs, ACC_ATTR, base->src, 0, name, NULL);
    Value *v = acc < 0 ? NULL : value_from_source(t, acc, attr);
    Py_DECREF(attr);
    return v;
}

/* base.name.  NULL when tracing stops. */
static Value *load_attr(TFrame *f, Value *base, PyObject *name)
{
    switch (base->kind) {
    case V_TENSOR:
        return load_tensor_attr(f, base, name);
    case V_CONST:
    case V_OBJECT:
        return load_object_attr(f, base, name);
    default:
        return tracer_unsupported(f->t, false, "attribute '%U' of a container", name), NULL;
    }
}

/* LOAD_METHOD: pushes [method, self] or [NULL, attribute]. */
static int load_method(TFrame *f, Value *base, PyObject *name)
{
    Tracer *t = f->t;
    if (base->kind == V_TENSOR) {
        Value *m = value_new(t, V_METHOD, name);
        if (m == NULL || value_append(t, m, base) < 0)
            return -1;
        return push(f, m) < 0 ? -1 : push(f, base);
    }
    if (base->kind == V_OBJECT && base->src >= 0) {
        /* A method of a user class: the plain function from the class,
           reached as type(obj).name (ID_MATCH), called with self. */
        PyObject *cls_attr = _PyType_Lookup(Py_TYPE(base->obj), name);
        PyObject **dictptr = _PyObject_GetDictPtr(base->obj);
        bool shadowed = dictptr && *dictptr && PyDict_GetItemWithError(*dictptr, name);
        if (PyErr_Occurred())
            return -1;
        if (cls_attr != NULL && PyFunction_Check(cls_attr) && !shadowed
            && value_type_lookup_is_generic(Py_TYPE(base->obj))) {
            int ca = guardset_accessor(t->gs, ACC_TYPE, base->src, 0, NULL, NULL);
            int ma = ca < 0 ? -1 : guardset_accessor(t->gs, ACC_ATTR, ca, 0, name, NULL);
            Value *fn = ma < 0 ? NULL : value_from_source(t, ma, cls_attr);
            if (fn == NULL)
                return -1;
            if (dictptr != NULL) {
                /* an instance attribute of that name set later must win */
                PyObject *dname = PyUnicode_FromString("__dict__");
                int da = dname ? guardset_accessor(t->gs, ACC_ATTR, base->src, 0, dname, NULL) : -1;
                Py_XDECREF(dname);
                if (da < 0 || guardset_add(t->gs, GUARD_DICT_LACKS, da, name, 0) < 0)
                    return -1;
            }
            return push(f, fn) < 0 ? -1 : push(f, base);
        }
    }
    if (base->kind == V_LIST || base->kind == V_DICT) {
        Value *m = value_new(t, V_METHOD, name);
        if (m == NULL || value_append(t, m, base) < 0)
            return -1;
        return push(f, m) < 0 ? -1 : push(f, base);
    }
    if (base->kind == V_DICT) {
        /* keys()/values()/items() of an input dict do not mutate it. */
        if (PyUnicode_CompareWithASCIIString(name, "keys") == 0
            || PyUnicode_CompareWithASCIIString(name, "values") == 0
            || PyUnicode_CompareWithASCIIString(name, "items") == 0) {
            Value *m = value_new(t, V_METHOD, name);
            if (m == NULL || value_append(t, m, base) < 0)
                return -1;
            return push(f, m) < 0 ? -1 : push(f, base);
        }
    }
    Value *attr = load_attr(f, base, name);
    if (attr == NULL)
        return -1;
    Value *null = value_new(t, V_NULL, NULL);
    return push(f, null) < 0 ? -1 : push(f, attr);
}

/* ---- operators ---- */

static const char *const binary_op_names[] = {
    "add", "and_", "floordiv", "lshift", "matmul", "mul", "mod", "or_",
    "pow", "rshift", "sub", "truediv", "xor",
};
static const char *const binary_op_hints[] = {
    "add", "and_", "floordiv", "lshift", "matmul", "mul", "mod", "or_",
    "pow", "rshift", "sub", "truediv", "xor",
};
static const char *const compare_op_names[] = {"lt", "le", "eq", "ne", "gt", "ge"};

/* Whether a constant's operators are builtin C code (safe to fold). */
static bool foldable(Value *v)
{
    return v->kind == V_CONST && value_is_plain_constant(v->obj);
}

/* Apply operator.<opname> to a and b: fold constants, add a node for
   tensors, combine tuples/lists.  NULL when tracing stops. */
static Value *apply_binary(TFrame *f, const char *opname, const char *hint,
                           Value *a, Value *b, bool inplace)
{
    Tracer *t = f->t;
    PyObject *op = tensorops_operator(opname);
    if (op == NULL)
        return NULL;
    if (a->kind == V_TENSOR || b->kind == V_TENSOR) {
        if (inplace && a->kind == V_TENSOR)
            return tracer_break(t, STOP_CALL, "in-place operator %s= on a tensor the program can see", hint), NULL;
        Value *args[2] = {a, b};
        return tensorops_call(t, NODE_CALL_FUNCTION, op, hint, args, 2, NULL);
    }
    if (foldable(a) && foldable(b))
        return new_const(t, PyObject_CallFunctionObjArgs(op, a->obj, b->obj, NULL));
    bool a_tuple = a->kind == V_TUPLE || (a->kind == V_CONST && PyTuple_CheckExact(a->obj));
    bool b_tuple = b->kind == V_TUPLE || (b->kind == V_CONST && PyTuple_CheckExact(b->obj));
    if (strcmp(opname, "add") == 0
        && ((a_tuple && b_tuple) || (a->kind == V_LIST && b->kind == V_LIST)
            || (inplace && a->kind == V_LIST && (b_tuple || b->kind == V_LIST)))) {
        if (inplace && a->kind == V_LIST && a->src >= 0)
            return tracer_unsupported(t, false, "in-place += on a list the program can see"), NULL;
        Value *out = value_new(t, a->kind == V_LIST ? V_LIST : V_TUPLE, NULL);
        if (out == NULL)
            return NULL;
        Value *parts[2] = {a, b};
        for (int p = 0; p < 2; p++) {
            Value *s = parts[p];
            if (s->kind == V_CONST) {
                for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(s->obj); i++) {
                    Value *c = value_new(t, V_CONST, PyTuple_GET_ITEM(s->obj, i));
                    if (c == NULL || value_append(t, out, c) < 0)
                        return NULL;
                }
            }
            else {
                for (int i = 0; i < s->n; i++)
                    if (value_append(t, out, s->items[i]) < 0)
                        return NULL;
            }
        }
        if (inplace && a->kind == V_LIST) {
            /* list += : the same list object, extended */
            if (tracer_note_mutation(t, a, -1) < 0)
                return NULL;
            a->n = 0;
            for (int i = 0; i < out->n; i++)
                if (value_append(t, a, out->items[i]) < 0)
                    return NULL;
            return a;
        }
        return out;
    }
    return tracer_unsupported(t, false, "operator %s on %s and %s", hint,
                              a->kind == V_CONST || a->kind == V_OBJECT ? Py_TYPE(a->obj)->tp_name : "a container",
                              b->kind == V_CONST || b->kind == V_OBJECT ? Py_TYPE(b->obj)->tp_name : "a container"), NULL;
}

static Value *apply_unary(TFrame *f, const char *opname, Value *a)
{
    Tracer *t = f->t;
    PyObject *op = tensorops_operator(opname);
    if (op == NULL)
        return NULL;
    if (a->kind == V_TENSOR) {
        Value *args[1] = {a};
        return tensorops_call(t, NODE_CALL_FUNCTION, op, opname, args, 1, NULL);
    }
    if (foldable(a))
        return new_const(t, PyObject_CallOneArg(op, a->obj));
    return tracer_unsupported(t, false, "unary %s on this value", opname), NULL;
}

/* Truth value of a value known at trace time: 1, 0, or -1 (stops). */
static int truth(TFrame *f, Value *v, const char *what)
{
    switch (v->kind) {
    case V_CONST:
        if (foldable(v) || PyModule_Check(v->obj) || PyFunction_Check(v->obj) || PyType_Check(v->obj))
            return PyObject_IsTrue(v->obj);
        break;
    case V_TUPLE:
    case V_LIST:
    case V_DICT:
        return v->n > 0;
    case V_TENSOR:
        return tracer_break(f->t, STOP_BRANCH, "%s on a tensor value", what);
    default:
        break;
    }
    return tracer_unsupported(f->t, false, "%s on a value whose truth is not known while tracing", what);
}

/* `a is b` for values whose identity is known while tracing: 1, 0, or -1
   (tracing stops). */
static int is_same(TFrame *f, Value *a, Value *b)
{
    if (a->kind == V_CONST && b->kind == V_CONST)
        return a->obj == b->obj;
    if ((a->kind == V_CONST && a->obj == Py_None && b->kind != V_CONST && b->kind != V_OBJECT)
        || (b->kind == V_CONST && b->obj == Py_None && a->kind != V_CONST && a->kind != V_OBJECT))
        return 0;
    if (a == b)
        return 1;
    return tracer_unsupported(f->t, false, "'is' between these values");
}

/* `a in b` for a constant a and a constant or container b: 1, 0, or -1
   (tracing stops, or an exception). */
static int contains(TFrame *f, Value *a, Value *b)
{
    if (foldable(a) && foldable(b))
        return PySequence_Contains(b->obj, a->obj);
    if (!foldable(a) || !(b->kind == V_DICT || b->kind == V_TUPLE || b->kind == V_LIST))
        return tracer_unsupported(f->t, false, "'in' on these values");
    int r = 0;
    for (int i = 0; i < b->n && r == 0; i++) {
        if (b->kind == V_DICT)
            r = PyObject_RichCompareBool(PyList_GET_ITEM(b->obj, i), a->obj, Py_EQ);
        else if (foldable(b->items[i]))
            r = PyObject_RichCompareBool(b->items[i]->obj, a->obj, Py_EQ);
        else
            return tracer_unsupported(f->t, false, "'in' over values that are not constants");
    }
    return r;
}

/* f-string part: format(conv(v), spec) of constants, conv 0 (none), 1
   (str), 2 (repr) or 3 (ascii).  NULL when tracing stops. */
static Value *format_value(TFrame *f, Value *v, Value *spec, int conv_kind)
{
    if (!foldable(v) || (spec && !foldable(spec)))
        return tracer_unsupported(f->t, false, "f-string of a value that is not a constant"), NULL;
    PyObject *conv = NULL;
    switch (conv_kind) {
    case 1: conv = PyObject_Str(v->obj); break;
    case 2: conv = PyObject_Repr(v->obj); break;
    case 3: conv = PyObject_ASCII(v->obj); break;
    default: conv = Py_NewRef(v->obj); break;
    }
    PyObject *s = conv ? PyObject_Format(conv, spec ? spec->obj : NULL) : NULL;
    Py_XDECREF(conv);
    return new_const(f->t, s);
}

/* The n constant strings parts[0..n) as a new tuple, or NULL when tracing
   stops (a part is not a constant str) or on an error. */
static PyObject *string_parts(TFrame *f, Value **parts, int n)
{
    PyObject *tup = PyTuple_New(n);
    if (tup == NULL)
        return NULL;
    for (int i = 0; i < n; i++) {
        Value *p = parts[i];
        if (p->kind != V_CONST || !PyUnicode_CheckExact(p->obj)) {
            Py_DECREF(tup);
            return tracer_unsupported(f->t, true, "BUILD_STRING of a non-string"), NULL;
        }
        PyTuple_SET_ITEM(tup, i, Py_NewRef(p->obj));
    }
    return tup;
}

/* d[key] = val in dict value d (made by this frame, being built), key a
   constant.  0 / -1. */
static int dict_set_item(Tracer *t, Value *d, PyObject *key, Value *val)
{
    for (int j = 0; j < d->n; j++) {
        int eq = PyObject_RichCompareBool(PyList_GET_ITEM(d->obj, j), key, Py_EQ);
        if (eq < 0)
            return -1;
        if (eq) {
            d->items[j] = val;
            return 0;
        }
    }
    if (PyList_Append(d->obj, key) < 0 || value_append(t, d, val) < 0)
        return -1;
    return 0;
}

/* ---- subscripts and iteration ---- */

static Value *subscript(TFrame *f, Value *base, Value *index)
{
    Tracer *t = f->t;
    if (base->kind == V_TENSOR) {
        if (index->kind == V_DICT || index->kind == V_OBJECT || index->kind == V_ITER)
            return tracer_unsupported(t, false, "indexing an array with this kind of value"), NULL;
        Value *args[2] = {base, index};
        return tensorops_call(t, NODE_CALL_FUNCTION, tensorops_operator("getitem"), "getitem", args, 2, NULL);
    }
    if (base->kind == V_TUPLE || base->kind == V_LIST) {
        if (index->kind == V_CONST && PyLong_CheckExact(index->obj)) {
            Py_ssize_t i = PyLong_AsSsize_t(index->obj);
            if (i == -1 && PyErr_Occurred())
                return NULL;
            if (i < 0)
                i += base->n;
            if (i < 0 || i >= base->n)
                return tracer_unsupported(t, false, "index out of range"), NULL;
            return base->items[i];
        }
        if (index->kind == V_SLICE) {
            PyObject *s = value_as_constant(t, index);
            if (s == NULL)
                return NULL;
            Py_ssize_t start, stop, step;
            int r = PySlice_Unpack(s, &start, &stop, &step);
            Py_DECREF(s);
            if (r < 0)
                return NULL;
            Py_ssize_t len = PySlice_AdjustIndices(base->n, &start, &stop, step);
            Value *out = value_new(t, base->kind, NULL);
            if (out == NULL)
                return NULL;
            for (Py_ssize_t k = 0; k < len; k++)   /* (no index past the last: a step of
                                                      sys.maxsize must not overflow) */
                if (value_append(t, out, base->items[start + k * step]) < 0)
                    return NULL;
            return out;
        }
        return tracer_unsupported(t, false, "indexing a sequence with a non-constant"), NULL;
    }
    if (base->kind == V_DICT && index->kind == V_CONST) {
        for (int i = 0; i < base->n; i++) {
            int eq = PyObject_RichCompareBool(PyList_GET_ITEM(base->obj, i), index->obj, Py_EQ);
            if (eq < 0)
                return NULL;
            if (eq)
                return base->items[i];
        }
        return tracer_unsupported(t, false, "missing dict key"), NULL;
    }
    if (foldable(base) && (foldable(index) || index->kind == V_SLICE)) {
        PyObject *key = value_as_constant(t, index);
        if (key == NULL)
            return NULL;
        Value *r = new_const(t, PyObject_GetItem(base->obj, key));
        Py_DECREF(key);
        return r;
    }
    return tracer_unsupported(t, false, "subscript of this kind of value"), NULL;
}

/* enumerate() or zip() over sources its[0..n) (from their positions): out
   remembers where each source stands, so that it can be rebuilt as a real
   enumerate or zip (when it escapes, or reads a list, dict or tensor that a
   graph break may change).  0 / -1. */
static int derive_iter(Tracer *t, Value *out, Value **its, int n, long count)
{
    Value *srcs = value_new(t, V_TUPLE, NULL);
    if (srcs == NULL)
        return -1;
    for (int k = 0; k < n; k++) {
        /* a copy of the source from where out's first item comes */
        Value *src = its[k], *cur = value_new(t, V_ITER, NULL);
        if (cur == NULL || value_append(t, srcs, cur) < 0)
            return -1;
        for (int i = src->pos; i < src->n; i++)
            if (value_append(t, cur, src->items[i]) < 0)
                return -1;
        cur->seq = src->seq;
        cur->seq_view = src->seq_view;
        cur->seq_start = src->seq_start + src->pos;
        cur->srcs = src->srcs;   /* a derived source: refused at a break (make_rebuild_iter) */
        cur->count = src->count;
    }
    out->srcs = srcs;
    out->count = count;
    return 0;
}

static bool iter_reads(Value *v, Value *container)
{
    if (v == NULL || v->kind != V_ITER)
        return false;
    /* one that came into a resume frame may read any list (which, only the
       run knows: see RB_SLOT_ITER) */
    if (v->seq == container || (v->came_in_slot && container->kind == V_LIST))
        return true;
    for (int k = 0; v->srcs && k < v->srcs->n; k++)
        if (iter_reads(v->srcs->items[k], container))
            return true;
    return false;
}

/* A list or dict is about to change: refuse when an iterator the frames
   still hold reads it (a loop not yet finished would have to see the
   change -- even one past its last item, as a list iterator is). */
int tracer_check_iterated(Tracer *t, Value *container)
{
    for (TFrame *f = t->current; f != NULL; f = f->parent) {
        bool reads = false;
        for (int i = 0; i < f->sp && !reads; i++)
            reads = iter_reads(f->stack[i], container);
        for (int i = 0; i < f->nlocals && !reads; i++)
            reads = iter_reads(f->locals[i], container);
        if (reads)
            return tracer_unsupported(t, false, "a %s changed while a loop iterates over it",
                                      container->kind == V_DICT ? "dict" : "list");
    }
    return 0;
}

/* it (a new V_ITER) over the items of constant obj: a range, tuple, str or
   torch.Size, at most 10000 of them.  Returns it, or NULL when tracing
   stops. */
static Value *iter_constant(Tracer *t, Value *it, PyObject *obj)
{
    Py_ssize_t n = PyObject_Length(obj);
    if (n < 0)
        return NULL;
    if (n > 10000)
        return tracer_unsupported(t, false, "a loop of %zd iterations (unrolling bound 10000)", n), NULL;
    PyObject *seq = PySequence_Tuple(obj);
    if (seq == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        Value *c = value_new(t, V_CONST, PyTuple_GET_ITEM(seq, i));
        if (c == NULL || value_append(t, it, c) < 0) {
            Py_DECREF(seq);
            return NULL;
        }
    }
    Py_DECREF(seq);
    return it;
}

/* it (a new V_ITER) over the rows of tensor v (its first axis, known from
   its shape; at most 1000).  Returns it, or NULL when tracing stops. */
static Value *iter_rows(TFrame *f, Value *it, Value *v)
{
    Tracer *t = f->t;
    if (v->dynshape)
        return tracer_break(t, STOP_ESCAPE, "data escape: iterating a tensor whose shape "
                            "depends on its values"), NULL;
    PyObject *shape = PyObject_GetAttrString(v->obj, "shape");
    if (shape == NULL)
        return NULL;
    Py_ssize_t n = PyTuple_Check(shape) && PyTuple_GET_SIZE(shape) > 0
                       ? PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, 0)) : -1;
    Py_DECREF(shape);
    if (n < 0) {
        PyErr_Clear();
        return tracer_unsupported(t, false, "iterating a 0-d array"), NULL;
    }
    if (n > 1000)
        return tracer_unsupported(t, false, "a loop over %zd array rows (unrolling bound 1000)", n), NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        Value *idx = new_const(t, PyLong_FromSsize_t(i));
        Value *row = idx ? subscript(f, v, idx) : NULL;
        if (row == NULL || value_append(t, it, row) < 0)
            return NULL;
    }
    /* The rows are read here, in the graph; only an eager step can
       write into the tensor (every in-place op is one), and across it
       the loop goes on over a view of the rows left (RB_ROWS). */
    it->seq = v;
    return it;
}

/* Items a value iterates over, as a new V_ITER (an iterator is its own).
   NULL when tracing stops. */
static Value *make_iter(TFrame *f, Value *v)
{
    Tracer *t = f->t;
    Value *it = value_new(t, V_ITER, NULL);
    if (it == NULL)
        return NULL;
    switch (v->kind) {
    case V_ITER:
        if (v->view) {
            /* iter(d.keys()): a new iterator over the view's items */
            for (int i = v->pos; i < v->n; i++)
                if (value_append(t, it, v->items[i]) < 0)
                    return NULL;
            it->seq = v->seq;   /* it reads the dict's items */
            it->seq_view = v->view;
            return it;
        }
        return v;
    case V_TUPLE:
    case V_LIST:
        for (int i = 0; i < v->n; i++)
            if (value_append(t, it, v->items[i]) < 0)
                return NULL;
        if (v->kind == V_LIST)
            it->seq = v;        /* a change to the list must be seen */
        return it;
    case V_DICT:
        for (int i = 0; i < v->n; i++) {
            Value *k = value_new(t, V_CONST, PyList_GET_ITEM(v->obj, i));
            if (k == NULL || value_append(t, it, k) < 0)
                return NULL;
        }
        it->seq = v;
        return it;
    case V_CONST:
        if (PyRange_Check(v->obj) || PyTuple_CheckExact(v->obj) || PyUnicode_CheckExact(v->obj)
            || (PyTuple_Check(v->obj) && value_is_plain_constant(v->obj)))   /* torch.Size */
            return iter_constant(t, it, v->obj);
        break;
    case V_TENSOR:
        return iter_rows(f, it, v);
    case V_OBJECT: {
        bool handled;
        Value *mi = value_module_iter(t, v, &handled);
        if (handled)
            return mi;
        break;
    }
    default:
        break;
    }
    return tracer_unsupported(t, false, "iterating over this kind of value"), NULL;
}

/* ---- calls ---- */

static Value *call_value(TFrame *f, Value *callable, Value **args, int nargs, PyObject *kwnames);

/* Bind the arguments a call gives (positional, *args, keywords, **kwargs)
   into the callee's locals.  0 / -1. */
static int bind_given(TFrame *callee, Value **args, int nargs, PyObject *kwnames)
{
    Tracer *t = callee->t;
    PyCodeObject *co = callee->code;
    int nkw = kwnames ? (int)PyTuple_GET_SIZE(kwnames) : 0;
    int npos = nargs - nkw;
    int argcount = co->co_argcount;
    int total = argcount + co->co_kwonlyargcount;
    bool has_varargs = co->co_flags & CO_VARARGS;
    bool has_varkw = co->co_flags & CO_VARKEYWORDS;

    if (npos > argcount && !has_varargs)
        return tracer_unsupported(t, false, "too many positional arguments to %U", co->co_qualname);
    for (int i = 0; i < npos && i < argcount; i++)
        callee->locals[i] = args[i];
    if (has_varargs) {
        Value *va = value_new(t, V_TUPLE, NULL);
        if (va == NULL)
            return -1;
        for (int i = argcount; i < npos; i++)
            if (value_append(t, va, args[i]) < 0)
                return -1;
        callee->locals[total] = va;
    }
    Value *varkw = NULL;
    if (has_varkw) {
        varkw = value_new(t, V_DICT, NULL);
        if (varkw == NULL)
            return -1;
        varkw->obj = PyList_New(0);
        if (varkw->obj == NULL)
            return -1;
        callee->locals[total + (has_varargs ? 1 : 0)] = varkw;
    }
    for (int k = 0; k < nkw; k++) {
        PyObject *kname = PyTuple_GET_ITEM(kwnames, k);
        int slot = -1;
        for (int i = co->co_posonlyargcount; i < total; i++) {
            int eq = PyUnicode_Compare(kname, local_name(co, i));
            if (eq == 0) {
                slot = i;
                break;
            }
        }
        if (slot >= 0) {
            if (callee->locals[slot] != NULL)
                return tracer_unsupported(t, false, "multiple values for argument '%U'", kname);
            callee->locals[slot] = args[npos + k];
        }
        else if (varkw != NULL) {
            if (PyList_Append(varkw->obj, kname) < 0 || value_append(t, varkw, args[npos + k]) < 0)
                return -1;
        }
        else {
            return tracer_unsupported(t, false, "unexpected keyword argument '%U'", kname);
        }
    }
    return 0;
}

/* Fill the parameters the call left unbound from the function's defaults,
   reached through the function (func.__defaults__[d],
   func.__kwdefaults__[name]) so that a changed default recompiles.
   0 / -1. */
static int bind_defaults(TFrame *callee)
{
    Tracer *t = callee->t;
    PyCodeObject *co = callee->code;
    PyObject *fn = callee->func;
    int argcount = co->co_argcount;
    int total = argcount + co->co_kwonlyargcount;
    PyObject *defaults = PyFunction_GET_DEFAULTS(fn);
    Py_ssize_t ndef = defaults ? PyTuple_GET_SIZE(defaults) : 0;
    for (int i = 0; i < argcount; i++) {
        if (callee->locals[i] != NULL)
            continue;
        Py_ssize_t d = i - (argcount - ndef);
        if (d < 0)
            return tracer_unsupported(t, false, "missing argument '%U' to %U", local_name(co, i), co->co_qualname);
        PyObject *dn = PyUnicode_FromString("__defaults__");
        int a = dn ? guardset_accessor(t->gs, ACC_ATTR, callee->func_src, 0, dn, NULL) : -1;
        Py_XDECREF(dn);
        int it = a < 0 ? -1 : guardset_accessor(t->gs, ACC_ITEM, a, d, NULL, NULL);
        if (it < 0)
            return -1;
        callee->locals[i] = value_from_source(t, it, PyTuple_GET_ITEM(defaults, d));
        if (callee->locals[i] == NULL)
            return -1;
    }
    PyObject *kwdefaults = PyFunction_GET_KW_DEFAULTS(fn);
    for (int i = argcount; i < total; i++) {
        if (callee->locals[i] != NULL)
            continue;
        PyObject *dv = kwdefaults ? PyDict_GetItemWithError(kwdefaults, local_name(co, i)) : NULL;
        if (dv == NULL)
            return PyErr_Occurred() ? -1 : tracer_unsupported(t, false, "missing keyword argument '%U'", local_name(co, i));
        PyObject *dn = PyUnicode_FromString("__kwdefaults__");
        int a = dn ? guardset_accessor(t->gs, ACC_ATTR, callee->func_src, 0, dn, NULL) : -1;
        Py_XDECREF(dn);
        int it = a < 0 ? -1 : guardset_accessor(t->gs, ACC_DICT_ITEM, a, 0, local_name(co, i), NULL);
        if (it < 0)
            return -1;
        callee->locals[i] = value_from_source(t, it, dv);
        if (callee->locals[i] == NULL)
            return -1;
    }
    return 0;
}

/* Bind arguments of an inlined call into the callee's locals.  0 / -1. */
static int bind_arguments(TFrame *callee, Value **args, int nargs, PyObject *kwnames)
{
    if (bind_given(callee, args, nargs, kwnames) < 0)
        return -1;
    return bind_defaults(callee);
}

/* A reason the code object cannot be interpreted at all, or NULL.  An
   inlined function must have no exception handling anywhere (its call runs
   eagerly instead); a frame of its own is refused only at the protected
   instructions themselves. */
/* Does the code name getrefcount?  The engine holds the objects it passes
   between graphs and eager steps in its own arrays, and guards hold types:
   counts it reads would differ from the interpreter's. */
static bool reads_refcounts(PyCodeObject *co)
{
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(co->co_names); i++) {
        PyObject *name = PyTuple_GET_ITEM(co->co_names, i);
        if (PyUnicode_Check(name) && PyUnicode_CompareWithASCIIString(name, "getrefcount") == 0)
            return true;
    }
    return false;
}

static const char *code_unsupported_reason(PyCodeObject *co, bool inlined)
{
    if (co->co_flags & (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR))
        return "generator or coroutine";
    if (code_ncells(co) > 0)
        return "defines variables captured by an inner function (cell variables)";
    if (inlined && PyBytes_GET_SIZE(code_exceptiontable(co)) > 0)
        return "exception handling (try/except/finally or with) in the function";
    if (reads_refcounts(co))
        return "reads reference counts (sys.getrefcount), which capture would change";
    return NULL;
}

/* `code` is what the frame runs: for an inlined call the function's
   __code__, for the root frame the intercepted frame's own code, which the
   function may no longer hold (code that assigns func.__code__ while the
   function runs: its frame goes on with the code it started with). */
static int frame_setup(TFrame *f, Tracer *t, TFrame *parent, PyObject *func, int func_src,
                       PyCodeObject *code)
{
    memset(f, 0, sizeof(*f));
    f->t = t;
    f->parent = parent;
    f->func = func;
    f->func_src = func_src;
    f->code = code;
    if (bytecode_open(&f->bc, f->code) < 0)
        return -1;
    f->nlocals = f->code->co_nlocals;
    f->locals = PyMem_Calloc((size_t)f->nlocals + 1, sizeof(Value *));
    if (f->locals == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    f->globals = PyFunction_GET_GLOBALS(func);
    f->globals_acc = -1;
    if (parent != NULL && f->globals != t->fv->globals) {
        PyObject *gn = PyUnicode_FromString("__globals__");
        f->globals_acc = gn ? guardset_accessor(t->gs, ACC_ATTR, func_src, 0, gn, NULL) : -1;
        Py_XDECREF(gn);
        if (f->globals_acc < 0)
            return -1;
    }
    return 0;
}

static void frame_teardown(TFrame *f)
{
    bytecode_close(&f->bc);
    PyMem_Free(f->locals);
    f->locals = NULL;
}

static Value *inline_call(TFrame *f, Value *fnv, Value **args, int nargs, PyObject *kwnames)
{
    Tracer *t = f->t;
    PyObject *fn = fnv->obj;
    PyCodeObject *co = (PyCodeObject *)PyFunction_GET_CODE(fn);
    const char *why = code_unsupported_reason(co, true);
    if (why != NULL)
        return tracer_unsupported(t, false, "call to %U: %s", co->co_qualname, why), NULL;
    if (fnv->src < 0)
        return tracer_unsupported(t, false, "call to a function made while tracing"), NULL;
    if (t->depth >= MAX_INLINE_DEPTH)
        return tracer_unsupported(t, false, "inlining deeper than %d calls (recursion?)", MAX_INLINE_DEPTH), NULL;
    if (guardset_add(t->gs, GUARD_CODE_MATCH, fnv->src, (PyObject *)co, 0) < 0)
        return NULL;
    TFrame callee;
    Value *result = NULL;
    if (frame_setup(&callee, t, f, fn, fnv->src, co) < 0)
        goto out;
    if (bind_arguments(&callee, args, nargs, kwnames) < 0)
        goto out;
    t->depth++;
    TFrame *saved = t->current;
    int r = run_frame(&callee, 0);
    t->current = saved;
    t->depth--;
    if (r == FRAME_RETURNED)
        result = callee.retval;
out:
    frame_teardown(&callee);
    return result;
}

/* Values a builtin call sees as a constant tuple, or NULL (stops). */
static PyObject *const_args(Value **args, int nargs)
{
    PyObject *tup = PyTuple_New(nargs);
    if (tup == NULL)
        return NULL;
    for (int i = 0; i < nargs; i++) {
        if (!foldable(args[i]) && !(args[i]->kind == V_CONST && PyType_Check(args[i]->obj))) {
            Py_DECREF(tup);
            return NULL;
        }
        PyTuple_SET_ITEM(tup, i, Py_NewRef(args[i]->obj));
    }
    return tup;
}

static Value *builtin_len(TFrame *f, Value *v)
{
    switch (v->kind) {
    case V_TUPLE:
    case V_LIST:
    case V_DICT:
        return new_const(f->t, PyLong_FromLong(v->n));
    case V_TENSOR: {
        if (v->dynshape)
            return tracer_break(f->t, STOP_ESCAPE, "data escape: len() of a tensor whose shape "
                                "depends on its values"), NULL;
        PyObject *shape = PyObject_GetAttrString(v->obj, "shape");
        if (shape == NULL)
            return NULL;
        Value *r = NULL;
        if (PyTuple_Check(shape) && PyTuple_GET_SIZE(shape) > 0)
            r = new_const(f->t, Py_NewRef(PyTuple_GET_ITEM(shape, 0)));
        else
            tracer_unsupported(f->t, false, "len() of a 0-d array");
        Py_DECREF(shape);
        return r;
    }
    default:
        if (foldable(v))
            return new_const(f->t, PyLong_FromSsize_t(PyObject_Length(v->obj)));
        return tracer_unsupported(f->t, false, "len() of this kind of value"), NULL;
    }
}

/* The exact type a value is known to have, or NULL. Borrowed. */
static PyObject *known_type(Value *v)
{
    switch (v->kind) {
    case V_TENSOR:
    case V_CONST:
    case V_OBJECT:
        return (PyObject *)Py_TYPE(v->obj);
    case V_TUPLE: return (PyObject *)&PyTuple_Type;
    case V_LIST: return (PyObject *)&PyList_Type;
    case V_DICT: return (PyObject *)&PyDict_Type;
    case V_SLICE: return (PyObject *)&PySlice_Type;
    default: return NULL;
    }
}

static bool plain_type_or_tuple(PyObject *cls)
{
    if (PyType_Check(cls))
        return Py_TYPE(cls) == &PyType_Type;
    if (!PyTuple_CheckExact(cls))
        return false;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(cls); i++)
        if (!plain_type_or_tuple(PyTuple_GET_ITEM(cls, i)))
            return false;
    return true;
}

static Value *call_builtin(TFrame *f, PyObject *fn, Value **args, int nargs, PyObject *kwnames)
{
    Tracer *t = f->t;
    const char *name = ((PyCFunctionObject *)fn)->m_ml->ml_name;
    bool nokw = kwnames == NULL || PyTuple_GET_SIZE(kwnames) == 0;
    if (strcmp(name, "len") == 0 && nargs == 1 && nokw)
        return builtin_len(f, args[0]);
    if (strcmp(name, "isinstance") == 0 && nargs == 2 && nokw) {
        PyObject *tp = known_type(args[0]);
        PyObject *cls = NULL;
        if (args[1]->kind == V_CONST)
            cls = Py_NewRef(args[1]->obj);
        else if (args[1]->kind == V_TUPLE && (cls = value_as_constant(t, args[1])) == NULL)
            return NULL;
        if (tp == NULL || cls == NULL || !plain_type_or_tuple(cls)) {
            Py_XDECREF(cls);
            return tracer_unsupported(t, false, "isinstance() on these values"), NULL;
        }
        int r = PyObject_IsSubclass(tp, cls);
        Py_DECREF(cls);
        return r < 0 ? NULL : new_const(t, PyBool_FromLong(r));
    }
    if ((strcmp(name, "min") == 0 || strcmp(name, "max") == 0 || strcmp(name, "abs") == 0)
        && nokw && nargs >= 1) {
        if (strcmp(name, "abs") == 0 && nargs == 1 && args[0]->kind == V_TENSOR)
            return tensorops_call(t, NODE_CALL_FUNCTION, fn, "abs", args, 1, NULL);
        Value *single = nargs == 1 && (args[0]->kind == V_TUPLE || args[0]->kind == V_LIST) ? args[0] : NULL;
        PyObject *cargs = single ? const_args(single->items, single->n) : const_args(args, nargs);
        if (cargs == NULL)
            return PyErr_Occurred() ? NULL : (tracer_unsupported(t, false, "%s() on values that are not constants", name), NULL);
        PyObject *r = single ? PyObject_CallOneArg(fn, cargs) : PyObject_Call(fn, cargs, NULL);
        Py_DECREF(cargs);
        return new_const(t, r);
    }
    if (nargs >= 1 && args[0]->kind == V_TENSOR)
        return tracer_break(t, STOP_CALL, "call to builtin %s on a tensor value", name), NULL;
    if (strcmp(name, "getattr") == 0 && nokw && nargs == 2 && args[1]->kind == V_CONST
        && PyUnicode_CheckExact(args[1]->obj))
        return load_attr(f, args[0], args[1]->obj);
    return tracer_break(t, STOP_CALL, "call to builtin %s", name), NULL;
}

/* int(), float(), bool(), range(), slice(), str() of constants.  NULL when
   tracing stops. */
static Value *call_scalar_type(TFrame *f, PyObject *tp, Value **args, int nargs)
{
    Tracer *t = f->t;
    PyObject *cargs = const_args(args, nargs);
    if (cargs == NULL) {
        if (PyErr_Occurred())
            return NULL;
        if (nargs == 1 && args[0]->kind == V_TENSOR)
            return tracer_break(t, STOP_ESCAPE, "data escape: %s() of a tensor value",
                                ((PyTypeObject *)tp)->tp_name), NULL;
        return tracer_unsupported(t, false, "%s() of a value that is not a constant",
                                  ((PyTypeObject *)tp)->tp_name), NULL;
    }
    PyObject *r = PyObject_Call(tp, cargs, NULL);
    Py_DECREF(cargs);
    return new_const(t, r);
}

/* tuple() / list() of nothing or of what an iterable yields (consumed).
   NULL when tracing stops. */
static Value *call_sequence_type(TFrame *f, PyObject *tp, Value **args, int nargs)
{
    Tracer *t = f->t;
    Value *out = value_new(t, tp == (PyObject *)&PyTuple_Type ? V_TUPLE : V_LIST, NULL);
    if (out == NULL)
        return NULL;
    if (nargs == 1) {
        Value *it = make_iter(f, args[0]);
        if (it == NULL)
            return NULL;
        for (int i = it->pos; i < it->n; i++)
            if (value_append(t, out, it->items[i]) < 0)
                return NULL;
        it->pos = it->n;
    }
    return out;
}

/* enumerate(iterable[, start]): a V_ITER of (index, item) pairs that
   remembers its source (derive_iter).  NULL when tracing stops. */
static Value *call_enumerate(TFrame *f, Value **args, int nargs)
{
    Tracer *t = f->t;
    long start = 0;
    if (nargs == 2) {
        if (!foldable(args[1]) || !PyLong_CheckExact(args[1]->obj))
            return tracer_unsupported(t, false, "enumerate() with a non-constant start"), NULL;
        start = PyLong_AsLong(args[1]->obj);
    }
    Value *src = make_iter(f, args[0]);
    Value *out = src ? value_new(t, V_ITER, NULL) : NULL;
    if (out == NULL || derive_iter(t, out, &src, 1, start) < 0)
        return NULL;
    int first = src->pos;
    src->pos = src->n;   /* consumed */
    for (int i = first; i < src->n; i++) {
        Value *pair = value_new(t, V_TUPLE, NULL);
        Value *idx = new_const(t, PyLong_FromLong(start + i - first));
        if (pair == NULL || idx == NULL || value_append(t, pair, idx) < 0
            || value_append(t, pair, src->items[i]) < 0 || value_append(t, out, pair) < 0)
            return NULL;
    }
    return out;
}

/* zip(*iterables), at most 8: a V_ITER of tuples that remembers its
   sources (derive_iter).  NULL when tracing stops. */
static Value *call_zip(TFrame *f, Value **args, int nargs)
{
    Tracer *t = f->t;
    Value *its[8];
    if (nargs > 8)
        return tracer_unsupported(t, false, "zip() of more than 8 iterables"), NULL;
    for (int k = 0; k < nargs; k++) {
        its[k] = make_iter(f, args[k]);
        if (its[k] == NULL)
            return NULL;
    }
    Value *out = value_new(t, V_ITER, NULL);
    if (out == NULL || derive_iter(t, out, its, nargs, -1) < 0)
        return NULL;
    for (;;) {
        Value *tup = value_new(t, V_TUPLE, NULL);
        if (tup == NULL)
            return NULL;
        bool done = false;
        for (int k = 0; k < nargs && !done; k++) {
            if (its[k]->pos >= its[k]->n)
                done = true;   /* as zip: items already taken this round are lost */
            else if (value_append(t, tup, its[k]->items[its[k]->pos++]) < 0)
                return NULL;
        }
        if (done)
            break;
        if (value_append(t, out, tup) < 0)
            return NULL;
    }
    return out;
}

/* Calls of builtin types: range, int, float, bool, slice, str, tuple,
   list, enumerate, zip; any other is a break.  NULL when tracing stops. */
static Value *call_type(TFrame *f, PyObject *tp, Value **args, int nargs, PyObject *kwnames)
{
    Tracer *t = f->t;
    bool nokw = kwnames == NULL || PyTuple_GET_SIZE(kwnames) == 0;
    if (!nokw)
        return tracer_unsupported(t, false, "keyword arguments to %s()", ((PyTypeObject *)tp)->tp_name), NULL;
    if (tp == (PyObject *)&PyRange_Type || tp == (PyObject *)&PyLong_Type
        || tp == (PyObject *)&PyFloat_Type || tp == (PyObject *)&PyBool_Type
        || tp == (PyObject *)&PySlice_Type || tp == (PyObject *)&PyUnicode_Type)
        return call_scalar_type(f, tp, args, nargs);
    if (tp == (PyObject *)&PyTuple_Type && nargs == 1
        && (args[0]->kind == V_TUPLE || (args[0]->kind == V_CONST && PyTuple_CheckExact(args[0]->obj))))
        return args[0];   /* tuple(t) is t itself, as eagerly */
    if ((tp == (PyObject *)&PyTuple_Type || tp == (PyObject *)&PyList_Type) && nargs <= 1)
        return call_sequence_type(f, tp, args, nargs);
    if (tp == (PyObject *)&PyEnum_Type && (nargs == 1 || nargs == 2))
        return call_enumerate(f, args, nargs);
    if (tp == (PyObject *)&PyZip_Type && nargs >= 1)
        return call_zip(f, args, nargs);
    return tracer_break(t, STOP_CALL, "call to %s()", ((PyTypeObject *)tp)->tp_name), NULL;
}

/* Methods of lists and dicts made by this frame, and keys/values/items. */
static Value *call_container_method(TFrame *f, Value *m, Value **args, int nargs, PyObject *kwnames)
{
    Tracer *t = f->t;
    Value *self = m->items[0];
    PyObject *name = m->obj;
    if (kwnames && PyTuple_GET_SIZE(kwnames) > 0)
        return tracer_unsupported(t, false, "keyword arguments to .%U()", name), NULL;
    /* args[0] is self */
    if (self->kind == V_LIST && self->src < 0) {
        if (PyUnicode_CompareWithASCIIString(name, "append") == 0 && nargs == 2) {
            if (tracer_note_mutation(t, self, -1) < 0 || value_append(t, self, args[1]) < 0)
                return NULL;
            return new_const(t, Py_NewRef(Py_None));
        }
        if (PyUnicode_CompareWithASCIIString(name, "extend") == 0 && nargs == 2) {
            Value *it = make_iter(f, args[1]);
            if (it == NULL || tracer_note_mutation(t, self, -1) < 0)
                return NULL;
            for (int i = it->pos; i < it->n; i++)
                if (value_append(t, self, it->items[i]) < 0)
                    return NULL;
            it->pos = it->n;
            return new_const(t, Py_NewRef(Py_None));
        }
    }
    if (self->kind == V_DICT && nargs == 1
        && (PyUnicode_CompareWithASCIIString(name, "keys") == 0
            || PyUnicode_CompareWithASCIIString(name, "values") == 0
            || PyUnicode_CompareWithASCIIString(name, "items") == 0)) {
        /* a view: iterated as its items; the program gets the real view */
        Value *out = value_new(t, V_ITER, NULL);
        if (out == NULL)
            return NULL;
        out->seq = self;
        out->view = (char)PyUnicode_READ_CHAR(name, 0);
        for (int i = 0; i < self->n; i++) {
            Value *k = value_new(t, V_CONST, PyList_GET_ITEM(self->obj, i));
            Value *item = k;
            if (k == NULL)
                return NULL;
            if (PyUnicode_CompareWithASCIIString(name, "values") == 0) {
                item = self->items[i];
            }
            else if (PyUnicode_CompareWithASCIIString(name, "items") == 0) {
                item = value_new(t, V_TUPLE, NULL);
                if (item == NULL || value_append(t, item, k) < 0 || value_append(t, item, self->items[i]) < 0)
                    return NULL;
            }
            else if (PyUnicode_CompareWithASCIIString(name, "keys") != 0) {
                return tracer_unsupported(t, false, "dict method .%U()", name), NULL;
            }
            if (value_append(t, out, item) < 0)
                return NULL;
        }
        return out;
    }
    return tracer_break(t, STOP_CALL, "call to .%U() of a %s%s", name,
                        self->kind == V_LIST ? "list" : "dict",
                        self->src >= 0 ? " the program can see" : ""), NULL;
}

static Value *call_value(TFrame *f, Value *callable, Value **args, int nargs, PyObject *kwnames)
{
    Tracer *t = f->t;
    if (callable->kind == V_METHOD) {
        Value *self = callable->items[0];
        if (self->kind == V_TENSOR) {
            PyObject *name = callable->obj;
            if (!tensorops_is_pure_method(name)) {
                if (tensorops_is_escape_method(name))
                    return tracer_break(t, STOP_ESCAPE, "data escape: .%U() on a tensor value", name), NULL;
                return tracer_break(t, STOP_CALL, "call to .%U(), not a pure tensor method", name), NULL;
            }
            const char *hint = PyUnicode_AsUTF8(name);
            if (hint == NULL)
                return NULL;
            return tensorops_call(t, NODE_CALL_METHOD, name, hint, args, nargs, kwnames);
        }
        return call_container_method(f, callable, args, nargs, kwnames);
    }
    if (callable->kind == V_BOUND)
        return tracer_break(t, STOP_CALL, "call to method .%U() of a %s", callable->obj,
                            callable->items[0]->obj ? Py_TYPE(callable->items[0]->obj)->tp_name : "value"), NULL;
    if (callable->kind == V_OBJECT && nargs < MAX_STACK) {
        /* an nn.Module: inline type(m).forward(m, *args) */
        bool handled;
        Value *fwd = value_module_forward(t, callable, &handled);
        if (handled) {
            Value *full[MAX_STACK + 1];
            full[0] = callable;
            memcpy(full + 1, args, sizeof(Value *) * (size_t)nargs);
            return fwd ? inline_call(f, fwd, full, nargs + 1, kwnames) : NULL;
        }
    }
    if (callable->kind != V_CONST)
        return tracer_break(t, STOP_CALL, "call of a %s",
                                  callable->obj ? Py_TYPE(callable->obj)->tp_name : "value that is not a function"), NULL;
    PyObject *fn = callable->obj;
    if (PyFunction_Check(fn) && !tensorops_is_pure_function(fn))
        return inline_call(f, callable, args, nargs, kwnames);
    if (tensorops_is_pure_function(fn)) {
        PyObject *name = PyObject_GetAttrString(fn, "__name__");
        if (name == NULL) {
            PyErr_Clear();
            name = PyUnicode_FromString("call");
        }
        const char *hint = name ? PyUnicode_AsUTF8(name) : NULL;
        Value *r = hint ? tensorops_call(t, NODE_CALL_FUNCTION, fn, hint, args, nargs, kwnames) : NULL;
        Py_XDECREF(name);
        return r;
    }
    if (PyCFunction_Check(fn) && PyCFunction_GET_SELF(fn) != NULL && PyModule_Check(PyCFunction_GET_SELF(fn))) {
        PyObject *modname = PyModule_GetNameObject(PyCFunction_GET_SELF(fn));
        int is_builtins = modname && PyUnicode_CompareWithASCIIString(modname, "builtins") == 0;
        Py_XDECREF(modname);
        PyErr_Clear();
        if (is_builtins)
            return call_builtin(f, fn, args, nargs, kwnames);
    }
    if (PyType_Check(fn) && !(((PyTypeObject *)fn)->tp_flags & Py_TPFLAGS_HEAPTYPE))
        return call_type(f, fn, args, nargs, kwnames);
    PyObject *r = PyObject_Repr(fn);
    if (r == NULL)
        return NULL;
    Value *stop = (tracer_break(t, STOP_CALL, "call to %U", r), NULL);
    Py_DECREF(r);
    return stop;
}

/* The call of a CALL instruction.  When it stops (it will run eagerly),
   what tracing it did to this frame's containers is undone, and in the
   root frame its ops are dropped from the graph, so that nothing happens
   twice.  NULL when tracing stops. */
static Value *call_or_undo(TFrame *f, Value *callable, Value **args, int nargs, PyObject *kwnames)
{
    Tracer *t = f->t;
    int undo_mark = t->nundo;
    int ops_mark = graph_op_count(t->graph);
    Value *r = call_value(f, callable, args, nargs, kwnames);
    if (r == NULL) {
        tracer_undo_to(t, undo_mark);
        if (f->parent == NULL && !PyErr_Occurred())
            graph_truncate(t->graph, ops_mark);
    }
    return r;
}

/* ---- materializing values ---- */

typedef struct Outputs {
    PyObject *nodes;          /* strong: graph output nodes, in order */
    Value **memo_vals;        /* owned: Values given a memo slot, by slot */
    Rebuild *memo;            /* owned: how to build each memo slot */
    int nmemo, memo_cap;
    int depth;
} Outputs;

static int output_index(Outputs *o, NodeObject *node)
{
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(o->nodes); i++)
        if (PyList_GET_ITEM(o->nodes, i) == (PyObject *)node)
            return (int)i;
    if (PyList_Append(o->nodes, (PyObject *)node) < 0)
        return -1;
    return (int)PyList_GET_SIZE(o->nodes) - 1;
}

static void outputs_clear(Outputs *o)
{
    Py_CLEAR(o->nodes);
    for (int i = 0; i < o->nmemo; i++)
        rebuild_clear(&o->memo[i]);
    PyMem_Free(o->memo);
    PyMem_Free(o->memo_vals);
    memset(o, 0, sizeof(*o));
}

static int make_rebuild(Tracer *t, Outputs *o, Value *v, Rebuild *rb);
static int make_rebuild_iter(Tracer *t, Outputs *o, Value *it, int from, bool live, Rebuild *rb);

/* Rebuild of a container's items into rb (kind already set).  0 / -1. */
static int make_rebuild_items(Tracer *t, Outputs *o, Value *v, int from, Rebuild *rb)
{
    rb->n = v->n - from;
    rb->items = PyMem_Calloc((size_t)rb->n + 1, sizeof(Rebuild));
    if (rb->items == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (int i = from; i < v->n; i++)
        if (make_rebuild(t, o, v->items[i], &rb->items[i - from]) < 0)
            return -1;
    return 0;
}

/* Start rebuild rb of `kind` with n items (and a spare one) to fill.
   0 / -1 (MemoryError). */
static int rebuild_start(Rebuild *rb, RebuildKind kind, int index, int n)
{
    rb->kind = kind;
    rb->index = index;
    rb->n = n;
    rb->items = PyMem_Calloc((size_t)n + 1, sizeof(Rebuild));
    if (rb->items == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

/* rb = seq.<name>() of dict Value seq: one of its views.  0 / -1. */
static int rebuild_dict_view(Tracer *t, Outputs *o, Value *seq, char view, Rebuild *rb)
{
    if (rebuild_start(rb, RB_DICT_VIEW, 0, 1) < 0)
        return -1;
    rb->obj = PyUnicode_FromString(view == 'k' ? "keys" : view == 'v' ? "values" : "items");
    if (rb->obj == NULL)
        return -1;
    return make_rebuild(t, o, seq, &rb->items[0]);
}

/* Does iterator `it` read a list, dict or tensor (itself or its sources)? */
static bool reads_seq(const Value *it)
{
    if (it->seq != NULL)
        return true;
    for (int k = 0; it->srcs && k < it->srcs->n; k++)
        if (reads_seq(it->srcs->items[k]))
            return true;
    return false;
}

/* Rebuild of loop iterator `it` from its item `from` on:
     - over fixed items: the tuple of the items left (RB_ITER), which the
       resume frame iterates as it translates;
     - over a tensor: a view of the rows left (RB_ROWS), so that what an
       eager step writes into the tensor is seen;
     - over a list: the tuple of the items left, with the list noted so that
       an eager step that changes it turns the tuple into a real iterator
       over the list (RB_LIST_ITER); `live` asks for that iterator at once
       (RB_LIVE_ITER), as a source of a real enumerate() or zip() needs;
     - over a dict: a real iterator over it (RB_LIVE_ITER), which raises as
       eagerly if an eager step changes the dict's size;
     - enumerate() or zip() over any of those: a real one (RB_DERIVED).
   0 / -1. */
static int make_rebuild_iter(Tracer *t, Outputs *o, Value *it, int from, bool live, Rebuild *rb)
{
    int left = it->n - from;
    bool lists_only = it->srcs != NULL;   /* every source plain, over a list or fixed items */
    bool any_seq = false;
    for (int k = 0; it->srcs && k < it->srcs->n; k++) {
        Value *src = it->srcs->items[k];
        lists_only &= src->srcs == NULL && (src->seq == NULL || src->seq->kind == V_LIST);
        any_seq |= reads_seq(src);
    }
    if (it->srcs != NULL && !any_seq && !live) {
        rb->kind = RB_ITER;   /* over fixed items: the tuple of what is left */
        return make_rebuild_items(t, o, it, from, rb);
    }
    if (lists_only && !live) {
        if (rebuild_start(rb, RB_ZIP_LISTS, it->count < 0 ? 1 : 0, 1 + it->srcs->n) < 0
            || (it->count >= 0 && (rb->obj = PyLong_FromLong(it->count + from)) == NULL))
            return -1;
        rb->items[0].kind = RB_ITER;
        if (make_rebuild_items(t, o, it, from, &rb->items[0]) < 0)
            return -1;
        for (int k = 0; k < it->srcs->n; k++)
            if (make_rebuild_iter(t, o, it->srcs->items[k], from, false, &rb->items[1 + k]) < 0)
                return -1;
        return 0;
    }
    if (it->srcs != NULL && (left > 0 || live)) {
        if (rebuild_start(rb, RB_DERIVED, it->count < 0 ? 1 : 0, it->srcs->n) < 0
            || (it->count >= 0 && (rb->obj = PyLong_FromLong(it->count + from)) == NULL))
            return -1;
        for (int k = 0; k < rb->n; k++) {
            Value *src = it->srcs->items[k];
            if (src->srcs != NULL)
                return tracer_unsupported(t, false, "a graph break inside a loop over enumerate() "
                                          "or zip() of enumerate() or zip()");
            if (make_rebuild_iter(t, o, src, from, true, &rb->items[k]) < 0)
                return -1;
        }
        return 0;
    }
    if (it->seq != NULL && it->seq->kind == V_TENSOR) {
        if (rebuild_start(rb, RB_ROWS, it->seq_start + from, 1) < 0)
            return -1;
        return make_rebuild(t, o, it->seq, &rb->items[0]);
    }
    if (it->seq != NULL && (live || it->seq->kind == V_DICT)) {
        if (rebuild_start(rb, RB_LIVE_ITER, it->seq_start + from, 1) < 0)
            return -1;
        if (it->seq_view == 0 || it->seq_view == 'k')
            return make_rebuild(t, o, it->seq, &rb->items[0]);
        /* over d.values() or d.items(): iter() of that view */
        return rebuild_dict_view(t, o, it->seq, it->seq_view, &rb->items[0]);
    }
    rb->kind = RB_ITER;
    if (make_rebuild_items(t, o, it, from, rb) < 0)
        return -1;
    if (it->came_in_slot) {
        /* it may read a list (the incoming slot's note says): pass that on */
        rb->kind = RB_SLOT_ITER;
        rb->index = it->came_in_slot - 1;
        if ((rb->obj = PyLong_FromLong(from)) == NULL)
            return -1;
    }
    else if (it->seq != NULL) {
        /* the list goes in the spare slot after the items (rb->n stays) */
        rb->kind = RB_LIST_ITER;
        rb->index = it->seq_start + from;
        if (make_rebuild(t, o, it->seq, &rb->items[rb->n]) < 0)
            return -1;
    }
    return 0;
}

/* A list, dict, tuple or iterator this frame made is one object however many slots hold it:
   built once per run into a memo slot (after the memo slots it contains). */
static int make_rebuild_memo(Tracer *t, Outputs *o, Value *v, Rebuild *rb)
{
    for (int i = 0; i < o->nmemo; i++) {
        if (o->memo_vals[i] == v) {
            rb->kind = RB_MEMO;
            rb->index = i;
            return 0;
        }
    }
    Rebuild built;
    memset(&built, 0, sizeof(built));
    if (v->kind == V_ITER && v->view) {
        /* d.keys() / values() / items() of the dict, rebuilt */
        if (rebuild_dict_view(t, o, v->seq, v->view, &built) < 0) {
            rebuild_clear(&built);
            return -1;
        }
    }
    else if (v->kind == V_ITER && v->escapes) {
        /* iter() of a real iterator (or of the rows / items left) */
        if (rebuild_start(&built, RB_LIVE_ITER, 0, 1) < 0)
            return -1;
        if (v->seq == NULL && v->srcs == NULL) {
            built.items[0].kind = RB_TUPLE;
            if (make_rebuild_items(t, o, v, v->pos, &built.items[0]) < 0) {
                rebuild_clear(&built);
                return -1;
            }
        }
        else if (make_rebuild_iter(t, o, v, v->pos, true, &built.items[0]) < 0) {
            rebuild_clear(&built);
            return -1;
        }
    }
    else if (v->kind == V_ITER) {
        if (make_rebuild_iter(t, o, v, v->pos, false, &built) < 0) {
            rebuild_clear(&built);
            return -1;
        }
    }
    else {
        built.kind = v->kind == V_LIST ? RB_LIST : v->kind == V_TUPLE ? RB_TUPLE : RB_DICT;
        if (v->kind == V_DICT && (built.obj = PyList_AsTuple(v->obj)) == NULL)
            return -1;
        if (make_rebuild_items(t, o, v, 0, &built) < 0) {
            rebuild_clear(&built);
            return -1;
        }
    }
    if (o->nmemo == o->memo_cap) {
        int cap = o->memo_cap ? o->memo_cap * 2 : 4;
        Rebuild *m = PyMem_Realloc(o->memo, sizeof(Rebuild) * (size_t)cap);
        Value **mv = m ? PyMem_Realloc(o->memo_vals, sizeof(Value *) * (size_t)cap) : NULL;
        if (m)
            o->memo = m;
        if (mv == NULL) {
            rebuild_clear(&built);
            PyErr_NoMemory();
            return -1;
        }
        o->memo_vals = mv;
        o->memo_cap = cap;
    }
    o->memo[o->nmemo] = built;
    o->memo_vals[o->nmemo] = v;
    rb->kind = RB_MEMO;
    rb->index = o->nmemo++;
    return 0;
}

/* How to rebuild v after the graph ran.  0 / -1 (t->reason set when v
   cannot be rebuilt). */
static int make_rebuild(Tracer *t, Outputs *o, Value *v, Rebuild *rb)
{
    memset(rb, 0, sizeof(*rb));
    if (++o->depth > 64) {
        o->depth--;
        return tracer_unsupported(t, false, "a value nested more than 64 levels deep (or containing itself)");
    }
    int rc = 0;
    switch (v->kind) {
    case V_TENSOR:
        if (v->node->op == NODE_PLACEHOLDER) {
            rb->kind = RB_INPUT;
            rb->index = v->src;
        }
        else {
            rb->kind = RB_OUTPUT;
            rb->index = output_index(o, v->node);
            rc = rb->index < 0 ? -1 : 0;
        }
        break;
    case V_CONST:
    case V_OBJECT:
        if (v->src >= 0) {
            rb->kind = RB_INPUT;
            rb->index = v->src;
        }
        else {
            rb->kind = RB_CONST;
            rb->obj = Py_NewRef(v->obj);
        }
        break;
    case V_NULL:
        rb->kind = RB_NULL;
        break;
    case V_LIST:
    case V_DICT:
        if (v->src >= 0) {
            rb->kind = RB_INPUT;   /* the caller's own object, unchanged */
            rb->index = v->src;
        }
        else {
            rc = make_rebuild_memo(t, o, v, rb);
        }
        break;
    case V_TUPLE:
        if (v->src >= 0) {
            rb->kind = RB_INPUT;
            rb->index = v->src;
            break;
        }
        /* one object wherever it goes (`copy.copy(t) is t`) */
        rc = make_rebuild_memo(t, o, v, rb);
        break;
    case V_SLICE:
        rb->kind = RB_SLICE;
        rc = make_rebuild_items(t, o, v, 0, rb);
        break;
    case V_ITER:
        rc = make_rebuild_memo(t, o, v, rb);
        break;
    case V_BOUND:
        rb->kind = RB_ATTR;
        rb->obj = Py_NewRef(v->obj);
        rc = make_rebuild_items(t, o, v, 0, rb);
        break;
    case V_METHOD:
        rb->kind = RB_TYPE_ATTR;
        rb->obj = Py_NewRef(v->obj);
        rc = make_rebuild_items(t, o, v, 0, rb);
        rb->n = 1;   /* only the receiver */
        break;
    default:
        rc = tracer_unsupported(t, false, "a value that cannot be rebuilt");
    }
    o->depth--;
    return rc;
}

/* Live slot k holds a Python number computed from tensors, or a loop
   iterator: the masks of the resume frame's key. */
static void note_slot(Value *v, int k, uint64_t *unspec, uint64_t *iters, bool *too_many)
{
    bool is_iter = v != NULL && v->kind == V_ITER && !v->view;
    bool is_num = v != NULL && v->kind == V_TENSOR
                  && (PyFloat_CheckExact(v->obj) || PyLong_CheckExact(v->obj)
                      || PyComplex_CheckExact(v->obj));
    if (k >= LIVE_MAX_SLOTS) {
        if (is_iter)
            *too_many = true;
        return;
    }
    if (is_iter)
        *iters |= slot_bit(k);
    if (is_num)
        *unspec |= slot_bit(k);
}

/* The frame's live state at its end: every local and stack[0..sp). */
static int make_live(Tracer *t, TFrame *f, Outputs *o, int sp, LiveState *live)
{
    live->nlocals = f->nlocals;
    live->nstack = sp;
    live->locals = PyMem_Calloc((size_t)f->nlocals + 1, sizeof(Rebuild));
    live->stack = PyMem_Calloc((size_t)sp + 1, sizeof(Rebuild));
    if (live->locals == NULL || live->stack == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    bool too_many = false;
    for (int i = 0; i < f->nlocals; i++) {
        Value *v = f->locals[i];
        if (v == NULL) {
            /* never touched here: passed on as it came in */
            live->locals[i].kind = RB_LOCAL;
            live->locals[i].index = i;
            if (t->cf->unspec & slot_bit(i))
                live->unspec |= slot_bit(i);
            continue;
        }
        note_slot(v, i, &live->unspec, &live->iters, &too_many);
        if (make_rebuild(t, o, v, &live->locals[i]) < 0)
            return -1;
    }
    for (int j = 0; j < sp; j++) {
        note_slot(f->stack[j], f->nlocals + j, &live->unspec, &live->iters, &too_many);
        if (make_rebuild(t, o, f->stack[j], &live->stack[j]) < 0)
            return -1;
    }
    if (too_many)
        return tracer_unsupported(t, false, "a loop iterator beyond %d live slots", LIVE_MAX_SLOTS);
    return 0;
}

/* Mark the iterators v holds (v itself, or in its containers) as ones the
   program gets. */
static void mark_escapes(Value *v, int depth)
{
    if (v == NULL || depth > 64)
        return;
    if (v->kind == V_ITER) {
        v->escapes = true;
        return;
    }
    if (v->kind == V_TUPLE || v->kind == V_LIST || v->kind == V_DICT || v->kind == V_SLICE
        || v->kind == V_BOUND || v->kind == V_METHOD)
        for (int i = 0; i < v->n; i++)
            mark_escapes(v->items[i], depth + 1);
}

/* The plan's exit, from t->end: its kind and the rebuilds of what it uses
   (the return value; the live state, and the eager call or the branch's
   condition).  0 / -1 (t->reason set when a value cannot be rebuilt). */
static int plan_exit(Tracer *t, TFrame *root, Outputs *o, Plan *p)
{
    FrameEnd *e = &t->end;
    switch (e->kind) {
    case END_RETURN:
        p->exit = EXIT_RETURN;
        return make_rebuild(t, o, e->retval, &p->result);
    case END_CALL:
        p->exit = EXIT_CALL;
        if (make_live(t, root, o, e->sp, &p->live) < 0
            || make_rebuild(t, o, e->callable, &p->callable) < 0)
            return -1;
        p->args = PyMem_Calloc((size_t)e->nargs + 1, sizeof(Rebuild));
        if (p->args == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        p->nargs = e->nargs;
        for (int i = 0; i < e->nargs; i++)
            if (make_rebuild(t, o, e->args[i], &p->args[i]) < 0)
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
        if (make_live(t, root, o, e->sp, &p->live) < 0
            || make_rebuild(t, o, e->cond, &p->cond) < 0)
            return -1;
        p->branch_true = e->branch_true;
        p->branch_false = e->branch_false;
        p->true_line = PyCode_Addr2Line(root->code, e->branch_true * 2);
        p->false_line = PyCode_Addr2Line(root->code, e->branch_false * 2);
        return 0;
    case END_DEOPT:
        p->exit = EXIT_DEOPT;
        if (make_live(t, root, o, e->sp, &p->live) < 0)
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
   Make every such node an output.  0 / -1. */
static int output_unread_nodes(Tracer *t, Outputs *o)
{
    PyObject *nodes = PyObject_GetAttrString((PyObject *)t->graph, "nodes");
    if (nodes == NULL)
        return -1;
    int rc = 0;
    for (Py_ssize_t i = 0; rc == 0 && i < PySequence_Length(nodes); i++) {
        PyObject *n = PySequence_GetItem(nodes, i);
        int leaf = n && ((NodeObject *)n)->op != NODE_PLACEHOLDER
                   && PySet_Contains(t->used_nodes, n) == 0;
        if (n == NULL || (leaf && output_index(o, (NodeObject *)n) < 0))
            rc = -1;
        Py_XDECREF(n);
    }
    Py_DECREF(nodes);
    return rc;
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
    p->gm = graph_module_new(t->graph);
    if (p->gm == NULL)
        return -1;
    if (!(t->end.kind != END_RETURN && capture_state()->config.fullgraph)) {
        uint64_t b0 = engine_now_ns();
        p->compiled = backend_compile(t->backend, p->gm, t->example_inputs);
        t->backend_ns = engine_now_ns() - b0;
        if (p->compiled == NULL)
            return -1;
    }
    return 0;
}

/* Close the graph over everything the plan needs, build the plan's exit,
   call the backend.  0 / -1. */
static int finish(Tracer *t, TFrame *root, CacheEntry *entry)
{
    Plan *p = &entry->plan;
    FrameEnd *e = &t->end;
    /* before any rebuild: an iterator a slot and the program share is one
       real iterator */
    mark_escapes(e->kind == END_RETURN ? e->retval : NULL, 0);
    if (e->kind == END_CALL) {
        mark_escapes(e->callable, 0);
        for (int i = 0; i < e->nargs; i++)
            mark_escapes(e->args[i], 0);
    }
    Outputs o;
    memset(&o, 0, sizeof(o));
    o.nodes = PyList_New(0);
    if (o.nodes == NULL)
        return -1;
    int rc = -1;
    if (plan_exit(t, root, &o, p) < 0)
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
    outputs_clear(&o);
    return rc;
}

/* Item assignment into a list or dict this frame made; anything else (an
   array, an object the program can see) is an eager step. */
static int store_subscript(TFrame *f, Value *container, Value *idx, Value *value)
{
    Tracer *t = f->t;
    if (container->kind == V_LIST && container->src < 0 && idx->kind == V_CONST
        && PyLong_CheckExact(idx->obj)) {
        Py_ssize_t i = PyLong_AsSsize_t(idx->obj);
        if (i < 0)
            i += container->n;
        if (i < 0 || i >= container->n)
            return tracer_break(t, STOP_CALL, "list assignment index out of range");
        if (tracer_note_mutation(t, container, (int)i) < 0)
            return -1;
        container->items[i] = value;
        return 0;
    }
    if (container->kind == V_DICT && container->src < 0 && foldable(idx)) {
        for (int i = 0; i < container->n; i++) {
            int eq = PyObject_RichCompareBool(PyList_GET_ITEM(container->obj, i), idx->obj, Py_EQ);
            if (eq < 0)
                return -1;
            if (eq) {
                if (tracer_note_mutation(t, container, i) < 0)
                    return -1;
                container->items[i] = value;
                return 0;
            }
        }
        if (tracer_note_mutation(t, container, -1) < 0 || PyList_Append(container->obj, idx->obj) < 0)
            return -1;
        return value_append(t, container, value);
    }
    return tracer_break(t, STOP_CALL, "item assignment into a %s the program can see",
                        container->kind == V_TENSOR ? "tensor" : "container or object");
}

/* ---- ending the root frame at a break or a deopt exit ---- */

/* end_root_frame helpers: the instruction has no eager step (deopt). */
#define NOT_ENDED 2

static const char *stop_kind_name(StopKind k, const char *unsupported_as)
{
    switch (k) {
    case STOP_CALL: return "call";
    case STOP_BRANCH: return "data_dependent_branch";
    case STOP_ESCAPE: return "data_escape";
    default: return unsupported_as;
    }
}

/* Whether conditional jump `in` jumps when its condition is true. */
static bool jumps_if_true(const Instr *in)
{
    return in->opcode == POP_JUMP_FORWARD_IF_TRUE || in->opcode == POP_JUMP_BACKWARD_IF_TRUE;
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

static int end_call(TFrame *f, int argc, int sp_before, int next)
{
    Tracer *t = f->t;
    FrameEnd *e = &t->end;
    f->sp = sp_before;
    Value *first = peek(f, argc + 2);
    int nargs = first->kind == V_NULL ? argc : argc + 1;
    e->callable = first->kind == V_NULL ? peek(f, argc + 1) : first;
    e->args = PyMem_Calloc((size_t)nargs + 1, sizeof(Value *));
    if (e->args == NULL) {
        PyErr_NoMemory();
        return FRAME_STOPPED;
    }
    for (int i = 0; i < nargs; i++)
        e->args[i] = peek(f, nargs - i);
    e->nargs = nargs;
    e->kwnames = f->kwnames;
    f->kwnames = NULL;
    e->kind = END_CALL;
    e->sp = sp_before - (argc + 2);
    e->push_result = true;
    e->resume = next;
    e->kind_name = stop_kind_name(t->stop_kind, "call");
    return FRAME_ENDED;
}

/* A conditional jump on the value below sp_before: an eager truth test. */
static int end_branch(TFrame *f, const Instr *in, int sp_before)
{
    Tracer *t = f->t;
    FrameEnd *e = &t->end;
    int target = instr_jump_target(in);
    bool jump_if_true = jumps_if_true(in);
    e->kind = END_BRANCH;
    e->cond = f->stack[sp_before - 1];
    e->sp = sp_before - 1;
    e->branch_true = jump_if_true ? target : in->next;
    e->branch_false = jump_if_true ? in->next : target;
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
    switch (in->opcode) {
    case BINARY_OP:
        if (in->oparg >= 0 && in->oparg < 26)
            return in->oparg >= 13 ? inplace_names[in->oparg - 13] : binary_op_names[in->oparg];
        return NULL;
    case COMPARE_OP: {
        int k = instr_compare_op(in);
        return k >= 0 && k <= 5 ? compare_op_names[k] : NULL;
    }
    case BINARY_SUBSCR: return "getitem";
    default: break;
    }
    *n = 1;
    switch (in->opcode) {
    case UNARY_NEGATIVE: return "neg";
    case UNARY_POSITIVE: return "pos";
    case UNARY_INVERT: return "invert";
    case UNARY_NOT: return "not_";
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
    switch (in->opcode) {
    case CALL:
        return end_call(f, in->oparg, sp_before, in->next);
    case POP_JUMP_FORWARD_IF_FALSE:
    case POP_JUMP_FORWARD_IF_TRUE:
    case POP_JUMP_BACKWARD_IF_FALSE:
    case POP_JUMP_BACKWARD_IF_TRUE:
        return end_branch(f, in, sp_before);
    case LOAD_ATTR: {
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
    case STORE_SUBSCR: {
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
static int end_root_frame(TFrame *f, const Instr *in, int sp_before)
{
    Tracer *t = f->t;
    FrameEnd *e = &t->end;
    e->offset = t->stop_offset;
    if (!code_instr_protected(f->code, in->offset)) {
        int r = end_at_instr(f, in, sp_before);
        if (r != NOT_ENDED)
            return r;
    }
    if (t->cf->resume_offset == 0)
        return FRAME_STOPPED;    /* nothing ran yet: the frame is skipped */
    f->sp = sp_before;
    e->kind = END_DEOPT;
    e->sp = sp_before;
    e->resume = in->start;
    e->kind_name = "unsupported";
    return FRAME_ENDED;
}

/* ---- opcode handlers: each returns 0, or -1 when tracing stops ---- */

static int op_store_fast(TFrame *f, const Instr *in)
{
    if (in->oparg >= f->nlocals)
        return tracer_unsupported(f->t, true, "stores into a cell");
    f->locals[in->oparg] = pop(f);
    return 0;
}

static int op_delete_fast(TFrame *f, const Instr *in)
{
    Value *gone = value_new(f->t, V_NULL, NULL);
    if (gone == NULL)
        return -1;
    f->locals[in->oparg] = gone;
    return 0;
}

static int op_load_global(TFrame *f, const Instr *in)
{
    if (instr_global_pushes_null(in) && push(f, value_new(f->t, V_NULL, NULL)) < 0)
        return -1;
    return push(f, load_global(f, PyTuple_GET_ITEM(f->code->co_names, instr_global_name(in))));
}

static int op_load_deref(TFrame *f, const Instr *in)
{
    int first_free = code_first_free(f->code);
    if (in->oparg < first_free)
        return tracer_unsupported(f->t, true, "reads a cell variable");
    return push(f, load_free(f, in->oparg - first_free));
}

/* CALL argc: [NULL, callable, args...] or [callable, self, args...]. */
static int op_call(TFrame *f, const Instr *in)
{
    int argc = in->oparg;
    Value *first = peek(f, argc + 2);
    Value *callable;
    Value *args[MAX_STACK];
    int nargs;
    if (first->kind == V_NULL) {
        callable = peek(f, argc + 1);
        nargs = argc;
        for (int i = 0; i < argc; i++)
            args[i] = peek(f, argc - i);
    }
    else {
        callable = first;
        nargs = argc + 1;
        for (int i = 0; i <= argc; i++)
            args[i] = peek(f, argc + 1 - i);
    }
    Value *r = call_or_undo(f, callable, args, nargs, f->kwnames);
    if (r == NULL)
        return -1;
    f->kwnames = NULL;
    f->sp -= argc + 2;
    return push(f, r);
}

static int op_binary_op(TFrame *f, const Instr *in)
{
    Value *b = pop(f);
    Value *a = pop(f);
    bool inplace = in->oparg >= 13;
    int k = inplace ? in->oparg - 13 : in->oparg;
    if (k < 0 || k > 12)
        return tracer_unsupported(f->t, true, "BINARY_OP %d", in->oparg);
    return push(f, apply_binary(f, binary_op_names[k], binary_op_hints[k], a, b, inplace));
}

static int op_compare_op(TFrame *f, const Instr *in)
{
    Value *b = pop(f);
    Value *a = pop(f);
    int k = instr_compare_op(in);
    if (k < 0 || k > 5)
        return tracer_unsupported(f->t, true, "COMPARE_OP %d", in->oparg);
    return push(f, apply_binary(f, compare_op_names[k], compare_op_names[k], a, b, false));
}

static int op_is_op(TFrame *f, const Instr *in)
{
    Value *b = pop(f);
    Value *a = pop(f);
    int same = is_same(f, a, b);
    if (same < 0)
        return -1;
    return push(f, new_const(f->t, PyBool_FromLong(same ^ (in->oparg & 1))));
}

static int op_contains_op(TFrame *f, const Instr *in)
{
    Value *b = pop(f);
    Value *a = pop(f);
    int r = contains(f, a, b);
    if (r < 0)
        return -1;
    return push(f, new_const(f->t, PyBool_FromLong(r ^ (in->oparg & 1))));
}

static int op_unary(TFrame *f, const Instr *in)
{
    const char *name = in->opcode == UNARY_NEGATIVE ? "neg"
                       : in->opcode == UNARY_POSITIVE ? "pos" : "invert";
    return push(f, apply_unary(f, name, pop(f)));
}

static int op_unary_not(TFrame *f)
{
    int tv = truth(f, pop(f), "'not'");
    if (tv < 0)
        return -1;
    return push(f, new_const(f->t, PyBool_FromLong(!tv)));
}

static int op_binary_subscr(TFrame *f)
{
    Value *idx = pop(f);
    Value *base = pop(f);
    return push(f, subscript(f, base, idx));
}

static int op_store_subscr(TFrame *f)
{
    Value *idx = pop(f);
    Value *container = pop(f);
    Value *value = pop(f);
    return store_subscript(f, container, idx, value);
}

/* BUILD_TUPLE / BUILD_LIST of the top oparg values. */
static int op_build_sequence(TFrame *f, const Instr *in)
{
    Tracer *t = f->t;
    Value *v = value_new(t, in->opcode == BUILD_TUPLE ? V_TUPLE : V_LIST, NULL);
    if (v == NULL)
        return -1;
    for (int i = in->oparg; i > 0; i--)
        if (value_append(t, v, peek(f, i)) < 0)
            return -1;
    f->sp -= in->oparg;
    return push(f, v);
}

static int op_build_slice(TFrame *f, const Instr *in)
{
    Tracer *t = f->t;
    Value *v = value_new(t, V_SLICE, NULL);
    Value *none = value_new(t, V_CONST, Py_None);
    if (v == NULL || none == NULL)
        return -1;
    for (int i = in->oparg; i > 0; i--)
        if (value_append(t, v, peek(f, i)) < 0)
            return -1;
    if (in->oparg == 2 && value_append(t, v, none) < 0)
        return -1;
    f->sp -= in->oparg;
    return push(f, v);
}

/* BUILD_MAP (oparg key, value pairs) / BUILD_CONST_KEY_MAP (oparg values
   under a constant tuple of keys). */
static int op_build_map(TFrame *f, const Instr *in)
{
    Tracer *t = f->t;
    int oparg = in->oparg;
    Value *d = value_new(t, V_DICT, NULL);
    if (d == NULL || (d->obj = PyList_New(0)) == NULL)
        return -1;
    PyObject *keys = NULL;
    int base = in->opcode == BUILD_MAP ? 2 * oparg : oparg + 1;
    if (in->opcode == BUILD_CONST_KEY_MAP) {
        Value *kv = peek(f, 1);
        if (kv->kind != V_CONST || !PyTuple_CheckExact(kv->obj))
            return tracer_unsupported(t, true, "BUILD_CONST_KEY_MAP without constant keys");
        keys = kv->obj;
    }
    for (int i = 0; i < oparg; i++) {
        PyObject *key;
        Value *val;
        if (keys) {
            key = PyTuple_GET_ITEM(keys, i);
            val = peek(f, base - i);
        }
        else {
            Value *kv = peek(f, base - 2 * i);
            if (!foldable(kv))
                return tracer_unsupported(t, false, "a dict key that is not a constant");
            key = kv->obj;
            val = peek(f, base - 2 * i - 1);
        }
        if (dict_set_item(t, d, key, val) < 0)
            return -1;
    }
    f->sp -= base;
    return push(f, d);
}

/* LIST_APPEND / LIST_EXTEND into the list oparg below the top. */
static int op_list_extend(TFrame *f, const Instr *in)
{
    Tracer *t = f->t;
    Value *item = pop(f);
    Value *list = peek(f, in->oparg);
    if (list->kind != V_LIST || list->src >= 0)
        return tracer_unsupported(t, true, "extending a list the program can see");
    if (in->opcode == LIST_APPEND)
        return value_append(t, list, item);
    Value *it = make_iter(f, item);
    if (it == NULL)
        return -1;
    for (int i = it->pos; i < it->n; i++)
        if (value_append(t, list, it->items[i]) < 0)
            return -1;
    return 0;
}

static int op_list_to_tuple(TFrame *f)
{
    Tracer *t = f->t;
    Value *l = pop(f);
    Value *tup = value_new(t, V_TUPLE, NULL);
    if (tup == NULL)
        return -1;
    for (int i = 0; i < l->n; i++)
        if (value_append(t, tup, l->items[i]) < 0)
            return -1;
    return push(f, tup);
}

static int op_unpack_sequence(TFrame *f, const Instr *in)
{
    Value *it = make_iter(f, pop(f));
    if (it == NULL)
        return -1;
    if (it->n - it->pos != in->oparg)
        return tracer_unsupported(f->t, false, "unpacking %d values into %d names",
                                  it->n - it->pos, in->oparg);
    for (int i = it->n - 1; i >= it->pos; i--)
        if (push(f, it->items[i]) < 0)
            return -1;
    return 0;
}

static int op_swap(TFrame *f, const Instr *in)
{
    Value *top = f->stack[f->sp - 1];
    f->stack[f->sp - 1] = f->stack[f->sp - in->oparg];
    f->stack[f->sp - in->oparg] = top;
    return 0;
}

/* FOR_ITER: push the next item, or pop the iterator and jump (*ip). */
static int op_for_iter(TFrame *f, const Instr *in, int *ip)
{
    Value *it = peek(f, 1);
    if (it->kind != V_ITER)
        return tracer_unsupported(f->t, false, "FOR_ITER on an iterator the translator does not model");
    if (it->pos < it->n)
        return push(f, it->items[it->pos++]);
    (void)pop(f);
    *ip = instr_jump_target(in);
    return 0;
}

/* POP_JUMP_*_IF_FALSE / _IF_TRUE on a value whose truth is known. */
static int op_pop_jump_if(TFrame *f, const Instr *in, int *ip)
{
    int tv = truth(f, pop(f), "branch");
    if (tv < 0)
        return -1;
    if (tv == jumps_if_true(in))
        *ip = instr_jump_target(in);
    return 0;
}

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
    bool want_none = in->opcode == POP_JUMP_FORWARD_IF_NONE || in->opcode == POP_JUMP_BACKWARD_IF_NONE;
    if (is_none == want_none)
        *ip = instr_jump_target(in);
    return 0;
}

/* JUMP_IF_FALSE_OR_POP / JUMP_IF_TRUE_OR_POP ('and' / 'or'). */
static int op_jump_if_or_pop(TFrame *f, const Instr *in, int *ip)
{
    int tv = truth(f, peek(f, 1), "'and'/'or'");
    if (tv < 0)
        return -1;
    if (tv == (in->opcode == JUMP_IF_TRUE_OR_POP))
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
    return push(f, format_value(f, v, spec, in->oparg & 0x03));
}

static int op_build_string(TFrame *f, const Instr *in)
{
    PyObject *parts = string_parts(f, &f->stack[f->sp - in->oparg], in->oparg);
    if (parts == NULL)
        return -1;
    PyObject *empty = PyUnicode_FromString("");
    PyObject *s = empty ? PyUnicode_Join(empty, parts) : NULL;
    Py_XDECREF(empty);
    Py_DECREF(parts);
    f->sp -= in->oparg;
    return push(f, new_const(f->t, s));
}

static void op_return_value(TFrame *f)
{
    Tracer *t = f->t;
    f->retval = pop(f);
    if (f->parent == NULL) {
        t->end.kind = END_RETURN;
        t->end.retval = f->retval;
    }
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
 * them one by one), and in the root frame a unit inside a try range stops
 * tracing.  A stop at a prefix leaves *in as the prefix unit dispatched
 * last (EXTENDED_ARG at in->offset), which the frame's end turns into a
 * deopt at in->start.  0 / -1 (tracing stops).
 */
static int enter_instr(TFrame *f, Instr *in)
{
    Tracer *t = f->t;
    for (int u = in->start; u <= in->offset; u++) {
        if (u > in->start && count_step(t) < 0) {
            in->opcode = EXTENDED_ARG;
            in->offset = u - 1;
            return -1;
        }
        f->cur_instr = u;
        if (f->parent == NULL && code_instr_protected(f->code, u)) {
            if (u < in->offset) {
                in->opcode = EXTENDED_ARG;
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
 * load_*, apply_*, call_*, make_iter, subscript... -- and pushes the
 * result).  A stop in the root frame is made the frame's end at the
 * instruction it happened in (end_root_frame).
 */
static int run_frame(TFrame *f, int start)
{
    Tracer *t = f->t;
    Instr in = {.opcode = NOP, .oparg = 0, .start = start, .offset = start, .next = start};
    int ip = start;
    int sp_before = 0;    /* stack depth before the instruction `in` */
    t->current = f;
    while (ip < f->bc.nunits) {
        /* FIXME: the bound is counted before the next instruction is
           decoded, so a stop here ends the root frame at the instruction
           before (`in`, sp_before), whose operands may have been
           overwritten by its result (wrong results: see the report of
           this split).  Kept as it was by a refactor. */
        if (count_step(t) < 0)
            goto fail;
        instr_decode(&f->bc, ip, &in);
        sp_before = f->sp;
        if (enter_instr(f, &in) < 0)
            goto fail;
        ip = in.next;
        int rc = 0;
        switch (in.opcode) {
        case NOP:
        case RESUME:
        case CACHE:
        case PRECALL:
        case COPY_FREE_VARS:
        case EXTENDED_ARG:    /* a prefix dangling at the end of co_code */
            break;
        case LOAD_FAST:
            rc = push(f, load_local(f, in.oparg));
            break;
        case STORE_FAST:
            rc = op_store_fast(f, &in);
            break;
        case DELETE_FAST:
            rc = op_delete_fast(f, &in);
            break;
        case LOAD_CONST:
            rc = push(f, value_new(t, V_CONST, PyTuple_GET_ITEM(f->code->co_consts, in.oparg)));
            break;
        case LOAD_GLOBAL:
            rc = op_load_global(f, &in);
            break;
        case LOAD_DEREF:
            rc = op_load_deref(f, &in);
            break;
        case LOAD_ATTR:
            rc = push(f, load_attr(f, pop(f), PyTuple_GET_ITEM(f->code->co_names, in.oparg)));
            break;
        case LOAD_METHOD:
            rc = load_method(f, pop(f), PyTuple_GET_ITEM(f->code->co_names, in.oparg));
            break;
        case PUSH_NULL:
            rc = push(f, value_new(t, V_NULL, NULL));
            break;
        case KW_NAMES:
            f->kwnames = PyTuple_GET_ITEM(f->code->co_consts, in.oparg);
            break;
        case CALL:
            rc = op_call(f, &in);
            break;
        case BINARY_OP:
            rc = op_binary_op(f, &in);
            break;
        case COMPARE_OP:
            rc = op_compare_op(f, &in);
            break;
        case IS_OP:
            rc = op_is_op(f, &in);
            break;
        case CONTAINS_OP:
            rc = op_contains_op(f, &in);
            break;
        case UNARY_NEGATIVE:
        case UNARY_POSITIVE:
        case UNARY_INVERT:
            rc = op_unary(f, &in);
            break;
        case UNARY_NOT:
            rc = op_unary_not(f);
            break;
        case BINARY_SUBSCR:
            rc = op_binary_subscr(f);
            break;
        case STORE_SUBSCR:
            rc = op_store_subscr(f);
            break;
        case BUILD_TUPLE:
        case BUILD_LIST:
            rc = op_build_sequence(f, &in);
            break;
        case BUILD_SLICE:
            rc = op_build_slice(f, &in);
            break;
        case BUILD_MAP:
        case BUILD_CONST_KEY_MAP:
            rc = op_build_map(f, &in);
            break;
        case LIST_EXTEND:
        case LIST_APPEND:
            rc = op_list_extend(f, &in);
            break;
        case LIST_TO_TUPLE:
            rc = op_list_to_tuple(f);
            break;
        case UNPACK_SEQUENCE:
            rc = op_unpack_sequence(f, &in);
            break;
        case POP_TOP:
            (void)pop(f);
            break;
        case COPY:
            rc = push(f, peek(f, in.oparg));
            break;
        case SWAP:
            rc = op_swap(f, &in);
            break;
        case GET_ITER:
            rc = push(f, make_iter(f, pop(f)));
            break;
        case FOR_ITER:
            rc = op_for_iter(f, &in, &ip);
            break;
        case JUMP_FORWARD:
        case JUMP_BACKWARD:
        case JUMP_BACKWARD_NO_INTERRUPT:
            ip = instr_jump_target(&in);
            break;
        case POP_JUMP_FORWARD_IF_FALSE:
        case POP_JUMP_FORWARD_IF_TRUE:
        case POP_JUMP_BACKWARD_IF_FALSE:
        case POP_JUMP_BACKWARD_IF_TRUE:
            rc = op_pop_jump_if(f, &in, &ip);
            break;
        case POP_JUMP_FORWARD_IF_NONE:
        case POP_JUMP_FORWARD_IF_NOT_NONE:
        case POP_JUMP_BACKWARD_IF_NONE:
        case POP_JUMP_BACKWARD_IF_NOT_NONE:
            rc = op_pop_jump_if_none(f, &in, &ip);
            break;
        case JUMP_IF_FALSE_OR_POP:
        case JUMP_IF_TRUE_OR_POP:
            rc = op_jump_if_or_pop(f, &in, &ip);
            break;
        case FORMAT_VALUE:
            rc = op_format_value(f, &in);
            break;
        case BUILD_STRING:
            rc = op_build_string(f, &in);
            break;
        case RETURN_VALUE:
            op_return_value(f);
            return FRAME_RETURNED;
        default:
            rc = op_unsupported(f, &in);
            break;
        }
        if (rc < 0)
            goto fail;
    }
    tracer_unsupported(t, true, "ran past the end of the bytecode");
fail:
    if (f->parent != NULL || t->reason == NULL || PyErr_Occurred())
        return FRAME_STOPPED;
    return end_root_frame(f, &in, sp_before);
}

/* ---- entry point ---- */

static void tracer_free(Tracer *t)
{
    for (int i = 0; i < t->nall; i++) {
        Py_XDECREF(t->all[i]->obj);
        PyMem_Free(t->all[i]->items);
        PyMem_Free(t->all[i]);
    }
    PyMem_Free(t->all);
    PyMem_Free(t->by_acc);
    PyMem_Free(t->input_acc);
    PyMem_Free(t->end.args);
    PyMem_Free(t->undo);
    Py_CLEAR(t->iter_objs);
    Py_CLEAR(t->graph);
    Py_CLEAR(t->example_inputs);
    Py_CLEAR(t->used_nodes);
    Py_CLEAR(t->reason);
    Py_CLEAR(t->stop_stack);
}

/* Push a resume frame's incoming value stack onto the root frame. */
static int push_resume_stack(TFrame *f, const FrameView *fv)
{
    Tracer *t = f->t;
    for (int j = 0; j < fv->nstack; j++) {
        PyObject *obj = fv->stack[j];
        Value *v;
        if (obj == NULL) {
            v = value_new(t, V_NULL, NULL);
        }
        else {
            int acc = guardset_accessor(t->gs, ACC_STACK, -1, j, NULL, NULL);
            v = acc < 0 ? NULL : value_from_resume_slot(f, acc, obj, f->nlocals + j);
        }
        if (v == NULL || push(f, v) < 0)
            return -1;
    }
    /* A local holding a loop's iterator is read now, so that it stays the
       stack slot's iterator (one object) as the loop advances. */
    for (int i = 0; i < f->nlocals && i < LIVE_MAX_SLOTS; i++)
        if ((t->cf->iters & slot_bit(i)) && i < fv->nlocals && fv->locals[i] != NULL
            && load_local(f, i) == NULL)
            return -1;
    return 0;
}

TranslateStatus translate_frame(const FrameView *fv, PyObject *func,
                                const CacheFrame *cf, PyObject *backend,
                                CacheEntry *entry, PyObject **reason,
                                bool *permanent)
{
    *reason = NULL;
    *permanent = false;
    if (!PyFunction_Check(func)) {
        *reason = PyUnicode_FromString("frame without a function object");
        *permanent = true;
        return *reason ? TRANSLATE_UNSUPPORTED : TRANSLATE_ERROR;
    }
    const char *why = code_unsupported_reason(fv->code, false);
    if (why != NULL) {
        *reason = PyUnicode_FromString(why);
        *permanent = true;
        return *reason ? TRANSLATE_UNSUPPORTED : TRANSLATE_ERROR;
    }
    if (tensorops_init() < 0)
        return TRANSLATE_ERROR;

    Tracer t;
    memset(&t, 0, sizeof(t));
    t.gs = &entry->guards;
    t.fv = fv;
    t.cf = cf;
    t.backend = backend;
    t.graph = graph_new();
    t.example_inputs = PyList_New(0);
    t.used_nodes = PySet_New(NULL);
    TranslateStatus st = TRANSLATE_ERROR;
    TFrame root;
    memset(&root, 0, sizeof(root));
    if (t.graph == NULL || t.example_inputs == NULL || t.used_nodes == NULL)
        goto out;
    if (frame_setup(&root, &t, NULL, func, -1, fv->code) < 0)
        goto out;
    t.current = &root;
    if (cf->resume_offset != 0 && push_resume_stack(&root, fv) < 0)
        goto stopped;
    int r = run_frame(&root, cf->resume_offset);
    if (r == FRAME_STOPPED)
        goto stopped;
    /* The reason (if any) now belongs to the break; a new stop in finish()
       is a reason of its own. */
    if (finish(&t, &root, entry) < 0)
        goto stopped;
    entry->backend_ns = t.backend_ns;
    st = TRANSLATE_OK;
    goto out;
stopped:
    if (t.reason != NULL && !PyErr_Occurred()) {
        *reason = Py_NewRef(t.reason);
        *permanent = t.permanent;
        st = TRANSLATE_UNSUPPORTED;
    }
out:
    frame_teardown(&root);
    if (st != TRANSLATE_OK) {
        /* Leave the plan empty so its destructor has nothing half-built,
           but keep where tracing stopped (fullgraph messages).  When
           tracing stopped on what it read, the guards of those reads stay:
           the same inputs would stop it the same way (hook.c keeps such an
           entry, run without capture).  An error, or a stop on a value no
           guard covers, leaves no guards (and hook.c keeps no entry). */
        PyObject *where = Py_XNewRef(t.stop_stack);
        plan_clear(&entry->plan);
        if (st == TRANSLATE_ERROR || t.stop_unguarded) {
            guardset_clear(&entry->guards);
            guardset_init(&entry->guards);
        }
        entry->plan.brk.user_stack = where;
    }
    tracer_free(&t);
    return st;
}
