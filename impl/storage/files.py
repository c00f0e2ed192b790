"""Durable file writes shared by the partition log (impl/storage/log.py) and the producer-state
snapshots (impl/producer_state.py): a file is replaced whole or not at all."""
from __future__ import annotations

import os
import threading
from pathlib import Path


def atomic_write(path: Path, data: bytes) -> None:
    """Write `data` to a temporary sibling, fsync it, rename it over `path` (a crash leaves the
    old file or the new one, never a torn one)."""
    # unique per thread: a checkpoint may be written from the executor and the loop at once
    tmp = path.with_name(f"{path.name}.{threading.get_ident()}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
