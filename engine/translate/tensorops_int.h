/*
 * tensorops_int.h -- what tensorops.c (which calls are pure tensor
 * operations: the allowlists and torch's rules, built once each library is
 * found) and tensorops_call.c (putting a call into the graph: arguments,
 * torch's argument rules, folding metadata, results) share.  Contract of
 * both: translate.h.  GIL.
 */
#ifndef DYNSCOPE_TENSOROPS_INT_H
#define DYNSCOPE_TENSOROPS_INT_H

#include "translate_int.h"

/* NumPy's and torch's modules and types: tensorlib.h.  The allowlists below
   are built from them once each library is found (numpy_ops_loaded,
   torch_ops_loaded), and kept for the process (tensorops.c). */
typedef struct TensorRules {
    bool numpy_ops_loaded;         /* NumPy's functions are in pure_functions */
    bool torch_ops_loaded;         /* torch's sets below are made */
    PyObject *pure_functions;      /* strong: set of allowed callables (NumPy and torch) */
    PyObject *pure_methods;        /* strong: set of ndarray method names */
    PyObject *all_methods;         /* strong: set, pure_methods | torch_methods */
    PyObject *node_attributes;     /* strong: set of attribute names */
    PyObject *operator_module;     /* strong */
    PyObject *builtin_getattr;     /* strong: builtins.getattr */

    /* torch's rules, once torch is found (all strong, never released). */
    PyObject *torch_functions;     /* set: the torch functions in pure_functions */
    PyObject *torch_methods;       /* set of pure torch.Tensor method names */
    PyObject *torch_fold_methods;  /* set of metadata method names folded to constants */
    PyObject *torch_fold_attrs;    /* set of metadata attribute names folded to constants */
    PyObject *torch_fold_functions;/* set of torch functions folded to constants */
    PyObject *torch_known_results;  /* dict fn -> its result while capturing (below) */
    PyObject *torch_grad_managers;  /* dict cls -> mode it sets (True/False), None:
                                              set_grad_enabled (its argument) */
    PyObject *torch_set_grad_enabled; /* strong: torch._C._set_grad_enabled */
    PyObject *torch_state_managers; /* dict cls -> (enter fn, exit fn, parameter names,
                                              defaults: a tuple, NULL-free, None where
                                              required is marked by required_marker) */
    PyObject *torch_training_rule; /* dict fn -> (arg name, position, default): random
                                             unless that argument is False */
    PyObject *torch_random_functions; /* set: torch functions that always draw */
    PyObject *torch_state_queries; /* set: readers of torch's global state folded
                                      with a STATE_QUERY guard (tensorops_call.c) */
    PyObject *torch_random_methods; /* set of torch.Tensor method names that draw */
    PyObject *torch_inplace_methods; /* set of in-place torch.Tensor method names
                                              (tr_inplace_method_allowed) */
    PyObject *inplace_operators;   /* strong: set of operator.iadd, ... */
} TensorRules;
extern TensorRules tensorops_rules;

/* torch_training_rule's default for "random unless the probability
   argument is a constant 0" (attention's dropout_p). */
#define DROPOUT_P (-2)

/* Whether obj is a torch tensor or a torch module's object (tensorops.c). */
bool tensorops_is_torch_like(PyObject *obj);
/* Whether s is one of names (NULL-terminated).  Cannot fail. */
bool tensorops_in_names(const char *s, const char *const *names);
/* Run op on example values, warnings quiet.  New reference or NULL. */
PyObject *tensorops_call_on_examples(NodeOp op, PyObject *target, PyObject *eargs, PyObject *ekw);

#endif /* DYNSCOPE_TENSOROPS_INT_H */
