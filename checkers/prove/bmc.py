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
from checkers.prove.sym import AND, IF, NOT, OR, bitvectors, int_var, value
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


def _zb(x):
    return x if z3.is_expr(x) else z3.BoolVal(bool(x))


def _bit_solver():
    """For bit-vector unrollings: bit-blast to SAT."""
    return z3.Then("simplify", "propagate-values", "solve-eqs", "bit-blast", "sat").solver()


def _solver():
    return z3.Then("simplify", "propagate-values", "solve-eqs", "smt").solver()


def bad(enc: Encoding, names: list[str], prev, s):
    out = [NOT(STATE_PROPS[n](enc, s)) for n in names if n in STATE_PROPS]
    if "MonotonicEpochs" in names and prev is not None:
        out.append(NOT(step_holds(enc, prev, s)))
    return OR(*out)


def bmc(model: Model, depth: int, *, invariants: tuple[str, ...] | None = None,
        time_limit: float = 60.0, progress: Callable[[int, float], None] | None = None,
        exhaustive: bool = False, writes: int | None = None, bits: int = 0,
        one_query: bool = False, guide: list | None = None, guide_tail: int = 0) -> BmcResult:
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
    leaves it only near the end) — a further under-approximation, far cheaper to search."""
    if guide and not one_query:
        raise ValueError("a guide under-approximates: only with one_query")
    with bitvectors(bits):
        return _bmc(model, depth, invariants, time_limit, progress, exhaustive, writes, bits,
                    one_query, guide, guide_tail)


def _bmc(model, depth, invariants, time_limit, progress, exhaustive, writes, bits,
         one_query=False, guide=None, guide_tail=0) -> BmcResult:
    cfg = model.config
    enc = Encoding(cfg, writes=writes)
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
        ch = int_var(f"a{k}")
        cons += transition(enc, states[-1], nxt, ch, stutter=exhaustive or one_query,
                           keep_oob=exhaustive)
        if (exhaustive or one_query) and choices:
            cons.append(z3.Implies(choices[-1] == -1, ch == -1))     # stutter only at the end
        if guide:
            cons += [_zb(f(enc, nxt)) for f, to_end in guide if to_end or k <= depth - guide_tail]
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
        sol = _bit_solver() if bits else _solver()
        sol.add(cons)
        b = OR(*viol, *oob) if exhaustive else b
        sol.add(b if z3.is_expr(b) else z3.BoolVal(bool(b)))
        sol.set("timeout", max(1, int(left * 1000)))
        r = sol.check()
        if progress:
            progress(k, time.monotonic() - t0)
        if r == z3.sat and exhaustive and any(
                z3.is_true(sol.model().eval(_zb(o), model_completion=True)) for o in oob):
            return BmcResult("unknown", depth, time.monotonic() - t0,
                             message="a path leaves the encoding's bounds (more writes or "
                                     "requests than its slots): no verdict")
        if r == z3.sat:
            return _replay(model, enc, sol.model(), states, choices, names, t0,
                           viol if exhaustive or one_query else None)
        if r == z3.unknown:
            return BmcResult("unknown", k - 1, time.monotonic() - t0)
        if one_query:
            return BmcResult("unknown", depth, time.monotonic() - t0,
                             message=f"no path of at most {depth} steps within the slots ends in "
                                     f"a violation (a search for a refutation: proves nothing)")
    return BmcResult("clean", depth, time.monotonic() - t0)


def _replay(model: Model, enc: Encoding, m, states, choices, names, t0, viol=None) -> BmcResult:
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
        a = enc.spec_action(inst, d)
        if a not in model.enabled(s):
            return BmcResult("violation", depth, time.monotonic() - t0, actions=actions, states=out,
                             problem=f"step {depth}: z3 takes '{a.describe()}', which spec does not enable")
        t = model.step(s, a)
        actions.append(a)
        out.append(t)
        v = (model.step_violation(s, t) if "MonotonicEpochs" in names else None) or violated(model.config, t, invs)
        s = t
        if v and viol is not None:
            agree = z3.is_true(m.eval(_zb(viol[k]), model_completion=True))
            return BmcResult("violation", depth, time.monotonic() - t0, v[0], v[1], actions, out,
                             None if agree else f"spec finds {v[0]} at step {depth}, where z3 "
                                                f"sees no violation")
        if v:
            return BmcResult("violation", depth, time.monotonic() - t0, v[0], v[1], actions, out,
                             None if depth == len(choices) else
                             f"spec finds {v[0]} at step {depth}, z3 at {len(choices)}")
    return BmcResult("violation", len(choices), time.monotonic() - t0, actions=actions, states=out,
                     problem="spec reproduces the path but finds no violation at its end")
