/*
 * fmt.c -- text for the terminal: strings from the database are sanitized
 * (control characters become spaces, undecodable bytes '?'), measured in
 * terminal columns (wcwidth) and fitted into exact column widths, cut with a
 * one-column mark; numbers and times are formatted to fit narrow columns.
 * Contract: tui.h.  Nothing here touches curses, so batch mode shares it.
 */
#include "tui.h"

#include <langinfo.h>
#include <limits.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <wchar.h>

static bool utf8_locale;

void fmt_init_locale(void)
{
    const char *cs = nl_langinfo(CODESET);
    utf8_locale = cs != NULL && (strcmp(cs, "UTF-8") == 0 || strcmp(cs, "utf8") == 0);
}

bool fmt_utf8(void)
{
    return utf8_locale;
}

typedef FmtCell Cell;

/* Decode src into cells (*out: a malloc'd array when *out != stackbuf).
   Returns the number of cells; *total receives the width.  styled: "\x01X"
   switches the class of the cells that follow to X - 'A' (see tui_put_styled)
   and makes no cell; *cls starts as the class in effect. */
static size_t decode(const char *src, Cell *stackbuf, size_t nstack, Cell **out, int *total,
                     bool styled, int cls)
{
    size_t len = strlen(src), n = 0, cap = nstack;
    Cell *cells = stackbuf;
    mbstate_t ps;
    memset(&ps, 0, sizeof ps);
    *total = 0;
    for (size_t i = 0; i < len;) {
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 64;
            Cell *nc = xmalloc(ncap * sizeof *nc);
            memcpy(nc, cells, n * sizeof *nc);
            if (cells != stackbuf)
                free(cells);
            cells = nc;
            cap = ncap;
        }
        unsigned char c = (unsigned char)src[i];
        Cell cell;
        cell.cls = (unsigned char)cls;
        if (styled && c == 0x01) {
            if (i + 1 < len && src[i + 1] >= 'A' && src[i + 1] < 'A' + AC__COUNT)
                cls = src[i + 1] - 'A';
            i += 2;
            continue;
        }
        if (c < 0x80) {
            cell.wc = (c < 0x20 || c == 0x7f) ? L' ' : (wchar_t)c;
            cell.w = 1;
            i++;
        }
        else {
            wchar_t wc;
            size_t k = mbrtowc(&wc, src + i, len - i, &ps);
            if (k == (size_t)-1 || k == (size_t)-2 || k == 0) {
                memset(&ps, 0, sizeof ps);
                cell.wc = L'?';
                cell.w = 1;
                i++;
            }
            else {
                int w = wcwidth(wc);
                if (w < 0) {
                    wc = L'?';
                    w = 1;
                }
                cell.wc = wc;
                cell.w = w;
                i += k;
            }
        }
        cells[n++] = cell;
        *total += cell.w;
    }
    *out = cells;
    return n;
}

/* Append one character; false when dst is full. */
static bool put_wc(char *dst, size_t cap, size_t *pos, wchar_t wc)
{
    char buf[MB_LEN_MAX];
    size_t k;
    if (wc < 0x80) {
        buf[0] = (char)wc;
        k = 1;
    }
    else {
        mbstate_t ps;
        memset(&ps, 0, sizeof ps);
        k = wcrtomb(buf, wc, &ps);
        if (k == (size_t)-1) {
            buf[0] = '?';
            k = 1;
        }
    }
    if (*pos + k + 1 > cap)
        return false;
    memcpy(dst + *pos, buf, k);
    *pos += k;
    return true;
}

static int put_spaces(char *dst, size_t cap, size_t *pos, int n)
{
    int done = 0;
    while (done < n && put_wc(dst, cap, pos, L' '))
        done++;
    return done;
}

static int put_mark(char *dst, size_t cap, size_t *pos)
{
    if (utf8_locale && put_wc(dst, cap, pos, (wchar_t)0x2026))
        return 1;
    return put_wc(dst, cap, pos, L'~') ? 1 : 0;
}

/* Emit cells[from, to) ; returns columns written. */
static int put_cells(char *dst, size_t cap, size_t *pos, const Cell *cells, size_t from, size_t to)
{
    int cols = 0;
    for (size_t i = from; i < to; i++) {
        if (!put_wc(dst, cap, pos, cells[i].wc))
            break;
        cols += cells[i].w;
    }
    return cols;
}

