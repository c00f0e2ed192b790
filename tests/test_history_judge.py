"""The pipeline's object reader for flagged partitions (checkers/history/pipeline/judge.py):
`fields_hold` tests the reader's single-event rules (traces.history.check_event) on whole
columns, and the reader then skips them event by event; so `fields_hold` must be true only
of frames every row of which check_event accepts (held here row by row, on valid frames and
on frames with one field broken in each way check_event refuses), and to_histories must give
the reader's own History either way."""
import dataclasses

import polars as pl
import pytest

from checkers.history.generate import Params, generate
from checkers.history.pipeline.judge import ops_from_columns, fields_hold, to_histories
from checkers.history.seeding import SEEDABLE
from traces.history import FIELDS, HistoryError, check_event, history_events, write
from traces.history import pair as pair_events
from traces import history_columnar as hc


def _frame(tmp_path, seed=3):
    h = generate(Params(seed=seed, ops=300, partitions=2, consumers=2), {"poll-skip": 0.1})
    path = tmp_path / "h.parquet"
    write(path, h.header, history_events(h.ops))
    header, src, where = hc.read(str(path), None, None, lazy=True)
    ev = src.with_columns(pl.lit(0, pl.Int64).alias("run"), pl.col("row").alias("_i")).collect()
    return header, ev


def _rows_pass(ev: pl.DataFrame) -> bool:
    for r in ev.select(*FIELDS).iter_rows(named=True):
        try:
            check_event("", "", {n: v for n, v in r.items() if v is not None})
        except HistoryError:
            return False
    return True


# One broken field per case: each is a rule of check_event.
BROKEN = {
    "required id missing": lambda ev: ev.with_columns(pl.when(pl.col("row") == 5).then(None)
                                                      .otherwise(pl.col("id")).alias("id")),
    "unknown type": lambda ev: ev.with_columns(pl.when(pl.col("row") == 7).then(pl.lit("done"))
                                               .otherwise(pl.col("type")).alias("type")),
    "unknown f": lambda ev: ev.with_columns(pl.when(pl.col("row") == 9).then(pl.lit("fetch"))
                                            .otherwise(pl.col("f")).alias("f")),
    "negative offset": lambda ev: ev.with_columns(pl.when(pl.col("offset").is_not_null()
                                                          & (pl.col("row") > 20)).then(-1)
                                                  .otherwise(pl.col("offset")).alias("offset")),
    "negative offset in a list": lambda ev: ev.with_columns(
        pl.when(pl.col("offsets").list.len() > 0).then(pl.col("offsets").list.eval(pl.element() - 10_000))
        .otherwise(pl.col("offsets")).alias("offsets")),
    "null in values": lambda ev: ev.with_columns(
        pl.when(pl.col("values").list.len() > 0).then(pl.col("values").list.eval(
            pl.when(pl.element().cum_count() == 1).then(None).otherwise(pl.element())))
        .otherwise(pl.col("values")).alias("values")),
    "unknown delivery": lambda ev: ev.with_columns(pl.when(pl.col("row") == 3).then(pl.lit("twice"))
                                                   .otherwise(pl.col("delivery")).alias("delivery")),
    "offset as a string": lambda ev: ev.with_columns(pl.col("offset").cast(pl.String)),
    "final as an integer": lambda ev: ev.with_columns(pl.col("final").cast(pl.Int64)),
}


def test_fields_hold_on_a_valid_frame(tmp_path):
    _, ev = _frame(tmp_path)
    assert _rows_pass(ev)
    assert fields_hold(ev)


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_fields_hold_refuses_what_check_event_refuses(case, tmp_path):
    _, ev = _frame(tmp_path)
    bad = BROKEN[case](ev)
    assert not _rows_pass(bad), case         # the case does break a rule of the reader
    assert not fields_hold(bad), case


def _same_as_reader(header, ev):
    (h,) = to_histories(ev, {0: header}, "row", 1).values()
    evs = [(f"row {r['row'] + 1}", {n: r[n] for n in FIELDS if r[n] is not None})
           for r in ev.sort("_i").iter_rows(named=True)]
    ref = pair_events("", header, evs)
    assert len(h.ops) == len(ref.ops) > 20
    assert [dataclasses.astuple(o) for o in h.ops] == [dataclasses.astuple(o) for o in ref.ops]


def test_to_histories_is_the_readers_history(tmp_path):
    """The same operations (every field) as the object reader pairing the rows one by one."""
    header, ev = _frame(tmp_path)
    _same_as_reader(header, ev)


@pytest.mark.parametrize("kind", sorted(SEEDABLE))
def test_operations_from_columns_are_the_readers_for_every_kind(kind, tmp_path):
    """`ops_from_columns` (operations built from the paired columns) against the reader, on
    histories with each plantable anomaly (info and fail operations, commits, assigns,
    producer settings, final reads...)."""
    for seed in range(2):
        h = generate(Params(seed=seed, ops=400, partitions=1 + seed, consumers=1 + seed), {kind: 0.1})
        path = tmp_path / f"h{seed}.parquet"
        write(path, h.header, history_events(h.ops))
        header, src, _ = hc.read(str(path), None, None, lazy=True)
        ev = src.with_columns(pl.lit(0, pl.Int64).alias("run"), pl.col("row").alias("_i")).collect()
        assert ops_from_columns(ev, header, "row", 1) is not None
        _same_as_reader(header, ev)


