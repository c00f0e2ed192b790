"""One consumer-group member as its own OS process, with kafka-python, confluent-kafka or
aiokafka, recording what it saw in the history format (docs/history-format.md): a `subscribe`
per partition the group hands it (with the generation), a `poll` per partition per poll, a
`commit` per partition it commits (synchronously, after processing: at-least-once). Tests and
benchmarks start members, stop them gracefully (SIGTERM: the client closes and leaves the group)
or crash them (SIGKILL: no LeaveGroup; the coordinator expires the session), then merge the
members' histories into one for `kafkaverify check-history`.

    python -m kafkaverify.groupclient --client confluent-kafka --bootstrap HOST:PORT \
        --topic t --group g --process 3 --history m3.jsonl [--session-timeout-ms 2000]

Client settings are each library's defaults except: auto-commit off (commits are recorded
exactly), auto.offset.reset=earliest (records produced before the group first joined are read),
and an optional session timeout (the crash scenario expires a member quickly). The generation is
read from each client's state (kafka-python `_coordinator._generation`, aiokafka
`_coordinator.generation`, confluent-kafka's serialized consumer group metadata): no library
exposes it publicly. It is read just before a commit: kafka-python and confluent-kafka rejoin
only inside poll (eager assignors: the revoke callback runs first), so it cannot change under a
commit; aiokafka rebalances in a background task, where a join racing a commit is possible in
principle (the commit would then carry the newer generation).

The client libraries are imported in their member class only: each is optional and a member
process uses one.
"""
from __future__ import annotations

import argparse
import asyncio
import heapq
import json
import os
import signal
import struct
import subprocess
import sys
from pathlib import Path

from traces.history_recorder import HistoryRecorder

CLIENTS = ("kafka-python", "confluent-kafka", "aiokafka")
POLL_MS = 200
MAX_RUN_S = 300            # a member never outlives this (no orphans if a test dies)


class _Member:
    """Shared recording logic; subclasses talk to one client library."""

    def __init__(self, a, rec):
        self.a, self.rec = a, rec
        self.stop = False
        self.owned: set[int] = set()

    def on_assigned(self, partitions: list[int], generation: int) -> None:
        self.owned = set(partitions)
        for p in sorted(partitions):
            op = self.rec.invoke(self.a.process, "subscribe", topic=self.a.topic, partition=p, group=self.a.group,
                                 delivery="at-least-once")
            self.rec.ok(op, generation=generation)
        print(f"assigned generation={generation} partitions={sorted(partitions)}", flush=True)

    def on_revoked(self) -> None:
        self.owned = set()

    def begin_poll(self) -> dict[int, int]:
        return {p: self.rec.invoke(self.a.process, "poll", topic=self.a.topic, partition=p)
                for p in sorted(self.owned)}

    def end_poll(self, ops: dict[int, int], got: dict[int, list[tuple[int, str]]]) -> None:
        for p in sorted(set(ops) | set(got)):
            op = ops.get(p)
            if op is None:      # a partition assigned during the poll itself
                op = self.rec.invoke(self.a.process, "poll", topic=self.a.topic, partition=p)
            recs = got.get(p, [])
            self.rec.ok(op, offsets=[o for o, _ in recs], values=[v for _, v in recs])

    def record_commit(self, positions: dict[int, int], generation: int | None) -> dict[int, int]:
        return {p: self.rec.invoke(self.a.process, "commit", topic=self.a.topic, partition=p, group=self.a.group,
                                   generation=generation, offset=off)
                for p, off in sorted(positions.items())}

    def end_commit(self, ops: dict[int, int], error: BaseException | None, certain_failure: bool) -> None:
        for op in ops.values():
            if error is None:
                self.rec.ok(op)
            elif certain_failure:
                self.rec.fail(op, error=type(error).__name__)
            else:
                self.rec.info(op, error=type(error).__name__)


def _session_conf(a, name: str) -> dict:
    return {name: a.session_timeout_ms} if a.session_timeout_ms else {}


