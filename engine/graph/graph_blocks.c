/*
 * graph_blocks.c -- running a chain of elementwise NumPy ops block by block.
 *
 * Eager NumPy runs `((a + b) * 0.5 - a) * b` one op at a time over whole
 * arrays: on 10M float64 elements each op streams 160-240 MB through main
 * memory.  A graph knows the whole chain, so it can run every op of the
 * chain on the first BLOCK elements, then on the next BLOCK, ...: the
 * intermediates of one block (BLOCK_BYTES each) stay in cache and each
 * input is read from memory once.
 *
 * A run is a maximal sequence of consecutive instructions (at least two)
 * that are exactly rounded ufuncs (graph_inplace.c's list: the result
 * element i is a function of the operands' elements i only, and the loops
 * give the same bits on a slice as on the whole array), whose array
 * operands and results all had one shape at capture; the other operands
 * are constant Python scalars.  Values made by the run and read after it
 * (or output) are allocated whole, as eager would (np.empty: a fresh,
 * owning, C-contiguous array); values that die inside it live in one
 * block-sized scratch buffer each and never exist whole.
 *
 * Invariants (results bit-identical, nothing visible changes):
 *   - A run is blocked only when the arrays it touches do not fit in the
 *     last-level cache (run_fits_in_cache) and, on this call, every array
 *     operand from outside the run is an exact, C-contiguous ndarray with
 *     the capture's descr and shape; otherwise its instructions run one by
 *     one.
 *   - Floating-point errors: eager reports them per op (a warning, or an
 *     exception under np.errstate(...='raise')).  A blocked run calls each
 *     ufunc once per block, so it runs with NumPy's error handling off and
 *     reads the CPU's floating-point flags itself; if any op raised one,
 *     the blocked results are dropped and the run is executed again op by
 *     op, which warns or raises exactly as eager.  (The ops are pure and
 *     write only buffers the run made, so running them again is safe.)
 */
#include "graph_int.h"
#include "../base/tensorlib.h"

#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/ndarraytypes.h>     /* struct accessors only: no import_array */

#include <fenv.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Bytes of one operand's block.  Measured (docs/performance.md, "graphs at
   every size"): 32 KiB blocks lose to eager (each block costs every op a
   ufunc call, ~1 us); from 256 KiB to 1 MiB the gain is flat -- a run's few
   blocks in flight stay in cache and the calls cost ~2%. */
#define BLOCK_BYTES (512 * 1024)

/* Below this many elements a run is not blocked: whole arrays already sit
   in cache, and per-block calls would only add overhead
   (docs/performance.md, "graphs at every size"). */
#define BLOCK_MIN_ELEMENTS (512 * 1024)

#define FP_ERRORS (FE_DIVBYZERO | FE_OVERFLOW | FE_UNDERFLOW | FE_INVALID)

/* What one value made by the run is. */
typedef struct RunValue {
    PyObject *descr;        /* strong: its dtype at capture */
    bool whole;             /* read after the run: allocated whole */
    Py_ssize_t itemsize;
    int last;               /* the last op of the run that reads it (whole: INT_MAX) */
    int home;               /* the buffer its blocks live in (BlockRun.homes) */
} RunValue;

/* A buffer values live in while a block runs: a whole value's own array
   (which values dead before that value is written may borrow), or a
   block-sized scratch array.  Assigned once, by assign_homes. */
typedef struct Home {
    int whole_of;           /* the whole value owning it, or -1: scratch */
    PyObject *descr;        /* borrowed from that value: what it holds */
} Home;

struct BlockRun {
    int first, count;       /* instructions [first, first + count) */
    int ndim;
    npy_intp *shape;        /* owned: the shape at capture */
    PyObject *shape_tuple;  /* strong: the same, for np.empty */
    Py_ssize_t block;       /* elements per block */
    PyObject **ufunc;       /* owned array of strong refs: count items */
    RunValue *vals;         /* owned: count items, value i made by first + i */
    int nhomes;
    Home *homes;            /* owned: nhomes */
};

