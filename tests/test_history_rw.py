"""Anti-dependency (rw) cycles: G-single, found only where a poll's non-observation means
something (it reports its partition's end, `end_offset`), and never from a poll that a
max.poll.records bound may have cut short; and the `end_offset` field read, written and refused
(docs/histories.md, "What is checked"; checkers/history/oracle/cycles.py)."""
from __future__ import annotations

import json

import pytest
from checkers.history.oracle.check import check_history
from kafkaverify.cli import main
from tests.history_util import B
from traces import history as th

RC = "read_committed"


def _v2(b: B) -> th.History:
    h = b.history()
    h.header["version"] = th.TXN_VERSION
    return h


def _poll(b: B, proc, recs, inv, comp, part=0, end=None, iso=RC, final=False, txn=None):
    p = b.poll(proc, recs, inv, comp, part=part, final=final)
    p.isolation, p.end_offset, p.txn = iso, end, txn
    return p


def _txn_send(b: B, proc, value, inv, comp, offset, txn, part=0):
    s = b.send(proc, value, inv, comp, offset=offset, part=part)
    s.txn = txn
    return s


def _commit(b: B, proc, txn, inv, comp, type="ok"):
    return b._op(process=proc, f="txn_commit", inv=inv, comp=comp, txn=txn, type=type)


def _verdict(b: B):
    return check_history(_v2(b))


def _stale_end(end: int | None, late_reader_reads=((0, "a"),)) -> B:
    """p0 appends a@0, b@1; p1 reads both by time 40; p2's poll (50-60) returns a@0 and
    reports `end`; final reads of everything at the end."""
    b = B()
    b.send(0, "a", 0, 5, offset=0)
    b.send(0, "b", 10, 15, offset=1)
    b.send(0, "c", 100, 105, offset=2)
    _poll(b, 1, [(0, "a"), (1, "b")], 30, 40)
    _poll(b, 2, list(late_reader_reads), 50, 60, end=end)
    _poll(b, 9, [(0, "a"), (1, "b"), (2, "c")], 200, 210, final=True)
    return b


def test_a_poll_reporting_an_end_before_a_record_already_read_is_g_single_realtime():
    v = _verdict(_stale_end(end=1))
    assert v.types() == {"G-single-realtime"}, v.types()
    a = next(a for a in v.anomalies if a.type == "G-single-realtime")
    assert set(a.witness) == {1, 3, 4}          # b's send, the earlier reader, the stale poll
    assert "reported the end of t-0 at offset 1" in a.explanation
    assert "'b' at offset 1" in a.explanation


@pytest.mark.parametrize("end", [None, 2, 3])
def test_a_bounded_poll_proves_no_anti_dependency(end):
    """Without an end, or with one past the records it skipped (max.poll.records cut the
    batch), a poll that stopped at offset 0 says nothing of offset 1: no G-single, valid."""
    v = _verdict(_stale_end(end=end))
    assert v.types() == set() and v.status == "valid", v.types()


def test_the_rw_edge_goes_to_the_first_record_at_or_past_the_end():
    """end_offset 2: the poll denies offset 2 (c) only; c was read before it began."""
    b = _stale_end(end=2)
    b.ops[2].inv, b.ops[2].comp, b.ops[2].end = 16, 20, 20        # c appended early
    b.ops[3].offsets, b.ops[3].values = [0, 1, 2], ["a", "b", "c"]   # and read by p1
    assert _verdict(b).types() == {"G-single-realtime"}
    b.ops[3].offsets, b.ops[3].values = [0, 1], ["a", "b"]          # only b read before
    assert _verdict(b).types() == set()


def test_one_process_reading_then_denying_is_g_single_process():
    b = _stale_end(end=1)
    b.ops[4].process = 1                           # the same consumer read b, then denied it
    # (reading a again is also a step back for that consumer)
    assert _verdict(b).types() == {"G-single-process", "nonmonotonic-poll"}


def test_a_poll_contradicting_its_own_end_is_g_single():
    b = _stale_end(end=1, late_reader_reads=((0, "a"), (1, "b")))
    assert _verdict(b).types() == {"G-single"}


