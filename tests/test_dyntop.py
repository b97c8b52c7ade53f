"""dyntop, the TUI over a dynscope database (tui/, docs/dyntop.md), driven for
real: a workload with known functions is recorded with `python -m dynscope run`,
then build/dyntop runs in a tmux pane (a private tmux server per test) and the
screen is read back with capture-pane; batch mode (-b) is compared with SQL
queries on the same file.

Captures here are static (dynamic=False): these tests count the recompiles
a new shape or value makes; automatic dynamic is tests/test_dynamic.py's.
"""
from __future__ import annotations

import os
import re
import shutil
import sqlite3
import subprocess
import sys
import sysconfig
import textwrap
import time
import uuid

import pytest

import _programs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DYNTOP = os.environ.get("DYNTOP_BIN", os.path.join(ROOT, "build", "dyntop"))  # DYNTOP_BIN: e.g. an ASan build
PY = sys.executable

pytestmark = [
    pytest.mark.skipif(not os.access(DYNTOP, os.X_OK), reason="build/dyntop is not built (make)"),
]
needs_tmux = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

WORKLOAD = textwrap.dedent('''\
    import numpy as np
    import dynscope


    @dynscope.optimize("eager", dynamic=False)
    def steady_fn(x):                  # one entry, many hits
        return x * 2.0 + 1.0


    @dynscope.optimize("eager", dynamic=False)
    def shapes_fn(x):                  # a new shape each round: recompiles
        return (x * 3.0).sum()


    @dynscope.optimize("eager", dynamic=False)
    def chatty_fn(x):                  # print: a graph break
        y = x + 1.0
        print("chatty", y.shape)
        return y * 2.0


    @dynscope.optimize("eager", dynamic=False)
    def branchy_fn(x):                 # a branch on a tensor value: a graph break
        y = x * 2.0
        if y.sum() > 0:
            return y - 1.0
        return y + 1.0


    @dynscope.optimize("eager", dynamic=False)
    def limited_fn(x, k):              # a new constant each call: hits the cache limit
        return x * k


    def main():
        a = np.ones(4)
        for _ in range(50):
            steady_fn(a)
        for n in (2, 3, 4, 5):
            for _ in range(3):
                shapes_fn(np.ones(n))
        for _ in range(3):
            chatty_fn(a)
            branchy_fn(a)
        for k in range(12):
            limited_fn(a, k)


    main()
    ''')

LIVE = textwrap.dedent('''\
    import time
    import numpy as np
    import dynscope

    dynscope.config.cache_size_limit = 1000


    @dynscope.optimize("eager", dynamic=False)
    def live_fn(x):                    # a new shape every call: recompiles all along
        return x * 2.0


    for i in range(int(__import__("sys").argv[1])):
        live_fn(np.ones(2 + i))
        time.sleep(0.1)
    ''')

FUNCTIONS = ["steady_fn", "shapes_fn", "chatty_fn", "branchy_fn", "limited_fn"]

# tests/data/nearest_entry.py's normalize(x, mode), captured on its own: the
# third call differs from the first entry only in mode, from the second (the
# most recently used) in mode and dtype, so its nearest entry is the first.
NEAREST = textwrap.dedent('''\
    import numpy as np
    import dynscope
    from nearest_entry import normalize

    norm = dynscope.optimize("eager", dynamic=False)(normalize)
    x = np.arange(5.0)
    norm(x, "mean")
    norm(x.astype(np.float32), "mean")
    norm(x, "max")
    ''')


def record(tmp, script_text, name="workload.py", db="w.db", args=()):
    """Write the script into tmp and record it; returns the database path."""
    script = os.path.join(tmp, name)
    with open(script, "w") as fh:
        fh.write(script_text)
    path = os.path.join(tmp, db)
    subprocess.run([PY, "-m", "dynscope", "run", "--db", path, name, *args], cwd=tmp,
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   env=dict(os.environ, PYTHONPATH=ROOT))
    return path


@pytest.fixture(scope="module")
def workload_db(tmp_path_factory):
    return record(str(tmp_path_factory.mktemp("dyntop")), WORKLOAD)


@pytest.fixture(scope="module")
def nearest_db(tmp_path_factory):
    tmp = str(tmp_path_factory.mktemp("nearest"))
    shutil.copy(os.path.join(ROOT, "tests", "data", "nearest_entry.py"), tmp)
    return record(tmp, NEAREST, name="run_nearest.py", db="n.db")


# Graph breaks of every class of the break registry (event/break_types.h):
# a print in the user's function (DS0001, your code), a branch on a tensor
# value (DS0003, fundamental), tests/data/many_breaks.py's breaks inside an
# installed package (library code) and at an engine limit, and a frame run
# without capture (a break inside a try block: DS0014, engine limit).
BREAKS = textwrap.dedent('''\
    import numpy as np
    import dynscope
    import many_breaks                 # calls into dynscope_corpus_lib, installed


    @dynscope.optimize("eager", dynamic=False)
    def chatty_fn(x):                  # a print: your code
        y = x + 1.0
        print("chatty", y.shape)
        return y * 2.0


    @dynscope.optimize("eager", dynamic=False)
    def branchy_fn(x):                 # a branch on a tensor value: fundamental
        y = x * 2.0
        if y.sum() > 0:
            return y - 1.0
        return y + 1.0


    @dynscope.optimize("eager", dynamic=False)
    def guarded_fn(x):                 # a break inside a try block: the frame is skipped
        try:
            print("guarded")
        except ValueError:
            pass
        return x * 2.0


    def main():
        a = np.ones(4)
        for _ in range(3):
            chatty_fn(a)
            branchy_fn(a)
            guarded_fn(a)
        dynscope.optimize("eager", dynamic=False)(many_breaks.f)(np.arange(5.0))


    main()
    ''')


@pytest.fixture(scope="module")
def breaks_db(tmp_path_factory):
    """BREAKS recorded with tests/data/corpus_lib's package in the venv's
    site-packages (as tests/test_breaks_registry.py's corpus_lib fixture puts
    it), so the breaks inside it are breaks in installed code.  The package
    is there only while recording: dyntop reads the recorded stacks."""
    tmp = str(tmp_path_factory.mktemp("breaks"))
    shutil.copy(os.path.join(ROOT, "tests", "data", "many_breaks.py"), tmp)
    dest = os.path.join(sysconfig.get_paths()["purelib"], "dynscope_corpus_lib")
    ours = not os.path.exists(dest)
    if ours:
        shutil.copytree(os.path.join(ROOT, "tests", "data", "corpus_lib", "dynscope_corpus_lib"),
                        dest)
    try:
        path = record(tmp, BREAKS, name="breaks.py", db="b.db")
    finally:
        if ours:
            shutil.rmtree(dest, ignore_errors=True)
    clear_costs(path)
    return path


def clear_costs(db):
    """Forget what the recorder's sampler timed (it times a call now and
    then, at random): the break sites have no cost, so they come most first,
    as the tests of types and classes expect.  Costs: the tests of COSTS."""
    con = sqlite3.connect(db)
    con.execute("UPDATE cache_entries SET cost_samples = 0, run_ns = 0, break_ns = 0,"
                " break_graphs = 0")
    con.commit()
    con.close()


def nearest_facts(db):
    """The third compile of normalize's resume frame, its most recently used
    entry (tried first) and its nearest one, from SQL."""
    (compile_id, compile_row, capture_ns), = sql(
        db, "SELECT compile_id, compile_row, duration_ns FROM compiles"
        " WHERE frame_compile_id = 2")
    newest = sql(db, "SELECT entry_compile_id FROM guard_failures WHERE compile_row = ?"
                 " ORDER BY failure_id LIMIT 1", compile_row)[0][0]
    nearest = sql(db, "SELECT DISTINCT entry_compile_id, failing, capture_ns FROM recompile_diffs"
                  " WHERE compile_row = ?", compile_row)
    assert len(nearest) == 1, nearest
    return dict(compile_id=compile_id, newest=newest, nearest=nearest[0][0],
                failing=nearest[0][1], capture_ns=nearest[0][2], duration_ns=capture_ns)


def fmt_ms(ns):
    """tui/fmt.c fmt_ms: milliseconds as dyntop prints them."""
    ms = ns / 1e6
    return f"{ms:.2f}" if ms < 10 else f"{ms:.1f}" if ms < 1000 else f"{ms:.0f}"


# The cost cells of a break site (tui/fmt.c fmt_break_cost): its time and
# share of its functions' time ("12.30 ms   41%"), or "-" when unknown.
COST = r"(?:-|[\d.]+ (?:ns|us|ms|s)\s+(?:\d+%|-))"


def drop_costs(con):
    """What schema v6 added: the costs of cache_entries and entry_stats, and
    the view break_costs (it names graph_breaks' v4 columns)."""
    con.execute("DROP VIEW break_costs")
    for table in ("cache_entries", "entry_stats"):
        for column in ("cost_samples", "run_ns", "break_ns", "break_graphs"):
            con.execute(f"ALTER TABLE {table} DROP COLUMN {column}")


def downgrade_to_v5(src, dst):
    """A copy of a recorded file as schema v5 wrote it: no costs (v6)."""
    shutil.copy(src, dst)
    con = sqlite3.connect(dst)
    drop_costs(con)
    con.execute("PRAGMA user_version = 5")
    con.commit()
    con.close()


