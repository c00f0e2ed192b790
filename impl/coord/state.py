"""The embedded coordination server's state machine: tree, versions, sessions, ephemerals, watches.

Owns every rule of the server (`decide`); `server.py` is the thin asyncio shell that feeds it
events and performs the effects it returns. No clocks, sockets or files here: time arrives as
`now_ms`, output leaves as effects. The shell must write every `Persist` of a batch durably before
it performs any `Send` of that batch (etcd's Ready contract: persist before you tell anyone).

Sessions outlive their connection, as in ZooKeeper: a client whose connection dropped may
resume its session on a new connection (hello with session_id and password) until the deadline;
the resume re-sends the current state of every watch of the session (marked "resync"), since
events that happened while it was detached were not delivered.

One line each:
  events   Request(conn, msg)  Disconnected(conn)  Evict(conn, reason)  Tick()
  effects  Send(conn, msg)     Persist(record)     Close(conn)
  records  {"t": "put", "p": path, "d": b64, "v": version} | {"t": "del", "p": path}
           (full-state records: replaying them in order rebuilds the persistent tree)
"""
from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass, field

from .base import MAX_DATA_BYTES, parent_of, validate_path
from .protocol import FrameError, b2s, s2b

# Bounds, and what happens at each: a hello beyond MAX_SESSIONS is refused and its connection
# closed; a watch beyond MAX_WATCHES_PER_SESSION is refused with BadArguments.
MAX_SESSIONS = 1024
MAX_WATCHES_PER_SESSION = 10_000
MAX_TIMEOUT_MS = 60_000


@dataclass
class Node:
    data: bytes
    version: int
    owner: int | None  # session id of an ephemeral node, None when persistent
    mzxid: int = 0  # id of the last change to this node: tells a resync apart from news
    children: set[str] = field(default_factory=set)


@dataclass
class Session:
    sid: int
    conn: int | None  # None once its connection dropped: it lives on until the deadline
    timeout_ms: int
    deadline_ms: int
    ephemerals: set[str] = field(default_factory=set)
    watches: dict[int, tuple[str, str]] = field(default_factory=dict)  # wid -> (kind, path)


@dataclass(frozen=True)
class Request:
    conn: int
    msg: dict


@dataclass(frozen=True)
class Disconnected:
    conn: int


@dataclass(frozen=True)
class Evict:
    """The shell gave up on a connection (its outbound buffer hit the bound): end its session."""
    conn: int
    reason: str


@dataclass(frozen=True)
class Tick:
    pass


@dataclass(frozen=True)
class Send:
    conn: int
    msg: dict


@dataclass(frozen=True)
class Persist:
    record: dict


@dataclass(frozen=True)
class Close:
    conn: int


class RequestError(Exception):
    def __init__(self, name: str, msg: str):
        super().__init__(msg)
        self.name = name


class State:
    def __init__(self, min_timeout_ms: int, secret: bytes = b""):
        self.nodes: dict[str, Node] = {"/": Node(b"", 0, None)}
        self.secret = secret  # from the shell (random per boot): session passwords derive from it
        self.zxid = 0  # counts changes; not persisted, since sessions do not outlive the server
        self.sessions: dict[int, Session] = {}
        self.by_conn: dict[int, int] = {}
        self.next_sid = 1
        self.min_timeout_ms = min_timeout_ms  # 2 ticks: also the longest normal gap between ticks
        self.last_tick_ms: int | None = None
        # (kind, path) -> {(sid, wid): None}; a dict keeps registration order for notification.
        self.watchers: dict[tuple[str, str], dict[tuple[int, int], None]] = {}


# ---- persistent tree: the one place that mutates nodes ---------------------------------------

def _put(state: State, path: str, data: bytes, version: int, owner: int | None) -> None:
    state.zxid += 1
    node = state.nodes.get(path)
    if node is None:
        state.nodes[path] = Node(data, version, owner, state.zxid)
        state.nodes[parent_of(path)].children.add(path.rsplit("/", 1)[1])
    else:
        node.data, node.version, node.mzxid = data, version, state.zxid


def _remove(state: State, path: str) -> None:
    node = state.nodes.pop(path)
    state.nodes[parent_of(path)].children.discard(path.rsplit("/", 1)[1])
    if node.owner is not None and node.owner in state.sessions:
        state.sessions[node.owner].ephemerals.discard(path)


