"""Conformance (checkers/conformance.py) on hand-written broker event sequences: steps the model
allows pass; a truncation to the HW where the generation truncates by leader epoch, two leaders
of one epoch, a follower copying an entry the leader does not have, and a leader HW past an ISR
member are each reported with the event, the mapped model state and what the model allowed."""
from __future__ import annotations

from checkers.conformance import check_events


def ev(node, type, **kw):
    return {"kind": "event", "ts_ms": 0, "node": node, "type": type, "topic": "t", "partition": 0, **kw}


def base():
    """Broker 0 leads epoch 0 with ISR {0,1}; three records replicated to 1; HW 3 on both."""
    return [ev(0, "became_leader", leader_epoch=0, isr=[0, 1], log_end_offset=0, hw=0),
            ev(1, "became_follower", leader_epoch=0, leader=0),
            ev(0, "appended", base_offset=0, last_offset=2, leader_epoch=0),
            ev(1, "appended", base_offset=0, last_offset=2, leader_epoch=0, role="follower"),
            ev(0, "hw_advanced", hw=2),
            ev(1, "hw_advanced", hw=2, role="follower")]


def failover(trunc_offset, reason):
    """Broker 1 leads epoch 1 (it has offsets 0..2); broker 0 follows and truncates."""
    return base() + [ev(1, "became_leader", leader_epoch=1, isr=[1], log_end_offset=3, hw=2),
                     ev(0, "became_follower", leader_epoch=1, leader=1),
                     ev(0, "truncated", offset=trunc_offset, reason=reason)]


def test_allowed_steps_pass():
    r = check_events(base() + [ev(1, "became_leader", leader_epoch=1, isr=[1], log_end_offset=3, hw=2),
                               ev(0, "became_follower", leader_epoch=1, leader=1)], "current")
    assert r.divergences == [] and r.mapped == 8


def test_truncation_to_hw_diverges_where_the_generation_truncates_by_epoch():
    r = check_events(failover(2, "hw"), "current")
    assert len(r.divergences) == 1
    d = r.divergences[0]
    assert "truncated to offset 2 (hw)" in d.text and "truncates to 3" in d.text
    assert d.event["type"] == "truncated" and any("Truncate b0 to offset 3" in a for a in d.allowed)
    assert any(s.startswith("b1 leader le=1") for s in d.model_state)
    # v0.10 truncates to the HW: the same step is the model's own
    assert check_events(failover(2, "hw"), "v0.10").divergences == []


def test_unique_leader_per_epoch_and_log_matching():
    r = check_events(base() + [ev(1, "became_leader", leader_epoch=0, isr=[1], log_end_offset=3, hw=2)], "current")
    assert [d.kind for d in r.divergences] == ["invariant"] and "already led" in r.divergences[0].text
    r = check_events(base() + [ev(0, "appended", base_offset=3, last_offset=3, leader_epoch=0),
                               ev(1, "appended", base_offset=3, last_offset=3, leader_epoch=5, role="follower")],
                     "current")
    assert "LogMatching" in r.divergences[0].text


def test_hw_past_an_isr_member_diverges():
    r = check_events(base() + [ev(0, "appended", base_offset=3, last_offset=4, leader_epoch=0),
                               ev(0, "hw_advanced", hw=5)], "current")
    assert len(r.divergences) == 1 and "past ISR member 1" in r.divergences[0].text


def test_committed_record_missing_from_a_new_leader():
    evs = base() + [ev(0, "appended", base_offset=3, last_offset=3, leader_epoch=0),
                    ev(1, "appended", base_offset=3, last_offset=3, leader_epoch=0, role="follower"),
                    ev(0, "hw_advanced", hw=4),
                    ev(1, "truncated", offset=2, reason="hw"),
                    ev(1, "became_leader", leader_epoch=1, isr=[1], log_end_offset=2, hw=2)]
    r = check_events(evs, "v0.10")
    assert [d.kind for d in r.divergences] == ["invariant", "invariant"]
    assert "LeaderCandidateCompleteness" in r.divergences[0].text      # ISR member 1 truncated
    assert "(LeaderCompleteness)" in r.divergences[1].text              # and was elected


def test_power_loss_exemption_only_when_every_holder_lost_the_records():
    lost_on_1 = base() + [ev(1, "recovered", log_end_offset=0, truncated_bytes=0)]
    # broker 0 still holds offsets 0..2: electing the empty broker 1 loses them (KIP-966's case)
    r = check_events(lost_on_1 + [ev(1, "became_leader", leader_epoch=1, isr=[0, 1], log_end_offset=0, hw=0)],
                     "current")
    assert ["(LeaderCompleteness)" in d.text for d in r.divergences] == [True]
    # both lost them to power loss: the model's exemption, no divergence
    r = check_events(lost_on_1 + [ev(0, "recovered", log_end_offset=0, truncated_bytes=0),
                                  ev(1, "became_leader", leader_epoch=1, isr=[0, 1], log_end_offset=0, hw=0)],
                     "current")
    assert r.divergences == []


def test_min_isr_is_per_topic():
    """HW advancing with ISR {0}: a divergence where the topic's min ISR is 2 (min-isr-hw), none
    for a topic at the broker default of 1 (e.g. __consumer_offsets)."""
    evs = [ev(0, "became_leader", leader_epoch=0, isr=[0], log_end_offset=0, hw=0),
           ev(0, "appended", base_offset=0, last_offset=0, leader_epoch=0), ev(0, "hw_advanced", hw=1)]
    assert "below min.insync.replicas 2" in check_events(evs, "current", min_insync={"t": 2}).divergences[0].text
    assert check_events(evs, "current", min_insync={"other": 2}).divergences == []
