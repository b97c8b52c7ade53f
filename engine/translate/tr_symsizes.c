/*
 * tr_symsizes.c -- sizes as expressions (issue 37): what a size the graph
 * computes is, in terms of the frame's dynamic sizes, so that the code's
 * arithmetic and branches on sizes are decided while tracing where they can
 * be, instead of keeping the whole source static.
 *
 * A symbol is one dynamic dimension of an input (tr_sym_input): a size of
 * 2 or more, as its TENSOR_MATCH checks.  A size value is a linear
 * expression over symbols (SymExpr: c + sum of k * s).  What gets one:
 *   - a shape read of an input's dynamic dimension (tensorops_dim);
 *   - +, -, unary -, * by a constant, exact // by a constant, of those;
 *   - every dimension of an op result whose shape rule is below (cat,
 *     elementwise ops with broadcasting, getitem with slices, reshape,
 *     matmul, ...), checked against the result's example.
 * What that buys:
 *   - a dimension whose expression is a constant is a constant (the last
 *     dimension of a torch.cat along another one), not a graph value;
 *   - a comparison of two expressions is decided by the symbols' range
 *     (each >= 2: `numel() == 0` is False) or, failing that, on the
 *     example, with a GUARD_SIZES_HOLD on the outcome (`s0 + 1 - s1 <= 0`):
 *     the relations between sizes that the translation relied on.
 *
 * Invariants:
 *   - an expression is exact for every input that passes the entry's guards:
 *     a rule that needs a condition (a slice's bound within the size) guards
 *     it, and every rule is checked against the example it was traced on;
 *   - a value with no expression is what it was before: a graph value.
 */
#include "translate_int.h"
#include "../base/tensorlib.h"

#include <string.h>

#define SIZE_MIN_VALUE 2           /* what TENSOR_MATCH lets a dynamic size be */
#define MAX_DIMS 32

/* ---- expressions ---- */

static void expr_const(SymExpr *e, long long c)
{
    memset(e, 0, sizeof(*e));
    e->c = c;
}

/* *e += k * b.  false when the result needs more than SYM_TERMS terms or
   overflows. */
static bool expr_add_scaled(SymExpr *e, const SymExpr *b, long long k)
{
    SymExpr r;
    if (__builtin_mul_overflow(b->c, k, &r.c) || __builtin_add_overflow(r.c, e->c, &r.c))
        return false;
    r.n = 0;
    int i = 0, j = 0;
    while (i < e->n || j < b->n) {
        int sym;
        long long kk;
        if (j >= b->n || (i < e->n && e->t[i].sym < b->t[j].sym)) {
            sym = e->t[i].sym;
            kk = e->t[i++].k;
        }
        else {
            long long bk;
            if (__builtin_mul_overflow(b->t[j].k, k, &bk))
                return false;
            sym = b->t[j].sym;
            kk = bk;
            if (i < e->n && e->t[i].sym == sym && __builtin_add_overflow(kk, e->t[i++].k, &kk))
                return false;
            j++;
        }
        if (kk == 0)
            continue;
        if (r.n == SYM_TERMS)
            return false;
        r.t[r.n].sym = sym;
        r.t[r.n++].k = kk;
    }
    *e = r;
    return true;
}

static bool expr_equal(const SymExpr *a, const SymExpr *b)
{
    if (a->c != b->c || a->n != b->n)
        return false;
    for (int i = 0; i < a->n; i++)
        if (a->t[i].sym != b->t[i].sym || a->t[i].k != b->t[i].k)
            return false;
    return true;
}

/* e's value in this trace (the symbols' example sizes). */
static long long expr_value(Tracer *t, const SymExpr *e)
{
    long long v = e->c;
    for (int i = 0; i < e->n; i++)
        v += e->t[i].k * (long long)t->syms[e->t[i].sym].value;
    return v;
}

/* The least and greatest values e can take (each symbol >= 2); has_lo /
   has_hi false for none. */
static void expr_range(const SymExpr *e, long long *lo, bool *has_lo, long long *hi, bool *has_hi)
{
    *lo = *hi = e->c;
    *has_lo = *has_hi = true;
    for (int i = 0; i < e->n; i++) {
        if (e->t[i].k > 0) {
            *lo += e->t[i].k * SIZE_MIN_VALUE;
            *has_hi = false;
        }
        else {
            *hi += e->t[i].k * SIZE_MIN_VALUE;
            *has_lo = false;
        }
    }
}

/* ---- symbols and expressions of values ---- */

