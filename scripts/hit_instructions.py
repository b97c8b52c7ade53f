"""Instructions per cache hit, counted by callgrind: a number that does not
depend on what else the machine is doing, for comparing two builds or two
CPython versions.

    python scripts/hit_instructions.py [--python PY ...] [TREE ...]
    python scripts/hit_instructions.py --breakdown [CASE]


For each interpreter PY (default: this one), each TREE (a checkout with its
extension built for PY; default: this one) and each case, runs `valgrind
--tool=callgrind` on a loop of N and of 3N calls and prints (Ir(3N) - Ir(N))
/ 2N: the instructions of one call, set-up and interpreter start-up
cancelled out -- for the captured hit and for the same function called
eagerly, and the hit's overhead (their difference).  PYTHONHASHSEED=0, one
OpenBLAS thread, no LTTng provider (a session daemon running elsewhere would
load it, with its threads) and a loop script alone in a directory of its own
(the directory is sys.path[0]: imports list it, and a busy /tmp changes from
one run to the next) keep the counts repeatable to the instruction
(tests/test_hit_cost.py holds the hit to a budget with them).

--breakdown (this interpreter and tree; CASE default axb1) splits one call's
instructions by where they are spent, hit and eager side by side: the
engine's parts by source file (region enter/exit, hook and cache lookup,
guards, plan, graph interpreter) and the rest (CPython's call machinery,
NumPy's ops).  That is the floor analysis of docs/performance.md.
"""
from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
N = 10000

LOOP = """
import sys, numpy as np, dynscope
def add2(a, b):
    return a + b
def axb1(a, b):
    return a * b + 1
def ident(a, b):
    return a
def branchy(a, b):
    c = a * b
    if c.sum() > 0:        # a graph break: two graphs and an eager truth test
        return c + 1
    return c - 1
fn = {"add2": add2, "axb1": axb1, "ident": ident, "branchy": branchy}[sys.argv[1]]
opt = dynscope.optimize("eager")(fn) if sys.argv[3] == "hit" else fn
a = np.ones(4); b = np.ones(4)
opt(a, b)
for _ in range(int(sys.argv[2])):
    opt(a, b)
"""
CASES = ("add2", "axb1", "ident", "branchy")    # LOOP's functions


@contextlib.contextmanager
def loop_script():
    """The path of LOOP written to a file alone in a new directory (removed
    after)."""
    d = tempfile.mkdtemp(prefix="hit_instructions.")
    try:
        path = os.path.join(d, "loop.py")
        with open(path, "w") as f:
            f.write(LOOP)
        yield path
    finally:
        shutil.rmtree(d, ignore_errors=True)


def run_env(tree: str) -> dict:
    return dict(os.environ, PYTHONPATH=tree, PYTHONHASHSEED="0", OPENBLAS_NUM_THREADS="1",
                DYNSCOPE_TRACE_PROVIDER="0")


def instructions(python: str, tree: str, case: str, mode: str, n: int, script: str) -> int:
    env = run_env(tree)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cg.out")
        r = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                            python, script, case, str(n), mode],
                           env=env, capture_output=True, text=True)
    m = re.search(r"Collected : (\d+)", r.stderr)
    if r.returncode != 0 or m is None:
        raise SystemExit(f"callgrind failed on {tree} ({case}): {r.stderr[-500:]}")
    return int(m.group(1))


# Which part of a hit each engine function belongs to (by file; hook.c's
# region functions apart).  Everything else is CPython or NumPy.
PARTS = [
    ("region enter/exit (OptimizedFunction call)",
     lambda f, fn: f.endswith("binding/engine.c") or fn in ("capture_enter", "capture_exit",
                                                           "hook_install", "hook_uninstall")),
    ("hook, cache lookup, frame handling",
     lambda f, fn: f.endswith(("engine/capture/hook.c", "engine/capture/cache.c", "engine/base/pycompat.c",
                               "engine/capture/capture.h", "engine/base/base.h", "engine/base/pycompat.h"))),
    ("guards", lambda f, fn: "engine/guards/" in f),
    ("plan", lambda f, fn: f.endswith("engine/plan/plan.c")),
    ("graph interpreter", lambda f, fn: "engine/graph/" in f),
]


