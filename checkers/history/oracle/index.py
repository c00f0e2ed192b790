"""One pass over a history that groups operations by partition and derives, per partition,
the log as observed (offset -> value), which values were read, and the offsets' log order.
Every per-partition rule reads this; none re-derives it (one place per fact)."""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from bisect import bisect_right
from itertools import accumulate, chain, compress, count
from operator import attrgetter, ne

from traces.history import History, Op

_OFFSET, _VALUE = attrgetter("offset"), attrgetter("value")
_OFFSETS, _VALUES = attrgetter("offsets"), attrgetter("values")


def _INV_ID(op: Op) -> tuple[int, int]:
    return (op.inv, op.id)


def _record(log: dict, first: dict, conflicts: dict, dups: dict, o: int, v) -> None:
    """Records value v at offset o: keeps the first value per offset and the first offset per
    value, noting a second one as a conflict (one offset, two values) or a duplicate."""
    w = log.setdefault(o, v)
    if w != v and o not in conflicts:
        conflicts[o] = v
    u = first.setdefault(v, o)
    if u != o and v not in dups:
        dups[v] = o


@dataclass
class Part:
    tp: str
    sends: list[Op] = field(default_factory=list)      # every send, any outcome, by invoke time
    polls: list[Op] = field(default_factory=list)      # ok polls, by invoke time
    assigns: list[Op] = field(default_factory=list)    # ok/info assign+subscribe, by invoke time
    consumer_ops: list[Op] = field(default_factory=list)  # ok polls and assigns, by invoke time
    commits: list[Op] = field(default_factory=list)    # ok commits, by invoke time
    # Derived by build():
    log: dict[int, str] = field(default_factory=dict)  # first value observed at each offset
    conflicts: dict[int, str] = field(default_factory=dict)  # offset -> a second, different value
    first_offset: dict[str, int] = field(default_factory=dict)  # value -> first offset observed
    dups: dict[str, int] = field(default_factory=dict)  # value -> a second, different offset
    read: set[str] = field(default_factory=set)         # values some poll returned
    max_read: int = -1                                   # highest offset some poll returned
    max_read_op: Op | None = None
    unread_acks: list[Op] = field(default_factory=list)   # ok sends whose value no poll returned
    acked: list[Op] = field(default_factory=list)         # ok sends, by invoke time
    # Unacknowledged sends that carry an offset and are proven to have happened (their value
    # was read, or their transaction is committed): their records are placed at that offset.
    proven: list[Op] = field(default_factory=list)
    evidence: list[Op] = field(default_factory=list)      # info/fail polls that carry records
    failed: list[Op] = field(default_factory=list)        # fail sends
    finals: list[Op] = field(default_factory=list)        # ok final polls
    _send_of: dict[str, Op] | None = None
    poll_max: list[int] = field(default_factory=list)     # per poll (parallel): highest offset, -1 if empty
    # (poll, offset, value) of every record that disagrees with the acknowledgements
    odd_records: list[tuple[Op, int, str]] = field(default_factory=list)
    _rank: dict[int, int] | None = None
    _dense_base: int | None = None
    _sorted_offsets: list[int] | None = None
    _showing: dict[tuple[int, str], list[Op]] | None = None
    _reading: dict[str, list[Op]] | None = None
    _scans: int = 0
    _scans_r: int = 0
    unread_proven: list[Op] = field(default_factory=list)
    held: set[int] = field(default_factory=set)   # ok polls that do not move their consumer

    def build(self) -> None:
        log, conflicts, first, dups = self.log, self.conflicts, self.first_offset, self.dups
        # Bulk paths (map/attrgetter/zip run in C); the per-record loops below only run when
        # something is out of the ordinary. This is most of the checkers' speed.
        self.acked = acked = [op for op in self.sends if op.type == "ok"]
        self.failed = [op for op in self.sends if op.type == "fail"]
        ack_offs, ack_vals = list(map(_OFFSET, acked)), list(map(_VALUE, acked))
        acks = list(zip(ack_offs, ack_vals))
        if self.proven:
            # Proven unacknowledged sends put their records at their offsets (after the
            # acknowledgements: a contradiction with one is noted as a conflict or duplicate).
            acks += [(op.offset, op.value) for op in self.proven]
        log.update(acks)
        first.update(zip(ack_vals, ack_offs))
        if len(log) != len(acks) or len(first) != len(acks):
            # Some offset or value repeats among acknowledgements: redo it record by record,
            # keeping the first and noting the second (rare; the bulk path above is C-level).
            log.clear()
            first.clear()
            for o, v in acks:
                _record(log, first, conflicts, dups, o, v)
        # Polls, in bulk: flatten every record of the partition once.
        # Records of polls that ended info or fail are evidence of the log too (the poller must
        # return only real records whatever its own outcome); they never advance a consumer.
        polls = self.polls + self.evidence if self.evidence else self.polls
        offs_lists, vals_lists = list(map(_OFFSETS, polls)), list(map(_VALUES, polls))
        flat_o = list(chain.from_iterable(offs_lists))
        flat_v = list(chain.from_iterable(vals_lists))
        read = self.read
        read.update(flat_v)
        all_max = [max(o) if o else -1 for o in offs_lists]
        self.poll_max = poll_max = all_max[:len(self.polls)]
        max_read = max(all_max, default=-1)
        max_op = polls[all_max.index(max_read)] if max_read >= 0 else None
        got = list(map(log.get, flat_o))
        if got != flat_v:
            # Records that disagree with the acknowledgements (an unacknowledged send's offset,
            # or a contradiction) go one by one, in poll order; the rest need nothing.
            ends = list(accumulate(map(len, offs_lists)))
            odd = self.odd_records
            for i in compress(count(), map(ne, got, flat_v)):
                o, v = flat_o[i], flat_v[i]
                odd.append((polls[bisect_right(ends, i)], o, v))
                _record(log, first, conflicts, dups, o, v)
        self.max_read, self.max_read_op = max_read, max_op
        unread = set(ack_vals).difference(read)
        self.unread_acks = [op for op in acked if op.value in unread] if unread else []
        # Proven but unread: lost below the highest offset read (they have no acknowledgement
        # time, so they are never judged unseen).
        self.unread_proven = [op for op in self.proven if op.value not in read]
        if log:
            lo, hi = min(log), max(log)
            if hi - lo + 1 == len(log):
                self._dense_base = lo   # offsets are contiguous: rank = offset - base, no map

    def ranks(self, offsets: list[int]) -> list[int]:
        """Positions in log order (Jepsen's version order): gaps in raw offsets that no one
        observed (transaction markers, compaction, writes we never heard of) are not skips."""
        if self._dense_base is not None:
            b = self._dense_base
            return [o - b for o in offsets] if b else offsets
        if self._rank is None:
            self._rank = {o: i for i, o in enumerate(sorted(self.log))}
        r = self._rank
        return [r[o] for o in offsets]

    @property
    def send_of(self) -> dict[str, Op]:
        """value -> its send (built on first use: only odd records and cycles need it)."""
        if self._send_of is None:
            self._send_of = dict(zip(map(_VALUE, self.sends), self.sends))
        return self._send_of

    def offset_at_rank(self, rank: int) -> int:
        if self._dense_base is not None:
            return self._dense_base + rank
        if self._sorted_offsets is None:     # once, not once per anomaly
            self._sorted_offsets = sorted(self.log)
        return self._sorted_offsets[rank]

    def ops_showing(self, offset: int, value: str) -> list[Op]:
        """Operations that show `value` at `offset` (send ack or poll record), by invoke time.
        The first SCANNED_LOOKUPS lookups scan the partition's operations (no table: a
        history with one anomaly builds none, so its witness costs one pass over lists);
        later ones use a lookup table built once: witnesses then cost O(1) each, so no rule
        is superlinear in the number of anomalies it reports."""
        if self._showing is None and self._scans < SCANNED_LOOKUPS:
            self._scans += 1
            found = [op for op in self.acked + self.proven if op.offset == offset and op.value == value]
            found += [op for op in self.polls + self.evidence
                      if offset in op.offsets and (offset, value) in zip(op.offsets, op.values)]
            found.sort(key=_INV_ID)
            return found
        if self._showing is None:
            showing: dict[tuple[int, str], list[Op]] = {}
            for op in self.acked + self.proven:
                showing.setdefault((op.offset, op.value), []).append(op)
            for op in self.polls + self.evidence:
                for k in dict.fromkeys(zip(op.offsets, op.values)):
                    showing.setdefault(k, []).append(op)
            for ops in showing.values():
                ops.sort(key=_INV_ID)
            self._showing = showing
        return self._showing.get((offset, value), [])

    def polls_reading(self, value: str) -> list[Op]:
        """Polls that returned `value`, by invoke order; scanned for the first
        SCANNED_LOOKUPS lookups, then from a table built once (as ops_showing)."""
        if self._reading is None and self._scans_r < SCANNED_LOOKUPS:
            self._scans_r += 1
            return [op for op in self.polls + self.evidence if value in op.values]
        if self._reading is None:
            reading: dict[str, list[Op]] = {}
            for op in self.polls + self.evidence:
                for v in dict.fromkeys(op.values):
                    reading.setdefault(v, []).append(op)
            self._reading = reading
        return self._reading.get(value, [])


