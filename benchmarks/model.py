"""Model-checker benchmark: distinct states/s per core, bytes per visited state, time to each
fix's first counterexample — the fingerprint explorer against the reference explorer
(checkers/explore_reference.py) measured in the same run.

    python -m benchmarks.model [--exhaustive '{"records": 3}'] [--fix-limit 300]
                                      [--baseline-limit 0] [--skip-fixes] [--skip-exhaustive]
                                      [--walks N] [--bfs-depth MINUTES]

Each exhaustive variant (previous explorer; new explorer on one worker; on two) runs in a fresh
process, so its peak resident memory is its own: bytes per state = (peak RSS of the run's
processes - RSS of an idle interpreter that imported the model) / distinct states, next to the
explorer's own tables (fingerprints and parent links) and its largest pickled frontier per
state. CPU seconds are the run's processes' user+system time; states/s per core = distinct / CPU
seconds. The default bounds, `current` with 3 records, give 1,449,224 distinct states.

`--bfs-depth MINUTES`: how deep breadth-first search alone gets at the three-broker bounds of
`kafkaverify explore --brokers 3` in that many minutes (distinct states, deepest complete level,
the frontier then), the previous explorer and the fingerprint explorer on both cores one after
the other in the same run.

Time to first counterexample: for each fix, the user's command `kafkaverify explore --generation
current --without FIX --brokers 3` in a fresh process (the portfolio at its defaults), then
`current --brokers 3` itself; with `--baseline-limit` seconds also the previous explorer's
breadth-first search on each configuration. The external yardstick (TLC on the public Kafka
TLA+ specs, about 12,000 distinct states per CPU-second on this machine kind) is quoted, not
measured here.
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

DEFAULT_EXHAUSTIVE = {"records": 3}      # `current`, two brokers: 1,449,224 states


def _rss_kb() -> tuple[int, int]:
    return (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
            resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)


def _cpu() -> float:
    a = resource.getrusage(resource.RUSAGE_SELF)
    b = resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime


def one(variant: str, bounds: dict) -> dict:
    """Run one exhaustive variant in this process; returns its figures."""
    from checkers.explore import explore
    from checkers.explore_reference import explore_reference
    from spec import Model, make_config
    model = Model(make_config("current", **bounds))
    idle = _rss_kb()[0]
    c0, t0 = _cpu(), time.monotonic()
    if variant == "legacy":
        r = explore_reference(model, time_limit=3600, max_states=50_000_000)
        table = 0
    else:
        r = explore(model, time_limit=3600, max_states=50_000_000, workers=int(variant))
        table = r.table_bytes
    wall, cpu = time.monotonic() - t0, _cpu() - c0
    self_kb, child_kb = _rss_kb()
    # workers are forked from this process: each holds the idle image plus its shard
    peak = (self_kb - idle) + (max(0, child_kb - idle) * (int(variant) if variant not in ("legacy", "1") else 0))
    import spec
    return {"variant": variant, "build": spec.BUILD, "status": r.status, "distinct": r.distinct, "depth": r.depth,
            "wall": wall, "cpu": cpu, "rss_bytes": peak * 1024, "table_bytes": table,
            "frontier_bytes": getattr(r, "frontier_bytes", 0)}


def _run_one(variant: str, bounds: dict, build: str = "compiled") -> dict:
    """One variant in a fresh process, on the model build asked for (KAFKAVERIFY_MODEL)."""
    import os
    out = subprocess.run([sys.executable, "-m", "benchmarks.model", "--one", variant,
                          "--exhaustive", json.dumps(bounds)], capture_output=True, text=True, check=True,
                         env=dict(os.environ, KAFKAVERIFY_MODEL=build))
    d = json.loads(out.stdout.strip().splitlines()[-1])
    d["build"] = d.get("build", build)
    return d


VARIANTS = ("legacy", "1i", "1", "2")


def exhaustive(bounds: dict, variants: tuple = VARIANTS) -> None:
    print(f"exhaustive: current {bounds or '(two-broker defaults)'}, each variant in a fresh process")
    print(f"{'explorer':34} {'verdict':10} {'states':>10} {'wall s':>8} {'cpu s':>8} "
          f"{'st/s/core':>10} {'RSS B/st':>9} {'table B/st':>10} {'frontier B/st':>13}")
    rows = {}
    for key, v, build, label in (("legacy", "legacy", "interpreted", "previous explorer (baseline)"),
                                 ("1i", "1", "interpreted", "fingerprint explorer, 1 worker"),
                                 ("1", "1", "compiled", "  the same, compiled model"),
                                 ("2", "2", "compiled", "  compiled, 2 workers")):
        if key not in variants:
            continue
        d = _run_one(v, bounds, build)
        rows[key] = d
        if d["build"] != build:
            label += f" ({d['build']}: not built)"
        n = d["distinct"]
        print(f"{label:34} {d['status']:10} {n:>10,} {d['wall']:>8.1f} {d['cpu']:>8.1f} "
              f"{n / d['cpu']:>10,.0f} {d['rss_bytes'] / n:>9,.0f} {d['table_bytes'] / n:>10.1f} "
              f"{d.get('frontier_bytes', 0) / n:>13.1f}",
              flush=True)
    b, w1i, w1, w2 = (rows.get(k) for k in VARIANTS)
    if w1 and w1i:
        print(f"ratios: compiled / interpreted model, 1 worker: "
              f"{(w1['distinct'] / w1['cpu']) / (w1i['distinct'] / w1i['cpu']):.2f}x states per CPU-second "
              f"(same states: {w1['distinct'] == w1i['distinct']})")
    if w1 and b:
        print(f"ratios: compiled, 1 worker / baseline: {b['cpu'] / w1['cpu']:.2f}x states per CPU-second, "
              f"{b['rss_bytes'] / max(1, w1['rss_bytes']):.1f}x less memory")
    if w1 and w2:
        print(f"ratios: compiled, 2 workers / 1 worker: {w1['wall'] / w2['wall']:.2f}x wall-clock speed-up "
              f"({w2['distinct'] / w2['wall']:,.0f} against {w1['distinct'] / w1['wall']:,.0f} distinct "
              f"states per wall second; same states: {w1['distinct'] == w2['distinct']}); "
              f"load average {__import__('os').getloadavg()[0]:.1f}")


# The fixes of `current` whose bugs the three-broker search must find by itself (isr-broker-epoch,
# KIP-903, needs a lost disk, with which `current` itself loses data: it is shown under kip-966).
SEARCH_FIXES = ("controller-epoch-fencing", "epoch-truncation", "epoch-end-offset",
                "truncate-on-epoch-change", "fetch-epoch-fencing", "isr-expand-epoch-start",
                "maximal-isr", "min-isr-hw")


def _explore_cmd(without: tuple, fix_limit: float) -> list[str]:
    cmd = [sys.executable, "-m", "kafkaverify", "explore", "--generation", "current", "--brokers", "3"]
    for f in without:
        cmd += ["--without", f]
    if fix_limit != 300.0:
        cmd += ["--time-limit", f"{fix_limit:g}"]
    return cmd


def fixes(fix_limit: float, baseline_limit: float) -> None:
    """Each fix by the user's own command, `kafkaverify explore --generation current --without F
    --brokers 3` (its defaults: the three-broker bounds, the portfolio, both cores, seed 0), in a
    fresh process; then `current --brokers 3` itself, which must find nothing."""
    import os
    import re
    print(f"time to first counterexample: kafkaverify explore --generation current --without FIX "
          f"--brokers 3 (time limit {fix_limit:g}s); load average {os.getloadavg()[0]:.1f}")
    print(f"{'fix':26} {'exit':>4} {'wall s':>7}  result")
    for fix in SEARCH_FIXES + (None,):
        t0 = time.monotonic()
        out = subprocess.run(_explore_cmd((fix,) if fix else (), fix_limit), capture_output=True, text=True)
        secs = time.monotonic() - t0
        text = out.stdout
        v = re.search(r"^VIOLATION of (\w+)", text, re.M)
        steps = re.search(r"^counterexample \((\d+) steps\)", text, re.M)
        by = re.search(r"^found by (.*)$", text, re.M)
        if v:
            how = by.group(1) if by else ""
            res = f"{v.group(1)}, {steps.group(1)} steps, found by {how[:90]}"
        else:
            tail = [ln for ln in text.splitlines() if ln.startswith(("unknown", "no violation", "found"))]
            res = " | ".join(tail)[:300] or (out.stderr.strip().splitlines() or ["?"])[-1]
        print(f"{fix or '(none: current)':26} {out.returncode:>4} {secs:>7.1f}  {res}", flush=True)
        if baseline_limit > 0 and fix:
            from checkers.explore_reference import explore_reference
            from checkers.model_trace import DEFAULTS_3
            from spec import Model, make_config
            b = explore_reference(Model(make_config("current", (fix,), brokers=3, **DEFAULTS_3)),
                               time_limit=baseline_limit)
            print(f"{'':26} baseline BFS: " + (f"{b.invariant}, {len(b.path)} steps, {b.seconds:.1f}s"
                  if b.status == "violation" else f"{b.status} at depth {b.depth}, {b.seconds:.0f}s"))


def bfs_depth(minutes: float) -> None:
    """Breadth-first search alone at the three-broker bounds for `minutes` each: the previous
    explorer, then the fingerprint explorer on both cores (its default), each in this process
    one after the other. Reports distinct states, the deepest complete level and the frontier
    (states of the next level) when the time ran out."""
    import os
    from checkers.explore import default_workers, explore
    from checkers.explore_reference import explore_reference
    from checkers.model_trace import DEFAULTS_3
    from spec import Model, make_config
    model = Model(make_config("current", brokers=3, **DEFAULTS_3))
    print(f"breadth-first search alone, current --brokers 3 {DEFAULTS_3}, {minutes:g} min each; "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"{'explorer':40} {'verdict':11} {'states':>10} {'depth':>5} {'frontier':>9} {'wall s':>7} "
          f"{'cpu s':>7} {'states/wall-s':>13}")
    W = default_workers()
    for label, run in (("previous explorer (baseline)", lambda p: explore_reference(
                            model, max_states=10**9, time_limit=60 * minutes, progress=p, progress_every=0)),
                       (f"fingerprint explorer, {W} worker(s)", lambda p: explore(
                            model, max_states=10**9, time_limit=60 * minutes, progress=p, progress_every=0,
                            workers=W))):
        last = [0, 1, 1]

        def progress(depth, distinct, frontier, secs, last=last):
            if depth != last[0]:        # the first report of a level: its size
                last[:] = [depth, distinct, frontier]
        c0, t0 = _cpu(), time.monotonic()
        r = run(progress)
        wall, cpu = time.monotonic() - t0, _cpu() - c0
        print(f"{label:40} {r.status:11} {r.distinct:>10,} {r.depth:>5} {last[2]:>9,} {wall:>7.1f} "
              f"{cpu:>7.1f} {r.distinct / wall:>13,.0f}", flush=True)


def walks(n: int) -> None:
    """Swarm walks with the memo (checkers/portfolio.py WalkMemo) against the same walks asking
    the model every time, in the same run: `current --brokers 3` (no violation, so every seed
    walks its full round), seeds 0..n-1, one process each way."""
    from checkers.model_trace import DEFAULTS_3
    from checkers.portfolio import ROUND_STEPS, WalkMemo, swarm_walks
    from spec import Model, make_config

    class Asking(WalkMemo):
        def enabled(self, s):
            return self.model.enabled(s)

        def step(self, s, a):
            m = self.model
            t = m.step(s, a)
            return t, m.step_violation(s, t) or m.violation(t)

    model = Model(make_config("current", brokers=3, **DEFAULTS_3))
    got = {}
    for label, memo in (("model asked every step (baseline)", Asking(model)), ("WalkMemo", WalkMemo(model))):
        c0, t0 = _cpu(), time.monotonic()
        rs = [swarm_walks(model, s, ROUND_STEPS, memo=memo) for s in range(n)]
        wall, cpu = time.monotonic() - t0, _cpu() - c0
        steps = sum(r.steps for r in rs)
        got[label] = ([(r.steps, r.walks, r.violation) for r in rs], steps / cpu)
        print(f"walks, {label:34} {steps:>9,} steps {wall:>7.1f}s wall {cpu:>7.1f}s CPU "
              f"{steps / cpu:>8,.0f} steps/CPU-s", flush=True)
    (a, ra), (b, rb) = got.values()
    assert a == b, "the memo changed a walk"
    print(f"walks: same {n} seeds step for step; WalkMemo / baseline: {rb / ra:.2f}x steps per CPU-second")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.model", description=__doc__.splitlines()[0])
    ap.add_argument("--exhaustive", default=json.dumps(DEFAULT_EXHAUSTIVE),
                    help="bounds of the exhaustive `current` run, as JSON")
    ap.add_argument("--fix-limit", type=float, default=300.0)
    ap.add_argument("--baseline-limit", type=float, default=0.0,
                    help="also the previous explorer's BFS per fix for this long (0: not run)")
    ap.add_argument("--skip-fixes", action="store_true")
    ap.add_argument("--skip-exhaustive", action="store_true")
    ap.add_argument("--walks", type=int, default=0, metavar="N",
                    help="also time N seeds of swarm walks with and without the walk memo")
    ap.add_argument("--bfs-depth", type=float, default=0.0, metavar="MINUTES",
                    help="also how deep breadth-first search gets at three brokers in MINUTES, "
                         "the previous explorer and the new one")
    ap.add_argument("--variants", default=",".join(VARIANTS),
                    help="the exhaustive rows to run: legacy (previous explorer), 1i (1 worker, "
                         "interpreted model), 1 and 2 (compiled, 1 and 2 workers)")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    bounds = json.loads(args.exhaustive)
    if args.one:
        print(json.dumps(one(args.one, bounds)))
        return
    variants = tuple(v for v in args.variants.split(",") if v)
    if not set(variants) <= set(VARIANTS):
        ap.error(f"--variants: expected some of {','.join(VARIANTS)}")
    if not args.skip_exhaustive:
        exhaustive(bounds, variants)
    if args.walks:
        walks(args.walks)
    if args.bfs_depth > 0:
        bfs_depth(args.bfs_depth)
    if not args.skip_fixes:
        fixes(args.fix_limit, args.baseline_limit)
    print("yardstick (quoted): TLC ~12,000 distinct states per CPU-second on the public Kafka specs")


if __name__ == "__main__":
    main()
