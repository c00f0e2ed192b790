"""The transaction coordinator's I/O: the transaction APIs on the wire, the internal topic
`__transaction_state`, loading a partition's transactions when this broker becomes its leader,
the markers (WriteTxnMarkers to every partition's leader) and the timeout timer. Decisions are
impl/txn_coordinator.py's; records impl/txn_records.py's (Kafka's TransactionLog schemas).

- The coordinator of a transactional.id is the leader of partition partition_for(id) of
  `__transaction_state`, created on the first FindCoordinator (key type 1) with
  `transaction_state_num_partitions`, replication factor min(`transaction_state_replication_factor`,
  live brokers) and `transaction_state_min_isr` (Kafka's transaction.state.log.* settings).
- Every state change is an acks=all append to that partition; the request is answered once the
  HW passed it (Kafka answers after the append is committed). While a write is in flight the id
  is pending: other requests for it get CONCURRENT_TRANSACTIONS.
- EndTxn: PrepareCommit / PrepareAbort written -> answered NONE -> WriteTxnMarkers to the leader of
  every partition of the transaction (grouped by leader, retried with the current leaders until
  each partition answers NONE, or its topic is gone) -> CompleteCommit / CompleteAbort written.
  The markers carry the coordinator epoch: the leader epoch of our `__transaction_state` partition.
- On becoming leader the partition is loaded from the log (COORDINATOR_LOAD_IN_PROGRESS
  meanwhile; the latest record per id wins) and every Prepare* transaction is finished by
  resending its markers; on becoming follower its ids are dropped (NOT_COORDINATOR) and their
  marker tasks cancelled -- the new leader finishes them.
- Timer: an Ongoing transaction older than its timeout is aborted with an epoch bump.

Test-only hook: while the file `<data-dir>/HOLD_TXN_MARKERS` exists, this coordinator sends no
markers (a transaction stays Prepare*: the window of a coordinator crash during a commit).
"""
from __future__ import annotations

import asyncio
import logging
import time

from impl import txn_coordinator as tc
from impl import txn_records as tr
from impl.coordinator_log import append_committed
from impl.netclient import AsyncConn
from impl.protocol import codec
from impl.protocol import errors as E

log = logging.getLogger("impl.txn")

TXN_TOPIC = "__transaction_state"
OFFSETS_TOPIC = "__consumer_offsets"
LOAD_CHUNK_BYTES = 1 << 20
MARKER_BACKOFF_S = 0.1
MARKERS_VERSION = 1


def _wall_ms() -> int:
    return int(time.time() * 1000)


