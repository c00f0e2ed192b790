"""KIP-101 S1 on real processes: in v0.10 a follower truncating to its stale HW loses an
acknowledged record once the leader it followed dies; with epoch-based truncation it does not.

Script (3 brokers, one partition, RF=3, min.insync=1, acks=all):
  1. produce m0, then m1 with acks=all; both acknowledged (leader HW = 2). Followers learn a HW
     only with their next fetch response, which long-polls for `replica_fetch_wait_ms`
     (set long here), so each follower's HW is still 1.
  2. kill -9 the leader C at once. The controller elects X (first live ISR replica); Y becomes
     X's follower and truncates: v0.10 to its HW (1), dropping m1; kip-101+ asks X with
     OffsetsForLeaderEpoch and keeps m1.
     Test-only hook: replication is paused on X and Y (file PAUSE_REPLICATION, see
     impl/broker.py): truncation happens, fetching does not -- Y cannot re-fetch m1.
  3. kill -9 X. Y, still in the ISR, is elected; the log a consumer reads is Y's.
"""
from __future__ import annotations

import time

import pytest

from impl.netclient import SyncConn
from tests.broker_fixtures import consume_all, make_cluster, producer, trace_events, wait_until  # noqa: F401

pytestmark = pytest.mark.timeout(120)


def _describe(c, i, topic):
    with SyncConn(*c.address(i)) as conn:
        d = conn.control({"op": "describe"})
    return next(p for p in d["partitions"] if p["topic"] == topic)


def run_s1(make_cluster, generation: str, coordinator: str = "embedded"):
    c = make_cluster(3, coordinator=coordinator, generation=generation,
                     broker_config={"replica_fetch_wait_ms": 5000, "hw_checkpoint_ms": 600000,
                                    "replica_lag_time_max_ms": 30000})
    c.create_topic("s1", partitions=1, replication_factor=3, min_insync=1)
    leader = c.wait_for_leaders("s1", isr_size=3)[0]
    p = producer(c, acks="all", request_timeout_ms=20000)
    offs = [p.send("s1", v, partition=0).get(20).offset for v in (b"m0", b"m1")]
    assert offs == [0, 1]
    # followers hold both records but still the old HW (their fetch(2) is long-polling)
    followers = [i for i in range(3) if i != leader]
    for f in followers:
        d = _describe(c, f, "s1")
        assert d["log_end_offset"] == 2 and d["hw"] == 1, d
        c.pause_replication(f)
    c.kill(leader)
    wait_until(lambda: c.leader_of("s1", 0) not in (None, leader), what="election after the leader died")
    x = c.leader_of("s1", 0)
    y = next(f for f in followers if f != x)
    wait_until(lambda: any(e["leader"] == x for e in trace_events(c, y, "became_follower")),
               what=f"broker {y} following {x}")
    time.sleep(1.0)        # Y's fetcher truncates right after LeaderAndIsr; fetching is paused
    y_state = _describe(c, y, "s1")
    c.kill(x)
    wait_until(lambda: c.leader_of("s1", 0) == y, what=f"broker {y} elected")
    c.resume_replication(y)
    c.wait_for_leaders("s1")
    p.close()
    return y_state, consume_all(c, "s1", 0, idle_ms=1500), trace_events(c, y, "truncated")


def test_s1_v010_loses_an_acknowledged_record(make_cluster):
    y_state, got, truncs = run_s1(make_cluster, "v0.10")
    assert y_state["log_end_offset"] == 1                      # truncated to its stale HW
    assert [e["reason"] for e in truncs] == ["hw"]
    assert (1, b"m1") not in got and got == [(0, b"m0")]      # acknowledged m1 is gone


@pytest.mark.parametrize("generation", ["kip-101", "current"])
def test_s1_epoch_truncation_keeps_it(make_cluster, generation):
    y_state, got, truncs = run_s1(make_cluster, generation)
    assert y_state["log_end_offset"] == 2 and truncs == []
    assert got == [(0, b"m0"), (1, b"m1")]


def _values(path) -> dict[int, bytes]:
    from kafka.record.default_records import DefaultRecordBatch
    from impl.storage.log import PartitionLog
    lg = PartitionLog(path)
    try:
        return {r.offset: r.value for _, data in lg.batches() for r in DefaultRecordBatch(bytes(data))}
    finally:
        lg.close()


