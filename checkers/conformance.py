"""Conformance of the real broker to the model: the brokers' transition traces (kind "event",
traces/trace.py) are mapped onto model states and actions, and every mapped step is checked
against the model's rules (spec/rules.py, the fixes of spec/config.py) and invariants. Never
imports impl/: the broker is judged only through its trace files.

Refinement mapping, per partition (records are identified by their offset; a log is the leader
epoch of each offset, as the model's log is (record, epoch) pairs):

    broker event                  model action            checked
    became_leader                 ControllerReact+Deliver one leader per epoch (UniqueLeaderPerEpoch);
                                                          a clean leader holds every record a leader
                                                          exposed (LeaderCompleteness), unless every
                                                          holder lost them to power loss (the model's
                                                          durability exemption; KIP-966's case is not)
    appended (role leader)        Produce                 the leader leads that epoch; appends at its LEO
    appended (role follower)      FetchResponse           the records carry the epochs the leader's log
                                                          has at those offsets (LogMatching)
    truncated (reason hw/epoch)   Truncate                the offset is exactly spec.rules.truncation_offset
                                                          of the mapped follower and leader under the
                                                          generation's fixes; an ISR member keeps every
                                                          committed record (LeaderCandidateCompleteness)
    hw_advanced (leader)          FetchRequest (HW step)  HW <= LEO; HW <= every committed-ISR member's LEO
                                                          (with maximal-isr); no advance under min ISR
                                                          (with min-isr-hw)
    hw_advanced (follower)        FetchResponse           HW <= own LEO
                                                          (the maximal ISR: committed + proposed)
    isr_changed                   AlterIsrResponse        the leader's committed ISR; with isr-broker-epoch
                                                          (KIP-903) each added member fetched with the
                                                          broker epoch it is registered with at the
                                                          commit (isr_addition_valid)
    isr_proposed                  FetchRequest (ISR step) each added member's position has reached the
                                                          HW and, with isr-expand-epoch-start (KAFKA-7128),
                                                          the start of the leader's epoch (may_join_isr)
    isr_change_failed             AlterIsrResponse (err)  the proposal is dropped (mapped state only)
    became_follower (truncate)    ControllerReact+Deliver the decision to truncate before fetching is
                                                          must_truncate_on_become_follower (KAFKA-7164)
    truncation_done               Truncate                lockstep: spec.model.step(Truncate) from the
                                                          follower as it became follower leaves the
                                                          broker's log end (a missing or extra cut too)
    epoch_answered                Truncate (the leader's  the OffsetsForLeaderEpoch answer is the model's:
                                  half)                   epoch_end_offset with KIP-279, end_offset_for before
    stale_epoch_request           FetchRequest            a replica request of another leader epoch is refused
                                                          with fetch-epoch-fencing (KIP-320), served without
    control_request               Deliver (or its         per partition, the broker applies the entry iff
                                  refusal)                spec.rules.control_request_accepted of its traced
                                                          newest controller epoch seen and current leader
                                                          epoch: with controller-epoch-fencing a deposed
                                                          controller's request is refused
    recovered                     Restart (after a crash) the log as the restarted broker found it
    txn_produce                   a data partition        the verdict is spec.rules.txn_produce_verdict of the
                                  leader's check of a     traced partition epoch and batch epoch, with the
                                  transactional batch     coordinator holding the transaction iff it answered
                                                          the verify-only AddPartitionsToTxn with no error or
                                                          the partition had that epoch's transaction ongoing
                                                          (KIP-890 part 1 with txn-partition-verification); the
                                                          error code is the verdict's
    txn_marker                    the leader's check of   the verdict is spec.rules.txn_marker_verdict of the
                                  a WriteTxnMarkers entry traced producer state (epoch, open transaction's
                                                          epoch, last coordinator epoch) and marker (KIP-890
                                                          part 2 with txn-epoch-bump); the error code is the
                                                          verdict's
    txn_rule                      the transaction         the coordinator's decision (InitProducerId,
                                  coordinator's rules     AddPartitionsToTxn, verification, EndTxn) is the
                                                          model's rule of that name on the traced inputs
                                                          (txn_partition_verified: txn_produce_verdict's
                                                          coordinator half)
Not mapped (the broker does not trace them, or they carry no replication state): fetch requests of
the leader's own epoch (or of none: followers before KIP-320 send -1), flushes, control-message
delivery and loss, controller_elected, stale_request_rejected (its decision is judged as the
control_request traced with it), control requests naming no partition, a LeaderAndIsr refused
for its broker epoch (KIP-380: traced only as stale_request_rejected),
broker_started, and truncations for out-of-range fetches (reason leader_log_end / log_start,
which the model folds into FetchResponse). A truncation that needs the follower's HW after a
restart (the checkpoint is not traced) is counted as unmapped, not judged.

Events of all brokers are merged by their timestamp (one machine, one clock).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from spec import rules as R
from spec.config import GENERATIONS
from spec.state import FOLLOWER, LEADER, NONE, Broker, describe_broker

MAPPED = ("became_leader", "became_follower", "appended", "truncated", "hw_advanced", "isr_changed", "recovered",
          "truncation_done", "epoch_answered", "stale_epoch_request", "isr_proposed", "isr_change_failed")


@dataclass
class Divergence:
    event: dict
    text: str
    model_state: list[str]          # the mapped brokers of that partition, as the model prints them
    allowed: list[str]              # what the model would have allowed instead
    kind: str = "step"              # "step" (the model forbids this step) or "invariant"

    def to_json(self) -> dict:
        return {"kind": self.kind, "text": self.text, "event": self.event, "model_state": self.model_state,
                "allowed": self.allowed}


@dataclass
class _Replica:
    log: list[int] = field(default_factory=list)          # epoch of each offset
    cache: tuple = ()
    hw: int | None = 0                                     # None: unknown (after a restart)
    role: int = NONE
    le: int = -1
    leader: int = -1
    isr: frozenset = frozenset()
    pending: frozenset | None = None                       # an ISR proposal in flight (leader)
    trunc: bool = False                                    # a truncation is due before fetching
    alive: bool = True

    def model(self, n: int) -> Broker:
        log = tuple((o, e) for o, e in enumerate(self.log))
        isr = sum(1 << b for b in self.isr if b < 64)
        pending = -1 if self.pending is None else sum(1 << b for b in self.pending if b < 64)
        return Broker(alive=self.alive, paused=False, gen=0, log=log, flushed=len(log),
                      hw=self.hw if self.hw is not None else 0, cache=self.cache, le=self.le, role=self.role,
                      leader=self.leader, ver=0, isr=isr, pending=pending, pos=(), trunc=self.trunc, fetch=(), ce=0,
                      ctl=0, ctl_cache=(), pend_acks=0, pend_gen=0, resp=-1)


@dataclass
class Result:
    divergences: list[Divergence]
    events: int = 0
    mapped: int = 0
    unmapped: dict[str, int] = field(default_factory=dict)


class _Partition:
    def __init__(self, fixes: frozenset, min_insync: int):
        self.fixes, self.min_insync = fixes, min_insync
        self.reps: dict[int, _Replica] = {}
        self.epoch_leader: dict[int, int] = {}
        self.exposed = 0                 # highest HW any leader advanced to
        self.power_loss = False          # some replica lost unflushed records (see _doomed)
        self.pre_trunc: dict[int, _Replica] = {}   # lockstep: a follower as its Truncate step began

    def rep(self, n: int) -> _Replica:
        return self.reps.setdefault(n, _Replica())

    def state(self) -> list[str]:
        return [describe_broker(n, r.model(n)) for n, r in sorted(self.reps.items())]


def _rebuild_cache(log: list[int]) -> tuple:
    cache: tuple = ()
    for o, e in enumerate(log):
        cache = R.cache_assign(cache, e, o)
    return cache


def check_events(events: Iterable[dict], generation: str, without: Iterable[str] = (),
                 min_insync: int | dict[str, int] = 1) -> Result:
    """min_insync: one value, or per topic ({topic: n}; topics not named get 1, the broker
    default, e.g. __consumer_offsets). The broker's trace does not carry topic configs."""
    if generation not in GENERATIONS:
        raise ValueError(f"unknown generation {generation!r}")
    fixes = GENERATIONS[generation] - frozenset(without)
    parts: dict[tuple[str, int], _Partition] = {}
    seen_floor: dict[int, int] = {}     # per broker: the newest controller epoch it must have seen
    res = Result([])
    for ev in events:
        res.events += 1
        t = ev.get("type")
        if t == "broker_started":       # a new incarnation: it learns controller epochs anew
            seen_floor.pop(int(ev["node"]), None)
        elif t == "controller_elected":
            n = int(ev["node"])
            seen_floor[n] = max(seen_floor.get(n, 0), int(ev["controller_epoch"]))
        if t == "txn_rule":
            _txn_rule(ev, res)
            res.mapped += 1
            continue
        if t == "control_request":
            if _control_request(parts, fixes, min_insync, seen_floor, ev, res):
                res.mapped += 1
            else:
                res.unmapped[t] = res.unmapped.get(t, 0) + 1
            continue
        if t in _TXN_CHECKS:
            mi = min_insync.get(ev["topic"], 1) if isinstance(min_insync, dict) else min_insync
            _TXN_CHECKS[t](parts.setdefault((ev["topic"], int(ev["partition"])), _Partition(fixes, mi)), ev, res)
            res.mapped += 1
            continue
        if t not in MAPPED or "topic" not in ev:
            res.unmapped[t] = res.unmapped.get(t, 0) + 1
            continue
        mi = min_insync.get(ev["topic"], 1) if isinstance(min_insync, dict) else min_insync
        p = parts.setdefault((ev["topic"], int(ev["partition"])), _Partition(fixes, mi))
        n = int(ev["node"])
        if _step(p, n, ev, res):
            res.mapped += 1
        else:
            key = f"{t}:{ev.get('reason', '')}".rstrip(":")
            res.unmapped[key] = res.unmapped.get(key, 0) + 1
    return res


