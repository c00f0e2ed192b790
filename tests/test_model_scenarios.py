"""Scripted scenarios for the fixes whose bugs need three replicas and schedules deeper than the
explorer exhausts in minutes (KAFKA-7128, KIP-320): with the fix removed the script ends in the
named violation (the same schedule is a golden trace in traces/corpus); with the fix present
the script is blocked at the step the fix forbids."""
import pytest

from spec import Model, make_config

BOUNDS = {"brokers": 3, "records": 2, "crashes": 3, "elections": 3, "losses": 0}

# (kind, broker, arg or None); a Deliver picks the message that makes `broker` the leader if any.
KAFKA_7128 = [
    ("Produce", 0, None), ("FetchRequest", 1, None), ("FetchResponse", 1, None),
    ("FetchRequest", 2, None), ("FetchResponse", 2, None), ("Produce", 0, None),
    ("ProposeShrink", 0, 2), ("ControllerAlterIsr", 2, 0), ("FetchRequest", 1, None),
    ("FetchResponse", 1, None), ("FetchRequest", 1, None),          # r0, r1 committed on b0, b1
    ("Crash", 0, 0), ("ControllerReact", 2, 1), ("Deliver", 1, None), ("Deliver", 2, None),
    ("Truncate", 2, None),
    ("FetchRequest", 2, None),            # b2 at offset 1 >= b1's stale HW 1: proposed for the ISR
    ("ControllerAlterIsr", 2, 1),         # <- blocked by isr-expand-epoch-start
    ("Crash", 1, 0), ("ControllerReact", 2, 2), ("Deliver", 2, None),
]
KIP_320 = [
    ("Produce", 0, None), ("FetchRequest", 2, None), ("FetchResponse", 2, None),
    ("Crash", 0, 0), ("ControllerReact", 2, 1), ("Deliver", 1, None),   # b2 misses epoch 1
    ("Produce", 1, None), ("Restart", 0, None), ("ControllerReact", 2, 1), ("Deliver", 0, None),
    ("Truncate", 0, None), ("FetchRequest", 0, None), ("FetchResponse", 0, None),
    ("ControllerAlterIsr", 2, 1), ("Crash", 1, 0), ("ControllerReact", 2, 0),
    ("Deliver", 0, None),                 # b0 leads epoch 2; b2 still thinks epoch 0 under b0
    ("FetchRequest", 2, None),            # <- blocked by fetch-epoch-fencing
    ("FetchResponse", 2, None), ("FetchRequest", 2, None), ("FetchResponse", 2, None),
    ("Crash", 0, 0), ("ControllerReact", 2, 2), ("Deliver", 2, None),
]


def run(script, without):
    m = Model(make_config("current", without, **BOUNDS))
    s = m.initial()
    for n, (kind, b, arg) in enumerate(script, 1):
        cands = [a for a in m.enabled(s) if a.kind == kind and a.b == b and (arg is None or a.arg == arg)]
        if kind == "Deliver":
            cands = [a for a in cands if a.arg[2] == b] or cands
        if not cands:
            return n, None
        s = m.step(s, cands[0])
        v = m.violation(s)
        if v:
            return n, v[0]
    return len(script), None


@pytest.mark.parametrize("script,fix,invariant,blocked_at", [
    (KAFKA_7128, "isr-expand-epoch-start", "AckedDurable", 18),
    (KIP_320, "fetch-epoch-fencing", "ConsistentReads", 18),
])
def test_scenario_violates_without_fix_and_is_blocked_with_it(script, fix, invariant, blocked_at):
    assert run(script, (fix,)) == (len(script), invariant)
    assert run(script, ()) == (blocked_at, None)
