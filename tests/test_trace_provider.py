"""The LTTng tracepoint provider and scripts/lttng-capture.sh, without the engine.

tests/c/trace_smoke.c calls trace/trace.h directly (trace_init, trace_emit,
trace_frame_eval); these tests capture it with the capture script, read the
trace back from the babeltrace2 text and check every event name, field and
count against docs/events.md.  They skip, saying why, only when LTTng cannot
run here; the no-op tests (no provider) never skip.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import _programs

ROOT = Path(__file__).resolve().parent.parent
CAPTURE = ROOT / "scripts" / "lttng-capture.sh"
PROVIDER = ROOT / "build" / "libdynscope-tp.so"
SMOKE = ROOT / "build" / "tests" / "c" / "trace_smoke"

COLD_KINDS = ["compile_start", "compile_end", "recompile", "guard_fail", "graph_break",
              "graph_compiled", "cache_limit", "frame_skip", "reset", "annotate"]
CODE = {"code_id": 7, "qualname": "Model.forward", "filename": "/src/model.py",
        "firstlineno": 12}


# ---------------------------------------------------------------------------
# Building and running.

def _make(*targets):
    r = _programs.run(["make", "--no-print-directory", "-C", str(ROOT), *targets],
                      capture_output=True, text=True)
    return r


@pytest.fixture(scope="module")
def smoke():
    """build/tests/c/trace_smoke (needs no LTTng)."""
    r = _make("build/tests/c/trace_smoke")
    assert r.returncode == 0, r.stdout + r.stderr
    return SMOKE


@pytest.fixture(scope="module")
def provider(smoke):
    """build/libdynscope-tp.so, or skip when the lttng-ust headers are missing."""
    r = _make("tp")
    assert r.returncode == 0, r.stdout + r.stderr
    if not PROVIDER.exists():
        pytest.skip("LTTng cannot run here: lttng-ust headers missing, so no "
                    f"{PROVIDER.name} (install liblttng-ust-dev)")
    return PROVIDER


@pytest.fixture(scope="module")
def lttng(provider):
    """Skip unless the LTTng tools needed by the capture script are installed."""
    missing = [t for t in ("lttng", "lttng-sessiond", "babeltrace2") if not shutil.which(t)]
    if missing:
        pytest.skip(f"LTTng cannot run here: {', '.join(missing)} not installed "
                    "(lttng-tools, babeltrace2)")


def capture(tmp_path, *cmd, events=None, loglevel=None, env=None):
    """Run the capture script; returns (CompletedProcess, trace directory).
    Skips when the session daemon cannot start here.  A command that is the
    Python under test gets the test run's sanitizer preload (the script keeps
    it from the LTTng tools); any other command runs without it."""
    out = tmp_path / "trace"
    args = ["bash", str(CAPTURE), "-o", str(out)]
    if events:
        args += ["-e", events]
    if loglevel:
        args += ["-l", loglevel]
    cmd = [*map(str, cmd)]
    r = _programs.run([*args, "--", *cmd], capture_output=True, text=True, env=env, timeout=120,
                      runs_python=sys.executable in cmd)
    if r.returncode == 125 and ("lttng-sessiond failed" in r.stderr
                                or "does not answer" in r.stderr):
        pytest.skip("LTTng cannot run here: the session daemon does not start:\n" + r.stderr)
    return r, out


# ---------------------------------------------------------------------------
# babeltrace2 text.

LINE = re.compile(r"^\[(?P<ts>[^\]]+)\] \((?P<delta>[^)]+)\) (?P<host>\S+) "
                  r"(?P<provider>\w+):(?P<name>\w+): (?P<body>.*)$")
FIELD = re.compile(r"""\s*(?P<key>\w+)\s*=\s*(?:
        "(?P<str>(?:[^"\\]|\\.)*)"
      | \(\s*"(?P<enum>(?:[^"\\]|\\.)*)"\s*:\s*container\s*=\s*(?P<container>-?\d+)\s*\)
      | (?P<num>-?\d+)
    )\s*[,}]""", re.X)
ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "'": "'", '"': '"'}


def unescape(s):
    return re.sub(r"\\(.)", lambda m: ESCAPES.get(m.group(1), "\\" + m.group(1)), s)


def parse_line(line):
    """One babeltrace2 text line -> (provider:name, {field: value}); stream and
    event contexts (cpu_id, vpid, vtid, procname) merged with the payload;
    enums give their label."""
    m = LINE.match(line)
    assert m, f"not a babeltrace2 event line: {line!r}"
    fields = {}
    for f in FIELD.finditer(m.group("body")):
        if f.group("str") is not None:
            value = unescape(f.group("str"))
        elif f.group("enum") is not None:
            value = unescape(f.group("enum"))
        else:
            value = int(f.group("num"))
        assert f.group("key") not in fields, f"field {f.group('key')} twice in {line!r}"
        fields[f.group("key")] = value
    return f"{m.group('provider')}:{m.group('name')}", fields


def read_trace(out, pid=None):
    """The events of DIR/trace.txt, in order, only those of process pid if given
    (a concurrent root capture shares the session daemon and records ours)."""
    text = (out / "trace.txt").read_text()
    events = [parse_line(line) for line in text.splitlines() if line.strip()]
    return [(n, f) for n, f in events if pid is None or f.get("vpid") == pid]


def smoke_output(stdout):
    """trace_smoke emit's stdout -> (pid, {kind: enabled}, active)."""
    pid = int(re.search(r"^pid (\d+)$", stdout, re.M).group(1))
    enabled = {k: int(v) for k, v in re.findall(r"^enabled (\w+) ([01])$", stdout, re.M)}
    active = int(re.search(r"^active ([01])$", stdout, re.M).group(1))
    assert stdout.rstrip().endswith("emitted"), stdout
    return pid, enabled, active


