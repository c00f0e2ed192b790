"""The history recorder (kafkaverify/plugin/client_history.py) at the clients' transactional
APIs, in history format version 2:
- without a broker: a transactional producer needs format version 2, and records its
  transactional_id; confluent-kafka's and aiokafka's transactional producers against
  librdkafka's own mock cluster (`test.mock.num.brokers`, a Kafka-protocol broker inside
  librdkafka that implements InitProducerId, AddPartitionsToTxn and EndTxn): begin / send /
  commit / abort recorded with the transaction, ok as the client reported, and the history
  checkers' verdict agrees with what the recorded read_committed consumer was served;
- on our broker: kafka-python's transactional producer (kafka-python 3.0.12 has one:
  init_transactions, begin_transaction, send_offsets_to_transaction, commit_transaction,
  abort_transaction) with a read_committed consumer; an aborted transaction's records never reach
  it, the committed ones all do, and the history is valid.
"""
from __future__ import annotations

import asyncio
import json

import pytest

from checkers.history.oracle.check import check_history
from kafkaverify.plugin.client_history import ClientHistory
from traces.history import load
from tests.broker_fixtures import *  # noqa: F401,F403
from tests.broker_fixtures import wait_until


def events(path) -> list[dict]:
    return [json.loads(line) for line in open(path)][1:]


def mock_bootstrap(holder) -> str:
    md = holder.list_topics(timeout=10)
    return ",".join(f"{b.host}:{b.port}" for b in md.brokers.values())


def test_a_transactional_producer_needs_format_2_and_records_its_id(tmp_path):
    from kafka import KafkaProducer
    # api_version given: the client does not connect until it is used
    kw = dict(bootstrap_servers="127.0.0.1:1", transactional_id="tx-1", api_version=(2, 6))
    h1 = ClientHistory(tmp_path / "v1.jsonl")
    p = KafkaProducer(**kw)
    try:
        with pytest.raises(ValueError, match="version 2"):
            h1.producer(p)
        with pytest.raises(ValueError, match="version 2"):
            h1.final_reads("127.0.0.1:1", isolation="read_committed")
    finally:
        h1.close()
    h2 = ClientHistory(tmp_path / "v2.jsonl", version=2)
    try:
        h2.producer(p)
    finally:
        h2.close()
        p.close(0)
    cfg = [e for e in events(tmp_path / "v2.jsonl") if e["f"] == "producer_config" and e["type"] == "invoke"]
    assert cfg and cfg[0]["transactional_id"] == "tx-1" and cfg[0]["idempotence"] is True
    assert json.loads(open(tmp_path / "v2.jsonl").readline())["version"] == 2


def test_confluent_transactions_recorded_on_librdkafka_mock(tmp_path):
    from confluent_kafka import Consumer, Producer, TopicPartition
    h = ClientHistory(tmp_path / "h.jsonl", version=2)
    raw = Producer({"test.mock.num.brokers": 1, "transactional.id": "tx-c", "log_level": 3})
    boot = mock_bootstrap(raw)
    p = h.producer(raw, transactional_id="tx-c")
    p.init_transactions(10)
    p.begin_transaction()
    for part in (0, 1):
        p.produce("t", f"c{part}".encode(), partition=part)
    p.commit_transaction(10)
    p.begin_transaction()
    for part in (0, 1):
        p.produce("t", f"a{part}".encode(), partition=part)
    p.flush(10)
    p.abort_transaction(10)
    c = h.consumer(Consumer({"bootstrap.servers": boot, "group.id": "g", "enable.auto.commit": False,
                             "isolation.level": "read_committed"}), group="g", isolation="read_committed")
    c.assign([TopicPartition("t", 0, 0), TopicPartition("t", 1, 0)])
    got: list[str] = []
    wait_until(lambda: got.extend(m.value().decode() for m in c.consume(10, 0.2) if not m.error())
               or {"c0", "c1"} <= set(got), timeout_s=20, what="the committed records read")
    c.close()
    h.close()
    ev = events(tmp_path / "h.jsonl")
    inv = {e["id"]: e for e in ev if e["type"] == "invoke"}
    done = {e["id"]: e for e in ev if e["type"] != "invoke"}
    sends = [e for e in inv.values() if e["f"] == "send"]
    assert {e["value"]: e["txn"] for e in sends} == {"c0": 1, "c1": 1, "a0": 2, "a1": 2}
    assert all(done[e["id"]]["type"] == "ok" for e in sends)       # the produce responses
    ends = sorted((e["f"], e["txn"], done[e["id"]]["type"]) for e in inv.values() if e["f"].startswith("txn_"))
    assert ends == [("txn_abort", 2, "ok"), ("txn_commit", 1, "ok")]
    polls = [e for e in inv.values() if e["f"] == "poll"]
    assert polls and all(e["isolation"] == "read_committed" for e in polls)
    # the verdict follows what the consumer was served: librdkafka's mock serves a
    # read_committed fetch the aborted records as well, and the checkers say so (G1a)
    h2 = load(str(tmp_path / "h.jsonl"))
    v = check_history(h2, time_limit=30)
    types = {a.type for a in v.anomalies}
    assert ("G1a" in types) == bool({"a0", "a1"} & set(got)), (types, got)
    assert types <= {"G1a"}, types


