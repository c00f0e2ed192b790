"""The partition leader's transaction rules (impl/rules.py) and the transactional producer state
of a log (impl/producer_state.py): pinned cases, agreement with the model's functions of the same
name (spec/rules.py) on every small input, and the state rebuilt from the log after a restart, a
truncation and a corrupt snapshot."""
from __future__ import annotations

import itertools
import json
import random

import pytest
from kafka.record.default_records import DefaultRecordBatch

from impl import rules as I
from impl.storage.batch import CorruptBatch, end_txn_marker, iter_batches
from impl.storage.log import PartitionLog, ProducerStateError
from kafkaverify.nemesis.scenarios import txn_records as txn_batch
from spec import rules as S

CUR = I.fixes_for("current")
K966 = I.fixes_for("kip-966")
OLD = I.fixes_for("kip-320")


# --- the rules ------------------------------------------------------------------------------------

@pytest.mark.parametrize("pe,e,verified,fixes,want", [
    (3, 2, True, CUR, "fenced"),             # an older epoch is fenced before any verification
    (3, 2, False, OLD, "fenced"),
    (3, 3, False, CUR, "unverified"),        # the coordinator does not hold it
    (3, 3, False, OLD, "append"),            # before KIP-890: appended (a hanging transaction)
    (3, 4, True, CUR, "append"),
    (-1, 0, True, CUR, "append"),
])
def test_txn_produce_verdict(pe, e, verified, fixes, want):
    assert I.txn_produce_verdict(pe, e, verified, fixes) == want


@pytest.mark.parametrize("pe,open_,last_ce,e,ce,fixes,want", [
    (2, 2, 5, 2, 4, CUR, "coordinator-fenced"),   # an older coordinator's marker, whatever its epoch
    (2, 2, 5, 1, 4, CUR, "coordinator-fenced"),
    (2, 2, 5, 1, 5, CUR, "fenced"),               # an older producer epoch
    (2, 2, 5, 2, 5, CUR, "append"),               # transaction version 1: same epoch as the batches
    (2, 2, 5, 2, 5, K966, "fenced"),              # version 2: an equal epoch is a late marker
    (2, 2, 5, 3, 5, K966, "append"),              # version 2: the bumped epoch
    (2, -1, 5, 2, 5, K966, "append"),             # nothing open: nothing to be late for
    (-1, -1, -1, 0, 0, CUR, "append"),
])
def test_txn_marker_verdict(pe, open_, last_ce, e, ce, fixes, want):
    assert I.txn_marker_verdict(pe, open_, last_ce, e, ce, fixes) == want


def test_verification_is_asked_only_with_the_fix_and_no_ongoing_transaction_of_that_epoch():
    assert I.txn_needs_verification(-1, 0, CUR)
    assert not I.txn_needs_verification(0, 0, CUR)          # ongoing here already
    assert I.txn_needs_verification(0, 1, CUR)              # ongoing, but of another epoch
    assert not I.txn_needs_verification(-1, 0, OLD)


def test_the_epoch_bump_check_is_for_version_2_markers():
    assert I.marker_fixes(K966, 2) == K966
    assert "txn-epoch-bump" not in I.marker_fixes(K966, 1) and I.marker_fixes(CUR, 2) == CUR
    assert I.txn_marker_verdict(2, 2, 0, 2, 0, I.marker_fixes(K966, 1)) == "append"
    assert I.txn_marker_verdict(2, 2, 0, 2, 0, I.marker_fixes(K966, 2)) == "fenced"


def test_lso_and_read_bound():
    assert I.last_stable_offset([], 9) == 9
    assert I.last_stable_offset([4, 2], 9) == 2
    assert I.last_stable_offset([12], 9) == 9               # never above the HW
    assert I.read_upper_bound(9, 2, 1) == 2 and I.read_upper_bound(9, 2, 0) == 9


FIXSETS = [frozenset(), frozenset({"txn-partition-verification"}), frozenset({"txn-epoch-bump"}),
           frozenset({"txn-partition-verification", "txn-epoch-bump"})]


