"""The strengthening invariants the inductive proofs assume and prove along, each named and
documented here (the one place). An invariant P is proved by induction when Init => P, and
P /\\ S /\\ T(s, t) => P(t) /\\ S(t) for the strengthening S below: S is proved inductive together
with P, never assumed alone.

TypeOk        every field in its range (roles, broker ids, lengths within the log bound, session
              marks in {0,1,2}, counters within the config's bounds); a down broker has no role,
              no fetch, no proposal, no session and no requests addressed to it (without pauses
              registered exactly while running; with them registered only while running, and a
              deposed controller's cache in range).
Fencing       with pauses: every running, unpaused broker knows the store's controller epoch and
              no request carries a later one. So with controller-epoch fencing a request of an
              older controller epoch (a deposed controller's) is refused wherever it lands, and
              every lemma about in-flight requests speaks of the store's controller epoch's only
              (`_req`); without pauses it is every request.
EpochsBounded every broker's and every in-flight request's leader epoch is at most the store's,
              and its controller epoch at most the store's.
CurrentRequests
              an in-flight request of the store's current leader epoch names the store's leader;
              one addressed to that leader while it has not yet taken up the epoch also carries
              the store's ISR and version (nothing but that leader's AlterIsr changes them within
              an epoch).
OneLeaderPerEpoch
              a broker acting as leader with the store's current epoch is the store's leader.
LeaderInIsr   the store's leader is in the store's ISR, a request's leader in the request's ISR,
              and a leader in its own ISR and in its own proposal.
LeaderIsrView the store's current leader, while acting, knows the store's ISR and version — or
              its AlterIsr was committed and not yet answered, and then the store holds its
              proposal at the version of the answer; a proposal is always a superset of its ISR
              or its ISR minus one member.
LogBounds     log, cache and fetch lengths within the log bound, 0 <= flushed <= LEO, HW >= 0,
              the leader-epoch cache strictly ascending in epoch and start offset, its start
              offsets within [0, LEO], and no successor past the encoding's bounds.

For log matching and leader completeness (StrongIsr), over *extended logs* (a broker's log with
the records of its in-flight fetch response appended: what it will hold once the response lands):
FetchInFlight a pending fetch response belongs to a running, truncated follower, from its leader,
              in its epoch; in range it starts at the follower's log end.
CacheMatchesLog
              every record's epoch is that of the last cache entry starting at or before it
              (spec's EpochCacheMatchesLog); a leader's newest cache entry is its own epoch.
EntryUnique   a record sits at one offset with one epoch in every log it is in; records are
              below the produced count and epochs were led by someone, at most the store's.
LogPrefix     two extended logs holding the same record at an offset agree below it.
EpochPrefix   an extended log holding epoch e at offset k agrees with every copy of an e-record
              at or below k.
LeaderOwnsEpoch
              every copy of a running leader's epoch sits at the same offset of its own log.
SameEpochAgree
              running brokers with the same epoch and leader, truncated, agree wherever their
              extended logs overlap; such a follower's extended log is no longer than a leader's
              in that epoch; requests naming a leader name the epoch's only leader, and a request
              making d leader of an epoch d already led is stale for d.
CurrentTag    a running broker in the store's epoch follows the store's leader.
CacheEpochs   cache epochs are at most the broker's epoch (and a pending request's), an empty
              newest entry is an epoch the broker led, a truncated follower has none, no copy of
              an epoch's records sits below its start in any cache and below that start every copy
              agrees with the cache's log; extended logs never go back in epoch; whoever led the
              store's epoch is the store's leader.
LeaderSession the store's leader, while its session is the one it was elected in and it led the
              epoch, still holds that epoch; a running broker has no role exactly when it has
              accepted no epoch since it restarted.
UniqueLeaderPerEpoch, LogMatching, HwBelowLeo, ReplicationQuorumSuperset: the invariants,
              reused as strengthening once proved.
FetchInRange  with epoch truncation and fetch fencing no fetch reaches past its leader's end.
HwExposed     below every high watermark (also one in a fetch response) lies the exposed prefix;
              every ISR member (with KIP-966 also every ELR and last-known-ELR member) holds the
              whole exposed prefix; a running leader began its epoch holding it; a replica
              joining the ISR has fetched past it; without power loss no record is lost.
Positions     a running leader's own position is its log end; a follower it has a position for
              holds at least that much, all a prefix of the leader's log.
LeaderStays   without pauses a running leader (or a request making one) keeps the store's
              leadership and election session; no other broker leads a later epoch; with KIP-966
              its registration is not marked unclean (only a restart marks it). With pauses a
              paused leader is deposed while it runs: LeaderStays, Positions and the running
              leader's clauses of HwExposed then speak of a leader of the store's epoch only
              (not *deposed*: acting as leader of an older epoch than the store's), and Zombie
              says what a deposed one may still do.
Zombie        with pauses: the *reach* of a deposed leader D is the offsets D holds that every
              other member of the view it keeps (its ISR, or a committed proposal; a pending one
              is refused) has fetched or may still fetch (follows D in D's epoch, or a
              LeaderAndIsr saying so is on its way); D's HW stays within it. Below the reach
              every ISR member that no longer fetches from D holds D's entry, every newer leader
              (and every broker a request makes one) began its epoch past it holding D's entry,
              and D's entry is the exposed one. An ISR member or a newer leader outside D's
              view, an exposed prefix past D's end, or a leader of a later epoch each mean that
              a member of D's view has left D's epoch (the first newer leader was elected from
              it), which bounds the reach; while an ISR member may fetch from D, D holds the
              whole exposed prefix. The same holds of a broker with a LeaderAndIsr making it
              leader of an epoch the store has left behind, for the view it will have. Besides:
              the ISR never empties, requests of one epoch name one leader, and a broker a leader
              has a position for (or proposes) took up that leader's epoch.
EligibleShape KIP-966's store sets: the ELR is disjoint from the ISR and empty once the ISR is at
              min ISR; a last known ELR stands only while ISR and ELR are empty; at min ISR 1 an
              ELR member is unregistered or marked unclean; a running leader whose ISR view is at
              min ISR (the only one that may advance its HW) counts every ELR member in that view
              or in a committed proposal, and so do the view a committed answer gives it and a
              LeaderAndIsr making it leader of a newer epoch.

For the producer invariants (ProducerSendOrder, ProducerExactlyOnce) on a quiet single broker,
documented in checkers/prove/strengthen_producers.py (that file owns them; their names here):
QuietLeader, ProducerLog, ProducerWindow, ProducerConnection, ProducerOutcomes.
Across epoch bumps and leader fail-overs on one broker (crashes and elections while batches are
in flight, more dropped connections than retries; no unflushed loss), documented in
checkers/prove/strengthen_epochs.py: SoloReplication, SoloLog, WriteOrder, EpochSeqBase,
OlderEpochs, ProducerBatches, LastAcked, ProducerWire, EpochOutcomes; across a fail-over on
several brokers, with StrongIsr's lemmas above: ControlShapes, LogsOrder, WriteTable,
EpochSeqBaseN, LogsOlderEpochs, ProducerBatchesN, ExposedAcked, ReplicatedWire, WriteCount,
RecordShadows (`producer_needs` picks the set that applies; with RecordShadows the proof's
encoding carries each slot's write metadata in shadow fields, Encoding.shadows). TypeOk bounds the write count by the encoding's
write slots (with producers a retry may be written again on a new leader).

Each is checked on states the explicit model reaches (tests/test_prove_lemmas.py).
Which strengthening each invariant's proof uses: NEEDS below.
"""
from __future__ import annotations

