"""Conformance fuzzing (issue 9): capturing never changes what a program does.

A Hypothesis strategy writes small NumPy programs as Python SOURCE text --
arithmetic, reductions, reshapes and views, indexing, branches on shapes and
on values, loops over range() and over lists, calls of generated helper
functions (some with defaults and keyword arguments, inlined by the
translator), prints, .item()/float() escapes, in-place updates of local
copies, list building, try/with/comprehensions (which the translator does
not model), tuple/list/dict returns.  Each program is written to a real file
and imported (so linecache and inspect see its source), then its function is
called several times eagerly and under ``dynscope.optimize("eager")`` with
changing inputs: same shapes with new values, new shapes, new dtypes
(float64/float32/int64 where the program allows ints), values with NaN/inf/-0.0.

Every pair of calls must agree exactly: the same result (type, dtype, shape,
strides, values with NaN == NaN, sign of zero, containers, and which results
are inputs / share memory with inputs), the same printed output, the same
warnings, the same inputs afterwards, and when eager raises the same
exception (type and message).

How the generator keeps programs valid: it runs every statement it writes on
dummy inputs for each planned shape configuration ("worlds": one float64 and
one int64 world per configuration) and keeps a statement only when it runs
there.  A statement that fails in some configurations only is now and then
kept on purpose, as are explicit raises, so that some calls raise.

CI runs ``DYNSCOPE_FUZZ_EXAMPLES`` (default 500) examples drawn from a seed:
``DYNSCOPE_FUZZ_SEED``, else the date (tests/_seeds.py), so each day's CI
runs other programs and every run of one day the same ones; the seed is
printed at the end of the run.  ``make fuzz`` runs 20000 random ones
(``DYNSCOPE_FUZZ_RANDOM=1``).  On a failure, Hypothesis prints the shrunk
program as ``Program(source=..., params=..., configs=..., calls=[...])`` and
the source once more, readable; the message names the failing call and the
program's file (kept on failure), the seed, and the command that runs the
same examples again.  To replay the one program: ``from test_fuzz import *;
reproduce(Program(...))`` with tests/ on sys.path.
"""
import collections
import contextlib
import copy
import hashlib
import importlib.util
import io
import linecache
import os
import re
import sys
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, note, seed, settings
from hypothesis.control import currently_in_test_context
from hypothesis import strategies as st

import dynscope
from dynscope import _C

from conftest import assert_same
from _seeds import SEED, USED, reproducer

EXAMPLES = int(os.environ.get("DYNSCOPE_FUZZ_EXAMPLES", 500))
RANDOM = os.environ.get("DYNSCOPE_FUZZ_RANDOM", "") == "1"


