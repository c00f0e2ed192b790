"""Which stages of `kafkaverify check` run under which budget: one declarative row per stage.

A row gives the stage's fix family (the fix, or group of fixes, whose bug it shows), its cost
(seconds of one core on a quiet machine; stages measured under load are scaled by the same run's
slowdown of a reference stage, see docs/benchmarks/ci.md) and the budgets it belongs to. `full` (the default) runs every stage; `quick` is the pull-request budget: it must fit in
QUICK_LIMIT_S and keep at least one stage of every family (tests/test_ci_report.py checks both
against this table).

To add a stage: add it to kafkaverify/suite/stages.py `stages()` as before, then one row here. A stage
without a row still runs under `full` (family "unclassified"), and the test above fails until
the row is written, so no stage goes unbudgeted silently.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from kafkaverify import exitcodes
from kafkaverify.suite.stages import stages

BUDGETS = ("quick", "full")
QUICK_LIMIT_S = 120.0
Q, F = frozenset({"quick", "full"}), frozenset({"full"})


@dataclass(frozen=True)
class Row:
    family: str
    cost_s: float          # measured wall seconds, 2 cores, machine shared (BENCHMARKS.md)
    budgets: frozenset


# name (as in suite.stages())                                  family              cost   budgets
TABLE: dict[str, Row] = {
    "current exhausted":                                         Row("all-fixes",        84.0, F),
    "current exhausted, one crash":                              Row("all-fixes",         1.9, Q),
    "golden model-kafka7128-isr-expansion.jsonl":                Row("kafka-7128",        0.2, Q),
    "golden model-kafka7164-divergence.jsonl":                   Row("kafka-7164",        0.2, Q),
    "golden model-kafka7164-same-leader-divergence.jsonl":       Row("kafka-7164",        0.2, Q),
    "golden model-kip101-s1-data-loss.jsonl":                    Row("kip-101",           0.2, Q),
    "golden model-kip101-s2-divergence.jsonl":                   Row("kip-101",           0.2, Q),
    "golden model-kip279-divergence.jsonl":                      Row("kip-279",           0.2, Q),
    "golden model-kip320-stale-fetch.jsonl":                     Row("kip-320",           0.2, Q),
    "golden model-kip903-empty-disk-joins-isr.jsonl":            Row("kip-903",           0.2, Q),
    "golden model-kip966-last-replica-standing.jsonl":           Row("kip-966",           0.2, Q),
    "golden model-group-fenced-commit.jsonl":                    Row("group-generation-fencing", 0.2, Q),
    "golden model-group-offset-regression-v010.jsonl":           Row("kip-101",           0.2, Q),
    "golden model-producer-duplicate.jsonl":                     Row("idempotent-producer", 0.2, Q),
    "golden model-producer-reorder.jsonl":                       Row("idempotent-producer", 0.2, Q),
    "producer reorder without idempotence (retries, 2 in flight)": Row("idempotent-producer", 0.8, Q),
    "producer duplicate without idempotence (retries)":          Row("idempotent-producer", 0.1, Q),
    "idempotent producer with max.in.flight 6 (beyond the 5-batch cache)": Row("idempotent-producer", 0.2, Q),
    "without group-generation-fencing":                          Row("group-generation-fencing", 0.1, Q),
    "v0.10 __consumer_offsets: committed offset regression across coordinator fail-over": Row("kip-101", 8.2, F),
    "idempotent producer clean across a leader move (max.in.flight 2)": Row("idempotent-producer", 13.6, F),
    "idempotent producer clean across connection drops (max.in.flight 5)": Row("idempotent-producer", 0.1, Q),
    "consumer group clean with generation fencing":              Row("group-generation-fencing", 0.9, Q),
    "consumer group clean across a coordinator fail-over":       Row("group-generation-fencing", 1.3, Q),
    "golden histories":                                          Row("history-checkers",  1.0, Q),
    "mining":                                                    Row("history-checkers", 10.0, F),
    "z3 prove":                                                  Row("kafka-15583",       9.4, F),   # its tooth: BMC without min-isr-hw; StrongIsr for current and kip-966 (2.1 -> 9.4 s quiet, 24 Nov)
    "nemesis":                                                   Row("kip-101",          40.0, F),   # its tooth: a broker without epoch-truncation
    "v0.10 KIP-101 data loss":                                   Row("kip-101",           3.4, Q),
    "v0.10 KIP-101 divergence":                                  Row("kip-101",           2.5, Q),
    "without controller-epoch-fencing":                          Row("controller-fencing", 0.1, Q),
    "without epoch-truncation":                                  Row("kip-101",           0.6, Q),
    "without maximal-isr":                                       Row("kip-497",           0.1, Q),
    "without min-isr-hw":                                        Row("kafka-15583",       0.1, Q),
    "kip-966 without isr-broker-epoch (one disk loss)":          Row("kip-903",           0.3, Q),
    "kip-966 without eligible-leader-replicas (one power failure)": Row("kip-966",        0.4, Q),
    "kip-966 clean with one power failure":                      Row("kip-966",          25.0, F),
    "kip-966 clean with one disk loss":                          Row("kip-903",           5.0, Q),
    # every fix on where its bug shows (under load, scaled by 3.2: docs/benchmarks/model.md, clean stages)
    "clean: controller-epoch-fencing (one pause)":               Row("controller-fencing", 11.1, F),
    "clean: epoch-truncation and min-isr-hw (default bounds)":   Row("kip-101",           9.3, F),
    "clean: maximal-isr (min ISR 1)":                            Row("kip-497",           2.9, F),
    "clean: epoch-end-offset and truncate-on-epoch-change (random walks)": Row("kip-279", 10.8, F),
    "clean: isr-expand-epoch-start (KAFKA-7128 schedule)":       Row("kafka-7128",        0.1, Q),
    "clean: fetch-epoch-fencing (KIP-320 schedule)":             Row("kip-320",           0.1, Q),
    "without epoch-end-offset (random walks)":                   Row("kip-279",          21.0, F),
    "without truncate-on-epoch-change (random walks)":           Row("kafka-7164",       49.0, F),
    "without fetch-epoch-fencing (swarm walks, three brokers)":  Row("kip-320",          15.0, F),
    "without isr-expand-epoch-start (swarm walks, three brokers)": Row("kafka-7128",      2.0, F),
    "clean: fetch-epoch-fencing and isr-expand-epoch-start (swarm walks, three brokers)": Row("kip-320", 35.0, F),
    # transactions (spec/transaction.py)
    "golden model-txn-late-marker.jsonl":                        Row("kip-890",           0.2, Q),
    "golden model-txn-late-produce-joins-next.jsonl":            Row("kafka-14053",       0.2, Q),
    "golden model-txn-hanging.jsonl":                            Row("kip-890",           0.2, Q),
    "kip-966 transactions without txn-epoch-bump (a resent marker arrives late)": Row("kip-890", 0.1, Q),
    "current transactions without txn-timeout-bump (a timed-out batch joins the next transaction)": Row("kafka-14053", 0.1, Q),
    "current transactions without txn-partition-verification and txn-timeout-bump (hanging)": Row("kip-890", 0.1, Q),
    "clean: txn-epoch-bump, txn-partition-verification and txn-timeout-bump (two partitions, a zombie)": Row("kip-890", 24.0, F),
    "current consume-transform-produce without txn-timeout-bump (an input processed twice)": Row("kafka-14053", 0.1, Q),
    "clean: txn-epoch-bump across a transaction coordinator fail-over (two brokers, one transaction)": Row("kip-890", 26.0, F),
    # the broker's arranged conformance scenarios on real brokers (kafkaverify/suite/broker_stages.py);
    # wall seconds measured at load 2 on 28 Nov 2026 (one three-broker cluster each, mostly waiting)
    "real brokers without truncate-on-epoch-change (follower-drop)":   Row("kafka-7164",        5.0, F),
    "real brokers without fetch-epoch-fencing (follower-drop)":        Row("kip-320",           5.0, Q),
    "real brokers without min-isr-hw (min-isr-shrink)":                Row("kafka-15583",       3.5, Q),
    "real brokers without epoch-truncation (min-isr-rejoin)":          Row("kip-101",           3.0, F),
    "real brokers without isr-expand-epoch-start (min-isr-rejoin)":    Row("kafka-7128",        3.5, F),
    "real brokers without epoch-end-offset (unseen-epoch)":            Row("kip-279",           7.5, F),
    "real brokers without maximal-isr (pending-shrink)":               Row("kip-497",           3.0, F),
    "real brokers without isr-broker-epoch (empty-disk-rejoin)":       Row("kip-903",           8.0, F),
    "real brokers clean: follower-drop":                               Row("kafka-7164",        4.5, Q),
    "real brokers clean: min-isr-rejoin":                              Row("kafka-7128",        3.0, Q),
    "real brokers clean: unseen-epoch":                                Row("kip-279",           6.5, F),
    "real brokers clean: pending-shrink":                              Row("kip-497",           3.0, F),
    "real brokers clean: empty-disk-rejoin":                           Row("kip-903",           6.0, F),
    # deposed-controller: 4.2 s / 4.4 s measured at load 4 on 28 Nov 2026, clean follower-drop 4.8 s same run
    "real brokers without controller-epoch-fencing (deposed-controller)": Row("controller-fencing", 4.5, F),
    "real brokers clean: deposed-controller":                          Row("controller-fencing", 4.5, F),
    # late-produce: 1.25 s each measured at load 2 on 28 Nov 2026
    "real brokers without txn-partition-verification (late-produce)":  Row("kip-890",           1.5, F),
    "real brokers clean: late-produce":                                Row("kip-890",           1.5, F),
}
UNCLASSIFIED = Row("unclassified", 0.0, F)


@dataclass(frozen=True)
class Stage:
    name: str
    family: str
    cost_s: float
    budgets: frozenset
    run: Callable


def all_stages() -> list[Stage]:
    out = []
    for name, fn in stages(quick=False):
        row = TABLE.get(name, UNCLASSIFIED)
        out.append(Stage(name, row.family, row.cost_s, row.budgets, fn))
    return out


def select(budget: str = "full", names: tuple[str, ...] = ()) -> list[Stage]:
    """The stages of `budget`, or -- when names are given -- the stages named, whatever their
    budget (so `kafkaverify check --stage NAME` reproduces any one stage). A name selects the
    stage of that exact name, every stage of that family, or every stage whose name contains it;
    a name that selects nothing is a usage error listing the valid names."""
    if budget not in BUDGETS:
        raise exitcodes.InputError(f"unknown budget {budget!r} (one of {', '.join(BUDGETS)})")
    every = all_stages()
    if not names:
        return [s for s in every if budget in s.budgets]
    chosen: list[Stage] = []
    for n in names:
        hit = [s for s in every if s.name == n] or [s for s in every if s.family == n] \
            or [s for s in every if n in s.name]
        if not hit:
            valid = "\n  ".join(s.name for s in every)
            families = ", ".join(sorted({s.family for s in every}))
            raise exitcodes.InputError(f"unknown stage {n!r}; valid stages:\n  {valid}\n"
                                       f"or a family: {families}")
        chosen += [s for s in hit if s not in chosen]
    return [s for s in every if s in chosen]      # table order, each once
