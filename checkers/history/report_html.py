"""The HTML view of a checked history: one self-contained file (inline CSS, SVG and script, no
external assets). Rendered from the history and its verdict only (house style §11).

Layout: the verdict and anomaly counts; then, for each of the first anomalies, its explanation
and a timeline of the witness's neighbourhood in full (one lane per process, one bar per
operation coloured by outcome, the witness outlined in magenta); then an overview of the whole
history aggregated into time bins per lane, with the witnesses marked. The size is bounded
(anomalies shown, operations per panel, lanes and bins), so 10^5 or 10^6 operations give a
file of a few hundred kilobytes rather than gigabytes."""
from __future__ import annotations

import html
import json

from checkers.history.result import Verdict, counts
from traces.history import History, Op

MAX_ANOMALIES = 12
MAX_PANEL_OPS = 100
MAX_LANES = 120
BINS = 240
WIDTH = 1100
LANE_H = 18
LEFT = 90
COLORS = {"ok": "#43a047", "fail": "#e53935", "info": "#fb8c00"}
WITNESS = "#ff00ff"      # the one colour nothing else uses (the browser test looks for it)

CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:16px;color:#222;background:#fff}
h1{font-size:20px;margin:0 0 8px} h2{font-size:16px;margin:18px 0 6px}
.status-valid{color:#2e7d32}.status-invalid{color:#c62828}.status-unknown{color:#ef6c00}
table{border-collapse:collapse}td,th{border:1px solid #ddd;padding:2px 8px;text-align:left}
.anomaly{border-left:6px solid #ff00ff;padding:4px 10px;margin:10px 0;background:#fff7ff}
.anomaly .explanation{font-weight:600}
.legend span{display:inline-block;padding:0 6px;margin-right:6px;color:#fff;border-radius:3px}
svg{display:block;background:#fafafa;border:1px solid #eee}
.op:hover{stroke:#000;stroke-width:1}
#anomaly-list li{cursor:pointer}
.ops{font:12px monospace;white-space:pre;margin:4px 0}
"""

SCRIPT = """
(function(){
  var data = JSON.parse(document.getElementById('kv-data').textContent);
  var list = document.getElementById('anomaly-list');
  data.anomalies.forEach(function(a, i){
    var li = document.createElement('li');
    li.className = 'anomaly-link';
    li.textContent = a.type + ': ' + a.explanation;
    li.onclick = function(){ document.getElementById('anomaly-' + i).scrollIntoView(); };
    list.appendChild(li);
  });
  document.querySelectorAll('rect.op').forEach(function(r){
    r.addEventListener('mouseenter', function(){
      document.getElementById('hover').textContent = r.textContent;
    });
  });
  document.body.setAttribute('data-rendered', String(data.anomalies.length));
})();
"""


def _e(s: object) -> str:
    return html.escape(str(s), quote=True)


def _end(op: Op, hi: int) -> int:
    return op.end if op.end is not None and op.type != "info" else hi


def _timeline(ops: list[Op], lo: int, hi: int, witness: set[int]) -> str:
    procs = sorted({o.process for o in ops})[:MAX_LANES]
    lane = {p: i for i, p in enumerate(procs)}
    span = max(hi - lo, 1)
    w = WIDTH - LEFT - 10
    h = len(procs) * LANE_H + 24

    def x(t: int) -> float:
        return LEFT + (min(max(t, lo), hi) - lo) * w / span

    out = [f'<svg width="{WIDTH}" height="{h}" xmlns="http://www.w3.org/2000/svg">']
    for p, i in lane.items():
        y = 4 + i * LANE_H
        out.append(f'<text x="4" y="{y + 12}" font-size="11">p{p}</text>'
                   f'<line x1="{LEFT}" x2="{WIDTH - 10}" y1="{y + LANE_H - 2}" y2="{y + LANE_H - 2}" stroke="#eee"/>')
    marks = []
    for o in ops:
        if o.process not in lane:
            continue
        y = 4 + lane[o.process] * LANE_H
        x0, x1 = x(o.inv), x(_end(o, hi))
        wid = max(x1 - x0, 2.0)
        cls = f"op {o.type}" + (" witness" if o.id in witness else "")
        op_ = ' opacity="0.5"' if o.type == "info" else ""
        out.append(f'<rect class="{cls}" data-op="{o.id}" x="{x0:.1f}" '
                   f'y="{y + 2}" width="{wid:.1f}" height="{LANE_H - 6}" fill="{COLORS[o.type]}"{op_}>'
                   f'<title>{_e(o.describe())}</title></rect>')
        if o.id in witness:
            marks.append(f'<rect class="witness-mark" data-op="{o.id}" x="{x0 - 2:.1f}" y="{y}" '
                         f'width="{wid + 4:.1f}" height="{LANE_H - 2}" fill="none" stroke="{WITNESS}" '
                         f'stroke-width="3"/><text x="{x0:.1f}" y="{y + LANE_H + 8}" font-size="10" '
                         f'fill="{WITNESS}">#{o.id}</text>')
    out += marks
    out.append(f'<text x="{LEFT}" y="{h - 4}" font-size="10">t={lo} ns</text>'
               f'<text x="{WIDTH - 150}" y="{h - 4}" font-size="10">t={hi} ns</text></svg>')
    return "".join(out)


def _neighbourhood(h: History, witness: set[int], by_id: dict[int, Op]) -> tuple[list[Op], int, int]:
    wops = [by_id[i] for i in sorted(witness) if i in by_id]
    lo = min(o.inv for o in wops)
    hi = max(_end(o, o.inv) if o.end is not None else o.inv for o in wops)
    pad = max((hi - lo) // 2, 1_000)
    lo, hi = lo - pad, hi + pad
    anchors = [o.inv for o in wops]
    near = [o for o in h.ops if o.inv <= hi and (o.end if o.end is not None else hi) >= lo
            and o.id not in witness]
    # Closest to any witness operation first: far-apart witnesses each keep their context.
    near.sort(key=lambda o: (min(abs(o.inv - a) for a in anchors), o.id))
    return wops + near[:MAX_PANEL_OPS - len(wops)], lo, hi


def _overview(h: History, witness: set[int]) -> str:
    if not h.ops:
        return "<p>(empty history)</p>"
    lo = min(o.inv for o in h.ops)
    hi = max((o.end if o.end is not None else o.inv) for o in h.ops)
    span = max(hi - lo, 1)
    counts: dict[int, list[list[int]]] = {}
    for o in h.ops:
        b = min((o.inv - lo) * BINS // span, BINS - 1)
        row = counts.setdefault(o.process, [[0, 0, 0] for _ in range(BINS)])
        row[b][("ok", "fail", "info").index(o.type)] += 1
    procs = sorted(counts)
    shown, rest = procs[:MAX_LANES], procs[MAX_LANES:]
    if rest:
        agg = [[0, 0, 0] for _ in range(BINS)]
        for p in rest:
            for i, c in enumerate(counts[p]):
                for k in range(3):
                    agg[i][k] += c[k]
        counts[-1] = agg
        shown.append(-1)
    peak = max(sum(c) for p in shown for c in counts[p]) or 1
    w = (WIDTH - LEFT - 10) / BINS
    hgt = len(shown) * LANE_H + 20
    out = [f'<svg width="{WIDTH}" height="{hgt}" xmlns="http://www.w3.org/2000/svg">']
    for i, p in enumerate(shown):
        y = 4 + i * LANE_H
        name = f"p{p}" if p >= 0 else f"{len(rest)} more"
        out.append(f'<text x="4" y="{y + 12}" font-size="11">{_e(name)}</text>')
        for b, c in enumerate(counts[p]):
            n = sum(c)
            if not n:
                continue
            kind = "fail" if c[1] else "info" if c[2] else "ok"
            out.append(f'<rect x="{LEFT + b * w:.1f}" y="{y + 2}" width="{w:.1f}" height="{LANE_H - 6}" '
                       f'fill="{COLORS[kind]}" opacity="{0.25 + 0.75 * n / peak:.2f}">'
                       f'<title>{n} ops ({c[0]} ok, {c[1]} fail, {c[2]} info)</title></rect>')
    by_id = h.by_id()
    for i in sorted(witness)[:500]:
        o = by_id.get(i)
        if o is not None:
            xx = LEFT + (o.inv - lo) * (WIDTH - LEFT - 10) / span
            out.append(f'<line x1="{xx:.1f}" x2="{xx:.1f}" y1="0" y2="{hgt - 16}" stroke="{WITNESS}" '
                       f'stroke-width="1" opacity="0.7"/>')
    out.append("</svg>")
    return "".join(out)


def render(h: History, verdict: Verdict, title: str = "history") -> str:
    by_id = h.by_id()
    shown = verdict.anomalies[:MAX_ANOMALIES]
    all_w = {i for a in shown for i in a.witness}
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{_e(title)}</title>"
             f"<style>{CSS}</style></head><body>",
             f"<h1>{_e(title)}: <span class='status-{verdict.status}'>{verdict.status}</span></h1>",
             f"<p>{len(h.ops)} operations, {len(verdict.anomalies)} anomalies"
             f"{f' (first {len(shown)} shown)' if len(shown) < len(verdict.anomalies) else ''}. "
             "<span class='legend'>"
             + "".join(f"<span style='background:{c}'>{k}</span>" for k, c in COLORS.items())
             + f"<span style='background:{WITNESS}'>witness</span></span></p>",
             "<table><tr><th>check</th><th>status</th><th>examined</th><th>anomalies</th><th>note</th></tr>"]
    for c in verdict.checks:
        parts.append(f"<tr><td>{_e(c.name)}</td><td class='status-{c.status}'>{c.status}</td>"
                     f"<td>{c.examined}</td><td>{_e(', '.join(f'{k}: {n}' for k, n in sorted(counts(c.anomalies).items())))}</td>"
                     f"<td>{_e(c.reason)}</td></tr>")
    parts.append("</table><h2>Anomalies</h2><ol id='anomaly-list'></ol>"
                 "<div id='hover' class='ops'></div>")
    for i, a in enumerate(shown):
        ops, lo, hi = _neighbourhood(h, set(a.witness), by_id)
        lines = "\n".join(by_id[w].describe() for w in a.witness if w in by_id)
        parts.append(f"<section class='anomaly' id='anomaly-{i}' data-type='{_e(a.type)}' "
                     f"data-witness='{' '.join(map(str, a.witness))}'><h3>{i + 1}. {_e(a.type)}"
                     f"{' on ' + _e(a.partition) if a.partition else ''}</h3>"
                     f"<p class='explanation'>{_e(a.explanation)}</p><div class='ops'>{_e(lines)}</div>"
                     f"{_timeline(ops, lo, hi, set(a.witness))}</section>")
    notes = verdict.notes[:MAX_ANOMALIES]
    if notes:
        parts.append("<h2>Notes (permitted by configuration)</h2><ul>"
                     + "".join(f"<li>{_e(n.type)}: {_e(n.explanation)}</li>" for n in notes) + "</ul>")
    parts.append("<h2>Overview (aggregated per lane and time bin)</h2>" + _overview(h, all_w))
    data = {"status": verdict.status, "anomalies": [a.to_json() for a in shown]}
    blob = json.dumps(data).replace("</", "<\\/")
    parts.append(f"<script id='kv-data' type='application/json'>{blob}</script>"
                 f"<script>{SCRIPT}</script></body></html>")
    return "".join(parts)

