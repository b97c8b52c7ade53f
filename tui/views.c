/*
 * views.c -- the two whole-run views: graph-break reasons grouped by site
 * (`b`: how often, the break's type and class in the registry
 * (event/break_types.h, docs/breaks.md), file:line, in which functions, the
 * reason, and under it the type's hint; the title counts breaks per class)
 * and the
 * recompile log (`r`: newest first, with the guard that failed, the value
 * observed and, where there is room, the entry nearest to the new inputs).
 * Both are selectable pagers; Enter on a line opens the detail of its code
 * object.  Read through store/read.h; tables:
 * docs/sql.md; manual: docs/dyntop.md.
 *
 * With several files each file is read in its own snapshot and the lists
 * are merged: a break site's counts and functions summed over the files
 * (Enter opens the first file's code object that broke there), the
 * recompiles of every file by wall-clock time, newest first, each with its
 * run's label.  With one file the rows go straight to the pager, as read.
 */
#include "tui.h"
#include "../event/break_types.h"

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

/* A list being filled: the pager and what it has added; with several
   files, the rows read so far (merged before they are added). */
typedef struct List {
    Pager *p;
    const Model *m;
    int file;                    /* the file being read */
    long long rows, total;
    long long per_class[BREAK_CLASS__COUNT];   /* breaks of each class (b) */
    bool typed;                  /* some site has a type (a v4 file) */
    void *kept;                  /* several files: owned rows (SiteRec, LogRec) */
    size_t nkept, capkept;
    IndexMap sites;              /* several files: site -> its SiteRec */
} List;

/* One of several files cannot be read now: say which, go on with the rest. */
static void cannot_read(Pager *p, const Model *m, size_t file)
{
    char *path = fmt_sanitize(m->files[file].path);
    pager_add(p, -1, -1, "  %scannot read %s", S(AC_BAD), path);
    free(path);
}

/* Room for one more kept row of `size` bytes; returns it (zeroed). */
static void *keep(List *l, size_t size)
{
    if (l->nkept == l->capkept) {
        l->capkept = l->capkept ? 2 * l->capkept : 64;
        l->kept = xrealloc(l->kept, l->capkept * size);
    }
    void *rec = (char *)l->kept + l->nkept++ * size;
    memset(rec, 0, size);
    return rec;
}

/* The class's style: who must act stands out (your code, library code),
   the engine's debt is marked, a break no engine avoids is dim. */
static int class_style(const char *cls)
{
    if (strcmp(cls, "your code") == 0)
        return AC_BAD;
    if (strcmp(cls, "library code") == 0)
        return AC_KIND;
    if (strcmp(cls, "engine limit") == 0)
        return AC_HEADER_WARN;
    return AC_DIM;
}

static void add_break_site(List *l, const StoreBreakSiteRow *row)
{
    char kind[128], site[512], fns[512], where[600], type[128], cls[64];
    snprintf(where, sizeof where, "%s:%d", row->filename, row->lineno);
    char *reason = fmt_sanitize(row->reason);
    const BreakType *bt = break_type_by_id(row->break_type);
    if (bt == NULL) {            /* before schema v4: the kind, as it was */
        pager_add(l->p, row->run_id, row->code_id,
                  " %s%7lld%s  %s%s%s  %s  %s%s%s  %s", S(AC_HEADER_VALUE), row->n,
                  S(AC_NORMAL), S(AC_KIND), fit(kind, sizeof kind, row->kind, 22, FMT_LEFT),
                  S(AC_NORMAL), fit(site, sizeof site, where, 30, FMT_TRUNC_START),
                  S(AC_DIM), fit(fns, sizeof fns, row->functions, 20, FMT_LEFT),
                  S(AC_NORMAL), reason);
        pager_set_file(l->p, l->file);
    }
    else {
        char both[160];
        snprintf(both, sizeof both, "%s %s", bt->id, bt->name);
        pager_add(l->p, row->run_id, row->code_id,
                  " %s%7lld%s  %s  %s%s%s  %s  %s%s%s  %s", S(AC_HEADER_VALUE), row->n,
                  S(AC_NORMAL), fit(type, sizeof type, both, 28, FMT_LEFT),
                  S(class_style(row->break_class)),
                  fit(cls, sizeof cls, row->break_class, 12, FMT_LEFT), S(AC_NORMAL),
                  fit(site, sizeof site, where, 30, FMT_TRUNC_START),
                  S(AC_DIM), fit(fns, sizeof fns, row->functions, 20, FMT_LEFT),
                  S(AC_NORMAL), reason);
        pager_set_file(l->p, l->file);
        /* the hint line opens the same function as its site */
        pager_add(l->p, row->run_id, row->code_id, "          %shint: %s%s", S(AC_DIM), bt->hint,
                  S(AC_NORMAL));
        pager_set_file(l->p, l->file);
        l->typed = true;
        for (int c = 0; c < BREAK_CLASS__COUNT; c++)
            if (strcmp(row->break_class, break_class_name((BreakClass)c)) == 0)
                l->per_class[c] += row->n;
    }
    free(reason);
    l->rows++;
    l->total += row->n;
}

