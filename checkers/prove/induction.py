"""Inductive proofs of invariants over the encoding, with the strengthening of
checkers/prove/strengthen.py, and counterexamples to induction (CTIs) as a readable pair of
states and the action between them.

P is proved when it and every strengthening conjunct hold initially (checked on spec's initial
state) and no step from a state satisfying all of them (and the encoding's bounds) leads to a
state violating any of them. MonotonicEpochs is a property of steps: proved when no step from a
state satisfying the strengthening goes back. A query that finds a step is a CTI: the
invariant is then reported unknown (the pre-state need not be reachable), unless spec can
reach the failing state, which BMC decides separately.

The producer invariants use the strengthening strengthen.producer_needs picks (the quiet-broker
set of checkers/prove/strengthen_producers.py, else the epoch or replicated set of
checkers/prove/strengthen_epochs.py; else: unknown, saying why); for them the encoding's slots
are a goal of the step, not an assumption, so a proof with few write slots
(strengthen_epochs.write_slots) still covers every reachable state.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import z3

from checkers.prove.bmc import _solver
from checkers.prove.encoding import Encoding
from checkers.prove.props import CLIENT_PROPS, STATE_PROPS, step_holds
from checkers.prove.strengthen import NEEDS, STRENGTHENING, producer_needs
from checkers.prove.symstate import concretize, variables
from spec import Model

LAST: list = []     # the last CTI as (encoding, pre-state, post-state) dicts, for inspection
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


def conjuncts(name: str, strengthening) -> dict:
    """The invariant (unless it is MonotonicEpochs, a property of steps) and its strengthening
    lemmas, by name: what an inductive proof assumes before a step and proves after it."""
    conj = {k: STRENGTHENING[k] for k in strengthening}
    return conj if name == "MonotonicEpochs" else {name: STATE_PROPS[name], **conj}


def named_brokers(inst) -> tuple[int, ...]:
    """The brokers an action instance names, in order (acting broker first)."""
    out = [inst.b]
    if inst.via >= 0:
        out.append(inst.via)
    if inst.kind in ("ControllerReact", "ControllerAlterIsr", "ProposeShrink") and inst.arg >= 0:
        out.append(inst.arg)
    seen: list[int] = []
    for x in out:
        if x not in seen:
            seen.append(x)
    return tuple(seen)


def representatives(enc: Encoding) -> list:
    """One action instance per orbit under renaming brokers: those naming brokers 0, 1, ... in
    order of first mention. Sound for the induction step because spec's brokers are
    interchangeable (spec/symmetry.py: the explorer hashes canonical renamings), the encoding's
    rules treat them alike, and every invariant and strengthening conjunct quantifies over all
    brokers alike: a step from s by instance a is a renaming of a step from the renamed s by a
    representative, and the renamed s satisfies the hypothesis when s does. Checked on
    concrete states by tests/test_prove_lemmas.py."""
    # in-flight request slots are interchangeable too (a request goes to the first free slot;
    # the invariants treat slots alike): one slot stands for all
    return [inst for inst in enc.insts if named_brokers(inst) == tuple(range(len(named_brokers(inst))))
            and not (inst.kind in ("Deliver", "Lose") and inst.arg[1] != 0)]


def prove(model: Model, name: str, *, strengthening: tuple[str, ...] | None = None,
          time_limit: float = 60.0, symmetric: bool = True,
          stats: dict | None = None, writes: int | None = None) -> ProofResult:
    """`writes`: producer write (and log) slots of the encoding. For the producer invariants
    the encoding's bounds are not assumed of the successor but proved (no step from a state
    satisfying the strengthening leaves them), so small slots stay sound."""
    t0 = time.monotonic()
    producer_goal = name in CLIENT_PROPS
    if producer_goal:
        needed, why = producer_needs(model.config)
        if why:
            return ProofResult(name, "unknown", 0.0, failing=why)
        if strengthening is None:
            strengthening = needed
        from checkers.prove.strengthen_epochs import write_slots
        writes = writes or write_slots(model.config)
    enc = Encoding(model.config, writes=writes)
    strong = NEEDS.get(name, tuple(STRENGTHENING)) if strengthening is None else strengthening
    conj = conjuncts(name, strong)
    init = enc.from_state(model.initial())
    for k, f in conj.items():
        if not f(enc, init):
            return ProofResult(name, "refuted" if k == name else "unknown", time.monotonic() - t0,
                               failing=f"{k} fails in the initial state")
    # One query per action instance: the hypothesis, the instance's guard, and the negated goal
    # over the instance's successor terms (no post-state variables, no choice among actions).
    s = variables(enc, "pre")
    hyp = [_z(f(enc, s)) for f in conj.values()]
    # producer actions name a producer, not a broker: the broker renaming argument of
    # `representatives` does not cover them, so with producers every instance is checked
    symmetric = symmetric and not model.config.producers
    for idx, inst in enumerate(representatives(enc) if symmetric else enc.insts):
        left = time_limit - (time.monotonic() - t0)
        if left <= 0:
            return ProofResult(name, "unknown", time.monotonic() - t0, failing="time limit")
        g = inst.guard(s, inst)
        if g is False:
            continue
        t = enc.succ(inst, s)
        goals = {k: _z(f(enc, t)) for k, f in conj.items()}
        if name == "MonotonicEpochs":
            goals[name] = _z(step_holds(enc, s, t))
        sol = _solver()
        sol.set("timeout", max(1, int(left * 1000)))
        sol.add(hyp)
        sol.add(_z(g))
        if producer_goal:
            goals["(within the encoding's slots)"] = z3.Not(_z(t[("g", "oob")]))
        else:
            sol.add(z3.Not(_z(t[("g", "oob")])))
        sol.add(z3.Not(z3.And(list(goals.values()))))
        tq = time.monotonic()
        r = sol.check()
        if stats is not None:
            key = f"{inst.kind} {named_brokers(inst)} {inst.arg}"
            stats[key] = stats.get(key, 0.0) + time.monotonic() - tq
        if r == z3.unknown:
            return ProofResult(name, "unknown", time.monotonic() - t0,
                               failing=f"solver gave up on {inst.kind}: {sol.reason_unknown()}")
        if r == z3.sat:
            m = sol.model()
            LAST[:] = [enc, concretize(m, s), concretize(m, t)]
            broken = [k for k, gl in goals.items() if z3.is_false(m.eval(gl, model_completion=True))]
            return ProofResult(name, "unknown", time.monotonic() - t0,
                               cti=cti_story(enc, m, s, t, inst), failing=", ".join(broken))
    return ProofResult(name, "proved", time.monotonic() - t0)


def cti_story(enc: Encoding, m, s, t, inst) -> str:
    """The CTI in the explorer's story format: the pre-state, the action, the post-state."""
    return path_story(enc, [concretize(m, s), concretize(m, t)], [inst])


