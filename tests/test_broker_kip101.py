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
