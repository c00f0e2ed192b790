"""Shrinking an invalid history to a small sub-history that still shows the same anomaly type,
for bug reports. Witness-driven first (the witness alone, then with its processes' settings
and its partitions' final reads, then its partitions), then delta debugging (Zeller's ddmin,
complements only) on the first candidate that still fails, down to a 1-minimal set unless the
budget of checks or time runs out (then the smallest set found so far is returned, and said)."""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

from checkers.history.result import INVALID, Anomaly
from checkers.history.oracle.check import check_history
from traces.history import History, Op

CYCLE_PREFIX = ("G0", "G1c", "G-single")


@dataclass
class Shrunk:
    history: History
    anomaly: Anomaly            # the target anomaly as found in the shrunk history
    checks: int                 # predicate evaluations spent
    minimal: bool               # True if ddmin finished (1-minimal), False if a bound stopped it


class NothingToShrink(Exception):
    pass


def _shows(header: dict, ops: list[Op], kind: str) -> Anomaly | None:
    cyc = kind.startswith(CYCLE_PREFIX)
    v = check_history(History(header, ops), cycle_max_ops=200_000 if cyc else 0)
    for a in v.anomalies:
        if a.type == kind:
            return a
    return None


def shrink(h: History, kind: str | None = None, max_checks: int = 5000,
           time_limit: float = 60.0) -> Shrunk:
    v = check_history(h)
    if v.status != INVALID:
        raise NothingToShrink(f"the history is {v.status}, not invalid")
    target = next((a for a in v.anomalies if kind is None or a.type == kind), None)
    if target is None:
        raise NothingToShrink(f"the history shows no {kind} anomaly")
    kind = target.type
    deadline = time.monotonic() + time_limit
    wit = set(target.witness)
    by_id = h.by_id()
    procs = {by_id[i].process for i in wit}
    parts = {(by_id[i].topic, by_id[i].partition) for i in wit if by_id[i].topic is not None}
    ctx = {o.id for o in h.ops if (o.process in procs and o.f in ("producer_config", "assign", "subscribe"))
           or (o.final and (o.topic, o.partition) in parts)}
    part_ops = {o.id for o in h.ops if (o.topic, o.partition) in parts}
    candidates = [wit, wit | ctx, wit | ctx | part_ops, {o.id for o in h.ops}]
    checks = 0
    start = None
    for cand in candidates:
        ops = [o for o in h.ops if o.id in cand]
        checks += 1
        if _shows(h.header, ops, kind):
            start = ops
            break
    assert start is not None, "the full history shows the anomaly"

    # A sub-history must stay valid input: a process's transactions need its producer_config
    # (with the transactional_id), which is kept whenever one of its transactions' ops is.
    configs: dict[int, list[Op]] = {}
    for o in h.ops:
        if o.f == "producer_config":
            configs.setdefault(o.process, []).append(o)

    def closed(ops: list[Op]) -> list[Op]:
        need = {o.process for o in ops if o.txn is not None}
        if not need:
            return ops
        have = {o.id for o in ops}
        extra = [c for p in need for c in configs.get(p, []) if c.id not in have]
        return sorted(ops + extra, key=lambda o: (o.inv, o.id)) if extra else ops

    def test(ops: list[Op]) -> bool:
        nonlocal checks
        checks += 1
        return _shows(h.header, closed(ops), kind) is not None

    items, minimal = start, True
    n = 2
    while len(items) >= 2:
        if checks >= max_checks or time.monotonic() > deadline:
            minimal = False
            break
        size = math.ceil(len(items) / n)
        reduced = False
        for i in range(0, len(items), size):
            rest = items[:i] + items[i + size:]
            if rest and test(rest):
                items, n, reduced = rest, max(n - 1, 2), True
                break
            if checks >= max_checks or time.monotonic() > deadline:
                break
        if not reduced:
            if n >= len(items):
                break
            n = min(len(items), 2 * n)
    header = dict(h.header)
    meta = dict(header.get("meta", {}))
    meta["shrunk"] = {"from_ops": len(h.ops), "to_ops": len(items), "anomaly": kind}
    header["meta"] = meta
    items = closed(items)
    final = History(header, items)
    return Shrunk(final, _shows(h.header, items, kind), checks, minimal)
