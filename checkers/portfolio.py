"""A search portfolio that needs no tuning: breadth-first search first, swarm random walks in the
rest of the budget, whatever finds a violation shrunk to a short counterexample.

Breadth-first search (checkers/explore.py) gets a share of the time budget, in whole levels: it
stops early when the next level is predicted not to complete within its share (a level cut
short proves nothing of its depth), so the walks get that time. If it exhausts the space or
finds a violation, that is the answer (a shortest counterexample). If it is cut short,
it has still proved that no violation is shorter than the depth it completed, and swarm random
walks (TigerBeetle's VOPR; Groce et al., "Swarm testing") use the remaining time: each seed draws
its own action-kind weights — some kinds switched off entirely, faults frequent or rare — and its
own walk length, so different seeds stress different corners (a crash-heavy seed, a seed that
never loses a message, one that fetches eagerly). Walks run in rounds over the workers; the
violation from the lowest seed of the first round with one wins, so a seed and a worker count
reproduce the answer. The violating walk is shrunk (checkers/shrink_trace.py). Each walking
process remembers the model's answers (WalkMemo), so a revisited state costs a lookup.

Every choice flows from `seed`; the weights are drawn from random.Random(seed_of_walk_batch).
"""
from __future__ import annotations

import multiprocessing
import random
import time
from dataclasses import dataclass

from checkers.explore import SearchResult, explore
from spec import ACTION_KINDS, Model

BFS_SHARE = 0.3               # of the time budget, for breadth-first search (in whole levels)
ROUND_STEPS = 20_000          # steps per seed per round
WALK_LENGTHS = (25, 40, 60, 90)  # shorter ones are breadth-first search's ground
MEMO_ENTRIES = 250_000        # states, and transitions, per walking process (~0.4 GB)


@dataclass
class WalkResult:
    seed: int
    steps: int
    walks: int
    violation: tuple | None = None     # (invariant, message, actions)


# Action kinds that inject or undo a fault (the model's fault events and what follows them), as
# against the protocol's own steps; swarm_weights switches them off more often.
FAULT_KINDS = frozenset({"Crash", "Restart", "Pause", "Resume", "SessionExpire", "Reregister",
                         "Lose", "ZombieElect", "Flush", "ConsumerCrash", "ConsumerRestart",
                         "Disconnect"})
FAULT_OFF, PROTOCOL_OFF = 0.2, 0.05


def swarm_weights(rng: random.Random) -> dict[str, float]:
    """Per-seed action weights: each kind off with some probability, else 1, 3, 10 or 30. A fault
    kind is off with probability 1/5 (seeds without crashes, without lost messages, ...); a
    protocol kind only with 1/20, since most bugs need nearly all of them: with every kind off at
    1/5, fewer than one seed in ten kept the dozen protocol kinds a three-broker bug uses, and
    seeds 0-99 at 20,000 steps found neither KIP-279's nor KIP-320's bug; with 1/20, seeds 0-59
    found KIP-279's four times and KIP-320's once (BENCHMARKS.md). (A per-broker factor on
    deliveries, a slow link, was tried: it found no new bug and lost KAFKA-7164's within five
    minutes.)"""
    return {k: 0.0 if rng.random() < (FAULT_OFF if k in FAULT_KINDS else PROTOCOL_OFF)
            else rng.choice((1.0, 3.0, 10.0, 30.0)) for k in ACTION_KINDS}


class WalkMemo:
    """What walks learn about the model, kept across the walks and seeds of one process: the
    enabled actions of a state, and per transition the successor and the violation it shows.
    The model is pure, so a remembered answer is the answer (the walks draw exactly as without
    it). Random walks revisit 40-60% of their states and a lookup costs a hash of the state
    (~1.5 us) where `enabled`, `step` and the invariants cost ~60 us, yet the gain measured is
    1.12x steps per CPU-second (BENCHMARKS.md: the rest is the walk's own draws). Bounded:
    past `max_entries` remembered states or transitions, that table starts afresh."""

    def __init__(self, model: Model, check_steps: bool = True, max_entries: int = MEMO_ENTRIES):
        self.model, self.check_steps, self.max_entries = model, check_steps, max_entries
        self.acts: dict = {}
        self.succ: dict = {}

    def enabled(self, s):
        acts = self.acts.get(s)
        if acts is None:
            if len(self.acts) >= self.max_entries:
                self.acts.clear()
            acts = self.acts[s] = self.model.enabled(s)
        return acts

    def step(self, s, a):
        """(successor, violation or None)."""
        key = (s, a)
        got = self.succ.get(key)
        if got is None:
            m = self.model
            t = m.step(s, a)
            v = (m.step_violation(s, t) if self.check_steps else None) or m.violation(t)
            if len(self.succ) >= self.max_entries:
                self.succ.clear()
            got = self.succ[key] = (t, v)
        return got


def swarm_walks(model: Model, seed: int, steps: int, check_steps: bool = True,
                memo: WalkMemo | None = None) -> WalkResult:
    """Walks under one seed's weights until `steps` actions; stops at the first violation. A
    state whose enabled actions all weigh 0 falls back to uniform choice (the walk goes on).
    `memo` (for the same model and check_steps) carries what earlier seeds learnt."""
    rng = random.Random(seed)
    weights = swarm_weights(rng)
    length = rng.choice(WALK_LENGTHS)
    if memo is None:
        memo = WalkMemo(model, check_steps)
    enabled, step = memo.enabled, memo.step
    s0 = model.initial()
    done = walks = 0
    while done < steps:
        walks += 1
        s = s0
        path = []
        for _ in range(length):
            acts = enabled(s)
            if not acts:
                break
            ws = [weights[a.kind] for a in acts]
            total = sum(ws)
            if total <= 0:
                a = acts[rng.randrange(len(acts))]
            else:
                x = rng.random() * total
                k = 0
                while x >= ws[k] and k < len(ws) - 1:
                    x -= ws[k]
                    k += 1
                a = acts[k]
            s, v = step(s, a)
            done += 1
            path.append(a)
            if v:
                return WalkResult(seed, done, walks, (v[0], v[1], path))
    return WalkResult(seed, done, walks)


