"""Dependency cycles across partitions, after Elle (jepsen-io/elle): a networkx graph whose
nodes are operations and whose edges are write-write (consecutive offsets of a partition),
write-read (a send to each poll that read it), process (a process's operation to the next one
it began after the first completed) and real-time order. A cycle means no single order of
effects explains the history. Reported as G0 (write-write edges only) or G1c (with write-read
edges), suffixed -process / -realtime when it needs those edges, with the shortest cycle
found as the witness.

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

from checkers.history.oracle.index import Index
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
    if n > max_ops:
        if lin_ok and not index.txns:
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
    return finish("cycles", g.number_of_nodes(), anomalies, notes,
                  unknown="time limit reached" if limited else "", limited=limited)


def _uses_ww(g: nx.DiGraph, cycle: list) -> bool:
    """Whether the cycle needs a write-write edge (one with no other kind to explain it)."""
    return any(g[a][b]["kinds"] == {WW} for a, b in zip(cycle, cycle[1:] + cycle[:1]))
