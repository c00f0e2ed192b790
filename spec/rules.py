"""The protocol's rules, each in one function named after it, each switchable fix cited.

Transitions in spec/model.py call these and contain no protocol decisions of their own, so a
protocol generation is exactly the set of fixes these functions consult.
"""
from __future__ import annotations

from spec.codes import (CODE_NAMES, NETWORK, NOT_ENOUGH_REPLICAS, NOT_LEADER, OK,  # noqa: F401
                        OUT_OF_ORDER_SEQUENCE)
from spec.state import FOLLOWER, Broker


def popcount(m: int) -> int:
    return bin(m).count("1")


# --- leader epoch cache -------------------------------------------------------------------------

def cache_assign(cache: tuple, epoch: int, start: int) -> tuple:
    """LeaderEpochFileCache.assign (storage/.../epoch/LeaderEpochFileCache.java): nothing to do if
    `epoch` is the latest epoch and starts no earlier (isUpdateNeeded); otherwise
    maybeTruncateNonMonotonicEntries removes trailing entries whose epoch is not below `epoch` or
    whose start offset is not below `start`, then the entry is appended."""
    if cache and cache[-1][0] == epoch and start >= cache[-1][1]:
        return cache
    keep = len(cache)
    while keep and (cache[keep - 1][0] >= epoch or cache[keep - 1][1] >= start):
        keep -= 1
    return cache[:keep] + ((epoch, start),)


def cache_truncate(cache: tuple, end: int) -> tuple:
    """truncateFromEnd: drop entries whose start offset is at or beyond the new log end."""
    return tuple(e for e in cache if e[1] < end)


UNDEFINED = -1     # UNDEFINED_EPOCH / UNDEFINED_EPOCH_OFFSET


def end_offset_for(cache: tuple, leo: int, epoch: int) -> int:
    """KIP-101 OffsetsForLeaderEpoch answer (Kafka 0.11 LeaderEpochFileCache.endOffsetFor): for
    the latest epoch, the LEO; for an older one, the start offset of the first epoch above it;
    UNDEFINED (-1) for an epoch above every cached one or below the first."""
    if cache and epoch == cache[-1][0]:
        return leo
    if not cache or epoch < cache[0][0]:
        return UNDEFINED
    for e, start in cache:
        if e > epoch:
            return start
    return UNDEFINED


def epoch_end_offset(cache: tuple, leo: int, epoch: int) -> tuple[int, int]:
    """KIP-279 answer (LeaderEpochFileCache.endOffsetFor since 2.0): the latest epoch ends at the
    LEO; otherwise the end is the start of the first higher epoch, paired with the largest epoch
    <= the requested one (or the requested epoch itself when it is below every cached epoch);
    (UNDEFINED, UNDEFINED) when no epoch is higher than the requested one."""
    if cache and cache[-1][0] == epoch:
        return epoch, leo
    higher = [x for x in cache if x[0] > epoch]
    if not higher:
        return UNDEFINED, UNDEFINED
    floor = [x for x in cache if x[0] <= epoch]
    return (floor[-1][0] if floor else epoch), higher[0][1]


# --- truncation ----------------------------------------------------------------------------------

