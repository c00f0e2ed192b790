"""The transaction coordinator's decisions (Kafka's TransactionCoordinator on TransactionMetadata),
pure: the id's committed metadata and the request in, a `Decision` out -- an error, or the
metadata to write to `__transaction_state` (answered once that record is committed). The I/O
(the log, the markers, the timers) is impl/txn_handlers.py's; the rules are impl/rules.py's.

Every decision carries the rule it applied with its inputs and output (`Decision.trace`), which
the shell writes to the broker trace as a `txn_rule` event, and checkers/conformance.py replays
against the model's function of the same name.

Transaction version: the request versions we advertise (EndTxn <= 3, Produce <= 9) are
transaction version 1, so EndTxn decides without `txn-epoch-bump` even on a generation that has
it (KIP-890 part 2 needs EndTxn 5 and Produce 12, which no client here sends).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from impl import rules
from impl.group_coordinator import java_string_hash
from impl.protocol import errors as E
from impl.txn_records import (COMPLETE_ABORT, COMPLETE_COMMIT, EMPTY, ONGOING, PREPARE_ABORT,
                              PREPARE_COMMIT, STATE_NAMES, TxnRecord)

MAX_EPOCH = 32767           # Short.MaxValue: an exhausted epoch takes a new producer id
TV2_ONLY = frozenset({"txn-epoch-bump"})


@dataclass(frozen=True)
class Txn:
    """TransactionMetadata: what the coordinator knows of one transactional.id (committed)."""
    tid: str
    producer_id: int
    epoch: int
    timeout_ms: int
    state: int = EMPTY
    partitions: frozenset = frozenset()          # {(topic, partition)}
    start_ms: int = -1
    update_ms: int = -1
    last_epoch: int = -1                          # the epoch before the coordinator's own bump

    @property
    def state_name(self) -> str:
        return STATE_NAMES[self.state]

    def record(self) -> TxnRecord:
        return TxnRecord(self.tid, self.producer_id, self.epoch, self.timeout_ms, self.state,
                         self.partitions, self.update_ms, self.start_ms)


def from_record(r: TxnRecord) -> Txn:
    return Txn(r.transactional_id, r.producer_id, r.producer_epoch, r.timeout_ms, r.state, r.partitions,
               r.start_ms, r.last_update_ms)


@dataclass(frozen=True)
class Decision:
    error: int = E.NONE
    write: Txn | None = None        # the metadata to make durable before answering
    trace: tuple = ()               # ((rule, inputs, output), ...)


def partition_for(transactional_id: str, partitions: int) -> int:
    """TransactionStateManager.partitionFor: Utils.abs(transactionalId.hashCode) % partitions."""
    h = java_string_hash(transactional_id)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


def fenced_error(version: int, fenced_since: int) -> int:
    """PRODUCER_FENCED from the request version that knows it (KIP-588), INVALID_PRODUCER_EPOCH
    before (KafkaApis converts it for old clients)."""
    return E.PRODUCER_FENCED if version >= fenced_since else E.INVALID_PRODUCER_EPOCH


def _t(rule: str, out, **inputs) -> tuple:
    return (rule, inputs, out)


def needs_new_producer_id(t: Txn | None) -> bool:
    return t is None or t.epoch + 1 >= MAX_EPOCH


def init_producer_id(t: Txn | None, tid: str, timeout_ms: int, max_timeout_ms: int, req_pid: int,
                     req_epoch: int, pending: bool, new_pid: int | None, now_ms: int,
                     version: int) -> Decision:
    """handleInitProducerId. `new_pid`: a freshly allocated id when needs_new_producer_id(t)."""
    if not 0 < timeout_ms <= max_timeout_ms:
        return Decision(E.INVALID_TRANSACTION_TIMEOUT)
    if t is None:
        return Decision(write=Txn(tid, new_pid, 0, timeout_ms, EMPTY, frozenset(), -1, now_ms))
    if pending:
        return Decision(E.CONCURRENT_TRANSACTIONS)
    trace: list = []
    if req_pid >= 0:                                  # KIP-360: the producer names itself
        if req_pid != t.producer_id:
            return Decision(E.INVALID_PRODUCER_ID_MAPPING)
        own = t.last_epoch >= 0 and t.state in (PREPARE_ABORT, COMPLETE_ABORT)
        fenced = rules.txn_bump_fenced(req_epoch, t.epoch, own)
        trace.append(_t("txn_bump_fenced", fenced, request_epoch=req_epoch, coordinator_epoch=t.epoch,
                        own_abort=own))
        if fenced:
            return Decision(fenced_error(version, 4), trace=tuple(trace))
    action = rules.txn_init_action(t.state)
    trace.append(_t("txn_init_action", action, state=t.state))
    if action == "wait":
        return Decision(E.CONCURRENT_TRANSACTIONS, trace=tuple(trace))
    if action == "abort":
        # fence the old instance and abort its transaction; the client retries meanwhile
        return Decision(E.CONCURRENT_TRANSACTIONS, abort_with_bump(t, now_ms), tuple(trace))
    if new_pid is not None and needs_new_producer_id(t):
        nt = replace(t, producer_id=new_pid, epoch=0, last_epoch=-1)
    else:
        nt = replace(t, epoch=t.epoch + 1, last_epoch=t.epoch)
    return Decision(write=replace(nt, timeout_ms=timeout_ms, state=EMPTY, partitions=frozenset(), start_ms=-1,
                                  update_ms=now_ms), trace=tuple(trace))


def abort_with_bump(t: Txn, now_ms: int) -> Txn:
    """prepareFenceProducerEpoch then prepareAbortOrCommit: PrepareAbort under epoch + 1, so the
    markers fence the old instance's late writes (InitProducerId over an open transaction, and
    the transaction timeout)."""
    return replace(t, epoch=t.epoch + 1, last_epoch=t.epoch, state=PREPARE_ABORT, update_ms=now_ms)


def _check_producer(t: Txn | None, pid: int, epoch: int, pending: bool, version: int, fenced_since: int,
                    trace: list) -> int:
    if t is None or pid != t.producer_id:
        return E.INVALID_PRODUCER_ID_MAPPING
    fenced = rules.txn_request_fenced(epoch, t.epoch)
    trace.append(_t("txn_request_fenced", fenced, request_epoch=epoch, coordinator_epoch=t.epoch))
    if fenced or epoch > t.epoch:
        return fenced_error(version, fenced_since)
    if pending or t.state in (PREPARE_COMMIT, PREPARE_ABORT):
        return E.CONCURRENT_TRANSACTIONS
    return E.NONE


def add_partitions(t: Txn | None, pid: int, epoch: int, partitions: frozenset, pending: bool, now_ms: int,
                   version: int, fenced_since: int = 2) -> Decision:
    """handleAddPartitionsToTransaction (also AddOffsetsToTxn, with the group's offsets partition):
    Ongoing with every partition already in needs no write; Empty / Complete* start a
    transaction; Prepare* or a write in flight get CONCURRENT_TRANSACTIONS."""
    trace: list = []
    err = _check_producer(t, pid, epoch, pending, version, fenced_since, trace)
    if err:
        return Decision(err, trace=tuple(trace))
    if t.state == ONGOING and partitions <= t.partitions:
        return Decision(trace=tuple(trace))
    start = t.start_ms if t.state == ONGOING else now_ms
    base = t.partitions if t.state == ONGOING else frozenset()
    return Decision(write=replace(t, state=ONGOING, partitions=base | partitions, start_ms=start,
                                  update_ms=now_ms), trace=tuple(trace))


def verify_partitions(t: Txn | None, pid: int, epoch: int, partitions: list,
                      pending: int | None) -> tuple[dict, tuple]:
    """The verify-only AddPartitionsToTxn a partition leader sends before a producer's first
    transactional append (KIP-890 part 1): per partition NONE if the transaction is Ongoing under
    that epoch and holds it, else INVALID_TXN_STATE (rules.txn_partition_verified). `pending`: the
    state an in-flight write moves the id to, or None. Another AddPartitionsToTxn in flight
    (to Ongoing) does not hold the answer up: the committed state answers, as Kafka's
    handleVerifyPartitionsInTransaction does; any other transition is CONCURRENT_TRANSACTIONS."""
    if t is None or pid != t.producer_id:
        return {tp: E.INVALID_PRODUCER_ID_MAPPING for tp in partitions}, ()
    if epoch < t.epoch:
        return {tp: E.PRODUCER_FENCED for tp in partitions}, ()
    if pending is not None and pending != ONGOING:
        return {tp: E.CONCURRENT_TRANSACTIONS for tp in partitions}, ()
    out, trace = {}, []
    for tp in partitions:
        ok = rules.txn_partition_verified(t.epoch, t.state, tp in t.partitions, epoch)
        trace.append(_t("txn_partition_verified", ok, coordinator_epoch=t.epoch, state=t.state,
                        holds=tp in t.partitions, epoch=epoch))
        out[tp] = E.NONE if ok else E.INVALID_TXN_STATE
    return out, tuple(trace)


def end_txn(t: Txn | None, pid: int, epoch: int, commit: bool, pending: bool, now_ms: int, fixes: frozenset,
            version: int) -> Decision:
    """handleEndTransaction, transaction version 1 (see the module note): rules.txn_end_answer
    decides; "prepare" writes PrepareCommit / PrepareAbort under rules.txn_end_epoch."""
    if t is None or pid != t.producer_id:
        return Decision(E.INVALID_PRODUCER_ID_MAPPING)
    if pending:
        return Decision(E.CONCURRENT_TRANSACTIONS)
    tv1 = fixes - TV2_ONLY
    answer = rules.txn_end_answer(epoch, t.epoch, t.state, commit, False, tv1)
    trace = [_t("txn_end_answer", answer, request_epoch=epoch, epoch=t.epoch, state=t.state, commit=commit,
                retry=False, fixes=sorted(tv1))]
    if answer == "fenced":
        return Decision(fenced_error(version, 2), trace=tuple(trace))
    if answer == "concurrent":
        return Decision(E.CONCURRENT_TRANSACTIONS, trace=tuple(trace))
    if answer == "invalid":
        return Decision(E.INVALID_TXN_STATE, trace=tuple(trace))
    if answer == "done":
        return Decision(trace=tuple(trace))
    new_epoch = rules.txn_end_epoch(t.epoch, tv1)
    trace.append(_t("txn_end_epoch", new_epoch, epoch=t.epoch, fixes=sorted(tv1)))
    return Decision(write=replace(t, epoch=new_epoch, state=PREPARE_COMMIT if commit else PREPARE_ABORT,
                                  update_ms=now_ms), trace=tuple(trace))


def complete(t: Txn, now_ms: int) -> Txn:
    """After every marker is written: CompleteCommit / CompleteAbort, no partitions."""
    return replace(t, state=COMPLETE_COMMIT if t.state == PREPARE_COMMIT else COMPLETE_ABORT,
                   partitions=frozenset(), update_ms=now_ms)


def timed_out(t: Txn, now_ms: int) -> bool:
    """TransactionStateManager.timedOutTransactions: Ongoing past its transaction.timeout.ms."""
    return t.state == ONGOING and t.start_ms >= 0 and now_ms - t.start_ms > t.timeout_ms


def describe(t: Txn) -> dict:
    """DescribeTransactions' view of one id."""
    by_topic: dict[str, list[int]] = {}
    for topic, p in sorted(t.partitions):
        by_topic.setdefault(topic, []).append(p)
    return {"transactional_id": t.tid, "transaction_state": t.state_name, "transaction_timeout_ms": t.timeout_ms,
            "transaction_start_time_ms": t.start_ms, "producer_id": t.producer_id, "producer_epoch": t.epoch,
            "topics": [{"topic": k, "partitions": v} for k, v in by_topic.items()]}


def validate_txn_offset_commit(group, member_id: str, generation: int) -> int:
    """GroupCoordinator.validateTxnOffsetCommit (KIP-447): a named member must belong to the group
    and a named generation must be the group's (a zombie from an older generation is fenced);
    without member and generation (older clients) the commit is taken as is. `group` is the
    coordinator's Group or None."""
    if group is None:
        return E.NONE if generation < 0 and not member_id else E.ILLEGAL_GENERATION
    if member_id and member_id not in group.members:
        return E.UNKNOWN_MEMBER_ID
    if generation >= 0 and generation != group.generation:
        return E.ILLEGAL_GENERATION
    return E.NONE
