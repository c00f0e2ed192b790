"""The strengthening lemmas for the producer invariants (ProducerSendOrder, ProducerExactlyOnce)
of an idempotent producer across epoch bumps and leader fail-overs on one broker: the broker
may crash and be elected again in a new leader epoch while batches are in flight (its producer
state is then the fold of its own log), and the connection may drop more often than the retry
budget covers (a batch fails, its sequence is unresolved, the producer bumps its epoch and
numbers the rest from 0). One producer, acks=all, min.insync.replicas 1, records <= 5, no
unflushed loss (the log survives a crash). Outside those bounds each lemma is `True` and
`applies` says why.

The argument, in the producer's terms. Every write is a record of the producer in some epoch
with some sequence, and the broker's log is the writes in order; along the log records strictly
increase, epochs never go back and, within an epoch, sequences run 0, 1, 2, ... Within one
epoch the producer numbers records in order, so among the writes, the unfinished batches and
the requests of one epoch, sequence order is record order. A write of an older epoch is of an
older record than every unfinished batch: an epoch bump happens with no batch left unfinished
(a batch exists only once sent, and a bump for an unresolved sequence waits until nothing sent
is unfinished), and the broker never answers OUT_OF_ORDER_SEQUENCE_NUMBER to the batch after
the last acknowledged one (every sequence up to the log's last of the current epoch is in the
log, at most 5 batches, all retained: a retry of one is a duplicate), so the other bump never
happens. Hence the head request is either in the log with its own epoch and sequence (a
duplicate, answered with the original's offset) or newer than every record there (appended at
the end): records stay increasing, so none is in the log twice, and the acknowledged offsets of
two records are in record order.

SoloReplication  the replication state is one of the shapes spec reaches with one record in
                 flight (`shapes`: roles, epochs, sessions, the controller, LeaderAndIsr
                 requests, crash and election counters; writes move none of these); the HW is at
                 most the LEO, a leader's own position is its LEO, log entries' epochs ascend up
                 to the store's, and the epoch cache ascends in epoch and start offset.
SoloLog          the broker's log is the writes 0 .. produced-1 in order (LEO = flushed =
                 produced); the exposed prefix is a prefix of it.
WriteOrder       write w < produced is producer 0's record wk >= w with sequence >= 0 in an
                 epoch <= the producer's; along the writes records strictly increase (each
                 above the one before: the orders between any two follow), epochs
                 never go back, and an epoch's sequences run 0, 1, 2, ... (contiguous).
EpochSeqBase     among the writes, the unfinished batches and the requests on the connection,
                 each of the producer's epoch has sequence = record - (next record - next
                 sequence), between 0 and the next sequence: within an epoch the producer
                 numbers records consecutively (a bump happens with no batch left, the only
                 kind of bump these bounds allow), so sequence order is record order and equal
                 sequences are equal records; one linear constraint per object where a pairwise
                 statement needs one per pair (300 at 5 in flight on two brokers).
OlderEpochs      a write of an epoch older than the producer's is of a record below the first
                 unfinished batch's (so below every one's: they increase, ProducerBatches).
ProducerBatches  the producer has its epoch before anything is sent; no epoch bump is required
                 (bump != -2), an unresolved sequence is >= 0; batches are records below nxt in
                 increasing order, each open, sent at least once (tried or in flight), tried at
                 most `retries` times; the batches in flight are as many as the requests and
                 answers on the connection.
LastAcked        the last acknowledged sequence (if any) is at most the log's last sequence of
                 the producer's epoch.
ProducerWire     every request and answer on the connection is of a distinct in-flight batch,
                 requests carry the producer's epoch, go to broker 0 and only the head may have
                 been handled: then it awaits the HW past its own write (offset = write id).
                 Answers: OK at the offset of the record's write (of the producer's epoch), or
                 an error with offset -1; an OUT_OF_ORDER_SEQUENCE_NUMBER answer's sequence is
                 more than one past the last acknowledged one and past every OK answer before it.
EpochOutcomes    an acknowledged record's offset is its write's; records not yet handed over
                 are open.

On several brokers (`applies_replicated`: no unflushed loss, no pauses) the same argument runs
over every broker's extended log (its log and the fetch response on its way to it), beside the
replication lemmas of StrongIsr (checkers/prove/strengthen.py); what a proof there assumes:
ControlShapes    the control plane (liveness, roles, leader and controller epochs, the
                 controller's cache, ISR views and proposals, sessions, the store's partition
                 state but versions, who led each epoch, crash and election counters, and the
                 set of LeaderAndIsr requests to each broker) is one of those spec reaches with
                 one record in flight, or a renaming of one (`control_shapes`: closed under
                 renaming brokers, so the proof may ask one instance per orbit, symmetry.py).
LogsOrder        every extended log and the exposed prefix hold writes below `produced` in
                 strictly increasing record order (each entry above the one before); along a
                 log epochs never go back and an epoch's sequences run 0, 1, 2, ...
WriteTable       write w < produced is producer 0's record below nxt, in an epoch <= the
                 producer's, epochs never going back along the writes (a retry may be written
                 again on a new leader: records may repeat in the table, never in a log).
EpochSeqBaseN    EpochSeqBase (the same formula).
LogsOlderEpochs  an entry of an older producer epoch in any extended log is of a record below
                 the first unfinished batch's (so below every one's).
ProducerBatchesN ProducerBatches (the same formula).
ExposedAcked     the last acknowledged sequence is at most the exposed prefix's last of the
                 producer's epoch; an acknowledged record's offset is its write's in the exposed
                 prefix; every running leader holds the exposed prefix.
ReplicatedWire   ProducerWire with OK offsets into the exposed prefix, requests to any broker;
                 a handled head was handled by the leader of its epoch, and while that broker
                 still leads that epoch its log holds the write at the answer's offset.
WriteCount       a record is written at most once per leader epoch: its writes number at most
                 the epochs led so far, and at most the epochs led before a running leader's
                 plus one if that leader's log holds it from its own epoch (so `write_slots`:
                 records x the most epochs one control shape has led write slots suffice, 2
                 per record across a crash and an election; and, logs holding each
                 record at most once, `log_slots`: one log slot per record).
RecordShadows    every slot in use of a log, a fetch response and the exposed prefix holds a
                 write below `produced`, and carries that write's metadata (producer, record,
                 epoch, sequence) in shadow fields of its own (Encoding.shadows, set by a proof
                 whose lemmas include this one). The producers' rules and the lemmas above read
                 a slot's record, epoch and sequence from its shadows, not by looking its write
                 id up in the write table: the lookup was a chain over every write slot, and
                 each log lemma grew with it (docs/benchmarks/proofs.md).

Each holds on the states the explicit model reaches at these bounds (tests/test_prove_lemmas.py).
"""
from __future__ import annotations

