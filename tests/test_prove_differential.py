"""The z3 encoding (checkers/prove/encoding/) against spec's `step`, on >= 10,000 reachable
states drawn by breadth-first search and seeded random walks over several generations and
fault settings: the same enabled encoded actions and the same successors. A sample also goes
through z3 itself (model evaluation of the symbolic guard and successor formulas).

The configurations with pauses are chosen so that paused brokers, expired sessions and deposed
controllers are common among the drawn states (no crashes or few: a crash ends a pause), with
and without controller-epoch-fencing, with 1 and 2 pauses.

The configurations with disk loss and KIP-966's eligible leader replicas (`kip-966`, with and
without isr-broker-epoch) are chosen so that lost disks, unclean-shutdown registrations, ELR
and last-known-ELR sets, and elections from them are common among the drawn states."""
from __future__ import annotations

import pytest

from collections import Counter

from checkers.prove import encoding as encmod
from checkers.prove.differential import (DiffReport, bfs_states, compare_state, draw_states,
                                         z3_agrees)
from checkers.prove.encoding import ENCODED_KINDS, Encoding, Unsupported, supported
from checkers.prove.sym import AND, NE, OR
from spec import Model, make_config

# (generation, without, bounds, seed): 21 configurations x 950 states
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
    *[(gen, without, bounds, seed) for gen, without, bounds, seed in (
        ("kip-966", ("isr-broker-epoch",), {"disk_loss": True, "crashes": 1}, 16),
        ("kip-966", (), {"disk_loss": True, "crashes": 2}, 17),
        ("kip-966", (), {"brokers": 3, "crashes": 3, "disk_loss": True, "records": 1}, 18),
        ("current", (), {"disk_loss": True, "records": 1}, 19),
    )],
    # the configurations StrongIsr is proved for under kip-966 (tests/test_prove_lemmas.py)
    ("kip-966", (), {"brokers": 3}, 20),
    ("kip-966", (), {"brokers": 3, "min_isr": 1}, 21),
]
PER_CONFIG = 950
PAUSE_KINDS = ("Pause", "Resume", "SessionExpire", "Reregister", "ZombieElect")
# disk loss and KIP-966's paths, counted over the compared states (`elr_paths`)
ELR_PATHS = ("disk-loss", "unclean-registration", "elr-grows-on-alter", "elr-changes-on-react",
             "last-known-elr-set", "elect-from-elr", "elect-from-last-known-elr")


