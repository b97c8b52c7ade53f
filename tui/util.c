/*
 * util.c -- what every dyntop file leans on: allocation that cannot fail,
 * the one fatal path (which restores the terminal before it prints, htop
 * XUtils.c fail() -> CRT_done), and the two clocks.  Contract: tui.h.
 */
#include "tui.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

bool tui_curses_active;

void tui_fatal(int status, const char *fmt, ...)
{
    va_list ap;
    if (tui_curses_active) {
        endwin();
        tui_curses_active = false;
    }
    fputs("dyntop: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(status);
}

void tui_assert_fail(const char *expr, const char *file, int line)
{
    if (tui_curses_active) {
        endwin();
        tui_curses_active = false;
    }
    fprintf(stderr, "dyntop: assertion failed: %s (%s:%d)\n", expr, file, line);
    abort();
}

void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (p == NULL)
        tui_fatal(1, "out of memory (%zu bytes)", n);
    return p;
}

void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (p == NULL)
        tui_fatal(1, "out of memory (%zu x %zu bytes)", n, size);
    return p;
}

void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (q == NULL)
        tui_fatal(1, "out of memory (%zu bytes)", n);
    return q;
}

char *xstrdup(const char *s)
{
    size_t n = strlen(s ? s : "") + 1;
    char *d = xmalloc(n);
    memcpy(d, s ? s : "", n);
    return d;
}

char *xasprintf(const char *fmt, ...)
{
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        n = 0;
    char *s = xmalloc((size_t)n + 1);
    vsnprintf(s, (size_t)n + 1, fmt, ap2);
    va_end(ap2);
    return s;
}

long long tui_wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

double tui_mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}
