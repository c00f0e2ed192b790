"""The strengthening invariants the inductive proofs assume and prove along, each named and
documented here (the one place). An invariant P is proved by induction when Init => P, and
P /\\ S /\\ T(s, t) => P(t) /\\ S(t) for the strengthening S below: S is proved inductive together
with P, never assumed alone.

TypeOk        every field in its range (roles, broker ids, lengths within the log bound, session
              marks in {0,1,2}, counters within the config's bounds); a down broker has no role,
              no fetch, no proposal, no session and no requests addressed to it (no pauses in
              the encoding: registered exactly while running).
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

Which strengthening each invariant's proof uses: NEEDS below.
"""
from __future__ import annotations

from checkers.prove.encoding import Encoding
from checkers.prove.sym import AND, EQ, IMPLIES, NOT, OR
from spec.state import FOLLOWER, LEADER, NONE


def _rng(x, lo, hi):
    return AND(x >= lo, x <= hi)


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
    out = [NOT(s[("g", "oob")]), _rng(s[("g", "produced")], 0, c.records), _rng(s[("g", "elen")], 0, L),
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
        out.append(EQ(s[("z", "sess", d)], s[("b", d, "alive")]))
        for k in range(e.K):
            out += [_rng(s[("m", d, k, "leader")], -1, n - 1), s[("m", d, k, "le")] >= 0,
                    s[("m", d, k, "ver")] >= 0, s[("m", d, k, "ce")] >= 0,
                    IMPLIES(s[("m", d, k, "v")], s[("b", d, "alive")])]
    return AND(*out)


def epochs_bounded(e: Encoding, s):
    out = []
    for i in range(e.n):
        out += [s[("b", i, "le")] <= s[("z", "le")], s[("b", i, "ce")] <= s[("z", "ce")]]
    for d in range(e.n):
        for k in range(e.K):
            out.append(IMPLIES(s[("m", d, k, "v")], AND(s[("m", d, k, "le")] <= s[("z", "le")],
                                                      s[("m", d, k, "ce")] <= s[("z", "ce")])))
    return AND(*out)


def current_requests(e: Encoding, s):
    out = []
    for d in range(e.n):
        for k in range(e.K):
            m = lambda f, *x: s[("m", d, k, f) + x]   # noqa: E731
            cur = AND(m("v"), EQ(m("le"), s[("z", "le")]))
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
            out += [IMPLIES(AND(s[("m", d, k, "v")], EQ(s[("m", d, k, "leader")], j)), s[("m", d, k, "isr", j)])
                    for j in range(n)]
    for i in range(n):
        lead = EQ(s[("b", i, "role")], LEADER)
        out.append(IMPLIES(lead, AND(s[("b", i, "isr", i)], IMPLIES(s[("b", i, "haspend")], s[("b", i, "pend", i)]))))
    return AND(*out)


def _props():
    from checkers.prove import props     # the invariants module imports nothing of this one
    return props


def ite_bool(c, a, b):
    return OR(AND(c, a), AND(NOT(c), b))


STRENGTHENING = {
    # proved invariants reused as strengthening of harder ones
    "HwBelowLeo": lambda e, s: _props().hw_below_leo(e, s),
    "ReplicationQuorumSuperset": lambda e, s: _props().replication_quorum_superset(e, s),
    "LogBounds": log_bounds,
    "TypeOk": type_ok,
    "EpochsBounded": epochs_bounded,
    "CurrentRequests": current_requests,
    "OneLeaderPerEpoch": one_leader_per_epoch,
    "LeaderInIsr": leader_in_isr,
    "LeaderIsrView": leader_isr_view,
}

_ISR_VIEW = ("LogBounds", "TypeOk", "EpochsBounded", "CurrentRequests", "OneLeaderPerEpoch", "LeaderInIsr",
             "LeaderIsrView")
NEEDS: dict[str, tuple[str, ...]] = {
    "HwBelowLeo": ("LogBounds",),
    "MonotonicEpochs": (),
    "ReplicationQuorumSuperset": _ISR_VIEW,
    # not yet enough: see BENCHMARKS.md (z3 engine) for what these proofs still lack
    "LogMatching": _ISR_VIEW + ("HwBelowLeo",),
    "StrongIsr": _ISR_VIEW + ("HwBelowLeo", "ReplicationQuorumSuperset"),
}
