/*
 * detail.c -- the detail view of one code object (Enter on a row): its cache
 * entries frame by frame in lookup order with their hits and guards (and
 * the user source that made each guard), the guards that fail most, its
 * graph breaks by site, costliest first, with what they cost (schema v6),
 * their type and class in the break registry, its hint and the user's
 * source lines, the recompile history with the
 * guards that failed, the values observed and the entry nearest to the new
 * inputs, cache-limit hits and skips.  Reads one code object through the
 * read model (store/read.h: the per-code indexes), in one read transaction,
 * each refresh.  Tables: docs/sql.md; what the lines mean: docs/dyntop.md.
 */
#include "tui.h"
#include "../event/break_types.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S(c) TUI_STYLE(c)
/* The detail shows at most this many recompiles (newest first). */
#define DETAIL_RECOMPILES 100
#define DETAIL_FAILS_PER_RECOMPILE 8
/* ... the failing guards of a recompile's nearest entry. */
#define DETAIL_NEAREST_GUARDS 8
/* A guard's source (file:line, the right-hand column) is cut to this. */
#define DETAIL_SOURCE_COLS 32
/* ... the guards that fail most, cache-limit hits and skips (newest). */
#define DETAIL_TOP_FAILING 5
#define DETAIL_LIMITS 10
#define DETAIL_SKIPS 10

typedef struct Ctx {
    Pager *p;
    Model *m;
    size_t file;                 /* the code object's file (Model.files) */
    StoreReader *r;              /* its reader (borrowed) */
    long long run_id, code_id, epoch;
    long long run_started;
    int limit;                   /* the run's cache limit, 0 unknown */
    int n;                       /* rows the running section has added */
    SourceCache src;             /* the source lines read during this load: the
                                    recompile history names the same few again */
} Ctx;

/* ---- small helpers ---- */

/* A failed read: one line saying why. */
static void read_failed(Ctx *c)
{
    pager_add(c->p, -1, -1, "%s  query failed: %s%s", S(AC_BAD), model_read_error(c->m, c->file),
              S(AC_NORMAL));
}

/* "KIND\texpr" (a guards row) split into kind and expression. */
static void split_guard(const char *row, char *kind, size_t kcap, const char **expr)
{
    const char *tab = strchr(row, '\t');
    if (tab == NULL) {
        kind[0] = '\0';
        *expr = row;
        return;
    }
    size_t n = (size_t)(tab - row) < kcap - 1 ? (size_t)(tab - row) : kcap - 1;
    memcpy(kind, row, n);
    kind[n] = '\0';
    *expr = tab + 1;
}

/* "+1.234 s" since the run started. */
static void since(const Ctx *c, long long at, char *dst, size_t cap)
{
    if (at <= 0 || c->run_started <= 0) {
        snprintf(dst, cap, "?");
        return;
    }
    fmt_since(dst, cap, at - c->run_started);
}

/* A source line through the load's cache: borrowed, or NULL. */
static const char *cached_line(Ctx *c, const char *filename, int lineno)
{
    return source_cached_line(&c->src, c->m->files[c->file].path, filename, lineno);
}

/*
 * The right-hand column of the line added last: where its guard came from,
 * "file.py:12" (fmt_where).  Nothing when unknown (a guard the engine adds
 * itself, or a file older than v4).
 */
static void source_tail(Ctx *c, const char *filename, int lineno)
{
    char where[4 * DETAIL_SOURCE_COLS + 8];
    fmt_where(where, sizeof where, filename, lineno, DETAIL_SOURCE_COLS);
    if (where[0] != '\0')
        pager_set_tail(c->p, 0, "%s%s", S(AC_DIM), where);
}

/* "  [DS0001 your code]": a break's or skip's type in the registry and its
   class in the class's colour (styled; docs/breaks.md), "" before v4. */
static void type_text(char *dst, size_t cap, const char *type, const char *cls)
{
    if (type[0] == '\0') {
        dst[0] = '\0';
        return;
    }
    char *t = fmt_sanitize(type), *k = fmt_sanitize(cls);
    snprintf(dst, cap, "  %s[%s %s%s%s]%s", S(AC_DIM), t, S(colors_break_class(cls)), k,
             S(AC_DIM), S(AC_NORMAL));
    free(t);
    free(k);
}

