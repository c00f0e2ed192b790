"""What `kafkaverify nemesis` prints at the end: the table of runs by verdict, and for a failure
the smallest shrunk schedule, its files, the commands that reproduce it, and the model's answer
for the same faults (kafkaverify/nemesis/model_map.py), saved beside the schedule."""
from __future__ import annotations

import re
import shlex
from pathlib import Path

from rich.console import Console
from rich.table import Table

from kafkaverify.nemesis.model_map import ask_model
from spec import INVARIANT_NAMES


def print_summary(console: Console, summ, out: Path, cmd: str) -> None:
    t = Table(title=f"{len(summ.runs)} schedule runs in {summ.seconds:.0f} s" +
              (f" ({summ.stopped})" if summ.stopped else ""))
    for col in ("verdict", "runs", "anomalies", "permitted by settings"):
        t.add_column(col)
    by: dict[str, list] = {}
    for s, r in summ.runs:
        by.setdefault(r.status, []).append(r)
    for status in sorted(by):
        an: dict[str, int] = {}
        pm: dict[str, int] = {}
        for r in by[status]:
            for k, n in r.anomalies.items():
                an[k] = an.get(k, 0) + n
            if r.divergences:
                an["conformance"] = an.get("conformance", 0) + len(r.divergences)
            for k, n in r.permitted.items():
                pm[k] = pm.get(k, 0) + n
        t.add_row(status, str(len(by[status])), ", ".join(f"{k}: {n}" for k, n in sorted(an.items())),
                  ", ".join(f"{k}: {n}" for k, n in sorted(pm.items())))
    console.print(t)
    if summ.smallest is not None:
        s, r = summ.smallest
        console.print(f"[bold]failure[/bold] ({len(summ.failures)} failing run(s); smallest shown): "
                      f"{r.first_anomaly}", highlight=False)
        console.print(f"  shrunk schedule: {s.describe()}", highlight=False, markup=False)
        console.print(f"  schedule file:   {out / 'shrunk-schedule.json'}", highlight=False)
        console.print(f"  its run:         {r.out_dir} (history.jsonl, report.html, verdict.json, cluster/broker-*/trace-*.jsonl)",
                      highlight=False)
        console.print(f"  reproduce:       kafkaverify replay {shlex.quote(str(out / 'shrunk-schedule.json'))}",
                      highlight=False)
        console.print(f"  regenerate:      {cmd}", highlight=False, markup=False)
        ask_model_about(console, s, r, out)


def ask_model_about(console: Console, s, r, out: Path) -> None:
    """The shrunk schedule asked of the model (kafkaverify/nemesis/model_map.py), for the
    invariant the broker's divergence named if it named one; the answer and the model's story
    are saved next to the schedule."""
    named = [m for d in r.divergences for m in re.findall(r"\((\w+)\)", d["text"]) if m in INVARIANT_NAMES]
    try:
        a = ask_model(s, time_limit_s=60, invariants=tuple(named[:1]) or None)
    except ValueError as e:           # a generation or fix the model does not know
        console.print(f"  model:           not asked ({e})", highlight=False, markup=False)
        return
    text = [f"faults: {', '.join(f.describe() for f in a.faults) or 'none'}",
            f"no model counterpart: {'; '.join(a.unmapped) or 'none'}"]
    if a.status == "violation":
        head = f"reproduces on the model: {a.invariant} in {len(a.path)} steps ({a.message})"
        text += [head, *a.story()]
    elif a.status == "none":
        head = f"the model finds no violation with these faults ({a.states:,} states, exhausted)"
        text.append(head)
    else:
        head = f"the model's search hit its bound ({a.states:,} states, {a.seconds:.0f} s): unknown"
        text.append(head)
    (out / "shrunk-schedule.model.txt").write_text("\n".join(text) + "\n", encoding="utf-8")
    console.print(f"  model:           {head}; story in {out / 'shrunk-schedule.model.txt'}",
                  highlight=False, markup=False)
