/*
 * guards.h -- the contract of guard sets: the accessors that reach a value
 * from a frame, the guards checked on those values, and what a failed check
 * reports.  Included by engine.h (where this section used to be), so every
 * engine file sees it.  Design: ../shared/DESIGN.md section 3.3 and
 * docs/architecture.md.
 *
 * Implemented by four files (their private contract: guards_int.h):
 *   guards.c        the cache-hit path: accessor values, guardset_check
 *                   (fail-fast, adaptive order), the constants it compares;
 *   guard_build.c   construction and validation (guardset_accessor,
 *                   guardset_add), set lifetime;
 *   guard_tensor.c  TensorMeta: capture from an example, compare, render;
 *   guard_render.c  guards and failures as Python-like text, GuardInfo.
 *
 * Invariants of a GuardSet (guardset_invariants checks them in debug builds):
 *   - acc[i].base < i: a base is added before the accessors built on it, so
 *     the accessors form a forest and no chain is deeper than
 *     MAX_ACCESSOR_DEPTH (value and render recursion is bounded by it);
 *   - order[0..n) is a permutation of 0..n-1 in which every guard comes after
 *     the guard it requires;
 *   - guards[i].requires is -1 or a structural guard (TYPE, ID, TENSOR,
 *     LIST/TUPLE_LENGTH, DICT_KEYS) on a strict ancestor of guards[i].acc,
 *     the first such guard on the nearest such ancestor;
 *   - every PyObject * in the set is a strong reference (but `expected` when
 *     a guard holds it weakly); a TENSOR_MATCH keeps the example's type,
 *     dtype and (torch) device, never the example itself.
 * All of it is protected by the GIL.  Checks never run Python for the exact
 * types they compare; a guard moves ahead only of guards it does not depend
 * on.
 */
#ifndef DYNSCOPE_GUARDS_H
#define DYNSCOPE_GUARDS_H

#ifndef PY_SSIZE_T_CLEAN
#define PY_SSIZE_T_CLEAN
#endif
#include <Python.h>
#include <stdbool.h>
#include <stdint.h>

/* What guards read (engine.h defines it: the inputs of a frame). */
typedef struct FrameView FrameView;

/* ------------------------------------------------------------------ */
/* Accessors: how a value is reached from a FrameView.                 */

typedef enum AccessorKind {
    ACC_LOCAL,      /* L['name']           index = fast-local slot             */
    ACC_GLOBAL,     /* G['name']           key = name (str), globals dict      */
    ACC_BUILTIN,    /* G['__builtins__']['name']  key = name, builtins dict    */
    ACC_CLOSURE,    /* L['name']           index = closure cell index (free var) */
    ACC_STACK,      /* S[i]                index = stack slot (resume frames)  */
    ACC_ATTR,       /* <base>.name         key = name (str)                    */
    ACC_ITEM,       /* <base>[i]           index = int, base list or tuple     */
    ACC_DICT_ITEM,  /* <base>[key]         key = dict key (str or int)         */
    ACC_CELL,       /* <base>.cell_contents  base is a cell                    */
    ACC_GLOBALS,    /* G                   the frame's globals dict itself     */
    ACC_TYPE,       /* type(<base>)        (never obj.__class__, which a class
                                            may override with Python code)   */
    ACC_OBJATTR,    /* object.__getattribute__(<base>, 'name')  key = name: the
                                            generic lookup, not the class's own
                                            __getattribute__ (which the
                                            translator inlined)              */
    ACC_MODULE,     /* sys.modules['name'] key = module name (str): what an
                                            import statement inside the code
                                            finds; never imports            */
    ACC_WEAKREF,    /* <base>()            base a weakref.ref: what it points
                                            to (a dead one reads as missing) */
    ACC_SET_ORDER,  /* tuple(<base>)       base an exact set or frozenset: its
                                            members in iteration order (any
                                            other base reads as missing)     */
} AccessorKind;

