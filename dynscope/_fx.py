"""dynscope._fx: captured graphs as real torch.fx GraphModules.

When a captured graph computes on torch tensors and the backend is not the
built-in "eager" one, the engine (engine/plan/backend.c) hands the graph to
`compile_with`, which rebuilds it as a ``torch.fx.GraphModule`` -- the same
placeholders, ``call_function`` targets, ``call_method`` names and an output
returning a tuple -- and calls the backend with it.  So a TorchDynamo-style
backend works unchanged::

    def my_compiler(gm: torch.fx.GraphModule, example_inputs):
        gm.graph.print_tabular()
        return gm.forward

    @dynscope.optimize(my_compiler)
    def f(a, b): ...

and so do fx passes and backends made for ``torch.compile(backend=...)``
(``torch._dynamo`` backend names work too: ``optimize("aot_eager")``).
Design: ../shared/DESIGN.md 3.7; docs/vs-dynamo.md.

This module imports torch only when called, and the engine calls it only
when torch is already imported.
"""
from __future__ import annotations

__all__ = ["to_fx", "wants_fx", "compile_with", "fx_backend", "lookup_torch_backend"]


def _is_node(x):
    from . import _C
    return isinstance(x, _C.Node)


def wants_fx(gm, example_inputs):
    """Whether `gm` (a dynscope GraphModule) computes on torch tensors: a
    torch tensor among its example inputs or among its nodes' example
    values.  Such graphs go to backends as torch.fx GraphModules."""
    import torch
    if any(isinstance(x, torch.Tensor) for x in example_inputs):
        return True
    return any(isinstance(n.meta.get("example_value"), torch.Tensor)
               for n in gm.graph.nodes)


def to_fx(gm):
    """A ``torch.fx.GraphModule`` with the nodes of dynscope GraphModule
    `gm`: same names, opcodes, targets, args and kwargs (node references
    mapped, also inside tuples, lists, dicts and slices); each node's
    ``meta["example_value"]`` is the value it had while tracing, and a
    placeholder's ``meta["dynamic_dims"]`` the tuple of its dimensions whose
    size is dynamic (automatic dynamic, mark_dynamic).  The result
    returns the tuple of `gm`'s outputs, as `gm.forward` does."""
    import torch
    import torch.fx as fx

    if isinstance(gm, fx.GraphModule):
        return gm
    graph = fx.Graph()
    env = {}

    def arg(a):
        if _is_node(a):
            return env[a.name]
        if type(a) is tuple:
            return tuple(arg(x) for x in a)
        if isinstance(a, list):
            return [arg(x) for x in a]
        if isinstance(a, dict):
            return {k: arg(v) for k, v in a.items()}
        if isinstance(a, slice):
            return slice(arg(a.start), arg(a.stop), arg(a.step))
        return a

    for node in gm.graph.nodes:
        op = node.op
        if op == "output":
            graph.output(arg(node.args[0]))
            continue
        if op == "placeholder":
            new = graph.placeholder(node.name)
        else:
            new = graph.create_node(op, node.target, arg(tuple(node.args)),
                                    arg(dict(node.kwargs)), name=node.name)
        if new.name != node.name:
            raise RuntimeError(f"dynscope._fx: node {node.name!r} was renamed {new.name!r}")
        env[node.name] = new
        for key in ("example_value", "dynamic_dims"):
            if node.meta.get(key) is not None:
                new.meta[key] = node.meta[key]
    out = fx.GraphModule(torch.nn.Module(), graph)
    out.meta["dynscope_gm"] = gm
    return out


def compile_with(backend, gm, example_inputs):
    """What the engine calls instead of ``backend(gm, example_inputs)``:
    for a torch graph, the backend receives ``to_fx(gm)``; other graphs
    (NumPy) receive `gm` itself.  Returns what the backend returned; the
    engine checks that it is callable and calls it with the graph's inputs
    as positional arguments, as TorchDynamo calls compiled graphs (an
    AOTAutograd result's ``_boxed_call`` describes its inner function, not
    itself)."""
    if wants_fx(gm, example_inputs):
        gm = to_fx(gm)
    return backend(gm, example_inputs)


def fx_backend(gm, example_inputs):
    """The "fx" backend: run the graph as a torch.fx GraphModule (its
    generated Python ``forward``), whatever the tensors are."""
    return to_fx(gm).forward


def lookup_torch_backend(name):
    """A torch._dynamo backend by name ("aot_eager", "inductor", ...) for
    ``optimize(name)``, or None when torch._dynamo does not know it."""
    import torch._dynamo
    try:
        return torch._dynamo.lookup_backend(name)
    except Exception:
        return None

