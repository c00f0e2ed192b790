"""Model traces: golden counterexamples replay to their verdict; bad files get a clear error
with the line number; the CLI keeps its exit codes."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from checkers.model_trace import replay
from traces.trace import TraceError

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "traces" / "corpus"
GOLDEN = sorted(CORPUS.glob("model-*.jsonl"))


def cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "kafkaverify", *args], capture_output=True,
                          text=True, cwd=cwd or ROOT, timeout=300)


def test_corpus_has_both_kip101_scenarios():
    names = {p.name for p in GOLDEN}
    assert {"model-kip101-s1-data-loss.jsonl", "model-kip101-s2-divergence.jsonl"} <= names


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: p.name)
def test_golden_trace_reproduces_recorded_violation(path):
    r = replay(path)
    assert r.problem is None
    assert r.reproduced, (r.violation, r.recorded)


def _lines(path):
    return path.read_text().splitlines(keepends=True)


def test_truncated_trace_names_its_last_line(tmp_path):
    lines = _lines(GOLDEN[0])
    bad = tmp_path / "t.jsonl"
    bad.write_text("".join(lines[:4]) + lines[4][: len(lines[4]) // 2])
    with pytest.raises(TraceError) as e:
        replay(bad)
    assert e.value.line == 5 and "truncated" in str(e.value)


def test_unknown_version_is_rejected(tmp_path):
    lines = _lines(GOLDEN[0])
    h = json.loads(lines[0])
    h["version"] = 99
    bad = tmp_path / "t.jsonl"
    bad.write_text(json.dumps(h) + "\n" + "".join(lines[1:]))
    with pytest.raises(TraceError) as e:
        replay(bad)
    assert e.value.line == 1 and "version 99" in str(e.value)


def test_impossible_action_reported_at_its_line(tmp_path):
    lines = _lines(GOLDEN[0])
    rec = json.loads(lines[3])
    rec["action"] = {"type": "Restart", "broker": 0}          # broker 0 is up: impossible
    bad = tmp_path / "t.jsonl"
    bad.write_text("".join(lines[:3]) + json.dumps(rec) + "\n" + "".join(lines[4:]))
    r = replay(bad)
    assert r.problem and "step 3 is no longer possible" in r.problem and r.line == 4
    out = cli("replay", str(bad))
    assert out.returncode == 3 and ":4:" in out.stdout


def test_garbage_line_is_an_input_error(tmp_path):
    bad = tmp_path / "t.jsonl"
    bad.write_text(GOLDEN[0].read_text().splitlines()[0] + "\n{not json\n")
    out = cli("replay", str(bad))
    assert out.returncode == 3 and ":2:" in out.stderr and "Traceback" not in out.stderr


def test_replay_cli_reproduces_and_rewrite_keeps_golden_identical(tmp_path):
    copy = tmp_path / GOLDEN[0].name
    shutil.copy(GOLDEN[0], copy)
    out = cli("replay", str(copy))
    assert out.returncode == 1 and "VIOLATION" in out.stdout
    assert cli("replay", str(copy), "--rewrite").returncode == 1
    assert copy.read_text() == GOLDEN[0].read_text()


def test_explore_cli_exit_codes_and_trace(tmp_path):
    out_file = tmp_path / "cx.jsonl"
    r = cli("explore", "--generation", "current", "--without", "min-isr-hw", "--out", str(out_file))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "VIOLATION of MinIsrDurability" in r.stdout and "reproduce: kafkaverify explore" in r.stdout
    assert "  1. " in r.stdout
    assert cli("replay", str(out_file)).returncode == 1
    r = cli("explore", "--generation", "current", "--records", "1", "--crashes", "1",
            "--elections", "1", "--losses", "0")
    assert r.returncode == 0 and "no violation" in r.stdout
    r = cli("explore", "--generation", "current", "--max-depth", "3")
    assert r.returncode == 2 and "depth-bound" in r.stdout


@pytest.mark.parametrize("args", [
    ["explore", "--generation", "v9"],
    ["explore", "--without", "no-such-fix"],
    ["explore", "--generation", "v0.10", "--without", "min-isr-hw"],
    ["explore", "--brokers", "0"],
    ["explore", "--invariant", "Nope"],
    ["explore", "--bogus-option"],
    ["simulate", "--seed", "1"],
    ["replay", "/no/such/file.jsonl"],
])
def test_usage_errors_exit_3_without_traceback(args):
    r = cli(*args)
    assert r.returncode == 3, (args, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr


def test_simulate_cli_prints_seed_and_reproduce_command():
    r = cli("simulate", "--generation", "v0.10", "--unflushed-loss", "--crashes", "4",
            "--records", "3", "--seed", "5", "--steps", "20000")
    assert r.returncode == 1 and r.stdout.startswith("seed=5")
    assert "reproduce: kafkaverify simulate --generation v0.10" in r.stdout
    r2 = cli("simulate", "--generation", "current", "--seed", "5", "--steps", "300")
    assert r2.returncode == 0


def test_check_cli_runs_selected_stages_and_reports_a_table():
    r = cli("check", "--stage", "golden", "--stage", "without min-isr-hw")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "golden model-kip101-s1-data-loss.jsonl" in r.stdout and "golden histories" in r.stdout
    assert "invariant suite" in r.stdout and "fail" not in r.stdout.split("invariant suite")[1]
    r = cli("check", "--stage", "no-such-stage")
    assert r.returncode == 3 and "Traceback" not in r.stderr


def test_a_control_message_missing_a_field_is_an_input_error():
    from spec import Action
    with pytest.raises(ValueError, match="Deliver message needs integer ce, le, leader, isr, ver"):
        Action.from_json({"type": "Deliver", "broker": 0, "message": {"ce": 1, "le": 0}})
