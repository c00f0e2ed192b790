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
(strengthen_epochs.write_slots) and log slots (log_slots) still covers every reachable state.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import z3

from checkers.prove.encoding import Encoding
from checkers.prove.producers import KINDS as PRODUCER_KINDS
from checkers.prove.props import CLIENT_PROPS, STATE_PROPS, step_holds
from checkers.prove.strengthen import NEEDS, PARTS, STRENGTHENING, producer_needs
from checkers.prove.sym import as_bool
from checkers.prove.symmetry import hypothesis_symmetric, step_commutes
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


def conjuncts(name: str, strengthening) -> dict:
    """The invariant (unless it is MonotonicEpochs, a property of steps) and its strengthening
    lemmas, by name: what an inductive proof assumes before a step and proves after it."""
    conj = {k: STRENGTHENING[k] for k in strengthening}
    return conj if name == "MonotonicEpochs" else {name: STATE_PROPS[name], **conj}


def named_brokers(inst) -> tuple[int, ...]:
    """The brokers an action instance names, in order (acting broker first). A producer's
    action names a producer (inst.b) and the broker its request went to (`via`) or, for Send,
    the broker it sends to (`arg`)."""
    if inst.kind in PRODUCER_KINDS:
        return tuple(x for x in (inst.via, inst.arg if inst.kind == "Send" else -1) if x >= 0)
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


def representatives(enc: Encoding, slots: bool = True) -> list:
    """One action instance per orbit under renaming brokers: those naming brokers 0, 1, ... in
    order of first mention. Sound for the induction step because spec's brokers are
    interchangeable (spec/symmetry.py: the explorer hashes canonical renamings), the encoding's
    rules treat them alike, and every invariant and strengthening conjunct quantifies over all
    brokers alike: a step from s by instance a is a renaming of a step from the renamed s by a
    representative, and the renamed s satisfies the hypothesis when s does. Checked on
    concrete states by tests/test_prove_lemmas.py; where the hypothesis is not symmetric by
    construction (the producer proofs), `prove_together` asks z3 first (symmetry.py).
    `slots` False: every request slot's Deliver and Lose (the hypothesis check covers
    renaming brokers, not slots)."""
    # in-flight request slots are interchangeable too (a request goes to the first free slot;
    # the invariants treat slots alike): one slot stands for all
    return [inst for inst in enc.insts if named_brokers(inst) == tuple(range(len(named_brokers(inst))))
            and not (slots and inst.kind in ("Deliver", "Lose") and inst.arg[1] != 0)]


def prove(model: Model, name: str, *, strengthening: tuple[str, ...] | None = None,
          time_limit: float = 60.0, symmetric: bool = True,
          stats: dict | None = None, writes: int | None = None, workers: int = 1) -> ProofResult:
    """`writes`: producer write (and log) slots of the encoding. For the producer invariants
    the encoding's bounds are not assumed of the successor but proved (no step from a state
    satisfying the strengthening leaves them), so small slots stay sound."""
    return prove_together(model, (name,), strengthening=strengthening, time_limit=time_limit,
                          symmetric=symmetric, stats=stats, writes=writes, workers=workers)[0]