def path_story(enc: Encoding, states: list[dict], insts: list) -> str:
    """Concrete encoded states s0 .. sk and the k instances between them in the explorer's story
    format: for one step a pre-state and a post-state, for a longer path (a counterexample to
    k-induction) its states numbered 0 .. k, each action numbered before the state it leads to."""
    from spec.state import summary

    one = len(insts) == 1
    lines = ["  pre-state:" if one else "  state 0:"]
    for i, d in enumerate(states):
        if i:
            lines.append(f"    {i}. {enc.spec_action(insts[i - 1], states[i - 1]).describe()}")
            lines.append("  post-state:" if one else f"  state {i}:")
        if d[("g", "oob")]:
            lines.append("         past the encoding's slots (more writes, batches, requests or "
                         "answers than it holds)")
            continue
        try:
            st = enc.to_state(d)
            sm = summary(st)
        except (IndexError, KeyError, ValueError, TypeError):
            # values outside the model's types (a pre-state no lemma constrains): the raw fields
            lines += [f"         {x}" for x in raw_fields(enc, d)]
            continue
        lines += [f"         {x}" for x in [sm["zk"]] + sm["brokers"]]
        lines.append(f"         acked={sm['acked']} exposed={list(st.exposed)} in_flight={sm['in_flight']}")
    return "\n".join(lines)


def raw_fields(enc: Encoding, d: dict) -> list[str]:
    """An encoded state that is not a state of the model, one line for the store and one per
    broker: its scalar fields as the encoding holds them."""
    from checkers.prove.encoding import BROKER_BOOL, BROKER_INT, ZK_INT
    out = ["(outside the model's types) zk " + " ".join(f"{f}={d[('z', f)]}" for f in ZK_INT)]
    for i in range(enc.n):
        out.append(f"b{i} " + " ".join(f"{f}={d[('b', i, f)]}" for f in BROKER_INT + BROKER_BOOL))
    return out