# Hypothesis remembers every example of a run (some 40 KB each here): a long
# random run is split into runs of CHUNK examples, each with fresh randomness.
# Otherwise the examples come from SEED (tests/_seeds.py).
CHUNK = 2000
CHUNKS = -(-EXAMPLES // CHUNK) if RANDOM else 1

FUZZ_SETTINGS = settings(
    max_examples=-(-EXAMPLES // CHUNKS),
    deadline=None,
    derandomize=False,
    database=None,
    print_blob=RANDOM,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                           HealthCheck.filter_too_much, HealthCheck.large_base_example],
)

# Module-level constants of every generated program (read as globals).
SCALE = 1.5
OFFSETS = (0.5, -1.0)
MODULE_HEADER = f"import numpy as np\n\nSCALE = {SCALE!r}\nOFFSETS = {OFFSETS!r}\n" + """
# Objects and generators the program can see (st_object): the harness puts
# them back in their first state before every call (reset_module_state) and
# compares what the call left in them (module_state).
class State:
    def __init__(self):
        self.count = 0
        self.scale = 1.5
        self.table = {}

    @property
    def double(self):
        return self.scale * 2.0


class Box:
    def __init__(self, v, k=1.0):
        self.v = v
        self.k = k

    def get(self):
        return self.v * self.k


STATE = State()
RS = np.random.RandomState(0)


# Attribute loads that feed calls, one per kind of class attribute
# (st_attr_call): a call binds obj first only for a method descriptor.
class Meta(type):
    def meta_k(cls):
        return 0.25


class Kinds(metaclass=Meta):
    Inner = Box                   # a class, as a class attribute

    def method(self, x):
        return x * 2.0

    @staticmethod
    def static(x):
        return x + 1.0

    @classmethod
    def klass(cls, x):
        return x - 0.5 if cls is Kinds else x

    @property
    def prop(self):
        return lambda x: x * 0.5

    def __call__(self, x):
        return x + 2.0


class Slotted:
    __slots__ = ("f",)


KINDS = Kinds()
KINDS.fn = lambda x: x * 3.0      # a function in the instance __dict__
KINDS.obj = Kinds()               # a callable instance
KINDS.cls = Box                   # a class in the instance __dict__
SLOTTED = Slotted()
SLOTTED.f = lambda x: x - 3.0     # a function in a slot
"""
_HEADER_NS: dict = {}
exec(compile(MODULE_HEADER, "<fuzz header>", "exec"), _HEADER_NS)


def _noop_print(*args, **kwargs):
    pass


# ===========================================================================
# The generator.
# ===========================================================================

class World:
    """One planned configuration (shapes) and dtype kind, with the dummy
    values every variable has there at this point of the program."""

    __slots__ = ("cfg", "kind", "env")

    def __init__(self, cfg, kind, env):
        self.cfg, self.kind, self.env = cfg, kind, env

    def clone(self):
        return World(self.cfg, self.kind, copy.deepcopy(self.env))


class Expr:
    __slots__ = ("code", "vals", "fresh")

    def __init__(self, code, vals, fresh=False):
        self.code, self.vals, self.fresh = code, vals, fresh


def kind_of(v):
    if isinstance(v, (bool, np.bool_)):
        return "bool"
    if isinstance(v, (np.ndarray, np.generic)):
        return "arr"
    if isinstance(v, (int, float)):
        return "num"
    if isinstance(v, list):
        return "list"
    return "other"


MAX_ELEMENTS = 512   # per array, and per list: keeps programs small and fast


def too_big(v, depth=0):
    if isinstance(v, np.ndarray):
        return v.size > MAX_ELEMENTS
    if isinstance(v, (list, tuple)):
        return len(v) > 16 or depth > 3 or any(too_big(x, depth + 1) for x in v)
    return False


def sig_of(v):
    if isinstance(v, (np.ndarray, np.generic)):
        return ("arr", np.shape(v), v.dtype.str)
    if isinstance(v, list):
        return ("list", tuple(sig_of(x) for x in v))
    return (type(v).__name__,)


# Expression templates.  {0}, {1}: operands.  The flag says whether the
# result is a fresh array (not a view of an operand).
UNARY = [
    ("np.abs({0})", True), ("(-{0})", True), ("np.tanh({0})", True), ("np.sin({0})", True),
    ("np.sqrt(np.abs({0}))", True), ("({0} ** 2)", True), ("np.exp(-np.abs({0}))", True),
    ("np.floor({0})", True), ("np.sign({0})", True), ("np.clip({0}, -1, 1)", True),
    ("np.round({0}, 1)", True), ("{0}.T", False), ("{0}.copy()", True),
    ("{0}.astype(np.float64)", True), ("{0}.astype(np.float32)", True), ("{0}.ravel()", False),
    ("{0}.reshape(-1)", False), ("{0}.reshape(-1, 1)", False), ("np.cumsum({0}, axis=0)", True),
    ("np.flip({0}, axis=0)", False), ("np.sort({0}, axis=-1)", True), ("{0}[::-1]", False),
    ("{0}[1:]", False), ("{0}[:2]", False), ("{0}[0]", False), ("{0}[-1]", False),
    ("{0}[None]", False), ("np.expand_dims({0}, 0)", False), ("np.squeeze({0})", False),
    ("{0}[:, 0]", False), ("{0}[..., 1:]", False), ("np.transpose({0})", False),
    ("{0}.sum(axis=0)", True), ("{0}.sum(axis=-1)", True), ("{0}.mean(axis=0)", True),
    ("{0}.max(axis=-1)", True), ("{0}.min(axis=0, keepdims=True)", True),
    ("{0}.sum(axis=0, keepdims=True)", True), ("({0} > 0)", True), ("np.diff({0}, axis=0)", True),
    ("np.roll({0}, 1, axis=0)", True), ("np.tile({0}, 2)", True),
    ("np.repeat({0}, 2, axis=0)", True), ("np.atleast_2d({0})", False),
    ("np.maximum({0}, 0)", True), ("{0}.reshape({0}.shape[0], -1)", False),
    ("np.where({0} > 0, {0}, 0.0)", True), ("{0}[{0}.shape[0] // 2]", False),
    ("np.zeros_like({0})", True), ("np.ones({0}.shape)", True),
    ("np.take({0}, [0, -1], axis=0)", True), ("{0}[[0, -1]]", True),
    ("{0}.reshape({0}.shape[::-1])", False), ("(np.arange({0}.shape[0]) * 0.5)", True),
    ("({0} if {0}.sum() > 0 else -{0})", False), ("np.round({0}, decimals=2)", True),
    ("np.clip({0}, a_min=-0.5, a_max=None)", True),
]
REDUCE = [
    ("{0}.sum()", True), ("{0}.mean()", True), ("np.max({0})", True), ("{0}.min()", True),
    ("np.linalg.norm({0})", True), ("{0}.std()", True), ("np.count_nonzero({0} > 0)", True),
    ("{0}[{0} > 0].sum()", True), ("np.median({0})", True), ("{0}.argmax()", True),
    ("np.prod({0})", True), ("np.var({0})", True), ("{0}.ptp()", True),
    ("np.flatnonzero({0} > 0).size", True), ("np.unique({0}).sum()", True),
    ("np.nonzero({0} > 0)[0].sum()", True),
]
BINARY = [
    ("({0} + {1})", True), ("({0} - {1})", True), ("({0} * {1})", True), ("({0} / {1})", True),
    ("np.maximum({0}, {1})", True), ("np.minimum({0}, {1})", True),
    ("np.where({0} > {1}, {0}, {1})", True), ("({0} @ {1})", True), ("np.dot({0}, {1})", True),
    ("np.concatenate([{0}, {1}])", True), ("np.stack([{0}, {1}])", True),
    ("({0} * {1} + 1)", True), ("({0} // {1})", True), ("({0} % 3 + {1})", True),
    ("np.outer({0}, {1})", True), ("({0} ** 2 - {1})", True),
]
LITERALS = ["2", "0.5", "-1.5", "3", "1.0", "0.25", "-2", "SCALE", "OFFSETS[0]", "OFFSETS[1]"]
ESCAPES = ["float({0}.sum())", "{0}.mean().item()", "int({0}.argmax())", "float(np.max({0}))",
           "{0}.shape[0]", "len({0})", "{0}.size", "float({0}.ravel()[0])", "int({0}.ndim)",
           "round(float({0}.std()), 3)"]
VALUE_CONDS = ["{0}.sum() > 0", "float({0}.mean()) < 0.5", "({0} > 0).any()", "{0}.max() > 1",
               "np.all({0} >= 0)", "{0}.min() < -1", "({0} < 0).sum() > 1",
               "{0}.dtype.kind == 'f'", "{0}.std() > 0.8"]
NUM_CONDS = ["{0} > 0", "{0} < 1.0", "{0} == 0", "abs({0}) > 1.2"]
SHAPE_CONDS = ["{0}.shape[0] > 2", "{0}.ndim == 2", "{0}.shape[0] == 1", "{0}.size > 4",
               "{0}.shape[0] == {0}.shape[-1]", "{0}.shape[-1] < 3",
               "isinstance({0}, np.ndarray)", "len({0}.shape) > 1 and {0}.shape[1] > 1"]

SHAPE_TEMPLATES = [("N",), ("N", "M"), ("M",), ("M", "N"), ("N", 1), ()]


class Gen:
    """Writes one program, statement by statement, checking each on the
    dummy worlds."""

    MAX_STMTS = 40

    def __init__(self, draw):
        self.draw = draw
        self.int_ok = True
        self.ns = {"np": np, "print": _noop_print, "SCALE": SCALE, "OFFSETS": OFFSETS}
        self.ns.update({k: _HEADER_NS[k] for k in ("State", "Box", "STATE", "RS", "Kinds", "KINDS",
                                                   "SLOTTED")})
        self.helpers = []
        self.nvars = 0
        self.nhelpers = 0
        self.stmts = 0
        self.owned = set()      # names of arrays the program made itself (copies)
        self.features = collections.Counter()
        self._codes = {}

    # ---- choices ------------------------------------------------------------

    def n(self, lo, hi):
        return self.draw(st.integers(lo, hi))

    def pick(self, seq):
        return seq[self.n(0, len(seq) - 1)]

    def coin(self, p_percent):
        return self.n(0, 99) < p_percent

    def weighted(self, options):
        """options: [(weight, value)]; the first option is the simplest."""
        total = sum(w for w, _ in options)
        k = self.n(0, total - 1)
        for w, v in options:
            if k < w:
                return v
            k -= w
        raise AssertionError

    def fresh_name(self, prefix="v"):
        self.nvars += 1
        return f"{prefix}{self.nvars - 1}"

    # ---- running code on the worlds -----------------------------------------

    def usable(self, w):
        return w.kind == "f" or self.int_ok

    def compiled(self, code, mode):
        key = (code, mode)
        co = self._codes.get(key)
        if co is None:
            co = self._codes[key] = compile(code, "<fuzzgen>", mode)
        return co

    def eval_in(self, w, code):
        g = dict(self.ns)
        g.update(w.env)
        return eval(self.compiled(code, "eval"), g)

    def evaluate(self, worlds, code, fresh=False):
        """code evaluated in every usable world, or None if it fails in a
        float world (a failure in an int world rules out int inputs)."""
        vals = []
        for w in worlds:
            if not self.usable(w):
                vals.append(None)
                continue
            try:
                v = self.eval_in(w, code)
                if too_big(v):
                    return None
                vals.append(v)
            except Exception:
                if w.kind == "i":
                    self.int_ok = False
                    vals.append(None)
                    continue
                return None
        if not any(self.usable(w) for w in worlds):
            return None
        return Expr(code, vals, fresh)

    def execute(self, worlds, code, allow_partial=False, in_loop=False):
        """Run statement code in a copy of every usable world.  Returns the
        new worlds, or None.  With allow_partial, float worlds where it fails
        are dropped (their calls will raise) as long as one survives."""
        out, failed = [], set()
        if in_loop:   # a break/continue in code: run it as one loop iteration
            code = "for _once in (0,):\n" + "\n".join("    " + ln for ln in code.split("\n"))
        co = self.compiled(code, "exec")
        for w in worlds:
            if not self.usable(w):
                out.append(w)
                continue
            g = dict(self.ns)
            g.update(copy.deepcopy(w.env))
            try:
                exec(co, g)
            except Exception:
                if w.kind == "i":
                    self.int_ok = False
                    out.append(w)
                    continue
                if not allow_partial:
                    return None
                failed.add(w.cfg)
                continue
            env = {k: v for k, v in g.items() if k not in self.ns and not k.startswith("_")}
            if any(too_big(v) for v in env.values()):
                return None
            out.append(World(w.cfg, w.kind, env))
        out = [w for w in out if w.cfg not in failed]
        if not any(w.kind == "f" for w in out):
            return None
        if failed:
            self.features["deliberate_error"] += 1
        return out

    # ---- what is in scope ---------------------------------------------------

    def names(self, worlds, kind, pred=None):
        live = [w for w in worlds if self.usable(w)]
        result = []
        for name in live[0].env:
            if name.startswith("_"):
                continue
            ok = True
            for w in live:
                if name not in w.env or kind_of(w.env[name]) != kind:
                    ok = False
                    break
                if pred is not None and not pred(w.env[name]):
                    ok = False
                    break
            if ok:
                result.append(name)
        return result

    def var(self, worlds, name):
        return Expr(name, [w.env.get(name) for w in worlds])

    # ---- expressions -----------------------------------------------------------

    def leaf_array(self, worlds):
        names = self.names(worlds, "arr")
        if not names:
            return None
        # recently defined names a little more often
        if self.coin(40):
            name = names[-1 - self.n(0, min(2, len(names) - 1))]
        else:
            name = self.pick(names)
        return self.var(worlds, name)

    def scalar_operand(self, worlds):
        nums = self.names(worlds, "num")
        if nums and self.coin(35):
            return self.var(worlds, self.pick(nums))
        return self.evaluate(worlds, self.pick(LITERALS))

    def array_expr(self, worlds, depth):
        """An expression whose value is an array (or a 0-d NumPy scalar)."""
        for _ in range(4):
            e = self._array_expr(worlds, depth)
            if e is not None:
                return e
        return self.leaf_array(worlds)

    def _array_expr(self, worlds, depth):
        if depth <= 0:
            return self.leaf_array(worlds)
        what = self.weighted([(3, "leaf"), (4, "unary"), (5, "binary"), (2, "reduce")])
        if what == "leaf":
            return self.leaf_array(worlds)
        a = self.array_expr(worlds, depth - 1)
        if a is None:
            return None
        if what == "unary":
            tmpl, fresh = self.pick(UNARY)
            if tmpl.count("{0}") > 1 and len(a.code) > 12:
                return None   # keep the source readable: repeat only short operands
            return self.evaluate(worlds, tmpl.format(a.code), fresh)
        if what == "reduce":
            tmpl, fresh = self.pick(REDUCE)
            if tmpl.count("{0}") > 1 and len(a.code) > 12:
                return None
            return self.evaluate(worlds, tmpl.format(a.code), fresh)
        tmpl, fresh = self.pick(BINARY)
        if tmpl.count("{0}") > 1 and len(a.code) > 16:
            return None
        b = self.second_operand(worlds, a, depth)
        if b is None or (tmpl.count("{1}") > 1 and len(b.code) > 16):
            return None
        return self.evaluate(worlds, tmpl.format(a.code, b.code), fresh)

    def second_operand(self, worlds, a, depth):
        choice = self.weighted([(3, "same_shape"), (2, "scalar"), (2, "expr")])
        if choice == "scalar":
            return self.scalar_operand(worlds)
        if choice == "same_shape":
            shapes = [np.shape(v) for v, w in zip(a.vals, worlds) if self.usable(w)]
            cands = [n for n in self.names(worlds, "arr")
                     if [np.shape(w.env[n]) for w in worlds if self.usable(w)] == shapes]
            if cands:
                return self.var(worlds, self.pick(cands))
        return self.array_expr(worlds, depth - 1)

    # ---- statements -------------------------------------------------------------

    def block(self, worlds, depth, lo, hi, ctx):
        """lo..hi statements.  ctx: set of flags (loop, helper)."""
        lines = []
        count = self.n(lo, hi)
        for _ in range(count):
            if self.stmts >= self.MAX_STMTS:
                break
            res = None
            for _ in range(3):
                res = self.statement(worlds, depth, ctx)
                if res is not None:
                    break
            if res is None:
                continue
            self.stmts += 1
            stmt_lines, worlds = res
            lines.extend(stmt_lines)
            if not any(w.kind == "f" for w in worlds):
                break
        return lines, worlds

    def statement(self, worlds, depth, ctx):
        options = [
            (10, self.st_assign), (3, self.st_copy), (4, self.st_inplace), (3, self.st_escape),
            (3, self.st_print), (2, self.st_list), (2, self.st_append), (1, self.st_closure),
            (1, self.st_rng), (1, self.st_swap), (1, self.st_num_update), (2, self.st_python),
            (3, self.st_object), (2, self.st_attr_call),
        ]
        if depth < 2:
            options += [(3, self.st_value_if), (2, self.st_shape_if), (3, self.st_for),
                        (2, self.st_helper_call)]
        if depth == 0 and "helper" not in ctx:
            options += [(2, self.st_raise), (1, self.st_unmodelled), (1, self.st_while)]
        if "loop" in ctx:
            options += [(1, self.st_break_continue)]
        fn = self.weighted(options)
        return fn(worlds, depth, ctx)

    def assign_expr(self, worlds, name, e, top):
        if e is None:
            return None
        code = f"{name} = {e.code}"
        new = self.execute(worlds, code, allow_partial=top and self.coin(8))
        if new is None:
            return None
        if e.fresh:
            self.owned.add(name)
        return [code], new

    def st_assign(self, worlds, depth, ctx):
        e = self.array_expr(worlds, self.n(1, 3))
        if e is None:
            return None
        # rebind an existing local now and then (loop-carried in loops)
        existing = [n for n in self.names(worlds, "arr") if n.startswith("v")]
        if "loop" in ctx:
            # a loop-carried variable keeps its shape, or the loop could grow
            # it on every iteration
            shapes = [sig_of(v) for v, w in zip(e.vals, worlds) if self.usable(w)]
            existing = [n for n in existing
                        if [sig_of(w.env[n]) for w in worlds if self.usable(w)] == shapes]
        if existing and self.coin(20 if "loop" not in ctx else 50):
            name = self.pick(existing)
            self.owned.discard(name)
        else:
            name = self.fresh_name()
        res = self.assign_expr(worlds, name, e, depth == 0 and not ctx)
        if res is not None:
            self.features["assign"] += 1
        return res

    def st_copy(self, worlds, depth, ctx):
        a = self.leaf_array(worlds)
        if a is None:
            return None
        tmpl = self.pick(["{0}.copy()", "np.array({0}, dtype=np.float64)", "{0}.astype(np.float64)",
                          "np.zeros_like({0})", "np.array({0})", "np.ones({0}.shape)",
                          "np.full_like({0}, 2)"])
        name = self.fresh_name()
        res = self.assign_expr(worlds, name, self.evaluate(worlds, tmpl.format(a.code), True), False)
        if res is not None:
            self.features["copy"] += 1
        return res

    def st_inplace(self, worlds, depth, ctx):
        def target_ok(v):
            return isinstance(v, np.ndarray) and v.ndim >= 1 and v.size >= 1
        targets = [n for n in self.names(worlds, "arr", target_ok) if n in self.owned]
        if not targets:
            return self.st_copy(worlds, depth, ctx)
        t = self.pick(targets)
        ints = [n for n in self.names(worlds, "num") if n.startswith("i")]
        forms = ["{t} += {e}", "{t} -= {e}", "{t} *= {s}", "{t}[0] = {s}", "{t}[{t} < 0] = 0",
                 "{t}[-1] *= 2", "{t}[:] = {e}", "{t} /= {s}", "np.clip({t}, -1.0, 1.0, out={t})",
                 "{t}.sort()", "{t}[..., 0] = {s}", "{t}[1:] += {e}", "{t}.fill({s})"]
        if ints:
            forms += ["{t}[{i}] = {s}", "{t}[{i}] += {s}"]
        form = self.pick(forms)
        e = self.array_expr(worlds, self.n(0, 2)) if "{e}" in form else None
        s = self.scalar_operand(worlds) if "{s}" in form else None
        if ("{e}" in form and e is None) or ("{s}" in form and s is None):
            return None
        code = form.format(t=t, e=e.code if e else "", s=s.code if s else "",
                           i=self.pick(ints) if ints else "")
        new = self.execute(worlds, code)
        if new is None:
            return None
        self.features["inplace"] += 1
        return [code], new

    def st_escape(self, worlds, depth, ctx):
        a = self.array_expr(worlds, self.n(0, 2))
        if a is None:
            return None
        tmpl = self.pick(ESCAPES)
        e = self.evaluate(worlds, tmpl.format(a.code))
        if e is None or not all(kind_of(v) == "num" for v, w in zip(e.vals, worlds)
                                if self.usable(w)):
            return None
        name = self.fresh_name("s")
        code = f"{name} = {e.code}"
        new = self.execute(worlds, code)
        if new is None:
            return None
        self.features["escape"] += 1
        return [code], new

    def st_print(self, worlds, depth, ctx):
        tag = f"'p{self.stmts}'"
        arrs, nums, lists = (self.names(worlds, "arr"), self.names(worlds, "num"),
                             self.names(worlds, "list"))
        forms = []
        if arrs:
            a = self.pick(arrs)
            forms += [f"print({tag}, {a}.shape, {a}.dtype)", f"print({a})",
                      f"print({tag}, {a}.sum())", f"print({tag}, {a}.shape, sep='|', end=';\\n')"]
        if nums:
            s = self.pick(nums)
            forms += [f"print(f'{{{s}:.4f}}')", f"print({tag}, {s})"]
        if lists:
            forms += [f"print({tag}, len({self.pick(lists)}))"]
        if not forms:
            forms = [f"print({tag})"]
        code = self.pick(forms)
        new = self.execute(worlds, code)
        if new is None:
            return None
        self.features["print"] += 1
        return [code], new

    def st_list(self, worlds, depth, ctx):
        name = self.fresh_name("acc")
        if self.coin(50):
            code = f"{name} = []"
        else:
            a = self.leaf_array(worlds)
            if a is None:
                return None
            b = self.array_expr(worlds, 1)
            code = f"{name} = [{a.code}, {b.code if b else a.code}]"
        new = self.execute(worlds, code)
        if new is None:
            return None
        self.features["list"] += 1
        return [code], new

    def st_append(self, worlds, depth, ctx):
        lists = self.names(worlds, "list", lambda v: len(v) < 8 and all(isinstance(x, np.ndarray)
                                                                       for x in v))
        # only the program's own lists, and never the one a loop iterates
        lists = [n for n in lists if n.startswith("acc") and "iter:" + n not in ctx]
        if not lists:
            return self.st_list(worlds, depth, ctx)
        name = self.pick(lists)
        e = self.array_expr(worlds, self.n(0, 2))
        if e is None:
            return None
        code = self.pick([f"{name}.append({e.code})", f"{name}.extend([{e.code}, {e.code}])",
                          f"{name}.insert(0, {e.code})", f"{name}.append({e.code}); {name}.pop(0)"])
        new = self.execute(worlds, code)
        if new is None:
            return None
        self.features["append"] += 1
        return [code], new

    def st_closure(self, worlds, depth, ctx):
        """A nested function or lambda (MAKE_FUNCTION), some closing over a
        local, called right away."""
        a = self.leaf_array(worlds)
        if a is None:
            return None
        name, out = self.fresh_name("g"), self.fresh_name()
        free = self.leaf_array(worlds)
        lit = self.pick(LITERALS[:7])
        if self.coin(50):
            body = self.pick([f"u * {lit} + 1", f"np.abs(u) - {lit}",
                              f"u * {free.code}" if free is not None else "u + u"])
            lines = [f"def {name}(u, k={lit}):", f"    return {body} + k"]
        else:
            lines = [f"{name} = lambda u: u * {lit}"]
        lines.append(f"{out} = {name}({a.code})")
        new = self.execute(worlds, "\n".join(lines))
        if new is None:
            return None
        for w in new:
            w.env.pop(name, None)
        self.features["closure"] += 1
        return lines, new

    def st_python(self, worlds, depth, ctx):
        """General Python the translator models (issue 18): nested functions
        with defaults and nonlocal state, calls with *args / **kwargs,
        generator expressions fed to sum()/tuple()/any(), one kept and
        consumed after its source list changed (lazy, as eagerly), dict
        comprehensions, imports inside the function, try in a helper,
        contextlib.nullcontext, a generator function looped over."""
        a = self.leaf_array(worlds)
        if a is None:
            return None
        name, g = self.fresh_name(), self.fresh_name("g")
        lit = self.pick(LITERALS[:7])
        forms = [
            [f"def {g}(u, *rest, k={lit}, **kw):",
             f"    return u * k + sum(rest) + kw.get('bias', 0.0)",
             f"{name} = {g}(*({a.code}, {a.code}), **{{'k': 2.0, 'bias': {lit}}})"],
            [f"{name} = sum({a.code} * q for q in ({lit}, 2.0, -1.0))"],
            [f"{name} = tuple(np.abs(q) + {lit} for q in [{a.code}, {a.code} * 2])[1]"],
            [f"{g} = [{a.code}, {a.code} + 1]",
             f"{name}_lazy = (q * 2 for q in {g})",
             f"{g}.append({a.code} * 0)",
             f"{name} = sum({name}_lazy)",
             f"del {name}_lazy, {g}"],
            [f"{g} = {{i: {a.code} * i for i in range(3)}}",
             f"{name} = {g}[2] - {g}[1] if any(i > 1 for i in {g}) else {a.code}"],
            [f"import numpy.linalg as {g}",
             f"from numpy import abs as {g}_abs",
             f"{name} = {g}_abs({a.code}) + {g}.norm({a.code})",
             f"del {g}, {g}_abs"],
            [f"def {g}(u):",
             f"    count = 0",
             f"    def bump():",
             f"        nonlocal count",
             f"        count += 1",
             f"        return count",
             f"    return u * (bump() + bump())",
             f"{name} = {g}({a.code})"],
            [f"import contextlib as {g}",
             f"with {g}.nullcontext({a.code} * {lit}) as {name}_in:",
             f"    {name} = {name}_in + 1.0",
             f"with {g}.nullcontext():",
             f"    {name} = {name} * 2.0",
             f"del {g}, {name}_in"],
            [f"def {g}(u):",
             f"    yield u * 2.0",
             f"    yield u + {lit}",
             f"{name} = {a.code} * 0.0",
             f"for q in {g}({a.code}):",
             f"    {name} = {name} + q"],
            [f"def {g}(u):",
             f"    try:",
             f"        return u / {lit}",
             f"    except ZeroDivisionError:",
             f"        return u",
             f"    finally:",
             f"        pass",
             f"{name} = {g}({a.code})"],
        ]
        lines = self.pick(forms)
        new = self.execute(worlds, "\n".join(lines))
        if new is None:
            return None
        for w in new:
            for k in list(w.env):
                if k.startswith(g) or k in (name + "_lazy", name + "_in", "q"):
                    w.env.pop(k, None)
        self.features["python"] += 1
        return lines, new

    def st_rng(self, worlds, depth, ctx):
        """np.random with a fixed seed: bound methods, as eager steps."""
        a = self.leaf_array(worlds)
        if a is None:
            return None
        rng, out = self.fresh_name("rng"), self.fresh_name()
        draw = self.pick([f"{rng}.standard_normal({a.code}.shape)",
                          f"{rng}.uniform(-1, 1, size={a.code}.shape)",
                          f"{rng}.integers(0, 5, size={a.code}.shape)"])
        lines = [f"{rng} = np.random.default_rng({self.n(0, 9)})", f"{out} = {a.code} + {draw}"]
        new = self.execute(worlds, "\n".join(lines))
        if new is None:
            return None
        for w in new:
            w.env.pop(rng, None)
        self.owned.add(out)
        self.features["rng"] += 1
        return lines, new

    def st_object(self, worlds, depth, ctx):
        """Objects and side effects (issue 19): attributes and a property of
        a module-level object, writes to it and to its dict, getattr /
        setattr / hasattr, objects made here (one escaping into the visible
        object), draws from the global RandomState and np.random."""
        a = self.leaf_array(worlds)
        if a is None:
            return None
        name, b = self.fresh_name(), self.fresh_name("b")
        lit = self.pick(LITERALS[:7])
        forms = [
            ("count", ["STATE.count += 1", f"{name} = {a.code} * STATE.count"]),
            ("table", [f"STATE.table['t{self.stmts}'] = {a.code}.sum()",
                       f"{name} = {a.code} + STATE.table.get('t{self.stmts}', 0.0)"]),
            ("attrs", [f"{name} = {a.code} * STATE.scale + STATE.double"]),
            ("rebind", ["STATE.scale = STATE.scale * 0.5", f"{name} = {a.code} * STATE.scale"]),
            ("newobj", [f"{b} = Box({a.code}, {lit})", f"{name} = {b}.get() + {b}.v", f"del {b}"]),
            ("escape_obj", [f"STATE.box = Box({a.code} * 2.0)", f"{name} = STATE.box.get() - 1.0"]),
            ("reflect", [f"setattr(STATE, 'extra', {a.code}.mean())",
                         f"{name} = {a.code} * (2.0 if hasattr(STATE, 'extra') else 1.0)"
                         f" + getattr(STATE, 'missing', {lit})"]),
            ("draw", [f"{name} = {a.code} + " + self.pick([
                f"RS.standard_normal({a.code}.shape)", f"RS.uniform(-1, 1, size={a.code}.shape)",
                f"np.random.standard_normal({a.code}.shape)", f"RS.randint(0, 4, size={a.code}.shape)"])]),
        ]
        what, lines = self.pick(forms)
        new = self.execute(worlds, "\n".join(lines))
        if new is None:
            return None
        self.owned.add(name)
        self.features["object"] += 1
        self.features["object_" + what] += 1
        return lines, new

    def st_attr_call(self, worlds, depth, ctx):
        """obj.name(...) over every kind of attribute (issue 34): a function
        of the class, staticmethod and classmethod (on the instance and the
        class), a class attribute that is a class, a property returning a
        callable, a function and a callable object and a class in the
        instance dict, a function in a slot, a metaclass method, and
        x.__class__ / list and dict methods called on a value."""
        a = self.leaf_array(worlds)
        if a is None:
            return None
        name, lit = self.fresh_name(), self.pick(LITERALS[:7])
        forms = [
            ("method", f"KINDS.method({a.code})"),
            ("static", f"KINDS.static({a.code}) + Kinds.static({lit})"),
            ("classmethod", f"KINDS.klass({a.code}) + Kinds.klass({lit})"),
            ("class_attr", f"KINDS.Inner({a.code}, {lit}).get()"),
            ("property", f"KINDS.prop({a.code})"),
            ("dict_fn", f"KINDS.fn({a.code})"),
            ("callable_obj", f"KINDS.obj({a.code})"),
            ("dict_class", f"KINDS.cls({a.code}).get()"),
            ("slot_fn", f"SLOTTED.f({a.code})"),
            ("metaclass", f"{a.code} * Kinds.meta_k()"),
            ("array_class", f"{a.code} * (2.0 if {a.code}.__class__ is np.ndarray else 1.0)"),
            ("list_class", f"{a.code} + len([{a.code}, {lit}].__class__())"),
            ("dict_classmethod", f"{a.code} + len({{'k': {a.code}}}.fromkeys(['x', 'y']))"),
            ("call_instance", f"KINDS({a.code})"),
        ]
        what, expr = self.pick(forms)
        code = f"{name} = {expr}"
        new = self.execute(worlds, code)
        if new is None:
            return None
        self.owned.add(name)
        self.features["attr_call"] += 1
        self.features["attr_call_" + what] += 1
        return [code], new

    def st_swap(self, worlds, depth, ctx):
        names = [n for n in self.names(worlds, "arr") if n.startswith("v")]
        if len(names) < 2:
            return None
        a, b = self.pick(names), self.pick(names)
        if a == b:
            return None
        if "loop" in ctx and [sig_of(w.env[a]) for w in worlds if self.usable(w)] != \
                [sig_of(w.env[b]) for w in worlds if self.usable(w)]:
            return None
        code = f"{a}, {b} = {b}, {a}"
        new = self.execute(worlds, code)
        if new is None:
            return None
        if (a in self.owned) != (b in self.owned):
            self.owned ^= {a, b}
        self.features["swap"] += 1
        return [code], new

    def st_num_update(self, worlds, depth, ctx):
        nums = [n for n in self.names(worlds, "num") if n.startswith("s")]
        if not nums:
            return self.st_escape(worlds, depth, ctx)
        t = self.pick(nums)
        code = self.pick([f"{t} += 1", f"{t} *= 2.0", f"{t} = -{t} if {t} > 0 else {t} - 1",
                          f"{t} = max({t}, 0.5)", f"{t} = round({t}, 2)"])
        new = self.execute(worlds, code)
        if new is None:
            return None
        self.features["num_update"] += 1
        return [code], new

    def use_list(self, worlds):
        """An expression consuming a list: np.stack, sum, len ..."""
        lists = self.names(worlds, "list", lambda v: len(v) >= 1)
        if not lists:
            return None
        name = self.pick(lists)
        tmpl = self.pick(["np.stack({0})", "sum({0})", "np.concatenate({0})", "{0}[-1]",
                          "np.mean({0}, axis=0)", "len({0}) * {0}[0]"])
        return self.evaluate(worlds, tmpl.format(name), True)

    # ---- control flow -------------------------------------------------------------

    def merge_both(self, then_w, else_w):
        """After a branch on a value: keep the variables that have the same
        kind, shape and dtype on both sides (values from the then side)."""
        out = []
        for tw, ew in zip(then_w, else_w):
            env = {k: v for k, v in tw.env.items()
                   if k in ew.env and sig_of(v) == sig_of(ew.env[k])}
            out.append(World(tw.cfg, tw.kind, env))
        return out

    def condition(self, worlds, kind):
        if kind == "shape":
            a = self.leaf_array(worlds)
            if a is None:
                return None
            return self.evaluate(worlds, self.pick(SHAPE_CONDS).format(a.code))
        nums = self.names(worlds, "num")
        if nums and self.coin(30):
            return self.evaluate(worlds, self.pick(NUM_CONDS).format(self.pick(nums)))
        a = self.array_expr(worlds, self.n(0, 1))
        if a is None:
            return None
        tmpl = self.pick(VALUE_CONDS)
        if tmpl.count("{0}") > 1 and len(a.code) > 12:
            return None
        return self.evaluate(worlds, tmpl.format(a.code))

    def st_value_if(self, worlds, depth, ctx):
        cond = self.condition(worlds, "value")
        if cond is None:
            return None
        then_lines, then_w = self.block([w.clone() for w in worlds], depth + 1, 1, 3, ctx)
        if not then_lines:
            return None
        lines = [f"if {cond.code}:"] + ["    " + ln for ln in then_lines]
        if self.coin(60):
            else_lines, else_w = self.block([w.clone() for w in worlds], depth + 1, 1, 3, ctx)
            if else_lines:
                lines += ["else:"] + ["    " + ln for ln in else_lines]
            else:
                else_w = worlds
        else:
            else_w = worlds
        if len(then_w) != len(else_w) or any(a.cfg != b.cfg or a.kind != b.kind
                                             for a, b in zip(then_w, else_w)):
            return None
        self.features["value_if"] += 1
        return lines, self.merge_both(then_w, else_w)

    def st_shape_if(self, worlds, depth, ctx):
        cond = self.condition(worlds, "shape")
        if cond is None:
            return None
        takes = [bool(v) if self.usable(w) else None for v, w in zip(cond.vals, worlds)]
        sides = {}
        for side in (True, False):
            sub = [w.clone() for w, t in zip(worlds, takes) if t == side]
            pseudo = not any(w.kind == "f" for w in sub)
            if pseudo:   # no configuration runs this side: write it on copies
                sub = [w.clone() for w in worlds]
            lines, after = self.block(sub, depth + 1, 1 if side else 0, 3, ctx)
            sides[side] = (lines, None if pseudo else after)
        if not sides[True][0]:
            return None
        lines = [f"if {cond.code}:"] + ["    " + ln for ln in sides[True][0]]
        if sides[False][0]:
            lines += ["else:"] + ["    " + ln for ln in sides[False][0]]
        new = self.execute(worlds, "\n".join(lines), in_loop="loop" in ctx)
        if new is None:
            return None
        self.features["shape_if"] += 1
        return lines, new

    def st_for(self, worlds, depth, ctx):
        pre, pre_lines = worlds, []
        # an accumulator the body updates
        acc = None
        a = self.leaf_array(worlds)
        if a is not None and self.coin(60):
            acc = self.fresh_name()
            init = self.pick([f"np.zeros_like({a.code})", f"{a.code}.copy()", "0.0",
                              f"np.zeros({a.code}.shape)"])
            pre = self.execute(worlds, f"{acc} = {init}")
            if pre is None:
                return None
            pre_lines = [f"{acc} = {init}"]
            if init != "0.0":
                self.owned.add(acc)
        i, wv = self.fresh_name("i"), self.fresh_name("w")
        arrs = self.names(pre, "arr", lambda v: np.ndim(v) >= 1)
        lists = self.names(pre, "list", lambda v: len(v) >= 1)
        heads = [("range", f"for {i} in range({self.pick(['2', '3', '1'])}):")]
        if arrs:
            x = self.pick(arrs)
            heads += [("range", f"for {i} in range({x}.shape[0]):"),
                      ("range", f"for {i} in range(min({x}.shape[0], 3)):"),
                      ("iter", f"for {wv} in {x}:")]
        if lists:
            xs = self.pick(lists)
            heads += [("iter", f"for {wv} in {xs}:"), ("enum", f"for {i}, {wv} in enumerate({xs}):"),
                      ("range", f"for {i} in range(len({xs})):")]
        if len(arrs) >= 2:
            heads += [("iter", f"for {wv} in [{arrs[0]}, {arrs[-1]}]:")]
        what, head = self.pick(heads)
        iterated = re.findall(r"[A-Za-z_]\w*", head.split(" in ", 1)[1])
        inner_ctx = ctx | {"loop"} | {"iter:" + n for n in iterated}
        # the body is written against the first iteration's values
        it = head[len("for "):-1].split(" in ", 1)[1]
        body_w = []
        for w in pre:
            nw = w.clone()
            if self.usable(w):
                try:
                    first = next(iter(self.eval_in(nw, it)))
                except StopIteration:
                    first = None
                except Exception:
                    return None
                if what == "range":
                    nw.env[i] = first if first is not None else 0
                elif what == "iter":
                    nw.env[wv] = first
                else:
                    nw.env[i], nw.env[wv] = first if first is not None else (0, None)
            body_w.append(nw)
        lines = []
        if acc is not None:
            if acc in self.owned and self.coin(50):
                upd = self.array_expr(body_w, 1)
                if upd is not None:
                    lines.append(f"{acc} += {upd.code}")
            else:
                upd = self.array_expr(body_w, 2)
                if upd is not None:
                    lines.append(f"{acc} = {acc} + {upd.code}")
            if lines:
                res = self.execute(body_w, lines[0])
                if res is None:
                    lines = []
                else:
                    body_w = res
        more, _ = self.block(body_w, depth + 1, 0 if lines else 1, 3, inner_ctx)
        lines += more
        if not lines:
            return None
        code_lines = pre_lines + [head] + ["    " + ln for ln in lines]
        new = self.execute(worlds, "\n".join(code_lines))
        if new is None:
            return None
        # loop variables are not used after the loop
        for w in new:
            w.env.pop(i, None)
            w.env.pop(wv, None)
        self.features["for_" + what] += 1
        return code_lines, new

    def st_while(self, worlds, depth, ctx):
        k = self.fresh_name("k")
        t = self.leaf_array(worlds)
        if t is None:
            return None
        acc = self.fresh_name()
        body = [f"{acc} = {acc} * 0.5 + {k}", f"{k} += 1"]
        code = [f"{k} = 0", f"{acc} = {t.code}", f"while {k} < {self.n(1, 3)}:"] + \
            ["    " + ln for ln in body]
        new = self.execute(worlds, "\n".join(code))
        if new is None:
            return None
        self.features["while"] += 1
        return code, new

    def st_break_continue(self, worlds, depth, ctx):
        loopvars = [n for n in self.names(worlds, "num") if n.startswith("i")]
        forms = []
        if loopvars:
            forms += [f"if {self.pick(loopvars)} == 1:"]
        arrs = self.names(worlds, "arr")
        if arrs:
            forms += [f"if {self.pick(arrs)}.sum() < 0:"]
        if not forms:
            return None
        head = self.pick(forms)
        kw = self.pick(["break", "continue"])
        self.features["break_continue"] += 1
        return [head, "    " + kw], worlds

    def st_raise(self, worlds, depth, ctx):
        arrs = self.names(worlds, "arr", lambda v: np.ndim(v) >= 1)
        if not arrs:
            return None
        x = self.pick(arrs)
        forms = [
            (f"if {x}.shape[0] == 1:", f"raise ValueError(f'need more than one row, got {{{x}.shape}}')"),
            (f"if np.isnan({x}).any():", "raise FloatingPointError('nan in input')"),
            (f"if {x}.min() < -2.5:", f"raise ValueError(f'too small: {{float({x}.min()):.3f}}')"),
            (f"if not np.isfinite({x}).all():", "raise ArithmeticError('not finite')"),
            (f"assert {x}.max() < 2.8, 'max too large'", None),
        ]
        head, body = self.pick(forms)
        lines = [head] if body is None else [head, "    " + body]
        new = self.execute(worlds, "\n".join(lines), allow_partial=True)
        if new is None:
            return None
        self.features["raise"] += 1
        return lines, new

    def st_unmodelled(self, worlds, depth, ctx):
        """Constructs the translator does not model: skip or deopt."""
        a = self.leaf_array(worlds)
        if a is None:
            return None
        name = self.fresh_name()
        lists = self.names(worlds, "list", lambda v: len(v) >= 1 and all(
            isinstance(x, np.ndarray) for x in v))
        forms = [
            [f"try:", f"    {name} = np.linalg.inv({a.code})", "except np.linalg.LinAlgError as e:",
             f"    {name} = {a.code} * 0"],
            [f"try:", f"    {name} = {a.code}.reshape(2, -1)", "except ValueError:",
             f"    {name} = {a.code}.ravel()"],
            [f"with np.errstate(all='ignore'):", f"    {name} = {a.code} / ({a.code} - 1)"],
            [f"{name} = np.stack([r * 2 for r in {a.code}.reshape(-1, 1)])"],
            [f"{name} = sum(float(r) for r in {a.code}.ravel()) + {a.code}"],
        ]
        if lists:
            forms.append([f"{name} = np.stack([q + 1 for q in {self.pick(lists)}])"])
        lines = self.pick(forms)
        new = self.execute(worlds, "\n".join(lines))
        if new is None:
            return None
        self.features["unmodelled"] += 1
        return lines, new

    def st_helper_call(self, worlds, depth, ctx):
        arrs = self.names(worlds, "arr")
        if not arrs:
            return None
        nargs = self.n(1, 2)
        args = [self.pick(arrs) for _ in range(nargs)]
        params = ["a", "b"][:nargs]
        name = f"h{self.nhelpers}"
        self.nhelpers += 1
        has_scale, has_shift = self.coin(60), self.coin(40)
        sig = list(params)
        call_args = list(args)
        body_vals = {}
        if has_scale:
            default = self.pick(["2.0", "0.5", "1"])
            sig.append(f"scale={default}")
            how = self.pick(["default", "positional", "keyword"])
            val = default
            if how != "default":
                val = self.pick(["3.0", "-1.0", "0.25"])
                call_args.append(val if how == "positional" else f"scale={val}")
            body_vals["scale"] = eval(val)
        if has_shift:
            sig.append("*")
            default = self.pick(["0.0", "1.5"])
            sig.append(f"shift={default}")
            val = default
            if self.coin(50):
                val = self.pick(["-0.5", "2.0"])
                call_args.append(f"shift={val}")
            body_vals["shift"] = eval(val)
        if nargs == 2 and self.coin(30):   # pass the second array by keyword
            idx = call_args.index(args[1], 1) if args[1] in call_args[1:] else 1
            call_args[idx] = f"b={args[1]}"
            # keyword arguments must follow positional ones
            call_args = [c for c in call_args if "=" not in c] + [c for c in call_args if "=" in c]
        body_w = []
        for w in worlds:
            env = {p: w.env.get(a) for p, a in zip(params, args)}
            env.update(body_vals)
            body_w.append(World(w.cfg, w.kind, env))
        saved_owned = self.owned
        self.owned = set()
        try:
            lines, after = self.block(body_w, depth + 1, 0, 3, {"helper"})
            nret = self.weighted([(3, 1), (1, 2)])
            rets = []
            for _ in range(nret):
                e = self.array_expr(after, self.n(0, 2))
                if e is None:
                    return None
                rets.append(e.code)
        finally:
            self.owned = saved_owned
        src = [f"def {name}({', '.join(sig)}):"] + ["    " + ln for ln in lines]
        src.append(f"    return {', '.join(rets)}")
        src = "\n".join(src) + "\n"
        exec(compile(src, "<fuzzgen>", "exec"), self.ns)
        targets = [self.fresh_name() for _ in range(nret)]
        code = f"{', '.join(targets)} = {name}({', '.join(call_args)})"
        new = self.execute(worlds, code)
        if new is None:
            del self.ns[name]
            return None
        self.helpers.append(src)
        self.features["helper_call"] += 1
        if sig != params:
            self.features["helper_kwargs"] += 1
        return [code], new

    # ---- the return ---------------------------------------------------------------

    def st_return(self, worlds):
        live = [w for w in worlds if self.usable(w)]
        cands = [n for k in ("arr", "num", "list") for n in self.names(live, k)]
        cands.sort(key=lambda n: -int("".join(c for c in n if c.isdigit()) or -1))
        locals_ = [n for n in cands if n[0] in "vsa" and n[1:].isdigit()]
        pool = locals_ or cands
        form = self.weighted([(3, "one"), (3, "tuple"), (1, "list"), (1, "dict"), (1, "expr"),
                              (1, "stacked")])
        if form == "stacked":
            e = self.use_list(worlds)
            if e is not None:
                return f"return {e.code}"
            form = "tuple"
        if form == "expr" or not pool:
            e = self.array_expr(worlds, 2)
            return f"return {e.code}" if e is not None else "return None"
        k = min(len(pool), self.n(1, 3))
        picked = [pool[self.n(0, min(len(pool) - 1, 4))] for _ in range(k)]
        if form == "one":
            return f"return {picked[0]}"
        if form == "tuple":
            return f"return {', '.join(picked)}" + ("," if len(picked) == 1 else "")
        if form == "list":
            return f"return [{', '.join(picked)}]"
        return "return {" + ", ".join(f"'r{j}': {p}" for j, p in enumerate(picked)) + "}"


class Param:
    """A parameter of f: an array ("arr", shape template over N/M), a list of
    L arrays ("list"), or a Python number ("num")."""

    def __init__(self, name, kind, shape=None):
        self.name, self.kind, self.shape = name, kind, shape

    def __repr__(self):
        return f"Param({self.name!r}, {self.kind!r}, {self.shape!r})"


class Call:
    """One call: which configuration (shapes), dtype, the seed of the
    values, whether NaN/inf/-0.0 are sprinkled in, s and alpha."""

    def __init__(self, cfg, dtype, seed, special, scalar, alpha):
        self.cfg, self.dtype, self.seed = cfg, dtype, seed
        self.special, self.scalar, self.alpha = special, scalar, alpha

    def __repr__(self):
        return (f"Call(cfg={self.cfg}, dtype={self.dtype!r}, seed={self.seed}, "
                f"special={self.special}, scalar={self.scalar!r}, alpha={self.alpha!r})")


class Program:
    """A generated program.  Its repr is Python: paste it into
    ``tests/test_fuzz.py``'s namespace and call ``reproduce(Program(...))``
    (or run ``python tests/test_fuzz.py`` with it in a file)."""

    def __init__(self, source, params, configs, calls, has_alpha=False, features=None):
        self.source, self.params, self.configs = source, params, configs
        self.calls, self.has_alpha = calls, has_alpha
        self.features = features if features is not None else collections.Counter()

    def __repr__(self):
        lines = ["Program(source='''", self.source.rstrip(), "''',",
                 f"params={self.params!r}, has_alpha={self.has_alpha!r},",
                 f"configs={self.configs!r},", "calls=["]
        for c in self.calls:
            lines.append(f"    {c!r},")
        lines.append("])")
        return "\n".join(lines)


def shape_for(template, cfg):
    return tuple(cfg[d] if isinstance(d, str) else d for d in template)


def make_array(shape, dtype, rng, special):
    if np.dtype(dtype).kind == "i":
        return rng.integers(-4, 6, size=shape).astype(dtype)
    a = np.round(rng.standard_normal(shape) * 1.5, 3)
    if special and a.size:
        flat = a.reshape(-1)
        for _ in range(1 + a.size // 4):
            flat[rng.integers(0, a.size)] = rng.choice([np.nan, np.inf, -np.inf, -0.0, 0.0])
    return np.asarray(a).astype(dtype)


def dummy_array(shape, kind):
    # distinct, nonzero values: a dummy run should not divide by zero
    n = int(np.prod(shape)) if shape else 1
    a = (np.arange(n, dtype=np.float64).reshape(shape) % 3 + 1)
    return a.astype(np.int64 if kind == "i" else np.float64)


@st.composite
def programs(draw):
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _program(draw)


def _program(draw):
    reset_module_state(_HEADER_NS, 0)       # generation runs statements on them
    g = Gen(draw)
    # configurations: the shapes a call can use
    nconf = g.n(2, 3)
    configs = []
    for c in range(nconf):
        configs.append({"N": g.n(2 if c == 0 else 1, 6), "M": g.n(1, 5), "L": g.n(1, 3)})
    # parameters
    params = []
    narr = g.weighted([(2, 1), (3, 2), (1, 3)])
    for k in range(narr):
        params.append(Param("xyz"[k], "arr", g.weighted(
            [(4, ("N",)), (4, ("N", "M")), (1, ("M",)), (1, ("M", "N")), (1, ("N", 1)), (1, ())])))
    if g.coin(35):
        params.append(Param("xs", "list", g.pick([("N",), ("N", "M")])))
    if g.coin(30):
        params.append(Param("s", "num"))
    has_alpha = g.coin(25)
    worlds = []
    for ci, cfg in enumerate(configs):
        for kind in ("f", "i"):
            env = {}
            for p in params:
                if p.kind == "arr":
                    env[p.name] = dummy_array(shape_for(p.shape, cfg), kind)
                elif p.kind == "list":
                    env[p.name] = [dummy_array(shape_for(p.shape, cfg), kind) for _ in range(cfg["L"])]
                else:
                    env[p.name] = 1.5
            if has_alpha:
                env["alpha"] = 0.5
            worlds.append(World(ci, kind, env))
    body, worlds = g.block(worlds, 0, 2, 9, frozenset())
    ret = g.st_return(worlds)
    sig = ", ".join(p.name for p in params) + (", alpha=0.5" if has_alpha else "")
    src = [MODULE_HEADER]
    for h in g.helpers:
        src.append("\n" + h)
    src.append(f"\ndef f({sig}):")
    src += ["    " + ln for ln in body] + ["    " + ret, ""]
    source = "\n".join(src)
    # the calls
    dtypes = ["float64", "float32", "int64"] if g.int_ok else ["float64", "float32"]
    scalars = [0.5, -1.5, 2.0, 0.0, 3, -1]
    alphas = [None, 0.25, 2.0]

    def one_call(cfg=None, dtype=None):
        return Call(cfg if cfg is not None else g.n(0, nconf - 1),
                    dtype if dtype is not None else g.pick(dtypes),
                    g.n(0, 2 ** 16), g.coin(15), g.pick(scalars), g.pick(alphas))
    calls = [one_call(0, "float64"), one_call(0, "float64")]   # compile, then a hit
    calls += [one_call() for _ in range(g.n(2, 5))]
    if g.coin(50):
        calls.append(Call(0, "float64", calls[0].seed, calls[0].special, calls[0].scalar,
                          calls[0].alpha))                     # back to the first inputs
    features = g.features
    if not g.int_ok:
        features["float_only"] += 1
    return Program(source, params, configs, calls, has_alpha, features)


# ===========================================================================
# Running and comparing.
# ===========================================================================

def build_args(prog, call):
    cfg = prog.configs[call.cfg]
    rng = np.random.default_rng(call.seed)
    args = []
    for p in prog.params:
        if p.kind == "arr":
            args.append(make_array(shape_for(p.shape, cfg), call.dtype, rng, call.special))
        elif p.kind == "list":
            args.append([make_array(shape_for(p.shape, cfg), call.dtype, rng, call.special)
                         for _ in range(cfg["L"])])
        else:
            args.append(call.scalar)
    kwargs = {"alpha": call.alpha} if prog.has_alpha and call.alpha is not None else {}
    return args, kwargs


_ENGINE_WARNINGS = (dynscope.CacheLimitWarning,)


def run_once(fn, args, kwargs):
    out = io.StringIO()
    with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(out):
        warnings.simplefilter("always")
        try:
            result = ("ok", fn(*args, **kwargs))
        except Exception as exc:   # compared with the other run
            result = ("raised", exc)
    ws = [(w.category.__name__, str(w.message)) for w in caught
          if not issubclass(w.category, _ENGINE_WARNINGS)]
    return result, out.getvalue(), ws


def _arrays(tree, out):
    if isinstance(tree, (np.ndarray, list, dict)):
        out.append(tree)
    if isinstance(tree, (tuple, list)):
        for x in tree:
            _arrays(x, out)
    elif isinstance(tree, dict):
        for x in tree.values():
            _arrays(x, out)
    return out


def assert_same_aliasing(got_tree, want_tree):
    gs, ws = _arrays(got_tree, []), _arrays(want_tree, [])
    assert len(gs) == len(ws)
    for i in range(len(ws)):
        for j in range(i + 1, len(ws)):
            assert (gs[i] is gs[j]) == (ws[i] is ws[j]), f"identity of objects {i}, {j} differs"
            if isinstance(ws[i], np.ndarray) and isinstance(ws[j], np.ndarray):
                assert np.shares_memory(gs[i], gs[j]) == np.shares_memory(ws[i], ws[j]), \
                    f"memory sharing of arrays {i}, {j} differs"


# Warnings: the translator computes example values with every warning off
# (NumPy's floating-point ones and those its Python code issues), so each
# warning appears exactly as often, in the same order, as eagerly.

def assert_same_warnings(got, want, where):
    assert got == want, f"{where}: warnings differ: {got} != {want}"


_MODULE_COUNTER = [0]


def load_program(source, directory):
    """Write the source to a real file and import it as a fresh module."""
    digest = hashlib.sha1(source.encode()).hexdigest()[:12]
    _MODULE_COUNTER[0] += 1
    modname = f"dynscope_fuzz_{digest}_{_MODULE_COUNTER[0]}"
    path = os.path.join(directory, modname + ".py")
    with open(path, "w") as fh:
        fh.write(source)
    spec = importlib.util.spec_from_file_location(modname, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod, path


def reset_engine():
    dynscope.reset()


def reset_module_state(mod, seed):
    """STATE, RS and np.random's global state as before any call, in place
    (the program's guards see the same objects every call).  mod: a
    program's module, or the header's namespace (a dict)."""
    ns = mod if isinstance(mod, dict) else vars(mod)
    vars(ns["STATE"]).clear()
    ns["STATE"].__init__()
    ns["RS"].seed(seed % 2 ** 32)
    np.random.seed((seed + 1) % 2 ** 32)


def module_state(mod):
    """What a call left in the objects it can see, comparable by assert_same."""
    def plain(v):
        if isinstance(v, mod.Box):
            return ("Box", plain(vars(v)))
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        return copy.deepcopy(v)
    return plain(vars(mod.STATE)), mod.RS.get_state(), np.random.get_state()


def check_program(prog, directory, stats):
    reset_engine()
    mod, path = load_program(prog.source, directory)
    eager = mod.f
    captured = dynscope.optimize("eager")(mod.f)
    raised = 0
    try:
        for k, call in enumerate(prog.calls):
            args, kwargs = build_args(prog, call)
            w_args, w_kwargs = copy.deepcopy((args, kwargs))
            g_args, g_kwargs = copy.deepcopy((args, kwargs))
            reset_module_state(mod, call.seed)
            want, w_out, w_warn = run_once(eager, w_args, w_kwargs)
            w_state = module_state(mod)
            reset_module_state(mod, call.seed)
            got, g_out, g_warn = run_once(captured, g_args, g_kwargs)
            g_state = module_state(mod)
            where = f"call {k} {call!r} (program in {path})"
            assert_same(g_state, w_state, f"{where}: objects and generators after the call")
            if want[0] == "raised":
                raised += 1
                if got[0] != "raised":
                    raise AssertionError(f"{where}: eager raised {want[1]!r}, captured returned "
                                         f"{got[1]!r}")
                assert type(got[1]) is type(want[1]) and str(got[1]) == str(want[1]), (
                    f"{where}: eager raised {want[1]!r}, captured raised {got[1]!r}")
            else:
                if got[0] == "raised":
                    raise AssertionError(f"{where}: eager returned, captured raised "
                                         f"{got[1]!r}") from got[1]
                assert_same(got[1], want[1], f"{where}: result")
                assert_same_aliasing((g_args, g_kwargs, got[1]), (w_args, w_kwargs, want[1]))
            assert_same((g_args, g_kwargs), (w_args, w_kwargs), f"{where}: inputs after the call")
            assert g_out == w_out, f"{where}: printed output differs:\n{g_out!r}\n!=\n{w_out!r}"
            assert_same_warnings(g_warn, w_warn, where)
            assert _C.capture_depth() == 0 and not _C.hook_installed(), where
    finally:
        sys.modules.pop(mod.__name__, None)
    c = _C.counters()
    for key in ("compiles", "hits", "graph_breaks", "deopts", "skips", "cache_limits"):
        stats[key] += c[key]
        if c[key]:
            stats["programs_with_" + key] += 1
    stats["programs"] += 1
    stats["calls"] += len(prog.calls)
    stats["raised_calls"] += raised
    for f in prog.features:
        stats["feature_" + f] += 1
    if currently_in_test_context():        # not when called from reproduce()
        for key in ("graph_breaks", "deopts", "skips"):
            if c[key]:
                event(key)
    reset_engine()
    # passed: drop the file and what caches hold of it (the engine's event
    # log is bounded, but 20000 programs would fill it for nothing)
    _C.clear_events()
    linecache.cache.pop(path, None)
    os.unlink(path)


def reproduce(prog):
    """Run one program's calls eagerly and captured and compare them (what
    the fuzz test does for each example); raises on a difference."""
    import tempfile
    stats = collections.Counter()
    check_program(prog, tempfile.mkdtemp(prefix="dynscope_fuzz_"), stats)
    return stats


@pytest.fixture(scope="module")
def program_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("fuzz_programs"))


def test_generated_programs_behave_the_same_captured_and_eager(program_dir, request):
    stats = collections.Counter()

    @FUZZ_SETTINGS
    @given(prog=programs())
    def run(prog):
        note(prog.source)
        check_program(prog, program_dir, stats)

    if not RANDOM:
        run = seed(SEED)(run)
        USED.append(request.node.nodeid)
        again = reproducer(request.node.nodeid, DYNSCOPE_FUZZ_EXAMPLES=EXAMPLES)
        print(f"\nfuzz seed {SEED}: to run these examples again: {again}")
    try:
        for _ in range(CHUNKS):
            run()
    except BaseException as exc:
        if not RANDOM:
            exc.add_note(f"fuzz seed {SEED}; to run these {EXAMPLES} examples again:\n  {again}\n"
                         "or the one program above: from test_fuzz import *; "
                         "reproduce(Program(...)) with tests/ on sys.path")
        raise
    print("\nfuzz statistics:", dict(sorted(stats.items())))
    # The generator must keep exercising the engine, not only the interpreter.
    if stats["programs"] >= 200:
        n = stats["programs"]
        assert stats["programs_with_compiles"] > 0.5 * n, stats
        assert stats["programs_with_hits"] > 0.5 * n, stats
        assert stats["programs_with_graph_breaks"] > 0.2 * n, stats
        assert stats["programs_with_deopts"] > 0.02 * n, stats
        assert stats["raised_calls"] > 0.005 * stats["calls"], stats
        for f in ("value_if", "shape_if", "for_range", "for_iter", "helper_call",
                  "helper_kwargs", "escape", "print", "inplace", "append", "raise",
                  "unmodelled"):
            assert stats["feature_" + f] > 0, (f, stats)


def test_generator_covers_its_constructs():
    """Cheap: generate programs only, check every construct shows up and the
    source compiles."""
    seen = collections.Counter()
    constructs = ("assign", "copy", "inplace", "escape", "print", "list", "append", "value_if",
                  "shape_if", "for_range", "for_iter", "helper_call", "helper_kwargs", "raise",
                  "unmodelled", "while", "closure", "rng", "swap", "num_update", "python",
                  "object", "attr_call")

    # the object forms and the attribute-call kinds: drawn by Hypothesis,
    # whose sequence differs from one process to another (what else the
    # process imported); most, not all
    forms = ("count", "table", "attrs", "rebind", "newobj", "escape_obj", "reflect", "draw")
    kinds = ("method", "static", "classmethod", "class_attr", "property", "dict_fn", "callable_obj",
             "dict_class", "slot_fn", "metaclass", "array_class", "list_class", "dict_classmethod",
             "call_instance")

    def covered():
        return (all(seen[f] > 0 for f in constructs)
                and sum(seen["object_" + f] > 0 for f in forms) >= 6
                and sum(seen["attr_call_" + f] > 0 for f in kinds) >= 10)

    # The rarest constructs (weight 1, and a precondition: num_update needs a
    # Python number named s*) can miss 300 examples in some processes, where
    # Hypothesis's sequence differs; up to three batches of fixed seeds.
    for batch in range(3):
        @seed(20261129 + batch)
        @settings(max_examples=300, deadline=None, derandomize=False, database=None,
                  suppress_health_check=FUZZ_SETTINGS.suppress_health_check)
        @given(prog=programs())
        def run(prog):
            compile(prog.source, "<prog>", "exec")
            seen.update(prog.features)
            seen["programs"] += 1

        run()
        if covered():
            break
    for f in constructs:
        assert seen[f] > 0, (f, seen)
    assert sum(seen["object_" + f] > 0 for f in forms) >= 6, seen
    assert sum(seen["attr_call_" + f] > 0 for f in kinds) >= 10, seen


# ---------------------------------------------------------------------------
# Engine bugs the fuzzer found, as minimal regression tests.

def mean_of_tail(x):
    return x[1:].mean()


def test_python_level_numpy_warning_is_issued_once_under_capture():
    x = np.ones(1)
    with warnings.catch_warnings(record=True) as eager:
        warnings.simplefilter("always")
        want = mean_of_tail(x)
    with warnings.catch_warnings(record=True) as captured:
        warnings.simplefilter("always")
        got = dynscope.optimize("eager")(mean_of_tail)(x)
    assert np.isnan(got) and np.isnan(want)
    assert [str(w.message) for w in captured] == [str(w.message) for w in eager]


def negate_while_iterating(v):
    seen = []
    for w in v:            # the items of a 1-D array are read as the loop goes
        v += 1             # so each one sees the updates made before it
        seen.append(w)
    return seen


def test_inplace_update_of_an_array_being_iterated_is_seen_by_the_loop():
    want = negate_while_iterating(np.zeros(3))
    got = dynscope.optimize("eager")(negate_while_iterating)(np.zeros(3))
    assert [float(w) for w in want] == [0.0, 1.0, 2.0]
    assert [float(w) for w in got] == [float(w) for w in want]