def prove_together(model: Model, names: tuple[str, ...], *,
                   strengthening: tuple[str, ...] | None = None, time_limit: float = 60.0,
                   symmetric: bool = True, stats: dict | None = None, writes: int | None = None,
                   workers: int = 1, substitute: bool = True, split: bool = True,
                   logs: int | None = None, arith: int | None = 2,
                   by_goal: bool | None = None) -> list[ProofResult]:
    """Several invariants with one strengthening in one pass: each action instance's query
    asks for a step breaking any of them or any lemma, so the instances are solved once for
    all (the conjunction of the invariants and the lemmas is inductive, hence each invariant
    holds on every reachable state). One result per name, all with the pass's verdict. The
    producer invariants share strengthen.producer_needs' set; the core ones take the union of
    their NEEDS. `workers` > 1 spreads the instances over that many processes (each builds
    the encoding once; the longest queries first, handed out as workers free up). `split`:
    a producer step with several outcomes (HandleProduce's error, duplicate or append, ...)
    is asked one outcome per query (Encoding.succ_cases), which z3 solves several times
    faster than the merged step (docs/benchmarks/proofs.md). `logs`: the producer proofs' log
    slots (default strengthen_epochs.log_slots). `arith`: z3's arithmetic solver for the step
    queries (None: z3's default). `by_goal`: True, one query per conjunct an instance changes;
    False, one for their conjunction; None, the conjunction for BY_GOAL_AFTER seconds, then
    each conjunct for BY_PART_AFTER seconds, then each of that conjunct's parts. The defaults
    are the fastest measured on the producer proofs; the bench's baseline sets split=False,
    logs=writes, arith=None, by_goal=False. `logs`, `arith` and `by_goal` apply to the
    producer invariants; the core ones use z3's default arithmetic and the conjunction whole,
    as measured for them."""
    t0 = time.monotonic()
    names = tuple(names)

    def unknown(failing, cti=None):
        return [ProofResult(n, "unknown", time.monotonic() - t0, cti=cti, failing=failing) for n in names]

    producer_goal = any(n in CLIENT_PROPS for n in names)
    if producer_goal:
        needed, why = producer_needs(model.config)
        if why:
            return [ProofResult(n, "unknown", 0.0, failing=why) for n in names]
        if strengthening is None:
            strengthening = needed
        from checkers.prove.strengthen_epochs import log_slots, write_slots
        writes = writes or write_slots(model.config)
        logs = min(writes, logs or log_slots(model.config))
    else:
        # the core invariants' queries as measured for them: z3's default arithmetic, the
        # conjunction whole (the producer proofs' settings were measured on producer proofs)
        logs, arith, by_goal = None, None, False
    if strengthening is None:
        strong: list[str] = []
        for n in names:
            strong += [k for k in NEEDS.get(n, tuple(STRENGTHENING)) if k not in strong]
        strengthening = tuple(strong)
    enc, conj, s, hyp = _setup(model.config, names, strengthening, writes, logs)
    init = enc.from_state(model.initial())
    for k, f in conj.items():
        if not f(enc, init):
            return [ProofResult(n, "refuted" if k == n else "unknown", time.monotonic() - t0,
                                failing=f"{k} fails in the initial state") for n in names]
    # the producer proofs' hypothesis was drawn from spec's initial state, where broker 0
    # leads: one instance per orbit under renaming brokers only once z3 shows the hypothesis
    # symmetric (ControlShapes is closed under renaming; every other lemma treats brokers
    # alike) and every step commuting with renaming; those checks are tasks beside the
    # queries, and where one fails the proof is asked again of every instance
    checks = bool(symmetric and model.config.producers and enc.n > 1)
    deadline = t0 + time_limit
    sym_tasks = [(("symmetry", x), None, deadline)
                 for x in ([None] + list(range(len(enc.insts))) if checks else [])]
    slots = not model.config.producers
    chosen = {id(inst) for inst in (representatives(enc, slots) if symmetric else enc.insts)}
    todo = [i for i, inst in enumerate(enc.insts) if id(inst) in chosen]
    job = {"cfg": model.config, "names": names, "strengthening": strengthening,
           "writes": writes, "logs": logs, "producer_goal": producer_goal,
           "substitute": substitute, "split": split, "arith": arith, "by_goal": by_goal}
    # this process's encoding, conjuncts and goals; forked workers inherit them (building
    # them again in each worker cost ~5 s of a 70 s proof at 3 in flight)
    _WORKER.clear()
    _WORKER.update(zip(("enc", "conj", "s", "hyp"), (enc, conj, s, hyp)))
    _WORKER["job"] = job
    if substitute:
        _WORKER["post"] = _post_goals(enc, conj)
    if workers > 1 and len(todo) > 1:
        # one task per outcome of each instance (the split steps' outcomes are the longest
        # queries: handed out first)
        tasks = list(sym_tasks)
        for i in todo:
            inst = enc.insts[i]
            n = (len(outcomes(enc.succ_cases(inst, s)[1])) if split and enc.prods is not None
                 else 1)
            tasks += [(i, j if n > 1 else None, deadline) for j in range(n)]
        tasks.sort(key=lambda task: (isinstance(task[0], int), task[1] is None))
        answers = _pooled(job, tasks, workers)
    else:
        answers = (_query(task) for task in sym_tasks + [(i, None, deadline) for i in todo])
    for key, secs, verdict, detail, cti in answers:
        if stats is not None and key:
            stats[key] = stats.get(key, 0.0) + secs
        if verdict == "asymmetric":
            if stats is not None:
                stats["(not symmetric: every instance asked)"] = 0.0
            return prove_together(model, names, strengthening=strengthening,
                                  time_limit=max(1.0, time_limit - (time.monotonic() - t0)),
                                  symmetric=False, stats=stats, writes=writes, workers=workers,
                                  substitute=substitute, split=split, logs=logs, arith=arith,
                                  by_goal=by_goal)
        if verdict == "time":
            return unknown("time limit")
        if verdict == "unknown":
            return unknown(detail)
        if verdict == "sat":
            return unknown(detail, cti)
    return [ProofResult(n, "proved", time.monotonic() - t0) for n in names]


