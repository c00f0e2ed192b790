"""The stages of the invariant suite behind `kafkaverify check`: each gives one row with pass /
fail / unknown and its time (run.py runs them: exit 0 only if every stage passes, 1 if one
failed, 2 if none failed but one was inconclusive).

Stages:
- the newest generation explored exhaustively at the default bounds finds nothing;
- every golden trace in traces/corpus replays to its recorded verdict (model traces) or shows
  its recorded anomaly (client histories);
- mining a few thousand generated runs finds exactly the violations seeded in them;
- teeth: each vulnerable configuration is still caught — the KIP-101 scenarios in v0.10, and
  `current` without each fix, at the bounds where that fix's bug is observable;
- the broker's teeth and clean stages: arranged conformance scenarios on real brokers, without
  each fix and with every fix on (kafkaverify/suite/broker_stages.py).

A stage whose harness raises is that stage's unknown verdict with its cause (harness_failure,
applied by run.py), never the suite's crash.

Which stages run under `--budget quick|full`, with their fix family and cost: one row per stage
in kafkaverify/suite/budget.py (add one with each new stage). Reports for CI (JUnit XML,
artefacts, HTML summary): kafkaverify/reports/ci.py.
"""
from __future__ import annotations

import shlex
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable

import polars as pl

from checkers.explore import explore
from checkers.golden import (GROUP_BOUNDS, GROUP_FAILOVER_BOUNDS, PRODUCER_CONNECTION_BOUNDS,
                             PRODUCER_FAULT_BOUNDS, RECIPES, run_script)
from checkers.history.gen_runs import generate_dataset, planted_mismatches
from checkers.history.mine import mine_local
from checkers.history.oracle.check import check_history
from checkers.golden import TXN_BOUNDS, TXN_LATE_PRODUCE_BOUNDS
from checkers.model_trace import cli_defaults, config_args, replay
from checkers.portfolio import ROUND_STEPS, swarm
from checkers.shrink_trace import shrink_path
from checkers.simulate import simulate
from kafkaverify.nemesis.errors import error_text
from kafkaverify.suite.broker_stages import BROKER_CLEAN, BROKER_TEETH, broker_clean, broker_tooth
from kafkaverify.nemesis.stage import SEED, check_stage
from kafkaverify.runs.prove import prove_stage
from spec import Model, make_config
from traces.history import load
from traces.trace import TraceError

# One producer on one broker with connection drops: max.in.flight 5 is the most Kafka allows with
# idempotence; at 6 a retried batch has left the leader's 5-batch cache.
IDEMPOTENT_5_BOUNDS = {"producers": 1, "records": 5, "max_in_flight": 5, "retries": 2, "brokers": 1,
                       "min_isr": 1, "crashes": 0, "elections": 0, "losses": 1}
IDEMPOTENT_6_BOUNDS = {**IDEMPOTENT_5_BOUNDS, "records": 6, "max_in_flight": 6}

CORPUS = Path(__file__).resolve().parents[2] / "traces" / "corpus"
CURRENT_TIME_LIMIT = 900.0
TEETH_TIME_LIMIT = 180.0

