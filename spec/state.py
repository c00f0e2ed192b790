"""The model's state: immutable, hashable tuples (NamedTuple), compact so the checker can hash
millions of them. Sets of brokers and of records are bitmasks; -1 means "none".

One partition, replicated on every broker. Records are numbered 0.. in the order clients send
them; a log entry is (record, leader_epoch). Every part of the state is declared here (the
clients' too: Prod, Cons, Grp), with its one-line description for traces (`summary`; the
clients' lines are spec/clients_view.py's); the transitions are spec/model.py's,
spec/producer.py's and spec/group.py's.
"""
from __future__ import annotations

from typing import NamedTuple

from spec.clients_view import client_lines
from spec.codes import TXN_STATES, txn_record

NONE, FOLLOWER, LEADER = 0, 1, 2
ROLE_NAMES = ("-", "follower", "leader")


class Broker(NamedTuple):
    alive: bool
    paused: bool
    gen: int            # incarnation: bumps on every restart/re-registration (its ZK session number)
    log: tuple          # ((record, epoch), ...)
    flushed: int        # length of the log prefix that is on stable storage
    hw: int             # high watermark (exclusive), checkpointed with the log
    cache: tuple        # leader-epoch cache ((epoch, start_offset), ...), ascending
    le: int             # leader epoch of the newest control request accepted (-1 after restart)
    role: int           # NONE / FOLLOWER / LEADER
    leader: int         # the leader this broker follows (-1 none)
    ver: int            # partition-state version known from the controller
    isr: int            # (leader) ISR as confirmed by the controller
    pending: int        # (leader) proposed ISR awaiting the controller, -1 none
    pos: tuple          # (leader) follower fetch positions per broker, -1 unknown; () otherwise
    trunc: bool         # (follower) must truncate before fetching
    fetch: tuple        # in-flight fetch response: (src, epoch, offset, records, hw, out_of_range) or ()
    ce: int             # newest controller epoch this broker has seen
    ctl: int            # controller epoch this broker believes it controls with (0: not controller)
    ctl_cache: tuple    # controller's cache: (leader, le, isr, ver, handled_sessions) or ()
    pend_acks: int      # (leader) records appended with acks=all awaiting the high watermark
    pend_gen: int       # (leader) broker epoch (session) of the follower a pending ISR expansion adds,
                        # as its fetch carried it (KIP-903); 0 for a shrink or no proposal
    resp: int           # (leader) AlterIsr response in flight: -1 none, -2 rejected, else the
                        # partition-state version the controller committed the proposal as

    @property
    def leo(self) -> int:
        return len(self.log)


class Zk(NamedTuple):
    """The coordination store: /controller, /controller_epoch, partition state, /brokers/ids."""
    controller: int     # ephemeral /controller owner, -1 none
    ce: int             # /controller_epoch
    leader: int
    le: int
    isr: int
    ver: int            # partition state znode version (compare-and-set)
    sessions: tuple     # /brokers/ids/N: session number per broker, 0 = not registered
    lsess: int          # the leader's session when it was elected (its broker epoch, KIP-380)
    elr: int            # eligible leader replicas (KIP-966), 0 without that fix
    lkelr: int          # last known ELR (KIP-966): who may still hold committed data when ISR and
                        # ELR are both empty; 0 without that fix
    unclean: int        # brokers registered after an unclean shutdown, not yet handled by a
                        # controller (KAFKA-15586: the registration says so); 0 without KIP-966


class Prod(NamedTuple):
    """One producer and its connection (spec/producer.py owns the transitions)."""
    pe: int             # producer epoch from InitProducerId (-1: none yet, or not idempotent)
    nxt: int            # records handed to the producer so far (send order = record index)
    seqn: int           # next sequence number to assign
    lack: int           # last acknowledged sequence number (-1 none)
    bump: int           # KIP-360: -1 nothing pending; -2 an epoch bump is required (done once
                        # nothing is in flight); n >= 0 sequence n is unresolved (a batch failed
                        # with its outcome unknown): resolved once no sent batch is unfinished,
                        # by an acknowledgement at or past n, else by an epoch bump
    batches: tuple      # unfinished batches, oldest first: (record, seq, tries, in_flight)
    reqs: tuple         # the connection, in order: (record, seq, pe, broker, le, wid, offset);
                        # wid -1: not yet handled, else appended as write wid at offset and
                        # awaiting the high watermark (acks=all: the channel is muted meanwhile)
    resps: tuple        # responses on their way back, in order: (record, code, offset)
    out: tuple          # per record sent: -1 open, -2 failed, -3 unknown (acks=0), else its offset