from checkers.prove.sym import AND, EQ, IMPLIES, NOT, OR, SUM, ite, sel
from checkers.prove.symmetry import rename, transpositions
from spec import rules
from spec.state import LEADER

CODES = (rules.OK, rules.NOT_LEADER, rules.NOT_ENOUGH_REPLICAS, rules.OUT_OF_ORDER_SEQUENCE)


def applies(cfg) -> str | None:
    """None when the lemmas below describe cfg's reachable states; else why not."""
    if cfg.brokers != 1 or cfg.pauses:
        return ("the producer epoch strengthening is written for one broker (crashes and "
                "elections allowed, no pauses)")
    return _why_not_producer(cfg)


def _why_not_producer(cfg) -> str | None:
    """What both lemma sets (one broker, several) need of the producer and the log."""
    if cfg.producers != 1 or cfg.consumers:
        return "the producer epoch strengthening is written for one producer and no consumers"
    if not cfg.idempotence or cfg.acks != "all" or cfg.min_isr > 1:
        return ("the producer epoch strengthening is written for an idempotent producer with "
                "acks=all and min ISR 1")
    if cfg.unflushed_loss:
        return ("the producer epoch strengthening needs the log to survive a crash (no "
                "unflushed loss)")
    if cfg.records > rules.BATCHES_RETAINED:
        return (f"the producer epoch strengthening needs at most {rules.BATCHES_RETAINED} "
                f"records (the broker's retained batches)")
    return None


_SHAPES: dict = {}
# fields that move with the producer's writes (the log, its epochs and cache, the HW, the
# leader's own position, the exposed prefix) or are the producer's: not part of a shape
_MOVING_B = ("leo", "flushed", "hw", "clen", "lr", "lep", "ce_", "cs", "pos")
_MOVING_G = ("produced", "elen", "exp", "acked", "losses")


def _moving(key) -> bool:
    return (key[0] in ("p", "w") or key[0] == "b" and key[2] in _MOVING_B
            or key[0] == "g" and key[1] in _MOVING_G)


def _meaning(key):
    """The Boolean field that says whether `key` means something in an encoded state, or None
    when it always does: a controller cache's fields only while it has one, a fetch response's
    while there is one, a request slot's while in use (the encoding leaves the rest as they
    were)."""
    if key[0] == "b" and key[2].startswith("cc"):
        return ("b", key[1], "hascc")
    if key[0] == "b" and (key[2].startswith("f_") or key[2] == "fr"):
        return ("b", key[1], "hasf")
    if key[0] == "b" and key[2] in ("pend", "pgen"):
        return ("b", key[1], "haspend")
    if key[0] == "m" and key[3] != "v":
        return key[:3] + ("v",)
    return None


def _shape(d, plan) -> tuple:
    """Encoded state d's shape over `plan` [(field, _meaning(field))]: (field, feature) for
    each field that means something in d, as a hashable tuple."""
    return tuple((k, _feature(d, k)) for k, m in plan if m is None or d[m])


def _feature(s, key):
    """The value a shape compares: a field, but of an AlterIsr answer only its kind (none,
    rejected, committed at some version: versions are left to the replication lemmas)."""
    v = s[key]
    if key[0] == "b" and key[2] == "resp":
        return ite(v >= 0, 0, v)
    return v


