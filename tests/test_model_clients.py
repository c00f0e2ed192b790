"""Producers, consumer groups and committed offsets in the reference model (spec/producer.py,
spec/group.py): the explorer finds the classic client anomalies as shortest counterexamples
where the settings or the protocol allow them, and nothing where Kafka promises; a model
without clients is what it was; model runs written as client histories are judged alike by
the history checkers (differential, >= 1,000 runs)."""
import collections
import subprocess
import sys
from pathlib import Path

import pytest

from checkers.explore import explore
# The heavier explorations (one in flight never reorders; idempotence clean across a leader
# move; the v0.10 offsets regression) run as `kafkaverify check` stages and in
# `python -m benchmarks.model_clients`, not here.
from checkers.golden import GROUP_BOUNDS, PRODUCER_CONNECTION_BOUNDS, PRODUCER_FAULT_BOUNDS
from checkers.history.oracle.check import check_history
from checkers.model_history import (differential_invariants, expected_anomalies, history_of_run,
                                    random_run)
from kafkaverify.suite.stages import IDEMPOTENT_5_BOUNDS, IDEMPOTENT_6_BOUNDS
from spec import Model, make_config
from spec.invariants import active, unpromised
from spec.symmetry import canonical

ROOT = Path(__file__).resolve().parents[1]


def _explore(generation, without=(), invariants=None, **bounds):
    return explore(Model(make_config(generation, without, **bounds)), invariants=invariants,
                   time_limit=240)


def test_without_clients_the_model_is_unchanged():
    cfg = make_config("current")
    s = Model(cfg).initial()
    assert s.writes == () and s.prods == () and s.grp == ()
    assert "idempotent-producer" not in cfg.fixes and "group-generation-fencing" not in cfg.fixes
    assert not any(k in cfg.to_json() for k in ("producers", "consumers", "max_in_flight"))
    assert not {i.name for i in active(cfg)} & {"ProducerSendOrder", "GroupFencedNeverCommits"}
    assert "Produce" in {a.kind for a in Model(cfg).enabled(s)}


def test_reordering_needs_retries_two_in_flight_and_no_idempotence():
    r = _explore("current", ("idempotent-producer",), ("ProducerSendOrder",), **PRODUCER_FAULT_BOUNDS)
    assert r.status == "violation" and r.invariant == "ProducerSendOrder" and len(r.path) == 14
    kinds = [a.kind for a in r.path]
    assert kinds.count("Send") == 3            # two batches, then the retry of the first


def test_duplicate_needs_a_retry_without_idempotence():
    r = _explore("current", ("idempotent-producer",), ("ProducerExactlyOnce",), **PRODUCER_CONNECTION_BOUNDS)
    assert r.status == "violation" and len(r.path) == 8
    # written, the connection drops while the leader waits for its follower, written again
    assert [a.kind for a in r.path][:5] == ["Send", "HandleProduce", "Disconnect", "Send", "HandleProduce"]
    none = _explore("current", ("idempotent-producer",), ("ProducerExactlyOnce",),
                    **{**PRODUCER_CONNECTION_BOUNDS, "retries": 0})
    assert none.status == "exhausted"


@pytest.mark.parametrize("mif", [1, 2, 3, 4, 5])
def test_idempotence_keeps_order_and_exactly_once_up_to_five_in_flight(mif):
    r = _explore("current", **{**IDEMPOTENT_5_BOUNDS, "records": mif, "max_in_flight": mif})
    assert r.status == "exhausted", (r.invariant, r.message)


def test_idempotence_with_six_in_flight_duplicates_a_batch_that_left_the_cache():
    r = _explore("current", **IDEMPOTENT_6_BOUNDS)
    assert r.status == "violation" and r.invariant == "ProducerExactlyOnce", r.status
    assert "record 0" in r.message and "BumpEpoch" in [a.kind for a in r.path]


def test_a_fenced_generation_commits_only_without_the_fence():
    r = _explore("current", ("group-generation-fencing",), **GROUP_BOUNDS)
    assert r.status == "violation" and r.invariant == "GroupFencedNeverCommits"
    assert _explore("current", **GROUP_BOUNDS).status == "exhausted"


