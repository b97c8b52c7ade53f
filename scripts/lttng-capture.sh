#!/usr/bin/env bash
# lttng-capture.sh -- record an LTTng trace of the dynscope tracepoints of one
# command: session daemon, session, events, run, stop, CTF + babeltrace2 text.
# Design: ../shared/DESIGN.md 4.2 and 6; events and fields: docs/events.md.
#
#   scripts/lttng-capture.sh [-o DIR] [-e EVENTS] [-l LEVEL] [-p] [--relayd URL] -- CMD [ARGS...]
#
#   -o DIR     where the trace goes (created if missing; default: a new temp
#              dir, printed): DIR/ctf/ the CTF trace, DIR/trace.txt its
#              babeltrace2 text, DIR/babeltrace2.log babeltrace2's warnings.
#   -e EVENTS  comma-separated events (default 'dynscope:*'); a name without
#              a provider gets 'dynscope:' ('recompile,guard_fail').
#   -l LEVEL   only events at LEVEL or more severe, e.g. INFO: every event
#              but the hot frame_eval (DEBUG).
#   -p         also print trace.txt to stdout when done.
#   --relayd URL, -r URL
#              stream the session to an lttng-relayd (LTTng's daemon that
#              collects the traces of many hosts) instead of writing DIR/ctf:
#              net://HOST[:CTRL_PORT[:DATA_PORT]][/PATH]; the trace lands on
#              the relay's host in OUTPUT/<this host>/PATH (OUTPUT: the
#              relayd's -o).  DIR then only gets the capture's notes.
#
# The command runs with DYNSCOPE_TRACE_PROVIDER (the tracepoint provider the
# engine loads: $DYNSCOPE_TRACE_PROVIDER if already set, else
# build/libdynscope-tp.so of this repo) and with liblttng-ust-fork.so
# appended to LD_PRELOAD (so children forked without exec are traced too).
#
# Session daemon: each capture uses a fresh LTTNG_HOME, so a non-root user
# gets a private session daemon that no other user's or container's daemon
# shares.  Root has one daemon per machine (/var/run/lttng, LTTNG_HOME does
# not move it): a running one is used; else one is started, and the last
# concurrent root capture to finish (a lock in /run) stops it.  Only a
# daemon started by a capture is ever stopped.
#
# Exit status: the command's; 125 when the capture could not be set up (the
# command did not run) or, after a successful command, when the trace could
# not be written.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PROG=lttng-capture

# LD_PRELOAD is the command's (e.g. ASan's runtime for `make asan`): the
# script's own tools (awk, lttng, the session daemon) run without it.
cmd_preload=${LD_PRELOAD:-}
unset LD_PRELOAD

log() { printf '%s: %s\n' "$PROG" "$*" >&2; }
die() { log "error: $*"; exit 125; }
usage() {
    sed -n '5,22s/^# \{0,1\}//p' "${BASH_SOURCE[0]}" >&2
    exit 125
}

# ---------------------------------------------------------------------------
# Arguments.

outdir=""
events="dynscope:*"
loglevel=""
print_text=0
relayd=""
# getopts has no long options: --relayd URL / --relayd=URL become -r URL
args=()
while (($# > 0)); do
    case $1 in
    --relayd) (($# > 1)) || { log "option --relayd needs an argument"; usage; }
              args+=(-r "$2"); shift 2 ;;
    --relayd=*) args+=(-r "${1#--relayd=}"); shift ;;
    --) args+=("$@"); break ;;
    *) args+=("$1"); shift ;;
    esac
done
set -- "${args[@]}"
while getopts ":o:e:l:r:ph" opt; do
    case $opt in
    r) relayd=$OPTARG ;;
    o) outdir=$OPTARG ;;
    e) events=$OPTARG ;;
    l) loglevel=$OPTARG ;;
    p) print_text=1 ;;
    h) usage ;;
    :) log "option -$OPTARG needs an argument"; usage ;;
    *) log "unknown option -$OPTARG"; usage ;;
    esac
