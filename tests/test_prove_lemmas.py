"""The strengthening lemmas of the inductive proofs (checkers/prove/strengthen.py): each holds on
states the explicit model reaches (a lemma false there is a bug in the lemma, whatever z3 says),
the symmetry reduction of the induction step covers every action instance, and LogMatching and
StrongIsr are proved by induction for `current` at 2 replicas (StrongIsr's strengthening contains
LogMatching, so one proof proves both; 3, 5 and 7 replicas: python -m benchmarks.prove)."""
from __future__ import annotations

from collections import Counter
from itertools import permutations

import pytest

from checkers.prove.differential import bfs_states, draw_states
from checkers.prove.encoding import Encoding
from checkers.prove.induction import named_brokers, prove, representatives
from checkers.prove import strengthen_epochs as epochs
from checkers.prove.strengthen import NEEDS, STRENGTHENING
from checkers.prove.strengthen_epochs import EPOCH_STRENGTHENING, REPLICATED_STRENGTHENING
from checkers.prove.strengthen_producers import PRODUCER_STRENGTHENING, applies
from spec import Model, make_config
from spec.state import LEADER

CONFIGS = [({}, 1), ({"brokers": 3, "records": 3}, 2)]
# KIP-966's ELR (EligibleShape, and the ELR clauses of HwExposed and LeaderStays): ELR and last
# known ELR states are drawn at min ISR 2, 1 (where only an empty ISR makes an ELR) and 3; a last
# known ELR stays only when no election is left to consume it (elections 1)
_KIP966_3 = {"brokers": 3, "records": 2, "crashes": 3, "elections": 3}
KIP966 = [({}, 3), (_KIP966_3, 4), ({**_KIP966_3, "min_isr": 1}, 5),
          ({**_KIP966_3, "records": 1, "elections": 1, "min_isr": 3, "losses": 0}, 6),
          ({"records": 1, "crashes": 2, "elections": 1, "losses": 0}, 7)]


def _states(cfg, seed, per=400):
    m = Model(cfg)
    return bfs_states(m, per) + draw_states(m, seed, per, walk_length=80)


def test_every_lemma_holds_on_reachable_states():
    for bounds, seed in CONFIGS:
        cfg = make_config("current", **bounds)
        enc = Encoding(cfg)
        for s in _states(cfg, seed):
            d = enc.from_state(s)
            for name, lemma in STRENGTHENING.items():
                assert lemma(enc, d), (bounds, name, s)
    used = {x for v in NEEDS.values() for x in v}
    assert used <= set(STRENGTHENING)


def _lemmas_hold(gen, configs, names, tally) -> Counter:
    """Every lemma named on the states drawn for each config; what `tally` finds in them."""
    seen = Counter()
    for bounds, seed in configs:
        cfg = make_config(gen, **bounds)
        enc = Encoding(cfg)
        for s in _states(cfg, seed, per=600):
            seen.update(tally(s))
            d = enc.from_state(s)
            for name in names:
                assert STRENGTHENING[name](enc, d), (gen, bounds, name, s)
    return seen


def test_every_lemma_holds_on_reachable_kip966_states():
    seen = _lemmas_hold("kip-966", KIP966, NEEDS["StrongIsr"],
                        lambda s: {"elr": bool(s.zk.elr), "lkelr": bool(s.zk.lkelr)})
    assert seen["elr"] > 300 and seen["lkelr"] > 10, seen


# the producer strengthening's bounds (strengthen_producers.applies): one idempotent producer on a
# quiet broker, K records and K in flight, retries 2, one or two dropped connections
PRODUCER_BOUNDS = [{"records": k, "max_in_flight": k, "losses": 1} for k in range(1, 6)] + [
    {"records": 3, "max_in_flight": 3, "losses": 2}, {"records": 4, "max_in_flight": 2, "losses": 2}]
QUIET = {"brokers": 1, "producers": 1, "retries": 2, "crashes": 0, "elections": 0, "min_isr": 1}


