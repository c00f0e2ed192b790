"""One broker process: a thin asyncio shell around the partition logs and the rules in
impl/rules.py.

Owns: the Kafka wire server (client and replica requests, our private control request),
per-partition leader/follower state, the replica fetchers, ISR proposals, delayed acks=all
produces, HW checkpoints, flush and retention timers, broker registration and controller
candidacy. Rules (HW, ISR, truncation, fencing) are decided in impl/rules.py; this file gathers
their inputs and performs the I/O (persist before send: a Produce is answered only after the
append, an acks=all one only after the HW passed it).

ISR changes: the leader writes the partition state node itself with compare-and-set on the node
version it got from the controller's LeaderAndIsr (Kafka's pre-2.7 ZooKeeper design); the
controller reads that node before every election.

Test-only hook: while the file `<data-dir>/PAUSE_REPLICATION` exists, this broker's replica
fetchers stop fetching (used to script the KIP-101 scenarios).

Run: python -m impl.broker --id N --port P --data-dir D --coordinator URL [--generation G]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import sys
import time
from typing import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from impl import rules
from impl.admin import forget_topic
from impl.idempotence import ProducerIdAllocator
from impl.group_handlers import GroupManager
from impl.netclient import AsyncConn
from impl.protocol import codec
from impl.storage.batch import CorruptBatch
from impl.storage.log import LogConfig, PartitionLog
from traces.trace import TraceWriter, make_header

log = logging.getLogger("impl.broker")

MAX_INFLIGHT_PER_CONN = 100       # pipelined requests per connection awaiting their turn
MAX_FETCH_WAIT_MS = 30_000
REPLICA_FETCH_MAX_BYTES = 4 << 20
HOLD_ISR_WRITES_MAX_S = 30.0     # bound of the test-only ISR write hold (see _hold_isr_writes)
RELIST_MS = 2000                  # periodic re-listing of brokers/topics (missed watch events)


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
    # Debug switch, never a default: fixes removed from the generation, so that conformance
    # (checkers/conformance.py) can be shown to catch a broker missing one of them.
    without_fixes: list = field(default_factory=list)


class Partition:
    def __init__(self, topic: str, index: int, plog: PartitionLog):
        self.topic, self.index, self.log = topic, index, plog
        self.role: str | None = None
        self.leader: int | None = None
        self.leader_epoch = -1
        self.isr: set[int] = set()
        self.maximal_isr: set[int] = set()
        self.replicas: list[int] = []
        self.zk_version = -1
        self.leader_broker_epoch = -1       # the leader's broker epoch kept with the partition state
        self.min_insync = 1
        self.hw = plog.checkpointed_hw
        self.follower_leo: dict[int, int] = {}
        self.last_caught_up: dict[int, float] = {}
        self.last_fetch: dict[int, tuple[float, int]] = {}   # replica -> (time, leader LEO then)
        # replica -> the broker epoch it fetched with (KIP-903): its registration as this leader
        # knew it when the fetch arrived (our Fetch v12 has no ReplicaState.ReplicaEpoch field)
        self.fetch_broker_epoch: dict[int, int] = {}
        self.delayed: list[tuple[int, asyncio.Future]] = []
        self.waiters: list[asyncio.Future] = []       # replica fetches: woken by appends
        self.hw_waiters: list[asyncio.Future] = []    # consumer fetches: woken by HW advances
        self.isr_inflight = False
        self.needs_truncation = False
        self.fetcher: asyncio.Task | None = None

    def notify(self) -> None:
        """New data: wake replica fetches. Kafka completes a delayed replica fetch on bytes, not
        on an HW change, so followers learn a new HW only with their next fetch response."""
        ws, self.waiters = self.waiters, []
        for w in ws:
            if not w.done():
                w.set_result(None)

    def notify_hw(self) -> None:
        ws, self.hw_waiters = self.hw_waiters, []
        for w in ws:
            if not w.done():
                w.set_result(None)


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
        self.broker_epoch: int | None = None   # of our current registration (KIP-380); None before it
        # every broker's newest registration epoch we have seen (its /brokers/ids node, or the
        # controller's LeaderAndIsr): what a follower's fetch is recorded with (KIP-903)
        self.broker_epochs: dict[int, int] = {}
        self.live_brokers: dict[int, tuple[str, int]] = {}
        self.topic_assignments: dict[str, dict] = {}
        self.partition_states: dict[tuple[str, int], dict] = {}
        self.controller_id = -1
        self.coord = None
        self.controller = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self._reconnecting = False
        self._ids_seq = 0
        self.producer_ids = ProducerIdAllocator()       # InitProducerId (impl/idempotence.py)
        self.groups = GroupManager(self)
        n = len(list(self.dir.glob("trace-*.jsonl")))
        self.trace = TraceWriter(self.dir / f"trace-{n:03d}.jsonl",
                                 make_header("broker", node=self.id, generation=cfg.generation,
                                             fixes=sorted(self.fixes), incarnation=n))

    # --- helpers --------------------------------------------------------------------------------
    def event(self, etype: str, **fields) -> None:
        self.trace.write({"kind": "event", "ts_ms": round(now_ms(), 3), "node": self.id, "type": etype, **fields})

    def path(self, p: str) -> str:
        return self.cfg.coord_root + p

    async def cx(self, fn, *args, **kw):
        """Run a blocking call off the event loop."""
        return await self.loop.run_in_executor(None, lambda: fn(*args, **kw))

    async def cc(self, method: str, *args, **kw):
        """A coordinator call on the *current* session, off the event loop. If the session is
        being replaced (expiry, see _session_expired), retry on the new one (bounded)."""
        from impl.coord.base import CoordError, NodeExists, NoNode, BadVersion
        for attempt in range(50):
            coord = self.coord
            try:
                return await self.loop.run_in_executor(None, lambda: getattr(coord, method)(*args, **kw))
            except (NodeExists, NoNode, BadVersion):
                raise
            except CoordError:
                if coord is self.coord and not self._reconnecting:
                    raise
                await asyncio.sleep(0.1)
        raise TimeoutError(f"coordination call {method} kept failing during re-registration")

    def from_thread(self, fn, *args) -> None:
        try:
            self.loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:
            pass   # loop closed during shutdown

    def get_partition(self, topic: str, index: int, create: bool = False) -> Partition | None:
        key = (topic, index)
        p = self.partitions.get(key)
        if p is None and create:
            plog = PartitionLog(self.dir / f"{topic}-{index}", self.log_config,
                                on_recovered=lambda leo, cut: self.event(
                                    "recovered", topic=topic, partition=index, log_end_offset=leo,
                                    truncated_bytes=cut))
            p = self.partitions[key] = Partition(topic, index, plog)
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
        self.coord = await self._connect_coordination()
        self.coord.on_session_expired(lambda: self.from_thread(self._session_expired))
        await self._register()
        self.event("broker_started", port=self.cfg.port)
        print(f"broker {self.id} registered", flush=True)
        timers = asyncio.create_task(self._timers())
        for sig in (signal.SIGTERM, signal.SIGINT):
            self.loop.add_signal_handler(sig, self._stop.set)
        await self._stop.wait()
        timers.cancel()
        await self.shutdown()

    async def _connect_coordination(self):
        """Open a coordination session, trying again until coord_connection_timeout_ms: a server
        that is stopped for a while (the machine stalled, it restarts) must not end a broker
        that starts or renews its session meanwhile -- a new process started during a stall
        would otherwise exit at the first 5 s hello timeout. Past the bound the last error is
        raised (the process exits; a supervisor restarts it)."""
        from impl.coord import connect
        from impl.coord.base import CoordError
        deadline = time.monotonic() + self.cfg.coord_connection_timeout_ms / 1000
        while True:
            left = deadline - time.monotonic()
            try:
                return await self.cx(connect, self.cfg.coordinator, session_timeout_ms=self.cfg.session_timeout_ms,
                                     connect_timeout_s=min(5.0, max(left, 0.5)))
            except CoordError as e:
                if time.monotonic() >= deadline:
                    raise
                log.warning("broker %d: no coordination session yet (%s); trying again", self.id, e)
                await asyncio.sleep(0.2)

    async def _register(self) -> None:
        for p in ("/brokers/ids", "/brokers/topics"):
            if await self.cc("exists", self.path(p)) is None:
                try:
                    await self.cc("create", self.path(p), b"", makepath=True)
                except Exception:
                    pass
        # The broker epoch (KIP-380) tells this registration apart from every earlier one of our
        # id: Kafka uses the registration node's creation zxid; a counter in the store serves
        # the same purpose on both backends and survives a restart of the embedded server. The
        # controller treats a registration with a newer epoch as a failure and a start (a bounce),
        # and keeps the leader's epoch with each partition state. Known before the node exists,
        # so that requests addressed to an earlier registration are refused from now on.
        self.broker_epoch = await self.cc("increment", self.path("/broker_epoch"))
        body = json.dumps({"host": self.cfg.host, "port": self.cfg.port,
                           "broker_epoch": self.broker_epoch}).encode()
        log.info("broker %d: registering with broker epoch %d", self.id, self.broker_epoch)
        # Our previous session's node lingers until the server expires that session, which can
        # take a few session timeouts after a server stall. Bounded; never fall through silently.
        deadline = time.monotonic() + 4 * self.cfg.session_timeout_ms / 1000 + 10
        while True:
            try:
                await self.cc("create", self.path(f"/brokers/ids/{self.id}"), body, ephemeral=True)
                break
            except Exception as e:
                if e.__class__.__name__ != "NodeExists":
                    raise
                if time.monotonic() > deadline:
                    raise RuntimeError(f"/brokers/ids/{self.id} still held by another session") from None
                await asyncio.sleep(0.2)
        self.coord.watch_children(self.path("/brokers/ids"), lambda ids: self.from_thread(self._on_ids, ids))
        self.coord.watch_children(self.path("/brokers/topics"), lambda ts: self.from_thread(self._on_topics, ts))
        self.coord.watch_data(self.path("/controller"), lambda d, v: self.from_thread(self._on_controller, d))

    def _session_expired(self) -> None:
        """Our ephemeral nodes are gone (e.g. we were paused past the session timeout): stop
        acting as controller, open a new session and register again, as a Kafka broker does.
        Partition roles stay until the controller's next LeaderAndIsr. Bounded: one reconnect
        in flight; if it fails the process exits so a supervisor restarts it cleanly."""
        if self._reconnecting:
            return
        self._reconnecting = True
        log.warning("broker %d: coordination session expired; re-registering", self.id)
        asyncio.ensure_future(self._reconnect())

    async def _reconnect(self) -> None:
        if self.controller is not None:
            self.controller.stop()
            self.controller = None
        old = self.coord
        try:
            await self.cx(old.close)
        except Exception:
            pass
        try:
            self.coord = await self._connect_coordination()
            self.coord.on_session_expired(lambda: self.from_thread(self._session_expired))
            self.topic_assignments = {}          # re-watch every topic on the new session
            await self._register()
        except Exception as e:
            log.error("broker %d: re-registration failed (%s); exiting", self.id, e)
            os._exit(4)
        finally:
            self._reconnecting = False

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
                    self._maybe_shrink_isr(p, t)
            if t - last_list >= RELIST_MS:
                # belt and braces for missed watch events: re-list brokers and topics
                last_list = t
                self._on_ids_refetch()
                asyncio.ensure_future(self._relist_topics())
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

    # --- coordination watches -------------------------------------------------------------------
    def _on_ids(self, ids: list[str]) -> None:
        asyncio.ensure_future(self._refresh_ids(ids))

    async def _relist_topics(self) -> None:
        try:
            self._on_topics(await self.cc("get_children", self.path("/brokers/topics")))
            for topic, a in list(self.topic_assignments.items()):
                for pi in (a or {}).get("partitions", {}):
                    key = (topic, int(pi))
                    if key not in self.partition_states:
                        try:
                            data, ver = await self.cc("get", self.path(f"/brokers/topics/{topic}/partitions/{pi}/state"))
                        except Exception:
                            continue
                        self._on_state(key, data, ver)
        except Exception as e:
            log.info("broker %d: listing topics failed (%s)", self.id, e)

    def _on_ids_refetch(self) -> None:
        async def go():
            try:
                self._on_ids(await self.cc("get_children", self.path("/brokers/ids")))
            except Exception as e:
                log.warning("broker %d: listing brokers failed (%s)", self.id, e)
                self.loop.call_later(0.5, self._on_ids_refetch)
        asyncio.ensure_future(go())

    async def _refresh_ids(self, ids: list[str]) -> None:
        # refreshes may overlap; only the newest one may publish its view
        self._ids_seq += 1
        seq = self._ids_seq
        live = {}
        for i in ids:
            try:
                data, _ = await self.cc("get", self.path(f"/brokers/ids/{i}"))
                d = json.loads(data)
                live[int(i)] = (d["host"], d["port"])
                self._saw_broker_epoch(int(i), int(d.get("broker_epoch", -1)))
            except Exception as e:
                if e.__class__.__name__ != "NoNode":
                    # transient: ask again shortly, or fetchers would idle on a stale view
                    log.warning("broker %d: reading /brokers/ids/%s failed (%s); retrying", self.id, i, e)
                    self.loop.call_later(0.5, self._on_ids_refetch)
                continue
        if seq == self._ids_seq:
            self.live_brokers = live

    def _on_topics(self, topics: list[str]) -> None:
        for t in topics:
            if t not in self.topic_assignments:
                self.topic_assignments[t] = {}
                asyncio.ensure_future(self._watch_topic(t))
        for t in set(self.topic_assignments) - set(topics):
            if self.topic_assignments[t]:           # loaded, now gone: deleted (impl/admin.py)
                forget_topic(self, t)

    async def _watch_topic(self, topic: str) -> None:
        try:
            data, _ = await self.cc("get", self.path(f"/brokers/topics/{topic}"))
        except Exception:
            self.topic_assignments.pop(topic, None)
            return
        self._on_assignment(topic, data)
        # CreatePartitions changes the assignment (impl/admin.py)
        self.coord.watch_data(self.path(f"/brokers/topics/{topic}"),
                              lambda d, v: self.from_thread(self._on_assignment, topic, d))

    def _on_assignment(self, topic: str, data) -> None:
        if data is None or topic not in self.topic_assignments:
            return
        a, old = json.loads(data), self.topic_assignments[topic] or {"partitions": {}}
        self.topic_assignments[topic] = a
        for pi in sorted(a["partitions"], key=int):
            if pi in old["partitions"]:
                continue
            key = (topic, int(pi))
            self.coord.watch_data(self.path(f"/brokers/topics/{topic}/partitions/{pi}/state"),
                                  lambda d, v, key=key: self.from_thread(self._on_state, key, d, v))

    def _on_state(self, key, data, version) -> None:
        if data is None:
            self.partition_states.pop(key, None)
            return
        try:
            st = json.loads(data)
        except ValueError:
            return
        st["zk_version"] = version
        self.partition_states[key] = st
        p = self.partitions.get(key)
        if p and p.role == "leader" and st.get("leader_epoch") == p.leader_epoch and st.get("leader") == self.id:
            p.zk_version = max(p.zk_version, version)

    def _on_controller(self, data) -> None:
        if data is None:
            self.controller_id = -1
            asyncio.ensure_future(self._try_become_controller())
        else:
            try:
                self.controller_id = json.loads(data)["brokerid"]
            except (ValueError, KeyError):
                pass

    async def _try_become_controller(self) -> None:
        from impl.controller import Controller
        if self.controller is not None:
            return
        try:
            await self.cc("create", self.path("/controller"),
                          json.dumps({"brokerid": self.id}).encode(), ephemeral=True)
        except Exception:
            return   # someone else won (NodeExists) or the call failed; the watch tells us more
        self.controller_id = self.id
        self.controller = Controller(self)
        asyncio.ensure_future(self.controller.run())

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
        if not rules.check_controller_epoch(ce, self.controller_epoch_seen, self.fixes):
            self.event("stale_request_rejected", request="LeaderAndIsr", controller_epoch=ce,
                       current_controller_epoch=self.controller_epoch_seen)
            return {"error_code": codec.STALE_CONTROLLER_EPOCH, "partitions": []}
        self.controller_epoch_seen = max(self.controller_epoch_seen, ce)
        for bid, addr in (body.get("brokers") or {}).items():
            self.live_brokers.setdefault(int(bid), (addr[0], int(addr[1])))
        for bid, epoch in (body.get("broker_epochs") or {}).items():
            self._saw_broker_epoch(int(bid), int(epoch))
        out = []
        for e in body.get("partitions", []):
            p = self.get_partition(e["topic"], int(e["partition"]), create=True)
            if not rules.accept_partition_state(p.leader_epoch, int(e["leader_epoch"])):
                out.append({"topic": p.topic, "partition": p.index, "error_code": codec.FENCED_LEADER_EPOCH})
                continue
            if e["leader"] == self.id:
                self._become_leader(p, e)
            else:
                self._become_follower(p, e)
            out.append({"topic": p.topic, "partition": p.index, "error_code": 0})
        return {"error_code": 0, "partitions": out}

    def _saw_broker_epoch(self, bid: int, epoch: int) -> None:
        """Registrations only move forward: a slower source never takes a newer epoch back."""
        if epoch > self.broker_epochs.get(bid, -1):
            self.broker_epochs[bid] = epoch

    def _apply_state(self, p: Partition, e: dict) -> tuple[int | None, int]:
        old = (p.leader, p.leader_epoch)
        p.leader, p.leader_epoch = int(e["leader"]), int(e["leader_epoch"])
        p.isr = set(e["isr"])
        p.maximal_isr = set(p.isr)
        p.replicas = list(e.get("replicas", p.replicas))
        p.zk_version = int(e.get("zk_version", -1))
        p.leader_broker_epoch = int(e.get("leader_broker_epoch", -1))
        p.min_insync = int(e.get("min_insync", 1))
        return old

    def _become_leader(self, p: Partition, e: dict) -> None:
        if p.fetcher:
            p.fetcher.cancel()
            p.fetcher = None
        self._apply_state(p, e)
        p.role = "leader"
        p.isr_inflight = False
        p.log.epochs.assign(p.leader_epoch, p.log.leo)
        t = now_ms()
        p.follower_leo = {r: -1 for r in p.replicas if r != self.id}
        p.last_caught_up = {r: t for r in p.replicas if r != self.id}
        p.last_fetch = {}
        p.fetch_broker_epoch = {}
        self.event("became_leader", topic=p.topic, partition=p.index, leader_epoch=p.leader_epoch,
                   isr=sorted(p.isr), log_end_offset=p.log.leo, hw=p.hw)
        self._update_hw(p)
        p.notify()
        p.notify_hw()
        self.groups.on_partition_role(p)

    def _become_follower(self, p: Partition, e: dict) -> None:
        old_leader, old_epoch = self._apply_state(p, e)
        if p.role == "leader":
            old_leader = self.id
        p.role = "follower"
        for _, fut in p.delayed:
            if not fut.done():
                fut.set_result(codec.NOT_LEADER_OR_FOLLOWER)
        p.delayed = []
        if rules.needs_truncation(old_leader, p.leader, old_epoch, p.leader_epoch, self.fixes) or p.fetcher is None:
            p.needs_truncation = True
        self.event("became_follower", topic=p.topic, partition=p.index, leader_epoch=p.leader_epoch,
                   leader=p.leader, truncate=p.needs_truncation)
        if p.fetcher:
            p.fetcher.cancel()
        p.fetcher = asyncio.ensure_future(self._fetcher(p, p.leader, p.leader_epoch))
        p.notify()
        p.notify_hw()
        self.groups.on_partition_role(p)

    # --- leader-side rules (shell) --------------------------------------------------------------
    def _update_hw(self, p: Partition) -> None:
        if p.role != "leader":
            return
        leos = {r: max(v, 0) for r, v in p.follower_leo.items()}
        new = rules.high_watermark(p.hw, p.log.leo, leos, self.id, p.isr, p.maximal_isr,
                                   p.min_insync, self.fixes)
        if new > p.hw:
            p.hw = new
            self.event("hw_advanced", topic=p.topic, partition=p.index, hw=new)
            self._complete_delayed(p)
            p.notify_hw()

    def _complete_delayed(self, p: Partition) -> None:
        keep = []
        for last, fut in p.delayed:
            if fut.done():
                continue
            if last < p.hw:
                fut.set_result(codec.NOT_ENOUGH_REPLICAS_AFTER_APPEND if len(p.isr) < p.min_insync else 0)
            else:
                keep.append((last, fut))
        p.delayed = keep

    def _maybe_shrink_isr(self, p: Partition, t: float) -> None:
        if p.isr_inflight:
            return
        lagging = rules.out_of_sync(t, p.last_caught_up, p.isr, self.id, self.cfg.replica_lag_time_max_ms)
        if lagging:
            self._propose_isr(p, p.isr - lagging)

    def _maybe_expand_isr(self, p: Partition, r: int) -> None:
        if p.isr_inflight or r in p.isr or r not in p.replicas:
            return
        start = p.log.epochs.start_offset_of(p.leader_epoch)
        if rules.may_join_isr(p.follower_leo.get(r, -1), p.hw, start if start is not None else 0, self.fixes):
            self._propose_isr(p, p.isr | {r})

    def _propose_isr(self, p: Partition, new_isr: set[int]) -> None:
        p.isr_inflight = True
        added = sorted(new_isr - p.isr)
        # KIP-903: each added member's broker epoch, the one it fetched with (AlterPartition's
        # BrokerState.BrokerEpoch); the write checks it against the member's registration
        fetched = {r: p.fetch_broker_epoch.get(r, -1) for r in added}
        # the inputs of the expansion rules, so conformance can judge each addition
        self.event("isr_proposed", topic=p.topic, partition=p.index, isr=sorted(new_isr),
                   leader_epoch=p.leader_epoch, hw=p.hw,
                   positions={str(r): p.follower_leo.get(r, -1) for r in added},
                   broker_epochs={str(r): e for r, e in fetched.items()},
                   current_broker_epochs={str(r): self.broker_epochs.get(r, -1) for r in added})
        if "maximal-isr" in self.fixes:
            p.maximal_isr = p.isr | new_isr       # KIP-497: count both until the write commits
        else:
            p.isr = set(new_isr)                  # pre-KIP-497: act before the write commits
            p.maximal_isr = set(new_isr)
        asyncio.ensure_future(self._write_isr(p, p.leader_epoch, set(new_isr), fetched))

    async def _hold_isr_writes(self) -> None:
        """Test-only hook: ISR writes wait while `<data dir>/HOLD_ISR_WRITES` exists (bounded by
        HOLD_ISR_WRITES_MAX_S; past it the write goes ahead), so a test can let a member re-register
        between the proposal and its commit -- the window KIP-903 closes."""
        hold = self.dir / "HOLD_ISR_WRITES"
        deadline = time.monotonic() + HOLD_ISR_WRITES_MAX_S
        while hold.exists() and time.monotonic() < deadline:
            await asyncio.sleep(0.05)

    async def _registration_epochs(self, members: Iterable[int]) -> dict[int, int]:
        """Each member's current registration epoch, read from its `/brokers/ids/N` node (-1: not
        registered). Read right before the compare-and-set: a re-registration after the read is
        a bounce the controller handles -- if it acts before our write, its write of the
        partition state makes ours fail (BadVersion); after, the member is in the ISR and the
        controller removes it."""
        out = {}
        for r in members:
            try:
                data, _ = await self.cc("get", self.path(f"/brokers/ids/{r}"))
                out[r] = int(json.loads(data).get("broker_epoch", -1))
            except Exception as e:
                if e.__class__.__name__ != "NoNode":
                    raise
                out[r] = -1
            self._saw_broker_epoch(r, out[r])
        return out

    async def _write_isr(self, p: Partition, epoch: int, new_isr: set[int], fetched: dict[int, int]) -> None:
        path = self.path(f"/brokers/topics/{p.topic}/partitions/{p.index}/state")
        ok = False
        current: dict[int, int] = {}
        refused: list[int] = []
        try:
            if (self.dir / "HOLD_ISR_WRITES").exists():
                await self._hold_isr_writes()
            unread = False
            if fetched:
                try:
                    current = await self._registration_epochs(sorted(fetched))
                except Exception as e:
                    log.warning("ISR write for %s-%d: reading registrations failed: %s", p.topic, p.index, e)
                    unread = True
                # the controller's check in Kafka (INELIGIBLE_REPLICA); here the leader writes the
                # ISR itself, so it is made by the writer, against the store, before the write
                refused = [r for r in sorted(current)
                           if not rules.isr_member_eligible(fetched[r], current[r], self.fixes)]
            for _ in range(0 if refused or unread else 5):
                # the leader's broker epoch is the controller's record of whom it elected: kept
                body = json.dumps({"controller_epoch": self.controller_epoch_seen, "leader": self.id,
                                   "leader_epoch": epoch, "isr": sorted(new_isr), "version": 1,
                                   "leader_broker_epoch": p.leader_broker_epoch}).encode()
                try:
                    p.zk_version = await self.cc("set", path, body, p.zk_version)
                    ok = True
                    break
                except Exception as e:
                    if e.__class__.__name__ != "BadVersion":
                        log.warning("ISR write for %s-%d failed: %s", p.topic, p.index, e)
                        break
                    data, ver = await self.cc("get", path)
                    st = json.loads(data)
                    if st.get("leader_epoch") != epoch or st.get("leader") != self.id:
                        break      # the controller moved on; its LeaderAndIsr will tell us
                    p.zk_version = ver
        finally:
            if p.role == "leader" and p.leader_epoch == epoch:
                p.isr_inflight = False
                if ok:
                    p.isr = set(new_isr)
                    p.maximal_isr = set(new_isr)
                    self.event("isr_changed", topic=p.topic, partition=p.index, isr=sorted(new_isr),
                               leader_epoch=epoch, **_epochs_fields(fetched, current))
                else:
                    p.maximal_isr = set(p.isr)
                    extra = {"reason": "ineligible_replica", "ineligible": refused} if refused else {}
                    self.event("isr_change_failed", topic=p.topic, partition=p.index, isr=sorted(p.isr),
                               leader_epoch=epoch, **extra, **_epochs_fields(fetched, current))
                self._update_hw(p)
                self._complete_delayed(p)

    # --- follower: replica fetcher --------------------------------------------------------------
    async def _fetcher(self, p: Partition, leader: int, epoch: int) -> None:
        """Fetch from the leader as Kafka does (Fetch with replica_id = own id); truncate first
        per the generation's rule. Restarted on every LeaderAndIsr that makes us a follower."""
        conn: AsyncConn | None = None
        pause_file = self.dir / "PAUSE_REPLICATION"
        backoff = 0.05
        try:
            while p.role == "follower" and p.leader == leader and p.leader_epoch == epoch:
                addr = self.live_brokers.get(leader)
                if addr is None:
                    await asyncio.sleep(0.1)
                    continue
                if conn is None:
                    conn = AsyncConn(addr[0], addr[1], f"replica-{self.id}")
                try:
                    if p.needs_truncation:
                        await self._truncate_as_follower(p, conn, epoch)
                        if not _fetches_for(p, epoch):
                            break        # superseded meanwhile: the flag is the new fetcher's
                        p.needs_truncation = False
                        # the model's Truncate step ends here, whether or not it cut anything
                        self.event("truncation_done", topic=p.topic, partition=p.index,
                                   log_end_offset=p.log.leo, leader_epoch=epoch)
                    if pause_file.exists():      # test hook: truncate, but fetch nothing
                        await asyncio.sleep(0.05)
                        continue
                    await self._fetch_once(p, conn, epoch)
                    backoff = 0.05
                except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, ConnectionError) as e:
                    log.info("fetcher %s-%d -> %d: %s", p.topic, p.index, leader, e)
                    if conn:
                        conn.close()
                    conn = None
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, 1.0)
        except asyncio.CancelledError:
            pass
        finally:
            if conn:
                conn.close()

    async def _truncate_as_follower(self, p: Partition, conn: AsyncConn, epoch: int) -> None:
        if "epoch-truncation" not in self.fixes:
            off = rules.truncation_offset_by_hw(p.hw, p.log.leo)
            self._truncate(p, off, "hw")
            return
        for _ in range(16):          # KIP-279 rounds; each strictly lowers the local epoch
            req_epoch = p.log.epochs.latest_epoch()
            if req_epoch < 0:
                return                # empty log: nothing to truncate
            resp = await conn.request(23, 3, {
                "replica_id": self.id,
                "topics": [{"topic": p.topic, "partitions": [{
                    "partition": p.index,
                    "current_leader_epoch": epoch if "fetch-epoch-fencing" in self.fixes else -1,
                    "leader_epoch": req_epoch}]}]})
            if not _fetches_for(p, epoch):
                return                # superseded while waiting (see _fetches_for)
            r = resp.topics[0].partitions[0]
            if r.error_code:
                raise ConnectionError(f"OffsetsForLeaderEpoch error {r.error_code}")
            local = p.log.epochs.end_offset_for(r.leader_epoch, p.log.leo) if r.leader_epoch >= 0 else (-1, -1)
            off, done = rules.truncation_step_by_epoch(p.log.leo, req_epoch, r.leader_epoch, r.end_offset,
                                                       local, p.hw, self.fixes)
            self._truncate(p, off, "leader_epoch")
            if done:
                return

    def _truncate(self, p: Partition, offset: int, reason: str) -> None:
        if offset < p.log.leo:
            p.log.truncate_to(offset)
            self.event("truncated", topic=p.topic, partition=p.index, offset=p.log.leo, reason=reason)
        p.hw = min(p.hw, p.log.leo)

    async def _fetch_once(self, p: Partition, conn: AsyncConn, epoch: int) -> None:
        fetch_offset = p.log.leo
        resp = await conn.request(1, 12, {
            "replica_id": self.id, "max_wait_ms": self.cfg.replica_fetch_wait_ms, "min_bytes": 1,
            "max_bytes": REPLICA_FETCH_MAX_BYTES, "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": p.topic, "partitions": [{
                "partition": p.index,
                "current_leader_epoch": epoch if "fetch-epoch-fencing" in self.fixes else -1,
                "fetch_offset": fetch_offset, "last_fetched_epoch": -1, "log_start_offset": p.log.log_start_offset,
                "partition_max_bytes": REPLICA_FETCH_MAX_BYTES}]}],
            "forgotten_topics_data": [], "rack_id": ""})
        if not (p.role == "follower" and p.leader_epoch == epoch):
            return
        r = resp.responses[0].partitions[0]
        if r.error_code == codec.OFFSET_OUT_OF_RANGE:
            await self._handle_out_of_range(p, conn, epoch)
            return
        if r.error_code:
            await asyncio.sleep(0.1)
            return
        if r.records and p.log.leo == fetch_offset:
            try:
                res = p.log.append_as_follower(bytes(r.records))
            except CorruptBatch as e:
                log.warning("follower %s-%d: bad fetched data: %s", p.topic, p.index, e)
                return
            if res:
                # one event per leader epoch: a fetched range may span several
                for lo, hi, e in _epoch_runs(p.log.epochs.entries, res[0], res[1]):
                    self.event("appended", topic=p.topic, partition=p.index, base_offset=lo,
                               last_offset=hi, leader_epoch=e, role="follower")
        new_hw = rules.follower_high_watermark(r.high_watermark, p.log.leo)
        if new_hw != p.hw:
            # a follower's HW is not monotonic (a new leader may carry a lower one); a decrease
            # is traced with the same type and "lowered": true (no separate type in the schema)
            extra = {"lowered": True} if new_hw < p.hw else {}
            p.hw = new_hw
            self.event("hw_advanced", topic=p.topic, partition=p.index, hw=new_hw, role="follower", **extra)

    async def _handle_out_of_range(self, p: Partition, conn: AsyncConn, epoch: int) -> None:
        """Pre-KIP-101 behaviour kept in all generations: when our LEO is past the leader's,
        truncate to the leader's LEO; below its log start, restart at its log start."""
        resp = await conn.request(2, 4, {"replica_id": self.id, "isolation_level": 0, "topics": [
            {"name": p.topic, "partitions": [{"partition_index": p.index, "current_leader_epoch": -1, "timestamp": -1}]}]})
        if not _fetches_for(p, epoch):
            return
        leader_leo = resp.topics[0].partitions[0].offset
        if p.log.leo > leader_leo >= 0:
            self._truncate(p, leader_leo, "leader_log_end")
        else:
            resp = await conn.request(2, 4, {"replica_id": self.id, "isolation_level": 0, "topics": [
                {"name": p.topic, "partitions": [{"partition_index": p.index, "current_leader_epoch": -1, "timestamp": -2}]}]})
            if not _fetches_for(p, epoch):
                return
            start = resp.topics[0].partitions[0].offset
            if p.log.leo < start:
                p.log.truncate_fully_and_start_at(start)
                self.event("truncated", topic=p.topic, partition=p.index, offset=start, reason="log_start")

    # --- topic creation -------------------------------------------------------------------------
    async def create_topic(self, name: str, partitions: int, rf: int, configs: dict,
                           assignment: dict[int, list[int]] | None = None) -> int:
        if assignment:
            partitions = len(assignment)
            rf = len(next(iter(assignment.values())))
            if sorted(assignment) != list(range(partitions)) or any(
                    len(r) != rf or len(set(r)) != rf for r in assignment.values()):
                return codec.INVALID_REQUEST
        if partitions <= 0:
            return codec.INVALID_PARTITIONS
        wanted = {r for reps in (assignment or {}).values() for r in reps}
        if rf > len(self.live_brokers) or not wanted <= set(self.live_brokers):
            # the watch may lag registration: ask directly
            await self._refresh_ids(await self.cc("get_children", self.path("/brokers/ids")))
        live = sorted(self.live_brokers)
        if rf <= 0 or rf > len(live):
            return codec.INVALID_REPLICATION_FACTOR
        if not name or len(name) > 200 or any(c not in "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-" for c in name):
            return codec.INVALID_REQUEST
        start = sum(map(ord, name)) % len(live)
        if assignment:
            if any(b not in live for r in assignment.values() for b in r):
                return codec.INVALID_REPLICATION_FACTOR
            assignment = {str(i): list(r) for i, r in sorted(assignment.items())}
        else:
            assignment = {str(i): [live[(start + i + j) % len(live)] for j in range(rf)] for i in range(partitions)}
        body = {"version": 1, "partitions": assignment,
                "config": {**({"cleanup.policy": configs["cleanup.policy"]} if "cleanup.policy" in configs else {}),
                           "min.insync.replicas": int(configs.get("min.insync.replicas", self.cfg.default_min_insync)),
                           "unclean.leader.election.enable":
                               str(configs.get("unclean.leader.election.enable",
                                               self.cfg.unclean_leader_election)).lower() == "true"}}
        try:
            await self.cc("create", self.path(f"/brokers/topics/{name}"),
                          json.dumps(body, sort_keys=True).encode(), makepath=True)
        except Exception as e:
            if e.__class__.__name__ == "NodeExists":
                return codec.TOPIC_ALREADY_EXISTS
            raise
        return 0

    async def wait_for_topic(self, name: str, timeout_ms: int) -> bool:
        deadline = time.monotonic() + max(timeout_ms, 0) / 1000
        while time.monotonic() < deadline:
            a = self.topic_assignments.get(name)
            if a and a.get("partitions") and all(
                    (name, int(i)) in self.partition_states for i in a["partitions"]):
                return True
            await asyncio.sleep(0.02)
        return False


