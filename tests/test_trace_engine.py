"""The engine under LTTng: what a trace of a real workload says equals what the
engine says about itself.

A workload (written into the test's tmp dir) recompiles on dtype, shape and
constant changes, breaks graphs at print, at a branch on a tensor value and
at .item(), fails guards, reaches the cache limit, and runs a skipped frame.
It runs under scripts/lttng-capture.sh, and at its end dumps the engine's own
view to JSON: counters, per-function code status and cache entries (compile
ids, hits, guards, ops), and the in-memory event log.  The tests parse the
babeltrace2 text, keep the workload's vpid, and check every count and field
against that view.  Also: the same workload at -l INFO (cold events only),
the same workload with the provider absent (same results, no events), and
scripts/check_no_recompiles.py on workloads that do and do not recompile
after warm-up.

Skips only where LTTng cannot run (the fixtures of test_trace_provider.py).

Captures here are static (dynamic=False): these tests count the recompiles
a new shape or value makes; automatic dynamic is tests/test_dynamic.py's.
"""
from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import _programs

# The provider tests' fixtures (build, LTTng detection) and trace reader.
from test_trace_provider import (  # noqa: F401  (smoke, provider, lttng: fixtures)
    ROOT, capture, lttng, parse_line, provider, read_trace, smoke)

CHECK = ROOT / "scripts" / "check_no_recompiles.py"
CONTEXT = {"cpu_id", "vpid", "vtid", "procname"}
CODE_FIELDS = ("code_id", "qualname", "filename", "firstlineno")

# ---------------------------------------------------------------------------
# The workload.  Every scenario is a function of its own; `calls` counts the
# captured calls the workload made of each.

WORKLOAD = textwrap.dedent('''\
    import json, os, sys, warnings
    import numpy as np
    import dynscope
    from dynscope import _C


    def scale(x, n):
        return x * n + 1


    def with_print(x):
        y = x + 1
        print("with_print", y.shape)
        return y * 2


    def branch(a, b):
        x = a / (np.abs(a) + 1)
        if b.sum() < 0:
            b = b * -1
        return x * b


    def item_user(x):
        s = (x * 2).sum().item()
        return x + s


    def limited(x, n):
        return x - n


    def try_fn(x):
        try:
            y = x * 3
            print(end="")            # a break inside the try: the frame is skipped
        except KeyError:
            y = None
        return y


    def gen(x):
        yield x + 1


    def heavy(a, b):
        return (a @ b).sum()


    FUNCTIONS = [scale, with_print, branch, item_user, limited, try_fn, gen, heavy]
    calls = {f.__name__: 0 for f in FUNCTIONS}


    def call(f, *args):
        calls[f.__name__] += 1
        return dynscope.optimize("eager", dynamic=False)(f)(*args)   # constants specialize


    x32, x64 = np.ones((3, 4), np.float32), np.ones((3, 4), np.float64)
    for _ in range(20):
        call(scale, x32, 2)                  # 0/0, then hits
    for _ in range(5):
        call(scale, x64, 2)                  # dtype: recompile 0/1
    for _ in range(5):
        call(scale, np.ones((5, 4)), 2)      # shape: recompile 0/2
    for _ in range(5):
        call(scale, x64, 3)                  # constant: recompile 0/3
    for i in range(12):
        call(scale, x32 if i % 2 else x64, 2)   # hits on older entries

    for _ in range(10):
        call(with_print, np.ones(3))         # break at print: frame + resume frame
    for _ in range(3):
        call(with_print, np.ones(5))         # recompiles both frames (shape)
    for i in range(10):
        call(branch, np.ones(4), np.ones(4) * (1 if i % 2 else -1))  # both sides
    for _ in range(10):
        call(item_user, np.ones(2))          # break at .item()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dynscope.CacheLimitWarning)
        for n in range(10):
            call(limited, np.ones(2), n)     # 8 entries, then the cache limit
        for n in (7, 0, 3, 3, 5, 9, 1):
            call(limited, np.ones(2), n)     # hits at various positions; 9: eager

    for _ in range(6):
        call(try_fn, np.ones(2))             # skipped: frame_skip, then skips
    with dynscope.optimize("eager", dynamic=False):
        list(gen(np.ones(2)))                # generator: passed through untraced
    m = np.random.default_rng(0).random((200, 200))
    for _ in range(4):
        call(heavy, m, m)                    # a graph that takes milliseconds


    def ops(gm):
        return ",".join(n.name for n in gm.graph.nodes if n.op not in ("placeholder", "output"))


    def entry(e):
        return {"compile_id": e.compile_id, "hits": e.hits, "guard_ns": e.guard_ns,
                "resume_offset": e.resume_offset,
                "guards": [[g.kind, g.expr] for g in e.guards],
                "ops": ops(e.graph) if e.graph is not None else None}


    view = {
        "pid": os.getpid(),
        "trace_status": dynscope._trace_status,
        "trace_loaded": _C.trace_loaded(),
        "counters": _C.counters(),
        "event_stats": _C.event_stats(),
        "calls": calls,
        "functions": {f.__name__: {"status": _C.code_status(f),
                                   "entries": [entry(e) for e in dynscope.cache_entries(f)]}
                      for f in FUNCTIONS},
        "events": _C.events(),
    }
    with open(sys.argv[1], "w") as fh:
        json.dump(view, fh, indent=1)
''')

