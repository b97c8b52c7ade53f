/*
 * views.c -- the two whole-run views.  The break view (`b`): the graph
 * breaks grouped by their type in the registry (event/break_types.h,
 * docs/breaks.md) and site, costliest first (the time the program spent
 * outside graphs because of them, sampled while recording: schema v6), then
 * most first, each row with how often, that cost and its share of the time
 * of the functions it breaks ("-" when unknown), the type (id and name),
 * its class in the class's colour, file:line, the functions that broke
 * there and the reason; the title counts the breaks of each class.  Below
 * them, the frames run without capture (frame_skips) grouped the same way,
 * the function as the site.  The selected row's note, under the list: the
 * type's hint, the user's source line (for a break in installed code, the
 * line of the user's code that called into it) and what the cost is made
 * of (when known).  A file older than schema v4 has no types: its breaks
 * are listed by site and kind, as they always were (their cost "-"), and
 * its skips not at all; a file older than v6 has no costs: most first, as
 * before.  And the recompile log (`r`: newest first, with the guard that
 * failed, the value observed and, where there is room, the entry nearest
 * to the new inputs).  Both are selectable pagers; Enter on a line opens
 * the detail of its code object.  Read through store/read.h; tables:
 * docs/sql.md; manual: docs/dyntop.md.
 *
 * With several files each file is read in its own snapshot and the lists
 * are merged: a break site's (or skip's) counts, costs and functions summed
 * over the files (Enter opens the first file's code object that broke
 * there), the recompiles of every file by wall-clock time, newest first,
 * each with its run's label.  With one file the recompiles go straight to
 * the pager, as read.
 */
#include "tui.h"
#include "../event/break_types.h"
#include "../event/places.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S(c) TUI_STYLE(c)
#define BREAK_SITES_LIMIT 1000
/* The user stack of a break, as far as the note reads it. */
#define NOTE_STACK_FRAMES 64
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

/* One of several files cannot be read now: say which, go on with the rest. */
static void cannot_read(Pager *p, const Model *m, size_t file)
{
    char *path = fmt_sanitize(m->files[file].path);
    pager_add(p, -1, -1, "  %scannot read %s", S(AC_BAD), path);
    free(path);
}

/* ---- the break view ---- */

/* A break site (or a function's skips of one type) kept to be merged and
   shown: the row, its strings owned, and the note of its line. */
typedef struct SiteRec {
    StoreBreakSiteRow row;
    int file;                    /* the file it was first read from */
    char *note;                  /* owned, styled; NULL before schema v4 */
} SiteRec;

/* One section of the break view: the sites of every file, merged. */
typedef struct Sites {
    SiteRec *recs;               /* owned */
    size_t n, cap;
    IndexMap map;                /* site -> recs[] */
    long long total;             /* breaks (skips) over every site */
    long long per_class[BREAK_CLASS__COUNT];
    bool typed;                  /* some site has a type (a file of v4 on) */
    bool costed;                 /* some site has a known cost (a file of v6 on) */
} Sites;

/* The break view being read. */
typedef struct BreakView {
    Model *m;
    int file;                    /* the file being read */
    StoreReader *r;              /* its reader (borrowed) */
    SourceCache src;             /* the source lines read for the notes */
    Sites breaks, skips;
} BreakView;

/* A frame of a break's user stack, its strings owned. */
typedef struct NoteFrame {
    char *filename, *name, *source;
    int lineno;
} NoteFrame;

typedef struct NoteStack {
    NoteFrame f[NOTE_STACK_FRAMES];   /* outermost first; the innermost kept */
    int n;
} NoteStack;

static void note_frame_seen(void *ctx, const StoreStackFrame *row)
{
    NoteStack *st = ctx;
    if (st->n == NOTE_STACK_FRAMES) {    /* deeper than kept: drop the outermost */
        free(st->f[0].filename);
        free(st->f[0].name);
        free(st->f[0].source);
        memmove(st->f, st->f + 1, (NOTE_STACK_FRAMES - 1) * sizeof st->f[0]);
        st->n--;
    }
    NoteFrame *f = &st->f[st->n++];
    f->filename = xstrdup(row->filename);
    f->name = xstrdup(row->name);
    f->source = fmt_trim(fmt_sanitize(row->source));
    f->lineno = row->lineno;
}

