"""Divergence between the processes of one job: the frames whose compiles,
graphs, graph breaks or guard failures differ between ranks -- on a
distributed run the likeliest cause of a hang (one rank recompiles or
breaks where the others do not, and the collectives stop matching).

Reads a merged database (dynscope/merge.py) or any file with several runs;
`python -m dynscope report FILE...` prints it, dyntop's divergence view
shows the same rows (tui/, the same rule).  Invariants:
- a run is one process: its label is "rank R" when the run has a rank
  (torchrun's RANK), else "pid P@host";
- a function is the same in every run when its qualified name, file and
  first line are;
- a function diverges when two runs that reached it differ in its compile
  count, graph count, the set of its break reasons or the set of its
  failing guards; the odd runs are those outside the largest group of runs
  that agree (ties: the group of the lowest rank is taken as the norm);
- a function only some runs reached is not a divergence by itself (ranks
  run different code, e.g. rank 0 logs).
"""
from __future__ import annotations

import sqlite3

PER_RUN = """
SELECT co.run_id, co.name, co.filename, co.firstlineno,
  (SELECT count(*) FROM compiles c WHERE c.run_id = co.run_id AND c.code_id = co.code_id),
  (SELECT coalesce(sum(c.graphs), 0) FROM compiles c
    WHERE c.run_id = co.run_id AND c.code_id = co.code_id),
  (SELECT group_concat(k, char(10)) FROM (SELECT DISTINCT b.kind || ': ' || b.reason AS k
    FROM graph_breaks b WHERE b.run_id = co.run_id AND b.code_id = co.code_id ORDER BY k)),
  (SELECT group_concat(e, char(10)) FROM (SELECT DISTINCT g.expr AS e
    FROM guard_failures g WHERE g.run_id = co.run_id AND g.code_id = co.code_id ORDER BY e))
FROM code_objects co
ORDER BY co.run_id, co.code_id
"""


def run_labels(con: sqlite3.Connection) -> dict[int, str]:
    """run_id -> "rank R" or "pid P@host" (older files: "pid P")."""
    cols = {r[1] for r in con.execute("PRAGMA table_info(runs)")}
    has_ids = {"rank", "hostname"} <= cols
    sql = ("SELECT run_id, pid, rank, hostname FROM runs" if has_ids
           else "SELECT run_id, pid, NULL, NULL FROM runs")
    labels = {}
    for run_id, pid, rank, host in con.execute(sql):
        labels[run_id] = f"rank {rank}" if rank is not None else (
            f"pid {pid}@{host}" if host else f"pid {pid}")
    return labels


def divergence(con: sqlite3.Connection) -> list[dict]:
    """The functions that diverge, each {"function", "filename",
    "firstlineno", "differs": [what], "odd": [labels], "runs": {label:
    {"compiles", "graphs", "breaks", "failing_guards"}}}, in file order."""
    labels = run_labels(con)
    per_fn: dict[tuple, dict[str, dict]] = {}
    for run_id, name, fname, line, compiles, graphs, breaks, fails in con.execute(PER_RUN):
        per_fn.setdefault((name, fname, line), {})[labels[run_id]] = {
            "compiles": compiles, "graphs": graphs,
            "breaks": breaks.split("\n") if breaks else [],
            "failing_guards": fails.split("\n") if fails else []}
    out = []
    for (name, fname, line), runs in sorted(per_fn.items(), key=lambda kv: (kv[0][1], kv[0][2])):
        if len(runs) < 2:
            continue
        groups: dict[str, list[str]] = {}
        for label, r in runs.items():
            key = repr(sorted(r.items()))
            groups.setdefault(key, []).append(label)
        if len(groups) == 1:
            continue
        # the largest group is the norm; on a tie, the group of the lowest rank
        norm_key = min(groups, key=lambda k: (-len(groups[k]), min(_order(x) for x in groups[k])))
        norm = runs[groups[norm_key][0]]
        odd = sorted((label for k, ls in groups.items() if k != norm_key for label in ls), key=_order)
        differs = sorted({field for label in odd for field, v in runs[label].items()
                          if v != norm[field]})
        out.append({"function": name, "filename": fname, "firstlineno": line,
                    "differs": differs, "odd": odd,
                    "runs": {label: runs[label] for label in sorted(runs, key=_order)}})
    return out


def _order(label: str) -> tuple:
    """Ranks by number, then the others by label."""
    if label.startswith("rank "):
        return (0, int(label[5:]), "")
    return (1, 0, label)