/* NumPy functions a run calls (strong, made once, kept for the process). */
static struct {
    PyObject *empty, *seterr, *all_kwnames, *all_ignore;
} np_fns;

static int
np_fns_ready(void)
{
    PyObject *numpy = tensorlib_numpy();     /* borrowed */

    if (np_fns.all_ignore != NULL)
        return 0;
    if (numpy == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "dynscope: NumPy is not loaded");
        return -1;
    }
    if ((np_fns.empty == NULL && (np_fns.empty = PyObject_GetAttrString(numpy, "empty")) == NULL)
        || (np_fns.seterr == NULL
            && (np_fns.seterr = PyObject_GetAttrString(numpy, "seterr")) == NULL)
        || (np_fns.all_kwnames == NULL
            && (np_fns.all_kwnames = Py_BuildValue("(s)", "all")) == NULL))
        return -1;
    np_fns.all_ignore = PyUnicode_InternFromString("ignore");
    return np_fns.all_ignore == NULL ? -1 : 0;
}

/* The example value of slot's node (borrowed or NULL). */
static PyObject *
example_of(GraphObject *g, int slot)
{
    return node_example_value(GRAPH_NODE(g, slot));
}

static bool
same_shape(PyArrayObject *a, int ndim, const npy_intp *shape)
{
    return PyArray_NDIM(a) == ndim
           && memcmp(PyArray_DIMS(a), shape, (size_t)ndim * sizeof(npy_intp)) == 0;
}

/* The exactly rounded ufunc instruction `in` may run on a block with out=,
   or NULL (borrowed). */
static PyObject *
block_ufunc(const Instr *in)
{
    if (!in->inplace.planned)
        return NULL;
    if (in->op_function)
        return in->inplace.direct;
    return in->inplace.exact_ufunc ? in->target : NULL;
}

/* Whether instruction k may join a run of arrays shaped (ndim, shape);
   ndim -1 asks for any shape and sets it. */
static bool
instr_blockable(const Program *p, GraphObject *g, int k, int *ndim, const npy_intp **shape)
{
    const Instr *in = &p->instr[k];
    PyTypeObject *ndarray = in->inplace.ndarray;
    PyObject *res = example_of(g, in->dest);

    if (block_ufunc(in) == NULL || res == NULL || !Py_IS_TYPE(res, ndarray)
        || PyArray_NDIM((PyArrayObject *)res) < 1)
        return false;
    if (*ndim < 0) {
        *ndim = PyArray_NDIM((PyArrayObject *)res);
        *shape = PyArray_DIMS((PyArrayObject *)res);
    }
    if (!same_shape((PyArrayObject *)res, *ndim, *shape))
        return false;
    for (int j = 0; j < in->nargs; j++) {
        if (in->args[j].kind != ARG_SLOT)
            continue;                     /* a constant scalar (inplace_plan) */
        PyObject *ex = example_of(g, in->args[j].slot);
        if (ex == NULL || !same_shape((PyArrayObject *)ex, *ndim, *shape))
            return false;
    }
    return true;
}

static void
run_clear(BlockRun *r)
{
    for (int i = 0; i < r->count; i++) {
        if (r->ufunc != NULL)
            Py_XDECREF(r->ufunc[i]);
        if (r->vals != NULL)
            Py_XDECREF(r->vals[i].descr);
    }
    PyMem_Free(r->ufunc);
    PyMem_Free(r->vals);
    PyMem_Free(r->homes);
    PyMem_Free(r->shape);
    Py_XDECREF(r->shape_tuple);
    memset(r, 0, sizeof(*r));
}

/*
 * Give every value of r a home, as a register allocator would, so that a
 * block needs as few buffers as the chain allows -- often none beyond the
 * arrays that outlive the run (eager NumPy, eliding temporaries, needs
 * those too):
 *   - a whole value lives in its own array;
 *   - another value takes, in order: the home of an operand of its op that
 *     dies there (the op writes over what it reads, element for element);
 *     the array of a whole value written later, once that array is free
 *     and the value is dead by then; a free scratch buffer; a new one.
 * A home holds one dtype.  0 / -1 (memory).
 */
