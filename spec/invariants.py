"""Invariants as named predicates. Each returns None when it holds, or one sentence saying how it
is violated.

`scoped` invariants are durability promises Kafka makes only without unclean leader election:
under unclean election they are not checked. Power failure and disk loss are scoped per record
instead: Kafka does not fsync, so its promise is that a committed record survives unless every
replica holding it lost it (the `doomed` ghost of spec/state.py); every other record stays
checked after any number of lossy crashes. Log matching and epoch uniqueness are checked always.

The anchors (StrongIsr, LeaderCompleteness, LeaderCandidateCompleteness,
ReplicationQuorumSuperset, NoCommittedRecordLostGlobally) come from the published TLA+
specifications of Kafka replication: hachikuji/kafka-specification (Kip320FirstTry.tla,
KafkaReplication.tla) and Vanlightly/kafka-tlaplus (kafka_data_replication). "Committed"
records are those acknowledged with acks=all or ever exposed to consumers below a leader's HW.
"""
from __future__ import annotations

from typing import Callable, NamedTuple

from spec import rules
from spec.config import Config
from spec.codes import TXN_STATES
from spec.progress import election_progress, hw_progress
from spec.state import LEADER, State, bits, mask_str
from spec.transaction import coordinator, txn_state


class Invariant(NamedTuple):
    name: str
    doc: str
    check: Callable[[Config, State], str | None]
    scoped: bool   # only meaningful without unclean leader election
    counts_copies: bool = False   # a replica count: any power or disk loss may lower it (not checked after one)
    # A client promise: None when the configured clients are promised it, else why not (then
    # the invariant is off unless asked for by name). None here: a promise of the brokers.
    promise: Callable[[Config], str | None] | None = None


def _acting_leaders(s: State) -> tuple:
    """Brokers acting as the leader the coordination store names for the current epoch, as
    ((index, broker),): at most one, the broker the store names. A tuple, not a generator:
    eight invariants ask for it in every state."""
    zk = s.zk
    i = zk.leader
    if i >= 0:
        b = s.brokers[i]
        if b.alive and b.role == LEADER and b.le == zk.le:
            return ((i, b),)
    return ()


def hw_below_leo(cfg: Config, s: State) -> str | None:
    for i, b in enumerate(s.brokers):
        if b.hw > b.leo:
            return f"b{i} has hw {b.hw} above its log end {b.leo}"
    return None


def log_matching(cfg: Config, s: State) -> str | None:
    """Replicas that have joined the current leader epoch (accepted it, and truncated if they had
    to) agree below both HWs. A replica still catching up on an epoch change may carry a stale HW
    for a moment; it is judged once it has truncated."""
    bs = s.brokers
    le = s.zk.le
    cur = [i for i, b in enumerate(bs) if b.alive and b.role != 0 and not b.trunc and b.le == le]
    for x, i in enumerate(cur):
        for j in cur[x + 1:]:
            upto = min(bs[i].hw, bs[j].hw)
            for off in range(upto):
                if bs[i].log[off] != bs[j].log[off]:
                    return (f"b{i} and b{j} disagree at offset {off} below both high watermarks: "
                            f"r{bs[i].log[off][0]} vs r{bs[j].log[off][0]}")
    return None


def _records(b) -> int:
    have = 0
    for r, _ in b.log:
        have |= 1 << r
    return have


def _committed(s: State) -> int:
    """Records acknowledged with acks=all or exposed to consumers, minus the doomed."""
    m = s.acked
    for r in s.exposed:
        m |= 1 << r
    return m & ~s.doomed


def _rs(mask: int) -> str:
    return ", ".join(f"r{r}" for r in bits(mask))


def acked_durable(cfg: Config, s: State) -> str | None:
    for i, b in _acting_leaders(s):
        missing = s.acked & ~_records(b) & ~s.doomed
        if missing:
            return (f"record(s) {', '.join(f'r{r}' for r in bits(missing))} acknowledged with "
                    f"acks=all are missing from the leader b{i} (epoch {b.le})")
    return None


