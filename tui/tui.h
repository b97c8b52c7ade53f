/*
 * tui.h -- the contract of the tui/ folder: dyntop, a `top` for the capture
 * engine over a dynscope database (DESIGN.md 4.4; manual: docs/dyntop.md).
 *
 * Files, one mechanism each:
 *   dyntop.c    main(): options (getopt_long), the poll/draw/key loop
 *   app.c       the screen: which widgets are shown, key dispatch, layout
 *   model.c     the database side: runs, code rows and totals of one or
 *               several files (a job's ranks), each refreshed incrementally
 *               every poll through its own reader
 *   indexmap.c  an open-addressing hash of row indexes (the model's keys)
 *   widget.c    the widget base (vtable, rect, dirty flag) and drawing helpers
 *   header.c    summary header widget
 *   table.c     the main table widget: columns, sort, filter, cursor, follow
 *   pager.c     a scrollable list of styled lines (detail, views, help, menu)
 *   detail.c    the detail view of one code object (its queries and lines)
 *   source.c    the user's source lines, read from their files
 *   views.c     graph breaks and skips by type and site, the recompile log
 *   diverge.c   the divergence between runs (dynscope/ranks.py's rule): the
 *               `v` view and batch mode's Divergence section
 *   help.c      the key table and the help screen
 *   bar.c       the footer: key hints, the filter prompt, messages
 *   batch.c     batch mode (-b): the header and table as plain text (and,
 *               for several files, the divergence)
 *   bench.c     --bench-refresh: timed refreshes into a headless screen
 *   fmt.c       text: sanitizing, display width, fitting, numbers, times
 *   colors.c    attribute classes -> curses attributes (colour or mono)
 *   util.c      allocation that cannot fail, fatal errors, clocks
 *
 * Rules of the folder:
 *   - Python.h stays out (STYLE.md): dyntop is a plain C program that links
 *     store/read.c, the read model (store/read.h).  No SQL here: every read
 *     of the database goes through the read model.
 *   - The database is opened read-only and only ever read.
 *   - Widgets are small structs whose first member is a Widget; each has a
 *     const WidgetClass, and new/init/done/delete.  A widget sets `dirty`
 *     when what it shows changes; widget_draw() draws dirty widgets only and
 *     clears the flag (htop Panel.c, needsRedraw).
 *   - Every string that came from the database passes through fmt_fit() or
 *     fmt_sanitize() before it reaches the terminal (no control characters,
 *     no broken UTF-8, exact column widths).
 *   - Single-threaded.  No function here aborts with the terminal in curses
 *     mode: fatal paths go through tui_fatal(), which restores it first.
 */
#ifndef DYNSCOPE_TUI_H
#define DYNSCOPE_TUI_H

#ifndef _XOPEN_SOURCE
#define _XOPEN_SOURCE 700
#endif
#ifndef _DEFAULT_SOURCE
#define _DEFAULT_SOURCE 1
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <wchar.h>

#include <curses.h>

#include "../store/read.h"

/* ---- assertions: debug-only; restore the terminal, print, abort ---- */

#ifdef NDEBUG
#define TUI_ASSERT(e) ((void)0)
#else
#define TUI_ASSERT(e) ((e) ? (void)0 : tui_assert_fail(#e, __FILE__, __LINE__))
#endif
void tui_assert_fail(const char *expr, const char *file, int line)
    __attribute__((noreturn));
/* Restore the terminal (if curses is up), print "dyntop: msg" on stderr and
   exit with `status`. */
void tui_fatal(int status, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 2, 3)));

/* Allocation that cannot fail: out of memory is fatal (tui_fatal). */
void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#define TUI_XSTR(x) #x
#define TUI_STR(x) TUI_XSTR(x)

#define TUI_MIN_COLS 60
#define TUI_MIN_LINES 12
#define TUI_DEFAULT_CACHE_LIMIT 8
/* A recompile this recent (wall clock) colours its row. */
#define TUI_RECENT_NS (5LL * 1000000000LL)

/* ---- fmt.c: text ---- */

enum {
    FMT_LEFT = 0,        /* pad on the right */
    FMT_RIGHT = 1,       /* pad on the left */
    FMT_TRUNC_START = 2, /* too long: keep the end, mark the cut at the start */
    FMT_NOPAD = 4,       /* do not pad to width */
};

/* Set once at start: is the locale's codeset UTF-8 (then the truncation mark
   is U+2026, else '~')? */
void fmt_init_locale(void);
bool fmt_utf8(void);

/*
 * Fit `src` into exactly `width` terminal columns (fewer with FMT_NOPAD):
 * control characters become spaces, undecodable bytes '?', a string too long
 * is cut with a one-column mark.  Writes a NUL-terminated multibyte string
 * into dst (cap bytes; cap >= 4 * width + 1 always suffices).  Returns the
 * columns written.  width <= 0 writes "".  Cannot fail.
 */
