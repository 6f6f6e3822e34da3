#!/usr/bin/env bash
# README command 1: set up (idempotent) and run nettel locally.
#
#   bash scripts/run.sh [extra `nettel serve` arguments]
#
# Without NETTEL_BROKERS: starts a private ActiveMQ on 127.0.0.1:${NETTEL_BROKER_PORT:-61613}
# (data in run/activemq), `nettel serve --topology run/topology.json --rse-map run/rse-map.json`
# (the demo mesh's sites as a CRIC rcsite export and one Rucio disk RSE per site, written first
# by `nettel simulate --no-feed`) and, once serve has subscribed, the seeded demo feed
# (`nettel simulate`).
# With NETTEL_BROKERS=host:port[,host:port]: only `nettel serve`, against those brokers.
# NETTEL_LISTEN (default 127.0.0.1:8080) is where the HTTP API listens. Logs go to run/logs/
# (NETTEL_RUN_DIR moves run/ elsewhere; the tests use that).
# Ctrl-C (or SIGTERM) stops everything it started.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# shellcheck source=scripts/setup.sh
source scripts/setup.sh
install_system_packages
install_venv "."

# ---- run -----------------------------------------------------------------------------------
RUN_DIR="${NETTEL_RUN_DIR:-run}"   # logs and broker data (git-ignored)
LISTEN="${NETTEL_LISTEN:-127.0.0.1:8080}"
BROKER_PORT="${NETTEL_BROKER_PORT:-61613}"
mkdir -p "$RUN_DIR/logs"
PIDS=()    # started in this order; stopped in reverse
declare -A NAMES    # pid -> log name

start_bg() {  # $1: log name; rest: command. Own session, so we can signal its whole group.
    local name="$1"
    shift
    echo "run: $name -> $RUN_DIR/logs/$name.log"
    setsid "$@" >"$RUN_DIR/logs/$name.log" 2>&1 </dev/null &
    PIDS+=("$!")
    NAMES[$!]="$name"
}

stop_all() {
    trap - INT TERM
    local i pid
    for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
        pid="${PIDS[$i]}"
        kill -TERM -- "-$pid" 2>/dev/null || continue
        for _ in $(seq 1 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL -- "-$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    echo "run: stopped"
}

wait_for() {  # $1: description, $2: pid that must stay alive, $3: log, $4...: check command
    local what="$1" pid="$2" log="$3"
    shift 3
    for _ in $(seq 1 600); do
        if "$@" 2>/dev/null; then return 0; fi
        if ! kill -0 "$pid" 2>/dev/null; then
            echo "run: $what exited; last lines of $log:" >&2
            tail -n 40 "$log" >&2
            return 1
        fi
        sleep 0.2
    done
    echo "run: $what not ready after 120 s; see $log" >&2
    return 1
}

# shellcheck disable=SC2317  # called through wait_for
healthy() {
    .venv/bin/python -c 'import sys, httpx; sys.exit(httpx.get(sys.argv[1], timeout=1).status_code != 200)' \
        "$1"
}

# shellcheck disable=SC2317  # called through wait_for
subscribed() {  # serve's broker link counts as connected once it has sent its SUBSCRIBE frames
    .venv/bin/python -c 'import sys, httpx; sys.exit("\nnettel_broker_connected 1.0\n" not in httpx.get(sys.argv[1], timeout=2).text)' \
        "$1"
}

trap 'stop_all; exit 130' INT
trap 'stop_all; exit 143' TERM

SERVE_TOPOLOGY=()  # the demo's sites and RSEs; the same flags among the arguments come later and win
if [ -z "${NETTEL_BROKERS:-}" ]; then
    BROKERS="127.0.0.1:$BROKER_PORT"
    start_bg activemq .venv/bin/python -m devtools.activemq start \
        --dir "$RUN_DIR/activemq" --port "$BROKER_PORT"
    wait_for "ActiveMQ" "${PIDS[-1]}" "$RUN_DIR/logs/activemq.log" \
        grep -q "activemq: ready" "$RUN_DIR/logs/activemq.log" || { stop_all; exit 1; }
    TOPOLOGY="$RUN_DIR/topology.json"
    RSE_MAP="$RUN_DIR/rse-map.json"
    .venv/bin/nettel simulate --seed 1 --write-topology "$TOPOLOGY" --write-rse-map "$RSE_MAP" \
        --no-feed || { stop_all; exit 1; }
    SERVE_TOPOLOGY=(--topology "$TOPOLOGY" --rse-map "$RSE_MAP")
else
    BROKERS="$NETTEL_BROKERS"
fi
start_bg serve .venv/bin/nettel serve --brokers "$BROKERS" --listen "$LISTEN" \
    --state-dir "${NETTEL_STATE_DIR:-$RUN_DIR/state}" "${SERVE_TOPOLOGY[@]}" "$@"

URL="http://${LISTEN/0.0.0.0/127.0.0.1}"
wait_for "nettel serve" "${PIDS[-1]}" "$RUN_DIR/logs/serve.log" healthy "$URL/healthz" ||
    { stop_all; exit 1; }
if [ -z "${NETTEL_BROKERS:-}" ]; then
    # The feed starts once serve has subscribed: its back-fill would be lost before that (a
    # durable subscription keeps only what is published after it first exists).
    wait_for "nettel serve's subscription" "${PIDS[-1]}" "$RUN_DIR/logs/serve.log" \
        subscribed "$URL/metrics" || { stop_all; exit 1; }
    start_bg simulate .venv/bin/nettel simulate --brokers "$BROKERS" --seed 1
fi
cat <<EOF

nettel is running (brokers: $BROKERS). Open:
  $URL/            (live web view)
  $URL/costmatrix  (?level=site: site pairs)
  $URL/costmatrix.csv?format=rucio   (Rucio's custom_table, with the demo's RSE map)
  $URL/alto        (ALTO directory)
  $URL/docs        (API reference; also /redoc)
  $URL/metrics
  $URL/readyz
Logs: $RUN_DIR/logs/. Press Ctrl-C to stop.
EOF

# Wait until one process ends. A demo feed that finishes cleanly leaves the rest running;
# anything else ending stops everything.
live=("${PIDS[@]}")
while true; do
    set +e
    wait -n -p ended "${live[@]}"
    status=$?
    set -e
    name="${NAMES[$ended]}"
    if [ "$name" != simulate ] || [ "$status" -ne 0 ]; then break; fi
    echo "run: demo feed finished; still serving"
    remaining=()
    for pid in "${live[@]}"; do [ "$pid" = "$ended" ] || remaining+=("$pid"); done
    live=("${remaining[@]}")
done
echo "run: $name exited (status $status); last lines of $RUN_DIR/logs/$name.log:" >&2
tail -n 20 "$RUN_DIR/logs/$name.log" >&2
echo "run: stopping the others" >&2
stop_all
exit "$status"
