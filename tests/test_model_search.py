"""The fingerprint explorer (checkers/explore.py, checkers/bfs.py) against the reference explorer
(checkers/explore_reference.py, full states in a dict): same verdicts, same shortest depth, same
distinct-state counts; the parallel search gives one counterexample on every run; the search
portfolio (checkers/portfolio.py) finds a bug past the breadth-first bound."""
import random

import pytest

from checkers.explore import explore
from checkers.explore_reference import explore_reference
from checkers.fingerprint import FingerprintSet, fingerprint
from checkers.portfolio import WalkMemo, search, swarm_walks
from spec import Model, make_config
from spec.symmetry import canonical

SMALL = [
    ("current", (), dict(records=1, crashes=1, elections=1, losses=0), None),
    ("kip-966", (), dict(disk_loss=True, crashes=1, records=1), None),
    ("current", ("epoch-truncation",), {}, None),
    ("current", ("min-isr-hw",), {}, None),
    ("current", ("maximal-isr",), dict(min_isr=1), None),
    ("v0.10", (), dict(unflushed_loss=True, min_isr=1), ("LogMatching",)),
    # transactions: __transaction_state on two brokers (a pending coordinator request names a
    # broker, renamed by the symmetry reduction), and a transactional counterexample
    ("kip-966", (), dict(transactions=1, brokers=2, min_isr=1, records=0, crashes=0, elections=0,
                         losses=0, txn_rounds=1, txn_dups=0), None),
    ("kip-966", ("txn-epoch-bump",), dict(transactions=1, brokers=1, min_isr=1, records=0,
                                          crashes=0, elections=0, losses=0), None),
]


@pytest.mark.parametrize("gen,without,bounds,invs", SMALL)
@pytest.mark.parametrize("workers", [1, 2])
def test_same_verdict_depth_and_count_as_the_reference_explorer(gen, without, bounds, invs, workers):
    model = Model(make_config(gen, without, **bounds))
    old = explore_reference(model, invariants=invs, time_limit=120)
    new = explore(model, invariants=invs, time_limit=120, workers=workers)
    assert new.status == old.status
    if old.status == "exhausted":
        assert (new.distinct, new.depth) == (old.distinct, old.depth)
    else:
        assert new.invariant == old.invariant
        assert len(new.path) == len(old.path) == new.depth
        # the rebuilt path really ends in that violation
        assert model.violation(new.states[-1]) is not None or \
            model.step_violation(new.states[-2], new.states[-1]) is not None


def test_parallel_search_gives_the_same_counterexample_every_run():
    model = Model(make_config("current", ("epoch-truncation",)))
    one = explore(model, time_limit=120, workers=1)
    runs = [explore(model, time_limit=120, workers=2) for _ in range(2)]
    assert one.status == "violation"
    assert runs[0].path == runs[1].path
    assert len(runs[0].path) == len(one.path)


def test_portfolio_finds_a_bug_past_the_breadth_first_bound():
    """KIP-497's hazard on three replicas lies deeper than 50 states of breadth-first search:
    the search stops at its state bound, the swarm walks find it and the walk is shrunk; a depth
    bound the caller set is respected (no walks past it)."""
    model = Model(make_config("current", ("maximal-isr",), brokers=3, records=2, crashes=3,
                              pauses=1, elections=3, losses=1))
    bfs = explore(model, max_states=50, time_limit=60)
    assert bfs.status == "state-bound"
    r = search(model, bfs_max_states=50, time_limit=60, seed=0, workers=1)
    assert r.status == "violation" and r.found_by.startswith("swarm random walks")
    assert len(r.path) > bfs.depth
    assert search(model, max_depth=3, time_limit=60, seed=0, workers=1).status == "depth-bound"
    again = search(model, bfs_max_states=50, time_limit=60, seed=0, workers=1)
    assert again.path == r.path          # one seed, one counterexample


def test_swarm_walks_are_reproducible_from_their_seed():
    model = Model(make_config("current", brokers=3))
    a, b = swarm_walks(model, 7, 3000), swarm_walks(model, 7, 3000)
    assert (a.steps, a.walks, a.violation) == (b.steps, b.walks, b.violation)


