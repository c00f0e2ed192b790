"""The Kafka wire codec, server side: framing, request decode, response build/encode.

Uses kafka-python's `kafka.protocol` classes (generated from Kafka's JSON schemas) as the codec
(wire.md). They are not a documented server-side API, so tests/test_broker_protocol.py round-trips
every (api, version) advertised here. Inter-broker control messages are ours: a private API key
(CONTROL_API_KEY) on the same port whose body is JSON; it is never advertised in ApiVersions.
"""
from __future__ import annotations

import json
import struct
from typing import Any

from kafka.protocol.admin import (CreatePartitionsRequest, CreatePartitionsResponse,
                                  CreateTopicsRequest, CreateTopicsResponse,
                                  DeleteTopicsRequest, DeleteTopicsResponse,
                                  DescribeClusterRequest, DescribeClusterResponse,
                                  DescribeConfigsRequest, DescribeConfigsResponse,
                                  DescribeGroupsRequest, DescribeGroupsResponse,
                                  ListGroupsRequest, ListGroupsResponse)
from kafka.protocol.consumer import (FetchRequest, FetchResponse, HeartbeatRequest, HeartbeatResponse,
                                     JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest,
                                     LeaveGroupResponse, ListOffsetsRequest, ListOffsetsResponse,
                                     OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest,
                                     OffsetFetchResponse, OffsetForLeaderEpochRequest,
                                     OffsetForLeaderEpochResponse, SyncGroupRequest, SyncGroupResponse)
from kafka.protocol.metadata import (ApiVersionsRequest, ApiVersionsResponse, FindCoordinatorRequest,
                                     FindCoordinatorResponse, MetadataRequest, MetadataResponse)
from kafka.protocol.producer import ProduceRequest, ProduceResponse
from kafka.protocol.producer.transaction import InitProducerIdRequest, InitProducerIdResponse
from kafka.protocol.producer.transaction import (AddOffsetsToTxnRequest, AddOffsetsToTxnResponse,
                                                 AddPartitionsToTxnRequest, AddPartitionsToTxnResponse,
                                                 EndTxnRequest, EndTxnResponse, TxnOffsetCommitRequest,
                                                 TxnOffsetCommitResponse)
from kafka.protocol.admin import (DescribeTransactionsRequest, DescribeTransactionsResponse,
                                  ListTransactionsRequest, ListTransactionsResponse)
from kafka.protocol.producer.transaction import WriteTxnMarkersRequest, WriteTxnMarkersResponse

MAX_FRAME_BYTES = 100 << 20     # a larger size prefix closes the connection (not a Kafka frame)
CONTROL_API_KEY = 1000          # our LeaderAndIsr-style control request (JSON body)

