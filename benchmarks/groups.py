"""Consumer-group benchmarks on a 3-broker cluster with confluent-kafka consumers (threads in
this process, so the figures are the protocol's, not Python start-up):

1. join: 3 new members subscribe -> all three hold their partitions in one generation; baseline:
   3 consumers with assign() (no group) -> each has read its first record, same run
2. rebalance: one member closes (LeaveGroup) -> the other two hold all partitions in a newer
   generation
3. coordinator fail-over: kill -9 of the group coordinator -> the first successful synchronous
   commit issued after the kill; baseline: kill -9 of a data partition's leader -> the first
   acknowledged acks=all write sent after it (benchmarks.broker.failover), same run

    python -m benchmarks.groups [--repeat N] [--session-timeout-ms MS] [--json]

The broker runs with group.initial.rebalance.delay.ms=0 (Kafka's default is 3000: a first join
would then take 3 s by design) and members with heartbeat.interval.ms=250 (default 3000: the
surviving members learn of a rebalance at their next heartbeat).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import threading
import time

from impl.cluster import Cluster
from benchmarks.broker import failover

TOPIC = "g"
OFFSETS_PARTITIONS = 3
HEARTBEAT_MS = 250


def _consumer(bootstrap: str, group: str | None, **extra):
    import confluent_kafka as ck
    conf = {"bootstrap.servers": bootstrap, "enable.auto.commit": False, "auto.offset.reset": "earliest",
            "heartbeat.interval.ms": HEARTBEAT_MS, "session.timeout.ms": 6000}
    if group:
        conf["group.id"] = group
    else:
        conf["group.id"] = "unused"          # librdkafka wants one even for assign()
    conf.update(extra)
    return ck.Consumer(conf)


class _Polling:
    """Consumers polled in threads; `assigned[i]` is the latest assignment callback's partitions."""

    def __init__(self, consumers):
        self.cs = consumers
        self.assigned: list[set[int]] = [set() for _ in consumers]
        self.first_record: list[float | None] = [None for _ in consumers]
        self.stop = [False] * len(consumers)
        self.threads = []

    def on_assign(self, i):
        def cb(_c, parts):
            self.assigned[i] = {tp.partition for tp in parts}
        return cb

    def run(self, i):
        c = self.cs[i]
        while not self.stop[i]:
            m = c.poll(0.05)
            if m is not None and not m.error() and self.first_record[i] is None:
                self.first_record[i] = time.perf_counter()

    def start(self):
        for i in range(len(self.cs)):
            t = threading.Thread(target=self.run, args=(i,), daemon=True)
            t.start()
            self.threads.append(t)

    def close(self, i):
        """Close consumer i from this thread only once its polling thread has left poll():
        closing a consumer another thread is polling is undefined in librdkafka."""
        self.stop[i] = True
        self.threads[i].join(10)
        if self.threads[i].is_alive():
            raise RuntimeError(f"consumer {i}: its poll thread did not stop within 10 s; not closing under it")
        self.cs[i].close()


def _wait(pred, timeout_s: float, what: str) -> float:
    deadline = time.perf_counter() + timeout_s
    while time.perf_counter() < deadline:
        if pred():
            return time.perf_counter()
        time.sleep(0.002)
    raise RuntimeError(f"{what} did not happen within {timeout_s}s")


def join_and_rebalance(c: Cluster, group: str) -> tuple[float, float]:
    cs = [_consumer(c.bootstrap, group) for _ in range(3)]
    pol = _Polling(cs)
    t0 = time.perf_counter()
    for i, cons in enumerate(cs):
        cons.subscribe([TOPIC], on_assign=pol.on_assign(i))
    pol.start()
    t_join = _wait(lambda: all(len(a) == 1 for a in pol.assigned) and
                   set().union(*pol.assigned) == {0, 1, 2}, 60, "join of three") - t0
    t1 = time.perf_counter()
    pol.close(2)
    t_reb = _wait(lambda: set().union(pol.assigned[0], pol.assigned[1]) == {0, 1, 2} and
                  all(pol.assigned[:2]), 60, "rebalance after a leave") - t1
    pol.close(0)
    pol.close(1)
    return t_join, t_reb


