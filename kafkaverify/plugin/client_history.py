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

Transactions (format version 2: `ClientHistory(path, version=2)`): a transactional producer of
kafka-python (KafkaProducer(transactional_id=...), 2.1 and later), confluent-kafka
(Producer({"transactional.id": ...}); say `rec.producer(p, transactional_id=...)`, librdkafka
does not expose its configuration) or aiokafka (AIOKafkaProducer(transactional_id=...)) is
recorded with its transactional_id; the sends and send_offsets_to_transaction's offsets between
begin_transaction and its end carry the transaction, and commit_transaction / abort_transaction
are `txn_commit` / `txn_abort` operations, ok / fail / info as the client reported: a commit that
raised is `info` (it may have committed) unless the client says the transaction must be aborted
(then `fail`: an abortable error means EndTxn(commit) was never sent). A consumer made with
isolation_level read_committed (isolation.level for confluent-kafka, say
`rec.consumer(c, isolation="read_committed")`) records its polls with that isolation.
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

    def __init__(self, path: str | Path, version: int = 1, **meta: Any):
        """`version` 2 to record transactions and read_committed polls (docs/history-format.md)."""
        self.path = Path(path)
        self.version = version
        self.rec = HistoryRecorder(self.path, version=version, **meta)
        self._processes = itertools.count()
        self._txns = itertools.count(1)
        self.group_of: dict[int, str] = {}      # id of a consumer's group metadata -> its group
        self.metadata: list[Any] = []
        self.touched: set[tuple[str, int]] = set()
        self._lock = threading.Lock()
        self.ops = 0

    def _new_process(self) -> int:
        return next(self._processes)

    def _touch(self, topic: str, partition: int) -> None:
        with self._lock:
            self.touched.add((topic, int(partition)))
            self.ops += 1

    def new_txn(self) -> int:
        """A transaction id unique in the history."""
        with self._lock:
            return next(self._txns)

    def needs_v2(self, what: str) -> None:
        if self.version < 2:
            raise ValueError(f"{what} is recorded in history format version 2: "
                             "ClientHistory(path, version=2)")

    # --- wrappers --------------------------------------------------------------------------
    def producer(self, client: Any, **settings: Any) -> "Any":
        """`settings`: for confluent-kafka, the producer_config it runs with (librdkafka does not
        expose it): retries, max_in_flight, idempotence, acks, transactional_id."""
        lib = _library(client)
        if lib == "kafka":
            return KafkaPythonProducer(self, client)
        if lib in ("confluent_kafka", "cimpl"):
            return ConfluentProducer(self, client, settings)
        if lib == "aiokafka":
            return AioKafkaProducer(self, client)
        raise TypeError(f"cannot record a {type(client).__name__} from {lib!r}: "
                        "kafka-python KafkaProducer or confluent-kafka Producer "
                        "(or aiokafka AIOKafkaProducer) expected")

    def consumer(self, client: Any, group: str | None = None, delivery: str | None = None,
                 isolation: str | None = None, ends: bool = False) -> "Any":
        """`group` and `delivery` ("at-least-once" / "at-most-once") are what the application
        claims; the checkers hold it to them. `isolation`: confluent-kafka's isolation.level
        (librdkafka does not expose it); kafka-python's and aiokafka's are read from the client.
        `ends` (kafka-python, format version 2): after each poll returns, ask the partitions'
        end offsets (ListOffsets at the consumer's isolation level) and record them as the
        polls' `end_offset`, which lets the checkers draw anti-dependencies (G-single)."""
        lib = _library(client)
        if ends:
            if lib != "kafka":
                raise ValueError("ends=True needs kafka-python's end_offsets (a ListOffsets at "
                                 "the consumer's isolation level)")
            self.needs_v2("a poll's end_offset")
        if lib == "kafka":
            return KafkaPythonConsumer(self, client, group, delivery,
                                       isolation or client.config.get("isolation_level"), ends)
        if lib in ("confluent_kafka", "cimpl"):
            return ConfluentConsumer(self, client, group, delivery, isolation)
        if lib == "aiokafka":
            return AioKafkaConsumer(self, client, group, delivery,
                                    isolation or getattr(client, "_isolation_level", None))
        raise TypeError(f"cannot record a {type(client).__name__} from {lib!r}: "
                        "kafka-python KafkaConsumer or confluent-kafka Consumer "
                        "(or aiokafka AIOKafkaConsumer) expected")

    # --- final reads -----------------------------------------------------------------------
    def final_reads(self, bootstrap: str, timeout_s: float = 30.0, isolation: str | None = None) -> list[str]:
        """Reads every touched partition from offset 0 to its end (an assigned kafka-python
        consumer), recorded as `final` polls begun after every send completed; `isolation`
        "read_committed" reads to the last stable offset at that level (version 2). Returns the
        partitions that could not be read to their end within the bound (their final read is
        recorded as `info`, so the verdict says unknown rather than guessing)."""
        if isolation == "read_committed":
            self.needs_v2("a read_committed final read")
        # lazy: kafka-python is the test's client library, loaded only when a history is read back
        from kafka import KafkaConsumer, TopicPartition
        problems = []
        for n, (topic, p) in enumerate(sorted(self.touched)):
            proc = FINAL_PROCESS_BASE + n
            op = self.rec.invoke(proc, "poll", topic=topic, partition=p, final=True,
                                 isolation="read_committed" if isolation == "read_committed" else None)
            c = None
            offsets, values = [], []
            try:
                c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                  request_timeout_ms=15000, isolation_level=isolation or "read_uncommitted")
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


