"""The transaction coordinator on real 3-broker clusters, with each client's transactional API
(tests/txn_clients.py: confluent-kafka, aiokafka, kafka-python) and read_committed readers of
the same client: aborted records never reach read_committed; a zombie (SIGSTOPped) producer is
fenced and its transaction never commits; kill -9 of the coordinator during a commit ends with
the transaction committed on every partition; kill -9 of a partition leader mid-transaction
loses and duplicates nothing; the coordinator's decisions conform to the model."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from impl.netclient import SyncConn
from tests.broker_fixtures import live_bootstrap, make_cluster, trace_events, wait_until  # noqa: F401
from tests.txn_clients import CLIENTS, Fenced, read_values, txn_producer

TXN_CONFIG = {"transaction_state_num_partitions": 3, "offsets_topic_num_partitions": 3}
PARTS = 3


def cluster(make_cluster, **kw):
    c = make_cluster(3, broker_config={**TXN_CONFIG, **kw})
    c.create_topic("t", partitions=PARTS, replication_factor=3, min_insync=2)
    c.wait_for_leaders("t", isr_size=3)
    return c


def vals(prefix: str, n: int) -> list[bytes]:
    return [f"{prefix}{i}".encode() for i in range(n)]


def send_all(p, values: list[bytes]) -> None:
    for i, v in enumerate(values):
        p.send("t", i % PARTS, v)


def coordinator_of(c, tid: str) -> int:
    def find():
        with SyncConn(*c.address(c.alive()[0])) as conn:
            r = conn.request(10, 1, {"key": tid, "key_type": 1})
        return [r.node_id] if r.error_code == 0 else None      # node 0 is an answer too
    return wait_until(find, 20, what=f"the coordinator of {tid}")[0]


def describe(c, node: int, tid: str):
    with SyncConn(*c.address(node)) as conn:
        return conn.request(65, 0, {"transactional_ids": [tid]}).transaction_states[0]


def conformance_clean(c) -> None:
    from checkers.conformance import check_events
    evs = [e for i in range(c.n) for e in trace_events(c, i) if e.get("type") == "txn_rule"]
    assert evs, "the coordinator traced no decision"
    res = check_events(evs, "current")
    assert res.divergences == [], [d.to_json() for d in res.divergences]


@pytest.mark.parametrize("client", CLIENTS)
def test_aborted_records_never_reach_read_committed(make_cluster, client):
    c = cluster(make_cluster)
    p = txn_producer(client, c.bootstrap, f"tx-{client}")
    try:
        p.begin(); send_all(p, vals("c", 6)); p.commit()
        p.begin(); send_all(p, vals("a", 6)); p.flush(); p.abort()
        p.begin(); send_all(p, vals("s", 6)); p.commit()        # committed after the abort: the reader passes it
    finally:
        p.close()
    committed = set(vals("c", 6) + vals("s", 6))
    got = read_values(client, c.bootstrap, "t", PARTS, committed)
    assert set(got) == committed and len(got) == len(committed), sorted(got)
    # the aborted records are in the logs: read_uncommitted returns them
    assert set(vals("a", 6)) <= set(read_values(client, c.bootstrap, "t", PARTS, committed | set(vals("a", 6)),
                                                isolation="read_uncommitted"))
    node = coordinator_of(c, f"tx-{client}")
    wait_until(lambda: describe(c, node, f"tx-{client}").transaction_state == "CompleteCommit", 10, what="CompleteCommit")
    conformance_clean(c)


ZOMBIE = """
import sys
from tests.txn_clients import Fenced, txn_producer
client, bootstrap, tid = sys.argv[1:4]
p = txn_producer(client, bootstrap, tid)
p.begin()
for i in range(6):
    p.send("t", i % 3, b"z%d" % i)
p.flush()
print("ready", flush=True)
sys.stdin.readline()
try:
    p.commit()
    print("committed", flush=True)
except Fenced as e:
    print("fenced", e, flush=True)
except Exception as e:
    print("error", repr(e), flush=True)
