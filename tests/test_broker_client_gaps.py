"""What real clients ask of a Kafka broker beyond produce, fetch and groups: DeleteGroups (API key
42; confluent-kafka's AdminClient.delete_consumer_groups in its own process, which must exit 0),
the deletion's tombstones surviving a coordinator fail-over, members' clientHost as Kafka reports
it (`/127.0.0.1`), logStartOffset in produce responses, and real topic ids (one random UUID per
topic, the same from every broker and after a restart)."""
from __future__ import annotations

import subprocess
import sys
import textwrap
import uuid

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from impl.group_coordinator import partition_for
from impl.netclient import SyncConn
from impl.protocol import errors
from tests.broker_fixtures import make_cluster, producer, wait_until  # noqa: F401

pytestmark = pytest.mark.timeout(180)

OFFSETS_PARTITIONS = 3
CFG = {"offsets_topic_num_partitions": OFFSETS_PARTITIONS, "group_initial_rebalance_delay_ms": 0}

DELETE_SCRIPT = textwrap.dedent("""
    import sys
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient
    a = AdminClient({"bootstrap.servers": sys.argv[1], "log_level": 3})
    for attempt in ("first", "second"):
        f = a.delete_consumer_groups([sys.argv[2]], request_timeout=30)[sys.argv[2]]
        try:
            f.result()
            print(attempt, "deleted", flush=True)
        except KafkaException as e:
            print(attempt, e.args[0].name(), flush=True)
""")


def _group_with_offsets(c, topic: str, group: str) -> None:
    """A group that formed, consumed and committed, then left: Empty, with offsets."""
    from kafka import KafkaConsumer
    p = producer(c)
    for i in range(5):
        p.send(topic, f"v{i}".encode(), partition=0).get(30)
    p.close()
    k = KafkaConsumer(topic, bootstrap_servers=c.bootstrap, group_id=group, auto_offset_reset="earliest",
                      enable_auto_commit=False, session_timeout_ms=6000, heartbeat_interval_ms=500)
    try:
        got = []
        wait_until(lambda: got.extend(r for rs in k.poll(500).values() for r in rs) or len(got) >= 5,
                   timeout_s=60, what="the group member read the topic")
        k.commit()
    finally:
        k.close()


def _admin(c):
    from kafka.admin import KafkaAdminClient
    return KafkaAdminClient(bootstrap_servers=c.bootstrap, request_timeout_ms=15000)


def test_delete_groups_confluent_exits_cleanly_and_survives_failover_and_restart(make_cluster):
    c = make_cluster(3, broker_config=CFG)
    c.create_topic("dg", partitions=1, replication_factor=3, min_insync=2)
    _group_with_offsets(c, "dg", "doomed")
    a = _admin(c)
    try:
        assert a.list_group_offsets({"doomed": None})["doomed"], "the group committed offsets"
        r = subprocess.run([sys.executable, "-c", DELETE_SCRIPT, c.bootstrap, "doomed"], capture_output=True,
                           text=True, timeout=90)
        assert r.returncode == 0, r.stderr[-2000:]
        assert r.stdout.split("\n")[:2] == ["first deleted", "second GROUP_ID_NOT_FOUND"], r.stdout + r.stderr
        assert "doomed" not in [g["group_id"] for g in a.list_groups()]
        assert a.list_group_offsets({"doomed": None}) == {"doomed": {}}
    finally:
        a.close()
    # the deletion is tombstones in __consumer_offsets: the next coordinator loads them
    coord = c.leader_of("__consumer_offsets", partition_for("doomed", OFFSETS_PARTITIONS))
    c.kill(coord)
    wait_until(lambda: c.leader_of("__consumer_offsets", partition_for("doomed", OFFSETS_PARTITIONS))
               not in (None, coord), timeout_s=60, what="a new coordinator for the group")

    def gone() -> bool:
        """The group's offsets and the group itself, asked of whoever coordinates it now (a
        fresh admin client each time: the cluster's brokers come and go)."""
        try:
            a = _admin(c)
        except Exception:
            return False
        try:
            return a.list_group_offsets({"doomed": None}) == {"doomed": {}} and \
                "doomed" not in [g["group_id"] for g in a.list_groups()]
        except Exception:          # the new coordinator still loading: ask again
            return False
        finally:
            a.close()
    wait_until(gone, timeout_s=60, what="the new coordinator answers the group's offsets")
    # and after a restart: the old coordinator, back from its own log on disk, leads again
    c.mark_dead_expected(coord)
    c.start_broker(coord)
    c.wait_for_leaders("__consumer_offsets", timeout_s=60, isr_size=3)
    c.move_leader("__consumer_offsets", partition_for("doomed", OFFSETS_PARTITIONS), coord)
    wait_until(gone, timeout_s=60, what="the restarted coordinator answers the group's offsets")


