"""Recording what real Kafka clients did, in the history format (docs/history-format.md), by
wrapping a user's kafka-python or confluent-kafka producer and consumer. Used by the pytest
plugin (kafkaverify/pytest_plugin.py) and usable on its own:

    rec = ClientHistory("run.jsonl")
    p = rec.producer(KafkaProducer(...))          # p.send(...) records invoke + outcome
    c = rec.consumer(KafkaConsumer(...), group="g", delivery="at-least-once")
    c.assign([TopicPartition("t", 0)]); c.poll(); c.commit()
    rec.final_reads(bootstrap)                    # reads every touched partition from 0
    rec.close()

Unknown outcomes stay unknown (STYLE 10): a send whose future fails with a timeout or a
disconnect is `info`; `fail` only for errors that say the record was not appended. Each wrapper
delegates every attribute it does not record to the client it wraps.
"""
from __future__ import annotations

import itertools
import threading
import time
from pathlib import Path
from typing import Any

from traces.history_recorder import HistoryRecorder

INT32_MAX = 2147483647          # Kafka's "retry until delivery.timeout.ms"

# Broker errors that certainly mean "not appended" (the request was refused before the log
# write). Everything else -- timeouts, disconnects, NOT_ENOUGH_REPLICAS_AFTER_APPEND,
# leadership changes -- may or may not have been written, so it is `info`.
CERTAIN_FAILURES = {
    "NotEnoughReplicasError", "MessageSizeTooLargeError", "InvalidTopicError",
    "RecordListTooLargeError", "TopicAuthorizationFailedError", "CorruptRecordError",
    "NOT_ENOUGH_REPLICAS", "MSG_SIZE_TOO_LARGE", "TOPIC_EXCEPTION", "TOPIC_AUTHORIZATION_FAILED",
}
# Commit errors that mean the commit did not happen.
CERTAIN_COMMIT_FAILURES = {"CommitFailedError", "IllegalGenerationError", "UnknownMemberIdError",
                           "RebalanceInProgressError", "ILLEGAL_GENERATION", "UNKNOWN_MEMBER_ID",
                           "REBALANCE_IN_PROGRESS"}
FINAL_PROCESS_BASE = 1_000_000     # process numbers of the final reads: apart from any client's


def text(v: Any) -> str | None:
    """A record key or value as the history's string: UTF-8 text as is, other bytes as hex."""
    if v is None or isinstance(v, str):
        return v
    if isinstance(v, (bytes, bytearray, memoryview)):
        b = bytes(v)
        try:
            return b.decode("utf-8")
        except UnicodeDecodeError:
            return "hex:" + b.hex()
    return str(v)


def _acks(a: Any) -> str:
    return "all" if a in (-1, "all", "-1") else str(a)


def _library(client: Any) -> str:
    return type(client).__module__.split(".")[0]


