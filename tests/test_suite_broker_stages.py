"""The broker's stages of `kafkaverify check` (kafkaverify/suite/broker_stages.py): a tooth per
switchable fix, a clean stage per arranged scenario, every one budgeted and a JUnit case. The
verdict logic is tested on given divergences; the slow tests run the scenarios on real brokers
(one cluster each): a broker without a fix fails the clean stage naming the divergence."""
from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from impl.rules import fixes_for
from kafkaverify.nemesis.scenarios import SCENARIOS
from kafkaverify.suite import broker_stages as bs
from kafkaverify.suite import budget
from kafkaverify.suite import stages as suite

ROOT = Path(__file__).resolve().parent.parent
CLIENT = {"idempotent-producer", "group-generation-fencing"}


def test_every_switchable_broker_fix_has_a_tooth_and_its_scenario_a_clean_stage():
    teeth = {fix for _n, fix, _sc, _e in bs.BROKER_TEETH}
    assert teeth == set(fixes_for("current")) - CLIENT
    clean = {sc for _n, sc in bs.BROKER_CLEAN}
    # min-isr-rejoin runs min-isr-shrink's steps first
    assert {sc for _n, _f, sc, _e in bs.BROKER_TEETH} - {"min-isr-shrink"} == clean
    assert len({n for n, *_ in bs.BROKER_TEETH}) == len(bs.BROKER_TEETH) == 10
    assert clean | {"min-isr-shrink"} == set(SCENARIOS)
    names = [n for n, _ in suite.stages()]
    broker = [n for n, *_ in bs.BROKER_TEETH] + [n for n, _ in bs.BROKER_CLEAN]
    assert set(broker) <= set(names) and set(broker) <= set(budget.TABLE)
    quick = {s.name for s in budget.select("quick")}
    assert quick & set(broker), "the quick budget keeps a representative broker tooth and clean stage"


def _given(monkeypatch, ds):
    def run(scenario, without):
        d = Path(__import__("tempfile").mkdtemp(prefix="kv-test-"))
        return list(ds), d
    monkeypatch.setattr(bs, "_run", run)


def test_a_tooth_passes_on_its_divergence_and_names_what_else_it_found(monkeypatch):
    name, fix, sc, expect = next(t for t in bs.BROKER_TEETH if t[1] == "truncate-on-epoch-change")
    _given(monkeypatch, ["broker 1 became follower of epoch 2 and kept its log without truncating"])
    assert bs.broker_tooth(fix, sc, expect)[0] == "pass"
    _given(monkeypatch, ["broker 0 served a Fetch of leader epoch 1 from replica 1 in epoch 2"])
    verdict, _s, detail = bs.broker_tooth(fix, sc, expect)
    assert verdict == "fail"
    assert detail.startswith("expected a divergence saying 'kept its log without truncating', found broker 0 "
                             "served a Fetch"), detail
    _given(monkeypatch, [])
    verdict, _s, detail = bs.broker_tooth(fix, sc, expect)
    assert verdict == "fail" and "found none: conformance no longer catches a broker without " \
                                 "truncate-on-epoch-change" in detail
    _given(monkeypatch, ["broker 1 became follower of epoch 2 and kept its log without truncating",
                         "broker 0 advanced its HW to 3 below min.insync.replicas 2"])
    verdict, _s, detail = bs.broker_tooth(fix, sc, expect)
    assert verdict == "fail" and "found broker 0 advanced its HW" in detail and "(the brokers' logs" in detail


def test_a_clean_stage_fails_naming_the_divergence(monkeypatch):
    _given(monkeypatch, ["broker 0 advanced its HW to 3 below min.insync.replicas 2"])
    verdict, _s, detail = bs.broker_clean("min-isr-rejoin")
    assert verdict == "fail"
    assert detail.startswith("expected no divergence, found 1: broker 0 advanced its HW to 3 below "
                             "min.insync.replicas 2"), detail


# the clean stage that judges each fix's decisions (min-isr-rejoin runs min-isr-shrink's steps)
CLEAN_FOR = {sc: sc for _n, sc in bs.BROKER_CLEAN} | {"min-isr-shrink": "min-isr-rejoin"}


@pytest.mark.slow
@pytest.mark.timeout(180)
@pytest.mark.parametrize("tooth", bs.BROKER_TEETH, ids=lambda t: t[1])
def test_a_broker_without_a_fix_fails_its_clean_stage_naming_the_divergence(tooth):
    """What `check --budget full` reports for a broker that lost one of its fixes."""
    _name, fix, scenario, expect = tooth
    verdict, _s, detail = bs.broker_clean(CLEAN_FOR[scenario], without=fix)
    assert verdict == "fail" and detail.startswith("expected no divergence, found ") and expect[0] in detail, detail
    import shutil
    shutil.rmtree(detail.rsplit("(the brokers' logs and traces: ", 1)[1].rstrip(")"), ignore_errors=True)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_check_runs_a_broker_tooth_and_its_clean_stage_with_a_junit_case_each(tmp_path):
    teeth = "real brokers without fetch-epoch-fencing (follower-drop)"
    r = subprocess.run([sys.executable, "-m", "kafkaverify", "check", "--stage", teeth, "--stage",
                        "real brokers clean: follower-drop", "--junit", str(tmp_path / "r.xml")],
                       capture_output=True, text=True, cwd=ROOT, timeout=280)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    cases = ET.parse(tmp_path / "r.xml").getroot().findall("./testsuite/testcase")
    assert [c.get("name") for c in cases] == [teeth, "real brokers clean: follower-drop"]
    assert [c.get("classname") for c in cases] == ["kafkaverify.kip-320", "kafkaverify.kafka-7164"]
    assert "served a Fetch" in cases[0].find("system-out").text