/* ---- sections ---- */

static void summary(Ctx *c)
{
    const CodeRow *r = model_code(c->m, c->file, c->run_id, c->code_id);
    if (r == NULL)
        return;
    char ms[32], limit[16];
    fmt_ms(ms, sizeof ms, r->capture_ns, 0);
    if (c->limit > 0)
        snprintf(limit, sizeof limit, "%d", c->limit);
    else
        snprintf(limit, sizeof limit, "?");
    pager_add(c->p, -1, -1,
              "  %sEntries %s%lld%s (fullest frame %s%lld/%s%s)   %sHits %s%lld   %sMisses %s%lld"
              "   %sRecompiles %s%lld   %sGraphs %s%lld   %sBreaks %s%lld   %sCapture %s%s ms",
              S(AC_HEADER_LABEL), S(AC_HEADER_VALUE), r->entries, S(AC_DIM),
              r->at_limit ? S(AC_LIMIT) : S(AC_HEADER_VALUE), r->fullest, limit,
              S(AC_DIM), S(AC_HEADER_LABEL), S(AC_HEADER_VALUE), r->hits,
              S(AC_HEADER_LABEL), S(AC_HEADER_VALUE), r->misses,
              S(AC_HEADER_LABEL), S(AC_HEADER_VALUE), r->recompiles,
              S(AC_HEADER_LABEL), S(AC_HEADER_VALUE), r->graphs,
              S(AC_HEADER_LABEL), S(AC_HEADER_VALUE), r->breaks,
              S(AC_HEADER_LABEL), S(AC_HEADER_VALUE), ms);
    if (r->at_limit)
        pager_add(c->p, -1, -1, "  %sAt its cache limit%s: a frame holds %lld of %s entries or "
                  "the engine stopped capturing it (see Cache limit below).",
                  S(AC_LIMIT), S(AC_NORMAL), r->fullest, limit);
    if (c->limit == 0)
        pager_add(c->p, -1, -1, "  %sThe run's cache size limit is unknown: a frame holds more "
                  "than %d entries (give it with --cache-limit).", S(AC_DIM),
                  TUI_DEFAULT_CACHE_LIMIT);
    pager_add(c->p, -1, -1, "%s", "");
}

static void guard_line(Ctx *c, const char *kind, const char *expr, const char *filename,
                       int lineno)
{
    pager_add_indent(c->p, 26, "        %s%-16.63s%s  %s", S(AC_KIND), kind, S(AC_NORMAL), expr);
    source_tail(c, filename, lineno);
}

static void guard_seen(void *ctx, const StoreGuardRow *row)
{
    Ctx *c = ctx;
    guard_line(c, row->kind, row->expr, row->filename, row->lineno);
    c->n++;
}

static void guards_of(Ctx *c, const char *cid, const char *guards_text)
{
    c->n = 0;
    if (store_read_entry_guards(c->r, c->run_id, c->code_id, c->epoch, cid, guard_seen, c) < 0) {
        read_failed(c);
        return;
    }
    if (c->n > 0 || guards_text[0] == '\0')
        return;
    /* No guards rows (an older file): the entry's guards_text, line by line. */
    char *copy = xstrdup(guards_text), *save = NULL;
    char kind[64];
    const char *expr;
    for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        split_guard(line, kind, sizeof kind, &expr);
        guard_line(c, kind, expr, "", 0);
    }
    free(copy);
}

/* What an escape hatch kept in an entry's graph (compiles.hatches): a line
   each, as explain's plan names them. */
static void hatches_of(Ctx *c, const char *hatches)
{
    char *copy = xstrdup(hatches), *save = NULL;
    for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
        pager_add(c->p, -1, -1, "        %skept in by %s%s", S(AC_KIND), S(AC_NORMAL), line);
    free(copy);
}

/* One cache entry of the detail view. */
typedef struct DEntry {
    char cid[32];
    long long frame_id;
    int resume_offset;
    long long hits, guard_ns, nguards, in_frame;
    long long t;                 /* stats_at, else created_at (wall ns) */
    bool snapshotted;            /* t is a counter snapshot's time */
    long group;                  /* snapshot cluster, 0 = newest */
    char *guards_text;           /* owned */
    char *hatches;               /* owned: what a hatch kept in, a line each */
    long long compile_ns[7];     /* StoreCodeEntryRow's: total, phases, events */
    int attempts;                /* 0: the compile recorded no phases */
} DEntry;

