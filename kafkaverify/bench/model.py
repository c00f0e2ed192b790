"""Model-checker benchmark: distinct states/s and time to violation.

    python -m kafkaverify.bench.model [--quick]

Prints, for each configuration, distinct states, seconds, distinct states/s and the verdict;
and a baseline measured in the same run — a plain breadth-first search without symmetry
reduction or canonicalisation over the same small model — with the ratio against it. The
external yardstick (TLC on the public Kafka TLA+ specs, about 12,000 distinct states per
CPU-second on this machine kind) is quoted, not measured here.
"""
from __future__ import annotations

import argparse
import time

from checkers.explore import explore, plain_bfs
from spec import Model, make_config

CASES = [
    ("v0.10 KIP-101 data loss (S1)", "v0.10", (), {}, ("AckedDurable",)),
    ("v0.10 KIP-101 divergence (S2)", "v0.10", (), {"unflushed_loss": True, "min_isr": 1}, ("LogMatching",)),
    ("current without min-isr-hw", "current", ("min-isr-hw",), {}, None),
    ("current without epoch-truncation", "current", ("epoch-truncation",), {}, None),
    ("current without maximal-isr (min ISR 1)", "current", ("maximal-isr",), {"min_isr": 1}, None),
    ("kip-966 without isr-broker-epoch (disk loss, 1 crash)", "kip-966", ("isr-broker-epoch",),
     {"disk_loss": True, "crashes": 1}, None),
    ("kip-966 without eligible-leader-replicas (power failure, 1 crash)", "kip-966",
     ("eligible-leader-replicas",), {"unflushed_loss": True, "crashes": 1}, None),
    ("kip-966 one power failure, exhausted", "kip-966", (), {"unflushed_loss": True, "crashes": 1}, None),
    ("current exhausted (default bounds)", "current", (), {}, None),
]


def timed_plain_bfs(model: Model, seconds: float) -> tuple[int, float]:
    t0 = time.monotonic()
    n = len(plain_bfs(model, 10_000, seconds))
    return n, time.monotonic() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="skip the exhaustive `current` run")
    args = ap.parse_args()
    cases = CASES[:-1] if args.quick else CASES
    small = Model(make_config("current", records=1, crashes=1, elections=1, losses=0))
    n, secs = timed_plain_bfs(small, 60)
    r = explore(small, time_limit=60)
    print(f"baseline: plain BFS (no symmetry, no canonical form), small current model: "
          f"{n:,} states in {secs:.2f}s = {n / secs:,.0f} states/s")
    print(f"          explorer on the same model: {r.distinct:,} canonical states in {r.seconds:.2f}s "
          f"= {r.states_per_second:,.0f} states/s (ratio {r.states_per_second / (n / secs):.2f}; "
          f"it covers {n / r.distinct:.2f} concrete states per canonical one)")
    print(f"{'case':40} {'verdict':28} {'states':>10} {'seconds':>8} {'states/s':>9}")
    for name, gen, without, bounds, invs in cases:
        r = explore(Model(make_config(gen, without, **bounds)), invariants=invs, time_limit=900)
        verdict = f"{r.invariant} ({len(r.path)} steps)" if r.status == "violation" else r.status
        print(f"{name:40} {verdict:28} {r.distinct:>10,} {r.seconds:>8.1f} {r.states_per_second:>9,.0f}")
    print("yardstick (quoted): TLC ~12,000 distinct states per CPU-second on the public Kafka specs")


if __name__ == "__main__":
    main()
