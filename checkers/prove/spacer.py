"""The replication encoding as constrained Horn clauses, solved by z3's Spacer (IC3/PDR):
deep counterexamples without unrolling, and proofs without hand-written lemmas.

One predicate Reach over the encoding's state fields (integer fields as z3 Ints: Spacer works
in linear integer arithmetic; bit-vectors would be bit-blasted per lemma):

    Reach(init)                                             spec's initial state
    Reach(s) ∧ guard_a(s) ∧ ¬oob(succ_a(s)) → Reach(succ_a(s))   one rule per action instance
                                                            (or `one_rule`: one rule, a choice)
    Reach(s) ∧ ¬Inv(s) → Err                                (MonotonicEpochs: over a step)

and the query Err. The `oob` exclusion is the encoding's bounds, as BMC and induction assume.

sat: a path to Err. The rule names along Spacer's trace (one rule per action instance) are the
action sequence; stepping the encoding along them gives the states; the path is replayed on
spec (bmc's `replay`) before it counts: replayed or it is not a refutation.

unsat: Spacer's inductive invariant for Reach is a candidate proof, checked independently by
three kinds of plain z3 queries before the verdict is "proved": it holds in the initial
state, it is preserved by every action instance's step (within the bounds), and it implies the
invariant (for MonotonicEpochs: no step from it goes back). Its size (conjuncts and AST nodes)
is reported.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import z3

from checkers.prove.bmc import BmcResult, bad, replay, smt_solver
from checkers.prove.encoding import Encoding
from checkers.prove.props import names_for
from checkers.prove.symstate import variables

METHOD = "spacer (IC3/PDR)"


@dataclass
class SpacerResult:
    status: str                      # "violation" | "proved" | "unknown"
    seconds: float
    depth: int = 0                   # steps of the counterexample
    bmc: BmcResult | None = None     # the replayed counterexample (as BMC reports one)
    invariant_size: tuple[int, int] | None = None    # (conjuncts, AST nodes) of the proof
    check_seconds: float = 0.0       # the independent check of the proof
    message: str = ""
    stats: dict = field(default_factory=dict)


def _z(x):
    return x if z3.is_expr(x) else z3.BoolVal(bool(x))


def _val(x):
    return x if z3.is_expr(x) else (z3.BoolVal(x) if isinstance(x, bool) else z3.IntVal(x))


class Horn:
    """The Horn clauses of one configuration and invariant selection."""

    def __init__(self, model, invariants: tuple[str, ...] | None = None, *, slots: int = 3,
                 epochs: int | None = None, one_rule: bool = False, claims: dict | None = None):
        self.model = model
        # claims: further state properties by name, (encoding, state) -> formula, checked
        # as the invariants are (a property of the encoding that spec does not name)
        self.claims = claims or {}
        self.enc = Encoding(model.config, slots=slots, epochs=epochs)
        self.names = names_for(model.config, invariants)
        self.keys = [k for k, _ in self.enc.schema()]
        sorts = [z3.BoolSort() if srt == "bool" else z3.IntSort() for _, srt in self.enc.schema()]
        self.reach = z3.Function("Reach", *sorts, z3.BoolSort())
        self.err = z3.Bool("Err")
        self.one_rule = one_rule
        self.time_limit = 0.0

    def app(self, st: dict):
        return self.reach(*[_val(st[k]) for k in self.keys])

    def fixedpoint(self, time_limit: float, seed: int = 0) -> z3.Fixedpoint:
        enc = self.enc
        self.time_limit = time_limit
        fp = z3.Fixedpoint()
        fp.set(engine="spacer")
        fp.set("timeout", max(1, int(time_limit * 1000)))
        fp.set("spacer.random_seed", seed)
        # keep the rules as written (one per action instance) so the trace names the actions
        fp.set("xform.slice", False)
        fp.set("xform.inline_linear", False)
        fp.set("xform.inline_eager", False)
        fp.register_relation(self.reach, self.err.decl())
        s = variables(enc, "s")
        fp.declare_var(*s.values())
        fp.rule(self.app(enc.from_state(self.model.initial())), name="init")
        if self.one_rule:
            from checkers.prove.bmc import transition
            t = variables(enc, "t")
            ch = z3.Int("choice")
            cons = transition(enc, s, t, ch)
            fp.declare_var(ch, *[v for v in t.values() if z3.is_expr(v)
                                 and v.decl().name().startswith("t.")])
            fp.rule(self.app(t), [self.app(s), *cons], name="step")
        else:
            for idx, inst in enumerate(enc.insts):
                g = inst.guard(s, inst)
                if g is False:
                    continue
                t = enc.succ(inst, s)
                body = [self.app(s), _z(g), z3.Not(_z(t[("g", "oob")]))]
                fp.rule(self.app(t), body, name=f"a{idx}")
        badf = _bad_state(self)
        fp.rule(self.err, [self.app(s), badf(s)], name="bad")
        self.s = s
        return fp


def _bad_state(h: Horn):
    """¬Inv as a formula over a state (MonotonicEpochs, a property of steps, is handled by
    `_step_rules` as extra rules)."""
    state_names = [n for n in h.names if n != "MonotonicEpochs"]

    def f(s):
        out = [z3.Not(_z(c(h.enc, s))) for c in h.claims.values()]
        if state_names:
            out.append(_z(bad(h.enc, state_names, None, s)))
        return z3.Or(out) if out else z3.BoolVal(False)
    return f


def _step_rules(h: Horn, fp: z3.Fixedpoint) -> None:
    """MonotonicEpochs: Reach(s) ∧ guard_a(s) ∧ an epoch goes back in succ_a(s) → Err."""
    from checkers.prove.props import step_holds
    s = h.s
    for idx, inst in enumerate(h.enc.insts):
        g = inst.guard(s, inst)
        if g is False:
            continue
        t = h.enc.succ(inst, s)
        back = z3.Not(_z(step_holds(h.enc, s, t)))
        if z3.is_false(z3.simplify(back)):
            continue
        fp.rule(h.err, [h.app(s), _z(g), z3.Not(_z(t[("g", "oob")])), back], name=f"m{idx}")


def spacer(model, invariants: tuple[str, ...] | None = None, *, time_limit: float = 300.0,
           slots: int = 3, epochs: int | None = None, one_rule: bool = False,
           seed: int = 0, claims: dict | None = None) -> SpacerResult:
    """Spacer on the Horn clauses of `model` for `invariants` (None: every active one; each
    checked together: Err is reachable when any fails). `one_rule`: one step rule choosing
    among the instances instead of one rule per instance. A "proved" verdict comes only after
    the independent check of Spacer's invariant; a "violation" carries the replayed path in
    `bmc` (its `problem` set when spec does not reproduce it)."""
    t0 = time.monotonic()
    if model.config.producers:
        # the encoding's write slots bound the producers' paths: a rule that drops successors
        # past them would make a proof cover only paths within the slots (induction proves
        # the slots instead, checkers/prove/induction.py)
        return SpacerResult("unknown", 0.0, message="producers are not encoded for Spacer")
    h = Horn(model, invariants, slots=slots, epochs=epochs, one_rule=one_rule, claims=claims)
    if not h.names and not h.claims:
        return SpacerResult("unknown", 0.0, message="no invariant applies (spec's scoping)")
    fp = h.fixedpoint(time_limit, seed)
    if "MonotonicEpochs" in h.names:
        _step_rules(h, fp)
    try:
        r = fp.query(h.err)
    except z3.Z3Exception as e:      # the time limit cancels the query
        return SpacerResult("unknown", time.monotonic() - t0, stats=_stats(fp),
                            message="time limit" if b"cancel" in e.value else f"spacer: {e.value!r}")
    secs = time.monotonic() - t0
    stats = _stats(fp)
    if r == z3.unknown:
        return SpacerResult("unknown", secs, message=f"spacer: {fp.reason_unknown()}", stats=stats)
    if r == z3.sat:
        return _counterexample(h, fp, t0, stats)
    inv = _invariant(h, fp)
    left = max(1.0, time_limit - secs)
    t1 = time.monotonic()
    why = check_invariant(h, inv, time_limit=left)
    check = time.monotonic() - t1
    size = (len(_conjuncts(inv)), _ast_size(inv))
    if why:
        return SpacerResult("unknown", time.monotonic() - t0, invariant_size=size,
                            check_seconds=check, stats=stats,
                            message=f"spacer's invariant fails its independent check: {why}")
    return SpacerResult("proved", time.monotonic() - t0, invariant_size=size, check_seconds=check,
                        stats=stats, message=f"inductive invariant of {size[0]} conjuncts "
                                             f"({size[1]} AST nodes), checked independently")


def _stats(fp) -> dict:
    out = {}
    try:
        st = fp.statistics()
        for k in st.keys():
            out[k] = st.get_key_value(k)
    except z3.Z3Exception:
        pass
    return out


# --- unsat: the inductive invariant -------------------------------------------------------------

def _invariant(h: Horn, fp) -> z3.ExprRef:
    """Spacer's interpretation of Reach, as a formula over the state variables `h.s`."""
    phi = fp.get_cover_delta(-1, h.reach)
    # the cover is over de Bruijn variables 0 .. n-1, one per argument
    return z3.substitute_vars(phi, *[h.s[k] for k in h.keys])