# api key -> (request class, response class, min version, max version). Ranges from wire.md:
# they work for kafka-python, confluent-kafka and aiokafka alike.
APIS: dict[int, tuple[Any, Any, int, int]] = {
    0: (ProduceRequest, ProduceResponse, 3, 9),
    1: (FetchRequest, FetchResponse, 4, 12),
    2: (ListOffsetsRequest, ListOffsetsResponse, 1, 7),
    3: (MetadataRequest, MetadataResponse, 0, 12),
    18: (ApiVersionsRequest, ApiVersionsResponse, 0, 3),
    19: (CreateTopicsRequest, CreateTopicsResponse, 2, 7),
    23: (OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse, 0, 4),
    # consumer groups (impl/group_handlers.py). No batched variants (FindCoordinator 4+,
    # LeaveGroup 3+, OffsetFetch 8+) and no topic ids (OffsetCommit 9+): wire.md's ranges.
    8: (OffsetCommitRequest, OffsetCommitResponse, 2, 8),
    9: (OffsetFetchRequest, OffsetFetchResponse, 1, 7),
    10: (FindCoordinatorRequest, FindCoordinatorResponse, 0, 3),
    11: (JoinGroupRequest, JoinGroupResponse, 0, 5),
    12: (HeartbeatRequest, HeartbeatResponse, 0, 3),
    13: (LeaveGroupRequest, LeaveGroupResponse, 0, 1),
    14: (SyncGroupRequest, SyncGroupResponse, 0, 3),
    15: (DescribeGroupsRequest, DescribeGroupsResponse, 0, 5),
    16: (ListGroupsRequest, ListGroupsResponse, 0, 4),
}
# Idempotent producer (impl/idempotence.py): aiokafka has only v0, kafka-python and librdkafka
# take the highest up to 4 (5+ are for transactions' KIP-890 epoch bumps).
# Admin surface (impl/admin.py): kafka-python's schemas start DescribeConfigs/DeleteTopics at v1;
# aiokafka has DescribeConfigs <= 2, DeleteTopics <= 3, CreatePartitions <= 1.
APIS.update({
    22: (InitProducerIdRequest, InitProducerIdResponse, 0, 4),
    20: (DeleteTopicsRequest, DeleteTopicsResponse, 1, 4),
    32: (DescribeConfigsRequest, DescribeConfigsResponse, 1, 4),
    37: (CreatePartitionsRequest, CreatePartitionsResponse, 0, 3),
    60: (DescribeClusterRequest, DescribeClusterResponse, 0, 1),
})
# Transactions (impl/txn_handlers.py): transaction version 1 only -- EndTxn 4 (TRANSACTION_ABORTABLE)
# and 5 (KIP-890 part 2) are left out; AddPartitionsToTxn 4 is the batched broker-to-broker form
# (clients cap at 3); TxnOffsetCommit 3 carries KIP-447's generation and member id.
APIS.update({
    24: (AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, 0, 4),
    25: (AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, 0, 3),
    26: (EndTxnRequest, EndTxnResponse, 0, 3),
    28: (TxnOffsetCommitRequest, TxnOffsetCommitResponse, 0, 3),
    65: (DescribeTransactionsRequest, DescribeTransactionsResponse, 0, 0),
    66: (ListTransactionsRequest, ListTransactionsResponse, 0, 1),
})
# Transaction markers, written by a partition leader for the coordinator (impl/txn_log.py):
# kafka-python's schemas (Kafka 4.x) have versions 1-2.
APIS[27] = (WriteTxnMarkersRequest, WriteTxnMarkersResponse, 1, 2)

# Requests this broker sends to another without serving them itself unless APIS lists them: a
# partition leader's verify-only AddPartitionsToTxn to the transaction coordinator.
OUTBOUND: dict[int, tuple[Any, Any, int, int]] = {
    24: (AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, 4, 5),
}


def spec_for(api_key: int) -> tuple[Any, Any, int, int]:
    """The classes of an API this broker serves or sends."""
    return APIS.get(api_key) or OUTBOUND[api_key]

# Kafka error codes (impl/protocol/errors.py), re-exported: handlers use codec.NAME.
from impl.protocol.errors import (  # noqa: F401
    NONE, OFFSET_OUT_OF_RANGE, CORRUPT_MESSAGE, UNKNOWN_TOPIC_OR_PARTITION,
    LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT, MESSAGE_TOO_LARGE,
    STALE_CONTROLLER_EPOCH, NOT_ENOUGH_REPLICAS, NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    INVALID_REQUIRED_ACKS, UNSUPPORTED_VERSION, TOPIC_ALREADY_EXISTS, INVALID_PARTITIONS,
    INVALID_REPLICATION_FACTOR, INVALID_REQUEST, UNKNOWN_SERVER_ERROR, FENCED_LEADER_EPOCH,
    UNKNOWN_LEADER_EPOCH, OFFSET_METADATA_TOO_LARGE, COORDINATOR_LOAD_IN_PROGRESS,
    COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, ILLEGAL_GENERATION, INCONSISTENT_GROUP_PROTOCOL,
    INVALID_GROUP_ID, UNKNOWN_MEMBER_ID, INVALID_SESSION_TIMEOUT, REBALANCE_IN_PROGRESS,
    INVALID_COMMIT_OFFSET_SIZE, MEMBER_ID_REQUIRED, STALE_BROKER_EPOCH, INVALID_PRODUCER_EPOCH,
    INVALID_TXN_STATE, INVALID_PRODUCER_ID_MAPPING, CONCURRENT_TRANSACTIONS, PRODUCER_FENCED,
    UNSTABLE_OFFSET_COMMIT)