done
shift $((OPTIND - 1))
[[ "${1:-}" == "--" ]] && shift
(($# > 0)) || { log "no command given"; usage; }

# 'recompile,dynscope:guard_fail' -> 'dynscope:recompile,dynscope:guard_fail'
qualified=()
IFS=, read -ra names <<<"$events"
for n in "${names[@]}"; do
    [[ -n "$n" ]] || continue
    [[ "$n" == *:* ]] || n="dynscope:$n"
    qualified+=("$n")
done
((${#qualified[@]} > 0)) || die "-e: no event names in '$events'"
if [[ -n "$relayd" && ! "$relayd" =~ ^(net|net6|tcp|tcp6):// ]]; then
    die "--relayd: '$relayd' is not a relayd URL (net://HOST[:CTRL_PORT[:DATA_PORT]][/PATH])"
fi
events=$(IFS=,; echo "${qualified[*]}")

# ---------------------------------------------------------------------------
# What the capture needs.

for tool in lttng lttng-sessiond babeltrace2; do
    command -v "$tool" >/dev/null 2>&1 ||
        die "$tool not found: install lttng-tools and babeltrace2 (scripts/install-deps.sh)"
done

provider=${DYNSCOPE_TRACE_PROVIDER:-$ROOT/build/libdynscope-tp.so}
[[ -f "$provider" ]] ||
    die "tracepoint provider $provider not found: build it with 'make' (needs liblttng-ust-dev)"
provider=$(cd "$(dirname "$provider")" && pwd)/$(basename "$provider")

forklib=""
for d in $(ldconfig -p 2>/dev/null | awk '/liblttng-ust-fork\.so /{print $NF}') \
    /usr/lib/*-linux-gnu/liblttng-ust-fork.so /usr/lib64/liblttng-ust-fork.so \
    /usr/local/lib/liblttng-ust-fork.so; do
    if [[ -f "$d" ]]; then forklib=$d; break; fi
done
[[ -n "$forklib" ]] || log "warning: liblttng-ust-fork.so not found; children forked without exec are not traced"

if [[ -z "$outdir" ]]; then
    outdir=$(mktemp -d "${TMPDIR:-/tmp}/dynscope-trace.XXXXXX")
else
    mkdir -p "$outdir"
    outdir=$(cd "$outdir" && pwd)
    [[ ! -e "$outdir/ctf" ]] || die "$outdir/ctf exists: choose an empty -o DIR"
fi
log "trace directory: $outdir"

LTTNG_HOME=$(mktemp -d "${TMPDIR:-/tmp}/dynscope-lttng-home.XXXXXX")
export LTTNG_HOME
session="dynscope-$$-${RANDOM}"

# ---------------------------------------------------------------------------
# Session daemon: use a running one, else start one (and stop it after).

started_pid=""      # the daemon this capture started (non-root)
root_setup_fd=""    # root: lock held while a daemon is checked, started, stopped
root_users_fd=""    # root: shared by every capture running, upgraded by the last
root_owner_file=""  # root: pid of the daemon a capture started

sessiond_pid_file() {
    if [[ $(id -u) == 0 ]]; then echo /var/run/lttng/lttng-sessiond.pid
    else echo "$LTTNG_HOME/.lttng/lttng-sessiond.pid"; fi
}

# pid alive and not a zombie?
alive() {
    local state
    state=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
    [[ "$state" != Z ]]
}

is_sessiond() {
    [[ "$(cat "/proc/$1/comm" 2>/dev/null)" == lttng-sessiond ]]
}

# Start a daemon for this LTTNG_HOME (root: the machine's); print its pid.
start_sessiond() {
    local out pid
    if ! out=$(lttng-sessiond --daemonize --no-kernel 2>&1); then
        printf '%s\n' "$out" >&2
        die "lttng-sessiond failed to start (as $(id -un); see above)"
    fi
    pid=$(cat "$(sessiond_pid_file)" 2>/dev/null || true)
    [[ "$pid" =~ ^[0-9]+$ ]] && is_sessiond "$pid" ||
        die "lttng-sessiond started but wrote no pid file at $(sessiond_pid_file)"
    lttng list >/dev/null 2>&1 || die "lttng-sessiond started (pid $pid) but does not answer"
    log "started lttng-sessiond (pid $pid)"
    echo "$pid"
}

stop_sessiond() {
    local pid=$1 i
    is_sessiond "$pid" || return 0
    kill -TERM "$pid" 2>/dev/null || return 0
    for ((i = 0; i < 100; i++)); do
        alive "$pid" || { log "stopped lttng-sessiond (pid $pid)"; return 0; }
        sleep 0.05
    done
    log "warning: lttng-sessiond (pid $pid) still running after 5 s; killing it"
    kill -KILL "$pid" 2>/dev/null || true
}

setup_sessiond() {
    if [[ $(id -u) == 0 ]]; then
        local lockdir=/run
        [[ -w $lockdir ]] || lockdir=${TMPDIR:-/tmp}
        root_owner_file=$lockdir/dynscope-lttng-capture.sessiond
        exec {root_setup_fd}>>"$lockdir/dynscope-lttng-capture.setup.lock"
        exec {root_users_fd}>>"$lockdir/dynscope-lttng-capture.users.lock"
        flock -x "$root_setup_fd"
        if lttng list >/dev/null 2>&1; then
            log "using the running root lttng-sessiond"
        else
            start_sessiond >"$root_owner_file"
        fi
        flock -s "$root_users_fd"
        flock -u "$root_setup_fd"
    elif lttng list >/dev/null 2>&1; then
        log "using the running lttng-sessiond (root's: tracing group)"
    else
        started_pid=$(start_sessiond)
    fi
}

teardown_sessiond() {
    if [[ -n "$started_pid" ]]; then
        stop_sessiond "$started_pid"
    elif [[ -n "$root_users_fd" ]]; then
        # The last root capture out stops the daemon a capture started.
        flock -x "$root_setup_fd"
        if flock -xn "$root_users_fd"; then
            local pid
            pid=$(cat "$root_owner_file" 2>/dev/null || true)
            if [[ "$pid" =~ ^[0-9]+$ ]] && is_sessiond "$pid"; then
                stop_sessiond "$pid"
            fi
            rm -f "$root_owner_file"
        fi
        exec {root_users_fd}>&- {root_setup_fd}>&-
    fi
}

session_created=0
cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    if ((session_created)); then
        lttng destroy "$session" >/dev/null 2>&1 || true
    fi
    teardown_sessiond
    rm -rf "$LTTNG_HOME"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

setup_sessiond

# ---------------------------------------------------------------------------
# Session: one channel (per-UID buffers, 4 x 1 MiB per CPU), the events,
# the contexts.

lttng_q() {
    local out
    if ! out=$(lttng "$@" 2>&1); then
        printf '%s\n' "$out" >&2
        die "lttng $* failed"
    fi
}

if [[ -n "$relayd" ]]; then
    # The consumer daemon streams to the relay; a relay that is not there
    # fails here, before the command runs.
    lttng_q create "$session" --set-url="$relayd"
else
    lttng_q create "$session" --output="$outdir/ctf"
fi
session_created=1
lttng_q enable-channel --userspace --session="$session" \
    --subbuf-size=1M --num-subbuf=4 dynscope
lttng_q enable-event --userspace --session="$session" --channel=dynscope \
    ${loglevel:+--loglevel="$loglevel"} "$events"
lttng_q add-context --userspace --session="$session" --channel=dynscope \
    --type=vpid --type=vtid --type=procname
lttng_q start "$session"
log "recording $events${loglevel:+ at --loglevel=$loglevel} (session $session)"

# ---------------------------------------------------------------------------
# The command.

preload=$cmd_preload
[[ -z "$forklib" ]] || preload=${preload:+$preload:}$forklib
set +e
LD_PRELOAD=$preload DYNSCOPE_TRACE_PROVIDER=$provider "$@"
status=$?
set -e

# ---------------------------------------------------------------------------
# Stop (waits until the consumer has written every buffer), check for
# discarded events, destroy, text.

lttng_q stop "$session"
discarded=$(lttng list "$session" 2>/dev/null |
    awk '/Discarded events:|Lost packets:/{s += $NF} END {print s + 0}')
lttng_q destroy "$session"
session_created=0

if ((discarded > 0)); then
    log "warning: the tracer discarded $discarded events or packets (buffers full); the trace is incomplete"
fi

# babeltrace2 warns once per gap of discarded events: into a file, not the
# terminal.
if [[ -n "$relayd" ]]; then
    rest=${relayd#*://}
    if [[ "$rest" == */* ]]; then where=${rest#*/}; else where="$session-DATE-TIME"; fi
    log "trace streamed to $relayd (on the relay's host: OUTPUT/$(hostname)/$where)"
    printf '%s\n' "$relayd" >"$outdir/relayd-url"
    ((print_text == 0)) || log "-p: the text is on the relay's host (babeltrace2 there)"
    exit "$status"
elif [[ -d "$outdir/ctf" ]]; then
    if ! babeltrace2 "$outdir/ctf" >"$outdir/trace.txt" 2>"$outdir/babeltrace2.log"; then
        head -n 5 "$outdir/babeltrace2.log" >&2
        log "error: babeltrace2 could not read $outdir/ctf (all of its messages: $outdir/babeltrace2.log)"
        ((status != 0)) || status=125
    elif [[ -s "$outdir/babeltrace2.log" ]]; then
        log "babeltrace2: $(wc -l <"$outdir/babeltrace2.log") warnings, the first:"
        head -n 1 "$outdir/babeltrace2.log" >&2
        log "(all of them: $outdir/babeltrace2.log)"
    fi
else
    log "no events were recorded (did the command load the provider?)"
    : >"$outdir/trace.txt"
fi
log "$(wc -l <"$outdir/trace.txt") events; text: $outdir/trace.txt; CTF: $outdir/ctf"
((print_text == 0)) || cat "$outdir/trace.txt"
exit "$status"