def downgrade_to_v3(src, dst):
    """A copy of a recorded file as schema v3 wrote it: v4 added the guard
    provenance columns, recompile_diffs, who recorded a run, and the break
    registry's type and class; v5 compiles.hatches, the phases and call_path;
    v6 the costs."""
    shutil.copy(src, dst)
    con = sqlite3.connect(dst)
    drop_costs(con)
    con.execute("DROP TABLE recompile_diffs")
    for table, column in (("guards", "filename"), ("guards", "lineno"), ("guards", "user_stack"),
                          ("guard_failures", "filename"), ("guard_failures", "lineno"),
                          ("graph_breaks", "break_type"), ("graph_breaks", "break_class"),
                          ("frame_skips", "break_type"), ("frame_skips", "break_class"),
                          ("runs", "hostname"), ("runs", "rank"), ("runs", "local_rank"),
                          ("runs", "world_size"),
                          *(("compiles", c) for c in ("hatches", "trace_ns", "guards_ns", "graph_ns",
                                                      "backend_ns", "plan_ns", "events_ns",
                                                      "attempts", "call_path"))):
        con.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
    con.execute("PRAGMA user_version = 3")
    con.commit()
    con.close()


def sql(db, query, *args):
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return con.execute(query, args).fetchall()
    finally:
        con.close()


def expected_rows(db):
    """What the table must say for each function, straight from SQL (newest run)."""
    rows = sql(db, """
        WITH r AS (SELECT run_id, resets FROM runs ORDER BY run_id DESC LIMIT 1)
        SELECT co.name,
          (SELECT count(*) FROM compiles c WHERE c.run_id = co.run_id AND c.code_id = co.code_id),
          (SELECT count(*) FROM compiles c WHERE c.run_id = co.run_id AND c.code_id = co.code_id
             AND c.frame_compile_id > 0),
          (SELECT count(*) FROM graphs g WHERE g.run_id = co.run_id AND g.code_id = co.code_id),
          (SELECT count(*) FROM graph_breaks b WHERE b.run_id = co.run_id AND b.code_id = co.code_id),
          (SELECT count(*) FROM cache_limits l WHERE l.run_id = co.run_id AND l.code_id = co.code_id),
          (SELECT coalesce(sum(hits), 0) FROM cache_entries e WHERE e.run_id = co.run_id
             AND e.code_id = co.code_id AND e.epoch = r.resets),
          (SELECT coalesce(max(n), 0) FROM (SELECT count(*) AS n FROM cache_entries e
             WHERE e.run_id = co.run_id AND e.code_id = co.code_id AND e.epoch = r.resets
             GROUP BY e.frame_id)),
          (SELECT coalesce(sum(duration_ns), 0) FROM compiles c WHERE c.run_id = co.run_id
             AND c.code_id = co.code_id),
          (SELECT g.expr || ' (observed ' || coalesce(g.observed, '?') || ')' FROM guard_failures g
             WHERE g.run_id = co.run_id AND g.code_id = co.code_id ORDER BY g.failure_id DESC LIMIT 1)
        FROM code_objects co JOIN r USING (run_id)""")
    # The database does not record the cache size limit: dyntop assumes 8
    # unless a frame holds more entries than that ("?": unknown).
    limit = 8 if all(r[7] <= 8 for r in rows) else None
    out = {}
    for name, compiles, recompiles, graphs, breaks, limits, hits, fullest, cap_ns, last in rows:
        out[name] = dict(entries=f"{fullest}/{limit or '?'}", hits=hits, misses=compiles + limits,
                         recompiles=recompiles, graphs=graphs, breaks=breaks,
                         capture_ms=cap_ns / 1e6, last=last or "",
                         at_limit=bool(limits) or (limit is not None and fullest >= limit))
    return out


ROW = re.compile(r"^\s*([LR]{0,2}|-)\s+(\S+)\s+(\S+:\d+)\s+(\d+/[\d?]+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)"
                 r"\s+(\d+)\s+([\d.]+)(?:\s+(.*?))?\s*$")


def parse_rows(text):
    """Table rows (screen or batch text) as dicts, in order."""
    rows = []
    for line in text.splitlines():
        m = ROW.match(line)
        if m is None or m.group(2) == "FUNCTION":
            continue
        flags, name, where, entries, hits, misses, recomp, graphs, breaks, cap, last = m.groups()
        rows.append(dict(flags=flags.strip("-"), name=name, where=where, entries=entries,
                         hits=int(hits), misses=int(misses), recompiles=int(recomp),
                         graphs=int(graphs), breaks=int(breaks), capture_ms=float(cap),
                         last=last or ""))
    return rows


def names(text):
    return [r["name"] for r in parse_rows(text)]


def assert_rows_match_sql(rows, db, check_last=True):
    want = expected_rows(db)
    assert sorted(r["name"] for r in rows) == sorted(want), rows
    for r in rows:
        w = want[r["name"]]
        for key in ("entries", "hits", "misses", "recompiles", "graphs", "breaks"):
            assert r[key] == w[key], (r["name"], key, r[key], w[key])
        assert abs(r["capture_ms"] - w["capture_ms"]) <= max(0.011, w["capture_ms"] * 0.01), r
        assert ("L" in r["flags"]) == w["at_limit"], r
        if check_last:
            assert r["last"] == w["last"], (r["name"], r["last"], w["last"])


class Pane:
    """One dyntop in a tmux pane, on a tmux server of its own."""

    def __init__(self, command, width=120, height=40, cwd=ROOT):
        self.socket = f"dyntop-test-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        # The pane stays after dyntop exits, showing its exit status.
        # (ncurses would take COLUMNS/LINES from the environment over the pane's size)
        shell = (f"env -u COLUMNS -u LINES LANG=C.UTF-8 LC_ALL=C.UTF-8 {command};"
                 f" echo DYNTOP-EXIT=$?; sleep 600")
        self.tmux("new-session", "-d", "-x", str(width), "-y", str(height), "-c", cwd, shell)

    def tmux(self, *args, check=True):
        # tmux, its pane's shell and dyntop run without the sanitizer of `make asan`
        return _programs.run(["tmux", "-L", self.socket, "-f", "/dev/null", *args], check=check,
                             capture_output=True, text=True).stdout

    def send(self, *keys):
        self.tmux("send-keys", *keys)

    def type(self, text):
        self.tmux("send-keys", "-l", text)

    def screen(self):
        return self.tmux("capture-pane", "-p")

    def resize(self, width, height):
        self.tmux("resize-window", "-x", str(width), "-y", str(height))

    def wait(self, pred, timeout=30.0, what=""):
        """Poll the screen until pred(screen) is true; returns the screen."""
        if isinstance(pred, str):
            text, pred = pred, (lambda s, text=pred: text in s)
            what = what or repr(text)
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            screen = self.screen()
            if pred(screen):
                # dyntop may be mid-draw (a title before its rows): return the
                # screen once two captures 100 ms apart agree
                settle = time.monotonic() + 2.0
                while time.monotonic() < settle:
                    time.sleep(0.1)
                    again = self.screen()
                    if again == screen:
                        break
                    screen = again
                if pred(screen):
                    return screen
            time.sleep(0.05)
        raise AssertionError(f"timed out waiting for {what or pred}; screen:\n{screen}")

    def kill(self):
        self.tmux("kill-server", check=False)


@pytest.fixture
def pane():
    panes = []

    def start(*args, width=120, height=40, cwd=ROOT):
        p = Pane(" ".join([DYNTOP, *args]), width, height, cwd)
        panes.append(p)
        return p

    yield start
    for p in panes:
        p.kill()


def table_shown(screen):
    return "FUNCTION" in screen and "RECOMP" in screen and len(parse_rows(screen)) > 0


# ---------------------------------------------------------------------------
# The interactive screen.

@needs_tmux
def test_the_table_shows_every_function_of_the_workload_with_the_counts_sql_gives(pane, workload_db):
    p = pane(workload_db)
    screen = p.wait(lambda s: len(parse_rows(s)) == len(FUNCTIONS), what="five rows")
    assert_rows_match_sql(parse_rows(screen), workload_db, check_last=False)
    assert "ended" in screen.splitlines()[0]
    totals = sql(workload_db, "SELECT count(*), (SELECT count(*) FROM guard_failures),"
                 " (SELECT count(*) FROM graph_breaks) FROM code_objects")[0]
    assert f"Code objects {totals[0]}" in screen
    assert f"Guard failures {totals[1]}" in screen
    assert f"Graph breaks {totals[2]}" in screen


@needs_tmux
def test_the_function_at_its_cache_limit_is_flagged(pane, workload_db):
    p = pane(workload_db)
    screen = p.wait(table_shown)
    row = next(r for r in parse_rows(screen) if r["name"] == "limited_fn")
    assert "L" in row["flags"] and row["entries"] == "8/8"
    assert "At cache limit 1" in screen


@needs_tmux
def test_sort_keys_R_B_H_T_order_the_rows_and_pressing_again_inverts(pane, workload_db):
    want = expected_rows(workload_db)

    def order(key, reverse):
        return [n for n, _ in sorted(sorted(want.items()), key=lambda kv: kv[1][key], reverse=reverse)]

    p = pane(workload_db)
    p.wait(table_shown)
    for key, col in (("H", "hits"), ("B", "breaks"), ("T", "capture_ms"), ("R", "recompiles")):
        p.send(key)
        screen = p.wait(lambda s, col=col: names(s) == order(col, True) or False,
                        what=f"rows sorted by {col}")
        assert names(screen) == order(col, True)
    p.send("R")     # already sorted by recompiles: inverts
    expected = [n for n, _ in sorted(sorted(want.items()), key=lambda kv: kv[1]["recompiles"])]
    p.wait(lambda s: names(s) == expected, what="ascending recompiles")
    p.send("I")
    p.wait(lambda s: names(s)[0] == "limited_fn", what="descending again")