/* The length of the part of an installed file's path that is the
   installation it belongs to ("/x/site-packages/", "/usr/lib/python3.11/"),
   or its directory: the frames of the stack below it are the library's. */
static size_t installed_root(const char *filename)
{
    size_t site = place_install_prefix(filename);
    if (site > 0)
        return site;
    const char *lib = strstr(filename, "/lib/python");
    if (lib != NULL) {
        const char *slash = strchr(lib + strlen("/lib/python"), '/');
        if (slash != NULL)
            return (size_t)(slash - filename) + 1;
    }
    const char *slash = strrchr(filename, '/');
    return slash != NULL ? (size_t)(slash - filename) + 1 : 0;
}

/* One location of a note: "at file:line in fn" and, on the next line, its
   source (as recorded, else as the file reads now). */
static char *note_where(BreakView *v, const char *label, const char *filename, int lineno,
                        const char *fn, const char *recorded)
{
    char *file = fmt_sanitize(filename), *name = fmt_sanitize(fn);
    const char *src = recorded != NULL && recorded[0] != '\0' ? recorded
                      : source_cached_line(&v->src, v->m->files[v->file].path, filename, lineno);
    char *where = xasprintf("  %s%s%s %s:%d%s%s", S(AC_DIM), label, S(AC_NORMAL), file, lineno,
                            name[0] ? " in " : "", name);
    char *both = src != NULL && src[0] != '\0'
                 ? xasprintf("%s\n  %s%6d | %s", where, S(AC_SOURCE), lineno, src)
                 : xstrdup(where);
    free(where);
    free(file);
    free(name);
    return both;
}

/*
 * The note of a typed site: the type's hint, then the user's line with its
 * source.  A break in installed code names the user's line that called into
 * the library (the innermost frame of its stack outside that installation);
 * a skip, the function's first line.
 */
static char *site_note(BreakView *v, const StoreBreakSiteRow *row, const BreakType *bt,
                       bool skip)
{
    char *hint = xasprintf("  %shint:%s %s", S(AC_DIM), S(AC_NORMAL), bt->hint);
    if (skip) {                  /* the function's def line (past its decorators) */
        int lineno = row->lineno;
        char *def = source_def_line(v->m->files[v->file].path, row->filename, row->lineno,
                                    &lineno);
        char *where = note_where(v, "function", row->filename, lineno, row->functions, def);
        free(def);
        char *note = xasprintf("%s\n%s", hint, where);
        free(where);
        free(hint);
        return note;
    }
    NoteStack st = {.n = 0};
    if (store_read_break_stack(v->r, row->last_break_id, note_frame_seen, &st) < 0)
        st.n = 0;                /* as if none was recorded: the site alone */
    const NoteFrame *site = st.n > 0 ? &st.f[st.n - 1] : NULL, *user = NULL;
    bool library = strcmp(row->break_class, break_class_name(BREAK_LIBRARY)) == 0;
    if (library) {
        size_t root = installed_root(row->filename);
        for (int i = st.n - 1; i >= 0 && user == NULL; i--)
            if (strncmp(st.f[i].filename, row->filename, root) != 0
                && st.f[i].filename[0] != '<')
                user = &st.f[i];
    }
    char *where;
    if (user != NULL)
        where = note_where(v, "called from your code at", user->filename, user->lineno,
                           user->name, user->source);
    else
        where = note_where(v, "at", row->filename, row->lineno,
                           site != NULL ? site->name : row->functions,
                           site != NULL && site->lineno == row->lineno ? site->source : NULL);
    char *note = library
        ? xasprintf("%s\n  %sinstalled code, which you cannot edit: capture around the call from "
                    "your code%s\n%s", hint, S(AC_LIBRARY_CODE), S(AC_NORMAL), where)
        : xasprintf("%s\n%s", hint, where);
    free(where);
    free(hint);
    for (int i = 0; i < st.n; i++) {
        free(st.f[i].filename);
        free(st.f[i].name);
        free(st.f[i].source);
    }
    return note;
}

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

/* The same site: kind, reason, file and line, and the same type and class
   (a type follows from the reason and a class from the file, so they split
   no site of one file), or no type on one side (a file older than v4 among
   newer ones: the site's breaks count under the type the others give it). */
