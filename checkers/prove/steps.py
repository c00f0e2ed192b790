"""Steps of more than one action for BMC, so that the unrolling needs fewer of them: parallel
steps (the ∀-step semantics of SAT planning, Rintanen, Heljanko and Niemelä 2006), where one
step fires a *set* of pairwise non-interfering action instances, and chained steps (below).

Instance a interferes with b when a writes a field that b reads or writes, or b one that a
reads. Read and write sets come from the encoding itself, over a state of fresh constants: the
fields written are those whose successor term is not the input constant, the fields read are
the constants in the guard and in the written fields' new terms. They over-approximate (a
successor that rebuilds a field unchanged counts as writing it), which only forbids more sets.
The `oob` flag is left out of both: every instance only ORs a condition of its other reads into
it, so the parallel step ORs them.

The step, with one boolean f_a per instance: f_a -> guard_a(s); no interfering pair both fire;
next[x] = the value of x's firing writer (at most one fires), or s[x]. Instances of one set
neither read nor write what another writes, so each one's guard and successor are the same
in s as after any others of the set: firing the set equals firing its members one after the
other in any order (bmc's replay picks instance order). So a parallel path of k steps is a
sequential path of as many actions as it fires, and bmc replays that path on spec, which is
what shows the counterexample real.

What "clean to parallel depth k" says: no state reachable by at most k parallel steps violates
the invariant. Every sequential path of at most k actions is such a path (singleton sets), and
so is every sequential path that sorts, by swapping adjacent non-interfering actions, into at
most k blocks of pairwise non-interfering actions: every path whose chains of interfering
actions (a before b and a interferes with b, transitively) have at most k actions
(`parallel_length`).
"""
from __future__ import annotations

import z3

from checkers.prove.encoding import Encoding
from checkers.prove.sym import AND, IF, NOT, OR, as_bool
from checkers.prove.symstate import variables

OOB = ("g", "oob")


def fields_of(exprs, key_of: dict) -> set:
    """The state fields (keys) that z3 terms mention: a walk of their shared DAG."""
    seen, out, todo = set(), set(), [e for e in exprs if z3.is_expr(e)]
    while todo:
        e = todo.pop()
        i = e.get_id()
        if i in seen:
            continue
        seen.add(i)
        if z3.is_const(e) and e.decl().kind() == z3.Z3_OP_UNINTERPRETED:
            k = key_of.get(e.decl().name())
            if k is not None:
                out.add(k)
        else:
            todo.extend(e.children())
    return out


def read_write_sets(enc: Encoding) -> list[tuple[frozenset, frozenset]]:
    """(fields read, fields written) per instance of `enc`, `oob` left out of both."""
    s = variables(enc, "rw")
    key_of = {v.decl().name(): k for k, v in s.items()}
    out = []
    for inst in enc.insts:
        g = inst.guard(s, inst)
        t = enc.succ(inst, s)
        w = {k for k, v in t.items() if v is not s[k]} - {OOB}
        r = fields_of([as_bool(g)] + [as_bool(t[k]) for k in w], key_of) - {OOB}
        out.append((frozenset(r), frozenset(w)))
    return out


def interferes(rw_a, rw_b) -> bool:
    (ra, wa), (rb, wb) = rw_a, rw_b
    return bool(wa & (rb | wb)) or bool(wb & ra)


def interfering_pairs(rw: list) -> set[tuple[int, int]]:
    """Pairs (a, b), a < b, of instances that interfere."""
    return {(a, b) for a in range(len(rw)) for b in range(a + 1, len(rw))
            if interferes(rw[a], rw[b])}


def parallel_length(seq: list[int], rw: list) -> int:
    """The fewest parallel steps a sequential path of instances `seq` sorts into: the longest
    chain of interfering actions along it (each action's step is one past the latest earlier
    action it interferes with; actions of one step then never interfere)."""
    level: list[int] = []
    for p, a in enumerate(seq):
        level.append(1 + max((level[q] for q in range(p) if interferes(rw[seq[q]], rw[a])),
                             default=0))
    return max(level, default=0)


def parallel_transition(enc: Encoding, s: dict, t: dict, fire: list, conflicts) -> list:
    """Constraints: t is the successor of s under the set of instances whose booleans in `fire`
    (one per instance, by number) are true; `conflicts`: pairs that may not both fire. As in
    bmc.transition, a field no instance can write at this step reuses s's value in t, and
    paths leaving the encoding's bounds (`oob`) are excluded."""
    cons: list = []
    live = []
    writers: dict = {}
    oob = [s[OOB]]
    for idx, inst in enumerate(enc.insts):
        g = inst.guard(s, inst)
        if g is False:
            cons.append(NOT(fire[idx]))
            continue
        live.append(idx)
        if g is not True:
            cons.append(z3.Implies(fire[idx], as_bool(g)))
        succ = enc.succ(inst, s)
        for k, v in succ.items():
            if v is s[k]:
                continue
            if k == OOB:
                oob.append(AND(fire[idx], v))
            else:
                writers.setdefault(k, []).append((idx, v))
    on = set(live)
    cons += [OR(NOT(fire[a]), NOT(fire[b])) for a, b in conflicts if a in on and b in on]
    for k, tv in t.items():
        if k == OOB:
            continue
        if k not in writers:
            t[k] = s[k]
            continue
        v = s[k]
        for idx, sv in writers[k]:
            v = IF(fire[idx], sv, v)
        cons.append(tv == v)
    cons.append(NOT(OR(*oob)))
    t[OOB] = False
    return [as_bool(c) for c in cons]


