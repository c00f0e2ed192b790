"""The driver protocol (docs/drivers.md) against every driver the set-up builds (kafkajs,
librdkafka, sarama), on a real one-broker cluster: the hello, configure with the client's own
option names, refusals in the client's own words, asynchronous sends answered with their
offsets, a consumer reading them back, malformed and unknown requests answered protocol-error,
and a driver that dies reported with its exit status and the tail of its stderr."""
from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path

import pytest

from kafkaverify.audit.settings import Setting, client_refusal
from kafkaverify.drivers.process import Driver, DriverError, DriverRefused
from kafkaverify.drivers.registry import DRIVERS
from tests.broker_fixtures import require, wait_until

pytestmark = pytest.mark.timeout(180)

# per driver: (effective option names its configure reports, the client's version)
EFFECTIVE = {
    "kafkajs": ({"idempotent", "maxInFlightRequests", "retry.retries", "acks"}, "2.2.4"),
    "librdkafka": ({"enable.idempotence", "max.in.flight.requests.per.connection", "retries", "acks"}, "2.0.2"),
    "sarama": ({"Producer.Idempotent", "Net.MaxOpenRequests", "Producer.Retry.Max", "Producer.RequiredAcks"}, "1.22.1"),
}
# per driver: settings the client refuses, and a piece of its own words
REFUSED = {
    "kafkajs": [(Setting("1", 5, 1, True), "Not requiring ack for all messages invalidates the idempotent producer's EoS"),
                (Setting("all", 0, 1, True), "Idempotent producer must allow retries to protect against transient errors")],
    "librdkafka": [(Setting("1", 5, 1, True), "`acks` must be set to `all` when `enable.idempotence` is true"),
                   (Setting("all", 0, 1, True), "`retries` must be set >= 1 when `enable.idempotence` is true"),
                   (Setting("all", 5, 8, True), "`max.in.flight` must be set <= 5 when `enable.idempotence` is true")],
    "sarama": [(Setting("1", 5, 1, True), "Idempotent producer requires Producer.RequiredAcks to be WaitForAll"),
               (Setting("all", 0, 1, True), "Idempotent producer requires Producer.Retry.Max >= 1"),
               (Setting("all", 5, 2, True), "Idempotent producer requires Net.MaxOpenRequests to be 1")],
}
ACCEPTED = {"kafkajs": Setting("all", 5, 5, True), "librdkafka": Setting("all", 5, 5, True),
            "sarama": Setting("all", 5, 1, True)}
TOPIC = "drv"


def need(name: str) -> None:
    require(DRIVERS[name].missing() is None, str(DRIVERS[name].missing()))


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    from kafka.admin import KafkaAdminClient, NewTopic

    from impl.cluster import Cluster
    c = Cluster(1, tmp_path_factory.mktemp("drivers"), coordinator="embedded")
    c.start()
    try:
        a = KafkaAdminClient(bootstrap_servers=c.bootstrap)
        a.create_topics([NewTopic(f"{TOPIC}-{n}", 2, 1) for n in DRIVERS])
        a.close()
        for n in DRIVERS:
            c.wait_for_leaders(f"{TOPIC}-{n}", timeout_s=30)
        yield c
    finally:
        c.stop()


@pytest.mark.parametrize("name", sorted(DRIVERS))
def test_refusals_are_the_clients_own_words(name):
    need(name)
    for s, words in REFUSED[name]:
        why = client_refusal(name, s)
        assert why is not None and words in why, (s.label(), why)
    assert client_refusal(name, ACCEPTED[name]) is None
    assert client_refusal(name, Setting("all", 5, 1, False)) is None


