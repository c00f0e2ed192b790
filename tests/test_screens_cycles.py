"""The cycle screen (checkers/history/screens/cycles.py) against the oracle's cycle search
(checkers/history/oracle/cycles.py): the same graph node for node and edge for edge, a cycle
exactly when networkx finds a strongly connected component of two nodes or more, and the same
verdict through check_history with the screen as without it, on transactional and plain
histories, valid and mutated into cycles (seeded), and on Jepsen's checker cases."""
from __future__ import annotations

import random
from array import array

import networkx as nx
import pytest
from checkers.history.generate import Params, generate, small_log_history
from checkers.history.generate_txn import PLANTABLE, generate_txn
from checkers.history.oracle.check import check_history
from checkers.history.oracle.cycles import build_graph
from checkers.history.oracle.index import build
from checkers.history.screens import _scan
from checkers.history.screens.cycles import acyclic_nodes, edges
from tests.jepsen_cases import CASES
from traces import history_jepsen as hj


def _fingerprint(v):
    return (v.status, [(c.name, c.status, c.limited, c.examined) for c in v.checks],
            [(a.type, a.witness, a.explanation) for a in v.anomalies],
            [(a.type, a.witness) for a in v.notes])


def _agrees(h) -> bool:
    """Asserts the screen's graph is the oracle's and its answer networkx's; returns whether
    the graph has a cycle."""
    index = build(h)
    g = build_graph(index)
    labels, slots, src, dst = edges(index)
    assert len(labels) == len(set(labels.values())) == g.number_of_nodes()
    assert set(labels.values()) == set(g.nodes()) and all(0 <= i < slots for i in labels)
    got = {(labels[a], labels[b]) for a, b in zip(src, dst)}
    assert got == set(g.edges())
    cyclic = any(len(c) > 1 for c in nx.strongly_connected_components(g))
    assert (acyclic_nodes(index) is None) == cyclic
    if not cyclic:
        assert acyclic_nodes(index) == g.number_of_nodes()
    # The verdict with the screen is the oracle's (its cycle search runs on a cyclic graph).
    assert _fingerprint(check_history(h, acyclic=acyclic_nodes)) == _fingerprint(check_history(h))
    return cyclic


def _mutate(h, rng: random.Random, n: int):
    """`n` seeded perturbations that make cycles: two ok sends of one partition swap offsets
    (a write-write edge turns against real time or a read), or an operation's times move."""
    sends = [o for o in h.ops if o.f == "send" and o.type == "ok"]
    for _ in range(n):
        if rng.random() < 0.6 and len(sends) > 1:
            a = rng.choice(sends)
            same = [s for s in sends if s.tp == a.tp and s is not a]
            if same:
                b = rng.choice(same)
                a.offset, b.offset = b.offset, a.offset
        else:
            op = rng.choice(h.ops)
            d = rng.randint(-20, 20)
            op.inv = max(0, op.inv + d)
            if op.comp is not None:
                op.comp = max(op.inv, op.comp + d)
                op.end = op.comp
    h.ops.sort(key=lambda o: (o.inv, o.id))
    return h


@pytest.mark.parametrize("planted", ("",) + PLANTABLE)
def test_transactional_histories_agree(planted):
    cyclic = 0
    for seed in range(12):
        h = generate_txn(seed, ops=80, partitions=2 + seed % 2, planted=planted)
        if seed % 3:
            _mutate(h, random.Random(seed), 1 + seed % 4)
        cyclic += _agrees(h)
    assert cyclic, "no mutation made a cycle: the test would not see a missed one"


def test_sparse_ids_are_mapped_to_slots():
    """Ids too sparse to be slots (and negative ones) take the mapped layout: the same graph."""
    from dataclasses import replace
    for seed, scale in ((1, 10**9), (2, -1)):
        h = generate_txn(seed, ops=60, partitions=2)
        if seed % 2:
            _mutate(h, random.Random(seed), 3)
        ids = {o.id: o.id * scale for o in h.ops}
        h.ops = [replace(o, id=ids[o.id]) for o in h.ops]
        assert any(o.txn is not None for o in h.ops)
        h.ops.sort(key=lambda o: (o.inv, o.id))
        labels, slots, _, _ = edges(build(h))
        assert slots == len(labels)         # the mapped layout: no isolated slot
        _agrees(h)


def test_plain_histories_agree():
    cyclic = 0
    for seed in range(8):
        cyclic += _agrees(small_log_history(seed, 40, mutate=seed % 5))
    for kind in ("G0-realtime", "G1c-realtime", None):
        h = generate(Params(seed=3, ops=600, partitions=2), {kind: 0.05} if kind else None)
        cyclic += _agrees(h)
    assert cyclic


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_jepsen_cases_agree(case, tmp_path):
    p = tmp_path / "history.edn"
    p.write_text("\n".join(case[1]) + "\n")
    _agrees(hj.load(p))


def test_acyclic_scan():
    def ok(n, es):
        return _scan.acyclic(n, array("q", [a for a, _ in es]), array("q", [b for _, b in es]))
    assert ok(0, []) and ok(3, []) and ok(4, [(0, 1), (1, 2), (0, 2), (3, 2)])
    assert not ok(3, [(0, 1), (1, 2), (2, 0)])
    assert not ok(1, [(0, 0)])                    # a self-loop is a cycle
    assert not ok(5, [(0, 1), (3, 4), (4, 3)])    # a cycle apart from the rest
    with pytest.raises(ValueError):
        ok(2, [(0, 2)])
    with pytest.raises(ValueError):
        _scan.acyclic(2, array("q", [0]), array("q", []))


def test_screen_decides_transactional_histories_above_the_search_bound():
    """Above cycle_max_ops the oracle builds no graph, and with transactions locality does not
    settle it (unknown); the screen's graph has no bound: an acyclic one is valid, a cyclic
    one is still unknown (the search is bounded), never valid."""
    h = generate_txn(4, ops=300, partitions=3)
    alone = {c.name: c for c in check_history(h, cycle_max_ops=50).checks}["cycles"]
    assert alone.status == "unknown" and alone.limited
    screened = {c.name: c for c in check_history(h, cycle_max_ops=50, acyclic=acyclic_nodes).checks}["cycles"]
    assert screened.status == "valid" and screened.examined == build_graph(build(h)).number_of_nodes()
    for seed in range(20):
        bad = _mutate(generate_txn(seed, ops=80, partitions=2), random.Random(seed), 3)
        if acyclic_nodes(build(bad)) is None:
            break
    else:
        pytest.fail("no seeded mutation made a cycle")
    c = {c.name: c for c in check_history(bad, cycle_max_ops=10, acyclic=acyclic_nodes).checks}["cycles"]
    assert c.status == "unknown" and c.limited
