"""The model commands' work (explore, simulate, replay): the config from the command line's
bounds, the bounds and promises printed first (STYLE 4), the search, and on a violation the
story, the trace and the command that reproduces it. The click options live in
kafkaverify/commands/model.py."""
from __future__ import annotations

import shlex

import click

from checkers.explore import default_workers
from checkers.explore import explore as bfs
from checkers.model_trace import cli_defaults, config_args, write_trace
from checkers.model_trace import replay as replay_trace
from checkers.portfolio import search
from checkers.shrink_trace import shrink_path
from checkers.simulate import simulate as random_walks
from kafkaverify import exitcodes
from kafkaverify.exitcodes import InputError
from kafkaverify.reports.story import print_story
from spec import GENERATIONS, INVARIANT_NAMES, ConfigError, Model, make_config
from spec.invariants import unpromised
from traces.trace import TraceError

DEFAULT_MAX_DEPTH = 60
DEFAULT_MAX_STATES = 20_000_000
DEFAULT_TIME_LIMIT = 300.0


def build_config(generation, without, **bounds):
    """The model config of `kafkaverify explore/simulate`: the CLI's defaults
    (checkers/model_trace.cli_defaults) under the bounds given. Raises InputError."""
    idem = bounds.pop("idempotence", None)
    given = {k: v for k, v in bounds.items() if v is not None and v is not False}
    if idem is not None:
        if not given.get("producers"):
            raise InputError("--idempotence needs --producers")
        has = "idempotent-producer" in GENERATIONS.get(generation, ())
        if idem == "on" and not has:
            raise InputError(f"generation {generation} has no idempotent producer (KIP-98 came with kip-101)")
        if idem == "off" and has and "idempotent-producer" not in without:
            without = tuple(without) + ("idempotent-producer",)
    given = {**cli_defaults(given.get("brokers"), given.get("transactions", 0)), **given}
    try:
        return make_config(generation, tuple(without), **given)
    except ConfigError as e:
        raise InputError(str(e)) from None


def print_bounds(cfg, extra: str = "") -> None:
    click.echo(f"generation={cfg.generation} fixes={','.join(sorted(cfg.fixes)) or '-'}")
    click.echo(f"bounds: brokers={cfg.brokers} records={cfg.records} crashes={cfg.crashes} pauses={cfg.pauses} "
               f"elections={cfg.elections} losses={cfg.losses} min_isr={cfg.min_isr} acks={cfg.acks} "
               f"unclean={cfg.unclean} unflushed_loss={cfg.unflushed_loss} disk_loss={cfg.disk_loss}{extra}")
    if cfg.producers:
        click.echo(f"producers={cfg.producers} records_each={cfg.records} max_in_flight={cfg.max_in_flight} "
                   f"retries={cfg.retries} acks={cfg.acks} idempotence={'on' if cfg.idempotence else 'off'}")
    if cfg.consumers:
        click.echo(f"consumers={cfg.consumers} records={cfg.records} commit={cfg.commit} "
                   f"generation_fencing={'on' if 'group-generation-fencing' in cfg.fixes else 'off'}")
    if cfg.transactions:
        click.echo(f"transactions={cfg.transactions} txn_partitions={cfg.txn_partitions} "
                   f"isolation={cfg.isolation} txn_rounds={cfg.txn_rounds} "
                   f"txn_timeouts={cfg.txn_timeouts} txn_dups={cfg.txn_dups} zombies={cfg.zombies}"
                   + (" consume_transform_produce" if cfg.consume_transform_produce else ""))


def print_promises(cfg, asked) -> None:
    """Say which client invariants these settings promise nothing of: off, unless asked for."""
    for name, why in sorted(unpromised(cfg).items()):
        state = "checked because asked for" if name in asked else "off"
        click.echo(f"{name}: {why} ({state})")


def report_violation(cfg, r, stats: str, out: str | None, cmd: str, **trace_fields) -> int:
    """The story, the figures, the trace (with --out) and the command that reproduces it."""
    print_story(r.path, r.states, r.invariant, r.message)
    click.echo(stats)
    if out:
        try:
            write_trace(out, cfg, r.path, r.states, (r.invariant, r.message), command=cmd, **trace_fields)
            click.echo(f"trace written to {out}; replay: kafkaverify replay {shlex.quote(out)}")
        except OSError as e:
            click.echo(f"error: could not write the trace to {out}: {e.strerror}", err=True)
    click.echo(f"reproduce: {cmd}")
    return exitcodes.VIOLATION


def check_invariant_names(names) -> None:
    for n in names:
        if n not in INVARIANT_NAMES + ("MonotonicEpochs",):
            raise InputError(f"unknown invariant {n!r} (one of {', '.join(INVARIANT_NAMES)}, MonotonicEpochs)")


