"""DYNSCOPE_LOGS: readable lines per engine event, as it happens, with the
names a TORCH_LOGS user types.

    DYNSCOPE_LOGS=recompiles,graph_breaks python train.py
    DYNSCOPE_LOGS=+recompiles,dynamic ...     # + is verbose; "all" is every name
    DYNSCOPE_LOGS_FILE=run.log ...            # the same lines to a file
    dynscope.set_logs("recompiles,+guards", file="run.log")   # from Python; "" stops

Names (one formatter each, below):
    graph_breaks        each break: frame, compile id, reason, type; + the user stack
    recompiles          each recompile: the newest entry's failing guard; + every entry's
    recompiles_verbose  recompiles with every failing guard (as +recompiles)
    guards              each compiled entry's guard count; + the guards
    graph               each graph as a table (opcode, name, target, args, kwargs)
    graph_code          each graph as Python
    bytecode            a frame's bytecode (dis) the first time it compiles, and the
                        plan that replaces it; + at every compile
    dynamic             each size or number a recompile made dynamic, or found it
                        had to keep static, and why
    skips               each frame kept out of capture, and by which rule
    cache_limit         each frame that reached a cache limit
    perf_hints          a frame that recompiles on every call (PERF_HINT_RECOMPILES
                        recompiles in a row with no cache hit between)

Lines start with `dynscope [NAME]` and carry the compile id as `[0/1]`, as
explain, dyntop and the report write it.  The engine calls the sink from
inside the engine (never captured); a sink that fails is reported once and
removed.  With graph, graph_code or bytecode the compile_end dicts this
sink gets carry the graph, plan and code object (a copy: the in-memory
event log keeps none of them).
"""
from __future__ import annotations

import dis
import io
import os
import sys

from . import _C

__all__ = ["enable", "set_logs", "NAMES"]

NAMES = ("graph_breaks", "recompiles", "recompiles_verbose", "guards", "graph", "graph_code",
         "bytecode", "dynamic", "skips", "cache_limit", "perf_hints")

# What DYNSCOPE_LOGS takes: the names, and "all" for every one.
WORDS = NAMES + ("all",)

# perf_hints: recompiles in a row, no hit between, that earn a hint (then every
# that many more).
PERF_HINT_RECOMPILES = 3


def parse(spec: str) -> dict:
    """{name: verbose} from "recompiles,+guards" ("all": every name);
    ValueError naming the bad word and every valid name."""
    chosen = {}
    for word in (w.strip() for w in spec.split(",")):
        if not word:
            continue
        verbose = word.startswith("+")
        name = word.lstrip("+")
        if name == "all":            # every name (recompiles_verbose only as +all)
            for n in NAMES:
                if n != "recompiles_verbose" or verbose:
                    chosen[n] = chosen.get(n, False) or verbose
            continue
        if name not in NAMES:
            raise ValueError(f"unknown log {name!r}; one of {', '.join(NAMES)}, all "
                             "(+name for verbose)")
        chosen[name] = chosen.get(name, False) or verbose
    if chosen.pop("recompiles_verbose", None) is not None:
        chosen["recompiles"] = True
    return chosen


def _where(ev: dict) -> str:
    return f"{ev.get('name')} ({ev.get('filename')}:{ev.get('firstlineno')})"


def _cid(ev: dict) -> str:
    return f"[{ev.get('compile_id')}]"


# ---- one formatter per name: (event dict, verbose, state) -> lines ----

def _graph_breaks(ev, verbose, state):
    if ev["event"] != "graph_break":
        return []
    stack = ev.get("user_stack") or []
    lines = [f"dynscope [graph_breaks] Graph break in {_where(ev)} {_cid(ev)}: "
             f"{ev.get('reason')}  [{ev.get('kind')}]"]
    for frame in (stack if verbose else stack[-1:]):
        filename, lineno, func, source = (tuple(frame) + ("", "", "", ""))[:4]
        lines.append(f"    {filename}:{lineno} in {func}")
        if source:
            lines.append(f"        {source}")
    return lines


def _failure_lines(failures) -> list:
    """A line per older entry's failing guard (GuardFailureInfo items)."""
    return [f"    entry [{entry}] failed {expr} (observed {observed})  [{kind}]"
            for entry, kind, expr, observed in (tuple(f)[:4] for f in failures)]


