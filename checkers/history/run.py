"""Runs every history check in a fixed order under one time limit and combines the verdict.
The per-partition checks come first (cheap, near-linear); the cycle search last. A check not
reached before the deadline is unknown (limited), never silently valid."""
from __future__ import annotations

import time

from checkers.history import consumer, cycles, linearizable, log_checks
from checkers.history.index import build
from checkers.history.result import CheckResult, Verdict, combine, finish
from traces.history import History

CHECK_NAMES = ("offsets", "writes", "polls", "sends", "linearizable", "consumer-offsets", "cycles")


def check_history(history: History, time_limit: float | None = None,
                  cycle_max_ops: int = 200_000) -> Verdict:
    deadline = time.monotonic() + time_limit if time_limit else None
    results: list[CheckResult] = []

    def late() -> bool:
        return deadline is not None and time.monotonic() > deadline

    index = build(history)
    results += log_checks.check_log(index)
    steps = [("linearizable", lambda: linearizable.check(index)),
             ("consumer-offsets", lambda: consumer.check(index)),
             ("cycles", lambda: cycles.check(index, lin_ok=_lin_ok(results), max_ops=cycle_max_ops,
                                             deadline=deadline))]
    for name, step in steps:
        if late():
            results.append(finish(name, 0, [], unknown="time limit reached before this check",
                                  limited=True))
        else:
            results.append(step())
    return combine(results, len(history.ops))


def check_per_partition(history: History) -> Verdict:
    """The near-linear per-partition set (what the benchmark measures): log rules, consumer
    offsets and offset-witness linearizability, without the cross-partition cycle search."""
    index = build(history)
    results = log_checks.check_log(index) + [linearizable.check(index), consumer.check(index)]
    return combine(results, len(history.ops))


def _lin_ok(results: list[CheckResult]) -> bool:
    return any(r.name == "linearizable" and r.status == "valid" for r in results)
