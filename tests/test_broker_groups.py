"""Consumer groups on real brokers with real clients (kafka-python, confluent-kafka, aiokafka),
each member its own process (kafkaverify/groupclient.py): a group of three commits and resumes
exactly at its committed offsets after a restart, rebalances when a member leaves and when one
crashes, and survives kill -9 of its coordinator without committed offsets going backwards.
Every run's history (producer + members + final reads) is judged by `kafkaverify check-history`.

The producer is kafka-python at its defaults (idempotent, acks=all, retries unbounded, 5 in
flight).
"""
from __future__ import annotations

import threading
import time

import pytest

from impl import group_coordinator as gc
from impl.netclient import SyncConn
from impl.protocol import codec
from kafkaverify.groupclient import CLIENTS, MemberProc, check_history, merge_histories
from tests.broker_fixtures import consume_all, make_cluster, producer, wait_until  # noqa: F401
from traces.history_recorder import HistoryRecorder

pytestmark = pytest.mark.timeout(240)

OFFSETS_PARTITIONS = 3
BROKER_CFG = {"offsets_topic_num_partitions": OFFSETS_PARTITIONS, "default_min_insync": 2,
              # short member sessions are allowed so the crash scenario expires one quickly
              "group_min_session_timeout_ms": 1000,
              # Kafka's 3 s initial delay, shortened: members start within ~1 s of each other
              "group_initial_rebalance_delay_ms": 1500}
TOPIC = "t"
WAIT_S = 90                 # bound on each condition; a loaded 2-core box is slow, never hung


class Writer:
    """acks=all sends, recorded as process 0."""

    def __init__(self, cluster, rec: HistoryRecorder):
        from kafka import KafkaProducer
        self.p = KafkaProducer(bootstrap_servers=cluster.bootstrap, request_timeout_ms=15000)
        self.rec, self.n = rec, 0
        self.end: dict[int, int] = {}
        cfg = self.p.config
        assert cfg["enable_idempotence"] and cfg["acks"] == -1       # the defaults under test
        rec.producer_config(process=0, retries=2147483647, idempotence=True, acks="all",
                            max_in_flight=cfg["max_in_flight_requests_per_connection"])

    def send(self, partition: int) -> None:
        v = f"v{self.n}"
        self.n += 1
        op = self.rec.invoke(0, "send", topic=TOPIC, partition=partition, value=v)
        try:
            md = self.p.send(TOPIC, value=v.encode(), partition=partition).get(timeout=20)
        except Exception as e:
            self.rec.info(op, error=type(e).__name__)
            return
        self.rec.ok(op, offset=md.offset)
        self.end[partition] = max(self.end.get(partition, 0), md.offset + 1)

    def rounds(self, n: int, partitions: int = 3) -> None:
        for i in range(n * partitions):
            self.send(i % partitions)


def _ops(events: list[dict]) -> list[dict]:
    """Invoke fields merged with their completion (type = the completion's, or 'open')."""
    inv, out = {}, []
    for e in events:
        if e["type"] == "invoke":
            inv[e["id"]] = e
        else:
            i = inv.pop(e["id"], {})
            out.append({**i, **{k: v for k, v in e.items() if k != "mono_ns"},
                        "inv": i.get("mono_ns"), "done": e["mono_ns"]})
    return out


def committed(members, partition: int) -> int:
    return max((o["offset"] for m in members for o in _ops(m.events())
                if o["f"] == "commit" and o["type"] == "ok" and o["partition"] == partition), default=0)


def assignment(m) -> tuple[int, set[int]]:
    """(latest generation, partitions assigned in it) from a member's history."""
    subs = [o for o in _ops(m.events()) if o["f"] == "subscribe" and o["type"] == "ok"]
    if not subs:
        return -1, set()
    g = max(o["generation"] for o in subs)
    return g, {o["partition"] for o in subs if o["generation"] == g}


def group_formed(members, partitions: int = 3):
    """All members at one generation, sharing every partition, each with at least one."""
    a = [assignment(m) for m in members]
    gens = {g for g, _ in a}
    parts = [ps for _, ps in a]
    if len(gens) == 1 and -1 not in gens and all(parts) and \
            set().union(*parts) == set(range(partitions)) and sum(map(len, parts)) == partitions:
        return gens.pop()
    return None


