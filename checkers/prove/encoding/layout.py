"""The encoded state's layout: which fields a state has (`schema`), the shadow fields of slots
holding write ids, the extended log (a log followed by its fetch response in flight), and the
conversions between spec's State and a concrete encoded state (`from_state`, `to_state`,
`spec_action`).

A state is a flat dict from field keys to values: Python ints/bools for a concrete state, z3
terms for a symbolic one. Keys: ("b", broker, field[, index]) for a broker, ("z", field[, broker])
for the coordination store, ("m", dst, slot, field[, broker]) for an in-flight LeaderAndIsr
request, ("g", field[, index]) for counters and ghosts, ("p", ...) and ("w", ...) for the
producers (checkers/prove/producers.py).
"""
from __future__ import annotations

from checkers.prove.instances import Inst
from checkers.prove.producers import WRITE
from checkers.prove.sym import AND, EQ, IMPLIES, NOT, OR, ite, sel
from spec import Action, State
from spec.state import LEADER, Broker, Zk

BROKER_INT = ("leo", "flushed", "hw", "clen", "le", "role", "leader", "ver", "f_src", "f_le",
              "f_off", "f_n", "f_hw", "ce", "ctl", "cc_l", "cc_le", "cc_ver", "pgen", "resp")
BROKER_BOOL = ("alive", "paused", "haspend", "trunc", "hasf", "f_oor", "hascc")
ZK_INT = ("controller", "ce", "leader", "le", "ver", "lsess")
ZK_ELR = ("elr", "lkelr", "unclean")     # KIP-966's store sets, one boolean per broker
G_INT = ("produced", "elen", "crashes", "pauses", "elections", "losses", "lossy")


class Unsupported(ValueError):
    """A configuration or a state outside what the encoding covers."""


