"""Any Kafka-compatible cluster as the nemesis's target: `--cluster FILE` (TOML, docs/any-cluster.md).

The file names the bootstrap servers and, per node, its Kafka node id and the shell commands that
fault it; the harness then runs the same generated schedules, records the same clients and judges
the histories as on its own brokers (kafkaverify/nemesis/runner.py), knowing the cluster only
through those commands and the Kafka protocol (Metadata, CreateTopics via kafka-python's admin
client). Nothing here needs the project's own broker (impl/): that is the point.

    spec = load_cluster_file("cluster.toml")      # ClusterFileError (exit 3) naming the bad key
    c = ExternalCluster(spec, out_dir)            # what runner._Run drives instead of impl.cluster

A command that fails -- a non-zero exit or its timeout -- raises CommandFailed with the command
and its output: the run is then unknown, never valid (runner.run_schedule). Every command run is
logged with its exit status and output to `commands.log` in the run's directory.
"""
from __future__ import annotations

import string
import subprocess
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from kafkaverify.exitcodes import InputError
from kafkaverify.nemesis.errors import HarnessError

TOP_KEYS = {"bootstrap", "timeout_s", "setup", "teardown", "traces", "node"}
NODE_KEYS = {"id", "kill", "start", "pause", "resume", "partition", "heal", "power_loss", "timeout_s"}
REQUIRED_NODE = ("id", "kill", "start", "pause", "resume")
# placeholders each kind of command may use ({{ and }} are literal braces)
RUN_PLACEHOLDERS = {"out"}
NODE_PLACEHOLDERS = RUN_PLACEHOLDERS | {"node", "index"}
PEER_PLACEHOLDERS = NODE_PLACEHOLDERS | {"peer", "peer_index"}
PLACEHOLDERS = {"setup": RUN_PLACEHOLDERS, "teardown": RUN_PLACEHOLDERS, "kill": NODE_PLACEHOLDERS,
                "start": NODE_PLACEHOLDERS, "pause": NODE_PLACEHOLDERS, "resume": NODE_PLACEHOLDERS,
                "power_loss": NODE_PLACEHOLDERS, "partition": PEER_PLACEHOLDERS, "heal": PEER_PLACEHOLDERS}
DEFAULT_TIMEOUT_S = 60.0
OUTPUT_CHARS = 2000            # of a failed command's output, in the run's reason
ADMIN_TIMEOUT_MS = 5000


class ClusterFileError(InputError):
    """A malformed cluster file: the message names the key (exit 3)."""


class ExternalClusterError(RuntimeError):
    """The cluster did not reach a state in time (no leader, nodes missing from Metadata)."""


class CommandFailed(HarnessError):
    """A cluster command exited non-zero or ran past its timeout: the run decides nothing."""


@dataclass(frozen=True)
class Node:
    id: int
    commands: dict[str, str]
    timeout_s: float


@dataclass(frozen=True)
class ClusterSpec:
    path: str
    bootstrap: str
    nodes: tuple[Node, ...]
    timeout_s: float = DEFAULT_TIMEOUT_S
    setup: str | None = None
    teardown: str | None = None
    traces: str | None = None          # glob of the brokers' trace files, if they write ours

    @property
    def can_partition(self) -> bool:
        return all("partition" in n.commands and "heal" in n.commands for n in self.nodes)

    @property
    def can_power_loss(self) -> bool:
        return all("power_loss" in n.commands for n in self.nodes)

    def faults(self) -> set[str]:
        """The nemesis's --faults this file can apply (session expiry needs a coordination service
        the harness cannot reach from outside: never)."""
        out = {"crash", "pause", "controller-failover", "producer-restart", "consumer-crash"}
        if self.can_partition:
            out.add("partition")
        if self.can_power_loss:
            out |= {"power-loss", "power-loss-any"}
        return out


