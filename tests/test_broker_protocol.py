"""Wire protocol: codec round trips for every advertised (api, version), and a live broker's
answers to good, bad and hostile requests, with kafka-python, confluent-kafka and aiokafka."""
from __future__ import annotations

import asyncio
import socket
import struct
import time

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from impl.cluster import Cluster
from impl.netclient import SyncConn
from impl.protocol import codec
from tests.broker_fixtures import consume_all, producer, require

pytestmark = pytest.mark.timeout(90)


def batch(values, ts=None) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i, v in enumerate(values):
        b.append(i, timestamp=(ts or int(time.time() * 1000)) + i, key=None, value=v, headers=[])
    return bytes(b.build())


# --- codec round trips --------------------------------------------------------------------------

SAMPLE_REQUESTS = {
    0: {"acks": -1, "timeout_ms": 1000, "transactional_id": None,
        "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": b"xyz"}]}]},
    1: {"replica_id": 2, "max_wait_ms": 100, "min_bytes": 1, "max_bytes": 1000, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1, "rack_id": "",
        "topics": [{"topic": "t", "partitions": [{"partition": 0, "current_leader_epoch": 3, "fetch_offset": 7,
                                                  "last_fetched_epoch": -1, "log_start_offset": 0,
                                                  "partition_max_bytes": 100}]}], "forgotten_topics_data": []},
    2: {"replica_id": -1, "isolation_level": 0,
        "topics": [{"name": "t", "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -2}]}]},
    3: {"topics": [{"name": "t"}], "allow_auto_topic_creation": False},
    18: {"client_software_name": "x", "client_software_version": "1"},
    19: {"topics": [{"name": "t", "num_partitions": 2, "replication_factor": 1, "assignments": [],
                     "configs": [{"name": "min.insync.replicas", "value": "1"}]}], "timeout_ms": 1000,
         "validate_only": False},
    23: {"replica_id": 1, "topics": [{"topic": "t", "partitions": [{"partition": 0, "current_leader_epoch": 4,
                                                                     "leader_epoch": 3}]}]},
    # consumer groups
    8: {"group_id": "g", "generation_id_or_member_epoch": 5, "member_id": "m-1", "group_instance_id": None,
        "retention_time_ms": -1, "topics": [{"name": "t", "partitions": [
            {"partition_index": 0, "committed_offset": 42, "committed_leader_epoch": 3,
             "committed_metadata": "md"}]}]},
    9: {"group_id": "g", "topics": [{"name": "t", "partition_indexes": [0, 1]}], "require_stable": False},
    10: {"key": "g", "key_type": 0},
    11: {"group_id": "g", "session_timeout_ms": 10000, "rebalance_timeout_ms": 30000, "member_id": "m-1",
         "group_instance_id": None, "protocol_type": "consumer",
         "protocols": [{"name": "range", "metadata": b"sub"}]},
    12: {"group_id": "g", "generation_id": 5, "member_id": "m-1", "group_instance_id": None},
    13: {"group_id": "g", "member_id": "m-1"},
    14: {"group_id": "g", "generation_id": 5, "member_id": "m-1", "group_instance_id": None,
         "assignments": [{"member_id": "m-1", "assignment": b"asg"}]},
    15: {"groups": ["g"], "include_authorized_operations": False},
    16: {"states_filter": ["Stable"]},
}

SAMPLE_RESPONSES = {
    0: {"responses": [{"name": "t", "partition_responses": [{"index": 0, "error_code": 0, "base_offset": 42}]}]},
    1: {"responses": [{"topic": "t", "partitions": [{"partition_index": 0, "high_watermark": 9,
                                                     "last_stable_offset": 9, "records": b"abc"}]}]},
    2: {"topics": [{"name": "t", "partitions": [{"partition_index": 0, "error_code": 0, "timestamp": -1,
                                                 "offset": 5}]}]},
    3: {"brokers": [{"node_id": 1, "host": "h", "port": 9, "rack": None}], "controller_id": 1,
        "cluster_id": "c", "topics": [{"error_code": 0, "name": "t", "partitions": [
            {"error_code": 0, "partition_index": 0, "leader_id": 1, "leader_epoch": 2,
             "replica_nodes": [1], "isr_nodes": [1], "offline_replicas": []}]}]},
    18: codec.api_versions_data(),
    19: {"topics": [{"name": "t", "error_code": 36, "error_message": None}]},
    23: {"topics": [{"topic": "t", "partitions": [{"error_code": 0, "partition": 0, "leader_epoch": 3,
                                                   "end_offset": 77}]}]},
    8: {"topics": [{"name": "t", "partitions": [{"partition_index": 0, "error_code": 22}]}]},
    9: {"topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 42,
                                                 "committed_leader_epoch": 3, "metadata": "md", "error_code": 0}]}],
        "error_code": 0},
    10: {"error_code": 0, "error_message": None, "node_id": 2, "host": "h", "port": 9},
    11: {"error_code": 0, "generation_id": 5, "protocol_type": "consumer", "protocol_name": "range",
         "leader": "m-1", "member_id": "m-1", "members": [{"member_id": "m-1", "metadata": b"sub"}]},
    12: {"error_code": 27},
    13: {"error_code": 0},
    14: {"error_code": 0, "assignment": b"asg"},
    15: {"groups": [{"error_code": 0, "group_id": "g", "group_state": "Stable", "protocol_type": "consumer",
                     "protocol_data": "range", "members": [{"member_id": "m-1", "client_id": "c", "client_host": "",
                                                            "member_metadata": b"sub", "member_assignment": b"asg"}]}]},
    16: {"error_code": 0, "groups": [{"group_id": "g", "protocol_type": "consumer", "group_state": "Stable"}]},
}

