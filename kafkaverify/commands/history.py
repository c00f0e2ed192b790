"""CLI commands of the history area: check-history, shrink, gen-history. Thin shells: they read
and write files and print; every decision is in traces/history.py and checkers/history/.
Exit codes (kafkaverify/exitcodes.py): 0 valid, 1 invalid, 2 unknown or nothing to shrink,
3 bad input."""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from checkers.history.generate import Params, generate
from checkers.history.report_html import render
from checkers.history.result import counts
from checkers.history.seeding import SEEDABLE
from kafkaverify import exitcodes
from kafkaverify.exitcodes import InputError
from traces.history import HistoryError, history_events, load, write

EXIT = {"valid": exitcodes.VALID, "invalid": exitcodes.VIOLATION, "unknown": exitcodes.UNKNOWN}
FIRST_WITNESSES = 5


def _load(path: str, fmt: str | None):
    try:
        return load(path, fmt)
    except HistoryError as e:
        raise InputError(str(e)) from None


def _write_text(path: str, text: str) -> None:
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as e:
        raise InputError(f"cannot write {path}: {e.strerror}") from None


def _write_history(path: str, header: dict, ops) -> None:
    try:
        write(path, header, history_events(ops))
    except OSError as e:
        raise InputError(f"cannot write {path}: {e.strerror}") from None


def _summary(console: Console, n_ops: int, by_id: dict, verdict, seconds: float) -> None:
    t = Table(title=f"{n_ops} operations read and checked in {seconds:.2f} s (end to end): "
                    f"{verdict.status.upper()}")
    for col in ("check", "status", "examined", "anomalies", "note"):
        t.add_column(col)
    for c in verdict.checks:
        t.add_row(c.name, c.status, str(c.examined),
                  ", ".join(f"{k}: {n}" for k, n in counts(c.anomalies).items()), c.reason)
    console.print(t)
    if verdict.anomalies:
        first: dict[str, object] = {}
        for a in verdict.anomalies:
            first.setdefault(a.type, a)
        at = Table(title="anomalies")
        for col in ("type", "count", "first witness (op ids)"):
            at.add_column(col)
        for k, n in counts(verdict.anomalies).items():
            at.add_row(k, str(n), " ".join(f"#{i}" for i in first[k].witness))
        console.print(at)
    for a in verdict.anomalies[:FIRST_WITNESSES]:
        console.print(f"[bold]{a.type}[/bold]: {a.explanation}", highlight=False, markup=True)
        for i in a.witness:
            console.print(f"    {by_id[i].describe()}  ({by_id[i].where})", highlight=False, markup=False)
    if verdict.notes:
        console.print(f"{len(verdict.notes)} note(s) (permitted by configuration), e.g. "
                      f"{verdict.notes[0].type}: {verdict.notes[0].explanation}", highlight=False, markup=False)


# --low-memory: the fused screen's groups (checkers.history.columnar_file.grouped_screen) hold
# this many events each, the setting measured in BENCHMARKS.md (seventh round, last paragraph).
LOW_MEMORY_GROUP_EVENTS = 1 << 22