@needs_tmux
def test_sort_menu_picks_a_column(pane, workload_db):
    p = pane(workload_db)
    p.wait(table_shown)
    p.send("F6")
    p.wait("Sort by")
    for _ in range(5):   # the menu opens on the sort column, RECOMP; five up is FUNCTION
        p.send("Up")
    p.send("Enter")
    screen = p.wait(lambda s: "Sort by" not in s and names(s) == sorted(FUNCTIONS),
                    what="rows sorted by name")
    assert "FUNCTION▲" in screen


@needs_tmux
def test_slash_filters_by_name_as_you_type_and_escape_clears(pane, workload_db):
    p = pane(workload_db)
    p.wait(table_shown)
    p.send("/")
    p.type("sha")
    screen = p.wait(lambda s: names(s) == ["shapes_fn"], what="only shapes_fn")
    assert "Filter: sha" in screen
    p.send("Enter")
    screen = p.wait(lambda s: "Filter:" not in s and names(s) == ["shapes_fn"])
    assert "1 of 5 shown" in screen
    p.send("Escape")
    p.wait(lambda s: len(names(s)) == 5, what="all rows again")
    p.send("/")
    p.type("workload.py:1")   # the file too: shapes_fn (10) and chatty_fn (15)
    p.wait(lambda s: sorted(names(s)) == ["chatty_fn", "shapes_fn"], what="a filter on the file")


@needs_tmux
def test_detail_view_shows_entries_guards_failures_and_the_cache_limit(pane, workload_db):
    p = pane(workload_db, height=80)
    p.wait(table_shown)
    # sorted by recompiles (the default): limited_fn has the most, first row
    p.wait(lambda s: names(s)[:1] == ["limited_fn"])
    p.send("Enter")
    screen = p.wait("Cache entries in lookup order")
    assert "limited_fn" in screen and "workload.py:30" in screen
    assert "8 entries  (at the cache limit)" in screen
    assert re.search(r"EQUALS_MATCH\s+L\['k'\] == \d", screen)
    assert "TENSOR_MATCH" in screen
    assert "Guards that fail most" in screen
    # the most failing guard is the first entry's, k == 0, once per later compile
    worst = sql(workload_db, "SELECT expr, count(*) AS n FROM guard_failures g JOIN code_objects c"
                " USING (run_id, code_id) WHERE c.name = 'limited_fn' GROUP BY expr"
                " ORDER BY n DESC LIMIT 1")[0]
    assert re.search(rf"{worst[1]} x\s+EQUALS_MATCH\s+{re.escape(worst[0])}", screen), screen
    p.send("End")
    screen = p.wait("Cache limit reached")
    assert "observed 8" in screen
    p.send("Escape")
    p.wait(table_shown)


@needs_tmux
def test_detail_view_shows_graph_breaks_with_the_source_line(pane, workload_db):
    p = pane(workload_db, height=60)
    p.wait(table_shown)
    p.send("/")
    p.type("branchy")
    p.wait(lambda s: names(s) == ["branchy_fn"])
    p.send("Enter")      # keeps the filter
    p.send("Enter")      # opens the detail
    screen = p.wait("Graph breaks by site")
    assert "data_dependent_branch" in screen
    # the break's type and class in the registry, and its hint
    assert re.search(rf"1 x\s+{COST}\s+data_dependent_branch\s+branch on a tensor value .*"
                     r"\[DS0003 fundamental\]$", screen, re.M), screen
    assert "hint: Select with np.where / torch.where or a mask" in screen
    assert re.search(r"\d+ \| if y\.sum\(\) > 0:", screen), screen


@needs_tmux
def test_detail_reads_the_source_line_from_the_file(pane, workload_db, tmp_path):
    # A copy of the recording whose script changed afterwards: the detail
    # shows the file as it is now, not the text recorded with the break.
    shutil.copy(workload_db, tmp_path / "w.db")
    src = WORKLOAD.replace("    print(\"chatty\", y.shape)",
                           "    print(\"chatty\", y.shape)  # edited after recording")
    (tmp_path / "workload.py").write_text(src)
    p = pane(str(tmp_path / "w.db"), "--filter", "chatty", height=50, cwd=str(tmp_path))
    p.wait(lambda s: names(s) == ["chatty_fn"])
    p.send("Enter")
    screen = p.wait("Graph breaks by site")
    assert "call to builtin print" in screen
    assert "# edited after recording" in screen


def break_facts(db):
    """What the break view must say, from SQL: the sites of graph breaks
    (type, class, where, count, file, line), the skips by type and function,
    and the count of each class."""
    sites = sql(db, "SELECT break_type, break_class, filename, lineno, count(*) FROM graph_breaks"
                " GROUP BY kind, reason, filename, lineno")
    skips = sql(db, "SELECT s.break_type, s.break_class, co.name, count(*) FROM frame_skips s"
                " JOIN code_objects co USING (run_id, code_id)"
                " GROUP BY s.break_type, s.break_class, s.reason, co.filename, co.firstlineno")
    per_class = dict(sql(db, "SELECT break_class, count(*) FROM graph_breaks GROUP BY 1"))
    return sites, skips, per_class


def class_counts(per_class):
    return ", ".join(f"{per_class.get(c, 0)} {c}"
                     for c in ("your code", "library code", "engine limit", "fundamental"))


def site_row(t, cls, filename, lineno, n):
    """A row of the break view: count, cost ("-": breaks_db's are cleared),
    id and name, class, file:line (cut at its start when long)."""
    return re.compile(rf"^\s+{n}\s+-\s+{t} \S+\s+{cls}\s+"
                      rf"\S*{re.escape(os.path.basename(filename))}"
                      rf":{lineno}\s", re.M)


def note(screen):
    """The selected row's note: the lines under the rule at the bottom."""
    lines = screen.splitlines()
    rules = [i for i, l in enumerate(lines) if l.startswith("\u2500\u2500\u2500")]
    return "\n".join(lines[rules[-1] + 1:]) if rules else ""


@needs_tmux
def test_break_view_groups_breaks_by_registry_type_class_and_site(pane, breaks_db):
    sites, skips, per_class = break_facts(breaks_db)
    # the workload is what this test is about: every class, a skip
    assert {c for _, c, *_ in sites} == {"your code", "library code", "engine limit", "fundamental"}
    assert ("DS0001", "your code") in {(t, c) for t, c, *_ in sites}
    assert ("DS0003", "fundamental") in {(t, c) for t, c, *_ in sites}
    assert [(t, c, name) for t, c, name, _ in skips] == [("DS0014", "engine limit", "guarded_fn")]
    total = sum(n for *_, n in sites)
    p = pane(breaks_db, width=200, height=40)
    p.wait(table_shown)

    def all_shown(screen):
        # the title can be drawn before the rows: wait for every row
        return (f"Graph breaks by type and site: {total} breaks at {len(sites)} sites: "
                f"{class_counts(per_class)}" in screen
                and all(site_row(t, c, f, line, n).search(screen) for t, c, f, line, n in sites)
                and "Frames run without capture by type: 1 skip: 0 your code, 0 library code, "
                    "1 engine limit, 0 fundamental" in screen
                and re.search(r"^\s+1\s+-\s+DS0014 try-block\s+engine limit\s+breaks\.py:\d+\s+"
                              r"guarded_fn\s+code inside a try/with block", screen, re.M))

    p.send("b")
    screen = p.wait(all_shown)
    # the print and the branch of the user's functions, with their classes and counts
    assert re.search(r"^\s+1\s+-\s+DS0001 print\s+your code\s+breaks\.py:9\s+chatty_fn\s+"
                     r"call to builtin print", screen, re.M), screen
    assert re.search(r"^\s+1\s+-\s+DS0003 data-dependent-branch\s+fundamental\s+breaks\.py:16\s+"
                     r"branchy_fn\s+branch on a tensor value", screen, re.M), screen
    # most first; the selected row's note under the list
    rows = [l for l in screen.splitlines() if re.match(r"^\s+\d+\s+-\s+DS\d{4} ", l)]
    assert [int(l.split()[0]) for l in rows[:len(sites)]] == sorted(
        (n for *_, n in sites), reverse=True)

    def select(i, what):
        p.send("Home", *["Down"] * i)
        return p.wait(lambda s: what in note(s), what=f"the note of row {i}: {what!r}")

    # the print inside the installed package: the user's line that called it
    lib = next(i for i, l in enumerate(rows)
               if re.match(r"^\s+\d+\s+-\s+DS0001 print\s+library code\s+\S*__init__\.py:8\s", l))
    first = note(select(lib, "hint: Collect the values and print them after the captured call"))
    assert "installed code, which you cannot edit: capture around the call from your code" in first
    assert re.search(r"called from your code at \S*many_breaks\.py:20 in step\n\s+20 \| "
                     r"y = lib\.normalize\(x\)", first), first
    # the classes in colours of their own: library code and engine limit
    # apart from your code
    colored = p.tmux("capture-pane", "-p", "-e").splitlines()

    def style_before(word):
        line = next(l for l in colored if re.search(r"DS\d{4} \S+\s*(?:\x1b\[[\d;]*m)+" + word, l))
        return re.search(r"DS\d{4} \S+\s*((?:\x1b\[[\d;]*m)+)" + word, line).group(1)

    yours = style_before("your code")
    assert style_before("library code") != yours and style_before("engine limit") != yours
    # select the branch: its hint and the user's line
    branch = next(i for i, l in enumerate(rows) if "DS0003" in l)
    screen = select(branch, "hint: Select with np.where")
    assert re.search(r"at \S*breaks\.py:16 in branchy_fn\n\s+16 \| if y\.sum\(\) > 0:",
                     note(screen)), note(screen)
    assert "installed code" not in note(screen)
    # Enter opens the detail of the function that broke there
    p.send("Enter")
    screen = p.wait("Cache entries in lookup order")
    assert "branchy_fn" in screen.splitlines()[4]
    p.send("Escape")
    p.wait("Graph breaks by type and site")
    # the skip: its hint and the function's def line
    p.send("End")
    screen = p.wait(lambda s: "hint: Move the try/except out of the captured function" in note(s),
                    what="the skip's note")
    assert re.search(r"function \S*breaks\.py:22 in guarded_fn\n\s+22 \| def guarded_fn\(x\):",
                     note(screen)), note(screen)
    assert "query failed" not in screen


