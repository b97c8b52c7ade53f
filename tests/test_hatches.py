"""Escape hatches (dynscope/hatches.py, engine/translate/tr_hatches.c):
disable, allow_in_graph, substitute_in_graph and assume_constant_result,
each shown by the graph and break counts before and after the mark, in
explain, in SQL and in what runs; torch's own disable marks; bad input.

The marks are process-wide and kept by reset(), so each test marks
functions of its own, made inside the test.
"""
import bisect
import json
import os
import re
import sqlite3
import subprocess
import sys

import numpy as np
import pytest

import dynscope
from dynscope import _C

from conftest import events, skip_torch_throw_under_asan, skip_transformers_under_asan

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def counts(fn, *args):
    e = dynscope.explain(fn)(*args)
    return e.graph_count, e.graph_break_count


def reasons(fn, *args):
    return [b.reason for b in dynscope.explain(fn)(*args).break_reasons]


# ---- disable ----

def test_disable_turns_a_traced_call_into_a_break_and_runs_its_callees_uncaptured():
    def inner(x):
        return x + 1

    def helper(x):
        return inner(x) * 2

    def program(x):
        return np.cos(helper(np.sin(x)))

    x = np.arange(4.0)
    assert counts(program, x) == (1, 0)                      # traced into: one graph
    helper_off = dynscope.disable(helper)
    assert helper_off.__wrapped__ is helper and helper_off.__name__ == "helper"

    def marked(x):
        return np.cos(helper_off(np.sin(x)))

    assert counts(marked, x) == (2, 1)
    (reason,) = reasons(marked, x)
    assert reason.endswith("<locals>.helper, marked dynscope.disable: it runs without capture")
    (b,) = dynscope.explain(marked)(x).break_reasons
    assert b.break_type == "DS0032"
    g = dynscope.optimize("eager")(marked)
    assert np.allclose(g(x), marked(x))
    assert dynscope.cache_entries(inner) == []               # recursive: never captured
    assert dynscope.cache_entries(helper) == []


def test_disable_as_decorator_with_a_reason_and_on_the_function_called_first():
    @dynscope.disable(reason="prints progress")
    def step(x):
        return np.tanh(x) * 3

    def program(x):
        return step(x) + 1

    x = np.linspace(-1, 1, 5)
    assert reasons(program, x) == ["call to test_disable_as_decorator_with_a_reason_and_on_the_"
                                   "function_called_first.<locals>.step, marked dynscope.disable "
                                   "(prints progress): it runs without capture"]
    g = dynscope.optimize("eager")(step)                     # the frame optimize() starts at
    assert np.allclose(g(x), np.tanh(x) * 3)
    assert dynscope.cache_entries(step.__wrapped__) == []
    assert events("compile_start") == []


def test_disable_of_a_region_inside_still_captures_an_optimized_callee():
    def leaf(x):
        return np.exp(x) - 1

    leaf_opt = dynscope.optimize("eager")(leaf)

    @dynscope.disable
    def middle(x):
        return leaf_opt(x) * 2                               # optimize() entered below: captured

    def top(x):
        return middle(x) + 1

    x = np.arange(3.0)
    assert np.allclose(dynscope.optimize("eager")(top)(x), (np.exp(x) - 1) * 2 + 1)
    assert len(dynscope.cache_entries(leaf)) == 1


def test_disable_non_recursive_keeps_the_frame_out_and_captures_its_callees():
    def inner(x):
        return np.sqrt(x) + 1

    def helper(x):
        print("", end="")                                    # would break if captured
        return inner(x) * 2

    assert dynscope.disable(helper, recursive=False) is helper

    def program(x):
        return np.cos(helper(np.sin(x) ** 2))

    x = np.arange(4.0)
    assert reasons(program, x) == ["call to test_disable_non_recursive_keeps_the_frame_out_and_"
                                   "captures_its_callees.<locals>.helper, marked "
                                   "dynscope.disable(recursive=False): it runs without capture"]
    g = dynscope.optimize("eager")(program)
    assert np.allclose(g(x), program(x))
    assert dynscope.cache_entries(helper) == []
    assert len(dynscope.cache_entries(inner)) == 1           # its callee is captured
    (skip,) = [e for e in events("frame_skip") if e["name"].endswith("helper")]
    assert skip["reason"] == "marked dynscope.disable(recursive=False)"
    assert skip["break_type"] == "DS0032"