/* Counter snapshots write an entry's row only when its hits changed, and
   walk each frame's entries in lookup order, microseconds apart; snapshots
   are 0.5 s apart.  Rows this close belong to one snapshot. */
#define SNAPSHOT_GAP_NS 50000000LL

static int cmp_dentry(const void *pa, const void *pb)
{
    const DEntry *a = pa, *b = pb;
    if (a->resume_offset != b->resume_offset)
        return a->resume_offset < b->resume_offset ? -1 : 1;
    if (a->frame_id != b->frame_id)
        return a->frame_id < b->frame_id ? -1 : 1;
    if (a->group != b->group)             /* newer snapshots first */
        return a->group < b->group ? -1 : 1;
    if (a->snapshotted != b->snapshotted) /* entries made since go in front */
        return a->snapshotted ? 1 : -1;
    if (a->t != b->t)                     /* one snapshot: the order it walked */
        return a->snapshotted ? (a->t < b->t ? -1 : 1) : (a->t > b->t ? -1 : 1);
    return strcmp(a->cid, b->cid);
}

/*
 * The lookup order as of the newest counter snapshot: the engine keeps each
 * frame's entries most recently used first (a hit moves its entry to the
 * front, a new entry goes in front).  Within one snapshot the rows were
 * written in lookup order; an entry hit since an older snapshot is in front
 * of the ones that were not.  v is sorted by (frame, t descending) on entry.
 */
static void lookup_order(DEntry *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        bool new_frame = i == 0 || v[i].frame_id != v[i - 1].frame_id
                         || v[i].resume_offset != v[i - 1].resume_offset;
        if (new_frame)
            v[i].group = 0;
        else
            v[i].group = v[i - 1].group + (v[i - 1].t - v[i].t > SNAPSHOT_GAP_NS);
    }
    if (n > 1)                   /* (none: v may be NULL) */
        qsort(v, n, sizeof *v, cmp_dentry);
}

/* The entries read so far. */
typedef struct DEntries {
    DEntry *v;
    size_t n, cap;
} DEntries;

static void entry_seen(void *ctx, const StoreCodeEntryRow *row)
{
    DEntries *e = ctx;
    if (e->n == e->cap) {
        e->cap = e->cap ? 2 * e->cap : 16;
        e->v = xrealloc(e->v, e->cap * sizeof *e->v);
    }
    DEntry *d = &e->v[e->n++];
    snprintf(d->cid, sizeof d->cid, "%s", row->compile_id);
    d->frame_id = row->frame_id;
    d->resume_offset = row->resume_offset;
    d->hits = row->hits;
    d->guard_ns = row->guard_ns;
    d->guards_text = xstrdup(row->guards_text);
    d->hatches = xstrdup(row->hatches);
    memcpy(d->compile_ns, row->compile_ns, sizeof d->compile_ns);
    d->attempts = row->attempts;
    d->nguards = row->nguards;
    d->in_frame = row->in_frame;
    d->t = row->t;
    d->snapshotted = row->snapshotted;
}

/* Where the entry's compile time went (compiles.*_ns, v5): one line, the
   total and each phase's share of it, in the order they add up; events
   are outside the total. */
static void compile_phases_of(Ctx *c, const DEntry *d)
{
    if (d->attempts <= 0)
        return;
    char total[32], events[32];
    fmt_ns(total, sizeof total, d->compile_ns[0]);
    fmt_ns(events, sizeof events, d->compile_ns[6]);
    int pct[5];
    for (int i = 0; i < 5; i++)
        pct[i] = d->compile_ns[0] > 0 ? (int)(100.0 * (double)d->compile_ns[1 + i]
                                              / (double)d->compile_ns[0] + 0.5) : 0;
    pager_add(c->p, -1, -1, "        %scompile%s %s: trace %d%%, guards %d%%, graph %d%%, backend %d%%, "
              "plan %d%%; events %s; %d attempt%s", S(AC_DIM), S(AC_NORMAL), total, pct[0], pct[1],
              pct[2], pct[3], pct[4], events, d->attempts, d->attempts == 1 ? "" : "s");
}

