/*
 * table.c -- the main table widget: one row per code object, its columns
 * (which ones fit, how wide), sorting (htop-style: a sort column, direct
 * keys R B H T, I to invert), the incremental filter on name or file, the
 * cursor with scrolling, and follow mode (F: the cursor stays on the same
 * code object while the order changes).  Batch mode formats its rows with
 * the same functions.  Contract: tui.h; manual: docs/dyntop.md.
 *
 * With several files (a job's ranks) each row is one run's code object:
 * the RANK column names the run (HOST too, when the runs come from more
 * than one host), the filter also matches it, and rows that tie on the
 * sort column keep rank order, so one function's rows stand together.
 * With one file neither column exists and nothing else changes.
 */
#include "tui.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const ColumnDef table_columns[COL__COUNT] = {
    /* id             title                 --sort        key  right min pref prio */
    {COL_FLAGS,      "S",                  "flags",      0,   false, 2,  0,  0},
    {COL_RANK,       "RANK",               "rank",       0,   false, 4,  24, 0},
    {COL_HOST,       "HOST",               "host",       0,   false, 4,  16, 6},
    {COL_NAME,       "FUNCTION",           "name",       0,   false, 10, 24, 0},
    {COL_WHERE,      "FILE:LINE",          "file",       0,   false, 14, 28, 4},
    {COL_ENTRIES,    "ENTRIES",            "entries",    0,   true,  8,  0,  1},
    {COL_HITS,       "HITS",               "hits",       'H', true,  8,  0,  1},
    {COL_MISSES,     "MISSES",             "misses",     0,   true,  7,  0,  3},
    {COL_RECOMPILES, "RECOMP",             "recompiles", 'R', true,  7,  0,  1},
    {COL_GRAPHS,     "GRAPHS",             "graphs",     0,   true,  7,  0,  3},
    {COL_BREAKS,     "BREAKS",             "breaks",     'B', true,  7,  0,  2},
    {COL_CAPTURE,    "CAPT_MS",            "capture",    'T', true,  8,  0,  2},
    {COL_GUARD,      "LAST FAILING GUARD", "guard",      0,   false, 14, 0,  5},
};

/* Columns are dropped from this priority down as the width requires. */
#define MAX_PRIORITY 6

bool table_column_applies(const Model *m, ColumnId c)
{
    if (c == COL_RANK)
        return m->nfiles > 1;
    if (c == COL_HOST)
        return m->nfiles > 1 && m->nhosts > 1;
    return true;
}

int table_column_by_name(const char *name)
{
    for (int c = 0; c < COL__COUNT; c++)
        if (strcasecmp(name, table_columns[c].option) == 0
            || strcasecmp(name, table_columns[c].title) == 0)
            return c;
    return -1;
}

/* Columns before c that are shown: the gap before c is 2 after a
   right-aligned column when c is left-aligned (numbers then text), and
   after the run's columns (their labels have a space: "rank 2"), else 1;
   0 before the first shown column. */
static int gap_before(const int widths[COL__COUNT], int c)
{
    for (int p = c - 1; p >= 0; p--)
        if (widths[p] > 0)
            return (table_columns[p].right && !table_columns[c].right) || p == COL_RANK
                   || p == COL_HOST ? 2 : 1;
    return 0;
}

static int total_width(const int widths[COL__COUNT])
{
    int used = 0;
    for (int c = 0; c < COL__COUNT; c++)
        if (widths[c] > 0)
            used += gap_before(widths, c) + widths[c];
    return used;
}

/* ---- cells ---- */

