#!/usr/bin/env python3
"""compare_dynamo.py -- dynscope and TorchDynamo side by side on one corpus.

    .venv/bin/python scripts/compare_dynamo.py            # writes docs/vs-dynamo.md
    .venv/bin/python scripts/compare_dynamo.py --out FILE

Every function of CORPUS runs twice, each time in a fresh process:
  dynscope: dynscope.explain(fn)(*first call) for graphs and breaks, then
            dynscope.optimize("eager")(fn) over all the case's calls;
  dynamo:   torch._dynamo.explain(fn)(*first call), then
            torch.compile(fn, backend="eager", dynamic=False) over the calls
            (static shapes, as dynscope: a new shape recompiles).
Per function: graph count, break count, break reasons, recompiles over the
calls, whether every result equals eager, capture time (first call) and
cache-hit call time; then guard evaluation time with 1 and 8 cache entries.
The report lists every difference with its explanation (EXPLAINED below);
a difference without one is marked UNEXPLAINED.  Needs torch (2.13).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# ---------------------------------------------------------------------------
# The corpus: functions at module level (both systems see plain user code).

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
from torch.overrides import TorchFunctionMode  # noqa: E402
import torch.nn.functional as F  # noqa: E402


def toy_example(a, b):
    x = a / (torch.abs(a) + 1)
    if b.sum() < 0:
        b = b * -1
    return x * b


def elementwise(a, b):
    return a * b + torch.sin(a) - torch.exp(b) / 2


def reductions(x):
    return x.sum(dim=0).mean() + x.amax() - x.std(dim=1).sum()


def matmul_relu(x, w):
    return torch.relu(x @ w).sum(dim=1)


def shapes(x):
    n, d = x.shape
    y = x.reshape(d, n).transpose(0, 1).contiguous()
    return y.view(-1) + torch.zeros(n * d, dtype=x.dtype)


def split_chunk(x):
    a, b = torch.split(x, 2)
    c, d = x.chunk(2, dim=1)
    return a + b, c * d


def named_tuple(x):
    return torch.max(x, 0).values + 1


def item_escape(x):
    y = x.sin()
    return y * y.sum().item()


def prints(x):
    y = x + 1
    print("", end="")
    return y * 2


def tensor_branch(x):
    if x.max() > 0:
        return x * 2
    return x - 1


def in_place(x):
    y = x * 2
    x.add_(1)
    return x + y


def float_escape(x):
    return x * float(x.sum())


def rng(x):
    return x + torch.rand(x.shape)


def dropout_train(x):
    return F.dropout(x, 0.5, training=True).sum() * 0 + x


def scale(x, n):
    return x * n + 1


def helper(x):
    return torch.tanh(x) * 2


def calls_helper(x):
    return helper(x) + helper(x + 1)


def unrolled(x):
    for i in range(4):
        x = x * (i + 1) + torch.cos(x)
    return x


def containers(xs, d):
    return xs[0] + xs[1] * d["w"]


def bool_mask(x):
    y = x[x > 0]
    return y.sum()


def no_grad_block(x):
    with torch.no_grad():
        y = x * 2
    return y + 1


class AddTwice(TorchFunctionMode):
    """A torch function mode that changes values: x + y is twice the sum."""
    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        return out * 2 if func is torch.Tensor.add else out


def _summed_in_mode(x, y):
    with AddTwice():
        return x + y


def function_mode(x, y):
    return _summed_in_mode(x, y) - 1


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


class Stack(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(6, 6) for _ in range(3)])

    def forward(self, x):
        for layer in self.layers:
            x = torch.tanh(layer(x))
        return x


class Branchy(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        y = self.fc(x)
        if y.sum() > 0:
            return y.relu()
        return -y


SEQ = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Dropout(0.5), nn.Linear(8, 2)).eval()


def sequential_eval(x):
    return SEQ(x)


def r(*shape, dtype=torch.float32, seed=0, requires_grad=False):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=dtype).requires_grad_(requires_grad)


def make_corpus():
    """name -> (callable, [args of each call]); the first call is explained."""
    torch.manual_seed(0)
    mlp, stack, branchy = MLP(), Stack(), Branchy()
    return {
        "toy_example (seed)": (toy_example, [(r(10), r(10, seed=s)) for s in range(1, 9)]),
        "elementwise": (elementwise, [(r(5), r(5, seed=1))] * 3),
        "reductions": (reductions, [(r(4, 3),)] * 3),
        "matmul_relu": (matmul_relu, [(r(4, 3), r(3, 5, seed=1))] * 3),
        "shapes (x.shape unpack, view)": (shapes, [(r(3, 4),)] * 3),
        "split/chunk (tuple results)": (split_chunk, [(r(4, 4),)] * 3),
        "torch.max(x, 0) (named tuple)": (named_tuple, [(r(3, 4),)] * 3),
        ".item() escape": (item_escape, [(r(4),), (r(4, seed=1),)]),
        "print": (prints, [(r(4),)] * 3),
        "tensor branch": (tensor_branch, [(r(4),), (-r(4).abs(),)]),
        "in-place add_ on input": (in_place, [(r(3),)] * 2),
        "float(t) escape": (float_escape, [(r(3),)] * 2),
        "torch.rand (RNG)": (rng, [(r(3),)] * 2),
        "F.dropout(training=True)": (dropout_train, [(r(3),)] * 2),
        "recompile: dtype": (scale, [(r(3, 4), 2), (r(3, 4, dtype=torch.float64), 2)]),
        "recompile: shape": (scale, [(r(3, 4), 2), (r(5, 4), 2)]),
        "recompile: constant": (scale, [(r(3, 4), 2), (r(3, 4), 3)]),
        "recompile: requires_grad": (scale, [(r(3, 4), 2), (r(3, 4, requires_grad=True), 2)]),
        "inlined helper": (calls_helper, [(r(4),)] * 3),
        "unrolled range loop": (unrolled, [(r(4),)] * 3),
        "list/dict inputs": (containers, [([r(3), r(3, seed=1)], {"w": r(3, seed=2)})] * 3),
        "boolean mask x[x > 0]": (bool_mask, [(r(6),)] * 2),
        "with torch.no_grad()": (no_grad_block, [(r(3, requires_grad=True),)] * 2),
        "TorchFunctionMode in a helper": (function_mode, [(r(3), r(3, seed=1))] * 3),
        "nn.Module MLP": (mlp, [(r(2, 8),)] * 3),
        "nn.ModuleList loop": (stack, [(r(2, 6),)] * 3),
        "nn.Module with tensor branch": (branchy, [(r(3, 4),)] * 3),
        "nn.Sequential (eval, Dropout)": (sequential_eval, [(r(3, 4),)] * 3),
    }


# ---------------------------------------------------------------------------
# Measuring, in one process per system.

def same(a, b):
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.shape == b.shape and a.dtype == b.dtype and torch.allclose(a.detach(), b.detach(), equal_nan=True)
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def timed(fn, args, n):
    ts = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        fn(*args)
        ts.append(time.perf_counter_ns() - t0)
    return statistics.median(ts)


def fresh(args):
    """Copies of tensors that an in-place case may mutate."""
    return tuple(a.detach().clone().requires_grad_(a.requires_grad) if isinstance(a, torch.Tensor)
                 else a for a in args)


class System:
    """The two systems behind one interface."""

    def __init__(self, name):
        self.name = name
        if name == "dynscope":
            import dynscope
            from dynscope import _C
            self.ds, self._C = dynscope, _C
        else:
            import torch._dynamo
            from torch._dynamo.utils import get_compilation_metrics, clear_compilation_metrics
            self.td = torch._dynamo
            self.metrics, self.clear_metrics = get_compilation_metrics, clear_compilation_metrics

    def reset(self):
        if self.name == "dynscope":
            self.ds.reset()
            self._C.clear_events()
        else:
            self.td.reset()
            self.clear_metrics()

    def explain(self, fn, args):
        if self.name == "dynscope":
            out = self.ds.explain(fn)(*args)
            reasons = [f"[{b.kind}] {b.reason}" for b in out.break_reasons]
            return out.graph_count, out.graph_break_count, reasons
        out = self.td.explain(fn)(*args)
        return out.graph_count, out.graph_break_count, [b.reason for b in out.break_reasons]

    def optimize(self, fn):
        if self.name == "dynscope":
            return self.ds.optimize("eager")(fn)
        return torch.compile(fn, backend="eager", dynamic=False)

    def recompiles(self):
        if self.name == "dynscope":
            evs = [e for e in self._C.events() if e["event"] == "recompile"]
            return len(evs), [e.get("reason", "") for e in evs]
        ms = [m for m in self.metrics() if m.recompile_reason]
        return len(ms), [m.recompile_reason.splitlines()[0] for m in ms]


def measure_case(system, fn, calls):
    system.reset()
    graphs, breaks, reasons = system.explain(fn, fresh(calls[0]))
    system.reset()
    opt = system.optimize(fn)
    ok = True

    def seeded(f, args):      # the RNG cases draw the same numbers in both runs
        torch.manual_seed(1234)
        return f(*fresh(args))

    args = fresh(calls[0])
    torch.manual_seed(1234)
    t0 = time.perf_counter_ns()
    got = opt(*args)
    capture_ns = time.perf_counter_ns() - t0
    ok &= same(got, seeded(fn, calls[0]))
    for args in calls[1:]:
        ok &= same(seeded(opt, args), seeded(fn, args))
    nrec, rec_reasons = system.recompiles()
    # cache-hit time: the first call's inputs again (in-place cases mutate:
    # time them on one copy, the hit path is what is measured)
    args = fresh(calls[0])
    for _ in range(20):
        opt(*args)
    hit_ns = timed(opt, args, 300)
    eager_ns = timed(fn, args, 300)
    return {"graphs": graphs, "breaks": breaks, "reasons": reasons, "recompiles": nrec,
            "recompile_reasons": rec_reasons, "results_match": bool(ok),
            "capture_ns": capture_ns, "hit_ns": hit_ns, "eager_ns": eager_ns}


def add_one(x):
    return x + 1


def measure_guards(system):
    """Per-call time of add_one with 1 cache entry, and with 8 entries hit
    round-robin (each lookup fails several entries first), minus eager."""
    out = {}
    system.reset()
    opt = system.optimize(add_one)
    xs = [torch.ones(n) for n in range(1, 9)]
    for x in xs:
        opt(x)
    eager = statistics.median(timed(add_one, (x,), 2000) for x in xs[:1])
    one = timed(opt, (xs[0],), 5000)
    system.reset()
    opt = system.optimize(add_one)
    for x in xs:
        opt(x)
    rounds = []
    for _ in range(600):
        t0 = time.perf_counter_ns()
        for x in xs:
            opt(x)
        rounds.append((time.perf_counter_ns() - t0) / len(xs))
    out["eager_ns"] = eager
    out["one_entry_ns"] = one
    out["eight_entries_ns"] = statistics.median(rounds)
    if system.name == "dynscope":
        entries = system.ds.cache_entries(add_one)
        hits = sum(e.hits for e in entries)
        out["guard_ns_per_lookup"] = sum(e.guard_ns for e in entries) / max(hits, 1)
        out["entries"] = len(entries)
    return out


def child(system_name, out_path):
    import warnings
    warnings.simplefilter("ignore")
    system = System(system_name)
    results = {}
    for name, (fn, calls) in make_corpus().items():
        try:
            results[name] = measure_case(system, fn, calls)
        except Exception as e:      # a crash is a result too
            results[name] = {"error": f"{type(e).__name__}: {e}"}
    guards = measure_guards(system)
    with open(out_path, "w") as f:
        json.dump({"system": system_name, "cases": results, "guards": guards,
                   "torch": torch.__version__}, f, indent=1)


# ---------------------------------------------------------------------------
# Why the two differ, per case: (kind, text).  kind "deliberate" is a design
# choice, "gap" a missing feature of dynscope, "bug" a bug of ours.

EXPLAINED = {
    "toy_example (seed)": ("same", "Same graphs and break. Op counts differ only in what is "
                           "counted: dynscope counts call_method nodes (b.sum()) as ops, "
                           "Dynamo's explain lists only call_function targets."),
    "torch.max(x, 0) (named tuple)": (
        "same", "Both model the named tuple in the graph: dynscope keeps its type "
        "(torch.return_types.max), reads its fields by name and rebuilds it as that type "
        "where the program gets it; Dynamo has NamedTupleVariable."),
    "float(t) escape": ("same", "Both break on the data escape."),
    ".item() escape": (
        "deliberate", "Same graphs and break. Dynamo specializes the float that .item() "
        "returned in the resume function (`___stack1 == 0.427...`), so the second call, with "
        "another value, recompiles; dynscope passes numbers produced by an eager step to the "
        "resume frame unspecialized (a graph input guarded by type only), so it does not."),
    "torch.rand (RNG)": (
        "same", "Both put the draw in the graph: dynscope traces it under saved generator "
        "states and puts them back afterwards (tr_random.c), so the graph draws what eager code "
        "would; Dynamo replays the RNG state."),
    "F.dropout(training=True)": (
        "same", "Random, as torch.rand: a graph op in both."),
    "in-place add_ on input": (
        "same", "Both put the in-place op in the graph: dynscope's graph does the real in-place "
        "op where the program does it (tracing does it on a clone of the input's example, "
        "tr_inplace.c); Dynamo functionalizes it."),
    "print": ("same", "Both break at print (Dynamo: a graph break on print, with the "
              "resume function after it)."),
    "boolean mask x[x > 0]": (
        "deliberate", "dynscope keeps x[x > 0] in the graph (it runs on real values, so the "
        "output's shape is known for this call) and breaks only when that data-dependent "
        "shape is read. Dynamo (capture_dynamic_output_shape_ops=False) breaks at the "
        "nonzero."),
    "with torch.no_grad()": (
        "same", "Both model grad-mode managers: the with block is in the graph (dynscope: the "
        "mode is graph state, and the entry guards the mode the frame starts in)."),
    "TorchFunctionMode in a helper": (
        "same", "Both trace through the mode, so its doubling is in the graph: dynscope hands "
        "each torch call to the mode's __torch_function__, inlined, with what torch would hand "
        "it (tr_fnmode.c), and nothing of the mode runs at run time; Dynamo keeps a symbolic "
        "mode stack and inlines the handler too."),
    "nn.Sequential (eval, Dropout)": (
        "same", "Both inline the Sequential (dynscope: Module calls without hooks inline "
        "forward; nn.Sequential iteration is modelled)."),
    "recompile: dtype": ("same", "One recompile each, naming the dtype."),
    "recompile: shape": ("same", "One recompile each (Dynamo with dynamic=False)."),
    "recompile: constant": ("same", "One recompile each: both specialize on Python ints."),
    "recompile: requires_grad": ("same", "One recompile each: requires_grad is in TENSOR_MATCH."),
}


NOTES = """
## Design differences behind the numbers