def test_aiokafka_transactions_recorded_on_librdkafka_mock(tmp_path):
    from aiokafka import AIOKafkaProducer
    from confluent_kafka import Producer
    holder = Producer({"test.mock.num.brokers": 1, "log_level": 3})
    boot = mock_bootstrap(holder)
    h = ClientHistory(tmp_path / "h.jsonl", version=2)

    async def run():
        p = h.producer(AIOKafkaProducer(bootstrap_servers=boot, transactional_id="tx-a"))
        await p.start()
        try:
            await p.begin_transaction()
            md = await p.send_and_wait("t", b"x0", partition=0)
            await p.send_and_wait("t", b"x1", partition=1)
            await p.commit_transaction()
            await p.begin_transaction()
            await p.send_and_wait("t", b"y0", partition=0)
            await p.abort_transaction()
            return md.offset
        finally:
            await p.stop()
    first = asyncio.run(run())

    async def read() -> list[str]:
        from aiokafka import AIOKafkaConsumer, TopicPartition
        c = h.consumer(AIOKafkaConsumer(bootstrap_servers=boot, isolation_level="read_committed",
                                        enable_auto_commit=False, auto_offset_reset="earliest"))
        await c.start()
        try:
            c.assign([TopicPartition("t", 0), TopicPartition("t", 1)])
            got: list[str] = []
            for _ in range(50):
                got += [m.value.decode() for ms in (await c.getmany(timeout_ms=200)).values() for m in ms]
                if {"x0", "x1"} <= set(got):
                    break
            return got
        finally:
            await c.stop()
    got = asyncio.run(read())
    assert {"x0", "x1"} <= set(got)
    h.close()
    ev = events(tmp_path / "h.jsonl")
    cfg = next(e for e in ev if e["f"] == "producer_config" and e["type"] == "invoke")
    assert cfg["transactional_id"] == "tx-a" and cfg["idempotence"] is True and cfg["acks"] == "all"
    inv = {e["id"]: e for e in ev if e["type"] == "invoke"}
    done = {e["id"]: e for e in ev if e["type"] != "invoke"}
    sends = {e["value"]: (e["txn"], done[e["id"]].get("offset")) for e in inv.values() if e["f"] == "send"}
    assert sends["x0"] == (1, first) and sends["x1"][0] == 1 and sends["y0"][0] == 2
    ends = sorted((e["f"], e["txn"], done[e["id"]]["type"]) for e in inv.values() if e["f"].startswith("txn_"))
    assert ends == [("txn_abort", 2, "ok"), ("txn_commit", 1, "ok")]
    polls = [e for e in inv.values() if e["f"] == "poll"]
    assert polls and all(e["isolation"] == "read_committed" for e in polls)
    assigns = [e for e in inv.values() if e["f"] == "assign"]
    assert len(assigns) == 2 and len({e["mono_ns"] for e in assigns}) == 1     # one assignment
    assert load(str(tmp_path / "h.jsonl")).header["version"] == 2


