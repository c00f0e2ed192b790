"""Benchmark of the history checkers: `python -m benchmarks.history [--ops N ...]`.

For each size, in a fresh subprocess (so that peak memory is that size's alone): generate a
valid history (seeded), then time on one core (a) the baseline, a plain Python producer-order
pass over acknowledged sends grouped by (process, partition), the shape a tight loop sees, and
(b) the full set of per-partition checks (index build, log rules, offset-witness
linearizability, consumer offsets). Reports ops/s, records/s, the ratio to the baseline, and
peak RSS (best of REPEAT timings). Then the exhaustive Wing–Gong checker's time against history size on small
one-partition histories, next to the fast checker on the same histories. Prints seed= and the
options first (house style §4)."""
from __future__ import annotations

import json
import os
import platform
import resource
import subprocess
import sys
import time

import click

REPEAT = 3


def _rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def one_size(ops: int, seed: int, partitions: int, full: bool) -> dict:
    from checkers.history.generate import Params, generate_valid
    from checkers.history.oracle.check import check_history, check_per_partition
    t0 = time.perf_counter()
    h = generate_valid(Params(seed=seed, ops=ops, partitions=partitions))
    gen_s = time.perf_counter() - t0
    rss_hist = _rss_mib()
    n = len(h.ops)
    records = sum(len(o.offsets) for o in h.ops if o.f == "poll" and o.offsets) + \
        sum(1 for o in h.ops if o.f == "send")
    # Baseline: offsets of acknowledged sends, grouped beforehand (not timed).
    groups: dict[tuple[int, int], list[int]] = {}
    for o in h.ops:
        if o.f == "send" and o.type == "ok":
            groups.setdefault((o.process, o.partition), []).append(o.offset)
    glist = list(groups.values())
    events = sum(map(len, glist))
    base_s = check_s = float("inf")
    for _ in range(REPEAT):     # best of REPEAT: the machine is shared
        t0 = time.perf_counter()
        bad = 0
        for offs in glist:
            prev = -1
            for x in offs:
                if x <= prev:
                    bad += 1
                prev = x
        base_s = min(base_s, time.perf_counter() - t0)
        t0 = time.perf_counter()
        v = check_per_partition(h)
        check_s = min(check_s, time.perf_counter() - t0)
    out = {"ops": n, "records": records, "gen_s": gen_s, "baseline_events": events,
           "baseline_s": base_s, "baseline_eps": events / base_s, "check_s": check_s,
           "ops_per_s": n / check_s, "records_per_s": records / check_s, "status": v.status,
           "rss_history_mib": rss_hist,
           "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    out["ratio_vs_baseline"] = out["ops_per_s"] / out["baseline_eps"]
    if full:
        t0 = time.perf_counter()
        fv = check_history(h)
        out["full_check_s"] = time.perf_counter() - t0
        out["full_status"] = fv.status
        out["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def exhaustive_growth(sizes: list[int], seeds: int) -> list[dict]:
    """Mean time per history of the exhaustive and the fast checker, split by verdict: an
    invalid history makes the search exhaust every order (the exponential case)."""
    from checkers.history.oracle import linearizable, wgl
    from checkers.history.generate import small_log_history
    from checkers.history.oracle.index import build
    rows = []
    for n in sizes:
        acc = {"valid": [0, 0.0, 0.0, 0], "invalid": [0, 0.0, 0.0, 0], "unknown": [0, 0.0, 0.0, 0]}
        for s in range(seeds):
            h = small_log_history(s, n, mutate=s % 2, overlap=20)
            part = build(h).parts.get("t-0")
            if part is None:
                continue
            t0 = time.perf_counter()
            verdict, st = wgl.check(part.sends + part.polls, max_states=1_000_000)
            slow = time.perf_counter() - t0
            t0 = time.perf_counter()
            linearizable.check_partition(part)
            fast = time.perf_counter() - t0
            a = acc[verdict]
            a[0] += 1
            a[1] += slow
            a[2] += fast
            a[3] = max(a[3], st)
        for verdict in ("valid", "invalid", "unknown"):
            k, slow, fast, st = acc[verdict]
            if k:
                rows.append({"ops": n, "verdict": verdict, "histories": k,
                             "exhaustive_ms": 1000 * slow / k, "fast_ms": 1000 * fast / k,
                             "max_states": st, "ratio": slow / fast if fast else float("inf")})
    return rows


@click.command()
@click.option("--ops", "sizes", type=int, multiple=True, help="history sizes (default 1e5 and 1e6)")
@click.option("--seed", type=int, default=1, show_default=True)
@click.option("--partitions", type=int, default=8, show_default=True)
@click.option("--full/--no-full", default=False, help="also time check_history (with the cycle graph)")
@click.option("--exhaustive-sizes", default="4,8,12,16,20,24", show_default=True)
@click.option("--exhaustive-seeds", type=int, default=10, show_default=True)
@click.option("--one", type=int, default=None, hidden=True)
def main(sizes, seed, partitions, full, exhaustive_sizes, exhaustive_seeds, one):
    """Benchmark the history checkers."""
    if one is not None:   # child process: one size, JSON on stdout
        print(json.dumps(one_size(one, seed, partitions, full)))
        return
    sizes = sizes or (100_000, 1_000_000)
    print(f"seed={seed} ops={list(sizes)} partitions={partitions} full={full} "
          f"python={platform.python_version()} cpus={os.cpu_count()}")
    print(f"{'ops':>9} {'records':>9} {'gen s':>7} {'check s':>8} {'ops/s':>10} {'records/s':>10} "
          f"{'baseline ev/s':>13} {'ratio':>6} {'peak MiB':>9} {'MiB/1k ops':>10}" + ("  full s" if full else ""))
    for n in sizes:
        cmd = [sys.executable, "-m", "benchmarks.history", "--one", str(n), "--seed", str(seed),
               "--partitions", str(partitions), "--full" if full else "--no-full"]
        r = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
        print(f"{r['ops']:>9} {r['records']:>9} {r['gen_s']:>7.2f} {r['check_s']:>8.2f} "
              f"{r['ops_per_s']:>10.0f} {r['records_per_s']:>10.0f} {r['baseline_eps']:>13.0f} "
              f"{r['ratio_vs_baseline']:>6.3f} {r['peak_rss_mib']:>9.0f} "
              f"{1000 * r['peak_rss_mib'] / r['ops']:>10.2f}"
              + (f"  {r['full_check_s']:.2f}" if full else "") + f"  {r['status']}")
    print("\nexhaustive (Wing–Gong + memo) vs fast linearizability, one partition, 3 processes, "
          "mean per history:")
    print(f"{'ops':>4} {'verdict':>8} {'n':>4} {'exhaustive ms':>14} {'max states':>10} {'fast ms':>8} {'ratio':>9}")
    for r in exhaustive_growth([int(x) for x in exhaustive_sizes.split(",")], exhaustive_seeds):
        print(f"{r['ops']:>4} {r['verdict']:>8} {r['histories']:>4} {r['exhaustive_ms']:>14.2f} "
              f"{r['max_states']:>10} {r['fast_ms']:>8.3f} {r['ratio']:>9.0f}")

if __name__ == "__main__":
    main()