static int new_symbol(Tracer *t, int acc, int dim, Py_ssize_t value)
{
    for (int i = 0; i < t->nsyms; i++)
        if (t->syms[i].acc == acc && t->syms[i].dim == dim)
            return i;
    if (t->nsyms == t->syms_cap) {
        int cap = t->syms_cap ? t->syms_cap * 2 : 8;
        struct SymVar *s = PyMem_Realloc(t->syms, sizeof(*s) * (size_t)cap);
        if (s == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        t->syms = s;
        t->syms_cap = cap;
    }
    t->syms[t->nsyms] = (struct SymVar){acc, dim, value};
    return t->nsyms++;
}

/* The shape of example obj: its rank (-1 if it has none) and sizes. */
static int example_shape(PyObject *obj, Py_ssize_t *sizes)
{
    PyObject *shape = PyObject_GetAttrString(obj, "shape");
    int n = shape && PyTuple_Check(shape) && PyTuple_GET_SIZE(shape) <= MAX_DIMS
            ? (int)PyTuple_GET_SIZE(shape) : -1;
    for (int d = 0; d < n; d++)
        sizes[d] = PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, d));
    Py_XDECREF(shape);
    if (PyErr_Occurred()) {
        PyErr_Clear();
        return -1;
    }
    return n;
}

