/*
 * profiler_ranges.c -- captured calls as torch.profiler ranges: while a
 * torch profiler runs, each call the chain runner (hook.c) answers is a
 * record_function range named "dynscope [3/1] f" (the entry it began at),
 * so that a profile shows which ops ran inside which captured call.
 * dynscope/profiler.py hands over torch's range functions when a profiler
 * starts and takes them back when it stops; with none running the hook
 * reads one NULL pointer.  A failing range call is reported once and
 * dropped: profiling never changes the program.
 */
#include "capture_int.h"

PyObject *profiler_enter_fn;            /* strong or NULL: _record_function_enter_new */
static PyObject *profiler_exit_fn;      /* strong or NULL: _record_function_exit._RecordFunction */
PyObject **profiler_slot;               /* GIL: where try_entry puts the range of the
                                           entry about to run (hook.c), or NULL */

void capture_set_profiler_ranges(PyObject *enter, PyObject *exit)
{
    bool on = enter != NULL && exit != NULL && enter != Py_None && exit != Py_None;
    Py_XSETREF(profiler_enter_fn, on ? Py_NewRef(enter) : NULL);
    Py_XSETREF(profiler_exit_fn, on ? Py_NewRef(exit) : NULL);
}

bool capture_profiler_ranges_on(void)
{
    return profiler_enter_fn != NULL;
}

/* Report a failed range call once; the exception is dropped. */
static void range_failed(void)
{
    static bool reported;
    if (!reported) {
        reported = true;
        warn_internal_error("a torch.profiler range around a captured call");
    }
    PyErr_Clear();
}

PyObject *profiler_range_begin(CacheEntry *e)
{
    if (profiler_enter_fn == NULL)
        return NULL;
    PyObject *name = PyUnicode_FromFormat("dynscope [%d/%d] %S", e->frame_id,
                                          e->frame_compile_id,
                                          e->shown_as ? e->shown_as
                                          : e->code_name ? e->code_name : Py_None);
    PyObject *handle = name ? PyObject_CallFunctionObjArgs(profiler_enter_fn, name, Py_None,
                                                           NULL) : NULL;
    Py_XDECREF(name);
    if (handle == NULL)
        range_failed();
    return handle;
}

void profiler_range_end(PyObject *handle)
{
    if (handle == NULL)
        return;
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);        /* the call's own exception, if any */
    PyObject *r = profiler_exit_fn ? PyObject_CallOneArg(profiler_exit_fn, handle) : NULL;
    if (r == NULL && profiler_exit_fn != NULL)
        range_failed();
    Py_XDECREF(r);
    Py_DECREF(handle);
    PyErr_Restore(type, value, tb);
}
