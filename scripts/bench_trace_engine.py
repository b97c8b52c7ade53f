"""LTTng in the engine: what the tracepoints cost a captured program, measured
on the engine itself (scripts/bench_trace.py measures trace/trace.h alone).

    make bench                                   # runs every scripts/bench_*.py
    .venv/bin/python scripts/bench_trace_engine.py [--no-doc] [options: --help]
    .venv/bin/python scripts/bench_trace_engine.py --quick   # one short phase each: ~10 s

Four questions:

1. Cache-hit cost of a captured 2-input function (add2 on float64 (4,)) with
   the tracepoint provider loaded and no session, next to the provider not
   loaded (DYNSCOPE_TRACE_PROVIDER=0).  Target: within 2 %.
2. The cost of one enabled event: the same hit loop recorded by
   scripts/lttng-capture.sh (dynscope:*, so every hit is a frame_eval
   event), against the loop without a session.
3. Whole-workload slowdown of a recompile- and break-heavy workload with
   every event recorded, and with cold events only (-l INFO).
4. Events lost: the tracer's discarded-event count (the capture script's
   warning), babeltrace2's warnings, and the trace's event counts against
   the engine's own counters -- 0 expected at the capture script's buffer
   sizes.

Method (a noisy machine): each comparison is a *phase* of two long-lived
child processes that run one short timed round at a time, alternately
(ABBA order), told by this script over a pipe; the result is the median of
the per-round paired ratios (or differences), over several phases with
fresh processes.  The baseline of every phase is a child with tracing off
(DYNSCOPE_TRACE_PROVIDER=0): a child with the provider loaded cannot run
beside a session, because a root (per-UID) session records every process
of its user.  So the cost of an event is (session - off) - (loaded - off).

The tables are printed and written to docs/performance.md between
<!-- bench_trace_engine:start --> and <!-- bench_trace_engine:end -->;
other sections stay as they are.  A child that does not answer within
ANSWER_S is killed and the benchmark fails, naming it; so does a workload
that reaches no cache limit (it would no longer be the workload described).
"""
from __future__ import annotations

import argparse
import collections
import datetime
import gc
import json
import os
import platform
import re
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import perfdoc  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PROVIDER = os.path.join(ROOT, "build", "libdynscope-tp.so")
CAPTURE = os.path.join(HERE, "lttng-capture.sh")
DOC = os.path.join(ROOT, "docs", "performance.md")
START = "<!-- bench_trace_engine:start -->"
END = "<!-- bench_trace_engine:end -->"
TARGET = 0.02      # provider loaded, no session: within 2 % of not loaded
ANSWER_S = 300     # a child's start or one round, at most


# ---------------------------------------------------------------------------
# Children: set up, say READY, then run one timed round per "run" line read
# from stdin (answering ROUND <seconds>), and on "end" answer END <json>.

def hit_child(calls):
    """The hit loop: add2 captured; a round is `calls` hits."""
    import numpy as np
    import dynscope
    from dynscope import _C

    def add2(a, b):
        return a + b

    f = dynscope.optimize("eager")(add2)
    a, b = np.ones(4), np.ones(4)

    def round_():
        for _ in range(calls):
            f(a, b)

    def summary():
        c = _C.counters()
        (e,) = dynscope.cache_entries(add2)
        assert e.hits == c["hits"], (e.hits, c)
        return {"counters": c, "expect": {"frame_eval:hit": c["hits"],
                                          "frame_eval:miss": c["misses"]}}

    round_()           # compile and warm up
    return round_, summary, dynscope._trace_status


