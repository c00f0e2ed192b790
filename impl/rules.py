"""Every replication rule of the broker, in one place, each switchable by a named fix.

A protocol generation is a set of fix names (cumulative). impl/ keeps its own copy of this table:
it must not import spec/ (the model is an independent oracle). The functions here are pure: the
broker's asyncio shell gathers their inputs and performs what they decide.
"""
from __future__ import annotations

from typing import Iterable, Mapping

ALL_FIXES = ("controller-epoch-fencing", "epoch-truncation", "epoch-end-offset",
             "truncate-on-epoch-change", "fetch-epoch-fencing", "isr-expand-epoch-start",
             "maximal-isr", "min-isr-hw", "isr-broker-epoch",
             "txn-partition-verification", "txn-epoch-bump")

_V010 = frozenset({"controller-epoch-fencing"})
_K101 = _V010 | {"epoch-truncation"}
_K279 = _K101 | {"epoch-end-offset"}
_K320 = _K279 | {"fetch-epoch-fencing", "truncate-on-epoch-change", "isr-expand-epoch-start"}
_CURRENT = _K320 | {"maximal-isr", "min-isr-hw", "isr-broker-epoch", "txn-partition-verification"}
# Transaction version 2 (KIP-890 part 2, Kafka 4.0): an epoch bump at the end of every transaction.
_K966 = _CURRENT | {"txn-epoch-bump"}

GENERATIONS: dict[str, frozenset[str]] = {
    "v0.10": _V010, "kip-101": _K101, "kip-279": _K279, "kip-320": _K320, "current": _CURRENT,
    "kip-966": _K966,
}


def fixes_for(generation: str) -> frozenset[str]:
    try:
        return GENERATIONS[generation]
    except KeyError:
        raise ValueError(f"unknown generation {generation!r} (one of {', '.join(GENERATIONS)})") from None


# --- ISR and high watermark ----------------------------------------------------------------------

def maximal_isr(isr: Iterable[int], proposed: Iterable[int], fixes: frozenset[str]) -> set[int]:
    """The ISR the leader acts on while a proposal `proposed` is in flight (Partition.scala
    `partitionState.maximalIsr`). KIP-497 (`maximal-isr`): the union of the committed and the
    proposed ISR -- an addition counts at once, a removal only once committed. Without it the
    leader acts on the proposal itself before the write commits (the broker then also takes it
    as its ISR)."""
    if "maximal-isr" in fixes:
        return set(isr) | set(proposed)
    return set(proposed)


def hw_members(isr: Iterable[int], maximal: Iterable[int], fixes: frozenset[str]) -> set[int]:
    """The replicas whose LEOs bound the high watermark (Partition.maybeIncrementLeaderHW): with
    `maximal-isr` (KIP-497) the maximal ISR, so an in-flight shrink cannot let the HW pass a
    replica the controller still counts; before it the ISR."""
    return set(maximal) if "maximal-isr" in fixes else set(isr)


def hw_may_advance(isr: Iterable[int], min_insync: int, fixes: frozenset[str]) -> bool:
    """KAFKA-15583 (`min-isr-hw`): no high-watermark advance while the committed ISR is below
    min.insync.replicas (Partition.isUnderMinIsr)."""
    return "min-isr-hw" not in fixes or len(set(isr)) >= min_insync


def leader_hw(old_hw: int, leader_leo: int, replica_leos: Mapping[int, int], leader_id: int,
              isr: Iterable[int], maximal: Iterable[int], min_insync: int,
              fixes: frozenset[str]) -> int:
    """The HW rule: min LEO over the HW members (hw_members), never moving backwards on the
    leader, and not at all while hw_may_advance says no."""
    if not hw_may_advance(isr, min_insync, fixes):
        return old_hw
    members = hw_members(isr, maximal, fixes)
    leos = [leader_leo] + [replica_leos.get(r, 0) for r in sorted(members) if r != leader_id]
    return max(old_hw, min(leos))


def follower_high_watermark(leader_hw: int, follower_leo: int) -> int:
    """Follower HW = min(leader HW from the fetch response, own LEO); not monotonic (replication.md)."""
    return min(leader_hw, follower_leo)


