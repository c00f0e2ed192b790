"""Transactional runs in the bulk runs layout (traces/runs.py: version 2's columns and the
per-run `version` column) and in `kafkaverify mine`: the generator of transactional histories
(checkers/history/generate_txn.py) plants exactly the kind asked (and nothing when asked
nothing), mining a dataset that mixes version-1 and transactional runs finds exactly the
planted runs with the new kinds, agrees run by run with check-history on extracted runs,
and the Spark lean pass flags every transactional run for the full rows (which the oracle
judges)."""
from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest

from checkers.history.gen_runs import TRANSACTIONAL, generate_dataset, planted_mismatches
from checkers.history.generate_txn import PLANTABLE, generate_txn
from checkers.history.mine import FLAGGED, TAG_SHIFT, decode_lean, mine_local, screen_lean
from checkers.history.oracle.check import check_history
from checkers.history.pipeline.file_check import check_file
from checkers.history.result import counts
from tests.conftest import run_kafkaverify
from traces.history import DELIVERY_MODES, FS, TXN_VERSION, TYPES
from traces.runs import VERSION_COLUMN, extract_run


@pytest.mark.parametrize("planted", ("",) + PLANTABLE)
def test_generated_transactional_histories_show_what_was_planted(planted):
    for seed in range(8):
        h = generate_txn(seed, 60, planted=planted)
        assert h.header["version"] == TXN_VERSION
        assert any(o.txn is not None for o in h.ops) and any(o.f == "txn_commit" for o in h.ops)
        v = check_history(h)
        if planted:
            assert v.status == "invalid" and planted in v.types(), (seed, v.types())
        else:
            assert v.status == "valid" and not v.notes, (seed, v.types())


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    d = tmp_path_factory.mktemp("txnruns") / "ds"
    r = generate_dataset(str(d), runs=160, seed=4, ops=50, buckets=3, corrupt_rate=0.04, txn_share=0.7)
    assert r["planted"] >= 8 and r["corrupt"] >= 1
    return d


@pytest.fixture(scope="module")
def mined(dataset, tmp_path_factory):
    out = tmp_path_factory.mktemp("txnout")
    return mine_local(str(dataset), str(out)), out


def test_mine_finds_exactly_the_planted_transactional_runs(dataset, mined):
    summary, mined = mined
    runs = pl.read_parquet(dataset / "runs")
    v = pl.read_parquet(mined / "verdicts.parquet")
    assert planted_mismatches(runs, v) == []
    txn = runs.filter(pl.col("producer") == TRANSACTIONAL)
    kinds = set(txn.filter(pl.col("planted") != "").get_column("planted"))
    assert len(kinds) >= 2 and kinds <= set(PLANTABLE), kinds
    x = pl.read_parquet(mined / "violations.parquet")
    found = set(x.join(txn.select("trace_id"), on="trace_id").get_column("type"))
    assert kinds <= found
    # The summary reports the new kinds by producer settings, as every other kind.
    from checkers.history.mine_report import markdown
    md = markdown(summary, "t")
    for k in kinds:
        assert f"| {k} |" in md and TRANSACTIONAL in md


def test_mine_agrees_with_check_history_on_transactional_runs(dataset, mined, tmp_path):
    _, mined = mined
    runs = pl.read_parquet(dataset / "runs").filter(pl.col("producer") == TRANSACTIONAL)
    v = pl.read_parquet(mined / "verdicts.parquet")
    x = pl.read_parquet(mined / "violations.parquet")
    pick = pl.concat([runs.filter((pl.col("planted") != "") & ~pl.col("corrupt")).head(6),
                      runs.filter((pl.col("planted") == "") & ~pl.col("corrupt")).head(3)])
    for tid in pick.get_column("trace_id").to_list():
        path = tmp_path / f"{tid}.parquet"
        extract_run(dataset, tid, path)
        r = check_file(str(path))
        assert r.engine.startswith("object") and r.history.header["version"] == TXN_VERSION
        assert r.verdict.status == v.filter(pl.col("trace_id") == tid).item(0, "status"), tid
        assert dict(x.filter(pl.col("trace_id") == tid).group_by("type").len().iter_rows()) == \
            counts(r.verdict.anomalies), tid
    bad = pick.get_column("trace_id")[0]
    assert run_kafkaverify("check-history", tmp_path / f"{bad}.parquet").returncode == 1


