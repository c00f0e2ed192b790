"""A thread of an ended embedded client must never touch the socket of the client made after it.

The case (seen once in ~12 loaded CI runs of test_paused_process_loses_session_and_ephemerals):
a client's reader thread sits in recv() on its socket, descriptor N, when the process is stopped
(SIGSTOP: a paused broker). The kernel interrupts that recv and, on SIGCONT, restarts it with the
same descriptor *number* once the thread runs. If the scheduler runs the other threads first, the
heartbeat ends the session (nothing heard for a timeout), the old code closed N, the process
connects a new client, whose socket Linux numbers N (the lowest free number), and the reader's
restarted recv takes the first 4 bytes that reach that socket: the length prefix of the new
client's hello reply. The new client then reads `{"id` as a length ("frame announces 2065852772
bytes").

A loaded scheduler produces that order only now and then. Here ptrace produces it every time: it
stops the reader inside recv (as SIGSTOP does), lets the session end and the new client send its
hello, stops the new client's thread while its reply lands (a proxy holds the reply until then),
and lets the old reader run first. The rule this checks (embedded.py, module note): only the
reader closes a connection's socket, after its last recv; other threads shut it down, which
wakes the reader but keeps the number allocated.
"""
from __future__ import annotations

import ctypes
import os
import platform
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from tests.conftest import _require_or_skip, subprocess_env

pytestmark = pytest.mark.timeout(60)

# Syscall numbers as /proc/PID/task/TID/syscall shows them: recvfrom (glibc's recv) and the
# poll (or ppoll) a socket with a timeout waits in.
RECVFROM, POLLS = {"x86_64": (45, {7, 271}), "aarch64": (207, {73})}.get(platform.machine(),
                                                                       (None, set()))
PTRACE_DETACH, PTRACE_SEIZE, PTRACE_INTERRUPT = 17, 0x4206, 0x4207
WALL = 0x40000000  # waitpid's __WALL: wait for a thread of another process we trace
WAIT_S = 10.0  # bound on every wait below; past it the test fails saying what it waited for

CHILD = r"""
import sys, threading
from impl import coord
url = sys.argv[1]
c = coord.connect(url, session_timeout_ms=1000)
expired = threading.Event()
c.on_session_expired(expired.set)
c.create("/brokers/ids/7", b"paused", ephemeral=True)
reader = [t for t in threading.enumerate() if t.name.startswith("coord-reader-")]
print(reader[0].native_id, flush=True)
sys.stdin.readline()  # the test holds the reader inside its recv; its session ends by silence
print("expired" if expired.wait(10) else "not-expired", flush=True)
c.close()
try:
    c2 = coord.connect(url, session_timeout_ms=1000, connect_timeout_s=3.0)
    c2.create("/brokers/ids/8", b"back", ephemeral=True)  # 7 lives until the server expires it
    print("registered", c2.get("/brokers/ids/8")[0].decode(), flush=True)
    c2.close()
except coord.CoordError as e:
    print(f"failed: {e}", flush=True)
"""


class GatedProxy:
    """Forwards 127.0.0.1:port to upstream. After hold_new(), the server's bytes to connections
    accepted from then on wait in the proxy (`waiting` is set once some do) until release()."""

    def __init__(self, upstream_port: int):
        self.upstream = ("127.0.0.1", upstream_port)
        self.lsock = socket.create_server(("127.0.0.1", 0))
        self.port = self.lsock.getsockname()[1]
        self.holding = False
        self.held_port: int | None = None  # the client's port of the last held connection
        self.gate = threading.Event()
        self.waiting = threading.Event()
        self.socks: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def hold_new(self):
        self.holding = True

    def release(self):
        self.gate.set()

    def _accept(self):
        while True:  # ends when close() closes the listening socket
            try:
                c, _ = self.lsock.accept()
                u = socket.create_connection(self.upstream)
            except OSError:
                return
            self.socks += [c, u]
            if self.holding:
                self.held_port = c.getpeername()[1]
            threading.Thread(target=self._pump, args=(c, u, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(u, c, self.holding), daemon=True).start()

    def _pump(self, src, dst, gated):
        try:
            while chunk := src.recv(65536):
                if gated and not self.gate.is_set():
                    self.waiting.set()
                    assert self.gate.wait(WAIT_S), "never released"
                dst.sendall(chunk)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self):
        self.gate.set()
        self.lsock.close()
        for s in self.socks:
            s.close()