def _python_consumer_conf(a) -> dict:
    """kafka-python's and aiokafka's consumer settings (same names): manual commits from the
    earliest offset, and a heartbeat a quarter of a short session."""
    extra = _session_conf(a, "session_timeout_ms")
    if a.session_timeout_ms:
        extra["heartbeat_interval_ms"] = max(a.session_timeout_ms // 4, 100)
    return dict(bootstrap_servers=a.bootstrap, group_id=a.group, enable_auto_commit=False,
                auto_offset_reset="earliest", client_id=f"member-{a.process}", **extra)


class KafkaPythonMember(_Member):
    def run(self) -> None:
        from kafka import ConsumerRebalanceListener, KafkaConsumer, TopicPartition
        from kafka.errors import CommitFailedError
        from kafka.structs import OffsetAndMetadata
        a, me = self.a, self
        c = KafkaConsumer(**_python_consumer_conf(a))

        class L(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked):
                me.on_revoked()

            def on_partitions_assigned(self, assigned):
                me.on_assigned([tp.partition for tp in assigned if tp.topic == a.topic], gen())

        def gen() -> int:
            return c._coordinator._generation.generation_id

        c.subscribe([a.topic], listener=L())
        try:
            while not self.stop:
                ops = self.begin_poll()
                batch = c.poll(timeout_ms=POLL_MS)
                got = {tp.partition: [(m.offset, m.value.decode()) for m in ms] for tp, ms in batch.items()}
                self.end_poll(ops, got)
                positions = {p: recs[-1][0] + 1 for p, recs in got.items() if recs}
                if positions:
                    g0 = gen()
                    cops = self.record_commit(positions, g0)
                    err, certain = None, False
                    try:
                        c.commit({TopicPartition(a.topic, p): OffsetAndMetadata(o, "", -1) for p, o in positions.items()})
                    except CommitFailedError as e:     # rejected by the coordinator: not stored
                        err, certain = e, True
                    except Exception as e:
                        err = e
                    self.end_commit(cops, err, certain)
        finally:
            c.close(autocommit=False)


class ConfluentMember(_Member):
    def run(self) -> None:
        import confluent_kafka as ck
        a, me = self.a, self
        conf = {"bootstrap.servers": a.bootstrap, "group.id": a.group, "enable.auto.commit": False,
                "auto.offset.reset": "earliest", "client.id": f"member-{a.process}",
                **_session_conf(a, "session.timeout.ms")}
        if a.session_timeout_ms:
            conf["heartbeat.interval.ms"] = max(a.session_timeout_ms // 4, 100)
        c = ck.Consumer(conf)

        def gen() -> int:
            md = c.consumer_group_metadata()
            # librdkafka's serialized form: b"CGMDv2:" + native int32 generation + ...
            return struct.unpack_from("=i", md, 7)[0] if isinstance(md, bytes) and md[:7] == b"CGMDv2:" else -1

        c.subscribe([a.topic], on_assign=lambda _c, parts: me.on_assigned([tp.partition for tp in parts], gen()),
                    on_revoke=lambda _c, _parts: me.on_revoked())
        try:
            while not self.stop:
                ops = self.begin_poll()
                msgs = c.consume(num_messages=500, timeout=POLL_MS / 1000)
                got: dict[int, list] = {}
                for m in msgs:
                    if m.error():
                        continue
                    got.setdefault(m.partition(), []).append((m.offset(), m.value().decode()))
                self.end_poll(ops, got)
                positions = {p: recs[-1][0] + 1 for p, recs in got.items() if recs}
                if positions:
                    g0 = gen()
                    cops = self.record_commit(positions, g0)
                    err, certain = None, False
                    try:
                        res = c.commit(offsets=[ck.TopicPartition(a.topic, p, o) for p, o in positions.items()],
                                       asynchronous=False)
                        bad = [tp.error for tp in res or [] if tp.error]
                        if bad:
                            raise ck.KafkaException(bad[0])
                    except ck.KafkaException as e:
                        err = e
                        code = e.args[0].code() if e.args and hasattr(e.args[0], "code") else None
                        certain = code in (ck.KafkaError.ILLEGAL_GENERATION, ck.KafkaError.UNKNOWN_MEMBER_ID,
                                           ck.KafkaError.REBALANCE_IN_PROGRESS)
                    self.end_commit(cops, err, certain)
        finally:
            c.close()


class AiokafkaMember(_Member):
    def run(self) -> None:
        asyncio.run(self._run())

    async def _run(self) -> None:
        from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
        from aiokafka.errors import CommitFailedError
        a, me = self.a, self
        c = AIOKafkaConsumer(**_python_consumer_conf(a))

        class L(ConsumerRebalanceListener):
            async def on_partitions_revoked(self, revoked):
                me.on_revoked()

            async def on_partitions_assigned(self, assigned):
                me.on_assigned([tp.partition for tp in assigned if tp.topic == a.topic], c._coordinator.generation)

        c.subscribe([a.topic], listener=L())
        await c.start()
        try:
            while not self.stop:
                ops = self.begin_poll()
                batch = await c.getmany(timeout_ms=POLL_MS)
                got = {tp.partition: [(m.offset, m.value.decode()) for m in ms] for tp, ms in batch.items()}
                self.end_poll(ops, got)
                positions = {p: recs[-1][0] + 1 for p, recs in got.items() if recs}
                if positions:
                    g0 = c._coordinator.generation
                    cops = self.record_commit(positions, g0)
                    err, certain = None, False
                    try:
                        await c.commit({TopicPartition(a.topic, p): o for p, o in positions.items()})
                    except CommitFailedError as e:
                        err, certain = e, True
                    except Exception as e:
                        err = e
                    self.end_commit(cops, err, certain)
        finally:
            await c.stop()


MEMBERS = {"kafka-python": KafkaPythonMember, "confluent-kafka": ConfluentMember, "aiokafka": AiokafkaMember}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kafkaverify.groupclient")
    ap.add_argument("--client", choices=CLIENTS, required=True)
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--process", type=int, required=True)
    ap.add_argument("--history", required=True)
    ap.add_argument("--session-timeout-ms", type=int, default=0, help="0: the client's default")
    a = ap.parse_args(argv)
    rec = HistoryRecorder(a.history, trace_id=f"member-{a.process}", client=a.client)
    m = MEMBERS[a.client](a, rec)

    def stop(*_):
        m.stop = True
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGALRM, stop)
    signal.alarm(MAX_RUN_S)
    try:
        m.run()
    finally:
        rec.close()
    return 0


# --- used by tests and benchmarks -----------------------------------------------------------------

class MemberProc:
    """A member subprocess. stop(): SIGTERM (graceful close, LeaveGroup); kill(): SIGKILL (crash)."""

    def __init__(self, client: str, bootstrap: str, topic: str, group: str, process: int, history: Path,
                 session_timeout_ms: int = 0, log: Path | None = None):
        self.process, self.history = process, Path(history)
        root = str(Path(__file__).resolve().parent.parent)
        env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""), PYTHONUNBUFFERED="1")
        out = open(log, "ab") if log else subprocess.DEVNULL
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kafkaverify.groupclient", "--client", client, "--bootstrap", bootstrap,
             "--topic", topic, "--group", group, "--process", str(process), "--history", str(history),
             "--session-timeout-ms", str(session_timeout_ms)],
            stdout=out, stderr=subprocess.STDOUT, env=env, cwd=root)

    def events(self) -> list[dict]:
        return read_events(self.history)

    def stop(self, timeout_s: float = 30) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError(f"member {self.process} did not stop within {timeout_s}s") from None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def read_events(path: Path) -> list[dict]:
    """The complete event lines of a history being written (a torn last line is skipped)."""
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in text.splitlines()[1:] if line.endswith("}")]


