"""The reference explorer: the obvious explicit-state search over the model, which the fast
explorer (checkers/explore.py over checkers/bfs.py and checkers/fingerprint.py) is tested
against (house style §7: a fast checker against a slow obvious one). Kept deliberately simple: full
canonical states in a dict, one process, no fingerprints.

Entry points:
  explore_reference(model, ...) -> SearchResult   breadth-first search with symmetry
      reduction: the same verdicts, shortest depths and distinct-state counts explore() must
      give (tests/test_model_search.py; `benchmarks.model` measures both).
  plain_bfs(model, max_depth)                      every reachable state, with no symmetry
      reduction: the check on explore()'s reduction (tests/test_model_explore.py).
  reachable(model, max_depth)                      the states plain_bfs collects, lazily with
      their depth (checkers/prove/differential.py's chained diameter).

States are deduplicated by their canonical form under broker renaming (spec/symmetry.py), so
the first violation found is at the smallest depth: a shortest counterexample. Every search is
bounded — by the model's own bounds (records, faults, elections, losses), by depth, by a state
budget and by wall time — and says which bound stopped it. Pure apart from the clock and the
optional progress callback.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

from spec import Action, Model, State
from spec.invariants import violated
from spec.symmetry import canonical


@dataclass
class SearchResult:
    status: str                      # "violation" | "exhausted" | "depth-bound" | "state-bound" | "time-limit"
    distinct: int                    # distinct canonical states seen
    transitions: int
    depth: int                       # deepest complete BFS level
    seconds: float
    invariant: str | None = None
    message: str | None = None
    path: list[Action] = field(default_factory=list)    # actions from the initial state
    states: list[State] = field(default_factory=list)   # states after each action (len == len(path))

    @property
    def states_per_second(self) -> float:
        return self.distinct / self.seconds if self.seconds > 0 else 0.0


Progress = Callable[[int, int, int, float], None]   # (depth, distinct, frontier, seconds)


def explore_reference(model: Model, *, max_depth: int = 100, max_states: int = 5_000_000,
                      time_limit: float = 600.0, invariants: tuple[str, ...] | None = None,
                      progress: Progress | None = None, progress_every: float = 2.0) -> SearchResult:
    """Breadth-first search from model.initial(). `invariants` restricts which named invariants
    are checked (None: all active ones)."""
    invs = model.invariants if invariants is None else tuple(
        i for i in model.invariants if i.name in invariants)
    def check(s: State):
        return violated(model.config, s, invs)

    check_steps = invariants is None or "MonotonicEpochs" in invariants
    t0 = time.monotonic()
    last_report = t0
    init = model.initial()
    k0 = canonical(init)
    parents: dict[State, tuple[State | None, Action | None]] = {k0: (None, None)}
    transitions = 0
    v = check(init)
    if v:
        return SearchResult("violation", 1, 0, 0, time.monotonic() - t0, v[0], v[1])
    frontier: list[tuple[State, State]] = [(init, k0)]
    raw_seen: set[State] = {init}
    depth = 0
    while frontier:
        if depth >= max_depth:
            return SearchResult("depth-bound", len(parents), transitions, depth, time.monotonic() - t0)
        nxt: list[tuple[State, State]] = []
        for s, ks in frontier:
            for a in model.enabled(s):
                t = model.step(s, a)
                transitions += 1
                if check_steps:
                    sv = model.step_violation(s, t)
                    if sv:
                        parents_path = _path(parents, ks) + [a]
                        return _violation(model, sv, parents_path, len(parents), transitions, depth, t0)
                if t in raw_seen:       # cheap exact-duplicate filter before canonicalising
                    continue
                raw_seen.add(t)
                kt = canonical(t)
                if kt in parents:
                    continue
                parents[kt] = (ks, a)
                v = check(t)
                if v:
                    return _violation(model, v, _path(parents, kt), len(parents), transitions, depth, t0)
                nxt.append((t, kt))
            now = time.monotonic()
            if now - t0 > time_limit:
                return SearchResult("time-limit", len(parents), transitions, depth, now - t0)
            if len(parents) > max_states:
                return SearchResult("state-bound", len(parents), transitions, depth, now - t0)
            if progress and now - last_report >= progress_every:
                last_report = now
                progress(depth, len(parents), len(frontier) + len(nxt), now - t0)
        frontier = nxt
        depth += 1 if nxt else 0
    return SearchResult("exhausted", len(parents), transitions, depth, time.monotonic() - t0)


def _path(parents: dict, k: State) -> list[Action]:
    out = []
    while True:
        pk, a = parents[k]
        if pk is None:
            break
        out.append(a)
        k = pk
    out.reverse()
    return out


def _violation(model: Model, v, path, distinct, transitions, depth, t0) -> SearchResult:
    # Replay the representative chain to recover concrete states for the story.
    states, s = [], model.initial()
    for a in path:
        s = model.step(s, a)
        states.append(s)
    return SearchResult("violation", distinct, transitions, depth + 1, time.monotonic() - t0,
                        v[0], v[1], path, states)


def reachable(model: Model, max_depth: int | None = None):
    """Yields (depth, state) for every state reachable in at most `max_depth` steps (all, when
    None), each once, in breadth-first discovery order: no symmetry reduction, no canonical form.
    Lazy, so a caller that stops early pays only for what it took."""
    s0 = model.initial()
    seen = {s0}
    frontier = [s0]
    yield 0, s0
    depth = 0
    while frontier and (max_depth is None or depth < max_depth):
        depth += 1
        nxt = []
        for s in frontier:
            for a in model.enabled(s):
                t = model.step(s, a)
                if t not in seen:
                    seen.add(t)
                    nxt.append(t)
                    yield depth, t
        frontier = nxt


def plain_bfs(model: Model, max_depth: int, time_limit: float = 600.0) -> set:
    """The slow obvious search: no symmetry reduction, no canonical form. The reference for
    explore()'s symmetry reduction in tests and benchmarks."""
    t0 = time.monotonic()
    seen = set()
    for _, s in reachable(model, max_depth):
        seen.add(s)
        if time.monotonic() - t0 > time_limit:
            break
    return seen
