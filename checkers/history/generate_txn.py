"""A seeded generator of transactional histories (format version 2), for the bulk runs
(checkers/history/gen_runs.py) and their mining: transactional producers and a read_committed
consumer, as Kafka behaves, with one anomaly planted on request.

The run: two transactional producers (processes 0 and 1, transactional ids "tx-0", "tx-1")
take turns running transactions of one to three sends to the topic's partitions (each send
acknowledged with the next offset of its partition), ended by a txn_commit or, with
probability ABORT_RATE, a txn_abort (an aborted transaction's records keep their offsets,
hidden from read_committed readers). A consumer (process 10) is assigned every partition
(one assignment set) and, after each transaction ends, polls each partition read_committed:
the records of committed transactions from its position on (skipping aborted ones, as
read_committed reads do). A final read (process 11) ends the run: every committed record of
each partition from offset 0.

Planting (`PLANTABLE`), one site:
- "G1a": a poll also returns a record of an aborted transaction (at its offset);
- "precommitted-read": a poll that completes before the transaction's commit is invoked
  returns one of its records;
- "txn-atomicity": a committed transaction that sent to two partitions has one record never
  read, although later offsets of its partition are (it is also a lost write, and the
  consumer's poll skips it).
"""
from __future__ import annotations

import random

from traces.history import TXN_VERSION, History, make_header, pair

ABORT_RATE = 0.2
TOPIC = "t"
CONSUMER, FINAL = 10, 11
PLANTABLE = ("G1a", "precommitted-read", "txn-atomicity")


def generate_txn(seed: int, ops: int = 60, partitions: int = 2, planted: str = "",
                 trace_id: str | None = None) -> History:
    """A valid transactional history of about `ops` operations (or with `planted`, one of
    PLANTABLE, at one site)."""
    if planted == "txn-atomicity" and partitions < 2:
        raise ValueError("txn-atomicity is planted across two partitions")
    if planted and planted not in PLANTABLE:
        raise ValueError(f"unknown transactional anomaly {planted!r} (expected one of {', '.join(PLANTABLE)})")
    rng = random.Random(seed)
    evs: list[dict] = []
    ids = iter(range(10**9))
    t = 0

    def op(proc: int, f: str, typ: str, inv: dict, comp: dict | None = None, dt: int = 1) -> int:
        nonlocal t
        i = next(ids)
        evs.append({"id": i, "type": "invoke", "process": proc, "f": f, **inv, "mono_ns": t})
        evs.append({"id": i, "type": typ, "process": proc, "f": f, **(comp or {}), "mono_ns": t + dt})
        t += dt + 1
        return i

    for p in (0, 1):
        op(p, "producer_config", "ok", {"acks": "all", "idempotence": True, "retries": 5,
                                        "max_in_flight": 5, "transactional_id": f"tx-{p}"})
    for part in range(partitions):          # one assignment set: every partition, one instant
        i = next(ids)
        evs.append({"id": i, "type": "invoke", "process": CONSUMER, "f": "assign", "topic": TOPIC,
                    "partition": part, "mono_ns": t})
        evs.append({"id": i, "type": "ok", "process": CONSUMER, "f": "assign", "mono_ns": t + 1})
    t += 2
    # Per partition: the log (value, transaction, committed?) and the consumer's position.
    logs: dict[int, list[list]] = {p: [] for p in range(partitions)}
    pos = {p: 0 for p in range(partitions)}
    hidden: set[str] = set()                # a committed record no read returns (txn-atomicity)
    site = None
    n_txn = 0
    while len(evs) // 2 < ops:
        n_txn += 1
        proc = n_txn % 2
        k = rng.randint(1, 3)
        parts = [rng.randrange(partitions) for _ in range(k)]
        if planted == "txn-atomicity" and site is None:
            parts = [0, 1]                  # the site: one record read, the other (1) hidden
        abort = rng.random() < ABORT_RATE
        if planted == "G1a" and site is None:
            abort = True
        if planted in ("precommitted-read", "txn-atomicity") and site is None:
            abort = False
        recs = []
        for part in parts:
            v = f"x{n_txn}-{part}-{len(logs[part])}"
            off = len(logs[part])
            logs[part].append([v, n_txn, False])
            op(proc, "send", "ok", {"topic": TOPIC, "partition": part, "value": v, "txn": n_txn},
               {"offset": off})
            recs.append((part, off, v))
        if planted == "precommitted-read" and site is None:
            part, off, v = recs[0]
            op(CONSUMER + 2, "poll", "ok", {"topic": TOPIC, "partition": part, "isolation": "read_committed"},
               {"offsets": [off], "values": [v]})
            site = n_txn
        if abort:
            op(proc, "txn_abort", "ok", {"txn": n_txn})
        else:
            op(proc, "txn_commit", "ok", {"txn": n_txn})
            for part, off, _ in recs:
                logs[part][off][2] = True
        if planted == "txn-atomicity" and site is None:
            hidden.add(recs[1][2])
            site = n_txn
        for part in sorted(set(parts)):
            log = logs[part]
            got = [(o, r[0]) for o, r in enumerate(log) if o >= pos[part] and r[2] and r[0] not in hidden]
            if planted == "G1a" and site is None and abort:
                got = sorted(got + [(o, r[0]) for o, r in enumerate(log) if r[1] == n_txn])
                site = n_txn
            pos[part] = len(log)
            if got:
                op(CONSUMER, "poll", "ok", {"topic": TOPIC, "partition": part, "isolation": "read_committed"},
                   {"offsets": [o for o, _ in got], "values": [v for _, v in got]})
    if planted == "txn-atomicity":
        # A later committed record of the hidden record's partition, read: the gap shows.
        part = 1
        v = f"x{n_txn + 1}-{part}-{len(logs[part])}"
        off = len(logs[part])
        logs[part].append([v, n_txn + 1, True])
        op(0 if n_txn % 2 else 1, "send", "ok", {"topic": TOPIC, "partition": part, "value": v,
                                                 "txn": n_txn + 1}, {"offset": off})
        op(0 if n_txn % 2 else 1, "txn_commit", "ok", {"txn": n_txn + 1})
    for part in range(partitions):
        got = [(o, r[0]) for o, r in enumerate(logs[part]) if r[2] and r[0] not in hidden]
        op(FINAL, "poll", "ok", {"topic": TOPIC, "partition": part, "isolation": "read_committed",
                                 "final": True},
           {"offsets": [o for o, _ in got], "values": [v for _, v in got]})
    header = make_header(trace_id, version=TXN_VERSION, source="generate_txn", seed=seed)
    return pair("", header, [(f"event {n}", e) for n, e in enumerate(evs)])