static bool site_eq(const void *ctx, size_t idx)
{
    const SiteKey *k = ctx;
    const StoreBreakSiteRow *r = &k->recs[idx].row, *row = k->row;
    bool untyped = r->break_type[0] == '\0' || row->break_type[0] == '\0';
    return r->lineno == row->lineno && strcmp(r->kind, row->kind) == 0
           && strcmp(r->reason, row->reason) == 0 && strcmp(r->filename, row->filename) == 0
           && (untyped || (strcmp(r->break_type, row->break_type) == 0
                           && strcmp(r->break_class, row->break_class) == 0));
}

/* Add the cost of a site's breaks in another file to its kept cost. */
static void cost_add(StoreBreakCost *c, const StoreBreakCost *more)
{
    if (!more->known)
        return;
    if (!c->known)
        *c = (StoreBreakCost){.known = true, .share = -1};
    c->ns += more->ns;
    c->function_ns += more->function_ns;
    c->extra_graphs += more->extra_graphs;
    c->samples += more->samples;
    c->share = c->function_ns > 0 ? (double)c->ns / (double)c->function_ns : -1;
}

/* A typed row for a site kept without a type (read first from an older
   file): the site takes its type, class and note. */
static void take_type(BreakView *v, SiteRec *rec, const StoreBreakSiteRow *row, bool skip)
{
    const BreakType *bt = break_type_by_id(row->break_type);
    if (rec->row.break_type[0] != '\0' || bt == NULL)
        return;
    free((char *)rec->row.break_type);
    free((char *)rec->row.break_class);
    rec->row.break_type = xstrdup(row->break_type);
    rec->row.break_class = xstrdup(row->break_class);
    free(rec->note);
    rec->note = site_note(v, row, bt, skip);
}

/* A site read from the file being read: added up with the same site of
   another file, else kept (with its note, read now, in this file's
   snapshot). */
static void site_seen(BreakView *v, Sites *s, const StoreBreakSiteRow *row, bool skip)
{
    uint64_t h = indexmap_hash_str(indexmap_hash_str(indexmap_hash_str(
        indexmap_hash2(row->lineno, 0), row->kind), row->reason), row->filename);
    SiteKey key = {s->recs, row};
    size_t i = indexmap_find(&s->map, h, site_eq, &key);
    if (i != (size_t)-1) {       /* the same site in another file: add it up */
        StoreBreakSiteRow *r = &s->recs[i].row;
        take_type(v, &s->recs[i], row, skip);
        r->n += row->n;
        r->code_objects += row->code_objects;
        cost_add(&r->cost, &row->cost);
        char *fns = (char *)r->functions;
        add_functions(&fns, row->functions);
        r->functions = fns;
        return;
    }
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 64;
        s->recs = xrealloc(s->recs, s->cap * sizeof *s->recs);
    }
    indexmap_add(&s->map, h, s->n);
    SiteRec *rec = &s->recs[s->n++];
    rec->row = *row;
    rec->row.kind = xstrdup(row->kind);
    rec->row.reason = xstrdup(row->reason);
    rec->row.filename = xstrdup(row->filename);
    rec->row.functions = xstrdup(row->functions);
    rec->row.break_type = xstrdup(row->break_type);
    rec->row.break_class = xstrdup(row->break_class);
    rec->file = v->file;
    const BreakType *bt = break_type_by_id(row->break_type);
    rec->note = bt != NULL ? site_note(v, row, bt, skip) : NULL;
}

static void break_site_seen(void *ctx, const StoreBreakSiteRow *row)
{
    BreakView *v = ctx;
    site_seen(v, &v->breaks, row, false);
}

static void skip_site_seen(void *ctx, const StoreBreakSiteRow *row)
{
    BreakView *v = ctx;
    site_seen(v, &v->skips, row, true);
}

/* Costliest first (an unknown cost as 0), then most first, then by file
   and line (as the queries order them). */
static int cmp_sites(const void *pa, const void *pb)
{
    const StoreBreakSiteRow *a = &((const SiteRec *)pa)->row, *b = &((const SiteRec *)pb)->row;
    long long ca = a->cost.known ? a->cost.ns : 0, cb = b->cost.known ? b->cost.ns : 0;
    if (ca != cb)
        return ca > cb ? -1 : 1;
    if (a->n != b->n)
        return a->n > b->n ? -1 : 1;
    int r = strcmp(a->filename, b->filename);
    if (r != 0)
        return r;
    if (a->lineno != b->lineno)
        return a->lineno < b->lineno ? -1 : 1;
    r = strcmp(a->break_type, b->break_type);
    return r ? r : strcmp(a->reason, b->reason);
}

