"""Shared fixtures: every test starts from an empty engine."""
import gc
import warnings

import pytest

import dynscope
from dynscope import _C


@pytest.fixture(autouse=True)
def fresh_engine():
    """Reset caches, counters and the event log; restore config afterwards."""
    limit = dynscope.config.cache_size_limit
    dynscope.reset()
    _C.clear_events()
    yield
    assert _C.capture_depth() == 0, "a test left a capture region open"
    assert not _C.hook_installed(), "the frame hook stayed installed outside capture"
    dynscope.config.cache_size_limit = limit
    dynscope.reset()
    gc.collect()


def events(kind=None):
    """The in-memory event log, optionally only events named `kind`."""
    evs = _C.events()
    return [e for e in evs if kind is None or e["event"] == kind]


class CountingBackend:
    """A backend that records every graph it is given and runs it eagerly."""

    def __init__(self):
        self.graphs = []
        self.example_inputs = []

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        self.example_inputs.append(list(example_inputs))
        return gm.forward


@pytest.fixture
def counting_backend():
    return CountingBackend()


@pytest.fixture
def no_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield
