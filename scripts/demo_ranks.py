"""`make demo-ranks`: the demo workload (scripts/demo_workload.py) as the 4
ranks of one job, each process recording its own file through the path
template DYNSCOPE_DB=DIR/rank%r.db, with torchrun's RANK, LOCAL_RANK and
WORLD_SIZE set as torchrun would; rank 2 is made to diverge (it feeds
float64 once, so its forward recompiles where the others' do not).

    python scripts/demo_ranks.py DIR       # then: dyntop DIR/rank*.db
"""
import os
import subprocess
import sys

WORLD = 4
DIVERGENT = 2


def main(outdir: str) -> int:
    os.makedirs(outdir, exist_ok=True)
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(here)
    procs = []
    for rank in range(WORLD):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(WORLD),
                   DYNSCOPE_DB=os.path.join(outdir, "rank%r.db"),
                   DYNSCOPE_DEMO_DIVERGE=str(DIVERGENT),
                   PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
        procs.append(subprocess.Popen([sys.executable, os.path.join(here, "demo_workload.py")],
                                      env=env, stdout=subprocess.DEVNULL))
    status = 0
    for rank, p in enumerate(procs):
        if p.wait() != 0:
            print(f"demo_ranks: rank {rank} exited with {p.returncode}", file=sys.stderr)
            status = 1
    files = " ".join(os.path.join(outdir, f"rank{r}.db") for r in range(WORLD))
    print(f"demo_ranks: {WORLD} ranks recorded (rank {DIVERGENT} diverges): {files}")
    return status


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__.strip().splitlines()[-1].strip())
    sys.exit(main(sys.argv[1]))
