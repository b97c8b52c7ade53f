/*
 * guard_render.c -- guards and guard failures as Python-like text
 * ("L['x'].shape == (3, 4)", observed "(5, 4)"), accessors as sources
 * ("G['np'].abs"), and GuardInfo, the read-only view of a guard that
 * cache_entries() and explain expose.  Contract: guards.h.
 *
 * Runs on misses and for inspection only, never on a hit.  Rendering may
 * run Python (numpy's dtype.__str__, a type's __module__ through its
 * metaclass), so a guard's expected object is held while it runs: one held
 * only weakly could otherwise be freed by the GC meanwhile
 * (render_guard_with).  Objects of the program are described without
 * calling their own __repr__ (describe_ref).
 */
#include "guards_int.h"
#include "../base/pycompat.h"

#define DESCRIBE_MAX 80             /* longest rendered constant, in characters */
#define KEYS_SHOWN 8                /* dict keys shown in a failure */

/* ------------------------------------------------------------------ */
/* Names of guard kinds.                                               */

static const char *const guard_kind_names[GUARD__COUNT] = {
    [GUARD_TYPE_MATCH] = "TYPE_MATCH",
    [GUARD_ID_MATCH] = "ID_MATCH",
    [GUARD_EQUALS_MATCH] = "EQUALS_MATCH",
    [GUARD_TENSOR_MATCH] = "TENSOR_MATCH",
    [GUARD_LIST_LENGTH] = "LIST_LENGTH",
    [GUARD_TUPLE_LENGTH] = "TUPLE_LENGTH",
    [GUARD_DICT_KEYS] = "DICT_KEYS",
    [GUARD_HASATTR] = "HASATTR",
    [GUARD_CODE_MATCH] = "CODE_MATCH",
    [GUARD_NOT_NONE] = "NOT_NONE",
    [GUARD_DICT_LACKS] = "DICT_LACKS",
    [GUARD_DICT_EMPTY] = "DICT_EMPTY",
    [GUARD_GRAD_MODE] = "GRAD_MODE",
    [GUARD_STATE_QUERY] = "STATE_QUERY",
    [GUARD_BACKEND_MATCH] = "BACKEND_MATCH",
    [GUARD_SAME_AS] = "SAME_AS",
    [GUARD_NOT_SAME_AS] = "NOT_SAME_AS",
    [GUARD_CLASS_LACKS] = "CLASS_LACKS",
    [GUARD_SIZES_HOLD] = "SIZES_HOLD",
};

const char *
guard_kind_name(GuardKind kind)
{
    if ((unsigned)kind >= GUARD__COUNT)
        return "UNKNOWN";
    return guard_kind_names[kind];
}

/* ------------------------------------------------------------------ */
/* Rendering: values.                                                  */

/* "numpy.ndarray", "mod.Outer.Inner"; builtins by bare name.  New str or NULL. */
PyObject *
guard_type_name_ref(PyTypeObject *t)
{
    PyObject *qual, *mod, *res;

    qual = PyType_GetQualName(t);
    if (qual == NULL)
        return NULL;
    mod = PyObject_GetAttrString((PyObject *)t, "__module__");
    if (mod == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) {
            Py_DECREF(qual);
            return NULL;
        }
        PyErr_Clear();
        return qual;
    }
    if (!PyUnicode_Check(mod) || PyUnicode_CompareWithASCIIString(mod, "builtins") == 0)
        res = Py_NewRef(qual);
    else
        res = PyUnicode_FromFormat("%U.%U", mod, qual);
    Py_DECREF(mod);
    Py_DECREF(qual);
    return res;
}

/* s cut to DESCRIBE_MAX characters ("..." at the end); steals s.  New or NULL. */
static PyObject *
truncate_steal(PyObject *s)
{
    PyObject *head, *res;

    if (s == NULL || PyUnicode_GET_LENGTH(s) <= DESCRIBE_MAX)
        return s;
    head = PyUnicode_Substring(s, 0, DESCRIBE_MAX - 3);
    Py_DECREF(s);
    if (head == NULL)
        return NULL;
    res = PyUnicode_FromFormat("%U...", head);
    Py_DECREF(head);
    return res;
}

/* The str attribute `attr` of o, or NULL without an exception when o has
   none (or it is not a str).  For objects whose attribute is implemented in
   C: functions, builtins, code objects, C types' instances. */
static PyObject *
str_attr_ref(PyObject *o, const char *attr)
{
    PyObject *v = PyObject_GetAttrString(o, attr);

    if (v == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_MemoryError))
            PyErr_Clear();
        return NULL;
    }
    if (!PyUnicode_Check(v))
        Py_CLEAR(v);
    return v;
}

/* "<ufunc 'add'>" for an object of a C (static) type that has a str
   __name__; NULL without an exception for any other object.  New or NULL. */
