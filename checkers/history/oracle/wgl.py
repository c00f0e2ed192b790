"""The exhaustive linearizability checker for one partition's log: Wing & Gong's search with
Lowe's memoisation (as in Porcupine), over the sequential specification stated in
linearizable.py. Deliberately straightforward: it exists to cross-check the fast offset-based
checker on small histories (differential testing, house style §7), not to be fast.

Search: repeatedly pick a not-yet-linearised operation that no other pending `ok` operation
precedes in real time, apply it to the log if legal, recurse; backtrack otherwise. `info` sends
may be linearised (at any offset some poll read their value at) or left out; `fail` sends never
take effect; only `ok` sends and polls must all be linearised. A state is (linearised set, log);
states already explored are not explored again. Bounded by `max_states`: beyond it, unknown.
"""
from __future__ import annotations

from traces.history import Op

VALID, INVALID, UNKNOWN = "valid", "invalid", "unknown"


def check(ops: list[Op], max_states: int = 200_000) -> tuple[str, int]:
    """Returns (verdict, states explored) for the sends and polls of one partition."""
    read_at: dict[str, set[int]] = {}
    for op in ops:
        if op.f == "poll" and op.type == "ok":
            for o, v in zip(op.offsets, op.values):
                read_at.setdefault(v, set()).add(o)
    cand: list[Op] = []
    for op in ops:
        if op.f == "send" and (op.type == "ok" or (op.type == "info" and op.value in read_at)):
            cand.append(op)
        elif op.f == "poll" and op.type == "ok":
            cand.append(op)
    n = len(cand)
    required = 0
    for i, op in enumerate(cand):
        if op.type == "ok":
            required |= 1 << i
    seen: set[tuple[int, tuple]] = set()
    states = 0

    def choices(op: Op) -> list[int | None]:
        if op.f == "poll":
            return [None]
        if op.type == "ok":
            return [op.offset]
        return sorted(read_at[op.value])

    def legal(op: Op, off: int | None, log: dict[int, str]) -> bool:
        if op.f == "poll":
            return all(log.get(o) == v for o, v in zip(op.offsets, op.values))
        return not log or off > max(log)

    # Iterative DFS with an explicit stack, so a deep search cannot overflow Python's stack.
    stack: list[tuple[int, dict[int, str]]] = [(0, {})]
    while stack:
        done, log = stack.pop()
        if done & required == required:
            return VALID, states
        key = (done, tuple(sorted(log.items())))
        if key in seen:
            continue
        seen.add(key)
        states += 1
        if states > max_states:
            return UNKNOWN, states
        # Earliest completion among pending required ops: nothing invoked after it may go next.
        horizon = min((cand[i].comp for i in range(n) if required >> i & 1 and not done >> i & 1),
                      default=None)
        for i in range(n - 1, -1, -1):
            if done >> i & 1:
                continue
            op = cand[i]
            if horizon is not None and op.inv > horizon:
                continue
            for off in choices(op):
                if legal(op, off, log):
                    nlog = log if off is None else {**log, off: op.value}
                    stack.append((done | 1 << i, nlog))
    return INVALID, states
