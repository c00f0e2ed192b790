"""The producers of spec/producer.py in the symbolic encoding, composed with the replication
transitions of checkers/prove/encoding/ (which owns this part: `Encoding(cfg)` builds one when
`cfg.producers` is set).

The same actions with the same guards as spec: InitProducerId, Send (to each broker the
metadata or an acting leader names), HandleProduce and CompleteProduce at the broker the head
request went to, Receive, Disconnect and BumpEpoch. Every decision is a rule of spec/rules.py,
re-encoded here in one function named after it: check_sequence with producer_state (the
leader's per-producer state as a fold over its own log, the last BATCHES_RETAINED batches),
producer_reaction, sequence_resolved, ack_succeeds and produce_allowed (from the replication
encoding).

State per producer: epoch, records handed over, next sequence, last acknowledged sequence, the
KIP-360 mark, the unfinished batches (records slots), the connection's requests and answers
(max-in-flight slots each: every request or answer belongs to a batch in flight) and the
per-record outcome; globally the write metadata (producer, record, epoch, sequence) per write
id, which is the record number logs hold (with Encoding.shadows every log, fetch-response and
exposed-prefix slot also carries its write's metadata, and the rules read it there: `meta`).
A batch is appended at most retries + 1 times, so writes (and logs) need at most producers x
records x (retries + 1) slots. Left out (`supported` refuses): acks other than all, consumers.
"""
from __future__ import annotations

import z3

from checkers.prove.instances import Branching, Inst
from checkers.prove.sym import AND, EQ, MAX, MIN, NE, NOT, OR, SUM, ite, sel
from spec import rules
from spec.state import LEADER, Prod

PROD_INT = ("pe", "nxt", "seqn", "lack", "bump", "nb", "nq", "nr")
BATCH = ("bk", "bs", "bt")
REQ = ("qk", "qs", "qpe", "qb", "qle", "qw", "qo")
RESP = ("rk", "rc", "ro")
WRITE = ("wp", "wk", "wpe", "wseq")
# ProducerStateEntry.NUM_BATCHES_TO_RETAIN, read from spec/rules.py (a name of its own here so a
# test can change the encoding's copy alone and see the differential test fail)
RETAINED = rules.BATCHES_RETAINED
KINDS = ("BumpEpoch", "CompleteProduce", "Disconnect", "HandleProduce", "InitProducerId",
         "Receive", "Send")


def why_unsupported(cfg) -> str | None:
    if cfg.producers and cfg.acks != "all":
        return "producers with acks other than all are not encoded"
    if cfg.consumers:
        return "consumer groups are not encoded"
    return None


def write_slots(cfg) -> int:
    """Write ids a run can use: each batch is appended at most once per send."""
    return cfg.producers * cfg.records * (cfg.retries + 1)


