"""impl/netclient.py against a fake broker on a real loopback socket: what a blocking connection
does after a call that failed in the middle of a frame."""
from __future__ import annotations

import socket
import struct
import threading

import pytest

from impl.netclient import SyncConn
from impl.protocol import codec


def _read_request(s: socket.socket) -> int:
    """Reads one framed request; returns its correlation id."""
    def exact(n):
        buf = b""
        while len(buf) < n:
            chunk = s.recv(n - len(buf))
            assert chunk, "client went away"
            buf += chunk
        return buf
    (size,) = struct.unpack(">i", exact(4))
    return struct.unpack_from(">hhi", exact(size), 0)[2]


def test_a_timeout_in_the_middle_of_a_frame_retires_the_connection():
    """The peer answers the first request with half a frame, then (once the client's read has
    timed out) the rest. Reading on would take that tail as the next frame, or the old answer as
    the next request's: the connection must refuse every later call instead."""
    listener = socket.create_server(("127.0.0.1", 0))
    timed_out, peer_done = threading.Event(), threading.Event()
    seen: list[int] = []

    def peer():
        s, _ = listener.accept()
        with s:
            corr = _read_request(s)
            seen.append(corr)
            answer = codec.encode_control_response(corr, {"ok": "first"})
            s.sendall(answer[:6])                 # length prefix and half the correlation id
            assert timed_out.wait(10)
            s.sendall(answer[6:])                 # the abandoned frame's tail arrives late
            s.settimeout(10)
            try:                                  # a second request must never be sent on it
                seen.append(_read_request(s))
            except (OSError, AssertionError):
                pass
        peer_done.set()

    t = threading.Thread(target=peer, daemon=True)
    t.start()
    conn = SyncConn(*listener.getsockname(), timeout_s=0.3)
    try:
        with pytest.raises(TimeoutError):
            conn.control({"op": "describe"})
        timed_out.set()
        with pytest.raises(ConnectionError, match="earlier failure"):
            conn.control({"op": "describe"})
        assert conn.sock.fileno() == -1           # closed by the thread that used it
        assert peer_done.wait(10)
        assert seen == [1]
    finally:
        conn.close()
        listener.close()
        t.join(10)


def test_a_response_to_another_request_retires_the_connection():
    """A peer that answers with a foreign correlation id (a stale answer) is not believed."""
    listener = socket.create_server(("127.0.0.1", 0))

    def peer():
        s, _ = listener.accept()
        with s:
            corr = _read_request(s)
            s.sendall(codec.encode_control_response(corr + 41, {"ok": "stale"}))
            s.settimeout(10)
            try:
                s.recv(1)                         # until the client closes
            except OSError:
                pass

    t = threading.Thread(target=peer, daemon=True)
    t.start()
    conn = SyncConn(*listener.getsockname(), timeout_s=5)
    try:
        with pytest.raises(ConnectionError, match="correlation id 42, expected 1"):
            conn.control({"op": "describe"})
        with pytest.raises(ConnectionError, match="earlier failure"):
            conn.control({"op": "describe"})
    finally:
        conn.close()
        listener.close()
        t.join(10)


def test_async_close_by_its_owner_is_final_even_for_a_request_in_flight():
    """The owner (a stopping controller, a superseded fetcher) closes the connection while one
    of its requests waits for an answer. That request fails, and no request after it, nor one
    cancelled but resumed, opens a new connection to send on the owner's behalf."""
    import asyncio

    from impl.netclient import AsyncConn

    listener = socket.create_server(("127.0.0.1", 0))
    listener.setblocking(False)

    async def scenario():
        loop = asyncio.get_running_loop()
        conn = AsyncConn(*listener.getsockname(), "test", timeout_s=10)
        inflight = asyncio.create_task(conn.control({"op": "describe"}))
        peer, _ = await loop.sock_accept(listener)   # the request's connection; never answered
        with peer:
            peer.setblocking(True)                    # read on an executor thread
            corr = await loop.run_in_executor(None, _read_request, peer)
            assert corr == 1 and not inflight.done()
            conn.close()
            with pytest.raises((ConnectionError, asyncio.IncompleteReadError)):
                await asyncio.wait_for(inflight, 10)
            with pytest.raises(ConnectionError, match="closed by its owner"):
                await conn.control({"op": "describe"})
        with pytest.raises(BlockingIOError):
            listener.accept()                         # nobody connected again

    try:
        asyncio.run(scenario())
    finally:
        listener.close()
