/*
 * module.c -- the dynscope._C extension module: it creates the module and
 * lets each layer add its part, bottom up (the engine with its sinks and
 * the SQLite recorder, then explain).  The only file that names every
 * layer; the layers name only those below them (docs/architecture.md).
 */
#include "../engine/engine.h"
#include "binding.h"
#include "../explain/explain.h"

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "dynscope._C",
    .m_doc = "dynscope's capture engine (C).  Use the dynscope package, not this module.",
    .m_size = -1,
};

PyMODINIT_FUNC PyInit__C(void)
{
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL)
        return NULL;
    if (engine_module_init(m) < 0 || explain_init(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
