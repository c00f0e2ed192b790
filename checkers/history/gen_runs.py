"""A seeded generator of bulk runs (traces/runs.py layout) for mining: N runs of the history
generator across a matrix of protocol generations, producer settings, fault types and fault
rates, with anomalies planted so that clean and violating runs both exist.

Each run i draws everything from random.Random(seed * 1_000_003 + i): its settings, whether
an anomaly is planted (probability fault_rate x the generation's exposure; the current
generation is never planted), which kind (one the fault type can cause), and its history's
seed. The matrix is a labelling of generated histories: these runs come from the history
generator (checkers/history/generate.py) with planted anomalies, not from the model's
simulator, and say so in `source`.

`distinct`: with distinct=K < N, only K histories are generated and run i reuses history
i % K (with its own run id and that history's settings row): the same checking work per run
at a fraction of the generation time, for throughput benchmarks. The runs table says which.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

import pyarrow as pa

from checkers.history.generate import Params, generate_valid
from checkers.history.generate_txn import generate_txn
from checkers.history.oracle.log_checks import duplicate_permitted
from checkers.history.seeding import plant
from traces.history import events_to_table, history_events
from traces.runs import RUN_FIELDS, as_run_table, bucket_path, write_events, write_runs

GENERATIONS = ("v0.10", "kip-101", "kip-279", "kip-320", "current")
# Share of faulted runs in which a generation shows an anomaly (the current generation has
# every fix: none).
EXPOSURE = {"v0.10": 1.0, "kip-101": 0.6, "kip-279": 0.4, "kip-320": 0.2, "current": 0.0}
PRODUCERS = {
    "idempotent": {"acks": "all", "idempotence": True, "max_in_flight": 5, "retries": 5},
    "non-idempotent": {"acks": "all", "idempotence": False, "max_in_flight": 5, "retries": 5},
    "acks1-one-in-flight": {"acks": "1", "idempotence": False, "max_in_flight": 1, "retries": 0},
}
# Anomaly kinds each fault type can cause; only kinds whose planting always finds a site in
# a generated run (so "planted" means "present", which the suite's mining stage relies on).
FAULTS = {
    "none": (),
    "broker-crash": ("lost-write", "unseen-write"),
    "unclean-leader-election": ("inconsistent-offsets", "duplicate", "lost-write"),
    "network-partition": ("nonlinearizable", "failed-write-observed"),
    "producer-retry": ("duplicate", "send-reorder"),
}
FAULT_RATES = (0.0, 0.1, 0.3, 0.6)
# Transactional runs (`txn_share`; checkers/history/generate_txn.py, history format version 2):
# producer "transactional", and the anomalies of transactions each fault type can cause.
TRANSACTIONAL = "transactional"
TXN_FAULTS = {
    "none": (),
    "coordinator-failover": ("G1a", "txn-atomicity"),      # a marker lost or misapplied
    "lso-regression": ("precommitted-read", "G1a"),        # read_committed reads past the LSO
}


@dataclass(frozen=True)
class RunSpec:
    index: int
    trace_id: str
    seed: int
    generation: str
    producer: str
    fault_type: str
    fault_rate: float
    planted: str
    corrupt: bool


def spec(seed: int, i: int, corrupt_rate: float = 0.0, plant: bool = True,
         txn_share: float = 0.0) -> RunSpec:
    """Run i's settings. With `txn_share`, that share of runs is transactional (drawn after
    every other draw, so with txn_share 0 a seed gives the runs it always gave)."""
    rng = random.Random(seed * 1_000_003 + i)
    gen = rng.choice(GENERATIONS)
    prod = rng.choice(sorted(PRODUCERS))
    fault = rng.choice(sorted(FAULTS))
    rate = 0.0 if fault == "none" else rng.choice(FAULT_RATES[1:])
    planted = ""
    if FAULTS[fault] and rng.random() < rate * EXPOSURE[gen] and plant:
        planted = rng.choice(FAULTS[fault])
    if planted == "duplicate" and duplicate_permitted(PRODUCERS[prod]):
        # A non-idempotent, retrying producer may append a batch twice: for it a duplicate is
        # no violation (checkers/history/oracle/log_checks.py), so the run is planted with a producer
        # whose settings forbid it.
        prod = "idempotent"
    corrupt = rng.random() < corrupt_rate
    run_seed = rng.randrange(2**31)
    if txn_share and rng.random() < txn_share:
        prod = TRANSACTIONAL
        fault = rng.choice(sorted(TXN_FAULTS))
        rate = 0.0 if fault == "none" else rng.choice(FAULT_RATES[1:])
        planted = ""
        if TXN_FAULTS[fault] and rng.random() < rate * EXPOSURE[gen] and plant:
            planted = rng.choice(TXN_FAULTS[fault])
    return RunSpec(i, f"run-{i:08d}", run_seed, gen, prod, fault, rate, planted, corrupt)


def run_history(s: RunSpec, ops: int) -> tuple[dict, list[dict]]:
    if s.producer == TRANSACTIONAL:
        h = generate_txn(s.seed, ops, partitions=2, planted=s.planted)
    else:
        p = Params(seed=s.seed, ops=ops, partitions=2, producers=2, consumers=2)
        h = generate_valid(p)
        for op in h.ops:      # the run's producer settings, before planting (which may add its own)
            if op.f == "producer_config":
                op.config = dict(PRODUCERS[s.producer])
        if s.planted:
            plant(h, s.planted, 0.01, random.Random(p.seed * 1_000_003 + 17))
            h.ops.sort(key=lambda o: (o.inv, o.id))
    header = dict(h.header, trace_id=s.trace_id)
    evs = history_events(h.ops)
    if s.corrupt:
        # A completion of an operation never invoked: the object reader's error names it.
        last = evs[-1]["mono_ns"]
        evs.append({"id": 10**9, "type": "ok", "process": 0, "f": "send", "offset": 0,
                    "mono_ns": last + 1})
    return header, evs


def generate_dataset(out: str, runs: int, seed: int, ops: int = 60, buckets: int = 8,
                     distinct: int | None = None, corrupt_rate: float = 0.0,
                     progress=None, plant: bool = True, txn_share: float = 0.0) -> dict:
    """Writes the dataset; returns counts. Bucket b holds runs i with i % buckets == b.
    `txn_share`: the share of transactional runs (then the events files have version 2's
    columns, traces/runs.py)."""
    k = min(distinct or runs, runs)
    specs = [spec(seed, i, corrupt_rate, plant, txn_share) for i in range(k)]
    tables = []
    for s in specs:
        header, evs = run_history(s, ops)
        t = events_to_table(header, evs).replace_schema_metadata(None)
        tables.append(as_run_table(t, header["version"]) if txn_share else t)
        if progress:
            progress(len(tables), k)
    events = 0
    rows: dict[str, list] = {n: [] for n, _ in RUN_FIELDS}
    for b in range(buckets):
        mine = list(range(b, runs, buckets))
        if not mine:
            continue
        parts, ids = [], []
        for i in mine:
            t = tables[i % k]
            parts.append(t)
            ids.append((f"run-{i:08d}", t.num_rows))
        tb = pa.concat_tables(parts)
        tid = pa.array([r for r, n in ids for _ in range(n)], pa.string())
        tb = tb.set_column(0, "trace_id", tid)
        write_events(bucket_path(out, b), tb)
        events += tb.num_rows
        for i in mine:
            s = specs[i % k]
            for n, v in (("trace_id", f"run-{i:08d}"), ("bucket", b), ("seed", s.seed),
                         ("source", "history-generator" if k == runs else f"history-generator (tiled from {k} distinct)"),
                         ("generation", s.generation), ("producer", s.producer),
                         ("fault_type", s.fault_type), ("fault_rate", s.fault_rate), ("ops", ops),
                         ("planted", s.planted), ("corrupt", s.corrupt)):
                rows[n].append(v)
    write_runs(out, pa.table(rows))
    return {"runs": runs, "events": events, "distinct": k, "buckets": buckets,
            "planted": sum(1 for i in range(runs) if specs[i % k].planted),
            "corrupt": sum(1 for i in range(runs) if specs[i % k].corrupt)}


def planted_mismatches(runs, verdicts) -> list[str]:
    """What a mining result gets wrong against what was planted (polars frames: the runs table
    and the verdicts): a planted run not invalid or without its kind, a clean run not valid, a
    corrupt run not reported corrupt, a run missing. Empty: exactly the planted ones found."""
    import polars as pl
    v = runs.join(verdicts, on="trace_id", how="left")
    out = []
    for r in v.iter_rows(named=True):
        if r["status"] is None:
            out.append(f"{r['trace_id']}: not reported")
        elif r["corrupt"]:
            if r["status"] != "corrupt":
                out.append(f"{r['trace_id']}: corrupt row not reported ({r['status']})")
        elif r["planted"]:
            if r["status"] != "invalid" or r["planted"] not in (r["types"] or []):
                out.append(f"{r['trace_id']}: planted {r['planted']}, found {r['status']} {r['types']}")
        elif r["status"] != "valid":
            out.append(f"{r['trace_id']}: nothing planted, found {r['status']} {r['types']}")
    del pl
    return out