static PyObject *
c_named_ref(PyObject *o)
{
    PyObject *name, *tn, *res;

    if (PyType_HasFeature(Py_TYPE(o), Py_TPFLAGS_HEAPTYPE))
        return NULL;
    if ((name = str_attr_ref(o, "__name__")) == NULL)
        return NULL;
    tn = PyType_GetQualName(Py_TYPE(o));
    res = tn ? PyUnicode_FromFormat("<%U %R>", tn, name) : NULL;
    Py_XDECREF(tn);
    Py_DECREF(name);
    return res;
}

/* Objects ID_MATCH renders as "X is <name>": they have a readable name. */
static bool
has_readable_name(PyObject *o)
{
    return o == Py_None || o == Py_Ellipsis || o == Py_NotImplemented
        || PyBool_Check(o) || PyModule_Check(o) || PyType_Check(o)
        || PyFunction_Check(o) || PyCFunction_Check(o) || PyCode_Check(o);
}

/*
 * A short human rendering of o that never runs user code: constants by
 * (truncated) repr, modules as "<module 'numpy'>", classes by qualified
 * name, functions by qualname, code as "<code f>", objects of C types with
 * a __name__ as "<ufunc 'add'>", anything else "<mod.T object at 0x...>".
 * New str or NULL.
 */
static PyObject *
describe_ref(PyObject *o)
{
    PyObject *s, *tn, *res;

    if (guard_const_is_simple(o, 0) || o == Py_Ellipsis || o == Py_NotImplemented) {
        s = PyObject_Repr(o);
        if (s == NULL && !PyErr_ExceptionMatches(PyExc_MemoryError)) {
            PyErr_Clear();      /* an int too long to print */
            return PyUnicode_FromFormat("<%s too large to print>",
                                        Py_TYPE(o)->tp_name);
        }
        return truncate_steal(s);
    }
    if (PyModule_Check(o)) {
        s = PyModule_GetNameObject(o);
        if (s == NULL) {
            PyErr_Clear();
            return PyUnicode_FromString("<module>");
        }
        res = PyUnicode_FromFormat("<module %R>", s);
        Py_DECREF(s);
        return res;
    }
    if (PyType_Check(o))
        return guard_type_name_ref((PyTypeObject *)o);
    if (PyFunction_Check(o) || PyCFunction_Check(o)) {
        if ((s = str_attr_ref(o, "__qualname__")) != NULL)
            return s;
    }
    else if (PyCode_Check(o)) {
        if ((s = str_attr_ref(o, "co_qualname")) != NULL) {
            res = PyUnicode_FromFormat("<code %U>", s);
            Py_DECREF(s);
            return res;
        }
    }
    else if ((res = c_named_ref(o)) != NULL || PyErr_Occurred()) {
        return res;
    }
    if (PyErr_Occurred())
        return NULL;
    tn = guard_type_name_ref(Py_TYPE(o));
    if (tn == NULL)
        return NULL;
    res = PyUnicode_FromFormat("<%U object at %p>", tn, o);
    Py_DECREF(tn);
    return res;
}

/* "['a', 'b']" for the items of a list or tuple, at most `max` of them then
   ", ...] (N keys)".  Items rendered by describe_ref.  New str or NULL. */
static PyObject *
keys_repr(PyObject *seq, Py_ssize_t max)
{
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq), shown = n < max ? n : max;
    PyObject **items = PySequence_Fast_ITEMS(seq);
    PyObject *parts, *sep = NULL, *body = NULL, *res = NULL;

    parts = PyList_New(shown);
    if (parts == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < shown; i++) {
        PyObject *d = describe_ref(items[i]);
        if (d == NULL)
            goto out_free_parts;
        PyList_SET_ITEM(parts, i, d);
    }
    if ((sep = PyUnicode_FromString(", ")) == NULL)
        goto out_free_parts;
    if ((body = PyUnicode_Join(sep, parts)) == NULL)
        goto out_free_sep;
    if (shown < n)
        res = PyUnicode_FromFormat("[%U, ...] (%zd keys)", body, n);
    else
        res = PyUnicode_FromFormat("[%U]", body);
    Py_DECREF(body);
out_free_sep:
    Py_DECREF(sep);
out_free_parts:
    Py_DECREF(parts);
    return res;
}

/* ------------------------------------------------------------------ */
/* Rendering: sources and guards.                                      */

