/*
 * app.c -- the screen of dyntop: the header on top, the footer at the
 * bottom, and between them the table or one view (detail, break reasons,
 * recompile log, divergence between runs, help), with the sort menu beside
 * the table when open.  It
 * lays the widgets out for the terminal's size (or shows one line when the
 * terminal is too small), refreshes the model and the shown view, and
 * dispatches keys: the focused widget first, then the screen's keys, then
 * the global ones.  Contract: tui.h; keys: help.c and docs/dyntop.md.
 */
#include "tui.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MENU_WIDTH 22
#define CTRL(c) ((c) & 0x1f)
#define KEY_ESC 27

/* ---- life cycle ---- */

int app_open(App *a, const AppOptions *o, char **errmsg)
{
    memset(a, 0, sizeof *a);
    a->opts = o;
    return model_open(&a->model, o->paths, o->npaths, o->run_pick, o->cache_limit, errmsg);
}

void app_start(App *a)
{
    const AppOptions *o = a->opts;
    a->header = header_new(&a->model);
    a->header->delay = o->delay;
    a->table = table_new(&a->model);
    if (o->sort >= 0)
        table_set_sort(a->table, (ColumnId)o->sort,
                       o->sort_set_order ? !o->ascending : table_columns[o->sort].right);
    table_set_filter(a->table, o->filter);
    a->view = pager_new(false, true);
    a->list = pager_new(true, false);
    a->menu = pager_new(true, false);
    a->bar = bar_new();
    a->bar->several_runs = a->model.nfiles > 1;
    a->screen = SCREEN_TABLE;
    a->lines = a->cols = -1;
}

void app_close(App *a)
{
    header_delete(a->header);
    table_delete(a->table);
    pager_delete(a->view);
    pager_delete(a->list);
    pager_delete(a->menu);
    bar_delete(a->bar);
    model_close(&a->model);
    memset(a, 0, sizeof *a);
}

/* ---- layout and drawing ---- */

static Widget *body(App *a)
{
    switch (a->screen) {
    case SCREEN_TABLE:
    case SCREEN_SORT_MENU:
        return &a->table->super;
    case SCREEN_DETAIL:
    case SCREEN_HELP:
        return &a->view->super;
    case SCREEN_BREAKS:
    case SCREEN_RECOMPILES:
    case SCREEN_DIVERGENCE:
        return &a->list->super;
    }
    return &a->table->super;
}

void app_layout(App *a, bool force)
{
    int lines = LINES, cols = COLS;
    if (!force && lines == a->lines && cols == a->cols)
        return;
    a->lines = lines;
    a->cols = cols;
    a->too_small = lines < TUI_MIN_LINES || cols < TUI_MIN_COLS;
    int top = HEADER_LINES, h = lines - HEADER_LINES - 1;
    widget_move(&a->header->super, 0, 0, HEADER_LINES, cols);
    widget_move(&a->bar->super, lines - 1, 0, 1, cols);
    widget_move(&a->view->super, top, 0, h, cols);
    widget_move(&a->list->super, top, 0, h, cols);
    if (a->screen == SCREEN_SORT_MENU) {
        widget_move(&a->menu->super, top, 0, h, MENU_WIDTH);
        widget_move(&a->table->super, top, MENU_WIDTH + 1, h, cols - MENU_WIDTH - 1);
    }
    else {
        widget_move(&a->table->super, top, 0, h, cols);
    }
    a->header->super.dirty = a->bar->super.dirty = true;
    body(a)->dirty = true;
    a->menu->super.dirty = true;
    erase();
}

static void draw_too_small(App *a)
{
    char msg[160];
    erase();
    snprintf(msg, sizeof msg, "terminal too small (%dx%d, need %dx%d)", a->cols, a->lines,
             TUI_MIN_COLS, TUI_MIN_LINES);
    tui_put(0, 0, a->cols, msg, FMT_LEFT, colors_attr(AC_HEADER_WARN));
}

/* Footer mode and its right-hand note. */
static void update_bar(App *a)
{
    char status[160] = "";
    const Table *t = a->table;
    if (a->screen == SCREEN_TABLE) {
        if (t->filter[0])
            snprintf(status, sizeof status, "%zu of %zu shown", t->nview,
                     model_nrows(&a->model));
        const CodeRow *r = table_selected(t);
        if (t->follow && r != NULL) {
            size_t n = strlen(status);
            snprintf(status + n, sizeof status - n, "%sfollowing %s", n ? "  " : "", r->name);
        }
    }
    BarMode mode = a->editing_filter ? BAR_FILTER
                   : a->screen == SCREEN_TABLE ? BAR_TABLE
                   : a->screen == SCREEN_SORT_MENU ? BAR_MENU : BAR_VIEW;
    bar_set(a->bar, mode, t->filter, status);
}