def test_disable_is_recorded_in_sql(tmp_path):
    def helper(x):
        return x * 2

    def helper2(x):
        return x * 3

    helper_off = dynscope.disable(helper)
    dynscope.disable(helper2, recursive=False)

    def program(x):
        return helper2(helper_off(np.sin(x)) + 1)

    db = tmp_path / "run.db"
    dynscope.record(str(db))
    try:
        x = np.arange(3.0)
        assert np.allclose(dynscope.optimize("eager")(program)(x), (np.sin(x) * 2 + 1) * 3)
    finally:
        dynscope.stop_recording()
    con = sqlite3.connect(db)
    rows = con.execute("SELECT reason, break_type FROM graph_breaks ORDER BY at").fetchall()
    assert [r[1] for r in rows] == ["DS0032", "DS0032"]
    assert "marked dynscope.disable: it runs without capture" in rows[0][0]
    assert "marked dynscope.disable(recursive=False)" in rows[1][0]
    skips = con.execute("SELECT reason FROM frame_skips").fetchall()
    assert ("marked dynscope.disable(recursive=False)",) in skips


def test_what_a_hatch_kept_in_or_out_is_in_sql_and_the_report(tmp_path):
    db = tmp_path / "run.db"
    subprocess.run([sys.executable, "-m", "dynscope", "run", "--db", str(db), "escape_hatches.py"],
                   cwd=os.path.join(ROOT, "tests", "data"), check=True, capture_output=True,
                   env=dict(os.environ, PYTHONPATH=ROOT))
    con = sqlite3.connect(db)
    rows = con.execute("SELECT co.name, c.compile_id, c.hatches FROM compiles c"
                       " JOIN code_objects co USING (run_id, code_id) ORDER BY c.compile_row").fetchall()
    by_name = {name: hatches for name, _, hatches in rows}
    assert by_name["kept_in"] == "dynscope.allow_in_graph: scale is one graph node"
    assert by_name["kept_out"] is None                 # a break, not something kept in
    # exactly one compile names a hatch: the rule is the compile's, not the run's
    assert sum(1 for r in rows if r[2] is not None) == 1
    (brk,) = con.execute("SELECT reason, break_type FROM graph_breaks").fetchall()
    assert brk == ("call to noisy, marked dynscope.disable: it runs without capture", "DS0032")
    report = subprocess.run([sys.executable, "-m", "dynscope", "report", str(db)], check=True,
                            capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=ROOT)).stdout
    section = report.split("Escape hatches: what a mark kept in a graph or out of capture\n")[1]
    section = section.split("\n\n")[0]
    assert re.search(r"kept_in\s+escape_hatches\.py:\d+\s+\[0/0\]\s+in\s+dynscope\.allow_in_graph: scale is one "
                     r"graph node", section), section
    assert re.search(r"kept_out\s+escape_hatches\.py:\d+\s+out\s+call to noisy, marked dynscope\.disable: it "
                     r"runs without capture \(1x\)", section), section
    # the HTML report's page of that compile says it, the other compiles' pages do not
    out = tmp_path / "html"
    subprocess.run([sys.executable, "-m", "dynscope", "report", "--html", str(out), str(db)],
                   check=True, capture_output=True, env=dict(os.environ, PYTHONPATH=ROOT))
    (row,) = con.execute("SELECT compile_row FROM compiles WHERE hatches IS NOT NULL").fetchone()
    for (r,) in con.execute("SELECT compile_row FROM compiles"):
        page = (out / f"compile-{r}.html").read_text()
        has = "<dt>kept in by</dt><dd>dynscope.allow_in_graph: scale is one graph node</dd>" in page
        assert has == (r == row), r


