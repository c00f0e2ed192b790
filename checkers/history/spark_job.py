"""The mining job on Spark: every run of a bulk dataset (traces/runs.py) through the columnar
kernel (the polars screen, then the oracle on flagged partitions: mine.py), as `mapInArrow`
over whole files (one Python call per task, never per run or row).
Nothing comes back to the driver but aggregates and the shortest witnesses: the violations and
per-run verdicts are written by the executors to OUT/violations.parquet and OUT/verdicts.parquet.

Spark's own cost here is the JVM's conversion of rows to Arrow, about linear in rows x
columns shipped (docs/benchmarks/mining.md). So by default each task's Python
worker reads its events file itself (mine_spark read="executors"). With Spark's reader
(read="spark") the job makes two passes: the first ships only the kernel's encoded integer
columns (lean_select: strings hashed with xxhash64 in the JVM, enums packed in one int) and
gets one row per run back; the second ships every column of the runs the screens flagged.

Spark never cuts a run: each events file is one Parquet row group (traces/runs.py), and Spark
splits Parquet only at row groups. The project's packages are shipped to executors as a zip
(addPyFile), with the compiled scans (checkers/history/screens/_scan.c, built for the driver's Python)
beside them (addFile), so a remote cluster needs only the driver's Python version on the same
platform, with polars and pyarrow installed.
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
from checkers.history.screens.columnar import PRESENCE_ONLY, scans_file

PACKAGES = ("checkers", "traces")
ROOT = Path(__file__).resolve().parents[2]


def _ship(spark) -> None:
    """The packages the executors import, as one zip on their Python path (once per context:
    a session reused by getOrCreate keeps its zip), and the kernel's compiled scans beside it:
    Python cannot import an extension module from a zip, so the built file goes by addFile to
    the directory Spark puts on the executors' path, where screens/columnar.py finds it as `_scan`
    (executors then need the driver's Python version and platform)."""
    if getattr(spark.sparkContext, "_kafkaverify_shipped", False):
        return
    path = Path(tempfile.mkdtemp(prefix="kv-spark-")) / "kafkaverify_mine.zip"
    with zipfile.ZipFile(path, "w") as z:
        for pkg in PACKAGES:
            for f in sorted((ROOT / pkg).rglob("*.py")):
                z.write(f, f.relative_to(ROOT))
    spark.sparkContext.addPyFile(str(path))
    spark.sparkContext.addFile(scans_file())
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
    if master.startswith("local"):
        # A local session is one short-lived JVM sharing the machine's cores with the Python
        # workers: the C2 compiler's work does not pay back within a job of minutes (measured
        # on 8,000 runs, local[2]: about 40% less CPU for the session and the job with C1 only).
        b = b.config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1")
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


def lean_select(ev):
    """The lean pass's columns, computed in the JVM (checkers/history/mine.py decode_lean reads
    them): the run's hash, the file's path on its first row only, the small enums packed into
    `tags`, the integer columns, the strings as xxhash64 (null stays null) and each poll's
    values as a list of xxhash64. Every string column is left in the JVM."""
    from pyspark.sql import functions as F
    from checkers.history.mine import TAG_SHIFT
    from traces.history import DELIVERY_MODES, FS, TXN_VERSION, TYPES
    from traces.runs import VERSION_COLUMN
    c = F.col

    def h(n):
        return F.when(c(n).isNotNull(), F.xxhash64(n))

    def code(n, names):          # 1 + index; 0 if absent or unknown
        return F.coalesce(F.array_position(F.array(*[F.lit(x) for x in names]), c(n)), F.lit(0))
    dl = F.when(c("delivery").isNull(), 0).otherwise(
        F.when(code("delivery", DELIVERY_MODES) == 0, 3).otherwise(code("delivery", DELIVERY_MODES)))
    fin = F.when(c("final").isNull(), 0).when(c("final"), 2).otherwise(1)
    extra = F.when(F.greatest(*[c(n).isNotNull().cast("int") for n in PRESENCE_ONLY]) == 1, 1).otherwise(0)
    # A transactional run's events (traces/runs.py `version` column, where the dataset has it):
    # the run is flagged, for the oracle.
    v2 = (F.when(c(VERSION_COLUMN) >= TXN_VERSION, 1).otherwise(0) if VERSION_COLUMN in ev.columns
          else F.lit(0))
    tags = (code("type", TYPES) * (1 << TAG_SHIFT["type"]) + code("f", FS) * (1 << TAG_SHIFT["f"])
            + dl * (1 << TAG_SHIFT["delivery"]) + fin * (1 << TAG_SHIFT["final"])
            + extra * (1 << TAG_SHIFT["extra"]) + v2 * (1 << TAG_SHIFT["v2"])).cast("int")
    return ev.select(
        F.xxhash64("trace_id").alias("th"),
        F.when(c("row") == 0, F.regexp_replace(c("_metadata.file_path"), "^file:", "")).alias("file"),
        tags.alias("tags"), "id", "process", h("topic").alias("tc"), "partition", h("value").alias("vh"),
        "offset", "offsets", F.transform("values", lambda x: F.when(x.isNotNull(), F.xxhash64(x))).alias("vhs"),
        h("group").alias("group"), "generation", "mono_ns")


READS = ("executors", "spark")


def mine_spark(spark, dataset: str, out: str, progress=None, read: str = "executors") -> Summary:
    """Every run of the dataset through the kernel on Spark, then two writes and one aggregate
    job; only aggregates and the shortest witnesses reach the driver.

    read="executors" (the default): the driver lists the events files (the dataset must be
    a path every executor can open, as --out already is) and each task's Python worker reads
    its file with polars and checks it as the local engine does (mine_files): Spark schedules
    the work and the JVM converts no event to Arrow, which measured as most of Spark's cost.
    read="spark": Spark's own Parquet reader, in two passes (_two_pass), for datasets only
    the JVM can open."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema
    from checkers.history.mine import mine_files
    from traces.runs import check_dataset, runs_dir
    if read not in READS:
        raise ValueError(f"read must be one of {READS}")
    c = F.col
    t0 = time.perf_counter()
    files, _ = check_dataset(dataset)
    runs = spark.read.parquet(str(runs_dir(dataset))).select("trace_id", *KEYS)
    keep = []
    if read == "executors":
        paths = spark.sparkContext.parallelize([(str(f),) for f in files], len(files))
        res = (spark.createDataFrame(paths, "path string").mapInArrow(mine_files, from_arrow_schema(OUT_SCHEMA))
               .persist(StorageLevel.MEMORY_AND_DISK))
        keep.append(res)
        with Progress(spark, progress or (lambda d, t: None)):
            res.count()
        verdicts = res.filter(c("kind") == "verdict").select("trace_id", "status", "ops", "events", "types",
                                                              "file", "error")
        violations = res.filter(c("kind") == "violation").select(
            "trace_id", "partition", "type", "witness", "witness_len", "explanation", "witness_ops", "file")
    else:
        verdicts, violations = _two_pass(spark, dataset, runs, progress, keep)
    outp = Path(out)
    verdicts.write.mode("overwrite").parquet(str(outp / "verdicts.parquet"))
    violations.write.mode("overwrite").parquet(str(outp / "violations.parquet"))
    # Every aggregate in one job: verdicts and violations as rows of one table, grouped once.
    # Per (type, keys) the shortest witness; the shortest per type is the least of those.
    wit = F.struct("trace_id", "partition", "witness_len", "witness", "explanation", "witness_ops", "file")
    rows = (verdicts.join(runs, "trace_id", "left").select(
                F.lit("status").alias("agg"), c("status").alias("k"), *KEYS, "events",
                F.lit(None).cast("string").alias("tid"),
                F.when(c("status") == "corrupt", F.struct("trace_id", "file", "error")).alias("bad"))
            .unionByName(violations.join(runs, "trace_id", "left").select(
                F.lit("anomaly").alias("agg"), c("type").alias("k"), *KEYS, F.lit(0).cast("long").alias("events"),
                c("trace_id").alias("tid"), wit.alias("w"),
                F.struct("witness_len", "trace_id", "partition", "witness").alias("wk")), allowMissingColumns=True))
    agg = pl.from_arrow(rows.groupBy("agg", "k", *KEYS).agg(
        F.count("*").alias("n"), F.sum("events").alias("events"), F.countDistinct("tid").alias("runs"),
        F.min_by("w", "wk").alias("w"),
        F.slice(F.array_sort(F.collect_list("bad")), 1, MAX_CORRUPT).alias("bad")).toArrow())
    for df in keep:
        df.unpersist()
    st = agg.filter(pl.col("agg") == "status").sort("k", *KEYS)
    by_status = st.select(pl.col("k").alias("status"), *KEYS, pl.col("n").cast(pl.UInt32).alias("runs"))
    n_events = int(st.get_column("events").sum() or 0) if st.height else 0
    an = agg.filter(pl.col("agg") == "anomaly").sort("k", *KEYS)
    by_anomaly = an.select(pl.col("k").alias("type"), *KEYS, pl.col("n").cast(pl.UInt32).alias("violations"),
                           pl.col("runs").cast(pl.UInt32))
    cols = ["trace_id", "partition", "witness_len", "witness", "explanation", "witness_ops", "file"]
    shortest = (an.select(pl.col("k").alias("type"), "w").unnest("w")
                .sort("witness_len", "trace_id", "partition", "witness").group_by("type", maintain_order=True).first()
                .select("type", *cols).sort("type"))
    bad = st.select("bad").explode("bad").drop_nulls()
    corrupt = (bad.unnest("bad").sort("trace_id").head(MAX_CORRUPT) if bad.height
               else pl.DataFrame(schema={"trace_id": pl.String, "file": pl.String, "error": pl.String}))
    n_runs = int(by_status.get_column("runs").sum()) if by_status.height else 0
    return Summary(by_status, by_anomaly, shortest, corrupt, n_runs, n_events, time.perf_counter() - t0,
                   f"Spark {spark.version} {spark.sparkContext.master}")


def _two_pass(spark, dataset: str, runs, progress, keep: list):
    """Spark's own reader, in two passes. The lean pass ships only the encoded integer
    columns to Python (lean_select) and gets back one row per run: its clean verdict, or
    'flagged'. The full pass reads every column of the flagged runs only (a broadcast
    semi-join on the run's hash, in the JVM) and checks them as the local engine does
    (mine_batches). A run whose hash is shared by two run ids, or missing from the runs
    table, is checked in the full pass too (which tells runs apart by their ids).
    Returns (verdicts, violations); the cached frames are appended to `keep`."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema
    from checkers.history.mine import FLAGGED, LEAN_OUT_SCHEMA, screen_batches
    from traces.runs import events_dir
    c = F.col
    ev = spark.read.parquet(str(events_dir(dataset)))
    by_hash = (runs.groupBy(F.xxhash64("trace_id").alias("th"))
               .agg(F.count("*").alias("ids"), F.min("trace_id").alias("trace_id")))
    lean = (lean_select(ev).mapInArrow(screen_batches, from_arrow_schema(LEAN_OUT_SCHEMA))
            .join(by_hash, "th", "left").persist(StorageLevel.MEMORY_AND_DISK))
    keep.append(lean)
    full_check = (c("status") == FLAGGED) | c("trace_id").isNull() | (c("ids") > 1)
    need = lean.filter(full_check).select("th")
    flagged_ev = (ev.select("*", F.xxhash64("trace_id").alias("th"),
                            F.regexp_replace(c("_metadata.file_path"), "^file:", "").alias("file"))
                  .join(F.broadcast(need), "th", "left_semi").drop("th", "bucket"))
    # The lean pass, run once (and cached) before anything reads it twice.
    with Progress(spark, progress or (lambda d, t: None)):
        n_full = need.count()
    if n_full:
        res = flagged_ev.mapInArrow(mine_batches, from_arrow_schema(OUT_SCHEMA)).persist(StorageLevel.MEMORY_AND_DISK)
        keep.append(res)
    else:
        res = spark.createDataFrame([], from_arrow_schema(OUT_SCHEMA))
    verdicts = (lean.filter(~full_check).select(
        "trace_id", "status", "ops", "events", F.array().cast("array<string>").alias("types"), "file",
        F.lit(None).cast("string").alias("error"))
        .unionByName(res.filter(c("kind") == "verdict").select("trace_id", "status", "ops", "events",
                                                              "types", "file", "error")))
    violations = res.filter(c("kind") == "violation").select(
        "trace_id", "partition", "type", "witness", "witness_len", "explanation", "witness_ops", "file")
    return verdicts, violations
