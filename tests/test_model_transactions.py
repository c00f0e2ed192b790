"""Transactions in the reference model (spec/transaction.py): each of KIP-890's two parts and
KAFKA-14053 removed where it shipped lets the explorer find its bug, with every fix on the space
is clean, a zombie instance never commits, and the coordinator's state survives its fail-over
because it lives in the replicated __transaction_state log."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from checkers.explore import explore
from checkers.golden import TXN_BOUNDS, TXN_LATE_PRODUCE_BOUNDS
from checkers.model_trace import replay
from checkers.simulate import simulate
from spec import Model, make_config, rules
from spec.codes import PREPARE_COMMIT
from spec.invariants import active, unpromised
from spec.transaction import COMMITTING, FENCED, READY, coordinator, txn_state

ROOT = Path(__file__).resolve().parents[1]
TXN_INVARIANTS = {"TxnAtomicVisibility", "TxnNoHangingTransaction", "TxnZombieFenced",
                  "TxnLsoMonotonic"}


def _explore(generation, without=(), invariants=None, **bounds):
    return explore(Model(make_config(generation, without, **bounds)), invariants=invariants,
                   time_limit=120)


def _walk(m, steps):
    """Follow (kind, client, arg) steps; arg None takes the first match; a TxnDeliver's arg is a
    predicate on the message."""
    s = m.initial()
    for kind, b, arg in steps:
        cands = [a for a in m.enabled(s) if a.kind == kind and (b is None or a.b == b)
                 and (arg is None or (arg(a.arg) if callable(arg) else a.arg == arg))]
        assert cands, (kind, b, [a.describe() for a in m.enabled(s)])
        s = m.step(s, cands[0])
        assert m.violation(s) is None, (kind, m.violation(s))
    return s


def test_transactions_switch_on_their_promises_only_with_transactions():
    plain = make_config("kip-966")
    assert not TXN_INVARIANTS & {i.name for i in active(plain)}
    assert not plain.fixes & {"txn-epoch-bump", "txn-timeout-bump", "txn-partition-verification"}
    cfg = make_config("kip-966", **TXN_BOUNDS)
    assert TXN_INVARIANTS <= {i.name for i in active(cfg)}
    ru = make_config("kip-966", **{**TXN_BOUNDS, "isolation": "read_uncommitted"})
    assert "TxnAtomicVisibility" in unpromised(ru)
    assert "TxnAtomicVisibility" not in {i.name for i in active(ru)}


@pytest.mark.parametrize("generation,without,bounds,expect", [
    ("kip-966", ("txn-epoch-bump",), TXN_BOUNDS, "TxnAtomicVisibility"),
    ("current", ("txn-timeout-bump",), TXN_LATE_PRODUCE_BOUNDS, "TxnAtomicVisibility"),
    ("current", ("txn-timeout-bump", "txn-partition-verification"), TXN_LATE_PRODUCE_BOUNDS,
     "TxnNoHangingTransaction"),
    ("kip-101", (), TXN_LATE_PRODUCE_BOUNDS, "TxnNoHangingTransaction"),
], ids=["late-marker", "late-produce-joins-next", "hanging", "kip-101"])
def test_each_fix_removed_where_it_shipped_is_found_by_search(generation, without, bounds, expect):
    r = _explore(generation, without, **bounds)
    assert r.status == "violation" and r.invariant == expect, (r.status, r.invariant, r.message)
    kinds = [a.kind for a in r.path]
    # the bug is a late request: a timed-out batch or a resent marker
    assert "TxnTimeout" in kinds or "TxnResendMarker" in kinds


@pytest.mark.parametrize("generation,bounds", [
    ("kip-966", TXN_BOUNDS),
    ("current", TXN_LATE_PRODUCE_BOUNDS),
    ("kip-966", {**TXN_BOUNDS, "zombies": 1}),
    ("kip-966", {**TXN_BOUNDS, "transactions": 2, "txn_rounds": 1, "txn_dups": 0}),
])
def test_with_its_fixes_the_transactional_space_is_clean(generation, bounds):
    r = _explore(generation, **bounds)
    assert r.status == "exhausted", (r.status, r.invariant, r.message)


def test_the_epoch_bump_alone_covers_a_late_batch():
    """Transaction version 2 writes the abort marker with a bumped epoch, which fences the late
    batch: in kip-966 neither older defence is needed against it (they are defence in depth)."""
    r = _explore("kip-966", ("txn-timeout-bump", "txn-partition-verification"), **TXN_BOUNDS)
    assert r.status == "exhausted", (r.invariant, r.message)


def test_verification_alone_stops_the_hanging_transaction_of_the_golden_trace():
    path = ROOT / "traces" / "corpus" / "model-txn-hanging.jsonl"
    r = replay(path)
    assert r.reproduced and r.recorded == "TxnNoHangingTransaction"
    from traces.trace import load
    fixes = frozenset(load(path).header["fixes"]) | {"txn-partition-verification"}
    fixed = replay(path, fixes=fixes)
    assert fixed.violation is None, fixed.violation


ZOMBIE = [("TxnInitProducerId", 0, None), ("TxnBegin", 0, None), ("TxnAddPartition", 0, 0),
          ("TxnProduce", 0, 0), ("TxnDeliver", None, None),
          ("TxnNewInstance", None, None), ("TxnInitProducerId", 1, None),
          ("TxnSendMarkers", 0, None), ("TxnDeliver", None, None),
          ("TxnCompleteTransaction", 0, None), ("TxnInitProducerId", 1, None)]


@pytest.mark.parametrize("generation", ["kip-101", "current", "kip-966"])
def test_a_zombie_is_fenced_and_never_commits(generation):
    """Instance x0 of t0 wrote its batch when x1 starts: x1's InitProducerId aborts x0's
    transaction with the epoch bumped (the batch is aborted) and x0's EndTxn COMMIT is fenced;
    the search with a zombie finds nothing for TxnZombieFenced in any generation."""
    m = Model(make_config(generation, **{**TXN_BOUNDS, "zombies": 1, "txn_dups": 0,
                                         "txn_timeouts": 0}))
    s = _walk(m, ZOMBIE)
    assert s.txn.clients[1].phase == READY and s.txn.clients[1].pe == 2
    assert rules.txn_fates(s.txn.logs[0]) == (2, -1)      # x0's batch, then the ABORT marker
    commit = next(a for a in m.enabled(s) if a.kind == "TxnCommit" and a.b == 0)
    s = m.step(s, commit)
    assert s.txn.clients[0].phase == FENCED and m.violation(s) is None
    r = _explore(generation, invariants=("TxnZombieFenced",),
                 **{**TXN_BOUNDS, "zombies": 1, "txn_dups": 0})
    if generation == "kip-101":
        # Before KIP-890 and KAFKA-14053: x0 aborts after a client timeout under epoch 0 (no
        # marker carries epoch 1 to d0), x1 starts with epoch 1, and x0's late batch is appended
        # into x1's transaction, which commits it: the late-batch bug, seen through a zombie.
        assert r.status == "violation" and r.invariant == "TxnZombieFenced", r.status
        assert "TxnTimeout" in [a.kind for a in r.path]
    else:
        assert r.status == "exhausted", (r.invariant, r.message)


def test_without_epoch_fencing_at_the_coordinator_a_zombie_commits(monkeypatch):
    """The zombie test has teeth: with the coordinator's epoch check weakened, the old instance
    commits after it was fenced."""
    monkeypatch.setattr(rules, "txn_request_fenced", lambda request_epoch, coordinator_epoch: False)
    r = _explore("kip-966", invariants=("TxnZombieFenced",),
                 **{**TXN_BOUNDS, "zombies": 1, "txn_dups": 0, "txn_timeouts": 0})
    assert r.status == "violation" and r.invariant == "TxnZombieFenced", r.status


def _replicate(m, s):
    """The follower fetches until it has the leader's log and high watermark (at most 10 steps;
    the model leaves a fetch that would change nothing out)."""
    for _ in range(10):
        a = next((a for a in m.enabled(s) if a.kind in ("FetchRequest", "FetchResponse")), None)
        if a is None:
            return s
        s = m.step(s, a)
        assert m.violation(s) is None
    raise AssertionError("replication did not settle")


def test_the_new_coordinator_finishes_a_prepared_commit_from_its_log():
    """__transaction_state on two brokers: the client is answered only once a record is
    replicated; PrepareCommit is replicated, the coordinator crashes, the follower is elected
    and, having loaded the record from its own log, sends the markers and completes."""
    m = Model(make_config("kip-966", **{**TXN_BOUNDS, "brokers": 2, "min_isr": 1, "crashes": 1,
                                        "elections": 1, "txn_timeouts": 0, "txn_dups": 0}))
    s = m.initial()
    for step in [("TxnInitProducerId", 0, None), ("TxnBegin", 0, None),
                 ("TxnAddPartition", 0, 0), ("TxnProduce", 0, 0), ("TxnDeliver", None, None),
                 ("TxnCommit", 0, None)]:
        s = _walk_from(m, s, [step])
        if s.txn.clients[0].req:
            assert "TxnAnswer" not in {a.kind for a in m.enabled(s)}     # not yet replicated
            s = _walk_from(m, _replicate(m, s), [("TxnAnswer", 0, None)])
    assert txn_state(s, 0, 0)[1] == PREPARE_COMMIT and txn_state(s, 1, 0)[1] == PREPARE_COMMIT
    s = _walk_from(m, s, [("Crash", 0, 0), ("ControllerReact", 1, 1), ("Deliver", 1, None)])
    assert coordinator(s) == 1
    s = _walk_from(m, s, [("TxnSendMarkers", 0, None), ("TxnDeliver", None, None),
                          ("TxnCompleteTransaction", 0, None)])
    assert rules.read_committed(s.txn.logs[0], "read_committed") == (0,)


def _walk_from(m, s, steps):
    for kind, b, arg in steps:
        cands = [a for a in m.enabled(s) if a.kind == kind and (b is None or a.b == b)
                 and (arg is None or a.arg == arg)]
        assert cands, (kind, b, [a.describe() for a in m.enabled(s)])
        s = m.step(s, cands[0])
        assert m.violation(s) is None, (kind, m.violation(s))
    return s


def test_coordinator_fail_over_random_walks_find_nothing():
    m = Model(make_config("kip-966", **{**TXN_BOUNDS, "brokers": 2, "min_isr": 1, "crashes": 1,
                                        "elections": 1}))
    r = simulate(m, 7, 20_000, walk_length=60, time_limit=60)
    assert r.status == "ok", (r.invariant, r.message)


def test_cli_explores_transactions_and_refuses_bad_settings():
    base = [sys.executable, "-m", "kafkaverify", "explore", "--generation", "kip-966",
            "--transactions", "1", "--txn-partitions", "1", "--zombies", "0"]
    ok = subprocess.run(base, capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert ok.returncode == 0 and "state space exhausted" in ok.stdout, ok.stdout + ok.stderr
    assert "transactions=1 txn_partitions=1 isolation=read_committed" in ok.stdout
    bug = subprocess.run(base + ["--without", "txn-epoch-bump"], capture_output=True, text=True,
                         cwd=ROOT, timeout=120)
    assert bug.returncode == 1 and "TxnAtomicVisibility" in bug.stdout, bug.stdout + bug.stderr
    assert "reproduce: kafkaverify explore --generation kip-966 --without txn-epoch-bump" in bug.stdout
    for extra, msg in ((["--transactions", "3"], "transactions must be between 0 and 2"),
                       (["--producers", "1"], "without --producers and --consumers")):
        bad = subprocess.run(base + extra, capture_output=True, text=True, cwd=ROOT, timeout=120)
        assert bad.returncode == 3 and msg in bad.stdout + bad.stderr, bad.stdout + bad.stderr


def test_consume_transform_produce_is_exactly_once_with_the_fixes():
    """Each transaction consumes one input record and commits its offset in the transaction
    (AddOffsetsToTxn, TxnOffsetCommit to the offsets partition): kip-966 is exactly once, also
    with a zombie instance."""
    cfg = make_config("kip-966", consume_transform_produce=True, **TXN_BOUNDS)
    assert "TxnExactlyOnce" in {i.name for i in active(cfg)}
    assert "TxnExactlyOnce" not in {i.name for i in active(make_config("kip-966", **TXN_BOUNDS))}
    r = _explore("kip-966", consume_transform_produce=True, **TXN_BOUNDS)
    assert r.status == "exhausted", (r.invariant, r.message)
    z = _explore("kip-966", invariants=("TxnZombieFenced", "TxnExactlyOnce"),
                 consume_transform_produce=True,
                 **{**TXN_BOUNDS, "zombies": 1, "txn_dups": 0, "txn_timeouts": 0})
    assert z.status == "exhausted", (z.invariant, z.message)


def test_without_the_timeout_bump_an_input_is_processed_twice():
    """KAFKA-14053's bug seen by consume-transform-produce: the aborted transaction's late batch
    joins the retry of the same input, which commits it: the input's output is committed twice."""
    r = _explore("current", ("txn-timeout-bump",), ("TxnExactlyOnce",),
                 consume_transform_produce=True, **TXN_LATE_PRODUCE_BOUNDS)
    assert r.status == "violation" and r.invariant == "TxnExactlyOnce", r.status
    assert "committed 2 times" in r.message, r.message