def test_rules_agree_with_the_model_on_every_small_input():
    """The broker's copies decide as the model's functions of the same name. The model's produce
    verdict takes the coordinator's (epoch, state, partitions); the broker's takes whether the
    coordinator (or an ongoing transaction of that epoch) vouched for it."""
    rng = range(-1, 3)
    for fixes in FIXSETS:
        for pe, open_, last_ce, e, ce in itertools.product(rng, rng, rng, range(0, 3), range(0, 3)):
            assert I.txn_marker_verdict(pe, open_, last_ce, e, ce, fixes) == \
                S.txn_marker_verdict(pe, open_, last_ce, e, ce, fixes), (pe, open_, last_ce, e, ce, fixes)
        for pe, e, part in itertools.product(rng, range(0, 3), range(2)):
            for c_epoch, state, mask in itertools.product(range(0, 3), range(0, 4), range(4)):
                verified = state == 1 and c_epoch == e and bool((mask >> part) & 1)
                assert I.txn_produce_verdict(pe, e, verified, fixes) == \
                    S.txn_produce_verdict(pe, e, (c_epoch, state, mask), part, fixes)


# --- the producer state of a log ----------------------------------------------------------------

def _apply(lg: PartitionLog, ops: list) -> tuple:
    """Write `ops` ((kind, producer, epoch, coordinator epoch): kind 0 a one-record transactional
    batch, 1 COMMIT, 2 ABORT) to the log; returns the model's log tuple of the same entries."""
    seqs: dict = {}
    model = []
    for kind, pid, epoch, ce in ops:
        if kind == 0:
            s = seqs.get((pid, epoch), 0)
            try:
                lg.append_as_leader(txn_batch(pid, epoch, s), 0)
            except ProducerStateError:          # an older epoch: fenced, as the leader answers
                continue
            seqs[(pid, epoch)] = s + 1
        else:
            e = lg.producers.entry(pid)
            if e is not None and I.txn_marker_verdict(e.epoch, e.txn_epoch if e.txn_first_offset >= 0 else -1,
                                                      e.coordinator_epoch, epoch, ce, CUR) != "append":
                continue                        # refused by the marker rule: never in the log
            lg.append_marker(pid, epoch, kind == 1, ce, 0)
        model.append((kind, pid, epoch, ce, 0))
    return tuple(model)


def _random_ops(r: random.Random, n: int) -> list:
    ops = []
    for _ in range(n):
        pid = r.randint(1, 3)
        ops.append((r.choice((0, 0, 1, 2)), pid, r.choice((0, 0, 0, 1)), r.randint(0, 2)))
    return ops


def _state(lg: PartitionLog, hw: int) -> tuple:
    ps = lg.producers
    return (I.last_stable_offset(ps.unstable_first_offsets(hw), hw), list(ps.aborted),
            {pid: (e.epoch, e.txn_first_offset, e.txn_epoch, e.coordinator_epoch) for pid, e in ps.producers.items()})


@pytest.mark.parametrize("seed", range(12))
def test_log_state_matches_the_model_fold(tmp_path, seed):
    """LSO (HW = LEO), per-producer state and aborted index of random transactional logs are the
    model's last_stable_offset, txn_partition_state and txn_fates of the same entries."""
    r = random.Random(seed)
    lg = PartitionLog(tmp_path / "t-0")
    model = _apply(lg, _random_ops(r, 30))
    ps = lg.producers
    assert I.last_stable_offset(ps.unstable_first_offsets(lg.leo), lg.leo) == S.last_stable_offset(model)
    for pid in {m[1] for m in model}:
        e = ps.entry(pid)
        assert (e.epoch, e.txn_first_offset, e.txn_epoch if e.txn_first_offset >= 0 else -1,
                e.coordinator_epoch) == S.txn_partition_state(model, pid)
    assert ps.ongoing_first_offsets() == {pid: e.txn_first_offset for pid, e in ps.producers.items()
                                          if e.txn_first_offset >= 0}
    fates = S.txn_fates(model)
    aborted_by_index = {o for pid, first, last in ps.aborted for o in range(first, last + 1)
                        if model[o][0] == 0 and model[o][1] == pid}
    assert aborted_by_index == {o for o, f in enumerate(fates) if f == 2}