class TxnManager:
    """One per broker. `owned`: transaction-state partitions this broker leads -> "loading" |
    "loaded"; `coordinator_epoch` their leader epoch at load time."""

    def __init__(self, b):
        self.b = b
        self.txns: dict[str, tc.Txn] = {}
        self.owned: dict[int, str] = {}
        self.coordinator_epoch: dict[int, int] = {}
        self.loaders: dict[int, asyncio.Task] = {}
        self.pending: dict[str, int] = {}        # id -> the state its in-flight write moves to
        self.markers: dict[str, asyncio.Task] = {}
        self.conns: dict[int, AsyncConn] = {}
        self._ticker: asyncio.Task | None = None

    # --- wiring from the broker -----------------------------------------------------------------
    def on_partition_role(self, p) -> None:
        if p.topic != TXN_TOPIC:
            return
        if self._ticker is None or self._ticker.done():
            self._ticker = asyncio.ensure_future(self._timeout_loop())
        if p.role == "leader":
            if p.index not in self.owned:
                self.owned[p.index] = "loading"
                self.coordinator_epoch[p.index] = p.leader_epoch
                self.loaders[p.index] = asyncio.ensure_future(self._load(p))
        elif p.index in self.owned:
            self._unload(p.index)

    def trace(self, tid: str, d: tc.Decision) -> None:
        for rule, inputs, out in d.trace:
            self.b.event("txn_rule", rule=rule, transactional_id=tid, inputs=inputs, output=out)

    # --- __transaction_state --------------------------------------------------------------------
    def num_partitions(self) -> int | None:
        a = self.b.topic_assignments.get(TXN_TOPIC)
        return len(a["partitions"]) if a and a.get("partitions") else None

    def partition_of(self, tid: str) -> int:
        return tc.partition_for(tid, self.num_partitions() or self.b.cfg.transaction_state_num_partitions)

    def status(self, tid: str) -> int:
        if not tid:
            return codec.INVALID_REQUEST
        if self.num_partitions() is None:
            return codec.NOT_COORDINATOR
        st = self.owned.get(self.partition_of(tid))
        if st is None:
            return codec.NOT_COORDINATOR
        return codec.COORDINATOR_LOAD_IN_PROGRESS if st == "loading" else codec.NONE

    async def coordinator_for(self, tid: str) -> tuple[int, int]:
        b = self.b
        if TXN_TOPIC not in b.topic_assignments:
            try:
                await b.coordination.refresh_ids(await b.cc("get_children", b.path("/brokers/ids")))
                rf = min(b.cfg.transaction_state_replication_factor, max(len(b.live_brokers), 1))
                await b.create_topic(TXN_TOPIC, b.cfg.transaction_state_num_partitions, rf,
                                     {"cleanup.policy": "compact",
                                      "min.insync.replicas": min(b.cfg.transaction_state_min_isr, rf)})
            except Exception as e:
                log.warning("broker %d: creating %s failed: %s", b.id, TXN_TOPIC, e)
            return codec.COORDINATOR_NOT_AVAILABLE, -1
        if self.num_partitions() is None:
            return codec.COORDINATOR_NOT_AVAILABLE, -1
        st = b.partition_states.get((TXN_TOPIC, self.partition_of(tid)))
        if not st or st.get("leader", -1) not in b.live_brokers:
            return codec.COORDINATOR_NOT_AVAILABLE, -1
        return codec.NONE, st["leader"]

    async def _append(self, index: int, records: list) -> int:
        """An acks=all append to our partition `index`, answered once the HW passed it."""
        b = self.b
        p = b.partitions.get((TXN_TOPIC, index))
        if p is None or p.role != "leader" or self.owned.get(index) != "loaded":
            return codec.NOT_COORDINATOR
        err, _base = await append_committed(b, p, tr.batch(records), b.cfg.transaction_append_timeout_ms)
        return err

    async def write(self, t: tc.Txn) -> int:
        """Make `t` durable, then take it as the id's state (if we still coordinate it)."""
        index = self.partition_of(t.tid)
        cepoch = self.coordinator_epoch.get(index)
        self.pending[t.tid] = t.state
        try:
            err = await self._append(index, [(tr.key(t.tid), tr.value(t.record()))])
        finally:
            self.pending.pop(t.tid, None)
        if err == 0 and self.owned.get(index) == "loaded" and self.coordinator_epoch.get(index) == cepoch:
            self.txns[t.tid] = t
            self.b.event("txn_state", transactional_id=t.tid, producer_id=t.producer_id, producer_epoch=t.epoch,
                         state=t.state_name, partitions=sorted([tp, p] for tp, p in t.partitions),
                         coordinator_epoch=cepoch)
            if t.state in (tr.PREPARE_COMMIT, tr.PREPARE_ABORT):
                self._start_markers(t.tid)
        elif err == 0:
            err = codec.NOT_COORDINATOR
        return err

    async def _load(self, p) -> None:
        index = p.index
        try:
            found: dict[str, tr.TxnRecord] = {}
            pos, end = p.log.log_start_offset, p.log.leo
            while pos < end:
                data = p.log.read(pos, LOAD_CHUNK_BYTES, end)
                last = pos - 1
                for off, k, v in tr.data_records(data):
                    last = max(last, off)
                    if off < pos or k is None:
                        continue
                    try:
                        r = tr.decode(bytes(k), None if v is None else bytes(v))
                    except tr.RecordError as e:
                        log.warning("broker %d: %s-%d@%d skipped: %s", self.b.id, TXN_TOPIC, index, off, e)
                        continue
                    if r.deleted:
                        found.pop(r.transactional_id, None)
                    else:
                        found[r.transactional_id] = r
                if last < pos:
                    break
                pos = last + 1
                await asyncio.sleep(0)
            if self.owned.get(index) != "loading" or p.role != "leader":
                return
            for tid, r in found.items():
                if self.partition_of(tid) == index:
                    self.txns[tid] = tc.from_record(r)
            self.owned[index] = "loaded"
            self.b.event("txn_loaded", partition=index, coordinator_epoch=self.coordinator_epoch.get(index),
                         transactions=len(found))
            log.info("broker %d: loaded %s-%d: %d transactional ids", self.b.id, TXN_TOPIC, index, len(found))
            for tid, t in list(self.txns.items()):
                if self.partition_of(tid) == index and t.state in (tr.PREPARE_COMMIT, tr.PREPARE_ABORT):
                    self._start_markers(tid)
        except asyncio.CancelledError:
            pass
        except Exception:
            log.exception("broker %d: loading %s-%d failed", self.b.id, TXN_TOPIC, index)
            self.owned.pop(index, None)
        finally:
            self.loaders.pop(index, None)

    def _unload(self, index: int) -> None:
        self.owned.pop(index, None)
        self.coordinator_epoch.pop(index, None)
        t = self.loaders.pop(index, None)
        if t:
            t.cancel()
        for tid in [tid for tid in self.txns if self.partition_of(tid) == index]:
            self.txns.pop(tid, None)
            task = self.markers.pop(tid, None)
            if task:
                task.cancel()

    # --- markers (TransactionMarkerChannelManager) ----------------------------------------------
    def _start_markers(self, tid: str) -> None:
        old = self.markers.get(tid)
        if old is None or old.done():
            self.markers[tid] = asyncio.ensure_future(self._finish(tid))

    def _conn(self, node: int) -> AsyncConn | None:
        addr = self.b.live_brokers.get(node)
        if addr is None:
            return None
        c = self.conns.get(node)
        if c is None or (c.host, c.port) != tuple(addr):
            if c is not None:
                c.close()
            c = self.conns[node] = AsyncConn(addr[0], addr[1], f"txn-markers-{self.b.id}", timeout_s=10.0)
        return c

    async def _send(self, node: int, t: tc.Txn, cepoch: int, tps: list) -> dict:
        """One WriteTxnMarkers to `node` for `tps`: {tp: error}; a failed round trip errs all."""
        c = self._conn(node)
        if c is None:
            return {tp: codec.NOT_LEADER_OR_FOLLOWER for tp in tps}
        by_topic: dict[str, list[int]] = {}
        for topic, p in tps:
            by_topic.setdefault(topic, []).append(p)
        data = {"markers": [{"producer_id": t.producer_id, "producer_epoch": t.epoch,
                             "transaction_result": t.state == tr.PREPARE_COMMIT,
                             "topics": [{"name": k, "partition_indexes": v} for k, v in by_topic.items()],
                             "coordinator_epoch": cepoch}]}
        try:
            resp = await c.request(27, MARKERS_VERSION, data)
        except Exception as e:
            log.info("broker %d: WriteTxnMarkers to %d failed: %s", self.b.id, node, e)
            return {tp: codec.REQUEST_TIMED_OUT for tp in tps}
        out = {tp: codec.UNKNOWN_SERVER_ERROR for tp in tps}
        for m in resp.markers:
            for rt in m.topics:
                for rp in rt.partitions:
                    out[(rt.name, rp.partition_index)] = rp.error_code
        return out

    async def _finish(self, tid: str) -> None:
        """Markers to every partition of the Prepare* transaction, then Complete*. Retried every
        MARKER_BACKOFF_S without a count bound, as Kafka's marker channel does (a transaction
        cannot complete otherwise); it ends when every partition answered, when this broker stops
        coordinating the id (the new coordinator finishes it) or when a topic is deleted. One
        round waits at most the connection timeout (10 s) for a paused leader."""
        index = self.partition_of(tid)
        cepoch = self.coordinator_epoch.get(index)
        b = self.b
        try:
            t = self.txns.get(tid)
            if t is None or t.state not in (tr.PREPARE_COMMIT, tr.PREPARE_ABORT):
                return
            remaining = set(t.partitions)
            while remaining:
                if self.coordinator_epoch.get(index) != cepoch or self.owned.get(index) != "loaded":
                    return
                if (b.dir / "HOLD_TXN_MARKERS").exists():     # test hook: a commit stuck mid-way
                    await asyncio.sleep(MARKER_BACKOFF_S)
                    continue
                by_leader: dict[int, list] = {}
                for tp in sorted(remaining):
                    if tp[0] not in b.topic_assignments:
                        remaining.discard(tp)          # deleted meanwhile: nothing to mark
                        continue
                    st = b.partition_states.get(tp) or {}
                    by_leader.setdefault(int(st.get("leader", -1)), []).append(tp)
                results = await asyncio.gather(*(self._send(n, t, cepoch, tps) for n, tps in by_leader.items()))
                for res in results:
                    for tp, err in res.items():
                        if err == 0:
                            remaining.discard(tp)
                        elif err in (E.INVALID_PRODUCER_EPOCH, E.TRANSACTION_COORDINATOR_FENCED):
                            # Kafka: the marker is stale for the partition; nothing more to write there
                            log.warning("broker %d: marker for %s %s-%d refused (%d)", b.id, tid, tp[0], tp[1], err)
                            remaining.discard(tp)
                b.event("txn_markers", transactional_id=tid, producer_id=t.producer_id, producer_epoch=t.epoch,
                        commit=t.state == tr.PREPARE_COMMIT, coordinator_epoch=cepoch,
                        remaining=sorted([x, y] for x, y in remaining))
                if remaining:
                    await asyncio.sleep(MARKER_BACKOFF_S)
            while self.coordinator_epoch.get(index) == cepoch and self.owned.get(index) == "loaded":
                if tid not in self.pending:
                    err = await self.write(tc.complete(t, _wall_ms()))
                    if err == 0:
                        return
                await asyncio.sleep(MARKER_BACKOFF_S)
        except asyncio.CancelledError:
            pass
        except Exception:
            log.exception("broker %d: completing transaction %s failed", b.id, tid)
        finally:
            if self.markers.get(tid) is asyncio.current_task():
                self.markers.pop(tid, None)

    # --- timeouts -------------------------------------------------------------------------------
    async def _timeout_loop(self) -> None:
        while True:
            await asyncio.sleep(self.b.cfg.transaction_abort_timed_out_interval_ms / 1000)
            now = _wall_ms()
            for tid, t in sorted(self.txns.items()):
                if tid not in self.pending and tc.timed_out(t, now) and \
                        self.owned.get(self.partition_of(tid)) == "loaded":
                    log.info("broker %d: transaction %s timed out; aborting with an epoch bump", self.b.id, tid)
                    self.b.event("txn_timed_out", transactional_id=tid, producer_id=t.producer_id,
                                 producer_epoch=t.epoch)
                    self.pending[tid] = tr.PREPARE_ABORT     # at once: no request may decide on `t` meanwhile
                    asyncio.ensure_future(self.write(tc.abort_with_bump(t, now)))


