"""The audit's views, rendered from the Audit object only (house style §11): audit.json
(everything), audit.md (the table docs/audit.md shows) and audit.html (self-contained: inline
CSS, no script; a matrix coloured by verdict, each cell linking to its witness story on the
page, each story linking to its run's history report with the timeline, checkers/history/report_html.py)."""
from __future__ import annotations

import html
import json
import os
from pathlib import Path

from kafkaverify.audit.matrix import Audit, Cell
from kafkaverify.audit.settings import QUESTIONS
from kafkaverify.audit.txn import TXN_QUESTIONS, TXN_SHORT, broker_cell as txn_broker_cell, model_cell as txn_model_cell

Q_SHORT = {"reorder": "reorder", "duplicate": "dup", "loss": "loss"}


def _promise_text(s) -> str:
    p = s.promises()
    kept = [Q_SHORT[q] for q in QUESTIONS if p[q] is None]
    return "no " + "/".join(kept) if kept else "none"


def _model_cell(a: Audit, s, q: str) -> str:
    v = a.model.get(s, {}).get(q)
    return "not run" if v is None else v.short()


def _broker_cell(c: Cell) -> str:
    return c.summary(QUESTIONS, Q_SHORT)


def _anchor(*parts) -> str:
    return "w-" + "-".join(str(p).replace(".", "") for p in parts)


def _label(s) -> str:
    return s if isinstance(s, str) else s.label()


def txn_markdown(a: Audit) -> list[str]:
    """The transactional column: the model's answer per question, then each client's runs."""
    if not a.transactions:
        return []
    head = ["transactions", *(f"model: {TXN_SHORT[q]}" for q in TXN_QUESTIONS), *a.clients]
    cells = {c.client: c for c in a.txn_cells}
    row = ["`read_committed, acks=all, idempotence=on`",
           *(txn_model_cell(a.txn_model.get(q)) for q in TXN_QUESTIONS),
           *(txn_broker_cell(cells[c]) if c in cells else "not run" for c in a.clients)]
    return ["Transactional column: each client's transactional producer (transactions of 3 records across 3 "
            "partitions, committed or aborted by the seed) and a read_committed consumer under the same "
            "schedules; every question is promised (BROKEN: seen).", "",
            "| " + " | ".join(head) + " |", "|" + "---|" * len(head), "| " + " | ".join(row) + " |", ""]


def markdown(a: Audit) -> str:
    head = ["setting", "promised", "model: reorder", "model: dup", "model: loss", *a.clients]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in a.settings:
        row = [f"`{s.label()}`", _promise_text(s), *(_model_cell(a, s, q) for q in QUESTIONS),
               *(_broker_cell(a.cell(c, s)) for c in a.clients)]
        lines.append("| " + " | ".join(row) + " |")
    out = [f"Ordering audit: generation {a.generation}, seed {a.seed}, {len(a.schedules)} fault schedules "
           f"per cell (faults: crash, pause{', partition' if a.net else ''}), brokers 3, RF 3, min.insync.replicas 2.",
           "Broker cells count runs showing reordering / duplicates / loss (BROKEN: a promised one).", "",
           *(lines + [""] if a.settings else []), *txn_markdown(a)]
    dis = [(c, q, t) for c in a.cells for q in QUESTIONS for k, t in [a.agreement(c, q)] if k == "disagree"]
    cov = [(c, q, t) for c in a.cells for q in QUESTIONS for k, t in [a.agreement(c, q)] if k == "coverage"]
    out.append(f"Disagreements (broker shows what the model rules out): {len(dis) or 'none'}")
    out += [f"- {c.client} `{c.setting.label()}` {q}: {t}" for c, q, t in dis]
    out.append(f"Coverage gaps (the model finds it, the broker did not show it): {len(cov) or 'none'}")
    out += [f"- {c.client} `{c.setting.label()}` {q}: {t}" for c, q, t in cov]
    b = a.broken()
    out.append(f"Promises broken: {len(b) or 'none'}")
    out += [f"- {who} `{_label(s)}` {q}: {where}" for who, s, q, where in b]
    if a.stopped:
        out.append(f"Incomplete: {a.stopped}")
    if a.command:
        out += ["", f"Regenerate: `{a.command}`"]
    return "\n".join(out) + "\n"


