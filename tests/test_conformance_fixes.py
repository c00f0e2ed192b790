"""Conformance catches a real broker built without each post-KIP-101 fix it implements (the
`without_fixes` debug switch of impl/broker.py) and passes the normal one, on arranged clusters:
each scenario places the leader and the ISR where the fix's rule decides, then the brokers'
traces are judged by checkers/conformance.py against the model's rule functions.

    scenario              arranged state                                          fixes judged
    follower-drop         RF 3; a follower dies: the controller bumps the epoch,   truncate-on-epoch-change
                          the leader stays; then a Fetch of the old epoch         fetch-epoch-fencing
    min-isr-rejoin        RF 2, min ISR 2; the follower stops fetching and leaves min-isr-hw
                          the ISR; the leader appends; it restarts (a new epoch   isr-expand-epoch-start
                          starting above the HW) and the follower fetches again
    unseen-epoch          RF 3; the leader writes in an epoch one follower never  epoch-end-offset
                          saw, dies; that follower leads and answers the old
                          leader's OffsetsForLeaderEpoch for the unseen epoch
    pending-shrink        RF 2; the follower stops fetching; the leader proposes  maximal-isr
                          the shrink while the coordination service is stopped
                          (SIGSTOP), then appends

The stale Fetch is sent by the test on the wire as replica F with F's previous epoch: a
follower that missed the epoch bump, as a KIP-320 follower sends it (followers of a broker
without the fix send no epoch at all). `isr-broker-epoch` (KIP-903) is checked by the writer of
the ISR (the leader writes it to the coordination store itself; there is no AlterPartition):

    empty-disk-rejoin     RF 3, min ISR 2; a follower returns, catches up and is  isr-broker-epoch
                          proposed for the ISR; the write is held (test hook)
                          while it loses power (empty log) and registers anew;
                          then the write goes ahead and the leader dies
"""
from __future__ import annotations

import json
import signal
import time

import pytest

from checkers.conformance import check_traces
from impl.netclient import SyncConn
from tests.broker_fixtures import consume_all, make_cluster, trace_events, wait_until  # noqa: F401

pytestmark = pytest.mark.timeout(120)

T = "cf"


def _records(values) -> bytes:
    from kafka.record.default_records import DefaultRecordBatchBuilder
    bb = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                   producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i, v in enumerate(values):
        bb.append(i, timestamp=int(time.time() * 1000), key=None, value=v, headers=[])
    return bytes(bb.build())


def produce(c, leader: int, values, acks: int) -> int:
    with SyncConn(*c.address(leader)) as conn:
        r = conn.request(0, 7, {"acks": acks, "timeout_ms": 15000, "transactional_id": None, "topic_data": [
            {"name": T, "partition_data": [{"index": 0, "records": _records(values)}]}]})
    pr = r.responses[0].partition_responses[0]
    assert pr.error_code == 0, pr
    return pr.base_offset


def replica_fetch(c, leader: int, replica: int, epoch: int, offset: int) -> int:
    with SyncConn(*c.address(leader)) as conn:
        r = conn.request(1, 12, {
            "replica_id": replica, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": T, "partitions": [{"partition": 0, "current_leader_epoch": epoch,
                                                     "fetch_offset": offset, "last_fetched_epoch": -1,
                                                     "log_start_offset": 0, "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": [], "rack_id": ""})
    return r.responses[0].partitions[0].error_code


def divergences(c, min_insync: int) -> list[str]:
    files = [f for i in range(c.n) for f in c.trace_files(i)]
    return [d.text for d in check_traces(files, "current", min_insync={T: min_insync})]


def cluster(make_cluster, without: str | None, **cfg):
    cfg.setdefault("replica_lag_time_max_ms", 30000)
    return make_cluster(3, generation="current",
                        broker_config={**cfg, "without_fixes": [without] if without else []})


