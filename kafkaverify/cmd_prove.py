"""`kafkaverify prove`: the z3 engine (checkers/prove) from the command line, and the z3 stage
of `kafkaverify check`.

Contract: a table of invariant / method / verdict / time; refutations (BMC) written as trace
files that `kafkaverify replay` reproduces on the explicit model; exit 0 all proved, 1 any
refuted, 2 any unknown, 3 usage error.
"""
from __future__ import annotations

import time
from pathlib import Path

import click

from kafkaverify import exitcodes
from kafkaverify.exitcodes import InputError


MAX_PROVE_BROKERS = 7


def prove_config(generation, without, brokers, log_length):
    """The model config for the z3 engine. spec's make_config caps brokers at 5 (for the
    explorer); induction is not enumeration, so up to 7 replicas are allowed here, validated
    by make_config at 5 and widened. Raises ConfigError."""
    from dataclasses import replace

    from spec import ConfigError, make_config
    if not 1 <= brokers <= MAX_PROVE_BROKERS:
        raise ConfigError(f"brokers must be between 1 and {MAX_PROVE_BROKERS}")
    cfg = make_config(generation, tuple(without), brokers=min(brokers, 5), records=log_length)
    return replace(cfg, brokers=brokers)


def _config(generation, without, brokers, log_length):
    from checkers.prove.encoding import supported
    from spec import ConfigError
    try:
        cfg = prove_config(generation, without, brokers, log_length)
    except ConfigError as e:
        raise InputError(str(e)) from None
    why = supported(cfg)
    if why:
        raise InputError(f"the z3 encoding does not cover this configuration: {why}")
    return cfg


def run_prove(cfg, invariants: tuple[str, ...], depth: int, time_limit: float,
              out: Path | None, echo=click.echo, progress=None) -> tuple[int, list[tuple]]:
    """BMC to `depth` over the chosen invariants, then induction for each not refuted.
    Returns (exit code, rows of (invariant, method, verdict, seconds, note))."""
    from checkers.model_trace import config_args, write_trace
    from checkers.prove.bmc import bmc
    from checkers.prove.induction import prove
    from spec import Model
    t0 = time.monotonic()
    model = Model(cfg)
    rows: list[tuple] = []
    refuted: set[str] = set()
    left = lambda: max(1.0, time_limit - (time.monotonic() - t0))   # noqa: E731
    if depth > 0:
        r = bmc(model, depth, invariants=invariants, time_limit=left(),
                progress=(lambda k, s: progress(f"BMC depth {k} done, {s:.1f}s")) if progress else None)
        if r.status == "violation" and r.problem is None:
            refuted.add(r.invariant)
            note = r.message
            if out is not None:
                path = out / f"prove-{cfg.generation}-{r.invariant}-depth{r.depth}.jsonl"
                cmd = "kafkaverify prove " + config_args(cfg) + f" --depth {depth}"
                write_trace(path, cfg, r.actions, r.states, (r.invariant, r.message),
                            bounds={"depth": depth}, command=cmd,
                            invariants=tuple(i for i in invariants if i != "MonotonicEpochs") or None)
                note += f"; trace {path} (kafkaverify replay {path})"
            rows.append((r.invariant, f"BMC depth {r.depth}", "refuted", r.seconds, note))
            from kafkaverify.cmd_model import print_story
            print_story(r.actions, r.states, r.invariant, r.message)
        elif r.status == "violation":
            rows.append(("(all)", f"BMC depth {r.depth}", "unknown", r.seconds,
                         f"the engines disagree: {r.problem}"))
        else:
            rows.append(("(all)", f"BMC depth {r.depth}", "unknown" if r.status == "unknown" else "clean",
                         r.seconds, "no violation within the depth" if r.status == "clean" else "time limit"))
    for name in invariants:
        if name in refuted:
            continue
        if progress:
            progress(f"induction: {name}")
        p = prove(model, name, time_limit=left())
        note = ""
        if p.verdict != "proved":
            note = f"not inductive: breaks {p.failing}" if p.cti else (p.failing or "")
            if p.cti:
                echo(f"counterexample to induction for {name} (breaks {p.failing}):\n{p.cti}")
        rows.append((name, "induction", p.verdict, p.seconds, note))
    verdicts = {r[2] for r in rows}
    code = (exitcodes.VIOLATION if "refuted" in verdicts else
            exitcodes.UNKNOWN if "unknown" in verdicts else exitcodes.VALID)
    return code, rows


