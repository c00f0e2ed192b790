"""The partition leader's transactional log on real brokers (impl/txn_log.py): transactional
batches and WriteTxnMarkers written with raw requests (the coordinator is another room's), then
read back by read_committed consumers of confluent-kafka, aiokafka and kafka-python; the LSO stuck
while a transaction is open and moving after its marker; aborted_transactions in read_committed
fetches; ListOffsets under each isolation level; the marker's errors; the state kept across a
leader fail-over and rebuilt after a restart; KIP-890 part 1 refusing an unverified append. The
traced decisions are judged by conformance against the model."""
from __future__ import annotations

import asyncio
import time

import pytest

from checkers.conformance import check_events
from impl.netclient import SyncConn
from tests.broker_fixtures import *  # noqa: F401,F403
from tests.broker_fixtures import consume_all, trace_events, wait_until
from tests.test_broker_txn_rules import txn_batch

NO_VERIFY = {"without_fixes": ["txn-partition-verification"]}   # Kafka before 3.6 appends at once


class Raw:
    """Raw requests to one broker."""

    def __init__(self, cluster, broker: int, topic: str):
        self.conn = SyncConn(*cluster.address(broker))
        self.topic = topic

    def close(self):
        self.conn.close()

    def init_pid(self) -> int:
        return self.conn.request(22, 4, {"transactional_id": None, "transaction_timeout_ms": 1,
                                         "producer_id": -1, "producer_epoch": -1}).producer_id

    def produce(self, data: bytes, tid: str | None = "tx", partition: int = 0) -> tuple[int, int]:
        r = self.conn.request(0, 7, {"acks": -1, "timeout_ms": 15000, "transactional_id": tid, "topic_data": [
            {"name": self.topic, "partition_data": [{"index": partition, "records": data}]}]})
        pr = r.responses[0].partition_responses[0]
        return pr.error_code, pr.base_offset

    def marker(self, pid: int, epoch: int, commit: bool, coordinator_epoch: int = 0, version: int = 1,
               transaction_version: int = 0) -> int:
        r = self.conn.request(27, version, {"markers": [{
            "producer_id": pid, "producer_epoch": epoch, "transaction_result": commit,
            "topics": [{"name": self.topic, "partition_indexes": [0]}], "coordinator_epoch": coordinator_epoch,
            "transaction_version": transaction_version}]})
        return r.markers[0].topics[0].partitions[0].error_code

    def fetch(self, isolation: int, offset: int = 0):
        r = self.conn.request(1, 11, {
            "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": isolation,
            "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
            "topics": [{"topic": self.topic, "partitions": [{"partition": 0, "current_leader_epoch": -1,
                                                            "fetch_offset": offset, "log_start_offset": -1,
                                                            "partition_max_bytes": 1 << 20}]}]})
        return r.responses[0].partitions[0]

    def lso(self) -> int:
        return self.fetch(1).last_stable_offset

    def aborted(self, offset: int = 0):
        at = self.fetch(1, offset).aborted_transactions
        return None if at is None else [(a.producer_id, a.first_offset) for a in at]

    def latest(self, isolation: int) -> int:
        r = self.conn.request(2, 4, {"replica_id": -1, "isolation_level": isolation, "topics": [
            {"name": self.topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]})
        return r.topics[0].partitions[0].offset


class Reader:
    """A read_committed consumer of one client, assigned partition 0 from offset 0."""

    def __init__(self, client: str, bootstrap: str, topic: str):
        self.client, self.values = client, []
        if client == "confluent-kafka":
            from confluent_kafka import Consumer, TopicPartition
            self.c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}", "log_level": 3,
                               "isolation.level": "read_committed", "enable.auto.commit": False})
            self.tp = TopicPartition(topic, 0, 0)
            self.c.assign([self.tp])
        elif client == "aiokafka":
            from aiokafka import AIOKafkaConsumer, TopicPartition
            self.loop = asyncio.new_event_loop()
            self.tp = TopicPartition(topic, 0)

            async def mk():
                c = AIOKafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed",
                                     enable_auto_commit=False, group_id=None)
                await c.start()
                c.assign([self.tp])
                c.seek(self.tp, 0)
                return c
            self.c = self.loop.run_until_complete(mk())
        else:
            from kafka import KafkaConsumer, TopicPartition
            self.tp = TopicPartition(topic, 0)
            self.c = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed",
                                   enable_auto_commit=False, group_id=None, request_timeout_ms=15000)
            self.c.assign([self.tp])
            self.c.seek(self.tp, 0)

    def poll(self) -> None:
        if self.client == "confluent-kafka":
            m = self.c.poll(0.2)
            if m is not None and not m.error():
                self.values.append(m.value())
        elif self.client == "aiokafka":
            got = self.loop.run_until_complete(self.c.getmany(timeout_ms=200))
            self.values += [m.value for ms in got.values() for m in ms]
        else:
            got = self.c.poll(timeout_ms=200)
            self.values += [m.value for ms in got.values() for m in ms]

    def position(self) -> int:
        if self.client == "confluent-kafka":
            return self.c.position([self.tp])[0].offset
        if self.client == "aiokafka":
            return self.loop.run_until_complete(self.c.position(self.tp))
        return self.c.position(self.tp)

    def read_until(self, pred, what: str, timeout_s: float = 30):
        def step():
            self.poll()
            return pred(self)
        return wait_until(step, timeout_s=timeout_s, interval=0, what=what)

    def close(self) -> None:
        if self.client == "aiokafka":
            self.loop.run_until_complete(self.c.stop())
            self.loop.close()
        else:
            self.c.close()


