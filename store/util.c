/*
 * util.c -- small helpers the store's files share: malloc'd error messages,
 * clocks, the assert reporter.  Contract: store_int.h.
 */
#include "store_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

void store_set_error(char **errmsg, const char *fmt, ...)
{
    if (errmsg == NULL)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *m = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (m != NULL) {
        va_start(ap, fmt);
        vsnprintf(m, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    free(*errmsg);   /* a later, more precise message replaces an earlier one */
    *errmsg = m;     /* NULL if even this failed: the caller still sees -1 */
}

static uint64_t clock_ns(clockid_t id)
{
    struct timespec ts;
    if (clock_gettime(id, &ts) != 0)
        return 0;
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t store_wall_ns(void) { return clock_ns(CLOCK_REALTIME); }
uint64_t store_mono_ns(void) { return clock_ns(CLOCK_MONOTONIC); }

void store_assert_fail(const char *expr, const char *file, int line)
{
    fprintf(stderr, "dynscope: store: assertion failed: %s (%s:%d)\n", expr, file, line);
    abort();
}