def final_reads(cluster, rec: HistoryRecorder, partitions: int = 3) -> None:
    for p in range(partitions):
        op = rec.invoke(99, "poll", topic=TOPIC, partition=p, final=True)
        got = consume_all(cluster, TOPIC, p, idle_ms=1000)
        rec.ok(op, offsets=[o for o, _ in got], values=[v.decode() for _, v in got])


def judge(tmp_path, client, rec, members) -> None:
    rec.close()
    merged = merge_histories([rec.path] + [m.history for m in members], tmp_path / "history.jsonl",
                             trace_id=f"groups-{client}", client=client)
    r = check_history(merged)
    assert r.returncode == 0, f"check-history exit {r.returncode} on {merged}:\n{r.stdout}\n{r.stderr}"


def member(c, tmp_path, client, group, process, **kw) -> MemberProc:
    return MemberProc(client, c.bootstrap, TOPIC, group, process, tmp_path / f"member-{process}.jsonl",
                      log=tmp_path / f"member-{process}.log", **kw)


@pytest.fixture
def stop_all():
    procs: list[MemberProc] = []
    yield procs
    for m in procs:
        m.kill()


@pytest.mark.parametrize("client", CLIENTS)
def test_group_commits_resumes_and_rebalances(make_cluster, tmp_path, stop_all, client):
    c = make_cluster(3, broker_config=BROKER_CFG)
    c.create_topic(TOPIC, partitions=3, replication_factor=3, min_insync=2)
    rec = HistoryRecorder(tmp_path / "producer.jsonl", trace_id="producer", client=client)
    w = Writer(c, rec)
    group = f"g-{client}"
    w.rounds(20)

    # 1. a group of three consumes everything and commits it; then it stops (LeaveGroup)
    first = [member(c, tmp_path, client, group, i) for i in (1, 2, 3)]
    stop_all += first
    wait_until(lambda: group_formed(first), WAIT_S, 0.2, "a generation with three members")
    wait_until(lambda: all(committed(first, p) == 20 for p in range(3)), WAIT_S, 0.2, "commits up to 20")
    for m in first:
        assert m.stop() == 0
    w.rounds(10)

    # 2. the restarted group resumes exactly at the committed offsets
    second = [member(c, tmp_path, client, group, 4), member(c, tmp_path, client, group, 5),
              member(c, tmp_path, client, group, 6, session_timeout_ms=2000)]
    stop_all += second
    g1 = wait_until(lambda: group_formed(second), WAIT_S, 0.2, "the restarted group of three")
    wait_until(lambda: all(committed(second, p) == 30 for p in range(3)), WAIT_S, 0.2, "commits up to 30")
    for p in range(3):
        polls = sorted((o for m in second for o in _ops(m.events())
                        if o["f"] == "poll" and o["partition"] == p and o.get("offsets")), key=lambda o: o["inv"])
        assert polls[0]["offsets"][0] == 20, f"partition {p}: resumed at {polls[0]['offsets'][0]}, committed 20"
        assert min(min(o["offsets"]) for o in polls) == 20

    # 3. a member leaves: the other two share its partition in a newer generation
    m4, m5, m6 = second
    assert m5.stop() == 0
    g2 = wait_until(lambda: group_formed([m4, m6]), WAIT_S, 0.2, "rebalance after LeaveGroup")
    assert g2 > g1
    w.rounds(5)
    wait_until(lambda: all(committed(second, p) == 35 for p in range(3)), WAIT_S, 0.2, "commits up to 35")

    # 4. a member crashes (kill -9, no LeaveGroup): its session expires, the last one takes all
    m6.kill()
    g3 = wait_until(lambda: (g := group_formed([m4])) and g > g2 and g, WAIT_S, 0.2, "rebalance after session expiry")
    assert g3 > g2
    w.rounds(5)
    wait_until(lambda: all(committed(second, p) == 40 for p in range(3)), WAIT_S, 0.2, "commits up to 40")
    assert m4.stop() == 0
    final_reads(c, rec)
    judge(tmp_path, client, rec, first + second)


def ensure_offsets_topic(c) -> None:
    """The first FindCoordinator creates __consumer_offsets; wait until every partition has its
    full ISR, so that the coordinator's death leaves two in-sync copies of every commit."""
    def found():
        with SyncConn(*c.address(0)) as conn:
            return conn.request(10, 1, {"key": "probe", "key_type": 0}).error_code == 0
    wait_until(found, WAIT_S, 0.1, "FindCoordinator to succeed")
    c.wait_for_leaders("__consumer_offsets", timeout_s=WAIT_S, isr_size=3)


