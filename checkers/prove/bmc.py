"""Bounded model checking: unroll the encoding k steps from spec's initial state and ask z3 for
a path that violates an invariant. A path found is replayed on spec (the explicit model) before
it is reported; a path spec does not reproduce is an engine disagreement, reported as such.

Each step chooses one action instance (an integer variable); the next state's fields are fresh
variables equal to the chosen instance's successor. Successors past the encoding's bounds
(`oob`) are excluded, so BMC under-approximates only by those bounds.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

import z3

from checkers.prove.encoding import Encoding
from checkers.prove.props import STATE_PROPS, names_for, step_holds
from checkers.prove.steps import (chain_order, chained_transition, interfering_pairs,
                                  parallel_transition, read_write_sets)
from checkers.prove.sym import AND, IF, NOT, OR, as_bool, bitvectors, int_var, value
from checkers.prove.symstate import concretize, variables
from spec import Action, Model, State
from spec.invariants import selected, violated


@dataclass
class BmcResult:
    status: str                    # "violation" | "clean" (no violation up to depth) | "unknown"
    depth: int                     # depth of the violation, or the deepest depth checked
    seconds: float
    invariant: str | None = None
    message: str | None = None
    actions: list[Action] = field(default_factory=list)
    states: list[State] = field(default_factory=list)
    problem: str | None = None     # set when spec does not reproduce the path
    steps: list[int] = field(default_factory=list)   # parallel/chained: actions per step


def transition(enc: Encoding, s: dict, t: dict, choice, *, stutter: bool = False,
               keep_oob: bool = False) -> list:
    """Constraints: t is the successor of s under the instance numbered `choice` (with
    `stutter`, choice -1 keeps s). A field that no instance can change at this step (every
    guard that names it folds to false) is not constrained here: `unrolled` reuses s's value
    for it instead of t's variable, so values that stay concrete keep folding in later steps."""
    merged: dict = {}
    guards = [choice == -1] if stutter else []
    for idx, inst in enumerate(enc.insts):
        g = inst.guard(s, inst)
        if g is False:
            continue
        guards.append(AND(choice == idx, g))
        succ = enc.succ(inst, s)
        for k, v in succ.items():
            if v is not s[k]:
                merged.setdefault(k, []).append((idx, v))
    cons = [OR(*guards) if guards else False]
    for k, tv in t.items():
        if k not in merged:
            t[k] = s[k]
            continue
        v = s[k]
        for idx, sv in merged[k]:
            v = IF(choice == idx, sv, v)
        cons.append(tv == v)
    if not keep_oob:
        cons.append(NOT(t[("g", "oob")]))
    return [c if z3.is_expr(c) else z3.BoolVal(bool(c)) for c in cons]


def independent_pairs(enc: Encoding) -> list[tuple[int, int]]:
    """Pairs (a, b), a < b, of action instances that commute everywhere: neither writes a field
    the other reads (guard or successor) or writes. Read and write sets come from the symbolic
    guard and successor over a state of free variables (steps.read_write_sets), so they
    over-approximate (a field a successor rebuilds unchanged counts as written). The `oob`
    flag is left out: every instance only ORs into it, and a path that sets it is excluded in
    either order."""
    rw = read_write_sets(enc)
    bad = interfering_pairs(rw)
    return [(a, b) for a in range(len(rw)) for b in range(a + 1, len(rw)) if (a, b) not in bad]


def choice_var(name: str, count: int, bits: int):
    """The step's instance number (-1: stutter). Over bit-vectors, wide enough for `count`
    instances whatever the fields' width (a narrower one would wrap instance numbers)."""
    if not bits:
        return int_var(name)
    return z3.BitVec(name, max(bits, count.bit_length() + 1))


def _bit_solver():
    """For bit-vector unrollings: bit-blast to SAT."""
    return z3.Then("simplify", "propagate-values", "solve-eqs", "bit-blast", "sat").solver()


