"""Planting anomalies into a valid generated history, one mutation per anomaly type. Each
mutation picks `rate` of its eligible sites (at least one when rate > 0, sites in a seeded
random order) and plants exactly the anomaly named; some anomalies imply others by nature (a
nonmonotonic send is also a real-time violation), which the checkers then report too.
SEEDABLE lists what `gen-history --seed-anomaly TYPE:RATE` accepts."""
from __future__ import annotations

import bisect
import random
from typing import Callable

from traces.history import History, Op

GHOST = "ghost-"


class _Ctx:
    def __init__(self, h: History, rng: random.Random):
        self.h, self.rng = h, rng
        self.next_id = max((o.id for o in h.ops), default=-1) + 1
        self.next_pid = max((o.process for o in h.ops), default=-1) + 1000
        self.touched: set[int] = set()

    def op(self, **kw) -> Op:
        o = Op(id=self.next_id, type="ok", end=kw.get("comp"), **kw)
        self.next_id += 1
        self.h.ops.append(o)
        self.touched.add(o.id)
        return o

    def pid(self) -> int:
        self.next_pid += 1
        return self.next_pid

    def parts(self) -> list[int]:
        return sorted({o.partition for o in self.h.ops if o.f == "send"})

    def finals(self, part: int) -> list[Op]:
        return [o for o in self.h.ops if o.f == "poll" and o.final and o.partition == part]

    def t_final(self) -> int:
        return min(o.inv for o in self.h.ops if o.final)

    def top(self, part: int) -> int:
        """Highest offset anyone knows of in the partition."""
        m = -1
        for o in self.h.ops:
            if o.partition == part:
                if o.f == "send" and o.offset is not None:
                    m = max(m, o.offset)
                elif o.f == "poll" and o.offsets:
                    m = max(m, max(o.offsets))
        return m

    def extend_final(self, part: int, recs: list[tuple[int, str]]) -> None:
        last = self.finals(part)[-1]
        for o, v in recs:
            last.offsets.append(o)
            last.values.append(v)

    def send(self, part: int, value: str, inv: int, comp: int, offset: int, proc: int) -> Op:
        return self.op(process=proc, f="send", inv=inv, comp=comp, topic="t", partition=part,
                       value=value, offset=offset)


def _pick(ctx: _Ctx, sites: list, rate: float) -> list:
    sites = list(sites)
    ctx.rng.shuffle(sites)
    n = max(1, round(rate * len(sites))) if rate > 0 and sites else 0
    return sites[:n]


def _fresh(ctx: _Ctx) -> list:
    return [o for o in ctx.h.ops if o.id not in ctx.touched]


def lost_write(ctx: _Ctx, rate: float) -> None:
    tops = {p: ctx.top(p) for p in ctx.parts()}
    sites = [o for o in _fresh(ctx) if o.f == "send" and o.type == "ok" and o.offset < tops[o.partition]]
    for s in _pick(ctx, sites, rate):
        ctx.touched.add(s.id)
        for p in ctx.h.ops:
            if p.f == "poll" and p.partition == s.partition and p.values and s.value in p.values:
                i = p.values.index(s.value)
                del p.offsets[i], p.values[i]


def unseen_write(ctx: _Ctx, rate: float) -> None:
    tf = ctx.t_final()
    for part in _pick(ctx, ctx.parts(), rate):
        ctx.send(part, f"unseen-{part}", tf - 3000, tf - 1000, ctx.top(part) + 1, ctx.pid())


def failed_write_observed(ctx: _Ctx, rate: float) -> None:
    sites = [o for o in _fresh(ctx) if o.f == "send" and o.type == "ok"]
    for s in _pick(ctx, sites, rate):
        ctx.touched.add(s.id)
        s.type, s.offset, s.error = "fail", None, "NOT_LEADER_OR_FOLLOWER"


def inconsistent_offsets(ctx: _Ctx, rate: float) -> None:
    sites = [o for o in _fresh(ctx) if o.f == "poll" and o.type == "ok" and o.values and not o.final]
    for i, p in enumerate(_pick(ctx, sites, rate)):
        ctx.touched.add(p.id)
        p.values[0] = f"{GHOST}{p.id}"


