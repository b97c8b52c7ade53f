/*
 * tr_objects.c -- attribute access on objects as Python does it, while
 * translating (DESIGN.md 3.4; contract: translate_int.h): a class's own
 * __getattribute__ written in Python (inlined), properties whose getter is
 * Python (inlined), super() in both spellings, object.__getattribute__
 * (the generic lookup), methods bound to an object (V_BOUNDFN), and
 * functools.lru_cache wrappers.
 *
 * Invariants: every object read is reached by an accessor and guarded
 * (values.c); the functions inlined -- __getattribute__, a property's
 * fget, a method found through super() -- are reached by accessors too
 * (type(obj).name, type(obj).name.fget, type(obj).__mro__[i].name) and
 * guarded by identity, so replacing one recompiles; no Python code runs
 * while tracing except through the interpreter of the translator.
 */
#include "translate_int.h"

/* The accessor of type(<acc>).name (a class attribute as the class itself
   reads it), or -1: with an exception, or a stop when tp's metaclass has
   a data descriptor of that name, which answers the read instead of tp's
   own attribute (a Mock class's __class__ property read through the class
   is type's __class__: the class's class).  tp: type(<acc>) now. */
static int class_attr_accessor(Tracer *t, int acc, PyTypeObject *tp, PyObject *name)
{
    PyObject *meta = _PyType_Lookup(Py_TYPE(tp), name);             /* borrowed */
    if (meta != NULL && Py_TYPE(meta)->tp_descr_set != NULL) {
        tracer_unsupported(t, false, "attribute '%U' of %s, which its metaclass's %U also names",
                           name, tp->tp_name, name);
        return -1;
    }
    int ta = guardset_accessor(t->gs, ACC_TYPE, acc, 0, NULL, NULL);
    return ta < 0 ? -1 : guardset_accessor(t->gs, ACC_ATTR, ta, 0, name, NULL);
}

/* fn(obj) for fn a Python function reached by accessor fn_acc.  NULL when
   tracing stops. */
static Value *call_with(TFrame *f, int fn_acc, PyObject *fn, Value **args, int nargs)
{
    Value *fv = fn_acc < 0 ? NULL : value_from_source(f->t, fn_acc, fn);
    return fv ? tr_call_or_undo(f, fv, args, nargs, NULL) : NULL;
}

/* A method of obj: fn (a Python function, reached by fn_acc) bound to
   obj.  NULL when tracing stops. */
static Value *bind_function(TFrame *f, int fn_acc, PyObject *fn, Value *obj)
{
    Value *fv = fn_acc < 0 ? NULL : value_from_source(f->t, fn_acc, fn);
    Value *bound = fv ? value_new(f->t, V_BOUNDFN, NULL) : NULL;
    if (bound == NULL || value_append(f->t, bound, fv) < 0 || value_append(f->t, bound, obj) < 0)
        return NULL;
    return bound;
}

/* A property's getter, when it is Python: obj.name read by calling it
   (inlined).  descr_acc reaches descr (super(): type(obj).__mro__[i].name),
   or -1 for type(obj).name.  *handled false when descr is no such
   property. */
static Value *property_get(TFrame *f, Value *obj, PyObject *name, PyObject *descr, int descr_acc,
                           bool *handled)
{
    *handled = false;
    if (!Py_IS_TYPE(descr, &PyProperty_Type))
        return NULL;
    PyObject *fget = PyObject_GetAttrString(descr, "fget");
    if (fget == NULL)
        return NULL;
    *handled = true;
    Value *r;
    if (!PyFunction_Check(fget)) {
        tracer_unsupported(f->t, false, "property '%U' of %s with a getter that is not Python",
                           name, Py_TYPE(obj->obj)->tp_name);
        r = NULL;
    }
    else {
        int pa = descr_acc >= 0 ? descr_acc : class_attr_accessor(f->t, obj->src, Py_TYPE(obj->obj), name);
        PyObject *fget_name = PyUnicode_FromString("fget");
        int ga = pa < 0 || fget_name == NULL ? -1 : guardset_accessor(f->t->gs, ACC_ATTR, pa, 0, fget_name, NULL);
        Py_XDECREF(fget_name);
        Value *args[1] = {obj};
        r = call_with(f, ga, fget, args, 1);
    }
    Py_DECREF(fget);
    return r;
}

/* object.__getattribute__(obj, name): the generic lookup -- a data
   descriptor of the class (a C getter; a property, its getter inlined),
   the instance __dict__, then the class attribute (a function: bound).
   NULL when tracing stops. */
