"""Scripted scenarios for the fixes whose bugs need three replicas and schedules deeper than the
explorer exhausts in minutes (KAFKA-7128, KIP-320): with the fix removed the script ends in the
named violation (the same schedule is a golden trace in traces/corpus); with the fix present
the script is blocked at the step the fix forbids."""
import pytest

from spec import Model, make_config

from checkers.golden import KAFKA_7128, KIP_320, SCRIPT_BOUNDS as BOUNDS


def run(script, without, only=None):
    """Run the script; stop at the first violation of `only` (names) or of any invariant."""
    from spec import INVARIANTS, violated
    m = Model(make_config("current", without, **BOUNDS))
    invs = tuple(i for i in INVARIANTS if only is None or i.name in only)
    s = m.initial()
    for n, (kind, b, arg) in enumerate(script, 1):
        cands = [a for a in m.enabled(s) if a.kind == kind and a.b == b and (arg is None or a.arg == arg)]
        if kind == "Deliver":
            cands = [a for a in cands if a.arg[2] == b] or cands
        if not cands:
            return n, None
        s = m.step(s, cands[0])
        v = violated(m.config, s, invs)
        if v:
            return n, v[0]
    return len(script), None


@pytest.mark.parametrize("script,fix,invariant,blocked_at,first", [
    # The anchor invariants see KAFKA-7128's hazard the moment the stale replica joins the ISR.
    (KAFKA_7128, "isr-expand-epoch-start", "AckedDurable", 19, (19, "LeaderCandidateCompleteness")),
    (KIP_320, "fetch-epoch-fencing", "ConsistentReads", 19, (19, "StrongIsr")),
])
def test_scenario_violates_without_fix_and_is_blocked_with_it(script, fix, invariant, blocked_at, first):
    assert run(script, (fix,), only=(invariant,)) == (len(script), invariant)
    assert run(script, (fix,)) == (first or (len(script), invariant))
    assert run(script, ()) == (blocked_at, None)
