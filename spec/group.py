"""Consumer groups and committed offsets, composed with the replication model: with consumers
on, the replicated partition is the group's __consumer_offsets partition and its acting leader
is the group coordinator, so a commit is a record that survives — or not — by the replication
rules. The data partition the group consumes is a fixed log of `records` records (its own
replication is what the producer explorations study). Rules live in spec/rules.py
(GroupCoordinator's generation check, where a new coordinator's committed offset comes from).

Simplification, said once: the group's generation and assignment are kept as the group's own
state (Kafka also writes them to __consumer_offsets; a coordinator fail-over that loses them
forces a rebalance, which only adds generations); committed offsets live only in the log.
The group's state (Cons, Grp) is declared with the rest of the state in spec/state.py, its
action descriptions in spec/actions.py.
"""
from __future__ import annotations

from spec import rules
from spec.actions import Action
from spec.state import LEADER, Cons, Grp, State
from spec.updates import advance_hw, durable, is_up, replace_at


def permute_brokers(g: tuple, p: tuple) -> tuple:
    cons = tuple(c[:5] + ((c[5][:2] + (p[c[5][2]],) + c[5][3:]) if c[5] else (),) for c in g[2])
    return g[:2] + (cons,) + g[3:]


def _coordinators(s: State) -> list[int]:
    """Where a consumer sends group requests: the partition leader its metadata names, or any
    broker acting as leader (stale metadata), as for producers."""
    out = {s.zk.leader} if s.zk.leader >= 0 else set()
    for i, b in enumerate(s.brokers):
        if b.alive and b.role == LEADER:
            out.add(i)
    return sorted(out)


def committed_offset(log: tuple, writes: tuple) -> int:
    return rules.committed_offset_in_log(log, writes)


def enabled(cfg, s: State) -> list[Action]:
    g: Grp = s.grp
    out: list[Action] = []
    for ci, c in enumerate(g.cons):
        if not c.alive:
            out.append(Action("ConsumerRestart", ci))
            continue
        if s.crashes < cfg.crashes:
            out.append(Action("ConsumerCrash", ci))
        if c.commit:
            if c.commit[4] < 0:
                if is_up(s.brokers[c.commit[2]]):
                    out.append(Action("HandleCommit", ci))
            elif _commit_answer(s, c.commit) is not None:
                out.append(Action("CompleteCommit", ci))
            continue
        # A member outside the current generation (new, restarted, or fenced by a rebalance
        # it has not yet noticed) may (re)join once it holds nothing; rebalances are bounded.
        if c.gen != g.gen and c.held < 0 and g.gen < cfg.consumers + cfg.crashes:
            out.append(Action("Join", ci))
        if c.gen < 0:
            continue
        if c.pos < 0:
            if c.gen == g.gen:
                out.extend(Action("FetchOffset", ci, b) for b in _coordinators(s)
                           if s.brokers[b].alive and s.brokers[b].role == LEADER)
            continue
        if c.stage == 0 and c.pos < cfg.records:
            out.append(Action("Poll", ci))
        elif c.stage == 1 and cfg.commit == "after" or c.stage == 3:
            out.append(Action("Process", ci))
        if c.stage == 1 and cfg.commit == "before" or c.stage == 2:
            out.extend(Action("Commit", ci, b) for b in _coordinators(s))
    return out


def _commit_answer(s: State, cm: tuple) -> str | None:
    """offsets.commit.required.acks=-1: the commit is answered once the offsets partition's HW
    passes it, or with NOT_COORDINATOR once the broker no longer leads that epoch."""
    _gen, _off, bi, le, _wid, loff, _ = cm
    b = s.brokers[bi]
    if not (b.alive and b.role == LEADER and b.le == le):
        return "NOT_COORDINATOR"
    if b.hw > loff:
        return "OK"
    return None


def _setc(s: State, ci: int, c: Cons, **grp) -> State:
    g = s.grp._replace(cons=replace_at(s.grp.cons, ci, c), **grp)
    return s._replace(grp=g)