def truncation_offset(f: Broker, leader: Broker, fixes: frozenset) -> int:
    """Where a follower truncates its log before fetching from a (new) leader
    (AbstractFetcherThread.getOffsetTruncationState).

    Without `epoch-truncation` (pre-0.11): to its own high watermark — the KIP-101 data-loss and
    divergence bugs. With it (KIP-101): to the leader's end offset for the follower's last epoch.
    With `epoch-end-offset` (KIP-279): the leader answers (largest epoch <= requested, end); the
    follower truncates to the smaller of that and its own end of that epoch, and if it does not
    have that epoch it drops back to its own largest smaller epoch and asks again. A follower
    with no epoch, or a leader answer of UNDEFINED, falls back to the follower's high watermark.
    """
    if "epoch-truncation" not in fixes or not f.cache:
        return min(f.hw, f.leo)
    if "epoch-end-offset" not in fixes:
        end = end_offset_for(leader.cache, leader.leo, f.cache[-1][0])
        return min(f.hw, f.leo) if end == UNDEFINED else min(f.leo, end)
    cache, leo = f.cache, f.leo
    for _ in range(len(f.cache) + 1):           # bounded: each round drops one local epoch
        if not cache:
            return min(f.hw, leo)
        e_req = cache[-1][0]
        e, end = epoch_end_offset(leader.cache, leader.leo, e_req)
        if end == UNDEFINED:                    # leader knows no epoch above ours: keep our HW
            return min(f.hw, leo)
        if e == e_req:
            return min(end, leo)
        # Leader's answer names an epoch we may not have: truncate to the end of our largest
        # epoch below the requested one, then ask again about that epoch.
        mine = [x for x in cache if x[0] <= e]
        if not mine:
            return min(f.hw, leo, cache[0][1])
        idx = cache.index(mine[-1])
        own_end = cache[idx + 1][1] if idx + 1 < len(cache) else leo
        if mine[-1][0] == e:
            return min(end, own_end, leo)
        leo = min(leo, own_end)
        cache = cache[: idx + 1]
    return min(f.hw, f.leo)


def must_truncate_on_become_follower(prev: Broker, new_leader: int, new_epoch: int,
                                     fixes: frozenset) -> bool:
    """KAFKA-7164 (`truncate-on-epoch-change`): truncate on every leader-epoch change. Before the
    fix a follower truncated only when its leader changed (or when it was not a follower)."""
    if prev.role != FOLLOWER or prev.leader != new_leader or prev.trunc:
        return True
    return "truncate-on-epoch-change" in fixes and new_epoch != prev.le


# --- fencing -------------------------------------------------------------------------------------

def fetch_epoch_accepted(f: Broker, leader: Broker, fixes: frozenset) -> bool:
    """KIP-320 (`fetch-epoch-fencing`): Fetch and OffsetsForLeaderEpoch carry the follower's
    current leader epoch; the leader answers FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH unless it
    equals its own, so a follower that missed an epoch change is neither served nor counted."""
    return "fetch-epoch-fencing" not in fixes or f.le == leader.le


def control_request_accepted(b: Broker, ce: int, le: int, fixes: frozenset) -> bool:
    """LeaderAndIsr acceptance: with `controller-epoch-fencing` a request from an older controller
    epoch is rejected (STALE_CONTROLLER_EPOCH); the leader epoch must always be newer."""
    if "controller-epoch-fencing" in fixes and ce < b.ce:
        return False
    return le > b.le


# --- ISR and high watermark ----------------------------------------------------------------------

def maximal_isr(leader: Broker, fixes: frozenset) -> int:
    """Partition.scala `partitionState.maximalIsr`. KIP-497 (`maximal-isr`): while an AlterIsr is
    in flight the leader acts on the union of the committed and the proposed ISR (an addition
    counts at once, a removal only once committed). Without it the leader acts on the committed
    ISR alone, so a replica whose addition is in flight is not waited for — the hazard KIP-497
    closed: the controller can commit the addition (and later elect the replica) after the HW
    passed records the replica lacks."""
    if "maximal-isr" in fixes and leader.pending >= 0:
        return leader.isr | leader.pending
    return leader.isr


def hw_members(leader: Broker, fixes: frozenset) -> int:
    """The replicas whose positions bound the high watermark (Partition.maybeIncrementLeaderHW):
    the maximal ISR. Kafka also waits for a caught-up, ISR-eligible non-member
    (shouldWaitForReplicaToJoinIsr); "caught up" there is a timer (replica.lag.time.max.ms) with
    no untimed counterpart. In the model such a replica is proposed for the ISR by the very fetch
    that makes it eligible, so it is counted through the maximal ISR as soon as the fix is on."""
    return maximal_isr(leader, fixes)


