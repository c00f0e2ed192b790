"""Arranged conformance scenarios on real brokers: each places the leader and the ISR where one
fix's rule decides, runs the steps that make the rule decide, and leaves the brokers' traces to
be judged by checkers/conformance.py against the model's rule functions. A broker built without
the fix (the `without_fixes` debug switch of impl/broker.py) diverges; the normal one conforms.
Used by `kafkaverify check` (kafkaverify/suite/broker_stages.py) and by
tests/test_conformance_fixes.py, which asserts more of each run.

    scenario              arranged state                                          fixes judged
    follower-drop         RF 3; a follower dies: the controller bumps the epoch,   truncate-on-epoch-change
                          the leader stays; then a Fetch of the old epoch         fetch-epoch-fencing
    min-isr-rejoin        RF 2, min ISR 2; the follower stops fetching and leaves min-isr-hw
                          the ISR; the leader appends; it restarts (a new epoch   isr-expand-epoch-start
                          starting above the HW) and the follower fetches again   epoch-truncation
    unseen-epoch          RF 3; the leader writes in an epoch one follower never  epoch-end-offset
                          saw, dies; that follower leads and answers the old
                          leader's OffsetsForLeaderEpoch for the unseen epoch
    pending-shrink        RF 2; the follower stops fetching; the leader proposes  maximal-isr
                          the shrink while the coordination service is stopped
                          (SIGSTOP), then appends
    empty-disk-rejoin     RF 3, min ISR 2; a follower returns, catches up and is  isr-broker-epoch
                          proposed for the ISR; the write is held (test hook)
                          while it loses power (empty log) and registers anew;
                          then the write goes ahead and the leader dies
    deposed-controller    RF 2, the controller no replica; it is paused past its  controller-epoch-fencing
                          session, another is elected; it resumes, and its
                          request (old controller epoch, next leader epoch)
                          reaches a follower
    late-produce          RF 3; a transaction adds the partition, writes a batch  txn-partition-verification
                          and aborts; a Produce of it delayed in the network
                          arrives after the ABORT marker (KIP-890's hanging
                          transaction)

The stale Fetch is sent on the wire as replica F with F's previous epoch: a follower that missed
the epoch bump, as a KIP-320 follower sends it (followers of a broker without the fix send no
epoch at all). `isr-broker-epoch` (KIP-903) is checked by the writer of the ISR (the leader
writes it to the coordination store itself; there is no AlterPartition).

A scenario takes `make(n, generation=..., broker_config=...)`, which returns a started cluster
(tests pass their `make_cluster` fixture; the suite passes a `Clusters`), and the fix to build
the brokers without (None: every fix on). Every wait is bounded: a step that does not happen in
time raises ScenarioTimeout, naming it.
"""
from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Callable

from checkers.conformance import check_traces
from impl.cluster import Cluster
from impl.netclient import SyncConn

T = "cf"
SESSION_TIMEOUT_MS = 2500


class ScenarioTimeout(AssertionError):
    """A step of an arranged scenario did not happen within its bound."""


def wait_until(pred, timeout_s: float = 20, interval: float = 0.05, what: str = "condition"):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(interval)
    raise ScenarioTimeout(f"timed out after {timeout_s}s waiting for {what}")


def trace_events(cluster: Cluster, i: int, etype: str | None = None) -> list[dict]:
    """Every broker event of broker i (all incarnations), validated by traces.trace.load."""
    from traces.trace import load
    out = []
    for f in cluster.trace_files(i):
        try:
            recs = load(f).records
        except Exception:
            # a kill -9 may leave a torn last line: read what is complete
            recs = [json.loads(line) for line in f.read_text().splitlines()[1:] if line.endswith("}")]
        out += [r for r in recs if r.get("kind") == "event" and (etype is None or r["type"] == etype)]
    return out