@pytest.fixture(scope="module")
def three(tmp_path_factory):
    from impl.cluster import Cluster
    c = Cluster(3, tmp_path_factory.mktemp("txnlog"), session_timeout_ms=2500, broker_config=NO_VERIFY)
    c.start()
    yield c
    c.stop()


def _all_events(cluster) -> list[dict]:
    evs = [e for i in range(cluster.n) for e in trace_events(cluster, i)]
    return sorted(evs, key=lambda e: e["ts_ms"])


@pytest.mark.parametrize("client", ["confluent-kafka", "aiokafka", "kafka-python"])
def test_read_committed_consumers_see_committed_records_and_never_aborted_ones(three, client):
    topic = f"rc-{client}"
    three.create_topic(topic, partitions=1, replication_factor=3, min_insync=2)
    leader = three.wait_for_leaders(topic, isr_size=3)[0]
    raw = Raw(three, leader, topic)
    try:
        a, b, c = raw.init_pid(), raw.init_pid(), raw.init_pid()
        assert raw.produce(txn_batch(a, 0, 0, 2, b"A")) == (0, 0)
        assert raw.produce(txn_batch(b, 0, 0, 2, b"B")) == (0, 2)
        assert raw.produce(txn_batch(a, 0, 2, 1, b"A")) == (0, 4)
        assert raw.marker(b, 0, False) == 0                 # offset 5: ABORT
        assert raw.marker(a, 0, True) == 0                  # offset 6: COMMIT
        assert raw.produce(txn_batch(c, 0, 0, 2, b"C")) == (0, 7)   # left open
        reader = Reader(client, three.bootstrap, topic)
        try:
            reader.read_until(lambda r: r.position() == 7 and len(r.values) >= 3,
                              "the read_committed consumer at the LSO")
            assert reader.values == [b"A0", b"A1", b"A2"]   # none of B (aborted), none of C (open)
            assert raw.lso() == 7
            assert raw.marker(c, 0, True) == 0               # offset 9
            reader.read_until(lambda r: len(r.values) >= 5, "the committed C records")
            assert reader.values == [b"A0", b"A1", b"A2", b"C0", b"C1"]
        finally:
            reader.close()
    finally:
        raw.close()
    # read_uncommitted returns every data record, aborted ones included (control batches skipped)
    assert [v for _, v in consume_all(three, topic, 0, idle_ms=800)] == [b"A0", b"A1", b"B0", b"B1", b"A2",
                                                                        b"C0", b"C1"]


