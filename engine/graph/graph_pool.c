/*
 * graph_pool.c -- arrays a running graph made and let die, kept for the
 * next elementwise op (in this run or a later one) that would allocate an
 * array of the same dtype and shape: that op writes into the kept one
 * (ufunc(..., out=), graph_inplace.c) instead.
 *
 * Why: a graph at 100k-1M elements allocates and frees the same few
 * intermediates on every run.  glibc serves blocks that big from the top of
 * its heap and hands the top back to the kernel whenever it grows past its
 * trim threshold (twice the largest block it has mapped), so the next run
 * faults those pages in again, one by one, zeroed.  How often that happens
 * depends on the order of the frees: a graph that frees each intermediate
 * at its last use faulted 550 pages a call where eager faulted 360, and ran
 * 1.3x slower than eager at 100k elements (exp, maximum, where, sum;
 * docs/performance.md).  Kept buffers are never faulted again.
 *
 * Invariants:
 *   - An array enters only when nothing else can reach it or its data: an
 *     exact ndarray held by its slot alone (refcount 1: no view, no buffer
 *     export, no other name), owning aligned, writeable, C-contiguous data
 *     of a plain dtype (bool, integer, floating, complex: no object
 *     references inside), of rank 1 or more and POOL_MIN_BYTES or more.
 *   - A dying array is kept only while fewer of its like (descr and shape)
 *     are kept than its graph has ops that take one (Program.pool_want,
 *     counted here by graph_pool_plan when the graph is compiled):
 *     a graph keeps what its next run takes, never one more array each run
 *     (np.where's result, which no op takes, is freed as eager frees it).
 *   - An array leaves to exactly one taker, who writes every element (a
 *     ufunc's out= of its full shape) before anything reads it: what it held
 *     before is never seen.
 *   - At most POOL_ENTRIES arrays and pool_budget() bytes are held in all
 *     ($DYNSCOPE_POOL_BYTES, default 32 MiB; 0 turns the pool off); the
 *     oldest leave first.  dynscope.reset() empties it.
 *   - Every call holds the GIL; a taker has the array to itself before a
 *     ufunc releases the GIL, so two threads running one graph never share
 *     a buffer.
 */
#include "graph_int.h"
#include "../base/tensorlib.h"

#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/ndarraytypes.h>     /* struct accessors only: no import_array */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Smaller arrays come from malloc's arenas, which keep their pages: nothing
   to save (and passing out= costs about what a small allocation does). */
_Static_assert(sizeof(npy_intp) == sizeof(Py_ssize_t), "shapes are compared as bytes");

#define POOL_MIN_BYTES (64 * 1024)
#define POOL_ENTRIES 16
#define POOL_DEFAULT_BYTES (32L * 1024 * 1024)

typedef struct PoolEntry {
    PyObject *array;           /* strong */
    Py_ssize_t nbytes;
    uint64_t stamp;            /* when it entered: the oldest leaves first */
} PoolEntry;

static PoolEntry pool[POOL_ENTRIES];
static int pool_count;
static Py_ssize_t pool_bytes;
static uint64_t pool_clock;

/* Bytes the pool may hold: $DYNSCOPE_POOL_BYTES when it is a number, else
   POOL_DEFAULT_BYTES.  Read on every give (a few hundred ns against the
   64 KiB or more of memory traffic that made the array), so a process can
   change it between runs. */
static Py_ssize_t
pool_budget(void)
{
    return engine_bytes_of(getenv("DYNSCOPE_POOL_BYTES"), POOL_DEFAULT_BYTES);
}

/* The item size of a plain dtype number (see the header), or 0.  From the
   C types, since the descr struct's item size moved in NumPy 2. */
static Py_ssize_t
plain_itemsize(int type_num)
{
    switch (type_num) {
    case NPY_BOOL: case NPY_BYTE: case NPY_UBYTE: return 1;
    case NPY_SHORT: case NPY_USHORT: case NPY_HALF: return sizeof(short);
    case NPY_INT: case NPY_UINT: return sizeof(int);
    case NPY_LONG: case NPY_ULONG: return sizeof(long);
    case NPY_LONGLONG: case NPY_ULONGLONG: return sizeof(long long);
    case NPY_FLOAT: return sizeof(float);
    case NPY_DOUBLE: return sizeof(double);
    case NPY_CFLOAT: return 2 * sizeof(float);
    case NPY_CDOUBLE: return 2 * sizeof(double);
    default: return 0;         /* long double (its size varies), object, ... */
    }
}

/* The bytes of array a, or 0 when its dtype is not a plain one. */
static Py_ssize_t
array_nbytes(PyArrayObject *a)
{
    Py_ssize_t n = plain_itemsize(PyArray_DESCR(a)->type_num);

    for (int i = 0; i < PyArray_NDIM(a); i++)
        n *= PyArray_DIMS(a)[i];
    return n;
}

/* See graph_int.h. */
Py_ssize_t
graph_pool_min_elements(PyObject *descr)
{
    Py_ssize_t itemsize = plain_itemsize(((PyArray_Descr *)descr)->type_num);

    return itemsize > 0 ? (POOL_MIN_BYTES + itemsize - 1) / itemsize : -1;
}

