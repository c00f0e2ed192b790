"""The admin surface test harnesses call: DescribeConfigs (topic and broker resources),
DeleteTopics, CreatePartitions, DescribeCluster; and the broker side of a topic's deletion.

DescribeConfigs reports the configs this broker really applies, under Kafka's names: per topic
the two stored in its coordination node (min.insync.replicas, unclean.leader.election.enable,
source DYNAMIC_TOPIC_CONFIG) and the broker-wide log settings every partition uses
(cleanup.policy=delete, retention.ms/bytes, segment.bytes, flush.messages/ms; source
STATIC_BROKER_CONFIG or DEFAULT_CONFIG); per broker the broker's settings.

DeleteTopics removes the topic's coordination nodes (state nodes, then the topic node); every
broker sees it leave `/brokers/topics` and `forget_topic` drops its replicas and their data, the
controller forgets the topic (so a topic of the same name can be created again).
CreatePartitions extends the assignment in the topic node (compare-and-set on its version); the
controller's data watch on that node creates the new partitions' state and leaders.
"""
from __future__ import annotations

import json
import logging
import shutil

from impl.protocol import codec

log = logging.getLogger("impl.admin")

TOPIC, BROKER = 2, 4                                  # DescribeConfigs resource types
DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5
CONFIG_TYPES = {bool: 1, str: 2, int: 5}              # BOOLEAN, STRING, LONG
INVALID_CONFIG = 40


def _v(x) -> str | None:
    if x is None:
        return "-1"                                   # Kafka's "unbounded"
    return str(x).lower() if isinstance(x, bool) else str(x)


def topic_configs(b, a: dict) -> list[tuple[str, object, int]]:
    """(name, value, source) of a topic, as the broker applies them."""
    cfg = a.get("config", {})
    lc = b.log_config
    src = lambda field, default: DEFAULT_CONFIG if getattr(lc, field) == default else STATIC_BROKER_CONFIG  # noqa: E731
    return [
        ("min.insync.replicas", int(cfg.get("min.insync.replicas", 1)), DYNAMIC_TOPIC_CONFIG),
        ("unclean.leader.election.enable", bool(cfg.get("unclean.leader.election.enable", False)),
         DYNAMIC_TOPIC_CONFIG),
        ("cleanup.policy", str(cfg.get("cleanup.policy", "delete")),
         DYNAMIC_TOPIC_CONFIG if "cleanup.policy" in cfg else DEFAULT_CONFIG),
        ("retention.ms", lc.retention_ms, src("retention_ms", None)),
        ("retention.bytes", lc.retention_bytes, src("retention_bytes", None)),
        ("segment.bytes", lc.segment_bytes, src("segment_bytes", 64 << 20)),
        ("flush.messages", lc.flush_messages, src("flush_messages", None)),
        ("flush.ms", lc.flush_ms, src("flush_ms", None)),
    ]


def broker_configs(b) -> list[tuple[str, object, int]]:
    c, lc = b.cfg, b.log_config
    return [(n, v, STATIC_BROKER_CONFIG) for n, v in (
        ("broker.id", c.node_id), ("min.insync.replicas", c.default_min_insync),
        ("default.replication.factor", c.default_replication_factor), ("num.partitions", c.default_partitions),
        ("auto.create.topics.enable", c.auto_create_topics),
        ("unclean.leader.election.enable", c.unclean_leader_election),
        ("replica.lag.time.max.ms", c.replica_lag_time_max_ms),
        ("replica.fetch.wait.max.ms", c.replica_fetch_wait_ms),
        ("zookeeper.session.timeout.ms", c.session_timeout_ms),
        ("log.segment.bytes", lc.segment_bytes), ("log.retention.ms", lc.retention_ms),
        ("log.retention.bytes", lc.retention_bytes), ("log.flush.interval.messages", lc.flush_messages),
        ("log.flush.interval.ms", lc.flush_ms), ("log.cleanup.policy", "delete"))]


async def describe_configs(b, req, version):
    results = []
    for r in req.resources:
        out = {"error_code": 0, "error_message": None, "resource_type": r.resource_type,
               "resource_name": r.resource_name, "configs": []}
        results.append(out)
        if r.resource_type == TOPIC:
            a = b.topic_assignments.get(r.resource_name)
            if not a:
                out["error_code"] = codec.UNKNOWN_TOPIC_OR_PARTITION
                out["error_message"] = f"topic {r.resource_name!r} does not exist"
                continue
            entries = topic_configs(b, a)
        elif r.resource_type == BROKER:
            if r.resource_name not in ("", str(b.id)):
                out["error_code"] = codec.INVALID_REQUEST
                out["error_message"] = f"broker {r.resource_name} must be asked itself (this is broker {b.id})"
                continue
            entries = broker_configs(b)
        else:
            out["error_code"] = codec.INVALID_REQUEST
            out["error_message"] = f"resource type {r.resource_type} is not supported (topic 2, broker 4)"
            continue
        names = set(r.configuration_keys) if r.configuration_keys else None
        for name, value, source in entries:
            if names is not None and name not in names:
                continue
            out["configs"].append({
                "name": name, "value": _v(value), "read_only": r.resource_type == BROKER,
                "config_source": source, "is_default": source == DEFAULT_CONFIG, "is_sensitive": False,
                "synonyms": [{"name": name, "value": _v(value), "source": source}] if req.include_synonyms else [],
                "config_type": CONFIG_TYPES.get(type(value), 5), "documentation": None})
    return {"throttle_time_ms": 0, "results": results}


