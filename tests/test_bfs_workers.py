"""The sharded breadth-first search (checkers/bfs.py) on one worker and on several: the same
distinct states and depth, the same shortest counterexample length, the same counterexample on
every run; the balancing plan that moves frontier chunks between shards."""
import pytest

import checkers.bfs as bfs
from checkers.bfs import balance_plan
from checkers.explore import explore
from spec import Model, make_config


@pytest.fixture
def small_chunks(monkeypatch):
    """Chunks of a few states, so every level is cut into many and balanced across shards (the
    worker processes are forked: they see the patched module)."""
    monkeypatch.setattr(bfs, "MIN_CHUNK", 3)
    monkeypatch.setattr(bfs, "CHUNK", 7)


def test_one_and_two_workers_reach_the_same_states(small_chunks):
    model = Model(make_config("current", records=1, crashes=1, elections=1, losses=0))
    one = explore(model, time_limit=120, workers=1)
    two = explore(model, time_limit=120, workers=2)
    three = explore(model, time_limit=120, workers=3)
    assert one.status == two.status == three.status == "exhausted"
    assert one.distinct > 1000
    assert (two.distinct, two.depth, two.transitions) == (one.distinct, one.depth, one.transitions)
    assert (three.distinct, three.depth) == (one.distinct, one.depth)


def test_one_and_two_workers_give_the_same_shortest_counterexample_length(small_chunks):
    model = Model(make_config("current", ("min-isr-hw",)))
    one = explore(model, time_limit=120, workers=1)
    twos = [explore(model, time_limit=120, workers=2) for _ in range(2)]
    assert one.status == "violation" and one.invariant == "MinIsrDurability"
    for two in twos:
        assert (two.status, two.invariant, len(two.path)) == ("violation", one.invariant, len(one.path))
        assert model.violation(two.states[-1]) is not None
    # one worker count, one counterexample
    assert twos[0].path == twos[1].path


def test_balance_plan_evens_the_shards_and_is_deterministic():
    sizes = [[5, 5, 5, 5, 3], [], [4]]
    plan = balance_plan(sizes)
    assert plan == balance_plan(sizes)
    load = [sum(z) for z in sizes]
    left = [list(z) for z in sizes]
    for a, b, k in plan:
        moved = left[a][len(left[a]) - k:]
        del left[a][len(left[a]) - k:]
        left[b].extend(moved)
    after = [sum(z) for z in left]
    assert sum(after) == sum(load)
    assert max(after) - min(after) <= 5 < max(load) - min(load)


def test_balance_plan_moves_nothing_that_would_not_narrow_the_gap():
    assert balance_plan([[10], [2]]) == []          # moving the 10 would widen the gap to 12
    assert balance_plan([[4, 4], [4, 4]]) == []
    assert balance_plan([[1, 1, 1, 1], []]) == [(0, 1, 2)]


@pytest.mark.parametrize("fix,invariant,steps", [
    ("maximal-isr", "ReplicationQuorumSuperset", 5),
    pytest.param("min-isr-hw", "MinIsrDurability", 7, marks=pytest.mark.slow),
])
def test_three_broker_bugs_within_reach_are_found_by_breadth_first_search_shortest_first(fix, invariant, steps):
    """At the three-broker bounds of `kafkaverify explore --brokers 3`, the bugs whose
    counterexamples lie within the depth breadth-first search reaches are its own finds: the
    shortest, on one worker and on two alike, and no shorter one exists (the previous explorer
    agrees)."""
    from checkers.explore_reference import explore_reference
    from checkers.model_trace import DEFAULTS_3
    model = Model(make_config("current", (fix,), brokers=3, **DEFAULTS_3))
    ref = explore_reference(model, time_limit=300, max_depth=steps)
    assert (ref.status, ref.invariant, len(ref.path)) == ("violation", invariant, steps)
    for w in (1, 2):
        r = explore(model, time_limit=300, workers=w)
        assert (r.status, r.invariant, len(r.path), r.depth) == ("violation", invariant, steps, steps)
        assert model.violation(r.states[-1]) is not None