def test_transactional_invariants_hold_vacuously_without_transactions():
    from spec import INVARIANTS
    cfg = make_config("current")
    s = Model(cfg).initial()
    for inv in INVARIANTS:
        if inv.name.startswith("Txn"):
            assert inv.check(cfg, s) is None, inv.name


@pytest.mark.parametrize("generation", ["current", "kip-966"])
def test_the_timeout_bump_aborts_and_the_producer_goes_on(generation):
    """KAFKA-14053 with KIP-360: after a client-side timeout the producer sends InitProducerId
    with its epoch; the coordinator aborts the transaction with the epoch bumped and lets the
    retry through (lastProducerEpoch): the producer goes on, and the late batch is fenced."""
    m = Model(make_config(generation, **{**TXN_BOUNDS, "txn_dups": 0}))
    s = _walk(m, [("TxnInitProducerId", 0, None), ("TxnBegin", 0, None), ("TxnAddPartition", 0, 0),
                  ("TxnProduce", 0, 0), ("TxnTimeout", 0, 0), ("TxnInitProducerId", 0, None),
                  ("TxnSendMarkers", 0, None), ("TxnDeliver", None, lambda x: x[0] == 1),
                  ("TxnCompleteTransaction", 0, None), ("TxnInitProducerId", 0, None)])
    c = s.txn.clients[0]
    assert c.phase == READY and c.pe == 2, c
    s = _walk_from(m, s, [("TxnDeliver", None, None)])             # the late batch: fenced
    assert rules.txn_fates(s.txn.logs[0]) == (-1,), s.txn.logs


