"""The Coordinator contract on real ZooKeeper (Debian's `zookeeper` package) through kazoo.

Owns the translation only: kazoo exceptions -> ours, kazoo connection states -> our session
lifecycle, ZooKeeper's one-shot watches -> our persistent callbacks. Semantics that differ from
the embedded backend, on purpose or by ZooKeeper's nature:
  - watches: each event re-reads the node, so quick successive changes may fold into one call
    carrying the latest state (dedup by mzxid / child list: a call always means a change);
  - the session is over for us when kazoo reports LOST (the server expired it or we closed),
    or when we stay disconnected (SUSPENDED) for a whole session timeout: by then the server
    has expired the session if it is alive, so a controller must stop acting. kazoo would go on
    with a fresh session; we stop it instead, so every later call raises SessionExpired and the
    caller reconnects explicitly, as with the embedded backend;
  - a call in flight when the connection drops raises ConnectionLoss (it may have taken
    effect); a call made while disconnected waits in kazoo's queue for the reconnect, at most
    until the session ends for us (then SessionExpired);
  - get_children("/") hides ZooKeeper's own /zookeeper node.
"""
from __future__ import annotations

import contextlib
import logging
import threading
from typing import Callable, Iterator

from kazoo import exceptions as kx
from kazoo.client import KazooClient, KazooState
from kazoo.handlers.threading import KazooTimeoutError

from .base import (BadVersion, CallbackThread, ConnectionLoss, CoordError, Coordinator, NodeExists,
                   NoNode, NotEmpty, SessionExpired, validate_data, validate_path)

log = logging.getLogger(__name__)


class ZkCoordinator(Coordinator):
    def __init__(self, hosts: str, session_timeout_ms: int = 6000, connect_timeout_s: float = 5.0):
        self.hosts = hosts
        self.session_timeout_ms = session_timeout_ms
        self.connect_timeout_s = connect_timeout_s
        self._kz = KazooClient(hosts=hosts, timeout=session_timeout_ms / 1000)
        self._lock = threading.Lock()  # guards _dead, _closed_by_us, _expiry_callbacks, _timer
        self._dead: str | None = None
        self._closed_by_us = False
        self._expiry_callbacks: list[Callable[[], None]] = []
        self._suspend_timer: threading.Timer | None = None
        self._callbacks = CallbackThread(f"coord-callbacks-zk-{hosts}", self._overflow)

    # ---- session lifecycle -------------------------------------------------------------------

    def connect(self) -> None:
        try:
            self._ensure_chroot()
            self._kz.start(timeout=self.connect_timeout_s)
        except (KazooTimeoutError, kx.KazooException, OSError) as e:
            self._kz.stop()
            self._kz.close()
            self._callbacks.stop()
            raise CoordError(f"cannot reach ZooKeeper at {self.hosts} within "
                             f"{self.connect_timeout_s}s: {e!r}") from None
        # As negotiated: ZooKeeper clamps to [2, 20] * tickTime.
        self.session_timeout_ms = int(getattr(self._kz, "_session_timeout", self.session_timeout_ms))
        self._kz.add_listener(self._state_listener)

    def _ensure_chroot(self) -> None:
        """Create the chroot if missing, as Kafka does for zookeeper.connect=host:port/chroot;
        without it every call under the chroot would fail with NoNode."""
        if "/" not in self.hosts:
            return
        base, chroot = self.hosts.split("/", 1)
        kz = KazooClient(hosts=base, timeout=self.session_timeout_ms / 1000)
        try:
            kz.start(timeout=self.connect_timeout_s)
            kz.ensure_path("/" + chroot)
        finally:
            kz.stop()
            kz.close()

    def close(self) -> None:
        with self._lock:
            if self._closed_by_us:
                return
            self._closed_by_us = True
            alive = self._dead is None
        if alive:  # else _end has stopped kazoo already (or is doing so)
            # stop() sends closeSession: ZooKeeper deletes our ephemerals at once.
            self._kz.stop()
            self._kz.close()
        self._end("closed by this client")
        self._callbacks.stop()

    def _state_listener(self, state: str) -> None:
        # Runs on kazoo's connection thread: must not block or call the client.
        if state == KazooState.LOST:
            self._end_async("ZooKeeper session lost (expired or closed)")
        elif state == KazooState.SUSPENDED:
            with self._lock:
                if self._suspend_timer is None and self._dead is None:
                    t = threading.Timer(self.session_timeout_ms / 1000, self._end,
                                        args=("disconnected from ZooKeeper for a whole session timeout",))
                    t.daemon = True
                    self._suspend_timer = t
                    t.start()
        elif state == KazooState.CONNECTED:
            with self._lock:
                if self._suspend_timer is not None:
                    self._suspend_timer.cancel()
                    self._suspend_timer = None

    def _end_async(self, reason: str) -> None:
        threading.Thread(target=self._end, args=(reason,), daemon=True).start()

    def _overflow(self) -> None:
        self._end_async("callback queue overflow")

    def _end(self, reason: str) -> None:
        """The session is over for this client. Idempotent; never runs on kazoo's threads."""
        with self._lock:
            if self._dead is not None:
                return
            self._dead = reason
            callbacks = [] if self._closed_by_us else self._expiry_callbacks
            self._expiry_callbacks = []
            closed_by_us = self._closed_by_us
            if self._suspend_timer is not None:
                self._suspend_timer.cancel()
                self._suspend_timer = None
        if not closed_by_us:
            log.warning("coord: ZooKeeper session ended: %s", reason)
            self._kz.stop()  # else kazoo would silently open a new session
            self._kz.close()
        for cb in callbacks:
            self._callbacks.submit(cb, force=True)

    @contextlib.contextmanager
    def _mapped(self, op: str, path: str) -> Iterator[None]:
        with self._lock:
            if self._dead is not None:
                if self._closed_by_us:
                    raise CoordError("client is closed")
                raise SessionExpired(f"session ended: {self._dead}")
        try:
            yield
        except kx.NodeExistsError:
            raise NodeExists(f"node {path} exists") from None
        except kx.NoNodeError:
            raise NoNode(f"{op} {path}: no node") from None
        except kx.BadVersionError:
            raise BadVersion(f"{op} {path}: version mismatch") from None
        except kx.NotEmptyError:
            raise NotEmpty(f"{path} has children") from None
        except kx.NoChildrenForEphemeralsError:
            raise CoordError(f"{op} {path}: parent is ephemeral and cannot have children") from None
        except kx.SessionExpiredError:  # includes ConnectionClosedError (client stopped)
            if self._closed_by_us:
                raise CoordError("client is closed") from None
            self._end_async(f"{op} {path}: session expired")
            raise SessionExpired(f"{op} {path}: ZooKeeper session expired") from None
        except (kx.ConnectionLoss, kx.OperationTimeoutError, KazooTimeoutError) as e:
            raise ConnectionLoss(f"{op} {path}: {e!r}; it may or may not have taken effect") from None
        except kx.KazooException as e:
            raise CoordError(f"{op} {path}: {e!r}") from None

    # ---- operations --------------------------------------------------------------------------

    def create(self, path: str, data: bytes = b"", *, ephemeral: bool = False,
               makepath: bool = True) -> None:
        validate_path(path)
        data = validate_data(data)
        if path == "/":
            raise NodeExists("node / exists")
        with self._mapped("create", path):
            self._kz.create(path, data, ephemeral=bool(ephemeral), makepath=bool(makepath))

    def get(self, path: str) -> tuple[bytes, int]:
        with self._mapped("get", validate_path(path)):
            data, stat = self._kz.get(path)
        return data, stat.version

    def exists(self, path: str) -> int | None:
        with self._mapped("exists", validate_path(path)):
            stat = self._kz.exists(path)
        return None if stat is None else stat.version

    def set(self, path: str, data: bytes, version: int = -1) -> int:
        validate_path(path)
        data = validate_data(data)
        with self._mapped("set", path):
            return self._kz.set(path, data, version=_check_version(version)).version

    def delete(self, path: str, version: int = -1) -> None:
        if validate_path(path) == "/":
            raise ValueError("cannot delete /")
        with self._mapped("delete", path):
            self._kz.delete(path, version=_check_version(version))

    def get_children(self, path: str) -> list[str]:
        with self._mapped("get_children", validate_path(path)):
            return _visible(path, self._kz.get_children(path))

    def watch_data(self, path: str, callback: Callable[[bytes | None, int | None], None]) -> None:
        validate_path(path)

        def on_data(data, stat):  # kazoo calls this once now, then after each change (by mzxid)
            if self._dead is not None:
                return False  # stop watching
            version = None if stat is None else stat.version
            self._callbacks.submit(lambda: callback(data if stat is not None else None, version))

        with self._mapped("watch_data", path):
            self._kz.DataWatch(path, on_data)

    def watch_children(self, path: str, callback: Callable[[list[str]], None]) -> None:
        validate_path(path)
        with self._mapped("watch_children", path):
            _ChildrenWatch(self, path, callback).fetch()