PyObject *
guardset_render_source(const GuardSet *gs, int acc)
{
    const Accessor *a;
    PyObject *base = NULL, *res = NULL;

    if (acc < 0 || acc >= gs->nacc) {
        PyErr_Format(PyExc_IndexError, "no accessor %d", acc);
        return NULL;
    }
    a = &gs->acc[acc];
    if (a->base >= 0 && (base = guardset_render_source(gs, a->base)) == NULL)
        return NULL;
    switch (a->kind) {
    case ACC_LOCAL:
    case ACC_CLOSURE:
        if (a->name != NULL)
            res = PyUnicode_FromFormat("L[%R]", a->name);
        else
            res = PyUnicode_FromFormat(a->kind == ACC_LOCAL ? "L[<local %zd>]"
                                                            : "L[<free %zd>]",
                                       a->index);
        break;
    case ACC_GLOBAL:
        res = PyUnicode_FromFormat("G[%R]", a->key);
        break;
    case ACC_GLOBALS:
        res = PyUnicode_FromString("G");
        break;
    case ACC_MODULE:
        res = PyUnicode_FromFormat("sys.modules[%R]", a->key);
        break;
    case ACC_OBJATTR:
        res = PyUnicode_FromFormat("object.__getattribute__(%U, %R)", base, a->key);
        break;
    case ACC_TYPE:
        res = PyUnicode_FromFormat("type(%U)", base);
        break;
    case ACC_BUILTIN:
        res = PyUnicode_FromFormat("G['__builtins__'][%R]", a->key);
        break;
    case ACC_STACK:
        res = PyUnicode_FromFormat("S[%zd]", a->index);
        break;
    case ACC_ATTR:
        res = PyUnicode_FromFormat("%U.%U", base, a->key);
        break;
    case ACC_ITEM:
        res = PyUnicode_FromFormat("%U[%zd]", base, a->index);
        break;
    case ACC_DICT_ITEM:
        res = PyUnicode_FromFormat("%U[%R]", base, a->key);
        break;
    case ACC_CELL:
        res = PyUnicode_FromFormat("%U.cell_contents", base);
        break;
    case ACC_WEAKREF:
        res = PyUnicode_FromFormat("%U()", base);
        break;
    case ACC_SET_ORDER:
        res = PyUnicode_FromFormat("tuple(%U)", base);
        break;
    }
    Py_XDECREF(base);
    return res;
}

/* "G['np'] is <module 'numpy'>", "G['helper'] is helper", else
   "id(L['o']) == 0x...".  New str or NULL. */
static PyObject *
render_identity(PyObject *src, PyObject *expected)
{
    PyObject *d, *res;

    if (has_readable_name(expected))
        d = describe_ref(expected);
    else if ((d = c_named_ref(expected)) == NULL && !PyErr_Occurred())
        return PyUnicode_FromFormat("id(%U) == %p", src, expected);
    if (d == NULL)
        return NULL;
    res = PyUnicode_FromFormat("%U is %U", src, d);
    Py_DECREF(d);
    return res;
}

static PyObject *render_guard_text(const GuardSet *gs, const Guard *g, PyObject *src);

/* The guard text for guard g whose source renders as src.  New str or NULL.
   g->expected may be held only through a weak reference (TYPE and ID
   guards): rendering runs Python (a metaclass __getattr__, a __repr__),
   which may run the cyclic GC and free an object kept alive by a garbage
   cycle only, so a live expected object is held for the duration. */
static PyObject *
render_guard_with(const GuardSet *gs, const Guard *g, PyObject *src)
{
    bool alive = g->weak == NULL || weakref_points_to(g->weak, g->expected);
    PyObject *hold = alive ? Py_XNewRef(g->expected) : NULL;
    PyObject *res = render_guard_text(gs, g, src);
    Py_XDECREF(hold);
    return res;
}

/* GUARD_SIZES_HOLD as "L['k'].size(2) + 1 - L['m'].size(1) <= 0", a
   product as "2 * L['x'].size(0) * L['x'].size(1)".  New str or NULL. */
static PyObject *
render_sizes_relation(const GuardSet *gs, PyObject *e)
{
    static const char *const ops[6] = {"<", "<=", "==", "!=", ">", ">="};
    PyObject *parts = PyList_New(0);
    PyObject *factors = NULL;            /* "L['x'].size(0) * " of the term so far */
    for (Py_ssize_t i = 2; parts != NULL && i + 2 < PyTuple_GET_SIZE(e); i += 3) {
        long long k = PyLong_AsLongLong(PyTuple_GET_ITEM(e, i + 2));
        PyObject *src = guardset_render_source(gs, (int)PyLong_AsLong(PyTuple_GET_ITEM(e, i)));
        long dim = PyLong_AsLong(PyTuple_GET_ITEM(e, i + 1));
        PyObject *size = src == NULL ? NULL
                         : dim < 0 ? PyUnicode_FromFormat("%s%U", factors ? " * " : "", src)
                         : PyUnicode_FromFormat("%s%U.size(%ld)", factors ? " * " : "", src, dim);
        Py_XDECREF(src);
        PyObject *sofar = size == NULL ? NULL
                          : factors ? PyUnicode_Concat(factors, size) : Py_NewRef(size);
        Py_XDECREF(size);
        Py_CLEAR(factors);
        if (sofar == NULL) {
            Py_CLEAR(parts);
            break;
        }
        if (k == 0) {                    /* a factor: the term goes on */
            factors = sofar;
            continue;
        }
        bool first = PyList_GET_SIZE(parts) == 0;
        long long mag = k < 0 ? -k : k;
        PyObject *term = mag == 1 ? PyUnicode_FromFormat("%s%U", first ? (k < 0 ? "-" : "")
                                                         : (k < 0 ? " - " : " + "), sofar)
                         : PyUnicode_FromFormat("%s%lld * %U", first ? (k < 0 ? "-" : "")
                                                : (k < 0 ? " - " : " + "), mag, sofar);
        Py_DECREF(sofar);
        if (term == NULL || PyList_Append(parts, term) < 0)
            Py_CLEAR(parts);
        Py_XDECREF(term);
    }
    Py_XDECREF(factors);
    long long c = PyLong_AsLongLong(PyTuple_GET_ITEM(e, 0));
    long op = PyLong_AsLong(PyTuple_GET_ITEM(e, 1));
    PyObject *empty = PyUnicode_FromString("");
    PyObject *lhs = parts && empty ? PyUnicode_Join(empty, parts) : NULL;
    Py_XDECREF(empty);
    Py_XDECREF(parts);
    const char *rel = ops[op < 0 || op > 5 ? 0 : op];
    PyObject *res = lhs == NULL ? NULL
                    : c == 0 ? PyUnicode_FromFormat("%U %s 0", lhs, rel)
                    : PyUnicode_FromFormat("%U %s %lld %s 0", lhs, c < 0 ? "-" : "+", c < 0 ? -c : c, rel);
    Py_XDECREF(lhs);
    return res;
}