def offset_fetch(c, group: str) -> dict[int, int] | None:
    """The group's committed offsets of TOPIC from its current coordinator, or None while there
    is none (dead, electing, loading)."""
    for i in c.alive():
        try:
            with SyncConn(*c.address(i)) as conn:
                r = conn.request(10, 3, {"key": group, "key_type": 0})
                if r.error_code or r.node_id not in c.alive():
                    continue
            with SyncConn(*c.address(r.node_id)) as conn:
                f = conn.request(9, 7, {"group_id": group, "topics": [{"name": TOPIC, "partition_indexes": [0, 1, 2]}],
                                        "require_stable": False})
            if f.error_code == 0:
                return {p.partition_index: p.committed_offset for t in f.topics for p in t.partitions}
        except OSError:
            continue
    return None


@pytest.mark.parametrize("client", CLIENTS)
def test_coordinator_kill_during_commits(make_cluster, tmp_path, stop_all, client):
    c = make_cluster(3, broker_config=BROKER_CFG)
    group = f"failover-{client}"
    ensure_offsets_topic(c)
    coord = c.leader_of("__consumer_offsets", gc.partition_for(group, OFFSETS_PARTITIONS))
    a, b = [i for i in range(3) if i != coord]
    # data partitions are led away from the coordinator: its death moves only the group
    c.create_topic(TOPIC, assignment={0: [a, b, coord], 1: [b, a, coord], 2: [a, b, coord]}, min_insync=2)
    c.wait_for_leaders(TOPIC, timeout_s=WAIT_S, isr_size=3)
    rec = HistoryRecorder(tmp_path / "producer.jsonl", trace_id="producer", client=client)
    w = Writer(c, rec)
    w.rounds(5)
    members = [member(c, tmp_path, client, group, i) for i in (1, 2, 3)]
    stop_all += members
    wait_until(lambda: group_formed(members), WAIT_S, 0.2, "a generation with three members")

    stop = threading.Event()

    def produce():
        while not stop.is_set():
            w.send(w.n % 3)
            time.sleep(0.02)

    def producing() -> threading.Thread:
        stop.clear()
        t = threading.Thread(target=produce, daemon=True)
        t.start()
        return t
    t = producing()
    try:
        wait_until(lambda: all(committed(members, p) >= 15 for p in range(3)), WAIT_S, 0.1, "commits flowing")
        # the last records' commits are in flight when the coordinator dies; nothing newer is
        # produced until the new coordinator has answered, so what it loaded can be compared
        stop.set()
        t.join(30)
        killed_at = time.monotonic_ns()
        c.kill(coord)
        loaded = wait_until(lambda: offset_fetch(c, group), WAIT_S, 0.1, "OffsetFetch from the new coordinator")
        acked = {p: max((o["offset"] for m in members for o in _ops(m.events()) if o["f"] == "commit" and
                         o["type"] == "ok" and o["partition"] == p and o["done"] < killed_at), default=-1)
                 for p in range(3)}
        assert all(loaded[p] >= acked[p] for p in range(3)), f"committed offsets went back: {loaded} < {acked}"
        t = producing()
        wait_until(lambda: any(o["f"] == "commit" and o["type"] == "ok" and o["inv"] > killed_at
                               for m in members for o in _ops(m.events())), WAIT_S, 0.1,
                   "a successful commit after the coordinator was killed")
        new_coord = c.leader_of("__consumer_offsets", gc.partition_for(group, OFFSETS_PARTITIONS))
        assert new_coord is not None and new_coord != coord
    finally:
        stop.set()
        t.join(30)
    wait_until(lambda: all(committed(members, p) >= w.end[p] for p in range(3)), WAIT_S, 0.2,
               f"commits up to the end {w.end}")
    for m in members:
        assert m.stop() == 0
    final_reads(c, rec)
    judge(tmp_path, client, rec, members)


