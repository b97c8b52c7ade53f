"""Dumps you can read, import and step through (issue 41):
`dynscope.dump(DIR)` (or DYNSCOPE_DUMP=DIR) writes each compile as a Python
file, DIR/<function>_<frame>_<compile>.py:

- `forward(...)`: the graph, as the GraphModule's code (a breakpoint in it,
  or `python -m pdb`, stops with the real intermediate values when it is
  called);
- `check(L, G, S=())`: the entry's guards, one a line, each commented with
  the user source that made it; True when the frame's locals L, globals G
  (and, for a resume frame, stack values S) pass them, as the engine
  decides;
- `PLAN`: the plan (the graph call, the eager steps, the resume chain) as
  text, and `run(L, G)`, which calls `forward` on the plan's graph inputs.

Identity guards (a module, a function, a class) compare `id()`s: a dump's
`check` answers for objects of the process that wrote it, and says so.  A
guard that has no Python spelling raises NotImplementedError naming it
rather than answering wrong.  What the graph calls that no module name
reaches (an allow_in_graph function) is bound when the dump is imported in
that process (`TARGETS`), and a NameError says so elsewhere.
"""
from __future__ import annotations

import builtins
import keyword
import os
import re
import sys
import threading

__all__ = ["dump"]

# What a graph's code (GraphModule.code) names: the modules its targets
# live in, and the reprs of its constants -- torch.device(type='cpu') prints
# as device(type='cpu'), as in torch.fx's code, which binds the same names.
# Dumps, debug graphs and repro scripts start with it (dynscope/minify.py
# runs it to make a graph's globals).
GRAPH_PRELUDE = ("import builtins\nimport math\nimport operator\n\nimport numpy\ntry:\n"
                 "    import torch\nexcept ImportError:\n    torch = None\n"
                 "inf, nan, device = math.inf, math.nan, getattr(torch, 'device', None)\n")

_dir = None
_lock = threading.Lock()
_targets: dict = {}     # path -> {name: object} the graph calls, for imports in this process

_SOURCE = re.compile(r"^(?:L|G|S)(?:\[|$)")
_DTYPE = re.compile(r"(\.dtype ==) ([A-Za-z_][\w.]*)")
_UNKNOWN_DIMS = re.compile(r"(\S+\.shape) == (\([^()]*\?[^()]*\))")


def dump(directory=None) -> None:
    """Write each compile from now on into directory (made if missing);
    None stops."""
    global _dir
    from . import logs
    if directory is None:
        _dir = None
        logs.listen("dump", None)
        return
    directory = os.fspath(directory)
    os.makedirs(directory, exist_ok=True)
    _dir = directory
    logs.listen("dump", _on_event, detail=True)


def _on_event(ev: dict) -> None:
    if ev.get("event") != "compile_end" or ev.get("outcome") != "ok" or _dir is None:
        return
    entry, code = ev.get("entry"), ev.get("code")
    if entry is None or code is None:
        return
    try:
        write(_dir, code, entry, ev.get("graph_module"), ev.get("plan") or "")
    except OSError as exc:             # observing never takes the program down
        print(f"dynscope: DYNSCOPE_DUMP={_dir}: {exc}; dumps stop", file=sys.stderr)
        dump(None)


def file_name(code, compile_id: str) -> str:
    """<function>_<frame>_<compile>.py, the function's qualname made a name."""
    name = re.sub(r"\W+", "_", code.co_qualname).strip("_") or "code"
    return f"{name}_{compile_id.replace('/', '_')}.py"


