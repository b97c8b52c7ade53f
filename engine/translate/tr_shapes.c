/*
 * tr_shapes.c -- shape rules (issue 37): the dimensions of an op result as
 * expressions of its arguments' (tr_symsizes.c), so that a size that
 * cannot change is a constant and one that can is an expression the
 * translator compares and guards.  One rule per kind of op: broadcasting
 * elementwise ops, ops keeping their first argument's shape, cat, getitem
 * (ints, slices, None, Ellipsis, integer-array indices), view/reshape,
 * expand, matmul/linear/addmm, embedding, scaled_dot_product_attention,
 * transpose/permute/unsqueeze, arange, reductions, constructors; split,
 * chunk and unbind, whose number of pieces must not follow a dynamic size.
 *
 * Invariants:
 *   - a rule gives an expression only where it holds for every input that
 *     passes the entry's guards (a slice bound's side of a size is decided
 *     by range or guarded; two sizes an op relates are guarded equal);
 *   - tr_sym_result checks every rule against the example it ran on, and
 *     trusts none of a rule that disagrees;
 *   - an op with no rule leaves its result as before: every size a graph
 *     value.
 */
#include "translate_int.h"
#include "../base/tensorlib.h"

#include <string.h>


/* A result's dimensions being worked out: up to SYM_MAX_DIMS expressions and
   which are known. */
typedef struct Shape {
    int n;
    uint32_t known;
    SymExpr d[SYM_MAX_DIMS];
} Shape;