static void entries(Ctx *c)
{
    DEntries e = {NULL, 0, 0};
    if (store_read_code_entries(c->r, c->run_id, c->code_id, c->epoch, entry_seen, &e) < 0) {
        for (size_t i = 0; i < e.n; i++) {
            free(e.v[i].guards_text);
            free(e.v[i].hatches);
        }
        free(e.v);
        read_failed(c);
        return;
    }
    DEntry *v = e.v;
    size_t n = e.n;
    lookup_order(v, n);
    pager_add(c->p, -1, -1, "%sCache entries%s in lookup order (most recently used first, "
              "as of the last counter snapshot)", S(AC_SECTION), S(AC_DIM));
    for (size_t i = 0; i < n; i++) {
        const DEntry *d = &v[i];
        if (i == 0 || d->frame_id != v[i - 1].frame_id)
            pager_add(c->p, -1, -1, "  %sframe %lld%s, resume offset %d: %lld entr%s%s",
                      S(AC_HEADER_VALUE), d->frame_id, S(AC_NORMAL), d->resume_offset,
                      d->in_frame, d->in_frame == 1 ? "y" : "ies",
                      c->limit > 0 && d->in_frame >= c->limit ? "  (at the cache limit)" : "");
        char gtime[32];
        fmt_ns(gtime, sizeof gtime, d->guard_ns);
        pager_add(c->p, -1, -1, "    %s[%s]%s  hits %s%lld%s  guard time %s  %lld guard%s",
                  S(AC_HEADER_VALUE), d->cid, S(AC_NORMAL), S(AC_HEADER_VALUE), d->hits, S(AC_DIM),
                  gtime, d->nguards, d->nguards == 1 ? "" : "s");
        compile_phases_of(c, d);
        hatches_of(c, d->hatches);
        guards_of(c, d->cid, d->guards_text);
        free(d->guards_text);
        free(d->hatches);
    }
    free(v);
    if (n == 0)
        pager_add(c->p, -1, -1, "  %s(no cache entries in the current epoch)", S(AC_DIM));
    pager_add(c->p, -1, -1, "%s", "");
}

/* ---- the call paths that compiled it (a stack trie of one function) ---- */

typedef struct PathFrame {
    char *file, *name;           /* owned */
    int line;
} PathFrame;

typedef struct CallPath {
    char *key;                   /* owned: the path's JSON, which groups its rows */
    char *ids;                   /* owned: its compiles' ids */
    long long compiles;
    PathFrame *f;                /* owned */
    int n, cap, start;           /* start: the first frame of the program's own */
} CallPath;

typedef struct CallPaths {
    CallPath *v;
    size_t n, cap;
} CallPaths;

static void call_path_seen(void *ctx, const StoreCallPathFrame *row)
{
    CallPaths *ps = ctx;
    if (ps->n == 0 || strcmp(ps->v[ps->n - 1].key, row->call_path) != 0) {
        if (ps->n == ps->cap) {
            ps->cap = ps->cap ? 2 * ps->cap : 8;
            ps->v = xrealloc(ps->v, ps->cap * sizeof *ps->v);
        }
        ps->v[ps->n++] = (CallPath){xstrdup(row->call_path), xstrdup(row->compile_ids),
                                    row->compiles, NULL, 0, 0, 0};
    }
    CallPath *p = &ps->v[ps->n - 1];
    if (p->n == p->cap) {
        p->cap = p->cap ? 2 * p->cap : 16;
        p->f = xrealloc(p->f, (size_t)p->cap * sizeof *p->f);
    }
    p->f[p->n++] = (PathFrame){xstrdup(row->filename), xstrdup(row->name), row->lineno};
}

static bool ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), k = strlen(tail);
    return n >= k && strcmp(s + n - k, tail) == 0;
}

/* A frame of what started the program (runpy, `python -m dynscope run`),
   not of the program: dynscope/stacktrie.py's rule. */
static bool launcher_frame(const PathFrame *f)
{
    return strncmp(f->file, "<frozen runpy", 13) == 0 || ends_with(f->file, "/runpy.py")
           || ends_with(f->file, "/dynscope/__main__.py");
}

