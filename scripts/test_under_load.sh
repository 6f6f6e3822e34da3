#!/usr/bin/env bash
# The README's test command run several times in a row with busy processes beside it, as on a
# shared CI machine: each busy process spins one core for the whole time.
#
#   bash scripts/test_under_load.sh [RUNS (3)] [BUSY PROCESSES (2)] [pytest arguments]
#
# Prints each run's exit status and wall time, and exits 1 if any run failed. Logs go to
# out/test-under-load/run-N.log (out/ is ignored by git).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

runs="${1:-3}"
busy="${2:-2}"
shift $(($# < 2 ? $# : 2))
logs=out/test-under-load
mkdir -p "$logs"

spinners=()
stop_spinners() {
    if [ "${#spinners[@]}" -gt 0 ]; then kill "${spinners[@]}" 2>/dev/null; fi
}
trap stop_spinners EXIT
for _ in $(seq "$busy"); do
    python3 -c 'while True: pass' &
    spinners+=("$!")
done

failed=0
for run in $(seq "$runs"); do
    start=$(date +%s)
    bash scripts/test.sh "$@" >"$logs/run-$run.log" 2>&1
    status=$?
    summary=$(grep -E '^=+ .*(passed|failed|error).* in ' "$logs/run-$run.log" | tail -1)
    echo "run $run of $runs beside $busy busy processes: exit $status, $(($(date +%s) - start)) s: $summary"
    if [ "$status" -ne 0 ]; then failed=1; fi
done
exit "$failed"