"""


@pytest.mark.parametrize("client", CLIENTS)
def test_paused_zombie_is_fenced_and_never_commits(make_cluster, client):
    c = cluster(make_cluster)
    tid = f"zombie-{client}"
    z = subprocess.Popen([sys.executable, "-c", ZOMBIE, client, c.bootstrap, tid], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                         env={**os.environ, "PYTHONPATH": os.getcwd()})
    try:
        assert z.stdout.readline().strip() == "ready"
        os.kill(z.pid, signal.SIGSTOP)
        p = txn_producer(client, c.bootstrap, tid)         # the new instance: aborts the zombie's transaction
        try:
            p.begin(); send_all(p, vals("n", 6)); p.commit()
        finally:
            p.close()
        os.kill(z.pid, signal.SIGCONT)
        z.stdin.write("go\n"); z.stdin.flush()
        verdict = z.stdout.readline().strip()
        assert not verdict.startswith("committed"), verdict
    finally:
        os.kill(z.pid, signal.SIGCONT)
        z.kill(); z.wait(10)
    got = read_values(client, c.bootstrap, "t", PARTS, set(vals("n", 6)))
    assert set(got) == set(vals("n", 6)), sorted(got)          # no z*: the zombie's records never commit
    assert set(vals("z", 6)) <= set(read_values(client, c.bootstrap, "t", PARTS, set(vals("z", 6)),
                                                isolation="read_uncommitted"))
    conformance_clean(c)


@pytest.mark.parametrize("client", CLIENTS)
def test_coordinator_kill_during_commit_ends_committed_everywhere(make_cluster, client):
    c = cluster(make_cluster)
    tid = f"kill-{client}"
    p = txn_producer(client, c.bootstrap, tid)
    x = coordinator_of(c, tid)
    hold = c.broker_dir(x) / "HOLD_TXN_MARKERS"
    try:
        p.begin(); send_all(p, vals("k", 6))
        hold.touch()                              # the commit stops between PrepareCommit and its markers
        p.commit()                                # answered once PrepareCommit is committed
        assert describe(c, x, tid).transaction_state == "PrepareCommit"
    finally:
        p.close()
    # nothing visible yet: the markers are held (read_committed stops at the open transaction)
    assert not set(read_values(client, c.bootstrap, "t", PARTS, set(vals("k", 6)), timeout_s=2))
    c.kill(x)
    y = wait_until(lambda: (lambda n: [n] if n != x else None)(coordinator_of(c, tid)), 30,
                   what="a new coordinator")[0]
    wait_until(lambda: describe(c, y, tid).transaction_state == "CompleteCommit", 30,
               what="the new coordinator completing the commit from its log")
    got = read_values(client, live_bootstrap(c), "t", PARTS, set(vals("k", 6)))
    assert sorted(got) == sorted(vals("k", 6))
    conformance_clean(c)


@pytest.mark.parametrize("client", CLIENTS)
def test_partition_leader_kill_mid_transaction(make_cluster, client):
    c = cluster(make_cluster)
    tid = f"leader-{client}"
    p = txn_producer(client, c.bootstrap, tid)
    x = coordinator_of(c, tid)
    victim = next(part for part in range(PARTS) if c.leader_of("t", part) != x)
    leader = c.leader_of("t", victim)
    try:
        p.begin(); send_all(p, vals("b", 6)); p.flush()
        c.kill(leader)
        send_all(p, vals("e", 6))
        p.commit()
    finally:
        p.close()
    want = vals("b", 6) + vals("e", 6)
    got = read_values(client, live_bootstrap(c), "t", PARTS, set(want))
    assert sorted(got) == sorted(want)                       # each once: nothing lost, nothing twice
    conformance_clean(c)


def test_timed_out_transaction_is_aborted_with_an_epoch_bump(make_cluster):
    """A producer that stops mid-transaction: past transaction.timeout.ms the coordinator aborts
    it with an epoch bump, so its records never reach read_committed, the partitions' LSO moves
    on (a later transaction is read) and the producer's own late commit is refused."""
    c = cluster(make_cluster, transaction_abort_timed_out_interval_ms=200)
    tid = "slow"
    p = txn_producer("confluent", c.bootstrap, tid, **{"transaction.timeout.ms": 2000})
    p.begin(); send_all(p, vals("late", 6)); p.flush()
    node = coordinator_of(c, tid)
    wait_until(lambda: describe(c, node, tid).transaction_state == "CompleteAbort", 20,
               what="the coordinator aborting the timed-out transaction")
    st = describe(c, node, tid)
    with pytest.raises(Fenced):
        p.commit()
    q = txn_producer("confluent", c.bootstrap, "after")
    try:
        q.begin(); send_all(q, vals("ok", 6)); q.commit()
    finally:
        q.close()
    got = read_values("confluent", c.bootstrap, "t", PARTS, set(vals("ok", 6)))
    assert sorted(got) == sorted(vals("ok", 6))
    assert st.producer_epoch == 1                          # bumped from the instance's epoch 0
    assert any(e.get("type") == "txn_timed_out" and e["transactional_id"] == tid
               for i in range(c.n) for e in trace_events(c, i))


