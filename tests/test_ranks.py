"""A job of many processes: one file per rank (scripts/demo_ranks.py, the
demo workload as 4 ranks, rank 2 made to diverge), then the tools that take
several files -- merge, report and sql over them, the divergence between
runs -- and diff between two runs with its exit status for CI gates.
(dyntop on several files: tests/test_dyntop.py.)"""
from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = sys.executable


def run(args, timeout=120):
    env = dict(os.environ, PYTHONPATH=ROOT)
    env.pop("DYNSCOPE_DB", None)
    return subprocess.run([PY, *args], capture_output=True, text=True, env=env,
                          timeout=timeout, cwd=ROOT)


def rows(db, sql):
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    """The 4 files of the demo job."""
    d = tmp_path_factory.mktemp("ranks")
    p = run([os.path.join(ROOT, "scripts", "demo_ranks.py"), str(d)], timeout=300)
    assert p.returncode == 0, p.stderr
    files = [str(d / f"rank{r}.db") for r in range(4)]
    assert sorted(os.listdir(d)) == sorted(os.path.basename(f) for f in files)
    return files


def test_each_rank_wrote_its_own_file_with_its_identity(job):
    for r, f in enumerate(job):
        [(rank, local, world, host)] = rows(f, "SELECT rank, local_rank, world_size, hostname FROM runs")
        assert (rank, local, world) == (r, r, 4) and host


def test_merge_keeps_every_row_and_every_reference(job, tmp_path):
    out = str(tmp_path / "all.db")
    p = run(["-m", "dynscope", "merge", out, *job])
    assert p.returncode == 0 and "4 run(s) from 4 file(s)" in p.stdout, p.stderr
    assert [r for (r,) in rows(out, "SELECT rank FROM runs ORDER BY run_id")] == [0, 1, 2, 3]
    for table in ("compiles", "guard_failures", "graph_breaks", "guards", "cache_entries",
                  "recompile_diffs", "graphs"):
        want = sum(rows(f, f"SELECT count(*) FROM {table}")[0][0] for f in job)
        assert rows(out, f"SELECT count(*) FROM {table}")[0][0] == want, table
    # references still point at the rows of their own file
    for table in ("guard_failures", "graph_breaks", "graphs", "recompile_diffs"):
        assert rows(out, f"SELECT count(*) FROM {table} t JOIN compiles c USING (compile_row)"
                         " WHERE t.run_id != c.run_id OR t.code_id != c.code_id")[0][0] == 0, table
    # rank 2 recompiled forward more often: per rank, as each file says
    per_rank = rows(out, "SELECT r.rank, s.recompiles FROM code_summary s JOIN runs r USING (run_id)"
                         " WHERE s.name = 'forward' ORDER BY r.rank")
    assert per_rank == [(r, rows(f, "SELECT recompiles FROM code_summary WHERE name = 'forward'")[0][0])
                        for r, f in enumerate(job)]
    assert per_rank[2][1] > per_rank[0][1] == per_rank[1][1] == per_rank[3][1]
    # merging again appends; a file that is not a dynscope database is refused, OUT untouched
    before = rows(out, "SELECT count(*) FROM runs")
    bad = tmp_path / "bad.db"
    bad.write_text("not sqlite")
    p = run(["-m", "dynscope", "merge", out, job[0], str(bad)])
    assert p.returncode == 2 and "bad.db" in p.stderr and "Traceback" not in p.stderr
    assert rows(out, "SELECT count(*) FROM runs") == before


def test_report_of_several_files_names_runs_and_the_divergent_rank(job):
    p = run(["-m", "dynscope", "report", *job])
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert "4 run(s)" in out
    section = out.split("Divergence between runs", 1)[1]
    lines = [ln for ln in section.splitlines() if ln.startswith(("forward", "loss"))]
    assert [ln.split()[0] for ln in lines] == ["forward", "loss"]
    assert all("rank 2" in ln and "compiles" in ln for ln in lines), lines
    assert "rank 0" not in section and "rank 3" not in section
    # rows carry the run: forward's recompiles per rank
    top = out.split("Top recompiling functions", 1)[1].split("\n\n", 1)[0]
    assert any(ln.startswith("rank 2") and " forward " in ln for ln in top.splitlines())


def test_report_of_one_file_is_unchanged_by_the_run_column(job):
    p = run(["-m", "dynscope", "report", job[0]])
    assert p.returncode == 0, p.stderr
    assert "Divergence" not in p.stdout and "\nrun " not in p.stdout
    assert "Recompiles: the nearest older entry" in p.stdout


def test_sql_over_several_files_queries_them_merged(job):
    p = run(["-m", "dynscope", "sql", "--json", *job,
             "SELECT r.rank, count(*) AS n FROM compiles c JOIN runs r USING (run_id)"
             " GROUP BY r.rank ORDER BY r.rank"])
    assert p.returncode == 0, p.stderr
    got = {d["rank"]: d["n"] for d in json.loads(p.stdout)}
    assert got == {r: rows(f, "SELECT count(*) FROM compiles")[0][0] for r, f in enumerate(job)}
    assert got[2] > got[0]