def hw_may_advance(leader: Broker, min_isr: int, fixes: frozenset) -> bool:
    """KAFKA-15583 (`min-isr-hw`): no high-watermark advance while the partition is under min ISR;
    Partition.isUnderMinIsr counts the committed ISR (`partitionState.isr`)."""
    if "min-isr-hw" not in fixes:
        return True
    return popcount(leader.isr) >= min_isr


def leader_hw(leader: Broker, me: int, min_isr: int, fixes: frozenset) -> int:
    """The HW rule: min LEO over the HW members, never decreasing on the leader."""
    if not hw_may_advance(leader, min_isr, fixes):
        return leader.hw
    hw = leader.leo
    members = hw_members(leader, fixes)
    for r, p in enumerate(leader.pos):
        if r != me and (members >> r) & 1:
            if p < 0:
                return leader.hw
            hw = min(hw, p)
    return max(hw, leader.hw)


def may_join_isr(leader: Broker, position: int, fixes: frozenset) -> bool:
    """ISR expansion (Partition.maybeExpandIsr / isFollowerInSync): the follower caught up to the
    HW, and with KAFKA-7128 (`isr-expand-epoch-start`) also to the start offset of the leader's
    current epoch. Eligibility by broker epoch is the controller's check (isr_addition_valid)."""
    if position < leader.hw:
        return False
    if "isr-expand-epoch-start" in fixes and leader.cache:
        return position >= leader.cache[-1][1]
    return True


def isr_addition_valid(added_session: int, current_session: int, fixes: frozenset) -> bool:
    """KIP-903 (`isr-broker-epoch`, KAFKA-14139): AlterPartition carries the broker epoch each new
    ISR member fetched with; the controller answers INELIGIBLE_REPLICA unless that is the
    member's current registration (a fenced or re-registered broker — one that restarted with
    an empty disk — cannot join on the strength of its previous incarnation's fetch)."""
    if "isr-broker-epoch" not in fixes:
        return True
    return current_session != 0 and added_session == current_session


def produce_allowed(leader: Broker, acks: str, min_isr: int, fixes: frozenset) -> bool:
    """Partition.appendRecordsToLeader: acks=all is refused with NOT_ENOUGH_REPLICAS while the
    committed ISR (`partitionState.isr`) is below min.insync.replicas."""
    return acks != "all" or popcount(leader.isr) >= min_isr


def ack_succeeds(leader: Broker, min_isr: int, fixes: frozenset) -> bool:
    """Partition.checkEnoughReplicasReachOffset: once the HW passed an acks=all write, it is
    acknowledged only if the maximal ISR still has min.insync.replicas members (else
    NOT_ENOUGH_REPLICAS_AFTER_APPEND)."""
    return popcount(maximal_isr(leader, fixes)) >= min_isr


def follower_halts_on_out_of_range(fixes: frozenset, unclean: bool) -> bool:
    """ReplicaFetcherThread.handleOffsetOutOfRange before KIP-101: a follower whose log end is
    past the leader's would have to truncate committed-looking data; with unclean leader election
    off Kafka refuses and halts the broker ("Exiting because log truncation is not allowed").
    With KIP-101's epoch truncation the follower truncates before fetching, and an out-of-range
    answer only moves it to the leader's end offset."""
    return "epoch-truncation" not in fixes and not unclean


# --- eligible leader replicas (KIP-966) ---------------------------------------------------------

def elr_after_isr_change(fixes: frozenset, min_isr: int, old_isr: int, new_isr: int, elr: int,
                         unclean_shutdown: int) -> int:
    """KIP-966 (`eligible-leader-replicas`; PartitionChangeBuilder): replicas removed from the ISR
    while the new ISR is below min.insync.replicas join the ELR (the HW cannot have advanced
    without them: KAFKA-15583); a replica that had an unclean shutdown is never eligible
    (KAFKA-15586); ISR members are not in the ELR; at or above min ISR the ELR is empty."""
    if "eligible-leader-replicas" not in fixes:
        return 0
    if popcount(new_isr) >= min_isr:
        return 0
    elr = (elr | (old_isr & ~new_isr)) & ~unclean_shutdown
    return elr & ~new_isr