# (stage name, generation, without, extra bounds, invariant restriction or None, expected
# invariant). A tooth names the bug it expects: a violation of any other invariant fails the
# stage ("expected X, found Y"), so an unrelated bug cannot pass for the one a fix prevents.
# The bounds are the smallest found at which each fix's bug shows (see BENCHMARKS.md).
TEETH: list[tuple[str, str, tuple, dict, tuple | None, str]] = [
    ("v0.10 KIP-101 data loss", "v0.10", (), {}, ("AckedDurable",), "AckedDurable"),
    ("v0.10 KIP-101 divergence", "v0.10", (), {"unflushed_loss": True, "min_isr": 1}, ("LogMatching",),
     "LogMatching"),
    ("without controller-epoch-fencing", "current", ("controller-epoch-fencing",), {"pauses": 1, "crashes": 0},
     None, "UniqueLeaderPerEpoch"),
    ("without epoch-truncation", "current", ("epoch-truncation",), {}, None, "MinIsrDurability"),
    ("without maximal-isr", "current", ("maximal-isr",), {"min_isr": 1}, None, "ReplicationQuorumSuperset"),
    ("without min-isr-hw", "current", ("min-isr-hw",), {}, None, "MinIsrDurability"),
    # With a disk loss and two crashes `current` also loses data through its last replica
    # standing (KIP-966's case, one step shorter), so KIP-903 is shown where ELR is on.
    ("kip-966 without isr-broker-epoch (one disk loss)", "kip-966", ("isr-broker-epoch",),
     {"disk_loss": True, "crashes": 1}, None, "StrongIsr"),
    ("kip-966 without eligible-leader-replicas (one power failure)", "kip-966", ("eligible-leader-replicas",),
     {"unflushed_loss": True, "crashes": 1}, None, "AckedDurable"),
    # Clients (bounds: checkers/golden.py and docs/benchmarks/model.md, producers and consumer groups). A client invariant the
    # settings do not promise is checked because it is named: the question is "can it happen?".
    ("producer reorder without idempotence (retries, 2 in flight)", "current", ("idempotent-producer",),
     PRODUCER_FAULT_BOUNDS, ("ProducerSendOrder",), "ProducerSendOrder"),
    ("producer duplicate without idempotence (retries)", "current", ("idempotent-producer",),
     PRODUCER_CONNECTION_BOUNDS, ("ProducerExactlyOnce",), "ProducerExactlyOnce"),
    ("idempotent producer with max.in.flight 6 (beyond the 5-batch cache)", "current", (),
     IDEMPOTENT_6_BOUNDS, None, "ProducerExactlyOnce"),
    ("without group-generation-fencing", "current", ("group-generation-fencing",), GROUP_BOUNDS, None,
     "GroupFencedNeverCommits"),
    ("v0.10 __consumer_offsets: committed offset regression across coordinator fail-over", "v0.10", (),
     GROUP_FAILOVER_BOUNDS, ("GroupCommittedOffsetNeverBack",), "GroupCommittedOffsetNeverBack"),
]
# Fixes checked on where their bug shows: one row per fix, every fix on (kip-966), at the bounds
# of that fix's tooth, so that a fix present but weakened in a corner is caught, not only a fix
# removed. (stage name, fix, kind, bounds, limits). Kinds: "explore" must exhaust, or reach the
# stated `max_depth` with no violation (twice the depth at which the tooth finds its bug:
# exhausting these costs minutes, e.g. one pause 591 k states); "walks" are seeded random walks (the fix's tooth is a
# walk); "script" follows the golden trace's scripted schedule with every fix on, which must
# stop (a step the fixes forbid) or end clean; "swarm" walks the seeds of SWARM_TEETH at the
# three-broker defaults with every fix on and must find nothing. Costs: docs/benchmarks/model.md, clean stages.
CLEAN_GENERATION = "kip-966"
CLEAN: list[tuple[str, str, str, dict, dict]] = [
    ("clean: controller-epoch-fencing (one pause)", "controller-epoch-fencing", "explore",
     {"pauses": 1, "crashes": 0}, {"max_depth": 16}),
    ("clean: epoch-truncation and min-isr-hw (default bounds)", "epoch-truncation", "explore",
     {}, {"max_depth": 16}),
    ("clean: maximal-isr (min ISR 1)", "maximal-isr", "explore", {"min_isr": 1}, {"max_depth": 12}),
    ("kip-966 clean with one power failure", "eligible-leader-replicas", "explore",
     {"unflushed_loss": True, "crashes": 1}, {}),
    ("kip-966 clean with one disk loss", "isr-broker-epoch", "explore",
     {"disk_loss": True, "crashes": 1}, {}),
    # Judged by LogMatching, the invariant these two fixes keep: with three crashes, power
    # failures may take every copy of a record, which kip-966 does not promise to survive (its
    # promise is one unclean shutdown). These walks once found the model's last-known-ELR
    # election picking a replica whose log a power failure had emptied; unclean recovery now
    # elects the longest log (spec/rules.py unclean_recovery_choice).
    ("clean: epoch-end-offset and truncate-on-epoch-change (random walks)", "epoch-end-offset", "walks",
     {"brokers": 3, "records": 3, "crashes": 3, "elections": 3, "unflushed_loss": True},
     {"seed": 1, "steps": 300_000, "invariants": ("LogMatching",)}),
    ("clean: isr-expand-epoch-start (KAFKA-7128 schedule)", "isr-expand-epoch-start", "script",
     {}, {"recipe": "model-kafka7128-isr-expansion.jsonl"}),
    ("clean: fetch-epoch-fencing (KIP-320 schedule)", "fetch-epoch-fencing", "script",
     {}, {"recipe": "model-kip320-stale-fetch.jsonl"}),
    ("clean: fetch-epoch-fencing and isr-expand-epoch-start (swarm walks, three brokers)",
     "fetch-epoch-fencing", "swarm", {}, {}),
    # Producers and groups (spec/producer.py, spec/group.py): kip-966 has these fixes too.
    ("idempotent producer clean across a leader move (max.in.flight 2)", "idempotent-producer", "explore",
     PRODUCER_FAULT_BOUNDS, {}),
    ("idempotent producer clean across connection drops (max.in.flight 5)", "idempotent-producer", "explore",
     IDEMPOTENT_5_BOUNDS, {}),
    ("consumer group clean with generation fencing", "group-generation-fencing", "explore", GROUP_BOUNDS, {}),
    ("consumer group clean across a coordinator fail-over", "group-generation-fencing", "explore",
     {**GROUP_FAILOVER_BOUNDS, "crashes": 1, "elections": 1}, {}),
]
# Transactions (spec/transaction.py; bounds: checkers/golden.py). KIP-890's two parts and
# KAFKA-14053 overlap against a late batch: in kip-966 the epoch bump alone fences it, so the
# teeth of the two older defences remove them where they shipped, in `current`.
TEETH += [
    ("kip-966 transactions without txn-epoch-bump (a resent marker arrives late)", "kip-966",
     ("txn-epoch-bump",), TXN_BOUNDS, None, "TxnAtomicVisibility"),
    ("current transactions without txn-timeout-bump (a timed-out batch joins the next transaction)",
     "current", ("txn-timeout-bump",), TXN_LATE_PRODUCE_BOUNDS, None, "TxnAtomicVisibility"),
    ("current transactions without txn-partition-verification and txn-timeout-bump (hanging)",
     "current", ("txn-partition-verification", "txn-timeout-bump"), TXN_LATE_PRODUCE_BOUNDS, None,
     "TxnNoHangingTransaction"),
    ("current consume-transform-produce without txn-timeout-bump (an input processed twice)",
     "current", ("txn-timeout-bump",), {**TXN_LATE_PRODUCE_BOUNDS, "consume_transform_produce": True},
     ("TxnExactlyOnce",), "TxnExactlyOnce"),
]
CLEAN += [
    ("clean: txn-epoch-bump, txn-partition-verification and txn-timeout-bump (two partitions, a zombie)",
     "txn-epoch-bump", "explore", {**TXN_BOUNDS, "txn_partitions": 2, "zombies": 1}, {}),
    # One transaction across any fail-over of the coordinator (__transaction_state on two
    # brokers): 100 k states; with two rounds it does not exhaust in 5 minutes.
    ("clean: txn-epoch-bump across a transaction coordinator fail-over (two brokers, one transaction)",
     "txn-epoch-bump", "explore", {**TXN_BOUNDS, "brokers": 2, "crashes": 1, "elections": 1,
                                   "txn_rounds": 1, "txn_dups": 0, "txn_timeouts": 0}, {}),
]
# Three replicas and deeper schedules than breadth-first search exhausts in minutes: these
# fixes are shown by seeded random walks (their shrunk walks are golden traces);
# fetch-epoch-fencing and isr-expand-epoch-start by scripted schedules, replayed as golden
# traces (bounds tried: BENCHMARKS.md).
SIM_BOUNDS = {"brokers": 3, "records": 3, "crashes": 3, "elections": 3, "unflushed_loss": True}
# (stage name, without, seed, steps, invariant restriction, expected invariant): as TEETH, a
# walk that breaks another invariant fails the stage.
SIM_TEETH: list[tuple[str, tuple, int, int, tuple, str]] = [
    ("without epoch-end-offset (random walks)", ("epoch-end-offset",), 1, 1_500_000,
     ("LogMatching",), "LogMatching"),
    ("without truncate-on-epoch-change (random walks)", ("truncate-on-epoch-change",), 1, 1_500_000,
     ("LogMatching",), "LogMatching"),
]

