"""The history format: lossless JSONL <-> Parquet, pairing, and every input error path with
its line or row number."""
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from checkers.history.generate import Params, generate
from traces import history as th


def _write_lines(path, lines, end="\n"):
    path.write_text("\n".join(lines) + end)
    return str(path)


HDR = json.dumps({"format": th.FORMAT, "version": 1})
INV = '{"id":1,"type":"invoke","process":0,"f":"send","topic":"t","partition":0,"value":"a","mono_ns":1}'
OK = '{"id":1,"type":"ok","process":0,"f":"send","offset":0,"mono_ns":2}'


def test_jsonl_parquet_round_trip_is_lossless(tmp_path):
    h = generate(Params(seed=3, ops=600), {"lost-write": 0.05, "send-reorder": 1.0})
    events = th.history_events(h.ops)
    j1, pq1, j2 = tmp_path / "a.jsonl", tmp_path / "a.parquet", tmp_path / "b.jsonl"
    th.write(j1, h.header, events)
    hdr, evs = th.read_events(j1)
    th.write(pq1, hdr, [e for _, e in evs])
    hdr2, evs2 = th.read_events(pq1)
    assert hdr2 == hdr == h.header
    assert [e for _, e in evs2] == [e for _, e in evs] == events
    th.write(j2, hdr2, [e for _, e in evs2])
    assert j2.read_bytes() == j1.read_bytes()
    # and the operations paired from either are the same
    a, b = th.load(j1), th.load(pq1)
    assert [o.describe() for o in a.ops] == [o.describe() for o in b.ops]
    assert any(o.type == "info" for o in a.ops) and any(o.end is None for o in a.ops)


def test_parquet_layout_one_history_per_file(tmp_path):
    """write_parquet's layout (docs/history-format.md): LZ4, the schema's columns, no trace_id
    column (the header's, in the metadata, names the history)."""
    h = generate(Params(seed=1, ops=200))
    p = tmp_path / "h.parquet"
    th.write(p, h.header, th.history_events(h.ops))
    f = pq.ParquetFile(p)
    t = f.read()
    assert t.column_names == list(th.FIELDS)
    assert json.loads(t.schema.metadata[th.PARQUET_META_KEY])["trace_id"] == "gen-1"
    assert t.schema.field("offsets").type == pa.list_(pa.int64())
    assert t.schema.field("mono_ns").type == pa.int64()
    assert {f.metadata.row_group(0).column(i).compression for i in range(t.num_columns)} == {"LZ4"}
    # A bulk reader takes the header's trace_id for every row.
    (tid, h2), = th.read_bulk_parquet(p)
    assert tid == "gen-1" and [o.describe() for o in h2.ops] == [o.describe() for o in h.ops]


def test_parquet_of_the_earlier_layout_still_reads(tmp_path):
    """Files written before the layout change (zstd, a trace_id column on every row) read as
    before, by the object reader and the columnar one, and check alike."""
    from checkers.history.pipeline.file_check import check_file
    from traces import history_columnar as hc
    h = generate(Params(seed=5, ops=400), {"lost-write": 0.05})
    events = th.history_events(h.ops)
    new, old = tmp_path / "new.parquet", tmp_path / "old.parquet"
    th.write(new, h.header, events)
    pq.write_table(th.events_to_table(h.header, events), old, compression="zstd")
    assert pq.read_schema(old).names[0] == "trace_id"
    assert th.read_events(old) == th.read_events(new)
    a, b = hc.read(str(old)), hc.read(str(new))
    assert a[1].equals(b[1]) and a[1].get_column("trace_id").unique().to_list() == [h.header["trace_id"]]
    ra, rb = check_file(str(old)), check_file(str(new))
    assert ra.engine == rb.engine == "columnar"
    assert ra.verdict.status == rb.verdict.status == "invalid"
    assert ra.verdict.types() == rb.verdict.types()


def test_pending_invoke_becomes_info(tmp_path):
    h = th.load(_write_lines(tmp_path / "h.jsonl", [HDR, INV]))
    assert len(h.ops) == 1 and h.ops[0].type == "info" and h.ops[0].comp is None