def _control_request(parts: dict, fixes: frozenset, min_insync, seen_floor: dict[int, int], ev: dict,
                     res: Result) -> bool:
    """A control request's acceptance, per partition (spec.rules.control_request_accepted): the
    model's broker with the newest controller epoch seen before the request and the partition's
    current leader epoch accepts the entry iff the broker applied it. With
    `controller-epoch-fencing` a deposed controller's request (an older controller epoch) is
    refused whatever leader epoch it carries. The epoch seen is the traced one, but never below
    what the trace shows this incarnation saw (a request it accepted, its own election): a
    broker that forgets a newer controller would report the older one and seem to conform. A
    request naming no partition decides nothing."""
    n, ce, traced = int(ev["node"]), int(ev["controller_epoch"]), int(ev["current_controller_epoch"])
    floor = seen_floor.get(n, 0)
    seen = max(traced, floor)
    entries = ev.get("partitions") or []
    if traced < floor and entries:
        x = entries[0]
        mi = min_insync.get(x["topic"], 1) if isinstance(min_insync, dict) else min_insync
        p = parts.setdefault((x["topic"], int(x["partition"])), _Partition(fixes, mi))
        _div(res, p, ev, f"broker {n} decided a {ev['request']} of controller epoch {ce} as having seen controller "
                         f"epoch {traced}, but it had seen {floor} (a request it accepted or its own election)",
             [f"judge against controller epoch {floor} (the newest seen never goes back)"])
    if ev.get("accepted"):
        seen_floor[n] = max(floor, ce)
    for x in entries:
        topic, le, cur, got = x["topic"], int(x["leader_epoch"]), int(x["current_leader_epoch"]), bool(x["accepted"])
        mi = min_insync.get(topic, 1) if isinstance(min_insync, dict) else min_insync
        p = parts.setdefault((topic, int(x["partition"])), _Partition(fixes, mi))
        b = p.rep(n).model(n)._replace(ce=seen, le=cur)
        want = R.control_request_accepted(b, ce, le, fixes)
        if got != want:
            fencing = "controller-epoch-fencing" in fixes
            _div(res, p, ev, f"broker {n} {'accepted' if got else 'refused'} a {ev['request']} of controller "
                             f"epoch {ce} (from broker {ev.get('controller_id', '?')}; it had seen controller "
                             f"epoch {seen}) for {topic}-{x['partition']} at leader epoch {le} over its {cur}",
                 [f"{'apply' if want else 'refuse'} it (spec.rules.control_request_accepted; "
                  f"controller-epoch-fencing {'on' if fencing else 'off'})"])
    return bool(entries)


