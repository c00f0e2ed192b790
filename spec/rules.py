"""The protocol's rules, each in one function named after it, each switchable fix cited.

Transitions in spec/model.py call these and contain no protocol decisions of their own, so a
protocol generation is exactly the set of fixes these functions consult.
"""
from __future__ import annotations

from spec.state import FOLLOWER, Broker


def popcount(m: int) -> int:
    return bin(m).count("1")


# --- leader epoch cache -------------------------------------------------------------------------

def cache_assign(cache: tuple, epoch: int, start: int) -> tuple:
    """LeaderEpochFileCache.assign: record `epoch` starting at `start` if it is newer than the last."""
    if cache and cache[-1][0] >= epoch:
        return cache
    return cache + ((epoch, start),)


def cache_truncate(cache: tuple, end: int) -> tuple:
    """truncateFromEnd: drop entries whose start offset is at or beyond the new log end."""
    return tuple(e for e in cache if e[1] < end)


def end_offset_for(cache: tuple, leo: int, epoch: int) -> int:
    """KIP-101 OffsetsForLeaderEpoch answer: for the latest epoch, the LEO; otherwise the start
    offset of the first epoch above the requested one (LEO if there is none)."""
    for e, start in cache:
        if e > epoch:
            return start
    return leo


def epoch_end_offset(cache: tuple, leo: int, epoch: int) -> tuple[int, int]:
    """KIP-279 answer: (largest epoch <= requested, its end offset), or (-1, -1) if none."""
    best = -1
    for i, (e, _) in enumerate(cache):
        if e <= epoch:
            best = i
    if best < 0:
        return -1, -1
    e = cache[best][0]
    end = cache[best + 1][1] if best + 1 < len(cache) else leo
    return e, end


# --- truncation ----------------------------------------------------------------------------------

def truncation_offset(f: Broker, leader: Broker, fixes: frozenset) -> int:
    """Where a follower truncates its log before fetching from a (new) leader.

    Without `epoch-truncation` (pre-0.11): to its own high watermark — the KIP-101 data-loss and
    divergence bugs. With it (KIP-101): to the leader's end offset for the follower's last epoch.
    With `epoch-end-offset` (KIP-279): the leader answers (largest epoch <= requested, end); the
    follower truncates to the smaller of that and its own end of that epoch, and if it does not
    have that epoch it drops back to its own largest smaller epoch and asks again.
    """
    if "epoch-truncation" not in fixes or not f.cache:
        return min(f.hw, f.leo)
    if "epoch-end-offset" not in fixes:
        return min(f.leo, end_offset_for(leader.cache, leader.leo, f.cache[-1][0]))
    cache, leo = f.cache, f.leo
    for _ in range(len(f.cache) + 1):           # bounded: each round drops one local epoch
        if not cache:
            return 0
        e_req = cache[-1][0]
        e, end = epoch_end_offset(leader.cache, leader.leo, e_req)
        if e < 0:                               # leader knows no epoch this old
            return 0
        if e == e_req:
            return min(end, leo)
        # Leader's answer names an epoch we may not have: truncate to the end of our largest
        # epoch below the requested one, then ask again about that epoch.
        mine = [x for x in cache if x[0] <= e]
        if not mine:
            return 0
        idx = cache.index(mine[-1])
        own_end = cache[idx + 1][1] if idx + 1 < len(cache) else leo
        if mine[-1][0] == e:
            return min(end, own_end, leo)
        leo = min(leo, own_end)
        cache = cache[: idx + 1]
    return min(f.hw, f.leo)


def must_truncate_on_become_follower(prev: Broker, new_leader: int, new_epoch: int,
                                     fixes: frozenset) -> bool:
    """KAFKA-7164 (`truncate-on-epoch-change`): truncate on every leader-epoch change. Before the
    fix a follower truncated only when its leader changed (or when it was not a follower)."""
    if prev.role != FOLLOWER or prev.leader != new_leader or prev.trunc:
        return True
    return "truncate-on-epoch-change" in fixes and new_epoch != prev.le


# --- fencing -------------------------------------------------------------------------------------

def fetch_epoch_accepted(f: Broker, leader: Broker, fixes: frozenset) -> bool:
    """KIP-320 (`fetch-epoch-fencing`): Fetch and OffsetsForLeaderEpoch carry the follower's
    current leader epoch; the leader answers FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH unless it
    equals its own, so a follower that missed an epoch change is neither served nor counted."""
    return "fetch-epoch-fencing" not in fixes or f.le == leader.le


def control_request_accepted(b: Broker, ce: int, le: int, fixes: frozenset) -> bool:
    """LeaderAndIsr acceptance: with `controller-epoch-fencing` a request from an older controller
    epoch is rejected (STALE_CONTROLLER_EPOCH); the leader epoch must always be newer."""
    if "controller-epoch-fencing" in fixes and ce < b.ce:
        return False
    return le > b.le


# --- ISR and high watermark ----------------------------------------------------------------------

def hw_members(leader: Broker, fixes: frozenset) -> int:
    """The replicas whose positions bound the high watermark. KIP-497 (`maximal-isr`): while an
    ISR change is pending, the union of the confirmed and the proposed ISR (never fewer than the
    controller may elect from). Without it the leader acts on its proposal at once."""
    if leader.pending < 0:
        return leader.isr
    if "maximal-isr" in fixes:
        return leader.isr | leader.pending
    return leader.pending


def hw_may_advance(leader: Broker, min_isr: int, fixes: frozenset) -> bool:
    """KAFKA-15583 (`min-isr-hw`): no high-watermark advance while the ISR is below
    min.insync.replicas."""
    if "min-isr-hw" not in fixes:
        return True
    return popcount(hw_members(leader, fixes)) >= min_isr


def leader_hw(leader: Broker, me: int, min_isr: int, fixes: frozenset) -> int:
    """The HW rule: min LEO over the HW members, never decreasing on the leader."""
    if not hw_may_advance(leader, min_isr, fixes):
        return leader.hw
    hw = leader.leo
    for r, p in enumerate(leader.pos):
        if r != me and (hw_members(leader, fixes) >> r) & 1:
            if p < 0:
                return leader.hw
            hw = min(hw, p)
    return max(hw, leader.hw)


def may_join_isr(leader: Broker, position: int, fixes: frozenset) -> bool:
    """ISR expansion: the follower caught up to the HW, and with KAFKA-7128
    (`isr-expand-epoch-start`) also to the start offset of the leader's current epoch."""
    if position < leader.hw:
        return False
    if "isr-expand-epoch-start" in fixes and leader.cache:
        return position >= leader.cache[-1][1]
    return True


def produce_allowed(leader: Broker, acks: str, min_isr: int, fixes: frozenset) -> bool:
    """acks=all is refused with NOT_ENOUGH_REPLICAS while the ISR is below min.insync.replicas."""
    return acks != "all" or popcount(hw_members(leader, fixes)) >= min_isr


def ack_succeeds(leader: Broker, min_isr: int) -> bool:
    """An acks=all write whose offset the HW passed is acknowledged only if the confirmed ISR
    still has min.insync.replicas members (else NOT_ENOUGH_REPLICAS_AFTER_APPEND)."""
    return popcount(leader.isr) >= min_isr
