"""Captured calls as torch.profiler ranges (issue 42, dynscope/profiler.py,
engine/capture/profiler_ranges.c): under a running profiler each call
dynscope answers is a record_function range "dynscope [3/1] f" holding its
ops; with none running, nothing is added."""
import os

import pytest

from conftest import TORCH_SKIP_REASON

torch = pytest.importorskip("torch", reason=TORCH_SKIP_REASON)

# Ending a range (torch.ops.profiler._record_function_exit, as torch's own
# record_function does) looks its handle, a ScriptObject, up for
# __torch_function__, which throws and catches a C++ exception: under make
# asan's preloaded ASan runtime __cxa_throw has no interceptor target and the
# process aborts (eager torch.profiler.record_function alone does the same).
pytestmark = pytest.mark.skipif(
    "libasan" in os.environ.get("LD_PRELOAD", ""),
    reason="ending a torch.profiler range throws and catches a C++ exception in torch; under "
           "make asan's preloaded ASan runtime __cxa_throw has no interceptor target")

import dynscope  # noqa: E402
from dynscope import _C  # noqa: E402


def step(x):
    y = torch.relu(x) * 2
    print("", end="")                   # a break: the call is two graphs, one range
    return y + 1


def ranges(prof):
    return {e.key: e.count for e in prof.key_averages() if e.key.startswith("dynscope [")}


def test_each_captured_call_is_one_range_named_by_its_entry():
    f = dynscope.optimize("eager")(step)
    x = torch.ones(8)
    f(x)
    with torch.profiler.profile() as prof:
        for _ in range(3):
            assert torch.equal(f(x), torch.relu(x) * 2 + 1)
    (entry,) = [e.compile_id for e in dynscope.cache_entries(step) if e.resume_offset == 0]
    assert ranges(prof) == {f"dynscope [{entry}] step": 3}
    # the call's ops ran inside it
    events = prof.events()
    (outer,) = [e for e in events if e.name.startswith("dynscope [")][:1]
    inside = [e.name for e in events
              if e.time_range.start >= outer.time_range.start
              and e.time_range.end <= outer.time_range.end]
    assert "aten::relu" in inside


def test_no_range_without_a_profiler_and_after_it_stops():
    f = dynscope.optimize("eager")(step)
    x = torch.ones(4)
    with torch.autograd.profiler.profile() as prof:
        f(x)
    assert sum(ranges(prof).values()) == 1
    # stopped: the engine holds no range op any more
    assert _C.profiler_ranges_on() is False
    f(x)