static PyObject *
render_guard_text(const GuardSet *gs, const Guard *g, PyObject *src)
{
    PyObject *d, *res;

    if (g->kind == GUARD_SIZES_HOLD)
        return render_sizes_relation(gs, g->expected);

    if (g->kind == GUARD_SAME_AS || g->kind == GUARD_NOT_SAME_AS) {
        PyObject *other = guardset_render_source(gs, (int)g->length);
        res = other ? PyUnicode_FromFormat(g->kind == GUARD_SAME_AS ? "%U is %U" : "%U is not %U",
                                           src, other) : NULL;
        Py_XDECREF(other);
        return res;
    }

    if (g->weak != NULL && !weakref_points_to(g->weak, g->expected))
        return g->kind == GUARD_TYPE_MATCH
               ? PyUnicode_FromFormat("type(%U) is <a class since freed>", src)
               : PyUnicode_FromFormat("%U is <an object since freed>", src);
    switch (g->kind) {
    case GUARD_TYPE_MATCH:
        if ((d = guard_type_name_ref((PyTypeObject *)g->expected)) == NULL)
            return NULL;
        res = PyUnicode_FromFormat("type(%U) is %U", src, d);
        break;
    case GUARD_ID_MATCH:
        return render_identity(src, g->expected);
    case GUARD_EQUALS_MATCH:
        if ((d = describe_ref(g->expected)) == NULL)
            return NULL;
        res = PyUnicode_FromFormat("%U == %U", src, d);
        break;
    case GUARD_TENSOR_MATCH:
        return guard_tensor_render(g->tensor, src);
    case GUARD_LIST_LENGTH:
    case GUARD_TUPLE_LENGTH:
        return PyUnicode_FromFormat("len(%U) == %zd", src, g->length);
    case GUARD_DICT_KEYS:
        if ((d = keys_repr(g->expected, PY_SSIZE_T_MAX)) == NULL)
            return NULL;
        res = PyUnicode_FromFormat("list(%U.keys()) == %U", src, d);
        break;
    case GUARD_HASATTR:
        return PyUnicode_FromFormat(g->length ? "hasattr(%U, %R)" : "not hasattr(%U, %R)",
                                    src, g->expected);
    case GUARD_CLASS_LACKS:
        return PyUnicode_FromFormat("not any(%R in c.__dict__ for c in %U.__mro__)",
                                    g->expected, src);
    case GUARD_CODE_MATCH:
        if ((d = describe_ref(g->expected)) == NULL)
            return NULL;
        res = PyUnicode_FromFormat("%U.__code__ is %U", src, d);
        break;
    case GUARD_NOT_NONE:
        return PyUnicode_FromFormat("%U is not None", src);
    case GUARD_DICT_LACKS:
        return PyUnicode_FromFormat("%R not in %U", g->expected, src);
    case GUARD_DICT_EMPTY:
        return PyUnicode_FromFormat("len(%U) == 0", src);
    case GUARD_GRAD_MODE:
        return PyUnicode_FromFormat("%U == %s", src, g->expected == Py_True ? "True" : "False");
    case GUARD_STATE_QUERY:
        return PyUnicode_FromFormat("%U == %R", src, PyTuple_GET_ITEM(g->expected, 2));
    case GUARD_BACKEND_MATCH:
        if ((d = describe_ref(g->expected)) == NULL)
            return NULL;
        res = PyUnicode_FromFormat("backend is %U", d);
        break;
    default:
        PyErr_SetString(PyExc_SystemError, "bad guard kind");
        return NULL;
    }
    Py_DECREF(d);
    return res;
}

