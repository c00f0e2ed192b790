"""Renaming brokers in encoded states (checkers/prove/symmetry.py) and the symmetry reduction of
the induction step: the renaming is spec's; the checks the producer proof runs before it asks
one instance per orbit pass on that proof's hypothesis and steps, and on the core proofs'
(StrongIsr's strengthening); they fail where the hypothesis or a step is not symmetric. (The
producer proof itself, asking one instance per orbit: tests/test_prove_producers.py, two
brokers at 2 in flight.)"""
from __future__ import annotations

import pytest

from spec import Model, make_config
from spec.state import Broker, Prod, State, Zk
from spec.symmetry import _perms, permute

from checkers.prove import induction, strengthen_epochs
from checkers.prove.differential import bfs_states, draw_states
from checkers.prove.encoding import Encoding
from checkers.prove.induction import named_brokers, prove_together, representatives
from checkers.prove.strengthen import producer_needs
from checkers.prove.strengthen_epochs import log_slots, write_slots
from checkers.prove.symmetry import (hypothesis_symmetric, rename, rename_instance,
                                     steps_symmetric, transpositions)

FAILOVER = {"brokers": 2, "producers": 1, "retries": 2, "crashes": 1, "elections": 1,
            "losses": 0, "min_isr": 1}
BOTH = ("ProducerSendOrder", "ProducerExactlyOnce")


def _as_state(t: tuple) -> State:
    """spec.symmetry.permute's plain tuple as a State."""
    return State(tuple(Broker(*b) for b in t[0]), Zk(*t[1]), t[2], *t[3:14], writes=t[14],
                 prods=tuple(Prod(*p) for p in t[15]), grp=t[16])


def _proof_setup(records: int):
    cfg = make_config("current", **{**FAILOVER, "records": records, "max_in_flight": records})
    writes = write_slots(cfg)
    strengthening = producer_needs(cfg)[0]
    return induction._setup(cfg, BOTH, strengthening, writes, min(writes, log_slots(cfg)))


def test_rename_is_spec_renaming_on_reachable_states():
    """An encoded state renamed is the encoding of spec's renamed state, for every renaming:
    two brokers with a producer across a fail-over, three brokers with pauses (sessions,
    controllers' caches, pending expansions)."""
    configs = [make_config("current", **{**FAILOVER, "records": 2, "max_in_flight": 2}),
               make_config("current", brokers=3, records=1, pauses=1, crashes=1)]
    for cfg in configs:
        model = Model(cfg)
        enc = Encoding(cfg, shadows=bool(cfg.producers))
        states = bfs_states(model, 1500) + draw_states(model, 5, 300, walk_length=60)
        checked = 0
        for st in states:
            d = enc.from_state(st)
            for p, mt, inv in _perms(cfg.brokers):
                assert enc.to_state(rename(d, p)) == _as_state(permute(st, p, mt, inv)), (p, st)
                checked += 1
        assert checked >= 1800 * len(_perms(cfg.brokers)) // 2


def test_control_shapes_are_closed_under_renaming():
    enc, _, _, _ = _proof_setup(1)
    shapes = strengthen_epochs.control_shapes(enc)
    have = {(tuple(sorted(sh.items(), key=repr)), msgs) for sh, msgs in shapes}
    assert len(have) == len(shapes)
    for sh, msgs in have:
        for p in transpositions(enc.n):
            assert (strengthen_epochs._rename_shape(sh, p),
                    strengthen_epochs._rename_msgs(msgs, p)) in have
    # spec's initial state has broker 0 lead; its renaming, broker 1, is a shape too
    lead = {sh.get(("z", "leader")) for sh, _ in shapes}
    assert {0, 1} <= lead


def test_the_proofs_hypothesis_and_steps_are_symmetric():
    for records in (1, 3):
        enc, conj, s, hyp = _proof_setup(records)
        assert hypothesis_symmetric(enc, s, hyp, 120, list(conj)) is None
        assert steps_symmetric(enc, 120) is None


