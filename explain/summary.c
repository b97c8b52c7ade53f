/*
 * summary.c -- the summary that starts explain's report: graph breaks and
 * frames run without capture grouped by break type (engine/base/breaks.h) and
 * site, most frequent first, with the class (your code, library code,
 * engine limit, fundamental), the user's source line and the type's hint;
 * and the per-break list folded by site.  Contract: explain_int.h.
 *
 * Invariants: the groups partition the breaks (their counts add up to the
 * breaks); a group's order is by count, then by first occurrence, so the
 * same run gives the same summary; the rendered summary is at most
 * SUMMARY_MAX_GROUPS groups of at most 4 lines each.
 */
#include "explain_int.h"
#include "../event/places.h"
#include "../engine/base/breaks.h"

#include <string.h>

PyTypeObject *BreakGroupType;

static PyStructSequence_Field break_group_fields[] = {
    {"break_type", "registry id, e.g. 'DS0001' (docs/breaks.md)"},
    {"name", "the type's short name, e.g. 'print'"},
    {"break_class", "'your code', 'library code', 'engine limit' or 'fundamental'"},
    {"count", "how many breaks (or skipped frames) of this type at this site"},
    {"reason", "the first one's reason"},
    {"filename", "the site: file of the innermost frame"},
    {"lineno", "its line"},
    {"function", "the innermost frame's function"},
    {"line", "the source line there"},
    {"hint", "what to do about it"},
    {"cost_ns", "time the call spent outside graphs after these breaks (the eager step and "
                "the resume, compiles aside), or None when not measured"},
    {"function_ns", "the time of the function they break (compiles aside), or None"},
    {NULL, NULL},
};
static PyStructSequence_Desc break_group_desc = {
    "dynscope.BreakGroup", "Graph breaks of one type at one site.", break_group_fields, 12,
};

/* A group's key: "DS0001\x1ffile\x1fline" (the reason's text varies with
   names, the site and type do not). */
static PyObject *group_key(PyObject *type_id, PyObject *file, PyObject *line)
{
    return PyUnicode_FromFormat("%S\x1f%S\x1f%S", type_id, file, line);
}

/* "transformers/modeling_utils.py" for a file under a site directory,
   else the file's base name.  New str or NULL. */
static PyObject *short_path(PyObject *file)
{
    if (!PyUnicode_Check(file))
        return PyObject_Str(file);
    const char *path = PyUnicode_AsUTF8(file);
    if (path == NULL)
        return NULL;
    size_t site = place_install_prefix(path);      /* the rule of event/places.h */
    const char *slash = strrchr(path, '/');
    return PyUnicode_FromString(site > 0 ? path + site : slash != NULL ? slash + 1 : path);
}

PyObject *summary_hint(PyObject *type_id, PyObject *cls, PyObject *file)
{
    const char *id = PyUnicode_Check(type_id) ? PyUnicode_AsUTF8(type_id) : NULL;
    const char *c = PyUnicode_Check(cls) ? PyUnicode_AsUTF8(cls) : NULL;
    PyErr_Clear();
    const BreakType *bt = break_type_by_id(id);
    bool installed = break_site_is_installed(file);
    if (c != NULL && strcmp(c, "engine limit") == 0 && installed) {
        /* the type's hint would have the user change code they cannot */
        PyObject *where = short_path(file);
        return where == NULL ? NULL : PyUnicode_FromFormat(
            "dynscope does not model this yet (its debt, not yours), and the site is in "
            "installed code (%U): capture a smaller function that does not reach it, or make "
            "that call before or after the captured one; report the reason (%s %s)", where,
            bt ? bt->id : "?", bt ? bt->name : "?");
    }
    if (c == NULL || strcmp(c, "library code") != 0)
        return PyUnicode_FromString(bt ? bt->hint : "");
    PyObject *where = short_path(file);
    if (where == NULL)
        return NULL;
    return PyUnicode_FromFormat(
        "the site is in installed code (%U), which you cannot edit: capture a smaller "
        "function that does not reach it, or make that call before or after the captured "
        "one (%s %s: %s)", where, bt ? bt->id : "?", bt ? bt->name : "?",
        bt ? bt->hint : "");
}