# Lookups of ops_showing / polls_reading per partition answered by a scan before the table is
# built: a few anomalies' witnesses cost a few passes over the partition's operations, not a
# table of every record.
SCANNED_LOOKUPS = 4


COMMITTED, ABORTED, UNKNOWN = "committed", "aborted", "unknown"


@dataclass
class Txn:
    """One transaction (format version 2): its operations, its end and its outcome.
    committed: txn_commit ok, or proven by a read_committed poll that read one of its records
    (`proof`); aborted: txn_abort, a failed txn_commit, or no commit at all (the coordinator
    aborts it); unknown: txn_commit info (or never completed) and nothing read proves it."""
    id: int
    process: int
    ops: list[Op] = field(default_factory=list)      # by invoke time; its end last
    end: Op | None = None                            # txn_commit or txn_abort
    status: str = ABORTED
    proof: Op | None = None                          # the poll that proves an unknown commit

    @property
    def sends(self) -> list[Op]:
        return [o for o in self.ops if o.f == "send"]

    @property
    def polls(self) -> list[Op]:
        return [o for o in self.ops if o.f == "poll"]


@dataclass
class Index:
    parts: dict[str, Part]
    config: dict[int, dict]        # process -> its last producer_config
    group_of: dict[int, str]       # process -> consumer group (from its assign/subscribe)
    history: History
    txns: dict[int, Txn] = field(default_factory=dict)

    def sorted_parts(self) -> list[Part]:
        return [self.parts[k] for k in sorted(self.parts)]

    def txn_of(self, op: Op) -> Txn | None:
        return self.txns.get(op.txn) if op.txn is not None else None


