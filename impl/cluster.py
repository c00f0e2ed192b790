"""A cluster of real broker processes on loopback, for the CLI, tests and the fault injector.

    c = Cluster(3, "/tmp/kv", generation="current", coordinator="embedded")
    c.start()                       # coordination server (embedded) + 3 broker processes
    c.create_topic("t", partitions=1, replication_factor=3, min_insync=2)
    c.wait_for_leaders("t"); c.leader_of("t", 0); c.bootstrap
    c.kill(n) / c.stop_broker(n) / c.start_broker(n) / c.pause(n) / c.resume(n) / c.power_loss(n)
    c.apply_fault({"fault": "kill", "target": "leader:t/0"})     # faults as data (impl/control.py)
    c.status(); c.move_leader("t", 0, n)
    c.stop()

Each broker N has data dir `<data_dir>/broker-N` (its logs and trace-*.jsonl) and log file
`<data_dir>/broker-N.log`. Faults are plain methods so a declarative schedule can drive them.
"""
from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

from impl import rules
from impl.netclient import SyncConn
from impl.protocol.errors import INVALID_REPLICATION_FACTOR
from impl.storage.log import power_loss as _truncate_unflushed

PROJECT_ROOT = str(Path(__file__).resolve().parent.parent)


class ClusterError(Exception):
    pass


def _ephemeral_range() -> tuple[int, int]:
    try:
        lo, hi = (int(x) for x in open("/proc/sys/net/ipv4/ip_local_port_range").read().split())
        return lo, hi
    except (OSError, ValueError):
        return 32768, 60999


def free_port() -> int:
    """A port for a broker to listen on for the cluster's whole life, restarts included: chosen
    below the kernel's ephemeral range, so that while the broker is down (killed, powered off)
    no outgoing connection can take it as its source port and make the restart fail to bind
    ("address already in use", seen in long nemesis runs). Random within the range, checked free."""
    lo, _ = _ephemeral_range()
    low, high = (10000, lo - 1) if lo > 12000 else (lo + 1024, 65000)
    rng = random.SystemRandom()   # not a semantic choice: ports never change behaviour
    for _ in range(200):
        port = rng.randint(low, high)
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_ports(n: int) -> list[int]:
    """n distinct ports for one cluster's brokers. free_port only checks that a port is free
    now, so two calls may pick the same one (brokers 1 and 2 of a cluster once did, and the
    second could not bind); a port picked twice is picked again. Bounded: a range with fewer
    than n free ports raises."""
    out: list[int] = []
    for _ in range(50 * n):
        if len(out) == n:
            break
        p = free_port()
        if p not in out:
            out.append(p)
    if len(out) < n:
        raise ClusterError(f"could not find {n} distinct free ports")
    return out


COORD_HOST = "127.0.0.2"
HARNESS_SESSION_MS = 10000       # the harness's own session: reads only, no ephemerals


def broker_host(i: int) -> str:
    """Broker i's own address in a private network namespace (Cluster(addresses=True))."""
    return f"127.0.0.{11 + i}"


def child_env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = PROJECT_ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONUNBUFFERED"] = "1"
    return env


