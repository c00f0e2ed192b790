"""Hypothesis generates fault schedules (strategies over event lists, as its authors recommend for
data with a shrinkable structure), each run against a fresh real cluster by runner.run_schedule;
a run judged invalid fails the property and Hypothesis shrinks the schedule (fewer events,
shorter waits and durations, simpler targets).

Real runs take seconds each and are not bit-for-bit deterministic (timing), so Hypothesis's own
final replay may pass ("flaky"): the explorer therefore keeps the smallest failing schedule it saw
itself, bounds shrinking by `shrink_runs`, and reports that. One --seed fixes every generated
schedule (Hypothesis's @seed, no example database).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from hypothesis import HealthCheck, Phase, given, reject, seed as hyp_seed, settings, strategies as st
from hypothesis.errors import HypothesisException

from kafkaverify.nemesis.runner import RunResult, run_schedule
from kafkaverify.nemesis.workload import client_defaults
from traces.schedule import NEEDS_NET, WORKLOAD_DEFAULTS, Event, Schedule, save

# --faults names -> schedule faults they generate ("crash" brings restarts through duration_ms)
FAULT_CHOICES = ("crash", "pause", "partition", "power-loss", "power-loss-any", "controller-failover",
                 "session-expiry", "producer-restart", "consumer-crash")
DEFAULT_FAULTS = ("crash", "pause", "partition", "power-loss", "controller-failover")
MAX_EVENTS = 4


def events(faults: tuple[str, ...], brokers: int, topic: str) -> st.SearchStrategy[Event]:
    """One fault event. Waits and durations are multiples of 100 ms (shrink towards 0 / short)."""
    targets = st.sampled_from([f"leader:{topic}/0"] + [str(i) for i in range(brokers)] + ["controller"])
    sides = st.sampled_from([f"leader:{topic}/0"] + [str(i) for i in range(brokers)] + ["coord"])
    after = st.integers(0, 15).map(lambda x: x * 100)
    dur = st.integers(3, 40).map(lambda x: x * 100)

    def one(f: str) -> st.SearchStrategy[Event]:
        # power-loss: isolated (what `current` promises to survive; traces/schedule.py ISOLATED);
        # power-loss-any: whenever it comes (shows KIP-966's last-replica loss in `current`)
        if f == "power-loss":
            return st.builds(Event, after_ms=after, fault=st.just(f), target=targets, duration_ms=dur,
                             isolated=st.just(True))
        if f in ("crash", "pause", "power-loss-any"):
            return st.builds(Event, after_ms=after, fault=st.just(f.replace("-any", "")), target=targets,
                             duration_ms=dur)
        if f == "partition":
            return st.builds(lambda a, x, y, d: Event(a, "partition", between=(x, y), duration_ms=d),
                             after, sides, sides, dur).filter(lambda e: e.between[0] != e.between[1])
        if f == "controller-failover":
            return st.builds(Event, after_ms=after, fault=st.just(f), duration_ms=dur)
        if f == "session-expiry":
            return st.builds(Event, after_ms=after, fault=st.just(f), target=targets)
        return st.builds(Event, after_ms=after, fault=st.just(f))
    return st.one_of([one(f) for f in faults])


def schedules(generation: str, brokers: int, faults: tuple[str, ...], workload: dict,
              without: tuple[str, ...] = (), max_events: int = MAX_EVENTS) -> st.SearchStrategy[Schedule]:
    return st.lists(events(faults, brokers, workload["topic"]), min_size=1, max_size=max_events).map(
        lambda evs: Schedule(generation=generation, brokers=brokers, events=tuple(evs), workload=workload,
                             without=tuple(without)))


def size(s: Schedule) -> tuple[int, int]:
    """Smaller is simpler: fewer events, then less time in waits and durations."""
    return (len(s.events), sum(e.after_ms + (e.duration_ms or 0) for e in s.events))


@dataclass
class Summary:
    runs: list[tuple[Schedule, RunResult]] = field(default_factory=list)
    failures: list[tuple[Schedule, RunResult]] = field(default_factory=list)   # every failing run
    smallest: tuple[Schedule, RunResult] | None = None
    stopped: str = ""          # why exploration stopped early (time limit), if it did
    seconds: float = 0.0


def explore(generation: str, brokers: int, n_schedules: int, seed: int, faults: tuple[str, ...],
            workload: dict, out_dir: Path, time_limit_s: float, without: tuple[str, ...] = (),
            shrink_runs: int = 8, progress: Callable[[int, Schedule, RunResult], None] | None = None,
            net: bool = False, cluster=None) -> Summary:
    """Runs up to n_schedules generated schedules (stops at the first failure's shrink bound or
    the time limit); returns every run and the smallest failing schedule. cluster: a cluster
    file's ClusterSpec (kafkaverify/nemesis/cluster_file.py) to run against instead of our own
    brokers; its partitions are its hooks, not the network namespace."""
    summ = Summary()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    state = {"i": 0, "shrinks": 0}
    verdicts: dict[tuple, bool] = {}
    if not net and cluster is None:
        faults = tuple(f for f in faults if f not in NEEDS_NET)

    def over() -> bool:
        return time.monotonic() - t0 > time_limit_s

    @settings(max_examples=n_schedules, database=None, deadline=None, derandomize=False,
              phases=(Phase.generate, Phase.shrink), report_multiple_bugs=False,
              suppress_health_check=list(HealthCheck), print_blob=False)
    @hyp_seed(seed)
    @given(schedules(generation, brokers, faults, workload, without))
    def prop(s: Schedule) -> None:
        if run_or_recall(s):
            # one raise site: Hypothesis tells failures apart by where they were raised
            raise AssertionError("the schedule failed (see the explorer's summary)")

    def run_or_recall(s: Schedule) -> bool:
        """True when the schedule fails. A schedule already run answers from memory: Hypothesis
        replays its failing example before shrinking, and a real re-run might pass by timing
        (Hypothesis would call that flaky)."""
        seen = verdicts.get(s.events)
        if seen is not None:
            return seen
        shrinking = bool(summ.failures)
        if over():
            if not summ.stopped:
                summ.stopped = f"time limit {time_limit_s:g}s reached"
            if shrinking:
                return False    # stop shrinking: this candidate counts as passing
            reject()
        if shrinking:
            if state["shrinks"] >= shrink_runs:
                return False    # bound on real runs spent shrinking
            state["shrinks"] += 1
        state["i"] += 1
        s = Schedule(s.generation, s.brokers, s.events, s.workload, seed=seed, without=s.without)
        run_dir = out_dir / f"run-{state['i']:04d}"
        try:
            r = run_schedule(s, run_dir, net=net, cluster=cluster)
        except Exception as e:        # the harness itself failed: this run decides nothing
            r = RunResult("unknown", run_dir, reason=f"harness error: {e.__class__.__name__}: {e}")
        summ.runs.append((s, r))
        verdicts[s.events] = r.failed
        if progress:
            progress(state["i"], s, r)
        if r.failed:
            summ.failures.append((s, r))
            # Hypothesis proposes only candidates it orders as simpler than its current failing
            # example, so the latest failure is the simplest; `size` breaks ties for the report
            if summ.smallest is None or shrinking or size(s) < size(summ.smallest[0]):
                summ.smallest = (s, r)
        return r.failed

    try:
        prop()
    except (AssertionError, HypothesisException):
        pass          # the smallest failure is ours (summ.smallest), whatever Hypothesis concluded
    if summ.smallest is not None:
        save(out_dir / "shrunk-schedule.json", summ.smallest[0])
    summ.seconds = time.monotonic() - t0
    return summ


def default_workload(client: str, **over) -> dict:
    """The nemesis's workload: the client's own producer defaults (idempotence, retries, max in
    flight: workload.client_defaults), then the given settings (None = keep the default)."""
    return {**WORKLOAD_DEFAULTS, "client": client, **client_defaults(client, over.get("idempotence")),
            **{k: v for k, v in over.items() if v is not None}}
