"""No stage of `kafkaverify check` ends in an exception: a harness failure (a client timeout, a
broker that does not start, a fault command that fails) becomes that stage's unknown verdict
with its cause, the JUnit report carries it as an error case with the reproduce command, and
`check` exits 1 or 2. The failures are injected; no broker process is started."""
from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
from kafka.errors import KafkaTimeoutError

from impl.cluster import Cluster, ClusterError
from kafkaverify import cli as kv_cli
from kafkaverify.nemesis import runner, stage as nemesis_stage, workload
from kafkaverify.suite import budget, run as suite_run
from kafkaverify.suite.stages import StageResult
from traces.history import load
from traces.history_recorder import HistoryRecorder
from traces.schedule import Event, Schedule, WORKLOAD_DEFAULTS


def _final_read_times_out():
    raise KafkaTimeoutError("Failed to get offsets by times in 30000.0 ms")


def _stages(*pairs):
    return [budget.Stage(name, "kip-101", 0.1, budget.Q, fn) for name, fn in pairs]


def _passes():
    return StageResult("passes", "pass", 0.0, "fine")


def _fails():
    return StageResult("fails", "fail", 0.0, "expected MinIsrDurability, found nothing")


def test_a_stage_whose_harness_raises_is_unknown_with_its_cause(monkeypatch, tmp_path):
    monkeypatch.setattr(suite_run, "select", lambda budget, only: _stages(
        ("nemesis final read", _final_read_times_out), ("passes", _passes)))
    rc = suite_run.run_suite(junit=str(tmp_path / "r.xml"), json_out=str(tmp_path / "r.json"))
    assert rc == 2                                   # unknown, not a crash; the next stage ran
    root = ET.parse(tmp_path / "r.xml").getroot()
    cases = {c.get("name"): c for c in root.iter("testcase")}
    assert set(cases) == {"nemesis final read", "passes"}
    err = cases["nemesis final read"].find("error")
    assert err is not None and err.get("type") == "unknown"
    assert err.get("message").startswith("harness error, no verdict: KafkaTimeoutError: Failed to get offsets")
    assert "_final_read_times_out" in err.get("message")            # where it was raised
    assert "Traceback (most recent call last)" in err.text           # the cause, in the report
    assert "reproduce: kafkaverify check --stage 'nemesis final read'" in err.text
    assert cases["passes"].find("error") is None and cases["passes"].find("failure") is None
    got = {r["stage"]: r for r in json.loads((tmp_path / "r.json").read_text())}
    assert got["nemesis final read"]["verdict"] == "unknown" and "KafkaTimeoutError" in got["nemesis final read"]["cause"]


def test_a_failed_stage_beside_a_raising_one_exits_1(monkeypatch, tmp_path):
    def broker_does_not_start():
        raise ClusterError("broker 1 did not register within 30s")
    monkeypatch.setattr(suite_run, "select", lambda budget, only: _stages(
        ("broker start", broker_does_not_start), ("fails", _fails)))
    assert suite_run.run_suite(junit=str(tmp_path / "r.xml")) == 1
    root = ET.parse(tmp_path / "r.xml").getroot()
    assert root.find("testsuite").get("errors") == "1" and root.find("testsuite").get("failures") == "1"
    assert "ClusterError: broker 1 did not register" in root.find(".//error").get("message")


def test_check_exits_2_without_a_traceback(monkeypatch, capsys):
    """What a user sees on the command line: the verdict and its one-line cause, exit 2."""
    monkeypatch.setattr(suite_run, "select", lambda budget, only: _stages(
        ("nemesis final read", _final_read_times_out)))
    with pytest.raises(SystemExit) as ex:
        kv_cli.main(["check", "--stage", "nemesis final read"])
    assert ex.value.code == 2
    out = capsys.readouterr()
    assert "KafkaTimeoutError" in out.out and "unknown" in out.out
    assert "reproduce: kafkaverify check --stage" in out.out
    assert "Traceback" not in out.out + out.err


def test_nemesis_stage_harness_failure_is_unknown(monkeypatch):
    def explore(*a, **k):
        raise KafkaTimeoutError("Failed to update metadata after 60.0 secs.")
    monkeypatch.setattr(nemesis_stage, "explore", explore)
    verdict, _secs, detail = nemesis_stage.check_stage()
    assert verdict == "unknown"
    assert detail == ("harness error in the schedules on current: KafkaTimeoutError: "
                      "Failed to update metadata after 60.0 secs.")


