"""k-induction (checkers/prove/kinduction.py) and `kafkaverify prove --k`: a counterexample to
k-induction is a loop-free path that spec's `step` follows from its first state; a larger k
removes a CTI a smaller k had; k-induction never proves what BMC refutes, and refutes through
its base case once K passes the bug's depth; the CLI's exit codes and table."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from checkers.prove import kinduction as kind_mod
from checkers.prove.bmc import spec_action_at
from checkers.prove.induction import prove
from checkers.prove.kinduction import kinduction, step_case
from checkers.prove.props import STATE_PROPS
from checkers.prove.strengthen import STRENGTHENING
from kafkaverify.runs.prove import prove_config
from spec import Model, make_config
from spec.invariants import violated
from spec.model import normalize_versions as canon_versions

ROOT = Path(__file__).resolve().parent.parent
SMALL = {"records": 1, "crashes": 1, "elections": 1, "losses": 0}


def kv(*args, timeout=240):
    return subprocess.run([sys.executable, "-m", "kafkaverify", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=timeout)


def test_cti_path_is_a_loop_free_path_spec_follows():
    """One broker, ReplicationQuorumSuperset with only the type lemmas: not 3-inductive. The
    CTI's first state is a state of the model; from it spec's `step` takes the CTI's actions
    (each enabled) to the CTI's states (up to the renaming of versions); the states are pairwise
    distinct; the invariant and lemmas hold on all but the last, and spec's invariant fails on
    the last. ControllerCache keeps the CTI's states ones spec can read (a current controller
    without its cache is none). Which CTI z3 returns depends on what the process asked it
    before, so the check runs in a fresh interpreter: the same CTI on every run and machine."""
    import os
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.run([sys.executable, "-c", "from tests.test_prove_kinduction import "
                        "check_cti_path; check_cti_path()"], capture_output=True, text=True,
                       cwd=ROOT, env=env, timeout=300)
    assert p.returncode == 0, p.stderr[-4000:]


def check_cti_path() -> None:
    lemmas = ("LogBounds", "TypeOk", "ControllerCache")
    model = Model(prove_config("current", (), 1, 2, min_isr=1))
    r = kinduction(model, "ReplicationQuorumSuperset", 3, strengthening=lemmas, time_limit=120)
    assert r.verdict == "unknown" and r.k == 3 and r.cti, (r.verdict, r.failing)
    assert [v for _, v, _ in r.steps] == ["sat"] * 3
    assert "state 0:" in r.cti and "state 3:" in r.cti
    enc, ds, insts = kind_mod.LAST
    assert len(ds) == 4 and len(insts) == 3
    keys = list(ds[0])
    assert len({tuple(d[k] for k in keys) for d in ds}) == 4           # loop-free
    for d in ds[:-1]:
        assert all(bool(STRENGTHENING[n](enc, d)) for n in lemmas)
    inv = tuple(i for i in model.invariants if i.name == "ReplicationQuorumSuperset")
    s = enc.to_state(ds[0])
    assert violated(model.config, s, inv) is None
    for k, (inst, d, nxt) in enumerate(zip(insts, ds, ds[1:]), 1):
        a = spec_action_at(enc, inst, d, s)
        assert a in model.enabled(s), f"step {k}: {a.describe()} not enabled in spec"
        s = model.step(s, a)
        assert canon_versions(s) == canon_versions(enc.to_state(nxt)), f"step {k}"
        assert (violated(model.config, s, inv) is not None) == (k == 3), k
        assert bool(STATE_PROPS["ReplicationQuorumSuperset"](enc, nxt)) == (k != 3)


def test_larger_k_removes_a_cti_of_a_smaller_k():
    """One broker, AckedDurable without lemmas: induction gives CTIs (a pre-state and a step).
    Among the first 30 (each pre-state excluded once seen) is one that no 2-step path ends in
    (without repeated states, AckedDurable on its first two): its pre-state has no predecessor
    satisfying the invariant, so 2-induction removes it. In the runs measured the fifth was
    such a CTI; which ones z3 offers first depends on its heuristics, hence the search."""
    model = Model(prove_config("current", (), 1, SMALL["records"], min_isr=1,
                               **{k: v for k, v in SMALL.items() if k != "records"}))
    p = prove(model, "AckedDurable", strengthening=(), time_limit=60)
    assert p.verdict == "unknown" and p.cti
    seen: list[dict] = []
    for _ in range(30):
        r, cti = step_case(model, "AckedDurable", 1, time_limit=60, avoid=seen, symmetric=False)
        assert r == "sat"
        r2, _ = step_case(model, "AckedDurable", 2, time_limit=60, ending=cti[3])
        assert r2 in ("sat", "unsat")
        if r2 == "unsat":
            break
        seen.append(cti[3][0])
    assert r2 == "unsat", "no CTI of induction among the first 30 is removed by 2-induction"
    # and the removed pre-state is one 1-induction does offer: it satisfies the invariant
    enc = cti[2]
    assert bool(STATE_PROPS["AckedDurable"](enc, cti[3][0]))
    assert not bool(STATE_PROPS["AckedDurable"](enc, cti[3][1]))


def test_never_proves_below_the_bug_depth():
    """v0.10 breaks MinIsrDurability at depth 2 (BMC and the explorer): with K = 2 every step
    case has a CTI (the last k states before the violation form one) and the base case to depth
    1 is clean: unknown, never proved."""
    r = kinduction(Model(make_config("v0.10", **SMALL)), "MinIsrDurability", 2, time_limit=120)
    assert r.verdict == "unknown", (r.verdict, r.failing)
    assert [v for _, v, _ in r.steps] == ["sat", "sat"]
    assert r.bmc is not None and r.bmc.status == "clean" and r.bmc.depth == 1


@pytest.mark.slow
def test_refutes_without_min_isr_hw_through_the_base_case():
    """--without min-isr-hw breaks MinIsrDurability at depth 4: K = 5 proves at no k and the
    base case (BMC to depth 4) finds the violation, which spec reproduces. About 30 s."""
    model = Model(make_config("current", ("min-isr-hw",), **SMALL))
    r = kinduction(model, "MinIsrDurability", 5, time_limit=300)
    assert r.verdict == "refuted", (r.verdict, r.failing)
    assert "unsat" not in [v for _, v, _ in r.steps]
    assert r.bmc.depth == 4 and r.bmc.problem is None and r.bmc.invariant == "MinIsrDurability"
    s = model.initial()
    for a, want in zip(r.bmc.actions, r.bmc.states):
        assert a in model.enabled(s)
        s = model.step(s, a)
        assert s == want
    assert violated(model.config, s, tuple(i for i in model.invariants
                                           if i.name == "MinIsrDurability"))


def test_cli_usage_errors_exit_3():
    for args in (["--k", "0"], ["--lemma", "TypeOk"], ["--k", "2", "--lemma", "Nope"],
                 ["--k", "2", "--brokers", "7"]):
        r = kv("prove", *args)
        assert r.returncode == 3, (args, r.stdout, r.stderr)
        assert "Traceback" not in r.stderr and "error" in r.stderr.lower()


def test_cli_proves_refutes_and_shows_the_cti_path(tmp_path):
    r = kv("prove", "--brokers", "2", "--invariant", "MonotonicEpochs", "--invariant", "HwBelowLeo",
           "--k", "2")
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("k-induction (k=1)") == 2 and "proved" in r.stdout
    # v0.10's MinIsrDurability violation lies at depth 2: K = 3 refutes it by the base case
    r = kv("prove", "--generation", "v0.10", "--brokers", "2", "--records", "1", "--crashes", "1",
           "--elections", "1", "--losses", "0", "--invariant", "MinIsrDurability", "--k", "3",
           "--out", str(tmp_path))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "k-induction (k=3)" in r.stdout and "refuted" in r.stdout
    assert "base case: BMC depth 2" in r.stdout
    traces = list(tmp_path.glob("*.jsonl"))
    assert len(traces) == 1
    rep = kv("replay", str(traces[0]))
    assert rep.returncode == 1 and "VIOLATION of MinIsrDurability" in rep.stdout, rep.stdout
    # without lemmas ReplicationQuorumSuperset is not 2-inductive: unknown, with the CTI path
    r = kv("prove", "--brokers", "1", "--min-isr", "1", "--invariant", "ReplicationQuorumSuperset",
           "--k", "2")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "counterexample to 2-induction for ReplicationQuorumSuperset" in r.stdout
    assert "state 0:" in r.stdout and "state 2:" in r.stdout and "k-induction (k=2)" in r.stdout