def _mgr(b) -> TxnManager:
    return b.txns


# --- handlers -------------------------------------------------------------------------------------

async def init_producer_id(b, req, version):
    """InitProducerId with a transactional.id (the plain one is impl/idempotence.py's)."""
    m, tid = _mgr(b), req.transactional_id
    out = {"throttle_time_ms": 0, "error_code": 0, "producer_id": -1, "producer_epoch": -1}
    err = m.status(tid)
    if err:
        out["error_code"] = err
        return out
    t = m.txns.get(tid)
    new_pid = None
    if tc.needs_new_producer_id(t):
        try:
            new_pid = await b.producer_ids.allocate(b)
        except Exception as e:
            log.warning("broker %d: producer id block allocation failed: %s", b.id, e)
            out["error_code"] = codec.COORDINATOR_NOT_AVAILABLE
            return out
        t = m.txns.get(tid)
    req_pid = req.producer_id if version >= 3 else -1
    req_epoch = req.producer_epoch if version >= 3 else -1
    d = tc.init_producer_id(t, tid, req.transaction_timeout_ms, b.cfg.transaction_max_timeout_ms, req_pid,
                            req_epoch, tid in m.pending, new_pid, _wall_ms(), version)
    m.trace(tid, d)
    err = d.error
    if d.write is not None:
        werr = await m.write(d.write)
        if werr:
            err = werr
        elif not err:
            out["producer_id"], out["producer_epoch"] = d.write.producer_id, d.write.epoch
    out["error_code"] = err
    return out


