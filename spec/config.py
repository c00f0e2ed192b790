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
    # Client-side protocol (KIP-98): the broker's per-producer sequence check and the
    # producer's sequence numbers; `--idempotence off` is this fix removed.
    "idempotent-producer": ("KIP-98 / KIP-360", "the producer numbers its batches per partition "
                                                "under a producer id and epoch; the leader refuses "
                                                "a gap (OUT_OF_ORDER_SEQUENCE_NUMBER) and answers "
                                                "a retried batch among its last 5 with the "
                                                "original offset"),
    "group-generation-fencing": ("KIP-62 / GroupCoordinator.handleCommitOffsets",
                                 "the coordinator refuses an offset commit whose generation is not "
                                 "the group's current one (ILLEGAL_GENERATION)"),
    # Transactions (KIP-98, spec/transaction.py): three later defences against late requests.
    "txn-timeout-bump": ("KAFKA-14053", "a transactional producer whose batch timed out on the "
                                        "client bumps its epoch (InitProducerId) instead of "
                                        "aborting, so the batch still in flight is fenced"),
    "txn-partition-verification": ("KIP-890 part 1", "before a producer's first transactional "
                                                     "append to a partition, the leader verifies "
                                                     "with the coordinator that the transaction "
                                                     "is ongoing, of that epoch, and holds the "
                                                     "partition"),
    "txn-epoch-bump": ("KIP-890 part 2 (transaction version 2)", "the coordinator bumps the "
                                                                 "producer epoch at the end of "
                                                                 "every transaction and writes "
                                                                 "its markers with it; a marker "
                                                                 "must carry an epoch above the "
                                                                 "open transaction's"),
}

_V010 = frozenset({"controller-epoch-fencing"})
# Kafka 0.11 brought both epoch truncation (KIP-101) and the idempotent producer (KIP-98); the
# generation fence on commits dates from the group protocol's start, but v0.10 is kept as the
# generation without the client fixes so that it shows what each prevents.
_KIP101 = _V010 | {"epoch-truncation", "idempotent-producer", "group-generation-fencing"}
# Transactions (KIP-98) also came with 0.11; their later defences ship as: KAFKA-14053's client
# epoch bump in 3.4 and KIP-890 part 1's verification in 3.6 (both in `current`), and KIP-890
# part 2 with transaction version 2 in 4.0 (`kip-966`).
_KIP279 = _KIP101 | {"epoch-end-offset"}
_KIP320 = _KIP279 | {"fetch-epoch-fencing", "truncate-on-epoch-change", "isr-expand-epoch-start"}
# Kafka 3.x as deployed today (KIP-903's broker epoch check shipped in 3.5).
_CURRENT = _KIP320 | {"maximal-isr", "min-isr-hw", "isr-broker-epoch", "txn-timeout-bump",
                      "txn-partition-verification"}
TXN_FIXES = frozenset({"txn-timeout-bump", "txn-partition-verification", "txn-epoch-bump"})
CLIENT_FIXES = frozenset({"idempotent-producer", "group-generation-fencing"}) | TXN_FIXES
# Kafka 4.x with eligible leader replicas enabled, and transaction version 2.
_KIP966 = _CURRENT | {"eligible-leader-replicas", "txn-epoch-bump"}

GENERATIONS: dict[str, frozenset[str]] = {
    "v0.10": _V010,
    "kip-101": _KIP101,
    "kip-279": _KIP279,
    "kip-320": _KIP320,
    "current": _CURRENT,
    "kip-966": _KIP966,
}


TXN_SETTINGS = ("transactions", "txn_partitions", "isolation", "txn_rounds", "txn_timeouts",
                "txn_dups", "zombies", "consume_transform_produce")


class ConfigError(ValueError):
    """An impossible configuration (unknown generation or fix, bounds out of range)."""


