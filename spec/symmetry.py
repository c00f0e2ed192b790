"""Symmetry reduction over broker ids: brokers are interchangeable (the controller's choice of
candidate is the model's, never "lowest id"), so a state and any renaming of its brokers behave
alike. `canonical(state)` is the least renaming; the checker hashes that.
"""
from __future__ import annotations

from functools import lru_cache
from itertools import permutations

from spec.state import State, Zk


@lru_cache(maxsize=None)
def _perms(n: int) -> tuple:
    out = []
    for p in permutations(range(n)):
        table = []
        for mask in range(1 << n):
            m = 0
            for i in range(n):
                if (mask >> i) & 1:
                    m |= 1 << p[i]
            table.append(m)
        inv = [0] * n
        for i, j in enumerate(p):
            inv[j] = i
        out.append((p, tuple(table), tuple(inv)))
    return tuple(out)


def _reorder(t: tuple, inv: tuple) -> tuple:
    return tuple(t[inv[k]] for k in range(len(inv)))


def permute(s: State, p: tuple, mt: tuple, inv: tuple) -> tuple:
    """The state with broker i renamed p[i], as a plain tuple (equal to and hashing like the
    State it stands for). Written positionally: this is the checker's innermost loop."""
    brokers = []
    for k in range(len(inv)):
        b = s[0][inv[k]]
        ld, pend, pos, fetch, cc = b[9], b[12], b[13], b[15], b[18]
        brokers.append((
            b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8],
            p[ld] if ld >= 0 else ld, b[10], mt[b[11]], mt[pend] if pend >= 0 else -1,
            tuple(pos[i] for i in inv) if pos else (),
            b[14], (p[fetch[0]],) + fetch[1:] if fetch else (), b[16], b[17],
            (p[cc[0]] if cc[0] >= 0 else -1, cc[1], mt[cc[2]], cc[3], tuple(cc[4][i] for i in inv))
            if cc else (),
            b[19], b[20], b[21]))
    zk = s[1]
    c, ld = zk[0], zk[2]
    nzk = (p[c] if c >= 0 else c, zk[1], p[ld] if ld >= 0 else ld, zk[3], mt[zk[4]], zk[5],
           tuple(zk[6][i] for i in inv), zk[7], mt[zk[8]], mt[zk[9]], mt[zk[10]])
    msgs = tuple(sorted((p[d], ce, le, p[l] if l >= 0 else l, mt[isr], ver)
                        for d, ce, le, l, isr, ver in s[2]))
    head = ((tuple(brokers), nzk, msgs) + tuple(s[3:6]) + (tuple(mt[m] for m in s[6]),)
            + tuple(s[7:13]) + (mt[s[13]],))
    if len(s) == 14:
        return head
    # Clients: writes name no broker; a producer's requests name the broker they went to.
    prods = tuple(pr[:6] + (tuple(r[:3] + (p[r[3]],) + r[4:] for r in pr[6]),) + pr[7:]
                  for pr in s[15])
    grp = s[16]
    if grp:
        from spec.group import permute_brokers
        grp = permute_brokers(grp, p)
    txn = s[17]
    if txn:
        from spec.transaction import permute_brokers as permute_txn
        txn = permute_txn(txn, p)
    return head + (s[14], prods, grp, txn)


_IDENTITY = {n: tuple(range(n)) for n in range(1, 8)}


def _signature(b) -> tuple:
    """The id-free part of a broker: renaming cannot change it."""
    return (b.alive, b.paused, b.role, b.le, b.hw, b.log, b.trunc, b.ce, b.ctl, b.flushed,
            b.cache, b.pend_acks, b.gen, b.leader < 0, len(b.fetch), b.pend_gen, b.resp)


def canonical(s: State) -> State:
    """Canonical under broker renaming, then (with two or more producers, or consumers) under
    client renaming: producers with the same settings are interchangeable; a producer's id
    appears in the write table and as its place in `prods`, nowhere else. The least renaming
    over all client orders is taken (at most 3! = 6)."""
    c = _canonical_brokers(s)
    prods = c[15]
    if len(prods) < 2:
        return _canonical_consumers(c)
    writes = c[14]
    best = None
    for q in permutations(range(len(prods))):      # q[old] = new
        inv = [0] * len(q)
        for o, n in enumerate(q):
            inv[n] = o
        w = tuple((q[x[0]],) + x[1:] if x[0] >= 0 else x for x in writes)
        t = c[:14] + (w, tuple(prods[inv[n]] for n in range(len(q))), c[16]) + tuple(c[17:])
        if best is None or t < best:
            best = t
    return best


def _canonical_consumers(c: tuple) -> tuple:
    """Consumers of one group are interchangeable too: a member's id appears as its place in the
    group's member list, as the group's owner, and in the commit records it wrote."""
    grp = c[16]
    if not grp or len(grp[2]) < 2:
        return c
    cons, writes = grp[2], c[14]
    best = None
    for q in permutations(range(len(cons))):      # q[old] = new
        inv = [0] * len(q)
        for o, n in enumerate(q):
            inv[n] = o
        w = tuple(x[:3] + (q[x[3]],) if x[0] < 0 else x for x in writes)
        g = (grp[0], q[grp[1]] if grp[1] >= 0 else -1, tuple(cons[inv[n]] for n in range(len(q))))
        t = c[:14] + (w, c[15], g + tuple(grp[3:])) + tuple(c[17:])
        if best is None or t < best:
            best = t
    return best


def _canonical_brokers(s: State) -> State:
    """Least renaming among those that sort brokers by signature, descending. The set of such
    renamings moves with the state, so two renamings of one state get the same canonical form;
    ties in signature are broken by trying every renaming that keeps the order. Descending puts
    a running leader before its followers (role is in the signature), so the states where broker
    0 leads, as it does initially, need no renaming: 2.4 times fewer renamings than ascending."""
    sigs = [_signature(b) for b in s.brokers]
    n = len(sigs)
    order = sorted(range(n), key=sigs.__getitem__, reverse=True)
    ranked = [sigs[i] for i in order]
    tie = False
    for k in range(n - 1):
        if ranked[k] == ranked[k + 1]:
            tie = True
            break
    if not tie:
        inv = tuple(order)                       # new position k holds old broker order[k]
        if inv == _IDENTITY.get(n):
            return s
        p, mt = _by_inverse(n)[inv]
        return permute(s, p, mt, inv)
    best = None
    for p, mt, inv in _perms(n):
        if any(sigs[inv[k]] != ranked[k] for k in range(n)):
            continue
        c = permute(s, p, mt, inv)
        if best is None or c < best:
            best = c
    return best


@lru_cache(maxsize=None)
def _by_inverse(n: int) -> dict:
    """inverse renaming -> (renaming, its mask table), for the n-broker renamings."""
    return {inv: (p, mt) for p, mt, inv in _perms(n)}