def workload_child(epochs):
    """A recompile- and break-heavy workload; a round is `epochs` epochs,
    each dropping the caches and running a step with a print, a branch on
    a tensor value and an .item() over 4 shapes, and a function over 10
    constants (past the cache limit of 8)."""
    import io
    import warnings
    import numpy as np
    import dynscope
    from dynscope import _C

    sink = io.StringIO()

    def step(x, w, lr):
        y = x @ w
        print("loss", file=sink)               # call break
        if y.sum() > 0:                        # data-dependent branch
            y = y * lr
        return y - y.mean().item()             # data escape

    def scale(x, n):
        return x * n + 1

    # dynamic=False: each shape and constant recompiles, as the workload says
    # (automatic dynamic would make them graph inputs after one recompile,
    # and scale() would never reach the cache limit).
    opt_step = dynscope.optimize("eager", dynamic=False)(step)
    opt_scale = dynscope.optimize("eager", dynamic=False)(scale)
    rng = np.random.default_rng(0)
    shapes = [(8, 4), (16, 4), (32, 4), (8, 4)]
    data = {s: (rng.standard_normal(s), rng.standard_normal((s[1], 4))) for s in shapes}
    totals = collections.Counter()
    nepochs = [0]
    warnings.simplefilter("ignore", dynscope.CacheLimitWarning)

    def round_():
        for _ in range(epochs):
            dynscope.reset()
            for s in shapes:
                x, w = data[s]
                for i in range(25):
                    opt_step(x, w if i % 2 else -w, 0.5)
                    opt_scale(x, i % 10)
            totals.update(_C.counters())       # reset() zeroes them
            nepochs[0] += 1
            sink.seek(0)
            sink.truncate()

    def summary():
        c = dict(totals)
        return {"counters": c, "epochs": nepochs[0],
                "expect": {"frame_eval:hit": c["hits"], "frame_eval:miss": c["misses"],
                           "recompile": c["recompiles"], "graph_break": c["graph_breaks"],
                           "cache_limit": c["cache_limits"], "reset": nepochs[0]}}

    round_()           # warm up (counted: the trace has its events too)
    return round_, summary, dynscope._trace_status


def child_main(kind, size):
    make = {"hit": hit_child, "workload": workload_child}[kind]
    round_, summary, status = make(size)
    out = sys.stdout
    out.write("READY " + json.dumps({"pid": os.getpid(), "trace": status}) + "\n")
    out.flush()
    for line in sys.stdin:
        cmd = line.strip()
        if cmd == "run":
            gc.collect()
            gc.disable()
            t0 = time.perf_counter_ns()
            round_()
            t1 = time.perf_counter_ns()
            gc.enable()
            out.write(f"ROUND {(t1 - t0) / 1e9!r}\n")
        elif cmd == "end":
            out.write("END " + json.dumps(summary()) + "\n")
            out.flush()
            return 0
        out.flush()
    return 1


# ---------------------------------------------------------------------------
# Driving children.

class NoLTTng(Exception):
    pass


TRACE_EVENT = re.compile(r"^\[[^\]]+\] \([^)]+\) \S+ dynscope:(\w+): .*?vpid = (\d+)")
FRAME_RESULT = re.compile(r'result = \( "(\w+)"')


def count_trace(path, pid):
    """Events of process pid in a babeltrace2 text: {name: n}, frame_eval
    also split by result ("frame_eval:hit", ...)."""
    n = collections.Counter()
    with open(path) as fh:
        for line in fh:
            m = TRACE_EVENT.match(line)
            if m is None or int(m.group(2)) != pid:
                continue
            n[m.group(1)] += 1
            if m.group(1) == "frame_eval":
                n["frame_eval:" + FRAME_RESULT.search(line).group(1)] += 1
    return n