# Kafka's error codes for each verdict (Errors.INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED)
_PRODUCE_CODES = {"append": 0, "fenced": 47}
_MARKER_CODES = {"append": 0, "fenced": 47, "coordinator-fenced": 52}


def _txn_produce(p: _Partition, ev: dict, res: Result) -> None:
    """A leader's verdict on a transactional batch against spec.rules.txn_produce_verdict. The
    coordinator the model consults is the traced answer: an Ongoing transaction of the batch's
    epoch holding the partition iff the verify-only request came back without error, or the
    partition already had that epoch's transaction ongoing (no question asked)."""
    part, e, pe = int(ev["partition"]), int(ev["epoch"]), int(ev["partition_epoch"])
    ve, ongoing = ev["verify_error"], int(ev["ongoing_epoch"])
    vouched = ve == 0 or (ve is None and ongoing == e)
    fix = "txn-partition-verification" in p.fixes
    if bool(ev["verified"]) != vouched:
        _div(res, p, ev, f"leader {ev['node']} took producer {ev['producer_id']}'s batch as "
                         f"{'verified' if ev['verified'] else 'unverified'}, but the coordinator answered {ve} "
                         f"and the partition's ongoing transaction has epoch {ongoing}",
             ["verified iff the verify-only AddPartitionsToTxn succeeded or that epoch's transaction is ongoing"])
    if fix and ve is None and ongoing != e and e >= pe:
        _div(res, p, ev, f"leader {ev['node']} did not ask the coordinator before producer {ev['producer_id']}'s "
                         f"first batch of epoch {e} on the partition (ongoing epoch {ongoing})",
             ["AddPartitionsToTxn verify-only first (KIP-890 part 1, txn-partition-verification)"])
    coordinator = (e, 1, 1 << part) if vouched else (e, 0, 0)
    want = R.txn_produce_verdict(pe, e, coordinator, part, p.fixes)
    if ev["verdict"] != want or (_PRODUCE_CODES.get(want, -1) != int(ev["error_code"])
                                 and not (want == "unverified" and int(ev["error_code"]) != 0)):
        _div(res, p, ev, f"leader {ev['node']} decided {ev['verdict']} (error {ev['error_code']}) on producer "
                         f"{ev['producer_id']}'s batch of epoch {e} over partition epoch {pe}",
             [f"{want} (spec.rules.txn_produce_verdict; txn-partition-verification {'on' if fix else 'off'})"])


