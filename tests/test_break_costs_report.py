"""The report ranks graph-break sites by what they cost (schema v6,
dynscope/breakcost.py): `python -m dynscope report` and its HTML site list
the site that cost the program most time outside graphs first -- even when
another site broke more often -- with its cost, its share of its function's
time, the calls through it and the graph launches it added.  A file without
costs (older than v6, or no call timed) keeps the most-frequent-first order
and says once that costs were not measured.

The engine times 1 call in 64, so a recording's own costs are chance: each
test sets them with UPDATEs on cache_entries and asserts on those."""
import os
import re
import shutil
import sqlite3
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# smooth breaks at one site, compiled once: 1 break; noisy recompiles on k
# (then k is dynamic): 2 breaks at its site.
PROGRAM = '''
import numpy as np, dynscope

@dynscope.optimize("eager")
def smooth(x):
    y = x * 2
    print(end="")                       # SMOOTH_SITE
    return y + 1

@dynscope.optimize("eager")
def noisy(x, k):
    y = x * k
    print(end="")                       # NOISY_SITE
    return y - 1

for _ in range(40):
    smooth(np.ones(3))
for k in range(4):
    noisy(np.ones(3), k)
'''
SMOOTH_LINE, NOISY_LINE = (next(i for i, line in enumerate(PROGRAM.splitlines(), 1) if mark in line)
                           for mark in ("SMOOTH_SITE", "NOISY_SITE"))
# where smooth's break is said to be: an installed file, shown from its package on
INSTALLED = "/opt/venv/lib/python3.11/site-packages/bcpkg/smooth.py"
MS = 1_000_000


def run(*args):
    env = dict(os.environ, PYTHONPATH=ROOT)
    env.pop("DYNSCOPE_DB", None)
    return subprocess.run([sys.executable, "-m", "dynscope", *map(str, args)], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=120)


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    d = tmp_path_factory.mktemp("breakcost")
    (d / "prog.py").write_text(PROGRAM)
    db = d / "run.db"
    p = run("run", "--db", db, d / "prog.py")
    assert p.returncode == 0, p.stderr
    return db


def set_costs(db, costs):
    """Every entry's costs NULL, then, per break line, those of the entries
    whose graph ended there: (cost_samples, run_ns, break_ns, break_graphs)."""
    con = sqlite3.connect(db)
    with con:
        con.execute("UPDATE cache_entries SET cost_samples = NULL, run_ns = NULL,"
                    " break_ns = NULL, break_graphs = NULL")
        for lineno, values in costs.items():
            n = con.execute(
                "UPDATE cache_entries SET cost_samples = ?, run_ns = ?, break_ns = ?,"
                " break_graphs = ? WHERE (run_id, code_id, epoch, compile_id) IN"
                " (SELECT run_id, code_id, epoch, compile_id FROM graph_breaks WHERE lineno = ?)",
                (*values, lineno)).rowcount
            assert n, f"no entry broke at line {lineno}"
    con.close()


@pytest.fixture(scope="module")
def costed(recording):
    """The recording with smooth's one break costing 30 ms of its 60 ms and
    adding 7 graphs, and each of noisy's two breaks 1 ms of its 4 ms: the
    site with fewer breaks costs more.  smooth's site is in an installed file."""
    db = recording.parent / "costed.db"
    shutil.copyfile(recording, db)
    set_costs(db, {SMOOTH_LINE: (4, 60 * MS, 30 * MS, 7), NOISY_LINE: (1, 4 * MS, 1 * MS, 2)})
    con = sqlite3.connect(db)
    with con:
        con.execute("UPDATE graph_breaks SET filename = ? WHERE lineno = ?", (INSTALLED, SMOOTH_LINE))
    con.close()
    return db


def calls_at(db, lineno):
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return con.execute("SELECT sum(e.hits) FROM graph_breaks b JOIN cache_entries e"
                           " USING (run_id, code_id, epoch, compile_id) WHERE b.lineno = ?",
                           (lineno,)).fetchone()[0]
    finally:
        con.close()


def site_section(text):
    """(title, rows as lists of cells) of the text report's break-site section."""
    block = next(b for b in text.split("\n\n") if b.lstrip("\n").startswith("Top graph-break sites"))
    title, *lines = block.strip("\n").splitlines()
    return title, [re.split(r"\s{2,}", ln.strip()) for ln in lines[2:]]


