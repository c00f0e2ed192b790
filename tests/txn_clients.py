"""Transactional producers and read_committed readers of each real client, behind one small
synchronous interface, for the broker's transaction tests (tests/test_broker_txn_coordinator.py).

    p = txn_producer(client, bootstrap, transactional_id)   # init_transactions done
    p.begin(); p.send(topic, partition, value); p.commit() / p.abort(); p.close()
    read_values(client, bootstrap, topic, partitions, until=set_of_values, timeout_s=30,
                isolation="read_committed") -> list of values read

Clients: confluent-kafka (librdkafka 2.16), aiokafka 0.14 (its own event loop in this thread),
kafka-python 3.0 (its KafkaProducer has transactions: transactional_id, init_transactions ...).
"""
from __future__ import annotations

import asyncio
import time

CLIENTS = ("confluent", "aiokafka", "kafka-python")


class Fenced(Exception):
    """The client reported its producer fenced (or otherwise refused the transaction)."""


class _Confluent:
    def __init__(self, bootstrap: str, tid: str, **kw):
        from confluent_kafka import Producer
        self.p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 0, **kw})
        self.p.init_transactions(30)

    def begin(self):
        self.p.begin_transaction()

    def send(self, topic, partition, value: bytes):
        self.p.produce(topic, value=value, partition=partition)

    def flush(self):
        self.p.flush(30)

    def send_offsets(self, offsets: dict, group_metadata):
        from confluent_kafka import TopicPartition
        self.p.send_offsets_to_transaction([TopicPartition(t, p, o) for (t, p), o in offsets.items()],
                                           group_metadata, 30)

    def commit(self):
        from confluent_kafka import KafkaException
        try:
            self.p.commit_transaction(30)
        except KafkaException as e:
            raise Fenced(str(e)) from None

    def abort(self):
        self.p.abort_transaction(30)

    def close(self):
        self.p.flush(1)


class _Aio:
    def __init__(self, bootstrap: str, tid: str, **kw):
        self.loop = asyncio.new_event_loop()
        self.p = self.run(self._make(bootstrap, tid, kw))
        self.futs: list = []

    async def _make(self, bootstrap, tid, kw):
        from aiokafka import AIOKafkaProducer
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=tid, enable_idempotence=True,
                             request_timeout_ms=15000, **kw)
        await p.start()
        return p

    def run(self, coro):
        return self.loop.run_until_complete(asyncio.wait_for(coro, 60))

    def begin(self):
        self.run(self.p.begin_transaction())

    def send(self, topic, partition, value: bytes):
        self.futs.append(self.run(self.p.send(topic, value, partition=partition)))

    def flush(self):
        futs, self.futs = self.futs, []
        for f in futs:
            self.run(f)

    def commit(self):
        from aiokafka.errors import KafkaError
        try:
            self.flush()
            self.run(self.p.commit_transaction())
        except KafkaError as e:
            raise Fenced(repr(e)) from None

    def abort(self):
        self.futs = []
        self.run(self.p.abort_transaction())

    def close(self):
        try:
            self.run(self.p.stop())
        finally:
            self.loop.close()


class _KafkaPython:
    def __init__(self, bootstrap: str, tid: str, **kw):
        from kafka import KafkaProducer
        self.p = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=tid, enable_idempotence=True,
                               request_timeout_ms=15000, **kw)
        self.p.init_transactions()

    def begin(self):
        self.p.begin_transaction()

    def send(self, topic, partition, value: bytes):
        self.p.send(topic, value, partition=partition)

    def flush(self):
        self.p.flush(30)

    def commit(self):
        from kafka.errors import KafkaError
        try:
            self.p.commit_transaction()
        except KafkaError as e:
            raise Fenced(repr(e)) from None

    def abort(self):
        self.p.abort_transaction()

    def close(self):
        self.p.close(5)


def txn_producer(client: str, bootstrap: str, tid: str, **kw):
    return {"confluent": _Confluent, "aiokafka": _Aio, "kafka-python": _KafkaPython}[client](bootstrap, tid, **kw)


def read_values(client: str, bootstrap: str, topic: str, partitions: int, until: set, timeout_s: float = 30,
                isolation: str = "read_committed") -> list:
    """Every value read from the beginning of topic's partitions until all of `until` were seen
    (or the timeout: the caller's assertion then shows what is missing)."""
    if client == "aiokafka":
        return asyncio.run(_aio_read(bootstrap, topic, partitions, until, timeout_s, isolation))
    out: list = []
    deadline = time.monotonic() + timeout_s
    if client == "confluent":
        from confluent_kafka import Consumer, TopicPartition
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "isolation.level": isolation,
                      "enable.auto.commit": False, "auto.offset.reset": "earliest"})
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        try:
            while time.monotonic() < deadline and not until <= set(out):
                m = c.poll(0.2)
                if m is not None and not m.error():
                    out.append(m.value())
        finally:
            c.close()
        return out
    from kafka import KafkaConsumer, TopicPartition
    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None,
                      isolation_level=isolation, request_timeout_ms=15000)
    c.assign([TopicPartition(topic, p) for p in range(partitions)])
    c.seek_to_beginning()
    try:
        while time.monotonic() < deadline and not until <= set(out):
            for recs in c.poll(200).values():
                out += [r.value for r in recs]
    finally:
        c.close()
    return out


async def _aio_read(bootstrap, topic, partitions, until, timeout_s, isolation):
    from aiokafka import AIOKafkaConsumer, TopicPartition
    c = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None,
                         isolation_level=isolation, auto_offset_reset="earliest")
    await c.start()
    out: list = []
    try:
        c.assign([TopicPartition(topic, p) for p in range(partitions)])
        await c.seek_to_beginning()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and not until <= set(out):
            for recs in (await c.getmany(timeout_ms=200)).values():
                out += [r.value for r in recs]
    finally:
        await c.stop()
    return out