from checkers.prove.encoding import Encoding
from checkers.prove import strengthen_epochs, strengthen_producers
from checkers.prove.strengthen_epochs import EPOCH_STRENGTHENING, REPLICATED_STRENGTHENING
from checkers.prove.strengthen_producers import PRODUCER_STRENGTHENING
from checkers.prove.sym import AND, EQ, IMPLIES, NE, NOT, OR, SUM, ite, sel
from spec.state import FOLLOWER, LEADER, NONE


def _rng(x, lo, hi):
    return AND(x >= lo, x <= hi)


def _req(e: Encoding, s, d, k):
    """An in-flight request to d that d may act on: any, but with pauses and controller-epoch
    fencing only a request of the store's controller epoch. A deposed controller's requests carry
    an older epoch, which every running broker already knows past (Fencing): they are refused."""
    v = s[("m", d, k, "v")]
    if not e.cfg.pauses or "controller-epoch-fencing" not in e.fx:
        return v
    return AND(v, EQ(s[("m", d, k, "ce")], s[("z", "ce")]))


def fencing(e: Encoding, s):
    """With pauses: every running, unpaused broker knows the store's controller epoch (the
    /controller watch, a restart, a resume or a new registration tells it), and no request
    carries a later one."""
    if not e.cfg.pauses:
        return True
    out = [IMPLIES(e.up(s, i), EQ(s[("b", i, "ce")], s[("z", "ce")])) for i in range(e.n)]
    out += [IMPLIES(s[("m", d, k, "v")], s[("m", d, k, "ce")] <= s[("z", "ce")])
            for d in range(e.n) for k in range(e.K)]
    return AND(*out)


def log_bounds(e: Encoding, s):
    out = [NOT(s[("g", "oob")])]
    for i in range(e.n):
        b = lambda f, *k: s[("b", i, f) + k]   # noqa: E731
        out += [_rng(b("leo"), 0, e.L), b("hw") >= 0, _rng(b("flushed"), 0, b("leo")),
                _rng(b("clen"), 0, e.C), _rng(b("f_n"), 0, e.L), b("f_off") >= 0, b("f_hw") >= 0]
        out += [IMPLIES(k < b("clen"), _rng(b("cs", k), 0, b("leo"))) for k in range(e.C)]
        out += [IMPLIES(k + 1 < b("clen"), AND(b("cs", k) < b("cs", k + 1), b("ce_", k) < b("ce_", k + 1)))
                for k in range(e.C - 1)]
    return AND(*out)


def type_ok(e: Encoding, s):
    n, L, C, R = e.n, e.L, e.C, e.R
    c = e.cfg
    out = [NOT(s[("g", "oob")]), _rng(s[("g", "produced")], 0, R), _rng(s[("g", "elen")], 0, L),
           _rng(s[("g", "crashes")], 0, c.crashes), _rng(s[("g", "elections")], 0, c.elections),
           _rng(s[("g", "losses")], 0, c.losses), s[("g", "lossy")] >= 0,
           _rng(s[("z", "controller")], -1, n - 1), _rng(s[("z", "leader")], -1, n - 1),
           s[("z", "le")] >= 0, s[("z", "ce")] >= 1, _rng(s[("z", "lsess")], 0, 2), s[("z", "ver")] >= 0]
    for i in range(n):
        b = lambda f, *k: s[("b", i, f) + k]   # noqa: E731
        alive = b("alive")
        out += [_rng(b("leo"), 0, L), _rng(b("hw"), 0, L), _rng(b("flushed"), 0, b("leo")),
                _rng(b("clen"), 0, C), b("le") >= -1, b("ce") >= 0, b("ctl") >= 0,
                _rng(b("role"), 0, 2), _rng(b("leader"), -1, n - 1), _rng(b("pgen"), 0, 2),
                b("resp") >= -2, b("ver") >= 0,
                _rng(b("f_src"), 0, n - 1), _rng(b("f_n"), 0, L), b("f_off") >= 0, b("f_hw") >= 0,
                IMPLIES(NOT(alive), AND(EQ(b("role"), NONE), NOT(b("hasf")), NOT(b("haspend")),
                                        EQ(b("resp"), -1), EQ(b("ctl"), 0), NOT(b("hascc")))),
                IMPLIES(NOT(EQ(b("role"), LEADER)), AND(NOT(b("haspend")), EQ(b("resp"), -1))),
                IMPLIES(EQ(b("role"), LEADER), EQ(b("leader"), i)),
                IMPLIES(EQ(b("role"), FOLLOWER), NOT(EQ(b("leader"), i))),
                IMPLIES(EQ(b("resp"), -2), b("haspend")), IMPLIES(b("resp") >= 0, b("haspend"))]
        out.append(IMPLIES(EQ(b("role"), LEADER), b("le") >= 0))
        for k in range(L):
            out += [_rng(b("lr", k), 0, R - 1 if R else 0), b("lep", k) >= 0,
                    _rng(b("fr", k), 0, R - 1 if R else 0), b("fe", k) >= 0]
        for k in range(C):
            out.append(b("ce_", k) >= 0)
        for j in range(n):
            out += [_rng(b("pos", j), -1, L), _rng(b("cch", j), 0, 2)]
    for d in range(n):
        # without pauses a broker is registered exactly while it runs, and requests to a broker
        # die with it
        if e.cfg.pauses:    # a paused broker's session may expire while it runs
            out.append(IMPLIES(s[("z", "sess", d)], s[("b", d, "alive")]))
            # a deposed controller's cache, which it still sends from, is in range too
            cc = lambda f: s[("b", d, f)]   # noqa: E731
            out.append(IMPLIES(cc("hascc"), AND(_rng(cc("cc_l"), -1, n - 1), cc("cc_le") >= 0,
                                                cc("cc_ver") >= 0)))
        else:
            out.append(EQ(s[("z", "sess", d)], s[("b", d, "alive")]))
        for k in range(e.K):
            out += [_rng(s[("m", d, k, "leader")], -1, n - 1), s[("m", d, k, "le")] >= 0,
                    s[("m", d, k, "ver")] >= 0, s[("m", d, k, "ce")] >= 0,
                    IMPLIES(_req(e, s, d, k), s[("b", d, "alive")])]
    return AND(*out)


