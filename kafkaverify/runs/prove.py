"""`kafkaverify prove`'s work: the z3 engine (checkers/prove) run on the options the command
(kafkaverify/commands/prove.py) parsed, its table of verdicts, and the z3 stage of
`kafkaverify check`.

Contract: a table of invariant / method (induction, k-induction (k=N), BMC depth k, spacer
(IC3/PDR)) / verdict / time; refutations (BMC, and k-induction's base case) written as trace
files that `kafkaverify replay` reproduces on the explicit model; exit 0 all proved, 1 any
refuted, 2 any unknown, 3 usage error.

Without --depth, what induction leaves unknown is searched by BMC over chained steps to
FALLBACK_DEPTH (bmc_fallback) before the answer: `kafkaverify prove --generation v0.10
--brokers 3` refutes StrongIsr there (exit 1) instead of answering unknown.
"""
from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from checkers.model_trace import config_args, write_trace
from checkers.prove.bmc import bmc
from checkers.prove.differential import diameter
from checkers.prove.encoding import supported
from checkers.prove.induction import CORE, prove, prove_together
from checkers.prove.kinduction import kinduction
from checkers.prove.props import CLIENT_PROPS, names_for
from checkers.prove.spacer import METHOD, spacer
from checkers.prove.strengthen import STRENGTHENING
from checkers.prove.strengthen_producers import applies as applies_producers
from checkers.prove.strengthen_producers import guide
from kafkaverify import exitcodes
from kafkaverify.exitcodes import InputError
from kafkaverify.reports.story import print_story
from spec import GENERATIONS, ConfigError, Model, make_config

MAX_PROVE_BROKERS = 7
# Exhaustive BMC, and BMC over parallel or chained steps, bit-blast: integer fields as 16-bit
# signed bit-vectors (checkers/prove/sym.py says why that width cannot overflow at any depth
# this command reaches; a parallel or chained step fires at most one action per instance).
EXHAUSTIVE_BITS = 16
# The guided search (--guided) is a refutation search whose paths are replayed on spec: 8-bit
# fields suffice at the depths it is used at (values move by at most one per step from small
# starts; --guided takes at most MAX_GUIDED_DEPTH), and a wrap-around could only lose a path.
GUIDED_BITS = 8
MAX_GUIDED_DEPTH = 100
# Without --depth: BMC over chained steps to this depth for what induction leaves unknown
# (bmc_fallback). The explorer's shortest v0.10 counterexample to the core invariants at three
# brokers is 11 actions (StrongIsr, breadth-first, 475 k states); chained BMC finds a 15-action
# one at depth 2 in ~4 s. A clean search at three brokers (v0.10, LogMatching and
# ReplicationQuorumSuperset) took 0.5 s to depth 1, 4 s to 2, 30 s to 3 and 246 s to 4 on the
# shared two cores: 3 is one step of margin within the default time limit of 300 s.
FALLBACK_DEPTH = 3


def prove_config(generation, without, brokers, log_length, **bounds):
    """The model config for the z3 engine. spec's make_config caps brokers at 5 (for the
    explorer); induction is not enumeration, so up to 7 replicas are allowed here, validated
    by make_config at 5 and widened. `bounds`: further make_config bounds (faults, producers).
    Raises ConfigError."""
    if not 1 <= brokers <= MAX_PROVE_BROKERS:
        raise ConfigError(f"brokers must be between 1 and {MAX_PROVE_BROKERS}")
    cfg = make_config(generation, tuple(without), brokers=min(brokers, 5), records=log_length,
                      **bounds)
    return replace(cfg, brokers=brokers)


def cli_config(generation, without, brokers, log_length, idempotence=None, **bounds):
    bounds = {k: v for k, v in bounds.items() if v is not None}
    if idempotence is not None:     # as `kafkaverify explore --idempotence`
        if not bounds.get("producers"):
            raise InputError("--idempotence needs --producers")
        has = "idempotent-producer" in GENERATIONS.get(generation, ())
        if idempotence == "on" and not has:
            raise InputError(f"generation {generation} has no idempotent producer "
                             "(KIP-98 came with kip-101)")
        if idempotence == "off" and has and "idempotent-producer" not in without:
            without = tuple(without) + ("idempotent-producer",)
    try:
        cfg = prove_config(generation, without, brokers, log_length, **bounds)
    except ConfigError as e:
        raise InputError(str(e)) from None
    why = supported(cfg)
    if why:
        raise InputError(f"the z3 encoding does not cover this configuration: {why}")
    return cfg