def _ctp(deny_after_seeing_y: bool, read_x_first: bool = True) -> B:
    """Transaction 1 (p0) writes a to x (partition 0); transaction 2 (p3, consume-transform-
    produce) reads a and then writes b to y (partition 1); consumer p1 reads y and then
    polls x to its end (end_offset 0)."""
    b = B()
    for proc, tid in ((0, "tx-a"), (3, "tx-c")):
        b.config(proc, 0, transactional_id=tid)
    _txn_send(b, 0, "a", 10, 12, 0, txn=1)
    _commit(b, 0, 1, 14, 16)
    if read_x_first:
        _poll(b, 3, [(0, "a")], 30, 35, txn=2)
    _txn_send(b, 3, "b", 36, 37, 0, txn=2, part=1)
    _commit(b, 3, 2, 40, 45)
    t_y, t_x = (50, 60) if deny_after_seeing_y else (50, 20)   # 20: before anyone read a
    _poll(b, 1, [(0, "b")], t_y, t_y + 5, part=1)
    _poll(b, 1, [], t_x, t_x + 5, end=0)
    _poll(b, 9, [(0, "a")], 200, 210, final=True)
    _poll(b, 9, [(0, "b")], 200, 210, part=1, final=True)
    return b


def test_g_single_across_partitions_through_a_transaction():
    """p1 saw b, which transaction 2 wrote after reading a; then p1's poll said a was not yet
    visible: a G-single (p1 -rw-> a -wr-> transaction 2 -process-> b -wr-> p1)."""
    v = _verdict(_ctp(True))
    assert v.types() == {"G-single-process"}, v.types()
    a = v.anomalies[0]
    assert a.partition == "t-0,t-1"
    assert "transaction 1" in a.explanation and "the commit" in a.explanation
    # the same cycle with transactions as nodes
    assert "(#8 -rw→ transaction 1 -wr→ transaction 2 -wr→ #7 -process→ #8)" in a.explanation
    assert _verdict(_ctp(False)).types() == set()           # denied before a was read: fine


def test_read_skew_across_partitions_is_not_g_single():
    """One transaction writes x and y; a consumer sees its y record and then polls x to an
    end before its x record: markers land partition by partition, so Kafka permits it (as
    transactions-as-nodes, Elle would call it a G-single)."""
    b = B()
    b.config(0, 0, transactional_id="tx-a")
    _txn_send(b, 0, "a", 10, 12, 0, txn=1)
    _txn_send(b, 0, "b", 10, 12, 0, txn=1, part=1)
    _commit(b, 0, 1, 14, 16)
    _poll(b, 1, [(0, "b")], 50, 55, part=1)
    _poll(b, 1, [], 60, 65, end=0)
    _poll(b, 9, [(0, "a")], 200, 210, final=True)
    _poll(b, 9, [(0, "b")], 200, 210, part=1, final=True)
    v = _verdict(b)
    assert v.types() == set() and v.status == "valid", v.types()


def test_an_aborted_record_is_not_visible_to_read_committed():
    """An aborted transaction's record at offset 1 read by a read_uncommitted consumer; a
    later read_committed poll's end 1 denies nothing visible to it, a read_uncommitted one's
    denies what the first consumer read."""
    b = B()
    b.config(0, 0, transactional_id="tx-a")
    b.send(5, "a", 0, 5, offset=0)
    _txn_send(b, 0, "x", 10, 12, 1, txn=1)
    b._op(process=0, f="txn_abort", inv=14, comp=16, txn=1)
    _poll(b, 1, [(0, "a"), (1, "x")], 30, 40, iso="read_uncommitted")
    late = _poll(b, 2, [(0, "a")], 50, 60, end=1)
    _poll(b, 9, [(0, "a"), (1, "x")], 200, 210, final=True, iso="read_uncommitted")
    assert _verdict(b).types() == set()
    late.isolation = "read_uncommitted"
    assert _verdict(b).types() == {"G-single-realtime"}


def _write(tmp_path, events, version=2, name="h.jsonl"):
    p = tmp_path / name
    p.write_text("\n".join(json.dumps(e) for e in
                           [{"format": th.FORMAT, "version": version}] + events) + "\n")
    return p


