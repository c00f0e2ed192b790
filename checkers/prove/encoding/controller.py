"""The controller and its LeaderAndIsr requests in the encoding: electing a controller, its
reaction to broker changes (spec/model.py `_react_plan`: who is gone or bounced, the ISR and
ELR after it, the leader candidates, unclean recovery's choice), a deposed controller acting on
its stale cache (ZombieElect), sending LeaderAndIsr into bounded per-destination slots, and the
delivery (rules.control_request_accepted: become leader or follower) or loss of a request.
"""
from __future__ import annotations

from checkers.prove.sym import AND, EQ, MAX, NE, NOT, OR, ite, sel
from spec.state import FOLLOWER, LEADER


class ControllerAndLeaderAndIsr:
    """ControllerElect, ControllerReact, ZombieElect, Deliver, Lose (a mixin of Encoding)."""

    def control_request_accepted(self, s, i, ce, le):
        """rules.control_request_accepted: a newer leader epoch (and, with
        controller-epoch-fencing, no older controller epoch)."""
        ok = le > s[("b", i, "le")]
        if "controller-epoch-fencing" in self.fx:
            ok = AND(ce >= s[("b", i, "ce")], ok)
        return ok

    def is_current_controller(self, s, c):
        """spec/model.py _is_current_controller."""
        return AND(self.up(s, c), EQ(s[("z", "controller")], c), EQ(s[("b", c, "ctl")], s[("z", "ce")]))

    def react_plan(self, s, c):
        """spec/model.py _react_plan for controller c: (new registrations, ISR after removal,
        whether a leader is needed, candidates, live brokers, ELR, last known ELR)."""
        n = self.n
        live = [s[("z", "sess", k)] for k in range(n)]
        h = [s[("b", c, "cch", k)] for k in range(n)]
        new = [AND(live[k], NE(h[k], 2)) for k in range(n)]
        bounced = [AND(new[k], NE(h[k], 0)) for k in range(n)]
        zl = s[("z", "leader")]
        lbounce = AND(zl >= 0, sel(live, zl, False), NE(s[("z", "lsess")], 2))
        bounced = [OR(bounced[k], AND(lbounce, EQ(zl, k))) for k in range(n)]
        if self.elr:
            # KAFKA-15586: a registration after an unclean shutdown counts as a bounce for
            # every controller
            bounced = [OR(bounced[k], AND(s[("z", "unclean", k)], live[k])) for k in range(n)]
        gone = [OR(NOT(live[k]), bounced[k]) for k in range(n)]
        zisr = [s[("z", "isr", k)] for k in range(n)]
        isr = [AND(zisr[k], NOT(gone[k])) for k in range(n)]
        empty = NOT(OR(*isr))
        elr = lkelr = None
        if self.elr:
            zelr = [s[("z", "elr", k)] for k in range(n)]
            elr = self.elr_after_isr_change(zisr, isr, zelr, bounced)
            # the last eligible replicas went through unclean shutdowns: remember them
            to_lk = AND(OR(*zelr), NOT(OR(*elr)), empty)
            lkelr = [ite(to_lk, zelr[k], s[("z", "lkelr", k)]) for k in range(n)]
            # the ISR keeps its last member only while nobody else is eligible
            empty = AND(empty, NOT(OR(*elr)), NOT(OR(*lkelr)))
        keep_leader = AND(zl >= 0, sel(zisr, zl, False))
        isr = [ite(empty, ite(keep_leader, AND(zisr[k], EQ(zl, k)), zisr[k]), isr[k]) for k in range(n)]
        need = OR(zl < 0, sel(gone, zl, False))
        cands = [AND(isr[k], live[k]) for k in range(n)]
        if self.elr:
            # rules.leader_candidates: the ISR, else the ELR, else the last known ELR
            any_isr = OR(*cands)
            from_elr = [AND(elr[k], live[k]) for k in range(n)]
            any_elr = OR(*from_elr)
            from_lk = [AND(lkelr[k], live[k]) for k in range(n)]
            cands = [ite(any_isr, cands[k], ite(any_elr, from_elr[k], from_lk[k])) for k in range(n)]
        if self.cfg.unclean:
            anyc = OR(*cands)
            cands = [OR(cands[k], AND(NOT(anyc), live[k])) for k in range(n)]
        if self.elr:
            only_lk = AND(OR(*cands), NOT(OR(*[AND(cands[k], isr[k]) for k in range(n)])),
                          NOT(OR(*[AND(cands[k], elr[k]) for k in range(n)])),
                          OR(*[AND(cands[k], lkelr[k]) for k in range(n)]))
            best = self.unclean_recovery_choice(s, cands)
            cands = [ite(only_lk, best[k], cands[k]) for k in range(n)]
        return new, isr, need, cands, live, elr, lkelr

    def unclean_recovery_choice(self, s, cands):
        """rules.unclean_recovery_choice: the candidates with the largest (last cached leader
        epoch or -1, log end offset)."""
        n, C = self.n, self.C
        key = []
        for k in range(n):
            clen = s[("b", k, "clen")]
            last = ite(clen > 0, sel([s[("b", k, "ce_", q)] for q in range(C)], clen - 1), -1)
            key.append((last, s[("b", k, "leo")]))

        def above(a, b):
            return OR(a[0] > b[0], AND(EQ(a[0], b[0]), a[1] > b[1]))
        return [AND(cands[k], *[NOT(AND(cands[m], above(key[m], key[k])))
                                for m in range(n) if m != k]) for k in range(n)]

    def send_leader_and_isr(self, s, targets, ce, le, leader, isr, ver):
        """spec/model.py _send_all: LeaderAndIsr to each target, unless an identical request is
        already in flight."""
        K = self.K
        for d in range(self.n):
            dup = False
            for k in range(K):
                same = AND(s[("m", d, k, "v")], EQ(s[("m", d, k, "ce")], ce), EQ(s[("m", d, k, "le")], le),
                           EQ(s[("m", d, k, "leader")], leader), EQ(s[("m", d, k, "ver")], ver),
                           *[EQ(s[("m", d, k, "isr", j)], isr[j]) for j in range(self.n)])
                dup = OR(dup, same)
            want = AND(targets[d], NOT(dup))
            placed = False
            for k in range(K):
                put = AND(want, NOT(placed), NOT(s[("m", d, k, "v")]))
                s[("m", d, k, "v")] = OR(s[("m", d, k, "v")], put)
                for f, v in (("ce", ce), ("le", le), ("leader", leader), ("ver", ver)):
                    s[("m", d, k, f)] = ite(put, v, s[("m", d, k, f)])
                for j in range(self.n):
                    s[("m", d, k, "isr", j)] = ite(put, isr[j], s[("m", d, k, "isr", j)])
                placed = OR(placed, put)
            s[("g", "oob")] = OR(s[("g", "oob")], AND(want, NOT(placed)))

    def guard_controller_elect(self, s, a):
        i = a.b
        return AND(self.up(s, i), s[("z", "controller")] < 0, s[("z", "sess", i)], EQ(s[("b", i, "ctl")], 0))

    def apply_controller_elect(self, s, a):
        i, n = a.b, self.n
        ce = s[("z", "ce")] + 1
        s[("z", "controller")] = i
        s[("z", "ce")] = ce
        for k in range(n):
            s[("b", k, "ce")] = ite(self.up(s, k), MAX(s[("b", k, "ce")], ce), s[("b", k, "ce")])
        s[("b", i, "ctl")] = ce
        s[("b", i, "hascc")] = True
        s[("b", i, "cc_l")] = s[("z", "leader")]
        s[("b", i, "cc_le")] = s[("z", "le")]
        s[("b", i, "cc_ver")] = s[("z", "ver")]
        for j in range(n):
            s[("b", i, "ccisr", j)] = s[("z", "isr", j)]
            s[("b", i, "cch", j)] = 0

    def guard_controller_react(self, s, a):
        c, x, n = a.b, a.arg, self.n
        new, isr, need, cands, _, elr, lkelr = self.react_plan(s, c)
        changed = OR(*[NE(isr[k], s[("z", "isr", k)]) for k in range(n)])
        if self.elr:
            changed = OR(changed, *[NE(elr[k], s[("z", "elr", k)]) for k in range(n)],
                         *[NE(lkelr[k], s[("z", "lkelr", k)]) for k in range(n)],
                         *[s[("z", "unclean", k)] for k in range(n)])
        anynew = OR(*new)
        elect_ok = AND(OR(*cands), s[("g", "elections")] < self.cfg.elections)
        zl = s[("z", "leader")]
        if x >= 0:
            opt = OR(AND(NOT(need), OR(anynew, changed), EQ(zl, x)), AND(need, elect_ok, cands[x]))
        else:
            opt = AND(need, NOT(elect_ok), OR(zl >= 0, anynew, changed))
        return AND(self.is_current_controller(s, c), opt)

    def apply_controller_react(self, s, a):
        c, x, n = a.b, a.arg, self.n
        new, isr, need, _, live, elr, lkelr = self.react_plan(s, c)
        if x >= 0:
            s[("g", "elections")] = ite(need, s[("g", "elections")] + 1, s[("g", "elections")])
            single = AND(need, NOT(isr[x]))
            isr = [ite(single, k == x, isr[k]) for k in range(n)]
            if self.elr:    # an election takes the leader out of the ELR and ends the last known
                elr = [AND(elr[k], NOT(AND(need, isr[k]))) for k in range(n)]
                lkelr = [AND(lkelr[k], NOT(need)) for k in range(n)]
        changed = OR(need, *[NE(isr[k], s[("z", "isr", k)]) for k in range(n)])
        if self.elr:
            changed = OR(changed, *[NE(elr[k], s[("z", "elr", k)]) for k in range(n)],
                         *[NE(lkelr[k], s[("z", "lkelr", k)]) for k in range(n)])
            for k in range(n):      # unchanged, these equal the store's sets already
                s[("z", "elr", k)], s[("z", "lkelr", k)] = elr[k], lkelr[k]
                s[("z", "unclean", k)] = False
        le = ite(changed, s[("z", "le")] + 1, s[("z", "le")])
        ver = ite(changed, s[("z", "ver")] + 1, s[("z", "ver")])
        leader = ite(changed, x, s[("z", "leader")])
        zisr = [ite(changed, isr[k], s[("z", "isr", k)]) for k in range(n)]
        s[("z", "lsess")] = ite(changed, 2 if x >= 0 else 0, s[("z", "lsess")])
        s[("z", "le")], s[("z", "ver")], s[("z", "leader")] = le, ver, leader
        for k in range(n):
            s[("z", "isr", k)] = zisr[k]
        targets = [ite(changed, live[k], new[k]) for k in range(n)]
        self.send_leader_and_isr(s, targets, s[("z", "ce")], le, leader, zisr, ver)
        s[("b", c, "cc_l")], s[("b", c, "cc_le")], s[("b", c, "cc_ver")] = leader, le, ver
        for k in range(n):
            s[("b", c, "ccisr", k)] = zisr[k]
            s[("b", c, "cch", k)] = ite(live[k], 2, 0)
        self.set_isr_damaged(s)

    def guard_zombie_elect(self, s, a):
        # spec: not the current controller, and a controller epoch older than the store's
        # (which already rules out being the current controller)
        i, x = a.b, a.arg
        ctl = s[("b", i, "ctl")]
        return AND(self.up(s, i), NE(ctl, 0), ctl < s[("z", "ce")], s[("b", i, "hascc")],
                   s[("g", "elections")] < self.cfg.elections, s[("b", i, "ccisr", x)],
                   NE(s[("b", i, "cc_l")], x))

    def apply_zombie_elect(self, s, a):
        # its store write fails (the session is gone), but the requests go to every broker
        i, x, n = a.b, a.arg, self.n
        le = s[("b", i, "cc_le")] + 1
        isr = [s[("b", i, "ccisr", j)] for j in range(n)]
        self.send_leader_and_isr(s, [True] * n, s[("b", i, "ctl")], le, x, isr, s[("b", i, "cc_ver")])
        s[("b", i, "cc_l")] = x
        s[("b", i, "cc_le")] = le
        s[("g", "elections")] = s[("g", "elections")] + 1

    def guard_deliver(self, s, a):
        d, k = a.arg
        return AND(s[("m", d, k, "v")], self.up(s, d))

    def apply_deliver(self, s, a):
        i, k = a.arg
        n, C = self.n, self.C
        ce, le, leader, ver = (s[("m", i, k, f)] for f in ("ce", "le", "leader", "ver"))
        misr = [s[("m", i, k, "isr", j)] for j in range(n)]
        s[("m", i, k, "v")] = False
        acc = self.control_request_accepted(s, i, ce, le)
        me = EQ(leader, i)
        # become leader
        tl = dict(s)
        self.cache_assign(tl, i, le, s[("b", i, "leo")])
        tl.update({("b", i, "role"): LEADER, ("b", i, "leader"): i, ("b", i, "trunc"): False,
                   ("b", i, "hasf"): False})
        for j in range(n):
            tl[("b", i, "isr", j)] = misr[j]
            tl[("b", i, "pos", j)] = s[("b", i, "leo")] if j == i else -1
        for e in range(self.E):
            tl[("g", "el", e, i)] = OR(s[("g", "el", e, i)], EQ(le, e))
        tl[("g", "oob")] = OR(tl[("g", "oob")], le >= self.E)
        # become follower
        tf = dict(s)
        trunc = OR(NE(s[("b", i, "role")], FOLLOWER), NE(s[("b", i, "leader")], leader), s[("b", i, "trunc")])
        if "truncate-on-epoch-change" in self.fx:
            trunc = OR(trunc, NE(le, s[("b", i, "le")]))
        tf.update({("b", i, "role"): FOLLOWER, ("b", i, "leader"): leader, ("b", i, "trunc"): trunc,
                   ("b", i, "hasf"): AND(s[("b", i, "hasf")], NOT(trunc))})
        for j in range(n):
            tf[("b", i, "isr", j)] = False
            tf[("b", i, "pos", j)] = -1
        common = {("b", i, "le"): le, ("b", i, "ce"): MAX(s[("b", i, "ce")], ce), ("b", i, "ver"): ver,
                  ("b", i, "haspend"): False, ("b", i, "pgen"): 0, ("b", i, "resp"): -1}
        for j in range(n):
            common[("b", i, "pend", j)] = False
        for r in range(self.R):
            common[("b", i, "pa", r)] = False
        for t in (tl, tf):
            t.update(common)
        for key in set(tl) | set(tf):
            v = ite(acc, ite(me, tl[key], tf[key]), s[key])
            if v is not s[key]:
                s[key] = v

    def guard_lose(self, s, a):
        d, k = a.arg
        return AND(s[("m", d, k, "v")], s[("g", "losses")] < self.cfg.losses)

    def apply_lose(self, s, a):
        d, k = a.arg
        s[("m", d, k, "v")] = False
        s[("g", "losses")] = s[("g", "losses")] + 1
