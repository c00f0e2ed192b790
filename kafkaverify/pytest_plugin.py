"""kafkaverify as a pytest plugin (entry point `pytest11`, so installing kafkaverify makes it
available): a real compact-broker cluster for a test, a fault handle to break it, and a history
recorder wired to the test's own Kafka clients, checked when the test body ends.

    @pytest.mark.kafka_cluster(brokers=3, scope="module")
    def test_orders_survive_a_leader_crash(kafka_cluster, kafka_faults, kafka_history, kafka_topic):
        topic = kafka_topic(partitions=1, replication_factor=3, min_insync=2)
        producer = kafka_history.producer(KafkaProducer(bootstrap_servers=kafka_cluster.bootstrap, ...))
        ...
        kafka_faults.crash(leader_of=(topic, 0))
        ...
    # at the end: faults healed, every touched partition read from 0 (final reads), the history
    # checked; an anomaly fails the test with its witness and the path of the HTML report.

Fixtures (function scope; the cluster's lifetime is the marker's `scope`):
  kafka_cluster          impl.cluster.Cluster, per @pytest.mark.kafka_cluster(brokers=1,
                         generation=None, coordinator=None, scope="function"|"module"|"session",
                         **broker_config); a shared cluster is healed after each test
  kafka_cluster_factory  make(brokers=1, generation=None, coordinator=None, **broker_config):
                         more clusters for one test, stopped at its end
  kafka_faults           kafkaverify.plugin.fault_handle.FaultHandle on kafka_cluster, seeded
  kafka_history          kafkaverify.plugin.client_history.ClientHistory: .producer(p), .consumer(c, ...)
  kafka_topic            make(partitions=1, replication_factor=None, min_insync=1) -> a fresh
                         topic name, created and led
  kafkaverify_seed       the run's seed (int)
Options: --kafkaverify-generation (default current), --kafkaverify-seed (default: drawn and
printed in the header), --kafkaverify-coordinator (embedded or zk://HOST:PORT[/chroot]),
--kafkaverify-cluster FILE (any Kafka-compatible cluster, docs/any-cluster.md: kafka_cluster is
then that cluster -- set up once for the session by the file's commands, faulted by them, healed
after each test -- and the marker's brokers / generation / broker config do not apply;
kafka_cluster_factory still makes clusters of our own broker).

Cheap when unused (every pytest run in an environment with kafkaverify installed loads it):
importing this module imports pytest and a few light project modules; the cluster (with
kafka-python) and the history checkers (with networkx) are imported by the fixtures and hooks
that need them, and the hooks do nothing for tests without them. Its parts: the fault handle
(kafkaverify/plugin/fault_handle.py) and the history recorder (kafkaverify/plugin/client_history.py).
"""
from __future__ import annotations

import itertools
import os
import random
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from checkers.history.report_html import render
from impl.rules import fixes_for
from kafkaverify.plugin.client_history import ClientHistory
from kafkaverify.plugin.fault_handle import FaultHandle
from traces.history import load