def run_prove(cfg, invariants: tuple[str, ...], depth: int, time_limit: float,
              out: Path | None, echo=click.echo, progress=None, exhaustive: bool = False,
              write_slots: int | None = None, guided: int | None = None, k: int | None = None,
              lemmas: tuple[str, ...] = (), steps: str = "sequential",
              fallback_depth: int | None = None) -> tuple[int, list[tuple]]:
    """BMC to `depth` over the chosen invariants, then induction for each not refuted (with `k`:
    k-induction for k = 1 .. `k` instead, strengthened by `lemmas` only: checkers/prove/kinduction.py).
    With `exhaustive`, BMC is one query over every path of at most `depth` steps; when it is
    clean and `depth` reaches the diameter of the reachable state space (an explicit
    breadth-first search of spec measures it), the invariants are proved at these bounds.
    The producer invariants are proved by induction with the strengthening of
    checkers/prove/strengthen_producers.py where it applies (one idempotent producer on a quiet
    single broker, strengthen_producers.applies), else with that of
    checkers/prove/strengthen_epochs.py (one broker across crashes, elections and epoch bumps,
    no unflushed loss: strengthen_epochs.applies; several brokers across a fail-over with
    StrongIsr's lemmas: applies_replicated); elsewhere only exhaustive BMC settles them.
    With `guided` (a number of steps N), BMC is instead one query over paths of at most
    `depth` steps whose states keep the producer strengthening but in the last N steps
    (strengthen_producers.guide): a search for a refutation only, which proves nothing.
    With `steps` "parallel", each BMC step fires a set of pairwise non-interfering actions,
    with "chained" any subsequence of the actions in a fixed order (checkers/prove/steps.py);
    the depth counts such steps, the trace holds the path as spec replayed it.
    With `fallback_depth` (the command line gave no --depth), an invariant induction leaves
    unknown is then searched by BMC over chained steps to that depth in the time left
    (`bmc_fallback`): a refutation replaces its unknown row. Returns (exit code, rows of
    (invariant, method, verdict, seconds, note))."""
    t0 = time.monotonic()
    model = Model(cfg)
    rows: list[tuple] = []
    refuted: set[str] = set()
    settled: set[str] = set()
    left = lambda: max(1.0, time_limit - (time.monotonic() - t0))   # noqa: E731
    method = "BMC depth {}"
    if depth > 0:
        extra = {}
        if guided is not None:
            extra = {"one_query": True, "guide": guide(cfg), "guide_tail": guided}
            method = f"BMC depth {{}}, guided (strengthening kept but in the last {guided} steps)"
        if steps != "sequential":
            extra["steps"] = steps
            method = f"BMC depth {{}}, {steps} steps"
        bits = (GUIDED_BITS if guided is not None else
                EXHAUSTIVE_BITS if exhaustive or steps != "sequential" else 0)
        r = bmc(model, depth, invariants=invariants, time_limit=left(), exhaustive=exhaustive,
                writes=write_slots, bits=bits, **extra,
                progress=(lambda d, s: progress(f"BMC depth {d} done, {s:.1f}s")) if progress else None)
        if r.status == "violation" and r.problem is None:
            refuted.add(r.invariant)
            note = refutation(cfg, r, invariants, out, f" --depth {depth}"
                               + (f" --{steps}-steps" if steps != "sequential" else ""), depth)
            if r.steps:
                note = (f"{len(r.actions)} actions in {len(r.steps)} {steps} steps "
                        f"({'+'.join(map(str, r.steps))}); " + note)
            rows.append((r.invariant, method.format(r.depth), "refuted", r.seconds, note))
            settled.add(r.invariant)
        elif r.status == "violation":
            rows.append(("(all)", method.format(r.depth), "unknown", r.seconds,
                         f"the engines disagree: {r.problem}"))
        elif exhaustive and r.status == "clean":
            t1 = time.monotonic()
            dia = diameter(model)
            how = f"BMC exhaustive depth {depth}"
            if dia is not None and dia <= depth:
                for name in invariants:
                    rows.append((name, how, "proved", r.seconds + time.monotonic() - t1,
                                 f"no path of <= {depth} steps violates it; the reachable states "
                                 f"lie within {dia} steps (explicit BFS of spec)"))
                    settled.add(name)
            else:
                rows.append(("(all)", how, "clean", r.seconds,
                             "no violation within the depth; " + (
                                 f"below the diameter {dia}" if dia is not None else
                                 "the state space is too large to measure its diameter")))
        else:
            rows.append(("(all)", method.format(r.depth), "unknown" if r.status == "unknown" else "clean",
                         r.seconds, "no violation within the depth" if r.status == "clean" else
                         r.message or "time limit"))
    together: dict = {}
    pending = [n for n in invariants if n in CLIENT_PROPS and n not in refuted and n not in settled]
    if k is None and len(pending) > 1:
        # the producer promises share one strengthening: one pass proves them all, its
        # queries on the machine's two cores
        if progress:
            progress(f"induction: {', '.join(pending)}")
        together = dict(zip(pending, prove_together(model, tuple(pending), time_limit=left(),
                                                    workers=2)))
    for name in invariants:
        if name in refuted or name in settled:
            continue
        if k is not None:
            rows.append(kinduction_row(model, name, k, lemmas, left(), out, echo, progress))
            continue
        if name in together:
            p = together[name]
        else:
            if progress:
                progress(f"induction: {name}")
            p = prove(model, name, time_limit=left())
        note = ""
        if p.verdict != "proved":
            note = f"not inductive: breaks {p.failing}" if p.cti else (p.failing or "")
            if name in CLIENT_PROPS and not p.cti:
                note += "; exhaustive BMC may settle it: --exhaustive with --depth at least the diameter"
            if p.cti:
                echo(f"counterexample to induction for {name} (breaks {p.failing}):\n{p.cti}")
        elif name in CLIENT_PROPS:
            which = ("strengthen_producers" if applies_producers(cfg) is None
                     else "strengthen_epochs")
            note = (f"inductive with the producer strengthening ({which}): holds in "
                    "every reachable state at these bounds, at any depth")
        rows.append((name, "induction", p.verdict, p.seconds, note))
    if fallback_depth and k is None:
        rows = bmc_fallback(model, invariants, rows, fallback_depth,
                            time_limit - (time.monotonic() - t0), out, progress)
    verdicts = {r[2] for r in rows}
    code = (exitcodes.VIOLATION if "refuted" in verdicts else
            exitcodes.UNKNOWN if "unknown" in verdicts else exitcodes.VALID)
    return code, rows