def consistent_reads(cfg: Config, s: State) -> str | None:
    for i, b in enumerate(s.brokers):
        if not (b.alive and b.role == LEADER):
            continue
        upto = min(b.hw, len(s.exposed))
        for off in range(upto):
            if (s.doomed >> s.exposed[off]) & 1:
                break           # a record lost everywhere to power loss: later offsets shift
            if b.log[off][0] != s.exposed[off]:
                return (f"consumers read r{s.exposed[off]} at offset {off}, but leader b{i} now "
                        f"serves r{b.log[off][0]} there")
    return None


def min_isr_durability(cfg: Config, s: State) -> str | None:
    """Copies on crashed brokers count: in the model a crashed broker's log is what its disk
    keeps (a power failure drops the unflushed suffix at the crash itself), and it returns with
    it. A replica count is lowered by any power or disk loss, which Kafka does not promise to
    survive, so this invariant is not checked once one happened; the per-record durability
    invariants are."""
    bs = s.brokers
    need = min(cfg.min_isr, cfg.brokers)
    for i, b in _acting_leaders(s):
        for off in range(b.hw):
            holders = sum(1 for o in bs if off < o.leo and o.log[off] == b.log[off])
            if holders < need:
                return (f"r{b.log[off][0]} at offset {off} is below leader b{i}'s high watermark "
                        f"but held by {holders} replica(s), fewer than min.insync.replicas={need}")
    return None


def strong_isr(cfg: Config, s: State) -> str | None:
    """StrongIsr (hachikuji/kafka-specification): every record below the leader's HW is on every
    member of the controller's ISR, at the same offset. A member that lost data in a crash is
    exempt until the controller removes it (it cannot be elected: it bounced)."""
    bs = s.brokers
    for i, b in _acting_leaders(s):
        for m in bits(s.zk.isr):
            if m == i or (s.damaged >> m) & 1:
                continue
            o = bs[m]
            for off in range(b.hw):
                if off >= o.leo or o.log[off] != b.log[off]:
                    have = f"r{o.log[off][0]}" if off < o.leo else "nothing"
                    return (f"r{b.log[off][0]} at offset {off} is below leader b{i}'s high watermark "
                            f"{b.hw}, but ISR member b{m} has {have} there")
    return None


def leader_completeness(cfg: Config, s: State) -> str | None:
    """LeaderCompleteness (Vanlightly/kafka-tlaplus): a running leader holds every acknowledged and
    every consumed record."""
    for i, b in _acting_leaders(s):
        missing = _committed(s) & ~_records(b)
        if missing:
            return (f"leader b{i} (epoch {b.le}) lacks committed record(s) {_rs(missing)}, "
                    f"acknowledged or already read by consumers")
    return None


def leader_candidate_completeness(cfg: Config, s: State) -> str | None:
    """LeaderCandidateCompleteness (Vanlightly/kafka-tlaplus): no running member of the
    controller's ISR — a replica the controller may elect — is missing a committed record."""
    committed = _committed(s)
    for m in bits(s.zk.isr):
        b = s.brokers[m]
        if not b.alive or not s.zk.sessions[m] or (s.damaged >> m) & 1:
            continue
        missing = committed & ~_records(b)
        if missing:
            return (f"ISR member b{m} could be elected but lacks committed record(s) {_rs(missing)}")
    return None


def replication_quorum_superset(cfg: Config, s: State) -> str | None:
    """ReplicationQuorumSuperset (Vanlightly/kafka-tlaplus): the leader's maximal ISR — the
    replicas it waits for — contains the controller's ISR, so no replica the controller may elect
    is left behind by the HW."""
    for i, b in _acting_leaders(s):
        mx = rules.maximal_isr(b, cfg.fixes)
        extra = s.zk.isr & ~mx
        if extra:
            return (f"controller's ISR has {mask_str(extra)} that leader b{i}'s maximal ISR "
                    f"{mask_str(mx)} does not wait for")
    return None


def no_committed_record_lost_globally(cfg: Config, s: State) -> str | None:
    """NoCommittedRecordLostGlobally: every committed record is on some replica's log (running
    or crashed), unless every holder lost it to power or disk loss."""
    held = 0
    for b in s.brokers:
        held |= _records(b)
    missing = _committed(s) & ~held
    if missing:
        return f"committed record(s) {_rs(missing)} are on no replica at all"
    return None


