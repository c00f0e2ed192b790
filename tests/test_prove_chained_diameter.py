"""Exhaustive BMC with chained steps to the chained diameter (checkers/prove/differential.py
chained_diameter, bmc(..., exhaustive=True, steps="chained")): the chained diameter found by an
explicit search of spec's states reaches every reachable state, in far fewer steps than the
sequential diameter; the exhaustive chained query at it proves the idempotent producer across a
leader fail-over on one broker, finds a violation where there is one (replayed on spec), and
answers unknown when the encoding's slots are too small."""
from __future__ import annotations

import pytest

from checkers.explore_reference import reachable
from checkers.prove.bmc import bmc
from checkers.prove.differential import (chained_diameter, chained_edges, chained_rank,
                                         chained_successors)
from checkers.prove.encoding import Encoding
from spec import Model, make_config
from spec.invariants import selected, violated

FAILOVER = {"producers": 1, "retries": 2, "crashes": 1, "elections": 1, "losses": 0, "min_isr": 1}
BOTH = ("ProducerSendOrder", "ProducerExactlyOnce")


def failover(k: int, **more) -> Model:
    return Model(make_config("current", (), **{**FAILOVER, "brokers": 1, "records": k,
                                               "max_in_flight": k, **more}))


@pytest.mark.parametrize("k,more,sequential,chained", [
    (1, {}, 17, 5), (2, {}, 27, 8), (1, {"unflushed_loss": True}, 18, 5)],
    ids=["1-in-flight", "2-in-flight", "unflushed-loss"])
def test_chained_diameter_reaches_every_reachable_state(k, more, sequential, chained):
    """Breadth-first by chained steps finds exactly the states spec's breadth-first search
    finds, the farthest at the chained diameter, far below the sequential diameter."""
    m = failover(k, **more)
    by_depth = {}
    for d, s in reachable(m):
        by_depth[s] = d
    assert max(by_depth.values()) == sequential
    r = chained_diameter(m)
    assert (r.diameter, r.states, sum(r.layers)) == (chained, len(by_depth), len(by_depth))
    assert r.layers[0] == 1 and all(r.layers)


def test_chained_successors_are_the_sweep_over_the_chained_order():
    """On every reachable state of the smallest fail-over, chained_successors equals the
    definition: S := {s}; for each position p of the order, S := S ∪ {p's successor of t | t
    in S, p enabled at t}; and each sequential successor is among them."""
    m = failover(1)
    enc = Encoding(m.config)
    rank = chained_rank(enc)
    edges = {s: chained_edges(m, enc, s, rank) for _, s in reachable(m)}
    positions = sorted({p for e in edges.values() for p, _ in e})
    for s, e in edges.items():
        swept = {s}
        for p in positions:
            swept |= {u for t in swept for q, u in edges[t] if q == p}
        assert chained_successors(s, edges.__getitem__) == swept
        assert {m.step(s, a) for a in m.enabled(s)} <= swept


@pytest.mark.parametrize("k,more,writes,depth", [(1, {}, 1, 5), (1, {"unflushed_loss": True}, 2, 5)],
                         ids=["1-in-flight", "unflushed-loss"])
def test_exhaustive_chained_bmc_proves_the_one_broker_failover(k, more, writes, depth):
    """Clean at the chained diameter (5, where the sequential query needs 17 and 18 steps)."""
    m = failover(k, **more)
    assert chained_diameter(m).diameter == depth
    r = bmc(m, depth, invariants=BOTH, time_limit=120, exhaustive=True, bits=16, writes=writes,
            slots=1, epochs=2, steps="chained")
    assert (r.status, r.depth) == ("clean", depth), r.message


def test_exhaustive_chained_bmc_finds_a_violation_and_replays_it():
    """Without min-isr-hw the 4-action counterexample fits in one chained step; the exhaustive
    query at depth 3 (empty steps after it) finds a violating path and spec replays it."""
    m = Model(make_config("current", ("min-isr-hw",), records=1, crashes=1, elections=1, losses=0))
    r = bmc(m, 3, invariants=("MinIsrDurability",), time_limit=120, bits=8, exhaustive=True,
            steps="chained")
    assert (r.status, r.invariant, r.problem) == ("violation", "MinIsrDurability", None)
    s = m.initial()
    for a in r.actions:
        assert a in m.enabled(s), a.describe()
        s = m.step(s, a)
    assert violated(m.config, s, selected(m.config, ("MinIsrDurability",)))[0] == "MinIsrDurability"


def test_exhaustive_chained_bmc_is_unknown_past_the_slots():
    """Two in flight need two write slots: with one, a chained path past the encoding's bounds
    is found and the answer is unknown, not clean."""
    m = failover(2)
    r = bmc(m, 8, invariants=BOTH, time_limit=120, exhaustive=True, bits=16, writes=1, slots=1,
            epochs=2, steps="chained")
    assert r.status == "unknown" and "bounds" in (r.message or ""), (r.status, r.message)