def smt_solver():
    return z3.Then("simplify", "propagate-values", "solve-eqs", "smt").solver()


def bad(enc: Encoding, names: list[str], prev, s):
    out = [NOT(STATE_PROPS[n](enc, s)) for n in names if n in STATE_PROPS]
    if "MonotonicEpochs" in names and prev is not None:
        out.append(NOT(step_holds(enc, prev, s)))
    return OR(*out)


def bmc(model: Model, depth: int, *, invariants: tuple[str, ...] | None = None,
        time_limit: float = 60.0, progress: Callable[[int, float], None] | None = None,
        exhaustive: bool = False, writes: int | None = None, bits: int = 0,
        one_query: bool = False, guide: list | None = None, guide_tail: int = 0,
        slots: int = 3, epochs: int | None = None, por: bool = False,
        steps: str = "sequential") -> BmcResult:
    """Depth by depth: the first depth with a violation (a shortest counterexample). With
    `exhaustive`, one query at `depth` over paths that may stop early (trailing stutter
    steps): a violation within `depth` steps (not necessarily a shortest one), or "clean":
    no path of at most `depth` steps reaches one. There a step past the encoding's bounds is
    not excluded but sought as well (found: "unknown", the bounds were too small), so the
    encoding's slots may be chosen small (`writes`: producer writes and log slots) without
    losing soundness. `bits`: integer fields as signed bit-vectors of that width, solved by
    bit-blasting to SAT (sym.bitvectors).

    `one_query`, a search for a refutation only: one query at `depth` over paths that may stop
    early (trailing stutter), asking for a violation in the final state, paths past the
    encoding's slots excluded. It under-approximates (a violation that later goes away, or a
    path needing more slots, is not sought), so "clean" proves nothing: the answer is then
    "unknown"; a path found is replayed on spec like any other. `guide` (with `one_query`):
    (formula over an encoded state, to_end) pairs; every state of the path must satisfy the
    formulas with to_end, every state but the last `guide_tail` the others
    (strengthen_producers.guide: the search follows the producer's normal behaviour and
    leaves it only near the end) — a further under-approximation, far cheaper to search.
    A guide of lemmas proved inductive for the configuration (checkers/prove/guided.py,
    `guide_tail` 0) removes only unreachable states: no path is lost.

    `slots` (in-flight LeaderAndIsr requests per broker) and `epochs` (leader epochs) are the
    encoding's own bounds: smaller ones shrink the unrolling; a path they cut is not sought
    (depth by depth, `one_query`) or is reported unknown (`exhaustive`).

    `por`: partial-order reduction. Two consecutive steps that take independent instances
    (`independent_pairs`) must take them in increasing instance order. Any path can be
    reordered so (swap adjacent independent steps until sorted: each swap keeps both steps
    enabled and the end state the same), so every state reachable in k steps is still
    reached in k steps, and a violating end state still found; intermediate states may
    differ, so a depth-by-depth search may report a later first violation along the
    path it finds, never a deeper first depth.

    `steps="parallel"`: each step fires a set of pairwise non-interfering instances
    (checkers/prove/steps.py, the ∀-step semantics); `depth` counts such steps. A path found
    is linearised (each set in instance order) and replayed on spec, which must reach z3's
    state after every step; the result's `steps` gives the actions fired per step, its
    `actions` the linearised path. Clean to depth k: no state reachable in at most k parallel
    steps violates (steps.py says which sequential paths that covers). Depth by depth, every
    step fires at least one instance; with `one_query`, empty steps only at the end. Not with
    `exhaustive` or `por`.

    `steps="chained"`: each step runs through every instance in a fixed order
    (steps.CHAIN_ORDER) firing any subsequence, each seeing what its predecessors in the step
    left (the relaxed ∃-step semantics): a step is a sequential path by construction, and
    causal chains in that order fit in one step. Replayed as for parallel steps, each step in
    that order. Clean to depth k: no state reachable by at most k such steps violates.

    `steps="chained"` with `exhaustive`: one query at `depth` over chained paths whose empty
    steps (firing nothing) come only at the end, asking for a violation at any step's end or
    a step past the encoding's bounds (inside a step too: the `oob` flag is sticky). Clean at
    `depth` D is a proof, at these bounds, that no reachable state violates when D is at least
    the chained diameter (differential.chained_diameter): every reachable state is the end
    of a path of at most D chained steps, padded with empty steps to exactly D; that path
    stays within the encoding's bounds (or the query would have found the path leaving them,
    "unknown"), where the encoding's step is spec's (the differential tests), so its end
    state is one of the step ends the query asks about, and it violates nothing. States
    inside a step are not asked about, and need not be: each is itself reachable, so the end
    of another such path."""
    if guide and not one_query:
        raise ValueError("a guide under-approximates: only with one_query")
    if steps not in ("sequential", "parallel", "chained"):
        raise ValueError(f"steps: sequential, parallel or chained, not {steps!r}")
    if steps != "sequential" and por:
        raise ValueError(f"{steps} steps: not with por")
    if steps == "parallel" and exhaustive:
        raise ValueError("parallel steps: not with exhaustive")
    with bitvectors(bits):
        return _bmc(model, depth, invariants, time_limit, progress, exhaustive, writes, bits,
                    one_query, guide, guide_tail, slots, epochs, por, steps)