def check_invariant(h: Horn, inv, *, time_limit: float = 300.0) -> str | None:
    """None when `inv` (over h.s) holds initially, is preserved by every action instance's step
    within the encoding's bounds, and implies the invariants (for MonotonicEpochs: no step from
    a state satisfying it goes back); else which of the three fails. Plain z3 queries, no
    Spacer: the proof is checked, not trusted."""
    from checkers.prove.props import step_holds
    t0 = time.monotonic()
    enc, s = h.enc, h.s
    init = enc.from_state(h.model.initial())
    sub = [(s[k], _val(init[k])) for k in h.keys]
    if not z3.is_true(z3.simplify(z3.substitute(inv, *sub))):
        sol = smt_solver()
        sol.add(z3.Not(z3.substitute(inv, *sub)))
        if sol.check() != z3.unsat:
            return "it does not hold in the initial state"

    def unsat(*fs) -> bool | None:
        sol = smt_solver()
        sol.set("timeout", max(1, int((time_limit - (time.monotonic() - t0)) * 1000)))
        sol.add(*fs)
        r = sol.check()
        return None if r == z3.unknown else r == z3.unsat

    state_names = [n for n in h.names if n != "MonotonicEpochs"]
    if state_names or h.claims:
        ok = unsat(inv, _bad_state(h)(s))
        if not ok:
            return ("it does not imply " + ", ".join(state_names)) if ok is False else "solver gave up"
    for inst in enc.insts:
        g = inst.guard(s, inst)
        if g is False:
            continue
        t = enc.succ(inst, s)
        post = z3.substitute(inv, *[(s[k], _val(t[k])) for k in h.keys if t[k] is not s[k]])
        goals = [post]
        if "MonotonicEpochs" in h.names:
            goals.append(_z(step_holds(enc, s, t)))
        ok = unsat(inv, _z(g), z3.Not(_z(t[("g", "oob")])), z3.Not(z3.And(goals)))
        if not ok:
            what = f"{inst.kind} b{inst.b} {inst.arg}"
            return f"not preserved by {what}" if ok is False else f"solver gave up on {what}"
    return None


