/*
 * binding.h -- binding/, the top of the build: the dynscope._C module
 * (module.c creates it) and the engine's Python functions and types
 * (engine.c).  The one folder that names every layer; nothing includes it
 * but its own files.
 */
#ifndef DYNSCOPE_BINDING_H
#define DYNSCOPE_BINDING_H

#include <Python.h>

/* Add the engine's functions, types and exceptions to the dynscope._C
   module (engine.c; module.c creates the module), register the engine's
   own event sinks and the SQLite recorder.  0 / -1. */
int engine_module_init(PyObject *module);

#endif /* DYNSCOPE_BINDING_H */
