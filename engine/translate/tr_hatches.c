/*
 * tr_hatches.c -- the escape hatches (dynscope/hatches.py, issue 40): marks
 * a user puts on a function so that the translator treats its calls another
 * way, and the code objects the hook keeps out.
 *
 *   disable                 a call is a break; the frame (and with recursive,
 *                           everything it calls) runs without capture
 *   allow_in_graph          a call is one opaque graph node
 *   substitute_in_graph     a call traces the replacement instead
 *
 * (assume_constant_result is torch's attribute, read by tr_objects.c.)
 * torch's own marks -- torch.compiler.disable (the `_torchdynamo_disable`
 * attribute of the wrapper it returns), allow_in_graph (Dynamo's id set)
 * and substitute_in_graph (Dynamo's polyfill handlers) -- are read the
 * first time the translator meets the callable and registered here as if
 * dynscope had made them.  Of the substitutes, those torch registers for
 * itself (replacements in torch's own modules: itertools, operator, ...)
 * are left out: the translator follows those calls itself, and capture
 * would otherwise depend on whether torch._dynamo was imported.
 *
 * Invariants: marked_functions maps a callable (strong key) to (kind: int,
 * rule: str, extra) -- extra is the key of the replacement in
 * dynscope.hatches._substitutes for a substitute, else None; marked_codes
 * maps a code object (strong key) to (rule: str, recursive: bool).  Marks
 * are never removed: reset() keeps them, as torch keeps its own.
 * hatch_generation grows with each new code mark, so that the hook
 * classifies again a code it saw before.  GIL.
 */
#include "translate_int.h"

uint32_t hatch_generation = 1;

static PyObject *marked_functions;   /* strong dict, see above */
static PyObject *marked_codes;       /* strong dict, see above */

/* Mark code co: rule (borrowed) keeps its frames out; recursive: and
   everything they call.  0 or -1 with an exception. */
static int mark_code(PyObject *co, PyObject *rule, bool recursive)
{
    PyObject *v = Py_BuildValue("(OO)", rule, recursive ? Py_True : Py_False);
    PyObject *had = v ? PyDict_GetItemWithError(marked_codes, co) : NULL;   /* borrowed */
    int same = had ? PyObject_RichCompareBool(had, v, Py_EQ) : 0;
    int rc = v == NULL || same < 0 ? -1 : same ? 0 : PyDict_SetItem(marked_codes, co, v);
    Py_XDECREF(v);
    if (rc == 0 && !same)
        hatch_generation++;
    return rc;
}

/* Mark callable fn with kind, rule (borrowed) and extra (borrowed or NULL).
   0 or -1 with an exception. */
static int mark_function(PyObject *fn, HatchKind kind, PyObject *rule, PyObject *extra)
{
    PyObject *v = Py_BuildValue("(iOO)", (int)kind, rule, extra ? extra : Py_None);
    int rc = v ? PyDict_SetItem(marked_functions, fn, v) : -1;
    Py_XDECREF(v);
    return rc;
}

/* (contract: translator.h) */
PyObject *hatch_code_rule(PyCodeObject *co, bool *recursive)
{
    *recursive = false;
    if (marked_codes == NULL || PyDict_GET_SIZE(marked_codes) == 0)
        return NULL;
    PyObject *v = PyDict_GetItemWithError(marked_codes, (PyObject *)co);   /* borrowed */
    if (v == NULL) {
        PyErr_Clear();
        return NULL;
    }
    *recursive = PyTuple_GET_ITEM(v, 1) == Py_True;
    return PyTuple_GET_ITEM(v, 0);
}

/* The item `name` of function fn's own __dict__ (borrowed), or NULL. */
static PyObject *function_dict_item(PyObject *fn, const char *name)
{
    PyObject *d = ((PyFunctionObject *)fn)->func_dict;
    if (d == NULL)
        return NULL;
    PyObject *v = PyDict_GetItemString(d, name);
    PyErr_Clear();
    return v;
}

/* torch's disable mark on function fn, registered as dynscope's: the
   recursive wrapper's code runs its callees without capture, the
   non-recursive one's original function is kept out alone.  1 when fn
   carries the mark, 0 when not, -1 with an exception. */