def test_kafka_python_transactions_on_the_broker_read_committed(make_cluster, tmp_path):
    from kafka import KafkaProducer
    c = make_cluster(1, broker_config={"group_initial_rebalance_delay_ms": 0, "offsets_topic_num_partitions": 1})
    c.create_topic("tx", partitions=2, replication_factor=1, min_insync=1)
    c.wait_for_leaders("tx", timeout_s=20, isr_size=1)
    h = ClientHistory(tmp_path / "h.jsonl", version=2)
    p = h.producer(KafkaProducer(bootstrap_servers=c.bootstrap, transactional_id="tx-k", max_block_ms=20000))
    p.init_transactions()
    plan = [("commit", "k1"), ("abort", "k2"), ("commit", "k3")]
    for end, tag in plan:
        p.begin_transaction()
        futs = [p.send("tx", f"{tag}-{part}".encode(), partition=part) for part in (0, 1)]
        if end == "commit":
            p.commit_transaction()
            assert all(f.get(10).offset >= 0 for f in futs)
        else:
            p.flush(10)
            p.abort_transaction()
    p.close(10)
    got = _read_committed(h, c, "tx", 4, "the committed records read")
    assert h.final_reads(c.bootstrap, isolation="read_committed") == []
    h.close()
    assert sorted(got) == ["k1-0", "k1-1", "k3-0", "k3-1"]          # never k2: it aborted
    ev = events(tmp_path / "h.jsonl")
    assert sorted((e["f"], e["txn"]) for e in ev if e["type"] == "invoke" and e["f"].startswith("txn_")) == \
        [("txn_abort", 2), ("txn_commit", 1), ("txn_commit", 3)]
    assert all(e.get("isolation") == "read_committed" for e in ev if e["type"] == "invoke" and e["f"] == "poll")
    hist = load(str(tmp_path / "h.jsonl"))
    v = check_history(hist, time_limit=30)
    assert v.status == "valid", [f"{a.type}: {a.explanation}" for a in v.anomalies]


def test_assignment_sets_and_merged_version(tmp_path):
    from kafkaverify.groupclient import merge_histories
    from traces.history_recorder import HistoryRecorder
    rec = HistoryRecorder(tmp_path / "a.jsonl", version=2)
    ids = rec.invoke_set(3, "assign", [{"topic": "t", "partition": p} for p in range(3)])
    for i in ids:
        rec.ok(i, offset=0)
    op = rec.invoke(3, "poll", topic="t", partition=0, isolation="read_committed")
    rec.ok(op, offsets=[], values=[])
    rec.close()
    with pytest.raises(ValueError, match="unknown operation"):
        HistoryRecorder(tmp_path / "b.jsonl").invoke_set(0, "nope", [{}])
    ev = events(tmp_path / "a.jsonl")
    assigns = [e for e in ev if e["f"] == "assign" and e["type"] == "invoke"]
    # one assignment: the set's invokes share one time, with distinct ids
    assert len({e["mono_ns"] for e in assigns}) == 1 and sorted(e["id"] for e in assigns) == sorted(ids)
    v1 = HistoryRecorder(tmp_path / "v1.jsonl")
    v1.close()
    out = merge_histories([tmp_path / "v1.jsonl", tmp_path / "a.jsonl"], tmp_path / "m.jsonl", trace_id="m")
    assert json.loads(open(out).readline())["version"] == 2
    assert json.loads(open(merge_histories([tmp_path / "v1.jsonl"], tmp_path / "m1.jsonl", trace_id="m1"))
                      .readline())["version"] == 1


def test_a_zombie_is_fenced_and_its_transaction_never_commits(make_cluster, tmp_path):
    """Two instances of one transactional.id (confluent-kafka) on our broker: the old one has a
    transaction open when the new one runs InitProducerId; the old one's commit is refused as
    fenced (recorded as not ok), its records never reach read_committed, and the new
    instance's committed transaction does; the history is valid."""
    from confluent_kafka import KafkaException, Producer
    c = make_cluster(1, broker_config={"group_initial_rebalance_delay_ms": 0, "offsets_topic_num_partitions": 1})
    c.create_topic("zt", partitions=2, replication_factor=1, min_insync=1)
    c.wait_for_leaders("zt", timeout_s=20, isr_size=1)
    h = ClientHistory(tmp_path / "h.jsonl", version=2)

    def instance():
        return h.producer(Producer({"bootstrap.servers": c.bootstrap, "transactional.id": "zombie",
                                    "log_level": 0}), transactional_id="zombie")
    old = instance()
    old.init_transactions(20)
    old.begin_transaction()
    for part in (0, 1):
        old.produce("zt", f"old-{part}".encode(), partition=part)
    old.flush(10)                                    # its records are in the log, uncommitted
    new = instance()
    new.init_transactions(20)                        # fences the old instance, aborts its transaction
    new.begin_transaction()
    for part in (0, 1):
        new.produce("zt", f"new-{part}".encode(), partition=part)
    new.commit_transaction(20)
    with pytest.raises(KafkaException) as refused:
        old.commit_transaction(20)
    assert refused.value.args[0].fatal() or "FENCED" in refused.value.args[0].name()
    got = _read_committed(h, c, "zt", 2, "the new instance's records read")
    assert h.final_reads(c.bootstrap, isolation="read_committed") == []
    h.close()
    assert sorted(got) == ["new-0", "new-1"]
    ev = events(tmp_path / "h.jsonl")
    ends = {e["id"]: e for e in ev if e["f"] == "txn_commit"}
    outcome = {e["process"]: e["type"] for e in ends.values() if e["type"] != "invoke"}
    assert outcome == {0: "info", 1: "ok"}, outcome  # the zombie's end unknown to its client, never ok
    v = check_history(load(str(tmp_path / "h.jsonl")), time_limit=30)
    assert v.status == "valid", [f"{a.type}: {a.explanation}" for a in v.anomalies]
    # Had the broker acknowledged the zombie's commit, the checkers would say so.
    hist = load(str(tmp_path / "h.jsonl"))
    z = next(o for o in hist.ops if o.f == "txn_commit" and o.process == 0)
    z.type, z.comp = "ok", z.end
    assert "zombie-commit" in check_history(hist, time_limit=30).types()


