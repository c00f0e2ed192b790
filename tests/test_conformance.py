"""Conformance (checkers/conformance.py) on hand-written broker event sequences: steps the model
allows pass; a truncation to the HW where the generation truncates by leader epoch, two leaders
of one epoch, a follower copying an entry the leader does not have, and a leader HW past an ISR
member are each reported with the event, the mapped model state and what the model allowed."""
from __future__ import annotations

from checkers.conformance import check_events
from tests.conftest import subprocess_env


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


def test_truncate_on_epoch_change_decision():
    """Same leader, new epoch (the controller dropped a dead follower): with KAFKA-7164 the
    follower must truncate; a follower that keeps its log diverges; without the fix it is the
    model's own step. A truncation still due makes any LeaderAndIsr truncate."""
    bump = [ev(1, "truncation_done", log_end_offset=3, leader_epoch=0),
            ev(0, "became_leader", leader_epoch=1, isr=[0, 1], log_end_offset=3, hw=2)]
    kept = base() + bump + [ev(1, "became_follower", leader_epoch=1, leader=0, truncate=False)]
    r = check_events(kept, "current")
    assert len(r.divergences) == 1 and "kept its log without truncating" in r.divergences[0].text
    assert "truncate-on-epoch-change on" in r.divergences[0].allowed[0]
    assert check_events(kept, "current", without=["truncate-on-epoch-change"]).divergences == []
    due = base()[:1] + [ev(1, "became_follower", leader_epoch=0, leader=0, truncate=True),
                        ev(1, "became_follower", leader_epoch=1, leader=0, truncate=True)]
    assert check_events(due, "kip-101").divergences == []


def test_epoch_answer_is_the_models():
    """Leader 1's cache is (0,0),(2,3): asked about epoch 1 (which it never had), KIP-279 answers
    epoch 0 ending at 3; before KIP-279 the requested epoch 1 ending at 3."""
    evs = base() + [ev(1, "became_leader", leader_epoch=2, isr=[1], log_end_offset=3, hw=2),
                    ev(1, "appended", base_offset=3, last_offset=3, leader_epoch=2)]
    ans = lambda e: ev(1, "epoch_answered", replica=0, requested_epoch=1, leader_epoch=e, end_offset=3)
    assert check_events(evs + [ans(0)], "current").divergences == []
    r = check_events(evs + [ans(1)], "current")
    assert len(r.divergences) == 1 and "answers epoch 0 ending at 3" in r.divergences[0].text
    assert check_events(evs + [ans(1)], "kip-101").divergences == []
    assert len(check_events(evs + [ans(0)], "kip-101").divergences) == 1


def test_stale_epoch_fetch_fenced():
    stale = lambda err: ev(0, "stale_epoch_request", request="Fetch", replica=1, request_epoch=0,
                           leader_epoch=1, error_code=err)
    evs = base() + [ev(0, "became_leader", leader_epoch=1, isr=[0, 1], log_end_offset=3, hw=2)]
    assert check_events(evs + [stale(74)], "current").divergences == []
    r = check_events(evs + [stale(0)], "current")
    assert len(r.divergences) == 1 and "served a Fetch of replica 1 carrying epoch 0" in r.divergences[0].text
    assert check_events(evs + [stale(0)], "kip-279").divergences == []


