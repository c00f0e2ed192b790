"""Shrinking model counterexamples found by random walks: drop actions while every remaining
action stays enabled and the same invariant is still violated (greedy, to a 1-minimal
sequence: removing any one further action, or any window of two or three, loses the
violation). Bounded: at most
`max_rounds` passes over the sequence.
"""
from __future__ import annotations

from spec import Action, Model, State


def _run(model: Model, actions: list[Action], invariant: str
         ) -> tuple[list[Action], list[State], str] | None:
    """Replays `actions`; the prefix up to the first violation of `invariant` with its sentence,
    or None if some action is not enabled or the invariant is never violated."""
    s = model.initial()
    states: list[State] = []
    for k, a in enumerate(actions):
        if a not in model.enabled(s):
            return None
        t = model.step(s, a)
        v = model.step_violation(s, t) or model.violation(t)
        s = t
        states.append(s)
        if v:
            return (actions[: k + 1], states, v[1]) if v[0] == invariant else None
    return None


def shrink_path(model: Model, actions: list[Action], invariant: str,
                max_rounds: int = 20) -> tuple[list[Action], list[State], str]:
    """The shrunk actions, the states after each, and the violation's sentence."""
    got = _run(model, actions, invariant)
    if got is None:
        raise ValueError(f"the sequence does not violate {invariant}")
    best, states, message = got
    for _ in range(max_rounds):
        improved = False
        for width in (3, 2, 1):          # windows, so a crash goes together with its restart
            i = len(best) - width
            while i >= 0:
                cand = best[:i] + best[i + width:]
                r = _run(model, cand, invariant)
                if r is not None:
                    best, states, message = r
                    improved = True
                    i = min(i, len(best) - width)
                else:
                    i -= 1
        if not improved:
            break
    return best, states, message