# idempotent producer (impl/idempotence.py)
SAMPLE_REQUESTS[22] = {"transactional_id": None, "transaction_timeout_ms": 60000, "producer_id": -1,
                       "producer_epoch": -1}
SAMPLE_RESPONSES[22] = {"error_code": 0, "producer_id": 12345, "producer_epoch": 0}
# admin surface (impl/admin.py)
SAMPLE_REQUESTS.update({
    20: {"topic_names": ["t"], "timeout_ms": 1000},
    32: {"resources": [{"resource_type": 2, "resource_name": "t", "configuration_keys": None}],
         "include_synonyms": True, "include_documentation": False},
    37: {"topics": [{"name": "t", "count": 3, "assignments": None}], "timeout_ms": 1000, "validate_only": False},
    60: {"include_cluster_authorized_operations": False, "endpoint_type": 1},
})
SAMPLE_RESPONSES.update({
    20: {"responses": [{"name": "t", "error_code": 0}]},
    32: {"results": [{"error_code": 0, "error_message": None, "resource_type": 2, "resource_name": "t",
                      "configs": [{"name": "min.insync.replicas", "value": "2", "read_only": False,
                                   "config_source": 1, "is_default": False, "is_sensitive": False,
                                   "synonyms": [], "config_type": 3, "documentation": None}]}]},
    37: {"results": [{"name": "t", "error_code": 37, "error_message": "no"}]},
    60: {"error_code": 0, "cluster_id": "c", "controller_id": 1, "endpoint_type": 1,
         "brokers": [{"broker_id": 1, "host": "h", "port": 9, "rack": None}]},
})
# transaction markers (impl/txn_log.py)
SAMPLE_REQUESTS[27] = {"markers": [{"producer_id": 7, "producer_epoch": 2, "transaction_result": True,
                                    "topics": [{"name": "t", "partition_indexes": [0, 1]}],
                                    "coordinator_epoch": 4, "transaction_version": 0}]}
SAMPLE_RESPONSES[27] = {"markers": [{"producer_id": 7, "topics": [
    {"name": "t", "partitions": [{"partition_index": 1, "error_code": 52}]}]}]}

