"""The model's internal-consistency invariants (spec/invariants.py): each holds where the model is
right, names a broken state, and catches a rule broken in a way no client-visible invariant
sees within small bounds."""
from __future__ import annotations

import pytest

from checkers.explore import explore
from spec import Model, initial, make_config, rules
from spec.invariants import (epoch_cache_matches_log, fetch_response_matches_epoch,
                             pending_isr_matches_role)
from spec.state import FOLLOWER

CFG = make_config("current")


def _with(s, i, **kw):
    return s._replace(brokers=tuple(b._replace(**kw) if k == i else b for k, b in enumerate(s.brokers)))


def test_initial_state_is_consistent():
    s = initial(CFG)
    for check in (epoch_cache_matches_log, fetch_response_matches_epoch, pending_isr_matches_role):
        assert check(CFG, s) is None


@pytest.mark.parametrize("log, cache, says", [
    (((0, 0), (1, 1)), ((0, 0),), "says epoch 0"),                    # r1@e1 with no entry for e1
    (((0, 0),), ((0, 0), (1, 3)), "past its log end"),
    (((0, 0),), ((1, 0), (0, 1)), "does not strictly increase"),
    (((0, 0),), ((0, 1), (1, 0)), "does not strictly increase"),     # epochs rise, starts fall
    (((0, 0), (1, 1), (2, 3), (3, 2)), ((0, 0), (1, 1), (3, 2), (2, 3)), "does not strictly increase"),  # 4th entry
    (((0, 0),), (), "no entry"),
])
def test_epoch_cache_against_its_log(log, cache, says):
    s = _with(initial(CFG), 0, log=log, cache=cache, flushed=0)
    msg = epoch_cache_matches_log(CFG, s)
    assert msg and says in msg


def test_epoch_cache_compares_epochs_with_epochs_and_starts_with_starts():
    """Epoch numbers and start offsets are separate sequences: an epoch below the previous entry's
    start offset is fine, a start offset that falls is not, whatever the epochs."""
    s = _with(initial(CFG), 0, log=((0, 0), (1, 0), (2, 1)), cache=((0, 0), (1, 2), (2, 3)), flushed=0)
    assert epoch_cache_matches_log(CFG, s) is None
    s = _with(initial(CFG), 0, log=((0, 0),), cache=((0, 1), (5, 0)), flushed=0)
    assert "does not strictly increase" in epoch_cache_matches_log(CFG, s)


def test_epoch_cache_names_the_entry_past_the_log_end():
    s = _with(initial(CFG), 0, log=((0, 0),), cache=((0, 0), (1, 3)), flushed=0)
    assert epoch_cache_matches_log(CFG, s) == "b0's epoch cache entry (1, 3) starts past its log end 1"


def test_epoch_cache_may_start_a_new_leaders_epoch_at_the_log_end():
    s = _with(initial(CFG), 0, log=((0, 0),), cache=((0, 0), (1, 1)))
    assert epoch_cache_matches_log(CFG, s) is None


def test_fetch_response_against_its_epoch():
    s = _with(initial(CFG), 0, log=((0, 0),), cache=((0, 0),), hw=1)
    ok = _with(s, 1, fetch=(0, 0, 0, ((0, 0),), 1, False))
    assert fetch_response_matches_epoch(CFG, ok) is None
    assert "never led" in fetch_response_matches_epoch(CFG, _with(s, 1, fetch=(0, 1, 0, ((0, 0),), 1, False)))
    assert "never led" in fetch_response_matches_epoch(CFG, _with(s, 1, fetch=(1, 0, 0, ((0, 0),), 1, False)))
    assert "out of epoch order" in fetch_response_matches_epoch(CFG, _with(s, 1, fetch=(0, 0, 0, ((0, 1),), 1, False)))
    assert "past the log end" in fetch_response_matches_epoch(CFG, _with(s, 1, fetch=(0, 0, 0, ((0, 0),), 2, False)))
    assert "differs" in fetch_response_matches_epoch(CFG, _with(s, 1, fetch=(0, 0, 0, ((5, 0),), 1, False)))
    # the sender must have led that very epoch: another broker's leadership does not count
    three = make_config("current", brokers=3)
    s3 = _with(initial(three), 0, log=((0, 0),), cache=((0, 0),), hw=1)
    assert "b2 never led" in fetch_response_matches_epoch(three, _with(s3, 1, fetch=(2, 0, 0, (), 1, False)))
    led_by_b1 = _with(s3, 2, fetch=(0, 0, 0, (), 1, False))._replace(epoch_leaders=(0b10,))
    assert "b0 never led" in fetch_response_matches_epoch(three, led_by_b1)
    r5 = _with(s, 0, log=((5, 0),))      # the leader's record sorts after the response's: still differs
    assert "differs" in fetch_response_matches_epoch(CFG, _with(r5, 1, fetch=(0, 0, 0, ((0, 0),), 1, False)))


def test_pending_isr_against_role():
    s = initial(CFG)
    assert "not a running leader" in pending_isr_matches_role(CFG, _with(s, 1, pending=3))
    assert "not a running leader" in pending_isr_matches_role(CFG, _with(s, 0, role=FOLLOWER, pending=3))
    assert "leaves itself out" in pending_isr_matches_role(CFG, _with(s, 0, pending=2))
    assert "quotes a broker epoch" in pending_isr_matches_role(CFG, _with(s, 0, pend_gen=2))


def test_a_cache_that_forgets_truncation_is_caught(monkeypatch):
    """cache_truncate made a no-op: the cache keeps entries for records a follower dropped."""
    monkeypatch.setattr(rules, "cache_truncate", lambda cache, end: cache)
    r = explore(Model(make_config("current", unflushed_loss=True, min_isr=1)), time_limit=60,
                invariants=("EpochCacheMatchesLog",))
    assert r.status == "violation" and r.invariant == "EpochCacheMatchesLog", r.status


