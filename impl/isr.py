"""ISR management on the leader (Kafka's Partition.maybeShrinkIsr / maybeExpandIsr and the
AlterPartition manager): when to propose a shrink (a follower lagging past
replica.lag.time.max.ms) or an expansion (a follower caught up), what the leader acts on while a
proposal is in flight (KIP-497's maximal ISR), which added members are ineligible (KIP-903), and
what a committed or failed proposal leaves.

The write itself -- a compare-and-set of the partition state node, Kafka's pre-2.7 ZooKeeper
design -- is I/O: `write(partition, leader_epoch, new_isr, fetched_broker_epochs)` is called to
start it (impl/broker_coordination.py in the broker; a recorder in tests), and whoever performs it
reports back through `ineligible` (before writing) and `write_done` (after).
"""
from __future__ import annotations

from typing import Callable, Iterable, Mapping

from impl import rules
from impl.partition import Partition

IsrWrite = Callable[[Partition, int, set, dict], object]


class IsrManager:
    def __init__(self, node_id: int, fixes: frozenset[str], lag_max_ms: int,
                 broker_epoch_of: Callable[[int], int], write: IsrWrite):
        self.node_id, self.fixes, self.lag_max_ms = node_id, fixes, lag_max_ms
        self.broker_epoch_of = broker_epoch_of     # a broker's newest known registration epoch (-1: none)
        self.write = write

    def maybe_shrink(self, p: Partition, now_ms: float) -> None:
        """Propose dropping the followers not caught up within replica.lag.time.max.ms."""
        if p.isr_inflight:
            return
        lagging = rules.out_of_sync(now_ms, p.last_caught_up, p.isr, self.node_id, self.lag_max_ms)
        if lagging:
            self.propose(p, p.isr - lagging)

    def maybe_expand(self, p: Partition, replica: int) -> None:
        """Propose adding `replica` once it may join (may_join_isr)."""
        if p.isr_inflight or replica in p.isr or replica not in p.replicas:
            return
        start = p.log.epochs.start_offset_of(p.leader_epoch)
        if rules.may_join_isr(p.follower_leo.get(replica, -1), p.hw, start if start is not None else 0, self.fixes):
            self.propose(p, p.isr | {replica})

    def propose(self, p: Partition, new_isr: set[int]) -> None:
        p.isr_inflight = True
        added = sorted(new_isr - p.isr)
        # KIP-903: each added member's broker epoch, the one it fetched with (AlterPartition's
        # BrokerState.BrokerEpoch); the write checks it against the member's registration
        fetched = {r: p.fetch_broker_epoch.get(r, -1) for r in added}
        # the inputs of the expansion rules, so conformance can judge each addition
        p.event("isr_proposed", topic=p.topic, partition=p.index, isr=sorted(new_isr),
                leader_epoch=p.leader_epoch, hw=p.hw,
                positions={str(r): p.follower_leo.get(r, -1) for r in added},
                broker_epochs={str(r): e for r, e in fetched.items()},
                current_broker_epochs={str(r): self.broker_epoch_of(r) for r in added})
        p.maximal_isr = rules.maximal_isr(p.isr, new_isr, self.fixes)
        if "maximal-isr" not in self.fixes:
            p.isr = set(new_isr)                  # pre-KIP-497: act before the write commits
        self.write(p, p.leader_epoch, set(new_isr), fetched)

    def ineligible(self, fetched: Mapping[int, int], current: Mapping[int, int]) -> list[int]:
        """Added members whose fetch was not made with their current registration
        (isr_addition_valid): the controller's INELIGIBLE_REPLICA check in Kafka; here the leader
        writes the ISR itself, so the writer makes it, against the store, before the write."""
        return [r for r in sorted(current) if not rules.isr_addition_valid(fetched[r], current[r], self.fixes)]

    def write_done(self, p: Partition, epoch: int, new_isr: set[int], ok: bool, fetched: Mapping[int, int],
                   current: Mapping[int, int], refused: Iterable[int]) -> None:
        """The write of `new_isr` at leader epoch `epoch` ended (committed if `ok`). Ignored when
        we no longer lead at that epoch (the controller's LeaderAndIsr has the final word)."""
        if not (p.role == "leader" and p.leader_epoch == epoch):
            return
        p.isr_inflight = False
        refused = list(refused)
        if ok:
            p.isr = set(new_isr)
            p.maximal_isr = set(new_isr)
            p.event("isr_changed", topic=p.topic, partition=p.index, isr=sorted(new_isr),
                    leader_epoch=epoch, **epochs_fields(fetched, current))
        else:
            p.maximal_isr = set(p.isr)
            extra = {"reason": "ineligible_replica", "ineligible": refused} if refused else {}
            p.event("isr_change_failed", topic=p.topic, partition=p.index, isr=sorted(p.isr),
                    leader_epoch=epoch, **extra, **epochs_fields(fetched, current))
        p.update_hw()
        p.complete_delayed()


def epochs_fields(fetched: Mapping[int, int], current: Mapping[int, int]) -> dict:
    """Trace fields of an ISR write that added members: the broker epoch each fetched with and
    its registration's at the write (KIP-903's inputs, judged by conformance)."""
    if not fetched:
        return {}
    return {"broker_epochs": {str(r): e for r, e in sorted(fetched.items())},
            "current_broker_epochs": {str(r): current.get(r, -1) for r in sorted(fetched)}}
