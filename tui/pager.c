/*
 * pager.c -- a scrollable list of styled lines with an optional title bar:
 * the detail view, the break-reason and recompile views, the help screen and
 * the sort menu are all pagers with different content.  Two modes: plain
 * (scrolls; long lines wrap at word boundaries, continuation lines
 * indented) and selectable (a cursor line, long lines cut; Enter on a line
 * that names a code object opens it).  A line may have a tail, drawn flush
 * right, placed when the width is known (at draw time), so a resize moves
 * it without reloading the content; and a note, shown under the list while
 * the line is selected (the break view's hint and source line).  Contract:
 * tui.h.
 */
#include "tui.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- content ---- */

static void add_line(Pager *p, long long run_id, long long code_id, int indent, char *text)
{
    if (p->nlines == p->caplines) {
        p->caplines = p->caplines ? 2 * p->caplines : 64;
        p->lines = xrealloc(p->lines, p->caplines * sizeof *p->lines);
    }
    PagerLine *l = &p->lines[p->nlines++];
    l->text = text;
    l->file = 0;
    l->run_id = run_id;
    l->code_id = code_id;
    l->wrap_indent = indent;
    l->tail = NULL;
    l->tail_keep = 0;
    l->note = NULL;
    p->vis_width = -1;
}

static char *vformat(const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    char *s = xmalloc(n > 0 ? (size_t)n + 1 : 1);
    vsnprintf(s, n > 0 ? (size_t)n + 1 : 1, fmt, ap2);
    va_end(ap2);
    return s;
}

void pager_add(Pager *p, long long run_id, long long code_id, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = vformat(fmt, ap);
    va_end(ap);
    /* Continuation lines line up under the text after the line's indent. */
    int indent = 0;
    while (s[indent] == ' ')
        indent++;
    add_line(p, run_id, code_id, indent + 4, s);
}

void pager_add_indent(Pager *p, int indent, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = vformat(fmt, ap);
    va_end(ap);
    add_line(p, -1, -1, indent, s);
}