int fmt_fit(char *dst, size_t cap, const char *src, int width, int flags)
{
    Cell stackbuf[256], *cells;
    size_t pos = 0;
    int total, cols = 0;
    if (cap == 0)
        return 0;
    dst[0] = '\0';
    if (width <= 0)
        return 0;
    size_t n = decode(src ? src : "", stackbuf, 256, &cells, &total, false, 0);
    if (total <= width) {
        int pad = (flags & FMT_NOPAD) ? 0 : width - total;
        if (flags & FMT_RIGHT)
            cols += put_spaces(dst, cap, &pos, pad);
        cols += put_cells(dst, cap, &pos, cells, 0, n);
        if (!(flags & FMT_RIGHT))
            cols += put_spaces(dst, cap, &pos, pad);
    }
    else if (flags & FMT_TRUNC_START) {
        int avail = width - 1, used = 0;
        size_t from = n;
        while (from > 0 && used + cells[from - 1].w <= avail)
            used += cells[--from].w;
        cols += put_mark(dst, cap, &pos);
        cols += put_spaces(dst, cap, &pos, avail - used);
        cols += put_cells(dst, cap, &pos, cells, from, n);
    }
    else {
        int avail = width - 1, used = 0;
        size_t to = 0;
        while (to < n && used + cells[to].w <= avail)
            used += cells[to++].w;
        cols += put_cells(dst, cap, &pos, cells, 0, to);
        cols += put_mark(dst, cap, &pos);
        if (!(flags & FMT_NOPAD))
            cols += put_spaces(dst, cap, &pos, avail - used);
    }
    dst[pos] = '\0';
    if (cells != stackbuf)
        free(cells);
    return cols;
}

int fmt_width(const char *src)
{
    Cell stackbuf[256], *cells;
    int total;
    decode(src ? src : "", stackbuf, 256, &cells, &total, false, 0);
    if (cells != stackbuf)
        free(cells);
    return total;
}

size_t fmt_cells(const char *s, int cls, FmtCell **cells, int *width)
{
    Cell dummy[1];
    size_t n = decode(s ? s : "", dummy, 0, cells, width, true, cls);
    if (*cells == dummy)
        *cells = NULL;
    return n;
}

int fmt_put_cells(char *dst, size_t cap, const FmtCell *cells, size_t n)
{
    size_t pos = 0;
    if (cap == 0)
        return 0;
    int cols = put_cells(dst, cap, &pos, cells, 0, n);
    dst[pos] = '\0';
    return cols;
}

int fmt_width_styled(const char *src)
{
    Cell stackbuf[256], *cells;
    int total;
    decode(src ? src : "", stackbuf, 256, &cells, &total, true, 0);
    if (cells != stackbuf)
        free(cells);
    return total;
}

