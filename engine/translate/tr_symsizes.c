/*
 * tr_symsizes.c -- sizes as expressions (issue 37): what a size the graph
 * computes is, in terms of the frame's dynamic sizes, so that the code's
 * arithmetic and branches on sizes are decided while tracing where they can
 * be, instead of keeping the whole source static.
 *
 * A symbol is one dynamic dimension of an input (tr_sym_input): a size of
 * 2 or more, as its TENSOR_MATCH checks -- or an int input's value
 * (tr_sym_int_input: a cache's cumulative length), guarded to be 2 or more
 * too (its dimension is -1 in GUARD_SIZES_HOLD).  A size value is a polynomial
 * over symbols (SymExpr: c + sum of k * m, each m a product of up to
 * SYM_DEGREE symbols: s0, or s0 * s2 for the element count of a tensor
 * whose batch and length are both dynamic).  What gets one:
 *   - a shape read of an input's dynamic dimension (tensorops_dim);
 *   - +, -, unary -, *, exact // by a constant, of those; an element count
 *     over the product of the other sizes (view(-1, s1)) where it divides;
 *   - every dimension of an op result that has a shape rule (tr_shapes.c: cat,
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

static int guard_relation(Tracer *t, const SymExpr *e, int op);

/* ---- monomials ---- */

/* A term's monomial (SymExpr.t[i].sym): its symbols' indexes, ascending,
   packed MONO_BITS each -- the first as it is, the others plus 1 (0: no
   more) -- so that a single symbol's monomial is its index. */
#define MONO_BITS 10
#define MONO_MASK ((1 << MONO_BITS) - 1)
#define MONO_MAX_SYMBOL (MONO_MASK - 1)

/* The symbols of monomial m into s (SYM_DEGREE of room): its degree. */
static int mono_symbols(int m, int *s)
{
    int n = 0;
    s[n++] = m & MONO_MASK;
    for (m >>= MONO_BITS; m != 0 && n < SYM_DEGREE; m >>= MONO_BITS)
        s[n++] = (m & MONO_MASK) - 1;
    return n;
}

/* The monomial of symbols s[0..n) (ascending, 1 <= n <= SYM_DEGREE). */
static int mono_pack(const int *s, int n)
{
    int m = s[0];
    for (int i = 1; i < n; i++)
        m |= (s[i] + 1) << (MONO_BITS * i);
    return m;
}

/* a * b into *m: false when its degree exceeds SYM_DEGREE or a symbol
   cannot be packed. */
static bool mono_mul(int a, int b, int *m)
{
    int x[SYM_DEGREE], y[SYM_DEGREE], r[SYM_DEGREE];
    int nx = mono_symbols(a, x), ny = mono_symbols(b, y), n = 0, i = 0, j = 0;
    if (nx + ny > SYM_DEGREE)
        return false;
    while (i < nx || j < ny)
        r[n++] = j >= ny || (i < nx && x[i] <= y[j]) ? x[i++] : y[j++];
    for (int k = 0; k < n; k++)
        if (r[k] > MONO_MAX_SYMBOL)
            return false;
    *m = mono_pack(r, n);
    return true;
}

/* m / d when d's symbols are among m's: *q the rest (*qdeg 0: 1).  false
   otherwise. */
static bool mono_div(int m, int d, int *q, int *qdeg)
{
    int x[SYM_DEGREE], y[SYM_DEGREE], r[SYM_DEGREE];
    int nx = mono_symbols(m, x), ny = mono_symbols(d, y), n = 0, j = 0;
    for (int i = 0; i < nx; i++) {
        if (j < ny && x[i] == y[j])
            j++;
        else
            r[n++] = x[i];
    }
    if (j < ny)
        return false;
    *qdeg = n;
    *q = n > 0 ? mono_pack(r, n) : 0;
    return true;
}

/* ---- expressions ---- */

void sym_expr_const(SymExpr *e, long long c)
{
    memset(e, 0, sizeof(*e));
    e->c = c;
}

/* *e += k * b.  false when the result needs more than SYM_TERMS terms or
   overflows. */
bool sym_expr_add(SymExpr *e, const SymExpr *b, long long k)
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

/* (contract: translate_int.h) */
bool sym_expr_mul(SymExpr *e, const SymExpr *a, const SymExpr *b)
{
    SymExpr r, at = *a, bt = *b;
    at.c = bt.c = 0;
    if (__builtin_mul_overflow(a->c, b->c, &r.c))
        return false;
    r.n = 0;
    if (!sym_expr_add(&r, &bt, a->c) || !sym_expr_add(&r, &at, b->c))
        return false;
    for (int i = 0; i < a->n; i++) {
        for (int j = 0; j < b->n; j++) {
            SymExpr term;
            sym_expr_const(&term, 0);
            term.n = 1;
            if (!mono_mul(a->t[i].sym, b->t[j].sym, &term.t[0].sym)
                || __builtin_mul_overflow(a->t[i].k, b->t[j].k, &term.t[0].k)
                || !sym_expr_add(&r, &term, 1))
                return false;
        }
    }
    *e = r;
    return true;
}

