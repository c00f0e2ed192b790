"""The replication rules of impl/rules.py, each with its fix on and off, and the generation
fences on a real broker (Fetch / OffsetsForLeaderEpoch with a stale or future leader epoch)."""
from __future__ import annotations

import pytest

from impl import rules
from impl.netclient import SyncConn
from tests.broker_fixtures import make_cluster, trace_events, wait_until  # noqa: F401

G = rules.GENERATIONS


def test_generations_are_cumulative_and_named():
    assert G["v0.10"] == {"controller-epoch-fencing"}
    order = ["v0.10", "kip-101", "kip-279", "kip-320", "current", "kip-966"]
    for older, newer in zip(order, order[1:]):
        assert G[older] < G[newer]
    assert G["kip-966"] == set(rules.ALL_FIXES)
    assert G["kip-966"] - G["current"] == {"txn-epoch-bump"}
    assert G["kip-320"] - G["kip-279"] == {"fetch-epoch-fencing", "truncate-on-epoch-change", "isr-expand-epoch-start"}
    with pytest.raises(ValueError):
        rules.fixes_for("v9")


def test_isr_addition_valid_by_broker_epoch():
    """KIP-903: an added member must have fetched with its current registration's broker epoch;
    no registration (-1) is never eligible; before the fix anything goes."""
    assert G["current"] - G["kip-320"] == {"maximal-isr", "min-isr-hw", "isr-broker-epoch",
                                           "txn-partition-verification"}
    assert rules.isr_addition_valid(5, 5, G["current"])
    assert not rules.isr_addition_valid(4, 5, G["current"])
    assert not rules.isr_addition_valid(-1, -1, G["current"])
    assert not rules.isr_addition_valid(-1, 5, G["current"])
    assert rules.isr_addition_valid(4, 5, G["kip-320"])
    assert rules.isr_addition_valid(4, -1, G["current"] - {"isr-broker-epoch"})


def test_leader_hw_maximal_isr_and_min_isr():
    leos = {1: 5, 2: 3}
    # ISR {0,1}; replica 2 is being added (maximal ISR {0,1,2}): KIP-497 counts it
    assert rules.leader_hw(0, 8, leos, 0, {0, 1}, {0, 1, 2}, 1, G["kip-320"]) == 5
    assert rules.leader_hw(0, 8, leos, 0, {0, 1}, {0, 1, 2}, 1, G["current"]) == 3
    # never backwards on the leader
    assert rules.leader_hw(4, 8, leos, 0, {0, 2}, {0, 2}, 1, G["current"]) == 4
    # KAFKA-15583: |ISR| < min.insync -> no advance
    assert rules.leader_hw(1, 8, leos, 0, {0}, {0}, 2, G["current"]) == 1
    assert rules.leader_hw(1, 8, leos, 0, {0}, {0}, 2, G["kip-320"]) == 8


def test_isr_expansion_waits_for_epoch_start():
    # KAFKA-7128: follower at the HW but before the leader's epoch start
    assert rules.may_join_isr(10, 10, 12, G["kip-279"])
    assert not rules.may_join_isr(10, 10, 12, G["kip-320"])
    assert rules.may_join_isr(12, 10, 12, G["kip-320"])
    assert not rules.may_join_isr(9, 10, 0, G["current"])


def test_out_of_sync_followers():
    assert rules.out_of_sync(10_000, {1: 9_000, 2: 5_000}, {0, 1, 2}, 0, 3000) == {2}


def test_truncation_trigger_on_epoch_change():
    # KAFKA-7164: same leader, new epoch
    assert not rules.must_truncate_on_become_follower(1, 1, 3, 4, G["kip-279"])
    assert rules.must_truncate_on_become_follower(1, 1, 3, 4, G["kip-320"])
    assert rules.must_truncate_on_become_follower(1, 2, 3, 4, G["v0.10"])