def test_an_asymmetric_hypothesis_is_refused(monkeypatch):
    """ControlShapes as drawn from spec's initial state alone (broker 0 leads, never broker 1
    first) is not symmetric: the check names it."""
    monkeypatch.setattr(strengthen_epochs, "transpositions", lambda n: [])
    strengthen_epochs._SHAPES.clear()
    try:
        enc, conj, s, hyp = _proof_setup(1)
        why = hypothesis_symmetric(enc, s, hyp, 120, list(conj))
    finally:
        strengthen_epochs._SHAPES.clear()
    assert why is not None and why.startswith("ControlShapes"), why


def test_an_asymmetric_step_is_refused(monkeypatch):
    """A Send that may go to broker 0 whenever the metadata names no leader breaks the
    symmetry of the steps: the check names the instance."""
    from checkers.prove.producers import Producers
    from checkers.prove.sym import AND, OR
    original = Producers.guard_send

    def biased(self, st, a):
        return OR(original(self, st, a), AND(a.arg == 0, st[("z", "leader")] < 0))
    monkeypatch.setattr(Producers, "guard_send", biased)
    enc, conj, s, hyp = _proof_setup(1)
    why = steps_symmetric(enc, 120)
    assert why is not None and why.startswith("Send"), why


def test_representatives_with_producers_cover_every_instance_once_per_orbit():
    enc, _, _, _ = _proof_setup(2)
    reps = representatives(enc, slots=False)
    keys = {(x.kind, x.b, x.via, x.arg) for x in reps}
    for inst in enc.insts:
        orbit = {inst} | {rename_instance(enc, inst, p) for p in transpositions(enc.n)}
        assert any((x.kind, x.b, x.via, x.arg) in keys for x in orbit), inst
    # a producer's request handled at broker 1 is the renaming of one handled at broker 0
    handle = [x for x in reps if x.kind == "HandleProduce"]
    assert [named_brokers(x) for x in handle] == [(0,)]
    assert len(reps) < len(enc.insts)


def test_a_failed_check_makes_the_proof_ask_every_instance(monkeypatch):
    """Where z3 does not show a step symmetric, the proof does not rely on the reduction: it is
    asked again of every instance (here the check is made to fail for HandleProduce)."""
    real = induction.step_commutes

    def refuse(enc, s, a, left):
        return "refused here" if a.kind == "HandleProduce" else real(enc, s, a, left)
    monkeypatch.setattr(induction, "step_commutes", refuse)
    model = Model(make_config("current", **{**FAILOVER, "records": 1, "max_in_flight": 1}))
    stats: dict = {}
    rs = prove_together(model, BOTH, time_limit=300, stats=stats, workers=2)
    assert [r.verdict for r in rs] == ["proved", "proved"], [(r.failing, r.cti) for r in rs]
    assert "(not symmetric: every instance asked)" in stats
    assert any(k.startswith("HandleProduce (1,)") for k in stats)


def _core_symmetric(gen, **bounds):
    from checkers.prove.strengthen import NEEDS
    cfg = make_config(gen, **bounds)
    enc, conj, s, hyp = induction._setup(cfg, ("StrongIsr",), NEEDS["StrongIsr"], None, None)
    assert hypothesis_symmetric(enc, s, hyp, 300, list(conj)) is None
    assert steps_symmetric(enc, 600) is None


def test_the_core_proofs_reduction_is_symmetric_by_z3():
    """The core proofs ask one instance per orbit on the argument that their lemmas treat
    brokers alike and spec's steps commute with renaming: z3 shows both for StrongIsr's
    strengthening at 3 brokers with pauses (zombie controllers, expired sessions)."""
    _core_symmetric("current", brokers=3, records=1, pauses=1)


@pytest.mark.slow
@pytest.mark.parametrize("gen,bounds", [("current", {"brokers": 3, "records": 2}),
                                        ("kip-966", {"brokers": 3, "records": 2})])
def test_the_core_proofs_reduction_is_symmetric_by_z3_more(gen, bounds):
    """The same with two records, and under KIP-966's eligible leader replicas:
    pytest -m slow tests/test_prove_symmetry.py."""
    _core_symmetric(gen, **bounds)