@dataclass(frozen=True)
class Config:
    """Everything that shapes the model's state space. Bounds are part of the config because they
    gate which actions are enabled (a bounded model, as TLC's state constraints)."""
    generation: str = "current"
    fixes: frozenset[str] = field(default_factory=lambda: GENERATIONS["current"] - CLIENT_FIXES)
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
    # Clients (spec/producer.py, spec/group.py). With producers the appends come from them (the
    # implicit client of `Produce` is off) and `records` counts each producer's records.
    producers: int = 0
    max_in_flight: int = 1    # max.in.flight.requests.per.connection
    retries: int = 0          # retry budget per batch (stands in for delivery.timeout.ms too)
    consumers: int = 0        # members of one consumer group (the replicated partition is then
                              # the group's __consumer_offsets partition)
    commit: str = "after"     # "after" processing (at least once) or "before" (at most once)
    # Transactions (spec/transaction.py): the replicated partition is then __transaction_state
    # and its acting leader the transaction coordinator; data partitions are single-replica logs.
    transactions: int = 0     # transactional.ids, one producer instance each to begin with
    txn_partitions: int = 1   # data partitions a transaction may write to
    isolation: str = "read_committed"   # the consumers' isolation.level
    txn_rounds: int = 2       # transactions per transactional.id, in all
    txn_timeouts: int = 1     # client-side batch timeouts and coordinator transaction timeouts
    txn_dups: int = 1         # marker requests the coordinator resends while the first is in flight
    zombies: int = 0          # new instances of a transactional.id (the old one keeps running)
    consume_transform_produce: bool = False  # each transaction consumes an input record and
                              # commits its offset in the transaction (AddOffsetsToTxn,
                              # TxnOffsetCommit to a __consumer_offsets log)

    @property
    def idempotence(self) -> bool:
        return "idempotent-producer" in self.fixes

    def has(self, fix: str) -> bool:
        return fix in self.fixes

    def to_json(self) -> dict:
        return {"generation": self.generation, "fixes": sorted(self.fixes), "brokers": self.brokers,
                "records": self.records, "crashes": self.crashes, "pauses": self.pauses, "elections": self.elections,
                "losses": self.losses, "min_isr": self.min_isr, "acks": self.acks,
                "unclean": self.unclean, "unflushed_loss": self.unflushed_loss,
                "disk_loss": self.disk_loss, "alter_isr": self.alter_isr,
                **self.client_json()}

    def client_json(self) -> dict:
        """Client settings, written only when clients are on (older traces stay byte-equal)."""
        out = {}
        if self.producers:
            out.update(producers=self.producers, max_in_flight=self.max_in_flight,
                       retries=self.retries)
        if self.consumers:
            out.update(consumers=self.consumers, commit=self.commit)
        if self.transactions:
            out.update({k: getattr(self, k) for k in TXN_SETTINGS})
        return out

    @staticmethod
    def from_json(d: dict) -> "Config":
        try:
            extra = {"disk_loss": d.get("disk_loss", False)}     # absent in format-1 traces
            for k in ("producers", "max_in_flight", "retries", "consumers", "commit") + TXN_SETTINGS:
                if k in d:
                    extra[k] = d[k]
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
    # A client fix governs nothing without its clients: leave it out, so that a configuration
    # without clients is exactly what it was before clients joined the model.
    if not bounds.get("producers"):
        chosen.discard("idempotent-producer")
    if not bounds.get("consumers"):
        chosen.discard("group-generation-fencing")
    if not bounds.get("transactions"):
        chosen -= TXN_FIXES
    cfg = Config(generation=generation, fixes=frozenset(chosen), **bounds)
    if not 1 <= cfg.brokers <= 5:
        raise ConfigError("brokers must be between 1 and 5")
    for name in ("records", "crashes", "pauses", "elections", "losses"):
        v = getattr(cfg, name)
        if not 0 <= v <= 30:
            raise ConfigError(f"{name} must be between 0 and 30")
    if not 1 <= cfg.min_isr <= cfg.brokers:
        raise ConfigError(f"min_isr must be between 1 and brokers ({cfg.brokers})")
    if cfg.acks not in ("all", "1", "0"):
        raise ConfigError("acks must be 'all', '1' or '0'")
    if cfg.acks == "0" and not cfg.producers:
        raise ConfigError("acks 0 needs producers (the implicit client writes with acks 1 or all)")
    if not 0 <= cfg.producers <= 3 or not 0 <= cfg.consumers <= 3:
        raise ConfigError("producers and consumers must be between 0 and 3")
    if cfg.producers and cfg.consumers:
        raise ConfigError("producers and consumers are explored separately (the replicated "
                          "partition is the data partition, or __consumer_offsets)")
    if not 1 <= cfg.max_in_flight <= 8 or not 0 <= cfg.retries <= 5:
        raise ConfigError("max_in_flight must be between 1 and 8, retries between 0 and 5")
    if cfg.commit not in ("after", "before"):
        raise ConfigError("commit must be 'after' or 'before'")
    if cfg.transactions:
        _check_transactions(cfg)
    if cfg.producers and cfg.idempotence and cfg.acks != "all":
        # KafkaProducer refuses enable.idempotence with acks other than all (ConfigException).
        raise ConfigError("idempotence needs acks all (say --idempotence off, or "
                          "--without idempotent-producer)")
    return cfg


def _check_transactions(cfg: Config) -> None:
    if not 0 <= cfg.transactions <= 2:
        raise ConfigError("transactions must be between 0 and 2")
    if cfg.producers or cfg.consumers:
        raise ConfigError("transactions are explored without --producers and --consumers (the "
                          "replicated partition is then __transaction_state)")
    if not 1 <= cfg.txn_partitions <= 3:
        raise ConfigError("txn_partitions must be between 1 and 3")
    if cfg.consume_transform_produce not in (True, False):
        raise ConfigError("consume_transform_produce must be true or false")
    if cfg.isolation not in ("read_committed", "read_uncommitted"):
        raise ConfigError("isolation must be 'read_committed' or 'read_uncommitted'")
    for name in ("txn_rounds", "txn_timeouts", "txn_dups", "zombies"):
        if not 0 <= getattr(cfg, name) <= 4:
            raise ConfigError(f"{name} must be between 0 and 4")
    if "idempotent-producer" not in GENERATIONS[cfg.generation]:
        raise ConfigError(f"generation {cfg.generation} has no transactions (KIP-98 came with kip-101)")
