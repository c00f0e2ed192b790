"""CLI commands of the model area: explore, simulate, replay, check. Thin: options are parsed
and checked here; the work is in kafkaverify/runs/model.py, the suite in kafkaverify/suite/.

Contract (other tools build on it): exit 0 no violation within bounds / trace ran clean,
1 violation (reproduced), 2 a bound or time limit stopped the search before the space was
exhausted, 3 usage or input error.
"""
from __future__ import annotations

import click

from kafkaverify.exitcodes import InputError
from kafkaverify.runs.model import (DEFAULT_MAX_DEPTH, DEFAULT_MAX_STATES, DEFAULT_TIME_LIMIT,
                                    build_config, check_invariant_names, replay_model_trace,
                                    run_explore, run_simulate)
from traces.schedule import is_schedule_file


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
        click.option("--transactions", type=int, default=None,
                     help="transactional.ids (the replicated partition is then __transaction_state "
                          "on 1 broker by default) [0]"),
        click.option("--txn-partitions", type=int, default=None,
                     help="data partitions each transaction writes to [2 with --transactions]"),
        click.option("--isolation", type=click.Choice(["read_committed", "read_uncommitted"]),
                     default=None, help="the consumers' isolation.level [read_committed]"),
        click.option("--txn-rounds", type=int, default=None,
                     help="transactions per transactional.id [2 with --transactions]"),
        click.option("--txn-timeouts", type=int, default=None,
                     help="client batch timeouts and coordinator transaction timeouts in all [1]"),
        click.option("--txn-dups", type=int, default=None,
                     help="marker requests resent while the first copy is in flight [1]"),
        click.option("--zombies", type=int, default=None,
                     help="new instances of a transactional.id while the old one runs [1]"),
        click.option("--consume-transform-produce", is_flag=True,
                     help="each transaction consumes an input record and commits its offset in "
                          "the transaction (TxnExactlyOnce)"),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


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
        cfg = build_config(generation, without, **bounds)
        check_invariant_names(invariants)
        if max_depth < 1 or max_states < 1 or time_limit <= 0:
            raise InputError("--max-depth, --max-states and --time-limit must be positive")
        return run_explore(cfg, invariants, max_depth, max_states, time_limit, workers, seed,
                           bfs_only, out)

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
        cfg = build_config(generation, without, **bounds)
        if steps < 1 or walk_length < 1:
            raise InputError("--steps and --walk-length must be positive")
        return run_simulate(cfg, seed, steps, walk_length, time_limit, out, no_shrink)

    @group.command()
    @click.argument("file", type=click.Path(dir_okay=False))
    @click.option("--rewrite", is_flag=True, help="re-record the state summaries (golden files)")
    @click.option("--cluster", "cluster_file", type=click.Path(dir_okay=False), default=None,
                  help="a fault schedule: run it on the cluster this file describes (docs/any-cluster.md)")
    def replay(file, rewrite, cluster_file):
        """Re-execute a model trace and reproduce its verdict; a fault schedule (nemesis) is run
        against a fresh real cluster instead."""
        if is_schedule_file(file):
            # lazy: the nemesis starts real brokers and imports kafka-python (CLI start-up)
            from kafkaverify.nemesis.replay import replay_schedule
            return replay_schedule(file, cluster_file)
        return replay_model_trace(file, rewrite)

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
        # lazy: the suite's stages import z3 and polars (CLI start-up)
        from kafkaverify.suite.run import run_suite
        if quick and budget == "full":
            raise InputError("--quick contradicts --budget full")
        return run_suite(json_out=json_out, quick=quick, only=only, budget=budget, junit=junit,
                         html_out=html_out, artifacts=artifacts)