def _edit(ev: pl.DataFrame, row: int, **vals) -> pl.DataFrame:
    return ev.with_columns(*[pl.when(pl.col("row") == row).then(pl.lit(v, dtype=ev.schema[n]))
                             .otherwise(pl.col(n)).alias(n) for n, v in vals.items()])


def _row_of(ev: pl.DataFrame, cond) -> int:
    return ev.filter(cond).get_column("row")[0]


# Broken relations between events (each a rule of traces.history.pair or its _make_op) that
# fields_hold cannot see: ops_from_columns must refuse them, and the reader then names the row.
def _swap_completion_before_invoke(ev):
    c = pl.col
    r = _row_of(ev, (c("f") == "send") & (c("type") == "ok"))
    oid = ev.filter(c("row") == r).get_column("id")[0]
    i = _row_of(ev, (c("id") == oid) & (c("type") == "invoke"))
    return ev.with_columns(pl.when(c("row") == r).then(pl.lit(i - 1, pl.UInt32)).otherwise(c("_i")).alias("_i")
                           if ev.schema["_i"] == pl.UInt32 else
                           pl.when(c("row") == r).then(i - 1).otherwise(c("_i")).alias("_i"))


RELATIONS = {
    "completed before its invoke": (_swap_completion_before_invoke, "without an invoke"),
    "a value sent twice": (lambda ev: _edit(ev, _row_of(ev.filter(pl.col("row") > 40), (pl.col("f") == "send") & (pl.col("type") == "invoke")),
                                            value=ev.filter((pl.col("f") == "send") & (pl.col("type") == "invoke")).get_column("value")[0],
                                            partition=ev.filter((pl.col("f") == "send") & (pl.col("type") == "invoke")).get_column("partition")[0]),
                           "already sent"),
    "an ok send without its offset": (lambda ev: _edit(ev, _row_of(ev, (pl.col("f") == "send") & (pl.col("type") == "ok")), offset=None),
                                      "must carry the acknowledged 'offset'"),
    "a completion restating another partition": (lambda ev: _edit(ev, _row_of(ev, (pl.col("f") == "send") & (pl.col("type") == "ok")), partition=7),
                                                 "does not say"),
    "a completion of another process": (lambda ev: _edit(ev, _row_of(ev, (pl.col("f") == "send") & (pl.col("type") == "ok")), process=999),
                                        "has process=999"),
}


@pytest.mark.parametrize("case", sorted(RELATIONS))
def test_operations_from_columns_refuse_what_the_reader_refuses(case, tmp_path):
    header, ev = _frame(tmp_path)
    broken, message = RELATIONS[case]
    bad = broken(ev)
    assert fields_hold(bad)
    assert ops_from_columns(bad, header, "row", 1) is None
    with pytest.raises(HistoryError, match=message):
        to_histories(bad, {0: header}, "row", 1)


def test_to_histories_still_names_a_broken_row(tmp_path):
    """A frame whose fields do not hold goes through check_event: the reader names the row."""
    header, ev = _frame(tmp_path)
    bad = BROKEN["unknown f"](ev)
    with pytest.raises(HistoryError, match="row 10.*unknown operation f='fetch'"):
        to_histories(bad, {0: header}, "row", 1)


def test_no_whole_history_objects_when_the_cycle_search_is_not_run(tmp_path, monkeypatch):
    """A partition not linearizable in a history above cycle_max_ops: the cycle search is not
    run (unknown, as the oracle says), so the pipeline builds objects of the flagged partition
    only, never of the whole history; the verdict is the oracle's."""
    from checkers.history.pipeline import judge
    from checkers.history.pipeline.file_check import check_file
    from checkers.history.oracle.check import check_history
    from traces.history import load
    h = generate(Params(seed=2, ops=1500, partitions=4, consumers=2), {"nonlinearizable": 0.01})
    path = tmp_path / "h.parquet"
    write(path, h.header, history_events(h.ops))
    built = []
    real = judge.to_histories

    def spy(ev, *a, **k):
        built.append(ev.height)
        return real(ev, *a, **k)
    monkeypatch.setattr(judge, "to_histories", spy)
    for limit, whole in ((10, False), (200_000, True)):
        built.clear()
        r = check_file(str(path), cycle_max_ops=limit)
        oracle = check_history(load(path), cycle_max_ops=limit)
        assert r.verdict.status == oracle.status and r.verdict.types() == oracle.types()
        assert [(c.name, c.status) for c in r.verdict.checks] == [(c.name, c.status) for c in oracle.checks]
        events = 2 * len(h.ops)
        assert built and built[0] < events // 2              # the flagged partition's rows
        assert (max(built) >= events - 10) == whole, (limit, built, events)