static bool shape_of(Value *x, Shape *s)
{
    return sym_dims_of(x, s->d, &s->n, &s->known);
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

/* Broadcast b into r (numpy's rule, aligned at the end).  Two different
   expressions that are equal in this trace are guarded equal (the op
   needs them so, or one of them 1); a dimension neither rule decides is
   left unknown.  1 / -1 (tracing stops). */
static int broadcast_into(Tracer *t, Shape *r, const Shape *b)
{
    int n = r->n > b->n ? r->n : b->n;
    Shape out = {.n = n};
    for (int i = 0; i < n; i++) {
        int ra = r->n - n + i, ba = b->n - n + i;
        bool rk = ra < 0 || (r->known & (1u << ra)), bk = ba < 0 || (b->known & (1u << ba));
        SymExpr one;
        sym_expr_const(&one, 1);
        const SymExpr *x = ra < 0 ? &one : &r->d[ra], *y = ba < 0 ? &one : &b->d[ba];
        if (!rk || !bk)
            continue;                               /* unknown stays unknown */
        if (x->n == 0 && x->c == 1)
            out.d[i] = *y;
        else if ((y->n == 0 && y->c == 1) || sym_expr_equal(x, y))
            out.d[i] = *x;
        else if (x->n == 0 && x->c >= 2)
            out.d[i] = *x;                          /* the op raises unless y equals it */
        else if (y->n == 0 && y->c >= 2)
            out.d[i] = *y;
        else if (sym_expr_value(t, x) == sym_expr_value(t, y) && sym_expr_value(t, x) >= 2) {
            SymExpr diff = *x;                      /* two sizes the op relates */
            if (!sym_expr_add(&diff, y, -1))
                continue;
            int h = sym_relation_holds(t, &diff, 2);
            if (h < 0)
                return -1;
            out.d[i] = *x;
        }
        else
            continue;
        out.known |= 1u << i;
    }
    *r = out;
    return 1;
}

/* Names whose result has the shape of its tensor arguments broadcast
   together (elementwise ops of several operands). */
static const char *const broadcasting[] = {
    "add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "and_", "or_", "xor", "lt",
    "le", "eq", "ne", "gt", "ge", "where", "maximum", "minimum", "div", "true_divide",
    "multiply", "subtract", "divide", "power", "greater", "less", "equal", "not_equal",
    "greater_equal", "less_equal", "logical_and", "logical_or", "logical_xor", "bitwise_and",
    "bitwise_or", "bitwise_xor", "clamp", "clip", "atan2", "hypot", "fmod", "remainder", NULL};

/* Names whose result has the shape of their first argument, whatever the
   others are (a dtype, a dimension, another tensor whose dtype it takes). */
static const char *const same_shape[] = {
    "neg", "abs", "exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "relu",
    "gelu", "silu", "softmax", "log_softmax", "dropout", "contiguous", "float", "half",
    "bfloat16", "double", "to", "type", "type_as", "clone", "detach", "triu", "tril",
    "logical_not", "bool", "int", "long", "invert", "pos", "erf", "reciprocal", "square",
    "negative", "exp2", "log1p", "expm1", "sign", "floor", "ceil", "round", "isnan", "isinf",
    "nan_to_num", "cumsum", "cumprod", "masked_fill", "fill_", "zero_", "copy_", "add_",
    "mul_", "sub_", "div_", "masked_fill_", "clamp_", "neg_", "flip", "roll", "astype",
    "copy", "zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like",
    "layer_norm", "rms_norm", "group_norm", "batch_norm", "instance_norm", "normalize",
    "softplus", "leaky_relu", "elu", "selu", "celu", "hardtanh", "relu6", "mish", "hardswish",
    "hardsigmoid", "logsigmoid", "softsign", "tanhshrink", "threshold", "gelu_", "relu_",
    "sigmoid_", "tanh_", "exp_", "pow_", "sqrt_", "abs_", NULL};

static bool name_in(const char *name, const char *const *names)
{
    for (int i = 0; names[i] != NULL; i++)
        if (strcmp(name, names[i]) == 0)
            return true;
    return false;
}

static int rule_broadcast(Tracer *t, Value **args, int n, Shape *r)
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
        else if (broadcast_into(t, r, &s) < 0)
            return -1;
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
    bool first = true;
    for (int i = 0; i < seq->n; i++) {
        Shape s;
        if (!shape_of(seq->items[i], &s))
            return false;
        if (s.n == 1 && (s.known & 1u) && s.d[0].n == 0 && s.d[0].c == 0
            && tensor_is_torch(seq->items[i]->obj))
            continue;                     /* torch.tensor([]): torch.cat skips it */
        if (!first && s.n != r->n)
            return false;
        int d = norm_dim(dim, s.n);
        if (d < 0)
            return false;
        if (first) {
            *r = s;
            first = false;
            continue;
        }
        if ((r->known & (1u << d)) && (s.known & (1u << d))) {
            if (!sym_expr_add(&r->d[d], &s.d[d], 1))
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
    return !first;
}

static void take_dims(Shape *r, const Shape *s, int from, int to)
{
    for (int i = from; i < to && r->n < SYM_MAX_DIMS; i++) {
        r->d[r->n] = s->d[i];
        r->known |= (s->known & (1u << i)) ? 1u << r->n : 0;
        r->n++;
    }
}

/* Whether `e OP 0` holds, as sym_relation_holds, for a constant or a
   size expression. */
static int holds(Tracer *t, SymExpr e, int op)
{
    return sym_relation_holds(t, &e, op);
}

/* One bound of a slice of a dimension of size `size`, as Python clamps it
   (step 1): *out the index it stands for, in 0..size.  Each decision on
   signs is taken by range or guarded.  1 / 0 (no expression) / -1. */
static int slice_bound(Tracer *t, Value *b, const SymExpr *size, bool is_start, SymExpr *out)
{
    if (b == NULL || (b->kind == V_CONST && b->obj == Py_None)) {
        if (is_start)
            sym_expr_const(out, 0);
        else
            *out = *size;
        return 1;
    }
    SymExpr x;
    if (!sym_size_expr_of(b, &x))
        return 0;
    int neg = holds(t, x, 0);                          /* x < 0: counted from the end */
    if (neg < 0)
        return -1;
    if (neg == 1 && !sym_expr_add(&x, size, 1))
        return 0;
    int below = holds(t, x, 0);                        /* still < 0: 0 */
    if (below < 0)
        return -1;
    if (below == 1) {
        sym_expr_const(out, 0);
        return 1;
    }
    SymExpr over = x;                                  /* past the end: size */
    if (!sym_expr_add(&over, size, -1))
        return 0;
    int past = holds(t, over, 4);
    if (past < 0)
        return -1;
    *out = past == 1 ? *size : x;
    return 1;
}

/* The length of x[start:stop] (step 1 or None) on a dimension of size
   `size`.  1 / 0 / -1, as slice_bound. */
static int slice_length(Tracer *t, Value *sl, const SymExpr *size, SymExpr *len)
{
    Value *start = sl->n > 0 ? sl->items[0] : NULL, *stop = sl->n > 1 ? sl->items[1] : NULL;
    Value *step = sl->n > 2 ? sl->items[2] : NULL;
    long long k;
    if (step != NULL && !(step->kind == V_CONST && step->obj == Py_None)
        && !(const_int(step, &k) && k == 1))
        return 0;
    SymExpr a, b;
    int r = slice_bound(t, start, size, true, &a);
    if (r <= 0)
        return r;
    if ((r = slice_bound(t, stop, size, false, &b)) <= 0)
        return r;
    *len = b;
    if (!sym_expr_add(len, &a, -1))
        return 0;
    int empty = holds(t, *len, 0);
    if (empty < 0)
        return -1;
    if (empty == 1)
        sym_expr_const(len, 0);
    return 1;
}

/* Whether index value v is an integer (not bool) array or tensor. */
static bool index_is_integer_tensor(Value *v)
{
    if (v->kind != V_TENSOR || (!tensor_is_array(v->obj) && !tensor_is_torch(v->obj)))
        return false;
    PyObject *dt = PyObject_GetAttrString(v->obj, "dtype");
    PyObject *rep = dt ? PyObject_Str(dt) : NULL;
    const char *name = rep ? PyUnicode_AsUTF8(rep) : NULL;
    bool ok = name != NULL && (strstr(name, "int") != NULL) && strstr(name, "bool") == NULL;
    Py_XDECREF(rep);
    Py_XDECREF(dt);
    PyErr_Clear();
    return ok;
}

/* An index item as rule_getitem reads it: a constant slice object as a
   V_SLICE of its three bounds, anything else as it is.  NULL: an error. */
static Value *index_item(Tracer *t, Value *v)
{
    if (v == NULL || v->kind != V_CONST || !PySlice_Check(v->obj))
        return v;
    PySliceObject *so = (PySliceObject *)v->obj;
    Value *sl = value_new(t, V_SLICE, NULL);
    PyObject *parts[3] = {so->start, so->stop, so->step};
    for (int k = 0; sl != NULL && k < 3; k++) {
        Value *c = value_new(t, V_CONST, parts[k]);
        if (c == NULL || value_append(t, sl, c) < 0)
            sl = NULL;
    }
    return sl;
}

/* x[index] with ints, slices (bounds constants or sizes, step 1), None and
   Ellipsis.  Every decision a slice's bounds take on a size with symbols
   is guarded (slice_bound).  1 / 0 (no rule) / -1. */
static int rule_getitem(Tracer *t, Value *x, Value *index, Shape *r)
{
    Shape s;
    if (!shape_of(x, &s))
        return 0;
    Value *one[SYM_MAX_DIMS] = {index};
    Value **items = one;
    int ni = 1;
    if (index->kind == V_TUPLE) {
        ni = index->n;
        for (int i = 0; i < ni && i < SYM_MAX_DIMS; i++)
            if ((one[i] = index_item(t, index->items[i])) == NULL)
                return -1;
    }
    else if (index->kind == V_CONST && PyTuple_CheckExact(index->obj)) {
        /* x[..., None] folded to a constant tuple: its items as values */
        ni = (int)PyTuple_GET_SIZE(index->obj);
        for (int i = 0; i < ni && i < SYM_MAX_DIMS; i++)
            if ((one[i] = index_item(t, value_new(t, V_CONST, PyTuple_GET_ITEM(index->obj, i)))) == NULL)
                return -1;
    }
    else if ((one[0] = index_item(t, index)) == NULL) {
        return -1;
    }
    if (ni > SYM_MAX_DIMS)
        return 0;
    /* a run of integer tensor indices (advanced indexing): their shapes
       broadcast, in their place */
    int adv_first = -1, adv_n = 0;
    for (int i = 0; i < ni; i++) {
        if (items[i]->kind != V_TENSOR)
            continue;
        if (!index_is_integer_tensor(items[i]) || (adv_first >= 0 && adv_first + adv_n != i))
            return 0;
        if (adv_first < 0)
            adv_first = i;
        adv_n++;
    }
    for (int i = 0; adv_n > 0 && i < ni; i++)
        if (items[i]->kind == V_CONST && PyLong_CheckExact(items[i]->obj))
            return 0;                       /* an int beside arrays is an array too */
    int consumed = 0;
    for (int i = 0; i < ni; i++) {
        Value *it = items[i];
        bool marker = it->kind == V_CONST && (it->obj == Py_None || it->obj == Py_Ellipsis);
        if (!marker)
            consumed++;
    }
    *r = (Shape){0};
    int src = 0;
    for (int i = 0; i < ni; i++) {
        Value *it = items[i];
        if (it->kind == V_CONST && it->obj == Py_Ellipsis) {
            int k = s.n - consumed;
            if (k < 0)
                return 0;
            take_dims(r, &s, src, src + k);
            src += k;
            continue;
        }
        if (r->n >= SYM_MAX_DIMS)
            return 0;
        if (it->kind == V_CONST && it->obj == Py_None) {
            sym_expr_const(&r->d[r->n], 1);
            r->known |= 1u << r->n++;
            continue;
        }
        if (src >= s.n)
            return 0;
        if (it->kind == V_CONST && PyLong_CheckExact(it->obj)) {
            src++;                                  /* the dimension is gone */
            continue;
        }
        if (i == adv_first) {
            Shape b = {0};
            for (int k = 0; k < adv_n; k++) {
                Shape ix;
                if (!shape_of(items[i + k], &ix))
                    return 0;
                if (k == 0)
                    b = ix;
                else if (broadcast_into(t, &b, &ix) < 0)
                    return -1;
            }
            take_dims(r, &b, 0, b.n);
            src += adv_n;
            i += adv_n - 1;
            continue;
        }
        if (it->kind != V_SLICE)
            return 0;
        bool whole = true;
        for (int k = 0; k < it->n; k++)
            whole = whole && it->items[k]->kind == V_CONST && it->items[k]->obj == Py_None;
        if (whole) {
            take_dims(r, &s, src, src + 1);
        }
        else if (s.known & (1u << src)) {
            SymExpr len;
            int rc = slice_length(t, it, &s.d[src], &len);
            if (rc <= 0)
                return rc;
            r->d[r->n] = len;
            r->known |= 1u << r->n++;
        }
        else {
            r->n++;                                 /* unknown stays unknown */
        }
        src++;
    }
    take_dims(r, &s, src, s.n);
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
        if (PyTuple_GET_SIZE(tup) > SYM_MAX_DIMS)
            return false;
        r->n = (int)PyTuple_GET_SIZE(tup);
        for (int i = 0; i < r->n; i++) {
            PyObject *o = PyTuple_GET_ITEM(tup, i);
            if (!PyLong_Check(o))
                return false;
            sym_expr_const(&r->d[i], PyLong_AsLongLong(o));
        }
        r->known = r->n >= 32 ? ~(uint32_t)0 : (1u << r->n) - 1;
        return !PyErr_Occurred() || (PyErr_Clear(), false);
    }
    if (n > SYM_MAX_DIMS || n < 0)
        return false;
    r->n = n;
    r->known = 0;
    for (int i = 0; i < n; i++) {
        if (!sym_size_expr_of(items[i], &r->d[i]))
            return false;
        r->known |= 1u << i;
    }
    return true;
}

/* The element count of shape s: the product of its sizes.  false when a
   size is unknown or the product has no expression (SymExpr's limits). */
static bool product(const Shape *s, SymExpr *p)
{
    sym_expr_const(p, 1);
    for (int i = 0; i < s->n; i++)
        if (!(s->known & (1u << i)) || !sym_expr_mul(p, p, &s->d[i]))
            return false;
    return true;
}

/* view / reshape: the listed sizes, a -1 worked out from the input's
   element count over the product of the others (sym_view_quotient).
   1 / 0 (no rule) / -1 (tracing stops). */
static int rule_reshape(Tracer *t, Value **args, int npos, int first, Value *x, Shape *r)
{
    Shape in;
    if (!shape_of(x, &in) || !listed_sizes(args, npos, first, r))
        return 0;
    int minus = -1;
    for (int i = 0; i < r->n; i++) {
        if (r->d[i].n == 0 && r->d[i].c == -1) {
            if (minus >= 0)
                return 0;
            minus = i;
        }
    }
    if (minus < 0)
        return 1;
    /* -1: the input's element count over the product of the others
       (128 * s / (32 * s) is 4, 64 * s / 16 is 4 * s); unknown where it
       has no expression */
    r->known &= ~(1u << minus);
    Shape others = *r;
    others.d[minus].c = 1;
    others.known |= 1u << minus;
    SymExpr total, rest;
    if (!product(&in, &total) || !product(&others, &rest))
        return 1;
    SymExpr quotient;
    int h = sym_view_quotient(t, &total, &rest, &quotient);
    if (h <= 0)
        return h < 0 ? -1 : 1;
    r->d[minus] = quotient;
    r->known |= 1u << minus;
    return 1;
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

/* matmul / bmm / @: batch dimensions broadcast, then a[-2], b[-1]. */
static int rule_matmul(Tracer *t, Value *a, Value *b, Shape *r)
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
    if (broadcast_into(t, &bx, &by) < 0)
        return -1;
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
                sym_expr_const(&r->d[r->n], 1);
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
    if (name_in(hint, broadcasting))
        return rule_broadcast(t, args, npos, r);
    if (name_in(hint, same_shape))
        return x->kind == V_TENSOR && shape_of(x, r);
    if ((strcmp(hint, "min") == 0 || strcmp(hint, "max") == 0) && npos == 2
        && args[1]->kind == V_TENSOR && !PyLong_Check(args[1]->obj))
        return rule_broadcast(t, args, npos, r);          /* torch.min(a, b): elementwise */
    if (strcmp(hint, "addmm") == 0 && npos == 3) {
        Shape m1, m2;                                 /* addmm(bias, m1, m2): m1 @ m2 */
        if (!shape_of(args[1], &m1) || !shape_of(args[2], &m2) || m1.n != 2 || m2.n != 2)
            return 0;
        *r = (Shape){0};
        take_dims(r, &m1, 0, 1);
        take_dims(r, &m2, 1, 2);
        return 1;
    }
    if (strcmp(hint, "cat") == 0 || strcmp(hint, "concatenate") == 0 || strcmp(hint, "concat") == 0)
        return rule_cat(args, nargs, kwnames, r);
    if (strcmp(hint, "getitem") == 0 && npos == 2)
        return rule_getitem(t, x, args[1], r);
    if ((strcmp(hint, "view") == 0 || strcmp(hint, "reshape") == 0) && npos >= 2)
        return rule_reshape(t, args, npos, 1, x, r);
    if (strcmp(hint, "expand") == 0 && npos >= 2)
        return rule_expand(args, npos, x, r);
    if ((strcmp(hint, "matmul") == 0 || strcmp(hint, "bmm") == 0) && npos == 2)
        return rule_matmul(t, args[0], args[1], r);
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
        /* F.embedding(ids, weight), torch.embedding(weight, ids): the ids
           are the integer one */
        Shape ids, w;
        bool ids_first = index_is_integer_tensor(x);
        if (!shape_of(ids_first ? x : args[1], &ids) || !shape_of(ids_first ? args[1] : x, &w)
            || w.n != 2)
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
        sym_expr_const(&r->d[r->n], 1);
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
            sym_expr_const(&start, 0);
        if ((npos == 2 && !sym_size_expr_of(args[0], &start)) || !sym_size_expr_of(args[npos - 1], &end))
            return 0;
        SymExpr len = end;
        if (!sym_expr_add(&len, &start, -1))
            return 0;
        int h = len.n == 0 ? len.c >= 0 : sym_relation_holds(t, &len, 5);
        if (h <= 0)
            return h;
        *r = (Shape){.n = 1, .known = 1};
        r->d[0] = len;
        return 1;
    }
    if ((strcmp(hint, "zeros") == 0 || strcmp(hint, "ones") == 0 || strcmp(hint, "empty") == 0)
        && npos >= 1)
        return listed_sizes(args, npos, 0, r);
    if ((strcmp(hint, "new_zeros") == 0 || strcmp(hint, "new_ones") == 0
         || strcmp(hint, "new_empty") == 0) && npos >= 2)
        return listed_sizes(args, npos, 1, r);
    if (strcmp(hint, "full") == 0 && npos == 2)
        return listed_sizes(args, 1, 0, r);
    if (strcmp(hint, "new_full") == 0 && npos == 3)
        return listed_sizes(args, 2, 1, r);
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
        if (shape_of(args[0], &s) && product(&s, &p) && sym_set_sym(v, &p) < 0)
            return -1;
        return 0;
    }
    if (strcmp(hint, "getattr") == 0 && nargs == 2 && args[1]->kind == V_CONST
        && PyUnicode_Check(args[1]->obj) && PyUnicode_CompareWithASCIIString(args[1]->obj, "size") == 0) {
        Shape s;                                     /* an array's .size: its element count */
        SymExpr p;
        if (shape_of(args[0], &s) && product(&s, &p) && sym_set_sym(v, &p) < 0)
            return -1;
        return 0;
    }
    long long dim;
    if (strcmp(hint, "size") == 0 && nargs == 2 && const_int(args[1], &dim)) {
        Shape s;                                     /* x.size(d), a graph value */
        int d = shape_of(args[0], &s) ? norm_dim(dim, s.n) : -1;
        if (d >= 0 && (s.known & (1u << d)) && sym_set_sym(v, &s.d[d]) < 0)
            return -1;
        return 0;
    }
    Py_ssize_t sizes[SYM_MAX_DIMS];
    int n = tensor_is_array(v->obj) || tensor_is_torch(v->obj) ? sym_example_shape(v->obj, sizes) : -1;
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
        if (sym_expr_value(t, &r.d[d]) != sizes[d])
            return 0;                                /* the rule is wrong here: trust none */
        all_const = all_const && r.d[d].n == 0;
    }
    if (all_const) {
        v->dynshape = false;                         /* every size fixed: as any static result */
        return 0;
    }
    return sym_set_dims(v, r.d, n, r.known);
}