def test_delivery_modes_promise_one_thing_each():
    after = make_config("current", consumers=1, records=2, crashes=1, elections=0)
    assert "GroupAtMostOnce" in unpromised(after) and "GroupAtLeastOnce" not in unpromised(after)
    r = _explore("current", invariants=("GroupAtMostOnce",), consumers=1, records=2, crashes=1, elections=0)
    assert r.status == "violation" and r.invariant == "GroupAtMostOnce"   # a crash re-delivers
    r = _explore("current", invariants=("GroupAtLeastOnce",), consumers=1, records=2, crashes=1,
                 elections=0, commit="before")
    assert r.status == "violation" and r.invariant == "GroupAtLeastOnce"  # committed, never processed


def test_producers_are_symmetric():
    cfg = make_config("current", producers=2, records=1, crashes=0, elections=0, losses=0)
    m = Model(cfg)
    s = m.initial()
    first = m.step(s, next(a for a in m.enabled(s) if a.kind == "InitProducerId" and a.b == 0))
    second = m.step(s, next(a for a in m.enabled(s) if a.kind == "InitProducerId" and a.b == 1))
    assert first != second and canonical(first) == canonical(second)


def test_consumers_are_symmetric():
    cfg = make_config("current", consumers=2, records=1, crashes=0, elections=0, losses=0)
    m = Model(cfg)
    s = m.initial()
    first = m.step(s, next(a for a in m.enabled(s) if a.kind == "Join" and a.b == 0))
    second = m.step(s, next(a for a in m.enabled(s) if a.kind == "Join" and a.b == 1))
    assert first != second and canonical(first) == canonical(second)


def test_cli_names_what_the_settings_do_not_promise():
    r = subprocess.run([sys.executable, "-m", "kafkaverify", "explore", "--producers", "1",
                        "--records", "1", "--crashes", "0", "--elections", "0", "--retries", "1",
                        "--idempotence", "off", "--invariant", "ProducerExactlyOnce"],
                       capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "ProducerExactlyOnce: not promised" in r.stdout and "checked because asked for" in r.stdout
    assert "reproduce: kafkaverify explore --generation current --without idempotent-producer" in r.stdout
    bad = subprocess.run([sys.executable, "-m", "kafkaverify", "explore", "--producers", "1",
                          "--acks", "1"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert bad.returncode == 3 and "idempotence needs acks all" in bad.stderr + bad.stdout


DIFFERENTIAL = [
    ("current", ("idempotent-producer",), dict(producers=1, records=3, max_in_flight=2, retries=1,
                                               crashes=1, elections=1, min_isr=1)),
    ("current", ("idempotent-producer",), dict(producers=2, records=2, max_in_flight=2, retries=2,
                                               crashes=1, elections=1, min_isr=1)),
    ("current", (), dict(producers=1, records=3, max_in_flight=3, retries=2, crashes=1, elections=1,
                         min_isr=1)),
    ("current", (), IDEMPOTENT_6_BOUNDS),
    ("current", (), dict(consumers=2, records=2, crashes=1, elections=1)),
    ("current", ("group-generation-fencing",), dict(consumers=2, records=3, crashes=1, elections=0)),
    ("current", (), dict(consumers=2, records=2, crashes=1, commit="before")),
]
RUNS = 150          # per configuration: 1,050 runs in all


def test_model_runs_as_histories_agree_with_the_history_checkers():
    """Each model run (seeded random walk, stopped at its first violation) is written as a
    client history and checked: a violation must show as its anomaly (a reordering or duplicate
    the settings permit as a note, the history valid), a clean run must be valid."""
    seen = collections.Counter()
    for generation, without, bounds in DIFFERENTIAL:
        cfg = make_config(generation, without, **bounds)
        model = Model(cfg)
        model.invariants = differential_invariants(cfg)
        for seed in range(RUNS):
            path, states, v = random_run(model, seed, 60)
            verdict = check_history(history_of_run(cfg, model.initial(), path, states))
            kinds = {a.type for a in verdict.anomalies}
            kind, invalid = expected_anomalies(cfg, v)
            where = f"{generation} {without} {bounds} seed {seed}: model {v}, history {verdict.status} {sorted(kinds)}"
            if invalid:
                assert verdict.status == "invalid" and kind in kinds, where
            else:
                assert verdict.status == "valid", where
                if kind is not None:       # permitted by the settings: shown as a note
                    assert kind in {n.type for n in verdict.notes}, where
            seen[v[0] if v else "clean"] += 1
    assert sum(seen.values()) >= 1000
    # the comparison is not vacuous: every kind the configurations can show did show
    assert {"clean", "ProducerExactlyOnce", "ProducerSendOrder", "GroupFencedNeverCommits"} <= set(seen), seen
