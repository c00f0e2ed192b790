"""`kafkaverify prove`: the z3 engine (checkers/prove) from the command line, and the z3 stage
of `kafkaverify check`.

Contract: a table of invariant / method (induction, k-induction (k=N), BMC depth k, spacer
(IC3/PDR)) / verdict /
time; refutations (BMC, and k-induction's base case) written as trace files that `kafkaverify
replay` reproduces on the explicit model; exit 0 all proved, 1 any refuted, 2 any unknown,
3 usage error.
"""
from __future__ import annotations

import time
from pathlib import Path

import click

from kafkaverify import exitcodes
from kafkaverify.exitcodes import InputError


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


def prove_config(generation, without, brokers, log_length, **bounds):
    """The model config for the z3 engine. spec's make_config caps brokers at 5 (for the
    explorer); induction is not enumeration, so up to 7 replicas are allowed here, validated
    by make_config at 5 and widened. `bounds`: further make_config bounds (faults, producers).
    Raises ConfigError."""
    from dataclasses import replace

    from spec import ConfigError, make_config
    if not 1 <= brokers <= MAX_PROVE_BROKERS:
        raise ConfigError(f"brokers must be between 1 and {MAX_PROVE_BROKERS}")
    cfg = make_config(generation, tuple(without), brokers=min(brokers, 5), records=log_length,
                      **bounds)
    return replace(cfg, brokers=brokers)


def _config(generation, without, brokers, log_length, idempotence=None, **bounds):
    from checkers.prove.encoding import supported
    from spec import GENERATIONS, ConfigError
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
              lemmas: tuple[str, ...] = (), steps: str = "sequential") -> tuple[int, list[tuple]]:
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
    the depth counts such steps, the trace holds the path as spec replayed it. Returns (exit code, rows of (invariant, method, verdict, seconds, note))."""
    from checkers.prove.bmc import bmc
    from checkers.prove.induction import prove
    from checkers.prove.props import CLIENT_PROPS
    from spec import Model
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
            from checkers.prove.strengthen_producers import guide
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
            note = _refutation(cfg, r, invariants, out, f" --depth {depth}"
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
            from checkers.prove.differential import diameter
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
        from checkers.prove.induction import prove_together
        if progress:
            progress(f"induction: {', '.join(pending)}")
        together = dict(zip(pending, prove_together(model, tuple(pending), time_limit=left(),
                                                    workers=2)))
    for name in invariants:
        if name in refuted or name in settled:
            continue
        if k is not None:
            rows.append(_kinduction_row(model, name, k, lemmas, left(), out, echo, progress))
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
            from checkers.prove import strengthen_producers
            which = ("strengthen_producers" if strengthen_producers.applies(cfg) is None
                     else "strengthen_epochs")
            note = (f"inductive with the producer strengthening ({which}): holds in "
                    "every reachable state at these bounds, at any depth")
        rows.append((name, "induction", p.verdict, p.seconds, note))
    verdicts = {r[2] for r in rows}
    code = (exitcodes.VIOLATION if "refuted" in verdicts else
            exitcodes.UNKNOWN if "unknown" in verdicts else exitcodes.VALID)
    return code, rows


def run_spacer(cfg, invariants: tuple[str, ...], time_limit: float, out: Path | None,
               progress=None) -> tuple[int, list[tuple]]:
    """Spacer (checkers/prove/spacer.py) on each invariant in turn, the time limit shared:
    a counterexample replayed on spec is "refuted" (its trace written to `out`), an invariant
    Spacer finds and the independent check confirms is "proved", anything else "unknown".
    Returns (exit code, rows) as run_prove."""
    from checkers.prove.spacer import METHOD, spacer
    from spec import Model
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
            note = f"a path of {r.depth} steps; " + _refutation(
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


def _refutation(cfg, r, invariants, out: Path | None, args: str, depth: int) -> str:
    """A BMC refutation (spec replayed it): its story printed, its trace written to `out`.
    Returns the row's note."""
    from checkers.model_trace import config_args, write_trace
    from kafkaverify.cmd_model import print_story
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


