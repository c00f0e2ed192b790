"""CLI commands of the history area: check-history, shrink, gen-history. Thin shells: the
options are parsed here; the work is kafkaverify/runs/history.py over traces/history.py and
checkers/history/. Exit codes (kafkaverify/exitcodes.py): 0 valid, 1 invalid, 2 unknown or
nothing to shrink, 3 bad input."""
from __future__ import annotations

import sys
import time

import click


def register(group: click.Group) -> None:
    @group.command("check-history")
    @click.argument("file", type=click.Path(dir_okay=False))
    @click.option("--format", "fmt", type=click.Choice(["jsonl", "parquet", "jepsen"]), default=None,
                  help="input encoding (default: by extension, .parquet or else jsonl; jepsen: a "
                       "Jepsen Kafka history.edn)")
    @click.option("--producer-config", default=None, metavar="JSON",
                  help="with --format jepsen: the producers' settings Jepsen keeps in its test "
                       "options, a JSON object (retries, max_in_flight, idempotence, acks, "
                       "isolation) or a file holding one")
    @click.option("--json", "json_out", type=click.Path(dir_okay=False), help="write the full result as JSON")
    @click.option("--html", "html_out", type=click.Path(dir_okay=False), help="write an HTML report")
    @click.option("--time-limit", type=click.FloatRange(min=0, min_open=True), default=None,
                  help="seconds; checks not finished in time are unknown")
    @click.option("--low-memory", is_flag=True,
                  help="above 2^22 events, screen in groups of partitions spilled to disk: "
                       "memory bounded by a group instead of growing with the log, at about "
                       "3-4x the CPU")
    def check_history_cmd(file, fmt, producer_config, json_out, html_out, time_limit, low_memory):
        """Check a client history for anomalies. Exit 0 valid, 1 invalid, 2 unknown, 3 bad input.

        The fast screens (checkers/history/screens/) read and screen the history; the partitions
        they flag are judged by the oracle (checkers/history/oracle/), which builds the
        witnesses. The time limit and the printed time both cover everything from reading the file on."""
        # The clock starts before anything is read or imported: reading is most of the cost.
        t0 = time.perf_counter()
        deadline = time.monotonic() + time_limit if time_limit else None
        # lazy: the columnar kernel imports polars (CLI start-up)
        from kafkaverify.runs.history import check_history_file
        return check_history_file(file, fmt, json_out, html_out, deadline, low_memory, t0,
                                  producer_config)

    @group.command("convert")
    @click.argument("file", type=click.Path(dir_okay=False))
    @click.option("--from", "src", type=click.Choice(["jsonl", "parquet", "jepsen"]), required=True,
                  help="the input's format")
    @click.option("--to", "dst", type=click.Choice(["jsonl", "parquet"]), required=True)
    @click.option("--out", required=True, type=click.Path(dir_okay=False))
    @click.option("--producer-config", default=None, metavar="JSON",
                  help="with --from jepsen: as for check-history")
    def convert_cmd(file, src, dst, out, producer_config):
        """Convert a history between formats (a Jepsen history.edn to ours, JSON lines to
        Parquet and back). Exit 0, or 3 on bad input."""
        from kafkaverify.runs.history import convert_file
        return convert_file(file, src, dst, out, producer_config)

    @group.command("shrink")
    @click.argument("file", type=click.Path(dir_okay=False))
    @click.option("--out", required=True, type=click.Path(dir_okay=False),
                  help="where to write the shrunk history (.parquet or JSON lines)")
    @click.option("--format", "fmt", type=click.Choice(["jsonl", "parquet"]), default=None)
    @click.option("--anomaly", default=None, help="anomaly type to keep (default: the first found)")
    @click.option("--time-limit", type=click.FloatRange(min=0, min_open=True), default=60.0)
    def shrink_cmd(file, out, fmt, anomaly, time_limit):
        """Reduce an invalid history to a small sub-history showing the same anomaly."""
        # lazy: the shrinker's checkers import networkx (CLI start-up)
        # lazy: the history checkers import polars and networkx (CLI start-up)
        from kafkaverify.runs.history import shrink_file
        return shrink_file(file, out, fmt, anomaly, time_limit)

    @group.command("gen-history")
    @click.option("--seed", type=int, required=True)
    @click.option("--ops", type=click.IntRange(min=1), required=True, help="client operations to generate")
    @click.option("--partitions", type=click.IntRange(min=1), default=4, show_default=True)
    @click.option("--seed-anomaly", "anomalies", multiple=True, metavar="TYPE:RATE",
                  help="plant an anomaly at RATE (0<RATE<=1) of its eligible sites; repeatable")
    @click.option("--out", required=True, type=click.Path(dir_okay=False))
    def gen_history_cmd(seed, ops, partitions, anomalies, out):
        """Generate a history (valid, unless anomalies are seeded); JSON lines or .parquet."""
        # lazy: the history checkers import polars and networkx (CLI start-up)
        from kafkaverify.runs.history import gen_history
        return gen_history(seed, ops, partitions, anomalies, out)


if __name__ == "__main__":  # pragma: no cover
    sys.exit("use: python -m kafkaverify ...")