void app_draw(App *a, bool force)
{
    app_layout(a, false);
    if (a->too_small) {
        draw_too_small(a);
        wnoutrefresh(stdscr);
        doupdate();
        return;
    }
    update_bar(a);
    if (force) {
        a->header->super.dirty = a->bar->super.dirty = true;
        body(a)->dirty = true;
        a->menu->super.dirty = true;
    }
    a->header->paused = a->paused;
    widget_draw(&a->header->super);
    if (a->screen == SCREEN_SORT_MENU) {
        widget_draw(&a->menu->super);
        mvvline(HEADER_LINES, MENU_WIDTH, ' ', a->lines - HEADER_LINES - 1);
    }
    widget_draw(body(a));
    widget_draw(&a->bar->super);
    wnoutrefresh(stdscr);
    doupdate();
}

/* ---- refreshing ---- */

static void load_view(App *a)
{
    switch (a->screen) {
    case SCREEN_DETAIL:
        detail_load(a->view, &a->model, a->detail_file, a->detail_run, a->detail_code);
        break;
    case SCREEN_BREAKS:
        views_load_breaks(a->list, &a->model);
        break;
    case SCREEN_RECOMPILES:
        views_load_recompiles(a->list, &a->model);
        break;
    case SCREEN_DIVERGENCE:
        diverge_load(a->list, &a->model);
        break;
    case SCREEN_HELP:
    case SCREEN_TABLE:
    case SCREEN_SORT_MENU:
        break;
    }
}

void app_refresh(App *a)
{
    if (a->paused)
        return;
    long long gen = a->model.generation;
    model_refresh(&a->model);
    if (a->model.generation != gen)
        table_rebuild(a->table);
    a->table->super.dirty = true;    /* "recent" fades with time */
    a->header->super.dirty = true;
    load_view(a);
}

/* ---- screens ---- */

void app_open_screen(App *a, Screen s)
{
    if (s == SCREEN_HELP && a->screen != SCREEN_HELP)
        a->help_return = a->screen == SCREEN_SORT_MENU ? SCREEN_TABLE : a->screen;
    if (s == SCREEN_BREAKS || s == SCREEN_RECOMPILES || s == SCREEN_DIVERGENCE) {
        if (a->screen != s)
            a->list->top = a->list->cursor = 0;
    }
    if (s == SCREEN_HELP) {
        a->view->top = 0;
        help_load(a->view);
    }
    if (s == SCREEN_SORT_MENU)
        help_load_sort_menu(a->menu, &a->model, a->table->sort);
    a->screen = s;
    a->editing_filter = false;
    if (s == SCREEN_BREAKS || s == SCREEN_RECOMPILES || s == SCREEN_DIVERGENCE
        || s == SCREEN_DETAIL)
        load_view(a);
    app_layout(a, true);
}

void app_open_detail(App *a, int file, long long run_id, long long code_id)
{
    if (a->screen != SCREEN_DETAIL && a->screen != SCREEN_HELP)
        a->detail_return = a->screen == SCREEN_SORT_MENU ? SCREEN_TABLE : a->screen;
    a->detail_file = file;
    a->detail_run = run_id;
    a->detail_code = code_id;
    a->view->top = 0;
    app_open_screen(a, SCREEN_DETAIL);
}

static void back(App *a)
{
    switch (a->screen) {
    case SCREEN_DETAIL:
        app_open_screen(a, a->detail_return);
        break;
    case SCREEN_HELP:
        if (a->help_return == SCREEN_DETAIL)
            app_open_detail(a, a->detail_file, a->detail_run, a->detail_code);
        else
            app_open_screen(a, a->help_return);
        break;
    default:
        app_open_screen(a, SCREEN_TABLE);
        break;
    }
}

/* ---- keys ---- */

static bool is_backspace(int ch)
{
    return ch == KEY_BACKSPACE || ch == 127 || ch == CTRL('H');
}

static void filter_key(App *a, int ch)
{
    Table *t = a->table;
    char f[sizeof t->filter];
    snprintf(f, sizeof f, "%s", t->filter);
    size_t n = strlen(f);
    if (ch == '\n' || ch == '\r' || ch == KEY_ENTER) {
        a->editing_filter = false;
    }
    else if (ch == KEY_ESC) {
        a->editing_filter = false;
        table_set_filter(t, "");
    }
    else if (is_backspace(ch)) {
        while (n > 0 && ((unsigned char)f[n - 1] & 0xC0) == 0x80)   /* UTF-8 continuation */
            n--;
        if (n > 0)
            n--;
        f[n] = '\0';
        table_set_filter(t, f);
    }
    else if (ch == CTRL('U')) {
        table_set_filter(t, "");
    }
    else if (ch >= 0x20 && ch < 0x100 && ch != 0x7f && n + 1 < sizeof f) {
        f[n] = (char)ch;
        f[n + 1] = '\0';
        table_set_filter(t, f);
    }
    else {
        widget_key(&t->super, ch);   /* arrows keep moving the selection */
    }
    t->super.dirty = true;
}

