"""Benchmark of the z3 engine: induction solve times by replicas and log length, and BMC depth
and time to the first counterexample for v0.10 and `current --without FIX` (next to the
explorer's time on the same config, in the same run).

    nice -n 15 python -m benchmarks.prove induction --brokers 3 5 --records 2 4
    nice -n 15 python -m benchmarks.prove induction --brokers 2 3 --records 2 --invariant \
        LogMatching StrongIsr --baseline
    nice -n 15 python -m benchmarks.prove induction --brokers 3 5 7 --records 2 4 \
        --invariant StrongIsr --generation current kip-966
    nice -n 15 python -m benchmarks.prove induction --brokers 2 3 5 --records 4 \
        --invariant LogMatching ReplicationQuorumSuperset --pauses 0 1 2
    nice -n 15 python -m benchmarks.prove bmc --depth 8
    nice -n 15 python -m benchmarks.prove bmc3 --depth 30 --time-limit 120
    nice -n 15 python -m benchmarks.prove fixes --time-limit 60
    nice -n 15 python -m benchmarks.prove fixes --fix epoch-truncation --time-limit 300
    nice -n 15 python -m benchmarks.prove producers --time-limit 60
    nice -n 10 python -m benchmarks.prove producer-induction --upto 6 --baseline-limit 120
    nice -n 15 python -m benchmarks.prove producer-failover --upto 3 --time-limit 120
    nice -n 15 python -m benchmarks.prove producer-drops --upto 3 --time-limit 120
    nice -n 15 python -m benchmarks.prove producer-failover --upto 5 --only "2 brokers, 1" \
        --time-limit 120
    nice -n 15 python -m benchmarks.prove producer-failover --chained --upto 5 --time-limit 120
    POLARS_MAX_THREADS=1 nice -n 15 python -m benchmarks.prove producer-passes \
        --records 1 2 3 --time-limit 900 --baseline-limit 450
    nice -n 15 python -m benchmarks.prove producer-passes --records 3 4 5 \
        --baseline-way no-shadows --workers-only --time-limit 1200
    nice -n 10 python -m benchmarks.prove three --time-limit 180
    nice -n 15 python -m benchmarks.prove three-guided --fix isr-expand-epoch-start \
        --depths 6 8 10 14 --time-limit 600
    nice -n 15 python -m benchmarks.prove kinduction --brokers 2 3 --records 2 --k 3
    nice -n 15 python -m benchmarks.prove spacer --time-limit 120 --cex-limit 300
    nice -n 15 python -m benchmarks.prove spacer-rules --time-limit 120
    nice -n 15 python -m benchmarks.prove three-steps --time-limit 300

`fixes` covers v0.10 and `current --without F` for every replication fix F of spec/config.py
(isr-broker-epoch and eligible-leader-replicas under `kip-966`, FIX_GENERATION), each at the smallest bounds where its bug
shows (the explorer's shortest counterexample), and says where the encoding cannot express the
bug (checkers/prove/encoding.supported).
"""
from __future__ import annotations

import argparse
import time

from checkers.explore import explore
from checkers.prove.bmc import bmc
from checkers.prove.encoding import supported
from checkers.prove.induction import prove
from checkers.prove.tight_bounds import THREE_TIGHT, golden_instances
from kafkaverify.runs.prove import prove_config
from spec import Model, make_config
from spec.config import CLIENT_FIXES, GENERATIONS

BMC_CASES = [  # (generation, without, bounds, invariant restriction)
    ("v0.10", (), {}, None),
    ("current", ("min-isr-hw",), {}, None),
    ("current", ("epoch-truncation",), {}, None),
    ("current", ("maximal-isr",), {"min_isr": 1}, None),
]
# Fixes the explorer finds only with three replicas (random walks or scripts): both engines on
# the same config with the same time limit, in one run.
THREE = {"brokers": 3, "records": 3, "crashes": 3, "elections": 3, "unflushed_loss": True}
BMC_THREE = [
    ("current", ("truncate-on-epoch-change",), THREE, ("LogMatching",)),
    ("current", ("epoch-end-offset",), THREE, ("LogMatching",)),
    ("current", ("fetch-epoch-fencing",), {**THREE, "unflushed_loss": False}, None),
    ("current", ("isr-expand-epoch-start",), {**THREE, "unflushed_loss": False, "losses": 0}, None),
]
# The same fixes at their tightest bounds: checkers/prove/tight_bounds.py THREE_TIGHT.


def run_three(time_limit: float, bits: int | None, only: list[str] | None = None,
              explorer: bool = True) -> None:
    """Both engines on each three-replica fix at its tight bounds, one after the other in one
    run, the same time limit: BMC as one query at the explorer's depth (`one_query`: paths of at
    most that many steps), bit-blasted, with partial-order reduction, replayed on spec; then
    the explorer's portfolio (breadth-first search, then swarm walks). Seconds to the first
    counterexample of each, and the machine's 1-minute load average. `bits` None: the
    narrowest signed width that holds a version grown by one per step to the depth (values
    past it wrap, and a wrapped path would fail its replay on spec, never pass it)."""
    import os
    print("| config | invariant | BMC (one query at depth D) | BMC s | explorer | explorer s | load |\n"
          "|---|---|---|---:|---|---:|---:|")
    for fix, bounds, inv, depth, slots, epochs in THREE_TIGHT:
        if only and fix not in only:
            continue
        width = bits or max(5, (depth + 1).bit_length() + 1)
        m = Model(make_config("current", (fix,), **bounds))
        name = f"--without {fix}" + "".join(f" --{k.replace('_', '-')} {v}" for k, v in bounds.items())
        load = os.getloadavg()[0]
        r = bmc(m, depth, invariants=(inv,), time_limit=time_limit, one_query=True, por=True,
                bits=width, slots=slots, epochs=epochs)
        if r.status == "violation":
            bm = f"{r.invariant} in {r.depth} steps" + (f" (spec disagrees: {r.problem})" if r.problem
                                                        else ", replayed on spec")
        else:
            bm = f"{r.status} (D = {depth}): " + ("no path within the bounds" if r.message else "time limit")
        bm += f"; {width}-bit, {slots} slot(s), {epochs} epochs"
        xs, ex = float("nan"), "not run"
        if explorer:
            ex, xs = _explorer_row(m, inv, time_limit)
        print(f"| {name} | {inv} | {bm} | {r.seconds:.1f} | {ex} | {xs:.1f} | {load:.1f} |", flush=True)


def _explorer_cell(m, invs, time_limit: float) -> tuple[str, float]:
    """The breadth-first explorer on the same config (the producer benches' baseline): what it
    found, and its seconds."""
    t0 = time.monotonic()
    x = explore(m, time_limit=time_limit, invariants=invs)
    xs = time.monotonic() - t0
    return (f"{x.invariant} at {len(x.path)}" if x.status == "violation"
            else f"{x.status} (depth {x.depth})"), xs