_WORKER: dict = {}     # this process's encoding, conjuncts, pre-state and hypothesis
# z3 refutes the negation of a large conjunction slowly when the hypothesis is large (two
# brokers from 4 in flight: over 60 s where each conjunct alone takes under 7 s), and each
# conjunct alone costs a query of its own: the conjunction first, for this long
BY_GOAL_AFTER = 5.0
# and a conjunct the same way: asked whole for this long, then each of its own conjuncts (a
# lemma's clauses, 29 for LogsOrder on two brokers: 7.8 s together where the lemma whole took
# 31 s, a HandleProduce append at 4 in flight)
BY_PART_AFTER = 2.0


def smt_solver(arith: int | None = 2):
    """An induction step's solver: bmc's preprocessing, then z3's SMT core, by default with its
    older simplex-based arithmetic (arith.solver=2), 1.5-2x faster on these queries than z3's
    default (docs/benchmarks/proofs.md)."""
    smt = z3.With("smt", **{"arith.solver": arith}) if arith else "smt"
    return z3.Then("simplify", "propagate-values", "solve-eqs", smt).solver()


def _setup(cfg, names, strengthening, writes, logs=None):
    # the write metadata rides along with the write ids where the lemma set links the two
    enc = Encoding(cfg, writes=writes, logs=logs, shadows="RecordShadows" in strengthening)
    conj = {n: STATE_PROPS[n] for n in names if n != "MonotonicEpochs"}
    conj.update({k: STRENGTHENING[k] for k in strengthening})
    s = variables(enc, "pre")
    return enc, conj, s, [as_bool(f(enc, s)) for f in conj.values()]


def _term(v, x):
    """x as a z3 term of v's sort."""
    if z3.is_expr(x):
        return x
    if z3.is_bool(v):
        return z3.BoolVal(bool(x))
    return z3.BitVecVal(x, v.size()) if z3.is_bv(v) else z3.IntVal(x)


def _post_goals(enc, conj) -> tuple[dict, dict]:
    """The conjuncts over fresh post-state variables, built once (building z3 terms in Python
    is most of a proof's time when every instance builds them again)."""
    post = variables(enc, "post")
    return post, {k: as_bool(f(enc, post)) for k, f in conj.items()}


