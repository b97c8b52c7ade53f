"""dynscope: a capture engine for CPython, built to be watched.

    import dynscope

    @dynscope.optimize("eager")          # or optimize(my_compiler)
    def f(a, b):
        return (a / (np.abs(a) + 1)) * b

    dynscope.cache_entries(f)            # entries, guards, hits
    dynscope.reset()                     # drop every cache entry

The engine is C (dynscope._C); this package re-exports its public names.
"""
from __future__ import annotations

import importlib.util
import os
import sys
import sysconfig

import weakref

from . import _C
from ._C import BackendCompilerFailed, CacheLimitError, CacheLimitWarning, RecompileError, Unsupported  # noqa: F401
from ._C import ExplainBackend, ExplainOutput, BreakReason, StackFrame  # noqa: F401
from .config import config
from .hatches import disable, allow_in_graph, substitute_in_graph, assume_constant_result
from .logs import set_logs
from .annotate import annotate, annotate_span
from .dump import dump
from . import profiler as _profiler

__all__ = [
    "optimize",
    "mark_dynamic",
    "mark_static",
    "cache_entries",
    "reset",
    "config",
    "Unsupported",
    "RecompileError",
    "BackendCompilerFailed",
    "CacheLimitWarning",
    "CacheLimitError",
    "set_stance",
    "register_backend",
    "list_backends",
    "explain",
    "ExplainBackend",
    "ExplainOutput",
    "record",
    "stop_recording",
    "disable",
    "allow_in_graph",
    "substitute_in_graph",
    "assume_constant_result",
    "set_logs",
    "annotate",
    "annotate_span",
    "dump",
]


def explain(fn, *, backend="eager"):
    """explain(fn)(*args, **kwargs) -> ExplainOutput

    Run `fn` once under a private capture -- the global caches and counters
    are neither read nor changed -- and report what was captured: graphs,
    graph breaks with their reasons and user source lines, ops per graph,
    guards, compile times, plans.  ``print(dynscope.explain(fn)(x))`` shows
    the report.  If `fn` raises, the exception propagates and carries the
    report so far as its ``explain_output`` attribute.
    """
    return _C.Explainer(fn, backend=backend)


# mark_dynamic / mark_static of NumPy arrays: id -> (weakref, dynamic dims,
# static dims); torch tensors carry TorchDynamo's own attributes instead.
_marks: dict = {}


def _dims(t, dim, what):
    dims = [dim] if isinstance(dim, int) else list(dim)
    ndim = getattr(t, "ndim", None)
    if ndim is None or not all(isinstance(d, int) for d in dims):
        raise TypeError(f"dynscope.{what}: needs an array or tensor and int dimensions")
    for d in dims:
        if not -ndim <= d < ndim:
            raise IndexError(f"dynscope.{what}: dimension {d} out of range for {ndim} dimensions")
    return {d % ndim for d in dims}


def _mark(t, dims, dynamic):
    if type(t).__module__.startswith("torch"):
        mine, other = (("_dynamo_dynamic_indices", "_dynamo_static_indices") if dynamic
                       else ("_dynamo_static_indices", "_dynamo_dynamic_indices"))
        setattr(t, mine, set(getattr(t, mine, set())) | dims)
        setattr(t, other, set(getattr(t, other, set())) - dims)
        return
    key = id(t)
    entry = _marks.get(key)
    if entry is None or entry[0]() is not t:
        entry = (weakref.ref(t, lambda _r, key=key: _marks.pop(key, None)), set(), set())
        _marks[key] = entry
    entry[1 if dynamic else 2].update(dims)
    entry[2 if dynamic else 1].difference_update(dims)


def mark_dynamic(t, dim):
    """Make dimension `dim` (an int or several) of array or tensor `t` dynamic
    from the first compile that reads `t` as an argument, as
    torch._dynamo.mark_dynamic does (and that function's marks are honoured
    on torch tensors too): its size is a graph value and any size from 2 on
    hits the same entry.  A size the code needs as a constant (a branch, a
    loop count) stays specialized."""
    _mark(t, _dims(t, dim, "mark_dynamic"), True)


def mark_static(t, dim):
    """Keep dimension `dim` of `t` specialized: automatic dynamic leaves it
    alone, as torch._dynamo.mark_static."""
    _mark(t, _dims(t, dim, "mark_static"), False)