void table_cell(const Model *m, const CodeRow *r, ColumnId c, int width, char *dst, size_t cap)
{
    switch (c) {
    case COL_FLAGS:
        snprintf(dst, cap, "%s%s", r->at_limit ? "L" : "", r->recent ? "R" : "");
        return;
    case COL_RANK:
        snprintf(dst, cap, "%s", model_label(m, r));
        return;
    case COL_HOST: {
        const RunInfo *run = model_run(m, (size_t)r->file, r->run_id);
        snprintf(dst, cap, "%s", run && run->hostname[0] ? run->hostname : "?");
        return;
    }
    case COL_NAME:
        snprintf(dst, cap, "%s", r->name);
        return;
    case COL_WHERE:
        snprintf(dst, cap, "%s", r->where);
        return;
    case COL_ENTRIES:
        if (model_cache_limit(m, (size_t)r->file, r->run_id) > 0)
            snprintf(dst, cap, "%lld/%d", r->fullest,
                     model_cache_limit(m, (size_t)r->file, r->run_id));
        else
            snprintf(dst, cap, "%lld/?", r->fullest);
        return;
    case COL_HITS:
        fmt_count(dst, cap, r->hits, width);
        return;
    case COL_MISSES:
        fmt_count(dst, cap, r->misses, width);
        return;
    case COL_RECOMPILES:
        fmt_count(dst, cap, r->recompiles, width);
        return;
    case COL_GRAPHS:
        fmt_count(dst, cap, r->graphs, width);
        return;
    case COL_BREAKS:
        fmt_count(dst, cap, r->breaks, width);
        return;
    case COL_CAPTURE:
        fmt_ms(dst, cap, r->capture_ns, width);
        return;
    case COL_GUARD:
        snprintf(dst, cap, "%s", r->last_fail);
        return;
    case COL__COUNT:
        break;
    }
    dst[0] = '\0';
}

static const char *sort_mark(bool descending)
{
    if (fmt_utf8())
        return descending ? "\xe2\x96\xbc" : "\xe2\x96\xb2";   /* U+25BC, U+25B2 */
    return descending ? "v" : "^";
}

/* The title of column c as shown (with the sort mark on the sort column). */
static void title_text(ColumnId c, ColumnId sort, bool descending, bool batch, char *dst,
                       size_t cap)
{
    const ColumnDef *d = &table_columns[c];
    if (batch || c != sort)
        snprintf(dst, cap, "%s", d->title);
    else if (d->right)
        snprintf(dst, cap, "%s%s", sort_mark(descending), d->title);
    else
        snprintf(dst, cap, "%s%s", d->title, sort_mark(descending));
}

char *table_format_row(const Model *m, const CodeRow *r, const int widths[COL__COUNT],
                       ColumnId sort, bool descending, bool batch, char *dst, size_t cap)
{
    size_t pos = 0;
    char cell[1024];
    dst[0] = '\0';
    for (int c = 0; c < COL__COUNT; c++) {
        int w = widths[c];
        if (w <= 0)
            continue;
        const ColumnDef *d = &table_columns[c];
        if (r == NULL)
            title_text((ColumnId)c, sort, descending, batch, cell, sizeof cell);
        else
            table_cell(m, r, (ColumnId)c, w, cell, sizeof cell);
        if (batch && c == COL_FLAGS && r != NULL && cell[0] == '\0')
            snprintf(cell, sizeof cell, "-");
        int flags = d->right ? FMT_RIGHT : FMT_LEFT;
        if (c == COL_WHERE)
            flags |= FMT_TRUNC_START;
        for (int g = gap_before(widths, c); g > 0 && pos + 2 < cap; g--)
            dst[pos++] = ' ';
        if (pos + 4 * (size_t)w + 1 >= cap)
            break;
        fmt_fit(dst + pos, cap - pos, cell, w, flags);
        pos += strlen(dst + pos);
    }
    dst[pos] = '\0';
    return dst;
}

/* ---- layout ---- */

static int natural_width(const Model *m, const long *view, size_t nview, ColumnId c)
{
    char cell[1024];
    int w = (int)strlen(table_columns[c].title);
    for (size_t i = 0; i < nview; i++) {
        table_cell(m, model_row(m, view[i]), c, 0, cell, sizeof cell);
        int cw = fmt_width(cell);
        if (cw > w)
            w = cw;
    }
    return w;
}