def epochs_bounded(e: Encoding, s):
    out = []
    for i in range(e.n):
        out += [s[("b", i, "le")] <= s[("z", "le")], s[("b", i, "ce")] <= s[("z", "ce")]]
    for d in range(e.n):
        for k in range(e.K):
            out.append(IMPLIES(_req(e, s, d, k), AND(s[("m", d, k, "le")] <= s[("z", "le")],
                                                     s[("m", d, k, "ce")] <= s[("z", "ce")])))
    return AND(*out)


def current_requests(e: Encoding, s):
    out = []
    for d in range(e.n):
        for k in range(e.K):
            m = lambda f, *x: s[("m", d, k, f) + x]   # noqa: E731
            cur = AND(_req(e, s, d, k), EQ(m("le"), s[("z", "le")]))
            out.append(IMPLIES(cur, EQ(m("leader"), s[("z", "leader")])))
            # the leader has not taken up the epoch yet, so nothing has changed the ISR since
            waiting = AND(cur, EQ(s[("z", "leader")], d), s[("b", d, "le")] < s[("z", "le")])
            out.append(IMPLIES(waiting, AND(EQ(m("ver"), s[("z", "ver")]),
                                            *[EQ(m("isr", j), s[("z", "isr", j)]) for j in range(e.n)])))
    return AND(*out)


def one_leader_per_epoch(e: Encoding, s):
    return AND(*[IMPLIES(AND(s[("b", i, "alive")], EQ(s[("b", i, "role")], LEADER),
                             EQ(s[("b", i, "le")], s[("z", "le")])), EQ(s[("z", "leader")], i))
                 for i in range(e.n)])


def leader_isr_view(e: Encoding, s):
    out = []
    n = e.n
    for i in range(n):
        b = lambda f, *k: s[("b", i, f) + k]   # noqa: E731
        acting = AND(b("alive"), EQ(b("role"), LEADER), EQ(b("le"), s[("z", "le")]))
        committed = b("resp") >= 0
        view = AND(EQ(b("ver"), s[("z", "ver")]), *[EQ(b("isr", j), s[("z", "isr", j)]) for j in range(n)])
        done = AND(EQ(b("resp"), s[("z", "ver")]), *[EQ(b("pend", j), s[("z", "isr", j)]) for j in range(n)])
        out.append(IMPLIES(acting, ite_bool(committed, done, view)))
        # a proposal adds one replica or removes one
        grow = AND(*[IMPLIES(b("isr", j), b("pend", j)) for j in range(n)])
        shrink = AND(*[IMPLIES(b("pend", j), b("isr", j)) for j in range(n)])
        out.append(IMPLIES(b("haspend"), OR(grow, shrink)))
    return AND(*out)


def leader_in_isr(e: Encoding, s):
    n = e.n
    zl = s[("z", "leader")]
    out = [IMPLIES(EQ(zl, j), s[("z", "isr", j)]) for j in range(n)]
    for d in range(n):
        for k in range(e.K):
            out += [IMPLIES(AND(_req(e, s, d, k), EQ(s[("m", d, k, "leader")], j)), s[("m", d, k, "isr", j)])
                    for j in range(n)]
    for i in range(n):
        lead = EQ(s[("b", i, "role")], LEADER)
        out.append(IMPLIES(lead, AND(s[("b", i, "isr", i)], IMPLIES(s[("b", i, "haspend")], s[("b", i, "pend", i)]))))
    return AND(*out)


# --- log-matching lemmas -------------------------------------------------------------------
# A broker's *extended log*: its log, followed by the records of an in-flight fetch response
# that will append at its end. Every lemma below quantifies over extended logs, so it covers
# what a follower will hold once the response lands.


def _clean(e: Encoding, s, i):
    """A running leader, or a running follower that has truncated for its epoch."""
    b = lambda f: s[("b", i, f)]   # noqa: E731
    return AND(b("alive"), OR(EQ(b("role"), LEADER), AND(EQ(b("role"), FOLLOWER), NOT(b("trunc")))))


def _same(x, y):
    return AND(EQ(x[1], y[1]), EQ(x[2], y[2]))


def fetch_in_flight(e: Encoding, s):
    out = []
    for i in range(e.n):
        b = lambda f: s[("b", i, f)]   # noqa: E731
        out.append(IMPLIES(b("hasf"), AND(b("alive"), EQ(b("role"), FOLLOWER), NOT(b("trunc")),
                                          EQ(b("f_src"), b("leader")), EQ(b("f_le"), b("le")),
                                          NE(b("f_src"), i))))
        out.append(IMPLIES(AND(b("hasf"), NOT(b("f_oor"))), AND(EQ(b("f_off"), b("leo")),
                                                              b("leo") + b("f_n") <= e.L)))
        out.append(IMPLIES(AND(b("hasf"), b("f_oor")), AND(EQ(b("f_n"), 0), b("f_off") < b("leo"))))

    return AND(*out)


def cache_matches_log(e: Encoding, s):
    out = []
    L, C = e.L, e.C
    for i in range(e.n):
        b = lambda f, *k: s[("b", i, f) + k]   # noqa: E731
        out.append(IMPLIES(b("leo") > 0, AND(b("clen") > 0, EQ(b("cs", 0), 0))))
        for c in range(C):
            for k in range(L):
                below_next = True if c + 1 >= C else OR(c + 1 >= b("clen"), k < b("cs", c + 1))
                out.append(IMPLIES(AND(c < b("clen"), b("cs", c) <= k, k < b("leo"), below_next),
                                   EQ(b("lep", k), b("ce_", c))))
        lead = EQ(b("role"), LEADER)
        top = sel([b("ce_", c) for c in range(C)], b("clen") - 1)
        out.append(IMPLIES(lead, AND(b("clen") > 0, EQ(top, b("le")))))
    return AND(*out)


def entry_unique(e: Encoding, s):
    xs = [e.extended_log(s, i) for i in range(e.n)]
    slots = [(i, k) for i in range(e.n) for k in range(e.L)]
    out = []
    for (i, k) in slots:
        p, r, ep = xs[i][k]
        out.append(IMPLIES(p, AND(r >= 0, r < s[("g", "produced")], ep >= 0, ep <= s[("z", "le")],
                                  OR(*[AND(EQ(ep, x), OR(*[s[("g", "el", x, j)] for j in range(e.n)]))
                                       for x in range(e.E)]))))
    for a, (i, k) in enumerate(slots):
        for (j, q) in slots[a + 1:]:
            p1, r1, e1 = xs[i][k]
            p2, r2, e2 = xs[j][q]
            both = AND(p1, p2, EQ(r1, r2))
            out.append(NOT(both) if k != q else IMPLIES(both, EQ(e1, e2)))
    return AND(*out)


def log_prefix(e: Encoding, s):
    xs = [e.extended_log(s, i) for i in range(e.n)]
    out = []
    for i in range(e.n):
        for j in range(i + 1, e.n):
            for k in range(1, e.L):
                x, y = xs[i][k], xs[j][k]
                out.append(IMPLIES(AND(x[0], y[0], EQ(x[1], y[1])),
                                   AND(*[_same(xs[i][q], xs[j][q]) for q in range(k)])))
    return AND(*out)