def _error_name(e: BaseException) -> str:
    inner = e.args[0] if e.args else None
    if inner is not None and hasattr(inner, "name") and callable(inner.name):   # confluent KafkaError
        return str(inner.name())
    return type(e).__name__


class _Transactional(_Wrapper):
    """The transaction a producer instance has open (None outside one), and the recording of
    its end. A transaction begins when the client's begin_transaction returned; it ends with
    the first commit or abort call (whatever the client then does is that end's outcome)."""

    txn: int | None = None
    transactional_id: str | None = None

    def _config(self, **settings: Any) -> None:
        if settings.get("transactional_id") is not None:
            self._h.needs_v2("a transactional producer")
            self.transactional_id = settings["transactional_id"]
        self._h.rec.producer_config(self.process, **{k: v for k, v in settings.items() if v is not None})

    def _begun(self) -> None:
        self.txn = self._h.new_txn()

    def _txn_fields(self) -> dict:
        return {} if self.txn is None else {"txn": self.txn}

    def _must_abort(self, e: BaseException) -> bool:
        """The client says the failed commit was never made (an abortable error)."""
        return False

    def _end(self, f: str, call) -> Any:
        """Records the end `f` (txn_commit / txn_abort) of the open transaction around `call`."""
        if self.txn is None:
            return call()               # nothing open that the history knows of: the client decides
        rec, txn = self._h.rec, self.txn
        self.txn = None
        op = rec.invoke(self.process, f, txn=txn)
        try:
            result = call()
        except Exception as e:
            if f == "txn_commit" and self._must_abort(e):
                rec.fail(op, error=_error_name(e))
            else:
                rec.info(op, error=_error_name(e))
            raise
        rec.ok(op)
        return result

    def _offsets_invokes(self, positions: dict[tuple[str, int], int], group: str) -> list[int]:
        """The `commit` operations of send_offsets_to_transaction, in the open transaction."""
        return [self._h.rec.invoke(self.process, "commit", topic=t, partition=p, group=group, offset=o,
                                   **self._txn_fields()) for (t, p), o in sorted(positions.items())]

    def _offsets_done(self, ops: list[int], error: BaseException | None) -> None:
        for op in ops:
            if error is None:
                self._h.rec.ok(op)
            else:
                self._h.rec.info(op, error=_error_name(error))


