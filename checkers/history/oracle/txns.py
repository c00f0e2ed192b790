"""Transaction rules (format version 2), after KIP-98 and Jepsen's Kafka checker
(jepsen/tests/kafka.clj): a read_committed consumer never sees a record of an aborted
transaction (`G1a`, aborted read) nor one of a transaction not yet committed
(`precommitted-read`: a transaction reading its own records, or a poll that completed before
the commit was invoked); a committed transaction is all or nothing (`txn-atomicity`: one of its
records was read while another, passed over by a read, never was). Within one transaction,
successive sends to a partition that other records separate are an `int-send-skip`, which
Kafka permits (transactions' writes interleave), so a note; `int-nonmonotonic-send` and
`int-poll-skip` / `int-nonmonotonic-poll` are judged by log_checks' send and poll order rules.
A producer fenced by a newer incarnation of its transactional_id must not commit
(`zombie-commit`).

Transactions, their outcomes and the proof of an unknown commit are index.Txn (one place)."""
from __future__ import annotations

from checkers.history.oracle.index import ABORTED, COMMITTED, Index, Part, Txn
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


def zombie_commits(index: Index) -> list[Anomaly]:
    """`zombie-commit`: a transaction of a producer that a newer incarnation of its
    transactional_id had fenced was committed (acknowledged, or proven by a read_committed
    read). A process is one incarnation; its InitProducerId falls between its producer_config's
    invoke and its first transactional operation's invoke (F), and bumps the epoch, so from the
    newer incarnation's F on the older one's EndTxn is refused. Two rules, both sound:
    - known order: B's producer_config was invoked after A's F (A initialised first), so A's
      transactions whose commit was invoked after B's F must not commit;
    - unknown order: A and B both began transactions (F_A, F_B); after both, one of them is
      fenced, so two committed transactions, one of each, both with commits invoked after
      max(F_A, F_B), include a zombie's."""
    if not index.txns:
        return []
    inc: dict[int, tuple[str, Op]] = {}          # process -> (transactional_id, producer_config)
    for op in index.history.ops:
        if op.f == "producer_config" and op.type != "fail" and op.process not in inc:
            tid = (op.config or {}).get("transactional_id")
            if tid is not None:
                inc[op.process] = (tid, op)
    first: dict[int, Op] = {}                    # process -> its first transactional operation
    commits: dict[int, list[Txn]] = {}           # process -> its committed transactions
    for t in index.txns.values():
        o = t.ops[0]
        if t.process not in first or (o.inv, o.id) < (first[t.process].inv, first[t.process].id):
            first[t.process] = o
        if t.status == COMMITTED and t.end is not None and t.end.f == "txn_commit":
            commits.setdefault(t.process, []).append(t)
    by_tid: dict[str, list[int]] = {}
    for proc in sorted(inc):
        if proc in first:
            by_tid.setdefault(inc[proc][0], []).append(proc)
    out = []
    for tid in sorted(by_tid):
        procs = by_tid[tid]
        done: set[frozenset] = set()
        for a in procs:
            for b in procs:
                if a == b or inc[b][1].inv <= first[a].inv:
                    continue
                # b is newer than a: a is fenced from first[b] on.
                late = [t for t in commits.get(a, []) if t.end.inv > first[b].inv]
                if late:
                    t = min(late, key=lambda t: (t.end.inv, t.id))
                    done.add(frozenset((a, b)))
                    out.append(_zombie(index, tid, t, [first[a], inc[b][1], first[b]],
                                       f"process {b}'s producer_config (#{inc[b][1].id}) was "
                                       f"invoked after process {a} began transactions "
                                       f"(#{first[a].id}), so {b} is the newer incarnation and "
                                       f"fenced {a} before its first transactional operation "
                                       f"#{first[b].id}"))
        for i, a in enumerate(procs):
            for b in procs[i + 1:]:
                if frozenset((a, b)) in done:
                    continue
                m = max(first[a].inv, first[b].inv)
                ta = [t for t in commits.get(a, []) if t.end.inv > m]
                tb = [t for t in commits.get(b, []) if t.end.inv > m]
                if ta and tb:
                    x = min(ta, key=lambda t: (t.end.inv, t.id))
                    y = min(tb, key=lambda t: (t.end.inv, t.id))
                    out.append(_zombie(index, tid, x, [first[a], first[b], y.end]
                                       + ([y.proof] if y.proof is not None else []),
                                       f"processes {a} and {b} had both begun transactions "
                                       f"(#{first[a].id}, #{first[b].id}) before either commit "
                                       f"was invoked, so whichever initialised first was fenced "
                                       f"by then, and transaction {y.id} of process {b} "
                                       f"committed (#{y.end.id} {y.end.type})"))
    return out


def _zombie(index: Index, tid: str, t: Txn, also: list[Op], why: str) -> Anomaly:
    how = f"#{t.end.id} txn_commit {t.end.type}" + (
        f", proven by poll #{t.proof.id} reading one of its records" if t.proof is not None else "")
    ops = also + [t.end] + ([t.proof] if t.proof is not None else [])
    parts = sorted({s.tp for s in t.sends})
    return Anomaly("zombie-commit", _ids(*ops),
                   f"transactional_id {tid!r}: {why}; yet transaction {t.id} of process "
                   f"{t.process} committed ({how}) although its commit was invoked after that: "
                   "a fenced producer's transaction became visible.", ",".join(parts) or None)


def check(index: Index) -> tuple[dict[str, list[Anomaly]], list[Anomaly]]:
    """(anomalies by check name, notes) of every transaction rule; nothing without
    transactions."""
    found: dict[str, list[Anomaly]] = {"writes": [], "sends": []}
    if not index.txns:
        return found, []
    for part in index.sorted_parts():
        found["writes"] += aborted_reads(index, part) + precommitted_reads(index, part)
    found["writes"] += atomicity(index) + zombie_commits(index)
    return found, send_skips(index)


def _ids(*ops: Op) -> tuple[int, ...]:
    seen: dict[int, Op] = {}
    for op in ops:
        seen[op.id] = op
    return tuple(o.id for o in sorted(seen.values(), key=lambda o: (o.inv, o.id)))
