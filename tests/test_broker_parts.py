"""The broker's decision parts driven directly, without sockets or processes: a Partition
(impl/partition.py) on a real log in a temporary directory, the IsrManager (impl/isr.py) with a
recorder in place of the coordination store, the ReplicaFetcher (impl/fetcher.py) against a
scripted leader connection. Each test asserts what the part decides: the HW over the ISR, the
truncation on an epoch change, the ISR shrink after lag, and the trace events they write."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace as NS

from impl import rules
from impl.fetcher import ReplicaFetcher
from impl.isr import IsrManager
from impl.partition import Partition
from impl.protocol import codec
from impl.storage.log import PartitionLog
from tests.test_broker_storage import batch

G = rules.GENERATIONS
ME = 0


class Trace:
    """The event sink: (type, fields) in order."""

    def __init__(self):
        self.events: list[tuple[str, dict]] = []

    def __call__(self, etype: str, **fields) -> None:
        self.events.append((etype, fields))

    def of(self, etype: str) -> list[dict]:
        return [f for t, f in self.events if t == etype]


def state(leader: int, epoch: int, isr, replicas=(0, 1, 2), min_insync: int = 1) -> dict:
    return {"leader": leader, "leader_epoch": epoch, "isr": list(isr), "replicas": list(replicas),
            "zk_version": 0, "min_insync": min_insync}


def partition(tmp_path, fixes=G["current"], name="p") -> tuple[Partition, Trace]:
    tr = Trace()
    return Partition("t", 0, PartitionLog(tmp_path / name), ME, fixes, tr), tr


def leader_with(tmp_path, records: int, isr=(0, 1, 2), fixes=G["current"], min_insync: int = 1):
    p, tr = partition(tmp_path, fixes)
    p.become_leader(state(ME, 1, isr, min_insync=min_insync), now_ms=0)
    for i in range(records):
        p.log.append_as_leader(batch([b"%d" % i]), p.leader_epoch)
    p.update_hw()
    return p, tr


class Recorder:
    """Stands in for the coordination store's compare-and-set: records each proposed write."""

    def __init__(self):
        self.writes: list[tuple[int, set, dict]] = []

    def __call__(self, p, epoch, new_isr, fetched):
        self.writes.append((epoch, set(new_isr), dict(fetched)))


def isr_manager(fixes=G["current"], lag_max_ms=3000, epochs=None):
    rec = Recorder()
    return IsrManager(ME, fixes, lag_max_ms, lambda r: (epochs or {}).get(r, -1), rec), rec


# --- Partition: the HW over the ISR ---------------------------------------------------------------

def test_leader_hw_is_the_smallest_isr_position_and_releases_acks_all(tmp_path):
    p, tr = leader_with(tmp_path, 5)
    assert p.log.leo == 5 and p.hw == 0              # followers at unknown positions
    loop = asyncio.new_event_loop()
    try:
        fut = loop.create_future()
        p.delayed.append((2, fut))                   # an acks=all produce ending at offset 2
        p.record_follower_fetch(1, 5, p.log.leo, now_ms=10, broker_epoch=7)
        p.update_hw()
        assert p.hw == 0                             # replica 2 still at 0
        p.record_follower_fetch(2, 3, p.log.leo, now_ms=10, broker_epoch=8)
        p.update_hw()
        assert p.hw == 3 and fut.done() and fut.result() == 0
        assert [f["hw"] for f in tr.of("hw_advanced")] == [3]
        assert p.fetch_broker_epoch == {1: 7, 2: 8}
        assert p.last_caught_up[1] == 10             # reached our LEO at this fetch
        p.record_follower_fetch(2, 1, p.log.leo, now_ms=20, broker_epoch=8)
        p.update_hw()
        assert p.hw == 3                             # never backwards on the leader
    finally:
        loop.close()


def test_fetch_from_an_unassigned_replica_is_not_counted(tmp_path):
    p, _ = leader_with(tmp_path, 2, isr=(0, 1))
    p.replicas = [0, 1]
    assert not p.record_follower_fetch(5, 2, p.log.leo, now_ms=1, broker_epoch=1)
    assert 5 not in p.follower_leo


