"""Client explorations of the reference model: states, time, states/s and verdict for each
(docs/benchmarks/model.md, producers and consumer groups), with a same-run baseline (the explorer on `current` at its default
bounds, no clients: unchanged by the client fields).

    python -m benchmarks.model_clients [--quick]

`--quick` leaves out the two longest runs (the baseline and the group fail-over at two crashes).
Every case states what it must find; a case that finds something else is marked UNEXPECTED.
"""
from __future__ import annotations

import argparse
import time

from checkers.explore import explore
from checkers.golden import (GROUP_BOUNDS, GROUP_FAILOVER_BOUNDS, PRODUCER_CONNECTION_BOUNDS,
                             PRODUCER_FAULT_BOUNDS)
from kafkaverify.suite.stages import IDEMPOTENT_5_BOUNDS, IDEMPOTENT_6_BOUNDS
from spec import Model, make_config

NOIDEM = ("idempotent-producer",)
# (case, generation, without, bounds, invariants, expected: invariant name or "exhausted")
CASES = [
    ("reorder: no idempotence, retries 1, 2 in flight", "current", NOIDEM, PRODUCER_FAULT_BOUNDS,
     ("ProducerSendOrder",), "ProducerSendOrder"),
    ("no reorder: no idempotence, retries 1, 1 in flight", "current", NOIDEM,
     {**PRODUCER_FAULT_BOUNDS, "max_in_flight": 1}, ("ProducerSendOrder",), "exhausted"),
    ("duplicate: no idempotence, retries 1", "current", NOIDEM, PRODUCER_CONNECTION_BOUNDS,
     ("ProducerExactlyOnce",), "ProducerExactlyOnce"),
    ("no duplicate: no idempotence, retries 0", "current", NOIDEM,
     {**PRODUCER_CONNECTION_BOUNDS, "retries": 0}, ("ProducerExactlyOnce",), "exhausted"),
    ("idempotence, leader move, 2 in flight (all invariants)", "current", (), PRODUCER_FAULT_BOUNDS,
     None, "exhausted"),
] + [
    (f"idempotence, connection drops, {k} in flight ({k} records, retries 2)", "current", (),
     {**IDEMPOTENT_5_BOUNDS, "records": k, "max_in_flight": k}, None, "exhausted") for k in range(1, 6)
] + [
    ("idempotence, connection drops, 6 in flight (6 records, retries 2)", "current", (),
     IDEMPOTENT_6_BOUNDS, None, "ProducerExactlyOnce"),
    ("group without generation fencing", "current", ("group-generation-fencing",), GROUP_BOUNDS,
     None, "GroupFencedNeverCommits"),
    ("group with generation fencing", "current", (), GROUP_BOUNDS, None, "exhausted"),
    ("group, commit after, AtMostOnce asked", "current", (),
     {"consumers": 1, "records": 2, "crashes": 1, "elections": 0}, ("GroupAtMostOnce",), "GroupAtMostOnce"),
    ("group, commit before, AtLeastOnce asked", "current", (),
     {"consumers": 1, "records": 2, "crashes": 1, "elections": 0, "commit": "before"},
     ("GroupAtLeastOnce",), "GroupAtLeastOnce"),
    ("offsets partition v0.10, 2 crashes", "v0.10", (), GROUP_FAILOVER_BOUNDS,
     ("GroupCommittedOffsetNeverBack",), "GroupCommittedOffsetNeverBack"),
    ("offsets partition current, 1 crash", "current", (), {**GROUP_FAILOVER_BOUNDS, "crashes": 1, "elections": 1},
     None, "exhausted"),
]
LONG = [
    ("offsets partition current, 2 crashes", "current", (), GROUP_FAILOVER_BOUNDS, None, "exhausted"),
    ("baseline: current, default bounds, no clients", "current", (), {}, None, "exhausted"),
]


def run(case, generation, without, bounds, invariants, expected, time_limit: float) -> str:
    t0 = time.monotonic()
    r = explore(Model(make_config(generation, without, **bounds)), invariants=invariants,
                time_limit=time_limit)
    secs = time.monotonic() - t0
    got = r.invariant if r.status == "violation" else r.status
    verdict = f"{r.invariant}, {len(r.path)} steps" if r.status == "violation" else f"{r.status} (depth {r.depth})"
    mark = "" if got == expected else " UNEXPECTED"
    return (f"| {case} | {verdict}{mark} | {r.distinct:,} | {secs:.1f} | "
            f"{r.distinct / secs if secs > 0 else 0:,.0f} |")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.model_clients")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--time-limit", type=float, default=600.0)
    args = ap.parse_args(argv)
    print("| case | verdict | distinct states | seconds | states/s |")
    print("|---|---|---:|---:|---:|")
    for c in CASES + ([] if args.quick else LONG):
        print(run(*c, time_limit=args.time_limit), flush=True)


if __name__ == "__main__":
    main()