void table_layout(const Model *m, const long *view, size_t nview, int width,
                  int widths[COL__COUNT])
{
    if (width <= 0) {
        for (int c = 0; c < COL__COUNT; c++) {
            int nat = natural_width(m, view, nview, (ColumnId)c);
            widths[c] = nat > table_columns[c].min_width ? nat : table_columns[c].min_width;
            if (!table_column_applies(m, (ColumnId)c))
                widths[c] = 0;
        }
        return;
    }
    /* Every column at its minimum (the run's columns: as wide as their
       widest value, up to their preferred width); drop the least important
       until it fits. */
    for (int c = 0; c < COL__COUNT; c++) {
        widths[c] = table_columns[c].min_width;
        if (!table_column_applies(m, (ColumnId)c))
            widths[c] = 0;
        else if (c == COL_RANK || c == COL_HOST) {
            int nat = natural_width(m, view, nview, (ColumnId)c);
            widths[c] = nat < table_columns[c].pref_width ? nat : table_columns[c].pref_width;
        }
    }
    for (int prio = MAX_PRIORITY; prio > 0 && total_width(widths) > width; prio--)
        for (int c = COL__COUNT - 1; c >= 0; c--)
            if (table_columns[c].priority == prio)
                widths[c] = 0;
    /* The name, the file and the guard column grow in turn, the name and
       the file up to their preferred widths; the guard column (or else the
       name) takes what is left. */
    int extra = width - total_width(widths);
    static const ColumnId growing[] = {COL_NAME, COL_WHERE, COL_GUARD};
    for (bool grew = true; grew && extra > 0;) {
        grew = false;
        for (size_t i = 0; i < 3 && extra > 0; i++) {
            ColumnId c = growing[i];
            int pref = table_columns[c].pref_width;
            if (widths[c] > 0 && (pref == 0 || widths[c] < pref)) {
                widths[c]++;
                extra--;
                grew = true;
            }
        }
    }
    if (extra > 0)
        widths[COL_NAME] += extra;
}

/* ---- view: filter and sort ---- */

static const Model *sort_model;   /* qsort has no context argument */
static ColumnId sort_col;
static bool sort_desc;

static int cmp_ll(long long a, long long b)
{
    return a < b ? -1 : a > b;
}

/* Runs by label order (ranks by number); a run not known sorts last. */
static int cmp_runs(const CodeRow *a, const CodeRow *b)
{
    const RunInfo *ra = model_run(sort_model, (size_t)a->file, a->run_id);
    const RunInfo *rb = model_run(sort_model, (size_t)b->file, b->run_id);
    if (ra == NULL || rb == NULL)
        return (ra == NULL) - (rb == NULL);
    return model_label_cmp(ra, rb);
}

static int cmp_hosts(const CodeRow *a, const CodeRow *b)
{
    const RunInfo *ra = model_run(sort_model, (size_t)a->file, a->run_id);
    const RunInfo *rb = model_run(sort_model, (size_t)b->file, b->run_id);
    return strcmp(ra ? ra->hostname : "", rb ? rb->hostname : "");
}

static int cmp_column(const CodeRow *a, const CodeRow *b, ColumnId c)
{
    switch (c) {
    case COL_FLAGS:
        return cmp_ll(2 * a->at_limit + a->recent, 2 * b->at_limit + b->recent);
    case COL_RANK:
        return cmp_runs(a, b);
    case COL_HOST:
        return cmp_hosts(a, b);
    case COL_NAME:
        return strcmp(a->name, b->name);
    case COL_WHERE: {
        int r = strcmp(a->filename, b->filename);
        return r ? r : cmp_ll(a->firstlineno, b->firstlineno);
    }
    case COL_ENTRIES: {
        int r = cmp_ll(a->fullest, b->fullest);
        return r ? r : cmp_ll(a->entries, b->entries);
    }
    case COL_HITS:
        return cmp_ll(a->hits, b->hits);
    case COL_MISSES:
        return cmp_ll(a->misses, b->misses);
    case COL_RECOMPILES:
        return cmp_ll(a->recompiles, b->recompiles);
    case COL_GRAPHS:
        return cmp_ll(a->graphs, b->graphs);
    case COL_BREAKS:
        return cmp_ll(a->breaks, b->breaks);
    case COL_CAPTURE:
        return cmp_ll(a->capture_ns, b->capture_ns);
    case COL_GUARD:
        return strcmp(a->last_fail, b->last_fail);
    case COL__COUNT:
        break;
    }
    return 0;
}

/* The sort column in the chosen direction, then name, place, (several
   files) run label and file, and key in ascending order, so equal rows
   keep a stable, predictable order. */
static int cmp_rows(const void *pa, const void *pb)
{
    const CodeRow *a = model_row(sort_model, *(const long *)pa);
    const CodeRow *b = model_row(sort_model, *(const long *)pb);
    int r = cmp_column(a, b, sort_col);
    if (r)
        return sort_desc ? -r : r;
    if ((r = strcmp(a->name, b->name)) != 0)
        return r;
    if ((r = cmp_column(a, b, COL_WHERE)) != 0)
        return r;
    if (sort_model->nfiles > 1 && ((r = cmp_runs(a, b)) != 0 || (r = a->file - b->file) != 0))
        return r;
    if ((r = cmp_ll(a->run_id, b->run_id)) != 0)
        return r;
    return cmp_ll(a->code_id, b->code_id);
}