int fmt_fit(char *dst, size_t cap, const char *src, int width, int flags);
/* One decoded character: its width in columns and its AttrClass. */
typedef struct FmtCell {
    wchar_t wc;
    unsigned char w;
    unsigned char cls;
} FmtCell;
/* Decode styled text (see tui_put_styled) into a malloc'd array of cells
   (*cells NULL when empty; free() it); *width receives the total width.
   `cls` is the class before the first switch.  Returns the count. */
size_t fmt_cells(const char *s, int cls, FmtCell **cells, int *width);
/* Encode cells into dst as a multibyte string; returns the columns. */
int fmt_put_cells(char *dst, size_t cap, const FmtCell *cells, size_t n);
/* Display width of src after sanitizing (as fmt_fit would print it). */
int fmt_width(const char *src);
/* Display width of styled text (style switches take no columns). */
int fmt_width_styled(const char *src);
/* A malloc'd copy of src with control characters made spaces (tabs too). */
char *fmt_sanitize(const char *src);

/* A count in at most `width` columns: 1234567 -> "1234567", or "1.2M",
   "12M", "123k" when it does not fit. */
void fmt_count(char *dst, size_t cap, long long v, int width);
/* Nanoseconds as milliseconds: "0.43", "12.1", "1234" (at most width cols). */
void fmt_ms(char *dst, size_t cap, long long ns, int width);
/* A break site's cost (store/read.h StoreBreakCost) in two right-aligned
   cells, 15 columns in all: its time ("12.30 ms", as fmt_ns writes it) and
   its share of the time of the functions it breaks ("41%"); the share "-"
   when that time is unknown, and "-" and blank when the cost is (no call
   that broke there was timed, or a file before schema v6). */
void fmt_break_cost(char *dst, size_t cap, const StoreBreakCost *c);
/* What a known cost is made of, as a sentence: "12.30 ms outside graphs
   (eager steps, resumes), 41% of <whose> time; 4 more graph launches; from
   4 timed calls" (whose: "the function's").  "" when it is unknown. */
void fmt_break_cost_parts(char *dst, size_t cap, const StoreBreakCost *c, const char *whose);
/* A duration for people: "0.11 s", "3 min 2 s", "2 h 5 min". */
void fmt_duration(char *dst, size_t cap, long long ns);
/* A short duration with its unit: "812 ns", "1.5 us", "2.31 ms", "1.20 s". */
void fmt_ns(char *dst, size_t cap, long long ns);
/* Time since a run started: "+105.9 ms" under 10 s, else "+12.345 s". */
void fmt_since(char *dst, size_t cap, long long ns);
/* A source location for a narrow column: "file.py:12", the file's last
   component (the full path is for the lines that have room), cut at the
   start to `width` columns (cap >= 4 * width + 1).  "" when unknown (no
   file or line 0). */
void fmt_where(char *dst, size_t cap, const char *filename, int lineno, int width);
/* Wall-clock ns as local "HH:MM:SS" (with the date if not today). */
void fmt_clock(char *dst, size_t cap, long long wall_ns);
/* Case-insensitive substring test (ASCII case folding). */
bool fmt_contains(const char *hay, const char *needle);
/* Strip leading and trailing spaces in place (a source line shows as a
   traceback shows it).  Returns s. */
char *fmt_trim(char *s);

/* ---- source.c: the user's source lines ---- */

/*
 * Line `lineno` of `filename`, read from the file: as recorded (relative to
 * dyntop's directory), else relative to the directory of the database at
 * `db`.  Returns a malloc'd, sanitized, trimmed line, or NULL (no such
 * file or line, or a name like "<string>").
 */
char *source_line(const char *db, const char *filename, int lineno);
/* The line that starts the def (async def, class) whose code object begins
   at `lineno` (its first decorator's line), within SOURCE_DEF_LINES lines:
   malloc'd as source_line's, its number in *found; or NULL. */
char *source_def_line(const char *db, const char *filename, int lineno, int *found);
#define SOURCE_DEF_LINES 20

#define SOURCE_CACHE_SLOTS 16
/* The lines one load read (zeroed: empty); then reused round-robin. */
typedef struct SourceCache {
    struct SourceCacheSlot {
        char *db, *filename;      /* owned */
        int lineno;
        char *line;               /* owned, NULL: not readable */
    } slot[SOURCE_CACHE_SLOTS];
    int n;                        /* lines asked for so far */
} SourceCache;
/* source_line() through the cache: a borrowed line (valid until the cache
   reuses its slot, SOURCE_CACHE_SLOTS more lines on), or NULL. */
const char *source_cached_line(SourceCache *c, const char *db, const char *filename,
                               int lineno);
void source_cache_free(SourceCache *c);

/* ---- util.c: clocks ---- */

long long tui_wall_ns(void);     /* CLOCK_REALTIME, ns (what the recorder stamps) */
double tui_mono_s(void);         /* CLOCK_MONOTONIC, seconds */

/* ---- colors.c: attribute classes ---- */

