/*
 * diverge.c -- the divergence between runs (a job's ranks, a file each):
 * the functions whose compile count, graph count, set of break reasons or
 * set of failing guards differ between the runs that reached them, with
 * the odd runs named -- on a distributed job the likeliest cause of a hang
 * (one rank recompiles or breaks where the others do not, and the
 * collectives stop matching).  The rule is dynscope/ranks.py's, to the
 * letter, so `python -m dynscope report FILE...` and dyntop name the same
 * functions and runs:
 *   - a run is named by its label (RunInfo.label: "rank R", else
 *     "pid P@host"); runs with the same label count once (the last one
 *     read, in file order, then run and code id order);
 *   - a function is the same in every run when its qualified name, file
 *     and first line are;
 *   - it diverges when two runs that reached it differ in compiles (rows of
 *     compiles), graphs (sum of compiles.graphs), the set of break reasons
 *     ("kind: reason") or the set of failing guards (expressions); the odd
 *     runs are those outside the largest group of runs that agree (ties:
 *     the group with the lowest run in label order is the norm);
 *   - a function only some runs reached is not a divergence by itself.
 * The numbers come from the model's rows, the sets from the texts it keeps
 * while tracking them (model_track_texts), so the result is recomputed
 * from memory at each refresh.  Shown by the divergence view (`v`, a
 * selectable pager) and by batch mode's "Divergence" section.  Contract:
 * tui.h; manual: docs/dyntop.md.
 */
#include "tui.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S(c) TUI_STYLE(c)
/* Extra or missing texts listed under an odd run in the view. */
#define VIEW_TEXTS 4
/* A run's label takes at most this many columns in the view. */
#define LABEL_COLS 24

/* ---- gathering: one item per (code object row) ---- */

typedef struct Item {
    const CodeRow *row;
    const RunInfo *run;
    size_t seq;               /* ranks.py's reading order: file, run, code id */
    size_t fn;                /* its function, once known */
} Item;

static int cmp_seq(const void *pa, const void *pb)
{
    const Item *a = pa, *b = pb;
    if (a->row->file != b->row->file)
        return a->row->file - b->row->file;
    if (a->row->run_id != b->row->run_id)
        return a->row->run_id < b->row->run_id ? -1 : 1;
    return (a->row->code_id > b->row->code_id) - (a->row->code_id < b->row->code_id);
}

/* By function (file, line, name), then reading order. */
static int cmp_function(const void *pa, const void *pb)
{
    const Item *a = pa, *b = pb;
    int r = strcmp(a->row->filename, b->row->filename);
    if (r == 0)
        r = (a->row->firstlineno > b->row->firstlineno) - (a->row->firstlineno < b->row->firstlineno);
    if (r == 0)
        r = strcmp(a->row->name, b->row->name);
    if (r == 0)
        r = (a->seq > b->seq) - (a->seq < b->seq);
    return r;
}

static bool same_function(const CodeRow *a, const CodeRow *b)
{
    return a->firstlineno == b->firstlineno && strcmp(a->name, b->name) == 0
           && strcmp(a->filename, b->filename) == 0;
}

/* The rows of every shown run, each with its run, in reading order. */
static Item *gather(const Model *m, size_t *n)
{
    Item *items = xcalloc(model_nrows(m) + 1, sizeof *items);
    *n = 0;
    for (size_t fi = 0; fi < m->nfiles; fi++)
        for (size_t i = 0; i < m->files[fi].nrows; i++) {
            const CodeRow *r = &m->files[fi].rows[i];
            const RunInfo *run = model_run(m, fi, r->run_id);
            if (run != NULL)
                items[(*n)++] = (Item){r, run, 0, 0};
        }
    qsort(items, *n, sizeof *items, cmp_seq);
    for (size_t i = 0; i < *n; i++)
        items[i].seq = i;
    return items;
}

/* ---- one function's runs ---- */

static int cmp_text(const void *pa, const void *pb)
{
    return strcmp(*(const char *const *)pa, *(const char *const *)pb);
}

/* A row's texts of one kind as a sorted array of borrowed strings. */
static const char **texts_of(const Model *m, const CodeRow *r, char kind, size_t *n)
{
    const ModelFile *f = &m->files[r->file];
    size_t count = 0;
    for (long t = r->text_head; t >= 0; t = f->texts[t].next)
        count += f->texts[t].kind == kind;
    const char **v = xcalloc(count + 1, sizeof *v);
    *n = 0;
    for (long t = r->text_head; t >= 0; t = f->texts[t].next)
        if (f->texts[t].kind == kind)
            v[(*n)++] = f->texts[t].text;
    qsort(v, *n, sizeof *v, cmp_text);
    return v;
}

