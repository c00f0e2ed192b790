"""A consume-transform-produce loop with confluent-kafka transactions: read an input topic as a
consumer group member (isolation.level read_committed), write each record transformed to the
output topic (same partition) and commit the consumed offsets in the same transaction
(send_offsets_to_transaction), so that every input has its output exactly once in committed
data, whatever crashes in between. Runs against any Kafka-compatible cluster, e.g. ours:

    kafkaverify broker start --brokers 3 --data-dir /tmp/kv --auto-create-topics --min-insync 2
    python examples/consume_transform_produce.py --bootstrap 127.0.0.1:9092 --seed-input 100
    python examples/consume_transform_produce.py --bootstrap 127.0.0.1:9092 --expect 100

`--seed-input N` writes N input records ("in-0" ...) to the input topic and exits; the loop then
processes until `--expect N` outputs are committed (or `--idle-s` passes without input) and
prints one JSON line: transactions committed and aborted, records processed. `--history PATH`
records the producer (its transactions, sends and offset commits) in the kafkaverify history
format, version 2 (docs/history-format.md). Kill it at any moment and start it again: the new
instance's InitProducerId (same transactional.id) fences the old one and aborts its open
transaction, and the group resumes from the offsets committed with the last transaction.
"""
from __future__ import annotations

import argparse
import json
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition


def transform(value: bytes) -> bytes:
    """The work: here, "in-7" -> "out-7"."""
    return b"out-" + value.split(b"-", 1)[-1]


def seed_input(bootstrap: str, topic: str, n: int, partitions: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all"})
    for i in range(n):
        p.produce(topic, f"in-{i}".encode(), partition=i % partitions)
        p.poll(0)
    left = p.flush(30)
    if left:
        raise SystemExit(f"{left} input records unacknowledged after 30 s")


def run(a: argparse.Namespace) -> dict:
    history = None
    raw = Producer({"bootstrap.servers": a.bootstrap, "transactional.id": a.transactional_id,
                    "enable.idempotence": True, "acks": "all", "linger.ms": 5,
                    "transaction.timeout.ms": 10000})
    producer = raw
    if a.history:
        # lazy: the recorder is kafkaverify's; the loop runs without it
        from kafkaverify.plugin.client_history import ClientHistory
        history = ClientHistory(a.history, version=2, trace_id="consume-transform-produce")
        producer = history.producer(raw, transactional_id=a.transactional_id)
    consumer = Consumer({"bootstrap.servers": a.bootstrap, "group.id": a.group, "enable.auto.commit": False,
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                         "session.timeout.ms": 6000})
    stats = {"committed": 0, "aborted": 0, "processed": 0}
    try:
        producer.init_transactions(30)
        consumer.subscribe([a.input])
        idle_since = time.monotonic()
        while stats["processed"] < a.expect or not a.expect:
            msgs = [m for m in consumer.consume(a.batch, 0.5) if m.error() is None]
            if not msgs:
                if time.monotonic() - idle_since > a.idle_s:
                    break
                continue
            idle_since = time.monotonic()
            producer.begin_transaction()
            try:
                for m in msgs:
                    producer.produce(a.output, transform(m.value()), partition=m.partition())
                    producer.poll(0)
                # the next offset to read of every partition this member has a position in
                positions = [tp for tp in consumer.position(consumer.assignment()) if tp.offset >= 0]
                if history is not None:
                    producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 30,
                                                         group=a.group)
                else:
                    producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 30)
                producer.commit_transaction(30)
                stats["committed"] += 1
                stats["processed"] += len(msgs)
                if a.pause_s:
                    time.sleep(a.pause_s)      # pacing, so that a test can kill it mid-stream
            except KafkaException as e:
                err = e.args[0]
                if err.fatal():
                    raise                  # fenced: a newer instance runs; this one stops
                producer.abort_transaction(30)
                stats["aborted"] += 1
                # consume again from the offsets the group committed with the last transaction
                committed = consumer.committed(consumer.assignment(), 30)
                for tp in committed:
                    consumer.seek(TopicPartition(tp.topic, tp.partition, max(tp.offset, 0)))
    finally:
        consumer.close()
        producer.flush(10)
        if history is not None:
            history.close()
    return stats


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--input", default="ctp-in")
    ap.add_argument("--output", default="ctp-out")
    ap.add_argument("--group", default="ctp")
    ap.add_argument("--transactional-id", default="ctp-0")
    ap.add_argument("--seed-input", type=int, default=0, metavar="N", help="write N input records and exit")
    ap.add_argument("--partitions", type=int, default=1, help="partitions of the input topic (for --seed-input)")
    ap.add_argument("--expect", type=int, default=0, metavar="N", help="stop after N records processed")
    ap.add_argument("--batch", type=int, default=10, help="records per transaction at most")
    ap.add_argument("--idle-s", type=float, default=10.0, help="stop after this long without input")
    ap.add_argument("--pause-s", type=float, default=0.0, help="pause after each commit")
    ap.add_argument("--history", default=None, help="record the producer's history here (JSON lines)")
    a = ap.parse_args(argv)
    if a.seed_input:
        seed_input(a.bootstrap, a.input, a.seed_input, a.partitions)
        print(json.dumps({"seeded": a.seed_input}))
        return 0
    print(json.dumps(run(a)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
