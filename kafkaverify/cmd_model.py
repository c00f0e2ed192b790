"""CLI commands of the model area: explore, simulate, replay, check.

Contract (other tools build on it): exit 0 no violation within bounds / trace ran clean,
1 violation (reproduced), 2 a bound or time limit stopped the search before the space was
exhausted, 3 usage or input error.
"""
from __future__ import annotations

import shlex
import sys

import click

from kafkaverify import exitcodes
from kafkaverify.exitcodes import InputError

DEFAULT_MAX_DEPTH = 60
DEFAULT_MAX_STATES = 20_000_000
DEFAULT_TIME_LIMIT = 300.0


def _model_options(f):
    opts = [
        click.option("--generation", "-g", default="current", show_default=True,
                     help="protocol generation: v0.10, kip-101, kip-279, kip-320, current, kip-966"),
        click.option("--without", multiple=True, metavar="FIX", help="remove one fix (repeatable)"),
        click.option("--brokers", type=int, default=None, help="brokers (replicas) [2]"),
        click.option("--records", type=int, default=None, help="client writes in all [2]"),
        click.option("--crashes", type=int, default=None, help="crashes in all [2; 3 with 3+ brokers]"),
        click.option("--pauses", type=int, default=None,
                     help="pauses that outlast the session [0; 1 with 3+ brokers]"),
        click.option("--elections", type=int, default=None, help="leader elections in all [2; 3 with 3+ brokers]"),
        click.option("--losses", type=int, default=None, help="lost control messages in all [1]"),
        click.option("--min-isr", type=int, default=None, help="min.insync.replicas [2]"),
        click.option("--acks", type=click.Choice(["all", "1", "0"]), default=None,
                     help="producer acks [all]; 0 needs --producers"),
        click.option("--unclean", is_flag=True, help="allow unclean leader election"),
        click.option("--unflushed-loss", is_flag=True, help="crashes may lose unflushed writes"),
        click.option("--disk-loss", is_flag=True, help="a crash may lose the whole disk (KIP-903)"),
        click.option("--producers", type=int, default=None,
                     help="producers (0: the implicit client of Produce) [0]; --records is then per producer"),
        click.option("--max-in-flight", type=int, default=None, help="max.in.flight.requests.per.connection [1]"),
        click.option("--retries", type=int, default=None, help="retry budget per batch [0]"),
        click.option("--idempotence", type=click.Choice(["on", "off"]), default=None,
                     help="idempotent producer (the fix idempotent-producer) [on from kip-101]"),
        click.option("--consumers", type=int, default=None,
                     help="members of one consumer group (the replicated partition is then __consumer_offsets) [0]"),
        click.option("--commit", type=click.Choice(["after", "before"]), default=None,
                     help="commit after processing (at least once) or before (at most once) [after]"),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


def build_config(generation, without, **bounds):
    from spec import GENERATIONS, ConfigError, make_config
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
    from checkers.model_trace import cli_defaults
    given = {**cli_defaults(given.get("brokers", 2)), **given}
    try:
        return make_config(generation, tuple(without), **given)
    except ConfigError as e:
        raise InputError(str(e)) from None


def _config_args(cfg) -> str:
    from checkers.model_trace import config_args
    return config_args(cfg)


def _print_bounds(cfg, extra: str = "") -> None:
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


def _print_promises(cfg, asked) -> None:
    """Say which client invariants these settings promise nothing of: off, unless asked for."""
    from spec.invariants import unpromised
    for name, why in sorted(unpromised(cfg).items()):
        state = "checked because asked for" if name in asked else "off"
        click.echo(f"{name}: {why} ({state})")


def story_lines(actions, states, invariant: str, message: str) -> list[str]:
    """A counterexample as a numbered story: each step, then the store and every broker."""
    from spec.state import summary
    out = [f"VIOLATION of {invariant}: {message}", f"counterexample ({len(actions)} steps):"]
    for i, (a, s) in enumerate(zip(actions, states), 1):
        out.append(f"  {i:>3}. {a.describe()}")
        sm = summary(s)
        out += [f"         {line}" for line in [sm["zk"]] + sm["brokers"] + sm.get("clients", [])]
    return out


def print_story(actions, states, invariant: str, message: str) -> None:
    for line in story_lines(actions, states, invariant, message):
        click.echo(line)


def _report_violation(cfg, r, stats: str, out: str | None, cmd: str, **trace_fields) -> int:
    """The story, the figures, the trace (with --out) and the command that reproduces it."""
    from checkers.model_trace import write_trace
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


def _check_invariant_names(names):
    from spec import INVARIANT_NAMES
    for n in names:
        if n not in INVARIANT_NAMES + ("MonotonicEpochs",):
            raise InputError(f"unknown invariant {n!r} (one of {', '.join(INVARIANT_NAMES)}, MonotonicEpochs)")


def register(group: click.Group) -> None:
    @group.command()
    @_model_options
    @click.option("--invariant", "invariants", multiple=True, metavar="NAME",
                  help="check only these invariants (repeatable; default: all)")
    @click.option("--max-depth", type=int, default=DEFAULT_MAX_DEPTH, show_default=True)
    @click.option("--max-states", type=int, default=DEFAULT_MAX_STATES, show_default=True)
    @click.option("--time-limit", type=float, default=DEFAULT_TIME_LIMIT, show_default=True, help="seconds")
    @click.option("--workers", type=int, default=None,
                  help="worker processes (hash shards / walkers) [both cores: 2]")
    @click.option("--seed", type=int, default=0, show_default=True,
                  help="seed of the swarm random walks that follow a search cut short")
    @click.option("--bfs-only", is_flag=True,
                  help="breadth-first search alone (no random walks when it is cut short)")
    @click.option("--out", type=click.Path(dir_okay=False), help="write the counterexample trace here")
    def explore(generation, without, invariants, max_depth, max_states, time_limit, workers, seed,
                bfs_only, out, **bounds):
        """Model checking: breadth-first search (the shortest counterexample); if it cannot
        exhaust the space in its share of the time, swarm random walks use the rest and a
        violation they find is shrunk."""
        from checkers.explore import default_workers
        from checkers.explore import explore as bfs
        from checkers.portfolio import search
        from spec import Model
        cfg = build_config(generation, without, **bounds)
        _check_invariant_names(invariants)
        if max_depth < 1 or max_states < 1 or time_limit <= 0:
            raise InputError("--max-depth, --max-states and --time-limit must be positive")
        workers = default_workers() if workers is None else workers
        if not 1 <= workers <= 64:
            raise InputError("--workers must be between 1 and 64")
        _print_bounds(cfg, f" max_depth={max_depth} max_states={max_states} time_limit={time_limit:g}s"
                           f" workers={workers}" + ("" if bfs_only else f" seed={seed}"))
        _print_promises(cfg, invariants)
        cmd = ("kafkaverify explore " + _config_args(cfg) + "".join(f" --invariant {i}" for i in invariants)
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
            return _report_violation(cfg, r, stats, out, cmd,
                                     bounds={"max_depth": max_depth, "max_states": max_states},
                                     invariants=tuple(invariants) or None)
        if r.status == "exhausted":
            click.echo(f"no violation: state space exhausted; {stats}")
            return exitcodes.VALID
        click.echo(f"unknown: {r.status} reached before the space was exhausted; {stats}")
        if not bfs_only:
            click.echo(f"found {r.found_by}")
        return exitcodes.UNKNOWN

    @group.command()
    @_model_options
    @click.option("--seed", type=int, required=True)
    @click.option("--steps", type=int, required=True, help="actions in all, over every walk")
    @click.option("--walk-length", type=int, default=200, show_default=True)
    @click.option("--time-limit", type=float, default=600.0, show_default=True)
    @click.option("--out", type=click.Path(dir_okay=False), help="write the violating walk here")
    @click.option("--no-shrink", is_flag=True, help="report the violating walk as found, unshrunk")
    def simulate(generation, without, seed, steps, walk_length, time_limit, out, no_shrink, **bounds):
        """Seeded random walks over the model."""
        from checkers.simulate import simulate as run
        from spec import Model
        cfg = build_config(generation, without, **bounds)
        if steps < 1 or walk_length < 1:
            raise InputError("--steps and --walk-length must be positive")
        click.echo(f"seed={seed} steps={steps} walk_length={walk_length}")
        _print_bounds(cfg)
        _print_promises(cfg, ())
        cmd = f"kafkaverify simulate {_config_args(cfg)} --seed {seed} --steps {steps} --walk-length {walk_length}"
        model = Model(cfg)
        r = run(model, seed, steps, walk_length=walk_length, time_limit=time_limit)
        stats = f"{r.steps:,} steps in {r.walks:,} walks, {r.seconds:.1f}s, {r.steps / max(r.seconds, 1e-9):,.0f} steps/s"
        if r.status == "violation":
            if not no_shrink:
                from checkers.shrink_trace import shrink_path
                before = len(r.path)
                r.path, r.states, r.message = shrink_path(model, r.path, r.invariant)
                stats += f"; walk of {before} steps shrunk to {len(r.path)}"
            return _report_violation(cfg, r, stats, out, cmd, seed=seed)
        if r.status == "ok":
            click.echo(f"no violation; {stats}")
            return exitcodes.VALID
        click.echo(f"unknown: time limit reached; {stats}")
        return exitcodes.UNKNOWN

    @group.command()
    @click.argument("file", type=click.Path(dir_okay=False))
    @click.option("--rewrite", is_flag=True, help="re-record the state summaries (golden files)")
    def replay(file, rewrite):
        """Re-execute a model trace and reproduce its verdict; a fault schedule (nemesis) is run
        against a fresh real cluster instead."""
        from traces.schedule import is_schedule_file
        if is_schedule_file(file):
            from kafkaverify.cmd_nemesis import replay_schedule
            return replay_schedule(file)
        from checkers.model_trace import replay as run
        from traces.trace import TraceError
        try:
            r = run(file, rewrite=rewrite)
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

    @group.command()
    @click.option("--budget", type=click.Choice(["quick", "full"]), default=None,
                  help="quick: the pull-request budget (under 2 minutes, one stage per fix family); "
                       "full (default): every stage")
    @click.option("--json", "json_out", type=click.Path(dir_okay=False), help="write results as JSON")
    @click.option("--junit", type=click.Path(dir_okay=False), help="write JUnit XML (one test case per stage)")
    @click.option("--html", "html_out", type=click.Path(dir_okay=False),
                  help="write the HTML summary page (default with --artifacts: DIR/index.html)")
    @click.option("--artifacts", type=click.Path(file_okay=False),
                  help="folder for counterexample traces and HTML reports")
    @click.option("--quick", is_flag=True, help="same as --budget quick")
    @click.option("--stage", "only", multiple=True, metavar="NAME",
                  help="run only this stage (exact name, family, or part of a name; repeatable)")
    def check(budget, json_out, junit, html_out, artifacts, quick, only):
        """The invariant suite on its embedded defaults."""
        from kafkaverify.suite import run_suite
        if quick and budget == "full":
            raise InputError("--quick contradicts --budget full")
        return run_suite(json_out=json_out, quick=quick, only=only, budget=budget, junit=junit,
                         html_out=html_out, artifacts=artifacts)
