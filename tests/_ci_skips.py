"""Under CI=true, a test that skips because a tool CI installs is missing
fails instead (issue 47): a broken LTTng provider build, a chromium that did
not install or a torch that did not import would otherwise turn tests into
skips and leave CI green.  conftest.py hooks this module in.

CI_INSTALLS says which tools CI installs (scripts/install-deps.sh under
.ci/run, which sets DYNSCOPE_WITH_TORCH=1) on which CPython version: the one
list to edit when that changes.  MISSING says how a skip names each tool:
patterns over the skip's reason, as the tests write them.  A skip whose
reason matches a tool that CI installs on this version is a failure under
CI=true; every other skip (no /proc, an ASan build, a system-wide session
daemon, a version without sys.monitoring, ...) stays a skip.

DYNSCOPE_CI_TOOLS="lttng tmux ..." replaces this version's list for one run
(e.g. CI=true on a machine that lacks chromium on purpose); "" expects none.
"""
from __future__ import annotations

import os
import re
import sys

import pytest

ALL = ("3.11", "3.12", "3.13")

# What CI installs on each version (tool: versions).
CI_INSTALLS = {
    "lttng": ALL,       # liblttng-ust-dev (the provider: make tp), lttng-tools, babeltrace2
    "tmux": ALL,        # dyntop's TUI tests
    "chromium": ALL,    # the HTML report in a headless browser
    "valgrind": ALL,    # callgrind: instructions per cache hit
    "dyntop": ALL,      # build/dyntop, built by make all
    "torch": ALL,       # torch, tabulate, transformers (DYNSCOPE_WITH_TORCH=1; issue 36)
}

# How a skip says the tool is missing (searched in the skip's reason).
MISSING = {
    "lttng": r"LTTng cannot run here|lttng-relayd (is not installed|did not start)",
    "tmux": r"\btmux is not installed",
    "chromium": r"\bno chromium\b",
    "valgrind": r"\bvalgrind is not installed",
    "dyntop": r"build/dyntop is not built",
    "torch": (r"PyTorch is optional|could not import '(torch|tabulate|transformers)'"
              r"|needs tabulate|transformers models need transformers"),
}


def on_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def expected_tools(version: str | None = None) -> set[str]:
    """The tools CI installs on `version` (default: this interpreter's), or
    those $DYNSCOPE_CI_TOOLS names."""
    override = os.environ.get("DYNSCOPE_CI_TOOLS")
    if override is not None:
        return set(override.split())
    version = version or "%d.%d" % sys.version_info[:2]
    return {tool for tool, versions in CI_INSTALLS.items() if version in versions}


def missing_tool(reason: str) -> str | None:
    """The tool CI installs here that a skip with this reason says is
    missing, under CI=true; else None."""
    if not on_ci():
        return None
    for tool in sorted(expected_tools()):
        if re.search(MISSING[tool], reason):
            return tool
    return None


def skip_reason(report) -> str:
    longrepr = report.longrepr
    reason = str(longrepr[2]) if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return reason.removeprefix("Skipped: ")


def failure_message(tool: str, reason: str) -> str:
    return (f"CI=true: CI installs {tool} on Python {sys.version_info[0]}.{sys.version_info[1]}"
            f" (tests/_ci_skips.py, CI_INSTALLS), yet this test skipped: {reason}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A test's skip (in set-up, a fixture, the test or a skipif mark)."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and not hasattr(report, "wasxfail"):
        reason = skip_reason(report)
        tool = missing_tool(reason)
        if tool is not None:
            report.outcome = "failed"
            report.longrepr = failure_message(tool, reason)


class MissingTool(pytest.Item):
    """Stands for the tests of a module that skipped as a whole (a
    module-level importorskip): it fails with the skip's reason, and the
    rest of the run goes on (a failed collection would stop it)."""

    def __init__(self, *, message, **kwargs):
        super().__init__(**kwargs)
        self.message = message

    def runtest(self):
        pytest.fail(self.message, pytrace=False)

    def reportinfo(self):
        return self.path, None, self.name


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    """A module's skip at import (pytest.importorskip at module level)."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped:
        reason = skip_reason(report)
        tool = missing_tool(reason)
        if tool is not None:
            report.outcome = "passed"
            report.longrepr = None
            report.result = [MissingTool.from_parent(collector, name=f"[{tool} missing]",
                                                     message=failure_message(tool, reason))]
