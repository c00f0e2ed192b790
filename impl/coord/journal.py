"""Durability of the embedded coordination server: snapshot + append-only log in the data dir.

Owns the on-disk format and crash recovery. Files:
  LOCK             flock'ed while a server runs, so two servers never share a data dir
  coord.snap       the persistent tree at some point, written to a temp file, fsynced, renamed
  coord.<gen>.log  records since that snapshot; the snapshot names its generation <gen>
Every record is framed as  u32 length | u32 crc32 | JSON  and appended with write + fsync
before the server answers anyone (see state.py). Recovery replays the snapshot, then its log up
to the first torn or corrupt frame, and truncates the log there: a crash mid-append loses only
the write no client was told about. Ephemeral nodes are never written.
"""
from __future__ import annotations

import fcntl
import json
import logging
import os
import struct
import zlib

log = logging.getLogger(__name__)

FRAME = struct.Struct(">II")
# After this many appended records the next batch first writes a snapshot and starts a new log
# generation, so recovery time and disk use stay bounded by the tree size, not the history.
COMPACT_AFTER_RECORDS = 10_000
MAX_RECORD_BYTES = 4 * 1024 * 1024


def _frame(rec: dict) -> bytes:
    body = json.dumps(rec, separators=(",", ":"), sort_keys=True).encode("utf-8")
    return FRAME.pack(len(body), zlib.crc32(body)) + body


def _read_frames(buf: bytes) -> tuple[list[dict], int]:
    """Decode frames from buf; return (records, length of the valid prefix)."""
    out, pos = [], 0
    while pos + FRAME.size <= len(buf):  # bounded: pos strictly grows
        n, crc = FRAME.unpack_from(buf, pos)
        body = buf[pos + FRAME.size: pos + FRAME.size + n]
        if n > MAX_RECORD_BYTES or len(body) < n or zlib.crc32(body) != crc:
            break
        try:
            out.append(json.loads(body))
        except ValueError:
            break
        pos += FRAME.size + n
    return out, pos


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Journal:
    def __init__(self, data_dir: str, compact_after: int | None = None):
        os.makedirs(data_dir, exist_ok=True)
        self.compact_after = compact_after or COMPACT_AFTER_RECORDS
        self.dir = data_dir
        self._lock = open(os.path.join(data_dir, "LOCK"), "a")
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise SystemExit(f"coord: data dir {data_dir} is in use by another server") from None
        self.gen = 0
        self._fd: int | None = None
        self._appended = 0

    def _log_path(self, gen: int) -> str:
        return os.path.join(self.dir, f"coord.{gen}.log")

    def recover(self) -> list[dict]:
        """Return the records to replay (snapshot then log) and open the log for appending."""
        records: list[dict] = []
        snap = os.path.join(self.dir, "coord.snap")
        if os.path.exists(snap):
            with open(snap, "rb") as f:
                buf = f.read()
            recs, valid = _read_frames(buf)
            if valid != len(buf) or not recs or recs[0].get("t") != "snap":
                raise SystemExit(f"coord: snapshot {snap} is corrupt; refusing to start")
            self.gen = recs[0]["gen"]
            records += recs[1:]
        path = self._log_path(self.gen)
        if os.path.exists(path):
            with open(path, "rb") as f:
                buf = f.read()
            recs, valid = _read_frames(buf)
            if valid != len(buf):
                log.warning("coord: %s: dropping %d bytes of torn tail", path, len(buf) - valid)
                with open(path, "r+b") as f:
                    f.truncate(valid)
                    os.fsync(f.fileno())
            records += recs
            self._appended = len(recs)
        for name in os.listdir(self.dir):  # logs of older generations are superseded
            if name.startswith("coord.") and name.endswith(".log") and name != os.path.basename(path):
                os.unlink(os.path.join(self.dir, name))
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        _fsync_dir(self.dir)
        return records

    def append(self, records: list[dict]) -> None:
        """Durably append; returns only after fsync."""
        if not records:
            return
        os.write(self._fd, b"".join(_frame(r) for r in records))
        os.fsync(self._fd)
        self._appended += len(records)

    def needs_compaction(self) -> bool:
        return self._appended >= self.compact_after

    def compact(self, tree_records: list[dict]) -> None:
        """Write a snapshot of the whole persistent tree and switch to an empty log.
        Crash-safe: until the rename, recovery uses the old snapshot and old log."""
        new_gen = self.gen + 1
        new_fd = os.open(self._log_path(new_gen), os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
        tmp = os.path.join(self.dir, "coord.snap.tmp")
        with open(tmp, "wb") as f:
            f.write(_frame({"t": "snap", "gen": new_gen}))
            f.write(b"".join(_frame(r) for r in tree_records))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, os.path.join(self.dir, "coord.snap"))
        _fsync_dir(self.dir)
        os.close(self._fd)
        os.unlink(self._log_path(self.gen))
        self._fd, self.gen, self._appended = new_fd, new_gen, 0

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self._lock.close()
