"""Dependency cycles across partitions, after Elle (jepsen-io/elle): a networkx graph whose
nodes are operations and whose edges are write-write (consecutive offsets of a partition),
write-read (a send to each poll that read it), process (a process's operation to the next one
it began after the first completed) and real-time order. A cycle means no single order of
effects explains the history. Reported as G0 (write-write edges only) or G1c (with write-read
edges), suffixed -process / -realtime when it needs those edges, with the shortest cycle
found as the witness. G-single (one anti-dependency) is searched on a graph of its own,
below: Kafka's polls and transactions are not the atomic reads and writes Elle's rw edges
assume, and the section says which rw edges are sound here.

Real-time edges are not materialised pairwise (quadratic): a chain of time nodes, one per
distinct completion time, carries "completed before" in O(n) edges; time nodes are dropped
from witnesses. Bounded: above `max_ops` operations the graph is not built. Per-partition
linearizability then settles it by locality (Herlihy & Wing 1990): every edge kind here orders
operations of one partition's linearisation or real time, so if every partition is
linearizable no cycle exists; otherwise the result is unknown.
"""
from __future__ import annotations

import bisect
import time
from collections import deque

import networkx as nx

from checkers.history.oracle.index import COMMITTED, Index
from checkers.history.result import Anomaly, CheckResult, finish
from traces.history import Op

WW, WR, PROC, RT = "ww", "wr", "process", "realtime"
BFS_STARTS = 8          # BFS roots tried per strongly connected component


def build_graph(index: Index) -> nx.DiGraph:
    """Nodes are operations, or transactions (format version 2: every operation of one
    transaction is one node, named by its smallest operation id, as Elle's nodes are
    transactions); a transaction's node completes when its commit is acknowledged."""
    g = nx.DiGraph()
    node_of: dict[int, int] = {}
    for t in index.txns.values():
        rep = min(o.id for o in t.ops)
        for o in t.ops:
            node_of[o.id] = rep

    def nid(op: Op) -> int:
        return node_of.get(op.id, op.id)

    ops: list[Op] = []
    for part in index.sorted_parts():
        # Effective appends in offset order: ok sends, and info sends someone read.
        chain: list[tuple[int, Op]] = []
        for s in part.sends:
            if s.type == "ok":
                chain.append((s.offset, s))
            elif s.type == "info" and s.value in part.read:
                chain.append((part.first_offset[s.value], s))
        chain.sort(key=lambda x: (x[0], x[1].id))
        for (_, a), (_, b) in zip(chain, chain[1:]):
            _edge(g, nid(a), nid(b), WW)
        ops += [s for _, s in chain]
        for p in part.polls:
            ops.append(p)
            for v in sorted(set(p.values)):
                s = part.send_of.get(v)
                if s is not None and s.type != "fail":
                    _edge(g, nid(s), nid(p), WR)
    # Each node's invoke (earliest), completion (latest; None if unknown) and process.
    nodes: dict[int, list] = {}
    for op in ops:
        n = nid(op)
        cur = nodes.get(n)
        if cur is None:
            nodes[n] = [op.inv, op.comp, op.process]
        else:
            cur[0] = min(cur[0], op.inv)
            cur[1] = None if cur[1] is None or op.comp is None else max(cur[1], op.comp)
    for t in index.txns.values():
        n = min(o.id for o in t.ops)
        if n in nodes:
            e = t.end
            nodes[n][1] = e.comp if e is not None and e.f == "txn_commit" and e.type == "ok" else None
    for n in nodes:
        g.add_node(n)
    # Process order: a process's node precedes the next one it invoked after completing it.
    by_proc: dict[int, list[tuple[int, int | None, int]]] = {}
    for n, (inv, comp, proc) in sorted(nodes.items(), key=lambda kv: (kv[1][0], kv[0])):
        by_proc.setdefault(proc, []).append((inv, comp, n))
    for proc in sorted(by_proc):
        seq = by_proc[proc]
        invs = [x[0] for x in seq]
        for i, (_, comp, n) in enumerate(seq):
            if comp is None:
                continue
            j = bisect.bisect_right(invs, comp, lo=i + 1)
            if j < len(seq):
                _edge(g, n, seq[j][2], PROC)
    # Real time through time nodes ("t", k): node -> T_k at its completion time c_k,
    # T_k -> T_k+1, and T_k -> node for the latest c_k strictly before its invoke.
    times = sorted({c for _, c, _ in nodes.values() if c is not None})
    for k, t in enumerate(times):
        if k:
            _edge(g, ("t", k - 1), ("t", k), RT)
    for n, (inv, comp, _) in nodes.items():
        if comp is not None:
            _edge(g, n, ("t", bisect.bisect_left(times, comp)), RT)
        k = bisect.bisect_left(times, inv) - 1
        if k >= 0:
            _edge(g, ("t", k), n, RT)
    return g