class Cluster:
    def __init__(self, n: int, data_dir: str | Path, generation: str = "current",
                 coordinator: str = "embedded", base_port: int | None = None,
                 broker_config: dict | None = None, session_timeout_ms: int = 3000,
                 broker_configs: dict[int, dict] | None = None, coord_root: str | None = None,
                 addresses: bool = False, harness_session_timeout_ms: int = HARNESS_SESSION_MS):
        """addresses: give every node its own loopback address (coordination server 127.0.0.2,
        broker N 127.0.0.(11+N)), listening and connecting from it, so that a partition
        is an nftables rule on addresses (impl/netfault.py). Only inside a private network
        namespace, where all of 127.0.0.0/8 is this cluster's; needs the embedded coordinator.

        harness_session_timeout_ms: the session of this object's own reads of the store (status,
        registered, partition_state); it ends like any other in a stall longer than it, and is
        then opened anew (see _store).

        coord_root: prefix of every coordination path. None = a fresh random namespace on
        ZooKeeper (tests: runs never see each other; deleted at stop) and "" on the embedded
        server; the CLI passes "" so a restarted cluster finds its topics again."""
        if n < 1:
            raise ValueError("a cluster needs at least one broker")
        rules.fixes_for(generation)          # validates
        if addresses and coordinator != "embedded":
            raise ValueError("per-node addresses need the embedded coordinator")
        self.hosts = [broker_host(i) if addresses else "127.0.0.1" for i in range(n)]
        self.coord_host = COORD_HOST if addresses else "127.0.0.1"
        self.n = n
        self.data_dir = Path(data_dir)
        self.generation = generation
        self.coordinator = coordinator
        self.ports = [base_port + i for i in range(n)] if base_port else free_ports(n)
        self.broker_config = dict(broker_config or {})
        self.broker_config.setdefault("session_timeout_ms", session_timeout_ms)
        self.broker_configs = {int(k): dict(v) for k, v in (broker_configs or {}).items()}
        self.procs: dict[int, subprocess.Popen] = {}
        self.coord_proc: subprocess.Popen | None = None
        self.coord_url = ""
        self._want_root = coord_root
        self.coord_root = coord_root or ""
        self._own_root = False
        self._coord = None
        self._coord_ended = None
        self.harness_session_timeout_ms = harness_session_timeout_ms
        self.paused: set[int] = set()

    # --- coordination ---------------------------------------------------------------------------
    def _start_coordination(self) -> None:
        if self.coordinator == "embedded":
            d = self.data_dir / "coord"
            d.mkdir(parents=True, exist_ok=True)
            log = open(self.data_dir / "coord.log", "ab")
            self.coord_proc = subprocess.Popen(
                [sys.executable, "-m", "impl.coord.server", "--port", "0", "--host", self.coord_host,
                 "--data-dir", str(d)],
                stdout=subprocess.PIPE, stderr=log, env=child_env(), cwd=PROJECT_ROOT)
            line = self._read_line(self.coord_proc, "coord ready:", 20)
            self.coord_url = "embedded://" + line.split("coord ready:", 1)[1].strip()
        elif self.coordinator.startswith(("zk://", "embedded://")):
            self.coord_url = self.coordinator
            if self.coordinator.startswith("zk://") and self._want_root is None:
                # a fresh namespace per cluster so runs never see each other's nodes
                self.coord_root = f"/kafkaverify-{uuid.uuid4().hex[:12]}"
                self._own_root = True
        else:
            raise ValueError(f"coordinator must be 'embedded', embedded://HOST:PORT or zk://HOST:PORT, "
                             f"got {self.coordinator!r}")
        self._coord = self._connect_store()

    def _connect_store(self):
        from impl.coord import connect
        coord = connect(self.coord_url, session_timeout_ms=self.harness_session_timeout_ms)
        self._coord_ended = threading.Event()
        coord.on_session_expired(self._coord_ended.set)
        return coord

    def _store(self):
        """The harness's own coordination session, opened anew if the old one ended. A stall of
        the whole machine (every process and the coordination server stopped past the session
        timeout) ends this session too: its client hears nothing for a timeout and gives up.
        It owns no ephemeral node and no watch, so a fresh session loses nothing; without one
        every later read fails and a recovered cluster looks empty for ever. One connect attempt
        per call (bounded by the connect timeout); if it fails, the read fails as before."""
        if self._coord is None:
            raise ClusterError("the cluster is not started")
        if self._coord_ended.is_set():
            try:
                self._coord.close()
            except Exception:
                pass
            self._coord = self._connect_store()
        return self._coord

    @staticmethod
    def _read_line(proc: subprocess.Popen, prefix: str, timeout_s: float) -> str:
        deadline = time.monotonic() + timeout_s
        assert proc.stdout is not None
        os.set_blocking(proc.stdout.fileno(), False)
        buf = b""
        while time.monotonic() < deadline:
            chunk = proc.stdout.read()
            if chunk:
                buf += chunk
                for line in buf.decode(errors="replace").splitlines():
                    if line.startswith(prefix):
                        return line
            if proc.poll() is not None:
                raise ClusterError(f"process exited with code {proc.returncode} before '{prefix}'")
            time.sleep(0.02)
        raise ClusterError(f"no '{prefix}' line within {timeout_s}s")

    def path(self, p: str) -> str:
        return self.coord_root + p

    # --- lifecycle ------------------------------------------------------------------------------
    def start(self, timeout_s: float = 60, controller: int | None = None) -> "Cluster":
        """controller: arrange which broker is the controller -- it starts alone and the others
        only once it holds /controller (a test that needs a particular controller arranges it
        instead of hoping for it)."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._start_coordination()
        if controller is not None:
            if not 0 <= controller < self.n:
                raise ValueError(f"controller must be a broker id in 0..{self.n - 1}, got {controller}")
            self.start_broker(controller, timeout_s=timeout_s)
            deadline = time.monotonic() + timeout_s
            while self.controller() != controller:
                self._check_alive()
                if time.monotonic() > deadline:
                    raise ClusterError(f"broker {controller} did not become the controller within {timeout_s}s")
                time.sleep(0.05)
        for i in range(self.n):
            if i != controller:
                self.start_broker(i, wait=False)
        self.wait_ready(timeout_s)
        return self

    def broker_dir(self, i: int) -> Path:
        return self.data_dir / f"broker-{i}"

    def start_broker(self, i: int, wait: bool = True, timeout_s: float = 30) -> None:
        if i in self.procs and self.procs[i].poll() is None:
            raise ClusterError(f"broker {i} is already running")
        log = open(self.data_dir / f"broker-{i}.log", "ab")
        self.procs[i] = subprocess.Popen(
            [sys.executable, "-m", "impl.broker", "--id", str(i), "--port", str(self.ports[i]),
             "--data-dir", str(self.broker_dir(i)), "--coordinator", self.coord_url,
             "--coord-root", self.coord_root, "--generation", self.generation,
             "--config", json.dumps({**self.broker_config, "host": self.hosts[i],
                                     **self.broker_configs.get(i, {})})],
            stdout=log, stderr=subprocess.STDOUT, env=child_env(), cwd=PROJECT_ROOT)
        if wait:
            self.wait_registered(i, timeout_s)

    def registered(self) -> set[int]:
        try:
            return {int(x) for x in self._store().get_children(self.path("/brokers/ids"))}
        except Exception:
            return set()

    def broker_epochs(self) -> dict[int, int]:
        """{broker: the broker epoch its registration names} for the registrations present now
        (-1 where one names none). A registration left by a session the server has not expired
        yet keeps its old epoch: a newer epoch is the broker's registration since then."""
        out = {}
        for i in self.registered():
            try:
                data, _ = self._store().get(self.path(f"/brokers/ids/{i}"))
                out[i] = int(json.loads(data).get("broker_epoch", -1))
            except Exception:
                continue       # gone since the listing
        return out

    def controller(self) -> int | None:
        try:
            data, _ = self._store().get(self.path("/controller"))
            return json.loads(data)["brokerid"]
        except Exception:
            return None

    def controller_epoch(self) -> int:
        try:
            return int(self._store().get(self.path("/controller_epoch"))[0])
        except Exception:
            return 0

    def _check_alive(self) -> None:
        for i, p in self.procs.items():
            if p.poll() is not None and getattr(p, "_expected_dead", False) is False:
                tail = (self.data_dir / f"broker-{i}.log").read_text(errors="replace")[-2000:]
                raise ClusterError(f"broker {i} exited with code {p.returncode}:\n{tail}")

    def wait_registered(self, i: int, timeout_s: float = 30) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self._check_alive()
            if i in self.registered():
                return
            time.sleep(0.05)
        raise ClusterError(f"broker {i} did not register within {timeout_s}s")

    def wait_ready(self, timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        want = {i for i, p in self.procs.items() if p.poll() is None}
        while time.monotonic() < deadline:
            self._check_alive()
            if want <= self.registered() and self.controller() is not None:
                return
            time.sleep(0.05)
        raise ClusterError(f"cluster not ready within {timeout_s}s (registered {sorted(self.registered())})")

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{h}:{p}" for h, p in zip(self.hosts, self.ports))

    def address(self, i: int) -> tuple[str, int]:
        return (self.hosts[i], self.ports[i])

    def alive(self) -> list[int]:
        return sorted(i for i, p in self.procs.items() if p.poll() is None)

    def stop_broker(self, i: int, timeout_s: float = 15) -> None:
        p = self.procs.get(i)
        if p is None or p.poll() is not None:
            return
        p._expected_dead = True
        p.send_signal(signal.SIGCONT)
        p.terminate()
        try:
            p.wait(timeout_s)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()

    def kill(self, i: int) -> None:
        """kill -9: no flush, no checkpoint, the session node lingers until it expires."""
        p = self.procs.get(i)
        if p is None or p.poll() is not None:
            return
        p._expected_dead = True
        p.kill()
        p.wait()

    def pause(self, i: int) -> None:
        self.procs[i].send_signal(signal.SIGSTOP)
        self.paused.add(i)

    def resume(self, i: int) -> None:
        self.procs[i].send_signal(signal.SIGCONT)
        self.paused.discard(i)

    def restart(self, i: int, timeout_s: float = 30) -> None:
        """Start broker i again after a kill, power failure or stop (a running one is stopped
        cleanly first)."""
        self.stop_broker(i)
        self.paused.discard(i)
        self.start_broker(i, timeout_s=timeout_s)

    def dead(self) -> dict[int, int]:
        """{broker: exit code} of every broker process that has exited (killed or crashed)."""
        return {i: p.returncode for i, p in sorted(self.procs.items()) if p.poll() is not None}

    def mark_dead_expected(self, i: int) -> None:
        """A death reported to the user is no longer an error of later waits (restart)."""
        if i in self.procs:
            self.procs[i]._expected_dead = True

    def apply_fault(self, fault: dict) -> dict:
        """Faults as data: {"fault": kill|pause|resume|restart|power-fail|stop, "target": "N" or
        "leader:TOPIC/PARTITION"}; validated and applied by impl.control.apply_fault."""
        from impl.control import apply_fault
        return apply_fault(self, fault)

    def is_whole(self) -> bool:
        """Every broker registered, every partition led with its full ISR, and every replica,
        asked itself, at the stored leader epoch in its role (the leader as leader, the others
        as followers) with a log end at least the leader's high watermark."""
        if self.registered() != set(range(self.n)):
            return False
        parts = self.status()["partitions"]
        if not parts or not all(p["leader"] >= 0 and sorted(p["isr"]) == sorted(p["replicas"]) for p in parts):
            return False
        views: dict[int, dict] = {}
        try:
            for i in range(self.n):
                with SyncConn(*self.address(i)) as conn:
                    d = conn.control({"op": "describe"})
                views[i] = {(x["topic"], x["partition"]): x for x in d["partitions"]}
        except OSError:
            return False
        for p in parts:
            key = (p["topic"], p["partition"])
            lead = views[p["leader"]].get(key)
            if lead is None or lead["role"] != "leader" or lead["leader_epoch"] != p["leader_epoch"]:
                return False
            for r in p["replicas"]:
                v = views[r].get(key)
                if (v is None or v["leader_epoch"] != p["leader_epoch"] or v["log_end_offset"] < lead["hw"]
                        or (r != p["leader"] and v["role"] != "follower")):
                    return False
        return True

    def status(self) -> dict:
        """Brokers (running / paused / dead / registered) and every partition's leader and ISR,
        read from the coordination service."""
        regs = self.registered()
        brokers = []
        for i in range(self.n):
            p = self.procs.get(i)
            state = "dead" if p is None or p.poll() is not None else ("paused" if i in self.paused else "running")
            brokers.append({"id": i, "port": self.ports[i], "state": state, "registered": i in regs,
                            "exit_code": None if p is None else p.returncode})
        parts = []
        try:
            topics = sorted(self._store().get_children(self.path("/brokers/topics")))
        except Exception:
            topics = []
        for t in topics:
            try:
                a = json.loads(self._store().get(self.path(f"/brokers/topics/{t}"))[0])
            except Exception:
                continue
            for pi, replicas in sorted(a["partitions"].items(), key=lambda kv: int(kv[0])):
                st = self.partition_state(t, int(pi)) or {}
                parts.append({"topic": t, "partition": int(pi), "replicas": replicas,
                              "leader": st.get("leader", -1), "leader_epoch": st.get("leader_epoch", -1),
                              "isr": st.get("isr", [])})
        return {"controller": self.controller(), "brokers": brokers, "partitions": parts}

    def move_leader(self, topic: str, partition: int, to: int, timeout_s: float = 60) -> None:
        """Arrange that broker `to` leads the partition: while another broker leads, restart
        that one cleanly (the controller elects the first live ISR replica), then wait for the
        restarted broker to rejoin the ISR. `to` must be a live replica in the ISR. Bounded by
        the number of replicas."""
        for _ in range(self.n + 1):
            self.wait_for_leaders(topic, timeout_s=timeout_s)
            st = self.partition_state(topic, partition)
            if st["leader"] == to:
                return
            if to not in st["isr"]:
                raise ClusterError(f"{topic}/{partition}: broker {to} is not in the ISR {st['isr']}")
            old, size = st["leader"], len(st["isr"])
            self.stop_broker(old)
            deadline = time.monotonic() + timeout_s
            while (self.leader_of(topic, partition) in (None, old)) and time.monotonic() < deadline:
                time.sleep(0.05)
            self.start_broker(old, timeout_s=timeout_s)
            self.wait_for_leaders(topic, timeout_s=timeout_s, isr_size=size)
        raise ClusterError(f"{topic}/{partition}: broker {to} did not become leader")

    def power_loss(self, i: int) -> dict[str, int]:
        """kill -9, then drop every write the broker had not fsynced (see impl.storage.log)."""
        self.kill(i)
        return _truncate_unflushed(self.broker_dir(i))

    def pause_replication(self, i: int) -> None:
        """Test-only hook: broker i's replica fetchers stop while the file exists."""
        self.broker_dir(i).mkdir(parents=True, exist_ok=True)
        (self.broker_dir(i) / "PAUSE_REPLICATION").touch()

    def resume_replication(self, i: int) -> None:
        try:
            (self.broker_dir(i) / "PAUSE_REPLICATION").unlink()
        except FileNotFoundError:
            pass

    def stop(self) -> None:
        # SIGTERM everyone first: stopping one by one would hand the controller around
        for p in self.procs.values():
            if p.poll() is None:
                p._expected_dead = True
                p.send_signal(signal.SIGCONT)
                p.terminate()
        for i in list(self.procs):
            self.stop_broker(i)
        if self._coord is not None:
            try:
                if self._own_root:
                    self._delete_tree(self.coord_root)
                self._coord.close()
            except Exception:
                pass
            self._coord = None
        if self.coord_proc is not None and self.coord_proc.poll() is None:
            self.coord_proc.terminate()
            try:
                self.coord_proc.wait(10)
            except subprocess.TimeoutExpired:
                self.coord_proc.kill()
                self.coord_proc.wait()

    def _delete_tree(self, path: str, depth: int = 0) -> None:
        if depth > 10:
            return
        try:
            for c in self._store().get_children(path):
                self._delete_tree(f"{path}/{c}", depth + 1)
            self._store().delete(path)
        except Exception:
            pass

    def __enter__(self) -> "Cluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # --- admin ----------------------------------------------------------------------------------
    def _any_conn(self) -> SyncConn:
        last = None
        for i in self.alive():
            try:
                return SyncConn(*self.address(i))
            except OSError as e:
                last = e
        raise ClusterError(f"no broker reachable ({last})")

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 1,
                     min_insync: int = 1, unclean: bool = False, timeout_s: float = 20,
                     assignment: dict[int, list[int]] | None = None) -> None:
        """Creates a topic; `assignment` ({partition: [replica, ...]}, preferred leader first)
        overrides partitions / replication_factor."""
        assigned = [{"partition_index": p, "broker_ids": list(r)} for p, r in sorted((assignment or {}).items())]
        if assignment:
            partitions, replication_factor = -1, -1
        deadline = time.monotonic() + timeout_s
        while True:
            with self._any_conn() as c:
                r = c.request(19, 5, {"topics": [{"name": name, "num_partitions": partitions,
                                                  "replication_factor": replication_factor, "assignments": assigned,
                                                  "configs": [{"name": "min.insync.replicas", "value": str(min_insync)},
                                                              {"name": "unclean.leader.election.enable",
                                                               "value": str(unclean).lower()}]}],
                                      "timeout_ms": int(timeout_s * 1000), "validate_only": False})
            err = r.topics[0].error_code
            # INVALID_REPLICATION_FACTOR while enough brokers run: one of them is between two
            # sessions (its session lapsed on a loaded machine and it is registering anew). The
            # broker answered from its view; ask again once every running broker is registered.
            if (err == INVALID_REPLICATION_FACTOR and len(self.alive()) >= replication_factor
                    and time.monotonic() < deadline):
                while not set(self.alive()) <= self.registered() and time.monotonic() < deadline:
                    self._check_alive()
                    time.sleep(0.05)
                time.sleep(0.05)
                continue
            break
        if err:
            raise ClusterError(f"CreateTopics {name!r} failed with error {err}")
        self.wait_for_leaders(name, timeout_s=timeout_s)

    def partition_state(self, topic: str, partition: int) -> dict | None:
        try:
            data, ver = self._store().get(self.path(f"/brokers/topics/{topic}/partitions/{partition}/state"))
        except Exception:
            return None
        st = json.loads(data)
        st["zk_version"] = ver
        return st

    def leader_of(self, topic: str, partition: int) -> int | None:
        st = self.partition_state(topic, partition)
        if st is None or st["leader"] < 0:
            return None
        return st["leader"]

    def wait_for_leaders(self, topic: str, timeout_s: float = 20, isr_size: int | None = None) -> dict[int, int]:
        """Waits until every partition has a live leader that serves it (a ListOffsets answered
        without error) and, if given, an ISR of `isr_size`. Returns {partition: leader}."""
        deadline = time.monotonic() + timeout_s
        last = None
        while time.monotonic() < deadline:
            try:
                a = json.loads(self._store().get(self.path(f"/brokers/topics/{topic}"))[0])
                out = {}
                for pi in sorted(a["partitions"], key=int):
                    st = self.partition_state(topic, int(pi))
                    if not st or st["leader"] not in self.alive():
                        raise ClusterError(f"partition {pi}: no live leader ({st})")
                    if isr_size is not None and len(st["isr"]) != isr_size:
                        raise ClusterError(f"partition {pi}: ISR {st['isr']}")
                    with SyncConn(*self.address(st["leader"])) as c:
                        r = c.request(2, 4, {"replica_id": -1, "isolation_level": 0, "topics": [
                            {"name": topic, "partitions": [{"partition_index": int(pi), "current_leader_epoch": -1,
                                                             "timestamp": -1}]}]})
                    err = r.topics[0].partitions[0].error_code
                    if err:
                        raise ClusterError(f"partition {pi}: leader {st['leader']} answers error {err}")
                    out[int(pi)] = st["leader"]
                return out
            except Exception as e:
                last = e
                time.sleep(0.05)
        raise ClusterError(f"topic {topic!r}: leaders not ready within {timeout_s}s: {last}")

    def trace_files(self, i: int) -> list[Path]:
        return sorted(self.broker_dir(i).glob("trace-*.jsonl"))
