"""The model column: for one producer setting, the explorer's verdict on each question
(reordering, duplication, loss) — the shortest counterexample as a story, or none within the
stated bounds, or unknown when a search bound stopped it. Verdicts depend on the setting and the
generation only, never on the client, so the audit asks once per setting.

Bounds (stated in every verdict): 2 brokers with min.insync.replicas 1 (as the real RF 3 with
min.insync.replicas 2, the ISR may lose one member and acks=all writes go on), one producer of 2 records
(so at most 2 batches are ever in flight: max.in.flight 2 and 5 are one model setting, asked once), retries capped
at 1 (one retry is what a reordering or a duplicate needs). Reordering and loss are asked under
one crash and one election, duplication under one dropped connection (a lost answer): the
smallest fault sets at which the model shows each (docs/model-checking.md).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from checkers.explore import explore
from checkers.model_trace import config_args
from kafkaverify.reports.story import story_lines
from spec import ConfigError, Model, make_config

INVARIANT = {"reorder": "ProducerSendOrder", "duplicate": "ProducerExactlyOnce", "loss": "ProducerAckedDurable"}
BASE = {"brokers": 2, "producers": 1, "records": 2, "min_isr": 1, "pauses": 0}
FAULTS = {"reorder": {"crashes": 1, "elections": 1, "losses": 0},
          "loss": {"crashes": 1, "elections": 1, "losses": 0},
          "duplicate": {"crashes": 0, "elections": 0, "losses": 1}}
MAX_RETRIES = 1
MAX_DEPTH = 60


@dataclass
class ModelVerdict:
    question: str
    status: str                  # found / none / unknown / refused
    bounds: str = ""
    invariant: str = ""
    message: str = ""
    story: list[str] = field(default_factory=list)
    steps: int = 0
    states: int = 0
    seconds: float = 0.0
    command: str = ""            # the explore command that reproduces the verdict
    why: str = ""                # refused / unknown: why

    def short(self) -> str:
        if self.status == "found":
            return f"found ({self.steps} steps)"
        if self.status == "none":
            return "none within bounds"
        return self.status

    def to_json(self) -> dict:
        return dict(self.__dict__)


def effective(s) -> tuple:
    """The setting as the model sees it at these bounds: settings with one key get one verdict
    (retries capped at MAX_RETRIES; no more than `records` batches can be in flight)."""
    return (s.acks, min(s.retries, MAX_RETRIES), min(s.max_in_flight, BASE["records"]), s.idempotence)


def _config(generation: str, s, question: str):
    without = () if s.idempotence else ("idempotent-producer",)
    acks, retries, mif, _ = effective(s)
    return make_config(generation, without, acks=acks, max_in_flight=mif, retries=retries, **BASE, **FAULTS[question])


def _bounds_text(cfg) -> str:
    return (f"brokers={cfg.brokers} min_isr={cfg.min_isr} records={cfg.records} retries={cfg.retries} "
            f"max_in_flight={cfg.max_in_flight} "
            f"crashes={cfg.crashes} elections={cfg.elections} losses={cfg.losses} depth<={MAX_DEPTH}")


def _command(cfg, invariant: str, time_limit: float) -> str:
    return (f"kafkaverify explore {config_args(cfg)} "
            f"--invariant {invariant} --bfs-only --max-depth {MAX_DEPTH} --time-limit {time_limit:g}")


def verdicts(generation: str, s, time_limit_s: float = 120.0, workers: int = 1) -> dict[str, ModelVerdict]:
    """Per question, the model's verdict for setting `s`. Questions sharing fault bounds share a
    breadth-first search: it stops at the first (shortest) violation; the question it answers
    is settled and the search runs again for the others, until none is left or the space is
    exhausted (then they are `none within bounds`). Each search is bounded by time_limit_s."""
    out: dict[str, ModelVerdict] = {}
    groups: dict[tuple, list[str]] = {}
    for q in ("reorder", "loss", "duplicate"):
        groups.setdefault(tuple(sorted(FAULTS[q].items())), []).append(q)
    for qs in groups.values():
        try:
            cfg = _config(generation, s, qs[0])
        except ConfigError as e:          # the model refuses what Kafka refuses (idempotence needs acks=all)
            for q in qs:
                out[q] = ModelVerdict(q, "refused", why=str(e))
            continue
        bounds = _bounds_text(cfg)
        model = Model(cfg)
        left = list(qs)
        while left:
            names = tuple(INVARIANT[q] for q in left)
            t0 = time.monotonic()
            r = explore(model, max_depth=MAX_DEPTH, time_limit=time_limit_s, invariants=names, workers=workers)
            secs = time.monotonic() - t0
            if r.status == "violation":
                q = next(q for q in left if INVARIANT[q] == r.invariant)
                out[q] = ModelVerdict(q, "found", bounds, r.invariant, r.message,
                                      story_lines(r.path, r.states, r.invariant, r.message), len(r.path),
                                      r.distinct, secs, _command(cfg, r.invariant, time_limit_s))
                left.remove(q)
                continue
            for q in left:
                st = "none" if r.status == "exhausted" else "unknown"
                why = "" if st == "none" else (f"the search stopped at its {r.status} ({r.distinct:,} states, "
                                               f"depth {r.depth}, {secs:.0f} s)")
                out[q] = ModelVerdict(q, st, bounds, INVARIANT[q], states=r.distinct, seconds=secs,
                                      command=_command(cfg, INVARIANT[q], time_limit_s), why=why)
            left = []
    return {q: out[q] for q in ("reorder", "duplicate", "loss")}