def may_join_isr(follower_leo: int, leader_hw: int, epoch_start_offset: int, fixes: frozenset[str]) -> bool:
    """ISR expansion: the follower caught up to the HW; with isr-expand-epoch-start (KAFKA-7128)
    also to the start offset of the leader's current epoch."""
    if follower_leo < leader_hw:
        return False
    if "isr-expand-epoch-start" in fixes and follower_leo < epoch_start_offset:
        return False
    return True


def isr_addition_valid(fetched_epoch: int, current_epoch: int, fixes: frozenset[str]) -> bool:
    """KIP-903 (`isr-broker-epoch`, KAFKA-14139): an ISR expansion carries the broker epoch each
    added member fetched with; it is refused (INELIGIBLE_REPLICA) unless that is the member's
    current registration. A replica that registered anew since -- e.g. restarted with an empty
    disk -- must not join on the strength of its previous incarnation's fetch state. -1 (no
    registration known, or none now) is never eligible."""
    if "isr-broker-epoch" not in fixes:
        return True
    return current_epoch >= 0 and fetched_epoch == current_epoch


def out_of_sync(now_ms: float, last_caught_up_ms: Mapping[int, float], isr: Iterable[int],
                leader_id: int, lag_max_ms: int) -> set[int]:
    """ISR shrink candidates: followers not caught up within replica.lag.time.max.ms."""
    return {r for r in isr if r != leader_id and now_ms - last_caught_up_ms.get(r, 0) > lag_max_ms}


def produce_allowed(isr: Iterable[int], acks: int, min_insync: int) -> bool:
    """Partition.appendRecordsToLeader: an acks=all (-1) produce is refused with
    NOT_ENOUGH_REPLICAS, before appending, while the committed ISR is below
    min.insync.replicas."""
    return acks != -1 or len(set(isr)) >= min_insync


def ack_succeeds(isr: Iterable[int], min_insync: int) -> bool:
    """Partition.checkEnoughReplicasReachOffset: once the HW passed an acks=all write it is
    acknowledged only if the ISR still has min.insync.replicas members (else
    NOT_ENOUGH_REPLICAS_AFTER_APPEND). The broker counts the committed ISR here."""
    return len(set(isr)) >= min_insync


# --- truncation ----------------------------------------------------------------------------------

def must_truncate_on_become_follower(old_leader: int | None, new_leader: int, old_epoch: int,
                                     new_epoch: int, fixes: frozenset[str]) -> bool:
    """On LeaderAndIsr as follower: truncate when the leader changed; with
    truncate-on-epoch-change (KAFKA-7164) on every epoch change too. (The broker also truncates
    when it had no fetcher yet: the model's "was not a follower".)"""
    if old_leader != new_leader:
        return True
    return "truncate-on-epoch-change" in fixes and new_epoch != old_epoch


def truncation_offset(local_leo: int, local_hw: int, requested_epoch: int, leader_epoch: int,
                      leader_end_offset: int, local_end_for_leader_epoch: tuple[int, int],
                      fixes: frozenset[str]) -> tuple[int, bool]:
    """Where a follower truncates before fetching from a (new) leader
    (AbstractFetcherThread.getOffsetTruncationState), one OffsetsForLeaderEpoch round at a time:
    returns (truncate-to offset, done).

    Without `epoch-truncation` (pre-0.11) the leader is not asked: to the follower's own HW --
    the rule that loses acknowledged records (KIP-101 S1) and lets replicas diverge (S2). With it
    (KIP-101): to the leader's end offset for the follower's latest epoch, or to the HW when the
    leader knows no such epoch. With `epoch-end-offset` (KIP-279) the leader may answer a smaller
    epoch: the follower truncates to the smaller of that and its own end of that epoch, and if it
    does not have that epoch it truncates to the end of its largest smaller epoch and asks again
    (not done)."""
    if "epoch-truncation" not in fixes:
        return min(local_hw, local_leo), True
    if leader_epoch < 0 or leader_end_offset < 0:
        return min(local_hw, local_leo), True   # leader knows no such epoch
    if "epoch-end-offset" not in fixes or leader_epoch == requested_epoch:
        return min(leader_end_offset, local_leo), True
    local_epoch, local_end = local_end_for_leader_epoch
    if local_epoch == leader_epoch:
        return min(leader_end_offset, local_end, local_leo), True
    return min(local_end if local_end >= 0 else 0, local_leo), False


