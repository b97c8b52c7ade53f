"""Instructions per cache hit, counted by callgrind: a number that does not
depend on what else the machine is doing, for comparing two builds or two
CPython versions.

    python scripts/hit_instructions.py [--python PY ...] [TREE ...]

For each interpreter PY (default: this one), each TREE (a checkout with its
extension built for PY; default: this one) and each case, runs `valgrind
--tool=callgrind` on a loop of N and of 3N calls and prints (Ir(3N) - Ir(N))
/ 2N: the instructions of one call, set-up and interpreter start-up
cancelled out -- for the captured hit and for the same function called
eagerly, and the hit's overhead (their difference).  PYTHONHASHSEED=0 and
one OpenBLAS thread keep the counts repeatable (dict probing depends on the
hash seed).
"""
from __future__ import annotations

import os
import re
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
def ident(a, b):
    return a
def branchy(a, b):
    c = a * b
    if c.sum() > 0:        # a graph break: two graphs and an eager truth test
        return c + 1
    return c - 1
fn = {"add2": add2, "ident": ident, "branchy": branchy}[sys.argv[1]]
opt = dynscope.optimize("eager")(fn) if sys.argv[3] == "hit" else fn
a = np.ones(4); b = np.ones(4)
opt(a, b)
for _ in range(int(sys.argv[2])):
    opt(a, b)
"""


def instructions(python: str, tree: str, case: str, mode: str, n: int, script: str) -> int:
    env = dict(os.environ, PYTHONPATH=tree, PYTHONHASHSEED="0", OPENBLAS_NUM_THREADS="1")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cg.out")
        r = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                            python, script, case, str(n), mode],
                           env=env, capture_output=True, text=True)
    m = re.search(r"Collected : (\d+)", r.stderr)
    if r.returncode != 0 or m is None:
        raise SystemExit(f"callgrind failed on {tree} ({case}): {r.stderr[-500:]}")
    return int(m.group(1))


def per_call(python: str, tree: str, case: str, mode: str, script: str) -> float:
    lo = instructions(python, tree, case, mode, N, script)
    hi = instructions(python, tree, case, mode, 3 * N, script)
    return (hi - lo) / (2 * N)


def main(argv: list[str]) -> int:
    args = argv[1:]
    pythons = []
    while args[:1] == ["--python"] and len(args) >= 2:
        pythons.append(args[1])
        args = args[2:]
    pythons = pythons or [sys.executable]
    trees = args or [ROOT]
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(LOOP)
        script = f.name
    try:
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
    finally:
        os.unlink(script)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