# The fixes whose bugs need three brokers and a schedule deeper than breadth-first search
# reaches at three brokers, shown by the search portfolio's own swarm walks
# (checkers/portfolio.py) at the three-broker defaults of `kafkaverify explore --brokers 3`
# (checkers/model_trace.cli_defaults): one worker, walk seeds 0, 1, 2, ... in turn, 20,000 steps
# each, at most SWARM_SEEDS seeds. Bounded by seeds, not time, so every machine gets the same
# answer; the walk is shrunk and the counterexample is the shrunk one. (name, without, expected
# invariant). The same fixes' golden traces stay as scripted regressions.
SWARM_SEEDS = 32
SWARM_TEETH: list[tuple[str, tuple, str]] = [
    ("without fetch-epoch-fencing (swarm walks, three brokers)", ("fetch-epoch-fencing",), "StrongIsr"),
    ("without isr-expand-epoch-start (swarm walks, three brokers)", ("isr-expand-epoch-start",),
     "LeaderCandidateCompleteness"),
]


@dataclass
class StageResult:
    name: str
    verdict: str        # pass | fail | unknown
    seconds: float
    detail: str
    # For CI reports (kafkaverify/reports/ci.py): the command that reproduces the stage's search,
    # and what it found -- (Config, result with .path/.states) for searches, the files it read
    # for golden stages. Never serialised as is.
    reproduce: str = ""
    evidence: Any = field(default=None, repr=False, compare=False)
    cause: str = ""     # a harness failure's traceback (the stage ended in an exception)

    def to_json(self) -> dict:
        return {"name": self.name, "verdict": self.verdict, "seconds": self.seconds,
                "detail": self.detail, "reproduce": self.reproduce,
                **({"cause": self.cause} if self.cause else {})}