def _txn_marker(p: _Partition, ev: dict, res: Result) -> None:
    """A leader's verdict on a WriteTxnMarkers entry against spec.rules.txn_marker_verdict. The
    model's markers with `txn-epoch-bump` are transaction version 2 ones; a marker the coordinator
    wrote as version 1 (traced) is judged without it (the coordinator's epoch choice is judged by
    its own txn_end_epoch decision)."""
    fixes = p.fixes if int(ev.get("transaction_version", 0)) >= 2 else p.fixes - {"txn-epoch-bump"}
    want = R.txn_marker_verdict(int(ev["partition_epoch"]), int(ev["open_epoch"]), int(ev["last_coordinator_epoch"]),
                                int(ev["epoch"]), int(ev["coordinator_epoch"]), fixes)
    if ev["verdict"] != want or _MARKER_CODES[want] != int(ev["error_code"]):
        bump = "txn-epoch-bump" in fixes
        _div(res, p, ev, f"leader {ev['node']} decided {ev['verdict']} (error {ev['error_code']}) on a marker of "
                         f"producer {ev['producer_id']} epoch {ev['epoch']}, coordinator epoch "
                         f"{ev['coordinator_epoch']} (partition epoch {ev['partition_epoch']}, open transaction's "
                         f"epoch {ev['open_epoch']}, last coordinator epoch {ev['last_coordinator_epoch']})",
             [f"{want} (spec.rules.txn_marker_verdict; txn-epoch-bump {'on' if bump else 'off'})"])


_TXN_CHECKS = {"txn_produce": _txn_produce, "txn_marker": _txn_marker}


# the transaction coordinator's decisions: impl's rule name -> the model's function of its inputs
_TXN_RULES = {
    "txn_request_fenced": lambda i: R.txn_request_fenced(i["request_epoch"], i["coordinator_epoch"]),
    "txn_bump_fenced": lambda i: R.txn_bump_fenced(i["request_epoch"], i["coordinator_epoch"], i["own_abort"]),
    "txn_init_action": lambda i: R.txn_init_action(i["state"]),
    "txn_end_answer": lambda i: R.txn_end_answer(i["request_epoch"], i["epoch"], i["state"], i["commit"],
                                                 i["retry"], frozenset(i["fixes"])),
    "txn_end_epoch": lambda i: R.txn_end_epoch(i["epoch"], frozenset(i["fixes"])),
    # the coordinator's half of the leader's check: the model's verdict with the coordinator's
    # committed (epoch, state, holds-the-partition) and no partition-side fence
    "txn_partition_verified": lambda i: R.txn_produce_verdict(
        -1, i["epoch"], (i["coordinator_epoch"], i["state"], int(i["holds"])), 0,
        frozenset({"txn-partition-verification"})) == "append",
}


def _txn_rule(ev: dict, res: Result) -> None:
    """A `txn_rule` event (impl/txn_coordinator.py): the decision the coordinator traced must be
    the model's function of the same inputs (spec.rules.<rule>)."""
    rule, inputs = ev.get("rule"), ev.get("inputs") or {}
    fn = _TXN_RULES.get(rule)
    if fn is None:
        res.divergences.append(Divergence(ev, f"unknown transaction rule {rule!r}", [], sorted(_TXN_RULES)))
        return
    try:
        want = fn(inputs)
    except (KeyError, TypeError) as e:
        res.divergences.append(Divergence(ev, f"{rule}: inputs {inputs} do not fit the model's rule ({e})", [], []))
        return
    if want != ev.get("output"):
        res.divergences.append(Divergence(
            ev, f"transaction coordinator of {ev.get('transactional_id')!r} decided {ev.get('output')!r} by {rule} "
                f"on {inputs}", [], [f"{want!r} (spec.rules.{rule})"]))


