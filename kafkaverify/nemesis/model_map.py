"""One schedule format for the real cluster and the model: fault events map onto the model's
fault actions, so a broker failure can be asked of the model and a model counterexample tried
on the broker.

Schedule event -> model action(s), in schedule order (a duration_ms undo comes at its time):
    crash N               Crash(N, 0)          power-loss N   Crash(N, 1) (unflushed suffix lost)
    restart N             Restart(N)           pause/resume   Pause(N) / Resume(N)
    session-expiry N      Pause(N), SessionExpire(N), Resume(N)   (the model expires only a
                          silent broker's session; a cut from the coordination service is that)
    partition N<->coord   as session-expiry N when it lasts past the session timeout, else nothing
    controller-failover   Crash(controller, 0), then Restart
    partition N<->M, heal, producer-restart, consumer-crash: no model action. The model's
        replication steps are atomic and freely interleaved: a follower cut from its leader is a
        follower that does not fetch, which the model already allows; client restarts do not
        change replication state.
Targets "leader:T/P" and "controller" are resolved in the model state when the action is due.

ask_model(schedule): is there an interleaving of the model's own steps (produce, fetch, truncate,
elections, control messages) with exactly these faults, in this order, that breaks an invariant?
A breadth-first search over (state, faults done), bounded by states and time.

from_model_path(actions): the fault actions of a model counterexample as a schedule, to try on
the broker (the broker's own timing chooses the interleaving there).
"""
from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field

from spec import Action, Model, make_config
from spec.state import LEADER
from traces.schedule import WORKLOAD_DEFAULTS, Event, Schedule

FAULT_KINDS = ("Crash", "Restart", "Pause", "Resume", "SessionExpire")
SESSION_TIMEOUT_MS = 3000          # the nemesis clusters' (runner.SESSION_TIMEOUT_MS)


@dataclass(frozen=True)
class Fault:
    kind: str
    target: str               # "N", "leader:..." or "controller"
    arg: int = -1

    def describe(self) -> str:
        return f"{self.kind}({self.target}{', lose unflushed' if self.arg == 1 else ''})"


@dataclass
class ModelAnswer:
    status: str                       # violation / none (exhausted) / bound
    faults: list[Fault]
    unmapped: list[str]
    invariant: str = ""
    message: str = ""
    path: list[Action] = field(default_factory=list)
    states: int = 0
    seconds: float = 0.0

    def story(self) -> list[str]:
        return [f"{i + 1:2d}. {a.describe()}" for i, a in enumerate(self.path)]


def to_faults(s: Schedule) -> tuple[list[Fault], list[str]]:
    """The schedule's events as model fault actions in time order, and what had no counterpart."""
    timed: list[tuple[int, int, Fault]] = []
    unmapped: list[str] = []
    t = 0
    for k, e in enumerate(s.events):
        t += e.after_ms

        def add(at: int, f: Fault) -> None:
            timed.append((at, len(timed), f))
        if e.fault in ("crash", "power-loss"):
            add(t, Fault("Crash", e.target, 1 if e.fault == "power-loss" else 0))
            if e.duration_ms is not None:
                add(t + e.duration_ms, Fault("Restart", e.target))
        elif e.fault == "restart":
            add(t, Fault("Restart", e.target))
        elif e.fault == "pause":
            add(t, Fault("Pause", e.target))
            if e.duration_ms is not None:
                add(t + e.duration_ms, Fault("Resume", e.target))
        elif e.fault == "resume":
            add(t, Fault("Resume", e.target))
        elif e.fault == "session-expiry" or (e.fault == "partition" and "coord" in e.between and
                                             (e.duration_ms is None or e.duration_ms > SESSION_TIMEOUT_MS)):
            b = e.target if e.fault == "session-expiry" else next(x for x in e.between if x != "coord")
            for kind in ("Pause", "SessionExpire", "Resume"):
                add(t, Fault(kind, b))
        elif e.fault == "controller-failover":
            add(t, Fault("Crash", "controller", 0))
            add(t + (e.duration_ms if e.duration_ms is not None else 1000), Fault("Restart", "controller"))
        else:
            unmapped.append(f"event {k}: {e.describe()}")
    # a restart whose target was named by role is the broker that role named when it crashed:
    # resolved in the search (the last crashed broker of that target)
    return [f for *_, f in sorted(timed)], unmapped


