"""The high-watermark rule in the encoding (spec/rules.py `maximal_isr`, `hw_may_advance`,
`leader_hw`; spec/updates.py `advance_hw`): the HW a leader may advance to from its followers'
positions, acks=all writes it completes and the prefix it exposes to consumers.
"""
from __future__ import annotations

from checkers.prove.sym import AND, EQ, MAX, MIN, NE, NOT, OR, SUM, ite


class HighWatermark:
    """The HW rule and its effects (a mixin of Encoding)."""

    def maximal_isr(self, s, i):
        """rules.maximal_isr (KIP-497): the ISR with a pending proposal's members, as booleans."""
        if "maximal-isr" in self.fx:
            hp = s[("b", i, "haspend")]
            return [OR(s[("b", i, "isr", j)], AND(hp, s[("b", i, "pend", j)])) for j in range(self.n)]
        return [s[("b", i, "isr", j)] for j in range(self.n)]

    def hw_may_advance(self, s, i):
        """rules.hw_may_advance: with min-isr-hw, not while the ISR is below min ISR."""
        if "min-isr-hw" not in self.fx:
            return True
        return SUM(s[("b", i, "isr", j)] for j in range(self.n)) >= self.cfg.min_isr

    def leader_hw(self, s, i):
        """rules.leader_hw: the least position of the maximal ISR, never backwards."""
        old = s[("b", i, "hw")]
        members = self.maximal_isr(s, i)
        hw = s[("b", i, "leo")]
        unknown = False
        for r in range(self.n):
            if r == i:
                continue
            p = s[("b", i, "pos", r)]
            unknown = OR(unknown, AND(members[r], p < 0))
            hw = ite(members[r], MIN(hw, p), hw)
        return ite(OR(NOT(self.hw_may_advance(s, i)), unknown), old, MAX(hw, old))

    def advance_hw(self, s, i, split: bool = True):
        """Apply the HW rule on leader i, complete acks=all writes, expose reads (in place).
        `split`: whether the exposed prefix grows is an outcome of the step (named_case; a
        producer's append, already split by its log slot, passes False)."""
        L, R = self.L, self.R
        old = s[("b", i, "hw")]
        hw = self.leader_hw(s, i)
        ok = SUM(self.maximal_isr(s, i)) >= self.cfg.min_isr
        lr = [s[("b", i, "lr", k)] for k in range(L)]
        for r in range(R):
            hit = OR(*[AND(old <= k, k < hw, EQ(lr[k], r)) for k in range(L)])
            pa = s[("b", i, "pa", r)]
            s[("g", "acked", r)] = OR(s[("g", "acked", r)], AND(pa, hit, ok))
            s[("b", i, "pa", r)] = AND(pa, NOT(hit))
        elen = s[("g", "elen")]
        match = AND(*[OR(k >= elen, EQ(lr[k], s[("g", "exp", k)])) for k in range(L)])
        grow = AND(NE(hw, old), hw > elen, match)     # spec returns early when the HW stays
        if split:
            # the goals read the exposed prefix at symbolic offsets (the answers'): with the
            # growth fixed they read either the old terms or the leader's log (ReplicatedWire
            # 17-26 s per query at 4 in flight on ProposeShrink and AlterIsrResponse, merged)
            grow = self.named_case(grow)
        lr_keys = [("b", i, "lr", k) for k in range(L)]
        for k in range(L):
            x = ("g", "exp", k)
            take = AND(grow, k < hw)
            self.copy_slot(s, x, ite(take, lr[k], s[x]),
                           self.copied(s, [lr_keys[k], x], lambda v: ite(take, v[0], v[1])))
        s[("g", "elen")] = ite(grow, hw, elen)
        s[("b", i, "hw")] = hw
