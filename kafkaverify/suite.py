"""The invariant suite behind `kafkaverify check`: one row per stage with pass / fail / unknown
and its time. Exit 0 only if every stage passes (1 if one failed, 2 if none failed but one was
inconclusive).

Stages:
- the newest generation explored exhaustively at the default bounds finds nothing;
- every golden trace in traces/corpus replays to its recorded verdict (model traces) or shows
  its recorded anomaly (client histories);
- mining a few thousand generated runs finds exactly the violations seeded in them;
- teeth: each vulnerable configuration is still caught — the KIP-101 scenarios in v0.10, and
  `current` without each fix, at the bounds where that fix's bug is observable.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import click
from rich.console import Console
from rich.table import Table

from kafkaverify import exitcodes

CORPUS = Path(__file__).resolve().parents[1] / "traces" / "corpus"
CURRENT_TIME_LIMIT = 900.0
TEETH_TIME_LIMIT = 180.0

# (stage name, generation, without, extra bounds, invariant restriction or None)
# The bounds are the smallest found at which each fix's bug shows (see BENCHMARKS.md).
TEETH: list[tuple[str, str, tuple, dict, tuple | None]] = [
    ("v0.10 KIP-101 data loss", "v0.10", (), {}, ("AckedDurable",)),
    ("v0.10 KIP-101 divergence", "v0.10", (), {"unflushed_loss": True, "min_isr": 1}, ("LogMatching",)),
    ("without controller-epoch-fencing", "current", ("controller-epoch-fencing",), {"pauses": 1, "crashes": 0}, None),
    ("without epoch-truncation", "current", ("epoch-truncation",), {}, None),
    ("without maximal-isr", "current", ("maximal-isr",), {"min_isr": 1}, None),
    ("without min-isr-hw", "current", ("min-isr-hw",), {}, None),
]
# Three replicas and deeper schedules than breadth-first search exhausts in minutes: these
# fixes are shown by seeded random walks (their shrunk walks are golden traces);
# fetch-epoch-fencing and isr-expand-epoch-start by scripted schedules, replayed as golden
# traces (bounds tried: BENCHMARKS.md).
SIM_BOUNDS = {"brokers": 3, "records": 3, "crashes": 3, "elections": 3, "unflushed_loss": True}
SIM_TEETH: list[tuple[str, tuple, int, int]] = [
    ("without epoch-end-offset (random walks)", ("epoch-end-offset",), 1, 1_500_000),
    ("without truncate-on-epoch-change (random walks)", ("truncate-on-epoch-change",), 1, 1_500_000),
]


@dataclass
class StageResult:
    name: str
    verdict: str        # pass | fail | unknown
    seconds: float
    detail: str


def _explore_stage(name: str, generation: str, without: tuple, bounds: dict,
                   invariants: tuple | None, expect_violation: bool, time_limit: float) -> StageResult:
    from checkers.explore import explore
    from spec import Model, make_config
    t0 = time.monotonic()
    cfg = make_config(generation, without, **bounds)
    r = explore(Model(cfg), time_limit=time_limit, invariants=invariants)
    secs = time.monotonic() - t0
    stats = f"{r.distinct:,} states, depth {r.depth}, {r.states_per_second:,.0f}/s"
    if r.status == "violation":
        detail = f"{r.invariant} in {len(r.path)} steps; {stats}"
        return StageResult(name, "pass" if expect_violation else "fail", secs, detail)
    if r.status == "exhausted":
        return StageResult(name, "fail" if expect_violation else "pass", secs,
                           f"exhausted, no violation; {stats}")
    return StageResult(name, "unknown", secs, f"{r.status}; {stats}")


def _simulate_stage(name: str, without: tuple, seed: int, steps: int) -> StageResult:
    from checkers.simulate import simulate
    from spec import Model, make_config
    t0 = time.monotonic()
    r = simulate(Model(make_config("current", without, **SIM_BOUNDS)), seed, steps,
                 walk_length=60, time_limit=TEETH_TIME_LIMIT)
    secs = time.monotonic() - t0
    if r.status == "violation":
        return StageResult(name, "pass", secs, f"{r.invariant} after {r.steps:,} steps (seed {seed})")
    return StageResult(name, "fail" if r.status == "ok" else "unknown", secs,
                       f"no violation in {r.steps:,} steps (seed {seed})")


def _golden_model_stage(path: Path) -> StageResult:
    from checkers.model_trace import replay
    from traces.trace import TraceError
    t0 = time.monotonic()
    try:
        r = replay(path)
    except TraceError as e:
        return StageResult(f"golden {path.name}", "fail", time.monotonic() - t0, str(e))
    secs = time.monotonic() - t0
    if r.problem:
        return StageResult(f"golden {path.name}", "fail", secs, r.problem)
    got = r.violation[0] if r.violation else None
    ok = got == r.recorded
    return StageResult(f"golden {path.name}", "pass" if ok else "fail", secs,
                       f"{r.steps} steps, {got or 'no violation'} (recorded {r.recorded or 'none'})")


def _golden_history_stage(paths: list[Path]) -> StageResult:
    from checkers.history.run import check_history
    from traces.history import load
    t0 = time.monotonic()
    bad = []
    for p in paths:
        kind = p.stem[len("history-"):]
        v = check_history(load(p))
        types = {a.type for a in v.anomalies}
        if v.status != "invalid" or kind not in types:
            bad.append(f"{p.name}: {v.status}, {sorted(types)}")
    secs = time.monotonic() - t0
    if not paths:
        return StageResult("golden histories", "unknown", secs, "no golden histories found")
    if bad:
        return StageResult("golden histories", "fail", secs, "; ".join(bad))
    return StageResult("golden histories", "pass", secs, f"{len(paths)} histories, each anomaly found")


MINING_RUNS = 2000
MINING_SEED = 12


def _mining_stage(runs: int = MINING_RUNS, seed: int = MINING_SEED) -> StageResult:
    """Generates a few thousand runs with seeded violations (and a few corrupt rows) and mines
    them: exactly the planted runs must be found, each with its kind, and the corrupt ones
    reported. Runs the bucket kernel in this process (the engine Spark runs in mapInArrow),
    not on Spark: a Spark session takes 5-20 s to start on this machine and more under load,
    which alone would eat the stage's budget; tests/test_mine_spark.py covers Spark."""
    import tempfile
    import polars as pl
    from checkers.history.gen_runs import generate_dataset, planted_mismatches
    from checkers.history.mine import mine_local
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


