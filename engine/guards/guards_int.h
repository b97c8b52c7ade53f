/*
 * guards_int.h -- what the guard files (guards.c, guard_build.c,
 * guard_tensor.c, guard_render.c) share with each other and nobody else.
 * The public contract, and the invariants of a GuardSet, are in guards.h.
 */
#ifndef DYNSCOPE_GUARDS_INT_H
#define DYNSCOPE_GUARDS_INT_H

#include "../base/base.h"
#include "guards.h"

#define MAX_ACCESSOR_DEPTH 256      /* longest base chain of one accessor */

/* ---- constants compared without calling Python code (guards.c) ---- */

/* Whether o is a constant EQUALS_MATCH and dict-item accessors accept: None,
   an exact bool, int, float, complex, str or bytes, or an exact tuple of
   these nested at most `depth` levels short of MAX_CONST_DEPTH.  Cannot
   fail. */
bool guard_const_is_simple(PyObject *o, int depth);

/* Whether a and b are the same constant (equal, of the same exact simple
   type; other objects by identity).  Never calls Python code, never leaves
   an exception set. */
bool guard_const_equal(PyObject *a, PyObject *b);

/* ---- the check path (guards.c), for rendering a failure ---- */

/* Whether obj has attribute name: 1 / 0; -1 (cleared) for other errors. */
int guard_has_attr(PyObject *obj, PyObject *name);
/* torch.is_grad_enabled() now: Py_True / Py_False (borrowed), or NULL (no
   exception) when it cannot be read. */
PyObject *guard_grad_mode_now(void);

/* ---- order and invariants (guard_build.c, guards.c) ---- */

/* Position of guard g among the first n items of gs->order, or -1. */
static inline int
guard_order_position(const GuardSet *gs, int g, int n)
{
    for (int p = 0; p < n; p++)
        if (gs->order[p] == g)
            return p;
    return -1;
}

#ifndef NDEBUG
/* The invariants of guards.h.  For ENGINE_ASSERT; quadratic, and
   allocation-free so that it never changes what it checks (guard_build.c). */
bool guardset_invariants(const GuardSet *gs);
#endif

/* ---- tensor metadata (guard_tensor.c) ---- */

/* New metadata read from an example array or torch tensor, or NULL with
   TypeError (neither, or unreadable) or MemoryError. */
TensorMeta *guard_tensor_meta_new(PyObject *example);
/* As guard_tensor_meta_new, with the dimensions in `dynamic` (a bit per
   dimension, below 32) of any size from 2 on, and strides not compared.
   (TENSOR_MATCH's `length` argument to guardset_add.) */
TensorMeta *guard_tensor_meta_new_dynamic(PyObject *example, uint32_t dynamic);
/* Size `dim` of v, an exact numpy.ndarray or torch tensor (what a
   TENSOR_MATCH captures), read without calling Python code but torch's C
   getter; -1 for anything else.  Cannot fail (no exception left). */
Py_ssize_t guard_tensor_size(PyObject *v, int dim);
/* Free tm and its references; NULL is a no-op.  Cannot fail. */
void guard_tensor_meta_free(TensorMeta *tm);
/* Whether a and b describe the same tensors.  Cannot fail. */
bool guard_tensor_meta_equal(const TensorMeta *a, const TensorMeta *b);
/* Whether v passes tm (the hot path).  Cannot fail. */
bool guard_tensor_matches(const TensorMeta *tm, PyObject *v);

/* torch's C++ check over n torch tensors at once (their order), made from
   values that have just passed their TENSOR_MATCH tms[i]: the bound check
   of a TensorGuards.  New reference, or NULL without an exception when this
   torch has none.  A call of it costs one tuple and one state read for all
   n, where n calls of each tensor's own check cost n of each. */
PyObject *guard_tensor_group_new(const TensorMeta *const *tms, PyObject *const *values, int n);
/* The whole TENSOR_MATCH of tm on source src as a Python-like expression.
   New str or NULL. */
PyObject *guard_tensor_render(const TensorMeta *tm, PyObject *src);
/* expr and observed (new strs) for the first part of tm that v fails.
   0, or -1 with an exception (then either may be NULL). */
int guard_tensor_failure(const TensorMeta *tm, PyObject *src, PyObject *v,
                         PyObject **expr, PyObject **observed);

/* ---- rendering (guard_render.c) ---- */

/* "numpy.ndarray", "mod.Outer.Inner"; builtins by bare name.  New str or NULL. */
PyObject *guard_type_name_ref(PyTypeObject *t);
/* For a guard that first checks the exact type: "type(src) is list" and the
   type seen.  0, or -1 with an exception (then either may be NULL). */
int guard_type_failure(PyObject *src, PyTypeObject *want, PyObject *v,
                       PyObject **expr, PyObject **observed);
/* expr and observed (new strs) for guard gi, which just failed.  0, or -1
   with an exception (both left NULL). */
int guard_failure_render(const GuardSet *gs, int gi, const FrameView *fv,
                         PyObject **vals, PyObject *backend,
                         PyObject **expr, PyObject **observed);

#endif /* DYNSCOPE_GUARDS_INT_H */