def cluster_faults(spec: ClusterSpec, wanted: tuple[str, ...], explicit: bool) -> tuple[str, ...]:
    """The --faults to run against the file's cluster: asked-for faults it cannot apply are an
    input error (exit 3, naming the missing hooks) when asked for explicitly, and left out of
    the default list."""
    can = spec.faults()
    if explicit:
        bad = [f for f in wanted if f not in can]
        if bad:
            need = {"partition": "partition and heal hooks on every node",
                    "power-loss": "a power_loss hook on every node", "power-loss-any": "a power_loss hook on every node",
                    "session-expiry": "the coordination service, which the harness does not reach in a cluster file"}
            raise ClusterFileError(f"{spec.path}: fault {bad[0]} needs {need.get(bad[0], 'what the file does not give')}")
        return wanted
    got = tuple(f for f in wanted if f in can)
    if not got:
        raise ClusterFileError(f"{spec.path}: none of the faults {', '.join(wanted)} can be applied")
    return got


def _placeholders(where: str, key: str, text: str) -> None:
    allowed = PLACEHOLDERS[key]
    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(text) if f is not None]
    except ValueError as e:
        raise ClusterFileError(f"{where}: {e} (write literal braces as {{{{ and }}}})") from None
    for f in fields:
        if f not in allowed:
            raise ClusterFileError(f"{where}: unknown placeholder {{{f}}} (allowed here: "
                                   f"{', '.join('{' + a + '}' for a in sorted(allowed))})")


def _timeout(where: str, v) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0:
        raise ClusterFileError(f"{where}: must be a positive number of seconds, got {v!r}")
    return float(v)


def _command(where: str, key: str, v) -> str:
    if not isinstance(v, str) or not v.strip():
        raise ClusterFileError(f"{where}: must be a non-empty shell command string")
    _placeholders(where, key, v)
    return v


def parse_cluster(data: dict, path: str = "<cluster file>") -> ClusterSpec:
    unknown = sorted(set(data) - TOP_KEYS)
    if unknown:
        raise ClusterFileError(f"unknown key {unknown[0]!r} (known: {', '.join(sorted(TOP_KEYS))})")
    boot = data.get("bootstrap")
    if isinstance(boot, list):
        boot = ",".join(str(b) for b in boot)
    if not isinstance(boot, str) or not boot.strip():
        raise ClusterFileError("bootstrap: required, \"host:port,host:port\" or a list of them")
    for hp in boot.split(","):
        host, _, port = hp.strip().rpartition(":")
        if not host or not port.isdigit():
            raise ClusterFileError(f"bootstrap: {hp.strip()!r} is not host:port")
    timeout = _timeout("timeout_s", data["timeout_s"]) if "timeout_s" in data else DEFAULT_TIMEOUT_S
    run_cmds = {k: _command(k, k, data[k]) for k in ("setup", "teardown") if k in data}
    traces = data.get("traces")
    if traces is not None and (not isinstance(traces, str) or not traces.strip()):
        raise ClusterFileError("traces: must be a glob of trace files")
    raw_nodes = data.get("node")
    if not isinstance(raw_nodes, list) or not raw_nodes or not all(isinstance(n, dict) for n in raw_nodes):
        raise ClusterFileError("node: required, one [[node]] table per broker")
    nodes, ids = [], set()
    for i, n in enumerate(raw_nodes):
        where = f"node[{i}]"
        bad = sorted(set(n) - NODE_KEYS)
        if bad:
            raise ClusterFileError(f"{where}: unknown key {bad[0]!r} (known: {', '.join(sorted(NODE_KEYS))})")
        missing = [k for k in REQUIRED_NODE if k not in n]
        if missing:
            raise ClusterFileError(f"{where}: missing key {missing[0]!r}")
        nid = n["id"]
        if isinstance(nid, bool) or not isinstance(nid, int) or nid < 0:
            raise ClusterFileError(f"{where}.id: must be the node's Kafka id (an integer >= 0), got {nid!r}")
        if nid in ids:
            raise ClusterFileError(f"{where}.id: {nid} appears twice")
        ids.add(nid)
        if ("partition" in n) != ("heal" in n):
            raise ClusterFileError(f"{where}: partition and heal come together "
                                   f"(missing {'heal' if 'partition' in n else 'partition'!r})")
        cmds = {k: _command(f"{where}.{k}", k, v) for k, v in n.items() if k not in ("id", "timeout_s")}
        t = _timeout(f"{where}.timeout_s", n["timeout_s"]) if "timeout_s" in n else timeout
        nodes.append(Node(nid, cmds, t))
    return ClusterSpec(path, boot.replace(" ", ""), tuple(nodes), timeout, run_cmds.get("setup"),
                       run_cmds.get("teardown"), traces)