class ClientHistory:
    """One history for one test: a HistoryRecorder plus the topic-partitions the clients
    touched (the partitions the final reads cover)."""

    def __init__(self, path: str | Path, **meta: Any):
        self.path = Path(path)
        self.rec = HistoryRecorder(self.path, **meta)
        self._processes = itertools.count()
        self.touched: set[tuple[str, int]] = set()
        self._lock = threading.Lock()
        self.ops = 0

    def _new_process(self) -> int:
        return next(self._processes)

    def _touch(self, topic: str, partition: int) -> None:
        with self._lock:
            self.touched.add((topic, int(partition)))
            self.ops += 1

    # --- wrappers --------------------------------------------------------------------------
    def producer(self, client: Any) -> "Any":
        lib = _library(client)
        if lib == "kafka":
            return KafkaPythonProducer(self, client)
        if lib in ("confluent_kafka", "cimpl"):
            return ConfluentProducer(self, client)
        raise TypeError(f"cannot record a {type(client).__name__} from {lib!r}: "
                        "kafka-python KafkaProducer or confluent-kafka Producer expected")

    def consumer(self, client: Any, group: str | None = None, delivery: str | None = None) -> "Any":
        """`group` and `delivery` ("at-least-once" / "at-most-once") are what the application
        claims; the checkers hold it to them."""
        lib = _library(client)
        if lib == "kafka":
            return KafkaPythonConsumer(self, client, group, delivery)
        if lib in ("confluent_kafka", "cimpl"):
            return ConfluentConsumer(self, client, group, delivery)
        raise TypeError(f"cannot record a {type(client).__name__} from {lib!r}: "
                        "kafka-python KafkaConsumer or confluent-kafka Consumer expected")

    # --- final reads -----------------------------------------------------------------------
    def final_reads(self, bootstrap: str, timeout_s: float = 30.0) -> list[str]:
        """Reads every touched partition from offset 0 to its end (an assigned kafka-python
        consumer), recorded as `final` polls begun after every send completed. Returns the
        partitions that could not be read to their end within the bound (their final read is
        recorded as `info`, so the verdict says unknown rather than guessing)."""
        # lazy: kafka-python is the test's client library, loaded only when a history is read back
        from kafka import KafkaConsumer, TopicPartition
        problems = []
        for n, (topic, p) in enumerate(sorted(self.touched)):
            proc = FINAL_PROCESS_BASE + n
            op = self.rec.invoke(proc, "poll", topic=topic, partition=p, final=True)
            c = None
            offsets, values = [], []
            try:
                c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                  request_timeout_ms=15000)
                tp = TopicPartition(topic, p)
                c.assign([tp])
                end = c.end_offsets([tp])[tp]
                c.seek_to_beginning(tp)
                deadline = time.monotonic() + timeout_s
                while c.position(tp) < end and time.monotonic() < deadline:
                    for m in c.poll(timeout_ms=500).get(tp, []):
                        if m.offset < end:
                            offsets.append(m.offset)
                            values.append(text(m.value))
                if c.position(tp) < end:
                    raise TimeoutError(f"read {topic}-{p} to {c.position(tp)} of {end} in {timeout_s}s")
                self.rec.ok(op, offsets=offsets, values=values)
            except Exception as e:          # the read's outcome is unknown, and says why
                self.rec.info(op, error=f"{type(e).__name__}: {e}"[:200])
                problems.append(f"{topic}-{p}: {type(e).__name__}: {e}")
            finally:
                if c is not None:
                    c.close()
        return problems

    def close(self) -> None:
        self.rec.close()


class _Wrapper:
    def __init__(self, history: ClientHistory, client: Any):
        self._h, self._client = history, client
        self.process = history._new_process()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def _send_outcome(rec: HistoryRecorder, op: int, err: Any) -> None:
    name = err.name() if hasattr(err, "name") and callable(err.name) else type(err).__name__
    if name in CERTAIN_FAILURES:
        rec.fail(op, error=name)
    else:
        rec.info(op, error=name)


class KafkaPythonProducer(_Wrapper):
    def __init__(self, history: ClientHistory, client: Any):
        super().__init__(history, client)
        cfg = client.config
        self._acks0 = cfg.get("acks") in (0, "0")
        # kafka-python 3 defaults retries to infinity ("until delivery_timeout_ms"): recorded as
        # Kafka's INT32_MAX, as the nemesis records it
        retries = cfg.get("retries") or 0
        retries = INT32_MAX if retries == float("inf") else min(int(retries), INT32_MAX)
        history.rec.producer_config(self.process, retries=retries,
                                    max_in_flight=int(cfg.get("max_in_flight_requests_per_connection") or 1),
                                    idempotence=bool(cfg.get("enable_idempotence")),
                                    acks=_acks(cfg.get("acks")))

    def send(self, topic: str, value: Any = None, key: Any = None, partition: int | None = None, **kw: Any):
        if partition is None:
            parts = self._client.partitions_for(topic) or set()
            if len(parts) != 1:
                raise ValueError(f"{topic} has {len(parts)} partitions: pass partition= so the "
                                 "history knows where each record goes")
            partition = next(iter(parts))
        rec = self._h.rec
        self._h._touch(topic, partition)
        op = rec.invoke(self.process, "send", topic=topic, partition=partition, key=text(key), value=text(value))
        try:
            fut = self._client.send(topic, value=value, key=key, partition=partition, **kw)
        except Exception as e:
            _send_outcome(rec, op, e)
            raise
        if self._acks0:
            fut.add_callback(lambda md: rec.info(op, error="acks=0"))
        else:
            fut.add_callback(lambda md: rec.ok(op, offset=md.offset))
        fut.add_errback(lambda e: _send_outcome(rec, op, e))
        return fut