def shapes(e) -> list[dict]:
    """The replication shapes: the values of the fields that do not move with writes (roles,
    epochs, sessions, the controller and its cache, LeaderAndIsr requests, the crash and
    election counters), over every state spec reaches with one record in flight. Writes move
    none of them, so they are the shapes at any number of records (SoloReplication asserts it
    and the induction proves it)."""
    key = (e.cfg, e.L)
    if key not in _SHAPES:
        _SHAPES[key] = _shapes_of(e, lambda k: not _moving(k))
    return _SHAPES[key]


def _shapes_of(e, keep) -> list[dict]:
    """The distinct values of the fields `keep` selects (each where it means something) over
    every state spec reaches with e's config cut to one record in flight."""
    from dataclasses import replace

    from checkers.prove.differential import bfs_states
    from checkers.prove.encoding import Encoding
    from spec import Model
    keys = [k for k in e.from_state(Model(e.cfg).initial()) if keep(k)]
    small = replace(e.cfg, records=1, max_in_flight=1)
    enc = Encoding(small)
    known = enc.from_state(Model(small).initial())
    plan = [(k, _meaning(k)) for k in keys if k in known]
    seen: dict = {}
    for st in bfs_states(Model(small), 100_000):
        seen.setdefault(_shape(enc.from_state(st), plan))
    return [dict(sh) for sh in seen]


def _p(s, f, *j):
    return s[("p", 0, f) + j]


def _w(s, f, w):
    return s[("w", f, w)]


def _solo_log(e, s):
    n = s[("g", "produced")]
    leo, elen = s[("b", 0, "leo")], s[("g", "elen")]
    out = [EQ(leo, n), EQ(s[("b", 0, "flushed")], n), n >= 0, elen >= 0, elen <= n]
    for k in range(e.L):
        out.append(IMPLIES(k < n, EQ(s[("b", 0, "lr", k)], k)))
        out.append(IMPLIES(k < elen, EQ(s[("g", "exp", k)], k)))
    return AND(*out)


def _solo_replication(e, s):
    shape = OR(*[AND(*[EQ(s[k], v) for k, v in sh.items()]) for sh in shapes(e)])
    b = lambda f, *k: s[("b", 0, f) + k]   # noqa: E731
    leo, zle = b("leo"), s[("z", "le")]
    out = [shape, b("hw") >= 0, b("hw") <= leo, b("pos", 0) <= leo,
           IMPLIES(EQ(b("role"), LEADER), EQ(b("pos", 0), leo)),
           b("clen") >= 0, b("clen") <= e.C]
    for k in range(e.L):
        out.append(IMPLIES(k < leo, AND(b("lep", k) >= 0, b("lep", k) <= zle)))
        if k:
            out.append(IMPLIES(k < leo, b("lep", k - 1) <= b("lep", k)))
    for k in range(e.C):
        here = k < b("clen")
        out.append(IMPLIES(here, AND(b("ce_", k) >= 0, b("ce_", k) <= zle, b("cs", k) >= 0,
                                     b("cs", k) <= leo)))
        if k:
            out.append(IMPLIES(here, AND(b("ce_", k - 1) < b("ce_", k), b("cs", k - 1) < b("cs", k))))
    return AND(*out)


def _write_order(e, s):
    n, W = s[("g", "produced")], e.prods.W
    pe, nxt = _p(s, "pe"), _p(s, "nxt")
    out = [n <= nxt, n <= W]
    for w in range(W):
        out.append(IMPLIES(w < n, AND(EQ(_w(s, "wp", w), 0), _w(s, "wk", w) >= w,
                                      _w(s, "wk", w) < nxt, _w(s, "wpe", w) >= 0,
                                      _w(s, "wpe", w) <= pe, _w(s, "wseq", w) >= 0)))
        first = EQ(_w(s, "wseq", w), 0)
        if w == 0:
            out.append(IMPLIES(w < n, first))
            continue
        same = EQ(_w(s, "wpe", w), _w(s, "wpe", w - 1))
        out.append(IMPLIES(w < n, AND(_w(s, "wpe", w - 1) <= _w(s, "wpe", w),
                                      OR(AND(same, EQ(_w(s, "wseq", w), _w(s, "wseq", w - 1) + 1)),
                                         AND(NOT(same), first)))))
        # strictly increasing: each write's record above the one before (the writes below
        # `produced` are a prefix, so order follows by transitivity, linear in the writes)
        out.append(IMPLIES(w < n, _w(s, "wk", w - 1) < _w(s, "wk", w)))
    return AND(*out)