# Chained steps (the relaxed ∃-step semantics of Wehrle and Rintanen 2007): one step runs through
# every instance in a fixed order, firing any subsequence, each fired instance seeing the state
# its predecessors in the step left. A step is then a sequential path by construction, and a
# causal chain whose actions come in this order fits in one step. The order follows the flow of
# replication: a write, the follower's fetch and its response, an ISR proposal, its commit and
# answer; then faults, the controller's reaction, its requests delivered, the truncation they
# cause. On the golden counterexamples of the three-replica fixes it packs 14, 19, 19 and 30
# actions into 3, 6, 4 and 9 steps (where pairwise non-interfering sets need 12, 18, 16, 22).
# Clean to chained depth k: no state reachable by at most k chained steps violates; those are
# the ends of every sequential path that, after swapping adjacent non-interfering actions, cuts
# into at most k runs each ascending in this order (so of every path of at most k actions).
CHAIN_ORDER = ("Restart", "Reregister", "Produce", "FetchRequest", "FetchResponse", "ProposeShrink",
               "ControllerElect", "ControllerAlterIsr", "AlterIsrResponse", "Flush", "Pause",
               "Resume", "SessionExpire", "Crash", "ControllerReact", "ZombieElect", "Lose",
               "Deliver", "Truncate")


def chain_order(enc: Encoding) -> list[int]:
    """The instances of `enc` in the order a chained step runs through them: by kind as in
    CHAIN_ORDER (kinds not named there, e.g. the producers', after them), then by number."""
    rank = {k: n for n, k in enumerate(CHAIN_ORDER)}
    return sorted(range(len(enc.insts)),
                  key=lambda i: (rank.get(enc.insts[i].kind, len(rank)), i))


def chained_transition(enc: Encoding, s: dict, t: dict, fire: list, order: list[int],
                       keep_oob: bool = False) -> list:
    """Constraints: t is what firing, in `order`, the instances whose booleans in `fire` are
    true leaves of s, each guard holding in the state its predecessors left; no intermediate
    state leaves the encoding's bounds. Fields no fired instance can write keep s's value
    (reused in t, as in bmc.transition). With `keep_oob` (exhaustive BMC), leaving the bounds
    is not excluded: t's `oob` is true when s's was or any fired instance left them (then
    sought as a verdict of its own)."""
    cons: list = []
    cur = dict(s)
    cur[OOB] = False
    oob = [s[OOB]]
    for idx in order:
        inst = enc.insts[idx]
        g = inst.guard(cur, inst)
        if g is False:
            cons.append(NOT(fire[idx]))
            continue
        if g is not True:
            cons.append(z3.Implies(fire[idx], as_bool(g)))
        succ = enc.succ(inst, cur)
        nxt = dict(cur)
        for k, v in succ.items():
            if v is cur[k]:
                continue
            if k == OOB:
                oob.append(AND(fire[idx], v))
            else:
                nxt[k] = IF(fire[idx], v, cur[k])
        cur = nxt
    for k, tv in t.items():
        if k == OOB:
            continue
        if cur[k] is s[k]:
            t[k] = s[k]
        else:
            cons.append(tv == cur[k])
    if keep_oob:
        t[OOB] = OR(*oob)
    else:
        cons.append(NOT(OR(*oob)))
        t[OOB] = False
    return [as_bool(c) for c in cons]


def chain_passes(seq: list[int], rw: list, order: list[int]) -> int:
    """Chained steps that a sequential path of instances `seq` fits in (greedily: each step
    runs through `order` and fires an instance's earliest unfired occurrence once every
    earlier action it interferes with has fired, in this step or before): an upper bound on
    the fewest."""
    pos = {i: n for n, i in enumerate(order)}
    pred = [{q for q in range(p) if interferes(rw[seq[q]], rw[seq[p]])} for p in range(len(seq))]
    done: set = set()
    steps = 0
    while len(done) < len(seq):
        steps += 1
        for inst in sorted({seq[p] for p in range(len(seq)) if p not in done}, key=pos.get):
            p = next((p for p in range(len(seq))
                      if p not in done and seq[p] == inst and pred[p] <= done), None)
            if p is not None:
                done.add(p)
    return steps


def fire(enc: Encoding, d: dict, idxs) -> dict:
    """The parallel step on a concrete state: every instance's guard and successor at d, each
    written field from its writer (ValueError if two write one field or a guard fails)."""
    out = dict(d)
    owner: dict = {}
    for i in idxs:
        inst = enc.insts[i]
        if not inst.guard(d, inst):
            raise ValueError(f"{inst.kind} b{inst.b} is not enabled")
        for k, v in enc.succ(inst, d).items():
            if k == OOB:
                out[k] = out[k] or v
            elif v != d[k]:
                if k in owner and out[k] != v:
                    raise ValueError(f"{k} written by two instances of the set")
                owner[k] = i
                out[k] = v
    return out