Value *tr_generic_attr(TFrame *f, Value *obj, PyObject *name)
{
    Tracer *t = f->t;
    if (obj->kind == V_NEWOBJ)
        return tr_newobj_attr(f, obj, name);
    bool written;
    Value *w = tr_written_attr(f, obj, name, &written);
    if (written || PyErr_Occurred())
        return w || PyErr_Occurred() ? w : tr_attr_missing(f, obj, name, true);
    if ((obj->kind != V_OBJECT && obj->kind != V_CONST) || obj->src < 0)
        return tracer_unsupported(t, false, "object.__getattribute__ of a value no accessor reaches"), NULL;
    PyTypeObject *tp = Py_TYPE(obj->obj);
    PyObject *descr = _PyType_Lookup(tp, name);                 /* borrowed */
    if (descr != NULL && Py_TYPE(descr)->tp_descr_set != NULL) {
        bool handled;
        Value *r = property_get(f, obj, name, descr, -1, &handled);
        if (handled || r != NULL || PyErr_Occurred())
            return r;
        if (!value_descr_is_c_getter(descr))
            return tracer_unsupported(t, false, "attribute '%U' of %s is a data descriptor that "
                                      "runs Python code", name, tp->tp_name), NULL;
    }
    PyObject **dictptr = _PyObject_GetDictPtr(obj->obj);
    PyObject *item = descr != NULL && Py_TYPE(descr)->tp_descr_set != NULL ? NULL
                     : dictptr && *dictptr ? PyDict_GetItemWithError(*dictptr, name) : NULL;
    if (PyErr_Occurred())
        return NULL;
    if (item == NULL && descr != NULL && PyFunction_Check(descr)) {
        if (dictptr && *dictptr) {   /* an instance attribute set later must win */
            PyObject *dn = PyUnicode_FromString("__dict__");
            int da = dn ? guardset_accessor(t->gs, ACC_OBJATTR, obj->src, 0, dn, NULL) : -1;
            Py_XDECREF(dn);
            if (da < 0 || guardset_add(t->gs, GUARD_DICT_LACKS, da, name, 0) < 0)
                return NULL;
        }
        return bind_function(f, class_attr_accessor(t, obj->src, tp, name), descr, obj);
    }
    if (item == NULL && descr != NULL && Py_TYPE(descr)->tp_descr_get != NULL
        && !value_descr_is_c_getter(descr))
        return tracer_unsupported(t, false, "class attribute '%U' of %s (a %s)", name,
                                  tp->tp_name, Py_TYPE(descr)->tp_name), NULL;
    PyObject *got = PyObject_GenericGetAttr(obj->obj, name);
    if (got == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError))
            return NULL;
        PyErr_Clear();
        return tr_attr_missing(f, obj, name, true);
    }
    int acc = guardset_accessor(t->gs, ACC_OBJATTR, obj->src, 0, name, NULL);
    Value *v = acc < 0 ? NULL : value_from_source(t, acc, got);
    Py_DECREF(got);
    return v;
}

/* (contract: translate_int.h) */
bool tr_missing_reaches_getattr(Tracer *t)
{
    if (t->absent_frame == NULL)
        return false;
    for (TFrame *g = t->current; g != t->absent_frame; g = g->parent) {
        if (g == NULL || code_instr_protected(g->code, g->cur_instr))
            return false;
        Instr in, next;
        instr_decode(&g->bc, g->cur_instr, &in);
        if (in.next >= g->bc.nunits)
            return false;
        instr_decode(&g->bc, in.next, &next);
        if (next.op != OP_RETURN_VALUE)
            return false;
    }
    return true;
}

/* Guard what object.__getattribute__ looked at to find obj.name missing:
   the type (a class attribute added later) and the instance dict.  0 / -1. */
static int guard_generic_absence(Tracer *t, Value *obj, PyObject *name)
{
    int ta = guardset_accessor(t->gs, ACC_TYPE, obj->src, 0, NULL, NULL);
    if (ta < 0 || guardset_add(t->gs, GUARD_CLASS_LACKS, ta, name, 0) < 0)
        return -1;
    PyObject **dictptr = _PyObject_GetDictPtr(obj->obj);
    if (dictptr != NULL) {
        PyObject *dn = PyUnicode_FromString("__dict__");
        int da = dn ? guardset_accessor(t->gs, ACC_OBJATTR, obj->src, 0, dn, NULL) : -1;
        Py_XDECREF(dn);
        if (da < 0 || guardset_add(t->gs, GUARD_DICT_LACKS, da, name, 0) < 0)
            return -1;
    }
    return 0;
}

/* (contract: translate_int.h) */
Value *tr_attr_missing(TFrame *f, Value *obj, PyObject *name, bool generic)
{
    Tracer *t = f->t;
    const char *tname = Py_TYPE(obj->obj)->tp_name;
    if (obj->src < 0 || !tr_missing_reaches_getattr(t)) {
        t->predicted_raise = true;      /* an AttributeError the program would get */
        return tracer_unsupported(t, false, "%s has no attribute '%U'", tname, name), NULL;
    }
    if (!generic) {
        if (guardset_add(t->gs, GUARD_HASATTR, obj->src, name, 0) < 0)
            return NULL;
    }
    else if (guard_generic_absence(t, obj, name) < 0) {
        return NULL;
    }
    return value_new(t, V_ABSENT, NULL);
}