def _init_worker(job):
    if _WORKER.get("job") is job:
        return          # forked from the process that built them
    _WORKER.clear()
    _WORKER.update(zip(("enc", "conj", "s", "hyp"), _setup(
        job["cfg"], job["names"], job["strengthening"], job["writes"], job["logs"])))
    _WORKER["job"] = job
    if job["substitute"]:
        _WORKER["post"] = _post_goals(_WORKER["enc"], _WORKER["conj"])


def _instance(idx):
    """The parts of instance idx's query in this process (kept for the instance's next
    outcome): the instance, its successor terms, the constraints every outcome shares, the
    goals, the per-goal goals (to name what a CTI breaks) and the outcomes; None when its
    guard is false."""
    got = _WORKER.get("inst")
    if got and got[0] == idx:
        return got[1]
    enc, conj, s, hyp = (_WORKER[k] for k in ("enc", "conj", "s", "hyp"))
    names, producer_goal = _WORKER["job"]["names"], _WORKER["job"]["producer_goal"]
    inst = enc.insts[idx]
    g = inst.guard(s, inst)
    if g is False:
        _WORKER["inst"] = (idx, None)
        return None
    # the hypothesis, the instance's guard, and the negated goal over the instance's successor
    # terms (no post-state variables, no choice among actions)
    split = _WORKER["job"]["split"] and enc.prods is not None
    t, groups = enc.succ_cases(inst, s) if split else (enc.succ(inst, s), [])
    if "post" in _WORKER:
        # the goals built once over post-state variables, the successor terms put in by z3
        post, built = _WORKER["post"]
        sub = _substituter([(v, _term(v, t[k])) for k, v in post.items()
                            if not v.eq(_term(v, t[k]))])
        goals = {k: sub(g) for k, g in built.items()}
    else:
        goals = {k: as_bool(f(enc, t)) for k, f in conj.items()}
    if _WORKER["job"]["by_goal"] is not False:
        # a conjunct the step leaves as it was (the same term as in the hypothesis) holds: not
        # asked (each asked alone costs a query preprocessing the whole hypothesis)
        goals = {k: g for (k, g), h in zip(goals.items(), hyp) if not g.eq(h)}
    if "MonotonicEpochs" in names:
        goals["MonotonicEpochs"] = as_bool(step_holds(enc, s, t))
    common = [*hyp, as_bool(g)]
    if producer_goal:
        goals["(within the encoding's slots)"] = z3.Not(as_bool(t[("g", "oob")]))
    else:
        common.append(z3.Not(as_bool(t[("g", "oob")])))
    common += [c == d for group in groups for c, d in group]
    parts = (inst, t, common, goals, outcomes(groups))
    _WORKER["inst"] = (idx, parts)
    return parts


def _substituter(pairs):
    """A function substituting `pairs` in a term through z3's C API, the arrays built once
    (z3.substitute checks every pair's sorts in Python on each call)."""
    n = len(pairs)
    src, dst = (z3.Ast * n)(), (z3.Ast * n)()
    for j, (a, b) in enumerate(pairs):
        src[j], dst[j] = a.as_ast(), b.as_ast()

    def sub(g, keep=pairs):     # `keep`: the terms the arrays point into stay alive
        if not keep:
            return g
        return z3.z3._to_expr_ref(z3.Z3_substitute(g.ctx_ref(), g.as_ast(), n, src, dst), g.ctx)
    return sub