# ---- allow_in_graph ----

def test_allow_in_graph_makes_an_untraceable_call_one_node():
    seen = []

    def scale(a, b):
        seen.append(id(a))                                   # a visible write: a break when traced
        return a * 2 + b

    def program(x, y):
        return np.sin(scale(np.cos(x), y))

    x, y = np.arange(4.0), np.ones(4)
    graphs, breaks = counts(program, x, y)
    assert breaks >= 1                                       # traced into, it breaks
    assert dynscope.allow_in_graph(scale) is scale
    assert counts(program, x, y) == (1, 0)
    out = dynscope.explain(program)(x, y)
    graph = out.graphs[0].graph
    assert [n.target for n in graph.nodes if n.op == "call_function"][1] is scale
    # the plan says which mark kept the call in (explain, cache_entries, dyntop)
    assert "# dynscope.allow_in_graph: " in str(out) and ".scale is one graph node" in str(out)
    g = dynscope.optimize("eager")(program)
    g(x, y)                                                  # compiles (fn runs once while tracing)
    before = len(seen)
    for k in range(3):
        assert np.allclose(g(x + k, y), np.sin(np.cos(x + k) * 2 + y))
    assert len(seen) == before + 3                           # the node runs on every call
    assert len(dynscope.cache_entries(program)) == 1


def test_allow_in_graph_result_that_is_not_an_array_stops_with_a_reason():
    def count(a):
        return int(a.size)

    def describe(a):
        return {"n": a.size}

    dynscope.allow_in_graph(count)
    dynscope.allow_in_graph(describe)

    def program(x):
        return x * count(x)                                  # a number: a graph value

    def program2(x):
        return x * describe(x)["n"]

    assert counts(program, np.ones(3)) == (1, 0)
    assert np.allclose(dynscope.optimize("eager")(program)(np.ones(4)), 4)
    (reason,) = reasons(program2, np.ones(3))
    assert "returned a dict, not an array" in reason


# ---- substitute_in_graph ----

def test_substitute_in_graph_makes_a_c_function_traceable():
    def program(edges, x):
        i = bisect.bisect_right(edges, 0.5)                 # a C function: a break
        return np.cumsum(x)[i:] * 2

    edges = [0.1, 0.3, 0.7]
    x = np.arange(5.0)
    assert counts(program, edges, x) == (1, 1)              # the call breaks: one graph after it

    @dynscope.substitute_in_graph(bisect.bisect_right, skip_signature_check=True)
    def bisect_right(a, x, lo=0, hi=None, *, key=None):
        hi = len(a) if hi is None else hi
        while lo < hi:
            mid = (lo + hi) // 2
            if x < a[mid]:
                hi = mid
            else:
                lo = mid + 1
        return lo

    assert counts(program, edges, x) == (1, 0)
    g = dynscope.optimize("eager")(program)
    g(edges, x)
    (entry,) = dynscope.cache_entries(program)
    assert entry.plan.startswith("# dynscope.substitute_in_graph(test_substitute_in_graph_makes_a_"
                                 "c_function_traceable.<locals>.bisect_right) traced in place of "
                                 "bisect_right\n")
    for e in ([0.1, 0.3, 0.7], [0.6, 0.8, 0.9], [0.0, 0.1, 0.2]):
        assert np.array_equal(g(e, x), program(e, x))


def test_substitute_in_graph_checks_the_signature_and_leaves_nothing_half_registered():
    def original(a, b, *, c=1):
        return a

    with pytest.raises(TypeError, match=r"does not match .*original\(a, b, \*, c=1\)"):
        @dynscope.substitute_in_graph(original)
        def wrong(a, b, c=1):
            return a

    assert original not in [fn for fn, _ in dynscope.hatches.marks()]

    @dynscope.substitute_in_graph(original)
    def right(a, b, *, c=1):
        return a + b

    assert (original, "dynscope.substitute_in_graph(test_substitute_in_graph_checks_the_"
            "signature_and_leaves_nothing_half_registered.<locals>.right)") in dynscope.hatches.marks()

    def program(x):
        return original(x, x)

    assert np.allclose(dynscope.optimize("eager")(program)(np.ones(2)), 2)   # the replacement's answer