def functions(python: str, tree: str, case: str, mode: str, n: int, script: str) -> dict:
    """{(file, function): exclusive instructions} of one callgrind run."""
    env = run_env(tree)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cg.out")
        subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                        python, script, case, str(n), mode],
                       env=env, capture_output=True, text=True, check=True)
        text = subprocess.run(["callgrind_annotate", "--threshold=100", out],
                              capture_output=True, text=True, check=True).stdout
    res = {}
    for line in text.splitlines():
        m = re.match(r"\s*([\d,]+)\s+(?:\([^)]*\)\s+)?(\S+?):(\S+?)(?: \[|$)", line)
        if m:
            key = (m.group(2), m.group(3).split(".")[0].split("'")[0])
            res[key] = res.get(key, 0) + int(m.group(1).replace(",", ""))
    return res


def breakdown(python: str, tree: str, case: str, script: str) -> None:
    per = {}
    for mode in ("hit", "eager"):
        lo = functions(python, tree, case, mode, N, script)
        hi = functions(python, tree, case, mode, 3 * N, script)
        per[mode] = {k: (hi.get(k, 0) - lo.get(k, 0)) / (2 * N) for k in set(lo) | set(hi)}
    rows = {name: 0.0 for name, _ in PARTS}
    rest = {"hit": 0.0, "eager": 0.0}
    # A function is ours by the file that defines it; lines a header inlined
    # into it (object.h:program_run) go with it.
    owner = {}
    for mode in ("hit", "eager"):
        for f, fn in per[mode]:
            for name, match in PARTS:
                if match(f, fn):
                    owner[fn] = name
                    break
    for mode in ("hit", "eager"):
        for (f, fn), v in per[mode].items():
            if fn in owner and mode == "hit":
                rows[owner[fn]] += v
            elif fn not in owner:
                rest[mode] += v
    total_hit = sum(per["hit"].values())
    total_eager = sum(per["eager"].values())
    print(f"{case}: instructions per call, hit {total_hit:.0f}, eager {total_eager:.0f}, "
          f"overhead {total_hit - total_eager:.0f}")
    print(f"{'part':48s} {'hit':>8s} {'eager':>8s}")
    for name, _ in PARTS:
        print(f"{name:48s} {rows[name]:8.0f} {0:8.0f}")
    print(f"{'CPython and NumPy (calls, frames, the ops)':48s} {rest['hit']:8.0f} {rest['eager']:8.0f}")


def per_call(python: str, tree: str, case: str, mode: str, script: str) -> float:
    lo = instructions(python, tree, case, mode, N, script)
    hi = instructions(python, tree, case, mode, 3 * N, script)
    return (hi - lo) / (2 * N)


def main(argv: list[str]) -> int:
    args = argv[1:]
    if any(a in ("-h", "--help") for a in args):
        print(__doc__)
        return 0
    missing = [a for a in args if not a.startswith("--") and a not in CASES
               and not os.path.isdir(a) and not os.path.exists(a)]
    if missing:
        print(f"hit_instructions: no such tree, interpreter or case: {', '.join(missing)}"
              " (--help says what it takes)", file=sys.stderr)
        return 2
    if args[:1] == ["--breakdown"]:
        with loop_script() as script:
            for case in args[1:] or ["axb1"]:
                breakdown(sys.executable, ROOT, case, script)
        return 0
    pythons = []
    while args[:1] == ["--python"] and len(args) >= 2:
        pythons.append(args[1])
        args = args[2:]
    pythons = pythons or [sys.executable]
    trees = args or [ROOT]
    with loop_script() as script:
        print(f"{'python':8s} {'tree':30s} {'case':8s} {'hit':>8s} {'eager':>8s} {'overhead':>9s}")
        for python in pythons:
            version = subprocess.run([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                                     capture_output=True, text=True).stdout.strip()
            for tree in trees:
                for case in ("add2", "ident", "branchy"):
                    hit = per_call(python, tree, case, "hit", script)
                    eager = per_call(python, tree, case, "eager", script)
                    print(f"{version:8s} {tree[-30:]:30s} {case:8s} {hit:8.0f} {eager:8.0f} {hit - eager:9.0f}",
                          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
