"""The producer pipeline, composed with the replication model: the transitions of producers and
of their produce requests at the brokers. Every protocol decision is a rule of spec/rules.py
(sequence check, the producer's reaction to errors, the HW and ISR rules it shares with the
implicit client); this file only moves data.

A producer hands records to its sender in order (record k is the k-th send), keeps at most
`max_in_flight` batches in flight on its one connection (a batch is one record), retries a
failed batch while its budget lasts, and with `idempotent-producer` numbers batches under a
producer id and epoch. The connection is in order: the broker handles the head request, and
with acks=all the channel stays muted until that request's answer is sent (Kafka's
SocketServer processes one request per connection at a time). A connection can drop
(`Disconnect`, bounded by `losses`): requests not yet handled are lost, answers not yet read
are lost, and every batch in flight fails with a network error — also those already appended.
"""
from __future__ import annotations

from spec import rules
from spec.actions import Action
from spec.state import LEADER, Prod, State
from spec.updates import advance_hw, durable, is_up, replace_at

CLIENT_KINDS = ("InitProducerId", "Send", "HandleProduce", "CompleteProduce", "Receive",
                "Disconnect", "BumpEpoch")



def _in_flight(p: Prod) -> int:
    return sum(1 for b in p.batches if b[3])


def _targets(s: State) -> list[int]:
    """Where a producer may send: the leader its metadata names (the controller's choice, which
    may not know it leads yet) or any broker acting as leader (metadata may be stale)."""
    out = {s.zk.leader} if s.zk.leader >= 0 else set()
    for i, b in enumerate(s.brokers):
        if b.alive and b.role == LEADER:
            out.add(i)
    return sorted(out)


def enabled(cfg, s: State) -> list[Action]:
    out: list[Action] = []
    idem = cfg.idempotence
    for pi, p in enumerate(s.prods):
        if idem and p.pe < 0:
            out.append(Action("InitProducerId", pi))
            continue
        queued = any(not b[3] for b in p.batches)
        if (p.bump != -2 and _in_flight(p) < cfg.max_in_flight
                and (queued or p.nxt < cfg.records)):
            out.extend(Action("Send", pi, t) for t in _targets(s))
        if p.reqs:
            r = p.reqs[0]
            if r[5] < 0:
                if is_up(s.brokers[r[3]]):
                    out.append(Action("HandleProduce", pi))
            elif _answer(cfg, s, r) is not None:
                out.append(Action("CompleteProduce", pi))
        if p.resps:
            out.append(Action("Receive", pi))
        if (p.reqs or p.resps) and s.losses < cfg.losses:
            out.append(Action("Disconnect", pi))
        if p.bump == -2 and not _in_flight(p) or p.bump >= 0 and not any(
                b[2] or b[3] for b in p.batches):
            out.append(Action("BumpEpoch", pi))
    return out


def _answer(cfg, s: State, r: tuple) -> int | None:
    """The answer to a request awaiting the high watermark, once there is one: OK when the
    leader's HW passed the write (NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank below
    min.insync.replicas meanwhile: rules.ack_succeeds); NOT_LEADER when the broker no longer
    leads that epoch (the delayed produce is completed with an error on becoming follower)."""
    _k, _seq, _pe, bi, le, _wid, off = r
    b = s.brokers[bi]
    if not (b.alive and b.role == LEADER and b.le == le):
        return rules.NOT_LEADER
    if b.hw > off:
        return rules.OK if rules.ack_succeeds(b, cfg.min_isr, cfg.fixes) else rules.NOT_ENOUGH_REPLICAS
    return None


def _setp(s: State, pi: int, p: Prod) -> State:
    return s._replace(prods=replace_at(s.prods, pi, p))


def init_producer_id(cfg, s, pi, _):
    return _setp(s, pi, s.prods[pi]._replace(pe=0))


def send(cfg, s, pi, target):
    p = s.prods[pi]
    idx = next((n for n, b in enumerate(p.batches) if not b[3]), -1)
    if idx >= 0:                                   # a retried batch goes first (reenqueue)
        k, seq, tries, _ = p.batches[idx]
        batches = replace_at(p.batches, idx, (k, seq, tries, True))
        p = p._replace(batches=batches)
    else:
        k = p.nxt
        seq = p.seqn if cfg.idempotence else -1
        p = p._replace(nxt=k + 1, seqn=p.seqn + (seq >= 0), out=p.out + (-1,),
                       batches=p.batches + ((k, seq, 0, True),))
    req = (k, seq, p.pe, target, -1, -1, -1)
    if cfg.acks == "0":
        # Fire and forget: the batch is done at once, its outcome unknown to the producer.
        p = p._replace(batches=tuple(b for b in p.batches if b[0] != k),
                       out=replace_at(p.out, k, -3))
    return _setp(s, pi, p._replace(reqs=p.reqs + (req,)))


