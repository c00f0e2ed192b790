"""Consumer groups and committed offsets (placeholder until the group transitions land)."""
from __future__ import annotations

TEMPLATES: dict[str, str] = {}
STEPS: dict = {}


def initial_group(cfg):
    return ()


def enabled(cfg, s):
    return []