def unclean_recovery_choice(cands: int, brokers: tuple) -> int:
    """KIP-966's unclean recovery (the Balanced strategy): when only last-known-ELR members are
    left, the controller asks them for their logs and elects one with the largest (last leader
    epoch, log end offset), never a shorter log that an unclean shutdown emptied."""
    def key(i):
        b = brokers[i]
        return (b.cache[-1][0] if b.cache else -1, len(b.log))
    members = [i for i in range(len(brokers)) if (cands >> i) & 1]
    best = max(key(i) for i in members)
    out = 0
    for i in members:
        if key(i) == best:
            out |= 1 << i
    return out


def leader_candidates(fixes: frozenset, isr: int, elr: int, lkelr: int, electable: int,
                      unclean: bool) -> int:
    """Who the controller may elect: a live ISR member; with KIP-966, else a live ELR member, else
    a live member of the last known ELR (the last replicas known to hold every committed record);
    else, with unclean.leader.election.enable, any live replica."""
    cands = isr & electable
    if not cands and "eligible-leader-replicas" in fixes:
        cands = elr & electable or lkelr & electable
    if not cands and unclean:
        cands = electable
    return cands


# --- producers (KIP-98 idempotence, KIP-360 epoch bumps) ------------------------------------------

# ProducerStateEntry.NUM_BATCHES_TO_RETAIN: the leader remembers the metadata of a producer's
# last 5 batches; this is why KafkaProducer refuses idempotence with max.in.flight above 5.
BATCHES_RETAINED = 5

# Produce answers, as the client sees them, are spec/codes.py's (re-exported here for the rules
# that choose them).


def producer_state(log: tuple, writes: tuple, producer: int) -> tuple[int, int, tuple]:
    """ProducerStateManager as a fold over the log: (epoch, last sequence, last batches as
    ((seq, offset), ...) newest last, at most BATCHES_RETAINED). The broker keeps this in memory
    and in snapshots, rebuilt from the log on recovery and on truncation (truncateAndReload), so
    it always equals this fold of the replica's own log: a new leader has it from its log.
    A batch of a newer epoch resets the entry (ProducerAppendInfo.updateProducerEpoch)."""
    epoch, last, cache = -1, -1, ()
    for off, (r, _) in enumerate(log):
        if r >= len(writes):
            continue
        p, _k, pe, seq = writes[r]
        if p != producer or seq < 0:
            continue
        if pe != epoch:
            epoch, cache = pe, ()
        last = seq
        cache = (cache + ((seq, off),))[-BATCHES_RETAINED:]
    return epoch, last, cache


def check_sequence(log: tuple, writes: tuple, producer: int, pe: int, seq: int,
                   fixes: frozenset) -> tuple[str, int]:
    """The leader's check of an incoming batch (ProducerStateManager / ProducerAppendInfo
    .checkProducerEpoch + checkSequence, and Log.analyzeAndValidateProducerState's duplicate
    lookup). Returns ("append", -1), ("duplicate", original offset) or ("out-of-order", -1).
    Without `idempotent-producer` (KIP-98) every batch is appended.
    - a batch equal to one of the producer's last 5 (same epoch and sequence) is a duplicate,
      answered with its original offset (findDuplicateBatch);
    - a new epoch must start at sequence 0; the same epoch must continue at last + 1; an unknown
      producer must start at 0 (UNKNOWN_PRODUCER_ID, which the KIP-360 client handles like an
      out-of-order answer); anything else is OUT_OF_ORDER_SEQUENCE_NUMBER. (An older epoch would
      get INVALID_PRODUCER_EPOCH: the model's producer never sends one, as it bumps its epoch
      only with nothing in flight.)"""
    if "idempotent-producer" not in fixes or seq < 0:
        return "append", -1
    epoch, last, cache = producer_state(log, writes, producer)
    if pe == epoch:
        for s, off in cache:
            if s == seq:
                return "duplicate", off
        return ("append", -1) if seq == last + 1 else ("out-of-order", -1)
    return ("append", -1) if seq == 0 else ("out-of-order", -1)