def _objects(e, s):
    """(present, epoch, sequence, record) of every write, batch and request."""
    pr = e.prods
    n, pe = s[("g", "produced")], _p(s, "pe")
    out = [(w < n, _w(s, "wpe", w), _w(s, "wseq", w), _w(s, "wk", w)) for w in range(pr.W)]
    out += [(j < _p(s, "nb"), pe, _p(s, "bs", j), _p(s, "bk", j)) for j in range(pr.B)]
    out += [(j < _p(s, "nq"), _p(s, "qpe", j), _p(s, "qs", j), _p(s, "qk", j)) for j in range(pr.Q)]
    return out


def _epoch_base(e, s):
    """Among the writes, the unfinished batches and the requests, those of the producer's epoch
    have sequence = record - (next record - next sequence): linear, one constraint each."""
    pe, seqn, nxt = _p(s, "pe"), _p(s, "seqn"), _p(s, "nxt")
    return AND(*[IMPLIES(AND(v, EQ(ep, pe)), AND(EQ(r - sq, nxt - seqn), sq >= 0, sq < seqn))
                 for v, ep, sq, r in _objects(e, s)])


def _older_epochs(e, s):
    pr = e.prods
    n, pe, nb = s[("g", "produced")], _p(s, "pe"), _p(s, "nb")
    out = []
    for w in range(pr.W):
        # below the first unfinished batch's record, hence below all (they increase:
        # ProducerBatches)
        old = AND(w < n, _w(s, "wpe", w) < pe)
        out.append(IMPLIES(AND(old, nb > 0), _w(s, "wk", w) < _p(s, "bk", 0)))
    return AND(*out)


def _in_flight(e, s):
    return SUM(AND(j < _p(s, "nb"), _p(s, "bf", j)) for j in range(e.prods.B))


def _producer_batches(e, s):
    pr, c = e.prods, e.cfg
    pe, nxt, nb, nq, nr = (_p(s, f) for f in ("pe", "nxt", "nb", "nq", "nr"))
    out = [pe >= -1, IMPLIES(EQ(pe, -1), AND(EQ(nxt, 0), EQ(s[("g", "produced")], 0))),
           _p(s, "bump") >= -1, _p(s, "seqn") >= 0,
           nb >= 0, nb <= nxt, nxt <= pr.RP, nq >= 0, nr >= 0, nq <= pr.Q, nr <= pr.Q,
           EQ(_in_flight(e, s), nq + nr), s[("g", "losses")] >= 0]
    for j in range(pr.B):
        bk, bt = _p(s, "bk", j), _p(s, "bt", j)
        here = j < nb
        out.append(IMPLIES(here, AND(bk >= 0, bk < nxt, bt >= 0, bt <= c.retries,
                                     OR(bt > 0, _p(s, "bf", j)),
                                     *[IMPLIES(EQ(bk, q), EQ(_p(s, "out", q), -1))
                                       for q in range(pr.RP)])))
        if j:
            out.append(IMPLIES(here, _p(s, "bk", j - 1) < bk))
    return AND(*out)


def _last_acked(e, s):
    n, pe, lack = s[("g", "produced")], _p(s, "pe"), _p(s, "lack")
    have = OR(*[AND(w < n, EQ(_w(s, "wpe", w), pe), _w(s, "wseq", w) >= lack)
                for w in range(e.prods.W)])
    return AND(lack >= -1, IMPLIES(lack >= 0, have))


def _batch_of(e, s, k):
    """(is an in-flight batch's record, its sequence) for record k."""
    pr = e.prods
    hit = [AND(j < _p(s, "nb"), _p(s, "bf", j), EQ(_p(s, "bk", j), k)) for j in range(pr.B)]
    seq = 0
    for j in range(pr.B - 1, -1, -1):
        seq = ite(hit[j], _p(s, "bs", j), seq)
    return OR(*hit), seq


def _producer_wire(e, s):
    pr = e.prods
    n, pe, nq, nr, lack = (s[("g", "produced")], _p(s, "pe"), _p(s, "nq"), _p(s, "nr"),
                           _p(s, "lack"))
    wk = [_w(s, "wk", w) for w in range(pr.W)]
    wpe = [_w(s, "wpe", w) for w in range(pr.W)]
    wsq = [_w(s, "wseq", w) for w in range(pr.W)]
    out = []
    recs = []
    ok_seqs = []          # (present and OK, its sequence) of the answers so far
    for j in range(pr.Q):
        rk, rc, ro = _p(s, "rk", j), _p(s, "rc", j), _p(s, "ro", j)
        here = j < nr
        inb, seq = _batch_of(e, s, rk)
        ok = EQ(rc, rules.OK)
        oos = EQ(rc, rules.OUT_OF_ORDER_SEQUENCE)
        out.append(IMPLIES(here, AND(inb, OR(*[EQ(rc, c) for c in CODES]),
                                     IMPLIES(ok, AND(ro >= 0, ro < n, EQ(sel(wk, ro), rk),
                                                     EQ(sel(wpe, ro), pe))),
                                     IMPLIES(NOT(ok), EQ(ro, -1)),
                                     IMPLIES(oos, AND(seq > lack + 1,
                                                      *[IMPLIES(v, seq > q + 1)
                                                        for v, q in ok_seqs])))))
        ok_seqs.append((AND(here, ok), sel(wsq, ro)))
        recs.append((here, rk))
    for j in range(pr.Q):
        qk, qw = _p(s, "qk", j), _p(s, "qw", j)
        here = j < nq
        inb, _ = _batch_of(e, s, qk)
        out.append(IMPLIES(here, AND(inb, EQ(_p(s, "qpe", j), pe), EQ(_p(s, "qb", j), 0))))
        if j:
            out.append(IMPLIES(here, qw < 0))
        recs.append((here, qk))
    qw, qk = _p(s, "qw", 0), _p(s, "qk", 0)
    out.append(IMPLIES(AND(nq > 0, qw >= 0),
                       AND(qw < n, EQ(_p(s, "qo", 0), qw), EQ(sel(wk, qw), qk),
                           EQ(sel(wpe, qw), pe), EQ(sel(wsq, qw), _p(s, "qs", 0)))))
    for i, (v1, r1) in enumerate(recs):
        for v2, r2 in recs[i + 1:]:
            out.append(IMPLIES(AND(v1, v2), NOT(EQ(r1, r2))))
    return AND(*out)