def test_broker_renaming_reaches_the_pending_coordinator_request():
    """The symmetry reduction renames the broker a pending coordinator request names, and
    renaming back gives the state again (its fingerprint)."""
    from checkers.fingerprint import fingerprint
    from spec.symmetry import permute
    m = Model(make_config("kip-966", **{**TXN_BOUNDS, "brokers": 2, "min_isr": 1}))
    s = _walk_from(m, m.initial(), [("TxnInitProducerId", 0, None)])
    assert s.txn.clients[0].req and s.txn.clients[0].req[1] == 0
    swap, masks = (1, 0), (0, 2, 1, 3)          # b0 <-> b1, and the broker masks with them
    renamed = permute(s, swap, masks, swap)
    assert renamed[17][0][0][8][1] == 1
    assert fingerprint(permute(renamed, swap, masks, swap)) == fingerprint(s)
    assert fingerprint(renamed) != fingerprint(s)


def _commit_then_fail_over(generation):
    """x0 sends EndTxn COMMIT; its PrepareCommit reaches the follower and the coordinator
    crashes before answering; the follower, elected, has the record below its high watermark."""
    m = Model(make_config(generation, **{**TXN_BOUNDS, "brokers": 2, "min_isr": 1, "crashes": 1,
                                         "elections": 1, "txn_timeouts": 0, "txn_dups": 0}))
    s = m.initial()
    for step in [("TxnInitProducerId", 0, None), ("TxnBegin", 0, None),
                 ("TxnAddPartition", 0, 0), ("TxnProduce", 0, 0), ("TxnDeliver", None, None)]:
        s = _walk_from(m, s, [step])
        if s.txn.clients[0].req:
            s = _walk_from(m, _replicate(m, s), [("TxnAnswer", 0, None)])
    epoch = s.txn.clients[0].pe
    s = _walk_from(m, s, [("TxnCommit", 0, None)])
    assert s.txn.clients[0].req                                   # PrepareCommit not yet replicated
    s = _walk_from(m, _replicate(m, s), [("Crash", 0, 0), ("ControllerReact", 1, 1),
                                          ("Deliver", 1, None)])
    assert coordinator(s) == 1 and txn_state(s, 1, 0)[1] == PREPARE_COMMIT and txn_state(s, 1, 0)[4]
    s = _walk_from(m, s, [("TxnAnswer", 0, None)])                # NOT_COORDINATOR
    assert s.txn.clients[0].phase == COMMITTING and not s.txn.clients[0].req
    return m, s, epoch