/* The source of guard g: its accessor rendered, "backend" for
   BACKEND_MATCH, "torch.is_grad_enabled()" for GRAD_MODE.  New str or NULL. */
static PyObject *
guard_source_ref(const GuardSet *gs, const Guard *g)
{
    if (g->kind == GUARD_GRAD_MODE)
        return PyUnicode_FromString("torch.is_grad_enabled()");
    if (g->kind == GUARD_STATE_QUERY) {
        /* torch.is_autocast_enabled('cpu') */
        PyObject *fn = PyTuple_GET_ITEM(g->expected, 0), *args = PyTuple_GET_ITEM(g->expected, 1);
        PyObject *shown = PyTuple_GET_SIZE(args) == 1 ? PyObject_Repr(PyTuple_GET_ITEM(args, 0))
                          : PyTuple_GET_SIZE(args) == 0 ? PyUnicode_FromString("") : PyObject_Repr(args);
        PyObject *r = shown ? PyUnicode_FromFormat("torch.%s(%U)", ((PyCFunctionObject *)fn)->m_ml->ml_name,
                                                   shown) : NULL;
        Py_XDECREF(shown);
        return r;
    }
    if (g->acc < 0)
        return PyUnicode_FromString("backend");
    return guardset_render_source(gs, g->acc);
}

PyObject *
guardset_render_guard(const GuardSet *gs, int guard)
{
    PyObject *src, *res;

    if (guard < 0 || guard >= gs->n) {
        PyErr_Format(PyExc_IndexError, "no guard %d", guard);
        return NULL;
    }
    if ((src = guard_source_ref(gs, &gs->guards[guard])) == NULL)
        return NULL;
    res = render_guard_with(gs, &gs->guards[guard], src);
    Py_DECREF(src);
    return res;
}

/* ------------------------------------------------------------------ */
/* Rendering: failures.                                                */

/*
 * Why accessor acc has no value: "<missing>" for a frame slot or name,
 * "<no attribute 'y'>", "<no item [2]>", "<no key 'k'>", "<empty cell>",
 * "<not a dict: list>", ... for the first link of its chain that breaks.
 * New str or NULL.
 */
static PyObject *
unreachable_reason(const GuardSet *gs, int acc, const FrameView *fv, PyObject **vals)
{
    const Accessor *a = &gs->acc[acc];
    PyObject *base = NULL;

    if (a->base >= 0 && (base = guardset_value(gs, a->base, fv, vals)) == NULL)
        return unreachable_reason(gs, a->base, fv, vals);
    switch (a->kind) {
    case ACC_ATTR:
        return PyUnicode_FromFormat("<no attribute %R>", a->key);
    case ACC_ITEM:
        if (!PyList_CheckExact(base) && !PyTuple_CheckExact(base))
            return PyUnicode_FromFormat("<not a list or tuple: %s>",
                                        Py_TYPE(base)->tp_name);
        return PyUnicode_FromFormat("<no item [%zd]: length %zd>", a->index,
                                    Py_SIZE(base));
    case ACC_DICT_ITEM:
        if (!PyDict_CheckExact(base))
            return PyUnicode_FromFormat("<not a dict: %s>", Py_TYPE(base)->tp_name);
        return PyUnicode_FromFormat("<no key %R>", a->key);
    case ACC_CELL:
        if (!PyCell_Check(base))
            return PyUnicode_FromFormat("<not a cell: %s>", Py_TYPE(base)->tp_name);
        return PyUnicode_FromString("<empty cell>");
    case ACC_WEAKREF:
        if (!PyWeakref_CheckRefExact(base))
            return PyUnicode_FromFormat("<not a weakref.ref: %s>", Py_TYPE(base)->tp_name);
        return PyUnicode_FromString("<dead weak reference>");
    case ACC_SET_ORDER:
        return PyUnicode_FromFormat("<not a set: %s>", Py_TYPE(base)->tp_name);
    default:
        return PyUnicode_FromString("<missing>");
    }
}

/* For a guard that first checks the exact type: "type(src) is list"
   and the type seen.  0 / -1. */
int
guard_type_failure(PyObject *src, PyTypeObject *want, PyObject *v,
                   PyObject **expr, PyObject **observed)
{
    PyObject *tn = guard_type_name_ref(want);

    if (tn == NULL)
        return -1;
    *expr = PyUnicode_FromFormat("type(%U) is %U", src, tn);
    Py_DECREF(tn);
    *observed = guard_type_name_ref(Py_TYPE(v));
    return *expr && *observed ? 0 : -1;
}

/* What the value v of a failed guard g is, as the guard sees it.  New str
   or NULL. */
