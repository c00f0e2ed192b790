"""Per-partition rules on the observed log, after Jepsen's Kafka checker (jepsen/tests/kafka.clj):
inconsistent offsets, duplicates, lost / unseen writes, failed writes that were observed, poll
skips and non-monotonic polls per consumer, non-monotonic sends and reordering per producer.
Each rule is one function over an index.Part; each anomaly carries its smallest witness.
`info` sends are never counted as lost or unseen: they may not have happened (house style §10)."""
from __future__ import annotations

from operator import and_, attrgetter, eq, ge

from checkers.history.oracle import txns
from checkers.history.oracle.index import Index, Part
from checkers.history.result import Anomaly, CheckResult, finish
from traces.history import Op

_PROCESS, _OFFSET = attrgetter("process"), attrgetter("offset")


def inconsistent_offsets(part: Part) -> list[Anomaly]:
    """One offset, two values: two clients disagree about the log (log matching broken)."""
    out = []
    for o in sorted(part.conflicts):
        a = part.ops_showing(o, part.log[o])[0]
        b = part.ops_showing(o, part.conflicts[o])[0]
        out.append(Anomaly("inconsistent-offsets", _ids(a, b),
                           f"offset {o} of {part.tp} holds {part.log[o]!r} according to #{a.id} "
                           f"but {part.conflicts[o]!r} according to #{b.id}.", part.tp))
    return out


def duplicates(part: Part, config: dict[int, dict] | None = None) -> tuple[list[Anomaly], list[Anomaly]]:
    """One value at two offsets: the record was written twice (e.g. a non-idempotent retry).
    An anomaly unless its producer's settings permit it (then a note). Returns (anomalies, notes)."""
    out, notes = [], []
    for v in sorted(part.dups):
        o1, o2 = part.first_offset[v], part.dups[v]
        a, b = part.ops_showing(o1, v)[0], part.ops_showing(o2, v)[0]
        text = f"value {v!r} appears at offset {o1} (#{a.id}) and at offset {o2} (#{b.id}) of {part.tp}"
        s = part.send_of.get(v)
        cfg = (config or {}).get(s.process) if s is not None else None
        if duplicate_permitted(cfg):
            settings = ", ".join(f"{k}={cfg[k]}" for k in sorted(cfg))
            notes.append(Anomaly("duplicate", _ids(a, b), f"{text}; producer settings: {settings} — "
                                 "a retried batch may be appended twice, which these permit.", part.tp))
        else:
            out.append(Anomaly("duplicate", _ids(a, b), text + ".", part.tp))
    return out, notes


def lost_writes(part: Part) -> list[Anomaly]:
    """Acknowledged at offset o, a later offset of the partition was read, but o's value never
    was: the write vanished from the log (Jepsen's lost-write)."""
    out = []
    hi, witness = part.max_read, part.max_read_op
    for op in part.unread_acks:
        if op.offset < hi:
            out.append(Anomaly("lost-write", (op.id, witness.id),
                               f"send #{op.id} of {op.value!r} was acknowledged at offset "
                               f"{op.offset} of {part.tp}; poll #{witness.id} read the later "
                               f"offset {hi}, yet no poll ever read {op.value!r}.", part.tp))
    for op in part.unread_proven:
        # Unacknowledged, but proven to have happened (its transaction committed), at an
        # offset its completion reported.
        if op.offset < hi:
            out.append(Anomaly("lost-write", (op.id, witness.id),
                               f"send #{op.id} of {op.value!r} (unacknowledged, but its "
                               f"transaction {op.txn} committed) took offset {op.offset} of "
                               f"{part.tp}; poll #{witness.id} read the later offset {hi}, yet "
                               f"no poll ever read {op.value!r}.", part.tp))
    return out