char *fmt_sanitize(const char *src)
{
    char *d = xstrdup(src ? src : "");
    for (char *p = d; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = ' ';
    return d;
}

void fmt_count(char *dst, size_t cap, long long v, int width)
{
    static const char units[] = "kMGTPE";
    int n = snprintf(dst, cap, "%lld", v);
    if (n <= width || width <= 0)
        return;
    double x = (double)v;
    for (int u = 0; units[u]; u++) {
        x /= 1000.0;
        n = snprintf(dst, cap, "%.1f%c", x, units[u]);
        if (n <= width && x < 100)
            return;
        n = snprintf(dst, cap, "%.0f%c", x, units[u]);
        if (n <= width)
            return;
    }
}

void fmt_ms(char *dst, size_t cap, long long ns, int width)
{
    double ms = (double)ns / 1e6;
    int n;
    if (ms < 10)
        n = snprintf(dst, cap, "%.2f", ms);
    else if (ms < 1000)
        n = snprintf(dst, cap, "%.1f", ms);
    else
        n = snprintf(dst, cap, "%.0f", ms);
    if (width > 0 && n > width)
        fmt_count(dst, cap, (long long)(ms + 0.5), width);
}

void fmt_duration(char *dst, size_t cap, long long ns)
{
    double s = (double)ns / 1e9;
    if (s < 0)
        s = 0;
    if (s < 10)
        snprintf(dst, cap, "%.2f s", s);
    else if (s < 60)
        snprintf(dst, cap, "%.1f s", s);
    else if (s < 3600)
        snprintf(dst, cap, "%d min %d s", (int)(s / 60), (int)s % 60);
    else
        snprintf(dst, cap, "%d h %d min", (int)(s / 3600), ((int)s % 3600) / 60);
}

void fmt_ns(char *dst, size_t cap, long long ns)
{
    if (ns < 1000)
        snprintf(dst, cap, "%lld ns", ns);
    else if (ns < 1000000)
        snprintf(dst, cap, "%.1f us", (double)ns / 1e3);
    else if (ns < 1000000000LL)
        snprintf(dst, cap, "%.2f ms", (double)ns / 1e6);
    else
        snprintf(dst, cap, "%.2f s", (double)ns / 1e9);
}

void fmt_break_cost(char *dst, size_t cap, const StoreBreakCost *c)
{
    char ns[32] = "-", share[16] = "";
    if (c->known) {
        fmt_ns(ns, sizeof ns, c->ns);
        if (c->share < 0)
            snprintf(share, sizeof share, "-");
        else          /* a sampled estimate can pass 100% a little: no more than 999% */
            snprintf(share, sizeof share, "%.0f%%", c->share < 9.99 ? c->share * 100 : 999.0);
    }
    snprintf(dst, cap, "%9s  %4s", ns, share);
}

void fmt_break_cost_parts(char *dst, size_t cap, const StoreBreakCost *c, const char *whose)
{
    char ns[32], share[128] = "";
    if (!c->known) {
        snprintf(dst, cap, "%s", "");
        return;
    }
    fmt_ns(ns, sizeof ns, c->ns);
    if (c->share >= 0)
        snprintf(share, sizeof share, ", %.0f%% of %s time", c->share * 100, whose);
    snprintf(dst, cap, "%s outside graphs (eager steps, resumes)%s; %lld more graph launch%s; "
             "from %lld timed call%s", ns, share, c->extra_graphs,
             c->extra_graphs == 1 ? "" : "es", c->samples, c->samples == 1 ? "" : "s");
}

void fmt_since(char *dst, size_t cap, long long ns)
{
    double s = (double)ns / 1e9;
    if (s < 10)
        snprintf(dst, cap, "+%.1f ms", s * 1e3);
    else
        snprintf(dst, cap, "+%.3f s", s);
}

void fmt_where(char *dst, size_t cap, const char *filename, int lineno, int width)
{
    char where[600];
    if (filename[0] == '\0' || lineno <= 0) {
        if (cap > 0)
            dst[0] = '\0';
        return;
    }
    const char *base = strrchr(filename, '/');
    snprintf(where, sizeof where, "%s:%d", base != NULL && base[1] ? base + 1 : filename, lineno);
    fmt_fit(dst, cap, where, width, FMT_TRUNC_START | FMT_NOPAD);
}

void fmt_clock(char *dst, size_t cap, long long wall_ns)
{
    time_t t = (time_t)(wall_ns / 1000000000LL), now = time(NULL);
    struct tm tm, tnow;
    localtime_r(&t, &tm);
    localtime_r(&now, &tnow);
    if (tm.tm_year == tnow.tm_year && tm.tm_yday == tnow.tm_yday)
        strftime(dst, cap, "%H:%M:%S", &tm);
    else
        strftime(dst, cap, "%Y-%m-%d %H:%M:%S", &tm);
}

static int fold(int c)
{
    return (c >= 'A' && c <= 'Z') ? c - 'A' + 'a' : c;
}

char *fmt_trim(char *s)
{
    size_t len = strlen(s), lead = 0;
    while (len > 0 && s[len - 1] == ' ')
        s[--len] = '\0';
    while (s[lead] == ' ')
        lead++;
    memmove(s, s + lead, len - lead + 1);
    return s;
}

bool fmt_contains(const char *hay, const char *needle)
{
    if (needle == NULL || *needle == '\0')
        return true;
    for (; *hay; hay++) {
        const char *h = hay, *n = needle;
        while (*h && *n && fold((unsigned char)*h) == fold((unsigned char)*n)) {
            h++;
            n++;
        }
        if (*n == '\0')
            return true;
    }
    return false;
}
