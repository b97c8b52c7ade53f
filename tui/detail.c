/*
 * detail.c -- the detail view of one code object (Enter on a row): its cache
 * entries frame by frame in lookup order with their hits and guards, the
 * guards that fail most, its graph breaks with the user's source lines, the
 * recompile history with the guards that failed and the values observed,
 * cache-limit hits and skips.  Queries one code object through the per-code
 * indexes, in one read transaction, each refresh.  Tables: docs/sql.md;
 * what the lines mean: docs/dyntop.md.
 */
#include "tui.h"

#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S(c) TUI_STYLE(c)
/* The detail shows at most this many recompiles (newest first). */
#define DETAIL_RECOMPILES 100
#define DETAIL_FAILS_PER_RECOMPILE 8

typedef struct Ctx {
    Pager *p;
    Model *m;
    long long run_id, code_id, epoch;
    long long run_started;
    bool guards_kind;            /* guards.kind exists */
    int limit;                   /* the run's cache limit, 0 unknown */
} Ctx;

/* ---- small helpers ---- */

static sqlite3_stmt *query(Ctx *c, const char *sql)
{
    sqlite3_stmt *st = model_prepare(c->m, sql);
    if (st == NULL) {
        sqlite3 *db = model_db(c->m);
        pager_add(c->p, -1, -1, "%s  query failed: %s%s", S(AC_BAD),
                  db ? sqlite3_errmsg(db) : "database closed", S(AC_NORMAL));
        return NULL;
    }
    sqlite3_bind_int64(st, 1, c->run_id);
    sqlite3_bind_int64(st, 2, c->code_id);
    if (sqlite3_bind_parameter_count(st) >= 3)
        sqlite3_bind_int64(st, 3, c->epoch);
    return st;
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

/* Strip leading and trailing spaces in place (a source line shows as a
   traceback shows it).  Returns s. */
static char *trim(char *s)
{
    size_t len = strlen(s), lead = 0;
    while (len > 0 && s[len - 1] == ' ')
        s[--len] = '\0';
    while (s[lead] == ' ')
        lead++;
    memmove(s, s + lead, len - lead + 1);
    return s;
}

/*
 * Line `lineno` of `filename`, read from the file: as recorded (relative to
 * dyntop's directory), else relative to the database's directory.  Returns
 * a malloc'd, sanitized, right-trimmed line, or NULL.
 */
static char *source_line(const Model *m, const char *filename, int lineno)
{
    FILE *f = NULL;
    if (lineno <= 0 || filename[0] == '\0' || filename[0] == '<')
        return NULL;
    f = fopen(filename, "r");
    if (f == NULL && filename[0] != '/') {
        char *dbpath = xstrdup(m->path);
        char *path = xasprintf("%s/%s", dirname(dbpath), filename);
        f = fopen(path, "r");
        free(path);
        free(dbpath);
    }
    if (f == NULL)
        return NULL;
    char buf[4096];
    char *line = NULL;
    for (int n = 1; fgets(buf, sizeof buf, f) != NULL; n++) {
        size_t len = strlen(buf);
        bool whole = len > 0 && buf[len - 1] == '\n';
        if (n == lineno) {
            line = fmt_sanitize(buf);
            break;
        }
        while (!whole && fgets(buf, sizeof buf, f) != NULL) {   /* rest of a long line */
            len = strlen(buf);
            whole = len > 0 && buf[len - 1] == '\n';
        }
    }
    fclose(f);
    return line ? trim(line) : NULL;
}

/* ---- sections ---- */

static void summary(Ctx *c)
{
    long i = model_find(c->m, c->run_id, c->code_id);
    if (i < 0)
        return;
    const CodeRow *r = &c->m->rows[i];
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

/* Does `guards` have its own kind column?  (Early files kept the kind in
   expr, as "KIND<tab>expr"; split_guard reads both.) */
static bool guards_have_kind(Ctx *c)
{
    sqlite3_stmt *st = model_prepare(c->m, "SELECT count(*) FROM pragma_table_info('guards')"
                                           " WHERE name = 'kind'");
    bool yes = st != NULL && sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int(st, 0) > 0;
    sqlite3_finalize(st);
    return yes;
}

static void guards_of(Ctx *c, const char *cid, const char *guards_text)
{
    sqlite3_stmt *st = query(c, c->guards_kind
        ? "SELECT coalesce(kind || char(9), '') || expr FROM guards WHERE run_id = ?1"
          " AND code_id = ?2 AND epoch = ?3 AND compile_id = ?4 ORDER BY idx"
        : "SELECT expr FROM guards WHERE run_id = ?1 AND code_id = ?2"
          " AND epoch = ?3 AND compile_id = ?4 ORDER BY idx");
    if (st == NULL)
        return;
    sqlite3_bind_text(st, 4, cid, -1, SQLITE_TRANSIENT);
    int n = 0;
    char kind[64];
    const char *expr;
    while (sqlite3_step(st) == SQLITE_ROW) {
        split_guard(model_text(st, 0), kind, sizeof kind, &expr);
        pager_add_indent(c->p, 26, "        %s%-16s%s  %s", S(AC_KIND), kind, S(AC_NORMAL), expr);
        n++;
    }
    sqlite3_finalize(st);
    if (n > 0 || guards_text[0] == '\0')
        return;
    /* No guards rows (an older file): the entry's guards_text, line by line. */
    char *copy = xstrdup(guards_text), *save = NULL;
    for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        split_guard(line, kind, sizeof kind, &expr);
        pager_add_indent(c->p, 26, "        %s%-16s%s  %s", S(AC_KIND), kind, S(AC_NORMAL), expr);
    }
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
    qsort(v, n, sizeof *v, cmp_dentry);
}

static void entries(Ctx *c)
{
    sqlite3_stmt *st = query(c,
        "SELECT compile_id, frame_id, resume_offset, hits, guard_ns, coalesce(guards_text, ''),"
        " (SELECT count(*) FROM guards AS g WHERE g.run_id = e.run_id AND g.code_id = e.code_id"
        "    AND g.epoch = e.epoch AND g.compile_id = e.compile_id),"
        " (SELECT count(*) FROM cache_entries AS f WHERE f.run_id = e.run_id"
        "    AND f.code_id = e.code_id AND f.epoch = e.epoch AND f.frame_id IS e.frame_id),"
        " coalesce(stats_at, created_at, 0), stats_at IS NOT NULL"
        " FROM cache_entries AS e WHERE run_id = ?1 AND code_id = ?2 AND epoch = ?3"
        " ORDER BY resume_offset, frame_id, coalesce(stats_at, created_at, 0) DESC");
    if (st == NULL)
        return;
    DEntry *v = NULL;
    size_t n = 0, cap = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            v = xrealloc(v, cap * sizeof *v);
        }
        DEntry *d = &v[n++];
        snprintf(d->cid, sizeof d->cid, "%s", model_text(st, 0));
        d->frame_id = sqlite3_column_int64(st, 1);
        d->resume_offset = sqlite3_column_int(st, 2);
        d->hits = sqlite3_column_int64(st, 3);
        d->guard_ns = sqlite3_column_int64(st, 4);
        d->guards_text = xstrdup(model_text(st, 5));
        d->nguards = sqlite3_column_int64(st, 6);
        d->in_frame = sqlite3_column_int64(st, 7);
        d->t = sqlite3_column_int64(st, 8);
        d->snapshotted = sqlite3_column_int(st, 9) != 0;
    }
    sqlite3_finalize(st);
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
        guards_of(c, d->cid, d->guards_text);
        free(d->guards_text);
    }
    free(v);
    if (n == 0)
        pager_add(c->p, -1, -1, "  %s(no cache entries in the current epoch)", S(AC_DIM));
    pager_add(c->p, -1, -1, "%s", "");
}