async def describe_cluster(b, req, version):
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "endpoint_type": 1,
            "cluster_id": "kafkaverify-cluster", "controller_id": b.controller_id,
            "brokers": [{"broker_id": i, "host": h, "port": p, "rack": None}
                        for i, (h, p) in sorted(b.live_brokers.items())],
            "cluster_authorized_operations": -2147483648}


async def delete_topics(b, req, version):
    out = []
    for name in req.topic_names:
        code = 0
        try:
            a = json.loads((await b.cc("get", b.path(f"/brokers/topics/{name}")))[0])
            base = f"/brokers/topics/{name}/partitions"
            for pi in sorted(a["partitions"], key=int):
                for p in (f"{base}/{pi}/state", f"{base}/{pi}"):
                    try:
                        await b.cc("delete", b.path(p))
                    except Exception as e:
                        if e.__class__.__name__ != "NoNode":
                            raise
            try:
                await b.cc("delete", b.path(base))
            except Exception as e:
                if e.__class__.__name__ != "NoNode":
                    raise
            await b.cc("delete", b.path(f"/brokers/topics/{name}"))
        except Exception as e:
            code = codec.UNKNOWN_TOPIC_OR_PARTITION if e.__class__.__name__ == "NoNode" else codec.REQUEST_TIMED_OUT
            if code == codec.REQUEST_TIMED_OUT:
                log.warning("broker %d: deleting topic %s failed: %s", b.id, name, e)
        out.append({"name": name, "error_code": code, "error_message": None})
    return {"throttle_time_ms": 0, "responses": out}


async def create_partitions(b, req, version):
    results = []
    for t in req.topics:
        res = {"name": t.name, "error_code": 0, "error_message": None}
        results.append(res)
        path = b.path(f"/brokers/topics/{t.name}")
        try:
            data, ver = await b.cc("get", path)
        except Exception:
            res["error_code"] = codec.UNKNOWN_TOPIC_OR_PARTITION
            continue
        a = json.loads(data)
        parts = a["partitions"]
        have, rf = len(parts), len(next(iter(parts.values())))
        live = sorted(b.live_brokers)
        if t.count <= have:
            res["error_code"], res["error_message"] = codec.INVALID_PARTITIONS, \
                f"topic has {have} partitions; the new count must be larger"
            continue
        if t.assignments:
            new = [list(x.broker_ids) for x in t.assignments]
            if len(new) != t.count - have or any(len(r) != rf or len(set(r)) != rf or not set(r) <= set(live)
                                                 for r in new):
                res["error_code"] = codec.INVALID_REQUEST     # Kafka: INVALID_REPLICA_ASSIGNMENT
                res["error_message"] = "assignments must name rf distinct live brokers per new partition"
                continue
        elif rf > len(live):
            res["error_code"] = codec.INVALID_REPLICATION_FACTOR
            continue
        else:
            start = sum(map(ord, t.name)) % len(live)
            new = [[live[(start + i + j) % len(live)] for j in range(rf)] for i in range(have, t.count)]
        if req.validate_only:
            continue
        for i, r in enumerate(new):
            parts[str(have + i)] = r
        try:
            await b.cc("set", path, json.dumps(a, sort_keys=True).encode(), ver)
        except Exception as e:
            res["error_code"] = codec.REQUEST_TIMED_OUT      # a concurrent change: the client retries
            res["error_message"] = f"{e.__class__.__name__}"
            continue
        if not await b.wait_for_topic(t.name, req.timeout_ms):
            res["error_code"] = codec.REQUEST_TIMED_OUT
    return {"throttle_time_ms": 0, "results": results}


def forget_topic(b, name: str) -> None:
    """The topic left `/brokers/topics`: drop its metadata and replicas, delete their data
    (Kafka's StopReplica with delete). Pending acks=all produces fail with NOT_LEADER."""
    b.topic_assignments.pop(name, None)
    for key in [k for k in b.partition_states if k[0] == name]:
        b.partition_states.pop(key, None)
    for key in [k for k in b.partitions if k[0] == name]:
        p = b.partitions.pop(key)
        p.role = None
        if p.fetcher:
            p.fetcher.cancel()
        for _, fut in p.delayed:
            if not fut.done():
                fut.set_result(codec.NOT_LEADER_OR_FOLLOWER)
        p.notify()
        p.notify_hw()
        p.log.close()
        shutil.rmtree(p.log.dir, ignore_errors=True)
    log.info("broker %d: topic %s deleted", b.id, name)
