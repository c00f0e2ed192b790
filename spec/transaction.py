"""Transactions (KIP-98), composed with the replication model: with `transactions` on, the
replicated partition is __transaction_state and its acting leader is the transaction
coordinator, so a transaction's state is a record that survives, or not, by the replication
rules, and a new coordinator knows exactly what its log holds (TransactionStateManager loads
it from the log). Every protocol decision is a rule of spec/rules.py (the epoch checks, partition
verification, the marker checks, the LSO); this file only moves data. The state (TxnClient, Txn)
is declared in spec/state.py, the actions' one-line descriptions in spec/actions.py.

The pieces:
- producer instances with a transactional.id: InitProducerId, then rounds of begin,
  AddPartitionsToTxn and a Produce per data partition (in partition order: one record each),
  and EndTxn; a client-side timeout of a batch still in flight (`txn_timeouts`) makes it abort
  or, with `txn-timeout-bump`, bump its epoch; a new instance of the same id (`zombies`) leaves
  the old one running;
- the coordinator: records Empty / Ongoing / PrepareCommit / PrepareAbort / CompleteCommit /
  CompleteAbort in __transaction_state; it answers a client once the record is below the high
  watermark and acts only on committed state (a record still being replicated is
  CONCURRENT_TRANSACTIONS); from a committed Prepare* it sends WriteTxnMarkers to every data
  partition of the transaction and, once all are acknowledged, writes Complete*; it aborts an
  Ongoing transaction on timeout (with an epoch bump, abortTimedOutTransactions);
- data partitions: single-replica logs of batches and markers (their own replication is what the
  rest of the model studies); the network between clients, coordinator and partitions delivers
  Produce and WriteTxnMarkers requests in any order, and the coordinator may resend a marker
  request while the first copy is still on its way (`txn_dups`), which then arrives late.

Simplifications, said once: a client talks to the coordinator its metadata names (the store's
leader of __transaction_state) and the request is handled at once (a request to a broker that
no longer leads waits for metadata); idempotent sequence numbers are left out (the epoch checks
are what the transactional bugs are about, and a late batch of a transaction arrives in
sequence order); answers to Produce requests reach the client with the delivery.
"""
from __future__ import annotations

from spec import rules
from spec.actions import Action
from spec.codes import (COMPLETE_ABORT, COMPLETE_COMMIT, EMPTY, ONGOING, PREPARE_ABORT,
                        PREPARE_COMMIT, txn_code, txn_record)
from spec.state import LEADER, State, TxnClient, bits
from spec.updates import advance_hw, durable, is_up, replace_at

INIT, READY, IN_TXN, MUST_ABORT, MUST_BUMP, FENCED, COMMITTING, ABORTING = range(8)
_INIT_REQ, _ADD_REQ, _END_REQ = range(3)
CLIENT_KINDS = ("TxnInitProducerId", "TxnBegin", "TxnAddPartition", "TxnProduce", "TxnCommit",
                "TxnAbort", "TxnTimeout", "TxnAnswer", "TxnNewInstance", "TxnSendMarkers",
                "TxnResendMarker", "TxnCompleteTransaction", "TxnExpire", "TxnDeliver")


def permute_brokers(t: tuple, p: tuple) -> tuple:
    """The transactions' state with broker i renamed p[i]: only a pending coordinator request
    names a broker."""
    clients = tuple(c[:8] + ((c[8][0], p[c[8][1]]) + c[8][2:] if c[8] else (),) for c in t[0])
    return (clients,) + tuple(t[1:])


# --- the coordinator's view ----------------------------------------------------------------------

def coordinator(s: State) -> int:
    """The acting transaction coordinator: the leader of __transaction_state that the store names,
    running and leading the current epoch; -1 when there is none."""
    i = s.zk.leader
    if i < 0:
        return -1
    b = s.brokers[i]
    return i if is_up(b) and b.role == LEADER and b.le == s.zk.le else -1