def test_diff_reports_an_added_recompile_and_exits_1(job):
    p = run(["-m", "dynscope", "diff", job[0], job[2]])
    assert p.returncode == 1, p.stdout + p.stderr
    assert "B regresses against A" in p.stdout
    fwd = [ln for ln in p.stdout.splitlines() if ln.strip().startswith("forward (")]
    assert fwd and "recompiles" in p.stdout.split("B regresses against A", 1)[1]
    p = run(["-m", "dynscope", "diff", "--json", job[0], job[2]])
    assert p.returncode == 1
    d = json.loads(p.stdout)
    f = {x["function"]: x for x in d["functions"]}
    want = [rows(j, "SELECT recompiles FROM code_summary WHERE name = 'forward'")[0][0]
            for j in (job[0], job[2])]
    assert [f["forward"]["recompiles"]["a"], f["forward"]["recompiles"]["b"]] == want
    assert want[1] == want[0] + 2 and d["regressed"]
    assert any(r.startswith("forward (demo_workload.py:") and "recompiles" in r
               for r in d["regressions"])


# Each regression diff names, planted alone into a copy of rank 0's file:
# (SQL that makes B regress in one way, what the one regression names).
BREAK_ROW = "(SELECT min(break_id) FROM graph_breaks)"
BREAK_COLS = ("run_id, code_id, epoch, compile_id, compile_row, kind, reason, filename, lineno,"
              " offset, user_stack, at, break_type, break_class")
PLANTED = {
    "graph breaks": (f"INSERT INTO graph_breaks ({BREAK_COLS}) SELECT {BREAK_COLS}"
                     f" FROM graph_breaks WHERE break_id = {BREAK_ROW}",
                     r"graph breaks (\d+) -> (\d+)"),
    "graphs": ("UPDATE compiles SET graphs = graphs + 1 WHERE compile_row ="
               " (SELECT min(compile_row) FROM compiles WHERE graphs > 0)",
               r"graphs (\d+) -> (\d+)"),
    "cache-limit hits": ("INSERT INTO cache_limits SELECT * FROM cache_limits LIMIT 1",
                         r"cache limits (\d+) -> (\d+)"),
    "a new break reason": (f"UPDATE graph_breaks SET reason = reason || ' (planted)'"
                           f" WHERE break_id = {BREAK_ROW}",
                           r"new break \w+: .* \(planted\) at "),
}


@pytest.mark.parametrize("what", sorted(PLANTED))
def test_diff_exits_1_on_each_regression_it_names(job, tmp_path, what):
    """B is A (rank 0's file) with one regression planted: more graph breaks
    at a known site, one more graph, one more cache-limit hit, or a break
    reason A has not.  diff exits 1 and names that one regression only; the
    unchanged file against itself exits 0."""
    import re
    import shutil
    sql, named = PLANTED[what]
    b = str(tmp_path / "b.db")
    shutil.copy(job[0], b)
    con = sqlite3.connect(b)
    try:
        assert con.execute(sql).rowcount == 1
        con.commit()
    finally:
        con.close()
    for args in ([], ["--json"]):
        p = run(["-m", "dynscope", "diff", *args, job[0], b])
        assert p.returncode == 1, (what, p.stdout + p.stderr)
        if args:
            (regression,) = json.loads(p.stdout)["regressions"]
        else:
            (regression,) = [ln.strip() for ln in p.stdout.split("B regresses against A:\n", 1)[1]
                             .splitlines() if ln.startswith("  ")]
        m = re.search(named, regression)
        assert m, (what, regression)
        if m.groups():
            assert int(m.group(2)) == int(m.group(1)) + 1, regression
    p = run(["-m", "dynscope", "diff", job[0], job[0]])
    assert p.returncode == 0, p.stdout + p.stderr


def test_diff_of_identical_runs_exits_0(job):
    p = run(["-m", "dynscope", "diff", job[0], job[1]])
    assert p.returncode == 0, p.stdout + p.stderr
    assert "does not regress" in p.stdout and "Functions that changed\n  (none)" in p.stdout
    # the other way round: B has fewer recompiles than A, which is no regression
    p = run(["-m", "dynscope", "diff", "--json", job[2], job[0]])
    assert p.returncode == 0 and json.loads(p.stdout)["regressed"] is False


def test_diff_and_merge_refuse_bad_input(job, tmp_path):
    p = run(["-m", "dynscope", "diff", job[0], str(tmp_path / "missing.db")])
    assert p.returncode == 2 and "no such database" in p.stderr and "Traceback" not in p.stderr
    import shutil
    out = str(tmp_path / "rank0-copy.db")
    shutil.copy(job[0], out)
    p = run(["-m", "dynscope", "merge", out, job[1]])   # a recorded file as OUT: appended to
    assert p.returncode == 0, p.stderr
    assert [r for (r,) in rows(out, "SELECT rank FROM runs ORDER BY run_id")] == [0, 1]
    p = run(["-m", "dynscope", "merge", out, out])
    assert p.returncode == 2 and "is the output file" in p.stderr
