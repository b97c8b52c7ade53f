/*
 * header.c -- the summary header: which file and run, live or ended, the
 * totals (sums of the table's rows, so they always agree with it), rates
 * per second while the run records, and the state of the database file
 * (gone, unreadable) on its last line.  With several files (a job's
 * ranks) the first line says how many files and runs, which ranks, on how
 * many hosts, and how many runs are still live; totals are over every
 * file.  Batch mode prints the same lines without styling.  Contract:
 * tui.h.
 */
#include "tui.h"

#include <libgen.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S(c) TUI_STYLE(c)

/* Append printf output to line (cap 512). */
static void cat(char *line, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void cat(char *line, const char *fmt, ...)
{
    size_t n = strlen(line);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + n, 512 - n, fmt, ap);
    va_end(ap);
}

/* "Label value" with an optional rate. */
static void item(char *line, const char *label, long long v, bool rate, double per_s)
{
    cat(line, "%s%s %s%lld", S(AC_HEADER_LABEL), label, S(AC_HEADER_VALUE), v);
    if (rate)
        cat(line, "%s (%.1f/s)", S(AC_DIM), per_s);
    cat(line, "%s   ", S(AC_NORMAL));
}

static int cmp_ll(const void *pa, const void *pb)
{
    long long a = *(const long long *)pa, b = *(const long long *)pb;
    return (a > b) - (a < b);
}

/* The ranks of the shown runs as "0-3", "0-2,5" (at most ~40 columns),
   or "" when a shown run has none. */
static void rank_list(const Model *m, char *dst, size_t cap)
{
    size_t n = 0, cap_ranks = 64;
    long long *ranks = xmalloc(cap_ranks * sizeof *ranks);
    dst[0] = '\0';
    for (size_t fi = 0; fi < m->nfiles; fi++) {
        const ModelFile *f = &m->files[fi];
        for (size_t i = 0; i < f->nruns; i++) {
            const RunInfo *r = &f->runs[i];
            if (f->run_id != 0 && r->run_id != f->run_id)
                continue;
            if (!r->has_rank)
                goto out;
            if (n == cap_ranks)
                ranks = xrealloc(ranks, (cap_ranks *= 2) * sizeof *ranks);
            ranks[n++] = r->rank;
        }
    }
    qsort(ranks, n, sizeof *ranks, cmp_ll);
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j + 1 < n && ranks[j + 1] <= ranks[j] + 1)
            j++;
        size_t used = strlen(dst);
        if (used > 40) {
            snprintf(dst + used, cap - used, ",%s", fmt_utf8() ? "\xe2\x80\xa6" : "~");
            break;
        }
        snprintf(dst + used, cap - used, i == j ? "%s%lld" : "%s%lld-%lld", used ? "," : "",
                 ranks[i], ranks[j]);
        i = j + 1;
    }
out:
    free(ranks);
}

