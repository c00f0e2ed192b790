"""Done-when tests on real 3-broker clusters, on both coordination backends (coord_url)."""
from __future__ import annotations

import threading
import time

import pytest
from kafka.errors import KafkaError

from impl import rules
from impl.netclient import SyncConn
from tests.broker_fixtures import (consume_all, make_cluster, producer, trace_events,  # noqa: F401
                                   wait_until)

pytestmark = pytest.mark.timeout(120)


def test_a_clusters_brokers_get_distinct_ports(monkeypatch):
    """free_port only checks that a port is free now: two brokers of one cluster once got the
    same one and the second could not bind. free_ports picks a repeated port again."""
    import impl.cluster as cl
    picks = iter([31139, 31470, 31139, 31139, 30001])
    monkeypatch.setattr(cl, "free_port", lambda: next(picks))
    assert cl.free_ports(3) == [31139, 31470, 30001]
    monkeypatch.setattr(cl, "free_port", lambda: 31139)
    with pytest.raises(cl.ClusterError):
        cl.free_ports(2)


def test_round_trip_acks_1_and_all(make_cluster, coord_url):
    c = make_cluster(3, coordinator=coord_url)
    c.create_topic("rt", partitions=2, replication_factor=3, min_insync=2)
    c.wait_for_leaders("rt", isr_size=3)
    sent = {0: [], 1: []}
    for acks in (1, "all"):
        p = producer(c, acks=acks)
        futs = [(i % 2, b"%s-%d" % (str(acks).encode(), i), p.send("rt", b"%s-%d" % (str(acks).encode(), i),
                                                                    partition=i % 2)) for i in range(200)]
        p.flush()
        for part, v, f in futs:
            md = f.get(10)
            assert md.partition == part
            sent[part].append((md.offset, v))
        p.close()
    for part in (0, 1):
        got = consume_all(c, "rt", part)
        assert sorted(got) == sorted(sent[part])
        assert [o for o, _ in got] == list(range(len(got)))
    # every broker wrote a valid trace (strict reader) with the transitions conformance needs
    from traces.trace import load
    for i in range(3):
        files = c.trace_files(i)
        assert len(files) == 1
        tr = load(files[0])
        assert tr.header["source"] == "broker" and tr.header["node"] == i
        assert tr.header["fixes"] == sorted(rules.GENERATIONS["current"])
    leaders = {e["partition"] for i in range(3) for e in trace_events(c, i, "became_leader") if e["topic"] == "rt"}
    assert leaders == {0, 1}
    assert any(trace_events(c, i, "hw_advanced") for i in range(3))
    assert sum(len(trace_events(c, i, "controller_elected")) for i in range(3)) == 1


def test_kill_leader_acks_all_loses_no_acknowledged_record(make_cluster, coord_url):
    c = make_cluster(3, coordinator=coord_url)
    c.create_topic("dur", partitions=1, replication_factor=3, min_insync=2)
    c.wait_for_leaders("dur", isr_size=3)
    acked: list[tuple[int, bytes]] = []
    errors: list[Exception] = []
    stop = threading.Event()

    def produce():
        p = producer(c, acks="all", retries=5, request_timeout_ms=5000, retry_backoff_ms=200)
        i = 0
        while not stop.is_set() and i < 100_000:
            v = b"m%d" % i
            try:
                md = p.send("dur", v, partition=0).get(15)
                acked.append((md.offset, v))
            except KafkaError as e:          # indeterminate: may or may not be in the log
                errors.append(e)
            i += 1
        p.close()

    t = threading.Thread(target=produce)
    t.start()
    wait_until(lambda: len(acked) >= 50, what="50 acknowledged writes")
    old = c.leader_of("dur", 0)
    c.kill(old)
    n_at_kill = len(acked)
    wait_until(lambda: c.leader_of("dur", 0) not in (None, old), what="a new leader")
    wait_until(lambda: len(acked) >= n_at_kill + 30, what="writes acknowledged by the new leader")
    stop.set()
    t.join(30)
    got = dict(consume_all(c, "dur", 0))
    missing = [(o, v) for o, v in acked if got.get(o) != v]
    assert not missing, f"acknowledged records lost or changed: {missing[:5]}"
    st = c.partition_state("dur", 0)
    assert st["leader_epoch"] >= 1 and old not in st["isr"]


