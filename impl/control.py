"""Fault control of a running cluster: faults as data, and the control channel of
`kafkaverify broker start`.

A fault is a dict, validated here, the same for the Cluster API, the CLI and a future
fault-injection schedule (STYLE.md 5):
    {"fault": "kill" | "pause" | "resume" | "restart" | "power-fail" | "stop",
     "target": "2" | "leader:TOPIC/PARTITION"}
kill = SIGKILL (no flush, the session lingers until it expires); pause/resume = SIGSTOP/SIGCONT;
stop = SIGTERM (clean); power-fail = SIGKILL, then every write the broker had not fsynced is
dropped (impl.storage.log.power_loss); restart = start the broker again (after any of these).
A target "leader:t/0" is resolved to the partition's current leader when the fault is applied.
Besides faults, {"op": "status"} returns Cluster.status().

Control channel: `broker start` listens on 127.0.0.1 (ephemeral port) and writes
`<data-dir>/control.json` = {"host", "port", "pid"}; each connection carries one JSON line
request and gets one JSON line answer {"ok": true, ...} or {"ok": false, "error": "..."}.
The file is removed when the cluster stops. TCP rather than a Unix socket: a data dir may be
deeper than the 108-byte socket path limit.
"""
from __future__ import annotations

import json
import os
import socket
import socketserver
import threading
from pathlib import Path

FAULTS = ("kill", "pause", "resume", "restart", "power-fail", "stop")
CONTROL_FILE = "control.json"
MAX_REQUEST_BYTES = 64 << 10


class FaultError(Exception):
    """A malformed fault or a target that names nothing (a usage error, exit 3)."""


def parse_target(target: str) -> tuple[str, object]:
    """("broker", id) or ("leader", (topic, partition))."""
    t = str(target).strip()
    if t.isdigit():
        return "broker", int(t)
    if t.startswith("leader:") and "/" in t:
        topic, _, part = t[len("leader:"):].rpartition("/")
        if topic and part.isdigit():
            return "leader", (topic, int(part))
    raise FaultError(f"target must be a broker id or leader:TOPIC/PARTITION, got {target!r}")


def resolve(cluster, target: str) -> int:
    kind, v = parse_target(target)
    if kind == "broker":
        if not 0 <= v < cluster.n:
            raise FaultError(f"no broker {v} (brokers 0..{cluster.n - 1})")
        return v
    topic, part = v
    st = cluster.partition_state(topic, part)
    if st is None:
        raise FaultError(f"no partition {topic}/{part}")
    if st["leader"] < 0:
        raise FaultError(f"partition {topic}/{part} has no leader")
    return st["leader"]


def apply_fault(cluster, fault: dict) -> dict:
    """Validates and applies one fault; returns {"fault", "broker", ...} describing what was done."""
    if not isinstance(fault, dict) or fault.get("fault") not in FAULTS or "target" not in fault:
        raise FaultError(f"a fault is {{'fault': one of {', '.join(FAULTS)}, 'target': ...}}, got {fault!r}")
    f = fault["fault"]
    i = resolve(cluster, fault["target"])
    out: dict = {"fault": f, "broker": i}
    running = i in cluster.alive()
    if f == "restart":
        cluster.restart(i)
    elif not running:
        raise FaultError(f"broker {i} is not running (restart it first)")
    elif f == "kill":
        cluster.kill(i)
    elif f == "power-fail":
        out["lost_bytes"] = sum(cluster.power_loss(i).values())
    elif f == "pause":
        cluster.pause(i)
    elif f == "resume":
        cluster.resume(i)
    elif f == "stop":
        cluster.stop_broker(i)
    return out


# --- the channel ----------------------------------------------------------------------------------

class ControlServer:
    """Serves faults and status for one Cluster on a thread; `lock` serialises every operation
    with the owner's own use of the Cluster (the dead-broker monitor, and its final stop).

    Each request runs on a thread of its own, which server.shutdown() does not wait for (they
    are daemon threads). So stop() marks the channel closed under the lock: a request being
    served finishes first, and one that reaches the lock later is refused, rather than
    restarting a broker of a cluster the owner is stopping (or has stopped) under the same
    lock."""

    def __init__(self, cluster, data_dir: str | Path, lock: threading.Lock):
        self.cluster, self.lock = cluster, lock
        self.closed = False
        self.file = Path(data_dir) / CONTROL_FILE
        outer = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self):
                line = self.rfile.readline(MAX_REQUEST_BYTES)
                self.wfile.write((json.dumps(outer.handle(line), sort_keys=True) + "\n").encode())

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self.server = Server(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, name="control", daemon=True)

    def handle(self, line: bytes) -> dict:
        try:
            req = json.loads(line)
        except ValueError:
            return {"ok": False, "error": "request is not a JSON line"}
        try:
            with self.lock:
                if self.closed:
                    return {"ok": False, "error": "the cluster is stopping"}
                if isinstance(req, dict) and req.get("op") == "status":
                    return {"ok": True, **self.cluster.status()}
                return {"ok": True, **apply_fault(self.cluster, req)}
        except FaultError as e:
            return {"ok": False, "error": str(e)}
        except Exception as e:           # a fault that failed half-way: say so, keep serving
            return {"ok": False, "error": f"{e.__class__.__name__}: {e}"}

    def start(self) -> None:
        self.thread.start()
        host, port = self.server.server_address
        tmp = self.file.with_suffix(".tmp")
        tmp.write_text(json.dumps({"host": host, "port": port, "pid": os.getpid()}))
        os.replace(tmp, self.file)

    def stop(self) -> None:
        """No new connection after this, and no request acts on the cluster any more: the
        caller may stop the cluster (holding the lock) once it returns."""
        self.file.unlink(missing_ok=True)
        self.server.shutdown()
        self.server.server_close()
        with self.lock:       # waits for a request being served; later ones see closed
            self.closed = True


def request(data_dir: str | Path, body: dict, timeout_s: float = 120) -> dict:
    """One request to the `broker start` serving `data_dir`. Raises FaultError when none runs."""
    f = Path(data_dir) / CONTROL_FILE
    try:
        info = json.loads(f.read_text())
        with socket.create_connection((info["host"], int(info["port"])), timeout=timeout_s) as s:
            s.sendall((json.dumps(body) + "\n").encode())
            data = b""
            while not data.endswith(b"\n"):
                chunk = s.recv(1 << 16)
                if not chunk:
                    break
                data += chunk
    except (OSError, ValueError, KeyError) as e:
        raise FaultError(f"no running `kafkaverify broker start` for {data_dir} ({e})") from None
    try:
        return json.loads(data)
    except ValueError:
        raise FaultError(f"bad answer from the control channel of {data_dir}") from None