def _run(gen, without, bounds, seed, per=PER_CONFIG, paths=None):
    cfg = make_config(gen, without, **bounds)
    model, enc = Model(cfg), Encoding(cfg)
    rep = DiffReport()
    for s in bfs_states(model, per // 3) + draw_states(model, seed, per - per // 3):
        before = rep.states
        compare_state(enc, model, s, rep)
        if paths is not None and rep.states > before:
            paths.update(elr_paths(model, s))
    return rep


def elr_paths(model, s):
    """Which disk-loss and ELR paths the actions compared in s take (spec's view of them)."""
    from spec.model import _react_plan
    out = Counter()
    zk = s.zk
    if zk.unclean:
        out["unclean-registration"] += 1
    for a in model.enabled(s):
        if a.kind == "Crash" and a.arg == 2:
            out["disk-loss"] += 1
        elif a.kind == "ControllerAlterIsr" and model.step(s, a).zk.elr & ~zk.elr:
            out["elr-grows-on-alter"] += 1
        elif a.kind == "ControllerReact":
            _, isr, need, _, elr, lkelr = _react_plan(model.config, s, a.b)
            out["elr-changes-on-react"] += elr != zk.elr
            out["last-known-elr-set"] += lkelr != zk.lkelr
            if need and a.arg >= 0 and not (isr >> a.arg) & 1:
                out["elect-from-elr" if (elr >> a.arg) & 1 else "elect-from-last-known-elr"] += 1
    return out


def test_encoding_agrees_with_spec_on_10000_states():
    total = transitions = skipped = 0
    paused, paths = Counter(), Counter()
    for gen, without, bounds, seed in CONFIGS:
        rep = _run(gen, without, bounds, seed, paths=paths)
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
    # so were the lost disks and every ELR path
    assert min(paths[k] for k in ELR_PATHS) >= 20, paths


def test_z3_formulas_agree_with_concrete_evaluation():
    for gen, bounds, seed in (("current", {"unflushed_loss": True}, 21), ("kip-101", {"records": 3}, 22),
                              ("current", {"pauses": 1, "crashes": 0}, 23),
                              ("kip-966", {"disk_loss": True, "crashes": 2}, 24)):
        cfg = make_config(gen, **bounds)
        states = draw_states(Model(cfg), seed, 40, walk_length=30)
        assert z3_agrees(Encoding(cfg), states) == []


def test_a_wrong_rule_is_caught(monkeypatch):
    """The comparison can fail: an encoding whose Produce forgets the leader's own position
    disagrees with spec."""
    real = encmod.Encoding.apply_produce

    def wrong(self, s, a):
        real(self, s, a)
        s[("b", a.b, "pos", a.b)] = s[("b", a.b, "pos", a.b)] - 1
    monkeypatch.setattr(encmod.Encoding, "apply_produce", wrong)
    rep = _run("current", (), {}, 1, per=300)
    assert any(a is not None and a.kind == "Produce" for _, a, _ in rep.problems)


def _zombie_ignores_election_bound(real):
    def wrong(self, s, a):
        i, x = a.b, a.arg
        return OR(real(self, s, a), AND(
            self.up(s, i), NE(s[("b", i, "ctl")], 0), s[("b", i, "ctl")] < s[("z", "ce")],
            s[("b", i, "hascc")], s[("b", i, "ccisr", x)], NE(s[("b", i, "cc_l")], x)))
    return wrong


def _paused_broker_takes_requests(real):
    def wrong(self, s, a):
        d, k = a.arg
        return AND(s[("m", d, k, "v")], s[("b", d, "alive")])
    return wrong


def _resume_misses_controller_epoch(real):
    def wrong(self, s, a):
        s[("b", a.b, "paused")] = False
    return wrong


@pytest.mark.parametrize("method,wrong", [
    ("guard_zombie_elect", _zombie_ignores_election_bound),
    ("guard_deliver", _paused_broker_takes_requests),
    ("apply_resume", _resume_misses_controller_epoch),
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
    assert supported(make_config("kip-966", disk_loss=True)) is None
    for cfg in (make_config("current", consumers=1),
                make_config("kip-101", producers=1, acks="1", without=("idempotent-producer",))):
        assert supported(cfg)
        with pytest.raises(Unsupported):
            Encoding(cfg)


def _disk_loss_keeps_epoch_cache(real):
    def wrong(self, s, a):
        clen = s[("b", a.b, "clen")]
        real(self, s, a)
        if a.arg == 2:
            s[("b", a.b, "clen")] = clen
    return wrong


def _restart_not_unclean(real):
    def wrong(self, s, a):
        real(self, s, a)
        s[("z", "unclean", a.b)] = False
    return wrong


def _elr_keeps_unclean_replicas(real):
    def wrong(self, old_isr, new_isr, elr, unclean_shutdown):
        return real(self, old_isr, new_isr, elr, [False] * len(elr))
    return wrong


def _no_election_from_last_known_elr(real):
    def wrong(self, s, c):
        new, isr, need, cands, live, elr, lkelr = real(self, s, c)
        cands = [AND(cands[k], OR(isr[k], elr[k])) for k in range(self.n)]
        return new, isr, need, cands, live, elr, lkelr
    return wrong


@pytest.mark.parametrize("method,wrong", [
    ("apply_crash", _disk_loss_keeps_epoch_cache),
    ("apply_restart", _restart_not_unclean),
    ("elr_after_isr_change", _elr_keeps_unclean_replicas),
    ("react_plan", _no_election_from_last_known_elr),
], ids=["disk-loss-keeps-cache", "restart-not-unclean", "elr-keeps-unclean",
        "no-election-from-last-known-elr"])
def test_a_wrong_disk_loss_or_elr_rule_is_caught(monkeypatch, method, wrong):
    """The disk-loss and KIP-966 configurations can fail: a wrong effect of a lost disk or a
    wrong ELR rule disagrees with spec on the states drawn for them."""
    monkeypatch.setattr(encmod.Encoding, method, wrong(getattr(encmod.Encoding, method)))
    found = []
    for gen, without, bounds, seed in CONFIGS:
        if bounds.get("disk_loss") and gen == "kip-966":
            found += _run(gen, without, bounds, seed).problems
            if found:
                break
    assert found


def _recovery_narrows(model, s):
    """Unclean recovery (KIP-966) picks among the live last-known-ELR members in s: only the
    longest logs remain electable."""
    from spec.model import _react_plan
    c = s.zk.controller
    if c < 0 or not s.brokers[c].ctl_cache:
        return False
    _, isr, need, cands, elr, lkelr = _react_plan(model.config, s, c)
    live = sum(1 << k for k, x in enumerate(s.zk.sessions) if x)
    return bool(need and cands & lkelr and not cands & (isr | elr) and cands != lkelr & live)


def test_unclean_recovery_choice_agrees(monkeypatch):
    """Unclean recovery narrowing a last known ELR of several live members is rare in walks
    (none in the configurations above): draw seeded walks of three brokers at min ISR 3 until
    ten such states are found (bounded: 40 walks' worth of states), compare the encoding with
    spec on them, and check that a choice ignoring the logs is caught there."""
    cfg = make_config("kip-966", brokers=3, min_isr=3, crashes=4, records=2, elections=3,
                      losses=0)
    model, enc = Model(cfg), Encoding(cfg)
    found = []
    for seed in range(40):
        found += [s for s in draw_states(model, seed, 1000) if _recovery_narrows(model, s)]
        if len(found) >= 10:
            break
    assert len(found) >= 10
    rep = DiffReport()
    for s in found:
        compare_state(enc, model, s, rep)
    assert rep.states == len(found) and not rep.problems, rep.problems[:3]
    monkeypatch.setattr(encmod.Encoding, "unclean_recovery_choice", lambda self, s, cands: cands)
    wrong = DiffReport()
    for s in found:
        compare_state(Encoding(cfg), model, s, wrong)
    assert wrong.problems


def test_every_encoded_kind_has_a_guard_and_an_effect_named_after_it():
    """The encoding's areas name each action's guard guard_<action> and its successor
    apply_<action> (the producers' part alike), and the instances use exactly those."""
    import re

    cfg = make_config("current", producers=1, records=1, pauses=1, unflushed_loss=True)
    enc = Encoding(cfg)
    seen = set()
    for inst in enc.insts:
        name = re.sub(r"(?<!^)(?=[A-Z])", "_", inst.kind).lower()
        assert inst.guard.__name__ == f"guard_{name}", (inst.kind, inst.guard.__name__)
        assert inst.step.__name__ == f"apply_{name}", (inst.kind, inst.step.__name__)
        seen.add(inst.kind)
    assert seen <= set(ENCODED_KINDS)