@needs_tmux
def test_break_view_of_a_v3_file_groups_by_site_as_before(pane, breaks_db, tmp_path):
    old = str(tmp_path / "v3.db")
    downgrade_to_v3(breaks_db, old)
    sites = sql(old, "SELECT kind, filename, lineno, count(*) FROM graph_breaks"
                " GROUP BY kind, reason, filename, lineno")
    p = pane(old, width=160)
    p.wait(table_shown)
    p.send("b")
    screen = p.wait(lambda s: f"Graph break reasons by site: {len(sites)} sites" in s
                    and all(re.search(rf"^\s+{n}\s+-\s+{kind}\s+\S*{re.escape(os.path.basename(f))}"
                                      rf":{line}\s", s, re.M) for kind, f, line, n in sites),
                    what="every site by kind")
    assert "data_dependent_branch" in screen
    # most first, without costs (schema v6): every cost "-"
    counts = [int(m.group(1)) for m in re.finditer(r"^\s+(\d+)\s+-\s+\w+\s", screen, re.M)]
    assert counts == sorted((n for *_, n in sites), reverse=True), screen
    assert "costliest" not in screen
    assert "DS0" not in screen and "your code" not in screen and "hint:" not in screen
    assert "Frames run without capture" not in screen and "\u2500\u2500\u2500" not in screen
    assert "query failed" not in screen
    p.send("Enter")      # Enter opens the detail as before: no types there either
    screen = p.wait("Cache entries in lookup order")
    assert "query failed" not in screen and "[DS0" not in screen


@needs_tmux
def test_break_view_sums_the_sites_of_several_files(pane, breaks_db, tmp_path):
    # three files, one of them older than v4: the sites and skips are added
    # up, and the old file's breaks count under the types the newer ones
    # give their sites (it has no skips by type)
    files = [str(tmp_path / f"{n}.db") for n in ("a", "b", "old")]
    shutil.copy(breaks_db, files[0])
    shutil.copy(breaks_db, files[1])
    downgrade_to_v3(breaks_db, files[2])
    sites, _skips, per_class = break_facts(breaks_db)
    total = 3 * sum(n for *_, n in sites)
    p = pane(*files, width=200)
    p.wait(lambda s: len(rank_rows(s)) > 0, what="the rows of the files")
    p.send("b")
    tripled = {c: 3 * n for c, n in per_class.items()}
    screen = p.wait(lambda s: f"{total} breaks at {len(sites)} sites: {class_counts(tripled)}" in s
                    and all(site_row(t, c, f, line, 3 * n).search(s) for t, c, f, line, n in sites),
                    what="every site, three times the breaks")
    assert ("Frames run without capture by type: 2 skips: 0 your code, 0 library code, "
            "2 engine limit, 0 fundamental") in screen
    assert re.search(r"^\s+2\s+-\s+DS0014 try-block\s+engine limit\s+breaks\.py:\d+\s+guarded_fn\s",
                     screen, re.M), screen
    assert "query failed" not in screen and "cannot read" not in screen


# Two functions that break at a print: often_fn compiles (and breaks) once
# per shape, three times; rare_fn once.  costs_db gives rare_fn's break, the
# less frequent, the larger cost.
COSTS = textwrap.dedent('''\
    import numpy as np
    import dynscope


    @dynscope.optimize("eager", dynamic=False)
    def often_fn(x):                   # a new shape each call: a break per compile
        y = x + 1.0
        print("often", y.shape)
        return y * 2.0


    @dynscope.optimize("eager", dynamic=False)
    def rare_fn(x):                    # one compile, one break
        y = x * 3.0
        print("rare", y.shape)
        return y - 1.0


    for n in (2, 3, 4):
        often_fn(np.ones(n))
    rare_fn(np.ones(4))
    ''')


def set_break_costs(con, function, hits, samples, run_ns, break_ns, break_graphs):
    """Give the entries of `function` whose plans end at a break (those of
    its graph_breaks rows) these counters, as the recorder writes them
    (scaled to every call: docs/sql.md cache_entries)."""
    con.execute("UPDATE cache_entries SET hits = ?, cost_samples = ?, run_ns = ?, break_ns = ?,"
                " break_graphs = ? WHERE (run_id, code_id, epoch, compile_id) IN"
                " (SELECT b.run_id, b.code_id, b.epoch, b.compile_id FROM graph_breaks AS b"
                "  JOIN code_objects AS co USING (run_id, code_id) WHERE co.name = ?)",
                (hits, samples, run_ns, break_ns, break_graphs, function))


@pytest.fixture(scope="module")
def costs_db(tmp_path_factory):
    """COSTS recorded, its costs then set: often_fn's three breaks 0.5 ms
    each of 5 ms calls (1.50 ms, 10% of 15 ms), rare_fn's one 12.3 ms of
    30 ms (41%).  Whatever the sampler timed is cleared first."""
    path = record(str(tmp_path_factory.mktemp("costs")), COSTS, name="costs.py", db="c.db")
    assert sql(path, "SELECT co.name, count(*) FROM graph_breaks JOIN code_objects AS co"
                     " USING (run_id, code_id) GROUP BY 1 ORDER BY 1") == [("often_fn", 3),
                                                                        ("rare_fn", 1)]
    clear_costs(path)
    con = sqlite3.connect(path)
    set_break_costs(con, "often_fn", 20, 2, 5_000_000, 500_000, 1)
    set_break_costs(con, "rare_fn", 10, 4, 30_000_000, 12_300_000, 4)
    con.commit()
    con.close()
    return path


def break_rows(screen):
    """The rows of the break view's list (count, cost, type...)."""
    return [l for l in screen.splitlines() if re.match(rf"^\s+\d+\s+{COST}\s+DS\d{{4}} ", l)]


@needs_tmux
def test_break_view_lists_the_costliest_site_first_with_its_cost_and_share(pane, costs_db):
    p = pane(costs_db, width=160)
    p.wait(table_shown)
    p.send("b")
    screen = p.wait(lambda s: len(break_rows(s)) == 2, what="the two sites")
    assert "Graph breaks by type and site, costliest first: 4 breaks at 2 sites" in screen
    rows = break_rows(screen)
    # the site with fewer breaks but the larger cost first: its cost and its
    # share of rare_fn's time; then the more frequent one
    assert re.match(r"^\s+1\s+12\.30 ms\s+41%\s+DS0001 print\s+your code\s+costs\.py:15\s+"
                    r"rare_fn\s", rows[0]), rows
    assert re.match(r"^\s+3\s+1\.50 ms\s+10%\s+DS0001 print\s+your code\s+costs\.py:8\s+"
                    r"often_fn\s", rows[1]), rows
    # the selected row's note says what the cost is made of
    assert ("cost: 12.30 ms outside graphs (eager steps, resumes), 41% of its functions' time; "
            "4 more graph launches; from 4 timed calls") in note(screen), note(screen)
    # the detail of rare_fn: the same cost on its break site
    p.send("Enter")
    screen = p.wait("Graph breaks by site, costliest first")
    assert re.search(r"^\s+1 x\s+12\.30 ms\s+41%\s+call\s+call to builtin print\s+"
                     r"\[DS0001 your code\]$", screen, re.M), screen
    assert ("cost: 12.30 ms outside graphs (eager steps, resumes), 41% of the function's time; "
            "4 more graph launches; from 4 timed calls") in screen
    # a narrow terminal cuts the rows at the right edge: the count and cost stay
    p.send("Escape")
    p.wait("costliest first: 4 breaks")
    p.resize(60, 30)
    screen = p.wait(lambda s: re.search(r"^\s+1\s+12\.30 ms\s+41%\s+DS0001 print", s, re.M)
                    and re.search(r"^\s+3\s+1\.50 ms\s+10%\s+DS0001 print", s, re.M),
                    what="the rows, cut at 60 columns")
    assert all(len(l) <= 60 for l in screen.splitlines())
    assert "query failed" not in screen