static int learn_torch_disable(PyObject *fn)
{
    if (function_dict_item(fn, "_torchdynamo_disable") != Py_True)
        return 0;
    bool recursive = function_dict_item(fn, "_torchdynamo_disable_recursive") != Py_False;
    PyObject *msg = function_dict_item(fn, "_torchdynamo_disable_msg");
    PyObject *orig = function_dict_item(fn, "_torchdynamo_orig_callable");
    PyObject *rule = msg != NULL && PyUnicode_Check(msg)
                     ? PyUnicode_FromFormat("torch.compiler.disable%s (%U)",
                                            recursive ? "" : "(recursive=False)", msg)
                     : PyUnicode_FromFormat("torch.compiler.disable%s",
                                            recursive ? "" : "(recursive=False)");
    if (rule == NULL)
        return -1;
    int rc = mark_function(fn, HATCH_DISABLE, rule, NULL);
    if (rc == 0 && recursive) {
        /* the wrapper's code, which every such wrapper shares */
        PyObject *wrapper_rule = PyUnicode_FromString("torch.compiler.disable");
        rc = wrapper_rule ? mark_code(PyFunction_GET_CODE(fn), wrapper_rule, true) : -1;
        Py_XDECREF(wrapper_rule);
    }
    else if (rc == 0 && orig != NULL && PyFunction_Check(orig)) {
        rc = mark_code(PyFunction_GET_CODE(orig), rule, false);
    }
    Py_DECREF(rule);
    return rc < 0 ? -1 : 1;
}

/* torch.compiler.allow_in_graph's mark on Python function fn (Dynamo keeps
   the ids it marked: torch._dynamo.trace_rules.is_callable_allowed, asked
   only once that module is imported), registered as dynscope's.  1 when
   fn carries it, 0 when not (or anything about asking fails). */
static int learn_torch_allow(PyObject *fn)
{
    PyObject *name = PyUnicode_FromString("torch._dynamo.trace_rules");
    PyObject *rules = name ? PyImport_GetModule(name) : NULL;
    PyObject *ask = rules ? PyObject_GetAttrString(rules, "is_callable_allowed") : NULL;
    PyObject *r = ask ? PyObject_CallOneArg(ask, fn) : NULL;
    int marked = r == Py_True;
    Py_XDECREF(name);
    Py_XDECREF(rules);
    Py_XDECREF(ask);
    Py_XDECREF(r);
    PyErr_Clear();
    if (!marked)
        return 0;
    PyObject *rule = PyUnicode_FromString("torch.compiler.allow_in_graph");
    int rc = rule ? mark_function(fn, HATCH_ALLOW_IN_GRAPH, rule, NULL) : -1;
    Py_XDECREF(rule);
    if (rc < 0)
        PyErr_Clear();
    return rc == 0;
}

/* Dynamo's polyfill handlers (PolyfilledFunctionVariable's dict: the
   original callable -> a wrapper whose __torch_dynamo_polyfill__ is the
   replacement), once torch._dynamo.variables.functions is imported: strong,
   or NULL until then. */
static PyObject *torch_polyfills;

static PyObject *torch_polyfill_handlers(void)
{
    if (torch_polyfills != NULL)
        return torch_polyfills;
    static PyObject *modname;
    if (modname == NULL && (modname = PyUnicode_InternFromString("torch._dynamo.variables.functions")) == NULL)
        return NULL;
    PyObject *mod = PyImport_GetModule(modname);
    PyObject *cls = mod ? PyObject_GetAttrString(mod, "PolyfilledFunctionVariable") : NULL;
    PyObject *d = cls ? PyObject_CallMethod(cls, "_get_polyfill_handlers", NULL) : NULL;
    if (d != NULL && PyDict_Check(d))
        torch_polyfills = Py_NewRef(d);
    Py_XDECREF(mod);
    Py_XDECREF(cls);
    Py_XDECREF(d);
    PyErr_Clear();
    return torch_polyfills;
}

/* torch.compiler.substitute_in_graph's registration of callable fn, for a
   replacement outside torch, registered as dynscope's
   (dynscope.hatches._learn_torch_substitute).  1 when registered, 0 when
   not (or anything about asking fails). */
static int learn_torch_substitute(PyObject *fn)
{
    PyObject *handlers = torch_polyfill_handlers();   /* borrowed */
    PyObject *wrapped = handlers ? PyDict_GetItemWithError(handlers, fn) : NULL;   /* borrowed */
    if (wrapped == NULL) {
        PyErr_Clear();                       /* an unhashable callable: never registered */
        return 0;
    }
    PyObject *repl = PyObject_GetAttrString(wrapped, "__torch_dynamo_polyfill__");
    PyObject *modname = repl && PyFunction_Check(repl) ? ((PyFunctionObject *)repl)->func_module : NULL;
    const char *m = modname && PyUnicode_Check(modname) ? PyUnicode_AsUTF8(modname) : NULL;
    bool torchs_own = m == NULL || strcmp(m, "torch") == 0 || strncmp(m, "torch.", 6) == 0;
    int rc = 0;
    if (!torchs_own) {
        PyObject *hatches = PyImport_ImportModule("dynscope.hatches");
        PyObject *r = hatches ? PyObject_CallMethod(hatches, "_learn_torch_substitute", "OO", fn, repl) : NULL;
        rc = r != NULL;
        Py_XDECREF(r);
        Py_XDECREF(hatches);
    }
    Py_XDECREF(repl);
    PyErr_Clear();
    return rc;
}