static bool same_texts(const char **a, size_t na, const char **b, size_t nb)
{
    if (na != nb)
        return false;
    for (size_t i = 0; i < na; i++)
        if (strcmp(a[i], b[i]) != 0)
            return false;
    return true;
}

/* What run a differs in from run b (DIFF_*; 0: they agree). */
static unsigned differs(const DivRun *a, const DivRun *b)
{
    unsigned d = 0;
    if (a->row->compiles != b->row->compiles)
        d |= DIFF_COMPILES;
    if (a->row->graphs_made != b->row->graphs_made)
        d |= DIFF_GRAPHS;
    if (!same_texts(a->breaks, a->nbreaks, b->breaks, b->nbreaks))
        d |= DIFF_BREAKS;
    if (!same_texts(a->guards, a->nguards, b->guards, b->nguards))
        d |= DIFF_GUARDS;
    return d;
}

/* By label (equal labels are the same run, as ranks.py counts them), then
   reading order. */
static int cmp_label_seq(const void *pa, const void *pb)
{
    const Item *a = pa, *b = pb;
    int r = model_label_cmp(a->run, b->run);
    return r ? r : (a->seq > b->seq) - (a->seq < b->seq);
}

static void free_runs(DivRun *runs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(runs[i].breaks);
        free(runs[i].guards);
    }
    free(runs);
}

/* Group the runs that agree; the largest group is the norm (ties: the
   group of the run first in label order -- runs[] is in that order, so
   the group met first among the largest).  Marks the odd runs.  Returns
   the number of groups. */
static size_t group_runs(DivFunction *f)
{
    size_t ngroups = 0;
    size_t *rep = xcalloc(f->nruns, sizeof *rep), *size = xcalloc(f->nruns, sizeof *size);
    for (size_t i = 0; i < f->nruns; i++) {
        size_t g = 0;
        while (g < ngroups && differs(&f->runs[i], &f->runs[rep[g]]) != 0)
            g++;
        if (g == ngroups)
            rep[ngroups++] = i;
        f->runs[i].group = (int)g;
        size[g]++;
    }
    size_t norm = 0;
    for (size_t g = 1; g < ngroups; g++)
        if (size[g] > size[norm])
            norm = g;
    f->norm = rep[norm];
    f->nnorm = size[norm];
    f->differs = 0;
    for (size_t i = 0; i < f->nruns; i++) {
        DivRun *r = &f->runs[i];
        r->odd = r->group != (int)norm;
        r->differs = r->odd ? differs(r, &f->runs[f->norm]) : 0;
        f->differs |= r->differs;
    }
    free(rep);
    free(size);
    return ngroups;
}

/*
 * The runs of one function (items[0 .. n), sorted by label, then reading
 * order), one per label: the last read.  Adds the function to d when it
 * diverges.
 */
static void one_function(const Model *m, const Item *items, size_t n, Divergence *d)
{
    DivFunction f = {.first = items[0].row, .runs = xcalloc(n, sizeof(DivRun))};
    for (size_t i = 0; i < n; i++) {
        if (i + 1 < n && model_label_cmp(items[i].run, items[i + 1].run) == 0)
            continue;         /* a later code object of the same run wins */
        DivRun *r = &f.runs[f.nruns++];
        r->row = items[i].row;
        r->run = items[i].run;
        r->breaks = texts_of(m, r->row, TEXT_BREAK, &r->nbreaks);
        r->guards = texts_of(m, r->row, TEXT_GUARD, &r->nguards);
    }
    if (f.nruns < 2) {        /* one run reached it: nothing to compare */
        free_runs(f.runs, f.nruns);
        return;
    }
    d->nfunctions++;
    if (group_runs(&f) < 2) {
        free_runs(f.runs, f.nruns);
        return;
    }
    f.first = f.runs[f.norm].row;
    if (d->nfns == d->capfns) {
        d->capfns = d->capfns ? 2 * d->capfns : 8;
        d->fns = xrealloc(d->fns, d->capfns * sizeof *d->fns);
    }
    d->fns[d->nfns++] = f;
}

