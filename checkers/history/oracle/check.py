"""The oracle's entry point: `check_history` runs every history check over Op objects in a fixed
order under one time limit and combines the verdict (`check_per_partition`: the same without
the cycle search). The per-partition checks come first (cheap, near-linear); the cycle search
last. A check not reached before the deadline is unknown (limited), never silently valid.

This is the reference the screens are tested against and the verdict the pipeline must give
(tests/test_history_columnar.py); the pipeline itself calls the rules below on flagged
partitions only (pipeline/judge.py), and this whole path for input the screens do not accept."""
from __future__ import annotations

import time
from typing import Callable

from checkers.history.oracle import consumer, cycles, linearizable, log_checks
from checkers.history.oracle.index import Index, build
from checkers.history.result import CHECK_NAMES, CheckResult, Verdict, combine, finish
from checkers.quiet_gc import quiet_gc
from traces.history import History


def check_history(history: History, time_limit: float | None = None,
                  cycle_max_ops: int = 200_000, deadline: float | None = None,
                  acyclic: Callable[[Index], int | None] | None = None) -> Verdict:
    """`deadline` (time.monotonic()) overrides `time_limit` when the caller's clock started
    earlier, e.g. before reading the file. `acyclic` (the pipeline's cycle screen,
    screens/cycles.py `acyclic_nodes`): the node count of the dependency graph when it has no
    cycle, else None; when it gives a count the cycle search is not run (and not bounded by
    `cycle_max_ops`): an acyclic graph has no cycle to find."""
    if deadline is None and time_limit:
        deadline = time.monotonic() + time_limit
    with quiet_gc():
        return _check_history(history, deadline, cycle_max_ops, acyclic)


def _cycles(index: Index, results: list[CheckResult], cycle_max_ops: int, deadline: float | None,
            acyclic: Callable[[Index], int | None] | None) -> CheckResult:
    # Without transactions, above the bound, linearizable partitions settle it by locality
    # (cycles.check): cheaper than any graph.
    local = (not index.txns and _lin_ok(results)
             and sum(len(p.sends) + len(p.polls) for p in index.parts.values()) > cycle_max_ops)
    # A poll that reports its partition's end adds anti-dependency edges (G-single) the screen's
    # graph does not hold: the search decides those histories.
    ends = any(p.end_offset is not None for part in index.parts.values() for p in part.polls)
    n = acyclic(index) if acyclic is not None and not local and not ends else None
    if n is None:
        return cycles.check(index, lin_ok=_lin_ok(results), max_ops=cycle_max_ops, deadline=deadline)
    return finish("cycles", n, [])      # the search's own result on an acyclic graph


def _check_history(history: History, deadline: float | None, cycle_max_ops: int,
                   acyclic: Callable[[Index], int | None] | None = None) -> Verdict:
    results: list[CheckResult] = []

    def late() -> bool:
        return deadline is not None and time.monotonic() > deadline

    if late():
        # The deadline passed before checking began (reading took it all): nothing checked.
        return combine([finish(n, 0, [], unknown="time limit reached before this check",
                               limited=True) for n in CHECK_NAMES], len(history.ops))
    index = build(history)
    results += log_checks.check_log(index)
    steps = [("linearizable", lambda: linearizable.check(index)),
             ("consumer-offsets", lambda: consumer.check(index)),
             ("cycles", lambda: _cycles(index, results, cycle_max_ops, deadline, acyclic))]
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
    with quiet_gc():
        index = build(history)
        results = log_checks.check_log(index) + [linearizable.check(index), consumer.check(index)]
        return combine(results, len(history.ops))


def _lin_ok(results: list[CheckResult]) -> bool:
    return any(r.name == "linearizable" and r.status == "valid" for r in results)
