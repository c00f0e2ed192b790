"""The recorder writes what the reader accepts: a small live session (threads, a timeout that
stays in flight) reads back, pairs, and checks valid; bad fields fail at the call site."""
import threading

import pytest

from checkers.history.oracle.check import check_history
from traces.history import load
from traces.history_recorder import HistoryRecorder


def test_recorded_session_reads_back_and_checks_valid(tmp_path):
    path = tmp_path / "run.jsonl"
    log: list[str] = []
    lock = threading.Lock()
    with HistoryRecorder(path, trace_id="live", client="in-memory") as rec:
        def producer(p: int) -> None:
            rec.producer_config(p, retries=5, max_in_flight=1, idempotence=True, acks="all")
            for i in range(20):
                op = rec.invoke(p, "send", topic="t", partition=0, value=f"p{p}-{i}")
                with lock:
                    log.append(f"p{p}-{i}")
                    off = len(log) - 1
                rec.ok(op, offset=off)
        threads = [threading.Thread(target=producer, args=(p,)) for p in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        rec.invoke(7, "send", topic="t", partition=0, value="lost-in-flight")   # never completes
        op = rec.invoke(9, "poll", topic="t", partition=0, final=True)
        rec.ok(op, offsets=list(range(len(log))), values=list(log))
    h = load(path)
    assert len(h.ops) == 3 + 60 + 2
    assert [o for o in h.ops if o.value == "lost-in-flight"][0].type == "info"
    v = check_history(h)
    assert v.status == "valid", [a.explanation for a in v.anomalies]


def test_recorder_rejects_bad_fields_at_call_site(tmp_path):
    with HistoryRecorder(tmp_path / "x.jsonl") as rec:
        with pytest.raises(ValueError, match="unknown field 'valeu'"):
            rec.invoke(0, "send", topic="t", partition=0, valeu="x")
        with pytest.raises(ValueError, match="unknown operation"):
            rec.invoke(0, "produce")
        with pytest.raises(ValueError, match="unknown producer setting"):
            rec.producer_config(0, linger_ms=5)
