"""A model run written as a client history (traces/history.py format), so that the history
checkers and the model judge the same run. Lives in checkers/: spec/ stays pure.

Mapping (one event time per model step, `mono_ns` = 1000 * step):
- producers: a `producer_config` first; a `send` is invoked when the record is first handed to
  the sender (value `p<producer>-<record>`, partition 0 of topic "t") and completes `ok` with
  the acknowledged offset, or `info` when it failed (a failed batch may still have been
  written: NOT_ENOUGH_REPLICAS_AFTER_APPEND, a dropped connection) or was sent with acks=0;
- what consumers can read (the model's `exposed` prefix): a reader process polls each record
  as it becomes readable, and a final read of the whole prefix ends the run;
- consumer groups: the data partition's records are sent (and acknowledged) first by a loader
  process; a `Join` is an `assign` of generation g (one process per consumer incarnation, with
  the group's declared delivery mode: commit after processing = at-least-once, before =
  at-most-once); a record is `poll`ed when the application processes it (the model's `Process`:
  the delivery the modes speak of); a `Commit` invokes a `commit` of the offset with the
  member's generation, completed `ok` when acknowledged, `fail` when refused unwritten, `info`
  when refused after the append (it may survive in the log).
- transactions (format version 2; without consume-transform-produce): one process per producer
  instance (200 + its index; a zombie's new instance is a new process), whose `producer_config`
  with `transactional_id` "t<id>" completes when InitProducerId is first answered; a `TxnProduce`
  is a `send` with `txn` = transaction index + 1 (value `x<transaction>-<partition>`, topic "t",
  the data partition), completed `ok` with the offset when the partition leader appends it,
  `fail` when it refuses it, `info` when the client times it out; `TxnCommit` / `TxnAbort` are
  `txn_commit` / `txn_abort` operations (one per transaction, the client's NOT_COORDINATOR
  retries inside it), completed `ok` when answered, and when the client is fenced `info` if
  its Prepare record was written (the transaction may commit) else `fail`; a reader process
  polls with the configured `isolation` what `rules.read_committed` returns as it becomes
  readable, and a read per partition ends the run (final when no transaction is open there). Markers, control records and offsets
  they take are the brokers' and never appear: read_committed reads skip them, as in Kafka.

`expected_anomalies(cfg, violation)` says which anomaly the history checkers must report for
a model violation: the contract the differential test holds both sides to.
"""
from __future__ import annotations

from spec import Action, Config, State, rules
from spec.transaction import FENCED, READY
from traces.history import TXN_VERSION, VERSION, History, make_header, pair

TOPIC = "t"
DATA_TOPIC = "d"
GROUP = "g"
READER, LOADER = 900, 901
TXN_PROC, TXN_READER = 200, 910

# model invariant -> the anomaly a client history shows for it
ANOMALY_OF = {
    "ProducerExactlyOnce": "duplicate",
    "ProducerSendOrder": "send-reorder",
    "GroupFencedNeverCommits": "fenced-commit",
    "GroupAtLeastOnce": "delivery-at-least-once",
    "GroupAtMostOnce": "delivery-at-most-once",
}
# what a client history shows for TxnAtomicVisibility (a read_committed read of an aborted or
# undecided transaction's record; a committed one seen in part)
TXN_ANOMALIES = ("G1a", "precommitted-read", "txn-atomicity")


class _Rec:
    def __init__(self):
        self.events: list[dict] = []
        self.next_id = 0

    def invoke(self, t: int, process: int, f: str, **fields) -> int:
        i = self.next_id
        self.next_id += 1
        self.events.append({"id": i, "type": "invoke", "process": process, "f": f, **fields,
                            "mono_ns": t})
        return i

    def complete(self, t: int, i: int, process: int, f: str, typ: str, **fields) -> None:
        self.events.append({"id": i, "type": typ, "process": process, "f": f, **fields,
                            "mono_ns": t})


def _value(s: State, wid: int) -> str:
    p, k, _, _ = s.writes[wid]
    return f"p{p}-{k}"


def history_of_run(cfg: Config, init: State, path: list[Action], states: list[State],
                   trace_id: str = "model") -> History:
    rec = _Rec()
    t = 1000
    for p in range(len(init.prods)):
        i = rec.invoke(t, p, "producer_config", retries=cfg.retries, max_in_flight=cfg.max_in_flight,
                       idempotence=cfg.idempotence, acks="all" if cfg.acks == "all" else cfg.acks)
        rec.complete(t, i, p, "producer_config", "ok")
    sends: dict[tuple, int] = {}
    ncons = len(init.grp.cons) if init.grp else 0
    procs = {c: 100 + c for c in range(ncons)}     # consumer -> its incarnation's process
    next_proc = [100 + ncons]
    commits: dict[int, int] = {}     # consumer -> open commit op id
    mode = "at-least-once" if cfg.commit == "after" else "at-most-once"
    if init.grp:
        for d in range(cfg.records):
            i = rec.invoke(t, LOADER, "send", topic=DATA_TOPIC, partition=0, value=f"d{d}")
            rec.complete(t, i, LOADER, "send", "ok", offset=d)
    txn = _TxnRec()
    if init.txn:
        for ci, c in enumerate(init.txn.clients):
            txn.start(cfg, rec, t, ci, c.tid)
    prev = init
    for n, (a, s) in enumerate(zip(path, states), 1):
        t = 1000 * (n + 1)
        # producers: new sends and completions
        for p, (pp, sp) in enumerate(zip(prev.prods, s.prods)):
            for k in range(len(pp.out), len(sp.out)):
                sends[(p, k)] = rec.invoke(t, p, "send", topic=TOPIC, partition=0, value=f"p{p}-{k}")
            for k, o in enumerate(sp.out):
                before = pp.out[k] if k < len(pp.out) else -1
                if o != before and o != -1:
                    if o >= 0:
                        rec.complete(t, sends[(p, k)], p, "send", "ok", offset=o)
                    else:
                        rec.complete(t, sends[(p, k)], p, "send", "info",
                                     error="acks=0" if o == -3 else "retries exhausted")
        # readable prefix: the reader polls what became readable
        if init.prods and len(s.exposed) > len(prev.exposed):
            offs = list(range(len(prev.exposed), len(s.exposed)))
            vals = [_value(s, s.exposed[o]) for o in offs]
            i = rec.invoke(t, READER, "poll", topic=TOPIC, partition=0)
            rec.complete(t, i, READER, "poll", "ok", offsets=offs, values=vals)
        if s.grp:
            _group_events(rec, t, a, prev, s, procs, next_proc, commits, mode)
        if s.txn:
            _txn_events(cfg, rec, t, a, prev, s, txn)
        prev = s
    t = 1000 * (len(path) + 2)
    if init.prods:
        offs = list(range(len(prev.exposed)))
        i = rec.invoke(t, READER + 1, "poll", topic=TOPIC, partition=0, final=True)
        rec.complete(t, i, READER + 1, "poll", "ok", offsets=offs,
                     values=[_value(prev, prev.exposed[o]) for o in offs])
    if init.grp:
        i = rec.invoke(t, READER + 1, "poll", topic=DATA_TOPIC, partition=0, final=True)
        rec.complete(t, i, READER + 1, "poll", "ok", offsets=list(range(cfg.records)),
                     values=[f"d{d}" for d in range(cfg.records)])
    if init.txn:
        for d in range(cfg.txn_partitions):
            log = prev.txn.logs[d]
            offs = list(rules.read_committed(log, cfg.isolation))
            # final only once no transaction is open there: a committed transaction whose
            # markers are still on their way is not yet readable (the client's commit returns
            # once the Prepare record is written), so a run cut short is not a final read
            stable = rules.last_stable_offset(log) == len(log)
            i = rec.invoke(t, TXN_READER + 1, "poll", topic=TOPIC, partition=d,
                           isolation=cfg.isolation, **({"final": True} if stable else {}))
            rec.complete(t, i, TXN_READER + 1, "poll", "ok", offsets=offs,
                         values=[_txn_value(log, o, d) for o in offs])
    header = make_header(trace_id, TXN_VERSION if init.txn else VERSION, source="model",
                         config=cfg.to_json())
    return pair("<model run>", header, [(f"event {n}", e) for n, e in enumerate(rec.events, 1)])


def _group_events(rec: _Rec, t: int, a: Action, prev: State, s: State, procs: dict,
                  next_proc: list, commits: dict, mode: str) -> None:
    ci = a.b
    if a.kind == "Join":
        proc = procs[ci]
        i = rec.invoke(t, proc, "assign", topic=DATA_TOPIC, partition=0, group=GROUP, delivery=mode)
        rec.complete(t, i, proc, "assign", "ok", generation=s.grp.gen)
    elif a.kind == "ConsumerCrash":
        procs.pop(ci, None)          # its open operations never complete (info)
        commits.pop(ci, None)
    elif a.kind == "ConsumerRestart":
        procs[ci] = next_proc[0]
        next_proc[0] += 1
    elif a.kind == "Process":
        d = prev.grp.cons[ci].held
        proc = procs[ci]
        i = rec.invoke(t, proc, "poll", topic=DATA_TOPIC, partition=0)
        rec.complete(t, i, proc, "poll", "ok", offsets=[d], values=[f"d{d}"])
    elif a.kind == "Commit":
        gen, off = s.grp.cons[ci].commit[:2]
        commits[ci] = rec.invoke(t, procs[ci], "commit", topic=DATA_TOPIC, partition=0, group=GROUP,
                                 generation=gen, offset=off)
    elif a.kind in ("HandleCommit", "CompleteCommit") and not s.grp.cons[ci].commit:
        i = commits.pop(ci)
        ok = s.grp.cons[ci].gen >= 0
        if ok:
            rec.complete(t, i, procs[ci], "commit", "ok")
        else:
            appended = a.kind == "CompleteCommit"
            rec.complete(t, i, procs[ci], "commit", "info" if appended else "fail",
                         error="NOT_COORDINATOR" if appended else "ILLEGAL_GENERATION/NOT_COORDINATOR")


class _TxnRec:
    """Open operations of the transactional clients: producer_config per client, sends per
    (client, transaction, partition), the end operation per client; offsets read per partition."""
    def __init__(self):
        self.config: dict[int, int] = {}
        self.sends: dict[tuple, int] = {}
        self.ends: dict[int, tuple[int, int, str]] = {}      # client -> (op, transaction, f)
        self.read: dict[int, set] = {}

    def start(self, cfg: Config, rec: _Rec, t: int, ci: int, tid: int) -> None:
        self.config[ci] = rec.invoke(t, TXN_PROC + ci, "producer_config", retries=cfg.retries,
                                     max_in_flight=cfg.max_in_flight, idempotence=True,
                                     acks="all", transactional_id=f"t{tid}")


def _txn_value(log: tuple, o: int, d: int) -> str:
    return f"x{log[o][3]}-{d}"


def _txn_events(cfg: Config, rec: _Rec, t: int, a: Action, prev: State, s: State,
                txn: _TxnRec) -> None:
    pt, st = prev.txn, s.txn
    if a.kind == "TxnNewInstance":
        ci = len(pt.clients)
        txn.start(cfg, rec, t, ci, st.clients[ci].tid)
    elif a.kind == "TxnProduce":
        ci, d = a.b, a.arg
        g = st.clients[ci].g
        txn.sends[(ci, g, d)] = rec.invoke(t, TXN_PROC + ci, "send", topic=TOPIC, partition=d,
                                           value=f"x{g}-{d}", txn=g + 1)
    elif a.kind == "TxnTimeout":
        ci, d = a.b, a.arg
        i = txn.sends.pop((ci, pt.clients[ci].g, d), None)
        if i is not None:
            rec.complete(t, i, TXN_PROC + ci, "send", "info", error="delivery timeout")
    elif a.kind == "TxnDeliver" and a.arg[0] == 0:
        _, d, ci, _pe, g, _, _ = a.arg
        i = txn.sends.pop((ci, g, d), None)
        if i is not None:          # the client still waits for it: the answer reaches it
            if len(st.logs[d]) > len(pt.logs[d]):
                rec.complete(t, i, TXN_PROC + ci, "send", "ok", offset=len(pt.logs[d]))
            else:
                rec.complete(t, i, TXN_PROC + ci, "send", "fail", error="refused")
    elif a.kind in ("TxnCommit", "TxnAbort") and a.b not in txn.ends:
        ci = a.b
        g = pt.clients[ci].g
        f = "txn_commit" if a.kind == "TxnCommit" else "txn_abort"
        txn.ends[ci] = (rec.invoke(t, TXN_PROC + ci, f, txn=g + 1), g, f)
    for ci, c in enumerate(st.clients):
        if ci in txn.config and c.pe >= 0:
            rec.complete(t, txn.config.pop(ci), TXN_PROC + ci, "producer_config", "ok")
        if ci in txn.ends and not c.req and c.phase in (READY, FENCED):
            i, g, f = txn.ends.pop(ci)
            if c.phase == READY:                                 # READY: answered
                rec.complete(t, i, TXN_PROC + ci, f, "ok")
            else:                                              # FENCED
                prepared = st.ghosts[g][2] == (1 if f == "txn_commit" else 2)
                rec.complete(t, i, TXN_PROC + ci, f, "info" if prepared else "fail",
                             error="PRODUCER_FENCED")
    for d in range(cfg.txn_partitions):
        log = st.logs[d]
        seen = txn.read.setdefault(d, set())
        new = [o for o in rules.read_committed(log, cfg.isolation) if o not in seen]
        if new:
            seen.update(new)
            i = rec.invoke(t, TXN_READER, "poll", topic=TOPIC, partition=d, isolation=cfg.isolation)
            rec.complete(t, i, TXN_READER, "poll", "ok", offsets=new,
                         values=[_txn_value(log, o, d) for o in new])