def test_no_hw_advance_under_min_isr_with_kafka_15583(tmp_path):
    p, _ = leader_with(tmp_path, 4, isr=(0,), min_insync=2)
    assert p.hw == 0                                 # min-isr-hw: |ISR| 1 < 2
    old, _ = leader_with(tmp_path / "old", 4, isr=(0,), fixes=G["kip-320"], min_insync=2)
    assert old.hw == 4                               # before the fix the lone leader moves it
    assert not p.produce_allowed(-1) and p.produce_allowed(1)


def test_acks_all_after_the_isr_shrank_below_min_is_not_enough_replicas(tmp_path):
    p, _ = leader_with(tmp_path, 3, isr=(0, 1), min_insync=2)
    loop = asyncio.new_event_loop()
    try:
        fut = loop.create_future()
        p.delayed.append((2, fut))
        p.isr = {0}                                  # a shrink committed meanwhile
        p.hw = 3
        p.complete_delayed()
        assert fut.result() == codec.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    finally:
        loop.close()


# --- Partition: becoming follower, truncation ------------------------------------------------------

def _follower_log(p: Partition) -> None:
    """Offsets 0..2 in epoch 1, 3..5 in epoch 2."""
    for epoch in (1, 2):
        for i in range(3):
            p.log.append_as_leader(batch([b"e%d-%d" % (epoch, i)]), epoch)


def test_truncation_on_a_leader_epoch_change_only_with_kafka_7164(tmp_path):
    for fixes, expected in ((G["kip-320"], True), (G["kip-279"], False)):
        p, tr = partition(tmp_path, fixes, name=f"f-{expected}")
        p.become_follower(state(1, 3, (0, 1)), had_fetcher=False)
        assert p.needs_truncation                    # a new fetcher always truncates first
        p.truncation_done(3)
        assert not p.needs_truncation
        p.become_follower(state(1, 4, (0, 1)), had_fetcher=True)   # same leader, new epoch
        assert p.needs_truncation is expected
        assert tr.of("became_follower")[-1] == {"topic": "t", "partition": 0, "leader_epoch": 4,
                                                "leader": 1, "truncate": expected}


def test_becoming_follower_fails_pending_acks_all(tmp_path):
    p, _ = leader_with(tmp_path, 2)
    loop = asyncio.new_event_loop()
    try:
        fut = loop.create_future()
        p.delayed.append((1, fut))
        p.become_follower(state(1, 2, (0, 1)), had_fetcher=False)
        assert fut.result() == codec.NOT_LEADER_OR_FOLLOWER and p.delayed == []
        assert p.role == "follower" and p.needs_truncation
    finally:
        loop.close()


class ScriptedLeader:
    """A leader connection answering from a real leader-side Partition's log (no socket)."""

    def __init__(self, leader: Partition, hw: int | None = None):
        self.leader, self.hw = leader, hw
        self.requests: list[tuple[int, dict]] = []

    async def request(self, api: int, version: int, body: dict):
        self.requests.append((api, body))
        lp = self.leader
        if api == 23:                                # OffsetsForLeaderEpoch
            q = body["topics"][0]["partitions"][0]
            err = lp.fetch_epoch_error(q["current_leader_epoch"])
            ep, end = rules.leader_epoch_answer(lp.log.epochs.entries, lp.log.leo, q["leader_epoch"], lp.fixes)
            return NS(topics=[NS(partitions=[NS(error_code=err, leader_epoch=ep, end_offset=end)])])
        if api == 1:                                 # Fetch
            f = body["topics"][0]["partitions"][0]
            if f["fetch_offset"] > lp.log.leo:
                return NS(responses=[NS(partitions=[NS(error_code=codec.OFFSET_OUT_OF_RANGE,
                                                       records=b"", high_watermark=lp.hw)])])
            data = lp.log.read(f["fetch_offset"], 1 << 20, lp.log.leo)
            hw = lp.hw if self.hw is None else self.hw
            return NS(responses=[NS(partitions=[NS(error_code=0, records=data, high_watermark=hw)])])
        if api == 2:                                 # ListOffsets: -1 latest, -2 earliest
            ts = body["topics"][0]["partitions"][0]["timestamp"]
            off = lp.log.leo if ts == -1 else lp.log.log_start_offset
            return NS(topics=[NS(partitions=[NS(offset=off)])])
        raise AssertionError(f"unexpected api {api}")


