"""The pytest plugin (kafkaverify/pytest_plugin.py), loaded through its pytest11 entry point in
fresh pytest processes: the example project's tests pass, its broken variant fails with the
checker's witness, the options work, clusters are shared by scope and healed between tests."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "orders"


def pytest_run(*args, cwd: Path, timeout: float = 300):
    env = dict(os.environ)
    env.pop("PYTEST_ADDOPTS", None)
    env.pop("PYTEST_XDIST_WORKER", None)
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                           "-W", "ignore::DeprecationWarning", *args],
                          capture_output=True, text=True, cwd=cwd, timeout=timeout, env=env)


def test_example_project_passes_with_the_plugin_loaded_by_entry_point():
    r = pytest_run("-v", "--kafkaverify-seed", "11", cwd=EXAMPLE)    # -v cancels -q: the header shows
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    assert "kafkaverify: seed=11 generation=current" in r.stdout
    assert "3 passed" in r.stdout


def test_broken_variant_fails_with_a_clear_witness():
    r = pytest_run("tests_broken", "--kafkaverify-seed", "12", cwd=EXAMPLE)
    out = r.stdout
    assert r.returncode == 1, out[-4000:] + r.stderr[-2000:]
    assert "kafkaverify: the recorded history is INVALID" in out and "seed=12" in out
    # acknowledged orders overwritten by the new leader: the checker names the offsets and values
    assert re.search(r"(inconsistent-offsets|lost-write|unseen-write): ", out), out[-4000:]
    assert re.search(r"send '\{\"order\": \d, \"amount\": \d\}'", out)
    assert "kill -9 broker 0" in out
    report = re.search(r"HTML report: (\S+)", out).group(1)
    assert re.search("inconsistent-offsets|lost-write|unseen-write", Path(report).read_text())
    assert "reproduce: pytest tests_broken/test_orders_broken.py::test_fast_publisher_keeps_confirmed_orders " \
           "--kafkaverify-seed 12" in out
    # the consumer that commits before processing while claiming at-least-once
    assert re.search(r"delivery-at-least-once: group ledger declared at-least-once, but commit #\d+ of offset "
                     r"10 of \S+ passed offset \d \('\{\"order\": \d, \"amount\": \d\}', see #\d+\), which the "
                     r"group (had not polled when the commit began|never polled)", out), out[-4000:]
    assert "FAILED tests_broken/test_orders_broken.py::test_eager_ledger_claims_at_least_once" in out
    assert "2 failed" in out


def test_bad_generation_is_a_usage_error(tmp_path):
    r = pytest_run("--co", "--kafkaverify-generation", "v9", cwd=EXAMPLE, timeout=120)
    assert r.returncode == 4 and "--kafkaverify-generation" in r.stderr and "Traceback" not in r.stderr


PLUGIN_TESTS = '''
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

pytestmark = pytest.mark.kafka_cluster(brokers=3, scope="module", generation="kip-320")
seen = {}


def test_first(kafka_cluster, kafka_faults, kafka_topic):
    seen["cluster"] = kafka_cluster
    assert kafka_cluster.generation == "kip-320"
    kafka_faults.pause(1)
    seen["victim"] = kafka_faults.kill()            # chosen with the seed among live, unpaused
    assert set(kafka_faults.status()["paused"]) == {1}
    print("VICTIM", seen["victim"])


def test_second_gets_the_same_cluster_healed(kafka_cluster, kafka_history, kafka_topic):
    assert kafka_cluster is seen["cluster"] and kafka_cluster.alive() == [0, 1, 2]
    topic = kafka_topic(replication_factor=3, min_insync=2)
    p = kafka_history.producer(Producer({"bootstrap.servers": kafka_cluster.bootstrap,
                                         "enable.idempotence": False, "acks": "all"}))
    for i in range(5):
        p.produce(topic, value=f"v{i}".encode(), partition=0)
    assert p.flush(20) == 0
    c = kafka_history.consumer(Consumer({"bootstrap.servers": kafka_cluster.bootstrap,
                                         "group.id": "assign-only", "enable.auto.commit": False}))
    c.assign([TopicPartition(topic, 0, 0)])
    got = []
    for _ in range(100):
        got += [m.value() for m in c.consume(10, 0.2) if not m.error()]
        if len(got) == 5:
            break
    c.close()
    assert got == [f"v{i}".encode() for i in range(5)]


def test_third_power_failure_and_a_second_cluster(kafka_cluster, kafka_faults, kafka_topic, kafka_cluster_factory):
    topic = kafka_topic(replication_factor=3, assignment={0: [2, 0, 1]})
    assert kafka_faults.power_fail(leader_of=(topic, 0)) == 2
    assert 2 not in kafka_cluster.alive()
    kafka_faults.heal(topics=(topic,))
    assert kafka_cluster.alive() == [0, 1, 2]
    other = kafka_cluster_factory(brokers=1, generation="v0.10")
    assert other.generation == "v0.10" and other.bootstrap != kafka_cluster.bootstrap
'''


SESSION_TEST = '''
import pytest


@pytest.mark.kafka_cluster(scope="session")
def test_session(kafka_cluster):
    print("SESSION", kafka_cluster.bootstrap)
'''


def test_module_cluster_is_shared_healed_and_faults_follow_the_seed(tmp_path):
    (tmp_path / "test_shared.py").write_text(textwrap.dedent(PLUGIN_TESTS))
    for name in ("test_session_a.py", "test_session_b.py"):   # two modules, one session cluster
        (tmp_path / name).write_text(textwrap.dedent(SESSION_TEST))
    victims = []
    for _ in range(2):
        r = pytest_run("-s", "--kafkaverify-seed", "5", cwd=tmp_path)
        assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
        assert "5 passed" in r.stdout
        victims.append(re.search(r"VICTIM (\d)", r.stdout).group(1))
        sessions = re.findall(r"SESSION (\S+)", r.stdout)
        assert len(sessions) == 2 and sessions[0] == sessions[1]
    assert victims[0] == victims[1] and victims[0] in "02"


ZK_TEST = '''
import pytest
from kafka import KafkaProducer


@pytest.mark.kafka_cluster(brokers=2)
def test_on_zookeeper(kafka_cluster, kafka_history, kafka_topic):
    assert kafka_cluster.coordinator.startswith("zk://")
    topic = kafka_topic(replication_factor=2)
    p = kafka_history.producer(KafkaProducer(bootstrap_servers=kafka_cluster.bootstrap, acks="all",
                                             enable_idempotence=False, retries=0))
    for i in range(3):
        p.send(topic, value=f"z{i}".encode(), partition=0).get(timeout=20)
    assert kafka_history.ops == 3
'''


@pytest.mark.zookeeper
def test_coordinator_option_runs_clusters_on_zookeeper(tmp_path, zookeeper_url):
    (tmp_path / "test_zk.py").write_text(textwrap.dedent(ZK_TEST))
    r = pytest_run("--kafkaverify-coordinator", zookeeper_url, cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    assert "1 passed" in r.stdout


def test_recorder_wraps_only_known_clients_and_refuses_subscribe(tmp_path):
    from kafka import KafkaConsumer
    from kafkaverify.plugin.client_history import ClientHistory, text
    h = ClientHistory(tmp_path / "h.jsonl")
    try:
        with pytest.raises(TypeError, match="kafka-python KafkaProducer or confluent-kafka Producer"):
            h.producer(object())
        c = h.consumer(KafkaConsumer(group_id=None, bootstrap_servers="127.0.0.1:1",
                                     api_version=(2, 0)), group="g", delivery="at-least-once")
        with pytest.raises(NotImplementedError, match="assign"):
            c.subscribe(["t"])
        c.close()
    finally:
        h.close()
    assert text(b"\xff\x00") == "hex:ff00" and text("v") == "v" and text(b"v") == "v"


def test_recorder_takes_kafka_python_at_its_default_retries(tmp_path):
    """kafka-python 3 retries forever by default (retries=inf): recorded as Kafka's INT32_MAX,
    never a crash of the recorder."""
    import json
    from kafka import KafkaProducer
    from kafkaverify.plugin.client_history import INT32_MAX, ClientHistory
    h = ClientHistory(tmp_path / "h.jsonl")
    client = KafkaProducer(bootstrap_servers="127.0.0.1:1", api_version=(2, 5))
    try:
        assert client.config["retries"] == float("inf")
        h.producer(client)
    finally:
        client.close(0)
        h.close()
    configs = [json.loads(line) for line in (tmp_path / "h.jsonl").read_text().splitlines()
               if '"producer_config"' in line and '"invoke"' in line]
    assert [c["retries"] for c in configs] == [INT32_MAX]