typedef enum AttrClass {
    AC_NORMAL,
    AC_HEADER_LABEL,  /* "Compiles" in the summary */
    AC_HEADER_VALUE,  /* its number */
    AC_HEADER_LIVE,   /* "live" */
    AC_HEADER_WARN,   /* paused, database gone, errors */
    AC_TABLE_HEAD,    /* the column title bar */
    AC_TABLE_SORT,    /* the sorted column's title */
    AC_CURSOR,        /* the selected row */
    AC_LIMIT,         /* a code object at its cache limit */
    AC_RECENT,        /* a code object that recompiled recently */
    AC_DIM,           /* secondary text */
    AC_TITLE,         /* a view's title bar */
    AC_SECTION,       /* a section heading inside a view */
    AC_KIND,          /* guard or break kinds */
    AC_KEY,           /* a key name in the footer / help */
    AC_SOURCE,        /* a source line */
    AC_BAD,           /* a failing guard / observed value */
    AC_YOUR_CODE,     /* break classes (event/break_types.h): yours to change, */
    AC_LIBRARY_CODE,  /*   in installed code, */
    AC_ENGINE_LIMIT,  /*   the engine's debt, */
    AC_FUNDAMENTAL,   /*   no engine can */
    AC__COUNT
} AttrClass;

/* After initscr(): set up colour pairs (unless disabled or absent). */
void colors_init(bool use_color);
attr_t colors_attr(AttrClass c);
/* The class of a break class's name ("your code", ... as recorded);
   AC_NORMAL for another text ("" before schema v4). */
AttrClass colors_break_class(const char *name);

/* ---- indexmap.c: hash of row indexes ---- */

/*
 * An open-addressing hash table that stores indexes into an array the caller
 * owns; the caller hashes its keys and says whether the key of index i
 * equals the one sought.  Invariants: cap is 0 or a power of two; a slot
 * holds 0 (empty) or index + 1; n < cap * 3 / 4.
 */
typedef struct IndexMap {
    size_t *slots;   /* owned */
    uint64_t *hashes;/* owned, the hash of each slot's index */
    size_t cap;
    size_t n;
} IndexMap;

typedef bool (*IndexMapEq)(const void *ctx, size_t idx);
/* The index whose key equals (hash, eq), or (size_t)-1. */
size_t indexmap_find(const IndexMap *m, uint64_t hash, IndexMapEq eq, const void *ctx);
/* Add idx under hash (the key must not be present).  Cannot fail. */
void indexmap_add(IndexMap *m, uint64_t hash, size_t idx);
void indexmap_clear(IndexMap *m);
void indexmap_done(IndexMap *m);
uint64_t indexmap_hash2(long long a, long long b);
uint64_t indexmap_hash_str(uint64_t h, const char *s);

/* ---- model.c: what the databases say ---- */

typedef struct RunInfo {
    long long run_id;
    long long pid;
    long long started_at;     /* wall ns */
    long long ended_at;       /* wall ns, 0 while running */
    long long resets;         /* current epoch */
    long long dropped;        /* events dropped (written at the run's end) */
    char *argv;               /* owned, the recorded argv as JSON text */
    char *hostname;           /* owned, sanitized; "" when unknown (before v4) */
    bool has_rank;            /* torchrun's RANK was set: then rank is it */
    long long rank;
    long long local_rank;     /* -1 when unset */
    long long world_size;     /* -1 when unset */
    char label[96];           /* who it is, as dynscope/ranks.py run_labels says:
                                 "rank R", else "pid P@host" ("pid P" when the
                                 host is unknown); sanitized */
    bool pid_gone;            /* not ended but the process is not there */
    int cache_limit;          /* entries per frame it ran with; 0 = unknown */
    char *last_mark;          /* owned, sanitized: its newest dynscope.annotate
                                 mark, "step {\"n\": 12}"; "" none */
    long long last_mark_at;   /* wall ns, 0 none */
} RunInfo;

/*
 * One code object and its aggregates.  Counts over every epoch of its run
 * (as the code_summary view), except entries/hits: the entries alive in the
 * run's current epoch.
 */
typedef struct CodeRow {
    int file;                 /* its database: Model.files[file] */
    long long run_id;
    long long code_id;
    char *name;               /* owned, sanitized */
    char *filename;           /* owned, sanitized */
    int firstlineno;
    char *where;              /* owned, "filename:firstlineno" */
    long long compiles;       /* compile attempts */
    long long recompiles;     /* compiles with frame_compile_id > 0 */
    long long capture_ns;     /* sum of compiles.duration_ns */
    long long graphs;         /* rows of graphs */
    long long graphs_made;    /* sum of compiles.graphs (what ranks.py compares) */
    long long breaks;         /* rows of graph_breaks */
    long long limit_events;   /* rows of cache_limits */
    long long limit_epoch;    /* newest epoch with a cache_limits row, -1 none */
    long long misses;         /* compiles + limit_events */
    long long entries;        /* alive cache entries (current epoch) */
    long long fullest;        /* entries of its fullest frame */
    long long hits;           /* over alive entries */
    long long last_recompile_at; /* wall ns, 0 if none */
    long long last_fail_id;   /* guard_failures.failure_id of last_fail, 0 none */
    char *last_fail;          /* owned, "expr (observed v)", "" if none */
    long entry_head;          /* first of its entries in ModelFile.entries, -1 */
    long text_head;           /* first of its texts in ModelFile.texts, -1 */
    bool at_limit;            /* a frame at the limit, or a cache_limits row
                                 in the current epoch */
    bool recent;              /* recompiled within TUI_RECENT_NS */
} CodeRow;

