/*
 * views.c -- the two whole-run views: graph-break reasons grouped by site
 * (`b`: kind, reason, file:line, how often, in which functions) and the
 * recompile log (`r`: newest first, with the guard that failed and the
 * value observed).  Both are selectable pagers; Enter on a line opens the
 * detail of its code object.  Tables: docs/sql.md; manual: docs/dyntop.md.
 */
#include "tui.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S(c) TUI_STYLE(c)
#define BREAK_SITES_LIMIT 1000

/* fmt_fit into a static-size buffer. */
static const char *fit(char *buf, size_t cap, const char *s, int width, int flags)
{
    fmt_fit(buf, cap, s, width, flags);
    return buf;
}

/* Bind ?1 = the shown run (0 = all runs) and report a failed prepare. */
static sqlite3_stmt *query(Pager *p, Model *m, const char *sql)
{
    sqlite3_stmt *st = model_prepare(m, sql);
    if (st == NULL) {
        sqlite3 *db = model_db(m);
        pager_add(p, -1, -1, "%s  query failed: %s", S(AC_BAD),
                  db ? sqlite3_errmsg(db) : "database closed");
        return NULL;
    }
    sqlite3_bind_int64(st, 1, m->run_id);
    return st;
}

/* query() with "%s" in sql replaced by the run condition: always true for
   every run, else "<alias>run_id = ?1" (a bound "?1 = 0 OR ..." would keep
   SQLite from using the per-run indexes). */
static sqlite3_stmt *query_run(Pager *p, Model *m, const char *alias, const char *sql)
{
    char cond[64], *text;
    if (m->run_id == 0)
        snprintf(cond, sizeof cond, "(?1 IS NOT NULL)");
    else
        snprintf(cond, sizeof cond, "%srun_id = ?1", alias);
    text = xasprintf(sql, cond);
    sqlite3_stmt *st = query(p, m, text);
    free(text);
    return st;
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
    /* Bare columns next to max(): SQLite takes them from the newest break.
       The function names are listed once each, comma-separated. */
    sqlite3_stmt *st = query_run(p, m, "b.",
        "SELECT b.kind, b.reason, coalesce(b.filename, ''), b.lineno, count(*) AS n,"
        " count(DISTINCT b.run_id || '/' || b.code_id), max(b.break_id), b.run_id, b.code_id,"
        " group_concat(DISTINCT co.name)"
        " FROM graph_breaks AS b"
        " LEFT JOIN code_objects AS co ON co.run_id = b.run_id AND co.code_id = b.code_id"
        " WHERE %s"
        " GROUP BY b.kind, b.reason, b.filename, b.lineno"
        " ORDER BY n DESC, b.filename, b.lineno LIMIT " TUI_STR(BREAK_SITES_LIMIT));
    long long sites = 0, total = 0;
    if (st != NULL) {
        while (sqlite3_step(st) == SQLITE_ROW) {
            char kind[128], site[512], fns[512], where[600];
            long long n = sqlite3_column_int64(st, 4);
            snprintf(where, sizeof where, "%s:%d", model_text(st, 2), sqlite3_column_int(st, 3));
            char *reason = fmt_sanitize(model_text(st, 1));
            pager_add(p, sqlite3_column_int64(st, 7), sqlite3_column_int64(st, 8),
                      " %s%7lld%s  %s%s%s  %s  %s%s%s  %s", S(AC_HEADER_VALUE), n, S(AC_NORMAL),
                      S(AC_KIND), fit(kind, sizeof kind, model_text(st, 0), 22, FMT_LEFT),
                      S(AC_NORMAL), fit(site, sizeof site, where, 30, FMT_TRUNC_START),
                      S(AC_DIM), fit(fns, sizeof fns, model_text(st, 9), 20, FMT_LEFT),
                      S(AC_NORMAL), reason);
            free(reason);
            sites++;
            total += n;
        }
        sqlite3_finalize(st);
    }
    model_end(m);
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

int views_load_recompiles(Pager *p, Model *m)
{
    pager_clear(p);
    if (model_begin(m) < 0) {
        pager_set_title(p, " Recompile log");
        pager_add(p, -1, -1, "  %scannot read the database", S(AC_BAD));
        pager_finish(p);
        return -1;
    }
    sqlite3_stmt *st = query_run(p, m, "+c.",
        "SELECT c.run_id, c.code_id, coalesce(co.name, '?'), c.compile_id, c.started_at,"
        " (SELECT count(*) FROM guard_failures AS g WHERE g.compile_row = c.compile_row),"
        " (SELECT g.kind || char(9) || g.expr || char(9) || coalesce(g.observed, '?')"
        "    FROM guard_failures AS g WHERE g.compile_row = c.compile_row"
        "    ORDER BY g.failure_id LIMIT 1),"
        " r.started_at"
        " FROM compiles AS c"
        " LEFT JOIN code_objects AS co ON co.run_id = c.run_id AND co.code_id = c.code_id"
        " LEFT JOIN runs AS r ON r.run_id = c.run_id"
        " WHERE c.frame_compile_id > 0 AND %s"
        " ORDER BY c.compile_row DESC LIMIT " TUI_STR(VIEWS_RECOMPILE_LIMIT));
    long long shown = 0;
    if (st != NULL) {
        while (sqlite3_step(st) == SQLITE_ROW) {
            char at[32], name[256], cid[64], guard[1024];
            fmt_since(at, sizeof at, sqlite3_column_int64(st, 4) - sqlite3_column_int64(st, 7));
            snprintf(cid, sizeof cid, "[%s]", model_text(st, 3));
            long long nfail = sqlite3_column_int64(st, 5);
            /* kind \t expr \t observed, sanitized (no style switches from data) */
            char *first = fmt_sanitize(model_text(st, 6));
            char *expr = NULL, *obs = NULL;
            const char *raw = model_text(st, 6);
            const char *t1 = strchr(raw, '\t'), *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
            if (t1 && t2) {
                first[t1 - raw] = '\0';
                first[t2 - raw] = '\0';
                expr = first + (t1 - raw) + 1;
                obs = first + (t2 - raw) + 1;
                snprintf(guard, sizeof guard, "%s%s%s %s  %sobserved %s%s", S(AC_KIND), first,
                         S(AC_NORMAL), expr, S(AC_BAD), obs, S(AC_NORMAL));
            }
            else
                snprintf(guard, sizeof guard, "%s(no failing guard recorded)%s", S(AC_DIM),
                         S(AC_NORMAL));
            free(first);
            char more[64] = "";
            if (nfail > 1)
                snprintf(more, sizeof more, "  %s+%lld more", S(AC_DIM), nfail - 1);
            pager_add(p, sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1),
                      " %s%11s%s  %s  %s%-8s%s  %s%s", S(AC_DIM), at, S(AC_NORMAL),
                      fit(name, sizeof name, model_text(st, 2), 20, FMT_LEFT), S(AC_HEADER_VALUE),
                      cid, S(AC_NORMAL), guard, more);
            shown++;
        }
        sqlite3_finalize(st);
    }
    model_end(m);
    long long total = m->totals.recompiles;
    char *title = xasprintf(" Recompile log, newest first: %lld recompile%s%s   "
                            "WHEN  FUNCTION  [COMPILE]  FIRST FAILING GUARD  OBSERVED", total,
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
