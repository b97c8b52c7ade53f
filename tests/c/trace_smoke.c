/*
 * trace_smoke.c -- drives trace/trace.h without the engine: the no-op
 * contract when no provider is loaded, and a fixed sequence of every event
 * kind for tests/test_trace_provider.py to capture and read back.
 *
 *   trace_smoke               no provider: every call is a no-op (check-c)
 *   trace_smoke noop          trace_init(NULL) (so $DYNSCOPE_TRACE_PROVIDER)
 *                             must fail; every call stays a no-op
 *   trace_smoke emit [HITS]   trace_init(NULL) (so $DYNSCOPE_TRACE_PROVIDER)
 *                             must load; prints "pid N", an "enabled KIND 0|1"
 *                             line per kind and "active 0|1", emits the
 *                             sequence below, then prints "emitted"
 *   trace_smoke fork-emit [HITS]  loads the provider, forks without exec;
 *                             the child does what emit does
 *
 * The sequence (docs/events.md): HITS frame_eval hits (default 3, code_id
 * 7, entry 0, guard_ns 100+i), one miss, one skip, then one event of every
 * cold kind with the values in emit_cold(), an EV_ENTRY_STATS (which has
 * no tracepoint), and a frame_skip whose strings are NULL (recorded as "").
 * Exit 0 on success, 1 on a failed check, 2 on bad usage.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../trace/trace.h"

static int failures;

#define CHECK(cond)                                                         \
    do {                                                                    \
        if (!(cond)) {                                                      \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, \
                    #cond);                                                 \
            failures++;                                                     \
        }                                                                   \
    } while (0)


/* The code object every cold event names. */
static EventRecord code_event(EventKind kind)
{
    EventRecord ev = {
        .kind = kind,
        .wall_ns = 1700000000000000000ull,
        .mono_ns = 42,
        .code_id = 7,
        .qualname = "Model.forward",
        .filename = "/src/model.py",
        .firstlineno = 12,
        .compile_id = "0/1",
        .frame_id = 0,
        .frame_compile_id = 1,
        .resume_offset = 0,
        .outcome = "",
        .guards_text = "",
        .reason = "",
        .entry_compile_id = "",
        .guard_kind = "",
        .expr = "",
        .observed = "",
        .break_kind = "",
        .break_file = "",
        .user_stack_json = "[]",
        .backend = "",
        .graph_code = "",
        .ops = "",
    };
    return ev;
}

/* Every call must be harmless when no provider is loaded. */
static void check_noop(void)
{
    CHECK(!trace_loaded());
    CHECK(!trace_frame_eval_enabled());
    CHECK(!trace_active());
    for (int k = 0; k < (int)EV__COUNT; k++) {
        CHECK(!trace_enabled((EventKind)k));
        EventRecord ev = code_event((EventKind)k);
        trace_emit(&ev);
    }
    CHECK(!trace_enabled((EventKind)-1));
    CHECK(!trace_enabled(EV__COUNT));
    trace_frame_eval(7, TRACE_FRAME_HIT, 0, 100);
}

static void emit_cold(void)
{
    EventRecord ev = code_event(EV_COMPILE_START);
    trace_emit(&ev);

    ev = code_event(EV_COMPILE_END);
    ev.outcome = "ok";
    ev.duration_ns = 123456;
    ev.graphs = 2;
    ev.nodes = 5;
    ev.guards = 3;
    ev.guards_text = "TYPE_MATCH L['x']\nTENSOR_MATCH L['x']";
    trace_emit(&ev);

    ev = code_event(EV_RECOMPILE);
    ev.reason = "L['x'].shape == (3, 4) (observed (5, 4))";
    trace_emit(&ev);

    ev = code_event(EV_GUARD_FAIL);
    ev.entry_compile_id = "0/0";
    ev.guard_kind = "TENSOR_MATCH";
    ev.expr = "L['x'].shape == (3, 4)";
    ev.observed = "(5, 4)";
    ev.guard_file = "/src/model.py";
    ev.guard_line = 12;
    trace_emit(&ev);

    ev = code_event(EV_GRAPH_BREAK);
    ev.break_kind = "call";
    ev.reason = "call to print";
    ev.break_file = "/src/model.py";
    ev.break_line = 15;
    ev.break_offset = 24;
    ev.user_stack_json = "[[\"/src/model.py\", 15, \"forward\", \"print(x)\"]]";
    ev.break_type = "DS0001";
    ev.break_class = "your code";
    trace_emit(&ev);

    ev = code_event(EV_GRAPH_COMPILED);
    ev.nodes = 4;
    ev.backend = "eager";
    ev.backend_ns = 789;
    ev.ops = "add,mul";
    trace_emit(&ev);

    ev = code_event(EV_CACHE_LIMIT);
    ev.reason = "L['n'] == 8";
    trace_emit(&ev);

    ev = code_event(EV_FRAME_SKIP);
    ev.reason = "generator";
    ev.break_type = "DS0028";
    ev.break_class = "engine limit";
    trace_emit(&ev);

    ev = code_event(EV_ENTRY_STATS);     /* no tracepoint: nothing recorded */
    ev.hits = 99;
    trace_emit(&ev);

    ev = code_event(EV_RESET);
    trace_emit(&ev);

    ev = code_event(EV_ANNOTATE);        /* the program's mark: no code fields traced */
    ev.annotation = "step";
    ev.annotation_phase = "mark";
    ev.annotation_fields = "{\"n\": 12}";
    trace_emit(&ev);

    /* NULL strings break the record's contract; they must still not crash. */
    memset(&ev, 0, sizeof ev);
    ev.kind = EV_FRAME_SKIP;
    ev.code_id = 8;
    trace_emit(&ev);
}

