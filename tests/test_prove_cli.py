"""`kafkaverify prove` (kafkaverify/commands/prove.py, kafkaverify/runs/prove.py) and the BMC / induction engines behind it:
exit codes, refutation traces that `kafkaverify replay` reproduces on the explicit model, a
proof, an unknown with its counterexample to induction, and the invariant encodings agreeing
with spec's on drawn states."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from checkers.prove.bmc import bmc
from checkers.prove.differential import draw_states
from checkers.prove.encoding import Encoding
from checkers.prove.props import STATE_PROPS
from spec import INVARIANTS, Model, make_config

ROOT = Path(__file__).resolve().parent.parent


def kv(*args, timeout=240):
    return subprocess.run([sys.executable, "-m", "kafkaverify", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=timeout)


def test_usage_errors_exit_3():
    for args in (["--generation", "kip-966", "--min-isr", "9"], ["--invariant", "Nope"], ["--brokers", "9"], ["--brokers", "7", "--depth", "2"],
                 ["--generation", "nope"], ["--without", "eligible-leader-replicas"],
                 ["--depth", "-1"]):
        r = kv("prove", *args)
        assert r.returncode == 3, (args, r.stdout, r.stderr)
        assert "Traceback" not in r.stderr
        assert "error" in r.stderr.lower()


def test_bmc_refutation_is_a_trace_replay_reproduces(tmp_path):
    r = kv("prove", "--generation", "current", "--without", "min-isr-hw", "--brokers", "2",
           "--depth", "4", "--invariant", "MinIsrDurability", "--out", str(tmp_path))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "refuted" in r.stdout and "BMC depth 4" in r.stdout
    traces = list(tmp_path.glob("*.jsonl"))
    assert len(traces) == 1
    rep = kv("replay", str(traces[0]))
    assert rep.returncode == 1, rep.stdout
    assert "VIOLATION of MinIsrDurability" in rep.stdout


def test_induction_proves_monotonic_epochs():
    r = kv("prove", "--brokers", "3", "--log-length", "2", "--invariant", "MonotonicEpochs")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "proved" in r.stdout and "induction" in r.stdout


def test_unknown_shows_a_counterexample_to_induction():
    """Without epoch-truncation StrongIsr is false (the explorer finds it), so no strengthening
    makes it inductive: unknown, with the CTI as a pre-state, an action and a post-state.
    `--depth 0` asks for induction alone (without --depth, BMC would then refute it)."""
    r = kv("prove", "--without", "epoch-truncation", "--brokers", "2", "--log-length", "2",
           "--invariant", "StrongIsr", "--time-limit", "120", "--depth", "0")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "counterexample to induction for StrongIsr" in r.stdout
    assert "pre-state:" in r.stdout and "post-state:" in r.stdout


def test_bmc_finds_the_v010_violation_and_spec_agrees():
    r = bmc(Model(make_config("v0.10")), 3, time_limit=60)
    assert r.status == "violation" and r.problem is None
    assert r.depth == 2 and r.invariant == "MinIsrDurability"


def test_bmc_is_clean_where_spec_is_clean():
    """current with every fix: nothing within depth 3 (the explorer agrees)."""
    r = bmc(Model(make_config("current")), 3, time_limit=60)
    assert r.status == "clean", (r.invariant, r.problem)


# The model's internal-consistency invariants (bookkeeping, not protocol promises) have no z3
# encoding yet, nor the progress properties (spec/progress.py: they look ahead along bounded
# paths, not a formula of one state); every other non-client invariant must have one.
NOT_ENCODED = {"EpochCacheMatchesLog", "FetchResponseMatchesEpoch", "PendingIsrMatchesRole",
               "HwProgress", "ElectionProgress"}


def test_invariant_encodings_agree_with_spec():
    assert {i.name for i in INVARIANTS if i.promise is None} - set(STATE_PROPS) == NOT_ENCODED
    violated_seen = set()
    for gen, without, bounds, seed in (("v0.10", (), {}, 1), ("current", ("min-isr-hw",), {}, 2),
                                       ("current", ("maximal-isr",), {"min_isr": 1}, 3),
                                       ("kip-101", (), {"unflushed_loss": True, "records": 3}, 4),
                                       ("current", (), {"brokers": 3, "unflushed_loss": True}, 5)):
        cfg = make_config(gen, without, **bounds)
        enc = Encoding(cfg)
        for s in draw_states(Model(cfg), seed, 1200):
            d = enc.from_state(s)
            for inv in INVARIANTS:
                if inv.promise is not None or inv.name in NOT_ENCODED:   # clients: none here
                    continue
                want = inv.check(cfg, s) is None or bool(inv.counts_copies and s.lossy)
                assert bool(STATE_PROPS[inv.name](enc, d)) == want, (gen, inv.name, inv.check(cfg, s))
                if not want:
                    violated_seen.add(inv.name)
    assert {"MinIsrDurability", "StrongIsr", "ReplicationQuorumSuperset"} <= violated_seen


def test_check_stage_passes():
    from kafkaverify.runs.prove import prove_stage
    verdict, secs, detail = prove_stage()
    assert verdict == "pass", detail
    assert "replayed" in detail and "MonotonicEpochs proved" in detail
    assert "StrongIsr proved (kip-966, 2 replicas)" in detail


def test_pauses_are_encoded():
    """`--pauses`: the encoding covers paused brokers and zombie controllers; HwBelowLeo stays
    inductive with them (the lemmas that assume no pauses are not among its strengthening)."""
    r = kv("prove", "--brokers", "2", "--pauses", "1", "--invariant", "HwBelowLeo")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "proved" in r.stdout and "induction" in r.stdout


def _replays_to(trace: Path, invariant: str) -> None:
    rep = kv("replay", str(trace))
    assert rep.returncode == 1, rep.stdout + rep.stderr
    assert f"VIOLATION of {invariant}" in rep.stdout


def test_without_depth_bmc_refutes_what_induction_leaves_unknown(tmp_path):
    """No --depth: StrongIsr is not inductive in v0.10 (unknown), so BMC over chained steps
    (kafkaverify/runs/prove.py FALLBACK_DEPTH) searches it before the answer and refutes it:
    exit 1, not 2, with a trace that `kafkaverify replay` reproduces."""
    r = kv("prove", "--generation", "v0.10", "--brokers", "3", "--invariant", "StrongIsr",
           "--time-limit", "120", "--out", str(tmp_path))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "bmc-fallback=3" in r.stdout
    assert "chained steps (induction: unknown)" in r.stdout and "refuted" in r.stdout
    traces = list(tmp_path.glob("*.jsonl"))
    assert len(traces) == 1
    _replays_to(traces[0], "StrongIsr")


def test_depth_0_keeps_induction_alone():
    """An explicit --depth 0 is induction only, as before: the unknown stays unknown (exit 2)."""
    r = kv("prove", "--generation", "v0.10", "--brokers", "3", "--invariant", "StrongIsr",
           "--depth", "0")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "bmc-fallback" not in r.stdout and "chained steps" not in r.stdout


@pytest.mark.slow
def test_prove_v010_three_brokers_exits_1_with_a_replayable_trace(tmp_path):
    """`kafkaverify prove --generation v0.10 --brokers 3` on the core invariants: StrongIsr
    refuted by the BMC fallback (about 35 s in all: a second round searches LogMatching and
    ReplicationQuorumSuperset to the default depth and finds nothing)."""
    r = kv("prove", "--generation", "v0.10", "--brokers", "3", "--out", str(tmp_path),
           timeout=600)
    assert r.returncode == 1, r.stdout + r.stderr
    traces = list(tmp_path.glob("*StrongIsr*.jsonl"))
    assert len(traces) == 1
    _replays_to(traces[0], "StrongIsr")
