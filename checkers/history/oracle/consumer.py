"""Consumer-group offset rules: committed offsets never go backwards within a group, no commit
from a fenced generation succeeds (replication.md 'Consumer groups': every rebalance bumps the
generation; a commit with another generation gets ILLEGAL_GENERATION), and the delivery mode a
group declares on its assign/subscribe holds: at-least-once (commit only what was processed)
or at-most-once (no record delivered to the group twice). Only `ok` commits count: an `info`
commit may or may not have happened."""
from __future__ import annotations

import bisect
from itertools import accumulate, repeat
from operator import attrgetter

from checkers.history.oracle.index import Index, Part
from checkers.history.result import Anomaly, CheckResult, finish
from traces.history import Op

INF = float("inf")


def commit_regression(part: Part) -> list[Anomaly]:
    """A commit that began after another of the same group had completed must not commit a
    lower offset: the group's position would go back and re-deliver or mis-track records."""
    out = []
    by_group: dict[str, list[Op]] = {}
    for c in part.commits:
        by_group.setdefault(c.group, []).append(c)
    for g in sorted(by_group):
        mine = by_group[g]                              # by invoke time
        ended = sorted(mine, key=attrgetter("comp"))    # by completion time
        j, top = 0, None                                # highest offset completed so far
        for c in mine:
            while j < len(ended) and ended[j].comp < c.inv:
                d = ended[j]
                if top is None or d.offset >= top.offset:   # the latest of equals
                    top = d
                j += 1
            if top is not None and c.offset < top.offset:
                out.append(Anomaly("commit-regression", (top.id, c.id),
                                   f"group {g} committed offset {top.offset} of {part.tp} (#{top.id}); "
                                   f"a later commit #{c.id} set it back to {c.offset}.", part.tp))
    return out


def fenced_commits(part: Part, assigns: dict[str, list[Op]]) -> list[Anomaly]:
    """A commit of generation g that succeeded although the group had already completed a
    rebalance to a newer generation: an assign or subscribe of g' > g, of any partition of the
    group (the generation is the group's), finished before the commit began."""
    out = []
    for g in sorted({c.group for c in part.commits}):
        mine = assigns.get(g, [])                    # by completion time
        i, newest = 0, None
        for c in (c for c in part.commits if c.group == g):
            while i < len(mine) and mine[i].comp < c.inv:
                if newest is None or mine[i].generation > newest.generation:
                    newest = mine[i]
                i += 1
            if newest is not None and c.generation is not None and newest.generation > c.generation:
                out.append(Anomaly("fenced-commit", (newest.id, c.id),
                                   f"group {g} rebalanced to generation {newest.generation} "
                                   f"(#{newest.id}) before commit #{c.id} of generation "
                                   f"{c.generation} began, yet that commit succeeded.", part.tp))
    return out


def _group_polls(part: Part, group_of: dict[int, str], g: str) -> list[Op]:
    # Final reads are the checker's, not the group's.
    return [p for p in part.polls if not p.final and group_of.get(p.process) == g]


def at_least_once(part: Part, group_of: dict[int, str], g: str) -> list[Anomaly]:
    """Every record below a committed offset (from where the group started) was returned to a
    member of the group by a poll that completed before the commit began: commit after
    processing. A commit ahead of processing lets a crash skip records."""
    starts = [a.offset for a in part.assigns if a.group == g and a.type == "ok" and a.offset is not None]
    start = min(starts, default=0)
    offsets = sorted(part.log)
    if offsets and offsets[0] < start:
        offsets = offsets[bisect.bisect_left(offsets, start):]
    first_read: dict[int, float] = {}
    # Latest completions first, so that the earliest read of each offset is written last.
    for p in sorted(_group_polls(part, group_of, g), key=attrgetter("comp"), reverse=True):
        first_read.update(zip(p.offsets, repeat(p.comp)))
    times = list(map(first_read.get, offsets, repeat(INF)))
    prefix = list(accumulate(times, max))    # prefix[i]: latest first read over offsets[:i+1]
    out = []
    reported: set[int] = set()     # one anomaly per unprocessed offset: its first commit
    first_at: dict[float, int] | None = None   # time -> first index holding it (built once)
    for c in part.commits:
        if c.group != g:
            continue
        i = bisect.bisect_left(offsets, c.offset) - 1
        # Generous at equal timestamps (coarse clocks): only a read strictly after the
        # commit began, or none, is a violation.
        if i < 0 or prefix[i] <= c.inv:
            continue
        if first_at is None:
            # One pass, on the first violation only: searching `times` per commit would make
            # the check quadratic in commits (9.7 s -> 53.5 s for one lost write).
            first_at = {}
            for j, t in enumerate(times):
                first_at.setdefault(t, j)
        o = offsets[first_at[prefix[i]]]          # the offset that was read last (or never)
        if o in reported:
            continue
        reported.add(o)
        shown = part.ops_showing(o, part.log[o])[0]
        when = "never polled" if prefix[i] == INF else "had not polled when the commit began"
        out.append(Anomaly("delivery-at-least-once", (shown.id, c.id),
                           f"group {g} declared at-least-once, but commit #{c.id} of offset "
                           f"{c.offset} of {part.tp} passed offset {o} ({part.log[o]!r}, see "
                           f"#{shown.id}), which the group {when}.", part.tp))
    return out


def at_most_once(part: Part, group_of: dict[int, str], g: str) -> list[Anomaly]:
    """No record is returned to the group twice: commit before processing means a crash loses
    records but never repeats them."""
    out = []
    first: dict[int, Op] = {}
    reported: set[int] = set()
    for p in _group_polls(part, group_of, g):
        for o in p.offsets:
            q = first.setdefault(o, p)
            if q is not p and o not in reported:
                reported.add(o)
                out.append(Anomaly("delivery-at-most-once", (q.id, p.id),
                                   f"group {g} declared at-most-once, but offset {o} of {part.tp} "
                                   f"was delivered to it twice (#{q.id}, #{p.id}).", part.tp))
    return out


def check(index: Index) -> CheckResult:
    anomalies: list[Anomaly] = []
    examined = 0
    modes: dict[str, str] = {}
    assigns: dict[str, list[Op]] = {}
    for part in index.sorted_parts():
        for a in part.assigns:
            if a.group is not None and a.delivery is not None:
                modes.setdefault(a.group, a.delivery)
            if a.group is not None and a.type == "ok" and a.generation is not None:
                assigns.setdefault(a.group, []).append(a)
    for g in assigns:
        assigns[g].sort(key=lambda a: (a.comp, a.id))
    for part in index.sorted_parts():
        examined += len(part.commits)
        anomalies += commit_regression(part) + fenced_commits(part, assigns)
        for g in sorted(modes):
            if modes[g] == "at-least-once":
                anomalies += at_least_once(part, index.group_of, g)
            else:
                examined += len(part.polls)
                anomalies += at_most_once(part, index.group_of, g)
    return finish("consumer-offsets", examined, anomalies)
