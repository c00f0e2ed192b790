"""The summary of a mining job, from its two result tables (verdicts, violations) and the runs
table: aggregates (polars frames, small), then Markdown and a self-contained HTML page (inline
CSS and SVG, no external assets) rendered from them (house style §11: one result, many views).

Aggregates:
  by_status   runs by status x generation x producer x fault_type
  by_anomaly  violations and runs by anomaly type x generation x producer x fault_type
  shortest    per anomaly type, the shortest witness (fewest operations; ties: lowest run id,
              then partition, then witness operation ids)
  corrupt     runs with corrupt rows: run, file, the reader's message (first MAX_CORRUPT)
Each engine (Spark or local) computes these the same way; only aggregates reach the driver.
"""
from __future__ import annotations

import html
from dataclasses import dataclass

import polars as pl

KEYS = ["generation", "producer", "fault_type"]
MAX_CORRUPT = 50


@dataclass
class Summary:
    by_status: pl.DataFrame
    by_anomaly: pl.DataFrame
    shortest: pl.DataFrame
    corrupt: pl.DataFrame
    runs: int
    events: int
    seconds: float
    engine: str

    def count(self, status: str) -> int:
        f = self.by_status.filter(pl.col("status") == status)
        return int(f.get_column("runs").sum()) if f.height else 0

    @property
    def exit_code(self) -> int:
        """1 violations found; else 3 corrupt input; else 2 some run unknown; else 0."""
        if self.count("invalid"):
            return 1
        if self.count("corrupt"):
            return 3
        if self.count("unknown") or self.runs == 0:
            return 2
        return 0


def aggregate_local(verdicts: pl.DataFrame, violations: pl.DataFrame, runs: pl.DataFrame,
                    events: int, seconds: float, engine: str) -> Summary:
    c = pl.col
    cfg = runs.select("trace_id", *KEYS)
    v = verdicts.join(cfg, on="trace_id", how="left")
    by_status = v.group_by("status", *KEYS).agg(pl.len().alias("runs")).sort("status", *KEYS)
    x = violations.join(cfg, on="trace_id", how="left")
    by_anomaly = (x.group_by("type", *KEYS).agg(pl.len().alias("violations"),
                                                c("trace_id").n_unique().alias("runs"))
                  .sort("type", *KEYS))
    shortest = (x.sort("witness_len", "trace_id", "partition", "witness").group_by("type", maintain_order=True)
                .first().select("type", "trace_id", "partition", "witness_len", "witness",
                                "explanation", "witness_ops", "file").sort("type"))
    corrupt = (v.filter(c("status") == "corrupt").sort("trace_id").head(MAX_CORRUPT)
               .select("trace_id", "file", "error"))
    return Summary(by_status, by_anomaly, shortest, corrupt, verdicts.height, events, seconds, engine)


def _md_table(df: pl.DataFrame) -> str:
    cols = df.columns
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in df.iter_rows():
        out.append("| " + " | ".join(str(x).replace("|", "\\|").replace("\n", "<br>") for x in r) + " |")
    return "\n".join(out)


def markdown(s: Summary, title: str) -> str:
    lines = [f"# Mining {title}", "",
             f"{s.runs} runs, {s.events} events, {s.seconds:.1f} s ({s.engine}): "
             f"{s.count('invalid')} invalid, {s.count('valid')} valid, {s.count('unknown')} unknown, "
             f"{s.count('corrupt')} corrupt.", ""]
    lines += ["## Anomalies by type x generation x producer x fault type", "",
              _md_table(s.by_anomaly) if s.by_anomaly.height else "none", ""]
    lines += ["## Shortest witness of each anomaly type", ""]
    for r in s.shortest.iter_rows(named=True):
        lines += [f"### {r['type']} ({r['witness_len']} operations, run {r['trace_id']}, {r['partition']})",
                  "", r["explanation"], "", "```", r["witness_ops"] or "", "```", ""]
    lines += ["## Runs by status", "", _md_table(s.by_status), ""]
    if s.corrupt.height:
        lines += ["## Runs with corrupt rows (not checked)", "", _md_table(s.corrupt), ""]
    return "\n".join(lines)


def _e(x) -> str:
    return html.escape(str(x))


