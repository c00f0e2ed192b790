"""What `kafkaverify check` leaves for a CI system: JUnit XML (one test case per stage, with its
time; a failing one carries the story and the reproduce command), the JSON results, and an
artefacts folder (counterexample traces, one HTML page per counterexample, HTML reports of the
golden histories) with one HTML summary page that links them all.

Rendered from the stage results only (STYLE 11): the suite decides, this module writes files.
"""
from __future__ import annotations

import html
import json
import os
import re
import shlex
import shutil
import socket
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from checkers.history.report_html import render
from checkers.history.oracle.check import check_history
from checkers.model_trace import write_trace
from kafkaverify import exitcodes
from kafkaverify.reports.story import story_lines
from traces.history import load

# JUnit attribute/text must be XML 1.0 characters; drop the few control characters a story
# could carry (the schema readers reject them).
_BAD_XML = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f]")


@dataclass
class Artefact:
    label: str
    path: Path


@dataclass
class Outcome:
    """One stage's result with its budget row and the files written for it."""
    result: object              # kafkaverify.suite.stages.StageResult
    family: str
    story: str = ""
    artefacts: list[Artefact] = field(default_factory=list)

    @property
    def reproduce_check(self) -> str:
        return f"kafkaverify check --stage {shlex.quote(self.stage_name)}"

    stage_name: str = ""


def slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9.]+", "-", name).strip("-").lower()


def story(result, cause: bool = True) -> str:
    """The text a reader of a failing test case needs: what was expected, what happened, and
    the counterexample's story when there is one; with `cause`, a harness failure's traceback
    (for the reports; the console shows the one-line detail)."""
    ev = result.evidence
    lines = [f"{result.name}: {result.verdict} -- {result.detail}"]
    if isinstance(ev, tuple) and getattr(ev[1], "path", None):
        r = ev[1]
        lines += story_lines(r.path, r.states, r.invariant, r.message)
    elif result.verdict == "fail" and isinstance(ev, tuple):
        lines.append("The search found no violation where the fix's bug used to show: the stage "
                     "no longer shows that the fix is needed (the model or the bounds changed).")
    tb = getattr(result, "cause", "")
    if tb and cause:
        lines += ["The stage's harness raised before it could decide; its traceback:", tb.rstrip()]
    return "\n".join(lines)


# --- artefacts -------------------------------------------------------------------------------
def _counterexample_page(title: str, text: str, trace_name: str | None, reproduce: str) -> str:
    link = f'<p>trace: <a href="{html.escape(trace_name)}">{html.escape(trace_name)}</a> ' \
           f'(replay: <code>kafkaverify replay {html.escape(trace_name)}</code>)</p>' if trace_name else ""
    return (f"<!doctype html><meta charset=utf-8><title>{html.escape(title)}</title>"
            f"<style>body{{font:14px system-ui,sans-serif;margin:16px}}pre{{background:#fafafa;"
            f"border:1px solid #eee;padding:8px}}</style><h1>{html.escape(title)}</h1>{link}"
            f"<p>reproduce: <code>{html.escape(reproduce)}</code></p><pre>{html.escape(text)}</pre>")


def write_artefacts(outcome: Outcome, folder: Path) -> None:
    """Counterexample trace + its HTML story; golden histories' HTML reports; a failing golden
    model trace copied beside them."""
    r = outcome.result
    ev = r.evidence
    base = slug(outcome.stage_name)
    if isinstance(ev, tuple) and getattr(ev[1], "path", None):
        cfg, res = ev
        trace = folder / f"{base}.jsonl"
        write_trace(trace, cfg, res.path, res.states, (res.invariant, res.message), command=r.reproduce)
        page = folder / f"{base}.html"
        page.write_text(_counterexample_page(outcome.stage_name, outcome.story, trace.name, r.reproduce),
                        encoding="utf-8")
        outcome.artefacts += [Artefact("counterexample (HTML)", page), Artefact("trace", trace)]
    elif isinstance(ev, list) and ev and str(ev[0].name).startswith("history-"):
        for p in ev:
            h = load(p)
            page = folder / f"{p.stem}.html"
            page.write_text(render(h, check_history(h), title=p.name), encoding="utf-8")
            outcome.artefacts.append(Artefact(f"report {p.stem}", page))
    elif isinstance(ev, list) and r.verdict != "pass":
        for p in ev:
            dst = folder / Path(p).name
            shutil.copyfile(p, dst)
            outcome.artefacts.append(Artefact("trace", dst))


# --- JUnit XML -------------------------------------------------------------------------------
def _clean(s: str) -> str:
    return _BAD_XML.sub("?", s)


