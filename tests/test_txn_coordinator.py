"""The transaction coordinator's decisions (impl/txn_coordinator.py) and records
(impl/txn_records.py), without sockets: each test pins what Kafka's TransactionCoordinator answers,
so it fails if a rule changes."""
from __future__ import annotations

import struct

import pytest

from impl import rules
from impl import txn_coordinator as tc
from impl import txn_records as tr
from impl.group_coordinator import Group, Member
from impl.protocol import errors as E
from spec import rules as S

CURRENT = rules.fixes_for("current")
K966 = rules.fixes_for("kip-966")
T0 = 1_000_000


def txn(state=tr.EMPTY, epoch=3, parts=(), start=-1, last_epoch=-1, timeout=60_000) -> tc.Txn:
    return tc.Txn("tx", 7, epoch, timeout, state, frozenset(parts), start, T0, last_epoch)


# --- records ------------------------------------------------------------------------------------

def test_record_round_trip_and_kafka_layout():
    r = tr.TxnRecord("tx", 7, 3, 60_000, tr.ONGOING, frozenset({("a", 0), ("a", 2), ("b", 1)}), T0, T0 - 5)
    k, v = tr.key("tx"), tr.value(r)
    assert k == b"\x00\x00\x00\x02tx"                          # key v0: int16 version, string
    assert v[:17] == struct.pack(">hqhib", 0, 7, 3, 60_000, 1)  # value v0 header, status int8
    assert tr.decode(k, v) == r
    assert tr.decode(k, None).deleted


def test_flexible_value_v1_is_read():
    # v1: compact arrays / strings, a tagged field after each partition entry and at the end
    v = struct.pack(">hqhib", 1, 9, 2, 30_000, 4) + bytes([2]) + bytes([2]) + b"t" + bytes([2]) + \
        struct.pack(">i", 5) + bytes([0]) + struct.pack(">qq", 11, 10) + bytes([0])
    r = tr.decode(tr.key("x"), v)
    assert (r.producer_id, r.producer_epoch, r.state, r.partitions) == (9, 2, tr.COMPLETE_COMMIT, frozenset({("t", 5)}))


@pytest.mark.parametrize("bad", [b"\x00\x05", struct.pack(">hqhib", 0, 1, 1, 1, 9) + b"\x00" * 20,
                                 struct.pack(">hq", 0, 1)])
def test_bad_values_are_record_errors(bad):
    with pytest.raises(tr.RecordError):
        tr.decode(tr.key("x"), bad)


def test_partition_for_is_kafkas_hash():
    # "tx".hashCode() == 116 * 31 + 120 == 3716 (Java); abs % n
    assert tc.partition_for("tx", 50) == 3716 % 50
    assert all(0 <= tc.partition_for(f"id-{i}", 7) < 7 for i in range(100))


# --- InitProducerId -----------------------------------------------------------------------------

def test_init_new_id_takes_a_producer_id_at_epoch_0():
    d = tc.init_producer_id(None, "tx", 60_000, 900_000, -1, -1, False, 42, T0, 4)
    assert d.error == 0 and (d.write.producer_id, d.write.epoch, d.write.state) == (42, 0, tr.EMPTY)


def test_init_bumps_the_epoch_fencing_the_old_instance():
    d = tc.init_producer_id(txn(tr.COMPLETE_COMMIT), "tx", 60_000, 900_000, -1, -1, False, None, T0, 4)
    assert d.error == 0 and (d.write.producer_id, d.write.epoch, d.write.state) == (7, 4, tr.EMPTY)
    assert ("txn_init_action", {"state": tr.COMPLETE_COMMIT}, "bump") in d.trace


def test_init_over_an_open_transaction_aborts_it_with_a_bump_first():
    d = tc.init_producer_id(txn(tr.ONGOING, parts=[("t", 0)], start=T0), "tx", 60_000, 900_000, -1, -1, False,
                            None, T0, 4)
    assert d.error == E.CONCURRENT_TRANSACTIONS
    assert (d.write.state, d.write.epoch, d.write.partitions) == (tr.PREPARE_ABORT, 4, frozenset({("t", 0)}))