class KafkaPythonProducer(_Transactional):
    """kafka-python's KafkaProducer; its transactional API (kafka-python 2.1 and later:
    init_transactions, begin_transaction, send_offsets_to_transaction, commit_transaction,
    abort_transaction) is recorded when it has a transactional_id."""

    def __init__(self, history: ClientHistory, client: Any):
        super().__init__(history, client)
        cfg = client.config
        self._acks0 = cfg.get("acks") in (0, "0")
        # kafka-python 3 defaults retries to infinity ("until delivery_timeout_ms"): recorded as
        # Kafka's INT32_MAX, as the nemesis records it
        retries = cfg.get("retries") or 0
        self._config(retries=INT32_MAX if retries == float("inf") else min(int(retries), INT32_MAX),
                     max_in_flight=int(cfg.get("max_in_flight_requests_per_connection") or 1),
                     idempotence=bool(cfg.get("enable_idempotence")), acks=_acks(cfg.get("acks")),
                     transactional_id=cfg.get("transactional_id"))

    def begin_transaction(self) -> None:
        self._client.begin_transaction()
        self._begun()

    def commit_transaction(self) -> None:
        return self._end("txn_commit", self._client.commit_transaction)

    def abort_transaction(self) -> None:
        return self._end("txn_abort", self._client.abort_transaction)

    def _must_abort(self, e: BaseException) -> bool:
        tm = getattr(self._client, "_transaction_manager", None)
        return bool(tm is not None and tm.has_abortable_error() and not tm.has_fatal_error())

    def send_offsets_to_transaction(self, offsets: dict, group_metadata: Any) -> None:
        group = group_metadata if isinstance(group_metadata, str) else getattr(group_metadata, "group_id",
                                                                                 str(group_metadata))
        ops = self._offsets_invokes({(tp.topic, tp.partition): om.offset for tp, om in offsets.items()}, group)
        try:
            self._client.send_offsets_to_transaction(offsets, group_metadata)
        except Exception as e:
            self._offsets_done(ops, e)
            raise
        self._offsets_done(ops, None)

    def send(self, topic: str, value: Any = None, key: Any = None, partition: int | None = None, **kw: Any):
        if partition is None:
            parts = self._client.partitions_for(topic) or set()
            if len(parts) != 1:
                raise ValueError(f"{topic} has {len(parts)} partitions: pass partition= so the "
                                 "history knows where each record goes")
            partition = next(iter(parts))
        rec = self._h.rec
        self._h._touch(topic, partition)
        op = rec.invoke(self.process, "send", topic=topic, partition=partition, key=text(key), value=text(value),
                        **self._txn_fields())
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