def test_every_producer_lemma_holds_on_reachable_states():
    """Every state the explorer reaches at those bounds (no sampling), in the encoding with the
    slots the proof uses (one write per record) and with the default slots."""
    seen = 0
    for bounds in PRODUCER_BOUNDS:
        cfg = make_config("current", **QUIET, **bounds)
        assert applies(cfg) is None, bounds
        encs = (Encoding(cfg), Encoding(cfg, writes=cfg.records))
        for s in bfs_states(Model(cfg), 100_000):
            for enc in encs:
                d = enc.from_state(s)
                for name, lemma in PRODUCER_STRENGTHENING.items():
                    assert lemma(enc, d), (bounds, name, s)
            seen += 1
    assert seen > 3000
    assert set(PRODUCER_STRENGTHENING) <= set(STRENGTHENING)
    assert set(NEEDS["ProducerExactlyOnce"]) == set(PRODUCER_STRENGTHENING)


def test_quiet_leader_holds_past_five_records():
    """QuietLeader asks only for a quiet broker: it holds on every state the explorer reaches
    with 6 records and 6 in flight too (the guided search keeps it to the end of a path)."""
    cfg = make_config("current", **QUIET, records=6, max_in_flight=6)
    enc = Encoding(cfg, writes=7)
    states = [s for s in bfs_states(Model(cfg), 100_000) if s.produced <= 7]
    assert len(states) > 3000
    for s in states:
        assert PRODUCER_STRENGTHENING["QuietLeader"](enc, enc.from_state(s)), s


def test_producer_lemmas_say_where_they_do_not_apply():
    """Outside its bounds the strengthening asserts nothing, and says why: six records outgrow
    the broker's five retained batches (where the duplicate is), a second broker, a crash, more
    drops than retries."""
    for extra, why, quiet in (({"records": 6, "max_in_flight": 6}, "retained", True),
                              ({"brokers": 2}, "one broker", False), ({"crashes": 1}, "crashes", False),
                              ({"losses": 3}, "retries", True)):
        cfg = make_config("current", **{**QUIET, "records": 2, "max_in_flight": 2, **extra})
        assert why in applies(cfg)
        enc = Encoding(cfg)
        d = enc.from_state(Model(cfg).initial())
        d[("p", 0, "nxt")] = d[("g", "produced")] = 99        # far from any reachable state
        for name, lemma in PRODUCER_STRENGTHENING.items():
            # QuietLeader asks only for a quiet broker (and then sees the bad write count)
            assert lemma(enc, d) is (False if quiet and name == "QuietLeader" else True), (extra, name)


def test_a_producer_lemma_can_fail():
    """A state where the connection answers a record not yet written breaks the lemmas."""
    cfg = make_config("current", **QUIET, records=2, max_in_flight=2)
    enc = Encoding(cfg)
    hit = next(s for s in bfs_states(Model(cfg), 100_000) if s.prods[0].resps)
    d = enc.from_state(hit)
    d[("p", 0, "ro", 0)] = d[("p", 0, "ro", 0)] + 1
    assert not PRODUCER_STRENGTHENING["ProducerConnection"](enc, d)


def test_a_lemma_can_fail():
    """The check above can fail: a follower whose log disagrees with its leader's at the same
    offset and epoch breaks LogPrefix/SameEpochAgree-style lemmas."""
    cfg = make_config("current", records=2)
    enc = Encoding(cfg)
    hit = next(s for s in _states(cfg, 1) if s.brokers[0].leo >= 2 and s.brokers[1].leo >= 2)
    d = enc.from_state(hit)
    d[("b", 1, "lr", 0)], d[("b", 1, "lr", 1)] = d[("b", 1, "lr", 1)], d[("b", 1, "lr", 0)]
    assert not all(STRENGTHENING[n](enc, d) for n in ("EntryUnique", "LogPrefix", "SameEpochAgree"))


def test_symmetry_representatives_cover_every_instance():
    enc = Encoding(make_config("current", brokers=3))
    reps = {(i.kind, named_brokers(i), i.arg if i.kind not in ("Deliver", "Lose") else None)
            for i in representatives(enc)}
    for inst in enc.insts:
        names = named_brokers(inst)
        orbit = set()
        for p in permutations(range(enc.n)):
            arg = inst.arg
            if inst.kind in ("ControllerReact", "ControllerAlterIsr", "ProposeShrink") and arg >= 0:
                arg = p[arg]
            if inst.kind in ("Deliver", "Lose"):
                arg = None
            orbit.add((inst.kind, tuple(p[x] for x in names), arg))
        assert orbit & reps, inst


def test_strong_isr_and_log_matching_proved_for_current():
    cfg = make_config("current", brokers=2, records=2)
    assert "LogMatching" in NEEDS["StrongIsr"]
    r = prove(Model(cfg), "StrongIsr", time_limit=240)
    assert r.verdict == "proved", (r.failing, r.cti)