static int guard_generic_absence(Tracer *t, Value *obj, PyObject *name);

/* m.name of a module whose class, a ModuleType subclass (torch._VF),
   keeps the module's __getattribute__ and adds a Python __getattr__: a
   name the module's lookup finds is read as any module's (not handled
   here); another runs __getattr__, inlined, with what the lookup looked
   at guarded: the class and the module's dict lack the name, and the
   dict has no __getattr__ of its own (PEP 562, which would run first). */
static Value *module_subclass_attr(TFrame *f, Value *base, PyObject *name, PyObject *getattribute_name,
                                   PyObject *getattr_name, bool *handled)
{
    PyTypeObject *tp = Py_TYPE(base->obj);
    PyObject *ga = _PyType_Lookup(tp, getattribute_name);           /* borrowed */
    PyObject *gattr = _PyType_Lookup(tp, getattr_name);             /* borrowed */
    if (ga != _PyType_Lookup(&PyModule_Type, getattribute_name) || gattr == NULL || !PyFunction_Check(gattr))
        return NULL;
    PyObject *md = PyModule_GetDict(base->obj);                     /* borrowed */
    int in_dict = md ? PyDict_Contains(md, name) : -1;
    int hook = in_dict == 0 ? PyDict_Contains(md, getattr_name) : 0;
    *handled = true;
    if (in_dict < 0 || hook < 0)
        return PyErr_Occurred() ? NULL
               : (tracer_unsupported(f->t, false, "attribute '%U' of a module without a __dict__", name), NULL);
    if (in_dict || _PyType_Lookup(tp, name) != NULL) {
        *handled = false;
        return NULL;
    }
    if (hook)
        return tracer_unsupported(f->t, false, "attribute '%U' of module %s, which has __getattr__ in its "
                                  "dict and its class", name, tp->tp_name), NULL;
    if (guard_generic_absence(f->t, base, name) < 0)
        return NULL;
    PyObject *dn = PyUnicode_FromString("__dict__");
    int da = dn ? guardset_accessor(f->t->gs, ACC_OBJATTR, base->src, 0, dn, NULL) : -1;
    Py_XDECREF(dn);
    if (da < 0 || guardset_add(f->t->gs, GUARD_DICT_LACKS, da, getattr_name, 0) < 0)
        return NULL;
    Value *key = value_new(f->t, V_CONST, name);
    Value *args[2] = {base, key};
    return key ? call_with(f, class_attr_accessor(f->t, base->src, Py_TYPE(base->obj), getattr_name), gattr, args, 2) : NULL;
}

/* (contract: translate_int.h) */
Value *tr_object_attr(TFrame *f, Value *base, PyObject *name, bool *handled)
{
    *handled = false;
    static PyObject *getattribute_name, *getattr_name;
    if (getattribute_name == NULL && (getattribute_name = PyUnicode_InternFromString("__getattribute__")) == NULL)
        return NULL;
    if (getattr_name == NULL && (getattr_name = PyUnicode_InternFromString("__getattr__")) == NULL)
        return NULL;
    if ((base->kind == V_OBJECT || base->kind == V_CONST) && base->src >= 0 && PyModule_Check(base->obj)
        && !PyModule_CheckExact(base->obj))
        return module_subclass_attr(f, base, name, getattribute_name, getattr_name, handled);
    if ((base->kind != V_OBJECT && base->kind != V_CONST) || base->src < 0 || PyType_Check(base->obj)
        || PyModule_Check(base->obj))
        return NULL;
    PyTypeObject *tp = Py_TYPE(base->obj);
    PyObject *ga = _PyType_Lookup(tp, getattribute_name);           /* borrowed */
    if (ga != NULL && PyFunction_Check(ga)) {
        /* the class's own __getattribute__, inlined: type(obj).__getattribute__(obj, name) */
        *handled = true;
        Value *key = value_new(f->t, V_CONST, name);
        Value *args[2] = {base, key};
        return key ? call_with(f, class_attr_accessor(f->t, base->src, Py_TYPE(base->obj), getattribute_name), ga, args, 2) : NULL;
    }
    PyObject *gattr = _PyType_Lookup(tp, getattr_name);              /* borrowed */
    if (gattr != NULL && PyFunction_Check(gattr) && ga == _PyType_Lookup(&PyBaseObject_Type, getattribute_name)) {
        /* a Python __getattr__ (typing's generic aliases forward to their
           origin): the generic lookup, and __getattr__ inlined for a name
           it does not find -- absent from the class and the instance dict,
           both guarded */
        *handled = true;
        PyObject **dictptr = _PyObject_GetDictPtr(base->obj);
        int in_dict = dictptr && *dictptr ? PyDict_Contains(*dictptr, name) : 0;
        if (in_dict < 0)
            return NULL;
        if (in_dict || _PyType_Lookup(tp, name) != NULL)
            return tr_generic_attr(f, base, name);
        if (guard_generic_absence(f->t, base, name) < 0)
            return NULL;
        Value *key = value_new(f->t, V_CONST, name);
        Value *args[2] = {base, key};
        return key ? call_with(f, class_attr_accessor(f->t, base->src, Py_TYPE(base->obj), getattr_name), gattr, args, 2) : NULL;
    }
    if (tp->tp_getattro != PyObject_GenericGetAttr)
        return NULL;
    PyObject *descr = _PyType_Lookup(tp, name);
    if (descr == NULL)
        return NULL;
    Value *r = property_get(f, base, name, descr, -1, handled);
    return *handled ? r : NULL;
}