def _producer_outcomes(e, s):
    n, nxt = s[("g", "produced")], _p(s, "nxt")
    wk = [_w(s, "wk", w) for w in range(e.prods.W)]
    out = []
    for k in range(e.prods.RP):
        o = _p(s, "out", k)
        out.append(IMPLIES(o >= 0, AND(k < nxt, o < n, EQ(sel(wk, o), k))))
        out.append(IMPLIES(k >= nxt, EQ(o, -1)))
        out.append(o >= -2)
    return AND(*out)


def _lemma(body, why_not):
    """The lemma as STRENGTHENING holds it: `body` where its set applies (`why_not(cfg)` is
    None), trivially true elsewhere (another set, or none, is used there)."""
    def lemma(e, s):
        return True if why_not(e.cfg) else body(e, s)
    lemma.__name__, lemma.__doc__ = body.__name__.lstrip("_"), body.__doc__
    return lemma


_BODIES = {
    "SoloReplication": _solo_replication,
    "SoloLog": _solo_log,
    "WriteOrder": _write_order,
    "EpochSeqBase": _epoch_base,
    "OlderEpochs": _older_epochs,
    "ProducerBatches": _producer_batches,
    "LastAcked": _last_acked,
    "ProducerWire": _producer_wire,
    "EpochOutcomes": _producer_outcomes,
}
EPOCH_STRENGTHENING = {name: _lemma(body, applies) for name, body in _BODIES.items()}


# --- several brokers: the producer's records over every broker's extended log ----------------

def applies_replicated(cfg) -> str | None:
    """None when the replicated lemmas below describe cfg's reachable states (with the
    replication strengthening of StrongIsr); else why not."""
    if cfg.brokers < 2 or cfg.pauses:
        return "the replicated producer strengthening is written for two or more brokers, no pauses"
    return _why_not_producer(cfg)


# the control plane of several brokers: what a shape fixes (the data fields -- logs, HW,
# positions, fetches, pending acknowledgements -- are left to the replication lemmas)
_DATA_B = ("leo", "flushed", "hw", "clen", "lr", "lep", "ce_", "cs", "pos", "hasf", "fr", "fe", "pa")


# partition-state versions: the encoding keeps them as growing integers where spec renumbers
# them densely (only equality and order matter), so a shape leaves them to the replication lemmas
_VERSIONS = ("ver", "cc_ver")


def _control(key) -> bool:
    if key[0] == "b":
        return key[2] not in _DATA_B + _VERSIONS and not key[2].startswith("f_")
    if key[0] == "g":
        return key[1] in ("crashes", "elections", "el")
    return key[0] == "z" and key[1] != "ver"


def _msg_fields(e):
    return ("ce", "le", "leader") + tuple(("isr", j) for j in range(e.n))


def _msg(s, e, d, k):
    return tuple(s[("m", d, k) + (f if isinstance(f, tuple) else (f,))] for f in _msg_fields(e))


