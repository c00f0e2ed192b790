"""Tests of the embedded coordination backend only: the pure state machine, the journal's crash
recovery, and the server process (durability across restarts and kill -9, garbage on the port,
slow readers, every watch event delivered, a client fencing itself when the server goes quiet)."""
from __future__ import annotations

import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from impl import coord
from impl.coord import CoordError, NoNode, SessionExpired
from impl.coord import journal as journal_mod
from impl.coord import state as sm
from impl.coord.protocol import b2s, encode_frame
from tests.conftest import subprocess_env
from tests.test_coord import Recorder

pytestmark = pytest.mark.timeout(60)


# ---- the pure core ----------------------------------------------------------------------------

def _hello(state, conn, now, timeout_ms=1000):
    out = sm.decide(state, now, sm.Request(conn, {"id": 0, "op": "hello", "timeout_ms": timeout_ms}))
    return out[0].msg["ok"]["session_id"]


def _req(state, conn, now, rid, op, **kw):
    return sm.decide(state, now, sm.Request(conn, {"id": rid, "op": op, **kw}))


def _ticks(state, start_ms, end_ms, step_ms=50):
    """Tick like the server does (every 50 ms here); return all effects."""
    out = []
    for now in range(start_ms, end_ms + 1, step_ms):
        out += sm.decide(state, now, sm.Tick())
    return out


def test_state_does_not_blame_clients_for_a_server_stall():
    st = sm.State(min_timeout_ms=100)
    _hello(st, conn=1, now=0)
    assert _ticks(st, 0, 500) == []
    # the server was stopped from 500 to 5000 ms: the client's pings sat unread in its socket
    assert sm.decide(st, 5000, sm.Tick()) == []
    _req(st, 1, 5001, 1, "ping")  # ...and are read right after
    assert _ticks(st, 5050, 5950) == []
    assert [type(e) for e in sm.decide(st, 6001, sm.Tick())] == [sm.Send, sm.Close]  # no more pings


def test_state_expires_only_after_the_deadline_and_fires_watches():
    st = sm.State(min_timeout_ms=100)
    a = _hello(st, conn=1, now=0)
    _hello(st, conn=2, now=0, timeout_ms=5000)
    _req(st, 1, 0, 1, "create", path="/controller", data=b2s(b"1"), ephemeral=True)
    _req(st, 2, 0, 1, "watch_data", path="/controller")
    assert _ticks(st, 0, 900) == []
    _req(st, 1, 900, 2, "ping")  # a heartbeat moves the deadline to 1900
    assert _ticks(st, 950, 1850) == []
    out = sm.decide(st, 1900, sm.Tick())
    assert out == [sm.Send(2, {"watch": 1, "data": None, "version": None, "mzxid": None}),
                   sm.Send(1, {"expired": "session timeout: no heartbeat"}), sm.Close(1)]
    assert a not in st.sessions and "/controller" not in st.nodes
    # ephemerals are never persisted; a persistent create is, before its reply is sent
    out = _req(st, 2, 1900, 2, "create", path="/p", data=b2s(b"x"))
    assert out[0] == sm.Send(2, {"id": 2, "ok": {}})
    assert sm.Persist({"t": "put", "p": "/p", "d": b2s(b"x"), "v": 0}) in out


def test_state_resumes_a_session_on_a_new_connection():
    st = sm.State(min_timeout_ms=100, secret=b"k")
    hello = sm.decide(st, 0, sm.Request(1, {"id": 0, "op": "hello", "timeout_ms": 1000}))[0].msg["ok"]
    sid, password = hello["session_id"], hello["password"]
    _req(st, 1, 0, 1, "create", path="/e", data="", ephemeral=True)
    _req(st, 1, 0, 2, "watch_data", path="/e")
    _req(st, 1, 0, 3, "watch_children", path="/")
    sm.decide(st, 100, sm.Disconnected(1))
    assert sm.decide(st, 800, sm.Tick()) == [] and "/e" in st.nodes  # detached, not dead
    wrong = sm.decide(st, 200, sm.Request(3, {"id": 0, "op": "hello", "timeout_ms": 1000,
                                              "session_id": sid, "password": "guess"}))
    assert wrong[0].msg["err"] == "SessionExpired" and wrong[1] == sm.Close(3)
    out = sm.decide(st, 900, sm.Request(4, {"id": 0, "op": "hello", "timeout_ms": 1000,
                                            "session_id": sid, "password": password}))
    assert out[0].msg["ok"]["session_id"] == sid
    # every watch of the session is re-sent with the current state, marked as a resync
    assert [e.msg for e in out[1:]] == [
        {"watch": 2, "resync": True, "data": "", "version": 0, "mzxid": st.nodes["/e"].mzxid},
        {"watch": 3, "resync": True, "children": ["e"]}]
    assert _ticks(st, 950, 1850) == []  # the deadline moved with the resume (900 + 1000)
    assert "/e" in st.nodes