def _explorer_row(m, inv: str, time_limit: float) -> tuple[str, float]:
    """The explorer's portfolio on the same config: what it found, and its seconds."""
    from checkers.portfolio import search
    t0 = time.monotonic()
    x = search(m, time_limit=time_limit, invariants=(inv,))
    xs = time.monotonic() - t0
    return ((f"{x.invariant} in {len(x.path)} steps ({x.found_by.split(' (')[0]})"
             if x.status == "violation" else f"{x.status} (breadth-first to depth {x.depth})"), xs)


def run_three_steps(time_limit: float, only: list[str] | None = None, explorer: bool = True,
                    modes: tuple[str, ...] = ("parallel", "chained")) -> None:
    """The three-replica fixes with BMC over parallel and chained steps (checkers/prove/steps.py),
    one after the other in one run. Per fix: the golden counterexample's length, the fewest
    parallel steps it sorts into (steps.parallel_length) and the chained steps it fits in
    (steps.chain_passes), computed first; then one BMC query at each of those depths (paths of
    at most that many steps, bit-blasted as in `three`, replayed on spec step by step), then
    the explorer's portfolio on the same config with the same limit. Seconds to the first
    counterexample of each and the 1-minute load average."""
    import os

    from checkers.prove.steps import chain_order, chain_passes, parallel_length, read_write_sets
    print("| config (`current`, 3 brokers) | invariant | golden path: actions / parallel / chained "
          "| BMC | BMC s | explorer | explorer s | load |\n|---|---|---|---|---:|---|---:|---:|")
    for fix, bounds, inv, depth, slots, epochs in THREE_TIGHT:
        if only and fix not in only:
            continue
        model, enc, path, seq = golden_instances(fix)
        rw = read_write_sets(enc)
        target = {"sequential": len(path), "parallel": parallel_length(seq, rw),
                  "chained": chain_passes(seq, rw, chain_order(enc))}
        width = max(5, (depth + 1).bit_length() + 1)
        name = f"--without {fix}" + "".join(f" --{k.replace('_', '-')} {v}" for k, v in bounds.items())
        shape = f"{len(path)} / {target['parallel']} / {target['chained']}"
        for mode in modes:
            load = os.getloadavg()[0]
            r = bmc(model, target[mode], invariants=(inv,), time_limit=time_limit, one_query=True,
                    bits=width, slots=slots, epochs=epochs, steps=mode, por=mode == "sequential")
            if r.status == "violation":
                bm = (f"{mode} D = {target[mode]}: {r.invariant}, {len(r.actions)} actions in "
                      f"{len(r.steps)} steps ({'+'.join(map(str, r.steps))})"
                      + (f" (spec disagrees: {r.problem})" if r.problem else ", replayed on spec"))
            else:
                bm = f"{mode} D = {target[mode]}: " + ("no path within the bounds" if r.message
                                                         else "unknown (time limit)")
            print(f"| {name} | {inv} | {shape} | {bm} | {r.seconds:.1f} | | | {load:.1f} |", flush=True)
        if explorer:
            load = os.getloadavg()[0]
            ex, xs = _explorer_row(model, inv, time_limit)
            print(f"| {name} | {inv} | {shape} | | | {ex} | {xs:.1f} | {load:.1f} |", flush=True)


def run_three_guided(time_limit: float, depths: list[int], only: list[str] | None = None,
                     explorer: bool = True, lemma_limit: float = 600.0,
                     subset: list[str] | None = None) -> None:
    """Guided BMC (checkers/prove/guided.py) on the three-replica fixes at their tight bounds,
    in one run: the lemmas Houdini proves inductive for the buggy configuration itself, then
    per depth (each of `depths` not above the explorer's depth D) the same one-query BMC
    as `three` unguided and guided by those lemmas (seconds to unsat below D, to the replayed
    counterexample at D), then the explorer's portfolio to the same counterexample. Plain and
    guided queries differ only in the guide; the 1-minute load average per row. `subset`: guide
    with only those of the proved lemmas (each holds in every reachable state, so any subset
    is a sound guide too; a smaller one is a smaller formula)."""
    import os

    from checkers.prove.guided import inductive_lemmas, lemma_guide
    print("| config | invariant | depth | plain BMC | plain s | guided BMC | guided s | ratio | load |\n"
          "|---|---|---:|---|---:|---|---:|---:|---:|")
    for fix, bounds, inv, depth, slots, epochs in THREE_TIGHT:
        if only and fix not in only:
            continue
        m = Model(make_config("current", (fix,), **bounds))
        name = f"--without {fix}"
        lem = inductive_lemmas(m, time_limit=lemma_limit)
        print(f"lemmas for {name}: {lem.verdict} in {lem.seconds:.1f} s, {lem.rounds} round(s); "
              f"proved: {', '.join(lem.proved) or 'none'}; dropped: "
              + ("; ".join(f"{k} ({v})" for k, v in lem.dropped.items()) or "none"), flush=True)
        if lem.verdict != "proved":
            continue
        used = tuple(x for x in lem.proved if not subset or x in subset)
        if subset:
            print(f"guide: {', '.join(used)}", flush=True)
        guide = lemma_guide(used)

        def verdict(r, d):
            if r.status == "violation":
                return f"{r.invariant} in {r.depth} steps" + (f" (spec disagrees: {r.problem})"
                                                             if r.problem else ", replayed on spec")
            return "unsat (no path)" if r.message else "unknown (time limit)"

        for d in sorted({x for x in depths if x <= depth}):
            width = max(5, (d + 1).bit_length() + 1)
            enc = dict(invariants=(inv,), time_limit=time_limit, one_query=True, por=True,
                       bits=width, slots=slots, epochs=epochs)
            load = os.getloadavg()[0]
            p = bmc(m, d, **enc)
            g = bmc(m, d, guide=guide, **enc)
            done = (p.status != "unknown" or p.message) and (g.status != "unknown" or g.message)
            ratio = (f"{p.seconds / max(g.seconds, 1e-3):.1f}" if done else
                     f"> {p.seconds / max(g.seconds, 1e-3):.1f}" if g.status != "unknown" or g.message
                     else "-")
            print(f"| {name} | {inv} | {d} | {verdict(p, d)} | {p.seconds:.1f} | {verdict(g, d)} | "
                  f"{g.seconds:.1f} | {ratio} | {load:.1f} |", flush=True)
        if explorer:
            ex, xs = _explorer_row(m, inv, time_limit)
            print(f"explorer on {name}: {ex}, {xs:.1f} s (load {os.getloadavg()[0]:.1f})", flush=True)