_EVENTS = [
    {"id": 0, "type": "invoke", "process": 0, "f": "send", "topic": "t", "partition": 0,
     "value": "a", "mono_ns": 0},
    {"id": 0, "type": "ok", "process": 0, "f": "send", "offset": 0, "mono_ns": 5},
    {"id": 1, "type": "invoke", "process": 0, "f": "send", "topic": "t", "partition": 0,
     "value": "b", "mono_ns": 10},
    {"id": 1, "type": "ok", "process": 0, "f": "send", "offset": 1, "mono_ns": 15},
    {"id": 2, "type": "invoke", "process": 1, "f": "poll", "topic": "t", "partition": 0,
     "mono_ns": 30},
    {"id": 2, "type": "ok", "process": 1, "f": "poll", "offsets": [0, 1], "values": ["a", "b"],
     "mono_ns": 40},
    {"id": 3, "type": "invoke", "process": 2, "f": "poll", "topic": "t", "partition": 0,
     "mono_ns": 50},
    {"id": 3, "type": "ok", "process": 2, "f": "poll", "offsets": [0], "values": ["a"],
     "end_offset": 1, "mono_ns": 60},
    {"id": 4, "type": "invoke", "process": 9, "f": "poll", "topic": "t", "partition": 0,
     "final": True, "mono_ns": 100},
    {"id": 4, "type": "ok", "process": 9, "f": "poll", "offsets": [0, 1], "values": ["a", "b"],
     "mono_ns": 110},
]


@pytest.mark.parametrize("ext", ["jsonl", "parquet"])
def test_end_offset_is_read_written_and_checked(tmp_path, ext, capsys):
    src = _write(tmp_path, _EVENTS)
    h = th.load(src)
    assert [o.end_offset for o in h.ops if o.f == "poll"] == [None, 1, None]
    out = tmp_path / f"out.{ext}"
    th.write(out, h.header, th.history_events(h.ops))
    again = th.load(out)
    assert [o.end_offset for o in again.ops] == [o.end_offset for o in h.ops]
    with pytest.raises(SystemExit) as e:
        main(["check-history", str(out)])
    assert e.value.code == 1 and "G-single-realtime" in capsys.readouterr().out


@pytest.mark.parametrize("change, version, what", [
    ({"end_offset": -1}, 2, "field 'end_offset': negative offset -1"),
    ({}, 1, "end_offset needs format version 2"),
])
def test_bad_end_offset_is_refused(tmp_path, change, version, what, capsys):
    evs = [dict(e) for e in _EVENTS]
    evs[7].update(change)
    p = _write(tmp_path, evs, version=version)
    with pytest.raises(SystemExit) as e:
        main(["check-history", str(p)])
    err = capsys.readouterr().err
    assert e.value.code == 3 and "line 9" in err and what in err, err


def test_end_offset_only_on_a_poll(tmp_path, capsys):
    evs = [dict(e) for e in _EVENTS]
    evs[1]["end_offset"] = 3
    p = _write(tmp_path, evs)
    with pytest.raises(SystemExit) as e:
        main(["check-history", str(p)])
    err = capsys.readouterr().err
    assert e.value.code == 3 and "field 'end_offset' does not belong on a send" in err, err


# --- zombie fencing by transactional_id -------------------------------------------------------

def _zombie(b_config_at=20, a_commit_at=50, a_commit="ok", read_a=True, b_commits=True) -> B:
    """Processes 0 (A) and 1 (B) share transactional_id X. A begins transaction 1 at 10 (its
    send of a), B's producer_config at `b_config_at`, B's transaction 2 from 30, committed at
    40; A commits at `a_commit_at`."""
    b = B()
    b.config(0, 0, transactional_id="X")
    b.config(1, b_config_at, transactional_id="X")
    _txn_send(b, 0, "a", 10, 12, 0, txn=1)
    _txn_send(b, 1, "b", 30, 32, 1, txn=2)
    _commit(b, 1, 2, 40, 42, type="ok" if b_commits else "fail")
    _commit(b, 0, 1, a_commit_at, a_commit_at + 2, type=a_commit)
    recs = ([(0, "a")] if read_a else []) + ([(1, "b")] if b_commits else [])
    _poll(b, 9, recs, 200, 210, final=True)
    return b