def register(group: click.Group) -> None:
    @group.command("check-history")
    @click.argument("file", type=click.Path(dir_okay=False))
    @click.option("--format", "fmt", type=click.Choice(["jsonl", "parquet"]), default=None,
                  help="input encoding (default: by extension, .parquet or else jsonl)")
    @click.option("--json", "json_out", type=click.Path(dir_okay=False), help="write the full result as JSON")
    @click.option("--html", "html_out", type=click.Path(dir_okay=False), help="write an HTML report")
    @click.option("--time-limit", type=click.FloatRange(min=0, min_open=True), default=None,
                  help="seconds; checks not finished in time are unknown")
    @click.option("--low-memory", is_flag=True,
                  help="above 2^22 events, screen in groups of partitions spilled to disk: "
                       "memory bounded by a group instead of growing with the log, at about "
                       "3-4x the CPU")
    def check_history_cmd(file, fmt, json_out, html_out, time_limit, low_memory):
        """Check a client history for anomalies. Exit 0 valid, 1 invalid, 2 unknown, 3 bad input.

        The columnar kernel (checkers/history/columnar.py) reads and screens the history; the
        partitions it flags are judged by the object checkers, which build the witnesses. The
        time limit and the printed time both cover everything from reading the file on."""
        # The clock starts before anything is read: reading is most of the cost.
        t0 = time.perf_counter()
        deadline = time.monotonic() + time_limit if time_limit else None
        # lazy: the columnar kernel imports polars (CLI start-up)
        from checkers.history.columnar_file import check_file
        try:
            r = check_file(file, fmt, deadline=deadline,
                           screen_group_events=LOW_MEMORY_GROUP_EVENTS if low_memory else None)
        except HistoryError as e:
            raise InputError(str(e)) from None
        verdict = r.verdict
        secs = time.perf_counter() - t0
        _summary(Console(width=160), r.ops, r.witness_ops, verdict, secs)
        if json_out:
            out = verdict.to_json(r.witness_ops)
            out["file"], out["seconds"], out["engine"] = file, round(secs, 3), r.engine
            _write_text(json_out, json.dumps(out, indent=1))
        if html_out:
            h = r.history if r.history is not None else _load(file, fmt)   # the timeline needs every op
            _write_text(html_out, render(h, verdict, title=Path(file).name))
        return EXIT[verdict.status]

    @group.command("shrink")
    @click.argument("file", type=click.Path(dir_okay=False))
    @click.option("--out", required=True, type=click.Path(dir_okay=False),
                  help="where to write the shrunk history (.parquet or JSON lines)")
    @click.option("--format", "fmt", type=click.Choice(["jsonl", "parquet"]), default=None)
    @click.option("--anomaly", default=None, help="anomaly type to keep (default: the first found)")
    @click.option("--time-limit", type=click.FloatRange(min=0, min_open=True), default=60.0)
    def shrink_cmd(file, out, fmt, anomaly, time_limit):
        """Reduce an invalid history to a small sub-history showing the same anomaly."""
        # lazy: the shrinker's checkers import networkx (CLI start-up)
        from checkers.history.shrink import NothingToShrink, shrink
        h = _load(file, fmt)
        try:
            r = shrink(h, kind=anomaly, time_limit=time_limit)
        except NothingToShrink as e:
            click.echo(f"nothing to shrink: {e}", err=True)
            return exitcodes.UNKNOWN
        _write_history(out, r.history.header, r.history.ops)
        click.echo(f"shrunk {len(h.ops)} -> {len(r.history.ops)} operations keeping "
                   f"{r.anomaly.type} ({r.checks} checks{'' if r.minimal else ', bound hit: not 1-minimal'})")
        click.echo(f"  {r.anomaly.explanation}")
        click.echo(f"wrote {out}")
        return exitcodes.VALID

    @group.command("gen-history")
    @click.option("--seed", type=int, required=True)
    @click.option("--ops", type=click.IntRange(min=1), required=True, help="client operations to generate")
    @click.option("--partitions", type=click.IntRange(min=1), default=4, show_default=True)
    @click.option("--seed-anomaly", "anomalies", multiple=True, metavar="TYPE:RATE",
                  help="plant an anomaly at RATE (0<RATE<=1) of its eligible sites; repeatable")
    @click.option("--out", required=True, type=click.Path(dir_okay=False))
    def gen_history_cmd(seed, ops, partitions, anomalies, out):
        """Generate a history (valid, unless anomalies are seeded); JSON lines or .parquet."""
        plan = {}
        valid = ", ".join(sorted(SEEDABLE))
        for spec in anomalies:
            kind, sep, rate_s = spec.rpartition(":")
            if not sep or kind not in SEEDABLE:
                raise InputError(f"bad --seed-anomaly {spec!r}: unknown type {kind or spec!r}; "
                                 f"valid types: {valid}")
            try:
                rate = float(rate_s)
            except ValueError:
                rate = -1.0
            if not 0 < rate <= 1:
                raise InputError(f"bad --seed-anomaly {spec!r}: RATE must be a number in (0, 1]")
            plan[kind] = rate
        click.echo(f"seed={seed} ops={ops} partitions={partitions} anomalies={plan or 'none'}", err=True)
        h = generate(Params(seed=seed, ops=ops, partitions=partitions), plan)
        _write_history(out, h.header, h.ops)
        click.echo(f"wrote {len(h.ops)} operations to {out}")
        return exitcodes.VALID


if __name__ == "__main__":  # pragma: no cover
    sys.exit("use: python -m kafkaverify ...")
