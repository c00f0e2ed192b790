"""Request handlers: one coroutine per Kafka API, each returning the response as nested dicts
(impl.protocol.codec.build turns them into the wire classes) or None for "no response"
(Produce with acks=0)."""
from __future__ import annotations

import asyncio
import time

from impl import rules
from impl.group_handlers import GROUP_HANDLERS
from impl.protocol import codec
from impl.storage.batch import CorruptBatch
from impl.storage.log import DuplicateBatch, ProducerStateError

CLUSTER_ID = "kafkaverify-cluster"
MAX_FETCH_WAIT_MS = 30_000        # bound of a Fetch's long poll, whatever max_wait_ms asks


def _now_ms() -> float:
    return time.time() * 1000


async def api_versions(b, req, version):
    return codec.api_versions_data()


async def metadata(b, req, version):
    if req.topics is None or (version == 0 and not req.topics):
        names = sorted(t for t, a in b.topic_assignments.items() if a)
    else:
        names = [t.name for t in req.topics]
    auto = b.cfg.auto_create_topics and (version < 4 or req.allow_auto_topic_creation)
    topics = []
    for name in names:
        a = b.topic_assignments.get(name)
        if not a:
            if auto and name:
                err = await b.create_topic(name, b.cfg.default_partitions, min(
                    b.cfg.default_replication_factor, max(len(b.live_brokers), 1)), {})
                code = codec.LEADER_NOT_AVAILABLE if err in (0, codec.TOPIC_ALREADY_EXISTS) else err
            else:
                code = codec.UNKNOWN_TOPIC_OR_PARTITION
            topics.append({"error_code": code, "name": name, "is_internal": False, "partitions": []})
            continue
        parts = []
        for pi in sorted(a["partitions"], key=int):
            st = b.partition_states.get((name, int(pi)))
            replicas = a["partitions"][pi]
            if st is None:
                parts.append({"error_code": codec.LEADER_NOT_AVAILABLE, "partition_index": int(pi),
                              "leader_id": -1, "leader_epoch": -1, "replica_nodes": replicas,
                              "isr_nodes": [], "offline_replicas": []})
                continue
            leader = st["leader"] if st["leader"] in b.live_brokers else -1
            parts.append({"error_code": 0 if leader >= 0 else codec.LEADER_NOT_AVAILABLE,
                          "partition_index": int(pi), "leader_id": leader,
                          "leader_epoch": st["leader_epoch"], "replica_nodes": replicas,
                          "isr_nodes": st["isr"],
                          "offline_replicas": [r for r in replicas if r not in b.live_brokers]})
        topics.append({"error_code": 0, "name": name, "is_internal": name == "__consumer_offsets", "partitions": parts})
    return {"throttle_time_ms": 0, "cluster_id": CLUSTER_ID, "controller_id": b.controller_id,
            "brokers": [{"node_id": i, "host": h, "port": p, "rack": None}
                        for i, (h, p) in sorted(b.live_brokers.items())],
            "topics": topics}


