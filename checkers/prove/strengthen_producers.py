"""The strengthening lemmas for the producer invariants (ProducerSendOrder, ProducerExactlyOnce)
of an idempotent producer on a quiet single-broker cluster: the bounds of the explorer's
connection-drop results (one broker that never crashes, pauses or loses an election; one
producer, acks=all, min.insync.replicas 1, records <= 5; as many dropped connections as the
retry budget covers). Outside those bounds each lemma is `True` (it asserts nothing) and
`applies` says why the producer proof has no strengthening there.

The argument, in the producer's terms: every record the producer has handed over is either
acknowledged (the first a of them, at offset = its record number) or an unfinished batch (the
records a .. nxt-1, in order); the batches in flight are a prefix of those, and the connection
(answers first, then requests) lists exactly them, in order. The broker's log is the records
0 .. produced-1 in order, each with sequence = record number in epoch 0, and every record
acknowledged or answered is in it. So the head request is either in the log (a duplicate: the
log holds at most 5 batches of this producer, all retained) or the next one (appended); a drop
fails every batch in flight with a network error, which is retried (tries <= drops < retries),
and the retries go out in record order. No OUT_OF_ORDER_SEQUENCE_NUMBER, no epoch bump.

QuietLeader      the replication state is the initial one but for the log's growth: the broker
                 leads epoch 0 throughout, its log is write ids 0 .. produced-1 (LEO = HW =
                 flushed = its own position = the exposed length = produced, exposed = its log).
ProducerLog      write w < produced is record w of producer 0 with sequence w in epoch 0; the
                 producer has handed over at least `produced` records.
ProducerWindow   the producer has its epoch (0) before anything is sent, no epoch bump or
                 unresolved sequence pending, next sequence = records handed over; its batches
                 are the records a .. nxt-1 with sequence = record, the in-flight ones a prefix
                 as long as the connection (at most max.in.flight), each tried at most once per
                 dropped connection.
ProducerConnection
                 the answers on the connection are OK for the records a, a+1, ... with their
                 offsets, each written; then the requests for the next records in flight, in
                 order, sequence = record, epoch 0, to broker 0; only the head may have been
                 handled, and then it awaits the HW past its record's write (offset = record).
ProducerOutcomes acknowledged records (the first a) have their own number as offset, all written;
                 the others are open.

Each holds on the states the explicit model reaches at these bounds (tests/test_prove_lemmas.py).
"""
from __future__ import annotations

from checkers.prove.sym import AND, EQ, IMPLIES, NOT, OR
from spec import rules

_INIT: dict = {}


def quiet(cfg) -> str | None:
    """None when QuietLeader describes cfg's reachable states; else why not."""
    if cfg.brokers != 1 or cfg.crashes or cfg.elections or cfg.pauses:
        return ("the producer strengthening is written for one broker that never crashes, "
                "pauses or loses an election")
    return None


def applies(cfg, *, retained: bool = True) -> str | None:
    """None when the lemmas below describe cfg's reachable states; else why not. With
    `retained` False the bound on records (the broker's retained batches) is not asked: the
    lemmas then describe the states before the first batch falls out of the retained ones
    (`guide`)."""
    if cfg.producers != 1 or cfg.consumers:
        return "the producer strengthening is written for one producer and no consumers"
    if quiet(cfg):
        return quiet(cfg)
    if not cfg.idempotence or cfg.acks != "all" or cfg.min_isr > 1:
        return ("the producer strengthening is written for an idempotent producer with "
                "acks=all and min ISR 1")
    if retained and cfg.records > rules.BATCHES_RETAINED:
        return (f"the producer strengthening needs at most {rules.BATCHES_RETAINED} records "
                f"(the broker's retained batches)")
    if cfg.losses > cfg.retries:
        return "the producer strengthening needs dropped connections <= retries (no batch fails)"
    return None


# fields of the replication state that move on a quiet single-broker cluster (the rest keep their
# initial values); the producer's and the write table's fields are all left to the lemmas below
def _moving(key) -> bool:
    if key[0] in ("p", "w"):
        return True
    if key[0] == "b":
        return key[2] in ("leo", "hw", "flushed", "lr") or key[2:] == ("pos", 0)
    if key[0] == "g":
        return key[1] in ("elen", "exp", "produced", "acked", "losses")
    return False


def _initial(e) -> dict:
    key = (e.cfg, e.L)
    if key not in _INIT:
        from spec import Model
        _INIT[key] = e.from_state(Model(e.cfg).initial())
    return _INIT[key]


def _quiet_leader(e, s):
    init = _initial(e)
    out = [EQ(s[k], v) for k, v in init.items() if not _moving(k)]
    b = lambda f, *k: s[("b", 0, f) + k]   # noqa: E731
    n = s[("g", "produced")]
    out += [EQ(b("leo"), n), EQ(b("hw"), n), EQ(b("flushed"), n), EQ(b("pos", 0), n),
            EQ(s[("g", "elen")], n), n >= 0]
    out += [IMPLIES(k < n, AND(EQ(b("lr", k), k), EQ(s[("g", "exp", k)], k))) for k in range(e.L)]
    return AND(*out)


