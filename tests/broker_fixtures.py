"""Fixtures and helpers for broker tests: real broker processes via impl.cluster.Cluster.

    make_cluster(n, coordinator=url_or_"embedded", generation=..., controller=None, **kw) -> started
        Cluster (controller=N: broker N arranged to be the controller), stopped at teardown; on
        failure the tail of every broker log is printed.

Import with `from tests.broker_fixtures import *  # noqa` in a test module (conftest.py belongs
to the coordination layer). Clients: kafka-python, idempotence off, assigned partitions only.
"""
from __future__ import annotations

import os
import time

import pytest

from impl.cluster import Cluster
# one copy of each, shared with the suite's scenarios (ScenarioTimeout is an AssertionError)
from kafkaverify.nemesis.scenarios import trace_events, wait_until  # noqa: F401

SESSION_TIMEOUT_MS = 2500


def require(condition: bool, reason: str) -> None:
    """Skip when a prerequisite is missing -- or fail under KAFKAVERIFY_REQUIRE_ALL=1 (CI)."""
    if condition:
        return
    if os.environ.get("KAFKAVERIFY_REQUIRE_ALL") == "1":
        pytest.fail(f"{reason} (KAFKAVERIFY_REQUIRE_ALL=1 forbids skipping)", pytrace=False)
    pytest.skip(reason)


@pytest.fixture
def make_cluster(tmp_path, request):
    clusters: list[Cluster] = []

    def make(n: int, coordinator: str = "embedded", generation: str = "current",
             controller: int | None = None, **kw) -> Cluster:
        kw.setdefault("session_timeout_ms", SESSION_TIMEOUT_MS)
        c = Cluster(n, tmp_path / f"cluster{len(clusters)}", generation=generation,
                    coordinator=coordinator, **kw)
        clusters.append(c)
        c.start(controller=controller)
        return c

    yield make
    for c in clusters:
        c.stop()
        # pytest shows captured teardown output only for failing tests
        for i in range(c.n):
            p = c.data_dir / f"broker-{i}.log"
            if p.exists():
                print(f"--- broker-{i}.log (tail) ---\n" + p.read_text(errors="replace")[-3000:])


def live_bootstrap(cluster: Cluster) -> str:
    """The bootstrap list of the brokers running now: a client bootstrapping from a list with
    killed brokers in it picks among them at random with growing back-off, and can run out of
    its bootstrap time on the dead ones before it tries a live one."""
    alive = cluster.alive()
    return ",".join(f"{h}:{p}" for i, (h, p) in enumerate(zip(cluster.hosts, cluster.ports))
                    if i in alive) or cluster.bootstrap


def producer(cluster: Cluster, acks="all", **kw):
    from kafka import KafkaProducer
    return KafkaProducer(bootstrap_servers=live_bootstrap(cluster), enable_idempotence=False, acks=acks,
                         request_timeout_ms=kw.pop("request_timeout_ms", 10000),
                         retries=kw.pop("retries", 0), max_in_flight_requests_per_connection=1,
                         linger_ms=kw.pop("linger_ms", 0), **kw)


def consume_all(cluster: Cluster, topic: str, partition: int = 0, idle_ms: int = 2000,
                timeout_s: float = 20) -> list[tuple[int, bytes]]:
    """(offset, value) of every committed record in the partition, via an assigned consumer."""
    from kafka import KafkaConsumer, TopicPartition
    c = KafkaConsumer(bootstrap_servers=live_bootstrap(cluster), enable_auto_commit=False, group_id=None,
                      consumer_timeout_ms=idle_ms, request_timeout_ms=15000)
    try:
        tp = TopicPartition(topic, partition)
        c.assign([tp])
        c.seek_to_beginning(tp)
        out, deadline = [], time.monotonic() + timeout_s
        for m in c:
            out.append((m.offset, m.value))
            if time.monotonic() > deadline:
                break
        return out
    finally:
        c.close()