def test_state_rejects_protocol_violations_by_closing():
    st = sm.State(min_timeout_ms=100)
    assert _req(st, 1, 0, 1, "get", path="/") == [sm.Close(1)]  # no hello first
    assert sm.decide(st, 0, sm.Request(2, {"op": "hello"})) == [sm.Close(2)]  # no id
    _hello(st, 3, 0)
    assert _req(st, 3, 0, 1, "frobnicate") == [sm.Close(3)]
    bad = _req(st, 3, 0, 2, "get", path="relative")
    assert bad[0].msg["err"] == "BadArguments"
    # a detached session (connection dropped without close) lives until its deadline
    sm.decide(st, 0, sm.Disconnected(3))
    assert len(st.sessions) == 1 and sm.decide(st, 10_000, sm.Tick()) == [] and not st.sessions


# ---- the journal ------------------------------------------------------------------------------

def test_journal_truncates_a_torn_tail_and_compacts(tmp_path):
    j = journal_mod.Journal(str(tmp_path))
    assert j.recover() == []
    recs = [{"t": "put", "p": f"/n{i}", "d": "", "v": 0} for i in range(5)]
    j.append(recs)
    j.close()
    log = tmp_path / "coord.0.log"
    with open(log, "ab") as f:
        f.write(struct.pack(">II", 100, 0) + b'{"t":"put"')  # a crash mid-append
    j = journal_mod.Journal(str(tmp_path), compact_after=3)
    assert j.recover() == recs
    assert log.stat().st_size == sum(len(journal_mod._frame(r)) for r in recs)
    # compaction: snapshot the tree, continue in generation 1; recovery gives the same tree
    assert j.needs_compaction()
    tree = sm.State(100)
    for r in recs:
        sm.apply_record(tree, r)
    j.compact(sm.persistent_records(tree))
    j.append([{"t": "del", "p": "/n0"}])
    j.close()
    assert sorted(os.listdir(tmp_path)) == ["LOCK", "coord.1.log", "coord.snap"]
    j = journal_mod.Journal(str(tmp_path))
    tree2 = sm.State(100)
    for r in j.recover():
        sm.apply_record(tree2, r)
    assert sorted(tree2.nodes) == ["/", "/n1", "/n2", "/n3", "/n4"]
    with pytest.raises(SystemExit, match="in use"):  # one server per data dir
        journal_mod.Journal(str(tmp_path))
    j.close()


# ---- the server process -----------------------------------------------------------------------

@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL])
def test_persistent_nodes_survive_a_restart(embedded_coord_server, how):
    url = embedded_coord_server.url
    c = coord.connect(url, session_timeout_ms=5000)
    expired = Recorder()
    c.on_session_expired(lambda: expired("expired"))
    c.create("/brokers/topics/t/partitions/0/state", b'{"leader":1}')
    c.set("/brokers/topics/t/partitions/0/state", b'{"leader":2}', 0)
    c.create("/gone", b"x")
    c.delete("/gone")
    assert c.increment("/controller_epoch") == 1
    c.create("/controller", b"1", ephemeral=True)
    # every write above was acknowledged, so it was fsynced: even kill -9 must keep it
    rc = embedded_coord_server.stop(how)
    assert rc == (0 if how == signal.SIGTERM else -signal.SIGKILL)
    t0 = time.monotonic()
    embedded_coord_server.start()  # same port, same data dir
    assert embedded_coord_server.url == url
    # The old client tries to resume; the new server never heard of its session and says so:
    # expired at once, not at the end of the 5 s session timeout.
    expired.wait_for(1, timeout_s=10)
    assert time.monotonic() - t0 < 4
    with pytest.raises(SessionExpired):
        c.get("/controller_epoch")
    c2 = coord.connect(url, session_timeout_ms=2000)
    try:
        assert c2.get("/brokers/topics/t/partitions/0/state") == (b'{"leader":2}', 1)
        assert c2.increment("/controller_epoch") == 2
        assert c2.exists("/gone") is None
        assert c2.exists("/controller") is None  # ephemerals are not persisted
        assert c2.get_children("/") == ["brokers", "controller_epoch"]
    finally:
        c2.close()
        c.close()


