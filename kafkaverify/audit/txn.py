"""The audit's transactional column (`kafkaverify audit-ordering --transactions on`): per client,
its transactional producer (kafka-python, confluent-kafka, aiokafka) with a read_committed
consumer under the audit's fault schedules on real 3-broker clusters (the nemesis's
transactional workload, kafkaverify/nemesis/txn_workload.py), beside the model's answer for
the generation. Transactions promise all four questions: an aborted transaction never visible
to read_committed (aborted-read), a committed one visible whole (atomicity), its records once
(duplicate), and kept (loss); any occurrence breaks a promise.

The model's answer (spec/transaction.py): `kafkaverify explore --transactions 1`'s bounds (one
transactional.id and a zombie instance, two data partitions, two transactions, one client
timeout and one resent marker) at the generation's fixes; its
TxnAtomicVisibility invariant answers aborted-read and atomicity, TxnExactlyOnce (with
consume-transform-produce) duplicates. Loss of committed records is the replication model's
question (the ordering audit's loss column), not asked here.
"""
from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from pathlib import Path

from checkers.model_trace import TXN_DEFAULTS
from kafkaverify.audit.broker import BrokerRun, RunsTally, TOPIC, judged_run
from kafkaverify.audit.model import ModelVerdict
from kafkaverify.audit.settings import CLIENT_PACKAGES
from kafkaverify.drivers.registry import is_driver
from kafkaverify.nemesis.explore import default_workload
from traces.schedule import Schedule

TXN_QUESTIONS = ("aborted-read", "atomicity", "duplicate", "loss")
TXN_SHORT = {"aborted-read": "aborted read", "atomicity": "atomicity", "duplicate": "dup", "loss": "loss"}
# history anomaly type -> transactional question
TXN_QUESTION_OF = {"G1a": "aborted-read", "precommitted-read": "aborted-read", "txn-atomicity": "atomicity",
                   "duplicate": "duplicate", "lost-write": "loss", "unseen-write": "loss", "lost-read": "loss"}
# model invariant answering each question (None: not asked of the transactional model)
TXN_INVARIANT = {"aborted-read": "TxnAtomicVisibility", "atomicity": "TxnAtomicVisibility",
                 "duplicate": "TxnExactlyOnce", "loss": None}
# `kafkaverify explore --transactions 1`'s bounds (checkers/model_trace.TXN_DEFAULTS)
MODEL_BOUNDS = {**TXN_DEFAULTS, "transactions": 1, "isolation": "read_committed"}
MAX_DEPTH = 60


@dataclass
class TxnCell(RunsTally):
    client: str
    refusal: str | None
    planned: int
    runs: list[BrokerRun] = field(default_factory=list)

    def broken(self, q: str) -> bool:
        return self.count(q) > 0          # transactions promise every question


def txn_refusal(client: str) -> str | None:
    """Why `client` has no transactional producer, in its own words (its constructor's error with a
    transactional id), or None. Nothing is dialled (a closed local port)."""
    tid = "audit-probe"
    try:
        if client == "kafka-python":
            from kafka import KafkaProducer     # lazy: an optional client library
            KafkaProducer(bootstrap_servers="127.0.0.1:1", transactional_id=tid, api_version=(2, 5)).close(0)
        elif client == "confluent":
            from confluent_kafka import Producer     # lazy: an optional client library
            Producer({"bootstrap.servers": "127.0.0.1:1", "transactional.id": tid, "log_level": 0})
        elif client == "aiokafka":
            from aiokafka import AIOKafkaProducer     # lazy: an optional client library

            async def make():
                await AIOKafkaProducer(bootstrap_servers="127.0.0.1:1", transactional_id=tid).stop()
            asyncio.run(make())
        elif is_driver(client):
            return (f"not offered: the {client} driver's protocol has no transactional operations "
                    f"(docs/drivers.md, protocol version 1)")
        else:
            raise ValueError(f"unknown client {client!r}")
    except ValueError:
        raise
    except Exception as e:            # the client's own refusal, whatever its class
        return f"refused: {type(e).__name__}: {e}"
    return None


def workload(client: str) -> dict:
    w = default_workload(CLIENT_PACKAGES[client], acks="all", idempotence=True, min_insync=2,
                         replication_factor=3, consumers=0, topic=TOPIC, partitions=3, transactions=True)
    return w


def run_txn(client: str, events: tuple, index: int, out_dir: Path, generation: str, net: bool) -> BrokerRun:
    sched = Schedule(generation, 3, events, workload(client), seed=index)
    return judged_run(sched, index, out_dir, net, TXN_QUESTION_OF)


def model_verdicts(generation: str, time_limit_s: float = 120.0) -> dict[str, ModelVerdict]:
    """The transactional model's answer per question at the generation (spec/transaction.py)."""
    # lazy: the explorer loads only when the audit asks the model
    from checkers.explore import explore
    from checkers.model_trace import config_args
    from kafkaverify.reports.story import story_lines
    from spec import ConfigError, Model, make_config
    out: dict[str, ModelVerdict] = {}
    for inv in ("TxnAtomicVisibility", "TxnExactlyOnce"):
        qs = [q for q in TXN_QUESTIONS if TXN_INVARIANT[q] == inv]
        try:
            cfg = make_config(generation, **MODEL_BOUNDS, consume_transform_produce=inv == "TxnExactlyOnce")
        except ConfigError as e:
            for q in qs:
                out[q] = ModelVerdict(q, "refused", why=str(e))
            continue
        bounds = " ".join(f"{k}={v}" for k, v in MODEL_BOUNDS.items()) + \
            f" consume_transform_produce={inv == 'TxnExactlyOnce'} depth<={MAX_DEPTH}"
        cmd = (f"kafkaverify explore {config_args(cfg)} --invariant {inv} --bfs-only --max-depth {MAX_DEPTH} "
               f"--time-limit {time_limit_s:g}")
        t0 = time.monotonic()
        r = explore(Model(cfg), max_depth=MAX_DEPTH, time_limit=time_limit_s, invariants=(inv,), workers=1)
        secs = time.monotonic() - t0
        for q in qs:
            if r.status == "violation":
                out[q] = ModelVerdict(q, "found", bounds, inv, r.message,
                                      story_lines(r.path, r.states, r.invariant, r.message), len(r.path),
                                      r.distinct, secs, cmd)
            else:
                st = "none" if r.status == "exhausted" else "unknown"
                out[q] = ModelVerdict(q, st, bounds, inv, states=r.distinct, seconds=secs, command=cmd,
                                      why="" if st == "none" else
                                      f"the search stopped at its {r.status} ({r.distinct:,} states, {secs:.0f} s)")
    out["loss"] = ModelVerdict("loss", "refused", why="not asked of the transactional model (the ordering "
                               "audit's loss column asks the replication model)")
    return {q: out[q] for q in TXN_QUESTIONS}


def model_cell(v: ModelVerdict | None) -> str:
    return "not run" if v is None else v.short()


def broker_cell(c: TxnCell) -> str:
    return c.summary(TXN_QUESTIONS, TXN_SHORT)
