"""python -m dynscope COMMAND ...

Commands:
  explain FILE.py:FUNC   run FUNC (no arguments) from FILE.py under
                         dynscope.explain and print the report
"""
from __future__ import annotations

import argparse
import os
import runpy
import sys


def _cmd_explain(args: argparse.Namespace) -> int:
    import dynscope

    target = args.target
    path, sep, func_name = target.rpartition(":")
    if not sep or not path or not func_name:
        print(f"dynscope explain: expected FILE.py:FUNC, got {target!r}", file=sys.stderr)
        return 2
    if not os.path.isfile(path):
        print(f"dynscope explain: no such file: {path}", file=sys.stderr)
        return 2
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    namespace = runpy.run_path(path, run_name="__dynscope_explain__")
    fn = namespace.get(func_name)
    if fn is None:
        print(f"dynscope explain: {path} defines no {func_name!r}", file=sys.stderr)
        return 2
    if not callable(fn):
        print(f"dynscope explain: {func_name!r} in {path} is not callable", file=sys.stderr)
        return 2
    try:
        out = dynscope.explain(fn)()
    except Exception as exc:  # the reproducer itself failed: show both
        report = getattr(exc, "explain_output", None)
        if report is not None:
            print(report)
        print(f"dynscope explain: {func_name}() raised {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(out)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dynscope",
                                     description="dynscope: a capture engine for CPython, built to be watched.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    p = sub.add_parser("explain", help="explain one call of a function that takes no arguments")
    p.add_argument("target", metavar="FILE.py:FUNC")
    p.set_defaults(func=_cmd_explain)
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