CTP_WORKER = """
import sys
from confluent_kafka import Consumer, KafkaException, Producer
bootstrap, wid, hold = sys.argv[1:4]
done = 0
cons = Consumer({"bootstrap.servers": bootstrap, "group.id": "ctp", "isolation.level": "read_committed",
                 "enable.auto.commit": False, "auto.offset.reset": "earliest", "session.timeout.ms": 2000,
                 "heartbeat.interval.ms": 300})
prod = Producer({"bootstrap.servers": bootstrap, "transactional.id": "ctp-" + wid, "transaction.timeout.ms": 2000,
                 "linger.ms": 0})
prod.init_transactions(30)
cons.subscribe(["in"])
print("ready", flush=True)
while True:
    msgs = [m for m in cons.consume(num_messages=4, timeout=0.3) if not m.error()]
    if not msgs:
        continue
    try:
        prod.begin_transaction()
        for m in msgs:
            prod.produce("out", value=m.value(), partition=m.partition())
        prod.send_offsets_to_transaction(cons.position(cons.assignment()), cons.consumer_group_metadata(), 30)
        prod.flush(30)
        if hold == "hold" and done == 1:      # the test crashes us here: output and offsets pending
            print("holding", flush=True)
            sys.stdin.readline()
        prod.commit_transaction(30)
        done += 1
        print("committed", len(msgs), flush=True)
    except KafkaException as e:
        if not e.args[0].txn_requires_abort():
            raise
        prod.abort_transaction(30)
        for tp in cons.committed(cons.assignment(), 30):      # rewind to the group's committed offsets
            cons.seek(tp)
"""


def test_consume_transform_produce_exactly_once_across_a_member_crash(make_cluster):
    """Two confluent-kafka workers (consumer group + transactional producer with
    send_offsets_to_transaction) copy `in` to `out`; one is killed -9 inside a transaction, after
    its output and its offsets were sent. The committed
    output holds every input exactly once: the crashed worker's open transaction is aborted on
    its timeout, and the survivor resumes from the group's committed offsets (stable: KIP-447)."""
    c = make_cluster(3, broker_config={**TXN_CONFIG, "transaction_abort_timed_out_interval_ms": 200,
                                       "group_min_session_timeout_ms": 1000, "group_initial_rebalance_delay_ms": 500})
    for t in ("in", "out"):
        c.create_topic(t, partitions=PARTS, replication_factor=3, min_insync=2)
        c.wait_for_leaders(t, isr_size=3)
    from confluent_kafka import Producer
    src = Producer({"bootstrap.servers": c.bootstrap, "enable.idempotence": True})
    inputs = vals("i", 90)

    def feed(values):
        for i, v in enumerate(values):
            src.produce("in", value=v, partition=i % PARTS)
        src.flush(30)

    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    workers = [subprocess.Popen([sys.executable, "-c", CTP_WORKER, c.bootstrap, str(w), "hold" if w == 0 else "-"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                env=env) for w in range(2)]
    try:
        for w in workers:
            assert w.stdout.readline().strip() == "ready"
        feed(inputs[:45])
        lines = [workers[0].stdout.readline().strip() for _ in range(2)]
        assert lines[0].startswith("committed") and lines[1] == "holding", lines
        feed(inputs[45:60])
        workers[0].kill()                 # mid-transaction: its output and offsets are pending
        feed(inputs[60:])
        got = read_values("confluent", c.bootstrap, "out", PARTS, set(inputs), timeout_s=60)
    finally:
        for w in workers:
            w.kill(); w.wait(10)
    dup = sorted(v for v in set(got) if got.count(v) > 1)
    assert set(got) == set(inputs) and not dup, (sorted(set(inputs) - set(got)), dup)
    conformance_clean(c)