/* (contract: translate_int.h) */
HatchKind tr_hatch_of(PyObject *fn, PyObject **rule, PyObject **extra)
{
    *rule = *extra = NULL;
    if (marked_functions == NULL)
        return HATCH_NONE;
    PyObject *v = PyDict_Size(marked_functions) ? PyDict_GetItemWithError(marked_functions, fn) : NULL;
    if (v == NULL && PyErr_Occurred())
        PyErr_Clear();                       /* an unhashable callable: never marked */
    if (v == NULL && PyFunction_Check(fn)) {
        int learnt = learn_torch_disable(fn);
        if (learnt < 0)
            PyErr_Clear();
        if (learnt == 0)
            learnt = learn_torch_allow(fn);
        if (learnt == 1)
            v = PyDict_GetItemWithError(marked_functions, fn);
    }
    if (v == NULL && !PyErr_Occurred() && learn_torch_substitute(fn) == 1)
        v = PyDict_GetItemWithError(marked_functions, fn);
    if (v == NULL) {
        PyErr_Clear();
        return HATCH_NONE;
    }
    *rule = PyTuple_GET_ITEM(v, 1);
    *extra = PyTuple_GET_ITEM(v, 2);
    return (HatchKind)PyLong_AsLong(PyTuple_GET_ITEM(v, 0));
}

/* The name a break or a node gives fn: its __qualname__, else its repr.
   New str or NULL. */
static PyObject *callable_name(PyObject *fn)
{
    PyObject *name = PyObject_GetAttrString(fn, "__qualname__");
    if (name != NULL && PyUnicode_Check(name))
        return name;
    Py_XDECREF(name);
    PyErr_Clear();
    return PyObject_Repr(fn);
}

/* A call of the substitute of `callable`: the replacement, reached as
   sys.modules['dynscope.hatches']._substitutes[key] (guarded, so that a
   new replacement recompiles), traced in its place. */
static Value *call_substitute(TFrame *f, PyObject *key, Value **args, int nargs, PyObject *kwnames)
{
    Tracer *t = f->t;
    PyObject *modname = PyUnicode_FromString("dynscope.hatches");
    PyObject *attr = PyUnicode_FromString("_substitutes");
    PyObject *mod = modname ? PyImport_GetModule(modname) : NULL;
    PyObject *table = mod ? PyObject_GetAttr(mod, attr) : NULL;
    PyObject *repl = table && PyDict_Check(table) ? PyDict_GetItemWithError(table, key) : NULL;
    Value *r = NULL;
    if (repl != NULL) {
        int ma = guardset_accessor(t->gs, ACC_MODULE, -1, 0, modname, NULL);
        int ta = ma < 0 ? -1 : guardset_accessor(t->gs, ACC_ATTR, ma, 0, attr, NULL);
        int ra = ta < 0 ? -1 : guardset_accessor(t->gs, ACC_DICT_ITEM, ta, 0, key, NULL);
        Value *rv = ra < 0 ? NULL : value_from_source(t, ra, repl);
        r = rv ? tr_call_or_undo(f, rv, args, nargs, kwnames) : NULL;
    }
    else if (!PyErr_Occurred()) {
        tracer_unsupported(t, false, "a substitute_in_graph replacement that is gone");
    }
    Py_XDECREF(modname);
    Py_XDECREF(attr);
    Py_XDECREF(mod);
    Py_XDECREF(table);
    return r;
}

/* Note what a hatch kept in (Tracer.hatches, the plan's comment lines),
   once per text.  Steals note.  0, or -1 with an exception. */
static int note_hatch(Tracer *t, PyObject *note)
{
    if (note == NULL || (t->hatches == NULL && (t->hatches = PyList_New(0)) == NULL)) {
        Py_XDECREF(note);
        return -1;
    }
    int seen = PySequence_Contains(t->hatches, note);
    int rc = seen < 0 ? -1 : seen ? 0 : PyList_Append(t->hatches, note);
    Py_DECREF(note);
    return rc;
}