def _bmc(model, depth, invariants, time_limit, progress, exhaustive, writes, bits,
         one_query=False, guide=None, guide_tail=0, slots=3, epochs=None, por=False,
         steps="sequential") -> BmcResult:
    cfg = model.config
    enc = Encoding(cfg, writes=writes, slots=slots, epochs=epochs)
    # b -> the instances a < b independent of it, which may not directly follow it
    before: dict[int, list[int]] = {}
    if por:
        for a, b in independent_pairs(enc):
            before.setdefault(b, []).append(a)
    multi = steps != "sequential"          # a step fires a set of instances
    conflicts = sorted(interfering_pairs(read_write_sets(enc))) if steps == "parallel" else []
    order = chain_order(enc) if steps == "chained" else None
    names = names_for(cfg, invariants)
    t0 = time.monotonic()
    s0 = enc.from_state(model.initial())
    states = [s0]
    choices = []
    cons: list = []
    viol, oob = [], []
    for k in range(1, depth + 1):
        left = time_limit - (time.monotonic() - t0)
        if left <= 0:
            return BmcResult("unknown", k - 1, time.monotonic() - t0)
        nxt = variables(enc, f"s{k}")
        if multi:
            ch = [z3.Bool(f"f{k}.{i}") for i in range(len(enc.insts))]
            cons += (chained_transition(enc, states[-1], nxt, ch, order, keep_oob=exhaustive)
                     if order else parallel_transition(enc, states[-1], nxt, ch, conflicts))
            some = z3.Or(ch)
            if not (one_query or exhaustive):
                cons.append(some)
            elif choices:                                           # empty steps only at the end
                cons.append(z3.Implies(z3.Not(z3.Or(choices[-1])), z3.Not(some)))
        else:
            ch = choice_var(f"a{k}", len(enc.insts), bits)
            cons += transition(enc, states[-1], nxt, ch, stutter=exhaustive or one_query,
                               keep_oob=exhaustive)
        if not multi and (exhaustive or one_query) and choices:
            cons.append(z3.Implies(choices[-1] == -1, ch == -1))     # stutter only at the end
        if before and choices:
            prev = choices[-1]
            for b, earlier in before.items():
                cons.append(z3.Implies(prev == b, AND(*(ch != a for a in earlier))))
        if guide:
            cons += [as_bool(f(enc, nxt)) for f, to_end in guide if to_end or k <= depth - guide_tail]
        states.append(nxt)
        choices.append(ch)
        b = bad(enc, names, states[-2], nxt)
        viol.append(b)
        if exhaustive:
            oob.append(nxt[("g", "oob")])
        if (exhaustive or one_query) and k < depth:
            continue
        # One query per depth through a simplifying tactic pipeline: measured faster than an
        # incremental solver (reference/spark.md).
        sol = _bit_solver() if bits else smt_solver()
        sol.add(cons)
        b = OR(*viol, *oob) if exhaustive else b
        sol.add(b if z3.is_expr(b) else z3.BoolVal(bool(b)))
        sol.set("timeout", max(1, int(left * 1000)))
        r = sol.check()
        if progress:
            progress(k, time.monotonic() - t0)
        if r == z3.sat and exhaustive and any(
                z3.is_true(sol.model().eval(as_bool(o), model_completion=True)) for o in oob):
            return BmcResult("unknown", depth, time.monotonic() - t0,
                             message="a path leaves the encoding's bounds (more writes or "
                                     "requests than its slots): no verdict")
        if r == z3.sat and multi:
            return _replay_steps(model, enc, sol.model(), states, choices, names, t0,
                                 one_query or exhaustive, order)
        if r == z3.sat:
            return replay(model, enc, sol.model(), states, choices, names, t0,
                           viol if exhaustive or one_query else None)
        if r == z3.unknown:
            return BmcResult("unknown", k - 1, time.monotonic() - t0)
        if one_query:
            return BmcResult("unknown", depth, time.monotonic() - t0,
                             message=f"no path of at most {depth} steps within the slots ends in "
                                     f"a violation (a search for a refutation: proves nothing)")
    return BmcResult("clean", depth, time.monotonic() - t0)


