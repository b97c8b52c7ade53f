"""What differs between the CPython versions dynscope runs on (3.11, 3.12,
3.13; docs/architecture.md "CPython versions"): the interpreter features a
version adds, under capture.  The rest of the suite runs on each version."""
from __future__ import annotations

import sys

import numpy as np
import pytest

import dynscope

needs_monitoring = pytest.mark.skipif(sys.version_info < (3, 12),
                                      reason="sys.monitoring (PEP 669) is new in 3.12")


def _count_label(x):
    try:                             # a break inside a try: not inlined, and skipped --
        return repr(x)               # an eager step the interpreter runs
    except TypeError:
        return "?"


def _with_everything(a):
    b = a * 2
    label = _count_label(3)          # a frame the interpreter runs
    if b.sum() > 0:                  # a graph break: an eager truth test
        b = b + 1
    try:                             # a break inside: the rest deopts into the interpreter
        d = b - len(repr(b.dtype))
    except ValueError:
        d = None
    return b, label, d


@needs_monitoring
def test_sys_monitoring_sees_the_frames_the_interpreter_runs():
    """A tool's callbacks fire for every frame the interpreter runs (frames
    left to it, deopted rests); a call answered by a plan runs no bytecode
    and fires none, as under torch.compile.  Results are eager's."""
    mon = sys.monitoring
    tool = mon.PROFILER_ID
    mon.use_tool_id(tool, "dynscope-test")
    starts = []
    try:
        mon.register_callback(tool, mon.events.PY_START, lambda code, off: starts.append(code.co_name))
        mon.set_events(tool, mon.events.PY_START | mon.events.PY_RETURN | mon.events.LINE)
        opt = dynscope.optimize("eager")(_with_everything)
        inputs = [np.ones(2), -np.ones(2), np.ones(2)]
        got = [opt(x) for x in inputs]
    finally:
        mon.set_events(tool, 0)
        mon.register_callback(tool, mon.events.PY_START, None)
        mon.free_tool_id(tool)
    want = [_with_everything(x) for x in inputs]
    for (b, label, d), (wb, wlabel, wd) in zip(got, want):
        np.testing.assert_array_equal(b, wb)
        np.testing.assert_array_equal(d, wd)
        assert label == wlabel
    assert starts.count("_count_label") == 3
    assert "_with_everything" not in starts


def _reads_callers_locals():
    return sorted(k for k in sys._getframe(1).f_locals if not k.startswith("_"))


def _calls_a_frame_reader(a):
    b = a + 1
    names = _reads_callers_locals()      # an eager step (it reads a frame)
    return b * 2, names


def test_an_eager_step_sees_the_captured_frames_locals():
    """f_locals of the captured frame during an eager step: a dict on 3.11
    and 3.12, a FrameLocalsProxy over the frame's fast locals on 3.13 (PEP
    667); either way the locals the plan carries at that point."""
    opt = dynscope.optimize("eager")(_calls_a_frame_reader)
    for x in (np.ones(2), np.zeros(2)):
        out, names = opt(x)
        np.testing.assert_array_equal(out, (x + 1) * 2)
        assert names == ["a", "b"]


class _NotInlined:
    def __call__(self, n):
        try:                          # a call the translator leaves to the interpreter
            return len(n) == 1
        except TypeError:
            return False


def _shadowing_comprehension(name, source, keep):
    members = [(name, value) for name, value in source.items() if keep(name)]
    return name, members


def test_a_comprehension_variable_that_shadows_an_argument_is_put_back():
    """From 3.12 the comprehension is inlined (PEP 709): it saves `name`
    with LOAD_FAST_AND_CLEAR and restores it after the loop.  An argument not
    read before must be saved as its value, not as unbound (enum._convert_,
    run by `import ssl`, raised UnboundLocalError under capture)."""
    opt = dynscope.optimize("eager")(_shadowing_comprehension)
    src = {"a": 1, "bb": 2, "c": 3}
    for _ in range(2):
        assert opt("X", src, _NotInlined()) == ("X", [("a", 1), ("c", 3)])