static int set_dims(Value *v, const SymExpr *dims, int n, uint32_t known)
{
    SymExpr *s = PyMem_Malloc(sizeof(SymExpr) * (size_t)(n > 0 ? n : 1));
    if (s == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    memcpy(s, dims, sizeof(SymExpr) * (size_t)n);
    PyMem_Free(v->sdims);
    v->sdims = s;
    v->sdims_known = known;
    return 0;
}

static int set_sym(Value *v, const SymExpr *e)
{
    if (v->sym == NULL && (v->sym = PyMem_Malloc(sizeof(SymExpr))) == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    *v->sym = *e;
    return 0;
}

/* (contract: translate.h) */
int tr_sym_attach(Value *v, const SymExpr *e)
{
    return v->kind == V_TENSOR ? set_sym(v, e) : 0;
}

/* (contract: translate.h) */
int tr_sym_input(Tracer *t, Value *v, int acc, uint32_t dims)
{
    Py_ssize_t sizes[MAX_DIMS];
    SymExpr e[MAX_DIMS];
    int n = example_shape(v->obj, sizes);
    if (n < 0)
        return 0;
    for (int d = 0; d < n; d++) {
        expr_const(&e[d], sizes[d]);
        if (dims & (1u << d)) {
            int s = new_symbol(t, acc, d, sizes[d]);
            if (s < 0)
                return -1;
            e[d].c = 0;
            e[d].n = 1;
            e[d].t[0].sym = s;
            e[d].t[0].k = 1;
        }
    }
    return set_dims(v, e, n, n >= 32 ? ~(uint32_t)0 : (1u << n) - 1);
}

/* The expression of size value v: a plain int constant, or a value with
   one.  false otherwise. */
static bool size_expr_of(Value *v, SymExpr *e)
{
    if (v->kind == V_CONST && PyLong_CheckExact(v->obj)) {
        long long c = PyLong_AsLongLong(v->obj);
        if (c == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            return false;
        }
        expr_const(e, c);
        return true;
    }
    if (v->kind == V_TENSOR && v->sym != NULL) {
        *e = *v->sym;
        return true;
    }
    return false;
}

/* The expressions of tensor value x's dimensions into dims (rank *n):
   known says which.  false when x is no tensor with a shape. */
static bool dims_of(Value *x, SymExpr *dims, int *n, uint32_t *known)
{
    if (x->kind != V_TENSOR || (!tensor_is_array(x->obj) && !tensor_is_torch(x->obj)))
        return false;
    Py_ssize_t sizes[MAX_DIMS];
    *n = example_shape(x->obj, sizes);
    if (*n < 0)
        return false;
    *known = 0;
    for (int d = 0; d < *n; d++) {
        if (!x->dynshape) {
            expr_const(&dims[d], sizes[d]);
            *known |= 1u << d;
        }
        else if (x->sdims != NULL && (x->sdims_known & (1u << d))) {
            dims[d] = x->sdims[d];
            *known |= 1u << d;
        }
    }
    return true;
}

/* (contract: translate.h) */
Value *tr_sym_static_dim(Tracer *t, Value *x, int d)
{
    if (x->sdims == NULL || d < 0 || d >= MAX_DIMS || !(x->sdims_known & (1u << d))
        || x->sdims[d].n != 0)
        return NULL;
    return new_const(t, PyLong_FromLongLong(x->sdims[d].c));
}

void tr_sym_size_read(Tracer *t, Value *x, int d, Value *size)
{
    (void)t;
    if (size != NULL && size->kind == V_TENSOR && x->sdims != NULL && d >= 0 && d < MAX_DIMS
        && (x->sdims_known & (1u << d)) && set_sym(size, &x->sdims[d]) < 0)
        PyErr_Clear();                  /* no expression: a graph value as before */
}

/* ---- relations ---- */

static const char *const compare_names[6] = {"lt", "le", "eq", "ne", "gt", "ge"};

static bool compare_holds(int op, long long v)
{
    switch (op) {
    case 0: return v < 0;
    case 1: return v <= 0;
    case 2: return v == 0;
    case 3: return v != 0;
    case 4: return v > 0;
    default: return v >= 0;
    }
}

/* Whether `e OP 0` holds for every value of the symbols: 1, 0 (never), -1
   (it depends). */
static int compare_decided(const SymExpr *e, int op)
{
    long long lo, hi;
    bool has_lo, has_hi;
    expr_range(e, &lo, &has_lo, &hi, &has_hi);
    bool pos = has_lo && lo > 0, nonneg = has_lo && lo >= 0;
    bool neg = has_hi && hi < 0, nonpos = has_hi && hi <= 0;
    switch (op) {
    case 0: return neg ? 1 : nonneg ? 0 : -1;
    case 1: return nonpos ? 1 : pos ? 0 : -1;
    case 2: return e->n == 0 ? e->c == 0 : (pos || neg) ? 0 : -1;
    case 3: return e->n == 0 ? e->c != 0 : (pos || neg) ? 1 : -1;
    case 4: return pos ? 1 : nonpos ? 0 : -1;
    default: return nonneg ? 1 : neg ? 0 : -1;
    }
}

/* Guard that `e OP 0` holds (GUARD_SIZES_HOLD).  0 / -1. */
static int guard_relation(Tracer *t, const SymExpr *e, int op)
{
    PyObject *tup = PyTuple_New(2 + 3 * e->n);
    if (tup == NULL)
        return -1;
    PyTuple_SET_ITEM(tup, 0, PyLong_FromLongLong(e->c));
    PyTuple_SET_ITEM(tup, 1, PyLong_FromLong(op));
    for (int i = 0; i < e->n; i++) {
        const struct SymVar *s = &t->syms[e->t[i].sym];
        PyTuple_SET_ITEM(tup, 2 + 3 * i, PyLong_FromLong(s->acc));
        PyTuple_SET_ITEM(tup, 3 + 3 * i, PyLong_FromLong(s->dim));
        PyTuple_SET_ITEM(tup, 4 + 3 * i, PyLong_FromLongLong(e->t[i].k));
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(tup); i++) {
        if (PyTuple_GET_ITEM(tup, i) == NULL) {
            Py_DECREF(tup);
            return -1;
        }
    }
    int acc = t->syms[e->t[0].sym].acc;
    int rc = guardset_add(t->gs, GUARD_SIZES_HOLD, acc, tup, 0) < 0 ? -1 : 0;
    Py_DECREF(tup);
    return rc;
}

/* Whether `e OP 0` holds for these inputs: decided by the ranges, else on
   the example and guarded.  1 / 0, or -1 (tracing stops). */
static int relation_holds(Tracer *t, const SymExpr *e, int op)
{
    int r = compare_decided(e, op);
    if (r >= 0)
        return r;
    bool holds = compare_holds(op, expr_value(t, e));
    static const int negated[6] = {5, 4, 3, 2, 1, 0};   /* not (<) is >=, ... */
    if (guard_relation(t, e, holds ? op : negated[op]) < 0)
        return -1;
    return holds;
}

/* (contract: translate.h) */
int tr_sym_operator(Tracer *t, const char *opname, Value *a, Value *b, Value **out, SymExpr *e)
{
    SymExpr x, y;
    if (!size_expr_of(a, &x) || (b != NULL && !size_expr_of(b, &y))
        || (a->sym == NULL && (b == NULL || b->sym == NULL)))
        return 0;
    if (b == NULL) {
        if (strcmp(opname, "neg") != 0)
            return 0;
        expr_const(e, 0);
        if (!expr_add_scaled(e, &x, -1))
            return 0;
    }
    else if (strcmp(opname, "add") == 0 || strcmp(opname, "sub") == 0) {
        *e = x;
        if (!expr_add_scaled(e, &y, opname[0] == 'a' ? 1 : -1))
            return 0;
    }
    else if (strcmp(opname, "mul") == 0 && (x.n == 0 || y.n == 0)) {
        expr_const(e, 0);
        if (!expr_add_scaled(e, x.n == 0 ? &y : &x, x.n == 0 ? x.c : y.c))
            return 0;
    }
    else if (strcmp(opname, "floordiv") == 0 && y.n == 0 && y.c > 0) {
        /* exact only when every coefficient divides: (4 * s0 + 8) // 4 */
        if (x.c % y.c != 0)
            return 0;
        for (int i = 0; i < x.n; i++)
            if (x.t[i].k % y.c != 0)
                return 0;
        *e = x;
        e->c /= y.c;
        for (int i = 0; i < e->n; i++)
            e->t[i].k /= y.c;
    }
    else {
        for (int op = 0; op < 6; op++) {
            if (strcmp(opname, compare_names[op]) != 0)
                continue;
            SymExpr d = x;
            if (!expr_add_scaled(&d, &y, -1))
                return 0;
            int r = relation_holds(t, &d, op);
            if (r < 0)
                return -1;
            *out = new_const(t, PyBool_FromLong(r));
            return *out ? 1 : -1;
        }
        return 0;
    }
    if (e->n == 0) {
        *out = new_const(t, PyLong_FromLongLong(e->c));
        return *out ? 1 : -1;
    }
    return 2;
}

/* ---- shape rules of op results ---- */

/* A result's dimensions being worked out: up to MAX_DIMS expressions and
   which are known. */
typedef struct Shape {
    int n;
    uint32_t known;
    SymExpr d[MAX_DIMS];
} Shape;

static bool shape_of(Value *x, Shape *s)
{
    return dims_of(x, s->d, &s->n, &s->known);
}

/* The keyword argument `name` among args (kwnames names the last ones), or
   NULL. */
static Value *kwarg(Value **args, int nargs, PyObject *kwnames, const char *name)
{
    Py_ssize_t nk = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t i = 0; i < nk; i++)
        if (PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, i), name) == 0)
            return args[nargs - nk + i];
    return NULL;
}