def _fetcher(fixes, tmp_path) -> ReplicaFetcher:
    return ReplicaFetcher(ME, fixes, 0, tmp_path / "PAUSE_REPLICATION", lambda leader: ("h", 1))


def test_follower_truncates_to_the_leaders_end_of_its_epoch(tmp_path):
    """KIP-101: the follower has epochs 1 (0..2) and 2 (3..5); the new leader has epoch 1 only up
    to offset 3, then its own epoch 3: its answer for epoch 2 is (1, 3) under KIP-279, and the
    follower cuts its epoch-2 records."""
    leader, _ = partition(tmp_path, G["current"], name="leader")
    for i in range(3):
        leader.log.append_as_leader(batch([b"e1-%d" % i]), 1)
    leader.become_leader(state(1, 3, (1,)), now_ms=0)
    leader.log.append_as_leader(batch([b"e3"]), 3)
    f, tr = partition(tmp_path, G["current"], name="follower")
    _follower_log(f)
    f.hw = 5
    f.become_follower(state(1, 3, (1, 0)), had_fetcher=False)
    conn = ScriptedLeader(leader)
    asyncio.run(_fetcher(G["current"], tmp_path).truncate(f, conn, 3))
    assert f.log.leo == 3 and f.hw == 3
    assert tr.of("truncated") == [{"topic": "t", "partition": 0, "offset": 3, "reason": "leader_epoch"}]
    assert conn.requests[0][1]["topics"][0]["partitions"][0]["current_leader_epoch"] == 3
    assert f.log.epochs.entries == [(1, 0)]


def test_kip_279_truncates_to_the_smaller_of_both_ends_of_the_answered_epoch(tmp_path):
    """The leader's epoch 1 ends at 3, the follower's at 2 (then its epoch 2 from 2): asked about
    epoch 2 the leader answers (1, 3). With KIP-279 the follower cuts at its own end of epoch 1
    (2); KIP-101 alone cuts at 3 and keeps an epoch-2 record the leader never had."""
    leader, _ = partition(tmp_path, G["current"], name="leader")
    for i in range(3):
        leader.log.append_as_leader(batch([b"l1-%d" % i]), 1)
    leader.become_leader(state(1, 3, (1,)), now_ms=0)
    leader.log.append_as_leader(batch([b"l3"]), 3)
    for fixes, cut in ((G["kip-279"], 2), (G["kip-101"], 3)):
        f, _ = partition(tmp_path, fixes, name=f"follower-{cut}")
        for i in range(2):
            f.log.append_as_leader(batch([b"f1-%d" % i]), 1)
        for i in range(4):
            f.log.append_as_leader(batch([b"f2-%d" % i]), 2)
        f.hw = 6
        f.become_follower(state(1, 3, (1, 0)), had_fetcher=False)
        asyncio.run(_fetcher(fixes, tmp_path).truncate(f, ScriptedLeader(leader), 3))
        assert f.log.leo == cut, fixes


def test_follower_before_kip_101_truncates_to_its_hw_without_asking(tmp_path):
    f, tr = partition(tmp_path, G["v0.10"], name="follower")
    _follower_log(f)
    f.hw = 4
    f.become_follower(state(1, 3, (1, 0)), had_fetcher=False)
    conn = ScriptedLeader(partition(tmp_path, G["v0.10"], name="leader")[0])
    asyncio.run(_fetcher(G["v0.10"], tmp_path).truncate(f, conn, 3))
    assert f.log.leo == 4 and conn.requests == []
    assert tr.of("truncated")[0]["reason"] == "hw"


