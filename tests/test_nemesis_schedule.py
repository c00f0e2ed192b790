"""The fault-schedule format (traces/schedule.py): round trip, every fault kind accepted, bad
input rejected with the event index."""
from __future__ import annotations

import json

import pytest

from traces.schedule import FAULTS, ScheduleError, from_json, is_schedule_file, load, loads, save


def doc(events, **kw):
    return {"format": "kafkaverify-schedule", "version": 1, "kind": "schedule", "generation": "current",
            "brokers": 3, "events": events, **kw}


GOOD = [
    {"after_ms": 100, "fault": "crash", "target": "leader:t/0", "duration_ms": 500},
    {"after_ms": 0, "fault": "restart", "target": "1"},
    {"after_ms": 10, "fault": "pause", "target": "controller", "duration_ms": 100},
    {"after_ms": 10, "fault": "resume", "target": "2"},
    {"after_ms": 10, "fault": "power-loss", "target": "0"},
    {"after_ms": 10, "fault": "power-loss", "target": "1", "duration_ms": 800, "isolated": True},
    {"after_ms": 10, "fault": "partition", "between": ["0", "coord"], "duration_ms": 4000},
    {"after_ms": 10, "fault": "partition", "between": ["leader:t/0", "2"]},
    {"after_ms": 10, "fault": "heal", "between": ["leader:t/0", "2"]},
    {"after_ms": 10, "fault": "heal"},
    {"after_ms": 10, "fault": "session-expiry", "target": "leader:t/0"},
    {"after_ms": 10, "fault": "controller-failover", "duration_ms": 200},
    {"after_ms": 10, "fault": "producer-restart"},
    {"after_ms": 10, "fault": "consumer-crash"},
]


def test_every_fault_kind_round_trips(tmp_path):
    s = from_json(doc(GOOD, seed=4, workload={"client": "aiokafka", "idempotence": True}))
    assert {e.fault for e in s.events} == set(FAULTS)
    assert s.workload["client"] == "aiokafka" and s.workload["acks"] == "all"
    save(tmp_path / "s.json", s)
    assert is_schedule_file(tmp_path / "s.json")
    assert load(tmp_path / "s.json") == s
    assert s.needs_net()
    assert "crash leader:t/0 for 500 ms" in s.describe()
    assert [e.isolated for e in s.events if e.fault == "power-loss"] == [False, True]
    assert "power-loss (isolated) 1 for 800 ms" in s.describe()


@pytest.mark.parametrize("events, message", [
    ([{"after_ms": 1, "fault": "crsh", "target": "0"}], "event 0: unknown fault 'crsh'"),
    ([GOOD[1], {"after_ms": -1, "fault": "crash", "target": "0"}], "event 1: after_ms must be"),
    ([{"fault": "crash", "target": "0"}], "event 0: missing after_ms"),
    ([{"after_ms": 1, "fault": "crash", "target": "7"}], "event 0: no broker 7"),
    ([{"after_ms": 1, "fault": "crash"}], "event 0: crash needs a target"),
    ([{"after_ms": 1, "fault": "crash", "target": "coord"}], "event 0: target must be"),
    ([{"after_ms": 1, "fault": "partition", "between": ["0"]}], "event 0: partition needs between"),
    ([{"after_ms": 1, "fault": "partition", "between": ["1", "1"]}], "cannot cut 1 from itself"),
    ([{"after_ms": 1, "fault": "restart", "target": "1", "duration_ms": 5}], "restart takes no duration_ms"),
    ([{"after_ms": 1, "fault": "producer-restart", "target": "1"}], "producer-restart takes no target"),
    ([{"after": 1, "fault": "crash", "target": "1"}], "event 0: unknown field(s) after"),
    (["crash"], "event 0: an event is a JSON object"),
    ([{"after_ms": 1, "fault": "crash", "target": "1", "duration_ms": 5, "isolated": True}],
     "event 0: only power-loss can be isolated"),
    ([{"after_ms": 1, "fault": "power-loss", "target": "1", "isolated": True}], "needs duration_ms"),
    ([{"after_ms": 1, "fault": "power-loss", "target": "1", "duration_ms": 5, "isolated": 1}],
     "isolated must be true or false"),
])
def test_bad_events_name_their_index(events, message):
    with pytest.raises(ScheduleError) as e:
        from_json(doc(events))
    assert message in str(e.value)


def test_bad_header_and_workload():
    with pytest.raises(ScheduleError, match="not a schedule"):
        from_json({"kind": "header"})
    with pytest.raises(ScheduleError, match="brokers must be"):
        from_json(doc([], brokers=0))
    with pytest.raises(ScheduleError, match="workload: client must be"):
        from_json(doc([], workload={"client": "franz-go"}))
    with pytest.raises(ScheduleError, match="replication_factor 3 exceeds brokers 2"):
        from_json(doc([], brokers=2))
    with pytest.raises(ScheduleError, match="not JSON"):
        loads("{")
    assert loads(json.dumps(doc([]))).events == ()


def test_generator_power_loss_families():
    """--faults power-loss generates isolated power losses (what `current` promises to survive),
    power-loss-any unguarded ones (KIP-966's last-replica family)."""
    from hypothesis import given, settings

    from kafkaverify.nemesis.explore import events

    seen = {}

    @settings(max_examples=30, database=None)
    @given(events(("power-loss",), 3, "t"), events(("power-loss-any",), 3, "t"))
    def draw(iso, anyp):
        assert iso.fault == anyp.fault == "power-loss" and iso.duration_ms is not None
        assert iso.isolated and not anyp.isolated
        seen["n"] = seen.get("n", 0) + 1
    draw()
    assert seen["n"] == 30
