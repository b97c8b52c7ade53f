#!/usr/bin/env bash
# install-deps.sh -- install what dynscope needs to build and test, skipping
# whatever is already there.  `make test` runs it first, so the fast path (all
# present) must stay well under a second.  Design: ../shared/DESIGN.md section 5.
#
# Environment:
#   DYNSCOPE_SKIP_APT=1     do not look at or install Debian packages
#   DYNSCOPE_WITH_TORCH=1   also pip install torch, tabulate (torch.fx's
#                           print_tabular needs it) and transformers (the model
#                           zoo: tests/models).  torch is torch==2.13.0 on 3.11
#                           (a CPU wheel on disk: ~35 s, ~1 GB) and
#                           torch==2.14.1 on 3.12/3.13 (PyPI's CUDA build, which
#                           runs on the CPU: ~70-100 s, ~5.7 GB per venv).  The
#                           free disk is checked first; a venv that has the
#                           right torch installs nothing.
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
#   valgrind          callgrind counts the instructions of a cache hit (tests/test_hit_cost.py,
#                     scripts/hit_instructions.py)
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
    valgrind
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
    install_torch
}

# torch per Python version, and what installing it needs on disk (MB): the
# venv's growth, and the wheels pip downloads (into its temporary directory,
# and maybe its cache: each about that size).  Measured (2026-11, torch
# with transformers and their dependencies), with ~20% to spare:
#   3.11       torch==2.13.0+cpu from a wheel on disk: ~1.0 GB installed
#   3.12/3.13  torch==2.14.1 from PyPI, the CUDA build (nvidia-* and triton
#              wheels; torch.cuda.is_available() is False without a GPU, and
#              it runs on the CPU): ~5.6 GB installed (nvidia 3.2, torch 1.2,
#              triton 0.9), ~0.9 GB downloaded
if [[ "$PYVER" == 3.11 ]]; then
    TORCH_VERSION=2.13.0 TORCH_INSTALL_MB=1300 TORCH_DOWNLOAD_MB=0 TORCH_SIZE="~1 GB, ~35 s"
else
    TORCH_VERSION=2.14.1 TORCH_INSTALL_MB=6800 TORCH_DOWNLOAD_MB=1100 TORCH_SIZE="~5.7 GB, ~70-100 s"
fi
# tabulate: gm.graph.print_tabular().  transformers: the model zoo (configs
# only, no weights; pinned so the zoo's budgets hold).
TORCH_PACKAGES=("torch==$TORCH_VERSION" tabulate transformers==5.24.0)

# Whether the venv has torch $TORCH_VERSION (any local build: 2.13.0+cpu),
# tabulate and transformers.  Reads metadata: importing torch takes seconds.
torch_ok() {
    $VENV/bin/python - "$TORCH_VERSION" <<'PY' 2>/dev/null
import importlib.metadata as md, importlib.util as u, sys
sys.exit(md.version("torch").split("+")[0] != sys.argv[1]
         or not all(u.find_spec(m) for m in ("tabulate", "transformers")))
PY
}

# Fail, saying how much is needed where, unless each file system that pip
# writes to has room: the venv's (install), the temporary directory's and
# the pip cache's (downloads; one file system may be all three).
check_disk() {
    local -A need_of=() dir_of=()
    local dir mb fs cache
    cache=$($VENV/bin/python -m pip cache dir 2>/dev/null || true)
    while read -r dir mb; do
        [[ -n "$dir" && $mb -gt 0 ]] || continue
        mkdir -p "$dir" 2>/dev/null || true
        fs=$(df -P "$dir" 2>/dev/null | awk 'NR == 2 { print $6 }') || continue
        [[ -n "$fs" ]] || continue
        need_of[$fs]=$((${need_of[$fs]:-0} + mb))
        dir_of[$fs]="${dir_of[$fs]:+${dir_of[$fs]}, }$dir"
    done <<EOF2
$VENV $TORCH_INSTALL_MB
${TMPDIR:-/tmp} $TORCH_DOWNLOAD_MB
${cache:-} $TORCH_DOWNLOAD_MB
EOF2
    for fs in "${!need_of[@]}"; do
        local free_mb
        free_mb=$(df -Pm "$fs" | awk 'NR == 2 { print $4 }')
        if ((free_mb < need_of[$fs])); then
            die "not enough disk for torch==$TORCH_VERSION (Python $PYVER, $VENV): $fs has ${free_mb} MB free, needs ~${need_of[$fs]} MB (for ${dir_of[$fs]}). Free some space, or leave DYNSCOPE_WITH_TORCH unset: torch's tests then skip"
        fi
    done
}

install_torch() {
    torch_ok && return 0
    check_disk
    # pinned on the same command line as transformers, which pip may not
    # then swap for another torch (an unpinned one would be a CUDA build
    # on 3.11 too)
    log "pip install ${TORCH_PACKAGES[*]} ($VENV; $TORCH_SIZE)"
    $VENV/bin/python -m pip install -q --disable-pip-version-check "${TORCH_PACKAGES[@]}"
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

# The third-party libraries whose own test suites the conformance runs use
# (scripts/suites.py: each pinned, with its test dependencies; its tests
# unpacked from its sdist under build/suites), so that `make test` and
# `make conformance` need no network afterwards.  Installs nothing when all
# are there.
$VENV/bin/python scripts/suites.py install