@pytest.mark.parametrize("state", [tr.PREPARE_COMMIT, tr.PREPARE_ABORT])
def test_init_waits_while_a_transaction_completes(state):
    d = tc.init_producer_id(txn(state), "tx", 60_000, 900_000, -1, -1, False, None, T0, 4)
    assert d.error == E.CONCURRENT_TRANSACTIONS and d.write is None


def test_init_pending_write_and_bad_timeout():
    assert tc.init_producer_id(txn(), "tx", 60_000, 900_000, -1, -1, True, None, T0, 4).error == E.CONCURRENT_TRANSACTIONS
    assert tc.init_producer_id(txn(), "tx", 0, 900_000, -1, -1, False, None, T0, 4).error == E.INVALID_TRANSACTION_TIMEOUT
    assert tc.init_producer_id(None, "tx", 900_001, 900_000, -1, -1, False, 1, T0, 4).error == E.INVALID_TRANSACTION_TIMEOUT


def test_kip360_reinit_with_an_old_epoch_is_fenced_by_version():
    t = txn(tr.COMPLETE_COMMIT, epoch=5)
    assert tc.init_producer_id(t, "tx", 60_000, 900_000, 7, 4, False, None, T0, 4).error == E.PRODUCER_FENCED
    assert tc.init_producer_id(t, "tx", 60_000, 900_000, 7, 4, False, None, T0, 3).error == E.INVALID_PRODUCER_EPOCH
    assert tc.init_producer_id(t, "tx", 60_000, 900_000, 8, 5, False, None, T0, 4).error == E.INVALID_PRODUCER_ID_MAPPING
    ok = tc.init_producer_id(t, "tx", 60_000, 900_000, 7, 5, False, None, T0, 4)
    assert ok.error == 0 and ok.write.epoch == 6


def test_kip360_reinit_after_the_coordinators_own_abort_passes_with_the_epoch_before():
    t = txn(tr.COMPLETE_ABORT, epoch=5, last_epoch=4)          # aborted by timeout with a bump
    d = tc.init_producer_id(t, "tx", 60_000, 900_000, 7, 4, False, None, T0, 4)
    assert d.error == 0 and d.write.epoch == 6


def test_exhausted_epoch_takes_a_new_producer_id():
    t = txn(tr.COMPLETE_COMMIT, epoch=tc.MAX_EPOCH - 1)
    assert tc.needs_new_producer_id(t)
    d = tc.init_producer_id(t, "tx", 60_000, 900_000, -1, -1, False, 99, T0, 4)
    assert (d.write.producer_id, d.write.epoch) == (99, 0)


# --- AddPartitionsToTxn / verification ----------------------------------------------------------

def test_add_partitions_starts_and_extends_a_transaction():
    d = tc.add_partitions(txn(tr.COMPLETE_COMMIT, parts=[("old", 0)]), 7, 3, frozenset({("t", 0)}), False, T0, 3)
    assert (d.write.state, d.write.partitions, d.write.start_ms) == (tr.ONGOING, frozenset({("t", 0)}), T0)
    t = d.write
    d2 = tc.add_partitions(t, 7, 3, frozenset({("t", 1)}), False, T0 + 5, 3)
    assert d2.write.partitions == {("t", 0), ("t", 1)} and d2.write.start_ms == T0
    assert tc.add_partitions(d2.write, 7, 3, frozenset({("t", 1)}), False, T0, 3).write is None   # nothing new


def test_add_partitions_errors():
    t = txn(tr.ONGOING, parts=[("t", 0)], start=T0)
    p = frozenset({("t", 1)})
    assert tc.add_partitions(t, 7, 2, p, False, T0, 3).error == E.PRODUCER_FENCED
    assert tc.add_partitions(t, 7, 2, p, False, T0, 1).error == E.INVALID_PRODUCER_EPOCH
    assert tc.add_partitions(t, 8, 3, p, False, T0, 3).error == E.INVALID_PRODUCER_ID_MAPPING
    assert tc.add_partitions(None, 7, 3, p, False, T0, 3).error == E.INVALID_PRODUCER_ID_MAPPING
    assert tc.add_partitions(t, 7, 3, p, True, T0, 3).error == E.CONCURRENT_TRANSACTIONS
    assert tc.add_partitions(txn(tr.PREPARE_COMMIT), 7, 3, p, False, T0, 3).error == E.CONCURRENT_TRANSACTIONS


