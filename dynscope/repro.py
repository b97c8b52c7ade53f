"""A repro in one command (issue 41): `python -m dynscope repro FILE.db
--compile FUNCTION:ID -o repro.py` writes a standalone script that imports
the function from the file the recording names, rebuilds the compile's
inputs from its guards (an array's type, shape and dtype -- its values are
not recorded, so they are drawn from a fixed seed -- and each guarded
constant), calls it under dynscope.explain, and asserts the recorded
outcome:

- a compile that broke: the same break reasons;
- a recompile: the older entry's inputs first, then the new ones (its
  failing guard's observed value), and the same failing guard;
- a compile without a break: one graph and no break;
- a compile the backend failed on (break type DS0033): standalone, without
  the program -- the graph as recorded (`graphs.code`, inputs from its
  comments), captured again and handed to the backend, which must raise
  the same error.  With --minify the command runs that now, shrinks the
  graph to the fewest nodes on which the backend still raises the same
  exception type (dynscope/minify.py), and writes the small graph instead.

A frame that resumes after a graph break is not a call of its own: the
script names the function's first frame instead.  A function the script
cannot import (a closure, a file that is gone) is said in one line.
"""
from __future__ import annotations

import json
import re
import sqlite3

_TENSOR = re.compile(r"^type\((?P<src>L\['(?P<name>\w+)'\])\) is (?P<type>[\w.]+) and (?P=src)\.dtype == "
                     r"(?P<dtype>[\w.]+) and (?P=src)\.shape == \((?P<shape>[^()]*)\)")
_CONST = re.compile(r"^L\['(?P<name>\w+)'\] == (?P<value>.+)$")
_FAIL = re.compile(r"^(?P<expr>.+?) \(observed (?P<observed>.*)\)$")
_BACKEND = re.compile(r"^backend '(?P<name>.*?)' (?:raised (?P<type>[\w.]+): (?P<msg>.*)|"
                      r"(?P<returned>returned .*))$", re.S)


class ReproError(Exception):
    """What the command cannot do, in one line."""


def _inputs(con, run_id, code_id, epoch, compile_id) -> dict:
    """{argument name: Python expression that rebuilds it} from an entry's guards."""
    args = {}
    for kind, expr in con.execute(
            "SELECT kind, expr FROM guards WHERE run_id = ? AND code_id = ? AND epoch = ?"
            " AND compile_id = ? ORDER BY idx", (run_id, code_id, epoch, compile_id)):
        m = _TENSOR.match(expr or "") if kind == "TENSOR_MATCH" else None
        if m:
            shape = tuple(int(s) for s in m["shape"].replace(" ", "").split(",") if s)
            if m["type"].startswith("torch"):
                args[m["name"]] = f"torch.randn({shape}, generator=_gen).to({m['dtype']})"
            else:
                args[m["name"]] = f"_rng.standard_normal({shape}).astype(numpy.{m['dtype']})"
            continue
        m = _CONST.match(expr or "") if kind == "EQUALS_MATCH" else None
        if m:
            args[m["name"]] = m["value"]
    return args


