"""DYNSCOPE_LOGS names (dynscope/logs.py): each name's lines, compared with
the events the same run recorded in SQL -- compile ids, frames, reasons,
counts -- and the file, `+`, `all` and bad-name handling.

One program drives them (step: a graph break, then recompiles as its
shape, then its number, change; a second function recompiles on every new
value into its cache limit; a third recompiles as often with a hit after
each; a frame kept out by dynscope.disable).
"""
import dis
import io
import os
import re
import sqlite3
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import dynscope
from dynscope import logs

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
pytestmark = pytest.mark.filterwarnings("ignore::dynscope.CacheLimitWarning")


def step(x, n):
    y = np.sin(x) * n
    print("", end="")                 # a graph break: a resume frame
    return y + 1


def counted(x, k):
    return x * k


def alternating(x, k):
    return x + k


def kept_out(x):
    return x * 3


dynscope.disable(kept_out, recursive=False)      # its frame: a frame_skip with the rule


def program():
    g = dynscope.optimize("eager")(step)
    for n in range(6):
        g(np.ones(3 + n), n)
    dynscope.config.cache_size_limit = 4      # 3 recompiles (a perf hint), then the limit
    h = dynscope.optimize("eager", dynamic=False)(counted)
    for k in range(6):
        h(np.ones(2), k)
    dynscope.config.cache_size_limit = 8
    a = dynscope.optimize("eager", dynamic=False)(alternating)
    for k in (0, 0, 1, 1, 2, 2, 3, 3):        # 3 recompiles, each with a hit after it: no hint
        a(np.ones(2), k)
    dynscope.optimize("eager")(kept_out)(np.ones(2))


@pytest.fixture
def run(tmp_path):
    """run(spec) -> (lines written to the log file, sqlite connection) of
    program() logged with spec and recorded, in this process."""
    def go(spec):
        log = tmp_path / f"{spec.replace(',', '_').replace('+', 'v')}.log"
        db = tmp_path / f"{log.stem}.db"
        dynscope.reset()
        dynscope.record(str(db))
        dynscope.set_logs(spec, file=str(log))
        try:
            program()
        finally:
            dynscope.set_logs("")
            dynscope.stop_recording()
        return log.read_text().splitlines(), sqlite3.connect(db)
    return go


def heads(lines, name):
    return [ln for ln in lines if ln.startswith(f"dynscope [{name}] ")]


def rows(con, sql, *args):
    return con.execute(sql, args).fetchall()


def test_graph_breaks_match_the_graph_breaks_table(run):
    lines, con = run("graph_breaks")
    got = [re.match(r"dynscope \[graph_breaks\] Graph break in (\S+) \(.*\) \[(\S+)\]: (.*)  \[(\w+)\]$",
                    ln).groups() for ln in heads(lines, "graph_breaks")]
    want = rows(con, "SELECT o.name, b.compile_id, b.reason, b.kind FROM graph_breaks b "
                     "JOIN code_objects o USING (run_id, code_id) ORDER BY b.break_id")
    assert got == want and len(got) >= 3
    print_line = step.__code__.co_firstlineno + 2
    assert lines[1].strip().endswith(f"test_logs.py:{print_line} in step")   # the innermost frame


def test_recompiles_match_the_recompiles_and_their_newest_failure(run):
    lines, con = run("recompiles")
    got = [re.search(r"Recompiling (\S+) .* \[(\S+)\]$", ln).groups() for ln in heads(lines, "recompiles")]
    want = rows(con, "SELECT name, compile_id FROM recompiles ORDER BY compile_row")
    assert got == want and len(got) >= 4
    failed = [ln.strip() for ln in lines if ln.startswith("    entry [")]
    newest = rows(con, "SELECT entry_compile_id, expr, observed, kind FROM guard_failures f "
                       "WHERE compile_id IS NOT NULL AND failure_id = (SELECT min(failure_id) "
                       "FROM guard_failures g WHERE g.compile_row = f.compile_row) ORDER BY failure_id")
    assert failed == [f"entry [{e}] failed {x} (observed {o})  [{k}]" for e, x, o, k in newest]