# --- leader epoch answers ------------------------------------------------------------------------

def end_offset_for(entries: list, leo: int, epoch: int) -> tuple[int, int]:
    """KIP-101's OffsetsForLeaderEpoch answer (Kafka 0.11 LeaderEpochFileCache.endOffsetFor),
    from the epoch cache `entries` ((epoch, start) ascending): the requested epoch with its end --
    the LEO for the latest epoch, else the start of the next higher epoch; (-1, -1) (UNDEFINED)
    for an epoch above every cached one or below the first."""
    if not entries or epoch < 0:
        return -1, -1
    if epoch == entries[-1][0]:
        return epoch, leo
    higher = next((x for x in entries if x[0] > epoch), None)
    if higher is None or epoch < entries[0][0]:
        return -1, -1
    return epoch, higher[1]


def epoch_end_offset(entries: list, leo: int, epoch: int) -> tuple[int, int]:
    """KIP-279's answer (`epoch-end-offset`, LeaderEpochFileCache.endOffsetFor since 2.0): the
    latest epoch ends at the LEO; otherwise the end is the start of the first higher epoch,
    paired with the largest epoch <= the requested one (or the requested one when it is below
    every cached epoch); (-1, -1) (UNDEFINED) when no epoch is higher."""
    if not entries or epoch < 0:
        return -1, -1
    if epoch == entries[-1][0]:
        return epoch, leo
    higher = next((x for x in entries if x[0] > epoch), None)
    if higher is None:
        return -1, -1
    floor = [e for e, _ in entries if e <= epoch]
    return (floor[-1] if floor else epoch), higher[1]


def leader_epoch_answer(entries: list, leo: int, epoch: int, fixes: frozenset[str]) -> tuple[int, int]:
    """The leader's OffsetsForLeaderEpoch answer in this generation: epoch_end_offset with
    `epoch-end-offset` (KIP-279), end_offset_for before it (KIP-101)."""
    if "epoch-end-offset" in fixes:
        return epoch_end_offset(entries, leo, epoch)
    return end_offset_for(entries, leo, epoch)


# --- fencing -------------------------------------------------------------------------------------

def fetch_epoch_accepted(request_epoch: int, leader_epoch: int, fixes: frozenset[str]) -> bool:
    """KIP-320 (`fetch-epoch-fencing`): Fetch and OffsetsForLeaderEpoch carry the follower's
    current leader epoch; the leader serves them only if it equals its own. -1 in the request
    means "no epoch" (clients, pre-KIP-320 followers): not checked."""
    return "fetch-epoch-fencing" not in fixes or request_epoch < 0 or request_epoch == leader_epoch


def fetch_epoch_error(request_epoch: int, leader_epoch: int, fixes: frozenset[str]) -> int:
    """The error code of fetch_epoch_accepted's answer: 0 served, 74 FENCED_LEADER_EPOCH (the
    request's epoch is stale), 75 UNKNOWN_LEADER_EPOCH (newer than ours)."""
    if fetch_epoch_accepted(request_epoch, leader_epoch, fixes):
        return 0
    return 74 if request_epoch < leader_epoch else 75


def controller_epoch_accepted(request_epoch: int, newest_seen: int, fixes: frozenset[str]) -> bool:
    """The controller-epoch half of control_request_accepted, checked once per request (a whole
    request refused with STALE_CONTROLLER_EPOCH): with `controller-epoch-fencing` brokers reject
    control requests below the newest controller epoch seen (KafkaController's zombie-controller
    fencing, KAFKA-1120 era)."""
    if "controller-epoch-fencing" not in fixes:
        return True
    return request_epoch >= newest_seen


