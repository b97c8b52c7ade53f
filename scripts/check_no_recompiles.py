#!/usr/bin/env python3
"""check_no_recompiles.py -- fail when a function recompiles after warm-up,
judged from an LTTng trace of dynscope (the babeltrace2 text that
scripts/lttng-capture.sh writes to DIR/trace.txt).  docs/tracing.md shows it
in a CI job.

    scripts/lttng-capture.sh -o /tmp/t -- python train.py
    scripts/check_no_recompiles.py /tmp/t/trace.txt --function forward --after-warmup 10

--function NAME matches a code object whose qualname is NAME or ends with
".NAME" (`forward` matches `Model.forward`; `Model.forward` only that one).
A *call* is one `frame_eval` event of the function's code object, in the
process that made it (code ids are per process): a hit, a miss or a skip.
A recompile event belongs to the call whose miss triggered it, so with
--after-warmup N a recompile during the first N calls is allowed and one at
call N+1 or later fails the check.  A call that runs through k graph breaks
is k+1 frame evaluations (frame_eval has no frame id): count warm-up in
frame evaluations for such a function.

Exit status: 0 no recompile after warm-up; 1 at least one, each printed on
stdout with its call number, compile id and reason; 2 the trace cannot
answer: unreadable, no event of the function, or no frame_eval events (a
capture at -l INFO or with -e lacking frame_eval counts no calls).
"""
from __future__ import annotations

import argparse
import re
import sys
from collections import defaultdict

PROG = "check_no_recompiles"

# One babeltrace2 text line: [time] (delta) host provider:event: { ... }, ...
LINE = re.compile(r"^\[[^\]]+\] \([^)]+\) \S+ (?P<provider>\w+):(?P<name>\w+): (?P<body>.*)$")
FIELD = re.compile(r"""\s*(?P<key>\w+)\s*=\s*(?:
        "(?P<str>(?:[^"\\]|\\.)*)"
      | \(\s*"(?P<enum>(?:[^"\\]|\\.)*)"\s*:\s*container\s*=\s*-?\d+\s*\)
      | (?P<num>-?\d+)
    )\s*[,}]""", re.X)
ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "'": "'", '"': '"'}


def unescape(s):
    return re.sub(r"\\(.)", lambda m: ESCAPES.get(m.group(1), "\\" + m.group(1)), s)


def parse(line):
    """A babeltrace2 line -> (event name, fields) for a dynscope event, else
    None.  Contexts (vpid, ...) and payload fields are merged; an enum gives
    its label; babeltrace2's backslash escapes are undone."""
    m = LINE.match(line)
    if m is None or m.group("provider") != "dynscope":
        return None
    fields = {}
    for f in FIELD.finditer(m.group("body")):
        if f.group("str") is not None:
            fields[f.group("key")] = unescape(f.group("str"))
        elif f.group("enum") is not None:
            fields[f.group("key")] = unescape(f.group("enum"))
        else:
            fields[f.group("key")] = int(f.group("num"))
    return m.group("name"), fields


def matches(qualname, function):
    return qualname == function or qualname.endswith("." + function)


def check(lines, function, after_warmup, pid=None):
    """Returns (exit status, report lines)."""
    calls = defaultdict(int)          # (vpid, code_id) -> frame_eval events so far
    names = {}                        # (vpid, code_id) of the function -> qualname
    recompiles = []                   # (call, key, fields) of the function
    for line in lines:
        ev = parse(line)
        if ev is None:
            continue
        name, f = ev
        if pid is not None and f.get("vpid") != pid:
            continue
        key = (f.get("vpid"), f.get("code_id"))
        if name == "frame_eval":
            calls[key] += 1
            continue
        if "qualname" in f and matches(f["qualname"], function):
            names[key] = f["qualname"]
            if name == "recompile":
                recompiles.append((calls[key], key, f))

    if not names:
        return 2, [f"{PROG}: no event of a function named {function!r} in the trace "
                   "(was it captured? is the name its qualname or a suffix of it?)"]
    blind = sorted(k for k in names if calls[k] == 0)
    if blind:
        return 2, [f"{PROG}: {names[k]} (code_id {k[1]}, pid {k[0]}) has no frame_eval "
                   "events, so its calls cannot be counted: capture with frame_eval "
                   "enabled (not -l INFO; -e must include frame_eval)" for k in blind]

    late = [(n, k, f) for n, k, f in recompiles if n > after_warmup]
    if late:
        out = [f"{PROG}: {names[k]} (code_id {k[1]}, pid {k[0]}) recompiled after warm-up "
               f"at call {n} (> {after_warmup}): compile_id {f.get('compile_id', '?')}, "
               f"reason: {f.get('reason', '?')}" for n, k, f in late]
        out.append(f"{PROG}: FAIL: {len(late)} recompile(s) of {function} after "
                   f"{after_warmup} warm-up calls")
        return 1, out
    out = [f"{PROG}: ok: {names[k]} (code_id {k[1]}, pid {k[0]}): {calls[k]} calls, "
           f"{sum(1 for _, rk, _ in recompiles if rk == k)} recompile(s), none after "
           f"call {after_warmup}" for k in sorted(names, key=str)]
    return 0, out


def main(argv=None):
    p = argparse.ArgumentParser(
        prog="check_no_recompiles.py",
        description="Exit 1 when FUNCTION recompiles after its first N calls, "
                    "judged from an LTTng trace (babeltrace2 text) of dynscope.")
    p.add_argument("trace", metavar="TRACE_TXT", help="babeltrace2 text, e.g. DIR/trace.txt")
    p.add_argument("--function", required=True,
                   help="qualname, or its last part(s): forward matches Model.forward")
    p.add_argument("--after-warmup", type=int, required=True, metavar="N",
                   help="recompiles during the first N calls are allowed")
    p.add_argument("--pid", type=int, help="only this process (the vpid context)")
    args = p.parse_args(argv)
    if args.after_warmup < 0:
        p.error("--after-warmup must be >= 0")
    try:
        with open(args.trace, encoding="utf-8", errors="replace") as fh:
            status, report = check(fh, args.function, args.after_warmup, args.pid)
    except OSError as e:
        print(f"{PROG}: cannot read the trace: {e}", file=sys.stderr)
        return 2
    print("\n".join(report), file=sys.stderr if status == 2 else sys.stdout)
    return status


if __name__ == "__main__":
    sys.exit(main())