void pager_set_tail(Pager *p, int keep, const char *fmt, ...)
{
    TUI_ASSERT(p->nlines > 0);
    if (p->nlines == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    char *s = vformat(fmt, ap);
    va_end(ap);
    PagerLine *l = &p->lines[p->nlines - 1];
    free(l->tail);
    l->tail = s;
    l->tail_keep = keep;
    p->vis_width = -1;
}

void pager_set_note(Pager *p, const char *fmt, ...)
{
    TUI_ASSERT(p->nlines > 0);
    if (p->nlines == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    char *s = vformat(fmt, ap);
    va_end(ap);
    PagerLine *l = &p->lines[p->nlines - 1];
    free(l->note);
    l->note = s;
    p->notes = true;
    p->super.dirty = true;
}

void pager_set_file(Pager *p, int file)
{
    TUI_ASSERT(p->nlines > 0);
    if (p->nlines > 0)
        p->lines[p->nlines - 1].file = file;
}

void pager_clear(Pager *p)
{
    for (size_t i = 0; i < p->nlines; i++) {
        free(p->lines[i].text);
        free(p->lines[i].tail);
        free(p->lines[i].note);
    }
    p->nlines = 0;
    p->notes = false;
    p->vis_width = -1;
    p->super.dirty = true;
}

void pager_set_title(Pager *p, const char *title)
{
    free(p->title);
    p->title = title ? xstrdup(title) : NULL;
    p->super.dirty = true;
}

const PagerLine *pager_selected(const Pager *p)
{
    if (!p->selectable || p->cursor >= p->nlines)
        return NULL;
    return &p->lines[p->cursor];
}

/* Styled text without its markup. */
static void print_plain(const char *s, FILE *out)
{
    for (const char *c = s; *c; c++) {
        if (*c == '\x01') {
            if (c[1])
                c++;
            continue;
        }
        fputc(*c, out);
    }
}

void pager_print(const Pager *p, FILE *out)
{
    for (size_t i = 0; i < p->nlines; i++) {
        print_plain(p->lines[i].text, out);
        if (p->lines[i].tail != NULL) {
            fputs("  ", out);
            print_plain(p->lines[i].tail, out);
        }
        fputc('\n', out);
    }
}

/* ---- visual lines ---- */

static void add_vis(Pager *p, size_t line, int skip, int take, bool tail)
{
    if (p->nvis == p->capvis) {
        p->capvis = p->capvis ? 2 * p->capvis : 128;
        p->vis_line = xrealloc(p->vis_line, p->capvis * sizeof *p->vis_line);
        p->vis_skip = xrealloc(p->vis_skip, p->capvis * sizeof *p->vis_skip);
        p->vis_take = xrealloc(p->vis_take, p->capvis * sizeof *p->vis_take);
        p->vis_tail = xrealloc(p->vis_tail, p->capvis * sizeof *p->vis_tail);
    }
    p->vis_line[p->nvis] = line;
    p->vis_skip[p->nvis] = skip;
    p->vis_take[p->nvis] = take;
    p->vis_tail[p->nvis] = tail;
    p->nvis++;
}

/* Split one logical line into pieces of at most `width` columns (the first)
   and width - indent (the others), at a space when one is near the end.
   Its tail goes beside the last piece if it fits there, else below it. */
/* One row of a wrapped line: the cells from i that fit `avail` columns,
   broken after a space when one is past the middle, at least one cell (a
   character wider than the row).  Returns where the row ends; *used its
   columns. */
static size_t wrap_piece(const FmtCell *cells, size_t n, size_t i, int avail, int *used)
{
    size_t end = i, brk = 0;
    int u = 0, used_at_brk = 0;
    while (end < n && u + cells[end].w <= avail) {
        u += cells[end].w;
        if (cells[end].wc == L' ' && u > avail / 2) {
            brk = end + 1;
            used_at_brk = u;
        }
        end++;
    }
    if (brk > i && end < n && cells[end].wc != L' ') {
        end = brk;
        u = used_at_brk;
    }
    if (end == i) {              /* a character wider than the line */
        u = cells[i].w;
        end = i + 1;
    }
    *used = u;
    return end;
}

static void wrap_line(Pager *p, size_t li, int width)
{
    FmtCell *cells = NULL;
    int total;
    size_t n = fmt_cells(p->lines[li].text, AC_NORMAL, &cells, &total);
    int indent = p->lines[li].wrap_indent;
    if (indent > width / 2)
        indent = width / 2;
    const char *tail = p->lines[li].tail;
    int tw = tail != NULL ? fmt_width_styled(tail) : 0;
    bool tail_placed = tail == NULL;
    size_t i = 0;
    int col = 0;
    bool first = true;
    while (first || i < n) {
        int avail = first ? width : width - indent;
        if (total - col <= avail) {
            tail_placed = tail_placed || total - col + 2 + tw <= avail;
            add_vis(p, li, col, -1, tail != NULL && tail_placed);
            break;
        }
        int used;
        size_t end = wrap_piece(cells, n, i, avail, &used);
        add_vis(p, li, col, used, false);
        col += used;
        i = end;
        /* continuation lines do not start with the spaces of the break */
        while (i < n && cells[i].wc == L' ') {
            col += cells[i].w;
            i++;
        }
        first = false;
    }
    if (!tail_placed)            /* a screen line of its own */
        add_vis(p, li, total, 0, true);
    free(cells);
}

static void compute_vis(Pager *p, int width)
{
    p->nvis = 0;
    for (size_t i = 0; i < p->nlines; i++) {
        if (p->wrap && width > 8)
            wrap_line(p, i, width);
        else
            add_vis(p, i, 0, -1, p->lines[i].tail != NULL);
    }
    p->vis_width = width;
}

/* The rows at the bottom kept for the selected line's note: a rule and
   the text, at most a third of the pager's rows. */
static int note_rows(const Pager *p)
{
    if (!p->notes || !p->selectable)
        return 0;
    int rows = (p->super.h - (p->title ? 1 : 0)) / 3;
    if (rows > PAGER_NOTE_ROWS)
        rows = PAGER_NOTE_ROWS;
    return rows < 2 ? 0 : rows;
}

static int body_rows(const Pager *p)
{
    int rows = p->super.h - (p->title ? 1 : 0) - note_rows(p);
    return rows < 1 ? 1 : rows;
}

static void clamp(Pager *p)
{
    size_t rows = (size_t)body_rows(p);
    if (p->selectable) {
        if (p->cursor >= p->nlines)
            p->cursor = p->nlines ? p->nlines - 1 : 0;
        if (p->cursor < p->top)
            p->top = p->cursor;
        else if (p->cursor >= p->top + rows)
            p->top = p->cursor - rows + 1;
    }
    size_t total = p->selectable ? p->nlines : p->nvis;
    if (total <= rows)
        p->top = 0;
    else if (p->top + rows > total)
        p->top = total - rows;
}

void pager_finish(Pager *p)
{
    compute_vis(p, p->super.w);
    clamp(p);
    p->super.dirty = true;
}

/* ---- the widget ---- */

static void draw_title(Pager *p)
{
    Widget *w = &p->super;
    char pos[64] = "";
    size_t rows = (size_t)body_rows(p), total = p->selectable ? p->nlines : p->nvis;
    if (total > rows)
        snprintf(pos, sizeof pos, " %zu-%zu/%zu ", p->top + 1,
                 p->top + rows < total ? p->top + rows : total, total);
    int pw = (int)strlen(pos);
    tui_put(w->y, w->x, w->w - pw, p->title, FMT_LEFT, colors_attr(AC_TITLE));
    if (pw > 0 && pw <= w->w)
        tui_put(w->y, w->x + w->w - pw, pw, pos, FMT_LEFT, colors_attr(AC_TITLE));
}

/* Pieces of one line of a note for `width` columns (the first) and
   width - indent (the others), broken at a space when one is near the end:
   skip[i], take[i] for each; returns how many (at most max). */
static int note_pieces(const char *text, int width, int indent, int *skip, int *take, int max)
{
    FmtCell *cells = NULL;
    int total, n = 0, col = 0;
    size_t ncells = fmt_cells(text, AC_NORMAL, &cells, &total), i = 0;
    while (n < max) {
        int avail = n == 0 ? width : width - indent;
        if (total - col <= avail) {
            skip[n] = col;
            take[n++] = -1;
            break;
        }
        int used;
        size_t end = wrap_piece(cells, ncells, i, avail, &used);
        skip[n] = col;
        take[n] = n + 1 < max ? used : -1;      /* the last row: the rest, cut */
        n++;
        col += used;
        i = end;
        while (i < ncells && cells[i].wc == L' ') {
            col += cells[i].w;
            i++;
        }
    }
    free(cells);
    return n;
}

/* The selected line's note in the bottom rows: a rule, then its lines. */
static void draw_note(Pager *p)
{
    Widget *w = &p->super;
    int rows = note_rows(p);
    if (rows == 0)
        return;
    int y = w->y + w->h - rows, end = w->y + w->h;
    char rule[4 * 512 + 1];
    size_t n = 0;
    for (int i = 0; i < w->w && i < 512; i++) {
        const char *piece = fmt_utf8() ? "\u2500" : "-";
        memcpy(rule + n, piece, strlen(piece));
        n += strlen(piece);
    }
    rule[n] = '\0';
    tui_put(y++, w->x, w->w, rule, FMT_LEFT, colors_attr(AC_DIM));
    const PagerLine *sel = p->cursor < p->nlines ? &p->lines[p->cursor] : NULL;
    char *note = sel != NULL && sel->note != NULL ? xstrdup(sel->note) : xstrdup("");
    char *save = NULL;
    for (char *line = strtok_r(note, "\n", &save); line != NULL && y < end;
         line = strtok_r(NULL, "\n", &save)) {
        int lead = 0;
        while (line[lead] == ' ')
            lead++;
        int indent = lead + 6 < w->w / 2 ? lead + 6 : w->w / 2;
        int skip[PAGER_NOTE_ROWS], take[PAGER_NOTE_ROWS];
        int pieces = note_pieces(line, w->w, indent, skip, take, end - y);
        for (int k = 0; k < pieces; k++, y++) {
            int x = k > 0 ? indent : 0;
            if (x > 0)
                tui_put(y, w->x, x, "", FMT_LEFT, colors_attr(AC_NORMAL));
            tui_put_styled(y, w->x + x, w->w - x, line, AC_NORMAL, false, skip[k], take[k]);
        }
    }
    free(note);
    for (; y < end; y++)
        tui_put(y, w->x, w->w, "", FMT_LEFT, colors_attr(AC_NORMAL));
}

static void pager_draw(Widget *w)
{
    Pager *p = (Pager *)w;
    if (p->vis_width != w->w)
        compute_vis(p, w->w);
    clamp(p);
    int y = w->y;
    if (p->title) {
        draw_title(p);
        y++;
    }
    int rows = body_rows(p);
    draw_note(p);
    for (int r = 0; r < rows && y + r < w->y + w->h - note_rows(p); r++) {
        size_t v = p->top + (size_t)r;
        if (v >= p->nvis) {
            tui_put(y + r, w->x, w->w, "", FMT_LEFT, colors_attr(AC_NORMAL));
            continue;
        }
        size_t li = p->vis_line[v];
        int skip = p->vis_skip[v];
        int indent = skip > 0 ? p->lines[li].wrap_indent : 0;
        if (indent > w->w / 2)
            indent = w->w / 2;
        bool sel = p->selectable && li == p->cursor;
        AttrClass base = sel ? AC_CURSOR : AC_NORMAL;
        if (indent > 0)
            tui_put(y + r, w->x, indent, "", FMT_LEFT, colors_attr(base));
        int text_w = w->w - indent, tw = 0;
        const char *tail = p->vis_tail[v] ? p->lines[li].tail : NULL;
        if (tail != NULL) {
            tw = fmt_width_styled(tail);
            if (tw > text_w)
                tw = text_w;
            /* the rest of a line (take < 0) gives up columns to make room,
               but keeps tail_keep of them (all of a shorter text), else the
               tail is left out */
            if (p->vis_take[v] < 0) {
                int keep = fmt_width_styled(p->lines[li].text) - skip;
                if (keep > p->lines[li].tail_keep)
                    keep = p->lines[li].tail_keep;
                if (text_w - tw - 2 < (keep > 1 ? keep : 1))
                    tail = NULL;
            }
        }
        if (tail == NULL) {
            tui_put_styled(y + r, w->x + indent, text_w, p->lines[li].text, base, sel, skip,
                           p->vis_take[v]);
            continue;
        }
        int head_w = text_w - tw - 2 > 0 ? text_w - tw - 2 : 0;
        if (head_w > 0)
            tui_put_styled(y + r, w->x + indent, head_w, p->lines[li].text, base, sel, skip,
                           p->vis_take[v]);
        tui_put(y + r, w->x + indent + head_w, text_w - tw - head_w, "", FMT_LEFT,
                colors_attr(base));
        tui_put_styled(y + r, w->x + w->w - tw, tw, tail, base, sel, 0, -1);
    }
}

static void pager_scroll(Pager *p, long delta)
{
    if (p->selectable) {
        long c = (long)p->cursor + delta;
        if (c < 0)
            c = 0;
        if (p->nlines && c >= (long)p->nlines)
            c = (long)p->nlines - 1;
        p->cursor = p->nlines ? (size_t)c : 0;
    }
    else {
        long t = (long)p->top + delta;
        p->top = t < 0 ? 0 : (size_t)t;
    }
    clamp(p);
    p->super.dirty = true;
}

static KeyResult pager_key(Widget *w, int ch)
{
    Pager *p = (Pager *)w;
    long page = body_rows(p) > 1 ? body_rows(p) - 1 : 1;
    long all = (long)(p->nlines + p->nvis + 1);
    switch (ch) {
    case KEY_UP:    pager_scroll(p, -1); return KEY_HANDLED;
    case KEY_DOWN:  pager_scroll(p, 1); return KEY_HANDLED;
    case KEY_PPAGE: pager_scroll(p, -page); return KEY_HANDLED;
    case KEY_NPAGE:
    case ' ':       pager_scroll(p, page); return KEY_HANDLED;
    case KEY_HOME:  pager_scroll(p, -all); return KEY_HANDLED;
    case KEY_END:   pager_scroll(p, all); return KEY_HANDLED;
    default:        return KEY_IGNORED;
    }
}

static void pager_class_done(Widget *w)
{
    Pager *p = (Pager *)w;
    pager_clear(p);
    free(p->lines);
    free(p->title);
    free(p->vis_line);
    free(p->vis_skip);
    free(p->vis_take);
    free(p->vis_tail);
    p->lines = NULL;
    p->title = NULL;
    p->vis_line = NULL;
    p->vis_skip = p->vis_take = NULL;
    p->vis_tail = NULL;
    p->caplines = p->capvis = p->nvis = 0;
}

static const WidgetClass pager_class = {
    .name = "Pager",
    .draw = pager_draw,
    .key = pager_key,
    .done = pager_class_done,
};

void pager_init(Pager *p, bool selectable, bool wrap)
{
    memset(p, 0, sizeof *p);
    widget_init(&p->super, &pager_class);
    p->selectable = selectable;
    p->wrap = wrap && !selectable;
    p->vis_width = -1;
}

Pager *pager_new(bool selectable, bool wrap)
{
    Pager *p = xmalloc(sizeof *p);
    pager_init(p, selectable, wrap);
    return p;
}

void pager_done(Pager *p)
{
    widget_done(&p->super);
}

void pager_delete(Pager *p)
{
    if (p == NULL)
        return;
    pager_done(p);
    free(p);
}