def producer_reaction(code: int, seq: int, last_acked: int, tries: int, retries: int,
                      fixes: frozenset) -> str:
    """What the producer does with a failed batch (Sender.canRetry and, with idempotence,
    TransactionManager.canRetry / handleFailedBatch since KIP-360): "retry" (re-enqueued at the
    head of its partition's queue, RecordAccumulator.reenqueue), "bump" (retry after bumping the
    epoch and renumbering the unfinished batches from 0), or "fail" (reported to the
    application; with idempotence its sequence is then unresolved, so the epoch is bumped too).
    - every error here is retriable; a batch is retried while it has retries left (the budget
      stands in for delivery.timeout.ms: either ends the batch);
    - OUT_OF_ORDER_SEQUENCE_NUMBER for a batch that is not the next after the last acknowledged
      one is retried as is (an earlier batch is still on its way); for the next one it means the
      leader lost (or never kept) the producer's state: bump the epoch and resend from 0."""
    if tries >= retries:
        return "fail"
    if code == OUT_OF_ORDER_SEQUENCE and "idempotent-producer" in fixes and seq == last_acked + 1:
        return "bump"
    return "retry"


def sequence_resolved(unresolved_seq: int, last_acked: int) -> bool:
    """TransactionManager.maybeResolveSequences (KIP-360): once nothing sent is unfinished, an
    unresolved sequence is resolved if the broker acknowledged a sequence at or past it (the
    failed batch was written after all); if not, the epoch must be bumped."""
    return last_acked >= unresolved_seq


def promises_send_order(fixes: frozenset, max_in_flight: int, retries: int) -> str | None:
    """Per producer and partition, acknowledged records appear in send order: Kafka promises it
    with idempotence (KIP-98, for any max.in.flight <= 5), and without it only when a batch is
    never overtaken (max.in.flight 1) or never retried. None when promised, else why not."""
    if "idempotent-producer" in fixes or max_in_flight == 1 or retries == 0:
        return None
    return (f"not promised: no idempotence with retries={retries} and "
            f"max.in.flight={max_in_flight} may reorder")


def promises_exactly_once(fixes: frozenset, retries: int) -> str | None:
    """Each record is written once: promised with idempotence, or when nothing is ever retried."""
    if "idempotent-producer" in fixes or retries == 0:
        return None
    return f"not promised: no idempotence with retries={retries} may write a record twice"


def promises_acked_durable(acks: str) -> str:
    """A record acknowledged to its producer survives leader changes. With acks=all that is
    AckedDurable's promise (checked on the broker's acknowledgement, the earlier of the two
    moments), so this client-side view is asked by name only ("can my settings lose?"); with
    acks=1 the leader answers before any follower has the record, and Kafka promises nothing
    (the producer configuration docs: "the record will be lost" if the leader fails first)."""
    if acks == "all":
        return "asked by name only: with acks=all, AckedDurable holds the broker to it"
    return f"not promised: acks={acks} acknowledges before the followers have the record"


# --- consumer groups (GroupCoordinator, GroupMetadataManager) ------------------------------------

def commit_generation_ok(commit_generation: int, group_generation: int, fixes: frozenset) -> bool:
    """GroupCoordinator.handleCommitOffsets / validateOffsetCommit (`group-generation-fencing`,
    the generation check of the group protocol, KIP-62's era): a commit from another generation
    gets ILLEGAL_GENERATION, so a member fenced by a rebalance cannot move the group's offset.
    Without it the coordinator accepts any member's commit."""
    return "group-generation-fencing" not in fixes or commit_generation == group_generation


