"""Progress properties: bounded liveness in a lasso-free form, checked like the invariants.

A safety invariant says nothing bad is ever reached; a model whose high watermark simply stops
moving violates none. A progress property here says: in every reachable state where its
condition holds, some continuation of at most K steps with no further fault (no crash, pause,
session expiry, lost message, zombie controller, and no new client request) reaches its goal.
It is a predicate of one state that looks ahead along bounded fault-free paths (AG(P -> EF<=K Q),
K fixed and small), so the explorer, the random walks and the portfolio check it wherever they
check invariants, and a counterexample is an ordinary path to a state where P holds and no such
continuation exists. The look-ahead runs only the actions that make the progress (the members'
fetches, the controller's election), breadth-first, with no state repeated.

- HwProgress: a leader with followers whose committed ISR has min.insync.replicas members,
  every one of which (and every member of its maximal ISR) is up, follows it in its epoch and
  holds its whole log, advances its HW to its log end within 2 fetch steps per follower (finish
  an in-flight response, send the fetch that reports the position).
- ElectionProgress: a partition with no live leader and a live, running ISR member the
  controller may elect (registered, not bounced since the controller saw it, not damaged) gets a
  live leader within 2 controller steps (a controller is elected if there is none; it elects),
  while elections are left in the bounds.
"""
from __future__ import annotations

from spec import rules
from spec.config import Config
from spec.model import enabled, step
from spec.state import FOLLOWER, LEADER, State, bits

HW_KINDS = frozenset({"FetchRequest", "FetchResponse"})
ELECTION_KINDS = frozenset({"ControllerElect", "ControllerReact"})


def _reaches(cfg: Config, s: State, kinds: frozenset, actors: int, depth: int, goal) -> bool:
    """Some path of at most `depth` actions of `kinds` by brokers in the mask `actors` (all if
    -1) leads from s to a state where goal(state) holds."""
    if goal(s):
        return True
    level, seen = [s], {s}
    for _ in range(depth):
        nxt = []
        for u in level:
            for a in enabled(cfg, u):
                if a.kind not in kinds or not (actors >> a.b) & 1:
                    continue
                t = step(cfg, u, a)
                if t in seen:
                    continue
                if goal(t):
                    return True
                seen.add(t)
                nxt.append(t)
        if not nxt:
            return False
        level = nxt
    return False


def _caught_up_leader(cfg: Config, s: State):
    """(leader, its followers' mask) where HwProgress's condition holds, else None."""
    zk = s.zk
    i = zk.leader
    if i < 0:
        return None
    ld = s.brokers[i]
    if not (ld.alive and not ld.paused and ld.role == LEADER and ld.le == zk.le and ld.hw < ld.leo):
        return None
    if rules.popcount(ld.isr) < cfg.min_isr:
        return None
    members = (rules.hw_members(ld, cfg.fixes) | ld.isr) & ~(1 << i)
    if not members:
        # A leader alone in its ISR is left out: the model applies the HW rule on a fetch, an
        # append or an ISR change, not on its election as Kafka's Partition.makeLeader does
        # (and the broker's Partition.become_leader), so such a leader's HW waits for the next
        # append. A gap of the model (and of the z3 encoding, which mirrors it) this property
        # found; with followers, their fetches are the progress it checks.
        return None
    for m in bits(members):
        f = s.brokers[m]
        if not (f.alive and not f.paused and f.role == FOLLOWER and f.leader == i and f.le == ld.le
                and not f.trunc and f.log == ld.log):
            return None
    return i, members


def hw_progress(cfg: Config, s: State) -> str | None:
    found = _caught_up_leader(cfg, s)
    if found is None:
        return None
    i, members = found
    leo = s.brokers[i].leo
    k = 2 * rules.popcount(members)
    if _reaches(cfg, s, HW_KINDS, members | (1 << i), k, lambda t: t.brokers[i].hw >= leo):
        return None
    return (f"leader b{i} (epoch {s.brokers[i].le}) has ISR {_mask(s.brokers[i].isr)} of at least "
            f"min.insync.replicas={cfg.min_isr}, every member holding its log to offset {leo}, but its "
            f"high watermark {s.brokers[i].hw} does not reach {leo} within {k} fetch steps")


def _electable(cfg: Config, s: State) -> list[int]:
    """Live, running ISR members a controller may elect: registered, not registered anew since
    the current controller handled them (a bounced broker leaves the ISR first), not flagged
    as back from an unclean shutdown (KIP-966), not damaged by a data loss."""
    zk = s.zk
    handled = ()
    if zk.controller >= 0:
        c = s.brokers[zk.controller]
        if not (c.alive and not c.paused and c.ctl == zk.ce and c.ctl_cache):
            return []
        handled = c.ctl_cache[4]
    else:
        # a controller must be electable: a registered running broker that is not a deposed one
        if not any(b.alive and not b.paused and zk.sessions[k] and not b.ctl for k, b in enumerate(s.brokers)):
            return []
    out = []
    for e in bits(zk.isr):
        b = s.brokers[e]
        sess = zk.sessions[e]
        if not (b.alive and not b.paused and sess):
            continue
        if handled and handled[e] and handled[e] != sess:
            continue
        if (zk.unclean >> e) & 1 or (s.damaged >> e) & 1:
            continue
        out.append(e)
    return out


def election_progress(cfg: Config, s: State) -> str | None:
    zk = s.zk
    if zk.leader >= 0 and zk.sessions[zk.leader]:
        return None
    if s.elections >= cfg.elections:
        return None
    cands = _electable(cfg, s)
    if not cands:
        return None

    def led(t: State) -> bool:
        return t.zk.leader >= 0 and bool(t.zk.sessions[t.zk.leader])
    if _reaches(cfg, s, ELECTION_KINDS, -1, 2, led):
        return None
    return (f"the partition has no live leader and ISR member(s) {', '.join(f'b{e}' for e in cands)} "
            f"are live and eligible, but no leader is elected within 2 controller steps")


def _mask(m: int) -> str:
    return "{" + ", ".join(f"b{x}" for x in bits(m)) + "}"