def test_kafka_python_polls_record_their_end_and_a_stale_one_is_a_g_single(make_cluster, tmp_path):
    """A read_committed kafka-python consumer recorded with ends=True on our broker: each poll
    carries the partition's end (the last stable offset, asked after the poll returned), the
    history is valid; a poll whose end is moved below a record the consumer had already read
    is a G-single."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    c = make_cluster(1, broker_config={"group_initial_rebalance_delay_ms": 0, "offsets_topic_num_partitions": 1})
    c.create_topic("te", partitions=1, replication_factor=1, min_insync=1)
    c.wait_for_leaders("te", timeout_s=20, isr_size=1)
    h = ClientHistory(tmp_path / "h.jsonl", version=2)
    p = h.producer(KafkaProducer(bootstrap_servers=c.bootstrap, transactional_id="tx-e", max_block_ms=20000))
    p.init_transactions()
    cons = h.consumer(KafkaConsumer(bootstrap_servers=c.bootstrap, group_id=None, enable_auto_commit=False,
                                    isolation_level="read_committed", auto_offset_reset="earliest"),
                      ends=True)
    cons.assign([TopicPartition("te", 0)])
    got: list[str] = []
    for tag in ("e1", "e2"):
        p.begin_transaction()
        p.send("te", tag.encode(), partition=0)
        p.commit_transaction()
        wait_until(lambda: got.extend(m.value.decode() for ms in cons.poll(timeout_ms=200).values() for m in ms)
                   or tag in got, timeout_s=20, what=f"{tag} read")
    p.close(10)
    cons.close()
    assert h.final_reads(c.bootstrap, isolation="read_committed") == []
    h.close()
    hist = load(str(tmp_path / "h.jsonl"))
    polls = [o for o in hist.ops if o.f == "poll" and not o.final]
    assert polls and all(o.end_offset is not None for o in polls)
    assert all(max(o.offsets) < o.end_offset for o in polls if o.offsets)
    v = check_history(hist, time_limit=30)
    assert v.status == "valid", [f"{a.type}: {a.explanation}" for a in v.anomalies]
    first = next(o for o in polls if o.values == ["e1"])
    later = next(o for o in polls if o.inv > first.comp)
    later.end_offset = first.offsets[0]                    # says e1 was not yet visible
    assert {"G-single-process", "G-single"} & check_history(hist, time_limit=30).types()


def _read_committed(h, c, topic: str, n: int, what: str) -> list[str]:
    """The values a recorded read_committed kafka-python consumer reads from partitions 0 and 1
    of `topic` until it has `n` (bounded wait)."""
    from kafka import KafkaConsumer, TopicPartition
    cons = h.consumer(KafkaConsumer(bootstrap_servers=c.bootstrap, group_id=None, enable_auto_commit=False,
                                    isolation_level="read_committed", auto_offset_reset="earliest"))
    cons.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
    got: list[str] = []
    wait_until(lambda: got.extend(m.value.decode() for ms in cons.poll(timeout_ms=200).values() for m in ms)
               or len(got) >= n, timeout_s=20, what=what)
    cons.close()
    return got
