"""Renaming brokers in encoded states, for the induction step's symmetry reduction.

The induction step asks one action instance per orbit under renaming brokers
(`induction.representatives`). That is sound when the transition relation and the inductive
hypothesis are both invariant under renaming: a step from s by instance a is then the renaming
of a step from the renamed s by the representative. Swaps of broker 0 with each other broker
generate every renaming, so z3 is asked about those:
- `step_commutes`: an instance's guard and successor commute with the swap, from every state
  (`steps_symmetric`: every instance);
- `hypothesis_symmetric`: every state satisfying the hypothesis still does after the swap.
The core lemmas quantify over brokers alike. The producer proofs' lemma ControlShapes lists
the control planes spec reaches from its initial state, in which broker 0 leads: the list is
closed under renaming (strengthen_epochs.control_shapes), and the producer proof runs both
checks before it relies on the reduction (induction.prove_together).

`rename(d, p)` renames an encoded state, concrete or symbolic: broker i becomes p[i] in every
key that names a broker (a broker's own fields, per-broker flags and positions, the store's ISR
and sessions, requests to a broker, who led each epoch) and in every field whose value is a
broker (a follower's leader, a fetch response's source, the controller's cached leader, the
store's controller and leader, a LeaderAndIsr request's leader, the broker a producer's request
went to). tests/test_prove_symmetry.py checks it against spec's renaming on reachable states.
"""
from __future__ import annotations

import time

import z3

from checkers.prove.sym import AND, EQ, IMPLIES, ite, sym

# ("b", i, f, j): per-broker entries of broker i's fields
_PER_BROKER_B = frozenset({"isr", "pend", "pos", "ccisr", "cch"})
# the fields whose value is a broker id (-1: none), by (key kind, field name)
_BROKER_VALUED = frozenset({("b", "leader"), ("b", "f_src"), ("b", "cc_l"), ("z", "controller"),
                            ("z", "leader"), ("m", "leader"), ("p", "qb")})


def _field(k) -> tuple:
    if k[0] in ("b", "p"):
        return (k[0], k[2])
    if k[0] == "m":
        return ("m", k[3])
    return (k[0], k[1])


def rename_key(k: tuple, p: tuple) -> tuple:
    """The key that field k of broker-renamed state has (broker i renamed p[i])."""
    if k[0] == "b":
        if len(k) == 4 and k[2] in _PER_BROKER_B:
            return ("b", p[k[1]], k[2], p[k[3]])
        return ("b", p[k[1]]) + k[2:]
    if k[0] == "z" and len(k) == 3:
        return ("z", k[1], p[k[2]])
    if k[0] == "m":
        rest = ("isr", p[k[4]]) if k[3] == "isr" else k[3:]
        return ("m", p[k[1]], k[2]) + rest
    if k[0] == "g" and k[1] == "damaged":
        return ("g", "damaged", p[k[2]])
    if k[0] == "g" and k[1] == "el":
        return ("g", "el", k[2], p[k[3]])
    return k


def rename_value(k: tuple, v, p: tuple):
    """Field k's value v in the renamed state: a broker id renamed, anything else as it is."""
    if _field(k) not in _BROKER_VALUED:
        return v
    if z3.is_expr(v):
        out = v
        for i in range(len(p) - 1, -1, -1):
            out = ite(v == i, p[i], out)
        return out
    return p[v] if 0 <= v < len(p) else v


def rename(d: dict, p: tuple) -> dict:
    """Encoded state d (concrete or symbolic) with broker i renamed p[i]."""
    return {rename_key(k, p): rename_value(k, v, p) for k, v in d.items()}


def transpositions(n: int) -> list[tuple]:
    """The renamings swapping broker 0 with broker i: together they generate every renaming."""
    out = []
    for i in range(1, n):
        p = list(range(n))
        p[0], p[i] = i, 0
        out.append(tuple(p))
    return out