static bool same_frame(const PathFrame *a, const PathFrame *b)
{
    return a->line == b->line && strcmp(a->file, b->file) == 0 && strcmp(a->name, b->name) == 0;
}

/* Whether paths a and b start with the same `depth` frames of their own. */
static bool same_start(const CallPath *a, const CallPath *b, int depth)
{
    if (a->n - a->start < depth || b->n - b->start < depth)
        return false;
    for (int d = 0; d < depth; d++)
        if (!same_frame(&a->f[a->start + d], &b->f[b->start + d]))
            return false;
    return true;
}

static void call_paths(Ctx *c)
{
    CallPaths ps = {NULL, 0, 0};
    pager_add(c->p, -1, -1, "%sCall paths that compiled it%s from the program's entry, merged "
              "(compiles under each frame)", S(AC_SECTION), S(AC_DIM));
    if (store_read_call_paths(c->r, c->run_id, c->code_id, call_path_seen, &ps) < 0)
        read_failed(c);
    for (size_t i = 0; i < ps.n; i++)
        for (int k = 0; k < ps.v[i].n - 1; k++)
            if (launcher_frame(&ps.v[i].f[k]))
                ps.v[i].start = k + 1;
    for (size_t i = 0; i < ps.n; i++) {
        const CallPath *p = &ps.v[i];
        int own = p->n - p->start, shared = 0;
        while (i > 0 && shared < own && same_start(p, &ps.v[i - 1], shared + 1))
            shared++;
        for (int d = shared; d < own; d++) {
            long long under = 0;       /* the compiles of the paths through this node */
            for (size_t j = i; j < ps.n && same_start(p, &ps.v[j], d + 1); j++)
                under += ps.v[j].compiles;
            const PathFrame *f = &p->f[p->start + d];
            const char *base = strrchr(f->file, '/');
            char indent[3 * 32 + 1] = "";      /* "· " is 3 bytes; 32 levels at most */
            for (int k = 0; k < d && k < 32; k++)
                strcat(indent, "\xc2\xb7 ");    /* "· " per level, as the report */
            pager_add(c->p, -1, -1, "  %s%6lld%s  %s%s (%s:%d)%s%s%s", S(AC_HEADER_VALUE), under,
                      S(AC_NORMAL), indent, f->name, base ? base + 1 : f->file, f->line,
                      S(AC_DIM), d == own - 1 ? " -> compiled " : "", d == own - 1 ? p->ids : "");
        }
    }
    if (ps.n == 0)
        pager_add(c->p, -1, -1, "  %s(none recorded: files before schema v5 have no call paths)",
                  S(AC_DIM));
    for (size_t i = 0; i < ps.n; i++) {
        for (int k = 0; k < ps.v[i].n; k++) {
            free(ps.v[i].f[k].file);
            free(ps.v[i].f[k].name);
        }
        free(ps.v[i].f);
        free(ps.v[i].key);
        free(ps.v[i].ids);
    }
    free(ps.v);
    pager_add(c->p, -1, -1, "%s", "");
}

static void failing_seen(void *ctx, const StoreGuardCountRow *row)
{
    Ctx *c = ctx;
    pager_add_indent(c->p, 26, "  %s%6lld x%s  %s%-16s%s  %s%s  %s(last observed %s)",
                     S(AC_BAD), row->n, S(AC_NORMAL), S(AC_KIND), row->kind, S(AC_NORMAL),
                     row->expr, S(AC_DIM), S(AC_DIM), row->last_observed);
    source_tail(c, row->filename, row->lineno);
    c->n++;
}

static void failing(Ctx *c)
{
    pager_add(c->p, -1, -1, "%sGuards that fail most", S(AC_SECTION));
    c->n = 0;
    if (store_read_top_failing_guards(c->r, c->run_id, c->code_id, DETAIL_TOP_FAILING,
                                      failing_seen, c) < 0)
        read_failed(c);
    else if (c->n == 0)
        pager_add(c->p, -1, -1, "  %s(no guard has failed)", S(AC_DIM));
    pager_add(c->p, -1, -1, "%s", "");
}