def _recompiles(ev, verbose, state):
    if ev["event"] != "recompile":
        return []
    failures = ev.get("failures") or []
    lines = [f"dynscope [recompiles] Recompiling {_where(ev)} {_cid(ev)}"]
    shown = failures if verbose else failures[:1]
    lines += _failure_lines(shown)
    if len(failures) > len(shown):
        lines.append(f"    ... {len(failures) - len(shown)} more entries (+recompiles shows all)")
    return lines


def _guards(ev, verbose, state):
    if ev["event"] != "compile_end" or ev.get("outcome") != "ok":
        return []
    lines = [f"dynscope [guards] {_where(ev)} {_cid(ev)}: {ev.get('guards')} guards"]
    if verbose:
        lines += [f"    {expr}" for expr in ev.get("guard_exprs") or []]
    return lines


def _table(rows: list) -> list:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]


def _graph(ev, verbose, state):
    gm = ev.get("graph_module") if ev["event"] == "compile_end" else None
    if gm is None:
        return []
    rows = [("opcode", "name", "target", "args", "kwargs")]
    for n in gm.graph.nodes:
        target = n.target if isinstance(n.target, str) else (
            f"{getattr(n.target, '__module__', None) or ''}.{getattr(n.target, '__name__', n.target)}"
            .lstrip("."))
        rows.append((n.op, n.name, str(target), str(n.args), str(n.kwargs)))
    nodes = ev.get("nodes")
    return [f"dynscope [graph] {_where(ev)} {_cid(ev)}: {nodes} op{'' if nodes == 1 else 's'}"] + \
        [f"    {line}" for line in _table(rows)]


def _graph_code(ev, verbose, state):
    gm = ev.get("graph_module") if ev["event"] == "compile_end" else None
    if gm is None:
        return []
    return [f"dynscope [graph_code] {_where(ev)} {_cid(ev)}:"] + \
        [f"    {line}" for line in str(gm.code).strip("\n").splitlines()]


def _bytecode(ev, verbose, state):
    if ev["event"] != "compile_end" or ev.get("code") is None:
        return []
    code = ev["code"]
    lines = []
    if verbose or code not in state.setdefault("bytecode_shown", set()):
        state["bytecode_shown"].add(code)
        out = io.StringIO()
        dis.dis(code, file=out, depth=0)
        lines += [f"dynscope [bytecode] {_where(ev)}: original bytecode"]
        lines += [f"    {line}" for line in out.getvalue().rstrip("\n").splitlines()]
    plan = ev.get("plan")
    if plan and ev.get("outcome") == "ok":
        lines += [f"dynscope [bytecode] {_where(ev)} {_cid(ev)}: replaced by the plan"]
        lines += [f"    {line}" for line in plan.rstrip("\n").splitlines()]
    return lines


def _dynamic(ev, verbose, state):
    reason = ev.get("reason") if ev["event"] == "recompile" else None
    if not reason:
        return []
    lines = []
    for part in reason.split("; ")[1:]:
        if " is now dynamic" in part or " stays static" in part:
            lines.append(f"dynscope [dynamic] {_where(ev)} {_cid(ev)}: {part}")
            if verbose:
                lines.append(f"    because: {reason.split('; ')[0]}")
    return lines


def _skips(ev, verbose, state):
    if ev["event"] != "frame_skip":
        return []
    return [f"dynscope [skips] Skipping frame {_where(ev)}: {ev.get('reason')}  "
            f"[{ev.get('break_type')}]"]


def _cache_limit(ev, verbose, state):
    if ev["event"] != "cache_limit":
        return []
    lines = [f"dynscope [cache_limit] {_where(ev)} frame {ev.get('frame_id')} reached its cache "
             f"limit ({ev.get('last_failure')}); it now runs without capture"]
    if verbose:
        lines += _failure_lines(ev.get("failures") or [])
    return lines