@pytest.mark.parametrize("name", sorted(DRIVERS))
def test_configure_send_poll_and_protocol_errors(name, broker, tmp_path):
    need(name)
    topic = f"{TOPIC}-{name}"
    log = tmp_path / "driver.log"
    d = Driver(name, log=log)
    try:
        assert d.hello["protocol"] == 1 and d.hello["client"] == name
        assert d.hello["client_version"].startswith(EFFECTIVE[name][1])
        s = ACCEPTED[name]
        eff = d.configure("producer", broker.bootstrap, {"acks": s.acks, "retries": s.retries,
                                                         "max_in_flight": s.max_in_flight, "idempotence": True})
        names, _ = EFFECTIVE[name]
        assert names <= set(eff), eff
        # a second configure on a configured client is refused
        with pytest.raises(DriverRefused):
            d.configure("producer", broker.bootstrap, {})
        # sends are asynchronous: all outstanding at once, each answered with its offset
        answers: dict[int, dict] = {}
        lock = threading.Lock()

        def keep(i):
            def cb(msg):
                with lock:
                    answers[i] = msg
            return cb
        for i in range(20):
            d.submit("send", keep(i), topic=topic, partition=1, key=f"k{i}", value=f"v{i}")
        assert wait_until(lambda: len(answers) == 20, timeout_s=30, what="20 send answers")
        assert all(a["type"] == "ok" and a["partition"] == 1 for a in answers.values()), answers
        assert sorted(a["offset"] for a in answers.values()) == list(range(20))
        assert d.request("flush")["type"] == "ok"
        # malformed lines and unknown ops: protocol-error, the driver keeps serving
        d.write_line("{not json")
        d.write_line('{"op": "send"}')
        d.write_line('{"id": 777, "op": "frobnicate"}')
        assert wait_until(lambda: len(d.protocol_errors) == 3, timeout_s=10, what="three protocol errors")
        ids = [e["id"] for e in d.protocol_errors]
        assert ids == [None, None, 777] and "frobnicate" in d.protocol_errors[2]["error"]
        with pytest.raises(DriverError, match="protocol error"):
            d.request("no-such-op")
        assert d.request("send", topic=topic, partition=0, key=None, value="after")["offset"] == 0
    finally:
        assert d.close() == 0
    # a consumer reads them back (kafkajs has no manual assignment: it joins a group)
    c = Driver(name)
    try:
        c.configure("consumer", broker.bootstrap, {"group": f"g-{name}", "auto_offset_reset": "earliest"})
        if name == "kafkajs":
            assert "unsupported" in c.request("assign", partitions=[[topic, 1]])["error"]
            assert c.request("subscribe", topics=[topic], group=f"g-{name}")["type"] == "ok"
        else:
            assert c.request("assign", partitions=[[topic, 1]])["type"] == "ok"
        got: list[dict] = []

        def polled():
            got.extend(c.request("poll", timeout_ms=500)["records"])
            return len([r for r in got if r["partition"] == 1]) >= 20
        assert wait_until(polled, timeout_s=60, what="the 20 records polled back")
        # each send's answer named the offset its record is at (concurrent sends may be written
        # in any order: kafkajs sends each as its own request)
        at = {r["offset"]: (r["value"], r["key"]) for r in got if r["partition"] == 1}
        assert {i: at.get(answers[i]["offset"]) for i in range(20)} == {i: (f"v{i}", f"k{i}") for i in range(20)}
    finally:
        c.close()


@pytest.mark.parametrize("name", sorted(DRIVERS))
def test_a_dying_driver_is_reported_with_its_status(name, broker):
    need(name)
    d = Driver(name)
    d.configure("producer", broker.bootstrap, {"acks": "all", "retries": 5, "max_in_flight": 1,
                                               "idempotence": False})
    answers: list[dict] = []
    os.kill(d.proc.pid, signal.SIGKILL)
    assert d.wait_until(lambda: d.dead is not None, 10)
    assert f"exited with status {-signal.SIGKILL}" in d.dead
    d.submit("send", answers.append, topic=f"{TOPIC}-{name}", partition=0, value="x")
    assert answers and answers[0]["type"] == "error" and answers[0]["driver_died"] and not answers[0]["definite"]
    with pytest.raises(DriverError, match="exited with status"):
        d.request("flush")
    d.close(2)


def test_death_stderr_and_bad_hello_reported(tmp_path):
    """The harness side alone, with stand-in programs: the stderr tail and exit status of a
    driver that dies under a request, a driver that never says hello, and one speaking another
    protocol version."""
    dies = tmp_path / "dies.py"
    dies.write_text("import sys\nprint('{\"hello\": {\"protocol\": 1, \"client\": \"x\"}}', flush=True)\n"
                    "sys.stdin.readline()\nprint('client exploded: segfault in the sender', file=sys.stderr)\n"
                    "sys.exit(7)\n")
    d = Driver("x", command=[sys.executable, str(dies)])
    with pytest.raises(DriverError) as e:
        d.request("flush", 10)
    assert "exited with status 7" in str(e.value) and "client exploded" in str(e.value)
    d.close(2)
    silent = tmp_path / "silent.py"
    silent.write_text("import sys, time\nprint('booting', file=sys.stderr, flush=True)\ntime.sleep(30)\n")
    with pytest.raises(DriverError, match="(?s)no hello within 1s.*booting"):
        Driver("x", command=[sys.executable, str(silent)], hello_timeout_s=1)
    other = tmp_path / "other.py"
    other.write_text("import time\nprint('{\"hello\": {\"protocol\": 2}}', flush=True)\ntime.sleep(30)\n")
    with pytest.raises(DriverError, match="protocol 2, not 1"):
        Driver("x", command=[sys.executable, str(other)])
    garbage = tmp_path / "garbage.py"
    garbage.write_text("print('hello world', flush=True)\n")
    with pytest.raises(DriverError, match="not JSON"):
        Driver("x", command=[sys.executable, str(garbage)])