static void stack_frame_seen(void *ctx, const StoreStackFrame *row)
{
    Ctx *c = ctx;
    char *src = source_line(c->m->files[c->file].path, row->filename, row->lineno);
    char *recorded = fmt_trim(fmt_sanitize(row->source));
    pager_add(c->p, -1, -1, "      %s%s:%d%s in %s", S(AC_DIM), row->filename, row->lineno,
              S(AC_NORMAL), row->name);
    pager_add_indent(c->p, 14, "      %s%5d | %s", S(AC_SOURCE), row->lineno,
                     src ? src : recorded);
    free(src);
    free(recorded);
    c->n++;
}

/* The user stack of one break: each frame and its source line. */
static void break_stack(Ctx *c, long long break_id, const char *filename, int lineno)
{
    c->n = 0;
    if (store_read_break_stack(c->r, break_id, stack_frame_seen, c) < 0)
        c->n = 0;                /* as if none was recorded: the break's own line */
    if (c->n == 0 && lineno > 0) {      /* no stack recorded: the break's own line */
        char *src = source_line(c->m->files[c->file].path, filename, lineno);
        pager_add(c->p, -1, -1, "      %s%s:%d", S(AC_DIM), filename, lineno);
        if (src)
            pager_add_indent(c->p, 14, "      %s%5d | %s", S(AC_SOURCE), lineno, src);
        free(src);
    }
}

/* A section's rows counted apart from what its helpers count (c->n). */
typedef struct Section {
    Ctx *c;
    int n;
} Section;

/* What a site's cost is made of, on a line of its own under it (nothing
   when unknown: the cost column says "-"). */
static void break_cost(Ctx *c, const StoreBreakCost *cost)
{
    if (!cost->known)
        return;
    char parts[256];
    fmt_break_cost_parts(parts, sizeof parts, cost, "the function's");
    pager_add_indent(c->p, 16, "          %scost:%s %s", S(AC_DIM), S(AC_NORMAL), parts);
}

static void break_site_seen(void *ctx, const StoreBreakSiteRow *row)
{
    Section *sec = ctx;
    Ctx *c = sec->c;
    char *reason = fmt_sanitize(row->reason);
    char type[160], cost[64];
    const BreakType *bt = break_type_by_id(row->break_type);
    type_text(type, sizeof type, row->break_type, row->break_class);
    fmt_break_cost(cost, sizeof cost, &row->cost);
    pager_add_indent(c->p, 12, "  %s%6lld x  %s%s  %s%s%s  %s%s", S(AC_HEADER_VALUE), row->n,
                     cost, S(AC_NORMAL), S(AC_KIND), row->kind, S(AC_NORMAL), reason, type);
    free(reason);
    break_cost(c, &row->cost);
    if (bt != NULL)              /* what to do about it (event/break_types.c) */
        pager_add_indent(c->p, 16, "          %shint:%s %s", S(AC_DIM), S(AC_NORMAL), bt->hint);
    break_stack(c, row->last_break_id, row->filename, row->lineno);
    sec->n++;
}

static void breaks(Ctx *c)
{
    Section sec = {c, 0};
    pager_add(c->p, -1, -1, "%sGraph breaks%s by site, costliest first, then most frequent",
              S(AC_SECTION), S(AC_DIM));
    if (store_read_code_break_sites(c->r, c->run_id, c->code_id, break_site_seen, &sec) < 0)
        read_failed(c);
    else if (sec.n == 0)
        pager_add(c->p, -1, -1, "  %s(no graph breaks)", S(AC_DIM));
    pager_add(c->p, -1, -1, "%s", "");
}

static void compile_failure_seen(void *ctx, const StoreCompileFailureRow *row)
{
    Ctx *c = ctx;
    if (++c->n > DETAIL_FAILS_PER_RECOMPILE) {
        if (c->n == DETAIL_FAILS_PER_RECOMPILE + 1)
            pager_add(c->p, -1, -1, "        %s(more failures not shown)", S(AC_DIM));
        return;
    }
    pager_add_indent(c->p, 30, "        entry [%s] failed %s%-16s%s  %s%s  %sobserved %s%s",
                     row->entry_compile_id, S(AC_KIND), row->kind, S(AC_NORMAL), row->expr,
                     S(AC_DIM), S(AC_BAD), row->observed, S(AC_NORMAL));
    source_tail(c, row->filename, row->lineno);
}

