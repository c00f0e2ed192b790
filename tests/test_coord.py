"""Contract tests of impl.coord, run against both backends (embedded server and real ZooKeeper)
through the parametrized `coord_url` fixture. What the controller relies on: CAS versions,
errors, children, ephemerals ending with their session, watches in order, the election pattern,
and /controller_epoch increments that never collide."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from impl import coord
from impl.coord import BadVersion, CoordError, NodeExists, NoNode, NotEmpty, SessionExpired
from tests.conftest import free_port, subprocess_env

pytestmark = pytest.mark.timeout(60)

SESSION_MS = 1000  # short sessions keep expiry tests quick; both backends accept it


class Recorder:
    """Collects callback arguments; wait_for() polls with a deadline (no sleeps in tests)."""

    def __init__(self):
        self.events: list = []
        self.threads: set[str] = set()
        self.cond = threading.Condition()

    def __call__(self, *args):
        with self.cond:
            self.events.append(args if len(args) > 1 else args[0])
            self.threads.add(threading.current_thread().name)
            self.cond.notify_all()

    def wait_for(self, n: int, timeout_s: float = 10.0) -> list:
        with self.cond:
            assert self.cond.wait_for(lambda: len(self.events) >= n, timeout_s), \
                f"expected {n} events within {timeout_s}s, got {self.events}"
            return list(self.events)


def test_create_get_and_compare_and_set(coord_url, coord_connect):
    c = coord_connect(coord_url)
    c.create("/brokers/topics/t/partitions/0/state", b'{"leader":1}')
    assert c.get("/brokers/topics/t/partitions/0/state") == (b'{"leader":1}', 0)
    assert c.set("/brokers/topics/t/partitions/0/state", b'{"leader":2}', version=0) == 1
    with pytest.raises(BadVersion):  # a second writer holding version 0 must lose
        c.set("/brokers/topics/t/partitions/0/state", b'{"leader":3}', version=0)
    assert c.get("/brokers/topics/t/partitions/0/state") == (b'{"leader":2}', 1)
    assert c.set("/brokers/topics/t/partitions/0/state", b"", version=-1) == 2
    assert c.exists("/brokers/topics/t/partitions/0/state") == 2
    # makepath made the parents: persistent, empty, version 0
    assert c.get("/brokers/topics/t") == (b"", 0)


def test_errors(coord_url, coord_connect):
    c = coord_connect(coord_url)
    c.create("/a", b"1")
    with pytest.raises(NodeExists):
        c.create("/a", b"2")
    assert c.get("/a") == (b"1", 0)
    for call in (lambda: c.get("/nope"), lambda: c.set("/nope", b"x"), lambda: c.delete("/nope"),
                 lambda: c.get_children("/nope"), lambda: c.create("/x/y", makepath=False)):
        with pytest.raises(NoNode):
            call()
    assert c.exists("/nope") is None
    assert c.exists("/x") is None  # the failed makepath=False create left nothing behind
    for bad in ("a", "/a/", "//a", "/a//b", "/a/./b", "/a/../b", "", "/a\nb", "/zookeeper/x"):
        with pytest.raises(ValueError):
            c.get(bad)
    c.create("/e", ephemeral=True)
    with pytest.raises(CoordError):  # ZooKeeper's rule: ephemerals have no children
        c.create("/e/child")


def test_children_and_delete_with_version(coord_url, coord_connect):
    c = coord_connect(coord_url)
    for b in ("3", "1", "10", "2"):
        c.create(f"/brokers/ids/{b}", b"")
    assert c.get_children("/brokers/ids") == ["1", "10", "2", "3"]
    assert c.get_children("/") == ["brokers"]
    c.set("/brokers/ids/1", b"x")
    with pytest.raises(BadVersion):
        c.delete("/brokers/ids/1", version=0)
    with pytest.raises(NotEmpty):
        c.delete("/brokers/ids")
    c.delete("/brokers/ids/1", version=1)
    c.delete("/brokers/ids/2")
    assert c.get_children("/brokers/ids") == ["10", "3"]
    with pytest.raises(NoNode):
        c.get("/brokers/ids/1")


def test_increment_is_atomic_under_concurrency(coord_url, coord_connect):
    clients = [coord_connect(coord_url) for _ in range(2)]
    results: list[int] = []
    errors: list[BaseException] = []

    def worker(c):
        try:
            for _ in range(8):
                results.append(c.increment("/controller_epoch"))
        except BaseException as e:  # surfaced below, not lost in the thread
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(clients[i % 2],)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors
    assert sorted(results) == list(range(1, 33))  # distinct and consecutive: no lost update
    assert clients[0].get("/controller_epoch")[0] == b"32"


def test_data_watch_reports_each_change_in_order(coord_url, coord_connect):
    c, other = coord_connect(coord_url), coord_connect(coord_url)
    rec = Recorder()
    c.watch_data("/controller", rec)
    assert rec.wait_for(1) == [(None, None)]
    other.create("/controller", b"a")
    rec.wait_for(2)
    other.set("/controller", b"b")
    rec.wait_for(3)
    other.delete("/controller")
    rec.wait_for(4)
    other.create("/controller", b"c")
    assert rec.wait_for(5) == [(None, None), (b"a", 0), (b"b", 1), (None, None), (b"c", 0)]
    assert not any(name == "MainThread" for name in rec.threads)


def test_children_watch_on_absent_path(coord_url, coord_connect):
    c, other = coord_connect(coord_url), coord_connect(coord_url)
    rec = Recorder()
    c.watch_children("/brokers/ids", rec)
    assert rec.wait_for(1) == [[]]
    other.create("/brokers/ids/1", ephemeral=True)
    rec.wait_for(2)
    other.create("/brokers/ids/2", ephemeral=True)
    rec.wait_for(3)
    other.delete("/brokers/ids/1")
    assert rec.wait_for(4) == [[], ["1"], ["1", "2"], ["2"]]
    other.close()  # the session's last ephemeral goes with it
    assert rec.wait_for(5)[-1] == []


def test_callback_may_call_the_client(coord_url, coord_connect):
    c = coord_connect(coord_url)
    seen = Recorder()
    # A callback doing a synchronous read must not deadlock the client's I/O.
    c.watch_data("/n", lambda data, version: seen(version, c.exists("/n")))
    c.create("/n", b"x")
    events = seen.wait_for(2)
    assert events[0][0] is None and events[1] == (0, 0)


def test_ephemeral_vanishes_at_once_on_close(coord_url, coord_connect):
    owner = coord.connect(coord_url, session_timeout_ms=10_000)
    watcher = coord_connect(coord_url)
    expired = Recorder()
    owner.on_session_expired(lambda: expired("expired"))
    owner.create("/brokers/ids/1", b"host:9092", ephemeral=True)
    rec = Recorder()
    watcher.watch_data("/brokers/ids/1", rec)
    rec.wait_for(1)
    t0 = time.monotonic()
    owner.close()
    assert rec.wait_for(2, timeout_s=5)[-1] == (None, None)
    assert time.monotonic() - t0 < 5  # long before the 10 s session timeout
    assert watcher.exists("/brokers/ids/1") is None
    with pytest.raises(CoordError):
        owner.get("/brokers/ids/1")
    assert expired.events == []  # close() is not an expiry


def test_controller_election(coord_url, coord_connect):
    """Kafka's pattern: every broker tries to create the ephemeral /controller; exactly one wins
    and bumps /controller_epoch; the losers watch /controller and run again when it vanishes."""
    brokers = {i: coord_connect(coord_url) for i in (1, 2, 3)}
    barrier = threading.Barrier(3)
    winners: list[int] = []

    def elect(i):
        barrier.wait(5)
        try:
            brokers[i].create("/controller", str(i).encode(), ephemeral=True)
            winners.append(i)
        except NodeExists:
            pass

    threads = [threading.Thread(target=elect, args=(i,)) for i in brokers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(winners) == 1
    first = winners[0]
    assert brokers[first].increment("/controller_epoch") == 1
    losers = sorted(set(brokers) - {first})
    recs = {i: Recorder() for i in losers}
    for i in losers:
        brokers[i].watch_data("/controller", recs[i])
        assert recs[i].wait_for(1)[0] == (str(first).encode(), 0)
    brokers[first].close()
    for i in losers:
        assert recs[i].wait_for(2)[1] == (None, None)
    second = []
    for i in losers:  # in turn, as their watches fire: only the first create wins
        try:
            brokers[i].create("/controller", str(i).encode(), ephemeral=True)
            second.append(i)
        except NodeExists:
            pass
    assert second == [losers[0]]
    assert brokers[losers[0]].increment("/controller_epoch") == 2


# A separate process holds a session and an ephemeral; the test SIGSTOPs it like a GC pause or a
# hung broker. Its session must expire server-side (ephemeral gone, watchers told), and after
# SIGCONT the process must learn it: callback, SessionExpired, then a fresh session works.
PAUSED_CLIENT = r"""
import sys, threading
from impl import coord
url, timeout_ms = sys.argv[1], int(sys.argv[2])
c = coord.connect(url, session_timeout_ms=timeout_ms)
expired = threading.Event()
c.on_session_expired(expired.set)
c.create("/brokers/ids/7", b"paused", ephemeral=True)
print("registered", flush=True)
sys.stdin.readline()  # the test SIGSTOPs us here, then SIGCONTs us and writes a line
print("expired-callback" if expired.wait(timeout_ms * 3 / 1000) else "no-callback", flush=True)
try:
    c.get("/brokers/ids")
    print("call-succeeded", flush=True)