def _marked_dims(t):
    """(dynamic, static) bit masks of t's marked dimensions (the engine's
    question, at translation)."""
    if type(t).__module__.startswith("torch"):
        dyn, sta = getattr(t, "_dynamo_dynamic_indices", ()), getattr(t, "_dynamo_static_indices", ())
    else:
        entry = _marks.get(id(t))
        dyn, sta = (entry[1], entry[2]) if entry is not None and entry[0]() is t else ((), ())
    return (sum(1 << d for d in dyn if 0 <= d < 32), sum(1 << d for d in sta if 0 <= d < 32))


def optimize(backend="eager", *, fullgraph=False, dynamic=None):
    """Capture tensor programs into graphs compiled by `backend`.

    `backend` is a callable ``backend(gm, example_inputs) -> callable`` or the
    name of a registered backend ("eager").  Use the result as a decorator
    (``optimize(b)(fn)`` or ``@optimize(b)``) or as a context manager
    (``with optimize(b): fn(x)``).  Functions called from a captured function
    are captured too.

    `dynamic`, as torch.compile's: None (the default) is automatic dynamic --
    an entry is specialized on the ints it reads first, and when a recompile
    is caused by an int argument's value changing, that argument becomes a
    graph input of the frame's next entries, which then serve every value;
    floats are graph inputs from the start.  A number the code needs as a
    constant (a branch on it, range(n)) stays specialized.  True: every int
    and float is a graph input from the start; False: always specialized
    (each new value recompiles).  The sizes of array and tensor arguments
    follow the same rule (a size from 2 on; 0 and 1 stay specialized), and
    mark_dynamic / mark_static set it per dimension.
    """
    if dynamic not in (None, True, False):
        raise TypeError(f"dynscope: dynamic must be None, True or False, not {dynamic!r}")
    if backend == "eager" and _dump_module.debug_graphs():   # DYNSCOPE_DEBUG_GRAPHS=1
        backend = _dump_module.debug_backend
    _profiler.install()            # captured calls as torch.profiler ranges (once torch is in)
    return _C.OptimizeContext(backend, fullgraph=fullgraph, dynamic=dynamic)


class _StanceContext:
    """What set_stance returns: a context manager that puts the previous
    stance back on exit (calling set_stance alone keeps the new one)."""

    def __init__(self, previous: str) -> None:
        self.previous = previous

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        _C.set_stance(self.previous)


def set_stance(stance: str = "default"):
    """What the engine does with frames, process-wide, as torch.compiler.set_stance:

    "default"             capture, recompile up to config.cache_size_limit
    "fail_on_recompile"   a frame that would be compiled again raises
                          dynscope.RecompileError naming the frame and the guard
                          that failed (first compiles and skipped frames do not)
    "eager_on_recompile"  such a frame runs eagerly instead (cached entries still hit)
    "force_eager"         nothing is captured; the caches are kept for later
    "eager_then_compile"  a frame's first call runs eagerly, the next compile
                          (one-off calls cost no compile)

    Use as a call (the stance stays) or a context manager (restored on exit):
    ``with dynscope.set_stance("fail_on_recompile"): step(batch)``.
    """
    previous = _C.get_stance()
    _C.set_stance(stance)
    return _StanceContext(previous)


def cache_entries(fn_or_code):
    """The cache entries of a function (or code object), in lookup order.

    Each entry has .compile_id ("0/1"), .resume_offset, .guards (items with
    .kind, .expr, .source), .hits, .graph and .plan.
    """
    return _C.cache_entries(fn_or_code)


def reset():
    """Drop every cache entry and skip mark; compile ids restart at 0.  The
    dead intermediate arrays graphs keep for reuse are released too."""
    _C.reset()


def register_backend(name, fn):
    """Register `fn(gm, example_inputs) -> callable` under `name`."""
    return _C.register_backend(name, fn)


def list_backends():
    """Names of the registered backends."""
    return _C.list_backends()


