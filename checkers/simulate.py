"""Seeded random-walk simulation: reaches far deeper than breadth-first search for the same
model, at the price of completeness. Every choice flows from one seed (random.Random(seed));
enabled actions are generated in a fixed order, so a seed reproduces a run exactly.
"""
from __future__ import annotations

import random
import time
from dataclasses import dataclass, field

from spec import Action, Model, State


@dataclass
class SimResult:
    status: str                  # "violation" | "ok" | "time-limit"
    steps: int                   # steps taken in all walks
    walks: int
    seconds: float
    invariant: str | None = None
    message: str | None = None
    path: list[Action] = field(default_factory=list)      # the violating walk
    states: list[State] = field(default_factory=list)


def simulate(model: Model, seed: int, steps: int, *, walk_length: int = 200,
             time_limit: float = 600.0) -> SimResult:
    """Random walks of at most `walk_length` actions from the initial state, `steps` in all.
    A walk restarts when it reaches a state with nothing enabled."""
    rng = random.Random(seed)
    t0 = time.monotonic()
    done = walks = 0
    while done < steps:
        walks += 1
        s = model.initial()
        path: list[Action] = []
        states: list[State] = []
        for _ in range(walk_length):
            if done >= steps:
                break
            acts = model.enabled(s)
            if not acts:
                break
            a = acts[rng.randrange(len(acts))]
            t = model.step(s, a)
            done += 1
            path.append(a)
            states.append(t)
            v = model.step_violation(s, t) or model.violation(t)
            s = t
            if v:
                return SimResult("violation", done, walks, time.monotonic() - t0, v[0], v[1], path, states)
        if time.monotonic() - t0 > time_limit:
            return SimResult("time-limit", done, walks, time.monotonic() - t0)
    return SimResult("ok", done, walks, time.monotonic() - t0)
