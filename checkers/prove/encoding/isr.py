"""ISR proposals in the encoding: a leader proposes a shrink (ProposeShrink) or an expansion
(from a fetch), the controller commits or rejects it with compare-and-set (ControllerAlterIsr,
KIP-497; the added member's broker epoch checked, KIP-903) and the leader learns the answer
(AlterIsrResponse); before AlterIsr the leader writes the store itself, at once. Every write of
the store's ISR keeps the eligible leader replicas (KIP-966, rules.elr_after_isr_change) and
the `damaged` ghost up to date.
"""
from __future__ import annotations

from checkers.prove.sym import AND, EQ, NE, NOT, OR, SUM, ite
from spec.state import LEADER


class IsrProposals:
    """ProposeShrink, ControllerAlterIsr, AlterIsrResponse (a mixin of Encoding)."""

    def elr_after_isr_change(self, old_isr, new_isr, elr, unclean_shutdown):
        """rules.elr_after_isr_change (KIP-966): replicas leaving the ISR while it is below min
        ISR join the ELR; never an unclean-shutdown replica nor an ISR member; empty at or
        above min ISR."""
        n = self.n
        below = SUM(new_isr) < self.cfg.min_isr
        return [AND(below, OR(elr[k], AND(old_isr[k], NOT(new_isr[k]))), NOT(unclean_shutdown[k]),
                    NOT(new_isr[k])) for k in range(n)]

    def set_isr_damaged(self, s):
        """spec/model.py _set_isr: a damaged broker stops being damaged once out of the
        store's ISR."""
        for j in range(self.n):
            s[("g", "damaged", j)] = AND(s[("g", "damaged", j)], s[("z", "isr", j)])

    def guard_propose_shrink(self, s, a):
        i, f = a.b, a.arg
        return AND(self.up(s, i), EQ(s[("b", i, "role")], LEADER), NOT(s[("b", i, "haspend")]),
                   s[("b", i, "isr", f)], s[("b", i, "pos", f)] < s[("b", i, "leo")])

    def apply_propose_shrink(self, s, a):
        i, f = a.b, a.arg
        s[("b", i, "haspend")] = True
        for j in range(self.n):
            s[("b", i, "pend", j)] = AND(s[("b", i, "isr", j)], j != f)
        s[("b", i, "pgen")] = 0
        self.after_isr_proposal(s, i)

    def after_isr_proposal(self, s, li):
        """spec/model.py _proposed: with AlterIsr the leader waits for the controller; older
        generations write the store at once (commit, then apply the answer); then the HW rule."""
        if not self.cfg.alter_isr:
            hp = s[("b", li, "haspend")]
            t = dict(s)
            self.commit_isr_proposal(t, li)
            self.apply_isr_answer(t, li)
            for k in t:
                if t[k] is not s[k]:
                    s[k] = ite(hp, t[k], s[k])
        self.advance_hw(s, li)

    def commit_isr_proposal(self, s, li):
        """spec/model.py _commit_isr_proposal: compare-and-set of leader li's proposal in the store
        (rules.isr_addition_valid for every added member), its answer left in `resp`."""
        n = self.n
        eligible = True
        if "isr-broker-epoch" in self.fx:
            for k in range(n):
                added = AND(s[("b", li, "pend", k)], NOT(s[("b", li, "isr", k)]))
                eligible = AND(eligible, OR(NOT(added), AND(s[("z", "sess", k)],
                                                            EQ(s[("b", li, "pgen")], 2))))
        ok = AND(EQ(s[("z", "leader")], li), EQ(s[("b", li, "le")], s[("z", "le")]),
                 EQ(s[("b", li, "ver")], s[("z", "ver")]), eligible)
        nver = s[("z", "ver")] + 1
        if self.elr:
            zisr = [s[("z", "isr", j)] for j in range(n)]
            pend = [s[("b", li, "pend", j)] for j in range(n)]
            elr = self.elr_after_isr_change(zisr, pend, [s[("z", "elr", j)] for j in range(n)],
                                            [False] * n)
            for j in range(n):
                s[("z", "elr", j)] = ite(ok, elr[j], s[("z", "elr", j)])
        for j in range(n):
            s[("z", "isr", j)] = ite(ok, s[("b", li, "pend", j)], s[("z", "isr", j)])
        s[("z", "ver")] = ite(ok, nver, s[("z", "ver")])
        self.set_isr_damaged(s)
        s[("b", li, "resp")] = ite(ok, nver, -2)

    def guard_alter_isr_response(self, s, a):
        return AND(self.up(s, a.b), EQ(s[("b", a.b, "role")], LEADER), NE(s[("b", a.b, "resp")], -1))

    def apply_alter_isr_response(self, s, a):
        i = a.b
        self.apply_isr_answer(s, i)

    def apply_isr_answer(self, s, i):
        """spec/model.py _alter_isr_response: the leader takes the committed ISR and version, or
        drops a rejected proposal; then the HW rule."""
        ok = s[("b", i, "resp")] >= 0
        for j in range(self.n):
            s[("b", i, "isr", j)] = ite(ok, s[("b", i, "pend", j)], s[("b", i, "isr", j)])
            s[("b", i, "pend", j)] = False
        s[("b", i, "ver")] = ite(ok, s[("b", i, "resp")], s[("b", i, "ver")])
        s[("b", i, "haspend")] = False
        s[("b", i, "pgen")] = 0
        s[("b", i, "resp")] = -1
        self.advance_hw(s, i)

    def guard_controller_alter_isr(self, s, a):
        c, l = a.b, a.arg
        return AND(self.is_current_controller(s, c), s[("b", l, "alive")], s[("b", l, "haspend")],
                   EQ(s[("b", l, "resp")], -1))

    def apply_controller_alter_isr(self, s, a):
        c, l = a.b, a.arg
        self.commit_isr_proposal(s, l)
        s[("b", c, "cc_l")], s[("b", c, "cc_le")] = s[("z", "leader")], s[("z", "le")]
        s[("b", c, "cc_ver")] = s[("z", "ver")]
        for k in range(self.n):
            s[("b", c, "ccisr", k)] = s[("z", "isr", k)]