# paused brokers, expired sessions, deposed controllers (whose requests carry an older
# controller epoch) and deposed leaders (running as leader of an older epoch than the store's,
# or about to take up a LeaderAndIsr of one): the lemmas of the LogMatching,
# ReplicationQuorumSuperset and StrongIsr proofs hold there (Zombie: what a deposed leader may do)
PAUSES = [({"pauses": 1}, 8), ({"brokers": 3, "pauses": 1}, 9), ({"pauses": 2, "crashes": 1}, 10),
          ({"pauses": 1, "crashes": 0, "records": 1, "losses": 0}, 11),
          ({"brokers": 3, "pauses": 2, "crashes": 0, "records": 1}, 11)]
_PAUSE_LEMMAS = sorted(set(NEEDS["StrongIsr"]) | set(NEEDS["ReplicationQuorumSuperset"]))


def _pause_features(s) -> dict:
    return {"paused": any(b.paused for b in s.brokers),
            "deposed controller's request": any(m[1] < s.zk.ce for m in s.msgs),
            "deposed leader": any(b.alive and b.role == LEADER and b.le < s.zk.le for b in s.brokers),
            "deposed leader with a follower": any(
                b.alive and b.role == LEADER and b.le < s.zk.le
                and any(f.alive and f.le == b.le and f.leader == i for k, f in enumerate(s.brokers) if k != i)
                for i, b in enumerate(s.brokers))}


def test_lemmas_hold_with_pauses():
    seen = _lemmas_hold("current", PAUSES, _PAUSE_LEMMAS, _pause_features)
    assert (seen["paused"] > 1500 and seen["deposed controller's request"] > 100
            and seen["deposed leader"] > 600 and seen["deposed leader with a follower"] > 250), seen


@pytest.mark.parametrize("brokers,pauses", [(2, 1), (3, 1), (2, 2)])
def test_log_matching_and_quorum_proved_with_pauses(brokers, pauses):
    """With pauses (zombie controllers, expired sessions) and controller-epoch fencing: the
    lemmas about requests speak of the store's controller epoch only (Fencing)."""
    cfg = make_config("current", brokers=brokers, records=2, pauses=pauses)
    for name in ("LogMatching", "ReplicationQuorumSuperset"):
        r = prove(Model(cfg), name, time_limit=240)
        assert r.verdict == "proved", (name, r.failing, r.cti)


def test_strong_isr_proved_with_pauses():
    """A paused leader is deposed while it runs and may go on acting as leader of its old epoch
    (followers that have not heard of the new one still fetch from it, its HW still moves):
    Zombie bounds what it may expose by the members of its view that left its epoch, and
    StrongIsr is proved (3 replicas: python -m benchmarks.prove induction --pauses 1)."""
    cfg = make_config("current", brokers=2, records=2, pauses=1)
    r = prove(Model(cfg), "StrongIsr", time_limit=240)
    assert r.verdict == "proved", (r.failing, r.cti)
    # without Zombie the deposed leader's exposures are unaccounted for: a CTI
    r = prove(Model(cfg), "StrongIsr", time_limit=240,
              strengthening=tuple(x for x in NEEDS["StrongIsr"] if x != "Zombie"))
    assert r.verdict == "unknown" and r.cti is not None, r.verdict


def test_without_controller_fencing_pauses_are_not_proved():
    """A deposed controller's requests are acted on without the fix: the request lemmas no
    longer leave them out, and the proof stops at a counterexample to induction."""
    cfg = make_config("current", ("controller-epoch-fencing",), brokers=2, records=2, pauses=1)
    r = prove(Model(cfg), "ReplicationQuorumSuperset", time_limit=240)
    assert r.verdict == "unknown" and r.cti is not None, r.verdict


@pytest.mark.parametrize("brokers,min_isr", [(2, 2), (3, 2), (3, 1)])
def test_strong_isr_proved_for_kip966(brokers, min_isr):
    """With KIP-966's eligible leader replicas the controller may elect a replica outside the
    ISR; EligibleShape is what makes StrongIsr inductive there."""
    cfg = make_config("kip-966", brokers=brokers, records=2, min_isr=min_isr)
    r = prove(Model(cfg), "StrongIsr", time_limit=240)
    assert r.verdict == "proved", (r.failing, r.cti)


