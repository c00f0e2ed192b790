"""One schedule format for broker and model (kafkaverify/nemesis/model_map.py): schedule events
map to the model's fault actions; the schedule the nemesis shrank on the real cluster (one leader
crash under traffic) is asked of the model and reproduces there — in v0.10, and in `current`
without epoch-truncation — with the invariant the broker's divergence named; a model
counterexample's faults become a schedule for the broker."""
from __future__ import annotations

from kafkaverify.nemesis.model_map import ask_model, from_model_path, to_faults
from spec import Action
from traces.schedule import Event, Schedule, WORKLOAD_DEFAULTS, from_json

SHRUNK = (Event(0, "crash", target="leader:nemesis/0", duration_ms=300),)


def test_events_map_to_model_faults():
    s = Schedule("current", 3, (Event(0, "crash", target="leader:t/0", duration_ms=500),
                                Event(100, "power-loss", target="1"),
                                Event(100, "partition", between=("1", "2"), duration_ms=900),
                                Event(0, "session-expiry", target="2"),
                                Event(0, "producer-restart")))
    faults, unmapped = to_faults(s)
    assert [f.describe() for f in faults] == [
        "Crash(leader:t/0)", "Crash(1, lose unflushed)", "Pause(2)", "SessionExpire(2)", "Resume(2)",
        "Restart(leader:t/0)"]
    assert len(unmapped) == 2 and "partition 1<->2" in unmapped[0] and "producer-restart" in unmapped[1]


def test_shrunk_broker_failures_reproduce_on_the_model():
    for gen, without in (("v0.10", ()), ("current", ("epoch-truncation",))):
        s = Schedule(gen, 3, SHRUNK, dict(WORKLOAD_DEFAULTS), without=without)
        a = ask_model(s, time_limit_s=60, invariants=("LeaderCandidateCompleteness",))
        assert a.status == "violation" and a.invariant == "LeaderCandidateCompleteness", (gen, a.status)
        kinds = [x.kind for x in a.path]
        assert "Crash" in kinds and "Truncate" in kinds and kinds.index("Crash") < kinds.index("Truncate")


def test_model_counterexample_becomes_a_schedule():
    path = [Action("Produce", 0), Action("Crash", 0, 1), Action("FetchRequest", 1), Action("Restart", 0),
            Action("Pause", 2), Action("SessionExpire", 2), Action("Resume", 2)]
    s = from_model_path(path, "v0.10", 3)
    assert [e.describe() for e in s.events] == [
        "+500 ms power-loss 0", "+500 ms restart 0", "+500 ms pause 2", "+0 ms session-expiry 2", "+500 ms resume 2"]
    assert from_json(s.to_json()) == s
