"""Connection vs session, on both backends: a small TCP proxy between client and server cuts the
connection. A blip shorter than the session timeout must keep the session (ephemerals stay; a
change made meanwhile reaches the watch after the resume); a cut of a whole timeout must end the
session for the client, which fences itself although it cannot hear the server."""
from __future__ import annotations

import socket
import threading
import time
import urllib.parse

import pytest

from impl.coord import SessionExpired
from tests.test_coord import Recorder

pytestmark = pytest.mark.timeout(60)


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
            try:
                u = socket.create_connection(self.upstream)
            except OSError:  # upstream gone (teardown)
                c.close()
                continue
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
def proxied_url(coord_url):
    """coord_url, but through a CuttableProxy: (url, proxy)."""
    u = urllib.parse.urlsplit(coord_url)
    proxy = CuttableProxy(u.port)
    yield f"{u.scheme}://127.0.0.1:{proxy.port}{u.path}", proxy
    proxy.close()


def test_a_short_blip_keeps_the_session(proxied_url, coord_url, coord_connect):
    url, proxy = proxied_url
    c = coord_connect(url, session_timeout_ms=2000)
    other = coord_connect(coord_url)  # direct, never cut
    expired = Recorder()
    c.on_session_expired(lambda: expired("expired"))
    c.create("/brokers/ids/1", ephemeral=True)
    seen, ids = Recorder(), Recorder()
    c.watch_data("/controller", seen)
    c.watch_children("/brokers/ids", ids)
    seen.wait_for(1)
    ids.wait_for(1)
    proxy.cut()
    other.create("/controller", b"2")  # while c cannot hear it...
    other.set("/controller", b"3")
    blocked = Recorder()  # a call made while disconnected waits for the reconnect
    threading.Thread(target=lambda: blocked(c.get("/brokers/ids/1")), daemon=True).start()
    time.sleep(0.3)  # well inside the 2 s session
    assert blocked.events == []
    proxy.heal()
    assert blocked.wait_for(1) == [(b"", 0)]
    # ...but learns the latest state once reconnected (intermediate states may be folded)
    assert seen.wait_for(2)[-1] == (b"3", 1)
    time.sleep(2.5)  # past the session timeout: any suspend timer must have been cancelled
    assert expired.events == []
    assert ids.events == [["1"]]  # an unchanged watch is not called again after the resume
    assert c.exists("/brokers/ids/1") == 0
    assert other.exists("/brokers/ids/1") == 0  # the ephemeral survived the blip


def test_a_cut_of_a_whole_timeout_ends_the_session_client_side(proxied_url, coord_connect):
    url, proxy = proxied_url
    c = coord_connect(url, session_timeout_ms=1000)
    expired = Recorder()
    c.on_session_expired(lambda: expired("expired"))
    proxy.cut()  # and never healed: the client cannot learn of expiry from the server
    t0 = time.monotonic()
    expired.wait_for(1, timeout_s=10)
    assert time.monotonic() - t0 < 3
    with pytest.raises(SessionExpired):
        c.get("/")