static void failing(Ctx *c)
{
    sqlite3_stmt *st = query(c,
        "SELECT kind, expr, n, (SELECT observed FROM guard_failures WHERE failure_id = last_id)"
        " FROM (SELECT kind, expr, count(*) AS n, max(failure_id) AS last_id FROM guard_failures"
        "       WHERE run_id = ?1 AND code_id = ?2 GROUP BY kind, expr)"
        " ORDER BY n DESC, last_id DESC LIMIT 5");
    if (st == NULL)
        return;
    pager_add(c->p, -1, -1, "%sGuards that fail most", S(AC_SECTION));
    int n = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        pager_add_indent(c->p, 26, "  %s%6lld x%s  %s%-16s%s  %s%s  %s(last observed %s)",
                         S(AC_BAD), sqlite3_column_int64(st, 2), S(AC_NORMAL), S(AC_KIND),
                         model_text(st, 0), S(AC_NORMAL), model_text(st, 1), S(AC_DIM),
                         S(AC_DIM), model_text(st, 3));
        n++;
    }
    sqlite3_finalize(st);
    if (n == 0)
        pager_add(c->p, -1, -1, "  %s(no guard has failed)", S(AC_DIM));
    pager_add(c->p, -1, -1, "%s", "");
}

/* The user stack of one break: each frame and its source line. */
static void break_stack(Ctx *c, long long break_id, const char *filename, int lineno)
{
    sqlite3_stmt *st = model_prepare(c->m,
        "SELECT json_extract(j.value, '$[0]'), json_extract(j.value, '$[1]'),"
        " json_extract(j.value, '$[2]'), json_extract(j.value, '$[3]')"
        " FROM graph_breaks AS b, json_each(b.user_stack) AS j"
        " WHERE b.break_id = ?1 AND json_valid(b.user_stack) ORDER BY j.key");
    int n = 0;
    if (st != NULL) {
        sqlite3_bind_int64(st, 1, break_id);
        while (sqlite3_step(st) == SQLITE_ROW) {
            const char *file = model_text(st, 0), *fn = model_text(st, 2);
            int line = sqlite3_column_int(st, 1);
            char *src = source_line(c->m, file, line);
            char *recorded = trim(fmt_sanitize(model_text(st, 3)));
            pager_add(c->p, -1, -1, "      %s%s:%d%s in %s", S(AC_DIM), file, line, S(AC_NORMAL), fn);
            pager_add_indent(c->p, 14, "      %s%5d | %s", S(AC_SOURCE), line,
                             src ? src : recorded);
            free(src);
            free(recorded);
            n++;
        }
        sqlite3_finalize(st);
    }
    if (n == 0 && lineno > 0) {      /* no stack recorded: the break's own line */
        char *src = source_line(c->m, filename, lineno);
        pager_add(c->p, -1, -1, "      %s%s:%d", S(AC_DIM), filename, lineno);
        if (src)
            pager_add_indent(c->p, 14, "      %s%5d | %s", S(AC_SOURCE), lineno, src);
        free(src);
    }
}