static int
assign_homes(BlockRun *r, const Program *p)
{
    int *busy_until = PyMem_Calloc((size_t)r->count, sizeof(int));   /* by home */
    int first_slot = p->instr[r->first].dest;

    r->homes = PyMem_Calloc((size_t)r->count, sizeof(Home));
    if (busy_until == NULL || r->homes == NULL) {
        PyMem_Free(busy_until);
        PyErr_NoMemory();
        return -1;
    }
    for (int i = 0; i < r->count; i++)          /* the whole values' arrays first */
        if (r->vals[i].whole) {
            r->homes[r->nhomes] = (Home){i, r->vals[i].descr};
            r->vals[i].home = r->nhomes;
            busy_until[r->nhomes++] = -1;       /* free until value i is written */
        }
    for (int i = 0; i < r->count; i++) {
        RunValue *v = &r->vals[i];
        int h = -1;
        if (v->whole) {
            busy_until[v->home] = INT_MAX;
            continue;
        }
        const Instr *in = &p->instr[r->first + i];
        for (int j = 0; h < 0 && j < in->nargs; j++) {
            int vi = in->args[j].kind == ARG_SLOT ? in->args[j].slot - first_slot : -1;
            if (vi >= 0 && vi < i && !r->vals[vi].whole && r->vals[vi].last == i
                && r->homes[r->vals[vi].home].descr == v->descr)
                h = r->vals[vi].home;
        }
        for (int k = 0; h < 0 && k < r->nhomes; k++) {
            Home *hm = &r->homes[k];
            if (hm->descr == v->descr && busy_until[k] < i
                && (hm->whole_of < 0 || (hm->whole_of > i && v->last <= hm->whole_of)))
                h = k;
        }
        if (h < 0) {
            h = r->nhomes++;
            r->homes[h] = (Home){-1, v->descr};
        }
        v->home = h;
        busy_until[h] = v->last;
    }
    PyMem_Free(busy_until);
    return 0;
}

