"""Idempotent producers of real clients at their defaults against the real broker.

- kafka-python 3.0 (idempotence on by default), confluent-kafka 2.16 at its default (librdkafka's
  enable.idempotence=false) and with enable.idempotence=true, aiokafka with
  enable_idempotence=True: produce with acks=all, read back with assign().
- 3 brokers, RF 3, min ISR 2: kill -9 the partition's leader while an idempotent acks=all
  producer sends. Every send is recorded with traces/history_recorder.py, followed by final
  reads; `kafkaverify check-history` judges the history (no acknowledged record lost, none
  duplicated, send order kept), and the test checks the same directly.
- InitProducerId: ids unique across brokers; a transactional id is refused fast and clearly.
"""
from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time

import pytest

from impl.cluster import PROJECT_ROOT, child_env
from impl.netclient import SyncConn
from tests.broker_fixtures import consume_all, make_cluster, wait_until  # noqa: F401
from traces.history_recorder import HistoryRecorder

pytestmark = pytest.mark.timeout(180)

CLIENTS = ["kafka-python", "confluent-kafka", "aiokafka"]


# --- one producer interface over the three clients ----------------------------------------------

class Sender:
    """send(value, on_done(offset | None, error | None)) for each client; flush(); close()."""

    def __init__(self, client: str, bootstrap: str, idempotence: bool | None):
        self.client = client
        if client == "kafka-python":
            from kafka import KafkaProducer
            kw = {} if idempotence is None else {"enable_idempotence": idempotence}
            self.p = KafkaProducer(bootstrap_servers=bootstrap, acks="all", **kw)
            retries = self.p.config["retries"]
            self.settings = {"retries": retries if retries != float("inf") else 2147483647, "idempotence": self.p.config["enable_idempotence"],
                             "max_in_flight": self.p.config["max_in_flight_requests_per_connection"]}
        elif client == "confluent-kafka":
            from confluent_kafka import Producer
            conf = {"bootstrap.servers": bootstrap, "acks": "all", "log_level": 3}
            if idempotence is not None:
                conf["enable.idempotence"] = idempotence
            self.p = Producer(conf)
            # librdkafka: retries effectively unbounded (INT32_MAX), 1000000 in flight by default,
            # capped at 5 when idempotent
            self.settings = {"retries": 2147483647, "idempotence": bool(idempotence),
                             "max_in_flight": 5 if idempotence else 1000000}
            self._stop = threading.Event()
            self._poller = threading.Thread(target=self._poll, daemon=True)
            self._poller.start()
        else:
            from aiokafka import AIOKafkaProducer
            self.loop = asyncio.new_event_loop()
            self._t = threading.Thread(target=self.loop.run_forever, daemon=True)
            self._t.start()

            async def mk():
                p = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=bool(idempotence),
                                     request_timeout_ms=30000)
                await p.start()
                return p
            self.p = self._run(mk())
            self.settings = {"retries": 2147483647, "idempotence": bool(idempotence), "max_in_flight": 5}

    def _run(self, coro, timeout=60):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def _poll(self):
        while not self._stop.is_set():
            self.p.poll(0.05)

    def send(self, topic: str, value: bytes, on_done) -> None:
        if self.client == "kafka-python":
            f = self.p.send(topic, value, partition=0)
            f.add_callback(lambda md: on_done(md.offset, None))
            f.add_errback(lambda e: on_done(None, type(e).__name__))
        elif self.client == "confluent-kafka":
            def cb(err, msg):
                on_done(None, str(err.name())) if err else on_done(msg.offset(), None)
            while True:
                try:
                    self.p.produce(topic, value, partition=0, on_delivery=cb)
                    return
                except BufferError:
                    time.sleep(0.01)
        else:
            async def go():
                fut = await self.p.send(topic, value, partition=0)

                def done(f):
                    e = f.exception()
                    on_done(None, type(e).__name__) if e else on_done(f.result().offset, None)
                fut.add_done_callback(done)
            self._run(go())

    def flush(self, timeout_s: float = 120) -> None:
        if self.client == "kafka-python":
            self.p.flush(timeout_s)
        elif self.client == "confluent-kafka":
            self.p.flush(timeout_s)
        else:
            self._run(self.p.flush(), timeout_s)

    def close(self) -> None:
        if self.client == "kafka-python":
            self.p.close(10)
        elif self.client == "confluent-kafka":
            self._stop.set()
            self._poller.join(5)
            self.p.flush(10)
        else:
            self._run(self.p.stop())
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._t.join(5)


def produce_recorded(rec: HistoryRecorder, sender: Sender, topic: str, values: list[str], process: int,
                     results: dict) -> None:
    """Sends values in order, recording invoke/completion; results[value] = offset | error."""
    lock = threading.Lock()
    for v in values:
        op = rec.invoke(process, "send", topic=topic, partition=0, value=v)

        def done(offset, err, op=op, v=v):
            with lock:
                results[v] = offset if err is None else err
            if err is None:
                rec.ok(op, offset=offset)
            else:
                rec.info(op, error=err)         # a failed retry may still have been written
        sender.send(topic, v.encode(), done)