/* Functions by file and line, then the one read first. */
static int cmp_functions(const void *pa, const void *pb)
{
    const DivFunction *a = pa, *b = pb;
    int r = strcmp(a->first->filename, b->first->filename);
    if (r == 0)
        r = (a->first->firstlineno > b->first->firstlineno)
            - (a->first->firstlineno < b->first->firstlineno);
    return r ? r : (a->seq > b->seq) - (a->seq < b->seq);
}

static int cmp_run_ptrs(const void *pa, const void *pb)
{
    return model_label_cmp(*(const RunInfo *const *)pa, *(const RunInfo *const *)pb);
}

/* How many distinct labels the shown runs have; *one: the first of them
   in label order ("" when none). */
static size_t count_runs(const Model *m, const char **one)
{
    size_t total = 0, n = 0, distinct = 0;
    for (size_t fi = 0; fi < m->nfiles; fi++)
        total += m->files[fi].nruns;
    const RunInfo **runs = xcalloc(total + 1, sizeof *runs);
    for (size_t fi = 0; fi < m->nfiles; fi++) {
        const ModelFile *f = &m->files[fi];
        for (size_t i = 0; i < f->nruns; i++)
            if (model_run_shown(f, &f->runs[i]))
                runs[n++] = &f->runs[i];
    }
    qsort(runs, n, sizeof *runs, cmp_run_ptrs);
    for (size_t i = 0; i < n; i++)
        distinct += i == 0 || model_label_cmp(runs[i - 1], runs[i]) != 0;
    *one = n ? runs[0]->label : "";
    free(runs);
    return distinct;
}

void diverge_compute(const Model *m, Divergence *d)
{
    memset(d, 0, sizeof *d);
    d->nruns = count_runs(m, &d->only_run);
    size_t n;
    Item *items = gather(m, &n);
    qsort(items, n, sizeof *items, cmp_function);
    for (size_t i = 0; i < n;) {
        size_t j = i + 1;
        while (j < n && same_function(items[i].row, items[j].row))
            j++;
        size_t first_seq = items[i].seq;     /* (sorted by reading order within) */
        qsort(items + i, j - i, sizeof *items, cmp_label_seq);
        size_t before = d->nfns;
        one_function(m, items + i, j - i, d);
        if (d->nfns > before)
            d->fns[before].seq = first_seq;
        i = j;
    }
    free(items);
    if (d->nfns > 1)
        qsort(d->fns, d->nfns, sizeof *d->fns, cmp_functions);
}

void diverge_free(Divergence *d)
{
    for (size_t i = 0; i < d->nfns; i++)
        free_runs(d->fns[i].runs, d->fns[i].nruns);
    free(d->fns);
    memset(d, 0, sizeof *d);
}

/* ---- saying what differs ---- */

/* How many of a's texts b lacks. */
static size_t missing_from(const char **a, size_t na, const char **b, size_t nb)
{
    size_t n = 0, j = 0;
    for (size_t i = 0; i < na; i++) {
        while (j < nb && strcmp(b[j], a[i]) < 0)
            j++;
        n += !(j < nb && strcmp(b[j], a[i]) == 0);
    }
    return n;
}

static void cat_sets(char *dst, size_t cap, const char *what, const char **odd, size_t nodd,
                     const char **norm, size_t nnorm)
{
    size_t used = strlen(dst), extra = missing_from(odd, nodd, norm, nnorm),
           lacking = missing_from(norm, nnorm, odd, nodd);
    snprintf(dst + used, cap - used, "%s%s", used ? ", " : "", what);
    if (extra > 0) {
        used = strlen(dst);
        snprintf(dst + used, cap - used, " +%zu", extra);
    }
    if (lacking > 0) {
        used = strlen(dst);
        snprintf(dst + used, cap - used, " -%zu", lacking);
    }
}

void diverge_describe(const DivFunction *f, const DivRun *odd, char *dst, size_t cap)
{
    const DivRun *norm = &f->runs[f->norm];
    dst[0] = '\0';
    if (odd->differs & DIFF_COMPILES)
        snprintf(dst, cap, "compiles %lld vs %lld", odd->row->compiles, norm->row->compiles);
    if (odd->differs & DIFF_GRAPHS) {
        size_t used = strlen(dst);
        snprintf(dst + used, cap - used, "%sgraphs %lld vs %lld", used ? ", " : "",
                 odd->row->graphs_made, norm->row->graphs_made);
    }
    if (odd->differs & DIFF_BREAKS)
        cat_sets(dst, cap, "break reasons", odd->breaks, odd->nbreaks, norm->breaks,
                 norm->nbreaks);
    if (odd->differs & DIFF_GUARDS)
        cat_sets(dst, cap, "failing guards", odd->guards, odd->nguards, norm->guards,
                 norm->nguards);
}

