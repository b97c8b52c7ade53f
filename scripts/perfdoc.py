"""perfdoc.py -- the one way benchmarks write docs/performance.md.

Each benchmark owns the section between its `<!-- NAME:start -->` and
`<!-- NAME:end -->` markers; write_section replaces that section (or appends
it) and leaves every other section as it is.  The file is replaced
atomically.  parse_args gives every benchmark the same --quick: a smoke run
of every case in seconds that never writes the file (tests/test_benches.py
runs each benchmark so).
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


def parse_args(parser, argv, quick: dict):
    """parser.parse_args(argv) with --quick added: when given, each option
    in `quick` (dest -> value) is set to its quick value and --no-doc is
    implied, so a quick run only prints (its numbers are not worth keeping)."""
    sizes = ", ".join(f"--{k.replace('_', '-')} {v}" for k, v in quick.items())
    parser.add_argument("--quick", action="store_true",
                        help=f"every case, smallest sizes, in seconds ({sizes}); prints "
                        "only, never writes docs/ (tests/test_benches.py runs this)")
    args = parser.parse_args(argv)
    if args.quick:
        for dest, value in quick.items():
            setattr(args, dest, value)
        args.no_doc = True
    return args


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo, else platform's guess."""
    import platform
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def engine_revision(root: str, paths=("engine",)) -> str:
    """'<commit>' of the checkout at root, '+ uncommitted <paths> changes'
    when those paths differ from it, or 'unknown' outside git."""
    import subprocess

    def git(*argv):
        return subprocess.run(["git", "-C", root, *argv], capture_output=True, text=True,
                              timeout=10, check=True).stdout.strip()
    try:
        rev = git("rev-parse", "--short", "HEAD")
        dirty = git("status", "--porcelain", "--", *paths)
    except (OSError, subprocess.SubprocessError):
        return "unknown (not a git checkout)"
    return rev + (f" + uncommitted {'/'.join(paths)} changes" if dirty else "")


def regenerate(command: str) -> list:
    """The doc lines saying how to remake a section: make bench, or command."""
    return ["Regenerate with:", "", "```", "make bench", "# or only this benchmark:",
            command, "```"]
