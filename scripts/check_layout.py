#!/usr/bin/env python3
"""check_layout.py -- the code layout rules of docs/architecture.md, checked.

    python3 scripts/check_layout.py [--objects DIR] [ROOT]

Exit 0 when every rule holds, 1 with one line per violation otherwise:

- layers point down, by includes: a file includes only headers of its own
  unit and of the units below it (BELOW).  A unit is a top-level folder
  (event/, store/, ...) or, inside engine/, a room (engine/base/, ...);
- layers point down, by symbols: `nm` over the objects under DIR (default
  ROOT/build, the objects of the extension; build/cp3XX/ for another
  Python) -- no object uses a symbol defined in a unit that is not below its
  own.  This sees what includes cannot: a declaration written by hand, a
  function reached through a macro;
- engine/ is rooms only: every subfolder is a room of ROOMS, holding its
  contract header (which opens with a comment saying what the room does),
  and no source file lies loose in engine/ but the umbrella engine.h, which
  only the layers above the engine include;
- the engine never names explain/ (no include, no explain_ call);
- no engine .c file over MAX_FILE_LINES lines;
- no function over MAX_FUNCTION_LINES lines, except one marked as an
  interpreter's dispatch switch by the line `/* layout: dispatch switch */`
  just above it (each of its cases stays short and calls a named helper).

Upward dependencies not yet cut are listed in KNOWN_DEBT, each with why:
they are not reported, and an entry that no longer happens is (so the list
only shrinks).  Function bodies are found the way the code is written
(STYLE.md): a definition's opening `{` and closing `}` in column 0.
"""
import os
import re
import subprocess
import sys

MAX_FILE_LINES = 1500
MAX_FUNCTION_LINES = 150
DISPATCH_MARK = "/* layout: dispatch switch */"

# The engine's rooms, bottom up, each with its contract header.  A room may
# use the rooms before it in this list, never those after it.
ROOMS = [
    ("base", "base.h"),          # assert, clock, FrameView, pycompat, tensorlib, break table
    ("graph", "graph.h"),        # the graph IR and its C interpreter
    ("guards", "guards.h"),      # guards: building, checking, rendering
    ("plan", "plan.h"),          # plans and backends
    ("translate", "translator.h"),  # bytecode -> guards + plan + graph
    ("cache", "cache.h"),        # per-code cache: CodeCache, CacheFrame, CacheEntry
    ("capture", "capture.h"),    # hook, cache, miss path, events interface, engine state
    ("sinks", "sinks.h"),        # event log, DYNSCOPE_LOGS, LTTng sink, SQLite recorder
]
ENGINE_ROOMS = ["engine/" + r for r, _ in ROOMS]

# unit -> the units of ours it may use (includes and symbols), besides itself
BELOW = {
    "event": set(),
    "trace": {"event"},
    "store": {"event"},
    "tui": {"store", "event"},
}
for i, room in enumerate(ENGINE_ROOMS):
    BELOW[room] = set(ENGINE_ROOMS[:i]) | {"event"}
BELOW["engine/capture"] |= {"trace"}             # the hook's frame_eval tracepoint
BELOW["engine/sinks"] |= {"trace", "store"}      # the LTTng sink, the SQLite recorder
BELOW["engine"] = set(ENGINE_ROOMS) | {"event"}  # engine/engine.h, the umbrella
BELOW["explain"] = BELOW["engine"] | {"engine", "trace", "store"}
BELOW["binding"] = BELOW["explain"] | {"explain"}