def test_not_enough_replicas(make_cluster, coord_url):
    c = make_cluster(3, coordinator=coord_url)
    c.create_topic("mi", partitions=1, replication_factor=3, min_insync=2)
    leader = c.wait_for_leaders("mi", isr_size=3)[0]
    others = [i for i in range(3) if i != leader]
    c.kill(others[0])
    c.kill(others[1])
    wait_until(lambda: c.partition_state("mi", 0)["isr"] == [leader], what="ISR shrink to the leader")
    p = producer(c, acks="all")
    from kafka.errors import NotEnoughReplicasError
    with pytest.raises(NotEnoughReplicasError):
        p.send("mi", b"x", partition=0).get(10)
    p.close()
    p1 = producer(c, acks=1)          # acks=1 does not need the ISR
    assert p1.send("mi", b"y", partition=0).get(10).offset == 0
    p1.close()


def test_controller_failover_increments_epoch_and_fences_the_stale_one(make_cluster, coord_url):
    c = make_cluster(3, coordinator=coord_url)
    c.create_topic("cf", partitions=1, replication_factor=3, min_insync=1)
    c.wait_for_leaders("cf")
    first, epoch1 = c.controller(), c.controller_epoch()
    assert first is not None and epoch1 >= 1
    c.kill(first)
    wait_until(lambda: c.controller() not in (None, first), what="a new controller")
    second = c.controller()
    wait_until(lambda: c.controller_epoch() == epoch1 + 1, what="controller epoch + 1")
    wait_until(lambda: any(e["controller_epoch"] == epoch1 + 1 for e in trace_events(c, second, "controller_elected")),
               what="controller_elected event")
    c.wait_for_leaders("cf")
    # a request from the old controller's epoch is refused by a broker that has seen the new one
    target = next(i for i in c.alive() if i != second)
    wait_until(lambda: _seen_epoch(c, target) >= epoch1 + 1, what="broker learning the new epoch")
    st = c.partition_state("cf", 0)
    stale = {"controller_epoch": epoch1, "controller_id": first, "brokers": {},
             "partitions": [{"topic": "cf", "partition": 0, "leader": target, "leader_epoch": st["leader_epoch"] + 5,
                             "isr": [target], "replicas": [0, 1, 2], "zk_version": 0, "min_insync": 1}]}
    with SyncConn(*c.address(target)) as conn:
        resp = conn.control(stale)
    assert resp["error_code"] == 11          # STALE_CONTROLLER_EPOCH
    ev = wait_until(lambda: trace_events(c, target, "stale_request_rejected"), what="rejection event")
    assert ev[-1]["controller_epoch"] == epoch1 and ev[-1]["current_controller_epoch"] == epoch1 + 1
    assert c.partition_state("cf", 0)["leader"] == st["leader"]     # nothing changed
    p = producer(c, acks="all")
    assert p.send("cf", b"after", partition=0).get(15).offset >= 0
    p.close()


def _seen_epoch(c, i) -> int:
    with SyncConn(*c.address(i)) as conn:
        return conn.control({"op": "describe"})["controller_epoch_seen"]


def test_torn_tail_recovery_after_restart(make_cluster, coord_url):
    c = make_cluster(1, coordinator=coord_url)
    c.create_topic("torn", partitions=1, replication_factor=1)
    p = producer(c, acks=1)
    for i in range(20):
        p.send("torn", b"r%d" % i, partition=0).get(10)
    p.close()
    c.stop_broker(0)
    seg = sorted((c.broker_dir(0) / "torn-0").glob("*.log"))[-1]
    size = seg.stat().st_size
    with open(seg, "ab") as f:                   # a torn write: half a batch header
        f.write(b"\x00" * 30)
    c.start_broker(0)
    c.wait_for_leaders("torn")
    rec = wait_until(lambda: [e for e in trace_events(c, 0, "recovered") if e["topic"] == "torn"
                              and e["truncated_bytes"] > 0], what="recovered event")
    assert rec[-1]["truncated_bytes"] == 30 and rec[-1]["log_end_offset"] == 20
    assert seg.stat().st_size == size
    got = consume_all(c, "torn", 0)
    assert [v for _, v in got] == [b"r%d" % i for i in range(20)]
    p = producer(c, acks=1)
    assert p.send("torn", b"next", partition=0).get(10).offset == 20
    p.close()


