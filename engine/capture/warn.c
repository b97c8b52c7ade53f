/*
 * warn.c -- what the engine tells the user on stderr or through the
 * warnings module, at most once per cause: internal errors (a frame then
 * runs without capture) and the CacheLimitWarning of a function.
 *
 * Invariants: internal_errors is a set (strong) of the `what` strings
 * already reported; nothing here raises into the program or calls
 * sys.excepthook.  GIL protected.
 */
#include "events.h"

#include <stdio.h>

static PyObject *internal_errors;      /* strong: set of str */
static unsigned long long internal_error_count;
static PyObject *CacheLimitWarning;    /* strong: warning category */

/* "dynscope: internal error while WHAT ..." on the process's stderr, not
   through sys: PyErr_Print would set sys.last_value and call
   sys.excepthook, which the program can see.  Clears the error. */
static void print_internal_error(const char *what)
{
    if (!PyErr_Occurred()) {
        fprintf(stderr, "dynscope: internal error while %s; the frame runs "
                        "without capture (reported once)\n", what);
        return;
    }
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyObject *text = value ? PyObject_Repr(value) : NULL;
    const char *s = text ? PyUnicode_AsUTF8(text) : NULL;
    PyErr_Clear();
    fprintf(stderr, "dynscope: internal error while %s; the frame runs "
                    "without capture (reported once): %s: %s\n", what,
            type ? ((PyTypeObject *)type)->tp_name : "?", s ? s : "?");
    Py_XDECREF(text);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
}

void warn_internal_error(const char *what)
{
    internal_error_count++;
    PyObject *key = PyUnicode_FromString(what);
    int seen = key && internal_errors ? PySet_Contains(internal_errors, key) : -1;
    if (seen == 0) {
        if (PySet_Add(internal_errors, key) < 0)
            PyErr_Clear();
        print_internal_error(what);
    }
    Py_XDECREF(key);
    PyErr_Clear();
}

unsigned long long warn_internal_error_count(void)
{
    return internal_error_count;
}

PyObject *warn_exception_reason(void)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    PyObject *r = type != NULL && PyErr_GivenExceptionMatches(type, backend_failed_error())
        ? PyObject_Str(value)          /* "backend 'x' raised ...": the backend's, not the trace's */
        : PyUnicode_FromFormat("%s raised while tracing: %S",
                               type ? ((PyTypeObject *)type)->tp_name : "?",
                               value ? value : Py_None);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    if (r == NULL)
        PyErr_Clear();
    return r;
}

/* The user's one warning per function (its resume points reach the limit
   on their own).  The warnings machinery runs Python: inside the engine, so
   it is never captured. */
void warn_cache_limit(CodeCache *cc, CacheFrame *cf)
{
    if (!engine.config.cache_limit_warning || cc->limit_warned)
        return;
    cc->limit_warned = true;
    ThreadCapture *tc = capture_state();
    PyObject *exc_type, *exc_value, *exc_tb;
    tc->in_engine++;
    PyErr_Fetch(&exc_type, &exc_value, &exc_tb);
    if (PyErr_WarnFormat(CacheLimitWarning, 1,
                         "dynscope: %U (%U:%d) hit config.cache_size_limit (%d); "
                         "it now runs without capture. Last failing guard: %S",
                         cc->code->co_qualname, cc->code->co_filename,
                         cc->code->co_firstlineno, engine.config.cache_size_limit,
                         cf->last_failure ? cf->last_failure : Py_None) < 0)
        PyErr_WriteUnraisable(NULL);
    PyErr_Restore(exc_type, exc_value, exc_tb);
    tc->in_engine--;
}

int warn_init(PyObject *module)
{
    internal_errors = PySet_New(NULL);
    if (internal_errors == NULL)
        return -1;
    CacheLimitWarning = PyErr_NewExceptionWithDoc(
        "dynscope._C.CacheLimitWarning",
        "A function reached config.cache_size_limit and now runs without capture.",
        PyExc_UserWarning, NULL);
    if (CacheLimitWarning == NULL
        || PyModule_AddObjectRef(module, "CacheLimitWarning", CacheLimitWarning) < 0)
        return -1;
    return 0;
}