def committed_offset_in_log(log: tuple, writes: tuple) -> int:
    """GroupMetadataManager.loadGroupsAndOffsets: a coordinator knows the group's committed
    offset as the last commit record in its __consumer_offsets log (the log is compacted by key:
    the last value wins); -1 when there is none. A new coordinator loads it from its own log,
    so a commit its log lacks is gone for the group."""
    off = -1
    for r, _ in log:
        if r < len(writes) and writes[r][0] < 0:
            off = writes[r][1]
    return off


def promises_delivery(commit: str, mode: str) -> str | None:
    """Commit after processing promises at-least-once (a crash re-delivers from the committed
    offset: nothing below it unprocessed); commit before processing promises at-most-once (a
    crash skips the record committed but not processed: nothing twice). None when `mode` is
    what `commit` promises."""
    promised = "at-least-once" if commit == "after" else "at-most-once"
    return None if mode == promised else f"not promised: commit {commit} processing is {promised}"


# --- transactions (KIP-98: TransactionCoordinator, TransactionStateManager, ProducerStateManager;
# KIP-890; KAFKA-14053). A data partition's log holds (kind, tid, epoch, a, b) entries: kind 0 a
# transactional batch, 1 a COMMIT marker, 2 an ABORT marker (a: the coordinator epoch). ----------

def txn_partition_state(log: tuple, tid: int) -> tuple[int, int, int, int]:
    """ProducerStateManager for one transactional producer, as a fold over a data partition's
    log (rebuilt from the log on recovery, like `producer_state`): (its epoch, the first offset
    of its open transaction or -1, the epoch of that transaction's latest batch or -1, the last
    coordinator epoch of its markers or -1). A marker ends whatever is open
    (ProducerAppendInfo.appendEndTxnMarker)."""
    epoch, first, open_epoch, cepoch = -1, -1, -1, -1
    for off, (kind, t, e, a, _) in enumerate(log):
        if t != tid:
            continue
        epoch = max(epoch, e)
        if kind == 0:
            first = off if first < 0 else first
            open_epoch = e
        else:
            first, open_epoch, cepoch = -1, -1, max(cepoch, a)
    return epoch, first, open_epoch, cepoch


def last_stable_offset(log: tuple) -> int:
    """ProducerStateManager.firstUnstableOffset: the LSO is the first offset of a transaction
    still open on the partition, or the log end (the data partitions have one replica: HW = LEO)."""
    opened: dict[int, int] = {}
    for off, (kind, t, *_rest) in enumerate(log):
        if kind == 0:
            opened.setdefault(t, off)
        else:
            opened.pop(t, None)
    return min(opened.values(), default=len(log))


def txn_fates(log: tuple) -> tuple:
    """What becomes of each entry for a reader: 1 committed, 2 aborted, 0 still open (a batch is
    decided by the next marker of its producer: the transaction index lists aborted ranges,
    TransactionIndex / FetchResponse.abortedTransactions), -1 a control record."""
    out = [-1] * len(log)
    opened: dict[int, list[int]] = {}
    for off, (kind, t, *_rest) in enumerate(log):
        if kind == 0:
            out[off] = 0
            opened.setdefault(t, []).append(off)
        else:
            for o in opened.pop(t, []):
                out[o] = kind
    return tuple(out)


def read_committed(log: tuple, isolation: str) -> tuple:
    """The data offsets a consumer returns (Fetch with isolation.level): read_committed stops at
    the LSO and drops aborted batches; read_uncommitted returns every batch up to the HW (the
    log end here). Control records are never returned."""
    fates = txn_fates(log)
    if isolation == "read_uncommitted":
        return tuple(o for o, f in enumerate(fates) if f >= 0)
    lso = last_stable_offset(log)
    return tuple(o for o in range(lso) if fates[o] == 1)