@needs_tmux
def test_break_view_of_a_file_without_costs_shows_dashes_most_first(pane, costs_db, tmp_path):
    # the same recording as schema v5 wrote it: no costs, so the order by
    # count, and "-" in the cost column
    old = str(tmp_path / "v5.db")
    downgrade_to_v5(costs_db, old)
    p = pane(old, width=160, height=100)     # room for the detail down to its breaks
    p.wait(table_shown)
    p.send("b")
    screen = p.wait(lambda s: len(break_rows(s)) == 2, what="the two sites")
    assert "Graph breaks by type and site: 4 breaks at 2 sites" in screen
    rows = break_rows(screen)
    assert re.match(r"^\s+3\s+-\s+DS0001 print\s+your code\s+costs\.py:8\s+often_fn\s", rows[0])
    assert re.match(r"^\s+1\s+-\s+DS0001 print\s+your code\s+costs\.py:15\s+rare_fn\s", rows[1])
    assert "cost:" not in screen and "costliest" not in screen
    p.send("Enter")
    screen = p.wait("Graph breaks by site")
    assert re.search(r"^\s+3 x\s+-\s+call\s+call to builtin print", screen, re.M), screen
    assert "cost:" not in screen and "query failed" not in screen


@needs_tmux
def test_recompile_log_lists_recompiles_newest_first_with_the_failing_guard(pane, workload_db):
    p = pane(workload_db)
    p.wait(table_shown)
    p.send("r")
    screen = p.wait("Recompile log")
    n = sql(workload_db, "SELECT count(*) FROM compiles WHERE frame_compile_id > 0")[0][0]
    assert f"{n} recompiles" in screen
    lines = [l for l in screen.splitlines() if re.match(r"\s+\+[\d.]+ (ms|s)\s", l)]
    assert len(lines) == n
    newest = sql(workload_db, "SELECT co.name, c.compile_id FROM compiles c JOIN code_objects co"
                 " USING (run_id, code_id) WHERE frame_compile_id > 0 ORDER BY compile_row DESC"
                 " LIMIT 1")[0]
    assert newest[0] in lines[0] and f"[{newest[1]}]" in lines[0]
    assert "observed" in lines[0]


@needs_tmux
def test_detail_view_shows_where_each_guard_came_from_and_each_recompiles_nearest_entry(
        pane, nearest_db):
    f = nearest_facts(nearest_db)
    # the workload is what this test is about: the nearest entry is not the
    # one tried first, and it fails on mode alone
    assert f["nearest"] != f["newest"] and f["failing"] == 1, f
    assert f["capture_ns"] == f["duration_ns"]
    p = pane(nearest_db, height=100)
    p.wait(lambda s: names(s) == ["normalize"])
    p.send("Enter")
    screen = p.wait(lambda s: "Recompiles newest first" in s and "return x - x.mean()" in s,
                    what="the whole detail")
    assert "query failed" not in screen
    lines = screen.splitlines()
    # each guard of an entry with the user line whose access made it, flush right
    guards = [l for l in lines if re.match(r"\s+EQUALS_MATCH\s+L\['mode'\] == 'mean'\s", l)]
    assert guards and all(l.endswith("  nearest_entry.py:9") for l in guards), guards
    assert any(re.match(r"\s+EQUALS_MATCH\s+L\['mode'\] == 'max'\s+nearest_entry\.py:9$", l)
               for l in lines)
    assert any(re.match(r"\s+DICT_LACKS\s+'print' not in G\s+nearest_entry\.py:8$", l)
               for l in lines)
    # the engine's own guard has no source
    assert any(re.match(r"\s+BACKEND_MATCH\s+backend is eager$", l) for l in lines)
    # the guards that fail most, with their source
    assert any(re.match(r"\s+2 x\s+EQUALS_MATCH\s+L\['mode'\] == 'mean'\s+\(last observed "
                        r"'max'\)\s+nearest_entry\.py:9$", l) for l in lines), screen
    # the recompile: every entry tried with the guard that failed and its
    # source, then the nearest entry and its failing guard, value and line
    at = next(i for i, l in enumerate(lines) if l.startswith(f"  [{f['compile_id']}]"))
    block = lines[at:at + 7]
    assert re.match(rf"\s+entry \[{re.escape(f['newest'])}\] failed EQUALS_MATCH\s+"
                    r"L\['mode'\] == 'mean'\s+observed 'max'\s+nearest_entry\.py:9$",
                    block[1]), block
    assert re.match(rf"\s+entry \[{re.escape(f['nearest'])}\] failed EQUALS_MATCH", block[2]), block
    assert block[3].strip() == (f"nearest entry [{f['nearest']}]: 1 guard fails, "
                                f"capture {fmt_ms(f['capture_ns'])} ms"), block
    assert re.match(r"\s+EQUALS_MATCH\s+L\['mode'\] == 'mean'\s+observed 'max'\s+"
                    r"nearest_entry\.py:9$", block[4]), block
    assert re.match(r"\s+9 \| if mode == \"mean\":$", block[5]), block
    # the dtype recompile before it: its nearest entry fails on the dtype, line 10
    assert re.search(r"nearest entry \[\S+\]: 1 guard fails", "\n".join(lines[at + 6:]))
    assert re.search(r"TENSOR_MATCH\s+L\['x'\]\.dtype == float64\s+observed float32\s+"
                     r"nearest_entry\.py:10\n\s+10 \| return x - x\.mean\(\)", screen), screen


@needs_tmux
def test_detail_view_fits_80_columns_with_the_sources_flush_right(pane, nearest_db):
    f = nearest_facts(nearest_db)
    p = pane(nearest_db, width=80, height=120)
    p.wait(lambda s: "RECOMP" in s and "normalize" in s)   # no FILE:LINE column at 80
    p.send("Enter")
    screen = p.wait(lambda s: "return x - x.mean()" in s, what="the whole detail")
    lines = screen.splitlines()
    assert all(len(l) <= 80 for l in lines)
    assert f"nearest entry [{f['nearest']}]: 1 guard fails" in screen
    # a source that does not fit beside its line goes below it, flush right
    sources = [l for l in lines if l.rstrip().endswith(("nearest_entry.py:9", "nearest_entry.py:10"))]
    assert len(sources) >= 8 and all(len(l) == 80 for l in sources), sources


@needs_tmux
def test_recompile_log_shows_the_nearest_entry_where_there_is_room(pane, nearest_db):
    f = nearest_facts(nearest_db)
    p = pane(nearest_db, width=150)
    p.wait(table_shown)
    p.send("r")
    screen = p.wait(lambda s: "Recompile log" in s and f"[{f['compile_id']}]" in s)
    line = next(l for l in screen.splitlines() if f"[{f['compile_id']}]" in l)
    assert re.search(r"EQUALS_MATCH L\['mode'\] == 'mean'  observed 'max'  \+1 more\s+"
                     rf"nearest \[{re.escape(f['nearest'])}\] 1 failing  nearest_entry\.py:9$",
                     line), line
    # narrower: the failing guard and its value keep the room, the nearest
    # entry is left out
    for width in (120, 80):
        p.resize(width, 40)
        screen = p.wait(lambda s: "Recompile log" in s and "nearest [" not in s)
        line = next(l for l in screen.splitlines() if f"[{f['compile_id']}]" in l)
        assert "EQUALS_MATCH L['mode'] == 'mean'" in line and len(line) <= width


@needs_tmux
def test_a_v3_file_opens_in_the_detail_view_and_the_recompile_log(pane, nearest_db, tmp_path):
    db = str(tmp_path / "v3.db")
    downgrade_to_v3(nearest_db, db)
    f = nearest_facts(nearest_db)
    p = pane(db, height=100)
    p.wait(lambda s: names(s) == ["normalize"])
    p.send("Enter")
    screen = p.wait(lambda s: "Recompiles newest first" in s and "observed float32" in s,
                    what="the whole detail")
    assert "query failed" not in screen and "cannot read" not in screen
    # the guards and failures as before v4: no sources, no nearest entry
    assert "nearest_entry.py:9" not in screen and "nearest entry" not in screen
    assert re.search(r"^\s+EQUALS_MATCH\s+L\['mode'\] == 'mean'$", screen, re.M), screen
    assert re.search(rf"entry \[{re.escape(f['newest'])}\] failed EQUALS_MATCH\s+"
                     r"L\['mode'\] == 'mean'\s+observed 'max'$", screen, re.M), screen
    p.send("r")
    screen = p.wait(lambda s: "Recompile log" in s and f"[{f['compile_id']}]" in s)
    assert "query failed" not in screen and "nearest [" not in screen
    assert "observed 'max'" in screen


@pytest.fixture(scope="module")
def hatches_db(tmp_path_factory):
    tmp = str(tmp_path_factory.mktemp("hatches"))
    with open(os.path.join(ROOT, "tests", "data", "escape_hatches.py")) as fh:
        return record(tmp, fh.read(), name="escape_hatches.py", db="h.db")


def open_detail(pane, db, name):
    """A pane on db with the detail view of function `name` open: (pane, screen)."""
    p = pane(db, height=60)
    p.wait(lambda s: name in names(s))
    p.send("/")
    p.type(name)
    p.wait(lambda s: names(s) == [name])
    p.send("Enter", "Enter")          # keeps the filter, opens the detail
    return p, p.wait("Cache entries in lookup order")