def _p(s, f, *j):
    return s[("p", 0, f) + j]


def _acked(s):
    """a: the records acknowledged, the first a handed over."""
    return _p(s, "nxt") - _p(s, "nb")


def _producer_log(e, s):
    n = s[("g", "produced")]
    out = [n <= _p(s, "nxt")]
    for w in range(e.prods.W):
        out.append(IMPLIES(w < n, AND(EQ(s[("w", "wp", w)], 0), EQ(s[("w", "wpe", w)], 0),
                                      EQ(s[("w", "wseq", w)], w), EQ(s[("w", "wk", w)], w))))
    return AND(*out)


def _producer_window(e, s):
    pr = e.prods
    a = _acked(s)
    nb, nq, nr, nxt = _p(s, "nb"), _p(s, "nq"), _p(s, "nr"), _p(s, "nxt")
    flying = nr + nq
    out = [OR(EQ(_p(s, "pe"), -1), EQ(_p(s, "pe"), 0)),
           IMPLIES(EQ(_p(s, "pe"), -1), AND(EQ(nxt, 0), EQ(nb, 0), EQ(nq, 0), EQ(nr, 0))),
           EQ(_p(s, "bump"), -1), EQ(_p(s, "seqn"), nxt),
           nb >= 0, nb <= nxt, nxt <= pr.RP, nq >= 0, nr >= 0, flying <= nb,
           flying <= e.cfg.max_in_flight, s[("g", "losses")] >= 0]
    for j in range(pr.B):
        out.append(IMPLIES(j < nb, AND(EQ(_p(s, "bk", j), a + j), EQ(_p(s, "bs", j), a + j),
                                       _p(s, "bt", j) >= 0, _p(s, "bt", j) <= s[("g", "losses")],
                                       EQ(_p(s, "bf", j), j < flying))))
    return AND(*out)


def _producer_connection(e, s):
    pr = e.prods
    a = _acked(s)
    nq, nr, n = _p(s, "nq"), _p(s, "nr"), s[("g", "produced")]
    le0 = _initial(e)[("b", 0, "le")]
    out = []
    for j in range(pr.Q):
        rk = _p(s, "rk", j)
        out.append(IMPLIES(j < nr, AND(EQ(rk, a + j), EQ(_p(s, "rc", j), rules.OK),
                                       EQ(_p(s, "ro", j), rk), rk < n)))
        qk = _p(s, "qk", j)
        out.append(IMPLIES(j < nq, AND(EQ(qk, a + nr + j), EQ(_p(s, "qs", j), qk),
                                       EQ(_p(s, "qpe", j), 0), EQ(_p(s, "qb", j), 0))))
        if j:
            out.append(IMPLIES(j < nq, _p(s, "qw", j) < 0))
    handled = AND(nq > 0, _p(s, "qw", 0) >= 0)
    out.append(IMPLIES(handled, AND(EQ(_p(s, "qw", 0), _p(s, "qk", 0)), EQ(_p(s, "qo", 0), _p(s, "qk", 0)),
                                    EQ(_p(s, "qle", 0), le0), _p(s, "qk", 0) < n)))
    return AND(*out)


def _producer_outcomes(e, s):
    a = _acked(s)
    out = [a <= s[("g", "produced")]]
    for k in range(e.prods.RP):
        o = _p(s, "out", k)
        out.append(IMPLIES(k < a, EQ(o, k)))
        out.append(IMPLIES(NOT(k < a), EQ(o, -1)))
    return AND(*out)


def _lemma(body, gate):
    """The lemma: `body` where `gate` says it applies, else True (it asserts nothing)."""
    def lemma(e, s):
        return True if gate(e.cfg) else body(e, s)
    lemma.__name__, lemma.__doc__ = body.__name__.lstrip("_"), body.__doc__
    return lemma


_BODIES = {
    "QuietLeader": (_quiet_leader, quiet),
    "ProducerLog": (_producer_log, applies),
    "ProducerWindow": (_producer_window, applies),
    "ProducerConnection": (_producer_connection, applies),
    "ProducerOutcomes": (_producer_outcomes, applies),
}
PRODUCER_STRENGTHENING = {name: _lemma(body, gate) for name, (body, gate) in _BODIES.items()}


def guide(cfg):
    """The lemmas as a path guide for a refutation search (bmc's `guide`): their formulas
    without the bound on records. Past five records they describe the states before the first
    retried batch falls out of the broker's retained ones, so a search for the duplicate may
    ask every state but the last few to satisfy them: an under-approximation (a path found is
    replayed on spec), never a proof. QuietLeader holds on every reachable state of a quiet
    broker whatever the records (tests/test_prove_lemmas.py), so it is kept to the end of the
    path. Returns (formula, kept to the end) pairs, or why they do not apply."""
    why = applies(cfg, retained=False)
    return why if why else [(body, gate is quiet) for body, gate in _BODIES.values()]
