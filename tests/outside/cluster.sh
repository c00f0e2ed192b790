#!/bin/sh
# Our broker as an outside system, for `kafkaverify nemesis --cluster FILE` (tests/test_cluster_file.py,
# docs/any-cluster.md): processes started with `python -m impl.broker`, each with a pid file,
# faulted by signals. The harness knows nothing of them but this script's exit status and output.
#
#   cluster.sh DIR setup          fresh data, the coordination server and every broker started
#   cluster.sh DIR teardown       every process killed (-9)
#   cluster.sh DIR start I        broker I started (no wait: the schedule's clock keeps running)
#   cluster.sh DIR kill I         kill -9 broker I
#   cluster.sh DIR pause I        SIGSTOP;  resume I: SIGCONT
#
# DIR/env (written by whoever sets the cluster up) sets PYTHON, COORD_PORT and PORTS (space-separated,
# broker I listens on the I-th) and may set BROKER_CONFIG (JSON) and GENERATION.
set -eu
export PYTHONUNBUFFERED=1
DIR=$1; OP=$2; I=${3:-}
. "$DIR/env"
DATA="$DIR/data"
GENERATION=${GENERATION:-current}
BROKER_CONFIG=${BROKER_CONFIG:-'{}'}

port_of() { echo $PORTS | cut -d' ' -f$(($1 + 1)); }

wait_for() {   # wait_for FILE TEXT SECONDS
    n=0
    while ! grep -q "$2" "$1" 2>/dev/null; do
        n=$((n + 1)); [ $n -le $(($3 * 10)) ] || { echo "no '$2' in $1 after $3 s"; tail -5 "$1"; exit 1; }
        sleep 0.1
    done
}

start_broker() {
    p=$(port_of "$1")
    [ -n "$p" ] || { echo "no port for broker $1"; exit 1; }
    "$PYTHON" -m impl.broker --id "$1" --port "$p" --data-dir "$DATA/broker-$1" \
        --coordinator "embedded://127.0.0.1:$COORD_PORT" --coord-root "" --generation "$GENERATION" \
        --config "$BROKER_CONFIG" >> "$DATA/broker-$1.log" 2>&1 &
    echo $! > "$DATA/broker-$1.pid"
}

signal() {   # signal SIG I
    f="$DATA/broker-$2.pid"
    [ -f "$f" ] || { echo "broker $2 has no pid file"; exit 1; }
    kill "-$1" "$(cat "$f")"
}

case "$OP" in
setup)
    rm -rf "$DATA"; mkdir -p "$DATA/coord"
    "$PYTHON" -m impl.coord.server --port "$COORD_PORT" --host 127.0.0.1 --data-dir "$DATA/coord" \
        > "$DATA/coord.log" 2>&1 &
    echo $! > "$DATA/coord.pid"
    wait_for "$DATA/coord.log" "coord ready" 20
    i=0
    for _ in $PORTS; do start_broker $i; i=$((i + 1)); done
    i=0
    for _ in $PORTS; do wait_for "$DATA/broker-$i.log" "registered" 30; i=$((i + 1)); done
    ;;
teardown)
    for f in "$DATA"/*.pid; do [ -f "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null || true; done
    ;;
start) start_broker "$I" ;;
kill) signal KILL "$I" ;;
pause) signal STOP "$I" ;;
resume) signal CONT "$I" ;;
*) echo "unknown operation $OP"; exit 2 ;;
esac