def _kinduction_row(model, name, K, lemmas, time_limit, out, echo, progress) -> tuple:
    """k-induction of one invariant for k = 1 .. K: (invariant, method, verdict, seconds, note).
    A base-case violation is a refutation like BMC's (trace, story); the last counterexample
    to k-induction is printed as a path of k + 1 states."""
    from checkers.prove.kinduction import kinduction
    r = kinduction(model, name, K, strengthening=lemmas, time_limit=time_limit, progress=progress)
    method = f"k-induction (k={r.k})"
    with_lemmas = f" with {', '.join(lemmas)}" if lemmas else " without lemmas"
    if r.verdict == "refuted" and r.bmc is not None:
        note = f"base case: BMC depth {r.bmc.depth}; " + _refutation(
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


def register(group: click.Group) -> None:
    @group.command()
    @click.option("--generation", "-g", default="current", show_default=True,
                  help="protocol generation (spec/config.py)")
    @click.option("--without", multiple=True, metavar="FIX", help="remove one fix (repeatable)")
    @click.option("--brokers", type=int, default=3, show_default=True, help="replicas")
    @click.option("--log-length", "--records", "log_length", type=int, default=2, show_default=True,
                  help="records in all (the log bound); with --producers, records per producer")
    @click.option("--depth", type=int, default=0, show_default=True,
                  help="BMC depth before the inductive proofs (0: induction only)")
    @click.option("--invariant", "invariants", multiple=True, metavar="NAME",
                  help="invariants (repeatable; default: the core ones)")
    @click.option("--time-limit", type=float, default=300.0, show_default=True, help="seconds in all")
    @click.option("--out", type=click.Path(file_okay=False), help="directory for refutation traces")
    @click.option("--crashes", type=int, default=None, help="crashes in all [2]")
    @click.option("--pauses", type=int, default=None,
                  help="pauses that outlast the coordination session (zombie controllers) [0]")
    @click.option("--elections", type=int, default=None, help="leader elections in all [2]")
    @click.option("--losses", type=int, default=None,
                  help="lost control messages, and with producers dropped connections [1]")
    @click.option("--min-isr", type=int, default=None, help="min.insync.replicas [2]")
    @click.option("--unflushed-loss", is_flag=True, default=None, help="crashes may lose unflushed writes")
    @click.option("--disk-loss", is_flag=True, default=None, help="a crash may lose the whole disk")
    @click.option("--producers", type=int, default=None,
                  help="producers (spec/producer.py; --records is then per producer) [0]")
    @click.option("--max-in-flight", type=int, default=None, help="max.in.flight.requests.per.connection [1]")
    @click.option("--retries", type=int, default=None, help="retry budget per batch [0]")
    @click.option("--idempotence", type=click.Choice(["on", "off"]), default=None,
                  help="idempotent producer (the fix idempotent-producer) [on from kip-101]")
    @click.option("--exhaustive", is_flag=True,
                  help="BMC as one query over every path of at most --depth steps; proves the "
                       "invariants when --depth reaches the reachable states' diameter")
    @click.option("--write-slots", type=int, default=None,
                  help="with --exhaustive: producer writes (and log entries) the encoding holds "
                       "[producers x records x (retries + 1)]; a path needing more is unknown")
    @click.option("--guided", type=int, default=None, metavar="N",
                  help="with --depth: one BMC query over paths whose states keep the producer "
                       "strengthening but in the last N steps: a search for a refutation "
                       "(replayed on spec), never a proof")
    @click.option("--k", "k", type=int, default=None, metavar="K",
                  help="k-induction for k = 1 .. K instead of induction: the smallest k that "
                       "proves, the base case by BMC; strengthened only by --lemma")
    @click.option("--method", type=click.Choice(["auto", "spacer"]), default="auto",
                  show_default=True,
                  help="auto: BMC to --depth, then induction (or --k); spacer: z3's Spacer "
                       "(IC3/PDR) on the transition system as Horn clauses, no lemmas: a "
                       "counterexample replayed on spec, or an inductive invariant checked "
                       "independently")
    @click.option("--lemma", "lemmas", multiple=True, metavar="NAME",
                  help="with --k: a strengthening lemma of checkers/prove/strengthen.py (repeatable)")
    @click.option("--parallel-steps", "parallel", is_flag=True,
                  help="with --depth: each BMC step fires a set of pairwise non-interfering "
                       "actions (the depth counts such steps); a path found is linearised and "
                       "replayed on spec")
    @click.option("--chained-steps", "chained", is_flag=True,
                  help="with --depth: each BMC step fires any subsequence of the actions in a "
                       "fixed order, each seeing its predecessors' state (the depth counts such "
                       "steps); a path found is replayed on spec")
    def prove(generation, without, brokers, log_length, depth, invariants, time_limit, out,
              crashes, pauses, elections, losses, min_isr, unflushed_loss, disk_loss, producers,
              max_in_flight, retries, idempotence, exhaustive, write_slots, guided, k, lemmas,
              method, parallel, chained):
        """Prove invariants with z3: bounded model checking (one step per action, or parallel or
        chained steps), induction and k-induction, or Spacer (IC3/PDR) with --method spacer."""
        from checkers.prove.induction import CORE
        from checkers.prove.props import CLIENT_PROPS, names_for
        from rich.console import Console
        from rich.table import Table
        cfg = _config(generation, without, brokers, log_length, idempotence, crashes=crashes,
                      pauses=pauses, elections=elections, losses=losses, min_isr=min_isr,
                      unflushed_loss=unflushed_loss, disk_loss=disk_loss, producers=producers,
                      max_in_flight=max_in_flight, retries=retries)
        known = names_for(cfg, CLIENT_PROPS + tuple(names_for(cfg)))
        for n in invariants:
            if n not in known:
                raise InputError(f"unknown invariant {n!r} (one of {', '.join(known)})")
        if depth < 0 or time_limit <= 0:
            raise InputError("--depth must be >= 0 and --time-limit positive")
        if exhaustive and not depth:
            raise InputError("--exhaustive needs --depth")
        if write_slots is not None and (not (exhaustive or guided is not None) or write_slots < 1):
            raise InputError("--write-slots needs --exhaustive or --guided and is at least 1")
        if guided is not None:
            from checkers.prove.strengthen_producers import guide
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
            from checkers.prove.strengthen import STRENGTHENING
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
                                   k=k, lemmas=tuple(lemmas), steps=steps)
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
    for gen, name, n, rec in (("current", "MonotonicEpochs", 3, 2), ("current", "HwBelowLeo", 2, 2),
                              ("current", "StrongIsr", 2, 2), ("kip-966", "StrongIsr", 2, 2)):
        p = prove(Model(make_config(gen, brokers=n, records=rec)), name, time_limit=30)
        parts.append(f"{name} {p.verdict} ({gen}, {n} replicas)")
        if p.verdict != "proved" and verdict == "pass":
            verdict = "fail" if p.verdict == "refuted" else "unknown"
    return verdict, time.monotonic() - t0, "; ".join(parts)