class Clusters:
    """`make(n, generation=..., **kw)` for the suite: started clusters under `root`, every one
    stopped by `stop_all()` (or on leaving the `with` block)."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.clusters: list[Cluster] = []

    def __call__(self, n: int, generation: str = "current", **kw) -> Cluster:
        kw.setdefault("session_timeout_ms", SESSION_TIMEOUT_MS)
        c = Cluster(n, self.root / f"cluster{len(self.clusters)}", generation=generation, **kw)
        self.clusters.append(c)
        c.start()
        return c

    def stop_all(self) -> None:
        for c in self.clusters:
            c.stop()

    def __enter__(self) -> "Clusters":
        return self

    def __exit__(self, *exc) -> None:
        self.stop_all()


# --- on the wire -----------------------------------------------------------------------------------

def _records(values) -> bytes:
    from kafka.record.default_records import DefaultRecordBatchBuilder
    bb = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                   producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i, v in enumerate(values):
        bb.append(i, timestamp=int(time.time() * 1000), key=None, value=v, headers=[])
    return bytes(bb.build())


def txn_records(pid: int, epoch: int, seq: int, n: int = 1, tag: bytes = b"t",
                transactional: bool = True) -> bytes:
    """One batch of `n` records of producer `pid` at `epoch`, first sequence `seq`."""
    from kafka.record.default_records import DefaultRecordBatchBuilder
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=transactional, producer_id=pid,
                                  producer_epoch=epoch, base_sequence=seq, batch_size=1 << 20)
    for i in range(n):
        b.append(i, timestamp=int(time.time() * 1000), key=None, value=tag + b"%d" % (seq + i), headers=[])
    return bytes(b.build())


def produce(c, leader: int, values, acks: int) -> int:
    with SyncConn(*c.address(leader)) as conn:
        r = conn.request(0, 7, {"acks": acks, "timeout_ms": 15000, "transactional_id": None, "topic_data": [
            {"name": T, "partition_data": [{"index": 0, "records": _records(values)}]}]})
    pr = r.responses[0].partition_responses[0]
    if pr.error_code != 0:
        raise AssertionError(f"produce to broker {leader} failed: {pr}")
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


def cluster(make, without: str | None, **cfg):
    cfg.setdefault("replica_lag_time_max_ms", 30000)
    return make(3, generation="current", broker_config={**cfg, "without_fixes": [without] if without else []})


def others(c, *exclude: int) -> list[int]:
    return [i for i in range(c.n) if i not in exclude]


def arrange_leader(c, to: int, isr_size: int) -> int:
    """`to` leads (moved there by clean restarts if the controller chose another); its epoch."""
    c.wait_for_leaders(T, isr_size=isr_size)
    c.move_leader(T, 0, to)
    return c.partition_state(T, 0)["leader_epoch"]


def registration_epoch(c, i: int) -> int:
    """Broker i's broker epoch as its registration holds it (-1: not registered)."""
    return c.broker_epochs().get(i, -1)


# --- follower-drop: KAFKA-7164 and KIP-320 ---------------------------------------------------------

def follower_drop(make, without):
    """Returns (cluster, the error code of the stale Fetch)."""
    c = cluster(make, without)
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
    if not (c.partition_state(T, 0)["leader"] == leader and new > e):
        raise AssertionError(f"expected broker {leader} to lead an epoch above {e}: {c.partition_state(T, 0)}")
    err = replica_fetch(c, leader, f, e, 1)           # follower f as if it missed the bump
    wait_until(lambda: trace_events(c, leader, "stale_epoch_request"), what="the stale Fetch traced")
    return c, err


# --- min-isr-rejoin: KAFKA-15583 and KAFKA-7128 ----------------------------------------------------

def min_isr_rejoin(make, without, rejoin: bool):
    c = cluster(make, without, replica_lag_time_max_ms=1000)
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


# --- unseen-epoch: KIP-279 -------------------------------------------------------------------------

def unseen_epoch(make, without, above_zero: bool = False):
    c = cluster(make, without)
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


# --- pending-shrink: KIP-497 -----------------------------------------------------------------------

def pending_shrink(make, without):
    c = cluster(make, without, replica_lag_time_max_ms=1000, session_timeout_ms=15000)
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