/* *e /= d when the quotient is exact: d a constant dividing
   every coefficient, or e a constant multiple of d.  false otherwise. */
bool sym_expr_div_exact(SymExpr *e, const SymExpr *d)
{
    if (d->n == 1 && d->c == 0 && e->c == 0 && e->n > 0) {
        /* by one term k * m: each of e's terms a multiple of it
           (64 * s0 * s1 / (64 * s1) is s0) */
        SymExpr r;
        sym_expr_const(&r, 0);
        for (int i = 0; i < e->n; i++) {
            int q, qdeg;
            if (e->t[i].k % d->t[0].k != 0 || !mono_div(e->t[i].sym, d->t[0].sym, &q, &qdeg))
                goto linear;
            SymExpr term;
            sym_expr_const(&term, qdeg == 0 ? e->t[i].k / d->t[0].k : 0);
            if (qdeg > 0) {
                term.n = 1;
                term.t[0].sym = q;
                term.t[0].k = e->t[i].k / d->t[0].k;
            }
            if (!sym_expr_add(&r, &term, 1))
                return false;
        }
        *e = r;
        return true;
    }
linear:
    if (d->n == 0) {
        if (d->c == 0 || e->c % d->c != 0)
            return false;
        for (int i = 0; i < e->n; i++)
            if (e->t[i].k % d->c != 0)
                return false;
        e->c /= d->c;
        for (int i = 0; i < e->n; i++)
            e->t[i].k /= d->c;
        return true;
    }
    if (e->n != d->n || e->t[0].sym != d->t[0].sym || e->t[0].k % d->t[0].k != 0)
        return false;
    long long q = e->t[0].k / d->t[0].k;
    SymExpr check;
    sym_expr_const(&check, 0);
    if (!sym_expr_add(&check, d, q) || check.c != e->c || check.n != e->n)
        return false;
    for (int i = 0; i < e->n; i++)
        if (check.t[i].sym != e->t[i].sym || check.t[i].k != e->t[i].k)
            return false;
    sym_expr_const(e, q);
    return true;
}

bool sym_expr_equal(const SymExpr *a, const SymExpr *b)
{
    if (a->c != b->c || a->n != b->n)
        return false;
    for (int i = 0; i < a->n; i++)
        if (a->t[i].sym != b->t[i].sym || a->t[i].k != b->t[i].k)
            return false;
    return true;
}

/* e's value in this trace (the symbols' example sizes). */
long long sym_expr_value(Tracer *t, const SymExpr *e)
{
    long long v = e->c;
    for (int i = 0; i < e->n; i++) {
        int syms[SYM_DEGREE];
        long long m = e->t[i].k;
        for (int j = 0, n = mono_symbols(e->t[i].sym, syms); j < n; j++)
            m *= (long long)t->syms[syms[j]].value;
        v += m;
    }
    return v;
}

/* The least and greatest values e can take (each symbol >= 2, so a
   monomial of degree d >= 2^d); has_lo / has_hi false for none. */