def spec_action_at(enc: Encoding, inst, d: dict, s: State) -> Action:
    """The spec action of an instance at z3's state d, spec being at s. A Deliver or Lose names
    its message by slot: the slot-th request to that broker in spec's message order (the
    encoding keeps versions as growing integers where spec renumbers them densely, so the
    version in z3's message may differ from spec's by that renaming; the other fields must
    agree, or the action is left as z3 names it and replay reports the disagreement)."""
    a = enc.spec_action(inst, d)
    if inst.kind in ("Deliver", "Lose"):
        dst, k = inst.arg
        mine = [m[1:] for m in s.msgs if m[0] == dst]
        if k < len(mine) and mine[k][:4] == a.arg[:4]:
            return Action(a.kind, a.b, mine[k])
        # A path from an arbitrary state (a k-induction CTI) may leave slots below k empty, so
        # the slot number is not spec's position: then the one message to that broker agreeing
        # on every field but the version, if there is exactly one.
        same = {m for m in mine if m[:4] == a.arg[:4]}
        if len(same) == 1:
            return Action(a.kind, a.b, same.pop())
    return a


def replay(model: Model, enc: Encoding, m, states, choices, names, t0, viol=None) -> BmcResult:
    """Turn the z3 path into spec actions and run them on spec. With `viol` (exhaustive mode:
    z3's violation formula per step), the path is cut at spec's first violation, where z3's
    formula must hold too."""
    only = tuple(n for n in names if n != "MonotonicEpochs")
    invs = selected(model.config, only)      # a client invariant asked by name counts too
    s = model.initial()
    actions, out = [], []
    picked = [value(m.eval(ch, model_completion=True)) for ch in choices]
    real = [k for k, c in enumerate(picked) if c >= 0]          # stutter steps (-1) dropped
    choices = [choices[k] for k in real]
    for depth, k in enumerate(real, 1):
        d = concretize(m, states[k])
        inst = enc.insts[picked[k]]
        a = spec_action_at(enc, inst, d, s)
        if a not in model.enabled(s):
            return BmcResult("violation", depth, time.monotonic() - t0, actions=actions, states=out,
                             problem=f"step {depth}: z3 takes '{a.describe()}', which spec does not enable")
        t = model.step(s, a)
        actions.append(a)
        out.append(t)
        v = (model.step_violation(s, t) if "MonotonicEpochs" in names else None) or violated(model.config, t, invs)
        s = t
        if v and viol is not None:
            agree = z3.is_true(m.eval(as_bool(viol[k]), model_completion=True))
            return BmcResult("violation", depth, time.monotonic() - t0, v[0], v[1], actions, out,
                             None if agree else f"spec finds {v[0]} at step {depth}, where z3 "
                                                f"sees no violation")
        if v:
            return BmcResult("violation", depth, time.monotonic() - t0, v[0], v[1], actions, out,
                             None if depth == len(choices) else
                             f"spec finds {v[0]} at step {depth}, z3 at {len(choices)}")
    return BmcResult("violation", len(choices), time.monotonic() - t0, actions=actions, states=out,
                     problem="spec reproduces the path but finds no violation at its end")


