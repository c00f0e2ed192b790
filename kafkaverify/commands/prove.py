"""`kafkaverify prove`: the z3 engine (checkers/prove) from the command line. Thin: the options
are parsed here, the work is kafkaverify/runs/prove.py (contract and exit codes there)."""
from __future__ import annotations

import click

def register(group: click.Group) -> None:
    @group.command()
    @click.option("--generation", "-g", default="current", show_default=True,
                  help="protocol generation (spec/config.py)")
    @click.option("--without", multiple=True, metavar="FIX", help="remove one fix (repeatable)")
    @click.option("--brokers", type=int, default=3, show_default=True, help="replicas")
    @click.option("--log-length", "--records", "log_length", type=int, default=2, show_default=True,
                  help="records in all (the log bound); with --producers, records per producer")
    @click.option("--depth", type=int, default=None,
                  help="BMC depth before the inductive proofs (0: induction only); not given: "
                       "induction, then BMC over chained steps to a default depth (printed as "
                       "bmc-fallback=N) for what it leaves unknown")
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
        # lazy: the z3 engine imports z3 (CLI start-up)
        from kafkaverify.runs.prove import prove_command
        return prove_command(generation, without, brokers, log_length, depth, invariants,
                             time_limit, out, crashes, pauses, elections, losses, min_isr,
                             unflushed_loss, disk_loss, producers, max_in_flight, retries,
                             idempotence, exhaustive, write_slots, guided, k, lemmas, method,
                             parallel, chained)