def _perf_hints(ev, verbose, state):
    """A frame that recompiled on PERF_HINT_RECOMPILES calls in a row (no
    cache hit between: its recompile dicts' "frame_hits" stayed put), then
    every that many more."""
    if ev["event"] == "reset":
        state.pop("miss_streaks", None)
        return []
    if ev["event"] != "recompile":
        return []
    key = (ev.get("code_id"), str(ev.get("compile_id")).split("/")[0])
    streaks = state.setdefault("miss_streaks", {})
    hits = ev.get("frame_hits", 0)
    streak, seen_hits = streaks.get(key, (0, 0))
    streak = streak + 1 if hits == seen_hits else 1
    streaks[key] = (streak, hits)
    if streak % PERF_HINT_RECOMPILES:
        return []
    failing = (ev.get("reason") or "").split("; ")[0]
    return [f"dynscope [perf_hints] {_where(ev)} frame {key[1]} recompiled on each of its last "
            f"{streak} calls, with no cache hit between (now {_cid(ev)}; last failing guard: "
            f"{failing}): its inputs change on every call -- mark the changing size or number "
            "dynamic (dynscope.mark_dynamic) or static, or see `python -m dynscope report`"]


FORMATTERS = {
    "graph_breaks": _graph_breaks, "recompiles": _recompiles, "guards": _guards,
    "graph": _graph, "graph_code": _graph_code, "bytecode": _bytecode, "dynamic": _dynamic,
    "skips": _skips, "cache_limit": _cache_limit, "perf_hints": _perf_hints,
}


def format_event(ev: dict, chosen: dict, state: dict) -> list:
    """The lines of every chosen name for one event dict."""
    lines = []
    for name in NAMES:
        if name in chosen and name in FORMATTERS:
            lines += FORMATTERS[name](ev, chosen[name], state)
    return lines


_file = None           # the open DYNSCOPE_LOGS_FILE, or None (stderr)


def _open(path):
    """The file to append the lines to, or None (stderr) with the reason
    told once on stderr: logging never takes the program down."""
    try:
        return open(path, "a", buffering=1, encoding="utf-8")
    except OSError as exc:
        print(f"dynscope: DYNSCOPE_LOGS_FILE={path!r}: {exc.strerror or exc}; logging to stderr",
              file=sys.stderr, flush=True)
        return None


# Who listens to the event dicts (the engine has one Python sink): name ->
# (callable, with_guards, with_detail).  "logs" is set_logs', "dump" is
# dynscope.dump's (dynscope/dump.py).
_listeners: dict = {}


def listen(name: str, fn=None, *, guards: bool = False, detail: bool = False) -> None:
    """Hand every event dict to fn (None: stop), beside the other listeners;
    detail: compile_end dicts carry the graph, plan, code and entry."""
    if fn is None:
        _listeners.pop(name, None)
    else:
        _listeners[name] = (fn, guards, detail)
    if not _listeners:
        _C.set_log_sink(None)
        return
    fns = list(_listeners.items())
    failed: set = set()

    def sink(ev: dict) -> None:
        for who, (f, _, _) in fns:
            if who in failed:
                continue
            try:
                f(ev)
            except Exception as exc:     # one listener's failure stops it, not the others
                failed.add(who)
                _listeners.pop(who, None)
                print(f"dynscope: the {who} listener failed ({type(exc).__name__}: {exc});"
                      " it stops", file=sys.stderr, flush=True)

    _C.set_log_sink(sink, any(g for _, g, _ in _listeners.values()),
                    any(d for _, _, d in _listeners.values()))


def set_logs(spec: str = "", *, file=None) -> None:
    """Print the chosen logs from now on (spec as DYNSCOPE_LOGS; "" stops),
    to stderr, or appended to `file` (a path) when given."""
    global _file
    chosen = parse(spec)
    if _file is not None:
        _file.close()
        _file = None
    if not chosen:
        listen("logs", None)
        return
    if file is not None:
        _file = _open(os.fspath(file))
    state: dict = {}
    out = _file

    def sink(ev: dict) -> None:
        lines = format_event(ev, chosen, state)
        if lines:
            print("\n".join(lines), file=out if out is not None else sys.stderr, flush=True)

    listen("logs", sink, guards=chosen.get("guards", False),
           detail=any(n in chosen for n in ("graph", "graph_code", "bytecode")))


def enable(spec: str) -> None:
    """set_logs(spec), to DYNSCOPE_LOGS_FILE when that is set."""
    set_logs(spec, file=os.environ.get("DYNSCOPE_LOGS_FILE") or None)


def _start_from_environment() -> None:
    spec = os.environ.get("DYNSCOPE_LOGS", "")
    if not spec:
        return
    try:
        enable(spec)
    except ValueError as exc:
        print(f"dynscope: DYNSCOPE_LOGS={spec!r}: {exc}; no logs", file=sys.stderr)