# Per fix: the smallest bounds where its removal shows, and the invariant it breaks there.
SMALL = {"records": 1, "crashes": 1, "elections": 1, "losses": 0}
FIX_BOUNDS = {
    "min-isr-hw": (SMALL, ("MinIsrDurability",)),
    "maximal-isr": ({**SMALL, "min_isr": 1}, ("ReplicationQuorumSuperset",)),
    "epoch-truncation": ({**SMALL, "min_isr": 1}, ("StrongIsr",)),
    "truncate-on-epoch-change": (BMC_THREE[0][2], BMC_THREE[0][3]),
    "epoch-end-offset": (BMC_THREE[1][2], BMC_THREE[1][3]),
    "fetch-epoch-fencing": (BMC_THREE[2][2], BMC_THREE[2][3]),
    "isr-expand-epoch-start": (BMC_THREE[3][2], BMC_THREE[3][3]),
    # a deposed (zombie) controller's stale LeaderAndIsr: a pause outlasting its session
    "controller-epoch-fencing": ({**SMALL, "crashes": 0, "pauses": 1}, ("UniqueLeaderPerEpoch",)),
    # a broker returning with an empty disk; shown under kip-966 (FIX_GENERATION), since
    # `current` with a lost disk loses data with every fix on
    "isr-broker-epoch": ({**SMALL, "disk_loss": True}, ("StrongIsr",)),
    # KIP-966: the last ISR member loses its unflushed tail in a power failure and is
    # re-elected (golden trace model-kip966-last-replica-standing.jsonl); `current` is
    # `kip-966` without this fix
    "eligible-leader-replicas": ({**SMALL, "unflushed_loss": True}, ("AckedDurable",)),
}
# Fixes whose bug is shown under another generation than `current`.
FIX_GENERATION = {"isr-broker-epoch": "kip-966", "eligible-leader-replicas": "kip-966"}
# The encoding's own bounds where the default ones make BMC needlessly slow: the lost-disk path
# sends no LeaderAndIsr and changes no leader epoch (tests/test_prove_bmc_fixes.py uses the same).
FIX_ENCODING = {"isr-broker-epoch": {"bits": 6, "slots": 1, "epochs": 1, "por": True},
                # one LeaderAndIsr (the re-election), leader epochs 0 and 1
                "eligible-leader-replicas": {"bits": 6, "slots": 1, "epochs": 2, "por": True}}


def fix_cases():
    """(generation, without, bounds, invariants) for v0.10 and every replication fix of
    `kip-966` (`current` and KIP-966's ELR; the fix list is spec/config.py's; a fix without
    chosen bounds gets defaults)."""
    yield "v0.10", (), SMALL, ("MinIsrDurability",)
    for f in sorted(GENERATIONS["kip-966"] - CLIENT_FIXES):
        bounds, invs = FIX_BOUNDS.get(f, ({}, None))
        yield FIX_GENERATION.get(f, "current"), (f,), bounds, invs


def run_fixes(depth: int, time_limit: float, only: list[str] | None = None) -> None:
    print("| config | invariant | BMC | BMC s | explorer | explorer s | ratio BMC/explorer |\n"
          "|---|---|---|---:|---|---:|---:|")
    for gen, without, bounds, invs in fix_cases():
        if only and not set(only) & (set(without) or {gen}):
            continue
        m = Model(make_config(gen, without, **bounds))
        name = gen + "".join(f" --without {w}" for w in without) + "".join(
            f" --{k.replace('_', '-')}" + ("" if v is True else f" {v}") for k, v in bounds.items())
        why = supported(m.config)
        if why:
            bm, bs = f"not encoded: {why}", float("nan")
        else:
            f = without[0] if without else ""
            r = bmc(m, depth, invariants=invs, time_limit=time_limit, **FIX_ENCODING.get(f, {}))
            bm = f"{r.invariant} at depth {r.depth}" if r.status == "violation" else f"{r.status} to depth {r.depth}"
            if r.problem:
                bm += f" (spec disagrees: {r.problem})"
            bs = r.seconds
        t0 = time.monotonic()
        x = explore(m, time_limit=time_limit, invariants=invs)
        xs = time.monotonic() - t0
        ex = f"{x.invariant} at {len(x.path)}" if x.status == "violation" else x.status
        ratio = f"{bs / max(xs, 1e-3):.0f}" if bs == bs and x.status == "violation" and "at depth" in bm else "-"
        print(f"| {name} | {', '.join(invs or ('all',))} | {bm} | {bs:.1f} | {ex} | {xs:.1f} | {ratio} |",
              flush=True)


# The producer results: the explorer's connection-drop bounds (1 broker, K records,
# K in flight, retries 2, one dropped connection) and the reordering on one broker.
DROPS = {"brokers": 1, "producers": 1, "retries": 2, "crashes": 0, "elections": 0, "min_isr": 1}
REORDER = {"brokers": 1, "producers": 1, "records": 2, "max_in_flight": 2, "retries": 1,
           "crashes": 1, "elections": 1, "losses": 0, "min_isr": 1}


def producer_cases(upto: int):
    """(name, without, bounds, depth or None for the diameter, write slots, expected)."""
    yield ("reorder: no idempotence, 2 in flight, retries 1", ("idempotent-producer",), REORDER,
           16, None, "refuted")
    for k in range(1, min(upto, 5) + 1):
        yield (f"idempotence, {k} in flight ({k} records)", (),
               {**DROPS, "records": k, "max_in_flight": k}, None, k, "proved")
    if upto >= 6:
        yield ("idempotence, 6 in flight (6 records)", (), {**DROPS, "records": 6, "max_in_flight": 6},
               25, 12, "refuted")


def run_producers(time_limit: float, upto: int, bits: int = 16) -> None:
    import os

    from checkers.prove.differential import diameter
    print("| case | invariants | method | z3 verdict | z3 s | diameter s | explorer | explorer s | "
          "load (1 min) |\n|---|---|---|---|---:|---:|---|---:|---:|")
    for name, without, bounds, depth, writes, _ in producer_cases(upto):
        m = Model(make_config("current", without, **bounds))
        invs = ("ProducerSendOrder",) if without else ("ProducerSendOrder", "ProducerExactlyOnce")
        load = os.getloadavg()[0]
        t0 = time.monotonic()
        dia = diameter(m) if depth is None else None     # explicit BFS of spec
        ds = time.monotonic() - t0
        d = depth if depth is not None else dia
        r = bmc(m, d, invariants=invs, time_limit=time_limit, exhaustive=True, writes=writes,
                bits=bits)
        zs = r.seconds
        if r.status == "violation":
            verdict = f"refuted: {r.invariant} in {r.depth} steps" + (f" ({r.problem})" if r.problem else
                                                                     ", replayed on spec")
        elif r.status == "clean" and dia is not None:
            verdict = "proved (clean to the diameter)"
        else:
            verdict = r.status + (f" ({r.message})" if r.message else " (time limit)")
        method = f"exhaustive BMC, depth {d}" + (" = diameter" if dia is not None else "") + (
            f", {writes} write slots" if writes else "") + (f", {bits}-bit" if bits else ", integers")
        ex, xs = _explorer_cell(m, invs, time_limit)
        print(f"| {name} | {', '.join(invs)} | {method} | {verdict} | {zs:.1f} | {ds:.1f} | {ex} | {xs:.1f} | "
              f"{load:.1f} |", flush=True)