/* A cache entry as far as the table needs it. */
typedef struct EntryRec {
    long row;                 /* its CodeRow */
    long long epoch;
    long long frame_id;
    char cid[24];             /* compile_id text */
    long long hits;
    long next;                /* next entry of the same code object, -1 */
} EntryRec;

/* One distinct break reason or failing guard of a code object (what the
   divergence between runs compares; kept only while tracked). */
enum { TEXT_BREAK = 'b', TEXT_GUARD = 'g' };
typedef struct TextRec {
    long row;                 /* its CodeRow */
    char kind;                /* TEXT_BREAK ("kind: reason"), TEXT_GUARD (expr) */
    char *text;               /* owned, as recorded: compared byte for byte,
                                 sanitized only when shown */
    long next;                /* next text of the same code object, -1 */
} TextRec;

/* Totals shown in the header: sums of the rows (so they agree with the
   table), plus what only the database knows. */
typedef struct Totals {
    long long code_objects;
    long long compiles;
    long long recompiles;
    long long graphs;
    long long breaks;
    long long guard_failures;
    long long hits;
    long long misses;
    long long capture_ns;
    long long entries;
    long long at_limit;       /* code objects at their cache limit */
    long long limit_events;
    long long dropped;
} Totals;

/* Per-second rates over the last refresh interval (live runs). */
typedef struct Rates {
    bool valid;
    double compiles, recompiles, breaks, guard_failures, hits;
} Rates;

enum { MODEL_RUN_NEWEST = -1, MODEL_RUN_ALL = 0 };
/* Rates are taken over this window (the recorder writes every 0.5 s, so a
   shorter one would mostly show 0/s between its commits). */
#define MODEL_RATE_WINDOW_S 3.0
#define MODEL_SAMPLES 64

/*
 * The in-memory picture of one database file.  Refreshed incrementally:
 * tables the recorder only appends to are read past a rowid watermark;
 * compiles still in progress (no ended_at yet) are re-read until they end;
 * entry counters come from entry_stats rows past the watermark.  A new
 * newest run (when following it), a replaced file or a failed incremental
 * step reloads this file (not the others).
 *
 * Invariants: rows[] only grows between reloads of the file (indexes are
 * stable; the table keeps references to them); code_map maps (run_id,
 * code_id) to rows[]; entry_map maps (row, epoch, cid) to entries[];
 * text_map maps (row, kind, text) to texts[]; every watermark is the
 * largest rowid of its table already folded into the aggregates.
 */
/* More files than this are opened only to read them, then closed again (a
   job of a thousand ranks stays far below the process's file limit), and
   one unchanged since its last read (mtime and size of the file and its
   WAL) is not opened at all. */
#define MODEL_OPEN_MAX 64

typedef struct ModelFile {
    char *path;               /* owned, as given */
    StoreReader *reader;      /* owned; NULL when closed */
    dev_t dev;                /* the file we opened */
    ino_t ino;
    bool parked;              /* closed on purpose between reads (more than
                                 MODEL_OPEN_MAX files): opened to read */
    long long seen[4];        /* the file's and its -wal's mtime (ns) and size
                                 at the last read: unchanged, a parked file
                                 is not opened again */
    long long run_id;         /* the run shown (0: all runs; -1: none picked) */

    RunInfo *runs;            /* owned, every run in the file, by run_id */
    size_t nruns, capruns;

    CodeRow *rows;            /* owned */
    size_t nrows, caprows;
    IndexMap code_map;
    EntryRec *entries;        /* owned */
    size_t nentries, capentries;
    IndexMap entry_map;
    TextRec *texts;           /* owned; empty unless Model.track_texts */
    size_t ntexts, captexts;
    IndexMap text_map;
    long long *open_compiles; /* owned: compile_rows not ended yet */
    long *open_rows;          /*   and their CodeRow */
    size_t nopen, capopen;

    struct {
        long long code, compile, graph, brk, limit, failure, entry, stats;
        long long brk_text, fail_text;
    } mark;                   /* watermarks (rowids) */
    long long failures;       /* guard_failures rows of the shown run(s) */
    bool loaded;              /* a full load has happened */
    bool texts_loaded;        /* ... and the texts were read with it */

    bool gone;                /* the file disappeared (showing the last data) */
    char *error;              /* owned, the last refresh error, or NULL */
} ModelFile;

/*
 * What dyntop shows: one or several database files (a job's ranks or
 * hosts, a file each), each with its own reader and its own incremental
 * state (ModelFile), their rows shown together.  A row is named by a
 * reference, idx * nfiles + file (model_ref): with one file, its index.
 * Invariants: files[] is fixed from model_open on (order as given); the
 * same run_pick applies to each file; totals and rates are over every
 * file's rows; generation is bumped when any file's rows or counts change.
 */