def to_json(a: Audit) -> dict:
    def run_json(r):
        return {"index": r.index, "status": r.status, "dir": str(r.out_dir), "seconds": round(r.seconds, 2),
                "schedule": r.schedule.describe(), "questions": sorted(r.questions()), "other": r.other,
                "reason": r.reason}
    return {"generation": a.generation, "seed": a.seed, "clients": list(a.clients), "net": a.net,
            "schedules": [[e.describe() for e in ev] for ev in a.schedules], "stopped": a.stopped,
            "seconds": round(a.seconds, 1), "command": a.command,
            "model_seconds": [[list(k), round(v, 1)] for k, v in sorted(a.model_seconds.items())],
            "model": [{"setting": s.label(), **{q: v.to_json() for q, v in vs.items()}}
                      for s, vs in sorted(a.model.items())],
            "cells": [{"client": c.client, "setting": c.setting.label(), "refusal": c.refusal,
                       "counts": {q: c.count(q) for q in QUESTIONS}, "runs": [run_json(r) for r in c.runs],
                       "broken": [q for q in QUESTIONS if c.broken(q)], "other": c.other(),
                       "agreement": {q: list(a.agreement(c, q)) for q in QUESTIONS}} for c in a.cells],
            "transactional": None if not a.transactions else {
                "model": {q: v.to_json() for q, v in a.txn_model.items()},
                "cells": [{"client": c.client, "refusal": c.refusal, "counts": {q: c.count(q) for q in TXN_QUESTIONS},
                           "broken": [q for q in TXN_QUESTIONS if c.broken(q)], "runs": [run_json(r) for r in c.runs]}
                          for c in a.txn_cells]},
            "broken": [[w, _label(s), q, x] for w, s, q, x in a.broken()]}


CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:16px;color:#222}
h1{font-size:20px} h2{font-size:16px;margin-top:22px}
table{border-collapse:collapse} td,th{border:1px solid #ccc;padding:3px 7px;text-align:left;vertical-align:top}
th{background:#f3f3f3} td a{color:inherit;text-decoration:none;display:block}
.v-none{background:#c8e6c9}.v-permitted{background:#fff59d}.v-broken{background:#ef9a9a;font-weight:700}
.v-refused{background:#e0e0e0;color:#555}.v-unknown{background:#ffcc80}.v-coverage{background:#bbdefb}
.v-disagree{background:#ce93d8;font-weight:700}.v-agree{background:#c8e6c9}
.story{border-left:5px solid #888;margin:10px 0;padding:4px 10px;background:#fafafa}
.story:target{border-left-color:#ff00ff;background:#fff7ff}
pre{font:12px monospace;white-space:pre-wrap;margin:4px 0}
"""


def _e(x) -> str:
    return html.escape(str(x))


def _rel(path: Path, base: Path) -> str:
    return os.path.relpath(path, base).replace(os.sep, "/")


def render_html(a: Audit, base: Path) -> str:
    """The page; run reports are linked relative to `base` (the directory audit.html is in)."""
    stories: list[str] = []
    rows: list[str] = []
    qs = QUESTIONS
    head = ("<tr><th rowspan=2>setting</th><th rowspan=2>promised</th><th colspan=3>model</th>" +
            "".join(f"<th colspan=4>{_e(c)}</th>" for c in a.clients) + "</tr><tr>" +
            "".join(f"<th>{Q_SHORT[q]}</th>" for q in qs) +
            "".join("".join(f"<th>{Q_SHORT[q]}</th>" for q in qs) + "<th>agreement</th>" for _ in a.clients) + "</tr>")
    for s in a.settings:
        tds = [f"<td><code>{_e(s.label())}</code></td><td>{_e(_promise_text(s))}</td>"]
        for q in qs:
            v = a.model.get(s, {}).get(q)
            aid = _anchor("model", s.key, q)
            if v is None:
                tds.append("<td class='v-unknown'>not run</td>")
                continue
            cls = {"found": "broken" if s.promises()[q] is None else "permitted", "none": "none",
                   "unknown": "unknown", "refused": "refused"}[v.status]
            tds.append(f"<td class='v-{cls}' data-verdict='{cls}'><a href='#{aid}'>{_e(v.short())}</a></td>")
            body = "\n".join(v.story) if v.story else (v.why or "no counterexample: the state space was "
                                                        "exhausted within the bounds")
            stories.append(f"<div class='story' id='{aid}'><b>model · {_e(s.label())} · {_e(q)}: {_e(v.short())}</b>"
                           f"<p>bounds: {_e(v.bounds or '-')}; {v.states:,} states, {v.seconds:.1f} s</p>"
                           f"<pre>{_e(body)}</pre><p>reproduce: <code>{_e(v.command)}</code></p></div>")
        for client in a.clients:
            c = a.cell(client, s)
            if c.refusal:
                tds.append(f"<td class='v-refused' colspan=4 data-verdict='refused'>{_e(c.refusal)}</td>")
                continue
            n = len(c.decided)
            for q in qs:
                k = c.count(q)
                cls = "broken" if c.broken(q) else ("permitted" if k else "none")
                w = c.witness(q)
                text = f"{k}/{n}" + (f" of {c.planned}" if c.incomplete else "")
                if w is None:
                    tds.append(f"<td class='v-{cls}' data-verdict='{cls}'><a href='#{_anchor('cell', client, s.key)}'>"
                               f"{_e(text)}</a></td>")
                    continue
                aid = _anchor(client, s.key, q)
                tds.append(f"<td class='v-{cls}' data-verdict='{cls}'><a href='#{aid}'>{_e(text)}</a></td>")
                stories.append(_witness_story(aid, client, s, q, w, base))
            stories.append(_cell_story(client, s, c, base))
            kinds = [a.agreement(c, q) for q in qs]
            worst = next((k for k in ("disagree", "model-unknown", "coverage", "no-runs") if any(x[0] == k for x in kinds)),
                         "agree")
            cls = {"disagree": "disagree", "model-unknown": "unknown", "coverage": "coverage",
                   "no-runs": "unknown", "agree": "agree"}[worst]
            title = "; ".join(f"{q}: {t}" for q, (_, t) in zip(qs, kinds))
            tds.append(f"<td class='v-{cls}' title='{_e(title)}'>{_e(worst)}</td>")
        rows.append("<tr>" + "".join(tds) + "</tr>")
    legend = ("<p>Colours: <span class='v-none'>&nbsp;not seen&nbsp;</span> "
              "<span class='v-permitted'>&nbsp;seen, permitted by the setting&nbsp;</span> "
              "<span class='v-broken'>&nbsp;seen, a promise broken&nbsp;</span> "
              "<span class='v-refused'>&nbsp;refused / unsupported by the client&nbsp;</span> "
              "<span class='v-unknown'>&nbsp;unknown&nbsp;</span> "
              "<span class='v-coverage'>&nbsp;model finds it, broker runs did not&nbsp;</span> "
              "<span class='v-disagree'>&nbsp;broker shows what the model rules out&nbsp;</span></p>")
    md = markdown(a)
    return ("<!doctype html><html><head><meta charset='utf-8'><title>ordering audit</title>"
            f"<style>{CSS}</style></head><body><h1>Ordering audit: can records be reordered, duplicated or lost?</h1>"
            f"<p>generation {_e(a.generation)} · seed {a.seed} · {len(a.schedules)} fault schedules per cell · "
            f"{a.seconds:.0f} s{' · ' + _e(a.stopped) if a.stopped else ''}</p>{legend}"
            f"<table id='matrix'>{head}{''.join(rows)}</table>{_txn_html(a)}"
            "<h2>Fault schedules (every cell runs these)</h2><ol>" +
            "".join(f"<li>{_e(' ; '.join(e.describe() for e in ev))}</li>" for ev in a.schedules) + "</ol>"
            f"<h2>Summary</h2><pre>{_e(md)}</pre>"
            f"<h2>Witnesses</h2>{''.join(stories) or '<p>none</p>'}</body></html>")


def _txn_html(a: Audit) -> str:
    """The transactional column as its own table: the model's answer, then each client."""
    if not a.transactions:
        return ""
    head = "<tr><th>who</th>" + "".join(f"<th>{_e(TXN_SHORT[q])}</th>" for q in TXN_QUESTIONS) + "</tr>"
    rows = ["<tr><td>model</td>" + "".join(
        f"<td class='v-{'broken' if v is not None and v.status == 'found' else 'none' if v is not None and v.status == 'none' else 'unknown'}' "
        f"title='{_e(v.command if v else '')}'>{_e(txn_model_cell(v))}</td>"
        for v in (a.txn_model.get(q) for q in TXN_QUESTIONS)) + "</tr>"]
    for c in a.txn_cells:
        if c.refusal:
            rows.append(f"<tr><td>{_e(c.client)}</td><td class='v-refused' colspan={len(TXN_QUESTIONS)} "
                        f"data-verdict='refused'>{_e(c.refusal)}</td></tr>")
            continue
        n = len(c.decided)
        rows.append(f"<tr><td>{_e(c.client)}</td>" + "".join(
            f"<td class='v-{'broken' if c.broken(q) else 'none'}' data-verdict='{'broken' if c.broken(q) else 'none'}'>"
            f"{c.count(q)}/{n}</td>" for q in TXN_QUESTIONS) + "</tr>")
    return f"<h2>Transactions (read_committed)</h2><table id='transactions'>{head}{''.join(rows)}</table>"


def _cell_story(client: str, s, c: Cell, base: Path) -> str:
    """Every run of one cell, each linking to its history report (timeline)."""
    items = []
    for r in c.runs:
        found = ", ".join(sorted(r.questions())) or "nothing"
        items.append(f"<li>run {r.index}: {_e(r.status)}, {r.seconds:.1f} s, shows {_e(found)}"
                     f"{' (' + _e(r.reason) + ')' if r.reason else ''} — {_e(r.schedule.describe())} · "
                     f"<a class='timeline' href='{_e(_rel(r.out_dir / 'report.html', base))}'>history report and "
                     f"timeline</a></li>")
    return (f"<div class='story' id='{_anchor('cell', client, s.key)}'><b>{_e(client)} · {_e(s.label())}: "
            f"every run</b><ol>{''.join(items)}</ol></div>")


def _witness_story(aid: str, client: str, s, q: str, r, base: Path) -> str:
    fs = [f for f in r.findings if f.question == q]
    f = fs[0]
    kind = "permitted by the setting (a note of the history checkers)" if f.permitted_by_checker else "an anomaly"
    ops = "\n".join(f.ops)
    report, hist = r.out_dir / "report.html", r.out_dir / "history.jsonl"
    return (f"<div class='story' id='{aid}'><b>{_e(client)} · {_e(s.label())} · {_e(q)}</b>"
            f"<p>run {r.index} ({r.status}, {r.seconds:.1f} s), the smallest of this cell's runs showing it. "
            f"Faults: {_e(r.schedule.describe())}</p>"
            f"<p>{_e(f.type)}, {kind}: {_e(f.explanation)}</p><pre>{_e(ops)}</pre>"
            f"<p><a class='timeline' href='{_e(_rel(report, base))}'>history report and timeline</a> · "
            f"<a href='{_e(_rel(hist, base))}'>history.jsonl</a> · reproduce: "
            f"<code>kafkaverify replay {_e(r.out_dir / 'schedule.json')}</code></p></div>")


def write(a: Audit, out: Path) -> dict[str, Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / "audit.json", "md": out / "audit.md", "html": out / "audit.html"}
    paths["json"].write_text(json.dumps(to_json(a), indent=1), encoding="utf-8")
    paths["md"].write_text(markdown(a), encoding="utf-8")
    paths["html"].write_text(render_html(a, out), encoding="utf-8")
    for s, vs in a.model.items():
        d = out / "model"
        d.mkdir(exist_ok=True)
        text = []
        for q, v in vs.items():
            text += [f"== {q}: {v.short()}  bounds: {v.bounds}", *v.story, v.why, f"reproduce: {v.command}", ""]
        (d / f"{s.key}.txt").write_text("\n".join(text), encoding="utf-8")
    return paths