# Producers across a leader fail-over: a crash and an election while batches are in
# flight. On one broker the crashed leader restarts and is elected again in a new epoch, its
# producer state rebuilt from its own log (with unflushed loss: from what survived); on two the
# follower takes over with its own log. No dropped connection: every retry is an error's.
FAILOVER = {"producers": 1, "retries": 2, "crashes": 1, "elections": 1, "losses": 0, "min_isr": 1}


def failover_cases(upto: int):
    """(name, without, bounds, depth or None for the diameter, bmc options, invariants). The
    proofs are exhaustive queries (a path past the slots is sought and makes the answer
    unknown, so small slots stay sound); the reordering is a one-query refutation search whose
    path spec replays, with the encoding's LeaderAndIsr slots and leader epochs cut to what one
    election needs (1 and 2)."""
    both = ("ProducerSendOrder", "ProducerExactlyOnce")
    small = {"slots": 1, "epochs": 2}
    yield ("reorder across a fail-over: no idempotence, 2 brokers, 2 in flight, retries 1",
           ("idempotent-producer",), {**FAILOVER, "brokers": 2, "records": 2, "max_in_flight": 2,
                                      "retries": 1}, 14,
           {"one_query": True, "bits": 8, "writes": 3, "por": True, **small}, ("ProducerSendOrder",))
    for k in range(1, upto + 1):
        yield (f"idempotence, 1 broker, {k} in flight ({k} records)", (),
               {**FAILOVER, "brokers": 1, "records": k, "max_in_flight": k}, None,
               {"exhaustive": True, "bits": 16, "writes": k, **small}, both)
    for k in range(1, min(upto, 2) + 1):
        yield (f"idempotence, 1 broker, unflushed loss, {k} in flight ({k} records)", (),
               {**FAILOVER, "brokers": 1, "records": k, "max_in_flight": k, "unflushed_loss": True},
               None, {"exhaustive": True, "bits": 16, "writes": k + 1, **small}, both)
    if upto >= 3:
        # a power failure loses acknowledged records on the only replica; the next record takes
        # their offset (the explorer's shortest: 22 steps); no producer can prevent that
        yield ("idempotence, 1 broker, unflushed loss, 3 in flight (3 records)", (),
               {**FAILOVER, "brokers": 1, "records": 3, "max_in_flight": 3, "unflushed_loss": True},
               22, {"one_query": True, "bits": 8, "writes": 3, **small}, both)
    yield ("idempotence, 2 brokers, 1 in flight (1 record)", (),
           {**FAILOVER, "brokers": 2, "records": 1, "max_in_flight": 1}, None,
           {"exhaustive": True, "bits": 16, "writes": 1, **small}, both)


def chained_failover_cases(upto: int):
    """The fail-over proofs with chained steps: 1 broker 1..2 in flight, 2 brokers
    1..upto in flight. On two brokers the encoding needs 2 LeaderAndIsr slots, 3 leader epochs
    and K + 1 write slots (checked on every reachable state at K = 1: none is past them, no
    enabled instance leaves them); smaller ones make the exhaustive query unknown."""
    both = ("ProducerSendOrder", "ProducerExactlyOnce")
    for k in range(1, min(upto, 2) + 1):
        yield (f"idempotence, 1 broker, {k} in flight ({k} records)", (),
               {**FAILOVER, "brokers": 1, "records": k, "max_in_flight": k}, None,
               {"exhaustive": True, "bits": 16, "writes": k, "slots": 1, "epochs": 2}, both)
    for k in range(1, upto + 1):
        yield (f"idempotence, 2 brokers, {k} in flight ({k} records)", (),
               {**FAILOVER, "brokers": 2, "records": k, "max_in_flight": k}, None,
               {"exhaustive": True, "bits": 16, "writes": k + 1, "slots": 2, "epochs": 3}, both)


def drop_cases(upto: int):
    """More dropped connections than retries: a batch whose retries are spent fails,
    its sequence is unresolved and the producer bumps its epoch and renumbers the rest from 0.
    Retries R, drops R + 1, K records and K in flight, on a quiet single broker; then (K <= 3)
    the same across a crash and an election with retries 1 and 2 drops. Exhaustive BMC to the
    diameter; induction with the epoch strengthening (strengthen_epochs) beside it."""
    both = ("ProducerSendOrder", "ProducerExactlyOnce")
    for k in range(1, upto + 1):
        for r in (0, 1):
            yield (f"idempotence, 1 broker, {k} in flight, retries {r}, {r + 1} drops", (),
                   {**DROPS, "records": k, "max_in_flight": k, "retries": r, "losses": r + 1},
                   None, {"exhaustive": True, "bits": 16, "writes": k * (r + 2), "slots": 1,
                          "epochs": 2}, both)
    for k in range(1, min(upto, 3) + 1):
        yield (f"idempotence, 1 broker, crash and election, {k} in flight, retries 1, 2 drops", (),
               {**FAILOVER, "brokers": 1, "records": k, "max_in_flight": k, "retries": 1,
                "losses": 2},
               None, {"exhaustive": True, "bits": 16, "writes": 2 * k, "slots": 1, "epochs": 2},
               both)


def run_producer_chained(time_limit: float, upto: int, limit: int = 200_000) -> None:
    """Each fail-over case: exhaustive BMC with chained steps to the chained diameter
    (differential.chained_diameter, an explicit search of spec's states), beside the same
    run's exhaustive sequential BMC to the sequential diameter (the baseline). Both clean is
    a proof at these bounds; a case of more than `limit` reachable states has no diameter
    and no query."""
    import os
    import resource

    from checkers.prove.differential import chained_diameter, diameter

    def cpu():
        return resource.getrusage(resource.RUSAGE_SELF).ru_utime

    def verdict(r):
        if r.status == "violation":
            return f"refuted: {r.invariant} in {r.depth} steps" + (
                f" ({r.problem})" if r.problem else ", replayed on spec")
        if r.status == "clean":
            return "**proved**"
        return "unknown" + (" (past the slots)" if r.message and "bounds" in r.message
                            else f" at {time_limit:.0f} s")

    print("| case | bounds | states | diameter / chained | diameters s | chained BMC | s | CPU s "
          "| sequential BMC (baseline) | s | CPU s | load (1 min) |\n"
          "|---|---|---:|---|---:|---|---:|---:|---|---:|---:|---:|")
    for name, without, bounds, _, kw, invs in chained_failover_cases(upto):
        m = Model(make_config("current", without, **bounds))
        load = os.getloadavg()[0]
        t0 = time.monotonic()
        dia = diameter(m, limit)
        ch = chained_diameter(m, limit=limit) if dia is not None else None
        ds = time.monotonic() - t0
        shape = (f"{kw['writes']} write slots, {kw['slots']} LeaderAndIsr slots, "
                 f"{kw['epochs']} epochs, 16-bit")
        if dia is None or ch is None or ch.diameter is None:
            print(f"| {name} | {shape} | > {limit:,} | not computed | {ds:.1f} | no query | | | "
                  f"no query | | | {load:.1f} |", flush=True)
            continue
        c0 = cpu()
        rc = bmc(m, ch.diameter, invariants=invs, time_limit=time_limit, steps="chained", **kw)
        c1 = cpu()
        rs = bmc(m, dia, invariants=invs, time_limit=time_limit, **kw)
        c2 = cpu()
        print(f"| {name} | {shape} | {ch.states:,} | {dia} / {ch.diameter} | {ds:.1f} | "
              f"{verdict(rc)} at depth {ch.diameter} | {rc.seconds:.1f} | {c1 - c0:.1f} | "
              f"{verdict(rs)} at depth {dia} | {rs.seconds:.1f} | {c2 - c1:.1f} | {load:.1f} |",
              flush=True)