/* Fill r for instructions [first, first + count).  0 / -1. */
static int
run_make(BlockRun *r, const Program *p, GraphObject *g, int first, int count,
         const int *last_use)
{
    PyArrayObject *res0 = (PyArrayObject *)example_of(g, p->instr[first].dest);
    Py_ssize_t maxitem = 1;

    r->first = first;
    r->count = count;
    r->ndim = PyArray_NDIM(res0);
    r->shape = PyMem_Malloc((size_t)r->ndim * sizeof(npy_intp));
    r->ufunc = PyMem_Calloc((size_t)count, sizeof(PyObject *));
    r->vals = PyMem_Calloc((size_t)count, sizeof(RunValue));
    r->shape_tuple = PyTuple_New(r->ndim);
    if (r->shape == NULL || r->ufunc == NULL || r->vals == NULL || r->shape_tuple == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (int d = 0; d < r->ndim; d++) {
        r->shape[d] = PyArray_DIMS(res0)[d];
        PyObject *n = PyLong_FromSsize_t(r->shape[d]);
        if (n == NULL)
            return -1;
        PyTuple_SET_ITEM(r->shape_tuple, d, n);
    }
    for (int i = 0; i < count; i++) {
        const Instr *in = &p->instr[first + i];
        PyObject *ex = example_of(g, in->dest);
        PyObject *size = PyObject_GetAttrString(ex, "itemsize");
        if (size == NULL)
            return -1;
        r->vals[i].itemsize = PyLong_AsSsize_t(size);
        Py_DECREF(size);
        if (r->vals[i].itemsize <= 0)
            return PyErr_Occurred() ? -1 : (PyErr_SetString(PyExc_ValueError, "itemsize"), -1);
        if (r->vals[i].itemsize > maxitem)
            maxitem = r->vals[i].itemsize;
        r->vals[i].descr = Py_NewRef((PyObject *)PyArray_DESCR((PyArrayObject *)ex));
        r->vals[i].whole = last_use[in->dest] >= first + count;
        r->vals[i].last = r->vals[i].whole ? INT_MAX : last_use[in->dest] - first;
        r->ufunc[i] = Py_NewRef(block_ufunc(in));
    }
    r->block = BLOCK_BYTES / maxitem;
    return assign_homes(r, p);
}

/* The size of cpu0's last-level cache as Linux describes it (one cache
   instance, e.g. one CCX's L3, not the socket's total that sysconf reports
   on some machines), or 0.  /sys/devices/system/cpu/cpu0/cache/indexN:
   the highest `level`, its `size` ("32768K"). */
static Py_ssize_t
sysfs_cache_bytes(void)
{
    Py_ssize_t best = 0;
    int best_level = 0;

    for (int i = 0; i < 8; i++) {
        char path[96], buf[32];
        int level = 0;
        long long size = 0;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
        FILE *f = fopen(path, "r");
        if (f == NULL)
            break;
        if (fgets(buf, sizeof buf, f) != NULL)
            level = atoi(buf);
        fclose(f);
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        if ((f = fopen(path, "r")) == NULL)
            continue;
        if (fgets(buf, sizeof buf, f) != NULL) {
            char *end;
            size = strtoll(buf, &end, 10);
            size *= *end == 'K' ? 1024 : *end == 'M' ? 1024 * 1024 : 1;
        }
        fclose(f);
        if (level > best_level && size > 0) {
            best_level = level;
            best = (Py_ssize_t)size;
        }
    }
    return best;
}

/* Bytes of the last-level cache: $DYNSCOPE_CACHE_BYTES when set (a machine
   whose cache is shared or misreported, and the tests), else what Linux
   says of cpu0's (sysfs_cache_bytes), else sysconf's, else 32 MiB.  The
   environment is read when a graph is compiled, the system once. */
static Py_ssize_t
last_level_cache_bytes(void)
{
    static Py_ssize_t system;
    Py_ssize_t set = engine_bytes_of(getenv("DYNSCOPE_CACHE_BYTES"), -1);

    if (set >= 0)
        return set;
    if (system == 0) {
        long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
        system = sysfs_cache_bytes();
        if (system == 0)
            system = l3 > 0 ? l3 : 32L * 1024 * 1024;
    }
    return system;
}

/* The bytes of example `ex` (an array), or 0. */
static Py_ssize_t
nbytes_of(PyObject *ex)
{
    PyObject *v = ex ? PyObject_GetAttrString(ex, "nbytes") : NULL;
    Py_ssize_t n = v && PyLong_Check(v) ? PyLong_AsSsize_t(v) : 0;
    Py_XDECREF(v);
    PyErr_Clear();
    return n > 0 ? n : 0;
}

/*
 * Whether the arrays instructions [k, k + n) touch -- their operands from
 * outside, the values that outlive them, and one intermediate, which is
 * what eager NumPy (eliding temporaries) keeps -- fit in the last-level
 * cache.  Then op-by-op already runs from cache, and blocks only add their
 * calls (measured: ~10% slower for 4 ops on 1M float64, 25% faster on 10M).
 */
static bool
run_fits_in_cache(const Program *p, GraphObject *g, int k, int n, const int *last_use)
{
    int first_slot = p->instr[k].dest;
    Py_ssize_t bytes = nbytes_of(example_of(g, p->instr[k].dest));   /* an intermediate */

    for (int i = k; i < k + n; i++) {
        const Instr *in = &p->instr[i];
        for (int j = 0; j < in->nargs; j++) {
            const Arg *a = &in->args[j];
            bool seen = false;
            if (a->kind != ARG_SLOT || a->slot >= first_slot)
                continue;
            for (int i2 = k; i2 <= i && !seen; i2++)          /* counted once */
                for (int j2 = 0; j2 < p->instr[i2].nargs && !seen; j2++)
                    seen = (i2 < i || j2 < j) && p->instr[i2].args[j2].kind == ARG_SLOT
                           && p->instr[i2].args[j2].slot == a->slot;
            if (!seen)
                bytes += nbytes_of(example_of(g, a->slot));
        }
        if (last_use[in->dest] >= k + n)
            bytes += nbytes_of(example_of(g, in->dest));
    }
    return bytes <= last_level_cache_bytes();
}

/* See graph_int.h. */
int
blocks_plan(Program *p, GraphObject *g, const int *last_use)
{
    int k = 0;

    for (k = 0; k < p->ninstr; k++)
        p->instr[k].block_run = -1;
    for (k = 0; k < p->ninstr;) {
        int ndim = -1, n = 0;
        const npy_intp *shape = NULL;
        while (k + n < p->ninstr && instr_blockable(p, g, k + n, &ndim, &shape))
            n++;
        Py_ssize_t total = 1;
        for (int d = 0; n >= 2 && d < ndim; d++)
            total *= shape[d];
        /* shapes are guarded: a run not worth blocking at capture never is */
        if (n < 2 || total < BLOCK_MIN_ELEMENTS || run_fits_in_cache(p, g, k, n, last_use)) {
            k += n > 0 ? n : 1;
            continue;
        }
        if (np_fns_ready() < 0 || inplace_out_kwnames() == NULL)
            return -1;
        BlockRun *runs = PyMem_Realloc(p->runs, (size_t)(p->nruns + 1) * sizeof(BlockRun));
        if (runs == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        p->runs = runs;
        memset(&runs[p->nruns], 0, sizeof(BlockRun));
        if (run_make(&runs[p->nruns], p, g, k, n, last_use) < 0) {
            run_clear(&runs[p->nruns]);
            return -1;
        }
        p->instr[k].block_run = p->nruns++;
        k += n;
    }
    return 0;
}

/* See graph_int.h. */
void
blocks_clear(Program *p)
{
    for (int i = 0; i < p->nruns; i++)
        run_clear(&p->runs[i]);
    PyMem_Free(p->runs);
    p->runs = NULL;
    p->nruns = 0;
}

/* See graph_int.h. */
int
blocks_traverse(Program *p, visitproc visit, void *arg)
{
    for (int i = 0; i < p->nruns; i++) {
        BlockRun *r = &p->runs[i];
        Py_VISIT(r->shape_tuple);
        for (int j = 0; j < r->count; j++) {
            Py_VISIT(r->ufunc[j]);
            Py_VISIT(r->vals[j].descr);
        }
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* Running.                                                            */

/* Per-call state of a run: for each operand slot from outside the run its
   flat view; for each value made by the run its whole array and flat view
   (whole values) or its scratch buffer. */
typedef struct RunState {
    PyObject **flat;        /* by slot: strong flat 1-D view, or NULL */
    PyObject **whole;       /* by run value: strong whole array, or NULL */
    PyObject **buf;         /* by home: strong flat view of a whole array, or
                               a scratch array */
} RunState;

/* A 1-D view of C-contiguous array a: a.reshape(-1).  New reference. */
static PyObject *
flat_view(PyObject *a)
{
    static PyObject *reshape;       /* interned "reshape", kept */
    PyObject *args[2] = {a, NULL};

    if (reshape == NULL && (reshape = PyUnicode_InternFromString("reshape")) == NULL)
        return NULL;
    args[1] = PyLong_FromLong(-1);
    if (args[1] == NULL)
        return NULL;
    PyObject *v = PyObject_VectorcallMethod(reshape, args,
                                            2 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    Py_DECREF(args[1]);
    return v;
}

/* np.empty(shape, descr).  New reference. */
static PyObject *
new_array(PyObject *shape, PyObject *descr)
{
    PyObject *args[3] = {NULL, shape, descr};
    return PyObject_Vectorcall(np_fns.empty, args + 1, 2 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
}

/* Whether every array operand from outside the run allows blocking. */
static bool
operands_allow(const Program *p, const BlockRun *r, PyObject **v)
{
    for (int i = 0; i < r->count; i++) {
        const Instr *in = &p->instr[r->first + i];
        for (int j = 0; j < in->nargs; j++) {
            const Arg *a = &in->args[j];
            if (a->kind != ARG_SLOT || a->slot >= p->instr[r->first].dest)
                continue;                     /* a constant, or made by the run */
            PyArrayObject *x = (PyArrayObject *)v[a->slot];
            if (!Py_IS_TYPE(x, in->inplace.ndarray)
                || (PyObject *)PyArray_DESCR(x) != in->inplace.arg_descr[j]
                || !PyArray_CHKFLAGS(x, NPY_ARRAY_C_CONTIGUOUS)
                || !same_shape(x, r->ndim, r->shape))
                return false;
        }
    }
    return true;
}

/* The elements [start, start + len) of 1-D array `flat`: flat itself when
   that is all of it, else a slice (a view).  New reference. */
static PyObject *
block_of(PyObject *flat, Py_ssize_t start, Py_ssize_t len)
{
    if (start == 0 && len == PyArray_DIMS((PyArrayObject *)flat)[0])
        return Py_NewRef(flat);
    PyObject *lo = PyLong_FromSsize_t(start), *hi = PyLong_FromSsize_t(start + len);
    PyObject *slice = lo && hi ? PySlice_New(lo, hi, NULL) : NULL;
    Py_XDECREF(lo);
    Py_XDECREF(hi);
    if (slice == NULL)
        return NULL;
    PyObject *b = PyObject_GetItem(flat, slice);
    Py_DECREF(slice);
    return b;
}

/* The block of run value vi (new reference or NULL). */
static PyObject *
value_block(const BlockRun *r, const RunState *st, int vi, Py_ssize_t start, Py_ssize_t len)
{
    int h = r->vals[vi].home;
    return block_of(st->buf[h], r->homes[h].whole_of >= 0 ? start : 0, len);
}

/* The block of operand j of instruction `in` (new reference or NULL). */
static PyObject *
operand_block(const BlockRun *r, const RunState *st, const Arg *a, int first_slot,
              Py_ssize_t start, Py_ssize_t len)
{
    if (a->kind != ARG_SLOT)
        return Py_NewRef(a->obj);
    if (a->slot < first_slot)
        return block_of(st->flat[a->slot], start, len);
    return value_block(r, st, a->slot - first_slot, start, len);
}

/* Run every op of r on the block [start, start + len).  0 / -1; *fp
   gathers the floating-point flags the ops raised. */
static int
run_block(const Program *p, const BlockRun *r, const RunState *st,
          Py_ssize_t start, Py_ssize_t len, int *fp)
{
    int first_slot = p->instr[r->first].dest;
    PyObject *stack[INPLACE_MAX_ARGS + 2], **argv = stack + 1;

    for (int i = 0; i < r->count; i++) {
        const Instr *in = &p->instr[r->first + i];
        int made = 0;
        PyObject *res = NULL;
        for (; made < in->nargs; made++)
            if ((argv[made] = operand_block(r, st, &in->args[made], first_slot,
                                            start, len)) == NULL)
                goto out;
        argv[made] = value_block(r, st, i, start, len);
        if (argv[made] == NULL)
            goto out;
        made++;
        feclearexcept(FP_ERRORS);
        res = PyObject_Vectorcall(r->ufunc[i], argv,
                                  (size_t)in->nargs | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                  inplace_out_kwnames());
        *fp |= fetestexcept(FP_ERRORS);
out:
        for (int j = 0; j < made; j++)
            Py_DECREF(argv[j]);
        if (res == NULL)
            return -1;
        Py_DECREF(res);
    }
    return 0;
}

/* Release st (cannot fail). */
static void
state_clear(const BlockRun *r, RunState *st, int first_slot)
{
    for (int s = 0; st->flat != NULL && s < first_slot; s++)
        Py_XDECREF(st->flat[s]);
    for (int i = 0; i < r->count; i++) {
        if (st->whole != NULL)
            Py_XDECREF(st->whole[i]);
        if (st->buf != NULL && i < r->nhomes)
            Py_XDECREF(st->buf[i]);
    }
    PyMem_Free(st->flat);
    PyMem_Free(st->whole);
    PyMem_Free(st->buf);
}

/* Make st for r: flat views of the operands from outside the run, whole
   arrays (and their flat views) and scratch buffers.  0 / -1. */
static int
state_make(const Program *p, const BlockRun *r, PyObject **v, RunState *st, int first_slot)
{
    st->flat = PyMem_Calloc((size_t)first_slot + 1, sizeof(PyObject *));
    st->whole = PyMem_Calloc((size_t)r->count, sizeof(PyObject *));
    st->buf = PyMem_Calloc((size_t)r->count, sizeof(PyObject *));
    if (st->flat == NULL || st->whole == NULL || st->buf == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (int i = 0; i < r->count; i++) {
        const Instr *in = &p->instr[r->first + i];
        for (int j = 0; j < in->nargs; j++) {
            const Arg *a = &in->args[j];
            if (a->kind == ARG_SLOT && a->slot < first_slot && st->flat[a->slot] == NULL
                && (st->flat[a->slot] = flat_view(v[a->slot])) == NULL)
                return -1;
        }
        if (r->vals[i].whole
            && (st->whole[i] = new_array(r->shape_tuple, r->vals[i].descr)) == NULL)
            return -1;
    }
    for (int h = 0; h < r->nhomes; h++) {
        const Home *hm = &r->homes[h];
        if (hm->whole_of >= 0)
            st->buf[h] = flat_view(st->whole[hm->whole_of]);
        else {
            PyObject *n = PyLong_FromSsize_t(r->block);
            st->buf[h] = n ? new_array(n, hm->descr) : NULL;
            Py_XDECREF(n);
        }
        if (st->buf[h] == NULL)
            return -1;
    }
    return 0;
}

/* np.seterr(all="ignore"): the old settings (a new dict) or NULL. */
static PyObject *
errors_ignore(void)
{
    PyObject *args[2] = {NULL, np_fns.all_ignore};
    return PyObject_Vectorcall(np_fns.seterr, args + 1, 0 | PY_VECTORCALL_ARGUMENTS_OFFSET,
                               np_fns.all_kwnames);
}

/* np.seterr(**old); steals old.  0 / -1. */
static int
errors_restore(PyObject *old)
{
    PyObject *empty = PyTuple_New(0);
    PyObject *r = empty ? PyObject_Call(np_fns.seterr, empty, old) : NULL;
    Py_XDECREF(empty);
    Py_DECREF(old);
    Py_XDECREF(r);
    return r == NULL ? -1 : 0;
}

/* See graph_int.h. */
int
blocks_run(const Program *p, int ri, PyObject **v)
{
    const BlockRun *r = &p->runs[ri];
    int first_slot = p->instr[r->first].dest, fp = 0, rc = -1;
    Py_ssize_t total = 1;
    RunState st = {NULL, NULL, NULL};

    for (int d = 0; d < r->ndim; d++)
        total *= r->shape[d];
    if (total < BLOCK_MIN_ELEMENTS || !operands_allow(p, r, v))
        return 0;
    if (state_make(p, r, v, &st, first_slot) < 0)
        goto out;
    PyObject *old = errors_ignore();
    if (old == NULL)
        goto out;
    for (Py_ssize_t start = 0; start < total && rc != -2; start += r->block) {
        Py_ssize_t len = total - start < r->block ? total - start : r->block;
        if (run_block(p, r, &st, start, len, &fp) < 0)
            rc = -2;
    }
    if (errors_restore(old) < 0 || rc == -2) {
        rc = -1;
        goto out;
    }
    if (fp != 0) {              /* eager reports these per op: run op by op */
        rc = 0;
        goto out;
    }
    for (int i = 0; i < r->count; i++)
        if (r->vals[i].whole) {
            v[p->instr[r->first + i].dest] = st.whole[i];
            st.whole[i] = NULL;
        }
    rc = r->count;
out:
    state_clear(r, &st, first_slot);
    return rc;
}