def junit_xml(outcomes: list[Outcome], budget: str, seconds: float) -> bytes:
    """<testsuites><testsuite name=kafkaverify-check-BUDGET> one <testcase> per stage. A failing
    stage is a <failure> (a violated expectation), an inconclusive one an <error> (exit 2: not
    shown either way); the body holds the story and the reproduce commands."""
    n = len(outcomes)
    fails = sum(o.result.verdict == "fail" for o in outcomes)
    errors = sum(o.result.verdict == "unknown" for o in outcomes)
    root = ET.Element("testsuites", name="kafkaverify check", tests=str(n), failures=str(fails),
                      errors=str(errors), time=f"{seconds:.3f}")
    suite = ET.SubElement(root, "testsuite", name=f"kafkaverify-check-{budget}", tests=str(n),
                          failures=str(fails), errors=str(errors), skipped="0", time=f"{seconds:.3f}",
                          timestamp=time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()),
                          hostname=socket.gethostname())
    props = ET.SubElement(suite, "properties")
    ET.SubElement(props, "property", name="budget", value=budget)
    for o in outcomes:
        r = o.result
        case = ET.SubElement(suite, "testcase", name=o.stage_name, classname=f"kafkaverify.{o.family}",
                             time=f"{r.seconds:.3f}")
        repro = f"reproduce: {o.reproduce_check}" + (f"\n       or: {r.reproduce}" if r.reproduce else "")
        files = "".join(f"\n{a.label}: {a.path}" for a in o.artefacts)
        if r.verdict == "pass":
            ET.SubElement(case, "system-out").text = _clean(f"{r.detail}\n{repro}{files}")
        else:
            tag = "failure" if r.verdict == "fail" else "error"
            el = ET.SubElement(case, tag, type=r.verdict, message=_clean(r.detail[:500]))
            el.text = _clean(f"{o.story}\n\n{repro}{files}")
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)


# --- HTML summary ----------------------------------------------------------------------------
def summary_html(outcomes: list[Outcome], budget: str, seconds: float, page: Path) -> str:
    colour = {"pass": "#2e7d32", "fail": "#c62828", "unknown": "#ef6c00"}
    rows = []
    for o in outcomes:
        r = o.result
        links = " ".join(f'<a href="{html.escape(_rel(a.path, page))}">{html.escape(a.label)}</a>'
                         for a in o.artefacts)
        rows.append(f"<tr><td>{html.escape(o.stage_name)}</td><td>{html.escape(o.family)}</td>"
                    f"<td style='color:{colour[r.verdict]}'><b>{r.verdict}</b></td><td>{r.seconds:.1f}</td>"
                    f"<td>{html.escape(r.detail)}</td><td><code>{html.escape(o.reproduce_check)}</code></td>"
                    f"<td>{links}</td></tr>")
    verdicts = [o.result.verdict for o in outcomes]
    overall = "fail" if "fail" in verdicts else "unknown" if "unknown" in verdicts else "pass"
    return (f"<!doctype html><meta charset=utf-8><title>kafkaverify check ({budget})</title>"
            f"<style>body{{font:14px system-ui,sans-serif;margin:16px}}table{{border-collapse:collapse}}"
            f"td,th{{border:1px solid #ddd;padding:2px 8px;text-align:left;vertical-align:top}}</style>"
            f"<h1>kafkaverify check, budget {budget}: <span style='color:{colour[overall]}'>{overall}</span></h1>"
            f"<p>{len(outcomes)} stages in {seconds:.1f} s</p><table><tr><th>stage</th><th>family</th>"
            f"<th>verdict</th><th>seconds</th><th>detail</th><th>reproduce</th><th>artefacts</th></tr>"
            + "".join(rows) + "</table>")


def _rel(target: Path, page: Path) -> str:
    return Path(os.path.relpath(target.resolve(), page.resolve().parent)).as_posix()


def write_outputs(outcomes: list[Outcome], budget: str, seconds: float, *, junit: str | None,
                  json_out: str | None, html_out: str | None, artefacts: str | None) -> list[str]:
    """Writes what was asked for; returns the paths written. A path that cannot be written is a
    usage error (exit 3), not a traceback."""
    written: list[str] = []
    try:
        if artefacts:
            folder = Path(artefacts)
            folder.mkdir(parents=True, exist_ok=True)
            for o in outcomes:
                write_artefacts(o, folder)
            html_out = html_out or str(folder / "index.html")
        if junit:
            Path(junit).write_bytes(junit_xml(outcomes, budget, seconds))
            written.append(junit)
        if json_out:
            Path(json_out).write_text(json.dumps(
                [{**o.result.to_json(), "stage": o.stage_name, "family": o.family,
                  "artefacts": [str(a.path) for a in o.artefacts]} for o in outcomes], indent=2))
            written.append(json_out)
        if html_out:
            Path(html_out).write_text(summary_html(outcomes, budget, seconds, Path(html_out)), encoding="utf-8")
            written.append(html_out)
    except OSError as e:
        raise exitcodes.InputError(f"cannot write {e.filename}: {e.strerror}") from None
    return written
