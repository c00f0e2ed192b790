"""Transitions: `enabled(cfg, state) -> [Action]` and `step(cfg, state, action) -> State`.

Pure: no clocks, sockets or randomness. Every protocol decision is delegated to spec/rules.py;
this file only moves data. The actions and their one-line descriptions are spec/actions.py's;
the state updates the client transitions share are spec/updates.py's.
"""
from __future__ import annotations

from spec import group as _group
from spec import producer as _producer
from spec import transaction as _transaction
from spec import rules
from spec.actions import Action
from spec.config import Config
from spec.state import FOLLOWER, LEADER, NONE, Broker, State, bits
from spec.updates import advance_hw, durable, is_up, replace_at


# --- helpers -------------------------------------------------------------------------------------

def _is_current_controller(s: State, i: int) -> bool:
    b = s.brokers[i]
    return is_up(b) and s.zk.controller == i and b.ctl == s.zk.ce


def _mark_leader(s: State, i: int, le: int) -> State:
    el = s.epoch_leaders
    if le >= len(el):
        el = el + (0,) * (le + 1 - len(el))
    return s._replace(epoch_leaders=replace_at(el, le, el[le] | (1 << i)))


def _send_all(s: State, targets: int, ce: int, le: int, leader: int, isr: int, ver: int) -> tuple:
    msgs = list(s.msgs)
    for d in bits(targets):
        m = (d, ce, le, leader, isr, ver)
        if m not in msgs:
            msgs.append(m)
    return tuple(sorted(msgs))


# --- enabled -------------------------------------------------------------------------------------

def enabled(cfg: Config, s: State, prune_noop_fetches: bool = True) -> list[Action]:
    """The actions enabled in s. A fetch that would change nothing is left out (a pruning of the
    search, `_fetch_is_noop`); `prune_noop_fetches=False` keeps it, for the test that shows the
    pruning loses no behaviour."""
    out: list[Action] = []
    n = cfg.brokers
    zk = s.zk
    crashes_left = s.crashes < cfg.crashes
    pauses_left = s.pauses < cfg.pauses
    for i, b in enumerate(s.brokers):
        if not b.alive:
            out.append(Action("Restart", i))
            continue
        if crashes_left:
            out.append(Action("Crash", i, 0))
            if cfg.unflushed_loss and b.flushed < b.leo:
                out.append(Action("Crash", i, 1))
            if cfg.disk_loss and (b.leo or b.cache):
                out.append(Action("Crash", i, 2))
        if pauses_left and not b.paused:
            out.append(Action("Pause", i))
        if b.paused:
            out.append(Action("Resume", i))
            if zk.sessions[i]:
                out.append(Action("SessionExpire", i))
            continue
        # --- running broker ---
        if cfg.unflushed_loss and b.flushed < b.leo:
            out.append(Action("Flush", i))
        if not zk.sessions[i]:
            out.append(Action("Reregister", i))
        if b.role == LEADER:
            if b.resp != -1:
                out.append(Action("AlterIsrResponse", i))
            if (not cfg.producers and not cfg.consumers and not cfg.transactions
                    and s.produced < cfg.records
                    and rules.produce_allowed(b, cfg.acks, cfg.min_isr, cfg.fixes)):
                out.append(Action("Produce", i))
            if b.pending < 0:
                for f in bits(b.isr):
                    if f != i and b.pos[f] < b.leo:
                        out.append(Action("ProposeShrink", i, f))
        elif b.role == FOLLOWER and b.leader >= 0:
            ld = s.brokers[b.leader]
            leader_serving = is_up(ld) and ld.role == LEADER
            if b.trunc:
                if "epoch-truncation" not in cfg.fixes:
                    out.append(Action("Truncate", i))
                elif leader_serving and rules.fetch_epoch_accepted(b, ld, cfg.fixes):
                    out.append(Action("Truncate", i))
            elif (not b.fetch and leader_serving and rules.fetch_epoch_accepted(b, ld, cfg.fixes)
                  and not (prune_noop_fetches and _fetch_is_noop(cfg, i, b, ld))):
                out.append(Action("FetchRequest", i))
        if b.fetch:
            out.append(Action("FetchResponse", i))
        # controller work
        if zk.controller < 0 and zk.sessions[i] and not b.ctl:
            out.append(Action("ControllerElect", i))
        if _is_current_controller(s, i):
            out.extend(_controller_react_actions(cfg, s, i))
            for l, lb in enumerate(s.brokers):
                if lb.alive and lb.pending >= 0 and lb.resp == -1:
                    out.append(Action("ControllerAlterIsr", i, l))
        elif b.ctl and b.ctl < zk.ce and b.ctl_cache and s.elections < cfg.elections:
            cl, cle, cisr, cver, _ = b.ctl_cache
            for c in bits(cisr):
                if c != cl:
                    out.append(Action("ZombieElect", i, c))
    # control messages: delivered in any order, or lost
    seen = set()
    for m in s.msgs:
        if m in seen:
            continue
        seen.add(m)
        dst = m[0]
        if is_up(s.brokers[dst]):
            out.append(Action("Deliver", dst, m[1:]))
        if s.losses < cfg.losses:
            out.append(Action("Lose", dst, m[1:]))
    if s.prods:
        out.extend(_producer.enabled(cfg, s))
    if s.grp:
        out.extend(_group.enabled(cfg, s))
    if s.txn:
        out.extend(_transaction.enabled(cfg, s))
    return out