def txn_state(s: State, bi: int, tid: int) -> tuple[int, int, int, int, bool]:
    """The transactional.id's state in broker bi's __transaction_state log, as
    TransactionStateManager loads it: the last record for the id wins. (epoch, state,
    partitions, ghost transaction, committed: below the high watermark). A fresh id: epoch -1,
    Empty."""
    b = s.brokers[bi]
    for off in range(len(b.log) - 1, -1, -1):
        w = s.writes[b.log[off][0]]
        if w[0] == -2 and w[1] == tid:
            state, parts, g = txn_record(w[3])
            return w[2], state, parts, g, off < b.hw
    return -1, EMPTY, 0, -1, True


def coordinator_view(s: State, tid: int) -> tuple[int, int, int] | None:
    """(epoch, state, partitions) the acting coordinator has committed for tid, for a partition
    leader's verification; None without a coordinator or while a record is being replicated."""
    cb = coordinator(s)
    if cb < 0:
        return None
    e, st, parts, _, committed = txn_state(s, cb, tid)
    return (e, st, parts) if committed else None


# --- enabled -------------------------------------------------------------------------------------

def enabled(cfg, s: State) -> list[Action]:
    t = s.txn
    out: list[Action] = []
    cb = coordinator(s)
    views = [txn_state(s, cb, tid) if cb >= 0 else None for tid in range(cfg.transactions)]
    for ci, c in enumerate(t.clients):
        if c.phase == FENCED:
            continue
        if c.waiting and t.timeouts < cfg.txn_timeouts:
            out.extend(Action("TxnTimeout", ci, d) for d in bits(c.waiting))
        if c.req:
            if _answer_ready(s, c.req):
                out.append(Action("TxnAnswer", ci))
            continue
        v = views[c.tid]
        coord_ready = v is not None and v[4]
        if c.phase in (INIT, MUST_BUMP):
            if coord_ready and rules.txn_init_action(v[1]) != "wait":
                out.append(Action("TxnInitProducerId", ci))
        elif c.phase == READY:
            if t.begun[c.tid] < cfg.txn_rounds and (
                    not cfg.consume_transform_produce
                    or 0 <= input_position(cfg, s, c.tid) < cfg.txn_rounds):
                out.append(Action("TxnBegin", ci))
        elif c.phase == IN_TXN:
            d = _next_partition(cfg, c)
            if d >= 0:
                if not (c.added >> d) & 1:
                    if coord_ready:
                        out.append(Action("TxnAddPartition", ci, d))
                else:
                    out.append(Action("TxnProduce", ci, d))
            elif not c.waiting and coord_ready:
                out.append(Action("TxnCommit", ci))
        elif c.phase == MUST_ABORT and not c.waiting and coord_ready:
            out.append(Action("TxnAbort", ci))
        elif c.phase in (COMMITTING, ABORTING) and coord_ready and rules.txn_end_answer(
                c.pe, v[0], v[1], c.phase == COMMITTING, True, cfg.fixes) != "concurrent":
            out.append(Action("TxnCommit" if c.phase == COMMITTING else "TxnAbort", ci))
    if t.zombies < cfg.zombies:
        for tid in range(cfg.transactions):
            live = max(c.inst for c in t.clients if c.tid == tid)
            if t.newest[tid] == live and any(c.pe >= 0 for c in t.clients if c.inst == live and c.tid == tid):
                out.append(Action("TxnNewInstance", tid))
    if cb >= 0:
        le = s.brokers[cb].le
        for tid, v in enumerate(views):
            epoch, st, parts, g, committed = v
            if not committed:
                continue
            if st in (PREPARE_COMMIT, PREPARE_ABORT):
                pend = t.pend[tid]
                if not (pend and pend[0] == le and pend[1] == g):
                    out.append(Action("TxnSendMarkers", tid))
                elif not pend[2]:
                    out.append(Action("TxnCompleteTransaction", tid))
                elif t.dups < cfg.txn_dups:
                    for d in bits(pend[2]):
                        if any(m[0] == 1 and m[1] == d and m[2] == tid and m[4] == g for m in t.net):
                            out.append(Action("TxnResendMarker", tid, d))
            elif st == ONGOING and t.timeouts < cfg.txn_timeouts:
                out.append(Action("TxnExpire", tid))
    seen = set()
    for m in t.net:
        if m not in seen:
            seen.add(m)
            out.append(Action("TxnDeliver", m[1], m))
    return out