/* Sort the merged sites and count them: total and per class. */
static void sites_sum(Sites *s)
{
    if (s->n > 1)
        qsort(s->recs, s->n, sizeof *s->recs, cmp_sites);
    for (size_t i = 0; i < s->n; i++) {
        const StoreBreakSiteRow *row = &s->recs[i].row;
        s->total += row->n;
        for (int c = 0; c < BREAK_CLASS__COUNT; c++)
            if (strcmp(row->break_class, break_class_name((BreakClass)c)) == 0)
                s->per_class[c] += row->n;
        s->typed = s->typed || s->recs[i].note != NULL;
        s->costed = s->costed || row->cost.known;
    }
}

static void sites_free(Sites *s)
{
    for (size_t i = 0; i < s->n; i++) {
        const StoreBreakSiteRow *r = &s->recs[i].row;
        const char *strs[] = {r->kind, r->reason, r->filename, r->functions, r->break_type,
                              r->break_class};
        for (size_t k = 0; k < sizeof strs / sizeof strs[0]; k++)
            free((char *)strs[k]);
        free(s->recs[i].note);
    }
    free(s->recs);
    indexmap_done(&s->map);
}

/* "3 your code, 14 library code, 6 engine limit, 0 fundamental", each
   class in its colour (styled) or plain (the title bar). */
static void per_class_text(const Sites *s, bool styled, char *dst, size_t cap)
{
    size_t n = 0;
    dst[0] = '\0';
    for (int c = 0; c < BREAK_CLASS__COUNT && n < cap; c++) {
        const char *name = break_class_name((BreakClass)c);
        int w = snprintf(dst + n, cap - n, "%s%s%lld %s%s", c ? ", " : "",
                         styled ? S(colors_break_class(name)) : "", s->per_class[c], name,
                         styled ? S(AC_NORMAL) : "");
        n += w > 0 ? (size_t)w : 0;
    }
}

/* The line of a site's note that says what its cost is made of (styled,
   malloc'd), or NULL when the cost is unknown.  It comes last: the row has
   the cost, and a short screen cuts the note's end. */
static char *cost_note(const StoreBreakCost *c)
{
    if (!c->known)
        return NULL;
    char parts[256];
    fmt_break_cost_parts(parts, sizeof parts, c, "its functions'");
    return xasprintf("  %scost:%s %s", S(AC_DIM), S(AC_NORMAL), parts);
}

/* One row: a typed site (the type, its class in colour, and its note), or
   an untyped one as before schema v4 (the kind); both with the cost. */
static void add_site_row(Pager *p, const Sites *s, const SiteRec *rec)
{
    const StoreBreakSiteRow *row = &rec->row;
    char kind[128], site[512], fns[512], where[600], type[128], cls[64], both[160], cost[64];
    snprintf(where, sizeof where, "%s:%d", row->filename, row->lineno);
    fmt_break_cost(cost, sizeof cost, &row->cost);
    char *reason = fmt_sanitize(row->reason);
    const BreakType *bt = break_type_by_id(row->break_type);
    if (!s->typed) {             /* before schema v4: the kind, as it was */
        pager_add(p, row->run_id, row->code_id,
                  " %s%7lld  %s%s  %s%s%s  %s  %s%s%s  %s", S(AC_HEADER_VALUE), row->n, cost,
                  S(AC_NORMAL), S(AC_KIND), fit(kind, sizeof kind, row->kind, 22, FMT_LEFT),
                  S(AC_NORMAL), fit(site, sizeof site, where, 30, FMT_TRUNC_START),
                  S(AC_DIM), fit(fns, sizeof fns, row->functions, 20, FMT_LEFT),
                  S(AC_NORMAL), reason);
    }
    else {                       /* an untyped row among typed ones: its kind */
        if (bt != NULL)
            snprintf(both, sizeof both, "%s %s", bt->id, bt->name);
        else
            snprintf(both, sizeof both, "%s", row->kind);
        pager_add(p, row->run_id, row->code_id,
                  " %s%7lld  %s%s  %s  %s%s%s  %s  %s%s%s  %s", S(AC_HEADER_VALUE), row->n,
                  cost, S(AC_NORMAL), fit(type, sizeof type, both, 28, FMT_LEFT),
                  S(colors_break_class(row->break_class)),
                  fit(cls, sizeof cls, row->break_class, 12, FMT_LEFT), S(AC_NORMAL),
                  fit(site, sizeof site, where, 30, FMT_TRUNC_START),
                  S(AC_DIM), fit(fns, sizeof fns, row->functions, 20, FMT_LEFT),
                  S(AC_NORMAL), reason);
        char *costs = cost_note(&row->cost);
        if (costs != NULL || rec->note != NULL)
            pager_set_note(p, "%s%s%s", rec->note ? rec->note : "",
                           costs && rec->note ? "\n" : "", costs ? costs : "");
        free(costs);
    }
    pager_set_file(p, rec->file);
    free(reason);
}