def test_version_one_datasets_are_unchanged_without_transactional_runs(tmp_path):
    """txn_share 0: the same files as ever (no version 2 columns), the same runs."""
    generate_dataset(str(tmp_path / "a"), runs=12, seed=3, ops=40, buckets=2)
    f = pl.read_parquet(tmp_path / "a" / "events" / "bucket=00000" / "part-00000.parquet")
    assert VERSION_COLUMN not in f.columns and "txn" not in f.columns


def _lean(path: Path) -> pa.Table:
    """The Spark lean select's columns (checkers/history/spark_job.py lean_select), built with
    polars' hash instead of the JVM's xxhash64."""
    c = pl.col
    ev = pl.read_parquet(path)

    def code(n, names):
        return pl.coalesce(c(n).replace_strict(list(names), list(range(1, len(names) + 1)), default=None,
                                               return_dtype=pl.Int64), pl.lit(0))
    dl = pl.when(c("delivery").is_null()).then(0).otherwise(
        pl.when(code("delivery", DELIVERY_MODES) == 0).then(3).otherwise(code("delivery", DELIVERY_MODES)))
    fin = pl.when(c("final").is_null()).then(0).when(c("final")).then(2).otherwise(1)
    v2 = (c(VERSION_COLUMN) >= TXN_VERSION).fill_null(False).cast(pl.Int64)
    tags = (code("type", TYPES) * (1 << TAG_SHIFT["type"]) + code("f", FS) * (1 << TAG_SHIFT["f"])
            + dl * (1 << TAG_SHIFT["delivery"]) + fin * (1 << TAG_SHIFT["final"])
            + v2 * (1 << TAG_SHIFT["v2"])).cast(pl.Int32)

    def h(n):
        return pl.when(c(n).is_not_null()).then(c(n).hash().reinterpret(signed=True))
    return ev.select(
        c("trace_id").hash().reinterpret(signed=True).alias("th"),
        pl.when(c("row") == 0).then(pl.lit(str(path))).alias("file"), tags.alias("tags"),
        "id", "process", h("topic").alias("tc"), "partition", h("value").alias("vh"), "offset", "offsets",
        c("values").list.eval(pl.element().hash().reinterpret(signed=True)).alias("vhs"), h("group").alias("group"),
        "generation", "mono_ns").to_arrow()


def test_lean_pass_flags_every_transactional_run(dataset, mined):
    _, mined = mined
    runs = pl.read_parquet(dataset / "runs")
    txn_ids = set(runs.filter(pl.col("producer") == TRANSACTIONAL).get_column("trace_id"))
    full = pl.read_parquet(mined / "verdicts.parquet")
    seen = 0
    for f in sorted((dataset / "events").rglob("*.parquet")):
        ev = pl.read_parquet(f)
        by_hash = dict(ev.select(pl.col("trace_id").hash().reinterpret(signed=True).alias("th"), "trace_id")
                       .unique().iter_rows())
        out = pl.from_arrow(screen_lean(decode_lean(_lean(f))))
        for th, status in out.select("th", "status").iter_rows():
            tid = by_hash[th]
            if tid in txn_ids:
                seen += 1
                assert status == FLAGGED, tid
            elif status != FLAGGED:     # decided in the lean pass: the full kernel's status
                assert status == full.filter(pl.col("trace_id") == tid).item(0, "status"), tid
    assert seen == len(txn_ids) > 50
