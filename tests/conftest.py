"""Shared pytest fixtures: coordination servers (embedded and real ZooKeeper) and clients.

Owned by the coordination layer (impl/coord); the broker's fixtures live in broker_fixtures.py.

  embedded_coord_server  function: a fresh `python -m impl.coord.server --port 0` subprocess
                         (EmbeddedCoordServer: .url .port .pid .data_dir .log() .stop(sig)
                         .start() .restart(); restarts keep the port and the data dir)
  embedded_coord_url     function: its url, embedded://127.0.0.1:PORT
  zookeeper_server       session: one Debian ZooKeeper JVM per test process (xdist worker)
  zookeeper_url          function: zk://127.0.0.1:PORT/<fresh chroot>, so each test sees an
                         empty tree although the JVM is shared
  coord_url              function, parametrized ["embedded", "zookeeper"]: run a test on both
                         (the zookeeper param carries the `zookeeper` marker)
  coord_connect          function: coord_connect(url, session_timeout_ms=...) -> connected
                         Coordinator, closed at teardown

ZooKeeper missing (no Java or no `zookeeper` package): the zookeeper fixtures skip with the
reason, or FAIL when KAFKAVERIFY_REQUIRE_ALL=1 (CI), so nothing is skipped silently there.
Test session timeouts: the embedded server accepts >= 2 * tick (tick 50 ms here); the test
ZooKeeper runs with tickTime=250 and minSessionTimeout=500.
Helpers: subprocess_env() (PYTHONPATH with the project root, for Python subprocesses),
free_port(). KAFKAVERIFY_ZK_JAR overrides the ZooKeeper jar path (used to test the missing case).
"""
from __future__ import annotations

import itertools
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import settings as _hypothesis_settings

# Every property test draws the same examples on every machine (one seed reproduces a run; CI
# cannot turn red by luck). Failures Hypothesis found are pinned with @example; a wider local
# search: KAFKAVERIFY_HYPOTHESIS_PROFILE=explore pytest .
_hypothesis_settings.register_profile("ci", derandomize=True)
_hypothesis_settings.register_profile("explore", derandomize=False, max_examples=2000)
_hypothesis_settings.load_profile(os.environ.get("KAFKAVERIFY_HYPOTHESIS_PROFILE", "ci"))

ROOT = Path(__file__).resolve().parent.parent
# Overridable so the missing-ZooKeeper path itself can be tested (test_coord_fixtures.py).
ZK_JAR = os.environ.get("KAFKAVERIFY_ZK_JAR", "/usr/share/java/zookeeper.jar")
ZK_MISSING = "Debian's zookeeper package is not installed: apt-get install zookeeper"
# Startup bounds: the embedded server is ready in well under a second; a JVM on a busy 2-core
# box can take several seconds. Past these the fixture fails with the server's log.
EMBEDDED_START_TIMEOUT_S = 15.0
ZK_START_TIMEOUT_S = 60.0


def subprocess_env() -> dict[str, str]:
    """Environment for Python subprocesses: `impl` importable from the project root."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    return env


def run_kafkaverify(*args, timeout: float = 300) -> subprocess.CompletedProcess:
    """`python -m kafkaverify ARGS` as a user runs it; a traceback on stderr fails the test."""
    p = subprocess.run([sys.executable, "-m", "kafkaverify", *map(str, args)], capture_output=True,
                       text=True, env=subprocess_env(), timeout=timeout)
    assert "Traceback" not in p.stderr, p.stderr
    return p


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class EmbeddedCoordServer:
    """One embedded coordination server subprocess. Restartable on the same port and data dir,
    so clients and persistence survive a stop()/start() cycle in tests."""

    def __init__(self, data_dir: str, tick_ms: int = 50, hello_timeout_ms: int = 1000,
                 extra_args: tuple[str, ...] = ()):
        self.data_dir = data_dir
        self.tick_ms = tick_ms
        self.hello_timeout_ms = hello_timeout_ms
        self.extra_args = tuple(extra_args)  # e.g. ("--compact-after", "5")
        self.port = 0
        self.proc: subprocess.Popen | None = None
        self.log_path = os.path.join(data_dir, "server.stderr")

    @property
    def url(self) -> str:
        return f"embedded://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self) -> str:
        assert self.proc is None or self.proc.poll() is not None, "already running"
        with open(self.log_path, "ab") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "impl.coord.server", "--port", str(self.port),
                 "--data-dir", self.data_dir, "--tick-ms", str(self.tick_ms),
                 "--hello-timeout-ms", str(self.hello_timeout_ms), *self.extra_args],
                stdout=subprocess.PIPE, stderr=err, env=subprocess_env(), cwd=str(ROOT))
        deadline = time.monotonic() + EMBEDDED_START_TIMEOUT_S
        line = b""
        while not line.endswith(b"\n"):  # bounded by the deadline
            left = deadline - time.monotonic()
            if left <= 0 or self.proc.poll() is not None:
                self.stop()
                raise RuntimeError(f"embedded coord server did not start; stderr:\n{self.log()}")
            if select.select([self.proc.stdout], [], [], left)[0]:
                chunk = os.read(self.proc.stdout.fileno(), 1)
                if not chunk:
                    continue
                line += chunk
        text = line.decode().strip()
        assert text.startswith("coord ready: 127.0.0.1:"), text
        self.port = int(text.rsplit(":", 1)[1])
        return self.url

    def stop(self, sig: int = signal.SIGTERM) -> int | None:
        """Stop the process (SIGTERM, then SIGKILL after 5 s); return its exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stdout.close()
        return self.proc.returncode

    def restart(self) -> str:
        self.stop()
        return self.start()

    def log(self) -> str:
        try:
            return Path(self.log_path).read_text(errors="replace")[-4000:]
        except OSError:
            return ""