# --- empty-disk-rejoin: KIP-903 --------------------------------------------------------------------

RECORDS = [b"r%d" % i for i in range(10)]


def empty_disk_rejoin(make, without):
    """Leader a, followers f and the controller. f stops (the controller takes it out of the ISR)
    and the leader appends (acks=all, min ISR 2). f starts again and catches up; the leader
    proposes it for the ISR, and the write is held (test hook) while f loses power -- its log
    since the restart was unflushed -- and registers anew, not fetching (replication paused).
    Then the write goes ahead. The lag bound stays long (30 s): no shrink races the steps.
    Returns (cluster, a, f, f's broker epoch at the proposal, its new one)."""
    c = cluster(make, without)
    ctl = c.controller()
    a, f = others(c, ctl)
    # after a, f comes first in the assignment: a clean election after a's death picks f if in the ISR
    c.create_topic(T, assignment={0: [a, f, ctl]}, min_insync=2)
    arrange_leader(c, a, 3)
    c.stop_broker(f)
    wait_until(lambda: sorted(c.partition_state(T, 0)["isr"]) == sorted([a, ctl]), what=f"{f} out of the ISR")
    if produce(c, a, RECORDS, acks=-1) != 0:           # acknowledged: on a and the controller
        raise AssertionError("the records were expected at offset 0")
    hold = c.broker_dir(a) / "HOLD_ISR_WRITES"
    hold.touch()
    c.start_broker(f)
    wait_until(lambda: [x for x in trace_events(c, a, "isr_proposed") if f in x["isr"]],
               what=f"{a} proposes {f} for the ISR (write held)")
    old = registration_epoch(c, f)
    followed = len(trace_events(c, f, "became_follower"))
    if not c.power_loss(f):
        raise AssertionError(f"{f} must lose its unflushed log")
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


def empty_disk_rejoin_refused(c, a: int) -> list[dict]:
    """The normal broker after empty_disk_rejoin: the held expansion is refused (KIP-903).
    Returns the refusals a traced."""
    return wait_until(lambda: [x for x in trace_events(c, a, "isr_change_failed")
                               if x.get("reason") == "ineligible_replica"], what="the expansion refused")


def empty_disk_rejoin_rejoins(c, a: int, f: int) -> list[dict]:
    """Then f fetches with its new broker epoch and rejoins the ISR. Returns a's traced ISR
    changes that name f's broker epoch."""
    c.resume_replication(f)
    wait_until(lambda: f in c.partition_state(T, 0)["isr"], timeout_s=30, what=f"{f} rejoins the ISR")
    # the store shows the commit a moment before a traces it: wait for a's trace to have it
    return wait_until(lambda: [x for x in trace_events(c, a, "isr_changed")
                               if f in x["isr"] and x.get("broker_epochs")],
                      what=f"{a} traces {f}'s return to the ISR")


def empty_disk_rejoin_elected(c, a: int, f: int) -> int:
    """A broker without KIP-903 after empty_disk_rejoin: the held expansion commits f, empty,
    into the ISR; a dies and f is elected. Returns f's leader epoch."""
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
    return epoch


# --- deposed-controller: controller-epoch fencing (KAFKA-1120 era) ---------------------------------

def controller_epoch_seen(c, i: int) -> int:
    """The newest controller epoch broker i has seen (its control API's describe)."""
    with SyncConn(*c.address(i)) as conn:
        return int(conn.control({"op": "describe"})["controller_epoch_seen"])


