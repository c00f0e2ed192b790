"""Coordination layer: what ZooKeeper gives Kafka's controller (ephemeral /controller, the
/controller_epoch counter, /brokers/ids registrations, CAS'ed partition state, watches).

`connect(url)` is the entry point; the contract is `base.Coordinator`. URLs:
  embedded://127.0.0.1:PORT        our own server (`python -m impl.coord.server`), the default
  zk://127.0.0.1:PORT[/chroot]     real ZooKeeper through kazoo (`zk.py`)
"""
from __future__ import annotations

import urllib.parse

from .base import (BadVersion, ConnectionLoss, CoordError, Coordinator, NodeExists, NoNode,
                   NotEmpty, SessionExpired, validate_path)

__all__ = ["connect", "Coordinator", "CoordError", "NodeExists", "NoNode", "BadVersion",
           "SessionExpired", "NotEmpty", "ConnectionLoss", "validate_path"]


def connect(url: str, session_timeout_ms: int = 6000, connect_timeout_s: float = 5.0) -> Coordinator:
    """Open a session. Raises CoordError if the server does not answer within connect_timeout_s,
    ValueError on a malformed URL."""
    u = urllib.parse.urlsplit(url)
    if u.scheme not in ("embedded", "zk") or not u.hostname or not u.port:
        raise ValueError(f"coordination URL must be embedded://HOST:PORT or zk://HOST:PORT[/chroot], "
                         f"got {url!r}")
    if not isinstance(session_timeout_ms, int) or session_timeout_ms <= 0:
        raise ValueError(f"session_timeout_ms must be a positive int, got {session_timeout_ms!r}")
    client: Coordinator
    if u.scheme == "embedded":
        if u.path not in ("", "/"):
            raise ValueError(f"embedded:// URLs take no path (no chroot): {url!r}")
        from .embedded import EmbeddedCoordinator
        client = EmbeddedCoordinator(u.hostname, u.port, session_timeout_ms, connect_timeout_s)
    else:
        chroot = u.path.rstrip("/")
        if chroot:
            validate_path(chroot)
        from .zk import ZkCoordinator
        client = ZkCoordinator(f"{u.hostname}:{u.port}{chroot}", session_timeout_ms,
                               connect_timeout_s)
    client.connect()
    return client