def test_fault_counters_never_pass_their_bounds():
    """Every fault an action spends is bounded by the config (TLC's state constraint): random
    walks that reach each bound must find nothing enabled past it -- zombie elections by a
    deposed controller included."""
    import random
    cfg = make_config("current", brokers=3, crashes=1, pauses=1, elections=1, losses=1)
    m = Model(cfg)
    rng = random.Random(5)
    hit = set()
    for _ in range(600):
        s = m.initial()
        for _ in range(40):
            acts = m.enabled(s)
            if not acts:
                break
            s = m.step(s, acts[rng.randrange(len(acts))])
            for name in ("crashes", "pauses", "elections", "losses"):
                assert getattr(s, name) <= getattr(cfg, name), (name, s)
                if getattr(s, name) == getattr(cfg, name):
                    hit.add(name)
    assert hit == {"crashes", "pauses", "elections", "losses"}


def test_every_election_is_counted_zombie_ones_included():
    """Each action that moves leadership spends one election, so the bound holds by counting:
    a deposed controller's (zombie) election included."""
    import random
    m = Model(make_config("current", brokers=3, crashes=1, pauses=1, elections=2, losses=0))
    rng = random.Random(3)
    seen = set()
    for _ in range(800):
        s = m.initial()
        for _ in range(40):
            acts = m.enabled(s)
            if not acts:
                break
            a = acts[rng.randrange(len(acts))]
            t = m.step(s, a)
            if a.kind == "ZombieElect":
                assert t.elections == s.elections + 1, a
                seen.add(a.kind)
            s = t
    assert seen == {"ZombieElect"}


def test_unclean_election_is_not_narrowed_to_the_longest_log_when_no_last_known_elr_member_is_up():
    """KIP-966's unclean recovery picks the longest log among last-known-ELR members; when none
    of them is up, unclean.leader.election.enable lets the controller elect any live replica."""
    from spec.model import _react_plan
    cfg = make_config("kip-966", brokers=3, unclean=True, min_isr=2)
    s = initial(cfg)
    ctl = s.brokers[2]._replace(alive=False, ctl_cache=s.brokers[2].ctl_cache[:4] + ((2, 2, 0),))
    longer = s.brokers[0]._replace(role=FOLLOWER, log=((0, 0), (1, 0)), cache=((0, 0),))
    s = s._replace(brokers=(longer, s.brokers[1], ctl),
                   zk=s.zk._replace(controller=1, leader=-1, isr=0, elr=0, lkelr=0b100, sessions=(2, 2, 0)))
    s = s._replace(brokers=(s.brokers[0], s.brokers[1]._replace(ctl=s.zk.ce, ctl_cache=ctl.ctl_cache), ctl))
    new, isr, need_leader, cands, elr, lkelr = _react_plan(cfg, s, 1)
    assert need_leader and lkelr == 0b100 and cands == 0b011


def test_a_quick_session_bounce_is_a_new_registration_for_the_controller():
    """A broker whose session expired and that registered again before the controller reacted
    has a new broker epoch: the controller sees a bounce (KIP-903's broker epochs), not the same
    registration."""
    from spec import Action, step
    from spec.model import _react_plan
    cfg = make_config("current", brokers=3, pauses=1)
    s = initial(cfg)
    for a in (Action("Pause", 1), Action("SessionExpire", 1), Action("Resume", 1), Action("Reregister", 1)):
        assert a in Model(cfg).enabled(s), a
        s = step(cfg, s, a)
    new, isr, need_leader, cands, elr, lkelr = _react_plan(cfg, s, s.zk.controller)
    assert new == 0b010 and not (isr >> 1) & 1 and not need_leader


def test_an_elr_member_after_an_unclean_shutdown_leaves_the_elr_even_when_nothing_else_changes():
    """KAFKA-15586: the controller drops the member from the ELR and writes the change, though the
    ISR, the leader and the last known ELR stay as they were."""
    from spec import Action, step
    cfg = make_config("kip-966", brokers=3, min_isr=2)
    s = initial(cfg)
    s = s._replace(zk=s.zk._replace(isr=0b001, elr=0b010, unclean=0b010))
    a = Action("ControllerReact", s.zk.controller, s.zk.leader)
    assert a in Model(cfg).enabled(s)
    t = step(cfg, s, a)
    assert (t.zk.elr, t.zk.isr, t.zk.leader, t.zk.ver) == (0, 0b001, 0, s.zk.ver + 1)


def test_only_a_lagging_isr_member_is_proposed_for_removal_by_any_leader():
    """b1 leads with one record: b0 has not fetched it (lags), b2 has (caught up)."""
    from spec import Action
    cfg = make_config("current", brokers=3)
    s = initial(cfg)
    b0, b1, b2 = s.brokers
    ld = b0._replace(log=((0, 0),), isr=0b111, pos=(0, 1, 1))
    s = s._replace(brokers=(b1._replace(leader=1), ld, b2._replace(leader=1, log=((0, 0),))),
                   zk=s.zk._replace(leader=1))
    shrinks = [a for a in Model(cfg).enabled(s) if a.kind == "ProposeShrink"]
    assert shrinks == [Action("ProposeShrink", 1, 0)]


def test_with_every_isr_member_gone_the_isr_keeps_the_last_leader():
    from spec.model import _react_plan
    cfg = make_config("current", brokers=3)
    s = initial(cfg)
    s = s._replace(zk=s.zk._replace(isr=0b011, leader=1, sessions=(0, 0, 2)))
    new, isr, need_leader, cands, elr, lkelr = _react_plan(cfg, s, 2)
    assert isr == 0b010 and need_leader and not cands
