/*
 * model.c -- dyntop's picture of one or several dynscope databases (a job's
 * ranks or hosts record a file each): per file its runs and one row of
 * aggregates per code object, and the header totals over every file, kept
 * up to date by polling.  Contract and invariants: tui.h (ModelFile,
 * Model); what it reads, and how: store/read.h (the read model); tables:
 * docs/sql.md.
 *
 * Each file is read through its own reader with its own watermarks, in its
 * own read transaction, and reloaded on its own (each file is written by
 * its own process): the rows of every file are shown together, each
 * tagged with its file and run, and the run's label ("rank 2") is
 * dynscope/ranks.py's.
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
 *
 * While the divergence between runs is wanted (several files, or the
 * divergence view opened: model_track_texts), each row also keeps its
 * distinct break reasons and failing guards (TextRec), read past their own
 * watermarks with SELECT DISTINCT: the first time the whole tables, then
 * only the new rows.
 */
#include "tui.h"
#include "../event/places.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* More new guard failures than this are counted with the grouped query. */
#define BULK_FAILURES 20000

static void set_error(ModelFile *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void set_error(ModelFile *f, const char *fmt, ...)
{
    va_list ap;
    char buf[512];
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    free(f->error);
    f->error = xstrdup(buf);
}

/* ---- rows, entries, texts (of one file) ---- */

typedef struct CodeKey {
    const ModelFile *f;
    long long run_id, code_id;
} CodeKey;

static bool code_eq(const void *ctx, size_t idx)
{
    const CodeKey *k = ctx;
    const CodeRow *r = &k->f->rows[idx];
    return r->run_id == k->run_id && r->code_id == k->code_id;
}

static long code_find(const ModelFile *f, long long run_id, long long code_id)
{
    CodeKey k = {f, run_id, code_id};
    size_t i = indexmap_find(&f->code_map, indexmap_hash2(run_id, code_id), code_eq, &k);
    return i == (size_t)-1 ? -1 : (long)i;
}

/* A refresh step's context: the model, the file it reads and whether
   anything changed. */
typedef struct Step {
    Model *m;
    ModelFile *f;
    int fi;                   /* f's index in m->files */
    bool changed;
} Step;

/* The row of (run_id, code_id), made (as "?") if the code_objects row has
   not been seen.  Cannot fail. */
static long row_for(Step *s, long long run_id, long long code_id)
{
    ModelFile *f = s->f;
    long i = code_find(f, run_id, code_id);
    if (i >= 0)
        return i;
    if (f->nrows == f->caprows) {
        f->caprows = f->caprows ? 2 * f->caprows : 256;
        f->rows = xrealloc(f->rows, f->caprows * sizeof *f->rows);
    }
    CodeRow *r = &f->rows[f->nrows];
    memset(r, 0, sizeof *r);
    r->file = s->fi;
    r->run_id = run_id;
    r->code_id = code_id;
    r->name = xstrdup("?");
    r->filename = xstrdup("?");
    r->where = xstrdup("?");
    r->last_fail = xstrdup("");
    r->limit_epoch = -1;
    r->entry_head = -1;
    r->text_head = -1;
    indexmap_add(&f->code_map, indexmap_hash2(run_id, code_id), f->nrows);
    return (long)f->nrows++;
}

typedef struct EntryKey {
    const ModelFile *f;
    long row;
    long long epoch;
    const char *cid;
} EntryKey;

static bool entry_eq(const void *ctx, size_t idx)
{
    const EntryKey *k = ctx;
    const EntryRec *e = &k->f->entries[idx];
    return e->row == k->row && e->epoch == k->epoch && strcmp(e->cid, k->cid) == 0;
}

static uint64_t entry_hash(long row, long long epoch, const char *cid)
{
    return indexmap_hash_str(indexmap_hash2(row, epoch), cid);
}

static long entry_find(const ModelFile *f, long row, long long epoch, const char *cid)
{
    char key[sizeof f->entries[0].cid];
    snprintf(key, sizeof key, "%s", cid);
    EntryKey k = {f, row, epoch, key};
    size_t i = indexmap_find(&f->entry_map, entry_hash(row, epoch, key), entry_eq, &k);
    return i == (size_t)-1 ? -1 : (long)i;
}

static void entry_add(ModelFile *f, long row, long long epoch, const char *cid,
                      long long frame_id, long long hits)
{
    long i = entry_find(f, row, epoch, cid);
    if (i >= 0) {
        f->entries[i].hits = hits;
        f->entries[i].frame_id = frame_id;
        return;
    }
    if (f->nentries == f->capentries) {
        f->capentries = f->capentries ? 2 * f->capentries : 256;
        f->entries = xrealloc(f->entries, f->capentries * sizeof *f->entries);
    }
    EntryRec *e = &f->entries[f->nentries];
    e->row = row;
    e->epoch = epoch;
    snprintf(e->cid, sizeof e->cid, "%s", cid);
    e->frame_id = frame_id;
    e->hits = hits;
    e->next = f->rows[row].entry_head;
    f->rows[row].entry_head = (long)f->nentries;
    indexmap_add(&f->entry_map, entry_hash(row, epoch, e->cid), f->nentries);
    f->nentries++;
}

typedef struct TextKey {
    const ModelFile *f;
    long row;
    char kind;
    const char *text;
} TextKey;

static bool text_eq(const void *ctx, size_t idx)
{
    const TextKey *k = ctx;
    const TextRec *t = &k->f->texts[idx];
    return t->row == k->row && t->kind == k->kind && strcmp(t->text, k->text) == 0;
}

/* Add a distinct text of a row (a text it already has is left alone). */
static bool text_add(ModelFile *f, long row, char kind, const char *text)
{
    uint64_t h = indexmap_hash_str(indexmap_hash2(row, kind), text);
    TextKey k = {f, row, kind, text};
    if (indexmap_find(&f->text_map, h, text_eq, &k) != (size_t)-1)
        return false;
    if (f->ntexts == f->captexts) {
        f->captexts = f->captexts ? 2 * f->captexts : 64;
        f->texts = xrealloc(f->texts, f->captexts * sizeof *f->texts);
    }
    TextRec *t = &f->texts[f->ntexts];
    t->row = row;
    t->kind = kind;
    t->text = xstrdup(text);
    t->next = f->rows[row].text_head;
    f->rows[row].text_head = (long)f->ntexts;
    indexmap_add(&f->text_map, h, f->ntexts);
    f->ntexts++;
    return true;
}

static void open_compile_add(ModelFile *f, long long compile_row, long row)
{
    if (f->nopen == f->capopen) {
        f->capopen = f->capopen ? 2 * f->capopen : 16;
        f->open_compiles = xrealloc(f->open_compiles, f->capopen * sizeof *f->open_compiles);
        f->open_rows = xrealloc(f->open_rows, f->capopen * sizeof *f->open_rows);
    }
    f->open_compiles[f->nopen] = compile_row;
    f->open_rows[f->nopen] = row;
    f->nopen++;
}

/* Drop a file's rows (its next refresh is a full load).  The samples go
   too: the totals they hold counted these rows. */
static void free_rows(Model *m, ModelFile *f)
{
    for (size_t i = 0; i < f->nrows; i++) {
        free(f->rows[i].name);
        free(f->rows[i].filename);
        free(f->rows[i].where);
        free(f->rows[i].last_fail);
    }
    for (size_t i = 0; i < f->ntexts; i++)
        free(f->texts[i].text);
    f->nrows = 0;
    f->nentries = 0;
    f->ntexts = 0;
    f->nopen = 0;
    indexmap_clear(&f->code_map);
    indexmap_clear(&f->entry_map);
    indexmap_clear(&f->text_map);
    memset(&f->mark, 0, sizeof f->mark);
    f->failures = 0;
    f->loaded = false;
    m->nsamples = 0;
    m->rates.valid = false;
    m->generation++;
}

static void free_runs(ModelFile *f)
{
    for (size_t i = 0; i < f->nruns; i++) {
        free(f->runs[i].argv);
        free(f->runs[i].hostname);
        free(f->runs[i].last_mark);
    }
    free(f->runs);
    f->runs = NULL;
    f->nruns = f->capruns = 0;
}

/* ---- runs and who they are ---- */

/* This host's name ("" if unknown), looked up once. */
static const char *local_host(void)
{
    static char host[256];
    static bool known;
    if (!known) {
        if (gethostname(host, sizeof host - 1) != 0)
            host[0] = '\0';
        known = true;
    }
    return host;
}

/* dynscope/ranks.py run_labels: "rank R", else "pid P@host", else "pid P". */
static void make_label(RunInfo *r)
{
    if (r->has_rank)
        snprintf(r->label, sizeof r->label, "rank %lld", r->rank);
    else if (r->hostname[0])
        snprintf(r->label, sizeof r->label, "pid %lld@%s", r->pid, r->hostname);
    else
        snprintf(r->label, sizeof r->label, "pid %lld", r->pid);
}

static void run_add(void *ctx, const StoreRunRow *row)
{
    ModelFile *f = ctx;
    if (f->nruns == f->capruns) {
        f->capruns = f->capruns ? 2 * f->capruns : 4;
        f->runs = xrealloc(f->runs, f->capruns * sizeof *f->runs);
    }
    RunInfo *r = &f->runs[f->nruns++];
    memset(r, 0, sizeof *r);
    r->run_id = row->run_id;
    r->pid = row->pid;
    r->started_at = row->started_at;
    r->ended_at = row->ended_at;
    r->resets = row->resets;
    r->dropped = row->dropped_events;
    r->argv = fmt_sanitize(row->argv);
    r->hostname = fmt_sanitize(row->hostname);
    r->last_mark = fmt_sanitize(row->last_mark);
    r->last_mark_at = row->last_mark_at;
    r->has_rank = row->has_rank;
    r->rank = row->rank;
    r->local_rank = row->local_rank;
    r->world_size = row->world_size;
    make_label(r);
    /* A pid says nothing about a process of another host. */
    bool here = r->hostname[0] == '\0' || strcmp(r->hostname, local_host()) == 0;
    r->pid_gone = here && r->ended_at == 0 && r->pid > 0
                  && kill((pid_t)r->pid, 0) != 0 && errno == ESRCH;
}

static int read_runs(ModelFile *f)
{
    free_runs(f);
    return store_read_runs(f->reader, run_add, f);
}

/* ---- the steps of a refresh; each returns 0 or -1 (the reader's error) ---- */

static void code_seen(void *ctx, const StoreCodeObjectRow *row)
{
    Step *s = ctx;
    long i = row_for(s, row->run_id, row->code_id);   /* may move rows[] */
    CodeRow *r = &s->f->rows[i];
    free(r->filename);
    free(r->name);
    free(r->where);
    r->filename = fmt_sanitize(row->filename);
    r->name = fmt_sanitize(row->name);
    r->firstlineno = row->firstlineno;
    r->where = xasprintf("%s:%d", place_readable(r->filename), r->firstlineno);
    s->changed = true;
}

static int read_codes(ModelFile *f, Step *s)
{
    if (store_read_new_code_objects(f->reader, f->run_id, f->mark.code, code_seen, s) < 0)
        return -1;
    return store_read_mark(f->reader, STORE_CODE_OBJECTS, &f->mark.code);
}

static void compile_seen(void *ctx, const StoreCompileRow *row)
{
    Step *s = ctx;
    long i = row_for(s, row->run_id, row->code_id);
    CodeRow *r = &s->f->rows[i];
    r->compiles++;
    if (row->frame_compile_id > 0) {
        r->recompiles++;
        if (row->started_at > r->last_recompile_at)
            r->last_recompile_at = row->started_at;
    }
    if (row->ended) {
        r->capture_ns += row->duration_ns;
        r->graphs_made += row->graphs;
    }
    else
        open_compile_add(s->f, row->compile_row, i);
    s->changed = true;
}

static int read_compiles(ModelFile *f, Step *s)
{
    /* The compiles that had not ended: have they now? */
    for (size_t i = 0; i < f->nopen;) {
        bool ended;
        long long duration_ns, graphs;
        if (store_read_compile_end(f->reader, f->open_compiles[i], &ended, &duration_ns,
                                   &graphs) < 0)
            return -1;
        if (!ended) {
            i++;
            continue;
        }
        f->rows[f->open_rows[i]].capture_ns += duration_ns;
        f->rows[f->open_rows[i]].graphs_made += graphs;
        f->open_compiles[i] = f->open_compiles[f->nopen - 1];
        f->open_rows[i] = f->open_rows[f->nopen - 1];
        f->nopen--;
        s->changed = true;
    }
    if (store_read_new_compiles(f->reader, f->run_id, f->mark.compile, compile_seen, s) < 0)
        return -1;
    return store_read_mark(f->reader, STORE_COMPILES, &f->mark.compile);
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
    long i = row_for(c->step, row->run_id, row->code_id);   /* may move rows[] */
    CodeRow *r = &c->step->f->rows[i];
    *(long long *)((char *)r + c->field) += row->n;
    if (c->table == STORE_CACHE_LIMITS && row->max_epoch > r->limit_epoch)
        r->limit_epoch = row->max_epoch;
    c->step->changed = true;
}

/* Add the rows of `t` past *mark to one CodeRow field; move *mark.  A first
   load counts them all through the per-code index. */
static int read_counts(ModelFile *f, Step *s, StoreTable t, long long *mark, size_t field)
{
    CountStep c = {s, t, field};
    long long since = f->loaded ? *mark : 0;
    if (store_read_counts(f->reader, t, f->run_id, since, count_seen, &c) < 0)
        return -1;
    return store_read_mark(f->reader, t, mark);
}

static int read_graphs_breaks_limits(ModelFile *f, Step *s)
{
    if (read_counts(f, s, STORE_GRAPHS, &f->mark.graph, offsetof(CodeRow, graphs)) < 0
        || read_counts(f, s, STORE_GRAPH_BREAKS, &f->mark.brk, offsetof(CodeRow, breaks)) < 0
        || read_counts(f, s, STORE_CACHE_LIMITS, &f->mark.limit,
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
    Step *s = ctx;
    long i = row_for(s, row->run_id, row->code_id);   /* may move rows[] */
    set_last_fail(&s->f->rows[i], row->failure_id, row->expr, row->observed);
}

static void failure_seen(void *ctx, const StoreFailureRow *row)
{
    last_failure_seen(ctx, row);
    ((Step *)ctx)->f->failures++;
}

static int read_failures(ModelFile *f, Step *s)
{
    long long max;
    if (store_read_mark(f->reader, STORE_GUARD_FAILURES, &max) < 0)
        return -1;
    if (max == f->mark.failure)
        return 0;
    s->changed = true;
    if (!f->loaded || max - f->mark.failure > BULK_FAILURES) {
        /* Count and find each code's newest failure through the indexes. */
        bool every_run = f->run_id == 0 || (f->nruns == 1 && f->runs[0].run_id == f->run_id);
        if (store_read_failure_count(f->reader, every_run ? 0 : f->run_id, &f->failures) < 0
            || store_read_last_failures(f->reader, f->run_id, last_failure_seen, s) < 0)
            return -1;
    }
    else if (store_read_new_failures(f->reader, f->run_id, f->mark.failure, failure_seen,
                                     s) < 0)
        return -1;
    f->mark.failure = max;
    return 0;
}

static void entry_seen(void *ctx, const StoreEntryRow *row)
{
    Step *s = ctx;
    long i = row_for(s, row->run_id, row->code_id);
    entry_add(s->f, i, row->epoch, row->compile_id, row->frame_id, row->hits);
    s->changed = true;
}

static void stats_seen(void *ctx, const StoreEntryRow *row)
{
    Step *s = ctx;
    long i = code_find(s->f, row->run_id, row->code_id);
    long e = i < 0 ? -1 : entry_find(s->f, i, row->epoch, row->compile_id);
    if (e >= 0) {
        s->f->entries[e].hits = row->hits;
        s->changed = true;
    }
}

static int read_entries(ModelFile *f, Step *s)
{
    bool first = !f->loaded;
    if (store_read_new_entries(f->reader, f->run_id, f->mark.entry, entry_seen, s) < 0
        || store_read_mark(f->reader, STORE_CACHE_ENTRIES, &f->mark.entry) < 0)
        return -1;
    /* A first load's entries carry their newest counters: no snapshots to
       read, only their watermark. */
    if (!first && store_read_new_entry_stats(f->reader, f->run_id, f->mark.stats, stats_seen,
                                             s) < 0)
        return -1;
    return store_read_mark(f->reader, STORE_ENTRY_STATS, &f->mark.stats);
}

/* A text step: which kind of text the rows are. */
typedef struct TextStep {
    Step *step;
    char kind;
} TextStep;

static void text_seen(void *ctx, const StoreTextRow *row)
{
    TextStep *t = ctx;
    long i = row_for(t->step, row->run_id, row->code_id);
    if (text_add(t->step->f, i, t->kind, row->text))
        t->step->changed = true;
}

/* The distinct break reasons and failing guards past their watermarks
   (from 0 the first time: the whole tables, once). */
static int read_texts(ModelFile *f, Step *s)
{
    TextStep b = {s, TEXT_BREAK}, g = {s, TEXT_GUARD};
    long long bmark, gmark;
    /* The watermarks first: a row committed between the two reads is read
       again next time, never missed (text_add keeps each text once). */
    if (store_read_mark(f->reader, STORE_GRAPH_BREAKS, &bmark) < 0
        || store_read_mark(f->reader, STORE_GUARD_FAILURES, &gmark) < 0)
        return -1;
    if (bmark != f->mark.brk_text
        && store_read_new_texts(f->reader, STORE_GRAPH_BREAKS, f->run_id, f->mark.brk_text,
                                text_seen, &b) < 0)
        return -1;
    if (gmark != f->mark.fail_text
        && store_read_new_texts(f->reader, STORE_GUARD_FAILURES, f->run_id, f->mark.fail_text,
                                text_seen, &g) < 0)
        return -1;
    f->mark.brk_text = bmark;
    f->mark.fail_text = gmark;
    return 0;
}

/* ---- aggregates ---- */

long long model_epoch(const Model *m, size_t file, long long run_id)
{
    const RunInfo *r = model_run(m, file, run_id);
    return r ? r->resets : 0;
}

/* Entries, fullest frame and hits of one row, over its current epoch. */
static void row_entries(const ModelFile *f, CodeRow *r, long long epoch)
{
    long long frames[64], counts[64];
    int nframes = 0;
    r->entries = r->fullest = r->hits = 0;
    for (long e = r->entry_head; e >= 0; e = f->entries[e].next) {
        const EntryRec *en = &f->entries[e];
        if (en->epoch != epoch)
            continue;
        r->entries++;
        r->hits += en->hits;
        int k = 0;
        while (k < nframes && frames[k] != en->frame_id)
            k++;
        if (k == nframes && nframes < 64) {
            frames[nframes] = en->frame_id;
            counts[nframes++] = 0;
        }
        if (k < nframes && ++counts[k] > r->fullest)
            r->fullest = counts[k];
    }
}

/* Each run's cache limit: the option, else the default unless a frame of
   the run holds more entries (then the run used a larger one: unknown). */
static void run_limits(const Model *m, ModelFile *f)
{
    for (size_t i = 0; i < f->nruns; i++)
        f->runs[i].cache_limit = m->cache_limit_opt > 0 ? m->cache_limit_opt
                                                        : TUI_DEFAULT_CACHE_LIMIT;
    if (m->cache_limit_opt > 0)
        return;
    for (size_t i = 0; i < f->nrows; i++)
        for (size_t k = 0; k < f->nruns; k++)
            if (f->runs[k].run_id == f->rows[i].run_id
                && f->rows[i].fullest > TUI_DEFAULT_CACHE_LIMIT)
                f->runs[k].cache_limit = 0;
}

int model_cache_limit(const Model *m, size_t file, long long run_id)
{
    const RunInfo *r = model_run(m, file, run_id);
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

bool model_run_shown(const ModelFile *f, const RunInfo *r)
{
    return f->run_id == 0 || r->run_id == f->run_id;
}

/* The rows' flags and the totals of one file, added to *t. */
static void aggregate_file(const Model *m, size_t fi, Totals *t, long long now)
{
    ModelFile *f = &m->files[fi];
    for (size_t i = 0; i < f->nrows; i++)
        row_entries(f, &f->rows[i], model_epoch(m, fi, f->rows[i].run_id));
    run_limits(m, f);
    for (size_t i = 0; i < f->nrows; i++) {
        CodeRow *r = &f->rows[i];
        long long epoch = model_epoch(m, fi, r->run_id);
        int limit = model_cache_limit(m, fi, r->run_id);
        r->misses = r->compiles + r->limit_events;
        r->at_limit = (limit > 0 && r->fullest >= limit)
                      || (r->limit_epoch >= 0 && r->limit_epoch == epoch);
        r->recent = r->last_recompile_at > 0 && now - r->last_recompile_at < TUI_RECENT_NS;
        t->code_objects++;
        t->compiles += r->compiles;
        t->recompiles += r->recompiles;
        t->graphs += r->graphs;
        t->breaks += r->breaks;
        t->hits += r->hits;
        t->misses += r->misses;
        t->capture_ns += r->capture_ns;
        t->entries += r->entries;
        t->at_limit += r->at_limit;
        t->limit_events += r->limit_events;
    }
    t->guard_failures += f->failures;
    for (size_t i = 0; i < f->nruns; i++)
        if (model_run_shown(f, &f->runs[i]))
            t->dropped += f->runs[i].dropped;
}

static int cmp_strptr(const void *pa, const void *pb)
{
    return strcmp(*(const char *const *)pa, *(const char *const *)pb);
}

/* Distinct hosts of the shown runs (for the HOST column). */
static size_t count_hosts(const Model *m)
{
    size_t total = 0, n = 0, distinct = 0;
    for (size_t fi = 0; fi < m->nfiles; fi++)
        total += m->files[fi].nruns;
    const char **hosts = xcalloc(total + 1, sizeof *hosts);
    for (size_t fi = 0; fi < m->nfiles; fi++) {
        const ModelFile *f = &m->files[fi];
        for (size_t i = 0; i < f->nruns; i++)
            if (model_run_shown(f, &f->runs[i]) && f->runs[i].hostname[0] != '\0')
                hosts[n++] = f->runs[i].hostname;
    }
    qsort(hosts, n, sizeof *hosts, cmp_strptr);
    for (size_t i = 0; i < n; i++)
        distinct += i == 0 || strcmp(hosts[i - 1], hosts[i]) != 0;
    free(hosts);
    return distinct;
}

static void aggregate(Model *m)
{
    Totals t;
    memset(&t, 0, sizeof t);
    long long now = tui_wall_ns();
    for (size_t fi = 0; fi < m->nfiles; fi++)
        aggregate_file(m, fi, &t, now);
    m->nhosts = count_hosts(m);
    rates(m, &t);
    m->totals = t;
}

/* ---- open, refresh, close (one file) ---- */

static int reader_open(ModelFile *f, char **errmsg)
{
    struct stat st;
    f->reader = store_reader_open(f->path, errmsg);
    if (f->reader == NULL)
        return -1;
    if (stat(f->path, &st) == 0) {
        f->dev = st.st_dev;
        f->ino = st.st_ino;
    }
    return 0;
}

static void reader_close(ModelFile *f)
{
    store_reader_close(f->reader);
    f->reader = NULL;
    f->parked = false;
}

/* Close a file's reader between reads when there are too many files
   (MODEL_OPEN_MAX): what it read stays. */
static void park(const Model *m, ModelFile *f)
{
    if (m->nfiles <= MODEL_OPEN_MAX || f->reader == NULL)
        return;
    store_reader_close(f->reader);
    f->reader = NULL;
    f->parked = true;
}

/* A parked file's reader, opened again (the same file: dev and inode).
   0, or -1 with f->error set. */
static int unpark(ModelFile *f)
{
    if (f->reader != NULL || !f->parked)
        return f->reader != NULL ? 0 : -1;
    char *err = NULL;
    f->reader = store_reader_open(f->path, &err);
    if (f->reader == NULL) {
        set_error(f, "%s", err ? err : "cannot open the database");
        free(err);
        return -1;
    }
    f->parked = false;
    return 0;
}

/* The file's and its WAL's mtime and size: what a new write changes. */
static void signature(const ModelFile *f, long long sig[4])
{
    struct stat st;
    char wal[4096];
    memset(sig, 0, 4 * sizeof *sig);
    if (stat(f->path, &st) == 0) {
        sig[0] = (long long)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
        sig[1] = (long long)st.st_size;
    }
    snprintf(wal, sizeof wal, "%s-wal", f->path);
    if (stat(wal, &st) == 0) {
        sig[2] = (long long)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
        sig[3] = (long long)st.st_size;
    }
}

int model_begin(Model *m, size_t file)
{
    ModelFile *f = &m->files[file];
    if (unpark(f) < 0)
        return -1;
    return store_read_begin(f->reader);
}

void model_end(Model *m, size_t file)
{
    ModelFile *f = &m->files[file];
    if (f->reader != NULL)
        store_read_end(f->reader);
    park(m, f);
}

/* Which run to show; a change of the newest run (when following it) drops
   the file's rows. */
static void pick_run(Model *m, ModelFile *f)
{
    long long want = m->run_pick;
    if (want == MODEL_RUN_NEWEST)
        want = f->nruns ? f->runs[f->nruns - 1].run_id : 0;
    if (want != f->run_id) {
        free_rows(m, f);
        f->run_id = want;
    }
}

/* The file we read: still there?  Replaced by another one (reopen)? */
static void check_file(Model *m, ModelFile *f)
{
    struct stat st;
    if (stat(f->path, &st) != 0) {
        f->gone = true;
        return;
    }
    f->gone = false;
    if (st.st_dev == f->dev && st.st_ino == f->ino && (f->reader != NULL || f->parked))
        return;
    char *err = NULL;
    reader_close(f);
    free_rows(m, f);
    if (reader_open(f, &err) < 0) {
        set_error(f, "%s", err ? err : "cannot reopen the database");
        free(err);
    }
}

static int refresh_steps(ModelFile *f, Step *s)
{
    if (read_runs(f) < 0)
        return -1;
    long long before = f->run_id;
    pick_run(s->m, f);
    if (f->run_id != before)
        s->changed = true;
    if (read_codes(f, s) < 0 || read_compiles(f, s) < 0 || read_graphs_breaks_limits(f, s) < 0
        || read_failures(f, s) < 0 || read_entries(f, s) < 0)
        return -1;
    if (s->m->track_texts && read_texts(f, s) < 0)
        return -1;
    return 0;
}

/* Refresh one file in one read transaction.  0, or -1 with f->error set;
   *changed is set when its rows or counts changed. */
static int refresh_file(Model *m, size_t fi, bool *changed)
{
    ModelFile *f = &m->files[fi];
    check_file(m, f);
    if (f->gone && f->parked && f->loaded)
        return 0;                       /* deleted: what was read stays shown, as an open file's */
    long long sig[4];
    signature(f, sig);
    if (f->parked && f->loaded && f->error == NULL && memcmp(sig, f->seen, sizeof sig) == 0) {
        for (size_t i = 0; i < f->nruns; i++)     /* a live run's process may have died */
            if (f->runs[i].ended_at == 0)
                goto read;
        return 0;                                  /* nothing new: not even opened */
    }
read:
    if (unpark(f) < 0 || f->reader == NULL)
        return -1;
    memcpy(f->seen, sig, sizeof sig);   /* taken before reading: a write during it is read next time */
    Step s = {m, f, (int)fi, false};
    int rc = store_read_begin(f->reader);
    if (rc == 0)
        rc = refresh_steps(f, &s);
    if (rc < 0)
        set_error(f, "%s", store_reader_errmsg(f->reader));
    store_read_end(f->reader);
    park(m, f);
    if (rc < 0) {
        if (!f->loaded)
            free_rows(m, f);    /* a half-done first load would count twice */
        return -1;
    }
    f->loaded = true;
    free(f->error);
    f->error = NULL;
    *changed |= s.changed;
    return 0;
}

/* ---- the model: every file ---- */

int model_refresh(Model *m)
{
    double t0 = tui_mono_s();
    bool changed = false;
    size_t ok = 0;
    for (size_t fi = 0; fi < m->nfiles; fi++)
        ok += refresh_file(m, fi, &changed) == 0;
    if (ok == 0)              /* nothing new: the previous picture stays */
        return -1;
    aggregate(m);
    if (changed)
        m->generation++;
    m->refreshes++;
    m->last_query_ms = (tui_mono_s() - t0) * 1e3;
    return ok == m->nfiles ? 0 : -1;
}

int model_track_texts(Model *m)
{
    if (m->track_texts)
        return 0;
    m->track_texts = true;
    int rc = 0;
    bool changed = false;
    for (size_t fi = 0; fi < m->nfiles; fi++) {
        ModelFile *f = &m->files[fi];
        if (!f->loaded || (f->reader == NULL && !f->parked))
            continue;             /* its next (full) load reads them */
        if (unpark(f) < 0) {
            rc = -1;
            continue;
        }
        Step s = {m, f, (int)fi, false};
        int frc = store_read_begin(f->reader);
        if (frc == 0)
            frc = read_texts(f, &s);
        store_read_end(f->reader);
        if (frc < 0) {
            set_error(f, "%s", store_reader_errmsg(f->reader));
            f->mark.brk_text = f->mark.fail_text = 0;   /* read them all again */
            rc = -1;
        }
        park(m, f);
        changed |= s.changed;
    }
    if (changed)
        m->generation++;
    return rc;
}

/* The same file given twice (by device and inode)?  Then *errmsg. */
static int check_distinct(const Model *m, char **errmsg)
{
    for (size_t i = 0; i < m->nfiles; i++)
        for (size_t j = 0; j < i; j++)
            if (m->files[i].dev == m->files[j].dev && m->files[i].ino == m->files[j].ino) {
                *errmsg = xasprintf("%s and %s are the same file: give each database once",
                                    m->files[j].path, m->files[i].path);
                return -1;
            }
    return 0;
}

int model_open(Model *m, const char *const *paths, size_t npaths, long long run_pick,
               int cache_limit, char **errmsg)
{
    memset(m, 0, sizeof *m);
    *errmsg = NULL;
    TUI_ASSERT(npaths > 0);
    m->files = xcalloc(npaths, sizeof *m->files);
    m->nfiles = npaths;
    m->run_pick = run_pick;
    m->cache_limit_opt = cache_limit > 0 ? cache_limit : 0;
    /* Several files are a job's ranks: what differs between them is the point. */
    m->track_texts = npaths > 1;
    for (size_t i = 0; i < npaths; i++) {
        m->files[i].path = xstrdup(paths[i]);
        m->files[i].run_id = -1;          /* nothing picked yet */
    }
    for (size_t i = 0; i < npaths; i++) {
        ModelFile *f = &m->files[i];
        if (npaths <= MODEL_OPEN_MAX) {
            if (reader_open(f, errmsg) < 0)
                goto out_close;
            continue;
        }
        /* A thousand ranks: each is opened by its first read (which says why
           one cannot be); here only which file it is. */
        struct stat st;
        if (stat(f->path, &st) != 0) {
            *errmsg = xasprintf("cannot open %s: %s", f->path, strerror(errno));
            goto out_close;
        }
        f->dev = st.st_dev;
        f->ino = st.st_ino;
        f->parked = true;
    }
    if (check_distinct(m, errmsg) < 0)
        goto out_close;
    if (model_refresh(m) < 0) {
        for (size_t i = 0; i < npaths && *errmsg == NULL; i++)
            if (m->files[i].error != NULL)
                *errmsg = xstrdup(m->files[i].error);
        if (*errmsg == NULL)
            *errmsg = xstrdup("cannot read the database");
        goto out_close;
    }
    for (size_t i = 0; i < npaths; i++) {
        const ModelFile *f = &m->files[i];
        if (run_pick > 0 && model_run(m, i, run_pick) == NULL) {
            *errmsg = xasprintf("%s has no run %lld (it has %zu run%s)", f->path, run_pick,
                                f->nruns, f->nruns == 1 ? "" : "s");
            goto out_close;
        }
    }
    return 0;

out_close:
    model_close(m);
    return -1;
}

void model_close(Model *m)
{
    for (size_t i = 0; i < m->nfiles; i++) {
        ModelFile *f = &m->files[i];
        reader_close(f);
        free_rows(m, f);
        free(f->rows);
        free(f->entries);
        free(f->texts);
        free(f->open_compiles);
        free(f->open_rows);
        indexmap_done(&f->code_map);
        indexmap_done(&f->entry_map);
        indexmap_done(&f->text_map);
        free_runs(f);
        free(f->path);
        free(f->error);
    }
    free(m->files);
    memset(m, 0, sizeof *m);
}

void model_forget(Model *m)
{
    for (size_t i = 0; i < m->nfiles; i++)
        free_rows(m, &m->files[i]);
}

/* ---- lookups ---- */

size_t model_nrows(const Model *m)
{
    size_t n = 0;
    for (size_t i = 0; i < m->nfiles; i++)
        n += m->files[i].nrows;
    return n;
}

long model_ref(const Model *m, size_t file, size_t idx)
{
    return (long)(idx * m->nfiles + file);
}

const CodeRow *model_row(const Model *m, long ref)
{
    size_t file = (size_t)ref % m->nfiles, idx = (size_t)ref / m->nfiles;
    TUI_ASSERT(ref >= 0 && idx < m->files[file].nrows);
    return &m->files[file].rows[idx];
}

const CodeRow *model_code(const Model *m, size_t file, long long run_id, long long code_id)
{
    if (file >= m->nfiles)
        return NULL;
    long i = code_find(&m->files[file], run_id, code_id);
    return i >= 0 ? &m->files[file].rows[i] : NULL;
}

const RunInfo *model_run(const Model *m, size_t file, long long run_id)
{
    if (file >= m->nfiles)
        return NULL;
    const ModelFile *f = &m->files[file];
    for (size_t i = 0; i < f->nruns; i++)
        if (f->runs[i].run_id == run_id)
            return &f->runs[i];
    return NULL;
}

const char *model_label(const Model *m, const CodeRow *r)
{
    const RunInfo *run = model_run(m, (size_t)r->file, r->run_id);
    return run ? run->label : "?";
}

int model_label_cmp(const RunInfo *a, const RunInfo *b)
{
    if (a->has_rank != b->has_rank)
        return a->has_rank ? -1 : 1;
    if (a->has_rank)
        return a->rank < b->rank ? -1 : a->rank > b->rank;
    return strcmp(a->label, b->label);
}

bool model_live(const Model *m)
{
    for (size_t fi = 0; fi < m->nfiles; fi++) {
        const ModelFile *f = &m->files[fi];
        for (size_t i = 0; i < f->nruns; i++) {
            const RunInfo *r = &f->runs[i];
            if (model_run_shown(f, r) && r->ended_at == 0 && !r->pid_gone)
                return true;
        }
    }
    return false;
}

size_t model_shown_runs(const Model *m)
{
    size_t n = 0;
    for (size_t fi = 0; fi < m->nfiles; fi++)
        for (size_t i = 0; i < m->files[fi].nruns; i++)
            n += model_run_shown(&m->files[fi], &m->files[fi].runs[i]);
    return n;
}

StoreReader *model_reader(const Model *m, size_t file)
{
    return file < m->nfiles ? m->files[file].reader : NULL;
}

const char *model_read_error(const Model *m, size_t file)
{
    StoreReader *r = model_reader(m, file);
    return r != NULL ? store_reader_errmsg(r) : "database closed";
}
