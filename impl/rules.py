"""Every replication rule of the broker, in one place, each switchable by a named fix.

A protocol generation is a set of fix names (cumulative). impl/ keeps its own copy of this table:
it must not import spec/ (the model is an independent oracle). The functions here are pure: the
broker's asyncio shell gathers their inputs and performs what they decide.
"""
from __future__ import annotations

from typing import Iterable, Mapping

ALL_FIXES = ("controller-epoch-fencing", "epoch-truncation", "epoch-end-offset",
             "truncate-on-epoch-change", "fetch-epoch-fencing", "isr-expand-epoch-start",
             "maximal-isr", "min-isr-hw", "isr-broker-epoch")

_V010 = frozenset({"controller-epoch-fencing"})
_K101 = _V010 | {"epoch-truncation"}
_K279 = _K101 | {"epoch-end-offset"}
_K320 = _K279 | {"fetch-epoch-fencing", "truncate-on-epoch-change", "isr-expand-epoch-start"}
_CURRENT = _K320 | {"maximal-isr", "min-isr-hw", "isr-broker-epoch"}

GENERATIONS: dict[str, frozenset[str]] = {
    "v0.10": _V010, "kip-101": _K101, "kip-279": _K279, "kip-320": _K320, "current": _CURRENT,
}


def fixes_for(generation: str) -> frozenset[str]:
    try:
        return GENERATIONS[generation]
    except KeyError:
        raise ValueError(f"unknown generation {generation!r} (one of {', '.join(GENERATIONS)})") from None


def high_watermark(old_hw: int, leader_leo: int, replica_leos: Mapping[int, int], leader_id: int,
                   isr: Iterable[int], maximal_isr: Iterable[int], min_insync: int,
                   fixes: frozenset[str]) -> int:
    """Leader HW = min LEO over the ISR (never moving backwards on the leader).

    maximal-isr (KIP-497): use the ISR plus additions and minus nothing the controller has not yet
    confirmed, so an in-flight shrink cannot let the HW pass a replica still counted by the
    controller. min-isr-hw (KAFKA-15583): no advance while |ISR| < min.insync.replicas."""
    members = set(maximal_isr) if "maximal-isr" in fixes else set(isr)
    if "min-isr-hw" in fixes and len(set(isr)) < min_insync:
        return old_hw
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


def isr_member_eligible(fetched_epoch: int, current_epoch: int, fixes: frozenset[str]) -> bool:
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


def needs_truncation(old_leader: int | None, new_leader: int, old_epoch: int, new_epoch: int,
                     fixes: frozenset[str]) -> bool:
    """On LeaderAndIsr as follower: truncate when the leader changed; with
    truncate-on-epoch-change (KAFKA-7164) on every epoch change too."""
    if old_leader != new_leader:
        return True
    return "truncate-on-epoch-change" in fixes and new_epoch != old_epoch


def truncation_offset_by_hw(local_hw: int, local_leo: int) -> int:
    """Pre-KIP-101 rule: a follower truncates to its local (checkpointed) HW. This is the rule
    that loses acknowledged records (KIP-101 S1) and lets replicas diverge (S2)."""
    return min(local_hw, local_leo)


def truncation_step_by_epoch(local_leo: int, requested_epoch: int, leader_epoch: int,
                             leader_end_offset: int, local_end_for_leader_epoch: tuple[int, int],
                             local_hw: int, fixes: frozenset[str]) -> tuple[int, bool]:
    """One round of OffsetsForLeaderEpoch truncation (KIP-101; KIP-279 with epoch-end-offset).
    Returns (truncate-to offset, done). Not done = truncated to the end of a smaller local epoch,
    ask again with the new latest epoch (KIP-279)."""
    if leader_epoch < 0 or leader_end_offset < 0:
        return truncation_offset_by_hw(local_hw, local_leo), True   # leader knows no such epoch
    if "epoch-end-offset" not in fixes or leader_epoch == requested_epoch:
        return min(leader_end_offset, local_leo), True
    local_epoch, local_end = local_end_for_leader_epoch
    if local_epoch == leader_epoch:
        return min(leader_end_offset, local_end, local_leo), True
    return min(local_end if local_end >= 0 else 0, local_leo), False


def leader_epoch_answer(entries: list, leo: int, epoch: int, fixes: frozenset[str]) -> tuple[int, int]:
    """The leader's OffsetsForLeaderEpoch answer (LeaderEpochFileCache.endOffsetFor), from its
    epoch cache `entries` ((epoch, start) ascending): the latest epoch ends at the LEO; an older
    one at the start of the next higher epoch; (-1, -1) (UNDEFINED) when no epoch is higher.
    With epoch-end-offset (KIP-279) the answer names the largest epoch <= the requested one (or
    the requested one when it is below every cached epoch); before it (KIP-101, 0.11) the
    requested epoch, and UNDEFINED below the first cached epoch."""
    if not entries or epoch < 0:
        return -1, -1
    if epoch == entries[-1][0]:
        return epoch, leo
    higher = next((x for x in entries if x[0] > epoch), None)
    if higher is None:
        return -1, -1
    floor = [e for e, _ in entries if e <= epoch]
    if "epoch-end-offset" not in fixes:
        return (epoch, higher[1]) if floor else (-1, -1)
    return (floor[-1] if floor else epoch), higher[1]


def check_fetch_epoch(request_epoch: int, leader_epoch: int, fixes: frozenset[str]) -> int:
    """KIP-320 fencing of Fetch / OffsetsForLeaderEpoch: 0 ok, 74 FENCED_LEADER_EPOCH (stale),
    75 UNKNOWN_LEADER_EPOCH (newer than ours). -1 in the request means "no epoch": not checked."""
    if "fetch-epoch-fencing" not in fixes or request_epoch < 0:
        return 0
    if request_epoch < leader_epoch:
        return 74
    if request_epoch > leader_epoch:
        return 75
    return 0


def check_controller_epoch(request_epoch: int, newest_seen: int, fixes: frozenset[str]) -> bool:
    """Brokers reject control requests below the newest controller epoch seen
    (STALE_CONTROLLER_EPOCH; Kafka's KafkaController / KAFKA-1120 era zombie-controller fencing)."""
    if "controller-epoch-fencing" not in fixes:
        return True
    return request_epoch >= newest_seen


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


def accept_partition_state(current_epoch: int, new_epoch: int) -> bool:
    """A LeaderAndIsr entry applies only with a leader epoch above the current one."""
    return new_epoch > current_epoch
