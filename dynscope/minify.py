"""The backend-error half of a repro (issue 41): a graph the backend raised
on, run again standalone, and shrunk to the fewest nodes that still fail.

The recording keeps a failed graph's code with its inputs as comments
(docs/sql.md graphs.code):

    def forward(self, l_x_, l_y_):
        add = operator.add(l_x_, l_y_)
        ...
        return (sub,)
    # input l_x_: ndarray float64 (3,)

`Graph` reads that back.  A candidate graph is Python source of the kept
node lines; a value a kept line reads from a dropped one becomes an input,
computed by running the whole graph once.  The backend sees each candidate
as the engine builds it: `dynscope.optimize(probe)(forward)` captures the
straight-line source into one graph (a dynscope GraphModule, or a
torch.fx one for tensors), so what fails is judged on real graphs, not on
a model of them.  `minify` is delta debugging (Zeller's ddmin) over the
node lines: it keeps a subset only while the backend raises the same
exception type on it.
"""
from __future__ import annotations

import importlib
import importlib.util
import re
import sys

__all__ = ["Graph", "find_backend", "backend_error", "function", "describe", "minify", "input_expr",
           "namespace", "same_message"]

_INPUT = re.compile(r"^# input (?P<name>\w+): (?P<desc>.*)$")
_ASSIGN = re.compile(r"^    (?P<names>[\w, ]+?) = (?P<expr>.+)$")
_RETURN = re.compile(r"^    return (?P<expr>.+)$")
_NAME = re.compile(r"\b[A-Za-z_]\w*\b")
_SHAPE = re.compile(r"\(([\d, ]*)\)|\[([\d, ]*)\]")


class Graph:
    """A recorded graph: inputs [(name, description)], node lines [(names
    it defines, expression)], and the output expression."""

    def __init__(self, code: str):
        self.inputs: list[tuple[str, str]] = []
        self.nodes: list[tuple[tuple[str, ...], str]] = []
        self.output = "()"
        for line in code.splitlines():
            if m := _INPUT.match(line):
                self.inputs.append((m["name"], m["desc"]))
            elif m := _RETURN.match(line):
                self.output = m["expr"]
            elif (m := _ASSIGN.match(line)) and not line.startswith("    #"):
                self.nodes.append((tuple(n.strip() for n in m["names"].split(",") if n.strip()),
                                   m["expr"]))
        if not self.inputs and "def forward(self" in code:
            sig = code.split("def forward(self", 1)[1].split(")", 1)[0]
            self.inputs = [(n.strip(), "?") for n in sig.split(",") if n.strip()]
        # the names that are values (inputs, node results), not modules or keywords
        self._values = {n for n, _ in self.inputs} | {n for names, _ in self.nodes for n in names}

    def modules(self) -> list[str]:
        """The top-level names the node lines reach modules through (numpy, torch, operator...)."""
        seen = []
        for _names, expr in self.nodes:
            for m in re.finditer(r"(?<![\w.])([A-Za-z_]\w*)\.", expr):
                if m.group(1) not in seen and not self._is_value(m.group(1)):
                    seen.append(m.group(1))
        return seen

    def source(self, keep=None) -> tuple[str, list[str]]:
        """forward's source with only the node lines in keep (indices; all
        when None), and its parameters: the inputs those lines read,
        recorded inputs and dropped nodes' values alike."""
        every = list(range(len(self.nodes)))
        keep = every if keep is None else sorted(keep)
        defined, params, lines, last = set(), [], [], []
        for i in keep:
            names, expr = self.nodes[i]
            for ref in _NAME.findall(_strip_attrs(expr)):
                if ref not in defined and ref not in params and self._is_value(ref):
                    params.append(ref)
            lines.append(f"    {', '.join(names)} = {expr}")
            defined.update(names)
            last = names
        if keep == every or not keep:
            out = self.output
        else:                           # what no kept line reads: the candidate's outputs
            read = set()
            for i in keep:
                read.update(_NAME.findall(_strip_attrs(self.nodes[i][1])))
            outs = [n for i in keep for n in self.nodes[i][0] if n not in read] or list(last)
            out = "(" + ", ".join(outs) + ",)"
        src = "def forward(" + ", ".join(params) + "):\n" + "\n".join(lines) + \
            f"\n    return {out}\n"
        return src, params

    def _is_value(self, name: str) -> bool:
        return name in self._values


def namespace(modules=()) -> dict:
    """The globals a graph's forward() runs with: dump.GRAPH_PRELUDE's
    (builtins, math, operator, numpy, torch when installed, device, inf,
    nan) and the modules named, imported when they can be."""
    from .dump import GRAPH_PRELUDE
    ns: dict = {}
    exec(GRAPH_PRELUDE, ns)
    for mod in modules:
        if mod not in ns:
            try:
                ns[mod] = importlib.import_module(mod)
            except ImportError:
                pass
    return ns


def _strip_attrs(expr: str) -> str:
    """expr without attribute names and string literals (`sin.sum(1)` reads sin, not sum)."""
    expr = re.sub(r"'[^']*'|\"[^\"]*\"", "''", expr)
    return re.sub(r"\.\s*[A-Za-z_]\w*", "", expr)


