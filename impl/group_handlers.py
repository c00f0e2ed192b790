"""The group coordinator's I/O: the nine group APIs on the wire, the internal topic
`__consumer_offsets`, loading a partition's groups and offsets when this broker becomes its
leader, and the timers. Decisions are impl/group_coordinator.py's; records are
impl/group_records.py's (Kafka's own schemas).

- The coordinator of a group is the leader of partition partition_for(group) of
  `__consumer_offsets`, created on the first FindCoordinator (replication factor
  min(3, live brokers), min.insync.replicas the broker default as Kafka's offsets topic has no
  override, cleanup.policy=compact in its config -- compaction itself is not implemented: the
  log keeps every record, the loader keeps the latest per key).
- Group metadata and offset commits are appended as acks=all writes through the partition's own
  replication (the same HW / delayed-ack mechanism as a Produce); a commit is answered only
  after the HW passed it, with Kafka's error mapping (GroupMetadataManager.storeOffsets).
- On becoming leader the partition is loaded from the log (requests meanwhile get
  COORDINATOR_LOAD_IN_PROGRESS; SyncGroup gets REBALANCE_IN_PROGRESS and Heartbeat NONE, as
  Kafka answers); on becoming follower its groups are unloaded (parked requests get
  NOT_COORDINATOR). A leader re-elected without having been follower keeps its cache: nobody
  else can have written the partition meanwhile.
"""
from __future__ import annotations

import asyncio
import contextvars
import logging
import time
import uuid

from impl import group_coordinator as gc
from impl import group_records as gr
from impl.coordinator_log import append_committed
from impl import txn_coordinator as tc
from impl.protocol import codec
from impl.storage.log import ProducerStateError

log = logging.getLogger("impl.groups")

OFFSETS_TOPIC = "__consumer_offsets"
TICK_S = 0.1                         # timer resolution of session / rebalance expiries
MAX_METADATA_BYTES = 4096            # offset.metadata.max.bytes
MAX_PARK_S = gc.NEW_MEMBER_JOIN_TIMEOUT_MS / 1000 + 10   # bound on a parked Join/SyncGroup
LOAD_CHUNK_BYTES = 1 << 20
# the peer address of the connection a request came on, as Kafka reports a member's clientHost
# ("/127.0.0.1": Java's InetAddress.toString without a host name); set per connection by the
# broker's server (impl/broker.py), read by JoinGroup
CLIENT_HOST: contextvars.ContextVar[str] = contextvars.ContextVar("client_host", default="")


def _mono_ms() -> float:
    return time.monotonic() * 1000