def unique_leader_per_epoch(cfg: Config, s: State) -> str | None:
    for e, m in enumerate(s.epoch_leaders):
        if m & (m - 1):         # two or more bits set
            return f"brokers {', '.join(f'b{x}' for x in bits(m))} both acted as leader of epoch {e}"
    return None


# --- client promises, judged on what consumers can read (the `exposed` prefix), which is what a
# client history's final reads show ---------------------------------------------------------------

def _producer_reads(s: State):
    """Per producer: the records of its batches in the readable prefix, in log order, as
    (record, offset)."""
    by: dict[int, list] = {}
    for off, r in enumerate(s.exposed):
        if r < len(s.writes):
            p, k, _, _ = s.writes[r]
            if p >= 0:
                by.setdefault(p, []).append((k, off))
    return by


def producer_send_order(cfg: Config, s: State) -> str | None:
    """Acknowledged records of a producer take offsets in send order: the offsets the producer
    was told (a retry answered as a duplicate gets the original's), as a client history shows
    them."""
    for p, pr in enumerate(s.prods):
        last = None
        for k, off in enumerate(pr.out):
            if off < 0:
                continue
            if last is not None and off < last[1]:
                return (f"producer p{p} sent record {last[0]} before record {k}, but they were "
                        f"acknowledged at offsets {last[1]} and {off}: out of send order")
            last = (k, off)
    return None


def producer_exactly_once(cfg: Config, s: State) -> str | None:
    """No record of a producer is in the log twice."""
    for p, recs in sorted(_producer_reads(s).items()):
        first: dict[int, int] = {}
        for k, off in recs:
            if k in first:
                return (f"producer p{p}'s record {k} is in the log twice, at offsets {first[k]} "
                        f"and {off}")
            first[k] = off
    return None


def producer_acked_durable(cfg: Config, s: State) -> str | None:
    """A record the producer was told is written (acks=1 or all) is in the current leader's log:
    the client's view of durability. Doomed records (every holder lost them to power or disk
    loss) are exempt, as in AckedDurable."""
    for i, b in _acting_leaders(s):
        have = _records(b) | s.doomed
        for p, pr in enumerate(s.prods):
            for k, off in enumerate(pr.out):
                if off < 0:
                    continue
                if not any(w[0] == p and w[1] == k and (have >> wid) & 1
                           for wid, w in enumerate(s.writes)):
                    return (f"producer p{p}'s record {k}, acknowledged at offset {off}, is missing "
                            f"from the leader b{i} (epoch {b.le})")
    return None


def group_fenced_never_commits(cfg: Config, s: State) -> str | None:
    """A member fenced by a rebalance never gets a commit acknowledged."""
    if s.grp and s.grp.fenced:
        return (f"a commit from a fenced generation was acknowledged (the group is at generation "
                f"{s.grp.gen})")
    return None


def group_committed_offset_never_back(cfg: Config, s: State) -> str | None:
    """The committed offset the coordinator serves is never below one already acknowledged,
    also after a coordinator fail-over (the new coordinator loads it from its log)."""
    if not s.grp:
        return None
    for i, b in _acting_leaders(s):
        off = max(0, rules.committed_offset_in_log(b.log, s.writes))
        if off < s.grp.hi:
            return (f"coordinator b{i} serves committed offset {off}, below the offset "
                    f"{s.grp.hi} already acknowledged to the group")
    return None


def group_single_owner(cfg: Config, s: State) -> str | None:
    """No two live members of one generation own the data partition."""
    if not s.grp:
        return None
    seen: dict[int, int] = {}
    for ci, c in enumerate(s.grp.cons):
        if c.alive and c.gen >= 0:
            if c.gen in seen:
                return f"consumers c{seen[c.gen]} and c{ci} both own the partition in generation {c.gen}"
            seen[c.gen] = ci
    return None