def names(events):
    return [n.split(":", 1)[1] for n, _ in events]


# ---------------------------------------------------------------------------
# Without a provider: no-ops, never a crash.  These never skip.

def test_without_provider_every_call_is_a_noop(smoke):
    r = _programs.run([str(smoke)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "trace_smoke: ok" in r.stdout


def test_provider_path_to_nothing_leaves_tracing_off(smoke):
    env = dict(os.environ, DYNSCOPE_TRACE_PROVIDER="/nonexistent/libdynscope-tp.so")
    r = _programs.run([str(smoke), "noop"], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "cannot load the tracepoint provider: /nonexistent/libdynscope-tp.so" in r.stdout


def test_empty_provider_env_means_tracing_off(smoke):
    env = dict(os.environ, DYNSCOPE_TRACE_PROVIDER="")
    r = _programs.run([str(smoke), "noop"], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "tracing off: no provider" in r.stdout


def test_provider_of_another_abi_is_refused(smoke, tmp_path):
    # A stale provider (built from another event/event.h) must not be
    # trusted with the engine's records.
    src = tmp_path / "stale_tp.c"
    src.write_text(textwrap.dedent("""\
        #include <stdint.h>
        uint32_t dynscope_tp_abi(void) { return 0xdead; }
        void dynscope_tp_emit(const void *ev) { (void)ev; __builtin_trap(); }
        void dynscope_tp_frame_eval(long long c, int r, int e, uint64_t g)
        { (void)c; (void)r; (void)e; (void)g; __builtin_trap(); }
        static const int on = 1;
        const volatile int *dynscope_tp_state(int kind) { (void)kind; return &on; }
        """))
    so = tmp_path / "libstale-tp.so"
    _programs.run(["cc", "-shared", "-fPIC", "-o", str(so), str(src)], check=True)
    env = dict(os.environ, DYNSCOPE_TRACE_PROVIDER=str(so))
    r = _programs.run([str(smoke), "noop"], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "tracepoint provider built for another ABI" in r.stdout


def test_provider_loaded_without_a_session_records_nothing_and_does_not_crash(provider, smoke):
    env = dict(os.environ, DYNSCOPE_TRACE_PROVIDER=str(provider))
    r = _programs.run([str(smoke), "emit", "1000"], capture_output=True, text=True,
                      env=env, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    smoke_output(r.stdout)


# ---------------------------------------------------------------------------
# Captured: names, fields, counts.

@pytest.fixture(scope="module")
def full_capture(lttng, smoke, tmp_path_factory):
    r, out = capture(tmp_path_factory.mktemp("full"), smoke, "emit", "3")
    assert r.returncode == 0, r.stdout + r.stderr
    pid, enabled, active = smoke_output(r.stdout)
    return pid, enabled, active, read_trace(out, pid), out


def test_capture_records_every_event_kind_with_exact_counts(full_capture):
    _, _, _, events, _ = full_capture
    assert all(n.startswith("dynscope:") for n, _ in events)
    assert names(events) == (["frame_eval"] * 5 + COLD_KINDS + ["frame_skip"])


def test_capture_writes_ctf_and_text(full_capture):
    *_, out = full_capture
    assert (out / "trace.txt").stat().st_size > 0
    assert list((out / "ctf").rglob("metadata")), "no CTF metadata under DIR/ctf"


def test_every_event_carries_vpid_vtid_procname(full_capture):
    pid, _, _, events, _ = full_capture
    for _, f in events:
        assert f["vpid"] == pid and f["vtid"] == pid
        assert f["procname"] == "trace_smoke"
        assert "cpu_id" in f


def test_enabled_checks_follow_the_session(full_capture):
    _, enabled, active, _, _ = full_capture
    # the kinds with no tracepoint (SQLite only): never enabled
    assert enabled == {"frame_eval": 1, **{k: 1 for k in COLD_KINDS}, "entry_stats": 0,
                       "frame_stats": 0, "run_span": 0}
    assert active == 1


def test_frame_eval_fields(full_capture):
    _, _, _, events, _ = full_capture
    fe = [f for n, f in events if n == "dynscope:frame_eval"]
    payload = [{k: f[k] for k in ("code_id", "result", "entry", "guard_ns")} for f in fe]
    assert payload == [
        {"code_id": 7, "result": "hit", "entry": 0, "guard_ns": 100},
        {"code_id": 7, "result": "hit", "entry": 0, "guard_ns": 101},
        {"code_id": 7, "result": "hit", "entry": 0, "guard_ns": 102},
        {"code_id": 7, "result": "miss", "entry": -1, "guard_ns": 250},
        {"code_id": 9, "result": "skip", "entry": -1, "guard_ns": 0},
    ]


CONTEXT = {"cpu_id", "vpid", "vtid", "procname"}
ENTRY = {"compile_id": "0/1", "frame_id": 0, "frame_compile_id": 1}

EXPECTED_COLD = {
    "compile_start": {**CODE, **ENTRY, "resume_offset": 0},
    "compile_end": {**CODE, **ENTRY, "resume_offset": 0, "outcome": "ok",
                    "duration_ns": 123456, "graphs": 2, "nodes": 5, "guards": 3},
    "recompile": {**CODE, **ENTRY, "resume_offset": 0,
                  "reason": "L['x'].shape == (3, 4) (observed (5, 4))"},
    "guard_fail": {**CODE, "compile_id": "0/1", "entry_compile_id": "0/0",
                   "guard_kind": "TENSOR_MATCH", "expr": "L['x'].shape == (3, 4)",
                   "observed": "(5, 4)", "guard_file": "/src/model.py", "guard_line": 12},
    "graph_break": {**CODE, "compile_id": "0/1", "break_kind": "call",
                    "reason": "call to print", "break_file": "/src/model.py",
                    "break_line": 15, "break_offset": 24,
                    "user_stack_json": '[["/src/model.py", 15, "forward", "print(x)"]]',
                    "break_type": "DS0001", "break_class": "your code"},
    "graph_compiled": {**CODE, "compile_id": "0/1", "nodes": 4, "backend": "eager",
                       "backend_ns": 789, "ops": "add,mul"},
    "cache_limit": {**CODE, "frame_id": 0, "resume_offset": 0, "reason": "L['n'] == 8"},
    "frame_skip": {**CODE, "resume_offset": 0, "reason": "generator", "break_type": "DS0028",
                   "break_class": "engine limit"},
    "reset": {"wall_ns": 1700000000000000000},
    "annotate": {"wall_ns": 1700000000000000000, "name": "step", "phase": "mark",
                 "fields": '{"n": 12}'},
}


@pytest.mark.parametrize("kind", COLD_KINDS)
def test_cold_event_fields(full_capture, kind):
    _, _, _, events, _ = full_capture
    got = [{k: v for k, v in f.items() if k not in CONTEXT}
           for n, f in events if n == f"dynscope:{kind}"]
    assert got[0] == EXPECTED_COLD[kind]


def test_absent_strings_are_recorded_as_a_dash(full_capture):
    # lttng-ust 2.13 records an empty string field wrongly, so the provider
    # writes "-" for NULL and "" alike (docs/events.md)
    _, _, _, events, _ = full_capture
    last_name, last = events[-1]
    assert last_name == "dynscope:frame_skip"
    assert {k: last[k] for k in ("code_id", "qualname", "filename", "reason")} == {
        "code_id": 8, "qualname": "-", "filename": "-", "reason": "-"}


def test_loglevel_info_leaves_out_frame_eval(lttng, smoke, tmp_path):
    r, out = capture(tmp_path, smoke, "emit", "3", loglevel="INFO")
    assert r.returncode == 0, r.stdout + r.stderr
    pid, enabled, _ = smoke_output(r.stdout)
    assert enabled["frame_eval"] == 0
    assert all(enabled[k] == 1 for k in COLD_KINDS)
    assert names(read_trace(out, pid)) == COLD_KINDS + ["frame_skip"]


def test_event_selection_enables_only_those_tracepoints(lttng, smoke, tmp_path):
    r, out = capture(tmp_path, smoke, "emit", "3", events="recompile,dynscope:guard_fail")
    assert r.returncode == 0, r.stdout + r.stderr
    pid, enabled, active = smoke_output(r.stdout)
    assert {k for k, v in enabled.items() if v} == {"recompile", "guard_fail"}
    assert active == 1
    assert names(read_trace(out, pid)) == ["recompile", "guard_fail"]


def test_capture_exits_with_the_commands_status(lttng, tmp_path):
    r, out = capture(tmp_path, "sh", "-c", "echo hello $$; exit 3")
    assert r.returncode == 3, r.stderr
    word, pid = r.stdout.split()
    assert word == "hello"
    # (the session records every process of the user: only the command's count)
    assert read_trace(out, int(pid)) == []


def test_command_sees_provider_and_fork_preload(lttng, provider, tmp_path):
    r, _ = capture(tmp_path, "sh", "-c",
                   'echo "$DYNSCOPE_TRACE_PROVIDER"; echo "$LD_PRELOAD"')
    assert r.returncode == 0, r.stderr
    provider_env, preload = r.stdout.splitlines()
    assert provider_env == str(provider)
    assert preload.endswith("liblttng-ust-fork.so")


def test_children_started_by_the_command_are_traced(lttng, smoke, tmp_path):
    r, out = capture(tmp_path, "sh", "-c", f"{smoke} emit 1 && {smoke} emit 1")
    assert r.returncode == 0, r.stdout + r.stderr
    pids = [int(p) for p in re.findall(r"^pid (\d+)$", r.stdout, re.M)]
    assert len(pids) == 2
    for pid in pids:
        assert names(read_trace(out, pid)) == ["frame_eval"] * 3 + COLD_KINDS + ["frame_skip"]


def test_child_forked_without_exec_is_traced(lttng, smoke, tmp_path):
    # The provider is loaded before fork(), as in a multiprocessing worker.
    r, out = capture(tmp_path, smoke, "fork-emit", "2")
    assert r.returncode == 0, r.stdout + r.stderr
    pid, _, _ = smoke_output(r.stdout)
    assert names(read_trace(out, pid)) == ["frame_eval"] * 4 + COLD_KINDS + ["frame_skip"]


def test_capture_without_lttng_says_so(tmp_path):
    # A PATH with none of the LTTng tools (only what the script needs first).
    bindir = tmp_path / "bin"
    bindir.mkdir()
    os.symlink(shutil.which("dirname"), bindir / "dirname")
    env = dict(os.environ, PATH=str(bindir))
    r = _programs.run([shutil.which("bash"), str(CAPTURE), "--", "true"],
                      capture_output=True, text=True, env=env)
    assert r.returncode == 125
    assert "lttng not found" in r.stderr


# ---------------------------------------------------------------------------
# When `import dynscope` loads the provider.

def _import_dynscope(env_extra, tmp_path):
    """import dynscope in a fresh interpreter: its _trace_status and thread count."""
    import json
    import sys
    env = dict(os.environ, PYTHONPATH=str(ROOT), OPENBLAS_NUM_THREADS="1",
               LTTNG_HOME=str(tmp_path), **env_extra)
    for key in ("DYNSCOPE_TRACE_PROVIDER", "DYNSCOPE_DB"):
        if key not in env_extra:
            env.pop(key, None)
    r = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import json, os, dynscope
        print(json.dumps([dynscope._trace_status, len(os.listdir("/proc/self/task"))]))
    """)], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_without_a_session_daemon_import_leaves_the_provider_unloaded(tmp_path):
    """Loading the provider starts lttng-ust's listener threads, which a
    program sees (3.12 warns at os.fork()); with no daemon to trace for,
    import dynscope starts none."""
    if any(os.path.exists(os.path.join(d, "lttng-ust-sock-8")) for d in ("/var/run/lttng", "/run/lttng")):
        pytest.skip("a system-wide LTTng session daemon is running here")
    status, threads = _import_dynscope({}, tmp_path)
    assert status.startswith("tracing off: no LTTng session daemon was running at import")
    assert threads == 1


def test_an_explicit_provider_is_loaded_without_a_daemon(provider, tmp_path):
    status, threads = _import_dynscope({"DYNSCOPE_TRACE_PROVIDER": str(provider)}, tmp_path)
    assert status is True
    assert threads == 3             # lttng-ust's two listener threads
