"""Mining benchmark: `python -m benchmarks.mine [--runs N] [--distinct K] [--seed S]`.

Generates a runs dataset (traces/runs.py; K distinct generated runs tiled to N, planted
anomalies included), then, each in a fresh subprocess whose whole process tree's RSS is
sampled (JVM and Python workers included), times on the same data:
  kernel-local   the full check (kafkaverify mine --engine local): the columnar kernel per file
  kernel-spark   the full check on Spark local[2]: the same kernel in mapInArrow, each task's
                 Python worker reading its events file (mine_spark read="executors")
  kernel-spark-jvm  the same through Spark's Parquet reader: a lean pass of encoded columns,
                 then the flagged runs' full rows (mine_spark read="spark")
  polars         one rule set as a single polars query: pairing + per-producer send order +
                 per-consumer poll contiguity (no witnesses)
  duckdb         the same rule set as one DuckDB SQL query
  spark-sql      the same rule set with Spark DataFrame window functions, local[2]
The three "rule set" engines answer a smaller question than the kernel (two rules of the
eight, no witnesses): their ratios say what the engine costs, not what the checks cost.
Prints seed= and options first; events/s, seconds, CPU-seconds and peak MiB of each engine's
process tree, the 1-minute load average, and the ratio to the fastest."""
from __future__ import annotations

import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import click

ENGINES = ("kernel-local", "kernel-spark", "kernel-spark-jvm", "polars", "duckdb", "spark-sql")


def _tree(root: int) -> tuple[int, dict[int, float]]:
    """RSS (KiB) of `root` and all its descendants, and each one's CPU seconds so far (from
    /proc: user + system time of the process itself, not of its reaped children)."""
    kids: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    cpu: dict[int, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                parts = f.read().rsplit(")", 1)[1].split()
            ppid = int(parts[1])
            with open(f"/proc/{d}/statm") as f:
                pages = int(f.read().split()[1])
        except (OSError, IndexError, ValueError):
            continue
        kids.setdefault(ppid, []).append(int(d))
        rss[int(d)] = pages * os.sysconf("SC_PAGE_SIZE") // 1024
        cpu[int(d)] = (int(parts[11]) + int(parts[12])) / tick
    total, seen, todo = 0, {}, [root]
    while todo:
        p = todo.pop()
        total += rss.get(p, 0)
        if p in cpu:
            seen[p] = cpu[p]
        todo += kids.get(p, [])
    return total, seen


def _children_cpu() -> float:
    """CPU seconds of every reaped descendant so far."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _run_sampled(cmd: list[str]) -> tuple[dict, float]:
    """Runs `cmd`, sampling its process tree every 0.2 s: peak RSS, and CPU seconds as the sum
    over every process seen of its last sampled CPU time (a JVM that outlives its parent and is
    never reaped here is counted too; at most 0.2 s of each process's last CPU is missed), or
    the reaped children's CPU if that is larger."""
    cpu0 = _children_cpu()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak = [0]
    last: dict[int, float] = {}
    stop = threading.Event()

    def sample():
        while not stop.wait(0.2):
            rss, cpu = _tree(p.pid)
            peak[0] = max(peak[0], rss)
            last.update(cpu)
    t = threading.Thread(target=sample, daemon=True)
    t.start()
    out, err = p.communicate()
    stop.set()
    t.join()
    if p.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)} failed:\n{err[-3000:]}")
    r = json.loads(out.strip().splitlines()[-1])
    r["cpu_seconds"] = max(_children_cpu() - cpu0, sum(last.values()))
    return r, peak[0] / 1024


# -- the rule set, three ways (pairing; send order per producer; poll contiguity per consumer)

def _polars(ds: str) -> dict:
    import polars as pl
    c = pl.col
    ev = pl.scan_parquet(f"{ds}/events/*/*.parquet")
    inv = ev.filter(c("type") == "invoke").select("trace_id", "id", "process", "f", "partition", c("mono_ns").alias("inv"))
    comp = ev.filter(c("type") != "invoke").select("trace_id", "id", c("type").alias("outcome"), "offset", "offsets")
    ops = inv.join(comp, on=["trace_id", "id"], how="left")
    sends = (ops.filter((c("f") == "send") & (c("outcome") == "ok")).sort("trace_id", "partition", "process", "inv")
             .with_columns(c("offset").shift(1).over("trace_id", "partition", "process").alias("prev"))
             .filter(c("offset") <= c("prev")).select("trace_id"))
    polls = (ops.filter((c("f") == "poll") & (c("outcome") == "ok") & (c("offsets").list.len() > 0))
             .sort("trace_id", "partition", "process", "inv")
             .with_columns(c("offsets").list.first().alias("o0"), c("offsets").list.last().alias("ol"))
             .with_columns(c("ol").shift(1).over("trace_id", "partition", "process").alias("prev"))
             .filter(c("prev").is_not_null() & (c("o0") > c("prev") + 1)).select("trace_id"))
    bad = pl.concat([sends, polls]).unique().collect()
    n = ev.select(pl.len()).collect().item()
    return {"events": n, "flagged_runs": bad.height}