def _kv(*args, timeout=240):
    import subprocess

    from tests.conftest import ROOT, subprocess_env
    return subprocess.run([sys.executable, "-m", "kafkaverify", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env=subprocess_env())


def test_reduced_audit_with_kafkajs_and_the_c_driver(tmp_path):
    """`kafkaverify audit-ordering --clients kafkajs,librdkafka` end to end on real 3-broker
    clusters: acks=1 with idempotence is refused by each client in its own words, acks=all with
    idempotence runs one fault schedule per client. librdkafka keeps its promises; kafkajs's
    idempotent producer may break them (kafkaverify/audit/explained.py says why), and if it does
    the audit exits 1 naming only kafkajs."""
    from impl.netfault import available
    need("kafkajs")
    need("librdkafka")
    assert available() is None, f"real partitions unavailable: {available()}"
    r = _kv("audit-ordering", "--clients", "kafkajs,librdkafka", "--acks", "1,all", "--retries", "5",
            "--max-in-flight", "1", "--idempotence", "on", "--schedules", "1", "--seed", "3",
            "--model-time-limit", "5", "--out", str(tmp_path))
    assert r.returncode in (0, 1), r.stdout + r.stderr[-3000:]
    assert "Traceback" not in r.stderr
    import json
    data = json.loads((tmp_path / "audit.json").read_text())
    cells = {(c["client"], c["setting"]): c for c in data["cells"]}
    refused = "acks=1 retries=5 max.in.flight=1 idempotence=on"
    assert "Not requiring ack for all messages invalidates the idempotent producer's EoS guarantees" \
        in cells[("kafkajs", refused)]["refusal"]
    assert "`acks` must be set to `all` when `enable.idempotence` is true" in cells[("librdkafka", refused)]["refusal"]
    ran = "acks=all retries=5 max.in.flight=1 idempotence=on"
    for client in ("kafkajs", "librdkafka"):
        c = cells[(client, ran)]
        assert len(c["runs"]) == 1 and c["runs"][0]["status"] in ("valid", "invalid"), c
        hist = Path(c["runs"][0]["dir"]) / "history.jsonl"
        assert hist.exists() and '"client": "%s"' % client in hist.read_text()
    assert cells[("librdkafka", ran)]["broken"] == [] and cells[("librdkafka", ran)]["runs"][0]["status"] == "valid"
    broken_by = {b[0] for b in data["broken"]}
    assert broken_by <= {"kafkajs"}
    assert (r.returncode == 1) == bool(broken_by)
    md = (tmp_path / "audit.md").read_text()
    assert "| kafkajs | librdkafka |" in md


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_nemesis_with_kafkajs_end_to_end(tmp_path):
    """`kafkaverify nemesis --clients kafkajs --schedules 2` at kafkajs's own defaults (no
    idempotence, 5 retries, no in-flight limit): two schedules run and are judged."""
    need("kafkajs")
    r = _kv("nemesis", "--clients", "kafkajs", "--schedules", "2", "--out", str(tmp_path), timeout=540)
    assert r.returncode in (0, 1), r.stdout + r.stderr[-3000:]
    assert "client=kafkajs" in r.stdout and "max_in_flight=1000000" in r.stdout
    runs = sorted(tmp_path.glob("run-*/history.jsonl"))
    assert len(runs) >= 2
    text = runs[0].read_text()
    assert '"client": "kafkajs"' in text and '"f":"send"' in text and '"type":"ok"' in text
    assert (tmp_path / runs[0].parent.name / "driver.log").exists()


def test_a_driver_not_built_is_a_usage_error(tmp_path):
    """--clients naming a driver the set-up did not build: exit 3 saying how to build it."""
    import subprocess

    from tests.conftest import ROOT, subprocess_env
    env = {**subprocess_env(), "KAFKAVERIFY_DRIVERS": str(tmp_path / "none")}
    for args in (["nemesis", "--clients", "sarama"], ["audit-ordering", "--clients", "kafkajs,librdkafka"]):
        r = subprocess.run([sys.executable, "-m", "kafkaverify", *args, "--out", str(tmp_path / "o")],
                           capture_output=True, text=True, timeout=60, cwd=ROOT, env=env)
        assert r.returncode == 3, (args, r.stdout, r.stderr)
        assert "is not built" in r.stderr + r.stdout and "Traceback" not in r.stderr
