#!/usr/bin/env bash
# scripts/pytest_shards.sh N PYTHON [PYTEST_ARGS...] FILE... -- pytest over the
# test files (the arguments under tests/) in N processes at once, the files
# dealt out in turn, each process to its own log.  For `make asan-quick`: one
# pytest under ASan keeps one core busy and leaves the other idle.  The tests
# are already safe side by side (CI runs three versions' suites at once: tmux
# sockets, ports and files are per process or per tmp_path).
#
# Prints each log in order, then one summary line in pytest's words, the sum
# of the shards' (what .ci/run's summary reads), with the wall time of the
# whole.  Exit status: 0 when every shard passed; else the first non-zero
# status in shard order (5: a shard collected no test -- make's run_pytest
# says so).
set -u
n=$1
py=$2
shift 2
args=()
files=()
for a in "$@"; do
    if [[ $a == tests/*.py ]]; then files+=("$a"); else args+=("$a"); fi
done
if (( n < 1 || ${#files[@]} == 0 )); then
    echo "pytest_shards: give a number of shards and test files (tests/...py)" >&2
    exit 2
fi
dir=$(mktemp -d "${TMPDIR:-/tmp}/pytest-shards.XXXXXX")
start=$SECONDS
pids=()
for ((k = 0; k < n; k++)); do
    mine=()
    for ((i = k; i < ${#files[@]}; i += n)); do mine+=("${files[i]}"); done
    (( ${#mine[@]} )) || continue
    "$py" -m pytest "${args[@]}" "${mine[@]}" > "$dir/$k.log" 2>&1 &
    pids+=("$!")
done
rc=0
for pid in "${pids[@]}"; do
    wait "$pid"
    r=$?
    (( rc == 0 )) && rc=$r
done
secs=$((SECONDS - start))
declare -A total=()
for ((k = 0; k < ${#pids[@]}; k++)); do
    echo "==================== shard $((k + 1)) of ${#pids[@]} ===================="
    cat "$dir/$k.log"
    line=$(grep -E '^(=+ )?[0-9]+ (passed|failed|errors?|skipped|deselected)\b.* in [0-9.]+s' \
           "$dir/$k.log" | tail -1)
    for word in failed passed skipped deselected xfailed xpassed warnings errors error; do
        count=$(grep -oE "[0-9]+ $word\b" <<< "$line" | head -1 | cut -d' ' -f1)
        [[ -n $count ]] && total[$word]=$(( ${total[$word]:-0} + count ))
    done
done
rm -rf "$dir"
summary=""
for word in failed passed skipped deselected xfailed xpassed warnings errors error; do
    [[ -n ${total[$word]:-} ]] && summary+="${summary:+, }${total[$word]} $word"
done
echo "${summary:-no tests ran} in ${secs}s (${#pids[@]} shards at once)"
exit "$rc"