def _closed_by_server(sock: socket.socket, timeout_s: float = 10.0) -> bool:
    sock.settimeout(timeout_s)
    try:
        while True:  # drains any reply; bounded by the server closing or the timeout
            if not sock.recv(65536):
                return True
    except socket.timeout:
        return False
    except ConnectionError:
        return True


def test_garbage_on_the_port_closes_only_that_connection(embedded_coord_server, coord_connect):
    c = coord_connect(embedded_coord_server.url)
    c.create("/ok", b"1")
    garbage = [
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",           # announces a ~1.2 GB frame
        struct.pack(">I", 0xFFFFFFFF),                   # the largest possible frame
        struct.pack(">I", 5) + b"\xff\xfe\x00\x01\x02",  # not UTF-8
        struct.pack(">I", 2) + b"[]",                    # JSON, not an object
        struct.pack(">I", 25) + b'{"id":1,"op":"get","p":1}',  # no hello first
    ]
    for junk in garbage:
        with socket.create_connection(("127.0.0.1", embedded_coord_server.port)) as s:
            s.sendall(junk)
            assert _closed_by_server(s), junk
    with socket.create_connection(("127.0.0.1", embedded_coord_server.port)) as s:
        s.sendall(struct.pack(">I", 100) + b"{")  # a torn frame, then silence:
        t0 = time.monotonic()
        assert _closed_by_server(s)  # dropped at the fixture's 1 s hello timeout
        assert 0.5 < time.monotonic() - t0 < 5
    assert embedded_coord_server.proc.poll() is None
    assert c.get("/ok") == (b"1", 0)  # the established session is unharmed
    assert coord_connect(embedded_coord_server.url).get("/ok") == (b"1", 0)


def test_every_change_is_reported_in_order(embedded_coord_url, coord_connect):
    c, writer = coord_connect(embedded_coord_url), coord_connect(embedded_coord_url)
    rec = Recorder()
    c.watch_data("/isr", rec)
    writer.create("/isr", b"0")
    for i in range(1, 60):  # back to back, no waiting: the embedded server folds nothing
        writer.set("/isr", str(i).encode(), i - 1)
    events = rec.wait_for(61)
    assert events == [(None, None)] + [(str(i).encode(), i) for i in range(60)]


def test_client_fences_itself_when_the_server_goes_quiet(embedded_coord_server):
    c = coord.connect(embedded_coord_server.url, session_timeout_ms=600)
    expired = Recorder()
    c.on_session_expired(lambda: expired("expired"))
    os.kill(embedded_coord_server.pid, signal.SIGSTOP)
    try:
        t0 = time.monotonic()
        expired.wait_for(1, timeout_s=5)
        # a controller must stop acting once its session may be gone: within about a timeout
        # (from the last pong, up to a third of a timeout before the SIGSTOP)
        assert 0.3 <= time.monotonic() - t0 <= 3
        with pytest.raises(SessionExpired):
            c.exists("/")
    finally:
        os.kill(embedded_coord_server.pid, signal.SIGCONT)
        c.close()
    # the server, resumed, serves new sessions
    with coord.connect(embedded_coord_server.url, session_timeout_ms=600) as c2:
        assert c2.get_children("/") == []


STALLED_READER = r"""
import sys
from impl import coord
c = coord.connect(sys.argv[1], session_timeout_ms=30000)
c.create("/brokers/ids/9", ephemeral=True)
c.watch_data("/big", lambda d, v: None)
print("ready", flush=True)
sys.stdin.readline()
"""


