/*
 * base.c -- the engine's floor (base.h): the project assert and the clock.
 * Every room of engine/ may call these; they call nothing of the engine.
 */
#include "base.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* The tick clock's calibration: taken by engine_clock_init (module init);
   ns_per_tick 0 until first measured.  GIL. */
static struct {
    uint64_t base_ticks, base_ns;
    double ns_per_tick;
} clock_base;

void engine_assert_fail(const char *expr, const char *file, int line)
{
    fprintf(stderr, "dynscope: assertion failed: %s (%s:%d)\n", expr, file, line);
    abort();
}

uint64_t engine_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t engine_wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void engine_clock_init(void)
{
    clock_base.base_ticks = engine_ticks();
    clock_base.base_ns = engine_now_ns();
}

/* Known cost: the first call within 2 ms of engine_clock_init busy-waits
   out the rest of those 2 ms, once (cache.c's entry_get_guard_ns reaches it
   through a getter); later calls re-measure the ratio without waiting. */
uint64_t engine_ticks_to_ns(uint64_t ticks)
{
#if defined(__x86_64__)
    /* the ratio of elapsed ns to elapsed ticks since init; the first read
       within 2 ms of init waits out the rest of those 2 ms (once) */
    uint64_t n = engine_now_ns();
    while (n - clock_base.base_ns < 2000000)
        n = engine_now_ns();
    uint64_t t = engine_ticks();
    double ns_per_tick = (double)(n - clock_base.base_ns) / (double)(t - clock_base.base_ticks);
    clock_base.ns_per_tick = ns_per_tick;
    return (uint64_t)((double)ticks * ns_per_tick);
#else
    return ticks;
#endif
}

uint64_t engine_ticks_to_ns_fast(uint64_t ticks)
{
#if defined(__x86_64__)
    if (clock_base.ns_per_tick == 0.0)
        return engine_ticks_to_ns(ticks);
    return (uint64_t)((double)ticks * clock_base.ns_per_tick);
#else
    return ticks;
#endif
}

Py_ssize_t engine_bytes_of(const char *text, Py_ssize_t fallback)
{
    if (text == NULL || *text == '\0')
        return fallback;
    char *end;
    long long v = strtoll(text, &end, 10);
    return *end == '\0' && v >= 0 ? (Py_ssize_t)v : fallback;
}
