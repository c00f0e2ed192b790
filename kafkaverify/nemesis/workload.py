"""The nemesis's clients: a recorded producer at chosen settings (acks, retries, max in flight,
idempotence) over kafka-python, confluent-kafka or aiokafka; consumer-group members as processes
(kafkaverify.groupclient); final reads of every partition. Everything they are told is written to
history files (docs/history-format.md) that kafkaverify.groupclient.merge_histories joins.

The client libraries (kafka-python, confluent-kafka, aiokafka) are imported where a client is
made, not here: each is optional, a run uses one, and confluent-kafka loads librdkafka.

A send whose client reports an error is recorded `info` (a failed retry may still have been
written: STYLE.md 10); one never answered by the end of the run is left open (read back as info).
"""
from __future__ import annotations

import asyncio
import inspect
import threading
import time
from pathlib import Path

from kafkaverify.drivers.registry import DRIVERS, is_driver
from traces.history_recorder import HistoryRecorder

REQUEST_TIMEOUT_MS = 4000
SEND_INTERVAL_S = 0.05          # pacing of the producer: a few hundred records per schedule
MAX_OUTSTANDING = 50            # bound on unanswered sends (the producer waits, never queues more)
FINAL_READER = 999              # process id of the final reads


INT32_MAX = 2147483647          # Kafka's "retry until delivery.timeout.ms" (the Java client's default)


def client_defaults(client: str, idempotence: bool | None = None) -> dict:
    """The producer settings a client runs with when the application sets none (besides acks):
    idempotence, retries, max in flight. kafka-python's are read from the installed library
    (3.x: idempotence on, retries unbounded, 5 in flight); librdkafka's are its documented
    defaults (enable.idempotence=false, retries=INT32_MAX, max.in.flight=1000000); aiokafka's
    idempotence default is read from the library, and it retries until its request timeout with
    one batch in flight per partition. `idempotence`: the setting chosen, where a default
    depends on it."""
    if is_driver(client):
        return DRIVERS[client].defaults(idempotence)
    if client == "kafka-python":
        from kafka import KafkaProducer
        c = KafkaProducer.DEFAULT_CONFIG
        retries = c["retries"]
        return {"idempotence": bool(c["enable_idempotence"]),
                "retries": INT32_MAX if retries == float("inf") else min(int(retries), INT32_MAX),
                "max_in_flight": int(c["max_in_flight_requests_per_connection"])}
    if client == "confluent-kafka":
        # with idempotence librdkafka lowers max.in.flight to 5 unless it was set (then > 5 is an error)
        return {"idempotence": False, "retries": INT32_MAX, "max_in_flight": 5 if idempotence else 1_000_000}
    if client == "aiokafka":
        from aiokafka import AIOKafkaProducer
        idem = inspect.signature(AIOKafkaProducer.__init__).parameters["enable_idempotence"].default
        return {"idempotence": bool(idem), "retries": INT32_MAX, "max_in_flight": 1}
    raise ValueError(f"unknown client {client!r}")


def send_with(client: str, p, run, topic: str, partition: int, value: bytes, on_done) -> None:
    """One asynchronous send by an in-process Python client; on_done(offset, None) when
    acknowledged, on_done(None, error name) when refused (or cancelled). `run` runs a coroutine on
    the client's event loop (aiokafka)."""
    if client == "kafka-python":
        f = p.send(topic, value, partition=partition)
        f.add_callback(lambda md: on_done(md.offset, None))
        f.add_errback(lambda e: on_done(None, type(e).__name__))
    elif client == "confluent-kafka":
        def cb(err, msg):
            on_done(None, str(err.name())) if err else on_done(msg.offset(), None)
        p.produce(topic, value, partition=partition, on_delivery=cb)
    else:
        async def go():
            fut = await p.send(topic, value, partition=partition)

            def done(f):
                e = None if f.cancelled() else f.exception()
                if f.cancelled() or e is not None:
                    on_done(None, "cancelled" if f.cancelled() else type(e).__name__)
                else:
                    on_done(f.result().offset, None)
            fut.add_done_callback(done)
        run(go())


