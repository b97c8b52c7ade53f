"""The benchmarks that start an LTTng session (scripts/bench_trace.py,
scripts/bench_trace_engine.py) in their --quick mode, checked as
tests/test_benches.py checks the others.  A file of their own because
root has one lttng-sessiond per machine: .ci/run runs the tests that start
a session alone, one Python version after the other (its LTTNG_TESTS),
never beside the parallel jobs -- whose processes register with that
daemon, and which would each rebuild build/bench_trace while another job
runs it.

    .venv/bin/python -m pytest -q tests/test_benches_lttng.py
"""
import pytest

from test_benches import numbers, run_quick, starts_programs, table


def check_trace(out, err):
    rows = table(out, "| scenario | loop alone")
    if "LTTng cannot run here (no session)" in err:
        assert len(rows) == 2, out
        pytest.skip("LTTng cannot run here (no session): the two session rows are left out")
    assert len(rows) == 4, out
    assert all(len(numbers(r[1:])) == 3 for r in rows), rows


def check_trace_engine(out, err):
    assert len(table(out, "| case | ns/hit")) == 4, out
    workload = table(out, "| case | s per round")
    assert len(workload) == 4, out
    assert numbers([workload[3][5]])[0] > numbers([workload[2][5]])[0] > 0   # all > INFO only
    assert "**0 events lost** in 3 sessions" in out, out


CHECKS = {
    "bench_trace": check_trace,
    "bench_trace_engine": check_trace_engine,
}


@starts_programs
@pytest.mark.parametrize("name", sorted(CHECKS))
def test_the_quick_run_prints_every_case_and_leaves_the_doc_alone(name):
    CHECKS[name](*run_quick(name))