class GroupManager:
    """One per broker. `owned`: offsets partitions this broker leads -> "loading" | "loaded"."""

    def __init__(self, b):
        self.b = b
        cfg = b.cfg
        self.cfg = gc.GroupConfig(min_session_timeout_ms=cfg.group_min_session_timeout_ms,
                                  max_session_timeout_ms=cfg.group_max_session_timeout_ms,
                                  initial_rebalance_delay_ms=cfg.group_initial_rebalance_delay_ms)
        self.groups: dict[str, gc.Group] = {}
        self.owned: dict[int, str] = {}
        self.loaders: dict[int, asyncio.Task] = {}
        self.parked: dict[object, asyncio.Future] = {}
        # transactional offset commits awaiting their marker, per producer id
        # (GroupMetadataManager's pendingTransactionalOffsetCommits): {pid: {(group, topic, p): Offset}}
        self.txn_offsets: dict[int, dict[tuple[str, str, int], gc.Offset]] = {}
        self._ticker: asyncio.Task | None = None

    # --- wiring from the broker -----------------------------------------------------------------
    def on_partition_role(self, p) -> None:
        """Called after every LeaderAndIsr applied to a partition."""
        if p.topic != OFFSETS_TOPIC:
            return
        self._ensure_ticker()
        if p.role == "leader":
            if p.index not in self.owned:
                self.owned[p.index] = "loading"
                self.loaders[p.index] = asyncio.ensure_future(self._load(p))
        elif p.index in self.owned:
            self._unload(p.index)

    def _ensure_ticker(self) -> None:
        if self._ticker is None or self._ticker.done():
            self._ticker = asyncio.ensure_future(self._tick_loop())

    async def _tick_loop(self) -> None:
        while True:
            await asyncio.sleep(TICK_S)
            now = _mono_ms()
            for gid in sorted(self.groups):
                g = self.groups.get(gid)
                if g is not None:
                    self.apply(gc.tick(g, self.cfg, now))

    # --- effects --------------------------------------------------------------------------------
    def apply(self, effects: list) -> None:
        for e in effects:
            if isinstance(e, gc.Reply):
                fut = self.parked.pop(e.token, None)
                if fut is not None and not fut.done():
                    fut.set_result(e.result)
            elif isinstance(e, gc.Store):
                asyncio.ensure_future(self._store(e))

    async def _store(self, e: gc.Store) -> None:
        err, _ = await self.append(self.partition_of(e.group_id),
                                   [(gr.group_key(e.group_id), gr.group_value(e.record))])
        g = self.groups.get(e.group_id)
        if g is not None:
            self.apply(gc.stored(g, self.cfg, _mono_ms(), e.generation, err))

    async def park(self, token: object, effects: list) -> dict | None:
        fut = asyncio.get_running_loop().create_future()
        self.parked[token] = fut
        self.apply(effects)
        try:
            return await asyncio.wait_for(fut, MAX_PARK_S)
        except asyncio.TimeoutError:
            self.parked.pop(token, None)
            return None

    # --- __consumer_offsets ---------------------------------------------------------------------
    def num_partitions(self) -> int | None:
        a = self.b.topic_assignments.get(OFFSETS_TOPIC)
        return len(a["partitions"]) if a and a.get("partitions") else None

    def partition_of(self, group_id: str) -> int:
        return gc.partition_for(group_id, self.num_partitions() or self.b.cfg.offsets_topic_num_partitions)

    def status(self, group_id: str) -> int:
        """validateGroupStatus: NONE if this broker coordinates the group and has loaded it."""
        if self.num_partitions() is None:
            return codec.NOT_COORDINATOR
        st = self.owned.get(self.partition_of(group_id))
        if st is None:
            return codec.NOT_COORDINATOR
        return codec.COORDINATOR_LOAD_IN_PROGRESS if st == "loading" else codec.NONE

    async def coordinator_for(self, key: str) -> tuple[int, int]:
        """(error, node id) for FindCoordinator: the leader of the group's partition; the topic
        is created on first use (COORDINATOR_NOT_AVAILABLE meanwhile, as Kafka answers)."""
        b = self.b
        if OFFSETS_TOPIC not in b.topic_assignments:
            try:
                # the registration watch may lag: count the live brokers at the source
                await b.coordination.refresh_ids(await b.cc("get_children", b.path("/brokers/ids")))
                rf = min(3, max(len(b.live_brokers), 1))
                await b.create_topic(OFFSETS_TOPIC, b.cfg.offsets_topic_num_partitions, rf,
                                     {"cleanup.policy": "compact",
                                      "min.insync.replicas": b.cfg.default_min_insync})
            except Exception as e:           # coordination unavailable: retriable for the client
                log.warning("broker %d: creating %s failed: %s", b.id, OFFSETS_TOPIC, e)
            return codec.COORDINATOR_NOT_AVAILABLE, -1
        if self.num_partitions() is None:
            return codec.COORDINATOR_NOT_AVAILABLE, -1
        st = b.partition_states.get((OFFSETS_TOPIC, self.partition_of(key)))
        if not st or st.get("leader", -1) not in b.live_brokers:
            return codec.COORDINATOR_NOT_AVAILABLE, -1
        return codec.NONE, st["leader"]

    async def append(self, index: int, records: list[tuple[bytes, bytes | None]],
                     producer: tuple[int, int] = (-1, -1)) -> tuple[int, int]:
        """An acks=all append to our partition `index` of the offsets topic: (error, base offset).
        The same rules as Produce with acks=-1: refused below min.insync.replicas, answered once
        the HW passed the last record (or after offsets.commit.timeout.ms)."""
        b = self.b
        p = b.partitions.get((OFFSETS_TOPIC, index))
        if p is None or p.role != "leader" or self.owned.get(index) != "loaded":
            return codec.NOT_COORDINATOR, -1
        try:
            return await append_committed(b, p, gr.batch(records, producer_id=producer[0],
                                                          producer_epoch=producer[1]),
                                          b.cfg.offsets_commit_timeout_ms, codec.INVALID_COMMIT_OFFSET_SIZE)
        except ProducerStateError as e:           # a fenced producer's transactional commit
            return e.code, -1

    async def _load(self, p) -> None:
        """GroupMetadataManager.doLoadGroupsAndOffsets: read the partition from its log start to
        its end, keep the latest record per key (tombstones delete), then publish the groups."""
        index = p.index
        try:
            offsets: dict[tuple[str, str, int], tuple[gr.OffsetRecord, int]] = {}
            pending: dict[int, dict[tuple[str, str, int], tuple[gr.OffsetRecord, int]]] = {}
            groups: dict[str, gr.GroupRecord] = {}
            pos, end = p.log.log_start_offset, p.log.leo
            while pos < end:
                data = p.log.read(pos, LOAD_CHUNK_BYTES, end)
                last = pos - 1
                for off, key, value, pid, txn, marker in gr.iter_entries(data):
                    last = max(last, off)
                    if off < pos or key is None:
                        continue
                    if marker is not None:             # a transaction's end: its offsets count or not
                        for k, (r, o) in pending.pop(pid, {}).items():
                            if marker and (k not in offsets or offsets[k][1] < o):
                                offsets[k] = (r, o)
                        continue
                    try:
                        r = gr.decode(bytes(key), None if value is None else bytes(value))
                    except gr.RecordError as e:
                        log.warning("broker %d: %s-%d@%d skipped: %s", self.b.id, OFFSETS_TOPIC, index, off, e)
                        continue
                    if isinstance(r, gr.OffsetRecord) and txn and r.offset is not None:
                        pending.setdefault(pid, {})[(r.group, r.topic, r.partition)] = (r, off)
                    elif isinstance(r, gr.OffsetRecord):
                        k = (r.group, r.topic, r.partition)
                        if r.offset is None:
                            offsets.pop(k, None)
                        else:
                            offsets[k] = (r, off)
                    elif r.deleted:
                        groups.pop(r.group, None)
                    else:
                        groups[r.group] = r
                if last < pos:
                    break                      # nothing readable further: stop (bounded)
                pos = last + 1
                await asyncio.sleep(0)         # let other requests run while a big log loads
            if self.owned.get(index) != "loading" or p.role != "leader":
                return
            now = _mono_ms()
            loaded = {gid: gc.from_record(r, now) for gid, r in groups.items()}
            for (gid, topic, part), (r, off) in offsets.items():
                g = loaded.setdefault(gid, gc.Group(gid))
                g.offsets[(topic, part)] = gc.Offset(r.offset, r.leader_epoch, r.metadata, r.commit_ts, off)
            for gid, g in loaded.items():
                if self.partition_of(gid) == index:
                    self.groups[gid] = g
            for pid, offs in pending.items():           # still open: await their markers
                for k, (r, off) in offs.items():
                    self.txn_offsets.setdefault(pid, {})[k] = gc.Offset(r.offset, r.leader_epoch, r.metadata,
                                                                        r.commit_ts, off)
            self.owned[index] = "loaded"
            log.info("broker %d: loaded %s-%d: %d groups, %d offsets", self.b.id, OFFSETS_TOPIC, index,
                     len(loaded), len(offsets))
        except asyncio.CancelledError:
            pass
        except Exception:
            log.exception("broker %d: loading %s-%d failed", self.b.id, OFFSETS_TOPIC, index)
            self.owned.pop(index, None)
        finally:
            self.loaders.pop(index, None)

    def _unload(self, index: int) -> None:
        self.owned.pop(index, None)
        t = self.loaders.pop(index, None)
        if t:
            t.cancel()
        for gid in [gid for gid in self.groups if self.partition_of(gid) == index]:
            self.apply(gc.unload(self.groups.pop(gid)))
        for offs in self.txn_offsets.values():
            for k in [k for k in offs if self.partition_of(k[0]) == index]:
                del offs[k]

    def txn_marker_written(self, index: int, producer_id: int, commit: bool) -> None:
        """A COMMIT / ABORT marker of `producer_id` reached our partition `index` of the offsets
        topic (GroupMetadataManager.handleTxnCompletion): its pending offsets there become the
        groups' committed offsets, or are dropped. The WriteTxnMarkers handler calls this after
        the marker's append."""
        offs = self.txn_offsets.get(producer_id, {})
        for k in [k for k in offs if self.partition_of(k[0]) == index]:
            o = offs.pop(k)
            if not commit:
                continue
            gid, topic, part = k
            g = self.groups.get(gid)
            if g is None:
                g = self.groups[gid] = gc.Group(gid)
            cur = g.offsets.get((topic, part))
            if cur is None or cur.log_offset < o.log_offset:
                g.offsets[(topic, part)] = o
        if not offs:
            self.txn_offsets.pop(producer_id, None)