def apply_record(state: State, rec: dict) -> None:
    """Replay one durable record (recovery uses this; live changes go through it too)."""
    if rec["t"] == "put":
        _put(state, rec["p"], s2b(rec["d"]), rec["v"], None)
    elif rec["t"] == "del":
        _remove(state, rec["p"])
    else:
        raise ValueError(f"unknown record {rec!r}")


def persistent_records(state: State) -> list[dict]:
    """The persistent tree as put records, parents first (a parent's path sorts before its
    children's because it is their prefix). Used to write a snapshot."""
    return [{"t": "put", "p": p, "d": b2s(n.data), "v": n.version}
            for p, n in sorted(state.nodes.items()) if p != "/" and n.owner is None]


# ---- watches ---------------------------------------------------------------------------------

def _data_body(state: State, path: str) -> dict:
    node = state.nodes.get(path)
    return ({"data": b2s(node.data), "version": node.version, "mzxid": node.mzxid} if node
            else {"data": None, "version": None, "mzxid": None})


def _children_body(state: State, path: str) -> dict:
    node = state.nodes.get(path)
    return {"children": sorted(node.children) if node else []}


def _notify_data(state: State, path: str) -> list[Send]:
    return _notify(state, ("data", path), _data_body(state, path))


def _notify_children(state: State, path: str) -> list[Send]:
    return _notify(state, ("children", path), _children_body(state, path))


def _notify(state: State, key: tuple[str, str], body: dict) -> list[Send]:
    out = []
    for sid, wid in state.watchers.get(key, {}):
        conn = state.sessions[sid].conn
        if conn is not None:  # a detached session misses events; it can never resume anyway
            out.append(Send(conn, {"watch": wid, **body}))
    return out


# ---- the rules -------------------------------------------------------------------------------

def decide(state: State, now_ms: int, event: object) -> list[object]:
    """Apply one event; return the effects, in the order the shell must perform them."""
    if isinstance(event, Tick):
        server_stall_grace(state, now_ms)
        out: list[object] = []
        for sid in sorted(state.sessions):
            if state.sessions[sid].deadline_ms <= now_ms:
                out += expire_session(state, sid, "session timeout: no heartbeat")
        return out
    if isinstance(event, Disconnected):
        sid = state.by_conn.pop(event.conn, None)
        if sid is not None:
            state.sessions[sid].conn = None  # lives until its deadline, as in ZooKeeper
        return []
    if isinstance(event, Evict):
        sid = state.by_conn.get(event.conn)
        return expire_session(state, sid, event.reason) if sid is not None else [Close(event.conn)]
    if isinstance(event, Request):
        return _request(state, now_ms, event.conn, event.msg)
    raise TypeError(f"unknown event {event!r}")


def server_stall_grace(state: State, now_ms: int) -> None:
    """If the server itself did not tick for a while (it was paused, swapped out, or too busy to
    tick), clients could not reach it either: their heartbeats wait unread in the sockets. Move
    every deadline by the stall, so the server expires sessions on evidence of a silent client,
    not of its own silence. The stall is any gap above two ticks; a busy server that skips
    ticks (server.py) thereby delays expiry instead of expiring clients it did not read."""
    last, state.last_tick_ms = state.last_tick_ms, now_ms
    if last is not None and now_ms - last > state.min_timeout_ms:
        for sess in state.sessions.values():
            sess.deadline_ms += now_ms - last


def expire_session(state: State, sid: int, reason: str) -> list[object]:
    """End a session: delete its ephemerals (firing watches), drop its watches, tell its client.
    One rule for every way a session ends: timeout, eviction, explicit close."""
    sess = state.sessions.pop(sid)
    out: list[object] = []
    for wid, key in sorted(sess.watches.items()):
        state.watchers[key].pop((sid, wid), None)
        if not state.watchers[key]:
            del state.watchers[key]
    for path in sorted(sess.ephemerals):
        _remove(state, path)
        out += _notify_data(state, path) + _notify_children(state, parent_of(path))
    if sess.conn is not None:
        state.by_conn.pop(sess.conn, None)
        if reason != "closed":
            out.append(Send(sess.conn, {"expired": reason}))
        out.append(Close(sess.conn))
    return out


