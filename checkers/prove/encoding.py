"""The symbolic encoding of spec/'s replication transitions, for z3.

A state is a flat dict from field keys to values: Python ints/bools for a concrete state, z3
terms for a symbolic one (checkers/prove/sym.py makes one source text serve both). Logs and
leader-epoch caches are bounded sequences (a length plus fixed slots), sets of brokers are one
boolean per broker, in-flight LeaderAndIsr requests are K slots per destination.

Each action instance is (spec action kind, broker, argument) plus a guard and a successor
function. The protocol rules of spec/rules.py are re-encoded here, consulting the same fix
names from the same `Config` (spec/config.py's generation table, never copied).

What is encoded: Produce, FetchRequest, FetchResponse, Truncate, Flush, Crash (process crash,
power failure losing the unflushed suffix, and disk loss: the broker returns with an empty log
and epoch cache), Restart, ControllerElect, ControllerReact, ControllerAlterIsr,
AlterIsrResponse, ProposeShrink, Deliver, Lose, the synchronous ISR write of pre-AlterIsr
generations, pauses: Pause, Resume, SessionExpire, Reregister and ZombieElect (a paused broker
does nothing but resume, crash or lose its session; a deposed controller acts on its stale
cache), and the eligible-leader-replicas fix (KIP-966): the store's ELR, last known ELR and
unclean-shutdown registrations, elections from them, and unclean recovery's choice of the
longest log. Fields appear only when the config needs them (pauses: `paused`; ELR: the three
store sets), so formulas for other configs stay what they were. Bounds beyond the model's own:
a log holds at most `records` entries (each record is appended once), K in-flight requests per
broker and E leader epochs; a successor past those bounds sets the `oob` flag and is not taken.

With `producers`, the producers of spec/producer.py join (checkers/prove/producers.py: their
actions, state and rules); the implicit client's Produce is then off, and records in logs are
write ids, at most producers x records x (retries + 1) of them (or fewer if asked: `writes`).

Partition-state versions are kept as plain growing integers (spec renumbers them densely; only
equality and order matter, so the two agree up to an order-preserving renaming, which
`canon_versions` applies). Broker session numbers are kept normalised as spec keeps them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from checkers.prove.sym import AND, EQ, IMPLIES, MAX, MIN, NE, NOT, OR, SUM, ite, sel
from spec import Action, Config, State
from spec.state import FOLLOWER, LEADER, NONE, Broker, Zk


class Unsupported(ValueError):
    """A configuration outside what the encoding covers."""


def supported(cfg: Config) -> str | None:
    """None when the encoding covers `cfg`, else why not."""
    from checkers.prove.producers import why_unsupported
    return why_unsupported(cfg)


ENCODED_KINDS = ("AlterIsrResponse", "BumpEpoch", "CompleteProduce", "ControllerAlterIsr",
                 "ControllerElect", "ControllerReact", "Crash", "Deliver", "Disconnect",
                 "FetchRequest", "FetchResponse", "Flush", "HandleProduce", "InitProducerId", "Lose",
                 "Pause", "Produce", "ProposeShrink", "Receive", "Reregister", "Restart", "Resume",
                 "Send", "SessionExpire", "Truncate", "ZombieElect")

BROKER_INT = ("leo", "flushed", "hw", "clen", "le", "role", "leader", "ver", "f_src", "f_le",
              "f_off", "f_n", "f_hw", "ce", "ctl", "cc_l", "cc_le", "cc_ver", "pgen", "resp")
BROKER_BOOL = ("alive", "paused", "haspend", "trunc", "hasf", "f_oor", "hascc")
ZK_INT = ("controller", "ce", "leader", "le", "ver", "lsess")
ZK_ELR = ("elr", "lkelr", "unclean")     # KIP-966's store sets, one boolean per broker
G_INT = ("produced", "elen", "crashes", "pauses", "elections", "losses", "lossy")


@dataclass(frozen=True)
class Inst:
    """One action instance of the encoding."""
    kind: str
    b: int
    arg: object          # spec's argument, or a message slot (dst, k) for Deliver/Lose
    guard: Callable
    step: Callable
    via: int = -1        # the leader a follower action assumes (the guard pins it)


class Branching(list):
    """One branching of a step, [(constant, condition)] in order, as Encoding.succ_cases
    records it; `when`: literals (of earlier branchings' constants) under which it matters."""
    when: tuple = ()


class Encoding:
    def __init__(self, cfg: Config, *, slots: int = 3, epochs: int | None = None,
                 writes: int | None = None, logs: int | None = None, shadows: bool = False):
        """`writes`: with producers, the write ids (records logs hold) the encoding has slots
        for; `logs`: the slots of each log, the exposed prefix and a fetch response (default
        `writes`; fewer where a proof shows no log grows past them). `shadows`: with producers,
        every log, fetch response and exposed-prefix slot also carries its write's metadata
        (producer, record, epoch, sequence) in fields of its own, copied along with the write id
        (see `shadow`); the producers' rules read them there instead of looking the write id up
        in the write table. A proof that sets it must hold the lemma RecordShadows (they are the
        write table's values); spec's State has no such fields."""
        why = supported(cfg)
        if why:
            raise Unsupported(why)
        self.cfg = cfg
        self.n = cfg.brokers
        self.R = cfg.records
        self.L = max(1, cfg.records)
        self.prods = None
        self.shadows = bool(shadows and cfg.producers)
        self.cases = None       # while succ_cases runs: the outcome constants and definitions
        if cfg.producers:
            # records in logs are write ids (checkers/prove/producers.py owns the clients' part)
            from checkers.prove.producers import Producers, write_slots
            self.R = writes or write_slots(cfg)
            self.L = logs or self.R
        self.C = self.L + 1
        self.K = slots
        self.E = epochs if epochs is not None else 2 * cfg.crashes + cfg.elections + 4
        self.fx = cfg.fixes
        self.elr = "eligible-leader-replicas" in cfg.fixes
        if cfg.producers:
            self.prods = Producers(self)
        self.insts = self._instances()

    # --- schema ----------------------------------------------------------------------------

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
        from checkers.prove.producers import WRITE
        return [key + (f,) for f in WRITE] if self.shadows else []

    def shadow_links(self, s) -> list:
        """The clauses of RecordShadows over s (symbolic or concrete): every slot in use of a
        log, a fetch response and the exposed prefix holds a write id below the writes made,
        and its shadows are that write's metadata in the write table. Stated per write id,
        not as a lookup at the slot's: an append changes one write, and a lookup's chain over
        every write slot would be asked again for each slot (BENCHMARKS.md, issue 11)."""
        if not self.shadows:
            return []
        from checkers.prove.producers import WRITE
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

    # --- concrete conversion ---------------------------------------------------------------

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

    # --- rules (spec/rules.py, re-encoded) -------------------------------------------------

    def _b(self, s, i, f, *k):
        return s[("b", i, f) + k]

    def up(self, s, i):
        """spec's _up: running, and not paused. Without pauses in the config no broker is ever
        paused: the flag is left out, so such formulas (and induction's free pre-states) are
        exactly what they were before pauses were encoded."""
        if not self.cfg.pauses:
            return s[("b", i, "alive")]
        return AND(s[("b", i, "alive")], NOT(s[("b", i, "paused")]))

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
        s[("b", i, "clen")] = SUM(AND(k < s[("b", i, "clen")], s[("b", i, "cs", k)] < end)
                                  for k in range(self.C))

    def _floor_count(self, s, j, epoch):
        """Entries of j's (ascending) cache with epoch <= `epoch`."""
        return SUM(AND(k < s[("b", j, "clen")], s[("b", j, "ce_", k)] <= epoch) for k in range(self.C))

    def _ce(self, s, j, idx):
        return sel([s[("b", j, "ce_", k)] for k in range(self.C)], idx)

    def _cs(self, s, j, idx):
        return sel([s[("b", j, "cs", k)] for k in range(self.C)], idx)

    def end_offset_for(self, s, j, epoch):
        clen = s[("b", j, "clen")]
        nf = self._floor_count(s, j, epoch)
        return ite(AND(clen > 0, EQ(epoch, self._ce(s, j, clen - 1))), s[("b", j, "leo")],
                   ite(OR(EQ(clen, 0), epoch < self._ce(s, j, 0)), -1,
                       ite(nf < clen, self._cs(s, j, nf), -1)))

    def epoch_end_offset(self, s, j, epoch):
        clen = s[("b", j, "clen")]
        nf = self._floor_count(s, j, epoch)
        latest = AND(clen > 0, EQ(self._ce(s, j, clen - 1), epoch))
        none_higher = nf >= clen
        e = ite(latest, epoch, ite(none_higher, -1, ite(nf > 0, self._ce(s, j, nf - 1), epoch)))
        end = ite(latest, s[("b", j, "leo")], ite(none_higher, -1, self._cs(s, j, nf)))
        return e, end

    def truncation_offset(self, s, i, j):
        fx = self.fx
        hw, leo, clen = s[("b", i, "hw")], s[("b", i, "leo")], s[("b", i, "clen")]
        fallback = MIN(hw, leo)
        if "epoch-truncation" not in fx:
            return fallback
        if "epoch-end-offset" not in fx:
            end = self.end_offset_for(s, j, self._ce(s, i, clen - 1))
            return ite(EQ(clen, 0), fallback, ite(EQ(end, -1), fallback, MIN(leo, end)))
        ccl, cleo = clen, leo
        done, res = False, fallback
        for rnd in range(self.C + 1):
            active = AND(NOT(done), rnd < clen + 1)
            empty = EQ(ccl, 0)
            e_req = self._ce(s, i, ccl - 1)
            e, end = self.epoch_end_offset(s, j, e_req)
            nmine = SUM(AND(k < ccl, s[("b", i, "ce_", k)] <= e) for k in range(self.C))
            idx = nmine - 1
            own_end = ite(idx + 1 < ccl, self._cs(s, i, idx + 1), cleo)
            # the outcomes of this round, in spec's order
            r_empty = MIN(hw, cleo)
            r_undef = MIN(hw, cleo)
            r_same = MIN(end, cleo)
            r_none = MIN(MIN(hw, cleo), self._cs(s, i, 0))
            r_match = MIN(MIN(end, own_end), cleo)
            stop = OR(empty, EQ(end, -1), EQ(e, e_req), nmine == 0, EQ(self._ce(s, i, idx), e))
            val = ite(empty, r_empty, ite(EQ(end, -1), r_undef, ite(EQ(e, e_req), r_same,
                      ite(nmine == 0, r_none, r_match))))
            res = ite(AND(active, stop), val, res)
            cont = AND(active, NOT(stop))
            cleo = ite(cont, MIN(cleo, own_end), cleo)
            ccl = ite(cont, idx + 1, ccl)
            done = OR(done, AND(active, stop))
        # loop exhausted (or a cache of length 0 at entry): spec returns min(hw, leo)
        return ite(done, res, fallback)

    def fetch_epoch_accepted(self, s, i, j):
        if "fetch-epoch-fencing" not in self.fx:
            return True
        return EQ(s[("b", i, "le")], s[("b", j, "le")])

    def maximal_isr(self, s, i):
        if "maximal-isr" in self.fx:
            hp = s[("b", i, "haspend")]
            return [OR(s[("b", i, "isr", j)], AND(hp, s[("b", i, "pend", j)])) for j in range(self.n)]
        return [s[("b", i, "isr", j)] for j in range(self.n)]

    def hw_may_advance(self, s, i):
        if "min-isr-hw" not in self.fx:
            return True
        return SUM(s[("b", i, "isr", j)] for j in range(self.n)) >= self.cfg.min_isr

    def leader_hw(self, s, i):
        old = s[("b", i, "hw")]
        members = self.maximal_isr(s, i)
        hw = s[("b", i, "leo")]
        unknown = False
        for r in range(self.n):
            if r == i:
                continue
            p = s[("b", i, "pos", r)]
            unknown = OR(unknown, AND(members[r], p < 0))
            hw = ite(members[r], MIN(hw, p), hw)
        return ite(OR(NOT(self.hw_may_advance(s, i)), unknown), old, MAX(hw, old))

    def may_join_isr(self, s, j, position):
        ok = position >= s[("b", j, "hw")]
        if "isr-expand-epoch-start" in self.fx:
            clen = s[("b", j, "clen")]
            ok = AND(ok, OR(EQ(clen, 0), position >= self._cs(s, j, clen - 1)))
        return ok

    def produce_allowed(self, s, i):
        if self.cfg.acks != "all":
            return True
        return SUM(s[("b", i, "isr", j)] for j in range(self.n)) >= self.cfg.min_isr

    def control_request_accepted(self, s, i, ce, le):
        ok = le > s[("b", i, "le")]
        if "controller-epoch-fencing" in self.fx:
            ok = AND(ce >= s[("b", i, "ce")], ok)
        return ok

    # --- helpers on dicts --------------------------------------------------------------------

    def named_case(self, cond):
        """cond, named by a fresh Boolean constant and recorded as a branching of one branch
        while succ_cases records the step's outcomes (a query then fixes it true or false and
        z3 folds the terms it guards), else cond itself."""
        import z3
        if self.cases is None or not z3.is_expr(cond) or z3.is_true(cond) or z3.is_false(cond):
            return cond
        c = z3.Bool(f"case!{len(self.cases)}!0")
        self.cases.append(Branching([(c, cond)]))
        return c

    def advance_hw(self, s, i, split: bool = True):
        """Apply the HW rule on leader i, complete acks=all writes, expose reads (in place).
        `split`: whether the exposed prefix grows is an outcome of the step (named_case; a
        producer's append, already split by its log slot, passes False)."""
        L, R = self.L, self.R
        old = s[("b", i, "hw")]
        hw = self.leader_hw(s, i)
        ok = SUM(self.maximal_isr(s, i)) >= self.cfg.min_isr
        lr = [s[("b", i, "lr", k)] for k in range(L)]
        for r in range(R):
            hit = OR(*[AND(old <= k, k < hw, EQ(lr[k], r)) for k in range(L)])
            pa = s[("b", i, "pa", r)]
            s[("g", "acked", r)] = OR(s[("g", "acked", r)], AND(pa, hit, ok))
            s[("b", i, "pa", r)] = AND(pa, NOT(hit))
        elen = s[("g", "elen")]
        match = AND(*[OR(k >= elen, EQ(lr[k], s[("g", "exp", k)])) for k in range(L)])
        grow = AND(NE(hw, old), hw > elen, match)     # spec returns early when the HW stays
        if split:
            # the goals read the exposed prefix at symbolic offsets (the answers'): with the
            # growth fixed they read either the old terms or the leader's log (ReplicatedWire
            # 17-26 s per query at 4 in flight on ProposeShrink and AlterIsrResponse, merged)
            grow = self.named_case(grow)
        lr_keys = [("b", i, "lr", k) for k in range(L)]
        for k in range(L):
            x = ("g", "exp", k)
            take = AND(grow, k < hw)
            self.copy_slot(s, x, ite(take, lr[k], s[x]),
                           self.copied(s, [lr_keys[k], x], lambda v: ite(take, v[0], v[1])))
        s[("g", "elen")] = ite(grow, hw, elen)
        s[("b", i, "hw")] = hw

    def truncate_log(self, s, i, to):
        self.cache_truncate(s, i, to)
        s[("b", i, "leo")] = to
        s[("b", i, "hw")] = MIN(s[("b", i, "hw")], to)
        s[("b", i, "flushed")] = MIN(s[("b", i, "flushed")], to)

    def durable(self, s, i):
        if not self.cfg.unflushed_loss:
            s[("b", i, "flushed")] = s[("b", i, "leo")]

    def set_isr_damaged(self, s):
        for j in range(self.n):
            s[("g", "damaged", j)] = AND(s[("g", "damaged", j)], s[("z", "isr", j)])

    def send(self, s, targets, ce, le, leader, isr, ver):
        """_send_all: to each target, unless an identical request is already in flight."""
        K = self.K
        for d in range(self.n):
            dup = False
            for k in range(K):
                same = AND(s[("m", d, k, "v")], EQ(s[("m", d, k, "ce")], ce), EQ(s[("m", d, k, "le")], le),
                           EQ(s[("m", d, k, "leader")], leader), EQ(s[("m", d, k, "ver")], ver),
                           *[EQ(s[("m", d, k, "isr", j)], isr[j]) for j in range(self.n)])
                dup = OR(dup, same)
            want = AND(targets[d], NOT(dup))
            placed = False
            for k in range(K):
                put = AND(want, NOT(placed), NOT(s[("m", d, k, "v")]))
                s[("m", d, k, "v")] = OR(s[("m", d, k, "v")], put)
                for f, v in (("ce", ce), ("le", le), ("leader", leader), ("ver", ver)):
                    s[("m", d, k, f)] = ite(put, v, s[("m", d, k, f)])
                for j in range(self.n):
                    s[("m", d, k, "isr", j)] = ite(put, isr[j], s[("m", d, k, "isr", j)])
                placed = OR(placed, put)
            s[("g", "oob")] = OR(s[("g", "oob")], AND(want, NOT(placed)))

    def down(self, s, i):
        n = self.n
        s.update({("b", i, "alive"): False, ("b", i, "paused"): False, ("b", i, "role"): NONE,
                  ("b", i, "leader"): -1, ("b", i, "haspend"): False, ("b", i, "trunc"): False, ("b", i, "hasf"): False,
                  ("b", i, "ctl"): 0, ("b", i, "hascc"): False, ("b", i, "pgen"): 0,
                  ("b", i, "resp"): -1})
        for j in range(n):
            s[("b", i, "isr", j)] = False
            s[("b", i, "pend", j)] = False
            s[("b", i, "pos", j)] = -1
        self._clear_fetch(s, i)
        self._clear_cc(s, i)
        for r in range(self.R):
            s[("b", i, "pa", r)] = False
        s[("z", "sess", i)] = False
        s[("z", "controller")] = ite(EQ(s[("z", "controller")], i), -1, s[("z", "controller")])
        for k in range(self.K):
            s[("m", i, k, "v")] = False

    def _clear_fetch(self, s, i):
        s[("b", i, "hasf")] = False

    def _clear_cc(self, s, i):
        s[("b", i, "hascc")] = False

    def is_current_controller(self, s, c):
        return AND(self.up(s, c), EQ(s[("z", "controller")], c), EQ(s[("b", c, "ctl")], s[("z", "ce")]))

    def react_plan(self, s, c):
        n = self.n
        live = [s[("z", "sess", k)] for k in range(n)]
        h = [s[("b", c, "cch", k)] for k in range(n)]
        new = [AND(live[k], NE(h[k], 2)) for k in range(n)]
        bounced = [AND(new[k], NE(h[k], 0)) for k in range(n)]
        zl = s[("z", "leader")]
        lbounce = AND(zl >= 0, sel(live, zl, False), NE(s[("z", "lsess")], 2))
        bounced = [OR(bounced[k], AND(lbounce, EQ(zl, k))) for k in range(n)]
        if self.elr:
            # KAFKA-15586: a registration after an unclean shutdown counts as a bounce for
            # every controller
            bounced = [OR(bounced[k], AND(s[("z", "unclean", k)], live[k])) for k in range(n)]
        gone = [OR(NOT(live[k]), bounced[k]) for k in range(n)]
        zisr = [s[("z", "isr", k)] for k in range(n)]
        isr = [AND(zisr[k], NOT(gone[k])) for k in range(n)]
        empty = NOT(OR(*isr))
        elr = lkelr = None
        if self.elr:
            zelr = [s[("z", "elr", k)] for k in range(n)]
            elr = self.elr_after_isr_change(zisr, isr, zelr, bounced)
            # the last eligible replicas went through unclean shutdowns: remember them
            to_lk = AND(OR(*zelr), NOT(OR(*elr)), empty)
            lkelr = [ite(to_lk, zelr[k], s[("z", "lkelr", k)]) for k in range(n)]
            # the ISR keeps its last member only while nobody else is eligible
            empty = AND(empty, NOT(OR(*elr)), NOT(OR(*lkelr)))
        keep_leader = AND(zl >= 0, sel(zisr, zl, False))
        isr = [ite(empty, ite(keep_leader, AND(zisr[k], EQ(zl, k)), zisr[k]), isr[k]) for k in range(n)]
        need = OR(zl < 0, sel(gone, zl, False))
        cands = [AND(isr[k], live[k]) for k in range(n)]
        if self.elr:
            # rules.leader_candidates: the ISR, else the ELR, else the last known ELR
            any_isr = OR(*cands)
            from_elr = [AND(elr[k], live[k]) for k in range(n)]
            any_elr = OR(*from_elr)
            from_lk = [AND(lkelr[k], live[k]) for k in range(n)]
            cands = [ite(any_isr, cands[k], ite(any_elr, from_elr[k], from_lk[k])) for k in range(n)]
        if self.cfg.unclean:
            anyc = OR(*cands)
            cands = [OR(cands[k], AND(NOT(anyc), live[k])) for k in range(n)]
        if self.elr:
            only_lk = AND(OR(*cands), NOT(OR(*[AND(cands[k], isr[k]) for k in range(n)])),
                          NOT(OR(*[AND(cands[k], elr[k]) for k in range(n)])),
                          OR(*[AND(cands[k], lkelr[k]) for k in range(n)]))
            best = self.unclean_recovery_choice(s, cands)
            cands = [ite(only_lk, best[k], cands[k]) for k in range(n)]
        return new, isr, need, cands, live, elr, lkelr

    def elr_after_isr_change(self, old_isr, new_isr, elr, unclean_shutdown):
        """rules.elr_after_isr_change (KIP-966): replicas leaving the ISR while it is below min
        ISR join the ELR; never an unclean-shutdown replica nor an ISR member; empty at or
        above min ISR."""
        n = self.n
        below = SUM(new_isr) < self.cfg.min_isr
        return [AND(below, OR(elr[k], AND(old_isr[k], NOT(new_isr[k]))), NOT(unclean_shutdown[k]),
                    NOT(new_isr[k])) for k in range(n)]

    def unclean_recovery_choice(self, s, cands):
        """rules.unclean_recovery_choice: the candidates with the largest (last cached leader
        epoch or -1, log end offset)."""
        n, C = self.n, self.C
        key = []
        for k in range(n):
            clen = s[("b", k, "clen")]
            last = ite(clen > 0, sel([s[("b", k, "ce_", q)] for q in range(C)], clen - 1), -1)
            key.append((last, s[("b", k, "leo")]))

        def above(a, b):
            return OR(a[0] > b[0], AND(EQ(a[0], b[0]), a[1] > b[1]))
        return [AND(cands[k], *[NOT(AND(cands[m], above(key[m], key[k])))
                                for m in range(n) if m != k]) for k in range(n)]

    # --- action instances ------------------------------------------------------------------

    def _instances(self) -> list[Inst]:
        n, K = self.n, self.K
        out: list[Inst] = []
        for i in range(n):
            out.append(Inst("Restart", i, -1, self._g_restart, self._s_restart))
            out.append(Inst("Crash", i, 0, self._g_crash, self._s_crash))
            if self.cfg.unflushed_loss:
                out.append(Inst("Crash", i, 1, self._g_crash, self._s_crash))
                out.append(Inst("Flush", i, -1, self._g_flush, self._s_flush))
            if self.cfg.disk_loss:
                out.append(Inst("Crash", i, 2, self._g_crash, self._s_crash))
            out.append(Inst("AlterIsrResponse", i, -1, self._g_air, self._s_air))
            if not self.prods:      # with producers the appends are theirs
                out.append(Inst("Produce", i, -1, self._g_produce, self._s_produce))
            for f in range(n):
                if f != i:
                    out.append(Inst("ProposeShrink", i, f, self._g_shrink, self._s_shrink))
            for j in range(n):
                if j != i:
                    out.append(Inst("Truncate", i, -1, self._g_truncate, self._s_truncate, via=j))
                    out.append(Inst("FetchRequest", i, -1, self._g_fetch, self._s_fetch, via=j))
            out.append(Inst("FetchResponse", i, -1, self._g_fresp, self._s_fresp))
            out.append(Inst("ControllerElect", i, -1, self._g_celect, self._s_celect))
            for x in range(-1, n):
                out.append(Inst("ControllerReact", i, x, self._g_react, self._s_react))
            for l in range(n):
                out.append(Inst("ControllerAlterIsr", i, l, self._g_calter, self._s_calter))
            if self.cfg.pauses:
                out.append(Inst("Pause", i, -1, self._g_pause, self._s_pause))
                out.append(Inst("Resume", i, -1, self._g_resume, self._s_resume))
                out.append(Inst("SessionExpire", i, -1, self._g_expire, self._s_expire))
                out.append(Inst("Reregister", i, -1, self._g_reregister, self._s_reregister))
                for x in range(n):
                    out.append(Inst("ZombieElect", i, x, self._g_zombie, self._s_zombie))
        for d in range(n):
            for k in range(K):
                out.append(Inst("Deliver", d, (d, k), self._g_deliver, self._s_deliver))
                out.append(Inst("Lose", d, (d, k), self._g_lose, self._s_lose))
        if self.prods:
            out += self.prods.instances(Inst)
        return out

    def guard(self, inst: Inst, s: dict):
        return inst.guard(s, inst)

    def succ(self, inst: Inst, s: dict) -> dict:
        t = dict(s)
        inst.step(t, inst)
        return t

    def succ_cases(self, inst: Inst, s: dict) -> tuple[dict, list]:
        """The successor with each outcome of the step (a producer rule's branches: an error,
        a duplicate, an append, ...) named by a fresh Boolean constant, and per branching its
        [(constant, definition)] in order (the first that holds is taken). The successor
        equals succ's where every constant equals its definition; a query may then fix the
        outcome of each branching and let z3 fold the rest away."""
        self.cases = []
        try:
            t = self.succ(inst, s)
            return t, self.cases
        finally:
            self.cases = None

    # Restart / Crash / Flush

    def _g_restart(self, s, a):
        return NOT(s[("b", a.b, "alive")])

    def _s_restart(self, s, a):
        i, n = a.b, self.n
        s[("b", i, "alive")] = True
        s[("b", i, "le")] = -1
        s[("b", i, "role")] = NONE
        s[("b", i, "ce")] = s[("z", "ce")]
        if self.elr:    # every restart follows an unclean shutdown (KAFKA-15586)
            s[("z", "unclean", i)] = True
        self.new_session(s, i)

    def new_session(self, s, i):
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

    def _g_crash(self, s, a):
        g = AND(s[("b", a.b, "alive")], s[("g", "crashes")] < self.cfg.crashes)
        if a.arg == 1:
            g = AND(g, s[("b", a.b, "flushed")] < s[("b", a.b, "leo")])
        if a.arg == 2:      # a disk with a log or an epoch cache on it
            g = AND(g, OR(s[("b", a.b, "leo")] > 0, s[("b", a.b, "clen")] > 0))
        return g

    def _s_crash(self, s, a):
        i, L = a.b, self.L
        old_leo = s[("b", i, "leo")]
        # a lost disk: the log and the whole epoch cache go (every entry starts at or past 0)
        new_len = s[("b", i, "flushed")] if a.arg == 1 else 0 if a.arg == 2 else old_leo
        lost = [AND(new_len <= k, k < old_leo) for k in range(L)]
        self.truncate_log(s, i, new_len)    # also drops cache entries starting at the log end
        self.down(s, i)
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

    # Pauses (spec/model.py _pause, _resume, _session_expire, _reregister, _zombie_elect): a
    # paused broker only resumes, crashes or loses its session; once running again it notices
    # the lost session and registers anew; a deposed controller acts on its stale cache.

    def _g_pause(self, s, a):
        i = a.b
        return AND(s[("b", i, "alive")], NOT(s[("b", i, "paused")]),
                   s[("g", "pauses")] < self.cfg.pauses)

    def _s_pause(self, s, a):
        s[("b", a.b, "paused")] = True
        s[("g", "pauses")] = s[("g", "pauses")] + 1

    def _g_resume(self, s, a):
        return AND(s[("b", a.b, "alive")], s[("b", a.b, "paused")])

    def _s_resume(self, s, a):
        # queued /controller watch notifications are processed on resume
        i = a.b
        s[("b", i, "paused")] = False
        s[("b", i, "ce")] = MAX(s[("b", i, "ce")], s[("z", "ce")])

    def _g_expire(self, s, a):
        i = a.b
        return AND(s[("b", i, "alive")], s[("b", i, "paused")], s[("z", "sess", i)])

    def _s_expire(self, s, a):
        i = a.b
        s[("z", "sess", i)] = False
        s[("z", "controller")] = ite(EQ(s[("z", "controller")], i), -1, s[("z", "controller")])

    def _g_reregister(self, s, a):
        return AND(self.up(s, a.b), NOT(s[("z", "sess", a.b)]))

    def _s_reregister(self, s, a):
        i = a.b
        s[("b", i, "ctl")] = 0
        self._clear_cc(s, i)
        s[("b", i, "ce")] = MAX(s[("b", i, "ce")], s[("z", "ce")])
        self.new_session(s, i)

    def _g_zombie(self, s, a):
        # spec: not the current controller, and a controller epoch older than the store's
        # (which already rules out being the current controller)
        i, x = a.b, a.arg
        ctl = s[("b", i, "ctl")]
        return AND(self.up(s, i), NE(ctl, 0), ctl < s[("z", "ce")], s[("b", i, "hascc")],
                   s[("g", "elections")] < self.cfg.elections, s[("b", i, "ccisr", x)],
                   NE(s[("b", i, "cc_l")], x))

    def _s_zombie(self, s, a):
        # its store write fails (the session is gone), but the requests go to every broker
        i, x, n = a.b, a.arg, self.n
        le = s[("b", i, "cc_le")] + 1
        isr = [s[("b", i, "ccisr", j)] for j in range(n)]
        self.send(s, [True] * n, s[("b", i, "ctl")], le, x, isr, s[("b", i, "cc_ver")])
        s[("b", i, "cc_l")] = x
        s[("b", i, "cc_le")] = le
        s[("g", "elections")] = s[("g", "elections")] + 1

    def _g_flush(self, s, a):
        return AND(self.up(s, a.b), s[("b", a.b, "flushed")] < s[("b", a.b, "leo")])

    def _s_flush(self, s, a):
        s[("b", a.b, "flushed")] = s[("b", a.b, "leo")]

    # leader actions

    def _g_air(self, s, a):
        return AND(self.up(s, a.b), EQ(s[("b", a.b, "role")], LEADER), NE(s[("b", a.b, "resp")], -1))

    def _s_air(self, s, a):
        i = a.b
        self._apply_response(s, i)

    def _apply_response(self, s, i):
        ok = s[("b", i, "resp")] >= 0
        for j in range(self.n):
            s[("b", i, "isr", j)] = ite(ok, s[("b", i, "pend", j)], s[("b", i, "isr", j)])
            s[("b", i, "pend", j)] = False
        s[("b", i, "ver")] = ite(ok, s[("b", i, "resp")], s[("b", i, "ver")])
        s[("b", i, "haspend")] = False
        s[("b", i, "pgen")] = 0
        s[("b", i, "resp")] = -1
        self.advance_hw(s, i)

    def _g_produce(self, s, a):
        i = a.b
        return AND(self.up(s, i), EQ(s[("b", i, "role")], LEADER),
                   s[("g", "produced")] < self.cfg.records, self.produce_allowed(s, i))

    def _s_produce(self, s, a):
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

    def _g_shrink(self, s, a):
        i, f = a.b, a.arg
        return AND(self.up(s, i), EQ(s[("b", i, "role")], LEADER), NOT(s[("b", i, "haspend")]),
                   s[("b", i, "isr", f)], s[("b", i, "pos", f)] < s[("b", i, "leo")])

    def _s_shrink(self, s, a):
        i, f = a.b, a.arg
        s[("b", i, "haspend")] = True
        for j in range(self.n):
            s[("b", i, "pend", j)] = AND(s[("b", i, "isr", j)], j != f)
        s[("b", i, "pgen")] = 0
        self._proposed(s, i)

    def _proposed(self, s, li):
        if not self.cfg.alter_isr:
            hp = s[("b", li, "haspend")]
            t = dict(s)
            self._commit(t, li)
            self._apply_response(t, li)
            for k in t:
                if t[k] is not s[k]:
                    s[k] = ite(hp, t[k], s[k])
        self.advance_hw(s, li)

    def _commit(self, s, li):
        n = self.n
        eligible = True
        if "isr-broker-epoch" in self.fx:
            for k in range(n):
                added = AND(s[("b", li, "pend", k)], NOT(s[("b", li, "isr", k)]))
                eligible = AND(eligible, OR(NOT(added), AND(s[("z", "sess", k)],
                                                            EQ(s[("b", li, "pgen")], 2))))
        ok = AND(EQ(s[("z", "leader")], li), EQ(s[("b", li, "le")], s[("z", "le")]),
                 EQ(s[("b", li, "ver")], s[("z", "ver")]), eligible)
        nver = s[("z", "ver")] + 1
        if self.elr:
            zisr = [s[("z", "isr", j)] for j in range(n)]
            pend = [s[("b", li, "pend", j)] for j in range(n)]
            elr = self.elr_after_isr_change(zisr, pend, [s[("z", "elr", j)] for j in range(n)],
                                            [False] * n)
            for j in range(n):
                s[("z", "elr", j)] = ite(ok, elr[j], s[("z", "elr", j)])
        for j in range(n):
            s[("z", "isr", j)] = ite(ok, s[("b", li, "pend", j)], s[("z", "isr", j)])
        s[("z", "ver")] = ite(ok, nver, s[("z", "ver")])
        self.set_isr_damaged(s)
        s[("b", li, "resp")] = ite(ok, nver, -2)

    # follower actions (via = the leader the follower follows, pinned by the guard)

    def _serving(self, s, j):
        return AND(self.up(s, j), EQ(s[("b", j, "role")], LEADER))

    def _g_truncate(self, s, a):
        i, j = a.b, a.via
        g = AND(self.up(s, i), EQ(s[("b", i, "role")], FOLLOWER), EQ(s[("b", i, "leader")], j),
                s[("b", i, "trunc")])
        if "epoch-truncation" in self.fx:
            g = AND(g, self._serving(s, j), self.fetch_epoch_accepted(s, i, j))
        return g

    def _s_truncate(self, s, a):
        i, j = a.b, a.via
        to = MIN(self.truncation_offset(s, i, j), s[("b", i, "leo")])
        self.truncate_log(s, i, to)
        s[("b", i, "trunc")] = False

    def _g_fetch(self, s, a):
        i, j = a.b, a.via
        noop = AND(EQ(s[("b", i, "leo")], s[("b", j, "leo")]), EQ(s[("b", i, "hw")], s[("b", j, "hw")]),
                   EQ(s[("b", j, "pos", i)], s[("b", i, "leo")]),
                   OR(s[("b", j, "isr", i)], s[("b", j, "haspend")],
                      NOT(self.may_join_isr(s, j, s[("b", i, "leo")]))))
        return AND(self.up(s, i), EQ(s[("b", i, "role")], FOLLOWER), EQ(s[("b", i, "leader")], j),
                   NOT(s[("b", i, "trunc")]), NOT(s[("b", i, "hasf")]), self._serving(s, j),
                   self.fetch_epoch_accepted(s, i, j), NOT(noop))

    def _s_fetch(self, s, a):
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
            self._proposed(t, j)
            for k in t:
                if t[k] is not s[k]:
                    s[k] = ite(oor, s[k], t[k])
        else:
            t = dict(s)
            self.advance_hw(t, j)
            for k in t:
                if t[k] is not s[k]:
                    s[k] = ite(oor, s[k], t[k])

    def _g_fresp(self, s, a):
        return AND(self.up(s, a.b), s[("b", a.b, "hasf")])

    def _s_fresp(self, s, a):
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
            self.down(t_halt, i)
        which_oor = AND(applies, oor)
        which_app = AND(applies, NOT(oor), EQ(off, leo))
        keys = set(t_oor) | set(t_app) | set(t_halt)
        for key in keys:
            a_oor = t_halt[key] if halts else t_oor[key]
            v = ite(which_oor, a_oor, ite(which_app, t_app[key], s[key]))
            if v is not s[key]:
                s[key] = v

    # controller actions

    def _g_celect(self, s, a):
        i = a.b
        return AND(self.up(s, i), s[("z", "controller")] < 0, s[("z", "sess", i)], EQ(s[("b", i, "ctl")], 0))

    def _s_celect(self, s, a):
        i, n = a.b, self.n
        ce = s[("z", "ce")] + 1
        s[("z", "controller")] = i
        s[("z", "ce")] = ce
        for k in range(n):
            s[("b", k, "ce")] = ite(self.up(s, k), MAX(s[("b", k, "ce")], ce), s[("b", k, "ce")])
        s[("b", i, "ctl")] = ce
        s[("b", i, "hascc")] = True
        s[("b", i, "cc_l")] = s[("z", "leader")]
        s[("b", i, "cc_le")] = s[("z", "le")]
        s[("b", i, "cc_ver")] = s[("z", "ver")]
        for j in range(n):
            s[("b", i, "ccisr", j)] = s[("z", "isr", j)]
            s[("b", i, "cch", j)] = 0

    def _g_react(self, s, a):
        c, x, n = a.b, a.arg, self.n
        new, isr, need, cands, _, elr, lkelr = self.react_plan(s, c)
        changed = OR(*[NE(isr[k], s[("z", "isr", k)]) for k in range(n)])
        if self.elr:
            changed = OR(changed, *[NE(elr[k], s[("z", "elr", k)]) for k in range(n)],
                         *[NE(lkelr[k], s[("z", "lkelr", k)]) for k in range(n)],
                         *[s[("z", "unclean", k)] for k in range(n)])
        anynew = OR(*new)
        elect_ok = AND(OR(*cands), s[("g", "elections")] < self.cfg.elections)
        zl = s[("z", "leader")]
        if x >= 0:
            opt = OR(AND(NOT(need), OR(anynew, changed), EQ(zl, x)), AND(need, elect_ok, cands[x]))
        else:
            opt = AND(need, NOT(elect_ok), OR(zl >= 0, anynew, changed))
        return AND(self.is_current_controller(s, c), opt)

    def _s_react(self, s, a):
        c, x, n = a.b, a.arg, self.n
        new, isr, need, _, live, elr, lkelr = self.react_plan(s, c)
        if x >= 0:
            s[("g", "elections")] = ite(need, s[("g", "elections")] + 1, s[("g", "elections")])
            single = AND(need, NOT(isr[x]))
            isr = [ite(single, k == x, isr[k]) for k in range(n)]
            if self.elr:    # an election takes the leader out of the ELR and ends the last known
                elr = [AND(elr[k], NOT(AND(need, isr[k]))) for k in range(n)]
                lkelr = [AND(lkelr[k], NOT(need)) for k in range(n)]
        changed = OR(need, *[NE(isr[k], s[("z", "isr", k)]) for k in range(n)])
        if self.elr:
            changed = OR(changed, *[NE(elr[k], s[("z", "elr", k)]) for k in range(n)],
                         *[NE(lkelr[k], s[("z", "lkelr", k)]) for k in range(n)])
            for k in range(n):      # unchanged, these equal the store's sets already
                s[("z", "elr", k)], s[("z", "lkelr", k)] = elr[k], lkelr[k]
                s[("z", "unclean", k)] = False
        le = ite(changed, s[("z", "le")] + 1, s[("z", "le")])
        ver = ite(changed, s[("z", "ver")] + 1, s[("z", "ver")])
        leader = ite(changed, x, s[("z", "leader")])
        zisr = [ite(changed, isr[k], s[("z", "isr", k)]) for k in range(n)]
        s[("z", "lsess")] = ite(changed, 2 if x >= 0 else 0, s[("z", "lsess")])
        s[("z", "le")], s[("z", "ver")], s[("z", "leader")] = le, ver, leader
        for k in range(n):
            s[("z", "isr", k)] = zisr[k]
        targets = [ite(changed, live[k], new[k]) for k in range(n)]
        self.send(s, targets, s[("z", "ce")], le, leader, zisr, ver)
        s[("b", c, "cc_l")], s[("b", c, "cc_le")], s[("b", c, "cc_ver")] = leader, le, ver
        for k in range(n):
            s[("b", c, "ccisr", k)] = zisr[k]
            s[("b", c, "cch", k)] = ite(live[k], 2, 0)
        self.set_isr_damaged(s)

    def _g_calter(self, s, a):
        c, l = a.b, a.arg
        return AND(self.is_current_controller(s, c), s[("b", l, "alive")], s[("b", l, "haspend")],
                   EQ(s[("b", l, "resp")], -1))

    def _s_calter(self, s, a):
        c, l = a.b, a.arg
        self._commit(s, l)
        s[("b", c, "cc_l")], s[("b", c, "cc_le")] = s[("z", "leader")], s[("z", "le")]
        s[("b", c, "cc_ver")] = s[("z", "ver")]
        for k in range(self.n):
            s[("b", c, "ccisr", k)] = s[("z", "isr", k)]

    # control messages

    def _g_deliver(self, s, a):
        d, k = a.arg
        return AND(s[("m", d, k, "v")], self.up(s, d))

    def _g_lose(self, s, a):
        d, k = a.arg
        return AND(s[("m", d, k, "v")], s[("g", "losses")] < self.cfg.losses)

    def _s_lose(self, s, a):
        d, k = a.arg
        s[("m", d, k, "v")] = False
        s[("g", "losses")] = s[("g", "losses")] + 1

    def _s_deliver(self, s, a):
        i, k = a.arg
        n, C = self.n, self.C
        ce, le, leader, ver = (s[("m", i, k, f)] for f in ("ce", "le", "leader", "ver"))
        misr = [s[("m", i, k, "isr", j)] for j in range(n)]
        s[("m", i, k, "v")] = False
        acc = self.control_request_accepted(s, i, ce, le)
        me = EQ(leader, i)
        # become leader
        tl = dict(s)
        self.cache_assign(tl, i, le, s[("b", i, "leo")])
        tl.update({("b", i, "role"): LEADER, ("b", i, "leader"): i, ("b", i, "trunc"): False,
                   ("b", i, "hasf"): False})
        for j in range(n):
            tl[("b", i, "isr", j)] = misr[j]
            tl[("b", i, "pos", j)] = s[("b", i, "leo")] if j == i else -1
        for e in range(self.E):
            tl[("g", "el", e, i)] = OR(s[("g", "el", e, i)], EQ(le, e))
        tl[("g", "oob")] = OR(tl[("g", "oob")], le >= self.E)
        # become follower
        tf = dict(s)
        trunc = OR(NE(s[("b", i, "role")], FOLLOWER), NE(s[("b", i, "leader")], leader), s[("b", i, "trunc")])
        if "truncate-on-epoch-change" in self.fx:
            trunc = OR(trunc, NE(le, s[("b", i, "le")]))
        tf.update({("b", i, "role"): FOLLOWER, ("b", i, "leader"): leader, ("b", i, "trunc"): trunc,
                   ("b", i, "hasf"): AND(s[("b", i, "hasf")], NOT(trunc))})
        for j in range(n):
            tf[("b", i, "isr", j)] = False
            tf[("b", i, "pos", j)] = -1
        common = {("b", i, "le"): le, ("b", i, "ce"): MAX(s[("b", i, "ce")], ce), ("b", i, "ver"): ver,
                  ("b", i, "haspend"): False, ("b", i, "pgen"): 0, ("b", i, "resp"): -1}
        for j in range(n):
            common[("b", i, "pend", j)] = False
        for r in range(self.R):
            common[("b", i, "pa", r)] = False
        for t in (tl, tf):
            t.update(common)
        for key in set(tl) | set(tf):
            v = ite(acc, ite(me, tl[key], tf[key]), s[key])
            if v is not s[key]:
                s[key] = v
