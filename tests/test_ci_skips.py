"""Under CI=true a test that skips for want of a tool CI installs fails
(tests/_ci_skips.py), and a run that collects no test fails make (exit 5):
planted skips, run by a pytest of their own, with and without CI=true."""
import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

import _ci_skips
import _programs
from conftest import TORCH_SKIP_REASON

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
VERSION = "%d.%d" % sys.version_info[:2]

PLANTED = {
    "conftest.py": f"""
        import sys
        sys.path.insert(0, {HERE!r})
        from _ci_skips import pytest_make_collect_report, pytest_runtest_makereport  # noqa
    """,
    # a skip in the test, in a fixture, by a mark; a module skipped as a whole
    "test_tools.py": """
        import shutil
        import pytest

        def test_tmux():
            pytest.skip("tmux is not installed")

        @pytest.fixture
        def browser():
            pytest.skip("no chromium on PATH: scripts/install-deps.sh installs it")

        def test_chromium(browser):
            pass

        @pytest.mark.skipif(True, reason="LTTng cannot run here: lttng-ust headers missing")
        def test_lttng():
            pass

        def test_not_a_tool():
            pytest.skip("needs /proc/self/statm")

        @pytest.mark.xfail(reason="LTTng cannot run here: an expected failure stays one")
        def test_xfail():
            assert False

        def test_runs():
            pass
    """,
    "test_torch_module.py": f"""
        import pytest
        torch = pytest.importorskip("no_such_module_for_dynscope_tests",
                                    reason={TORCH_SKIP_REASON!r}, exc_type=ImportError)

        def test_uses_torch():
            pass
    """,
}


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    d = tmp_path_factory.mktemp("planted")
    for name, text in PLANTED.items():
        (d / name).write_text(textwrap.dedent(text))
    return d


def run_planted(d, **env):
    """pytest on the planted tests: (exit status, {test: outcome}, output)."""
    e = {k: v for k, v in os.environ.items() if k not in ("CI", "DYNSCOPE_CI_TOOLS")}
    e.update(env)
    report = d / "report.json"
    plugin = d / "outcomes.py"
    plugin.write_text(textwrap.dedent(f"""
        import json
        seen = {{}}
        def pytest_runtest_logreport(report):
            if report.when == "call" or report.outcome != "passed":
                name = report.nodeid.split("::")[-1]
                seen[name] = "xfailed" if hasattr(report, "wasxfail") else report.outcome
        def pytest_sessionfinish(session):
            open({str(report)!r}, "w").write(json.dumps(seen))
    """))
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
                        "-p", "outcomes", str(d)], capture_output=True, text=True, cwd=d,
                       env=dict(e, PYTHONPATH=str(d)), timeout=120)
    return p.returncode, json.loads(report.read_text()), p.stdout + p.stderr


def test_without_ci_the_planted_skips_are_skips(planted):
    rc, outcomes, out = run_planted(planted)
    assert rc == 0, out
    assert outcomes == {"test_tmux": "skipped", "test_chromium": "skipped",
                        "test_lttng": "skipped", "test_not_a_tool": "skipped",
                        "test_xfail": "xfailed", "test_runs": "passed"}, out
    assert "SKIPPED [1] test_torch_module.py" in out             # the module, skipped whole


def test_under_ci_a_skip_for_a_tool_ci_installs_fails(planted):
    rc, outcomes, out = run_planted(planted, CI="true", DYNSCOPE_CI_TOOLS="tmux chromium lttng torch")
    assert rc == 1, out
    assert outcomes == {"test_tmux": "failed", "test_chromium": "failed",
                        "test_lttng": "failed", "test_not_a_tool": "skipped",
                        "test_xfail": "xfailed", "test_runs": "passed",
                        "[torch missing]": "failed"}, out
    assert f"CI=true: CI installs tmux on Python {VERSION}" in out
    assert "yet this test skipped: tmux is not installed" in out
    assert "CI installs torch" in out and "PyTorch is optional" in out


