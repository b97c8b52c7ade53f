/*
 * dyntop.c -- main(): dyntop's options (getopt_long), the checks made before
 * curses starts (a database that cannot be read -- any one of several -- is
 * an error on stderr naming it and exit status 2, never a garbled screen),
 * and the loop: draw, wait for a key or the next poll, refresh.  Manual:
 * docs/dyntop.md, docs/dyntop.1; design: DESIGN.md 4.4.
 */
#include "tui.h"

#include <errno.h>
#include <getopt.h>
#include <locale.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DYNTOP_VERSION "0.1"

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
    stop_signal = sig;
}

static void usage(FILE *out)
{
    fprintf(out,
        "usage: dyntop [options] FILE...\n"
        "       dyntop -b [-n N] [-d SECS] [--sort COL] [--filter TEXT] [--limit N] FILE...\n"
        "\n"
        "A top for the dynscope capture engine: reads a dynscope database (live or\n"
        "finished) read-only and shows, per code object, its cache entries, hits,\n"
        "misses, recompiles, graphs, graph breaks, capture time and last failing guard.\n"
        "Several files (a job's ranks, a file each) are shown together, each row with\n"
        "its run's RANK; v shows the functions that diverge between the runs.\n"
        "\n"
        "options:\n"
        "  -d, --delay SECS      poll the database every SECS seconds (default 1.0)\n"
        "  -n, --iterations N    stop after N refreshes (batch default: 1)\n"
        "  -b, --batch           print the summary and the table as text, no curses\n"
        "  -w, --width COLS      batch: fit the table into COLS columns (default: no limit)\n"
        "  -s, --sort COL        sort column: name file entries hits misses recompiles\n"
        "                        graphs breaks capture guard flags rank host; a leading +\n"
        "                        sorts ascending, - descending (default: recompiles)\n"
        "  -f, --filter TEXT     show code objects whose name or file (or, with several\n"
        "                        files, rank or host) contains TEXT\n"
        "      --limit N         batch: print at most N rows\n"
        "  -r, --run ID          show run ID of each file (all: every run; default: the\n"
        "                        newest run, followed when a newer one starts)\n"
        "      --cache-limit N   the cache size limit the run used (default: 8, or\n"
        "                        unknown when a frame holds more entries than that)\n"
        "      --no-color        no colours (also when NO_COLOR is set)\n"
        "  -h, --help            this help\n"
        "  -V, --version         the version\n"
        "\n"
        "Keys: ? in dyntop.  Manual: docs/dyntop.md, man dyntop.\n"
        "Exit status: 0, 1 on a runtime error, 2 on a usage error or a database\n"
        "that cannot be read (missing, not SQLite, not dynscope, newer schema).\n");
}

static void usage_error(const char *fmt, const char *arg)
{
    fputs("dyntop: ", stderr);
    fprintf(stderr, fmt, arg);
    fputs("\n(dyntop --help lists the options)\n", stderr);
    exit(2);
}

static long parse_long(const char *s, const char *what, long min)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *s == '\0' || *end != '\0' || v < min)
        usage_error(what, s);
    return v;
}

enum {
    OPT_LIMIT = 256,
    OPT_CACHE_LIMIT,
    OPT_NO_COLOR,
    OPT_BENCH,
};