def _next_partition(cfg, c: TxnClient) -> int:
    """Partitions in order; with consume-transform-produce the last is the group's offsets
    partition (AddOffsetsToTxn, then TxnOffsetCommit as a transactional batch there)."""
    for d in range(cfg.txn_partitions + int(cfg.consume_transform_produce)):
        if not (c.sent >> d) & 1:
            return d
    return -1


def _answer_ready(s: State, req: tuple) -> bool:
    """A coordinator request is answered once its record is below the high watermark, or (with
    an error: NOT_COORDINATOR) once the broker no longer leads that epoch."""
    _kind, bi, le, loff, _ans = req
    b = s.brokers[bi]
    if not (b.alive and b.role == LEADER and b.le == le):
        return True
    return b.hw > loff


# --- steps ---------------------------------------------------------------------------------------

def _sett(s: State, **kw) -> State:
    return s._replace(txn=s.txn._replace(**kw))


def _setc(s: State, ci: int, c: TxnClient, **kw) -> State:
    return _sett(s, clients=replace_at(s.txn.clients, ci, c), **kw)


def _append_record(cfg, s: State, tid: int, epoch: int, state: int, parts: int, g: int):
    """Append a transaction-state record to the coordinator's __transaction_state log (as
    GroupCoordinator does for offsets, spec/group.py). Returns (state, coordinator, log offset)."""
    bi = coordinator(s)
    b = s.brokers[bi]
    wid, loff = s.produced, b.leo
    log = b.log + ((wid, b.le),)
    nb = durable(cfg, b._replace(log=log, cache=rules.cache_assign(b.cache, b.le, b.leo),
                                 pos=replace_at(b.pos, bi, len(log))))
    s = s._replace(brokers=replace_at(s.brokers, bi, nb), produced=wid + 1,
                   writes=s.writes + ((-2, tid, epoch, txn_code(state, parts, g)),))
    return advance_hw(cfg, s, bi), bi, loff


def _request(cfg, s: State, ci: int, kind: int, answer: int, record: tuple) -> State:
    """Write `record` (tid, epoch, state, partitions, ghost) and answer the client once it is
    committed (at once when the high watermark already passed it)."""
    s, bi, loff = _append_record(cfg, s, *record)
    req = (kind, bi, s.brokers[bi].le, loff, answer)
    s = _setc(s, ci, s.txn.clients[ci]._replace(req=req))
    if s.brokers[bi].hw > loff:
        return txn_answer(cfg, s, ci, None)
    return s


def _decide(s: State, g: int, outcome: int, zombie: int = 0) -> State:
    tid, inst, _, _, inp = s.txn.ghosts[g]
    return _sett(s, ghosts=replace_at(s.txn.ghosts, g, (tid, inst, outcome, zombie, inp)))


def _fence(s: State, ci: int) -> State:
    """PRODUCER_FENCED (or INVALID_TXN_STATE): fatal for the instance."""
    c = s.txn.clients[ci]
    return _setc(s, ci, c._replace(phase=FENCED, req=()))


