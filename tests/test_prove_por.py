"""BMC's machinery for the three-replica fixes. Partial-order reduction of the unrolling
(checkers/prove/bmc.independent_pairs): the instances it calls independent commute on reachable
states, concretely, and BMC with the reduction finds the same shortest counterexamples as
without it. Replay names a delivered message by its slot, where the encoding's and spec's
versions differ."""
from __future__ import annotations

import pytest

from checkers.prove.bmc import bmc, independent_pairs
from checkers.prove.differential import draw_states
from checkers.prove.encoding import Encoding, Unsupported
from spec import Model, make_config

THREE = {"brokers": 3, "records": 2, "crashes": 1, "elections": 1, "losses": 0}


@pytest.mark.parametrize("without,bounds", [
    (("isr-expand-epoch-start",), THREE),
    (("epoch-end-offset",), {**THREE, "crashes": 2, "elections": 2, "losses": 1, "unflushed_loss": True}),
], ids=["kafka-7128-bounds", "kip-279-bounds-lossy"])
def test_independent_instances_commute_on_reachable_states(without, bounds):
    """For every pair called independent and both enabled in a drawn state: each stays enabled
    after the other, and the two orders reach the same state."""
    model = Model(make_config("current", without, **bounds))
    enc = Encoding(model.config, slots=1, epochs=3)
    pairs = independent_pairs(enc)
    assert pairs, "no independent pairs at all"
    checked = 0
    for s in draw_states(model, seed=7, count=400):
        try:
            d = enc.from_state(s)
        except Unsupported:
            continue
        on = [i for i, inst in enumerate(enc.insts) if inst.guard(d, inst)]
        en = set(on)
        for a, b in pairs:
            if a not in en or b not in en:
                continue
            ia, ib = enc.insts[a], enc.insts[b]
            da, db = enc.succ(ia, d), enc.succ(ib, d)
            assert ib.guard(da, ib) and ia.guard(db, ia), (ia.kind, ib.kind)
            assert enc.succ(ib, da) == enc.succ(ia, db), (ia.kind, ia.b, ib.kind, ib.b)
            checked += 1
    assert checked >= 500, checked


SMALL = {"records": 1, "crashes": 1, "elections": 1, "losses": 0}


@pytest.mark.parametrize("gen,without,bounds,inv,depth", [
    ("v0.10", (), SMALL, "MinIsrDurability", 2),
    ("current", ("min-isr-hw",), SMALL, "MinIsrDurability", 4),
], ids=["v0.10", "without-min-isr-hw"])
def test_bmc_with_reduction_finds_the_shortest_depth(gen, without, bounds, inv, depth):
    model = Model(make_config(gen, without, **bounds))
    r = bmc(model, depth + 2, invariants=(inv,), time_limit=60, por=True, bits=8)
    assert (r.status, r.invariant, r.depth, r.problem) == ("violation", inv, depth, None)


def test_replay_names_messages_by_slot_where_versions_are_renumbered():
    """Along KIP-279's golden path (shrunk to its StrongIsr violation at its tight bounds),
    every spec action is the action bmc's replay derives from the encoding's state, including
    deliveries whose version the encoding (growing integers) and spec (renumbered densely)
    write differently, and both reach the same states."""
    import json
    from pathlib import Path

    from checkers.prove.bmc import spec_action_at
    from checkers.prove.tight_bounds import THREE_TIGHT
    from checkers.shrink_trace import shrink_path
    from spec import Action
    from spec.model import normalize_versions as canon_versions

    fix, bounds, inv, depth, slots, epochs = next(c for c in THREE_TIGHT if c[0] == "epoch-end-offset")
    corpus = Path(__file__).resolve().parent.parent / "traces" / "corpus" / "model-kip279-divergence.jsonl"
    lines = [json.loads(x) for x in corpus.read_text().splitlines()]
    model = Model(make_config("current", (fix,), **bounds))
    path, _, _ = shrink_path(model, [Action.from_json(x["action"]) for x in lines if x["kind"] == "step"], inv)
    assert len(path) == depth
    enc = Encoding(model.config, slots=slots, epochs=epochs)
    s, d, renamed = model.initial(), enc.from_state(model.initial()), 0
    for a in path:
        insts = [i for i in enc.insts if i.guard(d, i) and spec_action_at(enc, i, d, s) == a]
        assert insts, a.describe()
        renamed += enc.spec_action(insts[0], d) != a
        d, s = enc.succ(insts[0], d), model.step(s, a)
        assert not d[("g", "oob")] and canon_versions(enc.to_state(d)) == canon_versions(s)
    assert renamed, "no delivery with a renumbered version: the case is not exercised"