def test_a_client_that_stops_reading_is_evicted(embedded_coord_server, coord_connect):
    """Bounded output: a SIGSTOPped client with a watch on a busy node fills its buffer; the
    server evicts its session long before the 30 s timeout instead of buffering without end."""
    embedded_coord_url = embedded_coord_server.url
    writer = coord_connect(embedded_coord_url, session_timeout_ms=30000)
    proc = subprocess.Popen([sys.executable, "-c", STALLED_READER, embedded_coord_url],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            env=subprocess_env())
    try:
        assert proc.stdout.readline().strip() == "ready"
        os.kill(proc.pid, signal.SIGSTOP)
        writer.create("/big")
        blob = os.urandom(900_000)
        t0 = time.monotonic()
        for _ in range(40):  # ~48 MB of notifications, far above the 8 MiB bound plus socket buffers
            writer.set("/big", blob)
            if writer.exists("/brokers/ids/9") is None:
                break
        assert writer.exists("/brokers/ids/9") is None
        assert time.monotonic() - t0 < 20
    finally:
        os.kill(proc.pid, signal.SIGCONT)
        proc.kill()
        proc.wait()
    assert writer.get("/big")[1] >= 1  # and the server carries on
    assert "not reading; evicting its session" in embedded_coord_server.log()


def test_data_bounds_are_enforced_client_side(embedded_coord_url, coord_connect):
    c = coord_connect(embedded_coord_url)
    with pytest.raises(ValueError):
        c.create("/huge", b"x" * 1_000_001)
    with pytest.raises(TypeError):
        c.create("/text", "not bytes")  # type: ignore[arg-type]
    with pytest.raises(NoNode):
        c.get("/huge")
    c.close()
    with pytest.raises(CoordError, match="closed"):
        c.get("/")


def test_writes_to_a_stopped_server_fail_instead_of_hanging(embedded_coord_server):
    """Four writers push ~1 MB frames at a SIGSTOPped server until the socket buffers are full
    and a send blocks; every call must still end, with an error, in about a session timeout."""
    c = coord.connect(embedded_coord_server.url, session_timeout_ms=600)
    c.create("/big")
    blob = os.urandom(900_000)
    outcomes: list[BaseException | None] = []

    def writer():
        try:
            for _ in range(10):
                c.set("/big", blob)
            outcomes.append(None)
        except BaseException as e:
            outcomes.append(e)

    os.kill(embedded_coord_server.pid, signal.SIGSTOP)
    try:
        t0 = time.monotonic()
        threads = [threading.Thread(target=writer) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        assert len(outcomes) == 4 and all(isinstance(e, CoordError) for e in outcomes), outcomes
        assert time.monotonic() - t0 < 5
    finally:
        os.kill(embedded_coord_server.pid, signal.SIGCONT)
        c.close()


def test_session_timeout_is_negotiated(embedded_coord_url):
    # the fixture's server ticks every 50 ms: it grants at least two ticks, at most 60 s
    with coord.connect(embedded_coord_url, session_timeout_ms=10) as c:
        assert c.session_timeout_ms == 100
        c.create("/alive")  # heartbeats every ~33 ms keep even this short session
    with coord.connect(embedded_coord_url, session_timeout_ms=3_600_000) as c:
        assert c.session_timeout_ms == 60_000
        assert c.exists("/alive") == 0


# One strategy per op, with plausible and wrong-typed field values, so a message has a fair
# chance to reach deep into its handler (a flat dict of random fields almost never does).
_odd = [None, True, 2**40, "x", [1], {"a": 1}]
_ids = st.sampled_from([1, 2, 3, 4, 5] + _odd)
_paths = st.sampled_from(["/a", "/a/b", "/", "a", "", "/zookeeper"] + _odd)
_datas = st.sampled_from(["", "eA==", "!"] + _odd)
_versions = st.sampled_from([-1, 0, 1, -3, 1.5] + _odd)
_flags = st.sampled_from([True, False] + _odd)


def _op(op, **fields):
    return st.fixed_dictionaries({"id": _ids, "op": st.just(op), **fields})


_messages = st.one_of(
    _op("create", path=_paths, data=_datas, ephemeral=_flags, makepath=_flags),
    _op("set", path=_paths, data=_datas, version=_versions),
    _op("delete", path=_paths, version=_versions),
    *[_op(op, path=_paths) for op in ("get", "exists", "children", "watch_data", "watch_children")],
    _op("ping"), _op("close"), _op("nonsense"),
    _op("hello", timeout_ms=st.sampled_from([1000, -5, 0, 10**9] + _odd),
        session_id=st.sampled_from([1, 2, 3] + _odd), password=st.sampled_from(["", "x"] + _odd)),
    st.dictionaries(st.sampled_from(["id", "op", "path", "data"]), st.sampled_from(_odd), max_size=4),
)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.lists(st.tuples(st.integers(1, 3), _messages), max_size=12))
def test_decide_survives_any_well_framed_message(msgs):
    """Whatever JSON object a peer sends, the state machine answers or closes that connection;
    it never raises (a raise would kill the server for everyone). Mutation-checked: dropping
    the FrameError guard in state._request makes this fail."""
    state = sm.State(min_timeout_ms=100, secret=b"k")
    for conn in (1, 2):  # two live sessions, so the ops' handlers are reached; conn 3 has none
        _hello(state, conn, 0, timeout_ms=10_000)
    for now, (conn, msg) in enumerate(msgs):
        effects = sm.decide(state, now, sm.Request(conn, msg)) + sm.decide(state, now, sm.Tick())
        for e in effects:  # and whatever it emits can be framed and journaled
            assert isinstance(e, (sm.Send, sm.Persist, sm.Close))
            if isinstance(e, sm.Send):
                encode_frame(e.msg)
            elif isinstance(e, sm.Persist):
                journal_mod._frame(e.record)
                assert e.record["p"].startswith("/")