def group_at_least_once(cfg: Config, s: State) -> str | None:
    """Commit after processing: every record below an acknowledged committed offset was
    processed."""
    if not s.grp:
        return None
    for d in range(s.grp.hi):
        if not s.grp.processed[d]:
            return f"offset {s.grp.hi} is committed but record d{d} below it was never processed"
    return None


def group_at_most_once(cfg: Config, s: State) -> str | None:
    """Commit before processing: no record is processed twice."""
    if not s.grp:
        return None
    for d, n in enumerate(s.grp.processed):
        if n > 1:
            return f"record d{d} was processed twice"
    return None


# --- transactions (spec/transaction.py): the data partitions' logs as read_committed consumers
# will read them, against the ghost table of each transaction's outcome ----------------------------

def txn_atomic_visibility(cfg: Config, s: State) -> str | None:
    """KIP-98: a read_committed consumer sees all or none of a committed transaction's records,
    on every partition it wrote to, and never a record of an aborted or undecided one. A batch's
    fate is the next marker of its producer on that partition."""
    t = s.txn
    if not t:
        return None
    for d, log in enumerate(t.logs):
        for off, f in enumerate(rules.txn_fates(log)):
            if f <= 0:
                continue
            _, tid, e, g, _ = log[off]
            outcome = t.ghosts[g][2]
            if f == 1 and outcome != 1:
                return (f"d{d} offset {off}: a record of transaction T{g} (t{tid}, epoch {e}) is "
                        f"committed for read_committed consumers, but T{g} "
                        + ("was aborted" if outcome == 2 else "has not committed"))
            if f == 2 and outcome == 1:
                return (f"transaction T{g} committed, but its record at d{d} offset {off} was "
                        f"aborted: read_committed consumers see only part of it")
    return None


def txn_no_hanging_transaction(cfg: Config, s: State) -> str | None:
    """No partition holds an open transactional batch that its coordinator will not end: the
    coordinator has no ongoing (or preparing) transaction for that id holding the partition, so
    no marker comes and the LSO is stuck (KIP-664's hanging transaction)."""
    cb = coordinator(s) if s.txn else -1
    if cb < 0:
        return None
    for d, log in enumerate(s.txn.logs):
        for tid in sorted({e[1] for e in log}):
            first = rules.txn_partition_state(log, tid)[1]
            if first < 0:
                continue
            _e, st, parts, _g, _c = txn_state(s, cb, tid)
            if not (st in (1, 2, 3) and (parts >> d) & 1):
                return (f"d{d} holds t{tid}'s open batch at offset {first} (transaction "
                        f"T{log[first][3]}), but the coordinator's t{tid} is {TXN_STATES[st]}"
                        f"{' without d' + str(d) if st in (1, 2, 3) else ''}: no marker will end "
                        f"it, the LSO is stuck at {first}")
    return None


def txn_zombie_fenced(cfg: Config, s: State) -> str | None:
    """KIP-98's zombie fencing: once a newer instance of a transactional.id got its epoch,
    nothing the older instance writes, or commits, is ever committed."""
    t = s.txn
    if not t:
        return None
    for g, (tid, inst, outcome, zombie, _inp) in enumerate(t.ghosts):
        if outcome == 1 and zombie:
            return f"transaction T{g} of the fenced instance t{tid}#{inst} was committed"
    for d, log in enumerate(t.logs):
        for off, f in enumerate(rules.txn_fates(log)):
            if f == 1 and log[off][4]:
                return (f"d{d} offset {off}: a record the fenced instance of t{log[off][1]} wrote "
                        f"is committed")
    return None


def txn_exactly_once(cfg: Config, s: State) -> str | None:
    """Consume-transform-produce (KIP-98, KIP-447): every input offset below the group's
    committed offset has its output exactly once in committed data, on every output partition
    (a batch counts once its transaction committed: its marker may still be on its way)."""
    t = s.txn
    if not t or not cfg.consume_transform_produce:
        return None
    p = cfg.txn_partitions
    values = tuple(g[4] + 1 for g in t.ghosts)
    for tid in range(cfg.transactions):
        committed = rules.txn_committed_offset(t.logs[p], values, tid)
        for d in range(p):
            log = t.logs[d]
            fates = rules.txn_fates(log)
            for i in range(committed):
                # committed, or of a committed transaction whose marker is on its way
                n = sum(1 for o, e in enumerate(log) if e[0] == 0 and e[1] == tid
                        and t.ghosts[e[3]][4] == i
                        and (fates[o] == 1 or fates[o] == 0 and t.ghosts[e[3]][2] == 1))
                if n != 1:
                    return (f"t{tid}'s input offset {i} is below its committed offset {committed} "
                            f"but its output is committed {n} times on d{d}")
    return None


