/*
 * batch.c -- batch mode (-b, like top -b): the summary and the table as
 * plain text, -n times, -d seconds apart, with --sort, --filter, --limit and
 * -w applied; no curses, nothing but text on stdout.  The numbers are the
 * model's, the same the interactive table shows.  With several files (a
 * job's ranks) each frame ends with the divergence between their runs
 * (diverge.c), what `make demo-ranks` shows without a terminal.  Contract:
 * tui.h; format: docs/dyntop.md.
 */
#include "tui.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void put_line(const char *s)
{
    size_t n = strlen(s);
    while (n > 0 && s[n - 1] == ' ')
        n--;
    fwrite(s, 1, n, stdout);
    fputc('\n', stdout);
}

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

static void print_frame(const AppOptions *o, Model *m, Table *t, long iterations)
{
    char lines[HEADER_LINES][512];
    int n = header_lines(m, false, iterations > 1 ? o->delay : 0, lines, HEADER_LINES);
    for (int i = 0; i < n; i++)
        if (i < n - 1 || lines[i][0])
            put_line(lines[i]);
    putchar('\n');

    size_t rows = t->nview;
    if (o->limit > 0 && (size_t)o->limit < rows)
        rows = (size_t)o->limit;
    int widths[COL__COUNT];
    table_layout(m, t->view, rows, o->width, widths);
    size_t cap = 64 * 1024;
    char *line = xmalloc(cap);
    put_line(table_format_row(m, NULL, widths, t->sort, t->descending, true, line, cap));
    for (size_t i = 0; i < rows; i++)
        put_line(table_format_row(m, model_row(m, t->view[i]), widths, t->sort, t->descending,
                                  true, line, cap));
    free(line);
    if (m->nfiles > 1) {
        putchar('\n');
        diverge_print(m, o->width, stdout);
    }
}

int batch_run(const AppOptions *o)
{
    Model m;
    Table t;
    char *err = NULL;
    if (model_open(&m, o->paths, o->npaths, o->run_pick, o->cache_limit, &err) < 0) {
        fprintf(stderr, "dyntop: %s\n", err ? err : "cannot open the database");
        free(err);
        return 2;
    }
    table_init(&t, &m);
    if (o->sort >= 0)
        t.sort = (ColumnId)o->sort, t.descending = o->sort_set_order ? !o->ascending
                                                                      : table_columns[o->sort].right;
    snprintf(t.filter, sizeof t.filter, "%s", o->filter ? o->filter : "");
    long iterations = o->iterations > 0 ? o->iterations : 1;
    int status = 0;
    for (long i = 0; i < iterations; i++) {
        if (i > 0) {
            sleep_s(o->delay);
            if (model_refresh(&m) < 0)
                status = 1;
            putchar('\n');
        }
        table_rebuild(&t);
        print_frame(o, &m, &t, iterations);
        if (fflush(stdout) != 0)
            break;
    }
    table_done(&t);
    model_close(&m);
    return status;
}
