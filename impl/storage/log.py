"""One partition's replica log on disk: segments, sparse offset index, time index, leader-epoch
checkpoint, HW checkpoint, flush policy, retention, recovery and power-loss simulation.

Layout of a partition directory (`<data>/<topic>-<partition>/`):
    <base:020d>.log        record batches v2, stored as received (offset + epoch rewritten)
    <base:020d>.index      sparse offset index: (relative offset u32, position u32) every
                           `index_interval_bytes`; rebuilt from the log on recovery
    <base:020d>.timeindex  (max timestamp i64, relative offset u32), same cadence
    leader-epoch-checkpoint   Kafka's text format: version, count, "epoch start_offset" lines
    hw-checkpoint          the last checkpointed high watermark (KIP-101's stale-HW hazard)
    flushed.json           sidecar: bytes of each .log known to be fsynced. Only the
                           power-loss fault reads it: it truncates each log to that length.
    <offset:020d>.snapshot producer-state snapshots (impl/producer_state.py)

Idempotent producers: every append updates the log's ProducerStateManager (leader and follower
alike); a leader append of a batch with a producer id is first checked by its sequence rules
(duplicate -> DuplicateBatch with the original offsets, nothing written; violation ->
ProducerStateError with Kafka's error code). Truncation and recovery rebuild that state.
Transaction markers (control batches) are written only by `append_marker` (a client's Produce
carrying one is refused, as Kafka's LogValidator refuses them from clients); they update the same
state, as leader and as follower.

Checkpoint files are written tmp + fsync + rename, so they are always durable; the logs are
durable only up to the last flush. Recovery re-validates every batch's CRC-32C and truncates the
first corrupt or torn batch and everything after it (logged, never a crash).
"""
from __future__ import annotations

import bisect
import json
import logging
import os
import struct
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from dataclasses import replace

from impl.producer_state import ProducerStateManager, last_seq_of
from impl.storage.files import atomic_write
from impl.storage.batch import (HEADER_SIZE, BatchInfo, CorruptBatch, crc_ok, end_txn_marker,
                                iter_batches, parse_header, rewrite)

log = logging.getLogger("impl.storage")

FLUSHED = "flushed.json"
EPOCH_CKPT = "leader-epoch-checkpoint"
HW_CKPT = "hw-checkpoint"
MAX_READ_BYTES = 64 << 20      # bound on a single read; larger fetch limits are clamped


@dataclass
class LogConfig:
    segment_bytes: int = 64 << 20
    index_interval_bytes: int = 4096
    retention_bytes: int | None = None       # per partition; None = unbounded
    retention_ms: int | None = None          # None = unbounded
    flush_messages: int | None = None        # fsync after this many unflushed records
    flush_ms: int | None = None              # fsync when the oldest unflushed append is older


INVALID_RECORD = 87       # Kafka's InvalidRecordException (a client's control batch)


class ProducerStateError(Exception):
    """An idempotent batch the sequence rules refuse; `code` is Kafka's error code."""

    def __init__(self, code: int, msg: str = ""):
        super().__init__(msg or f"producer state error {code}")
        self.code = code


class DuplicateBatch(Exception):
    """A retried idempotent batch already in the log: answer with its original offsets."""

    def __init__(self, first_offset: int, last_offset: int):
        super().__init__(f"duplicate of offsets {first_offset}..{last_offset}")
        self.first_offset, self.last_offset = first_offset, last_offset


