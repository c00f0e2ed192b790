"""Per-partition linearizability of the log, using the offsets as the linearisation witness.

Sequential specification (shared with the exhaustive checker in wgl.py): the log is a map
offset -> value whose offsets grow in the order appends take effect (gaps allowed: markers,
compaction); an append of v acknowledged at offset o is legal iff o is above every offset so
far; a poll returning records [(o, v), ...] is legal iff the log holds each of them. A `fail`
send never takes effect; an `info` send may take effect at any time after its invoke, or never;
an operation x precedes y in real time iff x completed before y was invoked.

Because every effective append names its offset (acknowledged, or read by someone), the order
of appends is forced, and each poll need only follow the append of its highest offset. With
lower bounds (invokes) and upper bounds (completions of the append and of polls that read it)
on a chain, the earliest-time greedy assignment is optimal, so the history is linearizable iff
no append a at offset <= o_b was invoked after b's deadline (b's completion, or the completion
of a poll whose highest record is b). One sort per partition: O(n log n), not Wing–Gong's
exponential search (Porcupine's docs note the same for a log with offsets).
"""
from __future__ import annotations

from dataclasses import replace
from itertools import accumulate, compress, count, repeat
from operator import attrgetter, ge, gt, sub

from checkers.history.oracle.index import Index, Part
from checkers.history.oracle.log_checks import duplicate_permitted
from checkers.history.result import Anomaly, CheckResult, finish
from traces.history import Op

TYPE = "nonlinearizable"
INF = float("inf")
_OFFSET, _INV, _COMP = attrgetter("offset"), attrgetter("inv"), attrgetter("comp")


def effective_appends(part: Part, config: dict[int, dict] | None = None) -> tuple[dict[int, Op], list[Anomaly]]:
    """offset -> the send that put it there, for every send that must have taken effect; plus
    the anomalies found on the way (records no single log can explain). With `config`, a second
    copy of an acknowledged send whose producer's settings permit duplicates (a retried batch
    appended twice: log_checks.duplicate_permitted) is an append of unknown time, like an info
    send, rather than a record no log explains."""
    acked = part.acked
    at: dict[int, Op] = dict(zip(map(_OFFSET, acked), acked))
    bad: list[Anomaly] = []
    if len(at) != len(acked):      # two acknowledgements of one offset (rare): find them
        at = {}
        for op in acked:
            other = at.get(op.offset)
            if other is not None:
                bad.append(_a((other, op), f"sends #{other.id} and #{op.id} were both "
                                           f"acknowledged at offset {op.offset} of {part.tp}.", part))
                continue
            at[op.offset] = op
    # Unacknowledged sends proven to have happened (index.Part.proven) are appends at the
    # offset they reported, of unknown completion time.
    for s in part.proven:
        other = at.get(s.offset)
        if other is None:
            at[s.offset] = s
        elif other is not s:
            bad.append(_a((other, s), f"sends #{other.id} and #{s.id} both took offset {s.offset} "
                                      f"of {part.tp}.", part))
    # Reads place info sends (their value read at o) and must agree with acknowledgements.
    # Only records that disagree with the acknowledgements need a look: every other record
    # is an acknowledged send read at its own offset.
    placed: dict[int, tuple[int, Op]] = {}    # info send id -> (offset, first poll placing it)
    send_of = part.send_of
    for p, o, v in part.odd_records:
        s = send_of.get(v)
        if s is None:
            bad.append(_a((p,), f"poll #{p.id} read {v!r} at offset {o} of {part.tp}, a value "
                                "no one sent.", part))
        elif s.type == "fail":
            bad.append(_a((s, p), f"poll #{p.id} read {v!r} at offset {o} of {part.tp}, but "
                                  f"its send #{s.id} failed and so never took effect.", part))
        elif s.type == "ok" and s.offset != o and duplicate_permitted((config or {}).get(s.process)):
            other = at.get(o)
            if other is None:
                at[o] = replace(s, type="info", comp=None, offset=None)     # the retry's copy
            elif other.id != s.id:
                bad.append(_a((other, p), f"poll #{p.id} read {v!r} at offset {o} of {part.tp}, which "
                                          f"send #{other.id} holds ({other.value!r}).", part))
        elif s.type == "ok" and s.offset != o:
            bad.append(_a((s, p), f"send #{s.id} put {v!r} at offset {s.offset} of {part.tp}, "
                                  f"but poll #{p.id} read it at offset {o}.", part))
        elif s.type == "info":
            other = at.get(o)
            seen = placed.get(s.id)
            if seen is not None and seen[0] != o and duplicate_permitted((config or {}).get(s.process)):
                # A retried batch whose answers were all lost: appended twice, as the settings
                # permit (the duplicate check notes it); the second copy is the retry's.
                if other is None:
                    at[o] = replace(s, type="info", comp=None, offset=None)
                elif other.id != s.id:
                    bad.append(_a((other, p), f"poll #{p.id} read {v!r} at offset {o} of {part.tp}, "
                                              f"which send #{other.id} holds ({other.value!r}).", part))
            elif seen is not None and seen[0] != o:
                bad.append(_a((seen[1], p), f"polls #{seen[1].id} and #{p.id} read {v!r} (an "
                                            f"unacknowledged send, #{s.id}) at offsets "
                                            f"{seen[0]} and {o} of {part.tp}.", part))
            elif other is None:
                at[o] = s
                placed[s.id] = (o, p)
            elif other is not s:
                bad.append(_a((other, p), f"poll #{p.id} read {v!r} at offset {o} of "
                                          f"{part.tp}, which send #{other.id} holds "
                                          f"({other.value!r}).", part))
    return at, bad