def _edge(g: nx.DiGraph, a, b, kind: str) -> None:
    if a == b:          # within one transaction: not a dependency between nodes
        return
    if g.has_edge(a, b):
        g[a][b]["kinds"].add(kind)
    else:
        g.add_edge(a, b, kinds={kind})


def shortest_cycle(g: nx.DiGraph, nodes: set, deadline: float | None) -> list | None:
    """Shortest cycle through one of up to BFS_STARTS op nodes of an SCC (bounded BFS)."""
    best = None
    starts = sorted((n for n in nodes if not isinstance(n, tuple)))[:BFS_STARTS]
    for s in starts:
        if deadline is not None and time.monotonic() > deadline:
            break
        parent = {s: None}
        q = deque([s])
        found = None
        while q and found is None:
            u = q.popleft()
            for v in g.successors(u):
                if v not in nodes:
                    continue
                if v == s:
                    found = u
                    break
                if v not in parent:
                    parent[v] = u
                    q.append(v)
        if found is None:
            continue
        path = [found]
        while parent[path[-1]] is not None:
            path.append(parent[path[-1]])
        path.reverse()                         # s ... found, and found -> s closes it
        if best is None or len(path) < len(best):
            best = path
    return best


def classify(g: nx.DiGraph, cycle: list) -> str:
    kinds: set[str] = set()
    for a, b in zip(cycle, cycle[1:] + cycle[:1]):
        k = g[a][b]["kinds"]
        # Prefer the weakest explanation of each edge: data edges before process/real time.
        for pref in (WW, WR, PROC, RT):
            if pref in k:
                kinds.add(pref)
                break
    base = "G1c" if WR in kinds else "G0"
    if RT in kinds:
        return base + "-realtime"
    if PROC in kinds:
        return base + "-process"
    return base


def check(index: Index, lin_ok: bool, max_ops: int = 200_000, deadline: float | None = None) -> CheckResult:
    n = sum(len(p.sends) + len(p.polls) for p in index.parts.values())
    ends = any(p.end_offset is not None for part in index.parts.values() for p in part.polls)
    if n > max_ops:
        # Locality covers write-write, write-read and real-time edges, not a poll's end.
        if lin_ok and not index.txns and not ends:
            r = finish("cycles", n, [])
            r.reason = (f"graph not built ({n} ops > {max_ops}); no cycle by locality: every "
                        "partition is linearizable")
            return r
        return finish("cycles", 0, [], unknown=f"graph not built ({n} ops > {max_ops}) and some "
                                               "partition is not linearizable", limited=True)
    g = build_graph(index)
    ops = index.history.by_id()
    anomalies, notes = [], []
    limited = False
    for comp in sorted(nx.strongly_connected_components(g), key=lambda c: min(
            (x for x in c if not isinstance(x, tuple)), default=-1)):
        if len(comp) < 2:
            continue
        if deadline is not None and time.monotonic() > deadline:
            limited = True
            break
        cyc = shortest_cycle(g, comp, deadline)
        if cyc is None:
            continue
        kind = classify(g, cyc)
        wit = [x for x in cyc if not isinstance(x, tuple)]
        steps = []
        for a, b in zip(cyc, cyc[1:] + cyc[:1]):
            if isinstance(a, tuple):
                continue
            k = sorted(g[a][b]["kinds"])[0] if not isinstance(b, tuple) else RT
            steps.append(f"#{a} -{k}→")
        text = (f"operations {', '.join('#' + str(w) for w in wit)} form a {kind} cycle "
                f"({' '.join(steps)} #{wit[0]}): no order of effects explains them.")
        parts = sorted({ops[w].tp for w in wit if ops[w].topic is not None})
        if index.txns and kind.startswith(("G0", "G1c")) and _uses_ww(g, cyc):
            # Kafka does not order transactions' writes across partitions (Jepsen allows G0,
            # and G1c through write-write edges): shown, not a violation.
            notes.append(Anomaly(kind, tuple(wit), text + " Kafka permits this: transactions' "
                                 "writes are not ordered across partitions.", ",".join(parts)))
            continue
        anomalies.append(Anomaly(kind, tuple(wit), text, ",".join(parts)))
    examined = g.number_of_nodes()
    if not limited and ends:
        found, nodes, limited = g_single(index, deadline)
        anomalies += found
        examined += nodes
    return finish("cycles", examined, anomalies, notes,
                  unknown="time limit reached" if limited else "", limited=limited)