def _request(state: State, now_ms: int, conn: int, msg: dict) -> list[object]:
    rid, op = msg.get("id"), msg.get("op")
    if not isinstance(rid, int) or not isinstance(op, str):
        return [Close(conn)]  # not our protocol: drop the connection
    sid = state.by_conn.get(conn)
    if sid is None:
        return _hello(state, now_ms, conn, rid, msg) if op == "hello" else [Close(conn)]
    sess = state.sessions[sid]
    sess.deadline_ms = now_ms + sess.timeout_ms  # any request proves the client is alive
    if op == "close":
        return [Send(conn, {"id": rid, "ok": {}})] + expire_session(state, sid, "closed")
    handler = _HANDLERS.get(op)
    if handler is None:
        return [Close(conn)]  # unknown op, or a second hello: a protocol violation
    try:
        result, effects = handler(state, sess, rid, msg)
    except RequestError as e:
        return [Send(conn, {"id": rid, "err": e.name, "msg": str(e)})]
    except FrameError as e:
        return [Send(conn, {"id": rid, "err": "BadArguments", "msg": str(e)})]
    # The reply goes first: a watch's initial value must reach the client before later events.
    return [Send(conn, {"id": rid, "ok": result})] + effects


def session_password(state: State, sid: int) -> str:
    return hmac.new(state.secret, str(sid).encode(), hashlib.sha256).hexdigest()[:32]


def _hello(state: State, now_ms: int, conn: int, rid: int, msg: dict) -> list[object]:
    asked = msg.get("timeout_ms")
    if not isinstance(asked, int):
        return [Close(conn)]
    if msg.get("session_id") is not None:
        return _resume(state, now_ms, conn, rid, msg)
    if len(state.sessions) >= MAX_SESSIONS:
        return [Send(conn, {"id": rid, "err": "BadArguments",
                            "msg": f"server full: {MAX_SESSIONS} sessions"}), Close(conn)]
    timeout = max(state.min_timeout_ms, min(asked, MAX_TIMEOUT_MS))
    sid = state.next_sid
    state.next_sid += 1
    state.sessions[sid] = Session(sid, conn, timeout, now_ms + timeout)
    state.by_conn[conn] = sid
    return [Send(conn, {"id": rid, "ok": {"session_id": sid, "timeout_ms": timeout,
                                          "password": session_password(state, sid)}})]


def _resume(state: State, now_ms: int, conn: int, rid: int, msg: dict) -> list[object]:
    """Re-attach a live session to a new connection; ZooKeeper's reconnect within the timeout."""
    sid = msg.get("session_id")
    sess = state.sessions.get(sid) if isinstance(sid, int) else None
    if sess is None or not hmac.compare_digest(str(msg.get("password", "")),
                                               session_password(state, sid)):
        return [Send(conn, {"id": rid, "err": "SessionExpired",
                            "msg": f"session {sid} is not alive on this server"}), Close(conn)]
    out: list[object] = []
    if sess.conn is not None:  # the old connection is half-dead: the session moves away from it
        state.by_conn.pop(sess.conn, None)
        out.append(Close(sess.conn))
    sess.conn = conn
    sess.deadline_ms = now_ms + sess.timeout_ms
    state.by_conn[conn] = sid
    out.append(Send(conn, {"id": rid, "ok": {"session_id": sid, "timeout_ms": sess.timeout_ms,
                                             "password": session_password(state, sid)}}))
    for wid, (kind, path) in sorted(sess.watches.items()):
        body = (_data_body if kind == "data" else _children_body)(state, path)
        out.append(Send(conn, {"watch": wid, "resync": True, **body}))
    return out


def _path(msg: dict) -> str:
    try:
        return validate_path(msg.get("path"))
    except ValueError as e:
        raise RequestError("BadArguments", str(e)) from None


def _version(msg: dict) -> int:
    v = msg.get("version", -1)
    if not isinstance(v, int) or isinstance(v, bool) or v < -1:
        raise RequestError("BadArguments", f"bad version {v!r}")
    return v


