"""A consume-transform-produce worker for tests/test_broker_txn_coordinator.py, one per client:
consumes `in` in group "ctp" (read_committed), and per batch writes the values to `out` and
sends the consumed offsets in one transaction (send_offsets_to_transaction).

    python -m tests.txn_ctp_worker CLIENT BOOTSTRAP WORKER_ID hold|-

Prints "ready", then "committed N" per transaction. With `hold`, its second transaction stops
after the output and the offsets were sent, prints "holding" and waits on stdin (the test kills
it there). A transaction that fails abortably is aborted and the consumer rewound to the group's
committed offsets."""
from __future__ import annotations

import asyncio
import sys

SESSION_MS, TXN_TIMEOUT_MS = 2000, 2000


def _hold(hold: str, done: int) -> None:
    if hold == "hold" and done == 1:
        print("holding", flush=True)
        sys.stdin.readline()


def confluent(bootstrap: str, wid: str, hold: str) -> None:
    from confluent_kafka import Consumer, KafkaException, Producer
    cons = Consumer({"bootstrap.servers": bootstrap, "group.id": "ctp", "isolation.level": "read_committed",
                     "enable.auto.commit": False, "auto.offset.reset": "earliest", "session.timeout.ms": SESSION_MS,
                     "heartbeat.interval.ms": 300})
    prod = Producer({"bootstrap.servers": bootstrap, "transactional.id": "ctp-" + wid,
                     "transaction.timeout.ms": TXN_TIMEOUT_MS, "linger.ms": 0})
    prod.init_transactions(30)
    cons.subscribe(["in"])
    print("ready", flush=True)
    done = 0
    while True:
        msgs = [m for m in cons.consume(num_messages=4, timeout=0.3) if not m.error()]
        if not msgs:
            continue
        try:
            prod.begin_transaction()
            for m in msgs:
                prod.produce("out", value=m.value(), partition=m.partition())
            prod.send_offsets_to_transaction(cons.position(cons.assignment()), cons.consumer_group_metadata(), 30)
            prod.flush(30)
            _hold(hold, done)
            prod.commit_transaction(30)
            done += 1
            print("committed", len(msgs), flush=True)
        except KafkaException as e:
            if not e.args[0].txn_requires_abort():
                raise
            prod.abort_transaction(30)
            for tp in cons.committed(cons.assignment(), 30):
                cons.seek(tp)


def kafka_python(bootstrap: str, wid: str, hold: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.errors import KafkaError
    from kafka.structs import OffsetAndMetadata
    cons = KafkaConsumer("in", bootstrap_servers=bootstrap, group_id="ctp", isolation_level="read_committed",
                         enable_auto_commit=False, auto_offset_reset="earliest", session_timeout_ms=SESSION_MS,
                         heartbeat_interval_ms=300)
    prod = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="ctp-" + wid, enable_idempotence=True,
                         transaction_timeout_ms=TXN_TIMEOUT_MS)
    prod.init_transactions()
    print("ready", flush=True)
    done = 0
    while True:
        batch = cons.poll(300, max_records=4)
        if not batch:
            continue
        try:
            prod.begin_transaction()
            for recs in batch.values():
                for r in recs:
                    prod.send("out", r.value, partition=r.partition)
            prod.send_offsets_to_transaction({tp: OffsetAndMetadata(recs[-1].offset + 1, "", -1)
                                              for tp, recs in batch.items()}, cons.group_metadata())
            prod.flush(30)
            _hold(hold, done)
            prod.commit_transaction()
            done += 1
            print("committed", sum(len(r) for r in batch.values()), flush=True)
        except KafkaError:
            prod.abort_transaction()
            for tp in cons.assignment():
                off = cons.committed(tp)
                cons.seek(tp, off or 0)


async def _aiokafka(bootstrap: str, wid: str, hold: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.errors import KafkaError
    cons = AIOKafkaConsumer("in", bootstrap_servers=bootstrap, group_id="ctp", isolation_level="read_committed",
                            enable_auto_commit=False, auto_offset_reset="earliest", session_timeout_ms=SESSION_MS,
                            heartbeat_interval_ms=300)
    prod = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id="ctp-" + wid,
                            transaction_timeout_ms=TXN_TIMEOUT_MS)
    await cons.start()
    await prod.start()
    print("ready", flush=True)
    done = 0
    loop = asyncio.get_running_loop()
    while True:
        batch = await cons.getmany(timeout_ms=300, max_records=4)
        if not batch:
            continue
        try:
            await prod.begin_transaction()
            for recs in batch.values():
                for r in recs:
                    await prod.send("out", r.value, partition=r.partition)
            await prod.send_offsets_to_transaction({tp: recs[-1].offset + 1 for tp, recs in batch.items()}, "ctp")
            await prod.flush()
            await loop.run_in_executor(None, _hold, hold, done)
            await prod.commit_transaction()
            done += 1
            print("committed", sum(len(r) for r in batch.values()), flush=True)
        except KafkaError:
            await prod.abort_transaction()
            for tp in cons.assignment():
                cons.seek(tp, await cons.committed(tp) or 0)


def main(argv: list[str]) -> None:
    client, bootstrap, wid, hold = argv
    if client == "aiokafka":
        asyncio.run(_aiokafka(bootstrap, wid, hold))
    else:
        {"confluent": confluent, "kafka-python": kafka_python}[client](bootstrap, wid, hold)


if __name__ == "__main__":
    main(sys.argv[1:])