def unseen_writes(part: Part) -> tuple[list[Anomaly], int]:
    """Acknowledged, above every offset anyone read, and not returned even by a final read that
    began after the acknowledgement. Returns the anomalies and how many acknowledged writes
    were unread with no final read to decide them (those make the check unknown, not valid)."""
    out, undecided = [], 0
    # Finals are in invoke order: if any began after the acknowledgement, the last one did.
    last = part.finals[-1] if part.finals else None
    hi = part.max_read
    for op in part.unread_acks:
        if op.offset < hi:
            continue
        if last is None or last.inv <= op.comp:
            undecided += 1
            continue
        p = last
        out.append(Anomaly("unseen-write", (op.id, p.id),
                           f"send #{op.id} of {op.value!r} was acknowledged at offset {op.offset} "
                           f"of {part.tp}, but the final read #{p.id}, begun afterwards, did not "
                           f"return it (nor did any other poll).", part.tp))
    return out, undecided


def lost_reads(part: Part) -> list[Anomaly]:
    """The final reads, begun after a poll completed, must return every offset that poll read:
    a final read that returns less than what was already read is lost data. This is the
    client-side face of KIP-101 (a leader change truncates records that consumers had already
    read above the new leader's log end). One anomaly per partition: the highest offset read
    and then missing, with the poll that read it and the last final read."""
    if not part.finals:
        return []
    start = part.finals[0].inv                       # finals are in invoke order
    final_offsets: set[int] = set()
    for p in part.finals:
        final_offsets.update(p.offsets)
    missing, by = -1, None
    for p in part.polls:
        if p.final or p.comp >= start or not p.offsets:
            continue
        gone = [o for o in p.offsets if o not in final_offsets]
        if gone and max(gone) > missing:
            missing, by = max(gone), p
    if by is None:
        return []
    f = part.finals[-1]
    return [Anomaly("lost-read", _ids(by, f),
                    f"poll #{by.id} read offset {missing} of {part.tp}, yet the final reads "
                    f"(up to #{f.id}), begun after it completed, did not return that offset: "
                    "the log lost records it had already served.", part.tp)]


def failed_writes_observed(part: Part) -> list[Anomaly]:
    """A send that completed `fail` (known not to have happened) whose value was read."""
    out = []
    for op in part.failed:
        if op.value in part.read:
            p = part.polls_reading(op.value)[0]
            out.append(Anomaly("failed-write-observed", (op.id, p.id),
                               f"send #{op.id} of {op.value!r} to {part.tp} failed, yet poll "
                               f"#{p.id} read it.", part.tp))
    return out


def poll_order(part: Part) -> list[Anomaly]:
    """Per consumer process, successive records it polls must be successive in log order: a
    jump forward is a poll-skip, a step back or a repeat a nonmonotonic-poll. An assign or
    subscribe of the partition by the process resets its position (Jepsen resets likewise)."""
    out = []
    # Polls and assigns in invoke order; the last rank read per process is its position.
    last: dict[int, tuple[int, Op]] = {}
    ranks = part.ranks
    held = part.held
    for op in part.consumer_ops:
        if op.f != "poll":
            last.pop(op.process, None)
            continue
        offs = op.offsets
        if not offs:
            continue
        r = ranks(offs)
        n = len(r)
        if r[-1] - r[0] != n - 1 or (n > 2 and r != list(range(r[0], r[0] + n))):
            out.append(_internal_poll_anomaly(part, op, r))
        prev = last.get(op.process)
        # Two polls of one transaction: Jepsen's internal (int-) kinds.
        inner = prev is not None and op.txn is not None and prev[1].txn == op.txn
        if prev is not None:
            pr, pop = prev
            if r[0] > pr + 1:
                o = part.offset_at_rank(pr + 1)
                shown = part.ops_showing(o, part.log[o])[0]
                out.append(Anomaly("int-poll-skip" if inner else "poll-skip", _ids(pop, op, shown),
                                   f"process {op.process} polled {part.tp} up to offset "
                                   f"{pop.offsets[-1]} (#{pop.id}), then resumed at offset "
                                   f"{offs[0]} (#{op.id}), skipping {r[0] - pr - 1} record(s) "
                                   f"such as offset {o} (see #{shown.id}).", part.tp))
            elif r[0] <= pr:
                out.append(Anomaly("int-nonmonotonic-poll" if inner else "nonmonotonic-poll",
                                   (pop.id, op.id),
                                   f"process {op.process} polled {part.tp} up to offset "
                                   f"{pop.offsets[-1]} (#{pop.id}), then went back to offset "
                                   f"{offs[0]} (#{op.id}) without an assign or subscribe.",
                                   part.tp))
        # A poll that ended info or fail, or whose transaction did not commit, is checked
        # against the consumer's position but does not move it (the client rewinds).
        if op.type == "ok" and op.id not in held:
            last[op.process] = (r[-1], op)
    return out


def _internal_poll_anomaly(part: Part, op: Op, r: list[int]) -> Anomaly:
    for i in range(len(r) - 1):
        if r[i + 1] != r[i] + 1:
            a, b = op.offsets[i], op.offsets[i + 1]
            if r[i + 1] <= r[i]:
                return Anomaly("nonmonotonic-poll", (op.id,), f"poll #{op.id} of {part.tp} goes "
                               f"back from offset {a} to offset {b} within one response.", part.tp)
            # A skip needs a second operation: the one that shows a record was skipped.
            o = part.offset_at_rank(r[i] + 1)
            shown = part.ops_showing(o, part.log[o])[0]
            return Anomaly("poll-skip", _ids(op, shown), f"poll #{op.id} of {part.tp} skips from "
                           f"offset {a} to offset {b} within one response, passing over offset "
                           f"{o} ({part.log[o]!r}, see #{shown.id}).", part.tp)
    raise AssertionError("unreachable: caller saw a gap")


def reorder_permitted(cfg: dict | None) -> bool:
    """Kafka may reorder one producer's records only without idempotence, with retries and more
    than one request in flight (KIP-98; replication.md 'Idempotent producer')."""
    if not cfg:
        return False   # unknown settings: since Kafka 3.0 the default is idempotent
    return (cfg.get("idempotence") is False and (cfg.get("retries") or 0) > 0
            and (cfg.get("max_in_flight") or 1) > 1)


def duplicate_permitted(cfg: dict | None) -> bool:
    """Kafka may append one record twice only without idempotence and with retries: a batch
    whose acknowledgement was lost is sent again and appended again (KIP-98's motivation).
    With idempotence the broker answers the retry with the original offset."""
    if not cfg:
        return False   # unknown settings: since Kafka 3.0 the default is idempotent
    return cfg.get("idempotence") is False and (cfg.get("retries") or 0) > 0


