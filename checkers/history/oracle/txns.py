"""Transaction rules (format version 2), after KIP-98 and Jepsen's Kafka checker
(jepsen/tests/kafka.clj): a read_committed consumer never sees a record of an aborted
transaction (`G1a`, aborted read) nor one of a transaction not yet committed
(`precommitted-read`: a transaction reading its own records, or a poll that completed before
the commit was invoked); a committed transaction is all or nothing (`txn-atomicity`: one of its
records was read while another, passed over by a read, never was). Within one transaction,
successive sends to a partition that other records separate are an `int-send-skip`, which
Kafka permits (transactions' writes interleave), so a note; `int-nonmonotonic-send` and
`int-poll-skip` / `int-nonmonotonic-poll` are judged by log_checks' send and poll order rules.

Transactions, their outcomes and the proof of an unknown commit are index.Txn (one place)."""
from __future__ import annotations

from checkers.history.oracle.index import ABORTED, COMMITTED, Index, Part
from checkers.history.result import Anomaly
from traces.history import Op


def _reads(part: Part):
    """(poll, value) of every read_committed ok poll's record, in poll invoke order."""
    for p in part.polls:
        if p.isolation == "read_committed":
            for v in p.values:
                yield p, v


def aborted_reads(index: Index, part: Part) -> list[Anomaly]:
    """G1a: a read_committed poll returned a record of an aborted transaction."""
    out, seen = [], set()
    for p, v in _reads(part):
        s = part.send_of.get(v)
        t = index.txn_of(s) if s is not None else None
        if t is None or t.status != ABORTED or s.id in seen or p.txn == t.id:
            continue
        seen.add(s.id)
        how = (f"aborted (#{t.end.id} {t.end.f} {t.end.type})" if t.end is not None
               else "never committed")
        ids = _ids(s, p, *([t.end] if t.end is not None else []))
        out.append(Anomaly("G1a", ids, f"poll #{p.id} (read_committed) read {v!r} at offset "
                           f"{part.first_offset.get(v)} of {part.tp}, sent by #{s.id} in "
                           f"transaction {t.id}, which {how}.", part.tp))
    return out


def precommitted_reads(index: Index, part: Part) -> list[Anomaly]:
    """A read_committed poll returned a record before its transaction committed: inside the
    transaction that wrote it, or completing before the commit was invoked."""
    out, seen = [], set()
    for p, v in _reads(part):
        s = part.send_of.get(v)
        t = index.txn_of(s) if s is not None else None
        if t is None or s.id in seen:
            continue
        own = p.txn == t.id
        early = (t.end is not None and t.end.f == "txn_commit" and p.comp is not None
                 and p.comp < t.end.inv)
        if not (own or early):
            continue
        seen.add(s.id)
        if own:
            text = (f"poll #{p.id} (read_committed) of transaction {t.id} read its own record "
                    f"{v!r} (#{s.id}) of {part.tp}, which no read_committed consumer may see "
                    "before the transaction commits.")
            ids = _ids(s, p)
        else:
            text = (f"poll #{p.id} (read_committed) read {v!r} (#{s.id}) of {part.tp} and "
                    f"completed before transaction {t.id}'s commit #{t.end.id} was invoked.")
            ids = _ids(s, p, t.end)
        out.append(Anomaly("precommitted-read", ids, text, part.tp))
    return out


def atomicity(index: Index) -> list[Anomaly]:
    """A committed transaction one of whose records was read while another, at an offset
    below one some poll read, never was: it was partly visible (the lost record is also a
    lost-write)."""
    out = []
    for tid in sorted(index.txns):
        t = index.txns[tid]
        if t.status != COMMITTED:
            continue
        seen: Op | None = None
        missing: list[tuple[Op, Part]] = []
        for s in t.sends:
            part = index.parts.get(s.tp)
            if part is None or s.type == "fail":
                continue
            if s.value in part.read:
                seen = seen or next(iter(part.polls_reading(s.value)), None)
            else:
                off = s.offset
                if off is not None and off < part.max_read:
                    missing.append((s, part))
        if seen is None or not missing:
            continue
        s, part = missing[0]
        w = part.max_read_op
        out.append(Anomaly("txn-atomicity", _ids(s, seen, w),
                           f"transaction {t.id} committed and poll #{seen.id} read one of its "
                           f"records, but its record {s.value!r} (#{s.id}, offset {s.offset} of "
                           f"{part.tp}) was never read although poll #{w.id} read the later "
                           f"offset {part.max_read}: the transaction was only partly visible.",
                           ",".join(sorted({s.tp, seen.tp}))))
    return out


def send_skips(index: Index) -> list[Anomaly]:
    """Notes: successive sends of one transaction to one partition that other records
    separate in the log (Kafka permits it: transactions' writes interleave)."""
    out = []
    for tid in sorted(index.txns):
        t = index.txns[tid]
        prev: dict[str, tuple[Op, int]] = {}
        for s in t.sends:
            part = index.parts.get(s.tp)
            o = part.first_offset.get(s.value) if part is not None else None
            if o is None:
                continue
            r = part.ranks([o])[0]
            p = prev.get(s.tp)
            prev[s.tp] = (s, r)
            if p is None or r - p[1] <= 1:
                continue
            a = p[0]
            between = part.offset_at_rank(p[1] + 1)
            out.append(Anomaly("int-send-skip", _ids(a, s),
                               f"transaction {t.id} sent {a.value!r} (#{a.id}) and then "
                               f"{s.value!r} (#{s.id}) to {part.tp}, but {r - p[1] - 1} other "
                               f"record(s) lie between them in the log, such as offset {between} "
                               f"({part.log[between]!r}) — Kafka permits this (transactions' "
                               "writes interleave).", part.tp))
    return out


def check(index: Index) -> tuple[dict[str, list[Anomaly]], list[Anomaly]]:
    """(anomalies by check name, notes) of every transaction rule; nothing without
    transactions."""
    found: dict[str, list[Anomaly]] = {"writes": [], "sends": []}
    if not index.txns:
        return found, []
    for part in index.sorted_parts():
        found["writes"] += aborted_reads(index, part) + precommitted_reads(index, part)
    found["writes"] += atomicity(index)
    return found, send_skips(index)


def _ids(*ops: Op) -> tuple[int, ...]:
    seen: dict[int, Op] = {}
    for op in ops:
        seen[op.id] = op
    return tuple(o.id for o in sorted(seen.values(), key=lambda o: (o.inv, o.id)))
