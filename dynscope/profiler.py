"""Captured calls as torch.profiler ranges: while a torch profiler runs
(torch.profiler.profile, torch.autograd.profiler.profile, emit_nvtx ...),
each call dynscope answers is a record_function range named
"dynscope [3/1] f" -- the entry it began at, as explain and the report name
it -- so a profile shows which ops ran inside which captured call.

torch calls torch.autograd.profiler._run_on_profiler_start and _stop from
every way a profiler starts and stops; install() wraps the two, once, so
that the engine gets torch's range ops at the start and drops them at the
stop (engine/capture/profiler_ranges.c).  With no profiler running the
engine reads one NULL pointer per call: nothing else.  optimize() calls
install() when torch is imported; nothing here imports torch.
"""
from __future__ import annotations

import sys

from dynscope import _C

_installed = False


def _start():
    import torch
    _C.set_profiler_ranges(torch.ops.profiler._record_function_enter_new,
                           torch.ops.profiler._record_function_exit._RecordFunction)


def _stop():
    _C.set_profiler_ranges(None, None)


def install() -> None:
    """Wrap torch's profiler start and stop hooks, once, if torch's profiler
    module is imported (else nothing: a later optimize() tries again).  A
    profiler already running gets its ranges from now on."""
    global _installed
    prof = sys.modules.get("torch.autograd.profiler")
    if _installed or prof is None:
        return
    start, stop = getattr(prof, "_run_on_profiler_start", None), getattr(
        prof, "_run_on_profiler_stop", None)
    if not (callable(start) and callable(stop)):
        _installed = True          # a torch without the hooks: no ranges, said in docs/api.md
        return

    def on_start():
        start()
        _start()

    def on_stop():
        _stop()
        stop()

    prof._run_on_profiler_start = on_start
    prof._run_on_profiler_stop = on_stop
    _installed = True
    if getattr(prof, "_is_profiler_enabled", False):
        _start()
