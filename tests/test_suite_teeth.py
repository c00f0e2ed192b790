"""The suite's teeth name their bug, and its clean stages catch a weakened fix: an unrelated bug
injected into a copy of a rule (monkeypatch) must fail a tooth with "expected X, found Y", and a
fix made wrong in one corner must fail the clean stage for that fix."""
from __future__ import annotations

import pytest

from kafkaverify.suite import budget
from kafkaverify.suite import stages as suite
from spec import rules
from spec.config import FIXES


def _hw_ignores_followers(leader, me, min_isr, fixes):
    """An unrelated bug: the leader advances its HW to its own log end without its followers."""
    return max(leader.leo, leader.hw)


def test_tooth_that_finds_another_bug_fails_naming_both(monkeypatch):
    monkeypatch.setattr(rules, "leader_hw", _hw_ignores_followers)
    name, gen, without, bounds, invs, expect = next(t for t in suite.TEETH if t[0] == "without maximal-isr")
    r = suite._explore_stage(name, gen, without, bounds, invs, True, 60, expect)
    assert r.verdict == "fail"
    assert r.detail.startswith("expected ReplicationQuorumSuperset, found StrongIsr"), r.detail


def test_tooth_passes_on_its_own_bug():
    name, gen, without, bounds, invs, expect = next(t for t in suite.TEETH if t[0] == "without maximal-isr")
    r = suite._explore_stage(name, gen, without, bounds, invs, True, 60, expect)
    assert r.verdict == "pass" and r.detail.startswith("ReplicationQuorumSuperset"), r.detail


def test_random_walk_tooth_that_finds_another_bug_fails_naming_both(monkeypatch):
    monkeypatch.setattr(rules, "leader_hw", _hw_ignores_followers)
    # unrestricted, so that the injected bug can show; the suite's rows restrict to their invariant
    r = suite._simulate_stage("walks", ("epoch-end-offset",), 1, 20_000, invariants=None,
                              expect="LogMatching")
    assert r.verdict == "fail"
    assert r.detail.startswith("expected LogMatching, found MinIsrDurability"), r.detail


def test_every_sim_tooth_names_its_invariant():
    for name, _w, _seed, _steps, invs, expect in suite.SIM_TEETH:
        assert expect and expect in invs, name


def test_controller_fencing_one_epoch_behind_is_caught_by_its_clean_stage(monkeypatch):
    """The issue's example of a weakened fix: accepting a request one controller epoch behind."""
    def weakened(b, ce, le, fixes):
        if "controller-epoch-fencing" in fixes and ce < b.ce - 1:
            return False
        return le > b.le
    monkeypatch.setattr(rules, "control_request_accepted", weakened)
    name, _fix, kind, bounds, limits = next(c for c in suite.CLEAN if c[1] == "controller-epoch-fencing")
    r = suite._clean_stage(name, kind, bounds, limits)
    assert r.verdict == "fail", r.detail
    assert r.detail.startswith("UniqueLeaderPerEpoch"), r.detail


def test_every_fix_has_a_clean_stage_and_a_tooth():
    """`kafkaverify check` has, for every fix, a "removed: caught" and an "on: clean" stage."""
    from checkers.golden import RECIPES
    cleaned = {c[1] for c in suite.CLEAN}
    # rows that cover a second fix at the same bounds say so in their name
    cleaned |= {f for c in suite.CLEAN for f in FIXES if f in c[0]}
    assert cleaned == set(FIXES), set(FIXES) - cleaned
    removed = {f for t in suite.TEETH for f in t[2]} | {f for t in suite.SIM_TEETH for f in t[1]}
    removed |= {r.demonstrates for r in RECIPES}           # golden traces replayed by the suite
    assert removed == set(FIXES), set(FIXES) - removed
    names = {n for n, _ in suite.stages()}
    assert {c[0] for c in suite.CLEAN} <= names
    assert {c[0] for c in suite.CLEAN} <= set(budget.TABLE)


@pytest.mark.parametrize("row", [c for c in suite.CLEAN if c[2] == "script"], ids=lambda c: c[1])
def test_scripted_clean_stages_pass_with_every_fix(row):
    name, _fix, kind, bounds, limits = row
    r = suite._clean_stage(name, kind, bounds, limits)
    assert r.verdict == "pass", r.detail


def test_every_replication_fix_of_current_is_caught_by_search():
    """`kafkaverify check` catches each of current's replication fixes by a search (breadth-first,
    seeded walks or the portfolio's swarm walks), not only by a scripted golden trace. KIP-903
    (isr-broker-epoch) is current's only fix whose bug needs a lost disk, with which current
    itself loses data (KIP-966's case): it is shown under kip-966 by its golden trace."""
    from spec.config import CLIENT_FIXES, GENERATIONS
    searched = ({f for t in suite.TEETH for f in t[2]} | {f for t in suite.SIM_TEETH for f in t[1]}
                | {f for t in suite.SWARM_TEETH for f in t[1]})
    eight = GENERATIONS["current"] - CLIENT_FIXES - {"isr-broker-epoch"}
    assert len(eight) == 8 and eight <= searched, eight - searched
    names = {n for n, _ in suite.stages()}
    assert {t[0] for t in suite.SWARM_TEETH} <= names and {t[0] for t in suite.SWARM_TEETH} <= set(budget.TABLE)


def test_swarm_tooth_finds_its_bug_and_names_another():
    """The swarm tooth for KAFKA-7128 finds LeaderCandidateCompleteness from the first seeds, and
    its counterexample is the shrunk walk, replayable on its config."""
    from spec import Model
    name, without, expect = next(t for t in suite.SWARM_TEETH if t[1] == ("isr-expand-epoch-start",))
    r = suite._swarm_stage(name, "current", without, expect, seeds=4)
    assert r.verdict == "pass" and r.detail.startswith("LeaderCandidateCompleteness"), r.detail
    cfg, found = r.evidence
    m = Model(cfg)
    s = m.initial()
    for a in found.path:
        assert a in m.enabled(s)
        s = m.step(s, a)
    assert m.violation(s)[0] == "LeaderCandidateCompleteness"


def test_swarm_stages_fail_on_another_bug(monkeypatch):
    monkeypatch.setattr(rules, "leader_hw", _hw_ignores_followers)
    r = suite._swarm_stage("tooth", "current", ("isr-expand-epoch-start",), "LeaderCandidateCompleteness",
                           seeds=2)
    assert r.verdict == "fail" and r.detail.startswith("expected LeaderCandidateCompleteness, found "), r.detail
    r = suite._swarm_stage("clean", suite.CLEAN_GENERATION, (), None, seeds=2)
    assert r.verdict == "fail" and "walk seed" in r.detail, r.detail
