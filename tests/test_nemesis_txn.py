"""`kafkaverify nemesis --transactions on|off` as a user runs it: bad values exit 3; a schedule
carries the transactional workload (and a plain one's JSON is what it was); a short run on a
real cluster of the newest generation (kip-966) with a transactional kafka-python producer,
crashes and pauses ends valid, its history in format version 2 with committed and aborted
transactions and read_committed polls; `kafkaverify replay` of a schedule that kills the
transaction coordinator twice ends valid."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT, subprocess_env
from traces.schedule import Event, Schedule, ScheduleError, from_json

pytestmark = pytest.mark.timeout(300)


def kv(*args, timeout=240):
    return subprocess.run([sys.executable, "-m", "kafkaverify", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env=subprocess_env())


@pytest.mark.parametrize("args, says", [
    (["--transactions", "maybe"], "'maybe' is not one of 'on', 'off'"),
    (["--transactions", "ON"], "is not one of"),
    (["--transactions", "on", "--faults", "crash,consumer-crash"], "no group members to crash"),
    (["--transactions", "on", "--acks", "1"], "needs acks all and idempotence"),
    (["--transactions", "on", "--no-idempotence"], "needs acks all and idempotence"),
])
def test_bad_transactions_values_exit_3(tmp_path, args, says):
    r = kv("nemesis", *args, "--schedules", "1", "--out", str(tmp_path), timeout=60)
    assert r.returncode == 3, r.stdout + r.stderr
    assert says in r.stderr and "Traceback" not in r.stderr


def test_schedule_carries_the_transactional_workload():
    ev = (Event(after_ms=0, fault="crash", target="0", duration_ms=100),)
    plain = Schedule("current", 3, ev).to_json()
    assert "transactions" not in plain["workload"]          # older schedules stay as they were
    s = from_json({**plain, "workload": {**plain["workload"], "transactions": True, "partitions": 3}})
    assert s.workload["transactions"] is True and s.to_json()["workload"]["transactions"] is True
    assert from_json(plain).workload["transactions"] is False
    with pytest.raises(ScheduleError, match="transactions must be true or false"):
        from_json({**plain, "workload": {**plain["workload"], "transactions": "yes"}})


def test_short_transactional_run_is_valid(tmp_path):
    r = kv("nemesis", "--transactions", "on", "--generation", "kip-966", "--schedules", "1", "--seed", "3",
           "--faults", "crash,pause", "--shrink-runs", "0", "--out", str(tmp_path), "--time-limit", "120")
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-3000:]
    assert "transactions=on" in r.stdout and "partitions=3" in r.stdout
    run = next(tmp_path.glob("run-*"))
    assert json.loads((run / "result.json").read_text())["status"] == "valid"
    lines = (run / "history.jsonl").read_text().splitlines()
    assert json.loads(lines[0])["version"] == 2
    ev = [json.loads(x) for x in lines[1:]]
    inv = {e["id"]: e for e in ev if e["type"] == "invoke"}
    done = {e["id"]: e["type"] for e in ev if e["type"] != "invoke"}
    cfg = next(e for e in inv.values() if e["f"] == "producer_config")
    assert cfg["transactional_id"] and cfg["idempotence"] is True
    ends = [e for e in inv.values() if e["f"] in ("txn_commit", "txn_abort")]
    # at least the workload's minimum of transactions, both outcomes drawn from the seed
    assert len(ends) >= 12 and {e["f"] for e in ends} == {"txn_commit", "txn_abort"}
    assert any(done.get(e["id"]) == "ok" for e in ends if e["f"] == "txn_commit")
    sends = [e for e in inv.values() if e["f"] == "send"]
    assert sends and all("txn" in e for e in sends) and len({e["partition"] for e in sends}) == 3
    polls = [e for e in inv.values() if e["f"] == "poll"]
    assert polls and all(e.get("isolation") == "read_committed" for e in polls)
    assert any(e.get("final") for e in polls)


def test_kill_of_the_transaction_coordinator_keeps_transactions_atomic(tmp_path):
    """kill -9 of the transactional.id's coordinator (the leader of its __transaction_state
    partition) twice while transactions run (4 s apart, after a re-election), confluent-kafka:
    every transaction ends committed on every partition or on none, and no aborted record
    reaches read_committed (a valid run)."""
    from impl.txn_coordinator import partition_for
    from kafkaverify.nemesis.txn_workload import TRANSACTIONAL_ID
    coord = f"leader:__transaction_state/{partition_for(TRANSACTIONAL_ID, 50)}"
    sched = {"format": "kafkaverify-schedule", "version": 1, "kind": "schedule", "generation": "kip-966",
             "brokers": 3, "seed": 4,
             "workload": {"client": "confluent-kafka", "acks": "all", "idempotence": True, "retries": 2147483647,
                          "max_in_flight": 5, "partitions": 3, "transactions": True, "consumers": 0},
             "events": [{"after_ms": 300, "fault": "crash", "target": coord, "duration_ms": 1500},
                        {"after_ms": 4000, "fault": "crash", "target": coord, "duration_ms": 1500}]}
    path = tmp_path / "coord.json"
    path.write_text(json.dumps(sched))
    r = kv("replay", str(path))
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-3000:]
    out = tmp_path / "coord-replay"
    res = json.loads((out / "result.json").read_text())
    crashes = [a for a in res["applied"] if "crash" in a and "skip" not in a]
    assert len(crashes) == 2, res["applied"]         # both kills hit a running coordinator
    ev = [json.loads(x) for x in (out / "history.jsonl").read_text().splitlines()[1:]]
    inv = {e["id"]: e for e in ev if e["type"] == "invoke"}
    done = {e["id"]: e["type"] for e in ev if e["type"] != "invoke"}
    commits = [e for e in inv.values() if e["f"] == "txn_commit" and done.get(e["id"]) == "ok"]
    assert len(commits) >= 5 and any(e["f"] == "txn_abort" for e in inv.values())
