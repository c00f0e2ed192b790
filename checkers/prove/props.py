"""spec/invariants.py's invariants over an encoded state (concrete or symbolic), by the same
names. Each returns a formula that holds when the invariant holds; `step_holds` is the
transition property MonotonicEpochs. The scoping of spec (scoped invariants dropped under
unclean election; replica counts not checked after a lossy crash) is kept."""
from __future__ import annotations

from checkers.prove.encoding import Encoding
from checkers.prove.sym import AND, EQ, IMPLIES, MIN, NOT, OR, SUM
from spec.invariants import INVARIANTS
from spec.state import LEADER

SCOPED = {inv.name for inv in INVARIANTS if inv.scoped}


def _acting(e: Encoding, s, i):
    return AND(s[("b", i, "alive")], EQ(s[("b", i, "role")], LEADER), EQ(s[("z", "leader")], i),
               EQ(s[("b", i, "le")], s[("z", "le")]))


def _has(e: Encoding, s, i, r):
    return OR(*[AND(k < s[("b", i, "leo")], EQ(s[("b", i, "lr", k)], r)) for k in range(e.L)])


def _same_entry(s, i, j, k):
    return AND(EQ(s[("b", i, "lr", k)], s[("b", j, "lr", k)]), EQ(s[("b", i, "lep", k)], s[("b", j, "lep", k)]))


def _committed(e: Encoding, s, r):
    exposed = OR(*[AND(k < s[("g", "elen")], EQ(s[("g", "exp", k)], r)) for k in range(e.L)])
    return AND(OR(s[("g", "acked", r)], exposed), NOT(s[("g", "doomed", r)]))


def hw_below_leo(e, s):
    return AND(*[s[("b", i, "hw")] <= s[("b", i, "leo")] for i in range(e.n)])


def log_matching(e, s):
    def cur(i):
        return AND(s[("b", i, "alive")], s[("b", i, "role")] != 0, NOT(s[("b", i, "trunc")]),
                   EQ(s[("b", i, "le")], s[("z", "le")]))
    out = []
    for i in range(e.n):
        for j in range(i + 1, e.n):
            upto = MIN(s[("b", i, "hw")], s[("b", j, "hw")])
            out.append(IMPLIES(AND(cur(i), cur(j)),
                               AND(*[IMPLIES(k < upto, _same_entry(s, i, j, k)) for k in range(e.L)])))
    return AND(*out)


def unique_leader_per_epoch(e, s):
    return AND(*[SUM(s[("g", "el", ep, j)] for j in range(e.n)) <= 1 for ep in range(e.E)])


def acked_durable(e, s):
    return AND(*[IMPLIES(_acting(e, s, i), AND(*[IMPLIES(AND(s[("g", "acked", r)], NOT(s[("g", "doomed", r)])),
                                                         _has(e, s, i, r)) for r in range(e.R)]))
                 for i in range(e.n)])


def consistent_reads(e, s):
    out = []
    doomed_at = [OR(*[AND(EQ(s[("g", "exp", k)], r), s[("g", "doomed", r)]) for r in range(e.R)])
                 for k in range(e.L)]
    for i in range(e.n):
        lead = AND(s[("b", i, "alive")], EQ(s[("b", i, "role")], LEADER))
        upto = MIN(s[("b", i, "hw")], s[("g", "elen")])
        clean = True
        for k in range(e.L):
            clean = AND(clean, NOT(doomed_at[k]))
            out.append(IMPLIES(AND(lead, k < upto, clean), EQ(s[("b", i, "lr", k)], s[("g", "exp", k)])))
    return AND(*out)


def min_isr_durability(e, s):
    need = min(e.cfg.min_isr, e.n)
    out = []
    for i in range(e.n):
        for k in range(e.L):
            holders = SUM(AND(k < s[("b", o, "leo")], _same_entry(s, o, i, k)) if o != i
                          else k < s[("b", o, "leo")] for o in range(e.n))
            out.append(IMPLIES(AND(_acting(e, s, i), k < s[("b", i, "hw")]), holders >= need))
    return OR(s[("g", "lossy")] > 0, AND(*out))


def strong_isr(e, s):
    out = []
    for i in range(e.n):
        for m in range(e.n):
            if m == i:
                continue
            member = AND(_acting(e, s, i), s[("z", "isr", m)], NOT(s[("g", "damaged", m)]))
            for k in range(e.L):
                out.append(IMPLIES(AND(member, k < s[("b", i, "hw")]),
                                   AND(k < s[("b", m, "leo")], _same_entry(s, m, i, k))))
    return AND(*out)


def leader_completeness(e, s):
    return AND(*[IMPLIES(AND(_acting(e, s, i), _committed(e, s, r)), _has(e, s, i, r))
                 for i in range(e.n) for r in range(e.R)])


def leader_candidate_completeness(e, s):
    return AND(*[IMPLIES(AND(s[("z", "isr", m)], s[("b", m, "alive")], s[("z", "sess", m)],
                             NOT(s[("g", "damaged", m)]), _committed(e, s, r)), _has(e, s, m, r))
                 for m in range(e.n) for r in range(e.R)])


def replication_quorum_superset(e, s):
    out = []
    for i in range(e.n):
        mx = e.maximal_isr(s, i)
        out += [IMPLIES(AND(_acting(e, s, i), s[("z", "isr", j)]), mx[j]) for j in range(e.n)]
    return AND(*out)


def no_committed_record_lost_globally(e, s):
    return AND(*[IMPLIES(_committed(e, s, r), OR(*[_has(e, s, i, r) for i in range(e.n)]))
                 for r in range(e.R)])


def producer_send_order(e, s):
    return e.prods.send_order(s) if e.prods else True


def producer_exactly_once(e, s):
    return e.prods.exactly_once(s) if e.prods else True


STATE_PROPS = {
    "HwBelowLeo": hw_below_leo, "LogMatching": log_matching,
    "UniqueLeaderPerEpoch": unique_leader_per_epoch, "AckedDurable": acked_durable,
    "ConsistentReads": consistent_reads, "MinIsrDurability": min_isr_durability,
    "StrongIsr": strong_isr, "LeaderCompleteness": leader_completeness,
    "LeaderCandidateCompleteness": leader_candidate_completeness,
    "ReplicationQuorumSuperset": replication_quorum_superset,
    "NoCommittedRecordLostGlobally": no_committed_record_lost_globally,
    # the producers' promises (checkers/prove/producers.py holds their encoding)
    "ProducerSendOrder": producer_send_order, "ProducerExactlyOnce": producer_exactly_once,
}
CLIENT_PROPS = ("ProducerSendOrder", "ProducerExactlyOnce")


def step_holds(e, s, t):
    """MonotonicEpochs: a broker that stays up never sees its epochs go back."""
    return AND(*[IMPLIES(AND(s[("b", i, "alive")], t[("b", i, "alive")]),
                         AND(t[("b", i, "le")] >= s[("b", i, "le")], t[("b", i, "ce")] >= s[("b", i, "ce")]))
                 for i in range(e.n)])


def names_for(cfg, only=None) -> list[str]:
    """The active invariants (spec's scoping) among `only` (None: all), MonotonicEpochs included.
    A producer invariant needs producers; unasked, only where the settings promise it
    (spec.invariants.selected: named, it is checked anyway)."""
    from spec.invariants import selected
    clients = {i.name for i in selected(cfg, None if only is None else tuple(only))}
    names = [n for n in STATE_PROPS if not (cfg.unclean and n in SCOPED)
             and (n not in CLIENT_PROPS or n in clients)] + ["MonotonicEpochs"]
    return names if only is None else [n for n in names if n in only]
