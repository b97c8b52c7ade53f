"""N realistic rank files of one job, for testing dyntop, merge and the report
at fleet scale (issue 43).

    python scripts/fake_ranks.py N DIR [--diverge K]   # DIR/rank0000.db ... rank(N-1).db

The demo workload (scripts/demo_workload.py) is recorded twice, as a rank
that behaves and as one that diverges (rank 2 of `make demo-ranks`: it feeds
float64 once, so its forward recompiles where the others' do not).  Each
rank file is a copy of one of the two with its runs row made that rank's:
rank, local rank (8 per host), world size N, host node<rank // 8>, a pid of
its own, and start times a few ms apart.  K ranks spread over the job
diverge (default 3).  Copying keeps it fast (a second for 1,024 files);
what varies between ranks is what dyntop's divergence view and the report
read.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def record_template(path: str, rank: int, world: int, diverge: bool) -> None:
    env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank % 8), WORLD_SIZE=str(world),
               DYNSCOPE_DB=path, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("DYNSCOPE_DEMO_DIVERGE", None)
    if diverge:
        env["DYNSCOPE_DEMO_DIVERGE"] = str(rank)
    subprocess.run([sys.executable, os.path.join(HERE, "demo_workload.py")], env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    con = sqlite3.connect(path)            # one file, no WAL beside it: plain copies
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.execute("PRAGMA journal_mode = DELETE")
    con.close()


def divergent_ranks(n: int, k: int) -> set:
    """k ranks spread over 0..n-1 (never rank 0: the usual one to compare with)."""
    if n < 2 or k <= 0:
        return set()
    return {1 + (i * (n - 1)) // k for i in range(k)} & set(range(1, n))


def make(n: int, outdir: str, k: int = 3) -> list:
    """Write the n files; returns their paths."""
    os.makedirs(outdir, exist_ok=True)
    odd = divergent_ranks(n, k)
    with tempfile.TemporaryDirectory(prefix="dynscope-ranks.") as tmp:
        usual, diverging = os.path.join(tmp, "usual.db"), os.path.join(tmp, "odd.db")
        record_template(usual, 0, n, False)
        record_template(diverging, 2, n, True)
        paths = []
        width = max(4, len(str(n - 1)))
        for rank in range(n):
            path = os.path.join(outdir, f"rank{rank:0{width}d}.db")
            shutil.copyfile(diverging if rank in odd else usual, path)
            os.chmod(path, 0o600)
            con = sqlite3.connect(path)
            with con:
                con.execute("UPDATE runs SET rank = ?, local_rank = ?, world_size = ?,"
                            " hostname = ?, pid = ?, started_at = started_at + ?,"
                            " ended_at = ended_at + ?",
                            (rank, rank % 8, n, f"node{rank // 8:03d}", 100000 + rank,
                             rank * 1_000_000, rank * 1_000_000))
            con.close()
            paths.append(path)
    return paths


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("n", type=int, help="how many ranks")
    p.add_argument("outdir", metavar="DIR")
    p.add_argument("--diverge", type=int, default=3, metavar="K", help="ranks that diverge (3)")
    args = p.parse_args(argv)
    if args.n < 1:
        p.error("N must be at least 1")
    paths = make(args.n, args.outdir, args.diverge)
    odd = sorted(divergent_ranks(args.n, args.diverge))
    print(f"fake_ranks: {len(paths)} rank files in {args.outdir} (diverging: ranks "
          f"{', '.join(map(str, odd)) or 'none'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