/* ---- the view (v) ---- */

/* The texts one run has and the other lacks, `sign` in front, at most
   VIEW_TEXTS of them (then how many more). */
static void add_texts(Pager *p, int indent, char sign, const char *what, const char **a,
                      size_t na, const char **b, size_t nb)
{
    size_t shown = 0, more = 0, j = 0;
    for (size_t i = 0; i < na; i++) {
        while (j < nb && strcmp(b[j], a[i]) < 0)
            j++;
        if (j < nb && strcmp(b[j], a[i]) == 0)
            continue;
        if (shown == VIEW_TEXTS) {
            more++;
            continue;
        }
        char *text = fmt_sanitize(a[i]);
        pager_add(p, -1, -1, "%*s%s%c %s%s  %s%s", indent, "", sign == '+' ? S(AC_BAD) : S(AC_DIM),
                  sign, what, S(AC_NORMAL), text, S(AC_NORMAL));
        free(text);
        shown++;
    }
    if (more > 0)
        pager_add(p, -1, -1, "%*s%s%c %zu more %ss", indent, "", S(AC_DIM), sign, more, what);
}

/* The runs that agree with the norm, as one line: their numbers, then
   their labels. */
static void add_norm(Pager *p, const DivFunction *f, int lw)
{
    const DivRun *norm = &f->runs[f->norm];
    size_t cap = 64 + f->nruns * (sizeof norm->run->label + 2), used = 0;
    char *labels = xmalloc(cap);
    labels[0] = '\0';
    for (size_t i = 0; i < f->nruns; i++)
        if (!f->runs[i].odd) {
            snprintf(labels + used, cap - used, "%s%s", used ? ", " : "", f->runs[i].run->label);
            used = strlen(labels);
        }
    char agree[64], *clean = fmt_sanitize(labels);
    snprintf(agree, sizeof agree, "%zu agree", f->nnorm);
    pager_add(p, norm->row->run_id, norm->row->code_id,
              "  %s     %-*s  compiles %lld, graphs %lld, break reasons %zu, failing guards "
              "%zu:  %s%s", S(AC_DIM), lw, agree, norm->row->compiles, norm->row->graphs_made,
              norm->nbreaks, norm->nguards, clean, S(AC_NORMAL));
    pager_set_file(p, norm->row->file);
    free(clean);
    free(labels);
}

/* The first run of runs[i]'s group (odd runs that agree with each other
   share one line). */
static size_t first_of_group(const DivFunction *f, size_t i)
{
    size_t k = 0;
    while (f->runs[k].group != f->runs[i].group)
        k++;
    return k;
}

/* The other runs of runs[i]'s group: "   and 2 more alike: rank 6, rank
   10" (malloc'd; "" when none), dim, labels sanitized. */
static char *alike_runs(const DivFunction *f, size_t i)
{
    size_t more = 0, cap = 64, used = 0;
    for (size_t k = i + 1; k < f->nruns; k++)
        if (f->runs[k].group == f->runs[i].group) {
            more++;
            cap += sizeof f->runs[k].run->label + 2;
        }
    if (more == 0)
        return xstrdup("");
    char *labels = xmalloc(cap);
    labels[0] = '\0';
    for (size_t k = i + 1; k < f->nruns; k++)
        if (f->runs[k].group == f->runs[i].group) {
            snprintf(labels + used, cap - used, "%s%s", used ? ", " : "", f->runs[k].run->label);
            used = strlen(labels);
        }
    char *clean = fmt_sanitize(labels);
    char *s = xasprintf("   %sand %zu more alike: %s%s", S(AC_DIM), more, clean, S(AC_NORMAL));
    free(clean);
    free(labels);
    return s;
}

