"""The seed of the tests that draw random programs or inputs with Hypothesis
(tests/test_fuzz.py, test_graph_inplace.py's generated chains), so that they
vary from day to day and a failure can be replayed.

The seed is $DYNSCOPE_FUZZ_SEED when set, else today's date in UTC as
YYYYMMDD: CI draws other examples each day, and every run of one day -- a
rerun of a red CI job, a developer's run -- draws the same ones.  A test
passes it to Hypothesis (`@hypothesis.seed(SEED)`, `derandomize=False`,
`database=None`); the seed is printed at the end of the run
(pytest_terminal_summary, hooked in by conftest.py) and a failure's message
says how to run it again (reproducer()).
"""
from __future__ import annotations

import datetime
import os
import shlex
import sys


def fuzz_seed() -> int:
    """$DYNSCOPE_FUZZ_SEED, else today's date (UTC) as the number YYYYMMDD."""
    raw = os.environ.get("DYNSCOPE_FUZZ_SEED", "").strip()
    if raw:
        return int(raw)
    return int(datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d"))


SEED = fuzz_seed()

# The tests that drew examples from SEED in this run (node ids), for the summary.
USED: list[str] = []


def reproducer(nodeid: str, **env: str) -> str:
    """The shell command that runs the test `nodeid` (e.g.
    'tests/test_fuzz.py::test_x') again with this run's seed and env."""
    assigns = " ".join(f"{k}={shlex.quote(str(v))}" for k, v in
                       {"DYNSCOPE_FUZZ_SEED": SEED, **env}.items())
    python = os.path.relpath(sys.executable) if sys.executable.startswith(os.getcwd()) \
        else sys.executable
    return f"{assigns} {python} -m pytest -q {shlex.quote(nodeid)}"


def pytest_terminal_summary(terminalreporter):
    if USED:
        terminalreporter.write_line(
            f"random examples drawn with seed {SEED} (DYNSCOPE_FUZZ_SEED="
            f"{os.environ.get('DYNSCOPE_FUZZ_SEED') or 'unset: the date'}) by: "
            + ", ".join(USED))
