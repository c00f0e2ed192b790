"""The model's actions: one NamedTuple, each kind described in one line so that a counterexample
reads like a story, and their JSON form in traces. The transitions that give them meaning are
spec/model.py's (replication), spec/producer.py's and spec/group.py's (clients)."""
from __future__ import annotations

from typing import NamedTuple

from spec.state import mask_str


class Action(NamedTuple):
    kind: str
    b: int          # the acting broker
    arg: object = -1  # kind-specific: a broker id, a flag, or a control message (ce, le, leader, isr, ver)

    def describe(self) -> str:
        k, b, a = self.kind, self.b, self.arg
        if k in ("Deliver", "Lose"):
            ce, le, leader, isr, ver = a
            verb = "delivered to" if k == "Deliver" else "LOST on its way to"
            return (f"LeaderAndIsr(controller epoch {ce}, leader {leader}, epoch {le}, "
                    f"isr {mask_str(isr)}) {verb} b{b}")
        if k == "ControllerReact":
            return (f"controller b{b} handles broker changes; partition leader now "
                    + (f"b{a}" if a >= 0 else "none (offline)"))
        if k == "TxnDeliver":
            return describe_txn_message(a)
        if k in _CLIENT_TEMPLATES:
            return _CLIENT_TEMPLATES[k].format(b=b, a=a)
        lossy = {1: " losing its unflushed writes", 2: " and loses its disk"}.get(a, "")
        return _TEMPLATES[k].format(b=b, a=a, lossy=lossy)

    def to_json(self) -> dict:
        if self.kind == "TxnDeliver":
            return {"type": self.kind, "partition": self.b, "message": list(self.arg)}
        if self.kind in _CLIENT_TEMPLATES:
            # Client actions name the client; `broker` only where a broker is chosen.
            d = {"type": self.kind, "client": self.b}
            if self.arg != -1:
                d["broker"] = self.arg
            return d
        d = {"type": self.kind, "broker": self.b}
        if self.kind in ("Deliver", "Lose"):
            d["message"] = dict(zip(("ce", "le", "leader", "isr", "ver"), self.arg))
        elif self.kind in _ARG_NAMES:
            d[_ARG_NAMES[self.kind]] = self.arg
        return d

    @staticmethod
    def from_json(d: dict) -> "Action":
        kind = d.get("type")
        if kind == "TxnDeliver":
            p, m = d.get("partition"), d.get("message")
            if (not isinstance(p, int) or not isinstance(m, list) or len(m) != 7
                    or not all(isinstance(x, int) for x in m)):
                raise ValueError("TxnDeliver needs an integer 'partition' and a 'message' of 7 integers")
            return Action(kind, p, tuple(m))
        if kind in _CLIENT_TEMPLATES:
            c, t = d.get("client"), d.get("broker", -1)
            if not isinstance(c, int) or not isinstance(t, int):
                raise ValueError(f"{kind} needs an integer 'client' (and 'broker' if any)")
            return Action(kind, c, t)
        if kind not in _TEMPLATES and kind not in ("Deliver", "Lose", "ControllerReact"):
            raise ValueError(f"unknown action type {kind!r}")
        b = d.get("broker")
        if not isinstance(b, int):
            raise ValueError("action needs an integer 'broker'")
        if kind in ("Deliver", "Lose"):
            m = d.get("message")
            if not isinstance(m, dict):
                raise ValueError(f"{kind} needs a 'message' object")
            try:
                return Action(kind, b, tuple(int(m[k]) for k in ("ce", "le", "leader", "isr", "ver")))
            except (KeyError, TypeError, ValueError):
                raise ValueError(f"{kind} message needs integer ce, le, leader, isr, ver") from None
        if kind in _ARG_NAMES:
            a = d.get(_ARG_NAMES[kind])
            if not isinstance(a, int):
                raise ValueError(f"{kind} needs an integer {_ARG_NAMES[kind]!r}")
            return Action(kind, b, a)
        return Action(kind, b)