def test_isr_expansion_needs_the_epoch_start_and_pending_members_bound_the_hw():
    """Leader 0 of epoch 1 starts its epoch at 5 with HW 3 (min ISR 2 held it): broker 1 at 3
    may not rejoin under KAFKA-7128; a pending addition counts for the HW (KIP-497)."""
    evs = [ev(0, "became_leader", leader_epoch=0, isr=[0, 1], log_end_offset=0, hw=0),
           ev(1, "became_follower", leader_epoch=0, leader=0),
           ev(0, "appended", base_offset=0, last_offset=2, leader_epoch=0),
           ev(1, "appended", base_offset=0, last_offset=2, leader_epoch=0, role="follower"),
           ev(0, "hw_advanced", hw=3),
           ev(0, "appended", base_offset=3, last_offset=4, leader_epoch=0),
           ev(0, "isr_changed", isr=[0], leader_epoch=0),
           ev(0, "became_leader", leader_epoch=1, isr=[0], log_end_offset=5, hw=3)]
    early = evs + [ev(0, "isr_proposed", isr=[0, 1], leader_epoch=1, hw=3, positions={"1": 3})]
    r = check_events(early, "current", min_insync={"t": 2})
    assert len(r.divergences) == 1 and "below the start offset 5 of its epoch 1" in r.divergences[0].text
    assert check_events(early, "current", without=["isr-expand-epoch-start"], min_insync={"t": 2}).divergences == []
    ok = evs + [ev(1, "appended", base_offset=3, last_offset=4, leader_epoch=0, role="follower"),
                ev(0, "isr_proposed", isr=[0, 1], leader_epoch=1, hw=3, positions={"1": 5})]
    assert check_events(ok, "current", min_insync={"t": 2}).divergences == []
    # a pending shrink (1 leaves) must not let the HW pass broker 1's log end
    shrink = evs[:5] + [ev(0, "appended", base_offset=3, last_offset=4, leader_epoch=0),
                        ev(0, "isr_proposed", isr=[0], leader_epoch=0, hw=3, positions={}),
                        ev(0, "hw_advanced", hw=5)]
    r = check_events(shrink, "current")
    assert len(r.divergences) == 1 and "past ISR member 1" in r.divergences[0].text
    assert check_events(shrink + [ev(0, "isr_changed", isr=[0], leader_epoch=0)], "current").divergences[0]


def test_lockstep_truncate_step():
    """Broker 0 holds an unreplicated offset 3 of epoch 0 when broker 1 leads epoch 1 from offset
    3: the model's Truncate step cuts it (KIP-101: the leader's end of epoch 0 is 3). A follower
    that ends its truncation keeping it diverges even though it traced no truncation at all."""
    evs = base() + [ev(0, "appended", base_offset=3, last_offset=3, leader_epoch=0),
                    ev(1, "became_leader", leader_epoch=1, isr=[1], log_end_offset=3, hw=2),
                    ev(0, "became_follower", leader_epoch=1, leader=1, truncate=True)]
    kept = evs + [ev(0, "truncation_done", log_end_offset=4, leader_epoch=1)]
    r = check_events(kept, "current")
    assert len(r.divergences) == 1 and "ended its truncation with log end 4" in r.divergences[0].text
    assert "leaves 3" in r.divergences[0].text
    cut = evs + [ev(0, "truncated", offset=3, reason="leader_epoch"),
                 ev(0, "truncation_done", log_end_offset=3, leader_epoch=1)]
    assert check_events(cut, "current").divergences == []


def test_isr_addition_on_a_previous_registration_diverges_with_kip903():
    """KIP-903: a committed expansion whose member fetched with an earlier broker epoch than it is
    registered with at the commit diverges in generations with isr-broker-epoch, not before it
    (kip-320) nor without it; one on the current registration passes."""
    def expand(fetched, current):
        return base() + [ev(0, "isr_changed", isr=[0], leader_epoch=0),     # 1 left; it comes back
                         ev(0, "isr_proposed", isr=[0, 1], leader_epoch=0, hw=2, positions={"1": 3},
                            broker_epochs={"1": fetched}, current_broker_epochs={"1": fetched}),
                         ev(0, "isr_changed", isr=[0, 1], leader_epoch=0,
                            broker_epochs={"1": fetched}, current_broker_epochs={"1": current})]
    ds = check_events(expand(4, 5), "current").divergences
    assert len(ds) == 1 and "on a fetch made with broker epoch 4" in ds[0].text, ds
    assert "registered with epoch 5" in ds[0].text and "isr_addition_valid" in ds[0].allowed[0]
    assert check_events(expand(4, -1), "current").divergences           # not registered at all
    assert check_events(expand(5, 5), "current").divergences == []
    assert check_events(expand(4, 5), "kip-320").divergences == []
    assert check_events(expand(4, 5), "current", without=["isr-broker-epoch"]).divergences == []


