"""The coordination interface the broker's controller codes against, and what both backends share.

Owns: the exception hierarchy, the `Coordinator` contract, path validation, the create-or-increment
CAS loop (`increment`, used for /controller_epoch), and the single callback thread every backend
delivers watch and expiry events on. Backends: `embedded.py` (our own server, `server.py`) and
`zk.py` (real ZooKeeper through kazoo). Semantics follow ZooKeeper's: a new node has version 0 and
every set increments it; ephemeral nodes belong to a session and vanish when it ends.
"""
from __future__ import annotations

import abc
import collections
import logging
import threading
from typing import Callable

log = logging.getLogger(__name__)

# ZooKeeper's own path limits are looser; ours keep paths printable and bounded so a bad caller
# fails here with a clear message instead of deep inside a server.
MAX_PATH_CHARS = 1024
# Data per node: under ZooKeeper's default jute.maxbuffer (1 MiB incl. the request envelope; above
# it ZooKeeper drops the connection instead of answering). The embedded frame bound is larger.
MAX_DATA_BYTES = 1_000_000
# Pending callbacks per client. Hitting it means a callback is stuck or far too slow; dropping
# events would silently break the "every change, in order" contract, so the client ends its
# session instead (the caller then sees SessionExpired and reconnects, like after a real expiry).
MAX_PENDING_CALLBACKS = 10_000
# increment() gives up after this many lost compare-and-set races (each loss means another
# writer succeeded, so the loop only spins under heavy contention).
MAX_CAS_ATTEMPTS = 1000


class CoordError(Exception):
    """Any failure of a coordination call."""


class NodeExists(CoordError):
    """create() of a path that already exists."""


class NoNode(CoordError):
    """The path (or, for create with makepath=False, its parent) does not exist."""


class BadVersion(CoordError):
    """Compare-and-set failed: the node's version is not the expected one."""


class SessionExpired(CoordError):
    """This client's session is gone; its ephemeral nodes were deleted. Connect again."""


class NotEmpty(CoordError):
    """delete() of a node that still has children."""


class ConnectionLoss(CoordError):
    """No answer arrived: the call may or may not have taken effect (indeterminate)."""


def validate_path(path: object) -> str:
    """Return `path` if it is an absolute, normalised node path, else raise ValueError saying why."""
    if not isinstance(path, str):
        raise ValueError(f"path must be a str, got {type(path).__name__}")
    if not path.startswith("/"):
        raise ValueError(f"path must be absolute (start with '/'): {path!r}")
    if len(path) > MAX_PATH_CHARS:
        raise ValueError(f"path longer than {MAX_PATH_CHARS} characters: {path[:40]!r}...")
    if path == "/":
        return path
    if path.endswith("/"):
        raise ValueError(f"path must not end with '/': {path!r}")
    for name in path[1:].split("/"):
        if name == "":
            raise ValueError(f"path has an empty component ('//'): {path!r}")
        if name in (".", ".."):
            raise ValueError(f"path has a relative component {name!r}: {path!r}")
        if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in name):
            raise ValueError(f"path has a control character: {path!r}")
    # ZooKeeper reserves /zookeeper for itself; refusing it everywhere keeps the backends alike.
    if path == "/zookeeper" or path.startswith("/zookeeper/"):
        raise ValueError(f"/zookeeper is reserved: {path!r}")
    return path


def parent_of(path: str) -> str:
    """'/a/b' -> '/a'; '/a' -> '/'."""
    head = path.rsplit("/", 1)[0]
    return head or "/"


def validate_data(data: object) -> bytes:
    if not isinstance(data, (bytes, bytearray)):
        raise TypeError(f"data must be bytes, got {type(data).__name__}")
    if len(data) > MAX_DATA_BYTES:
        raise ValueError(f"data is {len(data)} bytes, above the {MAX_DATA_BYTES}-byte bound")
    return bytes(data)