/* (contract: translate_int.h) */
Value *tr_call_own_method(TFrame *f, Value *obj, const char *cname, Value **args, int nargs,
                          bool *handled)
{
    Tracer *t = f->t;
    *handled = false;
    PyObject *name = PyUnicode_InternFromString(cname);
    PyObject *fn = name ? _PyType_Lookup(Py_TYPE(obj->obj), name) : NULL;      /* borrowed */
    if (fn == NULL || !PyFunction_Check(fn) || obj->src < 0 || nargs + 1 >= MAX_STACK) {
        Py_XDECREF(name);
        return NULL;
    }
    *handled = true;
    int ta = guardset_accessor(t->gs, ACC_TYPE, obj->src, 0, NULL, NULL);
    int fa = ta < 0 ? -1 : guardset_accessor(t->gs, ACC_ATTR, ta, 0, name, NULL);
    Py_DECREF(name);
    Value *fv = fa < 0 ? NULL : value_from_source(t, fa, fn);
    return fv ? tr_call_with_self(f, fv, obj, args, nargs, NULL) : NULL;
}

/* ---- super() ---- */

/* super(cls, obj), or the zero-argument form of frame f (cls its __class__
   cell, obj its first argument) when cls is NULL.  NULL when tracing
   stops. */
Value *tr_make_super(TFrame *f, Value *cls, Value *obj)
{
    Tracer *t = f->t;
    if (cls == NULL) {
        PyCodeObject *co = f->code;
        int first_free = code_first_free(co), k = -1;
        for (int i = first_free; i < code_nlocalsplus(co); i++)
            if (PyUnicode_CompareWithASCIIString(local_name(co, i), "__class__") == 0)
                k = i;
        if (k < 0 || co->co_argcount + co->co_kwonlyargcount == 0)
            return tracer_unsupported(t, true, "super() outside a method"), NULL;
        cls = tr_load_deref(f, k);
        obj = f->locals[0] != NULL && f->locals[0]->kind == V_CELL
              ? (f->locals[0]->n > 0 ? f->locals[0]->items[0] : NULL) : tr_load_local(f, 0);
        if (cls == NULL || obj == NULL)
            return NULL;
    }
    if (obj->kind == V_NEWOBJ && cls->kind == V_CONST && PyType_Check(cls->obj)) {
        /* an object made while tracing: its class is obj->obj */
        if (!PyType_IsSubtype((PyTypeObject *)obj->obj, (PyTypeObject *)cls->obj))
            return tracer_unsupported(t, false, "super(type, obj): obj is not an instance of type"), NULL;
    }
    else if (cls->kind == V_CONST && PyType_Check(cls->obj) && (obj->kind == V_OBJECT || obj->kind == V_CONST)
             && obj->src >= 0 && PyType_Check(obj->obj) && !PyType_IsSubtype((PyTypeObject *)cls->obj, &PyType_Type)
             && PyType_IsSubtype((PyTypeObject *)obj->obj, (PyTypeObject *)cls->obj)) {
        /* super() in a classmethod: obj is the class it was called on */
        Value *s = value_new(t, V_SUPER, NULL);
        if (s == NULL || value_append(t, s, cls) < 0 || value_append(t, s, obj) < 0)
            return NULL;
        s->pos = 1;
        return s;
    }
    else if (cls->kind != V_CONST || !PyType_Check(cls->obj) || (obj->kind != V_OBJECT && obj->kind != V_CONST)
        || obj->src < 0
        || (PyType_Check(obj->obj) && !PyType_IsSubtype((PyTypeObject *)cls->obj, &PyType_Type)))
        return tracer_unsupported(t, false, "super() of these values"), NULL;   /* (a class: in its metaclass) */
    else if (!PyObject_TypeCheck(obj->obj, (PyTypeObject *)cls->obj))
        return tracer_unsupported(t, false, "super(type, obj): obj is not an instance of type"), NULL;
    Value *s = value_new(t, V_SUPER, NULL);
    if (s == NULL || value_append(t, s, cls) < 0 || value_append(t, s, obj) < 0)
        return NULL;
    return s;
}

/* super(cls, obj).name: the first class after cls in type(obj).__mro__
   whose __dict__ has name -- a Python function (bound to obj), a property
   (its getter inlined), object.__getattribute__ (the generic lookup).
   NULL when tracing stops. */