def epoch_prefix(e: Encoding, s):
    xs = [e.extended_log(s, i) for i in range(e.n)]
    out = []
    for i in range(e.n):
        for j in range(e.n):
            if i == j:
                continue
            for k in range(e.L):
                for q in range(k + 1):
                    x, y = xs[i][k], xs[j][q]
                    out.append(IMPLIES(AND(x[0], y[0], EQ(x[2], y[2])), _same(xs[i][q], y)))
    return AND(*out)


def leader_owns_epoch(e: Encoding, s):
    xs = [e.extended_log(s, i) for i in range(e.n)]
    out = []
    for j in range(e.n):
        lead = AND(s[("b", j, "alive")], EQ(s[("b", j, "role")], LEADER))
        le = s[("b", j, "le")]
        for i in range(e.n):
            if i == j:
                continue
            for k in range(e.L):
                p, r, ep = xs[i][k]
                out.append(IMPLIES(AND(lead, p, EQ(ep, le)),
                                   AND(k < s[("b", j, "leo")], EQ(r, s[("b", j, "lr", k)]),
                                       EQ(s[("b", j, "lep", k)], le))))
    return AND(*out)


def _led(e: Encoding, s, epoch, j):
    return OR(*[AND(EQ(epoch, x), s[("g", "el", x, j)]) for x in range(e.E)])


def same_epoch_agree(e: Encoding, s):
    xs = [e.extended_log(s, i) for i in range(e.n)]
    out = []
    n = e.n
    for i in range(n):
        for j in range(i + 1, n):
            tag = AND(_clean(e, s, i), _clean(e, s, j), EQ(s[("b", i, "le")], s[("b", j, "le")]),
                      EQ(s[("b", i, "leader")], s[("b", j, "leader")]))
            out.append(IMPLIES(tag, AND(*[IMPLIES(AND(xs[i][k][0], xs[j][k][0]), _same(xs[i][k], xs[j][k]))
                                          for k in range(e.L)])))
    for i in range(n):
        b = lambda f: s[("b", i, f)]   # noqa: E731
        fol = AND(b("alive"), EQ(b("role"), FOLLOWER), NOT(b("trunc")))
        out.append(IMPLIES(fol, AND(b("le") >= 0, b("leader") >= 0,
                                    *[IMPLIES(EQ(b("leader"), j), _led(e, s, b("le"), j))
                                      for j in range(n) if j != i])))
        out.append(IMPLIES(AND(b("alive"), EQ(b("role"), LEADER)), _led(e, s, b("le"), i)))
        for j in range(n):
            if j == i:
                continue
            lj = AND(s[("b", j, "alive")], EQ(s[("b", j, "role")], LEADER), EQ(s[("b", j, "le")], b("le")))
            out.append(IMPLIES(AND(fol, EQ(b("leader"), j), lj), e.extended_log_length(s, i) <= s[("b", j, "leo")]))
    for d in range(n):
        for k in range(e.K):
            m = lambda f: s[("m", d, k, f)]   # noqa: E731
            out.append(IMPLIES(AND(_req(e, s, d, k), EQ(m("leader"), d)),
                               OR(NOT(_led(e, s, m("le"), d)),
                                  AND(s[("b", d, "alive")], s[("b", d, "le")] >= m("le")))))
            out += [IMPLIES(AND(_req(e, s, d, k), NE(m("leader"), j)), NOT(_led(e, s, m("le"), j)))
                    for j in range(n)]
    # one leader per epoch in the requests too
    ms = [(d, k) for d in range(n) for k in range(e.K)]
    for a, (d, k) in enumerate(ms):
        for (d2, k2) in ms[a + 1:]:
            out.append(IMPLIES(AND(_req(e, s, d, k), _req(e, s, d2, k2),
                                   EQ(s[("m", d, k, "le")], s[("m", d2, k2, "le")])),
                               EQ(s[("m", d, k, "leader")], s[("m", d2, k2, "leader")])))
    return AND(*out)


def cache_epochs(e: Encoding, s):
    out = []
    C = e.C
    for i in range(e.n):
        b = lambda f, *k: s[("b", i, f) + k]   # noqa: E731
        out += [IMPLIES(c < b("clen"), AND(b("ce_", c) >= 0, b("ce_", c) <= s[("z", "le")])) for c in range(C)]
        top_e = sel([b("ce_", c) for c in range(C)], b("clen") - 1)
        top_s = sel([b("cs", c) for c in range(C)], b("clen") - 1)
        out.append(IMPLIES(AND(b("clen") > 0, EQ(top_s, b("leo"))), _led(e, s, top_e, i)))
        out.append(IMPLIES(AND(b("alive"), NE(b("role"), NONE), b("clen") > 0), top_e <= b("le")))
        for k in range(e.K):
            m = lambda f: s[("m", i, k, f)]   # noqa: E731
            out.append(IMPLIES(AND(_req(e, s, i, k), m("le") > b("le"), b("clen") > 0), top_e <= m("le")))
    # an epoch starts where its leader's cache says: no copy of its records sits lower
    xs = [e.extended_log(s, j) for j in range(e.n)]
    for j in range(e.n):
        out += [IMPLIES(xs[j][k + 1][0], xs[j][k][2] <= xs[j][k + 1][2]) for k in range(e.L - 1)]
        b = lambda f, *k: s[("b", j, f) + k]   # noqa: E731
        top_s = sel([b("cs", c) for c in range(C)], b("clen") - 1)
        fol = AND(b("alive"), EQ(b("role"), FOLLOWER), NOT(b("trunc")))
        out.append(IMPLIES(AND(fol, b("clen") > 0), top_s < b("leo")))
        out += [IMPLIES(AND(b("alive"), NE(b("role"), NONE), xs[j][k][0]), xs[j][k][2] <= b("le"))
                for k in range(e.L)]
    for i in range(e.n):
        for c in range(C):
            for j in range(e.n):
                for k in range(e.L):
                    p, _, ep = xs[j][k]
                    hit = AND(c < s[("b", i, "clen")], p, EQ(ep, s[("b", i, "ce_", c)]))
                    out.append(IMPLIES(hit, s[("b", i, "cs", c)] <= k))
                    # ... and every copy of an epoch's records sits on the log its leader had
                    # when the epoch began
                    if j != i:
                        out.append(IMPLIES(hit, AND(*[IMPLIES(q < s[("b", i, "cs", c)], _same(xs[j][q], xs[i][q]))
                                                      for q in range(k)])))
    for x in range(e.E):
        for i in range(e.n):
            out.append(IMPLIES(s[("g", "el", x, i)], AND(x <= s[("z", "le")],
                                                         IMPLIES(EQ(s[("z", "le")], x), EQ(s[("z", "leader")], i)))))
    return AND(*out)