/* A constant int argument: true with *v. */
static bool const_int(Value *a, long long *v)
{
    if (a == NULL || a->kind != V_CONST || !PyLong_CheckExact(a->obj))
        return false;
    *v = PyLong_AsLongLong(a->obj);
    if (*v == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return false;
    }
    return true;
}

/* Dimension index d (negative from the end) of rank n: 0..n-1, or -1. */
static int norm_dim(long long d, int n)
{
    if (d < 0)
        d += n;
    return d >= 0 && d < n ? (int)d : -1;
}

/* Broadcast b into r (numpy's rule, aligned at the end).  false when a
   dimension is not known to follow: two different expressions. */
static bool broadcast_into(Shape *r, const Shape *b)
{
    int n = r->n > b->n ? r->n : b->n;
    Shape out = {.n = n};
    for (int i = 0; i < n; i++) {
        int ra = r->n - n + i, ba = b->n - n + i;
        bool rk = ra < 0 || (r->known & (1u << ra)), bk = ba < 0 || (b->known & (1u << ba));
        SymExpr one;
        expr_const(&one, 1);
        const SymExpr *x = ra < 0 ? &one : &r->d[ra], *y = ba < 0 ? &one : &b->d[ba];
        if (!rk || !bk)
            continue;                               /* unknown stays unknown */
        if (x->n == 0 && x->c == 1)
            out.d[i] = *y;
        else if ((y->n == 0 && y->c == 1) || expr_equal(x, y))
            out.d[i] = *x;
        else if (x->n == 0 && x->c >= 2)
            out.d[i] = *x;                          /* the op raises unless y equals it */
        else if (y->n == 0 && y->c >= 2)
            out.d[i] = *y;
        else
            continue;
        out.known |= 1u << i;
    }
    *r = out;
    return true;
}

/* Names whose result has the shape of its tensor arguments broadcast
   together (the elementwise ops). */
static const char *const elementwise[] = {
    "add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "and_", "or_", "xor", "lt",
    "le", "eq", "ne", "gt", "ge", "where", "maximum", "minimum", "masked_fill", "div",
    "true_divide", "multiply", "subtract", "divide", "power", "greater", "less", "equal",
    "not_equal", "greater_equal", "less_equal", "logical_and", "logical_or", "bitwise_and",
    "bitwise_or", "neg", "abs", "exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid",
    "relu", "gelu", "silu", "softmax", "log_softmax", "dropout", "contiguous", "float",
    "half", "bfloat16", "double", "to", "type", "type_as", "clone", "detach", "triu", "tril",
    "logical_not", "bool", "int", "long", "invert", "pos", "erf", "reciprocal", "square",
    "clamp", "clip", "negative", "exp2", "log1p", "expm1", "sign", "floor", "ceil", "round",
    "isnan", "isinf", "nan_to_num", "fill_", "zero_", "copy_", "add_", "mul_", "sub_", "div_",
    "masked_fill_", "clamp_", "neg_", NULL};

static bool name_in(const char *name, const char *const *names)
{
    for (int i = 0; names[i] != NULL; i++)
        if (strcmp(name, names[i]) == 0)
            return true;
    return false;
}

static bool rule_elementwise(Value **args, int n, Shape *r)
{
    bool any = false;
    for (int i = 0; i < n; i++) {
        Shape s;
        if (args[i]->kind != V_TENSOR || !shape_of(args[i], &s))
            continue;
        if (s.n == 0 && PyLong_Check(args[i]->obj))
            continue;                               /* a size value: a number */
        if (!any)
            *r = s;
        else if (!broadcast_into(r, &s))
            return false;
        any = true;
    }
    return any;
}

/* cat / concatenate (tensors, dim=0). */
static bool rule_cat(Value **args, int nargs, PyObject *kwnames, Shape *r)
{
    Value *seq = args[0], *dimv = nargs - (kwnames ? PyTuple_GET_SIZE(kwnames) : 0) > 1 ? args[1]
                                  : kwarg(args, nargs, kwnames, "dim");
    if (dimv == NULL)
        dimv = kwarg(args, nargs, kwnames, "axis");
    long long dim = 0;
    if ((dimv != NULL && !const_int(dimv, &dim)) || (seq->kind != V_TUPLE && seq->kind != V_LIST)
        || seq->n == 0)
        return false;
    for (int i = 0; i < seq->n; i++) {
        Shape s;
        if (!shape_of(seq->items[i], &s) || (i > 0 && s.n != r->n))
            return false;
        int d = norm_dim(dim, s.n);
        if (d < 0)
            return false;
        if (i == 0) {
            *r = s;
            continue;
        }
        if ((r->known & (1u << d)) && (s.known & (1u << d))) {
            if (!expr_add_scaled(&r->d[d], &s.d[d], 1))
                r->known &= ~(1u << d);
        }
        else {
            r->known &= ~(1u << d);
        }
        for (int k = 0; k < s.n; k++)      /* the others must be equal: keep a constant */
            if (k != d && !(r->known & (1u << k)) && (s.known & (1u << k)) && s.d[k].n == 0) {
                r->d[k] = s.d[k];
                r->known |= 1u << k;
            }
    }
    return true;
}