def ctl(node, ce, seen, le, cur, accepted, whole=True):
    """A traced LeaderAndIsr decision: one partition entry (t-0), the request's controller epoch
    `ce` against the newest seen `seen`, leader epoch `le` against the current `cur`."""
    return {"kind": "event", "ts_ms": 0, "node": node, "type": "control_request", "request": "LeaderAndIsr",
            "controller_id": 2, "controller_epoch": ce, "current_controller_epoch": seen, "accepted": whole,
            "partitions": [{"topic": "t", "partition": 0, "leader": 0, "leader_epoch": le,
                            "current_leader_epoch": cur, "accepted": accepted}]}


def test_control_request_judged_against_controller_epoch_fencing():
    """A deposed controller's request (controller epoch 1 after 2 was seen) for a newer leader
    epoch: refused with controller-epoch-fencing; applied is a divergence naming both epochs.
    Without the fix (the model's generation before it) applying it conforms and refusing it
    does not; a stale leader epoch is refused either way."""
    evs = base()
    r = check_events(evs + [ctl(1, 2, 1, 1, 0, True)], "current")        # the new controller: applied
    assert r.divergences == [] and r.mapped == len(evs) + 1
    assert check_events(evs + [ctl(1, 1, 2, 1, 0, False, whole=False)], "current").divergences == []
    r = check_events(evs + [ctl(1, 1, 2, 1, 0, True)], "current")
    assert len(r.divergences) == 1
    d = r.divergences[0]
    assert ("broker 1 accepted a LeaderAndIsr of controller epoch 1 (from broker 2; it had seen controller "
            "epoch 2) for t-0 at leader epoch 1 over its 0") in d.text
    assert "spec.rules.control_request_accepted" in d.allowed[0] and d.allowed[0].startswith("refuse")
    off = ["controller-epoch-fencing"]
    assert check_events(evs + [ctl(1, 1, 2, 1, 0, True)], "current", without=off).divergences == []
    r = check_events(evs + [ctl(1, 1, 2, 1, 0, False, whole=False)], "current", without=off)
    assert len(r.divergences) == 1 and r.divergences[0].text.startswith("broker 1 refused")
    # a leader epoch not above the current one: refused whatever the controller epoch
    assert check_events(evs + [ctl(1, 2, 2, 1, 1, False)], "current").divergences == []
    assert len(check_events(evs + [ctl(1, 2, 2, 1, 1, True)], "current", without=off).divergences) == 1
    # a request naming no partition decides nothing: counted, not judged
    empty = dict(ctl(1, 1, 2, 1, 0, True), partitions=[])
    r = check_events(evs + [empty], "current")
    assert r.divergences == [] and r.unmapped.get("control_request") == 1


def test_control_request_judged_against_the_controller_epoch_the_trace_shows_seen():
    """A broker that forgets a newer controller (it applied controller epoch 2, then decides a
    request of epoch 1 as if it had seen only 1) is judged against 2: the forgetting is reported,
    and so is applying the deposed controller's entry. A new incarnation learns anew."""
    evs = base() + [ctl(1, 2, 1, 1, 0, True)]
    forgot = ctl(1, 1, 1, 2, 1, True)
    r = check_events(evs + [forgot], "current")
    assert [d.text for d in r.divergences] == [
        "broker 1 decided a LeaderAndIsr of controller epoch 1 as having seen controller epoch 1, but it had "
        "seen 2 (a request it accepted or its own election)",
        "broker 1 accepted a LeaderAndIsr of controller epoch 1 (from broker 2; it had seen controller epoch 2) "
        "for t-0 at leader epoch 2 over its 1"]
    elected = {"kind": "event", "ts_ms": 0, "node": 1, "type": "controller_elected", "controller_epoch": 2}
    assert len(check_events(base() + [elected, forgot], "current").divergences) == 2
    started = {"kind": "event", "ts_ms": 0, "node": 1, "type": "broker_started", "port": 1}
    assert check_events(evs + [started, forgot], "current").divergences == []


def _write_trace(path, node, incarnation, events):
    """A broker trace file as impl/broker.py writes one per process: its header, then events."""
    from traces.trace import TraceWriter, make_header
    with TraceWriter(path, make_header("broker", node=node, generation="current", incarnation=incarnation)) as w:
        for e in events:
            w.write(e)


