/*
 * bench_trace.c -- what the LTTng hooks of trace/trace.h cost the engine:
 * a trace_frame_eval() call in a tight loop next to the same loop without
 * it (the call compiled out), and a cold trace_emit().  Driven by
 * scripts/bench_trace.py, which runs it with and without a provider and
 * under scripts/lttng-capture.sh; docs/performance.md has the numbers.
 *
 *   bench_trace ROUNDS ITERS [ENABLED_ITERS]
 *       prints a "# ..." line saying what is loaded and enabled, then one
 *       line per case: "CASE iters median_ns min_ns max_ns" (ns per
 *       iteration, over ROUNDS rounds).  A case whose tracepoint a session
 *       has enabled runs ENABLED_ITERS iterations (default ITERS), so a
 *       recorded run can stay within the tracer's buffers.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "../trace/trace.h"

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The loop body both variants share: a dependency chain the compiler cannot
   drop or vectorize, about the cost of a few instructions. */
#define BODY(acc, i)                                   \
    do {                                               \
        (acc) += (i) ^ ((acc) >> 3);                   \
        __asm__ volatile("" : "+r"(acc));              \
    } while (0)

__attribute__((noinline)) static uint64_t loop_plain(uint64_t n)
{
    uint64_t acc = 0;
    for (uint64_t i = 0; i < n; i++)
        BODY(acc, i);
    return acc;
}

__attribute__((noinline)) static uint64_t loop_frame_eval(uint64_t n)
{
    uint64_t acc = 0;
    for (uint64_t i = 0; i < n; i++) {
        BODY(acc, i);
        trace_frame_eval(7, TRACE_FRAME_HIT, 0, acc & 0xff);
    }
    return acc;
}

static EventRecord cold_record(void)
{
    EventRecord ev = {
        .kind = EV_COMPILE_END, .code_id = 7, .qualname = "Model.forward",
        .filename = "/src/model.py", .firstlineno = 12, .compile_id = "0/1",
        .frame_id = 0, .frame_compile_id = 1, .outcome = "ok",
        .duration_ns = 123456, .graphs = 1, .nodes = 5, .guards = 3,
        .guards_text = "", .reason = "", .entry_compile_id = "", .guard_kind = "",
        .expr = "", .observed = "", .break_kind = "", .break_file = "",
        .user_stack_json = "", .backend = "", .graph_code = "", .ops = "",
    };
    return ev;
}

__attribute__((noinline)) static uint64_t loop_emit(uint64_t n)
{
    EventRecord ev = cold_record();
    uint64_t acc = 0;
    for (uint64_t i = 0; i < n; i++) {
        BODY(acc, i);
        ev.duration_ns = acc;
        trace_emit(&ev);
    }
    return acc;
}

typedef uint64_t (*LoopFn)(uint64_t);

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    if (argc != 3 && argc != 4) {
        fprintf(stderr, "usage: bench_trace ROUNDS ITERS [ENABLED_ITERS]\n");
        return 2;
    }
    int rounds = atoi(argv[1]);
    uint64_t iters = strtoull(argv[2], NULL, 10);
    uint64_t enabled_iters = argc == 4 ? strtoull(argv[3], NULL, 10) : iters;
    if (rounds < 1 || rounds > 1000 || iters < 1 || enabled_iters < 1) {
        fprintf(stderr, "bench_trace: bad ROUNDS or ITERS\n");
        return 2;
    }
    int loaded = trace_init(NULL) == 0;
    int fe_on = trace_frame_eval_enabled() ? 1 : 0;
    int ce_on = trace_enabled(EV_COMPILE_END) ? 1 : 0;
    printf("# provider %s; frame_eval enabled %d; compile_end enabled %d\n",
           loaded ? "loaded" : "not loaded", fe_on, ce_on);

    const struct { const char *name; LoopFn fn; uint64_t n; } cases[] = {
        {"plain", loop_plain, iters},
        {"frame_eval", loop_frame_eval, fe_on ? enabled_iters : iters},
        {"emit_compile_end", loop_emit, ce_on ? enabled_iters : iters},
    };
    enum { NCASES = sizeof cases / sizeof cases[0] };
    double *ns = calloc((size_t)rounds * NCASES, sizeof *ns);
    if (ns == NULL)
        return 1;
    volatile uint64_t sink = 0;
    for (int c = 0; c < NCASES; c++)      /* warm up */
        sink += cases[c].fn(cases[c].n < 1000 ? cases[c].n : 1000);
    for (int r = 0; r < rounds; r++) {
        for (int k = 0; k < NCASES; k++) {
            int c = (k + r) % NCASES;      /* rotate the order between rounds */
            uint64_t t0 = now_ns();
            sink += cases[c].fn(cases[c].n);
            ns[c * rounds + r] = (double)(now_ns() - t0) / (double)cases[c].n;
        }
    }
    for (int c = 0; c < NCASES; c++) {
        double *v = ns + c * rounds;
        qsort(v, (size_t)rounds, sizeof *v, cmp_double);
        printf("%s %llu %.3f %.3f %.3f\n", cases[c].name, (unsigned long long)cases[c].n,
               v[rounds / 2], v[0], v[rounds - 1]);
    }
    free(ns);
    (void)sink;
    return 0;
}