def duplicate(ctx: _Ctx, rate: float) -> None:
    for part in _pick(ctx, ctx.parts(), rate):
        vals = [v for f in ctx.finals(part) for v in f.values]
        if vals:
            ctx.extend_final(part, [(ctx.top(part) + 1, ctx.rng.choice(vals))])


def poll_skip(ctx: _Ctx, rate: float) -> None:
    sites = [o for o in _fresh(ctx) if o.f == "poll" and o.type == "ok" and not o.final
             and o.offsets and len(o.offsets) >= 3]
    for p in _pick(ctx, sites, rate):
        ctx.touched.add(p.id)
        del p.offsets[1], p.values[1]


def nonmonotonic_poll(ctx: _Ctx, rate: float) -> None:
    last: dict[tuple[int, int], Op] = {}
    sites = []
    for o in sorted(ctx.h.ops, key=lambda o: (o.inv, o.id)):
        k = (o.process, o.partition)
        if o.f in ("assign", "subscribe"):
            last.pop(k, None)
        elif o.f == "poll" and o.type == "ok" and o.offsets and not o.final:
            q = last.get(k)
            if q is not None and o.id not in ctx.touched and q.id not in ctx.touched:
                sites.append((q, o))
            last[k] = o
    for q, p in _pick(ctx, sites, rate):
        if p.id in ctx.touched or q.id in ctx.touched:
            continue
        ctx.touched.update((p.id, q.id))
        p.offsets.insert(0, q.offsets[-1])
        p.values.insert(0, q.values[-1])


def nonmonotonic_send(ctx: _Ctx, rate: float) -> None:
    last: dict[tuple[int, int], Op] = {}
    sites = []
    for o in sorted(ctx.h.ops, key=lambda o: (o.inv, o.id)):
        if o.f == "send" and o.type == "ok":
            k = (o.process, o.partition)
            q = last.get(k)
            if q is not None and q.comp < o.inv:
                sites.append((q, o))
            last[k] = o
    for a, b in _pick(ctx, sites, rate):
        if a.id in ctx.touched or b.id in ctx.touched:
            continue
        ctx.touched.update((a.id, b.id))
        a.offset, b.offset = b.offset, a.offset
        for p in ctx.h.ops:
            if p.f == "poll" and p.partition == a.partition and p.values:
                p.values = [b.value if v == a.value else a.value if v == b.value else v for v in p.values]


def send_reorder(ctx: _Ctx, rate: float) -> None:
    tf = ctx.t_final()
    for part in _pick(ctx, ctx.parts(), rate):
        proc = ctx.pid()
        cfg = ctx.op(process=proc, f="producer_config", inv=tf - 9000, comp=tf - 8000)
        cfg.config = {"acks": "all", "idempotence": True, "max_in_flight": 5, "retries": 5}
        top = ctx.top(part)
        a = ctx.send(part, f"reorder-a-{part}", tf - 5000, tf - 1100, top + 2, proc)
        b = ctx.send(part, f"reorder-b-{part}", tf - 4900, tf - 1200, top + 1, proc)
        ctx.extend_final(part, [(b.offset, b.value), (a.offset, a.value)])


def realtime_swap(ctx: _Ctx, rate: float) -> None:
    """Two sends, one acknowledged before the other began, in the wrong log order (G0-realtime)."""
    tf = ctx.t_final()
    for part in _pick(ctx, ctx.parts(), rate):
        top = ctx.top(part)
        a = ctx.send(part, f"rt-a-{part}", tf - 6000, tf - 5500, top + 2, ctx.pid())
        b = ctx.send(part, f"rt-b-{part}", tf - 5000, tf - 4000, top + 1, ctx.pid())
        ctx.extend_final(part, [(b.offset, b.value), (a.offset, a.value)])