def _ptrace(request: int, tid: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
    libc.ptrace.restype = ctypes.c_long
    if libc.ptrace(request, tid, None, None) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"ptrace({request:#x}, {tid}): {os.strerror(err)}")


def _thread_syscall(pid: int, tid: int) -> list[str] | None:
    """The thread's /proc syscall line split (number, args...), or None once the thread is gone."""
    try:
        with open(f"/proc/{pid}/task/{tid}/syscall") as f:
            return f.read().split()
    except FileNotFoundError:
        return None


def _in_syscall(pid: int, tid: int, numbers: set[int]) -> bool:
    line = _thread_syscall(pid, tid)
    return bool(line) and line[0].lstrip("-").isdigit() and int(line[0]) in numbers


def _unread_bytes(client_port: int, server_port: int) -> int:
    """Bytes waiting in the receive queue of the TCP socket 127.0.0.1:client_port ->
    127.0.0.1:server_port (/proc/net/tcp), 0 if there is no such socket."""
    want = (f"0100007F:{client_port:04X}", f"0100007F:{server_port:04X}")
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            if (fields[1], fields[2]) == want:
                return int(fields[4].split(":")[1], 16)
    return 0


def _stop_thread(tid: int) -> None:
    """Stop one thread where it is, as a signal stop does: a blocking call it is in is
    interrupted, to be restarted with the same arguments when the thread runs again."""
    _ptrace(PTRACE_SEIZE, tid)
    try:
        _ptrace(PTRACE_INTERRUPT, tid)
        os.waitpid(tid, WALL)
    except BaseException:
        _ptrace(PTRACE_DETACH, tid)
        raise


