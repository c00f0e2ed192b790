"""`kafkaverify check` for CI: budgets from the declarative stage table, JUnit XML that validates
against the JUnit schema CI services read (tests/data/junit.xsd, the format as Jenkins and others accept it),
failing stages carrying their story and reproduce command, the artefacts folder and its HTML
summary page."""
from __future__ import annotations

import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import xmlschema

from kafkaverify.suite import budget
from kafkaverify.suite import stages as suite
from kafkaverify.reports.ci import Outcome, junit_xml, story, summary_html, write_outputs

ROOT = Path(__file__).resolve().parent.parent
XSD = ROOT / "tests" / "data" / "junit.xsd"


def cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "kafkaverify", *args], capture_output=True,
                          text=True, cwd=cwd or ROOT, timeout=600)


@pytest.fixture(scope="module")
def schema():
    return xmlschema.XMLSchema(str(XSD))


def test_every_stage_has_a_budget_row():
    names = [n for n, _ in suite.stages(quick=False)]
    missing = [n for n in names if n not in budget.TABLE]
    assert not missing, f"add a row to kafkaverify/suite/budget.py TABLE for: {missing}"
    assert not set(budget.TABLE) - set(names), "budget rows for stages that no longer exist"


def test_quick_budget_fits_and_keeps_a_tooth_per_family():
    rows = budget.TABLE.values()
    quick = [r for r in rows if "quick" in r.budgets]
    assert sum(r.cost_s for r in quick) <= budget.QUICK_LIMIT_S
    assert {r.family for r in rows} == {r.family for r in quick}
    assert all("full" in r.budgets for r in rows), "full runs every stage"


def test_unknown_stage_is_a_usage_error_listing_valid_names():
    r = cli("check", "--stage", "no-such-stage")
    assert r.returncode == 3 and "Traceback" not in r.stderr
    assert "valid stages" in r.stderr and "without min-isr-hw" in r.stderr and "golden histories" in r.stderr
    r = cli("check", "--budget", "nightly")
    assert r.returncode == 3 and "Traceback" not in r.stderr


def test_stage_selects_by_exact_name_family_or_part():
    assert [s.name for s in budget.select("full", ("without min-isr-hw",))] == ["without min-isr-hw"]
    fam = {s.name for s in budget.select("full", ("kip-101",))}
    assert {"v0.10 KIP-101 data loss", "golden model-kip101-s1-data-loss.jsonl"} <= fam
    # --stage reaches stages outside the quick budget, so every reproduce command works
    assert [s.name for s in budget.select("quick", ("current exhausted",))][0] == "current exhausted"


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    d = tmp_path_factory.mktemp("ci")
    t0 = time.monotonic()
    r = cli("check", "--budget", "quick", "--junit", str(d / "out.xml"), "--json", str(d / "out.json"),
            "--artifacts", str(d / "artefacts"))
    return r, d, time.monotonic() - t0


def test_quick_budget_passes_with_valid_junit_and_artefacts(quick_run, schema):
    r, d, secs = quick_run
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr
    assert "budget quick" in r.stdout
    schema.validate(str(d / "out.xml"))
    root = ET.parse(d / "out.xml").getroot()
    cases = root.findall("./testsuite/testcase")
    quick = [s.name for s in budget.select("quick")]
    assert [c.get("name") for c in cases] == quick
    assert all(float(c.get("time")) >= 0 for c in cases) and not root.findall(".//failure")
    # the artefacts: a trace and an HTML page per counterexample, the histories' reports, and
    # a summary page whose every link resolves
    art = d / "artefacts"
    assert (art / "without-min-isr-hw.jsonl").exists() and (art / "history-lost-write.html").exists()
    page = (art / "index.html").read_text()
    links = re.findall(r'href="([^"]+)"', page)
    assert len(links) >= 2 * 6 + 15 and all((art / h).exists() for h in links)
    replay = cli("replay", str(art / "without-min-isr-hw.jsonl"))
    assert replay.returncode == 1 and "MinIsrDurability" in replay.stdout
    print(f"quick budget: {secs:.1f} s wall")


def test_failing_stages_carry_story_and_reproduce_command(tmp_path, schema):
    # Real searches with the wrong expectation: a safe configuration where a violation is
    # expected, and a violation where none is.
    clean = suite._explore_stage("no tooth", "current", (), {"crashes": 1}, None, True, 120)
    broken = suite._explore_stage("unsafe", "current", ("min-isr-hw",), {}, None, False, 120)
    undecided = suite._explore_stage("cut short", "current", (), {}, None, False, 0.01)
    assert (clean.verdict, broken.verdict, undecided.verdict) == ("fail", "fail", "unknown")
    outs = [Outcome(x, "test", story(x), stage_name=x.name) for x in (clean, broken, undecided)]
    xml_bytes = junit_xml(outs, "quick", 1.0)
    schema.validate(xml_bytes.decode())
    root = ET.fromstring(xml_bytes)
    suite_el = root.find("testsuite")
    assert (suite_el.get("failures"), suite_el.get("errors")) == ("2", "1")
    f_clean, f_broken = root.findall(".//failure")
    assert "no longer shows that the fix is needed" in f_clean.text
    steps = len(broken.evidence[1].path)
    assert "VIOLATION of MinIsrDurability" in f_broken.text and f"counterexample ({steps} steps)" in f_broken.text
    assert f"  {steps:>3}. " in f_broken.text          # the numbered story, down to its last step
    assert "reproduce: kafkaverify check --stage unsafe" in f_broken.text
    assert "or: kafkaverify explore --generation current --without min-isr-hw" in f_broken.text
    assert root.find(".//error").get("type") == "unknown"
    written = write_outputs(outs, "quick", 1.0, junit=None, json_out=None, html_out=None,
                            artefacts=str(tmp_path / "a"))
    assert written == [str(tmp_path / "a" / "index.html")]
    assert (tmp_path / "a" / "unsafe.jsonl").exists() and "fail" in summary_html(outs, "quick", 1.0, tmp_path / "x.html")


def test_unwritable_junit_path_is_a_usage_error(tmp_path):
    r = cli("check", "--stage", "without min-isr-hw", "--junit", str(tmp_path / "no" / "such" / "dir" / "x.xml"))
    assert r.returncode == 3 and "cannot write" in r.stderr and "Traceback" not in r.stderr


def test_schema_rejects_what_ci_services_reject(schema):
    """The schema has teeth: a suite without its counts, or a case without a name, is refused."""
    ok = ('<testsuites><testsuite name="s" tests="1" failures="1" errors="0" time="1.5">'
          '<testcase name="c" classname="k" time="0.2"><failure message="m">story</failure>'
          '</testcase></testsuite></testsuites>')
    assert schema.is_valid(ok)
    assert not schema.is_valid(ok.replace(' failures="1"', ""))
    assert not schema.is_valid(ok.replace('<testcase name="c"', "<testcase"))
    assert not schema.is_valid(ok.replace('time="0.2"', 'time="soon"'))