/* The first class after cls in mro whose __dict__ has name: that value
   (borrowed: the class's dict holds it), its class's index in *at.  NULL
   when none has it, or with an exception. */
static PyObject *mro_find_after(PyObject *mro, PyObject *cls, PyObject *name, Py_ssize_t *at)
{
    Py_ssize_t n = mro ? PyTuple_GET_SIZE(mro) : 0, i = 0;
    while (i < n && PyTuple_GET_ITEM(mro, i) != cls)
        i++;
    for (i++; i < n; i++) {
        PyObject *dict = type_dict_ref((PyTypeObject *)PyTuple_GET_ITEM(mro, i));
        PyObject *attr = dict ? PyDict_GetItemWithError(dict, name) : NULL;
        Py_XDECREF(dict);
        if (attr != NULL || PyErr_Occurred()) {
            *at = i;
            return attr;
        }
    }
    return NULL;
}

/* super().name in a classmethod (sup->pos 1: sup->items[1] is the class it
   was called on): the first class after cls in that class's __mro__ whose
   __dict__ has name, a classmethod of a Python function, bound to the
   class -- read as klass.__mro__[i].name.__func__, klass guarded by
   identity.  NULL when tracing stops. */
static Value *super_attr_of_class(TFrame *f, Value *sup, PyObject *name)
{
    Tracer *t = f->t;
    Value *obj = sup->items[1];
    PyObject *mro = ((PyTypeObject *)obj->obj)->tp_mro;     /* borrowed */
    Py_ssize_t i;
    PyObject *attr = mro_find_after(mro, sup->items[0]->obj, name, &i);
    if (attr != NULL) {
        PyObject *klass = PyTuple_GET_ITEM(mro, i);
        if (tr_is_autograd_apply(attr))
            /* torch.autograd.Function.apply, the C classmethod (torch 2.14),
               of a class in C: tr_call_bound inlines Fn.forward */
            return tr_bound_builtin(t, attr, obj);
        PyObject *func = Py_IS_TYPE(attr, &PyClassMethod_Type) ? PyObject_GetAttrString(attr, "__func__") : NULL;
        PyErr_Clear();
        if (func == NULL || !PyFunction_Check(func)) {
            Py_XDECREF(func);
            return tracer_unsupported(t, false, "super().%U in a classmethod: a %s", name,
                                      Py_TYPE(attr)->tp_name), NULL;
        }
        Py_DECREF(func);           /* the classmethod holds it */
        PyObject *mro_name = PyUnicode_FromString("__mro__");
        PyObject *func_name = mro_name ? PyUnicode_FromString("__func__") : NULL;
        int ma = func_name ? guardset_accessor(t->gs, ACC_ATTR, obj->src, 0, mro_name, NULL) : -1;
        int ka = ma < 0 ? -1 : guardset_accessor(t->gs, ACC_ITEM, ma, i, NULL, NULL);
        int ba = ka < 0 || guardset_add(t->gs, GUARD_ID_MATCH, ka, klass, 0) < 0 ? -1
                 : guardset_accessor(t->gs, ACC_ATTR, ka, 0, name, NULL);
        int fa = ba < 0 ? -1 : guardset_accessor(t->gs, ACC_ATTR, ba, 0, func_name, NULL);
        Py_XDECREF(mro_name);
        Py_XDECREF(func_name);
        return fa < 0 ? NULL : bind_function(f, fa, func, obj);
    }
    if (PyErr_Occurred())
        return NULL;
    return tracer_unsupported(t, false, "super().%U in a classmethod: no class after %s has it", name,
                              ((PyTypeObject *)sup->items[0]->obj)->tp_name), NULL;
}

