/*
 * bench.c -- the hidden --bench-refresh N option: what a refresh costs, for
 * scripts/bench_dyntop.py (docs/performance.md, "dyntop refresh").  Curses
 * runs headless (newterm on /dev/null, a 160x50 screen); for each screen
 * (the table, the detail of the most recompiled code object, the break
 * reasons, the recompile log) it times the first load, then N refreshes,
 * each = the screen's queries + a full redraw (every widget dirty) flushed
 * to the terminal; "main-reload" is the table again with every refresh a
 * full load (what a new run or a replaced file costs).  One line per
 * screen on stdout:
 *     NAME: first=MS mean=MS min=MS max=MS query=MS draw=MS
 */
#include "tui.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct Stat {
    double first, sum, min, max, query, draw;
} Stat;

static bool reloading;   /* measure(): forget the rows before each refresh */

static void measure(App *a, long n, Stat *s)
{
    s->sum = s->query = s->draw = 0;
    s->min = 1e300;
    s->max = 0;
    for (long i = 0; i < n; i++) {
        double t0 = tui_mono_s();
        if (reloading)
            model_forget(&a->model);
        app_refresh(a);
        double t1 = tui_mono_s();
        app_draw(a, true);
        double t2 = tui_mono_s();
        double ms = (t2 - t0) * 1e3;
        s->sum += ms;
        s->query += (t1 - t0) * 1e3;
        s->draw += (t2 - t1) * 1e3;
        if (ms < s->min)
            s->min = ms;
        if (ms > s->max)
            s->max = ms;
    }
}

static void report(const char *name, const Stat *s, long n)
{
    printf("%s: first=%.3f mean=%.3f min=%.3f max=%.3f query=%.3f draw=%.3f\n", name, s->first,
           s->sum / (double)n, s->min, s->max, s->query / (double)n, s->draw / (double)n);
}

int bench_run(const AppOptions *o)
{
    FILE *out = fopen("/dev/null", "w"), *in = fopen("/dev/null", "r");
    if (out == NULL || in == NULL) {
        fprintf(stderr, "dyntop: --bench-refresh: cannot open /dev/null\n");
        return 1;
    }
    const char *term = getenv("TERM");
    SCREEN *scr = newterm(term && *term && strcmp(term, "dumb") ? term : "xterm", out, in);
    if (scr == NULL)
        scr = newterm("vt100", out, in);
    if (scr == NULL) {
        fprintf(stderr, "dyntop: --bench-refresh: no usable terminal description\n");
        return 1;
    }
    set_term(scr);
    tui_curses_active = true;
    resize_term(50, 160);
    colors_init(o->color);

    App a;
    Stat s;
    char *err = NULL;
    double t0 = tui_mono_s();
    if (app_open(&a, o, &err) < 0) {
        endwin();
        tui_curses_active = false;
        fprintf(stderr, "dyntop: %s\n", err ? err : "cannot open the database");
        free(err);
        return 2;
    }
    app_start(&a);
    app_draw(&a, true);
    s.first = (tui_mono_s() - t0) * 1e3;
    measure(&a, o->bench_refreshes, &s);
    report("main", &s, o->bench_refreshes);
    /* The same, each refresh a full load (a new run, a replaced file, Ctrl-L). */
    s.first = 0;
    reloading = true;
    measure(&a, o->bench_refreshes, &s);
    reloading = false;
    report("main-reload", &s, o->bench_refreshes);

    table_set_sort(a.table, COL_RECOMPILES, true);
    const CodeRow *top = table_selected(a.table);
    if (top != NULL) {
        t0 = tui_mono_s();
        app_open_detail(&a, top->file, top->run_id, top->code_id);
        app_draw(&a, true);
        s.first = (tui_mono_s() - t0) * 1e3;
        measure(&a, o->bench_refreshes, &s);
        report("detail", &s, o->bench_refreshes);
    }
    static const struct {
        Screen screen;
        const char *name;
    } views[] = {{SCREEN_BREAKS, "breaks"}, {SCREEN_RECOMPILES, "recompiles"}};
    for (size_t i = 0; i < sizeof views / sizeof views[0]; i++) {
        t0 = tui_mono_s();
        app_open_screen(&a, views[i].screen);
        app_draw(&a, true);
        s.first = (tui_mono_s() - t0) * 1e3;
        measure(&a, o->bench_refreshes, &s);
        report(views[i].name, &s, o->bench_refreshes);
    }
    endwin();
    tui_curses_active = false;
    app_close(&a);
    delscreen(scr);
    fclose(out);
    fclose(in);
    return 0;
}
