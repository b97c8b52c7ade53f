/*
 * base.h -- engine/base/, the floor of the engine: the project assert, the
 * clock, and FrameView (what guards and plans read of a frame).  Beside it
 * in this room: pycompat.h (the one door to CPython's internals),
 * tensorlib.h (the tensor libraries' types) and breaks.h (the break-type
 * registry's engine side).  Design: docs/architecture.md ("Rooms").
 *
 * Invariants every room of engine/ keeps:
 *   - Everything runs with the GIL held.  Any call into Python may
 *     release it, so a cache entry that is in use is kept alive by a strong
 *     reference, never by a borrowed pointer into a list another thread can
 *     change.
 *   - Every PyObject * field says whether it is strong or borrowed.
 *   - Plain-C functions return 0 / -1 (or a documented status); functions that
 *     return PyObject * return NULL with an exception set on error.
 *   - Only pycompat.h touches CPython internals (frames, opcodes).
 *   - Dependencies point down: base < graph < guards < plan < translate <
 *     cache < capture < sinks; a room includes and calls only its own room and the
 *     rooms below it (scripts/check_layout.py checks includes and symbols).
 * May include: Python, the C library, ../../event/.  Nothing of engine/.
 */
#ifndef DYNSCOPE_BASE_H
#define DYNSCOPE_BASE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdbool.h>
#include <stdint.h>

/* ------------------------------------------------------------------ */
/* Assertions: always on in debug builds, compiled out with NDEBUG.    */

#ifdef NDEBUG
#define ENGINE_ASSERT(x) ((void)0)
#else
#define ENGINE_ASSERT(x) \
    ((x) ? (void)0 : engine_assert_fail(#x, __FILE__, __LINE__))
#endif
void engine_assert_fail(const char *expr, const char *file, int line);

/* Monotonic nanoseconds (CLOCK_MONOTONIC). Cannot fail. */
uint64_t engine_now_ns(void);
/* Wall-clock nanoseconds since the epoch (CLOCK_REALTIME). Cannot fail. */
uint64_t engine_wall_ns(void);

/* A cheap monotonic tick counter for the hot path (the TSC on x86-64, else
   nanoseconds); engine_ticks_to_ns converts a tick count (calibrated
   against CLOCK_MONOTONIC since engine_clock_init).  Cannot fail. */
#if defined(__x86_64__)
#include <x86intrin.h>
static inline uint64_t engine_ticks(void) { return __rdtsc(); }
#else
static inline uint64_t engine_ticks(void) { return engine_now_ns(); }
#endif
uint64_t engine_ticks_to_ns(uint64_t ticks);
/* The same with the ratio measured once (after its first computation):
   no clock read, for the hot path. */
uint64_t engine_ticks_to_ns_fast(uint64_t ticks);

/* The clocks of a compile's phases (CacheEntry: trace_ns, guards_ns, ...).
   `make CFLAGS_EXTRA=-DDYNSCOPE_NO_PHASE_TIMING` builds them out (every
   phase then reads 0), the build docs/performance.md compares with to
   measure what timing the phases costs. */
#ifdef DYNSCOPE_NO_PHASE_TIMING
static inline uint64_t engine_phase_ns(void) { return 0; }
static inline uint64_t engine_phase_ticks(void) { return 0; }
#else
static inline uint64_t engine_phase_ns(void) { return engine_now_ns(); }
static inline uint64_t engine_phase_ticks(void) { return engine_ticks(); }
#endif

/* ------------------------------------------------------------------ */
/* Frame views (guards.c, plan.c).                                     */

/*
 * What guards and plans read: the inputs of a frame at its start (or at a
 * resume point).  All pointers are borrowed for the duration of one lookup.
 */
typedef struct FrameView {
    PyCodeObject *code;          /* borrowed */
    PyObject *const *locals;     /* borrowed: the frame's slots (code_nslots: fast locals, then
                                    cell variables as cells); an item is NULL when unbound */
    int nlocals;
    PyObject *const *stack;      /* borrowed: value stack of a resume frame, or NULL */
    int nstack;
    PyObject *globals;           /* borrowed: the frame's globals dict */
    PyObject *builtins;          /* borrowed: the frame's builtins dict */
    PyObject *closure;           /* borrowed: tuple of cells of the frame's function, or NULL */
    PyObject *iter_lists;        /* borrowed: a resume frame's incoming loop iterators
                                    that read lists (PlanOutcome.iter_lists), or NULL */
} FrameView;


/* Take the clock's base (ticks and ns) once, at module init, for
   engine_ticks_to_ns.  Cannot fail. */
void engine_clock_init(void);

/* A byte count a switch gives (text: getenv's result, so that the read
   stays visible where the switch is read): its value when it is a whole
   non-negative decimal number, else `fallback` (NULL, empty or
   malformed).  Cannot fail. */
Py_ssize_t engine_bytes_of(const char *text, Py_ssize_t fallback);

#endif /* DYNSCOPE_BASE_H */
