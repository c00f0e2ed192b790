"""Logs and leader-epoch caches in the encoding: spec/rules.py's cache rules
(LeaderEpochFileCache.assign and truncateFromEnd, KIP-101's end offset for an epoch, KIP-279's
epoch and end offset) and the truncation rule built on them, re-encoded over bounded slots;
truncating a log, the durability of unflushed writes, and the two actions that only touch a
leader's own log: Produce (the implicit client's append, under rules.produce_allowed) and Flush.
"""
from __future__ import annotations

from checkers.prove.sym import AND, EQ, MIN, NOT, OR, SUM, ite, sel
from spec.state import LEADER


class LogsAndEpochCaches:
    """Epoch caches, truncation, Produce and Flush (a mixin of Encoding)."""

    def cache_assign(self, s, i, epoch, start):
        """LeaderEpochFileCache.assign on broker i's cache, in place on dict s."""
        C = self.C
        clen = s[("b", i, "clen")]
        last_e = sel([s[("b", i, "ce_", k)] for k in range(C)], clen - 1)
        last_s = sel([s[("b", i, "cs", k)] for k in range(C)], clen - 1)
        noop = AND(clen > 0, EQ(last_e, epoch), start >= last_s)
        keep = clen
        for k in range(C - 1, -1, -1):
            drop = AND(EQ(keep - 1, k), OR(s[("b", i, "ce_", k)] >= epoch, s[("b", i, "cs", k)] >= start))
            keep = ite(drop, keep - 1, keep)
        for k in range(C):
            put = AND(NOT(noop), EQ(keep, k))
            s[("b", i, "ce_", k)] = ite(put, epoch, s[("b", i, "ce_", k)])
            s[("b", i, "cs", k)] = ite(put, start, s[("b", i, "cs", k)])
        s[("b", i, "clen")] = ite(noop, clen, keep + 1)
        s[("g", "oob")] = OR(s[("g", "oob")], AND(NOT(noop), keep >= C))

    def cache_truncate(self, s, i, end):
        """rules.cache_truncate on broker i's cache: drop entries starting at or past `end`."""
        s[("b", i, "clen")] = SUM(AND(k < s[("b", i, "clen")], s[("b", i, "cs", k)] < end)
                                  for k in range(self.C))

    def cache_entries_up_to(self, s, j, epoch):
        """Entries of j's (ascending) cache with epoch <= `epoch`."""
        return SUM(AND(k < s[("b", j, "clen")], s[("b", j, "ce_", k)] <= epoch) for k in range(self.C))

    def cache_epoch(self, s, j, idx):
        """The epoch of entry `idx` of j's leader-epoch cache."""
        return sel([s[("b", j, "ce_", k)] for k in range(self.C)], idx)

    def cache_start(self, s, j, idx):
        """The start offset of entry `idx` of j's leader-epoch cache."""
        return sel([s[("b", j, "cs", k)] for k in range(self.C)], idx)

    def end_offset_for(self, s, j, epoch):
        """rules.end_offset_for (KIP-101) over broker j's cache."""
        clen = s[("b", j, "clen")]
        nf = self.cache_entries_up_to(s, j, epoch)
        return ite(AND(clen > 0, EQ(epoch, self.cache_epoch(s, j, clen - 1))), s[("b", j, "leo")],
                   ite(OR(EQ(clen, 0), epoch < self.cache_epoch(s, j, 0)), -1,
                       ite(nf < clen, self.cache_start(s, j, nf), -1)))

    def epoch_end_offset(self, s, j, epoch):
        """rules.epoch_end_offset (KIP-279) over broker j's cache: (epoch, end offset)."""
        clen = s[("b", j, "clen")]
        nf = self.cache_entries_up_to(s, j, epoch)
        latest = AND(clen > 0, EQ(self.cache_epoch(s, j, clen - 1), epoch))
        none_higher = nf >= clen
        e = ite(latest, epoch, ite(none_higher, -1, ite(nf > 0, self.cache_epoch(s, j, nf - 1), epoch)))
        end = ite(latest, s[("b", j, "leo")], ite(none_higher, -1, self.cache_start(s, j, nf)))
        return e, end

    def truncation_offset(self, s, i, j):
        """rules.truncation_offset: where follower i truncates to against leader j, unrolled
        over the cache's entries for KIP-279's rounds."""
        fx = self.fx
        hw, leo, clen = s[("b", i, "hw")], s[("b", i, "leo")], s[("b", i, "clen")]
        fallback = MIN(hw, leo)
        if "epoch-truncation" not in fx:
            return fallback
        if "epoch-end-offset" not in fx:
            end = self.end_offset_for(s, j, self.cache_epoch(s, i, clen - 1))
            return ite(EQ(clen, 0), fallback, ite(EQ(end, -1), fallback, MIN(leo, end)))
        ccl, cleo = clen, leo
        done, res = False, fallback
        for rnd in range(self.C + 1):
            active = AND(NOT(done), rnd < clen + 1)
            empty = EQ(ccl, 0)
            e_req = self.cache_epoch(s, i, ccl - 1)
            e, end = self.epoch_end_offset(s, j, e_req)
            nmine = SUM(AND(k < ccl, s[("b", i, "ce_", k)] <= e) for k in range(self.C))
            idx = nmine - 1
            own_end = ite(idx + 1 < ccl, self.cache_start(s, i, idx + 1), cleo)
            # the outcomes of this round, in spec's order
            r_empty = MIN(hw, cleo)
            r_undef = MIN(hw, cleo)
            r_same = MIN(end, cleo)
            r_none = MIN(MIN(hw, cleo), self.cache_start(s, i, 0))
            r_match = MIN(MIN(end, own_end), cleo)
            stop = OR(empty, EQ(end, -1), EQ(e, e_req), nmine == 0, EQ(self.cache_epoch(s, i, idx), e))
            val = ite(empty, r_empty, ite(EQ(end, -1), r_undef, ite(EQ(e, e_req), r_same,
                      ite(nmine == 0, r_none, r_match))))
            res = ite(AND(active, stop), val, res)
            cont = AND(active, NOT(stop))
            cleo = ite(cont, MIN(cleo, own_end), cleo)
            ccl = ite(cont, idx + 1, ccl)
            done = OR(done, AND(active, stop))
        # loop exhausted (or a cache of length 0 at entry): spec returns min(hw, leo)
        return ite(done, res, fallback)

    def truncate_log(self, s, i, to):
        """Cut broker i's log (and its epoch cache, HW and flushed mark) to `to` records."""
        self.cache_truncate(s, i, to)
        s[("b", i, "leo")] = to
        s[("b", i, "hw")] = MIN(s[("b", i, "hw")], to)
        s[("b", i, "flushed")] = MIN(s[("b", i, "flushed")], to)

    def durable(self, s, i):
        """spec/updates.py durable: without unflushed-loss faults every write counts as flushed."""
        if not self.cfg.unflushed_loss:
            s[("b", i, "flushed")] = s[("b", i, "leo")]

    def produce_allowed(self, s, i):
        """rules.produce_allowed: acks=all appends need min ISR."""
        if self.cfg.acks != "all":
            return True
        return SUM(s[("b", i, "isr", j)] for j in range(self.n)) >= self.cfg.min_isr

    def guard_produce(self, s, a):
        i = a.b
        return AND(self.up(s, i), EQ(s[("b", i, "role")], LEADER),
                   s[("g", "produced")] < self.cfg.records, self.produce_allowed(s, i))

    def apply_produce(self, s, a):
        i, L = a.b, self.L
        r = s[("g", "produced")]
        leo = s[("b", i, "leo")]
        le = s[("b", i, "le")]
        for k in range(L):
            at = EQ(leo, k)
            s[("b", i, "lr", k)] = ite(at, r, s[("b", i, "lr", k)])
            s[("b", i, "lep", k)] = ite(at, le, s[("b", i, "lep", k)])
        s[("g", "oob")] = OR(s[("g", "oob")], leo >= L)
        self.cache_assign(s, i, le, leo)
        s[("b", i, "leo")] = leo + 1
        s[("b", i, "pos", i)] = leo + 1
        if self.cfg.acks == "all":
            for q in range(self.R):
                s[("b", i, "pa", q)] = OR(s[("b", i, "pa", q)], EQ(r, q))
        self.durable(s, i)
        s[("g", "produced")] = r + 1
        self.advance_hw(s, i)

    def guard_flush(self, s, a):
        return AND(self.up(s, a.b), s[("b", a.b, "flushed")] < s[("b", a.b, "leo")])

    def apply_flush(self, s, a):
        s[("b", a.b, "flushed")] = s[("b", a.b, "leo")]
