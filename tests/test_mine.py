"""Bulk mining without Spark (the local engine runs the same bucket kernel Spark runs): the
generator plants exactly what the runs table says, `mine` agrees run by run with
check-history's path on the same runs, corrupt rows are reported with file and row, exit
codes 0/1/2/3, and the summary pages. Spark itself: tests/test_mine_spark.py."""
from pathlib import Path

import polars as pl
import pytest

from tests.conftest import run_kafkaverify

from checkers.history.pipeline.file_check import check_file
from checkers.history.gen_runs import generate_dataset
from checkers.history.mine import mine_local
from checkers.history.result import counts
from traces.runs import extract_run

ROOT = Path(__file__).resolve().parents[1]


cli = run_kafkaverify


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    d = tmp_path_factory.mktemp("runs") / "ds"
    r = generate_dataset(str(d), runs=400, seed=11, ops=60, buckets=4, corrupt_rate=0.01)
    assert r["planted"] > 20 and r["corrupt"] >= 1 and r["runs"] - r["planted"] > 200
    return d


@pytest.fixture(scope="module")
def mined(dataset, tmp_path_factory):
    out = tmp_path_factory.mktemp("out")
    s = mine_local(str(dataset), str(out))
    return s, out


def test_generator_is_deterministic(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    generate_dataset(str(a), runs=30, seed=3, ops=40, buckets=2)
    generate_dataset(str(b), runs=30, seed=3, ops=40, buckets=2)
    for rel in ("runs/part-00000.parquet", "events/bucket=00000/part-00000.parquet"):
        assert pl.read_parquet(a / rel).equals(pl.read_parquet(b / rel))


def test_mine_finds_exactly_the_planted_runs(dataset, mined):
    s, out = mined
    runs = pl.read_parquet(dataset / "runs")
    v = pl.read_parquet(out / "verdicts.parquet").join(runs, on="trace_id")
    assert v.height == runs.height           # every run reported, none dropped
    planted = v.filter((pl.col("planted") != "") & ~pl.col("corrupt"))
    assert set(planted.filter(pl.col("status") == "invalid").get_column("trace_id")) == \
        set(planted.get_column("trace_id"))
    for r in planted.iter_rows(named=True):
        assert r["planted"] in r["types"], r
    clean = v.filter((pl.col("planted") == "") & ~pl.col("corrupt"))
    assert set(clean.get_column("status").unique()) == {"valid"}
    corrupt = v.filter(pl.col("corrupt"))
    assert set(corrupt.get_column("status")) == {"corrupt"}
    for r in corrupt.iter_rows(named=True):
        assert r["file"] in r["error"] and ": row " in r["error"] and "without an invoke" in r["error"]


def test_mine_agrees_with_check_history_run_by_run(dataset, mined, tmp_path):
    """The same runs, one history file each, through check-history's path."""
    s, out = mined
    v = pl.read_parquet(out / "verdicts.parquet")
    x = pl.read_parquet(out / "violations.parquet")
    runs = pl.read_parquet(dataset / "runs")
    pick = pl.concat([runs.filter(pl.col("planted") != "").head(40),
                      runs.filter(pl.col("planted") == "").head(20),
                      runs.filter(pl.col("corrupt")).head(2)]).get_column("trace_id").to_list()
    for tid in pick:
        path = tmp_path / f"{tid}.parquet"
        extract_run(dataset, tid, path)
        mv = v.filter(pl.col("trace_id") == tid).row(0, named=True)
        if mv["status"] == "corrupt":
            from traces.history import HistoryError
            with pytest.raises(HistoryError):
                check_file(str(path))
            continue
        r = check_file(str(path))
        assert r.verdict.status == mv["status"], tid
        got = dict(x.filter(pl.col("trace_id") == tid).group_by("type").len().iter_rows())
        assert got == counts(r.verdict.anomalies), tid
    # And the command itself, on one violating run and one clean run.
    bad = pick[0]
    p = cli("check-history", tmp_path / f"{bad}.parquet")
    assert p.returncode == 1
    good = pick[40]
    assert cli("check-history", tmp_path / f"{good}.parquet").returncode == 0
    # An extracted run is in the one-history layout: LZ4, no trace_id column, the run's
    # trace_id in the header.
    import json

    import pyarrow.parquet as pq
    from traces.history import PARQUET_META_KEY
    f = pq.ParquetFile(str(tmp_path / f"{good}.parquet"))
    assert "trace_id" not in f.schema_arrow.names
    assert f.metadata.row_group(0).column(0).compression.startswith("LZ4")
    assert json.loads(f.schema_arrow.metadata[PARQUET_META_KEY])["trace_id"] == good


def test_summary_pages(mined):
    s, out = mined
    from checkers.history.mine_report import markdown, render_html
    md, page = markdown(s, "t"), render_html(s, "t")
    assert "Shortest witness" in md and "| type | generation | producer | fault_type |" in md
    assert "<svg" in page and "http" not in page.replace("http://www.w3.org/2000/svg", "")
    for t in s.shortest.get_column("type"):
        assert t in md and t in page
    assert s.count("corrupt") >= 1 and "Runs with corrupt rows" in md


def _main(capsys, *args) -> tuple[int, str, str]:
    """The command line in this process (the same entry point, no interpreter start-up)."""
    from kafkaverify.cli import main
    with pytest.raises(SystemExit) as e:
        main([str(a) for a in args])
    out = capsys.readouterr()
    assert "Traceback" not in out.err
    return e.value.code, out.out, out.err


def test_cli_exit_codes(dataset, tmp_path, capsys):
    p = cli("mine", dataset, "--engine", "local", "--out", tmp_path / "o")     # one real process
    assert p.returncode == 1 and "invalid" in p.stdout and "corrupt run" in p.stdout
    assert (tmp_path / "o" / "summary.html").exists() and (tmp_path / "o" / "violations.parquet").exists()
    code, _, err = _main(capsys, "mine", tmp_path / "nope", "--engine", "local")
    assert code == 3 and "not a directory" in err
    # The same matrix with nothing planted: exit 0.
    clean = tmp_path / "clean"
    generate_dataset(str(clean), runs=6, seed=5, ops=40, buckets=2, plant=False)
    code, out, _ = _main(capsys, "mine", clean, "--engine", "local")
    assert code == 0 and "6 valid" in out
    # A run with no final read: unknown, exit 2.
    from traces.runs import bucket_path, run_schema, write_events, write_runs
    import pyarrow as pa
    from traces.history import events_to_table
    unk = tmp_path / "unknown"
    evs = [{"id": 1, "type": "invoke", "process": 0, "f": "send", "topic": "t", "partition": 0,
            "value": "a", "mono_ns": 1}, {"id": 1, "type": "ok", "process": 0, "f": "send", "offset": 0, "mono_ns": 2}]
    write_events(bucket_path(unk, 0), events_to_table({"trace_id": "r0"}, evs).replace_schema_metadata(None))
    write_runs(unk, pa.table({"trace_id": ["r0"], "bucket": [0], "seed": [0], "source": ["test"],
                              "generation": ["current"], "producer": ["idempotent"], "fault_type": ["none"],
                              "fault_rate": [0.0], "ops": [1], "planted": [""], "corrupt": [False]},
                             schema=run_schema()))
    code, out, _ = _main(capsys, "mine", unk, "--engine", "local")
    assert code == 2 and "1 unknown" in out


def _screened(f: Path, recode=None) -> pl.DataFrame:
    """One events file through the lean pass's screen (checkers/history/screens/columnar.py
    screen_runs: what the Spark job's first pass decides per run), over polars-encoded events;
    `recode` may rewrite the encoded frame first. Returns trace_id, status."""
    from checkers.history.screens.columnar import encode, pair, prepare, screen_runs
    c = pl.col
    ev = pl.read_parquet(f).drop("bucket", strict=False).with_columns(
        ((c("trace_id") != c("trace_id").shift(1)).fill_null(True).cast(pl.Int64).cum_sum() - 1).alias("run"))
    enc = encode(ev.lazy()).collect()
    if recode is not None:
        enc = recode(enc)
    st = screen_runs(pair(prepare(enc.lazy()).collect()))
    ids = ev.group_by("run").agg(c("trace_id").first())
    return st.join(ids, on="run", how="full", coalesce=True).select("trace_id", "status")


def test_lean_screen_flags_every_violation_and_decides_the_rest_as_the_full_kernel(dataset, mined):
    """The Spark job's first pass decides clean runs from encoded columns alone and sends the
    flagged ones to the full pass: every invalid or corrupt run must be flagged, and every run
    it decides must get the full kernel's status."""
    _, out = mined
    full = pl.read_parquet(out / "verdicts.parquet").select("trace_id", pl.col("status").alias("full"))
    got = pl.concat([_screened(f) for f in sorted((dataset / "events").rglob("*.parquet"))])
    both = got.join(full, on="trace_id", how="full", coalesce=True)
    assert both.height == full.height and both.get_column("status").null_count() == 0
    decided = both.filter(pl.col("status") != "flagged")
    assert decided.filter(pl.col("status") != pl.col("full")).height == 0
    must = both.filter(pl.col("full").is_in(["invalid", "corrupt"]))
    assert must.height > 20 and set(must.get_column("status")) == {"flagged"}


def test_a_value_hash_collision_flags_the_run_and_the_full_rows_decide(dataset, mined):
    """Two distinct values of one partition given one hash (a forced collision): the screen
    must not call the run valid on hashes (it flags it: values must be distinct per partition),
    and the full rows then decide, as the full kernel did (valid)."""
    _, out = mined
    v = pl.read_parquet(out / "verdicts.parquet")
    f = sorted((dataset / "events").rglob("*.parquet"))[0]
    ev = pl.read_parquet(f)
    tid = v.filter((pl.col("status") == "valid") & pl.col("trace_id").is_in(
        ev.get_column("trace_id").unique().implode())).sort("trace_id").item(0, "trace_id")
    sends = ev.filter((pl.col("trace_id") == tid) & (pl.col("f") == "send") & (pl.col("type") == "invoke"))
    part = sends.group_by("topic", "partition").len().sort("len", descending=True).row(0, named=True)
    a, b = sends.filter((pl.col("topic") == part["topic"]) & (pl.col("partition") == part["partition"])) \
        .get_column("value").head(2).to_list()
    ha, hb = pl.Series([a, b]).hash().to_list()

    def collide(enc: pl.DataFrame) -> pl.DataFrame:
        c = pl.col
        return enc.with_columns(pl.when(c("vh") == hb).then(pl.lit(ha, pl.UInt64)).otherwise(c("vh")).alias("vh"),
                                c("vhs").list.eval(pl.when(pl.element() == hb).then(pl.lit(ha, pl.UInt64))
                                                   .otherwise(pl.element())))
    assert _screened(f).filter(pl.col("trace_id") == tid).item(0, "status") == "valid"
    assert _screened(f, collide).filter(pl.col("trace_id") == tid).item(0, "status") == "flagged"