def test_verify_only_answers_per_partition():
    t = txn(tr.ONGOING, parts=[("t", 0)], start=T0)
    errs, trace = tc.verify_partitions(t, 7, 3, [("t", 0), ("t", 1)], None)
    assert errs == {("t", 0): E.NONE, ("t", 1): E.INVALID_TXN_STATE} and len(trace) == 2
    errs, _ = tc.verify_partitions(txn(tr.COMPLETE_ABORT, parts=[]), 7, 3, [("t", 0)], None)
    assert errs == {("t", 0): E.INVALID_TXN_STATE}            # a late Produce after the abort
    assert tc.verify_partitions(t, 7, 2, [("t", 0)], None)[0] == {("t", 0): E.PRODUCER_FENCED}
    # another partition being added meanwhile: the committed state answers; an abort in flight waits
    assert tc.verify_partitions(t, 7, 3, [("t", 0)], tr.ONGOING)[0] == {("t", 0): E.NONE}
    assert tc.verify_partitions(t, 7, 3, [("t", 0)], tr.PREPARE_ABORT)[0] == {("t", 0): E.CONCURRENT_TRANSACTIONS}


# --- EndTxn -------------------------------------------------------------------------------------

@pytest.mark.parametrize("commit", [True, False])
def test_end_txn_prepares_an_ongoing_transaction(commit):
    t = txn(tr.ONGOING, parts=[("t", 0)], start=T0)
    d = tc.end_txn(t, 7, 3, commit, False, T0, CURRENT, 3)
    assert d.error == 0 and d.write.state == (tr.PREPARE_COMMIT if commit else tr.PREPARE_ABORT)
    assert d.write.epoch == 3 and d.write.partitions == t.partitions
    done = tc.complete(d.write, T0 + 1)
    assert done.state == (tr.COMPLETE_COMMIT if commit else tr.COMPLETE_ABORT) and not done.partitions


def test_end_txn_answers_as_kafka_transaction_version_1():
    assert tc.end_txn(txn(tr.PREPARE_COMMIT), 7, 3, True, False, T0, CURRENT, 3).error == E.CONCURRENT_TRANSACTIONS
    assert tc.end_txn(txn(tr.PREPARE_COMMIT), 7, 3, False, False, T0, CURRENT, 3).error == E.INVALID_TXN_STATE
    assert tc.end_txn(txn(tr.COMPLETE_COMMIT), 7, 3, True, False, T0, CURRENT, 3) == tc.Decision(
        0, None, (("txn_end_answer", {"request_epoch": 3, "epoch": 3, "state": 4, "commit": True, "retry": False,
                                      "fixes": sorted(CURRENT)}, "done"),))
    assert tc.end_txn(txn(tr.EMPTY), 7, 3, True, False, T0, CURRENT, 3).error == E.INVALID_TXN_STATE
    assert tc.end_txn(txn(tr.ONGOING), 7, 2, True, False, T0, CURRENT, 3).error == E.PRODUCER_FENCED
    assert tc.end_txn(txn(tr.ONGOING), 7, 2, True, False, T0, CURRENT, 1).error == E.INVALID_PRODUCER_EPOCH
    assert tc.end_txn(txn(tr.ONGOING), 8, 3, True, False, T0, CURRENT, 3).error == E.INVALID_PRODUCER_ID_MAPPING


def test_end_txn_stays_transaction_version_1_on_kip966():
    # no EndTxn 5 is advertised: no epoch bump at the end even where the generation has it
    d = tc.end_txn(txn(tr.ONGOING, parts=[("t", 0)]), 7, 3, True, False, T0, K966, 3)
    assert d.write.epoch == 3 and "txn-epoch-bump" not in dict((r, i) for r, i, _ in d.trace)["txn_end_answer"]["fixes"]


# --- timeouts and the group's transactional commit ------------------------------------------------

def test_timeout_aborts_with_a_bump():
    t = txn(tr.ONGOING, parts=[("t", 0)], start=T0, timeout=1000)
    assert not tc.timed_out(t, T0 + 1000) and tc.timed_out(t, T0 + 1001)
    assert not tc.timed_out(txn(tr.PREPARE_COMMIT, start=T0, timeout=1), T0 + 10)
    a = tc.abort_with_bump(t, T0 + 2000)
    assert (a.state, a.epoch, a.last_epoch) == (tr.PREPARE_ABORT, 4, 3)


