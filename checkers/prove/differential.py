"""Differential testing of the symbolic encoding against spec's `step`.

For a reachable concrete state, the encoding (evaluated concretely, the same source text that
builds the z3 formulas) and spec must agree on which encoded actions are enabled and on each
successor, up to an order-preserving renaming of partition-state versions. `z3_agrees`
additionally runs the encoding through z3 itself (substitute the concrete state into the
symbolic guard and successor, simplify) to check that the symbolic path means what the
concrete path computes.
"""
from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from itertools import islice

import z3

from checkers.explore_reference import reachable
from checkers.prove.encoding import ENCODED_KINDS, Encoding, Unsupported
from checkers.prove.sym import value
from spec import Action, Model, State
from spec.model import normalize_versions as canon_versions


def _encoded(a: Action) -> bool:
    return a.kind in ENCODED_KINDS


@dataclass
class DiffReport:
    states: int = 0            # states compared
    skipped: int = 0           # states outside the encoding's bounds
    transitions: int = 0       # successors compared
    oob: int = 0               # successors past the encoding's bounds (not compared)
    kinds: Counter = field(default_factory=Counter)    # successors compared, per action kind
    problems: list = field(default_factory=list)


def compare_state(enc: Encoding, model: Model, s: State, report: DiffReport) -> None:
    try:
        d = enc.from_state(s)
    except Unsupported:
        report.skipped += 1
        return
    report.states += 1
    mine: dict[Action, State] = {}
    oob: set[Action] = set()
    for inst in enc.insts:
        if not inst.guard(d, inst):
            continue
        a = enc.spec_action(inst, d)
        t = enc.succ(inst, d)
        if t[("g", "oob")]:
            oob.add(a)
            continue
        if a in mine:
            report.problems.append((s, a, "encoded twice"))
        if not all(enc.shadow_links(t)):
            # the shadows are not in spec's State: the step must have carried them with the
            # write ids (the successor's write table is compared with spec's below)
            report.problems.append((s, a, "a slot's shadows are not its write's metadata"))
        mine[a] = canon_versions(enc.to_state(t))
    theirs = {a for a in model.enabled(s) if _encoded(a)}
    if set(mine) | oob != theirs:
        report.problems.append((s, None, f"enabled differ: encoding only {sorted(set(mine) | oob - theirs)}, "
                                         f"spec only {sorted(theirs - set(mine) - oob)}"))
        return
    report.oob += len(oob)
    for a, t in mine.items():
        report.transitions += 1
        report.kinds[a.kind] += 1
        want = canon_versions(model.step(s, a))
        if t != want:
            report.problems.append((s, a, _diff(t, want)))


def _diff(got: State, want: State) -> str:
    out = []
    for name in State._fields:
        g, w = getattr(got, name), getattr(want, name)
        if name == "brokers":
            for i, (gb, wb) in enumerate(zip(g, w)):
                for f in gb._fields:
                    if getattr(gb, f) != getattr(wb, f):
                        out.append(f"b{i}.{f}: encoding {getattr(gb, f)!r} spec {getattr(wb, f)!r}")
        elif g != w:
            out.append(f"{name}: encoding {g!r} spec {w!r}")
    return "; ".join(out)


def draw_states(model: Model, seed: int, count: int, walk_length: int = 60) -> list[State]:
    """Reachable states by seeded random walks (the simulator's walk, keeping every state)."""
    rng = random.Random(seed)
    out: list[State] = []
    while len(out) < count:
        s = model.initial()
        out.append(s)
        for _ in range(walk_length):
            acts = model.enabled(s)
            if not acts or len(out) >= count:
                break
            s = model.step(s, acts[rng.randrange(len(acts))])
            out.append(s)
    return out


def bfs_states(model: Model, limit: int) -> list[State]:
    """The first `limit` states of a breadth-first search (the explorer's order, no symmetry)."""
    return [s for _, s in islice(reachable(model), limit)]


def z3_agrees(enc: Encoding, states: list[State]) -> list[str]:
    """Check the symbolic path: the guard and successor formulas, built once over z3 variables
    and evaluated in a z3 model that fixes the variables to a concrete state, equal the
    concrete evaluation."""
    from checkers.prove.symstate import variables
    xs = variables(enc, "x")
    sym_g = {inst: inst.guard(xs, inst) for inst in enc.insts}
    sym_t = {inst: enc.succ(inst, xs) for inst in enc.insts}

    def val(m, v):
        if not z3.is_expr(v):
            return v
        return value(m.eval(v, model_completion=True))

    problems = []
    for s in states:
        try:
            d = enc.from_state(s)
        except Unsupported:
            continue
        sol = z3.Solver()
        sol.add([xs[k] == (z3.BitVecVal(v, xs[k].size()) if z3.is_bv(xs[k]) else v)
                 for k, v in d.items()])
        if sol.check() != z3.sat:
            problems.append("state constraints unsatisfiable")
            continue
        m = sol.model()
        for inst in enc.insts:
            cg = bool(inst.guard(d, inst))
            if bool(val(m, sym_g[inst])) != cg:
                problems.append(f"{inst.kind} b{inst.b} {inst.arg}: z3 guard differs (concrete {cg})")
                continue
            if not cg:
                continue
            ct = enc.succ(inst, d)
            for k, v in sym_t[inst].items():
                if v is xs[k]:
                    if ct[k] != d[k]:
                        problems.append(f"{inst.kind} b{inst.b} {inst.arg}: {k} kept by z3, changed concretely")
                        break
                    continue
                if val(m, v) != ct[k]:
                    problems.append(f"{inst.kind} b{inst.b} {inst.arg}: field {k} z3 {val(m, v)} "
                                    f"vs concrete {ct[k]}")
                    break
    return problems