def test_lso_waits_for_the_hw_to_pass_the_marker(tmp_path):
    lg = PartitionLog(tmp_path / "t-0")
    lg.append_as_leader(txn_batch(1, 0, 0, 3), 0)          # 0..2
    assert I.last_stable_offset(lg.producers.unstable_first_offsets(3), 3) == 0
    off = lg.append_marker(1, 0, True, 0, 0)                # 3
    assert off == 3
    assert I.last_stable_offset(lg.producers.unstable_first_offsets(3), 3) == 0   # marker not under the HW
    assert I.last_stable_offset(lg.producers.unstable_first_offsets(4), 4) == 4


def test_state_is_rebuilt_after_restart_truncation_and_a_corrupt_snapshot(tmp_path):
    d = tmp_path / "t-0"
    lg = PartitionLog(d)
    _apply(lg, [(0, 1, 0, 0), (0, 2, 0, 0), (2, 1, 0, 1), (0, 2, 0, 0), (0, 3, 0, 0), (1, 2, 0, 1), (0, 1, 0, 0)])
    want = _state(lg, lg.leo)
    assert want[1] == [(1, 0, 2)] and want[0] == 4          # producer 3 open at 4; 1 reopened at 6
    lg.producers.take_snapshot()
    _apply(lg, [(2, 3, 0, 2)])                              # after the snapshot: replayed on load
    want = _state(lg, lg.leo)
    lg.close()
    lg = PartitionLog(d)
    assert _state(lg, lg.leo) == want
    lg.close()
    for snap in d.glob("*.snapshot"):
        snap.write_text(json.dumps({"version": 2, "producers": {}, "aborted": [[1, 5, 2]]}))
    lg = PartitionLog(d)                                    # unreadable: deleted, full replay
    assert _state(lg, lg.leo) == want and not list(d.glob("*.snapshot"))
    lg.truncate_to(5)                                       # cuts producer 2's COMMIT and later
    lso, aborted, prods = _state(lg, lg.leo)
    assert aborted == [(1, 0, 2)] and prods[2][1] == 1 and lso == 1
    lg.close()


def test_control_batches_are_the_brokers_only(tmp_path):
    lg = PartitionLog(tmp_path / "t-0")
    with pytest.raises(ProducerStateError) as e:
        lg.append_as_leader(end_txn_marker(1, 0, True, 0, 0), 0)
    assert e.value.code == 87 and lg.leo == 0


def test_marker_bytes_are_kafkas_control_batch():
    raw = end_txn_marker(7, 3, False, 5, 1000)
    b = DefaultRecordBatch(raw)
    assert b.validate_crc() and b.is_control_batch and b.is_transactional
    assert (b.producer_id, b.producer_epoch, b.base_sequence) == (7, 3, -1)
    (rec,) = list(b)
    assert rec.key == b"\x00\x00\x00\x00" and rec.value == b"\x00\x00\x00\x00\x00\x05"    # ABORT, epoch 5
    (_pos, info), = iter_batches(raw, check_crc=True)
    assert (info.control_type, info.coordinator_epoch) == (0, 5)
    bad = bytearray(raw)
    bad[-9] = 7                                             # control type 7: not a marker
    with pytest.raises(CorruptBatch):
        list(iter_batches(bytes(bad), check_crc=False))


# --- conformance judges the traced decisions ----------------------------------------------------

def _ev(type_, **kw):
    return {"kind": "event", "ts_ms": 0, "node": 0, "type": type_, "topic": "t", "partition": 1, **kw}


def _produce(**kw):
    base = dict(producer_id=5, epoch=2, partition_epoch=2, ongoing_epoch=-1, verify_error=0, verified=True,
                verdict="append", error_code=0)
    return _ev("txn_produce", **{**base, **kw})


def _marker(**kw):
    base = dict(producer_id=5, epoch=2, coordinator_epoch=3, commit=True, partition_epoch=2, open_epoch=2,
                last_coordinator_epoch=3, verdict="append", error_code=0)
    return _ev("txn_marker", **{**base, **kw})


