"""k-induction over the encoding: an invariant proved from K consecutive states instead of one,
so that it needs fewer strengthening lemmas (checkers/prove/strengthen.py) than induction.

For an invariant P (a state property, or MonotonicEpochs as a property of steps), the chosen
strengthening S (none unless asked: needing fewer lemmas is the point) and k = 1, 2, ..., K:

step case   a path s0 .. sk of the encoding's steps (no stutter; every successor within the
            encoding's bounds, as in induction), P and S on s0 .. s(k-1), the states pairwise
            distinct, and not (P and S) on sk. unsat: every reachable state at which P fails is
            preceded by k states satisfying it, along a path without repeated states. sat: a
            counterexample to k-induction (a CTI path; its first state need not be reachable).
            The simple-path constraint makes k-induction complete at the recurrence diameter
            (the longest loop-free path): beyond it no path is left to be a CTI.
base case   no violation within k-1 steps of the initial state: BMC (checkers/prove/bmc.py),
            whose violation is a refutation replayed on spec like any other.

The base case is run once, after the step cases: at depth k-1 for the smallest k whose step case
is unsat (proved, or refuted by the violation BMC finds, which then lies within k-1 steps), else
at K-1 (refuted, or unknown with the last CTI). A violation first reached at depth d >= k is
the end of a loop-free path (a shortest path to it) whose k states before it satisfy P: a
step-case CTI. So a step case at k can only be unsat when every violation lies within k-1
steps, where the base case finds it; k-induction never proves what BMC refutes.

Symmetry: the step case fixes its first action to a representative of its orbit under renaming
brokers (the instances naming brokers 0, 1, ... in order of first mention, any in-flight slot).
Sound because spec's brokers are interchangeable (spec/symmetry.py) and the encoding's rules
treat them alike, so renaming the brokers of a whole CTI path gives a CTI path: the steps stay
steps, distinct states stay distinct (renaming is a bijection), and P and S, which quantify over
all brokers alike, keep their values. In-flight slots are not reduced here, unlike induction's
single step: a request goes to the first free slot, so renaming slots does not map paths to
paths. With producers (whose actions name a producer) no reduction is made.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import z3

from checkers.prove.bmc import bmc, choice_var, smt_solver, transition
from checkers.prove.encoding import Encoding
from checkers.prove.induction import broken_clauses, conjuncts, named_brokers, path_story, prove
from checkers.prove.props import CLIENT_PROPS, step_holds
from checkers.prove.sym import as_bool, value
from checkers.prove.symstate import concretize, variables
from spec import Model

LAST: list = []     # the last CTI path as (encoding, [state dicts], [instances]), for inspection


@dataclass
class KResult:
    invariant: str
    verdict: str                  # "proved" | "refuted" | "unknown"
    seconds: float
    k: int                        # the k that proved, else the largest k whose step case ran
    method: str = "k-induction"
    cti: str | None = None        # the last counterexample to k-induction, as a story
    failing: str | None = None    # what the CTI breaks, or why unknown
    bmc: object = None            # the base case's BmcResult (a refutation's path)
    steps: list | None = None     # per k: (k, "unsat" | "sat" | "unknown", seconds)
    cti_k: int = 0                # the k of `cti`


def _first_representatives(enc: Encoding) -> list[int]:
    """Instance numbers naming brokers 0, 1, ... in order of first mention (any slot)."""
    return [i for i, inst in enumerate(enc.insts)
            if named_brokers(inst) == tuple(range(len(named_brokers(inst))))]


def step_case(model: Model, name: str, k: int, *, strengthening: tuple[str, ...] = (),
              time_limit: float = 60.0, symmetric: bool = True, ending: list[dict] | None = None,
              avoid: list[dict] | None = None):
    """The step case at k. Returns ("unsat" | "unknown", None or z3's reason) or ("sat", (story,
    broken, encoding, concrete states, instances)). `ending`: concrete encoded states the path
    must end with (is a CTI at a smaller k the tail of one at k?); the first action is then
    not reduced by symmetry. `avoid`: concrete encoded states the path may not start from (to
    enumerate CTIs)."""
    enc = Encoding(model.config)
    conj = conjuncts(name, strengthening)
    states = [variables(enc, "k0")]
    choices = []
    cons: list = []
    for i in range(1, k + 1):
        nxt = variables(enc, f"k{i}")
        ch = choice_var(f"c{i}", len(enc.insts), 0)
        cons += transition(enc, states[-1], nxt, ch)
        states.append(nxt)
        choices.append(ch)
    if ending:
        for st, want in zip(states[k + 1 - len(ending):], ending):
            cons += [as_bool(st[f] == v) for f, v in want.items()]
    for want in avoid or ():
        cons.append(z3.Or([as_bool(states[0][f] != v) for f, v in want.items()]))
    if symmetric and not model.config.producers and not ending:
        cons.append(z3.Or([choices[0] == i for i in _first_representatives(enc)]))
    for i in range(k):
        cons += [as_bool(f(enc, states[i])) for f in conj.values()]
        if name == "MonotonicEpochs" and i >= 1:
            cons.append(as_bool(step_holds(enc, states[i - 1], states[i])))
    # simple path: every two states differ in some field (a field no step could change is the
    # same term in both and drops out)
    for i in range(k + 1):
        for j in range(i + 1, k + 1):
            cons.append(z3.Or([as_bool(states[i][f] != states[j][f]) for f in states[i]
                               if states[i][f] is not states[j][f]] or [z3.BoolVal(False)]))
    goals = {n: as_bool(f(enc, states[k])) for n, f in conj.items()}
    if name == "MonotonicEpochs":
        goals[name] = as_bool(step_holds(enc, states[k - 1], states[k]))
    sol = smt_solver()
    sol.set("timeout", max(1, int(time_limit * 1000)))
    sol.add(cons)
    sol.add(z3.Not(z3.And(list(goals.values()))))
    r = sol.check()
    if r == z3.unsat:
        return "unsat", None
    if r == z3.unknown:
        return "unknown", sol.reason_unknown()
    m = sol.model()
    insts = [enc.insts[value(m.eval(c, model_completion=True))] for c in choices]
    broken = [n for n, g in goals.items() if z3.is_false(m.eval(g, model_completion=True))]
    concrete = [concretize(m, s) for s in states]
    LAST[:] = [enc, concrete, insts]
    return "sat", (path_story(enc, concrete, insts), broken_clauses(enc, broken, concrete[-1]), enc,
                   concrete, insts)


def _one_step(model: Model, name: str, strengthening: tuple[str, ...], time_limit: float,
              symmetric: bool):
    """The step case at k = 1 is induction's query: a simple path of one step only excludes a
    step that keeps the state, which cannot break what held before it. Asked as induction asks
    it (checkers/prove/induction.prove: one query per representative instance, measured about
    ten times faster at 3 brokers than the one query over a choice of instance)."""
    from checkers.prove.induction import LAST as ILAST
    p = prove(model, name, strengthening=strengthening, time_limit=time_limit,
              symmetric=symmetric)
    if p.verdict == "proved":
        return "unsat", None
    if p.cti:
        enc, pre, post = ILAST
        return "sat", (p.cti, p.failing, enc, [pre, post], None)
    return "unknown", p.failing


def kinduction(model: Model, name: str, K: int, *, strengthening: tuple[str, ...] = (),
               time_limit: float = 60.0, symmetric: bool = True, progress=None) -> KResult:
    """k-induction for k = 1 .. K (the smallest k that proves), with the base case by BMC."""
    if K < 1:
        raise ValueError("k-induction needs K >= 1")
    t0 = time.monotonic()
    left = lambda: time_limit - (time.monotonic() - t0)   # noqa: E731
    enc = Encoding(model.config)
    init = enc.from_state(model.initial())
    conj = conjuncts(name, strengthening)
    for n, f in conj.items():
        if not f(enc, init):
            return KResult(name, "refuted" if n == name else "unknown", time.monotonic() - t0, 0,
                           failing=f"{n} fails in the initial state")
    steps, cti, cti_k, broken, proved_at, why = [], None, 0, None, None, None
    for k in range(1, K + 1):
        if left() <= 0:
            why = "time limit"
            break
        if progress:
            progress(f"k-induction: {name} step case k={k}")
        tk = time.monotonic()
        if k == 1 and name not in CLIENT_PROPS:     # (induction treats those apart)
            r, info = _one_step(model, name, strengthening, left(), symmetric)
        else:
            r, info = step_case(model, name, k, strengthening=strengthening, time_limit=left(),
                                symmetric=symmetric)
        steps.append((k, r, time.monotonic() - tk))
        if r == "unsat":
            proved_at = k
            break
        if r == "unknown":
            why = f"solver gave up at k={k}: {info}"
            break
        cti, cti_k, broken = info[0], k, info[1]
    last = proved_at or (steps[-1][0] if steps else 0)
    depth = (proved_at or last) - 1
    base = None
    if depth >= 1 and left() > 0:
        if progress:
            progress(f"k-induction: {name} base case, BMC depth {depth}")
        base = bmc(model, depth, invariants=(name,), time_limit=left())
        if base.status == "violation" and base.problem is None:
            return KResult(name, "refuted", time.monotonic() - t0, last, cti=None,
                           failing=f"base case: {base.invariant} at depth {base.depth}", bmc=base,
                           steps=steps)
        if base.status != "clean":
            return KResult(name, "unknown", time.monotonic() - t0, last, cti=cti,
                           failing=(f"base case: the engines disagree: {base.problem}" if base.problem
                                    else f"base case: BMC {base.status} to depth {base.depth}"),
                           bmc=base, steps=steps, cti_k=cti_k)
    if proved_at is not None and (depth < 1 or base is not None):
        return KResult(name, "proved", time.monotonic() - t0, proved_at, bmc=base, steps=steps)
    if proved_at is not None:
        why = f"{proved_at}-inductive, but the time limit came before the base case"
    return KResult(name, "unknown", time.monotonic() - t0, last, cti=cti,
                   failing=why or (f"not {cti_k}-inductive: breaks {broken}" if cti else "time limit"),
                   bmc=base, steps=steps, cti_k=cti_k)