# --- handlers (registered in impl/handlers.py HANDLERS) ------------------------------------------

def _mgr(b) -> GroupManager:
    return b.groups


async def find_coordinator(b, req, version):
    key_type = req.key_type if version >= 1 else 0
    if key_type == 1:                       # a transactional.id: impl/txn_handlers.py
        (err, node), msg = await b.txns.coordinator_for(req.key), None
    elif key_type != 0:
        err, node, msg = codec.INVALID_REQUEST, -1, f"coordinator key type {key_type} is not supported"
    else:
        (err, node), msg = await _mgr(b).coordinator_for(req.key), None
    host, port = b.live_brokers.get(node, ("", -1)) if err == 0 else ("", -1)
    return {"throttle_time_ms": 0, "error_code": err, "error_message": msg, "node_id": node if err == 0 else -1,
            "host": host, "port": port}


def _join_response(r: dict, version: int) -> dict:
    out = dict(r, throttle_time_ms=0, skip_assignment=False)
    if version < 7:
        out["protocol_name"] = out["protocol_name"] or ""
    return out


async def join_group(b, req, version):
    m = _mgr(b)
    err = m.status(req.group_id) if req.group_id else codec.INVALID_GROUP_ID
    if err:
        return _join_response({"error_code": err, "generation_id": -1, "protocol_type": None,
                               "protocol_name": None, "leader": "", "member_id": req.member_id,
                               "members": []}, version)
    token = object()
    g, eff = gc.join(m.groups.get(req.group_id), req.group_id, m.cfg, _mono_ms(), token,
                     member_id=req.member_id, client_id=req.header.client_id or "", client_host=CLIENT_HOST.get(),
                     session_timeout_ms=req.session_timeout_ms,
                     rebalance_timeout_ms=req.rebalance_timeout_ms if version >= 1 else -1,
                     protocol_type=req.protocol_type,
                     protocols=[(p.name, bytes(p.metadata)) for p in req.protocols],
                     require_known_member_id=version >= 4,
                     group_instance_id=req.group_instance_id if version >= 5 else None,
                     new_member_id=lambda cid: f"{cid}-{uuid.uuid4()}")
    if g is not None:
        m.groups[req.group_id] = g
    r = await m.park(token, eff)
    if r is None:
        r = {"error_code": codec.UNKNOWN_MEMBER_ID, "generation_id": -1, "protocol_type": None,
             "protocol_name": None, "leader": "", "member_id": req.member_id, "members": []}
    return _join_response(r, version)


