"""Inductive proofs of invariants over the encoding, with the strengthening of
checkers/prove/strengthen.py, and counterexamples to induction (CTIs) as a readable pair of
states and the action between them.

P is proved when it and every strengthening conjunct hold initially (checked on spec's initial
state) and no step from a state satisfying all of them (and the encoding's bounds) leads to a
state violating any of them. MonotonicEpochs is a property of steps: proved when no step from a
state satisfying the strengthening goes back. A query that finds a step is a CTI: the
invariant is then reported unknown (the pre-state need not be reachable), unless spec can
reach the failing state, which BMC decides separately.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import z3

from checkers.prove.bmc import _solver, transition
from checkers.prove.encoding import Encoding
from checkers.prove.props import STATE_PROPS, step_holds
from checkers.prove.strengthen import NEEDS, STRENGTHENING
from checkers.prove.sym import AND, NOT
from checkers.prove.symstate import concretize, variables
from spec import Model

CORE = ("HwBelowLeo", "MonotonicEpochs", "LogMatching", "StrongIsr", "ReplicationQuorumSuperset")


@dataclass
class ProofResult:
    invariant: str
    verdict: str                 # "proved" | "unknown" | "refuted" (fails initially)
    seconds: float
    method: str = "induction"
    cti: str | None = None       # the counterexample to induction, as a story
    failing: str | None = None   # which conjunct the CTI breaks


def _z(x):
    return x if z3.is_expr(x) else z3.BoolVal(bool(x))


def prove(model: Model, name: str, *, strengthening: tuple[str, ...] | None = None,
          time_limit: float = 60.0) -> ProofResult:
    t0 = time.monotonic()
    enc = Encoding(model.config)
    strong = NEEDS.get(name, tuple(STRENGTHENING)) if strengthening is None else strengthening
    conj = {k: STRENGTHENING[k] for k in strong}
    if name != "MonotonicEpochs":
        conj = {name: STATE_PROPS[name], **conj}
    init = enc.from_state(model.initial())
    for k, f in conj.items():
        if not f(enc, init):
            return ProofResult(name, "refuted" if k == name else "unknown", time.monotonic() - t0,
                               failing=f"{k} fails in the initial state")
    s, t, ch = variables(enc, "pre"), variables(enc, "post"), z3.Int("act")
    sol = _solver()
    sol.set("timeout", max(1, int(time_limit * 1000)))
    sol.add([_z(f(enc, s)) for f in conj.values()])
    sol.add(transition(enc, s, t, ch))
    goals = {k: _z(f(enc, t)) for k, f in conj.items()}
    if name == "MonotonicEpochs":
        goals[name] = _z(step_holds(enc, s, t))
    sol.add(z3.Not(z3.And(list(goals.values()))))
    r = sol.check()
    secs = time.monotonic() - t0
    if r == z3.unsat:
        return ProofResult(name, "proved", secs)
    if r == z3.unknown:
        return ProofResult(name, "unknown", secs, failing=f"solver: {sol.reason_unknown()}")
    m = sol.model()
    broken = [k for k, g in goals.items() if z3.is_false(m.eval(g, model_completion=True))]
    return ProofResult(name, "unknown", secs, cti=cti_story(enc, m, s, t, ch), failing=", ".join(broken))


def cti_story(enc: Encoding, m, s, t, ch) -> str:
    """The CTI in the explorer's story format: the pre-state, the action, the post-state."""
    from spec.state import summary
    d, e = concretize(m, s), concretize(m, t)
    inst = enc.insts[m.eval(ch, model_completion=True).as_long()]
    a = enc.spec_action(inst, d)
    lines = ["  pre-state:"]
    for st, head in ((enc.to_state(d), None), (enc.to_state(e), a)):
        if head is not None:
            lines.append(f"    1. {head.describe()}")
            lines.append("  post-state:")
        sm = summary(st)
        lines += [f"         {x}" for x in [sm["zk"]] + sm["brokers"]]
        lines.append(f"         acked={sm['acked']} exposed={list(st.exposed)} in_flight={sm['in_flight']}")
    return "\n".join(lines)
