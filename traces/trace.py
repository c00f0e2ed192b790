"""The kafkaverify trace format: one JSON object per line (JSONL).

Line 1 is the header; every later line is a record of one `kind`. One format serves the model's
counterexamples and simulations (kind "step"), the broker's internal transitions (kind "event")
and closing verdicts (kind "verdict"), so that replay, conformance and mining read one thing.

    {"kind": "header", "format": "kafkaverify-trace", "version": 1, "source": "model",
     "generation": "current", "fixes": [...], "config": {...}, "bounds": {...}, "seed": 7}
    {"kind": "step", "i": 1, "action": {"type": "Append", ...}, "text": "...", "state": {...}}
    {"kind": "event", "ts_ms": 12.5, "node": 0, "type": "became_leader", ...}
    {"kind": "verdict", "violation": "CommittedDurability", "text": "..."}

This module imports neither spec/ nor impl/: it only knows the envelope. Readers raise
TraceError with the 1-based line number for anything malformed; nothing is silently dropped.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Iterator

FORMAT = "kafkaverify-trace"
VERSION = 1
SUPPORTED_VERSIONS = (1,)
SOURCES = ("model", "broker", "conformance")
KINDS = ("step", "event", "verdict")

# Broker-side transitions (source "broker"), each with the fields it must carry. The conformance
# check maps these onto model actions, so the names are part of the format.
BROKER_EVENT_FIELDS: dict[str, tuple[str, ...]] = {
    "became_leader": ("topic", "partition", "leader_epoch"),
    "became_follower": ("topic", "partition", "leader_epoch", "leader"),
    "appended": ("topic", "partition", "base_offset", "last_offset", "leader_epoch"),
    "hw_advanced": ("topic", "partition", "hw"),
    "truncated": ("topic", "partition", "offset", "reason"),
    "isr_changed": ("topic", "partition", "isr", "leader_epoch"),
    "controller_elected": ("controller_epoch",),
    "stale_request_rejected": ("request", "controller_epoch", "current_controller_epoch"),
    # a control request's acceptance inputs and decision: the newest controller epoch seen before
    # it, and per partition {topic, partition, leader, leader_epoch, current_leader_epoch, accepted}
    "control_request": ("request", "controller_epoch", "current_controller_epoch", "accepted", "partitions"),
    "broker_started": (),
    "recovered": ("topic", "partition", "log_end_offset", "truncated_bytes"),
    # the follower finished its truncation step (KIP-101 / KIP-279) and starts fetching
    "truncation_done": ("topic", "partition", "log_end_offset", "leader_epoch"),
    # the leader's OffsetsForLeaderEpoch answer
    "epoch_answered": ("topic", "partition", "replica", "requested_epoch", "leader_epoch", "end_offset"),
    # a replica request of another leader epoch than the leader's, and the answer (KIP-320)
    "stale_epoch_request": ("topic", "partition", "request", "replica", "request_epoch", "leader_epoch",
                            "error_code"),
    # the leader proposes an ISR (with each added member's position), or its write failed
    "isr_proposed": ("topic", "partition", "isr", "leader_epoch", "hw", "positions"),
    "isr_change_failed": ("topic", "partition", "isr", "leader_epoch"),
    # transactions (impl/txn_handlers.py, impl/txn_log.py): txn_rule is checked against the
    # model's rule functions; the others describe the coordinator's and the partitions' state
    "txn_rule": ("rule", "transactional_id", "inputs", "output"),
    "txn_state": ("transactional_id", "producer_id", "producer_epoch", "state"),
    "txn_loaded": ("partition", "coordinator_epoch"),
    "txn_markers": ("transactional_id", "producer_id", "producer_epoch", "commit"),
    "txn_timed_out": ("transactional_id", "producer_id", "producer_epoch"),
    # a partition leader's transaction decisions, with their inputs (impl/txn_log.py)
    "txn_produce": ("topic", "partition", "producer_id", "epoch", "partition_epoch", "ongoing_epoch",
                    "verify_error", "verified", "verdict", "error_code"),
    "txn_marker": ("topic", "partition", "producer_id", "epoch", "coordinator_epoch", "commit",
                   "partition_epoch", "open_epoch", "last_coordinator_epoch", "verdict", "error_code"),
}


class TraceError(Exception):
    """A malformed trace file; `line` is 1-based (0 when the file as a whole is wrong)."""

    def __init__(self, path: str, line: int, message: str):
        self.path, self.line, self.message = path, line, message
        where = f"{path}:{line}" if line else path
        super().__init__(f"{where}: {message}")


@dataclass
class Trace:
    header: dict[str, Any]
    records: list[dict[str, Any]] = field(default_factory=list)
    # 1-based line number of each record, for error messages of later consumers (replay).
    lines: list[int] = field(default_factory=list)

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [r for r in self.records if r.get("kind") == kind]


def make_header(source: str, **fields: Any) -> dict[str, Any]:
    if source not in SOURCES:
        raise ValueError(f"unknown trace source {source!r}")
    return {"kind": "header", "format": FORMAT, "version": VERSION, "source": source, **fields}


class TraceWriter:
    """Appends records to a JSONL trace; flushes each line so a crash leaves a readable prefix."""

    def __init__(self, path: str | Path, header: dict[str, Any]):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._f: IO[str] = open(self.path, "w", encoding="utf-8")
        self.write(header)

    def write(self, record: dict[str, Any]) -> None:
        self._f.write(json.dumps(record, sort_keys=True, separators=(",", ":")) + "\n")
        self._f.flush()

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> "TraceWriter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def dump(path: str | Path, header: dict[str, Any], records: list[dict[str, Any]]) -> None:
    with TraceWriter(path, header) as w:
        for r in records:
            w.write(r)


def _check_record(path: str, lineno: int, rec: Any) -> None:
    if not isinstance(rec, dict):
        raise TraceError(path, lineno, "a record must be a JSON object")
    kind = rec.get("kind")
    if kind not in KINDS:
        raise TraceError(path, lineno, f"unknown record kind {kind!r} (expected one of {', '.join(KINDS)})")
    if kind == "step":
        if not isinstance(rec.get("i"), int) or not isinstance(rec.get("action"), dict):
            raise TraceError(path, lineno, "a step needs an integer 'i' and an object 'action'")
        if not isinstance(rec["action"].get("type"), str):
            raise TraceError(path, lineno, "a step's action needs a string 'type'")
    elif kind == "event":
        etype = rec.get("type")
        if etype not in BROKER_EVENT_FIELDS:
            raise TraceError(path, lineno, f"unknown broker event type {etype!r}")
        missing = [f for f in BROKER_EVENT_FIELDS[etype] if f not in rec]
        if missing:
            raise TraceError(path, lineno, f"event {etype!r} lacks field(s) {', '.join(missing)}")


def iter_records(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yields (line number, record) for the header and every record, validating as it goes."""
    p = str(path)
    try:
        f = open(path, "rb")
    except OSError as e:
        raise TraceError(p, 0, f"cannot open: {e.strerror}") from None
    with f:
        lineno = 0
        for raw in f:
            lineno += 1
            if not raw.endswith(b"\n"):
                # The writer ends every line; a missing newline is a torn write.
                raise TraceError(p, lineno, "truncated line (file ends mid-record)")
            text = raw.strip()
            if not text:
                continue
            try:
                rec = json.loads(text)
            except (json.JSONDecodeError, UnicodeDecodeError) as e:
                raise TraceError(p, lineno, f"not valid JSON ({e.__class__.__name__}: {e})") from None
            if lineno == 1:
                _check_header(p, rec)
            else:
                _check_record(p, lineno, rec)
            yield lineno, rec
        if lineno == 0:
            raise TraceError(p, 0, "empty file: no header")


def _check_header(path: str, rec: Any) -> None:
    if not isinstance(rec, dict) or rec.get("kind") != "header" or rec.get("format") != FORMAT:
        raise TraceError(path, 1, f"not a {FORMAT} file: line 1 must be its header")
    if rec.get("version") not in SUPPORTED_VERSIONS:
        raise TraceError(path, 1, f"unsupported format version {rec.get('version')!r} "
                                  f"(this kafkaverify reads {', '.join(map(str, SUPPORTED_VERSIONS))})")
    if rec.get("source") not in SOURCES:
        raise TraceError(path, 1, f"unknown source {rec.get('source')!r}")


def load(path: str | Path) -> Trace:
    it = iter_records(path)
    _, header = next(it)
    trace = Trace(header=header)
    for lineno, rec in it:
        trace.records.append(rec)
        trace.lines.append(lineno)
    return trace