Value *tr_super_attr(TFrame *f, Value *sup, PyObject *name)
{
    Tracer *t = f->t;
    Value *obj = sup->items[1];
    if (sup->pos == 1)
        return super_attr_of_class(f, sup, name);
    bool made = obj->kind == V_NEWOBJ;     /* made while tracing: obj->obj is its class */
    PyObject *mro = (made ? (PyTypeObject *)obj->obj : Py_TYPE(obj->obj))->tp_mro;   /* borrowed */
    Py_ssize_t i;
    PyObject *attr = mro_find_after(mro, sup->items[0]->obj, name, &i);
    if (attr != NULL) {
        PyObject *klass = PyTuple_GET_ITEM(mro, i);
        if (made && !(((PyTypeObject *)klass)->tp_flags & Py_TPFLAGS_HEAPTYPE)
            && (Py_IS_TYPE(attr, &PyWrapperDescr_Type) || Py_IS_TYPE(attr, &PyMethodDescr_Type))) {
            /* object.__setattr__, dict.__setitem__, ... of an object made
               while tracing (tr_newobj_call_builtin); its class is guarded
               by identity, and with it its MRO */
            return tr_bound_builtin(t, attr, obj);
        }
        if (made) {
            /* a Python function of a class in the MRO: C.__mro__[i].name */
            if (!PyFunction_Check(attr))
                return tracer_unsupported(t, false, "super().%U of a new %s: a %s", name,
                                          ((PyTypeObject *)obj->obj)->tp_name, Py_TYPE(attr)->tp_name), NULL;
            PyObject *mro_name = PyUnicode_FromString("__mro__");
            int ma = mro_name == NULL ? -1 : guardset_accessor(t->gs, ACC_ATTR, obj->items[1]->src, 0,
                                                               mro_name, NULL);
            Py_XDECREF(mro_name);
            int ka = ma < 0 ? -1 : guardset_accessor(t->gs, ACC_ITEM, ma, i, NULL, NULL);
            if (ka < 0 || guardset_add(t->gs, GUARD_ID_MATCH, ka, klass, 0) < 0)
                return NULL;
            return bind_function(f, guardset_accessor(t->gs, ACC_ATTR, ka, 0, name, NULL), attr, obj);
        }
        if (klass == (PyObject *)&PyBaseObject_Type
            && PyUnicode_CompareWithASCIIString(name, "__getattribute__") == 0) {
            return tr_bound_builtin(t, attr, obj);
        }
        /* type(obj).__mro__[i].name: what was found, guarded by identity */
        PyObject *mro_name = PyUnicode_FromString("__mro__");
        int ta = guardset_accessor(t->gs, ACC_TYPE, obj->src, 0, NULL, NULL);
        int ma = ta < 0 || mro_name == NULL ? -1 : guardset_accessor(t->gs, ACC_ATTR, ta, 0, mro_name, NULL);
        Py_XDECREF(mro_name);
        int ka = ma < 0 ? -1 : guardset_accessor(t->gs, ACC_ITEM, ma, i, NULL, NULL);
        if (ka < 0)
            return NULL;
        if (guardset_add(t->gs, GUARD_ID_MATCH, ka, klass, 0) < 0)
            return NULL;
        int fa = guardset_accessor(t->gs, ACC_ATTR, ka, 0, name, NULL);
        if (PyFunction_Check(attr))
            return bind_function(f, fa, attr, obj);
        bool own_store = Py_IS_TYPE(attr, &PyWrapperDescr_Type)
                         && ((klass == (PyObject *)&PyBaseObject_Type
                              && PyUnicode_CompareWithASCIIString(name, "__setattr__") == 0)
                             || ((klass == (PyObject *)&PyDict_Type || klass == (PyObject *)&PyODict_Type)
                                 && PyUnicode_CompareWithASCIIString(name, "__setitem__") == 0));
        if (klass == (PyObject *)&PyType_Type && Py_IS_TYPE(attr, &PyMethodDescr_Type)
            && PyUnicode_CompareWithASCIIString(name, "__instancecheck__") == 0)
            own_store = true;        /* (not a store: type's instance check, by type) */
        if (own_store) {
            /* object.__setattr__, dict's or OrderedDict's __setitem__: what a
               class's own __setattr__ / __setitem__ ends in (tr_call_bound
               records the write) */
            return tr_bound_builtin(t, attr, obj);
        }
        if (klass == (PyObject *)&PyDict_Type && Py_IS_TYPE(attr, &PyMethodDescr_Type)
            && (PyUnicode_CompareWithASCIIString(name, "get") == 0
                || PyUnicode_CompareWithASCIIString(name, "__getitem__") == 0
                || PyUnicode_CompareWithASCIIString(name, "__contains__") == 0)) {
            /* dict.get(self, key) of a dict subclass: its storage, read
               through accessors (tr_call_bound) */
            return tr_bound_builtin(t, attr, obj);
        }
        bool handled;
        Value *r = property_get(f, obj, name, attr, fa, &handled);
        if (handled || PyErr_Occurred())
            return r;
        if (value_is_plain_constant(attr))
            return fa < 0 ? NULL : value_from_source(t, fa, attr);
        return tracer_unsupported(t, false, "super().%U: a %s", name, Py_TYPE(attr)->tp_name), NULL;
    }
    if (PyErr_Occurred())
        return NULL;
    return tracer_unsupported(t, false, "super() has no attribute '%U'", name), NULL;
}