def test_txn_offset_commit_fences_other_generations():
    g = Group("g")
    g.generation = 4
    g.members["m1"] = Member("m1", "c", "", 1000, 1000, "consumer", [])
    assert tc.validate_txn_offset_commit(g, "m1", 4) == E.NONE
    assert tc.validate_txn_offset_commit(g, "m1", 3) == E.ILLEGAL_GENERATION
    assert tc.validate_txn_offset_commit(g, "zz", 4) == E.UNKNOWN_MEMBER_ID
    assert tc.validate_txn_offset_commit(g, "", -1) == E.NONE               # an old client: no member
    assert tc.validate_txn_offset_commit(None, "", -1) == E.NONE


# --- impl's copy of the rules agrees with the model's -----------------------------------------------

def test_rules_agree_with_the_model():
    for fixes in (CURRENT, K966, frozenset()):
        for req in range(0, 4):
            for ep in range(0, 4):
                assert rules.txn_request_fenced(req, ep) == S.txn_request_fenced(req, ep)
                for own in (False, True):
                    assert rules.txn_bump_fenced(req, ep, own) == S.txn_bump_fenced(req, ep, own)
                for st in range(6):
                    for commit in (False, True):
                        for retry in (False, True):
                            assert rules.txn_end_answer(req, ep, st, commit, retry, fixes) == \
                                S.txn_end_answer(req, ep, st, commit, retry, fixes)
                    for holds in (False, True):
                        want = S.txn_produce_verdict(-1, req, (ep, st, int(holds)), 0,
                                                     frozenset({"txn-partition-verification"})) == "append"
                        assert rules.txn_partition_verified(ep, st, holds, req) == want
        for st in range(6):
            assert rules.txn_init_action(st) == S.txn_init_action(st)
        assert rules.txn_end_epoch(3, fixes) == S.txn_end_epoch(3, fixes)


# --- conformance: the traced decisions against the model ------------------------------------------

def _rule_events(decisions) -> list[dict]:
    return [{"kind": "event", "ts_ms": i, "node": 0, "type": "txn_rule", "rule": r, "transactional_id": "tx",
             "inputs": inputs, "output": out}
            for i, d in enumerate(decisions) for r, inputs, out in d.trace]


def test_conformance_accepts_the_coordinators_traced_decisions():
    from checkers.conformance import check_events
    ds = [tc.init_producer_id(txn(tr.ONGOING, start=T0), "tx", 60_000, 900_000, 7, 3, False, None, T0, 4),
          tc.end_txn(txn(tr.ONGOING), 7, 3, True, False, T0, CURRENT, 3),
          tc.end_txn(txn(tr.PREPARE_ABORT), 7, 3, True, False, T0, CURRENT, 3),
          tc.add_partitions(txn(tr.ONGOING), 7, 1, frozenset({("t", 0)}), False, T0, 3),
          tc.Decision(trace=tc.verify_partitions(txn(tr.ONGOING, parts=[("t", 0)]), 7, 3, [("t", 0), ("t", 1)],
                                                 None)[1])]
    evs = _rule_events(ds)
    assert len(evs) >= 7
    res = check_events(evs, "current")
    assert res.divergences == [] and res.mapped == len(evs)


def test_conformance_reports_a_coordinator_deciding_against_the_model():
    from checkers.conformance import check_events
    evs = _rule_events([tc.end_txn(txn(tr.ONGOING), 7, 2, True, False, T0, CURRENT, 3)])
    assert evs[0]["output"] == "fenced"
    evs[0]["output"] = "prepare"                   # a coordinator letting a zombie's EndTxn through
    res = check_events(evs, "current")
    assert len(res.divergences) == 1 and "'fenced' (spec.rules.txn_end_answer)" in res.divergences[0].allowed
    bad = dict(evs[0], rule="txn_init_action", inputs={"state": 1}, output="bump")
    assert check_events([bad], "current").divergences[0].allowed == ["'abort' (spec.rules.txn_init_action)"]
