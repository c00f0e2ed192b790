"""One driver process and the protocol (version 1, docs/drivers.md): JSON lines, requests on
its stdin, answers on its stdout, its stderr kept (a tail in memory, all of it in a log file when
one is given) for error reports. Answers are matched to requests by id, so many sends may be
outstanding; every wait is bounded; a driver that dies fails every outstanding request with its
exit status and the tail of its stderr."""
from __future__ import annotations

import collections
import itertools
import json
import subprocess
import threading
import time
from pathlib import Path
from typing import Callable

from kafkaverify.drivers.registry import DRIVERS

PROTOCOL = 1
HELLO_TIMEOUT_S = 20.0           # node loading kafkajs on a busy machine takes a few seconds
REQUEST_TIMEOUT_S = 30.0
STDERR_TAIL = 40


class DriverError(Exception):
    """The driver broke the protocol, died, or did not answer in time."""


class DriverRefused(Exception):
    """configure was refused: the message is the client's own words."""


class Driver:
    """A started driver: request() waits for one answer, submit() calls back when it comes."""

    def __init__(self, client: str, log: Path | None = None, command: list[str] | None = None,
                 hello_timeout_s: float = HELLO_TIMEOUT_S):
        spec = DRIVERS.get(client)
        if command is None:
            if spec is None:
                raise DriverError(f"unknown driver {client!r} (one of {', '.join(DRIVERS)})")
            why = spec.missing()
            if why:
                raise DriverError(why)
            command = spec.command()
        self.client = client
        self.command = command
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._waiting: dict[int, Callable[[dict], None]] = {}
        self._tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL)
        self._log = open(log, "a", encoding="utf-8") if log is not None else None
        self.hello: dict | None = None
        self._hello_seen = threading.Event()
        self.dead: str | None = None           # why the driver is gone, once it is
        self.protocol_errors: list[dict] = []  # protocol-error answers that named no request
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, bufsize=1)
        self._err_t = threading.Thread(target=self._read_stderr, daemon=True, name=f"{client}-stderr")
        self._out_t = threading.Thread(target=self._read_stdout, daemon=True, name=f"{client}-stdout")
        self._err_t.start()
        self._out_t.start()
        if not self._hello_seen.wait(hello_timeout_s):
            self.kill()
            raise DriverError(f"driver {client} said no hello within {hello_timeout_s:g}s{self._tail_text()}")
        if self.dead is not None and self.hello is None:
            raise DriverError(self.dead)
        if self.hello.get("protocol") != PROTOCOL:
            self.kill()
            raise DriverError(f"driver {client} speaks protocol {self.hello.get('protocol')!r}, not {PROTOCOL}")

    # -- reading -------------------------------------------------------------------------
    def _read_stderr(self) -> None:
        for line in self.proc.stderr:
            self._tail.append(line.rstrip("\n"))
            if self._log is not None:
                try:
                    self._log.write(line)
                    self._log.flush()
                except ValueError:          # closed under us at the end
                    pass

    def _read_stdout(self) -> None:
        try:
            for line in self.proc.stdout:
                line = line.strip()
                if not line:
                    continue
                try:
                    msg = json.loads(line)
                except ValueError:
                    self._broken(f"driver {self.client} wrote a line that is not JSON: {line[:200]!r}")
                    return
                if self.hello is None:
                    if not isinstance(msg, dict) or not isinstance(msg.get("hello"), dict):
                        self._broken(f"driver {self.client} began without a hello: {line[:200]!r}")
                        return
                    self.hello = msg["hello"]
                    self._hello_seen.set()
                    continue
                rid = msg.get("id") if isinstance(msg, dict) else None
                with self._lock:
                    cb = self._waiting.pop(rid, None) if isinstance(rid, int) else None
                if cb is None:
                    if isinstance(msg, dict) and msg.get("type") == "protocol-error":
                        self.protocol_errors.append(msg)
                    continue
                cb(msg)
        finally:
            self._gone()

    def _broken(self, why: str) -> None:
        self.dead = why
        self.kill()

    def _gone(self) -> None:
        """stdout closed: the driver exited (or was killed); every outstanding request fails."""
        try:
            rc = self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait(5)
        self._err_t.join(2)
        if self.dead is None:
            self.dead = f"driver {self.client} exited with status {rc}{self._tail_text()}"
        with self._lock:
            waiting, self._waiting = self._waiting, {}
        for cb in waiting.values():
            cb({"type": "error", "error": self.dead, "definite": False, "driver_died": True})
        self._hello_seen.set()

    def _tail_text(self) -> str:
        tail = list(self._tail)[-8:]
        return (": stderr ends\n  " + "\n  ".join(tail)) if tail else " (no stderr)"

    # -- asking --------------------------------------------------------------------------
    def submit(self, op: str, callback: Callable[[dict], None], **fields) -> int:
        """Sends one request; callback(answer) runs on the reader thread when it comes (or with
        an error answer if the driver dies first)."""
        rid = next(self._ids)
        with self._lock:
            if self.dead is not None:
                dead = self.dead
            else:
                dead = None
                self._waiting[rid] = callback
        if dead is not None:
            callback({"type": "error", "error": dead, "definite": False, "driver_died": True})
            return rid
        try:
            self.write_line(json.dumps({"id": rid, "op": op, **fields}))
        except (BrokenPipeError, OSError, ValueError):
            pass           # the reader reports the death to every waiter, this one included
        return rid

    def write_line(self, line: str) -> None:
        """One raw line to the driver (the tests send malformed ones)."""
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def request(self, op: str, timeout_s: float = REQUEST_TIMEOUT_S, **fields) -> dict:
        got: list[dict] = []
        done = threading.Event()

        def cb(msg):
            got.append(msg)
            done.set()
        rid = self.submit(op, cb, **fields)
        if not done.wait(timeout_s):
            with self._lock:
                self._waiting.pop(rid, None)
            raise DriverError(f"driver {self.client} did not answer {op} within {timeout_s:g}s"
                              f"{self._tail_text()}")
        msg = got[0]
        if msg.get("driver_died"):
            raise DriverError(msg["error"])
        if msg.get("type") == "protocol-error":
            raise DriverError(f"driver {self.client} answered {op} with a protocol error: {msg.get('error')}")
        return msg

    def configure(self, role: str, bootstrap: str, settings: dict, options: dict | None = None,
                  probe: bool = False, timeout_s: float = REQUEST_TIMEOUT_S) -> dict:
        """The client's effective options ({its own names: values}); DriverRefused in its words."""
        ans = self.request("configure", timeout_s, role=role, bootstrap=bootstrap, settings=settings,
                           options=options or {}, probe=probe)
        if ans.get("ok") is True:
            return ans.get("effective", {})
        if "refused" in ans:
            raise DriverRefused(str(ans["refused"]))
        raise DriverError(f"driver {self.client} answered configure with {ans!r}")

    def outstanding(self) -> int:
        with self._lock:
            return len(self._waiting)

    # -- ending --------------------------------------------------------------------------
    def close(self, timeout_s: float = 10.0) -> int | None:
        """Asks the driver to close, waits (bounded) for it to exit, kills it otherwise."""
        if self.proc.poll() is None and self.dead is None:
            try:
                self.request("close", timeout_s)
            except DriverError:
                pass
            try:
                self.proc.stdin.close()
            except OSError:
                pass
        try:
            self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
        self._out_t.join(5)
        if self._log is not None:
            self._log.close()
        return self.proc.returncode

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()

    def wait_until(self, cond: Callable[[], bool], timeout_s: float) -> bool:
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            if cond():
                return True
            time.sleep(0.02)
        return cond()