/* (contract: translate_int.h) */
Value *tr_dict_method_of_subclass(TFrame *f, PyObject *meth, Value *self, Value **args,
                                  int nargs, PyObject *kwnames)
{
    Tracer *t = f->t;
    const char *name = ((PyMethodDescrObject *)meth)->d_method->ml_name;
    bool get = strcmp(name, "get") == 0;
    if ((kwnames && PyTuple_GET_SIZE(kwnames) > 0) || nargs < 1 || nargs > (get ? 2 : 1)
        || !foldable(args[0]) || self->src < 0 || !PyDict_Check(self->obj))
        return tracer_unsupported(t, false, "dict.%s() of a dict subclass with these arguments",
                                  name), NULL;
    if (tr_note_dictsub_read(t, self) < 0)
        return NULL;
    PyObject *key = args[0]->obj;
    PyObject *item = PyDict_GetItemWithError(self->obj, key);              /* borrowed */
    if (item == NULL && PyErr_Occurred())
        return NULL;
    if (item == NULL) {
        if (guardset_add(t->gs, GUARD_DICT_LACKS, self->src, key, 0) < 0)
            return NULL;
        if (strcmp(name, "__contains__") == 0)
            return new_const(t, Py_NewRef(Py_False));
        if (!get)
            return tracer_unsupported(t, false, "a missing key of a dict subclass (KeyError)"), NULL;
        return nargs == 2 ? args[1] : value_new(t, V_CONST, Py_None);
    }
    int acc = guardset_accessor(t->gs, ACC_DICT_ITEM, self->src, 0, key, NULL);
    Value *v = acc < 0 ? NULL : value_from_source(t, acc, item);   /* guards the item: present */
    if (v == NULL || strcmp(name, "__contains__") != 0)
        return v;
    return new_const(t, Py_NewRef(Py_True));
}

/* (contract: translate_int.h) */
Value *tr_call_bound(TFrame *f, Value *bound, Value **args, int nargs, PyObject *kwnames)
{
    Tracer *t = f->t;
    Value *fn = bound->items[0], *self = bound->items[1];
    if (fn->obj != NULL && tr_is_autograd_apply(fn->obj) && self->src >= 0 && PyType_Check(self->obj))
        return tr_autograd_apply(f, self, args, nargs, kwnames);    /* super().apply(...) in Fn.apply */
    if (self->kind == V_NEWOBJ && fn->kind == V_CONST
        && (Py_IS_TYPE(fn->obj, &PyWrapperDescr_Type) || Py_IS_TYPE(fn->obj, &PyMethodDescr_Type)))
        return tr_newobj_call_builtin(f, self, fn->obj, args, nargs, kwnames);
    if (fn->kind == V_CONST && Py_IS_TYPE(fn->obj, &PyWrapperDescr_Type)) {
        const char *slot = ((PyWrapperDescrObject *)fn->obj)->d_base->name;
        bool plain = !kwnames || PyTuple_GET_SIZE(kwnames) == 0;
        if (strcmp(slot, "__setattr__") == 0) {
            /* object.__setattr__(self, name, value) bound by super() */
            if (nargs != 2 || !plain || args[0]->kind != V_CONST || !PyUnicode_CheckExact(args[0]->obj))
                return tracer_unsupported(t, false, "object.__setattr__ of a name that is not a "
                                          "constant"), NULL;
            return tr_visible_generic_set_attr(f, self, args[0]->obj, args[1]) < 0 ? NULL
                   : new_const(t, Py_NewRef(Py_None));
        }
        if (strcmp(slot, "__setitem__") == 0) {
            /* dict's / OrderedDict's __setitem__(self, key, value) bound by super() */
            if (nargs != 2 || !plain || !foldable(args[0]))
                return tracer_unsupported(t, false, "dict.__setitem__ of a key that is not a "
                                          "constant"), NULL;
            return tr_visible_dict_set_item(f, self, args[0]->obj, args[1]) < 0 ? NULL
                   : new_const(t, Py_NewRef(Py_None));
        }
        /* object.__getattribute__ bound by super(): the generic lookup */
        if (nargs != 1 || (kwnames && PyTuple_GET_SIZE(kwnames) > 0) || args[0]->kind != V_CONST
            || !PyUnicode_CheckExact(args[0]->obj))
            return tracer_unsupported(t, false, "object.__getattribute__ of a name that is not a constant"), NULL;
        return tr_generic_attr(f, self, args[0]->obj);
    }
    if (fn->kind == V_CONST && Py_IS_TYPE(fn->obj, &PyMethodDescr_Type)
        && PyDescr_TYPE(fn->obj) == &PyType_Type) {
        /* type.__instancecheck__(self, x) bound by super() in a metaclass */
        if (nargs != 1 || (kwnames && PyTuple_GET_SIZE(kwnames) > 0))
            return tracer_unsupported(t, false, "type.__instancecheck__ with these arguments"), NULL;
        return tr_isinstance_by_type(f, args[0], self->obj);
    }
    if (fn->kind == V_CONST && Py_IS_TYPE(fn->obj, &PyMethodDescr_Type))
        return tr_dict_method_of_subclass(f, fn->obj, self, args, nargs, kwnames);
    if (nargs + 1 >= MAX_STACK)
        return tracer_unsupported(t, false, "a call with more than %d arguments", MAX_STACK), NULL;
    Value *full[MAX_STACK];
    full[0] = self;
    for (int i = 0; i < nargs; i++)
        full[i + 1] = args[i];
    return tr_call_or_undo(f, fn, full, nargs + 1, kwnames);
}