@pytest.mark.parametrize("generation", ["current", "kip-966"])
def test_end_txn_retried_after_a_coordinator_fail_over_succeeds(generation):
    """handleEndTransaction on a retry of the same decision: while the surviving PrepareCommit
    completes the answer is CONCURRENT_TRANSACTIONS (the client waits and asks again), once
    CompleteCommit it is success, and the producer goes on with the epoch the coordinator holds
    (bumped under transaction version 2); the opposite decision would be INVALID_TXN_STATE."""
    m, s, epoch = _commit_then_fail_over(generation)
    assert not [a for a in m.enabled(s) if a.kind in ("TxnCommit", "TxnAbort")]   # concurrent
    s = _walk_from(m, s, [("TxnSendMarkers", 0, None), ("TxnDeliver", None, None),
                          ("TxnCompleteTransaction", 0, None), ("TxnCommit", 0, None)])
    c = s.txn.clients[0]
    assert c.phase == READY and not c.req, c
    assert c.pe == txn_state(s, 1, 0)[0] == rules.txn_end_epoch(epoch, m.config.fixes)
    assert rules.read_committed(s.txn.logs[0], "read_committed") == (0,)
    assert s.txn.ghosts[0][2] == 1                                    # T0 committed
    s = _walk_from(m, s, [("TxnBegin", 0, None), ("TxnAddPartition", 0, 0)])
    assert s.txn.clients[0].phase != FENCED