def leader_session(e: Encoding, s):
    """The store's leader, while its election session is current, has not restarted since it
    took up its epoch; a running broker without a role has accepted no epoch since it restarted."""
    out = []
    zl, zle = s[("z", "leader")], s[("z", "le")]
    for d in range(e.n):
        b = lambda f: s[("b", d, f)]   # noqa: E731
        out.append(IMPLIES(AND(EQ(zl, d), EQ(s[("z", "lsess")], 2), _led(e, s, zle, d)),
                           EQ(b("le"), zle)))
        out.append(IMPLIES(b("alive"), EQ(EQ(b("role"), NONE), EQ(b("le"), -1))))
    return AND(*out)


def fetch_in_range(e: Encoding, s):
    """With epoch truncation and fetch fencing a truncated follower's log is a prefix of its
    leader's: it never fetches past the leader's end."""
    if not {"epoch-truncation", "fetch-epoch-fencing"} <= e.fx:
        return True
    return AND(*[IMPLIES(s[("b", i, "hasf")], NOT(s[("b", i, "f_oor")])) for i in range(e.n)])


def hw_exposed(e: Encoding, s):
    """Below any high watermark (a broker's, or one a fetch response carries) is the exposed
    prefix; every member of the store's ISR that lost nothing holds the whole exposed prefix."""
    out = []
    elen = s[("g", "elen")]
    exp = [s[("g", "exp", k)] for k in range(e.L)]
    if not e.cfg.unflushed_loss:     # a crash keeps the whole log: nothing is lost or damaged
        out += [EQ(s[("g", "lossy")], 0)] + [NOT(s[("g", "damaged", j)]) for j in range(e.n)]
        out += [NOT(s[("g", "doomed", r)]) for r in range(e.R)]
    for i in range(e.n):
        b = lambda f, *k: s[("b", i, f) + k]   # noqa: E731
        x = e.extended_log(s, i)
        out.append(b("hw") <= elen)
        out += [IMPLIES(k < b("hw"), EQ(b("lr", k), exp[k])) for k in range(e.L)]
        out.append(IMPLIES(b("hasf"), b("f_hw") <= elen))
        out += [IMPLIES(AND(b("hasf"), NOT(b("f_oor")), k < b("f_hw")), AND(x[k][0], EQ(x[k][1], exp[k])))
                for k in range(e.L)]
        lead = AND(b("alive"), EQ(b("role"), LEADER))
        top_s = sel([b("cs", c) for c in range(e.C)], b("clen") - 1)
        # only the running leader exposes, and it held the exposed prefix when its epoch began
        # (with pauses a deposed leader may expose too, within what Zombie bounds)
        cur = AND(lead, NOT(_deposed(e, s, i))) if e.cfg.pauses else lead
        out.append(IMPLIES(cur, OR(elen <= b("hw"), elen <= top_s)))
        for r in range(e.n):
            if r != i:
                joining = AND(cur, b("haspend"), b("pend", r), NOT(b("isr", r)))
                out.append(IMPLIES(joining, AND(b("pos", r) >= 0, b("pos", r) >= elen)))
        eligible = s[("z", "isr", i)]
        if e.elr:       # KIP-966: a replica leaves the ISR for the ELR only holding what it had
            eligible = OR(eligible, s[("z", "elr", i)], s[("z", "lkelr", i)])
        member = AND(eligible, NOT(s[("g", "damaged", i)]))
        out += [IMPLIES(AND(member, k < elen), AND(k < b("leo"), EQ(b("lr", k), exp[k]))) for k in range(e.L)]
    return AND(*out)


def positions(e: Encoding, s):
    """A leader of the store's current epoch knows its own position as its log end; a follower
    it has a position for holds at least that much, all of it a prefix of the leader's log."""
    out = []
    for j in range(e.n):
        acting = AND(s[("b", j, "alive")], EQ(s[("b", j, "role")], LEADER), EQ(s[("b", j, "le")], s[("z", "le")]))
        out.append(IMPLIES(AND(s[("b", j, "alive")], EQ(s[("b", j, "role")], LEADER)),
                           EQ(s[("b", j, "pos", j)], s[("b", j, "leo")])))
        xj = e.extended_log(s, j)
        for r in range(e.n):
            if r == j:
                continue
            p = s[("b", j, "pos", r)]
            xr = e.extended_log(s, r)
            lead = AND(s[("b", j, "alive")], EQ(s[("b", j, "role")], LEADER))
            if e.cfg.pauses:
                lead = AND(lead, NOT(_deposed(e, s, j)))
            out.append(IMPLIES(AND(lead, p >= 0),
                               AND(p <= s[("b", r, "leo")], e.extended_log_length(s, r) <= s[("b", j, "leo")],
                                   *[IMPLIES(xr[k][0], _same(xr[k], xj[k])) for k in range(e.L)])))
    return AND(*out)


def controller_cache(e: Encoding, s):
    """The current controller (running, the store's controller, its epoch the store's) holds a
    controller cache: ControllerElect fills it as it takes the epoch, and only a crash (or, with
    pauses, a new session) ends that. Spec reads the cache of the current controller, so states
    without it are not states of the model."""
    return AND(*[IMPLIES(AND(s[("b", i, "alive")], EQ(s[("z", "controller")], i),
                             EQ(s[("b", i, "ctl")], s[("z", "ce")])), s[("b", i, "hascc")])
                 for i in range(e.n)])


def leader_stays(e: Encoding, s):
    """Without pauses a running leader keeps the store's leadership: the controller elects anew
    only when the leader's session ends, which takes a crash; so every epoch since the one a
    running leader took up is its own."""
    out = []
    for j in range(e.n):
        lead = AND(s[("b", j, "alive")], EQ(s[("b", j, "role")], LEADER))
        if e.cfg.pauses:
            # a paused leader is deposed while it runs (Zombie); one of the current epoch stays
            lead = AND(lead, NOT(_deposed(e, s, j)))
            out.append(IMPLIES(lead, EQ(s[("z", "leader")], j)))
        else:
            out.append(IMPLIES(lead, AND(EQ(s[("z", "leader")], j), EQ(s[("z", "lsess")], 2))))
        # and, stale or not, its view holds the store's ISR (which changes only by its own
        # AlterIsr or by the controller dropping members)
        bj = lambda f, *k: s[("b", j, f) + k]   # noqa: E731
        for x in range(e.n):
            held = ite(bj("resp") >= 0, bj("pend", x), bj("isr", x))
            out.append(IMPLIES(AND(lead, s[("z", "isr", x)]), held))
        if not e.cfg.pauses:    # with pauses a session may bounce while the leader runs
            out += [IMPLIES(AND(lead, e.is_current_controller(s, c)), NE(s[("b", c, "cch", j)], 1))
                    for c in range(e.n)]
        if e.elr:       # KIP-966: only a restart marks a registration unclean, the next reaction clears it
            out.append(IMPLIES(lead, NOT(s[("z", "unclean", j)])))
        # a request making j leader is as good as a leadership: it dies if j crashes
        for k in range(e.K):
            m = lambda f: s[("m", j, k, f)]   # noqa: E731
            mk = AND(_req(e, s, j, k), EQ(m("leader"), j))
            if e.cfg.pauses:
                mk = AND(mk, EQ(m("le"), s[("z", "le")]))
                out.append(IMPLIES(mk, EQ(s[("z", "leader")], j)))
            else:
                out.append(IMPLIES(mk, AND(EQ(s[("z", "leader")], j), EQ(s[("z", "lsess")], 2))))
            if e.elr:
                out.append(IMPLIES(mk, NOT(s[("z", "unclean", j)])))
            fresh = AND(mk, s[("b", j, "le")] < m("le"))
            out += [IMPLIES(AND(fresh, s[("z", "isr", x)]), s[("m", j, k, "isr", x)]) for x in range(e.n)]
            if not e.cfg.pauses:
                out += [IMPLIES(AND(mk, e.is_current_controller(s, c)), NE(s[("b", c, "cch", j)], 1))
                        for c in range(e.n)]
            for x in range(e.E):
                out += [IMPLIES(AND(mk, x >= m("le")), NOT(s[("g", "el", x, i)])) for i in range(e.n) if i != j]
        for x in range(e.E):
            out += [IMPLIES(AND(lead, x >= s[("b", j, "le")]), NOT(s[("g", "el", x, i)]))
                    for i in range(e.n) if i != j]
    return AND(*out)