@pytest.mark.parametrize("lines,end,where,needle", [
    ([HDR, INV, OK[:-9]], "", "line 3", "truncated"),
    ([HDR, "{not json"], "\n", "line 2", "not valid JSON"),
    (['{"format":"kafkaverify-history","version":9}'], "\n", "line 1", "unsupported format version 9"),
    (['{"format":"other","version":1}'], "\n", "line 1", "not a kafkaverify-history file"),
    ([HDR, '{"id":1,"type":"invoke","process":0,"f":"send","mono_ns":1}'], "\n", "line 2", "lacks field(s) topic, partition, value"),
    ([HDR, '{"id":1,"type":"invoke","process":0,"f":"send"}'], "\n", "line 2", "missing field(s) mono_ns"),
    ([HDR, OK], "\n", "line 2", "completed without an invoke"),
    ([HDR, INV, OK, OK], "\n", "line 4", "completed twice"),
    ([HDR, INV, INV], "\n", "line 3", "invoked twice"),
    ([HDR, INV.replace('"value"', '"valeu"')], "\n", "line 2", "unknown field 'valeu'"),
    ([HDR, INV.replace('"partition":0', '"partition":"0"')], "\n", "line 2", "must be an integer"),
    ([HDR, INV.replace('"send"', '"produce"')], "\n", "line 2", "unknown operation f='produce'"),
    ([HDR, INV, OK.replace('"offset":0,', '')], "\n", "line 3", "must carry the acknowledged 'offset'"),
    ([HDR, INV, OK.replace('"mono_ns":2', '"mono_ns":0')], "\n", "line 3", "before it is invoked"),
    ([HDR, INV, OK.replace('"process":0', '"process":5')], "\n", "line 3", "has process=5"),
    ([HDR, INV, INV.replace('"id":1', '"id":2')], "\n", "line 3", "values must be unique"),
    ([HDR, INV, OK.replace('"offset":0', '"offset":0,"topic":"u"')], "\n", "line 3", "sets topic='u'"),
])
def test_bad_jsonl_input_names_the_line(tmp_path, lines, end, where, needle):
    path = _write_lines(tmp_path / "bad.jsonl", lines, end)
    with pytest.raises(th.HistoryError) as e:
        th.load(path)
    assert e.value.where == where, str(e.value)
    assert needle in str(e.value)


def test_empty_and_missing_files(tmp_path):
    (tmp_path / "e.jsonl").write_text("")
    with pytest.raises(th.HistoryError, match="empty file"):
        th.load(tmp_path / "e.jsonl")
    with pytest.raises(th.HistoryError, match="cannot open"):
        th.load(tmp_path / "nope.jsonl")
    with pytest.raises(th.HistoryError, match="cannot open"):
        th.load(tmp_path / "nope.parquet")
    (tmp_path / "x.parquet").write_text("not parquet")
    with pytest.raises(th.HistoryError, match="not a readable Parquet file"):
        th.load(tmp_path / "x.parquet")


def _parquet(tmp_path, events, header=None, **kw):
    header = header or th.make_header("t1")
    t = th.events_to_table(header, events)
    for k, v in kw.items():
        t = v(t)
    p = tmp_path / "h.parquet"
    pq.write_table(t, p)
    return p


def test_bad_parquet_input_names_the_row(tmp_path):
    inv, ok = json.loads(INV), json.loads(OK)
    p = _parquet(tmp_path, [inv, ok, ok])
    with pytest.raises(th.HistoryError) as e:
        th.load(p)
    assert e.value.where == "row 3" and "completed twice" in str(e.value)
    p = _parquet(tmp_path, [inv, dict(ok, offset=None)])
    with pytest.raises(th.HistoryError) as e:
        th.load(p)
    assert e.value.where == "row 2"
    p = _parquet(tmp_path, [inv, ok], header={"format": th.FORMAT, "version": 3})
    with pytest.raises(th.HistoryError, match="unsupported format version 3"):
        th.load(p)
    p = _parquet(tmp_path, [inv, ok], drop=lambda t: t.drop_columns(["mono_ns"]))
    with pytest.raises(th.HistoryError, match="missing column"):
        th.load(p)
    p = _parquet(tmp_path, [inv, ok], meta=lambda t: t.replace_schema_metadata({}))
    with pytest.raises(th.HistoryError, match="schema metadata"):
        th.load(p)
    t = th.events_to_table(th.make_header("a"), [inv, ok])
    t2 = t.set_column(0, "trace_id", pa.array(["a", "b"]))
    pq.write_table(t2, tmp_path / "two.parquet")
    with pytest.raises(th.HistoryError, match="holds 2 histories"):
        th.load(tmp_path / "two.parquet")


def test_documented_example_is_a_valid_history(tmp_path):
    """docs/history-format.md's example must stay true: it parses and checks valid."""
    from pathlib import Path

    from checkers.history.oracle.check import check_history
    doc = (Path(__file__).resolve().parents[1] / "docs" / "history-format.md").read_text()
    block = doc.split("## JSON lines (one run)")[1].split("```")[1].strip()
    p = tmp_path / "doc.jsonl"
    p.write_text(block + "\n")
    h = th.load(p)
    assert len(h.ops) == 6
    v = check_history(h)
    assert v.status == "valid", [(c.name, c.status, c.reason) for c in v.checks]


def test_bulk_parquet_holds_many_histories(tmp_path):
    from checkers.history.oracle.check import check_history
    hs = [generate(Params(seed=s, ops=300), {"lost-write": 0.05} if s == 2 else None) for s in (1, 2, 3)]
    p = tmp_path / "bulk.parquet"
    th.write_bulk_parquet(p, [(h.header, th.history_events(h.ops)) for h in hs])
    got = list(th.read_bulk_parquet(p))
    assert [tid for tid, _ in got] == ["gen-1", "gen-2", "gen-3"]
    for (tid, h2), h in zip(got, hs):
        assert [o.describe() for o in h2.ops] == [o.describe() for o in h.ops]
        assert check_history(h2).status == check_history(h).status
    assert check_history(got[1][1]).status == "invalid"
    with pytest.raises(th.HistoryError, match="holds 3 histories"):
        th.load(p)