def test_a_fenced_producer_acknowledged_committed_is_a_zombie_commit():
    v = _verdict(_zombie())
    assert v.types() == {"zombie-commit"}, v.types()
    a = v.anomalies[0]
    assert set(a.witness) == {1, 2, 3, 5}        # B's config, A's and B's first ops, A's commit
    assert "'X'" in a.explanation
    assert "so 1 is the newer incarnation and fenced 0" in a.explanation


def test_an_unknown_commit_of_a_fenced_producer_proven_by_a_read_is_a_zombie_commit():
    v = _verdict(_zombie(a_commit="info"))
    assert v.types() == {"zombie-commit"}, v.types()
    assert "proven by poll" in v.anomalies[0].explanation
    assert _verdict(_zombie(a_commit="info", read_a=False)).types() == set()    # fenced: fine


def test_a_commit_invoked_before_the_newer_incarnation_began_may_commit():
    v = _verdict(_zombie(a_commit_at=25))
    assert v.types() == set() and v.status == "valid", v.types()


def test_without_the_order_of_inits_two_late_commits_include_a_zombie():
    """B's producer_config before A began: either may be the newer, but after both began
    transactions only one can commit."""
    v = _verdict(_zombie(b_config_at=5))
    assert v.types() == {"zombie-commit"}, v.types()
    assert "whichever initialised first was fenced" in v.anomalies[0].explanation
    assert _verdict(_zombie(b_config_at=5, b_commits=False)).types() == set()
    assert _verdict(_zombie(b_config_at=5, a_commit_at=25)).types() == set()


def test_distinct_transactional_ids_never_fence():
    b = _zombie()
    b.ops[1].config = {"transactional_id": "Y"}
    assert _verdict(b).types() == set()


def test_shrink_keeps_a_g_single():
    from checkers.history.shrink import shrink
    r = shrink(_v2(_ctp(True)))
    assert r.anomaly.type == "G-single-process"
    assert len(r.history.ops) < 11
    assert any(o.end_offset == 0 for o in r.history.ops)


@pytest.mark.parametrize("seed", range(4))
def test_generated_histories_with_true_ends_are_valid_and_a_stale_end_is_found(seed):
    """Seeded transactional histories whose consumer polls report the end they read to:
    valid, no G-single. One poll's end moved back to a record its consumer had already
    read: a G-single."""
    from benchmarks.history_rw import with_ends
    from checkers.history.generate_txn import generate_txn
    h = with_ends(generate_txn(seed, ops=1500, partitions=3))
    h.header["version"] = th.TXN_VERSION
    v = check_history(h)
    assert v.status == "valid", sorted(v.types())
    polls = [o for o in h.ops if o.f == "poll" and o.end_offset is not None and o.offsets]
    first, later = polls[0], next(p for p in polls[1:] if p.tp == polls[0].tp)
    later.end_offset = first.offsets[0]
    kinds = check_history(h).types()
    assert kinds & {"G-single", "G-single-process", "G-single-realtime"}, kinds


@pytest.mark.parametrize("kind", ["G-single-process", "zombie-commit"])
def test_golden_history(kind):
    """traces/corpus/history2-{kind}.jsonl (format version 2, written from this file's
    `_ctp(True)` and `_zombie()`) with the exact rendering of its verdict next to it, as the
    seedable kinds' golden histories (tests/test_history_corpus.py, whose version-1 files the
    screens' tests also read; KAFKAVERIFY_REWRITE_GOLDEN=1 rewrites)."""
    from tests.test_history_corpus import CORPUS, assert_golden
    assert_golden(CORPUS / f"history2-{kind}.jsonl", kind)


def test_check_history_files_with_ends_are_searched_past_the_cycle_screen():
    """`check-history`'s path lays the dependency graph out for a compiled acyclicity screen, whose
    graph holds no anti-dependency edges: a history whose polls report their ends must still reach
    the G-single search."""
    from checkers.history.pipeline.file_check import check_file
    from tests.test_history_corpus import CORPUS
    v = check_file(str(CORPUS / "history2-G-single-process.jsonl")).verdict
    assert "G-single-process" in v.types(), v.types()