- **Example values.** dynscope runs every graph op once on the real inputs
  while tracing (as eager code would, in the caller's grad mode); Dynamo
  runs them on fake tensors. Hence dynscope's captures are ~100-1000x
  faster (no FakeTensor, no ShapeEnv, no guard code generation), and hence
  dynscope takes care with what would have an effect if run on real
  tensors: random ops run under saved generator states, put back after
  tracing; in-place ops on a tensor the program can see run on a clone of
  its example (the graph does the real one), and so do calls with
  `inplace=True`; `out=` stays an eager step (a graph break), where Dynamo
  functionalizes it.
- **Guards.** dynscope's guards are a C engine; a torch TENSOR_MATCH
  (dynscope does not link against libtorch) first asks torch's own C++
  tensor check, `torch._C._dynamo.guards.TensorGuards` -- the one
  Dynamo's guards use -- about 0.13 µs per tensor, and reads the metadata
  through the Python C API (~0.36 µs) only when that check fails, to
  decide and to say which part differs. Dynamo's guard tree is C++ and
  reads `at::Tensor` directly, but its call path (the `torch.compile`
  wrapper, eval-frame callback, guard manager) costs ~10 µs per call on
  this machine, so dynscope's cache hits are much cheaper.
  Global state: dynscope guards grad mode (GRAD_MODE); Dynamo also guards
  the default device, deterministic algorithms, torch-function mode and
  saved-tensor hooks.
- **Escaped numbers.** After `.item()`, dynscope passes the number to the
  resume frame unspecialized (a graph input, TYPE_MATCH only); Dynamo
  specializes floats by default, so a new `.item()` value recompiles the
  resume function (the `.item() escape` row).
- **nn.Module.** Both inline module calls (Dynamo's
  `inline_inbuilt_nn_modules`): parameters are graph inputs named after
  their source (`l_self_modules_fc_parameters_weight_`), hooks and
  `training` are guarded. dynscope inlines only calls that would reach
  `forward` directly (no hooks, no compiled or instance `forward`); a
  module with hooks is an eager step.
- **Op counts.** dynscope counts every call node (call_function and
  call_method) as an op; Dynamo's explain lists call_function targets only.
"""


def stable(text):
    """A reason without object addresses (they change from run to run)."""
    import re
    return re.sub(r" at 0x[0-9a-f]+", "", text.splitlines()[0] if text else "")


def fmt_ns(ns):
    if ns >= 1e6:
        return f"{ns / 1e6:.1f} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:.1f} µs"
    return f"{ns:.0f} ns"


def ratio(a, b):
    return f"{a / b:.2f}" if b else "-"


def differences(d, t):
    keys = [("graphs", "graphs"), ("breaks", "breaks"), ("recompiles", "recompiles"),
            ("results_match", "results")]
    return [label for k, label in keys if d.get(k) != t.get(k)]


def write_report(ds, dy, path, command):
    lines = []
    w = lines.append
    w("# dynscope and TorchDynamo, side by side")
    w("")
    w(f"Generated by `{command}` (torch {dy['torch']}, CPython "
      f"{sys.version.split()[0]}, {os.cpu_count()} CPUs). Each system runs the corpus of "
      "`scripts/compare_dynamo.py` in its own process: dynscope with `dynscope.explain` and "
      "`dynscope.optimize(\"eager\")`, TorchDynamo with `torch._dynamo.explain` and "
      "`torch.compile(backend=\"eager\", dynamic=False)` (static shapes, as dynscope). "
      "Times are medians on this machine; ratios are dynscope ÷ Dynamo (below 1: dynscope "
      "is faster).")
    w("")
    w("## Graphs, breaks, recompiles, results")
    w("")
    w("| function | graphs (ds / dy) | breaks (ds / dy) | recompiles (ds / dy) | results = eager (ds / dy) | difference |")
    w("|---|---|---|---|---|---|")
    unexplained = []
    for name in ds["cases"]:
        d, t = ds["cases"][name], dy["cases"][name]
        if "error" in d or "error" in t:
            w(f"| {name} | error: {d.get('error', '')} / {t.get('error', '')} | | | | |")
            unexplained.append(name)
            continue
        diff = differences(d, t)
        note = "—"
        if diff:
            kind = EXPLAINED.get(name, (None,))[0]
            note = f"{', '.join(diff)}: {kind}" if kind and kind != "same" else "UNEXPLAINED"
            if note == "UNEXPLAINED":
                unexplained.append(name)
        w(f"| {name} | {d['graphs']} / {t['graphs']} | {d['breaks']} / {t['breaks']} | "
          f"{d['recompiles']} / {t['recompiles']} | {'yes' if d['results_match'] else 'NO'} / "
          f"{'yes' if t['results_match'] else 'NO'} | {note} |")
    w("")
    w("## Break reasons")
    w("")
    for name in ds["cases"]:
        d, t = ds["cases"][name], dy["cases"][name]
        if "error" in d or "error" in t or not (d["reasons"] or t["reasons"]):
            continue
        w(f"- **{name}**")
        for r in d["reasons"]:
            w(f"  - dynscope: {stable(r)}")
        for r in t["reasons"]:
            w(f"  - Dynamo: {stable(r)}")
    w("")
    w("## Every difference, explained")
    w("")
    for name in ds["cases"]:
        d, t = ds["cases"][name], dy["cases"][name]
        if "error" in d or "error" in t:
            continue
        diff = differences(d, t)
        if not diff and name not in EXPLAINED:
            continue
        kind, text = EXPLAINED.get(name, ("UNEXPLAINED", "no explanation recorded"))
        w(f"- **{name}** ({kind}{'; differs in ' + ', '.join(diff) if diff else ''}): {text}")
    if unexplained:
        w("")
        w("UNEXPLAINED: " + ", ".join(unexplained))
    w("")
    w("## Time: capture (first call) and cache hits")
    w("")
    w("| function | capture ds | capture dy | ratio | hit ds | hit dy | ratio | eager |")
    w("|---|---|---|---|---|---|---|---|")
    cap_ratios, hit_ratios = [], []
    for name in ds["cases"]:
        d, t = ds["cases"][name], dy["cases"][name]
        if "error" in d or "error" in t:
            continue
        cap_ratios.append(d["capture_ns"] / t["capture_ns"])
        hit_ratios.append(d["hit_ns"] / t["hit_ns"])
        w(f"| {name} | {fmt_ns(d['capture_ns'])} | {fmt_ns(t['capture_ns'])} | "
          f"{ratio(d['capture_ns'], t['capture_ns'])} | {fmt_ns(d['hit_ns'])} | "
          f"{fmt_ns(t['hit_ns'])} | {ratio(d['hit_ns'], t['hit_ns'])} | {fmt_ns(d['eager_ns'])} |")
    if cap_ratios:
        w(f"| **median ratio** | | | **{statistics.median(cap_ratios):.3f}** | | | "
          f"**{statistics.median(hit_ratios):.2f}** | |")
    w("")
    w("## Guard evaluation with 1 and 8 cache entries")
    w("")
    g1, g2 = ds["guards"], dy["guards"]
    w("`add_one(x) = x + 1` on float32 tensors of 1..8 elements: one entry (the same input "
      "every call), and eight entries (one per shape) hit round-robin, so that each lookup "
      "first fails the other entries' guards. Per call, including running `x + 1`:")
    w("")
    w("| | dynscope | Dynamo | ratio |")
    w("|---|---|---|---|")
    w(f"| eager call | {fmt_ns(g1['eager_ns'])} | {fmt_ns(g2['eager_ns'])} | |")
    w(f"| 1 entry | {fmt_ns(g1['one_entry_ns'])} | {fmt_ns(g2['one_entry_ns'])} | "
      f"{ratio(g1['one_entry_ns'], g2['one_entry_ns'])} |")
    w(f"| 8 entries, round-robin | {fmt_ns(g1['eight_entries_ns'])} | "
      f"{fmt_ns(g2['eight_entries_ns'])} | {ratio(g1['eight_entries_ns'], g2['eight_entries_ns'])} |")
    w(f"| overhead over eager, 1 entry | {fmt_ns(g1['one_entry_ns'] - g1['eager_ns'])} | "
      f"{fmt_ns(g2['one_entry_ns'] - g2['eager_ns'])} | |")
    w(f"| overhead over eager, 8 entries | {fmt_ns(g1['eight_entries_ns'] - g1['eager_ns'])} | "
      f"{fmt_ns(g2['eight_entries_ns'] - g2['eager_ns'])} | |")
    w("")
    w(f"dynscope's own guard timer says {fmt_ns(g1['guard_ns_per_lookup'])} of guard "
      f"evaluation per lookup over {g1['entries']} entries (the round-robin run): a torch "
      "TENSOR_MATCH that passes is decided by torch's C++ TensorGuards check (about 0.13 µs "
      "per tensor; NumPy's struct path is about 15 ns); one that fails, or misses, reads "
      "`.dtype`, `.device`, `.shape`, `.stride()` and `.requires_grad` through the Python C "
      "API, stopping at the first part that differs (about 0.36 µs), plus GRAD_MODE. Dynamo's "
      "TENSOR_MATCH is C++ reading the tensor directly; its cost per call is dominated by "
      "the rest of its call path.")
    w("")
    w("Capture time is the first call: translation, the backend, and running the graph. "
      "dynscope also runs each op once on the example values while tracing, so an op that "
      "is slow the first time counts twice: `torch.max(x, 0)` costs ~8 ms per call here "
      "while torch's OpenMP threads are cold, hence that row.")
    w("")
    w(NOTES.strip())
    w("")
    with open(path, "w") as f:
        f.write("\n".join(lines))
    return unexplained


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "vs-dynamo.md"))
    ap.add_argument("--child", choices=["dynscope", "dynamo"], help=argparse.SUPPRESS)
    ap.add_argument("--json", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(a.child, a.json)
        return 0
    import tempfile
    res = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("dynscope", "dynamo"):
            out = os.path.join(tmp, name + ".json")
            env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
            p = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", name,
                                "--json", out], env=env, cwd=ROOT, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
            if p.returncode != 0:   # Dynamo's graph-break warnings are shown only then
                print(p.stderr, file=sys.stderr)
                print(f"compare_dynamo: the {name} run failed ({p.returncode})", file=sys.stderr)
                return 1
            with open(out) as f:
                res[name] = json.load(f)
    command = ".venv/bin/python scripts/compare_dynamo.py"
    unexplained = write_report(res["dynscope"], res["dynamo"], a.out, command)
    print(f"compare_dynamo: wrote {a.out}" + (f"; UNEXPLAINED: {', '.join(unexplained)}"
                                               if unexplained else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