static PyObject *
observed_ref(const Guard *g, PyObject *v)
{
    PyObject *d, *tn, *res;
    int r;

    switch (g->kind) {
    case GUARD_TYPE_MATCH:
        return guard_type_name_ref(Py_TYPE(v));
    case GUARD_EQUALS_MATCH:
        if ((d = describe_ref(v)) == NULL || Py_TYPE(v) == Py_TYPE(g->expected)
            || !guard_const_is_simple(v, 0))
            return d;
        if ((tn = guard_type_name_ref(Py_TYPE(v))) == NULL) {
            Py_DECREF(d);
            return NULL;
        }
        res = PyUnicode_FromFormat("%U (type %U)", d, tn);
        Py_DECREF(tn);
        Py_DECREF(d);
        return res;
    case GUARD_LIST_LENGTH:
    case GUARD_TUPLE_LENGTH:
        return PyUnicode_FromFormat("%zd", Py_SIZE(v));
    case GUARD_DICT_KEYS:
        if ((d = PyDict_Keys(v)) == NULL)
            return NULL;
        res = keys_repr(d, KEYS_SHOWN);
        Py_DECREF(d);
        return res;
    case GUARD_HASATTR:
        r = guard_has_attr(v, g->expected);
        return PyUnicode_FromString(r < 0 ? "<error>" : r ? "True" : "False");
    case GUARD_CLASS_LACKS:
        if (!PyType_Check(v))
            return PyUnicode_FromFormat("a %s, not a class", Py_TYPE(v)->tp_name);
        return PyUnicode_FromString(_PyType_Lookup((PyTypeObject *)v, g->expected) ? "True" : "False");
    case GUARD_CODE_MATCH:
        return describe_ref(PyFunction_GET_CODE(v));
    case GUARD_NOT_NONE:
        return PyUnicode_FromString("None");
    case GUARD_SIZES_HOLD:
        return PyUnicode_FromString("sizes that do not so relate");
    case GUARD_SAME_AS:
        return PyUnicode_FromString("another object");
    case GUARD_NOT_SAME_AS:
        return PyUnicode_FromString("the same object");
    case GUARD_DICT_LACKS:
        return PyUnicode_FromFormat("%R present", g->expected);
    case GUARD_DICT_EMPTY:
        if (!PyDict_Check(v))
            return guard_type_name_ref(Py_TYPE(v));
        return PyUnicode_FromFormat("%zd", PyDict_GET_SIZE(v));
    default:
        return describe_ref(v);
    }
}

/* expr and observed (new strs) for guard gi, which just failed.  0, or -1
   with an exception (both left NULL). */
int
guard_failure_render(const GuardSet *gs, int gi, const FrameView *fv, PyObject **vals,
                     PyObject *backend, PyObject **expr, PyObject **observed)
{
    const Guard *g = &gs->guards[gi];
    PyObject *src, *v = NULL;
    PyTypeObject *want = NULL;
    int rc = 0;

    *expr = *observed = NULL;
    if ((src = guard_source_ref(gs, g)) == NULL)
        return -1;
    if (g->kind == GUARD_BACKEND_MATCH) {
        *expr = render_guard_with(gs, g, src);
        *observed = backend ? describe_ref(backend) : PyUnicode_FromString("<none>");
        goto out;
    }
    if (g->kind == GUARD_STATE_QUERY) {
        PyObject *now = PyObject_Call(PyTuple_GET_ITEM(g->expected, 0), PyTuple_GET_ITEM(g->expected, 1), NULL);
        *expr = render_guard_with(gs, g, src);
        *observed = now ? PyObject_Repr(now) : (PyErr_Clear(), PyUnicode_FromString("<unreadable>"));
        Py_XDECREF(now);
        goto out;
    }
    if (g->kind == GUARD_GRAD_MODE) {
        PyObject *now = guard_grad_mode_now();
        *expr = render_guard_with(gs, g, src);
        *observed = PyUnicode_FromString(now == Py_True ? "True" : now == Py_False ? "False"
                                                                                 : "<unreadable>");
        goto out;
    }
    if ((v = guardset_value(gs, g->acc, fv, vals)) == NULL) {
        *expr = render_guard_with(gs, g, src);
        *observed = unreachable_reason(gs, g->acc, fv, vals);
        goto out;
    }
    switch (g->kind) {
    case GUARD_TENSOR_MATCH:
        rc = guard_tensor_failure(g->tensor, src, v, expr, observed);
        goto out;
    case GUARD_LIST_LENGTH:
        want = &PyList_Type;
        break;
    case GUARD_TUPLE_LENGTH:
        want = &PyTuple_Type;
        break;
    case GUARD_DICT_KEYS:
        want = g->length ? NULL : &PyDict_Type;      /* a subclass's: its TYPE_MATCH's */
        break;
    case GUARD_CODE_MATCH:
        want = &PyFunction_Type;
        break;
    default:
        break;
    }
    if (want != NULL && Py_TYPE(v) != want) {
        rc = guard_type_failure(src, want, v, expr, observed);
        goto out;
    }
    *expr = render_guard_with(gs, g, src);
    *observed = observed_ref(g, v);
out:
    Py_DECREF(src);
    if (rc < 0 || *expr == NULL || *observed == NULL) {
        Py_CLEAR(*expr);
        Py_CLEAR(*observed);
        return -1;
    }
    return 0;
}

