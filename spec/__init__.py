"""The reference model of Kafka replication: pure, immutable, hashable.

API (porcupine-style): `Model(config)` with `initial()`, `enabled(state)`, `step(state, action)`,
`invariants`, and one-line descriptions of states and actions. spec/ imports nothing else of
the project.
"""
from __future__ import annotations

import importlib.machinery as _machinery
import importlib.util as _util
import os as _os
import sys as _sys

# The model's modules may also be built by Cython from this same source (setup.py): a compiled
# module is used only when it is newer than its source (the rule Python applies to .pyc files)
# and KAFKAVERIFY_MODEL is not "interpreted"; the interpreted model stays the oracle
# (tests/test_model_compiled.py runs both and compares them). This file is never compiled.
_HERE = _os.path.dirname(_os.path.abspath(__file__))
_WANT = _os.environ.get("KAFKAVERIFY_MODEL", "compiled")
if _WANT not in ("compiled", "interpreted"):
    raise ImportError(f"KAFKAVERIFY_MODEL={_WANT!r}: expected 'compiled' or 'interpreted'")


class _ModelFinder:
    """Chooses, for each spec.<module>, its compiled extension or its Python source."""

    @staticmethod
    def find_spec(fullname, path=None, target=None):
        head, _, name = fullname.partition(".")
        if head != "spec" or not name or "." in name:
            return None
        source = _os.path.join(_HERE, name + ".py")
        if not _os.path.exists(source):
            return None
        if _WANT == "compiled":
            for suffix in _machinery.EXTENSION_SUFFIXES:
                ext = _os.path.join(_HERE, name + suffix)
                if _os.path.exists(ext) and _os.path.getmtime(ext) >= _os.path.getmtime(source):
                    return _util.spec_from_file_location(
                        fullname, ext, loader=_machinery.ExtensionFileLoader(fullname, ext))
        return _util.spec_from_file_location(
            fullname, source, loader=_machinery.SourceFileLoader(fullname, source))


if not any(getattr(f, "__name__", "") == "_ModelFinder" for f in _sys.meta_path):
    _sys.meta_path.insert(0, _ModelFinder)

from spec.config import FIXES, GENERATIONS, Config, ConfigError, make_config
from spec.invariants import INVARIANT_NAMES, INVARIANTS, Invariant, active, step_violation, violated
from spec.model import ACTION_KINDS, Action, enabled, step
from spec.state import State, describe_state, initial, summary


# "compiled" when the model's modules run as Cython extensions, else "interpreted".
BUILD = "compiled" if _sys.modules["spec.model"].__spec__.origin.endswith(tuple(_machinery.EXTENSION_SUFFIXES)) \
    else "interpreted"


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


__all__ = ["ACTION_KINDS", "BUILD", "FIXES", "GENERATIONS", "INVARIANTS", "INVARIANT_NAMES", "Action",
           "Config", "ConfigError", "Invariant", "Model", "State", "describe_state", "initial",
           "make_config", "step", "enabled", "summary"]