def _fetch_is_noop(cfg: Config, i: int, f: Broker, ld: Broker) -> bool:
    """A fetch that would change nothing anywhere (caught up, HW known, position recorded, no
    ISR expansion due) is left out: its response is empty and it moves no state."""
    return (f.leo == ld.leo and f.hw == ld.hw and ld.pos[i] == f.leo
            and ((ld.isr >> i) & 1 or ld.pending >= 0 or not rules.may_join_isr(ld, f.leo, cfg.fixes)))


def _live_mask(s: State) -> int:
    m = 0
    for i, sess in enumerate(s.zk.sessions):
        if sess:
            m |= 1 << i
    return m


def _react_plan(cfg: Config, s: State, c: int):
    """What controller c sees in the coordination store: brokers registered anew (`new`), ISR
    members that died or bounced (a new session: treated as a failure then a start, as Kafka's
    controller does with broker epochs), and whether the partition needs a leader.
    Returns (new, isr_after_removal, need_leader, candidates, elr, lkelr)."""
    zk = s.zk
    handled = s.brokers[c].ctl_cache[4]
    live = new = bounced = 0
    for k, (sess, h) in enumerate(zip(zk.sessions, handled)):
        if sess:
            live |= 1 << k
            if sess != h:
                new |= 1 << k
                if h:
                    bounced |= 1 << k
    if zk.leader >= 0 and zk.sessions[zk.leader] and zk.sessions[zk.leader] != zk.lsess:
        # The leader re-registered since its election: a bounced leader, even if this
        # controller never saw it go (it compares the broker epoch kept with the partition).
        bounced |= 1 << zk.leader
    # KIP-966 (KAFKA-15586): a registration after an unclean shutdown is recorded in the metadata,
    # so every controller — also one elected since — treats the broker as bounced.
    bounced |= zk.unclean & live
    gone = ~live | bounced
    isr = zk.isr & ~gone
    # A bounced broker restarted without a clean shutdown (the model has no clean shutdown).
    elr = rules.elr_after_isr_change(cfg.fixes, cfg.min_isr, zk.isr, isr, zk.elr, bounced)
    lkelr = zk.lkelr
    if zk.elr and not elr and not isr:
        lkelr = zk.elr          # the last eligible replicas went through unclean shutdowns
    if not isr and not elr and not lkelr:
        # the ISR never becomes empty while nobody else is eligible: it keeps its last member
        # (the last known leader)
        isr = zk.isr & (1 << zk.leader) if zk.leader >= 0 and (zk.isr >> zk.leader) & 1 else zk.isr
    need_leader = zk.leader < 0 or bool((gone >> zk.leader) & 1)
    cands = rules.leader_candidates(cfg.fixes, isr, elr, lkelr, live, cfg.unclean)
    if cands and not cands & isr and not cands & elr and cands & lkelr:
        cands = rules.unclean_recovery_choice(cands, s.brokers)
    return new, isr, need_leader, cands, elr, lkelr