class ConfluentProducer(_Wrapper):
    def __init__(self, history: ClientHistory, client: Any, settings: dict | None = None):
        super().__init__(history, client)
        # confluent-kafka does not expose its configuration: the application states it, or
        # librdkafka's defaults (idempotence off, retries on, 5 in flight, acks all) are recorded.
        s = {"retries": INT32_MAX, "max_in_flight": 5, "idempotence": False, "acks": "all", **(settings or {})}
        self._acks0 = s["acks"] == "0"
        history.rec.producer_config(self.process, **s)

    def produce(self, topic: str, value: Any = None, key: Any = None, partition: int = -1,
                on_delivery: Any = None, **kw: Any) -> None:
        if partition is None or partition < 0:
            raise ValueError("pass partition= so the history knows where each record goes")
        rec = self._h.rec
        self._h._touch(topic, partition)
        op = rec.invoke(self.process, "send", topic=topic, partition=partition, key=text(key), value=text(value))

        def done(err, msg):
            if err is not None:
                _send_outcome(rec, op, err)
            elif self._acks0:
                rec.info(op, error="acks=0")
            else:
                rec.ok(op, offset=msg.offset())
            if on_delivery is not None:
                on_delivery(err, msg)
        try:
            self._client.produce(topic, value=value, key=key, partition=partition, on_delivery=done, **kw)
        except Exception as e:
            rec.fail(op, error=type(e).__name__)     # refused locally (queue full, bad args)
            raise


class _Consumer(_Wrapper):
    def __init__(self, history: ClientHistory, client: Any, group: str | None, delivery: str | None):
        super().__init__(history, client)
        self.group, self.delivery = group, delivery
        self.generation: int | None = None
        self._assigned: list[tuple[str, int]] = []

    def subscribe(self, *args: Any, **kw: Any) -> None:
        # Not recorded yet: a rebalance changes the partitions under a poll. Refuse rather than
        # leave the history silently without this consumer's reads.
        raise NotImplementedError("the history recorder follows assign()-ed consumers only; "
                                  "use consumer.assign([...]) (with group= to commit)")

    def _record_assign(self, tps: list[tuple[str, int]], position) -> None:
        rec = self._h.rec
        for topic, p in tps:
            self._h._touch(topic, p)
            op = rec.invoke(self.process, "assign", topic=topic, partition=p, group=self.group,
                            delivery=self.delivery)
            rec.ok(op, offset=position(topic, p), generation=self.generation)

    def _record_polls(self, poll, got) -> Any:
        """Invokes a poll of every assigned partition, calls `poll`, completes each with what
        it returned for that partition (one operation per partition, same times)."""
        rec = self._h.rec
        ops = {tp: rec.invoke(self.process, "poll", topic=tp[0], partition=tp[1]) for tp in self._assigned}
        try:
            result = poll()
        except Exception as e:
            for op in ops.values():
                rec.info(op, error=type(e).__name__)
            raise
        by_tp = got(result)
        for tp, op in ops.items():
            recs = by_tp.get(tp, [])
            rec.ok(op, offsets=[o for o, _ in recs], values=[v for _, v in recs])
        return result

    def _record_commit(self, positions: dict[tuple[str, int], int], commit) -> Any:
        rec = self._h.rec
        if self.group is None:
            raise ValueError("record a committing consumer with group=...")
        ops = {tp: rec.invoke(self.process, "commit", topic=tp[0], partition=tp[1], group=self.group,
                              generation=self.generation, offset=o) for tp, o in sorted(positions.items())}
        try:
            result = commit()
        except Exception as e:
            name = type(e).__name__
            for op in ops.values():
                (rec.fail if name in CERTAIN_COMMIT_FAILURES else rec.info)(op, error=name)
            raise
        for op in ops.values():
            rec.ok(op)
        return result


