"""examples/consume_transform_produce.py, run as a user runs it against a real 3-broker cluster of
our broker: every input has its output exactly once in the committed output, also when the
loop is killed (kill -9) mid-stream and started again (the new instance fences the old one and
the group resumes from the offsets committed with the last transaction); the recorded
producer history carries the transactions and their offset commits."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter

import pytest

from tests.broker_fixtures import *  # noqa: F401,F403
from tests.broker_fixtures import wait_until
from tests.conftest import ROOT, subprocess_env

pytestmark = [pytest.mark.timeout(240), pytest.mark.slow]     # a 3-broker cluster, two runs: ~20 s
EXAMPLE = os.path.join(ROOT, "examples", "consume_transform_produce.py")
N = 60


def ctp(*args, timeout=120):
    return subprocess.run([sys.executable, EXAMPLE, *args], capture_output=True, text=True, timeout=timeout,
                          cwd=ROOT, env=subprocess_env())


def committed_output(bootstrap: str, topic: str, partitions: int) -> list[str]:
    from kafka import KafkaConsumer, TopicPartition
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                      isolation_level="read_committed", auto_offset_reset="earliest")
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        c.assign(tps)
        end = c.end_offsets(tps)
        got: list[str] = []
        wait_until(lambda: got.extend(m.value.decode() for ms in c.poll(timeout_ms=200).values() for m in ms)
                   or all(c.position(tp) >= end[tp] for tp in tps), timeout_s=30, what="the output read")
        return got
    finally:
        c.close()


def test_every_input_exactly_once_across_a_kill(make_cluster, tmp_path):
    c = make_cluster(3, broker_config={"group_initial_rebalance_delay_ms": 0, "offsets_topic_num_partitions": 3})
    for t in ("ctp-in", "ctp-out"):
        c.create_topic(t, partitions=3, replication_factor=3, min_insync=2)
        c.wait_for_leaders(t, timeout_s=30, isr_size=3)
    r = ctp("--bootstrap", c.bootstrap, "--seed-input", str(N), "--partitions", "3")
    assert r.returncode == 0, r.stderr[-2000:]
    hist = tmp_path / "first.jsonl"
    first = subprocess.Popen([sys.executable, EXAMPLE, "--bootstrap", c.bootstrap, "--batch", "4", "--pause-s", "0.3",
                              "--history", str(hist)], cwd=ROOT, env=subprocess_env(),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        def commits() -> int:
            if not hist.exists():
                return 0
            return sum(1 for line in hist.read_text().splitlines()[1:]
                       if line.endswith("}") and '"f":"txn_commit"' in line and '"type":"ok"' in line)
        wait_until(lambda: commits() >= 2, timeout_s=60, what="two transactions committed before the kill")
        first.send_signal(signal.SIGKILL)
    finally:
        first.kill()
        first.wait()
    r = ctp("--bootstrap", c.bootstrap, "--idle-s", "6", "--history", str(tmp_path / "second.jsonl"))
    assert r.returncode == 0, r.stderr[-2000:]
    stats = json.loads(r.stdout.strip().splitlines()[-1])
    assert stats["committed"] >= 1 and 0 < stats["processed"] < N     # it resumed, not restarted
    out = committed_output(c.bootstrap, "ctp-out", 3)
    dup = {v: n for v, n in Counter(out).items() if n > 1}
    assert not dup, f"outputs committed more than once: {dup}"
    assert sorted(out) == sorted(f"out-{i}" for i in range(N))
    # the recorded producer: each transaction's sends and offset commits carry it
    ev = [json.loads(x) for x in hist.read_text().splitlines()[1:] if x.endswith("}")]
    cfg = next(e for e in ev if e["f"] == "producer_config")
    assert cfg["transactional_id"] == "ctp-0"
    txn_commits = [e for e in ev if e["f"] == "commit" and e["type"] == "invoke"]
    assert txn_commits and all(e["group"] == "ctp" and "txn" in e for e in txn_commits)
    assert all("txn" in e for e in ev if e["f"] == "send" and e["type"] == "invoke")
