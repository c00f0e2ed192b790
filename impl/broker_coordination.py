"""The broker's link to the coordination store (Kafka's KafkaZkClient, MetadataCache and
controller candidacy): the session and its renewal after expiry, our registration and broker
epoch (KIP-380), the watches on brokers, topics, partition states and the controller node, the
metadata they fill, controller candidacy, topic creation and the compare-and-set ISR writes that
impl/isr.py asks for.

Every call into the store runs off the event loop (`cc`); watch callbacks arrive on the store's
thread and are moved onto the loop (`from_thread`). It acts on the broker shell (impl/broker.py)
only through: its id, cfg, loop, data dir, event sink, partitions (a leader's node version),
controller epoch seen, its ISR manager, and the broker itself for the controller and topic
deletion (impl/controller.py, impl/admin.py).
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
import time
import uuid
from typing import Iterable

from impl.admin import forget_topic
from impl.controller import Controller
from impl.coord import connect
from impl.coord.base import BadVersion, CoordError, NodeExists, NoNode
from impl.protocol import codec
from impl.partition import Partition

log = logging.getLogger("impl.broker")

HOLD_ISR_WRITES_MAX_S = 30.0     # bound of the test-only ISR write hold (see _hold_isr_writes)


class BrokerCoordination:
    def __init__(self, broker):
        # the shell (impl.broker.Broker), which imports this module: not imported here
        self.b = broker
        self.coord = None
        self.controller = None
        self.broker_epoch: int | None = None   # of our current registration (KIP-380); None before it
        # every broker's newest registration epoch we have seen (its /brokers/ids node, or the
        # controller's LeaderAndIsr): what a follower's fetch is recorded with (KIP-903)
        self.broker_epochs: dict[int, int] = {}
        self.live_brokers: dict[int, tuple[str, int]] = {}
        self.topic_assignments: dict[str, dict] = {}
        self.partition_states: dict[tuple[str, int], dict] = {}
        self.controller_id = -1
        self._reconnecting = False
        self._ids_seq = 0

    # --- calls into the store -------------------------------------------------------------------
    def path(self, p: str) -> str:
        return self.b.cfg.coord_root + p

    async def cx(self, fn, *args, **kw):
        """Run a blocking call off the event loop."""
        return await self.b.loop.run_in_executor(None, lambda: fn(*args, **kw))

    async def cc(self, method: str, *args, **kw):
        """A coordinator call on the *current* session, off the event loop. If the session is
        being replaced (expiry, see _session_expired), retry on the new one (bounded)."""
        for attempt in range(50):
            coord = self.coord
            try:
                return await self.b.loop.run_in_executor(None, lambda: getattr(coord, method)(*args, **kw))
            except (NodeExists, NoNode, BadVersion):
                raise
            except CoordError:
                if coord is self.coord and not self._reconnecting:
                    raise
                await asyncio.sleep(0.1)
        raise TimeoutError(f"coordination call {method} kept failing during re-registration")

    def from_thread(self, fn, *args) -> None:
        try:
            self.b.loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:
            pass   # loop closed during shutdown

    # --- the session and our registration -------------------------------------------------------
    async def start(self) -> None:
        """Open the session and register (the broker epoch is known once this returns)."""
        self.coord = await self._connect_coordination()
        self.coord.on_session_expired(lambda: self.from_thread(self._session_expired))
        await self._register()

    async def _connect_coordination(self):
        """Open a coordination session, trying again until coord_connection_timeout_ms: a server
        that is stopped for a while (the machine stalled, it restarts) must not end a broker
        that starts or renews its session meanwhile -- a new process started during a stall
        would otherwise exit at the first 5 s hello timeout. Past the bound the last error is
        raised (the process exits; a supervisor restarts it)."""
        deadline = time.monotonic() + self.b.cfg.coord_connection_timeout_ms / 1000
        while True:
            left = deadline - time.monotonic()
            try:
                return await self.cx(connect, self.b.cfg.coordinator, session_timeout_ms=self.b.cfg.session_timeout_ms,
                                     connect_timeout_s=min(5.0, max(left, 0.5)))
            except CoordError as e:
                if time.monotonic() >= deadline:
                    raise
                log.warning("broker %d: no coordination session yet (%s); trying again", self.b.id, e)
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
        body = json.dumps({"host": self.b.cfg.host, "port": self.b.cfg.port,
                           "broker_epoch": self.broker_epoch}).encode()
        log.info("broker %d: registering with broker epoch %d", self.b.id, self.broker_epoch)
        # Our previous session's node lingers until the server expires that session, which can
        # take a few session timeouts after a server stall. Bounded; never fall through silently.
        deadline = time.monotonic() + 4 * self.b.cfg.session_timeout_ms / 1000 + 10
        while True:
            try:
                await self.cc("create", self.path(f"/brokers/ids/{self.b.id}"), body, ephemeral=True)
                break
            except Exception as e:
                if e.__class__.__name__ != "NodeExists":
                    raise
                if time.monotonic() > deadline:
                    raise RuntimeError(f"/brokers/ids/{self.b.id} still held by another session") from None
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
        log.warning("broker %d: coordination session expired; re-registering", self.b.id)
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
            log.error("broker %d: re-registration failed (%s); exiting", self.b.id, e)
            os._exit(4)
        finally:
            self._reconnecting = False

    # --- coordination watches -------------------------------------------------------------------
    def _on_ids(self, ids: list[str]) -> None:
        asyncio.ensure_future(self.refresh_ids(ids))

    async def relist_topics(self) -> None:
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
            log.info("broker %d: listing topics failed (%s)", self.b.id, e)

    def relist_brokers(self) -> None:
        async def go():
            try:
                self._on_ids(await self.cc("get_children", self.path("/brokers/ids")))
            except Exception as e:
                log.warning("broker %d: listing brokers failed (%s)", self.b.id, e)
                self.b.loop.call_later(0.5, self.relist_brokers)
        asyncio.ensure_future(go())

    async def refresh_ids(self, ids: list[str]) -> None:
        # refreshes may overlap; only the newest one may publish its view
        self._ids_seq += 1
        seq = self._ids_seq
        live = {}
        for i in ids:
            try:
                data, _ = await self.cc("get", self.path(f"/brokers/ids/{i}"))
                d = json.loads(data)
                live[int(i)] = (d["host"], d["port"])
                self.saw_broker_epoch(int(i), int(d.get("broker_epoch", -1)))
            except Exception as e:
                if e.__class__.__name__ != "NoNode":
                    # transient: ask again shortly, or fetchers would idle on a stale view
                    log.warning("broker %d: reading /brokers/ids/%s failed (%s); retrying", self.b.id, i, e)
                    self.b.loop.call_later(0.5, self.relist_brokers)
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
                forget_topic(self.b, t)

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
        p = self.b.partitions.get(key)
        if p and p.role == "leader" and st.get("leader_epoch") == p.leader_epoch and st.get("leader") == self.b.id:
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
        if self.controller is not None:
            return
        try:
            await self.cc("create", self.path("/controller"),
                          json.dumps({"brokerid": self.b.id}).encode(), ephemeral=True)
        except Exception:
            return   # someone else won (NodeExists) or the call failed; the watch tells us more
        self.controller_id = self.b.id
        self.controller = Controller(self.b)
        asyncio.ensure_future(self.controller.run())

    # --- broker epochs (KIP-380 / KIP-903) ---------------------------------------------------------
    def saw_broker_epoch(self, bid: int, epoch: int) -> None:
        """Registrations only move forward: a slower source never takes a newer epoch back."""
        if epoch > self.broker_epochs.get(bid, -1):
            self.broker_epochs[bid] = epoch

    # --- ISR writes (impl/isr.py decides; this performs) --------------------------------------------
    async def _hold_isr_writes(self) -> None:
        """Test-only hook: ISR writes wait while `<data dir>/HOLD_ISR_WRITES` exists (bounded by
        HOLD_ISR_WRITES_MAX_S; past it the write goes ahead), so a test can let a member re-register
        between the proposal and its commit -- the window KIP-903 closes."""
        hold = self.b.dir / "HOLD_ISR_WRITES"
        deadline = time.monotonic() + HOLD_ISR_WRITES_MAX_S
        while hold.exists() and time.monotonic() < deadline:
            await asyncio.sleep(0.05)

    async def registration_epochs(self, members: Iterable[int]) -> dict[int, int]:
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
            self.saw_broker_epoch(r, out[r])
        return out

    async def write_isr(self, p: Partition, epoch: int, new_isr: set[int], fetched: dict[int, int]) -> None:
        """Compare-and-set the partition state node with `new_isr` on the version we hold (Kafka's
        pre-2.7 ZooKeeper design), retrying on BadVersion while the leader epoch is unchanged;
        refused members (KIP-903) mean no write. The outcome goes to IsrManager.write_done."""
        path = self.path(f"/brokers/topics/{p.topic}/partitions/{p.index}/state")
        ok = False
        current: dict[int, int] = {}
        refused: list[int] = []
        try:
            if (self.b.dir / "HOLD_ISR_WRITES").exists():
                await self._hold_isr_writes()
            unread = False
            if fetched:
                try:
                    current = await self.registration_epochs(sorted(fetched))
                except Exception as e:
                    log.warning("ISR write for %s-%d: reading registrations failed: %s", p.topic, p.index, e)
                    unread = True
                refused = self.b.isr.ineligible(fetched, current)
            for _ in range(0 if refused or unread else 5):
                # the leader's broker epoch is the controller's record of whom it elected: kept
                body = json.dumps({"controller_epoch": self.b.controller_epoch_seen, "leader": self.b.id,
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
                    if st.get("leader_epoch") != epoch or st.get("leader") != self.b.id:
                        break      # the controller moved on; its LeaderAndIsr will tell us
                    p.zk_version = ver
        finally:
            self.b.isr.write_done(p, epoch, new_isr, ok, fetched, current, refused)

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
            await self.refresh_ids(await self.cc("get_children", self.path("/brokers/ids")))
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
        # the topic id: a random UUID drawn once, at creation, stored with the assignment so that
        # every broker answers the same one, across restarts (Kafka's KIP-516 topic id)
        body = {"version": 1, "partitions": assignment, "topic_id": str(uuid.uuid4()),
                "config": {**({"cleanup.policy": configs["cleanup.policy"]} if "cleanup.policy" in configs else {}),
                           "min.insync.replicas": int(configs.get("min.insync.replicas", self.b.cfg.default_min_insync)),
                           "unclean.leader.election.enable":
                               str(configs.get("unclean.leader.election.enable",
                                               self.b.cfg.unclean_leader_election)).lower() == "true"}}
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