def harness_failure(name: str, exc: BaseException, seconds: float) -> StageResult:
    """A stage whose harness raised (a client timeout, a broker that did not start, a fault
    command that failed) decided nothing: its verdict is unknown, with the exception and where
    it was raised as the detail and the traceback as the cause."""
    tb = traceback.extract_tb(exc.__traceback__)
    where = f" (at {Path(tb[-1].filename).name}:{tb[-1].lineno} in {tb[-1].name})" if tb else ""
    detail = f"harness error, no verdict: {error_text(exc)}{where}"
    cause = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return StageResult(name, "unknown", seconds, detail, cause=cause)


def _explore_stage(name: str, generation: str, without: tuple, bounds: dict,
                   invariants: tuple | None, expect_violation: bool, time_limit: float,
                   expect: str | None = None, max_depth: int | None = None) -> StageResult:
    """`max_depth`: a stated bound for a stage that must find nothing; reaching it clean passes
    (the detail says so), since a full exhaustion there costs more than the suite's budget."""
    t0 = time.monotonic()
    cfg = make_config(generation, without, **bounds)
    r = explore(Model(cfg), time_limit=time_limit, invariants=invariants,
                **({"max_depth": max_depth} if max_depth is not None else {}))
    secs = time.monotonic() - t0
    stats = f"{r.distinct:,} states, depth {r.depth}, {r.states_per_second:,.0f}/s"
    cmd = f"kafkaverify explore {config_args(cfg)}" + "".join(f" --invariant {i}" for i in invariants or ())
    if max_depth is not None:
        cmd += f" --max-depth {max_depth}"
    if r.status == "violation":
        detail = f"{r.invariant} in {len(r.path)} steps; {stats}"
        if expect_violation and expect and r.invariant != expect:
            return StageResult(name, "fail", secs, f"expected {expect}, found {detail}", cmd, (cfg, r))
        return StageResult(name, "pass" if expect_violation else "fail", secs, detail, cmd, (cfg, r))
    if r.status == "exhausted":
        return StageResult(name, "fail" if expect_violation else "pass", secs,
                           f"exhausted, no violation; {stats}", cmd, (cfg, r))
    if r.status == "depth-bound" and not expect_violation and max_depth is not None:
        return StageResult(name, "pass", secs,
                           f"no violation to the stated depth bound {max_depth}; {stats}", cmd, (cfg, r))
    return StageResult(name, "unknown", secs, f"{r.status}; {stats}", cmd, (cfg, r))