PyObject *
guardset_site(const GuardSet *gs, int guard)
{
    int site = gs->guards[guard].site;
    if (gs->sites == NULL || site < 0 || site >= PyList_GET_SIZE(gs->sites))
        return NULL;
    PyObject *stack = PyList_GET_ITEM(gs->sites, site);
    return PyList_Check(stack) ? stack : NULL;
}

/* (contract: guards.h) */
int
guardset_explain_failure(const GuardSet *gs, int gi, const FrameView *fv, PyObject **vals,
                         PyObject *backend, GuardFailure *fail)
{
    PyObject *expr = NULL, *observed = NULL;

    if (guard_failure_render(gs, gi, fv, vals, backend, &expr, &observed) < 0) {
        if (PyErr_ExceptionMatches(PyExc_MemoryError))
            return -1;
        PyErr_Clear();
        expr = PyUnicode_FromString(guard_kind_name(gs->guards[gi].kind));
        observed = PyUnicode_FromString("<unrenderable>");
        if (expr == NULL || observed == NULL) {
            Py_XDECREF(expr);
            Py_XDECREF(observed);
            return -1;
        }
    }
    fail->guard = gi;
    Py_XSETREF(fail->expr, expr);
    Py_XSETREF(fail->observed, observed);
    return 0;
}

/* One failing guard of guardset_diff: a new dict or NULL. */
static PyObject *
diff_item(const GuardSet *gs, int gi, const FrameView *fv, PyObject **vals, PyObject *backend)
{
    PyObject *expr, *observed;
    if (guard_failure_render(gs, gi, fv, vals, backend, &expr, &observed) < 0) {
        if (PyErr_ExceptionMatches(PyExc_MemoryError))
            return NULL;
        PyErr_Clear();
        expr = PyUnicode_FromString(guard_kind_name(gs->guards[gi].kind));
        observed = PyUnicode_FromString("<unrenderable>");
    }
    PyObject *stack = guardset_site(gs, gi);
    PyObject *d = expr && observed
        ? Py_BuildValue("{s:i,s:s,s:O,s:O,s:O}", "idx", gi, "kind",
                        guard_kind_name(gs->guards[gi].kind), "expr", expr,
                        "observed", observed, "user_stack", stack ? stack : Py_None)
        : NULL;
    Py_XDECREF(expr);
    Py_XDECREF(observed);
    return d;
}

PyObject *
guardset_diff(const GuardSet *gs, const FrameView *fv, PyObject **vals, PyObject *backend,
              int *nfailing)
{
    int idx[GUARD_DIFF_MAX];
    int n = guardset_failing(gs, fv, vals, backend, idx, GUARD_DIFF_MAX);
    PyObject *list = PyList_New(0);

    *nfailing = n;
    for (int k = 0; list != NULL && k < n && k < GUARD_DIFF_MAX; k++) {
        PyObject *d = diff_item(gs, idx[k], fv, vals, backend);
        if (d == NULL || PyList_Append(list, d) < 0)
            Py_CLEAR(list);
        Py_XDECREF(d);
    }
    return list;
}

/* ------------------------------------------------------------------ */
/* GuardInfo.                                                          */

static PyStructSequence_Field guard_info_fields[] = {
    {"kind", "guard kind, e.g. 'TENSOR_MATCH'"},
    {"expr", "the guard as a Python-like expression"},
    {"source", "the value it checks, e.g. \"L['x']\" ('backend' for BACKEND_MATCH)"},
    {"filename", "file of the user code whose access made the guard, or None"},
    {"lineno", "its line, or None"},
    {"user_stack", "the user stack there, through inlined calls: a tuple of "
                   "(filename, lineno, qualname, source line), outermost first; () when unknown"},
    {"expected", "what the guard compares with (the object for ID_MATCH and TYPE_MATCH, the "
                 "value for EQUALS_MATCH, ...), or None (dynscope.dump writes checks with it)"},
    {NULL, NULL},
};

static PyStructSequence_Desc guard_info_desc = {
    "dynscope._C.GuardInfo",
    "One guard of a cache entry: its kind, expression and source, and (by "
    "name) the user code that made it.",
    guard_info_fields,
    3,
};

/* Strong; created on first use and kept for the life of the process. */
static PyTypeObject *guard_info_type;