def _resolve(model_state, f: Fault, crashed: dict[str, int]) -> int | None:
    if f.target.isdigit():
        return int(f.target)
    if f.kind in ("Restart", "Resume") or (f.kind == "SessionExpire"):
        return crashed.get(f.target)
    if f.target == "controller":
        c = model_state.zk.controller
        return c if c >= 0 else None
    zk = model_state.zk
    if zk.leader >= 0 and model_state.brokers[zk.leader].role == LEADER:
        return zk.leader
    return None


def ask_model(s: Schedule, records: int = 2, max_states: int = 300_000, time_limit_s: float = 60.0,
              elections: int = 2, losses: int = 0, invariants: tuple[str, ...] | None = None) -> ModelAnswer:
    """A violation counts once at least one of the schedule's faults has happened (a prefix of
    the schedule, as on the broker, where a divergence may show before the last fault); with
    `invariants`, only those (e.g. the one the broker's divergence named)."""
    faults, unmapped = to_faults(s)
    crashes = sum(f.kind == "Crash" for f in faults)
    pauses = sum(f.kind == "Pause" for f in faults)
    w = s.workload
    cfg = make_config(s.generation, tuple(s.without),
                      brokers=s.brokers, records=records, crashes=crashes, pauses=pauses, elections=elections,
                      losses=losses, min_isr=min(w["min_insync"], s.brokers),
                      acks="all" if w["acks"] in ("all", -1) else "1",
                      unflushed_loss=any(f.arg == 1 for f in faults))
    m = Model(cfg)
    if invariants:
        m.invariants = tuple(i for i in m.invariants if i.name in invariants)
    need = 1 if faults else 0
    t0 = time.monotonic()
    init = m.initial()
    # node: (state, faults done, resolved role targets) ; parents for the path
    start = (init, 0, ())
    parents: dict = {start: None}
    q = deque([start])
    while q:
        node = q.popleft()
        st, k, bound = node
        crashed = dict(bound)
        moves: list[tuple[Action, tuple]] = []
        for a in m.enabled(st):
            if a.kind not in FAULT_KINDS:
                moves.append((a, bound))
        if k < len(faults):
            f = faults[k]
            b = _resolve(st, f, crashed)
            if b is not None:
                a = Action(f.kind, b, f.arg if f.kind == "Crash" else -1)
                if a in m.enabled(st):
                    nb = dict(crashed)
                    if f.kind in ("Crash", "Pause"):
                        nb[f.target] = b
                    moves.append((a, tuple(sorted(nb.items()))))
        for a, nb in moves:
            t = m.step(st, a)
            kk = k + (1 if a.kind in FAULT_KINDS else 0)
            child = (t, kk, nb)
            if child in parents:
                continue
            parents[child] = (node, a)
            v = None
            if kk >= need:
                v = m.violation(t) or (None if invariants else m.step_violation(st, t))
            if v:
                path = []
                cur = child
                while parents[cur] is not None:
                    cur, act = parents[cur]
                    path.append(act)
                return ModelAnswer("violation", faults, unmapped, v[0], v[1], path[::-1], len(parents),
                                   time.monotonic() - t0)
            q.append(child)
        if len(parents) > max_states or time.monotonic() - t0 > time_limit_s:
            return ModelAnswer("bound", faults, unmapped, states=len(parents), seconds=time.monotonic() - t0)
    return ModelAnswer("none", faults, unmapped, states=len(parents), seconds=time.monotonic() - t0)


def from_model_path(path: list[Action], generation: str, brokers: int, gap_ms: int = 500,
                    workload: dict | None = None, without: tuple[str, ...] = ()) -> Schedule:
    """The fault actions of a model counterexample as a schedule for the real cluster."""
    evs: list[Event] = []
    for a in path:
        if a.kind == "Crash":
            evs.append(Event(gap_ms, "power-loss" if a.arg == 1 else "crash", target=str(a.b)))
        elif a.kind == "Restart":
            evs.append(Event(gap_ms, "restart", target=str(a.b)))
        elif a.kind == "Pause":
            evs.append(Event(gap_ms, "pause", target=str(a.b)))
        elif a.kind == "Resume":
            evs.append(Event(gap_ms, "resume", target=str(a.b)))
        elif a.kind == "SessionExpire":
            evs.append(Event(0, "session-expiry", target=str(a.b)))
    return Schedule(generation, brokers, tuple(evs), dict(workload or WORKLOAD_DEFAULTS), without=without)
