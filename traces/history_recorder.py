"""Recording a history from live clients (kafka-python, confluent-kafka, aiokafka, our broker's
tests, the model's simulated clients): a thread-safe writer of the JSON-lines history format.
Each call writes and flushes one event, so a crash leaves a readable prefix; operations left
without a completion are read back as `info`. Times come from one monotonic clock for the whole
run (real-time order is derived from it) plus the wall clock for display.

    rec = HistoryRecorder("run.jsonl", trace_id="run-7", client="kafka-python")
    rec.producer_config(process=0, retries=5, max_in_flight=5, idempotence=True, acks="all")
    op = rec.invoke(0, "send", topic="t", partition=0, key="k", value="v1")
    rec.ok(op, offset=md.offset)          # or rec.fail(op, error=...) / rec.info(op, error=...)
    ...
    rec.close()
"""
from __future__ import annotations

import itertools
import json
import threading
import time
from pathlib import Path
from typing import Any, Callable

from traces.history import FS, VERSION, HistoryError, check_event, make_header


class HistoryRecorder:
    def __init__(self, path: str | Path, trace_id: str | None = None,
                 clock: Callable[[], int] = time.monotonic_ns,
                 wall: Callable[[], int] = time.time_ns, version: int = VERSION, **meta: Any):
        """`version`: 2 to record transactions (txn, txn_commit / txn_abort, isolation,
        transactional_id) and assignment sets (docs/history-format.md)."""
        self.path = Path(path)
        self._f = open(self.path, "w", encoding="utf-8")
        self._lock = threading.Lock()
        self._ids = itertools.count()
        self._open: dict[int, tuple[int, str]] = {}     # id -> (process, f)
        self._clock, self._wall = clock, wall
        self.version = version
        self._write(make_header(trace_id, version=version, **meta))

    def _write(self, ev: dict[str, Any]) -> None:
        line = json.dumps(ev, separators=(",", ":")) + "\n"
        with self._lock:
            self._f.write(line)
            self._f.flush()

    def invoke(self, process: int, f: str, **fields: Any) -> int:
        """Writes the invoke of a new operation; returns its id for the completion."""
        if f not in FS:
            raise ValueError(f"unknown operation {f!r}")
        oid = next(self._ids)
        ev = {"id": oid, "type": "invoke", "process": process, "f": f,
              **{k: v for k, v in fields.items() if v is not None},
              "mono_ns": self._clock(), "wall_ns": self._wall()}
        self._check(ev)
        with self._lock:
            self._open[oid] = (process, f)
        self._write(ev)
        return oid

    def invoke_set(self, process: int, f: str, many: list[dict[str, Any]]) -> list[int]:
        """Invokes of one operation per entry at one `mono_ns`: in version 2 the assign or
        subscribe events of one process at one time are one assignment (a set). Returns the ids
        in the entries' order."""
        if f not in FS:
            raise ValueError(f"unknown operation {f!r}")
        mono, wall = self._clock(), self._wall()
        evs = []
        for fields in many:
            ev = {"id": 0, "type": "invoke", "process": process, "f": f,
                  **{k: v for k, v in fields.items() if v is not None}, "mono_ns": mono, "wall_ns": wall}
            self._check(ev)
            evs.append(ev)
        with self._lock:
            for ev in evs:
                ev["id"] = next(self._ids)
                self._open[ev["id"]] = (process, f)
        for ev in evs:
            self._write(ev)
        return [ev["id"] for ev in evs]

    def _complete(self, oid: int, kind: str, **fields: Any) -> None:
        with self._lock:
            process, f = self._open.pop(oid)
        ev = {"id": oid, "type": kind, "process": process, "f": f,
              **{k: v for k, v in fields.items() if v is not None},
              "mono_ns": self._clock(), "wall_ns": self._wall()}
        self._check(ev)
        self._write(ev)

    def ok(self, oid: int, **result: Any) -> None:
        self._complete(oid, "ok", **result)

    def fail(self, oid: int, error: str | None = None, **result: Any) -> None:
        """Use only when the operation certainly did not happen (e.g. a non-retriable error).
        A poll may still pass the records it returned (`offsets`, `values`): evidence."""
        self._complete(oid, "fail", error=error, **result)

    def info(self, oid: int, error: str | None = None, **result: Any) -> None:
        """The outcome is unknown (timeout, disconnect): it may or may not have happened. A
        send may pass the offset it was told, a poll the records it returned."""
        self._complete(oid, "info", error=error, **result)

    def producer_config(self, process: int, **settings: Any) -> None:
        unknown = sorted(set(settings) - {"retries", "max_in_flight", "idempotence", "acks",
                                          "transactional_id"})
        if unknown:
            raise ValueError(f"unknown producer setting(s) {', '.join(unknown)}")
        self.ok(self.invoke(process, "producer_config", **settings))

    def _check(self, ev: dict[str, Any]) -> None:
        # Fail at the call site, not when someone later reads the file.
        try:
            check_event(str(self.path), "recording", ev)
        except HistoryError as e:
            raise ValueError(e.message) from None

    def close(self) -> None:
        with self._lock:
            self._f.close()

    def __enter__(self) -> "HistoryRecorder":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