def run_explore(cfg, invariants, max_depth, max_states, time_limit, workers, seed, bfs_only,
                out) -> int:
    """`kafkaverify explore`: breadth-first search, then (unless `bfs_only`) swarm walks."""
    workers = default_workers() if workers is None else workers
    if not 1 <= workers <= 64:
        raise InputError("--workers must be between 1 and 64")
    print_bounds(cfg, f" max_depth={max_depth} max_states={max_states} time_limit={time_limit:g}s"
                      f" workers={workers}" + ("" if bfs_only else f" seed={seed}"))
    print_promises(cfg, invariants)
    cmd = ("kafkaverify explore " + config_args(cfg) + "".join(f" --invariant {i}" for i in invariants)
           + (" --bfs-only" if bfs_only else f" --seed {seed}" if seed else "")
           + (f" --workers {workers}" if workers != default_workers() else "")
           + (f" --time-limit {time_limit:g}" if time_limit != DEFAULT_TIME_LIMIT else ""))

    def progress(depth, distinct, frontier, secs):
        click.echo(f"  depth {depth}  states {distinct:,}  frontier {frontier:,}  "
                   f"{distinct / secs:,.0f} states/s  {secs:.0f}s", err=True)

    def note(text):
        click.echo(f"  {text}", err=True)

    model = Model(cfg)
    kw = dict(max_depth=max_depth, max_states=max_states, time_limit=time_limit,
              invariants=tuple(invariants) or None, progress=progress, workers=workers)
    r = bfs(model, **kw) if bfs_only else search(model, seed=seed, note=note, **kw)
    stats = (f"{r.distinct:,} distinct states, depth {r.depth}, {r.transitions:,} transitions, "
             f"{r.seconds:.1f}s, {r.states_per_second:,.0f} states/s, {r.workers} worker(s)")
    if r.status == "violation":
        click.echo(f"found by {r.found_by}")
        return report_violation(cfg, r, stats, out, cmd,
                                bounds={"max_depth": max_depth, "max_states": max_states},
                                invariants=tuple(invariants) or None)
    if r.status == "exhausted":
        click.echo(f"no violation: state space exhausted; {stats}")
        return exitcodes.VALID
    click.echo(f"unknown: {r.status} reached before the space was exhausted; {stats}")
    if not bfs_only:
        click.echo(f"found {r.found_by}")
    return exitcodes.UNKNOWN


def run_simulate(cfg, seed, steps, walk_length, time_limit, out, no_shrink) -> int:
    """`kafkaverify simulate`: seeded random walks; a violating walk is shrunk unless told not."""
    click.echo(f"seed={seed} steps={steps} walk_length={walk_length}")
    print_bounds(cfg)
    print_promises(cfg, ())
    cmd = f"kafkaverify simulate {config_args(cfg)} --seed {seed} --steps {steps} --walk-length {walk_length}"
    model = Model(cfg)
    r = random_walks(model, seed, steps, walk_length=walk_length, time_limit=time_limit)
    stats = f"{r.steps:,} steps in {r.walks:,} walks, {r.seconds:.1f}s, {r.steps / max(r.seconds, 1e-9):,.0f} steps/s"
    if r.status == "violation":
        if not no_shrink:
            before = len(r.path)
            r.path, r.states, r.message = shrink_path(model, r.path, r.invariant)
            stats += f"; walk of {before} steps shrunk to {len(r.path)}"
        return report_violation(cfg, r, stats, out, cmd, seed=seed)
    if r.status == "ok":
        click.echo(f"no violation; {stats}")
        return exitcodes.VALID
    click.echo(f"unknown: time limit reached; {stats}")
    return exitcodes.UNKNOWN


def replay_model_trace(file: str, rewrite: bool) -> int:
    """`kafkaverify replay TRACE` for a model trace: re-execute it, reproduce its verdict."""
    try:
        r = replay_trace(file, rewrite=rewrite)
    except TraceError as e:
        raise InputError(str(e)) from None
    if r.problem:
        click.echo(f"{file}:{r.line}: {r.problem}")
        return exitcodes.USAGE
    click.echo(f"replayed {r.steps} steps; recorded verdict: {r.recorded or 'no violation'}")
    if r.violation:
        click.echo(f"VIOLATION of {r.violation[0]}: {r.violation[1]}")
        if r.violation[0] != r.recorded:
            click.echo(f"note: the trace recorded {r.recorded or 'no violation'}")
        return exitcodes.VIOLATION
    if r.recorded:
        click.echo(f"the recorded violation {r.recorded} no longer occurs: the trace runs clean")
    else:
        click.echo("the trace runs clean")
    return exitcodes.VALID
