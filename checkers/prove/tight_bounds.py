"""The three-replica fixes at their tightest bounds, and each one's golden counterexample as the
encoding's instances. The fixes the explorer finds only with three replicas (KAFKA-7128,
KIP-279, KIP-320, KAFKA-7164) show their bug at these bounds; the proofs' benchmark
(benchmarks/prove.py) and the tests of partial-order reduction and of steps run there.
"""
from __future__ import annotations

import json

from checkers.golden import CORPUS
from checkers.prove.bmc import spec_action_at
from checkers.prove.encoding import Encoding
from checkers.shrink_trace import shrink_path
from spec import Action, Model, make_config

# The three-replica fixes at the tightest bounds where the explorer's counterexample exists (its
# shortest at those bounds for KAFKA-7128, breadth-first; the golden scripts' shrunk walks for
# the others): (fix, bounds, invariant, depth = that counterexample's length, the encoding's
# in-flight slots and leader epochs that path needs).
TIGHT = {"brokers": 3, "records": 2, "crashes": 1, "elections": 1, "losses": 0}
THREE_TIGHT = [
    ("isr-expand-epoch-start", TIGHT, "LeaderCandidateCompleteness", 14, 1, 2),
    ("epoch-end-offset", {**TIGHT, "crashes": 2, "elections": 2, "unflushed_loss": True}, "StrongIsr",
     19, 2, 3),
    ("fetch-epoch-fencing", {**TIGHT, "crashes": 2, "elections": 2}, "StrongIsr", 19, 2, 3),
    ("truncate-on-epoch-change", {**TIGHT, "crashes": 3, "losses": 1, "unflushed_loss": True},
     "LogMatching", 30, 1, 3),
]

# The golden counterexample of each three-replica fix (traces/corpus/), shrunk at its tight bounds.
GOLDEN = {"isr-expand-epoch-start": "model-kafka7128-isr-expansion.jsonl",
          "epoch-end-offset": "model-kip279-divergence.jsonl",
          "fetch-epoch-fencing": "model-kip320-stale-fetch.jsonl",
          "truncate-on-epoch-change": "model-kafka7164-divergence.jsonl"}


def golden_instances(fix: str):
    """(model, encoding, shrunk spec path, its instance numbers) for a three-replica fix at its
    THREE_TIGHT bounds and encoding bounds: the golden trace shrunk to its first violation of
    the fix's invariant (checkers/shrink_trace), each action matched to the encoding's
    instance that takes it."""
    _, bounds, inv, _, slots, epochs = next(c for c in THREE_TIGHT if c[0] == fix)
    model = Model(make_config("current", (fix,), **bounds))
    lines = [json.loads(x) for x in (CORPUS / GOLDEN[fix]).read_text().splitlines()]
    path, _, _ = shrink_path(model, [Action.from_json(x["action"]) for x in lines
                                     if x["kind"] == "step"], inv)
    enc = Encoding(model.config, slots=slots, epochs=epochs)
    s, d, seq = model.initial(), enc.from_state(model.initial()), []
    for a in path:
        i = next(k for k, x in enumerate(enc.insts)
                 if x.guard(d, x) and spec_action_at(enc, x, d, s) == a)
        seq.append(i)
        d, s = enc.succ(enc.insts[i], d), model.step(s, a)
    return model, enc, path, seq