def _txns(history: History) -> dict[int, Txn]:
    """Transactions and their outcomes; an unknown commit is proven by a read_committed ok
    poll returning one of its records (Jepsen's must-have-committed?)."""
    txns: dict[int, Txn] = {}
    for op in history.ops:
        if op.txn is None:
            continue
        t = txns.get(op.txn)
        if t is None:
            t = txns[op.txn] = Txn(op.txn, op.process)
        t.ops.append(op)
        if op.f in ("txn_commit", "txn_abort"):
            t.end = op
    if not txns:
        return txns
    for t in txns.values():
        e = t.end
        if e is not None and e.f == "txn_commit":
            t.status = COMMITTED if e.type == "ok" else UNKNOWN if e.type == "info" else ABORTED
    pending = {(s.topic, s.partition, s.value): t for t in txns.values() if t.status == UNKNOWN
               for s in t.sends if s.type != "fail"}
    if pending:
        for op in history.ops:
            if op.f == "poll" and op.type == "ok" and op.isolation == "read_committed":
                for v in op.values:
                    t = pending.get((op.topic, op.partition, v))
                    if t is not None and t.status == UNKNOWN and t is not txns.get(op.txn):
                        t.status, t.proof = COMMITTED, op
    return txns


def _effective_send(op: Op, txns: dict[int, Txn]) -> Op:
    """A transactional send as the per-partition rules see it: a committed transaction's
    sends as recorded; the others may or may not be visible (an aborted transaction's
    records are in the log, hidden from read_committed consumers), like an info send."""
    t = txns.get(op.txn) if op.txn is not None else None
    if t is None or t.status == COMMITTED or op.type == "fail":
        return op
    return replace(op, type="info", comp=None)