def _stdlib_dirs():
    """The standard library's own directories: where `os` and the compiled
    stdlib modules live.  Never the venv's lib/pythonX.Y, which only holds
    site-packages (sysconfig's platstdlib is that directory in a venv)."""
    dirs = {os.path.dirname(os.path.abspath(os.__file__))}
    base = {"base": sys.base_prefix, "platbase": sys.base_exec_prefix,
            "installed_base": sys.base_prefix, "installed_platbase": sys.base_exec_prefix}
    for key in ("stdlib", "platstdlib"):
        p = sysconfig.get_path(key, vars=base)
        if p:
            dirs.add(os.path.abspath(p))
    return dirs


def _site_packages_dirs():
    """Where installed packages live: site-packages and dist-packages of
    this interpreter and of its base installation, the user site, and any
    such directory on sys.path."""
    import site
    dirs = set()
    for key in ("purelib", "platlib"):
        p = sysconfig.get_path(key)
        if p:
            dirs.add(os.path.abspath(p))
    try:
        dirs.update(os.path.abspath(p) for p in site.getsitepackages())
    except AttributeError:       # some embedded interpreters lack it
        pass
    user = getattr(site, "USER_SITE", None)
    if user:
        dirs.add(os.path.abspath(user))
    dirs.update(os.path.abspath(p) for p in sys.path
                if os.path.basename(p.rstrip(os.sep)) in ("site-packages", "dist-packages"))
    return dirs


def _default_skip_prefixes():
    """Files never captured: the standard library, dynscope itself, frozen
    modules, and the tensor libraries' own Python code (as TorchDynamo skips
    its skipfiles).  Installed packages are captured (capture_prefixes)."""
    prefixes = {os.path.dirname(os.path.abspath(__file__)) + os.sep, "<frozen "}
    prefixes.update(d + os.sep for d in _stdlib_dirs())
    for mod in ("numpy", "torch"):
        m = sys.modules.get(mod)
        origin = getattr(m, "__file__", None) if m is not None else None
        if origin is None:
            # not imported yet: where it would be imported from (find_spec
            # reads the path only; nothing is imported)
            try:
                spec = importlib.util.find_spec(mod)
            except (ImportError, ValueError):
                spec = None
            origin = spec.origin if spec is not None else None
        if origin:
            prefixes.add(os.path.dirname(os.path.abspath(origin)) + os.sep)
    return tuple(sorted(prefixes))


def _default_capture_prefixes():
    """Installed packages are users' code, also where a Python installation
    keeps them inside its standard library's directory."""
    return tuple(sorted(d + os.sep for d in _site_packages_dirs()))


config.skip_prefixes = _default_skip_prefixes()
config.capture_prefixes = _default_capture_prefixes()


def _lttng_sessiond_running():
    """Whether an LTTng session daemon is there to register with: its UST
    socket, the system one (root's) or the user's ($LTTNG_HOME or ~/.lttng)."""
    home = os.environ.get("LTTNG_HOME") or os.path.expanduser("~")
    return any(os.path.exists(os.path.join(d, "lttng-ust-sock-8"))
               for d in ("/var/run/lttng", "/run/lttng", os.path.join(home, ".lttng")))


def _load_trace_provider():
    """LTTng tracepoints: load $DYNSCOPE_TRACE_PROVIDER when set, else the
    provider next to the extension when a session daemon is running.
    Without it every tracepoint is a no-op.  Loading starts lttng-ust's two
    listener threads, which a program that forks would see (3.12 warns at
    os.fork() in a multi-threaded process): with no daemon to trace for,
    the program is left as it is."""
    if os.environ.get("DYNSCOPE_TRACE_PROVIDER") is None and not _lttng_sessiond_running():
        return ("tracing off: no LTTng session daemon was running at import "
                "(start one, e.g. scripts/lttng-capture.sh, or set DYNSCOPE_TRACE_PROVIDER)")
    here = os.path.dirname(os.path.abspath(__file__))
    candidates = [os.path.join(here, "libdynscope-tp.so"),
                  os.path.join(os.path.dirname(here), "build", "libdynscope-tp.so")]
    path = next((p for p in candidates if os.path.exists(p)), None)
    return _C.trace_init(path)


_trace_status = _load_trace_provider()

from .recording import record, stop_recording, recording_path  # noqa: E402
from . import recording as _recording  # noqa: E402

_recording._start_from_environment()

from . import logs  # noqa: E402

logs._start_from_environment()
_dump_module = sys.modules[__name__ + ".dump"]
_dump_module._start_from_environment()