static bool matches(const Model *m, const CodeRow *r, const char *filter)
{
    if (fmt_contains(r->name, filter) || fmt_contains(r->where, filter))
        return true;
    if (m->nfiles == 1)
        return false;
    const RunInfo *run = model_run(m, (size_t)r->file, r->run_id);
    return run != NULL && (fmt_contains(run->label, filter) || fmt_contains(run->hostname, filter));
}

static void scroll_to_cursor(Table *t)
{
    int rows = t->super.h - 1;   /* below the title bar */
    if (rows < 1)
        rows = 1;
    if (t->cursor < t->top)
        t->top = t->cursor;
    else if (t->cursor >= t->top + (size_t)rows)
        t->top = t->cursor - (size_t)rows + 1;
    if (t->nview <= (size_t)rows)
        t->top = 0;
    else if (t->top + (size_t)rows > t->nview)
        t->top = t->nview - (size_t)rows;
}

void table_rebuild(Table *t)
{
    const Model *m = t->model;
    size_t nrows = model_nrows(m);
    if (t->capview < nrows) {
        t->capview = nrows + 64;
        t->view = xrealloc(t->view, t->capview * sizeof *t->view);
    }
    t->nview = 0;
    for (size_t fi = 0; fi < m->nfiles; fi++)
        for (size_t i = 0; i < m->files[fi].nrows; i++)
            if (matches(m, &m->files[fi].rows[i], t->filter))
                t->view[t->nview++] = model_ref(m, fi, i);
    sort_model = m;
    sort_col = t->sort;
    sort_desc = t->descending;
    qsort(t->view, t->nview, sizeof *t->view, cmp_rows);
    if (t->follow) {
        for (size_t i = 0; i < t->nview; i++) {
            const CodeRow *r = model_row(m, t->view[i]);
            if (r->file == t->followed_file && r->run_id == t->followed_run
                && r->code_id == t->followed_code) {
                t->cursor = i;
                break;
            }
        }
    }
    if (t->cursor >= t->nview)
        t->cursor = t->nview ? t->nview - 1 : 0;
    scroll_to_cursor(t);
    t->seen_generation = m->generation;
    t->super.dirty = true;
}

void table_set_sort(Table *t, ColumnId c, bool descending)
{
    t->sort = c;
    t->descending = descending;
    table_rebuild(t);
}

void table_sort_key(Table *t, ColumnId c)
{
    if (t->sort == c)
        table_set_sort(t, c, !t->descending);
    else
        table_set_sort(t, c, table_columns[c].right);
}

void table_set_filter(Table *t, const char *text)
{
    snprintf(t->filter, sizeof t->filter, "%s", text ? text : "");
    table_rebuild(t);
}

const CodeRow *table_selected(const Table *t)
{
    if (t->nview == 0 || t->cursor >= t->nview)
        return NULL;
    return model_row(t->model, t->view[t->cursor]);
}

void table_toggle_follow(Table *t)
{
    const CodeRow *r = table_selected(t);
    t->follow = !t->follow && r != NULL;
    if (t->follow) {
        t->followed_file = r->file;
        t->followed_run = r->run_id;
        t->followed_code = r->code_id;
    }
    t->super.dirty = true;
}

void table_select(Table *t, int file, long long run_id, long long code_id)
{
    for (size_t i = 0; i < t->nview; i++) {
        const CodeRow *r = model_row(t->model, t->view[i]);
        if (r->file == file && r->run_id == run_id && r->code_id == code_id) {
            t->cursor = i;
            if (t->follow) {
                t->followed_file = file;
                t->followed_run = run_id;
                t->followed_code = code_id;
            }
            scroll_to_cursor(t);
            t->super.dirty = true;
            return;
        }
    }
}

/* ---- the widget ---- */

