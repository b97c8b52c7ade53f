/*
 * model.c -- dyntop's picture of a dynscope database: the runs, one row of
 * aggregates per code object, and the header totals, kept up to date by
 * polling.  Contract and invariants: tui.h (Model); what it reads, and how:
 * store/read.h (the read model); tables: docs/sql.md.
 *
 * Refreshing is incremental, so a poll costs what changed, not what the file
 * holds (docs/performance.md, "dyntop refresh").  The recorder only appends
 * to code_objects, compiles, graphs, graph_breaks, cache_limits,
 * guard_failures, cache_entries and entry_stats, and rowids grow with each
 * commit (one writer at a time holds the write lock), so each refresh reads
 * the rows past the largest rowid it has seen ("watermark") in one read
 * transaction.  What the recorder updates in place is covered too:
 *   - compiles get duration_ns/ended_at when the compile ends: compiles seen
 *     without ended_at stay on a short list and are re-read until they end;
 *   - cache_entries.hits change with each counter snapshot, and every change
 *     is also appended to entry_stats, which is read past its watermark;
 *   - runs (a handful of rows) are re-read whole.
 * The first load counts graphs, graph_breaks and guard_failures with grouped
 * queries through their per-code indexes instead of reading their rows (the
 * code objects, compiles and cache entries it reads row by row: the model
 * keeps what it needs of them); so does a refresh that finds a very large
 * number of new guard failures.
 */
#include "tui.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* More new guard failures than this are counted with the grouped query. */
#define BULK_FAILURES 20000