def control_request_accepted(request_controller_epoch: int, newest_seen: int, current_leader_epoch: int,
                             new_leader_epoch: int, fixes: frozenset[str]) -> bool:
    """LeaderAndIsr acceptance for one partition: the controller epoch is not stale
    (controller_epoch_accepted) and the leader epoch is newer than the current one (else
    FENCED_LEADER_EPOCH for that partition)."""
    if not controller_epoch_accepted(request_controller_epoch, newest_seen, fixes):
        return False
    return new_leader_epoch > current_leader_epoch


def check_broker_epoch(request_epoch: int, own_epoch: int | None) -> bool:
    """KIP-380 (Kafka 2.2): a controller request carries the broker epoch of the registration it
    is addressed to; a broker refuses one meant for an earlier registration of its id
    (STALE_BROKER_EPOCH) -- after a quick restart the controller may not yet have handled the
    bounce, and the standing state it sends would make the new incarnation, with whatever log it
    recovered, lead or follow as if it had never gone. Before its own registration a broker
    knows no epoch and refuses every addressed request. -1 = the sender names none: not checked."""
    if request_epoch < 0:
        return True
    return own_epoch is not None and request_epoch >= own_epoch


# --- transactions: a partition leader's decisions -----------------------------------------------

def txn_needs_verification(ongoing_epoch: int, epoch: int, fixes: frozenset[str]) -> bool:
    """KIP-890 part 1 (`txn-partition-verification`): before a transactional append the leader
    asks the coordinator (AddPartitionsToTxn, verify-only) unless the producer already has an
    ongoing transaction of that epoch on this partition (UnifiedLog.hasOngoingTransaction;
    `ongoing_epoch` -1 when none). Without the fix it never asks, as Kafka before 3.6."""
    return "txn-partition-verification" in fixes and ongoing_epoch != epoch


def txn_produce_verdict(partition_epoch: int, epoch: int, verified: bool, fixes: frozenset[str]) -> str:
    """A data partition leader's check of a transactional batch (the model's rule of that name):
    - "fenced": an epoch below the producer epoch the partition knows
      (ProducerAppendInfo.checkProducerEpoch, INVALID_PRODUCER_EPOCH);
    - "unverified": with `txn-partition-verification`, unless the coordinator answered that the
      transaction is ongoing with that epoch and holds the partition, or the partition already
      has that transaction ongoing (`verified`);
    - "append" otherwise."""
    if epoch < partition_epoch:
        return "fenced"
    if "txn-partition-verification" in fixes and not verified:
        return "unverified"
    return "append"


def txn_marker_verdict(partition_epoch: int, open_epoch: int, last_coordinator_epoch: int,
                       epoch: int, coordinator_epoch: int, fixes: frozenset[str]) -> str:
    """A partition leader's check of one WriteTxnMarkers entry (ProducerAppendInfo.appendEndTxnMarker;
    the model's rule of that name):
    - "coordinator-fenced": a coordinator epoch older than the producer's last marker's
      (TRANSACTION_COORDINATOR_FENCED);
    - "fenced": an epoch below the producer's (INVALID_PRODUCER_EPOCH); with `txn-epoch-bump`
      (KIP-890 part 2) also an epoch not above the open transaction's batches: markers of
      transaction version 2 carry the bumped epoch, so an equal one is a late marker of an
      earlier transaction;
    - "append": the marker ends the producer's open transaction."""
    if coordinator_epoch < last_coordinator_epoch:
        return "coordinator-fenced"
    if epoch < partition_epoch:
        return "fenced"
    if "txn-epoch-bump" in fixes and open_epoch >= 0 and epoch <= open_epoch:
        return "fenced"
    return "append"


def marker_fixes(fixes: frozenset[str], transaction_version: int) -> frozenset[str]:
    """The fixes a marker is judged under: `txn-epoch-bump` (KIP-890 part 2) applies to markers
    of transaction version 2 (WriteTxnMarkers v2's TransactionVersion), as Kafka checks the
    bumped epoch only for those; a coordinator writing version 1 markers keeps the old check."""
    return fixes if transaction_version >= 2 else fixes - {"txn-epoch-bump"}


def last_stable_offset(unstable_first_offsets: Iterable[int], hw: int) -> int:
    """The LSO (UnifiedLog.lastStableOffset): the first offset of a transaction still unstable
    (ongoing, or completed with its marker not yet under the HW), if below the HW; else the HW."""
    return min([hw, *unstable_first_offsets])


