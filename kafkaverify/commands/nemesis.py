"""CLI of the nemesis: `kafkaverify nemesis` (generated fault schedules on the real cluster).
Thin shell: the work is in kafkaverify/nemesis/ (the schedule branch of `kafkaverify replay` is
kafkaverify/nemesis/replay.py). Exit 0 every run valid, 1 a failure (anomaly or conformance
divergence), 2 unknown (a run undecided, nothing run, time limit before any run), 3 usage or
input error.

The fault names of --faults are the schedule vocabulary (traces/schedule.py); the older names
`kill` and `power-fail` are accepted as aliases of `crash` and `power-loss`."""
from __future__ import annotations

import shlex
import sys
from pathlib import Path

import click
from rich.console import Console

from impl.rules import ALL_FIXES, GENERATIONS
from kafkaverify import exitcodes
from kafkaverify.drivers.registry import DRIVERS, is_driver
from kafkaverify.exitcodes import InputError
from kafkaverify.nemesis.netns import net_mode
from traces.schedule import NEEDS_NET, canonical_fault

CLIENT_NAMES = {"confluent": "confluent-kafka", "confluent-kafka": "confluent-kafka", "aiokafka": "aiokafka",
                "kafka-python": "kafka-python", "kafkajs": "kafkajs", "librdkafka": "librdkafka", "sarama": "sarama"}