# What the workload is built to do (so that "equal" is not "equal and empty").
EXPECTED_COUNTERS = {"recompiles": 3 + 2 + 7, "graph_breaks": 3 + 1, "cache_limits": 1,
                     "skips": 1}


def run_workload(script, outdir, *, loglevel=None, provider_env=None):
    """The workload `script` under the capture script, its trace in `outdir`;
    returns (engine view, events of the workload's vpid, capture stderr,
    trace dir)."""
    outdir.mkdir()
    out_json = outdir / "engine.json"
    cmd = [sys.executable, script, out_json]
    if provider_env is not None:
        cmd = ["env", f"DYNSCOPE_TRACE_PROVIDER={provider_env}", *cmd]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    r, out = capture(outdir, *cmd, loglevel=loglevel, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    view = json.loads(out_json.read_text())
    return view, read_trace(out, view["pid"]), r.stderr, out


@pytest.fixture(scope="module")
def workload(tmp_path_factory):
    """The workload script: one file for every run, so that runs compare."""
    script = tmp_path_factory.mktemp("workload") / "workload.py"
    script.write_text(WORKLOAD)
    return script


@pytest.fixture(scope="module")
def traced(lttng, workload, tmp_path_factory):
    return run_workload(workload, tmp_path_factory.mktemp("engine") / "full")


@pytest.fixture(scope="module")
def traced_info(lttng, workload, tmp_path_factory):
    return run_workload(workload, tmp_path_factory.mktemp("engine") / "info", loglevel="INFO")


def of_kind(events, kind):
    return [{k: v for k, v in f.items() if k not in CONTEXT}
            for n, f in events if n == f"dynscope:{kind}"]


def mem(view, kind):
    return [e for e in view["events"] if e["event"] == kind]


def split_cid(cid):
    frame, compile_ = cid.split("/")
    return {"compile_id": cid, "frame_id": int(frame), "frame_compile_id": int(compile_)}


# ---------------------------------------------------------------------------
# What the engine's own view says each event should be, in emission order.

def code_fields(view):
    """code_id -> the four code fields, from the code objects the workload
    reported (every code object the engine traces belongs to it)."""
    out = {}
    for e in view["events"]:
        if "code_id" in e and e["event"] != "graph_break":   # graph_break's filename is the break's
            out[e["code_id"]] = {"code_id": e["code_id"], "qualname": e["name"],
                                 "filename": e["filename"], "firstlineno": e["firstlineno"]}
    return out


def expected_cold(view):
    """{kind: [payload, ...]} derived from the in-memory event log, the cache
    entries and the counters -- the trace must say exactly this."""
    code = code_fields(view)
    ops = {(f["status"]["code_id"], e["compile_id"]): e["ops"]
           for f in view["functions"].values() for e in f["entries"]}
    frame_of = {f["status"]["code_id"]: int(f["entries"][0]["compile_id"].split("/")[0])
                for f in view["functions"].values() if f["entries"]}
    exp = collections.defaultdict(list)
    resume = {}
    for e in view["events"]:
        kind = e["event"]
        if kind == "reset":
            exp["reset"].append(None)
            continue
        c = code[e["code_id"]]
        if kind == "compile_start":
            resume[(e["code_id"], e["compile_id"])] = e["resume_offset"]
            exp[kind].append({**c, **split_cid(e["compile_id"]),
                              "resume_offset": e["resume_offset"]})
        elif kind == "compile_end":
            exp[kind].append({**c, **split_cid(e["compile_id"]),
                              "resume_offset": resume[(e["code_id"], e["compile_id"])],
                              "outcome": e["outcome"], "duration_ns": e["duration_ns"],
                              "graphs": e["graphs"], "nodes": e["nodes"], "guards": e["guards"]})
            if e["graphs"]:
                exp["graph_compiled"].append(
                    {**c, "compile_id": e["compile_id"], "nodes": e["nodes"],
                     "backend": "eager", "ops": ops[(e["code_id"], e["compile_id"])]})
        elif kind == "recompile":
            exp[kind].append({**c, **split_cid(e["compile_id"]),
                              "resume_offset": resume[(e["code_id"], e["compile_id"])],
                              "reason": e["reason"]})
            for f in e["failures"]:
                exp["guard_fail"].append({**c, "compile_id": e["compile_id"], **guard_fail(f)})
        elif kind == "graph_break":
            exp[kind].append({**c, "compile_id": e["compile_id"], "break_kind": e["kind"],
                              "reason": e["reason"], "break_file": e["filename"],
                              "break_line": e["lineno"], "break_offset": e["offset"],
                              "user_stack": e["user_stack"], "break_type": e["break_type"],
                              "break_class": e["break_class"]})
        elif kind == "cache_limit":
            exp[kind].append({**c, "frame_id": frame_of[e["code_id"]], "resume_offset": 0,
                              "reason": e["last_failure"]})
            for f in e["failures"]:
                exp["guard_fail"].append({**c, "compile_id": "-", **guard_fail(f)})
        elif kind == "frame_skip":
            exp[kind].append({**c, "resume_offset": 0, "reason": e["reason"],
                              "break_type": e["break_type"], "break_class": e["break_class"]})
        else:
            raise AssertionError(f"an in-memory event this test does not know: {kind}")
    return exp


def guard_fail(failure):
    """The guard_fail fields of one in-memory failure (entry, kind, expr,
    observed); where its guard came from is checked in traced_cold."""
    entry_cid, gkind, expr, observed = failure
    return {"entry_compile_id": entry_cid, "guard_kind": gkind, "expr": expr,
            "observed": observed}


def traced_cold(events):
    got = {}
    for kind in ("compile_start", "compile_end", "recompile", "guard_fail", "graph_break",
                 "graph_compiled", "cache_limit", "frame_skip", "reset"):
        got[kind] = of_kind(events, kind)
    for g in got["graph_break"]:
        g["user_stack"] = json.loads(g.pop("user_stack_json"))
    for g in got["guard_fail"]:
        # the guard's source: a line of the code it guards, or none (the
        # engine's own guards); the in-memory failures carry it by name only
        where = (g.pop("guard_file"), g.pop("guard_line"))
        assert where == ("", 0) or (where[0] == g["filename"] and where[1] >= g["firstlineno"]), where
    for g in got["graph_compiled"]:
        assert g.pop("backend_ns") >= 0
    return got


# ---------------------------------------------------------------------------
# The capture itself.

def test_workload_loaded_the_provider_and_lost_no_event(traced):
    view, events, stderr, out = traced
    assert view["trace_status"] is True and view["trace_loaded"] is True
    assert "discarded" not in stderr, stderr
    assert (out / "babeltrace2.log").read_text() == ""
    assert view["event_stats"] == {"dropped": 0, "internal_errors": 0}
    assert events, "no event of the workload's vpid in the trace"
    assert all(f["vtid"] == view["pid"] and f["procname"] for _, f in events)


def test_the_workload_does_what_it_is_built_to_do(traced):
    view, *_ = traced
    c = view["counters"]
    assert {k: c[k] for k in EXPECTED_COUNTERS} == EXPECTED_COUNTERS
    fns = view["functions"]
    assert sorted(e["compile_id"] for e in fns["scale"]["entries"]) == ["0/0", "0/1", "0/2", "0/3"]
    assert len(fns["limited"]["entries"]) == 8
    assert "try" in fns["try_fn"]["status"]["skip_reason"]
    assert "generator" in fns["gen"]["status"]["skip_reason"]
    assert {e["kind"] for e in mem(view, "graph_break")} == {"call", "data_dependent_branch",
                                                             "data_escape"}


# ---------------------------------------------------------------------------
# Cold events: counts and fields.

def test_cold_event_counts_equal_the_engine_counters(traced):
    view, events, *_ = traced
    c = view["counters"]
    n = collections.Counter(name.split(":", 1)[1] for name, _ in events)
    ends = mem(view, "compile_end")
    assert n["compile_start"] == len(mem(view, "compile_start")) == len(ends)
    assert n["compile_end"] == len(ends)
    assert sum(1 for e in of_kind(events, "compile_end") if e["outcome"] == "ok") == c["compiles"]
    assert n["recompile"] == c["recompiles"] == len(mem(view, "recompile"))
    # one guard_fail per older entry, on each recompile and at the cache limit
    assert n["guard_fail"] == (sum(len(e["failures"]) for e in mem(view, "recompile"))
                               + sum(len(e["failures"]) for e in mem(view, "cache_limit")))
    assert n["graph_break"] == c["graph_breaks"] == len(mem(view, "graph_break"))
    assert n["graph_compiled"] == sum(e["graphs"] for e in ends)
    assert n["cache_limit"] == c["cache_limits"] == len(mem(view, "cache_limit"))
    assert n["frame_skip"] == c["skips"] == len(mem(view, "frame_skip"))
    assert n["reset"] == 0


@pytest.mark.parametrize("kind", ["compile_start", "compile_end", "recompile", "guard_fail",
                                  "graph_break", "graph_compiled", "frame_skip"])
def test_cold_event_fields_equal_the_engine_event_log(traced, kind):
    view, events, *_ = traced
    assert traced_cold(events)[kind] == expected_cold(view)[kind]


def test_cache_limit_fields_equal_the_engine_event_log(traced):
    # frame_id apart: see the next test.
    view, events, *_ = traced
    drop = lambda evs: [{k: v for k, v in e.items() if k != "frame_id"} for e in evs]  # noqa: E731
    assert drop(traced_cold(events)["cache_limit"]) == drop(expected_cold(view)["cache_limit"])


def test_cache_limit_names_the_frame_at_its_limit(traced):
    view, events, *_ = traced
    (got,) = traced_cold(events)["cache_limit"]
    (want,) = expected_cold(view)["cache_limit"]
    assert want["frame_id"] != 0      # the workload's `limited` is not the first frame
    assert got["frame_id"] == want["frame_id"]


def test_the_cache_limit_miss_reports_its_guard_failures(traced):
    view, events, *_ = traced
    (limit,) = mem(view, "cache_limit")
    assert len(limit["failures"]) == 8
    got = [(g["entry_compile_id"], g["expr"], g["observed"])
           for g in of_kind(events, "guard_fail") if g["compile_id"] == "-"]
    assert got == [(cid, expr, observed) for cid, _, expr, observed in limit["failures"]]


def test_recompiles_name_the_changed_dtype_shape_and_constant(traced):
    view, events, *_ = traced
    scale_id = view["functions"]["scale"]["status"]["code_id"]
    got = [(e["compile_id"], e["reason"]) for e in of_kind(events, "recompile")
           if e["code_id"] == scale_id]
    assert got == [("0/1", "L['x'].dtype == float32 (observed float64)"),
                   ("0/2", "L['x'].shape == (3, 4) (observed (5, 4))"),
                   ("0/3", "L['x'].shape == (5, 4) (observed (3, 4))")]
    # 0/3's miss: each older entry's first failing guard, newest first
    assert [(g["entry_compile_id"], g["guard_kind"], g["expr"], g["observed"])
            for g in of_kind(events, "guard_fail") if g["compile_id"] == "0/3"] == [
        ("0/2", "TENSOR_MATCH", "L['x'].shape == (5, 4)", "(3, 4)"),
        ("0/1", "EQUALS_MATCH", "L['n'] == 2", "3"),
        ("0/0", "TENSOR_MATCH", "L['x'].dtype == float32", "float64")]


def test_graph_breaks_name_their_kind_and_the_user_line(traced):
    view, events, *_ = traced
    script = Path(view["events"][0]["filename"])
    lines = script.read_text().splitlines()
    for b in of_kind(events, "graph_break"):
        assert b["break_file"] == str(script)
        source = lines[b["break_line"] - 1].strip()
        want = {"call": "print(", "data_dependent_branch": "if b.sum() < 0:",
                "data_escape": ".item()"}[b["break_kind"]]
        assert want in source, (b, source)


def test_resume_frame_recompile_carries_its_resume_offset(traced):
    view, events, *_ = traced
    wp = view["functions"]["with_print"]
    resume = {e["compile_id"]: e["resume_offset"] for e in of_kind(events, "compile_start")
              if e["code_id"] == wp["status"]["code_id"]}
    recompiled = {e["compile_id"]: e["resume_offset"] for e in of_kind(events, "recompile")
                  if e["code_id"] == wp["status"]["code_id"]}
    assert len(recompiled) == 2 and sorted(recompiled.values())[0] == 0
    assert sorted(recompiled.values())[1] > 0
    assert all(resume[cid] == off for cid, off in recompiled.items())


# ---------------------------------------------------------------------------
# frame_eval: hits, misses, skips per code object.

def frame_evals(events):
    return [f for n, f in events if n == "dynscope:frame_eval"]


def test_frame_eval_hits_and_misses_per_function_equal_the_cache(traced):
    view, events, *_ = traced
    n = collections.Counter((f["code_id"], f["result"]) for f in frame_evals(events))
    for name, fn in view["functions"].items():
        code_id = fn["status"]["code_id"]
        hits = sum(e["hits"] for e in fn["entries"])
        assert n[(code_id, "hit")] == hits, name
        assert n[(code_id, "miss")] == fn["status"]["misses"], name
    assert sum(v for (_, r), v in n.items() if r == "hit") == view["counters"]["hits"]
    assert sum(v for (_, r), v in n.items() if r == "miss") == view["counters"]["misses"]


def test_frame_eval_skips_are_the_calls_of_a_skipped_function_after_the_first(traced):
    view, events, *_ = traced
    n = collections.Counter((f["code_id"], f["result"]) for f in frame_evals(events))
    try_id = view["functions"]["try_fn"]["status"]["code_id"]
    assert n[(try_id, "miss")] == 1
    assert n[(try_id, "skip")] == view["calls"]["try_fn"] - 1
    assert {c for c, r in n if r == "skip"} == {try_id}


def test_frame_eval_traces_only_the_workloads_captured_functions(traced):
    # Library frames skipped by path and the generator never reach the trace.
    view, events, *_ = traced
    ids = {fn["status"]["code_id"] for fn in view["functions"].values()}
    gen_id = view["functions"]["gen"]["status"]["code_id"]
    seen = {f["code_id"] for f in frame_evals(events)}
    assert seen == ids - {gen_id}


def test_frame_eval_entry_and_guard_time_follow_the_result(traced):
    # a hit's guard check can be shorter than one tick of the clock on a
    # loaded machine (seen once in a full run: guard_ns 0 on a hit), so the
    # time is asserted over the hits, not on each
    _, events, *_ = traced
    hits = []
    for f in frame_evals(events):
        if f["result"] == "hit":
            assert f["entry"] >= 0 and f["guard_ns"] >= 0, f
            hits.append(f["guard_ns"])
        else:
            assert f["entry"] == -1 and f["guard_ns"] == 0, f
    assert hits and sum(1 for ns in hits if ns > 0) >= len(hits) // 2, hits


def test_frame_eval_guard_ns_is_the_guard_time_only(traced):
    # heavy() runs a 200x200 matmul (milliseconds) behind guards that take
    # about a microsecond; the cache entry's own guard clock says so.
    view, events, *_ = traced
    fn = view["functions"]["heavy"]
    (entry,) = fn["entries"]
    traced_ns = [f["guard_ns"] for f in frame_evals(events)
                 if f["code_id"] == fn["status"]["code_id"] and f["result"] == "hit"]
    assert len(traced_ns) == entry["hits"] == 3
    # the entry's guard_ns also counts its first (compiling) call's check
    assert sum(traced_ns) <= entry["guard_ns"] * 2 + 10_000, (traced_ns, entry["guard_ns"])


@pytest.mark.parametrize("name", ["scale", "limited"])
def test_frame_eval_hits_per_entry_equal_each_cache_entry(traced, name):
    # A function without breaks has one frame: replaying its compiles (a new
    # entry goes first) and hits (the entry hit moves to the front) through
    # the trace names the entry of every hit.
    view, events, *_ = traced
    fn = view["functions"][name]
    code_id = fn["status"]["code_id"]
    order, hits = [], collections.Counter()
    for n, f in events:
        if f.get("code_id") != code_id:
            continue
        if n == "dynscope:compile_end" and f["outcome"] == "ok":
            order.insert(0, f["compile_id"])
        elif n == "dynscope:frame_eval" and f["result"] == "hit":
            cid = order.pop(f["entry"])
            hits[cid] += 1
            order.insert(0, cid)
    assert order == [e["compile_id"] for e in fn["entries"]]
    assert dict(hits) == {e["compile_id"]: e["hits"] for e in fn["entries"] if e["hits"]}
    assert len(hits) > 1


# ---------------------------------------------------------------------------
# -l INFO: every cold event, no frame_eval.

def test_loglevel_info_records_the_same_cold_events_and_no_frame_eval(traced_info):
    view, events, stderr, _ = traced_info
    assert "discarded" not in stderr
    assert frame_evals(events) == []
    assert view["counters"]["hits"] > 0
    got, want = traced_cold(events), expected_cold(view)
    for kind in ("compile_start", "compile_end", "recompile", "guard_fail", "graph_break",
                 "graph_compiled", "frame_skip"):
        assert got[kind] == want[kind], kind


# ---------------------------------------------------------------------------
# Without the provider: the same run, no events.

def comparable(view, code_ids=False):
    """The engine view without what varies from run to run (times, pid) or
    with the provider (the trace status); without code ids unless asked
    (see test_a_listening_session_leaves_code_ids_alone)."""
    drop = {"at_ns", "duration_ns", "phases"} | (set() if code_ids else {"code_id"})   # phases: times
    v = {k: view[k] for k in ("counters", "event_stats", "calls")}
    v["functions"] = {name: {"status": {k: x for k, x in fn["status"].items() if k not in drop},
                             "entries": [{k: x for k, x in e.items() if k != "guard_ns"}
                                         for e in fn["entries"]]}
                      for name, fn in view["functions"].items()}
    v["events"] = [{k: x for k, x in e.items() if k not in drop} for e in view["events"]]
    for e in v["events"]:
        if e.get("nearest"):   # the recompile's cost is a time
            e["nearest"] = {k: x for k, x in e["nearest"].items() if k != "capture_ns"}
    return v


@pytest.fixture(scope="module")
def untraced(lttng, workload, tmp_path_factory):
    """The workload under the capture script, its provider path pointing at nothing."""
    return run_workload(workload, tmp_path_factory.mktemp("engine") / "absent",
                        provider_env=MISSING)


MISSING = "/nonexistent/libdynscope-tp.so"


def test_without_the_provider_the_workload_runs_the_same_and_traces_nothing(traced, untraced):
    view, events, stderr, out = untraced
    assert view["trace_loaded"] is False
    assert view["trace_status"].startswith(f"cannot load the tracepoint provider: {MISSING}")
    assert events == []
    everyone = [parse_line(line) for line in (out / "trace.txt").read_text().splitlines()
                if line.strip()]
    assert not [f for _, f in everyone if f.get("vpid") == view["pid"]]
    assert comparable(view) == comparable(traced[0])


def test_a_listening_session_leaves_code_ids_alone(traced, untraced):
    assert comparable(untraced[0], code_ids=True) == comparable(traced[0], code_ids=True)


JSON_IN_THE_HOOK = textwrap.dedent('''\
    import numpy as np
    import dynscope

    dynscope.config.skip_prefixes = ()     # capture every file, the stdlib too


    def with_print(x):
        y = x + 1
        print("break")
        return y * 2


    dynscope.optimize("eager", dynamic=False)(with_print)(np.ones(3))
    print("done")
''')


def test_graph_break_sink_with_every_file_captured_does_not_crash(lttng, tmp_path):
    script = tmp_path / "json_in_the_hook.py"
    script.write_text(JSON_IN_THE_HOOK)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    r, out = capture(tmp_path, sys.executable, script, events="graph_break", env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout == "break\ndone\n"


# ---------------------------------------------------------------------------
# scripts/check_no_recompiles.py: "no recompile of Model.forward after warm-up".

MODEL = textwrap.dedent('''\
    import os, sys
    import numpy as np
    import dynscope
    print(os.getpid())


    class Model:
        def __init__(self):
            self.w = np.full((4, 4), 0.5)

        @dynscope.optimize("eager", dynamic=False)
        def forward(self, x):
            return np.tanh(x @ self.w)


    def loss(y):
        return (y * y).mean()


    model = Model()
    batches = [int(b) for b in sys.argv[1].split(",")]
    for b in batches:
        dynscope.optimize("eager", dynamic=False)(loss)(model.forward(np.ones((b, 4))))
''')
# 8 and 16 during warm-up (calls 1-5), then only those: no recompile after 5.
STEADY = ",".join(map(str, [8, 8, 16, 8, 16] + [8, 16] * 10))
# The same, and a batch of 3 at call 15: a recompile after warm-up.
LATE = ",".join(map(str, [8, 8, 16, 8, 16] + [8, 16] * 4 + [3] + [8, 16] * 5))


def run_check(trace, *args):
    pid = ["--pid", str(trace.pid)] if isinstance(trace, ModelTrace) else []
    return subprocess.run([sys.executable, str(CHECK), str(trace), *args, *pid],
                          capture_output=True, text=True, timeout=60)


class ModelTrace(str):
    """A captured trace.txt path, with the model's pid: the check is asked
    about that process only (a session records every process of the user,
    other runs of the same model included)."""
    pid: int


def capture_model(tmp_path, batches, **kw):
    script = tmp_path / "model.py"
    script.write_text(MODEL)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    r, out = capture(tmp_path, sys.executable, script, batches, env=env, **kw)
    assert r.returncode == 0, r.stdout + r.stderr
    trace = ModelTrace(out / "trace.txt")
    trace.pid = int(r.stdout.split()[0])
    return trace


def test_check_no_recompiles_passes_when_forward_recompiles_only_during_warmup(lttng, tmp_path):
    trace = capture_model(tmp_path, STEADY)
    r = run_check(trace, "--function", "forward", "--after-warmup", "5")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ok: Model.forward" in r.stdout and "25 calls, 1 recompile(s)" in r.stdout
    # the warm-up's own recompile (call 3) fails a check with a shorter warm-up
    r = run_check(trace, "--function", "Model.forward", "--after-warmup", "2")
    assert r.returncode == 1 and "at call 3 (> 2)" in r.stdout, r.stdout + r.stderr


def test_check_no_recompiles_fails_on_a_recompile_after_warmup(lttng, tmp_path):
    trace = capture_model(tmp_path, LATE)
    r = run_check(trace, "--function", "forward", "--after-warmup", "5")
    assert r.returncode == 1, r.stdout + r.stderr
    assert ("Model.forward (code_id" in r.stdout and "recompiled after warm-up at call 14 (> 5)"
            in r.stdout), r.stdout
    assert "compile_id 0/2, reason: L['x'].shape == (16, 4) (observed (3, 4))" in r.stdout
    assert "FAIL: 1 recompile(s) of forward after 5 warm-up calls" in r.stdout
    # loss() recompiles too (its input's shape follows the batch), but it is
    # not the function asked about; with a long enough warm-up all is well
    assert run_check(trace, "--function", "forward", "--after-warmup", "14").returncode == 0


def test_check_no_recompiles_cannot_count_calls_without_frame_eval(lttng, tmp_path):
    trace = capture_model(tmp_path, LATE, loglevel="INFO")
    r = run_check(trace, "--function", "forward", "--after-warmup", "5")
    assert r.returncode == 2
    assert "no frame_eval events" in r.stderr


def test_check_no_recompiles_on_a_function_not_in_the_trace(tmp_path):
    # Never skips: a trace text written by hand.
    trace = tmp_path / "trace.txt"
    trace.write_text(
        '[03:17:20.914131810] (+?.?????????) host dynscope:frame_eval: { cpu_id = 1 }, '
        '{ vpid = 5, vtid = 5, procname = "python3" }, { code_id = 7, result = '
        '( "miss" : container = 1 ), entry = -1, guard_ns = 0 }\n')
    r = run_check(trace, "--function", "forward", "--after-warmup", "5")
    assert r.returncode == 2 and "no event of a function named 'forward'" in r.stderr


def test_check_no_recompiles_reads_hand_written_lines(tmp_path):
    # Never skips: the counting rule on a trace written by hand -- calls are
    # frame_eval events per (vpid, code_id); a recompile belongs to the call
    # whose miss precedes it; other processes and functions do not count.
    def fe(pid, code, result):
        return (f'[00:00:00.000000000] (+0.000000000) h dynscope:frame_eval: {{ cpu_id = 0 }}, '
                f'{{ vpid = {pid}, vtid = {pid}, procname = "p" }}, {{ code_id = {code}, '
                f'result = ( "{result}" : container = 0 ), entry = -1, guard_ns = 0 }}\n')

    def rc(pid, code, qualname, cid):
        return (f'[00:00:00.000000000] (+0.000000000) h dynscope:recompile: {{ cpu_id = 0 }}, '
                f'{{ vpid = {pid}, vtid = {pid}, procname = "p" }}, {{ code_id = {code}, '
                f'qualname = "{qualname}", filename = "/m.py", firstlineno = 1, '
                f'compile_id = "{cid}", frame_id = 0, frame_compile_id = 1, resume_offset = 0, '
                f'reason = "L[\\\'x\\\'].shape == (3,) (observed (4,))" }}\n')

    lines = ([fe(1, 3, "miss")] + [fe(1, 3, "hit")] * 3 + [fe(2, 3, "hit")] * 9
             + [fe(1, 4, "hit")] * 9 + [fe(1, 3, "miss"), rc(1, 3, "Net.forward", "0/1")])
    trace = tmp_path / "trace.txt"
    trace.write_text("".join(lines))
    r = run_check(trace, "--function", "forward", "--after-warmup", "5")
    assert r.returncode == 0, r.stdout + r.stderr      # call 5 of (pid 1, code 3)
    r = run_check(trace, "--function", "forward", "--after-warmup", "4")
    assert r.returncode == 1
    assert "at call 5 (> 4): compile_id 0/1, reason: L['x'].shape == (3,) (observed (4,))" \
        in r.stdout
    assert run_check(trace, "--function", "orward", "--after-warmup", "0").returncode == 2


# ---------------------------------------------------------------------------
# Many hosts: the session streamed to an lttng-relayd (here on loopback).

def free_ports(n):
    import socket
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


@pytest.fixture(scope="module")
def relayed(lttng, workload, tmp_path_factory):
    """The workload captured through a relayd on loopback: (engine view, its
    events as the relay wrote them, capture stderr)."""
    import shutil
    import signal
    import socket
    if shutil.which("lttng-relayd") is None:
        pytest.skip("lttng-relayd is not installed (lttng-tools)")
    base = tmp_path_factory.mktemp("relayd")
    ctrl, data, live = free_ports(3)
    relay_out = base / "relay"
    relay = _programs.popen(["lttng-relayd", "-C", f"tcp://127.0.0.1:{ctrl}",
                             "-D", f"tcp://127.0.0.1:{data}", "-L", f"tcp://127.0.0.1:{live}",
                             "-o", str(relay_out)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        for _ in range(100):        # listening once the control port answers
            try:
                socket.create_connection(("127.0.0.1", ctrl), timeout=0.1).close()
                break
            except OSError:
                if relay.poll() is not None:
                    pytest.skip("lttng-relayd did not start:\n" + relay.stdout.read())
                import time
                time.sleep(0.05)
        notes = base / "notes"
        out_json = base / "engine.json"
        r = _programs.run(["bash", str(ROOT / "scripts" / "lttng-capture.sh"), "-o", str(notes),
                           "--relayd", f"net://127.0.0.1:{ctrl}:{data}/run1", "--",
                           sys.executable, workload, str(out_json)],
                          capture_output=True, text=True, timeout=180, runs_python=True,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
        if r.returncode == 125 and "lttng-sessiond failed" in r.stderr:
            pytest.skip("LTTng cannot run here:\n" + r.stderr)
        assert r.returncode == 0, r.stdout + r.stderr
    finally:
        relay.send_signal(signal.SIGTERM)   # it finishes writing what it received
        relay.wait(timeout=30)
    trace_dir = relay_out / socket.gethostname() / "run1"
    assert trace_dir.is_dir(), list(relay_out.rglob("*"))[:20]
    text = _programs.run(["babeltrace2", str(trace_dir)], capture_output=True, text=True,
                         timeout=120)
    assert text.returncode == 0 and text.stderr == "", text.stderr
    (base / "trace.txt").write_text(text.stdout)
    view = json.loads(out_json.read_text())
    return view, read_trace(base, view["pid"]), r.stderr


def test_a_session_streamed_to_a_relayd_loses_no_event(relayed, traced):
    view, events, stderr = relayed
    assert "discarded" not in stderr and "trace streamed to net://127.0.0.1" in stderr, stderr
    c = view["counters"]
    n = collections.Counter(name.split(":", 1)[1] for name, _ in events)
    assert n["compile_end"] == len(mem(view, "compile_end")) > 0
    assert n["recompile"] == c["recompiles"] > 0 and n["graph_break"] == c["graph_breaks"] > 0
    evals = collections.Counter(f["result"] for f in frame_evals(events))
    assert evals["hit"] == c["hits"] and evals["miss"] == c["misses"]
    # the same events, field for field, as the engine logged them
    for kind in ("compile_start", "compile_end", "recompile", "guard_fail", "graph_break",
                 "frame_skip"):
        assert traced_cold(events)[kind] == expected_cold(view)[kind], kind
    # and as many of each as the local capture of the same workload
    local = collections.Counter(name for name, _ in traced[1])
    assert collections.Counter(name for name, _ in events) == local
