"""Client of the embedded coordination server (`server.py`): blocking sockets, three threads.

Owns the client half of the session: handshake, request/reply matching, heartbeats, reconnects,
watch dispatch and the client's view of expiry. Threads: a reader (the only one that receives,
and the one that reconnects), a heartbeat sender, and the shared CallbackThread (base.py) where
every callback runs.

Connection vs session, as in ZooKeeper: if the connection drops, calls in flight raise
ConnectionLoss (indeterminate), calls made while disconnected wait for the reconnect (at most
until the session deadline, as kazoo queues them), and the reader reconnects and resumes
the same session (id + password) if it can before the session deadline; the server then re-sends
the current state of every watch, and a watch whose state changed meanwhile is called once with
the latest state (events in between are folded, as ZooKeeper does). Ephemerals survive the blip.

The session ends, for this client, on the first of: the server says {"expired"} or refuses the
resume (e.g. it restarted: sessions are not persisted); nothing at all heard from the server for
session_timeout_ms (the server has then expired us too, or is dead: a controller must stop
acting either way). Then every call raises SessionExpired and the on_session_expired callbacks run
once, after all earlier events. A new connect() makes a new session.

Who may close a socket: only the reader, after its last recv on it, holding the send lock (so no
sender is inside a call on it either). Every other thread that gives up on a connection shuts it
down, which wakes the reader and fails sends, but keeps its descriptor number allocated. A closed
number is handed to the next socket the process opens (Linux takes the lowest free one), and a
thread can still be on its way into a call with the old number: notably a recv interrupted by
SIGSTOP, which the kernel restarts with the same number on SIGCONT, possibly after other threads
ended the session, closed the socket and connected a new client. That recv then took the length
prefix of the new client's hello reply, and the new client read `{"id` as a frame length
(tests/test_coord_stale_reader.py drives exactly that interleaving).
"""
from __future__ import annotations

import concurrent.futures
import itertools
import logging
import socket
import struct
import threading
import time
from typing import Callable

from .base import (BadVersion, CallbackThread, ConnectionLoss, CoordError, Coordinator, NodeExists,
                   NoNode, NotEmpty, SessionExpired, validate_data, validate_path)
from .protocol import HEADER, FrameError, b2s, decode_body, encode_frame, frame_length, s2b

log = logging.getLogger(__name__)

_ERRORS: dict[str, type[CoordError]] = {
    "NodeExists": NodeExists, "NoNode": NoNode, "BadVersion": BadVersion, "NotEmpty": NotEmpty,
    "SessionExpired": SessionExpired,
}


class _Refused(Exception):
    """The server answered the hello with an error (full, or the session is gone)."""

    def __init__(self, reply: dict):
        super().__init__(reply.get("msg", reply.get("err")))
        self.reply = reply


