"""Progress properties (spec/progress.py): bounded liveness, checked like the invariants by the
explorer, the random walks and `kafkaverify check`. Their teeth: a model whose HW stops
advancing, or whose controller stops electing, fails them -- not only a golden replay."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from checkers.explore import explore
from checkers.simulate import simulate
from kafkaverify.suite import stages as suite
from spec import INVARIANT_NAMES, Model, make_config, rules
from spec.progress import election_progress, hw_progress

ROOT = Path(__file__).resolve().parent.parent


def _hw_needs_more_than_min_isr(leader, min_isr, fixes):
    """The planted bug: the HW advances only with *more* than min.insync.replicas members."""
    return "min-isr-hw" not in fixes or rules.popcount(leader.isr) > min_isr


def _no_clean_candidates(fixes, isr, elr, lkelr, electable, unclean):
    """The planted bug: the controller finds no candidate in the ISR (only unclean ones)."""
    return electable if unclean else 0


def _walk(model, actions):
    s = model.initial()
    for kind, b in actions:
        a = next(x for x in model.enabled(s) if x.kind == kind and x.b == b)
        s = model.step(s, a)
    return s


def test_progress_properties_are_named_like_invariants():
    assert {"HwProgress", "ElectionProgress"} <= set(INVARIANT_NAMES)
    names = {i.name for i in Model(make_config("current")).invariants}
    assert {"HwProgress", "ElectionProgress"} <= names


def test_hw_progress_holds_where_the_followers_caught_up(monkeypatch):
    cfg = make_config("current")
    m = Model(cfg)
    s = _walk(m, [("Produce", 0), ("FetchRequest", 1), ("FetchResponse", 1)])
    # b1 holds r0 but b0 has not seen its position: HW 0 < LEO 1, and one fetch moves it
    assert s.brokers[0].hw == 0 and s.brokers[1].log == s.brokers[0].log
    assert hw_progress(cfg, s) is None
    monkeypatch.setattr(rules, "hw_may_advance", _hw_needs_more_than_min_isr)
    msg = hw_progress(cfg, s)
    assert msg == ("leader b0 (epoch 0) has ISR {b0, b1} of at least min.insync.replicas=2, every member "
                   "holding its log to offset 1, but its high watermark 0 does not reach 1 within 2 fetch steps")


def test_hw_progress_promises_nothing_while_a_member_lags_or_a_fault_stands(monkeypatch):
    monkeypatch.setattr(rules, "hw_may_advance", _hw_needs_more_than_min_isr)
    cfg = make_config("current", pauses=1)
    m = Model(cfg)
    assert hw_progress(cfg, _walk(m, [("Produce", 0)])) is None                   # b1 has not fetched r0
    paused = _walk(m, [("Produce", 0), ("FetchRequest", 1), ("FetchResponse", 1), ("Pause", 1)])
    assert hw_progress(cfg, paused) is None                                       # a fault stands


def test_explorer_finds_a_stuck_hw(monkeypatch):
    monkeypatch.setattr(rules, "hw_may_advance", _hw_needs_more_than_min_isr)
    r = explore(Model(make_config("current", crashes=1)), time_limit=60)
    assert r.status == "violation" and r.invariant == "HwProgress", (r.status, r.invariant)
    assert [a.kind for a in r.path] == ["Produce", "FetchRequest", "FetchResponse"]


def test_random_walks_find_a_stuck_hw(monkeypatch):
    monkeypatch.setattr(rules, "hw_may_advance", _hw_needs_more_than_min_isr)
    r = simulate(Model(make_config("current", brokers=3, records=3)), 1, 5_000, walk_length=60)
    assert r.status == "violation" and r.invariant == "HwProgress", (r.status, r.invariant)


def test_check_fails_a_model_whose_hw_stops_advancing(monkeypatch):
    """`kafkaverify check`'s quick safety stage (current, one crash) fails on the progress
    property, naming it, where before only golden replays noticed."""
    name = "current exhausted, one crash"
    run = dict(suite.stages(quick=True))[name]
    assert run().verdict == "pass"
    monkeypatch.setattr(rules, "hw_may_advance", _hw_needs_more_than_min_isr)
    r = run()
    assert r.verdict == "fail" and r.detail.startswith("HwProgress in 3 steps"), r.detail


def test_explorer_finds_a_controller_that_does_not_elect(monkeypatch):
    monkeypatch.setattr(rules, "leader_candidates", _no_clean_candidates)
    r = explore(Model(make_config("current", crashes=1)), time_limit=60)
    assert r.status == "violation" and r.invariant == "ElectionProgress", (r.status, r.invariant)
    assert "no live leader and ISR member(s)" in r.message


def test_election_progress_holds_after_a_leader_crash():
    cfg = make_config("current", crashes=1)
    m = Model(cfg)
    s = _walk(m, [("Crash", 0)])
    assert s.zk.sessions[0] == 0 and s.zk.leader == 0        # offline: the leader is gone
    assert election_progress(cfg, s) is None
    spent = s._replace(elections=cfg.elections)               # no election left in the bounds
    assert election_progress(cfg, spent) is None


def test_explore_cli_takes_a_progress_property_by_name():
    r = subprocess.run([sys.executable, "-m", "kafkaverify", "explore", "--generation", "current",
                        "--crashes", "1", "--invariant", "HwProgress"], capture_output=True, text=True,
                       cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr
