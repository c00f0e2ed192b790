"""CLI of the ordering audit: `kafkaverify audit-ordering`. Thin shell over kafkaverify/audit/.
Exit 1 a documented promise broken (idempotence: no reordering, no duplicates; max.in.flight 1
or no retries: no reordering; no retries: no duplicates; acks=all with min.insync.replicas 2:
no loss; transactions: no aborted read, atomic, no duplicate, no loss) by a broker run or by the
model; else 2 when incomplete (the time limit cut it short,
or a broker run was undecided); else 0. 3 usage or input error."""
from __future__ import annotations

import shlex
import sys
from pathlib import Path

import click
from rich.console import Console

from impl.rules import GENERATIONS as BROKER_GENERATIONS
from kafkaverify import exitcodes
from kafkaverify.audit.settings import CLIENTS, client_missing, matrix, parse_list
from kafkaverify.exitcodes import InputError
from kafkaverify.nemesis.netns import net_mode
from spec import GENERATIONS

DEFAULTS = {"clients": ",".join(CLIENTS), "acks": "1,all", "retries": "0,5",
            "max_in_flight": "1,2,5", "idempotence": "on,off", "transactions": "off"}


def register(group: click.Group) -> None:
    @group.command("audit-ordering")
    @click.option("--clients", default=DEFAULTS["clients"], show_default=True,
                  help="comma-separated: " + ", ".join(CLIENTS) + " (the last three are drivers: docs/drivers.md)")
    @click.option("--acks", default=DEFAULTS["acks"], show_default=True, help="comma-separated: 1, all")
    @click.option("--retries", default=DEFAULTS["retries"], show_default=True, help="comma-separated, >= 0")
    @click.option("--max-in-flight", default=DEFAULTS["max_in_flight"], show_default=True,
                  help="comma-separated max.in.flight.requests.per.connection, 1..8")
    @click.option("--idempotence", default=DEFAULTS["idempotence"], show_default=True, help="comma-separated: on, off")
    @click.option("--transactions", default=DEFAULTS["transactions"], show_default=True,
                  help="comma-separated: off (the settings matrix), on (a transactional column per client: "
                  "its transactional producer and a read_committed consumer, the model's answer beside)")
    @click.option("--generation", "-g", default="current", show_default=True,
                  help="broker and model generation: kip-101, kip-279, kip-320, current")
    @click.option("--schedules", type=click.IntRange(min=1), default=5, show_default=True,
                  help="fault schedules per client × setting (the same for every cell)")
    @click.option("--seed", type=int, default=0, show_default=True)
    @click.option("--out", type=click.Path(file_okay=False), default="audit-out", show_default=True)
    @click.option("--time-limit", type=click.FloatRange(min=0, min_open=True), default=3600, show_default=True,
                  help="seconds for the whole audit; nothing starts after it (exit 2)")
    @click.option("--model-time-limit", type=click.FloatRange(min=0, min_open=True), default=120, show_default=True,
                  help="seconds per model search (a search it stops is an unknown verdict)")
    @click.option("--cluster", "cluster_file", type=click.Path(dir_okay=False), default=None,
                  help="TOML file describing any Kafka-compatible cluster and the shell commands that fault "
                       "it (docs/any-cluster.md): the broker column runs there")
    def audit_ordering(clients, acks, retries, max_in_flight, idempotence, transactions, generation, schedules,
                       seed, out, time_limit, model_time_limit, cluster_file):
        """With my client and settings, can records be reordered, duplicated or lost? The model's
        answer per setting, real clients on real 3-broker clusters under faults per client ×
        setting, and where they agree."""
        try:
            cl = parse_list(clients, "--clients", str, CLIENTS)
            ak = parse_list(acks, "--acks", str, ("1", "all"))
            rt = parse_list(retries, "--retries", int)
            mf = parse_list(max_in_flight, "--max-in-flight", int)
            idem = parse_list(idempotence, "--idempotence", str, ("on", "off"))
            txn = parse_list(transactions, "--transactions", str, ("on", "off"))
        except ValueError as e:
            raise InputError(str(e)) from None
        if any(r < 0 for r in rt):
            raise InputError("--retries: values must be >= 0")
        if any(not 1 <= m <= 8 for m in mf):
            raise InputError("--max-in-flight: values must be between 1 and 8")
        if generation not in BROKER_GENERATIONS or generation not in GENERATIONS:
            known = [g for g in BROKER_GENERATIONS if g in GENERATIONS]
            raise InputError(f"unknown generation {generation!r} (one of {', '.join(known)})")
        if "on" in txn and "idempotent-producer" not in GENERATIONS[generation]:
            raise InputError(f"generation {generation} has no transactions (KIP-98 came with kip-101): "
                             "say --transactions off")
        if "on" in idem and "off" in txn and "idempotent-producer" not in GENERATIONS[generation]:
            raise InputError(f"generation {generation} has no idempotent producer (KIP-98 came with kip-101): "
                             "say --idempotence off")
        for c in cl:
            why = client_missing(c)
            if why:
                raise InputError(why)
        # --transactions on alone: only the transactional column, no settings matrix
        settings = matrix(ak, rt, mf, tuple(i == "on" for i in idem)) if "off" in txn else []
        err = Console(stderr=True, width=200)
        spec = None
        if cluster_file is not None:
            if "on" in txn:
                raise InputError("--transactions on runs on our own brokers only: leave out --cluster "
                                 "or say --transactions off")
            from kafkaverify.nemesis.cluster_file import load_cluster_file
            spec = load_cluster_file(cluster_file)        # ClusterFileError: exit 3, naming the key
        # an outside cluster's partitions are its file's hooks: no private network namespace
        net = False if spec else net_mode(err, True)
        partitions = net or bool(spec and spec.can_partition)
        cmd = "kafkaverify " + " ".join(shlex.quote(a) for a in sys.argv[1:])
        outp = Path(out)
        outp.mkdir(parents=True, exist_ok=True)
        click.echo(f"seed={seed} generation={generation} clients={','.join(cl)} settings={len(settings)} "
                   f"transactions={','.join(txn)} "
                   f"schedules={schedules} faults=crash,pause{',partition' if partitions else ''} "
                   f"network={'netns+nftables' if net else 'none'} time_limit={time_limit:g}s "
                   + (f"cluster={cluster_file} bootstrap={spec.bootstrap} " if spec else "") +
                   f"model_time_limit={model_time_limit:g}s out={outp}")
        click.echo(f"reproduce: {cmd}")
        # lazy: the audit's broker runs load Hypothesis and the Kafka clients (CLI start-up)
        from kafkaverify.audit.matrix import run_audit
        from kafkaverify.audit.report import markdown, write
        a = run_audit(generation, cl, settings, schedules, seed, outp, time_limit, net,
                      model_time_limit=model_time_limit, command=cmd, cluster=spec, transactions="on" in txn,
                      progress=lambda line: err.print(line, highlight=False, markup=False, soft_wrap=True))
        paths = write(a, outp)
        click.echo(markdown(a))
        click.echo(f"report: {paths['html']}  table: {paths['md']}  data: {paths['json']}")
        click.echo(f"reproduce: {cmd}")
        if a.broken():
            return exitcodes.VIOLATION
        if a.incomplete:
            return exitcodes.UNKNOWN
        return exitcodes.VALID


if __name__ == "__main__":  # pragma: no cover
    sys.exit("use: python -m kafkaverify audit-ordering ...")