/* The first line with several files: how many, which runs, their state. */
static void files_line(const Model *m, char *line)
{
    char dir[4 * 30 + 1] = "", ranks[64];
    /* The files' common directory, when they share one (a job's output). */
    char *first = xstrdup(m->files[0].path);
    const char *d0 = dirname(first);
    bool same = true;
    for (size_t i = 1; i < m->nfiles && same; i++) {
        char *other = xstrdup(m->files[i].path);
        same = strcmp(dirname(other), d0) == 0;
        free(other);
    }
    if (same)
        fmt_fit(dir, sizeof dir, d0, 30, FMT_TRUNC_START | FMT_NOPAD);
    free(first);
    cat(line, "%sdyntop%s  %zu files%s%s  ", S(AC_HEADER_VALUE), S(AC_NORMAL), m->nfiles,
        dir[0] ? " in " : "", dir);
    size_t runs = model_shown_runs(m), live = 0, gone = 0;
    if (runs == 0) {
        cat(line, "%sno runs recorded yet%s", S(AC_DIM), S(AC_NORMAL));
        return;
    }
    for (size_t fi = 0; fi < m->nfiles; fi++)
        for (size_t i = 0; i < m->files[fi].nruns; i++) {
            const RunInfo *r = &m->files[fi].runs[i];
            if (m->files[fi].run_id != 0 && r->run_id != m->files[fi].run_id)
                continue;
            live += r->ended_at == 0 && !r->pid_gone;
            gone += r->ended_at == 0 && r->pid_gone;
        }
    rank_list(m, ranks, sizeof ranks);
    cat(line, "%s%zu run%s%s", S(AC_HEADER_VALUE), runs, runs == 1 ? "" : "s", S(AC_DIM));
    if (ranks[0])
        cat(line, " (rank%s %s)", strchr(ranks, ',') || strchr(ranks, '-') ? "s" : "", ranks);
    if (m->nhosts > 1)
        cat(line, " on %zu hosts", m->nhosts);
    cat(line, "%s  ", S(AC_NORMAL));
    if (live > 0)
        cat(line, "%slive%s", S(AC_HEADER_LIVE), S(AC_DIM));
    else if (gone > 0)
        cat(line, "%snot ended: process gone%s", S(AC_HEADER_WARN), S(AC_DIM));
    else
        cat(line, "%sended%s", S(AC_HEADER_VALUE), S(AC_DIM));
    if ((live > 0 && live < runs) || (live == 0 && gone > 0 && gone < runs))
        cat(line, " (%zu of %zu runs)", live > 0 ? live : gone, runs);
    cat(line, "%s", S(AC_NORMAL));
}

/* The first line's left part: program, file, run and its state. */
static void run_line(const Model *m, char *line)
{
    char when[64], dur[64], path[4 * 40 + 1];
    if (m->nfiles > 1) {
        files_line(m, line);
        return;
    }
    const ModelFile *f = &m->files[0];
    /* A long path keeps its end (the file name); no style switches from it. */
    fmt_fit(path, sizeof path, f->path, 40, FMT_TRUNC_START | FMT_NOPAD);
    cat(line, "%sdyntop%s  %s  ", S(AC_HEADER_VALUE), S(AC_NORMAL), path);
    if (f->nruns == 0) {
        cat(line, "%sno runs recorded yet%s", S(AC_DIM), S(AC_NORMAL));
        return;
    }
    if (f->run_id == 0) {
        cat(line, "%sall %zu runs%s  ", S(AC_HEADER_VALUE), f->nruns, S(AC_NORMAL));
        cat(line, "%s%s%s", model_live(m) ? S(AC_HEADER_LIVE) : S(AC_HEADER_VALUE),
            model_live(m) ? "live" : "ended", S(AC_NORMAL));
        return;
    }
    const RunInfo *r = model_run(m, 0, f->run_id);
    if (r == NULL) {
        cat(line, "%sno runs recorded yet%s", S(AC_DIM), S(AC_NORMAL));
        return;
    }
    cat(line, "%srun %s%lld", S(AC_HEADER_LABEL), S(AC_HEADER_VALUE), r->run_id);
    if (f->nruns > 1)
        cat(line, " of %zu", f->nruns);
    cat(line, "%s pid %lld  ", S(AC_DIM), r->pid);
    fmt_clock(when, sizeof when, r->started_at);
    if (r->ended_at) {
        fmt_duration(dur, sizeof dur, r->ended_at - r->started_at);
        cat(line, "%sended%s (started %s, ran %s)", S(AC_HEADER_VALUE), S(AC_DIM), when, dur);
    }
    else if (r->pid_gone) {
        cat(line, "%snot ended: process gone%s (started %s)", S(AC_HEADER_WARN), S(AC_DIM), when);
    }
    else {
        fmt_duration(dur, sizeof dur, tui_wall_ns() - r->started_at);
        cat(line, "%slive%s (started %s, %s ago)", S(AC_HEADER_LIVE), S(AC_DIM), when, dur);
    }
    if (r->last_mark != NULL && r->last_mark[0] != '\0') {   /* the program's own (annotate) */
        fmt_duration(dur, sizeof dur, (r->ended_at ? r->ended_at : tui_wall_ns()) - r->last_mark_at);
        cat(line, "%s  mark %s%.60s%s (%s %s)", S(AC_HEADER_LABEL), S(AC_HEADER_VALUE), r->last_mark,
            S(AC_DIM), dur, r->ended_at ? "before its end" : "ago");
    }
}

