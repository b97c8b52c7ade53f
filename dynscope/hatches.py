"""Escape hatches: what a user marks on a function when explain shows a
break they cannot fix in the code itself (torch.compiler's names, the same
meaning).

    @dynscope.disable                    # it, and what it calls, run uncaptured;
    def log_stats(x): ...                #   a call from captured code is a break
    dynscope.disable(fn, recursive=False)   # its own frame only: callees are captured
    dynscope.allow_in_graph(fn)          # a call is one opaque graph node
    @dynscope.substitute_in_graph(operator.indexOf)
    def index_of(a, b, /): ...           # traced wherever indexOf is called
    dynscope.assume_constant_result(fn)  # run once while tracing, a guarded constant

The marks live in the engine (engine/translate/tr_hatches.c), are kept by
reset(), and take effect at the next translation: mark before the first
call, or reset() after.  torch's own marks (torch.compiler.disable,
torch._dynamo.disable, torch._dynamo.assume_constant_result) are honoured
on any function that carries them.
"""
from __future__ import annotations

import functools
import inspect

from . import _C

__all__ = ["disable", "allow_in_graph", "substitute_in_graph", "assume_constant_result"]

# The replacements of substitute_in_graph, by key: the translator reaches
# one as sys.modules['dynscope.hatches']._substitutes[key] (a guarded
# source), so a new replacement for the same original recompiles.
_substitutes: dict = {}
_originals: dict = {}      # key -> the original it replaces


def _key_of(original) -> str:
    """The original's module.qualname, made unique among the originals."""
    base = f"{getattr(original, '__module__', None) or '?'}.{_name(original)}"
    key, n = base, 1
    while key in _originals and _originals[key] is not original:
        n += 1
        key = f"{base}#{n}"
    return key


def _name(fn) -> str:
    return getattr(fn, "__qualname__", None) or repr(fn)


def _plain_function(fn, what: str):
    """The Python function behind fn (a function or a bound method), or TypeError."""
    target = getattr(fn, "__func__", fn)
    if not inspect.isfunction(target):
        raise TypeError(f"dynscope.{what}: expected a Python function, not "
                        f"{type(fn).__name__} {fn!r}")
    return target


def disable(fn=None, *, recursive=True, reason=None):
    """Run fn without capture, as torch.compiler.disable.

    recursive=True (the default): fn and everything it calls run without
    capture (an optimize() region entered below it captures again); the
    result is a wrapper -- use it in fn's place (``@dynscope.disable``, or
    ``model.helper = dynscope.disable(model.helper)``).  recursive=False:
    fn's own frame is kept out and what it calls is captured; fn itself is
    marked and returned.  A call to a disabled function from captured code
    is a clean graph break that names the mark (break type DS0032); a frame
    kept out by recursive=False is a frame_skip with that rule.  `reason`
    is shown with the mark.
    """
    if fn is None:
        return functools.partial(disable, recursive=recursive, reason=reason)
    if reason is not None and not isinstance(reason, str):
        raise TypeError(f"dynscope.disable: reason must be a str, not {type(reason).__name__}")
    if not callable(fn) or isinstance(fn, type):
        raise TypeError(f"dynscope.disable: expected a function, not {fn!r}")
    suffix = f" ({reason})" if reason else ""
    if not recursive:
        target = _plain_function(fn, "disable(recursive=False)")
        _C.hatch_mark("disable_frame", target, f"dynscope.disable(recursive=False){suffix}")
        return fn

    @functools.wraps(fn)
    def disabled(*args, **kwargs):
        return fn(*args, **kwargs)

    disabled.__dynscope_disabled__ = fn
    _C.hatch_mark("disable", disabled, f"dynscope.disable{suffix}")
    return disabled