def html_site_rows(out):
    """The cells of the HTML index's break-site table, row by row, as text."""
    index = (out / "index.html").read_text(encoding="utf-8")
    section = index[index.index('<section id="breaks">'):]
    section = section[:section.index("</section>")]
    head = re.findall(r"<th(?: [^>]*)?>(.*?)</th>", section)
    rows = [[re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td(?: [^>]*)?>(.*?)</td>", r)]
            for r in re.findall(r"<tr>(.*?)</tr>", section.split("</thead>", 1)[1])]
    return section, [dict(zip(head, r)) for r in rows]


def test_the_text_report_lists_the_costliest_site_first_with_its_cost_and_share(costed):
    p = run("report", costed)
    assert p.returncode == 0, p.stderr
    title, rows = site_section(p.stdout)
    assert title.startswith("Top graph-break sites by cost") and "not measured" not in title
    first, second = rows
    assert first == ["call", "call to builtin print", f"bcpkg/smooth.py:{SMOOTH_LINE}", "1",
                     "30.0 ms", "50% of smooth", str(calls_at(costed, SMOOTH_LINE)), "7"]
    assert second[2].endswith(f"prog.py:{NOISY_LINE}")
    assert second[3:] == ["2", "2.0 ms", "25% of noisy", str(calls_at(costed, NOISY_LINE)), "4"]


def test_the_html_report_lists_the_costliest_site_first_with_its_cost_and_share(costed, tmp_path):
    p = run("report", "--html", tmp_path / "site", costed)
    assert p.returncode == 0, p.stderr
    section, rows = html_site_rows(tmp_path / "site")
    assert "costliest first" in section and "not measured" not in section
    assert [r["site"] for r in rows] == [f"bcpkg/smooth.py:{SMOOTH_LINE}",
                                         f"{costed.parent}/prog.py:{NOISY_LINE}"]
    assert f'title="{INSTALLED}:{SMOOTH_LINE}"' in section       # the full path on hover
    assert {k: rows[0][k] for k in ("breaks", "cost", "share", "calls", "extra graphs")} == {
        "breaks": "1", "cost": "30.0 ms", "share": "50% of smooth",
        "calls": str(calls_at(costed, SMOOTH_LINE)), "extra graphs": "7"}
    assert (rows[1]["breaks"], rows[1]["cost"], rows[1]["share"]) == ("2", "2.0 ms", "25% of noisy")


def test_a_site_not_timed_comes_after_the_timed_ones_and_says_so(recording, tmp_path):
    db = tmp_path / "half.db"
    shutil.copyfile(recording, db)
    set_costs(db, {SMOOTH_LINE: (3, 9 * MS, 3 * MS, 1), NOISY_LINE: (0, 0, 0, 0)})
    title, rows = site_section(run("report", db).stdout)
    assert "by cost" in title
    assert [r[2].rsplit(":", 1)[1] for r in rows] == [str(SMOOTH_LINE), str(NOISY_LINE)]
    assert rows[0][4:6] == ["3.0 ms", "33% of smooth"]
    assert rows[1][3:] == ["2", "not timed", "-", str(calls_at(db, NOISY_LINE)), "-"]


def test_several_files_sum_each_sites_cost_and_keep_the_share(costed, tmp_path):
    other = tmp_path / "other.db"
    shutil.copyfile(costed, other)
    p = run("report", costed, other)
    assert p.returncode == 0, p.stderr
    _, rows = site_section(p.stdout)
    assert rows[0][2:6] == [f"bcpkg/smooth.py:{SMOOTH_LINE}", "2", "60.0 ms", "50% of smooth"]
    assert rows[1][3:6] == ["4", "4.0 ms", "25% of noisy"]


def test_a_redacted_report_keeps_the_costs(costed, tmp_path):
    p = run("report", "--redact", costed)
    assert p.returncode == 0, p.stderr
    _, rows = site_section(p.stdout)
    assert rows[0][4:6] == ["30.0 ms", "50% of smooth"]
    p = run("report", "--redact", "--html", tmp_path / "site", costed)
    assert p.returncode == 0, p.stderr
    assert html_site_rows(tmp_path / "site")[1][0]["cost"] == "30.0 ms"


def downgrade_to_v5(src, dst):
    """A copy of a recorded file as schema v5 wrote it: no costs, no break_costs."""
    shutil.copyfile(src, dst)
    con = sqlite3.connect(dst)
    con.execute("DROP VIEW break_costs")
    for table in ("cache_entries", "entry_stats"):
        for col in ("cost_samples", "run_ns", "break_ns", "break_graphs"):
            con.execute(f"ALTER TABLE {table} DROP COLUMN {col}")
    con.execute("PRAGMA user_version = 5")
    con.commit()
    con.close()


@pytest.mark.parametrize("case", ["v5 file", "no call timed"])
def test_a_file_without_costs_lists_the_most_frequent_site_first_and_says_so_once(
        recording, tmp_path, case):
    db = tmp_path / "plain.db"
    if case == "v5 file":
        downgrade_to_v5(recording, db)
    else:
        shutil.copyfile(recording, db)
        set_costs(db, {})
    before = db.read_bytes()
    p = run("report", db)
    assert p.returncode == 0, p.stderr
    assert db.read_bytes() == before                  # TEMP views: the file is not written
    title, rows = site_section(p.stdout)
    why = "the file predates schema v6" if case == "v5 file" else "no call through a break was timed"
    assert title == f"Top graph-break sites, most frequent first (costs not measured: {why})"
    assert p.stdout.count("not measured") == 1
    assert [r[3] for r in rows] == ["2", "1"] and all(len(r) == 4 for r in rows)
    assert rows[0][2].endswith(f"prog.py:{NOISY_LINE}")
    p = run("report", "--html", tmp_path / "site", db)
    assert p.returncode == 0, p.stderr
    section, html_rows = html_site_rows(tmp_path / "site")
    assert f"Costs were not measured: {why}." in section and section.count("not measured") == 1
    assert [r["breaks"] for r in html_rows] == ["2", "1"] and "cost" not in html_rows[0]
