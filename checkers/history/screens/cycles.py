"""The cycle screen: whether the oracle's dependency graph (checkers/history/oracle/cycles.py
`build_graph`: write-write, write-read, process and real-time edges, with transactions as
nodes under format version 2) has any cycle at all, without building it in networkx.

The same edges are laid out as two int64 arrays (node labels made dense here) and a compiled
topological sort (`_scan.acyclic`, Kahn's algorithm, O(nodes + edges)) says whether every
node can be ordered. A graph with no cycle has no strongly connected component of two nodes
or more, so the oracle's cycle check finds no anomaly and no note in it: its result is valid
with the graph's node count examined, which `acyclic_nodes` returns. Any cycle (even one the
oracle would only note, such as a write-write cycle Kafka permits across partitions) returns
None: the oracle's search then runs and names it. The screen is exact, never an
approximation: it needs no bound on the history's size (the oracle's search is bounded by
`cycle_max_ops`). tests/test_screens_cycles.py holds it to the oracle's graph."""
from __future__ import annotations

import bisect
from array import array

from checkers.history.screens import _scan

# Operation ids below DENSE_IDS_PER_NODE per node plus DENSE_MARGIN are slots themselves.
DENSE_IDS_PER_NODE = 4
DENSE_MARGIN = 1 << 16


def edges(index) -> tuple[dict, int, array, array]:
    """(labels, slots, src, dst) of the oracle's dependency graph over `index` (an oracle
    Index), node for node and edge for edge as cycles.build_graph lays it out (edges within
    one transaction dropped, as there): src and dst hold slots below `slots`, and `labels`
    maps each slot that is a node to the oracle's label (an operation's or transaction's node
    id, ("t", k) for the k-th completion time); other slots are isolated."""
    node_of: dict[int, int] = {}
    for t in index.txns.values():
        rep = min(o.id for o in t.ops)
        for o in t.ops:
            node_of[o.id] = rep
    get = node_of.get
    src: list[int] = []
    dst: list[int] = []
    ops = []
    for part in index.sorted_parts():
        chain = []
        read, first = part.read, part.first_offset
        for s in part.sends:
            if s.type == "ok":
                chain.append((s.offset, s.id, s))
            elif s.type == "info" and s.value in read:
                chain.append((first[s.value], s.id, s))
        chain.sort(key=lambda x: (x[0], x[1]))
        prev = None
        for _, _, s in chain:
            n = get(s.id, s.id)
            if prev is not None and prev != n:
                src.append(prev)
                dst.append(n)
            prev = n
            ops.append(s)
        send_of = part.send_of
        for p in part.polls:
            ops.append(p)
            pn = get(p.id, p.id)
            for v in p.values:          # a value twice gives an edge twice: no matter
                s = send_of.get(v)
                if s is not None and s.type != "fail":
                    n = get(s.id, s.id)
                    if n != pn:
                        src.append(n)
                        dst.append(pn)
    # Each node's [invoke, completion, process], computed here again rather than imported from
    # the oracle (checkers/history/oracle/cycles.py): the screen is held to the oracle's graph
    # edge for edge, which code shared by both could not show wrong.
    nodes: dict[int, list] = {}
    for op in ops:
        n = get(op.id, op.id)
        cur = nodes.get(n)
        if cur is None:
            nodes[n] = [op.inv, op.comp, op.process]
        else:
            if op.inv < cur[0]:
                cur[0] = op.inv
            cur[1] = None if cur[1] is None or op.comp is None else max(cur[1], op.comp)
    for t in index.txns.values():
        n = min(o.id for o in t.ops)
        if n in nodes:
            e = t.end
            nodes[n][1] = e.comp if e is not None and e.f == "txn_commit" and e.type == "ok" else None
    by_proc: dict[int, list] = {}
    for n, (inv, comp, proc) in sorted(nodes.items(), key=lambda kv: (kv[1][0], kv[0])):
        by_proc.setdefault(proc, []).append((inv, comp, n))
    for seq in by_proc.values():
        invs = [x[0] for x in seq]
        for i, (_, comp, n) in enumerate(seq):
            if comp is None:
                continue
            j = bisect.bisect_right(invs, comp, lo=i + 1)
            if j < len(seq) and seq[j][2] != n:
                src.append(n)
                dst.append(seq[j][2])
    # Slots: an operation node's slot is its id when ids are dense enough (a loaded history's
    # usually are: no mapping per edge end; ids no node has are isolated slots, which no cycle
    # passes through), else its place in `nodes`; the time nodes come after.
    times = sorted({c for _, c, _ in nodes.values() if c is not None})
    top = max(nodes, default=-1)
    if min(nodes, default=0) >= 0 and top < DENSE_IDS_PER_NODE * len(nodes) + DENSE_MARGIN:
        slot = {n: n for n in nodes}
        base = top + 1
        s_out, d_out = array("q", src), array("q", dst)
    else:
        slot = {n: i for i, n in enumerate(nodes)}
        base = len(slot)
        s_out = array("q", (slot[x] for x in src))
        d_out = array("q", (slot[x] for x in dst))
    for k in range(1, len(times)):
        s_out.append(base + k - 1)
        d_out.append(base + k)
    left = bisect.bisect_left
    for n, (inv, comp, _) in nodes.items():
        i = slot[n]
        if comp is not None:
            s_out.append(i)
            d_out.append(base + left(times, comp))
        k = left(times, inv) - 1
        if k >= 0:
            s_out.append(base + k)
            d_out.append(i)
    labels = {i: n for n, i in slot.items()}
    labels.update((base + k, ("t", k)) for k in range(len(times)))
    return labels, base + len(times), s_out, d_out


def acyclic_nodes(index) -> int | None:
    """The node count of the oracle's dependency graph when it has no cycle, else None."""
    labels, slots, src, dst = edges(index)
    return len(labels) if _scan.acyclic(slots, src, dst) else None
