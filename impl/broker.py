"""One broker process: the asyncio shell that wires the broker's parts together and performs
their I/O (persist before send: a Produce is answered only after the append, an acks=all one only
after the HW passed it).

The parts, each owning one concern behind a narrow interface (Kafka's ReplicaManager /
Partition / ReplicaFetcherThread / AlterPartitionManager / KafkaZkClient split):
- impl/partition.py   `Partition`: one replica's state (role, leader epoch, ISR, HW, followers'
                      positions, delayed acks=all) and every decision on it -- no I/O;
- impl/isr.py         `IsrManager`: when to shrink or expand the ISR and what a proposal leaves;
- impl/fetcher.py     `ReplicaFetcher`: a follower's truncate-then-fetch loop against its leader;
- impl/broker_coordination.py `BrokerCoordination`: session, registration, watches, metadata,
                      controller candidacy, topic creation, the ISR compare-and-set writes;
- impl/handlers.py    the Kafka APIs (impl/group_handlers.py, admin.py, idempotence.py too).
This file keeps: the wire server (per-connection ordering), the control request (LeaderAndIsr,
describe), the timers (flush, HW checkpoints, retention, ISR shrink, re-listing), start-up and
shutdown, and the trace. The rules themselves are in impl/rules.py.

ISR changes: the leader writes the partition state node itself with compare-and-set on the node
version it got from the controller's LeaderAndIsr (Kafka's pre-2.7 ZooKeeper design); the
controller reads that node before every election.

Test-only hooks: while the file `<data-dir>/PAUSE_REPLICATION` exists, this broker's replica
fetchers stop fetching (used to script the KIP-101 scenarios); while `<data-dir>/HOLD_ISR_WRITES`
exists, ISR writes wait (bounded).

Run: python -m impl.broker --id N --port P --data-dir D --coordinator URL [--generation G]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

from impl import rules
from impl.broker_coordination import BrokerCoordination
from impl.fetcher import ReplicaFetcher
from impl.group_handlers import GroupManager
from impl.handlers import HANDLERS
from impl.idempotence import ProducerIdAllocator
from impl.txn_handlers import TxnManager
from impl.isr import IsrManager
from impl.partition import Partition
from impl.protocol import codec
from impl.storage.log import LogConfig, PartitionLog
from traces.trace import TraceWriter, make_header

log = logging.getLogger("impl.broker")

MAX_INFLIGHT_PER_CONN = 100       # pipelined requests per connection awaiting their turn
RELIST_MS = 2000                  # periodic re-listing of brokers/topics (missed watch events)

__all__ = ["Broker", "BrokerConfig", "Partition", "main"]


def now_ms() -> float:
    return time.time() * 1000


@dataclass
class BrokerConfig:
    node_id: int
    port: int
    data_dir: str
    coordinator: str
    host: str = "127.0.0.1"
    generation: str = "current"
    coord_root: str = ""
    session_timeout_ms: int = 6000
    coord_connection_timeout_ms: int = 18000    # Kafka: zookeeper.connection.timeout.ms
    replica_lag_time_max_ms: int = 3000
    replica_fetch_wait_ms: int = 500            # Kafka: replica.fetch.wait.max.ms
    hw_checkpoint_ms: int = 1000
    auto_create_topics: bool = False
    default_replication_factor: int = 1
    default_partitions: int = 1
    default_min_insync: int = 1
    unclean_leader_election: bool = False
    log: dict = field(default_factory=dict)     # LogConfig fields
    # consumer groups (impl/group_handlers.py); Kafka's names and defaults
    offsets_topic_num_partitions: int = 50      # offsets.topic.num.partitions
    offsets_commit_timeout_ms: int = 5000       # offsets.commit.timeout.ms
    group_min_session_timeout_ms: int = 6000    # group.min.session.timeout.ms
    group_max_session_timeout_ms: int = 1_800_000
    group_initial_rebalance_delay_ms: int = 3000
    # transactions (impl/txn_handlers.py); Kafka's names and defaults
    transaction_state_num_partitions: int = 50          # transaction.state.log.num.partitions
    transaction_state_replication_factor: int = 3       # transaction.state.log.replication.factor
    transaction_state_min_isr: int = 2                  # transaction.state.log.min.isr
    transaction_max_timeout_ms: int = 900_000           # transaction.max.timeout.ms
    transaction_abort_timed_out_interval_ms: int = 10_000   # transaction.abort.timed.out.transaction.cleanup.interval.ms
    transaction_append_timeout_ms: int = 5000
    # Debug switch, never a default: fixes removed from the generation, so that conformance
    # (checkers/conformance.py) can be shown to catch a broker missing one of them.
    without_fixes: list = field(default_factory=list)


class Broker:
    def __init__(self, cfg: BrokerConfig):
        self.cfg = cfg
        self.id = cfg.node_id
        self.fixes = rules.fixes_for(cfg.generation) - frozenset(cfg.without_fixes)
        self.dir = Path(cfg.data_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.log_config = LogConfig(**cfg.log)
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.controller_epoch_seen = 0
        self.loop: asyncio.AbstractEventLoop | None = None
        self.coordination = BrokerCoordination(self)
        self.isr = IsrManager(self.id, self.fixes, cfg.replica_lag_time_max_ms,
                              broker_epoch_of=lambda r: self.coordination.broker_epochs.get(r, -1),
                              write=lambda p, epoch, new_isr, fetched: asyncio.ensure_future(
                                  self.coordination.write_isr(p, epoch, new_isr, fetched)))
        # the address looked up on each connect: the live-broker view is replaced as it changes
        self.replica_fetcher = ReplicaFetcher(self.id, self.fixes, cfg.replica_fetch_wait_ms,
                                              self.dir / "PAUSE_REPLICATION",
                                              lambda leader: self.live_brokers.get(leader))
        self.producer_ids = ProducerIdAllocator()       # InitProducerId (impl/idempotence.py)
        self.groups = GroupManager(self)
        self.txns = TxnManager(self)
        n = len(list(self.dir.glob("trace-*.jsonl")))
        self.trace = TraceWriter(self.dir / f"trace-{n:03d}.jsonl",
                                 make_header("broker", node=self.id, generation=cfg.generation,
                                             fixes=sorted(self.fixes), incarnation=n))

    # --- what the handlers, the controller and the admin APIs read (BrokerCoordination's) --------
    @property
    def live_brokers(self) -> dict[int, tuple[str, int]]:
        return self.coordination.live_brokers

    @property
    def topic_assignments(self) -> dict[str, dict]:
        return self.coordination.topic_assignments

    @property
    def partition_states(self) -> dict[tuple[str, int], dict]:
        return self.coordination.partition_states

    @property
    def controller_id(self) -> int:
        return self.coordination.controller_id

    @property
    def broker_epoch(self) -> int | None:
        return self.coordination.broker_epoch

    @property
    def broker_epochs(self) -> dict[int, int]:
        return self.coordination.broker_epochs

    @property
    def coord(self):
        return self.coordination.coord

    @property
    def controller(self):
        return self.coordination.controller

    @controller.setter
    def controller(self, c) -> None:          # the controller resigns (impl/controller.py)
        self.coordination.controller = c

    def path(self, p: str) -> str:
        return self.coordination.path(p)

    async def cx(self, fn, *args, **kw):
        return await self.coordination.cx(fn, *args, **kw)

    async def cc(self, method: str, *args, **kw):
        return await self.coordination.cc(method, *args, **kw)

    def from_thread(self, fn, *args) -> None:
        self.coordination.from_thread(fn, *args)

    async def create_topic(self, name: str, partitions: int, rf: int, configs: dict,
                           assignment: dict[int, list[int]] | None = None) -> int:
        return await self.coordination.create_topic(name, partitions, rf, configs, assignment)

    async def wait_for_topic(self, name: str, timeout_ms: int) -> bool:
        return await self.coordination.wait_for_topic(name, timeout_ms)

    # --- helpers --------------------------------------------------------------------------------
    def event(self, etype: str, **fields) -> None:
        self.trace.write({"kind": "event", "ts_ms": round(now_ms(), 3), "node": self.id, "type": etype, **fields})

    def get_partition(self, topic: str, index: int, create: bool = False) -> Partition | None:
        key = (topic, index)
        p = self.partitions.get(key)
        if p is None and create:
            plog = PartitionLog(self.dir / f"{topic}-{index}", self.log_config,
                                on_recovered=lambda leo, cut: self.event(
                                    "recovered", topic=topic, partition=index, log_end_offset=leo,
                                    truncated_bytes=cut))
            p = self.partitions[key] = Partition(topic, index, plog, self.id, self.fixes, self.event)
        return p

    def _load_existing_logs(self) -> None:
        for d in sorted(self.dir.iterdir()):
            if d.is_dir() and "-" in d.name:
                topic, _, idx = d.name.rpartition("-")
                if idx.isdigit():
                    self.get_partition(topic, int(idx), create=True)

    # --- lifecycle ------------------------------------------------------------------------------
    async def run(self) -> None:
        self.loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        self._load_existing_logs()
        self.server = await asyncio.start_server(self._serve, self.cfg.host, self.cfg.port,
                                                 reuse_address=True, limit=1 << 20)
        print(f"broker {self.id} listening {self.cfg.host}:{self.cfg.port}", flush=True)
        await self.coordination.start()
        self.event("broker_started", port=self.cfg.port)
        print(f"broker {self.id} registered", flush=True)
        timers = asyncio.create_task(self._timers())
        for sig in (signal.SIGTERM, signal.SIGINT):
            self.loop.add_signal_handler(sig, self._stop.set)
        await self._stop.wait()
        timers.cancel()
        await self.shutdown()

    async def shutdown(self) -> None:
        for p in self.partitions.values():
            if p.fetcher:
                p.fetcher.cancel()
            try:
                p.log.flush()
                p.log.checkpoint_hw(p.hw)
                p.log.producers.take_snapshot()
            except OSError:
                pass
        if self.controller:
            self.controller.stop()
        try:
            await self.cc("close")
        except Exception:
            pass
        self.server.close()
        self.trace.close()

    async def _timers(self) -> None:
        """HW checkpoints, flush-by-time, retention, ISR shrink. Bounded work per tick."""
        last_ckpt = last_list = 0.0
        while True:
            await asyncio.sleep(0.1)
            t = now_ms()
            for p in list(self.partitions.values()):
                try:
                    p.log.maybe_flush(time.monotonic() * 1000)
                except OSError as e:
                    log.error("flush failed for %s-%d: %s", p.topic, p.index, e)
                if p.role == "leader":
                    self.isr.maybe_shrink(p, t)
            if t - last_list >= RELIST_MS:
                # belt and braces for missed watch events: re-list brokers and topics
                last_list = t
                self.coordination.relist_brokers()
                asyncio.ensure_future(self.coordination.relist_topics())
            if t - last_ckpt >= self.cfg.hw_checkpoint_ms:
                last_ckpt = t
                for p in list(self.partitions.values()):
                    if p.hw != p.log.checkpointed_hw:
                        # the fsync of a checkpoint must not stall produce/fetch handling; the
                        # ticket keeps a truncation meanwhile from being overwritten by this HW
                        try:
                            await self.loop.run_in_executor(None, p.log.checkpoint_hw, p.hw, p.log.hw_ticket())
                        except OSError as e:      # e.g. its directory deleted meanwhile
                            log.error("HW checkpoint failed for %s-%d: %s", p.topic, p.index, e)
                        if self.partitions.get((p.topic, p.index)) is not p:
                            continue     # deleted meanwhile (forget_topic): its log is closed
                    p.log.apply_retention(t, upper_bound=p.hw)
                    self._snapshot_producers(p)

    def _snapshot_producers(self, p: Partition) -> None:
        """Periodic producer-state snapshot (impl/producer_state.py), so recovery replays only
        the batches after it."""
        try:
            p.log.producers.take_snapshot()
        except OSError as e:
            log.error("producer snapshot failed for %s-%d: %s", p.topic, p.index, e)


    # --- server ---------------------------------------------------------------------------------
    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Reads requests in order, handles them concurrently, answers in order (Kafka's
        per-connection ordering). A bad frame closes this connection only."""
        queue: asyncio.Queue = asyncio.Queue(MAX_INFLIGHT_PER_CONN)
        sender = asyncio.ensure_future(self._send_responses(queue, writer))
        try:
            await self._read_requests(reader, queue)
        except asyncio.CancelledError:
            sender.cancel()
        finally:
            try:
                queue.put_nowait(None)
            except asyncio.QueueFull:
                sender.cancel()
            try:
                await sender
            except BaseException:
                pass
            writer.close()

    async def _read_requests(self, reader: asyncio.StreamReader, queue: asyncio.Queue) -> None:
        while True:
            try:
                prefix = await reader.readexactly(4)
                size = codec.frame_size(prefix)
                frame = await reader.readexactly(size)
            except (asyncio.IncompleteReadError, ConnectionError):
                break
            except codec.FrameError as e:
                log.warning("closing connection: %s", e)
                break
            task = self._dispatch(frame)
            if task is None:
                break
            await queue.put(task)

    async def _send_responses(self, queue: asyncio.Queue, writer: asyncio.StreamWriter) -> None:
        while True:
            task = await queue.get()
            if task is None:
                return
            try:
                out = await task
            except Exception:
                log.exception("request handler failed; closing connection")
                writer.close()
                return
            if out:
                writer.write(out)
                await writer.drain()

    def _dispatch(self, frame: bytes):
        """Returns an awaitable yielding the response bytes (b"" = no response), or None to close."""
        try:
            key, version, corr = codec.peek_header(frame)
            if key == codec.CONTROL_API_KEY:
                body = codec.decode_control_request(frame)
                return asyncio.ensure_future(self._control(corr, body))
            req = codec.decode_request(frame)
        except codec.Unsupported as u:
            if u.api_key == 18:
                return _done(codec.unsupported_api_versions_response(u.correlation_id))
            log.warning("unsupported api %d v%d: closing connection (Kafka cannot parse it either)",
                        u.api_key, u.api_version)
            return None
        except Exception as e:          # FrameError or anything the codec raises on garbage
            log.warning("malformed request: %s; closing connection", e)
            return None
        handler = HANDLERS[key]
        return asyncio.ensure_future(self._respond(handler, key, version, corr, req))

    async def _respond(self, handler, key, version, corr, req) -> bytes:
        data = await handler(self, req, version)
        if data is None:
            return b""
        return codec.encode_response(key, version, corr, data)

    # --- control requests (from the controller) -------------------------------------------------
    async def _control(self, corr: int, body: dict) -> bytes:
        if body.get("op") == "describe":
            return codec.encode_control_response(corr, self.describe())
        return codec.encode_control_response(corr, self.handle_leader_and_isr(body))

    def describe(self) -> dict:
        """Read-only state dump (tests, tools): controller epoch seen and each replica's state."""
        return {"error_code": 0, "node": self.id, "controller_epoch_seen": self.controller_epoch_seen,
                "broker_epoch": self.broker_epoch,
                "generation": self.cfg.generation, "fixes": sorted(self.fixes),
                "partitions": [{"topic": t, "partition": i, "role": p.role, "leader": p.leader,
                                "leader_epoch": p.leader_epoch, "isr": sorted(p.isr),
                                "log_end_offset": p.log.leo, "hw": p.hw,
                                "log_start_offset": p.log.log_start_offset,
                                "epochs": p.log.epochs.entries, "producers": p.log.producers.describe()}
                               for (t, i), p in sorted(self.partitions.items())]}

    def handle_leader_and_isr(self, body: dict) -> dict:
        ce = int(body.get("controller_epoch", -1))
        be = int(body.get("broker_epoch", -1))
        if not rules.check_broker_epoch(be, self.broker_epoch):
            # addressed to an earlier registration of our id: the controller has not yet handled
            # our bounce; its next LeaderAndIsr, after it has, names our epoch (KIP-380)
            self.event("stale_request_rejected", request="LeaderAndIsr", controller_epoch=ce,
                       current_controller_epoch=self.controller_epoch_seen, broker_epoch=be,
                       current_broker_epoch=self.broker_epoch)
            return {"error_code": codec.STALE_BROKER_EPOCH, "partitions": []}
        if not rules.controller_epoch_accepted(ce, self.controller_epoch_seen, self.fixes):
            self._trace_control(body, ce, accepted=False)
            self.event("stale_request_rejected", request="LeaderAndIsr", controller_epoch=ce,
                       current_controller_epoch=self.controller_epoch_seen)
            return {"error_code": codec.STALE_CONTROLLER_EPOCH, "partitions": []}
        seen = self.controller_epoch_seen
        self.controller_epoch_seen = max(self.controller_epoch_seen, ce)
        for bid, addr in (body.get("brokers") or {}).items():
            self.live_brokers.setdefault(int(bid), (addr[0], int(addr[1])))
        for bid, epoch in (body.get("broker_epochs") or {}).items():
            self.coordination.saw_broker_epoch(int(bid), int(epoch))
        # every partition's decision first (its inputs traced before the role changes they make)
        decided = []
        for e in body.get("partitions", []):
            p = self.get_partition(e["topic"], int(e["partition"]), create=True)
            decided.append((p, e, p.leader_epoch,
                            rules.control_request_accepted(ce, self.controller_epoch_seen, p.leader_epoch,
                                                           int(e["leader_epoch"]), self.fixes)))
        self._trace_control(body, ce, accepted=True, seen=seen, decided=decided)
        out = []
        for p, e, _cur, ok in decided:
            if not ok:
                out.append({"topic": p.topic, "partition": p.index, "error_code": codec.FENCED_LEADER_EPOCH})
                continue
            if e["leader"] == self.id:
                self._become_leader(p, e)
            else:
                self._become_follower(p, e)
            out.append({"topic": p.topic, "partition": p.index, "error_code": 0})
        return {"error_code": 0, "partitions": out}

    def _trace_control(self, body: dict, ce: int, accepted: bool, seen: int | None = None,
                       decided: list | None = None) -> None:
        """`control_request`: the inputs of a LeaderAndIsr's acceptance decision and the decision
        (impl/rules.py controller_epoch_accepted, control_request_accepted) -- the request's
        controller epoch, the newest one this broker had seen before it, and per partition the
        current and the requested leader epoch and whether the entry was applied. A request
        refused as a whole names each partition refused, with its current leader epoch."""
        if decided is None:
            decided = []
            for e in body.get("partitions", []):
                p = self.get_partition(e["topic"], int(e["partition"]))
                decided.append((p, e, p.leader_epoch if p is not None else -1, False))
        self.event("control_request", request="LeaderAndIsr", controller_id=int(body.get("controller_id", -1)),
                   controller_epoch=ce,
                   current_controller_epoch=self.controller_epoch_seen if seen is None else seen,
                   accepted=accepted,
                   partitions=[{"topic": e["topic"], "partition": int(e["partition"]), "leader": int(e["leader"]),
                                "leader_epoch": int(e["leader_epoch"]), "current_leader_epoch": cur,
                                "accepted": ok} for _p, e, cur, ok in decided])

    def _become_leader(self, p: Partition, e: dict) -> None:
        if p.fetcher:
            p.fetcher.cancel()
            p.fetcher = None
        p.become_leader(e, now_ms())
        self.groups.on_partition_role(p)
        self.txns.on_partition_role(p)

    def _become_follower(self, p: Partition, e: dict) -> None:
        p.become_follower(e, had_fetcher=p.fetcher is not None)
        if p.fetcher:
            p.fetcher.cancel()
        p.fetcher = asyncio.ensure_future(self.replica_fetcher.run(p, p.leader, p.leader_epoch))
        self.groups.on_partition_role(p)
        self.txns.on_partition_role(p)


def _done(value):
    f = asyncio.get_running_loop().create_future()
    f.set_result(value)
    return f


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m impl.broker")
    ap.add_argument("--id", type=int, required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--data-dir", required=True)
    ap.add_argument("--coordinator", required=True)
    ap.add_argument("--coord-root", default="")
    ap.add_argument("--generation", default="current", choices=sorted(rules.GENERATIONS))
    ap.add_argument("--config", default="{}", help="JSON object of BrokerConfig overrides")
    a = ap.parse_args(argv)
    import faulthandler
    faulthandler.register(signal.SIGUSR1, all_threads=True)   # `kill -USR1 pid`: dump stacks to the log
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s broker-{a.id} %(name)s %(levelname)s %(message)s")
    cfg = BrokerConfig(node_id=a.id, port=a.port, data_dir=a.data_dir, coordinator=a.coordinator,
                       coord_root=a.coord_root, generation=a.generation, **json.loads(a.config))
    if cfg.host != "127.0.0.1":       # a per-node address: outgoing connections come from it too
        from impl import netaddr
        netaddr.set_source(cfg.host)
    asyncio.run(Broker(cfg).run())


if __name__ == "__main__":
    main()