def diameter(model: Model, limit: int = 200_000) -> int | None:
    """The diameter of the reachable state space: the largest breadth-first distance from the
    initial state (spec's own states, no symmetry reduction). Every reachable state is then
    reachable in at most that many steps, so BMC clean to that depth covers all of them.
    None when more than `limit` states are reachable (the bound on this search)."""
    depth = 0
    for n, (depth, _) in enumerate(reachable(model), 1):
        if n > limit:
            return None
    return depth


@dataclass
class ChainedReach:
    diameter: int | None       # the chained diameter (None: more than `limit` states)
    states: int                # reachable states found by chained steps
    layers: list = field(default_factory=list)   # new states per chained step (layers[0] = 1)


def chained_rank(enc: Encoding) -> dict[int, int]:
    """Instance number -> its position in the chained order (steps.chain_order)."""
    from checkers.prove.steps import chain_order
    return {i: n for n, i in enumerate(chain_order(enc))}


def chained_edges(model: Model, enc: Encoding, s: State,
                  rank: dict[int, int] | None = None) -> list[tuple[int, State]]:
    """spec's successors of s, each labelled with its instance's position in the chained order
    (steps.chain_order): the encoding names the instance (its guard at s's encoding), spec
    takes the step. ValueError if the encoded instances enabled at s are not exactly spec's
    enabled actions (a kind the encoding lacks would make the chained search miss states)."""
    from checkers.prove.bmc import spec_action_at
    rank = rank if rank is not None else chained_rank(enc)
    d = enc.from_state(s)
    out, acts = [], set()
    for idx, inst in enumerate(enc.insts):
        if inst.guard(d, inst):
            a = spec_action_at(enc, inst, d, s)
            acts.add(a)
            out.append((rank[idx], model.step(s, a)))
    if acts != set(model.enabled(s)):
        raise ValueError(f"encoded instances and spec's actions differ at a reachable state: "
                         f"{sorted(a.describe() for a in acts ^ set(model.enabled(s)))}")
    return out


def chained_successors(s: State, edges) -> set:
    """Every state one chained step leads to from s (s itself included: the step firing
    nothing): a sweep through the chained order, each position p adding the p-labelled
    successors of the states gathered so far. `edges(t)`: t's (position, successor) pairs. A
    state added at position p continues only with positions after p (each instance fires at
    most once per step)."""
    seen = {s}
    pending: dict[int, list] = {}
    for p, t in edges(s):
        pending.setdefault(p, []).append(t)
    while pending:
        p = min(pending)
        for t in pending.pop(p):
            if t in seen:
                continue
            seen.add(t)
            for q, u in edges(t):
                if q > p:
                    pending.setdefault(q, []).append(u)
    return seen


def chained_diameter(model: Model, enc: Encoding | None = None,
                     limit: int = 200_000) -> ChainedReach:
    """The chained diameter: the largest, over reachable states, of the fewest chained steps
    (bmc's `steps="chained"`, steps.chained_transition) that reach it, by a breadth-first
    search of spec's states whose successors are `chained_successors`. Every reachable state
    is then the end of a path of at most that many chained steps (a chained step is a
    sequential path, and every single action is a chained step, so the search finds exactly
    the sequentially reachable states: `states` equals what `diameter` counts). None when
    more than `limit` states are reachable."""
    enc = enc or Encoding(model.config)
    rank = chained_rank(enc)
    memo: dict = {}

    def edges(t):
        e = memo.get(t)
        if e is None:
            e = memo[t] = chained_edges(model, enc, t, rank)
        return e

    s0 = model.initial()
    seen = {s0}
    frontier = [s0]
    layers = [1]
    while frontier:
        nxt = []
        for s in frontier:
            for t in chained_successors(s, edges):
                if t not in seen:
                    seen.add(t)
                    nxt.append(t)
        if len(seen) > limit:
            return ChainedReach(None, len(seen), layers)
        if nxt:
            layers.append(len(nxt))
        frontier = nxt
    return ChainedReach(len(layers) - 1, len(seen), layers)