def register(group: click.Group) -> None:
    @group.command()
    @click.option("--generation", "-g", default="current", show_default=True,
                  help="protocol generation (spec/config.py)")
    @click.option("--without", multiple=True, metavar="FIX", help="remove one fix (repeatable)")
    @click.option("--brokers", type=int, default=3, show_default=True, help="replicas")
    @click.option("--log-length", type=int, default=2, show_default=True,
                  help="records in all (the log bound)")
    @click.option("--depth", type=int, default=0, show_default=True,
                  help="BMC depth before the inductive proofs (0: induction only)")
    @click.option("--invariant", "invariants", multiple=True, metavar="NAME",
                  help="invariants (repeatable; default: the core ones)")
    @click.option("--time-limit", type=float, default=300.0, show_default=True, help="seconds in all")
    @click.option("--out", type=click.Path(file_okay=False), help="directory for refutation traces")
    def prove(generation, without, brokers, log_length, depth, invariants, time_limit, out):
        """Prove invariants with z3: bounded model checking and induction."""
        from checkers.prove.induction import CORE
        from checkers.prove.props import names_for
        from rich.console import Console
        from rich.table import Table
        cfg = _config(generation, without, brokers, log_length)
        known = names_for(cfg)
        for n in invariants:
            if n not in known:
                raise InputError(f"unknown invariant {n!r} (one of {', '.join(known)})")
        if depth < 0 or time_limit <= 0:
            raise InputError("--depth must be >= 0 and --time-limit positive")
        if depth and brokers > 5:
            raise InputError("BMC traces replay on spec, which takes at most 5 brokers: "
                             "use --depth 0 (induction only) above 5")
        outdir = None
        if out:
            outdir = Path(out)
            try:
                outdir.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise InputError(f"cannot create {out}: {e.strerror}") from None
        chosen = tuple(invariants) or tuple(n for n in CORE if n in known)
        click.echo(f"generation={cfg.generation} fixes={','.join(sorted(cfg.fixes)) or '-'} "
                   f"brokers={cfg.brokers} log-length={cfg.records} depth={depth}")
        t0 = time.monotonic()

        def progress(msg):
            click.echo(f"  [{time.monotonic() - t0:6.1f}s] {msg}", err=True)

        code, rows = run_prove(cfg, chosen, depth, time_limit, outdir, progress=progress)
        table = Table(title="kafkaverify prove")
        for col in ("invariant", "method", "verdict", "seconds", "note"):
            table.add_column(col)
        for name, method, verdict, secs, note in rows:
            table.add_row(name, method, verdict, f"{secs:.1f}", note)
        Console(width=160).print(table)
        return code


def prove_stage():
    """The z3 stage of `kafkaverify check` (about 30 s): BMC refutes `current --without
    min-isr-hw` and spec replays the path; MonotonicEpochs and HwBelowLeo are proved by
    induction for `current`. Returns (verdict pass/fail/unknown, seconds, detail)."""
    from checkers.prove.bmc import bmc
    from checkers.prove.induction import prove
    from spec import Model, make_config
    t0 = time.monotonic()
    parts, verdict = [], "pass"
    r = bmc(Model(make_config("current", ("min-isr-hw",))), 5, time_limit=40)
    if r.status == "violation" and r.problem is None:
        parts.append(f"without min-isr-hw: {r.invariant} at BMC depth {r.depth}, replayed")
    else:
        verdict = "fail" if r.status == "clean" or r.problem else "unknown"
        parts.append(f"without min-isr-hw: BMC {r.status} {r.problem or ''}".strip())
    for name, n, rec in (("MonotonicEpochs", 3, 2), ("HwBelowLeo", 2, 2)):
        p = prove(Model(make_config("current", brokers=n, records=rec)), name, time_limit=30)
        parts.append(f"{name} {p.verdict} ({n} replicas)")
        if p.verdict != "proved" and verdict == "pass":
            verdict = "fail" if p.verdict == "refuted" else "unknown"
    return verdict, time.monotonic() - t0, "; ".join(parts)
