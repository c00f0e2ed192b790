"""Small Kafka-protocol clients the broker side needs: an asyncio connection (replica fetchers,
controller) and a blocking one (cluster API, tests). One request in flight per connection."""
from __future__ import annotations

import asyncio
import socket
import struct

from impl import netaddr
from impl.protocol import codec


def _encode_request(api_key: int, version: int, corr: int, data: dict, client_id: str) -> bytes:
    cls = codec.spec_for(api_key)[0][version]
    req = codec.build(cls, data, version)
    req.with_header(correlation_id=corr, client_id=client_id)
    return req.encode(header=True, framed=True)


def _decode_response(api_key: int, version: int, frame: bytes):
    return codec.spec_for(api_key)[1][version].decode(frame, header=True)


class AsyncConn:
    """One connection, one request in flight (an asyncio.Lock orders them); a request that
    fails drops the connection (a timeout may have left half a frame unread) and the next one
    reconnects. close() is final: the owner (the fetcher, the controller) is done with it, so a
    request still in flight, or one that was cancelled but resumes anyway (Python 3.11's
    asyncio.wait_for can drop a cancellation), fails instead of opening a new connection and
    sending on behalf of an owner that has stopped (e.g. a resigned controller)."""

    def __init__(self, host: str, port: int, client_id: str, timeout_s: float = 10.0):
        self.host, self.port, self.client_id, self.timeout_s = host, port, client_id, timeout_s
        self._r: asyncio.StreamReader | None = None
        self._w: asyncio.StreamWriter | None = None
        self._corr = 0
        self._lock = asyncio.Lock()
        self._closed = False

    async def _ensure(self) -> None:
        if self._closed:
            raise ConnectionError("connection closed by its owner")
        if self._w is None:
            r, w = await asyncio.wait_for(
                asyncio.open_connection(self.host, self.port, local_addr=netaddr.source_address()),
                self.timeout_s)
            if self._closed:            # closed while connecting: never send on it
                w.close()
                raise ConnectionError("connection closed by its owner")
            self._r, self._w = r, w

    async def _roundtrip(self, payload: bytes) -> bytes:
        await self._ensure()
        assert self._r and self._w
        self._w.write(payload)
        await self._w.drain()
        size = struct.unpack(">i", await asyncio.wait_for(self._r.readexactly(4), self.timeout_s))[0]
        return await asyncio.wait_for(self._r.readexactly(size), self.timeout_s)

    async def request(self, api_key: int, version: int, data: dict):
        async with self._lock:
            self._corr += 1
            try:
                frame = await self._roundtrip(_encode_request(api_key, version, self._corr, data, self.client_id))
            except BaseException:
                self._drop()
                raise
            return _decode_response(api_key, version, frame)

    async def control(self, body: dict) -> dict:
        async with self._lock:
            self._corr += 1
            try:
                frame = await self._roundtrip(codec.encode_control_request(self._corr, body, self.client_id))
            except BaseException:
                self._drop()
                raise
            return codec.decode_control_response(frame)[1]

    def _drop(self) -> None:
        if self._w is not None:
            try:
                self._w.close()
            except Exception:
                pass
        self._r = self._w = None

    def close(self) -> None:
        self._closed = True
        self._drop()


class SyncConn:
    """A blocking connection for one thread at a time (the cluster API, tests): one request,
    then its response. A call that fails part-way (a timeout in the middle of a frame, a reset,
    a response to another request) leaves the byte stream at an unknown place: a later frame
    read there would be the tail of the abandoned one, or its whole answer taken for the next
    request's. So the connection is closed at once, by the thread that was using it, and every
    later call raises ConnectionError; the caller opens a new one."""

    def __init__(self, host: str, port: int, client_id: str = "kafkaverify", timeout_s: float = 15.0):
        self.sock = socket.create_connection((host, port), timeout=timeout_s,
                                             source_address=netaddr.source_address())
        self._corr = 0
        self.client_id = client_id
        self._broken: str | None = None

    def _guarded(self, what: str, fn, *args):
        if self._broken is not None:
            raise ConnectionError(f"connection unusable after an earlier failure ({self._broken})")
        try:
            return fn(*args)
        except BaseException as e:
            self._broken = f"{what}: {e!r}"
            self.sock.close()
            raise

    def _read_frame(self) -> bytes:
        def exact(n: int) -> bytes:
            buf = b""
            while len(buf) < n:
                chunk = self.sock.recv(n - len(buf))
                if not chunk:
                    raise ConnectionError("connection closed by broker")
                buf += chunk
            return buf
        (size,) = struct.unpack(">i", exact(4))
        return exact(size)

    def _exchange(self, payload: bytes) -> bytes:
        self.sock.sendall(payload)
        frame = self._read_frame()
        (corr,) = struct.unpack_from(">i", frame, 0)
        if corr != self._corr:
            raise ConnectionError(f"response to correlation id {corr}, expected {self._corr}")
        return frame

    def request(self, api_key: int, version: int, data: dict):
        self._corr += 1
        frame = self._guarded("request", self._exchange,
                              _encode_request(api_key, version, self._corr, data, self.client_id))
        return _decode_response(api_key, version, frame)

    def control(self, body: dict) -> dict:
        self._corr += 1
        frame = self._guarded("control", self._exchange,
                              codec.encode_control_request(self._corr, body, self.client_id))
        return codec.decode_control_response(frame)[1]

    def send_raw(self, data: bytes) -> None:
        self._guarded("send", self.sock.sendall, data)

    def read_frame(self) -> bytes:
        return self._guarded("read", self._read_frame)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> "SyncConn":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
