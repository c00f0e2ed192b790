"""The partition leader's side of transactions (KIP-98, KIP-890): transactional batches in
Produce (the producer-epoch fence and, with `txn-partition-verification`, the question to the
transaction coordinator before a producer's first transactional append to a partition), and
WriteTxnMarkers (the COMMIT / ABORT control batch a coordinator has the leader append).

Decisions are impl/rules.py's (txn_needs_verification, txn_produce_verdict, txn_marker_verdict),
each traced with its inputs and output (`txn_produce`, `txn_marker`) for conformance. The state
they read is the log's producer state (impl/producer_state.py), which followers rebuild from the
same control batches; the LSO and the aborted-transactions index live there too.
"""
from __future__ import annotations

import asyncio
import logging
import struct
import weakref

from impl import rules
from impl.group_coordinator import partition_for
from impl.netclient import AsyncConn
from impl.protocol import codec
from impl.storage.batch import CorruptBatch, iter_batches, parse_header

log = logging.getLogger("impl.broker")

# Kafka's error codes for transactions (org.apache.kafka.common.protocol.Errors)
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
INVALID_PRODUCER_ID_MAPPING = 49
CONCURRENT_TRANSACTIONS = 51
TRANSACTION_COORDINATOR_FENCED = 52
PRODUCER_FENCED = 90

TXN_STATE_TOPIC = "__transaction_state"
MARKER_TIMEOUT_MS = 30_000       # request.timeout.ms: how long a marker waits for the HW
VERIFY_TIMEOUT_S = 5.0
VERIFY_VERSION = 4               # the batched broker-to-broker AddPartitionsToTxn (KIP-890)

# coordinator errors the leader answers as retriable NOT_ENOUGH_REPLICAS (ReplicaManager's
# translation of a verification it could not complete)
_RETRIABLE = {codec.COORDINATOR_NOT_AVAILABLE, codec.COORDINATOR_LOAD_IN_PROGRESS, codec.NOT_COORDINATOR,
              CONCURRENT_TRANSACTIONS, codec.REQUEST_TIMED_OUT}

_conns: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()   # broker -> {(host, port): conn}


def produce_error_for_verification(code: int) -> int:
    """The Produce error for a failed verification: coordinator unavailability and concurrent
    transactions are retriable (NOT_ENOUGH_REPLICAS), the rest pass through (INVALID_TXN_STATE
    for a partition the transaction does not hold, PRODUCER_FENCED / INVALID_PRODUCER_EPOCH /
    INVALID_PRODUCER_ID_MAPPING for another producer incarnation)."""
    if code in _RETRIABLE:
        return codec.NOT_ENOUGH_REPLICAS
    return code or INVALID_TXN_STATE


def coordinator_address(b, transactional_id: str) -> tuple[str, int] | None:
    """The transaction coordinator: the leader of the `__transaction_state` partition the id
    hashes to (TransactionStateManager.partitionFor), if it is alive."""
    a = b.topic_assignments.get(TXN_STATE_TOPIC)
    if not a or not a.get("partitions"):
        return None
    idx = partition_for(transactional_id, len(a["partitions"]))
    st = b.partition_states.get((TXN_STATE_TOPIC, idx))
    if st is None or st.get("leader", -1) < 0:
        return None
    return b.live_brokers.get(st["leader"])


async def verify(b, transactional_id: str | None, producer_id: int, epoch: int, topic: str,
                 partition: int) -> int:
    """Ask the coordinator (AddPartitionsToTxn v4, verify-only) whether the transaction is
    ongoing with this producer id and epoch and holds the partition: 0 if so, else its error."""
    if not transactional_id:
        return INVALID_TXN_STATE
    addr = coordinator_address(b, transactional_id)
    if addr is None:
        return codec.COORDINATOR_NOT_AVAILABLE
    pool = _conns.setdefault(b, {})
    conn = pool.get(addr)
    if conn is None:
        conn = pool[addr] = AsyncConn(addr[0], addr[1], f"broker-{b.id}-txn-verify", VERIFY_TIMEOUT_S)
    body = {"transactions": [{"transactional_id": transactional_id, "producer_id": producer_id,
                              "producer_epoch": epoch, "verify_only": True,
                              "topics": [{"name": topic, "partitions": [partition]}]}]}
    try:
        resp = await asyncio.wait_for(conn.request(24, VERIFY_VERSION, body), VERIFY_TIMEOUT_S)
    except (OSError, asyncio.TimeoutError, ConnectionError, EOFError, asyncio.IncompleteReadError) as e:
        log.info("broker %d: transaction verification of %s failed: %s", b.id, transactional_id, e)
        return codec.COORDINATOR_NOT_AVAILABLE
    if resp.error_code:
        return resp.error_code
    for tr in resp.results_by_transaction or []:
        if tr.transactional_id != transactional_id:
            continue
        for t in tr.topic_results:
            if t.name != topic:
                continue
            for pr in t.results_by_partition:
                if pr.partition_index == partition:
                    return pr.partition_error_code
    return INVALID_TXN_STATE


