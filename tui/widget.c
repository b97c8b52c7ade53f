/*
 * widget.c -- the widget base every dyntop widget embeds first (a const
 * vtable, a rect on stdscr, a dirty flag cleared by drawing; htop Object.h
 * and Panel.c), and the two drawing primitives every widget uses: tui_put()
 * (one string in exact columns) and tui_put_styled() (inline attribute
 * classes).  Contract: tui.h.
 */
#include "tui.h"

#include <stdlib.h>
#include <string.h>

void widget_init(Widget *w, const WidgetClass *cls)
{
    memset(w, 0, sizeof *w);
    w->cls = cls;
    w->dirty = true;
}

void widget_move(Widget *w, int y, int x, int h, int width)
{
    if (w->y == y && w->x == x && w->h == h && w->w == width)
        return;
    w->y = y;
    w->x = x;
    w->h = h < 0 ? 0 : h;
    w->w = width < 0 ? 0 : width;
    w->dirty = true;
}

void widget_draw(Widget *w)
{
    if (!w->dirty)
        return;
    if (w->h > 0 && w->w > 0)
        w->cls->draw(w);
    w->dirty = false;
}

KeyResult widget_key(Widget *w, int ch)
{
    return w->cls->key ? w->cls->key(w, ch) : KEY_IGNORED;
}

void widget_done(Widget *w)
{
    if (w->cls->done)
        w->cls->done(w);
}

/* Widths beyond this are clipped (no terminal is this wide). */
#define MAX_COLS 2048

void tui_put(int y, int x, int width, const char *s, int flags, attr_t attr)
{
    static char buf[4 * MAX_COLS + 8];
    if (width <= 0)
        return;
    if (width > MAX_COLS)
        width = MAX_COLS;
    fmt_fit(buf, sizeof buf, s, width, flags);
    attrset(attr);
    mvaddstr(y, x, buf);
    attrset(A_NORMAL);
}

static void put_run(const FmtCell *cells, size_t n, AttrClass cls)
{
    static char buf[4 * MAX_COLS + 8];
    if (n == 0)
        return;
    fmt_put_cells(buf, sizeof buf, cells, n);
    attrset(colors_attr(cls));
    addstr(buf);
}

void tui_put_styled(int y, int x, int width, const char *s, AttrClass base, bool override,
                    int skip, int take)
{
    FmtCell *cells = NULL;
    int total;
    if (width <= 0)
        return;
    if (width > MAX_COLS)
        width = MAX_COLS;
    size_t n = fmt_cells(s, base, &cells, &total);
    /* The cells from column `skip` on. */
    size_t from = 0;
    int col = 0;
    while (from < n && col + cells[from].w <= skip)
        col += cells[from++].w;
    int limit = take < 0 ? width : (take < width ? take : width);
    bool cut = take < 0 && total - col > width;
    if (cut)
        limit = width - 1;
    size_t to = from;
    int used = 0;
    while (to < n && used + cells[to].w <= limit)
        used += cells[to++].w;
    if (override)
        for (size_t i = from; i < to; i++)
            cells[i].cls = (unsigned char)base;
    move(y, x);
    size_t run = from;
    for (size_t i = from + 1; i <= to; i++) {
        if (i == to || cells[i].cls != cells[run].cls) {
            put_run(cells + run, i - run, (AttrClass)cells[run].cls);
            run = i;
        }
    }
    if (cut) {
        FmtCell mark = {fmt_utf8() ? (wchar_t)0x2026 : L'~', 1, (unsigned char)base};
        put_run(&mark, 1, override ? base : (AttrClass)(to > from ? cells[to - 1].cls : base));
        used++;
    }
    if (used < width) {
        hline((chtype)' ' | colors_attr(base), width - used);   /* cursor stays */
    }
    attrset(A_NORMAL);
    free(cells);
}
