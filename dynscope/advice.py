"""What to do about a source that keeps a frame recompiling: the report's
"Sources that keep recompiling" section (docs/report.md).

Read from the recompile reasons of a recording (the `recompiles` view,
docs/sql.md): each starts with the failing guard of the newest entry --
`L['x'].shape == (4, 3) (observed (5, 3))`, `L['w'].seen == 7 (observed
8)` -- and may go on with what automatic dynamic did: `; L['x'].size(0) is
now dynamic (a graph input)` or `... stays static (the code needs its
value: ...)`.  A source that fails the same way in `min_count` recompiles
or more of one function is one automatic dynamic could not settle, and
the advice says why and what the user can do:

- it stays static because the code needs its value (a branch the sizes
  cannot decide, a loop count, an index): mark_dynamic cannot help, so pad
  or bucket it, or move that code out of the captured function;
- a tensor size it never made dynamic (a size of 0 or 1 in between, a
  parameter or buffer): `dynscope.mark_dynamic(tensor, dim)` before the
  call (or `config.force_parameter_static_shapes = False`);
- an int it never made dynamic (a frame slot used as a number): pass a
  tensor, or keep it out of the captured function;
- the length of a list or tuple the frame unrolls: each length compiles.
"""
from __future__ import annotations

import re

_SHAPE = re.compile(r"^(?P<src>.+)\.shape == \((?P<was>[^()]*)\)$")
_VALUE = re.compile(r"^(?P<src>.+) == (?P<was>-?\d+)$")
_KEPT = re.compile(r"^(?P<src>.+?)(?:\.size\((?P<dim>\d+)\))? stays static \(")


def _sizes(text: str) -> tuple:
    return tuple(int(p) for p in text.replace(" ", "").split(",") if p)


def _parse(reason: str):
    """(source, kind, dims that changed) of a recompile reason's failing
    guard, kind "size" or "int"; None for any other guard."""
    head, _, rest = reason.partition(" (observed ")
    observed = rest.split(")", 1)[0] + (")" if rest.startswith("(") else "")
    m = _SHAPE.match(head)
    if m:
        was = _sizes(m["was"])
        now = _sizes(observed.strip("()")) if observed.startswith("(") else ()
        dims = [d for d, (a, b) in enumerate(zip(was, now)) if a != b] if len(was) == len(now) else []
        return m["src"], "size", dims
    m = _VALUE.match(head)
    if m and re.fullmatch(r"-?\d+", observed.strip()):
        return m["src"], "length" if m["src"].startswith("len(") else "int", []
    return None


def _advice(src: str, kind: str, dims: list, kept: bool) -> str:
    where = f"{src}.size({dims[0]})" if kind == "size" and dims else src
    if kept:
        return (f"the code needs {where} as a number (a branch the sizes cannot decide, a loop"
                " count, an index), so it stays static and each new value compiles again:"
                " pad or bucket it to a few values, or move that code out of the captured"
                " function (mark_dynamic cannot help)")
    if kind == "size":
        dim = dims[0] if dims else 0
        extra = (" or set dynscope.config.force_parameter_static_shapes = False (a parameter"
                 " or buffer)" if "_parameters" in src or "_buffers" in src else "")
        return (f"automatic dynamic did not take this size (it went through 0 or 1, or is a"
                f" parameter): call dynscope.mark_dynamic(<{src}>, {dim}) before the call{extra}")
    if kind == "length":
        return (f"{src}, the length of a list or tuple the frame unrolls, changes: each length"
                " compiles once; keep such a loop out of the captured function, or put the"
                " items in one tensor")
    return (f"{src} is an int the frame specializes on, and it changes: pass it as a tensor,"
            " or keep the code that uses it out of the captured function")


def recompile_advice(con, min_count: int = 3) -> list:
    """Rows (run_id, function, where, source, recompiles, advice), the
    sources most recompiled on first."""
    from dynscope import places
    places.install(con)                  # readable_path(), function_name() (a connection of the caller's)
    kept: dict = {}
    counts: dict = {}
    for run, code, name, where, reason in con.execute(
            "SELECT run_id, code_id, function_name(run_id, code_id, name),"
            " readable_path(filename) || ':' || firstlineno, reason"
            " FROM recompiles WHERE reason IS NOT NULL ORDER BY started_at"):
        for part in reason.split("; ")[1:]:
            m = _KEPT.match(part)
            if m:
                kept.setdefault((run, code), set()).add(m["src"])
        parsed = _parse(reason.split("; ")[0])
        if parsed is None:
            continue
        src, kind, dims = parsed
        key = (run, code, src)
        n, seen_dims, _, _, _ = counts.get(key, (0, [], kind, name, where))
        counts[key] = (n + 1, seen_dims or dims, kind, name, where)
    rows = []
    for (run, code, src), (n, dims, kind, name, where) in counts.items():
        if n < min_count:
            continue
        rows.append((run, name, where, src, n,
                     _advice(src, kind, dims, src in kept.get((run, code), set()))))
    rows.sort(key=lambda r: (-r[4], r[0], r[1], r[3]))
    return rows