# ---- assume_constant_result ----

def test_assume_constant_result_folds_a_call_the_translator_cannot_follow():
    settings = {"scale": 2.0}

    def world_scale():
        # a C function the translator does not model: a break when traced
        return settings["scale"] * (sys.getrecursionlimit() > 0)

    def program(x):
        return np.sin(x) * world_scale()

    x = np.ones(3)
    graphs, breaks = counts(program, x)
    assert breaks == 1 and "getrecursionlimit" in reasons(program, x)[0]
    assert dynscope.assume_constant_result(world_scale) is world_scale
    assert counts(program, x) == (1, 0)
    e = dynscope.explain(program)(x)
    assert [n.op for n in e.graphs[0].graph.nodes].count("call_function") == 2   # sin, the multiply
    g = dynscope.optimize("eager")(program)
    assert np.allclose(g(x), np.sin(1) * 2.0)
    settings["scale"] = 5.0                                  # a constant: the user's promise
    assert np.allclose(g(x), np.sin(1) * 2.0)


# ---- bad input ----

@pytest.mark.parametrize("bad", [3, "fn", None.__class__, int])
def test_hatches_refuse_what_is_not_a_function(bad):
    for hatch in (dynscope.allow_in_graph, dynscope.disable, dynscope.substitute_in_graph):
        if bad is None.__class__ and hatch is dynscope.disable:
            continue
        with pytest.raises(TypeError, match="expected a function"):
            hatch(bad)
    with pytest.raises(TypeError, match="expected a Python function"):
        dynscope.assume_constant_result(len)
    with pytest.raises(TypeError, match="expected a Python function"):
        dynscope.disable(len, recursive=False)
    with pytest.raises(TypeError, match="replacement must be a Python function"):
        dynscope.substitute_in_graph(len)(abs)
    with pytest.raises(TypeError, match="reason must be a str"):
        dynscope.disable(lambda: 0, reason=3)


# ---- stance and limits ----

def test_eager_then_compile_runs_the_first_call_eagerly():
    def f(x):
        return np.sin(x) + 1

    g = dynscope.optimize("eager")(f)
    x = np.arange(3.0)
    with dynscope.set_stance("eager_then_compile"):
        assert np.allclose(g(x), f(x))
        assert dynscope.cache_entries(f) == [] and events("compile_start") == []
        assert np.allclose(g(x), f(x))
        assert len(dynscope.cache_entries(f)) == 1
        assert np.allclose(g(x), f(x))
        assert dynscope.cache_entries(f)[0].hits == 1
    with pytest.raises(ValueError, match="'eager_then_compile'"):
        dynscope.set_stance("eager_then_compiles")


def _breaking(x, n):
    y = x * n
    print("", end="")          # a break: a resume frame of its own
    return y + n


def test_accumulated_cache_size_limit_counts_every_frame_of_a_function():
    dynscope.config.accumulated_cache_size_limit = 5
    try:
        g = dynscope.optimize("eager", dynamic=False)(_breaking)
        for n in range(6):
            assert np.allclose(g(np.ones(2), n), n + n)
        hit = events("cache_limit")[0]
        assert hit["name"] == "_breaking"
        assert hit["last_failure"].startswith("config.accumulated_cache_size_limit (5) reached")
        frames = dynscope.cache_entries(_breaking)
        assert len(frames) == 5                             # 3 starts and 2 resumes
    finally:
        dynscope.config.accumulated_cache_size_limit = 256


