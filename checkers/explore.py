"""Explicit-state model checker: breadth-first search over the reference model.

States are deduplicated by the 64-bit fingerprint of their canonical form under broker renaming
(spec/symmetry.py, checkers/fingerprint.py); only fingerprints and compact parent links are
kept (checkers/bfs.py), on one core or on several hash-sharded worker processes. Levels are
synchronous, so the first violation found is at the smallest depth: a shortest counterexample,
rebuilt from the parent links and replayed from the initial state. Every search is bounded — by
the model's own bounds (records, faults, elections, losses), by depth, by a state budget and by
wall time — and says which bound stopped it. Pure apart from the clock, the worker processes and
the optional progress callback.

The reference explorer it is tested against (full canonical states in a dict, and a plain
search with no symmetry reduction) is checkers/explore_reference.py.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Callable

from checkers.bfs import ROUND_CHUNKS, LocalShards, ProcessShards, balance_plan
from checkers.quiet_gc import quiet_gc
from spec import Action, Model, State
from spec.invariants import selected


@dataclass
class SearchResult:
    status: str                      # "violation" | "exhausted" | "depth-bound" | "state-bound" | "time-limit"
    distinct: int                    # distinct canonical states seen
    transitions: int
    depth: int                       # deepest complete BFS level (for a violation: its length)
    seconds: float
    invariant: str | None = None
    message: str | None = None
    path: list[Action] = field(default_factory=list)    # actions from the initial state
    states: list[State] = field(default_factory=list)   # states after each action (len == len(path))
    workers: int = 1
    table_bytes: int = 0             # fingerprint tables and parent links, all shards
    frontier_bytes: int = 0          # largest pickled frontier seen
    found_by: str = "breadth-first search"

    @property
    def states_per_second(self) -> float:
        return self.distinct / self.seconds if self.seconds > 0 else 0.0


Progress = Callable[[int, int, int, float], None]   # (depth, distinct, frontier, seconds)


def default_workers() -> int:
    """Both cores when there are two or more (a search with few states pays ~0.1 s to fork)."""
    return max(1, min(2, os.cpu_count() or 1))


def explore(model: Model, *, max_depth: int = 100, max_states: int = 5_000_000,
            time_limit: float = 600.0, invariants: tuple[str, ...] | None = None,
            progress: Progress | None = None, progress_every: float = 2.0,
            workers: int = 1, whole_levels: bool = False) -> SearchResult:
    """Breadth-first search from model.initial(). `invariants` restricts which named invariants
    are checked (None: all active ones; a client invariant named explicitly is checked even
    where the settings do not promise it). `workers` > 1 forks that many shard processes.

    `whole_levels`: stop (status "time-limit") at the end of a level when the next one is
    predicted not to complete within the time limit — its time is the last level's scaled by
    the frontier's growth — rather than spend the rest of the time on a level that a cut would
    leave incomplete (an incomplete level excludes no counterexample of its depth). For a
    caller with a better use for the time (checkers/portfolio.py)."""
    invs = model.invariants if invariants is None else selected(model.config, invariants)
    check_steps = invariants is None or "MonotonicEpochs" in invariants
    t0 = time.monotonic()
    deadline = t0 + time_limit
    W = max(1, workers)
    # No cyclic collection during the search (states are immutable tuples, never a cycle); the
    # shard processes fork from here and keep it off.
    with quiet_gc():
        shards = LocalShards(model, invs, check_steps) if W == 1 else ProcessShards(model, invs, check_steps, W)
        try:
            return _search(model, shards, W, max_depth, max_states, deadline, t0, progress, progress_every,
                           whole_levels)
        finally:
            shards.close()


def _search(model, shards, W, max_depth, max_states, deadline, t0, progress, progress_every,
            whole_levels=False):
    from checkers.fingerprint import fingerprint
    from spec.symmetry import canonical
    init = model.initial()
    owner = fingerprint(canonical(init)) % W
    distinct, transitions, depth, frontier_peak = 1, 0, 0, 0
    v = shards.call(owner, "seed", init)

    def result(status, **kw):
        nbytes = sum(shards.call_all("nbytes", [None] * W))
        return SearchResult(status, distinct, transitions, kw.pop("depth", depth),
                            time.monotonic() - t0, workers=W, table_bytes=nbytes,
                            frontier_bytes=frontier_peak, **kw)

    if v:
        return result("violation", invariant=v[2], message=v[3], depth=0)
    frontier = rounds = 1
    last = level_start = t0
    cap = max_states // W + 1
    while frontier:
        if depth >= max_depth:
            return result("depth-bound")
        for k in range(rounds):     # rounds of the level (one with one worker)
            reps = shards.call_all("expand", [(deadline, cap, k, rounds)] * W)
            transitions += sum(r.transitions for r, _ in reps)
            distinct += sum(r.new for r, _ in reps)
            viols = [r.violation for r, _ in reps if r.violation]
            stopped = [r.stopped for r, _ in reps if r.stopped]
            if not viols and not stopped and W > 1:
                inboxes = [[boxes[w] for _, boxes in reps] for w in range(W)]
                answers = shards.call_all("judge", inboxes)
                admitted = shards.call_all("admit", [[answers[o][w] for o in range(W)] for w in range(W)])
                distinct += sum(r.new for r in admitted)
                viols = [r.violation for r in admitted if r.violation]
            if viols:
                gid, j, inv, msg, _ = min(viols, key=lambda x: (x[0], x[1]))
                path = _path(model, shards, W, gid, j)
                return _violation(model, path, inv, msg, result)
            if stopped:
                return result("time-limit" if "time-limit" in stopped else "state-bound")
        fins = shards.call_all("finish", [None] * W)
        before, frontier = frontier, sum(sum(z) for z, _ in fins)
        frontier_peak = max(frontier_peak, sum(b for _, b in fins))
        for a, b, k in balance_plan([z for z, _ in fins]) if W > 1 else ():
            shards.call(b, "give", shards.call(a, "take", k))
        rounds = 1 if W == 1 else max(1, -(-sum(len(z) for z, _ in fins) // (W * ROUND_CHUNKS)))
        if distinct > max_states:
            return result("state-bound", depth=depth + (1 if frontier else 0))
        now = time.monotonic()
        if frontier:
            depth += 1
        if progress and now - last >= progress_every:
            last = now
            progress(depth, distinct, frontier, now - t0)
        if whole_levels and frontier and now + (now - level_start) * frontier / before > deadline:
            return result("time-limit")
        level_start = now
    return result("exhausted")


def _path(model, shards, W, gid: int, j: int) -> list[int]:
    """Action indices from the initial state: the parent chain of gid, then action j (a step
    violation: the transition itself) if j >= 0."""
    idx = [j] if j >= 0 else []
    while True:
        pgid, a = shards.call(gid % W, "parent", gid)
        if pgid < 0:
            break
        idx.append(a)
        gid = pgid
    idx.reverse()
    return idx


def _violation(model, idx, inv, msg, result) -> SearchResult:
    states, path, s = [], [], model.initial()
    for j in idx:
        a = model.enabled(s)[j]
        s = model.step(s, a)
        path.append(a)
        states.append(s)
    return result("violation", invariant=inv, message=msg, path=path, states=states,
                  depth=len(path))