def test_server_compacts_its_log_and_recovers_from_the_snapshot(tmp_path):
    from tests.conftest import EmbeddedCoordServer
    server = EmbeddedCoordServer(str(tmp_path / "coord"), extra_args=("--compact-after", "5"))
    os.makedirs(server.data_dir)
    server.start()
    try:
        with coord.connect(server.url, session_timeout_ms=2000) as c:
            for i in range(12):  # 1 create + 12 sets + 1 delete: two compactions on the way
                c.increment("/controller_epoch")
            c.create("/brokers/topics/t", b"{}")
            c.delete("/brokers/topics/t")
        names = sorted(os.listdir(server.data_dir))
        assert "coord.snap" in names and "coord.0.log" not in names, names
        server.restart()
        with coord.connect(server.url, session_timeout_ms=2000) as c:
            assert c.get("/controller_epoch") == (b"12", 11)
            assert c.get_children("/brokers/topics") == []
    finally:
        server.stop()


def test_shutdown_never_closes_the_journal_under_an_append_in_flight(tmp_path):
    """The decide loop hands each batch's append (write + fsync on the journal's bare descriptor
    number) to the executor. Shutdown cancels the loop, which does not stop that thread; closing
    the journal then would free the number while the thread is still to write to it. The append
    is held inside its call here (a gate before the real append), the loop cancelled, and the
    journal must stay open until the append has landed."""
    import asyncio

    from impl.coord.server import Server

    srv = Server(str(tmp_path), tick_ms=100)
    entered, release = threading.Event(), threading.Event()
    real_append = srv.journal.append

    def held_append(records):
        entered.set()
        assert release.wait(10), "never released"
        real_append(records)

    srv.journal.append = held_append

    async def scenario():
        loop = asyncio.get_running_loop()
        decide = asyncio.create_task(srv.decide_loop())
        await srv.queue.put(sm.Request(1, {"id": 0, "op": "hello", "timeout_ms": 6000}))
        await srv.queue.put(sm.Request(1, {"id": 1, "op": "create", "path": "/kept", "data": b2s(b"x")}))
        assert await loop.run_in_executor(None, entered.wait, 10), "the append never started"
        decide.cancel()                       # what run() does at SIGTERM
        await asyncio.wait([decide])
        closer = asyncio.create_task(srv.close_journal())
        await asyncio.sleep(0)                # one loop turn: the closer has run its first step
        assert not closer.done() and srv.journal._fd is not None, "journal closed under the append"
        release.set()
        await asyncio.wait_for(closer, 10)
        assert srv.journal._fd is None

    asyncio.run(scenario())
    j = journal_mod.Journal(str(tmp_path))    # the lock is free again, and the record landed
    try:
        assert {"t": "put", "p": "/kept", "d": b2s(b"x"), "v": 0} in j.recover()
    finally:
        j.close()