async def sync_group(b, req, version):
    m = _mgr(b)
    err = m.status(req.group_id)
    if err == codec.COORDINATOR_LOAD_IN_PROGRESS:
        err = codec.REBALANCE_IN_PROGRESS     # the rebalance state was lost: rejoin (Kafka)
    r = None
    if not err:
        token = object()
        eff = gc.sync(m.groups.get(req.group_id), _mono_ms(), token, member_id=req.member_id,
                      generation=req.generation_id,
                      protocol_type=req.protocol_type if version >= 5 else None,
                      protocol_name=req.protocol_name if version >= 5 else None,
                      assignments={a.member_id: bytes(a.assignment) for a in req.assignments})
        r = await m.park(token, eff)
        if r is None:
            err = codec.REBALANCE_IN_PROGRESS
    if r is None:
        r = {"error_code": err, "assignment": b"", "protocol_type": None, "protocol_name": None}
    return dict(r, throttle_time_ms=0)


async def heartbeat(b, req, version):
    m = _mgr(b)
    err = m.status(req.group_id)
    if err == codec.COORDINATOR_LOAD_IN_PROGRESS:
        err = codec.NONE                       # Kafka: "the group is still loading, so respond just blindly"
    elif not err:
        err = gc.heartbeat(m.groups.get(req.group_id), _mono_ms(), req.member_id, req.generation_id)
    return {"throttle_time_ms": 0, "error_code": err}