def register(group: click.Group) -> None:
    @group.command()
    @click.option("--generation", "-g", default="current", show_default=True,
                  help="broker generation: v0.10, kip-101, kip-279, kip-320, current, kip-966")
    @click.option("--without", multiple=True, metavar="FIX", help="remove one fix from the brokers (debug)")
    @click.option("--brokers", type=click.IntRange(1, 9), default=3, show_default=True)
    @click.option("--schedules", type=click.IntRange(min=1), default=10, show_default=True)
    @click.option("--seed", type=int, default=0, show_default=True)
    @click.option("--faults", default=",".join(("crash", "pause", "partition", "power-loss", "controller-failover")),
                  show_default=True, help="comma-separated: crash, pause, partition, power-loss (isolated: "
                  "what current promises to survive), power-loss-any (unguarded: KIP-966's loss), "
                  "controller-failover, session-expiry, producer-restart, consumer-crash (older names: "
                  "kill = crash, power-fail = power-loss)")
    @click.option("--clients", type=click.Choice(sorted(CLIENT_NAMES)), default="kafka-python", show_default=True)
    @click.option("--acks", type=click.Choice(["all", "1", "0"]), default="all", show_default=True)
    @click.option("--idempotence/--no-idempotence", default=None, help="default: the client's default")
    @click.option("--retries", type=click.IntRange(min=0), default=None, help="default: the client's default")
    @click.option("--max-in-flight", type=click.IntRange(min=1), default=None, help="default: the client's default")
    @click.option("--min-insync", type=click.IntRange(min=1), default=2, show_default=True)
    @click.option("--replication-factor", type=click.IntRange(min=1), default=None,
                  help="default: the number of brokers")
    @click.option("--consumers", type=click.IntRange(min=0), default=1, show_default=True)
    @click.option("--transactions", type=click.Choice(["on", "off"]), default="off", show_default=True,
                  help="on: a transactional producer (transactions across the partitions, committed or "
                  "aborted by the seed) and a read_committed consumer instead of the group members")
    @click.option("--partitions", type=click.IntRange(min=1, max=16), default=None,
                  help="partitions of the workload topic [1; 3 with --transactions on]")
    @click.option("--shrink-runs", type=click.IntRange(min=0), default=8, show_default=True,
                  help="bound on real runs spent shrinking a failure")
    @click.option("--out", type=click.Path(file_okay=False), default="nemesis-out", show_default=True)
    @click.option("--time-limit", type=click.FloatRange(min=0, min_open=True), default=1800, show_default=True,
                  help="seconds; no new schedule starts after it")
    @click.option("--cluster", "cluster_file", type=click.Path(dir_okay=False), default=None,
                  help="TOML file describing any Kafka-compatible cluster and the shell commands that fault "
                       "it (docs/any-cluster.md); --brokers is then its node count")
    @click.pass_context
    def nemesis(ctx, generation, without, brokers, schedules, seed, faults, clients, acks, idempotence, retries,
                max_in_flight, min_insync, replication_factor, consumers, transactions, partitions, shrink_runs,
                out, time_limit, cluster_file):
        """Generated fault schedules against a real cluster with real clients; histories judged
        against the clients' settings, broker traces against the model; failures shrunk."""
        # lazy: Hypothesis, the cluster and kafka-python load only when the nemesis runs (CLI start-up)
        from kafkaverify.nemesis.explore import FAULT_CHOICES, default_workload, explore
        from kafkaverify.nemesis.replay import run_line
        from kafkaverify.nemesis.summary import print_summary
        if generation not in GENERATIONS:
            raise InputError(f"unknown generation {generation!r} (one of {', '.join(GENERATIONS)})")
        bad = [w for w in without if w not in ALL_FIXES]
        if bad:
            raise InputError(f"unknown fix {bad[0]!r} (one of {', '.join(ALL_FIXES)})")
        fl = tuple(canonical_fault(f.strip()) for f in faults.split(",") if f.strip())
        unknown = [f for f in fl if f not in FAULT_CHOICES]
        if unknown or not fl:
            raise InputError(f"unknown fault {unknown[0] if unknown else faults!r} (choose from {', '.join(FAULT_CHOICES)})")
        spec = None
        if cluster_file is not None:
            from kafkaverify.nemesis.cluster_file import cluster_faults, load_cluster_file
            spec = load_cluster_file(cluster_file)        # ClusterFileError: exit 3, naming the key
            brokers = len(spec.nodes)
            explicit = ctx.get_parameter_source("faults") != click.core.ParameterSource.DEFAULT
            fl = cluster_faults(spec, fl, explicit)
        rf = replication_factor or brokers
        if rf > brokers or min_insync > rf:
            raise InputError(f"need min-insync <= replication-factor <= brokers (got {min_insync}, {rf}, {brokers})")
        if is_driver(clients):       # a client of another language (docs/drivers.md)
            why = DRIVERS[clients].missing()
            if why:
                raise InputError(why)
        else:
            module = {"kafka-python": "kafka", "confluent-kafka": "confluent_kafka", "aiokafka": "aiokafka"}[CLIENT_NAMES[clients]]
            try:
                __import__(module)
            except ImportError:
                raise InputError(f"client {clients} is not installed (pip install {CLIENT_NAMES[clients]})") from None
        txn = transactions == "on"
        if txn and is_driver(clients):
            raise InputError(f"--transactions on: the {clients} driver's protocol has no transactional "
                             "operations (docs/drivers.md); use a Python client")
        if txn and "consumer-crash" in fl:
            raise InputError("--transactions on has no group members to crash: leave out consumer-crash")
        if txn and (acks != "all" or idempotence is False):
            raise InputError("--transactions on needs acks all and idempotence (a transactional producer "
                             "is idempotent with acks all)")
        console = Console(width=160)
        # an outside cluster's partitions are its file's hooks: no private network namespace
        net = False if spec else net_mode(console, any(f in NEEDS_NET for f in fl))
        w = default_workload(CLIENT_NAMES[clients], acks="all" if acks == "all" else int(acks), retries=retries,
                             idempotence=idempotence, max_in_flight=max_in_flight, min_insync=min_insync,
                             replication_factor=rf, consumers=0 if txn else consumers,
                             partitions=partitions or (3 if txn else None), transactions=txn or None)
        if txn:
            w["idempotence"] = True
        outp = Path(out)
        outp.mkdir(parents=True, exist_ok=True)
        cmd = "kafkaverify " + " ".join(shlex.quote(a) for a in sys.argv[1:])
        console.print(f"seed={seed} generation={generation} without={','.join(without) or '-'} brokers={brokers} "
                      f"schedules={schedules} faults={','.join(fl)} client={w['client']} acks={w['acks']} "
                      f"idempotence={w['idempotence']} retries={w['retries']} max_in_flight={w['max_in_flight']} "
                      f"min_insync={min_insync} rf={rf} partitions={w['partitions']} "
                      f"transactions={'on' if txn else 'off'} network={'netns+nftables' if net else 'none'} out={outp}"
                      + (f" cluster={cluster_file} bootstrap={spec.bootstrap} conformance="
                         f"{'traces' if spec.traces else 'not judged'}" if spec else ""),
                      highlight=False)
        summ = explore(generation, brokers, schedules, seed, fl, w, outp, time_limit, without=tuple(without),
                       shrink_runs=shrink_runs, net=net, cluster=spec,
                       progress=lambda i, s, r: console.print(run_line(i, s, r), highlight=False, markup=False))
        print_summary(console, summ, outp, cmd)
        if spec and summ.smallest is not None:
            console.print(f"  on this cluster:  kafkaverify replay {shlex.quote(str(outp / 'shrunk-schedule.json'))} "
                          f"--cluster {shlex.quote(cluster_file)}", highlight=False, markup=False)
        if summ.failures:
            return exitcodes.VIOLATION
        if not summ.runs or summ.stopped or any(r.status != "valid" for _, r in summ.runs):
            return exitcodes.UNKNOWN          # something undecided, or the time limit cut the run short
        return exitcodes.VALID


if __name__ == "__main__":  # pragma: no cover
    sys.exit("use: python -m kafkaverify nemesis ...")