def script(path: str, target: str, *, minify: bool = False, backend: str | None = None) -> str:
    """The repro script's text for target ("FUNCTION:frame/compile", or
    "frame/compile" when one function has that id) of the recording at path.
    minify and backend ('MODULE:NAME') apply to a backend error."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return _script(con, path, target, minify, backend)
    finally:
        con.close()


def _script(con, path: str, target: str, minify: bool = False, backend: str | None = None) -> str:
    name, _, cid = target.rpartition(":")
    rows = con.execute(
        "SELECT c.compile_row, c.run_id, c.code_id, c.epoch, c.compile_id, c.frame_compile_id,"
        " c.resume_offset, c.reason, c.outcome, co.name, co.filename FROM compiles c"
        " JOIN code_objects co USING (run_id, code_id) WHERE c.compile_id = ?"
        + (" AND co.name = ?" if name else "") + " ORDER BY c.compile_row DESC",
        (cid, name) if name else (cid,)).fetchall()
    if not rows:
        raise ReproError(f"{path} has no compile {target}")
    if len({(r[1], r[2]) for r in rows}) > 1:
        names = sorted({r[9] for r in rows})
        raise ReproError(f"{cid} is a compile of {', '.join(names)}: say which, as FUNCTION:{cid}")
    row, run, code, epoch, cid, fcid, offset, reason, outcome, qualname, filename = rows[0]
    failed = con.execute("SELECT g.code, s.reason, c.call_path FROM graphs g JOIN frame_skips s"
                         " ON s.run_id = g.run_id AND s.code_id = g.code_id AND s.epoch = g.epoch"
                         " AND s.resume_offset = ? AND s.break_type = 'DS0033' AND s.at >= g.at"
                         " JOIN compiles c ON c.compile_row = g.compile_row"
                         " WHERE g.compile_row = ? ORDER BY s.at LIMIT 1", (offset, row)).fetchone()
    if outcome == "skipped" and failed is not None:
        return _backend_script(path, cid, qualname, _backend_files(filename, failed[2]), failed[0],
                               failed[1], minify, backend)
    if minify:
        raise ReproError(f"--minify shrinks a graph a backend failed on; [{cid}] of {qualname}"
                         f" is not one ({outcome or 'no outcome'})")
    if offset:
        raise ReproError(f"[{cid}] of {qualname} resumes after a graph break (offset {offset}):"
                         f" it is not a call of its own; repro the function's first frame")
    if "<locals>" in qualname:
        raise ReproError(f"{qualname} is made inside another function: a script cannot import it")
    args = _inputs(con, run, code, epoch, cid)
    breaks = [r for (r,) in con.execute("SELECT reason FROM graph_breaks WHERE compile_row = ?"
                                        " ORDER BY break_id", (row,))]
    older = None
    if fcid:
        older = con.execute("SELECT entry_compile_id FROM recompile_diffs WHERE compile_row = ?"
                            " LIMIT 1", (row,)).fetchone()
        older = older[0] if older else f"{cid.split('/')[0]}/{fcid - 1}"
    old_args = _inputs(con, run, code, epoch, older) if older else None
    lines = [
        f'"""dynscope repro of {qualname} [{cid}], from {path}.',
        "",
        f"Imports {qualname} from {filename}, rebuilds the compile's inputs from its guards",
        "(arrays from a fixed seed: their values were not recorded) and checks that the",
        'recorded outcome happens again."""',
        "import importlib.util", "import sys", "", "import numpy", "try:", "    import torch",
        "except ImportError:", "    torch = None", "", "import dynscope", "",
        "_rng = numpy.random.default_rng(0)",
        "_gen = torch.Generator().manual_seed(0) if torch is not None else None", "",
        f"FILE = {filename!r}", f"FUNCTION = {qualname!r}", "",
        "try:",
        "    spec = importlib.util.spec_from_file_location('repro_target', FILE)",
        "    module = importlib.util.module_from_spec(spec)",
        "    spec.loader.exec_module(module)      # its `if __name__ == '__main__'` block does not run",
        "    fn = module",
        "    for part in FUNCTION.split('.'):",
        "        fn = getattr(fn, part)",
        "except (OSError, AttributeError, ImportError) as exc:",
        "    sys.exit(f'repro: cannot import {FUNCTION} from {FILE}: {exc}')",
        "fn = getattr(fn, '__wrapped__', fn)       # the function under its optimize() wrapper",
        "",
    ]

    def call(args_):
        return ", ".join(f"{k}={v}" for k, v in args_.items())
    if old_args is not None:
        m = _FAIL.match((reason or "").split("; ")[0])
        lines += [
            f"# [{older}] first, then [{cid}]: the recompile recorded as",
            f"#   {reason}",
            "eb = dynscope.ExplainBackend('eager')",
            "opt = dynscope.optimize(eb)(fn)",
            f"opt({call(old_args)})",
            f"opt({call(args)})",
            "out = eb.output()",
            "reasons = [r.reason for r in out.recompiles]",
            f"assert any(r.startswith({(m['expr'] if m else reason or '')!r}) for r in reasons), reasons",
        ]
    else:
        lines += [f"out = dynscope.explain(fn)({call(args)})"]
    if breaks:
        lines += [f"want = {json.dumps(breaks)}",
                  "got = [b.reason for b in out.break_reasons]",
                  "assert all(w in got for w in want), (want, got)"]
    elif old_args is None:
        lines += ["assert out.graph_break_count == 0 and out.graph_count >= 1, str(out)"]
    lines += ["print(f'repro: {FUNCTION} [" + cid + "]: the recorded outcome happened again')", ""]
    return "\n".join(lines)


def _backend_files(filename: str, call_path) -> list:
    """Where a backend defined by the program is looked for: the compiled
    function's file, then the files of the module-level frames on its call
    path (the program's own script, outermost first)."""
    import os
    ours = os.path.dirname(os.path.abspath(__file__)) + os.sep      # python -m dynscope run's frames
    files = [filename]
    try:
        frames = json.loads(call_path) if call_path else []
    except ValueError:
        frames = []
    for frame in frames:
        if isinstance(frame, list) and len(frame) >= 3 and frame[2] == "<module>" \
                and isinstance(frame[0], str) and frame[0] not in files and not frame[0].startswith("<") \
                and not os.path.abspath(frame[0]).startswith(ours):
            files.append(frame[0])
    return files