def test_delete_groups_refuses_a_group_with_members_and_reports_client_host(make_cluster):
    from confluent_kafka.admin import AdminClient
    from kafka import KafkaConsumer
    c = make_cluster(3, broker_config=CFG)
    c.create_topic("live", partitions=1, replication_factor=3, min_insync=2)
    k = KafkaConsumer("live", bootstrap_servers=c.bootstrap, group_id="busy", session_timeout_ms=6000,
                      heartbeat_interval_ms=500, client_id="busy-client")
    a = _admin(c)
    try:
        wait_until(lambda: k.poll(200) is not None and bool(k.assignment()), timeout_s=60,
                   what="the member joined")
        assert a.delete_groups(["busy", "never-was"]) == {"busy": "NonEmptyGroupError",
                                                          "never-was": "GroupIdNotFoundError"}
        desc = a.describe_groups(["busy"])["busy"]
        assert [(m["client_id"], m["client_host"]) for m in desc["members"]] == [("busy-client", "/127.0.0.1")]
        ca = AdminClient({"bootstrap.servers": c.bootstrap, "log_level": 3})
        cdesc = ca.describe_consumer_groups(["busy"])["busy"].result(30)
        assert [m.host for m in cdesc.members] == ["/127.0.0.1"]
    finally:
        k.close()
        a.close()


def _metadata_v12(host: str, port: int, topic: str):
    with SyncConn(host, port) as conn:
        r = conn.request(3, 12, {"topics": [{"topic_id": uuid.UUID(int=0), "name": topic}],
                                 "allow_auto_topic_creation": False,
                                 "include_topic_authorized_operations": False})
    [t] = r.topics
    return t.error_code, t.topic_id


def test_topic_ids_and_produce_log_start_offset(make_cluster):
    c = make_cluster(3)
    c.create_topic("ids", partitions=1, replication_factor=3, min_insync=2)
    c.create_topic("other", partitions=1, replication_factor=1)
    c.wait_for_leaders("ids", isr_size=3)
    seen = {i: _metadata_v12(*c.address(i), "ids") for i in range(3)}
    ids = {tid for err, tid in seen.values() if err == 0}
    assert len(ids) == 1 and not ids & {None, uuid.UUID(int=0)}, seen
    [tid] = ids
    assert _metadata_v12(*c.address(0), "other")[1] not in (tid, None, uuid.UUID(int=0))
    # an unknown topic's id is all zeros on the wire (kafka-python decodes it as None)
    assert _metadata_v12(*c.address(0), "absent")[1] in (None, uuid.UUID(int=0))
    c.restart(1)
    wait_until(lambda: _metadata_v12(*c.address(1), "ids") == (0, tid), timeout_s=30,
               what="the restarted broker answers the same topic id")

    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    b.append(0, timestamp=None, key=None, value=b"x", headers=[])
    data = bytes(b.build())
    leader = c.leader_of("ids", 0)
    follower = next(i for i in range(3) if i != leader)

    def produce(node: int):
        with SyncConn(*c.address(node)) as conn:
            r = conn.request(0, 9, {"transactional_id": None, "acks": -1, "timeout_ms": 10000,
                                    "topic_data": [{"name": "ids", "partition_data": [{"index": 0, "records": data}]}]})
        [pr] = r.responses[0].partition_responses
        return pr.error_code, pr.base_offset, pr.log_start_offset
    assert produce(leader) == (0, 0, 0)
    assert produce(follower) == (errors.NOT_LEADER_OR_FOLLOWER, -1, -1)