def _duckdb(ds: str) -> dict:
    import duckdb
    con = duckdb.connect()
    con.execute("SET threads TO 2")
    q = f"""
    WITH ev AS (SELECT * FROM read_parquet('{ds}/events/*/*.parquet')),
    ops AS (SELECT i.trace_id, i.id, i.process, i.f, i.partition, i.mono_ns AS inv,
                   c.type AS outcome, c."offset" AS off, c.offsets
            FROM ev i LEFT JOIN ev c ON c.trace_id = i.trace_id AND c.id = i.id AND c.type <> 'invoke'
            WHERE i.type = 'invoke'),
    s AS (SELECT trace_id, off, lag(off) OVER (PARTITION BY trace_id, partition, process ORDER BY inv) AS prev
          FROM ops WHERE f = 'send' AND outcome = 'ok'),
    p AS (SELECT trace_id, offsets[1] AS o0,
                 lag(offsets[len(offsets)]) OVER (PARTITION BY trace_id, partition, process ORDER BY inv) AS prev
          FROM ops WHERE f = 'poll' AND outcome = 'ok' AND len(offsets) > 0)
    SELECT count(DISTINCT trace_id) FROM (
        SELECT trace_id FROM s WHERE off <= prev UNION ALL SELECT trace_id FROM p WHERE o0 > prev + 1)
    """
    flagged = con.execute(q).fetchone()[0]
    n = con.execute(f"SELECT count(*) FROM read_parquet('{ds}/events/*/*.parquet')").fetchone()[0]
    return {"events": n, "flagged_runs": flagged}


def _spark_sql(ds: str) -> dict:
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    from checkers.history.spark_job import session
    spark = session("local[2]", app="bench-spark-sql")
    t0 = time.perf_counter()
    ev = spark.read.parquet(f"{ds}/events").drop("bucket")
    inv = ev.filter(F.col("type") == "invoke").select("trace_id", "id", "process", "f", "partition", F.col("mono_ns").alias("inv"))
    comp = ev.filter(F.col("type") != "invoke").select("trace_id", "id", F.col("type").alias("outcome"), "offset", "offsets")
    ops = inv.join(comp, ["trace_id", "id"], "left")
    w = Window.partitionBy("trace_id", "partition", "process").orderBy("inv")
    s = (ops.filter((F.col("f") == "send") & (F.col("outcome") == "ok"))
         .withColumn("prev", F.lag("offset").over(w)).filter(F.col("offset") <= F.col("prev")).select("trace_id"))
    p = (ops.filter((F.col("f") == "poll") & (F.col("outcome") == "ok") & (F.size("offsets") > 0))
         .withColumn("o0", F.element_at("offsets", 1)).withColumn("ol", F.element_at("offsets", -1))
         .withColumn("prev", F.lag("ol").over(w)).filter(F.col("o0") > F.col("prev") + 1).select("trace_id"))
    flagged = s.union(p).distinct().count()
    n = ev.count()
    out = {"events": n, "flagged_runs": flagged, "seconds_in_job": time.perf_counter() - t0}
    spark.stop()
    return out


def _kernel(ds: str, engine: str) -> dict:
    out = tempfile.mkdtemp(prefix="kv-bench-out-")
    try:
        if engine == "local":
            from checkers.history.mine import mine_local
            s = mine_local(ds, out)
            return {"events": s.events, "invalid_runs": s.count("invalid"), "runs": s.runs}
        from checkers.history.spark_job import mine_spark, session
        spark = session("local[2]", app="bench-kernel-spark")
        t0 = time.perf_counter()
        s = mine_spark(spark, ds, out, read="spark" if engine == "spark-jvm" else "executors")
        r = {"events": s.events, "invalid_runs": s.count("invalid"), "runs": s.runs,
             "seconds_in_job": time.perf_counter() - t0}
        spark.stop()
        return r
    finally:
        shutil.rmtree(out, ignore_errors=True)


