"""The program's own marks (issue 42): `dynscope.annotate(name, **fields)`
puts an event of the program -- a training step, an epoch, a request --
into the recording (the `annotations` table), the LTTng trace (the
`dynscope:annotate` tracepoint), the Chrome-trace export and dyntop's
header, so that compiles line up with the program's phases.
`dynscope.annotate_span(name, **fields)` is the context-manager form: a
"begin" mark on entry and an "end" on exit (with the exception's type when
one leaves the block).

Fields are JSON (json.dumps with default=repr: a value JSON cannot hold is
its repr).  With no sink taking the event (no recording, no LTTng session)
a mark costs the call and a dict lookup; it never raises for what observing
does (issue 1: observing never changes the program).
"""
from __future__ import annotations

import contextlib
import json

from . import _C

__all__ = ["annotate", "annotate_span"]


def _emit(name, phase: str, fields: dict) -> None:
    if not isinstance(name, str) or not name:
        raise TypeError(f"dynscope.annotate: the name must be a non-empty str, not {name!r}")
    try:
        text = json.dumps(fields, default=repr, sort_keys=True)
    except (TypeError, ValueError) as exc:       # a key JSON cannot hold
        raise TypeError(f"dynscope.annotate({name!r}): fields must be JSON-able: {exc}") from None
    _C.annotate(name, phase, text)


def annotate(name: str, **fields) -> None:
    """Mark a point of the program: `dynscope.annotate("step", n=12)`."""
    _emit(name, "mark", fields)


@contextlib.contextmanager
def annotate_span(name: str, **fields):
    """Mark a stretch of the program: `with dynscope.annotate_span("epoch", n=1): ...`."""
    _emit(name, "begin", fields)
    try:
        yield
    except BaseException as exc:
        _emit(name, "end", dict(fields, error=type(exc).__name__))
        raise
    else:
        _emit(name, "end", fields)
