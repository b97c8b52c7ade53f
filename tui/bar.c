/*
 * bar.c -- the footer line (htop's FunctionBar): the keys that matter on the
 * current screen, the filter prompt while one is typed, a status note on
 * the right (filter, follow, rows shown), and one-shot messages.
 * Contract: tui.h.
 */
#include "tui.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S(c) TUI_STYLE(c)

typedef struct Hint {
    const char *key;
    const char *label;
} Hint;

static const Hint table_hints[] = {
    {"?", "Help"}, {"Enter", "Detail"}, {"/", "Filter"}, {"F6", "SortBy"}, {"F", "Follow"},
    {"b", "Breaks"}, {"r", "Recompiles"}, {"p", "Pause"}, {"q", "Quit"}, {NULL, NULL},
};
/* Several files (a job's ranks): the divergence view is the point. */
static const Hint table_hints_ranks[] = {
    {"?", "Help"}, {"Enter", "Detail"}, {"/", "Filter"}, {"F6", "SortBy"}, {"F", "Follow"},
    {"v", "Divergence"}, {"b", "Breaks"}, {"r", "Recompiles"}, {"p", "Pause"}, {"q", "Quit"},
    {NULL, NULL},
};
static const Hint view_hints[] = {
    {"Esc", "Back"}, {"Enter", "Detail"}, {"b", "Breaks"}, {"r", "Recompiles"}, {"p", "Pause"},
    {"?", "Help"}, {"q", "Back"}, {NULL, NULL},
};
static const Hint view_hints_ranks[] = {
    {"Esc", "Back"}, {"Enter", "Detail"}, {"v", "Divergence"}, {"b", "Breaks"},
    {"r", "Recompiles"}, {"p", "Pause"}, {"?", "Help"}, {"q", "Back"}, {NULL, NULL},
};
static const Hint menu_hints[] = {
    {"Enter", "Sort"}, {"Esc", "Cancel"}, {NULL, NULL},
};
static const Hint filter_hints[] = {
    {"Enter", "Done"}, {"Esc", "Clear"}, {NULL, NULL},
};

static void hints(char *line, size_t cap, const Hint *h)
{
    size_t n = strlen(line);
    for (; h->key; h++) {
        snprintf(line + n, cap - n, "%s%s%s%s ", S(AC_NORMAL), h->key, S(AC_KEY), h->label);
        n = strlen(line);
    }
}

static void bar_draw(Widget *w)
{
    Bar *b = (Bar *)w;
    char line[1024] = "";
    if (b->message[0]) {
        tui_put(w->y, w->x, w->w, b->message, FMT_LEFT, colors_attr(AC_HEADER_WARN));
        return;
    }
    switch (b->mode) {
    case BAR_FILTER: {
        char *f = fmt_sanitize(b->filter);
        snprintf(line, sizeof line, "%sFilter: %s%s_  ", S(AC_HEADER_LABEL), S(AC_HEADER_VALUE),
                 f);
        free(f);
        hints(line, sizeof line, filter_hints);
        break;
    }
    case BAR_TABLE:
        hints(line, sizeof line, b->several_runs ? table_hints_ranks : table_hints);
        break;
    case BAR_VIEW:
        hints(line, sizeof line, b->several_runs ? view_hints_ranks : view_hints);
        break;
    case BAR_MENU:
        hints(line, sizeof line, menu_hints);
        break;
    }
    int sw = b->status[0] ? fmt_width(b->status) + 1 : 0;
    if (sw > 0 && sw < w->w / 2) {
        tui_put_styled(w->y, w->x, w->w - sw, line, AC_NORMAL, false, 0, -1);
        tui_put(w->y, w->x + w->w - sw, sw, b->status, FMT_RIGHT, colors_attr(AC_HEADER_VALUE));
    }
    else {
        tui_put_styled(w->y, w->x, w->w, line, AC_NORMAL, false, 0, -1);
    }
}

static const WidgetClass bar_class = {
    .name = "Bar",
    .draw = bar_draw,
    .key = NULL,
    .done = NULL,
};

void bar_set(Bar *b, BarMode mode, const char *filter, const char *status)
{
    if (b->mode == mode && strcmp(b->filter, filter ? filter : "") == 0
        && strcmp(b->status, status ? status : "") == 0)
        return;
    b->mode = mode;
    snprintf(b->filter, sizeof b->filter, "%s", filter ? filter : "");
    snprintf(b->status, sizeof b->status, "%s", status ? status : "");
    b->super.dirty = true;
}

void bar_message(Bar *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->message, sizeof b->message, fmt, ap);
    va_end(ap);
    b->super.dirty = true;
}

void bar_init(Bar *b)
{
    memset(b, 0, sizeof *b);
    widget_init(&b->super, &bar_class);
}

Bar *bar_new(void)
{
    Bar *b = xmalloc(sizeof *b);
    bar_init(b);
    return b;
}

void bar_done(Bar *b)
{
    widget_done(&b->super);
}

void bar_delete(Bar *b)
{
    if (b == NULL)
        return;
    bar_done(b);
    free(b);
}