def test_lso_aborted_index_list_offsets_and_marker_errors(three):
    topic = "lso"
    three.create_topic(topic, partitions=1, replication_factor=3, min_insync=2)
    leader = three.wait_for_leaders(topic, isr_size=3)[0]
    raw = Raw(three, leader, topic)
    try:
        a, b = raw.init_pid(), raw.init_pid()
        assert raw.produce(txn_batch(a, 0, 0, 3)) == (0, 0)     # 0..2 open
        assert raw.produce(txn_batch(b, 0, 0, 2)) == (0, 3)     # 3..4 open
        p = raw.fetch(1)
        assert (p.high_watermark, p.last_stable_offset, p.records or b"") == (5, 0, b"")
        assert raw.fetch(0).last_stable_offset == 0 and raw.fetch(0).records   # read_uncommitted reads on
        assert (raw.latest(1), raw.latest(0)) == (0, 5)
        assert raw.marker(a, 0, False) == 0                       # 5: ABORT a
        assert raw.lso() == 3 and raw.latest(1) == 3
        assert raw.aborted() == [(a, 0)]
        assert raw.fetch(0).aborted_transactions is None          # only read_committed lists them
        assert raw.marker(b, 0, True, coordinator_epoch=2) == 0   # 6: COMMIT b
        assert raw.lso() == 7 == raw.latest(1) == raw.latest(0)
        assert raw.aborted(6) == [] and raw.aborted(3) == [(a, 0)]   # the range ends at its marker (5)
        # the marker's errors: an older coordinator epoch, an older producer epoch, a non-leader
        assert raw.produce(txn_batch(b, 1, 0, 1)) == (0, 7)       # b's epoch 1 opens a transaction
        assert raw.marker(b, 1, True, coordinator_epoch=1) == 52  # TRANSACTION_COORDINATOR_FENCED
        assert raw.marker(b, 0, True, coordinator_epoch=2) == 47  # INVALID_PRODUCER_EPOCH
        assert raw.produce(txn_batch(b, 0, 2, 1))[0] == 47        # a zombie's batch is fenced too
        assert raw.lso() == 7                                      # the epoch-1 transaction is open
        follower = next(i for i in range(3) if i != leader)
        other = Raw(three, follower, topic)
        try:
            assert other.marker(b, 1, True, coordinator_epoch=2) == 6   # NOT_LEADER_OR_FOLLOWER
        finally:
            other.close()
        assert raw.marker(b, 1, True, coordinator_epoch=2) == 0
        assert raw.lso() == 9
    finally:
        raw.close()
    verdicts = [(e["verdict"], e["error_code"]) for e in trace_events(three, leader, "txn_marker")
                if e["topic"] == topic]
    assert verdicts == [("append", 0), ("append", 0), ("coordinator-fenced", 52), ("fenced", 47), ("append", 0)]
    res = check_events(_all_events(three), "current", without=["txn-partition-verification"])
    assert not res.divergences, res.divergences[:3]
    # the same decisions judged as if partition verification were on: the appends diverge
    assert check_events(_all_events(three), "current").divergences


def test_failover_keeps_the_lso_and_a_restart_rebuilds_it(make_cluster):
    c = make_cluster(3, broker_config=NO_VERIFY)
    topic = "fo"
    c.create_topic(topic, partitions=1, replication_factor=3, min_insync=2)
    leader = c.wait_for_leaders(topic, isr_size=3)[0]
    raw = Raw(c, leader, topic)
    try:
        a, b = raw.init_pid(), raw.init_pid()
        assert raw.produce(txn_batch(a, 0, 0, 2)) == (0, 0)
        assert raw.marker(a, 0, False) == 0                       # 2: ABORT
        assert raw.produce(txn_batch(b, 0, 0, 2)) == (0, 3)       # 3..4 open
        assert raw.lso() == 3
    finally:
        raw.close()
    c.kill(leader)
    wait_until(lambda: c.leader_of(topic, 0) not in (None, leader), what="a new leader")
    new = c.wait_for_leaders(topic)[0]
    raw = Raw(c, new, topic)
    try:
        wait_until(lambda: raw.fetch(1).high_watermark == 5, what="the new leader's HW")
        assert raw.lso() == 3 and raw.latest(1) == 3             # b's transaction still open here
        assert raw.aborted() == [(a, 0)]
        assert raw.produce(txn_batch(b, 0, 2, 1)) == (0, 5)       # b goes on in the same transaction
        assert raw.marker(b, 0, True) == 0                        # 6: COMMIT on the new leader
        assert raw.lso() == 7
    finally:
        raw.close()
    c.start_broker(leader)
    c.wait_for_leaders(topic, isr_size=3)

    def producers(i):
        with SyncConn(*c.address(i)) as conn:
            d = conn.control({"op": "describe"})
        return next(p for p in d["partitions"] if p["topic"] == topic)["producers"]
    want = producers(new)
    assert want[str(b)]["txn_first_offset"] == -1 and want[str(a)]["txn_first_offset"] == -1
    wait_until(lambda: producers(leader) == want, what="the restarted broker's producer state")
    c.move_leader(topic, 0, leader)
    raw = Raw(c, leader, topic)
    try:
        wait_until(lambda: raw.fetch(1).high_watermark == 7, what="the restarted leader's HW")
        assert raw.lso() == 7 and raw.aborted() == [(a, 0)]        # rebuilt from its log
    finally:
        raw.close()


