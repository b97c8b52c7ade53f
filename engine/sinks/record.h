/*
 * record.h -- the engine's end of the SQLite recorder (store/): which Store
 * events go to, and the Python functions that start and stop recording.
 * dynscope/recording.py drives these (record(), stop_recording(),
 * DYNSCOPE_DB, fork and exit handling, the snapshot thread).
 *
 * Invariant: the_store is only read and written with the GIL held; events
 * are submitted with the GIL held, so a Store is never closed while a
 * submit on it runs.
 */
#ifndef DYNSCOPE_RECORD_H
#define DYNSCOPE_RECORD_H

#include "../capture/capture.h"

/* Register the SQLite sink (events.h; it takes events while a Store is
   open) and add the record_* functions to the module.  0 / -1. */
int record_init(PyObject *module);

#endif /* DYNSCOPE_RECORD_H */