class EpochCache:
    """Leader epoch -> start offset (KIP-101), persisted to `leader-epoch-checkpoint`."""

    def __init__(self, path: Path):
        self.path = path
        self.entries: list[tuple[int, int]] = []
        if path.exists():
            try:
                lines = path.read_text().split("\n")
                n = int(lines[1])
                for line in lines[2:2 + n]:
                    e, o = line.split()
                    self.entries.append((int(e), int(o)))
            except (ValueError, IndexError):
                log.warning("%s: unreadable epoch checkpoint, starting empty", path)
                self.entries = []

    def _persist(self) -> None:
        body = "0\n%d\n" % len(self.entries) + "".join("%d %d\n" % e for e in self.entries)
        atomic_write(self.path, body.encode())

    def latest_epoch(self) -> int:
        return self.entries[-1][0] if self.entries else -1

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that `epoch` starts at `start_offset`; ignores epochs not above the latest."""
        if epoch < 0 or (self.entries and epoch <= self.entries[-1][0]):
            return
        # Kafka's LeaderEpochFileCache drops the entries the new one makes non-monotonic: those
        # starting at or after its start offset, so an epoch that appended nothing is forgotten
        # and OffsetsForLeaderEpoch answers for it as for any epoch below the first cached one.
        while self.entries and self.entries[-1][1] >= start_offset:
            self.entries.pop()
        self.entries.append((epoch, start_offset))
        self._persist()

    def end_offset_for(self, epoch: int, leo: int) -> tuple[int, int]:
        """(largest epoch <= `epoch`, its end offset); (-1, -1) when unknown (KIP-101/KIP-279).
        The latest epoch ends at the LEO; an older one at the next higher epoch's start."""
        if not self.entries or epoch < self.entries[0][0]:
            return (-1, -1)
        if epoch >= self.entries[-1][0]:
            return (self.entries[-1][0], leo)
        i = bisect.bisect_right([e for e, _ in self.entries], epoch) - 1
        return (self.entries[i][0], self.entries[i + 1][1])

    def start_offset_of(self, epoch: int) -> int | None:
        for e, o in self.entries:
            if e == epoch:
                return o
        return None

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop epochs starting at or after `end_offset` (log truncated to it)."""
        before = len(self.entries)
        self.entries = [(e, o) for e, o in self.entries if o < end_offset]
        if len(self.entries) != before:
            self._persist()

    def clear(self) -> None:
        self.entries = []
        self._persist()


class Segment:
    def __init__(self, dir: Path, base_offset: int, index_interval: int):
        self.base_offset = base_offset
        self.path = dir / ("%020d.log" % base_offset)
        self.index_path = dir / ("%020d.index" % base_offset)
        self.time_path = dir / ("%020d.timeindex" % base_offset)
        self.index_interval = index_interval
        self.path.touch(exist_ok=True)
        self.fd = os.open(self.path, os.O_RDWR)
        self.size = os.fstat(self.fd).st_size
        self.index: list[tuple[int, int]] = []      # (offset, position)
        self.tindex: list[tuple[int, int]] = []     # (max timestamp so far, offset)
        self.next_offset = base_offset
        self.max_timestamp = -1
        self._since_index = 1 << 62                 # index the first batch
        self._idx_f = open(self.index_path, "wb")
        self._tidx_f = open(self.time_path, "wb")

    def _note(self, pos: int, info: BatchInfo) -> None:
        self.next_offset = info.last_offset + 1
        if self._since_index >= self.index_interval:
            self.index.append((info.base_offset, pos))
            self._idx_f.write(struct.pack(">II", info.base_offset - self.base_offset, pos))
            if info.max_timestamp > self.max_timestamp:
                self.tindex.append((info.max_timestamp, info.base_offset))
                self._tidx_f.write(struct.pack(">qI", info.max_timestamp, info.base_offset - self.base_offset))
            self._since_index = 0
        self._since_index += info.size
        self.max_timestamp = max(self.max_timestamp, info.max_timestamp)

    def recover(self, check_crc: bool) -> int:
        """Scans the segment, rebuilding indexes; truncates at the first bad batch. Returns the
        number of bytes cut off."""
        data = os.pread(self.fd, self.size, 0) if self.size else b""
        good = 0
        try:
            expected = self.base_offset
            for pos, info in iter_batches(data, check_crc=check_crc):
                if info.base_offset < expected:
                    err = CorruptBatch(f"offset {info.base_offset} goes backwards at position {pos}")
                    err.position = pos  # type: ignore[attr-defined]
                    raise err
                self._note(pos, info)
                expected = info.last_offset + 1
                good = pos + info.size
        except CorruptBatch as e:
            log.warning("%s: %s; truncating %d bytes", self.path, e, self.size - e.position)  # type: ignore[attr-defined]
            good = e.position  # type: ignore[attr-defined]
        cut = self.size - good
        if cut:
            os.ftruncate(self.fd, good)
            self.size = good
        return cut

    def append(self, data: bytes | bytearray, infos: list[tuple[int, BatchInfo]]) -> None:
        start = self.size
        os.pwrite(self.fd, data, start)
        for pos, info in infos:
            self._note(start + pos, info)
        self.size += len(data)

    def lookup(self, offset: int) -> int:
        """Position of the last indexed batch starting at or before `offset`."""
        i = bisect.bisect_right(self.index, (offset, 1 << 62)) - 1
        return self.index[i][1] if i >= 0 else 0

    def truncate_to(self, offset: int) -> None:
        """Cuts every batch whose last offset is >= `offset` (callers truncate at batch starts),
        then rebuilds the in-memory and on-disk indexes from what is left (rare, so a rescan)."""
        pos = self.lookup(offset)
        data = os.pread(self.fd, self.size - pos, pos)
        cut = self.size
        for p, info in iter_batches(data, check_crc=False):
            if info.last_offset >= offset:
                cut = pos + p
                break
        if cut == self.size:
            return
        os.ftruncate(self.fd, cut)
        self.size = cut
        self._reset_indexes()
        self.recover(check_crc=False)

    def _reset_indexes(self) -> None:
        self._idx_f.close()
        self._tidx_f.close()
        self._idx_f = open(self.index_path, "wb")
        self._tidx_f = open(self.time_path, "wb")
        self.index, self.tindex = [], []
        self.next_offset, self.max_timestamp = self.base_offset, -1
        self._since_index = 1 << 62

    def close(self) -> None:
        """Idempotent. `fd` is a bare descriptor number, which nothing guards as a file object
        guards its own: a second os.close of it, or a pread after the first, would hit whatever
        file or socket the process opened next under that number (Linux reuses the lowest free
        one). So the number is dropped with the close: later use fails with EBADF instead."""
        for f in (self._idx_f, self._tidx_f):
            try:
                f.close()
            except OSError:
                pass
        fd, self.fd = self.fd, -1
        if fd >= 0:
            try:
                os.close(fd)
            except OSError:
                pass

    def delete(self) -> None:
        self.close()
        for p in (self.path, self.index_path, self.time_path):
            try:
                p.unlink()
            except FileNotFoundError:
                pass


class PartitionLog:
    """A replica's log. Not thread-safe: owned by one broker's event loop; only hw_ticket and
    checkpoint_hw may run on another thread (they touch no segment, only the HW checkpoint)."""

    def __init__(self, dir: str | Path, config: LogConfig | None = None,
                 on_recovered: Callable[[int, int], None] | None = None):
        self.dir = Path(dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.config = config or LogConfig()
        self.epochs = EpochCache(self.dir / EPOCH_CKPT)
        self.segments: list[Segment] = []
        self.unflushed_records = 0
        self.first_unflushed_ms: float | None = None
        self.truncated_bytes_on_recovery = 0
        self.producers = ProducerStateManager(self.dir)
        self._recover()
        self.checkpointed_hw = self._read_hw()
        # HW checkpoints are written from the event loop and from an executor thread (the
        # periodic one, so its fsync never stalls the loop): see checkpoint_hw.
        self._ckpt_lock = threading.Lock()
        self._ckpt_issued = 0        # tickets handed out (hw_ticket, or a call without one)
        self._ckpt_newest = 0        # newest ticket written; older ones are refused
        if on_recovered:
            on_recovered(self.leo, self.truncated_bytes_on_recovery)

    # --- recovery -------------------------------------------------------------------------------
    def _recover(self) -> None:
        bases = sorted(int(p.stem) for p in self.dir.glob("*.log") if p.stem.isdigit())
        cut_total = 0
        for i, base in enumerate(bases):
            seg = Segment(self.dir, base, self.config.index_interval_bytes)
            if self.segments and base < self.segments[-1].next_offset:
                log.warning("%s: segment overlaps its predecessor; deleting", seg.path)
                cut_total += seg.size
                seg.delete()
                continue
            cut = seg.recover(check_crc=True)
            cut_total += cut
            if seg.size == 0 and self.segments:
                seg.delete()
                continue
            self.segments.append(seg)
            if cut:
                # everything after a corrupt batch is suspect: drop later segments (Kafka does too)
                for later in bases[i + 1:]:
                    s = Segment(self.dir, later, self.config.index_interval_bytes)
                    cut_total += s.size
                    s.delete()
                break
        if not self.segments:
            self.segments.append(Segment(self.dir, 0, self.config.index_interval_bytes))
        self.truncated_bytes_on_recovery = cut_total
        if self.epochs.entries and self.epochs.entries[-1][1] > self.leo:
            self.epochs.truncate_from_end(self.leo)
        # Batches carry their epochs: make sure the cache knows every epoch present in the log.
        self._rebuild_missing_epochs()
        self._record_flushed()   # what survived recovery is on disk now
        self.producers.load(self)

    def _rebuild_missing_epochs(self) -> None:
        known = {e for e, _ in self.epochs.entries}
        for seg in self.segments:
            if not seg.size:
                continue
            data = os.pread(seg.fd, seg.size, 0)
            for _p, info in iter_batches(data, check_crc=False):
                if info.leader_epoch not in known and info.leader_epoch > self.epochs.latest_epoch():
                    self.epochs.assign(info.leader_epoch, info.base_offset)
                    known.add(info.leader_epoch)

    def _read_hw(self) -> int:
        try:
            return min(int((self.dir / HW_CKPT).read_text().strip()), self.leo)
        except (FileNotFoundError, ValueError):
            return 0

    # --- properties -----------------------------------------------------------------------------
    @property
    def leo(self) -> int:
        return self.segments[-1].next_offset

    @property
    def log_start_offset(self) -> int:
        return self.segments[0].base_offset

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    # --- append ---------------------------------------------------------------------------------
    def _maybe_roll(self, incoming: int) -> None:
        act = self.segments[-1]
        if act.size and act.size + incoming > self.config.segment_bytes:
            self.flush()
            self.segments.append(Segment(self.dir, self.leo, self.config.index_interval_bytes))

    def append_as_leader(self, records: bytes, leader_epoch: int, now_ms: float | None = None) -> tuple[int, int, int]:
        """Validates (framing, magic, CRC-32C) and appends the batches of a Produce request,
        assigning offsets from the LEO and stamping `leader_epoch`. Returns (base, last, count)."""
        buf = bytearray(records)
        infos = list(iter_batches(buf, check_crc=True))
        if not infos:
            raise CorruptBatch("no record batch in produce data")
        if any(i.is_control for _, i in infos):
            raise ProducerStateError(INVALID_RECORD, "control batches are written by the broker only")
        idem = [i for _, i in infos if i.producer_id >= 0]
        if idem:
            if len(infos) > 1:   # Kafka: Produce v3+ carries exactly one batch per partition
                raise CorruptBatch("an idempotent produce must carry exactly one record batch")
            i = idem[0]
            v = self.producers.check(i.producer_id, i.producer_epoch, i.base_sequence,
                                     last_seq_of(i.base_sequence, i.last_offset_delta))
            if v.kind == "duplicate":
                raise DuplicateBatch(v.first_offset, v.last_offset)
            if v.kind == "error":
                raise ProducerStateError(v.error, f"producer {i.producer_id} epoch {i.producer_epoch} "
                                                  f"sequence {i.base_sequence}: error {v.error}")
        base = nxt = self.leo
        count = 0
        out = []
        for pos, info in infos:
            rewrite(buf, pos, nxt, leader_epoch)
            out.append((pos, replace(info, base_offset=nxt, leader_epoch=leader_epoch)))
            nxt += info.last_offset_delta + 1
            count += info.records_count
        self.epochs.assign(leader_epoch, base)
        self._write(buf, out, count, now_ms)
        return base, nxt - 1, count

    def append_marker(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                      leader_epoch: int, now_ms: float | None = None) -> int:
        """Append a COMMIT / ABORT control batch for the producer (the leader's half of
        WriteTxnMarkers; the caller has checked it by the marker rule). Returns its offset."""
        ts = int(time.time() * 1000)
        buf = bytearray(end_txn_marker(producer_id, producer_epoch, commit, coordinator_epoch, ts))
        (_pos, info), = iter_batches(buf, check_crc=True)
        base = self.leo
        rewrite(buf, 0, base, leader_epoch)
        self.epochs.assign(leader_epoch, base)
        self._write(buf, [(0, replace(info, base_offset=base, leader_epoch=leader_epoch))], 1, now_ms)
        return base

    def append_as_follower(self, records: bytes, now_ms: float | None = None) -> tuple[int, int] | None:
        """Appends whole batches fetched from the leader, keeping their offsets and epochs.
        Batches below the LEO are skipped (overlap from a retried fetch). Returns (base, last)."""
        buf = memoryview(records)
        out, chunks, count = [], [], 0
        start = None
        nxt = self.leo
        pos_out = 0
        for pos, info in iter_batches(buf, check_crc=True):
            if info.last_offset < nxt:
                continue
            if info.base_offset != nxt:
                raise CorruptBatch(f"follower append gap: expected offset {nxt}, got {info.base_offset}")
            if start is None:
                start = info.base_offset
            self.epochs.assign(info.leader_epoch, info.base_offset)
            chunks.append(bytes(buf[pos:pos + info.size]))
            out.append((pos_out, info))
            pos_out += info.size
            nxt = info.last_offset + 1
            count += info.records_count
        if start is None:
            return None
        self._write(b"".join(chunks), out, count, now_ms)
        return start, nxt - 1

    def _write(self, data, infos, count: int, now_ms: float | None) -> None:
        self._maybe_roll(len(data))
        self.segments[-1].append(data, infos)
        self.producers.apply_batches(i for _, i in infos)
        self.unflushed_records += count
        now = time.monotonic() * 1000 if now_ms is None else now_ms
        if self.first_unflushed_ms is None:
            self.first_unflushed_ms = now
        self.maybe_flush(now)

    # --- flush ----------------------------------------------------------------------------------
    def maybe_flush(self, now_ms: float | None = None) -> bool:
        """The flush policy: by unflushed message count and by age of the oldest unflushed write."""
        c = self.config
        if not self.unflushed_records:
            return False
        now = time.monotonic() * 1000 if now_ms is None else now_ms
        due = (c.flush_messages is not None and self.unflushed_records >= c.flush_messages) or \
              (c.flush_ms is not None and self.first_unflushed_ms is not None
               and now - self.first_unflushed_ms >= c.flush_ms)
        if due:
            self.flush()
        return due

    def flush(self) -> None:
        for seg in self.segments:
            os.fsync(seg.fd)
        self.unflushed_records = 0
        self.first_unflushed_ms = None
        self._record_flushed()

    def _record_flushed(self) -> None:
        side = {s.path.name: s.size for s in self.segments}
        atomic_write(self.dir / FLUSHED, json.dumps(side, sort_keys=True).encode())

    def hw_ticket(self) -> int:
        """A place in line for a checkpoint_hw that runs on another thread, taken on the thread
        that owns the log when it decides to checkpoint (the HW it passes is read then too)."""
        with self._ckpt_lock:
            self._ckpt_issued += 1
            return self._ckpt_issued

    def checkpoint_hw(self, hw: int, ticket: int | None = None) -> None:
        """Durably record `hw`. Thread-safe. With a ticket (hw_ticket), the write is dropped if
        a checkpoint decided later has already been written, or a truncation came in between:
        an executor write of an HW read before a truncation must not land after the truncation's
        own checkpoint (the file would hold an HW above what the log then has, and after the
        log regrows a restart would take it as its HW: KIP-101's stale-HW hazard, from disk).
        The next periodic checkpoint writes the current HW instead."""
        with self._ckpt_lock:
            if ticket is None:
                self._ckpt_issued += 1
                ticket = self._ckpt_issued
            if ticket <= self._ckpt_newest:
                return
            self._ckpt_newest = ticket
            self._write_hw_locked(hw)

    def _write_hw_locked(self, hw: int) -> None:
        if hw != self.checkpointed_hw:
            atomic_write(self.dir / HW_CKPT, b"%d\n" % hw)
            self.checkpointed_hw = hw

    # --- read -----------------------------------------------------------------------------------
    def read(self, offset: int, max_bytes: int, upper_bound: int) -> bytes:
        """Whole batches starting with the one containing `offset`, with base offsets below
        `upper_bound` (HW for consumers, LEO for replicas), up to `max_bytes` -- but always the
        first batch if it fits under the bound (KIP-74), so a consumer never stalls."""
        if offset >= upper_bound or offset >= self.leo or offset < self.log_start_offset:
            return b""
        max_bytes = max(1, min(max_bytes, MAX_READ_BYTES))
        i = bisect.bisect_right([s.base_offset for s in self.segments], offset) - 1
        seg = self.segments[max(i, 0)]
        pos = seg.lookup(offset)
        chunk = os.pread(seg.fd, min(seg.size - pos, max_bytes + seg.index_interval + HEADER_SIZE), pos)
        out, total, p = [], 0, 0
        while p + HEADER_SIZE <= len(chunk):
            info = parse_header(chunk, p)
            if info.last_offset < offset:
                p += info.size
                continue
            if info.base_offset >= upper_bound or info.last_offset >= upper_bound:
                break
            if out and total + info.size > max_bytes:
                break
            if p + info.size > len(chunk):
                if out:
                    break
                out.append(os.pread(seg.fd, info.size, pos + p))
                total += info.size
                break
            out.append(chunk[p:p + info.size])
            total += info.size
            p += info.size
        return b"".join(out)

    def offset_for_timestamp(self, ts: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= ts, via the time index."""
        from kafka.record.default_records import DefaultRecordBatch
        for seg in self.segments:
            if seg.max_timestamp < ts or not seg.size:
                continue
            i = bisect.bisect_left([t for t, _ in seg.tindex], ts) - 1
            start_off = seg.tindex[i][1] if i >= 0 else seg.base_offset
            pos = seg.lookup(start_off)
            data = os.pread(seg.fd, seg.size - pos, pos)
            for p, info in iter_batches(data, check_crc=False):
                if info.max_timestamp < ts:
                    continue
                for rec in DefaultRecordBatch(bytes(data[p:p + info.size])):
                    if rec.timestamp >= ts:
                        return rec.offset, rec.timestamp
        return None

    def batch_infos_from(self, offset: int):
        """BatchInfo of every batch whose last offset is >= `offset`, in log order (producer
        state recovery: starts at the segment and index entry holding `offset`)."""
        i = max(bisect.bisect_right([s.base_offset for s in self.segments], offset) - 1, 0)
        for seg in self.segments[i:]:
            if not seg.size:
                continue
            pos = seg.lookup(offset)
            data = os.pread(seg.fd, seg.size - pos, pos)
            for _p, info in iter_batches(data, check_crc=False):
                if info.last_offset >= offset:
                    yield info

    def batches(self):
        """Every (BatchInfo, bytes) in the log, for tests and tools."""
        for seg in self.segments:
            data = os.pread(seg.fd, seg.size, 0) if seg.size else b""
            for p, info in iter_batches(data, check_crc=False):
                yield info, data[p:p + info.size]

    # --- truncation and retention ---------------------------------------------------------------
    def truncate_to(self, offset: int) -> int:
        """Removes every record at or above `offset` (follower truncation, KIP-101) and the epochs
        that start there. Returns the number of records' offsets removed (LEO delta)."""
        offset = max(offset, self.log_start_offset)
        old = self.leo
        if offset >= old:
            return 0
        while len(self.segments) > 1 and self.segments[-1].base_offset >= offset:
            self.segments.pop().delete()
        self.segments[-1].truncate_to(offset)
        self.epochs.truncate_from_end(self.leo)
        self.producers.truncate_and_reload(self)
        self._record_flushed_after_truncate()
        with self._ckpt_lock:
            # refuse every checkpoint decided before the cut; one being written now has
            # finished (we hold the lock), so checkpointed_hw is what the file says
            self._ckpt_newest = self._ckpt_issued
            if self.checkpointed_hw > self.leo:
                self._write_hw_locked(self.leo)
        return old - self.leo

    def _record_flushed_after_truncate(self) -> None:
        # truncation only shrinks files; what was flushed below the cut stays flushed
        try:
            side = json.loads((self.dir / FLUSHED).read_text())
        except (OSError, ValueError):
            side = {}
        new = {s.path.name: min(side.get(s.path.name, 0), s.size) for s in self.segments}
        atomic_write(self.dir / FLUSHED, json.dumps(new, sort_keys=True).encode())

    def truncate_fully_and_start_at(self, offset: int) -> None:
        for s in self.segments:
            s.delete()
        self.segments = [Segment(self.dir, offset, self.config.index_interval_bytes)]
        self.epochs.clear()
        self.producers.clear()
        self._record_flushed()

    def apply_retention(self, now_ms: float, upper_bound: int | None = None) -> int:
        """Deletes whole non-active segments, oldest first, beyond retention.bytes or older than
        retention.ms (by their max timestamp), never one holding offsets >= `upper_bound` (HW).
        Returns the number of segments deleted."""
        c, deleted = self.config, 0
        while len(self.segments) > 1:
            seg, nxt = self.segments[0], self.segments[1]
            if upper_bound is not None and nxt.base_offset > upper_bound:
                break
            too_big = c.retention_bytes is not None and self.size_bytes - seg.size >= c.retention_bytes
            too_old = c.retention_ms is not None and seg.max_timestamp >= 0 and now_ms - seg.max_timestamp > c.retention_ms
            if not (too_big or too_old):
                break
            self.segments.pop(0).delete()
            deleted += 1
        if deleted:
            self._record_flushed_after_truncate()
            self.producers.drop_aborted_below(self.log_start_offset)
        return deleted

    def close(self) -> None:
        for s in self.segments:
            s.close()


def power_loss(data_dir: str | Path) -> dict[str, int]:
    """Simulates losing the page cache: truncates every .log under `data_dir` to the length its
    partition's `flushed.json` says was fsynced (a log never flushed loses everything). The
    broker must be dead (kill -9) first. Returns {log path: bytes lost}."""
    lost: dict[str, int] = {}
    for side_path in sorted(Path(data_dir).rglob(FLUSHED)):
        d = side_path.parent
        try:
            side = json.loads(side_path.read_text())
        except (OSError, ValueError):
            side = {}
        for seg in sorted(d.glob("*.log")):
            size = seg.stat().st_size
            keep = min(side.get(seg.name, 0), size)
            if keep < size:
                with open(seg, "r+b") as f:
                    f.truncate(keep)
                lost[str(seg)] = size - keep
    return lost