def test_kip966_without_the_min_isr_hw_rule_is_not_proved():
    """KAFKA-15583: without the min-ISR rule for the high watermark a leader alone advances it
    past what the ELR holds, and the strengthening says so with a counterexample to induction."""
    cfg = make_config("kip-966", ("min-isr-hw",), brokers=2, records=2)
    r = prove(Model(cfg), "StrongIsr", time_limit=240)
    assert r.verdict == "unknown" and r.cti is not None, r.verdict


# the epoch strengthening's bounds (strengthen_epochs.applies): one idempotent producer on one
# broker that may crash and be elected again (no unflushed loss), and more dropped connections
# than retries (a batch fails, the epoch is bumped, the rest renumbered from 0)
FAILOVER = {"brokers": 1, "producers": 1, "retries": 2, "crashes": 1, "elections": 1, "losses": 0,
            "min_isr": 1}
EPOCH_BOUNDS = ([{**FAILOVER, "records": k, "max_in_flight": k} for k in (1, 2, 3)]
                + [{**QUIET, "records": k, "max_in_flight": k, "retries": r, "losses": r + 1}
                   for k in (2, 3) for r in (0, 1)]
                + [{**FAILOVER, "records": 2, "max_in_flight": 2, "retries": 1, "losses": 2}])


def test_every_epoch_lemma_holds_on_reachable_states():
    """Every state the explorer reaches at those bounds (no sampling), in the encoding with the
    slots the proof uses (one write per record), reaching epoch bumps and a new leader epoch."""
    seen = bumped = failed_over = 0
    for bounds in EPOCH_BOUNDS:
        cfg = make_config("current", **bounds)
        assert epochs.applies(cfg) is None and applies(cfg) is not None, bounds
        enc = Encoding(cfg, writes=cfg.records)
        for s in bfs_states(Model(cfg), 100_000):
            d = enc.from_state(s)
            for name, lemma in EPOCH_STRENGTHENING.items():
                assert lemma(enc, d), (bounds, name, s)
            seen += 1
            bumped += s.prods[0].pe > 0
            failed_over += s.zk.le > 0 and bool(s.prods[0].batches)
    assert seen > 10_000 and bumped > 1000 and failed_over > 1000, (seen, bumped, failed_over)
    assert set(EPOCH_STRENGTHENING) <= set(STRENGTHENING)


def test_epoch_lemmas_say_where_they_do_not_apply():
    """Outside its bounds the epoch strengthening asserts nothing and says why (a crash losing
    unflushed writes, a second broker, six records, no idempotence), and the proof of the
    producer invariants is then unknown, never proved."""
    for without, extra, why in (((), {"unflushed_loss": True}, "unflushed"),
                                ((), {"brokers": 2}, "one broker"),
                                ((), {"records": 6, "max_in_flight": 6}, "retained"),
                                (("idempotent-producer",), {}, "idempotent")):
        cfg = make_config("current", without, **{**FAILOVER, "records": 2, "max_in_flight": 2,
                                                 **extra})
        assert why in epochs.applies(cfg), (extra, epochs.applies(cfg))
        enc = Encoding(cfg)
        d = enc.from_state(Model(cfg).initial())
        d[("p", 0, "nxt")] = d[("g", "produced")] = 99        # far from any reachable state
        for name, lemma in EPOCH_STRENGTHENING.items():
            assert lemma(enc, d) is True, (extra, name)
        if not without and cfg.brokers == 1:
            r = prove(Model(cfg), "ProducerExactlyOnce", time_limit=30)
            assert r.verdict == "unknown" and why in r.failing, (extra, r.verdict, r.failing)
    # two brokers: the replicated set applies (without unflushed loss), with it nowhere else
    cfg = make_config("current", **{**FAILOVER, "brokers": 2, "records": 2, "max_in_flight": 2})
    assert epochs.applies_replicated(cfg) is None
    for extra, why in (({"unflushed_loss": True}, "unflushed"), ({"brokers": 1}, "two or more"),
                       ({"records": 6, "max_in_flight": 6}, "retained")):
        cfg = make_config("current", **{**FAILOVER, "brokers": 2, "records": 2, "max_in_flight": 2,
                                        **extra})
        assert why in epochs.applies_replicated(cfg), (extra, epochs.applies_replicated(cfg))
        enc = Encoding(cfg)
        d = enc.from_state(Model(cfg).initial())
        d[("p", 0, "nxt")] = d[("g", "produced")] = 99
        for name, lemma in REPLICATED_STRENGTHENING.items():
            assert lemma(enc, d) is True, (extra, name)
    cfg = make_config("current", **{**FAILOVER, "brokers": 2, "records": 1, "max_in_flight": 1,
                                    "unflushed_loss": True})
    r = prove(Model(cfg), "ProducerExactlyOnce", time_limit=30)
    assert r.verdict == "unknown" and "unflushed" in r.failing, (r.verdict, r.failing)