/* x[index] with ints, slices of constant bounds, None and Ellipsis.  A
   slice of a dimension with symbols guards that its bound lies inside. */
static int rule_getitem(Tracer *t, Value *x, Value *index, Shape *r)
{
    Shape s;
    if (!shape_of(x, &s))
        return 0;
    PyObject *items[MAX_DIMS];
    int ni = 0;
    if (index->kind == V_CONST && PyTuple_CheckExact(index->obj)) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(index->obj) && ni < MAX_DIMS; i++)
            items[ni++] = PyTuple_GET_ITEM(index->obj, i);
    }
    else if (index->kind == V_TUPLE) {
        for (int i = 0; i < index->n && ni < MAX_DIMS; i++) {
            if (index->items[i]->kind != V_CONST)
                return 0;
            items[ni++] = index->items[i]->obj;
        }
    }
    else if (index->kind == V_CONST) {
        items[ni++] = index->obj;
    }
    else {
        return 0;
    }
    int consumed = 0;
    for (int i = 0; i < ni; i++)
        if (items[i] != Py_None && items[i] != Py_Ellipsis)
            consumed++;
    r->n = 0;
    r->known = 0;
    int src = 0;
    for (int i = 0; i < ni; i++) {
        PyObject *it = items[i];
        if (it == Py_Ellipsis) {
            for (int k = 0; k < s.n - consumed && src < s.n; k++, src++) {
                r->d[r->n] = s.d[src];
                r->known |= (s.known & (1u << src)) ? 1u << r->n : 0;
                r->n++;
            }
            continue;
        }
        if (it == Py_None) {
            expr_const(&r->d[r->n], 1);
            r->known |= 1u << r->n++;
            continue;
        }
        if (src >= s.n || r->n >= MAX_DIMS)
            return 0;
        if (PyLong_CheckExact(it)) {
            src++;                                  /* the dimension is gone */
            continue;
        }
        if (!PySlice_Check(it))
            return 0;
        PySliceObject *sl = (PySliceObject *)it;
        bool whole = sl->start == Py_None && sl->stop == Py_None && sl->step == Py_None;
        bool known = (s.known & (1u << src)) != 0;
        SymExpr len = s.d[src];
        if (!whole && known && len.n != 0) {
            /* x[a:], x[:b], x[-k:], x[:-k] on a symbolic size e: with the
               bound guarded inside e, the length is an expression */
            long long a = 0, b = 0;
            bool has_a = sl->start != Py_None, has_b = sl->stop != Py_None;
            if (sl->step != Py_None || has_a == has_b
                || (has_a && !PyLong_CheckExact(sl->start)) || (has_b && !PyLong_CheckExact(sl->stop)))
                return 0;
            long long bound = has_a ? PyLong_AsLongLong(sl->start) : PyLong_AsLongLong(sl->stop);
            if (PyErr_Occurred()) {
                PyErr_Clear();
                return 0;
            }
            long long need = bound < 0 ? -bound : bound;
            SymExpr room = len;               /* e - need >= 0 */
            room.c -= need;
            int h = relation_holds(t, &room, 5);
            if (h < 0)
                return -1;
            if (h == 0)
                return 0;                     /* shorter than the bound: left unknown */
            (void)a;
            (void)b;
            if ((has_a && bound >= 0) || (has_b && bound < 0)) {
                len.c -= need;                /* x[a:], x[:-k]: e - a */
            }
            else {
                expr_const(&len, need);       /* x[-k:], x[:b]: k, b */
            }
        }
        else if (!whole) {
            if (!known)
                return 0;
            Py_ssize_t start, stop, step;
            if (PySlice_Unpack(it, &start, &stop, &step) < 0) {
                PyErr_Clear();
                return 0;
            }
            expr_const(&len, PySlice_AdjustIndices((Py_ssize_t)len.c, &start, &stop, step));
        }
        r->d[r->n] = len;
        r->known |= known ? 1u << r->n : 0;
        r->n++;
        src++;
    }
    for (; src < s.n && r->n < MAX_DIMS; src++) {
        r->d[r->n] = s.d[src];
        r->known |= (s.known & (1u << src)) ? 1u << r->n : 0;
        r->n++;
    }
    return 1;
}

/* The sizes a call lists, positionally (view(a, b)) or as one tuple/list
   (view((a, b))), from args[first]: their expressions, -1 as the constant
   -1.  false when one has none. */