/* One new BreakGroup from its first member.  New reference or NULL. */
static PyObject *group_new(PyObject *type_id, PyObject *cls, PyObject *reason, PyObject *frame)
{
    PyObject *g = PyStructSequence_New(BreakGroupType);
    if (g == NULL)
        return NULL;
    const char *id = PyUnicode_Check(type_id) ? PyUnicode_AsUTF8(type_id) : NULL;
    PyErr_Clear();
    const BreakType *bt = break_type_by_id(id);
    PyObject *file = frame ? PyStructSequence_GET_ITEM(frame, 0) : Py_None;
    PyObject *items[12] = {
        Py_NewRef(type_id), PyUnicode_FromString(bt ? bt->name : "?"), Py_NewRef(cls),
        PyLong_FromLong(1), Py_NewRef(reason), Py_NewRef(file),
        Py_NewRef(frame ? PyStructSequence_GET_ITEM(frame, 1) : Py_None),
        Py_NewRef(frame ? PyStructSequence_GET_ITEM(frame, 2) : Py_None),
        Py_NewRef(frame ? PyStructSequence_GET_ITEM(frame, 3) : Py_None),
        summary_hint(type_id, cls, file),
        Py_NewRef(Py_None), Py_NewRef(Py_None),
    };
    for (int i = 0; i < 12; i++) {
        if (items[i] == NULL) {
            for (int k = 0; k < 12; k++)
                Py_XDECREF(items[k]);
            Py_DECREF(g);
            return NULL;
        }
        PyStructSequence_SET_ITEM(g, i, items[i]);
    }
    return g;
}

/* Add a member's measured cost to group g (cost, fn: int or None; the
   function's time is the first member's).  0 / -1. */
static int group_add_cost(PyObject *g, PyObject *cost, PyObject *fn)
{
    if (cost != NULL && PyLong_Check(cost)) {
        PyObject *old = PyStructSequence_GET_ITEM(g, 10);
        PyObject *sum = old == Py_None ? Py_NewRef(cost) : PyNumber_Add(old, cost);
        if (sum == NULL)
            return -1;
        PyStructSequence_SET_ITEM(g, 10, sum);
        Py_DECREF(old);
    }
    if (fn != NULL && PyLong_Check(fn) && PyStructSequence_GET_ITEM(g, 11) == Py_None) {
        Py_DECREF(Py_None);
        PyStructSequence_SET_ITEM(g, 11, Py_NewRef(fn));
    }
    return 0;
}

/* A group's measured cost in ns, -1 when not measured. */
static double group_cost(PyObject *g)
{
    PyObject *c = PyStructSequence_GET_ITEM(g, 10);
    return PyLong_Check(c) ? PyLong_AsDouble(c) : -1.0;
}

/* Costliest first (groups not measured after those measured), then the
   most frequent. */
static int by_cost_then_count(const void *a, const void *b)
{
    PyObject *ga = *(PyObject *const *)a, *gb = *(PyObject *const *)b;
    double xa = group_cost(ga), xb = group_cost(gb);
    if (xa != xb)
        return xa < xb ? 1 : -1;
    long ca = PyLong_AsLong(PyStructSequence_GET_ITEM(ga, 3));
    long cb = PyLong_AsLong(PyStructSequence_GET_ITEM(gb, 3));
    return ca != cb ? (ca < cb ? 1 : -1) : 0;
}

