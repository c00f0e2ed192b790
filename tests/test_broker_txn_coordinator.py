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


_readers: dict = {}


def readline(proc, timeout_s: float = 60) -> str:
    """The child's next output line, or an AssertionError after timeout_s (a hung client). A
    thread per child feeds a queue, so lines already buffered are never missed."""
    import queue
    import threading
    q = _readers.get(proc.pid)
    if q is None:
        q = _readers[proc.pid] = queue.Queue()
        threading.Thread(target=lambda: [q.put(line) for line in proc.stdout], daemon=True).start()
    try:
        return q.get(timeout=timeout_s).strip()
    except queue.Empty:
        raise AssertionError(f"no output from pid {proc.pid} in {timeout_s} s") from None


def conformance_clean(c) -> None:
    """The traces validate as the trace format (every event type known, with its fields) and
    every coordinator decision in them is the model's."""
    from checkers.conformance import check_events, read_events
    evs = [e for e in read_events(f for i in range(c.n) for f in c.trace_files(i)) if e.get("type") == "txn_rule"]
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
    st = describe(c, node, f"tx-{client}")
    assert (st.error_code, st.producer_epoch, list(st.topics)) == (0, 0, [])
    with SyncConn(*c.address(node)) as conn:
        listed = conn.request(66, 1, {"state_filters": ["CompleteCommit"], "producer_id_filters": [],
                                      "duration_filter": -1})
        assert [(t.transactional_id, t.producer_id) for t in listed.transaction_states] == \
            [(f"tx-{client}", st.producer_id)]
        assert not conn.request(66, 1, {"state_filters": ["Ongoing"], "producer_id_filters": [],
                                        "duration_filter": -1}).transaction_states
        from impl.txn_coordinator import partition_for
        here = partition_for(f"tx-{client}", 3)
        unknown = next(f"nobody-{i}" for i in range(100) if partition_for(f"nobody-{i}", 3) == here)
        elsewhere = next(f"nobody-{i}" for i in range(100) if partition_for(f"nobody-{i}", 3) != here)
        got = conn.request(65, 0, {"transactional_ids": [unknown, elsewhere]}).transaction_states
        assert [t.error_code for t in got] == [105, 16]      # TRANSACTIONAL_ID_NOT_FOUND, NOT_COORDINATOR
    states = [e["state"] for i in range(c.n) for e in trace_events(c, i)
              if e.get("type") == "txn_state" and e["transactional_id"] == f"tx-{client}"]
    runs = [s for i, s in enumerate(states) if i == 0 or states[i - 1] != s]   # Ongoing repeats per added partition
    assert runs == ["Empty", "Ongoing", "PrepareCommit", "CompleteCommit", "Ongoing", "PrepareAbort",
                    "CompleteAbort", "Ongoing", "PrepareCommit", "CompleteCommit"]
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
        assert readline(z) == "ready"
        os.kill(z.pid, signal.SIGSTOP)
        p = txn_producer(client, c.bootstrap, tid)         # the new instance: aborts the zombie's transaction
        try:
            p.begin(); send_all(p, vals("n", 6)); p.commit()
        finally:
            p.close()
        os.kill(z.pid, signal.SIGCONT)
        z.stdin.write("go\n"); z.stdin.flush()
        verdict = readline(z, 90)
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