# the transaction coordinator's APIs (impl/txn_handlers.py, TxnOffsetCommit in impl/group_handlers.py);
# AddPartitionsToTxn carries both the v0-3 (client) and the v4 (batched, broker) fields
SAMPLE_REQUESTS.update({
    24: {"v3_and_below_transactional_id": "tx", "v3_and_below_producer_id": 7, "v3_and_below_producer_epoch": 2,
         "v3_and_below_topics": [{"name": "t", "partitions": [0, 1]}],
         "transactions": [{"transactional_id": "tx", "producer_id": 7, "producer_epoch": 2, "verify_only": True,
                           "topics": [{"name": "t", "partitions": [0, 1]}]}]},
    25: {"transactional_id": "tx", "producer_id": 7, "producer_epoch": 2, "group_id": "g"},
    26: {"transactional_id": "tx", "producer_id": 7, "producer_epoch": 2, "committed": True},
    28: {"transactional_id": "tx", "group_id": "g", "producer_id": 7, "producer_epoch": 2, "generation_id": 3,
         "member_id": "m", "group_instance_id": None,
         "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 42,
                                                  "committed_leader_epoch": 1, "committed_metadata": ""}]}]},
    65: {"transactional_ids": ["tx"]},
    66: {"state_filters": ["Ongoing"], "producer_id_filters": [], "duration_filter": -1},
})
SAMPLE_RESPONSES.update({
    24: {"error_code": 0, "results_by_topic_v3_and_below": [{"name": "t", "results_by_partition": [
             {"partition_index": 0, "partition_error_code": 51}]}],
         "results_by_transaction": [{"transactional_id": "tx", "topic_results": [{"name": "t", "results_by_partition": [
             {"partition_index": 0, "partition_error_code": 51}]}]}]},
    25: {"error_code": 90},
    26: {"error_code": 48},
    28: {"topics": [{"name": "t", "partitions": [{"partition_index": 0, "error_code": 22}]}]},
    65: {"transaction_states": [{"error_code": 0, "transactional_id": "tx", "transaction_state": "Ongoing",
                                 "transaction_timeout_ms": 60000, "transaction_start_time_ms": 5, "producer_id": 7,
                                 "producer_epoch": 2, "topics": [{"topic": "t", "partitions": [0, 1]}]}]},
    66: {"error_code": 0, "unknown_state_filters": [], "transaction_states": [
        {"transactional_id": "tx", "producer_id": 7, "transaction_state": "Ongoing"}]},
})

ALL_VERSIONS = [(k, v) for k, spec in sorted(codec.APIS.items()) for v in range(spec[2], spec[3] + 1)]


@pytest.mark.parametrize("version", range(codec.OUTBOUND[24][2], codec.OUTBOUND[24][3] + 1))
def test_outbound_verify_only_add_partitions_round_trip(version):
    """The verify-only AddPartitionsToTxn a leader sends the coordinator, both directions."""
    from impl import netclient
    body = {"transactions": [{"transactional_id": "tx", "producer_id": 7, "producer_epoch": 2, "verify_only": True,
                              "topics": [{"name": "t", "partitions": [3]}]}]}
    frame = netclient._encode_request(24, version, 5, body, "b")
    got = codec.spec_for(24)[0][version].decode(frame[4:], header=True)
    tr = got.transactions[0]
    assert (tr.transactional_id, tr.producer_epoch, tr.verify_only, list(tr.topics[0].partitions)) == ("tx", 2, True, [3])
    resp = codec.build(codec.spec_for(24)[1][version], {"throttle_time_ms": 0, "error_code": 0, "results_by_transaction": [
        {"transactional_id": "tx", "topic_results": [{"name": "t", "results_by_partition": [
            {"partition_index": 3, "partition_error_code": 48}]}]}]}, version)
    resp.with_header(correlation_id=5)
    back = netclient._decode_response(24, version, resp.encode(header=True, framed=True)[4:])
    assert back.results_by_transaction[0].topic_results[0].results_by_partition[0].partition_error_code == 48