def _backend_script(path, cid, qualname, files, code, reason, minify, backend_spec) -> str:
    """The standalone script for a graph the backend failed on."""
    from dynscope import minify as mf
    from dynscope.dump import GRAPH_PRELUDE
    m = _BACKEND.match(reason or "")
    if m is None:
        raise ReproError(f"[{cid}] of {qualname}: the recorded reason does not name a backend: {reason}")
    graph = mf.Graph(code)
    if not graph.nodes:
        raise ReproError(f"[{cid}] of {qualname}: the recording holds no graph code"
                         " (recorded with graph code off, or redacted)")
    want_type = m["type"].rsplit(".", 1)[-1] if m["type"] else "TypeError"
    want_msg = m["msg"] if m["type"] else m["returned"]
    src, params = graph.source()
    descs = dict(graph.inputs)
    note = f"{len(graph.nodes)} nodes, as recorded"
    if minify:
        src, descs, note = _minified(graph, m["name"], files, backend_spec, want_type)
        params = list(descs)
    try:
        inputs = [mf.input_expr(descs.get(p, "?")) for p in params]
    except ValueError as exc:
        raise ReproError(f"[{cid}] of {qualname}: {exc}") from None
    lines = [
        f'"""dynscope repro of {qualname} [{cid}], from {path}: the backend failed.',
        "", f"  {reason}", "",
        f"forward() is the graph it failed on ({note}).  This script captures it with",
        "dynscope, hands it to the backend, and checks that the backend fails the same way.",
        "Inputs are rebuilt from their recorded types, dtypes and shapes (values from a",
        "fixed seed: they were not recorded).  python THIS.py [MODULE:NAME] names the",
        'backend when it is neither registered nor defined in FILES."""',
        "import sys", *GRAPH_PRELUDE.splitlines(), "",
        "import dynscope", "from dynscope import minify", "",
        "_rng = numpy.random.default_rng(0)",
        "_gen = torch.Generator().manual_seed(0) if torch is not None else None", "",
        f"BACKEND = {m['name']!r}",
        f"FILES = {files!r}      # where the backend is looked for: the function's file, the program's",
        f"WANT = ({want_type!r}, {want_msg!r})", "", "",
    ]
    for mod in graph.modules():
        if mod not in ("builtins", "math", "operator", "numpy", "torch") and mod not in params:
            lines.insert(lines.index("import dynscope"), f"import {mod}")
    lines += [src.rstrip(), "", "",
              "inputs = [" + ", ".join(inputs) + "]",
              "try:",
              "    backend = minify.find_backend(BACKEND, FILES, sys.argv[1] if len(sys.argv) > 1 else None)",
              "except LookupError as exc:",
              "    sys.exit(f'repro: {exc}')",
              "exc = minify.backend_error(backend, forward, inputs)",
              "assert exc is not None, 'the backend compiled the graph: the recorded error did not happen'",
              "got = (type(exc).__name__, str(exc))",
              "assert got[0] == WANT[0], (got, WANT)",
              ("assert minify.same_message(got[1], WANT[1]) or WANT[0] == 'TypeError', (got, WANT)"
               if not minify else
               "# a smaller graph may word it otherwise (node names): the type is what must match"),
              "print(f'repro: backend {BACKEND} raised {got[0]}: {got[1]} again"
              f" ({qualname} [{cid}])')", ""]
    return "\n".join(lines)


def _minified(graph, name, files, backend_spec, want_type):
    """(forward's source, {param: description}, a note) of the smallest
    failing graph, found by running the backend now."""
    from dynscope import minify as mf
    import numpy
    try:
        backend = mf.find_backend(name, files, backend_spec)
    except LookupError as exc:
        raise ReproError(str(exc)) from None
    except Exception as exc:
        raise ReproError(f"cannot load the backend: {type(exc).__name__}: {exc}") from None
    namespace = mf.namespace(graph.modules())
    rng = numpy.random.default_rng(0)
    gen = namespace["torch"].Generator().manual_seed(0) if namespace["torch"] is not None else None
    env = dict(namespace, _rng=rng, _gen=gen)
    try:
        inputs = {n: eval(mf.input_expr(d), env) for n, d in graph.inputs}
    except ValueError as exc:
        raise ReproError(str(exc)) from None

    def same(exc) -> bool:
        return type(exc).__name__ == want_type
    full, _ = graph.source()
    first = mf.backend_error(backend, mf.function(full, namespace), [inputs[n] for n, _ in graph.inputs])
    if first is None or not same(first):
        raise ReproError(f"the backend does not fail on the recorded graph now"
                         f" ({'it compiles' if first is None else type(first).__name__}):"
                         " nothing to minify")
    keep, values = mf.minify(graph, inputs, backend, namespace, same)
    src, params = graph.source(keep)
    descs = {p: mf.describe(values[p]) for p in params}
    return src, descs, f"minified from {len(graph.nodes)} nodes to {len(keep)}"


def main(path: str, target: str, out: str | None, *, minify: bool = False,
         backend: str | None = None) -> int:
    from dynscope import merge, outfile
    merge.open_source(path).close()      # MergeError for what is not a readable recording
    text = script(path, target, minify=minify, backend=backend)
    if out in (None, "-"):
        print(text, end="")
    else:
        outfile.write_text(out, text)
        what = re.search(r"^forward\(\) is the graph it failed on \(([^)]*)\)", text, re.M)
        what = what and what.group(1)
        print(f"dynscope repro: wrote {out}" + (f": the graph the backend failed on, {what}"
                                                 if what else "") + f" (python {out} reruns it)")
    return 0