def expected_anomalies(cfg: Config, violation: tuple[str, str] | None) -> tuple[str | None, bool]:
    """(the anomaly the history must show, whether it must make the history invalid). A
    reordering or a duplicate the producer's settings permit is a note of the history checkers,
    not an anomaly: the run stays valid. The Txn invariants are not here: whether a client saw
a TxnAtomicVisibility violation depends on the run (`txn_visible_violations`)."""
    if violation is None:
        return None, False
    kind = ANOMALY_OF.get(violation[0])
    if violation[0] in ("ProducerSendOrder", "ProducerExactlyOnce"):
        from checkers.history.oracle.log_checks import duplicate_permitted, reorder_permitted
        settings = {"idempotence": cfg.idempotence, "retries": cfg.retries,
                    "max_in_flight": cfg.max_in_flight}
        permitted = (reorder_permitted if kind == "send-reorder" else duplicate_permitted)(settings)
        return kind, not permitted
    return kind, True


def random_run(model, seed: int, length: int, weights: dict[str, float] | None = None):
    """One seeded random walk of at most `length` steps, stopping at the first violation of the
    model's invariants: (path, states, violation or None). Enabled actions come in a fixed order,
    so a seed reproduces the run. `weights` makes some action kinds rarer or likelier (default
    1): a timeout taken as often as any other step ends most transactional runs early."""
    import random
    rng = random.Random(seed)
    s = model.initial()
    path, states = [], []
    for _ in range(length):
        acts = model.enabled(s)
        if not acts:
            break
        if weights:
            a = rng.choices(acts, [weights.get(x.kind, 1.0) for x in acts])[0]
        else:
            a = acts[rng.randrange(len(acts))]
        t = model.step(s, a)
        path.append(a)
        states.append(t)
        v = model.step_violation(s, t) or model.violation(t)
        s = t
        if v:
            return path, states, v
    return path, states, None


def differential_invariants(cfg: Config) -> tuple:
    """What a model run is judged by when compared with its history: the active invariants,
    plus the producer invariants the settings do not promise (a history shows a duplicate
    whatever the settings; a permitted reordering as a note), minus
    GroupCommittedOffsetNeverBack, which a history cannot show until a member reads the lower
    offset and commits below it (the history checkers compare commits, not the coordinator's
    answer)."""
    from spec.invariants import INVARIANTS, active
    names = {i.name for i in active(cfg)}
    if cfg.producers:
        names |= {"ProducerSendOrder", "ProducerExactlyOnce"}
    names.discard("GroupCommittedOffsetNeverBack")
    return tuple(i for i in INVARIANTS if i.name in names)


# random walks over transactions: a timeout (client or coordinator) as likely as any other step
# ends most runs in their first transaction, and a request delivered at once never arrives late
TXN_WEIGHTS = {"TxnExpire": 0.1, "TxnTimeout": 0.5, "TxnResendMarker": 3.0, "TxnDeliver": 0.3}


def txn_visible_violations(cfg: Config, s: State, history: History) -> list[tuple[str, int, int, int]]:
    """The TxnAtomicVisibility violations of state `s` a client of `history` can see, as
    (kind, partition, offset, transaction index): "uncommitted", a record of an aborted or
    undecided transaction that read_committed returns (below the LSO: the reader read it);
    "partial", a committed transaction's aborted record, once the transaction's txn_commit
    completed ok and a read returned a later offset of that partition. What the client cannot
    see: an undecided record not yet below the LSO, and a partial transaction whose commit is
    not yet answered or whose partition nobody read past."""
    if not s.txn or cfg.isolation != "read_committed":
        return []
    ok_commits = {op.txn for op in history.ops if op.f == "txn_commit" and op.type == "ok"}
    read_max: dict[int, int] = {}
    for op in history.ops:
        if op.f == "poll" and op.type == "ok" and op.offsets:
            read_max[op.partition] = max(read_max.get(op.partition, -1), max(op.offsets))
    out = []
    for d, log in enumerate(s.txn.logs):
        lso = rules.last_stable_offset(log)
        for off, f in enumerate(rules.txn_fates(log)):
            if f <= 0:
                continue
            g = log[off][3]
            outcome = s.txn.ghosts[g][2]
            if f == 1 and outcome != 1 and off < lso:
                out.append(("uncommitted", d, off, g))
            elif f == 2 and outcome == 1 and g + 1 in ok_commits and read_max.get(d, -1) > off:
                out.append(("partial", d, off, g))
    return out