/* A break site kept to be merged: the row, its strings owned. */
typedef struct SiteRec {
    StoreBreakSiteRow row;
    int file;
} SiteRec;

/* Append the names of `more` (comma-separated) that *list lacks. */
static void add_functions(char **list, const char *more)
{
    char *copy = xstrdup(more);
    for (char *save = NULL, *name = strtok_r(copy, ",", &save); name != NULL;
         name = strtok_r(NULL, ",", &save)) {
        bool have = false;
        char *have_copy = xstrdup(*list);
        for (char *s2 = NULL, *n = strtok_r(have_copy, ",", &s2); n != NULL && !have;
             n = strtok_r(NULL, ",", &s2))
            have = strcmp(n, name) == 0;
        free(have_copy);
        if (!have) {
            char *joined = xasprintf("%s%s%s", *list, **list ? "," : "", name);
            free(*list);
            *list = joined;
        }
    }
    free(copy);
}

typedef struct SiteKey {
    const SiteRec *recs;
    const StoreBreakSiteRow *row;
} SiteKey;

static bool site_eq(const void *ctx, size_t idx)
{
    const SiteKey *k = ctx;
    const StoreBreakSiteRow *r = &k->recs[idx].row, *row = k->row;
    return r->lineno == row->lineno && strcmp(r->kind, row->kind) == 0
           && strcmp(r->reason, row->reason) == 0 && strcmp(r->filename, row->filename) == 0
           && strcmp(r->break_class, row->break_class) == 0;
}

static void break_site_seen(void *ctx, const StoreBreakSiteRow *row)
{
    List *l = ctx;
    if (l->m->nfiles == 1) {
        add_break_site(l, row);
        return;
    }
    uint64_t h = indexmap_hash_str(indexmap_hash_str(indexmap_hash_str(
        indexmap_hash2(row->lineno, 0), row->kind), row->reason), row->filename);
    SiteKey key = {l->kept, row};
    size_t i = indexmap_find(&l->sites, h, site_eq, &key);
    if (i != (size_t)-1) {       /* the same site in another file: add it up */
        StoreBreakSiteRow *r = &((SiteRec *)l->kept)[i].row;
        r->n += row->n;
        r->code_objects += row->code_objects;
        char *fns = (char *)r->functions;
        add_functions(&fns, row->functions);
        r->functions = fns;
        return;
    }
    indexmap_add(&l->sites, h, l->nkept);
    SiteRec *s = keep(l, sizeof *s);
    s->row = *row;
    s->row.kind = xstrdup(row->kind);
    s->row.reason = xstrdup(row->reason);
    s->row.filename = xstrdup(row->filename);
    s->row.functions = xstrdup(row->functions);
    s->row.break_type = xstrdup(row->break_type);
    s->row.break_class = xstrdup(row->break_class);
    s->file = l->file;
}

/* Most breaks first, then by file and line (as the query orders them). */
static int cmp_sites(const void *pa, const void *pb)
{
    const StoreBreakSiteRow *a = &((const SiteRec *)pa)->row, *b = &((const SiteRec *)pb)->row;
    if (a->n != b->n)
        return a->n > b->n ? -1 : 1;
    int r = strcmp(a->filename, b->filename);
    return r ? r : (a->lineno > b->lineno) - (a->lineno < b->lineno);
}

/* Several files: the merged sites into the pager, then free them. */
static void add_kept_sites(List *l)
{
    SiteRec *rec = l->kept;
    if (l->nkept > 1)
        qsort(rec, l->nkept, sizeof *rec, cmp_sites);
    for (size_t i = 0; i < l->nkept; i++) {
        if (i < BREAK_SITES_LIMIT) {
            l->file = rec[i].file;
            add_break_site(l, &rec[i].row);
        }
        free((char *)rec[i].row.kind);
        free((char *)rec[i].row.reason);
        free((char *)rec[i].row.filename);
        free((char *)rec[i].row.functions);
        free((char *)rec[i].row.break_type);
        free((char *)rec[i].row.break_class);
    }
    free(l->kept);
    indexmap_done(&l->sites);
}

int views_load_breaks(Pager *p, Model *m)
{
    pager_clear(p);
    List l = {.p = p, .m = m};
    for (size_t fi = 0; fi < m->nfiles; fi++) {
        l.file = (int)fi;
        if (model_begin(m, fi) < 0) {
            if (m->nfiles == 1) {
                pager_set_title(p, " Graph break reasons by site");
                pager_add(p, -1, -1, "  %scannot read the database", S(AC_BAD));
                pager_finish(p);
                return -1;
            }
            cannot_read(p, m, fi);
            continue;
        }
        if (store_read_break_sites(model_reader(m, fi), m->files[fi].run_id, BREAK_SITES_LIMIT,
                                   break_site_seen, &l) < 0)
            pager_add(p, -1, -1, "%s  query failed: %s", S(AC_BAD), model_read_error(m, fi));
        model_end(m, fi);
    }
    if (m->nfiles > 1)
        add_kept_sites(&l);
    long long sites = l.rows, total = l.total;
    char *title = l.typed
        ? xasprintf(" Graph breaks by type and site: %lld break%s at %lld site%s: %lld your code,"
                    " %lld library code, %lld engine limit, %lld fundamental   "
                    "COUNT  TYPE  CLASS  FILE:LINE  FUNCTIONS  REASON", total,
                    total == 1 ? "" : "s", sites, sites == 1 ? "" : "s",
                    l.per_class[BREAK_YOUR_CODE], l.per_class[BREAK_LIBRARY],
                    l.per_class[BREAK_ENGINE_LIMIT], l.per_class[BREAK_FUNDAMENTAL])
        : xasprintf(" Graph break reasons by site: %lld site%s, %lld break%s   "
                    "COUNT  KIND  FILE:LINE  FUNCTIONS  REASON", sites,
                    sites == 1 ? "" : "s", total, total == 1 ? "" : "s");
    pager_set_title(p, title);
    free(title);
    if (sites == 0)
        pager_add(p, -1, -1, "  %s(no graph breaks recorded)", S(AC_DIM));
    pager_finish(p);
    return 0;
}

static void add_recompile(List *l, const StoreRecompileLogRow *row)
{
    char at[32], name[256], cid[64], guard[1024], who[128] = "";
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
    if (l->m->nfiles > 1) {   /* whose recompile: the run's label */
        const RunInfo *run = model_run(l->m, (size_t)l->file, row->run_id);
        char label[4 * 10 + 1];
        fit(label, sizeof label, run ? run->label : "?", 10, FMT_LEFT);
        snprintf(who, sizeof who, "%s%s%s  ", S(AC_HEADER_LABEL), label, S(AC_NORMAL));
    }
    pager_add(l->p, row->run_id, row->code_id,
              " %s%11s%s  %s%s  %s%-8s%s  %s%s", S(AC_DIM), at, S(AC_NORMAL), who,
              fit(name, sizeof name, row->name, 20, FMT_LEFT), S(AC_HEADER_VALUE),
              cid, S(AC_NORMAL), guard, more);
    pager_set_file(l->p, l->file);
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

/* A recompile kept to be merged: the row, its strings owned. */
typedef struct LogRec {
    StoreRecompileLogRow row;
    int file;
} LogRec;

static void recompile_seen(void *ctx, const StoreRecompileLogRow *row)
{
    List *l = ctx;
    if (l->m->nfiles == 1) {
        add_recompile(l, row);
        return;
    }
    LogRec *r = keep(l, sizeof *r);
    r->row = *row;
    r->row.name = xstrdup(row->name);
    r->row.compile_id = xstrdup(row->compile_id);
    r->row.kind = xstrdup(row->kind);
    r->row.expr = xstrdup(row->expr);
    r->row.observed = xstrdup(row->observed);
    r->row.nearest_entry = xstrdup(row->nearest_entry);
    r->row.nearest_filename = xstrdup(row->nearest_filename);
    r->file = l->file;
}

/* Newest first (wall clock: the files' rows have no other common order). */
static int cmp_recompiles(const void *pa, const void *pb)
{
    const LogRec *a = pa, *b = pb;
    if (a->row.started_at != b->row.started_at)
        return a->row.started_at > b->row.started_at ? -1 : 1;
    return a->file - b->file;
}

/* Several files: the newest VIEWS_RECOMPILE_LIMIT of every file's into the
   pager, then free them. */
static void add_kept_recompiles(List *l)
{
    LogRec *rec = l->kept;
    if (l->nkept > 1)
        qsort(rec, l->nkept, sizeof *rec, cmp_recompiles);
    for (size_t i = 0; i < l->nkept; i++) {
        if (i < VIEWS_RECOMPILE_LIMIT) {
            l->file = rec[i].file;
            add_recompile(l, &rec[i].row);
        }
        const StoreRecompileLogRow *r = &rec[i].row;
        const char *strs[] = {r->name, r->compile_id, r->kind, r->expr, r->observed,
                              r->nearest_entry, r->nearest_filename};
        for (size_t k = 0; k < sizeof strs / sizeof strs[0]; k++)
            free((char *)strs[k]);
    }
    free(l->kept);
}

int views_load_recompiles(Pager *p, Model *m)
{
    pager_clear(p);
    List l = {.p = p, .m = m};
    for (size_t fi = 0; fi < m->nfiles; fi++) {
        l.file = (int)fi;
        if (model_begin(m, fi) < 0) {
            if (m->nfiles == 1) {
                pager_set_title(p, " Recompile log");
                pager_add(p, -1, -1, "  %scannot read the database", S(AC_BAD));
                pager_finish(p);
                return -1;
            }
            cannot_read(p, m, fi);
            continue;
        }
        if (store_read_recompile_log(model_reader(m, fi), m->files[fi].run_id,
                                     VIEWS_RECOMPILE_LIMIT, recompile_seen, &l) < 0)
            pager_add(p, -1, -1, "%s  query failed: %s", S(AC_BAD), model_read_error(m, fi));
        model_end(m, fi);
    }
    if (m->nfiles > 1)
        add_kept_recompiles(&l);
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