def one(engine: str, ds: str) -> dict:
    t0 = time.perf_counter()
    if engine == "kernel-local":
        r = _kernel(ds, "local")
    elif engine == "kernel-spark":
        r = _kernel(ds, "spark")
    elif engine == "kernel-spark-jvm":
        r = _kernel(ds, "spark-jvm")
    elif engine == "polars":
        r = _polars(ds)
    elif engine == "duckdb":
        r = _duckdb(ds)
    else:
        r = _spark_sql(ds)
    r["seconds"] = time.perf_counter() - t0
    return r


@click.command()
@click.option("--runs", type=int, default=20_000, show_default=True)
@click.option("--distinct", type=int, default=2_000, show_default=True,
              help="distinct generated runs, tiled to --runs")
@click.option("--ops", type=int, default=50, show_default=True, help="client operations per run")
@click.option("--seed", type=int, default=1, show_default=True)
@click.option("--buckets", type=int, default=16, show_default=True)
@click.option("--engines", default=",".join(ENGINES), show_default=True)
@click.option("--dir", "workdir", type=click.Path(file_okay=False), default=None,
              help="keep the dataset in DIR/ds (default: a temporary directory, removed)")
@click.option("--dataset", type=click.Path(exists=True, file_okay=False), default=None,
              help="mine this existing dataset (e.g. an earlier --dir's ds) instead of generating one")
@click.option("--one", "one_args", nargs=2, type=str, default=None, hidden=True)
def main(runs, distinct, ops, seed, buckets, engines, workdir, dataset, one_args):
    """Generate and mine runs; compare engines."""
    if one_args:
        print(json.dumps(one(*one_args)))
        return
    if dataset and workdir:
        raise click.UsageError("--dataset mines an existing dataset; --dir says where to generate one")
    what = (f"dataset={dataset}" if dataset else
            f"seed={seed} runs={runs} distinct={distinct} ops={ops} buckets={buckets}")
    print(f"{what} engines={engines} python={platform.python_version()} cpus={os.cpu_count()}",
          flush=True)
    d = Path(workdir or tempfile.mkdtemp(prefix="kv-bench-mine-"))
    ds = Path(dataset) if dataset else d / "ds"
    if not dataset:
        if ds.exists():
            shutil.rmtree(ds)
        from checkers.history.gen_runs import generate_dataset
        t0, c0 = time.perf_counter(), time.process_time()
        g = generate_dataset(str(ds), runs=runs, seed=seed, ops=ops, buckets=buckets, distinct=distinct)
        gen_s, gen_cpu = time.perf_counter() - t0, time.process_time() - c0
        gen_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        size = sum(f.stat().st_size for f in ds.rglob("*.parquet"))
        print(f"generated {g['runs']} runs ({g['distinct']} distinct), {g['events']} events, "
              f"{g['planted']} planted, {size / 2**20:.0f} MiB Parquet in {gen_s:.1f} s, "
              f"{gen_cpu:.1f} CPU-s ({g['events'] / gen_s:,.0f} events/s), peak {gen_peak:.0f} MiB "
              f"(one process)", flush=True)
    rows = []
    for e in engines.split(","):
        r, peak = _run_sampled([sys.executable, "-m", "benchmarks.mine", "--one", e, str(ds)])
        r["engine"], r["peak_mib"] = e, peak
        rows.append(r)
        extra = (f"invalid runs {r['invalid_runs']}" if "invalid_runs" in r else f"flagged runs {r['flagged_runs']}")
        job = f" (job {r['seconds_in_job']:.1f} s)" if "seconds_in_job" in r else ""
        print(f"{e:>13}: {r['seconds']:7.1f} s{job}  {r['events'] / r['seconds']:>12,.0f} events/s  "
              f"{r['cpu_seconds']:7.1f} CPU-s  peak {peak:6.0f} MiB (process tree)  {extra}  "
              f"load {os.getloadavg()[0]:.1f}", flush=True)
    for kind in (("kernel-local", "kernel-spark", "kernel-spark-jvm"), ("polars", "duckdb", "spark-sql")):
        sub = [r for r in rows if r["engine"] in kind]
        if len(sub) > 1:
            best = min(sub, key=lambda r: r["seconds"])
            print("ratios to " + best["engine"] + ": " + ", ".join(
                f"{r['engine']} {r['seconds'] / best['seconds']:.2f}x" for r in sub))
    if not workdir and not dataset:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