def _simulate_stage(name: str, without: tuple, seed: int, steps: int,
                    invariants: tuple | None = ("LogMatching",), expect: str | None = "LogMatching",
                    generation: str = "current", bounds: dict | None = None,
                    expect_violation: bool = True) -> StageResult:
    """Seeded random walks. A tooth (the default) runs `current` without a fix over three
    replicas with unflushed loss, judged by LogMatching alone: with power failures `current`
    itself loses data through its last replica standing (KIP-966's case), which is not the bug
    these stages are about; a violation of another invariant than `expect` fails the stage. A
    clean stage (expect_violation=False) must walk `steps` steps without any violation."""
    t0 = time.monotonic()
    cfg = make_config(generation, without, **(SIM_BOUNDS if bounds is None else bounds))
    model = Model(cfg)
    if invariants is not None:
        model.invariants = tuple(i for i in model.invariants if i.name in invariants)
    r = simulate(model, seed, steps, walk_length=60, time_limit=TEETH_TIME_LIMIT)
    secs = time.monotonic() - t0
    cmd = (f"kafkaverify simulate {config_args(cfg)} --seed {seed} --steps {steps} --walk-length 60"
           + (f"  (judged by {', '.join(invariants)} only)" if invariants else ""))
    if r.status == "violation":
        detail = f"{r.invariant} after {r.steps:,} steps (seed {seed})"
        if not expect_violation:
            return StageResult(name, "fail", secs, f"{detail}: {r.message}", cmd, (cfg, r))
        if expect and r.invariant != expect:
            return StageResult(name, "fail", secs, f"expected {expect}, found {detail}", cmd, (cfg, r))
        return StageResult(name, "pass", secs, detail, cmd, (cfg, r))
    verdict = ("fail" if expect_violation else "pass") if r.status == "ok" else "unknown"
    return StageResult(name, verdict, secs, f"no violation in {r.steps:,} steps (seed {seed})", cmd, (cfg, r))


def _swarm_stage(name: str, generation: str, without: tuple, expect: str | None,
                 seeds: int = SWARM_SEEDS) -> StageResult:
    """The portfolio's swarm walks at the three-broker defaults, bounded by seeds (SWARM_TEETH).
    A tooth (`expect` set) must find `expect`; a clean stage (`expect` None) must walk every seed
    with no violation."""
    t0 = time.monotonic()
    cfg = make_config(generation, without, **{**cli_defaults(3), "brokers": 3})
    model = Model(cfg)
    hit, steps, _walks, tried = swarm(model, 0, float("inf"), 1, True, max_rounds=seeds)
    cmd = f"kafkaverify explore {config_args(cfg)} --workers 1 --seed 0"
    if hit is None:
        secs = time.monotonic() - t0
        detail = f"no violation in {steps:,} steps over walk seeds 0-{tried - 1}"
        return StageResult(name, "fail" if expect else "pass", secs, detail, cmd)
    inv, _msg, path = hit.violation
    spath, states, msg = shrink_path(model, path, inv)
    secs = time.monotonic() - t0
    # the shape the CI report reads a counterexample from
    found = SimpleNamespace(path=spath, states=states, invariant=inv, message=msg)
    detail = (f"{inv} in {len(spath)} steps (walk seed {hit.seed} of 0-{seeds - 1}, after "
              f"{steps:,} steps of {ROUND_STEPS:,} per seed, walk of {len(path)} shrunk)")
    if expect is None:
        return StageResult(name, "fail", secs, f"{detail}: {msg}", cmd, (cfg, found))
    if inv != expect:
        return StageResult(name, "fail", secs, f"expected {expect}, found {detail}", cmd, (cfg, found))
    return StageResult(name, "pass", secs, detail, cmd, (cfg, found))