PyObject *summary_groups(PyObject *items)
{
    PyObject *groups = PyList_New(0);
    PyObject *index = PyDict_New();      /* key -> group (borrowed from groups) */
    for (Py_ssize_t i = 0; groups && index && i < PyList_GET_SIZE(items); i++) {
        PyObject *it = PyList_GET_ITEM(items, i);
        if (!PyTuple_Check(it) || PyTuple_GET_SIZE(it) < 4)
            continue;
        PyObject *cost = PyTuple_GET_SIZE(it) >= 6 ? PyTuple_GET_ITEM(it, 4) : NULL;
        PyObject *fn = PyTuple_GET_SIZE(it) >= 6 ? PyTuple_GET_ITEM(it, 5) : NULL;
        PyObject *type_id = PyTuple_GET_ITEM(it, 0), *cls = PyTuple_GET_ITEM(it, 1);
        PyObject *reason = PyTuple_GET_ITEM(it, 2), *frame = PyTuple_GET_ITEM(it, 3);
        if (frame == Py_None)
            frame = NULL;
        PyObject *file = frame ? PyStructSequence_GET_ITEM(frame, 0) : Py_None;
        PyObject *line = frame ? PyStructSequence_GET_ITEM(frame, 1) : Py_None;
        PyObject *key = group_key(type_id, file, line);
        PyObject *g = key ? PyDict_GetItemWithError(index, key) : NULL;
        if (g != NULL) {
            PyObject *old = PyStructSequence_GET_ITEM(g, 3);
            PyObject *count = PyLong_FromLong(PyLong_AsLong(old) + 1);
            if (count != NULL) {
                PyStructSequence_SET_ITEM(g, 3, count);
                Py_DECREF(old);
            }
            if (count == NULL || group_add_cost(g, cost, fn) < 0)
                Py_CLEAR(groups);
        }
        else if (key == NULL || PyErr_Occurred()
                 || (g = group_new(type_id, cls, reason, frame)) == NULL
                 || group_add_cost(g, cost, fn) < 0
                 || PyDict_SetItem(index, key, g) < 0 || PyList_Append(groups, g) < 0) {
            Py_XDECREF(g);
            Py_CLEAR(groups);
        }
        else {
            Py_DECREF(g);
        }
        Py_XDECREF(key);
    }
    Py_XDECREF(index);
    if (groups != NULL) {
        /* insertion sort: stable, so ties keep their first-seen order */
        Py_ssize_t n = PyList_GET_SIZE(groups);
        PyObject **v = ((PyListObject *)groups)->ob_item;
        for (Py_ssize_t i = 1; i < n; i++)
            for (Py_ssize_t k = i; k > 0 && by_cost_then_count(&v[k - 1], &v[k]) > 0; k--) {
                PyObject *tmp = v[k];
                v[k] = v[k - 1];
                v[k - 1] = tmp;
            }
    }
    return groups;
}

/* The four lines of one group. */
static int render_group(PyObject *out, PyObject *g)
{
    PyObject *where = short_path(PyStructSequence_GET_ITEM(g, 5));
    if (where == NULL)
        return -1;
    PyObject *src = PyStructSequence_GET_ITEM(g, 8);
    int rc = explain_line(out, "  x%S  %S %S [%S]  %U:%S in %S", PyStructSequence_GET_ITEM(g, 3),
                          PyStructSequence_GET_ITEM(g, 0), PyStructSequence_GET_ITEM(g, 1),
                          PyStructSequence_GET_ITEM(g, 2), where, PyStructSequence_GET_ITEM(g, 6),
                          PyStructSequence_GET_ITEM(g, 7));
    Py_DECREF(where);
    double cost = group_cost(g);
    PyObject *fn = PyStructSequence_GET_ITEM(g, 11);
    if (rc == 0 && cost >= 0) {
        char share[48] = "";
        double fn_ns = PyLong_Check(fn) ? PyLong_AsDouble(fn) : 0;
        if (fn_ns > 0)
            PyOS_snprintf(share, sizeof share, " (%.0f%% of the captured frame's time)",
                          100.0 * cost / fn_ns);
        char when[32];
        if (cost >= 1e6)
            PyOS_snprintf(when, sizeof when, "%.1f ms", cost / 1e6);
        else
            PyOS_snprintf(when, sizeof when, "%.1f \u00b5s", cost / 1e3);
        rc = explain_line(out, "          cost: %s outside graphs%s", when, share);
    }
    if (rc == 0)
        rc = explain_line(out, "          %S", PyStructSequence_GET_ITEM(g, 4));
    if (rc == 0 && PyUnicode_Check(src) && PyUnicode_GET_LENGTH(src) > 0)
        rc = explain_line(out, "          | %S", src);
    if (rc == 0)
        rc = explain_line(out, "          hint: %S", PyStructSequence_GET_ITEM(g, 9));
    return rc;
}