/* (contract: translate_int.h) */
Value *tr_call_marked(TFrame *f, Value *callable, HatchKind kind, PyObject *rule, PyObject *extra,
                      Value **args, int nargs, PyObject *kwnames)
{
    Tracer *t = f->t;
    PyObject *fn = callable->obj;
    PyObject *name = callable_name(fn);
    if (name == NULL)
        return NULL;
    Value *r = NULL;
    /* allow_in_graph's node and a substitute are this object's: guard it */
    if (kind != HATCH_DISABLE && callable->src >= 0
        && guardset_add(t->gs, GUARD_ID_MATCH, callable->src, fn, 0) < 0)
        goto out;
    if (kind == HATCH_DISABLE) {
        tracer_break(t, STOP_CALL, "call to %U, marked %U: it runs without capture", name, rule);
    }
    else if (kind == HATCH_ALLOW_IN_GRAPH) {
        const char *hint = PyUnicode_AsUTF8(name);
        r = hint ? tensorops_call(t, NODE_CALL_FUNCTION, fn, hint, args, nargs, kwnames) : NULL;
        if (r != NULL && note_hatch(t, PyUnicode_FromFormat("%U: %U is one graph node", rule, name)) < 0)
            r = NULL;
    }
    else if (kind == HATCH_SUBSTITUTE) {
        r = call_substitute(f, extra, args, nargs, kwnames);
        if (r != NULL && note_hatch(t, PyUnicode_FromFormat("%U traced in place of %U", rule, name)) < 0)
            r = NULL;
    }
out:
    Py_DECREF(name);
    return r;
}

/* _C.hatch_mark(kind, fn, rule, extra=None): register a mark (see the
   invariants; dynscope/hatches.py checks the arguments first).  kind:
   "disable" (fn a wrapper whose code runs its callees without capture),
   "disable_frame" (fn's own code kept out), "allow_in_graph", "substitute"
   (extra: the replacement's key). */
static PyObject *py_hatch_mark(PyObject *self, PyObject *args)
{
    (void)self;
    const char *kind;
    PyObject *fn, *rule, *extra = Py_None;
    if (!PyArg_ParseTuple(args, "sOU|O:hatch_mark", &kind, &fn, &rule, &extra))
        return NULL;
    int rc;
    if (strcmp(kind, "disable") == 0 || strcmp(kind, "disable_frame") == 0) {
        if (!PyFunction_Check(fn))
            return PyErr_Format(PyExc_TypeError, "hatch_mark: %s needs a function", kind);
        bool recursive = kind[7] == '\0';
        /* a recursive wrapper's code is every such wrapper's: a rule of its own */
        PyObject *code_rule = recursive ? PyUnicode_FromString("dynscope.disable") : Py_NewRef(rule);
        rc = code_rule ? mark_code(PyFunction_GET_CODE(fn), code_rule, recursive) : -1;
        Py_XDECREF(code_rule);
        if (rc == 0)
            rc = mark_function(fn, HATCH_DISABLE, rule, NULL);
    }
    else if (strcmp(kind, "allow_in_graph") == 0) {
        rc = mark_function(fn, HATCH_ALLOW_IN_GRAPH, rule, NULL);
    }
    else if (strcmp(kind, "substitute") == 0) {
        if (!PyUnicode_Check(extra))
            return PyErr_Format(PyExc_TypeError, "hatch_mark: a substitute's key is a str");
        rc = mark_function(fn, HATCH_SUBSTITUTE, rule, extra);
    }
    else {
        return PyErr_Format(PyExc_ValueError, "hatch_mark: unknown kind %s", kind);
    }
    if (rc < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* _C.hatch_marks(): [(callable, rule)] of every mark, for explain and the
   report. */
static PyObject *py_hatch_marks(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    PyObject *out = PyList_New(0);
    PyObject *key, *v;
    Py_ssize_t pos = 0;
    while (out != NULL && PyDict_Next(marked_functions, &pos, &key, &v)) {
        PyObject *item = PyTuple_Pack(2, key, PyTuple_GET_ITEM(v, 1));
        if (item == NULL || PyList_Append(out, item) < 0)
            Py_CLEAR(out);
        Py_XDECREF(item);
    }
    return out;
}

static PyMethodDef hatch_methods[] = {
    {"hatch_mark", py_hatch_mark, METH_VARARGS,
     "hatch_mark(kind, fn, rule, extra=None)\n--\n\nRegister an escape hatch (dynscope.hatches)."},
    {"hatch_marks", py_hatch_marks, METH_NOARGS,
     "hatch_marks()\n--\n\n[(callable, rule)] of every escape hatch."},
    {NULL, NULL, 0, NULL},
};

/* (contract: translator.h) */
int hatch_init(PyObject *module)
{
    marked_functions = PyDict_New();
    marked_codes = PyDict_New();
    if (marked_functions == NULL || marked_codes == NULL)
        return -1;
    return PyModule_AddFunctions(module, hatch_methods);
}