def _controller_react_actions(cfg: Config, s: State, c: int) -> list[Action]:
    """The controller has work when a broker registered anew, an ISR member is gone, or the
    partition needs a leader. One action per electable candidate (the choice is the model's)."""
    zk = s.zk
    new, isr, need_leader, cands, elr, lkelr = _react_plan(cfg, s, c)
    changed = isr != zk.isr or elr != zk.elr or lkelr != zk.lkelr or bool(zk.unclean)
    if not need_leader:
        return [Action("ControllerReact", c, zk.leader)] if new or changed else []
    if cands and s.elections < cfg.elections:
        return [Action("ControllerReact", c, x) for x in bits(cands)]
    if zk.leader >= 0 or new or changed:
        return [Action("ControllerReact", c, -1)]   # the partition goes (or stays) offline
    return []


# --- step ----------------------------------------------------------------------------------------

def step(cfg: Config, s: State, a: Action) -> State:
    fn = _STEPS[a.kind]
    return fn(cfg, s, a.b, a.arg)


def _produce(cfg, s, i, _):
    b = s.brokers[i]
    r = s.produced
    log = b.log + ((r, b.le),)
    nb = durable(cfg, b._replace(log=log, cache=rules.cache_assign(b.cache, b.le, b.leo),
                                  pos=replace_at(b.pos, i, len(log)),
                                  pend_acks=b.pend_acks | (1 << r) if cfg.acks == "all" else b.pend_acks))
    s = s._replace(brokers=replace_at(s.brokers, i, nb), produced=r + 1)
    return advance_hw(cfg, s, i)


def _fetch_request(cfg, s, i, _):
    f = s.brokers[i]
    li = f.leader
    ld = s.brokers[li]
    off = f.leo
    if off > ld.leo:
        resp = (li, ld.le, ld.leo, (), ld.hw, True)
        return s._replace(brokers=replace_at(s.brokers, i, f._replace(fetch=resp)))
    pos = replace_at(ld.pos, i, off)
    ld = ld._replace(pos=pos)
    if not (ld.isr >> i) & 1 and ld.pending < 0 and rules.may_join_isr(ld, off, cfg.fixes):
        # KIP-903: the fetch carries the follower's broker epoch; the proposal quotes it.
        ld = ld._replace(pending=ld.isr | (1 << i), pend_gen=f.gen)
    resp = (li, ld.le, off, ld.log[off:], ld.hw, False)
    brokers = replace_at(replace_at(s.brokers, li, ld), i, f._replace(fetch=resp))
    return _proposed(cfg, s._replace(brokers=brokers), li)


def _fetch_response(cfg, s, i, _):
    f = s.brokers[i]
    src, le, off, recs, hw, oor = f.fetch
    f = f._replace(fetch=())
    if f.role == FOLLOWER and not f.trunc and f.leader == src:
        if oor and rules.follower_halts_on_out_of_range(cfg.fixes, cfg.unclean):
            return _halt(cfg, s._replace(brokers=replace_at(s.brokers, i, f)), i)
        if oor:
            new_len = min(off, f.leo)
            f = f._replace(log=f.log[:new_len], cache=rules.cache_truncate(f.cache, new_len),
                           hw=min(f.hw, new_len), flushed=min(f.flushed, new_len))
        elif off == f.leo:
            cache = f.cache
            for k, (_, e) in enumerate(recs):
                cache = rules.cache_assign(cache, e, off + k)
            log = f.log + recs
            f = durable(cfg, f._replace(log=log, cache=cache, hw=min(hw, len(log))))
    return s._replace(brokers=replace_at(s.brokers, i, f))