def others(c, *exclude: int) -> list[int]:
    return [i for i in range(c.n) if i not in exclude]


def arrange_leader(c, to: int, isr_size: int) -> int:
    """`to` leads (moved there by clean restarts if the controller chose another); its epoch."""
    c.wait_for_leaders(T, isr_size=isr_size)
    c.move_leader(T, 0, to)
    return c.partition_state(T, 0)["leader_epoch"]


# --- follower-drop: KAFKA-7164 and KIP-320 ---------------------------------------------------------

def follower_drop(make_cluster, without):
    c = cluster(make_cluster, without)
    ctl = c.controller()
    leader, f, victim = ctl, *others(c, ctl)          # the controller leads: no controller fail-over
    c.create_topic(T, assignment={0: [leader, f, victim]}, min_insync=1)
    e = arrange_leader(c, leader, 3)
    produce(c, leader, [b"r0"], acks=-1)
    wait_until(lambda: trace_events(c, f, "truncation_done"), what=f"follower {f} fetching")
    c.kill(victim)         # the controller drops it from the ISR with a new epoch, same leader
    wait_until(lambda: [x for x in trace_events(c, f, "became_follower") if x["leader_epoch"] > e],
               what=f"follower {f} told of the new epoch")
    new = c.partition_state(T, 0)["leader_epoch"]
    assert c.partition_state(T, 0)["leader"] == leader and new > e
    err = replica_fetch(c, leader, f, e, 1)           # follower f as if it missed the bump
    wait_until(lambda: trace_events(c, leader, "stale_epoch_request"), what="the stale Fetch traced")
    return c, err


def test_follower_drop_normal_broker_conforms(make_cluster):
    c, err = follower_drop(make_cluster, None)
    assert err == 74                                   # FENCED_LEADER_EPOCH
    assert divergences(c, 1) == []


def test_without_truncate_on_epoch_change_caught(make_cluster):
    c, _ = follower_drop(make_cluster, "truncate-on-epoch-change")
    ds = divergences(c, 1)
    assert ds and all("kept its log without truncating" in d for d in ds), ds


def test_without_fetch_epoch_fencing_caught(make_cluster):
    c, err = follower_drop(make_cluster, "fetch-epoch-fencing")
    assert err == 0                                    # served
    ds = divergences(c, 1)
    # only the test's own stale Fetch: followers without KIP-320 send no epoch (-1), never judged
    assert len(ds) == 1 and "served a Fetch" in ds[0], ds


# --- min-isr-rejoin: KAFKA-15583 and KAFKA-7128 ----------------------------------------------------

def min_isr_rejoin(make_cluster, without, rejoin: bool):
    c = cluster(make_cluster, without, replica_lag_time_max_ms=1000)
    ctl = c.controller()
    a, b = others(c, ctl)
    c.create_topic(T, assignment={0: [a, b]}, min_insync=2)
    arrange_leader(c, a, 2)
    produce(c, a, [b"r0", b"r1", b"r2"], acks=-1)      # HW 3 on a
    c.pause_replication(b)
    produce(c, a, [b"r3", b"r4"], acks=1)              # only on a
    wait_until(lambda: c.partition_state(T, 0)["isr"] == [a], what=f"{b} out of the ISR")
    wait_until(lambda: [x for x in trace_events(c, a, "isr_changed") if x["isr"] == [a]], what="shrink traced")
    produce(c, a, [b"r5"], acks=1)                     # another HW decision under min ISR
    if rejoin:
        e = c.partition_state(T, 0)["leader_epoch"]
        c.stop_broker(a)                               # a is the whole ISR: offline until it returns
        c.start_broker(a)
        wait_until(lambda: (c.partition_state(T, 0) or {}).get("leader_epoch", -1) > e
                   and c.leader_of(T, 0) == a, what=f"{a} leads a new epoch")
        c.resume_replication(b)
        wait_until(lambda: sorted(c.partition_state(T, 0)["isr"]) == sorted([a, b]), timeout_s=30,
                   what=f"{b} back in the ISR")
    return c