class _UnavailableConsumer:
    """kafka-python's consumer facing a partition with no leader: asking for its end times out."""
    def __init__(self, **kw):
        pass

    def assign(self, tps):
        pass

    def seek(self, tp, off):
        pass

    def end_offsets(self, tps):
        raise KafkaTimeoutError("Failed to get offsets by times in 30000.0 ms")

    def close(self):
        pass


def test_final_read_of_an_unavailable_partition_is_undecided_not_a_crash(monkeypatch, tmp_path):
    import kafka
    monkeypatch.setattr(kafka, "KafkaConsumer", _UnavailableConsumer)
    rec = HistoryRecorder(tmp_path / "final.jsonl", trace_id="final")
    unread = workload.final_reads(rec, "127.0.0.1:1", "t", 2)
    rec.close()
    assert unread == [f"t/{p}: KafkaTimeoutError: Failed to get offsets by times in 30000.0 ms" for p in (0, 1)]
    evs = [json.loads(x) for x in (tmp_path / "final.jsonl").read_text().splitlines()[1:]]
    assert [e["type"] for e in evs] == ["invoke", "info", "invoke", "info"]
    assert all("final read failed: KafkaTimeoutError" in e["error"] for e in evs if e["type"] == "info")


def _schedule():
    return Schedule("current", 3, (Event(500, "crash", target="0", duration_ms=500),),
                    dict(WORKLOAD_DEFAULTS, consumers=0), seed=1)


def test_a_run_whose_cluster_does_not_start_is_unknown_with_the_cause(monkeypatch, tmp_path):
    def start(self, *a, **k):
        raise ClusterError("broker 2 exited with code 1 before registering")
    monkeypatch.setattr(Cluster, "start", start)
    r = runner.run_schedule(_schedule(), tmp_path / "run", net=False)
    assert r.status == "unknown"
    assert r.reason == "cluster error: broker 2 exited with code 1 before registering"
    assert json.loads((tmp_path / "run" / "result.json").read_text())["status"] == "unknown"


def test_a_fault_command_that_fails_makes_the_run_unknown(monkeypatch, tmp_path):
    """The cluster is faked as started; the harness's first fault fails (the kill of a broker
    process raises), after the clients were set up."""
    monkeypatch.setattr(Cluster, "start", lambda self, *a, **k: self)
    monkeypatch.setattr(runner, "_create_topic", lambda c, w: None)
    monkeypatch.setattr(Cluster, "wait_for_leaders", lambda self, *a, **k: {0: 0})
    monkeypatch.setattr(Cluster, "alive", lambda self: [0, 1, 2])

    class Producer:
        errors: list = []

        def __init__(self, *a, **kw):
            import threading
            self._stop = threading.Event()

        def start(self):
            pass

    monkeypatch.setattr(runner, "ProducerWorkload", Producer)

    def kill(self, i):
        raise ProcessLookupError(3, "No such process")
    monkeypatch.setattr(Cluster, "kill", kill)
    r = runner.run_schedule(_schedule(), tmp_path / "run", net=False)
    assert r.status == "unknown"
    assert r.reason == ("the fault +500 ms crash 0 for 500 ms could not be applied: "
                        "ProcessLookupError: [Errno 3] No such process"), r.reason
    load(str(tmp_path / "run" / "history.jsonl"))                    # still a readable history


def test_a_producer_that_cannot_flush_is_still_closed():
    """kafka-python's close flushes first; on a partition with no leader the flush times out and
    the producer would stay open, its __del__ printing the timeout later. The workload's close
    stops its sender and marks it closed."""
    class Sender:
        forced = False

        def force_close(self):
            self.forced = True

    class Stuck:
        def __init__(self):
            self._sender, self._closed = Sender(), False

        def flush(self, timeout=None):
            raise KafkaTimeoutError("Timeout waiting for future")

        close = flush

    p = workload.Producer.__new__(workload.Producer)
    p.client, p.p = "kafka-python", Stuck()
    p.close(0.1)
    assert p.p._closed and p.p._sender.forced
