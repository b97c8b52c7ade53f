/*
 * colors.c -- the attribute of each AttrClass: colours close to htop's
 * default scheme when the terminal has them (and neither --no-color nor
 * NO_COLOR asked otherwise), bold/reverse/underline otherwise; and which
 * of them shows each class of the break registry.  Contract: tui.h.
 */
#include "tui.h"
#include "../event/break_types.h"

#include <string.h>

static attr_t attrs[AC__COUNT];

typedef struct ColorSpec {
    short fg, bg;            /* -1: the terminal's default */
    attr_t extra;
    attr_t mono;             /* without colour */
} ColorSpec;

static const ColorSpec specs[AC__COUNT] = {
    [AC_NORMAL]       = {-1, -1, A_NORMAL, A_NORMAL},
    [AC_HEADER_LABEL] = {COLOR_CYAN, -1, A_NORMAL, A_NORMAL},
    [AC_HEADER_VALUE] = {-1, -1, A_BOLD, A_BOLD},
    [AC_HEADER_LIVE]  = {COLOR_GREEN, -1, A_BOLD, A_BOLD},
    [AC_HEADER_WARN]  = {COLOR_WHITE, COLOR_RED, A_BOLD, A_REVERSE | A_BOLD},
    [AC_TABLE_HEAD]   = {COLOR_BLACK, COLOR_GREEN, A_NORMAL, A_REVERSE},
    [AC_TABLE_SORT]   = {COLOR_BLACK, COLOR_CYAN, A_NORMAL, A_REVERSE | A_BOLD},
    [AC_CURSOR]       = {COLOR_BLACK, COLOR_CYAN, A_NORMAL, A_REVERSE},
    [AC_LIMIT]        = {COLOR_RED, -1, A_BOLD, A_BOLD},
    [AC_RECENT]       = {COLOR_YELLOW, -1, A_BOLD, A_UNDERLINE},
    [AC_DIM]          = {-1, -1, A_DIM, A_DIM},
    [AC_TITLE]        = {COLOR_BLACK, COLOR_GREEN, A_NORMAL, A_REVERSE},
    [AC_SECTION]      = {COLOR_CYAN, -1, A_BOLD, A_BOLD | A_UNDERLINE},
    [AC_KIND]         = {COLOR_MAGENTA, -1, A_NORMAL, A_BOLD},
    [AC_KEY]          = {COLOR_BLACK, COLOR_CYAN, A_NORMAL, A_REVERSE},
    [AC_SOURCE]       = {COLOR_GREEN, -1, A_NORMAL, A_NORMAL},
    [AC_BAD]          = {COLOR_RED, -1, A_NORMAL, A_BOLD},
    /* break classes: each its own colour, and apart without colour too */
    [AC_YOUR_CODE]    = {COLOR_YELLOW, -1, A_BOLD, A_BOLD},
    [AC_LIBRARY_CODE] = {COLOR_CYAN, -1, A_NORMAL, A_NORMAL},
    [AC_ENGINE_LIMIT] = {COLOR_MAGENTA, -1, A_BOLD, A_UNDERLINE},
    [AC_FUNDAMENTAL]  = {COLOR_BLUE, -1, A_BOLD, A_DIM},
};

void colors_init(bool use_color)
{
    bool color = use_color && has_colors() && start_color() == OK;
    if (color)
        use_default_colors();
    for (int c = 0; c < AC__COUNT; c++) {
        const ColorSpec *s = &specs[c];
        if (!color || (s->fg == -1 && s->bg == -1)) {
            attrs[c] = color ? s->extra : s->mono;
            continue;
        }
        short pair = (short)(c + 1);
        if (pair >= COLOR_PAIRS || init_pair(pair, s->fg, s->bg) != OK) {
            attrs[c] = s->mono;
            continue;
        }
        attrs[c] = (attr_t)COLOR_PAIR(pair) | s->extra;
    }
}

AttrClass colors_break_class(const char *name)
{
    static const AttrClass of[BREAK_CLASS__COUNT] = {
        [BREAK_YOUR_CODE] = AC_YOUR_CODE,
        [BREAK_LIBRARY] = AC_LIBRARY_CODE,
        [BREAK_ENGINE_LIMIT] = AC_ENGINE_LIMIT,
        [BREAK_FUNDAMENTAL] = AC_FUNDAMENTAL,
    };
    for (int c = 0; c < BREAK_CLASS__COUNT; c++)
        if (strcmp(name, break_class_name((BreakClass)c)) == 0)
            return of[c];
    return AC_NORMAL;
}

attr_t colors_attr(AttrClass c)
{
    TUI_ASSERT(c >= 0 && c < AC__COUNT);
    return attrs[c];
}