int views_load_breaks(Pager *p, Model *m)
{
    pager_clear(p);
    BreakView v = {.m = m};
    for (size_t fi = 0; fi < m->nfiles; fi++) {
        v.file = (int)fi;
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
        v.r = model_reader(m, fi);
        if (store_read_break_sites(v.r, m->files[fi].run_id, BREAK_SITES_LIMIT, break_site_seen,
                                   &v) < 0
            || store_read_skip_sites(v.r, m->files[fi].run_id, BREAK_SITES_LIMIT, skip_site_seen,
                                     &v) < 0)
            pager_add(p, -1, -1, "%s  query failed: %s", S(AC_BAD), model_read_error(m, fi));
        model_end(m, fi);
    }
    sites_sum(&v.breaks);
    sites_sum(&v.skips);
    bool typed = v.breaks.typed || v.skips.typed;
    v.breaks.typed = v.skips.typed = typed;
    long long sites = (long long)v.breaks.n, total = v.breaks.total;
    char classes[256];
    per_class_text(&v.breaks, false, classes, sizeof classes);
    const char *order = v.breaks.costed ? ", costliest first" : "";
    char *title = typed
        ? xasprintf(" Graph breaks by type and site%s: %lld break%s at %lld site%s: %s   "
                    "COUNT  COST  SHARE  TYPE  CLASS  FILE:LINE  FUNCTIONS  REASON", order, total,
                    total == 1 ? "" : "s", sites, sites == 1 ? "" : "s", classes)
        : xasprintf(" Graph break reasons by site%s: %lld site%s, %lld break%s   "
                    "COUNT  COST  SHARE  KIND  FILE:LINE  FUNCTIONS  REASON", order, sites,
                    sites == 1 ? "" : "s", total, total == 1 ? "" : "s");
    pager_set_title(p, title);
    free(title);
    for (size_t i = 0; i < v.breaks.n && i < BREAK_SITES_LIMIT; i++)
        add_site_row(p, &v.breaks, &v.breaks.recs[i]);
    if (sites == 0)
        pager_add(p, -1, -1, "  %s(no graph breaks recorded)", S(AC_DIM));
    if (typed) {                 /* the frames run without capture, by type */
        pager_add(p, -1, -1, "%s", "");
        long long skips = v.skips.total;
        if (skips == 0) {
            pager_add(p, -1, -1, "%sFrames run without capture%s: none", S(AC_SECTION),
                      S(AC_NORMAL));
        }
        else {
            per_class_text(&v.skips, true, classes, sizeof classes);
            pager_add(p, -1, -1, "%sFrames run without capture%s by type: %lld skip%s: %s",
                      S(AC_SECTION), S(AC_NORMAL), skips, skips == 1 ? "" : "s", classes);
        }
        for (size_t i = 0; i < v.skips.n && i < BREAK_SITES_LIMIT; i++)
            add_site_row(p, &v.skips, &v.skips.recs[i]);
    }
    sites_free(&v.breaks);
    sites_free(&v.skips);
    source_cache_free(&v.src);
    pager_finish(p);
    return 0;
}

/* ---- the recompile log ---- */

/* A list being filled: the pager and what it has added; with several
   files, the rows read so far (merged before they are added). */
typedef struct List {
    Pager *p;
    const Model *m;
    int file;                    /* the file being read */
    long long rows;
    void *kept;                  /* several files: owned rows (LogRec) */
    size_t nkept, capkept;
} List;

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