@pytest.fixture
def embedded_coord_server(tmp_path):
    server = EmbeddedCoordServer(str(tmp_path / "coord"))
    os.makedirs(server.data_dir, exist_ok=True)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def embedded_coord_url(embedded_coord_server) -> str:
    return embedded_coord_server.url


class ZooKeeperServer:
    """A standalone Debian ZooKeeper (ZooKeeperServerMain) on a free loopback port."""

    def __init__(self, work_dir: str):
        self.work_dir = work_dir
        self.port = 0
        self.proc: subprocess.Popen | None = None
        self.log_path = os.path.join(work_dir, "zookeeper.out")

    @staticmethod
    def missing_reason() -> str | None:
        if not os.path.exists(ZK_JAR):
            return ZK_MISSING
        if shutil.which("java") is None:
            return "java is not installed (Debian's zookeeper package needs it): apt-get install zookeeper"
        return None

    def start(self) -> None:
        from kazoo.client import KazooClient
        from kazoo.handlers.threading import KazooTimeoutError

        self.port = free_port()
        data = os.path.join(self.work_dir, "data")
        os.makedirs(data, exist_ok=True)
        cfg = os.path.join(self.work_dir, "zoo.cfg")
        # tickTime 250 lets tests use 500 ms+ sessions (ZooKeeper's floor is 2 * tickTime);
        # forceSync=no: test data need not survive power loss, and fsync per write is slow here.
        Path(cfg).write_text(
            f"tickTime=250\nminSessionTimeout=500\nmaxSessionTimeout=60000\n"
            f"dataDir={data}\nclientPort={self.port}\nclientPortAddress=127.0.0.1\n"
            f"admin.enableServer=false\nforceSync=no\npreAllocSize=1024\nmaxClientCnxns=0\n")
        with open(self.log_path, "ab") as out:
            self.proc = subprocess.Popen(
                ["java", "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                 "-Dzookeeper.admin.enableServer=false",
                 "-cp", f"/etc/zookeeper/conf:{ZK_JAR}",
                 "org.apache.zookeeper.server.ZooKeeperServerMain", cfg],
                stdout=out, stderr=subprocess.STDOUT, cwd=self.work_dir)
        # The 4-letter `ruok` may be disabled; a kazoo session is the real readiness test.
        deadline = time.monotonic() + ZK_START_TIMEOUT_S
        while True:  # bounded by the deadline
            if self.proc.poll() is not None:
                raise RuntimeError(f"ZooKeeper exited with {self.proc.returncode}:\n{self.log()}")
            client = KazooClient(hosts=f"127.0.0.1:{self.port}", timeout=2.0)
            try:
                client.start(timeout=1.0)
                client.stop()
                client.close()
                return
            except KazooTimeoutError:
                client.stop()
                client.close()
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"ZooKeeper did not answer within {ZK_START_TIMEOUT_S}s:\n{self.log()}")
            time.sleep(0.2)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def log(self) -> str:
        try:
            return Path(self.log_path).read_text(errors="replace")[-4000:]
        except OSError:
            return ""


def _require_or_skip(reason: str) -> None:
    if os.environ.get("KAFKAVERIFY_REQUIRE_ALL") == "1":
        pytest.fail(f"{reason} (KAFKAVERIFY_REQUIRE_ALL=1 forbids skipping)", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def zookeeper_server():
    reason = ZooKeeperServer.missing_reason()
    if reason:
        _require_or_skip(reason)
    work = tempfile.mkdtemp(prefix="kv-zookeeper-")
    server = ZooKeeperServer(work)
    server.start()
    yield server
    server.stop()
    shutil.rmtree(work, ignore_errors=True)


_chroots = itertools.count(1)


@pytest.fixture
def zookeeper_url(zookeeper_server) -> str:
    # A fresh chroot per test: the shared JVM looks empty to each test. connect() creates it.
    return f"zk://127.0.0.1:{zookeeper_server.port}/t{os.getpid()}-{next(_chroots)}"


# The zookeeper param carries the `zookeeper` marker, so `-m "not zookeeper"` runs embedded only.
@pytest.fixture(params=["embedded", pytest.param("zookeeper", marks=pytest.mark.zookeeper)])
def coord_url(request) -> str:
    return request.getfixturevalue(f"{request.param}_coord_url" if request.param == "embedded"
                                   else "zookeeper_url")


@pytest.fixture
def coord_connect():
    """Factory: coord_connect(url, session_timeout_ms=2000) -> Coordinator; all closed at teardown."""
    from impl import coord

    clients = []

    def make(url: str, session_timeout_ms: int = 2000):
        c = coord.connect(url, session_timeout_ms=session_timeout_ms)
        clients.append(c)
        return c

    yield make
    for c in clients:  # bounded: one per call
        c.close()


def pytest_collection_modifyitems(config, items):
    """The `slow` marker (pyproject.toml) keeps heavier runs out of the default test command:
    without a `-m` expression they are deselected; `-m slow` runs them."""
    if config.option.markexpr:
        return
    slow = [it for it in items if it.get_closest_marker("slow")]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [it for it in items if not it.get_closest_marker("slow")]