def check_partition(part: Part, config: dict[int, dict] | None = None) -> list[Anomaly]:
    at, bad = effective_appends(part, config)
    if bad:
        return bad
    order = sorted(at)
    if not _may_violate(at, order, part):
        return []
    # Deadline that polls set on an offset: the earliest completion of a poll whose highest
    # record is that offset (the poll must follow that offset's append).
    polled: dict[int, tuple[int, Op]] = {}
    for p, m in zip(part.polls, part.poll_max):
        if m >= 0:
            d = polled.get(m)
            if d is None or p.comp < d[0]:
                polled[m] = (p.comp, p)
    out = []
    best_inv, best = -1, None          # latest invoke among appends at lower offsets
    for o in order:
        s = at[o]
        # An append's own completion bounds the appends below it (not itself) ...
        if s.comp is not None and best_inv > s.comp:
            out.append(_violation(part, best, s, s, o))
            continue
        if s.inv > best_inv:
            best_inv, best = s.inv, s
        # ... and a poll's completion bounds the append it read and every one below.
        d = polled.get(o)
        if d is not None and best_inv > d[0]:
            out.append(_violation(part, best, s, d[1], o))
    return out


def _may_violate(at: dict[int, Op], order: list[int], part: Part) -> bool:
    """The same condition as the loop in check_partition, as C-level passes (map, accumulate,
    compress): is some deadline (an append's completion, or a poll's) earlier than the latest
    invoke at or below its offset? Only then does the loop run, to find witnesses."""
    ops = list(map(at.__getitem__, order))
    latest = list(accumulate(map(_INV, ops), max))
    # An append's own completion against the appends strictly below it.
    comps = [INF if c is None else c for c in map(_COMP, ops)]
    if any(map(gt, latest, comps[1:])):
        return True
    # A poll's completion against the appends at or below its highest offset (every record
    # it read is in `at`: effective_appends found nothing bad).
    keep = list(map(ge, part.poll_max, repeat(0)))
    highest = list(compress(part.poll_max, keep))
    if not highest:
        return False
    ends = map(_COMP, compress(part.polls, keep))
    if order[-1] - order[0] + 1 == len(order):           # contiguous offsets: index by arithmetic
        pos = map(sub, highest, repeat(order[0]))
    else:
        pos = map(dict(zip(order, count())).__getitem__, highest)
    return any(map(gt, map(latest.__getitem__, pos), ends))


def _violation(part: Part, a: Op, b: Op, by: Op, o: int) -> Anomaly:
    if by is b:
        return _a((b, a), f"send #{b.id} was acknowledged at offset {b.offset} of {part.tp} "
                          f"before send #{a.id} was invoked, yet #{a.id} got the earlier offset "
                          f"{a.offset if a.offset is not None else '(read) ' + str(_off(part, a))}.", part)
    if a is b:
        return _a((by, a), f"poll #{by.id} completed before send #{a.id} was invoked, yet read "
                           f"its value {a.value!r} at offset {o} of {part.tp}.", part)
    return _a((by, a), f"poll #{by.id} read offset {o} of {part.tp} and completed before send "
                       f"#{a.id} was invoked, yet #{a.id} holds the earlier offset {_off(part, a)}.", part)


def _off(part: Part, s: Op) -> int:
    return s.offset if s.offset is not None else part.first_offset.get(s.value, -1)


def _a(ops: tuple[Op, ...], text: str, part: Part) -> Anomaly:
    ids = tuple(o.id for o in sorted(set(ops), key=lambda o: (o.inv, o.id)))
    return Anomaly(TYPE, ids, text, part.tp)


def check(index: Index) -> CheckResult:
    anomalies, examined = [], 0
    for part in index.sorted_parts():
        examined += len(part.sends) + len(part.polls)
        anomalies += check_partition(part, index.config)
    return finish("linearizable", examined, anomalies)


def is_linearizable(part: Part) -> bool:
    return not check_partition(part)