def join(cfg, s, ci, _):
    """JoinGroup + SyncGroup collapsed: the rebalance bumps the generation and the (one) data
    partition goes to the joiner; the previous owner keeps believing in its old generation
    until it rejoins — it is fenced."""
    g = s.grp
    gen = g.gen + 1
    c = g.cons[ci]._replace(gen=gen, pos=-1, held=-1, stage=0)
    return _setc(s, ci, c, gen=gen, owner=ci)


def fetch_offset(cfg, s, ci, b):
    off = committed_offset(s.brokers[b].log, s.writes)
    return _setc(s, ci, s.grp.cons[ci]._replace(pos=max(off, 0)))


def poll(cfg, s, ci, _):
    c = s.grp.cons[ci]
    return _setc(s, ci, c._replace(held=c.pos, pos=c.pos + 1, stage=1))


def process(cfg, s, ci, _):
    g = s.grp
    c = g.cons[ci]
    processed = replace_at(g.processed, c.held, min(2, g.processed[c.held] + 1))
    if cfg.commit == "before":          # committed already: done with the record
        c = c._replace(stage=0, held=-1)
    else:
        c = c._replace(stage=2)
    return _setc(s, ci, c, processed=processed)


def commit(cfg, s, ci, b):
    c = s.grp.cons[ci]
    # stale (ghost): the group had rebalanced past this member's generation before it sent the
    # commit, so a history shows the newer assignment completed before the commit began.
    return _setc(s, ci, c._replace(commit=(c.gen, c.held + 1, b, -1, -1, -1, int(c.gen != s.grp.gen))))


def handle_commit(cfg, s, ci, _):
    """GroupCoordinator.handleCommitOffsets: NOT_COORDINATOR unless the broker leads the
    offsets partition; ILLEGAL_GENERATION for another generation (rules.commit_generation_ok);
    else the commit is appended to __consumer_offsets and awaits the high watermark."""
    g = s.grp
    c = g.cons[ci]
    gen, off, bi, _, _, _, _ = c.commit
    b = s.brokers[bi]
    if b.role != LEADER or not rules.commit_generation_ok(gen, g.gen, cfg.fixes):
        return _fail_commit(s, ci)
    wid, loff = s.produced, b.leo
    log = b.log + ((wid, b.le),)
    nb = durable(cfg, b._replace(log=log, cache=rules.cache_assign(b.cache, b.le, b.leo),
                                  pos=replace_at(b.pos, bi, len(log))))
    s = s._replace(brokers=replace_at(s.brokers, bi, nb), produced=wid + 1,
                   writes=s.writes + ((-1, off, gen, ci),))
    s = _setc(s, ci, c._replace(commit=(gen, off, bi, b.le, wid, loff, c.commit[6])))
    return advance_hw(cfg, s, bi)


def _fail_commit(s: State, ci: int) -> State:
    """A failed commit (CommitFailedException / a retriable error surfacing to commitSync):
    the member gives up the record it holds and rejoins the group."""
    c = s.grp.cons[ci]
    return _setc(s, ci, c._replace(commit=(), gen=-1, pos=-1, held=-1, stage=0))


def complete_commit(cfg, s, ci, _):
    g = s.grp
    c = g.cons[ci]
    if _commit_answer(s, c.commit) != "OK":
        return _fail_commit(s, ci)
    gen, off, _, _, wid, _, stale = c.commit
    fenced = g.fenced | stale
    s = s._replace(acked=s.acked | (1 << wid))
    stage = 3 if cfg.commit == "before" else 0
    c = c._replace(commit=(), stage=stage, held=c.held if stage == 3 else -1)
    return _setc(s, ci, c, hi=max(g.hi, off), fenced=int(fenced))


def consumer_crash(cfg, s, ci, _):
    c = Cons(False, -1, -1, -1, 0, ())
    return _setc(s, ci, c)._replace(crashes=s.crashes + 1)


def consumer_restart(cfg, s, ci, _):
    return _setc(s, ci, s.grp.cons[ci]._replace(alive=True))


STEPS = {"Join": join, "FetchOffset": fetch_offset, "Poll": poll, "Process": process,
         "Commit": commit, "HandleCommit": handle_commit, "CompleteCommit": complete_commit,
         "ConsumerCrash": consumer_crash, "ConsumerRestart": consumer_restart}
