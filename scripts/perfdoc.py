"""perfdoc.py -- the one way benchmarks write docs/performance.md.

Each benchmark owns the section between its `<!-- NAME:start -->` and
`<!-- NAME:end -->` markers; write_section replaces that section (or appends
it) and leaves every other section as it is.  The file is replaced
atomically.
"""
import os

HEADER = ("# Performance\n\nNumbers measured by the benchmarks in `scripts/bench_*.py`;\n"
          "each benchmark rewrites its own section.\n\n")


def write_section(doc: str, start: str, end: str, text: str) -> None:
    """Replace the text between start and end (markers included; `text` must
    carry them) in the file `doc`, or append it if the section is new."""
    os.makedirs(os.path.dirname(doc), exist_ok=True)
    try:
        with open(doc) as fh:
            old = fh.read()
    except FileNotFoundError:
        old = HEADER
    i, j = old.find(start), old.find(end)
    if i >= 0 and j > i:
        j += len(end)
        if old[j:j + 1] == "\n" and text.endswith("\n"):
            j += 1
        new = old[:i] + text + old[j:]
    else:
        new = old.rstrip("\n") + "\n\n" + text if old.strip() else text
    tmp = doc + ".tmp"
    with open(tmp, "w") as fh:
        fh.write(new)
    os.replace(tmp, doc)