typedef struct Model {
    ModelFile *files;         /* owned */
    size_t nfiles;
    long long run_pick;       /* MODEL_RUN_NEWEST, MODEL_RUN_ALL or a run_id */
    int cache_limit_opt;      /* --cache-limit, 0 = infer (8 unless a frame
                                 holds more: then unknown) */
    bool track_texts;         /* keep each row's distinct break reasons and
                                 failing guards (the divergence view) */
    size_t nhosts;            /* distinct hosts of the shown runs */

    Totals totals;
    Rates rates;
    struct {
        double t;             /* tui_mono_s() */
        Totals totals;
    } samples[MODEL_SAMPLES]; /* the last refreshes, oldest first, for rates */
    int nsamples;
    long long generation;     /* bumped when rows or counts changed */
    long long refreshes;      /* successful refreshes */
    double last_query_ms;
} Model;

/*
 * Open each of `paths` read-only (store_reader_open: a dynscope file at a
 * schema version we read) and load them.  0, or -1 with *errmsg malloc'd,
 * one line naming the file (missing, not SQLite, not dynscope, newer or
 * older schema, unreadable/corrupt, no such run, given twice).
 */
int model_open(Model *m, const char *const *paths, size_t npaths, long long run_pick,
               int cache_limit, char **errmsg);
void model_close(Model *m);
/*
 * Bring every file up to date.  0, or -1 when a file's refresh failed (its
 * error set; its previous data stays).  A vanished file sets its `gone` and
 * counts as success; a replaced file is reopened.  Updates totals, rates.
 */
int model_refresh(Model *m);
/* Drop the rows: the next refresh is a full load (Ctrl-L; the benchmark). */
void model_forget(Model *m);
/* Keep each row's distinct break reasons and failing guards from now on
   (TextRec), reading them now.  0, or -1 (a file's error set). */
int model_track_texts(Model *m);

/* Every row: references 0 .. are not dense; iterate files and rows, or use
   model_ref().  The number of rows over every file: */
size_t model_nrows(const Model *m);
long model_ref(const Model *m, size_t file, size_t idx);
const CodeRow *model_row(const Model *m, long ref);
/* The row of (file, run_id, code_id), or NULL. */
const CodeRow *model_code(const Model *m, size_t file, long long run_id, long long code_id);
/* The RunInfo of run_id in a file, or NULL. */
const RunInfo *model_run(const Model *m, size_t file, long long run_id);
/* The run label of a row ("rank 2"; "?" when its run is not known). */
const char *model_label(const Model *m, const CodeRow *r);
/* The order of runs by label (dynscope/ranks.py _order): ranked runs by
   rank, then the others by label.  <0, 0, >0. */
int model_label_cmp(const RunInfo *a, const RunInfo *b);
/* The cache size limit a run ran with, as far as known; 0 = unknown.  The
   database does not record it: --cache-limit says it, else the default 8
   unless a frame of the run holds more entries than that. */
int model_cache_limit(const Model *m, size_t file, long long run_id);
/* The current epoch of a run (runs.resets), 0 if unknown. */
long long model_epoch(const Model *m, size_t file, long long run_id);
/* Is a shown run of any file still recording? */
bool model_live(const Model *m);
/* How many runs are shown over every file. */
size_t model_shown_runs(const Model *m);
/* The reader of a file (borrowed), NULL if closed: what the views read
   through. */
StoreReader *model_reader(const Model *m, size_t file);
/* Whether run r of file f is one the model shows (every run, or the one
   asked for with -r). */
bool model_run_shown(const ModelFile *f, const RunInfo *r);
/* What the last read through a file's reader failed with ("database
   closed" when there is none). */
const char *model_read_error(const Model *m, size_t file);
/* One read transaction around a view's reads of one file (one snapshot).
   0 / -1. */
int model_begin(Model *m, size_t file);
void model_end(Model *m, size_t file);

/* ---- widget.c: the widget base ---- */

typedef struct Widget Widget;

typedef enum KeyResult {
    KEY_IGNORED = 0,
    KEY_HANDLED = 1,
} KeyResult;

typedef struct WidgetClass {
    const char *name;
    /* Draw into the widget's rect on stdscr.  Called only when dirty. */
    void (*draw)(Widget *w);
    /* A key; KEY_IGNORED lets the screen handle it. */
    KeyResult (*key)(Widget *w, int ch);
    /* Free what init allocated (not the struct itself). */
    void (*done)(Widget *w);
} WidgetClass;

struct Widget {
    const WidgetClass *cls;
    int y, x, h, w;           /* rect on stdscr */
    bool dirty;               /* set on change, cleared by widget_draw */
};

void widget_init(Widget *w, const WidgetClass *cls);
/* Move/resize; marks dirty when the rect changed. */
void widget_move(Widget *w, int y, int x, int h, int width);
/* Draw if dirty, then clear dirty. */
void widget_draw(Widget *w);
KeyResult widget_key(Widget *w, int ch);
void widget_done(Widget *w);