def test_paused_leader_is_replaced_and_rejoins_as_follower(make_cluster):
    c = make_cluster(3)
    c.create_topic("pz", partitions=1, replication_factor=3, min_insync=2)
    old = c.wait_for_leaders("pz", isr_size=3)[0]
    p = producer(c, acks="all", retries=10, retry_backoff_ms=300, request_timeout_ms=5000)
    before = [p.send("pz", b"a%d" % i, partition=0).get(10).offset for i in range(20)]
    c.pause(old)                                    # SIGSTOP past the session timeout
    wait_until(lambda: c.leader_of("pz", 0) not in (None, old), what="a new leader")
    after = [p.send("pz", b"b%d" % i, partition=0).get(20).offset for i in range(20)]
    c.resume(old)
    # the old leader opens a new session, registers again and follows the new leader
    wait_until(lambda: old in c.registered(), what="re-registration")
    wait_until(lambda: sorted(c.partition_state("pz", 0)["isr"]) == [0, 1, 2], timeout_s=30,
               what="the old leader back in the ISR")
    assert trace_events(c, old, "became_follower")[-1]["leader"] == c.leader_of("pz", 0)
    p.close()
    got = consume_all(c, "pz", 0)
    assert [v for _, v in got] == [b"a%d" % i for i in range(20)] + [b"b%d" % i for i in range(20)]
    assert before == list(range(20)) and after == list(range(20, 40))


def test_unclean_election_only_when_the_topic_allows_it(make_cluster):
    c = make_cluster(3)
    ctl = c.controller()
    l, f = [i for i in range(3) if i != ctl]
    for t, unclean in (("clean", False), ("unclean", True)):
        c.create_topic(t, assignment={0: [l, f]}, min_insync=1, unclean=unclean)
        c.wait_for_leaders(t, isr_size=2)
    c.kill(f)
    for t in ("clean", "unclean"):
        wait_until(lambda t=t: c.partition_state(t, 0)["isr"] == [l], what=f"{t}: ISR shrink")
    p = producer(c, acks="all")
    for t in ("clean", "unclean"):
        assert p.send(t, b"only-on-leader", partition=0).get(10).offset == 0
    p.close()
    c.kill(l)
    for t in ("clean", "unclean"):
        wait_until(lambda t=t: c.leader_of(t, 0) is None, what=f"{t}: offline")
    c.start_broker(f)                 # the out-of-sync replica returns alone
    wait_until(lambda: c.leader_of("unclean", 0) == f, what="unclean election of the stale replica")
    time.sleep(1.0)
    assert c.leader_of("clean", 0) is None           # clean: stays offline, no data loss by design
    c.wait_for_leaders("unclean")
    assert consume_all(c, "unclean", 0, idle_ms=1000) == []   # the committed record is gone (by design)


def test_cluster_recovers_after_the_coordination_server_stalls(make_cluster):
    """The coordination server stops for longer than every session timeout, then goes on.
    Every broker's session ends; each registers anew under a newer broker epoch, a controller
    of a newer epoch is elected and handles the bounces (the leader moves or is elected anew).
    Right after the server resumes, the old sessions' nodes may still be there (the server
    expires each at its own deadline), so recovery is waited for by what it means: every
    registration renewed, a newer controller, the leader elected under its current
    registration, the cluster whole. Then both an old and a new topic take writes."""
    import signal as _signal
    c = make_cluster(3)                              # embedded: we own the server process
    c.create_topic("before", partitions=1, replication_factor=3, min_insync=2)
    c.wait_for_leaders("before", isr_size=3)
    epoch, registrations = c.controller_epoch(), c.broker_epochs()
    assert sorted(registrations) == [0, 1, 2]
    c.coord_proc.send_signal(_signal.SIGSTOP)        # every session outlives its timeout
    time.sleep(4)
    c.coord_proc.send_signal(_signal.SIGCONT)

    def recovered() -> bool:
        now = c.broker_epochs()
        st = c.partition_state("before", 0) or {}
        return (sorted(now) == [0, 1, 2] and all(now[b] > registrations[b] for b in now)
                and c.controller() is not None and c.controller_epoch() > epoch
                and st.get("leader_broker_epoch") == now.get(st.get("leader")) and c.is_whole())

    wait_until(recovered, timeout_s=60, what="every broker registered anew, a newer controller, "
               "the leader elected under its current registration, the cluster whole")
    c.create_topic("after", partitions=1, replication_factor=3, min_insync=2)
    c.wait_for_leaders("after", isr_size=3)
    p = producer(c, acks="all", retries=10, retry_backoff_ms=300)
    for t in ("before", "after"):
        assert p.send(t, b"x", partition=0).get(20).offset == 0
    p.close()
