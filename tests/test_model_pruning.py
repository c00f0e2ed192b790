"""The search's pruning of no-op fetches (spec/model.py `_fetch_is_noop`) against the transition
function it shortcuts: every fetch it leaves out really changes nothing, and a search with the
pruning reaches the same states, up to in-flight fetch responses, with the same verdict, as one
without it. Exhaustive at small bounds, plain breadth-first search (no symmetry reduction)."""
from __future__ import annotations

import pytest

from spec import Action, initial, make_config, step
from spec.invariants import violated
from spec.model import enabled

# Three brokers: a follower other than b1 is where a wrong ISR-membership test would prune a fetch
# that rejoins the ISR; two brokers with a crash, an election and a lost message: responses that
# arrive after the follower's leader or log changed. min ISR 1 so followers leave and rejoin the ISR.
CONFIGS = [
    dict(brokers=3, records=1, crashes=0, elections=0, losses=0, min_isr=1),
    dict(brokers=2, records=1, crashes=1, elections=1, losses=1, min_isr=1),
]
MAX_STATES = 50_000   # both configs stay far below it; hitting it fails the test, not truncates it


def _reachable(cfg, prune: bool) -> set:
    s0 = initial(cfg)
    seen, frontier = {s0}, [s0]
    while frontier:
        nxt = []
        for s in frontier:
            for a in enabled(cfg, s, prune_noop_fetches=prune):
                t = step(cfg, s, a)
                if t not in seen:
                    seen.add(t)
                    nxt.append(t)
        assert len(seen) <= MAX_STATES, "bounds too large for an exhaustive comparison"
        frontier = nxt
    return seen


def _without_fetches(s):
    return s._replace(brokers=tuple(b._replace(fetch=()) for b in s.brokers))


@pytest.fixture(scope="module", params=CONFIGS, ids=lambda kw: f"{kw['brokers']}brokers")
def spaces(request):
    cfg = make_config("current", **request.param)
    return cfg, _reachable(cfg, True), _reachable(cfg, False)


def test_every_pruned_fetch_changes_nothing(spaces):
    cfg, _, full = spaces
    pruned_seen = 0
    for s in full:
        kept = set(enabled(cfg, s))
        for a in enabled(cfg, s, prune_noop_fetches=False):
            if a in kept:
                continue
            assert a.kind == "FetchRequest", f"the pruning dropped {a.describe()}"
            pruned_seen += 1
            t = step(cfg, s, a)
            # the request moves nothing at the leader (no position, no ISR proposal) ...
            assert _without_fetches(t) == _without_fetches(s), f"{a.describe()} is not a no-op"
            # ... and its response, delivered at once, hands back the state it started from
            assert step(cfg, t, Action("FetchResponse", a.b)) == s, f"{a.describe()}'s response moves state"
    assert pruned_seen, "no fetch was pruned: the test would examine nothing"


def test_pruning_reaches_the_same_states_and_verdict(spaces):
    cfg, pruned, full = spaces
    assert pruned < full      # the pruning removes states (in-flight no-op responses) ...
    assert {_without_fetches(s) for s in pruned} == {_without_fetches(s) for s in full}  # ... only those
    # the current generation is clean at these bounds, with the pruning and without it
    assert not any(violated(cfg, s) for s in pruned)
    assert not any(violated(cfg, s) for s in full)
