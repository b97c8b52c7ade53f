#!/usr/bin/env bash
# scripts/conformance.sh -- run CPython's and NumPy's own test suites plain and
# under `python -m dynscope run --capture-all`, and compare every test's
# outcome.  Options: scripts/conformance.py --help.  Exit 1 on any difference.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
exec "$PY" scripts/conformance.py "$@"