def _wait_until(cond, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not cond():  # polls a condition of another process; bounded by WAIT_S
        assert time.monotonic() < deadline, f"waited {WAIT_S}s for {what}"
        time.sleep(0.005)


def _need_syscall_numbers() -> None:
    if RECVFROM is None:  # CI (KAFKAVERIFY_REQUIRE_ALL=1) fails here instead of skipping
        _require_or_skip(f"no ptrace syscall numbers for {platform.machine()}")


def test_a_reader_restarting_its_recv_after_a_stop_cannot_read_the_next_clients_socket(
        embedded_coord_url):
    _need_syscall_numbers()
    port = int(embedded_coord_url.rsplit(":", 1)[1])
    proxy = GatedProxy(port)
    proc = subprocess.Popen([sys.executable, "-c", CHILD, f"embedded://127.0.0.1:{proxy.port}"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            env=subprocess_env())
    stopped: list[int] = []
    try:
        reader = int(proc.stdout.readline())
        proxy.hold_new()
        # 1. The reader stops inside recv (a SIGSTOP that the scheduler ends late for it). A
        # ping reply may wake it just then: stop it again until it is caught inside recv.
        for _ in range(100):  # each round is one ping reply's handling at most
            _wait_until(lambda: _in_syscall(proc.pid, reader, {RECVFROM}), "the reader to recv")
            _stop_thread(reader)
            stopped.append(reader)
            if _in_syscall(proc.pid, reader, {RECVFROM}):
                break
            _ptrace(PTRACE_DETACH, stopped.pop())
        assert stopped == [reader], "never caught the reader inside recv"
        proc.stdin.write("go\n")
        proc.stdin.flush()
        # 2. It hears nothing, so the client ends its session after a session timeout; the
        # process connects anew, and waits (poll) for the server's hello reply, held here.
        assert proc.stdout.readline().strip() == "expired"
        assert proxy.waiting.wait(WAIT_S), "the new client's hello got no reply"
        _wait_until(lambda: _in_syscall(proc.pid, proc.pid, POLLS), "the new client to wait")
        # 3. The reply lands in the new client's socket while its thread is stopped too...
        _stop_thread(proc.pid)
        stopped.append(proc.pid)
        proxy.release()
        _wait_until(lambda: _unread_bytes(proxy.held_port, proxy.port) > 0,
                    "the hello reply to reach the new client's socket")
        # 4. ...and the old reader runs first: its recv restarts with the descriptor number it
        # had. It must find its own (shut down) socket and end, not the new client's reply.
        _ptrace(PTRACE_DETACH, stopped.pop(0))
        _wait_until(lambda: _thread_syscall(proc.pid, reader) is None, "the old reader to end")
        _ptrace(PTRACE_DETACH, stopped.pop(0))
        assert proc.stdout.readline().strip() == "registered back"
        assert proc.wait(WAIT_S) == 0
    finally:
        for tid in stopped:
            _ptrace(PTRACE_DETACH, tid)
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        proxy.close()


# ---- the same race, unforced: a bounded stress of the paused-client scenario (-m slow) ---------

STRESS_S = float(os.environ.get("KAFKAVERIFY_COORD_STRESS_S", "120"))
STRESS_HOGS = 4


@pytest.mark.slow
@pytest.mark.timeout(STRESS_S + 120)
def test_stress_paused_clients_reregister_for_a_bounded_time(embedded_coord_url):
    _need_syscall_numbers()
    """test_paused_process_loses_session_and_ephemerals over and over for STRESS_S seconds, with
    the child on one CPU beside STRESS_HOGS busy loops and its reader thread under SCHED_IDLE,
    so after SIGCONT the reader tends to run last, as on a loaded CI box. On the code before the
    reader became the only thread to close sockets, 4 of 430 rounds here failed with the CI
    symptom (`frame announces 2065852772 bytes`); it must never fail now. Run:
    KAFKAVERIFY_COORD_STRESS_S=300 pytest -m slow tests/test_coord_stale_reader.py"""
    from impl import coord
    from tests.test_coord import PAUSED_CLIENT, Recorder

    cpu = min(os.sched_getaffinity(0))
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(STRESS_HOGS)]
    watcher = coord.connect(embedded_coord_url, session_timeout_ms=5000)
    failures, rounds = [], 0
    try:
        for h in hogs:
            os.sched_setaffinity(h.pid, {cpu})
        end = time.monotonic() + STRESS_S
        while time.monotonic() < end:  # bounded by STRESS_S (each round by its own waits)
            rounds += 1
            proc = subprocess.Popen([sys.executable, "-c", PAUSED_CLIENT, embedded_coord_url,
                                     "1000"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, env=subprocess_env())
            try:
                os.sched_setaffinity(proc.pid, {cpu})  # before it starts threads: they inherit
                assert proc.stdout.readline().strip() == "registered", proc.stderr.read()
                readers: list[int] = []
                _wait_until(lambda: readers.extend(
                    t for t in map(int, os.listdir(f"/proc/{proc.pid}/task"))
                    if _in_syscall(proc.pid, t, {RECVFROM})) or readers, "the reader to recv")
                reader = readers[0]  # the only thread of the client that receives
                os.sched_setscheduler(reader, os.SCHED_IDLE, os.sched_param(0))
                seen = Recorder()
                watcher.watch_data("/brokers/ids/7", seen)
                seen.wait_for(1)
                os.kill(proc.pid, signal.SIGSTOP)
                assert seen.wait_for(2)[1] == (None, None)  # the server expired the session
                os.kill(proc.pid, signal.SIGCONT)
                proc.stdin.write("go\n")
                proc.stdin.flush()
                out = [proc.stdout.readline().strip() for _ in range(3)]
                if out != ["expired-callback", "call-raised-SessionExpired", "re-registered"] \
                        or proc.wait(WAIT_S) != 0:
                    failures.append(f"round {rounds}: {out}\n{proc.stderr.read()[-1500:]}")
                    break
            finally:
                if proc.poll() is None:
                    os.kill(proc.pid, signal.SIGCONT)
                    proc.kill()
                proc.wait()
    finally:
        for h in hogs:
            h.kill()
            h.wait()
        watcher.close()
    assert not failures, f"{len(failures)} of {rounds} rounds failed:\n" + "\n".join(failures)
    print(f"stress: {rounds} rounds in {STRESS_S:.0f}s, none failed")
