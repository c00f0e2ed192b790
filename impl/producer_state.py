"""Idempotent-producer state of one partition replica: per producer id, its epoch and the
metadata of its last 5 batches; the sequence rules a leader applies before an append; rebuilding
from the record batch v2 headers of the log; snapshots; truncation.

Kafka's design, in one room (STYLE.md 13):
- `check_append` is `ProducerAppendInfo.checkProducerEpoch` + `checkSequence` plus
  `ProducerStateEntry.findDuplicateBatch` (kafka/log/ProducerStateManager.scala, storage module
  `org.apache.kafka.storage.internals.log.ProducerAppendInfo` in 3.x): a pure function of the
  producer's entry and the batch header.
- `ProducerStateManager` mirrors Kafka's class of that name: it is updated by every append, as
  leader and as follower (so a follower that becomes leader already knows every producer),
  rebuilt on start from the latest snapshot at or below the log end plus a scan of the batches
  after it (`loadProducerState`), and truncated with the log (`truncateAndReload`).
- Snapshots: `<offset:020d>.snapshot` in the partition directory, JSON written tmp + fsync +
  rename (Kafka's are binary with a CRC). A snapshot at offset X holds the state of every batch
  below X; one above the log end (e.g. after power loss dropped unflushed batches) is deleted
  on load, as Kafka's `truncateFullyAndStartAt`/`truncateAndReload` delete them. Two are kept.

Transactions (KIP-98), as Kafka's ProducerStateManager keeps them: per producer, the first offset
of its ongoing transaction on this partition (`txn_first_offset`, set by its first transactional
batch), the epoch of that transaction's latest batch and the coordinator epoch of its last marker;
a control batch (COMMIT / ABORT marker) ends the ongoing transaction, an ABORT adds (producer id,
first offset, marker offset) to the aborted-transactions index (Kafka's TransactionIndex), and a
completed transaction stays "unreplicated" until the HW passes its marker. The LSO is the first
offset of any transaction that is ongoing or unreplicated, capped by the HW. All of it is in the
snapshots and rebuilt by replaying the log after them.

Error codes are Kafka's (org.apache.kafka.common.protocol.Errors). Not modelled: producer-id expiration (transactional.id.expiration /
producer.id.expiration.ms) -- state lives until truncation removes its batches.
"""
from __future__ import annotations

import bisect
import json
import logging
import os
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from impl.storage.files import atomic_write

log = logging.getLogger("impl.producer_state")

NO_PRODUCER_ID = -1
NO_SEQUENCE = -1
INT32_MAX = 2**31 - 1
NUM_BATCHES_TO_RETAIN = 5     # Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN (= max.in.flight 5)
SNAPSHOTS_KEPT = 2
SNAPSHOT_SUFFIX = ".snapshot"

OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_PRODUCER_EPOCH = 47
UNKNOWN_PRODUCER_ID = 59


@dataclass(frozen=True)
class BatchMeta:
    """What Kafka's BatchMetadata keeps of an appended batch."""
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int


@dataclass
class ProducerEntry:
    epoch: int
    batches: deque = field(default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))
    txn_first_offset: int = -1        # first offset of its ongoing transaction here, -1 none
    txn_epoch: int = -1               # the epoch of that transaction's latest batch
    coordinator_epoch: int = -1       # of the last marker written for it

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    def to_json(self) -> dict:
        return {"epoch": self.epoch, "batches": [[b.first_seq, b.last_seq, b.first_offset, b.last_offset]
                                                 for b in self.batches],
                "txn": [self.txn_first_offset, self.txn_epoch, self.coordinator_epoch]}

    @classmethod
    def from_json(cls, d: dict) -> "ProducerEntry":
        e = cls(int(d["epoch"]))
        for b in d["batches"][-NUM_BATCHES_TO_RETAIN:]:
            e.batches.append(BatchMeta(*map(int, b)))
        e.txn_first_offset, e.txn_epoch, e.coordinator_epoch = map(int, d.get("txn", (-1, -1, -1)))
        return e


@dataclass(frozen=True)
class Verdict:
    """append | duplicate (answer with the original offsets, append nothing) | error (code)."""
    kind: str
    error: int = 0
    first_offset: int = -1
    last_offset: int = -1


APPEND = Verdict("append")