def run_producer_failover(time_limit: float, upto: int, cases=failover_cases,
                          only: str | None = None) -> None:
    """Each fail-over case: BMC to D (D the diameter measured by an explicit breadth-first
    search of spec, or the explorer's counterexample length), induction with the producer
    strengthening where one applies (strengthen_epochs across crashes, elections and epoch
    bumps; else unknown, saying why), and the explorer on the same config, same run. The ratio
    is BMC's seconds over induction's where induction proved."""
    import os
    import resource

    from checkers.prove.differential import diameter

    def cpu():
        return resource.getrusage(resource.RUSAGE_SELF).ru_utime

    print("| case | invariants | method | z3 verdict | z3 s | CPU s | induction (same run) | "
          "induction s | CPU s | ratio | diameter s | explorer | explorer s | load (1 min) |\n"
          "|---|---|---|---|---:|---:|---|---:|---:|---:|---:|---|---:|---:|")
    for name, without, bounds, depth, kw, invs in cases(upto):
        if only and only not in name:
            continue
        m = Model(make_config("current", without, **bounds))
        load = os.getloadavg()[0]
        t0 = time.monotonic()
        dia = diameter(m) if depth is None else None
        ds = time.monotonic() - t0
        d = depth if depth is not None else dia
        c0 = cpu()
        r = bmc(m, d, invariants=invs, time_limit=time_limit, **kw)
        cs = cpu() - c0
        if r.status == "violation":
            verdict = f"refuted: {r.invariant} in {r.depth} steps" + (
                f" ({r.problem})" if r.problem else ", replayed on spec")
        elif r.status == "clean" and dia is not None:
            verdict = "proved (clean to the diameter)"
        else:
            verdict = r.status + (f" ({r.message})" if r.message else f" (time limit {time_limit:.0f} s)")
        method = (("exhaustive BMC" if kw.get("exhaustive") else "one-query BMC (refutation search)")
                  + f", depth {d}" + (" = diameter" if dia is not None else "")
                  + f", {kw['writes']} write slots, {kw['bits']}-bit"
                  + f", {kw['slots']} LeaderAndIsr slot, {kw['epochs']} epochs"
                  + (", partial-order reduction" if kw.get("por") else ""))
        ind, iss, ics, ratio = "-", "", "", ""
        if not without:
            t1, c1 = time.monotonic(), cpu()
            ps = [prove(m, inv, time_limit=time_limit) for inv in invs]
            iss, ics = f"{time.monotonic() - t1:.1f}", f"{cpu() - c1:.1f}"
            if all(p.verdict == "proved" for p in ps):
                ind = "**proved**"
                if r.status == "unknown" and r.seconds >= float(iss):
                    # BMC gave up: its time is a lower bound (none where it gave up sooner)
                    ratio = f"> {r.seconds / max(float(iss), 1e-3):.1f}"
                elif r.status == "clean":
                    ratio = f"{r.seconds / max(float(iss), 1e-3):.1f}"
            else:
                bad = next(p for p in ps if p.verdict != "proved")
                ind = f"{bad.verdict}: {bad.failing}"
        ex, xs = _explorer_cell(m, invs, time_limit)
        print(f"| {name} | {', '.join(invs)} | {method} | {verdict} | {r.seconds:.1f} | {cs:.1f} | "
              f"{ind} | {iss} | {ics} | {ratio} | {ds:.1f} | {ex} | {xs:.1f} | {load:.1f} |", flush=True)


def run_producer_passes(time_limit: float, records: list[int], workers: int = 2,
                        baseline: bool = True, baseline_limit: float | None = None,
                        one_process: bool = True, baseline_way: str = "before-split") -> None:
    """The two-broker fail-over proof of both producer promises (induction with the replicated
    strengthening), K records and K in flight, in one run: the baseline (one pass, goals
    substituted, each step asked whole, logs with a slot per write, z3's default arithmetic:
    the proof as it stood before the outcome split), then the proof as `kafkaverify prove`
    runs it (each producer step asked one outcome at a time, an append by the slot it writes,
    one log slot per record, arith.solver=2) in one process and on `workers` processes. Wall
    and CPU seconds (the workers' CPU included), the 1-minute load before each, and the
    baseline's seconds over each (a lower bound where the baseline ran out of time). After
    the table, each way's slowest instances by solver seconds (up to the time limit, so they
    show where an unfinished proof went). `one_process` False: the workers' way alone.
    `baseline_way` "no-shadows": the baseline is the proof as `kafkaverify prove` runs it on
    `workers` processes but without RecordShadows (so without the shadow fields: the lemmas
    and rules look each slot's write up in the write table). "all-instances": the baseline is
    the proof as `kafkaverify prove` runs it on `workers` processes but asking every action
    instance, not one per orbit under renaming brokers (symmetric=False)."""
    import os
    import resource

    from checkers.prove import strengthen_epochs, strengthen_producers
    from checkers.prove.induction import prove_together

    def cpu():
        return sum(resource.getrusage(w).ru_utime + resource.getrusage(w).ru_stime
                   for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))

    both = ("ProducerSendOrder", "ProducerExactlyOnce")
    slowest = []
    print("| records = in flight | proof | verdict | wall s | CPU s | wall ratio | CPU ratio | load |\n"
          "|---:|---|---|---:|---:|---:|---:|---:|")
    for k in records:
        m = Model(make_config("current", (), **{**FAILOVER, "brokers": 2, "records": k,
                                                  "max_in_flight": k}))
        writes = strengthen_epochs.write_slots(m.config)
        ways = [("outcome split, log slots per record, arith 2; 1 process",
                 {"workers": 1}, time_limit),
                (f"the same on {workers} workers", {"workers": workers}, time_limit)]
        if not one_process:
            ways = ways[1:]
        if baseline_way == "no-shadows":
            ways = [(label.replace("the same", "with shadows (RecordShadows)"), kw, lim)
                    for label, kw, lim in ways]
        if baseline and baseline_way == "no-shadows":
            from checkers.prove.strengthen import producer_needs
            needs = tuple(n for n in producer_needs(m.config)[0] if n != "RecordShadows")
            ways.insert(0, (f"baseline: no shadows (write-table lookups), {workers} workers",
                            {"workers": workers, "strengthening": needs},
                            baseline_limit or time_limit))
        elif baseline and baseline_way == "all-instances":
            ways = [(label.replace("the same", "one instance per orbit (symmetric)"), kw, lim)
                    for label, kw, lim in ways]
            ways.insert(0, (f"baseline: every instance asked, {workers} workers",
                            {"workers": workers, "symmetric": False},
                            baseline_limit or time_limit))
        elif baseline:
            ways.insert(0, ("baseline: each step whole, log slots per write, default arith",
                            {"workers": 1, "split": False, "logs": writes, "arith": None},
                            baseline_limit or time_limit))
        base = None
        for n_way, (label, kw, limit) in enumerate(ways):
            is_base = baseline and n_way == 0
            # each way from cold: the explorer-derived shapes the lemmas are built from are
            # computed again, as in a fresh process
            strengthen_epochs._SHAPES.clear()
            strengthen_producers._INIT.clear()
            load = os.getloadavg()[0]
            t0, c0 = time.monotonic(), cpu()
            stats: dict = {}
            rs = prove_together(m, both, time_limit=limit, stats=stats, **kw)
            wall, cs = time.monotonic() - t0, cpu() - c0
            top = sorted(stats.items(), key=lambda kv: -kv[1])[:8]
            slowest.append((k, label, ", ".join(f"{key} {secs:.0f}" for key, secs in top)))
            bad = [r for r in rs if r.verdict != "proved"]
            verdict = "**proved**" if not bad else f"{bad[0].verdict}: {bad[0].failing}"
            if is_base:
                base = (wall, cs, "" if not bad else "> ")
            ratio = (f"{base[2]}{base[0] / wall:.1f} | {base[2]}{base[1] / max(cs, 1e-3):.1f}"
                     if base and not is_base and not bad else " | ")
            print(f"| {k} | {label} | {verdict} | {wall:.1f} | {cs:.1f} | {ratio} | {load:.1f} |",
                  flush=True)
    print("\nslowest instances, solver s:")
    for k, label, line in slowest:
        print(f"- {k} in flight, {label}: {line}")