def _deposed(e: Encoding, s, j):
    """With pauses: broker j acts as leader of an older epoch than the store's (deposed, or
    elected anew and not yet told): its view may be stale, and another broker may lead."""
    if not e.cfg.pauses:
        return False
    return AND(s[("b", j, "alive")], EQ(s[("b", j, "role")], LEADER), s[("b", j, "le")] < s[("z", "le")])


def _may_fetch(e: Encoding, s, j, x, le=None):
    """Follower x may still fetch from leader j in j's epoch (or epoch `le`): it follows j in
    that epoch, or a LeaderAndIsr of that epoch naming j is on its way to x."""
    b = lambda f: s[("b", x, f)]   # noqa: E731
    le = s[("b", j, "le")] if le is None else le
    follows = AND(EQ(b("le"), le), EQ(b("leader"), j))
    told = [AND(_req(e, s, x, k), EQ(s[("m", x, k, "le")], le), EQ(s[("m", x, k, "leader")], j),
                b("le") < le) for k in range(e.K)]
    return AND(b("alive"), OR(follows, *told))


def zombie(e: Encoding, s):
    """With pauses: what a deposed leader (running as leader of an older epoch than the
    store's), or a broker a stale LeaderAndIsr is about to make one, may still expose: within
    its reach, which members of its view that left its epoch bound (the module docstring)."""
    if not e.cfg.pauses:
        return True
    return AND(*[c for _, c in zombie_parts(e, s)])


def zombie_parts(e: Encoding, s) -> list[tuple[str, object]]:
    """Zombie's clauses, each tagged with its kind and brokers (what a CTI breaks)."""
    out: list[tuple[str, object]] = []

    def add(tag, *cs):
        out.extend((tag, c) for c in cs)

    if not e.elr:       # (KIP-966 empties the ISR into the ELR)
        add("isr-nonempty", OR(*[s[("z", "isr", x)] for x in range(e.n)]))
    # an epoch is given to one leader, once: requests of the same epoch name the same leader
    reqs = [(d, k) for d in range(e.n) for k in range(e.K)]
    for a, (d, k) in enumerate(reqs):
        for d2, k2 in reqs[a + 1:]:
            add(f"requests-agree m{d}.{k} m{d2}.{k2}",
                IMPLIES(AND(_req(e, s, d, k), _req(e, s, d2, k2), EQ(s[("m", d, k, "le")], s[("m", d2, k2, "le")])),
                        EQ(s[("m", d, k, "leader")], s[("m", d2, k2, "leader")])))
    for j in range(e.n):
        bj = lambda f, *k: s[("b", j, f) + k]   # noqa: E731
        lead_j = AND(bj("alive"), EQ(bj("role"), LEADER))
        others = [x for x in range(e.n) if x != j]
        xj = e.extended_log(s, j)
        for r in others:
            p = bj("pos", r)
            # a broker j has a position for, or proposes, fetched from j in j's epoch: if it
            # now acts as leader, it is of that epoch or a later one (epochs never go back)
            seen = OR(p >= 0, AND(bj("haspend"), bj("pend", r), NOT(bj("isr", r))))
            add(f"seen-epoch b{j} b{r}", IMPLIES(AND(lead_j, seen, s[("b", r, "alive")], NE(s[("b", r, "le")], -1)),
                                                  bj("le") <= s[("b", r, "le")]))
            # ... and every request to it of an older epoch is stale for it (it had taken up
            # j's epoch; a restart drops every request on its way)
            add(f"seen-request b{j} b{r}",
                *[IMPLIES(AND(lead_j, seen, _req(e, s, r, q), s[("m", r, q, "le")] < bj("le")),
                          s[("m", r, q, "le")] <= s[("b", r, "le")]) for q in range(e.K)])
            if "isr-expand-epoch-start" in e.fx:    # KAFKA-7128: it joins past j's epoch start
                top = sel([bj("cs", c) for c in range(e.C)], bj("clen") - 1)
                add(f"joins-past-epoch-start b{j} b{r}",
                    IMPLIES(AND(lead_j, bj("haspend"), bj("pend", r), NOT(bj("isr", r))), p >= top))
        # D, running as a deposed leader: the view it keeps (a deposed leader's pending proposal
        # is refused: its epoch is old), its positions, the followers that may fetch from it
        dep = _deposed(e, s, j)
        mx = [ite(bj("resp") >= 0, bj("pend", x), bj("isr", x)) for x in range(e.n)]
        may = {x: _may_fetch(e, s, j, x) for x in others}
        for r, mf in may.items():
            p = bj("pos", r)
            xr = e.extended_log(s, r)
            add(f"follower-prefix b{j} b{r}",
                IMPLIES(AND(dep, mf, p >= 0),
                        AND(p <= s[("b", r, "leo")], e.extended_log_length(s, r) <= bj("leo"),
                            *[IMPLIES(xr[k][0], _same(xr[k], xj[k])) for k in range(e.L)])))
            add(f"pos-within-log b{j} b{r}", IMPLIES(dep, p <= bj("leo")))
        _deposed_clauses(e, s, add, j, f"b{j}", dep, lead_j, bj("le"), mx, lambda x: bj("pos", x), may)
        # a request making j leader of an epoch the store has left behind: the same, for the
        # view, positions (none yet) and followers j will have once it takes the request up
        for q in range(e.K):
            mq = lambda f, *k: s[("m", j, q, f) + k]   # noqa: E731
            stale = AND(_req(e, s, j, q), EQ(mq("leader"), j), bj("le") < mq("le"), mq("le") < s[("z", "le")])
            mayq = {x: _may_fetch(e, s, j, x, mq("le")) for x in others}
            _deposed_clauses(e, s, add, j, f"b{j} m{q}", stale, stale, mq("le"),
                             [mq("isr", x) for x in range(e.n)], lambda x: -1, mayq)
    return out