def _fetches_for(p: Partition, epoch: int) -> bool:
    """Is a fetcher started at leader epoch `epoch` still the partition's? (A new leader comes
    with a new epoch; _fetch_once checks the same.) Checked after every await, before acting on
    the log. A superseded fetcher's task is cancelled (a new LeaderAndIsr; the topic deleted and
    its log closed), but Python 3.11's asyncio.wait_for returns the inner result and drops the
    cancellation when both land in the same loop iteration, so a cancelled fetcher can resume
    once with an answer from the old leader."""
    return p.role == "follower" and p.leader_epoch == epoch


def _epochs_fields(fetched: dict[int, int], current: dict[int, int]) -> dict:
    """Trace fields of an ISR write that added members: the broker epoch each fetched with and
    its registration's at the write (KIP-903's inputs, judged by conformance)."""
    if not fetched:
        return {}
    return {"broker_epochs": {str(r): e for r, e in sorted(fetched.items())},
            "current_broker_epochs": {str(r): current.get(r, -1) for r in sorted(fetched)}}


def _epoch_runs(entries: list, base: int, last: int) -> list[tuple[int, int, int]]:
    """The offsets base..last split by the leader-epoch cache `entries` ((epoch, start) by
    start): [(first, last, epoch), ...]."""
    out = []
    for k, (e, start) in enumerate(entries):
        end = entries[k + 1][1] - 1 if k + 1 < len(entries) else last
        lo, hi = max(start, base), min(end, last)
        if lo <= hi:
            out.append((lo, hi, e))
    return out


def _done(value):
    f = asyncio.get_running_loop().create_future()
    f.set_result(value)
    return f


from impl.handlers import HANDLERS  # noqa: E402  (handlers import Broker's helpers lazily)


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