def _div(res: Result, p: _Partition, ev: dict, text: str, allowed: list[str], kind: str = "step") -> None:
    res.divergences.append(Divergence(ev, text, p.state(), allowed, kind))


def _step(p: _Partition, n: int, ev: dict, res: Result) -> bool:
    t, r = ev["type"], p.rep(n)
    if t == "recovered":
        leo = int(ev["log_end_offset"])
        if leo < len(r.log):       # a suffix vanished across the restart: unflushed writes lost
            p.power_loss = True
        del r.log[leo:]
        if leo > len(r.log):              # a log we never saw written (before this trace): unknown epochs
            r.log += [-1] * (leo - len(r.log))
        r.cache = _rebuild_cache(r.log)
        r.hw, r.role, r.le, r.alive = None, NONE, -1, True
        r.pending, r.trunc = None, False
        return True
    if t == "became_leader":
        e = int(ev["leader_epoch"])
        other = p.epoch_leader.get(e)
        if other is not None and other != n:
            _div(res, p, ev, f"broker {n} became leader of epoch {e}, which broker {other} already led",
                 [f"ControllerReact electing a leader with epoch > {e}"], "invariant")
        p.epoch_leader[e] = n
        if len(r.log) < p.exposed and not _doomed(p, n):
            _div(res, p, ev, f"broker {n} became leader of epoch {e} with log end {len(r.log)}, below the "
                             f"high watermark {p.exposed} a leader exposed: committed records are lost "
                             "(LeaderCompleteness)", [f"elect a replica holding offsets < {p.exposed}"], "invariant")
        r.role, r.le, r.leader, r.pending, r.trunc = LEADER, e, n, None, False
        r.isr = frozenset(ev.get("isr", []))
        r.cache = R.cache_assign(r.cache, e, len(r.log))
        if ev.get("hw") is not None and r.hw is None:
            r.hw = int(ev["hw"])
        return True
    if t == "became_follower":
        le, leader = int(ev["leader_epoch"]), int(ev["leader"])
        if "truncate" in ev:
            _truncate_on_become_follower(p, n, r, ev, le, leader, res)
            r.trunc = bool(ev["truncate"])
        r.role, r.le, r.leader, r.pending = FOLLOWER, le, leader, None
        if r.trunc:
            p.pre_trunc[n] = _Replica(list(r.log), r.cache, r.hw, r.role, r.le, r.leader, r.isr, None, True)
        return True
    if t == "truncation_done":
        _lockstep_truncate(p, n, r, ev, res)
        r.trunc = False
        return True
    if t == "isr_changed":
        _isr_additions_eligible(p, n, ev, res)
        if r.role == LEADER and int(ev["leader_epoch"]) == r.le:
            r.isr, r.pending = frozenset(ev["isr"]), None
        return True
    if t == "isr_change_failed":
        if r.role == LEADER and int(ev["leader_epoch"]) == r.le:
            r.pending = None
        return True
    check = _RULE_CHECKS.get(t)
    return check(p, n, r, ev, res) if check else False


def _appended(p: _Partition, n: int, r: _Replica, ev: dict, res: Result) -> bool:
    base, last, e = int(ev["base_offset"]), int(ev["last_offset"]), int(ev["leader_epoch"])
    if ev.get("role") == "follower":
        ld = p.reps.get(r.leader)
        if base != len(r.log):
            _div(res, p, ev, f"follower {n} appended at offset {base} but its log ends at {len(r.log)}",
                 [f"FetchResponse appending at offset {len(r.log)}"])
        elif ld is not None and last < len(ld.log) and ld.log[last] not in (e, -1):
            _div(res, p, ev, f"follower {n} appended offset {last} with epoch {e}, but the leader {r.leader}'s "
                             f"log has epoch {ld.log[last]} there (LogMatching)",
                 [f"FetchResponse copying the leader's entries (offset {last} @ epoch {ld.log[last]})"], "invariant")
        del r.log[base:]
        r.log += [e] * (last - base + 1)
        r.cache = R.cache_assign(r.cache, e, base)
        return True
    if r.role != LEADER or e != r.le:
        _div(res, p, ev, f"broker {n} appended as leader of epoch {e} but is "
                         f"{'leader of epoch ' + str(r.le) if r.role == LEADER else 'not a leader'}",
             ["Produce only at the leader of the current epoch"])
    elif base != len(r.log):
        _div(res, p, ev, f"leader {n} appended at offset {base} but its log ends at {len(r.log)}",
             [f"Produce appending at offset {len(r.log)}"])
    del r.log[base:]
    r.log += [e] * (last - base + 1)
    r.cache = R.cache_assign(r.cache, e, base)
    return True