def txn_request_fenced(request_epoch: int, coordinator_epoch: int) -> bool:
    """TransactionCoordinator (handleAddPartitionsToTransaction, handleEndTransaction, the
    KIP-360 InitProducerId with an epoch): a request of an older producer epoch than the
    coordinator's gets PRODUCER_FENCED (KIP-98's zombie fencing)."""
    return request_epoch < coordinator_epoch


def txn_bump_fenced(request_epoch: int, coordinator_epoch: int, own_abort: bool) -> bool:
    """KIP-360's InitProducerId with the producer's current epoch (the KAFKA-14053 bump): fenced
    unless it carries the coordinator's epoch or, when the coordinator itself aborted this
    producer's transaction with a bump (on this request or on timeout), the epoch before it
    (TransactionMetadata.lastProducerEpoch lets the retry through)."""
    if own_abort and request_epoch == coordinator_epoch - 1:
        return False
    return request_epoch < coordinator_epoch


def txn_init_action(state: int) -> str:
    """TransactionCoordinator.handleInitProducerId on the transactional.id's state: "wait" while
    a transaction completes (Prepare*: CONCURRENT_TRANSACTIONS, the client retries); "abort" an
    ongoing one first, with the epoch bumped so the old instance is fenced
    (prepareFenceProducerEpoch; CONCURRENT_TRANSACTIONS meanwhile); otherwise "bump" the epoch
    and answer it."""
    if state in (2, 3):
        return "wait"
    return "abort" if state == 1 else "bump"


def txn_end_epoch(epoch: int, fixes: frozenset) -> int:
    """The epoch EndTxn's Prepare* record and markers carry (TransactionMetadata.prepareAbortOrCommit).
    `txn-epoch-bump` (KIP-890 part 2, transaction version 2): bumped at the end of every
    transaction, and the producer goes on with the new epoch; before, unchanged."""
    return epoch + 1 if "txn-epoch-bump" in fixes else epoch


def txn_end_answer(request_epoch: int, epoch: int, state: int, commit: bool, retry: bool,
                   fixes: frozenset) -> str:
    """TransactionCoordinator.handleEndTransaction (endTransaction; endTransactionWithTV1 below
    transaction version 2) on the transactional.id's committed state: "prepare" (write
    PrepareCommit / PrepareAbort), "concurrent" (CONCURRENT_TRANSACTIONS: the client asks
    again), "done" (NONE: a retry of the EndTxn that already decided it), "fenced"
    (PRODUCER_FENCED) or "invalid" (INVALID_TXN_STATE).
    - version 1: the epoch must equal the coordinator's (an older one: `txn_request_fenced`,
      the zombie check); Ongoing is prepared; PrepareCommit /
      PrepareAbort with the same decision is CONCURRENT_TRANSACTIONS, CompleteCommit /
      CompleteAbort with the same decision is NONE; anything else INVALID_TXN_STATE;
    - version 2 (`txn-epoch-bump`): a retry carries the epoch before the bump its first attempt
      made (retryOnEpochBump: the coordinator's epoch is the request's + 1); Ongoing and Empty
      need the current epoch, Prepare* a retry, Complete* a retry or the current epoch, else
      PRODUCER_FENCED; a retry is answered as in version 1, and an abort with the current epoch
      on Empty or Complete* writes a new PrepareAbort (an empty transaction aborted with a bump).
    `retry`: the client is resending its EndTxn. Kafka recognises the retry by the epoch alone;
    the model's coordinator-side fencing abort bumps the epoch once (Kafka's version 2 bumps it
    twice: prepareFenceProducerEpoch, then prepareAbortOrCommit), so a first EndTxn after it
    would look like a retry by its epoch and the model says which one it is."""
    same = state in ((2, 4) if commit else (3, 5))          # Prepare*/Complete* of this decision
    bumped = "txn-epoch-bump" in fixes and retry and epoch == request_epoch + 1
    if txn_request_fenced(request_epoch, epoch) and not bumped or request_epoch > epoch:
        return "fenced"
    if bumped and state in (0, 1) or "txn-epoch-bump" in fixes and state in (2, 3) and not bumped:
        return "fenced"
    if state == 1:
        return "prepare"
    if state in (2, 3):
        return "concurrent" if same else "invalid"
    if "txn-epoch-bump" not in fixes or bumped:
        return "done" if same and state in (4, 5) else "invalid"
    return "invalid" if commit else "prepare"       # version 2, the current epoch: empty abort


