"""BMC per protocol fix: for v0.10 and for `current --without F` (each replication fix the z3
encoding can express; isr-broker-epoch under `kip-966`, where its bug shows with a lost disk
and `current` itself does not lose data; eligible-leader-replicas is `kip-966` without it), bounded model checking refutes a named invariant at a stated depth, and
the z3 path, replayed here on the explicit model (spec's `step` from `Model(config).initial()`),
ends in that invariant's violation. Bounds are the smallest at which the bug shows; the depth
is the explorer's shortest counterexample at the same bounds (BMC's first depth must equal it).
"""
from __future__ import annotations

import pytest

from checkers.prove.bmc import bmc
from spec import Model, make_config
from spec.invariants import violated

SMALL = {"records": 1, "crashes": 1, "elections": 1, "losses": 0}
# a paused controller whose session expires, and no crashes (a crash would end the pause)
PAUSED = {**SMALL, "crashes": 0, "pauses": 1}
# Integer fields as 8-bit bit-vectors (checkers/prove/sym.py) where that halves the solve time:
# sound at these depths, where no field moves past 8 steps from values below 10.
BITS = {("controller-epoch-fencing",): 8}
# a follower that loses its disk while its old incarnation's fetch proposes it for the ISR
DISK = {**SMALL, "disk_loss": True}
CASES = [  # (generation, without, bounds, invariant, depth)
    ("v0.10", (), SMALL, "MinIsrDurability", 2),
    ("current", ("min-isr-hw",), SMALL, "MinIsrDurability", 4),
    ("current", ("maximal-isr",), {**SMALL, "min_isr": 1}, "ReplicationQuorumSuperset", 5),
    ("current", ("controller-epoch-fencing",), PAUSED, "UniqueLeaderPerEpoch", 8),
]


@pytest.mark.parametrize("gen,without,bounds,inv,depth", CASES,
                         ids=[c[0] + "".join("-" + w for w in c[1]) for c in CASES])
def test_bmc_refutes_and_spec_replays(gen, without, bounds, inv, depth):
    refute_and_replay(gen, without, bounds, inv, depth, time_limit=60, bits=BITS.get(without, 0))


@pytest.mark.slow
def test_bmc_refutes_without_epoch_truncation():
    """Depth 10: about a minute of z3 alone (two to three under load), so not in the default
    run. The explorer's shortest path at these bounds is 10 steps too."""
    refute_and_replay("current", ("epoch-truncation",), {**SMALL, "min_isr": 1}, "StrongIsr", 10,
                      time_limit=600)


@pytest.mark.slow
def test_bmc_refutes_without_isr_broker_epoch():
    """Depth 11 (the explorer's shortest at these bounds, as the golden trace
    model-kip903-empty-disk-joins-isr.jsonl at the default ones): with 6-bit fields, one
    in-flight request slot and one leader epoch (the path needs no LeaderAndIsr, so no epoch
    change) and partial-order reduction, 40-60 s of z3 on a loaded machine, and again for the
    depth-10 check: not in the default run."""
    refute_and_replay("kip-966", ("isr-broker-epoch",), DISK, "StrongIsr", 11, time_limit=900,
                      bits=6, slots=1, epochs=1, por=True)


def test_bmc_finds_the_lost_disk_path_in_one_query():
    """The default run's share of the row above: one query over paths of at most 11 steps (no
    depth-by-depth search, so it does not show that 10 is clean; the slow test does) finds
    KIP-903's violation, and the path replays on spec. 5-9 s on the loaded shared machine."""
    model = Model(make_config("kip-966", ("isr-broker-epoch",), **DISK))
    r = bmc(model, 11, invariants=("StrongIsr",), time_limit=120, bits=6, slots=1, epochs=1,
            por=True, one_query=True)
    assert r.status == "violation" and r.problem is None, (r.status, r.problem)
    replay_on_spec(model, r, "StrongIsr", 11)


# KIP-966: the only ISR member loses its unflushed tail in a power failure and is re-elected
# (golden trace model-kip966-last-replica-standing.jsonl); one LeaderAndIsr, leader epochs 0-1
POWER = {**SMALL, "unflushed_loss": True}
ELR_ENC = {"bits": 6, "slots": 1, "epochs": 2, "por": True}


@pytest.mark.slow
def test_bmc_refutes_without_eligible_leader_replicas():
    """Depth 10, the explorer's shortest at these bounds (and the golden trace's length): about
    14 s of z3 for depth 10 and 12 s for the clean depth 9 on the shared machine, so not in the
    default run."""
    refute_and_replay("kip-966", ("eligible-leader-replicas",), POWER, "AckedDurable", 10,
                      time_limit=900, **ELR_ENC)


def test_bmc_finds_the_last_replica_standing_in_one_query():
    """The default run's share of the row above: one query over paths of at most 10 steps
    finds the acknowledged record lost through the re-elected last replica (`kip-966` without
    ELR), and the path replays on spec. About 7 s."""
    model = Model(make_config("kip-966", ("eligible-leader-replicas",), **POWER))
    r = bmc(model, 10, invariants=("AckedDurable",), time_limit=120, one_query=True, **ELR_ENC)
    assert r.status == "violation" and r.problem is None, (r.status, r.problem)
    replay_on_spec(model, r, "AckedDurable", 10)


@pytest.mark.slow
def test_bmc_clean_with_isr_broker_epoch():
    """KIP-903's check refuses the lost disk's stale proposal: `kip-966` with the fix finds no
    violation of StrongIsr to depth 11 at the same bounds (those of the refutation, so the
    clean answer says as much as the refutation and no more)."""
    model = Model(make_config("kip-966", **DISK))
    assert bmc(model, 11, invariants=("StrongIsr",), time_limit=900, bits=6, slots=1, epochs=1,
               por=True).status == "clean"


def test_bmc_clean_with_controller_epoch_fencing():
    """The zombie controller's requests are fenced: `current` with the same pause finds no
    violation of UniqueLeaderPerEpoch to the depth where the fix's removal shows."""
    model = Model(make_config("current", **PAUSED))
    assert bmc(model, 8, invariants=("UniqueLeaderPerEpoch",), time_limit=600,
               bits=BITS[("controller-epoch-fencing",)]).status == "clean"


def refute_and_replay(gen, without, bounds, inv, depth, *, time_limit, bits=0, **enc):
    model = Model(make_config(gen, without, **bounds))
    r = bmc(model, depth, invariants=(inv,), time_limit=time_limit, bits=bits, **enc)
    assert r.status == "violation" and r.problem is None, (r.status, r.problem)
    assert (r.invariant, r.depth) == (inv, depth)
    replay_on_spec(model, r, inv, depth)
    # One step shorter, BMC finds nothing: the depth is the shortest.
    assert bmc(model, depth - 1, invariants=(inv,), time_limit=time_limit,
               bits=bits, **enc).status == "clean"


def replay_on_spec(model, r, inv, depth):
    """Replay independently of bmc's own check: every action enabled, the same successors,
    and the last state (only it) violates the invariant."""
    assert (r.invariant, len(r.actions)) == (inv, depth)
    invs = tuple(i for i in model.invariants if i.name == inv)
    s = model.initial()
    for k, (a, want) in enumerate(zip(r.actions, r.states), 1):
        assert a in model.enabled(s), f"step {k}: {a.describe()} not enabled in spec"
        s = model.step(s, a)
        assert s == want
        v = violated(model.config, s, invs)
        assert (v is not None) == (k == depth), (k, v)
    assert violated(model.config, s, invs)[0] == inv