def test_min_isr_rejoin_normal_broker_conforms(make_cluster):
    assert divergences(min_isr_rejoin(make_cluster, None, rejoin=True), 2) == []


def test_without_min_isr_hw_caught(make_cluster):
    ds = divergences(min_isr_rejoin(make_cluster, "min-isr-hw", rejoin=False), 2)
    assert ds and all("below min.insync.replicas 2" in d for d in ds), ds


def test_without_isr_expand_epoch_start_caught(make_cluster):
    ds = divergences(min_isr_rejoin(make_cluster, "isr-expand-epoch-start", rejoin=True), 2)
    assert ds and all("below the start offset 6 of its epoch" in d for d in ds), ds


# --- unseen-epoch: KIP-279 -------------------------------------------------------------------------

def unseen_epoch(make_cluster, without, above_zero: bool = False):
    c = cluster(make_cluster, without)
    ctl = c.controller()
    a, v = others(c, ctl)
    b = ctl                                             # survives throughout: no controller fail-over
    c.create_topic(T, assignment={0: [a, b, v]}, min_insync=1)
    e0 = arrange_leader(c, a, 3)
    if above_zero:        # r0 in a later epoch: the answer below names an epoch above 0
        c.kill(v)
        wait_until(lambda: c.partition_state(T, 0)["leader_epoch"] > e0, what="an epoch above the first")
        c.start_broker(v)
        c.wait_for_leaders(T, isr_size=3, timeout_s=30)
    produce(c, a, [b"r0"], acks=-1)                     # epoch e on every replica
    c.pause_replication(b)                              # b stays in the ISR (lag 30 s) but fetches nothing
    e = c.partition_state(T, 0)["leader_epoch"]
    c.kill(v)                                           # follower dies: epoch e+1, leader a
    wait_until(lambda: [x for x in trace_events(c, a, "became_leader") if x["leader_epoch"] > e],
               what=f"{a} leads the new epoch")
    produce(c, a, [b"r1", b"r2"], acks=1)               # epoch e+1 exists only on a
    c.kill(a)
    wait_until(lambda: c.leader_of(T, 0) == b, what=f"{b} elected")
    c.start_broker(a)                                   # a follows b and asks about epoch e+1
    wait_until(lambda: trace_events(c, b, "epoch_answered"), what="b's OffsetsForLeaderEpoch answer")
    return c


def test_unseen_epoch_normal_broker_conforms(make_cluster):
    assert divergences(unseen_epoch(make_cluster, None), 1) == []


def test_unseen_epoch_answered_above_zero_normal_broker_conforms(make_cluster):
    """The KIP-279 round where the leader's answer names an older epoch above 0: the follower
    cuts at that epoch's end in its own cache (not at 0, as a follower that took the answer for
    an epoch it does not hold would, then refetch everything)."""
    c = unseen_epoch(make_cluster, None, above_zero=True)
    b = c.controller()
    a = others(c, b)[0]
    answers = trace_events(c, b, "epoch_answered")
    assert answers and all(0 < x["leader_epoch"] < x["requested_epoch"] for x in answers), answers
    # a holds r0 (older epoch) and r1, r2 (the epoch b never saw): it cuts once, to 1 -- judged
    # here directly, since conformance leaves a restarted follower's cut unjudged when it would
    # need the (untraced) HW checkpoint
    wait_until(lambda: [x for x in trace_events(c, a, "truncation_done") if x["log_end_offset"] == 1],
               what=f"{a} truncated and fetching")
    assert [(x["offset"], x["reason"]) for x in trace_events(c, a, "truncated")] == [(1, "leader_epoch")]
    assert divergences(c, 1) == []


def test_without_epoch_end_offset_caught(make_cluster):
    ds = divergences(unseen_epoch(make_cluster, "epoch-end-offset"), 1)
    assert ds and all("answered OffsetsForLeaderEpoch" in d for d in ds), ds