def bmc_fallback(model, invariants: tuple[str, ...], rows: list[tuple], depth: int,
                 time_left: float, out: Path | None, progress=None) -> list[tuple]:
    """Induction left some invariants unknown: search them by BMC over chained steps
    (checkers/prove/steps.py: each step fires any subsequence of the actions in a fixed order,
    so a path of a dozen actions fits in two or three steps, where one action per step costs
    minutes past depth 6 at three brokers) to `depth`, within `time_left` seconds. Each
    refutation (replayed on spec, its trace written to `out`) replaces the invariant's unknown
    row, and the search goes on for the others; bounded by the invariants (one refutation per
    round) and by the time. What stays unknown keeps its row, with one row saying how far BMC
    went. Returns the rows."""
    t0 = time.monotonic()
    unknown = [r[0] for r in rows if r[1] == "induction" and r[2] == "unknown"]
    rows = list(rows)
    for _ in range(len(invariants)):
        left = time_left - (time.monotonic() - t0)
        if not unknown or left < 1.0:
            break
        if progress:
            progress(f"BMC to depth {depth}, chained steps, for what induction left unknown: "
                     f"{', '.join(unknown)}")
        r = bmc(model, depth, invariants=tuple(unknown), time_limit=left, steps="chained",
                bits=EXHAUSTIVE_BITS,
                progress=(lambda d, s: progress(f"BMC depth {d} done, {s:.1f}s")) if progress else None)
        method = f"BMC depth {r.depth}, chained steps (induction: unknown)"
        if r.status == "violation" and r.problem is None and r.invariant in unknown:
            chosen = " ".join(f"--invariant {n}" for n in unknown)
            note = (f"{len(r.actions)} actions in {len(r.steps)} chained steps "
                    f"({'+'.join(map(str, r.steps))}); "
                    + refutation(model.config, r, tuple(unknown), out,
                                 f" --depth {depth} --chained-steps {chosen}", depth))
            rows = [row for row in rows if row[0] != r.invariant]
            rows.append((r.invariant, method, "refuted", r.seconds, note))
            unknown.remove(r.invariant)
            continue
        if r.status == "violation":
            rows.append(("(unknown ones)", method, "unknown", r.seconds,
                         f"the engines disagree: {r.problem}"))
        else:
            rows.append(("(unknown ones)", method, "unknown" if r.status == "unknown" else "clean",
                         r.seconds, f"no violation within {r.depth} chained steps"
                         if r.status == "clean" else r.message or "time limit"))
        break
    return rows