def rename_instance(enc, inst, p: tuple):
    """The encoding's instance that is `inst` with its brokers renamed."""
    from checkers.prove.producers import KINDS
    b, via, arg = inst.b, inst.via, inst.arg
    if inst.kind not in KINDS:
        b = p[b]
    if via >= 0:
        via = p[via]
    if inst.kind in ("Deliver", "Lose"):
        arg = (p[arg[0]], arg[1])
    elif inst.kind in ("ControllerReact", "ControllerAlterIsr", "ProposeShrink", "ZombieElect",
                       "Send") and arg >= 0:
        arg = p[arg]
    for x in enc.insts:
        if (x.kind, x.b, x.via, x.arg) == (inst.kind, b, via, arg):
            return x
    raise KeyError((inst.kind, b, via, arg))


def hypothesis_symmetric(enc, s: dict, hyp: list, time_limit: float = 60.0,
                         names: list | None = None) -> str | None:
    """None when z3 shows every state satisfying `hyp` (terms over the variables `s`; `names`:
    the conjuncts' names) is still one after swapping broker 0 with any other; else why not
    (the first conjunct it cannot show, or the solver's answer). All conjuncts in one query
    first, then the changed ones one by one to name the one that fails."""
    deadline = time.monotonic() + time_limit
    for p in transpositions(enc.n):
        pairs = [(s[k], v) for k, v in rename(s, p).items() if not v.eq(s[k])]
        moved = [(j, m) for j, m in enumerate(z3.substitute(h, *pairs) for h in hyp)
                 if not m.eq(hyp[j])]
        for ask in [moved] + [[x] for x in moved]:
            sol = z3.Solver()
            sol.set("timeout", max(1, int((deadline - time.monotonic()) * 1000)))
            sol.add(*hyp)
            sol.add(z3.Not(z3.And([m for _, m in ask])))
            got = sol.check()
            if got == z3.unsat and len(ask) == len(moved):
                break
            if got != z3.unsat and len(ask) == 1:
                j = ask[0][0]
                return (f"{names[j] if names else f'conjunct {j}'} is not invariant under "
                        f"renaming brokers {p} (z3: {got})")
    return None


def _unsat(deadline: float, *fs) -> bool:
    sol = z3.Solver()
    sol.set("timeout", max(1, int((deadline - time.monotonic()) * 1000)))
    sol.add(*fs)
    return sol.check() == z3.unsat


def step_commutes(enc, s: dict, a, time_limit: float = 60.0) -> str | None:
    """None when z3 shows that instance a's step commutes with swapping broker 0 with any
    other, from every state: a's guard is its renamed instance's on the renamed state, and its
    successor renamed is that instance's successor. Else why not."""
    deadline = time.monotonic() + time_limit
    for p in transpositions(enc.n):
        r = rename(s, p)
        b = rename_instance(enc, a, p)
        ga, gb = a.guard(s, a), b.guard(r, b)
        ta, tb = rename(enc.succ(a, s), p), enc.succ(b, r)
        same = AND(EQ(ga, gb), IMPLIES(ga, AND(*[EQ(ta[k], tb[k]) for k in tb if not (
            sym(ta[k]) and sym(tb[k]) and ta[k].eq(tb[k]))])))
        if same is not True and (same is False or not _unsat(deadline, z3.Not(same))):
            return (f"{a.kind} ({a.b}, via {a.via}, arg {a.arg}) does not commute with "
                    f"renaming brokers {p}")
    return None


def steps_symmetric(enc, time_limit: float = 60.0) -> str | None:
    """None when z3 shows that every step commutes with renaming brokers (`step_commutes` for
    each instance); else why not."""
    from checkers.prove.symstate import variables
    deadline = time.monotonic() + time_limit
    s = variables(enc, "sym")
    for a in enc.insts:
        why = step_commutes(enc, s, a, max(0.001, deadline - time.monotonic()))
        if why:
            return why
    return None