# --- pending-shrink: KIP-497 -----------------------------------------------------------------------

def pending_shrink(make_cluster, without):
    c = cluster(make_cluster, without, replica_lag_time_max_ms=1000, session_timeout_ms=15000)
    ctl = c.controller()
    a, b = others(c, ctl)
    c.create_topic(T, assignment={0: [a, b]}, min_insync=1)
    arrange_leader(c, a, 2)
    produce(c, a, [b"r0"], acks=-1)
    c.pause_replication(b)
    produce(c, a, [b"r1"], acks=1)                     # HW stays 1: b is in the ISR at 1
    c.coord_proc.send_signal(signal.SIGSTOP)           # the ISR write cannot commit
    try:
        wait_until(lambda: [x for x in trace_events(c, a, "isr_proposed") if x["isr"] == [a]],
                   what="the shrink proposed")
        produce(c, a, [b"r2"], acks=1)                 # an HW decision while the shrink is pending
    finally:
        c.coord_proc.send_signal(signal.SIGCONT)
    wait_until(lambda: c.partition_state(T, 0)["isr"] == [a], what="the shrink committed")
    return c


def test_pending_shrink_normal_broker_conforms(make_cluster):
    assert divergences(pending_shrink(make_cluster, None), 1) == []


def test_without_maximal_isr_caught(make_cluster):
    ds = divergences(pending_shrink(make_cluster, "maximal-isr"), 1)
    assert ds and all(f"past ISR member" in d for d in ds), ds


# --- empty-disk-rejoin: KIP-903 --------------------------------------------------------------------

RECORDS = [b"r%d" % i for i in range(10)]


def registration_epoch(c, i: int) -> int:
    """Broker i's broker epoch as its `/brokers/ids/i` node holds it (-1: not registered)."""
    try:
        data, _ = c._store().get(c.path(f"/brokers/ids/{i}"))
    except Exception:
        return -1
    return int(json.loads(data).get("broker_epoch", -1))


def consumed(c) -> list[bytes]:
    return [v for _, v in consume_all(c, T, 0, idle_ms=1000)]


def empty_disk_rejoin(make_cluster, without):
    """Leader a, followers f and the controller. f stops (the controller takes it out of the ISR)
    and the leader appends (acks=all, min ISR 2). f starts again and catches up; the leader
    proposes it for the ISR, and the write is held (test hook) while f loses power -- its log
    since the restart was unflushed -- and registers anew, not fetching (replication paused).
    Then the write goes ahead. The lag bound stays long (30 s): no shrink races the steps.
    Returns (cluster, a, f, f's broker epoch at the proposal, its new one)."""
    c = cluster(make_cluster, without)
    ctl = c.controller()
    a, f = others(c, ctl)
    # after a, f comes first in the assignment: a clean election after a's death picks f if in the ISR
    c.create_topic(T, assignment={0: [a, f, ctl]}, min_insync=2)
    arrange_leader(c, a, 3)
    c.stop_broker(f)
    wait_until(lambda: sorted(c.partition_state(T, 0)["isr"]) == sorted([a, ctl]), what=f"{f} out of the ISR")
    assert produce(c, a, RECORDS, acks=-1) == 0        # acknowledged: on a and the controller
    hold = c.broker_dir(a) / "HOLD_ISR_WRITES"
    hold.touch()
    c.start_broker(f)
    wait_until(lambda: [x for x in trace_events(c, a, "isr_proposed") if f in x["isr"]],
               what=f"{a} proposes {f} for the ISR (write held)")
    old = registration_epoch(c, f)
    followed = len(trace_events(c, f, "became_follower"))
    assert c.power_loss(f), f"{f} must lose its unflushed log"
    c.pause_replication(f)                             # the new incarnation fetches nothing yet
    c.start_broker(f, wait=False)
    wait_until(lambda: registration_epoch(c, f) > old, timeout_s=30, what=f"{f} registered anew")
    # the controller handles the end of f's old session, then f's new registration; had the
    # held write landed before it handled the end, it would drop f from the ISR again. Its
    # LeaderAndIsr to the new incarnation shows it has handled both: only then the write
    wait_until(lambda: len(trace_events(c, f, "became_follower")) > followed, timeout_s=30,
               what=f"the controller's LeaderAndIsr to {f}'s new incarnation")
    hold.unlink()
    return c, a, f, old, registration_epoch(c, f)