class Producer:
    """One producer process of the history; send(value, on_done(offset|None, error|None))."""

    def __init__(self, client: str, bootstrap: str, w: dict):
        self.client = client
        acks = w["acks"]
        if client == "kafka-python":
            from kafka import KafkaProducer
            self.p = KafkaProducer(bootstrap_servers=bootstrap, acks=acks, retries=w["retries"],
                                   enable_idempotence=w["idempotence"],
                                   max_in_flight_requests_per_connection=w["max_in_flight"],
                                   request_timeout_ms=REQUEST_TIMEOUT_MS, retry_backoff_ms=100,
                                   linger_ms=0, max_block_ms=10_000)
        elif client == "confluent-kafka":
            from confluent_kafka import Producer as CP
            self.p = CP({"bootstrap.servers": bootstrap, "acks": str(acks), "retries": w["retries"],
                         "enable.idempotence": w["idempotence"], "log_level": 3,
                         "max.in.flight.requests.per.connection": w["max_in_flight"],
                         "request.timeout.ms": REQUEST_TIMEOUT_MS, "message.timeout.ms": 30_000,
                         "linger.ms": 0, "retry.backoff.ms": 100})
            self._stop = threading.Event()
            self._poller = threading.Thread(target=self._poll, daemon=True)
            self._poller.start()
        elif client == "aiokafka":
            from aiokafka import AIOKafkaProducer
            self.loop = asyncio.new_event_loop()
            self._t = threading.Thread(target=self.loop.run_forever, daemon=True)
            self._t.start()

            async def make():
                # aiokafka has no max-in-flight knob (one in flight per partition) and retries
                # until request_timeout; its settings are recorded as such
                p = AIOKafkaProducer(bootstrap_servers=bootstrap, acks=acks,
                                     enable_idempotence=w["idempotence"],
                                     request_timeout_ms=REQUEST_TIMEOUT_MS * 3, retry_backoff_ms=100)
                await p.start()
                return p
            self.p = self._run(make())
        else:
            raise ValueError(f"unknown client {client!r}")

    def settings(self, w: dict) -> dict:
        """What the client really runs with, as the checker must judge it."""
        # the history format records acks as a string ("all", "1", "0"); the clients take 1 as an int
        if self.client == "aiokafka":
            return {"acks": str(w["acks"]), "idempotence": w["idempotence"], "retries": 2147483647, "max_in_flight": 1}
        return {"acks": str(w["acks"]), "idempotence": w["idempotence"], "retries": w["retries"],
                "max_in_flight": w["max_in_flight"]}

    def _run(self, coro, timeout: float = 60):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def _poll(self) -> None:
        while not self._stop.is_set():
            self.p.poll(0.05)

    def send(self, topic: str, partition: int, value: bytes, on_done) -> None:
        send_with(self.client, self.p, self._run, topic, partition, value, on_done)

    def close(self, timeout_s: float = 30) -> None:
        """Waits up to timeout_s for unanswered sends, then closes (those stay unknown)."""
        try:
            if self.client == "kafka-python":
                try:
                    self.p.flush(timeout_s)
                    self.p.close(5)
                except Exception:
                    # kafka-python's close flushes first and, while sends are pending on a
                    # partition with no leader, times out before closing; its __del__ would
                    # then try again and print that timeout. Stop its sender and mark it closed.
                    sender = getattr(self.p, "_sender", None)
                    if sender is not None:
                        sender.force_close()
                    self.p._closed = True
                    raise
            elif self.client == "confluent-kafka":
                self.p.flush(timeout_s)
                self._stop.set()
                self._poller.join(5)
            else:
                self._run(self.p.flush(), timeout_s)
                self._run(self.p.stop(), 10)
                self.loop.call_soon_threadsafe(self.loop.stop)
                self._t.join(5)
        except Exception:
            pass      # a close that times out leaves those sends open: unknown, as they are