static bool table_screen_key(App *a, int ch)
{
    const CodeRow *r;
    switch (ch) {
    case '\n':
    case '\r':
    case KEY_ENTER:
        if ((r = table_selected(a->table)) != NULL)
            app_open_detail(a, r->file, r->run_id, r->code_id);
        return true;
    case '/':
    case '\\':
    case KEY_F(4):
        a->editing_filter = true;
        return true;
    case KEY_F(6):
    case '>':
    case '<':
        app_open_screen(a, SCREEN_SORT_MENU);
        return true;
    case KEY_ESC:
        if (a->table->filter[0])
            table_set_filter(a->table, "");
        return true;
    case ' ':
        if (!a->paused)
            app_refresh(a);
        return true;
    default:
        return false;
    }
}

static bool menu_key(App *a, int ch)
{
    const PagerLine *l;
    switch (ch) {
    case '\n':
    case '\r':
    case KEY_ENTER:
        if ((l = pager_selected(a->menu)) != NULL) {
            ColumnId c = (ColumnId)l->code_id;
            table_set_sort(a->table, c, table_columns[c].right);
        }
        app_open_screen(a, SCREEN_TABLE);
        return true;
    case KEY_ESC:
    case 'q':
    case KEY_F(6):
    case KEY_LEFT:
        app_open_screen(a, SCREEN_TABLE);
        return true;
    default:
        return widget_key(&a->menu->super, ch) == KEY_HANDLED;
    }
}

static bool view_key(App *a, int ch)
{
    const PagerLine *l;
    switch (ch) {
    case KEY_ESC:
    case KEY_LEFT:
    case 'q':
        back(a);
        return true;
    case '\n':
    case '\r':
    case KEY_ENTER:
        if (a->screen != SCREEN_DETAIL && a->screen != SCREEN_HELP
            && (l = pager_selected(a->list)) != NULL && l->run_id >= 0)
            app_open_detail(a, l->file, l->run_id, l->code_id);
        return true;
    default:
        if (is_backspace(ch)) {
            back(a);
            return true;
        }
        return false;
    }
}

static bool global_key(App *a, int ch)
{
    switch (ch) {
    case KEY_RESIZE:
        app_layout(a, true);
        return true;
    case CTRL('L'):
        clearok(curscr, TRUE);
        if (!a->paused) {
            model_forget(&a->model);
            app_refresh(a);
        }
        app_layout(a, true);
        return true;
    case 'q':
    case KEY_F(10):
        a->quit = true;
        return true;
    case 'p':
    case 'Z':
        a->paused = !a->paused;
        a->header->super.dirty = true;
        if (!a->paused)
            app_refresh(a);
        return true;
    case '?':
    case 'h':
    case KEY_F(1):
        if (a->screen == SCREEN_HELP)
            back(a);
        else
            app_open_screen(a, SCREEN_HELP);
        return true;
    case 'b':
        app_open_screen(a, SCREEN_BREAKS);
        return true;
    case 'r':
        app_open_screen(a, SCREEN_RECOMPILES);
        return true;
    case 'v':
        app_open_screen(a, SCREEN_DIVERGENCE);
        return true;
    default:
        return false;
    }
}

void app_key(App *a, int ch)
{
    if (a->bar->message[0]) {
        a->bar->message[0] = '\0';
        a->bar->super.dirty = true;
    }
    if (ch == KEY_RESIZE || a->too_small) {
        if (ch == 'q' || ch == KEY_F(10))
            a->quit = true;
        app_layout(a, true);
        return;
    }
    if (a->editing_filter) {
        filter_key(a, ch);
        return;
    }
    switch (a->screen) {
    case SCREEN_TABLE:
        if (widget_key(&a->table->super, ch) == KEY_HANDLED || table_screen_key(a, ch))
            return;
        break;
    case SCREEN_SORT_MENU:
        if (menu_key(a, ch))
            return;
        break;
    case SCREEN_DETAIL:
    case SCREEN_HELP:
        if (widget_key(&a->view->super, ch) == KEY_HANDLED || view_key(a, ch))
            return;
        break;
    case SCREEN_BREAKS:
    case SCREEN_RECOMPILES:
    case SCREEN_DIVERGENCE:
        if (widget_key(&a->list->super, ch) == KEY_HANDLED || view_key(a, ch))
            return;
        break;
    }
    global_key(a, ch);
}