def _chart(df: pl.DataFrame) -> str:
    """Horizontal bars: runs with each anomaly type, stacked by generation."""
    if not df.height:
        return "<p>No anomalies.</p>"
    per = df.group_by("type", "generation").agg(pl.col("runs").sum()).sort("type", "generation")
    types = sorted(set(per.get_column("type").to_list()))
    gens = sorted(set(per.get_column("generation").to_list()))
    palette = ["#1565c0", "#2e7d32", "#ef6c00", "#6a1b9a", "#c62828", "#00838f", "#795548"]
    color = {g: palette[i % len(palette)] for i, g in enumerate(gens)}
    totals = per.group_by("type").agg(pl.col("runs").sum())
    top = max(totals.get_column("runs").to_list()) or 1
    left, width, bar = 190, 560, 22
    h = bar * len(types) + 40
    parts = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{left + width + 60}' height='{h}' "
             "role='img' aria-label='runs with each anomaly type, by generation'>"]
    for i, t in enumerate(types):
        y = 10 + i * bar
        parts.append(f"<text x='{left - 6}' y='{y + 15}' text-anchor='end' font-size='12'>{_e(t)}</text>")
        x = left
        for g in gens:
            n = per.filter((pl.col("type") == t) & (pl.col("generation") == g)).get_column("runs").sum()
            if n:
                w = width * n / top
                parts.append(f"<rect x='{x:.1f}' y='{y}' width='{w:.1f}' height='{bar - 4}' "
                             f"fill='{color[g]}'><title>{_e(t)} / {_e(g)}: {n} runs</title></rect>")
                x += w
        tot = totals.filter(pl.col("type") == t).get_column("runs").item()
        parts.append(f"<text x='{x + 4:.1f}' y='{y + 15}' font-size='12'>{tot}</text>")
    parts.append("</svg>")
    legend = " ".join(f"<span style='background:{color[g]};color:#fff;padding:0 6px;"
                      f"border-radius:3px'>{_e(g)}</span>" for g in gens)
    return f"<p>Runs with each anomaly type, by generation: {legend}</p>" + "".join(parts)


def _html_table(df: pl.DataFrame) -> str:
    head = "".join(f"<th>{_e(c)}</th>" for c in df.columns)
    rows = "".join("<tr>" + "".join(f"<td>{_e(x)}</td>" for x in r) + "</tr>" for r in df.iter_rows())
    return f"<table><tr>{head}</tr>{rows}</table>"


def render_html(s: Summary, title: str) -> str:
    css = ("body{font:14px/1.4 system-ui,sans-serif;margin:16px;color:#222}"
           "table{border-collapse:collapse;margin:6px 0}td,th{border:1px solid #ddd;padding:2px 8px;"
           "text-align:left}pre{background:#f6f6f6;padding:6px;white-space:pre-wrap}"
           ".invalid{color:#c62828}.valid{color:#2e7d32}")
    out = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{_e(title)}</title>"
           f"<style>{css}</style></head><body><h1>Mining {_e(title)}</h1>",
           f"<p>{s.runs} runs, {s.events} events, {s.seconds:.1f} s ({_e(s.engine)}): "
           f"<span class='invalid'>{s.count('invalid')} invalid</span>, "
           f"<span class='valid'>{s.count('valid')} valid</span>, {s.count('unknown')} unknown, "
           f"{s.count('corrupt')} corrupt.</p>", "<h2>Anomalies</h2>", _chart(s.by_anomaly)]
    if s.by_anomaly.height:
        out.append(_html_table(s.by_anomaly))
    out.append("<h2>Shortest witness of each anomaly type</h2>")
    for r in s.shortest.iter_rows(named=True):
        out.append(f"<h3>{_e(r['type'])}: {r['witness_len']} operations (run {_e(r['trace_id'])}, "
                   f"{_e(r['partition'])})</h3><p>{_e(r['explanation'])}</p><pre>{_e(r['witness_ops'] or '')}</pre>")
    out += ["<h2>Runs by status</h2>", _html_table(s.by_status)]
    if s.corrupt.height:
        out += ["<h2>Runs with corrupt rows (not checked)</h2>", _html_table(s.corrupt)]
    out.append("</body></html>")
    return "".join(out)
