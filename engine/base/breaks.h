/*
 * breaks.h -- the engine's side of the break-type registry
 * (event/break_types.h holds the table): the library-site rule, which needs
 * Python's sysconfig, and the table as Python objects (_C.break_types()).
 */
#ifndef DYNSCOPE_BREAKS_H
#define DYNSCOPE_BREAKS_H

#ifndef PY_SSIZE_T_CLEAN
#define PY_SSIZE_T_CLEAN
#endif
#include <Python.h>
#include <stdbool.h>

#include "../../event/break_types.h"

/* The class of a break of type bt at a site in file `filename` (may be
   NULL): library code when the file belongs to an installed package or
   the standard library and bt's class is your code or fundamental.
   Cannot fail (an error reading sysconfig leaves every site the user's). */
BreakClass break_class_at(const BreakType *bt, PyObject *filename);

/* Whether filename is in installed code: under sysconfig's purelib,
   platlib, stdlib or platstdlib.  Cannot fail. */
bool break_site_is_installed(PyObject *filename);

/* Add _C.break_types() (the table as a list of dicts, for docs/breaks.md
   and the tests) and _C.break_type_of(kind, reason, filename) to module.
   0 / -1. */
int breaks_init(PyObject *module);

#endif /* DYNSCOPE_BREAKS_H */