@pytest.mark.parametrize("spec", ["recompiles_verbose", "+recompiles"])
def test_recompiles_verbose_lists_every_failing_entry(run, spec):
    lines, con = run(spec)
    failed = [ln.strip() for ln in lines if ln.startswith("    entry [")]
    every = rows(con, "SELECT entry_compile_id, expr, observed, kind FROM guard_failures "
                      "WHERE compile_id IS NOT NULL ORDER BY failure_id")
    assert failed == [f"entry [{e}] failed {x} (observed {o})  [{k}]" for e, x, o, k in every]
    assert len(every) > len(heads(lines, "recompiles"))          # older entries too


def test_guards_count_and_list_each_entrys_guards(run):
    lines, con = run("+guards")
    got = [re.search(r"\[(\S+)\]: (\d+) guards$", ln).groups() for ln in heads(lines, "guards")]
    want = rows(con, "SELECT compile_id, guards FROM compiles WHERE outcome = 'ok' ORDER BY compile_row")
    assert [(c, int(n)) for c, n in got] == want
    listed = [ln.strip() for ln in lines if ln.startswith("    ")]
    texts = rows(con, "SELECT guards_text FROM cache_entries e JOIN compiles c USING (run_id, code_id, "
                      "epoch, compile_id) ORDER BY c.compile_row")
    assert len(listed) == sum(n for _, n in want)
    for (text,) in texts:
        for g in text.splitlines():
            assert g.split("\t")[-1] in listed


def test_graph_tables_hold_the_recorded_graphs_ops(run):
    lines, con = run("graph")
    got = [re.search(r"\[(\S+)\]: (\d+) ops?$", ln).groups() for ln in heads(lines, "graph")]
    want = rows(con, "SELECT compile_id, nodes, ops FROM graphs ORDER BY graph_id")
    assert [(c, int(n)) for c, n in got] == [(c, n) for c, n, _ in want]
    calls = [ln.split()[2] for ln in lines if ln.startswith("    call_function")]
    assert [c.rsplit(".", 1)[-1] for c in calls] == [op for *_, ops in want for op in ops.split(",")]


def test_graph_code_is_the_recorded_code(run):
    lines, con = run("graph_code")
    blocks, cur = [], None
    for ln in lines:
        if ln.startswith("dynscope [graph_code] "):
            cur = []
            blocks.append(cur)
        else:
            cur.append(ln[4:])
    want = rows(con, "SELECT code FROM graphs ORDER BY graph_id")
    assert ["\n".join(b).strip() for b in blocks] == [c.strip() for (c,) in want]


def test_bytecode_shows_the_original_once_and_each_plan(run):
    lines, con = run("bytecode")
    originals = [ln for ln in heads(lines, "bytecode") if ln.endswith("original bytecode")]
    plans = [re.search(r"\[(\S+)\]: replaced by the plan$", ln).group(1)
             for ln in heads(lines, "bytecode") if ln.endswith("replaced by the plan")]
    names = {ln.split()[2] for ln in originals}
    assert names == {"step", "counted", "alternating"}      # once per code object
    assert plans == [c for (c,) in rows(con, "SELECT compile_id FROM compiles WHERE outcome = 'ok' "
                                             "ORDER BY compile_row")]
    out = io.StringIO()
    dis.dis(step, file=out, depth=0)
    first = lines.index(originals[0]) + 1
    assert lines[first:first + 3] == ["    " + ln for ln in out.getvalue().splitlines()[:3]]


def test_dynamic_says_what_became_dynamic_as_the_recorded_reasons(run):
    lines, con = run("dynamic")
    got = [ln.split(": ", 1)[1] for ln in heads(lines, "dynamic")]
    want = [part for (reason,) in rows(con, "SELECT reason FROM recompiles ORDER BY compile_row")
            for part in reason.split("; ")[1:]]
    assert got == want and any("is now dynamic" in g for g in got)


def test_skips_name_the_frame_and_rule(run):
    lines, con = run("skips")
    got = [re.match(r"dynscope \[skips\] Skipping frame (\S+) .*: (.*)  \[(DS\d+)\]$", ln).groups()
           for ln in heads(lines, "skips")]
    want = rows(con, "SELECT o.name, s.reason, s.break_type FROM frame_skips s "
                     "JOIN code_objects o USING (run_id, code_id) ORDER BY s.at")
    assert got == want
    assert got == [("kept_out", "marked dynscope.disable(recursive=False)", "DS0032")]