def _truncate(cfg, s, i, _):
    f = s.brokers[i]
    to = rules.truncation_offset(f, s.brokers[f.leader], cfg.fixes)
    to = min(to, f.leo)
    f = f._replace(log=f.log[:to], cache=rules.cache_truncate(f.cache, to), hw=min(f.hw, to),
                   flushed=min(f.flushed, to), trunc=False)
    return s._replace(brokers=replace_at(s.brokers, i, f))


def _flush(cfg, s, i, _):
    b = s.brokers[i]
    return s._replace(brokers=replace_at(s.brokers, i, b._replace(flushed=b.leo)))


def _crash(cfg, s, i, loss):
    """loss: 0 a process crash (the page cache survives), 1 a power failure (the unflushed
    suffix is lost), 2 the disk is lost (the broker returns empty)."""
    b = s.brokers[i]
    log = () if loss == 2 else b.log[: b.flushed] if loss == 1 else b.log
    s = _down(s, i, b._replace(log=log, cache=rules.cache_truncate(b.cache, len(log)) if loss != 2 else (),
                               hw=min(b.hw, len(log)), flushed=min(b.flushed, len(log))))
    s = s._replace(crashes=s.crashes + 1)
    if loss:
        s = _record_data_loss(s, i, b.log[len(log):])
    return s


def _halt(cfg, s, i):
    """The broker process exits on its own (a fatal error): no data is lost, no fault counted."""
    return _down(s, i, s.brokers[i])


def _down(s: State, i: int, b: Broker) -> State:
    nb = b._replace(alive=False, paused=False, role=NONE, leader=-1, isr=0, pending=-1, pos=(),
                    trunc=False, fetch=(), ctl=0, ctl_cache=(), pend_acks=0, pend_gen=0, resp=-1)
    zk = s.zk._replace(sessions=replace_at(s.zk.sessions, i, 0))
    if zk.controller == i:
        zk = zk._replace(controller=-1)
    # Requests addressed to the old incarnation die with it (and KIP-380's broker epoch would
    # make the new one refuse them).
    msgs = tuple(m for m in s.msgs if m[0] != i)
    return s._replace(brokers=replace_at(s.brokers, i, nb), zk=zk, msgs=msgs)


def _record_data_loss(s: State, i: int, lost: tuple) -> State:
    """Ghosts for scoped durability: a record whose every holder has now lost it is doomed (Kafka
    promises nothing more without fsync); a broker that lost data while in the controller's ISR
    is damaged until the controller removes it."""
    held = 0
    for b in s.brokers:
        for r, _ in b.log:
            held |= 1 << r
    doomed = s.doomed
    for r, _ in lost:
        if not (held >> r) & 1:
            doomed |= 1 << r
    damaged = s.damaged | ((1 << i) & s.zk.isr) if lost else s.damaged
    return s._replace(lossy=s.lossy + 1, doomed=doomed, damaged=damaged)


def _set_isr(s: State, zk) -> State:
    """Every write of the controller's ISR goes through here: a damaged broker stops being
    damaged once it is out of the ISR."""
    return s._replace(zk=zk, damaged=s.damaged & zk.isr)


def normalize_versions(s: State) -> State:
    """Partition-state versions matter only as equal / older: renumber them densely, keeping
    order, so ISR shrink-expand cycles do not mint ever-new but equivalent states. Sound because
    every new version is the store's current version + 1, the largest anywhere."""
    vals = {s.zk.ver}
    for b in s.brokers:
        vals.add(b.ver)
        if b.resp >= 0:
            vals.add(b.resp)
        if b.ctl_cache:
            vals.add(b.ctl_cache[3])
    for m in s.msgs:
        vals.add(m[5])
    if min(vals) == 0 and max(vals) == len(vals) - 1:
        return s            # already 0..k: distinct ints from 0 to len - 1 are exactly that range
    rank = {v: k for k, v in enumerate(sorted(vals))}
    brokers = tuple(b._replace(ver=rank[b.ver], ctl_cache=b.ctl_cache[:3] + (rank[b.ctl_cache[3]],)
                               + b.ctl_cache[4:] if b.ctl_cache else (),
                               resp=rank[b.resp] if b.resp >= 0 else b.resp) for b in s.brokers)
    msgs = tuple(sorted(m[:5] + (rank[m[5]],) for m in s.msgs))
    return s._replace(brokers=brokers, msgs=msgs, zk=s.zk._replace(ver=rank[s.zk.ver]))


