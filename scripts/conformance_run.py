"""Run one test suite and write each test's outcome as JSON (conformance.py's worker).

    python scripts/conformance_run.py unittest test.test_math OUT.json
    python scripts/conformance_run.py pytest /path/to/test_ufunc.py OUT.json
    python scripts/conformance_run.py pyargs networkx.algorithms.tests.test_cycles OUT.json

The same worker runs plain and under `python -m dynscope run --capture-all`,
so both runs execute the same Python code around the tests.  OUT.json holds
{"outcomes": {test id: pass|fail|error|skip|xfail|xpass}, "skip_reasons":
{test id: reason}, "wall": seconds spent running the tests, "counters":
dynscope's engine counters when dynscope is loaded (else null)}.

Timing is not behaviour, and both runs must try the same inputs: for a
suite that uses Hypothesis, both runs load (after the suite's own profile)
one that keeps it but turns deadlines and the too-slow health check off (a
captured run compiles each function on its first call, and a test's first
example can take seconds), draws examples derandomized (the same in both
runs, and no example database) and at most HYPOTHESIS_EXAMPLES per test
(Hypothesis's own engine, captured too, makes a property test the slowest
thing a suite runs).  Everything else is the suite's own.
"""
from __future__ import annotations

import json
import sys
import time

HYPOTHESIS_EXAMPLES = 20


def run_unittest(module: str, outcomes: dict, reasons: dict) -> None:
    import importlib
    import unittest

    class Result(unittest.TextTestResult):
        def addSuccess(self, test):
            super().addSuccess(test)
            outcomes[test.id()] = "pass"

        def addFailure(self, test, err):
            super().addFailure(test, err)
            outcomes[test.id()] = "fail"

        def addError(self, test, err):
            super().addError(test, err)
            outcomes[test.id()] = "error"

        def addSkip(self, test, reason):
            super().addSkip(test, reason)
            outcomes[test.id()] = "skip"
            reasons[test.id()] = str(reason)

        def addExpectedFailure(self, test, err):
            super().addExpectedFailure(test, err)
            outcomes[test.id()] = "xfail"

        def addUnexpectedSuccess(self, test):
            super().addUnexpectedSuccess(test)
            outcomes[test.id()] = "xpass"

        def addSubTest(self, test, subtest, err):
            # a failing subtest fails its test (as unittest reports it)
            super().addSubTest(test, subtest, err)
            if err is not None:
                kind = "fail" if issubclass(err[0], test.failureException) else "error"
                outcomes[subtest.id()] = kind

    mod = importlib.import_module(module)
    suite = unittest.defaultTestLoader.loadTestsFromModule(mod)
    unittest.TextTestRunner(resultclass=Result, verbosity=0, stream=sys.stderr).run(suite)


def run_pytest(path: str, outcomes: dict, reasons: dict, pyargs: bool = False) -> None:
    import pytest

    class Collect:
        def pytest_runtest_logreport(self, report):
            tid = report.nodeid
            if report.when == "call" or (report.when == "setup" and not report.passed):
                if hasattr(report, "wasxfail"):
                    outcomes[tid] = "xpass" if report.passed else "xfail"
                elif report.skipped:
                    outcomes[tid] = "skip"
                    reasons[tid] = str(report.longrepr[2]) if isinstance(report.longrepr, tuple) else ""
                elif report.failed:
                    outcomes[tid] = "fail" if report.when == "call" else "error"
                else:
                    outcomes[tid] = "pass"
            elif report.when == "teardown" and report.failed:
                outcomes[tid] = "error"

    class NoDeadlines:
        @pytest.hookimpl(trylast=True)
        def pytest_configure(self, config):
            try:
                from hypothesis import HealthCheck, settings
            except ImportError:
                return
            settings.register_profile("dynscope-conformance", settings(
                settings.default, deadline=None, derandomize=True, database=None,
                max_examples=min(settings.default.max_examples, HYPOTHESIS_EXAMPLES),
                suppress_health_check=list(settings.default.suppress_health_check) + [HealthCheck.too_slow]))
            settings.load_profile("dynscope-conformance")

    # -p no:cacheprovider: nothing written next to the installed package;
    # -o addopts=: the suite's own options only; -x never: every test runs.
    target = ["--pyargs", path] if pyargs else [path]
    pytest.main(target + ["-q", "-p", "no:cacheprovider", "-o", "addopts=", "--no-header",
                 "-W", "ignore::pytest.PytestUnraisableExceptionWarning"], plugins=[Collect(), NoDeadlines()])


def main(argv: list) -> int:
    if len(argv) != 4 or argv[1] not in ("unittest", "pytest", "pyargs"):
        print(__doc__, file=sys.stderr)
        return 2
    kind, target, out = argv[1:]
    outcomes: dict = {}
    reasons: dict = {}
    start = time.perf_counter()
    if kind == "unittest":
        run_unittest(target, outcomes, reasons)
    else:
        # pyargs: an installed package's test module by its dotted name, as
        # `pytest --pyargs` finds it (third-party packages ship their tests)
        run_pytest(target, outcomes, reasons, pyargs=kind == "pyargs")
    wall = time.perf_counter() - start
    counters = None
    if "dynscope" in sys.modules:
        from dynscope import _C
        counters = _C.counters()
    with open(out, "w") as f:
        json.dump({"outcomes": outcomes, "skip_reasons": reasons, "wall": wall,
                   "counters": counters}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