static void set_error(Model *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void set_error(Model *m, const char *fmt, ...)
{
    va_list ap;
    char buf[512];
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    free(m->error);
    m->error = xstrdup(buf);
}

/* ---- rows and entries ---- */

typedef struct CodeKey {
    const Model *m;
    long long run_id, code_id;
} CodeKey;

static bool code_eq(const void *ctx, size_t idx)
{
    const CodeKey *k = ctx;
    const CodeRow *r = &k->m->rows[idx];
    return r->run_id == k->run_id && r->code_id == k->code_id;
}

long model_find(const Model *m, long long run_id, long long code_id)
{
    CodeKey k = {m, run_id, code_id};
    size_t i = indexmap_find(&m->code_map, indexmap_hash2(run_id, code_id), code_eq, &k);
    return i == (size_t)-1 ? -1 : (long)i;
}

/* The row of (run_id, code_id), made (as "?") if the code_objects row has
   not been seen.  Cannot fail. */
static long row_for(Model *m, long long run_id, long long code_id)
{
    long i = model_find(m, run_id, code_id);
    if (i >= 0)
        return i;
    if (m->nrows == m->caprows) {
        m->caprows = m->caprows ? 2 * m->caprows : 256;
        m->rows = xrealloc(m->rows, m->caprows * sizeof *m->rows);
    }
    CodeRow *r = &m->rows[m->nrows];
    memset(r, 0, sizeof *r);
    r->run_id = run_id;
    r->code_id = code_id;
    r->name = xstrdup("?");
    r->filename = xstrdup("?");
    r->where = xstrdup("?");
    r->last_fail = xstrdup("");
    r->limit_epoch = -1;
    r->entry_head = -1;
    indexmap_add(&m->code_map, indexmap_hash2(run_id, code_id), m->nrows);
    return (long)m->nrows++;
}

typedef struct EntryKey {
    const Model *m;
    long row;
    long long epoch;
    const char *cid;
} EntryKey;

static bool entry_eq(const void *ctx, size_t idx)
{
    const EntryKey *k = ctx;
    const EntryRec *e = &k->m->entries[idx];
    return e->row == k->row && e->epoch == k->epoch && strcmp(e->cid, k->cid) == 0;
}

static uint64_t entry_hash(long row, long long epoch, const char *cid)
{
    return indexmap_hash_str(indexmap_hash2(row, epoch), cid);
}

static long entry_find(const Model *m, long row, long long epoch, const char *cid)
{
    char key[sizeof m->entries[0].cid];
    snprintf(key, sizeof key, "%s", cid);
    EntryKey k = {m, row, epoch, key};
    size_t i = indexmap_find(&m->entry_map, entry_hash(row, epoch, key), entry_eq, &k);
    return i == (size_t)-1 ? -1 : (long)i;
}

static void entry_add(Model *m, long row, long long epoch, const char *cid,
                      long long frame_id, long long hits)
{
    long i = entry_find(m, row, epoch, cid);
    if (i >= 0) {
        m->entries[i].hits = hits;
        m->entries[i].frame_id = frame_id;
        return;
    }
    if (m->nentries == m->capentries) {
        m->capentries = m->capentries ? 2 * m->capentries : 256;
        m->entries = xrealloc(m->entries, m->capentries * sizeof *m->entries);
    }
    EntryRec *e = &m->entries[m->nentries];
    e->row = row;
    e->epoch = epoch;
    snprintf(e->cid, sizeof e->cid, "%s", cid);
    e->frame_id = frame_id;
    e->hits = hits;
    e->next = m->rows[row].entry_head;
    m->rows[row].entry_head = (long)m->nentries;
    indexmap_add(&m->entry_map, entry_hash(row, epoch, e->cid), m->nentries);
    m->nentries++;
}

static void open_compile_add(Model *m, long long compile_row, long row)
{
    if (m->nopen == m->capopen) {
        m->capopen = m->capopen ? 2 * m->capopen : 16;
        m->open_compiles = xrealloc(m->open_compiles, m->capopen * sizeof *m->open_compiles);
        m->open_rows = xrealloc(m->open_rows, m->capopen * sizeof *m->open_rows);
    }
    m->open_compiles[m->nopen] = compile_row;
    m->open_rows[m->nopen] = row;
    m->nopen++;
}

static void free_rows(Model *m)
{
    for (size_t i = 0; i < m->nrows; i++) {
        free(m->rows[i].name);
        free(m->rows[i].filename);
        free(m->rows[i].where);
        free(m->rows[i].last_fail);
    }
    m->nrows = 0;
    m->nentries = 0;
    m->nopen = 0;
    indexmap_clear(&m->code_map);
    indexmap_clear(&m->entry_map);
    memset(&m->mark, 0, sizeof m->mark);
    m->failures = 0;
    m->loaded = false;
    m->nsamples = 0;
    m->rates.valid = false;
    m->generation++;
}

static void free_runs(Model *m)
{
    for (size_t i = 0; i < m->nruns; i++)
        free(m->runs[i].argv);
    free(m->runs);
    m->runs = NULL;
    m->nruns = m->capruns = 0;
}

/* ---- the steps of a refresh; each returns 0 or -1 (the reader's error) ---- */

static void run_add(void *ctx, const StoreRunRow *row)
{
    Model *m = ctx;
    if (m->nruns == m->capruns) {
        m->capruns = m->capruns ? 2 * m->capruns : 4;
        m->runs = xrealloc(m->runs, m->capruns * sizeof *m->runs);
    }
    RunInfo *r = &m->runs[m->nruns++];
    r->run_id = row->run_id;
    r->pid = row->pid;
    r->started_at = row->started_at;
    r->ended_at = row->ended_at;
    r->resets = row->resets;
    r->dropped = row->dropped_events;
    r->argv = fmt_sanitize(row->argv);
    r->pid_gone = r->ended_at == 0 && r->pid > 0
                  && kill((pid_t)r->pid, 0) != 0 && errno == ESRCH;
}

static int read_runs(Model *m)
{
    free_runs(m);
    return store_read_runs(m->reader, run_add, m);
}

/* A refresh step's context: the model and whether anything changed. */
typedef struct Step {
    Model *m;
    bool changed;
} Step;

static void code_seen(void *ctx, const StoreCodeObjectRow *row)
{
    Step *s = ctx;
    long i = row_for(s->m, row->run_id, row->code_id);   /* may move rows[] */
    CodeRow *r = &s->m->rows[i];
    free(r->filename);
    free(r->name);
    free(r->where);
    r->filename = fmt_sanitize(row->filename);
    r->name = fmt_sanitize(row->name);
    r->firstlineno = row->firstlineno;
    r->where = xasprintf("%s:%d", r->filename, r->firstlineno);
    s->changed = true;
}

static int read_codes(Model *m, Step *s)
{
    if (store_read_new_code_objects(m->reader, m->run_id, m->mark.code, code_seen, s) < 0)
        return -1;
    return store_read_mark(m->reader, STORE_CODE_OBJECTS, &m->mark.code);
}

static void compile_seen(void *ctx, const StoreCompileRow *row)
{
    Step *s = ctx;
    long i = row_for(s->m, row->run_id, row->code_id);
    CodeRow *r = &s->m->rows[i];
    r->compiles++;
    if (row->frame_compile_id > 0) {
        r->recompiles++;
        if (row->started_at > r->last_recompile_at)
            r->last_recompile_at = row->started_at;
    }
    if (row->ended)
        r->capture_ns += row->duration_ns;
    else
        open_compile_add(s->m, row->compile_row, i);
    s->changed = true;
}

static int read_compiles(Model *m, Step *s)
{
    /* The compiles that had not ended: have they now? */
    for (size_t i = 0; i < m->nopen;) {
        bool ended;
        long long duration_ns;
        if (store_read_compile_end(m->reader, m->open_compiles[i], &ended, &duration_ns) < 0)
            return -1;
        if (!ended) {
            i++;
            continue;
        }
        m->rows[m->open_rows[i]].capture_ns += duration_ns;
        m->open_compiles[i] = m->open_compiles[m->nopen - 1];
        m->open_rows[i] = m->open_rows[m->nopen - 1];
        m->nopen--;
        s->changed = true;
    }
    if (store_read_new_compiles(m->reader, m->run_id, m->mark.compile, compile_seen, s) < 0)
        return -1;
    return store_read_mark(m->reader, STORE_COMPILES, &m->mark.compile);
}

/* A count step: which CodeRow field the counts add to. */
typedef struct CountStep {
    Step *step;
    StoreTable table;
    size_t field;
} CountStep;

static void count_seen(void *ctx, const StoreCountRow *row)
{
    CountStep *c = ctx;
    long i = row_for(c->step->m, row->run_id, row->code_id);   /* may move rows[] */
    CodeRow *r = &c->step->m->rows[i];
    *(long long *)((char *)r + c->field) += row->n;
    if (c->table == STORE_CACHE_LIMITS && row->max_epoch > r->limit_epoch)
        r->limit_epoch = row->max_epoch;
    c->step->changed = true;
}

/* Add the rows of `t` past *mark to one CodeRow field; move *mark.  A first
   load counts them all through the per-code index. */
static int read_counts(Model *m, Step *s, StoreTable t, long long *mark, size_t field)
{
    CountStep c = {s, t, field};
    long long since = m->loaded ? *mark : 0;
    if (store_read_counts(m->reader, t, m->run_id, since, count_seen, &c) < 0)
        return -1;
    return store_read_mark(m->reader, t, mark);
}

static int read_graphs_breaks_limits(Model *m, Step *s)
{
    if (read_counts(m, s, STORE_GRAPHS, &m->mark.graph, offsetof(CodeRow, graphs)) < 0
        || read_counts(m, s, STORE_GRAPH_BREAKS, &m->mark.brk, offsetof(CodeRow, breaks)) < 0
        || read_counts(m, s, STORE_CACHE_LIMITS, &m->mark.limit,
                       offsetof(CodeRow, limit_events)) < 0)
        return -1;
    return 0;
}

static void set_last_fail(CodeRow *r, long long id, const char *expr, const char *observed)
{
    if (id <= r->last_fail_id)
        return;
    r->last_fail_id = id;
    free(r->last_fail);
    char *s = xasprintf("%s (observed %s)", expr, *observed ? observed : "?");
    r->last_fail = fmt_sanitize(s);
    free(s);
}

static void last_failure_seen(void *ctx, const StoreFailureRow *row)
{
    Model *m = ctx;
    long i = row_for(m, row->run_id, row->code_id);   /* may move rows[] */
    set_last_fail(&m->rows[i], row->failure_id, row->expr, row->observed);
}

static void failure_seen(void *ctx, const StoreFailureRow *row)
{
    last_failure_seen(ctx, row);
    ((Model *)ctx)->failures++;
}

static int read_failures(Model *m, Step *s)
{
    long long max;
    if (store_read_mark(m->reader, STORE_GUARD_FAILURES, &max) < 0)
        return -1;
    if (max == m->mark.failure)
        return 0;
    s->changed = true;
    if (!m->loaded || max - m->mark.failure > BULK_FAILURES) {
        /* Count and find each code's newest failure through the indexes. */
        bool every_run = m->run_id == 0 || (m->nruns == 1 && m->runs[0].run_id == m->run_id);
        if (store_read_failure_count(m->reader, every_run ? 0 : m->run_id, &m->failures) < 0
            || store_read_last_failures(m->reader, m->run_id, last_failure_seen, m) < 0)
            return -1;
    }
    else if (store_read_new_failures(m->reader, m->run_id, m->mark.failure, failure_seen, m) < 0)
        return -1;
    m->mark.failure = max;
    return 0;
}

static void entry_seen(void *ctx, const StoreEntryRow *row)
{
    Step *s = ctx;
    long i = row_for(s->m, row->run_id, row->code_id);
    entry_add(s->m, i, row->epoch, row->compile_id, row->frame_id, row->hits);
    s->changed = true;
}

static void stats_seen(void *ctx, const StoreEntryRow *row)
{
    Step *s = ctx;
    long i = model_find(s->m, row->run_id, row->code_id);
    long e = i < 0 ? -1 : entry_find(s->m, i, row->epoch, row->compile_id);
    if (e >= 0) {
        s->m->entries[e].hits = row->hits;
        s->changed = true;
    }
}

static int read_entries(Model *m, Step *s)
{
    bool first = !m->loaded;
    if (store_read_new_entries(m->reader, m->run_id, m->mark.entry, entry_seen, s) < 0
        || store_read_mark(m->reader, STORE_CACHE_ENTRIES, &m->mark.entry) < 0)
        return -1;
    /* A first load's entries carry their newest counters: no snapshots to
       read, only their watermark. */
    if (!first && store_read_new_entry_stats(m->reader, m->run_id, m->mark.stats, stats_seen,
                                             s) < 0)
        return -1;
    return store_read_mark(m->reader, STORE_ENTRY_STATS, &m->mark.stats);
}

/* ---- aggregates ---- */

long long model_epoch(const Model *m, long long run_id)
{
    const RunInfo *r = model_run(m, run_id);
    return r ? r->resets : 0;
}

/* Entries, fullest frame and hits of one row, over its current epoch. */
static void row_entries(Model *m, CodeRow *r, long long epoch)
{
    long long frames[64], counts[64];
    int nframes = 0;
    r->entries = r->fullest = r->hits = 0;
    for (long e = r->entry_head; e >= 0; e = m->entries[e].next) {
        const EntryRec *en = &m->entries[e];
        if (en->epoch != epoch)
            continue;
        r->entries++;
        r->hits += en->hits;
        int f = 0;
        while (f < nframes && frames[f] != en->frame_id)
            f++;
        if (f == nframes && nframes < 64) {
            frames[nframes] = en->frame_id;
            counts[nframes++] = 0;
        }
        if (f < nframes && ++counts[f] > r->fullest)
            r->fullest = counts[f];
    }
}

/* Each run's cache limit: the option, else the default unless a frame of
   the run holds more entries (then the run used a larger one: unknown). */
static void run_limits(Model *m)
{
    for (size_t i = 0; i < m->nruns; i++)
        m->runs[i].cache_limit = m->cache_limit_opt > 0 ? m->cache_limit_opt
                                                        : TUI_DEFAULT_CACHE_LIMIT;
    if (m->cache_limit_opt > 0)
        return;
    for (size_t i = 0; i < m->nrows; i++) {
        RunInfo *run = (RunInfo *)model_run(m, m->rows[i].run_id);
        if (run != NULL && m->rows[i].fullest > TUI_DEFAULT_CACHE_LIMIT)
            run->cache_limit = 0;
    }
}

int model_cache_limit(const Model *m, long long run_id)
{
    const RunInfo *r = model_run(m, run_id);
    return r ? r->cache_limit : (m->cache_limit_opt > 0 ? m->cache_limit_opt
                                                        : TUI_DEFAULT_CACHE_LIMIT);
}

/* Rates over the last MODEL_RATE_WINDOW_S seconds of refreshes. */
static void rates(Model *m, const Totals *t)
{
    double now = tui_mono_s();
    if (m->nsamples == MODEL_SAMPLES) {
        memmove(m->samples, m->samples + 1, (MODEL_SAMPLES - 1) * sizeof m->samples[0]);
        m->nsamples--;
    }
    m->samples[m->nsamples].t = now;
    m->samples[m->nsamples].totals = *t;
    m->nsamples++;
    int old = 0;
    while (old < m->nsamples - 2 && now - m->samples[old].t > MODEL_RATE_WINDOW_S)
        old++;
    double dt = now - m->samples[old].t;
    m->rates.valid = m->nsamples > 1 && dt > 1e-3;
    if (!m->rates.valid)
        return;
    const Totals *o = &m->samples[old].totals;
    m->rates.compiles = (double)(t->compiles - o->compiles) / dt;
    m->rates.recompiles = (double)(t->recompiles - o->recompiles) / dt;
    m->rates.breaks = (double)(t->breaks - o->breaks) / dt;
    m->rates.guard_failures = (double)(t->guard_failures - o->guard_failures) / dt;
    m->rates.hits = (double)(t->hits - o->hits) / dt;
}

static void aggregate(Model *m)
{
    Totals t;
    memset(&t, 0, sizeof t);
    long long now = tui_wall_ns();
    for (size_t i = 0; i < m->nrows; i++)
        row_entries(m, &m->rows[i], model_epoch(m, m->rows[i].run_id));
    run_limits(m);
    for (size_t i = 0; i < m->nrows; i++) {
        CodeRow *r = &m->rows[i];
        long long epoch = model_epoch(m, r->run_id);
        int limit = model_cache_limit(m, r->run_id);
        r->misses = r->compiles + r->limit_events;
        r->at_limit = (limit > 0 && r->fullest >= limit)
                      || (r->limit_epoch >= 0 && r->limit_epoch == epoch);
        r->recent = r->last_recompile_at > 0 && now - r->last_recompile_at < TUI_RECENT_NS;
        t.code_objects++;
        t.compiles += r->compiles;
        t.recompiles += r->recompiles;
        t.graphs += r->graphs;
        t.breaks += r->breaks;
        t.hits += r->hits;
        t.misses += r->misses;
        t.capture_ns += r->capture_ns;
        t.entries += r->entries;
        t.at_limit += r->at_limit;
        t.limit_events += r->limit_events;
    }
    t.guard_failures = m->failures;
    for (size_t i = 0; i < m->nruns; i++)
        if (m->run_id == 0 || m->runs[i].run_id == m->run_id)
            t.dropped += m->runs[i].dropped;
    rates(m, &t);
    m->totals = t;
}

/* ---- open, refresh, close ---- */

static int reader_open(Model *m, char **errmsg)
{
    struct stat st;
    m->reader = store_reader_open(m->path, errmsg);
    if (m->reader == NULL)
        return -1;
    if (stat(m->path, &st) == 0) {
        m->dev = st.st_dev;
        m->ino = st.st_ino;
    }
    return 0;
}

static void reader_close(Model *m)
{
    store_reader_close(m->reader);
    m->reader = NULL;
}

int model_begin(Model *m)
{
    return m->reader != NULL ? store_read_begin(m->reader) : -1;
}

void model_end(Model *m)
{
    if (m->reader != NULL)
        store_read_end(m->reader);
}

/* Which run to show; a change of the newest run (when following it) drops
   the rows. */
static void pick_run(Model *m)
{
    long long want = m->run_pick;
    if (want == MODEL_RUN_NEWEST)
        want = m->nruns ? m->runs[m->nruns - 1].run_id : 0;
    if (want != m->run_id) {
        free_rows(m);
        m->run_id = want;
    }
}

/* The file we read: still there?  Replaced by another one (reopen)? */
static void check_file(Model *m)
{
    struct stat st;
    if (stat(m->path, &st) != 0) {
        m->gone = true;
        return;
    }
    m->gone = false;
    if (st.st_dev == m->dev && st.st_ino == m->ino && m->reader != NULL)
        return;
    char *err = NULL;
    reader_close(m);
    free_rows(m);
    if (reader_open(m, &err) < 0) {
        set_error(m, "%s", err ? err : "cannot reopen the database");
        free(err);
    }
}

static int refresh_steps(Model *m, Step *s)
{
    if (read_runs(m) < 0)
        return -1;
    long long before = m->run_id;
    pick_run(m);
    if (m->run_id != before)
        s->changed = true;
    if (read_codes(m, s) < 0 || read_compiles(m, s) < 0 || read_graphs_breaks_limits(m, s) < 0
        || read_failures(m, s) < 0 || read_entries(m, s) < 0)
        return -1;
    return 0;
}

int model_refresh(Model *m)
{
    double t0 = tui_mono_s();
    check_file(m);
    if (m->reader == NULL)
        return -1;
    Step s = {m, false};
    int rc = store_read_begin(m->reader);
    if (rc == 0)
        rc = refresh_steps(m, &s);
    if (rc < 0)
        set_error(m, "%s", store_reader_errmsg(m->reader));
    model_end(m);
    if (rc < 0) {
        if (!m->loaded)
            free_rows(m);    /* a half-done first load would count twice */
        return -1;
    }
    m->loaded = true;
    free(m->error);
    m->error = NULL;
    aggregate(m);
    if (s.changed)
        m->generation++;
    m->refreshes++;
    m->last_query_ms = (tui_mono_s() - t0) * 1e3;
    return 0;
}

int model_open(Model *m, const char *path, long long run_pick, int cache_limit, char **errmsg)
{
    memset(m, 0, sizeof *m);
    *errmsg = NULL;
    m->path = xstrdup(path);
    m->run_pick = run_pick;
    m->run_id = -1;          /* nothing picked yet */
    m->cache_limit_opt = cache_limit > 0 ? cache_limit : 0;
    if (reader_open(m, errmsg) < 0)
        goto out_close;
    if (model_refresh(m) < 0) {
        *errmsg = xstrdup(m->error ? m->error : "cannot read the database");
        goto out_close;
    }
    if (run_pick > 0 && model_run(m, run_pick) == NULL) {
        *errmsg = xasprintf("%s has no run %lld (it has %zu run%s)", path, run_pick,
                            m->nruns, m->nruns == 1 ? "" : "s");
        goto out_close;
    }
    return 0;

out_close:
    model_close(m);
    return -1;
}

void model_close(Model *m)
{
    reader_close(m);
    free_rows(m);
    free(m->rows);
    free(m->entries);
    free(m->open_compiles);
    free(m->open_rows);
    indexmap_done(&m->code_map);
    indexmap_done(&m->entry_map);
    free_runs(m);
    free(m->path);
    free(m->error);
    memset(m, 0, sizeof *m);
}

void model_forget(Model *m)
{
    free_rows(m);
}

const RunInfo *model_run(const Model *m, long long run_id)
{
    for (size_t i = 0; i < m->nruns; i++)
        if (m->runs[i].run_id == run_id)
            return &m->runs[i];
    return NULL;
}

bool model_live(const Model *m)
{
    for (size_t i = 0; i < m->nruns; i++) {
        const RunInfo *r = &m->runs[i];
        if ((m->run_id == 0 || r->run_id == m->run_id) && r->ended_at == 0 && !r->pid_gone)
            return true;
    }
    return false;
}

StoreReader *model_reader(const Model *m)
{
    return m->reader;
}

const char *model_read_error(const Model *m)
{
    return m->reader != NULL ? store_reader_errmsg(m->reader) : "database closed";
}