def test_epoch_bump_markers_fence_the_transactions_epoch(make_cluster):
    """KIP-890 part 2 (`txn-epoch-bump`, kip-966), the partition's side: a transaction version 2
    marker carries the bumped epoch; one with the transaction's own epoch is a late marker of an
    earlier transaction and is refused; after the bumped marker, a late batch of the old epoch is
    fenced. A version 1 marker keeps the old check."""
    c = make_cluster(1, generation="kip-966", broker_config=NO_VERIFY)
    c.create_topic("bump", partitions=1, replication_factor=1)
    c.wait_for_leaders("bump")
    raw = Raw(c, 0, "bump")
    try:
        pid, other = raw.init_pid(), raw.init_pid()
        assert raw.produce(txn_batch(pid, 0, 0, 2)) == (0, 0)
        assert raw.marker(pid, 0, True, version=2, transaction_version=2) == 47   # not above the batches'
        assert raw.lso() == 0
        assert raw.marker(pid, 1, True, version=2, transaction_version=2) == 0    # 2: the bumped epoch
        assert raw.lso() == 3
        assert raw.produce(txn_batch(pid, 0, 2, 1))[0] == 47                      # the old epoch, late
        assert raw.produce(txn_batch(pid, 1, 0, 1)) == (0, 3)                     # the next transaction
        assert raw.produce(txn_batch(other, 0, 0, 1)) == (0, 4)
        assert raw.marker(other, 0, False, version=2, transaction_version=1) == 0  # version 1: same epoch
        assert raw.lso() == 3                                                     # pid's epoch-1 transaction
        assert raw.marker(pid, 2, True, version=2, transaction_version=2) == 0    # 6
        assert raw.lso() == 7 and raw.aborted() == [(other, 4)]
    finally:
        raw.close()
    assert not check_events(_all_events(c), "kip-966", without=["txn-partition-verification"]).divergences
    # judged on `current` (no txn-epoch-bump), the refused marker should have been appended
    caught = check_events(_all_events(c), "current", without=["txn-partition-verification"]).divergences
    assert [d.event["type"] for d in caught] == ["txn_marker"]


def test_partition_verification_refuses_an_append_the_coordinator_does_not_vouch_for(make_cluster):
    """KIP-890 part 1 on (the `current` generation): before a producer's first transactional
    append the leader asks the transaction coordinator; with none holding the transaction (no
    `__transaction_state` leader answers) the produce is refused, retriably, and nothing is
    appended. The decision is traced and conforms."""
    c = make_cluster(1)
    c.create_topic("v", partitions=1, replication_factor=1)
    c.wait_for_leaders("v")
    raw = Raw(c, 0, "v")
    try:
        pid = raw.init_pid()
        assert raw.produce(txn_batch(pid, 0, 0, 2)) == (19, -1)         # NOT_ENOUGH_REPLICAS
        assert raw.fetch(0).high_watermark == 0
        assert raw.produce(txn_batch(pid, 0, 0, 2, transactional=False)) == (0, 0)   # idempotent: no check
    finally:
        raw.close()
    (ev,) = trace_events(c, 0, "txn_produce")
    assert (ev["verdict"], ev["verify_error"], ev["verified"]) == ("unverified", 15, False)
    assert not check_events(_all_events(c), "current").divergences


# --- with the transaction coordinator ---------------------------------------------------------------