def read_upper_bound(hw: int, lso: int, isolation_level: int) -> int:
    """How far a consumer's Fetch reads: read_committed (1) to the LSO, read_uncommitted (0) to
    the HW (FetchIsolation)."""
    return min(lso, hw) if isolation_level == 1 else hw


# --- the transaction coordinator (impl/txn_coordinator.py decides with these). States are
# Kafka's TransactionState ids: 0 Empty, 1 Ongoing, 2 PrepareCommit, 3 PrepareAbort,
# 4 CompleteCommit, 5 CompleteAbort. -------------------------------------------------------------

def txn_request_fenced(request_epoch: int, coordinator_epoch: int) -> bool:
    """TransactionCoordinator: a request of an older producer epoch than the coordinator's is a
    zombie's (PRODUCER_FENCED; INVALID_PRODUCER_EPOCH for older request versions)."""
    return request_epoch < coordinator_epoch


def txn_bump_fenced(request_epoch: int, coordinator_epoch: int, own_abort: bool) -> bool:
    """KIP-360's InitProducerId with the producer's current epoch: fenced unless it carries the
    coordinator's epoch or, after the coordinator itself aborted the producer's transaction with a
    bump, the epoch before it (TransactionMetadata.lastProducerEpoch)."""
    if own_abort and request_epoch == coordinator_epoch - 1:
        return False
    return request_epoch < coordinator_epoch


def txn_init_action(state: int) -> str:
    """handleInitProducerId on the id's state: "wait" while a transaction completes (Prepare*:
    CONCURRENT_TRANSACTIONS), "abort" an ongoing one first with the epoch bumped (the old
    instance is fenced; CONCURRENT_TRANSACTIONS meanwhile), otherwise "bump" the epoch."""
    if state in (2, 3):
        return "wait"
    return "abort" if state == 1 else "bump"


def txn_end_epoch(epoch: int, fixes: frozenset[str]) -> int:
    """The epoch of EndTxn's Prepare* record and markers: with `txn-epoch-bump` (KIP-890 part 2,
    transaction version 2) bumped at the end of every transaction; before, unchanged."""
    return epoch + 1 if "txn-epoch-bump" in fixes else epoch


def txn_end_answer(request_epoch: int, epoch: int, state: int, commit: bool, retry: bool,
                   fixes: frozenset[str]) -> str:
    """handleEndTransaction on the id's committed state: "prepare" (write Prepare*),
    "concurrent" (CONCURRENT_TRANSACTIONS), "done" (NONE: a retry of the EndTxn that decided it),
    "fenced" (PRODUCER_FENCED) or "invalid" (INVALID_TXN_STATE). Transaction version 1: the epoch
    must equal the coordinator's; Ongoing is prepared; Prepare* of the same decision is
    concurrent, Complete* of the same decision done, anything else invalid. Version 2
    (`txn-epoch-bump`): a retry carries the epoch before the bump its first attempt made, and
    an abort with the current epoch on Empty or Complete* writes a new PrepareAbort."""
    same = state in ((2, 4) if commit else (3, 5))
    bumped = "txn-epoch-bump" in fixes and retry and epoch == request_epoch + 1
    if txn_request_fenced(request_epoch, epoch) and not bumped or request_epoch > epoch:
        return "fenced"
    if bumped and state in (0, 1) or "txn-epoch-bump" in fixes and state in (2, 3) and not bumped:
        return "fenced"
    if state == 1:
        return "prepare"
    if state in (2, 3):
        return "concurrent" if same else "invalid"
    if "txn-epoch-bump" not in fixes or bumped:
        return "done" if same and state in (4, 5) else "invalid"
    return "invalid" if commit else "prepare"


def txn_partition_verified(coordinator_epoch: int, state: int, holds: bool, epoch: int) -> bool:
    """The coordinator's half of a partition leader's verification (AddPartitionsToTxn
    verify-only, KIP-890 part 1; the model's txn_produce_verdict with the coordinator's
    committed state): the transaction is Ongoing under that epoch and holds the partition."""
    return state == 1 and coordinator_epoch == epoch and holds