def test_cache_limit_lines_match_the_cache_limits_table(run):
    lines, con = run("cache_limit")
    got = [re.search(r"\] (\S+) \(.*\) frame (\d+) reached its cache limit \((.*)\); it now", ln).groups()
           for ln in heads(lines, "cache_limit")]
    want = rows(con, "SELECT o.name, c.frame_id, c.reason FROM cache_limits c "
                     "JOIN code_objects o USING (run_id, code_id)")
    assert [(n, int(f), r) for n, f, r in got] == want and len(want) == 1


def test_perf_hints_name_a_frame_that_recompiles_on_every_call(run):
    lines, con = run("perf_hints")
    got = [re.search(r"\] (\S+) \(.*\) frame (\d+) recompiled on each of its last (\d+) calls, "
                     r"with no cache hit between \(now \[(\S+)\]", ln).groups()
           for ln in heads(lines, "perf_hints")]
    # counted misses on every call: its third recompile earns the hint, as SQL numbers it
    (third,) = rows(con, "SELECT name, frame_id, compile_id FROM recompiles WHERE name = 'counted'"
                         " ORDER BY started_at LIMIT 1 OFFSET 2")
    assert got == [("counted", str(third[1]), str(logs.PERF_HINT_RECOMPILES), third[2])], lines
    # alternating recompiled as often, with a hit after each: no hint
    assert rows(con, "SELECT count(*) FROM recompiles WHERE name = 'alternating'") == [(3,)]
    assert rows(con, "SELECT sum(hits) FROM cache_entries e JOIN code_objects o"
                     " USING (run_id, code_id) WHERE o.name = 'alternating'") == [(4,)]


def test_all_is_every_name_and_plus_is_verbose():
    assert set(logs.parse("all")) == set(logs.NAMES) - {"recompiles_verbose"}
    assert not any(logs.parse("all").values())
    assert all(logs.parse("+all").values())
    assert logs.parse("recompiles_verbose") == {"recompiles": True}
    assert logs.parse(" graph , +skips ") == {"graph": False, "skips": True}


def test_an_unknown_name_is_refused_with_the_list():
    with pytest.raises(ValueError) as info:
        dynscope.set_logs("recompiles,graphs")
    msg = str(info.value)
    assert "unknown log 'graphs'" in msg and all(n in msg for n in logs.NAMES)
    p = subprocess.run([sys.executable, "-c", "import dynscope"], capture_output=True, text=True,
                       env=dict(os.environ, DYNSCOPE_LOGS="recompile", PYTHONPATH=REPO), cwd=REPO)
    assert p.returncode == 0
    assert "DYNSCOPE_LOGS='recompile': unknown log 'recompile'; one of graph_breaks" in p.stderr


def test_environment_and_file(tmp_path):
    script = tmp_path / "prog.py"
    script.write_text(textwrap.dedent("""
        import numpy as np, dynscope
        def f(x, n):
            return x * n
        g = dynscope.optimize("eager", dynamic=False)(f)
        g(np.ones(2), 1); g(np.ones(2), 2)
    """))
    log = tmp_path / "out.log"
    env = dict(os.environ, DYNSCOPE_LOGS="recompiles", DYNSCOPE_LOGS_FILE=str(log), PYTHONPATH=REPO)
    p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env)
    assert p.returncode == 0 and p.stderr == ""
    assert log.read_text().splitlines()[:2] == [
        f"dynscope [recompiles] Recompiling f ({script}:3) [0/1]",
        "    entry [0/0] failed L['n'] == 1 (observed 2)  [EQUALS_MATCH]"]
    env["DYNSCOPE_LOGS_FILE"] = str(tmp_path / "no" / "such" / "dir.log")   # cannot be opened
    p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env)
    assert p.returncode == 0
    assert "DYNSCOPE_LOGS_FILE=" in p.stderr and "logging to stderr" in p.stderr
    assert "dynscope [recompiles] Recompiling f" in p.stderr


def test_set_logs_stops_and_a_failing_sink_is_removed(tmp_path, capsys):
    dynscope.set_logs("recompiles")
    dynscope.set_logs("")
    g = dynscope.optimize("eager", dynamic=False)(counted)
    g(np.ones(2), 1)
    g(np.ones(2), 2)
    assert "dynscope [" not in capsys.readouterr().err