def txn_lso_monotonic(cfg: Config, s: State) -> str | None:
    """A partition's last stable offset never goes back (read_committed consumers have read up
    to it)."""
    t = s.txn
    if not t:
        return None
    for d, log in enumerate(t.logs):
        lso = rules.last_stable_offset(log)
        if lso < t.lso[d]:
            return f"d{d}'s last stable offset went back from {t.lso[d]} to {lso}"
    return None


# --- internal consistency -------------------------------------------------------------------
# The model's own bookkeeping, which no client-visible invariant watches directly: a change that
# breaks it would otherwise go unnoticed unless it happened to reach a durability invariant within
# the bounds. Cheap (linear in the logs), never scoped, true in every generation.

def epoch_cache_matches_log(cfg: Config, s: State) -> str | None:
    """The leader-epoch cache describes the log it sits beside (LeaderEpochFileCache): epochs and
    start offsets strictly increase, no entry starts past the LEO (a new leader's entry may start
    at it), and every record's epoch is the epoch of the last entry starting at or before it."""
    for i, b in enumerate(s.brokers):
        c = b.cache
        for k in range(1, len(c)):
            if not (c[k - 1][0] < c[k][0] and c[k - 1][1] < c[k][1]):
                return f"b{i}'s epoch cache {c} does not strictly increase"
        if c and c[-1][1] > b.leo:
            return f"b{i}'s epoch cache entry {c[-1]} starts past its log end {b.leo}"
        k = -1
        for off, (r, e) in enumerate(b.log):
            while k + 1 < len(c) and c[k + 1][1] <= off:
                k += 1
            if k < 0 or c[k][0] != e:
                have = f"epoch {c[k][0]}" if k >= 0 else "no entry"
                return f"b{i} has r{r}@e{e} at offset {off} but its epoch cache says {have} there"
    return None


def fetch_response_matches_epoch(cfg: Config, s: State) -> str | None:
    """An in-flight fetch response was sent by the leader of the epoch it carries, holds records
    of that epoch or older, a high watermark within what it describes, and -- while its sender
    still leads that epoch -- the sender's records at those offsets."""
    for i, b in enumerate(s.brokers):
        if not b.fetch:
            continue
        src, le, off, recs, hw, oor = b.fetch
        if le >= len(s.epoch_leaders) or not (s.epoch_leaders[le] >> src) & 1:
            return f"b{i}'s fetch response carries epoch {le}, which its sender b{src} never led"
        if oor and recs:
            return f"b{i}'s out-of-range fetch response carries records"
        prev = -1
        for r, e in recs:
            if e > le or e < prev:
                return f"b{i}'s fetch response of epoch {le} carries r{r}@e{e} out of epoch order"
            prev = e
        if hw > off + len(recs):
            return f"b{i}'s fetch response has hw {hw} past the log end {off + len(recs)} it describes"
        ld = s.brokers[src]
        if ld.alive and ld.role == LEADER and ld.le == le and ld.log[off:off + len(recs)] != recs:
            return f"b{i}'s fetch response differs from leader b{src}'s log of epoch {le} at offset {off}"
    return None


def pending_isr_matches_role(cfg: Config, s: State) -> str | None:
    """Only a running leader has an ISR proposal, a quoted broker epoch or an AlterIsr response in
    flight, and a proposal never leaves the leader itself out."""
    for i, b in enumerate(s.brokers):
        if b.role != LEADER or not b.alive:
            if b.pending >= 0 or b.pend_gen or b.resp != -1:
                return f"b{i} is not a running leader but has ISR proposal state (pending {b.pending})"
            continue
        if b.pending >= 0 and not (b.pending >> i) & 1:
            return f"leader b{i}'s proposed ISR {mask_str(b.pending)} leaves itself out"
        if b.pend_gen and b.pending < 0:
            return f"leader b{i} quotes a broker epoch for no proposal"
    return None


