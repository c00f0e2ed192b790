"""The controller: runs inside whichever broker created the ephemeral `/controller` node.

On election it increments `/controller_epoch` (every election gets a distinct, larger epoch),
then reacts to two watches: `/brokers/ids` (broker death and return) and `/brokers/topics` (new
topics). It owns partition leadership: it creates each partition's state node
`/brokers/topics/<t>/partitions/<p>/state` = {controller_epoch, leader, leader_epoch, isr,
version}, elects leaders (clean from the ISR; unclean from any live replica when the topic allows
it), bumps the leader epoch on every leadership or controller-driven ISR change, writes with
compare-and-set on the node version, and pushes LeaderAndIsr (private control API, JSON, carrying
its controller epoch) to the replicas. Leaders change the ISR themselves (CAS on the same node);
the controller re-reads the node before deciding anything.

A broker that restarts before its old session expired comes back under the same id, and the
watch may show the id's node go and come back in one event, or not at all (ZooKeeper folds
changes). So every registration carries a broker epoch (KIP-380) and the controller compares it
with the one it handled (Kafka's KafkaController.processBrokerChange): a newer one is a bounce,
handled as a failure then a start -- the broker's leaderships move, it leaves every ISR and
rejoins once caught up, whatever its restart lost. The partition state keeps the leader's broker
epoch, so that a controller elected after the bounce, which never saw the old registration,
still tells the bounced leader apart (the model's rule: the controller detects a bounced leader
from the leader's session stored with the partition state). LeaderAndIsr names the addressee's
broker epoch, and a broker refuses one meant for an earlier registration (impl/rules.py).

Events are handled one at a time; watch events coalesce (each carries the full list), so the
queue is bounded by construction. LeaderAndIsr sends run as separate tasks so a dead or paused
broker never stalls the handling of the next event (its own death, typically).
"""
from __future__ import annotations

import asyncio
import json
import logging

from impl.netclient import AsyncConn
from impl.protocol import codec

log = logging.getLogger("impl.controller")

MAX_EVENTS = 2       # one pending "ids" and one pending "topics" marker (see _post)
SEND_ATTEMPTS = 50
RECONCILE_S = 2.0


def bounced(handled: dict[int, int], registered: dict[int, int]) -> set[int]:
    """Brokers registered again under a newer broker epoch than the one this controller handled:
    each restarted (or renewed an expired session) since -- Kafka's bouncedBrokerIds."""
    return {b for b, e in registered.items() if b in handled and e > handled[b]}


def leader_bounced(state: dict, registered: dict[int, int]) -> bool:
    """The partition's leader is registered under a newer broker epoch than the one it was
    elected with (kept in the partition state as `leader_broker_epoch`; absent or -1: unknown)."""
    elected_with = state.get("leader_broker_epoch", -1)
    leader = state["leader"]
    return elected_with >= 0 and leader in registered and registered[leader] > elected_with


def partition_change(state: dict, assigned: list[int], registered: dict[int, int], gone: set[int],
                     unclean: bool) -> tuple[int, list[int]] | None:
    """Leader and ISR after brokers died (not in `registered`) or bounced (in `gone`), or None if
    nothing changes. A bounce is a failure then a start (Kafka's onBrokerFailure +
    onBrokerStartup): the bounced broker leaves the ISR and loses its leadership, a new leader
    comes from the rest of the ISR; the ISR never empties -- if the leader was its last member it
    stays, and, being registered again, is elected anew (a new leader epoch either way). An
    offline partition (leader -1) keeps its ISR for a clean return."""
    leader, isr = state["leader"], list(state["isr"])
    if leader_bounced(state, registered):
        gone = gone | {leader}
    usable = set(registered) - gone
    if leader in usable and all(r in usable for r in isr):
        return None
    remaining = [r for r in isr if r in usable]
    if leader in usable:
        return leader, remaining
    # A bounced broker never outlives, as the ISR's last member, members that merely have not
    # registered again yet: its log may have lost its unflushed tail (power loss) while theirs are
    # whole on disk. The partition goes offline with them and the first to return leads (as
    # Kafka's onBrokerFailure removes the failed replica from an ISR that has others).
    not_bounced = [r for r in isr if r not in gone]
    keep = remaining or (not_bounced if gone and not_bounced else ([leader] if leader in isr else isr))
    choice = elect_leader(assigned, keep, set(registered), unclean)
    if choice is None:
        return None if leader == -1 and keep == isr else (-1, keep)
    return choice


def elect_leader(assigned: list[int], isr: list[int], live: set[int], unclean: bool) -> tuple[int, list[int]] | None:
    """Clean election: the first assigned replica that is live and in the ISR. Unclean
    (unclean.leader.election.enable): else the first live assigned replica, ISR = {it}.
    None when no replica qualifies (the partition goes offline)."""
    for r in assigned:
        if r in live and r in isr:
            return r, [x for x in isr if x in live]
    if unclean:
        for r in assigned:
            if r in live:
                return r, [r]
    return None