def test_group_apis_on_the_wire(make_cluster):
    """The whole classic protocol by hand, at the newest advertised versions, on the coordinator
    and on a broker that is not it; then the admin clients' views of the group."""
    c = make_cluster(3, broker_config=BROKER_CFG)
    c.create_topic(TOPIC, partitions=2, replication_factor=3, min_insync=2)
    ensure_offsets_topic(c)
    group = "wire"
    coord = c.leader_of("__consumer_offsets", gc.partition_for(group, OFFSETS_PARTITIONS))
    other = (coord + 1) % 3
    with SyncConn(*c.address(other)) as conn:
        r = conn.request(10, 3, {"key": group, "key_type": 0})
        assert (r.error_code, r.node_id, r.port) == (0, coord, c.ports[coord])
        r = conn.request(11, 5, {"group_id": group, "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000,
                                 "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
                                 "protocols": [{"name": "range", "metadata": b"m"}]})
        assert r.error_code == codec.NOT_COORDINATOR
    join = {"group_id": group, "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000, "member_id": "",
            "group_instance_id": None, "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b"m"}]}
    with SyncConn(*c.address(coord)) as conn:
        r = conn.request(11, 5, join)
        assert r.error_code == codec.MEMBER_ID_REQUIRED and r.member_id
        mid = r.member_id
        r = conn.request(11, 5, dict(join, member_id=mid))        # waits the initial delay
        assert (r.error_code, r.leader, r.member_id, r.protocol_name) == (0, mid, mid, "range")
        gen = r.generation_id
        assert gen == 1 and [m.member_id for m in r.members] == [mid]
        r = conn.request(14, 3, {"group_id": group, "generation_id": gen, "member_id": mid, "group_instance_id": None,
                                 "assignments": [{"member_id": mid, "assignment": b"asg"}]})
        assert (r.error_code, bytes(r.assignment)) == (0, b"asg")
        assert conn.request(12, 3, {"group_id": group, "generation_id": gen, "member_id": mid,
                                    "group_instance_id": None}).error_code == 0
        assert conn.request(12, 3, {"group_id": group, "generation_id": gen - 1, "member_id": mid,
                                    "group_instance_id": None}).error_code == codec.ILLEGAL_GENERATION

        def commit(generation, offset, member=mid):
            r = conn.request(8, 8, {"group_id": group, "generation_id_or_member_epoch": generation, "member_id": member,
                                    "group_instance_id": None, "topics": [{"name": TOPIC, "partitions": [
                                        {"partition_index": 0, "committed_offset": offset, "committed_leader_epoch": -1,
                                         "committed_metadata": "md"}]}]})
            return r.topics[0].partitions[0].error_code
        assert commit(gen, 7) == 0
        assert commit(gen + 1, 9) == codec.ILLEGAL_GENERATION
        assert commit(gen, 9, member="stranger") == codec.UNKNOWN_MEMBER_ID
        r = conn.request(9, 7, {"group_id": group, "topics": None, "require_stable": False})
        assert r.error_code == 0
        assert [(t.name, p.partition_index, p.committed_offset, p.metadata) for t in r.topics for p in t.partitions] == \
            [(TOPIC, 0, 7, "md")]
        r = conn.request(16, 4, {"states_filter": []})
        assert [(g.group_id, g.group_state) for g in r.groups] == [(group, "Stable")]
        r = conn.request(15, 5, {"groups": [group, "nobody"], "include_authorized_operations": False})
        assert [(g.group_id, g.group_state, len(g.members)) for g in r.groups] == [(group, "Stable", 1), ("nobody", "Dead", 0)]
        assert bytes(r.groups[0].members[0].member_assignment) == b"asg"
        assert conn.request(13, 1, {"group_id": group, "member_id": mid}).error_code == 0
        r = conn.request(15, 5, {"groups": [group], "include_authorized_operations": False})
        assert r.groups[0].group_state == "Empty"

    from kafka.admin import KafkaAdminClient
    admin = KafkaAdminClient(bootstrap_servers=c.bootstrap)
    try:
        listed = admin.list_groups()
        print("kafka-python list_groups:", listed)
        assert [(g["group_id"], g["protocol_type"]) for g in listed] == [(group, "consumer")]
        offs = admin.list_group_offsets({group: None})
        print("kafka-python list_group_offsets:", offs)
        assert "7" in str(offs)
        described = admin.describe_groups([group])
        print("kafka-python describe_groups:", described)
        assert "Empty" in str(described)
    finally:
        admin.close()
    import confluent_kafka.admin as cka
    a = cka.AdminClient({"bootstrap.servers": c.bootstrap})
    listed = a.list_consumer_groups(request_timeout=20).result(30)
    assert group in [g.group_id for g in listed.valid]
    d = a.describe_consumer_groups([group], request_timeout=20)[group].result(30)
    assert d.group_id == group and str(d.state).endswith("EMPTY")