def test_empty_disk_rejoin_normal_broker_refuses_the_stale_epoch(make_cluster):
    """KIP-903: the held expansion names f's previous broker epoch and is refused; f rejoins only
    after fetching with its new epoch and catching up; a's death then loses nothing."""
    c, a, f, old, new = empty_disk_rejoin(make_cluster, None)
    failed = wait_until(lambda: [x for x in trace_events(c, a, "isr_change_failed")
                                 if x.get("reason") == "ineligible_replica"], what="the expansion refused")
    assert failed[0]["ineligible"] == [f]
    assert failed[0]["broker_epochs"] == {str(f): old} and failed[0]["current_broker_epochs"] == {str(f): new}
    assert f not in c.partition_state(T, 0)["isr"]
    c.resume_replication(f)
    wait_until(lambda: f in c.partition_state(T, 0)["isr"], timeout_s=30, what=f"{f} rejoins the ISR")
    # the store shows the commit a moment before a traces it: wait for a's trace to have it
    joined = wait_until(lambda: [x for x in trace_events(c, a, "isr_changed")
                                 if f in x["isr"] and x.get("broker_epochs")],
                        what=f"{a} traces {f}'s return to the ISR")
    assert joined[-1]["broker_epochs"] == {str(f): new} == joined[-1]["current_broker_epochs"]
    assert divergences(c, 2) == []
    c.kill(a)
    wait_until(lambda: c.leader_of(T, 0) == f, what=f"{f} elected")
    assert consumed(c) == RECORDS


def test_without_isr_broker_epoch_caught(make_cluster):
    """Without KIP-903 the held expansion commits f, empty, into the ISR; a's death elects it and
    the acknowledged records are gone. Conformance names the ineligible addition."""
    c, a, f, old, new = empty_disk_rejoin(make_cluster, "isr-broker-epoch")
    wait_until(lambda: f in c.partition_state(T, 0)["isr"], what=f"{f} committed into the ISR")
    # the store shows the commit a moment before a traces it: kill a only once its trace has
    # the commit, or the step conformance judges dies with it
    wait_until(lambda: [x for x in trace_events(c, a, "isr_changed") if f in x["isr"]],
               what=f"{a} traces the commit of {f} into the ISR")
    c.kill(a)
    wait_until(lambda: c.leader_of(T, 0) == f, what=f"{f} elected")
    # likewise the store names f leader a moment before f traces it: judge once f's trace has it
    epoch = c.partition_state(T, 0)["leader_epoch"]
    wait_until(lambda: [x for x in trace_events(c, f, "became_leader") if x["leader_epoch"] == epoch],
               what=f"{f} traces its leadership of epoch {epoch}")
    ds = divergences(c, 2)
    assert any(f"committed broker {f} into the ISR on a fetch made with broker epoch {old}" in d
               and f"registered with epoch {new}" in d for d in ds), ds
    assert any(f"broker {f} became leader" in d and "(LeaderCompleteness)" in d for d in ds), ds
    with SyncConn(*c.address(f)) as conn:
        lead = [x for x in conn.control({"op": "describe"})["partitions"] if x["topic"] == T][0]
    assert lead["role"] == "leader" and lead["log_end_offset"] < len(RECORDS), lead
    assert consumed(c) != RECORDS                    # acknowledged records lost