static void breaks(Ctx *c)
{
    sqlite3_stmt *st = query(c,
        "SELECT kind, reason, coalesce(filename, ''), lineno, count(*), max(break_id)"
        " FROM graph_breaks WHERE run_id = ?1 AND code_id = ?2"
        " GROUP BY kind, reason, filename, lineno ORDER BY count(*) DESC, min(break_id)");
    if (st == NULL)
        return;
    pager_add(c->p, -1, -1, "%sGraph breaks%s by site", S(AC_SECTION), S(AC_DIM));
    int n = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        char *reason = fmt_sanitize(model_text(st, 1));
        char *file = xstrdup(model_text(st, 2));
        int lineno = sqlite3_column_int(st, 3);
        pager_add_indent(c->p, 12, "  %s%6lld x%s  %s%s%s  %s", S(AC_HEADER_VALUE),
                         sqlite3_column_int64(st, 4), S(AC_NORMAL), S(AC_KIND), model_text(st, 0),
                         S(AC_NORMAL), reason);
        break_stack(c, sqlite3_column_int64(st, 5), file, lineno);
        free(reason);
        free(file);
        n++;
    }
    sqlite3_finalize(st);
    if (n == 0)
        pager_add(c->p, -1, -1, "  %s(no graph breaks)", S(AC_DIM));
    pager_add(c->p, -1, -1, "%s", "");
}

static void recompile_failures(Ctx *c, long long compile_row)
{
    sqlite3_stmt *st = model_prepare(c->m,
        "SELECT coalesce(entry_compile_id, ''), kind, expr, observed FROM guard_failures"
        " WHERE compile_row = ?1 ORDER BY failure_id LIMIT ?2");
    if (st == NULL)
        return;
    sqlite3_bind_int64(st, 1, compile_row);
    sqlite3_bind_int(st, 2, DETAIL_FAILS_PER_RECOMPILE + 1);
    int n = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        if (++n > DETAIL_FAILS_PER_RECOMPILE) {
            pager_add(c->p, -1, -1, "        %s(more failures not shown)", S(AC_DIM));
            break;
        }
        pager_add_indent(c->p, 30, "        entry [%s] failed %s%-16s%s  %s%s  %sobserved %s%s",
                         model_text(st, 0), S(AC_KIND), model_text(st, 1), S(AC_NORMAL),
                         model_text(st, 2), S(AC_DIM), S(AC_BAD), model_text(st, 3), S(AC_NORMAL));
    }
    sqlite3_finalize(st);
    if (n == 0)
        pager_add(c->p, -1, -1, "        %s(no failing guard recorded)", S(AC_DIM));
}

static void recompiles(Ctx *c)
{
    long i = model_find(c->m, c->run_id, c->code_id);
    long long total = i >= 0 ? c->m->rows[i].recompiles : 0;
    sqlite3_stmt *st = query(c,
        "SELECT compile_row, compile_id, started_at, duration_ns, coalesce(outcome, 'running'),"
        " coalesce(reason, ''), resume_offset FROM compiles"
        " WHERE run_id = ?1 AND code_id = ?2 AND frame_compile_id > 0"
        " ORDER BY compile_row DESC LIMIT " TUI_STR(DETAIL_RECOMPILES));
    if (st == NULL)
        return;
    pager_add(c->p, -1, -1, "%sRecompiles%s newest first%s", S(AC_SECTION), S(AC_DIM),
              total > DETAIL_RECOMPILES ? " (the newest " TUI_STR(DETAIL_RECOMPILES) ")" : "");
    int n = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        char at[32], ms[32];
        since(c, sqlite3_column_int64(st, 2), at, sizeof at);
        fmt_ms(ms, sizeof ms, sqlite3_column_int64(st, 3), 0);
        const char *reason = model_text(st, 5);
        pager_add_indent(c->p, 8, "  %s[%s]%s  %s  %s ms  %s%s%s%s", S(AC_HEADER_VALUE),
                         model_text(st, 1), S(AC_NORMAL), at, ms, model_text(st, 4),
                         reason[0] ? "  " : "", S(AC_DIM), reason);
        recompile_failures(c, sqlite3_column_int64(st, 0));
        n++;
    }
    sqlite3_finalize(st);
    if (n == 0)
        pager_add(c->p, -1, -1, "  %s(never recompiled)", S(AC_DIM));
    pager_add(c->p, -1, -1, "%s", "");
}

static void limits_and_skips(Ctx *c)
{
    sqlite3_stmt *st = query(c,
        "SELECT at, frame_id, resume_offset, coalesce(reason, ''), epoch FROM cache_limits"
        " WHERE run_id = ?1 AND code_id = ?2 ORDER BY rowid DESC LIMIT 10");
    if (st == NULL)
        return;
    int n = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        char at[32];
        if (n++ == 0)
            pager_add(c->p, -1, -1, "%sCache limit%s reached (the frame then runs uncaptured)",
                      S(AC_SECTION), S(AC_DIM));
        since(c, sqlite3_column_int64(st, 0), at, sizeof at);
        pager_add_indent(c->p, 8, "  %s%s%s  the frame at resume offset %d%s: last failing "
                         "guard %s%s", S(AC_LIMIT), at, S(AC_NORMAL), sqlite3_column_int(st, 2),
                         sqlite3_column_int64(st, 4) != c->epoch ? " (before a reset)" : "",
                         S(AC_BAD), model_text(st, 3));
    }
    sqlite3_finalize(st);
    if (n > 0)
        pager_add(c->p, -1, -1, "%s", "");
    st = query(c, "SELECT at, resume_offset, coalesce(reason, '') FROM frame_skips"
                  " WHERE run_id = ?1 AND code_id = ?2 ORDER BY rowid DESC LIMIT 10");
    if (st == NULL)
        return;
    n = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        char at[32];
        if (n++ == 0)
            pager_add(c->p, -1, -1, "%sSkipped%s (runs in the default interpreter)",
                      S(AC_SECTION), S(AC_DIM));
        since(c, sqlite3_column_int64(st, 0), at, sizeof at);
        pager_add_indent(c->p, 8, "  %s  resume offset %d: %s", at, sqlite3_column_int(st, 1),
                         model_text(st, 2));
    }
    sqlite3_finalize(st);
    if (n > 0)
        pager_add(c->p, -1, -1, "%s", "");
}

int detail_load(Pager *p, Model *m, long long run_id, long long code_id)
{
    Ctx c = {p, m, run_id, code_id, model_epoch(m, run_id), 0, false,
             model_cache_limit(m, run_id)};
    const RunInfo *run = model_run(m, run_id);
    c.run_started = run ? run->started_at : 0;
    long i = model_find(m, run_id, code_id);
    pager_clear(p);
    char *title = i >= 0 ? xasprintf(" %s  %s  (run %lld, code %lld)", m->rows[i].name,
                                     m->rows[i].where, run_id, code_id)
                         : xasprintf(" code %lld of run %lld", code_id, run_id);
    pager_set_title(p, title);
    free(title);
    if (model_begin(m) < 0) {
        pager_add(p, -1, -1, "  %scannot read the database%s", S(AC_BAD), S(AC_NORMAL));
        pager_finish(p);
        return -1;
    }
    c.guards_kind = guards_have_kind(&c);
    summary(&c);
    entries(&c);
    failing(&c);
    breaks(&c);
    recompiles(&c);
    limits_and_skips(&c);
    model_end(m);
    pager_finish(p);
    return 0;
}
