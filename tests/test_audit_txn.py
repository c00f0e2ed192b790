"""`kafkaverify audit-ordering --transactions on`: the transactional column for one client
(confluent-kafka's transactional producer and a read_committed consumer on real 3-broker
clusters under the audit's schedule) beside the transactional model's answer; the markdown, the
JSON and the HTML carry it; the exit code agrees with what was found; bad values exit 3."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from kafkaverify.audit.txn import TXN_QUESTION_OF, TXN_QUESTIONS, txn_refusal
from tests.conftest import ROOT, subprocess_env

pytestmark = pytest.mark.timeout(300)


def kv(*args, timeout=240):
    return subprocess.run([sys.executable, "-m", "kafkaverify", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env=subprocess_env())


def test_transactional_column_for_one_client(tmp_path):
    r = kv("audit-ordering", "--clients", "confluent", "--transactions", "on", "--schedules", "1", "--seed", "3",
           "--generation", "current", "--model-time-limit", "5", "--out", str(tmp_path))
    assert r.returncode in (0, 1), r.stdout[-3000:] + r.stderr[-3000:]
    assert "transactions=on" in r.stdout and "settings=0" in r.stdout
    a = json.loads((tmp_path / "audit.json").read_text())
    t = a["transactional"]
    assert [c["client"] for c in t["cells"]] == ["confluent"] and t["cells"][0]["refusal"] is None
    runs = t["cells"][0]["runs"]
    assert len(runs) == 1 and runs[0]["status"] == "valid", runs       # the broker keeps every promise
    hist = (tmp_path / "runs" / "confluent" / "transactions" / "run-01" / "history.jsonl").read_text()
    # the run asked the question: transactions committed and read back by read_committed
    assert hist.count('"f":"txn_commit"') >= 2 and '"isolation":"read_committed"' in hist
    assert set(t["model"]) == set(TXN_QUESTIONS)
    assert t["model"]["loss"]["status"] == "refused"
    # exit 1 exactly when a promise is broken: here only the model can break one (current lacks
    # KIP-890 part 2's epoch bump: a late marker commits the next transaction's record early)
    found = [q for q, v in t["model"].items() if v["status"] == "found"]
    assert r.returncode == (1 if found else 0), (found, r.stdout[-2000:])
    assert [b[2] for b in a["broken"]] == found
    md = (tmp_path / "audit.md").read_text()
    assert "| transactions | model: aborted read |" in md and "aborted read 0/1" in md
    assert "<table id='transactions'>" in (tmp_path / "audit.html").read_text()


def test_transactions_values_and_refusals():
    r = kv("audit-ordering", "--transactions", "maybe", timeout=60)
    assert r.returncode == 3 and "--transactions: 'maybe' is not one of on, off" in r.stderr
    r = kv("audit-ordering", "--transactions", "on", "--generation", "v0.10", timeout=60)
    assert r.returncode == 3 and "generation v0.10 has no transactions" in r.stderr, r.stderr
    # each installed client has a transactional producer: no refusal
    assert [txn_refusal(c) for c in ("confluent", "aiokafka", "kafka-python")] == [None, None, None]
    assert TXN_QUESTION_OF["G1a"] == "aborted-read" and TXN_QUESTION_OF["txn-atomicity"] == "atomicity"
