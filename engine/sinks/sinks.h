/*
 * sinks.h -- engine/sinks/, the engine's own listeners: the in-memory event
 * log, DYNSCOPE_LOGS lines and the LTTng sink (event_log.c), and the SQLite
 * recorder's engine end (record.c).  Each registers with the event
 * interface (capture/events.h) for the kinds it wants; nothing below this
 * room names a sink.
 * record.c: which Store events go to, and the Python functions that start
 * and stop recording; dynscope/recording.py drives these (record(),
 * stop_recording(), DYNSCOPE_DB, fork and exit handling, the snapshot
 * thread).  Invariant: the_store is only read and written with the GIL
 * held; events are submitted with the GIL held, so a Store is never closed
 * while a submit on it runs.
 * May include: every room of engine/ below it, ../../event/, ../../trace/,
 * ../../store/.  Included only by the layers above the engine (binding/).
 */
#ifndef DYNSCOPE_SINKS_H
#define DYNSCOPE_SINKS_H

#include "../capture/events.h"

/* Register the built-in sinks and add _C.events(), _C.clear_events(),
   _C.event_stats(), _C.set_log_sink(), _C.trace_init(), _C.trace_loaded()
   to module.  0 / -1. */
int event_log_init(PyObject *module);

/* Register the SQLite sink (events.h; it takes events while a Store is
   open) and add the record_* functions to the module.  0 / -1. */
int record_init(PyObject *module);

#endif /* DYNSCOPE_SINKS_H */