def last_seq_of(first_seq: int, last_offset_delta: int) -> int:
    """Sequences wrap at Int32.MAX (Kafka's DefaultRecordBatch.incrementSequence)."""
    return (first_seq + last_offset_delta) % (INT32_MAX + 1)


def in_sequence(last_seq: int, next_first_seq: int) -> bool:
    """Kafka's ProducerAppendInfo.inSequence: the next batch starts right after, or wraps."""
    return next_first_seq == last_seq + 1 or (next_first_seq == 0 and last_seq == INT32_MAX)


def check_append(entry: ProducerEntry | None, epoch: int, first_seq: int, last_seq: int) -> Verdict:
    """The leader's decision for an idempotent batch (ProducerAppendInfo + findDuplicateBatch):
    - older epoch than the entry's: INVALID_PRODUCER_EPOCH (checkProducerEpoch; a zombie producer
      after a newer InitProducerId must not write);
    - same epoch, the batch equals one of the last 5 (first and last sequence): duplicate, its
      original offsets are the answer (a retry whose first attempt was appended);
    - newer epoch: the sequence restarts, so it must be 0, else OUT_OF_ORDER_SEQUENCE_NUMBER;
    - no entry (the producer's batches are not in this log) and a sequence other than 0:
      UNKNOWN_PRODUCER_ID, as Kafka 2.x returned it before KIP-360 let such writes through;
    - same epoch, not right after the last sequence (a gap, or a duplicate older than the last
      5 batches): OUT_OF_ORDER_SEQUENCE_NUMBER.
    """
    if first_seq == NO_SEQUENCE:    # a coordinator's own write (transactional offsets): no sequence
        return Verdict("error", INVALID_PRODUCER_EPOCH) if entry is not None and epoch < entry.epoch else APPEND
    if entry is None:
        return APPEND if first_seq == 0 else Verdict("error", UNKNOWN_PRODUCER_ID)
    if epoch < entry.epoch:
        return Verdict("error", INVALID_PRODUCER_EPOCH)
    if epoch > entry.epoch:
        return APPEND if first_seq == 0 else Verdict("error", OUT_OF_ORDER_SEQUENCE_NUMBER)
    for b in entry.batches:
        if b.first_seq == first_seq and b.last_seq == last_seq:
            return Verdict("duplicate", 0, b.first_offset, b.last_offset)
    if entry.last_seq == NO_SEQUENCE or in_sequence(entry.last_seq, first_seq):
        return APPEND
    return Verdict("error", OUT_OF_ORDER_SEQUENCE_NUMBER)