def _uses_ww(g: nx.DiGraph, cycle: list) -> bool:
    """Whether the cycle needs a write-write edge (one with no other kind to explain it)."""
    return any(g[a][b]["kinds"] == {WW} for a, b in zip(cycle, cycle[1:] + cycle[:1]))


# ---------------------------------------------------------------------------------------------
# Anti-dependency (read-write) cycles: G-single.
#
# Elle infers rw edges for list-append because a read returns the key's whole state: a reader
# of [1 2] saw the state just before the append of 3, so it precedes that append. A Kafka poll
# returns a range that max.poll.records, fetch sizes and the client's buffer cut anywhere: that
# it did not return offset k+1 says nothing about whether k+1 was visible. (Jepsen's Kafka
# checker describes rw edges from a poll's highest offset to the next version, but its rw graph
# is commented out, so it infers none.) An rw edge is drawn here only from a poll that reports
# its partition's end (`end_offset`: at some instant after its invoke and after its records
# were fetched, before its completion, no record at that offset or later was visible at its
# isolation level), to the first record at or past that end.
#
# Nor are transactions single instants in Kafka: a committed transaction's records become
# visible partition by partition, as the coordinator's markers land (after the commit is
# acknowledged), so a cycle through transactions as nodes that chains one partition's
# visibility to another's proves nothing (read skew across partitions is permitted). The
# graph's nodes are therefore instants that Kafka does order:
#   ("rec", tp, offset, level)  the instant a record became visible at an isolation level;
#                               records of one partition become visible in offset order (the
#                               high watermark and the last stable offset only move forward),
#                               and to read_uncommitted no later than to read_committed;
#   poll op id                  a poll's end instant (after its invoke and its records'
#                               fetch, before its completion; without an end, only the
#                               completion bound is used);
#   ("t", k)                    the k-th distinct poll completion time, as in build_graph.
# Edges ("≤" or "<" between the instants): record -> next visible record of its partition (ww);
# record -> a poll that returned it or a later one (wr); poll -> ("t", its completion) and
# ("t", latest completion before its invoke) -> poll (real time); ("t", latest completion
# before the writer's commit, or the send, was invoked) -> record (a committed transaction's
# records become visible only after its commit is invoked, so a transaction's polls that
# completed before its commit precede its records); poll -> the first record at or past its
# end_offset (rw, strict). Every cycle is a contradiction; one with exactly one rw edge is a
# G-single (-process when every real-time step stays in one process, else -realtime).

RW = "rw"
RU, RC = "read_uncommitted", "read_committed"


