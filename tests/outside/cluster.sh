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
#   cluster.sh DIR partition I J  drop every packet between brokers I and J (nftables, both ways);
#   cluster.sh DIR heal I J       and let them through again. Only with HOSTS, inside a private
#                                 network namespace of the whole test (unshare -n): never on the host
#
# DIR/env (written by whoever sets the cluster up) sets PYTHON, COORD_PORT and PORTS (space-separated,
# broker I listens on the I-th) and may set BROKER_CONFIG (JSON object), GENERATION, and HOSTS
# (space-separated: broker I's own address, which it listens on and connects from).
set -eu
export PYTHONUNBUFFERED=1
DIR=$1; OP=$2; I=${3:-}
. "$DIR/env"
DATA="$DIR/data"
GENERATION=${GENERATION:-current}
BROKER_CONFIG=${BROKER_CONFIG:-'{}'}

HOSTS=${HOSTS:-}
port_of() { echo $PORTS | cut -d' ' -f$(($1 + 1)); }
host_of() { if [ -n "$HOSTS" ]; then echo $HOSTS | cut -d' ' -f$(($1 + 1)); else echo 127.0.0.1; fi; }

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
    cfg=$(echo "$BROKER_CONFIG" | sed "s/^{/{\"host\": \"$(host_of "$1")\", /; s/, }$/}/")
    "$PYTHON" -m impl.broker --id "$1" --port "$p" --data-dir "$DATA/broker-$1" \
        --coordinator "embedded://127.0.0.1:$COORD_PORT" --coord-root "" --generation "$GENERATION" \
        --config "$cfg" >> "$DATA/broker-$1.log" 2>&1 &
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
partition)
    [ -n "$HOSTS" ] || { echo "partitions need HOSTS (one address per broker)"; exit 1; }
    a=$(host_of "$I"); b=$(host_of "$4")
    nft add table inet kvoutside
    nft add chain inet kvoutside out '{ type filter hook output priority 0; }'
    nft add rule inet kvoutside out ip saddr "$a" ip daddr "$b" drop comment "\"cut-$I-$4\""
    nft add rule inet kvoutside out ip saddr "$b" ip daddr "$a" drop comment "\"cut-$I-$4\""
    ;;
heal)
    for h in $(nft -a list chain inet kvoutside out | grep "comment \"cut-$I-$4\"" | sed 's/.*# handle //'); do
        nft delete rule inet kvoutside out handle "$h"
    done
    ;;
start) start_broker "$I" ;;
kill) signal KILL "$I" ;;
pause) signal STOP "$I" ;;
resume) signal CONT "$I" ;;
*) echo "unknown operation $OP"; exit 2 ;;
esac
