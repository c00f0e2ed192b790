"""What G-single and zombie fencing cost the oracle: `python -m benchmarks.history_rw [--ops N]
[--seed S] [--partitions P] [--repeat R]`.

Generates one valid transactional history (checkers/history/generate_txn.py: two transactional
producers taking turns, a read_committed consumer polling every partition after each
transaction ends, a final read) and a copy in which every consumer poll reports its
partition's end (`end_offset`: the offset after the last record sent to the partition before
the poll began, which is the end it read to: no transaction is open when it polls). Both are
checked by the oracle (`check_history`) in this process, alternately `--repeat` times; the
lowest CPU seconds of each are reported, the first being the same-run baseline of the second
(the difference is the anti-dependency graph and its search). Then the zombie-fencing rule
alone (`txns.zombie_commits`) against the index it reads (`index.build`), lowest of
`--repeat`. Prints seed= and the options first; the verdicts must be valid."""
from __future__ import annotations

import bisect
import copy
import time

import click


def with_ends(h):
    """A copy of h in which every ok consumer poll (not a final read) reports its partition's end:
    the offset after the last record sent there before the poll began."""
    h2 = copy.copy(h)
    h2.ops = [copy.copy(o) for o in h.ops]
    sent: dict[str, list[tuple[int, int]]] = {}
    for o in h2.ops:
        if o.f == "send" and o.offset is not None:
            sent.setdefault(o.tp, []).append((o.inv, o.offset))
    ends: dict[str, tuple[list[int], list[int]]] = {}
    for tp, xs in sent.items():
        xs.sort()
        run, best = [], -1
        for _, off in xs:
            best = max(best, off)
            run.append(best + 1)
        ends[tp] = ([i for i, _ in xs], run)
    for o in h2.ops:
        if o.f == "poll" and o.type == "ok" and not o.final and o.tp in ends:
            invs, run = ends[o.tp]
            k = bisect.bisect_left(invs, o.inv) - 1
            o.end_offset = run[k] if k >= 0 else 0
    return h2


def _cpu(fn) -> tuple[float, object]:
    c0 = time.process_time()
    r = fn()
    return time.process_time() - c0, r


@click.command()
@click.option("--ops", default=100_000, show_default=True)
@click.option("--seed", default=1, show_default=True)
@click.option("--partitions", default=4, show_default=True)
@click.option("--repeat", default=3, show_default=True)
def main(ops: int, seed: int, partitions: int, repeat: int) -> None:
    from checkers.history.generate_txn import generate_txn
    from checkers.history.oracle import txns
    from checkers.history.oracle.check import check_history
    from checkers.history.oracle.index import build
    print(f"seed={seed} ops={ops} partitions={partitions} repeat={repeat}", flush=True)
    h = generate_txn(seed, ops=ops, partitions=partitions)
    h.header["version"] = 2
    he = with_ends(h)
    n_end = sum(1 for o in he.ops if o.end_offset is not None)
    best = {"without end_offset": float("inf"), "with end_offset": float("inf")}
    for _ in range(repeat):
        for name, hist in (("without end_offset", h), ("with end_offset", he)):
            t, v = _cpu(lambda: check_history(hist))
            assert v.status == "valid", (name, v.status, sorted(v.types()))
            best[name] = min(best[name], t)
    base = best["without end_offset"]
    print(f"{len(h.ops)} operations, {n_end} polls with end_offset", flush=True)
    for name, t in best.items():
        print(f"  check_history {name}: {t:.3f} CPU-s ({t / base:.2f}x)", flush=True)
    tb = tz = float("inf")
    for _ in range(repeat):
        t, index = _cpu(lambda: build(h))
        tb = min(tb, t)
        t, found = _cpu(lambda: txns.zombie_commits(index))
        assert found == []
        tz = min(tz, t)
    print(f"  index.build: {tb:.3f} CPU-s; zombie_commits: {tz:.3f} CPU-s ({tz / tb:.2f}x of build)",
          flush=True)


if __name__ == "__main__":
    main()