class Child:
    """A child process running rounds on demand: plain, with a provider path
    (or "0"), or under lttng-capture.sh (session=True, at loglevel)."""

    def __init__(self, kind, size, provider=None, session=False, loglevel=None):
        self.session = session
        self.tmp = tempfile.mkdtemp(prefix="bench-trace-engine-") if session else None
        cmd = [sys.executable, os.path.abspath(__file__), "--child", kind, str(size)]
        env = dict(os.environ, PYTHONPATH=ROOT)
        if session:
            env.pop("DYNSCOPE_TRACE_PROVIDER", None)
            self.out = os.path.join(self.tmp, "t")
            cmd = ["bash", CAPTURE, "-o", self.out] + (["-l", loglevel] if loglevel else []) \
                + ["--"] + cmd
        else:
            env["DYNSCOPE_TRACE_PROVIDER"] = provider
        self.proc = subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.pid = None
        line = self.answer("start")
        if not line.startswith("READY "):
            _, err = self.proc.communicate(timeout=120)
            if session and self.proc.returncode == 125:
                raise NoLTTng(err)
            raise RuntimeError(f"child {cmd} did not start:\n{line}{err}")
        ready = json.loads(line[6:])
        self.pid, self.trace = ready["pid"], ready["trace"]
        self.rounds = []

    def answer(self, what):
        """The child's next line, waited for at most ANSWER_S; RuntimeError
        (the child killed) when none comes.  A child writes one line per
        command, so after readline nothing is left buffered for select to miss."""
        ready, _, _ = select.select([self.proc.stdout], [], [], ANSWER_S)
        if not ready:
            if self.pid is not None:       # the Python child itself, under a capture
                try:
                    os.kill(self.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            self.proc.kill()
            raise RuntimeError(f"bench_trace_engine: child {self.pid or self.proc.args} did not "
                               f"answer '{what}' within {ANSWER_S} s; killed")
        return self.proc.stdout.readline()

    def run(self):
        self.proc.stdin.write("run\n")
        self.proc.stdin.flush()
        line = self.answer("run")
        if not line.startswith("ROUND "):
            raise RuntimeError(f"child {self.pid}: {line!r}")
        self.rounds.append(float(line[6:]))

    def end(self):
        """Stop the child; returns its summary, and for a session the trace's
        counts and losses."""
        self.proc.stdin.write("end\n")
        self.proc.stdin.flush()
        line = self.answer("end")
        if not line.startswith("END "):
            raise RuntimeError(f"child {self.pid}: {line!r}")
        res = json.loads(line[4:])
        rest, err = self.proc.communicate(timeout=300)   # closes stdin
        if self.proc.returncode != 0:
            raise RuntimeError(f"child {self.pid} exited {self.proc.returncode}:\n{rest}{err}")
        if self.session:
            m = re.search(r"discarded (\d+) events", err)
            res["discarded"] = int(m.group(1)) if m else 0
            with open(os.path.join(self.out, "babeltrace2.log")) as fh:
                res["bt2_warnings"] = sum(1 for line in fh if line.strip())
            res["events"] = dict(count_trace(os.path.join(self.out, "trace.txt"), self.pid))
            shutil.rmtree(self.tmp, ignore_errors=True)
        return res


def phase(kind, size, rounds, other):
    """A tracing-off child and `other` (Child keyword arguments), `rounds`
    rounds each in ABBA order.  Returns (off rounds, other rounds, other's
    trace status, other's end summary)."""
    off = Child(kind, size, provider="0")
    try:
        b = Child(kind, size, **other)
    except BaseException:
        off.proc.kill()
        raise
    for i in range(rounds):
        for c in ((off, b) if i % 2 == 0 else (b, off)):
            c.run()
    off.end()
    b_end = b.end()
    assert off.trace is not True, f"the tracing-off child loaded a provider: {off.trace}"
    assert b.trace is True, f"the child did not load the provider: {b.trace}"
    return off.rounds, b.rounds, b_end


def paired(off, other, ratio=True):
    return [(o2 / o1 if ratio else o2 - o1) for o1, o2 in zip(off, other)]


# ---------------------------------------------------------------------------
# The measurements.

def measure(args, log):
    r = {}
    ph = {"loaded": [], "session": [], "wl_loaded": [], "wl_all": [], "wl_info": []}
    for rep in range(args.reps):
        ph["loaded"].append(phase("hit", args.calls, args.rounds, {"provider": PROVIDER}))
        log(f"hit loop, provider loaded vs off: phase {rep + 1}/{args.reps}")
    for rep in range(args.session_reps):
        ph["session"].append(phase("hit", args.calls, args.session_rounds, {"session": True}))
        log(f"hit loop, session vs off: phase {rep + 1}/{args.session_reps}")
    for rep in range(args.wl_reps):
        ph["wl_loaded"].append(phase("workload", args.epochs, args.wl_rounds,
                                     {"provider": PROVIDER}))
        ph["wl_all"].append(phase("workload", args.epochs, args.wl_rounds, {"session": True}))
        ph["wl_info"].append(phase("workload", args.epochs, args.wl_rounds,
                                   {"session": True, "loglevel": "INFO"}))
        log(f"workload: phases {rep + 1}/{args.wl_reps}")
    return ph


def stats(values):
    return statistics.median(values), min(values), max(values)


def summarize(args, ph):
    s = {}
    calls = args.calls
    ns = lambda rounds: [x / calls * 1e9 for x in rounds]  # noqa: E731
    # 1. loaded vs off: median of the paired per-round ratios over all phases,
    # and each phase's own median
    ratios = [x for off, ld, _ in ph["loaded"] for x in paired(off, ld)]
    s["loaded_ratio"] = statistics.median(ratios)
    s["loaded_phase_ratios"] = [statistics.median(paired(off, ld)) for off, ld, _ in ph["loaded"]]
    s["loaded_phase_median"] = statistics.median(s["loaded_phase_ratios"])
    # a process runs the loop either "fast" or ~5 % "slow" (its memory
    # layout); the fastest process of each kind compares like with like
    s["fast_off"] = min(statistics.median(ns(off)) for off, _, _ in ph["loaded"])
    s["fast_loaded"] = min(statistics.median(ns(ld)) for _, ld, _ in ph["loaded"])
    s["hit_off"] = stats([x for off, _, _ in ph["loaded"] for x in ns(off)])
    s["hit_loaded"] = stats([x for _, ld, _ in ph["loaded"] for x in ns(ld)])
    s["loaded_delta_ns"] = statistics.median(
        [x for off, ld, _ in ph["loaded"] for x in paired(ns(off), ns(ld), ratio=False)])
    # 2. session vs off, then minus loaded vs off
    s["hit_off_s"] = stats([x for off, _, _ in ph["session"] for x in ns(off)])
    s["hit_session"] = stats([x for _, se, _ in ph["session"] for x in ns(se)])
    s["session_delta_ns"] = statistics.median(
        [x for off, se, _ in ph["session"] for x in paired(ns(off), ns(se), ratio=False)])
    s["session_phase_deltas"] = [statistics.median(paired(ns(off), ns(se), ratio=False))
                                 for off, se, _ in ph["session"]]
    s["event_ns"] = s["session_delta_ns"] - s["loaded_delta_ns"]
    s["session_ratio"] = statistics.median(
        [x for off, se, _ in ph["session"] for x in paired(off, se)])
    # 3. workload
    for name in ("wl_loaded", "wl_all", "wl_info"):
        s[name] = statistics.median([x for off, o, _ in ph[name] for x in paired(off, o)])
        s[name + "_phases"] = [statistics.median(paired(off, o)) for off, o, _ in ph[name]]
        s[name + "_s"] = stats([x for _, o, _ in ph[name] for x in o])
    s["wl_off_s"] = stats([x for name in ("wl_loaded", "wl_all", "wl_info")
                           for off, _, _ in ph[name] for x in off])
    s["wl_slowdown_all"] = s["wl_all"] / s["wl_loaded"]
    s["wl_slowdown_info"] = s["wl_info"] / s["wl_loaded"]
    # 4. losses, in every session
    lost = []
    for name in ("session", "wl_all", "wl_info"):
        for _, _, end in ph[name]:
            ev = end["events"]
            expect = dict(end["expect"])
            if name == "wl_info":
                expect = {k: v for k, v in expect.items() if not k.startswith("frame_eval")}
                expect["frame_eval"] = 0
            diff = [(k, ev.get(k, 0), v) for k, v in expect.items() if ev.get(k, 0) != v]
            lost.append((name, end["discarded"], end["bt2_warnings"], diff,
                         sum(v for k, v in ev.items() if ":" not in k)))
    s["lost"] = lost
    s["wl_events"] = {name: ph[name][0][2]["events"] for name in ("wl_all", "wl_info")}
    s["session_events"] = ph["session"][0][2]["events"]
    end = ph["wl_loaded"][0][2]
    s["wl_counters"] = {k: v / end["epochs"] for k, v in end["counters"].items()}
    if not (s["wl_counters"]["cache_limits"] >= 1 and s["wl_counters"]["recompiles"] >= 1):
        raise SystemExit("bench_trace_engine: the workload is not recompile-heavy any more "
                         f"(per epoch: {s['wl_counters']}); expected recompiles and a cache limit")
    return s


# ---------------------------------------------------------------------------
# Report.

def fmt(st, unit="", digits=1):
    return f"{st[0]:.{digits}f}{unit} | {st[1]:.{digits}f}-{st[2]:.{digits}f}"


def tables(args, s):
    verdict = "within" if abs(s["loaded_ratio"] - 1) <= TARGET else "OUTSIDE"
    hit = [
        "| case | ns/hit (median round) | min-max over rounds |",
        "|---|---:|---:|",
        f"| tracing off (`DYNSCOPE_TRACE_PROVIDER=0`), beside the next row | {fmt(s['hit_off'])} |",
        f"| provider loaded, no session | {fmt(s['hit_loaded'])} |",
        f"| tracing off, beside the next row | {fmt(s['hit_off_s'])} |",
        f"| session recording `dynscope:*` (a frame_eval event per hit) | {fmt(s['hit_session'])} |",
        "",
        f"- **provider loaded, no session vs not loaded: {s['loaded_ratio']:.3f}x** "
        f"({(s['loaded_ratio'] - 1) * 100:+.1f} %, {s['loaded_delta_ns']:+.1f} ns; median of "
        f"the paired per-round ratios; median of the phases {s['loaded_phase_median']:.3f}x; "
        "per phase: " + ", ".join(f"{x:.3f}x" for x in s["loaded_phase_ratios"])
        + f") -- {verdict} the 2 % target",
        f"- the fastest process of each kind (its median round): off {s['fast_off']:.1f} ns, "
        f"loaded {s['fast_loaded']:.1f} ns: **{s['fast_loaded'] / s['fast_off']:.3f}x**",
        f"- **one enabled event: {s['event_ns']:+.0f} ns** per hit: session vs off "
        f"{s['session_delta_ns']:+.0f} ns ({s['session_ratio']:.2f}x; per phase: "
        + ", ".join(f"{x:+.0f}" for x in s["session_phase_deltas"])
        + f" ns) minus loaded vs off {s['loaded_delta_ns']:+.1f} ns.  It includes the two "
        "guard-clock reads a listening session turns on.",
    ]
    ev_all, ev_info = s["wl_events"]["wl_all"], s["wl_events"]["wl_info"]
    n_all = sum(v for k, v in ev_all.items() if ":" not in k)
    n_info = sum(v for k, v in ev_info.items() if ":" not in k)
    per_round = lambda n: n // (args.wl_rounds + 1)  # noqa: E731  (+1: the warm-up round)
    wl = [
        "| case | s per round (median) | min-max | vs tracing off (paired) | "
        "vs provider loaded | events per round |",
        "|---|---:|---:|---:|---:|---:|",
        f"| tracing off (all phases) | {fmt(s['wl_off_s'], digits=4)} | 1.000x | | |",
        f"| provider loaded, no session | {fmt(s['wl_loaded_s'], digits=4)} "
        f"| {s['wl_loaded']:.3f}x | 1.000x | 0 |",
        f"| `-l INFO`: cold events only | {fmt(s['wl_info_s'], digits=4)} "
        f"| {s['wl_info']:.3f}x | **{s['wl_slowdown_info']:.3f}x** | {per_round(n_info)} |",
        f"| all events (`dynscope:*`) | {fmt(s['wl_all_s'], digits=4)} "
        f"| {s['wl_all']:.3f}x | **{s['wl_slowdown_all']:.3f}x** | {per_round(n_all)} |",
    ]
    return hit, wl


def lost_text(s):
    discarded = sum(x[1] for x in s["lost"])
    warnings_ = sum(x[2] for x in s["lost"])
    diffs = [(x[0], x[3]) for x in s["lost"] if x[3]]
    events = sum(x[4] for x in s["lost"])
    if not (discarded or warnings_ or diffs):
        return (f"**0 events lost** in {len(s['lost'])} sessions ({events} events): the "
                "tracer discarded none, babeltrace2 warned of no gap, and each trace's "
                "frame_eval hits and misses (and for the workload its recompile, graph_break, "
                "cache_limit and reset events) equal the engine's counters")
    return (f"**events lost**: {discarded} discarded, {warnings_} babeltrace2 warnings, "
            f"count mismatches (session, [(event, traced, engine)]): {diffs}")


def machine():
    cpu = perfdoc.cpu_model()
    lttng = subprocess.run(["lttng", "--version"], capture_output=True, text=True).stdout.strip() \
        if shutil.which("lttng") else "lttng not installed"
    import numpy
    return {"nproc": os.cpu_count(), "cpu": cpu, "kernel": platform.release(), "lttng": lttng,
            "commit": perfdoc.engine_revision(ROOT, ("engine", "trace")),
            "python": platform.python_version(), "numpy": numpy.__version__}


def command(args):
    return (f".venv/bin/python scripts/bench_trace_engine.py --reps {args.reps} "
            f"--rounds {args.rounds} --calls {args.calls} --session-reps {args.session_reps} "
            f"--session-rounds {args.session_rounds} --wl-reps {args.wl_reps} "
            f"--wl-rounds {args.wl_rounds} --epochs {args.epochs}")


def doc_section(args, s, elapsed):
    m = machine()
    hit, wl = tables(args, s)
    c = s["wl_counters"]
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    kinds = ", ".join(f"{k} {v}" for k, v in sorted(s["wl_events"]["wl_all"].items())
                      if ":" not in k)
    return "\n".join([
        START,
        "## LTTng in the engine: hit cost, event cost, workload slowdown, lost events",
        "",
        "What the tracepoints cost a captured program, measured on the engine (the C",
        "hooks alone: the `bench_trace` section).  Each comparison is a phase of two",
        "long-lived child processes that run one short timed round at a time,",
        "alternately (ABBA), so both see the same machine; a result is the median of",
        "the paired per-round ratios over every phase, each phase with fresh",
        "processes.  The baseline of every phase is *tracing off*",
        "(`DYNSCOPE_TRACE_PROVIDER=0`): a child with the provider loaded cannot run",
        "beside a session, since a root (per-UID) session records every process of",
        "its user.  *Provider loaded* is `build/libdynscope-tp.so` with no session; a",
        "*session* is `scripts/lttng-capture.sh` (its default buffers: per-UID,",
        "4 x 1 MiB sub-buffers per CPU; the vpid/vtid/procname contexts).",
        "",
        *perfdoc.regenerate(command(args)),
        "",
        f"- date: {now}",
        f"- machine: {m['nproc']} CPUs (nproc), {m['cpu']}, Linux {m['kernel']}; {m['lttng']}",
        f"- Python {m['python']}, NumPy {m['numpy']}; engine at commit {m['commit']}; "
        f"whole run {elapsed:.0f} s",
        "",
        "### Cache hit of a captured 2-input function",
        "",
        "`add2(a, b): return a + b` on float64 (4,) under `optimize(\"eager\")`, every call "
        f"a hit; a round is {args.calls} calls; {args.reps} phases x {args.rounds} rounds "
        f"(provider loaded vs off), {args.session_reps} phases x {args.session_rounds} rounds "
        "(session vs off).",
        "",
        *hit,
        "",
        "### A recompile- and break-heavy workload",
        "",
        f"A round is {args.epochs} epochs; an epoch is `dynscope.reset()`, then 4 shapes x "
        "25 calls of a step with a print, a branch on a tensor value and an `.item()` "
        "(three breaks; both sides of the branch), and of a function over 10 constants "
        f"(past the cache limit of 8).  {args.wl_reps} phases x {args.wl_rounds} rounds per "
        f"case.  An epoch: {c['compiles']:.0f} compiles, {c['recompiles']:.0f} recompiles, "
        f"{c['graph_breaks']:.0f} graph breaks, {c['cache_limits']:.0f} cache limit, "
        f"{c['hits']:.0f} hits, {c['misses']:.0f} misses.",
        "",
        *wl,
        "",
        f"Events of one `dynscope:*` session (its {args.wl_rounds} rounds and the warm-up "
        f"round): {kinds}.",
        "",
        "### Events lost",
        "",
        lost_text(s) + ".  Buffers: the capture script's defaults.",
        "",
        "Reading it: the loaded-without-session ratio is the price of having LTTng",
        "ready (per hook, one load and a predicted branch), a fraction of a",
        "nanosecond against a ~450 ns hit, below what the machine can resolve: a",
        "process runs the loop either at one speed or ~5 % slower, whatever it",
        "loaded (its memory layout), so a pair of processes reads 0.95x, 1.00x or",
        "1.05x; hence many phases, the median, and the fastest-process check.  The",
        "per-event cost is what recording frame_eval adds to every hit.  Cold events",
        "come with compiles: in steady state (hits only) `-l INFO` costs what the",
        "loaded-without-session row costs.  This workload compiles about once every",
        "nine calls, and there a compile's events cost microseconds each, mostly for",
        "fields LTTng does not record: while any sink listens, `compile_end` renders",
        "every guard to text (SQLite's `guards_text`) and `graph_compiled` renders",
        "the graph's Python code (SQLite's `code`) -- an engine issue, as is the",
        "graph_break record's json.dumps running under the frame hook (see",
        "tests/test_trace_engine.py and docs/tracing.md).",
        END,
    ]) + "\n"


def write_doc(text):
    """Replace this benchmark's section of docs/performance.md (scripts/perfdoc.py)."""
    perfdoc.write_section(DOC, START, END, text)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        return child_main(argv[1], int(argv[2]))
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reps", type=int, default=16, help="phases: provider loaded vs off")
    p.add_argument("--rounds", type=int, default=20, help="rounds per child in those phases")
    p.add_argument("--calls", type=int, default=20_000, help="hits per round")
    p.add_argument("--session-reps", type=int, default=2, help="phases: session vs off")
    p.add_argument("--session-rounds", type=int, default=25,
                   help="rounds per child in those phases (the trace must fit the buffers)")
    p.add_argument("--wl-reps", type=int, default=2,
                   help="phases per workload case (loaded, all events, -l INFO)")
    p.add_argument("--wl-rounds", type=int, default=20, help="rounds per workload child")
    p.add_argument("--epochs", type=int, default=10, help="workload epochs per round")
    p.add_argument("--no-doc", action="store_true", help="print only; leave docs/ alone")
    args = perfdoc.parse_args(p, argv, quick={
        "reps": 1, "rounds": 2, "calls": 500, "session_reps": 1, "session_rounds": 2,
        "wl_reps": 1, "wl_rounds": 1, "epochs": 1})

    subprocess.run(["make", "--no-print-directory", "-C", ROOT, "tp"], check=True,
                   stdout=subprocess.DEVNULL, timeout=600)
    if not os.path.exists(PROVIDER):
        print("bench_trace_engine: LTTng cannot run here (no build/libdynscope-tp.so: lttng-ust "
              "headers missing); skipped")
        return 0
    t0 = time.perf_counter()

    def log(msg):
        print(f"bench_trace_engine: {msg} ({time.perf_counter() - t0:.0f} s)", flush=True)

    try:
        ph = measure(args, log)
    except NoLTTng as e:
        print(f"bench_trace_engine: LTTng cannot run here; skipped:\n{e}")
        return 0
    elapsed = time.perf_counter() - t0
    s = summarize(args, ph)
    hit, wl = tables(args, s)
    print("\n".join(hit + [""] + wl + ["", lost_text(s)]))
    print(f"bench_trace_engine: {elapsed:.1f} s")
    if not args.no_doc:
        write_doc(doc_section(args, s, elapsed))
        print(f"bench_trace_engine: wrote the bench_trace_engine section of "
              f"{os.path.relpath(DOC, ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