def test_fail_on_cache_limit_raises_naming_the_frame_and_its_guard():
    def scale(x, n):
        return x * n

    dynscope.config.cache_size_limit = 2
    dynscope.config.fail_on_cache_limit = True
    try:
        g = dynscope.optimize("eager", dynamic=False)(scale)
        g(np.ones(2), 1)
        g(np.ones(2), 2)
        with pytest.raises(dynscope.CacheLimitError) as info:
            g(np.ones(2), 3)
        msg = str(info.value)
        assert "scale" in msg and "config.cache_size_limit (2)" in msg
        assert "L['n'] == 2 (observed 3)" in msg
        assert "the guard was made at" in msg and "test_hatches.py" in msg
    finally:
        dynscope.config.fail_on_cache_limit = False
    assert np.allclose(g(np.ones(2), 3), 3)                  # without: eager at the limit


def test_limit_settings_refuse_bad_values():
    with pytest.raises(TypeError):
        dynscope.config.accumulated_cache_size_limit = "8"
    with pytest.raises(ValueError):
        dynscope.config.accumulated_cache_size_limit = -1
    with pytest.raises(TypeError):
        dynscope.config.fail_on_cache_limit = 1
    assert dynscope.config.accumulated_cache_size_limit == 256
    assert dynscope.config.fail_on_cache_limit is False


# ---- torch's marks ----

def test_torch_disable_marks_are_honoured():
    torch = pytest.importorskip("torch")

    def inner(x):
        return x + 1

    @torch.compiler.disable
    def helper(x):
        return inner(x) * 2

    def helper2(x):
        return inner(x) * 3

    helper2_off = torch._dynamo.disable(helper2, recursive=False)

    def program(x):
        return torch.sin(helper2_off(helper(torch.cos(x))))

    x = torch.arange(4.0)
    first, second = reasons(program, x)
    assert first.endswith("<locals>.helper, marked torch.compiler.disable: it runs without capture")
    assert second.endswith("<locals>.helper2, marked torch.compiler.disable(recursive=False): "
                           "it runs without capture")
    g = dynscope.optimize("eager")(program)
    assert torch.allclose(g(x), program(x))
    assert dynscope.cache_entries(helper.__wrapped__) == []
    assert dynscope.cache_entries(helper2) == []
    assert len(dynscope.cache_entries(inner)) == 1           # helper2's callee only
    assert _C.code_status(helper2)["skip_reason"] == "marked torch.compiler.disable(recursive=False)"


# ---- substitute_in_graph on a sweep model ----

SWEEP_SUBSTITUTE = r'''
import json, os, sys, types
os.environ["HF_HUB_OFFLINE"] = "1"
sys.path.insert(0, os.path.join(sys.argv[1], "scripts"))
import torch, hf_sweep, dynscope
from transformers import masking_utils

model, kw = hf_sweep.build(sys.argv[2])
out = {}
with torch.no_grad():
    want = model(**kw).last_hidden_state
    e = dynscope.explain(model)(**kw)
    vmaps = lambda e: sum(getattr(n.target, "__name__", "") == "_vmap_increment_nesting"   # noqa: E731
                          for g in e.graphs for n in g.graph.nodes)
    out["before"] = [e.graph_count, e.graph_break_count]
    out["vmaps_before"] = vmaps(e)
    # sdpa_mask builds a custom mask with torch.vmap inside a TorchFunctionMode
    # (traced: tr_fnmode.c); these models' mask functions are index based, so
    # its broadcasting path (use_vmap=False) gives the same mask: a copy of
    # the function, unmarked, substituted
    orig = masking_utils.sdpa_mask
    broadcasting = types.FunctionType(orig.__code__, orig.__globals__, "sdpa_mask",
                                      orig.__defaults__, orig.__closure__)

    @dynscope.substitute_in_graph(orig)
    def sdpa_mask(batch_size, q_length, kv_length, q_offset=0, kv_offset=0,
                  mask_function=masking_utils.causal_mask_function, attention_mask=None,
                  local_size=None, allow_is_causal_skip=True, allow_is_bidirectional_skip=False,
                  use_vmap=False, device="cpu", **kwargs):
        return broadcasting(batch_size, q_length, kv_length, q_offset, kv_offset, mask_function,
                            attention_mask, local_size, allow_is_causal_skip,
                            allow_is_bidirectional_skip, False, device, **kwargs)

    e = dynscope.explain(model)(**kw)
    out["after"] = [e.graph_count, e.graph_break_count]
    out["vmaps_after"] = vmaps(e)
    got = dynscope.optimize("eager")(model)(**kw).last_hidden_state
    out["equal"] = torch.equal(got, want)
print(json.dumps(out))
'''


