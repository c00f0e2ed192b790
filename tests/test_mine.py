"""Bulk mining without Spark (the local engine runs the same bucket kernel Spark runs): the
generator plants exactly what the runs table says, `mine` agrees run by run with
check-history's path on the same runs, corrupt rows are reported with file and row, exit
codes 0/1/2/3, and the summary pages. Spark itself: tests/test_mine_spark.py."""
from pathlib import Path

import polars as pl
import pytest

from tests.conftest import run_kafkaverify

from checkers.history.columnar_file import check_file
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