/* The first line's right part: polling state. */
static void poll_state(char *line, bool paused, double delay)
{
    if (paused)
        cat(line, "%s PAUSED %s", S(AC_HEADER_WARN), S(AC_NORMAL));
    else if (delay > 0)
        cat(line, "%severy %.1f s%s", S(AC_DIM), delay, S(AC_NORMAL));
}

#define MAX_ITEMS 16

typedef struct Items {
    char text[MAX_ITEMS][128];
    int n;
} Items;

static char *next_item(Items *it)
{
    TUI_ASSERT(it->n < MAX_ITEMS);
    it->text[it->n][0] = '\0';
    return it->text[it->n++];
}

/* The totals as items, most telling first; `first_of_second` receives the
   index that starts the second line when there is room for everything. */
static void count_items(const Model *m, Items *it, int *first_of_second)
{
    const Totals *t = &m->totals;
    bool live = model_live(m) && m->rates.valid;
    const Rates *r = &m->rates;
    char ms[32];
    it->n = 0;
    item(next_item(it), "Code objects", t->code_objects, false, 0);
    item(next_item(it), "Compiles", t->compiles, live, r->compiles);
    item(next_item(it), "Recompiles", t->recompiles, live, r->recompiles);
    item(next_item(it), "Graphs", t->graphs, false, 0);
    item(next_item(it), "Graph breaks", t->breaks, live, r->breaks);
    item(next_item(it), "Guard failures", t->guard_failures, live, r->guard_failures);
    *first_of_second = it->n;
    item(next_item(it), "Cache entries", t->entries, false, 0);
    item(next_item(it), "Hits", t->hits, live, r->hits);
    item(next_item(it), "Misses", t->misses, false, 0);
    long long calls = t->hits + t->misses;
    char *s = next_item(it);
    if (calls > 0)
        cat(s, "%sHit rate %s%.1f%%%s   ", S(AC_HEADER_LABEL), S(AC_HEADER_VALUE),
            100.0 * (double)t->hits / (double)calls, S(AC_NORMAL));
    else
        cat(s, "%sHit rate %s-%s   ", S(AC_HEADER_LABEL), S(AC_HEADER_VALUE), S(AC_NORMAL));
    fmt_ms(ms, sizeof ms, t->capture_ns, 0);
    cat(next_item(it), "%sCapture %s%s ms%s   ", S(AC_HEADER_LABEL), S(AC_HEADER_VALUE), ms,
        S(AC_NORMAL));
    cat(next_item(it), "%sAt cache limit %s%lld%s   ", S(AC_HEADER_LABEL),
        t->at_limit ? S(AC_LIMIT) : S(AC_HEADER_VALUE), t->at_limit, S(AC_NORMAL));
    item(next_item(it), "Dropped events", t->dropped, false, 0);
}

/* What is wrong with the files, each that has a problem in turn. */
static void status_line(const Model *m, char *l4)
{
    for (size_t i = 0; i < m->nfiles; i++) {
        const ModelFile *f = &m->files[i];
        if (f->gone)
            cat(l4, "%sdatabase file removed: %s (showing what the open file still holds)%s ",
                S(AC_HEADER_WARN), f->path, S(AC_NORMAL));
        if (f->error)
            cat(l4, "%s%s%s%s", S(AC_HEADER_WARN), f->error, S(AC_NORMAL), m->nfiles > 1 ? " " : "");
    }
}