def _deposed_clauses(e: Encoding, s, add, j, tag, cond, acting, le, view, pos, may):
    """Zombie's claims on j as leader of epoch `le` (when `cond`: deposed, or about to take up
    a stale request) with `view`, positions `pos` and followers that `may` still fetch from it;
    `acting`: the weaker condition under which a newer leader outside the view bounds it."""
    if cond is False and acting is False:
        return      # a concrete state where j is no such leader: every clause holds
    elen = s[("g", "elen")]
    bj = lambda f, *k: s[("b", j, f) + k]   # noqa: E731

    def led_after(x0):
        return OR(*[AND(s[("g", "el", x, y)], x0 < x) for x in range(e.E) for y in range(e.n)])

    lacks = OR(bj("leo") < elen, *[AND(k < elen, NE(bj("lr", k), s[("g", "exp", k)])) for k in range(e.L)])
    # a member of the view that has left the epoch (or died) bounds the reach by its position
    stopped = OR(*[AND(view[y], NOT(mf)) for y, mf in may.items()])
    for r, mf in may.items():
        isr_r = AND(cond, mf, s[("z", "isr", r)])
        add(f"isr-follower-in-view {tag} b{r}", IMPLIES(isr_r, view[r]))
        # while an ISR member may fetch from j, no newer leader could expose anything without
        # it: j still holds the whole exposed prefix (the member truncates to j)
        add(f"isr-follower-exposed {tag} b{r}", IMPLIES(AND(isr_r, NOT(s[("g", "damaged", r)])), NOT(lacks)))
        # j began its epoch holding the exposed prefix; what was exposed since and j lacks was
        # exposed by a leader newer even than an epoch a request makes a follower of j leader of
        for q in range(e.K):
            mq = lambda f: s[("m", r, q, f)]   # noqa: E731
            made = AND(_req(e, s, r, q), EQ(mq("leader"), r), s[("b", r, "le")] < mq("le"))
            add(f"lacks-exposed-follower-made {tag} b{r} m{q}",
                IMPLIES(AND(cond, lacks, mf, made), led_after(mq("le"))))
            # ... and no ISR member follows r in that epoch yet (r would truncate to j's log
            # before it leads, and the member to r's)
            for x in may:
                if x == r:
                    continue
                fol = AND(s[("z", "isr", x)], NOT(s[("g", "damaged", x)]), _may_fetch(e, s, r, x, mq("le")))
                add(f"lacks-exposed-chain {tag} b{r} m{q} b{x}", NOT(AND(cond, lacks, mf, made, fol)))
    # an ISR member outside the view was added by a newer epoch's leader, after the first of them
    # (elected from the view) left the epoch; so for a newer leader outside the view
    add(f"isr-outside-view {tag}", *[IMPLIES(AND(cond, s[("z", "isr", x)], NOT(view[x])), stopped) for x in may])
    for m in may:
        bm = lambda f, *q: s[("b", m, f) + q]   # noqa: E731
        newer = AND(bm("alive"), EQ(bm("role"), LEADER), le < bm("le"))
        made = [AND(_req(e, s, m, q), EQ(s[("m", m, q, "leader")], m), le < s[("m", m, q, "le")],
                    bm("le") < s[("m", m, q, "le")]) for q in range(e.K)]
        add(f"newer-outside-view {tag} b{m}", IMPLIES(AND(acting, OR(newer, *made), NOT(view[m])), stopped))
    # what j lacks of the exposed prefix a newer epoch's leader exposed; the first leader after
    # j's epoch was elected from the view and has left the epoch
    add(f"lacks-exposed-newer-led {tag}", IMPLIES(AND(cond, lacks), led_after(le)))
    add(f"led-after {tag}", IMPLIES(AND(cond, led_after(le)), stopped))
    add(f"exposed-past-end {tag}", IMPLIES(AND(cond, bj("leo") < elen), stopped))
    _below_clauses(e, s, add, j, tag, cond, le, view, pos, may)


def _below_clauses(e: Encoding, s, add, j, tag, cond, le, view, pos, may):
    """Zombie's claims below the reach of j as leader (when `cond`) of epoch `le` with `view`,
    positions `pos` and followers that `may` still fetch from it."""
    elen = s[("g", "elen")]
    bj = lambda f, *k: s[("b", j, f) + k]   # noqa: E731
    for k in range(e.L):
        below = AND(cond, k < bj("leo"), *[IMPLIES(view[x], OR(k < pos(x), mf)) for x, mf in may.items()])
        add(f"below-exposed {tag} k{k}", IMPLIES(AND(below, k < elen), EQ(bj("lr", k), s[("g", "exp", k)])))
        for m in may:
            bm = lambda f, *q: s[("b", m, f) + q]   # noqa: E731
            held = AND(k < bm("leo"), EQ(bm("lr", k), bj("lr", k)), EQ(bm("lep", k), bj("lep", k)))
            add(f"below-isr-holds {tag} k{k} b{m}",
                IMPLIES(AND(below, s[("z", "isr", m)], NOT(s[("g", "damaged", m)]), NOT(may[m])), held))
            top = sel([bm("cs", c) for c in range(e.C)], bm("clen") - 1)
            newer = AND(bm("alive"), EQ(bm("role"), LEADER), le < bm("le"))
            add(f"below-newer-leader {tag} k{k} b{m}", IMPLIES(AND(below, newer), AND(k < top, held)))
            for q in range(e.K):
                mq = lambda f: s[("m", m, q, f)]   # noqa: E731
                makes = AND(_req(e, s, m, q), EQ(mq("leader"), m), le < mq("le"), bm("le") < mq("le"))
                add(f"below-made-leader {tag} k{k} b{m} m{q}",
                    IMPLIES(AND(below, makes), ite(may[m], view[m], held)))


