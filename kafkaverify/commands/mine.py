"""CLI commands of bulk mining: gen-runs (write a runs dataset, traces/runs.py) and mine (check
every run, on Spark or with the local kernel). Thin shells: the work is in
kafkaverify/runs/mine.py over checkers/history/ (gen_runs, mine, spark_job, mine_report). Exit
codes of mine: 0 no violation, 1 violations, 2 some run unknown (and none invalid), 3 bad input
(no dataset, or corrupt rows and no violation; corrupt runs are listed with file and row either
way)."""
from __future__ import annotations

import sys

import click


def register(group: click.Group) -> None:
    @group.command("gen-runs")
    @click.argument("out", type=click.Path(file_okay=False))
    @click.option("--runs", type=click.IntRange(min=1), required=True)
    @click.option("--seed", type=int, required=True)
    @click.option("--ops", type=click.IntRange(min=10), default=60, show_default=True,
                  help="client operations per run")
    @click.option("--buckets", type=click.IntRange(min=1), default=8, show_default=True)
    @click.option("--distinct", type=click.IntRange(min=1), default=None,
                  help="generate only this many distinct runs and tile them (throughput benchmarks)")
    @click.option("--corrupt-rate", type=click.FloatRange(0, 1), default=0.0, show_default=True,
                  help="share of runs given a corrupt event (to exercise error reporting)")
    @click.option("--txn-share", type=click.FloatRange(0, 1), default=0.0, show_default=True,
                  help="share of transactional runs (history format version 2)")
    def gen_runs_cmd(out, runs, seed, ops, buckets, distinct, corrupt_rate, txn_share):
        """Write a bulk runs dataset: seeded runs across generations, producer settings, fault
        types and rates, with anomalies planted in some (see checkers/history/gen_runs.py)."""
        # lazy: the dataset writer and the kernel import polars and pyarrow (CLI start-up)
        from kafkaverify.runs.mine import gen_runs
        return gen_runs(out, runs, seed, ops, buckets, distinct, corrupt_rate, txn_share)

    @group.command("mine")
    @click.argument("dataset", type=click.Path())
    @click.option("--master", default="local[*]", show_default=True,
                  help="Spark master: local[N], local[*] or spark://HOST:PORT")
    @click.option("--engine", type=click.Choice(["spark", "local"]), default="spark", show_default=True,
                  help="local: the same kernel in this process, without Spark")
    @click.option("--out", default=None, type=click.Path(file_okay=False),
                  help="output directory (default: DATASET/mined)")
    @click.option("--spark-read", type=click.Choice(["executors", "spark"]), default="executors",
                  show_default=True,
                  help="executors: each Spark task's Python reads its events file (the dataset must "
                       "be at a path every executor can open); spark: Spark's Parquet reader")
    def mine_cmd(dataset, master, engine, out, spark_read):
        """Check every run of a bulk dataset; write violations.parquet, verdicts.parquet,
        summary.md and summary.html to --out. Exit 0 clean, 1 violations, 2 unknown, 3 bad input."""
        # lazy: the kernel imports polars and pyarrow, the Spark engine PySpark (CLI start-up)
        from kafkaverify.runs.mine import mine
        return mine(dataset, master, engine, out, spark_read)


if __name__ == "__main__":  # pragma: no cover
    sys.exit("use: python -m kafkaverify ...")
