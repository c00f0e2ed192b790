"""Guided BMC (checkers/prove/guided.py): the lemmas Houdini proves inductive for a buggy
configuration hold on the states the explicit model reaches in it (a proved lemma false there
would be an unsound proof), and BMC guided by them finds the same shortest counterexample as
unguided BMC, replayed on spec, and nothing shorter (the guide removes only unreachable states).
"""
from __future__ import annotations

from checkers.prove.bmc import bmc
from checkers.prove.differential import bfs_states, draw_states
from checkers.prove.encoding import Encoding
from checkers.prove.guided import CANDIDATES, inductive_lemmas, lemma_guide
from checkers.prove.strengthen import STRENGTHENING
from spec import Model, make_config

# KAFKA-7128's tight bounds (checkers/prove/tight_bounds.py THREE_TIGHT)
TIGHT = {"brokers": 3, "records": 2, "crashes": 1, "elections": 1, "losses": 0}


def test_lemmas_proved_for_kafka_7128_hold_on_reachable_states():
    """`current --without isr-expand-epoch-start` at three brokers: Houdini keeps most of the
    strengthening (the ISR view, log and cache lemmas) and every lemma it keeps holds on
    breadth-first and random-walk states of that configuration."""
    model = Model(make_config("current", ("isr-expand-epoch-start",), **TIGHT))
    lem = inductive_lemmas(model, time_limit=300)
    assert lem.verdict == "proved", lem
    assert set(lem.proved) | set(lem.dropped) == set(CANDIDATES)
    assert {"TypeOk", "LogBounds", "LeaderInIsr", "LeaderIsrView", "CacheMatchesLog",
            "LogMatching"} <= set(lem.proved), lem.dropped
    enc = Encoding(model.config)
    states = bfs_states(model, 800) + draw_states(model, 7, 800, walk_length=60)
    for s in states:
        d = enc.from_state(s)
        for name in lem.proved:
            assert STRENGTHENING[name](enc, d), (name, s)


def test_guided_bmc_finds_the_same_shortest_counterexample():
    """`current --without min-isr-hw` (two brokers, the BMC-per-fix bounds): with the lemmas
    proved for it as a guide, one query over paths of at most 4 steps finds MinIsrDurability's
    violation and the path replays on spec; over at most 3 steps there is none, as unguided."""
    model = Model(make_config("current", ("min-isr-hw",), records=1, crashes=1, elections=1,
                              losses=0))
    lem = inductive_lemmas(model, time_limit=300)
    assert lem.verdict == "proved" and lem.proved, lem
    guide = lemma_guide(lem.proved)
    enc = {"invariants": ("MinIsrDurability",), "time_limit": 120, "one_query": True, "bits": 8,
           "guide": guide}
    r = bmc(model, 4, **enc)
    assert (r.status, r.invariant, r.depth, r.problem) == ("violation", "MinIsrDurability", 4, None)
    s = model.initial()
    for a, want in zip(r.actions, r.states):
        assert a in model.enabled(s)
        s = model.step(s, a)
        assert s == want
    short = bmc(model, 3, **enc)
    assert short.status == "unknown" and short.message, short