async def check_produce(b, p, transactional_id: str | None, records) -> int:
    """Before appending a Produce's batch on leader `p`: 0 to go on (not transactional, or the
    rules let it through), else the partition's error code. The sequence rules run afterwards,
    in the append, as for any idempotent batch."""
    try:
        info = parse_header(records, 0)
    except (CorruptBatch, struct.error):
        return 0                              # the append reports the corruption
    if not info.is_transactional or info.producer_id < 0:
        return 0
    entry = p.log.producers.entry(info.producer_id)
    partition_epoch = entry.epoch if entry else -1
    ongoing_epoch = entry.txn_epoch if entry and entry.txn_first_offset >= 0 else -1
    epoch = info.producer_epoch
    verify_error = None
    if epoch >= partition_epoch and rules.txn_needs_verification(ongoing_epoch, epoch, b.fixes):
        verify_error = await verify(b, transactional_id, info.producer_id, epoch, p.topic, p.index)
        if p.role != "leader":
            return codec.NOT_LEADER_OR_FOLLOWER
    verified = verify_error == 0 or (verify_error is None and ongoing_epoch == epoch)
    verdict = rules.txn_produce_verdict(partition_epoch, epoch, verified, b.fixes)
    code = {"fenced": INVALID_PRODUCER_EPOCH, "append": 0}.get(verdict)
    if code is None:
        code = produce_error_for_verification(verify_error if verify_error is not None else INVALID_TXN_STATE)
    b.event("txn_produce", topic=p.topic, partition=p.index, producer_id=info.producer_id, epoch=epoch,
            partition_epoch=partition_epoch, ongoing_epoch=ongoing_epoch, verify_error=verify_error,
            verified=verified, verdict=verdict, error_code=code)
    return code


def _marker_one(b, m, topic: str, index: int, waits: list) -> int:
    p = b.partitions.get((topic, index))
    if p is None or p.role != "leader":
        return codec.NOT_LEADER_OR_FOLLOWER if topic in b.topic_assignments else codec.UNKNOWN_TOPIC_OR_PARTITION
    if not p.produce_allowed(-1):
        return codec.NOT_ENOUGH_REPLICAS
    entry = p.log.producers.entry(m.producer_id)
    partition_epoch = entry.epoch if entry else -1
    open_epoch = entry.txn_epoch if entry and entry.txn_first_offset >= 0 else -1
    last_cepoch = entry.coordinator_epoch if entry else -1
    tv = getattr(m, "transaction_version", 0) or 0
    verdict = rules.txn_marker_verdict(partition_epoch, open_epoch, last_cepoch, m.producer_epoch,
                                       m.coordinator_epoch, rules.marker_fixes(b.fixes, tv))
    code = {"append": 0, "fenced": INVALID_PRODUCER_EPOCH,
            "coordinator-fenced": TRANSACTION_COORDINATOR_FENCED}[verdict]
    b.event("txn_marker", topic=topic, partition=index, producer_id=m.producer_id, epoch=m.producer_epoch,
            coordinator_epoch=m.coordinator_epoch, commit=bool(m.transaction_result),
            partition_epoch=partition_epoch, open_epoch=open_epoch, last_coordinator_epoch=last_cepoch,
            transaction_version=tv, verdict=verdict, error_code=code)
    if code:
        return code
    try:
        off = p.log.append_marker(m.producer_id, m.producer_epoch, bool(m.transaction_result),
                                  m.coordinator_epoch, p.leader_epoch)
    except OSError as e:
        log.error("broker %d: marker append failed: %s", b.id, e)
        return codec.UNKNOWN_SERVER_ERROR
    b.event("appended", topic=topic, partition=index, base_offset=off, last_offset=off,
            leader_epoch=p.leader_epoch, acks=-1, control="commit" if m.transaction_result else "abort")
    if topic == "__consumer_offsets":     # the group coordinator's pending transactional offsets
        b.groups.txn_marker_written(index, m.producer_id, bool(m.transaction_result))
    p.update_hw()
    p.notify()
    if p.hw <= off:
        fut = asyncio.get_running_loop().create_future()
        p.delayed.append((off, fut))
        waits.append(((m.producer_id, topic, index), fut))
    return 0


async def write_txn_markers(b, req, version):
    """WriteTxnMarkers (API 27): for each (producer id, epoch, result, partitions) append the
    marker on every partition this broker leads, answered once committed (markers are appended
    with acks=all), or that partition's error."""
    codes: dict[tuple[int, str, int], int] = {}
    order: list[tuple[int, list[tuple[str, list[int]]]]] = []
    waits: list = []
    for m in req.markers:
        topics = []
        for t in m.topics:
            for idx in t.partition_indexes:
                codes[(m.producer_id, t.name, idx)] = _marker_one(b, m, t.name, idx, waits)
            topics.append((t.name, list(t.partition_indexes)))
        order.append((m.producer_id, topics))
    if waits:
        await asyncio.wait([f for _, f in waits], timeout=MARKER_TIMEOUT_MS / 1000)
        for key, fut in waits:
            codes[key] = fut.result() if fut.done() else codec.REQUEST_TIMED_OUT
    return {"markers": [{"producer_id": pid, "topics": [
        {"name": name, "partitions": [{"partition_index": i, "error_code": codes[(pid, name, i)]} for i in idxs]}
        for name, idxs in topics]} for pid, topics in order]}


def aborted_in_fetch(p, fetch_offset: int, data: bytes) -> list[dict]:
    """A read_committed Fetch's `aborted_transactions`: those overlapping the fetched range, from
    the fetch offset to the end of the returned batches (UnifiedLog.addAbortedTransactions)."""
    end = fetch_offset
    try:
        for _pos, info in iter_batches(data, check_crc=False):
            end = info.last_offset + 1
    except CorruptBatch:
        pass
    return [{"producer_id": pid, "first_offset": first}
            for pid, first in p.log.producers.aborted_between(fetch_offset, end)]