static void draw_titles(Table *t, const int widths[COL__COUNT])
{
    char line[8192];
    Widget *w = &t->super;
    table_format_row(t->model, NULL, widths, t->sort, t->descending, false, line, sizeof line);
    tui_put(w->y, w->x, w->w, line, FMT_LEFT, colors_attr(AC_TABLE_HEAD));
    int x = 0;
    for (int c = 0; c < COL__COUNT; c++) {
        if (widths[c] <= 0)
            continue;
        x += gap_before(widths, c);
        if (c == (int)t->sort && x < w->w) {
            char title[64];
            title_text((ColumnId)c, t->sort, t->descending, false, title, sizeof title);
            int avail = w->w - x < widths[c] ? w->w - x : widths[c];
            tui_put(w->y, w->x + x, avail, title,
                    table_columns[c].right ? FMT_RIGHT : FMT_LEFT, colors_attr(AC_TABLE_SORT));
        }
        x += widths[c];
    }
}

static void table_draw(Widget *w)
{
    Table *t = (Table *)w;
    int widths[COL__COUNT];
    char line[8192];
    if (t->seen_generation != t->model->generation)
        table_rebuild(t);
    table_layout(t->model, t->view, t->nview, w->w, widths);
    draw_titles(t, widths);
    scroll_to_cursor(t);
    for (int i = 1; i < w->h; i++) {
        size_t v = t->top + (size_t)(i - 1);
        int y = w->y + i;
        if (v >= t->nview) {
            const char *empty = "";
            if (t->nview == 0 && i == 1)
                empty = t->filter[0] ? "  (no code object matches the filter)"
                                     : "  (no code objects recorded yet)";
            tui_put(y, w->x, w->w, empty, FMT_LEFT, colors_attr(AC_DIM));
            continue;
        }
        const CodeRow *r = model_row(t->model, t->view[v]);
        AttrClass cls = v == t->cursor ? AC_CURSOR
                        : r->at_limit ? AC_LIMIT : r->recent ? AC_RECENT : AC_NORMAL;
        table_format_row(t->model, r, widths, t->sort, t->descending, false, line, sizeof line);
        tui_put(y, w->x, w->w, line, FMT_LEFT, colors_attr(cls));
    }
}

static void move_cursor(Table *t, long delta)
{
    if (t->nview == 0)
        return;
    long c = (long)t->cursor + delta;
    if (c < 0)
        c = 0;
    if (c >= (long)t->nview)
        c = (long)t->nview - 1;
    t->cursor = (size_t)c;
    t->follow = false;
    scroll_to_cursor(t);
    t->super.dirty = true;
}

static KeyResult table_key(Widget *w, int ch)
{
    Table *t = (Table *)w;
    long page = w->h > 2 ? w->h - 2 : 1;
    switch (ch) {
    case KEY_UP:    move_cursor(t, -1); return KEY_HANDLED;
    case KEY_DOWN:  move_cursor(t, 1); return KEY_HANDLED;
    case KEY_PPAGE: move_cursor(t, -page); return KEY_HANDLED;
    case KEY_NPAGE: move_cursor(t, page); return KEY_HANDLED;
    case KEY_HOME:  move_cursor(t, -(long)t->nview); return KEY_HANDLED;
    case KEY_END:   move_cursor(t, (long)t->nview); return KEY_HANDLED;
    case 'R':       table_sort_key(t, COL_RECOMPILES); return KEY_HANDLED;
    case 'B':       table_sort_key(t, COL_BREAKS); return KEY_HANDLED;
    case 'H':       table_sort_key(t, COL_HITS); return KEY_HANDLED;
    case 'T':       table_sort_key(t, COL_CAPTURE); return KEY_HANDLED;
    case 'I':       table_set_sort(t, t->sort, !t->descending); return KEY_HANDLED;
    case 'F':       table_toggle_follow(t); return KEY_HANDLED;
    default:        return KEY_IGNORED;
    }
}

static void table_class_done(Widget *w)
{
    Table *t = (Table *)w;
    free(t->view);
    t->view = NULL;
    t->nview = t->capview = 0;
}

static const WidgetClass table_class = {
    .name = "Table",
    .draw = table_draw,
    .key = table_key,
    .done = table_class_done,
};

void table_init(Table *t, const Model *m)
{
    memset(t, 0, sizeof *t);
    widget_init(&t->super, &table_class);
    t->model = m;
    t->sort = COL_RECOMPILES;
    t->descending = true;
    t->seen_generation = -1;
}

Table *table_new(const Model *m)
{
    Table *t = xmalloc(sizeof *t);
    table_init(t, m);
    return t;
}

void table_done(Table *t)
{
    widget_done(&t->super);
}

void table_delete(Table *t)
{
    if (t == NULL)
        return;
    table_done(t);
    free(t);
}
