"""One partition replica on this broker (Kafka's Partition): its role, leader epoch, ISR, high
watermark, the followers' positions and the delayed acks=all produces waiting on the HW.

Owns the decisions about that state, each through its rule in impl/rules.py: taking a
LeaderAndIsr entry (becoming leader or follower, whether to truncate), the leader's HW advance
and the acks=all answers it releases, a follower's fetch state as the leader sees it, a
follower's truncation, appends of fetched data and HW. No sockets, no coordination store, no
tasks: the replica fetcher (impl/fetcher.py), the ISR manager (impl/isr.py) and the broker shell
(impl/broker.py) perform the I/O; the trace events go to the `event` sink given at creation.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Callable

from impl import rules
from impl.protocol import codec
from impl.storage.batch import CorruptBatch
from impl.storage.log import PartitionLog

log = logging.getLogger("impl.broker")

EventSink = Callable[..., None]     # event(type, **fields): one trace event


def _no_event(etype: str, **fields) -> None:
    pass


class Partition:
    def __init__(self, topic: str, index: int, plog: PartitionLog, node_id: int = -1,
                 fixes: frozenset[str] = frozenset(), event: EventSink = _no_event):
        self.topic, self.index, self.log = topic, index, plog
        self.node_id, self.fixes, self.event = node_id, fixes, event
        self.role: str | None = None
        self.leader: int | None = None
        self.leader_epoch = -1
        self.isr: set[int] = set()
        self.maximal_isr: set[int] = set()
        self.replicas: list[int] = []
        self.zk_version = -1
        self.leader_broker_epoch = -1       # the leader's broker epoch kept with the partition state
        self.min_insync = 1
        self.hw = plog.checkpointed_hw
        self.follower_leo: dict[int, int] = {}
        self.last_caught_up: dict[int, float] = {}
        self.last_fetch: dict[int, tuple[float, int]] = {}   # replica -> (time, leader LEO then)
        # replica -> the broker epoch it fetched with (KIP-903): its registration as this leader
        # knew it when the fetch arrived (our Fetch v12 has no ReplicaState.ReplicaEpoch field)
        self.fetch_broker_epoch: dict[int, int] = {}
        self.delayed: list[tuple[int, asyncio.Future]] = []
        self.waiters: list[asyncio.Future] = []       # replica fetches: woken by appends
        self.hw_waiters: list[asyncio.Future] = []    # consumer fetches: woken by HW advances
        self.isr_inflight = False
        self.needs_truncation = False
        self.fetcher: asyncio.Task | None = None      # the follower's fetch task (the shell's)

    def notify(self) -> None:
        """New data: wake replica fetches. Kafka completes a delayed replica fetch on bytes, not
        on an HW change, so followers learn a new HW only with their next fetch response."""
        ws, self.waiters = self.waiters, []
        for w in ws:
            if not w.done():
                w.set_result(None)

    def notify_hw(self) -> None:
        ws, self.hw_waiters = self.hw_waiters, []
        for w in ws:
            if not w.done():
                w.set_result(None)

    # --- LeaderAndIsr ---------------------------------------------------------------------------
    def apply_state(self, e: dict) -> tuple[int | None, int]:
        """Take a LeaderAndIsr entry's fields; returns the (leader, leader epoch) before it."""
        old = (self.leader, self.leader_epoch)
        self.leader, self.leader_epoch = int(e["leader"]), int(e["leader_epoch"])
        self.isr = set(e["isr"])
        self.maximal_isr = set(self.isr)
        self.replicas = list(e.get("replicas", self.replicas))
        self.zk_version = int(e.get("zk_version", -1))
        self.leader_broker_epoch = int(e.get("leader_broker_epoch", -1))
        self.min_insync = int(e.get("min_insync", 1))
        return old

    def become_leader(self, e: dict, now_ms: float) -> None:
        """Lead from now on (the caller has stopped any fetcher): a new epoch starts at our LEO,
        every follower counts as caught up now and at an unknown position."""
        self.apply_state(e)
        self.role = "leader"
        self.isr_inflight = False
        self.log.epochs.assign(self.leader_epoch, self.log.leo)
        self.follower_leo = {r: -1 for r in self.replicas if r != self.node_id}
        self.last_caught_up = {r: now_ms for r in self.replicas if r != self.node_id}
        self.last_fetch = {}
        self.fetch_broker_epoch = {}
        self.event("became_leader", topic=self.topic, partition=self.index, leader_epoch=self.leader_epoch,
                   isr=sorted(self.isr), log_end_offset=self.log.leo, hw=self.hw)
        self.update_hw()
        self.notify()
        self.notify_hw()

    def become_follower(self, e: dict, had_fetcher: bool) -> None:
        """Follow `e`'s leader: pending acks=all produces fail (NOT_LEADER_OR_FOLLOWER); the
        truncation rule decides whether the (new) fetcher truncates first. A replica that had no
        fetcher running -- it was not a follower, or just started -- always truncates."""
        old_leader, old_epoch = self.apply_state(e)
        if self.role == "leader":
            old_leader = self.node_id
        self.role = "follower"
        for _, fut in self.delayed:
            if not fut.done():
                fut.set_result(codec.NOT_LEADER_OR_FOLLOWER)
        self.delayed = []
        if rules.must_truncate_on_become_follower(old_leader, self.leader, old_epoch, self.leader_epoch,
                                                  self.fixes) or not had_fetcher:
            self.needs_truncation = True
        self.event("became_follower", topic=self.topic, partition=self.index, leader_epoch=self.leader_epoch,
                   leader=self.leader, truncate=self.needs_truncation)
        self.notify()
        self.notify_hw()

    # --- leader ---------------------------------------------------------------------------------
    def produce_allowed(self, acks: int) -> bool:
        return rules.produce_allowed(self.isr, acks, self.min_insync)

    def update_hw(self) -> None:
        """Advance the leader's HW by the HW rule; release the acks=all produces it passed and
        wake consumer fetches."""
        if self.role != "leader":
            return
        leos = {r: max(v, 0) for r, v in self.follower_leo.items()}
        new = rules.leader_hw(self.hw, self.log.leo, leos, self.node_id, self.isr, self.maximal_isr,
                              self.min_insync, self.fixes)
        if new > self.hw:
            self.hw = new
            self.log.producers.on_high_watermark(new)
            self.event("hw_advanced", topic=self.topic, partition=self.index, hw=new)
            self.complete_delayed()
            self.notify_hw()

    def complete_delayed(self) -> None:
        """Answer each acks=all produce whose last offset the HW passed."""
        keep = []
        for last, fut in self.delayed:
            if fut.done():
                continue
            if last < self.hw:
                fut.set_result(0 if rules.ack_succeeds(self.isr, self.min_insync)
                               else codec.NOT_ENOUGH_REPLICAS_AFTER_APPEND)
            else:
                keep.append((last, fut))
        self.delayed = keep

    def lso(self) -> int:
        """The last stable offset (rules.last_stable_offset over the producer state at our HW)."""
        return rules.last_stable_offset(self.log.producers.unstable_first_offsets(self.hw), self.hw)

    def fetch_epoch_error(self, request_epoch: int) -> int:
        """KIP-320 fencing of a Fetch / ListOffsets / OffsetsForLeaderEpoch (0 = served)."""
        return rules.fetch_epoch_error(request_epoch, self.leader_epoch, self.fixes)

    def record_follower_fetch(self, replica: int, fetch_offset: int, leader_leo: int, now_ms: float,
                              broker_epoch: int) -> bool:
        """The follower's fetch offset is its LEO. It is caught up at this fetch if it reached our
        LEO, or at its previous fetch if it has now reached what our LEO was then (Kafka's
        Replica.updateFetchState). False for a fetch from a replica not assigned here (not
        counted)."""
        if replica not in self.replicas:
            return False
        self.follower_leo[replica] = fetch_offset
        self.fetch_broker_epoch[replica] = broker_epoch
        if fetch_offset >= leader_leo:
            self.last_caught_up[replica] = now_ms
        else:
            prev = self.last_fetch.get(replica)
            if prev and fetch_offset >= prev[1]:
                self.last_caught_up[replica] = max(self.last_caught_up.get(replica, 0), prev[0])
        self.last_fetch[replica] = (now_ms, leader_leo)
        return True

    # --- follower -------------------------------------------------------------------------------
    def fetches_for(self, epoch: int) -> bool:
        """Is a fetcher started at leader epoch `epoch` still the partition's? (A new leader comes
        with a new epoch.) Checked after every await, before acting on the log. A superseded
        fetcher's task is cancelled (a new LeaderAndIsr; the topic deleted and its log closed),
        but Python 3.11's asyncio.wait_for returns the inner result and drops the cancellation
        when both land in the same loop iteration, so a cancelled fetcher can resume once with an
        answer from the old leader."""
        return self.role == "follower" and self.leader_epoch == epoch

    def truncate(self, offset: int, reason: str) -> None:
        if offset < self.log.leo:
            self.log.truncate_to(offset)
            self.event("truncated", topic=self.topic, partition=self.index, offset=self.log.leo, reason=reason)
        self.hw = min(self.hw, self.log.leo)

    def truncation_round(self, requested_epoch: int, leader_epoch: int, leader_end_offset: int) -> bool:
        """Truncate by one OffsetsForLeaderEpoch answer (the truncation rule); True when done."""
        local = (self.log.epochs.end_offset_for(leader_epoch, self.log.leo) if leader_epoch >= 0
                 else (-1, -1))
        off, done = rules.truncation_offset(self.log.leo, self.hw, requested_epoch, leader_epoch,
                                            leader_end_offset, local, self.fixes)
        self.truncate(off, "leader_epoch")
        return done

    def truncate_by_hw(self) -> None:
        """The truncation rule without `epoch-truncation`: no question to the leader."""
        off, _ = rules.truncation_offset(self.log.leo, self.hw, -1, -1, -1, (-1, -1), self.fixes)
        self.truncate(off, "hw")

    def truncation_done(self, epoch: int) -> None:
        # the model's Truncate step ends here, whether or not it cut anything
        self.needs_truncation = False
        self.event("truncation_done", topic=self.topic, partition=self.index,
                   log_end_offset=self.log.leo, leader_epoch=epoch)

    def append_fetched(self, records: bytes) -> bool:
        """Append what the leader sent (already at our LEO); one event per leader epoch, as a
        fetched range may span several. Bad data is logged and dropped (fetched again): False,
        and the response's HW is not taken either."""
        try:
            res = self.log.append_as_follower(records)
        except CorruptBatch as e:
            log.warning("follower %s-%d: bad fetched data: %s", self.topic, self.index, e)
            return False
        if res:
            for lo, hi, e in epoch_runs(self.log.epochs.entries, res[0], res[1]):
                self.event("appended", topic=self.topic, partition=self.index, base_offset=lo,
                           last_offset=hi, leader_epoch=e, role="follower")
        return True

    def take_leader_hw(self, leader_hw: int) -> None:
        """A follower's HW from a fetch response (follower_high_watermark)."""
        new_hw = rules.follower_high_watermark(leader_hw, self.log.leo)
        if new_hw != self.hw:
            # a follower's HW is not monotonic (a new leader may carry a lower one); a decrease
            # is traced with the same type and "lowered": true (no separate type in the schema)
            extra = {"lowered": True} if new_hw < self.hw else {}
            self.hw = new_hw
            self.log.producers.on_high_watermark(new_hw)
            self.event("hw_advanced", topic=self.topic, partition=self.index, hw=new_hw, role="follower", **extra)

    def out_of_range(self, leader_leo: int) -> bool:
        """Pre-KIP-101 behaviour kept in all generations: our LEO is past the leader's: truncate
        to it. False when that is not the case (the caller then asks for the log start)."""
        if self.log.leo > leader_leo >= 0:
            self.truncate(leader_leo, "leader_log_end")
            return True
        return False

    def restart_at_log_start(self, start: int) -> None:
        """Below the leader's log start: drop everything and start there."""
        if self.log.leo < start:
            self.log.truncate_fully_and_start_at(start)
            self.event("truncated", topic=self.topic, partition=self.index, offset=start, reason="log_start")


def epoch_runs(entries: list, base: int, last: int) -> list[tuple[int, int, int]]:
    """The offsets base..last split by the leader-epoch cache `entries` ((epoch, start) by
    start): [(first, last, epoch), ...]."""
    out = []
    for k, (e, start) in enumerate(entries):
        end = entries[k + 1][1] - 1 if k + 1 < len(entries) else last
        lo, hi = max(start, base), min(end, last)
        if lo <= hi:
            out.append((lo, hi, e))
    return out
