"""The strengthening lemmas of the inductive proofs (checkers/prove/strengthen.py): each holds on
states the explicit model reaches (a lemma false there is a bug in the lemma, whatever z3 says),
the symmetry reduction of the induction step covers every action instance, and LogMatching and
StrongIsr are proved by induction for `current` at 2 replicas (StrongIsr's strengthening contains
LogMatching, so one proof proves both; 3, 5 and 7 replicas: python -m kafkaverify.bench.prove)."""
from __future__ import annotations

from itertools import permutations

from checkers.prove.differential import bfs_states, draw_states
from checkers.prove.encoding import Encoding
from checkers.prove.induction import named_brokers, prove, representatives
from checkers.prove.strengthen import NEEDS, STRENGTHENING
from spec import Model, make_config

CONFIGS = [({}, 1), ({"brokers": 3, "records": 3}, 2)]


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