def stages(quick: bool = False) -> list[tuple[str, Callable[[], StageResult]]]:
    out: list[tuple[str, Callable[[], StageResult]]] = [
        ("current exhausted", lambda: _explore_stage(
            "current exhausted at default bounds", "current", (), {}, None, False, CURRENT_TIME_LIMIT)),
    ]
    for p in sorted(CORPUS.glob("model-*.jsonl")):
        out.append((f"golden {p.name}", lambda p=p: _golden_model_stage(p)))
    hist = sorted(CORPUS.glob("history-*.jsonl"))
    out.append(("golden histories", lambda: _golden_history_stage(hist)))
    out.append(("mining", lambda: _mining_stage(500 if quick else MINING_RUNS)))
    teeth = TEETH[:2] if quick else TEETH
    for name, gen, without, bounds, invs in teeth:
        out.append((name, lambda n=name, g=gen, w=without, b=bounds, i=invs: _explore_stage(
            n, g, w, b, i, True, TEETH_TIME_LIMIT)))
    if not quick:
        for name, without, seed, steps in SIM_TEETH:
            out.append((name, lambda n=name, w=without, sd=seed, st=steps: _simulate_stage(n, w, sd, st)))
    return out


def run_suite(json_out: str | None = None, quick: bool = False,
              only: tuple[str, ...] = ()) -> int:
    console = Console()
    chosen = [(n, f) for n, f in stages(quick) if not only or any(o in n for o in only)]
    if not chosen:
        raise exitcodes.InputError(f"no stage matches {', '.join(only)}")
    console.print(f"kafkaverify check: {len(chosen)} stages")
    results: list[StageResult] = []
    for name, fn in chosen:
        with console.status(f"running: {name}"):
            r = fn()
        results.append(r)
        colour = {"pass": "green", "fail": "red", "unknown": "yellow"}[r.verdict]
        console.print(f"[{colour}]{r.verdict:>7}[/{colour}]  {r.name}  ({r.seconds:.1f}s)  {r.detail}")
    table = Table(title="invariant suite")
    for col in ("stage", "verdict", "seconds", "detail"):
        table.add_column(col)
    for r in results:
        colour = {"pass": "green", "fail": "red", "unknown": "yellow"}[r.verdict]
        table.add_row(r.name, f"[{colour}]{r.verdict}[/{colour}]", f"{r.seconds:.1f}", r.detail)
    console.print(table)
    if json_out:
        try:
            Path(json_out).write_text(json.dumps([r.__dict__ for r in results], indent=2))
        except OSError as e:
            raise exitcodes.InputError(f"cannot write {json_out}: {e.strerror}") from None
    if any(r.verdict == "fail" for r in results):
        return exitcodes.VIOLATION
    if any(r.verdict == "unknown" for r in results):
        return exitcodes.UNKNOWN
    return exitcodes.VALID