_HDR = struct.Struct(">hhi")


class FrameError(Exception):
    """The peer broke framing or sent an undecodable request: close the connection."""


class Unsupported(Exception):
    """A well-framed request for an API or version we do not serve."""

    def __init__(self, api_key: int, api_version: int, correlation_id: int):
        super().__init__(f"unsupported api {api_key} v{api_version}")
        self.api_key, self.api_version, self.correlation_id = api_key, api_version, correlation_id


def frame_size(prefix: bytes) -> int:
    (n,) = struct.unpack(">i", prefix)
    if n < 8 or n > MAX_FRAME_BYTES:
        raise FrameError(f"frame size {n} outside [8, {MAX_FRAME_BYTES}]")
    return n


def peek_header(frame: bytes) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id) of a request frame (without the size prefix)."""
    if len(frame) < 8:
        raise FrameError("request shorter than its header")
    return _HDR.unpack_from(frame, 0)


def decode_request(frame: bytes):
    """Returns the decoded request (its `.header` set). Raises Unsupported or FrameError."""
    key, version, corr = peek_header(frame)
    spec = APIS.get(key)
    if spec is None or not spec[2] <= version <= spec[3]:
        raise Unsupported(key, version, corr)
    try:
        return spec[0][version].decode(frame, header=True)
    except Exception as e:  # the codec raises assorted errors on garbage
        raise FrameError(f"cannot decode api {key} v{version}: {e.__class__.__name__}: {e}") from None


def build(dc, data: dict, version: int):
    """A response/request object from nested dicts: looks up each nested field's data class and
    skips keys the given version lacks (wire.md)."""
    kw = {}
    for name, field in dc.fields.items():
        if name not in data or not field.for_version_q(version):
            continue
        v = data[name]
        if v is not None and field.is_struct_array():
            v = [build(field.data_class, x, version) for x in v]
        elif v is not None and field.is_struct():
            v = build(field.data_class, v, version)
        kw[name] = v
    return dc(version=version, **kw)


def encode_response(api_key: int, version: int, correlation_id: int, data: dict) -> bytes:
    cls = APIS[api_key][1][version]
    resp = build(cls, data, version)
    resp.with_header(correlation_id=correlation_id)
    return resp.encode(header=True, framed=True)


def api_versions_data() -> dict:
    return {"error_code": NONE, "throttle_time_ms": 0,
            "api_keys": [{"api_key": k, "min_version": v[2], "max_version": v[3]}
                         for k, v in sorted(APIS.items())]}


def unsupported_api_versions_response(correlation_id: int) -> bytes:
    """ApiVersions at a version we lack: error 35 with a v0 body listing our ranges; the client
    retries with v0 (KIP-511)."""
    data = api_versions_data()
    data["error_code"] = UNSUPPORTED_VERSION
    return encode_response(18, 0, correlation_id, data)


# --- private control messages ------------------------------------------------------------------

def encode_control_request(correlation_id: int, body: dict, client_id: str = "controller") -> bytes:
    cid = client_id.encode()
    payload = _HDR.pack(CONTROL_API_KEY, 0, correlation_id) + struct.pack(">h", len(cid)) + cid + \
        json.dumps(body, sort_keys=True).encode()
    return struct.pack(">i", len(payload)) + payload


def decode_control_request(frame: bytes) -> dict:
    (n,) = struct.unpack_from(">h", frame, 8)
    try:
        return json.loads(frame[10 + max(n, 0):])
    except ValueError as e:
        raise FrameError(f"bad control request body: {e}") from None


def encode_control_response(correlation_id: int, body: dict) -> bytes:
    payload = struct.pack(">i", correlation_id) + json.dumps(body, sort_keys=True).encode()
    return struct.pack(">i", len(payload)) + payload


def decode_control_response(frame: bytes) -> tuple[int, dict]:
    (corr,) = struct.unpack_from(">i", frame, 0)
    return corr, json.loads(frame[4:])
