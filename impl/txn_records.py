"""The records of `__transaction_state`: Kafka's own key/value schemas (TransactionLog, generated
from TransactionLogKey.json / TransactionLogValue.json), so a log written here reads as Kafka's.
Pure: bytes in, records out; batches are record batch v2 without producer id.

  key   v0 (int16 0, transactional_id)
  value v0 (int16 0, producer_id int64, producer_epoch int16, transaction_timeout_ms int32,
        transaction_status int8, partitions? [topic, [int32]], last_update_ts int64,
        start_ts int64)
Value v1 (flexible: compact strings and arrays, tagged previous/next producer id and client
transaction version) is read too. A null value is a tombstone (the id expired). Status codes are
Kafka's TransactionState ids: 0 Empty, 1 Ongoing, 2 PrepareCommit, 3 PrepareAbort,
4 CompleteCommit, 5 CompleteAbort, 6 Dead, 7 PrepareEpochFence.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from impl.group_records import batch  # noqa: F401  (re-exported)
from impl.record_schema import Reader, RecordError, data_records, string  # noqa: F401  (re-exported)

KEY_VERSION = 0
VALUE_VERSION = 0

EMPTY, ONGOING, PREPARE_COMMIT, PREPARE_ABORT, COMPLETE_COMMIT, COMPLETE_ABORT, DEAD, PREPARE_EPOCH_FENCE = range(8)
STATE_NAMES = ("Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead",
               "PrepareEpochFence")


@dataclass(frozen=True)
class TxnRecord:
    transactional_id: str
    producer_id: int = -1
    producer_epoch: int = -1
    timeout_ms: int = 60000
    state: int = EMPTY
    partitions: frozenset = frozenset()      # {(topic, partition)}
    last_update_ms: int = -1
    start_ms: int = -1
    deleted: bool = False                    # tombstone


def key(transactional_id: str) -> bytes:
    return struct.pack(">h", KEY_VERSION) + string(transactional_id)


def value(r: TxnRecord) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for t, p in sorted(r.partitions):
        by_topic.setdefault(t, []).append(p)
    out = [struct.pack(">hqhib", VALUE_VERSION, r.producer_id, r.producer_epoch, r.timeout_ms, r.state),
           struct.pack(">i", len(by_topic))]
    for t, ps in by_topic.items():
        out += [string(t), struct.pack(">i", len(ps)), b"".join(struct.pack(">i", p) for p in ps)]
    out.append(struct.pack(">qq", r.last_update_ms, r.start_ms))
    return b"".join(out)


def decode(k: bytes, v: bytes | None) -> TxnRecord:
    r = Reader(k)
    kv = r.take(">h")
    if kv != 0:
        raise RecordError(f"transaction log key version {kv} unknown")
    tid = r.string()
    if tid is None:
        raise RecordError("null transactional id")
    if v is None:
        return TxnRecord(tid, deleted=True)
    c = Reader(v)
    vv = c.take(">h")
    if vv not in (0, 1):
        raise RecordError(f"transaction log value version {vv} unknown")
    pid, epoch, timeout, state = c.take(">q"), c.take(">h"), c.take(">i"), c.take(">b")
    parts = set()
    n = c.take(">i") if vv == 0 else c.uvarint() - 1
    for _ in range(max(n, 0)):
        topic = c.string() if vv == 0 else c.cstring()
        m = c.take(">i") if vv == 0 else c.uvarint() - 1
        for _ in range(max(m, 0)):
            parts.add((topic, c.take(">i")))
        if vv == 1:
            c.skip_tags()
    upd, start = c.take(">q"), c.take(">q")
    if not 0 <= state < len(STATE_NAMES):
        raise RecordError(f"transaction status {state} unknown")
    return TxnRecord(tid, pid, epoch, timeout, state, frozenset(parts), upd, start)