def _query(task):
    """One action instance's query (by index into the encoding's instances), in this process,
    for its outcome `which` (None: every outcome in turn): (instance key, seconds, "unsat" |
    "sat" | "unknown" | "time", what broke, CTI story)."""
    idx, which, deadline = task
    if deadline - time.monotonic() <= 0:
        return None, 0.0, "time", None, None
    if not isinstance(idx, int):
        return _symmetry_query(idx[1], deadline)
    parts = _instance(idx)
    if parts is None:
        return None, 0.0, "unsat", None, None
    enc, s, job = _WORKER["enc"], _WORKER["s"], _WORKER["job"]
    inst, t, common, goals, combos = parts
    key = f"{inst.kind} {named_brokers(inst)} {inst.arg}"
    # one query per outcome of the step (one in all unless split): each fixes which branch
    # of every branching is taken, so z3 folds the merged successor terms to that branch's;
    # by_goal: within it one query per conjunct the step changes (z3 refutes each alone far
    # faster than their disjunction of negations: docs/benchmarks/proofs.md)
    tq = time.monotonic()
    for fixed in (combos if which is None else combos[which:which + 1]):
        # by_goal None: the conjunction first, for at most BY_GOAL_AFTER seconds, then each
        # conjunct for at most BY_PART_AFTER seconds, then each of its parts; True: each
        # conjunct; False: the conjunction
        # asks: (goals, seconds or None, whether they are the conjunction)
        if job["by_goal"] is False:
            asks = [(list(goals.values()), None, True)]
        else:
            asks = [([g], BY_PART_AFTER if job["by_goal"] is None else None, False)
                    for g in goals.values()]
            if job["by_goal"] is None and len(goals) > 1:
                asks.insert(0, (list(goals.values()), BY_GOAL_AFTER, True))
        while asks:
            ask, budget, whole = asks.pop(0)
            sol = smt_solver(job["arith"])
            left = deadline - time.monotonic()
            sol.set("timeout", max(1, int(min(left, budget or left) * 1000)))
            sol.add(common + fixed + [z3.Not(z3.And(ask))])
            r = sol.check()
            if r == z3.unknown and budget and time.monotonic() < deadline:
                if not whole:
                    # a conjunct past its budget: each of its parts not in the hypothesis
                    asks[:0] = [([p], None, False) for p in _parts(ask[0])]
                continue        # the conjunction past its budget: each conjunct is asked
            if r == z3.unknown:
                return (key, time.monotonic() - tq, "unknown",
                        f"solver gave up on {inst.kind}: {sol.reason_unknown()}", None)
            if r == z3.sat:
                m = sol.model()
                LAST[:] = [enc, concretize(m, s), concretize(m, t)]
                broken = [k for k, gl in goals.items()
                          if z3.is_false(m.eval(gl, model_completion=True))]
                return (key, time.monotonic() - tq, "sat", broken_clauses(enc, broken, LAST[2]),
                        cti_story(enc, m, s, t, inst))
            if whole:
                break           # the conjunction holds: no conjunct alone need be asked
    return key, time.monotonic() - tq, "unsat", None, None


def _parts(goal):
    """A conjunct's own conjuncts but those of the hypothesis (the step leaves them as they
    were), or the conjunct itself when it is not a conjunction."""
    if not z3.is_and(goal):
        return [goal]
    if "hyp_parts" not in _WORKER:
        _WORKER["hyp_parts"] = {c.get_id() for h in _WORKER["hyp"]
                                for c in (h.children() if z3.is_and(h) else [h])}
    return [c for c in goal.children() if c.get_id() not in _WORKER["hyp_parts"]]


def outcomes(groups) -> list[list]:
    """Every combination of one outcome per branching (Encoding.succ_cases), as literals
    fixing its constants: branch j taken (the earlier branches' conditions false), or none of
    the named ones (the last, unconditional branch, or no change). A branching with `when`
    literals is split only in the combinations that fix them so. [[]] when nothing branches."""
    combos: list[list] = [[]]
    for g in groups:
        if not g:
            continue
        opts = ([[z3.Not(x) for x, _ in g[:j]] + [c] for j, (c, _) in enumerate(g)]
                + [[z3.Not(x) for x, _ in g]])
        when = getattr(g, "when", ())
        combos = [c + o for c in combos
                  for o in (opts if all(any(w.eq(x) for x in c) for w in when) else [[]])]
    return combos


