"""The bulk-mining commands' work: `kafkaverify gen-runs` writes a runs dataset (traces/runs.py)
and `kafkaverify mine` checks every run of one, on Spark or with the local kernel
(checkers/history/: gen_runs, mine, spark_job, mine_report). The click options live in
kafkaverify/commands/mine.py. Exit codes of mine: 0 no violation, 1 violations, 2 some run
unknown (and none invalid), 3 bad input."""
from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import click
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from checkers.history.gen_runs import generate_dataset
from checkers.history.mine import mine_local
from checkers.history.mine_report import markdown, render_html
from kafkaverify.exitcodes import InputError
from traces.runs import LayoutError, check_dataset


def _progress_bar(console: Console, what: str):
    p = Progress(TextColumn(what), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                 TimeElapsedColumn(), console=console, transient=True)
    task = p.add_task(what, total=None)

    def report(done: int, total: int) -> None:
        p.update(task, completed=done, total=total)
    return p, report


def gen_runs(out, runs, seed, ops, buckets, distinct, corrupt_rate, txn_share=0.0) -> int:
    """`kafkaverify gen-runs`: seeded runs across generations, producer settings, fault types
    and rates, with anomalies planted in some (and a share of transactional runs)."""
    click.echo(f"seed={seed} runs={runs} ops={ops} buckets={buckets} distinct={distinct} "
               f"corrupt_rate={corrupt_rate} txn_share={txn_share}", err=True)
    if Path(out).exists() and any(Path(out).iterdir()):
        raise InputError(f"{out} exists and is not empty")
    console = Console(stderr=True)
    p, report = _progress_bar(console, "generating")
    t0 = time.perf_counter()
    with p:
        r = generate_dataset(out, runs, seed, ops, buckets, distinct, corrupt_rate, report,
                             txn_share=txn_share)
    click.echo(f"wrote {r['runs']} runs ({r['events']} events, {r['planted']} with a planted "
               f"anomaly, {r['corrupt']} corrupt) to {out} in {time.perf_counter() - t0:.1f} s")
    return 0


def mine(dataset, master, engine, out, spark_read) -> int:
    """`kafkaverify mine`: every run of a bulk dataset checked; violations.parquet,
    verdicts.parquet, summary.md and summary.html written to `out`."""
    try:
        check_dataset(dataset)
    except LayoutError as e:
        raise InputError(str(e)) from None
    out = out or str(Path(dataset) / "mined")
    console = Console(stderr=True)
    click.echo(f"mine {dataset} engine={engine}" + (f" master={master}" if engine == "spark" else ""),
               err=True)
    if engine == "local":
        p, report = _progress_bar(console, "mining files")
        with p:
            s = mine_local(dataset, out, report)
    else:
        if shutil.which("java") is None and not _java_home():
            raise InputError("Spark needs Java (17): install a JRE (apt-get install "
                             "openjdk-17-jre-headless) or set JAVA_HOME; or use --engine local")
        # lazy: PySpark (and the JVM it talks to) only for --engine spark
        from pyspark.sql import SparkSession
        from checkers.history.spark_job import mine_spark, session
        # A session already running in this process (tests, notebooks) is used, not stopped.
        ours = SparkSession.getActiveSession() is None
        try:
            spark = session(master)
        except Exception as e:   # py4j/JVM start failures: a message, not a traceback
            raise InputError(f"cannot start Spark with master {master}: {e}") from None
        try:
            p, report = _progress_bar(console, "mining (Spark tasks)")
            with p:
                s = mine_spark(spark, dataset, out, report, read=spark_read)
        except Exception as e:
            from pyspark.errors import PySparkException
            from py4j.protocol import Py4JError
            if isinstance(e, (PySparkException, Py4JError)):
                click.echo(f"error: the Spark job failed: {str(e).splitlines()[0]}", err=True)
                return 2            # incomplete: nothing was decided
            raise
        finally:
            if ours:
                spark.stop()
    Path(out).mkdir(parents=True, exist_ok=True)
    title = Path(dataset).name
    (Path(out) / "summary.md").write_text(markdown(s, title), encoding="utf-8")
    (Path(out) / "summary.html").write_text(render_html(s, title), encoding="utf-8")
    click.echo(f"{s.runs} runs, {s.events} events in {s.seconds:.1f} s ({s.events / max(s.seconds, 1e-9):,.0f} "
               f"events/s, {s.engine}): {s.count('invalid')} invalid, {s.count('valid')} valid, "
               f"{s.count('unknown')} unknown, {s.count('corrupt')} corrupt")
    for r in s.shortest.iter_rows(named=True):
        click.echo(f"  {r['type']}: shortest witness {r['witness_len']} ops (run {r['trace_id']})")
    for r in s.corrupt.iter_rows(named=True):
        click.echo(f"  corrupt run {r['trace_id']}: {r['error']}")
    click.echo(f"wrote {out}/summary.md, summary.html, violations.parquet, verdicts.parquet")
    return s.exit_code


def _java_home() -> bool:
    jh = os.environ.get("JAVA_HOME")
    return bool(jh) and Path(jh, "bin", "java").exists()