class Cons(NamedTuple):
    """One consumer of the group (spec/group.py owns the transitions)."""
    alive: bool
    gen: int        # generation it believes it is in (-1: not a member)
    pos: int        # next offset to read (-1: must fetch the committed offset first)
    held: int       # offset of the record polled and not yet finished (-1 none)
    stage: int      # 0 ready to poll; 1 polled; 2 processed (awaits commit, commit=after);
                    # 3 committed (awaits processing, commit=before)
    commit: tuple   # the commit in flight: (generation, offset, broker, le, wid, log offset,
                    # stale) with wid -1 before the coordinator handled it; stale: the
                    # group's generation had moved on when it was sent (ghost); () none


class Grp(NamedTuple):
    """The consumer group and its ghosts (spec/group.py owns the transitions)."""
    gen: int        # the group's generation (bumped by every rebalance)
    owner: int      # the member the current generation assigns the data partition to (-1 none)
    cons: tuple     # (Cons, ...)
    processed: tuple  # ghost: times each data record was processed (capped at 2)
    hi: int         # ghost: highest committed offset acknowledged to the group
    fenced: int     # ghost: 1 once a commit of a fenced generation was acknowledged


class TxnClient(NamedTuple):
    """One producer instance with a transactional.id (spec/transaction.py owns the transitions).
    A new instance of the same id (`zombies`) leaves the old one running: the zombie."""
    tid: int        # its transactional.id (an index)
    inst: int       # incarnation of that id: the newest one is live, older ones are zombies
    pe: int         # producer epoch it holds (-1: InitProducerId not yet answered)
    phase: int      # TXN_PHASES: init, ready, in-txn, must-abort, must-bump, fenced,
                    # committing, aborting (EndTxn sent, resent until answered)
    g: int          # ghost: its current transaction (index into Txn.ghosts), -1 none
    added: int      # partitions the coordinator confirmed for this transaction (mask)
    sent: int       # partitions it has written to in this transaction (mask)
    waiting: int    # partitions whose produce awaits its answer (mask)
    req: tuple      # coordinator request awaiting the __transaction_state HW:
                    # (kind, broker, leader epoch, log offset, answer) or ()


class Txn(NamedTuple):
    """Transactions: clients, data partitions, the network between them, the coordinator's
    in-memory marker bookkeeping, and ghosts. The coordinator's transaction state itself lives
    only in the __transaction_state log (the replicated partition), so a new coordinator has
    exactly what its log holds."""
    clients: tuple  # (TxnClient, ...)
    logs: tuple     # per data partition: ((kind, tid, epoch, a, b), ...): kind 0 data (a: ghost
                    # transaction, b: 1 if written by an already fenced instance), 1 COMMIT
                    # marker, 2 ABORT marker (a: coordinator epoch)
    net: tuple      # requests in flight, sorted, with repeats: (0, partition, client, epoch,
                    # ghost, 0, 0) a Produce; (1, partition, tid, epoch, ghost, commit,
                    # coordinator epoch) a WriteTxnMarkers
    pend: tuple     # per tid: (coordinator epoch, ghost, partitions not yet acknowledged) for
                    # markers the coordinator sent, or ()
    ghosts: tuple   # per transaction begun: (tid, instance, outcome 0 open / 1 commit / 2 abort,
                    # 1 if committed by an instance already fenced, the input offset it
                    # consumed or -1); with consume-transform-produce the last log is the
                    # group's __consumer_offsets partition, its batches the offset commits
    begun: tuple    # per tid: transactions begun (bounded by txn_rounds)
    newest: tuple   # per tid: the newest instance
    timeouts: int   # client and coordinator timeouts so far
    dups: int       # marker resends so far
    zombies: int    # new instances so far
    lso: tuple      # ghost: per partition, the highest last stable offset so far


class State(NamedTuple):
    brokers: tuple      # (Broker, ...)
    zk: Zk
    msgs: tuple         # in-flight LeaderAndIsr requests, sorted: (dst, ce, le, leader, isr, ver)
    acked: int          # records acknowledged to the client with acks=all
    produced: int       # records sent so far
    exposed: tuple      # ghost: longest log prefix ever exposed to consumers (records below a leader HW)
    epoch_leaders: tuple  # ghost: per leader epoch, the mask of brokers that acted as its leader
    crashes: int        # fault counters, bounded by the config
    pauses: int
    elections: int
    losses: int
    lossy: int          # crashes that lost unflushed data (or a whole disk)
    doomed: int         # ghost: records every holder lost to power or disk loss (Kafka's only
                        # durability exemption without fsync); invariants do not ask for them
    damaged: int        # ghost: ISR members that lost data in a crash and are still in the
                        # controller's ISR (the controller has not yet removed them)
    # --- clients (empty without producers and consumers) ---
    writes: tuple = ()  # per write id (the record number in logs): (producer, record, epoch, seq)
                        # for a producer's batch, (-1, offset, generation, member) for an offset
                        # commit; the batch metadata a log carries, so a leader can rebuild its
                        # producer state from its log
    prods: tuple = ()   # (Prod, ...)
    grp: tuple = ()     # consumer group (spec/group.py), () without consumers
    txn: tuple = ()     # transactions (spec/transaction.py), () without them



def _field_replacer(cls):
    """`_replace` for one of the state's NamedTuples, as collections' but in one pass over the
    fields named (collections' pops every field from the keywords and builds through `_make`):
    the transitions call it about ten times per successor. Same result, same ValueError for an
    unknown field."""
    index = {f: k for k, f in enumerate(cls._fields)}
    new = tuple.__new__

    def _replace(self, **changes):
        vals = list(self)
        for name, v in changes.items():
            k = index.get(name, -1)
            if k < 0:
                raise ValueError(f"Got unexpected field names: {[name]!r}")
            vals[k] = v
        return new(cls, vals)

    _replace.__doc__ = f"A new {cls.__name__} with the fields named replaced."
    return _replace


def _plain_args(self) -> tuple:
    """What pickle rebuilds the NamedTuple from (collections' `__getnewargs__`, compiled with the
    model: the explorer pickles its frontier)."""
    return tuple(self)


# Set after the class statements: typing.NamedTuple refuses these names in a class body.
for _cls in (Broker, Zk, Prod, Cons, Grp, TxnClient, Txn, State):
    _cls._replace = _field_replacer(_cls)
    _cls.__getnewargs__ = _plain_args


def bits(mask: int) -> list[int]:
    if mask < 0:
        raise ValueError(f"not a set mask: {mask}")
    out, i = [], 0
    while mask:
        if mask & 1:
            out.append(i)
        mask >>= 1
        i += 1
    return out


def mask_str(mask: int) -> str:
    return "{" + ",".join(str(i) for i in bits(mask)) + "}"


def initial(cfg) -> State:
    """Broker 0 leads epoch 0 with every broker in the ISR; the last broker is the controller
    (controller epoch 1). Everyone has accepted the controller's first LeaderAndIsr."""
    n = cfg.brokers
    everyone = (1 << n) - 1
    ctl = n - 1
    sessions = tuple(2 for _ in range(n))
    brokers = []
    for b in range(n):
        lead = b == 0
        brokers.append(Broker(
            alive=True, paused=False, gen=2, log=(), flushed=0, hw=0,
            cache=((0, 0),) if lead else (), le=0, role=LEADER if lead else FOLLOWER, leader=0,
            ver=0, isr=everyone if lead else 0, pending=-1,
            pos=tuple(0 if i == 0 else -1 for i in range(n)) if lead else (),
            trunc=False, fetch=(), ce=1, ctl=1 if b == ctl else 0,
            ctl_cache=(0, 0, everyone, 0, sessions) if b == ctl else (), pend_acks=0, pend_gen=0, resp=-1))
    zk = Zk(controller=ctl, ce=1, leader=0, le=0, isr=everyone, ver=0, sessions=sessions, lsess=2,
            elr=0, lkelr=0, unclean=0)
    prods = tuple(Prod(pe=-1, nxt=0, seqn=0, lack=-1, bump=-1, batches=(), reqs=(), resps=(),
                       out=()) for _ in range(getattr(cfg, "producers", 0)))
    s = State(brokers=tuple(brokers), zk=zk, msgs=(), acked=0, produced=0, exposed=(),
              epoch_leaders=(1,), crashes=0, pauses=0, elections=0, losses=0, lossy=0,
              doomed=0, damaged=0, prods=prods)
    if getattr(cfg, "consumers", 0):
        s = s._replace(grp=initial_group(cfg))
    if getattr(cfg, "transactions", 0):
        s = s._replace(txn=initial_txn(cfg))
    return s