def _walk_worker(model, check_steps, conn) -> None:
    memo = WalkMemo(model, check_steps)
    try:
        while True:
            msg = conn.recv()
            if msg is None:
                return
            seed, steps = msg
            conn.send(swarm_walks(model, seed, steps, check_steps, memo))
    except (EOFError, KeyboardInterrupt):
        return


def swarm(model: Model, seed: int, time_limit: float, workers: int = 1, check_steps: bool = True,
          round_steps: int = ROUND_STEPS, max_rounds: int | None = None):
    """Rounds of seeded walk batches, one seed per worker per round, until a violation or the
    time limit. Returns (WalkResult with the violation or None, steps, walks, seeds tried)."""
    t0 = time.monotonic()
    W = max(1, workers)
    procs, conns = [], []
    if W > 1:
        ctx = multiprocessing.get_context("fork")
        for _ in range(W):
            a, b = ctx.Pipe()
            p = ctx.Process(target=_walk_worker, args=(model, check_steps, b), daemon=True)
            p.start()
            b.close()
            procs.append(p)
            conns.append(a)
    memo = WalkMemo(model, check_steps) if W == 1 else None
    steps = walks = seeds = 0
    rnd = 0
    try:
        while time.monotonic() - t0 < time_limit and (max_rounds is None or rnd < max_rounds):
            batch = [seed * 1_000_003 + rnd * W + w for w in range(W)]
            if W > 1:
                for c, sd in zip(conns, batch):
                    c.send((sd, round_steps))
                got = [c.recv() for c in conns]
            else:
                got = [swarm_walks(model, batch[0], round_steps, check_steps, memo)]
            rnd += 1
            seeds += len(got)
            steps += sum(g.steps for g in got)
            walks += sum(g.walks for g in got)
            hits = [g for g in got if g.violation]
            if hits:
                return min(hits, key=lambda g: g.seed), steps, walks, seeds
        return None, steps, walks, seeds
    finally:
        for c in conns:
            try:
                c.send(None)
            except OSError:
                pass
        for p in procs:
            p.join(timeout=5)
            if p.is_alive():
                p.kill()
                p.join()
        for c in conns:
            c.close()


def search(model: Model, *, time_limit: float = 300.0, max_depth: int = 100,
           max_states: int = 5_000_000, invariants: tuple[str, ...] | None = None,
           workers: int = 1, seed: int = 0, progress=None, bfs_share: float = BFS_SHARE,
           bfs_max_states: int | None = None, note=None) -> SearchResult:
    """Breadth-first search, then swarm walks in the rest of the budget (see the module note).
    `bfs_max_states` also bounds the breadth-first phase by states (a bound that, unlike time,
    does not depend on the machine: the answer is then the same on every machine that gets
    through that phase in its time share). `note(text)` is told which phase runs. The result's `found_by` says what found a violation;
    without one, the breadth-first result stands (its status says why it stopped), with the
    walks' figures in `found_by`."""
    t0 = time.monotonic()
    r = explore(model, max_depth=max_depth,
                max_states=max_states if bfs_max_states is None else min(max_states, bfs_max_states),
                time_limit=time_limit * bfs_share, invariants=invariants, progress=progress,
                workers=workers, whole_levels=True)
    if r.status not in ("time-limit", "state-bound"):
        return r            # a verdict, or the depth bound the caller set: walks would pass it
    left = time_limit - (time.monotonic() - t0)
    if left <= 1:
        return r
    wmodel = model
    if invariants is not None:
        wmodel = Model(model.config)
        wmodel.invariants = tuple(i for i in model.invariants if i.name in invariants)
    check_steps = invariants is None or "MonotonicEpochs" in invariants
    if note:
        note(f"breadth-first search stopped ({r.status}) at depth {r.depth} with no violation "
             f"that short; swarm random walks for {left:.0f}s more (seed {seed}, {workers} worker(s))")
    hit, steps, walks, seeds = swarm(wmodel, seed, left, workers, check_steps)
    if hit is None:
        r.found_by = (f"nothing: breadth-first search to depth {r.depth}, then {steps:,} "
                      f"random-walk steps in {walks:,} walks over {seeds} swarm seeds")
        r.seconds = time.monotonic() - t0
        return r
    from checkers.shrink_trace import shrink_path
    inv, msg, path = hit.violation
    before = len(path)
    spath, states, msg = shrink_path(wmodel, path, inv)
    return SearchResult("violation", r.distinct, r.transitions, len(spath), time.monotonic() - t0,
                        inv, msg, spath, states, workers=r.workers, table_bytes=r.table_bytes,
                        frontier_bytes=r.frontier_bytes,
                        found_by=(f"swarm random walks (walk seed {hit.seed}, after {steps:,} "
                                  f"steps in {seeds} seeds; walk of {before} steps shrunk to "
                                  f"{len(spath)}); breadth-first search had excluded every "
                                  f"counterexample shorter than {r.depth + 1}"))
