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

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta


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
        yield pos, info
        pos += info.size


def rewrite(buf: bytearray, pos: int, base_offset: int, leader_epoch: int) -> None:
    struct.pack_into(">q", buf, pos, base_offset)
    struct.pack_into(">i", buf, pos + 12, leader_epoch)