class KafkaPythonConsumer(_Consumer):
    def assign(self, partitions) -> None:
        self._client.assign(partitions)
        self._assigned = sorted((tp.topic, tp.partition) for tp in partitions)
        self._record_assign(self._assigned, self._position)

    def _position(self, topic: str, p: int) -> int:
        from kafka import TopicPartition     # lazy: the recorded client is kafka-python here
        return self._client.position(TopicPartition(topic, p))

    def seek(self, partition, offset: int) -> None:
        """A seek starts the consumer's reading afresh: recorded as a new assign at `offset`."""
        self._client.seek(partition, offset)
        self._record_assign([(partition.topic, partition.partition)], lambda t, p: offset)

    def seek_to_beginning(self, *partitions) -> None:
        self._client.seek_to_beginning(*partitions)
        tps = [(tp.topic, tp.partition) for tp in partitions] or self._assigned
        self._record_assign(tps, self._position)

    def poll(self, timeout_ms: int = 0, max_records: int | None = None, **kw: Any):
        def got(result):
            return {(tp.topic, tp.partition): [(m.offset, text(m.value)) for m in ms] for tp, ms in result.items()}
        return self._record_polls(lambda: self._client.poll(timeout_ms=timeout_ms, max_records=max_records, **kw), got)

    def commit(self, offsets: dict | None = None):
        if offsets is None:
            positions = {tp: self._position(*tp) for tp in self._assigned}
        else:
            positions = {(tp.topic, tp.partition): om.offset for tp, om in offsets.items()}
        return self._record_commit(positions, lambda: self._client.commit(offsets) if offsets is not None
                                   else self._client.commit())


class ConfluentConsumer(_Consumer):
    def assign(self, partitions) -> None:
        self._client.assign(partitions)
        self._assigned = sorted((tp.topic, tp.partition) for tp in partitions)
        starts = {(tp.topic, tp.partition): tp.offset for tp in partitions}
        self._record_assign(self._assigned, lambda t, p: max(starts[(t, p)], 0))

    def poll(self, timeout: float = -1):
        def got(m):
            if m is None or m.error():
                return {}
            return {(m.topic(), m.partition()): [(m.offset(), text(m.value()))]}
        return self._record_polls(lambda: self._client.poll(timeout), got)

    def consume(self, num_messages: int = 1, timeout: float = -1):
        def got(ms):
            out: dict = {}
            for m in ms:
                if not m.error():
                    out.setdefault((m.topic(), m.partition()), []).append((m.offset(), text(m.value())))
            return out
        return self._record_polls(lambda: self._client.consume(num_messages, timeout), got)

    def commit(self, offsets=None, asynchronous: bool = False):
        if offsets is None:
            positions = {(tp.topic, tp.partition): tp.offset for tp in self._client.position(
                [__import__("confluent_kafka").TopicPartition(t, p) for t, p in self._assigned]) if tp.offset >= 0}
        else:
            positions = {(tp.topic, tp.partition): tp.offset for tp in offsets}
        return self._record_commit(positions, lambda: self._client.commit(
            offsets=offsets, asynchronous=False) if offsets is not None else self._client.commit(asynchronous=False))
