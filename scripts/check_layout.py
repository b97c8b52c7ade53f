#!/usr/bin/env python3
"""check_layout.py -- the code layout rules of docs/architecture.md, checked.

    python3 scripts/check_layout.py [ROOT]

Exit 0 when every rule holds, 1 with one line per violation otherwise:

- layers point down: a folder includes only the folders below it
  (LAYERS); the engine never names explain/ (no include, no explain_ call);
- no engine/*.c file over MAX_FILE_LINES lines;
- no function over MAX_FUNCTION_LINES lines, except one marked as an
  interpreter's dispatch switch by the line `/* layout: dispatch switch */`
  just above it (each of its cases stays short and calls a named helper).

Function bodies are found the way the code is written (STYLE.md): a
definition's opening `{` and closing `}` in column 0.
"""
import os
import re
import sys

MAX_FILE_LINES = 1500
MAX_FUNCTION_LINES = 150
DISPATCH_MARK = "/* layout: dispatch switch */"

# folder -> the folders of ours its files may include (besides itself)
LAYERS = {
    "event": set(),
    "trace": {"event"},
    "store": {"event"},
    "engine": {"event", "store", "trace"},
    "explain": {"event", "engine"},
    "binding": {"engine", "explain"},
    "tui": {"store", "event"},
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
FUNC_NAME = re.compile(r"(\w+)\s*\(")


def c_files(root, folder):
    d = os.path.join(root, folder)
    if not os.path.isdir(d):
        return []
    return sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith((".c", ".h")))


def check_includes(root, folder, path, lines, out):
    for n, line in enumerate(lines, 1):
        m = INCLUDE.match(line)
        if not m:
            continue
        target = os.path.normpath(os.path.join(folder, m.group(1)))
        top = target.split(os.sep)[0]
        if top in LAYERS and top != folder and top not in LAYERS[folder]:
            out.append(f"{path}:{n}: {folder}/ includes {m.group(1)} ({top}/ is not below it)")
    if folder == "engine":
        for n, line in enumerate(lines, 1):
            code = line.split("/*")[0].split("//")[0]
            if re.search(r"\bexplain_\w+\s*\(", code):
                out.append(f"{path}:{n}: the engine calls explain/ ({code.strip()})")


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


def check(root):
    out = []
    for folder in LAYERS:
        for path in c_files(root, folder):
            with open(path, encoding="utf-8") as f:
                lines = f.read().split("\n")
            rel = os.path.relpath(path, root)
            check_includes(root, folder, rel, lines, out)
            if folder == "engine" and path.endswith(".c") and len(lines) - 1 > MAX_FILE_LINES:
                out.append(f"{rel}: {len(lines) - 1} lines (engine files stay under {MAX_FILE_LINES})")
            if not path.endswith(".c"):
                continue
            for name, line, length, marked in functions(lines):
                if length > MAX_FUNCTION_LINES and not marked:
                    out.append(f"{rel}:{line}: {name}() is {length} lines "
                               f"(functions stay under {MAX_FUNCTION_LINES})")
    return out


def main(argv):
    root = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    problems = check(root)
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
