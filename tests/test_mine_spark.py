"""`kafkaverify mine` on a real Spark standalone cluster: a master and one worker started on
loopback from the pyspark installation (spark-class), the job submitted to
spark://127.0.0.1:PORT, compared with the local engine and with check-history on the same
runs. One cluster and one session for the whole module (JVM starts are slow). Java missing
fails loudly (it is a prerequisite, not an option); every wait is bounded; the processes are
stopped at teardown by their own process groups."""
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from checkers.history.pipeline.file_check import check_file
from checkers.history.gen_runs import generate_dataset
from checkers.history.mine import mine_local
from checkers.history.result import counts
from impl.cluster import free_ports
from traces.runs import extract_run

MASTER_START_S = 90
WORKER_REGISTER_S = 120
EXECUTOR_START_S = 120


def _wait(cond, timeout: float, what: str, logs=()):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return
        time.sleep(0.2)
    tails = "\n".join(f"--- {p}:\n{Path(p).read_text(errors='replace')[-3000:]}" for p in logs if Path(p).exists())
    pytest.fail(f"{what} not within {timeout} s\n{tails}")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.fail("Java (17) is required for the Spark tests: apt-get install openjdk-17-jre-headless")
    import pyspark
    home = Path(pyspark.__file__).parent
    d = tmp_path_factory.mktemp("spark")
    # three distinct ports (picked one at a time, two could coincide: impl.cluster.free_ports)
    port, master_ui, worker_ui = free_ports(3)
    env = dict(os.environ, SPARK_HOME=str(home), SPARK_LOCAL_IP="127.0.0.1",
               SPARK_WORKER_DIR=str(d / "work"), SPARK_LOG_DIR=str(d), PYSPARK_PYTHON=sys.executable,
               SPARK_NO_DAEMONIZE="1")
    procs = []
    logs = [d / "master.log", d / "worker.log"]

    def start(args, log):
        f = open(log, "w")
        p = subprocess.Popen([str(home / "bin" / "spark-class"), *args], stdout=f, stderr=subprocess.STDOUT,
                             env=env, start_new_session=True)
        procs.append(p)
        return p
    try:
        start(["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
               "--webui-port", str(master_ui)], logs[0])

        def master_up():
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", port)) == 0
        _wait(master_up, MASTER_START_S, "the Spark master listening", logs)
        start(["org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--cores", "1",
               "--memory", "1500m", "--webui-port", str(worker_ui), f"spark://127.0.0.1:{port}"], logs[1])
        _wait(lambda: "Registering worker" in logs[0].read_text(errors="replace"), WORKER_REGISTER_S,
              "the worker registering with the master", logs)
        yield f"spark://127.0.0.1:{port}"
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=10)


@pytest.fixture(scope="module")
def spark(cluster):
    from checkers.history.spark_job import session
    s = session(cluster, app="kafkaverify-test",
                extra={"spark.executor.memory": "1g", "spark.cores.max": "1"})
    # Jobs would wait for an executor forever: wait for one, bounded, before any job.
    status = s.sparkContext._jsc.sc().getExecutorMemoryStatus
    try:
        _wait(lambda: status().size() > 1, EXECUTOR_START_S, "an executor registering with the driver")
    except BaseException:
        s.stop()
        raise
    yield s
    s.stop()


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    d = tmp_path_factory.mktemp("runs") / "ds"
    # A share of transactional runs (history format version 2): the lean pass flags them and
    # the oracle judges their full rows, as the local engine does.
    r = generate_dataset(str(d), runs=150, seed=21, ops=50, buckets=3, corrupt_rate=0.01, txn_share=0.3)
    assert r["corrupt"] >= 1 and r["planted"] >= 5       # both kinds present (seeded)
    return d


def _read(path: Path) -> pl.DataFrame:
    """A Parquet table: one file (local engine) or a directory of part files (Spark)."""
    return pl.read_parquet(path / "*.parquet" if path.is_dir() else path)


def test_mine_on_standalone_cluster_matches_local_and_check_history(spark, cluster, dataset, tmp_path):
    from checkers.history.mine_report import markdown
    from checkers.history.spark_job import mine_spark
    assert spark.sparkContext.master == cluster
    s = mine_spark(spark, str(dataset), str(tmp_path / "spark"))
    loc = mine_local(str(dataset), str(tmp_path / "local"))
    # Same summary, line for line (the first lines name the engine and the time), and the
    # same through Spark's own reader (the lean pass, then the flagged runs' full rows).
    assert markdown(s, "x").splitlines()[3:] == markdown(loc, "x").splitlines()[3:]
    jvm = mine_spark(spark, str(dataset), str(tmp_path / "spark-jvm"), read="spark")
    assert markdown(jvm, "x").splitlines()[3:] == markdown(loc, "x").splitlines()[3:]
    jv = _read(tmp_path / "spark-jvm" / "verdicts.parquet").sort("trace_id")
    sv = _read(tmp_path / "spark" / "verdicts.parquet").sort("trace_id")
    lv = pl.read_parquet(tmp_path / "local" / "verdicts.parquet").sort("trace_id")
    assert sv.select("trace_id", "status", "types").equals(lv.select("trace_id", "status", "types"))
    assert jv.select("trace_id", "status", "types").equals(lv.select("trace_id", "status", "types"))
    runs = pl.read_parquet(dataset / "runs")
    assert sv.height == runs.height
    assert s.count("invalid") == runs.filter((pl.col("planted") != "") & ~pl.col("corrupt")).height
    assert s.count("corrupt") == runs.filter(pl.col("corrupt")).height
    # check-history's path on some of the same runs.
    sx = _read(tmp_path / "spark" / "violations.parquet")
    for tid in sv.filter(pl.col("status") != "corrupt").get_column("trace_id").to_list()[::15]:
        path = tmp_path / f"{tid}.parquet"
        extract_run(dataset, tid, path)
        r = check_file(str(path))
        assert r.verdict.status == sv.filter(pl.col("trace_id") == tid).item(0, "status")
        assert dict(sx.filter(pl.col("trace_id") == tid).group_by("type").len().iter_rows()) == \
            counts(r.verdict.anomalies)


def test_mine_command_on_the_cluster(spark, cluster, dataset, tmp_path):
    """The command itself (in this process, so it reuses the module's session)."""
    from kafkaverify.cli import cli
    out = tmp_path / "o"
    r = CliRunner().invoke(cli, ["mine", str(dataset), "--master", cluster, "--out", str(out)],
                           standalone_mode=False)
    assert r.exception is None, r.output
    assert r.return_value == 1
    assert "invalid" in r.output and "corrupt run" in r.output and ": row " in r.output
    for f in ("summary.md", "summary.html"):
        assert (out / f).stat().st_size > 0
    assert _read(out / "violations.parquet").height > 0
