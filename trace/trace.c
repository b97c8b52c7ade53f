/*
 * trace.c -- loads the LTTng tracepoint provider with dlopen and points the
 * inline checks of trace.h at its tracepoints (DESIGN.md 4.2).  Until a
 * provider loads, every check reads a constant 0 and every function
 * pointer is a no-op, so the engine never needs LTTng to build or run.
 *
 * Invariants: trace_frame_eval_on is never NULL; trace_kind_on[k] is NULL
 * or a live tracepoint state word; the function pointers are never NULL.
 * Written only by trace_init() (once, at import, under the GIL).
 */
#define _GNU_SOURCE
#include "trace.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const int trace_off = 0;

static void emit_noop(const EventRecord *ev)
{
    (void)ev;
}

static void frame_eval_noop(long long code_id, int result, int entry, uint64_t guard_ns)
{
    (void)code_id;
    (void)result;
    (void)entry;
    (void)guard_ns;
}

const volatile int *trace_frame_eval_on = &trace_off;
TraceFrameEvalFn trace_frame_eval_fn = frame_eval_noop;
TraceEmitFn trace_emit_fn = emit_noop;
const volatile int *trace_kind_on[EV__COUNT];

static void *provider;          /* dlopen handle; never closed */
static char error_text[512];

static int fail(const char *what, const char *detail)
{
    snprintf(error_text, sizeof error_text, "%s%s%s", what, detail ? ": " : "",
             detail ? detail : "");
    return -1;
}

/* Resolve sym in h, or NULL with error_text set. */
static void *resolve(void *h, const char *sym)
{
    dlerror();
    void *p = dlsym(h, sym);
    if (p == NULL)
        fail("tracepoint provider lacks a symbol", sym);
    return p;
}

int trace_init(const char *provider_path)
{
    if (provider != NULL)
        return 0;
    const char *env = getenv(TRACE_PROVIDER_ENV);
    const char *path = env != NULL ? env : provider_path;
    if (path == NULL || path[0] == '\0' || strcmp(path, "0") == 0)
        return fail("tracing off: no provider (set " TRACE_PROVIDER_ENV ")", NULL);

    /* RTLD_GLOBAL: liblttng-ust and the provider's tracepoint symbols must
       be visible process-wide, as lttng-ust(3) asks of dlopen'ed providers. */
    void *h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    if (h == NULL)
        return fail("cannot load the tracepoint provider", dlerror());

    TraceAbiFn abi = (TraceAbiFn)resolve(h, TRACE_SYM_ABI);
    TraceEmitFn emit = (TraceEmitFn)resolve(h, TRACE_SYM_EMIT);
    TraceFrameEvalFn frame_eval = (TraceFrameEvalFn)resolve(h, TRACE_SYM_FRAME_EVAL);
    TraceStateFn state = (TraceStateFn)resolve(h, TRACE_SYM_STATE);
    if (abi == NULL || emit == NULL || frame_eval == NULL || state == NULL)
        goto out_close;     /* error_text says which symbol */
    if (abi() != TRACE_ABI) {
        char detail[96];
        snprintf(detail, sizeof detail, "provider 0x%08x, engine 0x%08x (rebuild it)",
                 (unsigned)abi(), (unsigned)TRACE_ABI);
        fail("tracepoint provider built for another ABI", detail);
        goto out_close;
    }
    const volatile int *fe_on = state(TRACE_KIND_FRAME_EVAL);
    if (fe_on == NULL) {
        fail("tracepoint provider has no frame_eval tracepoint", NULL);
        goto out_close;
    }

    /* Functions first, then the words the inline checks read. */
    trace_emit_fn = emit;
    trace_frame_eval_fn = frame_eval;
    for (int k = 0; k < (int)EV__COUNT; k++)
        trace_kind_on[k] = state(k);
    trace_frame_eval_on = fe_on;
    provider = h;
    error_text[0] = '\0';
    return 0;

out_close:
    /* Nothing of it was published.  The provider's constructor registered
       its probes with liblttng-ust; its destructor unregisters them. */
    dlclose(h);
    return -1;
}

int trace_loaded(void)
{
    return provider != NULL;
}

const char *trace_error(void)
{
    return error_text;
}

int trace_active(void)
{
    for (int k = 0; k < (int)EV__COUNT; k++)
        if (trace_enabled((EventKind)k))
            return 1;
    return 0;
}