def test_truncation_by_hw_and_by_epoch():
    # before KIP-101: to the local HW, whatever the leader would answer (KIP-101 S1's bug)
    assert rules.truncation_offset(2, 1, 3, 3, 4, (3, 5), G["v0.10"]) == (1, True)
    # KIP-101: leader answers its end offset for our epoch
    assert rules.truncation_offset(5, 0, 3, 3, 4, (3, 5), G["kip-101"]) == (4, True)
    # unknown epoch on the leader: fall back to HW
    assert rules.truncation_offset(5, 2, 3, -1, -1, (-1, -1), G["kip-101"]) == (2, True)
    # KIP-279: leader answers a smaller epoch (2, end 4) that we know, ending at 3 locally
    assert rules.truncation_offset(6, 0, 3, 2, 4, (2, 3), G["kip-279"]) == (3, True)
    # KIP-279: we do not know epoch 2: cut to the end of our largest smaller epoch and ask again
    assert rules.truncation_offset(6, 0, 3, 2, 4, (1, 2), G["kip-279"]) == (2, False)
    # without KIP-279 the same answer truncates straight to the leader's offset
    assert rules.truncation_offset(6, 0, 3, 2, 4, (1, 2), G["kip-101"]) == (4, True)


def test_leader_epoch_answer_is_kafkas():
    """LeaderEpochFileCache.endOffsetFor, the same cases as the model's rules (tests/testdata/rules.txt)."""
    cache = [(0, 0), (2, 3), (5, 7)]
    for fixes in (G["kip-279"], G["kip-101"]):
        assert rules.leader_epoch_answer(cache, 9, 5, fixes) == (5, 9)          # latest: the LEO
        assert rules.leader_epoch_answer(cache, 9, 2, fixes) == (2, 7)
        assert rules.leader_epoch_answer(cache, 9, 6, fixes) == (-1, -1)        # above every epoch
        assert rules.leader_epoch_answer([], 0, 0, fixes) == (-1, -1)
    assert rules.leader_epoch_answer(cache, 9, 1, G["kip-279"]) == (0, 3)       # largest epoch <= 1
    assert rules.leader_epoch_answer(cache, 9, 1, G["kip-101"]) == (1, 3)       # the requested one
    assert rules.leader_epoch_answer([(1, 0)], 2, 0, G["kip-279"]) == (0, 0)    # below the first
    assert rules.leader_epoch_answer([(1, 0)], 2, 0, G["kip-101"]) == (-1, -1)


def test_fetch_epoch_fencing_and_controller_epoch():
    assert rules.fetch_epoch_error(3, 5, G["current"]) == 74
    assert rules.fetch_epoch_error(6, 5, G["current"]) == 75
    assert rules.fetch_epoch_error(5, 5, G["current"]) == 0
    assert rules.fetch_epoch_error(-1, 5, G["current"]) == 0
    assert rules.fetch_epoch_error(3, 5, G["kip-279"]) == 0
    assert rules.fetch_epoch_accepted(5, 5, G["current"]) and rules.fetch_epoch_accepted(-1, 5, G["current"])
    assert not rules.fetch_epoch_accepted(3, 5, G["current"]) and rules.fetch_epoch_accepted(3, 5, G["kip-279"])
    assert not rules.controller_epoch_accepted(2, 3, G["v0.10"])
    assert rules.controller_epoch_accepted(2, 3, frozenset())
    assert rules.control_request_accepted(3, 3, 3, 4, G["v0.10"])
    assert not rules.control_request_accepted(3, 3, 4, 4, G["v0.10"])
    assert not rules.control_request_accepted(2, 3, 3, 4, G["v0.10"])
    assert rules.control_request_accepted(2, 3, 3, 4, frozenset())