def _topics_of(topics) -> frozenset:
    return frozenset((t.name, p) for t in topics for p in t.partitions)


def _partition_results(parts, errs: dict, default: int) -> list:
    by_topic: dict[str, list] = {}
    for topic, p in sorted(parts):
        by_topic.setdefault(topic, []).append({"partition_index": p, "partition_error_code": errs.get((topic, p), default)})
    return [{"name": k, "results_by_partition": v} for k, v in by_topic.items()]


async def _add(b, tid: str, pid: int, epoch: int, parts: frozenset, version: int, fenced_since: int = 2) -> int:
    m = _mgr(b)
    err = m.status(tid)
    if err:
        return err
    d = tc.add_partitions(m.txns.get(tid), pid, epoch, parts, tid in m.pending, _wall_ms(), version, fenced_since)
    m.trace(tid, d)
    if d.error or d.write is None:
        return d.error
    return await m.write(d.write)


async def add_partitions_to_txn(b, req, version):
    if version <= 3:
        parts = _topics_of(req.v3_and_below_topics)
        unknown = {tp for tp in parts if tp[0] not in b.topic_assignments
                   or tp[1] >= len(b.topic_assignments[tp[0]].get("partitions", {}))}
        if unknown:       # Kafka: UNKNOWN_TOPIC_OR_PARTITION for those, OPERATION_NOT_ATTEMPTED (55) for the rest
            errs = {tp: codec.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else 55 for tp in parts}
            return {"throttle_time_ms": 0, "results_by_topic_v3_and_below": _partition_results(parts, errs, 0)}
        err = await _add(b, req.v3_and_below_transactional_id, req.v3_and_below_producer_id,
                         req.v3_and_below_producer_epoch, parts, version)
        return {"throttle_time_ms": 0, "results_by_topic_v3_and_below": _partition_results(parts, {}, err)}
    # version 4+: batched, from brokers (KIP-890 part 1: verify_only before a first transactional append)
    m, results = _mgr(b), []
    for tx in req.transactions:
        parts = sorted(_topics_of(tx.topics))
        err = m.status(tx.transactional_id)
        if err:
            errs = {tp: err for tp in parts}
        elif tx.verify_only:
            errs, trace = tc.verify_partitions(m.txns.get(tx.transactional_id), tx.producer_id, tx.producer_epoch,
                                               parts, m.pending.get(tx.transactional_id))
            m.trace(tx.transactional_id, tc.Decision(trace=trace))
        else:
            e = await _add(b, tx.transactional_id, tx.producer_id, tx.producer_epoch, frozenset(parts), version)
            errs = {tp: e for tp in parts}
        results.append({"transactional_id": tx.transactional_id, "topic_results": _partition_results(parts, errs, 0)})
    return {"throttle_time_ms": 0, "error_code": 0, "results_by_transaction": results}