class Coordinator(abc.ABC):
    """Synchronous, thread-safe client. Callbacks run on a background thread of the client, one at
    a time, in event order. Callbacks may call the client (they never run on its I/O thread)."""

    session_timeout_ms: int

    @abc.abstractmethod
    def connect(self) -> None: ...

    @abc.abstractmethod
    def close(self) -> None:
        """End the session: its ephemeral nodes vanish at once. Idempotent."""

    @abc.abstractmethod
    def create(self, path: str, data: bytes = b"", *, ephemeral: bool = False,
               makepath: bool = True) -> None:
        """NodeExists; NoNode if the parent is missing and makepath is False. makepath creates
        missing parents as persistent nodes with empty data."""

    @abc.abstractmethod
    def get(self, path: str) -> tuple[bytes, int]:
        """(data, version); NoNode."""

    @abc.abstractmethod
    def exists(self, path: str) -> int | None:
        """Version, or None if absent."""

    @abc.abstractmethod
    def set(self, path: str, data: bytes, version: int = -1) -> int:
        """New version; BadVersion, NoNode. version -1 = unconditional."""

    @abc.abstractmethod
    def delete(self, path: str, version: int = -1) -> None:
        """NoNode, BadVersion, NotEmpty."""

    @abc.abstractmethod
    def get_children(self, path: str) -> list[str]:
        """Sorted child names; NoNode."""

    @abc.abstractmethod
    def watch_data(self, path: str, callback: Callable[[bytes | None, int | None], None]) -> None:
        """Persistent: called once now with the current (data, version) or (None, None), then on
        every create/set/delete of path. The embedded backend reports every change; ZooKeeper's
        one-shot watches may fold quick successive changes into one call with the latest state
        (versions seen still only grow, and the final state is always reported)."""

    @abc.abstractmethod
    def watch_children(self, path: str, callback: Callable[[list[str]], None]) -> None:
        """Persistent: called now and on every change of the sorted child list (path may not exist
        yet -> [])."""

    def on_session_expired(self, callback: Callable[[], None]) -> None:
        """Run callback (on the callback thread) once the session is known to be gone. Registering
        after expiry runs it at once. Both clients keep the same session bookkeeping: `_lock`
        guarding `_dead` (None while alive), `_expiry_callbacks`, `_closed_by_us`, and the
        `_callbacks` thread."""
        with self._lock:
            if self._dead is None:
                self._expiry_callbacks.append(callback)
                return
            expired = not self._closed_by_us
        if expired:
            self._callbacks.submit(callback, force=True)

    def increment(self, path: str) -> int:
        """Atomically create-or-increment an integer stored as ASCII; return the new value (the
        first call returns 1). Used for /controller_epoch: every election gets a distinct epoch."""
        validate_path(path)
        for _ in range(MAX_CAS_ATTEMPTS):
            try:
                data, version = self.get(path)
            except NoNode:
                try:
                    self.create(path, b"1")
                    return 1
                except NodeExists:
                    continue  # another writer created it first: read and increment theirs
            try:
                value = int(data.decode("ascii") or "0") + 1
            except (UnicodeDecodeError, ValueError):
                raise CoordError(f"increment: {path} holds {data[:40]!r}, not an ASCII integer")
            try:
                self.set(path, str(value).encode("ascii"), version)
                return value
            except BadVersion:
                continue  # lost the race: someone else incremented; retry on their value
        raise CoordError(f"increment: {path}: gave up after {MAX_CAS_ATTEMPTS} lost CAS races")

    def __enter__(self) -> "Coordinator":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class CallbackThread:
    """Runs callbacks one at a time, in submission order, on one daemon thread.

    Every backend funnels watch events and session expiry through here, so a slow callback never
    stalls network I/O, and a callback may call back into the client without deadlocking it.
    """

    def __init__(self, name: str, on_overflow: Callable[[], None]):
        self._cond = threading.Condition()
        self._items: collections.deque[Callable[[], None] | None] = collections.deque()
        self._on_overflow = on_overflow
        self._overflowed = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[[], None], *, force: bool = False) -> None:
        """Queue fn. Past MAX_PENDING_CALLBACKS the client's on_overflow ends the session (see the
        bound's note); `force` admits the final expiry notice even then."""
        overflow = False
        with self._cond:
            if len(self._items) >= MAX_PENDING_CALLBACKS and not force:
                overflow = not self._overflowed
                self._overflowed = True
            else:
                self._items.append(fn)
                self._cond.notify()
        if overflow:
            log.error("coord: %d callbacks pending; ending the session", MAX_PENDING_CALLBACKS)
            self._on_overflow()

    def stop(self) -> None:
        """Stop after the callbacks already queued. Never joins from the callback thread itself."""
        with self._cond:
            self._items.append(None)
            self._cond.notify()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout=5.0)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._items:
                    self._cond.wait()
                fn = self._items.popleft()
            if fn is None:
                return
            try:
                fn()
            except Exception:  # a broken callback must not kill event delivery for the others
                log.exception("coord: callback raised")