/* How many breaks of each class. */
static int class_counts(PyObject *groups, long counts[4])
{
    static const char *const names[4] = {"your code", "library code", "engine limit", "fundamental"};
    memset(counts, 0, 4 * sizeof counts[0]);
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(groups); i++) {
        PyObject *g = PyList_GET_ITEM(groups, i);
        PyObject *cls = PyStructSequence_GET_ITEM(g, 2);
        for (int k = 0; k < 4; k++)
            if (PyUnicode_Check(cls) && PyUnicode_CompareWithASCIIString(cls, names[k]) == 0)
                counts[k] += PyLong_AsLong(PyStructSequence_GET_ITEM(g, 3));
    }
    return 0;
}

int summary_render(PyObject *out, const char *title, const char *noun, PyObject *groups)
{
    Py_ssize_t n = PyList_GET_SIZE(groups);
    if (n == 0)
        return 0;
    long counts[4], total = 0;
    class_counts(groups, counts);
    for (int k = 0; k < 4; k++)
        total += counts[k];
    if (explain_line(out, "\n%s: %ld %s%s at %zd site%s: %ld in your code, %ld in library code, "
                     "%ld engine limit%s, %ld fundamental", title, total, noun,
                     total == 1 ? "" : "s", n, n == 1 ? "" : "s", counts[0], counts[1],
                     counts[2], counts[2] == 1 ? "" : "s", counts[3]) < 0)
        return -1;
    for (Py_ssize_t i = 0; i < n && i < SUMMARY_MAX_GROUPS; i++)
        if (render_group(out, PyList_GET_ITEM(groups, i)) < 0)
            return -1;
    if (n > SUMMARY_MAX_GROUPS
        && explain_line(out, "  ... %zd more sites (the list below has every one)",
                        n - SUMMARY_MAX_GROUPS) < 0)
        return -1;
    return 0;
}

/* _C.break_hint(kind, reason, filename=None) -> str: the hint explain
   prints for a break of that kind and reason at a site in filename, for the
   tools that read a recording (the HTML report): one table, one wording. */
static PyObject *py_break_hint(PyObject *self, PyObject *args)
{
    (void)self;
    const char *kind, *reason;
    PyObject *filename = Py_None;
    if (!PyArg_ParseTuple(args, "zs|O:break_hint", &kind, &reason, &filename))
        return NULL;
    const BreakType *bt = break_type_of(kind, reason);
    PyObject *type_id = PyUnicode_FromString(bt->id);
    PyObject *cls = PyUnicode_FromString(break_class_name(break_class_at(bt, filename)));
    PyObject *hint = type_id && cls ? summary_hint(type_id, cls, filename) : NULL;
    Py_XDECREF(type_id);
    Py_XDECREF(cls);
    return hint;
}

static PyMethodDef summary_methods[] = {
    {"break_hint", py_break_hint, METH_VARARGS,
     "break_hint(kind, reason, filename=None) -> str\n--\n\n"
     "The hint explain gives for a break of that kind and reason at a site in filename."},
    {NULL, NULL, 0, NULL},
};

int summary_init(PyObject *module)
{
    BreakGroupType = PyStructSequence_NewType(&break_group_desc);
    if (BreakGroupType == NULL) {
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        return -1;
    }
    if (PyModule_AddFunctions(module, summary_methods) < 0)
        return -1;
    return PyModule_AddObjectRef(module, "BreakGroup", (PyObject *)BreakGroupType);
}
