"""z3's Spacer on the replication encoding (checkers/prove/spacer.py): a proof whose inductive
invariant is checked independently, candidate invariants the check rejects, deliberately
wrong claims refuted by paths that spec replays, a real refutation replayed on spec (slow),
and `kafkaverify prove --method spacer`'s exit codes."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import z3

from checkers.prove.spacer import METHOD, Horn, check_invariant, spacer
from spec import Model, make_config

ROOT = Path(__file__).resolve().parent.parent


def kv(*args, timeout=240):
    return subprocess.run([sys.executable, "-m", "kafkaverify", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=timeout)


def two():
    return Model(make_config("current", brokers=2, records=2))


def test_proof_without_lemmas_is_checked_independently():
    r = spacer(two(), ("HwBelowLeo",), time_limit=120)
    assert r.status == "proved", r.message
    conjuncts, nodes = r.invariant_size
    assert conjuncts >= 1 and nodes >= 1
    assert "checked independently" in r.message


def test_the_check_rejects_wrong_candidates():
    """The independent check is what makes a proof: each of its three conditions can fail."""
    h = Horn(two(), ("HwBelowLeo",))
    h.fixedpoint(10)                     # builds h.s, the state variables
    s = h.s
    # implies nothing: true holds initially and is inductive, but does not imply HW <= LEO
    assert "does not imply" in check_invariant(h, z3.BoolVal(True))
    # false initially: the initial log is empty
    assert "initial state" in check_invariant(h, s[("b", 0, "leo")] >= 1)
    # the invariant alone, unstrengthened: not inductive (a step from an unreachable state
    # satisfying it breaks it), so the check names the step
    why = check_invariant(h, z3.And(*[z3.And(s[("b", i, "hw")] >= 0, s[("b", i, "hw")] <= s[("b", i, "leo")],
                                             s[("b", i, "hw")] <= 0) for i in range(2)]))
    assert why is not None and "not preserved by" in why, why


@pytest.mark.parametrize("claim, depth", [
    # nothing is ever produced: false after the first write
    (lambda e, s: s[("b", 0, "leo")] == 0, 1),
    # broker 1 never goes down: false after a crash
    (lambda e, s: s[("b", 1, "alive")], 1),
])
def test_a_wrong_claim_is_refuted_by_a_path_spec_replays(claim, depth):
    r = spacer(two(), (), time_limit=180, claims={"Wrong": claim})
    assert r.status == "violation", r.message
    b = r.bmc
    assert b.problem is None and b.invariant == "Wrong", b.problem
    # the path is spec's: each action enabled where it is taken, the last state breaks it
    m = two()
    s = m.initial()
    for a, t in zip(b.actions, b.states):
        assert a in m.enabled(s)
        s = m.step(s, a)
        assert s == t
    from checkers.prove.encoding import Encoding
    assert not claim(Encoding(m.config), Encoding(m.config).from_state(s))
    assert len(b.actions) == depth


def test_cli_method_spacer_proves_and_rejects_bad_usage():
    r = kv("prove", "--method", "spacer", "--brokers", "2", "--invariant", "HwBelowLeo",
           "--time-limit", "120")
    assert r.returncode == 0, r.stdout + r.stderr
    assert METHOD in r.stdout and "proved" in r.stdout
    for args in (["--depth", "3"], ["--k", "2"], ["--brokers", "6"],
                 ["--producers", "1"]):
        r = kv("prove", "--method", "spacer", *args)
        assert r.returncode == 3, (args, r.stdout, r.stderr)
        assert "Traceback" not in r.stderr


@pytest.mark.slow
def test_real_refutation_replays(tmp_path):
    """v0.10 loses an acknowledged record on two brokers: Spacer's path, written as a trace,
    is reproduced by `kafkaverify replay` (tens of seconds to minutes: Spacer's search time
    varies widely with load; docs/benchmarks/proofs.md, Spacer)."""
    r = kv("prove", "--method", "spacer", "--generation", "v0.10", "--brokers", "2",
           "--crashes", "1", "--elections", "1", "--losses", "0", "--invariant",
           "MinIsrDurability", "--time-limit", "600", "--out", str(tmp_path), timeout=700)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "refuted" in r.stdout
    traces = list(tmp_path.glob("*.jsonl"))
    assert len(traces) == 1
    rep = kv("replay", str(traces[0]))
    assert rep.returncode == 1, rep.stdout + rep.stderr
    assert "MinIsrDurability" in rep.stdout
