"""Crashes, disk loss, restarts and pauses in the encoding (spec/model.py `_crash`, `_restart`,
`_down`, `_pause`, `_resume`, `_session_expire`, `_reregister`, `_normalize_sessions`): a
process crash keeps the log, a power failure loses the unflushed suffix, a lost disk returns
the broker empty (log and epoch cache); a paused broker only resumes, crashes or loses its
session, and once running again it notices the lost session and registers anew. Also whether a
broker serves at all (`up`), which every other area asks.
"""
from __future__ import annotations

from checkers.prove.sym import AND, EQ, MAX, NE, NOT, OR, ite
from spec.state import NONE


class CrashesAndPauses:
    """Restart, Crash, Pause, Resume, SessionExpire, Reregister (a mixin of Encoding)."""

    def up(self, s, i):
        """spec/updates.py is_up: running, and not paused. Without pauses in the config no broker is ever
        paused: the flag is left out, so such formulas (and induction's free pre-states) are
        exactly what they were before pauses were encoded."""
        if not self.cfg.pauses:
            return s[("b", i, "alive")]
        return AND(s[("b", i, "alive")], NOT(s[("b", i, "paused")]))

    def take_down(self, s, i):
        """spec/model.py _down: broker i stops; its volatile state, session and requests go."""
        n = self.n
        s.update({("b", i, "alive"): False, ("b", i, "paused"): False, ("b", i, "role"): NONE,
                  ("b", i, "leader"): -1, ("b", i, "haspend"): False, ("b", i, "trunc"): False, ("b", i, "hasf"): False,
                  ("b", i, "ctl"): 0, ("b", i, "hascc"): False, ("b", i, "pgen"): 0,
                  ("b", i, "resp"): -1})
        for j in range(n):
            s[("b", i, "isr", j)] = False
            s[("b", i, "pend", j)] = False
            s[("b", i, "pos", j)] = -1
        self._clear_fetch_response(s, i)
        self._clear_controller_cache(s, i)
        for r in range(self.R):
            s[("b", i, "pa", r)] = False
        s[("z", "sess", i)] = False
        s[("z", "controller")] = ite(EQ(s[("z", "controller")], i), -1, s[("z", "controller")])
        for k in range(self.K):
            s[("m", i, k, "v")] = False

    def _clear_fetch_response(self, s, i):
        s[("b", i, "hasf")] = False

    def _clear_controller_cache(self, s, i):
        s[("b", i, "hascc")] = False

    def guard_restart(self, s, a):
        return NOT(s[("b", a.b, "alive")])

    def apply_restart(self, s, a):
        i, n = a.b, self.n
        s[("b", i, "alive")] = True
        s[("b", i, "le")] = -1
        s[("b", i, "role")] = NONE
        s[("b", i, "ce")] = s[("z", "ce")]
        if self.elr:    # every restart follows an unclean shutdown (KAFKA-15586)
            s[("z", "unclean", i)] = True
        self.register_new_session(s, i)

    def register_new_session(self, s, i):
        """Broker i registers with a new session number (Restart, Reregister), then spec's
        _normalize_sessions: what controllers handled, a pending expansion's broker epoch, and
        the leader's election session for broker i all become "an older session" (1)."""
        n = self.n
        s[("z", "sess", i)] = True
        for c in range(n):
            s[("b", c, "cch", i)] = ite(EQ(s[("b", c, "cch", i)], 2), 1, s[("b", c, "cch", i)])
            # spec reads the session of the first broker the pending expansion adds; it adds
            # one (every reachable state), so "broker i is not among those it adds" says the
            # same, and says it whatever the brokers' order: the step commutes with renaming
            # brokers from every state (checkers/prove/symmetry.py). Only while an expansion is
            # pending (spec's pend_gen is 0 otherwise; the flags mean nothing then).
            added = [AND(s[("b", c, "pend", k)], NOT(s[("b", c, "isr", k)])) for k in range(n)]
            pg = s[("b", c, "pgen")]
            s[("b", c, "pgen")] = ite(OR(NOT(s[("b", c, "haspend")]), EQ(pg, 0)), pg,
                                      ite(AND(EQ(pg, 2), NOT(added[i]), OR(*added)), 2, 1))
        zl, ls = s[("z", "leader")], s[("z", "lsess")]
        s[("z", "lsess")] = ite(OR(zl < 0, EQ(ls, 0)), 0, ite(AND(EQ(ls, 2), NE(zl, i)), 2, 1))

    def guard_crash(self, s, a):
        g = AND(s[("b", a.b, "alive")], s[("g", "crashes")] < self.cfg.crashes)
        if a.arg == 1:
            g = AND(g, s[("b", a.b, "flushed")] < s[("b", a.b, "leo")])
        if a.arg == 2:      # a disk with a log or an epoch cache on it
            g = AND(g, OR(s[("b", a.b, "leo")] > 0, s[("b", a.b, "clen")] > 0))
        return g

    def apply_crash(self, s, a):
        i, L = a.b, self.L
        old_leo = s[("b", i, "leo")]
        # a lost disk: the log and the whole epoch cache go (every entry starts at or past 0)
        new_len = s[("b", i, "flushed")] if a.arg == 1 else 0 if a.arg == 2 else old_leo
        lost = [AND(new_len <= k, k < old_leo) for k in range(L)]
        self.truncate_log(s, i, new_len)    # also drops cache entries starting at the log end
        self.take_down(s, i)
        s[("g", "crashes")] = s[("g", "crashes")] + 1
        if a.arg:
            s[("g", "lossy")] = s[("g", "lossy")] + 1
            for r in range(self.R):
                held = OR(*[AND(k < s[("b", j, "leo")], EQ(s[("b", j, "lr", k)], r))
                            for j in range(self.n) for k in range(L)])
                lost_r = OR(*[AND(lost[k], EQ(s[("b", i, "lr", k)], r)) for k in range(L)])
                s[("g", "doomed", r)] = OR(s[("g", "doomed", r)], AND(lost_r, NOT(held)))
            # damaged only if data was lost (a power failure always loses some, by its guard;
            # a lost disk may have held only an epoch cache)
            hit = s[("z", "isr", i)] if a.arg == 1 else AND(s[("z", "isr", i)], old_leo > 0)
            s[("g", "damaged", i)] = OR(s[("g", "damaged", i)], hit)

    def guard_pause(self, s, a):
        i = a.b
        return AND(s[("b", i, "alive")], NOT(s[("b", i, "paused")]),
                   s[("g", "pauses")] < self.cfg.pauses)

    def apply_pause(self, s, a):
        s[("b", a.b, "paused")] = True
        s[("g", "pauses")] = s[("g", "pauses")] + 1

    def guard_resume(self, s, a):
        return AND(s[("b", a.b, "alive")], s[("b", a.b, "paused")])

    def apply_resume(self, s, a):
        # queued /controller watch notifications are processed on resume
        i = a.b
        s[("b", i, "paused")] = False
        s[("b", i, "ce")] = MAX(s[("b", i, "ce")], s[("z", "ce")])

    def guard_session_expire(self, s, a):
        i = a.b
        return AND(s[("b", i, "alive")], s[("b", i, "paused")], s[("z", "sess", i)])

    def apply_session_expire(self, s, a):
        i = a.b
        s[("z", "sess", i)] = False
        s[("z", "controller")] = ite(EQ(s[("z", "controller")], i), -1, s[("z", "controller")])

    def guard_reregister(self, s, a):
        return AND(self.up(s, a.b), NOT(s[("z", "sess", a.b)]))

    def apply_reregister(self, s, a):
        i = a.b
        s[("b", i, "ctl")] = 0
        self._clear_controller_cache(s, i)
        s[("b", i, "ce")] = MAX(s[("b", i, "ce")], s[("z", "ce")])
        self.register_new_session(s, i)
