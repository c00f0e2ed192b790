"""Cluster-level checks of broker replication rules that tests/test_broker_rules.py pins only as
pure functions: a follower's high watermark (rules.follower_high_watermark: min of the leader's
HW and its own log end) and its leader-epoch cache as it fetches across a leader-epoch change
(the broker-side counterpart of the model's EpochCacheMatchesLog); the ISR shrink rule
(rules.out_of_sync with the leader's record of when each follower was last caught up, Kafka's
Replica.updateFetchState), which conformance does not judge (it is a matter of time)."""
from __future__ import annotations

import time

from impl.netclient import SyncConn
from tests.broker_fixtures import make_cluster, producer, trace_events, wait_until  # noqa: F401


def _replica(c, b: int, topic: str) -> dict:
    with SyncConn(*c.address(b)) as conn:
        d = conn.control({"op": "describe"})
    return next(p for p in d["partitions"] if p["topic"] == topic and p["partition"] == 0)


def test_followers_take_the_leaders_hw_and_epoch_cache_across_an_epoch_change(make_cluster):
    c = make_cluster(3, generation="current")
    c.create_topic("ec", assignment={0: [0, 1, 2]}, min_insync=2)
    c.wait_for_leaders("ec", isr_size=3)
    p = producer(c, acks="all", retries=10)
    for k in range(3):
        p.send("ec", b"a%d" % k, partition=0).get(10)
    st = c.partition_state("ec", 0)
    first = st["leader"]
    c.move_leader("ec", 0, next(b for b in st["isr"] if b != first))
    for k in range(2):
        p.send("ec", b"b%d" % k, partition=0).get(20)
    p.close()
    c.wait_for_leaders("ec", isr_size=3)

    def converged():
        rs = [_replica(c, b, "ec") for b in range(3)]
        return rs if all(r["log_end_offset"] == 5 and r["hw"] == 5 for r in rs) else None
    replicas = wait_until(converged, timeout_s=30, what="every replica at log end 5 and HW 5")
    assert sorted(r["role"] for r in replicas) == ["follower", "follower", "leader"]
    leader = next(r for r in replicas if r["role"] == "leader")
    caches = [tuple(map(tuple, r["epochs"])) for r in replicas]
    assert len(set(caches)) == 1, caches                       # followers copied the leader's epochs
    cache = caches[0]
    assert [e for e, _ in cache] == sorted({e for e, _ in cache}), cache      # strictly increasing
    assert [s for _, s in cache] == sorted({s for _, s in cache}) and cache[-1][1] <= 5, cache
    assert cache[0][1] == 0 and any(s == 3 for _, s in cache), cache          # the new epoch starts at 3
    assert leader["leader_epoch"] == max(e for e, _ in cache)


LAG_MS = 3000     # generous: a follower descheduled on a loaded 2-core machine must not count as lagging


def test_only_the_follower_that_stops_fetching_leaves_the_isr(make_cluster):
    """replica.lag.time.max.ms 3 s. Under steady acks=1 writes for 2 lag periods both followers
    keep up, so the ISR keeps all three and nothing is proposed. Then one follower stops
    fetching: it, and only it, is proposed out of the ISR -- never the leader, never the
    follower that keeps up."""
    c = make_cluster(3, broker_config={"replica_lag_time_max_ms": LAG_MS})
    leader = c.controller()
    keeps, stops = [b for b in range(3) if b != leader]
    c.create_topic("lag", assignment={0: [leader, keeps, stops]}, min_insync=1)
    c.wait_for_leaders("lag", isr_size=3)
    c.move_leader("lag", 0, leader)
    p = producer(c, acks=1, retries=10)
    sent, until = 0, time.monotonic() + 2 * LAG_MS / 1000
    while time.monotonic() < until:                   # writes never wait for the followers
        p.send("lag", b"v%d" % sent + b"." * 1000, partition=0)
        sent += 1
        if sent % 500 == 0:
            p.flush(10)
    p.flush(10)
    assert sorted(c.partition_state("lag", 0)["isr"]) == [0, 1, 2]
    assert not trace_events(c, leader, "isr_proposed"), "a follower that keeps up was proposed out"
    c.pause_replication(stops)

    def shrunk():
        p.send("lag", b"w", partition=0).get(10)      # the writes go on while we wait
        return sorted(c.partition_state("lag", 0)["isr"]) == sorted([leader, keeps])
    wait_until(shrunk, timeout_s=30, interval=0.1, what=f"{stops} out of the ISR")
    p.close()
    proposals = [sorted(x["isr"]) for x in trace_events(c, leader, "isr_proposed")]
    assert proposals == [sorted([leader, keeps])], proposals


def test_a_follower_behind_the_leaders_log_start_restarts_there(make_cluster):
    """A follower that was down while retention deleted the leader's oldest segments fetches
    below the leader's log start: OFFSET_OUT_OF_RANGE, so it asks for the leader's earliest
    offset, empties its log and starts it there (Kafka's ReplicaFetcherThread
    handleOutOfRangeError), then copies the rest: the same log start, log end and records."""
    c = make_cluster(2, broker_config={"log": {"segment_bytes": 4096, "retention_bytes": 8192}})
    leader = c.controller()
    f = 1 - leader
    c.create_topic("ret", assignment={0: [leader, f]}, min_insync=1)
    c.wait_for_leaders("ret", isr_size=2)
    c.move_leader("ret", 0, leader)
    p = producer(c, acks=1, retries=10)
    p.send("ret", b"first", partition=0).get(10)
    wait_until(lambda: _replica(c, f, "ret")["log_end_offset"] == 1, what="the follower at log end 1")
    c.stop_broker(f)
    wait_until(lambda: c.partition_state("ret", 0)["isr"] == [leader], what=f"{f} out of the ISR")
    for k in range(60):
        p.send("ret", b"%03d" % k + b"." * 500, partition=0)
    p.flush(10)
    p.close()
    def retained():
        start = _replica(c, leader, "ret")["log_start_offset"]
        return start if start > 1 else None
    start = wait_until(retained, what="retention past the follower's log end")
    c.start_broker(f)
    c.wait_for_leaders("ret", isr_size=2, timeout_s=30)
    lead, fol = _replica(c, leader, "ret"), _replica(c, f, "ret")
    assert fol["log_end_offset"] == lead["log_end_offset"] == 61 and fol["log_start_offset"] >= start
    cuts = [(x["reason"], x["offset"]) for x in trace_events(c, f, "truncated") if x.get("topic") == "ret"]
    # one cut: to the leader's log start when the follower asked (retention may have moved it on since)
    assert len(cuts) == 1 and cuts[0][0] == "log_start" and start <= cuts[0][1] <= lead["log_start_offset"], cuts