_TEMPLATES = {
    "Produce": "client writes the next record to leader b{b}",
    "FetchRequest": "follower b{b} fetches from its leader",
    "FetchResponse": "follower b{b} receives its fetch response",
    "Truncate": "follower b{b} truncates its log before fetching",
    "Flush": "b{b} flushes its log to disk",
    "Crash": "b{b} crashes{lossy}",
    "Restart": "b{b} restarts",
    "Pause": "b{b} pauses (its session will expire)",
    "Resume": "b{b} resumes",
    "SessionExpire": "b{b}'s coordination session expires",
    "Reregister": "b{b} notices its expired session and registers again",
    "ControllerElect": "b{b} becomes controller",
    "ControllerAlterIsr": "controller b{b} handles leader b{a}'s ISR proposal",
    "AlterIsrResponse": "leader b{b} receives the controller's answer to its ISR proposal",
    "ProposeShrink": "leader b{b} proposes removing lagging follower b{a} from the ISR",
    "ZombieElect": "deposed controller b{b} elects b{a} from its stale cache and sends it",
}

# spec/producer.py's transitions
PRODUCER_TEMPLATES = {
    "InitProducerId": "producer p{b} gets its producer id and epoch 0 (InitProducerId)",
    "Send": "producer p{b} sends its next batch to b{a}",
    "HandleProduce": "the broker handles producer p{b}'s next request",
    "CompleteProduce": "the leader answers producer p{b}'s request awaiting the high watermark",
    "Receive": "producer p{b} reads the answer to its oldest request",
    "Disconnect": "producer p{b}'s connection drops: requests and answers on it are lost",
    "BumpEpoch": "producer p{b} resolves its sequences: unless a later acknowledgement covered "
                 "the unresolved batch, it bumps its epoch and renumbers its unfinished batches from 0",
}

# spec/group.py's transitions
GROUP_TEMPLATES = {
    "Join": "consumer c{b} joins the group: a rebalance assigns it the partition in a new generation",
    "FetchOffset": "consumer c{b} fetches the group's committed offset from coordinator b{a}",
    "Poll": "consumer c{b} polls the next record",
    "Process": "consumer c{b} processes the record it polled",
    "Commit": "consumer c{b} commits its position to coordinator b{a}",
    "HandleCommit": "the coordinator handles consumer c{b}'s commit",
    "CompleteCommit": "the coordinator answers consumer c{b}'s commit",
    "ConsumerCrash": "consumer c{b} crashes",
    "ConsumerRestart": "consumer c{b} restarts",
}

# spec/transaction.py's transitions: {b} is the producer instance (t: its place in the client
# list) or, for the coordinator's actions, the transactional.id; {a} a data partition.
TXN_TEMPLATES = {
    "TxnInitProducerId": "transactional producer x{b} sends InitProducerId to the coordinator",
    "TxnBegin": "transactional producer x{b} begins a transaction",
    "TxnAddPartition": "transactional producer x{b} adds partition d{a} to its transaction "
                       "(AddPartitionsToTxn)",
    "TxnProduce": "transactional producer x{b} sends its record for d{a}",
    "TxnCommit": "transactional producer x{b} commits (EndTxn COMMIT)",
    "TxnAbort": "transactional producer x{b} aborts (EndTxn ABORT)",
    "TxnTimeout": "transactional producer x{b}'s batch for d{a} times out on the client; the "
                  "request is still in the network",
    "TxnAnswer": "transactional producer x{b} gets the coordinator's answer",
    "TxnNewInstance": "a new instance of transactional.id t{b} starts; the old one keeps running "
                      "(a zombie)",
    "TxnSendMarkers": "the coordinator sends WriteTxnMarkers for t{b}'s transaction",
    "TxnResendMarker": "the coordinator resends t{b}'s marker request to d{a}; the first copy "
                       "is still on its way",
    "TxnCompleteTransaction": "every marker of t{b}'s transaction is written: the coordinator "
                              "completes it",
    "TxnExpire": "t{b}'s transaction times out at the coordinator, which aborts it with the "
                 "epoch bumped",
}


def describe_txn_message(m: tuple) -> str:
    if m[0] == 0:
        _, d, ci, pe, g, _, _ = m
        return f"x{ci}'s Produce (epoch {pe}, transaction T{g}) reaches d{d}"
    _, d, tid, pe, g, commit, cep = m
    return (f"WriteTxnMarkers({'COMMIT' if commit else 'ABORT'} for t{tid}, epoch {pe}, coordinator "
            f"epoch {cep}) of transaction T{g} reaches d{d}")


_CLIENT_TEMPLATES = {**PRODUCER_TEMPLATES, **GROUP_TEMPLATES, **TXN_TEMPLATES}
_ARG_NAMES = {"Crash": "lose_unflushed", "ControllerReact": "new_leader",
              "ControllerAlterIsr": "leader", "ProposeShrink": "follower", "ZombieElect": "new_leader"}
