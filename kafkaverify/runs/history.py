"""The history commands' work (check-history, shrink, gen-history): read and write the files,
print the verdict; every decision is in traces/history.py and checkers/history/. The click
options live in kafkaverify/commands/history.py. Exit codes: 0 valid, 1 invalid, 2 unknown or
nothing to shrink, 3 bad input."""
from __future__ import annotations

import json
import time
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from checkers.history.pipeline.file_check import check_file, check_jepsen_file
from checkers.history.generate import Params, generate
from checkers.history.report_html import render
from checkers.history.result import counts
from checkers.history.seeding import SEEDABLE
from checkers.history.shrink import NothingToShrink, shrink
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


# --low-memory: the fused screen's groups (checkers.history.screens.fused.grouped_screen) hold
# this many events each, the setting measured in docs/benchmarks/histories.md.
LOW_MEMORY_GROUP_EVENTS = 1 << 22


def _producer_config(text: str | None) -> tuple[dict | None, str]:
    """--producer-config: a JSON object, or a file holding one; (settings, isolation level)."""
    if text is None:
        return None, "read_committed"
    src = text
    if not text.lstrip().startswith("{"):
        try:
            src = Path(text).read_text(encoding="utf-8")
        except OSError as e:
            raise InputError(f"--producer-config: cannot read {text}: {e.strerror}") from None
    try:
        cfg = json.loads(src)
    except json.JSONDecodeError as e:
        raise InputError(f"--producer-config: not a JSON object ({e})") from None
    if not isinstance(cfg, dict):
        raise InputError("--producer-config: not a JSON object")
    known = {"retries": int, "max_in_flight": int, "idempotence": bool, "acks": str,
             "transactional_id": str, "isolation": str}
    for k, v in cfg.items():
        if k not in known:
            raise InputError(f"--producer-config: unknown setting {k!r} (known: {', '.join(known)})")
        if not isinstance(v, known[k]) or (known[k] is int and isinstance(v, bool)):
            raise InputError(f"--producer-config: {k} must be a {known[k].__name__}, got {v!r}")
    iso = cfg.pop("isolation", "read_committed")
    if iso not in ("read_committed", "read_uncommitted"):
        raise InputError(f"--producer-config: isolation must be read_committed or read_uncommitted")
    return cfg, iso


def check_history_file(file, fmt, json_out, html_out, deadline, low_memory, t0: float,
                       producer_config: str | None = None) -> int:
    """`kafkaverify check-history`: the columnar kernel reads and screens the file, the object
    checkers judge what it flags. `t0`: when the command's clock started (before anything was
    read or imported); `deadline`: a time.monotonic() bound, or None."""
    if producer_config is not None and fmt != "jepsen":
        raise InputError("--producer-config applies to --format jepsen only (our format records "
                         "producer_config operations)")
    try:
        if fmt == "jepsen":
            cfg, iso = _producer_config(producer_config)
            r = check_jepsen_file(file, deadline, producer_config=cfg, isolation=iso)
        else:
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


def convert_file(file, src, dst, out, producer_config) -> int:
    """`kafkaverify convert`: a history from one format to another."""
    from traces import history_jepsen
    if producer_config is not None and src != "jepsen":
        raise InputError("--producer-config applies to --from jepsen only")
    try:
        if src == "jepsen":
            cfg, iso = _producer_config(producer_config)
            h = history_jepsen.load(file, cfg, iso)
        else:
            h = load(file, src)
    except HistoryError as e:
        raise InputError(str(e)) from None
    _write_history_as(out, h, dst)
    click.echo(f"wrote {len(h.ops)} operations to {out} (format version {h.header['version']})")
    return exitcodes.VALID


def _write_history_as(path: str, h, fmt: str) -> None:
    try:
        write(path, h.header, history_events(h.ops), fmt)
    except OSError as e:
        raise InputError(f"cannot write {path}: {e.strerror}") from None


def shrink_file(file, out, fmt, anomaly, time_limit) -> int:
    """`kafkaverify shrink`: an invalid history reduced to a small one with the same anomaly."""
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


def gen_history(seed, ops, partitions, anomalies, out) -> int:
    """`kafkaverify gen-history`: a generated history, with the anomalies asked for planted."""
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