@needs_tmux
def test_detail_view_names_what_an_escape_hatch_kept_in(pane, hatches_db, tmp_path):
    (hatches,) = sql(hatches_db, "SELECT hatches FROM compiles WHERE hatches IS NOT NULL")
    assert hatches == ("dynscope.allow_in_graph: scale is one graph node",)
    p, screen = open_detail(pane, hatches_db, "kept_in")
    # under the entry, its compile's time by phase (as SQL has it), then the
    # mark and what it kept in, then its guards
    ns = sql(hatches_db, "SELECT duration_ns, trace_ns, guards_ns, graph_ns, backend_ns, plan_ns,"
                         " attempts FROM compiles WHERE hatches IS NOT NULL")[0]
    pct = [round(100 * v / ns[0]) for v in ns[1:6]]
    m = re.search(r"^\s+\[0/0\]\s+hits 2 .*\n\s+compile \S+ \S+: trace (\d+)%, guards (\d+)%, graph (\d+)%, "
                  r"backend (\d+)%, plan (\d+)%; events \S+ \S+; 1 attempt\n"
                  r"\s+kept in by dynscope\.allow_in_graph: scale is one graph node$", screen, re.M)
    assert m, screen
    assert [int(v) for v in m.groups()] == pct and ns[6] == 1
    p.kill()
    # a file from before schema v5 has no compiles.hatches: the same view, without the line
    old = str(tmp_path / "v4.db")
    shutil.copy(hatches_db, old)
    con = sqlite3.connect(old)
    con.execute("ALTER TABLE compiles DROP COLUMN hatches")
    con.execute("PRAGMA user_version = 4")
    con.commit()
    con.close()
    p, screen = open_detail(pane, old, "kept_in")
    assert "query failed" not in screen and "kept in by" not in screen
    assert re.search(r"^\s+\[0/0\]\s+hits 2 ", screen, re.M), screen


@needs_tmux
def test_detail_view_draws_the_call_paths_that_compiled_the_function(pane, tmp_path):
    with open(os.path.join(ROOT, "tests", "data", "call_paths.py")) as fh:
        text = fh.read()
    db = record(str(tmp_path), text, name="call_paths.py", db="p.db")
    lines = text.splitlines()

    def at(fragment):
        return next(i for i, line in enumerate(lines, 1) if fragment in line)
    p = pane(db, height=100)
    p.wait(lambda s: names(s) == ["leaf"])
    p.send("Enter")
    screen = p.wait("Call paths that compiled it")
    section = screen.split("Call paths that compiled it")[1].split("\n\n")[0].splitlines()[1:]
    got = [tuple(re.split(r"\s{2,}", ln.strip(), maxsplit=1)) for ln in section]
    entry = next(i for i, line in enumerate(lines, 1) if line == "main()")
    assert got == [
        ("4", f"<module> (call_paths.py:{entry})"),
        ("3", f"· main (call_paths.py:{at('step(3)')})"),
        ("3", f"· · step (call_paths.py:{at('middle(np.ones(3 + k), k)')})"),
        ("3", f"· · · middle (call_paths.py:{at('return leaf(x * k)')})"),
        ("3", f"· · · · leaf (call_paths.py:{at('@dynscope.optimize')}) -> compiled [0/0] [0/1] [0/2]"),
        ("1", f"· main (call_paths.py:{at('middle(np.ones(2), 1)')})"),
        ("1", f"· · middle (call_paths.py:{at('return leaf(x * k)')})"),
        ("1", f"· · · leaf (call_paths.py:{at('@dynscope.optimize')}) -> compiled [0/3]"),
    ], screen


@needs_tmux
def test_help_lists_every_key_and_the_manual_documents_them(pane, workload_db):
    p = pane(workload_db, height=80)
    p.wait(table_shown)
    p.send("?")
    screen = p.wait("dyntop help")
    keys = re.findall(r"^  (\S.*?)\s{2,}\S", screen.split("Keys", 1)[1].split("Columns", 1)[0],
                      re.M)
    keys = [k for k in keys if not k.startswith(("while", "in the"))]
    assert len(keys) >= 20
    for must in ("q", "R", "B", "H", "T", "F", "b", "r", "p Z", "? h F1", "F6 > <", "/ \\ F4", "Enter"):
        assert must in keys, (must, keys)
    with open(os.path.join(ROOT, "docs", "dyntop.md")) as fh:
        manual = fh.read()
    for k in keys:
        for key in k.split():
            assert f"`{key}`" in manual, f"key {key!r} is on the help screen but not in docs/dyntop.md"
    p.send("Escape")
    p.wait(table_shown)


@needs_tmux
def test_resize_to_a_tiny_terminal_says_so_and_back_shows_the_table(pane, workload_db):
    p = pane(workload_db)
    p.wait(table_shown)
    p.resize(40, 10)
    screen = p.wait("terminal too small")
    assert "(40x10, need 60x12)" in screen
    assert "FUNCTION" not in screen
    p.resize(120, 40)
    p.wait(table_shown)
    p.resize(60, 12)     # the smallest size that works: fewer columns
    screen = p.wait(lambda s: "limited_fn" in s and "too small" not in s)
    assert "FUNCTION" in screen and "RECOMP" in screen and "LAST FAILING GUARD" not in screen
    assert all(len(line) <= 60 for line in screen.splitlines())


@needs_tmux
def test_q_quits_with_status_0(pane, workload_db):
    p = pane(workload_db)
    p.wait(table_shown)
    p.send("q")
    p.wait("DYNTOP-EXIT=0")


@needs_tmux
def test_pause_freezes_and_says_so(pane, workload_db):
    p = pane(workload_db)
    p.wait(table_shown)
    p.send("p")
    p.wait("PAUSED")
    p.send("p")
    p.wait(lambda s: "PAUSED" not in s and "every 1.0 s" in s)


@needs_tmux
def test_follow_keeps_the_selection_on_its_function_when_the_order_changes(pane, workload_db):
    p = pane(workload_db)
    p.wait(table_shown)
    p.send("H")          # steady_fn first
    p.wait(lambda s: names(s)[:1] == ["steady_fn"])
    p.send("F")
    p.wait("following steady_fn")
    p.send("I")          # steady_fn moves to the bottom; the selection follows
    p.wait(lambda s: names(s)[-1:] == ["steady_fn"])
    p.send("Enter")
    screen = p.wait("Cache entries in lookup order")
    assert "steady_fn" in screen.splitlines()[4]


@needs_tmux
def test_live_mode_shows_counts_growing_while_the_recording_runs(pane, tmp_path):
    script = tmp_path / "live.py"
    script.write_text(LIVE)
    db = str(tmp_path / "live.db")
    proc = subprocess.Popen([PY, "-m", "dynscope", "run", "--db", db, "live.py", "40"],
                            cwd=str(tmp_path), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=dict(os.environ, PYTHONPATH=ROOT))
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:   # until the file has a run
            try:
                if sql(db, "SELECT count(*) FROM code_objects")[0][0] > 0:
                    break
            except sqlite3.Error:
                pass
            time.sleep(0.05)
        p = pane("-d", "0.2", db)

        def recompiles(s):
            rows = [r for r in parse_rows(s) if r["name"] == "live_fn"]
            return rows[0]["recompiles"] if rows else -1

        first = recompiles(p.wait(lambda s: recompiles(s) >= 0, what="live_fn"))
        screen = p.wait(lambda s: recompiles(s) >= first + 3, what="recompiles growing")
        assert "live" in screen.splitlines()[0]
        assert "/s)" in screen                 # rates while live
        mid = recompiles(screen)
        p.wait(lambda s: recompiles(s) > mid, what="still growing")
        assert proc.wait(timeout=120) == 0
        screen = p.wait(lambda s: "ended" in s.splitlines()[0], what="the run ended")
        screen = p.wait(lambda s: recompiles(s) == 39, what="the final count")
        assert_rows_match_sql(parse_rows(screen), db, check_last=False)
        # 40 entries in one frame: the run's limit was not 8, so it shows as
        # unknown, unless given
        row = next(r for r in parse_rows(screen) if r["name"] == "live_fn")
        assert row["entries"] == "40/?" and "L" not in row["flags"]
        rows = parse_rows(batch("--cache-limit", "1000", db).stdout)
        assert rows[0]["entries"] == "40/1000"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@needs_tmux
def test_a_database_removed_while_shown_is_reported_in_the_header(pane, workload_db, tmp_path):
    db = str(tmp_path / "gone.db")
    shutil.copy(workload_db, db)
    p = pane("-d", "0.2", db)
    p.wait(table_shown)
    os.unlink(db)
    screen = p.wait("database file removed")
    assert table_shown(screen)
    p.send("q")
    p.wait("DYNTOP-EXIT=0")


# ---------------------------------------------------------------------------
# Batch mode.

def batch(*args, check=True):
    return _programs.run([DYNTOP, "-b", *args], capture_output=True, text=True, check=check)


