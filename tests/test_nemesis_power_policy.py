"""The isolated power-loss discipline as a filter on the model's actions
(kafkaverify/nemesis/power_policy.py): a power loss only on a whole cluster; afterwards no fault
and no restart of the broker while the controller still counts it in the ISR; and the model's
KIP-966 counterexample (the ISR shrank to the leader, which then loses power) is refused."""
from __future__ import annotations

from kafkaverify.nemesis.power_policy import IsolatedPowerLoss, allowed, whole
from spec import Model, make_config
from spec.model import Action


def test_power_loss_only_on_a_whole_cluster_and_restart_after_leaving_the_isr():
    cfg = make_config("current", brokers=2, crashes=2, unflushed_loss=True)
    m, iso = Model(cfg), IsolatedPowerLoss(cfg)
    s = m.step(m.initial(), Action("Produce", 0))            # b0 holds an unflushed record
    assert whole(s) and Action("Crash", 0, 1) in iso.enabled(s)
    t = m.step(s, Action("Crash", 0, 1))
    assert not whole(t) and t.lossy == 1
    assert not any(a.kind in ("Crash", "Lose", "Pause") for a in iso.enabled(t))
    assert (t.zk.isr >> 0) & 1 and Action("Restart", 0) in m.enabled(t)
    assert Action("Restart", 0) not in iso.enabled(t)        # the controller still counts b0
    # the KIP-966 story's first steps: b0 proposes dropping b1, the controller commits it
    u = m.step(s, Action("ProposeShrink", 0, 1))
    u = next(m.step(u, a) for a in m.enabled(u) if a.kind == "ControllerAlterIsr")
    assert u.zk.isr == 0b01 and not whole(u)
    assert Action("Crash", 0, 1) in m.enabled(u) and not allowed(u, Action("Crash", 0, 1))