async def produce(b, req, version):
    acks = req.acks
    if acks not in (0, 1, -1):
        errs = {(t.name, p.index): codec.INVALID_REQUIRED_ACKS for t in req.topic_data for p in t.partition_data}
        return _produce_response(errs, {})
    results: dict = {}
    waits = []
    for t in req.topic_data:
        for pd in t.partition_data:
            key = (t.name, pd.index)
            p = b.partitions.get(key)
            if p is None or p.role != "leader":
                known = t.name in b.topic_assignments
                results[key] = (codec.NOT_LEADER_OR_FOLLOWER if known else codec.UNKNOWN_TOPIC_OR_PARTITION, -1)
                continue
            if not p.produce_allowed(acks):
                results[key] = (codec.NOT_ENOUGH_REPLICAS, -1)      # refused before appending
                continue
            if not pd.records:
                results[key] = (codec.CORRUPT_MESSAGE, -1)
                continue
            txn_error = await txn_log.check_produce(b, p, getattr(req, "transactional_id", None), pd.records)
            if txn_error:
                results[key] = (txn_error, -1)
                continue
            try:
                base, last, _n = p.log.append_as_leader(bytes(pd.records), p.leader_epoch)
            except DuplicateBatch as d:  # idempotent retry: the original offsets, nothing appended
                base, last = d.first_offset, d.last_offset
            except ProducerStateError as e:
                results[key] = (e.code, -1)
                continue
            except CorruptBatch:
                results[key] = (codec.CORRUPT_MESSAGE, -1)
                continue
            except OSError as e:
                b_log_error(b, f"append failed: {e}")
                results[key] = (codec.UNKNOWN_SERVER_ERROR, -1)
                continue
            else:
                b.event("appended", topic=t.name, partition=pd.index, base_offset=base, last_offset=last,
                        leader_epoch=p.leader_epoch, acks=acks)
                p.update_hw()            # RF=1 / ISR={self}: the HW moves at once
                p.notify()               # wake replica fetchers long-polling on us
            results[key] = (0, base)
            if acks == -1 and p.hw <= last:
                fut = asyncio.get_running_loop().create_future()
                p.delayed.append((last, fut))
                waits.append((key, fut))
    if acks == 0:
        return None
    if waits:
        timeout = max(req.timeout_ms, 0) / 1000
        done, _ = await asyncio.wait([f for _, f in waits], timeout=timeout)
        for key, fut in waits:
            code = fut.result() if fut.done() else codec.REQUEST_TIMED_OUT
            if code:
                results[key] = (code, results[key][1] if code == codec.NOT_ENOUGH_REPLICAS_AFTER_APPEND else -1)
    return _produce_response({k: v[0] for k, v in results.items()}, {k: v[1] for k, v in results.items()})


def b_log_error(b, msg):
    import logging
    logging.getLogger("impl.broker").error("broker %d: %s", b.id, msg)


def _produce_response(errs: dict, bases: dict):
    by_topic: dict = {}
    for (t, i), e in sorted(errs.items()):
        by_topic.setdefault(t, []).append({"index": i, "error_code": e, "base_offset": bases.get((t, i), -1),
                                           "log_append_time_ms": -1, "log_start_offset": -1,
                                           "record_errors": [], "error_message": None})
    return {"throttle_time_ms": 0,
            "responses": [{"name": t, "partition_responses": ps} for t, ps in by_topic.items()]}


async def fetch(b, req, version):
    replica = req.replica_id if version < 15 else -1
    is_replica = replica is not None and replica >= 0
    deadline = time.monotonic() + min(max(req.max_wait_ms, 0), MAX_FETCH_WAIT_MS) / 1000
    budget = max(req.max_bytes, 1)
    while True:
        out, total, waitable = _fetch_pass(b, req, replica, is_replica, budget)
        remaining = deadline - time.monotonic()
        if total >= max(req.min_bytes, 1) or remaining <= 0 or not waitable or _has_error(out):
            break
        fut = asyncio.get_running_loop().create_future()
        for p in waitable:
            (p.waiters if is_replica else p.hw_waiters).append(fut)
        try:
            await asyncio.wait_for(fut, remaining)
        except asyncio.TimeoutError:
            pass
        finally:
            for p in waitable:
                lst = p.waiters if is_replica else p.hw_waiters
                if fut in lst:
                    lst.remove(fut)
    return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": out}


def _has_error(out) -> bool:
    return any(p["error_code"] for t in out for p in t["partitions"])


