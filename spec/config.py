"""Protocol generations as sets of named fixes, and the model's configuration.

A generation is a cumulative set of fixes; each fix is one rule that lives in one function of
spec/rules.py. `--without FIX` removes one fix from a generation.
"""
from __future__ import annotations

from dataclasses import dataclass, field

# fix name -> (motivating KIP / JIRA, one-line rule)
FIXES: dict[str, tuple[str, str]] = {
    "controller-epoch-fencing": ("KAFKA-1120 / ZK-mode controller epoch",
                                 "brokers reject control requests from an older controller epoch"),
    "epoch-truncation": ("KIP-101", "followers truncate to the leader's end offset for their last "
                                    "epoch, not to their own high watermark"),
    "epoch-end-offset": ("KIP-279", "the leader answers with the largest epoch <= the requested one "
                                    "and its end offset; the follower walks back its own epochs"),
    "truncate-on-epoch-change": ("KAFKA-7164", "a follower truncates on every leader-epoch change, "
                                               "not only on a change of leader"),
    "fetch-epoch-fencing": ("KIP-320", "Fetch and OffsetsForLeaderEpoch carry the follower's leader "
                                       "epoch; the leader refuses requests of another epoch"),
    "isr-expand-epoch-start": ("KAFKA-7128", "a follower rejoins the ISR only once it reached the "
                                             "start offset of the leader's current epoch"),
    "maximal-isr": ("KIP-497", "while an ISR change is pending the leader counts the union of old "
                               "and proposed ISR for the high watermark"),
    "min-isr-hw": ("KAFKA-15583", "the high watermark does not advance while the ISR is smaller "
                                  "than min.insync.replicas"),
    "isr-broker-epoch": ("KIP-903 / KAFKA-14139", "an ISR expansion carries the broker epoch the "
                                                  "follower fetched with; the controller refuses a "
                                                  "replica that registered anew since (e.g. with an "
                                                  "empty disk)"),
    "eligible-leader-replicas": ("KIP-966", "replicas leaving the ISR while it is below "
                                            "min.insync.replicas stay eligible leaders (ELR) until "
                                            "an unclean shutdown; the ISR may empty, and a leader "
                                            "comes from the ISR, then the ELR, then the last known "
                                            "ELR"),
}

_V010 = frozenset({"controller-epoch-fencing"})
_KIP101 = _V010 | {"epoch-truncation"}
_KIP279 = _KIP101 | {"epoch-end-offset"}
_KIP320 = _KIP279 | {"fetch-epoch-fencing", "truncate-on-epoch-change", "isr-expand-epoch-start"}
# Kafka 3.x as deployed today (KIP-903's broker epoch check shipped in 3.5).
_CURRENT = _KIP320 | {"maximal-isr", "min-isr-hw", "isr-broker-epoch"}
# Kafka 4.x with eligible leader replicas enabled.
_KIP966 = _CURRENT | {"eligible-leader-replicas"}

GENERATIONS: dict[str, frozenset[str]] = {
    "v0.10": _V010,
    "kip-101": _KIP101,
    "kip-279": _KIP279,
    "kip-320": _KIP320,
    "current": _CURRENT,
    "kip-966": _KIP966,
}


class ConfigError(ValueError):
    """An impossible configuration (unknown generation or fix, bounds out of range)."""


@dataclass(frozen=True)
class Config:
    """Everything that shapes the model's state space. Bounds are part of the config because they
    gate which actions are enabled (a bounded model, as TLC's state constraints)."""
    generation: str = "current"
    fixes: frozenset[str] = field(default_factory=lambda: GENERATIONS["current"])
    brokers: int = 2
    records: int = 2          # client appends, in all
    crashes: int = 2          # crashes, in all
    pauses: int = 0           # pauses long enough for the coordination session to expire
    elections: int = 2        # leader elections by a controller (leader-epoch bumps that move leadership)
    losses: int = 1           # lost control messages
    min_isr: int = 2          # min.insync.replicas
    acks: str = "all"         # "all" or "1"
    unclean: bool = False     # unclean.leader.election.enable
    unflushed_loss: bool = False  # crashes may lose the unflushed log suffix (power failure)
    disk_loss: bool = False   # a crash may lose the whole disk: the broker returns empty (KIP-903)
    # ISR changes go to the controller asynchronously (AlterIsr, Kafka 2.7+, where KIP-497's
    # maximal ISR belongs); older generations write them to the coordination store themselves,
    # synchronously, with compare-and-set.
    alter_isr: bool = True

    def has(self, fix: str) -> bool:
        return fix in self.fixes

    def to_json(self) -> dict:
        return {"generation": self.generation, "fixes": sorted(self.fixes), "brokers": self.brokers,
                "records": self.records, "crashes": self.crashes, "pauses": self.pauses, "elections": self.elections,
                "losses": self.losses, "min_isr": self.min_isr, "acks": self.acks,
                "unclean": self.unclean, "unflushed_loss": self.unflushed_loss,
                "disk_loss": self.disk_loss, "alter_isr": self.alter_isr}

    @staticmethod
    def from_json(d: dict) -> "Config":
        try:
            extra = {"disk_loss": d.get("disk_loss", False)}     # absent in format-1 traces
            return make_config(d["generation"], fixes=frozenset(d["fixes"]), **extra,
                               **{k: d[k] for k in ("brokers", "records", "crashes", "pauses", "elections",
                                                    "losses", "min_isr", "acks", "unclean",
                                                    "unflushed_loss", "alter_isr")})
        except KeyError as e:
            raise ConfigError(f"config lacks field {e.args[0]!r}") from None


def make_config(generation: str = "current", without: tuple[str, ...] = (), *,
                fixes: frozenset[str] | None = None, **bounds) -> Config:
    if generation not in GENERATIONS:
        raise ConfigError(f"unknown generation {generation!r} (one of {', '.join(GENERATIONS)})")
    chosen = set(GENERATIONS[generation] if fixes is None else fixes)
    for f in list(chosen) + list(without):
        if f not in FIXES:
            raise ConfigError(f"unknown fix {f!r} (one of {', '.join(sorted(FIXES))})")
    for f in without:
        if f not in chosen:
            raise ConfigError(f"generation {generation} has no fix {f!r} to remove "
                              f"(it has: {', '.join(sorted(chosen)) or 'none'})")
        chosen.discard(f)
    bounds.setdefault("alter_isr", generation in ("current", "kip-966"))
    cfg = Config(generation=generation, fixes=frozenset(chosen), **bounds)
    if not 1 <= cfg.brokers <= 5:
        raise ConfigError("brokers must be between 1 and 5")
    for name in ("records", "crashes", "pauses", "elections", "losses"):
        v = getattr(cfg, name)
        if not 0 <= v <= 30:
            raise ConfigError(f"{name} must be between 0 and 30")
    if not 1 <= cfg.min_isr <= cfg.brokers:
        raise ConfigError(f"min_isr must be between 1 and brokers ({cfg.brokers})")
    if cfg.acks not in ("all", "1"):
        raise ConfigError("acks must be 'all' or '1'")
    return cfg