def control_shapes(e) -> list[tuple]:
    """The control shapes of several brokers: the values of the control-plane fields (liveness,
    roles, leader and controller epochs, the controller's cache, ISR views and proposals,
    sessions, the store's partition state, who led each epoch, the crash and election
    counters; versions left out) and the set of LeaderAndIsr requests to each broker (slots
    unordered), over every state spec reaches with one record in flight, and their renamings
    (spec's initial state has broker 0 lead; a renamed shape is one spec reaches from the
    renamed initial state)."""
    from dataclasses import replace

    from spec import Model
    keys = [k for k in e.from_state(Model(e.cfg).initial()) if _control(k)]
    small = replace(e.cfg, records=1, max_in_flight=1)
    # by what the shapes read: the one-record configuration they are drawn from, the control
    # fields and the request slots (not the records, log or write slots, which they do not
    # depend on: one search serves every number of records in flight)
    key = ("control", small, tuple(keys), e.K)
    if key not in _SHAPES:
        from checkers.prove.differential import bfs_states
        from checkers.prove.encoding import Encoding
        enc = Encoding(small)
        known = enc.from_state(Model(small).initial())
        plan = [(k, _meaning(k)) for k in keys if k in known]
        seen: dict = {}
        for st in bfs_states(Model(small), 100_000):
            d = enc.from_state(st)
            msgs = tuple(frozenset(_msg(d, enc, x, k) for k in range(enc.K) if d[("m", x, k, "v")])
                         for x in range(enc.n))
            seen.setdefault((tuple(sorted(_shape(d, plan), key=repr)), msgs))
        # closed under renaming brokers (spec's initial state has broker 0 lead): the
        # renamed shapes are those spec reaches from the renamed initial state, so the lemma
        # stays true, and the hypothesis is invariant under renaming (symmetry.py)
        todo = list(seen)
        while todo:
            sh, msgs = todo.pop()
            for p in transpositions(enc.n):
                moved = (_rename_shape(sh, p), _rename_msgs(msgs, p))
                if moved not in seen:
                    seen[moved] = None
                    todo.append(moved)
        _SHAPES[key] = [(dict(sh), msgs) for sh, msgs in seen]
    return _SHAPES[key]


def _rename_shape(sh: tuple, p: tuple) -> tuple:
    return tuple(sorted(rename(dict(sh), p).items(), key=repr))


def _rename_msgs(msgs: tuple, p: tuple) -> tuple:
    """Per destination, the set of LeaderAndIsr requests (_msg's fields), brokers renamed."""
    n = len(p)
    out: list = [frozenset()] * n
    for d, want in enumerate(msgs):
        moved = set()
        for ce, le, leader, *isr in want:
            new_isr = [False] * n
            for j, x in enumerate(isr):
                new_isr[p[j]] = x
            moved.add((ce, le, p[leader] if leader >= 0 else leader, *new_isr))
        out[p[d]] = frozenset(moved)
    return tuple(out)


def _control_shapes(e, s):
    """ControlShapes: the control plane is one of control_shapes(e)."""
    alts = []
    for sh, msgs in control_shapes(e):
        out = [EQ(_feature(s, k), v) for k, v in sh.items()]
        for d, want in enumerate(msgs):
            slots = [(s[("m", d, k, "v")], _msg(s, e, d, k)) for k in range(e.K)]
            same = lambda m, w: AND(*[EQ(a, b) for a, b in zip(m, w)])   # noqa: E731
            out.append(EQ(SUM(v for v, _ in slots), len(want)))
            out += [OR(*[AND(v, same(m, w)) for v, m in slots]) for w in want]
            out += [IMPLIES(v, OR(*[same(m, w) for w in want])) for v, m in slots]
        alts.append(AND(*out))
    return OR(*alts)


def max_epochs_led(cfg) -> int:
    """The most leader epochs led in one control shape (one record in flight): 2 across a crash
    and an election on two brokers, though the largest epoch led is 2 (epoch 1 may be skipped)."""
    from checkers.prove.encoding import Encoding
    enc = Encoding(cfg)
    return max(sum(any(sh[("g", "el", ep, i)] for i in range(enc.n)) for ep in range(enc.E))
               for sh, _ in control_shapes(enc))


def write_slots(cfg) -> int:
    """The write slots an inductive proof of the producer invariants uses: one per record,
    and on several brokers one per record and leader epoch led (WriteCount: a record is
    written at most once per leader epoch; ControlShapes bounds the epochs led)."""
    if cfg.brokers > 1:
        return cfg.producers * cfg.records * max_epochs_led(cfg)
    return cfg.producers * cfg.records


def log_slots(cfg) -> int:
    """The log slots an inductive proof of the producer invariants uses: one per record (a log
    holds each record at most once, in record order: SoloLog, LogsOrder), so each log, the
    exposed prefix and a fetch response need no more slots than records however many times a
    record is written. A step past them is a goal of the proof, not an assumption."""
    return cfg.producers * cfg.records


def _wsel(s, e, f, r):
    return sel([_w(s, f, w) for w in range(e.prods.W)], r)


def _meta(s, e, key, f):
    """Field f of the write in slot `key` (a log's, a fetch response's or the exposed prefix's):
    its shadow where the encoding keeps them (Encoding.shadows), else the write table's."""
    return e.prods.meta(s, key, f)


def _ext_meta(e, s, i, f):
    """Field f of the write in each slot of broker i's extended log (Encoding.extended_log's slots)."""
    if not e.shadows:
        return [_wsel(s, e, f, r) for _, r, _ in e.extended_log(s, i)]
    leo = s[("b", i, "leo")]
    fr = [s[("b", i, "fr", q, f)] for q in range(e.L)]
    return [ite(k < leo, s[("b", i, "lr", k, f)], sel(fr, k - leo)) for k in range(e.L)]


def _exp_meta(e, s, f):
    return [_meta(s, e, ("g", "exp", k), f) for k in range(e.L)]