static int run_emit(int hits)
{
    if (trace_init(NULL) != 0) {
        fprintf(stderr, "trace_smoke: trace_init: %s\n", trace_error());
        return 1;
    }
    CHECK(trace_loaded());
    CHECK(strcmp(trace_error(), "") == 0);
    CHECK(trace_init("/nonexistent") == 0);      /* already loaded: a no-op */

    printf("pid %ld\n", (long)getpid());
    printf("enabled frame_eval %d\n", trace_frame_eval_enabled() ? 1 : 0);
    for (int k = 0; k < (int)EV__COUNT; k++)
        printf("enabled %s %d\n", event_kind_name((EventKind)k), trace_enabled((EventKind)k) ? 1 : 0);
    printf("active %d\n", trace_active() ? 1 : 0);

    for (int i = 0; i < hits; i++)
        trace_frame_eval(7, TRACE_FRAME_HIT, 0, (uint64_t)(100 + i));
    trace_frame_eval(7, TRACE_FRAME_MISS, -1, 250);
    trace_frame_eval(9, TRACE_FRAME_SKIP, -1, 0);
    emit_cold();
    printf("emitted\n");
    return failures ? 1 : 0;
}

/* Load the provider, then fork without exec: the child runs emit. */
static int run_fork_emit(int hits)
{
    if (trace_init(NULL) != 0) {
        fprintf(stderr, "trace_smoke: trace_init: %s\n", trace_error());
        return 1;
    }
    fflush(stdout);
    pid_t child = fork();
    if (child < 0) {
        perror("trace_smoke: fork");
        return 1;
    }
    if (child == 0) {
        int rc = run_emit(hits);
        fflush(stdout);
        _exit(rc);
    }
    int status;
    if (waitpid(child, &status, 0) != child || !WIFEXITED(status))
        return 1;
    return WEXITSTATUS(status);
}

/* trace_init(path) must fail and leave every call a no-op. */
static int run_noop(const char *path)
{
    check_noop();
    CHECK(trace_init(path) == -1);
    CHECK(trace_error()[0] != '\0');
    printf("trace_error: %s\n", trace_error());
    check_noop();
    emit_cold();
    return failures;
}

int main(int argc, char **argv)
{
    if (argc == 1) {
        /* check-c: no environment, no path, then a path to nothing. */
        unsetenv(TRACE_PROVIDER_ENV);
        run_noop(NULL);
        run_noop("/nonexistent/libdynscope-tp.so");
        if (failures)
            return 1;
        printf("trace_smoke: ok\n");
        return 0;
    }
    if (strcmp(argv[1], "noop") == 0 && argc == 2)
        return run_noop(NULL) ? 1 : 0;
    if (strcmp(argv[1], "emit") == 0 && argc <= 3)
        return run_emit(argc == 3 ? atoi(argv[2]) : 3);
    if (strcmp(argv[1], "fork-emit") == 0 && argc <= 3)
        return run_fork_emit(argc == 3 ? atoi(argv[2]) : 3);
    fprintf(stderr, "usage: trace_smoke [noop | emit [HITS] | fork-emit [HITS]]\n");
    return 2;
}