/* Draw `s` at (y, x) in exactly `width` columns (fmt_fit flags), in attr. */
void tui_put(int y, int x, int width, const char *s, int flags, attr_t attr);
/*
 * Draw styled text: "\x01" followed by one byte ('A' + AttrClass) switches
 * the class of what follows (the text starts in `base`).  Columns
 * [skip, skip + take) of the text are drawn (take < 0: all that fit, cut
 * with a mark), the rest of `width` is filled with spaces in `base`.  With
 * `override`, everything is drawn in `base` (a selected line).
 */
void tui_put_styled(int y, int x, int width, const char *s, AttrClass base, bool override,
                    int skip, int take);
/* Markup helper: the two-byte switch to class c, as a string. */
#define TUI_STYLE(c) ((char[3]){'\x01', (char)('A' + (c)), '\0'})

/* ---- header.c ---- */

typedef struct Header {
    Widget super;
    const Model *model;       /* borrowed */
    bool paused;
    double delay;             /* seconds between polls */
} Header;

#define HEADER_LINES 4
Header *header_new(const Model *m);
void header_init(Header *h, const Model *m);
void header_done(Header *h);
void header_delete(Header *h);
/* The summary as plain text lines (batch mode); returns the count written. */
int header_lines(const Model *m, bool paused, double delay, char lines[][512], int max);

/* ---- table.c: the main table ---- */

typedef enum ColumnId {
    COL_FLAGS,
    COL_RANK,                 /* several files only: the run's label */
    COL_HOST,                 /* several files from several hosts only */
    COL_NAME,
    COL_WHERE,
    COL_ENTRIES,
    COL_HITS,
    COL_MISSES,
    COL_RECOMPILES,
    COL_GRAPHS,
    COL_BREAKS,
    COL_CAPTURE,
    COL_GUARD,
    COL__COUNT
} ColumnId;

typedef struct ColumnDef {
    ColumnId id;
    const char *title;
    const char *option;       /* --sort name */
    int sort_key;             /* direct sort key, 0 if none */
    bool right;               /* numbers: right-aligned, sort descending first */
    int min_width;
    int pref_width;           /* 0: no preference (numbers: min_width) */
    int priority;             /* 0 always shown; larger is dropped first */
} ColumnDef;

extern const ColumnDef table_columns[COL__COUNT];
/* Column by --sort name (or title, case-insensitive), or -1. */
int table_column_by_name(const char *name);
/* Does column c exist for m?  RANK with several files, HOST with several
   files from more than one host; the rest always (so one file shows the
   table it always did). */
bool table_column_applies(const Model *m, ColumnId c);

/* Widths for a screen `width` columns wide: widths[i] = 0 when column i is
   left out (or does not apply).  width <= 0: every column at its natural
   width for `m` (batch without -w).  `view` holds row references. */
void table_layout(const Model *m, const long *view, size_t nview, int width,
                  int widths[COL__COUNT]);
/* The text of one cell, for a column `width` wide (0: no limit), unpadded. */
void table_cell(const Model *m, const CodeRow *r, ColumnId c, int width, char *dst, size_t cap);
/* One row (or, with r == NULL, the titles) in the given widths, columns
   separated by one space; flags column '-' when empty if `batch`.
   Returns dst. */
char *table_format_row(const Model *m, const CodeRow *r, const int widths[COL__COUNT],
                       ColumnId sort, bool descending, bool batch, char *dst, size_t cap);

typedef struct Table {
    Widget super;
    const Model *model;       /* borrowed */
    long *view;               /* owned, row references shown (model_ref):
                                 filtered, sorted */
    size_t nview, capview;
    ColumnId sort;
    bool descending;
    char filter[128];         /* "" = none */
    size_t cursor;            /* index into view */
    size_t top;               /* first view index on screen */
    bool follow;              /* keep the cursor on followed_* */
    int followed_file;
    long long followed_run, followed_code;
    long long seen_generation;/* model generation the view was built from */
} Table;

Table *table_new(const Model *m);
void table_init(Table *t, const Model *m);
void table_done(Table *t);
void table_delete(Table *t);
/* Rebuild the view (filter + sort) from the model; keeps the cursor on the
   followed row, else on its position.  Marks dirty. */
void table_rebuild(Table *t);
void table_set_sort(Table *t, ColumnId c, bool descending);
/* A direct sort key: the column again inverts, another column sorts by it
   in its natural order. */
void table_sort_key(Table *t, ColumnId c);
void table_set_filter(Table *t, const char *text);
/* The selected row, or NULL when the view is empty. */
const CodeRow *table_selected(const Table *t);
void table_toggle_follow(Table *t);
/* Put the cursor on (file, run_id, code_id) if shown. */
void table_select(Table *t, int file, long long run_id, long long code_id);

/* ---- pager.c: scrollable styled lines ---- */

typedef struct PagerLine {
    char *text;               /* owned, styled text (tui_put_styled markup) */
    int file;                 /* what Enter opens: the file (0 unless set), */
    long long run_id;         /* the run and code object (detail), or -1 */
    long long code_id;        /* (the sort menu keeps its ColumnId here) */
    int wrap_indent;          /* continuation lines start at this column */
    char *tail;               /* owned or NULL: styled text at the right edge */
    int tail_keep;            /* cut lines: the columns the text keeps before the
                                 tail is left out instead */
    char *note;               /* owned or NULL: styled text shown below the list
                                 while the line is selected (lines split at '\n') */
} PagerLine;