def _record_shadows(e, s):
    """RecordShadows (with Encoding.shadows): every slot in use of a log, a fetch response and
    the exposed prefix carries its write's metadata, the write table's values for its write id."""
    return AND(*e.shadow_links(s))


def _logs_order(e, s):
    n = s[("g", "produced")]
    out = []
    for i in range(e.n):
        x = e.extended_log(s, i)
        rec = [(v, r, wk, pe, sq) for (v, r, _), wk, pe, sq in
               zip(x, *[_ext_meta(e, s, i, f) for f in ("wk", "wpe", "wseq")])]
        for k, (v, r, wk, pe, sq) in enumerate(rec):
            out.append(IMPLIES(v, AND(r >= 0, r < n)))
            if k == 0:
                out.append(IMPLIES(v, EQ(sq, 0)))
            else:
                _, _, wk0, pe0, sq0 = rec[k - 1]
                same = EQ(pe, pe0)
                out.append(IMPLIES(v, AND(pe0 <= pe, OR(AND(same, EQ(sq, sq0 + 1)),
                                                       AND(NOT(same), EQ(sq, 0))))))
                # strictly increasing records: each above the one before (an extended log's
                # entries are a prefix of its slots, so order follows by transitivity)
                out.append(IMPLIES(v, wk0 < wk))
    elen = s[("g", "elen")]
    exk = _exp_meta(e, s, "wk")
    for k in range(e.L):
        out.append(IMPLIES(k < elen, AND(s[("g", "exp", k)] >= 0, s[("g", "exp", k)] < n)))
        if k:
            out.append(IMPLIES(k < elen, exk[k - 1] < exk[k]))
    return AND(*out)


def _write_table(e, s):
    n, W = s[("g", "produced")], e.prods.W
    pe, nxt = _p(s, "pe"), _p(s, "nxt")
    out = [n >= 0, n <= W]
    for w in range(W):
        out.append(IMPLIES(w < n, AND(EQ(_w(s, "wp", w), 0), _w(s, "wk", w) >= 0,
                                      _w(s, "wk", w) < nxt, _w(s, "wpe", w) >= 0,
                                      _w(s, "wpe", w) <= pe, _w(s, "wseq", w) >= 0)))
        if w:
            out.append(IMPLIES(w < n, _w(s, "wpe", w - 1) <= _w(s, "wpe", w)))
    return AND(*out)


def _logs_older_epochs(e, s):
    pe, nb = _p(s, "pe"), _p(s, "nb")
    out = []
    for i in range(e.n):
        for (v, _, _), wpe, wk in zip(e.extended_log(s, i), _ext_meta(e, s, i, "wpe"),
                                      _ext_meta(e, s, i, "wk")):
            old = AND(v, wpe < pe)
            # below the first unfinished batch's record, hence below all (ProducerBatchesN)
            out.append(IMPLIES(AND(old, nb > 0), wk < _p(s, "bk", 0)))
    return AND(*out)


def _exposed_acked(e, s):
    """LastAcked and the outcomes over the exposed prefix, and every running leader holds it."""
    pe, lack, elen = _p(s, "pe"), _p(s, "lack"), s[("g", "elen")]
    exp = [s[("g", "exp", k)] for k in range(e.L)]
    xpe, xsq, xk = (_exp_meta(e, s, f) for f in ("wpe", "wseq", "wk"))
    have = OR(*[AND(k < elen, EQ(xpe[k], pe), xsq[k] >= lack) for k in range(e.L)])
    out = [lack >= -1, IMPLIES(lack >= 0, have)]
    nxt = _p(s, "nxt")
    for k in range(e.prods.RP):
        o = _p(s, "out", k)
        out.append(IMPLIES(o >= 0, AND(k < nxt, o < elen, EQ(sel(xk, o), k))))
        out.append(IMPLIES(k >= nxt, EQ(o, -1)))
        out.append(o >= -2)
    for i in range(e.n):
        b = lambda f, *k: s[("b", i, f) + k]   # noqa: E731
        lead = AND(b("alive"), EQ(b("role"), LEADER))
        out.append(IMPLIES(lead, elen <= b("leo")))
        out += [IMPLIES(AND(lead, k < elen), EQ(b("lr", k), exp[k])) for k in range(e.L)]
    return AND(*out)


