"""Cluster-level checks of broker replication rules that tests/test_broker_rules.py pins only as
pure functions: a follower's high watermark (rules.follower_high_watermark: min of the leader's
HW and its own log end) and its leader-epoch cache as it fetches across a leader-epoch change
(the broker-side counterpart of the model's EpochCacheMatchesLog)."""
from __future__ import annotations

from impl.netclient import SyncConn
from tests.broker_fixtures import make_cluster, producer, wait_until  # noqa: F401


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