def _truncated(p: _Partition, n: int, r: _Replica, ev: dict, res: Result) -> bool:
    off, reason = int(ev["offset"]), ev["reason"]
    if reason in ("hw", "leader_epoch") and r.role == FOLLOWER and r.leader in p.reps:
        ld = p.reps[r.leader]
        f_model, l_model = r.model(n), ld.model(r.leader)
        uses_hw = "epoch-truncation" not in p.fixes or not r.cache
        if not (uses_hw and r.hw is None) and -1 not in r.log and -1 not in ld.log:
            want = R.truncation_offset(f_model, l_model, p.fixes)
            if want != off:
                _div(res, p, ev, f"follower {n} truncated to offset {off} ({reason}); the model's rule for "
                                 f"this state truncates to {want}",
                     [f"Truncate b{n} to offset {want} (spec.rules.truncation_offset, fixes: "
                      f"{', '.join(sorted(p.fixes))})"])
            _apply_truncate(r, off)
            _candidate_complete(p, n, r, ev, res)
            return True
    _apply_truncate(r, off)
    _candidate_complete(p, n, r, ev, res)
    return False


def _doomed(p: _Partition, n: int) -> bool:
    """The model's durability exemption (per record, spec/invariants.py): committed records every
    holder lost to power loss need not survive. Approximated per partition: after a power loss,
    when no other replica holds the whole committed prefix."""
    return p.power_loss and not any(len(x.log) >= p.exposed for b, x in p.reps.items() if b != n)


def _candidate_complete(p: _Partition, n: int, r: _Replica, ev: dict, res: Result) -> None:
    """LeaderCandidateCompleteness (spec/invariants.py) on the mapped state after a truncation:
    an ISR member, electable as leader, must hold every committed record. Power loss is the
    model's durability exemption, so it is not asked after one."""
    ld = p.reps.get(r.leader)
    if r.role != FOLLOWER or ld is None or n not in ld.isr or len(r.log) >= p.exposed or _doomed(p, n):
        return
    _div(res, p, ev, f"ISR member {n} truncated to {len(r.log)}, below the high watermark {p.exposed} a "
                     "leader exposed: it could be elected but lacks committed records (LeaderCandidateCompleteness)",
         [f"keep offsets < {p.exposed} (truncate by leader epoch: KIP-101)"], "invariant")


def _apply_truncate(r: _Replica, off: int) -> None:
    del r.log[off:]
    if off > len(r.log):      # log_start: the log restarts at `off`
        r.log += [-1] * (off - len(r.log))
    r.cache = R.cache_truncate(r.cache, off)
    if r.hw is not None:
        r.hw = min(r.hw, len(r.log))


def _hw(p: _Partition, n: int, r: _Replica, ev: dict, res: Result) -> bool:
    hw = int(ev["hw"])
    if hw > len(r.log):
        _div(res, p, ev, f"broker {n} set its HW to {hw}, above its log end {len(r.log)} (HwBelowLeo)",
             [f"HW <= {len(r.log)}"], "invariant")
    if ev.get("role") != "follower" and r.role == LEADER:
        if "min-isr-hw" in p.fixes and len(r.isr) < p.min_insync and r.hw is not None and hw > r.hw:
            _div(res, p, ev, f"leader {n} advanced its HW to {hw} with ISR {sorted(r.isr)} below "
                             f"min.insync.replicas {p.min_insync}", ["no HW advance under min ISR (min-isr-hw)"])
        if "maximal-isr" in p.fixes:
            lag = [(b, len(p.reps[b].log)) for b in sorted(r.isr | (r.pending or frozenset()))
                   if b != n and b in p.reps and -1 not in p.reps[b].log and len(p.reps[b].log) < hw]
            if lag:
                b, leo = lag[0]
                _div(res, p, ev, f"leader {n} advanced its HW to {hw}, past ISR member {b} whose log ends at {leo}",
                     [f"HW <= {leo} (spec.rules.leader_hw over the maximal ISR)"])
        p.exposed = max(p.exposed, hw)
    r.hw = hw
    return True


def _truncate_on_become_follower(p: _Partition, n: int, r: _Replica, ev: dict, le: int, leader: int,
                                 res: Result) -> None:
    """The follower's decision to truncate before fetching (KAFKA-7164, `truncate-on-epoch-change`):
    spec.rules.must_truncate_on_become_follower of the mapped replica before the LeaderAndIsr."""
    want = R.must_truncate_on_become_follower(r.model(n), leader, le, p.fixes)
    if bool(ev["truncate"]) != want:
        what = "kept its log without truncating" if want else "scheduled a truncation"
        _div(res, p, ev, f"follower {n} {what} on becoming follower of {leader} in epoch {le} (it followed "
                         f"{r.leader} in epoch {r.le}); the model's rule says truncate={want}",
             [f"BecomeFollower b{n} with truncate={want} (spec.rules.must_truncate_on_become_follower; "
              f"KAFKA-7164 truncate-on-epoch-change {'on' if 'truncate-on-epoch-change' in p.fixes else 'off'})"])