/* Remove entry i (its reference passes to the caller). */
static PyObject *
pool_remove(int i)
{
    PyObject *a = pool[i].array;

    pool_bytes -= pool[i].nbytes;
    pool[i] = pool[--pool_count];
    pool[pool_count].array = NULL;
    return a;
}

/* Whether kept array a has this descr (by identity), rank and shape. */
static bool
alike(PyArrayObject *a, PyObject *descr, int ndim, const npy_intp *dims)
{
    return (PyObject *)PyArray_DESCR(a) == descr && PyArray_NDIM(a) == ndim
           && memcmp(PyArray_DIMS(a), dims, (size_t)ndim * sizeof(npy_intp)) == 0;
}

/* The NumPy array recorded as slot s's value at capture: borrowed, or
   NULL when it was something else. */
static PyArrayObject *
slot_array_example(GraphObject *g, int s)
{
    PyObject *ex = node_example_value(GRAPH_NODE(g, s));
    PyTypeObject *ndarray = tensorlib_ndarray_type();        /* borrowed */

    return ex != NULL && ndarray != NULL && Py_IS_TYPE(ex, ndarray) ? (PyArrayObject *)ex : NULL;
}

/* See graph_int.h. */
int
graph_pool_plan(Program *p, GraphObject *g)
{
    bool any = false;

    for (int k = 0; k < p->ninstr && !any; k++)
        any = p->instr[k].inplace.pool_fn != NULL;
    if (!any)
        return 0;
    p->pool_want = PyMem_Calloc((size_t)p->nslots + 1, 1);
    if (p->pool_want == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (int s = p->ninputs; s < p->nslots; s++) {
        PyArrayObject *ex = slot_array_example(g, s);
        int want = 0;
        for (int k = 0; ex != NULL && k < p->ninstr; k++) {
            PyArrayObject *taken = slot_array_example(g, p->instr[k].dest);
            if (p->instr[k].inplace.pool_fn != NULL && taken != NULL
                && alike(taken, (PyObject *)PyArray_DESCR(ex), PyArray_NDIM(ex), PyArray_DIMS(ex)))
                want++;
        }
        p->pool_want[s] = (unsigned char)(want < 255 ? want : 255);
    }
    return 0;
}

/* See graph_int.h. */
PyObject *
graph_pool_take(PyObject *descr, int ndim, const Py_ssize_t *dims)
{
    int newest = -1;

    for (int i = 0; i < pool_count; i++) {
        if (alike((PyArrayObject *)pool[i].array, descr, ndim, dims)
            && (newest < 0 || pool[i].stamp > pool[newest].stamp))
            newest = i;
    }
    /* The newest: the one most likely still in cache, as malloc hands out
       the block freed last. */
    return newest >= 0 ? pool_remove(newest) : NULL;
}

/* See graph_int.h. */
bool
graph_pool_give(PyObject *obj, int want)
{
    PyTypeObject *ndarray = tensorlib_ndarray_type();       /* borrowed */
    const int need = NPY_ARRAY_OWNDATA | NPY_ARRAY_ALIGNED | NPY_ARRAY_WRITEABLE
                     | NPY_ARRAY_C_CONTIGUOUS;

    if (ndarray == NULL || !Py_IS_TYPE(obj, ndarray) || Py_REFCNT(obj) != 1)
        return false;
    PyArrayObject *a = (PyArrayObject *)obj;
    if ((PyArray_FLAGS(a) & need) != need || (PyArray_FLAGS(a) & NPY_ARRAY_WRITEBACKIFCOPY)
        || PyArray_NDIM(a) < 1)
        return false;
    Py_ssize_t nbytes = array_nbytes(a), budget;
    if (nbytes < POOL_MIN_BYTES || nbytes > (budget = pool_budget()))
        return false;
    int kept_alike = 0;
    for (int i = 0; i < pool_count; i++)
        kept_alike += alike((PyArrayObject *)pool[i].array, (PyObject *)PyArray_DESCR(a),
                            PyArray_NDIM(a), PyArray_DIMS(a));
    if (kept_alike >= want)
        return false;

    PyObject *evicted[POOL_ENTRIES];
    int nevicted = 0;
    while (pool_count == POOL_ENTRIES || pool_bytes + nbytes > budget) {
        int oldest = 0;
        for (int i = 1; i < pool_count; i++)
            if (pool[i].stamp < pool[oldest].stamp)
                oldest = i;
        evicted[nevicted++] = pool_remove(oldest);
    }
    pool[pool_count++] = (PoolEntry){obj, nbytes, ++pool_clock};
    pool_bytes += nbytes;
    /* Released once the pool is consistent again, in case a dealloc ever
       comes back here. */
    for (int i = 0; i < nevicted; i++)
        Py_DECREF(evicted[i]);
    return true;
}

/* See graph.h. */
void
graph_pool_clear(void)
{
    while (pool_count > 0)
        Py_DECREF(pool_remove(pool_count - 1));
    pool_bytes = 0;
}

/* See graph.h. */
Py_ssize_t
graph_pool_bytes(void)
{
    return pool_bytes;
}