def _replay_steps(model: Model, enc: Encoding, m, states, fires, names, t0,
                     one_query: bool, order: list[int] | None = None) -> BmcResult:
    """A parallel path: each step's set fired on spec in instance order, each action named
    from z3's state before the step (its members read nothing another writes). A chained path
    (`order`): each step's instances fired in that order, each action named from the
    encoding's state where it fires (z3's state before the step, stepped concretely through
    its predecessors in the step).
    After each step spec's state must be z3's, up to the renumbering of versions.
    spec's first violation ends the replay: depth by depth it must fall in the last step (a
    violation inside an earlier step would be a state z3 found clean at that depth); with
    `one_query` (a one-query search, or exhaustive: z3 asked of the last step, or of any), in
    any step. The result's `steps` counts the
    actions replayed per step (the last step's set may have more than reached the violation)."""
    from spec.model import normalize_versions as canon
    only = tuple(n for n in names if n != "MonotonicEpochs")
    invs = selected(model.config, only)
    fired = [[i for i, f in enumerate(fs) if z3.is_true(m.eval(f, model_completion=True))]
             for fs in fires]
    while fired and not fired[-1]:
        fired.pop()                                   # trailing empty steps (one_query)
    s = model.initial()
    actions, out, sizes = [], [], [len(f) for f in fired]
    total, done = sum(sizes), 0
    rank = {i: n for n, i in enumerate(order)} if order else {}
    for k, step in enumerate(fired):
        d = concretize(m, states[k])
        for n, i in enumerate(sorted(step, key=lambda i: rank.get(i, i)), 1):
            a = spec_action_at(enc, enc.insts[i], d, s)
            if order:           # the encoding's state where the next instance of the step fires
                d = enc.succ(enc.insts[i], d)
            done += 1
            if a not in model.enabled(s):
                return BmcResult("violation", k + 1, time.monotonic() - t0, actions=actions,
                                 states=out, steps=sizes,
                                 problem=f"step {k + 1} (action {done} of {total}): z3 "
                                         f"takes '{a.describe()}', which spec does not enable")
            t = model.step(s, a)
            actions.append(a)
            out.append(t)
            v = ((model.step_violation(s, t) if "MonotonicEpochs" in names else None)
                 or violated(model.config, t, invs))
            s = t
            if v:
                late = not one_query and k + 1 != len(fired)
                return BmcResult("violation", k + 1, time.monotonic() - t0, v[0], v[1], actions,
                                 out, None if not late else
                                 f"spec finds {v[0]} in step {k + 1}, z3 at {len(fired)}",
                                 steps=sizes[:k] + [n])
        if canon(enc.to_state(concretize(m, states[k + 1]))) != canon(s):
            return BmcResult("violation", k + 1, time.monotonic() - t0, actions=actions,
                             states=out, steps=sizes,
                             problem=f"after step {k + 1} spec's state is not z3's")
    return BmcResult("violation", len(fired), time.monotonic() - t0, actions=actions, states=out,
                     steps=sizes, problem="spec reproduces the path but finds no violation at its end")