def deposed_controller(make, without):
    """The controller is paused (SIGSTOP) past its session: another broker is elected with the
    next controller epoch and tells the partition's replicas (a follower t among them). The old
    controller resumes, finds its session gone and registers anew. Then its request reaches t
    with its old controller epoch: the follower's partition at the next leader epoch, as a
    deposed controller that elected on its own would send it (sent on the wire as the deposed
    controller, like follower-drop's stale Fetch: the broker's own deposed controller learns of
    its expiry before it sends again). Returns (cluster, the request's error code, t)."""
    c = cluster(make, without)
    old = c.controller()
    leader, t = others(c, old)          # the controller is no replica: its pause changes no ISR
    c.create_topic(T, assignment={0: [leader, t]}, min_insync=1)
    e = arrange_leader(c, leader, 2)
    ce = c.controller_epoch()
    wait_until(lambda: [x for x in trace_events(c, t, "became_follower") if x["leader_epoch"] == e],
               what=f"{t} follows epoch {e}")
    was = registration_epoch(c, old)
    c.pause(old)
    try:
        wait_until(lambda: c.controller() not in (None, old) and c.controller_epoch() > ce, timeout_s=30,
                   what=f"a controller elected after {old}'s session expired")
        wait_until(lambda: [x for x in trace_events(c, t, "control_request") if x["controller_epoch"] > ce],
                   timeout_s=30, what=f"{t} hears from the new controller")
    finally:
        c.resume(old)
    wait_until(lambda: registration_epoch(c, old) > was, timeout_s=30, what=f"{old} registered anew")
    st = c.partition_state(T, 0)
    if not (controller_epoch_seen(c, t) > ce and st["leader"] == leader and st["leader_epoch"] == e):
        raise AssertionError(f"expected {t} to have seen a controller epoch above {ce} and {leader} to lead "
                             f"epoch {e}: {st}")
    stale = {"controller_epoch": ce, "controller_id": old, "brokers": {},
             "partitions": [{"topic": T, "partition": 0, "leader": leader, "leader_epoch": e + 1,
                             "isr": st["isr"], "replicas": [leader, t], "zk_version": 0, "min_insync": 1}]}
    with SyncConn(*c.address(t)) as conn:
        err = int(conn.control(stale)["error_code"])
    wait_until(lambda: [x for x in trace_events(c, t, "control_request") if x["controller_epoch"] == ce
                        and x.get("controller_id") == old and x["partitions"]
                        and x["partitions"][0]["leader_epoch"] == e + 1],
               what="the deposed controller's request traced")
    return c, err, t


# --- the runs the suite judges ----------------------------------------------------------------------

def run_follower_drop(make, without):
    return follower_drop(make, without)[0]


def run_min_isr_shrink(make, without):
    return min_isr_rejoin(make, without, rejoin=False)


def run_min_isr_rejoin(make, without):
    return min_isr_rejoin(make, without, rejoin=True)


def run_deposed_controller(make, without):
    return deposed_controller(make, without)[0]


def run_empty_disk_rejoin(make, without):
    """Follows what the broker does with the held expansion: refused (KIP-903), f rejoins after
    fetching anew; committed (a broker without the fix), the leader dies and f is elected."""
    c, a, f, _old, _new = empty_disk_rejoin(make, without)

    def refused_or_committed():
        if [x for x in trace_events(c, a, "isr_change_failed") if x.get("reason") == "ineligible_replica"]:
            return "refused"
        if [x for x in trace_events(c, a, "isr_changed") if f in x["isr"]]:
            return "committed"
        return None
    if wait_until(refused_or_committed, what="the held expansion refused or committed") == "refused":
        empty_disk_rejoin_rejoins(c, a, f)
    else:
        empty_disk_rejoin_elected(c, a, f)
    return c


# --- late-produce: KIP-890 part 1 ------------------------------------------------------------------

# answers a client retries: COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR,
# CONCURRENT_TRANSACTIONS; and NOT_ENOUGH_REPLICAS, the leader's answer while a verification is unsettled
TXN_RETRY = {14, 15, 16, 51}


def _txn_produce(conn, tid: str, data: bytes) -> tuple[int, int]:
    r = conn.request(0, 7, {"acks": -1, "timeout_ms": 15000, "transactional_id": tid, "topic_data": [
        {"name": T, "partition_data": [{"index": 0, "records": data}]}]})
    pr = r.responses[0].partition_responses[0]
    return pr.error_code, pr.base_offset