def run_spacer(cfg, invariants: tuple[str, ...], time_limit: float, out: Path | None,
               progress=None) -> tuple[int, list[tuple]]:
    """Spacer (checkers/prove/spacer.py) on each invariant in turn, the time limit shared:
    a counterexample replayed on spec is "refuted" (its trace written to `out`), an invariant
    Spacer finds and the independent check confirms is "proved", anything else "unknown".
    Returns (exit code, rows) as run_prove."""
    t0 = time.monotonic()
    model = Model(cfg)
    rows: list[tuple] = []
    for name in invariants:
        left = time_limit - (time.monotonic() - t0)
        if left <= 0:
            rows.append((name, METHOD, "unknown", 0.0, "time limit"))
            continue
        if progress:
            progress(f"spacer: {name}")
        r = spacer(model, (name,), time_limit=left)
        if r.status == "violation" and r.bmc is not None and r.bmc.problem is None \
                and r.bmc.invariant is not None:
            note = f"a path of {r.depth} steps; " + refutation(
                cfg, r.bmc, (name,), out, f" --method spacer --invariant {name}", r.bmc.depth)
            rows.append((r.bmc.invariant, METHOD, "refuted", r.seconds, note))
        elif r.status == "violation":
            why = r.bmc.problem if r.bmc is not None else r.message
            rows.append((name, METHOD, "unknown", r.seconds, f"the engines disagree: {why}"))
        elif r.status == "proved":
            rows.append((name, METHOD, "proved", r.seconds,
                         r.message + f" in {r.check_seconds:.1f}s; no lemmas"))
        else:
            rows.append((name, METHOD, "unknown", r.seconds, r.message))
    verdicts = {r[2] for r in rows}
    code = (exitcodes.VIOLATION if "refuted" in verdicts else
            exitcodes.UNKNOWN if "unknown" in verdicts else exitcodes.VALID)
    return code, rows


def refutation(cfg, r, invariants, out: Path | None, args: str, depth: int) -> str:
    """A BMC refutation (spec replayed it): its story printed, its trace written to `out`.
    Returns the row's note."""
    note = r.message
    if out is not None:
        path = out / f"prove-{cfg.generation}-{r.invariant}-depth{r.depth}.jsonl"
        cmd = "kafkaverify prove " + config_args(cfg) + args
        write_trace(path, cfg, r.actions, r.states, (r.invariant, r.message),
                    bounds={"depth": depth}, command=cmd,
                    invariants=tuple(i for i in invariants if i != "MonotonicEpochs") or None)
        note += f"; trace {path} (kafkaverify replay {path})"
    print_story(r.actions, r.states, r.invariant, r.message)
    return note