/* The nearest entry of one recompile, being listed. */
typedef struct Nearest {
    Ctx *c;
    int n;                       /* failing guards listed */
    long long failing;           /* of how many */
} Nearest;

static void nearest_seen(void *ctx, const StoreRecompileDiffRow *row)
{
    Nearest *nr = ctx;
    Ctx *c = nr->c;
    if (nr->n++ == 0) {
        char ms[32];
        fmt_ms(ms, sizeof ms, row->capture_ns, 0);
        char *entry = fmt_sanitize(row->entry_compile_id);
        nr->failing = row->failing;
        pager_add(c->p, -1, -1, "        %snearest entry%s %s[%s]%s: %lld guard%s fail%s%s, "
                  "capture %s ms", S(AC_SECTION), S(AC_NORMAL), S(AC_HEADER_VALUE), entry,
                  S(AC_NORMAL), row->failing, row->failing == 1 ? "" : "s",
                  row->failing == 1 ? "s" : "", S(AC_DIM), ms);
        free(entry);
    }
    char *kind = fmt_sanitize(row->kind), *expr = fmt_sanitize(row->expr);
    char *observed = fmt_sanitize(row->observed);
    pager_add_indent(c->p, 30, "          %s%-16s%s  %s%s  %sobserved %s%s", S(AC_KIND), kind,
                     S(AC_NORMAL), expr, S(AC_DIM), S(AC_BAD), observed, S(AC_NORMAL));
    source_tail(c, row->filename, row->lineno);
    free(kind);
    free(expr);
    free(observed);
    if (row->lineno <= 0)
        return;
    /* the user's line that made the guard: as the file reads now, else as
       recorded (like a break's stack) */
    const char *src = cached_line(c, row->filename, row->lineno);
    char *recorded = src == NULL ? fmt_trim(fmt_sanitize(row->source)) : NULL;
    if (src != NULL || recorded[0] != '\0')
        pager_add_indent(c->p, 20, "          %s%5d | %s", S(AC_SOURCE), row->lineno,
                         src != NULL ? src : recorded);
    free(recorded);
}

/* The older entry nearest to the recompile's inputs and its failing guards
   (files of schema v4 on; nothing before). */
static void recompile_nearest(Ctx *c, long long compile_row)
{
    Nearest nr = {c, 0, 0};
    if (store_read_recompile_diff(c->r, compile_row, DETAIL_NEAREST_GUARDS, nearest_seen,
                                  &nr) < 0) {
        read_failed(c);
        return;
    }
    if (nr.n > 0 && nr.failing > nr.n)
        pager_add(c->p, -1, -1, "          %s(%lld more failing guard%s not shown)", S(AC_DIM),
                  nr.failing - nr.n, nr.failing - nr.n == 1 ? "" : "s");
}

static void recompile_failures(Ctx *c, long long compile_row)
{
    c->n = 0;
    if (store_read_compile_failures(c->r, compile_row, DETAIL_FAILS_PER_RECOMPILE + 1,
                                    compile_failure_seen, c) < 0)
        return;
    if (c->n == 0)
        pager_add(c->p, -1, -1, "        %s(no failing guard recorded)", S(AC_DIM));
}

static void recompile_seen(void *ctx, const StoreRecompileRow *row)
{
    Section *sec = ctx;
    Ctx *c = sec->c;
    char at[32], ms[32];
    since(c, row->started_at, at, sizeof at);
    fmt_ms(ms, sizeof ms, row->duration_ns, 0);
    pager_add_indent(c->p, 8, "  %s[%s]%s  %s  %s ms  %s%s%s%s", S(AC_HEADER_VALUE),
                     row->compile_id, S(AC_NORMAL), at, ms, row->outcome,
                     row->reason[0] ? "  " : "", S(AC_DIM), row->reason);
    recompile_failures(c, row->compile_row);
    recompile_nearest(c, row->compile_row);
    sec->n++;
}