def _lso_hw(conn) -> tuple[int, int]:
    r = conn.request(1, 11, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 1,
        "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
        "topics": [{"topic": T, "partitions": [{"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                                                "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]})
    p = r.responses[0].partitions[0]
    return p.last_stable_offset, p.high_watermark


def late_produce(make, without):
    """The transaction aborts; a Produce of it delayed in the network arrives afterwards. With
    txn-partition-verification the leader asks the coordinator, which no longer has it ongoing,
    and refuses the batch; without, the batch is appended and opens a transaction no coordinator
    will end (the LSO stays on it). Returns (cluster, the late Produce's (error, base offset))."""
    c = cluster(make, without)
    c.create_topic(T, partitions=1, replication_factor=3, min_insync=1)
    leader = c.wait_for_leaders(T, isr_size=3)[0]
    tid = "late-produce"

    def find():
        with SyncConn(*c.address(c.alive()[0])) as conn:
            r = conn.request(10, 1, {"key": tid, "key_type": 1})
        return (r.node_id,) if r.error_code == 0 else None
    coordinator = wait_until(find, what="the transaction coordinator")[0]
    with SyncConn(*c.address(coordinator)) as co, SyncConn(*c.address(leader)) as lc:
        def retried(api, version, body, code_of, what):
            def go():
                code = code_of(co.request(api, version, body))
                return None if code in TXN_RETRY else (code,)
            code = wait_until(go, what=what)[0]
            if code != 0:
                raise AssertionError(f"{what} answered error {code}")

        init = {}

        def init_pid():
            r = co.request(22, 4, {"transactional_id": tid, "transaction_timeout_ms": 60000,
                                   "producer_id": -1, "producer_epoch": -1})
            if r.error_code not in TXN_RETRY | {0}:
                raise AssertionError(f"InitProducerId answered error {r.error_code}")
            if r.error_code == 0:
                init.update(pid=r.producer_id, epoch=r.producer_epoch)
            return r.error_code == 0 or None
        wait_until(init_pid, what="InitProducerId")
        pid, epoch = init["pid"], init["epoch"]
        ids = {"v3_and_below_transactional_id": tid, "v3_and_below_producer_id": pid,
               "v3_and_below_producer_epoch": epoch}
        retried(24, 3, {**ids, "v3_and_below_topics": [{"name": T, "partitions": [0]}]},
                lambda r: r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code,
                "AddPartitionsToTxn")
        first = _txn_produce(lc, tid, txn_records(pid, epoch, 0, 2))
        if first[0] != 0:
            raise AssertionError(f"the transaction's Produce answered error {first[0]}")
        retried(26, 3, {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch, "committed": False},
                lambda r: r.error_code, "EndTxn(abort)")
        wait_until(lambda: _lso_hw(lc)[0] == _lso_hw(lc)[1] == 3, what="the ABORT marker under the HW")
        # the late batch: a refusal NOT_ENOUGH_REPLICAS (19) means the verification is unsettled
        late = wait_until(lambda: (r := _txn_produce(lc, tid, txn_records(pid, epoch, 2, 1)))[0] != 19 and r,
                          what="the late Produce answered")
    wait_until(lambda: len(trace_events(c, leader, "txn_produce")) >= 2, what="the late Produce traced")
    return c, late


def run_late_produce(make, without):
    return late_produce(make, without)[0]


# scenario name -> (run(make, without) -> cluster to judge, its topic's min.insync.replicas)
SCENARIOS: dict[str, tuple[Callable, int]] = {
    "follower-drop": (run_follower_drop, 1),
    "min-isr-shrink": (run_min_isr_shrink, 2),
    "min-isr-rejoin": (run_min_isr_rejoin, 2),
    "unseen-epoch": (unseen_epoch, 1),
    "pending-shrink": (pending_shrink, 1),
    "empty-disk-rejoin": (run_empty_disk_rejoin, 2),
    "deposed-controller": (run_deposed_controller, 1),
    "late-produce": (run_late_produce, 1),
}