def test_a_restart_forgets_the_controller_epoch_seen_from_its_first_decision(tmp_path):
    """A restarted broker listens, and decides a LeaderAndIsr, before it traces broker_started
    (it registers in between): the seen epoch restarts at 0 with the process, that is with its
    trace file, not with broker_started. The nemesis run that showed it: broker 0 applied
    controller epoch 1, crashed, came back, and decided the same controller's request as having
    seen 0 -- truthfully -- before broker_started."""
    from checkers.conformance import check_traces, read_events

    def at(ts, e):
        return dict(e, ts_ms=ts)
    first = [at(1, ctl(0, 1, 0, 1, -1, True)),
             at(2, {"kind": "event", "node": 0, "type": "broker_started", "port": 1})]
    again = [at(10, ctl(0, 1, 0, 2, 1, True)),          # seen 0: the new process's own truth
             at(11, {"kind": "event", "node": 0, "type": "broker_started", "port": 1})]
    _write_trace(tmp_path / "trace-000.jsonl", 0, 0, first)
    _write_trace(tmp_path / "trace-001.jsonl", 0, 1, again)
    paths = [tmp_path / "trace-000.jsonl", tmp_path / "trace-001.jsonl"]
    assert [e["incarnation"] for e in read_events(paths)] == [0, 0, 1, 1]
    assert check_traces(paths, "current") == []
    # one process that forgets what it saw is still caught, broker_started or not in between
    _write_trace(tmp_path / "forgot.jsonl", 0, 1, again[:1] + [at(10.5, again[1]), at(12, ctl(0, 1, 0, 3, 2, True))])
    ds = check_traces([tmp_path / "trace-000.jsonl", tmp_path / "forgot.jsonl"], "current")
    assert [d.text for d in ds] == [
        "broker 0 decided a LeaderAndIsr of controller epoch 1 as having seen controller epoch 0, but it had "
        "seen 1 (a request it accepted or its own election)"]


def test_incarnation_field_is_the_boundary_when_events_carry_it():
    """check_events on events that carry their incarnation: each process has its own seen
    epoch wherever broker_started falls (within one, broker_started resets nothing), and events
    of two processes of one broker merged out of order (a wall-clock step) are each judged
    against their own process."""
    def inc(e, i):
        return dict(e, incarnation=i)
    evs = base() + [inc(ctl(1, 2, 1, 1, 0, True), 0)]
    started = {"kind": "event", "ts_ms": 0, "node": 1, "type": "broker_started", "port": 1}
    assert check_events(evs + [inc(ctl(1, 2, 0, 2, 1, True), 1)], "current").divergences == []
    r = check_events(evs + [inc(started, 0), inc(ctl(1, 2, 0, 2, 1, True), 0)], "current")
    assert [d.text.split(" (")[0] for d in r.divergences] == [
        "broker 1 decided a LeaderAndIsr of controller epoch 2 as having seen controller epoch 0, but it had seen 2"]
    r = check_events(evs + [inc(ctl(1, 2, 0, 2, 1, True), 1), inc(ctl(1, 2, 1, 3, 2, True), 0)], "current")
    assert [d.text.split(" (")[0] for d in r.divergences] == [
        "broker 1 decided a LeaderAndIsr of controller epoch 2 as having seen controller epoch 1, but it had seen 2"]


def test_module_runs_as_a_command(tmp_path):
    """python -m checkers.conformance GENERATION TRACE...: exit 0 on a conforming trace, 1 with
    the divergence as a JSON line."""
    import json
    import subprocess
    import sys
    _write_trace(tmp_path / "ok.jsonl", 1, 0, base())
    _write_trace(tmp_path / "bad.jsonl", 1, 0, base() + [ctl(1, 2, 1, 1, 0, True), ctl(1, 1, 1, 2, 1, True)])
    ok = subprocess.run([sys.executable, "-m", "checkers.conformance", "current", str(tmp_path / "ok.jsonl")],
                        capture_output=True, text=True, env=subprocess_env(), timeout=60)
    assert ok.returncode == 0, ok.stderr
    bad = subprocess.run([sys.executable, "-m", "checkers.conformance", "current", str(tmp_path / "bad.jsonl")],
                         capture_output=True, text=True, env=subprocess_env(), timeout=60)
    assert bad.returncode == 1, bad.stderr
    assert json.loads(bad.stdout.splitlines()[0])["text"].startswith("broker 1 decided a LeaderAndIsr")
