"""One pass over a history that groups operations by partition and derives, per partition,
the log as observed (offset -> value), which values were read, and the offsets' log order.
Every per-partition rule reads this; none re-derives it (one place per fact)."""
from __future__ import annotations

from dataclasses import dataclass, field

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

    def build(self) -> None:
        log, conflicts, first, dups = self.log, self.conflicts, self.first_offset, self.dups
        # Bulk paths (map/attrgetter/zip run in C); the per-record loops below only run when
        # something is out of the ordinary. This is most of the checkers' speed.
        self.acked = acked = [op for op in self.sends if op.type == "ok"]
        self.failed = [op for op in self.sends if op.type == "fail"]
        ack_offs, ack_vals = list(map(_OFFSET, acked)), list(map(_VALUE, acked))
        acks = list(zip(ack_offs, ack_vals))
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
        polls = self.polls
        offs_lists, vals_lists = list(map(_OFFSETS, polls)), list(map(_VALUES, polls))
        flat_o = list(chain.from_iterable(offs_lists))
        flat_v = list(chain.from_iterable(vals_lists))
        read = self.read
        read.update(flat_v)
        self.poll_max = poll_max = [max(o) if o else -1 for o in offs_lists]
        max_read = max(poll_max, default=-1)
        max_op = polls[poll_max.index(max_read)] if max_read >= 0 else None
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
        The lookup table is built on first use, once: witnesses cost O(1) each afterwards, so
        no rule is superlinear in the number of anomalies it reports."""
        if self._showing is None:
            showing: dict[tuple[int, str], list[Op]] = {}
            for op in self.acked:
                showing.setdefault((op.offset, op.value), []).append(op)
            for op in self.polls:
                for k in dict.fromkeys(zip(op.offsets, op.values)):
                    showing.setdefault(k, []).append(op)
            for ops in showing.values():
                ops.sort(key=_INV_ID)
            self._showing = showing
        return self._showing.get((offset, value), [])

    def polls_reading(self, value: str) -> list[Op]:
        if self._reading is None:
            reading: dict[str, list[Op]] = {}
            for op in self.polls:
                for v in dict.fromkeys(op.values):
                    reading.setdefault(v, []).append(op)
            self._reading = reading
        return self._reading.get(value, [])


@dataclass
class Index:
    parts: dict[str, Part]
    config: dict[int, dict]        # process -> its last producer_config
    group_of: dict[int, str]       # process -> consumer group (from its assign/subscribe)
    history: History

    def sorted_parts(self) -> list[Part]:
        return [self.parts[k] for k in sorted(self.parts)]


def build(history: History) -> Index:
    parts: dict[tuple, Part] = {}
    config: dict[int, dict] = {}
    group_of: dict[int, str] = {}
    for op in history.ops:
        f = op.f
        if f == "producer_config":
            if op.type != "fail":
                config[op.process] = op.config or {}
            continue
        key = (op.topic, op.partition)
        part = parts.get(key)
        if part is None:
            part = parts[key] = Part(f"{op.topic}-{op.partition}")
        if f == "send":
            part.sends.append(op)
        elif f == "poll":
            if op.type == "ok":
                part.polls.append(op)
                part.consumer_ops.append(op)
                if op.final:
                    part.finals.append(op)
        elif f == "commit":
            if op.type == "ok":
                part.commits.append(op)
        elif op.type != "fail":          # assign / subscribe
            part.assigns.append(op)
            part.consumer_ops.append(op)
            if op.group is not None:
                group_of[op.process] = op.group
    for part in parts.values():
        part.build()
    return Index({p.tp: p for p in parts.values()}, config, group_of, history)
