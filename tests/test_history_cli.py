"""The history CLI as a user runs it (subprocess): exit codes 0/1/2/3, no traceback on user
mistakes, --json output, gen-history's anomaly validation, shrink."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run(*args, cwd=None):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.run([sys.executable, "-m", "kafkaverify", *map(str, args)], capture_output=True,
                       text=True, env=env, cwd=cwd, timeout=300)
    assert "Traceback" not in p.stderr, p.stderr
    return p


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    assert run("gen-history", "--seed", 4, "--ops", 1500, "--out", d / "ok.parquet").returncode == 0
    p = run("gen-history", "--seed", 4, "--ops", 1500, "--seed-anomaly", "lost-write:0.01",
            "--seed-anomaly", "duplicate:1", "--out", d / "bad.jsonl")
    assert p.returncode == 0, p.stderr
    return d


def test_check_valid_invalid_and_json(files):
    p = run("check-history", files / "ok.parquet")
    assert p.returncode == 0 and "VALID" in p.stdout
    p = run("check-history", files / "bad.jsonl", "--json", files / "r.json")
    assert p.returncode == 1 and "lost-write" in p.stdout and "duplicate" in p.stdout
    r = json.loads((files / "r.json").read_text())
    assert r["status"] == "invalid" and r["anomaly_counts"]["duplicate"] >= 1
    lost = [a for c in r["checks"] for a in c["anomalies"] if a["type"] == "lost-write"]
    assert lost and all(str(i) in r["witness_ops"] for a in lost for i in a["witness"])
    # --low-memory changes how a large history is screened (tests/test_fused.py), never the
    # verdict; at this size it takes the one path.
    p = run("check-history", files / "bad.jsonl", "--low-memory", "--json", files / "r2.json")
    assert p.returncode == 1
    assert json.loads((files / "r2.json").read_text())["anomaly_counts"] == r["anomaly_counts"]


def test_unknown_exit_2(tmp_path):
    h = tmp_path / "u.jsonl"
    h.write_text('{"format":"kafkaverify-history","version":1}\n'
                 '{"id":1,"type":"invoke","process":0,"f":"send","topic":"t","partition":0,"value":"a","mono_ns":1}\n'
                 '{"id":1,"type":"ok","process":0,"f":"send","offset":0,"mono_ns":2}\n')
    p = run("check-history", h)
    assert p.returncode == 2 and "no final read" in p.stdout


def test_bad_input_exit_3_with_line_number(tmp_path):
    h = tmp_path / "t.jsonl"
    h.write_text('{"format":"kafkaverify-history","version":1}\n{"id":1,"type":"ok"')
    p = run("check-history", h)
    assert p.returncode == 3 and "line 2" in p.stderr and "truncated" in p.stderr
    p = run("check-history", tmp_path / "missing.jsonl")
    assert p.returncode == 3 and "cannot open" in p.stderr
    p = run("check-history", h, "--format", "xml")
    assert p.returncode == 3


def test_gen_history_rejects_unknown_type_and_bad_rate(tmp_path):
    p = run("gen-history", "--seed", 1, "--ops", 10, "--seed-anomaly", "lost:0.1", "--out", tmp_path / "x.jsonl")
    assert p.returncode == 3 and "valid types:" in p.stderr and "lost-write" in p.stderr
    p = run("gen-history", "--seed", 1, "--ops", 10, "--seed-anomaly", "lost-write:2", "--out", tmp_path / "x.jsonl")
    assert p.returncode == 3 and "RATE" in p.stderr


def test_shrink(files, tmp_path):
    p = run("shrink", files / "ok.parquet", "--out", tmp_path / "s.jsonl")
    assert p.returncode == 2 and "nothing to shrink" in p.stderr and "valid" in p.stderr
    p = run("shrink", files / "bad.jsonl", "--out", tmp_path / "s.jsonl")
    assert p.returncode == 0, p.stderr
    assert "shrunk" in p.stdout and "-> 2 operations" in p.stdout
    p = run("check-history", tmp_path / "s.jsonl")
    assert p.returncode == 1
