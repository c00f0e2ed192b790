"""The records of `__consumer_offsets`: Kafka's own key/value schemas (GroupMetadataManager,
generated from OffsetCommitKey/Value.json and GroupMetadataKey/Value.json), so a log written here
reads as Kafka's. Pure: bytes in, tuples out; the batches are record batch v2 (no producer id).

  offset commit   key v1 (int16 1, group, topic, partition int32)
                  value v3 (int16 3, offset int64, leader_epoch int32, metadata, commit_ts int64)
  group metadata  key v2 (int16 2, group)
                  value v3 (int16 3, protocol_type, generation int32, protocol?, leader?,
                  current_state_timestamp int64, members [member_id, group_instance_id?, client_id,
                  client_host, rebalance_timeout int32, session_timeout int32, subscription bytes,
                  assignment bytes])
A null value is a tombstone (the offset or the group was deleted); `?` = nullable string.
Strings are int16-length-prefixed UTF-8 (-1 = null), bytes int32-length-prefixed.
"""
from __future__ import annotations

import struct
import time
from dataclasses import dataclass

from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from impl.record_schema import Reader, RecordError, blob, data_records, string  # noqa: F401  (re-exported)

OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
GROUP_VALUE_VERSION = 3


@dataclass(frozen=True)
class OffsetRecord:
    group: str
    topic: str
    partition: int
    offset: int | None            # None: tombstone
    leader_epoch: int = -1
    metadata: str = ""
    commit_ts: int = -1


@dataclass(frozen=True)
class MemberRecord:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupRecord:
    group: str
    deleted: bool = False         # tombstone
    protocol_type: str = ""
    generation: int = 0
    protocol: str | None = None
    leader: str | None = None
    state_ts: int = -1
    members: tuple[MemberRecord, ...] = ()


# --- encode -------------------------------------------------------------------------------------

def offset_key(group: str, topic: str, partition: int) -> bytes:
    return struct.pack(">h", OFFSET_KEY_VERSION) + string(group) + string(topic) + struct.pack(">i", partition)


def offset_value(offset: int, leader_epoch: int, metadata: str, commit_ts: int) -> bytes:
    return struct.pack(">hqi", OFFSET_VALUE_VERSION, offset, leader_epoch) + string(metadata or "") + \
        struct.pack(">q", commit_ts)


def group_key(group: str) -> bytes:
    return struct.pack(">h", GROUP_KEY_VERSION) + string(group)


def group_value(g: GroupRecord) -> bytes:
    out = [struct.pack(">h", GROUP_VALUE_VERSION), string(g.protocol_type or ""), struct.pack(">i", g.generation),
           string(g.protocol), string(g.leader), struct.pack(">q", g.state_ts), struct.pack(">i", len(g.members))]
    for m in g.members:
        out += [string(m.member_id), string(m.group_instance_id), string(m.client_id), string(m.client_host),
                struct.pack(">ii", m.rebalance_timeout_ms, m.session_timeout_ms), blob(m.subscription),
                blob(m.assignment)]
    return b"".join(out)


def batch(records: list[tuple[bytes, bytes | None]], now_ms: int | None = None, producer_id: int = -1,
          producer_epoch: int = -1) -> bytes:
    """One record batch v2 of (key, value) records, uncompressed; without producer id, or (a
    transactional offset commit) transactional under the producer's id and epoch, no sequence."""
    ts = int(time.time() * 1000) if now_ms is None else now_ms
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=producer_id >= 0,
                                  producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=-1,
                                  batch_size=1 << 30)
    for i, (k, v) in enumerate(records):
        b.append(i, timestamp=ts, key=k, value=v, headers=[])
    return bytes(b.build())


# --- decode -------------------------------------------------------------------------------------

def decode(key: bytes, value: bytes | None) -> OffsetRecord | GroupRecord:
    r = Reader(key)
    version = r.take(">h")
    if version in (0, 1):
        group, topic, partition = r.string(), r.string(), r.take(">i")
        if value is None:
            return OffsetRecord(group, topic, partition, None)
        v = Reader(value)
        vv = v.take(">h")
        if vv in (0, 1):                      # v0: offset, metadata, ts; v1: + expire ts
            off = v.take(">q")
            meta = v.string()
            ts = v.take(">q")
            return OffsetRecord(group, topic, partition, off, -1, meta or "", ts)
        if vv == 2:                            # v2: offset, metadata, ts
            off = v.take(">q")
            meta = v.string()
            return OffsetRecord(group, topic, partition, off, -1, meta or "", v.take(">q"))
        if vv == 3:
            off, epoch = v.take(">q"), v.take(">i")
            meta = v.string()
            return OffsetRecord(group, topic, partition, off, epoch, meta or "", v.take(">q"))
        raise RecordError(f"offset commit value version {vv} unknown")
    if version == 2:
        group = r.string()
        if value is None:
            return GroupRecord(group, deleted=True)
        v = Reader(value)
        vv = v.take(">h")
        if vv not in (2, 3):
            raise RecordError(f"group metadata value version {vv} unsupported (we write 3)")
        ptype, gen, proto, leader = v.string(), v.take(">i"), v.string(), v.string()
        ts = v.take(">q")
        members = []
        for _ in range(v.take(">i")):
            mid = v.string()
            inst = v.string() if vv >= 3 else None
            cid, host = v.string(), v.string()
            rto, sto = v.take(">i"), v.take(">i")
            members.append(MemberRecord(mid, inst, cid or "", host or "", rto, sto, v.blob(), v.blob()))
        return GroupRecord(group, False, ptype or "", gen, proto, leader, ts, tuple(members))
    raise RecordError(f"key version {version} unknown")


def iter_entries(data: bytes):
    """(log offset, key, value, producer id, transactional, marker) of every record in a run of
    record batches; `marker` is None for data, True / False for a COMMIT / ABORT control record
    (key: int16 version, int16 type 1 commit / 0 abort)."""
    mr = MemoryRecords(data)
    while mr.has_next():
        b = mr.next_batch()
        if b is None:
            break
        for rec in b:
            marker = None
            if b.is_control_batch:
                k = bytes(rec.key or b"")
                if len(k) < 4:
                    continue
                marker = struct.unpack_from(">h", k, 2)[0] == 1
            yield rec.offset, rec.key, rec.value, b.producer_id, b.is_transactional, marker