async def leave_group(b, req, version):
    m = _mgr(b)
    err = m.status(req.group_id)
    if not err:
        err, eff = gc.leave(m.groups.get(req.group_id), m.cfg, _mono_ms(), req.member_id)
        m.apply(eff)
    return {"throttle_time_ms": 0, "error_code": err, "members": []}


async def offset_commit(b, req, version):
    m = _mgr(b)
    gid = req.group_id
    parts = [(t.name, p) for t in req.topics for p in t.partitions]
    errors: dict[tuple[str, int], int] = {}
    err = m.status(gid)
    if not err:
        g = m.groups.get(gid)
        err = gc.validate_commit(g, _mono_ms(), req.member_id, req.generation_id_or_member_epoch)
    if not err:
        commits, records = _offset_records(gid, parts, version >= 6, errors)
        if records:
            aerr, base = await m.append(m.partition_of(gid), records)
            if aerr == 0:
                g = m.groups.get(gid)
                if g is None and m.status(gid) == 0:
                    g = m.groups[gid] = gc.Group(gid)    # a plain commit creates the group (Empty)
                if g is not None:
                    gc.offsets_appended(g, commits, base)
            for tp in commits:
                errors[tp] = aerr
    return _commit_answer(parts, err, errors)


async def offset_fetch(b, req, version):
    m = _mgr(b)
    err = m.status(req.group_id)
    g = m.groups.get(req.group_id) if not err else None
    if req.topics is None:          # v2+: every committed offset of the group
        wanted: dict[str, list[int]] = {}
        for (t, p) in sorted(g.offsets if g else {}):
            wanted.setdefault(t, []).append(p)
    else:
        wanted = {t.name: list(t.partition_indexes) for t in req.topics}
    # KIP-447: a partition with a transactional commit still pending is unstable for a client
    # that asks for stable offsets (it retries until the transaction ends)
    unstable = {(gid, t, p) for offs in m.txn_offsets.values() for (gid, t, p) in offs
                if gid == req.group_id} if version >= 7 and req.require_stable else set()
    topics = []
    for t, ps in wanted.items():
        out = []
        for p in ps:
            o = g.offsets.get((t, p)) if g else None
            pending = (req.group_id, t, p) in unstable
            out.append({"partition_index": p, "committed_offset": o.offset if o and not pending else -1,
                        "committed_leader_epoch": o.leader_epoch if o and not pending else -1,
                        "metadata": o.metadata if o else "",
                        "error_code": codec.UNSTABLE_OFFSET_COMMIT if pending else err if version < 2 else 0})
        topics.append({"name": t, "partitions": out})
    return {"throttle_time_ms": 0, "topics": topics, "error_code": err}


async def list_groups(b, req, version):
    m = _mgr(b)
    err = codec.COORDINATOR_LOAD_IN_PROGRESS if "loading" in m.owned.values() else 0
    states = set(req.states_filter or []) if version >= 4 else set()
    out = [{"group_id": gid, "protocol_type": g.protocol_type or "", "group_state": g.state, "group_type": "classic"}
           for gid, g in sorted(m.groups.items())
           if g.state != gc.DEAD and (not states or g.state in states)]
    return {"throttle_time_ms": 0, "error_code": err, "groups": out}


async def describe_groups(b, req, version):
    m = _mgr(b)
    out = []
    for gid in req.groups:
        err = m.status(gid)
        g = m.groups.get(gid) if not err else None
        if g is None:
            out.append({"error_code": err, "group_id": gid, "group_state": gc.DEAD, "protocol_type": "",
                        "protocol_data": "", "members": []})
            continue
        stable = g.state == gc.STABLE
        out.append({"error_code": 0, "group_id": gid, "group_state": g.state,
                    "protocol_type": g.protocol_type or "", "protocol_data": (g.protocol_name or "") if stable else "",
                    "members": [{"member_id": mm.member_id, "group_instance_id": None, "client_id": mm.client_id,
                                 "client_host": mm.client_host,
                                 "member_metadata": mm.metadata(g.protocol_name) if stable else b"",
                                 "member_assignment": mm.assignment if stable else b""}
                                for mm in g.members.values()]})
    return {"throttle_time_ms": 0, "groups": out}