def _replicated_wire(e, s):
    pr = e.prods
    n, pe, nq, nr, lack = (s[("g", "produced")], _p(s, "pe"), _p(s, "nq"), _p(s, "nr"),
                           _p(s, "lack"))
    elen = s[("g", "elen")]
    xk, xpe, xsq = (_exp_meta(e, s, f) for f in ("wk", "wpe", "wseq"))
    out, recs, ok_seqs = [], [], []
    for j in range(pr.Q):
        rk, rc, ro = _p(s, "rk", j), _p(s, "rc", j), _p(s, "ro", j)
        here = j < nr
        inb, seq = _batch_of(e, s, rk)
        ok = EQ(rc, rules.OK)
        oos = EQ(rc, rules.OUT_OF_ORDER_SEQUENCE)
        out.append(IMPLIES(here, AND(inb, OR(*[EQ(rc, c) for c in CODES]),
                                     IMPLIES(ok, AND(ro >= 0, ro < elen,
                                                     EQ(sel(xk, ro), rk),
                                                     EQ(sel(xpe, ro), pe))),
                                     IMPLIES(NOT(ok), EQ(ro, -1)),
                                     IMPLIES(oos, AND(seq > lack + 1,
                                                      *[IMPLIES(v, seq > q + 1)
                                                        for v, q in ok_seqs])))))
        ok_seqs.append((AND(here, ok), sel(xsq, ro)))
        recs.append((here, rk))
    for j in range(pr.Q):
        qk, qw = _p(s, "qk", j), _p(s, "qw", j)
        here = j < nq
        inb, _ = _batch_of(e, s, qk)
        out.append(IMPLIES(here, AND(inb, EQ(_p(s, "qpe", j), pe), _p(s, "qb", j) >= 0,
                                     _p(s, "qb", j) < e.n)))
        if j:
            out.append(IMPLIES(here, qw < 0))
        recs.append((here, qk))
    qw, qk, qb, qo = _p(s, "qw", 0), _p(s, "qk", 0), _p(s, "qb", 0), _p(s, "qo", 0)
    handled = AND(nq > 0, qw >= 0)
    qle = _p(s, "qle", 0)
    led = OR(*[AND(EQ(qle, ep), EQ(qb, i), s[("g", "el", ep, i)])
               for ep in range(e.E) for i in range(e.n)])
    out.append(IMPLIES(handled, AND(qw < n, qo >= 0, led, EQ(_wsel(s, e, "wk", qw), qk),
                                    EQ(_wsel(s, e, "wpe", qw), pe),
                                    EQ(_wsel(s, e, "wseq", qw), _p(s, "qs", 0)))))
    for i in range(e.n):
        b = lambda f, *k: s[("b", i, f) + k]   # noqa: E731
        same = AND(handled, EQ(qb, i), b("alive"), EQ(b("role"), LEADER), EQ(b("le"), _p(s, "qle", 0)))
        out.append(IMPLIES(same, AND(qo < b("leo"), EQ(sel([b("lr", k) for k in range(e.L)], qo), qw))))
    for i, (v1, r1) in enumerate(recs):
        for v2, r2 in recs[i + 1:]:
            out.append(IMPLIES(AND(v1, v2), NOT(EQ(r1, r2))))
    return AND(*out)


def _write_count(e, s):
    """A record is written at most once per leader epoch, and a running leader holds the write
    of its own epoch: a record's writes number at most the epochs led so far, and at most the
    epochs led before a running leader's, plus one if its log holds the record from its own
    epoch. (Counting the epochs led, not the largest one: an election may leave an epoch that
    nobody takes up.)"""
    n = s[("g", "produced")]
    led = [OR(*[s[("g", "el", ep, i)] for i in range(e.n)]) for ep in range(e.E)]
    # each write is of one record, and the writes number n: with these sums spelled out
    # z3 bounds n by adding the records' counts (linear), not by a pigeonhole argument over
    # the write slots (15 s per query at 4 in flight; docs/benchmarks/proofs.md)
    W, RP = e.prods.W, e.prods.RP
    out = [EQ(n, SUM(w < n for w in range(W)))]
    out += [EQ(SUM(AND(w < n, EQ(_w(s, "wk", w), k)) for k in range(RP)), SUM([w < n]))
            for w in range(W)]
    for k in range(RP):
        count = SUM(AND(w < n, EQ(_w(s, "wk", w), k)) for w in range(W))
        out.append(count <= SUM(led))
        for i in range(e.n):
            b = lambda f, *j: s[("b", i, f) + j]   # noqa: E731
            lead = AND(b("alive"), EQ(b("role"), LEADER))
            mine = OR(*[AND(j < b("leo"), EQ(b("lep", j), b("le")),
                            EQ(_meta(s, e, ("b", i, "lr", j), "wk"), k)) for j in range(e.L)])
            before = SUM(AND(led[ep], ep < b("le")) for ep in range(e.E))
            out.append(IMPLIES(lead, count <= before + ite(mine, 1, 0)))
    return AND(*out)


_REPLICATED = {
    "ControlShapes": _control_shapes,
    "LogsOrder": _logs_order,
    "WriteTable": _write_table,
    "EpochSeqBaseN": _epoch_base,
    "LogsOlderEpochs": _logs_older_epochs,
    "ProducerBatchesN": _producer_batches,
    "ExposedAcked": _exposed_acked,
    "ReplicatedWire": _replicated_wire,
    "WriteCount": _write_count,
    "RecordShadows": _record_shadows,
}
REPLICATED_STRENGTHENING = {name: _lemma(body, applies_replicated) for name, body in _REPLICATED.items()}
