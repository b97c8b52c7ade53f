/*
 * views.c -- the two whole-run views: graph-break reasons grouped by site
 * (`b`: kind, reason, file:line, how often, in which functions) and the
 * recompile log (`r`: newest first, with the guard that failed, the value
 * observed and, where there is room, the entry nearest to the new inputs).
 * Both are selectable pagers; Enter on a line opens the detail of its code
 * object.  Read through store/read.h; tables:
 * docs/sql.md; manual: docs/dyntop.md.
 */
#include "tui.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S(c) TUI_STYLE(c)
#define BREAK_SITES_LIMIT 1000
/* A recompile line keeps this many columns (when, function, compile id: 46;
   the failing guard and the value observed: the rest) before its nearest
   entry is left out: why it recompiled comes first. */
#define RECOMPILE_KEEP 100
/* The nearest entry's source (file:line) is cut to this. */
#define RECOMPILE_SOURCE_COLS 28

/* fmt_fit into a static-size buffer. */
static const char *fit(char *buf, size_t cap, const char *s, int width, int flags)
{
    fmt_fit(buf, cap, s, width, flags);
    return buf;
}

/* A list being filled: the pager and what it has added. */
typedef struct List {
    Pager *p;
    long long rows, total;
} List;

static void break_site_seen(void *ctx, const StoreBreakSiteRow *row)
{
    List *l = ctx;
    char kind[128], site[512], fns[512], where[600];
    snprintf(where, sizeof where, "%s:%d", row->filename, row->lineno);
    char *reason = fmt_sanitize(row->reason);
    pager_add(l->p, row->run_id, row->code_id,
              " %s%7lld%s  %s%s%s  %s  %s%s%s  %s", S(AC_HEADER_VALUE), row->n, S(AC_NORMAL),
              S(AC_KIND), fit(kind, sizeof kind, row->kind, 22, FMT_LEFT),
              S(AC_NORMAL), fit(site, sizeof site, where, 30, FMT_TRUNC_START),
              S(AC_DIM), fit(fns, sizeof fns, row->functions, 20, FMT_LEFT),
              S(AC_NORMAL), reason);
    free(reason);
    l->rows++;
    l->total += row->n;
}

int views_load_breaks(Pager *p, Model *m)
{
    pager_clear(p);
    if (model_begin(m) < 0) {
        pager_set_title(p, " Graph break reasons by site");
        pager_add(p, -1, -1, "  %scannot read the database", S(AC_BAD));
        pager_finish(p);
        return -1;
    }
    List l = {p, 0, 0};
    if (store_read_break_sites(model_reader(m), m->run_id, BREAK_SITES_LIMIT, break_site_seen,
                               &l) < 0)
        pager_add(p, -1, -1, "%s  query failed: %s", S(AC_BAD), model_read_error(m));
    model_end(m);
    long long sites = l.rows, total = l.total;
    char *title = xasprintf(" Graph break reasons by site: %lld site%s, %lld break%s   "
                            "COUNT  KIND  FILE:LINE  FUNCTIONS  REASON", sites,
                            sites == 1 ? "" : "s", total, total == 1 ? "" : "s");
    pager_set_title(p, title);
    free(title);
    if (sites == 0)
        pager_add(p, -1, -1, "  %s(no graph breaks recorded)", S(AC_DIM));
    pager_finish(p);
    return 0;
}

static void recompile_seen(void *ctx, const StoreRecompileLogRow *row)
{
    List *l = ctx;
    char at[32], name[256], cid[64], guard[1024];
    fmt_since(at, sizeof at, row->started_at - row->run_started_at);
    snprintf(cid, sizeof cid, "[%s]", row->compile_id);
    if (row->has_failure) {
        /* sanitized: no style switches from data */
        char *kind = fmt_sanitize(row->kind), *expr = fmt_sanitize(row->expr);
        char *obs = fmt_sanitize(row->observed);
        snprintf(guard, sizeof guard, "%s%s%s %s  %sobserved %s%s", S(AC_KIND), kind,
                 S(AC_NORMAL), expr, S(AC_BAD), obs, S(AC_NORMAL));
        free(kind);
        free(expr);
        free(obs);
    }
    else
        snprintf(guard, sizeof guard, "%s(no failing guard recorded)%s", S(AC_DIM),
                 S(AC_NORMAL));
    char more[64] = "";
    if (row->failures > 1)
        snprintf(more, sizeof more, "  %s+%lld more", S(AC_DIM), row->failures - 1);
    pager_add(l->p, row->run_id, row->code_id,
              " %s%11s%s  %s  %s%-8s%s  %s%s", S(AC_DIM), at, S(AC_NORMAL),
              fit(name, sizeof name, row->name, 20, FMT_LEFT), S(AC_HEADER_VALUE),
              cid, S(AC_NORMAL), guard, more);
    if (row->has_nearest) {
        /* The older entry nearest to the new inputs, how many of its guards
           failed, where the first of them came from: the pager puts it flush
           right and cuts the guard for it, or leaves it out when narrow. */
        char entry[64], src[4 * RECOMPILE_SOURCE_COLS + 8];
        fit(entry, sizeof entry, row->nearest_entry, 12, FMT_NOPAD);
        fmt_where(src, sizeof src, row->nearest_filename, row->nearest_lineno,
                  RECOMPILE_SOURCE_COLS);
        pager_set_tail(l->p, RECOMPILE_KEEP, "%snearest %s[%s]%s %lld failing%s%s%s",
                       S(AC_DIM), S(AC_HEADER_VALUE), entry, S(AC_NORMAL),
                       row->nearest_failing, S(AC_DIM), src[0] ? "  " : "", src);
    }
    l->rows++;
}

int views_load_recompiles(Pager *p, Model *m)
{
    pager_clear(p);
    if (model_begin(m) < 0) {
        pager_set_title(p, " Recompile log");
        pager_add(p, -1, -1, "  %scannot read the database", S(AC_BAD));
        pager_finish(p);
        return -1;
    }
    List l = {p, 0, 0};
    if (store_read_recompile_log(model_reader(m), m->run_id, VIEWS_RECOMPILE_LIMIT,
                                 recompile_seen, &l) < 0)
        pager_add(p, -1, -1, "%s  query failed: %s", S(AC_BAD), model_read_error(m));
    model_end(m);
    long long shown = l.rows;
    long long total = m->totals.recompiles;
    char *title = xasprintf(" Recompile log, newest first: %lld recompile%s%s   "
                            "WHEN  FUNCTION  [COMPILE]  FIRST FAILING GUARD  OBSERVED  "
                            "NEAREST ENTRY", total,
                            total == 1 ? "" : "s",
                            total > shown ? " (showing the newest " TUI_STR(VIEWS_RECOMPILE_LIMIT) ")"
                                          : "");
    pager_set_title(p, title);
    free(title);
    if (shown == 0)
        pager_add(p, -1, -1, "  %s(no recompiles recorded)", S(AC_DIM));
    pager_finish(p);
    return 0;
}