SCOPES = ("function", "module", "session")
WITNESSES_SHOWN = 3
_SEED_KEY = "kafkaverify_seed"
# Per-run and per-test state kept in pytest's stashes.
_seed = pytest.StashKey[int]()                 # config: the run's seed
_pool = pytest.StashKey["ClusterPool"]()       # config: started clusters
_faults = pytest.StashKey[Any]()               # item: the test's FaultHandle
_history = pytest.StashKey[Any]()              # item: the test's ClientHistory
_topics = pytest.StashKey[list]()              # item: topics kafka_topic created
_reported = pytest.StashKey[bool]()            # item: our check failed it (its message says all)
_outside = pytest.StashKey[Any]()              # config: --kafkaverify-cluster's ClusterSpec


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("kafkaverify", "kafkaverify: real Kafka-style cluster fixtures")
    g.addoption("--kafkaverify-generation", default=None, metavar="GEN",
                help="protocol generation of the clusters (v0.10, kip-101, kip-279, kip-320, current)")
    g.addoption("--kafkaverify-seed", type=int, default=None, metavar="N",
                help="seed of every random choice the fixtures make (default: drawn, printed)")
    g.addoption("--kafkaverify-coordinator", default=None, metavar="URL",
                help="coordination service of the clusters: embedded (default) or zk://HOST:PORT[/chroot]")
    g.addoption("--kafkaverify-cluster", default=None, metavar="FILE",
                help="TOML file of any Kafka-compatible cluster and the commands that fault it "
                     "(docs/any-cluster.md): kafka_cluster is that cluster")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "kafka_cluster(brokers=1, generation=None, coordinator=None, scope='function', "
                   "**broker_config): the cluster the kafka_cluster fixture starts")
    seed = config.getoption("kafkaverify_seed")
    if seed is None and hasattr(config, "workerinput"):       # an xdist worker: the controller's
        seed = config.workerinput.get(_SEED_KEY)
    if seed is None:
        seed = random.SystemRandom().randrange(1 << 31)
    config.stash[_seed] = seed
    path = config.getoption("kafkaverify_cluster")
    if path is not None:
        from kafkaverify.nemesis.cluster_file import ClusterFileError, load_cluster_file
        try:
            config.stash[_outside] = load_cluster_file(path)
        except ClusterFileError as e:   # a usage error, said once, naming the key
            raise pytest.UsageError(f"--kafkaverify-cluster: {e}") from None
    gen = config.getoption("kafkaverify_generation")
    if gen is not None:
        try:
            fixes_for(gen)
        except Exception as e:          # a usage error, said once, not a traceback per test
            raise pytest.UsageError(f"--kafkaverify-generation: {e}") from None


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist: every worker uses the controller's seed."""
    node.workerinput[_SEED_KEY] = node.config.stash[_seed]


def pytest_report_header(config: pytest.Config) -> str:
    # STYLE 4: the run says its seed first, so any run can be repeated.
    return (f"kafkaverify: seed={config.stash[_seed]} "
            f"generation={config.getoption('kafkaverify_generation') or 'current'}")


# --- clusters ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ClusterSpec:
    brokers: int
    generation: str
    coordinator: str
    scope: str
    config: tuple                   # sorted (key, value) pairs of broker configuration

    def describe(self) -> str:
        cfg = "".join(f", {k}={v!r}" for k, v in self.config)
        return f"{self.brokers} broker(s), generation {self.generation}, coordinator {self.coordinator}{cfg}"


def _spec(config: pytest.Config, brokers: int = 1, generation: str | None = None,
          coordinator: str | None = None, scope: str = "function", **broker_config: Any) -> ClusterSpec:
    if scope not in SCOPES:
        raise pytest.UsageError(f"kafka_cluster scope must be one of {', '.join(SCOPES)}, got {scope!r}")
    return ClusterSpec(int(brokers),
                       generation or config.getoption("kafkaverify_generation") or "current",
                       coordinator or config.getoption("kafkaverify_coordinator") or "embedded",
                       scope, tuple(sorted(broker_config.items())))


