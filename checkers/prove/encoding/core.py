"""The encoding itself: `Encoding(cfg)` composes the areas (one module each, see the package's
docstring) over one configuration, lists the action instances with their guards and successor
functions, and steps them (`guard`, `succ`, `succ_cases`)."""
from __future__ import annotations

from checkers.prove.encoding.controller import ControllerAndLeaderAndIsr
from checkers.prove.encoding.faults import CrashesAndPauses
from checkers.prove.encoding.fetch import FetchRequestsAndResponses
from checkers.prove.encoding.high_watermark import HighWatermark
from checkers.prove.encoding.isr import IsrProposals
from checkers.prove.encoding.layout import StateLayout, Unsupported
from checkers.prove.encoding.logs import LogsAndEpochCaches
from checkers.prove.instances import Branching, Inst
from checkers.prove.producers import Producers, why_unsupported, write_slots
from spec import Config


def supported(cfg: Config) -> str | None:
    """None when the encoding covers `cfg`, else why not."""
    return why_unsupported(cfg)


ENCODED_KINDS = ("AlterIsrResponse", "BumpEpoch", "CompleteProduce", "ControllerAlterIsr",
                 "ControllerElect", "ControllerReact", "Crash", "Deliver", "Disconnect",
                 "FetchRequest", "FetchResponse", "Flush", "HandleProduce", "InitProducerId", "Lose",
                 "Pause", "Produce", "ProposeShrink", "Receive", "Reregister", "Restart", "Resume",
                 "Send", "SessionExpire", "Truncate", "ZombieElect")


class Encoding(StateLayout, CrashesAndPauses, LogsAndEpochCaches, HighWatermark,
               FetchRequestsAndResponses, IsrProposals, ControllerAndLeaderAndIsr):
    """spec/'s transitions over one configuration, for z3. The areas are mixins that share the
    bounds set here (n brokers, L log slots, C epoch-cache slots, R records or write ids, K
    request slots per broker, E leader epochs) and call each other's rules through self."""

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
            self.R = writes or write_slots(cfg)
            self.L = logs or self.R
        self.C = self.L + 1
        self.K = slots
        self.E = epochs if epochs is not None else 2 * cfg.crashes + cfg.elections + 4
        self.fx = cfg.fixes
        self.elr = "eligible-leader-replicas" in cfg.fixes
        if cfg.producers:
            self.prods = Producers(self)
        self.insts = self._action_instances()

    def named_case(self, cond):
        """cond, named by a fresh Boolean constant and recorded as a branching of one branch
        while succ_cases records the step's outcomes (a query then fixes it true or false and
        z3 folds the terms it guards), else cond itself."""
        import z3      # lazily: building formulas needs z3 only once a query is asked
        if self.cases is None or not z3.is_expr(cond) or z3.is_true(cond) or z3.is_false(cond):
            return cond
        c = z3.Bool(f"case!{len(self.cases)}!0")
        self.cases.append(Branching([(c, cond)]))
        return c

    def _action_instances(self) -> list[Inst]:
        n, K = self.n, self.K
        out: list[Inst] = []
        for i in range(n):
            out.append(Inst("Restart", i, -1, self.guard_restart, self.apply_restart))
            out.append(Inst("Crash", i, 0, self.guard_crash, self.apply_crash))
            if self.cfg.unflushed_loss:
                out.append(Inst("Crash", i, 1, self.guard_crash, self.apply_crash))
                out.append(Inst("Flush", i, -1, self.guard_flush, self.apply_flush))
            if self.cfg.disk_loss:
                out.append(Inst("Crash", i, 2, self.guard_crash, self.apply_crash))
            out.append(Inst("AlterIsrResponse", i, -1,
                            self.guard_alter_isr_response, self.apply_alter_isr_response))
            if not self.prods:      # with producers the appends are theirs
                out.append(Inst("Produce", i, -1, self.guard_produce, self.apply_produce))
            for f in range(n):
                if f != i:
                    out.append(Inst("ProposeShrink", i, f,
                                    self.guard_propose_shrink, self.apply_propose_shrink))
            for j in range(n):
                if j != i:
                    out.append(Inst("Truncate", i, -1,
                                    self.guard_truncate, self.apply_truncate, via=j))
                    out.append(Inst("FetchRequest", i, -1,
                                    self.guard_fetch_request, self.apply_fetch_request, via=j))
            out.append(Inst("FetchResponse", i, -1,
                            self.guard_fetch_response, self.apply_fetch_response))
            out.append(Inst("ControllerElect", i, -1,
                            self.guard_controller_elect, self.apply_controller_elect))
            for x in range(-1, n):
                out.append(Inst("ControllerReact", i, x,
                                self.guard_controller_react, self.apply_controller_react))
            for l in range(n):
                out.append(Inst("ControllerAlterIsr", i, l,
                                self.guard_controller_alter_isr, self.apply_controller_alter_isr))
            if self.cfg.pauses:
                out.append(Inst("Pause", i, -1, self.guard_pause, self.apply_pause))
                out.append(Inst("Resume", i, -1, self.guard_resume, self.apply_resume))
                out.append(Inst("SessionExpire", i, -1,
                                self.guard_session_expire, self.apply_session_expire))
                out.append(Inst("Reregister", i, -1, self.guard_reregister, self.apply_reregister))
                for x in range(n):
                    out.append(Inst("ZombieElect", i, x,
                                    self.guard_zombie_elect, self.apply_zombie_elect))
        for d in range(n):
            for k in range(K):
                out.append(Inst("Deliver", d, (d, k), self.guard_deliver, self.apply_deliver))
                out.append(Inst("Lose", d, (d, k), self.guard_lose, self.apply_lose))
        if self.prods:
            out += self.prods.instances()
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