def _normalize_sessions(s: State) -> State:
    """Session numbers matter only as equal / different / absent. Renumber them to small
    constants (each broker's current session = 2, a session the controller handled that is no
    longer current = 1) so that restarts do not mint ever-new but equivalent states."""
    gens = [b.gen for b in s.brokers]

    def norm_handled(handled: tuple) -> tuple:
        return tuple(0 if h == 0 else 2 if h == g else 1 for h, g in zip(handled, gens))

    brokers = []
    for b in s.brokers:
        cc = b.ctl_cache
        if cc:
            cc = cc[:4] + (norm_handled(cc[4]),)
        pg = b.pend_gen
        if pg:
            added = bits(b.pending & ~b.isr)
            pg = 2 if added and pg == gens[added[0]] else 1
        brokers.append(b._replace(gen=2, ctl_cache=cc, pend_gen=pg))
    zk = s.zk
    lsess = 0 if zk.leader < 0 or not zk.lsess else 2 if zk.lsess == gens[zk.leader] else 1
    zk = zk._replace(sessions=tuple(2 if x else 0 for x in zk.sessions), lsess=lsess)
    return s._replace(brokers=tuple(brokers), zk=zk)


def _restart(cfg, s, i, _):
    b = s.brokers[i]
    gen = b.gen + 1
    # A fresh process reads /controller_epoch and knows no partition state yet (epoch -1).
    nb = b._replace(alive=True, gen=gen, le=-1, role=NONE, ce=s.zk.ce)
    zk = s.zk._replace(sessions=replace_at(s.zk.sessions, i, gen))
    if "eligible-leader-replicas" in cfg.fixes:     # every restart follows an unclean shutdown
        zk = zk._replace(unclean=zk.unclean | (1 << i))
    return _normalize_sessions(s._replace(brokers=replace_at(s.brokers, i, nb), zk=zk))


def _pause(cfg, s, i, _):
    b = s.brokers[i]
    return s._replace(brokers=replace_at(s.brokers, i, b._replace(paused=True)), pauses=s.pauses + 1)


def _resume(cfg, s, i, _):
    # Queued /controller watch notifications are processed on resume.
    b = s.brokers[i]
    return s._replace(brokers=replace_at(s.brokers, i, b._replace(paused=False, ce=max(b.ce, s.zk.ce))))


def _session_expire(cfg, s, i, _):
    zk = s.zk._replace(sessions=replace_at(s.zk.sessions, i, 0))
    if zk.controller == i:
        zk = zk._replace(controller=-1)
    return s._replace(zk=zk)


def _reregister(cfg, s, i, _):
    b = s.brokers[i]
    gen = b.gen + 1
    nb = b._replace(gen=gen, ctl=0, ctl_cache=(), ce=max(b.ce, s.zk.ce))
    return _normalize_sessions(s._replace(brokers=replace_at(s.brokers, i, nb),
                                          zk=s.zk._replace(sessions=replace_at(s.zk.sessions, i, gen))))


def _controller_elect(cfg, s, i, _):
    zk = s.zk
    ce = zk.ce + 1
    zk = zk._replace(controller=i, ce=ce)
    # The /controller watch tells every running broker about the new controller epoch.
    brokers = tuple(b._replace(ce=max(b.ce, ce)) if is_up(b) else b for b in s.brokers)
    me = brokers[i]._replace(ctl=ce, ctl_cache=(zk.leader, zk.le, zk.isr, zk.ver,
                                                (0,) * cfg.brokers))
    return s._replace(brokers=replace_at(brokers, i, me), zk=zk)


