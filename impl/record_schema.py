"""Primitives of Kafka's internal record schemas (the `__consumer_offsets` and
`__transaction_state` keys and values): big-endian fixed-width fields, int16-length strings,
int32-length bytes, and the flexible versions' unsigned varints, compact strings and tagged
fields. A record shorter than its schema raises RecordError, never IndexError or struct.error,
so a corrupt record is reported with what was wrong."""
from __future__ import annotations

import struct

from kafka.record.memory_records import MemoryRecords


class RecordError(ValueError):
    """A record of an internal topic does not decode."""


def string(v: str | None) -> bytes:
    """An int16-length string; None is length -1."""
    if v is None:
        return struct.pack(">h", -1)
    b = v.encode()
    return struct.pack(">h", len(b)) + b


def blob(v: bytes) -> bytes:
    """int32-length bytes."""
    return struct.pack(">i", len(v)) + v


class Reader:
    """Reads one record's fields in schema order."""

    def __init__(self, data: bytes):
        self.d, self.i = data, 0

    def take(self, fmt: str):
        st = struct.Struct(fmt)
        if self.i + st.size > len(self.d):
            raise RecordError("record shorter than its schema")
        v = st.unpack_from(self.d, self.i)
        self.i += st.size
        return v[0] if len(v) == 1 else v

    def _span(self, n: int, what: str) -> bytes:
        if self.i + n > len(self.d):
            raise RecordError(f"{what} runs past the record")
        v = self.d[self.i:self.i + n]
        self.i += n
        return bytes(v)

    def string(self) -> str | None:
        n = self.take(">h")
        return None if n < 0 else self._span(n, "string").decode(errors="replace")

    def blob(self) -> bytes:
        n = self.take(">i")
        return b"" if n < 0 else self._span(n, "bytes")

    # flexible versions
    def uvarint(self) -> int:
        shift = n = 0
        while True:
            b = self.take(">B")
            n |= (b & 0x7F) << shift
            if not b & 0x80:
                return n
            shift += 7
            if shift > 35:
                raise RecordError("varint too long")

    def cstring(self) -> str | None:
        n = self.uvarint() - 1
        return None if n < 0 else self._span(n, "string").decode(errors="replace")

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self._span(self.uvarint(), "tagged field")


def data_records(data: bytes):
    """(log offset, key, value) of every record in a run of record batches; control batches
    (transaction markers) are skipped: their effect is the caller's to apply."""
    mr = MemoryRecords(data)
    while mr.has_next():
        b = mr.next_batch()
        if b is None:
            break
        if b.is_control_batch:
            continue
        for rec in b:
            yield rec.offset, rec.key, rec.value