/* Styled width of an item without its trailing spaces. */
static int item_width(const char *s)
{
    return fmt_width_styled(s);
}

/*
 * The header as styled lines (HEADER_LINES of them): line 0 the run, lines
 * 1-2 the totals, line 3 the file's state.  width > 0: items flow over lines
 * 1-3 (line 3 only when the file is fine) so that none is cut; an item that
 * fits nowhere is left out.  width <= 0: the fixed two-line grouping.
 */
static void build(const Model *m, int width, char lines[][512])
{
    Items it;
    int second;
    for (int i = 0; i < HEADER_LINES; i++)
        lines[i][0] = '\0';
    run_line(m, lines[0]);
    count_items(m, &it, &second);
    status_line(m, lines[3]);
    if (width <= 0) {
        for (int i = 0; i < it.n; i++)
            cat(lines[i < second ? 1 : 2], "%s", it.text[i]);
        return;
    }
    int last = lines[3][0] ? 2 : 3, line = 1, used = 0;
    /* Everything on two lines when it fits as grouped. */
    int w1 = 0, w2 = 0;
    for (int i = 0; i < it.n; i++)
        *(i < second ? &w1 : &w2) += item_width(it.text[i]);
    bool grouped = w1 - 3 <= width && w2 - 3 <= width;
    for (int i = 0; i < it.n; i++) {
        int w = item_width(it.text[i]);
        bool wrap = grouped ? i == second : used > 0 && used + w - 3 > width;
        if (wrap) {
            line++;
            used = 0;
        }
        if (line > last)
            break;
        if (used + w - 3 > width)   /* too wide even alone: leave it out */
            continue;
        cat(lines[line], "%s", it.text[i]);
        used += w;
    }
}

static void strip(char *s)
{
    char *d = s;
    for (char *p = s; *p; p++) {
        if (*p == '\x01') {
            if (p[1])
                p++;
            continue;
        }
        *d++ = *p;
    }
    while (d > s && d[-1] == ' ')
        d--;
    *d = '\0';
}

int header_lines(const Model *m, bool paused, double delay, char lines[][512], int max)
{
    char right[128] = "";
    if (max < HEADER_LINES)
        return 0;
    build(m, 0, lines);
    poll_state(right, paused, delay);
    if (right[0])
        cat(lines[0], "  %s", right);
    for (int i = 0; i < HEADER_LINES; i++)
        strip(lines[i]);
    return HEADER_LINES;
}

static void header_draw(Widget *w)
{
    Header *h = (Header *)w;
    char lines[HEADER_LINES][512], right[128] = "";
    build(h->model, w->w, lines);
    poll_state(right, h->paused, h->delay);
    int rw = fmt_width_styled(right) + 1;
    if (rw + 10 > w->w)
        rw = 0;
    tui_put_styled(w->y, w->x, w->w - rw, lines[0], AC_NORMAL, false, 0, -1);
    if (rw > 0)   /* one blank column between the two parts */
        tui_put_styled(w->y, w->x + w->w - rw + 1, rw - 1, right, AC_NORMAL, false, 0, -1);
    for (int i = 1; i < w->h; i++)
        tui_put_styled(w->y + i, w->x, w->w, i < HEADER_LINES ? lines[i] : "", AC_NORMAL, false,
                       0, -1);
}

static const WidgetClass header_class = {
    .name = "Header",
    .draw = header_draw,
    .key = NULL,
    .done = NULL,
};

void header_init(Header *h, const Model *m)
{
    widget_init(&h->super, &header_class);
    h->model = m;
    h->paused = false;
    h->delay = 1.0;
}

Header *header_new(const Model *m)
{
    Header *h = xmalloc(sizeof *h);
    header_init(h, m);
    return h;
}

void header_done(Header *h)
{
    widget_done(&h->super);
}

void header_delete(Header *h)
{
    if (h == NULL)
        return;
    header_done(h);
    free(h);
}
