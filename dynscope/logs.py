"""DYNSCOPE_LOGS: one readable line per engine event on stderr, as it happens
(the TORCH_LOGS habit).

    DYNSCOPE_LOGS=recompiles,graph_breaks,guards python train.py
    DYNSCOPE_LOGS=+recompiles ...     # verbose: every failing guard, the whole user stack
    dynscope.logs.enable("recompiles,+guards")   # the same from Python; enable("") turns it off

Lines start with `dynscope [NAME]` and carry the compile id (`[0/1]`) as in
explain, dyntop and SQL.  The engine calls the formatter from inside the
engine (never captured); a formatter that fails is reported once and removed.
"""
from __future__ import annotations

import os
import sys

from . import _C

__all__ = ["enable", "NAMES"]

NAMES = ("recompiles", "graph_breaks", "guards")
_EVENTS = {"recompile": "recompiles", "graph_break": "graph_breaks", "compile_end": "guards"}


def parse(spec: str) -> dict:
    """{name: verbose} from "recompiles,+guards"; ValueError names a bad one."""
    chosen = {}
    for word in (w.strip() for w in spec.split(",")):
        if not word:
            continue
        verbose = word.startswith("+")
        name = word.lstrip("+")
        if name not in NAMES:
            raise ValueError(f"unknown log {name!r}; one of {', '.join(NAMES)} "
                             "(+name for verbose)")
        chosen[name] = verbose
    return chosen


def _where(ev: dict) -> str:
    return f"{ev.get('name')} ({ev.get('filename')}:{ev.get('firstlineno')})"


def _format(ev: dict, chosen: dict) -> str | None:
    name = _EVENTS.get(ev.get("event"))
    if name not in chosen:
        return None
    verbose = chosen[name]
    cid = ev.get("compile_id")
    if name == "recompiles":
        failures = ev.get("failures") or []
        lines = [f"dynscope [recompiles] Recompiling {_where(ev)} [{cid}]"]
        shown = failures if verbose else failures[:1]
        for entry, kind, expr, observed in (tuple(f)[:4] for f in shown):
            lines.append(f"    entry [{entry}] failed {expr} (observed {observed})  [{kind}]")
        if len(failures) > len(shown):
            lines.append(f"    ... {len(failures) - len(shown)} more entries (+recompiles shows all)")
        return "\n".join(lines)
    if name == "graph_breaks":
        stack = ev.get("user_stack") or []
        lines = [f"dynscope [graph_breaks] Graph break in {_where(ev)} [{cid}]: "
                 f"{ev.get('reason')}  [{ev.get('kind')}]"]
        for frame in (stack if verbose else stack[-1:]):
            filename, lineno, func, source = (tuple(frame) + ("", "", "", ""))[:4]
            lines.append(f"    {filename}:{lineno} in {func}")
            if source:
                lines.append(f"        {source}")
        return "\n".join(lines)
    if name == "guards":
        if ev.get("outcome") != "ok":
            return None
        lines = [f"dynscope [guards] {_where(ev)} [{cid}]: {ev.get('guards')} guards"]
        if verbose:
            lines += [f"    {expr}" for expr in ev.get("guard_exprs") or []]
        return "\n".join(lines)
    return None


def enable(spec: str) -> None:
    """Print the chosen logs from now on (spec as DYNSCOPE_LOGS; "" stops)."""
    chosen = parse(spec)
    if not chosen:
        _C.set_log_sink(None)
        return

    def sink(ev: dict) -> None:
        line = _format(ev, chosen)
        if line is not None:
            print(line, file=sys.stderr, flush=True)

    _C.set_log_sink(sink, chosen.get("guards", False))


def _start_from_environment() -> None:
    spec = os.environ.get("DYNSCOPE_LOGS", "")
    if not spec:
        return
    try:
        enable(spec)
    except ValueError as exc:
        print(f"dynscope: DYNSCOPE_LOGS={spec!r}: {exc}; no logs", file=sys.stderr)