/* A GuardInfo for guard g.  New reference or NULL. */
static PyObject *
guard_info_new(const GuardSet *gs, int g)
{
    PyObject *info, *item;

    info = PyStructSequence_New(guard_info_type);
    if (info == NULL)
        return NULL;
    if ((item = PyUnicode_FromString(guard_kind_name(gs->guards[g].kind))) == NULL)
        goto out_free_info;
    PyStructSequence_SET_ITEM(info, 0, item);
    if ((item = guardset_render_guard(gs, g)) == NULL)
        goto out_free_info;
    PyStructSequence_SET_ITEM(info, 1, item);
    if ((item = guard_source_ref(gs, &gs->guards[g])) == NULL)
        goto out_free_info;
    PyStructSequence_SET_ITEM(info, 2, item);
    PyObject *stack = guardset_site(gs, g);
    PyObject *last = stack != NULL && PyList_GET_SIZE(stack) > 0
                     ? PyList_GET_ITEM(stack, PyList_GET_SIZE(stack) - 1) : NULL;
    PyStructSequence_SET_ITEM(info, 3, Py_NewRef(last ? PyTuple_GET_ITEM(last, 0) : Py_None));
    PyStructSequence_SET_ITEM(info, 4, Py_NewRef(last ? PyTuple_GET_ITEM(last, 1) : Py_None));
    if ((item = stack ? PyList_AsTuple(stack) : PyTuple_New(0)) == NULL)
        goto out_free_info;
    PyStructSequence_SET_ITEM(info, 5, item);
    const Guard *gd = &gs->guards[g];
    /* with a weak reference, `expected` is borrowed and may be gone: the
       referent while it lives (a new reference), else None */
    PyObject *expected = gd->weak != NULL ? weakref_referent_ref(gd->weak)
                                          : Py_XNewRef(gd->expected);
    PyStructSequence_SET_ITEM(info, 6, expected != NULL ? expected : Py_NewRef(Py_None));
    return info;

out_free_info:
    Py_DECREF(info);            /* unset fields are NULL: structseq allows it */
    return NULL;
}

static PyStructSequence_Field failure_info_fields[] = {
    {"entry", "the older entry, 'frame/compile'"},
    {"kind", "guard kind, e.g. 'TENSOR_MATCH'"},
    {"expr", "the guard that failed, as a Python-like expression"},
    {"observed", "what the new inputs had instead"},
    {"filename", "file of the user code whose access made the guard, or None"},
    {"lineno", "its line, or None"},
    {NULL, NULL},
};

static PyStructSequence_Desc failure_info_desc = {
    "dynscope._C.GuardFailureInfo",
    "An older entry's first failing guard on a miss: (entry, kind, expr, "
    "observed), and by name where the guard came from.",
    failure_info_fields,
    4,
};

/* Strong; created with guard_info_type. */
static PyTypeObject *failure_info_type;

PyObject *
guard_failure_info_new(PyObject *entry_id, const char *kind, PyObject *expr,
                       PyObject *observed, PyObject *filename, PyObject *lineno)
{
    PyObject *k = PyUnicode_FromString(kind);
    PyObject *info = k ? PyStructSequence_New(failure_info_type) : NULL;
    if (info == NULL) {
        Py_XDECREF(k);
        return NULL;
    }
    PyObject *items[6] = {entry_id, k, expr, observed, filename, lineno};
    for (int i = 0; i < 6; i++)
        PyStructSequence_SET_ITEM(info, i, Py_NewRef(items[i] ? items[i] : Py_None));
    Py_DECREF(k);
    return info;
}

bool
guard_failure_info_site(PyObject *item, PyObject **filename, PyObject **lineno)
{
    if (failure_info_type == NULL || !Py_IS_TYPE(item, failure_info_type))
        return false;
    *filename = PyStructSequence_GET_ITEM(item, 4);
    *lineno = PyStructSequence_GET_ITEM(item, 5);
    return true;
}

/* Create the GuardInfo types unless they exist.  0, or -1 with an exception. */
static int
guard_info_type_ready(void)
{
    if (guard_info_type != NULL)
        return 0;
    failure_info_type = PyStructSequence_NewType(&failure_info_desc);
    guard_info_type = failure_info_type ? PyStructSequence_NewType(&guard_info_desc) : NULL;
    if (guard_info_type == NULL) {
        if (!PyErr_Occurred())      /* 3.11 loses the MemoryError of some paths */
            PyErr_NoMemory();
        return -1;
    }
    return 0;
}

int
guards_types_init(PyObject *module)
{
    if (guard_info_type_ready() < 0)
        return -1;
    if (PyModule_AddObjectRef(module, "GuardFailureInfo", (PyObject *)failure_info_type) < 0)
        return -1;
    return PyModule_AddObjectRef(module, "GuardInfo", (PyObject *)guard_info_type);
}

PyObject *
guardset_info_list(const GuardSet *gs)
{
    PyObject *list;

    if (guard_info_type_ready() < 0)
        return NULL;
    if ((list = PyList_New(gs->n)) == NULL)
        return NULL;
    for (int g = 0; g < gs->n; g++) {
        PyObject *info = guard_info_new(gs, g);
        if (info == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, g, info);
    }
    return list;
}