def final_reads(rec: HistoryRecorder, cluster, topic: str, process: int) -> list[tuple[int, bytes]]:
    got = consume_all(cluster, topic, 0, idle_ms=1500)
    op = rec.invoke(process, "poll", topic=topic, partition=0, final=True)
    rec.ok(op, offsets=[o for o, _ in got], values=[v.decode() for _, v in got])
    return got


def check_history(path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kafkaverify", "check-history", str(path)],
                          capture_output=True, text=True, env=child_env(), cwd=PROJECT_ROOT, timeout=120)


# --- defaults: produce acks=all, read back with assign() ------------------------------------------

@pytest.fixture(scope="module")
def three(tmp_path_factory):
    from impl.cluster import Cluster
    c = Cluster(3, tmp_path_factory.mktemp("idem"), session_timeout_ms=2500)
    c.start()
    yield c
    c.stop()


@pytest.mark.parametrize("client,idempotence", [("kafka-python", None), ("confluent-kafka", None),
                                                ("confluent-kafka", True), ("aiokafka", True)])
def test_client_defaults_produce_and_read_back(three, client, idempotence):
    topic = f"d-{client}-{idempotence}".replace("None", "default")
    three.create_topic(topic, partitions=1, replication_factor=3, min_insync=2)
    s = Sender(client, three.bootstrap, idempotence)
    results: dict = {}
    values = [f"{client}-{i}" for i in range(200)]
    try:
        for v in values:
            s.send(topic, v.encode(), lambda o, e, v=v: results.__setitem__(v, o if e is None else e))
        s.flush()
        wait_until(lambda: len(results) == len(values), timeout_s=60, what="every send completed")
    finally:
        s.close()
    assert [results[v] for v in values] == list(range(200))
    assert [v for _, v in consume_all(three, topic, 0, idle_ms=1000)] == [v.encode() for v in values]
    # what each client really did at these settings: its batches carry a producer id or not
    # (kafka-python 3.0: idempotent by default; librdkafka 2.16: enable.idempotence=false)
    want = client == "kafka-python" or bool(idempotence)
    assert {pid >= 0 for pid in stored_producer_ids(three, topic)} == {want}


def stored_producer_ids(cluster, topic: str) -> list[int]:
    from impl.storage.batch import iter_batches
    leader = cluster.wait_for_leaders(topic)[0]
    with SyncConn(*cluster.address(leader)) as conn:
        r = conn.request(1, 12, {
            "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 24, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "rack_id": "", "forgotten_topics_data": [],
            "topics": [{"topic": topic, "partitions": [{"partition": 0, "current_leader_epoch": -1,
                                                        "fetch_offset": 0, "last_fetched_epoch": -1,
                                                        "log_start_offset": 0, "partition_max_bytes": 1 << 24}]}]})
    data = bytes(r.responses[0].partitions[0].records)
    return [info.producer_id for _, info in iter_batches(data, check_crc=True)]


# --- kill -9 the leader under an idempotent acks=all producer ------------------------------------

@pytest.mark.parametrize("client", CLIENTS)
def test_leader_killed_under_idempotent_producer_no_loss_no_dup_order_kept(make_cluster, tmp_path, client):
    c = make_cluster(3)
    c.create_topic("k", partitions=1, replication_factor=3, min_insync=2)
    c.wait_for_leaders("k", isr_size=3)
    hist = tmp_path / f"history-{client}.jsonl"
    rec = HistoryRecorder(hist, trace_id=f"kill-leader-{client}", client=client)
    s = Sender(client, c.bootstrap, True)
    rec.producer_config(process=0, acks="all", **s.settings)
    results: dict = {}
    values = [f"{client}-{i}" for i in range(600)]
    try:
        produce_recorded(rec, s, "k", values[:200], 0, results)
        wait_until(lambda: len(results) >= 200, timeout_s=60, what="first 200 acknowledged")
        produce_recorded(rec, s, "k", values[200:400], 0, results)          # in flight ...
        killed = c.apply_fault({"fault": "kill", "target": "leader:k/0"})["broker"]   # ... when it dies
        produce_recorded(rec, s, "k", values[400:], 0, results)
        s.flush()
        wait_until(lambda: len(results) == len(values), timeout_s=120, what="every send completed")
    finally:
        s.close()
    assert c.leader_of("k", 0) not in (None, killed)
    got = final_reads(rec, c, "k", 1)
    rec.close()
    acked = [v for v in values if isinstance(results[v], int)]
    assert len(acked) == len(values), {v: r for v, r in results.items() if not isinstance(r, int)}
    read = [v.decode() for _, v in got]
    assert read == values                        # none lost, none duplicated, order = send order
    assert all(results[v] == o for o, v in zip(range(len(read)), read))
    r = check_history(hist)
    assert r.returncode == 0, r.stdout + r.stderr