static void add_function(Pager *p, const DivFunction *f, int lw)
{
    const DivRun *first_odd = NULL;
    for (size_t i = 0; i < f->nruns && first_odd == NULL; i++)
        if (f->runs[i].odd)
            first_odd = &f->runs[i];
    char what[128] = "";
    static const char *names[] = {"compiles", "graphs", "break reasons", "failing guards"};
    for (int b = 0; b < 4; b++)
        if (f->differs & (1u << b)) {
            size_t used = strlen(what);
            snprintf(what + used, sizeof what - used, "%s%s", used ? ", " : "", names[b]);
        }
    pager_add(p, first_odd->row->run_id, first_odd->row->code_id,
              " %s%s%s  %s  %s%s differ; %zu of %zu runs agree", S(AC_HEADER_VALUE),
              f->first->name, S(AC_NORMAL), f->first->where, S(AC_DIM), what, f->nnorm,
              f->nruns);
    pager_set_file(p, first_odd->row->file);
    add_norm(p, f, lw);
    const DivRun *norm = &f->runs[f->norm];
    for (size_t i = 0; i < f->nruns; i++) {
        const DivRun *r = &f->runs[i];
        if (!r->odd || first_of_group(f, i) != i)
            continue;
        char desc[512], label[4 * LABEL_COLS + 1];
        diverge_describe(f, r, desc, sizeof desc);
        fmt_fit(label, sizeof label, r->run->label, lw, FMT_LEFT);
        char *alike = alike_runs(f, i);
        pager_add(p, r->row->run_id, r->row->code_id, "  %sodd  %s  %s%s%s", S(AC_BAD), label,
                  desc, S(AC_NORMAL), alike);
        free(alike);
        pager_set_file(p, r->row->file);
        int indent = 9 + lw;
        if (r->differs & DIFF_BREAKS) {
            add_texts(p, indent, '+', "break reason", r->breaks, r->nbreaks, norm->breaks,
                      norm->nbreaks);
            add_texts(p, indent, '-', "break reason", norm->breaks, norm->nbreaks, r->breaks,
                      r->nbreaks);
        }
        if (r->differs & DIFF_GUARDS) {
            add_texts(p, indent, '+', "failing guard", r->guards, r->nguards, norm->guards,
                      norm->nguards);
            add_texts(p, indent, '-', "failing guard", norm->guards, norm->nguards, r->guards,
                      r->nguards);
        }
    }
}

int diverge_load(Pager *p, Model *m)
{
    pager_clear(p);
    if (model_track_texts(m) < 0) {
        pager_set_title(p, " Divergence between runs");
        pager_add(p, -1, -1, "  %scannot read the database", S(AC_BAD));
        pager_finish(p);
        return -1;
    }
    Divergence d;
    diverge_compute(m, &d);
    char *title = xasprintf(" Divergence between %zu run%s: %zu of %zu function%s differ%s   "
                            "odd runs: outside the largest group of runs that agree",
                            d.nruns, d.nruns == 1 ? "" : "s", d.nfns, d.nfunctions,
                            d.nfunctions == 1 ? "" : "s", d.nfns == 1 ? "s" : "");
    pager_set_title(p, title);
    free(title);
    int lw = 9;               /* "NNN agree" */
    for (size_t i = 0; i < d.nfns; i++)
        for (size_t k = 0; k < d.fns[i].nruns; k++) {
            int w = fmt_width(d.fns[i].runs[k].run->label);
            lw = w > lw ? (w < LABEL_COLS ? w : LABEL_COLS) : lw;
        }
    if (d.nruns < 2) {
        char *one = fmt_sanitize(d.only_run);
        pager_add(p, -1, -1, "  %sonly one run%s%s%s: nothing to compare.  Give dyntop each "
                  "rank's file (dyntop DIR/rank*.db), or -r all for every run of a file.",
                  S(AC_DIM), d.nruns ? " (" : "", one, d.nruns ? ")" : "");
        free(one);
    }
    else if (d.nfns == 0)
        pager_add(p, -1, -1, "  %sno divergence: the %zu runs compiled and broke alike in every "
                  "function two or more of them reached (%zu)", S(AC_DIM), d.nruns,
                  d.nfunctions);
    for (size_t i = 0; i < d.nfns; i++)
        add_function(p, &d.fns[i], lw);
    diverge_free(&d);
    pager_finish(p);
    return 0;
}

/* ---- batch mode's section ---- */

