"""Nemesis benchmark: generated fault schedules on real clusters (kafkaverify/nemesis/).

    python -m benchmarks.nemesis [--schedules 200] [--seed 1] [--v010-budget 20] [--json]

1. `current`, acks=all, RF 3, min ISR 2, the producer at kafka-python's defaults (idempotent),
   faults crash, pause, partition, isolated power loss, controller-failover (--faults; real
   partitions: a private network namespace, re-executed under `unshare -n`): schedules run,
   verdicts, anomalies, conformance divergences, seconds per schedule; baseline: the same
   workload with an empty schedule, run in the same process (ratio = seconds per faulted
   schedule / seconds per fault-free run).
2. `v0.10` with crashes: schedules until the first failure (budget --v010-budget schedules),
   its shrunk schedule, and whether the model reproduces it (model_map.ask_model).
3. `current` with unguarded power loss (power-loss-any, with pauses and partitions that shrink
   the ISR): schedules until the first failure (budget --kip966-budget): KIP-966's "last
   replica standing" loss, which `current` does not promise to survive (traces/schedule.py
   ISOLATED).
Needs root, nft and ip for (1)'s partitions. Long: about 12 s per schedule on 2 cores.
"""
from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

from impl.netfault import enter_private_netns
from kafkaverify.nemesis.explore import default_workload, explore
from kafkaverify.nemesis.model_map import ask_model
from kafkaverify.nemesis.runner import run_schedule
from traces.schedule import Schedule

# power-loss is the isolated kind (traces/schedule.py ISOLATED): what `current` (Kafka 3.x, no
# KIP-966) promises to survive. Unguarded power loss really loses acknowledged writes in `current`
# when the last ISR member lost its unflushed log and is elected (model and broker agree): part 3.
CURRENT_FAULTS = ("crash", "pause", "partition", "power-loss", "controller-failover")
KIP966_FAULTS = ("power-loss-any", "pause", "partition")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.nemesis")
    ap.add_argument("--schedules", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--v010-budget", type=int, default=20)
    ap.add_argument("--kip966-budget", type=int, default=10)
    ap.add_argument("--time-limit", type=float, default=6 * 3600)
    ap.add_argument("--faults", default=",".join(CURRENT_FAULTS))
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(sys.argv[1:] if argv is None else argv)
    enter_private_netns(["-m", "benchmarks.nemesis", *(sys.argv[1:] if argv is None else argv)])
    out: dict = {"machine": f"{platform.machine()} {platform.python_version()}", "seed": a.seed}
    with tempfile.TemporaryDirectory(prefix="kv-bench-nemesis-") as tmp:
        tmp = Path(tmp)
        w = default_workload("kafka-python", consumers=1)
        base = run_schedule(Schedule("current", 3, (), w, seed=a.seed), tmp / "baseline", net=True)
        t0 = time.monotonic()
        summ = explore("current", 3, a.schedules, a.seed, tuple(a.faults.split(",")), w, tmp / "current", a.time_limit,
                       shrink_runs=3, net=True,
                       progress=lambda i, s, r: print(f"[{i:4d}] {r.status:8s} {r.seconds:5.1f}s {s.describe()}",
                                                      flush=True))
        secs = time.monotonic() - t0
        statuses: dict[str, int] = {}
        for _, r in summ.runs:
            statuses[r.status] = statuses.get(r.status, 0) + 1
        per = secs / max(1, len(summ.runs))
        out["current"] = {"schedules": len(summ.runs), "seconds": round(secs, 1), "verdicts": statuses,
                          "failures": len(summ.failures), "seconds_per_schedule": round(per, 2),
                          "baseline_seconds": round(base.seconds, 2), "baseline_status": base.status,
                          "ratio_to_baseline": round(per / base.seconds, 2) if base.seconds else None,
                          "stopped": summ.stopped,
                          "first_failure": summ.smallest[1].first_anomaly if summ.smallest else ""}
        t0 = time.monotonic()
        v = explore("v0.10", 3, a.v010_budget, a.seed, ("crash",), default_workload("kafka-python", consumers=0),
                    tmp / "v010", 1800, shrink_runs=3, net=True)
        found = v.smallest
        entry = {"budget_schedules": a.v010_budget, "runs": len(v.runs), "seconds": round(time.monotonic() - t0, 1),
                 "found": bool(found)}
        if found:
            s, r = found
            first = next(i for i, (_, rr) in enumerate(v.runs, 1) if rr.failed)
            m = ask_model(s, invariants=("LeaderCandidateCompleteness",) if "LeaderCandidate" in r.first_anomaly else None)
            entry.update(first_failure_at_run=first, shrunk=s.describe(), anomaly=r.first_anomaly,
                         model=f"{m.status} {m.invariant} in {len(m.path)} steps")
        out["v0.10"] = entry
        if a.kip966_budget:
            t0 = time.monotonic()
            k = explore("current", 3, a.kip966_budget, a.seed, KIP966_FAULTS, w, tmp / "kip966", 1800,
                        shrink_runs=0, net=True)
            entry = {"budget_schedules": a.kip966_budget, "runs": len(k.runs),
                     "seconds": round(time.monotonic() - t0, 1), "found": bool(k.smallest)}
            if k.smallest:
                s, r = k.smallest
                entry.update(first_failure_at_run=next(i for i, (_, rr) in enumerate(k.runs, 1) if rr.failed),
                             schedule=s.describe(), anomaly=r.first_anomaly)
            out["current power-loss-any (KIP-966)"] = entry
    print(json.dumps(out, indent=1) if a.json else "\n".join(f"{k}: {v}" for k, v in out.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