class Controller:
    def __init__(self, broker):
        self.b = broker
        self.coord = broker.coord
        self.epoch = -1
        self.live: set[int] = set()
        self.epochs: dict[int, int] = {}      # broker -> the broker epoch of it we handled
        self.topics: dict[str, dict] = {}
        self.events: asyncio.Queue = asyncio.Queue(MAX_EVENTS)
        self.conns: dict[int, AsyncConn] = {}
        self.task: asyncio.Task | None = None
        self.stopped = False
        self.sends: set[asyncio.Task] = set()
        self.registered: set[int] = set()     # latest /brokers/ids, ahead of event processing
        self.latest_topics: list[str] = []
        self.pending: set[str] = set()
        self.watched: set[str] = set()   # topics whose node data we watch (CreatePartitions)
        self.initialized = False     # topics loaded and full state sent, once brokers are known

    async def _c(self, method: str, *args, **kw):
        """A coordination call on the session this controller was elected in -- never retried on
        a newer session: a controller whose session expired must fail, not act (zombie)."""
        coord = self.coord
        return await self.b.cx(lambda: getattr(coord, method)(*args, **kw))

    def stop(self) -> None:
        self.stopped = True
        if self.task:
            self.task.cancel()
        for t in list(self.sends):
            t.cancel()
        for c in self.conns.values():
            c.close()

    def _post(self, ev) -> None:
        """Watch events carry the full current list, so pending ones coalesce: the queue holds
        at most one "ids" and one "topics" marker, and the handler reads the latest list."""
        kind, arg = ev
        if kind == "ids":
            self.registered = {int(i) for i in arg}
        else:
            self.latest_topics = list(arg)
        if not self.stopped and kind not in self.pending:
            self.pending.add(kind)
            self.events.put_nowait(kind)

    async def run(self) -> None:
        self.task = asyncio.current_task()
        b = self.b
        try:
            self.epoch = await self._c("increment", b.path("/controller_epoch"))
            b.controller_epoch_seen = max(b.controller_epoch_seen, self.epoch)
            b.event("controller_elected", controller_epoch=self.epoch)
            log.info("broker %d is controller, epoch %d", b.id, self.epoch)
            self.coord.watch_children(b.path("/brokers/ids"), lambda ids: b.from_thread(self._post, ("ids", ids)))
            self.coord.watch_children(b.path("/brokers/topics"), lambda ts: b.from_thread(self._post, ("topics", ts)))
            reconcile = asyncio.ensure_future(self._reconcile())
            self.sends.add(reconcile)
            while not self.stopped:
                kind = await self.events.get()
                self.pending.discard(kind)
                log.info("controller %d: %s event (brokers %s, topics %s)", b.id, kind,
                         sorted(self.registered), sorted(self.latest_topics))
                if kind == "ids":
                    await self._on_brokers(set(self.registered))
                elif kind == "topics":
                    await self._on_topics(list(self.latest_topics))
        except asyncio.CancelledError:
            pass
        except Exception:
            log.exception("controller failed; resigning")
            try:
                await self._c("delete", b.path("/controller"))
            except Exception:
                pass
            b.controller = None

    async def _reconcile(self) -> None:
        """Every RECONCILE_S re-list brokers and topics and post an event if the watches missed a
        change (defensive: a missed watch event must not leave a topic without partition state
        for ever). Two listings per period."""
        while not self.stopped:
            await asyncio.sleep(RECONCILE_S)
            try:
                ids = await self._c("get_children", self.b.path("/brokers/ids"))
                topics = await self._c("get_children", self.b.path("/brokers/topics"))
            except Exception as e:
                log.info("controller %d: reconcile listing failed: %s", self.b.id, e)
                continue
            if {int(i) for i in ids} != self.registered:
                log.warning("controller %d: brokers %s differ from the watch's %s; reconciling",
                            self.b.id, ids, sorted(self.registered))
                self._post(("ids", ids))
            else:
                # a bounce leaves the list as it was: ZooKeeper's watch may not fire at all
                try:
                    regs = await self._registrations(ids)
                except Exception as e:
                    log.info("controller %d: reading registrations failed: %s", self.b.id, e)
                    continue
                if bounced(self.epochs, regs):
                    self._post(("ids", ids))
            if sorted(topics) != sorted(self.latest_topics) or any(t not in self.topics for t in topics):
                self._post(("topics", topics))

    # --- state node I/O -------------------------------------------------------------------------
    async def _registrations(self, ids) -> dict[int, int]:
        """{broker: broker epoch} of the registrations now present among `ids` (-1: none named)."""
        out = {}
        for i in sorted({int(x) for x in ids}):
            try:
                data, _ = await self._c("get", self.b.path(f"/brokers/ids/{i}"))
            except Exception as e:
                if e.__class__.__name__ == "NoNode":
                    continue          # gone since the listing: the next event says so
                raise
            out[i] = int(json.loads(data).get("broker_epoch", -1))
        return out

    def _state_path(self, t: str, p: int) -> str:
        return self.b.path(f"/brokers/topics/{t}/partitions/{p}/state")

    async def _read_state(self, t: str, p: int):
        try:
            data, ver = await self._c("get", self._state_path(t, p))
            return json.loads(data), ver
        except Exception as e:
            if e.__class__.__name__ == "NoNode":
                return None, -1
            raise

    async def _load_topic(self, t: str) -> dict | None:
        try:
            data, _ = await self._c("get", self.b.path(f"/brokers/topics/{t}"))
        except Exception as e:
            if e.__class__.__name__ != "NoNode":
                # transient (connection loss): look at the topic list again shortly
                log.warning("controller %d: reading topic %s failed (%s); retrying", self.b.id, t, e)
                self.b.loop.call_later(0.5, self._post, ("topics", list(self.latest_topics) or [t]))
            return None
        a = json.loads(data)
        self.topics[t] = a
        if t not in self.watched:
            # CreatePartitions (impl/admin.py) rewrites the assignment: reload the topic then
            self.watched.add(t)
            self.coord.watch_data(self.b.path(f"/brokers/topics/{t}"),
                                  lambda d, v: self.b.from_thread(self._on_assignment, t, d))
        return a

    def _on_assignment(self, t: str, data) -> None:
        if data is None:
            self.watched.discard(t)
            return
        known = self.topics.get(t)
        if known is not None and json.loads(data).get("partitions") != known.get("partitions"):
            del self.topics[t]
            self._post(("topics", list(self.latest_topics)))

    # --- events ---------------------------------------------------------------------------------
    async def _on_topics(self, names: list[str], send_existing: bool = True) -> None:
        if not self.live:
            return       # before brokers are known; the first non-empty /brokers/ids event loads every topic
        for t in set(self.topics) - set(names):
            del self.topics[t]                      # deleted (DeleteTopics, impl/admin.py)
        for t in names:
            if t in self.topics:
                continue
            a = await self._load_topic(t)
            if a is None:
                continue
            changed = []
            for pi, replicas in sorted(a["partitions"].items(), key=lambda kv: int(kv[0])):
                st, ver = await self._read_state(t, int(pi))
                if st is None:
                    live_replicas = [r for r in replicas if r in self.live]
                    leader = live_replicas[0] if live_replicas else -1
                    st = {"controller_epoch": self.epoch, "leader": leader, "leader_epoch": 0,
                          "isr": live_replicas, "version": 1,
                          "leader_broker_epoch": self.epochs.get(leader, -1)}
                    try:
                        await self._c("create", self._state_path(t, int(pi)),
                                        json.dumps(st).encode(), makepath=True)
                        ver = 0
                    except Exception as e:
                        if e.__class__.__name__ != "NodeExists":
                            raise
                        st, ver = await self._read_state(t, int(pi))
                    changed.append((t, int(pi), st, ver))
                elif send_existing:
                    changed.append((t, int(pi), st, ver))
            await self._send(changed)

    async def _on_brokers(self, ids: set[int]) -> None:
        regs = await self._registrations(ids)
        live = set(regs)
        dead = self.live - live
        bounce = bounced(self.epochs, regs)
        new = (live - self.live) | bounce
        self.live, self.epochs = live, regs
        if not live:
            return      # e.g. right after a coordination stall: wait for registrations
        first = not self.initialized
        self.initialized = True
        if first:
            # A previous controller may have died between a topic's creation and its partition
            # state nodes: create whatever is missing (the loop below sends the rest).
            names = await self._c("get_children", self.b.path("/brokers/topics"))
            await self._on_topics(names, send_existing=False)
        if bounce:
            log.warning("controller %d: brokers %s bounced (registered anew, broker epochs %s): "
                        "handled as a failure then a start", self.b.id, sorted(bounce),
                        {b: regs[b] for b in sorted(bounce)})
        changed = []
        for t, a in sorted(self.topics.items()):
            unclean = bool(a.get("config", {}).get("unclean.leader.election.enable", False))
            for pi, replicas in sorted(a["partitions"].items(), key=lambda kv: int(kv[0])):
                p = int(pi)
                upd = await self._elect_if_needed(t, p, replicas, unclean, bounce)
                if upd is not None:
                    changed.append(upd)
                elif first or set(replicas) & new:
                    st, ver = await self._read_state(t, p)
                    if st is not None:
                        changed.append((t, p, st, ver))
        if dead:
            log.info("controller %d: brokers %s gone", self.b.id, sorted(dead))
        await self._send(changed)

    async def _elect_if_needed(self, t: str, p: int, replicas: list[int], unclean: bool,
                               bounce: set[int] = frozenset()):
        """Leader dead or bounced -> elect (bump epoch). Follower dead or bounced in ISR -> drop
        it (bump epoch, as the ZooKeeper-era controller did; KAFKA-7164 is about followers
        missing such bumps). Offline partition whose replica returned -> elect. The decision is
        partition_change's; CAS-retried against leader writes."""
        for _ in range(20):
            st, ver = await self._read_state(t, p)
            if st is None:
                return None
            choice = partition_change(st, replicas, self.epochs, set(bounce), unclean)
            if choice is None:
                return None
            new_leader, new_isr = choice
            if leader_bounced(st, self.epochs):
                log.warning("controller %d: %s-%d: leader %d bounced (elected with broker epoch %d, "
                            "now %d)", self.b.id, t, p, st["leader"], st["leader_broker_epoch"],
                            self.epochs[st["leader"]])
            new = {"controller_epoch": self.epoch, "leader": new_leader,
                   "leader_epoch": st["leader_epoch"] + 1, "isr": new_isr, "version": 1,
                   "leader_broker_epoch": self.epochs.get(new_leader, -1)}
            try:
                ver = await self._c("set", self._state_path(t, p), json.dumps(new).encode(), ver)
                return (t, p, new, ver)
            except Exception as e:
                if e.__class__.__name__ != "BadVersion":
                    raise
        return None

    # --- LeaderAndIsr ---------------------------------------------------------------------------
    async def _send(self, changed) -> None:
        by_broker: dict[int, list] = {}
        for t, p, st, ver in changed:
            if st["leader"] < 0:
                continue
            a = self.topics.get(t) or {}
            replicas = a.get("partitions", {}).get(str(p), [])
            entry = {"topic": t, "partition": p, "leader": st["leader"], "leader_epoch": st["leader_epoch"],
                     "isr": st["isr"], "replicas": replicas, "zk_version": ver,
                     "leader_broker_epoch": st.get("leader_broker_epoch", -1),
                     "min_insync": int(a.get("config", {}).get("min.insync.replicas", 1))}
            for r in replicas:
                if r in self.live:
                    by_broker.setdefault(r, []).append(entry)
        brokers = {str(i): list(addr) for i, addr in self.b.live_brokers.items()}
        # Sends run as tasks: a dead or paused broker must not stall the event loop (its death
        # is the next event). Reordering is harmless: brokers ignore a partition entry whose
        # leader epoch is not above the one they have.
        for bid, entries in sorted(by_broker.items()):
            body = {"controller_epoch": self.epoch, "controller_id": self.b.id,
                    "broker_epoch": self.epochs.get(bid, -1),
                    "partitions": entries, "brokers": brokers,
                    # every registration it handled (KIP-903: leaders record fetches with these)
                    "broker_epochs": {str(i): e for i, e in sorted(self.epochs.items())}}
            if bid == self.b.id:
                self.b.handle_leader_and_isr(body)
            else:
                t = asyncio.ensure_future(self._send_to(bid, body))
                self.sends.add(t)
                t.add_done_callback(self.sends.discard)

    async def _send_to(self, bid: int, body: dict) -> None:
        for attempt in range(SEND_ATTEMPTS):
            if self.stopped or bid not in self.live or bid not in self.registered:
                return
            addr = self.b.live_brokers.get(bid)
            if addr is None:
                await self._refresh_addr(bid)
                addr = self.b.live_brokers.get(bid)
            if addr is None:
                await asyncio.sleep(0.1)
                continue
            conn = self.conns.get(bid)
            if conn is None or (conn.host, conn.port) != tuple(addr):
                conn = self.conns[bid] = AsyncConn(addr[0], addr[1], f"controller-{self.b.id}", timeout_s=5)
            try:
                resp = await conn.control(body)
                if resp.get("error_code") == codec.STALE_CONTROLLER_EPOCH:
                    log.warning("controller %d (epoch %d) is stale; resigning", self.b.id, self.epoch)
                    self.stop()
                return
            except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, ConnectionError, ValueError):
                conn.close()
                if self.conns.get(bid) is conn:     # another send may have replaced it already
                    self.conns.pop(bid)
                await asyncio.sleep(min(0.05 * (attempt + 1), 0.5))

    async def _refresh_addr(self, bid: int) -> None:
        try:
            data, _ = await self._c("get", self.b.path(f"/brokers/ids/{bid}"))
            d = json.loads(data)
            self.b.live_brokers[bid] = (d["host"], d["port"])
        except Exception:
            pass