def test_under_ci_a_tool_ci_does_not_install_here_stays_a_skip(planted):
    rc, outcomes, out = run_planted(planted, CI="true", DYNSCOPE_CI_TOOLS="tmux")
    assert rc == 1, out
    assert outcomes["test_tmux"] == "failed"
    assert {outcomes[t] for t in ("test_chromium", "test_lttng", "test_not_a_tool")} == {"skipped"}
    assert "[torch missing]" not in outcomes


def test_the_list_names_every_tool_the_suite_skips_for_on_every_version():
    """CI_INSTALLS and MISSING name the same tools, and the skips the suite
    writes for a missing tool match their tool's pattern."""
    assert set(_ci_skips.CI_INSTALLS) == set(_ci_skips.MISSING)
    for versions in _ci_skips.CI_INSTALLS.values():
        assert set(versions) <= set(_ci_skips.ALL)
    reasons = {
        "lttng": ["LTTng cannot run here: lttng-tools or babeltrace2 not installed",
                  "lttng-relayd is not installed (lttng-tools)", "lttng-relayd did not start:\n"],
        "tmux": ["tmux is not installed"],
        "chromium": ["no chromium on PATH: scripts/install-deps.sh installs Debian's chromium"],
        "valgrind": ["valgrind is not installed (scripts/install-deps.sh installs it)"],
        "dyntop": ["build/dyntop is not built (make)"],
        "torch": [TORCH_SKIP_REASON, "could not import 'torch': No module named 'torch'",
                  "torch.fx's print_tabular needs tabulate",
                  "the zoo's transformers models need transformers (DYNSCOPE_WITH_TORCH=1 "
                  "scripts/install-deps.sh)"],
    }
    import re
    for tool, texts in reasons.items():
        for text in texts:
            hits = [t for t, pattern in _ci_skips.MISSING.items() if re.search(pattern, text)]
            assert hits == [tool], (text, hits)
    for text in ("needs /proc/self/statm", "a system-wide LTTng session daemon is running here",
                 "valgrind cannot run a process under ASan"):
        assert not any(re.search(p, text) for p in _ci_skips.MISSING.values()), text


def test_make_fails_when_pytest_collects_no_test(tmp_path):
    """pytest's exit 5 (nothing collected) fails `make pytest` and `make test`
    (.ci/run runs make test), saying so.  (A directory without tests: the
    pytest make starts imports nothing of dynscope, which it could not under
    make asan, whose preload it does not get.)"""
    p = _programs.run(["make", "--no-print-directory", "-C", ROOT, "pytest",
                       f"PYTEST_ARGS=-q -p no:cacheprovider {tmp_path}"],
                      capture_output=True, text=True, timeout=300)
    assert p.returncode != 0, p.stdout + p.stderr
    assert "pytest collected no tests (exit 5): a failure" in p.stderr


def test_shards_run_every_file_once_and_fail_when_one_shard_fails(tmp_path):
    """scripts/pytest_shards.sh (make asan-quick): the files dealt out to N
    pytest processes, one summary line summing theirs (what .ci/run reads),
    and a failing shard's status as the whole's."""
    tests = tmp_path / "tests"
    tests.mkdir()
    for i in range(5):
        (tests / f"test_{i}.py").write_text(f"def test_a():\n    pass\n\ndef test_b():\n    assert {i} != 3\n")
    files = [f"tests/test_{i}.py" for i in range(5)]
    p = _programs.run(["bash", os.path.join(ROOT, "scripts", "pytest_shards.sh"), "2", sys.executable,
                       "-q", "-p", "no:cacheprovider", *files],
                      capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert p.returncode == 1, p.stdout + p.stderr
    assert p.stdout.count("==================== shard ") == 2
    last = p.stdout.strip().splitlines()[-1]
    assert re.match(r"^1 failed, 9 passed in \d+s \(2 shards at once\)$", last), last
    assert "test_3.py::test_b" in p.stdout                 # the failing shard's log is shown
    p = _programs.run(["bash", os.path.join(ROOT, "scripts", "pytest_shards.sh"), "3", sys.executable,
                       "-q", "-p", "no:cacheprovider", *files[:3]],
                      capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert re.match(r"^6 passed in \d+s \(3 shards at once\)$", p.stdout.strip().splitlines()[-1])