def _controller_react(cfg, s, c, new_leader):
    """Handle broker deaths, bounces and arrivals: shrink the ISR by the gone (never to empty),
    elect a leader if needed (clean from the live ISR; unclean from any live replica when
    enabled), bump the leader epoch on any change (ZK-mode controller), write with
    compare-and-set, and send LeaderAndIsr to the live replicas (or only to newly registered
    ones when nothing changed)."""
    zk = s.zk
    new, isr, need_leader, _, elr, lkelr = _react_plan(cfg, s, c)
    elections = s.elections
    leader = new_leader
    if need_leader and leader >= 0:
        elections += 1
        if not (isr >> leader) & 1:     # from the ELR, the last known ELR, or unclean: ISR = {leader}
            isr = 1 << leader
        elr &= ~isr
        lkelr = 0
    changed = need_leader or isr != zk.isr or elr != zk.elr or lkelr != zk.lkelr
    zk = zk._replace(unclean=0)
    if changed:
        zk = zk._replace(leader=leader, le=zk.le + 1, isr=isr, ver=zk.ver + 1,
                         lsess=zk.sessions[leader] if leader >= 0 else 0, elr=elr, lkelr=lkelr)
        targets = _live_mask(s)
    else:
        targets = new
    msgs = _send_all(s, targets, zk.ce, zk.le, zk.leader, zk.isr, zk.ver)
    me = s.brokers[c]._replace(ctl_cache=(zk.leader, zk.le, zk.isr, zk.ver, zk.sessions))
    s = _set_isr(s, zk)
    return normalize_versions(s._replace(msgs=msgs, brokers=replace_at(s.brokers, c, me),
                                          elections=elections))


def _controller_alter_isr(cfg, s, c, li):
    """AlterIsr (KIP-497): the controller commits or rejects leader li's proposal; the answer
    travels back to the leader (AlterIsrResponse), which keeps acting on its maximal ISR until it
    arrives."""
    s = _commit_isr_proposal(cfg, s, li)
    cb, zk = s.brokers[c], s.zk
    s = s._replace(brokers=replace_at(s.brokers, c, cb._replace(
        ctl_cache=(zk.leader, zk.le, zk.isr, zk.ver, cb.ctl_cache[4]))))
    return normalize_versions(s)


def _alter_isr_response(cfg, s, li, _):
    """The leader learns the outcome: the committed ISR and its version, or that it must wait for
    LeaderAndIsr (a stale or ineligible proposal)."""
    ld = s.brokers[li]
    if ld.resp >= 0:
        ld = ld._replace(isr=ld.pending, ver=ld.resp)
    s = s._replace(brokers=replace_at(s.brokers, li, ld._replace(pending=-1, pend_gen=0, resp=-1)))
    return normalize_versions(advance_hw(cfg, s, li))


def _commit_isr_proposal(cfg, s, li):
    """Compare-and-set of the leader's proposed ISR in the store: accepted when the leader's
    epoch and the partition-state version it knows are current and every added replica is
    eligible (KIP-903). Records the answer for the leader (`resp`)."""
    zk = s.zk
    ld = s.brokers[li]
    added = bits(ld.pending & ~ld.isr)
    eligible = all(rules.isr_addition_valid(ld.pend_gen, zk.sessions[a], cfg.fixes) for a in added)
    if zk.leader == li and ld.le == zk.le and ld.ver == zk.ver and eligible:
        elr = rules.elr_after_isr_change(cfg.fixes, cfg.min_isr, zk.isr, ld.pending, zk.elr, 0)
        zk = zk._replace(isr=ld.pending, ver=zk.ver + 1, elr=elr)
        s = _set_isr(s, zk)
        return s._replace(brokers=replace_at(s.brokers, li, ld._replace(resp=zk.ver)))
    return s._replace(brokers=replace_at(s.brokers, li, ld._replace(resp=-2)))