def run_producer_induction(time_limit: float, upto: int, baseline_limit: float, bits: int = 16,
                           start: int = 1) -> None:
    """Induction with the producer strengthening for 1..5 in flight (K records, K in flight),
    beside the same run's exhaustive BMC to the diameter (the earlier proof) as the baseline;
    with upto 6, the guided refutation of the duplicate beside the same query unguided."""
    guided_upto, upto = upto, min(upto, 5)
    import os
    import resource

    from checkers.prove.differential import diameter

    def cpu():
        return resource.getrusage(resource.RUSAGE_SELF).ru_utime

    print("| in flight | invariants | method | verdict | s | CPU s | baseline: exhaustive BMC to the "
          "diameter | baseline s | ratio | load (1 min) |\n|---|---|---|---|---:|---:|---|---:|---:|---:|")
    invs = ("ProducerSendOrder", "ProducerExactlyOnce")
    for k in range(start, upto + 1):
        m = Model(make_config("current", **{**DROPS, "records": k, "max_in_flight": k}))
        load = os.getloadavg()[0]
        t0, c0 = time.monotonic(), cpu()
        rs = [prove(m, name, time_limit=time_limit) for name in invs]
        secs, cs = time.monotonic() - t0, cpu() - c0
        verdict = ", ".join(sorted({r.verdict + (f" ({r.failing})" if r.failing else "") for r in rs}))
        base, bs, ratio = "-", float("nan"), "-"
        if baseline_limit > 0:
            dia = diameter(m)
            b = bmc(m, dia, invariants=invs, time_limit=baseline_limit, exhaustive=True, writes=k,
                    bits=bits)
            bs = b.seconds
            base = f"depth {dia}: " + ("proved" if b.status == "clean" else b.status +
                                       (" (time limit)" if b.status == "unknown" else ""))
            if b.status == "clean" and all(r.verdict == "proved" for r in rs):
                ratio = f"{bs / max(secs, 1e-3):.1f}"
            elif b.status == "unknown":
                ratio = f"> {bs / max(secs, 1e-3):.0f}"
        print(f"| {k} | {', '.join(invs)} | induction, producer strengthening | {verdict} | {secs:.1f} | "
              f"{cs:.1f} | {base} | {bs:.1f} | {ratio} | {load:.1f} |", flush=True)
    if guided_upto >= 6:
        # the duplicate (ProducerExactlyOnce): one guided query at the explorer's depth (25), 7
        # write slots, 8-bit fields (kafkaverify prove --guided), beside the same query unguided
        from checkers.prove.strengthen_producers import guide
        invs = ("ProducerExactlyOnce",)
        m = Model(make_config("current", **{**DROPS, "records": 6, "max_in_flight": 6}))
        load = os.getloadavg()[0]
        t0, c0 = time.monotonic(), cpu()
        r = bmc(m, 25, invariants=invs, time_limit=time_limit, one_query=True, writes=7, bits=8,
                guide=guide(m.config), guide_tail=5)
        secs, cs = time.monotonic() - t0, cpu() - c0
        verdict = (f"refuted: {r.invariant} in {r.depth} steps" + (f" ({r.problem})" if r.problem else
                                                                   ", replayed on spec")
                   if r.status == "violation" else r.status)
        base, bs, ratio = "-", float("nan"), "-"
        if baseline_limit > 0:
            b = bmc(m, 25, invariants=invs, time_limit=baseline_limit, one_query=True, writes=7, bits=8)
            bs = b.seconds
            base = "one query, unguided: " + (f"{b.invariant} in {b.depth} steps" if b.status == "violation"
                                              else b.status + " (time limit)")
            ratio = (f"{bs / max(secs, 1e-3):.1f}" if b.status == "violation" else
                     f"> {bs / max(secs, 1e-3):.1f}")
        print(f"| 6 | {', '.join(invs)} | BMC depth 25, guided (last 5 steps free), 7 write slots, 8-bit | "
              f"{verdict} | {secs:.1f} | {cs:.1f} | {base} | {bs:.1f} | {ratio} | {load:.1f} |", flush=True)