INVARIANTS: tuple[Invariant, ...] = (
    Invariant("HwBelowLeo", "every replica's HW is at most its LEO", hw_below_leo, False),
    Invariant("LogMatching", "two replicas agree on every offset below both their HWs",
              log_matching, False),
    Invariant("UniqueLeaderPerEpoch", "at most one broker ever leads a given leader epoch",
              unique_leader_per_epoch, False),
    Invariant("AckedDurable", "the current leader holds every record acknowledged with acks=all",
              acked_durable, True),
    Invariant("ConsistentReads", "records exposed below a leader's HW never change",
              consistent_reads, True),
    Invariant("MinIsrDurability", "records below the leader's HW are on min.insync.replicas replicas",
              min_isr_durability, True, counts_copies=True),
    Invariant("StrongIsr", "every record below the leader's HW is on every member of the "
              "controller's ISR", strong_isr, True),
    Invariant("LeaderCompleteness", "the leader holds every acknowledged and every consumed record",
              leader_completeness, True),
    Invariant("LeaderCandidateCompleteness", "no running ISR member misses a committed record",
              leader_candidate_completeness, True),
    Invariant("ReplicationQuorumSuperset", "the leader's maximal ISR contains the controller's ISR",
              replication_quorum_superset, False),
    Invariant("NoCommittedRecordLostGlobally", "every committed record is on some replica",
              no_committed_record_lost_globally, True),
    Invariant("ProducerSendOrder", "per producer and partition, acknowledged records appear in "
              "send order", producer_send_order, False,
              promise=lambda c: rules.promises_send_order(c.fixes, c.max_in_flight, c.retries)),
    Invariant("ProducerExactlyOnce", "per producer and partition, each record is written once",
              producer_exactly_once, False,
              promise=lambda c: rules.promises_exactly_once(c.fixes, c.retries)),
    Invariant("ProducerAckedDurable", "per producer, every record acknowledged to it is in the "
              "leader's log", producer_acked_durable, True,
              promise=lambda c: rules.promises_acked_durable(c.acks)),
    Invariant("GroupFencedNeverCommits", "a fenced generation never commits",
              group_fenced_never_commits, False, promise=lambda c: None),
    Invariant("GroupCommittedOffsetNeverBack", "committed offsets of a group never go back, also "
              "across a coordinator fail-over", group_committed_offset_never_back, True,
              promise=lambda c: None),
    Invariant("GroupSingleOwner", "no two live members of one generation own a partition",
              group_single_owner, False, promise=lambda c: None),
    Invariant("GroupAtLeastOnce", "commit after processing: every record below the committed "
              "offset was processed", group_at_least_once, False,
              promise=lambda c: rules.promises_delivery(c.commit, "at-least-once")),
    Invariant("GroupAtMostOnce", "commit before processing: no record is processed twice",
              group_at_most_once, False,
              promise=lambda c: rules.promises_delivery(c.commit, "at-most-once")),
    Invariant("TxnAtomicVisibility", "read_committed consumers see all or none of a committed "
              "transaction and nothing of an aborted one", txn_atomic_visibility, False,
              promise=lambda c: rules.promises_txn_atomicity(c.isolation)),
    Invariant("TxnNoHangingTransaction", "no partition holds an open transactional batch its "
              "coordinator will not end", txn_no_hanging_transaction, False, promise=lambda c: None),
    Invariant("TxnZombieFenced", "nothing a fenced producer instance writes is committed",
              txn_zombie_fenced, False, promise=lambda c: None),
    Invariant("TxnExactlyOnce", "consume-transform-produce: each input below the committed "
              "offset has its output exactly once", txn_exactly_once, False,
              promise=lambda c: None if c.consume_transform_produce else
              "not promised: no consume-transform-produce"),
    Invariant("TxnLsoMonotonic", "a partition's last stable offset never goes back",
              txn_lso_monotonic, False, promise=lambda c: None),
    Invariant("EpochCacheMatchesLog", "each leader-epoch cache describes its log",
              epoch_cache_matches_log, False),
    Invariant("FetchResponseMatchesEpoch", "an in-flight fetch response is its epoch's leader's",
              fetch_response_matches_epoch, False),
    Invariant("PendingIsrMatchesRole", "only a running leader has an ISR proposal in flight",
              pending_isr_matches_role, False),
)
# Progress properties (bounded liveness, spec/progress.py): under no further fault, progress
# that is due happens within a bounded number of steps. Checked wherever the invariants are.
PROGRESS: tuple[Invariant, ...] = (
    Invariant("HwProgress", "a leader whose ISR of at least min.insync.replicas members all hold "
              "its log advances its HW to its log end within 2 fetch steps per follower",
              hw_progress, False),
    Invariant("ElectionProgress", "a partition without a live leader but with a live eligible ISR "
              "member gets a leader within 2 controller steps", election_progress, False),
)
INVARIANTS = INVARIANTS + PROGRESS