def test_fetch_appends_per_epoch_and_takes_the_leaders_hw(tmp_path):
    leader, _ = partition(tmp_path, G["current"], name="leader")
    leader.become_leader(state(1, 2, (1, 0)), now_ms=0)
    for i in range(3):
        leader.log.append_as_leader(batch([b"%d" % i]), 2 if i < 2 else 4)
    f, tr = partition(tmp_path, G["current"], name="follower")
    f.become_follower(state(1, 4, (1, 0)), had_fetcher=False)
    asyncio.run(_fetcher(G["current"], tmp_path).fetch_once(f, ScriptedLeader(leader, hw=2), 4))
    assert f.log.leo == 3 and f.hw == 2
    assert [(a["base_offset"], a["last_offset"], a["leader_epoch"]) for a in tr.of("appended")] == \
        [(0, 1, 2), (2, 2, 4)]
    assert tr.of("hw_advanced") == [{"topic": "t", "partition": 0, "hw": 2, "role": "follower"}]
    # a new leader with a lower HW lowers ours: traced with "lowered"
    asyncio.run(_fetcher(G["current"], tmp_path).fetch_once(f, ScriptedLeader(leader, hw=1), 4))
    assert f.hw == 1 and tr.of("hw_advanced")[-1]["lowered"] is True


def test_out_of_range_past_the_leaders_end_truncates_to_it(tmp_path):
    leader, _ = partition(tmp_path, G["current"], name="leader")
    leader.become_leader(state(1, 2, (1, 0)), now_ms=0)
    leader.log.append_as_leader(batch([b"x"]), 2)
    f, tr = partition(tmp_path, G["current"], name="follower")
    _follower_log(f)
    f.become_follower(state(1, 2, (1, 0)), had_fetcher=False)
    asyncio.run(_fetcher(G["current"], tmp_path).fetch_once(f, ScriptedLeader(leader), 2))
    assert f.log.leo == 1
    assert tr.of("truncated") == [{"topic": "t", "partition": 0, "offset": 1, "reason": "leader_log_end"}]


def test_a_superseded_fetcher_does_not_act_on_an_old_answer(tmp_path):
    leader, _ = partition(tmp_path, G["current"], name="leader")
    leader.become_leader(state(1, 2, (1, 0)), now_ms=0)
    leader.log.append_as_leader(batch([b"x"]), 2)
    f, tr = partition(tmp_path, G["current"], name="follower")
    f.become_follower(state(1, 5, (1, 0)), had_fetcher=False)
    asyncio.run(_fetcher(G["current"], tmp_path).fetch_once(f, ScriptedLeader(leader), 4))   # epoch 4: stale
    assert f.log.leo == 0 and tr.of("appended") == []


# --- IsrManager: shrink, expand, the write's outcome ------------------------------------------

def test_isr_shrinks_after_lag_and_the_hw_then_moves(tmp_path):
    p, tr = leader_with(tmp_path, 4)
    isr, rec = isr_manager()
    p.record_follower_fetch(1, 4, p.log.leo, now_ms=1000, broker_epoch=1)
    isr.maybe_shrink(p, now_ms=2000)
    assert rec.writes == []                          # nobody lagging past 3000 ms yet
    isr.maybe_shrink(p, now_ms=3500)                 # replica 2 last caught up at 0
    assert rec.writes == [(1, {0, 1}, {})]
    assert tr.of("isr_proposed")[-1]["isr"] == [0, 1]
    # KIP-497: until the write commits, the HW still counts replica 2 (at 0)
    assert p.isr == {0, 1, 2} and p.maximal_isr == {0, 1, 2} and p.isr_inflight
    p.update_hw()
    assert p.hw == 0
    isr.maybe_shrink(p, now_ms=9000)
    assert len(rec.writes) == 1                      # one proposal in flight at a time
    isr.write_done(p, 1, {0, 1}, ok=True, fetched={}, current={}, refused=[])
    assert p.isr == {0, 1} and not p.isr_inflight and p.hw == 4
    assert tr.of("isr_changed")[-1] == {"topic": "t", "partition": 0, "isr": [0, 1], "leader_epoch": 1}


