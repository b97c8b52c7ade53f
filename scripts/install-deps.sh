#!/usr/bin/env bash
# install-deps.sh -- install what dynscope needs to build and test, skipping
# whatever is already there.  `make test` runs it first, so the fast path (all
# present) must stay well under a second.  Design: ../shared/DESIGN.md section 5.
#
# Environment:
#   DYNSCOPE_SKIP_APT=1     do not look at or install Debian packages
#   DYNSCOPE_WITH_TORCH=1   also pip install torch==2.13.0 (a CPU wheel on disk),
#                           tabulate (torch.fx's print_tabular needs it) and
#                           transformers (the model zoo: tests/models); ~35 s
#   PYTHON=...              the interpreter the venv is made from (default: python3
#                           on PATH): CPython 3.11, 3.12 or 3.13.  3.11's venv is
#                           .venv, another version's .venv-X.Y (make reads the same
#                           names: PYTHON=python3.12 make test)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

log() { printf 'install-deps: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# ---------------------------------------------------------------------------
# Debian packages (Debian 12 names, checked with apt-cache policy).
#   build-essential   gcc, make, libc headers; brings libasan8/libubsan1 for `make asan`
#   pkg-config        flags for sqlite3, ncursesw, lttng-ust
#   libsqlite3-dev    store/ (recorder), sqlite3: the CLI for docs recipes and tests
#   libncurses-dev    tui/ dyntop (provides ncursesw; libncursesw5-dev is transitional)
#   tmux              TUI tests drive dyntop in a tmux pane
#   liblttng-ust-dev  trace/ tracepoint provider (LTTng-UST 2.13)
#   lttng-tools       lttng + lttng-sessiond for scripts/lttng-capture.sh
#   babeltrace2       the CLI that turns a CTF trace into text (no python3-bt2)
#   chromium          headless browser for the HTML report tests (tests/test_html_report.py)
APT_PACKAGES=(
    build-essential
    pkg-config
    libsqlite3-dev
    sqlite3
    libncurses-dev
    tmux
    liblttng-ust-dev
    lttng-tools
    babeltrace2
    chromium
)

apt_installed() {
    dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'
}

install_apt() {
    if [[ "${DYNSCOPE_SKIP_APT:-0}" == 1 ]]; then
        return 0
    fi
    if ! command -v dpkg-query >/dev/null 2>&1; then
        log "no dpkg here; skipping Debian packages (install the equivalents by hand)"
        return 0
    fi
    local missing=() p
    for p in "${APT_PACKAGES[@]}"; do
        apt_installed "$p" || missing+=("$p")
    done
    if ((${#missing[@]} == 0)); then
        return 0
    fi
    local sudo=()
    if [[ "$(id -u)" != 0 ]]; then
        command -v sudo >/dev/null 2>&1 || die "need root or sudo to install: ${missing[*]}"
        sudo=(sudo)
    fi
    log "apt-get install ${missing[*]}"
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -qq -o Dpkg::Use-Pty=0 --no-install-recommends "${missing[@]}" </dev/null
}

# ---------------------------------------------------------------------------
# The venv: .venv for CPython 3.11 (the default), .venv-X.Y for 3.12 and 3.13.

# networkx: a third-party package whose own tests (shipped in its wheel) the
# conformance suites run under --capture-all; pinned so CI runs the same tests.
PY_PACKAGES=(pytest numpy hypothesis setuptools wheel networkx==3.6.1)
SUPPORTED="3.11 3.12 3.13"

PY="${PYTHON:-python3}"
command -v "$PY" >/dev/null 2>&1 || die "$PY not found (set PYTHON=/path/to/python3.X)"
# without PYTHON the default build is 3.11's (.venv): python3 if it is 3.11
if [[ -z "${PYTHON:-}" ]] && ! "$PY" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' &&
    command -v python3.11 >/dev/null 2>&1; then
    PY=python3.11
fi
PYVER=$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])') ||
    die "$PY does not run"
[[ " $SUPPORTED " == *" $PYVER "* ]] ||
    die "$("$PY" -V 2>&1) found; dynscope supports CPython $SUPPORTED (set PYTHON=...)"
if [[ "$PYVER" == 3.11 ]]; then VENV=.venv; else VENV=.venv-$PYVER; fi

venv_ok() {
    [[ -x $VENV/bin/python ]] &&
        $VENV/bin/python -c "import sys; sys.exit('%d.%d' % sys.version_info[:2] != '$PYVER')" 2>/dev/null
}

make_venv() {
    log "creating $VENV with $(command -v "$PY") ($("$PY" -V 2>&1))"
    rm -rf "$VENV"
    "$PY" -m venv "$VENV"
}

install_venv() {
    venv_ok || make_venv
    if ! $VENV/bin/python -c 'import pytest, numpy, hypothesis, setuptools, wheel, networkx' 2>/dev/null; then
        log "pip install ${PY_PACKAGES[*]} ($VENV)"
        $VENV/bin/python -m pip install -q --disable-pip-version-check "${PY_PACKAGES[@]}"
    fi
    [[ "${DYNSCOPE_WITH_TORCH:-0}" == 1 ]] || return 0
    if [[ "$PYVER" != 3.11 ]]; then
        # pip would fetch a multi-GB CUDA build: its tests skip, saying so
        log "torch skipped for Python $PYVER: the offline CPU wheel (torch==2.13.0) is for 3.11 only"
        return 0
    fi
    # find_spec, not import: importing torch takes a second or two
    if ! $VENV/bin/python -c 'import importlib.util as u, sys
sys.exit(not all(u.find_spec(m) for m in ("torch", "tabulate", "transformers")))' 2>/dev/null; then
        # 2.13.0 is the CPU build on this machine's disk; an unpinned torch
        # would pull a multi-GB CUDA build -- so it is pinned on the same
        # command line as transformers, which pip may not then swap.
        # tabulate: gm.graph.print_tabular().  transformers: the model zoo
        # (configs only, no weights; pinned so the zoo's budgets hold).
        log "pip install torch==2.13.0 tabulate transformers==5.24.0"
        $VENV/bin/python -m pip install -q --disable-pip-version-check torch==2.13.0 tabulate \
            transformers==5.24.0
    fi
}

install_apt
install_venv

# The repo's package on the venv's path (a .pth file), so the venv's python
# imports dynscope and runs `python -m dynscope` from any directory.
repo_pth() {
    local site pth
    site=$($VENV/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    pth="$site/dynscope-dev.pth"
    if [[ "$(cat "$pth" 2>/dev/null)" != "$PWD" ]]; then
        log "adding $PWD to the venv's path ($pth)"
        printf '%s\n' "$PWD" > "$pth"
    fi
}
repo_pth