static bool listed_sizes(Value **args, int npos, int first, Shape *r)
{
    Value **items = args + first;
    int n = npos - first;
    if (n == 1 && (args[first]->kind == V_TUPLE || args[first]->kind == V_LIST)) {
        items = args[first]->items;
        n = args[first]->n;
    }
    else if (n == 1 && args[first]->kind == V_CONST && PyTuple_Check(args[first]->obj)) {
        PyObject *tup = args[first]->obj;
        if (PyTuple_GET_SIZE(tup) > MAX_DIMS)
            return false;
        r->n = (int)PyTuple_GET_SIZE(tup);
        for (int i = 0; i < r->n; i++) {
            PyObject *o = PyTuple_GET_ITEM(tup, i);
            if (!PyLong_Check(o))
                return false;
            expr_const(&r->d[i], PyLong_AsLongLong(o));
        }
        r->known = r->n >= 32 ? ~(uint32_t)0 : (1u << r->n) - 1;
        return !PyErr_Occurred() || (PyErr_Clear(), false);
    }
    if (n > MAX_DIMS || n < 0)
        return false;
    r->n = n;
    r->known = 0;
    for (int i = 0; i < n; i++) {
        if (!size_expr_of(items[i], &r->d[i]))
            return false;
        r->known |= 1u << i;
    }
    return true;
}

static bool product(const Shape *s, SymExpr *p)
{
    expr_const(p, 1);
    for (int i = 0; i < s->n; i++) {
        if (!(s->known & (1u << i)))
            return false;
        if (s->d[i].n == 0) {
            SymExpr q;
            expr_const(&q, 0);
            if (!expr_add_scaled(&q, p, s->d[i].c))
                return false;
            *p = q;
        }
        else if (p->n == 0) {
            SymExpr q;
            expr_const(&q, 0);
            if (!expr_add_scaled(&q, &s->d[i], p->c))
                return false;
            *p = q;
        }
        else {
            return false;                     /* a product of symbols: not linear */
        }
    }
    return true;
}

/* view / reshape: the listed sizes, a -1 worked out from the input's
   element count when that divides exactly. */
static bool rule_reshape(Value **args, int npos, int first, Value *x, Shape *r)
{
    Shape in;
    if (!shape_of(x, &in) || !listed_sizes(args, npos, first, r))
        return false;
    int minus = -1;
    SymExpr rest;
    expr_const(&rest, 1);
    for (int i = 0; i < r->n; i++) {
        if (r->d[i].n == 0 && r->d[i].c == -1) {
            if (minus >= 0)
                return false;
            minus = i;
        }
        else if (r->d[i].n == 0) {
            rest.c *= r->d[i].c;
        }
        else {
            rest.n = -1;                          /* a symbolic size listed */
        }
    }
    if (minus < 0)
        return true;
    SymExpr total;
    r->known &= ~(1u << minus);
    if (rest.n < 0 || rest.c <= 0 || !product(&in, &total))
        return true;
    if (total.c % rest.c != 0)
        return true;
    for (int i = 0; i < total.n; i++)
        if (total.t[i].k % rest.c != 0)
            return true;
    total.c /= rest.c;
    for (int i = 0; i < total.n; i++)
        total.t[i].k /= rest.c;
    r->d[minus] = total;
    r->known |= 1u << minus;
    return true;
}

/* expand(sizes): -1 keeps the input's dimension. */
static bool rule_expand(Value **args, int npos, Value *x, Shape *r)
{
    Shape in;
    if (!shape_of(x, &in) || !listed_sizes(args, npos, 1, r) || r->n < in.n)
        return false;
    for (int i = 0; i < r->n; i++) {
        int j = in.n - r->n + i;
        if (r->d[i].n == 0 && r->d[i].c == -1) {
            if (j < 0 || !(in.known & (1u << j)))
                r->known &= ~(1u << i);
            else
                r->d[i] = in.d[j];
        }
    }
    return true;
}

static void take_dims(Shape *r, const Shape *s, int from, int to)
{
    for (int i = from; i < to && r->n < MAX_DIMS; i++) {
        r->d[r->n] = s->d[i];
        r->known |= (s->known & (1u << i)) ? 1u << r->n : 0;
        r->n++;
    }
}

/* matmul / bmm / @: batch dimensions broadcast, then a[-2], b[-1]. */
static bool rule_matmul(Value *a, Value *b, Shape *r)
{
    Shape x, y;
    if (!shape_of(a, &x) || !shape_of(b, &y) || x.n == 0 || y.n == 0)
        return false;
    *r = (Shape){0};
    if (x.n == 1 && y.n == 1)
        return true;
    if (x.n == 1) {
        take_dims(r, &y, 0, y.n - 2);
        take_dims(r, &y, y.n - 1, y.n);
        return true;
    }
    if (y.n == 1) {
        take_dims(r, &x, 0, x.n - 1);
        return true;
    }
    Shape bx = {0}, by = {0};
    take_dims(&bx, &x, 0, x.n - 2);
    take_dims(&by, &y, 0, y.n - 2);
    if (!broadcast_into(&bx, &by))
        return false;
    *r = bx;
    take_dims(r, &x, x.n - 2, x.n - 1);
    take_dims(r, &y, y.n - 1, y.n);
    return true;
}

