"""One fault vocabulary (traces/schedule.py: crash, power-loss, restart, pause, resume) across the
schedule format, the broker CLI, `kafkaverify nemesis --faults` and the pytest plugin's fault
handle, with the older names (kill, power-fail) still accepted everywhere. No sockets: the broker
CLI's control channel and the cluster are stand-ins that record what they are asked."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
from click.testing import CliRunner

import kafkaverify.commands.broker as broker_cmd
import kafkaverify.nemesis.explore as nemesis_explore
from kafkaverify.cli import cli
from kafkaverify.plugin.fault_handle import FaultHandle
from traces.schedule import FAULT_ALIASES, FAULTS, canonical_fault, from_json, loads


def doc(events):
    return {"format": "kafkaverify-schedule", "version": 1, "kind": "schedule", "generation": "current",
            "brokers": 3, "events": events}


def test_every_alias_names_a_fault_of_the_vocabulary():
    assert FAULT_ALIASES == {"kill": "crash", "power-fail": "power-loss"}
    assert all(c in FAULTS and a not in FAULTS for a, c in FAULT_ALIASES.items())
    assert canonical_fault("kill") == "crash" and canonical_fault("crash") == "crash"
    assert canonical_fault("power-fail") == "power-loss" and canonical_fault("meteor") == "meteor"


def test_a_schedule_written_with_the_older_names_loads_as_the_same_schedule():
    new = [{"after_ms": 100, "fault": "crash", "target": "leader:t/0", "duration_ms": 500},
           {"after_ms": 10, "fault": "power-loss", "target": "1", "duration_ms": 800, "isolated": True}]
    old = [{**new[0], "fault": "kill"}, {**new[1], "fault": "power-fail"}]
    s_new, s_old = from_json(doc(new)), from_json(doc(old))
    assert s_old == s_new
    assert [e.fault for e in s_old.events] == ["crash", "power-loss"]
    # saved again, it speaks the vocabulary
    assert '"kill"' not in s_old.dumps() and loads(s_old.dumps()) == s_new


class FakeControl:
    """impl.control.request as the broker CLI calls it: records each request, answers ok."""

    def __init__(self):
        self.requests = []

    def __call__(self, data_dir, body):
        self.requests.append(body)
        out = {"ok": True, "fault": body["fault"], "broker": 1}
        if body["fault"] == "power-fail":
            out["lost_bytes"] = 7
        return out


@pytest.mark.parametrize("new, old, wire", [("crash", "kill", "kill"),
                                            ("power-loss", "power-fail", "power-fail")])
def test_broker_cli_takes_both_spellings_of_a_fault(monkeypatch, tmp_path, new, old, wire):
    control = FakeControl()
    monkeypatch.setattr(broker_cmd, "request", control)
    runner = CliRunner()
    for name in (new, old):
        r = runner.invoke(cli, ["broker", name, "leader:t/0", "--data-dir", str(tmp_path)],
                          standalone_mode=False)
        assert r.exception is None, r.output
        assert r.output.startswith(f"{name}: broker 1"), r.output
    assert control.requests == [{"fault": wire, "target": "leader:t/0"}] * 2
    if new == "power-loss":
        assert "7 unflushed bytes dropped" in r.output


def test_broker_power_loss_without_target_is_drop_unflushed(monkeypatch, tmp_path):
    """`broker power-loss --data-dir D` (the older offline command) and `broker drop-unflushed`
    do the same; with TARGET and --broker both, it is a usage error."""
    (tmp_path / "broker-0").mkdir()
    import impl.storage.log as log
    calls = []
    monkeypatch.setattr(log, "power_loss", lambda d: calls.append(d.name) or {"seg": 3})
    monkeypatch.setattr(broker_cmd, "request", FakeControl())
    runner = CliRunner()
    for args in (["power-loss"], ["drop-unflushed"]):
        r = runner.invoke(cli, ["broker", *args, "--data-dir", str(tmp_path), "--broker", "0"],
                          standalone_mode=False)
        assert r.exception is None and "broker-0: 3 unflushed bytes dropped in 1 segment(s)" in r.output
    assert calls == ["broker-0", "broker-0"]
    r = runner.invoke(cli, ["broker", "power-loss", "1", "--broker", "1", "--data-dir", str(tmp_path)],
                      standalone_mode=False)
    assert r.exception is not None and "not both" in str(r.exception)


def test_nemesis_faults_take_the_older_names(monkeypatch, tmp_path):
    seen = {}

    def explore(generation, brokers, n, seed, faults, *a, **kw):
        seen["faults"] = faults
        return nemesis_explore.Summary()          # nothing run: exit 2 (unknown)
    monkeypatch.setattr(nemesis_explore, "explore", explore)
    r = CliRunner().invoke(cli, ["nemesis", "--faults", "kill,power-fail,pause", "--consumers", "0",
                                 "--out", str(tmp_path / "out")], standalone_mode=False)
    assert r.exception is None, r.output
    assert seen["faults"] == ("crash", "power-loss", "pause")
    assert "faults=crash,power-loss,pause" in r.output


class FakeCluster:
    n = 3

    def __init__(self):
        self.calls = []

    def kill(self, b):
        self.calls.append(("kill", b))

    def power_loss(self, b):
        self.calls.append(("power_loss", b))
        return {"seg": 5}

    def alive(self):
        return [0, 1, 2]


def test_fault_handle_takes_both_spellings():
    c = FakeCluster()
    h = FaultHandle(c, seed=1)
    assert h.crash(1) == 1 and h.kill(2) == 2
    assert h.power_loss(0) == 0 and h.power_fail(1) == 1
    assert c.calls == [("kill", 1), ("kill", 2), ("power_loss", 0), ("power_loss", 1)]
    assert "kill -9 broker 1" in h.log[0] and "power loss of broker 0" in h.log[2]