def _pooled(job, tasks, workers):
    """The queries spread over `workers` processes (fork: each builds its encoding once), as
    they free up; the first CTI or give-up stops the rest. Yields _query's tuples."""
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    with ctx.Pool(workers, initializer=_init_worker, initargs=(job,)) as pool:
        for out in pool.imap_unordered(_query, tasks, chunksize=1):
            yield out
            if out[2] != "unsat":
                pool.terminate()
                return


def _symmetry_query(what, deadline):
    """A check the symmetry reduction rests on (symmetry.py), in this process: the hypothesis
    symmetric (`what` None), or instance `what`'s step commuting with renaming brokers.
    "asymmetric" when z3 does not show it."""
    enc, s, hyp, conj = (_WORKER[k] for k in ("enc", "s", "hyp", "conj"))
    t = time.monotonic()
    left = deadline - t
    if what is None:
        why = hypothesis_symmetric(enc, s, hyp, left, list(conj))
    else:
        why = step_commutes(enc, s, enc.insts[what], left)
    return ("(symmetry checks)", time.monotonic() - t, "unsat" if why is None else "asymmetric",
            why, None)


def broken_clauses(enc: Encoding, names: list[str], post: dict, shown: int = 3) -> str:
    """The conjuncts a CTI's post-state breaks, each lemma with named clauses (PARTS) followed
    by the first `shown` of the clauses it breaks: "Zombie (isr-follower-exposed b2 m1 b3)"."""
    out = []
    for name in names:
        tags = [tag for tag, c in PARTS[name](enc, post) if not c] if name in PARTS else []
        more = f"; {len(tags) - shown} more" if len(tags) > shown else ""
        out.append(f"{name} ({'; '.join(tags[:shown])}{more})" if tags else name)
    return ", ".join(out)


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
        lines += [f"         {x}" for x in story_details(enc, d, st)]
    return "\n".join(lines)


def story_details(enc: Encoding, d: dict, st) -> list[str]:
    """What a CTI's lemmas speak of that the explorer's one-line summaries leave out: each
    leader's follower positions, the epochs led so far (the ghost), and every LeaderAndIsr
    request in flight, in the words of the action that delivers it, with the encoding's slot
    (`m1` to b2: the slot a lemma clause's tag names, as in `b2 m1`)."""
    from spec.state import LEADER, bits, mask_str
    out = []
    for i, b in enumerate(st.brokers):
        pos = [f"b{x} at {p}" for x, p in enumerate(b.pos) if x != i and p >= 0]
        if b.alive and b.role == LEADER and pos:
            out.append(f"b{i} positions: " + ", ".join(pos))
    led = [f"{e} by " + "/".join(f"b{x}" for x in bits(m)) for e, m in enumerate(st.epoch_leaders) if m]
    if led:
        out.append("epochs led: " + ", ".join(led))
    for dst in range(enc.n):
        for k in range(enc.K):
            if not d.get(("m", dst, k, "v")):
                continue
            ce, le, leader, ver = (d[("m", dst, k, f)] for f in ("ce", "le", "leader", "ver"))
            isr = sum(1 << j for j in range(enc.n) if d[("m", dst, k, "isr", j)])
            out.append(f"in flight to b{dst} (m{k}): LeaderAndIsr(controller epoch {ce}, "
                       f"leader {leader}, epoch {le}, isr {mask_str(isr)}, version {ver})")
    return out


def raw_fields(enc: Encoding, d: dict) -> list[str]:
    """An encoded state that is not a state of the model, one line for the store and one per
    broker: its scalar fields as the encoding holds them."""
    from checkers.prove.encoding import BROKER_BOOL, BROKER_INT, ZK_INT
    out = ["(outside the model's types) zk " + " ".join(f"{f}={d[('z', f)]}" for f in ZK_INT)]
    for i in range(enc.n):
        out.append(f"b{i} " + " ".join(f"{f}={d[('b', i, f)]}" for f in BROKER_INT + BROKER_BOOL))
    return out