def input_expr(desc: str) -> str:
    """A Python expression that rebuilds a recorded input (values from a
    fixed seed: they were not recorded), e.g. for 'ndarray float64 (3, 2)'."""
    parts = desc.split(" ", 2)
    m = _SHAPE.search(parts[2]) if len(parts) == 3 else None
    if m and (parts[1].startswith("torch.") or parts[0] == "ndarray"):    # a Parameter too
        dtype = parts[1]
        shape = tuple(int(s) for s in (m.group(1) or m.group(2) or "").replace(" ", "").split(",") if s)
        if dtype.startswith("torch."):
            if dtype == "torch.bool":
                return f"(torch.rand({shape}, generator=_gen) < 0.5)"
            if "int" in dtype:
                return f"torch.randint(0, 8, {shape}, generator=_gen, dtype={dtype})"
            return f"torch.randn({shape}, generator=_gen).to({dtype})"
        if dtype == "bool":
            return f"(_rng.random({shape}) < 0.5)"
        if "int" in dtype:
            return f"_rng.integers(0, 8, {shape}).astype(numpy.{dtype})"
        return f"_rng.standard_normal({shape}).astype(numpy.{dtype})"
    if " " in desc and desc.split(" ", 1)[0] in ("int", "float", "bool", "complex"):
        return desc.split(" ", 1)[1]
    raise ValueError(f"no recorded description to rebuild this input from: {desc!r}")


def _load_file(path: str):
    """The module a file makes, its directory first on sys.path while it
    loads (a program's script imports its neighbours); its `if __name__ ==
    "__main__"` block does not run."""
    import os
    spec = importlib.util.spec_from_file_location("dynscope_repro_target", path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.pop(0)
    return module


def find_backend(name: str, near=(), spec: str | None = None):
    """The backend a recording names: spec ('module:attr' or 'path.py:attr')
    when given, else a registered name (dynscope's, torch._dynamo's), else
    `name` in one of the files `near` (a path or paths: the compiled
    function's file, the program's own script), the first that defines it.
    LookupError says where it looked."""
    import dynscope
    if spec:
        where, _, attr = spec.rpartition(":")
        if not where:
            raise LookupError(f"--backend {spec}: say MODULE:NAME or FILE.py:NAME")
        obj = _load_file(where) if where.endswith(".py") else importlib.import_module(where)
        for part in attr.split("."):
            obj = getattr(obj, part)
        return obj
    try:
        return dynscope.optimize(name).backend
    except (ValueError, TypeError):
        pass
    files = [near] if isinstance(near, str) else [f for f in near if f]
    for path in files:
        try:
            obj = _load_file(path)
            for part in name.split("."):
                obj = getattr(obj, part)
            return obj
        except (OSError, AttributeError, ImportError, SyntaxError):
            continue
    raise LookupError(f"backend {name!r} is neither registered nor defined in "
                      f"{' or '.join(files) or 'a file the recording names'}: register it"
                      f" (dynscope.register_backend) or say where it is (--backend MODULE:NAME)")


def backend_error(backend, fn, args: list):
    """What backend does wrong on the graph dynscope captures from fn
    called with args: the exception it raises, a TypeError when it returns
    no callable, or None when it compiles."""
    import dynscope
    caught = []

    def probe(gm, example_inputs):
        try:
            compiled = backend(gm, example_inputs)
        except Exception as exc:
            caught.append(exc)
            raise
        if not callable(compiled):
            caught.append(TypeError(f"returned {_what(compiled)}, expected a callable"))
        return compiled
    dynscope.optimize(probe)(fn)(*args)
    return caught[0] if caught else None


def same_message(a: str, b: str) -> bool:
    """Whether two exception messages say the same, object addresses
    (0x7f...) aside: they differ from one process to the next."""
    def norm(m):
        return re.sub(r"0x[0-9a-fA-F]+", "0x?", m)
    return norm(a) == norm(b)


def _what(obj) -> str:
    return "None" if obj is None else f"an object of type '{type(obj).__name__}'"


def function(src: str, namespace: dict):
    """The function forward that src defines, its globals namespace."""
    ns = dict(namespace)
    exec(compile(src, "<dynscope minify>", "exec"), ns)
    return ns["forward"]


def describe(value) -> str:
    """An input's description, as the recording writes it (input_expr reads it back)."""
    shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
    if shape is not None and dtype is not None:
        return f"{type(value).__name__} {dtype} {tuple(shape)}"
    return f"{type(value).__name__} {value!r}"


def _values(graph: Graph, inputs: dict, namespace: dict) -> dict:
    """Every node's value on inputs (the whole graph run once as Python)."""
    env = dict(namespace)
    env.update(inputs)
    for names, expr in graph.nodes:
        v = eval(expr, env)
        if len(names) == 1:
            env[names[0]] = v
        else:
            for n, x in zip(names, v):
                env[n] = x
    return env


def minify(graph: Graph, inputs: dict, backend, namespace: dict, same) -> tuple[list[int], dict]:
    """The fewest node lines (indices) on which backend still fails as
    same(exc) says, and every value (inputs and nodes) they may read."""
    values = _values(graph, inputs, namespace)
    tried: dict = {}

    def fails(keep) -> bool:
        key = tuple(sorted(keep))
        if key not in tried:
            src, params = graph.source(key)
            try:
                exc = backend_error(backend, function(src, namespace), [values[p] for p in params])
            except Exception:           # the candidate itself does not run: not the failure
                exc = None
            tried[key] = exc is not None and same(exc)
        return tried[key]

    keep = list(range(len(graph.nodes)))
    n = 2
    while len(keep) >= 2:
        chunks = [keep[i * len(keep) // n:(i + 1) * len(keep) // n] for i in range(n)]
        for c in chunks:                # a chunk alone
            if c and fails(c):
                keep, n = c, 2
                break
        else:
            for c in chunks:            # everything but a chunk
                rest = [i for i in keep if i not in c]
                if rest and fails(rest):
                    keep, n = rest, max(n - 1, 2)
                    break
            else:
                if n >= len(keep):
                    break
                n = min(len(keep), 2 * n)
    return keep, values