class ConfluentProducer(_Transactional):
    """confluent-kafka's Producer; init_transactions, begin_transaction, produce,
    send_offsets_to_transaction, commit_transaction and abort_transaction are recorded when
    the application states its transactional_id."""

    def __init__(self, history: ClientHistory, client: Any, settings: dict | None = None):
        super().__init__(history, client)
        # confluent-kafka does not expose its configuration: the application states it, or
        # librdkafka's defaults (idempotence off, retries on, 5 in flight, acks all) are recorded;
        # a transactional producer is idempotent with acks all.
        txn = (settings or {}).get("transactional_id") is not None
        s = {"retries": INT32_MAX, "max_in_flight": 5, "idempotence": txn, "acks": "all", **(settings or {})}
        self._acks0 = s["acks"] == "0"
        self._config(**s)

    def begin_transaction(self) -> None:
        self._client.begin_transaction()
        self._begun()

    def commit_transaction(self, *args: Any) -> None:
        return self._end("txn_commit", lambda: self._client.commit_transaction(*args))

    def abort_transaction(self, *args: Any) -> None:
        return self._end("txn_abort", lambda: self._client.abort_transaction(*args))

    def _must_abort(self, e: BaseException) -> bool:
        err = e.args[0] if e.args else None
        return bool(hasattr(err, "txn_requires_abort") and err.txn_requires_abort())

    def send_offsets_to_transaction(self, positions, group_metadata, *args: Any, group: str | None = None) -> None:
        """`group`: the consumer group's id, when `group_metadata` is not a recorded consumer's
        (librdkafka's group metadata does not say its group)."""
        group = group or self._h.group_of.get(id(group_metadata))
        if group is None:
            raise ValueError("pass the group metadata of a recorded consumer (its consumer_group_metadata()), "
                             "or group=: the history names the group the offsets go to")
        # librdkafka leaves out a partition without a position (a negative logical offset)
        ops = self._offsets_invokes({(tp.topic, tp.partition): tp.offset for tp in positions if tp.offset >= 0},
                                    group)
        try:
            self._client.send_offsets_to_transaction(positions, group_metadata, *args)
        except Exception as e:
            self._offsets_done(ops, e)
            raise
        self._offsets_done(ops, None)

    def produce(self, topic: str, value: Any = None, key: Any = None, partition: int = -1,
                on_delivery: Any = None, **kw: Any) -> None:
        if partition is None or partition < 0:
            raise ValueError("pass partition= so the history knows where each record goes")
        rec = self._h.rec
        self._h._touch(topic, partition)
        op = rec.invoke(self.process, "send", topic=topic, partition=partition, key=text(key), value=text(value),
                        **self._txn_fields())

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
    def __init__(self, history: ClientHistory, client: Any, group: str | None, delivery: str | None,
                 isolation: str | None = None, ends: bool = False):
        super().__init__(history, client)
        self.group, self.delivery = group, delivery
        self.ends = ends
        self.generation: int | None = None
        self._assigned: list[tuple[str, int]] = []
        if isolation not in (None, "read_uncommitted", "read_committed"):
            raise ValueError(f"isolation must be read_committed or read_uncommitted, got {isolation!r}")
        # read_uncommitted is the format's default: recorded only when it is read_committed
        self.isolation = isolation if isolation == "read_committed" else None
        if self.isolation:
            history.needs_v2("a read_committed consumer")

    def subscribe(self, *args: Any, **kw: Any) -> None:
        # Not recorded yet: a rebalance changes the partitions under a poll. Refuse rather than
        # leave the history silently without this consumer's reads.
        raise NotImplementedError("the history recorder follows assign()-ed consumers only; "
                                  "use consumer.assign([...]) (with group= to commit)")

    def _record_assign(self, tps: list[tuple[str, int]], position) -> None:
        rec = self._h.rec
        if self._h.version >= 2:
            # version 2: one assignment is the set invoked at one time, replacing the whole set;
            # a seek of some partitions restates the others at their positions
            changed = set(tps)
            tps = sorted(set(self._assigned) | changed)
            for topic, p in tps:
                self._h._touch(topic, p)
            ops = rec.invoke_set(self.process, "assign", [
                {"topic": t, "partition": p, "group": self.group, "delivery": self.delivery} for t, p in tps])
            for (topic, p), op in zip(tps, ops):
                rec.ok(op, offset=position(topic, p) if (topic, p) in changed else self._position(topic, p),
                       generation=self.generation)
            return
        for topic, p in tps:
            self._h._touch(topic, p)
            op = rec.invoke(self.process, "assign", topic=topic, partition=p, group=self.group,
                            delivery=self.delivery)
            rec.ok(op, offset=position(topic, p), generation=self.generation)

    def _position(self, topic: str, p: int) -> int:
        raise NotImplementedError

    def _record_polls(self, poll, got) -> Any:
        """Invokes a poll of every assigned partition, calls `poll`, completes each with what
        it returned for that partition (one operation per partition, same times)."""
        rec = self._h.rec
        ops = {tp: rec.invoke(self.process, "poll", topic=tp[0], partition=tp[1], isolation=self.isolation)
               for tp in self._assigned}
        try:
            result = poll()
        except Exception as e:
            for op in ops.values():
                rec.info(op, error=type(e).__name__)
            raise
        by_tp = got(result)
        ends: dict = {}
        if self.ends and ops:
            try:            # asked after the poll returned, before it is recorded complete
                ends = self._end_offsets(list(ops))
            except Exception:       # no end known: the polls are recorded without one
                ends = {}
        for tp, op in ops.items():
            recs = by_tp.get(tp, [])
            rec.ok(op, offsets=[o for o, _ in recs], values=[v for _, v in recs],
                   end_offset=ends.get(tp))
        return result

    def _end_offsets(self, tps: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        raise NotImplementedError

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

    def _end_offsets(self, tps: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        from kafka import TopicPartition
        got = self._client.end_offsets([TopicPartition(t, p) for t, p in tps])
        return {(tp.topic, tp.partition): o for tp, o in got.items()}

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
    def _position(self, topic: str, p: int) -> int:
        from confluent_kafka import TopicPartition     # lazy: the recorded client is confluent-kafka here
        o = self._client.position([TopicPartition(topic, p)])[0].offset
        return max(o, 0)

    def consumer_group_metadata(self) -> Any:
        """The client's group metadata, remembered as this consumer's group (for a recorded
        producer's send_offsets_to_transaction)."""
        md = self._client.consumer_group_metadata()
        self._h.group_of[id(md)] = self.group or "?"
        self._h.metadata.append(md)         # kept alive: its id stays its own
        return md

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


class AioKafkaProducer(_Transactional):
    """aiokafka's AIOKafkaProducer (its coroutines awaited as the client's): send /
    send_and_wait, and with a transactional_id begin_transaction, send_offsets_to_transaction,
    commit_transaction, abort_transaction. start() runs InitProducerId for a transactional one."""

    def __init__(self, history: ClientHistory, client: Any):
        super().__init__(history, client)
        tm = getattr(client, "_txn_manager", None)
        idem = tm is not None
        acks = getattr(getattr(client, "_sender", None), "_acks", None)
        self._acks0 = acks in (0, "0")
        # aiokafka retries until its request timeout, one batch in flight per partition
        self._config(retries=INT32_MAX, max_in_flight=1, idempotence=idem,
                     acks=_acks(-1 if acks is None else acks),
                     transactional_id=None if tm is None else tm.transactional_id)

    async def begin_transaction(self) -> None:
        await self._client.begin_transaction()
        self._begun()

    async def commit_transaction(self) -> None:
        return await self._end_async("txn_commit", self._client.commit_transaction)

    async def abort_transaction(self) -> None:
        return await self._end_async("txn_abort", self._client.abort_transaction)

    async def _end_async(self, f: str, call) -> None:
        if self.txn is None:
            return await call()
        rec, txn = self._h.rec, self.txn
        self.txn = None
        op = rec.invoke(self.process, f, txn=txn)
        try:
            await call()
        except BaseException as e:      # a cancelled commit is as unknown as a failed one
            rec.info(op, error=_error_name(e))
            raise
        rec.ok(op)

    async def send_offsets_to_transaction(self, offsets: dict, group_id: str) -> None:
        positions = {(tp.topic, tp.partition): (om.offset if hasattr(om, "offset") else int(om))
                     for tp, om in offsets.items()}
        ops = self._offsets_invokes(positions, group_id)
        try:
            await self._client.send_offsets_to_transaction(offsets, group_id)
        except BaseException as e:
            self._offsets_done(ops, e)
            raise
        self._offsets_done(ops, None)

    async def send(self, topic: str, value: Any = None, key: Any = None, partition: int | None = None,
                   **kw: Any):
        if partition is None:
            raise ValueError("pass partition= so the history knows where each record goes")
        rec = self._h.rec
        self._h._touch(topic, partition)
        op = rec.invoke(self.process, "send", topic=topic, partition=partition, key=text(key), value=text(value),
                        **self._txn_fields())
        try:
            fut = await self._client.send(topic, value=value, key=key, partition=partition, **kw)
        except Exception as e:
            _send_outcome(rec, op, e)
            raise

        def done(f):
            if f.cancelled():
                rec.info(op, error="cancelled")
            elif f.exception() is not None:
                _send_outcome(rec, op, f.exception())
            elif self._acks0:
                rec.info(op, error="acks=0")
            else:
                rec.ok(op, offset=f.result().offset)
        fut.add_done_callback(done)
        return fut

    async def send_and_wait(self, topic: str, value: Any = None, key: Any = None, partition: int | None = None,
                            **kw: Any):
        fut = await self.send(topic, value=value, key=key, partition=partition, **kw)
        return await fut


class AioKafkaConsumer(_Consumer):
    """aiokafka's AIOKafkaConsumer, assign()-ed: assign, seek, getmany / getone recorded (its
    isolation_level read from the client)."""

    def assign(self, partitions) -> None:
        self._client.assign(partitions)
        self._assigned = sorted((tp.topic, tp.partition) for tp in partitions)
        self._pending_assign = True

    async def _record_pending(self) -> None:
        # aiokafka learns a fresh assignment's positions only once it fetched them: recorded at
        # the first read after assign()
        if getattr(self, "_pending_assign", False):
            from aiokafka import TopicPartition     # lazy: the recorded client is aiokafka here
            pos = {tp: await self._client.position(TopicPartition(*tp)) for tp in self._assigned}
            self._pending_assign = False
            self._positions = pos
            self._record_assign(self._assigned, lambda t, p: pos[(t, p)])

    def _position(self, topic: str, p: int) -> int:
        return getattr(self, "_positions", {}).get((topic, p), 0)

    def seek(self, partition, offset: int) -> None:
        self._client.seek(partition, offset)
        self._record_assign([(partition.topic, partition.partition)], lambda t, p: offset)

    async def getmany(self, *partitions: Any, timeout_ms: int = 0, max_records: int | None = None):
        await self._record_pending()
        rec = self._h.rec
        ops = {tp: rec.invoke(self.process, "poll", topic=tp[0], partition=tp[1], isolation=self.isolation)
               for tp in self._assigned}
        try:
            result = await self._client.getmany(*partitions, timeout_ms=timeout_ms, max_records=max_records)
        except BaseException as e:
            for op in ops.values():
                rec.info(op, error=type(e).__name__)
            raise
        by_tp = {(tp.topic, tp.partition): [(m.offset, text(m.value)) for m in ms] for tp, ms in result.items()}
        for tp, op in ops.items():
            recs = by_tp.get(tp, [])
            rec.ok(op, offsets=[o for o, _ in recs], values=[v for _, v in recs])
            if recs:
                self._positions = {**getattr(self, "_positions", {}), tp: recs[-1][0] + 1}
        return result