def load_cluster_file(path: str | Path) -> ClusterSpec:
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        raise ClusterFileError(f"{path}: cannot read ({e.strerror or e})") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ClusterFileError(f"{path}: not TOML ({e})") from None
    try:
        return parse_cluster(data, str(path))
    except ClusterFileError as e:
        raise ClusterFileError(f"{path}: {e}") from None


def _tail(text: str) -> str:
    text = text.strip()
    return text if len(text) <= OUTPUT_CHARS else "..." + text[-OUTPUT_CHARS:]


@dataclass
class ExternalCluster:
    """The interface runner._Run drives (as impl.cluster.Cluster's), over the file's commands
    and the Kafka protocol. Brokers are numbered by their place in the file (the schedule's
    broker numbers); Metadata's node ids are mapped to those places."""
    spec: ClusterSpec
    out: Path
    paused: set[int] = field(default_factory=set)
    down: set[int] = field(default_factory=set)
    topics: tuple[str, ...] = ()        # the workload's topics (create_topic adds them)
    generation: str = "outside"         # not one of ours: histories record it as such
    _admin: object = None

    def __post_init__(self):
        self.out = Path(self.out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.n = len(self.spec.nodes)
        self.bootstrap = self.spec.bootstrap
        self.hosts = [str(i) for i in range(self.n)]       # partition sides: node places
        self.index_of = {nd.id: i for i, nd in enumerate(self.spec.nodes)}

    # --- commands -------------------------------------------------------------------------------
    def run(self, what: str, template: str, timeout_s: float, **values) -> None:
        cmd = template.format(out=str(self.out.resolve()), **values)
        t0 = time.monotonic()
        try:
            p = subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=timeout_s,
                               stdin=subprocess.DEVNULL, errors="replace")
            code, output = p.returncode, (p.stdout or "") + (p.stderr or "")
        except subprocess.TimeoutExpired as e:
            code = None
            output = "".join(x.decode(errors="replace") if isinstance(x, bytes) else (x or "")
                             for x in (e.stdout, e.stderr))
        secs = time.monotonic() - t0
        with open(self.out / "commands.log", "a", encoding="utf-8") as f:
            f.write(f"$ {cmd}\n# {what}: {'timeout' if code is None else f'exit {code}'} after {secs:.2f}s\n"
                    f"{output}{'' if output.endswith(chr(10)) or not output else chr(10)}")
        if code != 0:
            how = f"did not finish within {timeout_s:g}s" if code is None else f"exited {code}"
            raise CommandFailed(f"cluster command {what} {how}: {cmd}\n"
                                f"its output: {_tail(output) or '(none)'}")

    def node_cmd(self, i: int, key: str, **extra) -> None:
        nd = self.spec.nodes[i]
        self.run(f"{key} (node {nd.id})", nd.commands[key], nd.timeout_s, node=nd.id, index=i, **extra)

    # --- lifecycle ------------------------------------------------------------------------------
    def start(self, timeout_s: float = 60) -> "ExternalCluster":
        if self.spec.setup:
            self.run("setup", self.spec.setup, self.spec.timeout_s)
        self.wait_ready(timeout_s)
        return self

    def stop(self) -> None:
        """Leaves the cluster as it found it: without a teardown command every paused node is
        resumed and every killed one started (best effort: a run cut short by an error)."""
        self.close_admin()
        if self.spec.teardown:
            try:
                self.run("teardown", self.spec.teardown, self.spec.timeout_s)
            except CommandFailed:
                pass         # logged in commands.log; the run's verdict is already decided
            return
        for i in sorted(self.paused):
            try:
                self.resume(i)
            except CommandFailed:
                pass
        for i in sorted(self.down):
            try:
                self.start_broker(i)
            except CommandFailed:
                pass

    def kill(self, i: int) -> None:
        self.node_cmd(i, "kill")
        self.down.add(i)
        self.paused.discard(i)

    def start_broker(self, i: int, wait: bool = False, timeout_s: float = 30) -> None:
        self.node_cmd(i, "start")
        self.down.discard(i)

    def mark_dead_expected(self, i: int) -> None:
        """Nothing to note: the harness knows only what its commands did."""

    def pause(self, i: int) -> None:
        self.node_cmd(i, "pause")
        self.paused.add(i)

    def resume(self, i: int) -> None:
        self.node_cmd(i, "resume")
        self.paused.discard(i)

    def power_loss(self, i: int) -> None:
        """The file's power-loss hook (the node is down afterwards); what it dropped is the
        hook's business: None, not a byte count."""
        self.node_cmd(i, "power_loss")
        self.down.add(i)
        self.paused.discard(i)
        return None

    def alive(self) -> list[int]:
        return [i for i in range(self.n) if i not in self.down]

    # --- what the cluster says (Metadata) -------------------------------------------------------
    def admin(self):
        if self._admin is None:
            from kafka.admin import KafkaAdminClient
            self._admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=ADMIN_TIMEOUT_MS,
                                           client_id="kafkaverify-nemesis")
        return self._admin

    def close_admin(self) -> None:
        if self._admin is not None:
            try:
                self._admin.close()
            except Exception:
                pass
            self._admin = None

    def _ask(self, fn):
        """One admin call; None when the cluster does not answer (a fresh client next time)."""
        try:
            return fn(self.admin())
        except Exception:
            self.close_admin()
            return None

    def _cluster(self) -> dict | None:
        return self._ask(lambda a: a.describe_cluster())

    def _partitions(self, topic: str) -> list[dict] | None:
        got = self._ask(lambda a: a.describe_topics([topic]))
        if not got or got[0].get("error_code", 0):
            return None
        return got[0].get("partitions") or None

    def _place(self, node_id) -> int | None:
        return self.index_of.get(node_id)

    def registered(self) -> set[int]:
        c = self._cluster()
        if not c:
            return set()
        return {self.index_of[b["broker_id"]] for b in c.get("brokers", []) if b["broker_id"] in self.index_of}

    def controller(self) -> int | None:
        c = self._cluster()
        return None if not c else self._place(c.get("controller_id"))

    def leader_of(self, topic: str, partition: int) -> int | None:
        for p in self._partitions(topic) or []:
            if p["partition_index"] == partition:
                return self._place(p["leader_id"]) if p["leader_id"] >= 0 else None
        return None

    def status(self, topic: str | None = None) -> dict:
        parts = []
        for t in ([topic] if topic else self.topics):
            for p in self._partitions(t) or []:
                parts.append({"topic": t, "partition": p["partition_index"], "leader": self._place(p["leader_id"]),
                              "isr": sorted(self.index_of[r] for r in p["isr_nodes"] if r in self.index_of)})
        return {"partitions": parts}

    def is_whole(self) -> bool:
        """Every node in Metadata; every partition of the workload's topics led, with its whole
        replica set in sync."""
        if self.registered() != set(range(self.n)):
            return False
        for t in self.topics:
            ps = self._partitions(t)
            if not ps or any(p["leader_id"] < 0 or sorted(p["isr_nodes"]) != sorted(p["replica_nodes"]) for p in ps):
                return False
        return True

    def wait_ready(self, timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while self.registered() != set(range(self.n)):
            if time.monotonic() > deadline:
                raise ExternalClusterError(f"not every node of {self.spec.path} is in the cluster's Metadata "
                                           f"within {timeout_s:g}s (seen: {sorted(self.registered())})")
            time.sleep(0.2)

    def wait_for_leaders(self, topic: str, timeout_s: float = 20, isr_size: int | None = None) -> dict[int, int]:
        """Every partition led (with isr_size in sync) in Metadata, and its leader answering a
        ListOffsets: Metadata alone can be stale (a broker killed and restarted within its
        session still shows as leader and in the ISR, but serves nothing yet)."""
        deadline = time.monotonic() + timeout_s
        while True:
            ps = self._partitions(topic)
            if ps and all(p["leader_id"] >= 0 and (isr_size is None or len(p["isr_nodes"]) >= isr_size) for p in ps) \
                    and self._serving(topic, [p["partition_index"] for p in ps]):
                return {p["partition_index"]: p["leader_id"] for p in ps}
            if time.monotonic() > deadline:
                raise ExternalClusterError(f"{topic}: not every partition led"
                                           f"{f' with {isr_size} in sync' if isr_size else ''} and answering "
                                           f"within {timeout_s:g}s")
            time.sleep(0.2)

    def _serving(self, topic: str, partitions: list[int]) -> bool:
        """The partitions' leaders answer ListOffsets (a client's end offsets), within seconds."""
        try:
            from kafka import KafkaConsumer, TopicPartition
            c = KafkaConsumer(bootstrap_servers=self.bootstrap, group_id=None, enable_auto_commit=False,
                              request_timeout_ms=ADMIN_TIMEOUT_MS, client_id="kafkaverify-nemesis")
        except Exception:
            return False
        try:
            c.end_offsets([TopicPartition(topic, p) for p in partitions])
            return True
        except Exception:
            return False
        finally:
            c.close()

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 1,
                     min_insync: int | None = None) -> None:
        from kafka.admin import NewTopic
        cfg = {"min.insync.replicas": str(min_insync)} if min_insync else {}
        deadline = time.monotonic() + 30
        while True:
            try:
                self.admin().create_topics([NewTopic(name, partitions, replication_factor, topic_configs=cfg)],
                                           timeout_ms=15000)
                break
            except Exception as e:
                if type(e).__name__ == "TopicAlreadyExistsError":
                    raise ExternalClusterError(f"topic {name} already exists on the cluster") from None
                self.close_admin()
                if time.monotonic() > deadline:
                    raise ExternalClusterError(f"CreateTopics {name} failed: {type(e).__name__}: {e}") from None
                time.sleep(0.5)
        self.topics = tuple(dict.fromkeys((*self.topics, name)))


class ExternalCuts:
    """Partitions through the file's hooks, with NetCuts's interface (impl/netfault.py): a cut
    between places a and b runs node a's `partition` command with b as its peer, and its heal
    node a's `heal` command. Each command is to cut (heal) the traffic both ways."""

    def __init__(self, cluster: ExternalCluster):
        self.c = cluster
        self.cuts: set[tuple[str, str]] = set()

    def setup(self) -> None:
        pass

    def _hook(self, key: str, a: str, b: str) -> None:
        i, j = int(a), int(b)
        self.c.node_cmd(i, key, peer=self.c.spec.nodes[j].id, peer_index=j)

    def cut(self, a: str, b: str) -> None:
        self._hook("partition", a, b)
        self.cuts.add((a, b))

    def heal(self, a: str, b: str) -> None:
        for x, y in ((a, b), (b, a)):
            if (x, y) in self.cuts:
                self._hook("heal", x, y)
                self.cuts.discard((x, y))

    def heal_all(self) -> None:
        for a, b in sorted(self.cuts):
            self.heal(a, b)

    def active(self) -> bool:
        return bool(self.cuts)