static void put_fitted(const char *line, int width, FILE *out)
{
    size_t cap = 4 * strlen(line) + 16;
    char *buf = xmalloc(cap);
    if (width > 0)
        fmt_fit(buf, cap, line, width, FMT_LEFT | FMT_NOPAD);
    else {
        char *clean = fmt_sanitize(line);
        snprintf(buf, cap, "%s", clean);
        free(clean);
    }
    size_t n = strlen(buf);
    while (n > 0 && buf[n - 1] == ' ')
        n--;
    fprintf(out, "%.*s\n", (int)n, buf);
    free(buf);
}

/* Append `text` padded to `w` columns (display width: fmt_fit) and a gap. */
static void cat_cell(char *line, size_t cap, const char *text, int w)
{
    size_t used = strlen(line);
    if (used + 4 * (size_t)w + 3 >= cap)
        return;
    fmt_fit(line + used, cap - used, text, w, FMT_LEFT);
    used = strlen(line);
    snprintf(line + used, cap - used, "  ");
}

/* Where a function is: file:line in full without a width limit (nothing is
   cut in batch mode), else the file's last component (the numbers first). */
static void where_of(const DivFunction *f, int width, char *dst, size_t cap)
{
    if (width <= 0)
        snprintf(dst, cap, "%s", f->first->where);
    else
        fmt_where(dst, cap, f->first->filename, f->first->firstlineno, 28);
}

void diverge_print(const Model *m, int width, FILE *out)
{
    Divergence d;
    diverge_compute(m, &d);
    char head[512];
    if (d.nruns < 2)
        snprintf(head, sizeof head, "Divergence: only one run%s%s%s, nothing to compare",
                 d.nruns ? " (" : "", d.only_run, d.nruns ? ")" : "");
    else if (d.nfns == 0)
        snprintf(head, sizeof head, "Divergence between %zu runs: none (the %zu functions two "
                 "or more of them reached compiled and broke alike)", d.nruns, d.nfunctions);
    else
        snprintf(head, sizeof head, "Divergence between %zu runs: %zu of %zu function%s differ%s",
                 d.nruns, d.nfns, d.nfunctions, d.nfunctions == 1 ? "" : "s",
                 d.nfns == 1 ? "s" : "");
    put_fitted(head, width, out);
    if (d.nfns == 0) {
        diverge_free(&d);
        return;
    }
    /* Columns as wide as their widest value. */
    char where[1024], line[4096], desc[512], agree[32];
    int wn = 8, ww = 9, wl = 7, wa = 6;
    for (size_t i = 0; i < d.nfns; i++) {
        const DivFunction *f = &d.fns[i];
        where_of(f, width, where, sizeof where);
        snprintf(agree, sizeof agree, "%zu of %zu", f->nnorm, f->nruns);
        wa = (int)strlen(agree) > wa ? (int)strlen(agree) : wa;
        wn = fmt_width(f->first->name) > wn ? fmt_width(f->first->name) : wn;
        ww = fmt_width(where) > ww ? fmt_width(where) : ww;
        for (size_t k = 0; k < f->nruns; k++)
            if (f->runs[k].odd && fmt_width(f->runs[k].run->label) > wl)
                wl = fmt_width(f->runs[k].run->label);
    }
    line[0] = '\0';
    cat_cell(line, sizeof line, "FUNCTION", wn);
    cat_cell(line, sizeof line, "FILE:LINE", ww);
    cat_cell(line, sizeof line, "ODD RUN", wl);
    cat_cell(line, sizeof line, "AGREE", wa);
    cat_cell(line, sizeof line, "DIFFERS", 7);
    put_fitted(line, width, out);
    for (size_t i = 0; i < d.nfns; i++) {
        const DivFunction *f = &d.fns[i];
        where_of(f, width, where, sizeof where);
        for (size_t k = 0; k < f->nruns; k++) {
            const DivRun *r = &f->runs[k];
            if (!r->odd)
                continue;
            diverge_describe(f, r, desc, sizeof desc);
            snprintf(agree, sizeof agree, "%zu of %zu", f->nnorm, f->nruns);
            line[0] = '\0';
            cat_cell(line, sizeof line, f->first->name, wn);
            cat_cell(line, sizeof line, where, ww);
            cat_cell(line, sizeof line, r->run->label, wl);
            cat_cell(line, sizeof line, agree, wa);
            cat_cell(line, sizeof line, desc, fmt_width(desc));
            put_fitted(line, width, out);
        }
    }
    diverge_free(&d);
}