/* Which dimensions a reduction drops: dim (an int or a tuple of them) and
   keepdim.  false for a reduction over everything (a 0-d result is known
   anyway: it has no dimensions). */
static bool rule_reduce(Value **args, int npos, int nargs, PyObject *kwnames, Shape *r)
{
    Shape s;
    if (!shape_of(args[0], &s))
        return false;
    Value *dimv = npos > 1 ? args[1] : kwarg(args, nargs, kwnames, "dim");
    if (dimv == NULL)
        dimv = kwarg(args, nargs, kwnames, "axis");
    Value *keepv = npos > 2 ? args[2] : kwarg(args, nargs, kwnames, "keepdim");
    if (keepv == NULL)
        keepv = kwarg(args, nargs, kwnames, "keepdims");
    if (dimv == NULL || (keepv != NULL && (keepv->kind != V_CONST || !PyBool_Check(keepv->obj))))
        return false;
    bool keep = keepv != NULL && keepv->obj == Py_True;
    uint32_t drop = 0;
    long long d;
    if (const_int(dimv, &d)) {
        int k = norm_dim(d, s.n);
        if (k < 0)
            return false;
        drop = 1u << k;
    }
    else if (dimv->kind == V_CONST && PyTuple_Check(dimv->obj)) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(dimv->obj); i++) {
            PyObject *o = PyTuple_GET_ITEM(dimv->obj, i);
            int k = PyLong_CheckExact(o) ? norm_dim(PyLong_AsLongLong(o), s.n) : -1;
            if (k < 0) {
                PyErr_Clear();
                return false;
            }
            drop |= 1u << k;
        }
    }
    else {
        return false;
    }
    *r = (Shape){0};
    for (int i = 0; i < s.n; i++) {
        if (drop & (1u << i)) {
            if (keep) {
                expr_const(&r->d[r->n], 1);
                r->known |= 1u << r->n++;
            }
            continue;
        }
        take_dims(r, &s, i, i + 1);
    }
    return true;
}

/* The rule for op `hint` on args (positional npos of nargs): 1 with *r,
   0 for no rule, -1 when tracing stops. */
