"""The embedded coordination server process: `python -m impl.coord.server --port P --data-dir D`.

Owns only I/O: accepting connections, reading and writing frames, the clock, the journal. Every
decision is `state.decide`; this shell feeds it events from one queue, in arrival order, and
performs the effects in batches: all Persist records of a batch are appended and fsynced before
any reply or watch notification of that batch leaves (group commit).

Bounds, and what happens when hit:
  - a frame above protocol.MAX_FRAME_BYTES, bytes that are not our JSON, or no complete hello
    within --hello-timeout-ms: that connection is closed; the server and other sessions carry on;
  - more than MAX_CONNECTIONS open connections: a new one is closed at once;
  - the event queue holds MAX_QUEUED_EVENTS: connection readers wait (TCP back-pressure);
  - a connection's unsent output above MAX_OUTBUF_BYTES (a client not reading, e.g. SIGSTOPped
    while watches fire): its session is evicted, exactly like a timeout;
  - a batch takes at most MAX_BATCH events, so ticks and fsyncs interleave fairly.
Prints `coord ready: 127.0.0.1:P` (flushed) once listening. SIGTERM/SIGINT: stop accepting,
close connections, close the journal once no append is in flight on the executor, exit 0.
"""
from __future__ import annotations

import argparse
import asyncio
import itertools
import logging
import os
import signal
import sys
import time

from . import state as sm
from .journal import Journal
from .protocol import HEADER, FrameError, decode_body, encode_frame, frame_length

log = logging.getLogger("coord.server")

HELLO_TIMEOUT_MS = 5000  # default of --hello-timeout-ms
MAX_CONNECTIONS = 1024
MAX_QUEUED_EVENTS = 4096
MAX_OUTBUF_BYTES = 8 * 1024 * 1024
JOURNAL_CLOSE_WAIT_S = 10.0  # at shutdown, how long an fsync in flight may hold up the close
MAX_BATCH = 256