@pytest.mark.parametrize("api,version", ALL_VERSIONS)
def test_request_round_trip(api, version):
    req = codec.build(codec.APIS[api][0][version], SAMPLE_REQUESTS[api], version)
    req.with_header(correlation_id=99, client_id="rt")
    frame = req.encode(header=True, framed=True)
    assert codec.frame_size(frame[:4]) == len(frame) - 4
    got = codec.decode_request(frame[4:])
    assert got.header.correlation_id == 99 and got.header.request_api_key == api
    assert got.header.request_api_version == version
    if api == 0:
        assert bytes(got.topic_data[0].partition_data[0].records) == b"xyz" and got.acks == -1
    if api == 1:
        fp = got.topics[0].partitions[0]
        assert (fp.fetch_offset, got.replica_id) == (7, 2)
        assert fp.current_leader_epoch == (3 if version >= 9 else -1)
    if api == 23:
        assert got.topics[0].partitions[0].leader_epoch == 3
    if api == 22:
        assert got.transactional_id is None and got.transaction_timeout_ms == 60000
    if api == 24:
        parts = got.v3_and_below_topics if version <= 3 else got.transactions[0].topics
        assert list(parts[0].partitions) == [0, 1]
        assert (got.v3_and_below_producer_epoch if version <= 3 else got.transactions[0].verify_only) in (2, True)
    if api == 26:
        assert (got.transactional_id, got.producer_epoch, got.committed) == ("tx", 2, True)
    if api == 28:
        assert got.topics[0].partitions[0].committed_offset == 42
        assert got.generation_id == (3 if version >= 3 else -1)
    if api == 20:
        assert list(got.topic_names) == ["t"]
    if api == 32:
        assert got.resources[0].resource_name == "t" and got.resources[0].resource_type == 2
    if api == 37:
        assert got.topics[0].count == 3
    if api == 8:
        p = got.topics[0].partitions[0]
        assert (got.group_id, got.generation_id_or_member_epoch, p.committed_offset) == ("g", 5, 42)
        assert p.committed_leader_epoch == (3 if version >= 6 else -1)
    if api == 9:
        assert got.group_id == "g" and list(got.topics[0].partition_indexes) == [0, 1]
    if api == 10:
        assert got.key == "g"
    if api == 11:
        assert (got.member_id, got.session_timeout_ms, bytes(got.protocols[0].metadata)) == ("m-1", 10000, b"sub")
        assert got.rebalance_timeout_ms == (30000 if version >= 1 else -1)
    if api in (12, 13):
        assert got.member_id == "m-1"
    if api == 14:
        assert got.generation_id == 5 and bytes(got.assignments[0].assignment) == b"asg"
    if api == 15:
        assert list(got.groups) == ["g"]
    if api == 16:
        assert list(got.states_filter or []) == (["Stable"] if version >= 4 else [])
    if api == 27:
        m = got.markers[0]
        assert (m.producer_id, m.producer_epoch, m.transaction_result, m.coordinator_epoch) == (7, 2, True, 4)
        assert list(m.topics[0].partition_indexes) == [0, 1]


@pytest.mark.parametrize("api,version", ALL_VERSIONS)
def test_response_round_trip(api, version):
    frame = codec.encode_response(api, version, 7, SAMPLE_RESPONSES[api])
    resp = codec.APIS[api][1][version].decode(frame, header=True, framed=True)
    assert resp.header.correlation_id == 7
    if api == 0:
        assert resp.responses[0].partition_responses[0].base_offset == 42
    if api == 1:
        assert bytes(resp.responses[0].partitions[0].records) == b"abc"
        assert resp.responses[0].partitions[0].high_watermark == 9
    if api == 3:
        assert resp.topics[0].partitions[0].leader_id == 1 and resp.brokers[0].port == 9
    if api == 18:
        assert {(a.api_key, a.min_version, a.max_version) for a in resp.api_keys} == \
            {(k, s[2], s[3]) for k, s in codec.APIS.items()}
    if api == 23:
        assert resp.topics[0].partitions[0].end_offset == 77
    if api == 22:
        assert (resp.producer_id, resp.producer_epoch, resp.error_code) == (12345, 0, 0)
    if api == 24:
        topics = resp.results_by_topic_v3_and_below if version <= 3 else resp.results_by_transaction[0].topic_results
        assert topics[0].results_by_partition[0].partition_error_code == 51
    if api == 65:
        st = resp.transaction_states[0]
        assert (st.transaction_state, st.producer_epoch, list(st.topics[0].partitions)) == ("Ongoing", 2, [0, 1])
    if api == 20:
        assert resp.responses[0].name == "t"
    if api == 32:
        c = resp.results[0].configs[0]
        assert (c.name, c.value) == ("min.insync.replicas", "2")
    if api == 37:
        assert resp.results[0].error_code == 37
    if api == 60:
        assert resp.brokers[0].port == 9 and resp.controller_id == 1
    if api == 8:
        assert resp.topics[0].partitions[0].error_code == 22
    if api == 9:
        assert resp.topics[0].partitions[0].committed_offset == 42
        assert resp.topics[0].partitions[0].committed_leader_epoch == (3 if version >= 5 else -1)
    if api == 10:
        assert (resp.node_id, resp.host, resp.port) == (2, "h", 9)
    if api == 11:
        assert (resp.generation_id, resp.leader, bytes(resp.members[0].metadata)) == (5, "m-1", b"sub")
    if api == 12:
        assert resp.error_code == 27
    if api == 14:
        assert bytes(resp.assignment) == b"asg"
    if api == 15:
        g = resp.groups[0]
        assert (g.group_state, bytes(g.members[0].member_assignment)) == ("Stable", b"asg")
    if api == 16:
        assert resp.groups[0].group_id == "g"