def assign_baseline(c: Cluster) -> float:
    import confluent_kafka as ck
    cs = [_consumer(c.bootstrap, None) for _ in range(3)]
    pol = _Polling(cs)
    t0 = time.perf_counter()
    for i, cons in enumerate(cs):
        cons.assign([ck.TopicPartition(TOPIC, i, 0)])
    pol.start()
    t = _wait(lambda: all(pol.first_record), 60, "first records with assign()") - t0
    for i in range(3):
        pol.close(i)
    return t


def coordinator_failover(c: Cluster, group: str) -> float:
    import confluent_kafka as ck
    from impl.group_coordinator import partition_for
    cons = _consumer(c.bootstrap, group)
    cons.subscribe([TOPIC])
    deadline = time.perf_counter() + 60
    while not cons.assignment() and time.perf_counter() < deadline:
        cons.poll(0.05)
    tps = cons.assignment()
    coord = c.leader_of("__consumer_offsets", partition_for(group, OFFSETS_PARTITIONS))
    offset, ok_after, killed = 1, None, None
    while time.perf_counter() < deadline + 60:
        cons.poll(0)
        t_start = time.perf_counter()
        try:
            cons.commit(offsets=[ck.TopicPartition(tp.topic, tp.partition, offset) for tp in tps], asynchronous=False)
            if killed is not None and t_start >= killed:
                ok_after = time.perf_counter()
                break
        except ck.KafkaException:
            time.sleep(0.01)
        offset += 1
        if killed is None and offset > 20:
            killed = time.perf_counter()
            c.kill(coord)
    cons.close()
    if ok_after is None:
        raise RuntimeError("no successful commit after the coordinator was killed")
    return ok_after - killed


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.groups")
    ap.add_argument("--repeat", type=int, default=3, help="join/rebalance rounds (fresh group each)")
    ap.add_argument("--session-timeout-ms", type=int, default=2000, help="brokers' coordination session")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    res: dict = {"machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
                 "session_timeout_ms": a.session_timeout_ms, "heartbeat_interval_ms": HEARTBEAT_MS}
    cfg = {"offsets_topic_num_partitions": OFFSETS_PARTITIONS, "group_initial_rebalance_delay_ms": 0,
           "default_min_insync": 2}
    with tempfile.TemporaryDirectory(prefix="kv-bench-groups-") as d:
        with Cluster(3, f"{d}/c", session_timeout_ms=a.session_timeout_ms, broker_config=cfg) as c:
            c.create_topic(TOPIC, 3, 3, min_insync=2)
            c.wait_for_leaders(TOPIC, isr_size=3)
            from confluent_kafka import Producer
            p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all"})
            for i in range(30):
                p.produce(TOPIC, b"x", partition=i % 3)
            p.flush(30)
            joins, rebs, bases = [], [], []
            for r in range(a.repeat):
                j, rb = join_and_rebalance(c, f"bench-{r}")
                joins.append(j)
                rebs.append(rb)
                bases.append(assign_baseline(c))
            res["join_3_members_s"] = [round(x, 3) for x in joins]
            res["rebalance_after_leave_s"] = [round(x, 3) for x in rebs]
            res["assign_baseline_s"] = [round(x, 3) for x in bases]
            res["join_over_assign_ratio"] = round(statistics.median(joins) / statistics.median(bases), 2)
            c.wait_for_leaders("__consumer_offsets", isr_size=3)
            res["coordinator_failover_s"] = round(coordinator_failover(c, "bench-failover"), 3)
        with Cluster(3, f"{d}/b", session_timeout_ms=a.session_timeout_ms) as c:
            c.create_topic("fo", 1, 3, min_insync=2)
            c.wait_for_leaders("fo", isr_size=3)
            res["leader_failover_baseline_s"] = round(failover(c, "fo"), 3)
        res["coordinator_over_leader_failover_ratio"] = round(
            res["coordinator_failover_s"] / res["leader_failover_baseline_s"], 2)
    if a.json:
        print(json.dumps(res, indent=2, sort_keys=True))
    else:
        for k, v in res.items():
            print(f"{k}: {v}")


if __name__ == "__main__":
    main()