def handle_produce(cfg, s, pi, _):
    """Partition.appendRecordsToLeader for the head request: NOT_LEADER unless the broker leads;
    NOT_ENOUGH_REPLICAS for acks=all below min ISR; the sequence check; then the append."""
    p = s.prods[pi]
    k, seq, pe, bi, _, _, _ = p.reqs[0]
    b = s.brokers[bi]
    rest = p.reqs[1:]
    code = None
    if b.role != LEADER:
        code = rules.NOT_LEADER
    elif not rules.produce_allowed(b, cfg.acks, cfg.min_isr, cfg.fixes):
        code = rules.NOT_ENOUGH_REPLICAS
    if code is None:
        verdict, off = rules.check_sequence(b.log, s.writes, pi, pe, seq, cfg.fixes)
        if verdict == "out-of-order":
            code = rules.OUT_OF_ORDER_SEQUENCE
        elif verdict == "duplicate":
            wid = b.log[off][0]
            if cfg.acks == "all":
                return _setp(s, pi, p._replace(reqs=((k, seq, pe, bi, b.le, wid, off),) + rest))
            return _setp(s, pi, p._replace(reqs=rest, resps=p.resps + ((k, rules.OK, off),)))
    if code is not None:
        if cfg.acks == "0":
            return _setp(s, pi, p._replace(reqs=rest))
        return _setp(s, pi, p._replace(reqs=rest, resps=p.resps + ((k, code, -1),)))
    wid = s.produced
    off = b.leo
    log = b.log + ((wid, b.le),)
    nb = durable(cfg, b._replace(log=log, cache=rules.cache_assign(b.cache, b.le, b.leo),
                                  pos=replace_at(b.pos, bi, len(log))))
    s = s._replace(brokers=replace_at(s.brokers, bi, nb), produced=wid + 1,
                   writes=s.writes + ((pi, k, pe, seq),))
    if cfg.acks == "all":
        p = p._replace(reqs=((k, seq, pe, bi, b.le, wid, off),) + rest)
    elif cfg.acks == "1":
        p = p._replace(reqs=rest, resps=p.resps + ((k, rules.OK, off),))
    else:
        p = p._replace(reqs=rest)
    return advance_hw(cfg, _setp(s, pi, p), bi)


def complete_produce(cfg, s, pi, _):
    p = s.prods[pi]
    r = p.reqs[0]
    code = _answer(cfg, s, r)
    wid, off = r[5], r[6]
    if code == rules.OK:
        s = s._replace(acked=s.acked | (1 << wid))    # acknowledged with acks=all: AckedDurable
    return _setp(s, pi, p._replace(reqs=p.reqs[1:],
                                   resps=p.resps + ((r[0], code, off if code == rules.OK else -1),)))


def _fail_batch(cfg, p: Prod, k: int, code: int) -> Prod:
    idx = next(n for n, b in enumerate(p.batches) if b[0] == k)
    _, seq, tries, _ = p.batches[idx]
    what = rules.producer_reaction(code, seq, p.lack, tries, cfg.retries, cfg.fixes)
    if what == "fail":
        p = p._replace(batches=p.batches[:idx] + p.batches[idx + 1:], out=replace_at(p.out, k, -2))
        if cfg.idempotence and p.bump != -2:
            # its sequence is unresolved: it may or may not be in the log (markSequenceUnresolved)
            p = p._replace(bump=seq if p.bump == -1 else min(p.bump, seq))
        return p
    p = p._replace(batches=replace_at(p.batches, idx, (k, seq, tries + 1, False)))
    return p._replace(bump=-2) if what == "bump" else p


def receive(cfg, s, pi, _):
    p = s.prods[pi]
    k, code, off = p.resps[0]
    p = p._replace(resps=p.resps[1:])
    if code == rules.OK:
        idx = next(n for n, b in enumerate(p.batches) if b[0] == k)
        seq = p.batches[idx][1]
        p = p._replace(batches=p.batches[:idx] + p.batches[idx + 1:], out=replace_at(p.out, k, off),
                       lack=max(p.lack, seq))
    else:
        p = _fail_batch(cfg, p, k, code)
    return _setp(s, pi, p)


def disconnect(cfg, s, pi, _):
    p = s.prods[pi]
    p = p._replace(reqs=(), resps=())
    for b in [b for b in p.batches if b[3]]:
        p = _fail_batch(cfg, p, b[0], rules.NETWORK)
    return _setp(s, pi, p)._replace(losses=s.losses + 1)


def bump_epoch(cfg, s, pi, _):
    """TransactionManager.maybeResolveSequences and bumpIdempotentEpochAndResetIdIfNeeded
    (KIP-360): an unresolved sequence that a later acknowledgement covered is resolved (the
    broker had it); otherwise the producer bumps its epoch locally and renumbers the unfinished
    batches from sequence 0 in their order."""
    p = s.prods[pi]
    if p.bump >= 0 and rules.sequence_resolved(p.bump, p.lack):
        return _setp(s, pi, p._replace(bump=-1))
    batches = tuple((k, n, tries, fl) for n, (k, _, tries, fl) in enumerate(p.batches))
    return _setp(s, pi, p._replace(pe=p.pe + 1, seqn=len(batches), lack=-1, bump=-1,
                                   batches=batches))


STEPS = {"InitProducerId": init_producer_id, "Send": send, "HandleProduce": handle_produce,
         "CompleteProduce": complete_produce, "Receive": receive, "Disconnect": disconnect,
         "BumpEpoch": bump_epoch}