/* (contract: translate_int.h) */
Value *tr_attr_through_accessor(Tracer *t, Value *o, const char *cname)
{
    PyObject *name = PyUnicode_InternFromString(cname);
    PyObject *obj = name ? PyObject_GetAttr(o->obj, name) : NULL;
    int acc = obj ? guardset_accessor(t->gs, ACC_ATTR, o->src, 0, name, NULL) : -1;
    Value *v = acc < 0 ? NULL : value_from_source(t, acc, obj);
    Py_XDECREF(obj);
    Py_XDECREF(name);
    return v;
}

/* ---- functools.lru_cache wrappers, and functions whose result is marked
   constant ---- */

/* (contract: translate_int.h) */
bool tr_is_lru_wrapper(Value *v)
{
    return v->kind == V_OBJECT && v->src >= 0
           && strcmp(Py_TYPE(v->obj)->tp_name, "functools._lru_cache_wrapper") == 0;
}

/* (contract: translate_int.h)  The marker torch._dynamo.assume_constant_result
   sets (transformers sets it on its install probes without importing torch). */
bool tr_is_marked_constant(PyObject *fn)
{
    if (!PyFunction_Check(fn))
        return false;
    PyObject *mark = PyObject_GetAttrString(fn, "_dynamo_marked_constant");
    bool r = mark == Py_True;
    Py_XDECREF(mark);
    PyErr_Clear();
    return r;
}

/* (contract: translate_int.h) */
Value *tr_call_marked_constant(TFrame *f, PyObject *fn, Value **args, int nargs, PyObject *kwnames)
{
    Tracer *t = f->t;
    int nkw = kwnames ? (int)PyTuple_GET_SIZE(kwnames) : 0;
    for (int i = 0; i < nargs; i++)
        if (!foldable(args[i]))
            return tracer_unsupported(t, false, "a call of %S, whose result is a constant, "
                                      "with arguments that are not constants", fn), NULL;
    PyObject *pos = PyTuple_New(nargs - nkw), *kw = nkw ? PyDict_New() : NULL, *r = NULL;
    int rc = pos == NULL || (nkw && kw == NULL) ? -1 : 0;
    for (int i = 0; rc == 0 && i < nargs; i++) {
        if (i < nargs - nkw)
            PyTuple_SET_ITEM(pos, i, Py_NewRef(args[i]->obj));
        else
            rc = PyDict_SetItem(kw, PyTuple_GET_ITEM(kwnames, i - (nargs - nkw)), args[i]->obj);
    }
    if (rc == 0)
        r = PyObject_Call(fn, pos, kw);   /* once, here: the graph holds its result */
    Py_XDECREF(pos);
    Py_XDECREF(kw);
    if (r == NULL && PyErr_ExceptionMatches(PyExc_Exception)) {
        PyErr_Clear();
        return tracer_break(t, STOP_CALL, "call of %S, whose result is a constant, raises", fn), NULL;
    }
    if (r != NULL && !value_is_plain_constant(r)) {
        Py_DECREF(r);
        return tracer_unsupported(t, false, "a call of %S, whose result is marked constant, "
                                  "returned a value that is not a constant", fn), NULL;
    }
    return r ? new_const(t, r) : NULL;
}

/* (contract: translate_int.h) */
Value *tr_call_lru_wrapper(TFrame *f, Value *w, Value **args, int nargs, PyObject *kwnames)
{
    Tracer *t = f->t;
    Value *fn = tr_attr_through_accessor(t, w, "__wrapped__");
    if (fn == NULL)
        return NULL;
    if (fn->kind == V_CONST && tr_is_marked_constant(fn->obj))
        return tr_call_marked_constant(f, w->obj, args, nargs, kwnames);   /* its cache answers */
    /* Any other: the program may read the cache's statistics (cache_info())
       or empty it, which a graph that skips the call would not keep. */
    return tracer_break(t, STOP_CALL, "call of a functools.lru_cache wrapper (its cache and "
                        "statistics are the program's; a function marked with "
                        "torch._dynamo.assume_constant_result is folded)"), NULL;
}

/* (contract: translate_int.h) */
Value *tr_call_held_object(TFrame *f, Value *callable, Value **args, int nargs, PyObject *kwnames,
                           bool *handled)
{
    *handled = true;
    if (callable->kind == V_NEWOBJ)
        return tr_newobj_call(f, callable, args, nargs, kwnames);
    if (callable->kind == V_PARTIAL || tr_is_partial(callable))
        return tr_call_partial(f, callable, args, nargs, kwnames);
    if (tr_is_lru_wrapper(callable))
        return tr_call_lru_wrapper(f, callable, args, nargs, kwnames);
    if (callable->kind != V_CONST && callable->obj != NULL && tensorops_is_library_op_type(callable->obj))
        return tracer_break(f->t, STOP_CALL, "call of torch.ops %S, which writes an input, draws "
                            "random numbers or makes sizes from data (by its schema and tags)",
                            callable->obj), NULL;
    *handled = false;
    return NULL;
}