class EmbeddedCoordinator(Coordinator):
    def __init__(self, host: str, port: int, session_timeout_ms: int = 6000,
                 connect_timeout_s: float = 5.0):
        self.host, self.port = host, port
        self.session_timeout_ms = session_timeout_ms
        self.connect_timeout_s = connect_timeout_s
        self.session_id: int | None = None
        self._password = ""
        self._sock: socket.socket | None = None
        self._connected = False
        self._connected_evt = threading.Event()  # set while connected, and once the session ends
        self._send_lock = threading.Lock()
        self._lock = threading.Lock()  # guards _pending, _watches, _dead, _connected, callbacks
        self._ids = itertools.count(1)
        self._pending: dict[int, concurrent.futures.Future] = {}
        # wid -> [kind, callback, last state delivered: mzxid (data) or tuple of children]
        self._watches: dict[int, list] = {}
        self._expiry_callbacks: list[Callable[[], None]] = []
        self._dead: str | None = None  # why the session ended, once it has
        self._closed_by_us = False
        self._last_heard = time.monotonic()
        self._stop = threading.Event()
        self._callbacks = CallbackThread(f"coord-callbacks-{port}", self._overflow)
        # A call waits for its reply at most this long; after that its outcome is unknown.
        self._call_timeout_s = max(5.0, 2 * session_timeout_ms / 1000)

    # ---- session lifecycle -------------------------------------------------------------------

    def _open(self, timeout_s: float, resume: bool) -> tuple[socket.socket, dict]:
        """TCP connect + hello (new or resumed session); return the socket and the hello's ok.
        The timeout also bounds the hello exchange: a port that accepts but never answers (not
        our server, or a stopped one) fails here instead of hanging."""
        from impl import netaddr
        sock = socket.create_connection((self.host, self.port), timeout=timeout_s,
                                        source_address=netaddr.source_address())
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            hello = {"id": 0, "op": "hello", "timeout_ms": self.session_timeout_ms}
            if resume:
                hello.update(session_id=self.session_id, password=self._password)
            sock.sendall(encode_frame(hello))
            reply = _read_frame(sock)
            if "ok" not in reply:
                raise _Refused(reply)
        except BaseException:
            sock.close()
            raise
        sock.settimeout(None)  # the reader blocks in recv; silence is the heartbeat's business
        # ...but a send must not block for ever on a server that stopped reading (its buffer is
        # full): after a session timeout it fails, and the connection counts as lost.
        secs, ms = divmod(self.session_timeout_ms, 1000)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", secs, ms * 1000))
        return sock, reply["ok"]

    def connect(self) -> None:
        if self._sock is not None or self._dead is not None:
            raise CoordError("connect() may be called once; make a new client to reconnect")
        try:
            sock, ok = self._open(self.connect_timeout_s, resume=False)
        except (OSError, FrameError) as e:
            self._dead = "connect failed"
            self._callbacks.stop()
            raise CoordError(f"cannot reach the coordination server at {self.host}:{self.port} "
                             f"within {self.connect_timeout_s}s: {e}") from None
        except _Refused as e:
            self._dead = "connect refused"
            self._callbacks.stop()
            raise CoordError(f"coordination server refused the session: {e}") from None
        self.session_id, self._password = ok["session_id"], ok["password"]
        if ok["timeout_ms"] != self.session_timeout_ms:  # negotiated: clamped by the server
            self.session_timeout_ms = ok["timeout_ms"]
            secs, ms = divmod(self.session_timeout_ms, 1000)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", secs, ms * 1000))
        self._sock, self._connected = sock, True
        self._connected_evt.set()
        self._last_heard = time.monotonic()
        threading.Thread(target=self._read_loop, name=f"coord-reader-{self.session_id}",
                         daemon=True).start()
        threading.Thread(target=self._heartbeat_loop, name=f"coord-heartbeat-{self.session_id}",
                         daemon=True).start()

    def close(self) -> None:
        with self._lock:
            if self._closed_by_us:
                return
            self._closed_by_us = True
            alive = self._dead is None and self._connected
        if alive:
            try:  # ends the session at once on the server: ephemerals vanish now, not at timeout
                self._call("close", timeout_s=min(self._call_timeout_s, 2.0), _closing=True)
            except CoordError:
                pass  # disconnected: the server expires the session at its deadline instead
        self._end("closed by this client")
        self._callbacks.stop()

    def _end(self, reason: str) -> None:
        """The session is over (for whatever reason): fail waiters, stop threads, run expiry
        callbacks unless we closed it ourselves. Idempotent."""
        with self._lock:
            if self._dead is not None:
                return
            self._dead = reason
            self._connected = False
            pending, self._pending = self._pending, {}
            callbacks = [] if self._closed_by_us else self._expiry_callbacks
            self._expiry_callbacks = []
            sock = self._sock
        self._stop.set()
        self._connected_evt.set()  # wake callers waiting for a reconnect: they see _dead
        if sock is not None:
            _shut(sock)  # the reader wakes, sees _dead and closes it: never closed under its recv
        for fut in pending.values():
            fut.set_exception(CoordError("client is closed") if self._closed_by_us else
                              SessionExpired(f"session {self.session_id} ended: {reason}"))
        if callbacks:
            log.warning("coord: session %s expired: %s", self.session_id, reason)
        for cb in callbacks:
            self._callbacks.submit(cb, force=True)

    def _overflow(self) -> None:
        threading.Thread(target=self._end, args=("callback queue overflow",), daemon=True).start()

    # ---- I/O threads -------------------------------------------------------------------------

    def _read_loop(self) -> None:
        sock: socket.socket | None = self._sock
        while sock is not None:  # one pass per connection; ends with the session
            try:
                self._read_connection(sock)
            except (OSError, FrameError) as e:
                reason = f"{e!r}"
            except Exception as e:  # a malformed message from the server: never hang the session
                log.exception("coord: bad message from the server")
                self._end(reason := f"protocol error: {e!r}")
            sock = self._reconnect(sock, reason)

    def _retire(self, sock: socket.socket) -> None:
        """Close a connection the reader has finished with (see the module note: only here)."""
        _shut(sock)  # fails a sender blocked on a full buffer, so the lock below comes free
        with self._send_lock:  # no sender is inside sendall on this descriptor number
            sock.close()

    def _read_connection(self, sock: socket.socket) -> None:
        while True:  # ends by exception: the connection drops, or the session ends
            msg = _read_frame(sock)
            self._last_heard = time.monotonic()
            if "expired" in msg:
                self._end(f"server expired the session: {msg['expired']}")
                raise ConnectionResetError("session expired")
            if "watch" in msg:
                self._deliver(msg["watch"], msg, resync=bool(msg.get("resync")))
                continue
            with self._lock:
                fut = self._pending.pop(msg.get("id"), None)
            if "ok" in msg and msg.get("id") in self._watches:
                # A watch's initial value is queued here, on the reader thread, so it is ahead
                # of every later event of that watch (they are read after this reply).
                self._deliver(msg["id"], msg["ok"], resync=False)
            if fut is not None:
                fut.set_result(msg)

    def _reconnect(self, old: socket.socket, reason: str) -> socket.socket | None:
        """The connection dropped: close it, fail calls in flight (indeterminate), then try to
        resume the session until its deadline (last word from the server + timeout). Runs on the
        reader, once it is done reading `old`; returns the new connection, or None once the
        session has ended."""
        with self._lock:
            dead = self._dead is not None
            if not dead:
                self._connected = False
                self._connected_evt.clear()
                pending, self._pending = self._pending, {}
        self._retire(old)  # the reader's last recv on it is over: the one safe moment to close
        if dead:
            return None
        for fut in pending.values():
            fut.set_exception(ConnectionLoss(f"connection lost ({reason}); the call may or may "
                                             "not have taken effect"))
        log.warning("coord: session %s: connection lost (%s); resuming", self.session_id, reason)
        deadline = self._last_heard + self.session_timeout_ms / 1000
        pause_s = self.session_timeout_ms / 10_000
        while self._dead is None:  # bounded by the session deadline
            left = deadline - time.monotonic()
            if left <= 0:
                self._end(f"connection lost ({reason}) and not resumed within the session timeout")
                return None
            try:
                sock, _ = self._open(min(left, self.connect_timeout_s), resume=True)
            except _Refused as e:
                self._end(f"connection lost ({reason}); resume refused: {e}")
                return None
            except (OSError, FrameError):
                self._stop.wait(min(pause_s, max(left, 0)))
                continue
            with self._lock:
                if self._dead is not None:
                    sock.close()  # never shared: no other thread knows its number
                    return None
                # last_heard first: the heartbeat must not judge the new connection by the old
                self._last_heard = time.monotonic()
                self._sock, self._connected = sock, True
                self._connected_evt.set()
            log.warning("coord: session %s resumed", self.session_id)
            return sock
        return None

    def _heartbeat_loop(self) -> None:
        interval = self.session_timeout_ms / 3000
        while not self._stop.wait(interval):  # ends with the session
            silent_s = time.monotonic() - self._last_heard
            if silent_s * 1000 >= self.session_timeout_ms:
                self._end(f"no word from the server for {silent_s:.1f}s")
                return
            try:
                self._send({"id": next(self._ids), "op": "ping"})  # reply unmatched: ignored
            except SessionExpired:
                return
            except CoordError:
                pass  # disconnected: the reader is reconnecting

    def _send(self, msg: dict) -> None:
        with self._lock:
            if self._dead is not None:
                raise SessionExpired(f"session {self.session_id} ended: {self._dead}")
            if not self._connected:
                raise ConnectionLoss("disconnected from the coordination server; reconnecting")
            sock = self._sock
        with self._send_lock:
            try:
                sock.sendall(encode_frame(msg))
                return
            except OSError as e:
                # Shut down before another sender may follow a partly sent frame with its own
                # (the server would read garbage); the reader sees it, closes and reconnects.
                _shut(sock)
                error = e
        raise ConnectionLoss(f"send failed ({error!r}); the call may or may not have taken effect")

    def _deliver(self, wid: int, msg: dict, resync: bool) -> None:
        """Queue one watch callback; called only on the reader thread, so in server order. A
        resync (after a resume) that shows the state already delivered is not news: dropped."""
        with self._lock:
            entry = self._watches.get(wid)
        if entry is None:
            return
        kind, cb, last = entry
        if kind == "data":
            key = msg["mzxid"]
            data = None if msg["data"] is None else s2b(msg["data"])
            call = (lambda: cb(data, msg["version"]))
        else:
            children = list(msg["children"])
            key = tuple(children)
            call = (lambda: cb(children))
        if resync and key == last:
            return
        entry[2] = key
        self._callbacks.submit(call)

    # ---- requests ----------------------------------------------------------------------------

    def _call(self, op: str, *, timeout_s: float | None = None, _closing: bool = False,
              **fields) -> dict:
        rid = next(self._ids)
        fut: concurrent.futures.Future = concurrent.futures.Future()
        if not self._connected and self._dead is None and self._sock is not None:
            # Disconnected: wait for the reader's resume, at most until the session deadline.
            left = self._last_heard + self.session_timeout_ms / 1000 - time.monotonic()
            self._connected_evt.wait(max(left, 0) + 0.1)
        with self._lock:
            if self._dead is not None:
                if self._closed_by_us:
                    raise CoordError("client is closed")
                raise SessionExpired(f"session {self.session_id} ended: {self._dead}")
            if self._closed_by_us and not _closing:
                raise CoordError("client is closed")
            if self._sock is None:
                raise CoordError("not connected: call connect() first")
            if not self._connected:
                raise ConnectionLoss("disconnected from the coordination server; reconnecting")
            self._pending[rid] = fut
            if op.startswith("watch_"):
                # Registered before the request leaves, so no event can arrive unclaimed.
                self._watches[rid] = [op[len("watch_"):], fields.pop("_callback"), object()]
        try:
            self._send({"id": rid, "op": op, **fields})
        except CoordError:
            with self._lock:
                self._pending.pop(rid, None)
            raise
        wait_s = timeout_s or self._call_timeout_s
        try:
            reply = fut.result(timeout=wait_s)
        except concurrent.futures.TimeoutError:
            with self._lock:
                self._pending.pop(rid, None)
            raise ConnectionLoss(f"{op}: no reply within {wait_s}s; "
                                 "it may or may not have taken effect") from None
        if "err" in reply:
            if op.startswith("watch_"):
                with self._lock:
                    self._watches.pop(rid, None)
            exc = _ERRORS.get(reply["err"])
            if exc is None:
                raise CoordError(f"{op} {fields.get('path', '')}: {reply.get('msg')}")
            raise exc(reply.get("msg", reply["err"]))
        return reply["ok"]

    def create(self, path: str, data: bytes = b"", *, ephemeral: bool = False,
               makepath: bool = True) -> None:
        validate_path(path)
        if path == "/":
            raise NodeExists("node / exists")
        self._call("create", path=path, data=b2s(validate_data(data)), ephemeral=bool(ephemeral),
                   makepath=bool(makepath))

    def get(self, path: str) -> tuple[bytes, int]:
        r = self._call("get", path=validate_path(path))
        return s2b(r["data"]), r["version"]

    def exists(self, path: str) -> int | None:
        return self._call("exists", path=validate_path(path))["version"]

    def set(self, path: str, data: bytes, version: int = -1) -> int:
        return self._call("set", path=validate_path(path), data=b2s(validate_data(data)),
                          version=_check_version(version))["version"]

    def delete(self, path: str, version: int = -1) -> None:
        if validate_path(path) == "/":
            raise ValueError("cannot delete /")
        self._call("delete", path=path, version=_check_version(version))

    def get_children(self, path: str) -> list[str]:
        return self._call("children", path=validate_path(path))["children"]

    def watch_data(self, path: str, callback: Callable[[bytes | None, int | None], None]) -> None:
        self._call("watch_data", path=validate_path(path), _callback=callback)

    def watch_children(self, path: str, callback: Callable[[list[str]], None]) -> None:
        self._call("watch_children", path=validate_path(path), _callback=callback)


def _check_version(version: object) -> int:
    if not isinstance(version, int) or isinstance(version, bool) or version < -1:
        raise ValueError(f"version must be an int >= -1, got {version!r}")
    return version


def _shut(sock: socket.socket) -> None:
    """Shut down both directions: wakes a thread blocked in recv on it (EOF) and fails later
    sends, but keeps the descriptor number, so no other socket can take it yet."""
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # already shut down, reset, or closed by the reader


def _read_frame(sock: socket.socket) -> dict:
    header = _recv_exactly(sock, HEADER.size)
    return decode_body(_recv_exactly(sock, frame_length(header)))


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    chunks, got = [], 0
    while got < n:  # bounded by n (frame_length caps it)
        chunk = sock.recv(min(n - got, 1 << 20))
        if not chunk:
            raise ConnectionResetError("connection closed by the coordination server")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)