def txn_init_producer_id(cfg, s, ci, _):
    """InitProducerId: a new instance (no epoch yet) always gets one, fencing the previous
    instance; a KIP-360 bump (after a client-side timeout) carries the epoch it holds and is
    fenced if the coordinator has moved past it. An Ongoing transaction is aborted first."""
    c = s.txn.clients[ci]
    epoch, st, parts, g, _ = txn_state(s, coordinator(s), c.tid)
    own_abort = g == c.g and st in (PREPARE_ABORT, COMPLETE_ABORT)
    if c.phase == MUST_BUMP and rules.txn_bump_fenced(c.pe, epoch, own_abort):
        return _fence(s, ci)
    if rules.txn_init_action(st) == "abort":
        s = _decide(s, g, 2)
        s, _, _ = _append_record(cfg, s, c.tid, epoch + 1, PREPARE_ABORT, parts, g)
        return s            # CONCURRENT_TRANSACTIONS: the client asks again once it completed
    return _request(cfg, s, ci, _INIT_REQ, epoch + 1, (c.tid, epoch + 1, EMPTY, 0, -1))


def input_position(cfg, s: State, tid: int) -> int:
    """Consume-transform-produce: where the transactional.id's consumer reads its input next, the
    group's committed offset (the client resumes from it after every transaction; an aborted one
    rewinds it); -1 while a transactional offset commit of the id is pending on the offsets
    partition (KIP-447: OffsetFetch with require_stable waits for it)."""
    log = s.txn.logs[cfg.txn_partitions]
    if rules.txn_partition_state(log, tid)[1] >= 0:
        return -1
    return rules.txn_committed_offset(log, tuple(g[4] + 1 for g in s.txn.ghosts), tid)


def txn_begin(cfg, s, ci, _):
    """beginTransaction: local to the client; the ghost table gets the transaction and, with
    consume-transform-produce, the input offset it consumes."""
    t = s.txn
    c = t.clients[ci]
    g = len(t.ghosts)
    inp = input_position(cfg, s, c.tid) if cfg.consume_transform_produce else -1
    s = _sett(s, ghosts=t.ghosts + ((c.tid, c.inst, 0, 0, inp),),
              begun=replace_at(t.begun, c.tid, t.begun[c.tid] + 1))
    return _setc(s, ci, c._replace(phase=IN_TXN, g=g, added=0, sent=0, waiting=0))


def txn_add_partition(cfg, s, ci, d):
    """AddPartitionsToTxn (TransactionCoordinator.handleAddPartitionsToTransaction): fenced for
    an older epoch; INVALID_TXN_STATE (fatal here) unless the id is idle or in this transaction;
    else an Ongoing record with the partition added."""
    c = s.txn.clients[ci]
    epoch, st, parts, g, _ = txn_state(s, coordinator(s), c.tid)
    if rules.txn_request_fenced(c.pe, epoch):
        return _fence(s, ci)
    if st == ONGOING and g != c.g or st in (PREPARE_COMMIT, PREPARE_ABORT):
        return _fence(s, ci)
    parts = parts if st == ONGOING else 0
    return _request(cfg, s, ci, _ADD_REQ, d, (c.tid, epoch, ONGOING, parts | (1 << d), c.g))


def txn_produce(cfg, s, ci, d):
    c = s.txn.clients[ci]
    m = (0, d, ci, c.pe, c.g, 0, 0)
    s = _sett(s, net=tuple(sorted(s.txn.net + (m,))))
    return _setc(s, ci, c._replace(sent=c.sent | (1 << d), waiting=c.waiting | (1 << d)))