def eligible_shape(e: Encoding, s):
    """KIP-966's store sets: the ELR is disjoint from the ISR and is empty once the ISR is at
    min ISR; a last known ELR stands only while the ISR and the ELR are empty. What makes an ELR
    member hold the exposed prefix (HwExposed): no leader advances the HW without counting it."""
    if not e.elr:
        return True
    isr = [s[("z", "isr", i)] for i in range(e.n)]
    elr = [s[("z", "elr", i)] for i in range(e.n)]
    lk = [s[("z", "lkelr", i)] for i in range(e.n)]
    out = [NOT(AND(isr[i], elr[i])) for i in range(e.n)]
    out.append(IMPLIES(OR(*elr), SUM(isr) < e.cfg.min_isr))
    out.append(IMPLIES(OR(*lk), NOT(OR(*isr, *elr))))
    if e.cfg.min_isr <= 1:
        # only an empty ISR makes an ELR, so its members were all gone: each is unregistered or,
        # registered since, marked unclean (and the next reaction drops it), never electable
        out += [IMPLIES(elr[x], OR(NOT(s[("z", "sess", x)]), s[("z", "unclean", x)])) for x in range(e.n)]
    # a leader whose view is at min ISR (the only one that may advance its HW) still counts
    # every ELR member (the controller moved them out of the store's ISR, and a stale leader's
    # shrink is refused), or a committed proposal of its own does; so does the view that
    # committed answer gives it
    for j in range(e.n):
        b = lambda f, x: s[("b", j, f, x)]   # noqa: E731
        lead = AND(s[("b", j, "alive")], EQ(s[("b", j, "role")], LEADER))
        committed = s[("b", j, "resp")] >= 0
        view = [b("isr", x) for x in range(e.n)]
        full = AND(lead, SUM(view) >= e.cfg.min_isr)
        out += [IMPLIES(AND(full, elr[x]), OR(view[x], AND(committed, b("pend", x)))) for x in range(e.n)]
        nxt = [b("pend", x) for x in range(e.n)]
        full = AND(lead, committed, SUM(nxt) >= e.cfg.min_isr)
        out += [IMPLIES(AND(full, elr[x]), nxt[x]) for x in range(e.n)]
        # and the view a LeaderAndIsr making j leader of a newer epoch gives it
        for k in range(e.K):
            m = lambda f, *x: s[("m", j, k, f) + x]   # noqa: E731
            req = [m("isr", x) for x in range(e.n)]
            full = AND(_req(e, s, j, k), EQ(m("leader"), j), s[("b", j, "le")] < m("le"),
                       SUM(req) >= e.cfg.min_isr)
            out += [IMPLIES(AND(full, elr[x]), req[x]) for x in range(e.n)]
    return AND(*out)


def current_tag(e: Encoding, s):
    return AND(*[IMPLIES(AND(s[("b", i, "alive")], NE(s[("b", i, "role")], NONE),
                             EQ(s[("b", i, "le")], s[("z", "le")])), EQ(s[("b", i, "leader")], s[("z", "leader")]))
                 for i in range(e.n)])


def _props():
    from checkers.prove import props     # the invariants module imports nothing of this one
    return props


def ite_bool(c, a, b):
    return OR(AND(c, a), AND(NOT(c), b))


STRENGTHENING = {
    # proved invariants reused as strengthening of harder ones
    "HwBelowLeo": lambda e, s: _props().hw_below_leo(e, s),
    "ReplicationQuorumSuperset": lambda e, s: _props().replication_quorum_superset(e, s),
    "UniqueLeaderPerEpoch": lambda e, s: _props().unique_leader_per_epoch(e, s),
    "LogMatching": lambda e, s: _props().log_matching(e, s),
    "LogBounds": log_bounds,
    "TypeOk": type_ok,
    "EpochsBounded": epochs_bounded,
    "CurrentRequests": current_requests,
    "OneLeaderPerEpoch": one_leader_per_epoch,
    "LeaderInIsr": leader_in_isr,
    "LeaderIsrView": leader_isr_view,
    "FetchInFlight": fetch_in_flight,
    "CacheMatchesLog": cache_matches_log,
    "EntryUnique": entry_unique,
    "LogPrefix": log_prefix,
    "EpochPrefix": epoch_prefix,
    "LeaderOwnsEpoch": leader_owns_epoch,
    "SameEpochAgree": same_epoch_agree,
    "CurrentTag": current_tag,
    "CacheEpochs": cache_epochs,
    "LeaderSession": leader_session,
    "FetchInRange": fetch_in_range,
    "HwExposed": hw_exposed,
    "Positions": positions,
    "LeaderStays": leader_stays,
    "Zombie": zombie,
    "ControllerCache": controller_cache,
    "EligibleShape": eligible_shape,
    "Fencing": fencing,
    # the producer invariants' (checkers/prove/strengthen_producers.py documents them)
    **PRODUCER_STRENGTHENING,
    # across epoch bumps and fail-overs on one broker (checkers/prove/strengthen_epochs.py)
    **EPOCH_STRENGTHENING,
    # across a leader fail-over on several brokers (checkers/prove/strengthen_epochs.py)
    **REPLICATED_STRENGTHENING,
}

# lemmas whose clauses carry names (kind and brokers): a CTI names the clauses it breaks
PARTS = {"Zombie": zombie_parts}

_ISR_VIEW = ("LogBounds", "TypeOk", "Fencing", "EpochsBounded", "CurrentRequests", "OneLeaderPerEpoch",
             "LeaderInIsr", "LeaderIsrView")
# Log matching: the extended logs (a follower's log with the fetch response on its way to it)
# never disagree where they overlap in one epoch, because records are unique, an epoch's records
# are its leader's, and the caches locate every epoch for the truncation rule.
_LOGS = _ISR_VIEW + ("HwBelowLeo", "ReplicationQuorumSuperset", "UniqueLeaderPerEpoch", "FetchInFlight",
                     "CacheMatchesLog", "EntryUnique", "LogPrefix", "EpochPrefix", "LeaderOwnsEpoch",
                     "SameEpochAgree", "CurrentTag", "CacheEpochs", "LeaderSession")
NEEDS: dict[str, tuple[str, ...]] = {
    "HwBelowLeo": ("LogBounds",),
    "MonotonicEpochs": (),
    "ReplicationQuorumSuperset": _ISR_VIEW,
    "LogMatching": _LOGS,
    # StrongIsr: below a HW is the exposed prefix, which every ISR member holds
    "StrongIsr": _LOGS + ("LogMatching", "FetchInRange", "EligibleShape", "HwExposed", "Positions",
                          "LeaderStays", "Zombie"),
    # the producers' promises, on a quiet single broker (strengthen_producers.applies)
    "ProducerSendOrder": tuple(PRODUCER_STRENGTHENING),
    "ProducerExactlyOnce": tuple(PRODUCER_STRENGTHENING),
}


def producer_needs(cfg) -> tuple[tuple[str, ...] | None, str | None]:
    """The strengthening of the producer invariants' proof for cfg: the quiet-broker set where
    strengthen_producers.applies, else the epoch set where strengthen_epochs.applies (with
    QuietLeader when the broker never crashes or loses an election), else on several brokers
    the replicated set with StrongIsr's replication lemmas; (None, why) elsewhere."""
    if strengthen_producers.applies(cfg) is None:
        return tuple(PRODUCER_STRENGTHENING), None
    why = strengthen_epochs.applies(cfg)
    if why is None:
        quiet = () if strengthen_producers.quiet(cfg) else ("QuietLeader",)
        return quiet + tuple(EPOCH_STRENGTHENING), None
    if strengthen_epochs.applies_replicated(cfg) is None:
        return NEEDS["StrongIsr"] + tuple(REPLICATED_STRENGTHENING), None
    if cfg.brokers > 1:
        why = strengthen_epochs.applies_replicated(cfg)
    return None, f"{strengthen_producers.applies(cfg)}; {why}"