def _produce_raw(c, leader, values, acks=-1) -> int:
    from kafka.record.default_records import DefaultRecordBatchBuilder
    bb = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                   producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i, v in enumerate(values):
        bb.append(i, timestamp=int(time.time() * 1000), key=None, value=v, headers=[])
    with SyncConn(*c.address(leader)) as conn:
        r = conn.request(0, 7, {"acks": acks, "timeout_ms": 15000, "transactional_id": None, "topic_data": [
            {"name": "s2", "partition_data": [{"index": 0, "records": bytes(bb.build())}]}]})
    pr = r.responses[0].partition_responses[0]
    assert pr.error_code == 0, pr
    return pr.base_offset


def run_s2(make_cluster, generation: str):
    """KIP-101 S2 with the power-loss fault. A leads, B follows; flush policies: A fsyncs every
    record, B every 2 records, so B persists the batch [m0a, m0b] but not m1. Power loss hits A,
    then (after B was elected) B. B returns first and is elected again (it is the whole ISR),
    appends m2 at offset 2; A returns as follower. With HW truncation A keeps m1 at offset 2 (its
    HW checkpoint is 3): the replicas diverge at an offset both hold as committed. With epoch
    truncation A asks B for epoch 0's end (2) and cuts m1. (m1 itself is lost in both
    generations -- every replica that held it lost power before fsync, and Kafka's durability is
    replication, not fsync; S2 is about divergence.)"""
    c = make_cluster(3, generation=generation,
                     broker_config={"hw_checkpoint_ms": 100, "replica_lag_time_max_ms": 30000})
    ctl = c.controller()
    a, b = [i for i in range(3) if i != ctl]
    # per-broker flush policies: restart A and B with them (the controller stays put)
    c.broker_configs = {a: {"log": {"flush_messages": 1}}, b: {"log": {"flush_messages": 2}}}
    for i in (a, b):
        c.stop_broker(i)
        c.start_broker(i)
    assert c.controller() == ctl
    c.create_topic("s2", assignment={0: [a, b]}, min_insync=1)
    # the controller may see B registered before A and elect B first: arrange A as the leader
    c.wait_for_leaders("s2", isr_size=2)
    c.move_leader("s2", 0, a)
    assert c.wait_for_leaders("s2", isr_size=2) == {0: a}
    assert _produce_raw(c, a, [b"m0a", b"m0b"]) == 0
    assert _produce_raw(c, a, [b"m1"]) == 2
    time.sleep(0.4)                                   # A checkpoints HW 3
    assert sum(c.power_loss(a).values()) == 0         # A had fsynced everything
    wait_until(lambda: c.leader_of("s2", 0) == b, what=f"broker {b} elected")
    assert sum(c.power_loss(b).values()) > 0          # B loses m1
    wait_until(lambda: c.leader_of("s2", 0) is None, what="partition offline")
    c.start_broker(b)
    wait_until(lambda: c.leader_of("s2", 0) == b, what=f"broker {b} elected again")
    c.wait_for_leaders("s2")
    assert _produce_raw(c, b, [b"m2"], acks=1) == 2
    c.start_broker(a)
    wait_until(lambda: sorted(c.partition_state("s2", 0)["isr"]) == sorted([a, b]), what="A back in the ISR")
    c.stop_broker(a)
    c.stop_broker(b)
    return _values(c.broker_dir(a) / "s2-0"), _values(c.broker_dir(b) / "s2-0")


def test_s2_v010_replicas_diverge_after_power_loss(make_cluster):
    on_a, on_b = run_s2(make_cluster, "v0.10")
    assert on_b == {0: b"m0a", 1: b"m0b", 2: b"m2"}
    assert on_a == {0: b"m0a", 1: b"m0b", 2: b"m1"}   # same offset, different record, both in the ISR


def test_s2_current_replicas_agree_after_power_loss(make_cluster):
    on_a, on_b = run_s2(make_cluster, "current")
    assert on_a == on_b == {0: b"m0a", 1: b"m0b", 2: b"m2"}