# --- InitProducerId --------------------------------------------------------------------------------

def test_producer_ids_unique_across_brokers_and_transactional_ids_go_to_their_coordinator(three):
    ids = set()
    for i in range(3):
        with SyncConn(*three.address(i)) as conn:
            for _ in range(3):
                r = conn.request(22, 4, {"transactional_id": None, "transaction_timeout_ms": 60000,
                                         "producer_id": -1, "producer_epoch": -1})
                assert r.error_code == 0 and r.producer_epoch == 0
                ids.add(r.producer_id)
            t0 = time.monotonic()
            r = conn.request(22, 0, {"transactional_id": "tx", "transaction_timeout_ms": 60000})
            # no __transaction_state yet (no FindCoordinator): not this broker's id to coordinate
            assert r.error_code == 16 and time.monotonic() - t0 < 5      # NOT_COORDINATOR
    assert len(ids) == 9


def test_duplicate_and_out_of_order_over_the_wire(three):
    """A raw retry of an appended batch gets its original offset and is not appended again; a
    gap gets OUT_OF_ORDER_SEQUENCE_NUMBER; an older epoch INVALID_PRODUCER_EPOCH."""
    from tests.test_broker_producer_state import idem_batch
    three.create_topic("w", partitions=1, replication_factor=3, min_insync=2)
    leader = three.wait_for_leaders("w", isr_size=3)[0]
    with SyncConn(*three.address(leader)) as conn:
        pid = conn.request(22, 4, {"transactional_id": None, "transaction_timeout_ms": 1,
                                   "producer_id": -1, "producer_epoch": -1}).producer_id

        def produce(data):
            r = conn.request(0, 7, {"acks": -1, "timeout_ms": 15000, "transactional_id": None, "topic_data": [
                {"name": "w", "partition_data": [{"index": 0, "records": data}]}]})
            pr = r.responses[0].partition_responses[0]
            return pr.error_code, pr.base_offset
        assert produce(idem_batch(pid, 1, 0, 3)) == (0, 0)
        assert produce(idem_batch(pid, 1, 3, 2)) == (0, 3)
        assert produce(idem_batch(pid, 1, 0, 3)) == (0, 0)          # duplicate: original offset
        assert produce(idem_batch(pid, 1, 9, 1))[0] == 45           # gap
        assert produce(idem_batch(pid, 0, 5, 1))[0] == 47           # older epoch
        assert produce(idem_batch(pid + 999_999, 0, 4, 1))[0] == 59  # unknown producer
    assert len(consume_all(three, "w", 0, idle_ms=800)) == 5


def test_producer_state_survives_leader_kill_and_restart(make_cluster):
    """The followers built the producer state as they replicated: after kill -9 of the leader
    the new leader answers a retried batch with its original offset and takes the next sequence;
    the killed broker, restarted, rebuilds the same state from its log and snapshot."""
    from tests.test_broker_producer_state import idem_batch
    c = make_cluster(3)
    c.create_topic("s", partitions=1, replication_factor=3, min_insync=2)
    leader = c.wait_for_leaders("s", isr_size=3)[0]

    def produce(broker, data):
        with SyncConn(*c.address(broker)) as conn:
            r = conn.request(0, 7, {"acks": -1, "timeout_ms": 15000, "transactional_id": None, "topic_data": [
                {"name": "s", "partition_data": [{"index": 0, "records": data}]}]})
        pr = r.responses[0].partition_responses[0]
        return pr.error_code, pr.base_offset
    with SyncConn(*c.address(leader)) as conn:
        pid = conn.request(22, 4, {"transactional_id": None, "transaction_timeout_ms": 1,
                                   "producer_id": -1, "producer_epoch": -1}).producer_id
    for seq in range(0, 12, 2):
        assert produce(leader, idem_batch(pid, 0, seq, 2)) == (0, seq)
    c.kill(leader)
    wait_until(lambda: c.leader_of("s", 0) not in (None, leader), what="a new leader")
    new = c.wait_for_leaders("s")[0]
    assert produce(new, idem_batch(pid, 0, 10, 2)) == (0, 10)      # duplicate: original offset
    assert produce(new, idem_batch(pid, 0, 4, 2)) == (0, 4)        # duplicate within the last 5
    assert produce(new, idem_batch(pid, 0, 0, 2))[0] == 45         # older than the last 5 batches
    assert produce(new, idem_batch(pid, 0, 12, 2)) == (0, 12)      # next in sequence
    c.start_broker(leader)
    c.wait_for_leaders("s", isr_size=3)

    def producers(i):
        with SyncConn(*c.address(i)) as conn:
            d = conn.control({"op": "describe"})
        return next(p for p in d["partitions"] if p["topic"] == "s")["producers"]
    want = producers(new)
    assert want[str(pid)]["last_seq"] == 13
    wait_until(lambda: producers(leader) == want, what="the restarted broker's producer state")
    assert [v for _, v in consume_all(c, "s", 0, idle_ms=800)] == [b"v%d" % i for i in range(14)]
