"""The reference model of Kafka replication: pure, immutable, hashable.

API (porcupine-style): `Model(config)` with `initial()`, `enabled(state)`, `step(state, action)`,
`invariants`, and one-line descriptions of states and actions. spec/ imports nothing else of
the project.
"""
from __future__ import annotations

from spec.config import FIXES, GENERATIONS, Config, ConfigError, make_config
from spec.invariants import INVARIANT_NAMES, INVARIANTS, Invariant, active, step_violation, violated
from spec.model import ACTION_KINDS, Action, enabled, step
from spec.state import State, describe_state, initial, summary


class Model:
    """The model bound to one configuration."""

    def __init__(self, config: Config):
        self.config = config
        self.invariants = active(config)

    def initial(self) -> State:
        return initial(self.config)

    def enabled(self, s: State) -> list[Action]:
        return enabled(self.config, s)

    def step(self, s: State, a: Action) -> State:
        return step(self.config, s, a)

    def violation(self, s: State) -> tuple[str, str] | None:
        return violated(self.config, s, self.invariants)

    def step_violation(self, s: State, t: State) -> tuple[str, str] | None:
        return step_violation(self.config, s, t)


__all__ = ["ACTION_KINDS", "FIXES", "GENERATIONS", "INVARIANTS", "INVARIANT_NAMES", "Action",
           "Config", "ConfigError", "Invariant", "Model", "State", "describe_state", "initial",
           "make_config", "step", "enabled", "summary"]