def test_coordinator_kill_during_abort_ends_aborted_everywhere(make_cluster):
    """The other outcome: an abort held between PrepareAbort and its markers, the coordinator
    killed -9; the new one finishes the abort, so no partition ever shows the records and a
    later transaction of the same id is read past them."""
    c = cluster(make_cluster)
    tid = "kill-abort"
    p = txn_producer("confluent", c.bootstrap, tid)
    x = coordinator_of(c, tid)
    try:
        p.begin(); send_all(p, vals("x", 6)); p.flush()
        (c.broker_dir(x) / "HOLD_TXN_MARKERS").touch()
        p.abort()
        assert describe(c, x, tid).transaction_state == "PrepareAbort"
    finally:
        p.close()
    c.kill(x)
    y = wait_until(lambda: (lambda n: [n] if n != x else None)(coordinator_of(c, tid)), 30,
                   what="a new coordinator")[0]
    wait_until(lambda: describe(c, y, tid).transaction_state == "CompleteAbort", 30,
               what="the new coordinator completing the abort from its log")
    q = txn_producer("confluent", live_bootstrap(c), tid)
    try:
        q.begin(); send_all(q, vals("y", 6)); q.commit()
    finally:
        q.close()
    got = read_values("confluent", live_bootstrap(c), "t", PARTS, set(vals("y", 6)))
    assert sorted(got) == sorted(vals("y", 6))                 # every x* aborted on every partition
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
    on (a later transaction is read) and the producer's own late commit is refused. Then KIP-360's
    re-init on the wire: the epoch before that bump passes, older ones are fenced by version."""
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
    # KIP-360 re-init (InitProducerId 3+ naming the producer): the epoch before the coordinator's
    # own bump still passes; an older one is fenced (PRODUCER_FENCED from v4, INVALID_PRODUCER_EPOCH
    # in v3); another producer id is INVALID_PRODUCER_ID_MAPPING
    def reinit(version, pid, epoch):
        with SyncConn(*c.address(node)) as conn:
            r = conn.request(22, version, {"transactional_id": tid, "transaction_timeout_ms": 60000,
                                           "producer_id": pid, "producer_epoch": epoch})
        return r.error_code, r.producer_epoch
    pid = st.producer_id
    assert reinit(4, pid, 0) == (0, 2)
    assert reinit(4, pid, 1) == (90, -1) and reinit(3, pid, 1) == (47, -1)
    assert reinit(4, pid + 1, 2) == (49, -1)
    assert reinit(4, pid, 2) == (0, 3)
    conformance_clean(c)                 # txn_bump_fenced among the judged decisions
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


# confluent-kafka in the default run; the other two clients (about 15 s each) under -m slow
@pytest.mark.parametrize("client", [c if c == "confluent" else pytest.param(c, marks=pytest.mark.slow)
                                    for c in CLIENTS])
def test_consume_transform_produce_exactly_once_across_a_member_crash(make_cluster, client):
    """Two workers of one client (tests/txn_ctp_worker.py: consumer group + transactional producer with
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
    workers = [subprocess.Popen([sys.executable, "-m", "tests.txn_ctp_worker", client, c.bootstrap, str(w),
                                 "hold" if w == 0 else "-"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                env=env) for w in range(2)]
    try:
        for w in workers:
            assert readline(w) == "ready"
        feed(inputs[:45])
        lines = [readline(workers[0]) for _ in range(2)]
        assert lines[0].startswith("committed") and lines[1] == "holding", lines
        feed(inputs[45:60])
        workers[0].kill()                 # mid-transaction: its output and offsets are pending
        feed(inputs[60:])
        got = read_values(client, c.bootstrap, "out", PARTS, set(inputs), timeout_s=60)
    finally:
        for w in workers:
            w.kill(); w.wait(10)
    dup = sorted(v for v in set(got) if got.count(v) > 1)
    assert set(got) == set(inputs) and not dup, (sorted(set(inputs) - set(got)), dup)
    conformance_clean(c)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(4))
def test_coordinator_kill_at_a_random_moment_of_a_commit_is_all_or_nothing(make_cluster, seed):
    """No hook: the commit runs in a thread and the coordinator is killed -9 after a seeded delay
    (0-60 ms, around the EndTxn). Whatever the client saw, a read_committed reader sees the
    transaction on every partition or on none, and a later transaction is read past it."""
    import random
    import threading
    c = cluster(make_cluster)
    tid = f"rand-{seed}"
    p = txn_producer("confluent", c.bootstrap, tid)
    x = coordinator_of(c, tid)
    outcome: list = []
    try:
        p.begin(); send_all(p, vals("r", 6)); p.flush()

        def commit():
            try:
                p.commit()
                outcome.append("committed")
            except Exception as e:             # the client may see the crash: indeterminate
                outcome.append(repr(e))
        t = threading.Thread(target=commit)
        t.start()
        threading.Event().wait(random.Random(seed).uniform(0, 0.06))
        c.kill(x)
        t.join(90)
        assert not t.is_alive(), "commit_transaction hung"
    finally:
        p.close()
    q = txn_producer("confluent", live_bootstrap(c), f"after-{seed}")
    try:
        q.begin(); send_all(q, vals("s", 6)); q.commit()
    finally:
        q.close()
    got = read_values("confluent", live_bootstrap(c), "t", PARTS, set(vals("s", 6)), timeout_s=60)
    seen = set(got) & set(vals("r", 6))
    assert set(vals("s", 6)) <= set(got)
    assert seen in (set(), set(vals("r", 6))), (outcome, sorted(seen))
    if outcome == ["committed"]:
        assert seen == set(vals("r", 6)), "a commit the client saw succeed is not visible"


def test_kip966_generation_serves_transaction_version_1_clients(make_cluster):
    """On the generation with txn-epoch-bump the clients still speak transaction version 1 (no
    EndTxn 5 is advertised): commits and aborts work, the epoch stays, and markers are
    transaction version 1 ones, which the partitions' version-2 epoch check leaves alone."""
    c = make_cluster(3, generation="kip-966", broker_config=TXN_CONFIG)
    c.create_topic("t", partitions=PARTS, replication_factor=3, min_insync=2)
    c.wait_for_leaders("t", isr_size=3)
    p = txn_producer("confluent", c.bootstrap, "tv1")
    try:
        p.begin(); send_all(p, vals("c", 6)); p.commit()
        p.begin(); send_all(p, vals("a", 6)); p.flush(); p.abort()
        p.begin(); send_all(p, vals("s", 6)); p.commit()
    finally:
        p.close()
    want = set(vals("c", 6) + vals("s", 6))
    got = read_values("confluent", c.bootstrap, "t", PARTS, want)
    assert sorted(got) == sorted(want)
    node = coordinator_of(c, "tv1")
    wait_until(lambda: describe(c, node, "tv1").transaction_state == "CompleteCommit", 10, what="CompleteCommit")
    assert describe(c, node, "tv1").producer_epoch == 0
    from checkers.conformance import check_events, read_events
    evs = [e for e in read_events(f for i in range(c.n) for f in c.trace_files(i)) if e.get("type") == "txn_rule"]
    assert evs and check_events(evs, "kip-966").divergences == []