def _guard_line(i: int, g) -> str:
    """A guard as one Python condition (or a call that refuses to answer)."""
    kind, expr, src, expected = g.kind, g.expr, g.source, g.expected
    where = f"  # {kind}: {expr}" + (f"  ({os.path.basename(g.filename)}:{g.lineno})"
                                      if g.filename else "")
    if kind == "BACKEND_MATCH":
        return f"    # the backend the frame runs with: {expr} (the engine's own)"
    if not _SOURCE.match(src or ""):
        return f"    _cannot({i}, {expr!r})" + where
    if kind == "ID_MATCH":
        cond = f"id({src}) == {id(expected)}"
    elif kind == "TYPE_MATCH":
        cond = f"id(type({src})) == {id(expected)}"
    elif kind == "CODE_MATCH":
        cond = f"id({src}.__code__) == {id(expected)}"
    elif kind == "EQUALS_MATCH" and _literal(expected):
        cond = f"type({src}) is {type(expected).__name__} and {src} == {expected!r}"
    elif kind == "TENSOR_MATCH":
        cond = _UNKNOWN_DIMS.sub(lambda m: f"_dims({m.group(1)}, {m.group(2).replace('?', 'None')})",
                                 _DTYPE.sub(lambda m: f"{m.group(1)} _dtype({m.group(2)!r})", expr))
    elif "<" in expr or "?" in expr:
        return f"    _cannot({i}, {expr!r})" + where
    else:
        cond = expr
    cond = cond.replace("G['__builtins__']", "_builtins(G)")   # a module or its dict, as CPython has it
    try:
        compile(cond, "<guard>", "eval")
    except SyntaxError:
        return f"    _cannot({i}, {expr!r})" + where
    return f"    if not ({cond}):\n        return False" + where


def _literal(v) -> bool:
    """Whether repr(v) reads back as v (a number, str, bytes, bool, None, or a tuple of them)."""
    if isinstance(v, tuple):
        return all(_literal(x) for x in v)
    return type(v) in (int, float, str, bytes, bool, type(None), complex) and \
        not (isinstance(v, float) and v != v)


def render(code, entry, gm, plan: str) -> tuple[str, dict]:
    """The dump's text, and the objects its graph calls that no module name reaches."""
    cid = entry.compile_id
    head = (f'"""dynscope dump of {code.co_qualname} [{cid}] ({code.co_filename}:'
            f'{code.co_firstlineno}), backend {entry.backend}.\n\n'
            f"forward(): the graph.  check(L, G, S=()): the guards, one a line.  PLAN and run():\n"
            f"the plan.  Identity guards compare id()s of the process that wrote this file.\n"
            f'Written by dynscope.dump (dynscope/dump.py); not to be edited.\n"""\n')
    lines = [head, *GRAPH_PRELUDE.splitlines(), "", "",
             "def _dtype(name):", "    if name.startswith('torch.'):",
             "        return getattr(torch, name[6:])", "    return numpy.dtype(name)", "", "",
             "def _dims(shape, pattern):",
             "    return len(shape) == len(pattern) and all(p is None or s == p for s, p in zip(shape, pattern))",
             "", "", "def _builtins(G):",
             "    b = G['__builtins__']", "    return b if isinstance(b, dict) else b.__dict__",
             "", "", "def _cannot(i, expr):",
             "    raise NotImplementedError(f'guard {i} has no Python spelling here: {expr}')", "", ""]
    targets = {}
    if gm is not None:
        src = _forward_source(gm)
        lines += [src.rstrip(), "", ""]
        for node in gm.graph.nodes:
            t = getattr(node, "target", None)
            if node.op == "call_function" and callable(t) and not _reachable(t, src):
                name = _name_in(src, t)
                if name:
                    targets[name] = t
    else:
        lines += ["def forward(*args):", "    raise NotImplementedError('this entry has no graph')",
                  "", ""]
    if targets:
        lines += ["# what the graph calls that no module name reaches: bound when this file is",
                  "# imported by the process that wrote it",
                  "TARGETS = __import__('dynscope.dump', fromlist=['x'])._targets.get("
                  "__import__('os').path.abspath(__file__), {})",
                  "globals().update(TARGETS)", "", ""]
    lines += ["def check(L, G, S=()):", '    """The guards of this entry, as the engine checks them."""']
    for i, g in enumerate(entry.guards):
        lines.append(_guard_line(i, g))
    lines += ["    return True", "", ""]
    lines.append(f"PLAN = {plan!r}")
    lines += ["", "", "def run(L, G, S=()):",
              '    """The plan\'s graph call (its other steps are in PLAN, as comments below)."""']
    for ln in plan.splitlines():
        lines.append(f"    # {ln}")
    m = re.search(r"graph_out = graph\((.*)\)", plan)
    lines.append(f"    return forward({m.group(1)})" if m else "    return None")
    return "\n".join(lines) + "\n", targets


