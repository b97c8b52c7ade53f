/*
 * help.c -- the one list of dyntop's keys (what the help screen shows and
 * docs/dyntop.md documents; tests check that every key here is in the
 * manual), the help screen built from it with the colour legend and the
 * column meanings, and the sort menu (F6).  Contract: tui.h.
 */
#include "tui.h"

#include <stdio.h>
#include <string.h>

#define S(c) TUI_STYLE(c)

const KeyHelp help_keys[] = {
    {"Up Down",         "move the selection (the table) or scroll (views)",        "any"},
    {"PgUp PgDn",       "a page up / down",                                          "any"},
    {"Home End",        "first / last row",                                          "any"},
    {"Enter",           "detail of the selected code object (in b, r, v: of the line's)", "any"},
    {"F6 > <",          "sort menu: pick the sort column",                           "table"},
    {"R",               "sort by recompiles (again: invert)",                        "table"},
    {"B",               "sort by graph breaks (again: invert)",                      "table"},
    {"H",               "sort by cache hits (again: invert)",                        "table"},
    {"T",               "sort by capture time (again: invert)",                      "table"},
    {"I",               "invert the sort order",                                     "table"},
    {"/ \\ F4",         "filter by function name or file (typing filters at once)",  "table"},
    {"Esc",             "clear the filter (table); back to the table (views)",       "any"},
    {"F",               "follow the selected code object when the order changes",    "table"},
    {"b",               "graph breaks by site, costliest first; skips; with hints",  "any"},
    {"r",               "recompile log, newest first",                               "any"},
    {"v",               "divergence between runs (a job's ranks): the odd runs",     "any"},
    {"? h F1",          "this help",                                                 "any"},
    {"p Z",             "pause / resume polling the database",                       "any"},
    {"Space",           "refresh now (table); next page (views)",                    "any"},
    {"Ctrl-L",          "redraw the screen and reload the database from scratch",    "any"},
    {"Left Backspace",  "back to the table (views)",                                 "views"},
    {"q",               "quit (in a view: back to the table)",                       "any"},
    {"F10 Ctrl-C",      "quit",                                                      "any"},
    {"Enter",           "keep the filter and stop typing",                           "filter"},
    {"Esc",             "drop the filter",                                           "filter"},
    {"Backspace Ctrl-U","delete a character / the whole filter",                     "filter"},
    {"Up Down Enter",   "pick a column and sort by it; Esc closes the menu",         "menu"},
};
const size_t help_nkeys = sizeof help_keys / sizeof help_keys[0];

static const struct {
    const char *title;
    const char *meaning;
} column_help[COL__COUNT] = {
    {"S", "L = at its cache limit (red), R = recompiled in the last 5 s (yellow)"},
    {"RANK", "several files: the run, \"rank R\" (torchrun's RANK) or \"pid P@host\""},
    {"HOST", "several files from several hosts: the host the run ran on"},
    {"FUNCTION", "the code object's qualified name"},
    {"FILE:LINE", "where it is defined"},
    {"ENTRIES", "cache entries of its fullest frame / the cache limit (per frame)"},
    {"HITS", "calls that hit a cache entry (counter snapshots, current epoch)"},
    {"MISSES", "calls no entry matched: compiles, plus cache-limit fallbacks"},
    {"RECOMP", "recompiles: compiles after a frame's first (frame_compile_id > 0)"},
    {"GRAPHS", "graphs compiled"},
    {"BREAKS", "graph breaks met while translating it"},
    {"CAPT_MS", "time spent capturing it (translation + backend), ms"},
    {"LAST FAILING GUARD", "the newest guard failure and the value observed"},
};

void help_load(Pager *p)
{
    pager_clear(p);
    pager_set_title(p, " dyntop help  (Esc, q or ? to return)");
    pager_add(p, -1, -1, "%sdyntop%s: a top for the capture engine, over a dynscope "
              "database (live or finished).  Manual: docs/dyntop.md, man dyntop.",
              S(AC_HEADER_VALUE), S(AC_NORMAL));
    pager_add(p, -1, -1, "%s", "");
    pager_add(p, -1, -1, "%sKeys", S(AC_SECTION));
    const char *where = NULL;
    for (size_t i = 0; i < help_nkeys; i++) {
        const KeyHelp *k = &help_keys[i];
        if (where == NULL || strcmp(where, k->where) != 0) {
            where = k->where;
            if (strcmp(where, "filter") == 0)
                pager_add(p, -1, -1, "  %swhile typing a filter:", S(AC_DIM));
            else if (strcmp(where, "menu") == 0)
                pager_add(p, -1, -1, "  %sin the sort menu:", S(AC_DIM));
        }
        pager_add_indent(p, 22, "  %s%-18s%s  %s", S(AC_KEY), k->keys, S(AC_NORMAL), k->what);
    }
    pager_add(p, -1, -1, "%s", "");
    pager_add(p, -1, -1, "%sColumns", S(AC_SECTION));
    for (int c = 0; c < COL__COUNT; c++)
        pager_add_indent(p, 22, "  %s%-18s%s  %s", S(AC_HEADER_VALUE), column_help[c].title,
                         S(AC_NORMAL), column_help[c].meaning);
    pager_add(p, -1, -1, "%s", "");
    pager_add(p, -1, -1, "%sColours", S(AC_SECTION));
    pager_add(p, -1, -1, "  %sred%s     a code object at its cache limit (it now runs uncaptured)",
              S(AC_LIMIT), S(AC_NORMAL));
    pager_add(p, -1, -1, "  %syellow%s  a code object that recompiled in the last 5 seconds",
              S(AC_RECENT), S(AC_NORMAL));
    pager_add(p, -1, -1, "  %sred%s     (divergence view) a run that compiled or broke unlike "
              "the others", S(AC_BAD), S(AC_NORMAL));
    pager_add(p, -1, -1, "  %sin the break view (b), the class of a break (docs/breaks.md):",
              S(AC_DIM));
    static const char *const classes[][2] = {
        {"your code", "yours to change: the hint says how"},
        {"library code", "in an installed package you cannot edit: capture around it"},
        {"engine limit", "dynscope does not model it yet: the engine's debt"},
        {"fundamental", "no capture engine can (a branch on data)"},
    };
    for (size_t i = 0; i < sizeof classes / sizeof classes[0]; i++)
        pager_add(p, -1, -1, "  %s%-12s%s  %s", S(colors_break_class(classes[i][0])),
                  classes[i][0], S(AC_NORMAL), classes[i][1]);
    pager_finish(p);
}

void help_load_sort_menu(Pager *p, const Model *m, ColumnId current)
{
    pager_clear(p);
    pager_set_title(p, " Sort by");
    p->cursor = 0;
    for (int c = 0; c < COL__COUNT; c++) {
        if (!table_column_applies(m, (ColumnId)c))
            continue;
        if (c == (int)current)
            p->cursor = p->nlines;
        pager_add(p, -1, c, " %s", table_columns[c].title);
    }
    pager_finish(p);
}