RETRY = {14, 15, 16, 51}      # COORDINATOR_LOAD_IN_PROGRESS, _NOT_AVAILABLE, NOT_COORDINATOR, CONCURRENT_TRANSACTIONS


class RawTxn:
    """A transactional producer spoken in raw requests, so a Produce can arrive late on purpose."""

    def __init__(self, cluster, tid: str, topic: str):
        self.c, self.tid, self.topic = cluster, tid, topic

        def find():
            with SyncConn(*cluster.address(cluster.alive()[0])) as conn:
                r = conn.request(10, 1, {"key": tid, "key_type": 1})
            return (r.node_id,) if r.error_code == 0 else None
        self.coord = wait_until(find, what="the transaction coordinator")[0]
        self.conn = SyncConn(*cluster.address(self.coord))

        def init():
            r = self.conn.request(22, 4, {"transactional_id": tid, "transaction_timeout_ms": 60000,
                                          "producer_id": -1, "producer_epoch": -1})
            assert r.error_code in RETRY | {0}, r.error_code
            return (r.producer_id, r.producer_epoch) if r.error_code == 0 else None
        self.pid, self.epoch = wait_until(init, what="InitProducerId")

    def add_partition(self) -> int:
        def go():
            r = self.conn.request(24, 3, {"v3_and_below_transactional_id": self.tid,
                                          "v3_and_below_producer_id": self.pid,
                                          "v3_and_below_producer_epoch": self.epoch,
                                          "v3_and_below_topics": [{"name": self.topic, "partitions": [0]}]})
            code = r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
            return None if code in RETRY else (code,)
        return wait_until(go, what="AddPartitionsToTxn")[0]

    def end(self, commit: bool) -> int:
        def go():
            r = self.conn.request(26, 3, {"transactional_id": self.tid, "producer_id": self.pid,
                                          "producer_epoch": self.epoch, "committed": commit})
            return None if r.error_code in RETRY else (r.error_code,)
        return wait_until(go, what="EndTxn")[0]

    def close(self):
        self.conn.close()


@pytest.mark.parametrize("verification", [True, False], ids=["kip890-part1", "before-3.6"])
def test_a_late_produce_after_an_abort_hangs_only_without_partition_verification(make_cluster, verification):
    """The transaction aborts; a Produce of it delayed in the network arrives afterwards. With
    `txn-partition-verification` the leader asks the coordinator, which no longer has the
    transaction ongoing: INVALID_TXN_STATE, nothing appended, the LSO follows the HW. Without it
    the batch is appended and opens a transaction no coordinator will end: the LSO stays on it (a
    hanging transaction), which conformance judged with the fix reports."""
    c = make_cluster(3, broker_config=None if verification else NO_VERIFY)
    c.create_topic("late", partitions=1, replication_factor=3, min_insync=2)
    leader = c.wait_for_leaders("late", isr_size=3)[0]
    tx = RawTxn(c, "tx-late", "late")
    raw = Raw(c, leader, "late")
    try:
        assert tx.add_partition() == 0
        assert raw.produce(txn_batch(tx.pid, tx.epoch, 0, 2), "tx-late") == (0, 0)
        assert tx.end(False) == 0
        wait_until(lambda: raw.lso() == raw.fetch(0).high_watermark == 3, what="the ABORT marker under the HW")
        assert raw.aborted() == [(tx.pid, 0)]
        if verification:
            # a retriable refusal (NOT_ENOUGH_REPLICAS) while the coordinator completes the abort
            # or is slow to answer; retried as a client would, then INVALID_TXN_STATE
            late = wait_until(lambda: (r := raw.produce(txn_batch(tx.pid, tx.epoch, 2, 1), "tx-late"))[0] != 19 and r,
                              what="a settled verification")
        else:
            late = raw.produce(txn_batch(tx.pid, tx.epoch, 2, 1), "tx-late")
        if verification:
            assert late == (48, -1)                                   # INVALID_TXN_STATE
            assert raw.lso() == raw.fetch(0).high_watermark == 3
        else:
            assert late == (0, 3)
            wait_until(lambda: raw.fetch(0).high_watermark == 4, what="the late batch committed")
            assert raw.lso() == 3 and raw.latest(1) == 3              # stuck: a hanging transaction
    finally:
        raw.close()
        tx.close()
    verdicts = [(e["verdict"], e["verify_error"]) for e in trace_events(c, leader, "txn_produce")]
    if verification:
        assert verdicts[0] == ("append", 0) and verdicts[-1] == ("unverified", 48)
        assert all(v == "unverified" for v, _ in verdicts[1:])
    else:
        assert verdicts == [("append", None), ("append", None)]
    events = _all_events(c)
    assert not check_events(events, "current", without=[] if verification else ["txn-partition-verification"]).divergences
    if not verification:
        caught = check_events(events, "current").divergences
        assert caught and all(d.event["type"] == "txn_produce" for d in caught), [d.text for d in caught]
        assert any("txn_produce_verdict" in " ".join(d.allowed) for d in caught)