def _script_clean_stage(name: str, recipe_file: str) -> StageResult:
    """A golden trace's scripted schedule with every fix on: the schedule must stop at a step the
    fixes forbid, or run to its end with no invariant violated (all of them checked, not only
    the one the trace records)."""
    t0 = time.monotonic()
    recipe = next(r for r in RECIPES if r.file == recipe_file)
    cfg = make_config(CLEAN_GENERATION, **recipe.bounds)
    n, v, actions, states = run_script(Model(cfg), recipe.script)
    secs = time.monotonic() - t0
    cmd = f"python -m checkers.golden --only {recipe_file}"
    if v is not None:
        found = SimpleNamespace(path=actions, states=states, invariant=v[0], message=v[1])
        return StageResult(name, "fail", secs, f"{v[0]} at step {n} of the schedule: {v[1]}", cmd, (cfg, found))
    how = (f"stopped at step {n + 1} of {len(recipe.script)} ({recipe.script[n][0]} not enabled)"
           if n < len(recipe.script) else f"all {n} steps, no violation")
    return StageResult(name, "pass", secs, f"{how}; {CLEAN_GENERATION}", cmd, [CORPUS / recipe_file])


def _clean_stage(name: str, kind: str, bounds: dict, limits: dict) -> StageResult:
    if kind == "explore":
        return _explore_stage(name, CLEAN_GENERATION, (), bounds, None, False, TEETH_TIME_LIMIT,
                              max_depth=limits.get("max_depth"))
    if kind == "walks":
        return _simulate_stage(name, (), limits["seed"], limits["steps"], invariants=limits.get("invariants"),
                               expect=None,
                               generation=CLEAN_GENERATION, bounds=bounds, expect_violation=False)
    if kind == "script":
        return _script_clean_stage(name, limits["recipe"])
    if kind == "swarm":
        return _swarm_stage(name, CLEAN_GENERATION, (), None)
    raise ValueError(f"unknown clean-stage kind {kind!r}")


def _golden_model_stage(path: Path) -> StageResult:
    t0 = time.monotonic()
    cmd = f"kafkaverify replay {shlex.quote(str(path))}"
    try:
        r = replay(path)
    except TraceError as e:
        return StageResult(f"golden {path.name}", "fail", time.monotonic() - t0, str(e), cmd, [path])
    secs = time.monotonic() - t0
    if r.problem:
        return StageResult(f"golden {path.name}", "fail", secs, r.problem, cmd, [path])
    got = r.violation[0] if r.violation else None
    ok = got == r.recorded
    return StageResult(f"golden {path.name}", "pass" if ok else "fail", secs,
                       f"{r.steps} steps, {got or 'no violation'} (recorded {r.recorded or 'none'})", cmd, [path])


def _golden_history_stage(paths: list[Path]) -> StageResult:
    t0 = time.monotonic()
    bad = []
    for p in paths:
        kind = p.stem[len("history-"):]
        v = check_history(load(p))
        types = {a.type for a in v.anomalies}
        if v.status != "invalid" or kind not in types:      # the file names the anomaly it shows
            bad.append(f"{p.name}: expected {kind}, found {v.status} {sorted(types)}")
    secs = time.monotonic() - t0
    cmd = f"kafkaverify check-history {shlex.quote(str(paths[0]))}" if paths else ""
    if not paths:
        return StageResult("golden histories", "unknown", secs, "no golden histories found")
    if bad:
        cmd = f"kafkaverify check-history {shlex.quote(str(CORPUS / bad[0].split(':')[0]))}"
        return StageResult("golden histories", "fail", secs, "; ".join(bad), cmd, paths)
    return StageResult("golden histories", "pass", secs, f"{len(paths)} histories, each anomaly found",
                       cmd, paths)


MINING_RUNS = 2000
MINING_SEED = 12


def _mining_stage(runs: int = MINING_RUNS, seed: int = MINING_SEED) -> StageResult:
    """Generates a few thousand runs with seeded violations (and a few corrupt rows) and mines
    them: exactly the planted runs must be found, each with its kind, and the corrupt ones
    reported. Runs the bucket kernel in this process (the engine Spark runs in mapInArrow),
    not on Spark: a Spark session takes 5-20 s to start on this machine and more under load,
    which alone would eat the stage's budget; tests/test_mine_spark.py covers Spark."""
    name = f"mining {runs} runs (seed={seed}, local kernel)"
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kv-mine-") as d:
        g = generate_dataset(d, runs=runs, seed=seed, ops=50, buckets=4, corrupt_rate=0.002)
        out = Path(d) / "out"
        s = mine_local(d, str(out))
        bad = planted_mismatches(pl.read_parquet(Path(d) / "runs"),
                                 pl.read_parquet(out / "verdicts.parquet"))
    secs = time.monotonic() - t0
    detail = (f"{g['events']} events, {g['planted']} planted found, {s.count('corrupt')} corrupt "
              f"reported; mined in {s.seconds:.1f}s")
    if bad:
        return StageResult(name, "fail", secs, f"{len(bad)} mismatches, e.g. {'; '.join(bad[:3])} "
                           f"(reproduce: kafkaverify gen-runs DIR --runs {runs} --seed {seed} --ops 50 "
                           "--buckets 4 --corrupt-rate 0.002 && kafkaverify mine DIR --engine local)")
    return StageResult(name, "pass", secs, detail)