typedef struct Accessor {
    AccessorKind kind;
    int base;              /* index of the parent accessor, -1 for roots */
    Py_ssize_t index;      /* LOCAL / CLOSURE / STACK slot, ITEM index */
    PyObject *key;         /* strong: name or dict key; NULL when unused */
    PyObject *name;        /* strong: for LOCAL/CLOSURE the variable name (for rendering); else NULL */
    /* GLOBAL / BUILTIN / DICT_ITEM, and ATTR of a module: the last value
       read and the version of the dict it was read from (pycompat.h dict_version), so a
       check of an unchanged namespace reads no dict.  0: none.  The value
       is borrowed: an unchanged dict still holds it.  The one part of a
       set a check writes (under the GIL). */
    uint64_t seen_version;
    PyObject *seen_value;
    /* Construction indexes (guard_build.c), so that finding an existing
       accessor or guard scans its few siblings rather than the whole set:
       the newest accessor built on this one, the previous one built on the
       same base, the newest guard on this one; -1 for none. */
    int last_child, prev_sibling, last_guard;
    /* DICT_ITEM of an object's __dict__: read every time, never from the
       version cache -- from 3.13 an instance dict may share the object's
       inline values, which a plain attribute store changes without a new
       dict version. */
    bool uncached;
    /* ATTR of an object that is not a module: the version tag of the type
       (pycompat.h type_version) for which reading the attribute is reading
       the instance __dict__ -- the type's __getattribute__ is object's and
       no class in its MRO has the name -- so a check reads the dict,
       without getattr's three type lookups (nn.Module.__getattr__ makes
       them slow).  0: not known.  attr_type_refused: the last type's tag
       found not to qualify, so a check does not ask again.  Caches a check
       writes, as seen_*. */
    unsigned int attr_type_version, attr_type_refused;
} Accessor;

/* ------------------------------------------------------------------ */
/* Guards: the checks, and the sets that hold them.                    */

/*
 * A guard: a check applied to the value of one accessor.  Expected values
 * are held strongly so an ID_MATCH can never match a recycled address.
 */
typedef enum GuardKind {
    GUARD_TYPE_MATCH,     /* type(v) is expected                                 */
    GUARD_ID_MATCH,       /* v is expected                                       */
    GUARD_EQUALS_MATCH,   /* type(v) is type(expected) and v == expected;
                             expected is int/float/bool/str/bytes/complex/None or
                             a tuple, set or frozenset of these (compared in C,
                             never calls Python) */
    GUARD_TENSOR_MATCH,   /* type, dtype, ndim, shape, strides, and for torch
                             device and requires_grad (see TensorMeta)       */
    GUARD_LIST_LENGTH,    /* type(v) is list and len(v) == length                */
    GUARD_TUPLE_LENGTH,   /* type(v) is tuple and len(v) == length               */
    GUARD_DICT_KEYS,      /* type(v) is dict and list(v) == expected (a tuple);
                             length 1: v a dict subclass instance (its TYPE_MATCH
                             comes first), in its own order (an OrderedDict's) */
    GUARD_HASATTR,        /* hasattr(v, expected) == (length != 0)               */
    GUARD_CODE_MATCH,     /* v.__code__ is expected (v a function)               */
    GUARD_NOT_NONE,       /* v is not None                                       */
    GUARD_BACKEND_MATCH,  /* the active backend is expected (accessor unused, -1) */
    GUARD_DICT_LACKS,     /* v is a dict without key `expected`, a str or a
                             class of metaclass type (an instance __dict__
                             must not shadow a class method; copyreg's
                             table has no copier for a class) */
    GUARD_DICT_EMPTY,     /* v is a dict or dict subclass (OrderedDict) with no
                             items (nn.Module hook dicts) */
    GUARD_SAME_AS,        /* v is the value of accessor `length` (an earlier
                             one): two slots hold one object               */
    GUARD_GRAD_MODE,      /* torch.is_grad_enabled() is expected (Py_True or
                             Py_False; accessor unused, -1) */
    GUARD_STATE_QUERY,    /* expected is (fn, args, result): fn(*args) is (or,
                             for a number, equals) result -- fn one of torch's
                             readers of global state, a C function
                             (torch.is_autocast_enabled('cpu')); accessor
                             unused, -1 */
    GUARD_NOT_SAME_AS,    /* v is not the value of accessor `length` (an earlier
                             one): a plan writes an attribute of one object
                             and reads the same name of the other */
    GUARD_CLASS_LACKS,    /* v is a class none of whose __mro__ classes has
                             `expected` (a str) in its own __dict__: what
                             _PyType_Lookup finds, so an instance's lookup,
                             setattr and LOAD_METHOD go on as traced.  Not
                             hasattr(v, name), which a metaclass answers too
                             (every class has __name__) */
    GUARD_SIZES_HOLD,     /* a relation of tensor sizes holds: expected is the
                             tuple (c, op, acc, dim, k, acc, dim, k, ...) of
                             ints, c + sum(k * size(dim) of the array or tensor
                             of accessor acc) OP 0, op 0-5 for < <= == != > >=;
                             a triple with k 0 is a factor of the next one's
                             term (k * size * size: an element count); dim -1:
                             the value of accessor acc, an int; v (the
                             first term's) unused but for its accessor.  The
                             branch a translation decided on sizes */
    GUARD__COUNT
} GuardKind;