def test_batch_output_equals_what_sql_says(workload_db):
    out = batch("-n", "1", workload_db).stdout
    rows = parse_rows(out)
    assert_rows_match_sql(rows, workload_db)
    t = sql(workload_db, "SELECT (SELECT count(*) FROM code_objects), (SELECT count(*) FROM compiles),"
            " (SELECT count(*) FROM compiles WHERE frame_compile_id > 0),"
            " (SELECT count(*) FROM graphs), (SELECT count(*) FROM graph_breaks),"
            " (SELECT count(*) FROM guard_failures), (SELECT count(*) FROM cache_entries),"
            " (SELECT sum(hits) FROM cache_entries), (SELECT sum(dropped_events) FROM runs)")[0]
    head = out.split("\n\n", 1)[0]
    for label, v in zip(["Code objects", "Compiles", "Recompiles", "Graphs", "Graph breaks",
                         "Guard failures", "Cache entries", "Hits", "Dropped events"], t):
        assert re.search(rf"\b{label} {v}\b", head), (label, v, head)
    # the default order: most recompiles first, ties by name
    want = expected_rows(workload_db)
    assert [r["name"] for r in rows] == [n for n, _ in sorted(sorted(want.items()),
                                         key=lambda kv: -kv[1]["recompiles"])]


def test_batch_sort_filter_and_limit_apply(workload_db):
    rows = parse_rows(batch("--sort", "hits", "--limit", "2", workload_db).stdout)
    want = expected_rows(workload_db)
    by_hits = [n for n, _ in sorted(sorted(want.items()), key=lambda kv: -kv[1]["hits"])]
    assert [r["name"] for r in rows] == by_hits[:2]
    rows = parse_rows(batch("--sort", "+name", workload_db).stdout)
    assert [r["name"] for r in rows] == sorted(FUNCTIONS)
    rows = parse_rows(batch("--filter", "CHATTY", workload_db).stdout)
    assert [r["name"] for r in rows] == ["chatty_fn"]
    out = batch("--filter", "no-such-function", workload_db).stdout
    assert parse_rows(out) == [] and "FUNCTION" in out


def test_batch_repeats_n_times(workload_db):
    out = batch("-n", "3", "-d", "0.05", workload_db).stdout
    assert out.count("FUNCTION") == 3
    assert out.count("dyntop ") == 3


def test_batch_width_fits_every_line(workload_db):
    out = batch("-w", "80", workload_db).stdout
    table = out.split("\n\n", 1)[1]
    assert all(len(line) <= 80 for line in table.splitlines())
    assert "LAST FAILING GUARD" not in table and "RECOMP" in table


def test_a_v3_file_opens_in_batch_mode(nearest_db, tmp_path):
    db = str(tmp_path / "v3.db")
    downgrade_to_v3(nearest_db, db)
    r = batch(db)
    assert r.stderr == ""
    rows = parse_rows(r.stdout)
    assert [row["name"] for row in rows] == ["normalize"]
    assert rows[0]["recompiles"] == 2 and rows[0]["last"] == "L['mode'] == 'mean' (observed 'max')"
    assert parse_rows(batch(nearest_db).stdout) == rows   # v4 adds nothing the table shows