def test_portfolio_finds_kip279_on_three_brokers_and_the_story_replays():
    """KIP-279's bug (a follower keeps a suffix the leader never had, when the leader's answer
    names an epoch the follower lacks) lies past any depth breadth-first search reaches on three
    brokers; the swarm's first seed finds it within a few thousand steps (the weights keep the
    protocol's kinds on), and the shrunk counterexample replays on the model as reported."""
    from checkers.model_trace import DEFAULTS_3
    model = Model(make_config("current", ("epoch-end-offset",), brokers=3, **DEFAULTS_3))
    r = search(model, bfs_max_states=200, time_limit=120, seed=0, workers=1)
    assert r.status == "violation" and r.found_by.startswith("swarm random walks")
    assert r.invariant in ("StrongIsr", "LogMatching")
    s = model.initial()
    for a, want in zip(r.path, r.states):
        assert a in model.enabled(s)
        s = model.step(s, a)
        assert s == want
    assert model.violation(s)[0] == r.invariant


def test_walk_memo_changes_no_draw():
    """The memo only remembers a pure model's answers: walks with one shared across seeds, or
    one too small to keep anything for long, are the walks without it."""
    model = Model(make_config("current", brokers=3))
    plain = [swarm_walks(model, s, 2000) for s in range(3)]
    shared = WalkMemo(model)
    tiny = WalkMemo(model, max_entries=50)
    for memo in (shared, tiny):
        got = [swarm_walks(model, s, 2000, memo=memo) for s in range(3)]
        assert [(g.steps, g.walks, g.violation) for g in got] == \
            [(p.steps, p.walks, p.violation) for p in plain]
    assert len(shared.acts) > 100 and len(tiny.acts) <= 50


def test_whole_levels_never_cuts_a_search_that_has_the_time():
    model = Model(make_config("current", records=1, crashes=1, elections=1, losses=0))
    a = explore(model, time_limit=120)
    b = explore(model, time_limit=120, whole_levels=True)
    assert a.status == b.status == "exhausted" and (a.distinct, a.depth) == (b.distinct, b.depth)


def test_fingerprint_separates_minus_one_from_minus_two_and_ignores_tuple_types():
    # Python's hash(-1) == hash(-2): a tuple hash would merge these two states.
    model = Model(make_config("current", brokers=3))
    s = model.initial()
    b = s.brokers[0]
    s1 = s._replace(brokers=(b._replace(resp=-1),) + s.brokers[1:])
    s2 = s._replace(brokers=(b._replace(resp=-2),) + s.brokers[1:])
    assert hash(s1) == hash(s2) and fingerprint(s1) != fingerprint(s2)
    plain = (tuple(tuple(x) for x in s1[0]), tuple(s1[1])) + tuple(s1[2:])
    assert fingerprint(plain) == fingerprint(s1)


def test_fingerprints_of_canonical_forms_agree_exactly_with_the_forms():
    """On random reachable states: equal canonical forms, equal fingerprints; different forms,
    different fingerprints (no collision among these)."""
    model = Model(make_config("current", brokers=3, pauses=1, unflushed_loss=True, disk_loss=True))
    rng = random.Random(3)
    forms = {}
    for _ in range(40):
        s = model.initial()
        for _ in range(40):
            acts = model.enabled(s)
            if not acts:
                break
            s = model.step(s, rng.choice(acts))
            c = canonical(s)
            forms.setdefault(fingerprint(c), set()).add(tuple(c))
    assert all(len(v) == 1 for v in forms.values())
    assert len(forms) > 500


def test_fingerprint_set_grows_and_remembers():
    fs = FingerprintSet(capacity=8)
    rng = random.Random(1)
    vals = [rng.getrandbits(64) | 1 for _ in range(5000)]
    assert all(fs.add(v) for v in vals)
    assert not any(fs.add(v) for v in vals)
    assert len(fs) == 5000 and all(v in fs for v in vals) and 2 not in fs
    assert fs.nbytes() / len(fs) <= 16
