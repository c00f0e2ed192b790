"""The nemesis's transactional workload (`kafkaverify nemesis --transactions on`): a
transactional producer of kafka-python, confluent-kafka or aiokafka runs transactions of a few
records across the topic's partitions and commits or aborts each as the run's seed says; a
read_committed consumer polls every partition while it runs; the final reads are read_committed
too. Everything is written to history files in format version 2 (docs/history-format.md,
"Version 2"), which the history checkers hold to the transactions' promises: a committed
transaction's records all visible exactly once, an aborted one's never seen by read_committed.

Outcomes, as each client reports them (STYLE.md 10: unknown stays unknown): a commit the client
confirmed is `ok`; a commit that raised is followed by an abort, and is `fail` only when that
abort succeeded (the coordinator refuses to abort a transaction it is committing, so the
transaction certainly aborted), else `info` and the producer instance is replaced (a new
process: its InitProducerId fences the old one and aborts whatever it left open). A producer
restart leaves the open transaction without an end: aborted, as the coordinator aborts it.
"""
from __future__ import annotations

import asyncio
import random
import threading
import time

from kafkaverify.nemesis.workload import send_with
from traces.history_recorder import HistoryRecorder

TXN_RECORDS = 3                 # records per transaction, on consecutive partitions
ABORT_ONE_IN = 3                # about one transaction in three is aborted (drawn from the seed)
TXN_INTERVAL_S = 0.05           # pacing between transactions
MIN_TXNS = 12                   # a run stops its producer only after this many transactions
TXN_TIMEOUT_MS = 10_000         # the coordinator aborts a transaction left open this long
REQUEST_TIMEOUT_MS = 4000
BLOCK_S = 15.0                  # bound on init / commit / abort calls
POLLER = 500                    # process id of the read_committed poller
TRANSACTIONAL_ID = "nemesis-txn"


class TxnClientError(Exception):
    """A transactional call the client refused or could not finish; `name` is the client's error
    name."""

    def __init__(self, name: str, text: str = ""):
        super().__init__(f"{name}: {text}" if text else name)
        self.name = name


def _error_name(e: BaseException) -> str:
    inner = e.args[0] if e.args else None
    if inner is not None and hasattr(inner, "name") and callable(inner.name):   # confluent KafkaError
        return str(inner.name())
    return type(e).__name__


class TxnProducer:
    """One transactional producer instance: init() (InitProducerId), begin(), send(topic,
    partition, value, on_done(offset | None, error | None)), commit(), abort(), close(). A
    refused or unfinished call raises TxnClientError."""

    def __init__(self, client: str, bootstrap: str, transactional_id: str):
        self.client, self.tid = client, transactional_id
        if client == "kafka-python":
            from kafka import KafkaProducer
            self.p = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=transactional_id,
                                   enable_idempotence=True, acks="all", linger_ms=0,
                                   request_timeout_ms=REQUEST_TIMEOUT_MS, retry_backoff_ms=100,
                                   transaction_timeout_ms=TXN_TIMEOUT_MS, max_block_ms=int(BLOCK_S * 1000))
        elif client == "confluent-kafka":
            from confluent_kafka import Producer as CP
            self.p = CP({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                         "enable.idempotence": True, "acks": "all", "linger.ms": 0, "log_level": 3,
                         "request.timeout.ms": REQUEST_TIMEOUT_MS, "retry.backoff.ms": 100,
                         "transaction.timeout.ms": TXN_TIMEOUT_MS, "message.timeout.ms": TXN_TIMEOUT_MS})
            self._stop = threading.Event()
            self._poller = threading.Thread(target=self._poll, daemon=True)
            self._poller.start()
        elif client == "aiokafka":
            from aiokafka import AIOKafkaProducer
            self.loop = asyncio.new_event_loop()
            self._t = threading.Thread(target=self.loop.run_forever, daemon=True)
            self._t.start()

            async def make():
                return AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=transactional_id,
                                        enable_idempotence=True, acks="all", retry_backoff_ms=100,
                                        request_timeout_ms=REQUEST_TIMEOUT_MS * 3,
                                        transaction_timeout_ms=TXN_TIMEOUT_MS)
            self.p = self._run(make())
        else:
            raise ValueError(f"unknown client {client!r}")

    def settings(self) -> dict:
        """The producer_config the history records (every transactional producer is idempotent
        with acks all)."""
        retries, mif = {"kafka-python": (2147483647, 5), "confluent-kafka": (2147483647, 5),
                        "aiokafka": (2147483647, 1)}[self.client]
        return {"acks": "all", "idempotence": True, "retries": retries, "max_in_flight": mif,
                "transactional_id": self.tid}

    def _run(self, coro, timeout: float = BLOCK_S):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def _poll(self) -> None:
        while not self._stop.is_set():
            self.p.poll(0.05)

    def _bounded(self, fn):
        """fn() in a thread, waited for BLOCK_S (kafka-python's commit and abort wait for the
        coordinator's answer without a bound of their own)."""
        box: dict = {}

        def run():
            try:
                box["result"] = fn()
            except BaseException as e:     # handed to the caller
                box["error"] = e
        t = threading.Thread(target=run, daemon=True)
        t.start()
        t.join(BLOCK_S)
        if t.is_alive():
            raise TxnClientError("Timeout", f"no answer within {BLOCK_S:g}s")
        if "error" in box:
            raise box["error"]
        return box.get("result")

    def _call(self, what: str):
        """Runs one transactional call of the client, its error as a TxnClientError."""
        try:
            if self.client == "kafka-python":
                return self._bounded(getattr(self.p, what))
            if self.client == "confluent-kafka":
                # begin_transaction is local (no timeout argument); the others take one
                return getattr(self.p, what)() if what == "begin_transaction" else getattr(self.p, what)(BLOCK_S)
            if what == "init_transactions":
                return self._run(self.p.start())
            return self._run(getattr(self.p, what)())
        except TxnClientError:
            raise
        except Exception as e:
            raise TxnClientError(_error_name(e), str(e)[:200]) from e

    def init(self) -> None:
        self._call("init_transactions")

    def begin(self) -> None:
        self._call("begin_transaction")

    def commit(self) -> None:
        self._call("commit_transaction")

    def abort(self) -> None:
        self._call("abort_transaction")

    def send(self, topic: str, partition: int, value: bytes, on_done) -> None:
        send_with(self.client, self.p, self._run, topic, partition, value, on_done)

    def close(self, timeout_s: float = 10) -> None:
        """Closes without ending an open transaction (the next instance's InitProducerId, or the
        coordinator's timeout, aborts it)."""
        try:
            if self.client == "kafka-python":
                self.p.close(timeout_s)
            elif self.client == "confluent-kafka":
                self.p.flush(min(timeout_s, 1.0))
                self._stop.set()
                self._poller.join(5)
            else:
                self._run(self.p.stop(), timeout_s)
                self.loop.call_soon_threadsafe(self.loop.stop)
                self._t.join(5)
        except Exception:
            pass      # sends left unanswered stay open in the history: unknown, as they are