/* (contract: translate.h) */
int tr_sym_sequence(Tracer *t, const char *hint, Value **args, int nargs, PyObject *kwnames,
                    Value *seq)
{
    int npos = nargs - (kwnames ? (int)PyTuple_GET_SIZE(kwnames) : 0);
    bool pieces = strcmp(hint, "split") == 0 || strcmp(hint, "chunk") == 0
                  || strcmp(hint, "unbind") == 0 || strcmp(hint, "array_split") == 0
                  || strcmp(hint, "tensor_split") == 0 || strcmp(hint, "hsplit") == 0
                  || strcmp(hint, "vsplit") == 0 || strcmp(hint, "dsplit") == 0;
    if (!pieces || nargs == 0)
        return 0;               /* as many items as arguments (meshgrid, broadcast_tensors) */
    /* how many pieces follows the size of the dimension split: fixed only
       when that size is */
    Shape s;
    Value *dimv = strcmp(hint, "unbind") == 0 ? (npos > 1 ? args[1] : NULL)
                  : npos > 2 ? args[2] : NULL;
    if (dimv == NULL)
        dimv = kwarg(args, nargs, kwnames, "dim");
    if (dimv == NULL)
        dimv = kwarg(args, nargs, kwnames, "axis");
    long long dim = strcmp(hint, "hsplit") == 0 ? 1 : strcmp(hint, "dsplit") == 0 ? 2 : 0;
    int d = -1;
    if (shape_of(args[0], &s) && (dimv == NULL || const_int(dimv, &dim)))
        d = norm_dim(dim, s.n);
    if (d < 0 || !(s.known & (1u << d)) || s.d[d].n != 0)
        return tracer_unsupported(t, false, "%s of a dimension whose size is dynamic (the number "
                                  "of pieces would be fixed)", hint);
    /* each piece: the input's dimensions, the split one as the example has it */
    for (int i = 0; i < seq->n; i++) {
        Value *it = seq->items[i];
        Py_ssize_t sizes[SYM_MAX_DIMS];
        int n = sym_example_shape(it->obj, sizes);
        bool unbind = strcmp(hint, "unbind") == 0;
        if (n != (unbind ? s.n - 1 : s.n))
            continue;
        Shape r = {0};
        take_dims(&r, &s, 0, d);
        if (!unbind) {
            sym_expr_const(&r.d[r.n], sizes[d]);
            r.known |= 1u << r.n++;
        }
        take_dims(&r, &s, d + 1, s.n);
        bool all_const = true;
        for (int k = 0; k < r.n; k++)
            all_const = all_const && (r.known & (1u << k)) && r.d[k].n == 0;
        if (all_const)
            it->dynshape = false;
        else if (sym_set_dims(it, r.d, r.n, r.known) < 0)
            return -1;
    }
    return 0;
}