def _end(cfg, s, ci, commit: bool):
    """EndTxn (TransactionCoordinator.handleEndTransaction, `txn_end_answer`): the client is
    COMMITTING / ABORTING from the first attempt until it is answered, and resends its EndTxn
    after NOT_COORDINATOR (a retry). A Prepare* record, with the epoch `txn_end_epoch` gives, is
    the point of no return; the client is answered once it is committed and goes on with that
    epoch. A retry finds the Prepare* record of its first attempt (CONCURRENT_TRANSACTIONS: not
    enabled until it completes) or its Complete* (answered at once, with the coordinator's
    epoch)."""
    c = s.txn.clients[ci]
    epoch, st, parts, g, _ = txn_state(s, coordinator(s), c.tid)
    retry = c.phase in (COMMITTING, ABORTING)
    verdict = rules.txn_end_answer(c.pe, epoch, st, commit, retry, cfg.fixes)
    if verdict in ("fenced", "invalid") or st == ONGOING and g != c.g:
        return _fence(s, ci)
    c = c._replace(phase=COMMITTING if commit else ABORTING)
    if verdict == "concurrent":
        return _setc(s, ci, c)
    if verdict == "done":
        return _setc(s, ci, c._replace(pe=epoch, phase=READY, g=-1, added=0, sent=0, waiting=0))
    s = _setc(s, ci, c)
    new = rules.txn_end_epoch(epoch, cfg.fixes)
    zombie = int(c.inst < s.txn.newest[c.tid])
    s = _decide(s, c.g, 1 if commit else 2, zombie if commit else 0)
    state = PREPARE_COMMIT if commit else PREPARE_ABORT
    return _request(cfg, s, ci, _END_REQ, new, (c.tid, new, state, parts if st == ONGOING else 0, c.g))


def txn_commit(cfg, s, ci, _):
    return _end(cfg, s, ci, True)


def txn_abort(cfg, s, ci, _):
    return _end(cfg, s, ci, False)


def txn_timeout(cfg, s, ci, d):
    """A batch times out on the client (delivery.timeout.ms) while its request is still in the
    network: the client stops waiting for it; it must abort, or bump its epoch
    (`txn_timeout_reaction`)."""
    c = s.txn.clients[ci]
    phase = c.phase
    if phase in (IN_TXN, MUST_ABORT):
        phase = MUST_BUMP if rules.txn_timeout_reaction(cfg.fixes) == "bump" else MUST_ABORT
    s = _sett(s, timeouts=s.txn.timeouts + 1)
    return _setc(s, ci, c._replace(waiting=c.waiting & ~(1 << d), phase=phase))


def txn_answer(cfg, s, ci, _):
    c = s.txn.clients[ci]
    kind, bi, le, loff, ans = c.req
    b = s.brokers[bi]
    if not (b.alive and b.role == LEADER and b.le == le):
        return _setc(s, ci, c._replace(req=()))          # NOT_COORDINATOR: ask again
    c = c._replace(req=())
    if kind == _INIT_REQ:
        t = s.txn
        s = _sett(s, newest=replace_at(t.newest, c.tid, max(t.newest[c.tid], c.inst)))
        c = c._replace(pe=ans, phase=READY, g=-1, added=0, sent=0, waiting=0)
    elif kind == _ADD_REQ:
        c = c._replace(added=c.added | (1 << ans))
    else:
        c = c._replace(pe=ans, phase=READY, g=-1, added=0, sent=0, waiting=0)
    return _setc(s, ci, c)


def txn_new_instance(cfg, s, tid, _):
    """The application starts a new instance of the transactional.id (the old one is paused,
    not dead: a zombie)."""
    t = s.txn
    inst = max(c.inst for c in t.clients if c.tid == tid) + 1
    return _sett(s, clients=t.clients + (TxnClient(tid, inst, -1, INIT, -1, 0, 0, 0, ()),),
                 zombies=t.zombies + 1)


def txn_send_markers(cfg, s, tid, _):
    """TransactionMarkerChannelManager: WriteTxnMarkers to every partition of a committed Prepare*
    transaction, with the coordinator's epoch (its leader epoch of __transaction_state); a new
    coordinator sends them again."""
    cb = coordinator(s)
    le = s.brokers[cb].le
    epoch, st, parts, g, _ = txn_state(s, cb, tid)
    commit = int(st == PREPARE_COMMIT)
    net = s.txn.net + tuple((1, d, tid, epoch, g, commit, le) for d in bits(parts))
    return _sett(s, net=tuple(sorted(net)), pend=replace_at(s.txn.pend, tid, (le, g, parts)))