class Server:
    def __init__(self, data_dir: str, tick_ms: int, hello_timeout_ms: int = HELLO_TIMEOUT_MS,
                 compact_after: int | None = None):
        self.tick_ms = tick_ms
        self.hello_timeout_s = hello_timeout_ms / 1000
        self.journal = Journal(data_dir, compact_after)
        self.state = sm.State(min_timeout_ms=2 * tick_ms, secret=os.urandom(16))
        for rec in self.journal.recover():
            sm.apply_record(self.state, rec)
        self.queue: asyncio.Queue = asyncio.Queue(MAX_QUEUED_EVENTS)
        self.writers: dict[int, asyncio.StreamWriter] = {}
        self.conn_ids = itertools.count(1)
        self.t0 = time.monotonic()
        self.handlers: set[asyncio.Task] = set()
        self.stopping = False
        self._appending: asyncio.Future | None = None  # the journal append on the executor

    def now_ms(self) -> int:
        return int((time.monotonic() - self.t0) * 1000)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if len(self.writers) >= MAX_CONNECTIONS:
            writer.close()
            return
        conn = next(self.conn_ids)
        self.writers[conn] = writer
        self.handlers.add(asyncio.current_task())
        try:
            first = True
            while True:  # ends at EOF, on garbage, or when the decide loop closes the writer
                timeout = self.hello_timeout_s if first else None
                header = await asyncio.wait_for(reader.readexactly(HEADER.size), timeout)
                body = await asyncio.wait_for(reader.readexactly(frame_length(header)), timeout)
                await self.queue.put(sm.Request(conn, decode_body(body)))
                first = False
        except (FrameError, asyncio.IncompleteReadError, asyncio.TimeoutError, ConnectionError) as e:
            if isinstance(e, FrameError):
                log.warning("coord: conn %d sent garbage (%s); closing it", conn, e)
        finally:
            if self.writers.pop(conn, None) is not None:
                writer.close()
            self.handlers.discard(asyncio.current_task())
            if not self.stopping:
                await self.queue.put(sm.Disconnected(conn))

    async def ticker(self) -> None:
        while True:
            await asyncio.sleep(self.tick_ms / 1000)
            if self.queue.qsize() < MAX_QUEUED_EVENTS // 2:  # a busy queue delays expiry a tick
                self.queue.put_nowait(sm.Tick())

    async def decide_loop(self) -> None:
        while True:
            batch = [await self.queue.get()]
            while len(batch) < MAX_BATCH and not self.queue.empty():
                batch.append(self.queue.get_nowait())
            effects: list[object] = []
            for event in batch:
                effects += sm.decide(self.state, self.now_ms(), event)
            records = [e.record for e in effects if isinstance(e, sm.Persist)]
            if records:
                # Persist before send; the fsync runs off-loop so readers keep filling the queue.
                # Shielded: cancelling this loop (shutdown) does not stop the executor thread in
                # os.write/os.fsync on the journal's descriptor, so it must stay visible to
                # close_journal, which waits for it.
                self._appending = asyncio.get_running_loop().run_in_executor(
                    None, self.journal.append, records)
                await asyncio.shield(self._appending)
                if self.journal.needs_compaction():
                    self.journal.compact(sm.persistent_records(self.state))
            for e in effects:
                if isinstance(e, sm.Send):
                    self.send(e.conn, e.msg)
                elif isinstance(e, sm.Close):
                    w = self.writers.pop(e.conn, None)
                    if w is not None:
                        w.close()

    async def close_journal(self) -> None:
        """Close the journal, but never under an append still running on the executor (the
        decide loop was cancelled while awaiting it): that thread is in, or about to enter,
        os.write/os.fsync with the journal's bare descriptor number, and a number closed under
        it may already belong to another file, which would then get the records. If the append
        does not finish within JOURNAL_CLOSE_WAIT_S, the journal is left open for the process
        exit to close (its records may or may not be durable; no reply for them went out)."""
        fut = self._appending
        if fut is not None and not fut.done():
            await asyncio.wait([fut], timeout=JOURNAL_CLOSE_WAIT_S)
            if not fut.done():
                log.error("coord: a journal append is still running after %.0fs; not closing "
                          "the journal under it", JOURNAL_CLOSE_WAIT_S)
                return
        if fut is not None and not fut.cancelled():
            fut.exception()  # retrieved: a failed last append is not news at shutdown
        self.journal.close()

    def send(self, conn: int, msg: dict) -> None:
        w = self.writers.get(conn)
        if w is None or w.is_closing():
            return  # the connection is gone; its session learns nothing more
        w.write(encode_frame(msg))
        if w.transport.get_write_buffer_size() > MAX_OUTBUF_BYTES:
            log.warning("coord: conn %d is not reading; evicting its session", conn)
            try:
                self.queue.put_nowait(sm.Evict(conn, "client not reading: output buffer full"))
            except asyncio.QueueFull:  # drop the connection now; its session times out later
                self.writers.pop(conn, None)
                w.close()

    async def run(self, port: int, host: str = "127.0.0.1") -> None:
        srv = await asyncio.start_server(self.handle, host, port, limit=2 ** 16)
        real_port = srv.sockets[0].getsockname()[1]
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        tasks = [asyncio.create_task(self.decide_loop()), asyncio.create_task(self.ticker())]
        print(f"coord ready: {host}:{real_port}", flush=True)
        stopper = asyncio.create_task(stop.wait())
        await asyncio.wait([stopper, *tasks], return_when=asyncio.FIRST_COMPLETED)
        self.stopping = True
        srv.close()
        for t in [stopper, *tasks]:
            t.cancel()
        for w in list(self.writers.values()):
            w.close()
        if self.handlers:  # let connection readers see EOF and finish, rather than cancel them
            await asyncio.wait(list(self.handlers), timeout=2.0)
        await self.close_journal()
        for t in tasks:  # a shell task that ended by itself is a bug: exit non-zero, loudly
            if t.done() and not t.cancelled() and t.exception() is not None:
                raise t.exception()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m impl.coord.server", description=__doc__.split("\n")[0])
    p.add_argument("--port", type=int, required=True, help="TCP port on 127.0.0.1; 0 picks a free one")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (a per-node address in a private network namespace)")
    p.add_argument("--data-dir", required=True, help="where the snapshot and log live")
    p.add_argument("--tick-ms", type=int, default=100, help="session-expiry check period")
    p.add_argument("--hello-timeout-ms", type=int, default=HELLO_TIMEOUT_MS,
                   help="close a new connection that has not sent its hello by then")
    p.add_argument("--compact-after", type=int, default=None,
                   help="log records before a snapshot (default 10000; small values for tests)")
    args = p.parse_args(argv)
    if args.tick_ms <= 0 or args.hello_timeout_ms <= 0 or (args.compact_after or 1) <= 0:
        p.error("--tick-ms, --hello-timeout-ms and --compact-after must be positive")
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(name)s: %(message)s")
    server = Server(args.data_dir, args.tick_ms, args.hello_timeout_ms, args.compact_after)
    asyncio.run(server.run(args.port, args.host))
    return 0


if __name__ == "__main__":
    sys.exit(main())