def future_read(ctx: _Ctx, rate: float) -> None:
    """A poll that returned a value whose send began only after the poll completed (G1c-realtime)."""
    tf = ctx.t_final()
    for part in _pick(ctx, ctx.parts(), rate):
        top = ctx.top(part)
        s = ctx.send(part, f"future-{part}", tf - 3000, tf - 2000, top + 1, ctx.pid())
        r = ctx.op(process=ctx.pid(), f="poll", inv=tf - 5000, comp=tf - 4000, topic="t",
                   partition=part, offsets=[s.offset], values=[s.value])
        del r
        ctx.extend_final(part, [(s.offset, s.value)])


def _ok_commits(ctx: _Ctx) -> list[Op]:
    return sorted((o for o in ctx.h.ops if o.f == "commit" and o.type == "ok"), key=lambda o: (o.inv, o.id))


def commit_regression(ctx: _Ctx, rate: float) -> None:
    sites = [c for c in _ok_commits(ctx) if c.offset > 0 and c.id not in ctx.touched]
    for c in _pick(ctx, sites, rate):
        ctx.op(process=ctx.pid(), f="commit", inv=c.comp + 1, comp=c.comp + 2, topic=c.topic,
               partition=c.partition, group=c.group, generation=c.generation, offset=c.offset - 1)


def fenced_commit(ctx: _Ctx, rate: float) -> None:
    sites = [a for a in ctx.h.ops if a.f == "assign" and a.type == "ok" and (a.generation or 0) >= 2]
    commits = _ok_commits(ctx)
    for a in _pick(ctx, sites, rate):
        t = a.comp + 1
        prev = [c.offset for c in commits if c.partition == a.partition and c.comp < t]
        ctx.op(process=ctx.pid(), f="commit", inv=t, comp=t + 1, topic=a.topic,
               partition=a.partition, group=a.group, generation=a.generation - 1,
               offset=max(prev, default=0))


def delivery_at_least_once(ctx: _Ctx, rate: float) -> None:
    commits = _ok_commits(ctx)
    logs: dict[int, set[int]] = {}
    for o in ctx.h.ops:
        if o.f == "poll" and o.final:
            logs.setdefault(o.partition, set()).update(o.offsets)
    # Per partition, commits by invoke time and the least offset of each suffix: the commits
    # invoked after c completed are a suffix (one search), so finding sites is O(n log n).
    by_part: dict[int, list[Op]] = {}
    for c in commits:
        by_part.setdefault(c.partition, []).append(c)
    least: dict[int, tuple[list[int], list[int]]] = {}
    for part, cs in by_part.items():
        suffix = [0] * len(cs)
        m = None
        for i in range(len(cs) - 1, -1, -1):
            m = cs[i].offset if m is None else min(m, cs[i].offset)
            suffix[i] = m
        least[part] = ([d.inv for d in cs], suffix)
    sites = []
    for c in commits:
        invs, suffix = least[c.partition]
        j = bisect.bisect_right(invs, c.comp)
        if c.offset in logs.get(c.partition, ()) and j < len(invs) and suffix[j] >= c.offset + 1:
            sites.append(c)
    for c in _pick(ctx, sites, rate):
        ctx.touched.add(c.id)
        c.offset += 1


SEEDABLE: dict[str, Callable[[_Ctx, float], None]] = {
    "commit-regression": commit_regression,
    "delivery-at-least-once": delivery_at_least_once,
    "duplicate": duplicate,
    "failed-write-observed": failed_write_observed,
    "fenced-commit": fenced_commit,
    "G0-realtime": realtime_swap,
    "G1c-realtime": future_read,
    "inconsistent-offsets": inconsistent_offsets,
    "lost-write": lost_write,
    "nonlinearizable": realtime_swap,
    "nonmonotonic-poll": nonmonotonic_poll,
    "nonmonotonic-send": nonmonotonic_send,
    "poll-skip": poll_skip,
    "send-reorder": send_reorder,
    "unseen-write": unseen_write,
}


def plant(h: History, kind: str, rate: float, rng: random.Random) -> None:
    if kind not in SEEDABLE:
        raise ValueError(f"unknown anomaly type {kind!r}")
    ctx = _Ctx(h, rng)
    SEEDABLE[kind](ctx, rate)