def kinduction_row(model, name, K, lemmas, time_limit, out, echo, progress) -> tuple:
    """k-induction of one invariant for k = 1 .. K: (invariant, method, verdict, seconds, note).
    A base-case violation is a refutation like BMC's (trace, story); the last counterexample
    to k-induction is printed as a path of k + 1 states."""
    r = kinduction(model, name, K, strengthening=lemmas, time_limit=time_limit, progress=progress)
    method = f"k-induction (k={r.k})"
    with_lemmas = f" with {', '.join(lemmas)}" if lemmas else " without lemmas"
    if r.verdict == "refuted" and r.bmc is not None:
        note = f"base case: BMC depth {r.bmc.depth}; " + refutation(
            model.config, r.bmc, (name,), out, f" --invariant {name} --k {K}", r.bmc.depth)
    elif r.verdict == "proved":
        note = (f"{r.k}-inductive{with_lemmas}; no violation within {r.k - 1} steps (BMC)"
                if r.k > 1 else f"inductive{with_lemmas}")
    else:
        note = r.failing or ""
        if r.cti:
            echo(f"counterexample to {r.cti_k}-induction for {name} ({r.failing}), "
                 f"{r.cti_k + 1} states:\n{r.cti}")
    return name, method, r.verdict, r.seconds, note


def prove_command(generation, without, brokers, log_length, depth, invariants, time_limit, out,
                  crashes, pauses, elections, losses, min_isr, unflushed_loss, disk_loss,
                  producers, max_in_flight, retries, idempotence, exhaustive, write_slots, guided,
                  k, lemmas, method, parallel, chained) -> int:
    """`kafkaverify prove` once its options are parsed: checks them against each other and
    the encoding, prints the settings, runs the engine and prints the table. Returns the exit
    code. `depth` None: no --depth given (induction, then bmc_fallback)."""
    cfg = cli_config(generation, without, brokers, log_length, idempotence, crashes=crashes,
                     pauses=pauses, elections=elections, losses=losses, min_isr=min_isr,
                     unflushed_loss=unflushed_loss, disk_loss=disk_loss, producers=producers,
                     max_in_flight=max_in_flight, retries=retries)
    known = names_for(cfg, CLIENT_PROPS + tuple(names_for(cfg)))
    for n in invariants:
        if n not in known:
            raise InputError(f"unknown invariant {n!r} (one of {', '.join(known)})")
    fallback = FALLBACK_DEPTH if depth is None and method == "auto" and k is None \
        and guided is None and brokers <= 5 else None
    depth = depth or 0
    if depth < 0 or time_limit <= 0:
        raise InputError("--depth must be >= 0 and --time-limit positive")
    if exhaustive and not depth:
        raise InputError("--exhaustive needs --depth")
    if write_slots is not None and (not (exhaustive or guided is not None) or write_slots < 1):
        raise InputError("--write-slots needs --exhaustive or --guided and is at least 1")
    if guided is not None:
        if exhaustive or not depth or guided < 0 or guided > depth or depth > MAX_GUIDED_DEPTH:
            raise InputError(f"--guided N needs --depth (at most {MAX_GUIDED_DEPTH}), "
                             "0 <= N <= depth, and not --exhaustive")
        why = guide(cfg)
        if isinstance(why, str):
            raise InputError(f"--guided: {why}")
    steps = "parallel" if parallel else "chained" if chained else "sequential"
    if parallel and chained:
        raise InputError("--parallel-steps or --chained-steps, not both")
    if steps != "sequential" and (not depth or exhaustive or guided is not None):
        raise InputError(f"--{steps}-steps needs --depth, and not --exhaustive or --guided")
    if method == "spacer":
        if depth or exhaustive or guided is not None or k is not None or write_slots or steps != "sequential":
            raise InputError("--method spacer takes none of --depth, --exhaustive, --guided, "
                             "--k, --write-slots, --parallel-steps, --chained-steps")
        if cfg.producers:
            raise InputError("--method spacer: producers are not encoded for Spacer")
        if brokers > 5:
            raise InputError("Spacer's counterexamples replay on spec, which takes at most "
                             "5 brokers")
    if k is not None and k < 1:
        raise InputError("--k must be at least 1")
    if lemmas:
        if k is None:
            raise InputError("--lemma needs --k (induction chooses its own strengthening)")
        for n in lemmas:
            if n not in STRENGTHENING:
                raise InputError(f"unknown lemma {n!r} (one of {', '.join(STRENGTHENING)})")
    if k is not None and k > 1 and brokers > 5:
        raise InputError("k-induction's base case is BMC, whose traces replay on spec, which "
                         "takes at most 5 brokers: --k 1 above 5")
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
    if invariants:
        chosen = tuple(invariants)
    elif cfg.producers:
        chosen = tuple(n for n in CLIENT_PROPS if n in names_for(cfg))
        if not chosen:
            raise InputError("these producer settings promise neither ProducerSendOrder nor "
                             "ProducerExactlyOnce: name one with --invariant to ask anyway")
    else:
        chosen = tuple(n for n in CORE if n in known)
    click.echo(f"generation={cfg.generation} fixes={','.join(sorted(cfg.fixes)) or '-'} "
               f"brokers={cfg.brokers} log-length={cfg.records} depth={depth}"
               + (f" bmc-fallback={fallback}" if fallback else "")
               + (" exhaustive" if exhaustive else "")
               + (f" guided={guided}" if guided is not None else "")
               + (f" {steps}-steps" if steps != "sequential" else "")
               + (f" k-induction k<={k} lemmas={','.join(lemmas) or '-'}" if k is not None else ""))
    if cfg.producers:
        click.echo(f"producers={cfg.producers} records_each={cfg.records} "
                   f"max_in_flight={cfg.max_in_flight} retries={cfg.retries} "
                   f"idempotence={'on' if cfg.idempotence else 'off'} crashes={cfg.crashes} "
                   f"elections={cfg.elections} losses={cfg.losses} min_isr={cfg.min_isr}")
    t0 = time.monotonic()

    def progress(msg):
        click.echo(f"  [{time.monotonic() - t0:6.1f}s] {msg}", err=True)

    if method == "spacer":
        code, rows = run_spacer(cfg, chosen, time_limit, outdir, progress=progress)
    else:
        code, rows = run_prove(cfg, chosen, depth, time_limit, outdir, progress=progress,
                               exhaustive=exhaustive, write_slots=write_slots, guided=guided,
                               k=k, lemmas=tuple(lemmas), steps=steps,
                               fallback_depth=fallback)
    table = Table(title="kafkaverify prove")
    for col in ("invariant", "method", "verdict", "seconds", "note"):
        table.add_column(col)
    for name, method, verdict, secs, note in rows:
        table.add_row(name, method, verdict, f"{secs:.1f}", note)
    Console(width=160).print(table)
    return code


