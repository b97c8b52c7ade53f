"""Instructions per cache hit, counted by callgrind: a number that does not
depend on what else the machine is doing, for comparing two builds.

    python scripts/hit_instructions.py [TREE ...]

For each TREE (a checkout with its extension built; default: this one) and
each case, runs `valgrind --tool=callgrind` on a loop of N and of 3N hits
and prints (Ir(3N) - Ir(N)) / 2N: the instructions of one hit, set-up and
interpreter start-up cancelled out.  PYTHONHASHSEED=0 and one OpenBLAS
thread keep the counts repeatable (dict probing depends on the hash seed).
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
fn = {"add2": add2, "ident": ident}[sys.argv[1]]
opt = dynscope.optimize("eager")(fn)
a = np.ones(4); b = np.ones(4)
opt(a, b)
for _ in range(int(sys.argv[2])):
    opt(a, b)
"""


def instructions(tree: str, case: str, n: int, script: str) -> int:
    env = dict(os.environ, PYTHONPATH=tree, PYTHONHASHSEED="0", OPENBLAS_NUM_THREADS="1")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cg.out")
        r = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                            sys.executable, script, case, str(n)],
                           env=env, capture_output=True, text=True)
    m = re.search(r"Collected : (\d+)", r.stderr)
    if r.returncode != 0 or m is None:
        raise SystemExit(f"callgrind failed on {tree} ({case}): {r.stderr[-500:]}")
    return int(m.group(1))


def main(argv: list[str]) -> int:
    trees = argv[1:] or [ROOT]
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(LOOP)
        script = f.name
    try:
        print(f"{'tree':40s} {'case':6s} {'instructions/hit':>17s}")
        for tree in trees:
            for case in ("add2", "ident"):
                lo = instructions(tree, case, N, script)
                hi = instructions(tree, case, 3 * N, script)
                print(f"{tree:40s} {case:6s} {(hi - lo) / (2 * N):17.0f}")
    finally:
        os.unlink(script)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