def _lockstep_truncate(p: _Partition, n: int, r: _Replica, ev: dict, res: Result) -> None:
    """Lockstep refinement of the follower's whole truncation (one or more OffsetsForLeaderEpoch
    rounds, or the HW rule, or nothing to cut): the model's own Truncate step (spec.model.step)
    from the follower as it became follower and the leader as it is now must leave the log the
    broker has. Not judged when a log holds offsets the trace never saw written, or the rule
    needs a follower HW that a restart left unknown."""
    pre = p.pre_trunc.pop(n, None)
    ld = p.reps.get(r.leader)
    if pre is None or ld is None or ld.role != LEADER or -1 in pre.log or -1 in ld.log:
        return
    from spec.model import Action, step
    from spec.state import initial
    nodes = max(max(p.reps), n, r.leader) + 1
    cfg = _lockstep_config(p.fixes, nodes)
    brokers = [p.reps[b].model(b) if b in p.reps else _Replica().model(b) for b in range(nodes)]
    wants = set()
    # an unknown follower HW (after a restart): judged only if the step does not depend on it
    for hw in ((pre.hw,) if pre.hw is not None else (0, len(pre.log))):
        brokers[n] = pre.model(n)._replace(trunc=True, hw=hw)
        st = initial(cfg)._replace(brokers=tuple(brokers))
        wants.add(len(step(cfg, st, Action("Truncate", n)).brokers[n].log))
    if len(wants) > 1:
        return
    want = wants.pop()
    if want != len(r.log):
        _div(res, p, ev, f"follower {n} ended its truncation with log end {len(r.log)}; the model's Truncate "
                         f"step from log end {len(pre.log)} (epochs {list(pre.cache)}) against leader "
                         f"{r.leader} (epochs {list(ld.cache)}, log end {len(ld.log)}) leaves {want}",
             [f"Truncate b{n} -> log end {want} (spec.model.step; fixes: {', '.join(sorted(p.fixes))})"])


_LOCKSTEP_CONFIGS: dict = {}


def _lockstep_config(fixes: frozenset, brokers: int):
    from spec.config import Config
    key = (fixes, brokers)
    if key not in _LOCKSTEP_CONFIGS:
        _LOCKSTEP_CONFIGS[key] = Config(generation="current", fixes=fixes, brokers=brokers)
    return _LOCKSTEP_CONFIGS[key]


def _isr_proposed(p: _Partition, n: int, r: _Replica, ev: dict, res: Result) -> bool:
    """ISR expansion (spec.rules.may_join_isr): each added member's position, as the leader saw
    it, must have reached the leader's HW and, with KAFKA-7128 (`isr-expand-epoch-start`), the
    start of the leader's current epoch in the mapped epoch cache."""
    if r.role != LEADER or int(ev["leader_epoch"]) != r.le:
        return False
    r.pending = frozenset(ev["isr"])
    if r.hw is None or -1 in r.log:
        return True
    ld = r.model(n)
    for b, pos in sorted(ev.get("positions", {}).items(), key=lambda kv: int(kv[0])):
        if not R.may_join_isr(ld, int(pos), p.fixes):
            start = ld.cache[-1][1] if ld.cache else 0
            _div(res, p, ev, f"leader {n} proposed broker {b} for the ISR at position {pos}, below "
                             f"{'its HW ' + str(ld.hw) if int(pos) < ld.hw else 'the start offset ' + str(start) + ' of its epoch ' + str(r.le)}",
                 [f"add b{b} only at a position >= max(HW {ld.hw}, epoch start {start}) "
                  "(spec.rules.may_join_isr; KAFKA-7128 isr-expand-epoch-start)"])
    return True


def _isr_additions_eligible(p: _Partition, n: int, ev: dict, res: Result) -> None:
    """KIP-903 (`isr-broker-epoch`): a committed ISR expansion (the model's compare-and-set of the
    proposal, spec.model._commit_isr_proposal) admits each added member only if the broker epoch
    it fetched with is its registration's at the commit (spec.rules.isr_addition_valid). The
    broker traces both (`broker_epochs`, `current_broker_epochs`); older traces carry neither."""
    fetched, current = ev.get("broker_epochs") or {}, ev.get("current_broker_epochs") or {}
    for b in sorted(fetched, key=int):
        got, now = int(fetched[b]), int(current.get(b, -1))
        if not R.isr_addition_valid(got, now if now >= 0 else 0, p.fixes):
            _div(res, p, ev, f"leader {n} committed broker {b} into the ISR on a fetch made with broker epoch "
                             f"{got}, but broker {b} is registered with epoch {now} now: a replica that "
                             "registered anew (e.g. with an empty disk) joined on its previous incarnation's "
                             "fetch state",
                 [f"refuse b{b} (INELIGIBLE_REPLICA) until it fetches with epoch {now} "
                  "(spec.rules.isr_addition_valid; KIP-903 isr-broker-epoch)"])