static void expr_range(const SymExpr *e, long long *lo, bool *has_lo, long long *hi, bool *has_hi)
{
    *lo = *hi = e->c;
    *has_lo = *has_hi = true;
    for (int i = 0; i < e->n; i++) {
        int syms[SYM_DEGREE];
        long long least = e->t[i].k;
        for (int j = 0, n = mono_symbols(e->t[i].sym, syms); j < n; j++)
            least *= SIZE_MIN_VALUE;
        if (e->t[i].k > 0) {
            *lo += least;
            *has_hi = false;
        }
        else {
            *hi += least;
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
int sym_example_shape(PyObject *obj, Py_ssize_t *sizes)
{
    PyObject *shape = PyObject_GetAttrString(obj, "shape");
    int n = shape && PyTuple_Check(shape) && PyTuple_GET_SIZE(shape) <= SYM_MAX_DIMS
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

int sym_set_dims(Value *v, const SymExpr *dims, int n, uint32_t known)
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

int sym_set_sym(Value *v, const SymExpr *e)
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
    return v->kind == V_TENSOR ? sym_set_sym(v, e) : 0;
}

/* (contract: translate.h) */
int tr_sym_input(Tracer *t, Value *v, int acc, uint32_t dims)
{
    Py_ssize_t sizes[SYM_MAX_DIMS];
    SymExpr e[SYM_MAX_DIMS];
    int n = sym_example_shape(v->obj, sizes);
    if (n < 0)
        return 0;
    for (int d = 0; d < n; d++) {
        sym_expr_const(&e[d], sizes[d]);
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
    return sym_set_dims(v, e, n, n >= 32 ? ~(uint32_t)0 : (1u << n) - 1);
}

/* (contract: translate.h) */
int tr_sym_int_input(Tracer *t, Value *v, int acc)
{
    long long value = PyLong_AsLongLong(v->obj);
    if (value == -1 && PyErr_Occurred())
        return -1;
    int s = new_symbol(t, acc, -1, (Py_ssize_t)value);
    if (s < 0)
        return -1;
    SymExpr e, least;
    sym_expr_const(&e, 0);
    e.n = 1;
    e.t[0].sym = s;
    e.t[0].k = 1;
    least = e;                                 /* s - 2 >= 0: a size's range */
    least.c = -SIZE_MIN_VALUE;
    if (guard_relation(t, &least, 5) < 0)
        return -1;
    return sym_set_sym(v, &e);
}

/* The expression of size value v: a plain int constant, or a value with
   one.  false otherwise. */
bool sym_size_expr_of(Value *v, SymExpr *e)
{
    if (v->kind == V_CONST && PyLong_CheckExact(v->obj)) {
        long long c = PyLong_AsLongLong(v->obj);
        if (c == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            return false;
        }
        sym_expr_const(e, c);
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
bool sym_dims_of(Value *x, SymExpr *dims, int *n, uint32_t *known)
{
    if (x->kind != V_TENSOR || (!tensor_is_array(x->obj) && !tensor_is_torch(x->obj)))
        return false;
    Py_ssize_t sizes[SYM_MAX_DIMS];
    *n = sym_example_shape(x->obj, sizes);
    if (*n < 0)
        return false;
    *known = 0;
    for (int d = 0; d < *n; d++) {
        if (!x->dynshape) {
            sym_expr_const(&dims[d], sizes[d]);
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
    if (x->sdims == NULL || d < 0 || d >= SYM_MAX_DIMS || !(x->sdims_known & (1u << d))
        || x->sdims[d].n != 0)
        return NULL;
    return new_const(t, PyLong_FromLongLong(x->sdims[d].c));
}

void tr_sym_size_read(Tracer *t, Value *x, int d, Value *size)
{
    (void)t;
    if (size != NULL && size->kind == V_TENSOR && x->sdims != NULL && d >= 0 && d < SYM_MAX_DIMS
        && (x->sdims_known & (1u << d)) && sym_set_sym(size, &x->sdims[d]) < 0)
        PyErr_Clear();                  /* no expression: a graph value as before */
}

/* ---- relations ---- */

static const char *const compare_names[6] = {"lt", "le", "eq", "ne", "gt", "ge"};

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
    /* a term of a product: a triple with k 0 per factor but the last */
    int nfactors = 0, syms[SYM_DEGREE];
    for (int i = 0; i < e->n; i++)
        nfactors += mono_symbols(e->t[i].sym, syms);
    PyObject *tup = PyTuple_New(2 + 3 * nfactors);
    if (tup == NULL)
        return -1;
    PyTuple_SET_ITEM(tup, 0, PyLong_FromLongLong(e->c));
    PyTuple_SET_ITEM(tup, 1, PyLong_FromLong(op));
    for (int i = 0, at = 2; i < e->n; i++) {
        int n = mono_symbols(e->t[i].sym, syms);
        for (int j = 0; j < n; j++, at += 3) {
            const struct SymVar *s = &t->syms[syms[j]];
            PyTuple_SET_ITEM(tup, at, PyLong_FromLong(s->acc));
            PyTuple_SET_ITEM(tup, at + 1, PyLong_FromLong(s->dim));
            PyTuple_SET_ITEM(tup, at + 2, PyLong_FromLongLong(j == n - 1 ? e->t[i].k : 0));
        }
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(tup); i++) {
        if (PyTuple_GET_ITEM(tup, i) == NULL) {
            Py_DECREF(tup);
            return -1;
        }
    }
    mono_symbols(e->t[0].sym, syms);
    int acc = t->syms[syms[0]].acc;
    int rc = guardset_add(t->gs, GUARD_SIZES_HOLD, acc, tup, 0) < 0 ? -1 : 0;
    Py_DECREF(tup);
    return rc;
}

/* Whether `e OP 0` holds for these inputs: decided by the ranges, else on
   the example and guarded.  1 / 0, or -1 (tracing stops). */
int sym_relation_holds(Tracer *t, const SymExpr *e, int op)
{
    int r = compare_decided(e, op);
    if (r >= 0)
        return r;
    bool holds = guard_relation_holds(op, sym_expr_value(t, e));
    static const int negated[6] = {5, 4, 3, 2, 1, 0};   /* not (<) is >=, ... */
    if (guard_relation(t, e, holds ? op : negated[op]) < 0)
        return -1;
    return holds;
}

/* rest's symbols that total's lack, each replaced by one of total's own
   with the same example size (a mask's batch s2 for ids' batch s0), the
   equalities guarded: so that total / rest divides as written (s2 * s3 /
   s0 is s3 where s0 == s2).  1 with *out, 0 for none, -1 (stops). */
static int unify_by_size(Tracer *t, const SymExpr *total, const SymExpr *rest, SymExpr *out)
{
    if (total->n != 1 || rest->n != 1 || total->c != 0 || rest->c != 0)
        return 0;
    int have[SYM_DEGREE], want[SYM_DEGREE];
    int nh = mono_symbols(total->t[0].sym, have), nw = mono_symbols(rest->t[0].sym, want);
    bool used[SYM_DEGREE] = {false};
    int pairs[SYM_DEGREE][2], npairs = 0;
    for (int i = 0; i < nw; i++) {
        int j = 0;
        while (j < nh && (used[j] || have[j] != want[i]))
            j++;
        if (j == nh) {                  /* not in total: one of the same size */
            for (j = 0; j < nh; j++)
                if (!used[j] && t->syms[have[j]].value == t->syms[want[i]].value)
                    break;
            if (j == nh)
                return 0;
            pairs[npairs][0] = want[i];
            pairs[npairs++][1] = have[j];
            want[i] = have[j];
        }
        used[j] = true;
    }
    if (npairs == 0)
        return 0;
    for (int i = 0; i < nw; i++)        /* ascending again */
        for (int j = i + 1; j < nw; j++)
            if (want[j] < want[i]) {
                int x = want[i];
                want[i] = want[j];
                want[j] = x;
            }
    SymExpr d = *rest;
    d.t[0].sym = mono_pack(want, nw);
    *out = *total;
    if (!sym_expr_div_exact(out, &d))
        return 0;
    for (int i = 0; i < npairs; i++) {
        SymExpr eq;
        sym_expr_const(&eq, 0);
        eq.n = 2;
        eq.t[0].sym = pairs[i][0] < pairs[i][1] ? pairs[i][0] : pairs[i][1];
        eq.t[1].sym = pairs[i][0] < pairs[i][1] ? pairs[i][1] : pairs[i][0];
        eq.t[0].k = 1;
        eq.t[1].k = -1;
        if (sym_relation_holds(t, &eq, 2) < 0)
            return -1;
    }
    return 1;
}

/* (contract: translate_int.h) */
int sym_view_quotient(Tracer *t, const SymExpr *total, const SymExpr *rest, SymExpr *q)
{
    *q = *total;
    if (sym_expr_div_exact(q, rest))
        return 1;
    int u = unify_by_size(t, total, rest, q);
    if (u != 0)
        return u;
    long long num = sym_expr_value(t, total), den = sym_expr_value(t, rest);
    if (den <= 0 || num % den != 0)
        return 0;
    /* the others' product fixed at its example size where the count
       divides by that (a mask (2, s1) viewed as (s0, -1) is (s0, s1) for
       s0 == 2); else the quotient fixed, total - q * rest == 0 */
    SymExpr by = *rest, divisor;
    sym_expr_const(&divisor, den);
    *q = *total;
    if (!sym_expr_add(&by, &divisor, -1) || !sym_expr_div_exact(q, &divisor)) {
        by = *total;
        sym_expr_const(q, num / den);
        if (!sym_expr_add(&by, rest, -(num / den)))
            return 0;
    }
    return sym_relation_holds(t, &by, 2) < 0 ? -1 : 1;
}

/* (contract: translate.h) */
int tr_sym_operator(Tracer *t, const char *opname, Value *a, Value *b, Value **out, SymExpr *e)
{
    SymExpr x, y;
    if (!sym_size_expr_of(a, &x) || (b != NULL && !sym_size_expr_of(b, &y))
        || (a->sym == NULL && (b == NULL || b->sym == NULL)))
        return 0;
    if (b == NULL) {
        if (strcmp(opname, "neg") != 0)
            return 0;
        sym_expr_const(e, 0);
        if (!sym_expr_add(e, &x, -1))
            return 0;
    }
    else if (strcmp(opname, "add") == 0 || strcmp(opname, "sub") == 0) {
        *e = x;
        if (!sym_expr_add(e, &y, opname[0] == 'a' ? 1 : -1))
            return 0;
    }
    else if (strcmp(opname, "mul") == 0) {
        if (!sym_expr_mul(e, &x, &y))
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
            if (!sym_expr_add(&d, &y, -1))
                return 0;
            int r = sym_relation_holds(t, &d, op);
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
