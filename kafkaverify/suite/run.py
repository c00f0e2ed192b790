"""`kafkaverify check`: runs the stages a budget selects (budget.py), prints each verdict as it
comes and the table at the end, and writes the reports asked for (kafkaverify/reports/ci.py)."""
from __future__ import annotations

import time

from rich.console import Console
from rich.table import Table

from kafkaverify import exitcodes
from kafkaverify.reports.ci import Outcome, story, write_outputs
from kafkaverify.suite.budget import select
from kafkaverify.suite.stages import StageResult, harness_failure


def run_stage(st) -> StageResult:
    """One stage's result. A stage whose harness raises is that stage's unknown verdict, with
    the cause (kafkaverify.suite.stages.harness_failure): the suite goes on to the next stage
    and ends with its exit code, never a traceback."""
    t0 = time.monotonic()
    try:
        return st.run()
    except Exception as e:
        return harness_failure(st.name, e, time.monotonic() - t0)


def run_suite(json_out: str | None = None, quick: bool = False, only: tuple[str, ...] = (),
              budget: str | None = None, junit: str | None = None, html_out: str | None = None,
              artifacts: str | None = None) -> int:
    """Runs the stages of `budget` (kafkaverify/suite/budget.py; `quick=True` means budget quick), or
    the stages named in `only`, and writes the reports asked for (kafkaverify/reports/ci.py)."""
    budget = budget or ("quick" if quick else "full")
    chosen = select(budget, only)
    console = Console()
    console.print(f"kafkaverify check: budget {budget}, {len(chosen)} stages")
    t_all = time.monotonic()
    outcomes: list[Outcome] = []
    for st in chosen:
        with console.status(f"running: {st.name}"):
            r = run_stage(st)
        o = Outcome(r, st.family, stage_name=st.name)
        o.story = story(r)
        outcomes.append(o)
        colour = {"pass": "green", "fail": "red", "unknown": "yellow"}[r.verdict]
        console.print(f"[{colour}]{r.verdict:>7}[/{colour}]  {r.name}  ({r.seconds:.1f}s)  {r.detail}",
                      highlight=False)
        if r.verdict != "pass":
            console.print(story(r, cause=False), markup=False, highlight=False)
            console.print(f"reproduce: {o.reproduce_check}" + (f"  (or: {r.reproduce})" if r.reproduce else ""),
                          markup=False, highlight=False)
    seconds = time.monotonic() - t_all
    table = Table(title=f"invariant suite ({budget}, {seconds:.1f} s)")
    for col in ("stage", "family", "verdict", "seconds", "detail"):
        table.add_column(col)
    for o in outcomes:
        r = o.result
        colour = {"pass": "green", "fail": "red", "unknown": "yellow"}[r.verdict]
        table.add_row(r.name, o.family, f"[{colour}]{r.verdict}[/{colour}]", f"{r.seconds:.1f}", r.detail)
    console.print(table)
    for path in write_outputs(outcomes, budget, seconds, junit=junit, json_out=json_out,
                              html_out=html_out, artefacts=artifacts):
        console.print(f"wrote {path}", highlight=False)
    results = [o.result for o in outcomes]
    if any(r.verdict == "fail" for r in results):
        return exitcodes.VIOLATION
    if any(r.verdict == "unknown" for r in results):
        return exitcodes.UNKNOWN
    return exitcodes.VALID