static int shape_rule(Tracer *t, const char *hint, Value **args, int nargs, PyObject *kwnames,
                      Shape *r)
{
    int npos = nargs - (kwnames ? (int)PyTuple_GET_SIZE(kwnames) : 0);
    if (nargs == 0)
        return 0;
    Value *x = args[0];
    long long a, b;
    if (name_in(hint, elementwise))
        return rule_elementwise(args, nargs, r);
    if (strcmp(hint, "cat") == 0 || strcmp(hint, "concatenate") == 0 || strcmp(hint, "concat") == 0)
        return rule_cat(args, nargs, kwnames, r);
    if (strcmp(hint, "getitem") == 0 && npos == 2)
        return rule_getitem(t, x, args[1], r);
    if ((strcmp(hint, "view") == 0 || strcmp(hint, "reshape") == 0) && npos >= 2)
        return rule_reshape(args, npos, 1, x, r);
    if (strcmp(hint, "expand") == 0 && npos >= 2)
        return rule_expand(args, npos, x, r);
    if ((strcmp(hint, "matmul") == 0 || strcmp(hint, "bmm") == 0) && npos == 2)
        return rule_matmul(args[0], args[1], r);
    if (strcmp(hint, "linear") == 0 && npos >= 2) {
        Shape in, w;
        if (!shape_of(x, &in) || !shape_of(args[1], &w) || in.n == 0 || w.n != 2)
            return 0;
        *r = (Shape){0};
        take_dims(r, &in, 0, in.n - 1);
        take_dims(r, &w, 0, 1);
        return 1;
    }
    if (strcmp(hint, "embedding") == 0 && npos >= 2) {
        Shape ids, w;
        if (!shape_of(x, &ids) || !shape_of(args[1], &w) || w.n != 2)
            return 0;
        *r = ids;
        take_dims(r, &w, 1, 2);
        return 1;
    }
    if (strcmp(hint, "scaled_dot_product_attention") == 0 && npos >= 3) {
        Shape q, v;
        if (!shape_of(x, &q) || !shape_of(args[2], &v) || q.n == 0 || v.n == 0)
            return 0;
        *r = (Shape){0};
        take_dims(r, &q, 0, q.n - 1);
        take_dims(r, &v, v.n - 1, v.n);
        return 1;
    }
    if ((strcmp(hint, "transpose") == 0 || strcmp(hint, "swapaxes") == 0) && npos == 3
        && const_int(args[1], &a) && const_int(args[2], &b)) {
        if (!shape_of(x, r))
            return 0;
        int i = norm_dim(a, r->n), j = norm_dim(b, r->n);
        if (i < 0 || j < 0)
            return 0;
        SymExpr tmp = r->d[i];
        r->d[i] = r->d[j];
        r->d[j] = tmp;
        uint32_t ki = (r->known >> i) & 1u, kj = (r->known >> j) & 1u;
        r->known = (r->known & ~((1u << i) | (1u << j))) | (kj << i) | (ki << j);
        return 1;
    }
    if (strcmp(hint, "unsqueeze") == 0 && npos == 2 && const_int(args[1], &a)) {
        Shape s;
        if (!shape_of(x, &s))
            return 0;
        int k = norm_dim(a, s.n + 1);
        if (k < 0)
            return 0;
        *r = (Shape){0};
        take_dims(r, &s, 0, k);
        expr_const(&r->d[r->n], 1);
        r->known |= 1u << r->n++;
        take_dims(r, &s, k, s.n);
        return 1;
    }
    if (strcmp(hint, "permute") == 0 && npos >= 2) {
        Shape s, p;
        if (!shape_of(x, &s) || !listed_sizes(args, npos, 1, &p) || p.n != s.n)
            return 0;
        *r = (Shape){.n = s.n};
        for (int i = 0; i < s.n; i++) {
            int k = p.d[i].n == 0 ? norm_dim(p.d[i].c, s.n) : -1;
            if (k < 0)
                return 0;
            r->d[i] = s.d[k];
            r->known |= (s.known & (1u << k)) ? 1u << i : 0;
        }
        return 1;
    }
    if (strcmp(hint, "arange") == 0 && (npos == 1 || npos == 2)) {
        /* arange(end), arange(start, end): end - start, guarded >= 0 */
        SymExpr start, end;
        if (npos == 1)
            expr_const(&start, 0);
        if ((npos == 2 && !size_expr_of(args[0], &start)) || !size_expr_of(args[npos - 1], &end))
            return 0;
        SymExpr len = end;
        if (!expr_add_scaled(&len, &start, -1))
            return 0;
        int h = len.n == 0 ? len.c >= 0 : relation_holds(t, &len, 5);
        if (h <= 0)
            return h;
        *r = (Shape){.n = 1, .known = 1};
        r->d[0] = len;
        return 1;
    }
    if ((strcmp(hint, "zeros") == 0 || strcmp(hint, "ones") == 0 || strcmp(hint, "empty") == 0)
        && npos >= 1)
        return listed_sizes(args, npos, 0, r);
    if ((strcmp(hint, "sum") == 0 || strcmp(hint, "mean") == 0 || strcmp(hint, "amax") == 0
         || strcmp(hint, "amin") == 0 || strcmp(hint, "prod") == 0 || strcmp(hint, "all") == 0
         || strcmp(hint, "any") == 0 || strcmp(hint, "argmax") == 0 || strcmp(hint, "argmin") == 0
         || strcmp(hint, "logsumexp") == 0 || strcmp(hint, "norm") == 0 || strcmp(hint, "std") == 0
         || strcmp(hint, "var") == 0))
        return rule_reduce(args, npos, nargs, kwnames, r);
    return 0;
}

/* (contract: translate.h) */
int tr_sym_result(Tracer *t, const char *hint, Value **args, int nargs, PyObject *kwnames,
                  Value *v)
{
    if (v == NULL || v->kind != V_TENSOR || !v->dynshape || t->nsyms == 0)
        return 0;
    if ((strcmp(hint, "numel") == 0 || strcmp(hint, "nelement") == 0) && nargs == 1) {
        Shape s;
        SymExpr p;
        if (shape_of(args[0], &s) && product(&s, &p) && set_sym(v, &p) < 0)
            return -1;
        return 0;
    }
    long long dim;
    if (strcmp(hint, "size") == 0 && nargs == 2 && const_int(args[1], &dim)) {
        Shape s;                                     /* x.size(d), a graph value */
        int d = shape_of(args[0], &s) ? norm_dim(dim, s.n) : -1;
        if (d >= 0 && (s.known & (1u << d)) && set_sym(v, &s.d[d]) < 0)
            return -1;
        return 0;
    }
    Py_ssize_t sizes[MAX_DIMS];
    int n = tensor_is_array(v->obj) || tensor_is_torch(v->obj) ? example_shape(v->obj, sizes) : -1;
    if (n < 0)
        return 0;
    Shape r = {0};
    int rc = shape_rule(t, hint, args, nargs, kwnames, &r);
    if (rc <= 0)
        return rc;
    if (r.n != n)
        return 0;                                    /* the rule does not fit: no expressions */
    bool all_const = true;
    for (int d = 0; d < n; d++) {
        if (!(r.known & (1u << d))) {
            all_const = false;
            continue;
        }
        if (expr_value(t, &r.d[d]) != sizes[d])
            return 0;                                /* the rule is wrong here: trust none */
        all_const = all_const && r.d[d].n == 0;
    }
    if (all_const) {
        v->dynshape = false;                         /* every size fixed: as any static result */
        return 0;
    }
    return set_dims(v, r.d, n, r.known);
}
