"""The admin surface with each client's admin client: describe a topic's and a broker's configs
(the values the broker applies, Kafka's names), create partitions (new leaders appear and serve),
delete a topic (gone from metadata and from disk; the name can be reused)."""
from __future__ import annotations

import asyncio

import pytest

from impl.cluster import Cluster
from tests.broker_fixtures import wait_until

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def three(tmp_path_factory):
    c = Cluster(3, tmp_path_factory.mktemp("admin"), session_timeout_ms=2500,
                broker_config={"log": {"segment_bytes": 1 << 20}})
    c.start()
    yield c
    c.stop()


def _partitions(c, topic):
    st = c.status()
    return sorted(p["partition"] for p in st["partitions"] if p["topic"] == topic)


def _gone_from_disk(c, topic) -> bool:
    return not any((c.broker_dir(i) / f"{topic}-0").exists() for i in range(c.n))


def test_confluent_admin(three):
    from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions
    three.create_topic("ca", partitions=1, replication_factor=3, min_insync=2)
    a = AdminClient({"bootstrap.servers": three.bootstrap, "log_level": 3})
    res = ConfigResource(ConfigResource.Type.TOPIC, "ca")
    cfg = a.describe_configs([res])[res].result(30)
    assert cfg["min.insync.replicas"].value == "2" and cfg["cleanup.policy"].value == "delete"
    assert cfg["segment.bytes"].value == str(1 << 20) and cfg["unclean.leader.election.enable"].value == "false"
    cl = a.describe_cluster().result(30)                                # DescribeCluster
    assert sorted(n.id for n in cl.nodes) == [0, 1, 2] and cl.controller.id == three.controller()
    bres = ConfigResource(ConfigResource.Type.BROKER, "1")
    assert a.describe_configs([bres])[bres].result(30)["broker.id"].value == "1"
    a.create_partitions([NewPartitions("ca", 3)])["ca"].result(30)
    three.wait_for_leaders("ca")
    assert _partitions(three, "ca") == [0, 1, 2]
    a.delete_topics(["ca"])["ca"].result(30)
    wait_until(lambda: "ca" not in a.list_topics(timeout=10).topics and _gone_from_disk(three, "ca"),
               what="topic ca deleted")
    three.create_topic("ca", partitions=1, replication_factor=1)         # the name is free again


def test_kafka_python_admin(three):
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewPartitions
    three.create_topic("ka", partitions=1, replication_factor=3, min_insync=2)
    a = KafkaAdminClient(bootstrap_servers=three.bootstrap)
    try:
        r = a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "ka")])
        assert r["topic"]["ka"]["min.insync.replicas"]["value"] == "2"     # only non-defaults by default
        a.create_partitions({"ka": NewPartitions(total_count=2)})
        three.wait_for_leaders("ka")
        assert _partitions(three, "ka") == [0, 1]
        a.delete_topics(["ka"])
        wait_until(lambda: "ka" not in a.list_topics() and _gone_from_disk(three, "ka"), what="topic ka deleted")
    finally:
        a.close()


def test_aiokafka_admin(three):
    from aiokafka.admin import AIOKafkaAdminClient, NewPartitions
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
    three.create_topic("aa", partitions=1, replication_factor=3, min_insync=2)

    async def go():
        a = AIOKafkaAdminClient(bootstrap_servers=three.bootstrap)
        await a.start()
        try:
            r = await a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "aa")])
            assert "min.insync.replicas" in repr(r)
            await a.create_partitions({"aa": NewPartitions(total_count=2)})
            await asyncio.to_thread(three.wait_for_leaders, "aa")
            assert _partitions(three, "aa") == [0, 1]
            await a.delete_topics(["aa"])
        finally:
            await a.close()
    asyncio.run(go())
    wait_until(lambda: "aa" not in [p["topic"] for p in three.status()["partitions"]] and _gone_from_disk(three, "aa"),
               what="topic aa deleted")