class TxnWorkload:
    """A thread running transactions of TXN_RECORDS records ("p{process}-t{txn}-{k}") across the
    partitions, each committed or aborted as random.Random(seed) draws; restart() replaces the
    producer instance (a new process with the same transactional.id)."""

    def __init__(self, rec: HistoryRecorder, client: str, bootstrap: str, w: dict, seed: int = 0,
                 process: int = 0, transactions: int | None = None):
        self.rec, self.client, self.bootstrap, self.w = rec, client, bootstrap, w
        self.process = process
        self.rng = random.Random(f"txn-{seed}")
        # the workload's `records` bounds the records written, as for the plain producer
        self.limit = transactions if transactions is not None else max(1, w["records"] // TXN_RECORDS)
        self.txn = 0
        self.committed = self.aborted = self.unknown = 0
        self.begin_errors: list[str] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._restart = threading.Event()
        self.ready = threading.Event()      # the first instance initialised (or gave up)
        self._thread = threading.Thread(target=self._run, name="txn-producer", daemon=True)
        self.sent = 0

    def start(self) -> None:
        self._thread.start()

    def restart(self) -> None:
        self._restart.set()

    def _open(self) -> TxnProducer:
        """A new instance, recorded, with InitProducerId done (retried within the bound while the
        coordinator is moving)."""
        p = TxnProducer(self.client, self.bootstrap, TRANSACTIONAL_ID)
        self.rec.producer_config(process=self.process, **p.settings())
        deadline = time.monotonic() + 4 * BLOCK_S
        while True:
            try:
                p.init()
                return p
            except TxnClientError:
                if time.monotonic() > deadline or self._stop.is_set():
                    p.close(1)
                    raise
                # an init that failed (the coordinator moving or loading) is retried by a new
                # instance: the clients do not all resume a failed InitProducerId
                p.close(1)
                self._stop.wait(0.2)
                self.process += 1
                p = TxnProducer(self.client, self.bootstrap, TRANSACTIONAL_ID)
                self.rec.producer_config(process=self.process, **p.settings())

    def _replace(self, p: TxnProducer) -> TxnProducer:
        p.close(2)
        self.process += 1
        return self._open()

    def _run(self) -> None:
        try:
            p = self._open()
        except Exception as e:
            self.errors.append(f"transactional producer did not start: {e}")
            return
        finally:
            self.ready.set()
        topic, parts = self.w["topic"], self.w["partitions"]
        try:
            while self.txn < self.limit and not (self._stop.is_set() and self.txn >= min(MIN_TXNS, self.limit)):
                if self._restart.is_set():
                    self._restart.clear()
                    p = self._replace(p)
                p = self._one(p, topic, parts)
                time.sleep(TXN_INTERVAL_S)
        except Exception as e:          # a producer that cannot be replaced ends the workload
            self.errors.append(f"transactional producer stopped: {type(e).__name__}: {e}")
        finally:
            p.close()
        if not (self.committed + self.aborted + self.unknown) and not self.errors:
            # no transaction ended: the run asked nothing, and must not pass for valid
            self.errors.append("no transaction ended" + (f" (begin_transaction failed: "
                                                          f"{', '.join(sorted(set(self.begin_errors)))})"
                                                          if self.begin_errors else ""))

    def _one(self, p: TxnProducer, topic: str, parts: int) -> TxnProducer:
        """One transaction; returns the producer to go on with (a new one after an unknown end)."""
        self.txn += 1
        txn = self.txn
        abort = self.rng.randrange(ABORT_ONE_IN) == 0
        first = self.rng.randrange(max(1, parts))
        try:
            p.begin()
        except TxnClientError as e:     # no transaction began: a new instance takes over
            self.begin_errors.append(e.name)
            return self._replace(p)
        for k in range(TXN_RECORDS):
            part = (first + k) % parts
            value = f"p{self.process}-t{txn}-{k}"
            op = self.rec.invoke(self.process, "send", topic=topic, partition=part, value=value, txn=txn)

            def done(offset, err, op=op):
                if err is None:
                    self.rec.ok(op, offset=offset)
                else:
                    self.rec.info(op, error=err)
            try:
                p.send(topic, part, value.encode(), done)
                self.sent += 1
            except Exception as e:      # refused before it left the client: it did not happen
                self.rec.fail(op, error=type(e).__name__)
        end = self.rec.invoke(self.process, "txn_abort" if abort else "txn_commit", txn=txn)
        try:
            (p.abort if abort else p.commit)()
            self.rec.ok(end)
            if abort:
                self.aborted += 1
            else:
                self.committed += 1
            return p
        except TxnClientError as e:
            if abort:                   # an abort that failed: aborted all the same, or by the next instance
                self.rec.info(end, error=e.name)
                self.aborted += 1
                return self._replace(p)
            why = e.name
        try:
            p.abort()                   # the commit failed: an abort that succeeds says it never committed
            self.rec.fail(end, error=why)
            self.aborted += 1
            return p
        except TxnClientError as e2:
            self.rec.info(end, error=f"{why}; abort: {e2.name}")
            self.unknown += 1
            return self._replace(p)

    def finish(self, timeout_s: float = 60) -> None:
        """Waits for the transactions to be run (bounded) and the producer closed; past the
        bound the workload stops after the transaction under way, whatever its count."""
        self._stop.set()
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            self.limit = 0
            self._thread.join(30)


class ReadCommittedPoller:
    """A kafka-python consumer at isolation_level read_committed, assigned every partition from
    offset 0, polling until stopped; each poll recorded per partition with
    `isolation: read_committed` (the history checkers hold it to the transactions' visibility)."""

    def __init__(self, rec: HistoryRecorder, bootstrap: str, topic: str, partitions: int,
                 process: int = POLLER):
        self.rec, self.bootstrap, self.topic, self.partitions = rec, bootstrap, topic, partitions
        self.process = process
        self.polls = 0
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="read-committed", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        from kafka import KafkaConsumer, TopicPartition
        try:
            c = KafkaConsumer(bootstrap_servers=self.bootstrap, group_id=None, enable_auto_commit=False,
                              isolation_level="read_committed", auto_offset_reset="earliest",
                              request_timeout_ms=REQUEST_TIMEOUT_MS * 3)
        except Exception as e:
            self.errors.append(f"read_committed consumer did not start: {type(e).__name__}: {e}")
            return
        try:
            tps = [TopicPartition(self.topic, p) for p in range(self.partitions)]
            c.assign(tps)
            for tp in tps:
                c.seek(tp, 0)
            ops = self.rec.invoke_set(self.process, "assign", [{"topic": self.topic, "partition": p}
                                                               for p in range(self.partitions)])
            for op in ops:
                self.rec.ok(op, offset=0)
            while not self._stop.is_set():
                ops = self.rec.invoke_set(self.process, "poll", [
                    {"topic": self.topic, "partition": p, "isolation": "read_committed"}
                    for p in range(self.partitions)])
                try:
                    got = c.poll(timeout_ms=200)
                except Exception as e:
                    for op in ops:
                        self.rec.info(op, error=type(e).__name__)
                    self._stop.wait(0.2)
                    continue
                by_part = {tp.partition: ms for tp, ms in got.items()}
                for p, op in zip(range(self.partitions), ops):
                    ms = by_part.get(p, [])
                    self.rec.ok(op, offsets=[m.offset for m in ms], values=[m.value.decode() for m in ms])
                self.polls += 1
        finally:
            c.close()

    def stop(self, timeout_s: float = 20) -> None:
        self._stop.set()
        self._thread.join(timeout_s)
