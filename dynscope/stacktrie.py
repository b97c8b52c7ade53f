"""The stack trie: the call paths from the program's entry to every compiled
frame, merged into one tree with the compiles under each node, as tlparse's
stack trie shows Dynamo's (the report's "Call paths that compiled", text and
HTML; dyntop's detail view draws the same tree for one function).

A path is a compiles row's `call_path` (docs/sql.md, schema v5): [[file,
line, name], ...] outermost first, the compiled frame last.  The frames of
the launcher -- `python -m dynscope run` and runpy -- are dropped from the
front, so a tree starts at the program's own `<module>`.
"""
from __future__ import annotations

import json
import os
import sqlite3


def _launcher(frame) -> bool:
    """A frame of what started the program (runpy, `python -m dynscope run`),
    not of the program (tui/detail.c has the same rule)."""
    filename = str(frame[0])
    return (filename.startswith("<frozen runpy") or filename.endswith("/runpy.py")
            or filename.endswith("/dynscope/__main__.py"))


def program_path(path: list) -> list:
    """path without the launcher's frames in front of the program's."""
    start = 0
    for i, frame in enumerate(path[:-1]):
        if _launcher(frame):
            start = i + 1
    return path[start:]


class Node:
    """One frame of the tree: (file, line, name), how many compiles passed
    through it, the compile ids that ended at it, and its callees."""

    def __init__(self, frame):
        self.frame = frame
        self.count = 0
        self.compiles: list[str] = []
        self.children: dict[tuple, Node] = {}

    def sorted_children(self) -> list:
        return sorted(self.children.values(), key=lambda n: (-n.count, n.frame))


def build(paths) -> Node:
    """The tree of (call_path, compile label) pairs; the root has no frame.
    A path that is not JSON (an edited file) is skipped."""
    root = Node(None)
    for text, label in paths:
        try:
            path = program_path(json.loads(text))
        except (TypeError, ValueError):
            continue
        root.count += 1
        node = root
        for frame in path:
            key = tuple(frame[:3])
            node = node.children.setdefault(key, Node(key))
            node.count += 1
        node.compiles.append(label)
    return root


def from_db(con: sqlite3.Connection, where: str = "", args=()) -> Node:
    """The tree of every compiles row with a call path (optionally filtered
    by `where`, SQL on compiles c and code_objects co)."""
    rows = con.execute(
        "SELECT c.call_path, '[' || c.compile_id || ']' FROM compiles c"
        " JOIN code_objects co USING (run_id, code_id)"
        f" WHERE c.call_path IS NOT NULL {('AND ' + where) if where else ''}"
        " ORDER BY c.compile_row", args).fetchall()
    return build(rows)


def place(frame) -> str:
    """'name (file.py:12)', the file without its directory."""
    filename, line, name = frame
    return f"{name} ({os.path.basename(str(filename))}:{line})"


def lines(root: Node, max_compiles: int = 6) -> list:
    """(compiles, text) per node, depth first, most compiles first; a level
    of depth is a '· ' in front, a compiled frame ends with its ids."""
    out = []

    def walk(node, depth):
        for child in node.sorted_children():
            text = "· " * depth + place(child.frame)
            if child.compiles:
                ids = " ".join(child.compiles[:max_compiles])
                more = len(child.compiles) - max_compiles
                text += f" -> compiled {ids}" + (f" and {more} more" if more > 0 else "")
            out.append((child.count, text))
            walk(child, depth + 1)

    walk(root, 0)
    return out


def html(root: Node, esc, link=None) -> str:
    """The tree as nested lists (<details> per node with callees, open);
    esc escapes text; link(label) may turn a compile id into a link."""
    def item(node):
        title = (f'<span class="count">{node.count}</span> '
                 f'<span class="site" title="{esc(node.frame[0])}:{esc(node.frame[1])}">'
                 f'{esc(place(node.frame))}</span>')
        if node.compiles:
            ids = " ".join(link(c) if link else esc(c) for c in node.compiles)
            title += f' <span class="muted">compiled</span> {ids}'
        kids = node.sorted_children()
        if not kids:
            return f"<li>{title}</li>"
        inner = "".join(item(k) for k in kids)
        return f"<li><details open><summary>{title}</summary><ul>{inner}</ul></details></li>"

    return '<ul class="trie">' + "".join(item(k) for k in root.sorted_children()) + "</ul>"
