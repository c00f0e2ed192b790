"""Transactional explorations of the reference model (spec/transaction.py): states, time,
states/s and verdict for each, with a same-run baseline (the explorer on `current` without
clients at one record per broker fault bound: the replication model alone, unchanged by the
transaction fields). Every case states what it must find; another result is marked UNEXPECTED.

    python -m benchmarks.model_transactions [--time-limit S]

The figures go to docs/benchmarks/model.md (transactions) and BENCHMARKS.md. The coordinator
fail-over case does not exhaust: it runs to the time limit and must find nothing.
"""
from __future__ import annotations

import argparse

from benchmarks.model_clients import run
from checkers.golden import TXN_BOUNDS, TXN_LATE_PRODUCE_BOUNDS
from checkers.model_trace import TXN_DEFAULTS

DEFAULTS = {"transactions": 1, **TXN_DEFAULTS}
CASES = [
    ("kip-966, CLI defaults (2 partitions, a zombie)", "kip-966", (), DEFAULTS, None, "exhausted"),
    ("kip-966 without txn-epoch-bump, CLI defaults", "kip-966", ("txn-epoch-bump",), DEFAULTS, None,
     "TxnAtomicVisibility"),
    ("kip-966 without txn-timeout-bump, CLI defaults", "kip-966", ("txn-timeout-bump",), DEFAULTS,
     None, "exhausted"),
    ("kip-966 without txn-partition-verification, CLI defaults", "kip-966",
     ("txn-partition-verification",), DEFAULTS, None, "exhausted"),
    ("current, CLI defaults (transaction version 1)", "current", (), DEFAULTS, None,
     "TxnAtomicVisibility"),
    ("current without txn-timeout-bump, no resent markers", "current", ("txn-timeout-bump",),
     {**DEFAULTS, "txn_dups": 0}, None, "TxnAtomicVisibility"),
    ("current without both older fixes, no resent markers", "current",
     ("txn-timeout-bump", "txn-partition-verification"), {**DEFAULTS, "txn_dups": 0}, None,
     "TxnNoHangingTransaction"),
    ("kip-966, golden bounds (1 partition)", "kip-966", (), TXN_BOUNDS, None, "exhausted"),
    ("current without txn-timeout-bump, golden bounds", "current", ("txn-timeout-bump",),
     TXN_LATE_PRODUCE_BOUNDS, None, "TxnAtomicVisibility"),
    ("kip-966, two transactional.ids, 1 partition, 1 round", "kip-966", (),
     {**TXN_BOUNDS, "transactions": 2, "txn_rounds": 1, "txn_dups": 0}, None, "exhausted"),
    ("kip-966, consume-transform-produce, golden bounds and a zombie", "kip-966", (),
     {**TXN_BOUNDS, "consume_transform_produce": True, "zombies": 1}, None, "exhausted"),
    ("current without txn-timeout-bump, consume-transform-produce (TxnExactlyOnce asked)", "current",
     ("txn-timeout-bump",), {**TXN_LATE_PRODUCE_BOUNDS, "consume_transform_produce": True},
     ("TxnExactlyOnce",), "TxnExactlyOnce"),
    ("kip-966, coordinator fail-over (2 brokers, 1 crash, 1 election), golden bounds", "kip-966", (),
     {**TXN_BOUNDS, "brokers": 2, "crashes": 1, "elections": 1}, None, "time-limit"),
]
BASELINE = ("baseline: current, no clients, 1 record", "current", (), {"records": 1}, None, "exhausted")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.model_transactions")
    ap.add_argument("--time-limit", type=float, default=300.0)
    args = ap.parse_args(argv)
    print("| case | verdict | distinct states | seconds | states/s |")
    print("|---|---|---:|---:|---:|")
    for c in CASES + [BASELINE]:
        print(run(*c, time_limit=args.time_limit), flush=True)


if __name__ == "__main__":
    main()