def _epoch_answered(p: _Partition, n: int, r: _Replica, ev: dict, res: Result) -> bool:
    """The leader's OffsetsForLeaderEpoch answer against the model's: with KIP-279
    (`epoch-end-offset`) spec.rules.epoch_end_offset (largest epoch <= the requested one, and its
    end); before it, the requested epoch with spec.rules.end_offset_for."""
    if r.role != LEADER or -1 in r.log:
        return False
    req, ep, end = int(ev["requested_epoch"]), int(ev["leader_epoch"]), int(ev["end_offset"])
    if "epoch-end-offset" in p.fixes:
        want = R.epoch_end_offset(r.cache, len(r.log), req)
        rule = "spec.rules.epoch_end_offset (KIP-279 epoch-end-offset)"
    else:
        off = R.end_offset_for(r.cache, len(r.log), req)
        want = (req if off != R.UNDEFINED else R.UNDEFINED, off)
        rule = "spec.rules.end_offset_for (KIP-101)"
    if (ep, end) != want:
        _div(res, p, ev, f"leader {n} answered OffsetsForLeaderEpoch({req}) with epoch {ep} ending at {end}; "
                         f"the model's leader (epoch cache {list(r.cache)}, log end {len(r.log)}) answers "
                         f"epoch {want[0]} ending at {want[1]}",
             [f"answer ({want[0]}, {want[1]}) ({rule})"])
    return True


def _stale_epoch_request(p: _Partition, n: int, r: _Replica, ev: dict, res: Result) -> bool:
    """A replica request of another leader epoch (spec.rules.fetch_epoch_accepted, KIP-320
    `fetch-epoch-fencing`): with the fix it must be refused, without it served."""
    fencing = "fetch-epoch-fencing" in p.fixes
    served = int(ev["error_code"]) == 0
    if served == fencing:
        _div(res, p, ev, f"leader {n} (epoch {ev['leader_epoch']}) {'served' if served else 'refused'} a "
                         f"{ev['request']} of replica {ev['replica']} carrying epoch {ev['request_epoch']}",
             [f"{'refuse it with FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH' if fencing else 'serve it'} "
              f"(spec.rules.fetch_epoch_accepted; KIP-320 fetch-epoch-fencing {'on' if fencing else 'off'})"])
    return True


def read_events(paths: Iterable[str | Path]) -> list[dict]:
    """The event records of broker trace files, merged by timestamp (stable per file). A torn
    last line (the broker was killed mid-write) ends that file: the event never completed."""
    from traces.trace import TraceError, iter_records
    evs: list[tuple[float, int, int, dict]] = []
    for k, path in enumerate(paths):
        try:
            for j, rec in iter_records(path):
                if rec.get("kind") == "event":
                    evs.append((float(rec["ts_ms"]), k, j, rec))
        except TraceError as e:
            if "truncated line" not in e.message:
                raise
    return [e for *_, e in sorted(evs, key=lambda x: (x[0], x[1], x[2]))]


def check_traces(paths: Iterable[str | Path], generation: str, without: Iterable[str] = (),
                 min_insync: int | dict[str, int] = 1) -> list[Divergence]:
    return check_events(read_events(paths), generation, without, min_insync).divergences


def main(argv: list[str] | None = None) -> int:
    """python -m checkers.conformance GENERATION TRACE... : divergences as JSON lines; exit 0/1/3."""
    import sys
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 2:
        print("usage: python -m checkers.conformance GENERATION TRACE...", file=sys.stderr)
        return 3
    r = check_events(read_events(argv[1:]), argv[0])
    for d in r.divergences:
        print(json.dumps(d.to_json(), sort_keys=True))
    print(json.dumps({"events": r.events, "mapped": r.mapped, "unmapped": r.unmapped,
                      "divergences": len(r.divergences)}, sort_keys=True), file=sys.stderr)
    return 1 if r.divergences else 0


if __name__ == "__main__":
    raise SystemExit(main())


# broker event type -> the check of that event against its spec rule
_RULE_CHECKS = {
    "isr_proposed": _isr_proposed,
    "epoch_answered": _epoch_answered,
    "stale_epoch_request": _stale_epoch_request,
    "appended": _appended,
    "truncated": _truncated,
    "hw_advanced": _hw,
}