@pytest.mark.parametrize("client", ["confluent-kafka", "aiokafka"])
def test_transactional_clients_commit_and_abort_read_committed(make_cluster, client):
    """A client's own transactional producer (its AddPartitionsToTxn, the leader's verification,
    the coordinator's markers): read_committed consumers of both clients get the committed
    transactions' records, in order, and never the aborted one's."""
    c = make_cluster(3)
    topic = "e2e"
    c.create_topic(topic, partitions=1, replication_factor=3, min_insync=2)
    c.wait_for_leaders(topic, isr_size=3)
    txns = [(True, [b"c0", b"c1", b"c2"]), (False, [b"a0", b"a1"]), (True, [b"c3"])]
    if client == "confluent-kafka":
        from confluent_kafka import Producer
        p = Producer({"bootstrap.servers": c.bootstrap, "transactional.id": "tx-cf", "log_level": 3})
        p.init_transactions(30)
        for commit, values in txns:
            p.begin_transaction()
            for v in values:
                p.produce(topic, v, partition=0)
            p.flush(30)
            p.commit_transaction(30) if commit else p.abort_transaction(30)
    else:
        from aiokafka import AIOKafkaProducer

        async def run():
            p = AIOKafkaProducer(bootstrap_servers=c.bootstrap, transactional_id="tx-aio", request_timeout_ms=30000)
            await p.start()
            try:
                for commit, values in txns:
                    await p.begin_transaction()
                    for v in values:
                        await (await p.send(topic, v, partition=0))
                    await (p.commit_transaction() if commit else p.abort_transaction())
            finally:
                await p.stop()
        asyncio.run(asyncio.wait_for(run(), 90))
    for reader_client in ("confluent-kafka", "aiokafka"):
        r = Reader(reader_client, c.bootstrap, topic)
        try:
            r.read_until(lambda x: len(x.values) >= 4, f"{reader_client} reading the committed records")
            assert r.values == [b"c0", b"c1", b"c2", b"c3"]
        finally:
            r.close()
    leader = c.leader_of(topic, 0)
    verified = [e for e in trace_events(c, leader, "txn_produce") if e["topic"] == topic]
    # every append was vouched for (the coordinator answered, or that transaction was ongoing);
    # a verification that failed under load was refused and retried by the client
    assert any(e["verify_error"] == 0 and e["verdict"] == "append" for e in verified)
    assert all(e["verify_error"] in (0, None) for e in verified if e["verdict"] == "append")
    assert not check_events(_all_events(c), "current").divergences


def test_transactional_cluster_traces_load_as_the_trace_format(make_cluster):
    """Every event a transactional cluster writes (coordinator and partition leader alike) is a
    known broker event type with its fields, so the traces load without falling back."""
    from traces.trace import load
    c = make_cluster(1)
    c.create_topic("f", partitions=1, replication_factor=1)
    c.wait_for_leaders("f")
    tx = RawTxn(c, "tx-f", "f")
    raw = Raw(c, 0, "f")
    try:
        assert tx.add_partition() == 0
        assert raw.produce(txn_batch(tx.pid, tx.epoch, 0, 1), "tx-f") == (0, 0)
        assert tx.end(True) == 0
        wait_until(lambda: raw.lso() == 2, what="the COMMIT marker under the HW")
    finally:
        raw.close()
        tx.close()
    types = {r["type"] for f in c.trace_files(0) for r in load(f).records if r.get("kind") == "event"}
    assert {"txn_rule", "txn_produce", "txn_marker"} <= types
