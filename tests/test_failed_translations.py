"""A frame whose translation stops is not translated again on every call:
the attempt stays as a cache entry guarded by what the translator read, and
inputs that pass those guards run the frame without capture (issue 14: a tiny
GPT-2 made 199 compile events on its first call, then 13, 9, ... and 0 only at
the 9th call).  Other inputs are translated anew, up to cache_size_limit."""
import numpy as np
import pytest

import dynscope

from conftest import events


def uses_a_late_global(x):
    return x * LATE_GLOBAL       # noqa: F821 -- defined by the test, later


def test_a_stopped_translation_is_tried_once_per_guarded_inputs():
    f = dynscope.optimize("eager")(uses_a_late_global)
    for _ in range(5):
        with pytest.raises(NameError):
            f(np.ones(3))
    assert len(events("compile_start")) == 1
    (entry,) = dynscope.cache_entries(uses_a_late_global)
    assert "name 'LATE_GLOBAL' is not defined" in entry.eager_reason
    assert entry.hits == 4
    assert entry.plan.startswith("run without capture")
    assert "'LATE_GLOBAL' not in G" in [g.expr for g in entry.guards]
    # once the global exists the entry's guard fails: translated anew, captured
    globals()["LATE_GLOBAL"] = 2.0
    try:
        np.testing.assert_array_equal(f(np.ones(3)), np.full(3, 2.0))
        assert len(events("compile_start")) == 2
        assert [e.eager_reason is None for e in dynscope.cache_entries(uses_a_late_global)] \
            == [True, False]
    finally:
        del globals()["LATE_GLOBAL"]


def test_other_inputs_are_translated_and_count_toward_the_limit():
    f = dynscope.optimize("eager")(uses_a_late_global)
    dynscope.config.cache_size_limit = 3
    with pytest.warns(dynscope.CacheLimitWarning, match="uses_a_late_global"):
        for n in range(1, 6):
            with pytest.raises(NameError):
                f(np.ones(n))
    assert len(events("compile_start")) == 3      # one per shape, up to the limit
    assert len(events("cache_limit")) == 1