@pytest.mark.parametrize("generation,stale,future", [("kip-279", 0, 0), ("current", 74, 75)])
def test_broker_fences_fetch_and_offsets_for_leader_epoch(make_cluster, generation, stale, future):
    c = make_cluster(1, generation=generation)
    c.create_topic("fe", partitions=1, replication_factor=1)
    # bump the leader epoch: a (test) controller request with a newer controller epoch
    with SyncConn(*c.address(0)) as conn:
        d = conn.control({"op": "describe"})
        ce = d["controller_epoch_seen"]
        r = conn.control({"controller_epoch": ce, "brokers": {}, "partitions": [
            {"topic": "fe", "partition": 0, "leader": 0, "leader_epoch": 3, "isr": [0], "replicas": [0],
             "zk_version": -1, "min_insync": 1}]})
        assert r["partitions"][0]["error_code"] == 0

        def fetched(epoch, partition=0):
            return conn.request(1, 12, {
                "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1000, "isolation_level": 0,
                "session_id": 0, "session_epoch": -1, "rack_id": "", "forgotten_topics_data": [],
                "topics": [{"topic": "fe", "partitions": [{"partition": partition, "current_leader_epoch": epoch,
                                                           "fetch_offset": 0, "last_fetched_epoch": -1,
                                                           "log_start_offset": -1, "partition_max_bytes": 1000}]}],
            }).responses[0].partitions[0]

        def fetch(epoch):
            return fetched(epoch).error_code

        def ofle(epoch):
            return conn.request(23, 3, {"replica_id": 1, "topics": [{"topic": "fe", "partitions": [
                {"partition": 0, "current_leader_epoch": epoch, "leader_epoch": 0}]}]}).topics[0].partitions[0].error_code

        assert (fetch(2), fetch(4), fetch(3), fetch(-1)) == (stale, future, 0, 0)
        # an error entry (a partition we do not hold) carries no offsets: -1 each, as Kafka's
        bad = fetched(3, partition=7)
        assert bad.error_code and (bad.high_watermark, bad.last_stable_offset, bad.log_start_offset) == (-1, -1, -1)
        assert (ofle(2), ofle(4), ofle(3)) == (stale, future, 0)
        # a client's request (v2 has no replica_id) of epoch 0: fenced alike, and traced (0 is an
        # epoch; only -1 means none); the decoded request carries the schema's default
        # replica_id -2 (Kafka's DEBUGGING_REPLICA_ID), traced as such
        r = conn.request(23, 2, {"topics": [{"topic": "fe", "partitions": [
            {"partition": 0, "current_leader_epoch": 0, "leader_epoch": 0}]}]})
        assert r.topics[0].partitions[0].error_code == stale
        def traced():
            got = [(x["request_epoch"], x["replica"]) for x in trace_events(c, 0, "stale_epoch_request")
                   if x["request"] == "OffsetsForLeaderEpoch"]
            return got if len(got) >= 3 else None
        assert wait_until(traced, what="three traced OffsetsForLeaderEpoch") == [(2, 1), (4, 1), (0, -2)]
        # a LeaderAndIsr whose leader epoch is not newer is refused for that partition
        r = conn.control({"controller_epoch": ce, "brokers": {}, "partitions": [
            {"topic": "fe", "partition": 0, "leader": 0, "leader_epoch": 3, "isr": [0], "replicas": [0],
             "zk_version": -1, "min_insync": 1}]})
        assert r["partitions"][0]["error_code"] == 74
        # one that names no controller epoch is below every controller's: refused whole (stale)
        assert ce >= 1
        r = conn.control({"brokers": {}, "partitions": [
            {"topic": "fe", "partition": 0, "leader": 0, "leader_epoch": 9, "isr": [0], "replicas": [0],
             "zk_version": -1, "min_insync": 1}]})
        assert r["error_code"] == 11 and r["partitions"] == []       # STALE_CONTROLLER_EPOCH


@pytest.mark.parametrize("generation,visible", [("kip-320", True), ("current", False)])
def test_hw_under_min_isr_on_real_brokers(make_cluster, generation, visible):
    """KAFKA-15583: once the ISR shrank below min.insync.replicas, an acks=1 write must not
    become visible (HW frozen) in `current`; older generations advance the HW over the
    shrunken ISR."""
    from tests.broker_fixtures import consume_all, producer, wait_until
    c = make_cluster(3, generation=generation)
    ctl = c.controller()
    leader, *followers = [ctl] + [i for i in range(3) if i != ctl]
    c.create_topic("mi", assignment={0: [leader] + followers}, min_insync=2)
    c.wait_for_leaders("mi", isr_size=3)
    for f in followers:
        c.kill(f)
    wait_until(lambda: c.partition_state("mi", 0)["isr"] == [leader], what="ISR shrink")
    p = producer(c, acks=1)
    assert p.send("mi", b"lonely", partition=0).get(10).offset == 0
    p.close()
    got = consume_all(c, "mi", 0, idle_ms=1500)
    assert (got == [(0, b"lonely")]) is visible
