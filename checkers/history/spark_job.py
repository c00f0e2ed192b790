"""The mining job on Spark: every run of a bulk dataset (traces/runs.py) through the columnar
kernel, as `mapInArrow` over whole files (one Python call per task, never per run or row).
Nothing comes back to the driver but aggregates and the shortest witnesses: the violations and
per-run verdicts are written by the executors to OUT/violations.parquet and OUT/verdicts.parquet.

Spark never cuts a run: each events file is one Parquet row group (traces/runs.py), and Spark
splits Parquet only at row groups. The project's packages are shipped to executors as a zip
(addPyFile), so a remote cluster needs only Python with polars and pyarrow installed.
"""
from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
import zipfile
from pathlib import Path

import polars as pl

from checkers.history.mine import OUT_SCHEMA, mine_batches
from checkers.history.mine_report import KEYS, MAX_CORRUPT, Summary

PACKAGES = ("checkers", "traces")
ROOT = Path(__file__).resolve().parents[2]


def _ship(spark) -> None:
    """The packages the executors import, as one zip on their Python path (once per context:
    a session reused by getOrCreate keeps its zip)."""
    if getattr(spark.sparkContext, "_kafkaverify_shipped", False):
        return
    path = Path(tempfile.mkdtemp(prefix="kv-spark-")) / "kafkaverify_mine.zip"
    with zipfile.ZipFile(path, "w") as z:
        for pkg in PACKAGES:
            for f in sorted((ROOT / pkg).rglob("*.py")):
                z.write(f, f.relative_to(ROOT))
    spark.sparkContext.addPyFile(str(path))
    spark.sparkContext._kafkaverify_shipped = True


def session(master: str, app: str = "kafkaverify-mine", extra: dict | None = None):
    from pyspark.sql import SparkSession
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    b = (SparkSession.builder.master(master).appName(app)
         .config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false")       # our own progress display
         .config("spark.sql.shuffle.partitions", "8")
         .config("spark.sql.execution.arrow.maxRecordsPerBatch", "200000")
         .config("spark.executorEnv.PYSPARK_PYTHON", sys.executable)
         .config("spark.python.worker.reuse", "true")
)
    if master.startswith(("local", "spark://127.", "spark://localhost")):
        # On loopback the driver must advertise loopback too (else executors are told to
        # call back a public address that may not route: they exit and are relaunched).
        b = b.config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
    for k, v in (extra or {}).items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    _ship(spark)
    return spark


class Progress:
    """Polls Spark's status tracker and reports (done tasks, total tasks) of active stages."""

    def __init__(self, spark, report, every_s: float = 0.5):
        self.sc, self.report, self.every = spark.sparkContext, report, every_s
        self.stop = threading.Event()
        self.t = threading.Thread(target=self.run, daemon=True)

    def run(self):
        st = self.sc.statusTracker()
        while not self.stop.wait(self.every):
            done = total = 0
            for sid in st.getActiveStageIds():
                info = st.getStageInfo(sid)
                if info:
                    done += info.numCompletedTasks
                    total += info.numTasks
            if total:
                self.report(done, total)

    def __enter__(self):
        self.t.start()
        return self

    def __exit__(self, *a):
        self.stop.set()
        self.t.join(timeout=5)


def mine_spark(spark, dataset: str, out: str, progress=None) -> Summary:
    from pyspark import StorageLevel
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema
    from traces.runs import check_dataset, events_dir, runs_dir
    t0 = time.perf_counter()
    check_dataset(dataset)
    ev = (spark.read.parquet(str(events_dir(dataset)))
          .select("*", F.regexp_replace(F.col("_metadata.file_path"), "^file:", "").alias("file"))
          .drop("bucket"))
    # mapInArrow runs once: its (small) output is persisted and every aggregate reads that.
    res = ev.mapInArrow(mine_batches, from_arrow_schema(OUT_SCHEMA)).persist(StorageLevel.MEMORY_AND_DISK)
    outp = Path(out)
    verdicts = res.filter(F.col("kind") == "verdict").select("trace_id", "status", "ops", "events",
                                                              "types", "file", "error")
    violations = res.filter(F.col("kind") == "violation").select(
        "trace_id", "partition", "type", "witness", "witness_len", "explanation", "witness_ops", "file")
    with Progress(spark, progress or (lambda d, t: None)):
        verdicts.write.mode("overwrite").parquet(str(outp / "verdicts.parquet"))
    violations.write.mode("overwrite").parquet(str(outp / "violations.parquet"))
    runs = spark.read.parquet(str(runs_dir(dataset))).select("trace_id", *KEYS)
    v = verdicts.join(runs, "trace_id", "left")
    x = violations.join(runs, "trace_id", "left")
    # Aggregates only to the driver (toArrow: no pandas).
    by_status = pl.from_arrow(v.groupBy("status", *KEYS).agg(F.count("*").alias("runs"),
                                                              F.sum("events").alias("events"))
                              .orderBy("status", *KEYS).toArrow())
    n_events = int(by_status.get_column("events").sum() or 0) if by_status.height else 0
    by_status = by_status.drop("events")
    by_anomaly = pl.from_arrow(x.groupBy("type", *KEYS).agg(
        F.count("*").alias("violations"), F.countDistinct("trace_id").alias("runs"))
        .orderBy("type", *KEYS).toArrow())
    best = x.groupBy("type").agg(F.min_by(F.struct("trace_id", "partition", "witness_len", "witness",
                                                   "explanation", "witness_ops", "file"),
                                          F.struct("witness_len", "trace_id", "partition")).alias("b"))
    shortest = pl.from_arrow(best.select("type", "b.*").orderBy("type").toArrow()).select(
        "type", "trace_id", "partition", "witness_len", "witness", "explanation", "witness_ops", "file")
    corrupt = pl.from_arrow(verdicts.filter(F.col("status") == "corrupt").orderBy("trace_id")
                            .limit(MAX_CORRUPT).select("trace_id", "file", "error").toArrow())
    res.unpersist()
    n_runs = int(by_status.get_column("runs").sum()) if by_status.height else 0
    # Events: the verdicts' sum (every event belongs to a run with a verdict); a second
    # count() would scan the dataset again as its own Spark job.
    return Summary(by_status.with_columns(pl.col("runs").cast(pl.UInt32)),
                   by_anomaly.with_columns(pl.col("violations", "runs").cast(pl.UInt32)),
                   shortest, corrupt, n_runs, n_events, time.perf_counter() - t0,
                   f"Spark {spark.version} {spark.sparkContext.master}")