def run_kinduction(brokers: list[int], records: list[int], invariants: list[str], K: int,
                   time_limit: float, lemmas: tuple[str, ...]) -> None:
    """Per core invariant and replica count, in one run: induction without strengthening,
    k-induction (checkers/prove/kinduction.py) with only `lemmas` for k = 1 .. K (each step
    case's verdict and seconds, then the base case and the verdict), and the baseline:
    induction with the invariant's strengthening (strengthen.NEEDS). The 1-minute load average
    per row: the machine is shared."""
    import os
    from checkers.prove.induction import CORE
    from checkers.prove.kinduction import kinduction
    from checkers.prove.strengthen import NEEDS
    print(f"k-induction lemmas: {', '.join(lemmas) or 'none'}")
    print("| invariant | replicas | log length | induction, no lemmas | "
          + " | ".join(f"step k={k}" for k in range(1, K + 1))
          + " | k-induction | with NEEDS lemmas (baseline) | load |\n|---|---:|---:|---|"
          + "---|" * K + "---|---|---:|")
    for inv in invariants or CORE:
        for n in brokers:
            for r in records:
                m = Model(prove_config("current", (), n, r))
                load = os.getloadavg()[0]
                plain = prove(m, inv, strengthening=(), time_limit=time_limit)
                ki = kinduction(m, inv, K, strengthening=lemmas, time_limit=time_limit)
                done = {k: f"{v} {s:.1f}" for k, v, s in ki.steps or []}
                base = (f", base BMC depth {ki.bmc.depth} {ki.bmc.seconds:.1f}" if ki.bmc is not None
                        else "")
                full = prove(m, inv, time_limit=time_limit)
                print(f"| {inv} | {n} | {r} | {plain.verdict} {plain.seconds:.1f} | "
                      + " | ".join(done.get(k, "-") for k in range(1, K + 1))
                      + f" | {ki.verdict} (k={ki.k}) {ki.seconds:.1f}{base} | "
                      f"{full.verdict} {full.seconds:.1f} ({len(NEEDS.get(inv, ()))} lemmas) "
                      f"| {load:.1f} |", flush=True)


def run_spacer(time_limit: float, cex_limit: float, fixes: list[str] | None,
               brokers: list[int], invariants: list[str] | None, explorer: bool = True) -> None:
    """z3's Spacer (checkers/prove/spacer.py) in one run, one z3 job at a time: (a) the
    three-replica fixes at their tight bounds (THREE_TIGHT), seconds to a counterexample
    replayed on spec against the explorer's portfolio on the same config; (b) the core
    invariants without any hand lemma for `current`, `current --pauses 1` and `kip-966` at
    each broker count (log length 2), proofs checked independently, with the invariant's size.
    Every row prints the machine's 1-minute load average."""
    import os

    from checkers.prove.induction import CORE
    from checkers.prove.spacer import spacer
    print("| config | invariant | Spacer | Spacer s | explorer | explorer s | load |\n"
          "|---|---|---|---:|---|---:|---:|")
    for fix, bounds, inv, depth, slots, epochs in THREE_TIGHT:
        if fixes is not None and fix not in fixes:
            continue
        m = Model(make_config("current", (fix,), **bounds))
        name = f"--without {fix}" + "".join(f" --{k.replace('_', '-')} {v}" for k, v in bounds.items())
        load = os.getloadavg()[0]
        r = spacer(m, (inv,), time_limit=cex_limit, slots=slots, epochs=epochs)
        sp = _spacer_verdict(r)
        ex, xs = ("not run", float("nan"))
        if explorer:
            ex, xs = _explorer_row(m, inv, cex_limit)
        print(f"| {name} | {inv} | {sp} | {r.seconds:.1f} | {ex} | {xs:.1f} | {load:.1f} |", flush=True)
    print("\n| config | invariant | Spacer (no lemmas) | seconds | check s | load |\n"
          "|---|---|---|---:|---:|---:|")
    for gen, extra in (("current", {}), ("current", {"pauses": 1}), ("kip-966", {})):
        for n in brokers:
            m = Model(prove_config(gen, (), n, 2, **extra))
            name = f"{gen} --brokers {n}" + "".join(f" --{k} {v}" for k, v in extra.items())
            for inv in invariants or CORE:
                load = os.getloadavg()[0]
                r = spacer(m, (inv,), time_limit=time_limit)
                print(f"| {name} | {inv} | {_spacer_verdict(r)} | {r.seconds:.1f} | "
                      f"{r.check_seconds:.1f} | {load:.1f} |", flush=True)


def run_spacer_rules(time_limit: float, brokers: list[int], invariants: list[str] | None) -> None:
    """Spacer's step as one Horn rule per action instance (the default) against one rule with
    the disjunction (a choice variable picks the instance), same run: proofs for `current`,
    log length 2, at each broker count, then one refutation (v0.10, two brokers)."""
    import os

    from checkers.prove.spacer import spacer
    print("| config | invariant | per-instance rules | s | one rule | s | one/per | load |\n"
          "|---|---|---|---:|---|---:|---:|---:|")
    for n in brokers:
        m = Model(prove_config("current", (), n, 2))
        for inv in invariants or ["HwBelowLeo", "MonotonicEpochs"]:
            load = os.getloadavg()[0]
            a = spacer(m, (inv,), time_limit=time_limit)
            b = spacer(m, (inv,), time_limit=time_limit, one_rule=True)
            print(f"| current --brokers {n} | {inv} | {_spacer_verdict(a)} | {a.seconds:.1f} | "
                  f"{_spacer_verdict(b)} | {b.seconds:.1f} | {b.seconds / max(a.seconds, 1e-9):.2f} "
                  f"| {load:.1f} |", flush=True)
    # a refutation: v0.10 loses an acknowledged record on two brokers (BMC: depth 2)
    m = Model(make_config("v0.10", brokers=2, records=2, crashes=1, elections=1, losses=0))
    load = os.getloadavg()[0]
    a = spacer(m, ("MinIsrDurability",), time_limit=time_limit)
    b = spacer(m, ("MinIsrDurability",), time_limit=time_limit, one_rule=True)
    print(f"| v0.10 --brokers 2 --crashes 1 --elections 1 --losses 0 | MinIsrDurability | "
          f"{_spacer_verdict(a)} | {a.seconds:.1f} | {_spacer_verdict(b)} (path by BMC at Spacer's "
          f"depth) | {b.seconds:.1f} | {b.seconds / max(a.seconds, 1e-9):.2f} | {load:.1f} |", flush=True)