def rw_graph(index: Index) -> tuple[nx.DiGraph, list] | None:
    """The instants graph above and its rw edges (poll, record node); None when no poll
    reports its end (then there is no rw edge, so no G-single)."""
    if not any(p.end_offset is not None for part in index.parts.values() for p in part.polls):
        return None
    g = nx.DiGraph()
    polls = [p for part in index.sorted_parts() for p in part.polls if p.comp is not None]
    times = sorted({p.comp for p in polls})

    def before(t: int):
        k = bisect.bisect_left(times, t) - 1
        return ("t", k) if k >= 0 else None

    for k in range(1, len(times)):
        g.add_edge(("t", k - 1), ("t", k), k=RT)
    # Process order on chains of its own, ("pt", process, k), so that a cycle needing one
    # process's order only is found as such before real time is tried (as Elle does).
    ptimes: dict[int, list[int]] = {}
    for p in polls:
        ptimes.setdefault(p.process, set()).add(p.comp)
    ptimes = {proc: sorted(ts) for proc, ts in ptimes.items()}
    for proc, ts in ptimes.items():
        for k in range(1, len(ts)):
            g.add_edge(("pt", proc, k - 1), ("pt", proc, k), k=PROC)

    def after(node, op: Op, start: int) -> None:
        """Edges into `node` from the completions before `start` (of anyone, of op's process)."""
        b = before(start)
        if b is not None:
            g.add_edge(b, node, k=RT)
        ts = ptimes.get(op.process)
        if ts:
            k = bisect.bisect_left(ts, start) - 1
            if k >= 0:
                g.add_edge(("pt", op.process, k), node, k=PROC)

    rws = []
    for part in index.sorted_parts():
        visible: dict[str, list[int]] = {RU: [], RC: []}
        # Only the levels some poll of the partition reads at (a level no poll reads has no
        # edge out of its records but to the other level's, which bounds them no better).
        used = {p.isolation or RU for p in part.polls if p.comp is not None}
        for o in sorted(part.log):
            s = part.send_of.get(part.log[o])
            if s is not None and s.type == "fail":
                continue
            t = index.txn_of(s) if s is not None else None
            levels = (RU,) if t is not None and t.status != COMMITTED else (RU, RC)
            levels = tuple(lv for lv in levels if lv in used)
            for lv in levels:
                node = ("rec", part.tp, o, lv)
                g.add_node(node)
                if visible[lv]:
                    g.add_edge(("rec", part.tp, visible[lv][-1], lv), node, k=WW)
                visible[lv].append(o)
                if s is None:
                    continue
                w = t.end if lv == RC and t is not None and t.end is not None else s
                after(node, w, w.inv)
            if len(levels) == 2:
                g.add_edge(("rec", part.tp, o, RU), ("rec", part.tp, o, RC), k=WW)
        for p in part.polls:
            if p.comp is None:
                continue
            lv = p.isolation or RU
            g.add_edge(p.id, ("t", bisect.bisect_left(times, p.comp)), k=RT)
            g.add_edge(p.id, ("pt", p.process, bisect.bisect_left(ptimes[p.process], p.comp)), k=PROC)
            after(p.id, p, p.inv)
            vis = visible[lv]
            seen = [o for o in p.offsets if ("rec", part.tp, o, lv) in g]
            if seen:
                # The highest record it returned that is visible at its level (ww edges carry
                # the rest, as Jepsen draws wr edges from the highest read only).
                g.add_edge(("rec", part.tp, max(seen), lv), p.id, k=WR)
            if p.end_offset is not None:
                i = bisect.bisect_left(vis, p.end_offset)
                if i < len(vis):
                    node = ("rec", part.tp, vis[i], lv)
                    g.add_edge(p.id, node, k=RW)
                    rws.append((p.id, node))
    return g, rws


def _single_rw_cycle(g: nx.DiGraph, scc: set, rw: tuple, deadline: float | None,
                     realtime: bool) -> list | None:
    """Shortest path from the rw edge's record back to its poll without another rw edge (and
    without real-time steps unless `realtime`): the cycle poll -rw-> record ... -> poll, as a
    node list starting at the poll."""
    src, dst = rw
    parent = {dst: None}
    q = deque([dst])
    while q:
        if deadline is not None and time.monotonic() > deadline:
            return None
        u = q.popleft()
        for v in g.successors(u):
            if v not in scc or v in parent or g[u][v]["k"] == RW:
                continue
            if not realtime and g[u][v]["k"] == RT:
                continue
            parent[v] = u
            if v == src:
                back = [parent[src]]                 # the path dst ... (before src), reversed
                while back[-1] != dst:
                    back.append(parent[back[-1]])
                return [src] + back[::-1]
            q.append(v)
    return None


def g_single(index: Index, deadline: float | None = None) -> tuple[list[Anomaly], int, bool]:
    """(G-single anomalies, nodes examined, whether the deadline cut it short)."""
    built = rw_graph(index)
    if built is None:
        return [], 0, False
    g, rws = built
    comp_of = {}
    for i, c in enumerate(nx.strongly_connected_components(g)):
        if len(c) > 1:
            for n in c:
                comp_of[n] = (i, c)
    by_scc: dict[int, list] = {}
    for e in rws:
        if e[0] in comp_of and comp_of[e[0]][0] == comp_of.get(e[1], (None,))[0]:
            by_scc.setdefault(comp_of[e[0]][0], []).append(e)
    ops = index.history.by_id()
    out = []
    for i in sorted(by_scc, key=lambda i: min(e[0] for e in by_scc[i])):
        best = None
        for realtime in (False, True):     # the weakest explanation first: process order only
            for e in by_scc[i][:BFS_STARTS]:
                if deadline is not None and time.monotonic() > deadline:
                    return out, g.number_of_nodes(), True
                cyc = _single_rw_cycle(g, comp_of[e[0]][1], e, deadline, realtime)
                if cyc is not None and (best is None or len(cyc) < len(best)):
                    best = cyc
            if best is not None:
                break
        if best is not None:
            out.append(_explain(index, g, best, ops))
    return out, g.number_of_nodes(), False


