"""orders: a tiny order pipeline, the kafkaverify pytest plugin's example application.

An OrderPublisher sends each order (JSON, keyed by order id) to one partition and confirms it;
a Ledger consumes orders and books each one once per order id. The application claims:
every confirmed order reaches the ledger (durable, acks=all), and the ledger processes records
at least once.

Both take their Kafka clients from the caller, so tests can hand them recorded clients
(kafka_history.producer(...), kafka_history.consumer(...)).
"""
from __future__ import annotations

import json
import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.structs import OffsetAndMetadata

# The settings the application's durability claim rests on.
PRODUCER_SETTINGS = {"acks": "all", "retries": 5, "max_in_flight_requests_per_connection": 1,
                     "enable_idempotence": False, "linger_ms": 0, "request_timeout_ms": 10000,
                     "retry_backoff_ms": 200}


def make_producer(bootstrap: str, **overrides) -> KafkaProducer:
    return KafkaProducer(bootstrap_servers=bootstrap, **{**PRODUCER_SETTINGS, **overrides})


def make_consumer(bootstrap: str, group: str | None = None) -> KafkaConsumer:
    return KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                         auto_offset_reset="earliest", request_timeout_ms=15000)


class OrderPublisher:
    def __init__(self, producer, topic: str, partition: int = 0):
        self.producer, self.topic, self.partition = producer, topic, partition
        self.confirmed: list[int] = []

    def publish(self, order_id: int, amount: int, timeout_s: float = 15.0) -> bool:
        """Sends one order and waits for the broker's acknowledgement; False if unconfirmed."""
        body = json.dumps({"order": order_id, "amount": amount}).encode()
        try:
            self.producer.send(self.topic, value=body, key=str(order_id).encode(),
                               partition=self.partition).get(timeout=timeout_s)
        except Exception:
            return False            # unknown outcome: the caller may retry with a new order id
        self.confirmed.append(order_id)
        return True


class Ledger:
    """Books orders. With a group it commits what it has booked (at least once)."""

    def __init__(self, consumer, topic: str, partition: int = 0, commit: bool = False):
        self.consumer, self.tp, self.commit = consumer, TopicPartition(topic, partition), commit
        self.booked: dict[int, int] = {}
        consumer.assign([self.tp])

    def book(self, record) -> None:
        o = json.loads(record.value)
        self.booked.setdefault(o["order"], o["amount"])

    def poll_once(self) -> None:
        for records in self.consumer.poll(timeout_ms=300).values():
            for r in records:
                self.book(r)
        if self.commit:
            self.consumer.commit()          # after booking: what is committed was processed

    def run_until(self, order_ids, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        want = set(order_ids)
        while not want <= set(self.booked):
            if time.monotonic() > deadline:
                raise TimeoutError(f"ledger misses orders {sorted(want - set(self.booked))[:10]}")
            self.poll_once()


class EagerLedger(Ledger):
    """THE BUG (kept for the example's broken variant): it acknowledges the backlog up front --
    commits the partition's end offset -- and then works through it. It still claims at least
    once, but a crash mid-backlog skips every order it had not booked yet."""

    def poll_once(self) -> None:
        end = self.consumer.end_offsets([self.tp])[self.tp]
        self.consumer.commit({self.tp: OffsetAndMetadata(end, "", -1)})
        for records in self.consumer.poll(timeout_ms=300).values():
            for r in records:
                self.book(r)