/* Tensor metadata an entry was compiled for: a NumPy array or a torch
   tensor (device != NULL). */
typedef struct TensorMeta {
    PyTypeObject *type;    /* strong: exact type (numpy.ndarray, torch.Tensor,
                              torch.nn.Parameter) */
    PyObject *dtype;       /* strong: the array's dtype (descr) / torch.dtype --
                              borrowed when dtype_borrowed: one of NumPy's
                              builtin descrs, which live as long as NumPy, so
                              that guards leave their refcounts (which programs
                              and NumPy's own tests read) as they were */
    bool dtype_borrowed;
    int ndim;
    Py_ssize_t *shape;     /* owned (PyMem): ndim items; -1 for a dynamic
                              dimension (any size from 2 on) */
    Py_ssize_t *strides;   /* owned (PyMem): ndim items, in bytes (NumPy) or
                              elements (torch); all -1 (not compared) when a
                              dimension is dynamic: the strides follow the
                              sizes */
    PyObject *device;      /* strong: torch.device; NULL for NumPy */
    int requires_grad;     /* torch: 0 / 1; NumPy: -1 */
    PyObject *torch_check; /* strong or NULL: torch's own C++ check of this
                              metadata, the bound check() of a
                              torch._C._dynamo.guards.TensorGuards made from
                              the example (guard_tensor.c); NULL for NumPy or
                              a torch without it.  Holds no tensor. */
} TensorMeta;

typedef struct Guard {
    GuardKind kind;
    int acc;               /* accessor index, -1 for GUARD_BACKEND_MATCH,
                              GUARD_GRAD_MODE and GUARD_STATE_QUERY */
    int requires;          /* index of a guard that must pass before this one runs
                              (the TYPE/ID guard of the accessor's base), or -1 */
    PyObject *expected;    /* strong: see GuardKind; NULL when unused -- but
                              borrowed when `weak` is set */
    PyObject *weak;        /* strong or NULL: TYPE_MATCH and ID_MATCH hold a weak
                              reference to `expected` when it takes one, so that
                              a cache entry never keeps a class or function of
                              the program alive (the program could tell); the
                              guard fails once the object is gone */
    int prev_on_acc;       /* the previous guard on the same accessor, or -1
                              (guard_build.c's index) */
    Py_ssize_t length;     /* LIST_LENGTH / TUPLE_LENGTH; HASATTR: 1 = must have */
    TensorMeta *tensor;    /* owned: TENSOR_MATCH only */
    uint64_t fails;        /* how often this guard was the first to fail */
    bool in_group;         /* a torch TENSOR_MATCH of the set's tensor group */
    int site;              /* provenance: index into the set's `sites` of the
                              user source whose access made the translator
                              add this guard, or -1 (unknown; the guards the
                              engine adds for itself: backend, grad mode) */
} Guard;

/*
 * A guard set: the accessors and guards of one cache entry.  Guards run in
 * `order`; the guard that fails most often moves toward the front, but
 * never ahead of the guard it `requires`.
 */