def _forward_source(gm) -> str:
    """The GraphModule's code as a plain function: forward(inputs...)."""
    return gm.code.replace("def forward(self, ", "def forward(", 1).replace("def forward(self)",
                                                                         "def forward()", 1)


def _reachable(t, src: str) -> bool:
    mod = getattr(t, "__module__", None) or ""
    return mod.split(".")[0] in ("numpy", "operator", "math", "builtins", "torch", "_operator")


def _name_in(src: str, t):
    name = getattr(t, "__name__", None)
    if name and not keyword.iskeyword(name) and re.search(rf"\b{re.escape(name)}\(", src) and \
            not hasattr(builtins, name):
        return name
    return None


def write(directory: str, code, entry, gm, plan: str) -> str:
    """Write one compile's dump; returns its path."""
    text, targets = render(code, entry, gm, plan)
    path = os.path.join(directory, file_name(code, entry.compile_id))
    from . import outfile
    with _lock:
        _targets[os.path.abspath(path)] = targets
        outfile.write_text(path, text)
    return path


_graphs = 0            # graph_<n>.py files written by debug_backend
_debug_graphs = False


def debug_graphs() -> bool:
    """Whether DYNSCOPE_DEBUG_GRAPHS=1 asked for graphs to run from their files."""
    return _debug_graphs




def debug_backend(gm, example_inputs):
    """The eager backend, but the graph runs from a file of its own
    (DIR/graph_<n>.py, DIR as dynscope.dump's, else a private temporary
    one): a breakpoint() or a pdb stop in it shows the real values while the
    program runs (DYNSCOPE_DEBUG_GRAPHS=1 makes optimize("eager") use it)."""
    global _graphs
    del example_inputs
    directory = _dir or _private_dir()
    with _lock:
        n = _graphs
        _graphs += 1
    src = _forward_source(gm)
    text = (f'"""A graph dynscope runs from this file (DYNSCOPE_DEBUG_GRAPHS): stop in forward\n'
            f'to see its values."""\n' + GRAPH_PRELUDE + "\n" + src.rstrip() + "\n")
    path = os.path.join(directory, f"graph_{n}.py")
    from . import outfile
    outfile.write_text(path, text)
    ns = {"__name__": f"dynscope_graph_{n}", "__file__": path}
    for node in gm.graph.nodes:           # what no module name reaches: bound here
        t = getattr(node, "target", None)
        if node.op == "call_function" and callable(t) and not _reachable(t, src):
            name = _name_in(src, t)
            if name:
                ns[name] = t
    exec(compile(text, path, "exec"), ns)
    return ns["forward"]


_private = None


def _private_dir() -> str:
    global _private
    if _private is None:
        import tempfile
        _private = tempfile.mkdtemp(prefix="dynscope-graphs.")
        print(f"dynscope: DYNSCOPE_DEBUG_GRAPHS: graphs run from files in {_private}",
              file=sys.stderr)
    return _private


def _start_from_environment() -> None:
    global _debug_graphs
    d = os.environ.get("DYNSCOPE_DUMP")
    if d:
        try:
            dump(d)
        except OSError as exc:
            print(f"dynscope: DYNSCOPE_DUMP={d}: {exc}; no dumps", file=sys.stderr)
    _debug_graphs = os.environ.get("DYNSCOPE_DEBUG_GRAPHS", "") not in ("", "0")