def _fetch_pass(b, req, replica, is_replica, budget):
    out, total, waitable = [], 0, []
    t_now = _now_ms()
    isolation = getattr(req, "isolation_level", 0) or 0
    for t in req.topics:
        parts = []
        for fp in t.partitions:
            p = b.partitions.get((t.topic, fp.partition))
            entry = {"partition_index": fp.partition, "error_code": 0, "high_watermark": -1,
                     "last_stable_offset": -1, "log_start_offset": -1, "aborted_transactions": None,
                     "preferred_read_replica": -1, "records": b""}
            parts.append(entry)
            if p is None or p.role != "leader":
                entry["error_code"] = codec.NOT_LEADER_OR_FOLLOWER if t.topic in b.topic_assignments \
                    else codec.UNKNOWN_TOPIC_OR_PARTITION
                continue
            fence = p.fetch_epoch_error(fp.current_leader_epoch)
            if is_replica and fp.current_leader_epoch >= 0 and fp.current_leader_epoch != p.leader_epoch:
                _trace_stale(b, p, "Fetch", replica, fp.current_leader_epoch, fence)
            if fence:
                entry["error_code"] = fence
                continue
            leo = p.log.leo
            lso = p.lso()
            if fp.fetch_offset > leo or fp.fetch_offset < p.log.log_start_offset:
                entry["error_code"] = codec.OFFSET_OUT_OF_RANGE
                entry.update(high_watermark=p.hw, last_stable_offset=lso, log_start_offset=p.log.log_start_offset)
                continue
            if is_replica:
                _record_follower_fetch(b, p, replica, fp.fetch_offset, leo, t_now)
            upper = leo if is_replica else rules.read_upper_bound(p.hw, lso, isolation)
            data = b""
            if budget - total > 0 or total == 0:
                data = p.log.read(fp.fetch_offset, min(fp.partition_max_bytes, max(budget - total, 1)), upper)
            total += len(data)
            entry.update(high_watermark=p.hw, last_stable_offset=lso,
                         log_start_offset=p.log.log_start_offset, records=data)
            if isolation == 1 and not is_replica:
                entry["aborted_transactions"] = txn_log.aborted_in_fetch(p, fp.fetch_offset, data)
            if not data:
                waitable.append(p)
        out.append({"topic": t.topic, "partitions": parts})
    return out, total, waitable


def _record_follower_fetch(b, p, replica: int, fetch_offset: int, leader_leo: int, t_now: float) -> None:
    """A replica's fetch moves its position (Partition.record_follower_fetch); it may then join
    the ISR (IsrManager.maybe_expand) and the HW may advance."""
    if not p.record_follower_fetch(replica, fetch_offset, leader_leo, t_now, b.broker_epochs.get(replica, -1)):
        return
    b.isr.maybe_expand(p, replica)
    p.update_hw()


async def list_offsets(b, req, version):
    is_replica = req.replica_id is not None and req.replica_id >= 0
    topics = []
    for t in req.topics:
        parts = []
        for lp in t.partitions:
            p = b.partitions.get((t.name, lp.partition_index))
            e = {"partition_index": lp.partition_index, "error_code": 0, "timestamp": -1, "offset": -1,
                 "leader_epoch": -1}
            parts.append(e)
            if p is None or p.role != "leader":
                e["error_code"] = codec.NOT_LEADER_OR_FOLLOWER if t.name in b.topic_assignments \
                    else codec.UNKNOWN_TOPIC_OR_PARTITION
                continue
            fence = p.fetch_epoch_error(lp.current_leader_epoch)
            if fence:
                e["error_code"] = fence
                continue
            e["leader_epoch"] = p.leader_epoch
            ts = lp.timestamp
            # read_committed (isolation 1, v2+) ends at the LSO, read_uncommitted at the HW
            fetchable = rules.read_upper_bound(p.hw, p.lso(), getattr(req, "isolation_level", 0) or 0)
            if ts == -2:
                e["offset"] = p.log.log_start_offset
            elif ts == -1:
                e["offset"] = p.log.leo if is_replica else fetchable
            elif ts >= 0:
                found = p.log.offset_for_timestamp(ts)
                if found and (is_replica or found[0] < fetchable):
                    e["offset"], e["timestamp"] = found
            else:
                e["error_code"] = codec.INVALID_REQUEST
        topics.append({"name": t.name, "partitions": parts})
    return {"throttle_time_ms": 0, "topics": topics}