typedef struct Pager {
    Widget super;
    char *title;              /* owned, the title bar, or NULL for none */
    PagerLine *lines;         /* owned */
    size_t nlines, caplines;
    bool selectable;          /* a cursor line (views, menus) vs. plain scrolling */
    bool wrap;                /* wrap long lines (else truncate) */
    size_t cursor;            /* selectable: the selected line */
    size_t top;               /* first visual line on screen */
    /* visual lines (wrapped), recomputed when lines or width change */
    size_t *vis_line;         /* owned, logical line of each visual line */
    int *vis_skip;            /* owned, columns of the logical line before it */
    int *vis_take;            /* owned, columns it shows (-1: the rest, cut) */
    bool *vis_tail;           /* owned, it ends with its line's tail */
    size_t nvis, capvis;
    int vis_width;            /* width they were computed for, -1 = stale */
    bool notes;               /* some line has a note: the bottom rows show the
                                 selected line's (selectable pagers) */
} Pager;

Pager *pager_new(bool selectable, bool wrap);
void pager_init(Pager *p, bool selectable, bool wrap);
void pager_done(Pager *p);
void pager_delete(Pager *p);
/* Drop the lines, keep position (for a refresh of the same content). */
void pager_clear(Pager *p);
void pager_set_title(Pager *p, const char *title);
/* Append a line (printf format, styled markup allowed). */
void pager_add(Pager *p, long long run_id, long long code_id, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Like pager_add, with continuation lines indented by `indent` columns. */
void pager_add_indent(Pager *p, int indent, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/*
 * Give the line added last a tail: styled text drawn flush with the right
 * edge (a column of sources beside guards, say).  A wrapped line shows it
 * on its last screen line when it fits there with two spaces to spare,
 * else on a screen line of its own.  A cut line (selectable pager) gives up
 * columns of its text to make room for it but keeps `keep` of them (all of
 * a shorter text): when it cannot, the tail is left out.
 */
void pager_set_tail(Pager *p, int keep, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/*
 * Give the line added last a note: styled text, lines split at '\n', shown
 * below the list while the line is selected.  Once a line has one, a
 * selectable pager keeps its bottom rows for the note (PAGER_NOTE_ROWS, a
 * rule and the text, fewer on a short screen); each line of it is wrapped
 * at spaces, its continuations indented, and what does not fit is cut.
 */
void pager_set_note(Pager *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define PAGER_NOTE_ROWS 6
/* The file (Model.files) of the code object the line added last names
   (pager_add's run_id, code_id); 0 unless set. */
void pager_set_file(Pager *p, int file);
/* After adding: clamp cursor and top, mark dirty. */
void pager_finish(Pager *p);
const PagerLine *pager_selected(const Pager *p);
/* The lines as plain text, one per line, markup removed (tests, batch). */
void pager_print(const Pager *p, FILE *out);

/* ---- detail.c, views.c, help.c: content for pagers ---- */

/* Fill p with the detail of (file, run_id, code_id).  0, or -1 (p holds an
   error line). */
int detail_load(Pager *p, Model *m, int file, long long run_id, long long code_id);
int views_load_breaks(Pager *p, Model *m);
int views_load_recompiles(Pager *p, Model *m);
/* The most recompiles the log shows. */
#define VIEWS_RECOMPILE_LIMIT 500

typedef struct KeyHelp {
    const char *keys;         /* as shown, e.g. "F6 > <" */
    const char *what;
    const char *where;        /* "table", "views", "filter", "menu", "any" */
} KeyHelp;
extern const KeyHelp help_keys[];
extern const size_t help_nkeys;
void help_load(Pager *p);
/* The sort menu: one line per column of m, cursor on `current`. */
void help_load_sort_menu(Pager *p, const Model *m, ColumnId current);

/* ---- diverge.c: the divergence between runs (dynscope/ranks.py's rule) ---- */

/* What a function's runs may differ in. */
enum { DIFF_COMPILES = 1, DIFF_GRAPHS = 2, DIFF_BREAKS = 4, DIFF_GUARDS = 8 };

/* One run's side of a function. */
typedef struct DivRun {
    const CodeRow *row;       /* borrowed from the model (until its next refresh) */
    const RunInfo *run;       /* borrowed */
    const char **breaks;      /* owned array of borrowed texts, sorted: its */
    size_t nbreaks;           /*   distinct break reasons ("kind: reason") */
    const char **guards;      /* ... and failing guards (expressions) */
    size_t nguards;
    int group;                /* runs that agree share a group */
    bool odd;                 /* outside the norm (the largest group) */
    unsigned differs;         /* odd: DIFF_* against the norm */
} DivRun;

/* A function whose runs diverge. */
typedef struct DivFunction {
    const CodeRow *first;     /* a row of the norm: name, where */
    DivRun *runs;             /* owned, the runs that reached it, label order */
    size_t nruns;
    size_t norm;              /* index of a run of the norm group */
    size_t nnorm;             /* runs in the norm group */
    unsigned differs;         /* DIFF_* of any odd run */
    size_t seq;               /* when it was first read (ties of file:line) */
} DivFunction;

typedef struct Divergence {
    size_t nruns;             /* runs compared (distinct labels) */
    const char *only_run;     /* borrowed: the label of the first of them, "" none */
    size_t nfunctions;        /* functions two or more runs reached */
    DivFunction *fns;         /* owned, the divergent ones, by file and line */
    size_t nfns, capfns;
} Divergence;

/* The divergence over the model's rows now (m->track_texts must be on: the
   break and guard sets are the rows' texts).  Free with diverge_free(). */
void diverge_compute(const Model *m, Divergence *d);
void diverge_free(Divergence *d);
/* What an odd run differs in, against the norm: "compiles 8 vs 6, graphs
   5 vs 4, failing guards +2" (a set: +extra -missing). */
void diverge_describe(const DivFunction *f, const DivRun *odd, char *dst, size_t cap);
/* The divergence view (v): tracks the texts from now on.  0, or -1 (p holds
   an error line). */
int diverge_load(Pager *p, Model *m);
/* Batch mode's section: a heading and one line per odd run, fitted to
   `width` columns (0: no limit). */
void diverge_print(const Model *m, int width, FILE *out);

/* ---- bar.c: the footer ---- */

typedef enum BarMode {
    BAR_TABLE,
    BAR_VIEW,
    BAR_MENU,
    BAR_FILTER,
} BarMode;

typedef struct Bar {
    Widget super;
    BarMode mode;
    char filter[128];         /* the filter text (being edited, or active) */
    char status[160];         /* right-hand note: following, rows shown */
    char message[160];        /* a one-shot note, shown until the next key */
    bool several_runs;        /* several files: the hints name v */
} Bar;

Bar *bar_new(void);
void bar_init(Bar *b);
void bar_done(Bar *b);
void bar_delete(Bar *b);
/* Mode, filter text and right-hand status; marks dirty when they change. */
void bar_set(Bar *b, BarMode mode, const char *filter, const char *status);
void bar_message(Bar *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- app.c: the screen ---- */

typedef enum Screen {
    SCREEN_TABLE,
    SCREEN_DETAIL,
    SCREEN_BREAKS,
    SCREEN_RECOMPILES,
    SCREEN_DIVERGENCE,
    SCREEN_HELP,
    SCREEN_SORT_MENU,
} Screen;

typedef struct AppOptions {
    double delay;             /* -d */
    long iterations;          /* -n, 0 = forever */
    bool batch;               /* -b */
    int width;                /* -w (batch), 0 = no limit */
    long limit;               /* --limit rows (0 = all) */
    int sort;                 /* --sort column or -1 */
    bool sort_set_order;
    bool ascending;           /* --sort with a leading '+' (or --ascending) */
    const char *filter;       /* --filter */
    long long run_pick;       /* -r */
    int cache_limit;          /* --cache-limit, 0 = infer */
    bool color;               /* unless --no-color / NO_COLOR */
    long bench_refreshes;     /* --bench-refresh, 0 = off */
    const char *const *paths; /* the databases (argv), at least one */
    size_t npaths;
} AppOptions;

typedef struct App {
    Model model;
    const AppOptions *opts;   /* borrowed */
    Header *header;           /* owned widgets */
    Table *table;
    Pager *view;              /* detail and help: wrapped text */
    Pager *list;              /* break reasons, recompile log, divergence:
                                 selectable */
    Pager *menu;              /* the sort menu, left of the table */
    Bar *bar;
    Screen screen;
    Screen detail_return;     /* where Esc in the detail goes back to */
    Screen help_return;       /* where Esc in the help goes back to */
    int detail_file;
    long long detail_run, detail_code;
    bool paused;
    bool quit;
    bool too_small;
    bool editing_filter;
    int lines, cols;          /* the layout was made for this size */
} App;

/* Open the database and load it (before curses).  0, or -1 with *errmsg. */
int app_open(App *a, const AppOptions *o, char **errmsg);
void app_close(App *a);
/* Create the widgets (curses is up). */
void app_start(App *a);
/* Refresh the model (unless paused) and the shown view; marks dirty. */
void app_refresh(App *a);
/* Lay out for the current terminal size (if it changed, or force). */
void app_layout(App *a, bool force);
/* Draw what is dirty (everything with force), then doupdate(). */
void app_draw(App *a, bool force);
void app_key(App *a, int ch);
void app_open_screen(App *a, Screen s);
/* Open the detail of (file, run_id, code_id). */
void app_open_detail(App *a, int file, long long run_id, long long code_id);

/* ---- batch.c, bench.c ---- */

int batch_run(const AppOptions *o);
int bench_run(const AppOptions *o);

/* Curses is up (tui_fatal must call endwin). */
extern bool tui_curses_active;

#endif /* DYNSCOPE_TUI_H */