def _prove_stage() -> StageResult:
    """z3 (checkers/prove): induction of the invariants it proves for `current`, and bounded
    model checking refuting a vulnerable configuration, replayed on the explicit model."""
    return StageResult("z3 prove", *prove_stage())


def _nemesis_stage() -> StageResult:
    """Generated crash/pause schedules on a real `current` cluster must give valid histories with
    no conformance divergence, and a broker built without epoch-truncation must be caught by
    conformance (kafkaverify/nemesis/stage.py)."""
    verdict, secs, detail = check_stage()
    return StageResult("nemesis on real brokers", verdict, secs, detail,
                       reproduce=f"kafkaverify nemesis --generation current --schedules 2 --seed {SEED} "
                                 "--faults crash,pause --consumers 0")


def _broker_stage(name: str, run: Callable[[], tuple[str, float, str]]) -> StageResult:
    """An arranged conformance scenario on real brokers (kafkaverify/suite/broker_stages.py)."""
    verdict, secs, detail = run()
    return StageResult(name, verdict, secs, detail)


def stages(quick: bool = False) -> list[tuple[str, Callable[[], StageResult]]]:
    out: list[tuple[str, Callable[[], StageResult]]] = [
        ("current exhausted", lambda: _explore_stage(
            "current exhausted at default bounds", "current", (), {}, None, False, CURRENT_TIME_LIMIT)),
        # the same with one crash: 24 k states in seconds, the quick budget's safety check
        ("current exhausted, one crash", lambda: _explore_stage(
            "current exhausted with one crash", "current", (), {"crashes": 1}, None, False, CURRENT_TIME_LIMIT)),
    ]
    for p in sorted(CORPUS.glob("model-*.jsonl")):
        out.append((f"golden {p.name}", lambda p=p: _golden_model_stage(p)))
    hist = sorted(CORPUS.glob("history-*.jsonl"))
    out.append(("golden histories", lambda: _golden_history_stage(hist)))
    out.append(("mining", lambda: _mining_stage(500 if quick else MINING_RUNS)))
    out.append(("nemesis", _nemesis_stage))
    out.append(("z3 prove", _prove_stage))
    teeth = TEETH[:2] if quick else TEETH
    for name, gen, without, bounds, invs, expect in teeth:
        out.append((name, lambda n=name, g=gen, w=without, b=bounds, i=invs, e=expect: _explore_stage(
            n, g, w, b, i, True, TEETH_TIME_LIMIT, e)))
    if not quick:
        for name, _fix, kind, bounds, limits in CLEAN:
            out.append((name, lambda n=name, k=kind, b=bounds, lim=limits: _clean_stage(n, k, b, lim)))
    if not quick:
        for name, without, seed, steps, invs, expect in SIM_TEETH:
            out.append((name, lambda n=name, w=without, sd=seed, st=steps, i=invs, e=expect:
                        _simulate_stage(n, w, sd, st, i, e)))
        for name, without, expect in SWARM_TEETH:
            out.append((name, lambda n=name, w=without, e=expect: _swarm_stage(n, "current", w, e)))
    # the broker's teeth and clean stages: arranged conformance scenarios on real brokers
    for name, without, scenario, expect in BROKER_TEETH:
        out.append((name, lambda n=name, w=without, sc=scenario, e=expect:
                    _broker_stage(n, lambda: broker_tooth(w, sc, e))))
    for name, scenario in BROKER_CLEAN:
        out.append((name, lambda n=name, sc=scenario: _broker_stage(n, lambda: broker_clean(sc))))
    return out
