"""The z3 encoding (checkers/prove/encoding.py) against spec's `step`, on >= 10,000 reachable
states drawn by breadth-first search and seeded random walks over several generations and
fault settings: the same enabled encoded actions and the same successors. A sample also goes
through z3 itself (model evaluation of the symbolic guard and successor formulas).

The configurations with pauses are chosen so that paused brokers, expired sessions and deposed
controllers are common among the drawn states (no crashes or few: a crash ends a pause), with
and without controller-epoch-fencing, with 1 and 2 pauses."""
from __future__ import annotations

import pytest

from collections import Counter

from checkers.prove import encoding as encmod
from checkers.prove.differential import (DiffReport, bfs_states, compare_state, draw_states,
                                         z3_agrees)
from checkers.prove.encoding import Encoding, Unsupported, supported
from spec import Model, make_config

# (generation, without, bounds, seed): 11 configurations x 950 states
CONFIGS = [
    ("current", (), {"unflushed_loss": True}, 1),
    ("current", (), {"brokers": 3}, 2),
    ("current", (), {"brokers": 3, "records": 3, "losses": 2}, 3),
    ("current", ("maximal-isr",), {}, 4),
    ("current", ("isr-broker-epoch",), {"brokers": 3}, 5),
    ("current", ("min-isr-hw",), {"acks": "1", "min_isr": 1}, 6),
    ("v0.10", (), {"unflushed_loss": True, "min_isr": 1}, 7),
    ("kip-101", (), {"records": 3, "unflushed_loss": True}, 8),
    ("kip-279", (), {"brokers": 3}, 9),
    ("kip-320", (), {"brokers": 3, "unclean": True}, 10),
    ("current", ("truncate-on-epoch-change",), {"unflushed_loss": True, "min_isr": 1}, 11),
    *[(gen, without, bounds, seed) for gen, without, bounds, seed in (
        ("current", ("controller-epoch-fencing",), {"pauses": 1, "crashes": 0}, 12),
        ("current", (), {"pauses": 1, "crashes": 0, "records": 1, "losses": 0}, 13),
        ("current", (), {"pauses": 2, "crashes": 0, "records": 1}, 14),
        ("current", ("controller-epoch-fencing",),
         {"pauses": 2, "crashes": 1, "brokers": 3, "records": 1}, 15),
    )],
]
PER_CONFIG = 950
PAUSE_KINDS = ("Pause", "Resume", "SessionExpire", "Reregister", "ZombieElect")


def _run(gen, without, bounds, seed, per=PER_CONFIG):
    cfg = make_config(gen, without, **bounds)
    model, enc = Model(cfg), Encoding(cfg)
    rep = DiffReport()
    for s in bfs_states(model, per // 3) + draw_states(model, seed, per - per // 3):
        compare_state(enc, model, s, rep)
    return rep


def test_encoding_agrees_with_spec_on_10000_states():
    total = transitions = skipped = 0
    paused = Counter()
    for gen, without, bounds, seed in CONFIGS:
        rep = _run(gen, without, bounds, seed)
        assert not rep.problems, (f"{gen} without {without} {bounds}: "
                                  + "\n".join(f"{a}: {p}" for _, a, p in rep.problems[:5]))
        total += rep.states
        transitions += rep.transitions
        skipped += rep.skipped
        assert rep.oob <= rep.transitions // 20, "too many successors past the encoding's bounds"
        if bounds.get("pauses"):
            paused.update({k: rep.kinds[k] for k in PAUSE_KINDS})
            paused["Deliver"] += rep.kinds["Deliver"]
    assert total >= 10_000
    assert transitions > 3 * total
    assert skipped <= total // 50
    # the pause actions themselves were compared, not only the states around them
    assert min(paused[k] for k in PAUSE_KINDS) >= 50, paused


def test_z3_formulas_agree_with_concrete_evaluation():
    for gen, bounds, seed in (("current", {"unflushed_loss": True}, 21), ("kip-101", {"records": 3}, 22),
                              ("current", {"pauses": 1, "crashes": 0}, 23)):
        cfg = make_config(gen, **bounds)
        states = draw_states(Model(cfg), seed, 40, walk_length=30)
        assert z3_agrees(Encoding(cfg), states) == []


def test_a_wrong_rule_is_caught(monkeypatch):
    """The comparison can fail: an encoding whose Produce forgets the leader's own position
    disagrees with spec."""
    real = encmod.Encoding._s_produce

    def wrong(self, s, a):
        real(self, s, a)
        s[("b", a.b, "pos", a.b)] = s[("b", a.b, "pos", a.b)] - 1
    monkeypatch.setattr(encmod.Encoding, "_s_produce", wrong)
    rep = _run("current", (), {}, 1, per=300)
    assert any(a is not None and a.kind == "Produce" for _, a, _ in rep.problems)


def _zombie_ignores_election_bound(real):
    def wrong(self, s, a):
        i, x = a.b, a.arg
        return encmod.OR(real(self, s, a), encmod.AND(
            self.up(s, i), encmod.NE(s[("b", i, "ctl")], 0), s[("b", i, "ctl")] < s[("z", "ce")],
            s[("b", i, "hascc")], s[("b", i, "ccisr", x)], encmod.NE(s[("b", i, "cc_l")], x)))
    return wrong


def _paused_broker_takes_requests(real):
    def wrong(self, s, a):
        d, k = a.arg
        return encmod.AND(s[("m", d, k, "v")], s[("b", d, "alive")])
    return wrong


def _resume_misses_controller_epoch(real):
    def wrong(self, s, a):
        s[("b", a.b, "paused")] = False
    return wrong


@pytest.mark.parametrize("method,wrong", [
    ("_g_zombie", _zombie_ignores_election_bound),
    ("_g_deliver", _paused_broker_takes_requests),
    ("_s_resume", _resume_misses_controller_epoch),
], ids=["zombie-election-bound", "deliver-to-paused", "resume-controller-epoch"])
def test_a_wrong_pause_rule_is_caught(monkeypatch, method, wrong):
    """The pause configurations can fail: a wrong guard or effect of the pause actions
    disagrees with spec on the states drawn for them."""
    monkeypatch.setattr(encmod.Encoding, method, wrong(getattr(encmod.Encoding, method)))
    found = []
    for gen, without, bounds, seed in CONFIGS:
        if bounds.get("pauses"):
            found += _run(gen, without, bounds, seed, per=300).problems
            if found:
                break
    assert found


def test_unsupported_configs_are_refused():
    assert supported(make_config("current")) is None
    assert supported(make_config("current", pauses=2)) is None
    for cfg in (make_config("current", disk_loss=True), make_config("kip-966")):
        assert supported(cfg)
        with pytest.raises(Unsupported):
            Encoding(cfg)