def _explain(index: Index, g: nx.DiGraph, cyc: list, ops: dict[int, Op]) -> Anomaly:
    """The witness (polls, and the sends and commits of the records on the cycle) and one
    sentence walking the cycle from the poll whose end_offset draws the rw edge."""
    wit: list[int] = []
    steps: list[str] = []
    parts: set[str] = set()
    spans = []           # (op before, op after) of each run of real-time steps
    last_op: Op | None = None
    in_time = False
    missed = ""
    chain: list[tuple[str, str]] = []   # (edge kind, transaction or operation) along the cycle

    def actor(kind: str, who: str) -> None:
        if not chain or chain[-1][1] != who:
            chain.append((kind, who))

    def span_kind(x: Op, y: Op) -> str:
        return PROC if x.process == y.process else RT

    n = len(cyc)
    for j in range(n):
        a, b = cyc[j], cyc[(j + 1) % n]
        k = g[a][b]["k"]
        if isinstance(b, int):
            p = ops[b]
            who = f"transaction {p.txn}" if p.txn is not None else f"#{b}"
            if in_time and last_op is not None:
                spans.append((last_op, p))
                actor(span_kind(last_op, p), who)
            else:
                actor(k, who)
            in_time = False
            wit.append(b)
            last_op = p
            if k == WR:
                steps.append(f"#{b} read it (up to offset {max(p.offsets)} of {p.tp})")
            elif k in (RT, PROC):
                steps.append(f"then #{b} (process {p.process}) began")
            continue
        if b[0] in ("t", "pt"):
            in_time = True
            continue
        _, tp, o, lv = b
        parts.add(tp)
        part = index.parts[tp]
        s = part.send_of.get(part.log[o])
        t = index.txn_of(s) if s is not None else None
        who = f"transaction {t.id}" if t is not None else f"#{s.id}" if s is not None else f"{tp}@{o}"
        if k not in (RT, PROC):
            actor(k, who)
        if k == RW:
            p = ops[a]
            missed = f"{part.log[o]!r} at offset {o}"
            steps.append(f"#{a} ({lv}) reported the end of {tp} at offset {p.end_offset}, so "
                         + missed
                         + (f" (#{s.id}" + (f", transaction {t.id})" if t else ")") if s else "")
                         + " was not yet visible to it")
        elif k in (RT, PROC):
            writer = (t.end if lv == RC and t is not None and t.end is not None else s)
            if in_time and last_op is not None and writer is not None:
                spans.append((last_op, writer))
                actor(span_kind(last_op, writer), who)
                steps.append(f"then {'the commit' if writer is not s else 'the send'} #{writer.id}"
                             f" (process {writer.process}) of {part.log[o]!r} at offset {o} of "
                             f"{tp} was invoked")
                wit.append(writer.id)
            in_time = False
        elif k == WW and a[3] == lv:
            steps.append(f"{part.log[o]!r} at offset {o} became visible after it")
        if s is not None:
            wit.append(s.id)
    rt = [x for x, y in spans if x.process != y.process]
    kind = "G-single" + ("-realtime" if rt else "-process" if spans else "")
    ids = tuple(dict.fromkeys(wit))
    ids = tuple(sorted(ids, key=lambda i: (ops[i].inv, i)))
    walk = chain[-1][1] + " " + " ".join(f"-{k}→ {w}" for k, w in chain)
    text = (f"operations {', '.join('#' + str(i) for i in ids)} form a {kind} cycle with one "
            f"anti-dependency ({walk}): {'; '.join(steps)}. So {missed} was visible before "
            f"#{cyc[0]} read, which its end_offset denies: no order of effects explains them.")
    return Anomaly(kind, ids, text, ",".join(sorted(parts)))