except coord.SessionExpired:
    print("call-raised-SessionExpired", flush=True)
c.close()  # closing an expired client is harmless
c2 = coord.connect(url, session_timeout_ms=timeout_ms)
c2.create("/brokers/ids/7", b"back", ephemeral=True)
print("re-registered", flush=True)
c2.close()
"""


def test_paused_process_loses_session_and_ephemerals(coord_url, coord_connect):
    watcher = coord_connect(coord_url, session_timeout_ms=5000)
    proc = subprocess.Popen([sys.executable, "-c", PAUSED_CLIENT, coord_url, str(SESSION_MS)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            env=subprocess_env())
    try:
        assert proc.stdout.readline().strip() == "registered"
        rec = Recorder()
        watcher.watch_data("/brokers/ids/7", rec)
        assert rec.wait_for(1)[0] == (b"paused", 0)
        os.kill(proc.pid, signal.SIGSTOP)
        t0 = time.monotonic()
        assert rec.wait_for(2, timeout_s=10)[1] == (None, None)
        waited = time.monotonic() - t0
        # The last heartbeat may precede the SIGSTOP by a third of the timeout, so expiry comes
        # 2/3 of a timeout after it at the earliest; and not much after a whole timeout.
        assert 0.5 * SESSION_MS / 1000 <= waited <= SESSION_MS / 1000 + 4, waited
        os.kill(proc.pid, signal.SIGCONT)
        proc.stdin.write("go\n")
        proc.stdin.flush()
        out = [proc.stdout.readline().strip() for _ in range(3)]
        assert out == ["expired-callback", "call-raised-SessionExpired", "re-registered"]
        assert proc.wait(20) == 0
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("scheme", ["embedded", "zk"])
def test_connect_to_nothing_fails_within_the_bound(scheme):
    port = free_port()  # nothing listens there
    t0 = time.monotonic()
    with pytest.raises(CoordError, match="cannot reach"):
        coord.connect(f"{scheme}://127.0.0.1:{port}", session_timeout_ms=1000, connect_timeout_s=1.0)
    assert time.monotonic() - t0 < 5


def test_bad_urls():
    for url in ("http://127.0.0.1:1", "embedded://127.0.0.1", "zk://:5", "embedded://127.0.0.1:5/x"):
        with pytest.raises(ValueError):
            coord.connect(url)


def test_tree_command_prints_the_tree(coord_url, coord_connect):
    c = coord_connect(coord_url)
    c.create("/brokers/ids/2", b'{"port":9093}', ephemeral=True)
    c.create("/controller_epoch", b"\xff")
    r = subprocess.run([sys.executable, "-m", "impl.coord", "tree", coord_url], env=subprocess_env(),
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["/  v0  ", "/brokers  v0  ", "/brokers/ids  v0  ",
                                     '/brokers/ids/2  v0  {"port":9093}', "/controller_epoch  v0  0xff"]


def test_a_stuck_callback_ends_the_session_instead_of_dropping_events(coord_url, coord_connect,
                                                                      monkeypatch):
    from impl.coord import base
    monkeypatch.setattr(base, "MAX_PENDING_CALLBACKS", 5)
    c, writer = coord_connect(coord_url), coord_connect(coord_url)
    release = threading.Event()
    seen = Recorder()
    c.watch_data("/isr", lambda d, v: (release.wait(10), seen(v)))
    expired = Recorder()
    c.on_session_expired(lambda: expired("expired"))
    writer.create("/isr", b"0")
    deadline = time.monotonic() + 10
    for i in range(200):  # each set makes one more pending callback (ZooKeeper may fold some)
        writer.set("/isr", str(i).encode())
        try:
            c.exists("/")  # a round trip on c, giving the event time to be queued
        except SessionExpired:
            break
        assert time.monotonic() < deadline
    with pytest.raises(SessionExpired):
        c.exists("/")
    release.set()
    expired.wait_for(1)  # the expiry notice comes after the callbacks already queued
    # the callbacks queued before the overflow all ran, in order (ZooKeeper may fold some)
    versions = seen.events[1:]
    assert seen.events[0] is None and versions and versions == sorted(set(versions))