class ProducerWorkload:
    """A thread that sends `records` values ("p{process}-{i}") one every SEND_INTERVAL_S,
    recording each; restart() closes the producer and opens a new one as a new process."""

    def __init__(self, rec: HistoryRecorder, client: str, bootstrap: str, w: dict, process: int = 0,
                 driver_log: Path | None = None):
        self.rec, self.client, self.bootstrap, self.w = rec, client, bootstrap, w
        self.driver_log = driver_log       # a driver's stderr goes here (kafkaverify/drivers)
        self.process = process
        self.outstanding = threading.Semaphore(MAX_OUTSTANDING)
        self.lock = threading.Lock()
        self.sent = 0
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._restart = threading.Event()
        self._thread = threading.Thread(target=self._run, name="producer", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def restart(self) -> None:
        self._restart.set()

    def _open(self):
        if is_driver(self.client):     # a client of another language, in its driver process
            from kafkaverify.drivers.producer import DriverProducer
            p = DriverProducer(self.client, self.bootstrap, self.w, log=self.driver_log)
        else:
            p = Producer(self.client, self.bootstrap, self.w)
        self.rec.producer_config(process=self.process, **p.settings(self.w))
        return p

    def _run(self) -> None:
        try:
            p = self._open()
        except Exception as e:
            self.errors.append(f"producer did not start: {e}")
            return
        topic, parts = self.w["topic"], self.w["partitions"]
        i = 0
        while i < self.w["records"] and not self._stop.is_set():
            if self._restart.is_set():
                self._restart.clear()
                p.close(5)
                self.process += 1
                p = self._open()
            value = f"p{self.process}-{i}"
            part = i % parts
            if not self.outstanding.acquire(timeout=1.0):
                continue
            op = self.rec.invoke(self.process, "send", topic=topic, partition=part, value=value)

            def done(offset, err, op=op, definite=False):
                self.outstanding.release()
                if err is None:
                    self.rec.ok(op, offset=offset)
                elif definite:         # the client says it was never written (a driver's definite error)
                    self.rec.fail(op, error=err)
                else:
                    self.rec.info(op, error=err)
            try:
                p.send(topic, part, value.encode(), done)
            except Exception as e:        # refused before it left the client: it did not happen
                self.outstanding.release()
                self.rec.fail(op, error=type(e).__name__)
            i += 1
            self.sent = i
            time.sleep(SEND_INTERVAL_S)
        p.close()

    def finish(self, timeout_s: float = 60) -> None:
        """Waits for every record to be sent (bounded) and the producer closed."""
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            self._stop.set()
            self._thread.join(30)


def final_reads(rec: HistoryRecorder, bootstrap: str, topic: str, partitions: int,
                timeout_s: float = 30, isolation: str | None = None) -> list[str]:
    """A `final` poll of every partition from offset 0 to its end (kafka-python, assigned
    partitions; only records below the HW are served). `isolation` "read_committed" (a
    transactional run, format version 2): read at that level, to the last stable offset, and
    recorded with it. Returns
    the partitions that could not be read at all, each with the client's error (a partition
    left without a leader times out); their reads are recorded as undecided."""
    from kafka import KafkaConsumer, TopicPartition
    from kafkaverify.nemesis.errors import error_text
    unread: list[str] = []
    try:
        c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                          request_timeout_ms=REQUEST_TIMEOUT_MS * 3, auto_offset_reset="earliest",
                          isolation_level=isolation or "read_uncommitted")
    except Exception as e:              # e.g. NoBrokersAvailable: nothing answers at all
        for part in range(partitions):
            op = rec.invoke(FINAL_READER, "poll", topic=topic, partition=part, final=True, isolation=isolation)
            rec.info(op, error=f"final read failed: {error_text(e)}")
            unread.append(f"{topic}/{part}: {error_text(e)}")
        return unread
    try:
        for part in range(partitions):
            tp = TopicPartition(topic, part)
            op = rec.invoke(FINAL_READER, "poll", topic=topic, partition=part, final=True, isolation=isolation)
            try:
                c.assign([tp])
                c.seek(tp, 0)
                end = c.end_offsets([tp])[tp]
                got: list[tuple[int, str]] = []
                deadline = time.monotonic() + timeout_s
                while c.position(tp) < end and time.monotonic() < deadline:
                    for recs in c.poll(timeout_ms=500).values():
                        got += [(m.offset, m.value.decode()) for m in recs]
                if c.position(tp) < end:
                    rec.info(op, error=f"read only to {c.position(tp)} of {end} within {timeout_s}s")
                else:
                    rec.ok(op, offsets=[o for o, _ in got], values=[v for _, v in got])
            except Exception as e:          # e.g. KafkaTimeoutError: no leader to answer
                # an unavailable partition leaves the read undecided (info), never a crash
                rec.info(op, error=f"final read failed: {error_text(e)}")
                unread.append(f"{topic}/{part}: {error_text(e)}")
    finally:
        c.close()
    return unread


def member_histories(out_dir: Path) -> list[Path]:
    return sorted(Path(out_dir).glob("member-*.jsonl"))
