"""Client of the embedded coordination server (`server.py`): blocking sockets, three threads.

Owns the client half of the session: the handshake, request/reply matching, heartbeats, watch
dispatch and the client's view of expiry. Threads: a reader (the only one that receives), a
heartbeat sender, and the shared CallbackThread (base.py) where every callback runs.

The session ends, for this client, on the first of: the server says {"expired"}; the connection
drops (the server restarted or evicted us: sessions never resume, a new connect() makes a new
one); nothing at all heard from the server for session_timeout_ms (the server has then expired us
too, or is dead — either way a controller must stop acting). Then every call raises
SessionExpired and the on_session_expired callbacks run once, after all earlier events.
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


class EmbeddedCoordinator(Coordinator):
    def __init__(self, host: str, port: int, session_timeout_ms: int = 6000,
                 connect_timeout_s: float = 5.0):
        self.host, self.port = host, port
        self.session_timeout_ms = session_timeout_ms
        self.connect_timeout_s = connect_timeout_s
        self.session_id: int | None = None
        self._sock: socket.socket | None = None
        self._send_lock = threading.Lock()
        self._lock = threading.Lock()  # guards _pending, _watches, _dead, _expiry_callbacks
        self._ids = itertools.count(1)
        self._pending: dict[int, concurrent.futures.Future] = {}
        self._watches: dict[int, tuple[str, Callable]] = {}
        self._expiry_callbacks: list[Callable[[], None]] = []
        self._dead: str | None = None  # why the session ended, once it has
        self._closed_by_us = False
        self._last_heard = time.monotonic()
        self._stop = threading.Event()
        self._callbacks = CallbackThread(f"coord-callbacks-{port}", self._overflow)
        # A call waits for its reply at most this long; after that its outcome is unknown.
        self._call_timeout_s = max(5.0, 2 * session_timeout_ms / 1000)

    # ---- session lifecycle -------------------------------------------------------------------

    def connect(self) -> None:
        if self._sock is not None or self._dead is not None:
            raise CoordError("connect() may be called once; make a new client to reconnect")
        sock = None
        try:
            # The connect timeout also bounds the hello exchange: a port that accepts but never
            # answers (not our server, or a stopped one) fails here instead of hanging.
            sock = socket.create_connection((self.host, self.port), timeout=self.connect_timeout_s)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.sendall(encode_frame({"id": 0, "op": "hello", "timeout_ms": self.session_timeout_ms}))
            reply = _read_frame(sock)
        except (OSError, FrameError) as e:
            if sock is not None:
                sock.close()
            self._callbacks.stop()
            raise CoordError(f"cannot reach the coordination server at {self.host}:{self.port} "
                             f"within {self.connect_timeout_s}s: {e}") from None
        if "ok" not in reply:
            sock.close()
            self._callbacks.stop()
            raise CoordError(f"coordination server refused the session: {reply.get('msg')}")
        sock.settimeout(None)  # the reader blocks in recv; silence is the heartbeat's business
        # ...but a send must not block for ever on a server that stopped reading (its buffer is
        # full): after a session timeout it fails, and the session is over for us.
        secs, ms = divmod(self.session_timeout_ms, 1000)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", secs, ms * 1000))
        self._sock = sock
        self.session_id = reply["ok"]["session_id"]
        self.session_timeout_ms = reply["ok"]["timeout_ms"]  # as negotiated
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
            alive = self._dead is None
        if alive:
            try:  # ends the session at once on the server: ephemerals vanish now, not at timeout
                self._call("close", timeout_s=min(self._call_timeout_s, 2.0))
            except CoordError:
                pass
        self._end("closed by this client")
        self._callbacks.stop()

    def on_session_expired(self, callback: Callable[[], None]) -> None:
        with self._lock:
            if self._dead is None:
                self._expiry_callbacks.append(callback)
                return
            expired = not self._closed_by_us
        if expired:
            self._callbacks.submit(callback, force=True)

    def _end(self, reason: str) -> None:
        """The session is over (for whatever reason): fail waiters, stop threads, run expiry
        callbacks unless we closed it ourselves. Idempotent."""
        with self._lock:
            if self._dead is not None:
                return
            self._dead = reason
            pending, self._pending = self._pending, {}
            callbacks = [] if self._closed_by_us else self._expiry_callbacks
            self._expiry_callbacks = []
        self._stop.set()
        if self._sock is not None:
            try:
                self._sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self._sock.close()
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
        sock = self._sock
        try:
            while True:  # ends when the socket closes or the server expires us
                msg = _read_frame(sock)
                self._last_heard = time.monotonic()
                if "expired" in msg:
                    self._end(f"server expired the session: {msg['expired']}")
                    return
                if "watch" in msg:
                    self._deliver(msg["watch"], msg)
                    continue
                with self._lock:
                    fut = self._pending.pop(msg.get("id"), None)
                if "ok" in msg and msg.get("id") in self._watches:
                    # A watch's initial value is queued here, on the reader thread, so it is
                    # ahead of every later event of that watch (they are read after this reply).
                    self._deliver(msg["id"], msg["ok"])
                if fut is not None:
                    fut.set_result(msg)
        except (OSError, FrameError) as e:
            self._end(f"connection to the coordination server lost: {e!r}")
        except Exception as e:  # a malformed message from the server: never hang the session
            log.exception("coord: bad message from the server")
            self._end(f"protocol error: {e!r}")

    def _heartbeat_loop(self) -> None:
        interval = self.session_timeout_ms / 3000
        while not self._stop.wait(interval):  # ends with the session
            silent_s = time.monotonic() - self._last_heard
            if silent_s * 1000 >= self.session_timeout_ms:
                self._end(f"no word from the server for {silent_s:.1f}s")
                return
            try:
                self._send({"id": next(self._ids), "op": "ping"})  # reply unmatched: ignored
            except CoordError:
                return

    def _send(self, msg: dict) -> None:
        try:
            with self._send_lock:
                self._sock.sendall(encode_frame(msg))
        except OSError as e:
            self._end(f"send failed: {e!r}")
            raise SessionExpired(f"session {self.session_id} ended: {self._dead}") from None

    def _deliver(self, wid: int, msg: dict) -> None:
        """Queue one watch callback; called only on the reader thread, so in server order."""
        with self._lock:
            entry = self._watches.get(wid)
        if entry is None:
            return
        kind, cb = entry
        if kind == "data":
            data = None if msg["data"] is None else s2b(msg["data"])
            self._callbacks.submit(lambda: cb(data, msg["version"]))
        else:
            children = list(msg["children"])
            self._callbacks.submit(lambda: cb(children))

    # ---- requests ----------------------------------------------------------------------------

    def _call(self, op: str, *, timeout_s: float | None = None, **fields) -> dict:
        rid = next(self._ids)
        fut: concurrent.futures.Future = concurrent.futures.Future()
        with self._lock:
            if self._dead is not None:
                if self._closed_by_us:
                    raise CoordError("client is closed")
                raise SessionExpired(f"session {self.session_id} ended: {self._dead}")
            if self._sock is None:
                raise CoordError("not connected: call connect() first")
            self._pending[rid] = fut
            if op.startswith("watch_"):
                # Registered before the request leaves, so no event can arrive unclaimed.
                self._watches[rid] = (op[len("watch_"):], fields.pop("_callback"))
        self._send({"id": rid, "op": op, **fields})
        try:
            reply = fut.result(timeout=timeout_s or self._call_timeout_s)
        except concurrent.futures.TimeoutError:
            with self._lock:
                self._pending.pop(rid, None)
            raise ConnectionLoss(f"{op}: no reply within {timeout_s or self._call_timeout_s}s; "
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