static void recompiles(Ctx *c)
{
    const CodeRow *r = model_code(c->m, c->file, c->run_id, c->code_id);
    long long total = r != NULL ? r->recompiles : 0;
    Section sec = {c, 0};
    pager_add(c->p, -1, -1, "%sRecompiles%s newest first%s", S(AC_SECTION), S(AC_DIM),
              total > DETAIL_RECOMPILES ? " (the newest " TUI_STR(DETAIL_RECOMPILES) ")" : "");
    if (store_read_code_recompiles(c->r, c->run_id, c->code_id, DETAIL_RECOMPILES,
                                   recompile_seen, &sec) < 0)
        read_failed(c);
    else if (sec.n == 0)
        pager_add(c->p, -1, -1, "  %s(never recompiled)", S(AC_DIM));
    pager_add(c->p, -1, -1, "%s", "");
}

static void limit_seen(void *ctx, const StoreLimitRow *row)
{
    Ctx *c = ctx;
    char at[32];
    if (c->n++ == 0)
        pager_add(c->p, -1, -1, "%sCache limit%s reached (the frame then runs uncaptured)",
                  S(AC_SECTION), S(AC_DIM));
    since(c, row->at, at, sizeof at);
    pager_add_indent(c->p, 8, "  %s%s%s  the frame at resume offset %d%s: last failing "
                     "guard %s%s", S(AC_LIMIT), at, S(AC_NORMAL), row->resume_offset,
                     row->epoch != c->epoch ? " (before a reset)" : "", S(AC_BAD), row->reason);
}

static void skip_seen(void *ctx, const StoreSkipRow *row)
{
    Ctx *c = ctx;
    char at[32];
    if (c->n++ == 0)
        pager_add(c->p, -1, -1, "%sSkipped%s (runs in the default interpreter)",
                  S(AC_SECTION), S(AC_DIM));
    since(c, row->at, at, sizeof at);
    char type[160];
    type_text(type, sizeof type, row->break_type, row->break_class);
    char *reason = fmt_sanitize(row->reason);
    pager_add_indent(c->p, 8, "  %s  resume offset %d: %s%s", at, row->resume_offset, reason,
                     type);
    free(reason);
}

static void limits_and_skips(Ctx *c)
{
    c->n = 0;
    if (store_read_code_cache_limits(c->r, c->run_id, c->code_id, DETAIL_LIMITS, limit_seen,
                                     c) < 0) {
        read_failed(c);
        return;
    }
    if (c->n > 0)
        pager_add(c->p, -1, -1, "%s", "");
    c->n = 0;
    if (store_read_code_skips(c->r, c->run_id, c->code_id, DETAIL_SKIPS, skip_seen, c) < 0) {
        read_failed(c);
        return;
    }
    if (c->n > 0)
        pager_add(c->p, -1, -1, "%s", "");
}

int detail_load(Pager *p, Model *m, int file, long long run_id, long long code_id)
{
    size_t fi = (size_t)file;
    Ctx c = {p, m, fi, model_reader(m, fi), run_id, code_id, model_epoch(m, fi, run_id), 0,
             model_cache_limit(m, fi, run_id), 0, {{{NULL, NULL, 0, NULL}}, 0}};
    const RunInfo *run = model_run(m, fi, run_id);
    c.run_started = run ? run->started_at : 0;
    const CodeRow *r = model_code(m, fi, run_id, code_id);
    pager_clear(p);
    /* Several files: whose run it is comes first. */
    char who[128] = "";
    if (m->nfiles > 1)
        snprintf(who, sizeof who, "%s, ", run ? run->label : "?");
    char *title = r != NULL ? xasprintf(" %s  %s  (%srun %lld, code %lld)", r->name, r->where,
                                        who, run_id, code_id)
                            : xasprintf(" code %lld of %srun %lld", code_id, who, run_id);
    pager_set_title(p, title);
    free(title);
    if (model_begin(m, fi) < 0) {
        pager_add(p, -1, -1, "  %scannot read the database%s", S(AC_BAD), S(AC_NORMAL));
        pager_finish(p);
        return -1;
    }
    c.r = model_reader(m, fi);         /* (opened by model_begin when it was parked) */
    summary(&c);
    entries(&c);
    call_paths(&c);
    failing(&c);
    breaks(&c);
    recompiles(&c);
    limits_and_skips(&c);
    model_end(m, fi);
    source_cache_free(&c.src);
    pager_finish(p);
    return 0;
}