def test_python_m_dynscope_top_runs_dyntop(workload_db):
    direct = batch("-n", "1", workload_db).stdout
    via = subprocess.run([PY, "-m", "dynscope", "top", "-b", "-n", "1", workload_db], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    strip = lambda s: re.sub(r"started \S+", "", s)   # noqa: E731
    assert strip(via) == strip(direct)


# ---------------------------------------------------------------------------
# Files dyntop cannot show: a message on stderr and exit status 2, before curses.

@pytest.mark.parametrize("interactive", [False, True])
def test_a_missing_file_is_exit_2_with_a_message(tmp_path, interactive):
    path = str(tmp_path / "nope.db")
    r = _programs.run([DYNTOP, path] if interactive else [DYNTOP, "-b", path],
                      capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert r.returncode == 2
    assert "nope.db" in r.stderr and "No such file" in r.stderr
    assert r.stdout == ""
    assert not os.path.exists(path)


def test_a_file_that_is_not_sqlite_is_exit_2(tmp_path):
    path = tmp_path / "text.db"
    path.write_text("hello, I am not a database\n" * 100)
    r = batch(str(path), check=False)
    assert r.returncode == 2
    assert "not an SQLite database" in r.stderr


def test_an_sqlite_file_that_is_not_dynscope_is_exit_2(tmp_path):
    path = str(tmp_path / "other.db")
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE songs (title TEXT)")
    con.commit()
    con.close()
    r = batch(path, check=False)
    assert r.returncode == 2
    assert "not a dynscope" in r.stderr


def test_a_newer_schema_is_exit_2(tmp_path, workload_db):
    path = str(tmp_path / "newer.db")
    shutil.copy(workload_db, path)
    con = sqlite3.connect(path)
    con.execute("PRAGMA user_version = 99")
    con.commit()
    con.close()
    r = batch(path, check=False)
    assert r.returncode == 2
    assert "newer" in r.stderr


def test_a_corrupt_database_is_exit_2(tmp_path, workload_db):
    path = tmp_path / "corrupt.db"
    data = bytearray(open(workload_db, "rb").read())
    assert len(data) > 8192
    data[4096:] = b"\xff" * (len(data) - 4096)        # every page after the first
    path.write_bytes(bytes(data))
    r = batch(str(path), check=False)
    assert r.returncode == 2
    assert r.stderr.startswith("dyntop: ") and "Traceback" not in r.stderr


def test_usage_errors_are_exit_2(workload_db):
    for args in ([], ["--sort", "nonsense", workload_db], ["-d", "0", workload_db],
                 [workload_db, workload_db]):
        r = _programs.run([DYNTOP, *args], capture_output=True, text=True)
        assert r.returncode == 2, args
        assert r.stderr.startswith("dyntop: "), args


def test_python_m_dynscope_top_passes_the_exit_status(tmp_path):
    r = subprocess.run([PY, "-m", "dynscope", "top", "-b", str(tmp_path / "missing.db")], cwd=ROOT,
                       capture_output=True, text=True)
    assert r.returncode == 2
    assert "missing.db" in r.stderr


# ---------------------------------------------------------------------------
# Several files: a job's ranks, a file each (scripts/demo_ranks.py: 4 ranks
# of the demo workload, rank 2 fed float64 once), and the divergence between
# their runs, which must be dynscope/ranks.py's to the letter.

RANK_ROW = re.compile(r"^\s*([LR]{0,2}|-)\s+(rank \d+|pid \S+)\s+(\S+)\s+(\S+:\d+)\s+(\d+/[\d?]+)"
                      r"\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+([\d.]+)(?:\s+(.*?))?\s*$")


def rank_rows(text):
    """Rows of the table with its RANK column, as dicts."""
    rows = []
    for line in text.splitlines():
        m = RANK_ROW.match(line)
        if m is None:
            continue
        _, rank, name, where, entries, hits, misses, recomp = m.groups()[:8]
        rows.append(dict(rank=rank, name=name, where=where, entries=entries, hits=int(hits),
                         misses=int(misses), recompiles=int(recomp)))
    return rows


def python_divergence(paths):
    """What `python -m dynscope report FILE...` says diverges: the files
    merged, dynscope/ranks.py's rule."""
    from dynscope import merge, ranks
    with merge.Merged(paths) as path:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return ranks.divergence(con)
        finally:
            con.close()


def odd_lines(divergences):
    """(function, odd run, "compiles A vs B") for each odd run, as dyntop words them."""
    out = []
    for d in divergences:
        norm = next(r for label, r in d["runs"].items() if label not in d["odd"])
        for label in d["odd"]:
            odd = d["runs"][label]
            out.append((d["function"], label, f"compiles {odd['compiles']} vs {norm['compiles']}"))
    return out


@pytest.fixture(scope="module")
def rank_dbs(tmp_path_factory):
    """The 4 ranks' files; the processes run in parallel, as in a job."""
    out = str(tmp_path_factory.mktemp("ranks"))
    subprocess.run([PY, os.path.join(ROOT, "scripts", "demo_ranks.py"), out], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   env=dict(os.environ, PYTHONPATH=ROOT))
    return [os.path.join(out, f"rank{r}.db") for r in range(4)]


def test_batch_on_the_ranks_files_shows_each_rank_and_the_odd_one(rank_dbs):
    out = batch("-n", "1", *rank_dbs).stdout
    head, rest = out.split("\n\n", 1)
    assert "4 files" in head.splitlines()[0] and "4 runs (ranks 0-3)" in head.splitlines()[0]
    table, section = rest.split("\n\n", 1)
    rows = rank_rows(table)
    assert {r["rank"] for r in rows} == {f"rank {i}" for i in range(4)}
    # each rank's row says what that rank's file says
    for i, db in enumerate(rank_dbs):
        want = expected_rows(db)
        mine = {r["name"]: r for r in rows if r["rank"] == f"rank {i}"}
        assert sorted(mine) == sorted(want)
        for name, r in mine.items():
            for key in ("entries", "hits", "misses", "recompiles"):
                assert r[key] == want[name][key], (i, name, key)
    # the totals are over every file
    compiles = sum(sql(db, "SELECT count(*) FROM compiles")[0][0] for db in rank_dbs)
    assert re.search(rf"\bCompiles {compiles}\b", head) and "Code objects 20" in head
    # the divergence: forward (and loss) on rank 2, as ranks.py says
    expected = odd_lines(python_divergence(rank_dbs))
    assert ("forward", "rank 2") in [(f, label) for f, label, _ in expected]
    lines = section.splitlines()
    assert lines[0] == f"Divergence between 4 runs: {len(expected)} of 5 functions differ", lines
    assert re.match(r"FUNCTION\s+FILE:LINE\s+ODD RUN\s+AGREE\s+DIFFERS$", lines[1])
    got = []
    for line in lines[2:]:
        m = re.match(r"(\S+)\s+\S+:\d+\s+(rank \d+)\s+(\d+ of \d+)\s+(.*)$", line)
        assert m, line
        got.append((m.group(1), m.group(2), m.group(4)))
        assert m.group(3) == "3 of 4"
    assert [(f, label) for f, label, _ in got] == [(f, label) for f, label, _ in expected]
    for (_, _, want), (_, _, differs) in zip(expected, got):
        assert differs.startswith(want) and "failing guards +" in differs, differs


def test_one_file_shows_no_rank_column_and_no_divergence_section(rank_dbs):
    out = batch("-n", "1", rank_dbs[2]).stdout
    assert "RANK" not in out and "Divergence" not in out and "rank 2" not in out
    first = out.splitlines()[0]
    assert parse_rows(out) and first.startswith("dyntop  ") and "rank2.db  run 1 pid" in first


def test_two_files_whose_runs_agree_show_no_divergence(rank_dbs):
    assert python_divergence(rank_dbs[:2]) == []
    out = batch("-n", "1", "--sort", "rank", *rank_dbs[:2]).stdout
    assert out.rstrip().endswith("Divergence between 2 runs: none (the 5 functions two or more"
                                 " of them reached compiled and broke alike)")
    rows = rank_rows(out)
    assert [r["rank"] for r in rows] == ["rank 0"] * 5 + ["rank 1"] * 5   # --sort rank
    out = batch("-n", "1", "--filter", "rank 1", *rank_dbs[:2]).stdout
    assert {r["rank"] for r in rank_rows(out)} == {"rank 1"}


def test_the_divergence_section_fits_the_width(rank_dbs):
    out = batch("-n", "1", "-w", "100", *rank_dbs).stdout.split("\n\n", 1)[1]
    assert all(len(line) <= 100 for line in out.splitlines())   # (the header is not fitted)
    assert re.search(r"^forward\s+demo_workload\.py:27\s+rank 2\s+3 of 4\s+compiles", out, re.M)


@pytest.mark.parametrize("interactive", [False, True])
def test_a_bad_file_among_good_ones_is_exit_2_naming_it(rank_dbs, tmp_path, interactive):
    missing = str(tmp_path / "rank9.db")
    text = tmp_path / "notes.db"
    text.write_text("not a database\n" * 100)
    for bad, says in ((missing, "No such file"), (str(text), "not an SQLite database")):
        args = [rank_dbs[0], bad, rank_dbs[1]]
        r = _programs.run([DYNTOP, *args] if interactive else [DYNTOP, "-b", *args],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL)
        assert r.returncode == 2, r
        assert r.stdout == ""
        assert r.stderr.count("\n") == 1 and r.stderr.startswith("dyntop: "), r.stderr
        assert bad in r.stderr and says in r.stderr, r.stderr
    r = batch(rank_dbs[0], rank_dbs[1], rank_dbs[0], check=False)
    assert r.returncode == 2 and "same file" in r.stderr


@needs_tmux
def test_the_divergence_view_shows_the_odd_rank_highlighted(pane, rank_dbs):
    expected = odd_lines(python_divergence(rank_dbs))
    p = pane(*rank_dbs, width=140)
    screen = p.wait(lambda s: len(rank_rows(s)) == 20, what="20 rows")
    assert {r["rank"] for r in rank_rows(screen)} == {f"rank {i}" for i in range(4)}
    assert "RANK" in screen and "vDivergence" in screen
    p.send("v")
    screen = p.wait("Divergence between 4 runs")
    lines = screen.splitlines()
    i = next(n for n, line in enumerate(lines) if line.startswith(" forward "))
    assert "3 of 4 runs agree" in lines[i]
    assert re.search(r"3 agree\s+compiles 6, .*:\s+rank 0, rank 1, rank 3", lines[i + 1])
    # the odd run: marked, and in its own colour
    assert re.match(r"\s+odd\s+rank 2\s+" + re.escape(expected[0][2]), lines[i + 2]), lines[i + 2]
    assert "+ failing guard" in lines[i + 3]
    colored = p.tmux("capture-pane", "-p", "-e").splitlines()
    odd = next(line for line in colored if "odd" in line and "rank 2" in line)
    agree = next(line for line in colored if "3 agree" in line)
    assert "\x1b[" in odd.split("odd")[0] and odd.split("odd")[0] != agree.split("3 agree")[0]
    assert [(f, lbl) for f, lbl, _ in expected] == [
        (m.group(1), m.group(2)) for m in re.finditer(
            r"^ (\S+)  \S+.*\n(?:.*\n)*?\s+odd\s+(rank \d+)", screen, re.M)]
    # Enter on the odd line: that rank's function
    p.send("Down", "Down", "Enter")
    screen = p.wait("Cache entries in lookup order")
    assert re.search(r"forward .*\(rank 2, run 1, code \d+\)", screen)


@needs_tmux
def test_the_divergence_view_with_one_run_says_so(pane, rank_dbs):
    p = pane(rank_dbs[0])
    p.wait(table_shown)
    p.send("v")
    p.wait("only one run (rank 0): nothing to compare")


@needs_tmux
def test_ranks_shown_live_while_their_files_grow(pane, tmp_path):
    """Two ranks record live, each its own file; rank 1 stops early, so it
    ends up the odd run (a tie of one run each: rank 0's side is the norm)."""
    script = tmp_path / "live.py"
    script.write_text(LIVE)
    procs = []
    try:
        for rank, steps in ((0, 30), (1, 20)):
            env = dict(os.environ, PYTHONPATH=ROOT, RANK=str(rank), WORLD_SIZE="2")
            procs.append(subprocess.Popen(
                [PY, "-m", "dynscope", "run", "--db", str(tmp_path / f"rank{rank}.db"), "live.py",
                 str(steps)], cwd=str(tmp_path), env=env,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        dbs = [str(tmp_path / f"rank{r}.db") for r in (0, 1)]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:     # until both files have a code object
            try:
                if all(sql(db, "SELECT count(*) FROM code_objects")[0][0] for db in dbs):
                    break
            except sqlite3.Error:
                pass
            time.sleep(0.05)
        p = pane("-d", "0.2", *dbs)

        def recompiles(s, rank):
            rows = [r for r in rank_rows(s) if r["rank"] == f"rank {rank}"]
            return rows[0]["recompiles"] if rows else -1

        first = p.wait(lambda s: recompiles(s, 0) >= 0 and recompiles(s, 1) >= 0, what="2 ranks")
        assert "live" in first.splitlines()[0]
        p.wait(lambda s: recompiles(s, 0) >= recompiles(first, 0) + 3
               and recompiles(s, 1) >= recompiles(first, 1) + 3, what="both growing")
        p.send("v")
        for proc in procs:
            assert proc.wait(timeout=120) == 0
        # (a compile's rows are on disk as it ends, the run's end when the
        # process closes its recording: the counts can show first)
        screen = p.wait(lambda s: re.search(r"odd\s+rank 1\s+compiles 20 vs 30", s)
                        and "ended" in s.splitlines()[0], what="rank 1 odd once both ended")
        assert "ended" in screen.splitlines()[0]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def test_more_files_than_the_open_limit_are_read_one_at_a_time(tmp_path):
    """80 rank files (more than MODEL_OPEN_MAX, 64) under a limit of 40 open
    files: dyntop opens each only to read it, and the divergence names the odd
    ranks (scripts/fake_ranks.py)."""
    import resource
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    import fake_ranks
    paths = fake_ranks.make(80, str(tmp_path / "ranks"))
    odd = sorted(fake_ranks.divergent_ranks(80, 3))

    def few_files():
        resource.setrlimit(resource.RLIMIT_NOFILE, (40, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    p = _programs.run([DYNTOP, "-b", *paths], capture_output=True, text=True, preexec_fn=few_files)
    assert p.returncode == 0, p.stderr
    assert re.match(r"dyntop  80 files in \S+  80 runs \(ranks 0-79\) on 10 hosts  ended",
                    p.stdout), p.stdout[:300]
    named = sorted({int(m) for m in re.findall(r"^\S+\s+\S+\s+rank (\d+)\s", p.stdout, re.M)
                    if int(m) in odd})
    assert named == odd, p.stdout[-2000:]


@needs_tmux
def test_a_deep_call_path_is_drawn_whole(pane, tmp_path):
    """A compile 40 calls deep: its path's indentation is capped, every frame drawn."""
    text = textwrap.dedent('''\
        import numpy as np
        import dynscope


        @dynscope.optimize("eager", dynamic=False)
        def leaf(x):
            return np.sin(x)


        def down(n, x):
            return leaf(x) if n == 0 else down(n - 1, x)


        down(40, np.ones(3))
    ''')
    db = record(str(tmp_path), text, name="deep.py", db="deep.db")
    p = pane(db, height=120)
    p.wait(lambda s: names(s) == ["leaf"])
    p.send("Enter")
    screen = p.wait(lambda s: "Call paths that compiled it" in s and "-> compiled [0/0]" in s,
                    what="the call path down to the compile")
    section = screen.split("Call paths that compiled it")[1].split("-> compiled")[0]
    assert section.count(" down (deep.py:") == 41, section      # every recursive frame
    assert "· " * 32 + "leaf (deep.py:" in screen.replace("\n", "")    # indentation capped at 32
