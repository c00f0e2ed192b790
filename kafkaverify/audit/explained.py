"""Disagreements the audit has traced to their cause: a real client doing what the model's
producer does not. Each entry names the client, the question and the settings it covers, and
says what the evidence was, so that a report can say why the broker showed what the model rules
out. An entry never turns a disagreement into an agreement: the cell stays a disagreement, with
its explanation, because the model's producer is what users read the promises from.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from kafkaverify.audit.settings import Setting


@dataclass(frozen=True)
class Explanation:
    client: str
    question: str
    applies: Callable[[Setting], bool]
    text: str


EXPLAINED: tuple[Explanation, ...] = (
    Explanation(
        "confluent", "duplicate", lambda s: not s.idempotence,
        "librdkafka sends a batch again after NOT_LEADER_FOR_PARTITION whatever `retries` says: its "
        "error table (rd_kafka_err_action) classes that error as 'message not persisted'. A leader "
        "demoted while an acks=all write waits for its followers answers NOT_LEADER_OR_FOLLOWER (as "
        "Kafka's DelayedProduce does), yet the records may already be on the follower that becomes "
        "leader. Seen with retries=0: the old leader's trace appends the records from one Produce, "
        "the new leader's from a second Produce of the same producer (seed 0 of the default matrix, "
        "`acks=all retries=0 max.in.flight=5`). The model's producer never sends again with "
        "retries=0, so it rules the duplicate out."),
) + tuple(
    Explanation(
        "kafkajs", q, lambda s: s.idempotence,
        "kafkajs 2.2.4's idempotent producer renumbers a batch it retries: producer/sendMessages.js "
        "takes the partition's next sequence number when it builds a Produce request and, when the "
        "request fails (a leader killed under it), subtracts the batch's length from the partition's "
        "sequence again, so the retried batch goes out under a new number while batches sent in the "
        "meantime already took the numbers in between. The broker's sequence check, which is all "
        "idempotence is, then sees well-formed sequences: records are written in the new order "
        "(reorder); a batch that was written before its request failed is written again under its "
        "new number (duplicate); and a later batch that reuses the old number is answered as a "
        "duplicate of the first with the first's offset, as Kafka answers DUPLICATE_SEQUENCE, so an "
        "acknowledged record is never written (loss). Seen with `kafkaverify nemesis --clients kafkajs "
        "--idempotence` (seed 0: a leader crash of 300 ms suffices). The model's producer keeps a "
        "batch's sequence number across retries, so it rules all three out.")
    for q in ("reorder", "duplicate", "loss")) + (
    Explanation(
        "kafkajs", "reorder", lambda s: not s.idempotence,
        "kafkajs 2.2.4 has no per-partition send queue: every producer.send() call takes its own "
        "asynchronous path to the wire (producer/sendMessages.js: metadata for the topic, the "
        "partition's leader, a connection to it, then its own Produce request and its own retry "
        "loop), and maxInFlightRequests bounds the requests on one connection, not the sends an "
        "application has outstanding. Around a leader change these paths race: a send that waits "
        "for a metadata refresh, a new connection or a retry back-off is overtaken by the next send, "
        "issued before it was answered, which reaches the new leader first and is written before "
        "it. Seen at max.in.flight=1 with retries=5 and with retries=0 (seed 0 of `kafkaverify "
        "audit-ordering --clients kafkajs --schedules 1`), so no retry is needed. The model's "
        "producer, like the Java client, keeps one queue per partition and sends its head first, "
        "so with one request in flight it rules the reordering out; with kafkajs only an "
        "application that awaits each send keeps its order."),
)


def explain(client: str, question: str, setting: Setting) -> str | None:
    for e in EXPLAINED:
        if e.client == client and e.question == question and e.applies(setting):
            return e.text
    return None
