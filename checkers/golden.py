"""The golden model counterexamples of traces/corpus: how each one is made, and what it shows.

Each recipe names the fix whose bug the trace demonstrates; the trace's header carries it
(`demonstrates`), and the tests replay every trace twice: as recorded (the recorded violation
comes back, at the last step) and under the first generation that has the fix (clean, or a step
the fix forbids is no longer enabled). `python -m checkers.golden --rewrite` re-makes every trace
from its recipe (after a deliberate model change; a reviewer reads the diff), and
`python -m checkers.golden` only says which traces differ from what their recipe makes now.

Recipes search (breadth-first, the shortest counterexample), follow a script (schedules deeper
than a search reaches in minutes), or walk at random from a seed and shrink.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from checkers.model_trace import config_args
from spec import GENERATIONS, INVARIANTS, Action, Model, State, make_config
from spec.invariants import Invariant, selected, violated

CORPUS = Path(__file__).resolve().parents[1] / "traces" / "corpus"

Step = tuple  # (kind, broker, arg or None)

# Scripted schedules (3 replicas) for fixes whose bugs lie deeper than breadth-first search
# reaches in minutes. A Deliver picks the message that makes `broker` the leader, if any.
SCRIPT_BOUNDS = {"brokers": 3, "records": 2, "crashes": 3, "elections": 3, "losses": 0}
KAFKA_7128: list[Step] = [
    ("Produce", 0, None), ("FetchRequest", 1, None), ("FetchResponse", 1, None),
    ("FetchRequest", 2, None), ("FetchResponse", 2, None), ("Produce", 0, None),
    ("ProposeShrink", 0, 2), ("ControllerAlterIsr", 2, 0), ("AlterIsrResponse", 0, None),
    ("FetchRequest", 1, None),
    ("FetchResponse", 1, None), ("FetchRequest", 1, None),          # r0, r1 committed on b0, b1
    ("Crash", 0, 0), ("ControllerReact", 2, 1), ("Deliver", 1, None), ("Deliver", 2, None),
    ("Truncate", 2, None),
    ("FetchRequest", 2, None),            # b2 at offset 1 >= b1's stale HW 1: proposed for the ISR
    ("ControllerAlterIsr", 2, 1),         # <- blocked by isr-expand-epoch-start
    ("AlterIsrResponse", 1, None), ("Crash", 1, 0), ("ControllerReact", 2, 2), ("Deliver", 2, None),
]
KIP_320: list[Step] = [
    ("Produce", 0, None), ("FetchRequest", 2, None), ("FetchResponse", 2, None),
    ("Crash", 0, 0), ("ControllerReact", 2, 1), ("Deliver", 1, None),   # b2 misses epoch 1
    ("Produce", 1, None), ("Restart", 0, None), ("ControllerReact", 2, 1), ("Deliver", 0, None),
    ("Truncate", 0, None), ("FetchRequest", 0, None), ("FetchResponse", 0, None),
    ("ControllerAlterIsr", 2, 1), ("AlterIsrResponse", 1, None), ("Crash", 1, 0), ("ControllerReact", 2, 0),
    ("Deliver", 0, None),                 # b0 leads epoch 2; b2 still thinks epoch 0 under b0
    ("FetchRequest", 2, None),            # <- blocked by fetch-epoch-fencing
    ("FetchResponse", 2, None), ("FetchRequest", 2, None), ("FetchResponse", 2, None),
    ("Crash", 0, 0), ("ControllerReact", 2, 2), ("Deliver", 2, None),
]


# KIP-101 scenario 2 as the KIP tells it: A leads and has m1, m2 (HW 2); B has both but only m1
# on disk; both crash, B loses m2 in the power failure, comes back first and leads epoch 1,
# writes m3 at offset 1; A returns and truncates to its HW, keeping m2 where B has m3.
KIP101_S2_BOUNDS = {"records": 3, "min_isr": 1, "unflushed_loss": True}
KIP101_S2: list[Step] = [
    ("Produce", 0, None), ("FetchRequest", 1, None), ("FetchResponse", 1, None), ("Flush", 1, None),
    ("Produce", 0, None), ("FetchRequest", 1, None), ("FetchResponse", 1, None),
    ("FetchRequest", 1, None),                          # A's HW reaches 2
    ("Crash", 0, 0), ("Crash", 1, 1),                   # A crashes; B loses m2 (unflushed)
    ("Restart", 1, None), ("ControllerElect", 1, None), ("ControllerReact", 1, 1),
    ("Deliver", 1, None), ("Produce", 1, None),         # B leads epoch 1, writes m3 at offset 1
    ("Restart", 0, None), ("ControllerReact", 1, 1), ("Deliver", 0, None),
    ("Truncate", 0, None),                              # <- to its HW 2; KIP-101: to 1
]


# Random walks over three replicas with power failures (judged by LogMatching: with power
# failures `current` also loses data through its last replica standing, KIP-966's case).
SIM_BOUNDS = {"brokers": 3, "records": 3, "crashes": 3, "elections": 3, "unflushed_loss": True}


# Client explorations (documented in BENCHMARKS.md). Broker faults that move leadership, with
# min ISR 1 so that a lone new leader can acknowledge; or connection drops on a quiet cluster.
PRODUCER_FAULT_BOUNDS = {"producers": 1, "records": 2, "max_in_flight": 2, "retries": 1,
                         "crashes": 1, "elections": 1, "losses": 0, "min_isr": 1}
PRODUCER_CONNECTION_BOUNDS = {"producers": 1, "records": 1, "max_in_flight": 1, "retries": 1,
                              "crashes": 0, "elections": 0, "losses": 1}
GROUP_BOUNDS = {"consumers": 2, "records": 2, "crashes": 0, "elections": 0, "losses": 0}
GROUP_FAILOVER_BOUNDS = {"consumers": 1, "records": 1, "crashes": 2, "elections": 2, "losses": 0}
# Transactions (spec/transaction.py): one transactional.id, one data partition, two rounds, the
# coordinator on one broker; late requests come from one client timeout or one resent marker.
TXN_BOUNDS = {"transactions": 1, "brokers": 1, "min_isr": 1, "records": 0, "crashes": 0,
              "elections": 0, "losses": 0, "txn_partitions": 1, "txn_rounds": 2,
              "txn_timeouts": 1, "txn_dups": 1, "zombies": 0}
TXN_LATE_PRODUCE_BOUNDS = {**TXN_BOUNDS, "txn_dups": 0}


def run_script(model: Model, script: list[Step], invariants: tuple[str, ...] | None = None):
    """Follow a script. Returns (steps taken, violation or None, actions, states): stops at the
    first violation, or at the first step that is not enabled (steps taken < len(script))."""
    invs = model.invariants if invariants is None else selected(model.config, invariants)
    s = model.initial()
    actions: list[Action] = []
    states: list[State] = []
    for n, (kind, b, arg) in enumerate(script, 1):
        cands = [a for a in model.enabled(s) if a.kind == kind and a.b == b and (arg is None or a.arg == arg)]
        if kind == "Deliver":
            cands = [a for a in cands if a.arg[2] == b] or cands
        if not cands:
            return n - 1, None, actions, states
        s = model.step(s, cands[0])
        actions.append(cands[0])
        states.append(s)
        v = violated(model.config, s, invs)
        if v:
            return n, v, actions, states
    return len(script), None, actions, states


@dataclass(frozen=True)
class Recipe:
    file: str
    demonstrates: str                    # the fix whose bug the trace shows
    story: str                           # one line for the corpus listing
    generation: str
    without: tuple = ()
    bounds: dict = field(default_factory=dict)
    invariants: tuple | None = None      # the search / replay is restricted to these
    script: list | None = None           # follow this schedule instead of searching
    predicate: Callable | None = None    # a stricter target than the named invariant (search only)
    seed: int | None = None              # walk at random from this seed, then shrink
    sim_steps: int = 0

    def config(self):
        return make_config(self.generation, self.without, **self.bounds)

    def command(self) -> str:
        inv = "".join(f" --invariant {i}" for i in self.invariants or ())
        if self.script is not None:
            return f"python -m checkers.golden --only {self.file}"
        if self.seed is not None:
            return (f"kafkaverify simulate {config_args(self.config())} --seed {self.seed} "
                    f"--steps {self.sim_steps} --walk-length 60")
        return f"kafkaverify explore {config_args(self.config())}{inv}"


def first_generation_with(fix: str) -> str:
    for g, fixes in GENERATIONS.items():
        if fix in fixes:
            return g
    raise KeyError(fix)


RECIPES: tuple[Recipe, ...] = (
    Recipe("model-kip101-s1-data-loss.jsonl", "epoch-truncation",
           "KIP-101 scenario 1: a follower truncates to its HW and is elected without an acknowledged record",
           "v0.10", invariants=("AckedDurable",)),
    Recipe("model-kip101-s2-divergence.jsonl", "epoch-truncation",
           "KIP-101 scenario 2: both replicas crash, the one that lost m2 leads and writes m3 at "
           "its offset, the other keeps m2: the logs diverge",
           "v0.10", bounds=KIP101_S2_BOUNDS, invariants=("LogMatching",), script=KIP101_S2),
    Recipe("model-kafka7164-same-leader-divergence.jsonl", "truncate-on-epoch-change",
           "KAFKA-7164's mechanism: the same leader is re-elected in a new epoch and a follower "
           "that does not truncate on the epoch change diverges",
           "v0.10", bounds={"unflushed_loss": True, "min_isr": 1}, invariants=("LogMatching",)),
    Recipe("model-kafka7164-divergence.jsonl", "truncate-on-epoch-change",
           "KAFKA-7164: a follower does not truncate when only the leader epoch changes and keeps "
           "a suffix the leader no longer has",
           "current", without=("truncate-on-epoch-change",), bounds=SIM_BOUNDS,
           invariants=("LogMatching",), seed=1, sim_steps=1_500_000),
    Recipe("model-kafka7128-isr-expansion.jsonl", "isr-expand-epoch-start",
           "KAFKA-7128: a replica rejoins the ISR below the start of the leader's epoch and is elected",
           "current", without=("isr-expand-epoch-start",), bounds=SCRIPT_BOUNDS,
           invariants=("AckedDurable",), script=KAFKA_7128),
    Recipe("model-kip320-stale-fetch.jsonl", "fetch-epoch-fencing",
           "KIP-320: a follower that missed an epoch fetches from the new leader as if nothing happened",
           "current", without=("fetch-epoch-fencing",), bounds=SCRIPT_BOUNDS,
           invariants=("ConsistentReads",), script=KIP_320),
    Recipe("model-kip903-empty-disk-joins-isr.jsonl", "isr-broker-epoch",
           "KIP-903: a follower loses its disk and a stale AlterIsr puts it in the ISR",
           "kip-966", without=("isr-broker-epoch",), bounds={"disk_loss": True, "crashes": 1}),
    Recipe("model-kip279-divergence.jsonl", "epoch-end-offset",
           "KIP-279: a follower asks about an epoch the new leader never had and keeps a divergent suffix",
           "current", without=("epoch-end-offset",), bounds=SIM_BOUNDS, invariants=("LogMatching",),
           seed=1, sim_steps=1_500_000),
    Recipe("model-kip966-last-replica-standing.jsonl", "eligible-leader-replicas",
           "KIP-966: the last ISR member loses its unflushed tail and is re-elected; committed data is gone",
           "current", bounds={"unflushed_loss": True, "crashes": 1}),
    # Clients (spec/producer.py, spec/group.py); bounds as in docs/benchmarks/model.md, producers and consumer groups.
    Recipe("model-producer-reorder.jsonl", "idempotent-producer",
           "retries with two batches in flight and no idempotence: the first batch is refused by a "
           "broker not yet leading, the second is written, the retry lands after it",
           "current", without=("idempotent-producer",), bounds=PRODUCER_FAULT_BOUNDS,
           invariants=("ProducerSendOrder",)),
    Recipe("model-producer-duplicate.jsonl", "idempotent-producer",
           "a batch is written, the connection drops before the answer, the retry is written again "
           "(no idempotence: nothing tells the leader it is a retry)",
           "current", without=("idempotent-producer",), bounds=PRODUCER_CONNECTION_BOUNDS,
           invariants=("ProducerExactlyOnce",)),
    Recipe("model-group-fenced-commit.jsonl", "group-generation-fencing",
           "a rebalance hands the partition to a new member; the old member's commit of the old "
           "generation is accepted",
           "current", without=("group-generation-fencing",), bounds=GROUP_BOUNDS),
    Recipe("model-group-offset-regression-v010.jsonl", "epoch-truncation",
           "__consumer_offsets on v0.10: an acknowledged commit is truncated away by KIP-101 "
           "scenario 1 and the new coordinator serves the older offset",
           "v0.10", bounds=GROUP_FAILOVER_BOUNDS, invariants=("GroupCommittedOffsetNeverBack",)),
    # Transactions (spec/transaction.py).
    Recipe("model-txn-late-marker.jsonl", "txn-epoch-bump",
           "KIP-890 part 2: the coordinator resends a COMMIT marker; the late first copy reaches the "
           "partition after the next transaction wrote to it, under the same epoch, and commits "
           "that record before its transaction decides",
           "kip-966", without=("txn-epoch-bump",), bounds=TXN_BOUNDS),
    Recipe("model-txn-late-produce-joins-next.jsonl", "txn-timeout-bump",
           "KAFKA-14053: a batch times out on the client, which aborts under the same epoch; the "
           "batch still in flight passes verification into the next transaction, which commits "
           "a record of the aborted one",
           "current", without=("txn-timeout-bump",), bounds=TXN_LATE_PRODUCE_BOUNDS),
    Recipe("model-txn-hanging.jsonl", "txn-partition-verification",
           "KIP-890 part 1: a batch times out on the client, which aborts; the batch lands after "
           "the abort marker and nothing will ever end it: the partition's LSO is stuck",
           "current", without=("txn-timeout-bump", "txn-partition-verification"),
           bounds=TXN_LATE_PRODUCE_BOUNDS),
)


def make(recipe: Recipe, time_limit: float = 600.0):
    """Run the recipe. Returns (config, actions, states, violation)."""
    cfg = recipe.config()
    model = Model(cfg)
    if recipe.script is not None:
        n, v, actions, states = run_script(model, recipe.script, recipe.invariants)
        if n != len(recipe.script) or v is None:
            raise RuntimeError(f"{recipe.file}: the script no longer ends in a violation (stopped at step {n})")
        return cfg, actions, states, v
    if recipe.predicate is not None:
        model.invariants = (Invariant(recipe.invariants[0], "golden target", recipe.predicate, False),)
    elif recipe.invariants:
        model.invariants = selected(cfg, recipe.invariants)
    if recipe.seed is not None:
        from checkers.shrink_trace import shrink_path
        from checkers.simulate import simulate
        r = simulate(model, recipe.seed, recipe.sim_steps, walk_length=60, time_limit=time_limit)
        if r.status != "violation":
            raise RuntimeError(f"{recipe.file}: no violation from seed {recipe.seed}")
        path, states, msg = shrink_path(model, r.path, r.invariant)
        return cfg, path, states, (r.invariant, msg)
    from checkers.explore import explore
    r = explore(model, time_limit=time_limit)
    if r.status != "violation":
        raise RuntimeError(f"{recipe.file}: the search ended {r.status} without a violation")
    return cfg, r.path, r.states, (r.invariant, r.message)


def write(recipe: Recipe, path: Path | None = None, time_limit: float = 600.0) -> Path:
    from checkers.model_trace import write_trace
    cfg, actions, states, v = make(recipe, time_limit)
    out = path or CORPUS / recipe.file
    write_trace(out, cfg, actions, states, v, command=recipe.command(), seed=recipe.seed,
                invariants=recipe.invariants, demonstrates=recipe.demonstrates,
                story=recipe.story)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m checkers.golden", description=__doc__.split("\n\n")[0])
    ap.add_argument("--rewrite", action="store_true", help="re-make the traces in traces/corpus")
    ap.add_argument("--only", action="append", default=[], metavar="FILE")
    args = ap.parse_args(argv)
    chosen = [r for r in RECIPES if not args.only or r.file in args.only]
    if args.only and len(chosen) != len(set(args.only)):
        print(f"unknown trace in --only; known: {', '.join(r.file for r in RECIPES)}", file=sys.stderr)
        return 3
    differ = 0
    import tempfile
    for r in chosen:
        if args.rewrite:
            write(r)
            print(f"wrote {r.file}")
            continue
        with tempfile.TemporaryDirectory() as d:
            fresh = write(r, Path(d) / r.file)
            same = (CORPUS / r.file).exists() and fresh.read_text() == (CORPUS / r.file).read_text()
        print(f"{'same   ' if same else 'DIFFERS'} {r.file}")
        differ += not same
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