def test_control_message_round_trip():
    body = {"controller_epoch": 3, "partitions": [{"topic": "t", "leader": 1}]}
    frame = codec.encode_control_request(5, body)
    assert codec.peek_header(frame[4:]) == (codec.CONTROL_API_KEY, 0, 5)
    assert codec.decode_control_request(frame[4:]) == body
    assert codec.decode_control_response(codec.encode_control_response(5, {"a": 1})[4:]) == (5, {"a": 1})


# --- a live single broker -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def single(tmp_path_factory):
    c = Cluster(1, tmp_path_factory.mktemp("proto"), coordinator="embedded", session_timeout_ms=2500)
    c.start()
    c.create_topic("p", partitions=1, replication_factor=1)
    yield c
    c.stop()


def _raw(c: Cluster) -> socket.socket:
    return socket.create_connection(c.address(0), timeout=10)


def _closed(s: socket.socket) -> bool:
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True


def _api_versions_ok(c) -> None:
    with SyncConn(*c.address(0)) as conn:
        assert conn.request(18, 3, {"client_software_name": "t", "client_software_version": "1"}).error_code == 0


def test_unsupported_api_versions_version_gets_error_35_and_v0_body(single):
    with _raw(single) as s:
        hdr = struct.pack(">hhih", 18, 9, 123, 1) + b"x"
        s.sendall(struct.pack(">i", len(hdr) + 3) + hdr + b"\x00\x00\x00")
        size = struct.unpack(">i", s.recv(4))[0]
        body = b""
        while len(body) < size:
            body += s.recv(size - len(body))
    resp = codec.APIS[18][1][0].decode(body, header=True)
    assert resp.header.correlation_id == 123 and resp.error_code == 35
    assert any(a.api_key == 0 and a.max_version == 9 for a in resp.api_keys)


@pytest.mark.parametrize("payload", [
    struct.pack(">i", 200 << 20) + b"\x00" * 16,                       # oversized frame
    struct.pack(">i", 3) + b"abc",                                       # shorter than a header
    struct.pack(">i", 40) + struct.pack(">hhi", 0, 7, 1) + b"\xff" * 32,  # undecodable Produce v7
    struct.pack(">i", 12) + struct.pack(">hhih", 999, 0, 1, -1) + b"\x00\x00",  # unknown api
    struct.pack(">i", 12) + struct.pack(">hhih", 1, 99, 1, -1) + b"\x00\x00",   # Fetch v99
], ids=["oversized", "short", "garbage", "unknown-api", "bad-version"])
def test_bad_connections_are_closed_and_broker_keeps_serving(single, payload):
    with _raw(single) as s:
        s.sendall(payload)
        assert _closed(s)
    _api_versions_ok(single)


def test_produce_corrupt_crc_and_unknown_topic(single):
    data = bytearray(batch([b"ok"]))
    data[-1] ^= 0xFF
    with SyncConn(*single.address(0)) as conn:
        r = conn.request(0, 7, {"acks": 1, "timeout_ms": 1000, "transactional_id": None, "topic_data": [
            {"name": "p", "partition_data": [{"index": 0, "records": bytes(data)}]},
            {"name": "nope", "partition_data": [{"index": 0, "records": batch([b"x"])}]}]})
    errs = {t.name: t.partition_responses[0].error_code for t in r.responses}
    assert errs == {"p": codec.CORRUPT_MESSAGE, "nope": codec.UNKNOWN_TOPIC_OR_PARTITION}