class StateLayout:
    """State layout, shadows and conversions (a mixin of Encoding; reads its bounds n, L, C, R,
    K, E)."""

    def schema(self) -> list[tuple[tuple, str]]:
        n, L, C, R, K, E = self.n, self.L, self.C, self.R, self.K, self.E
        out: list[tuple[tuple, str]] = []
        for i in range(n):
            out += [(("b", i, f), "int") for f in BROKER_INT]
            out += [(("b", i, f), "bool") for f in BROKER_BOOL]
            for k in range(L):
                out += [(("b", i, "lr", k), "int"), (("b", i, "lep", k), "int"),
                        (("b", i, "fr", k), "int"), (("b", i, "fe", k), "int")]
            for k in range(C):
                out += [(("b", i, "ce_", k), "int"), (("b", i, "cs", k), "int")]
            for j in range(n):
                out += [(("b", i, "isr", j), "bool"), (("b", i, "pend", j), "bool"),
                        (("b", i, "pos", j), "int"), (("b", i, "ccisr", j), "bool"),
                        (("b", i, "cch", j), "int")]
            out += [(("b", i, "pa", r), "bool") for r in range(R)]
        out += [(("z", f), "int") for f in ZK_INT]
        for j in range(n):
            out += [(("z", "isr", j), "bool"), (("z", "sess", j), "bool")]
            if self.elr:
                out += [(("z", f, j), "bool") for f in ZK_ELR]
        for d in range(n):
            for k in range(K):
                out += [(("m", d, k, "v"), "bool")] + [(("m", d, k, f), "int")
                                                      for f in ("ce", "le", "leader", "ver")]
                out += [(("m", d, k, "isr", j), "bool") for j in range(n)]
        out += [(("g", f), "int") for f in G_INT]
        out += [(("g", "oob"), "bool")]
        for r in range(R):
            out += [(("g", "acked", r), "bool"), (("g", "doomed", r), "bool")]
        out += [(("g", "exp", k), "int") for k in range(L)]
        out += [(("g", "damaged", j), "bool") for j in range(n)]
        for e in range(E):
            out += [(("g", "el", e, j), "bool") for j in range(n)]
        if self.prods:
            out += self.prods.schema()
        if self.shadows:
            keys = [k for k, _ in out if k[0] in ("b", "g") and k[-2] in ("lr", "fr", "exp")]
            out += [(x, "int") for k in keys for x in self.shadow(k)]
        return out

    def shadow(self, key) -> list:
        """The shadow fields of a slot holding a write id (a log's, a fetch response's or the
        exposed prefix's), one per write-table field; [] without shadows."""
        return [key + (f,) for f in WRITE] if self.shadows else []

    def shadow_links(self, s) -> list:
        """The clauses of RecordShadows over s (symbolic or concrete): every slot in use of a
        log, a fetch response and the exposed prefix holds a write id below the writes made,
        and its shadows are that write's metadata in the write table. Stated per write id,
        not as a lookup at the slot's: an append changes one write, and a lookup's chain over
        every write slot would be asked again for each slot (docs/benchmarks/proofs.md)."""
        if not self.shadows:
            return []
        n, out = s[("g", "produced")], []

        def link(key, used):
            out.append(IMPLIES(used, AND(s[key] >= 0, s[key] < n)))
            for w in range(self.R):
                out.append(IMPLIES(AND(used, EQ(s[key], w)),
                                   AND(*[EQ(s[x], s[("w", f, w)])
                                         for x, f in zip(self.shadow(key), WRITE)])))

        for i in range(self.n):
            b = lambda f: s[("b", i, f)]   # noqa: E731
            window = AND(b("hasf"), NOT(b("f_oor")))
            for k in range(self.L):
                link(("b", i, "lr", k), k < b("leo"))
                link(("b", i, "fr", k), AND(window, k < b("f_n")))
        for k in range(self.L):
            link(("g", "exp", k), k < s[("g", "elen")])
        return out

    def copy_slot(self, s, dst, value, shadows) -> None:
        """s[dst] = value, and its shadows the given terms (a list parallel to `shadow(dst)`:
        where the value came from, or the new write's metadata)."""
        s[dst] = value
        for x, v in zip(self.shadow(dst), shadows):
            s[x] = v

    def copied(self, s, keys, pick) -> list:
        """The shadows of the slots `keys`, each field through `pick` (the same selection the
        write ids went through)."""
        if not self.shadows:
            return []
        return [pick([s[x] for x in fields]) for fields in zip(*[self.shadow(k) for k in keys])]

    def extended_log(self, s, i) -> list:
        """Broker i's extended log, its log followed by the records of its fetch response in
        flight (unless out of range), as a list over slots k of (present, record, epoch)."""
        L = self.L
        b = lambda f, *k: s[("b", i, f) + k]   # noqa: E731
        leo = b("leo")
        win = AND(b("hasf"), NOT(b("f_oor")))
        fr = [b("fr", q) for q in range(L)]
        fe = [b("fe", q) for q in range(L)]
        out = []
        for k in range(L):
            inlog = k < leo
            inwin = AND(win, k >= leo, k < leo + b("f_n"))
            out.append((OR(inlog, inwin), ite(inlog, b("lr", k), sel(fr, k - leo)),
                        ite(inlog, b("lep", k), sel(fe, k - leo))))
        return out

    def extended_log_length(self, s, i):
        """The length of broker i's extended log."""
        b = lambda f: s[("b", i, f)]   # noqa: E731
        return b("leo") + ite(AND(b("hasf"), NOT(b("f_oor"))), b("f_n"), 0)

    def from_state(self, s: State) -> dict:
        """spec State -> concrete encoded state. Raises Unsupported past the encoding's bounds."""
        n, L, C, K, E = self.n, self.L, self.C, self.K, self.E
        d: dict = {}
        for i, b in enumerate(s.brokers):
            if b.gen != 2:
                raise Unsupported("unnormalised session")
            if b.leo > L or len(b.cache) > C:
                raise Unsupported("log longer than the encoding's bound")
            role_pos = b.role == LEADER
            if bool(b.pos) != role_pos and b.alive:
                raise Unsupported("fetch positions without leadership")
            put = {"alive": b.alive, "paused": b.paused, "leo": b.leo, "flushed": b.flushed, "hw": b.hw,
                   "clen": len(b.cache), "le": b.le, "role": b.role, "leader": b.leader,
                   "ver": b.ver, "haspend": b.pending >= 0, "trunc": b.trunc,
                   "hasf": bool(b.fetch), "ce": b.ce, "ctl": b.ctl, "hascc": bool(b.ctl_cache),
                   "pgen": b.pend_gen, "resp": b.resp}
            for f, v in put.items():
                d[("b", i, f)] = v
            for k in range(L):
                r, e = b.log[k] if k < b.leo else (0, 0)
                d[("b", i, "lr", k)], d[("b", i, "lep", k)] = r, e
            for k in range(C):
                e, st = b.cache[k] if k < len(b.cache) else (0, 0)
                d[("b", i, "ce_", k)], d[("b", i, "cs", k)] = e, st
            src, fle, off, recs, fhw, oor = b.fetch if b.fetch else (0, 0, 0, (), 0, False)
            d.update({("b", i, "f_src"): src, ("b", i, "f_le"): fle, ("b", i, "f_off"): off,
                      ("b", i, "f_n"): len(recs), ("b", i, "f_hw"): fhw, ("b", i, "f_oor"): oor})
            for k in range(L):
                r, e = recs[k] if k < len(recs) else (0, 0)
                d[("b", i, "fr", k)], d[("b", i, "fe", k)] = r, e
            cl, cle, cisr, cver, ch = b.ctl_cache if b.ctl_cache else (0, 0, 0, 0, (0,) * n)
            d.update({("b", i, "cc_l"): cl, ("b", i, "cc_le"): cle, ("b", i, "cc_ver"): cver})
            for j in range(n):
                d[("b", i, "isr", j)] = bool((b.isr >> j) & 1)
                d[("b", i, "pend", j)] = b.pending >= 0 and bool((b.pending >> j) & 1)
                d[("b", i, "pos", j)] = b.pos[j] if b.pos else -1
                d[("b", i, "ccisr", j)] = bool((cisr >> j) & 1)
                d[("b", i, "cch", j)] = ch[j]
            for r in range(self.R):
                d[("b", i, "pa", r)] = bool((b.pend_acks >> r) & 1)
        zk = s.zk
        if not self.elr and (zk.elr or zk.lkelr or zk.unclean):
            raise Unsupported("eligible leader replicas")
        for f in ZK_INT:
            d[("z", f)] = getattr(zk, f)
        for j in range(n):
            d[("z", "isr", j)] = bool((zk.isr >> j) & 1)
            if zk.sessions[j] not in (0, 2):
                raise Unsupported("unnormalised session")
            d[("z", "sess", j)] = zk.sessions[j] == 2
            if self.elr:
                for f in ZK_ELR:
                    d[("z", f, j)] = bool((getattr(zk, f) >> j) & 1)
        per = {dst: [] for dst in range(n)}
        for m in s.msgs:
            per[m[0]].append(m[1:])
        for dst in range(n):
            if len(per[dst]) > K:
                raise Unsupported("more in-flight requests than slots")
            for k in range(K):
                ce, le, leader, isr, ver = per[dst][k] if k < len(per[dst]) else (0, 0, 0, 0, 0)
                d[("m", dst, k, "v")] = k < len(per[dst])
                d.update({("m", dst, k, "ce"): ce, ("m", dst, k, "le"): le,
                          ("m", dst, k, "leader"): leader, ("m", dst, k, "ver"): ver})
                for j in range(n):
                    d[("m", dst, k, "isr", j)] = bool((isr >> j) & 1)
        for f in G_INT:
            d[("g", f)] = len(s.exposed) if f == "elen" else getattr(s, f)
        d[("g", "oob")] = False
        if len(s.exposed) > L or len(s.epoch_leaders) > E:
            raise Unsupported("exposed prefix or leader epochs past the bound")
        for r in range(self.R):
            d[("g", "acked", r)] = bool((s.acked >> r) & 1)
            d[("g", "doomed", r)] = bool((s.doomed >> r) & 1)
        for k in range(L):
            d[("g", "exp", k)] = s.exposed[k] if k < len(s.exposed) else 0
        for j in range(n):
            d[("g", "damaged", j)] = bool((s.damaged >> j) & 1)
        for e in range(E):
            m = s.epoch_leaders[e] if e < len(s.epoch_leaders) else 0
            for j in range(n):
                d[("g", "el", e, j)] = bool((m >> j) & 1)
        if self.prods:
            self.prods.from_state(s, d, Unsupported)
        elif s.prods or s.grp:
            raise Unsupported("clients")
        if self.shadows:
            for key in [k for k in d if k[0] in ("b", "g") and k[-2] in ("lr", "fr", "exp")]:
                r = d[key]
                meta = s.writes[r] if 0 <= r < len(s.writes) else (0,) * len(self.shadow(key))
                d.update(zip(self.shadow(key), meta))
        return d

    def to_state(self, d: dict) -> State:
        """Concrete encoded state -> spec State (versions not renumbered: see canon_versions)."""
        n = self.n
        g = lambda *k: d[k]   # noqa: E731

        def mask(prefix):
            return sum(1 << j for j in range(n) if d[prefix + (j,)])

        brokers = []
        for i in range(n):
            leo = g("b", i, "leo")
            log = tuple((g("b", i, "lr", k), g("b", i, "lep", k)) for k in range(leo))
            cache = tuple((g("b", i, "ce_", k), g("b", i, "cs", k)) for k in range(g("b", i, "clen")))
            role = g("b", i, "role")
            pos = tuple(g("b", i, "pos", j) for j in range(n)) if role == LEADER else ()
            fetch = ()
            if g("b", i, "hasf"):
                recs = tuple((g("b", i, "fr", k), g("b", i, "fe", k)) for k in range(g("b", i, "f_n")))
                fetch = (g("b", i, "f_src"), g("b", i, "f_le"), g("b", i, "f_off"), recs,
                         g("b", i, "f_hw"), bool(g("b", i, "f_oor")))
            cc = ()
            if g("b", i, "hascc"):
                cc = (g("b", i, "cc_l"), g("b", i, "cc_le"), mask(("b", i, "ccisr")),
                      g("b", i, "cc_ver"), tuple(g("b", i, "cch", j) for j in range(n)))
            brokers.append(Broker(
                alive=bool(g("b", i, "alive")),
                paused=bool(self.cfg.pauses and g("b", i, "paused")), gen=2, log=log,
                flushed=g("b", i, "flushed"), hw=g("b", i, "hw"), cache=cache, le=g("b", i, "le"),
                role=role, leader=g("b", i, "leader"), ver=g("b", i, "ver"),
                isr=mask(("b", i, "isr")),
                pending=mask(("b", i, "pend")) if g("b", i, "haspend") else -1,
                pos=pos, trunc=bool(g("b", i, "trunc")), fetch=fetch, ce=g("b", i, "ce"),
                ctl=g("b", i, "ctl"), ctl_cache=cc,
                pend_acks=sum(1 << r for r in range(self.R) if g("b", i, "pa", r)),
                pend_gen=g("b", i, "pgen"), resp=g("b", i, "resp")))
        zk = Zk(controller=g("z", "controller"), ce=g("z", "ce"), leader=g("z", "leader"),
                le=g("z", "le"), isr=mask(("z", "isr")), ver=g("z", "ver"),
                sessions=tuple(2 if g("z", "sess", j) else 0 for j in range(n)),
                lsess=g("z", "lsess"),
                **{f: mask(("z", f)) if self.elr else 0 for f in ZK_ELR})
        msgs = []
        for dst in range(n):
            for k in range(self.K):
                if g("m", dst, k, "v"):
                    msgs.append((dst, g("m", dst, k, "ce"), g("m", dst, k, "le"),
                                 g("m", dst, k, "leader"), mask(("m", dst, k, "isr")),
                                 g("m", dst, k, "ver")))
        el = [sum(1 << j for j in range(n) if g("g", "el", e, j)) for e in range(self.E)]
        while len(el) > 1 and el[-1] == 0:
            el.pop()
        writes, prods = self.prods.to_state(d) if self.prods else ((), ())
        return State(
            brokers=tuple(brokers), zk=zk, msgs=tuple(sorted(set(msgs))),
            acked=sum(1 << r for r in range(self.R) if g("g", "acked", r)),
            produced=g("g", "produced"),
            exposed=tuple(g("g", "exp", k) for k in range(g("g", "elen"))),
            epoch_leaders=tuple(el), crashes=g("g", "crashes"), pauses=g("g", "pauses"),
            elections=g("g", "elections"), losses=g("g", "losses"), lossy=g("g", "lossy"),
            doomed=sum(1 << r for r in range(self.R) if g("g", "doomed", r)),
            damaged=mask(("g", "damaged")), writes=writes, prods=prods)

    def spec_action(self, inst: Inst, d: dict) -> Action:
        """The spec Action an instance stands for in concrete state d."""
        if inst.kind in ("Deliver", "Lose"):
            dst, k = inst.arg
            m = tuple(d[("m", dst, k, f)] for f in ("ce", "le", "leader"))
            isr = sum(1 << j for j in range(self.n) if d[("m", dst, k, "isr", j)])
            return Action(inst.kind, dst, (m[0], m[1], m[2], isr, d[("m", dst, k, "ver")]))
        if inst.kind in ("Crash", "ControllerReact", "ControllerAlterIsr", "ProposeShrink", "Send",
                         "ZombieElect"):
            return Action(inst.kind, inst.b, inst.arg)
        return Action(inst.kind, inst.b)