def _spacer_verdict(r) -> str:
    if r.status == "proved":
        return f"proved: invariant of {r.invariant_size[0]} conjuncts, {r.invariant_size[1]} nodes"
    if r.status == "violation":
        b = r.bmc
        return (f"{b.invariant} in {b.depth} steps, " +
                (f"spec disagrees: {b.problem}" if b.problem else "replayed on spec"))
    return f"unknown ({r.message})"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.prove")
    ap.add_argument("what", choices=["induction", "bmc", "bmc3", "fixes", "three", "three-guided", "three-steps",
                                     "producers", "producer-induction", "producer-failover", "producer-drops",
                                     "producer-passes",
                                     "kinduction", "spacer", "spacer-rules"])
    ap.add_argument("--cex-limit", type=float, default=300.0,
                    help="spacer: time limit of each three-replica fix (each engine)")
    ap.add_argument("--k", type=int, default=3, help="kinduction: k = 1 .. K")
    ap.add_argument("--lemma", nargs="*", default=[],
                    help="kinduction: strengthening lemmas of the k-induction (default none); "
                         "three-guided: guide with only these of the proved lemmas")
    ap.add_argument("--no-baseline", action="store_true",
                    help="producer-passes: skip the baseline (the proof as it stood before the "
                         "outcome split)")
    ap.add_argument("--baseline-way", choices=["before-split", "no-shadows", "all-instances"],
                    default="before-split",
                    help="producer-passes: the baseline proof: as it stood before the outcome "
                         "split, as it runs now without RecordShadows's shadow fields, or as it "
                         "runs now asking every instance (no symmetry reduction)")
    ap.add_argument("--workers-only", action="store_true",
                    help="producer-passes: only the proof on 2 workers (not in one process)")
    ap.add_argument("--no-explorer", action="store_true", help="three: BMC only")
    ap.add_argument("--chained", action="store_true",
                    help="producer-failover: exhaustive BMC with chained steps to the chained "
                         "diameter, beside sequential exhaustive BMC to the diameter (same run)")
    ap.add_argument("--steps", nargs="*", default=["parallel", "chained"],
                    choices=["parallel", "chained", "sequential"],
                    help="three-steps: the step semantics to run (each at its depth)")
    ap.add_argument("--depths", type=int, nargs="*", default=[6, 8, 10, 14],
                    help="three-guided: depths (at most the explorer's) to time plain and guided")
    ap.add_argument("--only", default=None,
                    help="producer-failover, producer-drops: only the cases whose name has this")
    ap.add_argument("--upto", type=int, default=6, help="producers: in-flight cases 1..N (6: the duplicate)")
    ap.add_argument("--bits", type=int, default=None,
                    help="bit-vector width of the unrolling (0: z3 integers, the baseline); "
                         "producers: default 16; three: default the narrowest for the depth")
    ap.add_argument("--brokers", type=int, nargs="*", default=[3, 5])
    ap.add_argument("--records", type=int, nargs="*", default=[2, 4])
    ap.add_argument("--generation", nargs="*", default=["current"], choices=sorted(GENERATIONS),
                    help="induction: the generations, each proof in turn (the first the baseline)")
    ap.add_argument("--pauses", type=int, nargs="*", default=[0],
                    help="induction: pause bounds, each proof in turn (the first the baseline)")
    ap.add_argument("--min-isr", type=int, default=None,
                    help="induction: min ISR (default 2, 1 on one replica)")
    ap.add_argument("--invariant", nargs="*", default=None,
                    help="induction: default HwBelowLeo MonotonicEpochs; kinduction: the core ones")
    ap.add_argument("--depth", type=int, default=None, help="BMC depth (default 8; fixes: 30)")
    ap.add_argument("--time-limit", type=float, default=120.0)
    ap.add_argument("--fix", nargs="*", help="fixes: only these fixes (or v0.10)")
    ap.add_argument("--baseline", action="store_true",
                    help="also run each proof over every action instance (no symmetry reduction) "
                         "and print the ratio, same run")
    ap.add_argument("--from", dest="start", type=int, default=1,
                    help="producer-induction: first in-flight case")
    ap.add_argument("--baseline-limit", type=float, default=120.0,
                    help="producer-induction: time limit of the baseline (exhaustive BMC; 0: none); "
                         "producer-passes: of the baseline proof")
    a = ap.parse_args(argv)
    bits = 16 if a.bits is None else a.bits
    if a.what == "spacer-rules":
        run_spacer_rules(a.time_limit, a.brokers if a.brokers != [3, 5] else [2, 3], a.invariant)
    elif a.what == "spacer":
        run_spacer(a.time_limit, a.cex_limit, a.fix, a.brokers if a.brokers != [3, 5] else [2, 3],
                   a.invariant, not a.no_explorer)
    elif a.what == "kinduction":
        run_kinduction(a.brokers, a.records, a.invariant or [], a.k, a.time_limit, tuple(a.lemma))
    elif a.what == "producer-induction":
        run_producer_induction(a.time_limit, a.upto, a.baseline_limit, bits, a.start)
    elif a.what == "producers":
        run_producers(a.time_limit, a.upto, bits)
    elif a.what == "producer-failover" and a.chained:
        run_producer_chained(a.time_limit, a.upto)
    elif a.what == "producer-failover":
        run_producer_failover(a.time_limit, a.upto, only=a.only)
    elif a.what == "producer-passes":
        run_producer_passes(a.time_limit, a.records if a.records != [2, 4] else [1],
                            baseline=not a.no_baseline, baseline_limit=a.baseline_limit,
                            one_process=not a.workers_only, baseline_way=a.baseline_way)
    elif a.what == "producer-drops":
        run_producer_failover(a.time_limit, a.upto, drop_cases, only=a.only)
    elif a.what == "three-guided":
        run_three_guided(a.time_limit, a.depths, a.fix, not a.no_explorer, subset=a.lemma or None)
    elif a.what == "three-steps":
        run_three_steps(a.time_limit, a.fix, not a.no_explorer, tuple(a.steps))
    elif a.what == "three":
        run_three(a.time_limit, a.bits, a.fix, not a.no_explorer)
    elif a.what == "fixes":
        run_fixes(a.depth or 30, a.time_limit, a.fix)
    elif a.what == "induction":
        head = "| generation | pauses | invariant | replicas | log length | verdict | seconds |"
        if a.baseline:
            head += " all instances s | ratio |"
        print(head + "\n|---|---|---|---|---|---|---|" + ("---|---|" if a.baseline else ""))
        for inv in a.invariant or ["HwBelowLeo", "MonotonicEpochs"]:
            for n in a.brokers:
                for r in a.records:
                    for gen, pauses in ((g, x) for g in a.generation for x in a.pauses):
                        m = Model(prove_config(gen, (), n, r, min_isr=a.min_isr or min(2, n),
                                               pauses=pauses))
                        p = prove(m, inv, time_limit=a.time_limit)
                        line = (f"| {gen} | {pauses} | {inv} | {n} | {r} | {p.verdict}{' (' + p.failing + ')' if p.failing else ''} "
                                f"| {p.seconds:.1f} |")
                        if a.baseline:
                            q = prove(m, inv, time_limit=a.time_limit, symmetric=False)
                            line += f" {q.seconds:.1f} ({q.verdict}) | {q.seconds / max(p.seconds, 1e-9):.1f} |"
                        print(line, flush=True)
    else:
        print("| config | BMC | BMC s | explorer | explorer s |\n|---|---|---|---|---|")
        for gen, without, bounds, invs in (BMC_CASES if a.what == "bmc" else BMC_THREE):
            m = Model(make_config(gen, without, **bounds))
            r = bmc(m, a.depth or 8, invariants=invs, time_limit=a.time_limit)
            t0 = time.monotonic()
            x = explore(m, time_limit=a.time_limit, invariants=invs)
            ex = f"{x.invariant} at {len(x.path)}" if x.status == "violation" else x.status
            bm = f"{r.invariant} at depth {r.depth}" if r.status == "violation" else f"{r.status} to {r.depth}"
            if r.problem:
                bm += f" (spec disagrees: {r.problem})"
            name = gen + "".join(f" --without {w}" for w in without) + "".join(f" --{k} {v}" for k, v in bounds.items())
            print(f"| {name} | {bm} | {r.seconds:.1f} | {ex} | {time.monotonic() - t0:.1f} |", flush=True)


if __name__ == "__main__":
    main()
