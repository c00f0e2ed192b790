"""Invariants as named predicates. Each returns None when it holds, or one sentence saying how it
is violated. `scoped` invariants are durability promises Kafka makes only without unclean
election and without power failure: with unclean election on they are not checked, and after a
crash that lost unflushed writes they are not checked either (Kafka does not fsync by default;
an ISR whose last member loses power loses committed data — the gap KIP-966 closes). Log
matching and epoch uniqueness are checked always.
"""
from __future__ import annotations

from typing import Callable, NamedTuple

from spec import rules
from spec.config import Config
from spec.state import LEADER, State, bits


class Invariant(NamedTuple):
    name: str
    doc: str
    check: Callable[[Config, State], str | None]
    scoped: bool   # only meaningful without unclean election and unflushed-data loss


def _acting_leaders(s: State):
    """Brokers acting as the leader the coordination store names for the current epoch."""
    zk = s.zk
    for i, b in enumerate(s.brokers):
        if b.alive and b.role == LEADER and i == zk.leader and b.le == zk.le:
            yield i, b


def hw_below_leo(cfg: Config, s: State) -> str | None:
    for i, b in enumerate(s.brokers):
        if b.hw > b.leo:
            return f"b{i} has hw {b.hw} above its log end {b.leo}"
    return None


def log_matching(cfg: Config, s: State) -> str | None:
    """Replicas that have joined the current leader epoch (accepted it, and truncated if they had
    to) agree below both HWs. A replica still catching up on an epoch change may carry a stale HW
    for a moment; it is judged once it has truncated."""
    bs = s.brokers
    le = s.zk.le
    cur = [i for i, b in enumerate(bs) if b.alive and b.role != 0 and not b.trunc and b.le == le]
    for x, i in enumerate(cur):
        for j in cur[x + 1:]:
            upto = min(bs[i].hw, bs[j].hw)
            for off in range(upto):
                if bs[i].log[off] != bs[j].log[off]:
                    return (f"b{i} and b{j} disagree at offset {off} below both high watermarks: "
                            f"r{bs[i].log[off][0]} vs r{bs[j].log[off][0]}")
    return None


def acked_durable(cfg: Config, s: State) -> str | None:
    for i, b in _acting_leaders(s):
        have = 0
        for r, _ in b.log:
            have |= 1 << r
        missing = s.acked & ~have
        if missing:
            return (f"record(s) {', '.join(f'r{r}' for r in bits(missing))} acknowledged with "
                    f"acks=all are missing from the leader b{i} (epoch {b.le})")
    return None


def consistent_reads(cfg: Config, s: State) -> str | None:
    for i, b in enumerate(s.brokers):
        if not (b.alive and b.role == LEADER):
            continue
        upto = min(b.hw, len(s.exposed))
        for off in range(upto):
            if b.log[off][0] != s.exposed[off]:
                return (f"consumers read r{s.exposed[off]} at offset {off}, but leader b{i} now "
                        f"serves r{b.log[off][0]} there")
    return None


def min_isr_durability(cfg: Config, s: State) -> str | None:
    bs = s.brokers
    need = min(cfg.min_isr, cfg.brokers)
    for i, b in _acting_leaders(s):
        for off in range(b.hw):
            holders = sum(1 for o in bs if off < o.leo and o.log[off] == b.log[off])
            if holders < need:
                return (f"r{b.log[off][0]} at offset {off} is below leader b{i}'s high watermark "
                        f"but held by {holders} replica(s), fewer than min.insync.replicas={need}")
    return None


def unique_leader_per_epoch(cfg: Config, s: State) -> str | None:
    for e, m in enumerate(s.epoch_leaders):
        if rules.popcount(m) > 1:
            return f"brokers {', '.join(f'b{x}' for x in bits(m))} both acted as leader of epoch {e}"
    return None


INVARIANTS: tuple[Invariant, ...] = (
    Invariant("HwBelowLeo", "every replica's HW is at most its LEO", hw_below_leo, False),
    Invariant("LogMatching", "two replicas agree on every offset below both their HWs",
              log_matching, False),
    Invariant("UniqueLeaderPerEpoch", "at most one broker ever leads a given leader epoch",
              unique_leader_per_epoch, False),
    Invariant("AckedDurable", "the current leader holds every record acknowledged with acks=all",
              acked_durable, True),
    Invariant("ConsistentReads", "records exposed below a leader's HW never change",
              consistent_reads, True),
    Invariant("MinIsrDurability", "records below the leader's HW are on min.insync.replicas replicas",
              min_isr_durability, True),
)
INVARIANT_NAMES = tuple(inv.name for inv in INVARIANTS)


def active(cfg: Config) -> tuple[Invariant, ...]:
    """The invariants that must hold under this config (scoped ones drop out under unclean)."""
    return tuple(inv for inv in INVARIANTS if not (inv.scoped and cfg.unclean))


def violated(cfg: Config, s: State, invs: tuple[Invariant, ...] | None = None) -> tuple[str, str] | None:
    """First violated invariant as (name, sentence), or None."""
    for inv in invs if invs is not None else active(cfg):
        if inv.scoped and s.lossy:
            continue
        msg = inv.check(cfg, s)
        if msg is not None:
            return inv.name, msg
    return None


def step_violation(cfg: Config, s: State, t: State) -> tuple[str, str] | None:
    """MonotonicEpochs, a property of transitions: while a broker stays up, the leader epoch and
    controller epoch it has seen never decrease."""
    for i, (a, b) in enumerate(zip(s.brokers, t.brokers)):
        if a.alive and b.alive and a.gen == b.gen:
            if b.le < a.le:
                return "MonotonicEpochs", f"b{i}'s leader epoch went back from {a.le} to {b.le}"
            if b.ce < a.ce:
                return "MonotonicEpochs", f"b{i}'s controller epoch went back from {a.ce} to {b.ce}"
    return None