def allow_in_graph(fn):
    """Calls to fn become one opaque graph node, called with the graph's
    values, instead of being traced into (torch._dynamo.allow_in_graph).

    fn runs once while tracing, on the example values, and must return an
    array or tensor (or a tuple of them) from its array, tensor and constant
    arguments; the graph calls it each time it runs.  Use it for a pure
    function the translator cannot follow.  Returns fn.
    """
    if not callable(fn) or isinstance(fn, type):
        raise TypeError(f"dynscope.allow_in_graph: expected a function, not {fn!r}")
    _C.hatch_mark("allow_in_graph", fn, "dynscope.allow_in_graph")
    return fn


def _signature(fn):
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):
        return None        # a C function without a text signature: nothing to compare


def _same_parameters(a: inspect.Signature, b: inspect.Signature) -> bool:
    def shape(sig):
        return [(p.name if p.kind not in (p.POSITIONAL_ONLY, p.VAR_POSITIONAL, p.VAR_KEYWORD) else None,
                 p.kind, p.default is p.empty) for p in sig.parameters.values()]
    return shape(a) == shape(b)


def substitute_in_graph(original, *, skip_signature_check=False):
    """Trace a replacement wherever `original` is called
    (torch._dynamo.substitute_in_graph), for a C function or a function the
    translator cannot follow:

        @dynscope.substitute_in_graph(operator.indexOf)
        def index_of(a, b, /):
            for i, x in enumerate(a):
                if x is b or x == b:
                    return i
            raise ValueError("sequence.index(x): x not in sequence")

    The replacement must take the same parameters (names, kinds, which have
    defaults) as the original, or TypeError is raised here; a C function
    without a text signature is not compared.  The decorator returns the
    replacement.  It must give the original's results: the translator
    trusts it.
    """
    if not callable(original) or isinstance(original, type):
        raise TypeError(f"dynscope.substitute_in_graph: expected a function to replace, "
                        f"not {original!r}")

    def register(replacement):
        if not inspect.isfunction(replacement):
            raise TypeError(f"dynscope.substitute_in_graph({_name(original)}): the replacement "
                            f"must be a Python function, not {replacement!r}")
        if not skip_signature_check:
            want, got = _signature(original), _signature(replacement)
            if want is not None and got is not None and not _same_parameters(want, got):
                raise TypeError(f"dynscope.substitute_in_graph: {_name(replacement)}{got} does "
                                f"not match {_name(original)}{want}")
        key = _key_of(original)
        previous = _substitutes.get(key)
        _substitutes[key] = replacement
        _originals[key] = original
        try:
            _C.hatch_mark("substitute", original, f"dynscope.substitute_in_graph({_name(replacement)})",
                          key)
        except BaseException:          # nothing left half-registered
            if previous is None:
                del _substitutes[key], _originals[key]
            else:
                _substitutes[key] = previous
            raise
        return replacement

    return register


def _learn_torch_substitute(original, replacement):
    """torch.compiler.substitute_in_graph's registration of `original`, made
    dynscope's: the translator calls this the first time it meets a call of
    `original` (engine/translate/tr_hatches.c; torch checked the signature
    when it registered the replacement)."""
    key = _key_of(original)
    _substitutes[key] = replacement
    _originals[key] = original
    _C.hatch_mark("substitute", original,
                  f"torch.compiler.substitute_in_graph({_name(replacement)})", key)


def assume_constant_result(fn):
    """fn's result is a constant (torch._dynamo.assume_constant_result): a
    call from captured code runs once while tracing, on constant
    arguments, and the graph keeps its result, guarded like any constant
    the frame reads.  fn must be a Python function whose result is a plain
    constant (a number, str, bool, None, or a tuple of them).  Returns fn.
    """
    target = _plain_function(fn, "assume_constant_result")
    target._dynamo_marked_constant = True       # torch's attribute: both honour it
    return fn


def marks() -> list:
    """[(callable, rule)] of every mark made in this process (torch's disable
    marks once the translator met them)."""
    return _C.hatch_marks()
