"""The symbolic encoding of spec/'s replication transitions, for z3.

A state is a flat dict from field keys to values: Python ints/bools for a concrete state, z3
terms for a symbolic one (checkers/prove/sym.py makes one source text serve both). Logs and
leader-epoch caches are bounded sequences (a length plus fixed slots), sets of brokers are one
boolean per broker, in-flight LeaderAndIsr requests are K slots per destination.

Each action instance is (spec action kind, broker, argument) plus a guard and a successor
function. The protocol rules of spec/rules.py are re-encoded here, consulting the same fix
names from the same `Config` (spec/config.py's generation table, never copied).

What is encoded: Produce, FetchRequest, FetchResponse, Truncate, Flush, Crash (process crash,
power failure losing the unflushed suffix, and disk loss: the broker returns with an empty log
and epoch cache), Restart, ControllerElect, ControllerReact, ControllerAlterIsr,
AlterIsrResponse, ProposeShrink, Deliver, Lose, the synchronous ISR write of pre-AlterIsr
generations, pauses: Pause, Resume, SessionExpire, Reregister and ZombieElect (a paused broker
does nothing but resume, crash or lose its session; a deposed controller acts on its stale
cache), and the eligible-leader-replicas fix (KIP-966): the store's ELR, last known ELR and
unclean-shutdown registrations, elections from them, and unclean recovery's choice of the
longest log. Fields appear only when the config needs them (pauses: `paused`; ELR: the three
store sets), so formulas for other configs stay what they were. Bounds beyond the model's own:
a log holds at most `records` entries (each record is appended once), K in-flight requests per
broker and E leader epochs; a successor past those bounds sets the `oob` flag and is not taken.

With `producers`, the producers of spec/producer.py join (checkers/prove/producers.py: their
actions, state and rules); the implicit client's Produce is then off, and records in logs are
write ids, at most producers x records x (retries + 1) of them (or fewer if asked: `writes`).

Partition-state versions are kept as plain growing integers (spec renumbers them densely; only
equality and order matter, so the two agree up to an order-preserving renaming, which
`canon_versions` applies). Broker session numbers are kept normalised as spec keeps them.

The package, one module per area (each a mixin of `Encoding`, its guards and successor
functions named guard_<action> and apply_<action>):
  core.py            Encoding: the bounds, the action instances, guard / succ / succ_cases
  layout.py          the state's fields, shadows, the extended log, State <-> dict conversions
  logs.py            leader-epoch caches, the truncation rule, Produce, Flush
  high_watermark.py  the HW rule: maximal ISR, leader HW, acks=all completion, exposed prefix
  fetch.py           FetchRequest, FetchResponse, Truncate (follower actions)
  isr.py             ISR proposals: ProposeShrink, ControllerAlterIsr, AlterIsrResponse, ELR
  controller.py      ControllerElect, ControllerReact, ZombieElect, LeaderAndIsr Deliver / Lose
  faults.py          Crash (power failure, disk loss), Restart, Pause, Resume, SessionExpire,
                     Reregister
docs/rules.md maps each rule of spec/rules.py to the methods that encode it.
"""
from __future__ import annotations

from checkers.prove.encoding.core import ENCODED_KINDS, Encoding, supported
from checkers.prove.encoding.layout import BROKER_BOOL, BROKER_INT, G_INT, ZK_ELR, ZK_INT, Unsupported
from checkers.prove.instances import Branching, Inst

__all__ = ["BROKER_BOOL", "BROKER_INT", "ENCODED_KINDS", "G_INT", "ZK_ELR", "ZK_INT", "Branching",
           "Encoding", "Inst", "Unsupported", "supported"]