class ClusterPool:
    """Started clusters by spec (and module, for module scope); the shared ones outlive a test.
    Bounded by the specs a run uses; everything is stopped at the end of its scope."""

    def __init__(self, tmp_factory: pytest.TempPathFactory):
        self.tmp = tmp_factory
        self.shared: dict[tuple, Any] = {}
        self._n = itertools.count()

    def start(self, spec: ClusterSpec) -> Any:
        # lazy: the cluster imports kafka-python's protocol codecs, loaded only for a test that
        # asks for a cluster
        from impl.cluster import Cluster
        cfg = dict(spec.config)
        session_ms = cfg.pop("session_timeout_ms", 3000)
        c = Cluster(spec.brokers, self.tmp.mktemp(f"kafka-cluster{next(self._n)}"), generation=spec.generation,
                    coordinator=spec.coordinator, broker_config=cfg, session_timeout_ms=session_ms)
        try:
            c.start()
        except Exception:
            c.stop()
            raise
        return c

    def get(self, spec: ClusterSpec, module: str) -> Any:
        key = (spec, module if spec.scope == "module" else "")
        if key not in self.shared:
            self.shared[key] = self.start(spec)
        return self.shared[key]

    def outside(self, spec: Any) -> Any:
        """The cluster file's cluster, set up on first use and shared by the whole session."""
        key = ("outside", spec.path)
        if key not in self.shared:
            from kafkaverify.nemesis.cluster_file import ExternalCluster
            c = ExternalCluster(spec, self.tmp.mktemp("outside-cluster"))
            try:
                c.start()
            except Exception:
                c.stop()
                raise
            self.shared[key] = c
        return self.shared[key]

    def stop_module(self, module: str) -> None:
        for key in [k for k in self.shared if k[0] != "outside" and k[0].scope == "module" and k[1] == module]:
            self.shared.pop(key).stop()

    def stop_all(self) -> None:
        for key in sorted(self.shared, key=str):
            self.shared.pop(key).stop()


def _pool(config: pytest.Config, tmp_factory: pytest.TempPathFactory) -> ClusterPool:
    if _pool not in config.stash:
        config.stash[_pool] = ClusterPool(tmp_factory)
    return config.stash[_pool]


@pytest.hookimpl(trylast=True)          # after the test's own fixtures were torn down
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    pool = item.config.stash.get(_pool, None)
    if pool is None:
        return
    mod = getattr(item, "module", None)
    if nextitem is None or getattr(nextitem, "module", None) is not mod:
        pool.stop_module(getattr(mod, "__name__", ""))


def pytest_unconfigure(config: pytest.Config) -> None:
    pool = config.stash.get(_pool, None)
    if pool is not None:
        pool.stop_all()


@pytest.fixture
def kafkaverify_seed(request: pytest.FixtureRequest) -> int:
    return request.config.stash[_seed]


@pytest.fixture
def kafka_cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    outside = request.config.stash.get(_outside, None)
    if outside is not None:
        yield _pool(request.config, tmp_path_factory).outside(outside)
        faults = request.node.stash.get(_faults, None)
        if faults is not None:
            faults.heal()
        return
    m = request.node.get_closest_marker("kafka_cluster")
    spec = _spec(request.config, *(m.args if m else ()), **(m.kwargs if m else {}))
    pool = _pool(request.config, tmp_path_factory)
    if spec.scope == "function":
        c = pool.start(spec)
        yield c
        c.stop()
    else:
        c = pool.get(spec, request.node.module.__name__)
        yield c
        # The next test gets a whole cluster: undo this test's faults (bounded by the handle).
        faults = request.node.stash.get(_faults, None)
        if faults is not None:
            faults.heal()