def _conjuncts(f) -> list:
    return list(f.children()) if z3.is_and(f) else [f]


def _ast_size(f) -> int:
    seen, todo = set(), [f]
    while todo:
        e = todo.pop()
        if e.get_id() in seen:
            continue
        seen.add(e.get_id())
        todo.extend(e.children())
    return len(seen)


# --- sat: the counterexample ---------------------------------------------------------------------

def _counterexample(h: Horn, fp, t0: float, stats: dict) -> SpacerResult:
    """The path Spacer found, as spec actions replayed on spec. With one rule per action
    instance, the rule names along Spacer's trace are the instances in order: stepping the
    encoding concretely from the initial state along them gives the states (z3 5.4's ground
    answer for these clauses is empty, so it is not used). With `one_rule` (every step is the
    rule "step"), the trace gives only the depth: BMC at that depth finds the path."""
    names = [n for n in reversed(fp.get_rule_names_along_trace()) if n.startswith(("a", "m"))
             or n == "step"]
    depth = len(names)
    enc = h.enc
    if h.one_rule:
        from checkers.prove.bmc import bmc
        left = max(1.0, h.time_limit - (time.monotonic() - t0))
        r = bmc(h.model, depth, invariants=tuple(h.names), time_limit=left)
        status = "violation" if r.status == "violation" else "unknown"
        return SpacerResult(status, time.monotonic() - t0, depth=r.depth, bmc=r, stats=stats,
                            message=f"spacer: a path of {depth} steps; BMC at that depth: "
                                    f"{r.status}" + (f" ({r.problem})" if r.problem else ""))
    # the last step into Err (a MonotonicEpochs rule "m<idx>") is a step of the path too
    d = enc.from_state(h.model.initial())
    states, choices = [d], []
    for n in names:
        idx = int(n[1:])
        inst = enc.insts[idx]
        if inst.guard(d, inst) is not True:
            return SpacerResult("unknown", time.monotonic() - t0, depth=depth, stats=stats,
                                message=f"spacer's trace takes {inst.kind} where the encoding "
                                        f"does not enable it")
        d = enc.succ(inst, d)
        states.append(d)
        choices.append(z3.IntVal(idx))      # choices[k] leads from states[k]
    r = replay(h.model, enc, _Concrete(), states, choices, h.names, t0)
    if r.problem and h.claims and len(r.states) == depth:
        # spec knows no claim: the claim broken is read off spec's last state, re-encoded
        last = enc.from_state(r.states[-1])
        broken = [n for n, c in h.claims.items() if not c(enc, last)]
        if broken:
            r.invariant, r.problem = broken[0], None
            r.message = f"spec's state after {depth} steps breaks the claim {broken[0]}"
    return SpacerResult("violation", time.monotonic() - t0, depth=depth, bmc=r, stats=stats,
                        message=r.message or "")


class _Concrete:
    """Stands in for a z3 model where every term is already ground: evaluation simplifies."""

    def eval(self, e, model_completion=True):
        return z3.simplify(e)