@skip_transformers_under_asan
@skip_torch_throw_under_asan          # the mode's probe (tr_fnmode.c) stops a dispatch by raising
@pytest.mark.parametrize("model_type", ["unlimited_ocr", "t5gemma2"])
def test_substitute_in_graph_on_a_sweep_model_is_traced_in_its_place(model_type):
    """These two models were this test's example of a hatch making a model
    one graph, when torch function modes broke; they are one graph without
    it now, and the substitute (another path to the same mask) is traced in
    the original's place, one graph still and exact."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    # its own process: the mark is process-wide and would change other tests' models
    p = subprocess.run([sys.executable, "-c", SWEEP_SUBSTITUTE, root, model_type], cwd=root,
                       capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, PYTHONPATH=root))
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["before"] == [1, 0]                 # the TorchFunctionMode traced through
    assert out["after"] == [1, 0]
    assert out["vmaps_before"] > 0 and out["vmaps_after"] == 0    # the substitute, traced
    assert out["equal"] is True


def test_torch_allow_in_graph_mark_is_honoured():
    torch = pytest.importorskip("torch")
    calls = []

    def scale(a, b):
        calls.append(1)                                      # a visible write: a break when traced
        return a * 2 + b

    def program(x, y):
        return torch.sin(scale(torch.cos(x), y))

    x, y = torch.arange(3.0), torch.ones(3)
    assert counts(program, x, y)[1] >= 1
    torch.compiler.allow_in_graph(scale)
    assert counts(program, x, y) == (1, 0)
    assert "# torch.compiler.allow_in_graph: " in str(dynscope.explain(program)(x, y))
    g = dynscope.optimize("eager")(program)
    assert torch.allclose(g(x, y), torch.sin(torch.cos(x) * 2 + y))


def test_torch_substitute_in_graph_is_honoured_and_torchs_own_polyfills_are_not():
    torch = pytest.importorskip("torch")
    import torch._dynamo                                     # registers Dynamo's own polyfills

    def program(edges, x):
        i = bisect.bisect_left(edges, 0.5)                   # a C function: a break
        big = any(v > 0.6 for v in edges)                    # `any`: one of torch's own polyfills
        return torch.cumsum(x, 0)[i:] * (3 if big else 2)

    edges = [0.1, 0.3, 0.7]
    x = torch.arange(5.0)
    assert counts(program, edges, x)[1] >= 1

    @torch._dynamo.substitute_in_graph(bisect.bisect_left, skip_signature_check=True)
    def bisect_left(a, x, lo=0, hi=None, *, key=None):
        hi = len(a) if hi is None else hi
        while lo < hi:
            mid = (lo + hi) // 2
            if a[mid] < x:
                lo = mid + 1
            else:
                hi = mid
        return lo

    assert counts(program, edges, x) == (1, 0)
    g = dynscope.optimize("eager")(program)
    g(edges, x)
    (entry,) = dynscope.cache_entries(program)
    assert entry.plan.startswith("# torch.compiler.substitute_in_graph(test_torch_substitute_in_graph_is_"
                                 "honoured_and_torchs_own_polyfills_are_not.<locals>.bisect_left) "
                                 "traced in place of bisect_left\n"), entry.plan
    for e in ([0.1, 0.3, 0.7], [0.6, 0.8, 0.9], [0.0, 0.1, 0.2]):
        assert torch.equal(g(e, x), program(e, x))
    # torch's own replacements (any, sum, itertools, operator, ...) are not taken as marks
    torchs = [fn for fn, rule in dynscope.hatches.marks() if rule.startswith("torch.compiler.substitute")]
    assert torchs == [bisect.bisect_left], torchs