typedef struct GuardSet {
    int nacc, acc_cap;
    Accessor *acc;         /* owned */
    int last_root;         /* the newest root accessor (base -1), or -1; the
                              roots chain through prev_sibling */
    int last_unrooted;     /* the newest guard with no accessor, or -1 */
    int n, cap;
    Guard *guards;         /* owned */
    int *order;            /* owned: n indexes into guards */
    /* The torch tensors of the set checked by one call (guards.c, "tensor
       group"): the TENSOR_MATCH guards of torch tensors read from fast
       locals, when there are two or more.  Made after the first check
       that passed; a group that passes lets the check skip those guards,
       any other answer leaves them to their own checks. */
    enum { GROUP_UNKNOWN, GROUP_NONE, GROUP_READY } group_state;
    /* Whether every guard is one the short walk can check (guards.c
       simple_passes: backend, type, identity or NumPy TENSOR_MATCH of a
       fast local -- C reads only, no Python).  Decided at the first check
       after the last guard was added. */
    enum { SIMPLE_UNKNOWN, SIMPLE_NO, SIMPLE_YES } simple;
    int ngroup;
    int *group;            /* owned: ngroup guard indexes */
    PyObject *group_check; /* strong: torch's check over those tensors */
    /* Provenance (guard.site): the user stacks guards were added at, each a
       list of (filename, lineno, qualname, source line) tuples, outermost
       first -- what tracer_user_stack() makes.  Strong list or NULL. */
    PyObject *sites;
    /* While a translator builds the set: the index in `sites` of the user
       source being translated now (appended when new), or -1; never leaves
       an exception set.  NULL outside a translation (the set outlives its
       translator). */
    int (*current_site)(struct GuardSet *gs, void *ctx);
    void *site_ctx;
    /* Time spent in guardset_accessor and guardset_add (engine_ticks
       units): the guard phase of the compile that built the set. */
    uint64_t build_ticks;
} GuardSet;

/* Why a guard set did not match: the first failing guard and what was seen. */
typedef struct GuardFailure {
    int guard;             /* index into guards, -1 when the set matched */
    PyObject *expr;        /* strong: expression that failed, e.g. "L['x'].shape[0] == 4" */
    PyObject *observed;    /* strong: what was seen instead, e.g. "5" or "float64" */
} GuardFailure;

/* ------------------------------------------------------------------ */
/* Construction (guard_build.c).                                       */

void guardset_init(GuardSet *gs);
void guardset_clear(GuardSet *gs);              /* releases everything; gs is then empty */

/* Find or add an accessor; returns its index or -1 with an exception set.
   `key` and `name` are borrowed (the table takes its own references). */
int guardset_accessor(GuardSet *gs, AccessorKind kind, int base,
                      Py_ssize_t index, PyObject *key, PyObject *name);

/* Add a guard; returns its index or -1 with an exception set.  Adding a guard
   identical to an existing one returns the existing index.  `expected` is
   borrowed.  For TENSOR_MATCH pass the example array as `expected`: the
   metadata is read from it. */
/* Whether o, as a dict key, is hashed and compared by identity in C (a
   class; an object whose class keeps object's __hash__ and __eq__), so a
   dict-item accessor may look it up: its identity is the key.  Cannot
   fail. */
bool guard_key_is_identity(PyObject *o);

int guardset_add(GuardSet *gs, GuardKind kind, int acc, PyObject *expected,
                 Py_ssize_t length);

/* ------------------------------------------------------------------ */
/* The cache-hit path (guards.c).                                      */

/*
 * Evaluate the accessor `acc` into vals[acc] (strong, memoized; vals has
 * gs->nacc slots, NULL = not yet computed).  Returns a borrowed reference
 * to the value, or NULL if it cannot be reached (no exception is left set:
 * an unreachable value simply fails its guard).
 */
PyObject *guardset_value(const GuardSet *gs, int acc, const FrameView *fv,
                         PyObject **vals);
/* Release vals[0..nacc). */
void guardset_release_values(const GuardSet *gs, PyObject **vals);

/*
 * Check all guards in order.  Returns 1 when all pass, 0 when one fails
 * (its fail counter is bumped and the order adapted), -1 on error with an
 * exception set (only for errors that are not guard failures, e.g. memory).
 * vals: as for guardset_value; on return it holds every value computed.
 * `backend` is the backend of the current capture (for BACKEND_MATCH).
 * On 0, *failed (when not NULL) is the index of the guard that failed; on 1
 * and -1 it is untouched.  Checking only: it renders nothing (the hit
 * path passes NULL and takes the short walk); the miss path says why with
 * guardset_explain_failure -- Dynamo's TensorCheck::check apart from
 * check_verbose.
 * Preconditions: no exception is set; vals has gs->nacc slots.
 */