INVARIANT_NAMES = tuple(inv.name for inv in INVARIANTS)
CLIENT_INVARIANTS = tuple(i.name for i in INVARIANTS if i.promise is not None)


def applies(inv: Invariant, cfg: Config) -> bool:
    """A client invariant needs its clients: the producers' without producers is vacuous."""
    if inv.promise is None:
        return True
    if inv.name.startswith("Producer"):
        return bool(cfg.producers)
    if inv.name == "TxnExactlyOnce":
        return bool(cfg.transactions and cfg.consume_transform_produce)
    if inv.name.startswith("Txn"):
        return bool(cfg.transactions)
    return bool(cfg.consumers)


def unpromised(cfg: Config) -> dict[str, str]:
    """Client invariants these settings make no promise of, with the reason (they are off
    unless asked for by name: "can my settings reorder?" is then the question)."""
    return {inv.name: why for inv in INVARIANTS if inv.promise is not None and applies(inv, cfg)
            and (why := inv.promise(cfg)) is not None}


def active(cfg: Config) -> tuple[Invariant, ...]:
    """The invariants that must hold under this config (scoped ones drop out under unclean;
    client ones without their clients, or where the settings promise nothing)."""
    off = unpromised(cfg)
    return tuple(inv for inv in INVARIANTS if not (inv.scoped and cfg.unclean)
                 and applies(inv, cfg) and inv.name not in off)


def selected(cfg: Config, names: tuple[str, ...] | None) -> tuple[Invariant, ...]:
    """The invariants to check: the active ones, or those named (a client invariant named
    explicitly is checked even where the settings do not promise it)."""
    if names is None:
        return active(cfg)
    act = {i.name for i in active(cfg)}
    return tuple(i for i in INVARIANTS if i.name in names
                 and (i.name in act or (i.promise is not None and applies(i, cfg))))


def violated(cfg: Config, s: State, invs: tuple[Invariant, ...] | None = None) -> tuple[str, str] | None:
    """First violated invariant as (name, sentence), or None."""
    lossy = s.lossy
    for inv in invs if invs is not None else active(cfg):
        if lossy and inv.counts_copies:
            continue
        msg = inv.check(cfg, s)
        if msg is not None:
            return inv.name, msg
    return None


def step_violation(cfg: Config, s: State, t: State) -> tuple[str, str] | None:
    """MonotonicEpochs, a property of transitions: while a broker stays up, the leader epoch and
    controller epoch it has seen never decrease."""
    for i, (a, b) in enumerate(zip(s.brokers, t.brokers)):
        if a is b:              # a broker the step left alone (most of them, in most steps)
            continue
        if a.alive and b.alive and a.gen == b.gen:
            if b.le < a.le:
                return "MonotonicEpochs", f"b{i}'s leader epoch went back from {a.le} to {b.le}"
            if b.ce < a.ce:
                return "MonotonicEpochs", f"b{i}'s controller epoch went back from {a.ce} to {b.ce}"
    return None