class _ChildrenWatch:
    """kazoo's ChildrenWatch stops for good when the node is absent; ours then watches for its
    creation (like kazoo's DataWatch does), so a watch may precede the node. Fetches run one at
    a time; a callback is queued only when the child list differs from the last one queued."""

    # A node created and deleted over and over while we look could make fetch chase it forever.
    MAX_FETCH_ROUNDS = 100

    def __init__(self, owner: ZkCoordinator, path: str, callback: Callable[[list[str]], None]):
        self.owner, self.path, self.callback = owner, path, callback
        self.kz = owner._kz
        self.lock = threading.Lock()
        self.last: list[str] | None = None
        self.kz.add_listener(self._session_listener)

    def _watcher(self, event) -> None:
        self.kz.handler.spawn(self._fetch_quietly)

    def _session_listener(self, state: str) -> None:
        if state == KazooState.CONNECTED:  # after a reconnect: catch what we may have missed
            self.kz.handler.spawn(self._fetch_quietly)

    def _fetch_quietly(self) -> None:
        try:
            self.fetch()
        except kx.KazooException as e:  # connection trouble: the session listener retries
            log.debug("coord: children watch %s: %r", self.path, e)

    def fetch(self) -> None:
        with self.lock:
            for _ in range(self.MAX_FETCH_ROUNDS):
                if self.owner._dead is not None:
                    return
                try:
                    children = _visible(self.path, self.kz.get_children(self.path, watch=self._watcher))
                    break
                except kx.NoNodeError:
                    # Absent: watch for its creation; if it appeared meanwhile, read it again.
                    if self.kz.exists(self.path, watch=self._watcher) is None:
                        children = []
                        break
            else:
                raise CoordError(f"watch_children {self.path}: node keeps flapping")
            if children != self.last:
                self.last = children
                self.owner._callbacks.submit(lambda: self.callback(list(children)))


def _visible(path: str, children: list[str]) -> list[str]:
    return sorted(c for c in children if not (path == "/" and c == "zookeeper"))


def _check_version(version: object) -> int:
    if not isinstance(version, int) or isinstance(version, bool) or version < -1:
        raise ValueError(f"version must be an int >= -1, got {version!r}")
    return version