def _data(msg: dict) -> bytes:
    data = s2b(msg.get("data", ""))
    if len(data) > MAX_DATA_BYTES:
        raise RequestError("BadArguments", f"data above {MAX_DATA_BYTES} bytes")
    return data


def _existing(state: State, path: str) -> Node:
    node = state.nodes.get(path)
    if node is None:
        raise RequestError("NoNode", f"no node {path}")
    return node


def _op_ping(state, sess, rid, msg):
    return {}, []


def _op_create(state, sess, rid, msg):
    path, data = _path(msg), _data(msg)
    ephemeral, makepath = bool(msg.get("ephemeral")), bool(msg.get("makepath", True))
    if path in state.nodes:
        raise RequestError("NodeExists", f"node {path} exists")
    missing = []
    parent = parent_of(path)
    while parent not in state.nodes:  # bounded by the path's depth
        missing.append(parent)
        parent = parent_of(parent)
    if missing and not makepath:
        raise RequestError("NoNode", f"parent {parent_of(path)} of {path} does not exist")
    if state.nodes[parent].owner is not None:
        raise RequestError("BadArguments", f"{parent} is ephemeral and cannot have children")
    effects: list[object] = []
    for p in reversed(missing):
        rec = {"t": "put", "p": p, "d": "", "v": 0}
        apply_record(state, rec)
        effects += [Persist(rec)] + _notify_data(state, p) + _notify_children(state, parent_of(p))
    if ephemeral:
        _put(state, path, data, 0, sess.sid)
        sess.ephemerals.add(path)
    else:
        rec = {"t": "put", "p": path, "d": b2s(data), "v": 0}
        apply_record(state, rec)
        effects.append(Persist(rec))
    effects += _notify_data(state, path) + _notify_children(state, parent_of(path))
    return {}, effects


def _op_get(state, sess, rid, msg):
    node = _existing(state, _path(msg))
    return {"data": b2s(node.data), "version": node.version}, []


def _op_exists(state, sess, rid, msg):
    node = state.nodes.get(_path(msg))
    return {"version": node.version if node else None}, []


def _op_children(state, sess, rid, msg):
    return {"children": sorted(_existing(state, _path(msg)).children)}, []


def _op_set(state, sess, rid, msg):
    path, data, version = _path(msg), _data(msg), _version(msg)
    node = _existing(state, path)
    if version != -1 and version != node.version:
        raise RequestError("BadVersion", f"{path} is at version {node.version}, not {version}")
    effects: list[object] = []
    if node.owner is None:
        rec = {"t": "put", "p": path, "d": b2s(data), "v": node.version + 1}
        apply_record(state, rec)
        effects.append(Persist(rec))
    else:
        _put(state, path, data, node.version + 1, node.owner)
    return {"version": node.version}, effects + _notify_data(state, path)


def _op_delete(state, sess, rid, msg):
    path, version = _path(msg), _version(msg)
    if path == "/":
        raise RequestError("BadArguments", "cannot delete /")
    node = _existing(state, path)
    if version != -1 and version != node.version:
        raise RequestError("BadVersion", f"{path} is at version {node.version}, not {version}")
    if node.children:
        raise RequestError("NotEmpty", f"{path} has children")
    effects: list[object] = []
    if node.owner is None:
        rec = {"t": "del", "p": path}
        apply_record(state, rec)
        effects.append(Persist(rec))
    else:
        _remove(state, path)
    return {}, effects + _notify_data(state, path) + _notify_children(state, parent_of(path))


def _watch(kind: str):
    def op(state, sess, rid, msg):
        path = _path(msg)
        if len(sess.watches) >= MAX_WATCHES_PER_SESSION:
            raise RequestError("BadArguments", f"more than {MAX_WATCHES_PER_SESSION} watches")
        if rid in sess.watches:
            raise RequestError("BadArguments", f"watch id {rid} in use")
        sess.watches[rid] = (kind, path)
        state.watchers.setdefault((kind, path), {})[(sess.sid, rid)] = None
        return (_data_body if kind == "data" else _children_body)(state, path), []
    return op


_HANDLERS = {
    "ping": _op_ping, "create": _op_create, "get": _op_get,
    "exists": _op_exists, "children": _op_children, "set": _op_set, "delete": _op_delete,
    "watch_data": _watch("data"), "watch_children": _watch("children"),
}