def test_conformance_judges_transactional_produce_verdicts():
    from checkers.conformance import check_events
    ok = [_produce(), _produce(verify_error=48, verified=False, verdict="unverified", error_code=48),
          _produce(epoch=1, verify_error=None, verified=False, verdict="fenced", error_code=47),
          _produce(ongoing_epoch=2, verify_error=None)]
    r = check_events(ok, "current")
    assert not r.divergences and r.mapped == 4
    # appending what the coordinator refused: the hanging transaction KIP-890 part 1 prevents
    bad = check_events([_produce(verify_error=48, verified=False)], "current")
    assert len(bad.divergences) == 1 and "unverified" in bad.divergences[0].allowed[0]
    # without the fix the same append conforms
    assert not check_events([_produce(verify_error=None, verified=False)], "current",
                            without=["txn-partition-verification"]).divergences
    # with the fix, a first append without asking the coordinator is reported
    skipped = check_events([_produce(verify_error=None, verified=False, verdict="unverified", error_code=48)],
                           "current")
    assert any("did not ask" in d.text for d in skipped.divergences)
    # a claimed verification the traced answer does not support
    assert check_events([_produce(verify_error=51, verified=True)], "current").divergences


def test_conformance_judges_marker_verdicts_per_generation():
    from checkers.conformance import check_events
    assert not check_events([_marker(), _marker(coordinator_epoch=2, verdict="coordinator-fenced",
                                                error_code=52)], "current").divergences
    # transaction version 2: a marker with the open transaction's own epoch is late
    late = check_events([_marker(transaction_version=2)], "kip-966")
    assert len(late.divergences) == 1 and "txn-epoch-bump on" in late.divergences[0].allowed[0]
    assert not check_events([_marker(verdict="fenced", error_code=47, transaction_version=2)], "kip-966").divergences
    # a version 1 marker (the coordinator did not bump) is judged by the old check on kip-966 too
    assert not check_events([_marker(transaction_version=1)], "kip-966").divergences
    # a verdict right but its error code wrong
    assert check_events([_marker(coordinator_epoch=2, verdict="coordinator-fenced", error_code=47)],
                        "current").divergences


def test_completed_transactions_leave_the_unstable_set_once_the_hw_passes_and_retention_drops_aborted(tmp_path):
    from impl.storage.log import LogConfig
    lg = PartitionLog(tmp_path / "t-0", LogConfig(segment_bytes=200))
    for pid in range(1, 4):
        lg.append_as_leader(txn_batch(pid, 0, 0, 2), 0)
        lg.append_marker(pid, 0, pid != 2, 0, 0)            # producer 2 aborts
    ps = lg.producers
    assert len(ps.unreplicated) == 3
    ps.on_high_watermark(6)                                  # past the first two markers (2, 5)
    assert [t[1] for t in ps.unreplicated] == [8]
    assert ps.aborted == [(2, 3, 5)]
    assert len(lg.segments) > 2
    lg.config.retention_bytes = 1
    lg.apply_retention(0, upper_bound=lg.leo)
    assert lg.log_start_offset > 5 and ps.aborted == []


def test_a_coordinators_transactional_write_without_sequence_opens_the_transaction(tmp_path):
    """Transactional offset commits on `__consumer_offsets` carry no sequence; they still open the
    producer's transaction there, so the LSO and the aborted index cover them."""
    lg = PartitionLog(tmp_path / "o-0")
    lg.append_as_leader(txn_batch(9, 1, -1, 1), 0)
    assert lg.producers.ongoing_first_offsets() == {9: 0}
    lg.append_marker(9, 1, False, 0, 0)
    assert lg.producers.aborted == [(9, 0, 1)] and lg.producers.ongoing_first_offsets() == {}


def test_a_produce_too_short_for_a_header_is_left_to_the_append():
    """check_produce never raises on garbage: the append answers CORRUPT_MESSAGE."""
    import asyncio
    from impl.txn_log import check_produce
    assert asyncio.run(check_produce(None, None, "tx", b"\x00" * 10)) == 0
