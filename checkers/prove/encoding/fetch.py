"""Follower actions in the encoding: FetchRequest (the leader records the follower's position
and may propose it into the ISR, rules.may_join_isr), FetchResponse (append, truncate out of
range, or halt) and Truncate before fetching (rules.truncation_offset). A follower action's
instance names the leader it assumes (`via`), which its guard pins; fetch epoch fencing is
rules.fetch_epoch_accepted.
"""
from __future__ import annotations

from checkers.prove.sym import AND, EQ, MIN, NOT, OR, ite, sel
from spec.state import FOLLOWER, LEADER


class FetchRequestsAndResponses:
    """FetchRequest, FetchResponse and Truncate (a mixin of Encoding)."""

    def fetch_epoch_accepted(self, s, i, j):
        """rules.fetch_epoch_accepted (KIP-320 fetch epoch fencing)."""
        if "fetch-epoch-fencing" not in self.fx:
            return True
        return EQ(s[("b", i, "le")], s[("b", j, "le")])

    def may_join_isr(self, s, j, position):
        """rules.may_join_isr: caught up to the HW (and, with isr-expand-epoch-start, to the
        start of the leader's epoch)."""
        ok = position >= s[("b", j, "hw")]
        if "isr-expand-epoch-start" in self.fx:
            clen = s[("b", j, "clen")]
            ok = AND(ok, OR(EQ(clen, 0), position >= self.cache_start(s, j, clen - 1)))
        return ok

    def leader_serving(self, s, j):
        """Broker j runs and acts as leader (a follower fetches or truncates only from one)."""
        return AND(self.up(s, j), EQ(s[("b", j, "role")], LEADER))

    def guard_truncate(self, s, a):
        i, j = a.b, a.via
        g = AND(self.up(s, i), EQ(s[("b", i, "role")], FOLLOWER), EQ(s[("b", i, "leader")], j),
                s[("b", i, "trunc")])
        if "epoch-truncation" in self.fx:
            g = AND(g, self.leader_serving(s, j), self.fetch_epoch_accepted(s, i, j))
        return g

    def apply_truncate(self, s, a):
        i, j = a.b, a.via
        to = MIN(self.truncation_offset(s, i, j), s[("b", i, "leo")])
        self.truncate_log(s, i, to)
        s[("b", i, "trunc")] = False

    def guard_fetch_request(self, s, a):
        i, j = a.b, a.via
        noop = AND(EQ(s[("b", i, "leo")], s[("b", j, "leo")]), EQ(s[("b", i, "hw")], s[("b", j, "hw")]),
                   EQ(s[("b", j, "pos", i)], s[("b", i, "leo")]),
                   OR(s[("b", j, "isr", i)], s[("b", j, "haspend")],
                      NOT(self.may_join_isr(s, j, s[("b", i, "leo")]))))
        return AND(self.up(s, i), EQ(s[("b", i, "role")], FOLLOWER), EQ(s[("b", i, "leader")], j),
                   NOT(s[("b", i, "trunc")]), NOT(s[("b", i, "hasf")]), self.leader_serving(s, j),
                   self.fetch_epoch_accepted(s, i, j), NOT(noop))

    def apply_fetch_request(self, s, a):
        i, j, L = a.b, a.via, self.L
        off = s[("b", i, "leo")]
        jleo = s[("b", j, "leo")]
        oor = off > jleo
        join = AND(NOT(oor), NOT(s[("b", j, "isr", i)]), NOT(s[("b", j, "haspend")]),
                   self.may_join_isr(s, j, off))
        s[("b", j, "pos", i)] = ite(oor, s[("b", j, "pos", i)], off)
        s[("b", j, "haspend")] = OR(s[("b", j, "haspend")], join)
        for k in range(self.n):
            s[("b", j, "pend", k)] = ite(join, OR(s[("b", j, "isr", k)], k == i), s[("b", j, "pend", k)])
        s[("b", j, "pgen")] = ite(join, 2, s[("b", j, "pgen")])
        s[("b", i, "hasf")] = True
        s[("b", i, "f_src")] = j
        s[("b", i, "f_le")] = s[("b", j, "le")]
        s[("b", i, "f_off")] = ite(oor, jleo, off)
        s[("b", i, "f_n")] = ite(oor, 0, jleo - off)
        s[("b", i, "f_hw")] = s[("b", j, "hw")]
        s[("b", i, "f_oor")] = oor
        lr = [s[("b", j, "lr", k)] for k in range(L)]
        le = [s[("b", j, "lep", k)] for k in range(L)]
        lr_keys = [("b", j, "lr", k) for k in range(L)]
        for k in range(L):
            self.copy_slot(s, ("b", i, "fr", k), sel(lr, off + k),
                           self.copied(s, lr_keys, lambda v: sel(v, off + k)))
            s[("b", i, "fe", k)] = sel(le, off + k)
        if not self.cfg.alter_isr:
            t = dict(s)
            self.after_isr_proposal(t, j)
            for k in t:
                if t[k] is not s[k]:
                    s[k] = ite(oor, s[k], t[k])
        else:
            t = dict(s)
            self.advance_hw(t, j)
            for k in t:
                if t[k] is not s[k]:
                    s[k] = ite(oor, s[k], t[k])

    def guard_fetch_response(self, s, a):
        return AND(self.up(s, a.b), s[("b", a.b, "hasf")])

    def apply_fetch_response(self, s, a):
        i, L = a.b, self.L
        s[("b", i, "hasf")] = False
        src, off, n_, fhw, oor = (s[("b", i, f)] for f in ("f_src", "f_off", "f_n", "f_hw", "f_oor"))
        applies = AND(EQ(s[("b", i, "role")], FOLLOWER), NOT(s[("b", i, "trunc")]),
                      EQ(s[("b", i, "leader")], src))
        halts = "epoch-truncation" not in self.fx and not self.cfg.unclean
        leo = s[("b", i, "leo")]
        # out of range, truncating
        t_oor = dict(s)
        self.truncate_log(t_oor, i, MIN(off, leo))
        # append
        t_app = dict(s)
        for k in range(L):
            keep = k < leo
            src_idx = k - leo
            fr = [s[("b", i, "fr", q)] for q in range(L)]
            fe = [s[("b", i, "fe", q)] for q in range(L)]
            fr_keys = [("b", i, "fr", q) for q in range(L)]
            x = ("b", i, "lr", k)
            self.copy_slot(t_app, x, ite(keep, s[x], sel(fr, src_idx, s[x])),
                           self.copied(s, fr_keys + [x],
                                       lambda v: ite(keep, v[-1], sel(v[:-1], src_idx, v[-1]))))
            t_app[("b", i, "lep", k)] = ite(keep, s[("b", i, "lep", k)], sel(fe, src_idx, s[("b", i, "lep", k)]))
        t_app[("g", "oob")] = OR(t_app[("g", "oob")], leo + n_ > L)
        for k in range(L):
            t2 = dict(t_app)
            self.cache_assign(t2, i, s[("b", i, "fe", k)], off + k)
            for key in t2:
                if t2[key] is not t_app[key]:
                    t_app[key] = ite(k < n_, t2[key], t_app[key])
        new_len = leo + n_
        t_app[("b", i, "leo")] = new_len
        t_app[("b", i, "hw")] = MIN(fhw, new_len)
        self.durable(t_app, i)
        t_halt = dict(s)
        if halts:
            self.take_down(t_halt, i)
        which_oor = AND(applies, oor)
        which_app = AND(applies, NOT(oor), EQ(off, leo))
        keys = set(t_oor) | set(t_app) | set(t_halt)
        for key in keys:
            a_oor = t_halt[key] if halts else t_oor[key]
            v = ite(which_oor, a_oor, ite(which_app, t_app[key], s[key]))
            if v is not s[key]:
                s[key] = v