def test_fetch_long_poll_and_list_offsets(single):
    c = single
    c.create_topic("lp", partitions=1, replication_factor=1)
    fetch = {"replica_id": -1, "max_wait_ms": 600, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
             "session_id": 0, "session_epoch": -1, "rack_id": "", "forgotten_topics_data": [],
             "topics": [{"topic": "lp", "partitions": [{"partition": 0, "current_leader_epoch": -1,
                                                        "fetch_offset": 0, "last_fetched_epoch": -1,
                                                        "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]}
    with SyncConn(*c.address(0)) as conn:
        t0 = time.monotonic()
        r = conn.request(1, 12, fetch)
        waited = time.monotonic() - t0
    assert bytes(r.responses[0].partitions[0].records) == b"" and 0.5 <= waited < 3
    # a produce during the wait ends it early with the data
    import threading
    ts0 = 1_700_000_000_000
    def later():
        time.sleep(0.3)
        with SyncConn(*c.address(0)) as p:
            p.request(0, 7, {"acks": 1, "timeout_ms": 1000, "transactional_id": None, "topic_data": [
                {"name": "lp", "partition_data": [{"index": 0, "records": batch([b"a", b"b", b"c"], ts=ts0)}]}]})
    th = threading.Thread(target=later)
    th.start()
    fetch["max_wait_ms"] = 5000
    with SyncConn(*c.address(0)) as conn:
        t0 = time.monotonic()
        r = conn.request(1, 12, fetch)
        waited = time.monotonic() - t0
    th.join()
    part = r.responses[0].partitions[0]
    assert len(bytes(part.records)) > 0 and part.high_watermark == 3 and waited < 3

    def list_offset(ts):
        with SyncConn(*c.address(0)) as conn:
            r = conn.request(2, 4, {"replica_id": -1, "isolation_level": 0, "topics": [
                {"name": "lp", "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": ts}]}]})
        p = r.topics[0].partitions[0]
        return p.offset, p.timestamp
    assert list_offset(-2)[0] == 0
    assert list_offset(-1)[0] == 3
    assert list_offset(ts0 + 1) == (1, ts0 + 1)
    assert list_offset(ts0 + 50) == (-1, -1)
    # OffsetsForLeaderEpoch: the only epoch (0) ends at the LEO
    with SyncConn(*c.address(0)) as conn:
        r = conn.request(23, 3, {"replica_id": -1, "topics": [
            {"topic": "lp", "partitions": [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]})
    assert (r.topics[0].partitions[0].leader_epoch, r.topics[0].partitions[0].end_offset) == (0, 3)


def test_kafka_python_round_trip_acks_1(single):
    c = single
    c.create_topic("kp", partitions=1, replication_factor=1)
    p = producer(c, acks=1)
    offs = [p.send("kp", b"v%d" % i, partition=0).get(10).offset for i in range(30)]
    p.close()
    assert offs == list(range(30))
    assert consume_all(c, "kp", 0, idle_ms=1000) == [(i, b"v%d" % i) for i in range(30)]


def test_confluent_producer_and_aiokafka_consumer(single):
    try:
        import confluent_kafka
        import aiokafka
    except ImportError as e:
        require(False, f"client library missing: {e}")
    c = single
    c.create_topic("cf", partitions=1, replication_factor=1)
    p = confluent_kafka.Producer({"bootstrap.servers": c.bootstrap, "enable.idempotence": False, "acks": "all",
                                  "linger.ms": 5, "compression.type": "lz4"})
    offsets = []
    for i in range(500):
        p.produce("cf", b"c%d" % i, partition=0, on_delivery=lambda err, m: offsets.append((err, m.offset())))
    assert p.flush(20) == 0
    assert all(e is None for e, _ in offsets) and sorted(o for _, o in offsets) == list(range(500))

    async def read():
        cons = aiokafka.AIOKafkaConsumer(bootstrap_servers=c.bootstrap, enable_auto_commit=False, group_id=None)
        await cons.start()
        try:
            tp = aiokafka.TopicPartition("cf", 0)
            cons.assign([tp])
            await cons.seek_to_beginning(tp)
            out = []
            while len(out) < 500:
                batch = await asyncio.wait_for(cons.getmany(tp, timeout_ms=1000), 15)
                out += [(m.offset, m.value) for m in batch.get(tp, [])]
            return out
        finally:
            await cons.stop()
    got = asyncio.run(read())
    assert got == [(i, b"c%d" % i) for i in range(500)]
