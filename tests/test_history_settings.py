"""Verdicts judged against the producer's settings: a retried batch of a
non-idempotent, retrying producer may be appended twice — valid, with a note saying the settings
permitted it; the same history with idempotence on stays invalid (duplicate, nonlinearizable)."""
from __future__ import annotations

from checkers.history.oracle.check import check_history
from tests.history_util import B


def dup_history(**cfg):
    b = B()
    b.config(0, 0, **cfg)
    # "a" sent; the first attempt was appended at 0 but its answer lost; the retry went to 1
    b.send(0, "a", 2, 10, offset=1)
    b.send(0, "b", 11, 12, offset=2)
    b.poll(8, [(0, "a"), (1, "a")], 13, 14)          # two reads of the copy: one placement
    b.poll(9, [(0, "a"), (1, "a"), (2, "b")], 20, 21, final=True)
    return b.history()


def test_duplicate_permitted_without_idempotence():
    v = check_history(dup_history(acks="all", idempotence=False, retries=5, max_in_flight=1))
    assert v.status == "valid", [a.explanation for a in v.anomalies]
    assert [n.type for n in v.notes] == ["duplicate"]
    assert "permit" in v.notes[0].explanation and "idempotence=False" in v.notes[0].explanation


def test_duplicate_invalid_with_idempotence_or_without_retries():
    for cfg in ({"idempotence": True, "retries": 5}, {"idempotence": False, "retries": 0}, {}):
        v = check_history(dup_history(acks="all", max_in_flight=1, **cfg) if cfg else dup_history())
        assert v.status == "invalid", cfg
        assert {"duplicate", "nonlinearizable"} <= {a.type for a in v.anomalies}, cfg
        assert not v.notes


def test_a_permitted_duplicate_does_not_hide_a_lost_write():
    b = B()
    b.config(0, 0, acks="all", idempotence=False, retries=5, max_in_flight=1)
    b.send(0, "a", 2, 10, offset=1)
    b.send(0, "b", 11, 12, offset=2)
    b.send(0, "c", 13, 14, offset=3)
    b.poll(9, [(0, "a"), (1, "a"), (3, "c")], 20, 21, final=True)
    v = check_history(b.history())
    assert v.status == "invalid" and "lost-write" in {a.type for a in v.anomalies}