def txn_resend_marker(cfg, s, tid, d):
    """The marker request to partition d timed out on the coordinator's side and is sent again;
    the first copy is still in the network and will arrive late."""
    m = next(m for m in s.txn.net if m[0] == 1 and m[1] == d and m[2] == tid)
    return _sett(s, net=tuple(sorted(s.txn.net + (m,))), dups=s.txn.dups + 1)


def txn_complete_transaction(cfg, s, tid, _):
    """Every marker acknowledged: CompleteCommit / CompleteAbort."""
    epoch, st, _parts, g, _ = txn_state(s, coordinator(s), tid)
    done = COMPLETE_COMMIT if st == PREPARE_COMMIT else COMPLETE_ABORT
    s, _, _ = _append_record(cfg, s, tid, epoch, done, 0, g)
    return _sett(s, pend=replace_at(s.txn.pend, tid, ()))


def txn_expire(cfg, s, tid, _):
    """transaction.timeout.ms passed (TransactionCoordinator.abortTimedOutTransactions): the
    coordinator aborts the Ongoing transaction with the epoch bumped, fencing its producer."""
    epoch, _st, parts, g, _ = txn_state(s, coordinator(s), tid)
    s = _decide(s, g, 2)
    s, _, _ = _append_record(cfg, s, tid, epoch + 1, PREPARE_ABORT, parts, g)
    return _sett(s, timeouts=s.txn.timeouts + 1)


def txn_deliver(cfg, s, d, m):
    """A Produce or WriteTxnMarkers request reaches data partition d's leader."""
    t = s.txn
    net = list(t.net)
    net.remove(m)
    s = _sett(s, net=tuple(net))
    log = t.logs[d]
    if m[0] == 0:
        _, _, ci, pe, g, _, _ = m
        c = t.clients[ci]
        epoch, _first, _oe, _ce = rules.txn_partition_state(log, c.tid)
        view = coordinator_view(s, c.tid) or (-1, -1, 0)
        verdict = rules.txn_produce_verdict(epoch, pe, view, d, cfg.fixes)
        if verdict == "append":
            fenced = int(c.inst < t.newest[c.tid])
            s = _set_log(s, d, log + ((0, c.tid, pe, g, fenced),))
        if c.g == g and (c.waiting >> d) & 1:
            c = c._replace(waiting=c.waiting & ~(1 << d))
            if verdict == "fenced":
                c = c._replace(phase=FENCED, req=())
            elif verdict == "unverified" and c.phase == IN_TXN:
                c = c._replace(phase=MUST_ABORT)
            s = _setc(s, ci, c)
        return s
    _, _, tid, epoch, g, commit, cep = m
    p_epoch, _first, open_epoch, last_cep = rules.txn_partition_state(log, tid)
    verdict = rules.txn_marker_verdict(p_epoch, open_epoch, last_cep, epoch, cep, cfg.fixes)
    if verdict == "append":
        s = _set_log(s, d, log + ((1 if commit else 2, tid, epoch, cep, 0),))
    pend = s.txn.pend[tid]
    if pend and pend[0] == cep and pend[1] == g:
        s = _sett(s, pend=replace_at(s.txn.pend, tid, (cep, g, pend[2] & ~(1 << d))))
    return s


def _set_log(s: State, d: int, log: tuple) -> State:
    t = s.txn
    lso = replace_at(t.lso, d, max(t.lso[d], rules.last_stable_offset(log)))
    return _sett(s, logs=replace_at(t.logs, d, log), lso=lso)


STEPS = {"TxnInitProducerId": txn_init_producer_id, "TxnBegin": txn_begin,
         "TxnAddPartition": txn_add_partition, "TxnProduce": txn_produce,
         "TxnCommit": txn_commit, "TxnAbort": txn_abort, "TxnTimeout": txn_timeout,
         "TxnAnswer": txn_answer, "TxnNewInstance": txn_new_instance,
         "TxnSendMarkers": txn_send_markers, "TxnResendMarker": txn_resend_marker,
         "TxnCompleteTransaction": txn_complete_transaction, "TxnExpire": txn_expire,
         "TxnDeliver": txn_deliver}