def prove_stage():
    """The z3 stage of `kafkaverify check` (about 10 s): BMC refutes `current --without
    min-isr-hw` and spec replays the path; MonotonicEpochs and HwBelowLeo are proved by
    induction for `current`, StrongIsr (leader completeness, with LogMatching) for `current` and
    for `kip-966` (eligible leader replicas). Returns (verdict pass/fail/unknown, seconds,
    detail)."""
    t0 = time.monotonic()
    parts, verdict = [], "pass"
    r = bmc(Model(make_config("current", ("min-isr-hw",))), 5, time_limit=40)
    if r.status == "violation" and r.problem is None:
        parts.append(f"without min-isr-hw: {r.invariant} at BMC depth {r.depth}, replayed")
    else:
        verdict = "fail" if r.status == "clean" or r.problem else "unknown"
        parts.append(f"without min-isr-hw: BMC {r.status} {r.problem or ''}".strip())
    for gen, name, n, rec in (("current", "MonotonicEpochs", 3, 2), ("current", "HwBelowLeo", 2, 2),
                              ("current", "StrongIsr", 2, 2), ("kip-966", "StrongIsr", 2, 2)):
        p = prove(Model(make_config(gen, brokers=n, records=rec)), name, time_limit=30)
        parts.append(f"{name} {p.verdict} ({gen}, {n} replicas)")
        if p.verdict != "proved" and verdict == "pass":
            verdict = "fail" if p.verdict == "refuted" else "unknown"
    return verdict, time.monotonic() - t0, "; ".join(parts)