class ProducerStateManager:
    """Producer state of one replica log. `end_offset` is the log offset up to which batches have
    been applied (Kafka's mapEndOffset). Owned by PartitionLog, which calls `update` on every
    append (leader and follower), `truncate_and_reload` on truncation and `load` on recovery."""

    def __init__(self, dir: str | Path):
        self.dir = Path(dir)
        self.producers: dict[int, ProducerEntry] = {}
        self.end_offset = 0
        self.snapshot_offset = -1          # offset of the newest snapshot written or loaded
        # the aborted-transactions index: (producer id, first offset, marker offset), by marker
        self.aborted: list[tuple[int, int, int]] = []
        # completed transactions whose marker the HW may not have passed: (first, marker offset)
        self.unreplicated: list[tuple[int, int]] = []
        self.open_txns: dict[int, int] = {}    # producer id -> its ongoing transaction's first offset

    # --- the rules -------------------------------------------------------------------------------
    def check(self, producer_id: int, epoch: int, first_seq: int, last_seq: int) -> Verdict:
        return check_append(self.producers.get(producer_id), epoch, first_seq, last_seq)

    def entry(self, producer_id: int) -> ProducerEntry | None:
        return self.producers.get(producer_id)

    def _entry_at(self, producer_id: int, epoch: int) -> ProducerEntry:
        """The producer's entry with `epoch` taken (ProducerStateEntry.maybeUpdateProducerEpoch:
        a new epoch drops the retained batches; the ongoing transaction stays)."""
        e = self.producers.get(producer_id)
        if e is None:
            e = self.producers[producer_id] = ProducerEntry(epoch)
        elif epoch != e.epoch:
            n = ProducerEntry(epoch, txn_first_offset=e.txn_first_offset, txn_epoch=e.txn_epoch,
                              coordinator_epoch=e.coordinator_epoch)
            e = self.producers[producer_id] = n
        return e

    def update(self, producer_id: int, epoch: int, first_seq: int, last_seq: int,
               first_offset: int, last_offset: int, transactional: bool = False) -> None:
        """Record an appended batch (ProducerStateEntry.addBatch): a new epoch resets the
        retained batches; only the last 5 are kept. A transactional batch opens the producer's
        transaction on this partition if none is ongoing."""
        # a coordinator's transactional write (offsets of a transaction) has no sequence: it still
        # sets the producer's epoch and opens its transaction here
        if producer_id != NO_PRODUCER_ID and (first_seq != NO_SEQUENCE or transactional):
            e = self._entry_at(producer_id, epoch)
            if first_seq != NO_SEQUENCE:
                e.batches.append(BatchMeta(first_seq, last_seq, first_offset, last_offset))
            if transactional:
                if e.txn_first_offset < 0:
                    e.txn_first_offset = first_offset
                    self.open_txns[producer_id] = first_offset
                e.txn_epoch = epoch
        self.end_offset = max(self.end_offset, last_offset + 1)

    def end_txn(self, producer_id: int, epoch: int, commit: bool, coordinator_epoch: int,
                offset: int) -> tuple[int, int, int]:
        """A marker at `offset` (ProducerAppendInfo.appendEndTxnMarker): it ends the producer's
        ongoing transaction (one without data here ends at the marker itself); an ABORT goes to
        the aborted index. Returns the completed transaction (producer id, first, marker offset)."""
        e = self._entry_at(producer_id, epoch)
        first = e.txn_first_offset if e.txn_first_offset >= 0 else offset
        e.txn_first_offset, e.txn_epoch = -1, -1
        self.open_txns.pop(producer_id, None)
        e.coordinator_epoch = coordinator_epoch
        if not commit:
            self.aborted.append((producer_id, first, offset))
        self.unreplicated.append((first, offset))
        self.end_offset = max(self.end_offset, offset + 1)
        return producer_id, first, offset

    def apply_batches(self, infos: Iterable) -> None:
        """Replay batch headers (impl.storage.batch.BatchInfo) in log order."""
        for info in infos:
            if info.control_type >= 0:
                if info.producer_id != NO_PRODUCER_ID:
                    self.end_txn(info.producer_id, info.producer_epoch, info.control_type == 1,
                                 info.coordinator_epoch, info.base_offset)
                continue
            self.update(info.producer_id, info.producer_epoch, info.base_sequence,
                        last_seq_of(info.base_sequence, info.last_offset_delta),
                        info.base_offset, info.last_offset, info.is_transactional)

    # --- transactions: the LSO and the aborted index --------------------------------------------
    def ongoing_first_offsets(self) -> dict[int, int]:
        """producer id -> first offset of its ongoing transaction on this partition."""
        return dict(self.open_txns)

    def unstable_first_offsets(self, hw: int) -> list[int]:
        """First offsets of the transactions that keep the LSO down at HW `hw`: the ongoing ones
        and the completed ones whose marker the HW has not passed (firstUnstableOffset with
        unreplicatedTxns; the completed ones below it are dropped, onHighWatermarkUpdated)."""
        self.on_high_watermark(hw)
        return sorted(set(self.ongoing_first_offsets().values()) | {f for f, _ in self.unreplicated})

    def on_high_watermark(self, hw: int) -> None:
        """The HW passed these markers: their transactions are stable (onHighWatermarkUpdated)."""
        if self.unreplicated and self.unreplicated[0][1] < hw:
            self.unreplicated = [t for t in self.unreplicated if t[1] >= hw]

    def drop_aborted_below(self, log_start: int) -> None:
        """Retention deleted the segments holding these aborted transactions (their index goes
        with them in Kafka)."""
        self.aborted = [t for t in self.aborted if t[2] >= log_start]

    def aborted_between(self, start: int, upper: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of the aborted transactions overlapping [start, upper)
        (TransactionIndex.collectAbortedTxns: last offset >= start and first offset < upper)."""
        i = bisect.bisect_left(self.aborted, start, key=lambda t: t[2])    # the index is in marker order
        return [(pid, first) for pid, first, last in self.aborted[i:] if first < upper]

    # --- snapshots -------------------------------------------------------------------------------
    def _snapshots(self) -> list[tuple[int, Path]]:
        out = []
        for p in self.dir.glob("*" + SNAPSHOT_SUFFIX):
            stem = p.name[:-len(SNAPSHOT_SUFFIX)]
            if stem.isdigit():
                out.append((int(stem), p))
        return sorted(out)

    def take_snapshot(self) -> Path | None:
        """Persist the state at `end_offset` (tmp + fsync + rename); keeps the newest two.
        No-op when nothing changed since the last snapshot."""
        if self.end_offset == self.snapshot_offset or (not self.producers and not self.end_offset):
            return None
        path = self.dir / ("%020d%s" % (self.end_offset, SNAPSHOT_SUFFIX))
        body = {"version": 2, "end_offset": self.end_offset,
                "producers": {str(pid): e.to_json() for pid, e in sorted(self.producers.items())},
                "aborted": [list(t) for t in self.aborted],
                "unreplicated": [list(t) for t in self.unreplicated]}
        atomic_write(path, json.dumps(body, sort_keys=True).encode())
        self.snapshot_offset = self.end_offset
        for _, old in self._snapshots()[:-SNAPSHOTS_KEPT]:
            old.unlink(missing_ok=True)
        return path

    def _delete_snapshots_above(self, offset: int) -> None:
        for off, p in self._snapshots():
            if off > offset:
                p.unlink(missing_ok=True)

    def _load_latest_snapshot(self, max_offset: int) -> int:
        """Loads the newest readable snapshot at or below `max_offset`; returns its offset (0 and
        empty state when there is none). Unreadable snapshots are deleted (logged), like Kafka's
        CorruptSnapshotException handling."""
        self.producers, self.end_offset, self.aborted, self.unreplicated = {}, 0, [], []
        self.open_txns = {}
        for off, p in reversed(self._snapshots()):
            if off > max_offset:
                continue
            try:
                body = json.loads(p.read_text())
                producers = {int(k): ProducerEntry.from_json(v) for k, v in body["producers"].items()}
                aborted = [(int(a), int(b), int(c)) for a, b, c in body.get("aborted", [])]
                unrep = [(int(a), int(b)) for a, b in body.get("unreplicated", [])]
                if any(not a <= b < off for _, a, b in aborted):
                    raise ValueError("aborted transaction outside the snapshot's range")
            except (OSError, ValueError, KeyError, TypeError) as e:
                log.warning("%s: unreadable producer snapshot (%s); deleting", p, e)
                p.unlink(missing_ok=True)
                continue
            self.producers, self.end_offset, self.aborted, self.unreplicated = producers, off, aborted, unrep
            self.open_txns = {pid: e.txn_first_offset for pid, e in producers.items() if e.txn_first_offset >= 0}
            return off
        return 0

    # --- recovery and truncation -----------------------------------------------------------------
    def load(self, plog) -> int:
        """Rebuild from the log (Kafka's UnifiedLog.loadProducerState): delete snapshots past the
        log end, load the newest remaining one, replay the batches after it. Returns the number
        of batches replayed (what the snapshot saved us from scanning is the rest)."""
        leo = plog.leo
        self._delete_snapshots_above(leo)
        start = self._load_latest_snapshot(leo)
        self.snapshot_offset = start if start else -1
        n = 0
        for info in plog.batch_infos_from(max(start, plog.log_start_offset)):
            self.apply_batches([info])
            n += 1
        self.end_offset = leo
        return n

    def truncate_and_reload(self, plog) -> int:
        """After the log was truncated to its LEO: state above it must go too (a batch no longer
        in the log must not be answered as a duplicate). Kafka's truncateAndReload."""
        return self.load(plog)

    def clear(self) -> None:
        """truncate_fully_and_start_at: nothing of the old log remains."""
        self.producers, self.end_offset, self.snapshot_offset = {}, 0, -1
        self.aborted, self.unreplicated, self.open_txns = [], [], {}
        for _, p in self._snapshots():
            p.unlink(missing_ok=True)

    def describe(self) -> dict:
        return {str(pid): {"epoch": e.epoch, "last_seq": e.last_seq,
                           "batches": [[b.first_seq, b.last_seq, b.first_offset, b.last_offset] for b in e.batches],
                           "txn_first_offset": e.txn_first_offset, "coordinator_epoch": e.coordinator_epoch}
                for pid, e in sorted(self.producers.items())}