def _assignment_resets(history: History) -> dict[tuple, list[Op]]:
    """Format version 2: the assign/subscribe events of one process invoked at one mono_ns
    are one assignment, which replaces the consumer's whole set: a partition it does not list
    is revoked (its position forgotten), one it lists keeps the position the consumer had
    (as Kafka keeps a retained partition's position, and as Jepsen's checker keeps the last
    reads of the keys still assigned). Returns, per (topic, partition), the assignment
    operations that reset a consumer's position there (an assignment's first operation
    stands for it)."""
    groups: dict[tuple[int, int], list[Op]] = {}
    touched: dict[int, set[tuple]] = {}
    for op in history.ops:
        if op.f in ("assign", "subscribe") and op.type != "fail":
            groups.setdefault((op.process, op.inv), []).append(op)
        elif op.f == "poll":
            touched.setdefault(op.process, set()).add((op.topic, op.partition))
    out: dict[tuple, list[Op]] = {}
    for (proc, _), ops in sorted(groups.items(), key=lambda kv: (kv[0][1], kv[1][0].id)):
        now = {(o.topic, o.partition) for o in ops if o.topic is not None}
        for key in sorted(touched.get(proc, set()) - now, key=repr):
            out.setdefault(key, []).append(ops[0])
    return out


def build(history: History) -> Index:
    parts: dict[tuple, Part] = {}
    config: dict[int, dict] = {}
    group_of: dict[int, str] = {}
    v2 = history.header.get("version", 1) >= 2
    txns = _txns(history) if v2 else {}

    def part_of(op: Op) -> Part:
        key = (op.topic, op.partition)
        part = parts.get(key)
        if part is None:
            part = parts[key] = Part(f"{op.topic}-{op.partition}")
        return part

    for op in history.ops:
        f = op.f
        if f == "producer_config":
            if op.type != "fail":
                config[op.process] = op.config or {}
            continue
        if f in ("txn_commit", "txn_abort"):
            continue
        if f in ("assign", "subscribe") and op.topic is None:
            if op.type != "fail" and op.group is not None:
                group_of[op.process] = op.group
            continue
        part = part_of(op)
        if f == "send":
            part.sends.append(_effective_send(op, txns) if txns else op)
        elif f == "poll":
            if op.type == "ok":
                part.polls.append(op)
                part.consumer_ops.append(op)
                if op.final:
                    part.finals.append(op)
            elif op.offsets:
                part.evidence.append(op)
                part.consumer_ops.append(op)
        elif f == "commit":
            # A transactional offset commit (sendOffsetsToTransaction) takes effect with its
            # transaction: only a committed one's counts.
            if op.type == "ok" and (op.txn is None or _committed(op, txns)):
                part.commits.append(op)
        elif op.type != "fail":          # assign / subscribe
            part.assigns.append(op)
            if not v2:
                part.consumer_ops.append(op)
            if op.group is not None:
                group_of[op.process] = op.group
    if v2:
        for key, resets in _assignment_resets(history).items():
            part = parts.get(key)
            if part is None:
                continue
            part.consumer_ops = sorted(part.consumer_ops + resets, key=_INV_ID)
    for part in parts.values():
        if txns:
            # A poll inside a transaction that was not acknowledged committed does not move
            # its consumer: the client goes back to the last committed position (Jepsen's
            # reading of an aborted or crashed transaction).
            part.held = {p.id for p in part.polls if p.txn is not None
                         and not (txns[p.txn].end is not None and txns[p.txn].end.f == "txn_commit"
                                  and txns[p.txn].end.type == "ok")}
        if any(s.type == "info" and s.offset is not None for s in part.sends):
            read = {v for p in part.polls + part.evidence for v in p.values}
            part.proven = [s for s in part.sends if s.type == "info" and s.offset is not None
                           and (s.value in read or _committed(s, txns))]
        part.build()
    return Index({p.tp: p for p in parts.values()}, config, group_of, history, txns)


def _committed(op: Op, txns: dict[int, Txn]) -> bool:
    t = txns.get(op.txn) if op.txn is not None else None
    return t is not None and t.status == COMMITTED
