"""Guided BMC for the replication invariants: constrain every state of the unrolled path with
lemmas *proved* inductive for the configuration under test, so the solver never explores
states no run reaches, while BMC stays sound and complete at its bounds.

`inductive_lemmas` is Houdini's algorithm over candidate lemmas (by default every replication
lemma of checkers/prove/strengthen.py): prove the conjunction inductive (induction.prove with
the candidates as its strengthening); a counterexample to induction names the conjuncts it
breaks, which are dropped, and the proof is run again on the rest, until it goes through. The
survivors hold initially and are preserved by every step from any state satisfying all of
them, so they hold in every reachable state of that configuration (within the induction's
encoding bounds, the default slots and epochs, which contain BMC's smaller ones). A lemma
dropped may still be true (its CTI unreachable): the guide is then weaker, never wrong.

`lemma_guide` turns them into bmc's `guide` (kept to the end of the path: `guide_tail` 0).
Unlike strengthen_producers.guide, which under-approximates, a guide of proved lemmas removes
only unreachable states: a path BMC finds with it exists without it, and a query it makes
unsatisfiable was unsatisfiable without it.
"""
from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

from checkers.prove.induction import prove
from checkers.prove.strengthen import STRENGTHENING
from checkers.prove.strengthen_producers import PRODUCER_STRENGTHENING
from spec import Model

# Every replication lemma (the producer ones describe a quiet single broker only).
CANDIDATES = tuple(k for k in STRENGTHENING if k not in PRODUCER_STRENGTHENING)


@dataclass
class Lemmas:
    verdict: str                      # "proved": `proved` is inductive; "unknown": time limit
    proved: tuple[str, ...]
    dropped: dict[str, str] = field(default_factory=dict)   # lemma -> why (its CTI's action)
    rounds: int = 0
    seconds: float = 0.0


def inductive_lemmas(model: Model, candidates: tuple[str, ...] = CANDIDATES, *,
                     time_limit: float = 600.0) -> Lemmas:
    """The largest inductive subset of `candidates` for `model.config` (Houdini: the conjuncts
    a CTI breaks are in no inductive subset, its pre-state satisfying them all). At most one
    round per candidate plus one, each bounded by what is left of `time_limit`; when it runs
    out the verdict is unknown and `proved` means nothing."""
    t0 = time.monotonic()
    live = list(candidates)
    dropped: dict[str, str] = {}
    for rnd in range(1, len(candidates) + 2):
        left = time_limit - (time.monotonic() - t0)
        if left <= 0:
            break
        # MonotonicEpochs as the goal: the conjunction of `live` is the whole hypothesis and
        # goal (and epochs, proved with no strengthening at all, never fail)
        r = prove(model, "MonotonicEpochs", strengthening=tuple(live), time_limit=left)
        if r.verdict == "proved":
            return Lemmas("proved", tuple(live), dropped, rnd, time.monotonic() - t0)
        failing = r.failing or ""
        if failing.endswith(" fails in the initial state"):
            broken = [failing.split(" ")[0]]
        else:
            broken = [b for b in failing.split(", ") if b in live]
        if not broken:           # time limit, solver gave up, or MonotonicEpochs itself
            return Lemmas("unknown", (), dropped, rnd, time.monotonic() - t0)
        step = next((x.strip() for x in (r.cti or "").splitlines()
                     if re.match(r"\s*\d+\. ", x)), failing)
        for b in broken:
            live.remove(b)
            dropped[b] = step
    return Lemmas("unknown", (), dropped, len(candidates) + 1, time.monotonic() - t0)


def lemma_guide(names: tuple[str, ...]) -> list:
    """bmc's `guide` for proved lemmas: each kept on every state of the path."""
    return [(STRENGTHENING[n], True) for n in names]
