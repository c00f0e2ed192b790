"""Tests of the ZooKeeper backend only: kazoo's connection states mapped onto our session
lifecycle. A small TCP proxy between client and ZooKeeper cuts the connection: a blip shorter
than the session timeout must be invisible; a cut of a whole timeout must end the session for
the client (it fences itself although it cannot hear the server)."""
from __future__ import annotations

import socket
import threading
import time

import pytest

from impl import coord
from impl.coord import SessionExpired
from tests.test_coord import Recorder

pytestmark = [pytest.mark.timeout(60), pytest.mark.zookeeper]


class CuttableProxy:
    """Forwards 127.0.0.1:port to upstream; cut() drops every connection and refuses new ones
    until heal(). Threads: one acceptor, two pumps per connection (bounded by the test)."""

    def __init__(self, upstream_port: int):
        self.upstream = ("127.0.0.1", upstream_port)
        self.lsock = socket.create_server(("127.0.0.1", 0))
        self.port = self.lsock.getsockname()[1]
        self.cut_flag = threading.Event()
        self.conns: list[socket.socket] = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                c, _ = self.lsock.accept()
            except OSError:
                return  # closed
            if self.cut_flag.is_set():
                c.close()
                continue
            u = socket.create_connection(self.upstream)
            with self.lock:
                self.conns += [c, u]
            for a, b in ((c, u), (u, c)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src, dst):
        try:
            while chunk := src.recv(65536):
                dst.sendall(chunk)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self):
        self.cut_flag.set()
        with self.lock:
            for s in self.conns:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            self.conns.clear()

    def heal(self):
        self.cut_flag.clear()

    def close(self):
        self.cut()
        self.lsock.close()


@pytest.fixture
def proxied_zk_url(zookeeper_server, zookeeper_url):
    proxy = CuttableProxy(zookeeper_server.port)
    chroot = zookeeper_url.split(str(zookeeper_server.port), 1)[1]
    yield f"zk://127.0.0.1:{proxy.port}{chroot}", proxy
    proxy.close()


def test_a_short_blip_keeps_the_session(proxied_zk_url, coord_connect):
    url, proxy = proxied_zk_url
    c = coord_connect(url, session_timeout_ms=2000)
    expired = Recorder()
    c.on_session_expired(lambda: expired("expired"))
    c.create("/brokers/ids/1", ephemeral=True)
    proxy.cut()
    time.sleep(0.3)  # well inside the 2 s session
    proxy.heal()
    deadline = time.monotonic() + 10
    while True:  # kazoo reconnects to the same session; calls work again
        try:
            assert c.exists("/brokers/ids/1") == 0
            break
        except coord.ConnectionLoss:
            assert time.monotonic() < deadline
            time.sleep(0.1)
    time.sleep(2.5)  # past the suspend timer: it must have been cancelled
    assert expired.events == []
    assert c.exists("/brokers/ids/1") == 0


def test_a_cut_of_a_whole_timeout_ends_the_session_client_side(proxied_zk_url, coord_connect):
    url, proxy = proxied_zk_url
    c = coord_connect(url, session_timeout_ms=1000)
    expired = Recorder()
    c.on_session_expired(lambda: expired("expired"))
    proxy.cut()  # and never healed: the client cannot learn of expiry from the server
    t0 = time.monotonic()
    expired.wait_for(1, timeout_s=10)
    assert time.monotonic() - t0 < 3
    with pytest.raises(SessionExpired):
        c.get("/")