def initial_txn(cfg) -> Txn:
    """One instance per transactional.id, not yet initialised; empty data partitions."""
    n, parts = cfg.transactions, cfg.txn_partitions + int(cfg.consume_transform_produce)
    return Txn(clients=tuple(TxnClient(t, 0, -1, 0, -1, 0, 0, 0, ()) for t in range(n)),
               logs=((),) * parts, net=(), pend=((),) * n, ghosts=(), begun=(0,) * n,
               newest=(0,) * n, timeouts=0, dups=0, zombies=0, lso=(0,) * parts)


def initial_group(cfg) -> Grp:
    """Consumers not yet members of the group, nothing processed or committed."""
    return Grp(gen=0, owner=-1,
               cons=tuple(Cons(True, -1, -1, -1, 0, ()) for _ in range(cfg.consumers)),
               processed=(0,) * cfg.records, hi=0, fenced=0)


def write_name(r: int, writes: tuple = ()) -> str:
    """A log entry's name: r<n> for the implicit client's records; with clients, p<producer>.<record>
    for a producer's batch (its sequence number after '#', with idempotence) and c<offset>/g<gen>
    for an offset commit."""
    if r >= len(writes):
        return f"r{r}"
    p, k, pe, seq = writes[r]
    if p == -2:
        state, parts, g = txn_record(seq)
        return (f"t{k}:{TXN_STATES[state]}/e{pe}" + (f"/T{g}" if g >= 0 else "")
                + ("{" + ",".join(f"d{d}" for d in bits(parts)) + "}" if parts else ""))
    if p < 0:
        return f"commit{k}/g{pe}"
    return f"p{p}.{k}" + (f"#{pe}.{seq}" if seq >= 0 else "")


def _log_str(log: tuple, writes: tuple = ()) -> str:
    return "[" + " ".join(f"{write_name(r, writes)}@e{e}" for r, e in log) + "]"


def describe_broker(i: int, b: Broker, writes: tuple = ()) -> str:
    if not b.alive:
        status = "down"
    else:
        status = ROLE_NAMES[b.role] + ("(paused)" if b.paused else "")
        if b.role == FOLLOWER:
            status += f" of {b.leader}" if b.leader >= 0 else " of none"
            if b.trunc:
                status += " must-truncate"
    s = f"b{i} {status} le={b.le} {_log_str(b.log, writes)} hw={b.hw}"
    if b.flushed < b.leo:
        s += f" flushed={b.flushed}"
    if b.role == LEADER and b.alive:
        s += f" isr={mask_str(b.isr)}"
        if b.pending >= 0:
            s += f" proposed={mask_str(b.pending)}"
            if b.resp != -1:
                s += " (controller: " + ("rejected" if b.resp == -2 else "committed") + ")"
    if b.ctl:
        s += f" controller(ce={b.ctl})"
    return s


def summary(s: State) -> dict:
    """The per-step state summary written to traces: small and readable."""
    zk = s.zk
    elr = f" elr={mask_str(zk.elr)}" if zk.elr else ""
    if zk.lkelr:
        elr += f" last-known-elr={mask_str(zk.lkelr)}"
    out = {
        "zk": f"controller={zk.controller} ce={zk.ce} leader={zk.leader} le={zk.le} "
              f"isr={mask_str(zk.isr)}{elr} v{zk.ver}",
        "brokers": [describe_broker(i, b, s.writes) for i, b in enumerate(s.brokers)],
        "acked": [f"r{r}" for r in bits(s.acked)],
        "in_flight": len(s.msgs),
    }
    if s.prods or s.grp or s.txn:
        out["clients"] = client_lines(s)
    return out


def describe_state(s: State) -> str:
    sm = summary(s)
    return "; ".join([sm["zk"]] + sm["brokers"]) + f"; acked={sm['acked']}"