def test_without_maximal_isr_the_leader_acts_on_the_proposal_at_once(tmp_path):
    p, _ = leader_with(tmp_path, 4, fixes=G["kip-320"])
    isr, rec = isr_manager(G["kip-320"])
    p.record_follower_fetch(1, 4, p.log.leo, now_ms=1000, broker_epoch=1)
    isr.maybe_shrink(p, now_ms=3500)
    assert p.isr == {0, 1}                           # before the write commits
    p.update_hw()
    assert p.hw == 4


def test_isr_expansion_waits_for_the_epoch_start_and_counts_at_once(tmp_path):
    p, tr = partition(tmp_path)
    for i in range(3):
        p.log.append_as_leader(batch([b"%d" % i]), 0)
    p.become_leader(state(ME, 1, (0,), replicas=(0, 1)), now_ms=0)   # epoch 1 starts at 3
    p.log.append_as_leader(batch([b"new"]), 1)
    p.update_hw()
    assert p.hw == 4
    isr, rec = isr_manager(epochs={1: 9})
    p.record_follower_fetch(1, 3, p.log.leo, now_ms=5, broker_epoch=9)
    isr.maybe_expand(p, 1)
    assert rec.writes == []                          # below the HW
    p.hw = 3                                         # (as if the HW had stayed at the epoch start)
    isr.maybe_expand(p, 1)
    assert rec.writes == [(1, {0, 1}, {1: 9})]
    assert p.maximal_isr == {0, 1} and p.isr == {0}  # KIP-497: the addition counts at once
    proposed = tr.of("isr_proposed")[-1]
    assert proposed["positions"] == {"1": 3} and proposed["current_broker_epochs"] == {"1": 9}


def test_kafka_7128_no_expansion_before_the_leaders_epoch_start(tmp_path):
    p, _ = partition(tmp_path)
    for i in range(3):
        p.log.append_as_leader(batch([b"%d" % i]), 0)
    p.become_leader(state(ME, 1, (0,), replicas=(0, 1)), now_ms=0)   # epoch 1 starts at 3
    p.hw = 2
    isr, rec = isr_manager()
    p.record_follower_fetch(1, 2, p.log.leo, now_ms=5, broker_epoch=1)
    isr.maybe_expand(p, 1)
    assert rec.writes == []
    old, rec_old = isr_manager(G["kip-279"])
    old.maybe_expand(p, 1)
    assert rec_old.writes == [(1, {0, 1}, {1: 1})]


def test_kip_903_an_addition_from_an_older_registration_is_refused(tmp_path):
    p, tr = leader_with(tmp_path, 2, isr=(0, 1))
    isr, _ = isr_manager()
    assert isr.ineligible({2: 4}, {2: 5}) == [2]
    assert isr.ineligible({2: 5}, {2: 5}) == []
    p.isr_inflight = True
    isr.write_done(p, 1, {0, 1, 2}, ok=False, fetched={2: 4}, current={2: 5}, refused=[2])
    assert p.isr == {0, 1} and p.maximal_isr == {0, 1} and not p.isr_inflight
    assert tr.of("isr_change_failed")[-1] == {
        "topic": "t", "partition": 0, "isr": [0, 1], "leader_epoch": 1, "reason": "ineligible_replica",
        "ineligible": [2], "broker_epochs": {"2": 4}, "current_broker_epochs": {"2": 5}}


def test_a_write_ending_after_leadership_moved_on_changes_nothing(tmp_path):
    p, tr = leader_with(tmp_path, 2, isr=(0, 1))
    isr, _ = isr_manager()
    p.isr_inflight = True
    p.become_follower(state(1, 2, (0, 1)), had_fetcher=False)
    isr.write_done(p, 1, {0}, ok=True, fetched={}, current={}, refused=[])
    assert p.isr == {0, 1} and tr.of("isr_changed") == []