async def txn_offset_commit(b, req, version):
    """TxnOffsetCommit: the offsets are appended as a transactional batch under the producer's id
    and epoch and held pending until the transaction's marker reaches this partition
    (txn_marker_written); KIP-447's member and generation fence a zombie of an older generation."""
    m = _mgr(b)
    gid = req.group_id
    parts = [(t.name, p) for t in req.topics for p in t.partitions]
    err = m.status(gid)
    if not err and version >= 3:
        err = tc.validate_txn_offset_commit(m.groups.get(gid), req.member_id, req.generation_id)
    errors: dict[tuple[str, int], int] = {}
    if not err:
        commits, records = _offset_records(gid, parts, version >= 2, errors)
        if records:
            aerr, base = await m.append(m.partition_of(gid), records, (req.producer_id, req.producer_epoch))
            if aerr == 0:
                pend = m.txn_offsets.setdefault(req.producer_id, {})
                for i, ((topic, part), (off, epoch, meta, ts)) in enumerate(commits.items()):
                    pend[(gid, topic, part)] = gc.Offset(off, epoch, meta, ts, base + i)
            for tp in commits:
                errors[tp] = aerr
    return _commit_answer(parts, err, errors)


async def delete_groups(b, req, version):
    """DeleteGroups (API key 42): each named group that is Empty is marked Dead and deleted by
    tombstones in `__consumer_offsets` -- one per committed offset and one for the group's
    metadata -- appended acks=all, so the deletion survives a fail-over and a restart (the loader
    drops what a tombstone deletes). Kafka's answers per group: NOT_COORDINATOR /
    COORDINATOR_LOAD_IN_PROGRESS from the coordinator's status, INVALID_GROUP_ID for "",
    GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP; an append that fails puts the group back (Empty) and
    answers the append's error as a commit would get it."""
    m = _mgr(b)
    results = []
    for gid in req.groups_names:
        err = m.status(gid) if gid else codec.INVALID_GROUP_ID
        g = m.groups.get(gid) if not err else None
        if not err:
            err = gc.delete_check(g)
        if not err:
            g.state = gc.DEAD        # joins and commits meanwhile see a dead group, as in Kafka
            records = [(gr.offset_key(gid, t, p), None) for (t, p) in sorted(g.offsets)]
            records.append((gr.group_key(gid), None))
            err, _ = await m.append(m.partition_of(gid), records)
            if err:
                if m.groups.get(gid) is g:
                    g.state = gc.EMPTY
            elif m.groups.get(gid) is g:
                del m.groups[gid]
        results.append({"group_id": gid, "error_code": err})
    return {"throttle_time_ms": 0, "results": results}


GROUP_HANDLERS = {8: offset_commit, 9: offset_fetch, 10: find_coordinator, 11: join_group, 12: heartbeat,
                  13: leave_group, 14: sync_group, 15: describe_groups, 16: list_groups, 42: delete_groups}


def _offset_records(gid: str, parts: list, with_epoch: bool, errors: dict) -> tuple[dict, list]:
    """The commits and their `__consumer_offsets` records for one OffsetCommit or TxnOffsetCommit
    request; a partition whose metadata is too large gets its error in `errors` and no record.
    `with_epoch`: the request version carries committed leader epochs."""
    commits, records = {}, []
    now_wall = int(time.time() * 1000)
    for topic, p in parts:
        meta = p.committed_metadata or ""
        if len(meta.encode()) > MAX_METADATA_BYTES:
            errors[(topic, p.partition_index)] = codec.OFFSET_METADATA_TOO_LARGE
            continue
        epoch = p.committed_leader_epoch if with_epoch else -1
        commits[(topic, p.partition_index)] = (p.committed_offset, epoch, meta, now_wall)
        records.append((gr.offset_key(gid, topic, p.partition_index),
                        gr.offset_value(p.committed_offset, epoch, meta, now_wall)))
    return commits, records


def _commit_answer(parts: list, err: int, errors: dict) -> dict:
    """An OffsetCommit / TxnOffsetCommit response: the request's error for every partition, else
    each partition's own."""
    by_topic: dict[str, list] = {}
    for topic, p in parts:
        by_topic.setdefault(topic, []).append(
            {"partition_index": p.partition_index, "error_code": err or errors.get((topic, p.partition_index), 0)})
    return {"throttle_time_ms": 0, "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}
