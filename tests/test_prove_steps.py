"""BMC with parallel steps (checkers/prove/steps.py, the ∀-step semantics): a step fires a set
of pairwise non-interfering instances. Its counterexamples linearise to sequential paths that
replay on spec (and through `kafkaverify replay`); it refutes fixes already refuted
sequentially at a smaller or equal depth; a pair that interferes never shares a step, and
without the interference constraints z3's "counterexample" is one the replay rejects; and on
the golden counterexamples of the three-replica fixes, the sets of their layering fired at
once reach the same states as the path itself. Chained steps (checkers/prove/steps.py,
the relaxed ∃-step semantics) pack those paths into far fewer steps and refute in them."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import z3

import checkers.prove.bmc as bmc_mod
from checkers.prove.bmc import bmc
from checkers.prove.encoding import Encoding
from checkers.prove.steps import (chain_order, chain_passes, fire, interferes,
                                  interfering_pairs, parallel_length, parallel_transition,
                                  read_write_sets)
from checkers.prove.symstate import variables
from spec import Model, make_config
from spec.invariants import selected, violated
from spec.model import normalize_versions as canon

ROOT = Path(__file__).resolve().parent.parent
SMALL = {"records": 1, "crashes": 1, "elections": 1, "losses": 0}
# (generation, without, bounds, invariant, sequential depth, parallel depth)
CASES = [
    ("v0.10", (), SMALL, "MinIsrDurability", 2, 2),
    ("current", ("min-isr-hw",), SMALL, "MinIsrDurability", 4, 3),
    ("current", ("maximal-isr",), {**SMALL, "min_isr": 1}, "ReplicationQuorumSuperset", 5, 5),
]


@pytest.mark.parametrize("gen,without,bounds,inv,seq,par", CASES,
                         ids=["v0.10", "without-min-isr-hw", "without-maximal-isr"])
def test_parallel_refutes_at_a_smaller_or_equal_depth_and_replays(gen, without, bounds, inv, seq, par):
    """Depth by depth over parallel steps: the invariant at its first parallel depth, never
    deeper than the sequential one (`seq`, which tests/test_prove_bmc_fixes.py and
    test_prove_por.py pin depth by depth), and the parallel path, linearised, replays on spec
    from the initial state to that violation."""
    model = Model(make_config(gen, without, **bounds))
    p = bmc(model, seq + 1, invariants=(inv,), time_limit=120, bits=8, steps="parallel")
    assert (p.status, p.invariant, p.depth, p.problem) == ("violation", inv, par, None)
    assert p.depth <= seq and len(p.steps) == p.depth and sum(p.steps) == len(p.actions)
    st = model.initial()
    for a in p.actions:
        assert a in model.enabled(st), a.describe()
        st = model.step(st, a)
    assert violated(model.config, st, selected(model.config, (inv,)))[0] == inv


def test_a_parallel_trace_replays_through_the_cli(tmp_path):
    """min-isr-hw's counterexample takes 4 actions in 3 parallel steps (one step fires two);
    `kafkaverify replay` reproduces the written trace."""
    def kv(*args):
        return subprocess.run([sys.executable, "-m", "kafkaverify", *args], capture_output=True,
                              text=True, cwd=ROOT, timeout=240)
    r = kv("prove", "--without", "min-isr-hw", "--brokers", "2", "--log-length", "1",
           "--crashes", "1", "--elections", "1", "--losses", "0", "--depth", "4",
           "--invariant", "MinIsrDurability", "--parallel-steps", "--out", str(tmp_path))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "BMC depth 3, parallel steps" in r.stdout and "4 actions in 3 parallel steps" in r.stdout
    r = kv("prove", "--without", "min-isr-hw", "--brokers", "2", "--log-length", "1",
           "--crashes", "1", "--elections", "1", "--losses", "0", "--depth", "2",
           "--invariant", "MinIsrDurability", "--chained-steps")
    assert r.returncode == 1 and "BMC depth 1, chained steps" in r.stdout, r.stdout + r.stderr
    (trace,) = tmp_path.glob("*.jsonl")
    rep = subprocess.run([sys.executable, "-m", "kafkaverify", "replay", str(trace)],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert rep.returncode == 1 and "VIOLATION of MinIsrDurability" in rep.stdout, rep.stdout
    bad = kv("prove", "--brokers", "2", "--parallel-steps")
    assert bad.returncode == 3 and "Traceback" not in bad.stderr


def _inst(enc: Encoding, kind: str, b: int, via: int = -1) -> int:
    return next(i for i, x in enumerate(enc.insts) if (x.kind, x.b, x.via) == (kind, b, via))


def test_an_interfering_pair_never_shares_a_step():
    """A leader's write and its follower's fetch interfere (the fetch reads the log the write
    grows): one parallel step from a state where both are enabled cannot fire both, and can
    without the interference constraints."""
    model = Model(make_config("current", (), brokers=2, **SMALL))
    enc = Encoding(model.config)
    rw = read_write_sets(enc)
    a, b = _inst(enc, "Produce", 0), _inst(enc, "FetchRequest", 1, via=0)
    assert interferes(rw[a], rw[b])
    s0 = enc.from_state(model.initial())
    assert enc.insts[a].guard(s0, enc.insts[a]) and enc.insts[b].guard(s0, enc.insts[b])
    conflicts = sorted(interfering_pairs(rw))
    assert (min(a, b), max(a, b)) in conflicts
    for pairs, want in ((conflicts, z3.unsat), ([], z3.sat)):
        f = [z3.Bool(f"f.{i}") for i in range(len(enc.insts))]
        sol = z3.Solver()
        sol.add(parallel_transition(enc, s0, variables(enc, "t"), f, pairs))
        sol.add(f[a], f[b])
        assert sol.check() == want


def test_without_the_interference_constraints_the_replay_rejects_the_path(monkeypatch):
    """Soundness rests on the interference constraints and the replay. With every pair allowed
    to share a step, z3 claims ReplicationQuorumSuperset one parallel step earlier than it is
    (depth 4; the test above shows depth 4 clean with the constraints), and the replay on spec
    reports the disagreement instead of a counterexample."""
    model = Model(make_config("current", ("maximal-isr",), **{**SMALL, "min_isr": 1}))
    monkeypatch.setattr(bmc_mod, "interfering_pairs", lambda rw: set())
    r = bmc(model, 5, invariants=("ReplicationQuorumSuperset",), time_limit=120, bits=8,
            steps="parallel")
    assert r.status == "violation" and r.problem is not None, (r.problem, r.steps)
    assert len(r.steps) <= 4


GOLDEN = [("isr-expand-epoch-start", 14, 12, 3), ("fetch-epoch-fencing", 19, 16, 4)]


@pytest.mark.parametrize("fix,length,layers,chained", GOLDEN, ids=["kafka-7128", "kip-320"])
def test_golden_paths_layer_into_parallel_steps_that_reach_the_same_states(fix, length, layers, chained):
    """The golden counterexample, shrunk at its tight bounds (THREE_TIGHT), layered
    into parallel steps (each action one past the latest earlier one it interferes with):
    that many layers, and each layer fired at once (steps.fire) reaches spec's state after
    the layer's actions one by one, ending in the violation. In chained steps it fits in
    far fewer."""
    from checkers.prove.tight_bounds import THREE_TIGHT, golden_instances
    inv = next(c for c in THREE_TIGHT if c[0] == fix)[2]
    model, enc, path, seq = golden_instances(fix)
    assert len(path) == length
    rw = read_write_sets(enc)
    assert parallel_length(seq, rw) == layers
    assert chain_passes(seq, rw, chain_order(enc)) == chained
    level = []
    for p, a in enumerate(seq):
        level.append(1 + max((level[q] for q in range(p) if interferes(rw[seq[q]], rw[a])), default=0))
    s, d = model.initial(), enc.from_state(model.initial())
    for k in range(1, layers + 1):
        layer = [p for p in range(len(seq)) if level[p] == k]
        d = fire(enc, d, [seq[p] for p in layer])
        for p in layer:
            s = model.step(s, path[p])
        assert not d[("g", "oob")] and canon(enc.to_state(d)) == canon(s), k
    assert violated(model.config, s, selected(model.config, (inv,)))[0] == inv


@pytest.mark.parametrize("gen,without,bounds,inv,depth", [
    ("current", ("min-isr-hw",), SMALL, "MinIsrDurability", 1),
    ("current", ("maximal-isr",), {**SMALL, "min_isr": 1}, "ReplicationQuorumSuperset", 2),
], ids=["without-min-isr-hw", "without-maximal-isr"])
def test_chained_steps_refute_in_fewer_steps_and_replay(gen, without, bounds, inv, depth):
    """Chained steps (any subsequence of the instances in steps.CHAIN_ORDER, each seeing its
    predecessors' state): min-isr-hw's 4-action counterexample fits in one step, maximal-isr's
    in two; replayed on spec (bmc compares spec's state with z3's after every step)."""
    model = Model(make_config(gen, without, **bounds))
    r = bmc(model, depth + 1, invariants=(inv,), time_limit=120, bits=8, steps="chained")
    assert (r.status, r.invariant, r.depth, r.problem) == ("violation", inv, depth, None)
    assert sum(r.steps) == len(r.actions) >= 4
    st = model.initial()
    for a in r.actions:
        assert a in model.enabled(st), a.describe()
        st = model.step(st, a)
    assert violated(model.config, st, selected(model.config, (inv,)))[0] == inv


# The four three-replica fixes at their tight bounds (checkers/prove/tight_bounds.py THREE_TIGHT), each one
# chained-step query at the chained length of its golden path, the path replayed on spec state by
# state (over single steps, BMC had no answer at KAFKA-7128's length 14 in 1,200 s).
# - KAFKA-7128: LeaderCandidateCompleteness, 14 actions in 3 steps (14 s in the three-steps bench
#   at load 8; the explorer's breadth-first search: 47 s). In the default run.
# - KIP-320: StrongIsr at depth 4 (215 s at load 7, where the explorer found nothing in 240 s).
# - KIP-279 (unflushed loss): StrongIsr at depth 6 (61 s at load 2; no answer in 240 s at load 8).
# - KAFKA-7164: LogMatching at depth 9 (238 s at load 3).
# The slow ones: `pytest -m slow tests/test_prove_steps.py`.
@pytest.mark.parametrize("fix, depth, bits, limit, at_least", [
    ("isr-expand-epoch-start", 3, 5, 600, 14),
    pytest.param("fetch-epoch-fencing", 4, 6, 1200, 1, marks=pytest.mark.slow),
    pytest.param("epoch-end-offset", 6, 6, 1200, 1, marks=pytest.mark.slow),
    pytest.param("truncate-on-epoch-change", 9, 6, 1800, 1, marks=pytest.mark.slow),
], ids=["kafka-7128", "kip-320", "kip-279", "kafka-7164"])
def test_chained_steps_refute_the_three_replica_fixes(fix, depth, bits, limit, at_least):
    from checkers.prove.tight_bounds import THREE_TIGHT
    _, bounds, inv, _, slots, epochs = next(c for c in THREE_TIGHT if c[0] == fix)
    model = Model(make_config("current", (fix,), **bounds))
    r = bmc(model, depth, invariants=(inv,), time_limit=limit, one_query=True, bits=bits,
            slots=slots, epochs=epochs, steps="chained")
    assert (r.status, r.invariant, r.problem) == ("violation", inv, None)
    assert len(r.steps) <= depth and sum(r.steps) == len(r.actions) >= at_least
    st = model.initial()
    for a in r.actions:
        assert a in model.enabled(st), a.describe()
        st = model.step(st, a)
    assert violated(model.config, st, selected(model.config, (inv,)))[0] == inv