def _replicated_check(states, enc):
    for s in states:
        d = enc.from_state(s)
        for name, lemma in REPLICATED_STRENGTHENING.items():
            assert lemma(enc, d), (name, s)


def test_every_replicated_lemma_holds_on_reachable_states():
    """The replicated set on two brokers across a crash and an election (a retry rewritten on
    the new leader, the old leader truncated): 250 states the explorer reaches with one record
    in flight (a breadth-first prefix and random walks), in the encoding with the slots the
    proof uses (write_slots, log_slots: every log fits one slot per record); every third
    reachable state: the slow test below."""
    cfg = make_config("current", **{**FAILOVER, "brokers": 2, "records": 1, "max_in_flight": 1})
    enc = Encoding(cfg, writes=epochs.write_slots(cfg), logs=epochs.log_slots(cfg), shadows=True)
    m = Model(cfg)
    states = bfs_states(m, 50) + draw_states(m, 7, 200, walk_length=60)
    assert any(s.produced > 1 for s in states) and any(s.zk.le > 0 for s in states)
    _replicated_check(states, enc)
    assert set(REPLICATED_STRENGTHENING) <= set(STRENGTHENING)


def test_write_slots_count_the_epochs_led_not_the_largest_epoch():
    """Two brokers across a crash and an election: some control shape leads epoch 2 but not
    epoch 1 (an epoch nobody took up), none leads three epochs, so WriteCount's bound is 2 writes
    per record, not 3; and the explorer does write a record twice (a retry on the new leader),
    so one per record would not do."""
    cfg = make_config("current", **{**FAILOVER, "brokers": 2, "records": 1, "max_in_flight": 1})
    enc = Encoding(cfg)
    led = {tuple(ep for ep in range(enc.E) if any(sh[("g", "el", ep, i)] for i in range(enc.n)))
           for sh, _ in epochs.control_shapes(enc)}
    assert (0, 2) in led and max(len(x) for x in led) == 2, led
    assert epochs.write_slots(cfg) == 2
    twice = [s for s in bfs_states(Model(cfg), 20_000)
             if len(s.writes) > len({(w[0], w[1]) for w in s.writes})]
    assert twice


@pytest.mark.slow
def test_every_replicated_lemma_holds_on_every_third_reachable_state():
    """pytest -m slow tests/test_prove_lemmas.py -k replicated (4 min at load 5)."""
    cfg = make_config("current", **{**FAILOVER, "brokers": 2, "records": 1, "max_in_flight": 1})
    enc = Encoding(cfg, writes=epochs.write_slots(cfg), logs=epochs.log_slots(cfg), shadows=True)
    states = bfs_states(Model(cfg), 100_000)[::3]
    assert len(states) > 5000
    _replicated_check(states, enc)


@pytest.mark.slow
def test_every_replicated_lemma_holds_at_2_in_flight():
    """The replicated set (and StrongIsr's lemmas under it) with 2 batches in flight, in the
    encoding with the proof's 4 write slots and 2 log slots: every 100th of the first 40,000 breadth-first
    states and 300 random walks of 80 steps (53 s at load 5; the induction proof at 2 in
    flight: tests/test_prove_producers.py)."""
    cfg = make_config("current", **{**FAILOVER, "brokers": 2, "records": 2, "max_in_flight": 2})
    enc = Encoding(cfg, writes=epochs.write_slots(cfg), logs=epochs.log_slots(cfg), shadows=True)
    m = Model(cfg)
    states = bfs_states(m, 40_000)[::100] + draw_states(m, 7, 300, walk_length=80)
    assert any(len(s.exposed) == 2 for s in states) and any(s.zk.le > 0 for s in states)
    for s in states:
        d = enc.from_state(s)
        for name in NEEDS["StrongIsr"] + tuple(REPLICATED_STRENGTHENING):
            assert STRENGTHENING[name](enc, d), (name, s)