int guardset_check(GuardSet *gs, const FrameView *fv, PyObject **vals,
                   PyObject *backend, int *failed);
/* Release fail's references and mark it "matched" (guard -1).  Cannot fail. */
void guardfailure_clear(GuardFailure *fail);

/* ------------------------------------------------------------------ */
/* Rendering and inspection (guard_render.c).  These run on misses and  */
/* for inspection only, and may run Python (numpy's dtype.__str__).    */

/* "L['x']", "G['np'].abs", "L['xs'][2]", "S[0]" -- new str or NULL. */
PyObject *guardset_render_source(const GuardSet *gs, int acc);
/* Whether v OP 0 holds, op 0-5 for < <= == != > >= (GUARD_SIZES_HOLD's
   relations; the translator decides them the same way). */
bool guard_relation_holds(int op, long long v);
/* Python-like expression of a guard, e.g. "L['n'] == 3",
   "len(L['xs']) == 2", "L['x'].dtype == float32 and L['x'].shape == (3, 4) ..."
   New str or NULL. */
PyObject *guardset_render_guard(const GuardSet *gs, int guard);
/* Why guard gi failed on fv, as guardset_check just found (vals as it
   left them): fill *fail with its expression and the observed value.
   *fail must be initialized ({-1, NULL, NULL} or an earlier failure): on 0
   its references are replaced, on -1 (MemoryError set) it is untouched.  A
   rendering that fails for another reason (a broken __module__, say) is
   replaced by the guard kind and "<unrenderable>".  It may run Python
   code (numpy's dtype.__str__, a type's __module__), so callers keep the
   frame hook out of the way. */
int guardset_explain_failure(const GuardSet *gs, int gi, const FrameView *fv, PyObject **vals,
                             PyObject *backend, GuardFailure *fail);
/* "TENSOR_MATCH" etc.  Static string, cannot fail. */
const char *guard_kind_name(GuardKind kind);

/* The user stack guard g was added at (guard.site): a borrowed list of
   (filename, lineno, qualname, source) tuples, outermost first, or NULL
   when unknown.  Cannot fail. */
PyObject *guardset_site(const GuardSet *gs, int guard);

/* Every guard of gs that fails on fv, without the fail-fast walk's side
   effects (no counters, no reordering): guards whose requirement failed are
   not evaluated (they fail by consequence).  Writes up to `max` failing
   guard indexes into out, in index order, and returns how many failed.
   Cannot fail (an exception a value raised is cleared). */
int guardset_failing(const GuardSet *gs, const FrameView *fv, PyObject **vals,
                     PyObject *backend, int *out, int max);

/* The guards of gs that fail on fv (guardset_failing), at most
   GUARD_DIFF_MAX of them, rendered: a new list of dicts {"idx", "kind",
   "expr", "observed", "user_stack" (the guard's site, or None)}, and in
   *nfailing how many fail in all.  NULL with an exception on error (memory);
   a guard that cannot be rendered shows its kind and "<unrenderable>". */
#define GUARD_DIFF_MAX 32
PyObject *guardset_diff(const GuardSet *gs, const FrameView *fv, PyObject **vals,
                        PyObject *backend, int *nfailing);

/* GuardInfo: a read-only Python object with .kind, .expr, .source for one
   guard, and by name .filename, .lineno, .user_stack: where it came from
   (what cache_entries() and explain expose).  New reference or NULL. */
PyObject *guardset_info_list(const GuardSet *gs);
/* One older entry's first failing guard, as recompile and cache_limit
   reports list them: a GuardFailureInfo, the tuple (entry compile id, kind,
   expr, observed) with .filename and .lineno by name (the guard's site, or
   None).  Arguments borrowed (NULL reads as None).  New reference or NULL. */
PyObject *guard_failure_info_new(PyObject *entry_id, const char *kind, PyObject *expr,
                                 PyObject *observed, PyObject *filename, PyObject *lineno);
/* The filename and lineno of a GuardFailureInfo (borrowed; None unknown),
   or false when item is not one.  Cannot fail. */
bool guard_failure_info_site(PyObject *item, PyObject **filename, PyObject **lineno);

/* Create the GuardInfo and GuardFailureInfo types and add them to `module`.
   0 / -1. */
int guards_types_init(PyObject *module);

#endif /* DYNSCOPE_GUARDS_H */