def _apply_isr_proposal(cfg, s, li):
    """Before AlterIsr (ZooKeeper-mode leaders): the leader writes the store itself, synchronously,
    with compare-and-set, and acts on the outcome at once."""
    s = _commit_isr_proposal(cfg, s, li)
    return _alter_isr_response(cfg, s, li, None)


def _proposed(cfg, s, li):
    """After leader li proposes an ISR: with AlterIsr it waits for the controller; older
    generations write the coordination store themselves, at once."""
    if not cfg.alter_isr and s.brokers[li].pending >= 0:
        s = _apply_isr_proposal(cfg, s, li)
    return advance_hw(cfg, s, li)


def _propose_shrink(cfg, s, i, f):
    b = s.brokers[i]
    s = s._replace(brokers=replace_at(s.brokers, i, b._replace(pending=b.isr & ~(1 << f), pend_gen=0)))
    return _proposed(cfg, s, i)


def _zombie_elect(cfg, s, z, new_leader):
    """A deposed controller that has not yet noticed keeps acting on its cache: its write to the
    coordination store fails (its session is gone) but it sends the requests anyway."""
    b = s.brokers[z]
    cl, cle, cisr, cver, handled = b.ctl_cache
    le = cle + 1
    msgs = _send_all(s, (1 << cfg.brokers) - 1, b.ctl, le, new_leader, cisr, cver)
    nb = b._replace(ctl_cache=(new_leader, le, cisr, cver, handled))
    return s._replace(msgs=msgs, brokers=replace_at(s.brokers, z, nb), elections=s.elections + 1)


def _remove_msg(msgs: tuple, m: tuple) -> tuple:
    k = msgs.index(m)
    return msgs[:k] + msgs[k + 1:]


def _lose(cfg, s, dst, m):
    return s._replace(msgs=_remove_msg(s.msgs, (dst,) + m), losses=s.losses + 1)


def _deliver(cfg, s, i, m):
    ce, le, leader, isr, ver = m
    s = s._replace(msgs=_remove_msg(s.msgs, (i,) + m))
    b = s.brokers[i]
    if not rules.control_request_accepted(b, ce, le, cfg.fixes):
        return s
    ce_known = max(b.ce, ce)
    if leader == i:
        nb = b._replace(le=le, ce=ce_known, ver=ver, role=LEADER, leader=i, isr=isr, pending=-1,
                        pend_gen=0, resp=-1, cache=rules.cache_assign(b.cache, le, b.leo),
                        pos=tuple(b.leo if k == i else -1 for k in range(cfg.brokers)),
                        trunc=False, fetch=(), pend_acks=0)
        s = _mark_leader(s, i, le)
    else:
        trunc = rules.must_truncate_on_become_follower(b, leader, le, cfg.fixes)
        nb = b._replace(le=le, ce=ce_known, ver=ver, role=FOLLOWER, leader=leader, isr=0,
                        pending=-1, pend_gen=0, resp=-1, pos=(), trunc=trunc,
                        fetch=() if trunc else b.fetch, pend_acks=0)
    return s._replace(brokers=replace_at(s.brokers, i, nb))


_STEPS = {
    "Produce": _produce, "FetchRequest": _fetch_request, "FetchResponse": _fetch_response,
    "Truncate": _truncate, "Flush": _flush, "Crash": _crash, "Restart": _restart,
    "Pause": _pause, "Resume": _resume, "SessionExpire": _session_expire,
    "Reregister": _reregister, "ControllerElect": _controller_elect,
    "ControllerReact": _controller_react, "ControllerAlterIsr": _controller_alter_isr,
    "AlterIsrResponse": _alter_isr_response,
    "ProposeShrink": _propose_shrink, "ZombieElect": _zombie_elect, "Deliver": _deliver,
    "Lose": _lose,
}

# Clients compose with the replication model; their transitions live in their own modules.
_STEPS.update(_producer.STEPS)
_STEPS.update(_group.STEPS)
_STEPS.update(_transaction.STEPS)
ACTION_KINDS = tuple(sorted(_STEPS))