async def create_topics(b, req, version):
    out = []
    for t in req.topics:
        configs = {c.name: c.value for c in (t.configs or [])}
        n = t.num_partitions if t.num_partitions > 0 else b.cfg.default_partitions
        rf = t.replication_factor if t.replication_factor > 0 else b.cfg.default_replication_factor
        if req.validate_only:
            err = 0
        else:
            assignment = {a.partition_index: list(a.broker_ids) for a in (t.assignments or [])} or None
            try:
                err = await b.create_topic(t.name, n, rf, configs, assignment)
            except Exception as e:      # coordination unavailable: retriable for the client
                b_log_error(b, f"CreateTopics {t.name}: {e}")
                err = codec.REQUEST_TIMED_OUT
            if err == 0 and not await b.wait_for_topic(t.name, req.timeout_ms):
                err = codec.REQUEST_TIMED_OUT
        out.append({"name": t.name, "error_code": err, "error_message": None,
                    "num_partitions": n, "replication_factor": rf, "configs": None})
    return {"throttle_time_ms": 0, "topics": out}


async def offsets_for_leader_epoch(b, req, version):
    """The leader's answer to a follower's truncation question (KIP-101 / KIP-279): the largest
    epoch <= the requested one and its end offset (the next epoch's start, or our LEO)."""
    topics = []
    for t in req.topics:
        parts = []
        for q in t.partitions:
            p = b.partitions.get((t.topic, q.partition))
            e = {"error_code": 0, "partition": q.partition, "leader_epoch": -1, "end_offset": -1}
            parts.append(e)
            if p is None or p.role != "leader":
                e["error_code"] = codec.NOT_LEADER_OR_FOLLOWER
                continue
            fence = p.fetch_epoch_error(q.current_leader_epoch)
            replica = getattr(req, "replica_id", -1)
            if q.current_leader_epoch >= 0 and q.current_leader_epoch != p.leader_epoch:
                _trace_stale(b, p, "OffsetsForLeaderEpoch", replica, q.current_leader_epoch, fence)
            if fence:
                e["error_code"] = fence
                continue
            ep, end = rules.leader_epoch_answer(p.log.epochs.entries, p.log.leo, q.leader_epoch, b.fixes)
            e["leader_epoch"], e["end_offset"] = ep, end
            # the answer a follower truncates by (conformance checks it against the model's rule)
            b.event("epoch_answered", topic=t.topic, partition=q.partition, replica=replica,
                    requested_epoch=q.leader_epoch, leader_epoch=ep, end_offset=end,
                    log_end_offset=p.log.leo)
        topics.append({"topic": t.topic, "partitions": parts})
    return {"throttle_time_ms": 0, "topics": topics}


def _trace_stale(b, p, request: str, replica, request_epoch: int, error: int) -> None:
    """A replica request carrying a leader epoch other than ours, and what we answered (0 =
    served): the KIP-320 fencing decision, for conformance. Requests without an epoch (-1, as
    followers send before KIP-320) and requests of our own epoch are not traced."""
    b.event("stale_epoch_request", topic=p.topic, partition=p.index, request=request, replica=replica,
            request_epoch=request_epoch, leader_epoch=p.leader_epoch, error_code=error)


HANDLERS = {0: produce, 1: fetch, 2: list_offsets, 3: metadata, 18: api_versions, 19: create_topics,
            23: offsets_for_leader_epoch, **GROUP_HANDLERS}

# Idempotent producer (impl/idempotence.py) and admin surface (impl/admin.py)
from impl import admin, idempotence, txn_log  # noqa: E402
HANDLERS.update({27: txn_log.write_txn_markers, 22: idempotence.init_producer_id, 20: admin.delete_topics, 32: admin.describe_configs,
                 37: admin.create_partitions, 60: admin.describe_cluster})

# Transactions: the coordinator (impl/txn_handlers.py) and the group's TxnOffsetCommit
from impl import group_handlers, txn_handlers  # noqa: E402
HANDLERS.update({**txn_handlers.TXN_HANDLERS, 28: group_handlers.txn_offset_commit})
