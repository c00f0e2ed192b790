"""State updates every transition module shares (spec/model.py for replication, spec/producer.py
and spec/group.py for the clients): replacing one element of a tuple, whether a broker serves,
a write's durability when unflushed-loss faults are off, and applying the HW rule on a leader.
Pure functions of immutable state, like the transitions that call them; the rules they apply
are spec/rules.py's."""
from __future__ import annotations

from spec import rules
from spec.config import Config
from spec.state import Broker, State


def replace_at(t: tuple, i: int, v) -> tuple:
    """t with element i replaced by v."""
    return t[:i] + (v,) + t[i + 1:]


def is_up(b: Broker) -> bool:
    """The broker runs and is not paused: it can act and answer."""
    return b.alive and not b.paused


def durable(cfg: Config, b: Broker) -> Broker:
    """Without unflushed-loss faults every write is as good as flushed (keeps the space small)."""
    return b if cfg.unflushed_loss else b._replace(flushed=len(b.log))


def advance_hw(cfg: Config, s: State, i: int) -> State:
    """Apply the HW rule on leader i; complete acks=all writes it passed; expose reads."""
    b = s.brokers[i]
    hw = rules.leader_hw(b, i, cfg.min_isr, cfg.fixes)
    if hw == b.hw:
        return s
    acked, pend = s.acked, b.pend_acks
    if pend:
        ok = rules.ack_succeeds(b, cfg.min_isr, cfg.fixes)
        for off in range(b.hw, hw):
            rbit = 1 << b.log[off][0]
            if pend & rbit:
                pend &= ~rbit
                if ok:
                    acked |= rbit
    exposed = s.exposed
    if hw > len(exposed):
        prefix = tuple(r for r, _ in b.log[:hw])
        if prefix[: len(exposed)] == exposed:
            exposed = prefix
    brokers = replace_at(s.brokers, i, b._replace(hw=hw, pend_acks=pend))
    return s._replace(brokers=brokers, acked=acked, exposed=exposed)