def txn_timeout_reaction(fixes: frozenset) -> str:
    """What a transactional producer does when a batch timed out on the client (it may still be
    in flight): `txn-timeout-bump` (KAFKA-14053, TransactionManager.handleFailedBatch) bumps the
    epoch with InitProducerId, which fences the late batch; before, it aborts the transaction
    under the same epoch."""
    return "bump" if "txn-timeout-bump" in fixes else "abort"


def txn_produce_verdict(partition_epoch: int, epoch: int, coordinator: tuple, partition: int,
                        fixes: frozenset) -> str:
    """A data partition leader's check of a transactional batch. `coordinator` is the
    coordinator's committed (epoch, state, partitions mask) for the producer's transactional.id.
    - "fenced": an epoch below the one the partition knows (ProducerAppendInfo.checkProducerEpoch,
      INVALID_PRODUCER_EPOCH);
    - "unverified": with `txn-partition-verification` (KIP-890 part 1, AddPartitionsToTxnManager
      and the verification guard), unless the coordinator has an Ongoing transaction of that
      epoch holding the partition (INVALID_TXN_STATE);
    - "append" otherwise."""
    if epoch < partition_epoch:
        return "fenced"
    if "txn-partition-verification" in fixes:
        c_epoch, state, parts = coordinator
        if not (state == 1 and c_epoch == epoch and (parts >> partition) & 1):
            return "unverified"
    return "append"


def txn_marker_verdict(partition_epoch: int, open_epoch: int, last_coordinator_epoch: int,
                       epoch: int, coordinator_epoch: int, fixes: frozenset) -> str:
    """A partition leader's check of a WriteTxnMarkers entry (ProducerAppendInfo.appendEndTxnMarker):
    - "coordinator-fenced": from an older coordinator epoch than the producer's last marker
      (TransactionCoordinatorFencedException);
    - "fenced": an epoch below the producer's (INVALID_PRODUCER_EPOCH); with `txn-epoch-bump`
      (KIP-890 part 2) also a marker whose epoch is not above the open transaction's batches:
      transaction version 2 writes markers with the bumped epoch, so an equal one belongs to an
      earlier transaction, delivered late;
    - "append" otherwise: the marker ends the producer's open transaction."""
    if coordinator_epoch < last_coordinator_epoch:
        return "coordinator-fenced"
    if epoch < partition_epoch:
        return "fenced"
    if "txn-epoch-bump" in fixes and open_epoch >= 0 and epoch <= open_epoch:
        return "fenced"
    return "append"


def txn_committed_offset(log: tuple, values: tuple, tid: int) -> int:
    """GroupMetadataManager with transactional offset commits (KIP-98, KIP-447): an offset
    committed in a transaction becomes the group's once its COMMIT marker is written (an aborted
    one is dropped); the last committed one wins. `values` gives each transaction's committed
    offset. 0 (the start of the input) when none."""
    fates = txn_fates(log)
    off = 0
    for o, (kind, t, _e, g, _b) in enumerate(log):
        if kind == 0 and t == tid and fates[o] == 1:
            off = values[g]
    return off


def promises_txn_atomicity(isolation: str) -> str | None:
    """KIP-98: a read_committed consumer sees all or none of a transaction's records and never an
    aborted one; read_uncommitted promises nothing of the kind."""
    if isolation == "read_committed":
        return None
    return "not promised: read_uncommitted returns open and aborted transactions' records"