class Producers:
    def __init__(self, enc):
        cfg = enc.cfg
        self.enc, self.cfg = enc, cfg
        self.P, self.RP = cfg.producers, cfg.records
        self.B = max(1, cfg.records)
        self.Q = cfg.max_in_flight
        self.W = enc.R                  # write_slots(cfg) unless the caller chose fewer
        self.idem = cfg.idempotence

    # --- schema and conversion ---------------------------------------------------------------

    def schema(self) -> list:
        out = []
        for p in range(self.P):
            out += [(("p", p, f), "int") for f in PROD_INT]
            for j in range(self.B):
                out += [(("p", p, f, j), "int") for f in BATCH] + [(("p", p, "bf", j), "bool")]
            for j in range(self.Q):
                out += [(("p", p, f, j), "int") for f in REQ + RESP]
            out += [(("p", p, "out", k), "int") for k in range(self.RP)]
        for w in range(self.W):
            out += [(("w", f, w), "int") for f in WRITE]
        return out

    def from_state(self, s, d: dict, unsupported) -> None:
        if len(s.writes) != s.produced or len(s.writes) > self.W:
            raise unsupported("writes past the encoding's bound")
        for p, pr in enumerate(s.prods):
            if len(pr.batches) > self.B or len(pr.reqs) > self.Q or len(pr.resps) > self.Q:
                raise unsupported("more batches or requests than slots")
            for f, v in (("pe", pr.pe), ("nxt", pr.nxt), ("seqn", pr.seqn), ("lack", pr.lack),
                         ("bump", pr.bump), ("nb", len(pr.batches)), ("nq", len(pr.reqs)),
                         ("nr", len(pr.resps))):
                d[("p", p, f)] = v
            for j in range(self.B):
                k, seq, tries, fl = pr.batches[j] if j < len(pr.batches) else (0, 0, 0, False)
                d.update({("p", p, "bk", j): k, ("p", p, "bs", j): seq, ("p", p, "bt", j): tries,
                          ("p", p, "bf", j): fl})
            for j in range(self.Q):
                q = pr.reqs[j] if j < len(pr.reqs) else (0,) * 7
                r = pr.resps[j] if j < len(pr.resps) else (0,) * 3
                d.update({("p", p, f, j): v for f, v in zip(REQ, q)})
                d.update({("p", p, f, j): v for f, v in zip(RESP, r)})
            for k in range(self.RP):
                d[("p", p, "out", k)] = pr.out[k] if k < len(pr.out) else -1
        for w in range(self.W):
            x = s.writes[w] if w < len(s.writes) else (0, 0, 0, 0)
            d.update({("w", f, w): v for f, v in zip(WRITE, x)})

    def to_state(self, d: dict) -> tuple[tuple, tuple]:
        """(writes, prods) of spec's State."""
        writes = tuple(tuple(d[("w", f, w)] for f in WRITE) for w in range(d[("g", "produced")]))
        prods = []
        for p in range(self.P):
            g = lambda f, *j: d[("p", p, f) + j]    # noqa: E731
            prods.append(Prod(
                pe=g("pe"), nxt=g("nxt"), seqn=g("seqn"), lack=g("lack"), bump=g("bump"),
                batches=tuple((g("bk", j), g("bs", j), g("bt", j), bool(g("bf", j)))
                              for j in range(g("nb"))),
                reqs=tuple(tuple(g(f, j) for f in REQ) for j in range(g("nq"))),
                resps=tuple(tuple(g(f, j) for f in RESP) for j in range(g("nr"))),
                out=tuple(g("out", k) for k in range(g("nxt")))))
        return writes, tuple(prods)

    # --- instances ---------------------------------------------------------------------------

    def instances(self) -> list[Inst]:
        out = []
        for p in range(self.P):
            if self.idem:
                out.append(Inst("InitProducerId", p, -1, self.guard_init_producer_id,
                                self.apply_init_producer_id))
            for t in range(self.enc.n):
                out.append(Inst("Send", p, t, self.guard_send, self.apply_send))
            for bi in range(self.enc.n):
                # the broker the head request went to is pinned by the guard (as `via`)
                out.append(Inst("HandleProduce", p, -1, self.guard_handle_produce,
                                self.apply_handle_produce, via=bi))
                out.append(Inst("CompleteProduce", p, -1, self.guard_complete_produce,
                                self.apply_complete_produce, via=bi))
            out.append(Inst("Receive", p, -1, self.guard_receive, self.apply_receive))
            out.append(Inst("Disconnect", p, -1, self.guard_disconnect, self.apply_disconnect))
            out.append(Inst("BumpEpoch", p, -1, self.guard_bump_epoch, self.apply_bump_epoch))
        return out

    # --- helpers -------------------------------------------------------------------------------

    def _ready(self, s, p):
        """With idempotence nothing happens before InitProducerId (spec: `continue`)."""
        return s[("p", p, "pe")] >= 0 if self.idem else True

    def _in_flight(self, s, p):
        return SUM(AND(j < s[("p", p, "nb")], s[("p", p, "bf", j)]) for j in range(self.B))

    def _batch_index(self, s, p, k):
        """The slot of record k's batch (spec: next(... if b[0] == k)); -1 none."""
        idx = -1
        for j in range(self.B - 1, -1, -1):
            idx = ite(AND(j < s[("p", p, "nb")], EQ(s[("p", p, "bk", j)], k)), j, idx)
        return idx

    def _compact(self, s, p, drop) -> None:
        """Remove the batches whose slot flag in `drop` is true, keeping order (in place)."""
        B = self.B
        nb = s[("p", p, "nb")]
        keep = [AND(j < nb, NOT(drop[j])) for j in range(B)]
        old = {f: [s[("p", p, f, j)] for j in range(B)] for f in BATCH + ("bf",)}
        before = 0
        rank = []
        for j in range(B):
            rank.append(before)
            before = before + ite(keep[j], 1, 0)
        for m in range(B):
            for f in BATCH + ("bf",):
                v = s[("p", p, f, m)]
                for j in range(B - 1, m - 1, -1):       # slot m takes the first kept j of rank m
                    v = ite(AND(keep[j], EQ(rank[j], m)), old[f][j], v)
                s[("p", p, f, m)] = v
        s[("p", p, "nb")] = before

    def _pop_request(self, s, p) -> None:
        for j in range(self.Q - 1):
            for f in REQ:
                s[("p", p, f, j)] = s[("p", p, f, j + 1)]
        s[("p", p, "nq")] = s[("p", p, "nq")] - 1

    def _push_answer(self, s, p, k, code, off) -> None:
        nr = s[("p", p, "nr")]
        for j in range(self.Q):
            at = EQ(nr, j)
            for f, v in (("rk", k), ("rc", code), ("ro", off)):
                s[("p", p, f, j)] = ite(at, v, s[("p", p, f, j)])
        s[("g", "oob")] = OR(s[("g", "oob")], nr >= self.Q)
        s[("p", p, "nr")] = nr + 1

    def _set_out(self, s, p, k, v, cond=True) -> None:
        for q in range(self.RP):
            s[("p", p, "out", q)] = ite(AND(cond, EQ(k, q)), v, s[("p", p, "out", q)])

    def _merge(self, s, branches, by=None) -> None:
        """s := the first branch whose condition holds, else s (branches: [(cond, dict)]).
        While the encoding records cases (`Encoding.succ_cases`), each symbolic condition is
        named by a fresh Boolean constant and recorded with its definition, so a query can fix
        the outcome and let z3 fold the merged terms away; `by`: {branch index: conditions}
        that split that branch further (an append by the log slot it writes, an error by the
        answer slot), asked only in the outcomes that take that branch."""
        rec = self.enc.cases
        if rec is not None:
            named, group, taken = [], Branching(), []
            for cond, t in branches:
                before = tuple(z3.Not(c) for c, _ in group)
                if z3.is_expr(cond) and not z3.is_true(cond) and not z3.is_false(cond):
                    c = z3.Bool(f"case!{len(rec)}!{len(group)}")
                    group.append((c, cond))
                    cond = c
                    taken.append(before + (c,))
                else:
                    taken.append(before if cond is True or z3.is_true(cond) else None)
                named.append((cond, t))
            rec.append(group)
            branches = named
            for j, conds in sorted((by or {}).items()):
                if taken[j] is None or any(n[0] is True for n in named[:j]):
                    continue            # a branch never taken, or one after an unconditional one
                sub = Branching((z3.Bool(f"case!{len(rec)}!{i}"), d) for i, d in enumerate(conds))
                sub.when = taken[j]
                rec.append(sub)
        keys = set()
        for _, t in branches:
            keys |= {k for k in t if t[k] is not s.get(k)}
        for key in keys:
            v = s[key]
            for cond, t in reversed(branches):
                v = ite(cond, t[key], v)
            if v is not s[key]:
                s[key] = v

    # --- rules (spec/rules.py, re-encoded) ---------------------------------------------------

    def meta(self, s, key, f):
        """Field f of the write a slot holds (`key`: a log, fetch-response or exposed-prefix
        slot): its shadow where the encoding keeps them (Encoding.shadows), else looked up in
        the write table."""
        if self.enc.shadows:
            return s[key + (f,)]
        return sel([s[("w", f, w)] for w in range(self.W)], s[key])

    def producer_state(self, s, bi, p):
        """rules.producer_state over broker bi's log: (epoch, last sequence, per log slot
        whether the entry is among the retained batches of that epoch, per slot its sequence)."""
        L = self.enc.L
        leo = s[("b", bi, "leo")]
        produced = s[("g", "produced")]
        isp, pe, sq = [], [], []
        for k in range(L):
            r = s[("b", bi, "lr", k)]
            wp, seq, epoch = (self.meta(s, ("b", bi, "lr", k), f) for f in ("wp", "wseq", "wpe"))
            isp.append(AND(k < leo, r < produced, EQ(wp, p), seq >= 0))
            pe.append(epoch)
            sq.append(seq)
        epoch, last = -1, -1
        for k in range(L):
            epoch = ite(isp[k], pe[k], epoch)
            last = ite(isp[k], sq[k], last)
        # an entry is retained when no later entry of the producer has another epoch (a new
        # epoch resets the entry) and fewer than BATCHES_RETAINED later ones follow it
        retained = [False] * L
        other_after, later = False, 0
        for k in range(L - 1, -1, -1):
            retained[k] = AND(isp[k], EQ(pe[k], epoch), NOT(other_after),
                              later < RETAINED)
            other_after = OR(other_after, AND(isp[k], NE(pe[k], epoch)))
            later = later + ite(isp[k], 1, 0)
        return epoch, last, retained, sq

    def check_sequence(self, s, bi, p, pe, seq):
        """rules.check_sequence: (duplicate, its offset, out of order); append otherwise."""
        if not self.idem:
            return False, 0, False
        epoch, last, retained, sq = self.producer_state(s, bi, p)
        found, off = False, 0
        for k in range(self.enc.L - 1, -1, -1):         # the oldest retained match wins
            hit = AND(retained[k], EQ(sq[k], seq))
            found = OR(hit, found)
            off = ite(hit, k, off)
        same = EQ(pe, epoch)
        dup = AND(seq >= 0, same, found)
        app = OR(seq < 0, AND(same, NOT(found), EQ(seq, last + 1)), AND(NOT(same), EQ(seq, 0)))
        return dup, off, AND(NOT(dup), NOT(app))

    def fail_batch(self, s, p, idx, code) -> None:
        """spec.producer._fail_batch with rules.producer_reaction, in place; idx a slot."""
        B = self.B
        seq = sel([s[("p", p, "bs", j)] for j in range(B)], idx)
        tries = sel([s[("p", p, "bt", j)] for j in range(B)], idx)
        k = sel([s[("p", p, "bk", j)] for j in range(B)], idx)
        fail = tries >= self.cfg.retries
        bump_now = AND(NOT(fail), EQ(code, rules.OUT_OF_ORDER_SEQUENCE), self.idem,
                       EQ(seq, s[("p", p, "lack")] + 1))
        t = dict(s)
        self._compact(t, p, [EQ(idx, j) for j in range(B)])
        self._set_out(t, p, k, -2)
        if self.idem:
            b = s[("p", p, "bump")]
            t[("p", p, "bump")] = ite(NE(b, -2), ite(EQ(b, -1), seq, MIN(b, seq)), b)
        r = dict(s)
        for j in range(B):
            at = EQ(idx, j)
            r[("p", p, "bt", j)] = ite(at, tries + 1, s[("p", p, "bt", j)])
            r[("p", p, "bf", j)] = ite(at, False, s[("p", p, "bf", j)])
        r[("p", p, "bump")] = ite(bump_now, -2, s[("p", p, "bump")])
        self._merge(s, [(fail, t), (True, r)])

    # --- actions -------------------------------------------------------------------------------

    def guard_init_producer_id(self, s, a):
        return s[("p", a.b, "pe")] < 0

    def apply_init_producer_id(self, s, a):
        s[("p", a.b, "pe")] = 0

    def guard_send(self, s, a):
        p, t = a.b, a.arg
        nb = s[("p", p, "nb")]
        queued = OR(*[AND(j < nb, NOT(s[("p", p, "bf", j)])) for j in range(self.B)])
        target = OR(EQ(s[("z", "leader")], t),
                    AND(s[("b", t, "alive")], EQ(s[("b", t, "role")], LEADER)))
        return AND(self._ready(s, p), NE(s[("p", p, "bump")], -2),
                   self._in_flight(s, p) < self.cfg.max_in_flight,
                   OR(queued, s[("p", p, "nxt")] < self.RP), target)

    def apply_send(self, s, a):
        p, t, B = a.b, a.arg, self.B
        nb, nxt, seqn = s[("p", p, "nb")], s[("p", p, "nxt")], s[("p", p, "seqn")]
        idx = -1
        for j in range(B - 1, -1, -1):                  # a retried batch goes first (reenqueue)
            idx = ite(AND(j < nb, NOT(s[("p", p, "bf", j)])), j, idx)
        retry = idx >= 0
        k = ite(retry, sel([s[("p", p, "bk", j)] for j in range(B)], idx), nxt)
        seq = ite(retry, sel([s[("p", p, "bs", j)] for j in range(B)], idx),
                  seqn if self.idem else -1)
        for j in range(B):
            old = s[("p", p, "bf", j)]
            new_slot = AND(NOT(retry), EQ(nb, j))
            s[("p", p, "bf", j)] = OR(old, AND(retry, EQ(idx, j)), new_slot)
            s[("p", p, "bk", j)] = ite(new_slot, nxt, s[("p", p, "bk", j)])
            s[("p", p, "bs", j)] = ite(new_slot, seq, s[("p", p, "bs", j)])
            s[("p", p, "bt", j)] = ite(new_slot, 0, s[("p", p, "bt", j)])
        s[("g", "oob")] = OR(s[("g", "oob")], AND(NOT(retry), OR(nb >= B, nxt >= self.RP)))
        self._set_out(s, p, nxt, -1, NOT(retry))
        s[("p", p, "nb")] = ite(retry, nb, nb + 1)
        s[("p", p, "nxt")] = ite(retry, nxt, nxt + 1)
        if self.idem:
            s[("p", p, "seqn")] = ite(retry, seqn, seqn + 1)
        nq = s[("p", p, "nq")]
        for j in range(self.Q):
            at = EQ(nq, j)
            for f, v in zip(REQ, (k, seq, s[("p", p, "pe")], t, -1, -1, -1)):
                s[("p", p, f, j)] = ite(at, v, s[("p", p, f, j)])
        s[("g", "oob")] = OR(s[("g", "oob")], nq >= self.Q)
        s[("p", p, "nq")] = nq + 1

    def guard_handle_produce(self, s, a):
        p, bi = a.b, a.via
        return AND(self._ready(s, p), s[("p", p, "nq")] > 0, s[("p", p, "qw", 0)] < 0,
                   EQ(s[("p", p, "qb", 0)], bi), self.enc.up(s, bi))

    def apply_handle_produce(self, s, a):
        """spec.producer.handle_produce at broker bi for the head request."""
        p, bi, e, L = a.b, a.via, self.enc, self.enc.L
        k, seq, pe = (s[("p", p, f, 0)] for f in ("qk", "qs", "qpe"))
        not_leader = NE(s[("b", bi, "role")], LEADER)
        refused = NOT(e.produce_allowed(s, bi))
        dup, dup_off, oos = self.check_sequence(s, bi, p, pe, seq)
        error = OR(not_leader, refused, oos)
        code = ite(not_leader, rules.NOT_LEADER,
                   ite(refused, rules.NOT_ENOUGH_REPLICAS, rules.OUT_OF_ORDER_SEQUENCE))
        leo, le = s[("b", bi, "leo")], s[("b", bi, "le")]
        # an error: the request leaves the connection's head, its answer goes back
        t_err = dict(s)
        self._pop_request(t_err, p)
        self._push_answer(t_err, p, k, code, -1)
        # a duplicate (acks=all): it awaits the high watermark past the original
        t_dup = dict(s)
        t_dup[("p", p, "qle", 0)] = le
        t_dup[("p", p, "qw", 0)] = sel([s[("b", bi, "lr", q)] for q in range(L)], dup_off)
        t_dup[("p", p, "qo", 0)] = dup_off
        # an append, as the implicit client's Produce
        t = dict(s)
        r = s[("g", "produced")]
        for q in range(L):
            at = EQ(leo, q)
            x = ("b", bi, "lr", q)
            e.copy_slot(t, x, ite(at, r, s[x]),
                        [ite(at, v, s[y]) for v, y in zip((p, k, pe, seq), e.shadow(x))])
            t[("b", bi, "lep", q)] = ite(at, le, s[("b", bi, "lep", q)])
        t[("g", "oob")] = OR(t[("g", "oob")], leo >= L, r >= self.W)
        e.cache_assign(t, bi, le, leo)
        t[("b", bi, "leo")] = leo + 1
        t[("b", bi, "pos", bi)] = leo + 1
        e.durable(t, bi)
        t[("g", "produced")] = r + 1
        for w in range(self.W):
            at = EQ(r, w)
            for f, v in zip(WRITE, (p, k, pe, seq)):
                t[("w", f, w)] = ite(at, v, s[("w", f, w)])
        t[("p", p, "qle", 0)] = le
        t[("p", p, "qw", 0)] = r
        t[("p", p, "qo", 0)] = leo
        e.advance_hw(t, bi, split=False)
        nr = s[("p", p, "nr")]
        self._merge(s, [(error, t_err), (dup, t_dup), (True, t)],
                    by={0: [EQ(nr, j) for j in range(self.Q)], 2: [EQ(leo, q) for q in range(L)]})

    def _answer(self, s, p, bi):
        """spec.producer._answer: (defined, code)."""
        lead = AND(s[("b", bi, "alive")], EQ(s[("b", bi, "role")], LEADER),
                   EQ(s[("b", bi, "le")], s[("p", p, "qle", 0)]))
        passed = s[("b", bi, "hw")] > s[("p", p, "qo", 0)]
        ok = SUM(self.enc.maximal_isr(s, bi)) >= self.cfg.min_isr     # rules.ack_succeeds
        code = ite(NOT(lead), rules.NOT_LEADER, ite(ok, rules.OK, rules.NOT_ENOUGH_REPLICAS))
        return OR(NOT(lead), passed), code

    def guard_complete_produce(self, s, a):
        p, bi = a.b, a.via
        defined, _ = self._answer(s, p, bi)
        return AND(self._ready(s, p), s[("p", p, "nq")] > 0, s[("p", p, "qw", 0)] >= 0,
                   EQ(s[("p", p, "qb", 0)], bi), defined)

    def apply_complete_produce(self, s, a):
        p, bi = a.b, a.via
        _, code = self._answer(s, p, bi)
        ok = EQ(code, rules.OK)
        k, wid, off = (s[("p", p, f, 0)] for f in ("qk", "qw", "qo"))
        t_ok = dict(s)
        for r in range(self.enc.R):
            t_ok[("g", "acked", r)] = OR(s[("g", "acked", r)], EQ(wid, r))
        self._pop_request(t_ok, p)
        self._push_answer(t_ok, p, k, rules.OK, off)
        t_err = dict(s)
        self._pop_request(t_err, p)
        self._push_answer(t_err, p, k, code, -1)
        # each outcome split by the answer slot it writes, as HandleProduce's error is (the
        # answer at a symbolic slot cost 60 s of ReplicatedWire at 4 in flight)
        slots = [EQ(s[("p", p, "nr")], j) for j in range(self.Q)]
        self._merge(s, [(ok, t_ok), (True, t_err)], by={0: slots, 1: slots})

    def guard_receive(self, s, a):
        return AND(self._ready(s, a.b), s[("p", a.b, "nr")] > 0)

    def apply_receive(self, s, a):
        p, B = a.b, self.B
        k, code, off = (s[("p", p, f, 0)] for f in RESP)
        for j in range(self.Q - 1):
            for f in RESP:
                s[("p", p, f, j)] = s[("p", p, f, j + 1)]
        s[("p", p, "nr")] = s[("p", p, "nr")] - 1
        idx = self._batch_index(s, p, k)
        ok = EQ(code, rules.OK)
        t_ok = dict(s)
        seq = sel([s[("p", p, "bs", j)] for j in range(B)], idx)
        self._compact(t_ok, p, [EQ(idx, j) for j in range(B)])
        self._set_out(t_ok, p, k, off)
        t_ok[("p", p, "lack")] = MAX(s[("p", p, "lack")], seq)
        t_fail = dict(s)
        self.fail_batch(t_fail, p, idx, code)
        self._merge(s, [(ok, t_ok), (True, t_fail)])

    def guard_disconnect(self, s, a):
        p = a.b
        return AND(self._ready(s, p), OR(s[("p", p, "nq")] > 0, s[("p", p, "nr")] > 0),
                   s[("g", "losses")] < self.cfg.losses)

    def apply_disconnect(self, s, a):
        """Every batch in flight fails with a network error (none of them can ask for an epoch
        bump, so their order does not matter: the unresolved sequence is their minimum)."""
        p, B = a.b, self.B
        s[("p", p, "nq")] = 0
        s[("p", p, "nr")] = 0
        nb = s[("p", p, "nb")]
        fails = []
        for j in range(B):
            fl = AND(j < nb, s[("p", p, "bf", j)])
            tries = s[("p", p, "bt", j)]
            fail = AND(fl, tries >= self.cfg.retries)
            fails.append(fail)
            self._set_out(s, p, s[("p", p, "bk", j)], -2, fail)
            if self.idem:
                b, seq = s[("p", p, "bump")], s[("p", p, "bs", j)]
                s[("p", p, "bump")] = ite(AND(fail, NE(b, -2)), ite(EQ(b, -1), seq, MIN(b, seq)), b)
            s[("p", p, "bt", j)] = ite(AND(fl, NOT(fail)), tries + 1, tries)
            s[("p", p, "bf", j)] = AND(s[("p", p, "bf", j)], NOT(fl))
        self._compact(s, p, fails)
        s[("g", "losses")] = s[("g", "losses")] + 1

    def guard_bump_epoch(self, s, a):
        p = a.b
        nb, b = s[("p", p, "nb")], s[("p", p, "bump")]
        sent = OR(*[AND(j < nb, OR(s[("p", p, "bt", j)] != 0, s[("p", p, "bf", j)]))
                    for j in range(self.B)])
        return AND(self._ready(s, p), OR(AND(EQ(b, -2), EQ(self._in_flight(s, p), 0)),
                                         AND(b >= 0, NOT(sent))))

    def apply_bump_epoch(self, s, a):
        p = a.b
        b, lack = s[("p", p, "bump")], s[("p", p, "lack")]
        resolved = AND(b >= 0, lack >= b)                 # rules.sequence_resolved
        nb = s[("p", p, "nb")]
        for j in range(self.B):
            s[("p", p, "bs", j)] = ite(AND(NOT(resolved), j < nb), j, s[("p", p, "bs", j)])
        s[("p", p, "pe")] = ite(resolved, s[("p", p, "pe")], s[("p", p, "pe")] + 1)
        s[("p", p, "seqn")] = ite(resolved, s[("p", p, "seqn")], nb)
        s[("p", p, "lack")] = ite(resolved, lack, -1)
        s[("p", p, "bump")] = -1

    # --- the client invariants (spec/invariants.py), over an encoded state -------------------

    def send_order(self, s):
        """ProducerSendOrder: acknowledged offsets never go back in send order."""
        out = []
        for p in range(self.P):
            o = [s[("p", p, "out", k)] for k in range(self.RP)]
            nxt = s[("p", p, "nxt")]
            for k1 in range(self.RP):
                for k2 in range(k1 + 1, self.RP):
                    out.append(OR(NOT(AND(k2 < nxt, o[k1] >= 0, o[k2] >= 0)), o[k1] <= o[k2]))
        return AND(*out)

    def exactly_once(self, s):
        """ProducerExactlyOnce: no producer's record twice in the readable prefix."""
        e, W = self.enc, self.W
        elen, produced = s[("g", "elen")], s[("g", "produced")]
        wp = [s[("w", "wp", w)] for w in range(W)]
        wk = [s[("w", "wk", w)] for w in range(W)]
        ids = []
        for k in range(e.L):
            r = s[("g", "exp", k)]
            ids.append((AND(k < elen, r < produced, sel(wp, r, -1) >= 0), sel(wp, r), sel(wk, r)))
        out = []
        for k1 in range(e.L):
            for k2 in range(k1 + 1, e.L):
                (v1, p1, r1), (v2, p2, r2) = ids[k1], ids[k2]
                out.append(NOT(AND(v1, v2, EQ(p1, p2), EQ(r1, r2))))
        return AND(*out)