@pytest.fixture
def kafka_cluster_factory(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    pool = _pool(request.config, tmp_path_factory)
    made = []

    def make(brokers: int = 1, generation: str | None = None, coordinator: str | None = None, **cfg: Any):
        c = pool.start(_spec(request.config, brokers, generation, coordinator, "function", **cfg))
        made.append(c)
        return c
    yield make
    for c in made:
        c.stop()


@pytest.fixture
def kafka_faults(request: pytest.FixtureRequest, kafka_cluster, kafkaverify_seed: int):
    h = FaultHandle(kafka_cluster, seed=kafkaverify_seed)
    request.node.stash[_faults] = h
    return h


@pytest.fixture
def kafka_topic(request: pytest.FixtureRequest, kafka_cluster):
    names = itertools.count()
    base = "".join(ch if ch.isalnum() else "-" for ch in request.node.name)[:32].strip("-") or "t"

    def make(partitions: int = 1, replication_factor: int | None = None, min_insync: int = 1, **kw: Any) -> str:
        name = f"{base}-{os.getpid()}-{next(names)}"
        kafka_cluster.create_topic(name, partitions=partitions,
                                   replication_factor=replication_factor or min(3, kafka_cluster.n),
                                   min_insync=min_insync, **kw)
        request.node.stash.setdefault(_topics, []).append(name)
        return name
    return make


@pytest.fixture
def kafka_history(request: pytest.FixtureRequest, kafka_cluster, kafkaverify_seed: int, tmp_path: Path):
    h = ClientHistory(tmp_path / "history.jsonl", trace_id=request.node.nodeid, seed=kafkaverify_seed,
                      generation=kafka_cluster.generation, brokers=kafka_cluster.n)
    request.node.stash[_history] = h
    yield h
    h.close()


# --- the check at the end of the test body ---------------------------------------------------------
@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    result = yield                      # a failing test body raises here and is reported as is
    hist = item.stash.get(_history, None)
    if hist is not None:
        _check_recorded(item, hist)
    return result


def _reproduce(item: pytest.Item) -> str:
    cfg = item.config
    parts = ["pytest", shlex.quote(item.nodeid), f"--kafkaverify-seed {cfg.stash[_seed]}"]
    for opt in ("generation", "coordinator", "cluster"):
        v = cfg.getoption(f"kafkaverify_{opt}")
        if v:
            parts.append(f"--kafkaverify-{opt} {shlex.quote(v)}")
    return " ".join(parts)


def _check_recorded(item: pytest.Item, hist: Any) -> None:
    """Heal, read every touched partition to its end, check the history. Invalid or unknown
    fails the test with the witnesses, the report's path and the command that reproduces it."""
    if not hist.touched:
        return                          # the test recorded nothing: nothing to judge
    cluster = item.funcargs["kafka_cluster"]
    faults = item.stash.get(_faults, None)
    if faults is not None:
        faults.heal(topics=tuple(sorted({t for t, _ in hist.touched})))
    problems = hist.final_reads(cluster.bootstrap)
    # lazy: the history checkers import networkx, loaded only for a test that recorded a history
    from checkers.history.oracle.check import check_history
    h = load(hist.path)
    verdict = check_history(h)
    if verdict.status == "valid":
        return
    report = hist.path.with_suffix(".html")
    report.write_text(render(h, verdict, title=item.nodeid), encoding="utf-8")
    by_id = h.by_id()
    lines = [f"kafkaverify: the recorded history is {verdict.status.upper()} "
             f"({len(h.ops)} operations; seed={item.config.stash[_seed]}, generation={cluster.generation})"]
    # one anomaly of each type first: the reader sees every kind of trouble before repeats
    firsts: dict[str, Any] = {}
    for a in verdict.anomalies:
        firsts.setdefault(a.type, a)
    shown = (list(firsts.values()) + [a for a in verdict.anomalies if a not in firsts.values()])[:WITNESSES_SHOWN]
    for a in shown:
        lines.append(f"{a.type}: {a.explanation}")
        lines += [f"    {by_id[i].describe()}" for i in a.witness if i in by_id]
    if len(verdict.anomalies) > WITNESSES_SHOWN:
        lines.append(f"... and {len(verdict.anomalies) - WITNESSES_SHOWN} more anomalies")
    if verdict.status == "unknown":
        lines += [f"{c.name}: unknown ({c.reason})" for c in verdict.checks if c.status == "unknown" and c.limited]
        lines += [f"final read incomplete: {p}" for p in problems]
    if faults is not None and faults.log:
        lines.append("faults: " + "; ".join(faults.log))
    lines += [f"HTML report: {report}", f"history: {hist.path}", f"reproduce: {_reproduce(item)}"]
    item.stash[_reported] = True
    pytest.fail("\n".join(lines), pytrace=False)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any):
    report = yield
    # A failure of the test's own making: add the seed and the faults (our check says them itself).
    if report.failed and (_history in item.stash or _faults in item.stash) and _reported not in item.stash:
        faults = item.stash.get(_faults, None)
        extra = f"\nfaults: {'; '.join(faults.log)}" if faults is not None and faults.log else ""
        report.sections.append(("kafkaverify", f"seed={item.config.stash[_seed]}  reproduce: "
                                               f"{_reproduce(item)}{extra}"))
    return report