def send_order(part: Part, config: dict[int, dict]) -> tuple[list[Anomaly], list[Anomaly]]:
    """Per producer process, acknowledged sends take offsets in send (invoke) order. A send
    that completed before the next began and still got a later offset is a nonmonotonic-send;
    two sends in flight together that swapped are a send-reorder, an anomaly unless the
    producer's settings permit it (then a note). Returns (anomalies, notes)."""
    out, notes = [], []
    # Unacknowledged sends that took effect are ordered too: at their proven offset, or where
    # they were first read. Their completion time is unknown, so they are never "completed
    # before" the next (a descent involving one is a send-reorder).
    extra = [(s, part.first_offset[s.value]) for s in part.sends
             if s.type == "info" and s.value in part.first_offset]
    if extra:
        seq = sorted([(a, a.offset) for a in part.acked] + extra, key=lambda x: (x[0].inv, x[0].id))
    elif not _any_producer_descent(part.acked):
        return out, notes
    else:
        seq = [(a, a.offset) for a in part.acked]
    last: dict[int, tuple[Op, int]] = {}
    for op, off in seq:
        p = last.get(op.process)
        last[op.process] = (op, off)
        if p is None or off > p[1]:
            continue
        prev, poff = p
        w = (prev.id, op.id)
        if prev.comp is not None and prev.comp < op.inv:
            kind = "int-nonmonotonic-send" if op.txn is not None and op.txn == prev.txn else "nonmonotonic-send"
            out.append(Anomaly(kind, w,
                               f"process {op.process} sent {prev.value!r} (#{prev.id}, offset "
                               f"{poff}) and, after it was acknowledged, {op.value!r} "
                               f"(#{op.id}), which got the earlier offset {off} of {part.tp}.",
                               part.tp))
            continue
        cfg = config.get(op.process)
        settings = (", ".join(f"{k}={cfg[k]}" for k in sorted(cfg)) if cfg
                    else "no producer_config recorded")
        unacked = [s for s in (prev, op) if s.type != "ok"]
        how = ("both in flight" if not unacked else
               f"{' and '.join('#' + str(s.id) for s in unacked)} unacknowledged but read")
        text = (f"process {op.process} sent {prev.value!r} (#{prev.id}) before {op.value!r} "
                f"(#{op.id}), {how}, but the log of {part.tp} has them the other way "
                f"round (#{op.id} at offset {off}, #{prev.id} at {poff}); producer settings: {settings}")
        kind = "int-nonmonotonic-send" if op.txn is not None and op.txn == prev.txn else "send-reorder"
        if reorder_permitted(cfg):
            notes.append(Anomaly(kind, w, text + " — which permit this.", part.tp))
        else:
            out.append(Anomaly(kind, w, text + " — which forbid this.", part.tp))
    return out, notes


def _any_producer_descent(acked: list[Op]) -> bool:
    """Screen for send_order, in C-level passes: does any producer's offset sequence (in send
    order) fail to increase? Stable sort by process keeps each producer's send order."""
    by = sorted(acked, key=_PROCESS)
    procs, offs = list(map(_PROCESS, by)), list(map(_OFFSET, by))
    return any(map(and_, map(eq, procs, procs[1:]), map(ge, offs, offs[1:])))


def check_log(index: Index) -> list[CheckResult]:
    """Runs every rule of this module over every partition (in sorted order: deterministic)."""
    found: dict[str, list[Anomaly]] = {k: [] for k in ("offsets", "writes", "polls", "sends")}
    notes: list[Anomaly] = []
    permitted: dict[str, list[Anomaly]] = {"offsets": []}
    records = sends = polls = undecided = 0
    for part in index.sorted_parts():
        sends += len(part.sends)
        polls += len(part.polls)
        records += len(part.log)
        dup, dup_notes = duplicates(part, index.config)
        found["offsets"] += inconsistent_offsets(part) + dup
        permitted["offsets"] += dup_notes
        found["writes"] += lost_writes(part) + failed_writes_observed(part) + lost_reads(part)
        unseen, und = unseen_writes(part)
        found["writes"] += unseen
        undecided += und
        found["polls"] += poll_order(part)
        a, n = send_order(part, index.config)
        found["sends"] += a
        notes += n
    t_found, t_notes = txns.check(index)
    for name in ("writes", "sends"):
        found[name] += t_found[name]
    notes += t_notes
    unknown = (f"{undecided} acknowledged write(s) were never read and no final read began after "
               "them: lost or merely lagging cannot be told apart") if undecided else ""
    return [
        finish("offsets", records, found["offsets"], permitted["offsets"]),
        finish("writes", sends, found["writes"], unknown=unknown, limited=bool(undecided)),
        finish("polls", polls, found["polls"]),
        finish("sends", sends, found["sends"], notes),
    ]


def _ids(*ops: Op) -> tuple[int, ...]:
    """Distinct op ids in invoke order (one op may show two facts)."""
    seen: dict[int, Op] = {}
    for op in ops:
        seen[op.id] = op
    return tuple(o.id for o in sorted(seen.values(), key=lambda o: (o.inv, o.id)))
