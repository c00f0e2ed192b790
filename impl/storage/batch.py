"""Record batch v2 framing: the only parsing the broker does on stored data.

Batches are stored as received. The broker rewrites baseOffset (bytes 0-7) and
partitionLeaderEpoch (bytes 12-15); the CRC-32C covers bytes 21.. only, so rewriting them
never invalidates a batch and compression passes through untouched (wire.md).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from kafka.record.util import calc_crc32c

HEADER_SIZE = 61          # v2 batch header, fixed
LOG_OVERHEAD = 12         # baseOffset int64 + batchLength int32
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD
_HDR = struct.Struct(">qiibIhiqqqhii")
TRANSACTIONAL_FLAG = 0x10     # attributes bit 4 (DefaultRecordBatch.TRANSACTIONAL_FLAG_MASK)
CONTROL_FLAG = 0x20           # attributes bit 5 (CONTROL_FLAG_MASK)
COMPRESSION_MASK = 0x07
ABORT, COMMIT = 0, 1          # ControlRecordType


class CorruptBatch(Exception):
    """A batch that fails framing, magic or CRC checks."""


@dataclass(frozen=True)
class BatchInfo:
    base_offset: int
    size: int                 # total bytes, including the 12-byte log overhead
    leader_epoch: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    records_count: int
    producer_epoch: int = -1      # idempotence fields (impl/producer_state.py)
    base_sequence: int = -1
    attributes: int = 0
    control_type: int = -1        # a control batch's marker: ABORT 0 / COMMIT 1 (else -1)
    coordinator_epoch: int = -1   # and the coordinator epoch its value carries

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG)


def parse_header(buf, pos: int = 0) -> BatchInfo:
    (base, blen, epoch, magic, _crc, attrs, lod, bts, mts, pid, pe, bs, cnt) = _HDR.unpack_from(buf, pos)
    if magic != 2:
        raise CorruptBatch(f"unsupported magic {magic} at position {pos}")
    if blen < MIN_BATCH_LENGTH:
        raise CorruptBatch(f"batch length {blen} below minimum at position {pos}")
    return BatchInfo(base, blen + LOG_OVERHEAD, epoch, lod, bts, mts, pid, cnt, pe, bs, attrs)


def crc_ok(buf, pos: int, size: int) -> bool:
    stored = struct.unpack_from(">I", buf, pos + 17)[0]
    return calc_crc32c(bytes(buf[pos + 21:pos + size])) == stored


def iter_batches(buf, *, check_crc: bool):
    """Yields (position, BatchInfo) for each complete batch; raises CorruptBatch on the first bad
    one, with `.position` set so callers can truncate there. A trailing partial batch also raises."""
    pos, n = 0, len(buf)
    while pos < n:
        try:
            if n - pos < HEADER_SIZE:
                raise CorruptBatch(f"partial batch header at position {pos}")
            info = parse_header(buf, pos)
            if pos + info.size > n:
                raise CorruptBatch(f"batch at position {pos} ends past the data ({info.size} bytes)")
            if check_crc and not crc_ok(buf, pos, info.size):
                raise CorruptBatch(f"CRC mismatch in batch at position {pos}")
        except (CorruptBatch, struct.error) as e:
            err = e if isinstance(e, CorruptBatch) else CorruptBatch(str(e))
            err.position = pos  # type: ignore[attr-defined]
            raise err from None
        if info.attributes & CONTROL_FLAG:
            info = _with_marker(buf, pos, info)
        yield pos, info
        pos += info.size


def rewrite(buf: bytearray, pos: int, base_offset: int, leader_epoch: int) -> None:
    struct.pack_into(">q", buf, pos, base_offset)
    struct.pack_into(">i", buf, pos + 12, leader_epoch)


# --- control batches (transaction markers) --------------------------------------------------------

def _varint(buf, i: int) -> tuple[int, int]:
    """A zig-zag varint (record fields) at `i`: (value, next index)."""
    shift = raw = 0
    while True:
        if i >= len(buf) or shift > 63:
            raise CorruptBatch("truncated varint in a control record")
        b = buf[i]
        i += 1
        raw |= (b & 0x7F) << shift
        if not b & 0x80:
            return (raw >> 1) ^ -(raw & 1), i
        shift += 7


def _put_varint(v: int) -> bytes:
    z = (v << 1) ^ (v >> 63)
    out = bytearray()
    while True:
        if z < 0x80:
            out.append(z)
            return bytes(out)
        out.append((z & 0x7F) | 0x80)
        z >>= 7


def _with_marker(buf, pos: int, info: BatchInfo) -> BatchInfo:
    """A control batch's one control record (EndTransactionMarker): key = version int16 +
    type int16, value = version int16 + coordinator epoch int32. Control batches are never
    compressed (Kafka writes them uncompressed)."""
    from dataclasses import replace
    if info.attributes & COMPRESSION_MASK or info.records_count < 1:
        raise CorruptBatch(f"control batch at position {pos} is compressed or empty")
    rec = bytes(buf[pos + HEADER_SIZE:pos + info.size])
    try:
        _len, i = _varint(rec, 0)
        i += 1                                  # record attributes
        _ts, i = _varint(rec, i)
        _od, i = _varint(rec, i)
        klen, i = _varint(rec, i)
        _kv, ctype = struct.unpack_from(">hh", rec, i)
        i += klen
        vlen, i = _varint(rec, i)
        cepoch = struct.unpack_from(">hi", rec, i)[1] if vlen >= 6 else -1
    except struct.error as e:
        raise CorruptBatch(f"bad control record at position {pos}: {e}") from None
    if ctype not in (ABORT, COMMIT):
        raise CorruptBatch(f"unknown control record type {ctype} at position {pos}")
    return replace(info, control_type=ctype, coordinator_epoch=cepoch)


def end_txn_marker(producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                   timestamp_ms: int) -> bytes:
    """A control batch holding one COMMIT or ABORT marker (MemoryRecords.withEndTransactionMarker):
    transactional and control bits set, no sequence, base offset and leader epoch 0 (the append
    rewrites them)."""
    key = struct.pack(">hh", 0, COMMIT if commit else ABORT)
    value = struct.pack(">hi", 0, coordinator_epoch)
    body = (b"\x00" + _put_varint(0) + _put_varint(0) + _put_varint(len(key)) + key
            + _put_varint(len(value)) + value + _put_varint(0))
    record = _put_varint(len(body)) + body
    after_crc = struct.pack(">hiqqqhii", TRANSACTIONAL_FLAG | CONTROL_FLAG, 0, timestamp_ms, timestamp_ms,
                            producer_id, producer_epoch, -1, 1) + record
    crc = calc_crc32c(after_crc)
    length = 4 + 1 + 4 + len(after_crc)          # leader epoch + magic + crc + the rest
    return struct.pack(">qiibI", 0, length, 0, 2, crc) + after_crc