# Known debt: upward uses not cut yet, (file, header or symbol it uses) ->
# why.  Each entry is a wall with a hole in it; cutting one means deleting
# its line here (check_layout reports an entry whose file is there but no
# longer makes that use).
KNOWN_DEBT = {
    # empty: the last entries (the translator taking CacheFrame / CacheEntry
    # and reading fullgraph / dynamic through capture_state()) were cut by
    # TranslateRequest (engine/translate/translator.h).  Example of an entry:
    # ("engine/translate/translate.c", "capture_state"): "why it is not cut yet",
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
FUNC_NAME = re.compile(r"(\w+)\s*\(")


def unit_of(rel):
    """The unit of a path relative to the root (engine/capture/hook.c ->
    engine/capture), or None for a path outside every unit."""
    parts = rel.replace(os.sep, "/").split("/")
    if parts[0] == "engine" and len(parts) > 2:
        return "engine/" + parts[1]
    return parts[0] if parts[0] in BELOW else None


def source_files(root):
    """Relative paths of every .c/.h of every unit (engine/ one level down)."""
    out = []
    for top in sorted(t for t in BELOW if "/" not in t):
        d = os.path.join(root, top)
        if not os.path.isdir(d):
            continue
        for name in sorted(os.listdir(d)):
            p = os.path.join(d, name)
            if name.endswith((".c", ".h")):
                out.append(f"{top}/{name}")
            elif top == "engine" and os.path.isdir(p):
                out += [f"engine/{name}/{f}" for f in sorted(os.listdir(p)) if f.endswith((".c", ".h"))]
    return out


def uses(rel, dst, name, where, what, out, seen_debt):
    """Report that file rel uses `name` of unit dst (at `where`), unless dst
    is below rel's unit or the use is known debt."""
    src = unit_of(rel)
    if dst is None or dst == src or dst in BELOW.get(src, set()):
        return
    key = (rel, name)
    if key in KNOWN_DEBT:
        seen_debt.add(key)
        return
    out.append(f"{where}: {src}/ {what} {name} of {dst}/, which is not below it")


def check_includes(rel, lines, out, seen_debt):
    src = unit_of(rel)
    folder = os.path.dirname(rel)
    for n, line in enumerate(lines, 1):
        m = INCLUDE.match(line)
        if not m:
            continue
        target = os.path.normpath(os.path.join(folder, m.group(1))).replace(os.sep, "/")
        dst = unit_of(target)
        uses(rel, dst, os.path.basename(target), f"{rel}:{n}", "includes", out, seen_debt)
    if src == "engine" or src.startswith("engine/"):
        for n, line in enumerate(lines, 1):
            code = line.split("/*")[0].split("//")[0]
            if re.search(r"\bexplain_\w+\s*\(", code):
                out.append(f"{rel}:{n}: the engine calls explain/ ({code.strip()})")


def check_rooms(root, out):
    d = os.path.join(root, "engine")
    if not os.path.isdir(d):
        return
    rooms = dict(ROOMS)
    for name in sorted(os.listdir(d)):
        p = os.path.join(d, name)
        if os.path.isdir(p):
            if name not in rooms:
                out.append(f"engine/{name}/: a folder that is no room of check_layout.py's ROOMS")
                continue
            header = os.path.join(p, rooms[name])
            if not os.path.isfile(header):
                out.append(f"engine/{name}/: no contract header {rooms[name]}")
                continue
            with open(header, encoding="utf-8") as f:
                first = f.readline()
            if not first.startswith("/*"):
                out.append(f"engine/{name}/{rooms[name]}: the contract does not open with "
                           "a comment saying what the room does")
        elif name.endswith((".c", ".h")) and name != "engine.h":
            out.append(f"engine/{name}: a file outside the rooms (engine/<room>/)")


def nm(path):
    """(defined, undefined) global symbols of an object file."""
    r = subprocess.run(["nm", path], capture_output=True, text=True)
    defined, undefined = set(), set()
    for line in r.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "U":
            undefined.add(parts[1])
        elif len(parts) == 3 and parts[1] in "TDBRCVWG" and parts[1].isupper():
            defined.add(parts[2])
    return defined, undefined


def objects(root, objdir):
    """[(relative source path, object path)] of the units' objects in objdir."""
    out = []
    for dirpath, _, names in os.walk(objdir):
        for name in names:
            if not name.endswith(".o"):
                continue
            obj = os.path.join(dirpath, name)
            src = os.path.relpath(obj, objdir)[:-2] + ".c"
            if unit_of(src) is not None and os.path.isfile(os.path.join(root, src)):
                out.append((src.replace(os.sep, "/"), obj))
    return sorted(out)


def check_symbols(root, objdir, out, seen_debt):
    """The symbol rule over objdir's objects; the number of objects read."""
    objs = objects(root, objdir)
    where, need = {}, []
    for src, obj in objs:
        defined, undefined = nm(obj)
        for s in defined:
            where[s] = src
        need.append((src, undefined))
    for src, undefined in need:
        for s in sorted(undefined):
            if s in where:
                uses(src, unit_of(where[s]), s, f"{src} ({where[s]})", "uses", out, seen_debt)
    return len(objs)


def functions(lines):
    """(name, first line number, length) of each function definition."""
    start = None
    for i, line in enumerate(lines):
        if line.startswith("{") and start is None:
            j = i - 1
            while j >= 0 and "(" not in lines[j]:
                j -= 1
            m = FUNC_NAME.search(lines[j]) if j >= 0 else None
            # a multi-line parameter list: the name is on its first line
            while m and j > 0 and not lines[j].startswith(("static", "PyObject", "int", "void")) \
                    and lines[j].startswith((" ", "\t")):
                j -= 1
                m = FUNC_NAME.search(lines[j]) or m
            start = (m.group(1) if m else "?", i, j)
        elif line.startswith("}") and start is not None:
            name, first, decl = start
            marked = any(DISPATCH_MARK in lines[k] for k in range(max(0, decl - 3), first))
            yield name, decl + 1, i - first + 1, marked
            start = None


def check(root, objdir=None):
    """(violations, number of objects whose symbols were checked)."""
    out, seen_debt = [], set()
    check_rooms(root, out)
    for rel in source_files(root):
        with open(os.path.join(root, rel), encoding="utf-8") as f:
            lines = f.read().split("\n")
        check_includes(rel, lines, out, seen_debt)
        if rel.startswith("engine/") and rel.endswith(".c") and len(lines) - 1 > MAX_FILE_LINES:
            out.append(f"{rel}: {len(lines) - 1} lines (engine files stay under {MAX_FILE_LINES})")
        if not rel.endswith(".c"):
            continue
        for name, line, length, marked in functions(lines):
            if length > MAX_FUNCTION_LINES and not marked:
                out.append(f"{rel}:{line}: {name}() is {length} lines "
                           f"(functions stay under {MAX_FUNCTION_LINES})")
    nobjs = check_symbols(root, objdir or os.path.join(root, "build"), out, seen_debt)
    if nobjs:
        for key in sorted(set(KNOWN_DEBT) - seen_debt):
            if os.path.isfile(os.path.join(root, key[0])):
                out.append(f"check_layout.py: KNOWN_DEBT {key} no longer happens: delete the entry")
    return out, nobjs


def main(argv):
    args = argv[1:]
    objdir = None
    if args[:1] == ["--objects"]:
        objdir, args = args[1], args[2:]
    root = args[0] if args else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    problems, nobjs = check(root, objdir)
    for p in problems:
        print(p)
    if not nobjs:
        print("check_layout.py: no objects under the build directory: symbols not checked "
              "(build first: make)", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