async def add_offsets_to_txn(b, req, version):
    tp = (OFFSETS_TOPIC, b.groups.partition_of(req.group_id))
    err = await _add(b, req.transactional_id, req.producer_id, req.producer_epoch, frozenset([tp]), version)
    return {"throttle_time_ms": 0, "error_code": err}


async def end_txn(b, req, version):
    m, tid = _mgr(b), req.transactional_id
    err = m.status(tid)
    if not err:
        d = tc.end_txn(m.txns.get(tid), req.producer_id, req.producer_epoch, req.committed, tid in m.pending,
                       _wall_ms(), b.fixes, version)
        m.trace(tid, d)
        err = d.error
        if not err and d.write is not None:
            err = await m.write(d.write)
    return {"throttle_time_ms": 0, "error_code": err}


async def describe_transactions(b, req, version):
    m, out = _mgr(b), []
    for tid in req.transactional_ids:
        err = m.status(tid)
        t = m.txns.get(tid) if not err else None
        if t is None:
            out.append({"error_code": err or E.TRANSACTIONAL_ID_NOT_FOUND, "transactional_id": tid,
                        "transaction_state": "", "transaction_timeout_ms": 0, "transaction_start_time_ms": -1,
                        "producer_id": -1, "producer_epoch": -1, "topics": []})
        else:
            out.append(dict(tc.describe(t), error_code=0))
    return {"throttle_time_ms": 0, "transaction_states": out}


async def list_transactions(b, req, version):
    m = _mgr(b)
    states = set(req.state_filters or [])
    pids = set(req.producer_id_filters or [])
    err = codec.COORDINATOR_LOAD_IN_PROGRESS if "loading" in m.owned.values() else 0
    out = [{"transactional_id": tid, "producer_id": t.producer_id, "transaction_state": t.state_name}
           for tid, t in sorted(m.txns.items())
           if (not states or t.state_name in states) and (not pids or t.producer_id in pids)]
    return {"throttle_time_ms": 0, "error_code": err, "unknown_state_filters": sorted(s for s in states
                                                                                     if s not in tr.STATE_NAMES),
            "transaction_states": out}


TXN_HANDLERS = {24: add_partitions_to_txn, 25: add_offsets_to_txn, 26: end_txn, 65: describe_transactions,
                66: list_transactions}