static void parse_options(int argc, char **argv, AppOptions *o)
{
    static const struct option longopts[] = {
        {"delay", required_argument, NULL, 'd'},
        {"iterations", required_argument, NULL, 'n'},
        {"batch", no_argument, NULL, 'b'},
        {"width", required_argument, NULL, 'w'},
        {"sort", required_argument, NULL, 's'},
        {"filter", required_argument, NULL, 'f'},
        {"limit", required_argument, NULL, OPT_LIMIT},
        {"run", required_argument, NULL, 'r'},
        {"cache-limit", required_argument, NULL, OPT_CACHE_LIMIT},
        {"no-color", no_argument, NULL, OPT_NO_COLOR},
        {"bench-refresh", required_argument, NULL, OPT_BENCH},   /* hidden */
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    memset(o, 0, sizeof *o);
    o->delay = 1.0;
    o->sort = -1;
    o->run_pick = MODEL_RUN_NEWEST;
    o->cache_limit = 0;
    o->color = getenv("NO_COLOR") == NULL || getenv("NO_COLOR")[0] == '\0';
    int ch;
    while ((ch = getopt_long(argc, argv, "d:n:bw:s:f:r:hV", longopts, NULL)) != -1) {
        switch (ch) {
        case 'd': {
            char *end;
            o->delay = strtod(optarg, &end);
            if (*optarg == '\0' || *end != '\0' || !(o->delay > 0) || o->delay > 86400)
                usage_error("-d wants seconds > 0, got '%s'", optarg);
            if (o->delay < 0.05)
                o->delay = 0.05;
            break;
        }
        case 'n': o->iterations = parse_long(optarg, "-n wants a count >= 1, got '%s'", 1); break;
        case 'b': o->batch = true; break;
        case 'w': o->width = (int)parse_long(optarg, "-w wants columns >= 20, got '%s'", 20); break;
        case 's': {
            const char *name = optarg;
            if (*name == '+' || *name == '-') {
                o->sort_set_order = true;
                o->ascending = *name == '+';
                name++;
            }
            o->sort = table_column_by_name(name);
            if (o->sort < 0)
                usage_error("unknown sort column '%s' (name file entries hits misses "
                            "recompiles graphs breaks capture guard flags rank host)", optarg);
            break;
        }
        case 'f': o->filter = optarg; break;
        case OPT_LIMIT: o->limit = parse_long(optarg, "--limit wants a count >= 1, got '%s'", 1); break;
        case 'r':
            o->run_pick = strcmp(optarg, "all") == 0
                          ? MODEL_RUN_ALL : parse_long(optarg, "-r wants a run id or 'all', got '%s'", 0);
            break;
        case OPT_CACHE_LIMIT:
            o->cache_limit = (int)parse_long(optarg, "--cache-limit wants a count >= 1, got '%s'", 1);
            break;
        case OPT_NO_COLOR: o->color = false; break;
        case OPT_BENCH:
            o->bench_refreshes = parse_long(optarg, "--bench-refresh wants a count >= 1, got '%s'", 1);
            break;
        case 'h': usage(stdout); exit(0);
        case 'V': printf("dyntop %s (dynscope schema v%d)\n", DYNTOP_VERSION, STORE_SCHEMA_VERSION);
                  exit(0);
        default: fputs("(dyntop --help lists the options)\n", stderr); exit(2);
        }
    }
    if (optind >= argc)
        usage_error("%s", "give the dynscope database to show: dyntop [options] FILE...");
    o->paths = (const char *const *)argv + optind;
    o->npaths = (size_t)(argc - optind);
}

static void start_curses(const AppOptions *o)
{
    if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO))
        tui_fatal(2, "not a terminal; use -b for text output (dyntop -b -n 1 FILE)");
    if (newterm(NULL, stdout, stdin) == NULL)
        tui_fatal(2, "cannot start curses on this terminal (TERM=%s)",
                  getenv("TERM") ? getenv("TERM") : "");
    tui_curses_active = true;
    cbreak();
    noecho();
    nonl();
    keypad(stdscr, TRUE);
    set_escdelay(25);
    curs_set(0);
    colors_init(o->color);
}

static void stop_curses(void)
{
    if (!tui_curses_active)
        return;
    endwin();
    tui_curses_active = false;
}

static int run_interactive(const AppOptions *o)
{
    App a;
    char *err = NULL;
    if (app_open(&a, o, &err) < 0) {
        fprintf(stderr, "dyntop: %s\n", err ? err : "cannot open the database");
        free(err);
        return 2;
    }
    start_curses(o);
    app_start(&a);
    double next = tui_mono_s() + o->delay;
    while (!a.quit && !stop_signal) {
        app_draw(&a, false);
        if (o->iterations > 0 && a.model.refreshes >= o->iterations)
            break;
        double now = tui_mono_s();
        int wait_ms = a.paused ? 250 : (int)((next - now) * 1000.0);
        wait_ms = wait_ms < 0 ? 0 : wait_ms > 250 ? 250 : wait_ms;
        timeout(wait_ms);
        int ch = getch();
        if (ch != ERR)
            app_key(&a, ch);
        now = tui_mono_s();
        if (!a.paused && now >= next) {
            app_refresh(&a);
            next = now + o->delay;
        }
    }
    stop_curses();
    app_close(&a);
    return 0;
}

int main(int argc, char **argv)
{
    AppOptions o;
    setlocale(LC_ALL, "");
    fmt_init_locale();
    parse_options(argc, argv, &o);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_DFL);

    if (o.bench_refreshes > 0)
        return bench_run(&o);
    if (o.batch)
        return batch_run(&o);
    return run_interactive(&o);
}