def _header_version(path: Path) -> int:
    """The format version a recorder's file declares (1 when it has no readable header yet)."""
    try:
        with open(path, encoding="utf-8") as f:
            return int(json.loads(f.readline()).get("version", 1))
    except (OSError, ValueError, AttributeError):
        return 1


def merge_histories(paths: list[Path], out: Path, trace_id: str, **meta) -> Path:
    """One history from several recorders' files (one monotonic clock: CLOCK_MONOTONIC is shared by
    the processes of a machine): events merged by time, ids renumbered per file; the newest format
    version of the files (a transactional recorder writes version 2)."""
    streams, base, version = [], 0, 1
    for path in paths:
        version = max(version, _header_version(path))
        evs = read_events(path)
        ids = sorted({e["id"] for e in evs})
        remap = {old: base + i for i, old in enumerate(ids)}
        base += len(ids)
        streams.append([dict(e, id=remap[e["id"]]) for e in evs])
    with open(out, "w") as f:
        f.write(json.dumps({"format": "kafkaverify-history", "version": version, "trace_id": trace_id, "meta": meta}) + "\n")
        for e in heapq.merge(*streams, key=lambda e: e["mono_ns"]):
            f.write(json.dumps(e, separators=(",", ":")) + "\n")
    return Path(out)


def check_history(path: Path, timeout_s: float = 120) -> subprocess.CompletedProcess:
    """`kafkaverify check-history PATH` as a user runs it."""
    root = str(Path(__file__).resolve().parent.parent)
    return subprocess.run([sys.executable, "-m", "kafkaverify", "check-history", str(path)], capture_output=True,
                          text=True, timeout=timeout_s, cwd=root,
                          env=dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", "")))


if __name__ == "__main__":
    sys.exit(main())
