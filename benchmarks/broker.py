"""Broker benchmarks with a real confluent-kafka producer (100-byte records, idempotence off).

    python -m benchmarks.broker [--records N] [--quick] [--json]

1. throughput, acks=1, one broker, RF=1
2. throughput, acks=all, three brokers, RF=3, min.insync=2
3. p50/p99 produce latency (produce call -> delivery callback) at half of (2)'s rate, and at a
   fixed 20,000 records/s for comparison across runs
4. fail-over: time from kill -9 of the leader to the first acknowledged acks=all write that was
   sent after the kill (embedded coordinator; session timeout given by --session-timeout-ms)
5. idempotence (`--section idempotence` runs only this): acks=all throughput with
   enable.idempotence=true against false on the same three-broker cluster, alternating runs
   (ratio of the medians), and the fail-over time of (4) for an idempotent producer
6. transactions (`--section transactions` runs only this): acks=all throughput of a
   transactional producer committing every 100 records against the idempotent producer, the
   same cluster, alternating rounds (ratio of the medians); p50/p99 of commit_transaction
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import threading
import time

from impl.cluster import Cluster

VALUE = b"x" * 100


def _producer(bootstrap: str, acks: str, **extra):
    import confluent_kafka
    conf = {"bootstrap.servers": bootstrap, "enable.idempotence": False, "acks": acks,
            "linger.ms": 5, "batch.num.messages": 10000, "queue.buffering.max.messages": 1000000,
            "queue.buffering.max.kbytes": 1048576}
    conf.update(extra)
    return confluent_kafka.Producer(conf)


def throughput(bootstrap: str, topic: str, acks: str, n: int, **extra) -> float:
    p = _producer(bootstrap, acks, **extra)
    errors = []
    def cb(err, _m):
        if err is not None:
            errors.append(err)
    # warm-up: metadata, connections
    p.produce(topic, VALUE, partition=0, on_delivery=cb)
    p.flush(30)
    t0 = time.perf_counter()
    for _ in range(n):
        while True:
            try:
                p.produce(topic, VALUE, partition=0, on_delivery=cb)
                break
            except BufferError:
                p.poll(0.01)
        p.poll(0)
    left = p.flush(120)
    dt = time.perf_counter() - t0
    if errors or left:
        raise RuntimeError(f"{len(errors)} delivery errors ({errors[:3]}), {left} undelivered")
    return n / dt


def latency(bootstrap: str, topic: str, rate: float, seconds: float) -> dict:
    p = _producer(bootstrap, "all", **{"linger.ms": 2})
    lat: list[float] = []
    errors = []
    def make_cb(t_sent):
        def cb(err, _m):
            if err is not None:
                errors.append(err)
            else:
                lat.append(time.perf_counter() - t_sent)
        return cb
    p.produce(topic, VALUE, partition=0)
    p.flush(30)
    n = int(rate * seconds)
    t0 = time.perf_counter()
    for i in range(n):
        target = t0 + i / rate
        while True:
            now = time.perf_counter()
            if now >= target:
                break
            p.poll(min(target - now, 0.001))
        p.produce(topic, VALUE, partition=0, on_delivery=make_cb(time.perf_counter()))
        p.poll(0)
    p.flush(60)
    achieved = n / (time.perf_counter() - t0)
    lat.sort()
    if not lat:
        raise RuntimeError(f"no delivery succeeded: {errors[:3]}")
    q = lambda f: lat[min(len(lat) - 1, int(f * len(lat)))] * 1000
    return {"target_rate": round(rate), "achieved_rate": round(achieved), "records": len(lat),
            "errors": len(errors), "p50_ms": round(q(0.50), 2), "p99_ms": round(q(0.99), 2),
            "max_ms": round(lat[-1] * 1000, 2)}


def failover(c: Cluster, topic: str, **extra) -> float:
    p = _producer(c.bootstrap, "all", **{"linger.ms": 0, "message.timeout.ms": 30000,
                                         "retry.backoff.ms": 20, "retry.backoff.max.ms": 100,
                                         "topic.metadata.refresh.interval.ms": 100, **extra})
    acked_after: list[float] = []
    kill_at = [0.0]
    def cb(t_sent):
        def f(err, _m):
            if err is None and t_sent >= kill_at[0] > 0:
                acked_after.append(time.perf_counter())
        return f
    for _ in range(100):
        p.produce(topic, VALUE, partition=0, on_delivery=cb(time.perf_counter()))
    p.flush(30)
    leader = c.leader_of(topic, 0)
    kill_at[0] = time.perf_counter()
    c.kill(leader)
    deadline = time.perf_counter() + 30
    while not acked_after and time.perf_counter() < deadline:
        p.produce(topic, VALUE, partition=0, on_delivery=cb(time.perf_counter()))
        p.poll(0.01)
    p.flush(30)
    if not acked_after:
        raise RuntimeError("no acks=all write succeeded within 30 s of the leader kill")
    return min(acked_after) - kill_at[0]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.broker")
    ap.add_argument("--records", type=int, default=300_000)
    ap.add_argument("--latency-seconds", type=float, default=10)
    ap.add_argument("--session-timeout-ms", type=int, default=2000)
    ap.add_argument("--quick", action="store_true", help="small runs (smoke test)")
    ap.add_argument("--section", choices=("all", "idempotence", "transactions"), default="all")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds of the idempotence ratio")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    n = 20_000 if a.quick else a.records
    secs = 2 if a.quick else a.latency_seconds
    res: dict = {"machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
                 "records": n, "record_bytes": len(VALUE)}
    with tempfile.TemporaryDirectory(prefix="kv-bench-") as d:
        if a.section in ("idempotence", "transactions"):
            run = idempotence if a.section == "idempotence" else transactions
            res.update(run(d, n, a.rounds, a.session_timeout_ms))
            _print(res, a.json)
            return
        with Cluster(1, f"{d}/one", coordinator="embedded", session_timeout_ms=a.session_timeout_ms) as c:
            c.create_topic("b1", 1, 1)
            res["acks1_rf1_records_per_s"] = round(throughput(c.bootstrap, "b1", "1", n))
        with Cluster(3, f"{d}/three", coordinator="embedded", session_timeout_ms=a.session_timeout_ms) as c:
            c.create_topic("b3", 1, 3, min_insync=2)
            c.wait_for_leaders("b3", isr_size=3)
            res["acksall_rf3_records_per_s"] = rate = round(throughput(c.bootstrap, "b3", "all", n))
            res["latency_at_half_rate"] = latency(c.bootstrap, "b3", rate / 2, secs)
            res["latency_at_20000_per_s"] = latency(c.bootstrap, "b3", 20_000, secs)
            c.create_topic("fo", 1, 3, min_insync=2)
            c.wait_for_leaders("fo", isr_size=3)
            res["failover_s"] = round(failover(c, "fo"), 3)
            res["session_timeout_ms"] = a.session_timeout_ms
        res.update(idempotence(d, n, a.rounds, a.session_timeout_ms))
        res.update(transactions(d, n, a.rounds, a.session_timeout_ms))
    _print(res, a.json)


def idempotence(d: str, n: int, rounds: int, session_timeout_ms: int) -> dict:
    """Idempotent vs plain acks=all throughput on one cluster, alternating (plain, idempotent)
    rounds so load from others hits both alike; then the idempotent producer's fail-over."""
    out: dict = {}
    with Cluster(3, f"{d}/idem", coordinator="embedded", session_timeout_ms=session_timeout_ms) as c:
        c.create_topic("bi", 1, 3, min_insync=2)
        c.wait_for_leaders("bi", isr_size=3)
        plain, idem = [], []
        for _ in range(max(rounds, 1)):
            plain.append(throughput(c.bootstrap, "bi", "all", n))
            idem.append(throughput(c.bootstrap, "bi", "all", n, **{"enable.idempotence": True}))
        med = lambda xs: sorted(xs)[len(xs) // 2]  # noqa: E731
        out["acksall_plain_records_per_s"] = [round(x) for x in plain]
        out["acksall_idempotent_records_per_s"] = [round(x) for x in idem]
        out["idempotent_over_plain_ratio"] = round(med(idem) / med(plain), 3)
        c.create_topic("fi", 1, 3, min_insync=2)
        c.wait_for_leaders("fi", isr_size=3)
        out["failover_idempotent_s"] = round(failover(c, "fi", **{"enable.idempotence": True}), 3)
        for i in c.dead():
            c.restart(i)                      # the same cluster again for the plain baseline
        c.create_topic("fp", 1, 3, min_insync=2)
        c.wait_for_leaders("fp", isr_size=3)
        out["failover_plain_same_run_s"] = round(failover(c, "fp"), 3)
        out["session_timeout_ms"] = session_timeout_ms
    return out


TXN_RECORDS = 100


def transactional_throughput(bootstrap: str, topic: str, n: int, tid: str) -> tuple[float, list[float]]:
    """records/s of a transactional producer (acks=all, idempotent) committing every TXN_RECORDS
    records, and each commit_transaction's duration in seconds."""
    p = _producer(bootstrap, "all", **{"enable.idempotence": True, "transactional.id": tid})
    p.init_transactions(30)
    p.begin_transaction()                      # warm-up: coordinator, metadata, connections
    p.produce(topic, VALUE, partition=0)
    p.commit_transaction(30)
    commits: list[float] = []
    t0 = time.perf_counter()
    for i in range(0, n, TXN_RECORDS):
        p.begin_transaction()
        for _ in range(min(TXN_RECORDS, n - i)):
            p.produce(topic, VALUE, partition=0)
        p.poll(0)
        c0 = time.perf_counter()
        p.commit_transaction(60)               # flushes the transaction's records, then EndTxn
        commits.append(time.perf_counter() - c0)
    return n / (time.perf_counter() - t0), commits


def transactions(d: str, n: int, rounds: int, session_timeout_ms: int) -> dict:
    """Transactional (commit every 100 records) vs idempotent acks=all throughput on one
    cluster, alternating rounds; commit latency over every transactional round."""
    out: dict = {}
    with Cluster(3, f"{d}/txn", coordinator="embedded", session_timeout_ms=session_timeout_ms,
                 broker_config={"transaction_state_num_partitions": 3}) as c:
        c.create_topic("bt", 1, 3, min_insync=2)
        c.wait_for_leaders("bt", isr_size=3)
        idem, txn, commits = [], [], []
        for r in range(max(rounds, 1)):
            idem.append(throughput(c.bootstrap, "bt", "all", n, **{"enable.idempotence": True}))
            rate, cs = transactional_throughput(c.bootstrap, "bt", n, f"bench-{r}")
            txn.append(rate)
            commits += cs
        med = lambda xs: sorted(xs)[len(xs) // 2]  # noqa: E731
        q = sorted(commits)
        out["acksall_idempotent_same_run_records_per_s"] = [round(x) for x in idem]
        out["transactional_records_per_s"] = [round(x) for x in txn]
        out["transactional_over_idempotent_ratio"] = round(med(txn) / med(idem), 3)
        out["records_per_transaction"] = TXN_RECORDS
        out["commit_ms_p50"] = round(q[len(q) // 2] * 1000, 2)
        out["commit_ms_p99"] = round(q[min(len(q) - 1, int(len(q) * 0.99))] * 1000, 2)
    return out


def _print(res: dict, as_json: bool) -> None:
    if as_json:
        print(json.dumps(res, indent=2, sort_keys=True))
    else:
        for k, v in res.items():
            print(f"{k}: {v}")


if __name__ == "__main__":
    main()
